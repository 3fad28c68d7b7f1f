/* The condition of a Sigma detection (sigma-rules-specification.md "Condition"): search identifiers,
 * `and`, `or`, `not` (precedence not > and > or), parentheses, `1 of X` / `all of X` where X is a
 * search identifier, a pattern with `*`, or `them` (every search not starting with `_`). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "supervisor/anomaly/anomaly_internal.h"

struct parser {
  const char *text;
  size_t position;
  const struct search *searches;
  size_t search_count;
  size_t error_offset;
  char *message;
  size_t message_size;
  bool failed;
  int depth;
};

struct token {
  size_t start, length;
  bool open, close, end;
};

static struct token peek(struct parser *p) {
  size_t i = p->position;
  while (p->text[i] == ' ' || p->text[i] == '\t' || p->text[i] == '\n' || p->text[i] == '\r') i++;
  struct token t = {.start = i};
  if (p->text[i] == '\0') {
    t.end = true;
    return t;
  }
  if (p->text[i] == '(' || p->text[i] == ')') {
    t.open = p->text[i] == '(';
    t.close = !t.open;
    t.length = 1;
    return t;
  }
  size_t j = i;
  while (p->text[j] && p->text[j] != ' ' && p->text[j] != '\t' && p->text[j] != '\n' && p->text[j] != '\r' &&
         p->text[j] != '(' && p->text[j] != ')')
    j++;
  t.length = j - i;
  return t;
}

static void advance(struct parser *p, struct token t) {
  p->position = t.start + t.length;
}

static bool is_word(struct parser *p, struct token t, const char *word) {
  return !t.end && !t.open && !t.close && t.length == strlen(word) &&
         strncasecmp(p->text + t.start, word, t.length) == 0;
}

static struct condition *fail(struct parser *p, size_t offset, const char *format, const char *detail,
                              size_t detail_length) {
  if (!p->failed) {
    p->failed = true;
    p->error_offset = offset;
    snprintf(p->message, p->message_size, format, (int)detail_length, detail);
  }
  return NULL;
}

static struct condition *node(enum node_kind kind, struct condition *left, struct condition *right) {
  struct condition *c = calloc(1, sizeof *c);
  if (c == NULL) {
    anomaly_condition_free(left);
    anomaly_condition_free(right);
    return NULL;
  }
  c->kind = kind;
  c->left = left;
  c->right = right;
  return c;
}

static bool name_matches(const char *pattern, size_t length, const char *name) {
  uint16_t *tokens;
  size_t count;
  if (anomaly_pattern_compile(pattern, length, true, false, false, &tokens, &count) < 0) return false;
  bool match = anomaly_pattern_match(tokens, count, name, strlen(name), true);
  free(tokens);
  return match;
}

static struct condition *parse_or(struct parser *p);

static struct condition *parse_quantifier(struct parser *p, bool all, struct token quantifier) {
  struct token of = peek(p);
  if (!is_word(p, of, "of"))
    return fail(p, of.start, "expected `of` after `%.*s`", p->text + quantifier.start, quantifier.length);
  advance(p, of);
  struct token target = peek(p);
  if (target.end || target.open || target.close)
    return fail(p, target.start, "expected a search identifier, a pattern or `them` after `of`%.*s", "", 0);
  advance(p, target);
  struct condition *c = node(all ? NODE_ALL_OF : NODE_ONE_OF, NULL, NULL);
  if (c == NULL) return fail(p, target.start, "out of memory%.*s", "", 0);
  c->searches = calloc(p->search_count + 1, sizeof *c->searches);
  if (c->searches == NULL) {
    free(c);
    return fail(p, target.start, "out of memory%.*s", "", 0);
  }
  bool them = is_word(p, target, "them");
  for (size_t i = 0; i < p->search_count; i++) {
    const char *name = p->searches[i].name;
    if (them ? name[0] != '_' : name_matches(p->text + target.start, target.length, name))
      c->searches[c->search_count++] = i;
  }
  if (c->search_count == 0) {
    anomaly_condition_free(c);
    return fail(p, target.start, "`%.*s` names no search of the detection", p->text + target.start,
                target.length);
  }
  return c;
}

static struct condition *parse_primary(struct parser *p) {
  struct token t = peek(p);
  if (t.end) return fail(p, t.start, "condition ends where a search identifier was expected%.*s", "", 0);
  if (t.close) return fail(p, t.start, "unexpected `)`%.*s", "", 0);
  if (t.open) {
    advance(p, t);
    if (++p->depth > 64) return fail(p, t.start, "parentheses nested deeper than 64%.*s", "", 0);
    struct condition *inner = parse_or(p);
    p->depth--;
    if (inner == NULL) return NULL;
    struct token close = peek(p);
    if (!close.close) {
      anomaly_condition_free(inner);
      return fail(p, close.start, "expected `)` (opened at offset %.*s)", "", 0);
    }
    advance(p, close);
    return inner;
  }
  if (is_word(p, t, "not")) {
    advance(p, t);
    if (++p->depth > 64) return fail(p, t.start, "`not` nested deeper than 64%.*s", "", 0);
    struct condition *operand = parse_primary(p);
    p->depth--;
    return operand ? node(NODE_NOT, operand, NULL) : NULL;
  }
  if (is_word(p, t, "all") || is_word(p, t, "any") || is_word(p, t, "1")) {
    advance(p, t);
    return parse_quantifier(p, is_word(p, t, "all"), t);
  }
  const char *word = p->text + t.start;
  if (t.length > 0 && word[0] >= '0' && word[0] <= '9' &&
      is_word(p, peek(&(struct parser){.text = p->text, .position = t.start + t.length}), "of"))
    return fail(p, t.start, "`%.*s of`: only `1 of` and `all of` are defined", word, t.length);
  if (memchr(word, '|', t.length))
    return fail(p, t.start,
                "`%.*s`: aggregation expressions are not part of Sigma 2 (use a correlation rule)", word,
                t.length);
  if (is_word(p, t, "and") || is_word(p, t, "or") || is_word(p, t, "of") || is_word(p, t, "them"))
    return fail(p, t.start, "`%.*s` where a search identifier was expected", word, t.length);
  for (size_t i = 0; i < p->search_count; i++) {
    if (strlen(p->searches[i].name) == t.length && memcmp(p->searches[i].name, word, t.length) == 0) {
      advance(p, t);
      struct condition *c = node(NODE_SEARCH, NULL, NULL);
      if (c == NULL || (c->searches = malloc(sizeof *c->searches)) == NULL) {
        free(c);
        return fail(p, t.start, "out of memory%.*s", "", 0);
      }
      c->searches[0] = i;
      c->search_count = 1;
      return c;
    }
  }
  return fail(p, t.start, "`%.*s` is not a search identifier of the detection", word, t.length);
}

static struct condition *parse_and(struct parser *p) {
  struct condition *left = parse_primary(p);
  while (left) {
    struct token t = peek(p);
    if (!is_word(p, t, "and")) break;
    advance(p, t);
    struct condition *right = parse_primary(p);
    if (right == NULL) {
      anomaly_condition_free(left);
      return NULL;
    }
    left = node(NODE_AND, left, right);
  }
  return left;
}

static struct condition *parse_or(struct parser *p) {
  struct condition *left = parse_and(p);
  while (left) {
    struct token t = peek(p);
    if (!is_word(p, t, "or")) break;
    advance(p, t);
    struct condition *right = parse_and(p);
    if (right == NULL) {
      anomaly_condition_free(left);
      return NULL;
    }
    left = node(NODE_OR, left, right);
  }
  return left;
}

int anomaly_condition_parse(const char *text, const struct search *searches, size_t search_count,
                            struct condition **out, size_t *offset, char *message, size_t message_size) {
  struct parser p = {.text = text,
                     .searches = searches,
                     .search_count = search_count,
                     .message = message,
                     .message_size = message_size};
  struct condition *c = parse_or(&p);
  if (c && !p.failed) {
    struct token t = peek(&p);
    if (!t.end) {
      anomaly_condition_free(c);
      c = text[t.start] == '|'
              ? fail(&p, t.start,
                     "`%.*s`: aggregation expressions are not part of Sigma 2 (use a correlation rule)",
                     text + t.start, t.length)
              : fail(&p, t.start, "unexpected `%.*s` after a complete condition", text + t.start,
                     t.length ? t.length : 1);
    }
  }
  if (c == NULL) {
    if (!p.failed) fail(&p, p.position, "out of memory%.*s", "", 0);
    *offset = p.error_offset;
    return -EINVAL;
  }
  *out = c;
  return 0;
}

void anomaly_condition_free(struct condition *condition) {
  if (condition == NULL) return;
  anomaly_condition_free(condition->left);
  anomaly_condition_free(condition->right);
  free(condition->searches);
  free(condition);
}

/* Component of an RFC 3339 time text ("2026-12-01T23:40:05..."), or false. */
static bool time_component(const json_t *member, enum time_part part, double *number) {
  const char *t = json_string_value(member);
  if (t == NULL || json_string_length(member) < 16) return false;
  int year, month, day, hour, minute;
  if (sscanf(t, "%4d-%2d-%2dT%2d:%2d", &year, &month, &day, &hour, &minute) != 5) return false;
  switch (part) {
    case TIME_MINUTE:
      *number = minute;
      return true;
    case TIME_HOUR:
      *number = hour;
      return true;
    case TIME_DAY:
      *number = day;
      return true;
    case TIME_MONTH:
      *number = month;
      return true;
    case TIME_YEAR:
      *number = year;
      return true;
    case TIME_WEEK: {
      static const int before[] = {0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334};
      int leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
      int yday = before[(month - 1) % 12] + day + (month > 2 ? leap : 0);
      *number = (yday - 1) / 7 + 1;
      return true;
    }
    default:
      return false;
  }
}

