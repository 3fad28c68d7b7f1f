#include "supervisor/common/units.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

/* Parse "<digits>[.<digits>]" into a value scaled by 10^9 (nano units) without floating point,
 * so "1.5G" is exact. Returns the index after the number, or -1. */
static int parse_decimal(const char *text, unsigned __int128 *nano) {
  const char *p = text;
  unsigned __int128 whole = 0, fraction = 0, scale = 1000000000;
  int digits = 0;
  while (isdigit((unsigned char)*p)) {
    whole = whole * 10 + (unsigned)(*p - '0');
    if (whole > ((unsigned __int128)1 << 80)) return -1;
    p++;
    digits++;
  }
  if (*p == '.') {
    p++;
    while (isdigit((unsigned char)*p)) {
      if (scale > 1) {
        scale /= 10;
        fraction += (unsigned)(*p - '0') * scale;
      }
      p++;
      digits++;
    }
  }
  if (digits == 0) return -1;
  *nano = whole * 1000000000u + fraction;
  return (int)(p - text);
}

int dome_parse_size(const char *text, uint64_t *bytes, dome_error *err) {
  if (text == NULL || *text == '\0') return dome_error_set(err, EINVAL, "invalid size ``: empty");
  unsigned __int128 nano;
  int used = parse_decimal(text, &nano);
  if (used < 0)
    return dome_error_set(
        err, EINVAL, "invalid size `%s`: expected a number of bytes with an optional K/M/G/T suffix", text);
  const char *suffix = text + used;
  unsigned shift = 0;
  switch (toupper((unsigned char)*suffix)) {
    case '\0':
      break;
    case 'B':
      shift = 0;
      break;
    case 'K':
      shift = 10;
      break;
    case 'M':
      shift = 20;
      break;
    case 'G':
      shift = 30;
      break;
    case 'T':
      shift = 40;
      break;
    default:
      return dome_error_set(err, EINVAL, "invalid size `%s`: unknown suffix `%s` (use K, M, G or T)", text,
                            suffix);
  }
  if (*suffix != '\0') {
    const char *rest = suffix + 1;
    if (shift != 0 && (strcmp(rest, "") == 0 || strcmp(rest, "i") == 0 || strcmp(rest, "iB") == 0 ||
                       strcmp(rest, "B") == 0)) {
      /* accepted spellings */
    } else if (shift == 0 && *rest == '\0') {
      /* "B" */
    } else {
      return dome_error_set(err, EINVAL, "invalid size `%s`: unknown suffix `%s` (use K, M, G or T)", text,
                            suffix);
    }
  }
  unsigned __int128 value = (nano << shift) / 1000000000u;
  if (shift == 0 && nano % 1000000000u != 0)
    return dome_error_set(err, EINVAL, "invalid size `%s`: fractional bytes", text);
  if (value > INT64_MAX) return dome_error_set(err, ERANGE, "invalid size `%s`: too large", text);
  *bytes = (uint64_t)value;
  return 0;
}

int dome_parse_duration_ms(const char *text, uint64_t *milliseconds, dome_error *err) {
  if (text == NULL || *text == '\0') return dome_error_set(err, EINVAL, "invalid duration ``: empty");
  unsigned __int128 nano;
  int used = parse_decimal(text, &nano);
  if (used < 0)
    return dome_error_set(err, EINVAL, "invalid duration `%s`: expected seconds, e.g. 10 or 0.5", text);
  const char *suffix = text + used;
  unsigned __int128 ms;
  if (*suffix == '\0' || strcmp(suffix, "s") == 0)
    ms = (nano + 500000) / 1000000; /* nano-seconds-of-a-second to ms, rounded */
  else if (strcmp(suffix, "ms") == 0)
    ms = (nano + 500000000) / 1000000000;
  else
    return dome_error_set(err, EINVAL, "invalid duration `%s`: unknown suffix `%s` (use s or ms)", text,
                          suffix);
  if (ms > INT64_MAX) return dome_error_set(err, ERANGE, "invalid duration `%s`: too large", text);
  *milliseconds = (uint64_t)ms;
  return 0;
}

const char *dome_format_size(uint64_t bytes, char *buffer, unsigned long buffer_size) {
  static const char suffixes[] = {'\0', 'K', 'M', 'G', 'T'};
  unsigned index = 0;
  uint64_t value = bytes;
  while (index < 4 && value != 0 && value % 1024 == 0) {
    value /= 1024;
    index++;
  }
  if (index == 0)
    snprintf(buffer, buffer_size, "%llu", (unsigned long long)value);
  else
    snprintf(buffer, buffer_size, "%llu%c", (unsigned long long)value, suffixes[index]);
  return buffer;
}
