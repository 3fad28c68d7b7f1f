/* Unit tests of the Sigma engine (supervisor/anomaly): the loader's problems with their positions, every
 * modifier, null/missing/nested fields, unicode, the condition grammar, and correlations at the edges of
 * their windows, with many groups and their eviction. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "supervisor/anomaly/anomaly.h"

#define SECOND INT64_C(1000000000)

static const char *const HEADER =
    "title: test rule\nid: test-rule\nstatus: test\nlevel: high\ntags: [dome.test]\n"
    "logsource: {product: dome, service: audit}\n";

/* A set of one detection rule whose detection section is `detection` (YAML, indented by 4). */
static anomaly_rule_set *detection_set(const char *detection) {
  char text[8192];
  snprintf(text, sizeof text, "%sdetection:\n%s", HEADER, detection);
  anomaly_loader *loader = anomaly_loader_create();
  assert_non_null(loader);
  int added = anomaly_loader_add_text(loader, "test.yml", text, strlen(text));
  if (added != 1) print_error("%s\n", json_dumps(anomaly_loader_problems(loader), 0));
  assert_int_equal(added, 1);
  anomaly_rule_set *set = NULL;
  dome_error err = {0};
  assert_int_equal(anomaly_loader_finish(loader, &set, &err), 0);
  anomaly_loader_free(loader);
  return set;
}

/* The first problem of loading `text` (a whole file), or NULL when it loads. Caller frees. */
static char *problem_of(const char *text) {
  anomaly_loader *loader = anomaly_loader_create();
  anomaly_loader_add_text(loader, "bad.yml", text, strlen(text));
  anomaly_rule_set *set = NULL;
  dome_error err = {0};
  char *first = NULL;
  if (anomaly_loader_finish(loader, &set, &err) < 0)
    first = strdup(json_string_value(json_array_get(anomaly_loader_problems(loader), 0)));
  anomaly_rule_set_release(set);
  anomaly_loader_free(loader);
  return first;
}

static void count_alert(const json_t *alert, void *context) {
  (void)alert;
  (*(int *)context)++;
}

static bool matches(anomaly_rule_set *set, const char *event_text) {
  json_error_t error;
  json_t *event = json_loads(event_text, 0, &error);
  if (event == NULL) fail_msg("bad test event %s: %s", event_text, error.text);
  anomaly_engine *engine = NULL;
  dome_error err = {0};
  assert_int_equal(anomaly_engine_create(set, NULL, &engine, &err), 0);
  int alerts = 0;
  anomaly_engine_process(engine, event, 1, SECOND, count_alert, &alerts);
  anomaly_engine_free(engine);
  json_decref(event);
  return alerts == 1;
}

static void check(const char *detection, const char *const *hits, const char *const *misses) {
  anomaly_rule_set *set = detection_set(detection);
  for (size_t i = 0; hits && hits[i]; i++)
    if (!matches(set, hits[i])) fail_msg("expected a match of %s\nwith\n%s", hits[i], detection);
  for (size_t i = 0; misses && misses[i]; i++)
    if (matches(set, misses[i])) fail_msg("expected no match of %s\nwith\n%s", misses[i], detection);
  anomaly_rule_set_release(set);
}

#define LIST(...) ((const char *const[]){__VA_ARGS__, NULL})

static void test_plain_and_wildcards(void **state) {
  (void)state;
  check("    s:\n        tool: Code-Sandbox\n    condition: s\n", LIST("{\"tool\":\"code-sandbox\"}"),
        LIST("{\"tool\":\"code-sandbox2\"}", "{\"other\":\"code-sandbox\"}", "{}"));
  check("    s:\n        object: '127.0.0.?:*'\n    condition: s\n",
        LIST("{\"object\":\"127.0.0.1:80\"}", "{\"object\":\"127.0.0.9:\"}"),
        LIST("{\"object\":\"127.0.0.10:80\"}"));
  check("    s:\n        code: 'a\\*b'\n    condition: s\n", LIST("{\"code\":\"a*b\"}"),
        LIST("{\"code\":\"axxb\"}"));
}

static void test_contains_startswith_endswith_all(void **state) {
  (void)state;
  check("    s:\n        code|contains: ctypes\n    condition: s\n", LIST("{\"code\":\"import CTYPES, os\"}"),
        LIST("{\"code\":\"import os\"}"));
  check("    s:\n        code|startswith: import\n    condition: s\n", LIST("{\"code\":\"import os\"}"),
        LIST("{\"code\":\" import os\"}"));
  check("    s:\n        code|endswith: '.so'\n    condition: s\n", LIST("{\"code\":\"libc.so\"}"),
        LIST("{\"code\":\"libc.so.6\"}"));
  check("    s:\n        code|contains|all: [mount, ctypes]\n    condition: s\n",
        LIST("{\"code\":\"ctypes ... mount\"}"),
        LIST("{\"code\":\"ctypes only\"}", "{\"code\":\"mount only\"}"));
  check("    s:\n        code|contains: [mount, ctypes]\n    condition: s\n",
        LIST("{\"code\":\"mount only\"}"), LIST("{\"code\":\"neither\"}"));
  check("    s:\n        code|contains|cased: Secret\n    condition: s\n", LIST("{\"code\":\"a Secret\"}"),
        LIST("{\"code\":\"a secret\"}"));
}

