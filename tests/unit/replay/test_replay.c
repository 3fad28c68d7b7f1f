/* Unit tests of the replay library (supervisor/replay/replay.h): simulation of single events (full
 * requests, decisions rebuilt from ids, domed's non-policy denials, damaged requests, the Dome::Path
 * hierarchy), streaming over a journal written here, candidate rule errors, the blob store, and the
 * timeline of a recorded execution. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "supervisor/audit/journal.h"
#include "supervisor/blob/blob.h"
#include "supervisor/replay/replay.h"

static const char *rules_v2 =
    "@id(\"sandbox\")\n"
    "permit(principal in Dome::Gateway::\"Default\", action == Dome::Action::\"mcp:call\",\n"
    "       resource == Dome::MCPTool::\"code-sandbox\");\n"
    "@id(\"block-intern\")\n"
    "forbid(principal == Dome::Agent::\"intern\", action, resource);\n"
    "@id(\"caps\")\n"
    "permit(principal, action == Dome::Action::\"mcp:discover\", resource) when { "
    "principal.capabilities.contains(\"discover\") };\n"
    "@id(\"workspace\")\n"
    "permit(principal, action == Dome::Action::\"fs:read\", resource in Dome::Path::\"/workspace\");\n";

static simulate_policy *policy(void) {
  simulate_policy *p = NULL;
  dome_error err = {0};
  int rc = replay_simulate_policy_parse(rules_v2, strlen(rules_v2), "v2.cedar", true, &p, &err);
  if (rc < 0) fprintf(stderr, "%s\n", err.message);
  assert_int_equal(rc, 0);
  return p;
}

static json_t *full_event(const char *agent, const char *decision, const char *determining) {
  json_t *event = json_pack(
      "{s:I,s:s,s:s,s:s,s:s,s:s,s:[s],s:s,s:{s:{s:s,s:s},s:{s:s,s:s},s:{s:s,s:s},s:{s:s},s:[{s:{s:s,s:s},s:{"
      "s:[]},"
      "s:[{s:s,s:s}]},{s:{s:s,s:s},s:{s:s},s:[{s:s,s:s}]},{s:{s:s,s:s},s:{},s:[]}]}}",
      "seq", (json_int_t)7, "time", "2026-11-29T10:00:00.000000000Z", "type", "authz.decision", "agent",
      agent, "decision", decision, "reason", "policy", "determining", determining, "policy_version", "1",
      "request", "principal", "type", "Dome::Agent", "id", agent, "action", "type", "Dome::Action", "id",
      "mcp:call", "resource", "type", "Dome::MCPTool", "id", "code-sandbox", "context", "tool",
      "execute_code", "entities", "uid", "type", "Dome::Agent", "id", agent, "attrs", "capabilities",
      "parents", "type", "Dome::Gateway", "id", "Default", "uid", "type", "Dome::MCPTool", "id",
      "code-sandbox", "attrs", "protocol", "streamable-http", "parents", "type", "Dome::Gateway", "id",
      "Default", "uid", "type", "Dome::Gateway", "id", "Default", "attrs", "parents");
  assert_non_null(event);
  return event;
}

static void test_full_request_changes(void **state) {
  (void)state;
  simulate_policy *p = policy();
  simulate_summary summary = {0};
  json_t *diff = NULL;
  const char *message = NULL;
  json_t *event = full_event("intern", "allow", "sandbox");
  assert_int_equal(replay_simulate_event(p, event, &summary, &diff, &message), 1);
  assert_non_null(diff);
  assert_string_equal(json_string_value(json_object_get(diff, "change")), "allow_to_deny");
  assert_int_equal(json_integer_value(json_object_get(diff, "seq")), 7);
  assert_string_equal(json_string_value(json_object_get(diff, "resource")),
                      "Dome::MCPTool::\"code-sandbox\"");
  json_t *new_determining = json_object_get(json_object_get(diff, "new"), "determining");
  assert_int_equal(json_array_size(new_determining), 1);
  assert_string_equal(json_string_value(json_array_get(new_determining, 0)), "block-intern");
  assert_string_equal(
      json_string_value(json_array_get(json_object_get(json_object_get(diff, "old"), "determining"), 0)),
      "sandbox");
  assert_int_equal(summary.allow_to_deny, 1);
  assert_int_equal(summary.evaluated, 1);
  json_decref(diff);
  json_decref(event);
  /* another agent: unchanged, no diff */
  event = full_event("analyst", "allow", "sandbox");
  assert_int_equal(replay_simulate_event(p, event, &summary, &diff, &message), 1);
  assert_null(diff);
  assert_int_equal(summary.unchanged, 1);
  json_decref(event);
  replay_simulate_policy_free(p);
}

