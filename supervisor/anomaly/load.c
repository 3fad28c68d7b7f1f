/* Loading Sigma rules from YAML (libyaml's document API, which keeps every node's position) into
 * compiled rules: sigma-rules-specification.md and sigma-correlation-rules-specification.md. */
#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <sodium.h>
#include <yaml.h>

#include "supervisor/anomaly/anomaly_internal.h"

struct document {
  yaml_document_t *yaml;
  const char *file;
  const char *rule_id;
  json_t *problems;
  bool failed;
};

static void problem(struct document *d, const yaml_node_t *node, unsigned column_offset, const char *format,
                    ...) __attribute__((format(printf, 4, 5)));
static void problem(struct document *d, const yaml_node_t *node, unsigned column_offset, const char *format,
                    ...) {
  char message[768];
  va_list args;
  va_start(args, format);
  vsnprintf(message, sizeof message, format, args);
  va_end(args);
  unsigned line = node ? (unsigned)node->start_mark.line + 1 : 1;
  unsigned column = node ? (unsigned)node->start_mark.column + 1 + column_offset : 1;
  json_array_append_new(d->problems, json_sprintf("%s:%u:%u: rule %s: %s", d->file, line, column,
                                                  d->rule_id ? d->rule_id : "-", message));
  d->failed = true;
}

static yaml_node_t *node_at(struct document *d, int index) {
  return yaml_document_get_node(d->yaml, index);
}

static const char *scalar(const yaml_node_t *node) {
  return node && node->type == YAML_SCALAR_NODE ? (const char *)node->data.scalar.value : NULL;
}

static bool plain(const yaml_node_t *node) {
  return node->type == YAML_SCALAR_NODE && node->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
}

static yaml_node_t *map_get(struct document *d, const yaml_node_t *map, const char *key) {
  if (map == NULL || map->type != YAML_MAPPING_NODE) return NULL;
  for (yaml_node_pair_t *pair = map->data.mapping.pairs.start; pair < map->data.mapping.pairs.top; pair++) {
    const char *k = scalar(node_at(d, pair->key));
    if (k && strcmp(k, key) == 0) return node_at(d, pair->value);
  }
  return NULL;
}

static bool is_null(const yaml_node_t *node) {
  const char *s = scalar(node);
  return s && plain(node) && (s[0] == '\0' || strcmp(s, "~") == 0 || strcasecmp(s, "null") == 0);
}

static bool boolean_of(const yaml_node_t *node, bool *value) {
  const char *s = scalar(node);
  if (s == NULL || !plain(node)) return false;
  if (strcasecmp(s, "true") == 0 || strcasecmp(s, "yes") == 0) return *value = true, true;
  if (strcasecmp(s, "false") == 0 || strcasecmp(s, "no") == 0) return *value = false, true;
  return false;
}

static bool number_of(const yaml_node_t *node, double *value) {
  const char *s = scalar(node);
  if (s == NULL || s[0] == '\0' || strlen(s) > 64) return false;
  char *end;
  errno = 0;
  *value = strtod(s, &end);
  return errno == 0 && *end == '\0' && isfinite(*value) && strchr(s, 'x') == NULL && strchr(s, 'X') == NULL &&
         strcasecmp(s, "nan") != 0 && strcasecmp(s, "inf") != 0;
}

static bool integer_of(const yaml_node_t *node, int64_t *value) {
  double number;
  if (!plain(node) || !number_of(node, &number) || number != floor(number) || fabs(number) > 9e15)
    return false;
  *value = (int64_t)number;
  return true;
}

/* A required or optional string member. Returns the string (owned by the document) or NULL. */
static const char *string_member(struct document *d, const yaml_node_t *map, const char *key, bool required) {
  yaml_node_t *node = map_get(d, map, key);
  if (node == NULL) {
    if (required) problem(d, map, 0, "`%s` is required", key);
    return NULL;
  }
  const char *s = scalar(node);
  if (s == NULL || is_null(node)) {
    problem(d, node, 0, "`%s` must be a string", key);
    return NULL;
  }
  return s;
}

/* A string or a list of strings into a new array of copies. Returns the count, or -1 (problem set). */
static long string_list(struct document *d, yaml_node_t *node, const char *what, char ***out) {
  *out = NULL;
  if (node == NULL) return 0;
  if (node->type == YAML_SCALAR_NODE && !is_null(node)) {
    *out = malloc(sizeof **out);
    (*out)[0] = strdup(scalar(node));
    return 1;
  }
  if (node->type != YAML_SEQUENCE_NODE) {
    problem(d, node, 0, "`%s` must be a list of strings", what);
    return -1;
  }
  size_t count = (size_t)(node->data.sequence.items.top - node->data.sequence.items.start);
  *out = calloc(count + 1, sizeof **out);
  for (size_t i = 0; i < count; i++) {
    yaml_node_t *item = node_at(d, node->data.sequence.items.start[i]);
    if (scalar(item) == NULL || is_null(item)) {
      problem(d, item, 0, "`%s` must hold strings only", what);
      for (size_t j = 0; j < i; j++) free((*out)[j]);
      free(*out);
      *out = NULL;
      return -1;
    }
    (*out)[i] = strdup(scalar(item));
  }
  return (long)count;
}

static void free_strings(char **strings, size_t count) {
  for (size_t i = 0; strings && i < count; i++) free(strings[i]);
  free(strings);
}

