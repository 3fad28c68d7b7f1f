/* Unit tests for the JSON loading under entities and context parsing (policy/syntax/json_load.c): the
 * whitespace compaction before jansson, error positions of the text as given, NUL escapes, the scratch
 * arena for jansson's nodes (and its fallback when a program installs its own jansson allocator), and the
 * transitive closure of large hierarchies. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "policy/cedar.h"
#include "policy/eval/eval.h"

static json_t *load(const char *text) {
  json_error_t err;
  return cedar_json_loadb(text, strlen(text), &err);
}

/* Whitespace goes, tokens are never joined, strings are kept byte for byte. */
static void compaction_keeps_json_meaning(void **state) {
  (void)state;
  json_t *j = load(" {\n  \"a b\" : [ true ,\tfalse , -1 , \"x  y\\n\" ] ,\r\n \"c\":null }\n");
  assert_non_null(j);
  json_t *a = json_object_get(j, "a b");
  assert_int_equal(json_array_size(a), 4);
  assert_true(json_is_false(json_array_get(a, 1)));
  assert_int_equal(json_integer_value(json_array_get(a, 2)), -1);
  assert_string_equal(json_string_value(json_array_get(a, 3)), "x  y\n");
  json_decref(j);
  /* invalid texts stay invalid: two bare tokens separated by whitespace are not joined */
  const char *bad[] = {"[1 2]", "[tr ue]", "[- 1]",  "[1\n2]", "{\"a\":1 \"b\":2}", "[\"a\" \"b\"]", "[1,]",
                       "",      "  ",      "\"open", "[\"\\"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    json_t *x = load(bad[i]);
    if (x) fail_msg("accepted invalid JSON: %s", bad[i]);
  }
  /* duplicates are still refused */
  assert_null(load("{ \"a\" : 1 , \"a\" : 2 }"));
}

/* Property: on random texts built from JSON fragments and whitespace (valid and not), compaction changes
 * nothing jansson decides: the same texts are accepted, to equal values (no "\\u0000" in these). */
static void compaction_agrees_with_jansson(void **state) {
  (void)state;
  static const char *const pieces[] = {
      "{",  "}", "[",  "]",  ",",  ":",    "\"a\"",       "\"b c\"",  "\"\\\"\"", "\"\\\\\"",
      "1",  "-", "2",  ".5", "e3", "true", "tr",          "ue",       "null",     "\"x",
      "\\", " ", "\n", "\t", "\r", "  ",   "\"\\u00e9\"", "\xc3\xa9", "\x01",     "0"};
  unsigned long long seed = 0x9e3779b97f4a7c15ull;
  char text[256];
  size_t accepted = 0;
  for (int iter = 0; iter < 40000; iter++) {
    size_t n = 0;
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    int count = 1 + (int)((seed >> 33) % 14);
    /* half of the cases start from a valid skeleton so that many are accepted */
    if (iter % 2) {
      static const char *const valid[] = {"{\"k\" : [1 , 2 ,\n true] , \"m\":{ }}",
                                          "[ \"a b\" , -2.5e3 , null ]", " { \"a\" :\t\"\\\" x\" } ",
                                          "[[ ],{ } , [ 0 ]]"};
      const char *v = valid[(seed >> 40) % 4];
      size_t len = strlen(v);
      memcpy(text, v, len);
      n = len;
      /* insert or delete one byte somewhere */
      size_t at = (seed >> 20) % (n + 1);
      if ((seed >> 50) & 1) {
        memmove(text + at + 1, text + at, n - at);
        text[at] = " \n1\"e"[(seed >> 52) % 6];
        n++;
      } else if (at < n) {
        memmove(text + at, text + at + 1, n - at - 1);
        n--;
      }
    } else {
      for (int k = 0; k < count; k++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        const char *p = pieces[(seed >> 33) % (sizeof pieces / sizeof *pieces)];
        size_t len = strlen(p);
        if (n + len >= sizeof text) break;
        memcpy(text + n, p, len);
        n += len;
      }
    }
    json_error_t e1, e2;
    json_t *plain = json_loadb(text, n, JSON_ALLOW_NUL | JSON_REJECT_DUPLICATES, &e1);
    json_t *ours = cedar_json_loadb(text, n, &e2);
    if (!plain != !ours)
      fail_msg("disagreement on `%.*s`: jansson %s, compacted %s", (int)n, text,
               plain ? "accepts" : "rejects", ours ? "accepts" : "rejects");
    if (plain) {
      accepted++;
      assert_true(json_equal(plain, ours));
    } else {
      /* and the error is reported at the same place */
      assert_int_equal(e1.line, e2.line);
      assert_int_equal(e1.column, e2.column);
    }
    json_decref(plain);
    json_decref(ours);
  }
  assert_true(accepted > 1000);
}

