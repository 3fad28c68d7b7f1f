/* RFC 3339 times of the journal: written as UTC with 9 fraction digits, so string order is time order. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "supervisor/audit/journal.h"
#include "supervisor/audit/journal_internal.h"

int64_t journal_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

const char *journal_format_time(int64_t unix_ns, char *buffer, size_t size) {
  time_t seconds = (time_t)(unix_ns / 1000000000);
  long nanoseconds = (long)(unix_ns % 1000000000);
  if (nanoseconds < 0) {
    nanoseconds += 1000000000;
    seconds--;
  }
  /* The writer formats one time per event: reuse the date and time of day within the same second. */
  static __thread time_t cached_seconds = -1;
  static __thread char cached[24];
  if (seconds == cached_seconds && size >= 31) {
    memcpy(buffer, cached, 19);
    buffer[19] = '.';
    for (int i = 28; i >= 20; i--, nanoseconds /= 10) buffer[i] = (char)('0' + nanoseconds % 10);
    buffer[29] = 'Z';
    buffer[30] = '\0';
    return buffer;
  }
  struct tm tm;
  gmtime_r(&seconds, &tm);
  int n = snprintf(buffer, size, "%04d-%02d-%02dT%02d:%02d:%02d.%09ldZ", tm.tm_year + 1900, tm.tm_mon + 1,
                   tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, nanoseconds);
  if (n == 30 && size >= 31) {
    memcpy(cached, buffer, 19);
    cached_seconds = seconds;
  }
  return buffer;
}

static int digits(const char **p, int count, int *value) {
  int v = 0;
  for (int i = 0; i < count; i++) {
    if (!isdigit((unsigned char)**p)) return -1;
    v = v * 10 + (**p - '0');
    (*p)++;
  }
  *value = v;
  return 0;
}

int journal_parse_time(const char *text, int64_t *unix_ns, dome_error *err) {
  const char *p = text;
  int year, month, day, hour = 0, minute = 0, second = 0;
  long nanoseconds = 0;
  int offset_minutes = 0;
  if (!text || digits(&p, 4, &year) < 0 || *p++ != '-' || digits(&p, 2, &month) < 0 || *p++ != '-' ||
      digits(&p, 2, &day) < 0)
    goto bad;
  if (*p == 'T' || *p == 't' || *p == ' ') {
    p++;
    if (digits(&p, 2, &hour) < 0 || *p++ != ':' || digits(&p, 2, &minute) < 0 || *p++ != ':' ||
        digits(&p, 2, &second) < 0)
      goto bad;
    if (*p == '.') {
      p++;
      int n = 0;
      while (isdigit((unsigned char)*p)) {
        if (n < 9) nanoseconds = nanoseconds * 10 + (*p - '0');
        n++;
        p++;
      }
      if (n == 0) goto bad;
      for (; n < 9; n++) nanoseconds *= 10;
    }
    if (*p == 'Z' || *p == 'z') {
      p++;
    } else if (*p == '+' || *p == '-') {
      int sign = *p++ == '-' ? -1 : 1, oh, om;
      if (digits(&p, 2, &oh) < 0 || *p++ != ':' || digits(&p, 2, &om) < 0) goto bad;
      offset_minutes = sign * (oh * 60 + om);
    } else {
      goto bad;
    }
  }
  if (*p != '\0' || month < 1 || month > 12 || day < 1 || day > 31 || hour > 23 || minute > 59 || second > 60)
    goto bad;
  struct tm tm = {.tm_year = year - 1900,
                  .tm_mon = month - 1,
                  .tm_mday = day,
                  .tm_hour = hour,
                  .tm_min = minute,
                  .tm_sec = second};
  time_t seconds = timegm(&tm);
  int64_t utc_seconds = (int64_t)seconds - (int64_t)offset_minutes * 60, scaled;
  /* Event times are int64 nanoseconds since the epoch: 1677-09-21 .. 2262-04-11. */
  if (__builtin_mul_overflow(utc_seconds, (int64_t)1000000000, &scaled) ||
      __builtin_add_overflow(scaled, (int64_t)nanoseconds, unix_ns))
    return dome_error_set(err, ERANGE,
                          "invalid time `%s`: outside 1677-09-21..2262-04-11 (int64 nanoseconds)", text);
  return 0;
bad:
  return dome_error_set(err, EINVAL, "invalid time `%s`: expected RFC 3339 (2026-11-29T14:27:37Z) or a date",
                        text ? text : "");
}