/* ---- detection items ---- */

struct modifiers {
  bool contains, startswith, endswith, all, cased, windash, base64, base64offset, re, re_i, re_m, re_s, cidr,
      exists, fieldref, neq, expand;
  int utf16; /* 0, 1 le, 2 be, 3 with byte order mark */
  bool compare;
  enum compare_op op;
  enum time_part time_part;
};

static bool parse_modifiers(struct document *d, const yaml_node_t *key_node, const char *key,
                            struct modifiers *m) {
  memset(m, 0, sizeof *m);
  const char *bar = strchr(key, '|');
  int transforms = 0;
  while (bar) {
    const char *name = bar + 1;
    bar = strchr(name, '|');
    size_t length = bar ? (size_t)(bar - name) : strlen(name);
    unsigned offset = (unsigned)(name - key);
#define IS(word) (length == strlen(word) && strncmp(name, word, length) == 0)
    if (IS("contains") || IS("startswith") || IS("endswith")) {
      if (transforms++) {
        problem(d, key_node, offset, "`%.*s`: only one of contains, startswith, endswith", (int)length, name);
        return false;
      }
      m->contains = IS("contains");
      m->startswith = IS("startswith");
      m->endswith = IS("endswith");
    } else if (IS("all"))
      m->all = true;
    else if (IS("cased"))
      m->cased = true;
    else if (IS("windash"))
      m->windash = true;
    else if (IS("base64"))
      m->base64 = true;
    else if (IS("base64offset"))
      m->base64offset = true;
    else if (IS("utf16le") || IS("wide"))
      m->utf16 = 1;
    else if (IS("utf16be"))
      m->utf16 = 2;
    else if (IS("utf16"))
      m->utf16 = 3;
    else if (IS("re"))
      m->re = true;
    else if (IS("i") || IS("m") || IS("s")) {
      if (!m->re) {
        problem(d, key_node, offset, "`%.*s` is a sub-modifier of `re` and must follow it", (int)length,
                name);
        return false;
      }
      m->re_i |= IS("i");
      m->re_m |= IS("m");
      m->re_s |= IS("s");
    } else if (IS("cidr"))
      m->cidr = true;
    else if (IS("exists"))
      m->exists = true;
    else if (IS("fieldref"))
      m->fieldref = true;
    else if (IS("neq"))
      m->neq = true;
    else if (IS("expand"))
      m->expand = true;
    else if (IS("gt") || IS("gte") || IS("lt") || IS("lte")) {
      m->compare = true;
      m->op = IS("gt") ? COMPARE_GT : IS("gte") ? COMPARE_GTE : IS("lt") ? COMPARE_LT : COMPARE_LTE;
    } else if (IS("minute"))
      m->time_part = TIME_MINUTE;
    else if (IS("hour"))
      m->time_part = TIME_HOUR;
    else if (IS("day"))
      m->time_part = TIME_DAY;
    else if (IS("week"))
      m->time_part = TIME_WEEK;
    else if (IS("month"))
      m->time_part = TIME_MONTH;
    else if (IS("year"))
      m->time_part = TIME_YEAR;
    else {
      problem(d, key_node, offset, "unknown modifier `%.*s`", (int)length, name);
      return false;
    }
#undef IS
  }
  int kinds = m->re + m->cidr + m->exists + m->fieldref + m->compare;
  if (kinds > 1 || (kinds && (transforms || m->base64 || m->base64offset || m->windash || m->utf16))) {
    problem(d, key_node, 0, "modifiers `%s` cannot be combined", strchr(key, '|') + 1);
    return false;
  }
  if (m->base64 && m->base64offset) {
    problem(d, key_node, 0, "`base64` and `base64offset` cannot be combined");
    return false;
  }
  if (m->utf16 && !m->base64 && !m->base64offset) {
    problem(d, key_node, 0, "`utf16`/`wide` must be followed by `base64` or `base64offset`");
    return false;
  }
  return true;
}

/* UTF-8 → UTF-16 (le, be, or le with a byte order mark). */
static unsigned char *utf16_of(const char *text, size_t length, int variant, size_t *out_length) {
  unsigned char *out = malloc(length * 4 + 4), *o = out;
  if (out == NULL) return NULL;
  bool big = variant == 2;
  if (variant == 3) *o++ = 0xFF, *o++ = 0xFE;
  for (size_t i = 0; i < length;) {
    unsigned char c = (unsigned char)text[i];
    uint32_t cp = c;
    size_t width = c < 0x80 ? 1 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
    if (i + width > length) width = 1;
    if (width > 1) {
      cp = c & (0xFF >> (width + 1));
      for (size_t k = 1; k < width; k++) cp = cp << 6 | ((unsigned char)text[i + k] & 0x3F);
    }
    i += width;
    uint16_t units[2];
    int n = 1;
    if (cp >= 0x10000) {
      cp -= 0x10000;
      units[0] = (uint16_t)(0xD800 | cp >> 10);
      units[1] = (uint16_t)(0xDC00 | (cp & 0x3FF));
      n = 2;
    } else {
      units[0] = (uint16_t)cp;
    }
    for (int k = 0; k < n; k++) {
      *o++ = big ? (unsigned char)(units[k] >> 8) : (unsigned char)units[k];
      *o++ = big ? (unsigned char)units[k] : (unsigned char)(units[k] >> 8);
    }
  }
  *out_length = (size_t)(o - out);
  return out;
}