/* Case-insensitive contains over more texts than the engine keeps folded copies of, event after event
 * on one engine: each event's answer is its own (a copy folded for an earlier event never answers). */
static void test_contains_folded_once_per_event(void **state) {
  (void)state;
  char detection[1024] = "";
  for (int f = 0; f < 12; f++) {
    size_t used = strlen(detection);
    snprintf(detection + used, sizeof detection - used, "    s%d:\n        f%d|contains: CTYPES\n", f, f);
  }
  strcat(detection, "    z:\n        z|contains: ctypes\n    condition: 1 of s* or z\n");
  anomaly_rule_set *set = detection_set(detection);
  anomaly_engine *engine = NULL;
  dome_error err = {0};
  assert_int_equal(anomaly_engine_create(set, NULL, &engine, &err), 0);
  for (int round = 0; round < 40; round++) {
    json_t *event = json_object();
    int hit_field = round % 3 == 0 ? -1 : round % 12; /* every third event has no hit */
    for (int f = 0; f < 12; f++) {
      char name[16], text[64];
      snprintf(name, sizeof name, "f%d", f);
      snprintf(text, sizeof text, f == hit_field ? "import CTypes # %02d" : "import OTypes # %02d", round);
      json_object_set_new(event, name, json_string(text));
    }
    /* z: a NUL before the needle (every fifth event) or inside it (the others): only the first hits */
    json_object_set_new(event, "z",
                        round % 5 == 0 ? json_stringn("a\0CTYPES", 8) : json_stringn("ctype\0s", 8));
    if (round % 5 == 0) hit_field = 99;
    int alerts = 0;
    anomaly_engine_process(engine, event, (uint64_t)round + 1, SECOND * (round + 1), count_alert, &alerts);
    if (alerts != (hit_field >= 0)) fail_msg("round %d (hit field %d): %d alerts", round, hit_field, alerts);
    json_decref(event);
  }
  for (int round = 0; round < 40; round++) { /* one text an event: its copy outlives the event */
    json_t *event = json_pack("{s:s}", "f0", round % 2 ? "import CTypes" : "import OTypes");
    int alerts = 0;
    anomaly_engine_process(engine, event, (uint64_t)round + 41, SECOND * (round + 41), count_alert, &alerts);
    if (alerts != round % 2) fail_msg("one-text round %d: %d alerts", round, alerts);
    json_decref(event);
  }
  anomaly_engine_free(engine);
  anomaly_rule_set_release(set);
}

static void test_regular_expressions(void **state) {
  (void)state;
  check("    s:\n        code|re: '\\b(unshare|setns)\\s*\\('\n    condition: s\n",
        LIST("{\"code\":\"libc.unshare (0)\"}"),
        LIST("{\"code\":\"Unshare(0)\"}", "{\"code\":\"myunshare(0)\"}"));
  check("    s:\n        code|re|i: '^SELECT'\n    condition: s\n", LIST("{\"code\":\"select 1\"}"),
        LIST("{\"code\":\" select\"}"));
  check("    s:\n        code|re|m: '^b$'\n    condition: s\n", LIST("{\"code\":\"a\\nb\\nc\"}"),
        LIST("{\"code\":\"abc\"}"));
  check("    s:\n        code|re|s: 'a.b'\n    condition: s\n", LIST("{\"code\":\"a\\nb\"}"),
        LIST("{\"code\":\"ab\"}"));
}

static void test_cidr(void **state) {
  (void)state;
  check("    s:\n        ip|cidr: [10.0.0.0/8, 'fd00::/8', 169.254.169.254/32]\n    condition: s\n",
        LIST("{\"ip\":\"10.1.2.3\"}", "{\"ip\":\"fd00:ec2::254\"}", "{\"ip\":\"169.254.169.254\"}"),
        LIST("{\"ip\":\"11.0.0.1\"}", "{\"ip\":\"fe80::1\"}", "{\"ip\":\"169.254.169.253\"}",
             "{\"ip\":\"nonsense\"}", "{\"ip\":42}"));
  check("    s:\n        ip|cidr: 192.168.0.0/23\n    condition: s\n", LIST("{\"ip\":\"192.168.1.255\"}"),
        LIST("{\"ip\":\"192.168.2.0\"}"));
}

