/* Internal structures of supervisor/anomaly: compiled rules, searches, values and correlation state. */
#ifndef DOME_ANOMALY_INTERNAL_H
#define DOME_ANOMALY_INTERNAL_H

#include <stdatomic.h>
#include <stdint.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "supervisor/anomaly/anomaly.h"

/* Pattern tokens: 0..255 a byte (lowered unless cased), then the wildcards. */
enum { TOKEN_STAR = 256, TOKEN_ONE, TOKEN_DASH };

enum value_kind {
  VALUE_NULL,     /* missing member or JSON null */
  VALUE_PATTERN,  /* string with wildcards (tokens) */
  VALUE_NUMBER,   /* plain YAML number: equal numbers, or the same decimal text */
  VALUE_BOOLEAN,  /* plain YAML boolean */
  VALUE_COMPARE,  /* gt/gte/lt/lte against a number */
  VALUE_REGEX,    /* re */
  VALUE_CIDR,     /* cidr */
  VALUE_FIELDREF, /* fieldref: equal to another member */
};

enum compare_op { COMPARE_GT, COMPARE_GTE, COMPARE_LT, COMPARE_LTE };
enum time_part { TIME_NONE, TIME_MINUTE, TIME_HOUR, TIME_DAY, TIME_WEEK, TIME_MONTH, TIME_YEAR };

struct value {
  enum value_kind kind;
  bool cased;
  uint16_t *tokens; /* VALUE_PATTERN, VALUE_NUMBER (its text) */
  size_t token_count;
  /* VALUE_PATTERN without wildcards but a leading/trailing star: matched by a literal comparison of
   * `literal` (lowered unless cased), SHAPE_GENERAL otherwise. */
  enum { SHAPE_GENERAL, SHAPE_EXACT, SHAPE_PREFIX, SHAPE_SUFFIX, SHAPE_CONTAINS } shape;
  unsigned char *literal;
  size_t literal_length;
  bool literal_has_nul;
  uint16_t *variant_tokens[2]; /* base64offset: the two other alignments (one of the three matches) */
  size_t variant_counts[2];
  double number; /* VALUE_NUMBER, VALUE_COMPARE */
  enum compare_op op;
  bool boolean;
  pcre2_code *regex;
  int family; /* VALUE_CIDR: 4 or 6 */
  unsigned char network[16];
  unsigned prefix;
  char *field; /* VALUE_FIELDREF */
};

struct field_test {
  char *field; /* NULL: keyword (any string member of the event) */
  size_t field_length;
  bool all;    /* every value must match (else one) */
  bool negate; /* neq: no value matches */
  bool exists_test, exists;
  enum time_part time_part;
  struct value *values;
  size_t value_count;
};

/* One alternative of a search: every test matches. */
struct conjunction {
  struct field_test *tests;
  size_t test_count;
};

struct search {
  char *name;
  struct conjunction *alternatives; /* one matches */
  size_t alternative_count;
};

enum node_kind { NODE_SEARCH, NODE_AND, NODE_OR, NODE_NOT, NODE_ONE_OF, NODE_ALL_OF };

struct condition {
  enum node_kind kind;
  struct condition *left, *right; /* AND/OR: both; NOT: left */
  size_t *searches;               /* SEARCH: one; ONE_OF/ALL_OF: the matching searches */
  size_t search_count;
};

enum rule_kind {
  RULE_DETECTION,
  RULE_EVENT_COUNT,
  RULE_VALUE_COUNT,
  RULE_TEMPORAL,
  RULE_TEMPORAL_ORDERED,
  RULE_VALUE_SUM,
  RULE_VALUE_AVG,
};

struct count_condition {
  bool has_gt, has_gte, has_lt, has_lte, has_eq, has_neq;
  int64_t gt, gte, lt, lte, eq, neq;
};

struct alias {
  char *name;
  size_t count;
  char **rule_names, **fields;
};

