/* The rule set's evaluation index, built once when the set is made:
 * - candidate detection rules by event `type`. A rule whose condition can only hold for an event whose
 *   `type` equals one of a list of plain values (an exact, case-insensitive `type` test that every
 *   alternative of a required search holds) is a candidate for events of those types only; a rule
 *   whose condition requires no known type is a candidate for every event. The types are compared as
 *   the matcher compares an exact string: whole length, ASCII letters folded, other bytes as they are.
 * - multi-literal automata for the case-insensitive `contains` values of one field: one pass over a
 *   string finds every literal of the field's values that occurs in it (value.c asks the automaton's
 *   hits instead of searching the string once a value). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "supervisor/anomaly/anomaly_internal.h"

/* Largest transition table of one automaton (entries); a field whose literals need more is searched
 * one value at a time. */
#define MAX_AUTOMATON_ENTRIES (1u << 22)

static unsigned char fold(unsigned char c) {
  return c >= 'A' && c <= 'Z' ? (unsigned char)(c + 32) : c;
}

/* FNV-1a over the length and the folded bytes of at most the first 16 and the last 8 (a collision
 * only costs a comparison). */
static uint64_t folded_hash(const unsigned char *text, size_t length) {
  uint64_t h = (1469598103934665603u ^ length) * 1099511628211u;
  for (size_t i = 0; i < length && i < 16; i++) h = (h ^ fold(text[i])) * 1099511628211u;
  for (size_t i = length > 24 ? length - 8 : 16; i < length; i++) h = (h ^ fold(text[i])) * 1099511628211u;
  return h;
}

/* ---- the types a condition requires ---- */

struct type_text {
  const unsigned char *bytes; /* a value's literal: folded */
  size_t length;
};

/* known false: the condition may hold whatever the type (then count is 0). */
struct type_list {
  bool known;
  bool failed; /* out of memory: treated as unknown */
  size_t count;
  struct type_text *items;
};

static bool same_type(struct type_text a, struct type_text b) {
  return a.length == b.length && memcmp(a.bytes, b.bytes, a.length) == 0;
}

static void list_add(struct type_list *l, struct type_text t) {
  for (size_t i = 0; i < l->count; i++)
    if (same_type(l->items[i], t)) return;
  struct type_text *grown = realloc(l->items, (l->count + 1) * sizeof *grown);
  if (grown == NULL) {
    l->failed = true;
    return;
  }
  l->items = grown;
  l->items[l->count++] = t;
}

static struct type_list unknown(void) {
  return (struct type_list){.known = false};
}

static struct type_list list_union(struct type_list a, struct type_list b) {
  if (!a.known || !b.known || a.failed || b.failed) {
    free(a.items);
    free(b.items);
    return unknown();
  }
  for (size_t i = 0; i < b.count; i++) list_add(&a, b.items[i]);
  free(b.items);
  if (a.failed) {
    free(a.items);
    return unknown();
  }
  return a;
}

static struct type_list list_intersection(struct type_list a, struct type_list b) {
  if (a.failed || !a.known) {
    free(a.items);
    return b;
  }
  if (b.failed || !b.known) {
    free(b.items);
    return a;
  }
  size_t kept = 0;
  for (size_t i = 0; i < a.count; i++) {
    bool in_b = false;
    for (size_t k = 0; k < b.count && !in_b; k++) in_b = same_type(a.items[i], b.items[k]);
    if (in_b) a.items[kept++] = a.items[i];
  }
  a.count = kept;
  free(b.items);
  return a;
}

/* An exact, case-insensitive test of `type` (one of its values equals the member). */
static bool plain_type_test(const struct field_test *test) {
  if (test->field == NULL || strcmp(test->field, "type") != 0 || test->negate || test->exists_test ||
      test->all || test->time_part != TIME_NONE || test->value_count == 0)
    return false;
  for (size_t v = 0; v < test->value_count; v++) {
    const struct value *value = &test->values[v];
    if (value->kind != VALUE_PATTERN || value->cased || value->shape != SHAPE_EXACT ||
        value->literal == NULL || value->variant_tokens[0] != NULL)
      return false;
  }
  return true;
}