static void test_base64(void **state) {
  (void)state;
  /* base64("secret") = c2VjcmV0 */
  check("    s:\n        data|base64|contains: secret\n    condition: s\n",
        LIST("{\"data\":\"xx c2VjcmV0 yy\"}"), LIST("{\"data\":\"C2VJCMV0\"}", "{\"data\":\"secret\"}"));
  /* "secret" at offsets 0, 1, 2 of an encoded text: base64("secret!"), base64("Asecret!"),
   * base64("ABsecret!") */
  const char *const offsets[] = {"{\"d\":\"c2VjcmV0IQ==\"}", "{\"d\":\"QXNlY3JldCE=\"}",
                                 "{\"d\":\"QUJzZWNyZXQh\"}", NULL};
  check("    s:\n        d|base64offset|contains: secret\n    condition: s\n", offsets,
        LIST("{\"d\":\"c2VjcmVU\"}", "{\"d\":\"plain secret\"}"));
  /* utf16le("cmd") = 63 00 6d 00 64 00 -> base64 YwBtAGQA */
  check("    s:\n        d|wide|base64|contains: cmd\n    condition: s\n", LIST("{\"d\":\"..YwBtAGQA..\"}"),
        LIST("{\"d\":\"Y21k\"}"));
}

static void test_windash(void **state) {
  (void)state;
  check("    s:\n        cmd|windash|contains: ' -exec '\n    condition: s\n",
        LIST("{\"cmd\":\"a -exec b\"}", "{\"cmd\":\"a /exec b\"}",
             "{\"cmd\":\"a \xe2\x80\x93"
             "exec b\"}",
             "{\"cmd\":\"a \xe2\x80\x94"
             "exec b\"}"),
        LIST("{\"cmd\":\"a exec b\"}", "{\"cmd\":\"a +exec b\"}"));
}

static void test_exists_fieldref_compare_neq(void **state) {
  (void)state;
  check("    s:\n        exit_code|exists: true\n    condition: s\n",
        LIST("{\"exit_code\":0}", "{\"exit_code\":null}"), LIST("{}"));
  check("    s:\n        exit_code|exists: false\n    condition: s\n", LIST("{}"), LIST("{\"exit_code\":1}"));
  check("    s:\n        agent|fieldref: actas\n    condition: s\n",
        LIST("{\"agent\":\"a\",\"actas\":\"A\"}"),
        LIST("{\"agent\":\"a\",\"actas\":\"b\"}", "{\"agent\":\"a\"}"));
  check("    s:\n        peak_pids|gte: 60\n    condition: s\n",
        LIST("{\"peak_pids\":60}", "{\"peak_pids\":61.5}", "{\"peak_pids\":\"64\"}"),
        LIST("{\"peak_pids\":59}", "{\"peak_pids\":\"many\"}", "{}", "{\"peak_pids\":null}"));
  check("    s:\n        n|gt: 1\n    t:\n        n|lt: 3\n    condition: s and t\n", LIST("{\"n\":2}"),
        LIST("{\"n\":1}", "{\"n\":3}"));
  check("    s:\n        n|lte: -1\n    condition: s\n", LIST("{\"n\":-1}"), LIST("{\"n\":0}"));
  check("    s:\n        decision|neq: [allow, skip]\n    condition: s\n",
        LIST("{\"decision\":\"deny\"}", "{}"), LIST("{\"decision\":\"allow\"}", "{\"decision\":\"SKIP\"}"));
  check("    s:\n        time|hour: 23\n    condition: s\n", LIST("{\"time\":\"2026-12-01T23:40:00Z\"}"),
        LIST("{\"time\":\"2026-12-01T22:40:00Z\"}", "{\"time\":\"no time\"}"));
}

static void test_null_missing_types(void **state) {
  (void)state;
  check("    s:\n        end_reason: null\n    condition: s\n", LIST("{}", "{\"end_reason\":null}"),
        LIST("{\"end_reason\":\"quota\"}", "{\"end_reason\":\"\"}"));
  check("    s:\n        end_reason: ''\n    condition: s\n", LIST("{\"end_reason\":\"\"}"),
        LIST("{}", "{\"end_reason\":null}"));
  check("    s:\n        oom_killed: true\n    condition: s\n",
        LIST("{\"oom_killed\":true}", "{\"oom_killed\":\"TRUE\"}"),
        LIST("{\"oom_killed\":false}", "{}", "{\"oom_killed\":1}"));
  check("    s:\n        dst_port: 53\n    condition: s\n",
        LIST("{\"dst_port\":53}", "{\"dst_port\":53.0}", "{\"dst_port\":\"53\"}"),
        LIST("{\"dst_port\":530}", "{\"dst_port\":\"053\"}"));
  check("    s:\n        tags: dome.x\n    condition: s\n", LIST("{\"tags\":[\"a\",\"DOME.X\"]}"),
        LIST("{\"tags\":[]}", "{\"tags\":{\"dome.x\":1}}"));
}