/* An error reports the line and column of the text as written, not of the compacted copy. */
static void error_positions_are_those_of_the_input(void **state) {
  (void)state;
  const char *text =
      "[\n  {\n    \"uid\": {\"type\": \"User\", \"id\": \"a\"},\n    \"attrs\": {,}\n  }\n]\n";
  cedar_entities *es = NULL;
  cedar_diagnostic d = {0};
  assert_int_equal(cedar_entities_parse_json(text, strlen(text), "e.json", NULL, &es, &d), -EINVAL);
  assert_int_equal(d.line, 4);
  assert_int_equal(d.column, 15);
  json_error_t err;
  assert_null(cedar_json_loadb("{\"a\\u0000\":\n  [1 2]}", 20, &err));
  assert_int_equal(err.line, 2);
}

/* NUL escapes (in keys too) survive the rewrite, with and without whitespace around them. */
static void nul_escapes(void **state) {
  (void)state;
  const char *text =
      "[ {\"uid\": {\"type\": \"U\", \"id\": \"a\\u0000b\"},\n \"attrs\": {\"k\\u0000\": \"v\\u0000\"},"
      " \"parents\": [ ] } ]";
  cedar_entities *es = NULL;
  cedar_diagnostic d = {0};
  assert_int_equal(cedar_entities_parse_json(text, strlen(text), "e.json", NULL, &es, &d), 0);
  cedar_euid uid = {{"U", 1}, {"a\0b", 3}};
  const cedar_entity *e = cedar_entities_find(es, &uid);
  assert_non_null(e);
  const cedar_value *v = cedar_record_get(&e->attrs, (cedar_str){"k\0", 2});
  assert_non_null(v);
  assert_int_equal(v->kind, CV_STRING);
  assert_int_equal(v->u.s.len, 2);
  assert_memory_equal(v->u.s.ptr, "v\0", 2);
  cedar_entities_free(es);
}

/* jansson's allocation functions are the library's hooks; other jansson users on this thread work. */
static void hooks_leave_other_jansson_users_alone(void **state) {
  (void)state;
  json_malloc_t m;
  json_free_t f;
  json_get_alloc_funcs(&m, &f);
  assert_true(m != malloc && f != free);
  json_t *o = json_pack("{s:[i,s,{s:b}]}", "x", 1, "y", "z", true);
  assert_non_null(o);
  char *s = json_dumps(o, JSON_COMPACT);
  assert_string_equal(s, "{\"x\":[1,\"y\",{\"z\":true}]}");
  free(s);
  json_decref(o);
  cedar_json_scratch scratch;
  json_error_t err;
  json_t *t = cedar_json_scratch_load(&scratch, "[1, {\"a\": \"b\"}]", 15, &err);
  assert_non_null(t);
  assert_true(scratch.hooked);
  assert_non_null(scratch.head);
  assert_string_equal(json_string_value(json_object_get(json_array_get(t, 1), "a")), "b");
  cedar_json_scratch_release(&scratch, t);
  assert_null(cedar_json_scratch_load(&scratch, "[1,", 3, &err));
  assert_null(scratch.head);
}

static size_t live_blocks;
static void *counting_malloc(size_t n) {
  live_blocks++;
  return malloc(n);
}
static void counting_free(void *p) {
  if (p) live_blocks--;
  free(p);
}

/* A program that installs its own jansson allocator: parsing falls back to ordinary trees, freed. */
static void fallback_when_allocator_replaced(void **state) {
  (void)state;
  json_malloc_t m;
  json_free_t f;
  json_get_alloc_funcs(&m, &f);
  json_set_alloc_funcs(counting_malloc, counting_free);
  const char *text = "[{\"uid\":{\"type\":\"U\",\"id\":\"a\"},\"attrs\":{\"n\":[1,2]},\"parents\":[]}]";
  cedar_entities *es = NULL;
  cedar_diagnostic d = {0};
  int r = cedar_entities_parse_json(text, strlen(text), "e.json", NULL, &es, &d);
  size_t left = live_blocks;
  json_set_alloc_funcs(m, f);
  assert_int_equal(r, 0);
  assert_int_equal(left, 0);
  assert_int_equal(cedar_entities_count(es), 1);
  cedar_entities_free(es);
}

