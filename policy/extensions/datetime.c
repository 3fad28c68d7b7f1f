/* Cedar `datetime` and `duration` extensions (see extensions.h).
 *
 * Accepted forms and arithmetic as cedar-policy's datetime.rs (4.x) and cedar-spec's Datetime.lean:
 * dates are proleptic Gregorian, milliseconds since the Unix epoch without leap seconds, every result
 * must fit a signed 64-bit integer. */
#include "policy/extensions/extensions.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>

#define MS_PER_DAY INT64_C(86400000)

/* Exactly `count` ASCII digits at text[*i..]; advances *i. Returns the value or -1. */
static int fixed_digits(const char *text, size_t length, size_t *i, int count) {
  int value = 0;
  for (int k = 0; k < count; k++, (*i)++) {
    if (*i >= length || text[*i] < '0' || text[*i] > '9') return -1;
    value = value * 10 + (text[*i] - '0');
  }
  return value;
}

static bool expect(const char *text, size_t length, size_t *i, char c) {
  if (*i >= length || text[*i] != c) return false;
  (*i)++;
  return true;
}

static bool is_leap_year(int year) {
  return (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
}

static int days_in_month(int year, int month) {
  static const int days[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  return month == 2 && is_leap_year(year) ? 29 : days[month - 1];
}

/* Days from 1970-01-01 to year-month-day (proleptic Gregorian; H. Hinnant's days_from_civil). */
static int64_t days_from_civil(int64_t year, int month, int day) {
  year -= month <= 2;
  int64_t era = (year >= 0 ? year : year - 399) / 400;
  int64_t year_of_era = year - era * 400;
  int64_t day_of_year = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1;
  int64_t day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
  return era * 146097 + day_of_era - 719468;
}

int cedar_datetime_parse(const char *text, size_t length, int64_t *out_ms) {
  if (!text) return -EINVAL;
  size_t i = 0;
  int year = fixed_digits(text, length, &i, 4);
  if (year < 0 || !expect(text, length, &i, '-')) return -EINVAL;
  int month = fixed_digits(text, length, &i, 2);
  if (month < 0 || !expect(text, length, &i, '-')) return -EINVAL;
  int day = fixed_digits(text, length, &i, 2);
  if (day < 0) return -EINVAL;
  int hour = 0, minute = 0, second = 0, millisecond = 0, offset_seconds = 0;
  if (i != length) {
    if (!expect(text, length, &i, 'T')) return -EINVAL;
    hour = fixed_digits(text, length, &i, 2);
    if (hour < 0 || !expect(text, length, &i, ':')) return -EINVAL;
    minute = fixed_digits(text, length, &i, 2);
    if (minute < 0 || !expect(text, length, &i, ':')) return -EINVAL;
    second = fixed_digits(text, length, &i, 2);
    if (second < 0) return -EINVAL;
    if (expect(text, length, &i, '.')) {
      millisecond = fixed_digits(text, length, &i, 3);
      if (millisecond < 0) return -EINVAL;
    }
    if (expect(text, length, &i, 'Z')) {
      /* UTC */
    } else if (i < length && (text[i] == '+' || text[i] == '-')) {
      bool positive = text[i++] == '+';
      int offset_hours = fixed_digits(text, length, &i, 2);
      int offset_minutes = offset_hours < 0 ? -1 : fixed_digits(text, length, &i, 2);
      if (offset_minutes < 0) return -EINVAL;
      if (offset_hours >= 24 || offset_minutes >= 60) return -EINVAL;
      offset_seconds = (offset_hours * 3600 + offset_minutes * 60) * (positive ? 1 : -1);
    } else {
      return -EINVAL;
    }
    if (i != length) return -EINVAL;
  }
  if (month < 1 || month > 12 || day < 1 || day > days_in_month(year, month)) return -EINVAL;
  if (hour >= 24 || minute >= 60 || second >= 60) return -EINVAL;
  int64_t seconds = days_from_civil(year, month, day) * 86400 + hour * 3600 + minute * 60 + second;
  *out_ms = (seconds - offset_seconds) * 1000 + millisecond;
  return 0;
}

int cedar_duration_parse(const char *text, size_t length, int64_t *out_ms) {
  static const struct {
    const char *unit;
    int64_t ms;
  } units[] = {{"d", MS_PER_DAY}, {"h", 3600000}, {"m", 60000}, {"s", 1000}, {"ms", 1}};
  if (!text) return -EINVAL;
  size_t i = 0;
  bool negative = false;
  if (i < length && text[i] == '-') negative = true, i++;
  if (i == length) return -EINVAL;
  size_t next_unit = 0;
  bool overflow = false;
  __int128 total = 0;
  while (i < length) {
    size_t start = i;
    unsigned __int128 quantity = 0;
    while (i < length && text[i] >= '0' && text[i] <= '9') {
      quantity = quantity * 10 + (unsigned)(text[i] - '0');
      if (quantity > UINT64_MAX) overflow = true, quantity = UINT64_MAX; /* u64 parse fails upstream */
      i++;
    }
    if (i == start || i == length) return -EINVAL;
    size_t unit;
    if (text[i] == 'm' && i + 1 < length && text[i + 1] == 's')
      unit = 4;
    else if (text[i] == 'd')
      unit = 0;
    else if (text[i] == 'h')
      unit = 1;
    else if (text[i] == 'm')
      unit = 2;
    else if (text[i] == 's')
      unit = 3;
    else
      return -EINVAL;
    if (unit < next_unit) return -EINVAL;
    next_unit = unit + 1;
    i += unit == 4 ? 2 : 1;
    total += (__int128)quantity * units[unit].ms;
  }
  if (negative) total = -total;
  if (overflow || total > INT64_MAX || total < INT64_MIN) return -ERANGE;
  *out_ms = (int64_t)total;
  return 0;
}

int cedar_datetime_offset(int64_t datetime_ms, int64_t duration_ms, int64_t *out_ms) {
  return __builtin_add_overflow(datetime_ms, duration_ms, out_ms) ? -ERANGE : 0;
}

int cedar_datetime_duration_since(int64_t datetime_ms, int64_t other_ms, int64_t *out_ms) {
  return __builtin_sub_overflow(datetime_ms, other_ms, out_ms) ? -ERANGE : 0;
}

int cedar_datetime_to_date(int64_t datetime_ms, int64_t *out_ms) {
  if (datetime_ms >= 0 || datetime_ms % MS_PER_DAY == 0) {
    *out_ms = datetime_ms / MS_PER_DAY * MS_PER_DAY;
    return 0;
  }
  int64_t result;
  if (__builtin_mul_overflow(datetime_ms / MS_PER_DAY - 1, MS_PER_DAY, &result)) return -ERANGE;
  *out_ms = result;
  return 0;
}

int64_t cedar_datetime_to_time(int64_t datetime_ms) {
  int64_t rem = datetime_ms % MS_PER_DAY;
  return rem < 0 ? rem + MS_PER_DAY : rem;
}

int64_t cedar_duration_to_milliseconds(int64_t duration_ms) {
  return duration_ms;
}
int64_t cedar_duration_to_seconds(int64_t duration_ms) {
  return duration_ms / 1000;
}
int64_t cedar_duration_to_minutes(int64_t duration_ms) {
  return duration_ms / 1000 / 60;
}
int64_t cedar_duration_to_hours(int64_t duration_ms) {
  return duration_ms / 1000 / 60 / 60;
}
int64_t cedar_duration_to_days(int64_t duration_ms) {
  return duration_ms / 1000 / 60 / 60 / 24;
}

size_t cedar_duration_format(int64_t duration_ms, char *buf, size_t size) {
  int n = snprintf(buf, size, "%" PRId64 "ms", duration_ms);
  return n < 0 ? 0 : (size_t)n;
}
