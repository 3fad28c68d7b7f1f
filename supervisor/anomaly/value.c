/* Values of Sigma detection items and their comparison with event members
 * (sigma-rules-specification.md "Detection", sigma-appendix-modifiers.md). */
#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "supervisor/anomaly/anomaly_internal.h"

static unsigned char fold(unsigned char c) {
  return c >= 'A' && c <= 'Z' ? (unsigned char)(c + 32) : c;
}

static bool is_dash(const char *text, size_t length, size_t *width) {
  unsigned char c = (unsigned char)text[0];
  if (c == '-' || c == '/') {
    *width = 1;
    return true;
  }
  /* U+2013 en dash, U+2014 em dash, U+2015 horizontal bar */
  if (length >= 3 && c == 0xE2 && (unsigned char)text[1] == 0x80 && (unsigned char)text[2] >= 0x93 &&
      (unsigned char)text[2] <= 0x95) {
    *width = 3;
    return true;
  }
  return false;
}

static size_t code_point_width(const char *text, size_t length) {
  unsigned char c = (unsigned char)text[0];
  size_t width = c < 0x80 ? 1 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
  return width > length ? length : width;
}

/* Tokens of a Sigma string value: `*` and `?` wildcards unless `literal`, `\*` `\?` `\\` escapes (any
 * other backslash is itself); with windash every dash character becomes TOKEN_DASH. */
int anomaly_pattern_compile(const char *text, size_t length, bool cased, bool windash, bool literal,
                            uint16_t **tokens, size_t *count) {
  uint16_t *out = malloc((length + 1) * sizeof *out);
  if (out == NULL) return -ENOMEM;
  size_t n = 0;
  for (size_t i = 0; i < length; i++) {
    unsigned char c = (unsigned char)text[i];
    size_t width;
    if (!literal && c == '\\' && i + 1 < length &&
        (text[i + 1] == '*' || text[i + 1] == '?' || text[i + 1] == '\\')) {
      c = (unsigned char)text[++i];
      out[n++] = cased ? c : fold(c);
    } else if (!literal && c == '*') {
      if (n == 0 || out[n - 1] != TOKEN_STAR) out[n++] = TOKEN_STAR;
    } else if (!literal && c == '?') {
      out[n++] = TOKEN_ONE;
    } else if (windash && is_dash(text + i, length - i, &width)) {
      out[n++] = TOKEN_DASH;
      i += width - 1;
    } else {
      out[n++] = cased ? c : fold(c);
    }
  }
  *tokens = out;
  *count = n;
  return 0;
}

/* Iterative wildcard match: on a mismatch, the last `*` takes one more code point. Linear in the
 * subject for a pattern with one star, O(pattern x subject) at worst. */
bool anomaly_pattern_match(const uint16_t *tokens, size_t count, const char *subject, size_t length,
                           bool cased) {
  size_t t = 0, s = 0, star_t = SIZE_MAX, star_s = 0;
  while (s < length) {
    if (t < count) {
      uint16_t token = tokens[t];
      if (token == TOKEN_STAR) {
        star_t = t++;
        star_s = s;
        continue;
      }
      if (token == TOKEN_ONE) {
        s += code_point_width(subject + s, length - s);
        t++;
        continue;
      }
      size_t width;
      if (token == TOKEN_DASH) {
        if (is_dash(subject + s, length - s, &width)) {
          s += width;
          t++;
          continue;
        }
      } else {
        unsigned char c = (unsigned char)subject[s];
        if ((cased ? c : fold(c)) == token) {
          s++;
          t++;
          continue;
        }
      }
    }
    if (star_t == SIZE_MAX) return false;
    t = star_t + 1;
    star_s += code_point_width(subject + star_s, length - star_s);
    s = star_s;
  }
  while (t < count && tokens[t] == TOKEN_STAR) t++;
  return t == count;
}