static int wrap_tokens(uint16_t **tokens, size_t *count, bool before, bool after) {
  uint16_t *grown = realloc(*tokens, (*count + 2) * sizeof **tokens);
  if (grown == NULL) return -ENOMEM;
  if (before && (*count == 0 || grown[0] != TOKEN_STAR)) {
    memmove(grown + 1, grown, *count * sizeof *grown);
    grown[0] = TOKEN_STAR;
    (*count)++;
  }
  if (after && (*count == 0 || grown[*count - 1] != TOKEN_STAR)) grown[(*count)++] = TOKEN_STAR;
  *tokens = grown;
  return 0;
}

static bool compile_value(struct document *d, const yaml_node_t *node, const struct modifiers *m,
                          struct value *v) {
  memset(v, 0, sizeof *v);
  const char *text = scalar(node);
  if (text == NULL) {
    problem(d, node, 0, "a value must be a scalar (string, number, boolean or null)");
    return false;
  }
  size_t length = node->data.scalar.length;
  bool string_modifiers =
      m->contains || m->startswith || m->endswith || m->base64 || m->base64offset || m->windash || m->cased;
  if (m->fieldref) {
    v->kind = VALUE_FIELDREF;
    v->field = strdup(text);
    v->cased = m->cased;
    return true;
  }
  if (m->compare || m->time_part) {
    if (!number_of(node, &v->number)) {
      problem(d, node, 0, "`%s`: a number is expected here", text);
      return false;
    }
    if (m->compare) {
      v->kind = VALUE_COMPARE;
      v->op = m->op;
      return true;
    }
  }
  if (m->re) {
    int code;
    PCRE2_SIZE where;
    uint32_t options = PCRE2_UTF | (m->re_i ? PCRE2_CASELESS : 0) | (m->re_m ? PCRE2_MULTILINE : 0) |
                       (m->re_s ? PCRE2_DOTALL : 0);
    v->kind = VALUE_REGEX;
    v->regex = pcre2_compile((PCRE2_SPTR)text, length, options, &code, &where, NULL);
    if (v->regex == NULL) {
      PCRE2_UCHAR why[256];
      pcre2_get_error_message(code, why, sizeof why);
      problem(d, node, 0, "regular expression `%s` at offset %zu: %s", text, (size_t)where, (char *)why);
      return false;
    }
    pcre2_jit_compile(v->regex, PCRE2_JIT_COMPLETE);
    v->source = strndup(text, length); /* for the index's required literals; NULL: none derived */
    v->source_length = v->source ? length : 0;
    return true;
  }
  if (m->cidr) {
    v->kind = VALUE_CIDR;
    const char *slash = strchr(text, '/');
    char address[64];
    size_t address_length = slash ? (size_t)(slash - text) : length;
    char *end = NULL;
    long prefix = slash ? strtol(slash + 1, &end, 10) : -1;
    if (address_length < sizeof address) {
      memcpy(address, text, address_length);
      address[address_length] = '\0';
      v->family = strchr(address, ':') ? 6 : 4;
      if (prefix < 0) prefix = v->family == 4 ? 32 : 128;
      if (inet_pton(v->family == 4 ? AF_INET : AF_INET6, address, v->network) == 1 &&
          (!slash || *end == '\0') && prefix <= (v->family == 4 ? 32 : 128)) {
        v->prefix = (unsigned)prefix;
        return true;
      }
    }
    problem(d, node, 0, "`%s` is not a CIDR network (address/prefix)", text);
    return false;
  }
  if (m->exists) {
    problem(d, node, 0, "`exists` takes true or false");
    return false;
  }
  if (is_null(node)) {
    v->kind = VALUE_NULL;
    return true;
  }
  bool boolean;
  if (!string_modifiers && boolean_of(node, &boolean)) {
    v->kind = VALUE_BOOLEAN;
    v->boolean = boolean;
    return true;
  }
  double number;
  if (!string_modifiers && plain(node) && number_of(node, &number)) {
    v->kind = VALUE_NUMBER;
    v->number = number;
    return anomaly_pattern_compile(text, length, false, false, true, &v->tokens, &v->token_count) == 0;
  }
  v->kind = VALUE_PATTERN;
  v->cased = m->cased;
  if (m->base64 || m->base64offset) {
    size_t raw_length = length;
    unsigned char *raw =
        m->utf16 ? utf16_of(text, length, m->utf16, &raw_length) : (unsigned char *)strdup(text);
    if (raw == NULL) return false;
    v->cased = true; /* base64 text is case-sensitive */
    int variants = m->base64offset ? 3 : 1;
    for (int shift = 0; shift < variants; shift++) {
      /* pySigma's base64offset: encode with `shift` leading bytes, drop the characters those bytes
       * and the unaligned tail touch. */
      static const size_t start_offsets[] = {0, 2, 3}, end_offsets[] = {0, 3, 2};
      unsigned char *shifted = malloc(raw_length + 3);
      memset(shifted, ' ', 3);
      memcpy(shifted + shift, raw, raw_length);
      char *encoded;
      size_t encoded_length;
      anomaly_base64_encode(shifted, raw_length + (size_t)shift, &encoded, &encoded_length);
      free(shifted);
      size_t start = 0, end = encoded_length;
      if (m->base64offset) {
        start = start_offsets[shift];
        size_t cut = end_offsets[(raw_length + (size_t)shift) % 3];
        end = encoded_length > cut ? encoded_length - cut : 0;
        if (start > end) start = end;
      }
      uint16_t **tokens = shift == 0 ? &v->tokens : &v->variant_tokens[shift - 1];
      size_t *count = shift == 0 ? &v->token_count : &v->variant_counts[shift - 1];
      anomaly_pattern_compile(encoded + start, end - start, true, false, true, tokens, count);
      free(encoded);
    }
    free(raw);
  } else if (anomaly_pattern_compile(text, length, m->cased, m->windash, false, &v->tokens, &v->token_count) <
             0) {
    return false;
  }
  bool before = m->contains || m->endswith, after = m->contains || m->startswith;
  if (before || after) {
    wrap_tokens(&v->tokens, &v->token_count, before, after);
    for (int i = 0; i < 2; i++)
      if (v->variant_tokens[i]) wrap_tokens(&v->variant_tokens[i], &v->variant_counts[i], before, after);
  }
  return true;
}