/* domed's own denials after Cedar allowed (missing capability) stay denied whatever the rules. */
static void test_gate_denied_stays_denied(void **state) {
  (void)state;
  simulate_policy *p = policy();
  simulate_summary summary = {0};
  json_t *diff = NULL;
  json_t *event = full_event("analyst", "deny", "sandbox");
  json_object_set_new(event, "reason", json_string("agent lacks the tool's capability"));
  assert_int_equal(replay_simulate_event(p, event, &summary, &diff, NULL), 1);
  assert_null(diff);
  assert_int_equal(summary.unchanged, 1);
  json_object_set_new(event, "reason", json_string("policy"));
  assert_int_equal(replay_simulate_event(p, event, &summary, &diff, NULL), 1);
  assert_non_null(diff);
  assert_string_equal(json_string_value(json_object_get(diff, "change")), "deny_to_allow");
  json_decref(diff);
  json_decref(event);
  replay_simulate_policy_free(p);
}

/* An authz.decision without `request` (domed before it recorded one): rebuilt from agent/gateway/tool;
 * attributes are unknown, so a rule reading them errs and is reported. */
static void test_reconstructed_decision(void **state) {
  (void)state;
  simulate_policy *p = policy();
  simulate_summary summary = {0};
  json_t *diff = NULL;
  const char *message = NULL;
  json_t *event =
      json_pack("{s:I,s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:[]}", "seq", (json_int_t)3, "time",
                "2026-11-29T10:00:00Z", "type", "authz.decision", "agent", "intern", "gateway", "Default",
                "action", "mcp:call", "tool", "code-sandbox", "decision", "allow", "determining");
  assert_int_equal(replay_simulate_event(p, event, &summary, &diff, &message), 1);
  assert_non_null(diff);
  assert_true(json_is_true(json_object_get(diff, "reconstructed")));
  assert_int_equal(summary.reconstructed, 1);
  json_decref(diff);
  json_decref(event);
  event =
      json_pack("{s:I,s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:[]}", "seq", (json_int_t)4, "time",
                "2026-11-29T10:00:00Z", "type", "authz.decision", "agent", "analyst", "gateway", "Default",
                "action", "mcp:discover", "tool", "code-sandbox", "decision", "deny", "determining");
  assert_int_equal(replay_simulate_event(p, event, &summary, &diff, &message), 1);
  assert_null(diff); /* still denied: the `caps` rule errs on the missing attribute */
  assert_int_equal(summary.errors, 1);
  assert_non_null(strstr(message, "caps"));
  json_decref(event);
  replay_simulate_policy_free(p);
}

/* A kernel event on a Dome::Path without the path entities: the hierarchy is added. A damaged request
 * counts as an error with the new decision deny. Other event types are not counted. */
static void test_kernel_path_and_damaged(void **state) {
  (void)state;
  simulate_policy *p = policy();
  simulate_summary summary = {0};
  json_t *diff = NULL;
  json_t *event = json_pack(
      "{s:I,s:s,s:s,s:s,s:{s:{s:s,s:s},s:{s:s,s:s},s:{s:s,s:s},s:[{s:{s:s,s:s},s:{s:[]},s:[]}]}}", "seq",
      (json_int_t)9, "time", "2026-11-29T10:00:00Z", "type", "exec.denial", "agent", "analyst", "request",
      "principal", "type", "Dome::Agent", "id", "analyst", "action", "type", "Dome::Action", "id", "fs:read",
      "resource", "type", "Dome::Path", "id", "/workspace/in/a.csv", "entities", "uid", "type", "Dome::Agent",
      "id", "analyst", "attrs", "capabilities", "parents");
  assert_int_equal(replay_simulate_event(p, event, &summary, &diff, NULL), 1);
  assert_non_null(diff);
  assert_string_equal(json_string_value(json_object_get(diff, "change")), "deny_to_allow");
  assert_string_equal(
      json_string_value(json_array_get(json_object_get(json_object_get(diff, "new"), "determining"), 0)),
      "workspace");
  json_decref(diff);
  json_object_set_new(json_object_get(event, "request"), "principal", json_string("not an entity"));
  const char *message = NULL;
  assert_int_equal(replay_simulate_event(p, event, &summary, &diff, &message), 1);
  assert_null(diff);
  assert_int_equal(summary.errors, 1);
  assert_non_null(strstr(message, "request.principal"));
  json_decref(event);
  event = json_pack("{s:s}", "type", "exec.output");
  uint64_t before = summary.evaluated;
  assert_int_equal(replay_simulate_event(p, event, &summary, &diff, NULL), 0);
  assert_int_equal(summary.evaluated, before);
  json_decref(event);
  replay_simulate_policy_free(p);
}