const json_t *anomaly_lookup(const json_t *event, const char *field, size_t length) {
  if (!json_is_object(event)) return NULL;
  const json_t *whole = json_object_getn(event, field, length);
  if (whole) return whole;
  for (size_t i = 0; i < length; i++) {
    if (field[i] != '.') continue;
    const json_t *child = json_object_getn(event, field, i);
    if (json_is_object(child)) {
      const json_t *found = anomaly_lookup(child, field + i + 1, length - i - 1);
      if (found) return found;
    } else if (json_is_array(child)) { /* a list of objects: the first element holding the rest */
      size_t k;
      const json_t *element;
      json_array_foreach(child, k, element) {
        const json_t *found = anomaly_lookup(element, field + i + 1, length - i - 1);
        if (found) return found;
      }
    }
  }
  return NULL;
}

bool anomaly_lookup_each(const json_t *event, const char *field, size_t length,
                         bool (*each)(const json_t *member, void *context), void *context) {
  if (!json_is_object(event)) return false;
  const json_t *whole = json_object_getn(event, field, length);
  if (whole && each(whole, context)) return true;
  for (size_t i = 0; i < length; i++) {
    if (field[i] != '.') continue;
    const json_t *child = json_object_getn(event, field, i);
    if (json_is_object(child) && anomaly_lookup_each(child, field + i + 1, length - i - 1, each, context))
      return true;
    if (json_is_array(child)) {
      size_t k;
      const json_t *element;
      json_array_foreach(child, k, element) if (anomaly_lookup_each(element, field + i + 1, length - i - 1,
                                                                    each, context)) return true;
    }
  }
  return false;
}

int anomaly_base64_encode(const unsigned char *data, size_t length, char **out, size_t *out_length) {
  static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  size_t size = (length + 2) / 3 * 4;
  char *text = malloc(size + 1);
  if (text == NULL) return -ENOMEM;
  size_t o = 0;
  for (size_t i = 0; i < length; i += 3) {
    uint32_t triple = (uint32_t)data[i] << 16;
    if (i + 1 < length) triple |= (uint32_t)data[i + 1] << 8;
    if (i + 2 < length) triple |= data[i + 2];
    text[o++] = alphabet[triple >> 18 & 63];
    text[o++] = alphabet[triple >> 12 & 63];
    text[o++] = i + 1 < length ? alphabet[triple >> 6 & 63] : '=';
    text[o++] = i + 2 < length ? alphabet[triple & 63] : '=';
  }
  text[o] = '\0';
  *out = text;
  *out_length = o;
  return 0;
}

/* The text a scalar member is compared as: strings as they are, numbers in decimal, booleans as
 * true/false. Returns false for null, arrays and objects. */
static bool member_text(const json_t *member, char *buffer, size_t size, const char **text, size_t *length) {
  switch (json_typeof(member)) {
    case JSON_STRING:
      *text = json_string_value(member);
      *length = json_string_length(member);
      return true;
    case JSON_INTEGER:
      *length = (size_t)snprintf(buffer, size, "%lld", (long long)json_integer_value(member));
      *text = buffer;
      return true;
    case JSON_REAL:
      *length = (size_t)snprintf(buffer, size, "%.17g", json_real_value(member));
      *text = buffer;
      return true;
    case JSON_TRUE:
    case JSON_FALSE:
      *text = json_is_true(member) ? "true" : "false";
      *length = strlen(*text);
      return true;
    default:
      return false;
  }
}

static bool member_number(const json_t *member, double *number) {
  if (json_is_number(member)) {
    *number = json_number_value(member);
    return true;
  }
  if (!json_is_string(member) || json_string_length(member) == 0 || json_string_length(member) > 64)
    return false;
  char *end;
  errno = 0;
  *number = strtod(json_string_value(member), &end);
  return errno == 0 && *end == '\0' && isfinite(*number);
}