struct rule {
  enum rule_kind kind;
  char *id, *name, *title, *status, *file;
  anomaly_level level;
  bool level_given;
  json_t *tags; /* array of strings */
  bool active;  /* logsource is dome's journal (correlations: one referenced rule is active) */
  bool emits;   /* alerts on its own: not referenced by a correlation, or one says generate */
  /* detection */
  struct search *searches;
  size_t search_count;
  struct condition **conditions; /* a list is OR */
  size_t condition_count;
  /* correlation */
  char **references;
  size_t reference_count;
  size_t *referenced; /* rule indices */
  char **group_by;
  size_t group_by_count;
  bool group_by_agent;
  struct alias *aliases;
  size_t alias_count;
  int64_t timespan_ns;
  struct count_condition condition;
  char **value_fields;
  size_t value_field_count;
  bool generate;
  unsigned line, column; /* of the rule's document, for problems found after parsing */
  /* rules (correlations) that reference this one */
  size_t *dependents;
  size_t dependent_count;
};

struct anomaly_rule_set {
  atomic_int references;
  struct rule *rules;
  size_t rule_count;
  size_t active_count;
  char digest[65];
  size_t *detections; /* indices of the active detection rules, in load order */
  size_t detection_count;
};

struct anomaly_loader {
  struct rule *rules;
  size_t rule_count, rule_capacity;
  json_t *problems;
  void *digest_state; /* crypto_hash_sha256_state */
};

/* The matchers' working memory, one per engine (one thread): PCRE2's match data, and the case-folded
 * copies of the texts one event's case-insensitive `contains` values search — each text is folded once
 * per event however many values search it (`generation` counts events; a copy of an older generation is
 * never used, so a freed and reused string cannot hit). */
#define ANOMALY_FOLDED_TEXTS 8
struct anomaly_folded_text {
  const char *text;
  size_t length;
  uint64_t generation;
  char *folded; /* length bytes, capacity allocated */
  size_t capacity;
};
struct anomaly_scratch {
  pcre2_match_data *match_data;
  uint64_t generation;
  unsigned next; /* the copy a new text takes */
  struct anomaly_folded_text folded[ANOMALY_FOLDED_TEXTS];
};
/* Free the folded copies (not match_data). */
void anomaly_scratch_release(struct anomaly_scratch *scratch);

/* value.c */
int anomaly_pattern_compile(const char *text, size_t length, bool cased, bool windash, bool literal,
                            uint16_t **tokens, size_t *count);
bool anomaly_pattern_match(const uint16_t *tokens, size_t count, const char *subject, size_t length,
                           bool cased);
bool anomaly_value_match(const struct value *value, const json_t *member, const json_t *event,
                         struct anomaly_scratch *scratch);
void anomaly_value_clear(struct value *value);
/* Classify a compiled VALUE_PATTERN for the literal fast paths (value->shape). */
void anomaly_value_shape(struct value *value);
const json_t *anomaly_lookup(const json_t *event, const char *field, size_t length);
/* Call `each` on every member `field` names (through lists of objects: one a list element); true as
 * soon as one call returns true. */
bool anomaly_lookup_each(const json_t *event, const char *field, size_t length,
                         bool (*each)(const json_t *member, void *context), void *context);
int anomaly_base64_encode(const unsigned char *data, size_t length, char **out, size_t *out_length);

/* condition.c: parse `text` against the rule's searches. On error returns -EINVAL with *offset the
 * byte offset of the problem in text and *message set. */
int anomaly_condition_parse(const char *text, const struct search *searches, size_t search_count,
                            struct condition **out, size_t *offset, char *message, size_t message_size);
void anomaly_condition_free(struct condition *condition);
/* results: per search -1 unknown, 0, 1 (filled lazily). */
bool anomaly_condition_eval(const struct condition *condition, const struct rule *rule, const json_t *event,
                            signed char *results, struct anomaly_scratch *scratch);
bool anomaly_search_match(const struct search *search, const json_t *event, struct anomaly_scratch *scratch);

void anomaly_rule_clear(struct rule *rule);

#endif