/* A search holds only when one alternative holds, an alternative only when all its tests do. */
static struct type_list search_types(const struct search *s) {
  struct type_list result = {.known = true};
  for (size_t a = 0; a < s->alternative_count; a++) {
    const struct conjunction *c = &s->alternatives[a];
    const struct field_test *test = NULL;
    for (size_t k = 0; k < c->test_count && test == NULL; k++)
      if (plain_type_test(&c->tests[k])) test = &c->tests[k];
    if (test == NULL) {
      free(result.items);
      return unknown();
    }
    for (size_t v = 0; v < test->value_count; v++)
      list_add(&result, (struct type_text){test->values[v].literal, test->values[v].literal_length});
  }
  if (result.failed) {
    free(result.items);
    return unknown();
  }
  return result;
}

static struct type_list condition_types(const struct condition *c, const struct rule *r) {
  switch (c->kind) {
    case NODE_SEARCH:
      return search_types(&r->searches[c->searches[0]]);
    case NODE_AND: /* both hold: the type is in both lists */
      return list_intersection(condition_types(c->left, r), condition_types(c->right, r));
    case NODE_OR: /* either holds: in one of the lists */
      return list_union(condition_types(c->left, r), condition_types(c->right, r));
    case NODE_ONE_OF: {
      struct type_list result = {.known = true};
      for (size_t i = 0; i < c->search_count && result.known; i++)
        result = list_union(result, search_types(&r->searches[c->searches[i]]));
      return result;
    }
    case NODE_ALL_OF: {
      struct type_list result = unknown();
      for (size_t i = 0; i < c->search_count; i++)
        result = list_intersection(result, search_types(&r->searches[c->searches[i]]));
      return result;
    }
    case NODE_NOT: /* holds when its operand does not: any type */
      return unknown();
  }
  return unknown();
}

/* A list of conditions is their `or`; a rule without one requires nothing known. */
static struct type_list rule_types(const struct rule *r) {
  if (r->condition_count == 0) return unknown();
  struct type_list result = {.known = true};
  for (size_t c = 0; c < r->condition_count && result.known; c++)
    result = list_union(result, condition_types(r->conditions[c], r));
  return result;
}

static struct type_candidates *slot_of(const anomaly_rule_set *set, const unsigned char *type, size_t length,
                                       uint64_t hash) {
  size_t mask = set->typed_slots - 1;
  for (size_t i = hash & mask;; i = (i + 1) & mask) {
    struct type_candidates *slot = &set->typed[i];
    if (slot->type == NULL) return slot;
    if (slot->hash == hash && slot->length == length) {
      size_t k = 0;
      if (memcmp(slot->type, type, length) == 0) return slot; /* already folded, as most types are */
      while (k < length && slot->type[k] == fold(type[k])) k++;
      if (k == length) return slot;
    }
  }
}

