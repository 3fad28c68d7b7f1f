/* Cedar `decimal` extension: parsing and text form (see extensions.h).
 *
 * Form as cedar-policy's decimal.rs and cedar-spec's Decimal.lean: `-?[0-9]+\.[0-9]{1,4}`, value
 * scaled by 10^4 into a signed 64-bit integer, overflow is an error. */
#include "policy/extensions/extensions.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>

int cedar_decimal_parse(const char *text, size_t length, int64_t *out) {
  if (!text) return -EINVAL;
  size_t i = 0;
  bool negative = false;
  if (i < length && text[i] == '-') negative = true, i++;
  size_t integer_start = i;
  while (i < length && text[i] >= '0' && text[i] <= '9') i++;
  size_t integer_digits = i - integer_start;
  if (integer_digits == 0 || i >= length || text[i] != '.') return -EINVAL;
  i++;
  size_t fraction_start = i;
  while (i < length && text[i] >= '0' && text[i] <= '9') i++;
  size_t fraction_digits = i - fraction_start;
  if (i != length || fraction_digits == 0 || fraction_digits > 4) return -EINVAL;

  /* Magnitude in 1/10000 units, with the limit of the sign's side: 2^63 for negatives. */
  const unsigned __int128 limit = negative ? (unsigned __int128)INT64_MAX + 1 : (unsigned __int128)INT64_MAX;
  unsigned __int128 integer = 0;
  for (size_t k = integer_start; k < integer_start + integer_digits; k++) {
    integer = integer * 10 + (unsigned)(text[k] - '0');
    if (integer > limit) return -ERANGE;
  }
  unsigned __int128 fraction = 0;
  for (size_t k = fraction_start; k < fraction_start + 4; k++)
    fraction = fraction * 10 + (k < fraction_start + fraction_digits ? (unsigned)(text[k] - '0') : 0);
  unsigned __int128 magnitude = integer * CEDAR_DECIMAL_SCALE + fraction;
  if (magnitude > limit) return -ERANGE;
  *out = negative ? (int64_t)(-(__int128)magnitude) : (int64_t)magnitude;
  return 0;
}

size_t cedar_decimal_format(int64_t value, char *buf, size_t size) {
  uint64_t magnitude = value < 0 ? (uint64_t)0 - (uint64_t)value : (uint64_t)value;
  int n = snprintf(buf, size, "%s%" PRIu64 ".%04" PRIu64, value < 0 ? "-" : "",
                   magnitude / CEDAR_DECIMAL_SCALE, magnitude % CEDAR_DECIMAL_SCALE);
  return n < 0 ? 0 : (size_t)n;
}
