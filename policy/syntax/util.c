/* Strings, uids, diagnostics and the growable print buffer. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/syntax/syntax.h"

int cedar_str_cmp(cedar_str a, cedar_str b) {
  size_t n = a.len < b.len ? a.len : b.len;
  int c = n ? memcmp(a.ptr, b.ptr, n) : 0;
  if (c) return c;
  return a.len < b.len ? -1 : a.len > b.len;
}

int cedar_euid_cmp(const cedar_euid *a, const cedar_euid *b) {
  int c = cedar_str_cmp(a->type, b->type);
  return c ? c : cedar_str_cmp(a->id, b->id);
}

uint64_t cedar_euid_hash(const cedar_euid *uid) {
  uint64_t h = 1469598103934665603ull; /* FNV-1a */
  for (size_t i = 0; i < uid->type.len; i++) h = (h ^ (unsigned char)uid->type.ptr[i]) * 1099511628211ull;
  h = (h ^ 0xff) * 1099511628211ull;
  for (size_t i = 0; i < uid->id.len; i++) h = (h ^ (unsigned char)uid->id.ptr[i]) * 1099511628211ull;
  return h;
}

void cedar_diag_set(cedar_diagnostic *diag, const char *file, unsigned line, unsigned column,
                    const char *policy_id, const char *format, ...) {
  if (!diag) return;
  snprintf(diag->file, sizeof diag->file, "%s", file ? file : "");
  diag->line = line;
  diag->column = column;
  snprintf(diag->policy_id, sizeof diag->policy_id, "%s", policy_id ? policy_id : "");
  va_list ap;
  va_start(ap, format);
  vsnprintf(diag->message, sizeof diag->message, format, ap);
  va_end(ap);
}

const char *cedar_diagnostic_format(const cedar_diagnostic *diag, char *buf, size_t size) {
  if (size == 0) return buf;
  size_t n = 0;
  buf[0] = 0;
#define ADD(...)                                                   \
  do {                                                             \
    if (n < size) {                                                \
      int k = snprintf(buf + n, size - n, __VA_ARGS__);            \
      if (k > 0) n += (size_t)k < size - n ? (size_t)k : size - n; \
    }                                                              \
  } while (0)
  if (diag->file[0]) {
    ADD("%s:", diag->file);
    if (diag->line) ADD("%u:%u:", diag->line, diag->column);
    ADD(" ");
  } else if (diag->line) {
    ADD("%u:%u: ", diag->line, diag->column);
  }
  if (diag->policy_id[0]) ADD("policy `%s`: ", diag->policy_id);
  ADD("%s", diag->message);
#undef ADD
  return buf;
}

static bool buf_reserve(cedar_buf *buf, size_t extra) {
  if (buf->failed) return false;
  if (buf->length + extra + 1 <= buf->capacity) return true;
  size_t cap = buf->capacity ? buf->capacity * 2 : 256;
  while (cap < buf->length + extra + 1) cap *= 2;
  char *p = realloc(buf->data, cap);
  if (!p) {
    buf->failed = true;
    return false;
  }
  buf->data = p;
  buf->capacity = cap;
  return true;
}

void cedar_buf_append(cedar_buf *buf, const char *s, size_t n) {
  if (!buf_reserve(buf, n)) return;
  if (n) memcpy(buf->data + buf->length, s, n);
  buf->length += n;
  buf->data[buf->length] = 0;
}

void cedar_buf_puts(cedar_buf *buf, const char *s) {
  cedar_buf_append(buf, s, strlen(s));
}

void cedar_buf_printf(cedar_buf *buf, const char *format, ...) {
  va_list ap;
  va_start(ap, format);
  char tmp[256];
  int n = vsnprintf(tmp, sizeof tmp, format, ap);
  va_end(ap);
  if (n < 0) return;
  if ((size_t)n < sizeof tmp) {
    cedar_buf_append(buf, tmp, (size_t)n);
    return;
  }
  if (!buf_reserve(buf, (size_t)n)) return;
  va_start(ap, format);
  vsnprintf(buf->data + buf->length, (size_t)n + 1, format, ap);
  va_end(ap);
  buf->length += (size_t)n;
}

char *cedar_buf_finish(cedar_buf *buf) {
  char *out = NULL;
  if (!buf->failed) {
    if (!buf->data) buf_reserve(buf, 0);
    if (!buf->failed) {
      buf->data[buf->length] = 0;
      out = buf->data;
      buf->data = NULL;
    }
  }
  free(buf->data);
  memset(buf, 0, sizeof *buf);
  return out;
}