static int build_types(anomaly_rule_set *set) {
  struct type_list *lists = calloc(set->detection_count + 1, sizeof *lists);
  set->untyped = calloc(set->detection_count + 1, sizeof *set->untyped);
  if (lists == NULL || set->untyped == NULL) {
    free(lists);
    return -ENOMEM;
  }
  size_t typed = 0;
  for (size_t d = 0; d < set->detection_count; d++) {
    lists[d] = rule_types(&set->rules[set->detections[d]]);
    if (!lists[d].known) set->untyped[set->untyped_count++] = set->detections[d];
    typed += lists[d].count;
    const struct rule *r = &set->rules[set->detections[d]];
    for (size_t s = 0; s < r->search_count; s++)
      for (size_t a = 0; a < r->searches[s].alternative_count; a++)
        for (size_t t = 0; t < r->searches[s].alternatives[a].test_count; t++)
          if (plain_type_test(&r->searches[s].alternatives[a].tests[t]))
            typed += r->searches[s].alternatives[a].tests[t].value_count;
  }
  set->typed_slots = 16;
  while (set->typed_slots < 2 * typed) set->typed_slots *= 2;
  set->typed = calloc(set->typed_slots, sizeof *set->typed);
  int rc = set->typed ? 0 : -ENOMEM;
  for (size_t d = 0; rc == 0 && d < set->detection_count; d++) {
    for (size_t t = 0; rc == 0 && t < lists[d].count; t++) {
      struct type_text text = lists[d].items[t];
      uint64_t hash = folded_hash(text.bytes, text.length);
      struct type_candidates *slot = slot_of(set, text.bytes, text.length, hash);
      if (slot->type == NULL) {
        if ((slot->type = malloc(text.length + 1)) == NULL) {
          rc = -ENOMEM;
          break;
        }
        memcpy(slot->type, text.bytes, text.length);
        slot->length = text.length;
        slot->hash = hash;
      }
      size_t *grown = realloc(slot->rules, (slot->count + 1) * sizeof *grown);
      if (grown == NULL) {
        rc = -ENOMEM;
        break;
      }
      slot->rules = grown;
      slot->rules[slot->count++] = set->detections[d]; /* in load order: d increases */
    }
  }
  /* every exact type test's values have a slot (a rule list of their own or an empty one) */
  for (size_t d = 0; rc == 0 && d < set->detection_count; d++) {
    struct rule *r = &set->rules[set->detections[d]];
    for (size_t s = 0; s < r->search_count; s++)
      for (size_t a = 0; a < r->searches[s].alternative_count; a++)
        for (size_t t = 0; rc == 0 && t < r->searches[s].alternatives[a].test_count; t++) {
          struct field_test *test = &r->searches[s].alternatives[a].tests[t];
          if (!plain_type_test(test)) continue;
          const struct type_candidates **slots = calloc(test->value_count, sizeof *slots);
          if (slots == NULL) {
            rc = -ENOMEM;
            break;
          }
          for (size_t v = 0; v < test->value_count; v++) {
            const unsigned char *bytes = test->values[v].literal;
            size_t length = test->values[v].literal_length;
            uint64_t hash = folded_hash(bytes, length);
            struct type_candidates *slot = slot_of(set, bytes, length, hash);
            if (slot->type == NULL) {
              if ((slot->type = malloc(length + 1)) == NULL) {
                rc = -ENOMEM;
                break;
              }
              memcpy(slot->type, bytes, length);
              slot->length = length;
              slot->hash = hash;
            }
            slots[v] = slot;
          }
          if (rc < 0) {
            free(slots);
            break;
          }
          test->type_slots = slots;
          test->type_slot_count = test->value_count;
        }
  }
  for (size_t d = 0; d < set->detection_count; d++) free(lists[d].items);
  free(lists);
  return rc;
}

const struct type_candidates *anomaly_index_type_slot(const anomaly_rule_set *set, const json_t *type) {
  if (set->typed == NULL || !json_is_string(type)) return NULL;
  const unsigned char *text = (const unsigned char *)json_string_value(type);
  size_t length = json_string_length(type);
  const struct type_candidates *slot = slot_of(set, text, length, folded_hash(text, length));
  return slot->type ? slot : NULL;
}

void anomaly_index_candidates(const anomaly_rule_set *set, const json_t *type,
                              const struct type_candidates *slot, const size_t **typed, size_t *typed_count,
                              const size_t **untyped, size_t *untyped_count) {
  *typed = NULL;
  *typed_count = 0;
  *untyped = set->untyped;
  *untyped_count = set->untyped_count;
  if (set->typed == NULL || (type != NULL && !json_is_string(type) && !json_is_null(type))) {
    *typed = set->detections; /* no index, or a member the exact test may read in other ways */
    *typed_count = set->detection_count;
    *untyped_count = 0;
    return;
  }
  if (type == NULL || json_is_null(type)) return; /* an exact string test never holds */
  if (slot) {
    *typed = slot->rules;
    *typed_count = slot->count;
  }
}

/* ---- automata ---- */

static void automaton_clear(struct anomaly_automaton *a) {
  free(a->next);
  free(a->terminal);
  free(a->first_output);
  free(a->output_link);
  memset(a, 0, sizeof *a);
}

/* A literal to find: folded bytes, and where its index in the automaton goes. */
struct entry {
  const char *field;
  const unsigned char *text;
  size_t length;
  size_t *index;
  struct value *value;
};

/* Build `a` over the literals of `entries` (folded, no NUL byte), giving each its literal index (equal
 * literals share one). Returns 0, -E2BIG when the table would exceed MAX_AUTOMATON_ENTRIES, or
 * -ENOMEM. */