static void test_candidate_errors(void **state) {
  (void)state;
  simulate_policy *p = NULL;
  dome_error err = {0};
  const char *bad = "permit(principal, action, resource)\n  when { principal. };";
  assert_int_equal(replay_simulate_policy_parse(bad, strlen(bad), "bad.cedar", true, &p, &err), -EINVAL);
  assert_non_null(strstr(err.message, "bad.cedar:"));
  const char *unknown = "permit(principal == Dome::Agnt::\"a\", action, resource);";
  assert_int_equal(replay_simulate_policy_parse(unknown, strlen(unknown), "typo.cedar", true, &p, &err),
                   -EINVAL);
  assert_non_null(strstr(err.message, "Dome schema"));
  assert_int_equal(replay_simulate_policy_parse(unknown, strlen(unknown), "typo.cedar", false, &p, &err), 0);
  replay_simulate_policy_free(p);
  assert_int_equal(replay_simulate_policy_load("/nonexistent/rules.cedar", true, &p, &err), -ENOENT);
  assert_non_null(strstr(err.message, "/nonexistent/rules.cedar"));
}

static char *make_directory(void) {
  char *directory = strdup("/tmp/dome-replay-unit-XXXXXX");
  assert_non_null(mkdtemp(directory));
  return directory;
}

static void remove_directory(char *directory) {
  char command[4200];
  snprintf(command, sizeof command, "rm -rf '%s'", directory);
  assert_int_equal(system(command), 0);
  free(directory);
}

static int count_diff(void *context, json_t *diff, dome_error *err) {
  (void)err;
  (void)diff;
  (*(int *)context)++;
  return 0;
}

static void test_journal_stream_and_filters(void **state) {
  (void)state;
  char *dir = make_directory();
  journal_options options;
  journal_options_init(&options, dir);
  journal *j = NULL;
  dome_error err = {0};
  assert_int_equal(journal_open(&options, &j, &err), 0);
  for (int i = 0; i < 50; i++) {
    json_t *event = full_event(i % 2 ? "intern" : "analyst", "allow", "sandbox");
    json_object_del(event, "seq");
    json_object_del(event, "time");
    assert_int_equal(journal_append(j, event, NULL, &err), 0);
    json_decref(event);
    json_t *other = json_pack("{s:s,s:s}", "type", "exec.output", "agent", "intern");
    assert_int_equal(journal_append(j, other, NULL, &err), 0);
    json_decref(other);
  }
  /* "request" text inside a string and a nested "request" member must not be taken for the request */
  json_t *tricky = full_event("intern", "allow", "sandbox");
  json_object_del(tricky, "seq");
  json_object_del(tricky, "time");
  json_object_set_new(tricky, "note", json_string("{\"request\":{\"principal\":1}}"));
  json_object_set_new(tricky, "payload", json_pack("{s:{s:i}}", "request", "principal", 1));
  assert_int_equal(journal_append(j, tricky, NULL, &err), 0);
  json_decref(tricky);
  assert_int_equal(journal_close(j, &err), 0);
  simulate_policy *p = policy();
  int diffs = 0;
  simulate_options sim = {.journal_dir = dir, .on_diff = count_diff, .context = &diffs};
  simulate_summary summary;
  assert_int_equal(replay_simulate_journal(p, &sim, &summary, &err), 0);
  assert_int_equal(summary.evaluated, 51);
  assert_int_equal(summary.allow_to_deny, 26);
  assert_int_equal(summary.errors, 0);
  assert_int_equal(diffs, 26);
  assert_true(summary.events_read >= 100);
  diffs = 0;
  sim.agent = "analyst";
  assert_int_equal(replay_simulate_journal(p, &sim, &summary, &err), 0);
  assert_int_equal(summary.evaluated, 25);
  assert_int_equal(diffs, 0);
  /* the convenience form for `rules apply --simulate-first` */
  json_t *report = NULL;
  assert_int_equal(replay_simulate_rules_text(rules_v2, strlen(rules_v2), "v2", dir, 10, &report, &err), 0);
  assert_int_equal(json_array_size(json_object_get(report, "diffs")), 10);
  assert_true(json_is_true(json_object_get(report, "diffs_truncated")));
  assert_int_equal(json_integer_value(json_object_get(json_object_get(report, "summary"), "allow_to_deny")),
                   26);
  json_decref(report);
  /* no journal: nothing evaluated, no error */
  sim.journal_dir = "/nonexistent/journal";
  assert_int_equal(replay_simulate_journal(p, &sim, &summary, &err), 0);
  assert_int_equal(summary.evaluated, 0);
  replay_simulate_policy_free(p);
  remove_directory(dir);
}

