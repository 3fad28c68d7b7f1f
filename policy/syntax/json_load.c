/* NUL-safe JSON loading on top of jansson (see cedar_json_loadb in entities.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "policy/syntax/syntax.h"
#include "policy/schema/schema.h"

static const char nul_sentinel[4] = {(char)0xf3, (char)0xb0, (char)0x80, (char)0x80};

json_t *cedar_json_loadb(const char *text, size_t length, void *json_error) {
  json_error_t *error = json_error;
  if (!memmem(text, length, "\\u0000", 6))
    return json_loadb(text, length, JSON_ALLOW_NUL | JSON_REJECT_DUPLICATES, error);
  char *buf = malloc(length * 2 + 1);
  if (!buf) {
    if (error) snprintf(error->text, sizeof error->text, "out of memory");
    return NULL;
  }
  size_t n = 0;
  bool in_string = false;
  for (size_t i = 0; i < length; i++) {
    char c = text[i];
    if (!in_string) {
      if (c == '"') in_string = true;
      buf[n++] = c;
      continue;
    }
    if (c == '"') {
      in_string = false;
      buf[n++] = c;
    } else if (c == '\\' && i + 1 < length) {
      if (text[i + 1] == 'u' && i + 5 < length && memcmp(text + i + 2, "0000", 4) == 0) {
        memcpy(buf + n, "\\udb80\\udc00", 12);
        n += 12;
        i += 5;
      } else {
        buf[n++] = c;
        buf[n++] = text[++i];
      }
    } else {
      buf[n++] = c;
    }
  }
  json_t *root = json_loadb(buf, n, JSON_ALLOW_NUL | JSON_REJECT_DUPLICATES, error);
  free(buf);
  return root;
}

int cedar_json_copy_bytes(cedar_arena *arena, const char *s, size_t length, cedar_str *out) {
  char *p = cedar_arena_alloc(arena, length + 1);
  if (!p) return -ENOMEM;
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
