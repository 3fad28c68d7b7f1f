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
  /* SHAPE_CONTAINS, case-insensitive: 1 + the index of the set's automaton that finds `literal` (as its
   * literal `literal_index`) together with the other such values of the field; 0 when none does. */
  size_t automaton;
  size_t literal_index;
  /* VALUE_REGEX: its text, and (index.c) literals one of which every match holds, found by the
   * field's automaton: a string that holds none of them is not matched against the expression */
  char *source;
  size_t source_length;
  struct required_literal {
    unsigned char *text; /* folded */
    size_t length;
    size_t index; /* in the automaton */
  } * required;
  size_t required_count;
};

struct type_candidates;

struct field_test {
  char *field; /* NULL: keyword (any string member of the event) */
  size_t field_length;
  bool all;    /* every value must match (else one) */
  bool negate; /* neq: no value matches */
  bool exists_test, exists;
  enum time_part time_part;
  struct value *values;
  size_t value_count;
  /* index.c: when every value is a contains literal of one automaton (1 + its index; 0: not so), the
   * bits of their literals: a string matches when it holds one of them (all of them with `all`) */
  size_t automaton;
  uint64_t *literal_mask;
  /* index.c: 1 + the index of `field` in the set's fields when it holds no dot (a top-level member,
   * looked up once per event), 0 otherwise */
  size_t field_id;
  /* index.c: an exact, case-insensitive `type` test: the type table's slots of its values (the test
   * holds for a string type exactly when the event's slot is one of them) */
  const struct type_candidates **type_slots;
  size_t type_slot_count;
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

/* A multi-literal automaton (Aho-Corasick, "Efficient string matching", CACM 18(6), 1975) over
 * ASCII-folded bytes: one pass over a text finds which of its literals occur in it. */
struct anomaly_automaton {
  size_t state_count, class_count, literal_count;
  unsigned char classes[256]; /* byte -> class (a letter and its capital share one; 0: no literal has it) */
  uint32_t *next;             /* state_count x class_count transitions (failures folded in) */
  int32_t *terminal;          /* the literal ending at the state, -1 none */
  int32_t *first_output;      /* the state itself or the nearest down its failure chain with a terminal */
  int32_t *output_link;       /* from a terminal state: the next one down the failure chain, -1 none */
};

/* The detection rules that can match an event of one `type` (folded), in load order: those whose
 * condition requires one of a list of exact `type` values that holds it. */
struct type_candidates {
  unsigned char *type; /* NULL: an empty slot */
  size_t length;
  uint64_t hash;
  size_t *rules;
  size_t count;
};

struct anomaly_rule_set {
  atomic_int references;
  struct rule *rules;
  size_t rule_count;
  size_t active_count;
  char digest[65];
  size_t *detections; /* indices of the active detection rules, in load order */
  size_t detection_count;
  /* index.c: typed candidates by type (open addressing, typed_slots a power of two), the rules that
   * require no known type (candidates for every event), and the contains automata */
  struct type_candidates *typed;
  size_t typed_slots;
  size_t *untyped;
  size_t untyped_count;
  struct anomaly_automaton *automata;
  size_t automaton_count;
  char **fields; /* the top-level members the active detection rules test */
  size_t field_count;
  size_t type_field; /* 1 + the index of `type` in fields, 0 when no rule tests it */
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
/* Which literals of an automaton the last string it scanned holds (that string's bytes and its
 * event's generation; only strings of the event's members, whose bytes stay put during the event). */
struct anomaly_automaton_hits {
  const char *text;
  size_t length;
  uint64_t generation;
  uint64_t *bits; /* one bit a literal */
};
struct anomaly_scratch {
  pcre2_match_data *match_data;
  uint64_t generation;
  unsigned next; /* the copy a new text takes */
  struct anomaly_folded_text folded[ANOMALY_FOLDED_TEXTS];
  const struct anomaly_automaton *automata; /* the set's */
  struct anomaly_automaton_hits *hits;      /* one an automaton */
  size_t automaton_count;
  /* the event's `type` (for generation type_generation): TYPE_OTHER (an array, a number: the tests
   * read it themselves), TYPE_STRING (type_slot its slot in the set's table, NULL: in none), TYPE_NONE
   * (missing or null) */
  uint64_t type_generation;
  enum { TYPE_OTHER, TYPE_STRING, TYPE_NONE } type_kind;
  const struct type_candidates *type_slot;
  const json_t **members;       /* the event's member of each of the set's fields (NULL: missing) */
  uint64_t *member_generations; /* the event (generation) each was looked up for */
  size_t field_count;
};
/* Free the folded copies and the automata's hits (not match_data). */
void anomaly_scratch_release(struct anomaly_scratch *scratch);
/* Make room for the set's automata's hits. Returns 0 or -ENOMEM. */
int anomaly_scratch_prepare(struct anomaly_scratch *scratch, const anomaly_rule_set *set);

/* index.c: build the set's type candidates and automata (once, when the set is made; values get their
 * automaton). Returns 0 or -ENOMEM (the set then evaluates every detection rule, as it would anyway). */
int anomaly_index_build(anomaly_rule_set *set);
void anomaly_index_free(anomaly_rule_set *set);
/* The detection rules an event whose `type` member is `type` (`slot`: anomaly_index_type_slot's) may
 * match, in load order: *typed (for a string type) merged with *untyped; every active detection rule
 * in *typed when the member is neither a string nor missing/null (the matcher reads an array or a
 * number too). */
void anomaly_index_candidates(const anomaly_rule_set *set, const json_t *type,
                              const struct type_candidates *slot, const size_t **typed, size_t *typed_count,
                              const size_t **untyped, size_t *untyped_count);
/* The table's slot of a string `type` (NULL: no rule tests that type), or NULL; `slot` above. */
const struct type_candidates *anomaly_index_type_slot(const anomaly_rule_set *set, const json_t *type);
/* value.c: the literals of automaton `automaton` (1 + index) that the event string `text` holds, scanned
 * once per event and string. */
const uint64_t *anomaly_automaton_hits(size_t automaton, const char *text, size_t length,
                                       struct anomaly_scratch *scratch);
/* Set in `bits` (literal_count bits, cleared first) the literals of `a` that occur in the text. */
void anomaly_automaton_scan(const struct anomaly_automaton *a, const char *text, size_t length,
                            uint64_t *bits);

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