static void test_nested_fields(void **state) {
  (void)state;
  check(
      "    s:\n        request.context.dst_port: 53\n    condition: s\n",
      LIST("{\"request\":{\"context\":{\"dst_port\":53}}}", "{\"request.context.dst_port\":53}",
           "{\"request\":{\"context.dst_port\":53}}"),
      LIST("{\"request\":{\"context\":{}}}", "{\"request\":\"context\"}", "{\"request\":{\"dst_port\":53}}"));
  check("    s:\n        files.path|endswith: '.pem'\n    condition: s\n",
        LIST("{\"files\":[{\"path\":\"a.txt\"},{\"path\":\"k.pem\"}]}"),
        LIST("{\"files\":[{\"path\":\"a.txt\"}]}"));
}

static void test_unicode(void **state) {
  (void)state;
  check("    s:\n        name: 'caf?'\n    condition: s\n",
        LIST("{\"name\":\"caf\xc3\xa9\"}", "{\"name\":\"CAFe\"}"), LIST("{\"name\":\"caf\xc3\xa9s\"}"));
  check("    s:\n        name|contains: '\xe6\x97\xa5\xe6\x9c\xac'\n    condition: s\n",
        LIST("{\"name\":\"x\xe6\x97\xa5\xe6\x9c\xacy\"}"), LIST("{\"name\":\"\xe6\x97\xa5\"}"));
  check("    s:\n        name: '\xc3\x89t\xc3\xa9'\n    condition: s\n",
        LIST("{\"name\":\"\xc3\x89T\xc3\xa9\"}"),
        LIST("{\"name\":\"\xc3\xa9t\xc3\xa9\"}")); /* non-ASCII letters compare exactly */
}

static void test_keywords(void **state) {
  (void)state;
  check("    keywords:\n        - sysrq-trigger\n        - release_agent\n    condition: keywords\n",
        LIST("{\"a\":{\"b\":[\"x /proc/sysrq-trigger\"]}}", "{\"code\":\"RELEASE_AGENT\"}"),
        LIST("{\"code\":\"nothing\"}", "{\"sysrq-trigger\":1}"));
}

static void test_condition_grammar(void **state) {
  (void)state;
  const char *searches =
      "    selection_a:\n        a: 1\n    selection_b:\n        b: 1\n    filter:\n        c: 1\n"
      "    _private:\n        d: 1\n";
  char detection[1024];
  snprintf(detection, sizeof detection, "%s    condition: 1 of selection_* and not filter\n", searches);
  check(detection, LIST("{\"a\":1}", "{\"b\":1}", "{\"a\":1,\"b\":1}"), LIST("{\"a\":1,\"c\":1}", "{}"));
  snprintf(detection, sizeof detection, "%s    condition: all of selection_*\n", searches);
  check(detection, LIST("{\"a\":1,\"b\":1}"), LIST("{\"a\":1}"));
  snprintf(detection, sizeof detection, "%s    condition: all of them\n", searches);
  check(detection, LIST("{\"a\":1,\"b\":1,\"c\":1}"), LIST("{\"a\":1,\"b\":1}"));
  snprintf(detection, sizeof detection, "%s    condition: 1 of them\n", searches);
  check(detection, LIST("{\"c\":1}"), LIST("{\"d\":1}")); /* `them` leaves out `_` searches */
  /* precedence: not > and > or; parentheses override */
  snprintf(detection, sizeof detection, "%s    condition: selection_a or selection_b and filter\n", searches);
  check(detection, LIST("{\"a\":1}", "{\"b\":1,\"c\":1}"), LIST("{\"b\":1}"));
  snprintf(detection, sizeof detection, "%s    condition: (selection_a or selection_b) and filter\n",
           searches);
  check(detection, LIST("{\"b\":1,\"c\":1}"), LIST("{\"a\":1}"));
  snprintf(detection, sizeof detection, "%s    condition: not (selection_a or selection_b)\n", searches);
  check(detection, LIST("{}", "{\"c\":1}"), LIST("{\"a\":1}"));
  snprintf(detection, sizeof detection, "%s    condition: not not selection_a\n", searches);
  check(detection, LIST("{\"a\":1}"), LIST("{}"));
  snprintf(detection, sizeof detection, "%s    condition: [selection_a, filter]\n", searches);
  check(detection, LIST("{\"a\":1}", "{\"c\":1}"), LIST("{\"b\":1}"));
  /* a list of maps is OR, a map is AND */
  check("    s:\n        - a: 1\n          b: 1\n        - c: 1\n    condition: s\n",
        LIST("{\"a\":1,\"b\":1}", "{\"c\":1}"), LIST("{\"a\":1}"));
}