/* Threads parsing entities while others build and free jansson values. */
static void *parse_loop(void *arg) {
  const char *text = arg;
  for (int i = 0; i < 300; i++) {
    cedar_entities *es = NULL;
    cedar_diagnostic d = {0};
    if (cedar_entities_parse_json(text, strlen(text), "e.json", NULL, &es, &d) != 0) return (void *)1;
    cedar_entities_free(es);
  }
  return NULL;
}
static void *jansson_loop(void *arg) {
  (void)arg;
  for (int i = 0; i < 300; i++) {
    json_t *o = json_pack("{s:s,s:[i,i]}", "a", "b", "c", i, i + 1);
    char *s = json_dumps(o, 0);
    json_t *back = s ? json_loads(s, 0, NULL) : NULL;
    int bad = !back || !json_equal(o, back);
    free(s);
    json_decref(back);
    json_decref(o);
    if (bad) return (void *)1;
  }
  return NULL;
}
static void concurrent_users(void **state) {
  (void)state;
  const char *text =
      "[ {\"uid\": {\"type\": \"U\", \"id\": \"a\"}, \"attrs\": {\"s\": [1, 2, 3]},\n"
      "  \"parents\": [{\"type\": \"G\", \"id\": \"g\"}]},\n"
      "  {\"uid\": {\"type\": \"G\", \"id\": \"g\"}, \"attrs\": {}, \"parents\": []} ]";
  pthread_t t[4];
  for (int i = 0; i < 4; i++)
    assert_int_equal(pthread_create(&t[i], NULL, i % 2 ? jansson_loop : parse_loop, (void *)text), 0);
  for (int i = 0; i < 4; i++) {
    void *rv;
    pthread_join(t[i], &rv);
    assert_null(rv);
  }
}

/* Closure over a set larger than the on-stack scratch, with many ancestors (sorted by qsort). */
static void large_hierarchy(void **state) {
  (void)state;
  enum { N = 150 };
  size_t cap = 64 * N + 4096;
  char *text = malloc(cap);
  assert_non_null(text);
  size_t n = 0;
  n += (size_t)snprintf(text + n, cap - n, "[");
  for (int i = 0; i < N; i++) {
    n += (size_t)snprintf(text + n, cap - n,
                          "%s{\"uid\":{\"type\":\"G\",\"id\":\"g%d\"},\"attrs\":{},\"parents\":[",
                          i ? "," : "", i);
    if (i + 1 < N) n += (size_t)snprintf(text + n, cap - n, "{\"type\":\"G\",\"id\":\"g%d\"}", i + 1);
    n += (size_t)snprintf(text + n, cap - n, "]}");
  }
  n += (size_t)snprintf(text + n, cap - n, "]");
  cedar_entities *es = NULL;
  cedar_diagnostic d = {0};
  assert_int_equal(cedar_entities_parse_json(text, n, "e.json", NULL, &es, &d), 0);
  cedar_euid g0 = {{"G", 1}, {"g0", 2}}, last = {{"G", 1}, {"g149", 4}}, mid = {{"G", 1}, {"g77", 3}};
  const cedar_entity *e = cedar_entities_find(es, &g0);
  assert_non_null(e);
  assert_int_equal(e->ancestor_count, N - 1);
  assert_true(cedar_entity_has_ancestor(e, &last));
  assert_true(cedar_entity_has_ancestor(e, &mid));
  assert_false(cedar_entity_has_ancestor(cedar_entities_find(es, &last), &g0));
  for (size_t i = 1; i < e->ancestor_count; i++)
    assert_true(cedar_euid_cmp(&e->ancestors[i - 1], &e->ancestors[i]) < 0);
  cedar_entities_free(es);
  /* a cycle through the large set is still refused */
  char *cyc = strstr(text, "\"g149\"},\"attrs\":{},\"parents\":[");
  assert_non_null(cyc);
  char *tail = cyc + strlen("\"g149\"},\"attrs\":{},\"parents\":[");
  char *fixed = malloc(cap + 64);
  assert_non_null(fixed);
  int k = snprintf(fixed, cap + 64, "%.*s{\"type\":\"G\",\"id\":\"g0\"}%s", (int)(tail - text), text, tail);
  assert_int_equal(cedar_entities_parse_json(fixed, (size_t)k, "e.json", NULL, &es, &d), -EINVAL);
  assert_non_null(strstr(d.message, "cycle"));
  free(fixed);
  free(text);
}

