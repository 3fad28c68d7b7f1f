/* Validation of a backend's --auth-header-file (one `Name: value` line, RFC 9110 section 5.5 field
 * syntax). Its own file: the CLI checks the header without linking the MCP client (and libcurl). */
#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <string.h>
#include <strings.h>

#include "supervisor/gateway/gateway.h"

/* RFC 9110 section 5.6.2 tchar. */
static bool token_char(unsigned char c) {
  return isalnum(c) || (c && strchr("!#$%&'*+-.^_`|~", c));
}

int gateway_auth_header_check(const char *text, dome_error *err) {
  if (text == NULL) return dome_error_set(err, EINVAL, "--auth-header-file: empty");
  size_t length = strlen(text);
  if (length > GATEWAY_AUTH_HEADER_MAX)
    return dome_error_set(err, EINVAL, "--auth-header-file: longer than %d bytes", GATEWAY_AUTH_HEADER_MAX);
  while (length && (text[length - 1] == '\n' || text[length - 1] == '\r')) length--;
  const char *colon = memchr(text, ':', length);
  if (colon == NULL || colon == text)
    return dome_error_set(err, EINVAL, "--auth-header-file:1:1: expected one line `Name: value`");
  for (const char *c = text; c < colon; c++)
    if (!token_char((unsigned char)*c))
      return dome_error_set(err, EINVAL, "--auth-header-file:1:%d: invalid character in the header name",
                            (int)(c - text) + 1);
  size_t value_length = 0;
  for (const char *c = colon + 1; c < text + length; c++) {
    unsigned char u = (unsigned char)*c;
    if (u == '\n' || u == '\r')
      return dome_error_set(err, EINVAL, "--auth-header-file:2:1: more than one line");
    if (u != ' ' && u != '\t' && (u < 0x21 || u > 0x7e))
      return dome_error_set(err, EINVAL, "--auth-header-file:1:%d: the value must be visible ASCII",
                            (int)(c - text) + 1);
    if (u != ' ' && u != '\t') value_length++;
  }
  if (value_length == 0)
    return dome_error_set(err, EINVAL, "--auth-header-file:1:%d: empty value", (int)length + 1);
  /* Headers dome itself sets cannot be overridden. */
  static const char *const reserved[] = {"content-type",         "accept",         "mcp-session-id",
                                         "mcp-protocol-version", "content-length", "host",
                                         "transfer-encoding",    "expect"};
  for (size_t i = 0; i < sizeof reserved / sizeof reserved[0]; i++)
    if ((size_t)(colon - text) == strlen(reserved[i]) &&
        strncasecmp(text, reserved[i], strlen(reserved[i])) == 0)
      return dome_error_set(err, EINVAL, "--auth-header-file: header `%s` is set by dome", reserved[i]);
  return 0;
}