static int automaton_build(struct anomaly_automaton *a, struct entry *entries, size_t count) {
  memset(a, 0, sizeof *a);
  size_t total = 1;
  bool used[256] = {false};
  for (size_t i = 0; i < count; i++) {
    total += entries[i].length;
    for (size_t k = 0; k < entries[i].length; k++) used[entries[i].text[k]] = true;
  }
  a->class_count = 1;
  for (unsigned b = 0; b < 256; b++)
    if (used[b]) {
      a->classes[b] = (unsigned char)a->class_count;
      if (b >= 'a' && b <= 'z') a->classes[b - 32] = (unsigned char)a->class_count;
      a->class_count++;
    }
  if (total * a->class_count > MAX_AUTOMATON_ENTRIES) return -E2BIG;
  size_t width = a->class_count;
  a->next = calloc(total * width, sizeof *a->next);
  a->terminal = malloc(total * sizeof *a->terminal);
  a->first_output = malloc(total * sizeof *a->first_output);
  a->output_link = malloc(total * sizeof *a->output_link);
  uint32_t *failure = calloc(total, sizeof *failure), *queue = calloc(total, sizeof *queue);
  if (a->next == NULL || a->terminal == NULL || a->first_output == NULL || a->output_link == NULL ||
      failure == NULL || queue == NULL) {
    free(failure);
    free(queue);
    automaton_clear(a);
    return -ENOMEM;
  }
  for (size_t s = 0; s < total; s++) a->terminal[s] = a->output_link[s] = a->first_output[s] = -1;
  a->state_count = 1;
  for (size_t i = 0; i < count; i++) { /* the trie: a child is never the root (0) */
    uint32_t s = 0;
    for (size_t k = 0; k < entries[i].length; k++) {
      uint32_t *edge = &a->next[s * width + a->classes[entries[i].text[k]]];
      if (*edge == 0) *edge = (uint32_t)a->state_count++;
      s = *edge;
    }
    if (a->terminal[s] < 0) a->terminal[s] = (int32_t)a->literal_count++;
    *entries[i].index = (size_t)a->terminal[s];
  }
  /* breadth first: a state's failure is shallower, so its row and outputs are complete before it is
   * used; a missing edge becomes the failure's edge */
  size_t head = 0, tail = 0;
  for (size_t c = 0; c < width; c++)
    if (a->next[c]) {
      uint32_t u = a->next[c];
      failure[u] = 0;
      a->first_output[u] = a->terminal[u] >= 0 ? (int32_t)u : -1;
      queue[tail++] = u;
    }
  while (head < tail) {
    uint32_t s = queue[head++];
    for (size_t c = 0; c < width; c++) {
      uint32_t *edge = &a->next[s * width + c];
      uint32_t through_failure = a->next[failure[s] * width + c];
      if (*edge == 0) {
        *edge = through_failure;
        continue;
      }
      uint32_t u = *edge;
      failure[u] = through_failure;
      a->output_link[u] = a->first_output[through_failure];
      a->first_output[u] = a->terminal[u] >= 0 ? (int32_t)u : a->output_link[u];
      queue[tail++] = u;
    }
  }
  free(failure);
  free(queue);
  return 0;
}

void anomaly_automaton_scan(const struct anomaly_automaton *a, const char *text, size_t length,
                            uint64_t *bits) {
  memset(bits, 0, (a->literal_count + 63) / 64 * sizeof *bits);
  const uint32_t *next = a->next;
  size_t width = a->class_count;
  uint32_t s = 0;
  for (size_t i = 0; i < length; i++) {
    s = next[s * width + a->classes[(unsigned char)text[i]]];
    for (int32_t o = a->first_output[s]; o >= 0; o = a->output_link[o]) {
      size_t literal = (size_t)a->terminal[o];
      bits[literal / 64] |= UINT64_C(1) << (literal % 64);
    }
  }
}

static int compare_entries(const void *a, const void *b) {
  const struct entry *x = a, *y = b;
  return strcmp(x->field, y->field);
}

static bool automaton_value(const struct value *v) {
  return v->kind == VALUE_PATTERN && !v->cased && v->shape == SHAPE_CONTAINS && v->literal &&
         v->literal_length > 0 && !v->literal_has_nul;
}

/* ---- literals every match of a regular expression holds ---- */

#define MAX_REQUIRED 32
#define MIN_REQUIRED_LENGTH 3

/* A byte that stands for itself in a PCRE2 pattern (outside a class, without the extended option). */
static bool literal_byte(unsigned char c) {
  return c >= 0x20 && c < 0x7f && strchr("\\^$.|?*+()[]{}#", c) == NULL;
}

static bool quantifier_at(const char *p, size_t i, size_t n) {
  return i < n && (p[i] == '?' || p[i] == '*' || p[i] == '+' || p[i] == '{');
}