static void assert_problem(const char *text, const char *expected) {
  char *problem = problem_of(text);
  if (problem == NULL) fail_msg("expected a problem `%s` loading:\n%s", expected, text);
  if (strstr(problem, expected) == NULL) fail_msg("problem `%s` lacks `%s`", problem, expected);
  free(problem);
}

static void test_invalid_rules_positions(void **state) {
  (void)state;
  const char *rule =
      "title: t\nid: r-1\nlogsource: {product: dome}\ndetection:\n    sel:\n        a|contans: 1\n"
      "    condition: sel\n";
  assert_problem(rule, "bad.yml:6:11: rule r-1: unknown modifier `contans`");
  assert_problem(
      "title: t\nid: r-2\nlogsource: {product: dome}\ndetection:\n    sel:\n        a: 1\n"
      "    condition: sel and (foo\n",
      "bad.yml:7:25: rule r-2: condition: `foo` is not a search identifier");
  assert_problem(
      "title: t\nid: r-3\nlogsource: {product: dome}\ndetection:\n    sel:\n        a: 1\n"
      "    condition: sel and (sel\n",
      "bad.yml:7:28: rule r-3: condition: expected `)`");
  assert_problem(
      "title: t\nid: r-4\nlogsource: {product: dome}\ndetection:\n    sel:\n        a: 1\n"
      "    condition: 1 of nothing_*\n",
      "bad.yml:7:21: rule r-4: condition: `nothing_*` names no search");
  assert_problem("title: [\n", "bad.yml:2:1: rule -: YAML:");
  assert_problem("id: r-5\nlogsource: {product: dome}\ndetection: {s: {a: 1}, condition: s}\n",
                 "rule r-5: `title` is required");
  assert_problem("title: t\nid: r-6\nlogsource: {product: dome}\ndetection:\n    s: {a: 1}\n",
                 "has no `condition`");
  assert_problem(
      "title: t\nid: r-7\nlevel: severe\nlogsource: {product: dome}\ndetection: {s: {a: 1}, condition: s}\n",
      "bad.yml:3:8: rule r-7: `level` must be");
  assert_problem(
      "title: t\nid: r-8\nlogsource: {product: dome}\ndetection:\n    s:\n        a|all: x\n"
      "    condition: s\n",
      "`all` needs a list");
  assert_problem(
      "title: t\nid: r-9\nlogsource: {product: dome}\ndetection:\n    s:\n        a|re: '(unclosed'\n"
      "    condition: s\n",
      "bad.yml:6:15: rule r-9: regular expression");
  assert_problem(
      "title: t\nid: r-10\nlogsource: {product: dome}\ndetection:\n    s:\n        a|cidr: 10.0.0.0/33\n"
      "    condition: s\n",
      "is not a CIDR network");
  assert_problem(
      "title: t\nid: r-11\nlogsource: {product: dome}\ndetection:\n    s:\n        a|gt: many\n"
      "    condition: s\n",
      "a number is expected");
  assert_problem(
      "title: t\nid: r-12\nlogsource: {product: dome}\ndetection:\n    s:\n        a|exists: maybe\n"
      "    condition: s\n",
      "`exists` takes true or false");
  assert_problem(
      "title: t\nid: r-13\nlogsource: {product: dome}\ndetection:\n    s: {a: 1}\n"
      "    condition: s | count() > 5\n",
      "aggregation expressions");
  assert_problem(
      "title: c\nid: c-1\ncorrelation:\n    type: event_count\n    rules: [nowhere]\n    timespan: 5m\n"
      "    condition: {gte: 2}\n",
      "rule c-1: correlation refers to `nowhere`");
  assert_problem(
      "title: c\nid: c-2\ncorrelation:\n    type: event_count\n    rules: [x]\n    timespan: 5 minutes\n"
      "    condition: {gte: 2}\n",
      "bad.yml:6:15: rule c-2: `timespan` must be");
  assert_problem(
      "title: c\nid: c-3\ncorrelation:\n    type: value_count\n    rules: [x]\n    timespan: 5m\n"
      "    condition: {gte: 2}\n",
      "needs `field`");
  assert_problem(
      "title: c\nid: c-4\ncorrelation:\n    type: value_percentile\n    rules: [x]\n    timespan: 5m\n",
      "bad.yml:4:11: rule c-4: correlation type `value_percentile` is not supported");
  assert_problem(
      "title: a\nid: a\nname: a\ncorrelation: {type: event_count, rules: [b], timespan: 1m, condition: {gte: "
      "1}}\n"
      "---\ntitle: b\nid: b\ncorrelation: {type: event_count, rules: [a], timespan: 1m, condition: {gte: "
      "1}}\n",
      "cycle");
  assert_problem(
      "title: t\nid: d\nlogsource: {product: dome}\ndetection: {s: {a: 1}, condition: s}\n---\n"
      "title: t\nid: d\nlogsource: {product: dome}\ndetection: {s: {a: 1}, condition: s}\n",
      "duplicate id `d`");
  /* windash combines with the string modifiers; a modifier after `re` that is not i/m/s does not */
  assert_problem(
      "title: t\nid: r-14\nlogsource: {product: dome}\ndetection:\n    s:\n        a|re|contains: x\n"
      "    condition: s\n",
      "cannot be combined");
}