static void field_test_clear(struct field_test *t) {
  for (size_t i = 0; i < t->value_count; i++) anomaly_value_clear(&t->values[i]);
  free(t->values);
  free(t->field);
  free(t->literal_mask);
  free(t->type_slots);
  memset(t, 0, sizeof *t);
}

/* One `field|modifiers: value(s)` item (key_node NULL: a keyword list). */
static bool parse_item(struct document *d, const yaml_node_t *key_node, const char *key, yaml_node_t *value,
                       struct field_test *t) {
  memset(t, 0, sizeof *t);
  struct modifiers m;
  if (!parse_modifiers(d, key_node, key ? key : "", &m)) return false;
  if (key) {
    size_t field_length = strcspn(key, "|");
    if (field_length > 0) {
      t->field = strndup(key, field_length);
      t->field_length = field_length;
    }
  }
  if (t->field == NULL && (m.exists || m.fieldref || m.compare || m.time_part)) {
    problem(d, key_node, 0, "a keyword cannot use `%s`", key);
    return false;
  }
  t->negate = m.neq;
  t->time_part = m.time_part;
  if (m.exists) {
    bool exists;
    if (!boolean_of(value, &exists)) {
      problem(d, value, 0, "`exists` takes true or false");
      return false;
    }
    t->exists_test = true;
    t->exists = exists;
    return true;
  }
  size_t count = 1;
  yaml_node_item_t *items = NULL;
  if (value->type == YAML_SEQUENCE_NODE) {
    items = value->data.sequence.items.start;
    count = (size_t)(value->data.sequence.items.top - items);
    if (count == 0) {
      problem(d, value, 0, "an empty list of values matches nothing");
      return false;
    }
  } else if (value->type == YAML_MAPPING_NODE) {
    problem(d, value, 0, "a value must be a scalar or a list of scalars, not a map");
    return false;
  }
  if (m.all && count == 1) {
    problem(d, key_node ? key_node : value, 0, "`all` needs a list of at least two values");
    return false;
  }
  t->all = m.all;
  t->values = calloc(count, sizeof *t->values);
  for (size_t i = 0; i < count; i++) {
    yaml_node_t *item = items ? node_at(d, items[i]) : value;
    bool compiled = compile_value(d, item, &m, &t->values[i]);
    if (compiled) anomaly_value_shape(&t->values[i]);
    if (!compiled) {
      t->value_count = i + 1;
      field_test_clear(t);
      return false;
    }
    t->value_count = i + 1;
  }
  if (t->field == NULL) {
    for (size_t i = 0; i < count; i++) { /* keywords match anywhere in a string member */
      struct value *v = &t->values[i];
      if (v->kind == VALUE_NUMBER || v->kind == VALUE_BOOLEAN) v->kind = VALUE_PATTERN;
      if (v->kind == VALUE_PATTERN && !(m.contains || m.startswith || m.endswith)) {
        wrap_tokens(&v->tokens, &v->token_count, true, true);
        free(v->literal);
        v->literal = NULL;
        anomaly_value_shape(v);
      }
    }
  }
  return true;
}

static bool parse_conjunction(struct document *d, yaml_node_t *map, struct conjunction *c) {
  size_t count = (size_t)(map->data.mapping.pairs.top - map->data.mapping.pairs.start);
  c->tests = calloc(count ? count : 1, sizeof *c->tests);
  c->test_count = 0;
  for (size_t i = 0; i < count; i++) {
    yaml_node_pair_t *pair = &map->data.mapping.pairs.start[i];
    yaml_node_t *key = node_at(d, pair->key);
    if (scalar(key) == NULL) {
      problem(d, key, 0, "a field name must be a string");
      return false;
    }
    if (!parse_item(d, key, scalar(key), node_at(d, pair->value), &c->tests[c->test_count])) {
      field_test_clear(&c->tests[c->test_count]); /* what the failed item holds so far */
      return false;
    }
    c->test_count++;
  }
  return true;
}

