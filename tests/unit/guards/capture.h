/* Test fixture of the guards unit tests: a guard_sink that collects the redacted output and the findings.
 * Header-only (each unit test is one program from one .c file); include after <cmocka.h>. */
#ifndef DOME_TESTS_UNIT_GUARDS_CAPTURE_H
#define DOME_TESTS_UNIT_GUARDS_CAPTURE_H

#include <stdlib.h>
#include <string.h>

#include "supervisor/guards/guard.h"

struct capture {
  char *data; /* the output so far, NUL-terminated (NULL before the first byte) */
  size_t length;
  size_t capacity;
  struct guard_findings findings;
  size_t max_pending; /* largest bytes_in - bytes_out seen after a feed (kept by the caller) */
};

/* guard_sink.emit: append the bytes to the capture `context` (a failed allocation fails the test). */
static inline int capture_emit(const char *data, size_t length, void *context) {
  struct capture *c = context;
  if (c->length + length + 1 > c->capacity) {
    c->capacity = (c->length + length + 1) * 2;
    c->data = realloc(c->data, c->capacity);
    assert_non_null(c->data);
  }
  memcpy(c->data + c->length, data, length);
  c->length += length;
  c->data[c->length] = '\0';
  return 0;
}

/* guard_sink.finding: add the finding to the capture `context`. */
static inline int capture_finding(const struct guard_finding *finding, void *context) {
  struct capture *c = context;
  return guard_findings_add(&c->findings, finding);
}

/* Free what the capture holds and zero it. */
static inline void capture_free(struct capture *c) {
  free(c->data);
  guard_findings_free(&c->findings);
  memset(c, 0, sizeof *c);
}

#endif