static void test_other_log_sources_never_match(void **state) {
  (void)state;
  const char *text =
      "title: w\nid: w-1\nlogsource: {product: windows, category: process_creation}\n"
      "detection: {s: {type: exec.start}, condition: s}\n";
  anomaly_loader *loader = anomaly_loader_create();
  assert_int_equal(anomaly_loader_add_text(loader, "w.yml", text, strlen(text)), 1);
  anomaly_rule_set *set = NULL;
  dome_error err = {0};
  assert_int_equal(anomaly_loader_finish(loader, &set, &err), 0);
  assert_int_equal(anomaly_rule_set_count(set), 1);
  assert_int_equal(anomaly_rule_set_active_count(set), 0);
  assert_false(matches(set, "{\"type\":\"exec.start\"}"));
  anomaly_rule_set_release(set);
  anomaly_loader_free(loader);
}

/* ---- correlations ---- */

struct collected {
  int alerts;
  json_t *last;
};

static void collect(const json_t *alert, void *context) {
  struct collected *c = context;
  c->alerts++;
  json_decref(c->last);
  c->last = json_deep_copy(alert);
}

static anomaly_rule_set *correlation_set(const char *correlation) {
  char text[8192];
  snprintf(text, sizeof text,
           "title: base\nid: base-1\nname: base\nlevel: low\nlogsource: {product: dome, service: audit}\n"
           "detection:\n    s:\n        type: hit\n    condition: s\n---\n"
           "title: second\nid: base-2\nname: second\nlogsource: {product: dome, service: audit}\n"
           "detection:\n    s:\n        type: second\n    condition: s\n---\n"
           "title: correlated\nid: corr-1\nlevel: high\ntags: [dome.test]\ncorrelation:\n%s",
           correlation);
  anomaly_loader *loader = anomaly_loader_create();
  anomaly_loader_add_text(loader, "c.yml", text, strlen(text));
  anomaly_rule_set *set = NULL;
  dome_error err = {0};
  if (anomaly_loader_finish(loader, &set, &err) < 0) fail_msg("%s", err.message);
  anomaly_loader_free(loader);
  return set;
}

static void feed(anomaly_engine *engine, const char *type, const char *agent, uint64_t seq, int64_t time,
                 struct collected *c, const char *extra_member, const char *extra_value) {
  json_t *event = json_pack("{s:s,s:s}", "type", type, "agent", agent);
  if (extra_member) json_object_set_new(event, extra_member, json_string(extra_value));
  anomaly_engine_process(engine, event, seq, time, collect, c);
  json_decref(event);
}

static void test_event_count_window_edges(void **state) {
  (void)state;
  anomaly_rule_set *set = correlation_set(
      "    type: event_count\n    rules: [base]\n    group-by: [agent]\n    timespan: 10s\n    condition: "
      "{gte: 3}\n");
  anomaly_engine *engine = NULL;
  dome_error err = {0};
  assert_int_equal(anomaly_engine_create(set, NULL, &engine, &err), 0);
  struct collected c = {0};
  int64_t t0 = 1000 * SECOND;
  feed(engine, "hit", "a", 1, t0, &c, NULL, NULL);
  feed(engine, "hit", "a", 2, t0 + 5 * SECOND, &c, NULL, NULL);
  /* exactly timespan after the first: the first still counts (both edges inside) */
  feed(engine, "hit", "a", 3, t0 + 10 * SECOND, &c, NULL, NULL);
  assert_int_equal(c.alerts, 1);
  assert_string_equal(json_string_value(json_object_get(c.last, "rule_id")), "corr-1");
  assert_string_equal(json_string_value(json_object_get(c.last, "agent")), "a");
  assert_string_equal(json_string_value(json_object_get(c.last, "level")), "high");
  assert_int_equal(json_array_size(json_object_get(c.last, "seqs")), 3);
  assert_int_equal(json_integer_value(json_array_get(json_object_get(c.last, "seqs"), 0)), 1);
  json_t *correlation = json_object_get(c.last, "correlation");
  assert_string_equal(json_string_value(json_object_get(correlation, "type")), "event_count");
  assert_true(json_number_value(json_object_get(correlation, "value")) == 3);
  /* the group started over: one nanosecond past the window, the old hits no longer count */
  feed(engine, "hit", "a", 4, t0 + 20 * SECOND, &c, NULL, NULL);
  feed(engine, "hit", "a", 5, t0 + 25 * SECOND, &c, NULL, NULL);
  feed(engine, "hit", "a", 6, t0 + 30 * SECOND + 1, &c, NULL, NULL);
  assert_int_equal(c.alerts, 1);
  /* another agent's hits are another group; a base rule referenced by a correlation raises nothing */
  feed(engine, "hit", "b", 7, t0 + 30 * SECOND + 2, &c, NULL, NULL);
  feed(engine, "hit", "a", 8, t0 + 30 * SECOND + 3, &c, NULL, NULL);
  assert_int_equal(c.alerts, 2);
  assert_string_equal(json_string_value(json_object_get(c.last, "agent")), "a");
  /* out of order: an older time counts at the group's latest time */
  feed(engine, "hit", "c", 9, t0 + 100 * SECOND, &c, NULL, NULL);
  feed(engine, "hit", "c", 10, t0, &c, NULL, NULL);
  feed(engine, "hit", "c", 11, t0 + 1, &c, NULL, NULL);
  assert_int_equal(c.alerts, 3);
  json_decref(c.last);
  anomaly_engine_free(engine);
  anomaly_rule_set_release(set);
}