static bool parse_search(struct document *d, const char *name, yaml_node_t *node, struct search *s) {
  memset(s, 0, sizeof *s);
  s->name = strdup(name);
  if (node->type == YAML_MAPPING_NODE) {
    s->alternatives = calloc(1, sizeof *s->alternatives);
    s->alternative_count = 1;
    return parse_conjunction(d, node, &s->alternatives[0]);
  }
  if (node->type == YAML_SCALAR_NODE || node->type == YAML_SEQUENCE_NODE) {
    bool maps = false, scalars = node->type == YAML_SCALAR_NODE;
    size_t count = 0;
    if (node->type == YAML_SEQUENCE_NODE) {
      count = (size_t)(node->data.sequence.items.top - node->data.sequence.items.start);
      for (size_t i = 0; i < count; i++) {
        yaml_node_t *item = node_at(d, node->data.sequence.items.start[i]);
        maps |= item->type == YAML_MAPPING_NODE;
        scalars |= item->type == YAML_SCALAR_NODE;
        if (item->type == YAML_SEQUENCE_NODE) {
          problem(d, item, 0, "search `%s`: a list inside a list", name);
          return false;
        }
      }
      if (count == 0) {
        problem(d, node, 0, "search `%s` is empty", name);
        return false;
      }
    }
    if (maps && scalars) {
      problem(d, node, 0, "search `%s` mixes maps and keywords", name);
      return false;
    }
    if (maps) {
      s->alternatives = calloc(count, sizeof *s->alternatives);
      for (size_t i = 0; i < count; i++) {
        s->alternative_count = i + 1;
        if (!parse_conjunction(d, node_at(d, node->data.sequence.items.start[i]), &s->alternatives[i]))
          return false;
      }
      return true;
    }
    if (is_null(node)) {
      problem(d, node, 0, "search `%s` is empty", name);
      return false;
    }
    s->alternatives = calloc(1, sizeof *s->alternatives);
    s->alternative_count = 1;
    s->alternatives[0].tests = calloc(1, sizeof(struct field_test));
    if (!parse_item(d, NULL, NULL, node, &s->alternatives[0].tests[0])) {
      field_test_clear(&s->alternatives[0].tests[0]);
      return false;
    }
    s->alternatives[0].test_count = 1;
    return true;
  }
  problem(d, node, 0, "search `%s` must be a map, a list of maps or a list of keywords", name);
  return false;
}

static bool parse_detection(struct document *d, yaml_node_t *detection, struct rule *r) {
  if (detection->type != YAML_MAPPING_NODE) {
    problem(d, detection, 0, "`detection` must be a map");
    return false;
  }
  yaml_node_t *condition = NULL;
  size_t count = (size_t)(detection->data.mapping.pairs.top - detection->data.mapping.pairs.start);
  r->searches = calloc(count ? count : 1, sizeof *r->searches);
  for (size_t i = 0; i < count; i++) {
    yaml_node_pair_t *pair = &detection->data.mapping.pairs.start[i];
    yaml_node_t *key = node_at(d, pair->key);
    const char *name = scalar(key);
    if (name == NULL) {
      problem(d, key, 0, "a search identifier must be a string");
      return false;
    }
    if (strcmp(name, "condition") == 0) {
      condition = node_at(d, pair->value);
      continue;
    }
    if (strcmp(name, "timeframe") == 0) continue; /* Sigma 1 aggregation window: see correlation rules */
    if (!parse_search(d, name, node_at(d, pair->value), &r->searches[r->search_count++])) return false;
  }
  if (condition == NULL) {
    problem(d, detection, 0, "`detection` has no `condition`");
    return false;
  }
  size_t conditions =
      condition->type == YAML_SEQUENCE_NODE
          ? (size_t)(condition->data.sequence.items.top - condition->data.sequence.items.start)
          : 1;
  if (conditions == 0) {
    problem(d, condition, 0, "`condition` is empty");
    return false;
  }
  r->conditions = calloc(conditions, sizeof *r->conditions);
  for (size_t i = 0; i < conditions; i++) {
    yaml_node_t *c = condition->type == YAML_SEQUENCE_NODE
                         ? node_at(d, condition->data.sequence.items.start[i])
                         : condition;
    const char *text = scalar(c);
    if (text == NULL || is_null(c)) {
      problem(d, c, 0, "`condition` must be a string or a list of strings");
      return false;
    }
    char message[256];
    size_t offset = 0;
    if (anomaly_condition_parse(text, r->searches, r->search_count, &r->conditions[i], &offset, message,
                                sizeof message) < 0) {
      /* the column of a plain or quoted scalar on one line: the node's column + offset (+1 quote) */
      unsigned shift = (unsigned)offset + (c->data.scalar.style == YAML_SINGLE_QUOTED_SCALAR_STYLE ||
                                                   c->data.scalar.style == YAML_DOUBLE_QUOTED_SCALAR_STYLE
                                               ? 1
                                               : 0);
      if (memchr(text, '\n', offset) || c->data.scalar.style == YAML_LITERAL_SCALAR_STYLE ||
          c->data.scalar.style == YAML_FOLDED_SCALAR_STYLE)
        shift = 0;
      problem(d, c, shift, "condition: %s", message);
      return false;
    }
    r->condition_count = i + 1;
  }
  return true;
}

/* ---- correlation ---- */