static bool any_string_matches(const json_t *json, const struct value *value,
                               struct anomaly_scratch *scratch) {
  if (json_is_string(json)) return anomaly_value_match(value, json, NULL, scratch);
  const json_t *child;
  if (json_is_object(json)) {
    const char *key;
    json_object_foreach((json_t *)json, key,
                        child) if (any_string_matches(child, value, scratch)) return true;
  } else if (json_is_array(json)) {
    size_t i;
    json_array_foreach(json, i, child) if (any_string_matches(child, value, scratch)) return true;
  }
  return false;
}

static bool values_match(const struct field_test *test, const json_t *member, const json_t *event,
                         struct anomaly_scratch *scratch);

struct each_context {
  const struct field_test *test;
  const json_t *event;
  struct anomaly_scratch *scratch;
  bool found;
};

static bool each_member(const json_t *member, void *context) {
  struct each_context *c = context;
  c->found = true;
  return values_match(c->test, member, c->event, c->scratch);
}

/* The event's top-level member `test->field`, looked up once per event. */
static const json_t *top_level_member(const struct field_test *test, const json_t *event,
                                      struct anomaly_scratch *scratch) {
  size_t i = test->field_id - 1;
  if (scratch->member_generations[i] != scratch->generation) {
    scratch->members[i] =
        json_is_object(event) ? json_object_getn(event, test->field, test->field_length) : NULL;
    scratch->member_generations[i] = scratch->generation;
  }
  return scratch->members[i];
}

