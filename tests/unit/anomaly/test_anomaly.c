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

/* Each rule names the file it was read from; an unknown id names none. */
static void test_rule_file(void **state) {
  (void)state;
  anomaly_loader *loader = anomaly_loader_create();
  const char *first =
      "title: a\nid: rule-a\nlevel: low\nlogsource: {product: dome}\n"
      "detection: {s: {type: x}, condition: s}\n";
  const char *second =
      "title: b\nid: rule-b\nlevel: low\nlogsource: {product: dome}\n"
      "detection: {s: {type: y}, condition: s}\n";
  assert_int_equal(anomaly_loader_add_text(loader, "/rules/a.yml", first, strlen(first)), 1);
  assert_int_equal(anomaly_loader_add_text(loader, "/rules/b.yml", second, strlen(second)), 1);
  anomaly_rule_set *set = NULL;
  dome_error err = {0};
  assert_int_equal(anomaly_loader_finish(loader, &set, &err), 0);
  anomaly_loader_free(loader);
  assert_string_equal(anomaly_rule_set_rule_file(set, "rule-b"), "/rules/b.yml");
  assert_string_equal(anomaly_rule_set_rule_file(set, "rule-a"), "/rules/a.yml");
  assert_null(anomaly_rule_set_rule_file(set, "rule-c"));
  assert_null(anomaly_rule_set_rule_file(set, NULL));
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

/* ---- the set's index: candidates by type, contains automata ---- */

/* Rules whose conditions require a type only in some of their branches are still candidates for the
 * other branches' events; a type the matcher could read other than as an exact string (an array, a
 * number) makes every rule a candidate. */
static void test_type_index_never_skips_a_rule_that_matches(void **state) {
  (void)state;
  /* no type constraint at all */
  check(
      "    s:\n        tool: x\n    condition: s\n",
      LIST("{\"type\":\"exec.start\",\"tool\":\"x\"}", "{\"tool\":\"x\"}", "{\"type\":null,\"tool\":\"x\"}"),
      LIST("{\"type\":\"exec.start\"}"));
  /* type|contains is no exact type */
  check("    s:\n        type|contains: exec\n    condition: s\n",
        LIST("{\"type\":\"exec.start\"}", "{\"type\":\"EXEC\"}"), LIST("{\"type\":\"authz.decision\"}"));
  /* case folded as the matcher folds, whole length */
  check("    s:\n        type: Exec.Start\n    condition: s\n",
        LIST("{\"type\":\"EXEC.start\"}", "{\"type\":[\"x\",\"exec.start\"]}"),
        LIST("{\"type\":\"exec.startx\"}", "{\"type\":\"exec.star\"}", "{}", "{\"type\":null}"));
  /* 1 of selection_* with mixed types, one of them untyped */
  check(
      "    selection_a:\n        type: exec.start\n        code|contains: ctypes\n"
      "    selection_b:\n        type: exec.end\n        exit_code: 9\n"
      "    selection_c:\n        tool: probe\n    condition: 1 of selection_*\n",
      LIST("{\"type\":\"exec.start\",\"code\":\"import ctypes\"}", "{\"type\":\"exec.end\",\"exit_code\":9}",
           "{\"type\":\"authz.decision\",\"tool\":\"probe\"}", "{\"tool\":\"probe\"}"),
      LIST("{\"type\":\"exec.end\",\"code\":\"import ctypes\"}",
           "{\"type\":\"exec.start\",\"exit_code\":9}"));
  check(
      "    selection_a:\n        type: exec.start\n    selection_b:\n        type: exec.end\n"
      "    condition: 1 of selection_*\n",
      LIST("{\"type\":\"exec.start\"}", "{\"type\":\"exec.end\"}"), LIST("{\"type\":\"exec.output\"}"));
  /* not around a type selection */
  check("    s:\n        type: exec.start\n    condition: not s\n",
        LIST("{\"type\":\"exec.end\"}", "{}", "{\"type\":7}"), LIST("{\"type\":\"exec.start\"}"));
  check("    s:\n        type: exec.start\n    t:\n        code: x\n    condition: s and not t\n",
        LIST("{\"type\":\"exec.start\",\"code\":\"y\"}"), LIST("{\"type\":\"exec.end\",\"code\":\"y\"}"));
  /* an `or` whose other branch is an `and` with another type */
  check(
      "    a:\n        type: exec.start\n    b:\n        type: exec.end\n    c:\n        exit_code: 1\n"
      "    condition: a or (b and c)\n",
      LIST("{\"type\":\"exec.start\"}", "{\"type\":\"exec.end\",\"exit_code\":1}"),
      LIST("{\"type\":\"exec.end\",\"exit_code\":0}", "{\"type\":\"exec.output\",\"exit_code\":1}"));
  check("    a:\n        type: exec.start\n    b:\n        tool: x\n    condition: all of them or b\n",
        LIST("{\"type\":\"exec.output\",\"tool\":\"x\"}"), LIST("{\"type\":\"exec.output\"}"));
  /* a list of alternatives: one without a type test */
  check("    s:\n        - type: exec.start\n        - tool: x\n    condition: s\n",
        LIST("{\"type\":\"exec.start\"}", "{\"type\":\"exec.end\",\"tool\":\"x\"}"),
        LIST("{\"type\":\"exec.end\"}"));
  /* a condition list is their `or` */
  check(
      "    a:\n        type: exec.start\n    b:\n        tool: x\n    condition:\n        - a\n        - b\n",
      LIST("{\"type\":\"exec.start\"}", "{\"type\":\"exec.end\",\"tool\":\"x\"}"),
      LIST("{\"type\":\"exec.end\"}"));
  /* a number type is matched as its text */
  check("    s:\n        type: '5'\n    condition: s\n", LIST("{\"type\":5}", "{\"type\":\"5\"}"),
        LIST("{\"type\":6}"));
  /* types no event can have at once: never */
  check("    a:\n        type: exec.start\n    b:\n        type: exec.end\n    condition: a and b\n", NULL,
        LIST("{\"type\":\"exec.start\"}", "{\"type\":\"exec.end\"}"));
}

static void collect_rule_ids(const json_t *alert, void *context) {
  json_array_append_new((json_t *)context, json_string(json_string_value(json_object_get(alert, "rule_id"))));
}

/* Candidates of a type and rules of no type are evaluated in load order together. */
static void test_type_index_keeps_load_order(void **state) {
  (void)state;
  const char *const detections[] = {
      "    s:\n        tool: x\n    condition: s\n",
      "    s:\n        type: exec.start\n    condition: s\n",
      "    s:\n        type: exec.end\n    condition: s\n",
      "    s:\n        type: [exec.start, exec.end]\n    condition: s\n",
      "    s:\n        tool|startswith: x\n    condition: s\n",
  };
  char text[8192] = "";
  for (size_t i = 0; i < 5; i++) {
    size_t used = strlen(text);
    snprintf(text + used, sizeof text - used,
             "%stitle: rule %zu\nid: rule-%zu\nlogsource: {product: dome, service: audit}\ndetection:\n%s",
             i ? "---\n" : "", i, i, detections[i]);
  }
  anomaly_loader *loader = anomaly_loader_create();
  assert_int_equal(anomaly_loader_add_text(loader, "order.yml", text, strlen(text)), 5);
  anomaly_rule_set *set = NULL;
  dome_error err = {0};
  assert_int_equal(anomaly_loader_finish(loader, &set, &err), 0);
  anomaly_loader_free(loader);
  anomaly_engine *engine = NULL;
  assert_int_equal(anomaly_engine_create(set, NULL, &engine, &err), 0);
  json_t *ids = json_array();
  json_t *event = json_pack("{s:s,s:s}", "type", "exec.start", "tool", "x");
  anomaly_engine_process(engine, event, 1, SECOND, collect_rule_ids, ids);
  json_decref(event);
  char *order = json_dumps(ids, JSON_COMPACT);
  assert_string_equal(order, "[\"rule-0\",\"rule-1\",\"rule-3\",\"rule-4\"]");
  free(order);
  json_array_clear(ids);
  event = json_pack("{s:s,s:s}", "type", "EXEC.END", "tool", "x");
  anomaly_engine_process(engine, event, 2, 2 * SECOND, collect_rule_ids, ids);
  json_decref(event);
  order = json_dumps(ids, JSON_COMPACT);
  assert_string_equal(order, "[\"rule-0\",\"rule-2\",\"rule-3\",\"rule-4\"]");
  free(order);
  json_decref(ids);
  anomaly_engine_free(engine);
  anomaly_rule_set_release(set);
}

/* Many case-insensitive contains values of one field are found by one automaton: overlapping
 * literals, a literal inside another, the same literal in two rules' values, every element of an array,
 * and numbers (formatted, not event strings) on two fields of one event each answer for themselves. */
static void test_contains_automaton(void **state) {
  (void)state;
  const char *overlapping = "    s:\n        code|contains: [he, She, hers, his, 'x y']\n    condition: s\n";
  check(overlapping,
        LIST("{\"code\":\"USHERS\"}", "{\"code\":\"a she\"}", "{\"code\":\"this\"}", "{\"code\":\"hx he\"}",
             "{\"code\":\"x y\"}", "{\"code\":[\"no\",\"HE\"]}"),
        LIST("{\"code\":\"h e s i\"}", "{\"code\":\"xy\"}", "{\"code\":[\"no\",\"hx\"]}", "{\"code\":\"\"}"));
  check(
      "    a:\n        code|contains: [sysrq, mount]\n    b:\n        code|contains: [ctypes, mount]\n"
      "    condition: a and b\n",
      LIST("{\"code\":\"MOUNT\"}", "{\"code\":\"sysrq ctypes\"}"),
      LIST("{\"code\":\"sysrq\"}", "{\"code\":\"ctypes\"}"));
  check("    s:\n        code|contains|all: [ctypes, mount, pivot]\n    condition: s\n",
        LIST("{\"code\":\"pivot mount ctypes\"}"), LIST("{\"code\":\"pivot mount\"}"));
  /* numbers are formatted in one buffer: a copy kept for one never answers for the other */
  check(
      "    a:\n        duration_ms|contains: ['7', '8']\n    b:\n        exit_code|contains: ['7', '9']\n"
      "    condition: a and b\n",
      LIST("{\"duration_ms\":17,\"exit_code\":27}"), LIST("{\"duration_ms\":17,\"exit_code\":23}"));
  check(
      "    a:\n        duration_ms|contains: '7'\n    b:\n        exit_code|contains: '7'\n"
      "    condition: a and b\n",
      LIST("{\"duration_ms\":17,\"exit_code\":27}"), LIST("{\"duration_ms\":17,\"exit_code\":23}"));
  /* every text of a dotted field through a list */
  check("    s:\n        files.path|contains: [secret, '.pem']\n    condition: s\n",
        LIST("{\"files\":[{\"path\":\"a.txt\"},{\"path\":\"K.PEM\"}]}"),
        LIST("{\"files\":[{\"path\":\"a.txt\"},{\"path\":\"pem\"}]}"));
}

/* A regular expression beside contains values of its field: the automaton that finds those also
 * finds the literals the expression's every match needs; a string without them is not matched. */
static void check_regex(const char *pattern, const char *const *hits, const char *const *misses) {
  char detection[1024];
  snprintf(
      detection, sizeof detection,
      "    r:\n        code|re: '%s'\n    c:\n        code|contains: [qqqzz, zzqqq]\n    condition: r or c\n",
      pattern);
  check(detection, hits, misses);
}

static void test_regex_required_literals(void **state) {
  (void)state;
  check_regex("(^|[\\s;&|`(])(nsenter|insmod|modprobe)\\s",
              LIST("{\"code\":\"x; insmod a\"}", "{\"code\":\"nsenter -t 1\"}"),
              LIST("{\"code\":\"INSMOD a\"}", "{\"code\":\"nsente r\"}"));
  check_regex("(foo|bar)?bazz", LIST("{\"code\":\"bazz\"}", "{\"code\":\"barbazz\"}"),
              LIST("{\"code\":\"baz\"}"));
  check_regex("(alpha|beta){0,2}gamma", LIST("{\"code\":\"gamma\"}"), LIST("{\"code\":\"alpha\"}"));
  check_regex("(alpha|beta)+x", LIST("{\"code\":\"betax\"}"), LIST("{\"code\":\"x\"}"));
  check_regex("qux+y", LIST("{\"code\":\"quxxy\"}"), LIST("{\"code\":\"quy\"}"));
  check_regex("abcd?e", LIST("{\"code\":\"abce\"}", "{\"code\":\"abcde\"}"), LIST("{\"code\":\"abe\"}"));
  check_regex("ab{2}cde", LIST("{\"code\":\"abbcde\"}"), LIST("{\"code\":\"abcde\"}"));
  check_regex("x{0,3}yzw", LIST("{\"code\":\"yzw\"}"), LIST("{\"code\":\"xxx\"}"));
  check_regex("foo|barbaz", LIST("{\"code\":\"foo\"}", "{\"code\":\"barbaz\"}"), LIST("{\"code\":\"bar\"}"));
  check_regex("\\x41BCDE", LIST("{\"code\":\"ABCDE\"}"), LIST("{\"code\":\"41BCDE\"}"));
  check_regex("\\101BCDE", LIST("{\"code\":\"ABCDE\"}"), LIST("{\"code\":\"101BCDE\"}"));
  check_regex("\\QA.B\\Ecdef", LIST("{\"code\":\"A.Bcdef\"}"), LIST("{\"code\":\"AxBcdef\"}"));
  check_regex("[]a]xyz", LIST("{\"code\":\"]xyz\"}", "{\"code\":\"axyz\"}"), LIST("{\"code\":\"bxyz\"}"));
  check_regex("[[:digit:]]abc", LIST("{\"code\":\"5abc\"}"), LIST("{\"code\":\"xabc\"}"));
  check_regex("(?i)KILLALL", LIST("{\"code\":\"killall -9\"}"), LIST("{\"code\":\"kill all\"}"));
  check_regex("(?:spawn|fork)ing", LIST("{\"code\":\"forking\"}"), LIST("{\"code\":\"fork\"}"));
  check_regex("(?=secret)secr", LIST("{\"code\":\"secret\"}"), LIST("{\"code\":\"secr\"}"));
  check_regex("(a)\\1bcd", LIST("{\"code\":\"aabcd\"}"), LIST("{\"code\":\"abcd\"}"));
  /* a number is formatted, not an event string: matched as it is */
  check(
      "    r:\n        n|re: '^4[0-9]4$'\n    c:\n        n|contains: [qqqzz, zzqqq]\n    condition: r or "
      "c\n",
      LIST("{\"n\":404}", "{\"n\":\"494\"}"), LIST("{\"n\":405}"));
  check(
      "    r:\n        code|re|i: 'kill'\n    c:\n        code|contains: [qqqzz, zzqqq]\n    condition: r or "
      "c\n",
      LIST("{\"code\":\"KILL\"}"), LIST("{\"code\":\"kil\"}"));
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

/* The text handed to the detection thread parses back to the same event, from one thread's kept buffer
 * again and again and beyond that buffer's first size; a pool's blocks are reused, grown, and the
 * oversized ones not kept. */
static void test_event_text_and_blocks(void **state) {
  (void)state;
  json_t *event =
      json_pack("{s:s,s:I,s:f,s:b,s:n,s:[s,i],s:{s:s}}", "type", "exec.end", "seq", (json_int_t)7, "cpu", 1.5,
                "oom_killed", 1, "error", "argv", "a\u00e9\"", 2, "limits", "memory", "1M");
  anomaly_block_pool pool = {0};
  char *first_block = NULL;
  for (int round = 0; round < 3; round++) {
    size_t length = 0;
    const char *text = anomaly_event_text(event, &length);
    assert_non_null(text);
    anomaly_block block;
    assert_int_equal(anomaly_block_fill(&pool, text, length, &block), 0);
    if (round == 0) first_block = block.data;
    assert_ptr_equal(block.data, first_block); /* the released block is the one taken again */
    json_t *back = json_loadb(block.data, block.length, 0, NULL);
    assert_true(json_equal(back, event));
    json_decref(back);
    anomaly_block_release(&pool, &block);
    assert_null(block.data);
    assert_int_equal(pool.count, 1);
  }
  static char big[(64 << 10) + 100];
  memset(big, 'x', sizeof big - 1);
  json_object_set_new(event, "data", json_string(big));
  size_t length = 0;
  const char *text = anomaly_event_text(event, &length);
  assert_non_null(text);
  assert_true(length > sizeof big);
  anomaly_block block;
  assert_int_equal(anomaly_block_fill(&pool, text, length, &block), 0);
  assert_true(block.capacity >= length);
  json_t *back = json_loadb(block.data, block.length, 0, NULL);
  assert_true(json_equal(back, event));
  json_decref(back);
  anomaly_block_release(&pool, &block); /* over ANOMALY_BLOCK_KEPT_MAX: freed, not kept */
  assert_int_equal(pool.count, 0);
  anomaly_block_pool_clear(&pool);
  json_decref(event);
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
      cmocka_unit_test(test_rule_file),
      cmocka_unit_test(test_levels),
      cmocka_unit_test(test_type_index_never_skips_a_rule_that_matches),
      cmocka_unit_test(test_type_index_keeps_load_order),
      cmocka_unit_test(test_contains_automaton),
      cmocka_unit_test(test_event_text_and_blocks),
      cmocka_unit_test(test_regex_required_literals),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
