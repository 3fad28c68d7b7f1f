/* Unit tests for policy/extensions: ipaddr, decimal, datetime and duration, with the spellings and
 * results of cedar-policy 4.x and cedar-spec's Lean model. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "policy/extensions/extensions.h"

static int ip(const char *text, cedar_ipaddr *out) {
  return cedar_ipaddr_parse(text, strlen(text), out);
}

static cedar_ipaddr must_ip(const char *text) {
  cedar_ipaddr a;
  assert_int_equal(ip(text, &a), 0);
  return a;
}

static void ipaddr_accepted_spellings(void **state) {
  (void)state;
  static const char *const good[] = {"127.0.0.1",
                                     "0.0.0.0",
                                     "255.255.255.255",
                                     "10.0.0.0/8",
                                     "127.0.0.1/0",
                                     "127.0.0.1/32",
                                     "::1",
                                     "::",
                                     "ffee::/64",
                                     "ffee::/0",
                                     "ffee::/128",
                                     "1:2:3:4:5:6:7:8",
                                     "1:2:3:4:5:6:7::",
                                     "::2:3:4:5:6:7:8",
                                     "FFFF::abcd",
                                     "::ffff:ff00:1",
                                     "1::",
                                     "0:0:0:0:0:0:0:1/128"};
  for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
    cedar_ipaddr a;
    if (ip(good[i], &a) != 0) fail_msg("rejected %s", good[i]);
  }
  cedar_ipaddr a = must_ip("192.168.1.20/24");
  assert_false(a.is_v6);
  assert_int_equal(a.prefix, 24);
  assert_int_equal(a.address[3], 20); /* host bits kept as written */
  a = must_ip("::ffff:ff00:1");
  assert_true(a.is_v6);
  assert_int_equal(a.prefix, 128);
  assert_int_equal(a.address[10], 0xff);
  assert_int_equal(a.address[12], 0xff);
  assert_int_equal(a.address[15], 1);
}

static void ipaddr_rejected_spellings(void **state) {
  (void)state;
  static const char *const bad[] = {"",
                                    "380.0.0.1",
                                    "?",
                                    "ab.ab.ab.ab",
                                    "foo::1",
                                    "::ffff:127.0.0.1",
                                    "::127.0.0.1",
                                    "127.0.0.1/8/24",
                                    "fee::/64::1",
                                    "172.0.0.1/64",
                                    "ffee::/132",
                                    "01.2.3.4",
                                    "1.2.3.04",
                                    "1.2.3",
                                    "1.2.3.4.5",
                                    "1.2.3.4/",
                                    "1.2.3.4/08",
                                    "1.2.3.4/+8",
                                    "1.2.3.4/ 8",
                                    " 1.2.3.4",
                                    "1.2.3.4 ",
                                    "1..3.4",
                                    "1:2:3:4:5:6:7:8:9",
                                    "1::2::3",
                                    ":::",
                                    "1:::2",
                                    "12345::",
                                    "::/0129",
                                    "fe80::1%eth0",
                                    "1:2:3:4:5:6:7:8::",
                                    "::1:2:3:4:5:6:7:8",
                                    "1.2.3.4/033",
                                    "0x1.2.3.4",
                                    "::/1280",
                                    "::g"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    cedar_ipaddr a = {0};
    a.prefix = 99;
    if (ip(bad[i], &a) != -EINVAL) fail_msg("accepted %s", bad[i]);
    assert_int_equal(a.prefix, 99); /* untouched */
  }
}

static void ipaddr_predicates(void **state) {
  (void)state;
  cedar_ipaddr a;
  a = must_ip("127.0.0.1");
  assert_true(cedar_ipaddr_is_ipv4(&a) && !cedar_ipaddr_is_ipv6(&a));
  a = must_ip("127.0.0.2");
  assert_true(cedar_ipaddr_is_loopback(&a));
  a = must_ip("::1");
  assert_true(cedar_ipaddr_is_loopback(&a) && cedar_ipaddr_is_ipv6(&a));
  a = must_ip("::2");
  assert_false(cedar_ipaddr_is_loopback(&a));
  a = must_ip("127.0.0.1/4"); /* the range reaches outside 127/8 */
  assert_false(cedar_ipaddr_is_loopback(&a));
  a = must_ip("127.1.0.0/9");
  assert_true(cedar_ipaddr_is_loopback(&a));
  a = must_ip("228.228.228.0");
  assert_true(cedar_ipaddr_is_multicast(&a));
  a = must_ip("224.0.0.0/3");
  assert_false(cedar_ipaddr_is_multicast(&a));
  a = must_ip("224.0.0.0/5");
  assert_true(cedar_ipaddr_is_multicast(&a));
  a = must_ip("ff00::/7");
  assert_false(cedar_ipaddr_is_multicast(&a));
  a = must_ip("ff00::/9");
  assert_true(cedar_ipaddr_is_multicast(&a));
  a = must_ip("ff00::2");
  assert_true(cedar_ipaddr_is_multicast(&a));
  a = must_ip("127.0.0.1/1");
  assert_false(cedar_ipaddr_is_multicast(&a));
  a = must_ip("::ffff:ff00:1"); /* v4-mapped written in hex is v6: not loopback */
  assert_false(cedar_ipaddr_is_loopback(&a));
}