static void test_value_count_distinct(void **state) {
  (void)state;
  anomaly_rule_set *set = correlation_set(
      "    type: value_count\n    rules: [base]\n    group-by: [agent]\n    timespan: 1m\n"
      "    condition: {field: object, gte: 3}\n");
  anomaly_engine *engine = NULL;
  dome_error err = {0};
  assert_int_equal(anomaly_engine_create(set, NULL, &engine, &err), 0);
  struct collected c = {0};
  int64_t t = 5000 * SECOND;
  for (int i = 0; i < 10; i++) feed(engine, "hit", "a", (uint64_t)i + 1, t + i, &c, "object", "same:53");
  feed(engine, "hit", "a", 11, t + 11, &c, NULL, NULL); /* no `object`: not counted */
  feed(engine, "hit", "a", 12, t + 12, &c, "object", "other:80");
  assert_int_equal(c.alerts, 0);
  feed(engine, "hit", "a", 13, t + 13, &c, "object", "third:443");
  assert_int_equal(c.alerts, 1);
  assert_true(json_number_value(json_object_get(json_object_get(c.last, "correlation"), "value")) == 3);
  json_decref(c.last);
  anomaly_engine_free(engine);
  anomaly_rule_set_release(set);
}

static void test_temporal_and_ordered(void **state) {
  (void)state;
  anomaly_rule_set *set = correlation_set(
      "    type: temporal_ordered\n    rules: [base, second]\n    group-by: [agent]\n    timespan: 1m\n");
  anomaly_engine *engine = NULL;
  dome_error err = {0};
  assert_int_equal(anomaly_engine_create(set, NULL, &engine, &err), 0);
  struct collected c = {0};
  int64_t t = 9000 * SECOND;
  feed(engine, "second", "a", 1, t, &c, NULL, NULL);
  feed(engine, "hit", "a", 2, t + SECOND, &c, NULL, NULL);
  assert_int_equal(c.alerts, 0); /* wrong order so far */
  feed(engine, "second", "a", 3, t + 2 * SECOND, &c, NULL, NULL);
  assert_int_equal(c.alerts, 1);
  feed(engine, "hit", "b", 4, t, &c, NULL, NULL);
  feed(engine, "second", "b", 5, t + 61 * SECOND, &c, NULL, NULL); /* too late */
  assert_int_equal(c.alerts, 1);
  anomaly_engine_free(engine);
  anomaly_rule_set_release(set);

  set = correlation_set(
      "    type: temporal\n    rules: [base, second]\n    group-by: [agent]\n    timespan: 1m\n");
  assert_int_equal(anomaly_engine_create(set, NULL, &engine, &err), 0);
  feed(engine, "hit", "a", 1, t, &c, NULL, NULL);
  feed(engine, "hit", "a", 2, t + 1, &c, NULL, NULL);
  assert_int_equal(c.alerts, 1);
  feed(engine, "second", "a", 3, t + 2, &c, NULL, NULL);
  assert_int_equal(c.alerts, 2); /* any order */
  json_decref(c.last);
  anomaly_engine_free(engine);
  anomaly_rule_set_release(set);
}