/* Entities and context from parsed jansson values decide as the text path does; errors are the same. */
static void from_parsed_values(void **state) {
  (void)state;
  const char *etext =
      "[{\"uid\":{\"type\":\"User\",\"id\":\"alice\"},\"attrs\":{\"age\":30,"
      "\"ip\":{\"__extn\":{\"fn\":\"ip\",\"arg\":\"10.0.0.1\"}}},"
      "\"parents\":[{\"type\":\"Group\",\"id\":\"staff\"}]},"
      "{\"uid\":{\"type\":\"Group\",\"id\":\"staff\"},\"attrs\":{},\"parents\":[]}]";
  const char *policy =
      "permit(principal in Group::\"staff\", action, resource) when { principal.age > 18 && "
      "principal.ip.isInRange(ip(\"10.0.0.0/8\")) && context.ok };";
  cedar_policy_set *set = NULL;
  cedar_diagnostic d = {0};
  assert_int_equal(cedar_policy_set_parse(policy, strlen(policy), "p.cedar", 0, &set, &d), 0);
  json_t *etree = json_loads(etext, 0, NULL), *ctree = json_loads("{\"ok\": true}", 0, NULL);
  assert_non_null(etree);
  assert_non_null(ctree);
  cedar_entities *es = NULL;
  cedar_context *ctx = NULL;
  assert_int_equal(cedar_entities_from_json(etree, "e.json", NULL, &es, &d), 0);
  assert_int_equal(cedar_entities_count(es), 2);
  cedar_request r = {
      .principal = {"User", "alice", 5}, .action = {"Action", "a", 1}, .resource = {"R", "r", 1}};
  assert_int_equal(cedar_context_from_json(ctree, "c.json", NULL, &r.action, &ctx, &d), 0);
  r.context = ctx;
  cedar_response resp;
  assert_int_equal(cedar_authorize(set, es, &r, &resp), 0);
  assert_int_equal(resp.decision, CEDAR_ALLOW);
  cedar_response_release(&resp);
  cedar_context_free(ctx);
  cedar_entities_free(es);
  /* the tree is unchanged and still owned by the caller */
  char *again = json_dumps(etree, JSON_COMPACT);
  assert_string_equal(again, etext);
  free(again);
  json_decref(etree);
  json_decref(ctree);
  /* errors */
  json_t *bad = json_loads(
      "[{\"uid\":{\"type\":\"User\",\"id\":\"a\"},\"attrs\":{\"x\":1.5},\"parents\":[]}]", 0, NULL);
  assert_int_equal(cedar_entities_from_json(bad, "e.json", NULL, &es, &d), -EINVAL);
  assert_non_null(strstr(d.message, "integers"));
  json_decref(bad);
  bad = json_loads("[1]", JSON_DECODE_ANY, NULL);
  assert_int_equal(cedar_context_from_json(bad, "c.json", NULL, NULL, &ctx, &d), -EINVAL);
  assert_non_null(strstr(d.message, "object"));
  json_decref(bad);
  cedar_policy_set_free(set);
}

/* Small and sized arenas: zeroed or not, 16-byte aligned, big requests. */
static void arenas(void **state) {
  (void)state;
  cedar_arena *a = cedar_arena_new_sized(300, 4096);
  assert_non_null(a);
  for (int i = 0; i < 1000; i++) {
    size_t size = (size_t)(i % 97) + 1;
    unsigned char *p = i % 2 ? cedar_arena_alloc(a, size) : cedar_arena_alloc_uninit(a, size);
    assert_non_null(p);
    assert_int_equal((uintptr_t)p % 16, 0);
    if (i % 2)
      for (size_t b = 0; b < size; b++) assert_int_equal(p[b], 0);
    memset(p, 0xab, size);
  }
  unsigned char *big = cedar_arena_alloc(a, 100000);
  assert_non_null(big);
  assert_int_equal(big[99999], 0);
  assert_null(cedar_arena_alloc_uninit(a, SIZE_MAX - 8));
  cedar_arena_free(a);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(compaction_keeps_json_meaning),
      cmocka_unit_test(compaction_agrees_with_jansson),
      cmocka_unit_test(error_positions_are_those_of_the_input),
      cmocka_unit_test(nul_escapes),
      cmocka_unit_test(hooks_leave_other_jansson_users_alone),
      cmocka_unit_test(fallback_when_allocator_replaced),
      cmocka_unit_test(concurrent_users),
      cmocka_unit_test(large_hierarchy),
      cmocka_unit_test(from_parsed_values),
      cmocka_unit_test(arenas),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
