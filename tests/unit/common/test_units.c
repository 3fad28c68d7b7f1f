/* Unit tests for supervisor/common/units: size and duration parsing. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "supervisor/common/units.h"

static void sizes_with_suffixes(void **state) {
  (void)state;
  uint64_t bytes;
  dome_error err = {0};
  assert_int_equal(dome_parse_size("4096", &bytes, &err), 0);
  assert_int_equal(bytes, 4096);
  assert_int_equal(dome_parse_size("256M", &bytes, &err), 0);
  assert_int_equal(bytes, 256ull << 20);
  assert_int_equal(dome_parse_size("1.5G", &bytes, &err), 0);
  assert_int_equal(bytes, 3ull << 29);
  assert_int_equal(dome_parse_size("64Ki", &bytes, &err), 0);
  assert_int_equal(bytes, 64ull << 10);
  assert_int_equal(dome_parse_size("2KiB", &bytes, &err), 0);
  assert_int_equal(bytes, 2048);
  assert_int_equal(dome_parse_size("0", &bytes, &err), 0);
  assert_int_equal(bytes, 0);
}

static void sizes_rejected_with_message(void **state) {
  (void)state;
  uint64_t bytes = 7;
  dome_error err = {0};
  assert_int_equal(dome_parse_size("12Q", &bytes, &err), -EINVAL);
  assert_non_null(strstr(err.message, "12Q"));
  assert_int_equal(dome_parse_size("", &bytes, &err), -EINVAL);
  assert_int_equal(dome_parse_size("-1", &bytes, &err), -EINVAL);
  assert_int_equal(dome_parse_size("1.5", &bytes, &err), -EINVAL);
  assert_int_equal(dome_parse_size("M", &bytes, &err), -EINVAL);
  assert_int_equal(dome_parse_size("99999999999T", &bytes, &err), -ERANGE);
  assert_int_equal(bytes, 7); /* untouched on failure */
}

static void durations(void **state) {
  (void)state;
  uint64_t ms;
  dome_error err = {0};
  assert_int_equal(dome_parse_duration_ms("10", &ms, &err), 0);
  assert_int_equal(ms, 10000);
  assert_int_equal(dome_parse_duration_ms("0.5", &ms, &err), 0);
  assert_int_equal(ms, 500);
  assert_int_equal(dome_parse_duration_ms("250ms", &ms, &err), 0);
  assert_int_equal(ms, 250);
  assert_int_equal(dome_parse_duration_ms("1.0004s", &ms, &err), 0);
  assert_int_equal(ms, 1000);
  assert_int_equal(dome_parse_duration_ms("ten", &ms, &err), -EINVAL);
  assert_non_null(strstr(err.message, "ten"));
  assert_int_equal(dome_parse_duration_ms("5m", &ms, &err), -EINVAL);
}

static void format_round_trip(void **state) {
  (void)state;
  char buffer[32];
  assert_string_equal(dome_format_size(256ull << 20, buffer, sizeof buffer), "256M");
  assert_string_equal(dome_format_size(1536ull << 10, buffer, sizeof buffer), "1536K");
  assert_string_equal(dome_format_size(1000, buffer, sizeof buffer), "1000");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(sizes_with_suffixes),
      cmocka_unit_test(sizes_rejected_with_message),
      cmocka_unit_test(durations),
      cmocka_unit_test(format_round_trip),
  };
  return cmocka_run_group_tests_name("common/units", tests, NULL, NULL);
}
