/* Unit tests of the journal's canonical event text (supervisor/audit/canonical.c): it must be byte for
 * byte jansson's json_dumps(JSON_SORT_KEYS | JSON_COMPACT), the definition in docs/journal-format.md
 * section 3, for random events and for every value it hands back to jansson. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "supervisor/audit/journal.h"
#include "supervisor/audit/journal_internal.h"

static unsigned next_random(unsigned *state) {
  *state = *state * 1103515245u + 12345u;
  return *state >> 8;
}

/* An ASCII string drawn from characters that need each kind of escape and keys that are prefixes of
 * one another. */
static json_t *random_string(unsigned *rng, char *out, size_t size) {
  static const char alphabet[] = "ab\"\\/\b\f\n\r\t\x01\x1f\x7f Zz0_.:-{}[],";
  size_t length = next_random(rng) % 12;
  if (length >= size) length = size - 1;
  for (size_t i = 0; i < length; i++) out[i] = alphabet[next_random(rng) % (sizeof alphabet - 1)];
  out[length] = '\0';
  return json_stringn(out, length);
}

static json_t *random_value(unsigned *rng, int depth) {
  char text[16];
  switch (next_random(rng) % (depth < 4 ? 8 : 6)) {
    case 0:
      return random_string(rng, text, sizeof text);
    case 1: {
      static const json_int_t extremes[] = {0, -1, 9, 10, -9223372036854775807LL - 1, 9223372036854775807LL};
      unsigned pick = next_random(rng) % 8;
      return json_integer(pick < 6 ? extremes[pick] : (json_int_t)next_random(rng) - 4000000);
    }
    case 2:
      return json_true();
    case 3:
      return json_false();
    case 4:
      return json_null();
    case 5:
      return random_string(rng, text, sizeof text);
    case 6: {
      json_t *array = json_array();
      for (unsigned i = next_random(rng) % 5; i > 0; i--)
        json_array_append_new(array, random_value(rng, depth + 1));
      return array;
    }
    default: {
      json_t *object = json_object();
      for (unsigned i = next_random(rng) % 40; i > 0; i--) { /* past 16 and 32 members: both sort paths */
        char key[16];
        json_decref(random_string(rng, key, sizeof key));
        json_object_set_new(object, key, random_value(rng, depth + 1));
      }
      return object;
    }
  }
}

/* journal_canonical_dump(value) == json_dumps(value, JSON_SORT_KEYS | JSON_COMPACT), byte for byte. */
static void assert_same_as_jansson(json_t *value) {
  char *expected = json_dumps(value, JSON_SORT_KEYS | JSON_COMPACT);
  assert_non_null(expected);
  canonical_buffer b;
  journal_canonical_buffer_init(&b);
  assert_int_equal(journal_canonical_dump(value, &b), 0);
  if (b.length != strlen(expected) || memcmp(b.data, expected, b.length) != 0)
    fail_msg("canonical text differs from jansson:\n  got      %.*s\n  expected %s", (int)b.length, b.data,
             expected);
  journal_canonical_buffer_free(&b);
  free(expected);
}

/* Insert `"name":value` at cut into text the way the writer does (docs/journal-format.md section 3). */
static char *insert_member(const char *text, size_t length, size_t cut, const char *member) {
  char *out = malloc(length + strlen(member) + 2);
  assert_non_null(out);
  bool last = text[cut] == '}';
  sprintf(out, "%.*s%s%s%s%s", (int)cut, text, last ? "," : "", member, last ? "" : ",", text + cut);
  return out;
}

/* The offsets the serialiser reports for `seq` and `time` are where jansson would put them. */
static void assert_cuts_right(json_t *event) {
  canonical_buffer b;
  journal_canonical_buffer_init(&b);
  assert_int_equal(journal_canonical_dump(event, &b), 0);
  if (b.cuts_known && !b.reserved_key) {
    char *text = strndup(b.data, b.length);
    assert_non_null(text);
    char *with_seq = insert_member(text, b.length, b.cut_seq, "\"seq\":7");
    char *with_time = insert_member(text, b.length, b.cut_time, "\"time\":\"T\"");
    free(text);
    json_t *copy = json_deep_copy(event);
    json_object_set_new(copy, "seq", json_integer(7));
    char *expected_seq = json_dumps(copy, JSON_SORT_KEYS | JSON_COMPACT);
    json_object_del(copy, "seq");
    json_object_set_new(copy, "time", json_string("T"));
    char *expected_time = json_dumps(copy, JSON_SORT_KEYS | JSON_COMPACT);
    assert_string_equal(with_seq, expected_seq);
    assert_string_equal(with_time, expected_time);
    free(with_seq);
    free(with_time);
    free(expected_seq);
    free(expected_time);
    json_decref(copy);
  }
  journal_canonical_buffer_free(&b);
}

static void test_random_events_match_jansson(void **state) {
  (void)state;
  unsigned rng = 20261129;
  for (int i = 0; i < 3000; i++) {
    json_t *event = json_object();
    json_object_set_new(event, "type", json_string("exec.output"));
    for (unsigned k = next_random(&rng) % 14; k > 0; k--) {
      char key[16];
      json_decref(random_string(&rng, key, sizeof key));
      json_object_set_new(event, key, random_value(&rng, 0));
    }
    assert_same_as_jansson(event);
    assert_cuts_right(event);
    json_decref(event);
  }
}

