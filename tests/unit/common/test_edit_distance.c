/* Unit tests for supervisor/common/edit_distance: the unrestricted Damerau-Levenshtein distance. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "supervisor/common/edit_distance.h"

static void single_edits(void **state) {
  (void)state;
  assert_int_equal(dome_edit_distance("agents", "agents"), 0);
  assert_int_equal(dome_edit_distance("agnets", "agents"), 1);  /* transposition */
  assert_int_equal(dome_edit_distance("agent", "agents"), 1);   /* insertion */
  assert_int_equal(dome_edit_distance("agentss", "agents"), 1); /* deletion */
  assert_int_equal(dome_edit_distance("agenta", "agents"), 1);  /* substitution */
  assert_int_equal(dome_edit_distance("Agents", "agents"), 1);  /* case counts */
}

static void textbook_values(void **state) {
  (void)state;
  assert_int_equal(dome_edit_distance("", ""), 0);
  assert_int_equal(dome_edit_distance("", "abc"), 3);
  assert_int_equal(dome_edit_distance("abc", ""), 3);
  assert_int_equal(dome_edit_distance("kitten", "sitting"), 3);
  assert_int_equal(dome_edit_distance("flaw", "lawn"), 2);
  /* Unrestricted: a transposed pair with an insertion between (optimal string alignment gives 3). */
  assert_int_equal(dome_edit_distance("ca", "abc"), 2);
  assert_int_equal(dome_edit_distance("abcdef", "badcfe"), 3);
  assert_int_equal(dome_edit_distance("list", "ls"), 2);
  assert_int_equal(dome_edit_distance("run", "xy"), 3);
}

static void symmetric(void **state) {
  (void)state;
  static const char *words[] = {"",           "a",     "ca",    "abc",   "agents",
                                "agnets",     "audit", "guard", "gaurd", "partially-authorize",
                                "check-parse"};
  size_t count = sizeof words / sizeof words[0];
  for (size_t i = 0; i < count; i++)
    for (size_t j = 0; j < count; j++)
      assert_int_equal(dome_edit_distance(words[i], words[j]), dome_edit_distance(words[j], words[i]));
}

static void bounded_length(void **state) {
  (void)state;
  char longest[DOME_EDIT_DISTANCE_MAX + 1], too_long[DOME_EDIT_DISTANCE_MAX + 2];
  memset(longest, 'a', DOME_EDIT_DISTANCE_MAX);
  longest[DOME_EDIT_DISTANCE_MAX] = '\0';
  memset(too_long, 'a', DOME_EDIT_DISTANCE_MAX + 1);
  too_long[DOME_EDIT_DISTANCE_MAX + 1] = '\0';
  assert_int_equal(dome_edit_distance(longest, ""), DOME_EDIT_DISTANCE_MAX);
  assert_int_equal(dome_edit_distance(longest, longest), 0);
  assert_true(dome_edit_distance(too_long, "a") == (size_t)-1);
  assert_true(dome_edit_distance("a", too_long) == (size_t)-1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(single_edits),
      cmocka_unit_test(textbook_values),
      cmocka_unit_test(symmetric),
      cmocka_unit_test(bounded_length),
  };
  return cmocka_run_group_tests_name("common/edit_distance", tests, NULL, NULL);
}