/* The end of the class opened at p[i] == '[' (the index after its `]`), or n. */
static size_t class_end(const char *p, size_t i, size_t n) {
  i++;
  if (i < n && p[i] == '^') i++;
  if (i < n && p[i] == ']') i++; /* a leading `]` is a member */
  while (i < n && p[i] != ']') {
    if (p[i] == '\\') {
      i += 2;
    } else if (p[i] == '[' && i + 1 < n && p[i + 1] == ':') { /* [:alpha:] */
      const char *close = memmem(p + i + 2, n - i - 2, ":]", 2);
      i = close ? (size_t)(close - p) + 2 : n;
    } else {
      i++;
    }
  }
  return i < n ? i + 1 : n;
}

struct alternatives {
  size_t count;
  const char *starts[MAX_REQUIRED];
  size_t lengths[MAX_REQUIRED];
};

/* Whether p[start, end) is `lit|lit|...` (literal bytes only): its alternatives in *out. */
static bool plain_alternation(const char *p, size_t start, size_t end, struct alternatives *out) {
  out->count = 0;
  size_t from = start;
  for (size_t i = start; i <= end; i++) {
    if (i < end && literal_byte((unsigned char)p[i])) continue;
    if (i < end && p[i] != '|') return false;
    if (i == from || out->count == MAX_REQUIRED) return false;
    out->starts[out->count] = p + from;
    out->lengths[out->count++] = i - from;
    from = i + 1;
  }
  return out->count > 0;
}

static size_t shortest(const struct alternatives *a) {
  size_t least = SIZE_MAX;
  for (size_t i = 0; i < a->count; i++)
    if (a->lengths[i] < least) least = a->lengths[i];
  return least;
}

/* Literals one of which every match of `pattern` holds, read from its top level: a run of literal
 * bytes (without a last byte a quantifier makes optional) or a group of plain alternatives that no
 * quantifier makes optional. The most selective (longest shortest literal) is kept. Patterns whose
 * reading is uncertain give none: a top-level `|`, inline options or verbs (`(?i)`, `(*UCP)`), escapes
 * longer than one character, and caseless or extended expressions (a caseless `k` matches U+212A). */
static bool regex_requirement(const struct value *v, struct alternatives *best) {
  best->count = 0;
  const char *p = v->source;
  size_t n = v->source_length;
  uint32_t options = 0;
  if (p == NULL || pcre2_pattern_info(v->regex, PCRE2_INFO_ALLOPTIONS, &options) != 0 ||
      options & (PCRE2_CASELESS | PCRE2_EXTENDED | PCRE2_EXTENDED_MORE | PCRE2_LITERAL))
    return false;
  for (size_t i = 0; i + 1 < n; i++)
    if ((p[i] == '(' && (p[i + 1] == '*' || (p[i + 1] == '?' && (i + 2 >= n || p[i + 2] != ':')))) ||
        (p[i] == '\\' && strchr("xpPNogkcQEu0123456789", p[i + 1])) || p[i] == '\0')
      return false;
  size_t i = 0;
  while (i < n) {
    char c = p[i];
    struct alternatives found = {0};
    if (c == '\\') {
      i += 2;
    } else if (c == '[') {
      i = class_end(p, i, n);
    } else if (c == '{') {
      const char *close = memchr(p + i, '}', n - i);
      i = close ? (size_t)(close - p) + 1 : n;
    } else if (c == '|' || c == ')') {
      best->count = 0; /* top-level alternation (or an unbalanced parenthesis): nothing is required */
      return false;
    } else if (c == '(') {
      size_t depth = 1, j = i + 1;
      while (j < n && depth) {
        if (p[j] == '\\')
          j += 2;
        else if (p[j] == '[')
          j = class_end(p, j, n);
        else {
          if (p[j] == '(') depth++;
          if (p[j] == ')') depth--;
          j++;
        }
      }
      if (depth) return false;
      size_t start = i + 1, end = j - 1; /* p[end] == ')' */
      if (end - start >= 2 && p[start] == '?' && p[start + 1] == ':') start += 2;
      if (!quantifier_at(p, j, n) || p[j] == '+') plain_alternation(p, start, end, &found);
      i = j;
    } else if (literal_byte((unsigned char)c)) {
      size_t start = i;
      while (i < n && literal_byte((unsigned char)p[i])) i++;
      size_t length = i - start - (quantifier_at(p, i, n) && p[i] != '+' ? 1 : 0);
      if (length > 0) {
        found.count = 1;
        found.starts[0] = p + start;
        found.lengths[0] = length;
      }
    } else {
      i++; /* . ^ $ * + ? */
    }
    if (found.count && shortest(&found) >= MIN_REQUIRED_LENGTH &&
        (best->count == 0 || shortest(&found) > shortest(best)))
      *best = found;
  }
  return best->count > 0;
}