static void test_reserved_and_escaped_top_level_keys(void **state) {
  (void)state;
  canonical_buffer b;
  journal_canonical_buffer_init(&b);
  json_t *event = json_pack("{s:s, s:i}", "type", "x", "seq", 3);
  assert_int_equal(journal_canonical_dump(event, &b), 0);
  assert_true(b.reserved_key);
  json_decref(event);
  journal_canonical_buffer_free(&b);
  event = json_pack("{s:s, s:i}", "type", "x", "a\"b", 3);
  assert_int_equal(journal_canonical_dump(event, &b), 0);
  assert_false(b.cuts_known);
  json_decref(event);
  journal_canonical_buffer_free(&b);
  event = json_pack("{s:s, s:i, s:i}", "type", "x", "seq0", 1, "tim", 2);
  assert_cuts_right(event);
  json_decref(event);
}

/* Values the fast path hands to jansson: the result is still jansson's. */
static void test_fallbacks_match_jansson(void **state) {
  (void)state;
  json_t *event = json_pack("{s:s, s:f, s:s, s:[f, i]}", "type", "exec.end", "ratio", 0.1, "text",
                            "caf\xc3\xa9 \xe2\x80\xa8 \xf0\x9f\x98\x80", "list", 3.0, 7);
  assert_non_null(event);
  assert_same_as_jansson(event);
  json_object_setn_new(event, "k\0z", 3, json_true()); /* a key with a NUL byte */
  json_object_set_new(event, "k", json_null());
  assert_same_as_jansson(event);
  json_decref(event);

  json_t *deep = json_pack("{s:s}", "type", "deep"), *inner = deep;
  for (int i = 0; i < 40; i++) { /* nesting past the fast path's depth bound */
    json_t *child = json_object();
    json_object_set_new(child, "n", json_integer(i));
    json_object_set_new(inner, "child", child);
    inner = child;
  }
  assert_same_as_jansson(deep);
  json_decref(deep);

  json_t *non_ascii_key = json_pack("{s:s, s:i}", "type", "x", "cl\xc3\xa9", 1);
  assert_same_as_jansson(non_ascii_key);
  json_decref(non_ascii_key);
}

static void test_errors(void **state) {
  (void)state;
  canonical_buffer b;
  journal_canonical_buffer_init(&b);
  json_t *invalid = json_pack("{s:s}", "type", "x");
  json_object_set_new(invalid, "bytes", json_stringn_nocheck("\xff\xfe", 2)); /* invalid UTF-8 */
  assert_int_equal(journal_canonical_dump(invalid, &b), -EINVAL);
  json_decref(invalid);
  journal_canonical_buffer_free(&b);

  json_t *scalar = json_integer(3);
  assert_int_equal(journal_canonical_dump(scalar, &b), -EINVAL);
  json_decref(scalar);

  char *text = malloc(JOURNAL_MAX_EVENT_BYTES + 10);
  assert_non_null(text);
  memset(text, 'a', JOURNAL_MAX_EVENT_BYTES + 9);
  text[JOURNAL_MAX_EVENT_BYTES + 9] = '\0';
  json_t *big = json_pack("{s:s, s:s}", "type", "x", "text", text);
  free(text);
  assert_int_equal(journal_canonical_dump(big, &b), -E2BIG);
  journal_canonical_buffer_free(&b);
  json_object_set_new(big, "text", json_string("\xc3\xa9")); /* jansson's path, within bounds */
  assert_int_equal(journal_canonical_dump(big, &b), 0);
  assert_int_equal(b.length, strlen("{\"text\":\"\xc3\xa9\",\"type\":\"x\"}"));
  journal_canonical_buffer_free(&b);
  json_decref(big);
}

/* journal_line_next_key names the top-level keys in order, raw, and nothing inside strings or nested values.
 */
static void test_line_next_key(void **state) {
  (void)state;
  static const char line[] =
      "{\"a\":\"[{,\\\"x\\\":1\",\"b\":{\"c\":[{\"d\":2}]},\"e\\\"f\":[\"g\",{\"h\":3}],\"request\":{}}";
  const char *expected[] = {"a", "b", "e\\\"f", "request"};
  size_t at = 0, key, key_length, found = 0;
  while (journal_line_next_key(line, sizeof line - 1, &at, &key, &key_length)) {
    assert_true(found < 4);
    assert_int_equal(key_length, strlen(expected[found]));
    assert_memory_equal(line + key, expected[found], key_length);
    assert_int_equal(line[at], ':');
    found++;
  }
  assert_int_equal(found, 4);
  assert_int_equal(at, sizeof line - 1);
  /* a text that ends inside a key: no key */
  at = 0;
  assert_false(journal_line_next_key("{\"ab", 4, &at, &key, &key_length));
  at = 0;
  assert_false(journal_line_next_key("{}", 2, &at, &key, &key_length));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_random_events_match_jansson),
      cmocka_unit_test(test_fallbacks_match_jansson),
      cmocka_unit_test(test_reserved_and_escaped_top_level_keys),
      cmocka_unit_test(test_errors),
      cmocka_unit_test(test_line_next_key),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
