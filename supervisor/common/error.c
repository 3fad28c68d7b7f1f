#include "supervisor/common/error.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static int code_of(int errno_value) {
  return errno_value > 0 ? -errno_value : -EINVAL;
}

int dome_error_set(dome_error *err, int errno_value, const char *format, ...) {
  if (err == NULL) return code_of(errno_value);
  va_list args;
  va_start(args, format);
  vsnprintf(err->message, sizeof err->message, format, args);
  va_end(args);
  err->errno_value = errno_value;
  return code_of(errno_value);
}

int dome_error_set_errno(dome_error *err, int errno_value, const char *format, ...) {
  if (err == NULL) return code_of(errno_value);
  va_list args;
  va_start(args, format);
  int length = vsnprintf(err->message, sizeof err->message, format, args);
  va_end(args);
  if (length < 0) length = 0;
  if ((size_t)length < sizeof err->message)
    snprintf(err->message + length, sizeof err->message - (size_t)length, ": %s", strerror(errno_value));
  err->errno_value = errno_value;
  return code_of(errno_value);
}

int dome_error_wrap(dome_error *err, const char *format, ...) {
  if (err == NULL) return -EINVAL;
  char context[512];
  va_list args;
  va_start(args, format);
  vsnprintf(context, sizeof context, format, args);
  va_end(args);
  char joined[sizeof err->message];
  size_t context_length = strlen(context);
  if (context_length > sizeof joined - 3) context_length = sizeof joined - 3;
  memcpy(joined, context, context_length);
  memcpy(joined + context_length, ": ", 2);
  size_t rest = sizeof joined - context_length - 2;
  size_t message_length = strnlen(err->message, sizeof err->message);
  if (message_length > rest - 1) message_length = rest - 1;
  memcpy(joined + context_length + 2, err->message, message_length);
  joined[context_length + 2 + message_length] = '\0';
  memcpy(err->message, joined, sizeof joined);
  return code_of(err->errno_value);
}

int dome_error_code(const dome_error *err) {
  return err ? code_of(err->errno_value) : -EINVAL;
}