/* The regular expression's required literals as entries of its field (folded copies it owns). */
static int regex_entries(struct value *v, const char *field, struct entry **entries, size_t *count,
                         size_t *capacity) {
  struct alternatives required;
  if (!regex_requirement(v, &required)) return 0;
  v->required = calloc(required.count, sizeof *v->required);
  if (v->required == NULL) return -ENOMEM;
  for (size_t k = 0; k < required.count; k++) {
    unsigned char *text = malloc(required.lengths[k] + 1);
    if (text == NULL) return -ENOMEM;
    for (size_t b = 0; b < required.lengths[k]; b++) text[b] = fold((unsigned char)required.starts[k][b]);
    v->required[k] = (struct required_literal){text, required.lengths[k], 0};
    v->required_count = k + 1;
  }
  for (size_t k = 0; k < v->required_count; k++) {
    if (*count == *capacity) {
      *capacity = *capacity ? *capacity * 2 : 64;
      struct entry *grown = realloc(*entries, *capacity * sizeof *grown);
      if (grown == NULL) return -ENOMEM;
      *entries = grown;
    }
    (*entries)[(*count)++] =
        (struct entry){field, v->required[k].text, v->required[k].length, &v->required[k].index, v};
  }
  return 0;
}

static int build_automata(anomaly_rule_set *set) {
  size_t count = 0, capacity = 0;
  struct entry *entries = NULL;
  int rc = 0;
  for (size_t d = 0; rc == 0 && d < set->detection_count; d++) {
    struct rule *r = &set->rules[set->detections[d]];
    for (size_t s = 0; s < r->search_count; s++)
      for (size_t a = 0; a < r->searches[s].alternative_count; a++) {
        struct conjunction *c = &r->searches[s].alternatives[a];
        for (size_t t = 0; rc == 0 && t < c->test_count; t++) {
          struct field_test *test = &c->tests[t];
          if (test->field == NULL) continue; /* keywords: every string of the event */
          for (size_t v = 0; rc == 0 && v < test->value_count; v++) {
            struct value *value = &test->values[v];
            if (value->kind == VALUE_REGEX) {
              rc = regex_entries(value, test->field, &entries, &count, &capacity);
              continue;
            }
            if (!automaton_value(value)) continue;
            if (count == capacity) {
              capacity = capacity ? capacity * 2 : 64;
              struct entry *grown = realloc(entries, capacity * sizeof *grown);
              if (grown == NULL) {
                rc = -ENOMEM;
                break;
              }
              entries = grown;
            }
            entries[count++] = (struct entry){test->field, value->literal, value->literal_length,
                                              &value->literal_index, value};
          }
        }
      }
  }
  if (rc == 0 && count) qsort(entries, count, sizeof *entries, compare_entries);
  set->automata = calloc(count / 2 + 1, sizeof *set->automata);
  if (set->automata == NULL) rc = -ENOMEM;
  for (size_t start = 0, end; rc == 0 && start < count; start = end) {
    end = start + 1;
    while (end < count && strcmp(entries[end].field, entries[start].field) == 0) end++;
    if (end - start < 2) continue; /* one literal: the C library's search is as good */
    struct anomaly_automaton *a = &set->automata[set->automaton_count];
    int built = automaton_build(a, entries + start, end - start);
    if (built == -ENOMEM) rc = built;
    if (built < 0) continue; /* too large: searched one value at a time */
    set->automaton_count++;
    for (size_t i = start; i < end; i++) entries[i].value->automaton = set->automaton_count;
  }
  free(entries);
  for (size_t d = 0; rc == 0 && d < set->detection_count; d++) { /* tests answered by one automaton */
    struct rule *r = &set->rules[set->detections[d]];
    for (size_t s = 0; s < r->search_count; s++)
      for (size_t a = 0; a < r->searches[s].alternative_count; a++) {
        struct conjunction *c = &r->searches[s].alternatives[a];
        for (size_t t = 0; rc == 0 && t < c->test_count; t++) {
          struct field_test *test = &c->tests[t];
          size_t automaton = test->field && test->value_count && automaton_value(&test->values[0])
                                 ? test->values[0].automaton
                                 : 0;
          for (size_t v = 1; automaton && v < test->value_count; v++)
            if (!automaton_value(&test->values[v]) || test->values[v].automaton != automaton) automaton = 0;
          if (automaton == 0) continue;
          size_t words = (set->automata[automaton - 1].literal_count + 63) / 64;
          if ((test->literal_mask = calloc(words + 1, sizeof *test->literal_mask)) == NULL) {
            rc = -ENOMEM;
            break;
          }
          for (size_t v = 0; v < test->value_count; v++)
            test->literal_mask[test->values[v].literal_index / 64] |= UINT64_C(1)
                                                                      << (test->values[v].literal_index % 64);
          test->automaton = automaton;
        }
      }
  }
  return rc;
}