static bool parse_timespan(struct document *d, yaml_node_t *node, int64_t *ns) {
  const char *s = scalar(node);
  char *end = NULL;
  long long amount = s ? strtoll(s, &end, 10) : -1;
  int64_t unit = 0;
  if (end && end != s && end[1] == '\0') {
    switch (end[0]) {
      case 's':
        unit = 1;
        break;
      case 'm':
        unit = 60;
        break;
      case 'h':
        unit = 3600;
        break;
      case 'd':
        unit = 86400;
        break;
      case 'w':
        unit = 7 * 86400;
        break;
      default:
        unit = 0;
    }
  }
  if (unit == 0 || amount <= 0 || amount > 366LL * 86400 / unit) {
    problem(d, node, 0, "`timespan` must be a positive number followed by s, m, h, d or w (at most a year)");
    return false;
  }
  *ns = (int64_t)amount * unit * 1000000000;
  return true;
}

static bool parse_count_condition(struct document *d, yaml_node_t *node, struct rule *r, bool field_allowed) {
  if (node->type != YAML_MAPPING_NODE) {
    problem(d, node, 0, "`condition` must be a map of gt, gte, lt, lte, eq, neq");
    return false;
  }
  int criteria = 0;
  for (yaml_node_pair_t *pair = node->data.mapping.pairs.start; pair < node->data.mapping.pairs.top; pair++) {
    yaml_node_t *key = node_at(d, pair->key), *value = node_at(d, pair->value);
    const char *k = scalar(key);
    if (k && strcmp(k, "field") == 0) {
      if (!field_allowed) {
        problem(d, key, 0, "`field` belongs to value_count, value_sum and value_avg conditions");
        return false;
      }
      long n = string_list(d, value, "field", &r->value_fields);
      if (n <= 0) {
        if (n == 0) problem(d, value, 0, "`field` names no field");
        return false;
      }
      r->value_field_count = (size_t)n;
      continue;
    }
    int64_t number;
    if (!integer_of(value, &number)) {
      problem(d, value, 0, "`%s` takes an integer", k ? k : "?");
      return false;
    }
    struct count_condition *c = &r->condition;
    if (k && strcmp(k, "gt") == 0)
      c->has_gt = true, c->gt = number;
    else if (k && strcmp(k, "gte") == 0)
      c->has_gte = true, c->gte = number;
    else if (k && strcmp(k, "lt") == 0)
      c->has_lt = true, c->lt = number;
    else if (k && strcmp(k, "lte") == 0)
      c->has_lte = true, c->lte = number;
    else if (k && strcmp(k, "eq") == 0)
      c->has_eq = true, c->eq = number;
    else if (k && strcmp(k, "neq") == 0)
      c->has_neq = true, c->neq = number;
    else {
      problem(d, key, 0, "unknown condition criterion `%s` (gt, gte, lt, lte, eq, neq)", k ? k : "?");
      return false;
    }
    criteria++;
  }
  if (criteria == 0) {
    problem(d, node, 0, "`condition` holds no criterion (gt, gte, lt, lte, eq, neq)");
    return false;
  }
  if (field_allowed && r->value_field_count == 0) {
    problem(d, node, 0, "this correlation type needs `field` in its condition");
    return false;
  }
  return true;
}