static void ipaddr_ranges_and_equality(void **state) {
  (void)state;
  struct {
    const char *ip, *range;
    bool in;
  } cases[] = {
      {"192.168.0.1/24", "192.168.0.1/24", true},
      {"192.168.0.1", "192.168.0.1/28", true},
      {"192.168.0.10", "192.168.0.1/24", true},
      {"192.168.0.10", "192.168.0.1/28", true},
      {"192.168.0.75", "192.168.0.1/24", true},
      {"192.168.0.75", "192.168.0.1/28", false},
      {"192.168.0.1/24", "192.168.0.1", false},
      {"10.0.0.0/8", "0.0.0.0/0", true},
      {"1:2:3:4::/48", "1:2::/32", true},
      {"1:2:3:4::/16", "1:2::/32", false},
      {"127.0.0.1", "::1", false},
      {"::1", "127.0.0.1/0", false},
      {"::", "::/0", true},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    cedar_ipaddr a = must_ip(cases[i].ip), b = must_ip(cases[i].range);
    if (cedar_ipaddr_is_in_range(&a, &b) != cases[i].in)
      fail_msg("%s isInRange %s should be %d", cases[i].ip, cases[i].range, cases[i].in);
  }
  cedar_ipaddr a = must_ip("127.0.0.1"), b = must_ip("127.0.0.1/32"), c = must_ip("192.168.0.1/24"),
               d = must_ip("192.168.0.0/24"), e = must_ip("::1");
  assert_true(cedar_ipaddr_equal(&a, &b));
  assert_false(cedar_ipaddr_equal(&c, &d));
  assert_false(cedar_ipaddr_equal(&a, &e));
  assert_true(cedar_ipaddr_compare(&a, &e) < 0);
  assert_true(cedar_ipaddr_compare(&d, &c) < 0);
  char buf[64];
  cedar_ipaddr_format(&c, true, buf, sizeof buf);
  assert_string_equal(buf, "192.168.0.1/24");
  cedar_ipaddr f = must_ip("2001:db8:0:0:1:0:0:1");
  cedar_ipaddr_format(&f, false, buf, sizeof buf);
  assert_string_equal(buf, "2001:db8::1:0:0:1");
  cedar_ipaddr_format(&e, true, buf, sizeof buf);
  assert_string_equal(buf, "::1/128");
}

static int dec(const char *text, int64_t *out) {
  return cedar_decimal_parse(text, strlen(text), out);
}