static void test_many_groups_bounded_and_evicted(void **state) {
  (void)state;
  anomaly_rule_set *set = correlation_set(
      "    type: event_count\n    rules: [base]\n    group-by: [agent]\n    timespan: 10s\n    condition: "
      "{gte: 2}\n");
  anomaly_engine_options options = {.max_groups_per_rule = 10000};
  anomaly_engine *engine = NULL;
  dome_error err = {0};
  assert_int_equal(anomaly_engine_create(set, &options, &engine, &err), 0);
  struct collected c = {0};
  int64_t t = 100 * SECOND;
  char agent[32];
  for (int i = 0; i < 12000; i++) {
    snprintf(agent, sizeof agent, "agent-%d", i);
    feed(engine, "hit", agent, (uint64_t)i, t, &c, NULL, NULL);
  }
  anomaly_engine_stats stats;
  anomaly_engine_stats_get(engine, &stats);
  assert_int_equal(stats.groups, 10000);
  assert_int_equal(stats.groups_refused, 2000);
  assert_int_equal(c.alerts, 0);
  assert_true(stats.state_bytes > 0 && stats.state_bytes < 10000 * 512);
  /* past the timespan every old group is evicted to make room */
  feed(engine, "hit", "late", 1, t + 11 * SECOND, &c, NULL, NULL);
  anomaly_engine_stats_get(engine, &stats);
  assert_int_equal(stats.groups, 1);
  assert_int_equal(stats.groups_evicted, 10000);
  feed(engine, "hit", "late", 2, t + 12 * SECOND, &c, NULL, NULL);
  assert_int_equal(c.alerts, 1);
  json_decref(c.last);
  anomaly_engine_free(engine);
  anomaly_rule_set_release(set);
}

static void test_generate_and_alert_members(void **state) {
  (void)state;
  anomaly_rule_set *set = correlation_set(
      "    type: event_count\n    rules: [base]\n    group-by: [agent]\n"
      "    timespan: 10s\n    condition: {gte: 5}\n    generate: true\n");
  anomaly_engine *engine = NULL;
  dome_error err = {0};
  assert_int_equal(anomaly_engine_create(set, NULL, &engine, &err), 0);
  struct collected c = {0};
  json_t *event = json_pack("{s:s,s:s,s:s}", "type", "hit", "agent", "a", "exec_id", "00ff");
  anomaly_engine_process(engine, event, 42, SECOND, collect, &c);
  json_decref(event);
  assert_int_equal(c.alerts, 1); /* generate: the base rule alerts on its own */
  assert_string_equal(json_string_value(json_object_get(c.last, "rule_id")), "base-1");
  assert_string_equal(json_string_value(json_object_get(c.last, "type")), "anomaly.alert");
  assert_string_equal(json_string_value(json_array_get(json_object_get(c.last, "exec_ids"), 0)), "00ff");
  assert_int_equal(json_integer_value(json_array_get(json_object_get(c.last, "seqs"), 0)), 42);
  /* alerts are not evaluated again */
  event = json_pack("{s:s,s:s}", "type", "anomaly.alert", "agent", "a");
  assert_int_equal(anomaly_engine_process(engine, event, 43, SECOND, collect, &c), 0);
  json_decref(event);
  json_t *described = anomaly_rule_set_describe(set);
  assert_int_equal(json_array_size(described), 3);
  json_decref(described);
  assert_int_equal(strlen(anomaly_rule_set_digest(set)), 64);
  json_decref(c.last);
  anomaly_engine_free(engine);
  anomaly_rule_set_release(set);
}

static void test_levels(void **state) {
  (void)state;
  anomaly_level level;
  dome_error err = {0};
  assert_int_equal(anomaly_level_parse("critical", &level, &err), 0);
  assert_int_equal(level, ANOMALY_LEVEL_CRITICAL);
  assert_int_equal(anomaly_level_parse("none", &level, &err), 0);
  assert_int_equal(level, ANOMALY_LEVEL_NONE);
  assert_true(anomaly_level_parse("severe", &level, &err) < 0);
  assert_string_equal(anomaly_level_name(ANOMALY_LEVEL_HIGH), "high");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_plain_and_wildcards),
      cmocka_unit_test(test_contains_startswith_endswith_all),
      cmocka_unit_test(test_contains_folded_once_per_event),
      cmocka_unit_test(test_regular_expressions),
      cmocka_unit_test(test_cidr),
      cmocka_unit_test(test_base64),
      cmocka_unit_test(test_windash),
      cmocka_unit_test(test_exists_fieldref_compare_neq),
      cmocka_unit_test(test_null_missing_types),
      cmocka_unit_test(test_nested_fields),
      cmocka_unit_test(test_unicode),
      cmocka_unit_test(test_keywords),
      cmocka_unit_test(test_condition_grammar),
      cmocka_unit_test(test_invalid_rules_positions),
      cmocka_unit_test(test_other_log_sources_never_match),
      cmocka_unit_test(test_event_count_window_edges),
      cmocka_unit_test(test_value_count_distinct),
      cmocka_unit_test(test_temporal_and_ordered),
      cmocka_unit_test(test_many_groups_bounded_and_evicted),
      cmocka_unit_test(test_generate_and_alert_members),
      cmocka_unit_test(test_levels),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
