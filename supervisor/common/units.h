/* Parsing of the sizes and durations that flags, quotas and config files carry. */
#ifndef DOME_COMMON_UNITS_H
#define DOME_COMMON_UNITS_H

#include <stdint.h>

#include "supervisor/common/error.h"

/* Parse a size: decimal bytes, optionally followed by an IEC suffix K, M, G, T (powers of 1024;
 * "Ki", "KiB", "KB" are accepted spellings of the same). Examples: "4096", "256M", "1.5G".
 * Fractions are allowed with a suffix and rounded down to whole bytes.
 * Returns 0 and *bytes, or -EINVAL with *err naming the value ("invalid size `12Q`: ...") on empty input,
 * trailing garbage, negative values, or -ERANGE when the result exceeds INT64_MAX. */
int dome_parse_size(const char *text, uint64_t *bytes, dome_error *err);

/* Parse a duration in seconds with an optional fraction ("10", "0.5", "2.25") and an optional suffix
 * "s" or "ms". Returns 0 and *milliseconds (rounded to the nearest ms), or -EINVAL / -ERANGE as
 * dome_parse_size does. */
int dome_parse_duration_ms(const char *text, uint64_t *milliseconds, dome_error *err);

/* Format bytes as the shortest exact IEC spelling ("256M", "1536K", "1000"). buffer: >= 32 bytes. */
const char *dome_format_size(uint64_t bytes, char *buffer, unsigned long buffer_size);

#endif