static void test_blobs(void **state) {
  (void)state;
  char *dir = make_directory();
  char hex[65];
  dome_error err = {0};
  assert_int_equal(blob_content_put(dir, "hello", 5, hex, &err), 0);
  assert_string_equal(hex, "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824");
  char *data = NULL;
  size_t length = 0;
  assert_int_equal(blob_content_get(dir, hex, &data, &length, &err), 0);
  assert_int_equal(length, 5);
  assert_memory_equal(data, "hello", 5);
  free(data);
  assert_int_equal(blob_content_get(dir, "xyz", &data, &length, &err), -EINVAL);
  char path[4300];
  snprintf(path, sizeof path, "%s/blobs/sha256/2c/%s", dir, hex);
  FILE *f = fopen(path, "w");
  fputs("jello", f);
  fclose(f);
  assert_int_equal(blob_content_get(dir, hex, &data, &length, &err), -EBADMSG);
  assert_int_equal(blob_content_get(dir, "0000000000000000000000000000000000000000000000000000000000000000",
                                    &data, &length, &err),
                   -ENOENT);
  remove_directory(dir);
}

static int count_step(void *context, json_t *step, dome_error *err) {
  (void)err;
  json_array_append(context, step);
  return 0;
}

static void test_timeline(void **state) {
  (void)state;
  char *dir = make_directory();
  journal_options options;
  journal_options_init(&options, dir);
  journal *j = NULL;
  dome_error err = {0};
  assert_int_equal(journal_open(&options, &j, &err), 0);
  const char *events[] = {
      "{\"type\":\"authz.decision\",\"exec_id\":\"e1\",\"agent\":\"a\",\"decision\":\"allow\","
      "\"determining\":[\"p\"]}",
      "{\"type\":\"exec.start\",\"exec_id\":\"e1\",\"agent\":\"a\",\"language\":\"python\",\"code\":\"print("
      "1)\"}",
      "{\"type\":\"exec.start\",\"exec_id\":\"other\",\"agent\":\"b\",\"language\":\"bash\",\"code\":"
      "\"true\"}",
      "{\"type\":\"exec.output\",\"exec_id\":\"e1\",\"stream\":\"stdout\",\"offset_ms\":12,\"data\":"
      "\"1\\n\"}",
      "{\"type\":\"exec.denial\",\"exec_id\":\"e1\",\"hook\":\"connect4\",\"object\":\"1.2.3.4:443\","
      "\"offset_ms\":15}",
      "{\"type\":\"exec.end\",\"exec_id\":\"e1\",\"exit_code\":0,\"offset_ms\":20}",
      "{\"type\":\"exec.output\",\"exec_id\":\"e1\",\"stream\":\"stdout\",\"data\":\"late\"}",
  };
  for (size_t i = 0; i < sizeof events / sizeof events[0]; i++) {
    json_t *event = json_loads(events[i], 0, NULL);
    assert_non_null(event);
    assert_int_equal(journal_append(j, event, NULL, &err), 0);
    json_decref(event);
  }
  assert_int_equal(journal_close(j, &err), 0);
  json_t *steps = json_array();
  int n = replay_timeline(dir, "e1", count_step, steps, &err);
  if (n != 5) json_dumpf(steps, stderr, 0);
  assert_int_equal(n, 5);
  const char *kinds[] = {"authorization", "start", "output", "denial", "end"};
  for (size_t i = 0; i < 5; i++)
    assert_string_equal(json_string_value(json_object_get(json_array_get(steps, i), "kind")), kinds[i]);
  assert_int_equal(json_integer_value(json_object_get(json_array_get(steps, 2), "offset_ms")), 12);
  json_decref(steps);
  json_t *timeline = NULL;
  assert_int_equal(replay_timeline_json(dir, "e1", &timeline, &err), 0);
  assert_string_equal(json_string_value(json_object_get(timeline, "agent")), "a");
  json_decref(timeline);
  assert_int_equal(replay_timeline(dir, "missing", count_step, NULL, &err), -ENOENT);
  json_t *inputs = NULL;
  assert_int_equal(replay_inputs(dir, "e1", &inputs, &err), 0);
  assert_string_equal(json_string_value(json_object_get(inputs, "code")), "print(1)");
  assert_string_equal(json_string_value(json_object_get(json_object_get(inputs, "outcome"), "stdout")),
                      "1\n");
  json_decref(inputs);
  remove_directory(dir);
}