static bool cidr_match(const struct value *value, const char *text, size_t length) {
  char address[64];
  if (length >= sizeof address) return false;
  memcpy(address, text, length);
  address[length] = '\0';
  unsigned char bytes[16];
  if (inet_pton(value->family == 4 ? AF_INET : AF_INET6, address, bytes) != 1) return false;
  unsigned whole = value->prefix / 8, rest = value->prefix % 8;
  if (memcmp(bytes, value->network, whole) != 0) return false;
  if (rest == 0) return true;
  unsigned char mask = (unsigned char)(0xFF << (8 - rest));
  return (bytes[whole] & mask) == (value->network[whole] & mask);
}

void anomaly_value_shape(struct value *v) {
  v->shape = SHAPE_GENERAL;
  if (v->kind != VALUE_PATTERN || v->variant_tokens[0]) return;
  size_t start = 0, end = v->token_count;
  bool leading = end > 0 && v->tokens[0] == TOKEN_STAR;
  if (leading) start++;
  bool trailing = end > start && v->tokens[end - 1] == TOKEN_STAR;
  if (trailing) end--;
  for (size_t i = start; i < end; i++)
    if (v->tokens[i] >= 256) return;
  unsigned char *literal = malloc(end - start + 1);
  if (literal == NULL) return;
  for (size_t i = start; i < end; i++) literal[i - start] = (unsigned char)v->tokens[i];
  literal[end - start] = '\0';
  v->literal = literal;
  v->literal_has_nul = memchr(literal, '\0', end - start) != NULL;
  v->literal_length = end - start;
  v->shape = leading && trailing ? SHAPE_CONTAINS
             : leading           ? SHAPE_SUFFIX
             : trailing          ? SHAPE_PREFIX
                                 : SHAPE_EXACT;
}

static bool same_bytes(const unsigned char *literal, const char *text, size_t length, bool cased) {
  for (size_t i = 0; i < length; i++) {
    unsigned char c = (unsigned char)text[i];
    if ((cased ? c : fold(c)) != literal[i]) return false;
  }
  return true;
}

void anomaly_scratch_release(struct anomaly_scratch *scratch) {
  for (size_t i = 0; i < ANOMALY_FOLDED_TEXTS; i++) {
    free(scratch->folded[i].folded);
    scratch->folded[i] = (struct anomaly_folded_text){0};
  }
  for (size_t i = 0; scratch->hits && i < scratch->automaton_count; i++) free(scratch->hits[i].bits);
  free(scratch->hits);
  scratch->hits = NULL;
  free(scratch->members);
  free(scratch->member_generations);
  scratch->members = NULL;
  scratch->member_generations = NULL;
  scratch->field_count = 0;
  scratch->automata = NULL;
  scratch->automaton_count = 0;
}

int anomaly_scratch_prepare(struct anomaly_scratch *scratch, const anomaly_rule_set *set) {
  scratch->automata = set->automata;
  scratch->automaton_count = set->automaton_count;
  scratch->hits = calloc(set->automaton_count + 1, sizeof *scratch->hits);
  scratch->members = calloc(set->field_count + 1, sizeof *scratch->members);
  scratch->member_generations = calloc(set->field_count + 1, sizeof *scratch->member_generations);
  if (scratch->hits == NULL || scratch->members == NULL || scratch->member_generations == NULL)
    return -ENOMEM;
  scratch->field_count = set->field_count;
  for (size_t i = 0; i < set->automaton_count; i++) {
    scratch->hits[i].bits = calloc((set->automata[i].literal_count + 63) / 64 + 1, sizeof(uint64_t));
    if (scratch->hits[i].bits == NULL) return -ENOMEM;
  }
  return 0;
}

/* Whether the automaton's literal of `v` occurs in `text` (an event member's string: its bytes stay
 * put during the event), scanning the text once per event for all the automaton's literals. */