static void decimal_parse_and_format(void **state) {
  (void)state;
  int64_t v;
  assert_int_equal(dec("1.0", &v), 0);
  assert_int_equal(v, 10000);
  assert_int_equal(dec("-1.5", &v), 0);
  assert_int_equal(v, -15000);
  assert_int_equal(dec("-0.0001", &v), 0);
  assert_int_equal(v, -1);
  assert_int_equal(dec("007.25", &v), 0);
  assert_int_equal(v, 72500);
  assert_int_equal(dec("922337203685477.5807", &v), 0);
  assert_int_equal(v, INT64_MAX);
  assert_int_equal(dec("-922337203685477.5808", &v), 0);
  assert_int_equal(v, INT64_MIN);
  assert_int_equal(dec("922337203685477.5808", &v), -ERANGE);
  assert_int_equal(dec("-922337203685477.5809", &v), -ERANGE);
  assert_int_equal(dec("99999999999999999999999.0", &v), -ERANGE);
  static const char *const bad[] = {"",     "1",     "1.",      ".5",    "-.5",  "-",
                                    "-1",   "+1.0",  "1.23456", "1.2.3", "1,0",  " 1.0",
                                    "1.0 ", "1e3.0", "--1.0",   "1.-5",  "0x1.0"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    if (dec(bad[i], &v) != -EINVAL) fail_msg("accepted decimal %s", bad[i]);
  char buf[40];
  cedar_decimal_format(-15000, buf, sizeof buf);
  assert_string_equal(buf, "-1.5000");
  cedar_decimal_format(INT64_MIN, buf, sizeof buf);
  assert_string_equal(buf, "-922337203685477.5808");
  cedar_decimal_format(1, buf, sizeof buf);
  assert_string_equal(buf, "0.0001");
}

static int dt(const char *text, int64_t *out) {
  return cedar_datetime_parse(text, strlen(text), out);
}

static void datetime_accepted_forms(void **state) {
  (void)state;
  int64_t v;
  assert_int_equal(dt("1970-01-01", &v), 0);
  assert_int_equal(v, 0);
  assert_int_equal(dt("2024-10-15", &v), 0);
  assert_int_equal(v, INT64_C(1728950400000));
  assert_int_equal(dt("2024-10-15T11:38:02Z", &v), 0);
  assert_int_equal(v, INT64_C(1728992282000));
  assert_int_equal(dt("2024-10-15T11:38:02.101Z", &v), 0);
  assert_int_equal(v, INT64_C(1728992282101));
  assert_int_equal(dt("2024-10-15T11:38:02.101+1134", &v), 0); /* = 00:04:02.101 UTC */
  assert_int_equal(v, INT64_C(1728950400000) + (4 * 60 + 2) * 1000 + 101);
  assert_int_equal(dt("2024-10-15T11:38:02-1134", &v), 0); /* = 23:12:02 UTC */
  assert_int_equal(v, INT64_C(1728950400000) + ((23 * 60 + 12) * 60 + 2) * 1000);
  assert_int_equal(dt("2024-10-15T23:59:00+2359", &v), 0);
  assert_int_equal(v, INT64_C(1728950400000));
  assert_int_equal(dt("1969-12-31T23:59:59.999Z", &v), 0);
  assert_int_equal(v, -1);
  assert_int_equal(dt("0000-01-01", &v), 0);
  assert_int_equal(v, INT64_C(-62167219200000));
  assert_int_equal(dt("9999-12-31T23:59:59.999Z", &v), 0);
  assert_int_equal(v, INT64_C(253402300799999));
  assert_int_equal(dt("2024-02-29", &v), 0);
  assert_int_equal(dt("2000-02-29", &v), 0);
}

static void datetime_rejected_forms(void **state) {
  (void)state;
  static const char *const bad[] = {"",
                                    "a",
                                    "-",
                                    "-1",
                                    "11-12-13",
                                    "1111-1x-20",
                                    "2024-10-15Z",
                                    "2024-10-15T11:38:02ZZ",
                                    "0000-0a-01",
                                    "10000-01-01",
                                    "2024-00-01",
                                    "2024-01-00",
                                    "2024-02-30",
                                    "2025-02-29",
                                    "1900-02-29",
                                    "2024-20-01",
                                    "2024-01-32",
                                    "2024-04-31",
                                    "2024-01-01T",
                                    "2024-01-01Ta",
                                    "2024-01-01T01:",
                                    "2024-01-01T01:02",
                                    "2024-01-01T01:02:0b",
                                    "2024-01-01T01::02:03",
                                    "2024-01-01T31:02:03Z",
                                    "2024-01-01T01:60:03Z",
                                    "2016-12-31T23:59:60Z",
                                    "2024-01-01T00:00:00",
                                    "2024-01-01T00:00:00T",
                                    "2024-01-01T00:00:00x001Z",
                                    "2024-01-01T00:00:00.0001Z",
                                    "2024-01-01T00:00:00.01Z",
                                    "2024-01-01T00:00:00+2400",
                                    "2024-01-01T00:00:00+0060",
                                    "2024-01-01T00:00:00+01",
                                    "2024-01-01T00:00:00+01:00",
                                    "2024-01-01 00:00:00Z",
                                    "2024-1-01",
                                    "+2024-01-01"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    int64_t v = 42;
    if (dt(bad[i], &v) != -EINVAL) fail_msg("accepted datetime %s", bad[i]);
    assert_int_equal(v, 42);
  }
}

static int du(const char *text, int64_t *out) {
  return cedar_duration_parse(text, strlen(text), out);
}

static void duration_forms_and_overflow(void **state) {
  (void)state;
  int64_t v;
  assert_int_equal(du("1d2h3m4s5ms", &v), 0);
  assert_int_equal(v, INT64_C(86400000) + 2 * 3600000 + 3 * 60000 + 4000 + 5);
  assert_int_equal(du("-2h", &v), 0);
  assert_int_equal(v, -7200000);
  assert_int_equal(du("10ms", &v), 0);
  assert_int_equal(v, 10);
  assert_int_equal(du("1m1ms", &v), 0);
  assert_int_equal(v, 60001);
  assert_int_equal(du("0d", &v), 0);
  assert_int_equal(v, 0);
  assert_int_equal(du("9223372036854775807ms", &v), 0);
  assert_int_equal(v, INT64_MAX);
  assert_int_equal(du("-9223372036854775808ms", &v), 0);
  assert_int_equal(v, INT64_MIN);
  assert_int_equal(du("9223372036854775808ms", &v), -ERANGE);
  assert_int_equal(du("106751991168d", &v), -ERANGE);
  assert_int_equal(du("106751991167d", &v), 0);
  assert_int_equal(du("99999999999999999999999ms", &v), -ERANGE);
  assert_int_equal(du("9223372036854775807ms1ms", &v), -EINVAL); /* ms twice */
  static const char *const bad[] = {"",    "-",   "1",   "d",    "1x", "1h1d",  "1s1m",     "1d1d", "1.5h",
                                    "+1h", "1h ", " 1h", "--1h", "1H", "1ms1s", "-1ms-1ms", "1mss"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    if (du(bad[i], &v) != -EINVAL) fail_msg("accepted duration %s", bad[i]);
}

static void datetime_arithmetic(void **state) {
  (void)state;
  int64_t v;
  assert_int_equal(cedar_datetime_offset(INT64_MAX, 1, &v), -ERANGE);
  assert_int_equal(cedar_datetime_offset(10, -20, &v), 0);
  assert_int_equal(v, -10);
  assert_int_equal(cedar_datetime_duration_since(INT64_MIN, 1, &v), -ERANGE);
  assert_int_equal(cedar_datetime_duration_since(5, 7, &v), 0);
  assert_int_equal(v, -2);
  assert_int_equal(cedar_datetime_to_date(INT64_C(1728992282101), &v), 0);
  assert_int_equal(v, INT64_C(1728950400000));
  assert_int_equal(cedar_datetime_to_date(-1, &v), 0);
  assert_int_equal(v, -86400000);
  assert_int_equal(cedar_datetime_to_date(-86400000, &v), 0);
  assert_int_equal(v, -86400000);
  assert_int_equal(cedar_datetime_to_date(INT64_MIN, &v), -ERANGE);
  assert_int_equal(cedar_datetime_to_time(-1), 86399999);
  assert_int_equal(cedar_datetime_to_time(-86400000), 0);
  assert_int_equal(cedar_datetime_to_time(INT64_C(1728992282101)), 41882101);
  assert_int_equal(cedar_duration_to_days(-(INT64_C(86400000) * 2 - 1)), -1);
  assert_int_equal(cedar_duration_to_hours(7199999), 1);
  assert_int_equal(cedar_duration_to_minutes(-119999), -1);
  assert_int_equal(cedar_duration_to_seconds(1999), 1);
  assert_int_equal(cedar_duration_to_milliseconds(-5), -5);
  char buf[32];
  cedar_duration_format(-7200000, buf, sizeof buf);
  assert_string_equal(buf, "-7200000ms");
}

static void function_table(void **state) {
  (void)state;
  const cedar_extension_function *f = cedar_extension_function_find("isInRange");
  assert_non_null(f);
  assert_true(f->method_style);
  assert_int_equal(f->argument_count, 2);
  assert_int_equal(f->result, CEDAR_EXT_TYPE_BOOL);
  f = cedar_extension_function_find("ip");
  assert_true(f->is_constructor && !f->method_style);
  assert_int_equal(f->arguments[0], CEDAR_EXT_TYPE_STRING);
  f = cedar_extension_function_find("durationSince");
  assert_int_equal(f->arguments[1], CEDAR_EXT_TYPE_DATETIME);
  assert_int_equal(f->result, CEDAR_EXT_TYPE_DURATION);
  assert_null(cedar_extension_function_find("isIpv5"));
  size_t count;
  cedar_extension_functions(&count);
  assert_int_equal(count, 22);
  assert_string_equal(cedar_extension_type_name(CEDAR_EXT_TYPE_IPADDR), "ipaddr");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(ipaddr_accepted_spellings), cmocka_unit_test(ipaddr_rejected_spellings),
      cmocka_unit_test(ipaddr_predicates),         cmocka_unit_test(ipaddr_ranges_and_equality),
      cmocka_unit_test(decimal_parse_and_format),  cmocka_unit_test(datetime_accepted_forms),
      cmocka_unit_test(datetime_rejected_forms),   cmocka_unit_test(duration_forms_and_overflow),
      cmocka_unit_test(datetime_arithmetic),       cmocka_unit_test(function_table),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