/* Give every test of a top-level member (a field without a dot) the member's index. */
static int build_fields(anomaly_rule_set *set) {
  for (size_t d = 0; d < set->detection_count; d++) {
    struct rule *r = &set->rules[set->detections[d]];
    for (size_t s = 0; s < r->search_count; s++)
      for (size_t a = 0; a < r->searches[s].alternative_count; a++) {
        struct conjunction *c = &r->searches[s].alternatives[a];
        for (size_t t = 0; t < c->test_count; t++) {
          struct field_test *test = &c->tests[t];
          if (test->field == NULL || memchr(test->field, '.', test->field_length)) continue;
          size_t i = 0;
          while (i < set->field_count && strcmp(set->fields[i], test->field) != 0) i++;
          if (i == set->field_count) {
            char **grown = realloc(set->fields, (set->field_count + 1) * sizeof *grown);
            if (grown == NULL) return -ENOMEM;
            set->fields = grown;
            if ((set->fields[i] = strdup(test->field)) == NULL) return -ENOMEM;
            set->field_count++;
          }
          test->field_id = i + 1;
          if (strcmp(test->field, "type") == 0) set->type_field = i + 1;
        }
      }
  }
  return 0;
}

int anomaly_index_build(anomaly_rule_set *set) {
  int rc = build_types(set);
  if (rc == 0) rc = build_automata(set);
  if (rc == 0) rc = build_fields(set);
  if (rc < 0) anomaly_index_free(set);
  return rc;
}

void anomaly_index_free(anomaly_rule_set *set) {
  for (size_t i = 0; set->typed && i < set->typed_slots; i++) {
    free(set->typed[i].type);
    free(set->typed[i].rules);
  }
  free(set->typed);
  set->typed = NULL;
  set->typed_slots = 0;
  free(set->untyped);
  set->untyped = NULL;
  set->untyped_count = 0;
  for (size_t i = 0; i < set->automaton_count; i++) automaton_clear(&set->automata[i]);
  free(set->automata);
  set->automata = NULL;
  set->automaton_count = 0;
  for (size_t i = 0; i < set->field_count; i++) free(set->fields[i]);
  free(set->fields);
  set->fields = NULL;
  set->field_count = 0;
  set->type_field = 0;
  /* values keep no automaton once the automata are gone */
  for (size_t r = 0; r < set->rule_count; r++)
    for (size_t s = 0; s < set->rules[r].search_count; s++)
      for (size_t a = 0; a < set->rules[r].searches[s].alternative_count; a++) {
        struct conjunction *c = &set->rules[r].searches[s].alternatives[a];
        for (size_t t = 0; t < c->test_count; t++) {
          c->tests[t].automaton = 0;
          c->tests[t].field_id = 0;
          free(c->tests[t].type_slots);
          c->tests[t].type_slots = NULL;
          c->tests[t].type_slot_count = 0;
          free(c->tests[t].literal_mask);
          c->tests[t].literal_mask = NULL;
          for (size_t v = 0; v < c->tests[t].value_count; v++) {
            struct value *value = &c->tests[t].values[v];
            value->automaton = 0;
            for (size_t k = 0; k < value->required_count; k++) free(value->required[k].text);
            free(value->required);
            value->required = NULL;
            value->required_count = 0;
          }
        }
      }
}
