/* dome error object: errno plus a message that callers extend with context on the way up,
 * so the message at the top reads like a path:
 *   "create jail: create cgroup `dome/jail-12`: write `memory.max`: Permission denied".
 *
 * Convention (as crun's libcrun): a fallible function returns a negative value (-errno) on
 * failure and fills *err; 0 (or a non-negative result) on success, leaving *err untouched. */
#ifndef DOME_COMMON_ERROR_H
#define DOME_COMMON_ERROR_H

#include <stdarg.h>

typedef struct dome_error {
  int errno_value; /* positive errno, or 0 when the failure has no errno (bad input) */
  char message[1024];
} dome_error;

/* Set *err to a fresh error. errno_value: the errno (0 for input errors, reported as EINVAL).
 * Returns -errno_value (or -EINVAL when 0) so callers can `return dome_error_set(...)`.
 * err may be NULL (the error is then dropped). */
int dome_error_set(dome_error *err, int errno_value, const char *format, ...)
    __attribute__((format(printf, 3, 4)));

/* As dome_error_set, appending ": strerror(errno_value)" to the message. */
int dome_error_set_errno(dome_error *err, int errno_value, const char *format, ...)
    __attribute__((format(printf, 3, 4)));

/* Prefix the existing message with "context: ". Returns -errno_value (or -EINVAL). */
int dome_error_wrap(dome_error *err, const char *format, ...) __attribute__((format(printf, 2, 3)));

/* The negative return value that corresponds to *err (-EINVAL when it carries no errno). */
int dome_error_code(const dome_error *err);

#endif
