/* Unit tests for supervisor/common/utf8: the one UTF-8 sanitizer behind `dome run --json`, domed's
 * results and the journal's exec.output chunks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "supervisor/common/utf8.h"

#define REPLACEMENT "\xef\xbf\xbd"

static void check(const char *in, size_t length, bool replace_nul, const char *expected,
                  size_t expected_length) {
  size_t out_length = 99;
  char *out = dome_utf8_sanitize(in, length, replace_nul, &out_length);
  assert_non_null(out);
  assert_int_equal(out_length, expected_length);
  assert_memory_equal(out, expected, expected_length);
  assert_int_equal(out[out_length], '\0');
  free(out);
}

static void well_formed_kept(void **state) {
  (void)state;
  const char text[] = "a \xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \xf4\x8f\xbf\xbf";
  check(text, sizeof text - 1, true, text, sizeof text - 1);
}

static void ill_formed_replaced_per_byte(void **state) {
  (void)state;
  check("\xc0\xaf", 2, false, REPLACEMENT REPLACEMENT, 6);                                  /* overlong */
  check("\xe0\x80\x80", 3, false, REPLACEMENT REPLACEMENT REPLACEMENT, 9);                  /* overlong */
  check("\xed\xa0\x80", 3, false, REPLACEMENT REPLACEMENT REPLACEMENT, 9);                  /* surrogate */
  check("\xf4\x90\x80\x80", 4, false, REPLACEMENT REPLACEMENT REPLACEMENT REPLACEMENT, 12); /* > U+10FFFF */
  check("x\xe2\x82", 3, false, "x" REPLACEMENT REPLACEMENT, 7); /* truncated at the end */
  check("\xff", 1, false, REPLACEMENT, 3);
}

static void nul_kept_or_replaced(void **state) {
  (void)state;
  check("a\0b", 3, false, "a\0b", 3);
  check("a\0b", 3, true, "a" REPLACEMENT "b", 5);
}

static void incomplete_tail(void **state) {
  (void)state;
  assert_int_equal(dome_utf8_incomplete_tail("ab", 2), 0);
  assert_int_equal(dome_utf8_incomplete_tail("a\xe2", 2), 1);
  assert_int_equal(dome_utf8_incomplete_tail("a\xe2\x82", 3), 2);
  assert_int_equal(dome_utf8_incomplete_tail("a\xe2\x82\xac", 4), 0);
  assert_int_equal(dome_utf8_incomplete_tail("\xf0\x9f\x98", 3), 3);
  assert_int_equal(dome_utf8_incomplete_tail("\x80\x80\x80", 3), 0);
}

/* Chunked output is the same whatever the cut: every split of the input into two chunks. */
static void chunks_independent_of_cuts(void **state) {
  (void)state;
  const char text[] = "h\xc3\xa9llo \xe2\x82\xac\xff \xf0\x9f\x98\x80!\xe2\x82";
  size_t length = sizeof text - 1, whole_length;
  char *whole = dome_utf8_sanitize(text, length, true, &whole_length);
  assert_non_null(whole);
  for (size_t cut = 0; cut <= length; cut++) {
    char carry[4];
    size_t carry_length = 0, first_length, second_length;
    char *first = dome_utf8_sanitize_chunk(carry, &carry_length, text, cut, true, &first_length);
    char *second =
        dome_utf8_sanitize_chunk(carry, &carry_length, text + cut, length - cut, true, &second_length);
    char *rest = dome_utf8_sanitize(carry, carry_length, true, NULL); /* the final flush */
    size_t rest_length = strlen(rest);
    assert_int_equal(first_length + second_length + rest_length, whole_length);
    assert_memory_equal(first, whole, first_length);
    assert_memory_equal(second, whole + first_length, second_length);
    assert_memory_equal(rest, whole + first_length + second_length, rest_length);
    free(first);
    free(second);
    free(rest);
  }
  free(whole);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(well_formed_kept),           cmocka_unit_test(ill_formed_replaced_per_byte),
      cmocka_unit_test(nul_kept_or_replaced),       cmocka_unit_test(incomplete_tail),
      cmocka_unit_test(chunks_independent_of_cuts),
  };
  return cmocka_run_group_tests_name("common/utf8", tests, NULL, NULL);
}
