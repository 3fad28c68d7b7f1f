/* Canonical event text (docs/journal-format.md section 3): byte for byte what jansson's
 * json_dumps(value, JSON_SORT_KEYS | JSON_COMPACT) produces, written without jansson's per-call
 * overhead (a callback per token, a key array allocation and a hash lookup per member, snprintf per
 * integer) for the values events are made of: objects, arrays, integers, true/false/null and ASCII
 * strings. Anything else (a real, a non-ASCII byte, nesting deeper than CANONICAL_MAX_DEPTH) makes the
 * caller fall back to jansson itself for the whole event, so the output never differs from jansson's. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "supervisor/audit/journal.h"
#include "supervisor/audit/journal_internal.h"

#define CANONICAL_MAX_DEPTH 32
#define CANONICAL_STACK_MEMBERS 32
#define CANONICAL_UNSUPPORTED 1 /* not an error: use jansson */

static int reserve(canonical_buffer *b, size_t more) {
  if (b->capacity - b->length >= more) return 0;
  if (b->length + more > JOURNAL_MAX_EVENT_BYTES) {
    b->too_big = true;
    return -E2BIG;
  }
  size_t capacity = b->capacity ? b->capacity * 2 : 4096;
  while (capacity - b->length < more) capacity *= 2;
  char *grown = b->heap ? realloc(b->data, capacity) : malloc(capacity);
  if (!grown) return -ENOMEM;
  if (!b->heap && b->length) memcpy(grown, b->data, b->length);
  b->data = grown;
  b->capacity = capacity;
  b->heap = true;
  return 0;
}

static int put(canonical_buffer *b, const char *text, size_t length) {
  int r = reserve(b, length);
  if (r) return r;
  memcpy(b->data + b->length, text, length);
  b->length += length;
  return 0;
}

/* Bytes put_string does not copy as they are. */
static const bool special[256] = {
    [0x00 ... 0x1f] = true, ['"'] = true, ['\\'] = true, [0x80 ... 0xff] = true};

/* A JSON string of ASCII bytes, escaped as jansson does: \" \\ \b \f \n \r \t, other control
 * characters as \u00XX with upper-case hex; '/' and DEL as they are. */
static int put_string(canonical_buffer *b, const char *text, size_t length) {
  int r = reserve(b, length + 2);
  if (r < 0) return r;
  char *o = b->data + b->length;
  *o++ = '"';
  size_t start = 0;
  for (size_t i = 0; i < length; i++) {
    unsigned char c = (unsigned char)text[i];
    if (!special[c]) continue;
    if (c >= 0x80) return CANONICAL_UNSUPPORTED;
    memcpy(o, text + start, i - start);
    o += i - start;
    b->length = (size_t)(o - b->data);
    r = reserve(b, 6 + (length - i) + 1);
    if (r < 0) return r;
    o = b->data + b->length;
    *o++ = '\\';
    switch (c) {
      case '"':
        *o++ = '"';
        break;
      case '\\':
        *o++ = '\\';
        break;
      case '\b':
        *o++ = 'b';
        break;
      case '\f':
        *o++ = 'f';
        break;
      case '\n':
        *o++ = 'n';
        break;
      case '\r':
        *o++ = 'r';
        break;
      case '\t':
        *o++ = 't';
        break;
      default:
        memcpy(o, "u00", 3);
        o[3] = "0123456789ABCDEF"[c >> 4];
        o[4] = "0123456789ABCDEF"[c & 15];
        o += 5;
    }
    start = i + 1;
  }
  memcpy(o, text + start, length - start);
  o += length - start;
  *o++ = '"';
  b->length = (size_t)(o - b->data);
  return 0;
}

static int put_integer(canonical_buffer *b, json_int_t value) {
  char digits[24], *p = digits + sizeof digits;
  unsigned long long magnitude = value < 0 ? 0ull - (unsigned long long)value : (unsigned long long)value;
  do *--p = (char)('0' + magnitude % 10);
  while (magnitude /= 10);
  if (value < 0) *--p = '-';
  return put(b, p, (size_t)(digits + sizeof digits - p));
}

typedef struct member {
  const char *key;
  size_t length;
  json_t *value;
} member;

/* jansson's key order: memcmp of the common prefix, then the shorter key first. */
static int compare_members(const void *a, const void *b) {
  const member *x = a, *y = b;
  int c = memcmp(x->key, y->key, x->length < y->length ? x->length : y->length);
  if (c) return c;
  return x->length < y->length ? -1 : x->length > y->length;
}

static int put_value(canonical_buffer *b, json_t *value, int depth);

