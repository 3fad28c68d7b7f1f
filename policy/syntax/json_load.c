/* NUL-safe JSON loading on top of jansson (see cedar_json_loadb in entities.h). */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "policy/syntax/syntax.h"
#include "policy/schema/schema.h"

static const char nul_sentinel[4] = {(char)0xf3, (char)0xb0, (char)0x80, (char)0x80};

/* Byte classes for compact(): JSON whitespace (RFC 8259 section 2, the only bytes dropped), the bytes
 * that delimit tokens, and the bytes that end a run of plain string content. */
enum { PLAIN = 0, SPACE = 1, DELIM = 2, QUOTE = 4, BACKSLASH = 8 };
static const unsigned char byte_class[256] = {
    [' '] = SPACE, ['\n'] = SPACE, ['\r'] = SPACE, ['\t'] = SPACE, ['{'] = DELIM,         ['}'] = DELIM,
    ['['] = DELIM, [']'] = DELIM,  [','] = DELIM,  [':'] = DELIM,  ['"'] = DELIM | QUOTE, ['\\'] = BACKSLASH,
};

/* One pass over text: drop the whitespace between tokens (jansson's lexer spends tens of instructions on
 * each byte it reads, whitespace included) and turn every "\u0000" inside a string into the escaped
 * sentinel U+F0000. Whitespace between two bare tokens (numbers, true/false/null, stray bytes) is kept
 * as one space so that two tokens are never joined (`[1 2]` stays invalid). out must hold 2 * length
 * bytes (a 6-byte escape becomes 12). Returns the output length; *nul tells whether a NUL escape was
 * rewritten. Anything else, an unterminated string included, is copied for jansson to judge. */
static size_t compact(const char *text, size_t length, char *out, bool *nul) {
  const unsigned char *p = (const unsigned char *)text, *end = p + length;
  char *o = out;
  while (p < end) {
    unsigned char c = *p;
    unsigned cls = byte_class[c];
    if (cls & SPACE) {
      do p++;
      while (p < end && (byte_class[*p] & SPACE));
      if (o > out && p < end && !(byte_class[(unsigned char)o[-1]] & DELIM) && !(byte_class[*p] & DELIM))
        *o++ = ' ';
      continue;
    }
    *o++ = (char)c;
    p++;
    if (!(cls & QUOTE)) continue;
    for (;;) { /* string content */
      while (p < end && !(byte_class[*p] & (QUOTE | BACKSLASH))) *o++ = (char)*p++;
      if (p >= end) break;
      if (*p == '"') {
        *o++ = '"';
        p++;
        break;
      }
      if (p + 1 >= end) { /* a backslash ending the text */
        *o++ = (char)*p++;
        break;
      }
      if (p[1] == 'u' && end - p >= 6 && memcmp(p + 2, "0000", 4) == 0) {
        memcpy(o, "\\udb80\\udc00", 12);
        o += 12;
        p += 6;
        *nul = true;
      } else {
        o[0] = (char)p[0];
        o[1] = (char)p[1];
        o += 2;
        p += 2;
      }
    }
  }
  return (size_t)(o - out);
}

json_t *cedar_json_loadb(const char *text, size_t length, void *json_error) {
  json_error_t *error = json_error;
  const size_t flags = JSON_ALLOW_NUL | JSON_REJECT_DUPLICATES;
  char small[4096];
  small[0] = 0; /* (an empty text leaves it unwritten) */
  char *buf = length <= sizeof small / 2 ? small : malloc(length * 2 + 1);
  if (!buf) {
    if (error) snprintf(error->text, sizeof error->text, "out of memory");
    return NULL;
  }
  bool nul = false;
  size_t n = compact(text, length, buf, &nul);
  json_t *root = json_loadb(buf, n, flags, error);
  if (!root && n != length) {
    /* The error position jansson reports must be one of the text as given: parse the text again with
     * only the NUL escapes rewritten (the error path only). */
    if (nul) {
      bool in_string = false;
      n = 0;
      for (size_t i = 0; i < length; i++) {
        char c = text[i];
        if (c == '"') in_string = !in_string;
        if (in_string && c == '\\' && i + 5 < length && text[i + 1] == 'u' &&
            memcmp(text + i + 2, "0000", 4) == 0) {
          memcpy(buf + n, "\\udb80\\udc00", 12);
          n += 12;
          i += 5;
        } else if (in_string && c == '\\' && i + 1 < length) {
          buf[n++] = c;
          buf[n++] = text[++i];
        } else {
          buf[n++] = c;
        }
      }
      root = json_loadb(buf, n, flags, error);
    } else {
      root = json_loadb(text, length, flags, error);
    }
  }
  if (buf != small) free(buf);
  return root;
}

int cedar_json_copy_bytes(cedar_arena *arena, const char *s, size_t length, cedar_str *out) {
  char *p = cedar_arena_alloc(arena, length + 1);
  if (!p) return -ENOMEM;
  bool sentinel = false;
  if (length < 32) /* short strings: a loop is cheaper than a call */
    for (size_t i = 0; i < length && !sentinel; i++) sentinel = (unsigned char)s[i] == 0xf3;
  else
    sentinel = memchr(s, 0xf3, length) != NULL;
  if (!sentinel) { /* no sentinel: a plain copy */
    memcpy(p, s, length);
    *out = (cedar_str){p, length};
    return 0;
  }
  size_t n = 0;
  for (size_t i = 0; i < length;) {
    if ((unsigned char)s[i] == 0xf3 && i + 4 <= length && memcmp(s + i, nul_sentinel, 4) == 0) {
      p[n++] = 0;
      i += 4;
    } else {
      p[n++] = s[i++];
    }
  }
  p[n] = 0;
  *out = (cedar_str){p, n};
  return 0;
}

int cedar_schema_name_decode(cedar_arena *arena, const char *name, cedar_str *out) {
  size_t length = strlen(name);
  char *p = cedar_arena_alloc(arena, length + 1);
  if (!p) return -ENOMEM;
  size_t n = 0;
  for (size_t i = 0; i < length; i++) {
    if ((unsigned char)name[i] == 0xc0 && (unsigned char)name[i + 1] == 0x80) {
      p[n++] = 0;
      i++;
    } else {
      p[n++] = name[i];
    }
  }
  p[n] = 0;
  *out = (cedar_str){p, n};
  return 0;
}

char *cedar_schema_name_encode(cedar_str name) {
  size_t size = name.len * 2 + 1;
  char *buf = malloc(size);
  if (!buf) return NULL;
  cedar_schema_encode_name(name.ptr, name.len, buf, size);
  return buf;
}
