/* Cedar extension types as pure C functions on plain C values: ipaddr, decimal, datetime, duration.
 *
 * Implements the Cedar language reference "Extension functions" (ipaddr, decimal, datetime and
 * duration) with the semantics of cedar-policy 4.x (cedar-policy-core/src/extensions/ ipaddr.rs, decimal.rs,
 * datetime.rs) and its Lean specification (cedar-spec, Cedar/Spec/Ext/ IPAddr, Decimal, Datetime): the exact
 * spellings accepted and rejected, range checks and overflow errors. No allocation, no global state: every
 * function is thread-safe.
 *
 * Error convention: parsers and fallible operations return 0 on success, -EINVAL for a string that is
 * not of the accepted form, -ERANGE for a value that does not fit (overflow); the output is written
 * only on success. A one-line reason for the last failure can be produced with the *_explain helpers
 * where offered; the evaluator usually wraps it as "extension function `ip`: <reason>". */
#ifndef DOME_POLICY_EXTENSIONS_EXTENSIONS_H
#define DOME_POLICY_EXTENSIONS_EXTENSIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---------------- ipaddr ---------------- */

/* An IPv4 or IPv6 address with a CIDR prefix length. A single address has prefix 32 (v4) / 128 (v6).
 * The host bits are kept as written ("10.0.0.1/24" keeps .1): equality compares address and prefix,
 * as upstream does. Compare values with cedar_ipaddr_equal (never memcmp on padding). */
typedef struct cedar_ipaddr {
  bool is_v6;
  uint8_t prefix;      /* 0..32 (v4) or 0..128 (v6) */
  uint8_t address[16]; /* network byte order; v4 uses address[0..4), the rest is zero */
} cedar_ipaddr;

/* Parse `ip("...")`'s argument text[0..length). Accepts dotted-quad IPv4 (each octet 0..255, 1-3 digits,
 * no leading zero except "0") and IPv6 (1-4 hex digits a group, at most one "::", 8 groups without
 * it), each optionally followed by "/N" (N decimal without leading zero, at most 2 digits for v4 and
 * 3 for v6, N <= 32 / 128). Rejects IPv4 embedded in IPv6 ("::ffff:1.2.3.4"), zone ids, spaces,
 * signs. Returns 0, or -EINVAL. */
int cedar_ipaddr_parse(const char *text, size_t length, cedar_ipaddr *out);

bool cedar_ipaddr_is_ipv4(const cedar_ipaddr *ip);
bool cedar_ipaddr_is_ipv6(const cedar_ipaddr *ip);
/* The whole range lies in 127.0.0.0/8 (v4) or is ::1/128 (v6). */
bool cedar_ipaddr_is_loopback(const cedar_ipaddr *ip);
/* The whole range lies in 224.0.0.0/4 (v4) or ff00::/8 (v6). */
bool cedar_ipaddr_is_multicast(const cedar_ipaddr *ip);
/* `ip.isInRange(range)`: same family and ip's range (address with host bits cleared .. set) lies within
 * range's range. */
bool cedar_ipaddr_is_in_range(const cedar_ipaddr *ip, const cedar_ipaddr *range);
/* Same family, address and prefix. */
bool cedar_ipaddr_equal(const cedar_ipaddr *a, const cedar_ipaddr *b);
/* Total order (v4 before v6, then address, then prefix); for sorting sets. Returns <0, 0, >0. */
int cedar_ipaddr_compare(const cedar_ipaddr *a, const cedar_ipaddr *b);
/* Text "a.b.c.d/N" or RFC 5952 IPv6 "x::y/N"; the "/N" is omitted when `with_prefix` is false.
 * Returns the length needed (as snprintf); buf always NUL-terminated when size > 0. */
size_t cedar_ipaddr_format(const cedar_ipaddr *ip, bool with_prefix, char *buf, size_t size);

/* ---------------- decimal ---------------- */

/* A decimal is a signed 64-bit count of 1/10000 units: decimal("1.5") == 15000. */
#define CEDAR_DECIMAL_SCALE 10000

/* Parse `decimal("...")`'s argument: optional '-', one or more digits, '.', one to four digits.
 * Returns 0, -EINVAL (form) or -ERANGE (outside [-922337203685477.5808, 922337203685477.5807]). */
int cedar_decimal_parse(const char *text, size_t length, int64_t *out);
/* Text with exactly four fractional digits ("-1.2300"). Returns the length needed (as snprintf). */
size_t cedar_decimal_format(int64_t value, char *buf, size_t size);
/* lessThan, lessThanOrEqual, greaterThan, greaterThanOrEqual are plain comparisons of the values. */