static int put_object(canonical_buffer *b, json_t *object, int depth) {
  size_t count = json_object_size(object);
  member stack[CANONICAL_STACK_MEMBERS];
  member *members = count <= CANONICAL_STACK_MEMBERS ? stack : malloc(count * sizeof *members);
  if (!members) return -ENOMEM;
  size_t n = 0;
  for (void *iter = json_object_iter(object); iter && n < count; iter = json_object_iter_next(object, iter))
    members[n++] =
        (member){json_object_iter_key(iter), json_object_iter_key_len(iter), json_object_iter_value(iter)};
  if (n <= 16) {
    for (size_t i = 1; i < n; i++) /* insertion sort: events have a dozen members */
      for (size_t k = i; k > 0 && compare_members(&members[k - 1], &members[k]) > 0; k--) {
        member t = members[k];
        members[k] = members[k - 1];
        members[k - 1] = t;
      }
  } else {
    qsort(members, n, sizeof *members, compare_members);
  }
  int r = put(b, "{", 1);
  bool top = depth == 0, seq_cut = false, time_cut = false;
  if (top) b->cuts_known = true;
  for (size_t i = 0; r == 0 && i < n; i++) {
    if (i) r = put(b, ",", 1);
    if (top) { /* where the journal's `seq` and `time` go: before the first key sorting after each */
      static const member seq = {"seq", 3, NULL}, time = {"time", 4, NULL};
      int to_seq = compare_members(&members[i], &seq), to_time = compare_members(&members[i], &time);
      if (to_seq == 0 || to_time == 0) b->reserved_key = true;
      if (!seq_cut && to_seq > 0) b->cut_seq = b->length, seq_cut = true;
      if (!time_cut && to_time > 0) b->cut_time = b->length, time_cut = true;
      if (memchr(members[i].key, '"', members[i].length) || memchr(members[i].key, '\\', members[i].length))
        b->cuts_known = false; /* an escaped top-level key: the caller's own scan refuses it */
      for (size_t k = 0; k < members[i].length; k++)
        if ((unsigned char)members[i].key[k] < 0x20) b->cuts_known = false;
    }
    if (r == 0) r = put_string(b, members[i].key, members[i].length);
    if (r == 0) r = put(b, ":", 1);
    if (r == 0) r = put_value(b, members[i].value, depth + 1);
  }
  if (top && !seq_cut) b->cut_seq = b->length;
  if (top && !time_cut) b->cut_time = b->length;
  if (r == 0) r = put(b, "}", 1);
  if (members != stack) free(members);
  return r;
}

static int put_value(canonical_buffer *b, json_t *value, int depth) {
  if (depth > CANONICAL_MAX_DEPTH) return CANONICAL_UNSUPPORTED;
  switch (json_typeof(value)) {
    case JSON_OBJECT:
      return put_object(b, value, depth);
    case JSON_ARRAY: {
      int r = put(b, "[", 1);
      size_t n = json_array_size(value);
      for (size_t i = 0; r == 0 && i < n; i++) {
        if (i) r = put(b, ",", 1);
        if (r == 0) r = put_value(b, json_array_get(value, i), depth + 1);
      }
      return r == 0 ? put(b, "]", 1) : r;
    }
    case JSON_STRING:
      return put_string(b, json_string_value(value), json_string_length(value));
    case JSON_INTEGER:
      return put_integer(b, json_integer_value(value));
    case JSON_TRUE:
      return put(b, "true", 4);
    case JSON_FALSE:
      return put(b, "false", 5);
    case JSON_NULL:
      return put(b, "null", 4);
    default:
      return CANONICAL_UNSUPPORTED; /* reals: jansson's %.17g rules */
  }
}

static int jansson_sink(const char *text, size_t size, void *data) {
  return put(data, text, size) == 0 ? 0 : -1;
}

int journal_canonical_dump(json_t *value, canonical_buffer *b) {
  if (!json_is_object(value) && !json_is_array(value)) return -EINVAL; /* as json_dumps */
  size_t start = b->length;
  int r = put_value(b, value, 0);
  if (r != CANONICAL_UNSUPPORTED) return r;
  b->length = start;
  b->cuts_known = b->reserved_key = false;
  if (json_dump_callback(value, jansson_sink, b, JSON_SORT_KEYS | JSON_COMPACT) == 0) return 0;
  /* jansson failed: the text grew past the limit, or it cannot be serialised (invalid UTF-8, NaN). */
  return b->too_big ? -E2BIG : -EINVAL;
}

void journal_canonical_buffer_init(canonical_buffer *b) {
  b->data = b->stack;
  b->length = 0;
  b->capacity = sizeof b->stack;
  b->heap = false;
  b->too_big = false;
  b->cuts_known = b->reserved_key = false;
  b->cut_seq = b->cut_time = 0;
}

void journal_canonical_buffer_free(canonical_buffer *b) {
  if (b->heap) free(b->data);
  journal_canonical_buffer_init(b);
}

bool journal_line_next_key(const char *line, size_t length, size_t *at, size_t *key, size_t *key_length) {
  int depth = *at ? 1 : 0; /* a later call starts just after a top-level key */
  bool in_string = false;
  for (size_t i = *at; i < length; i++) {
    char c = line[i];
    if (in_string) {
      if (c == '\\')
        i++;
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (c == '"') {
      if (depth == 1 && (line[i - 1] == '{' || line[i - 1] == ',')) {
        size_t end = i + 1;
        while (end < length && line[end] != '"') end += line[end] == '\\' ? 2 : 1;
        if (end >= length) break;
        *key = i + 1;
        *key_length = end - i - 1;
        *at = end + 1;
        return true;
      }
      in_string = true;
    } else if (c == '{' || c == '[') {
      depth++;
    } else if (c == '}' || c == ']') {
      depth--;
    }
  }
  *at = length;
  return false;
}