const uint64_t *anomaly_automaton_hits(size_t automaton, const char *text, size_t length,
                                       struct anomaly_scratch *scratch) {
  struct anomaly_automaton_hits *hits = &scratch->hits[automaton - 1];
  if (hits->generation != scratch->generation || hits->text != text || hits->length != length) {
    anomaly_automaton_scan(&scratch->automata[automaton - 1], text, length, hits->bits);
    hits->generation = scratch->generation;
    hits->text = text;
    hits->length = length;
  }
  return hits->bits;
}

static bool automaton_hit(const struct value *v, const char *text, size_t length,
                          struct anomaly_scratch *scratch) {
  const uint64_t *bits = anomaly_automaton_hits(v->automaton, text, length, scratch);
  return bits[v->literal_index / 64] >> (v->literal_index % 64) & 1;
}

/* False when the event string `text` holds none of the literals every match of the regular
 * expression holds (then it cannot match); true otherwise. */
static bool regex_may_match(const struct value *v, const char *text, size_t length,
                            struct anomaly_scratch *scratch) {
  const uint64_t *bits = anomaly_automaton_hits(v->automaton, text, length, scratch);
  for (size_t i = 0; i < v->required_count; i++)
    if (bits[v->required[i].index / 64] >> (v->required[i].index % 64) & 1) return true;
  return false;
}

/* `text` (length bytes) case-folded, folded once per event; NULL when out of memory. */
static const char *folded_text(struct anomaly_scratch *scratch, const char *text, size_t length) {
  for (size_t i = 0; i < ANOMALY_FOLDED_TEXTS; i++) {
    struct anomaly_folded_text *f = &scratch->folded[i];
    if (f->generation == scratch->generation && f->text == text && f->length == length) return f->folded;
  }
  struct anomaly_folded_text *f = &scratch->folded[scratch->next];
  if (f->capacity < length + 1) {
    size_t capacity = length + 1 > 2 * f->capacity ? length + 1 : 2 * f->capacity;
    char *grown = realloc(f->folded, capacity);
    if (grown == NULL) return NULL;
    f->folded = grown;
    f->capacity = capacity;
  }
  for (size_t i = 0; i < length; i++) f->folded[i] = (char)fold((unsigned char)text[i]);
  f->folded[length] = '\0';
  f->text = text;
  f->length = length;
  f->generation = scratch->generation;
  scratch->next = (scratch->next + 1) % ANOMALY_FOLDED_TEXTS;
  return f->folded;
}

/* `stable`: text is an event member's string (not a number formatted in a buffer), so the per-event
 * copies and hits keyed by its address answer for it. */
static bool literal_match(const struct value *v, const char *text, size_t length, bool stable,
                          struct anomaly_scratch *scratch) {
  size_t n = v->literal_length;
  if (n > length) return false;
  switch (v->shape) {
    case SHAPE_EXACT:
      return n == length && same_bytes(v->literal, text, n, v->cased);
    case SHAPE_PREFIX:
      return same_bytes(v->literal, text, n, v->cased);
    case SHAPE_SUFFIX:
      return same_bytes(v->literal, text + length - n, n, v->cased);
    default: {
      if (n == 0) return true;
      /* the C library's searches (vectorized) when neither side holds a NUL byte */
      if (v->cased) return memmem(text, length, v->literal, n) != NULL;
      if (v->automaton && stable && scratch && scratch->hits) return automaton_hit(v, text, length, scratch);
      const char *folded = stable && scratch ? folded_text(scratch, text, length) : NULL;
      if (folded) return memmem(folded, length, v->literal, n) != NULL; /* the literal is folded */
      unsigned char first = v->literal[0];
      for (size_t i = 0; i + n <= length; i++) {
        unsigned char c = (unsigned char)text[i];
        if ((v->cased ? c : fold(c)) == first && same_bytes(v->literal + 1, text + i + 1, n - 1, v->cased))
          return true;
      }
      return false;
    }
  }
}