static bool parse_correlation(struct document *d, yaml_node_t *top, yaml_node_t *correlation,
                              struct rule *r) {
  if (correlation->type != YAML_MAPPING_NODE) {
    problem(d, correlation, 0, "`correlation` must be a map");
    return false;
  }
  const char *type = string_member(d, correlation, "type", true);
  if (type == NULL) return false;
  static const struct {
    const char *name;
    enum rule_kind kind;
  } types[] = {{"event_count", RULE_EVENT_COUNT}, {"value_count", RULE_VALUE_COUNT},
               {"temporal", RULE_TEMPORAL},       {"temporal_ordered", RULE_TEMPORAL_ORDERED},
               {"value_sum", RULE_VALUE_SUM},     {"value_avg", RULE_VALUE_AVG}};
  r->kind = RULE_DETECTION;
  for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
    if (strcmp(type, types[i].name) == 0) r->kind = types[i].kind;
  if (r->kind == RULE_DETECTION) {
    problem(d, map_get(d, correlation, "type"), 0,
            "correlation type `%s` is not supported (event_count, value_count, temporal, temporal_ordered, "
            "value_sum, value_avg)",
            type);
    return false;
  }
  yaml_node_t *rules = map_get(d, correlation, "rules");
  if (rules == NULL) {
    problem(d, correlation, 0, "`rules` is required");
    return false;
  }
  long n = string_list(d, rules, "rules", &r->references);
  if (n < 0) return false;
  if (n == 0) {
    problem(d, rules, 0, "`rules` names no rule");
    return false;
  }
  r->reference_count = (size_t)n;
  n = string_list(d, map_get(d, correlation, "group-by"), "group-by", &r->group_by);
  if (n < 0) return false;
  r->group_by_count = (size_t)n;
  for (size_t i = 0; i < r->group_by_count; i++) r->group_by_agent |= strcmp(r->group_by[i], "agent") == 0;
  yaml_node_t *timespan = map_get(d, correlation, "timespan");
  if (timespan == NULL) timespan = map_get(d, correlation, "timeframe");
  if (timespan == NULL) {
    problem(d, correlation, 0, "`timespan` is required");
    return false;
  }
  if (!parse_timespan(d, timespan, &r->timespan_ns)) return false;
  yaml_node_t *condition = map_get(d, correlation, "condition");
  bool temporal = r->kind == RULE_TEMPORAL || r->kind == RULE_TEMPORAL_ORDERED;
  if (condition == NULL && !temporal) {
    problem(d, correlation, 0, "`condition` is required for %s", type);
    return false;
  }
  if (condition && !parse_count_condition(
                       d, condition, r,
                       r->kind == RULE_VALUE_COUNT || r->kind == RULE_VALUE_SUM || r->kind == RULE_VALUE_AVG))
    return false;
  if (temporal && condition == NULL)
    r->condition.has_gte = true, r->condition.gte = (int64_t)r->reference_count;
  yaml_node_t *aliases = map_get(d, correlation, "aliases");
  if (aliases) {
    if (aliases->type != YAML_MAPPING_NODE) {
      problem(d, aliases, 0, "`aliases` must be a map of alias → {rule: field}");
      return false;
    }
    size_t count = (size_t)(aliases->data.mapping.pairs.top - aliases->data.mapping.pairs.start);
    r->aliases = calloc(count ? count : 1, sizeof *r->aliases);
    for (size_t i = 0; i < count; i++) {
      yaml_node_pair_t *pair = &aliases->data.mapping.pairs.start[i];
      yaml_node_t *key = node_at(d, pair->key), *map = node_at(d, pair->value);
      if (scalar(key) == NULL || map->type != YAML_MAPPING_NODE) {
        problem(d, key, 0, "alias must map rule names to field names");
        return false;
      }
      struct alias *a = &r->aliases[r->alias_count++];
      a->name = strdup(scalar(key));
      size_t m = (size_t)(map->data.mapping.pairs.top - map->data.mapping.pairs.start);
      a->rule_names = calloc(m ? m : 1, sizeof *a->rule_names);
      a->fields = calloc(m ? m : 1, sizeof *a->fields);
      for (size_t j = 0; j < m; j++) {
        const char *rule = scalar(node_at(d, map->data.mapping.pairs.start[j].key));
        const char *field = scalar(node_at(d, map->data.mapping.pairs.start[j].value));
        if (rule == NULL || field == NULL) {
          problem(d, map, 0, "alias `%s` must map rule names to field names", a->name);
          return false;
        }
        a->rule_names[a->count] = strdup(rule);
        a->fields[a->count++] = strdup(field);
      }
    }
  }
  yaml_node_t *generate = map_get(d, correlation, "generate");
  if (generate == NULL) generate = map_get(d, top, "generate");
  if (generate && !boolean_of(generate, &r->generate)) {
    problem(d, generate, 0, "`generate` takes true or false");
    return false;
  }
  return true;
}

static bool parse_level(struct document *d, yaml_node_t *top, struct rule *r) {
  const char *level = string_member(d, top, "level", false);
  r->level = ANOMALY_LEVEL_MEDIUM;
  if (level == NULL) return !d->failed;
  dome_error err;
  if (anomaly_level_parse(level, &r->level, &err) < 0 || r->level == ANOMALY_LEVEL_NONE) {
    problem(d, map_get(d, top, "level"), 0, "`level` must be informational, low, medium, high or critical");
    return false;
  }
  r->level_given = true;
  return true;
}

static bool parse_rule(struct document *d, yaml_node_t *top, struct rule *r) {
  if (top->type != YAML_MAPPING_NODE) {
    problem(d, top, 0, "a rule must be a map");
    return false;
  }
  const char *id = string_member(d, top, "id", false);
  d->rule_id = id;
  r->line = (unsigned)top->start_mark.line + 1;
  r->column = (unsigned)top->start_mark.column + 1;
  const char *title = string_member(d, top, "title", true);
  if (title == NULL) return false;
  if (strlen(title) > 256) {
    problem(d, map_get(d, top, "title"), 0, "`title` is longer than 256 characters");
    return false;
  }
  const char *name = string_member(d, top, "name", false);
  const char *status = string_member(d, top, "status", false);
  if (d->failed) return false;
  static const char *const statuses[] = {"stable", "test", "experimental", "deprecated", "unsupported"};
  if (status) {
    size_t i = 0;
    while (i < 5 && strcmp(status, statuses[i]) != 0) i++;
    if (i == 5) {
      problem(d, map_get(d, top, "status"), 0,
              "`status` must be stable, test, experimental, deprecated or unsupported");
      return false;
    }
  }
  if (!parse_level(d, top, r)) return false;
  char **tags = NULL;
  long tag_count = string_list(d, map_get(d, top, "tags"), "tags", &tags);
  if (tag_count < 0) return false;
  r->tags = json_array();
  for (long i = 0; i < tag_count; i++) json_array_append_new(r->tags, json_string(tags[i]));
  free_strings(tags, (size_t)tag_count);
  r->id = id ? strdup(id) : NULL;
  r->name = name ? strdup(name) : NULL;
  r->title = strdup(title);
  r->status = status ? strdup(status) : NULL;
  r->file = strdup(d->file);
  yaml_node_t *detection = map_get(d, top, "detection"), *correlation = map_get(d, top, "correlation");
  if ((detection == NULL) == (correlation == NULL)) {
    problem(d, top, 0, "a rule has either `detection` or `correlation`%s",
            map_get(d, top, "filter") ? " (filter rules are not supported)" : "");
    return false;
  }
  if (correlation) return parse_correlation(d, top, correlation, r);
  r->kind = RULE_DETECTION;
  yaml_node_t *logsource = map_get(d, top, "logsource");
  if (logsource == NULL || logsource->type != YAML_MAPPING_NODE) {
    problem(d, logsource ? logsource : top, 0, "`logsource` (a map) is required");
    return false;
  }
  const char *product = string_member(d, logsource, "product", false);
  const char *service = string_member(d, logsource, "service", false);
  const char *category = string_member(d, logsource, "category", false);
  r->active = product && strcmp(product, "dome") == 0 && (service == NULL || strcmp(service, "audit") == 0) &&
              category == NULL;
  return !d->failed && parse_detection(d, detection, r);
}