static bool test_match(const struct field_test *test, const json_t *event, struct anomaly_scratch *scratch) {
  if (test->type_slot_count && scratch && scratch->type_generation == scratch->generation &&
      scratch->type_kind != TYPE_OTHER) { /* an exact type test: the event type's slot answers */
    if (scratch->type_kind == TYPE_NONE || scratch->type_slot == NULL) return false;
    for (size_t i = 0; i < test->type_slot_count; i++)
      if (test->type_slots[i] == scratch->type_slot) return true;
    return false;
  }
  if (test->field_id && scratch && scratch->members) { /* no dot: the member itself, or missing (null) */
    const json_t *member = top_level_member(test, event, scratch);
    if (test->exists_test) return (member != NULL) == test->exists;
    return values_match(test, member, event, scratch);
  }
  if (test->field == NULL) {
    bool any = false;
    for (size_t i = 0; i < test->value_count; i++) {
      bool hit = any_string_matches(event, &test->values[i], scratch);
      if (test->all && !hit) return false;
      if (hit) any = true;
      if (hit && !test->all) break;
    }
    return test->negate ? !any : any;
  }
  if (test->exists_test || test->negate) {
    const json_t *member = anomaly_lookup(event, test->field, test->field_length);
    if (test->exists_test) return (member != NULL) == test->exists;
    return values_match(test, member, event, scratch);
  }
  struct each_context context = {test, event, scratch, false};
  if (anomaly_lookup_each(event, test->field, test->field_length, each_member, &context)) return true;
  return !context.found && values_match(test, NULL, event, scratch); /* a missing member: `null` */
}