/* A session's timeline: its own events and every event of the calls made in it (a call's decision comes
 * before the event naming the session), nothing of another session's or of a one-shot call. */
static void test_session_timeline(void **state) {
  (void)state;
  char *dir = make_directory();
  journal_options options;
  journal_options_init(&options, dir);
  journal *j = NULL;
  dome_error err = {0};
  assert_int_equal(journal_open(&options, &j, &err), 0);
  const char *events[] = {
      "{\"type\":\"authz.decision\",\"exec_id\":\"c0\",\"agent\":\"a\",\"decision\":\"allow\"}",
      "{\"type\":\"session.created\",\"session_id\":\"ses_1\",\"exec_id\":\"c0\",\"agent\":\"a\"}",
      "{\"type\":\"session.created\",\"session_id\":\"ses_2\",\"exec_id\":\"x0\",\"agent\":\"b\"}",
      "{\"type\":\"authz.decision\",\"exec_id\":\"c1\",\"agent\":\"a\",\"decision\":\"allow\"}",
      "{\"type\":\"authz.decision\",\"exec_id\":\"oneshot\",\"agent\":\"a\",\"decision\":\"allow\"}",
      "{\"type\":\"exec.start\",\"exec_id\":\"oneshot\",\"agent\":\"a\"}",
      "{\"type\":\"session.exec\",\"session_id\":\"ses_1\",\"exec_id\":\"c1\",\"language\":\"python\"}",
      "{\"type\":\"session.exec\",\"session_id\":\"ses_2\",\"exec_id\":\"x1\",\"language\":\"python\"}",
      "{\"type\":\"session.rules\",\"session_id\":\"ses_1\",\"reason\":\"network rules swapped\"}",
      "{\"type\":\"session.closed\",\"session_id\":\"ses_1\",\"reason\":\"client\"}",
  };
  for (size_t i = 0; i < sizeof events / sizeof events[0]; i++) {
    json_t *event = json_loads(events[i], 0, NULL);
    assert_non_null(event);
    assert_int_equal(journal_append(j, event, NULL, &err), 0);
    json_decref(event);
  }
  assert_int_equal(journal_close(j, &err), 0);
  json_t *steps = json_array();
  int n = replay_session_timeline(dir, "ses_1", count_step, steps, &err);
  if (n != 6) json_dumpf(steps, stderr, 0);
  assert_int_equal(n, 6);
  const char *kinds[] = {"authorization", "created", "authorization", "cell", "rules", "closed"};
  const uint64_t seqs[] = {1, 2, 4, 7, 9, 10};
  for (size_t i = 0; i < 6; i++) {
    json_t *step = json_array_get(steps, i);
    assert_string_equal(json_string_value(json_object_get(step, "kind")), kinds[i]);
    assert_int_equal(json_integer_value(json_object_get(step, "seq")), seqs[i]);
  }
  assert_string_equal(json_string_value(json_object_get(json_array_get(steps, 2), "exec_id")), "c1");
  json_decref(steps);
  json_t *timeline = NULL;
  assert_int_equal(replay_session_timeline_json(dir, "ses_1", &timeline, &err), 0);
  assert_string_equal(json_string_value(json_object_get(timeline, "session_id")), "ses_1");
  assert_string_equal(json_string_value(json_object_get(timeline, "agent")), "a");
  assert_int_equal(json_array_size(json_object_get(timeline, "steps")), 6);
  json_decref(timeline);
  assert_int_equal(replay_session_timeline(dir, "ses_9", count_step, NULL, &err), -ENOENT);
  assert_non_null(strstr(err.message, "ses_9"));
  assert_int_equal(replay_session_timeline(dir, "", count_step, NULL, &err), -EINVAL);
  remove_directory(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_full_request_changes),
      cmocka_unit_test(test_gate_denied_stays_denied),
      cmocka_unit_test(test_reconstructed_decision),
      cmocka_unit_test(test_kernel_path_and_damaged),
      cmocka_unit_test(test_candidate_errors),
      cmocka_unit_test(test_journal_stream_and_filters),
      cmocka_unit_test(test_blobs),
      cmocka_unit_test(test_timeline),
      cmocka_unit_test(test_session_timeline),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