void anomaly_rule_clear(struct rule *r) {
  free(r->id);
  free(r->name);
  free(r->title);
  free(r->status);
  free(r->file);
  json_decref(r->tags);
  for (size_t i = 0; i < r->search_count; i++) {
    struct search *s = &r->searches[i];
    for (size_t a = 0; a < s->alternative_count; a++) {
      for (size_t t = 0; t < s->alternatives[a].test_count; t++)
        field_test_clear(&s->alternatives[a].tests[t]);
      free(s->alternatives[a].tests);
    }
    free(s->alternatives);
    free(s->name);
  }
  free(r->searches);
  for (size_t i = 0; i < r->condition_count; i++) anomaly_condition_free(r->conditions[i]);
  free(r->conditions);
  free_strings(r->references, r->reference_count);
  free(r->referenced);
  free_strings(r->group_by, r->group_by_count);
  for (size_t i = 0; i < r->alias_count; i++) {
    free(r->aliases[i].name);
    free_strings(r->aliases[i].rule_names, r->aliases[i].count);
    free_strings(r->aliases[i].fields, r->aliases[i].count);
  }
  free(r->aliases);
  free_strings(r->value_fields, r->value_field_count);
  free(r->dependents);
  memset(r, 0, sizeof *r);
}

/* ---- loader ---- */

anomaly_loader *anomaly_loader_create(void) {
  anomaly_loader *l = calloc(1, sizeof *l);
  if (l == NULL) return NULL;
  l->problems = json_array();
  l->digest_state = malloc(sizeof(crypto_hash_sha256_state));
  if (l->problems == NULL || l->digest_state == NULL) {
    anomaly_loader_free(l);
    return NULL;
  }
  crypto_hash_sha256_init(l->digest_state);
  return l;
}

const json_t *anomaly_loader_problems(const anomaly_loader *loader) {
  return loader->problems;
}

int anomaly_loader_add_text(anomaly_loader *l, const char *file_name, const char *text, size_t length) {
  crypto_hash_sha256_update(l->digest_state, (const unsigned char *)file_name, strlen(file_name) + 1);
  crypto_hash_sha256_update(l->digest_state, (const unsigned char *)text, length);
  struct document d = {.file = file_name, .problems = l->problems};
  if (length > ANOMALY_MAX_FILE_BYTES) {
    problem(&d, NULL, 0, "file larger than %d bytes", ANOMALY_MAX_FILE_BYTES);
    return 0;
  }
  yaml_parser_t parser;
  if (!yaml_parser_initialize(&parser)) return 0;
  yaml_parser_set_input_string(&parser, (const unsigned char *)text, length);
  int added = 0;
  for (int documents = 0;; documents++) {
    yaml_document_t document;
    if (!yaml_parser_load(&parser, &document)) {
      json_array_append_new(
          l->problems,
          json_sprintf("%s:%zu:%zu: rule -: YAML: %s%s%s", file_name, parser.problem_mark.line + 1,
                       parser.problem_mark.column + 1, parser.problem ? parser.problem : "malformed",
                       parser.context ? " " : "", parser.context ? parser.context : ""));
      break;
    }
    yaml_node_t *top = yaml_document_get_root_node(&document);
    if (top == NULL) {
      yaml_document_delete(&document);
      if (documents == 0)
        json_array_append_new(l->problems, json_sprintf("%s:1:1: rule -: no rule in the file", file_name));
      break;
    }
    d.yaml = &document;
    d.failed = false;
    d.rule_id = NULL;
    struct rule r = {0};
    if (l->rule_count >= ANOMALY_MAX_RULES) {
      problem(&d, top, 0, "more than %d rules", ANOMALY_MAX_RULES);
    } else if (parse_rule(&d, top, &r) && !d.failed) {
      if (l->rule_count == l->rule_capacity) {
        size_t capacity = l->rule_capacity ? l->rule_capacity * 2 : 64;
        struct rule *grown = realloc(l->rules, capacity * sizeof *grown);
        if (grown == NULL) {
          anomaly_rule_clear(&r);
          yaml_document_delete(&document);
          break;
        }
        l->rules = grown;
        l->rule_capacity = capacity;
      }
      l->rules[l->rule_count++] = r;
      added++;
      r = (struct rule){0};
    }
    anomaly_rule_clear(&r);
    yaml_document_delete(&document);
  }
  yaml_parser_delete(&parser);
  return added;
}

void anomaly_loader_free(anomaly_loader *l) {
  if (l == NULL) return;
  for (size_t i = 0; i < l->rule_count; i++) anomaly_rule_clear(&l->rules[i]);
  free(l->rules);
  json_decref(l->problems);
  free(l->digest_state);
  free(l);
}