static bool scalar_match(const struct value *value, const json_t *member, const json_t *event,
                         struct anomaly_scratch *scratch) {
  char buffer[64];
  const char *text;
  size_t length;
  double number;
  switch (value->kind) {
    case VALUE_NULL:
      return json_is_null(member);
    case VALUE_PATTERN:
      if (!member_text(member, buffer, sizeof buffer, &text, &length)) return false;
      if (value->shape != SHAPE_GENERAL)
        return literal_match(value, text, length, json_is_string(member), scratch);
      if (anomaly_pattern_match(value->tokens, value->token_count, text, length, value->cased)) return true;
      for (size_t i = 0; i < 2; i++)
        if (value->variant_tokens[i] &&
            anomaly_pattern_match(value->variant_tokens[i], value->variant_counts[i], text, length,
                                  value->cased))
          return true;
      return false;
    case VALUE_NUMBER:
      if (json_is_number(member)) return json_number_value(member) == value->number;
      return json_is_string(member) &&
             anomaly_pattern_match(value->tokens, value->token_count, json_string_value(member),
                                   json_string_length(member), false);
    case VALUE_BOOLEAN:
      if (json_is_boolean(member)) return json_is_true(member) == value->boolean;
      return json_is_string(member) &&
             strcasecmp(json_string_value(member), value->boolean ? "true" : "false") == 0;
    case VALUE_COMPARE:
      if (!member_number(member, &number)) return false;
      switch (value->op) {
        case COMPARE_GT:
          return number > value->number;
        case COMPARE_GTE:
          return number >= value->number;
        case COMPARE_LT:
          return number < value->number;
        default:
          return number <= value->number;
      }
    case VALUE_REGEX:
      if (!member_text(member, buffer, sizeof buffer, &text, &length)) return false;
      if (value->automaton && json_is_string(member) && scratch && scratch->hits &&
          !regex_may_match(value, text, length, scratch))
        return false;
      return pcre2_match(value->regex, (PCRE2_SPTR)text, length, 0, PCRE2_NO_UTF_CHECK, scratch->match_data,
                         NULL) >= 0;
    case VALUE_CIDR:
      return json_is_string(member) &&
             cidr_match(value, json_string_value(member), json_string_length(member));
    case VALUE_FIELDREF: {
      const json_t *other = anomaly_lookup(event, value->field, strlen(value->field));
      if (other == NULL) return false;
      char other_buffer[64];
      const char *other_text;
      size_t other_length;
      if (!member_text(member, buffer, sizeof buffer, &text, &length) ||
          !member_text(other, other_buffer, sizeof other_buffer, &other_text, &other_length))
        return json_equal((json_t *)member, (json_t *)other);
      if (length != other_length) return false;
      for (size_t i = 0; i < length; i++)
        if ((value->cased ? (unsigned char)text[i] : fold((unsigned char)text[i])) !=
            (value->cased ? (unsigned char)other_text[i] : fold((unsigned char)other_text[i])))
          return false;
      return true;
    }
  }
  return false;
}

bool anomaly_value_match(const struct value *value, const json_t *member, const json_t *event,
                         struct anomaly_scratch *scratch) {
  if (member == NULL) return value->kind == VALUE_NULL;
  if (json_is_array(member)) {
    size_t i;
    const json_t *element;
    json_array_foreach(member, i, element) if (scalar_match(value, element, event, scratch)) return true;
    return value->kind == VALUE_NULL && json_array_size(member) == 0;
  }
  return scalar_match(value, member, event, scratch);
}

void anomaly_value_clear(struct value *value) {
  free(value->tokens);
  free(value->variant_tokens[0]);
  free(value->variant_tokens[1]);
  free(value->literal);
  if (value->regex) pcre2_code_free(value->regex);
  free(value->field);
  free(value->source);
  for (size_t i = 0; i < value->required_count; i++) free(value->required[i].text);
  free(value->required);
  memset(value, 0, sizeof *value);
}