static bool values_match(const struct field_test *test, const json_t *member, const json_t *event,
                         struct anomaly_scratch *scratch) {
  if (test->automaton && json_is_string(member) && scratch && scratch->hits && !test->negate &&
      test->time_part == TIME_NONE) { /* every value a literal of one automaton: its hits answer */
    const struct anomaly_automaton *a = &scratch->automata[test->automaton - 1];
    const uint64_t *bits = anomaly_automaton_hits(test->automaton, json_string_value(member),
                                                  json_string_length(member), scratch);
    bool any = false, every = true;
    for (size_t w = 0; w < (a->literal_count + 63) / 64; w++) {
      any |= (bits[w] & test->literal_mask[w]) != 0;
      every &= (bits[w] & test->literal_mask[w]) == test->literal_mask[w];
    }
    return test->all ? every : any;
  }
  json_t *derived = NULL;
  if (test->time_part != TIME_NONE) {
    double number;
    if (member == NULL || !time_component(member, test->time_part, &number)) return test->negate;
    member = derived = json_real(number);
  }
  /* neq: differs from every value; all: matches every value; else: matches one value. */
  bool result = test->all && !test->negate;
  for (size_t i = 0; i < test->value_count; i++) {
    bool hit = anomaly_value_match(&test->values[i], member, event, scratch);
    if (test->negate && hit) {
      result = false;
      break;
    }
    if (test->negate) {
      result = true;
    } else if (test->all && !hit) {
      result = false;
      break;
    } else if (!test->all && hit) {
      result = true;
      break;
    }
  }
  json_decref(derived);
  return result;
}

bool anomaly_search_match(const struct search *search, const json_t *event, struct anomaly_scratch *scratch) {
  for (size_t a = 0; a < search->alternative_count; a++) {
    const struct conjunction *c = &search->alternatives[a];
    size_t t = 0;
    while (t < c->test_count && test_match(&c->tests[t], event, scratch)) t++;
    if (t == c->test_count) return true;
  }
  return false;
}

static bool search_result(size_t index, const struct rule *rule, const json_t *event, signed char *results,
                          struct anomaly_scratch *scratch) {
  if (results[index] < 0) results[index] = anomaly_search_match(&rule->searches[index], event, scratch);
  return results[index] == 1;
}

bool anomaly_condition_eval(const struct condition *c, const struct rule *rule, const json_t *event,
                            signed char *results, struct anomaly_scratch *scratch) {
  switch (c->kind) {
    case NODE_SEARCH:
      return search_result(c->searches[0], rule, event, results, scratch);
    case NODE_AND:
      return anomaly_condition_eval(c->left, rule, event, results, scratch) &&
             anomaly_condition_eval(c->right, rule, event, results, scratch);
    case NODE_OR:
      return anomaly_condition_eval(c->left, rule, event, results, scratch) ||
             anomaly_condition_eval(c->right, rule, event, results, scratch);
    case NODE_NOT:
      return !anomaly_condition_eval(c->left, rule, event, results, scratch);
    case NODE_ONE_OF:
      for (size_t i = 0; i < c->search_count; i++)
        if (search_result(c->searches[i], rule, event, results, scratch)) return true;
      return false;
    case NODE_ALL_OF:
      for (size_t i = 0; i < c->search_count; i++)
        if (!search_result(c->searches[i], rule, event, results, scratch)) return false;
      return true;
  }
  return false;
}