/* ---------------- datetime and duration ---------------- */

/* A datetime is a signed 64-bit count of non-leap milliseconds since 1970-01-01T00:00:00Z; a duration
 * is a signed 64-bit count of milliseconds. */

/* Parse `datetime("...")`'s argument. Accepted forms (and nothing else):
 *   YYYY-MM-DD
 *   YYYY-MM-DDThh:mm:ssZ          YYYY-MM-DDThh:mm:ss.SSSZ
 *   YYYY-MM-DDThh:mm:ss(+|-)hhmm  YYYY-MM-DDThh:mm:ss.SSS(+|-)hhmm
 * with exact digit counts, a valid proleptic Gregorian date (year 0000..9999), hour < 24, minute < 60,
 * second < 60 (no leap second), offset hours < 24 and minutes < 60; the offset is subtracted to give
 * UTC. Returns 0 or -EINVAL. */
int cedar_datetime_parse(const char *text, size_t length, int64_t *out_ms);

/* Parse `duration("...")`'s argument: optional '-', then quantity-unit pairs in the order d, h, m, s,
 * ms, each at most once, at least one, quantities non-negative decimal integers. Returns 0, -EINVAL
 * (form) or -ERANGE (total milliseconds outside int64). */
int cedar_duration_parse(const char *text, size_t length, int64_t *out_ms);

/* datetime.offset(duration): -ERANGE on int64 overflow. */
int cedar_datetime_offset(int64_t datetime_ms, int64_t duration_ms, int64_t *out_ms);
/* datetime.durationSince(other) = datetime - other: -ERANGE on overflow. */
int cedar_datetime_duration_since(int64_t datetime_ms, int64_t other_ms, int64_t *out_ms);
/* datetime.toDate(): midnight (UTC) of the day, rounding toward negative infinity; -ERANGE on
 * overflow (only for values within a day of INT64_MIN). */
int cedar_datetime_to_date(int64_t datetime_ms, int64_t *out_ms);
/* datetime.toTime(): milliseconds since that midnight, always in [0, 86400000). */
int64_t cedar_datetime_to_time(int64_t datetime_ms);

/* duration.toMilliseconds()/toSeconds()/toMinutes()/toHours()/toDays(): truncation toward zero. */
int64_t cedar_duration_to_milliseconds(int64_t duration_ms);
int64_t cedar_duration_to_seconds(int64_t duration_ms);
int64_t cedar_duration_to_minutes(int64_t duration_ms);
int64_t cedar_duration_to_hours(int64_t duration_ms);
int64_t cedar_duration_to_days(int64_t duration_ms);

/* Upstream's text forms of values (used in EST/JSON output and messages): a duration is written
 * `duration("<ms>ms")`'s argument "<ms>ms"; a datetime as `datetime("1970-01-01").offset(duration(
 * "<ms>ms"))`. cedar_duration_format writes "<ms>ms". Returns the length needed (as snprintf). */
size_t cedar_duration_format(int64_t duration_ms, char *buf, size_t size);

/* ---------------- signatures (for the validator and the evaluator's dispatch) ---------------- */

/* Types in extension function signatures. */
typedef enum cedar_extension_type {
  CEDAR_EXT_TYPE_BOOL,
  CEDAR_EXT_TYPE_LONG,
  CEDAR_EXT_TYPE_STRING,
  CEDAR_EXT_TYPE_IPADDR,
  CEDAR_EXT_TYPE_DECIMAL,
  CEDAR_EXT_TYPE_DATETIME,
  CEDAR_EXT_TYPE_DURATION,
} cedar_extension_type;

/* One extension function as upstream declares it. */
typedef struct cedar_extension_function {
  const char *name;        /* "ip", "isInRange", "lessThan", "offset", ... */
  bool method_style;       /* called as receiver.name(args) (true) or name(args) (false) */
  bool is_constructor;     /* ip, decimal, datetime, duration: takes a String literal */
  unsigned argument_count; /* including the receiver for methods */
  cedar_extension_type arguments[2];
  cedar_extension_type result;
} cedar_extension_function;

/* The function named `name`, or NULL. Names are unique across extensions. */
const cedar_extension_function *cedar_extension_function_find(const char *name);
/* All functions (count stored in *count). */
const cedar_extension_function *cedar_extension_functions(size_t *count);
/* Name of an extension type ("ipaddr", "decimal", "datetime", "duration"; "Bool", "Long", "String"). */
const char *cedar_extension_type_name(cedar_extension_type type);

#endif
