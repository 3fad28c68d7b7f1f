/* The console's sessions (idle timeout, bound, logout), CSRF and cookie parsing, the login rate limit
 * and the built-in files. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "supervisor/console/console.h"

static void test_session_life(void **state) {
  (void)state;
  console_sessions *sessions = console_sessions_new(60, 4);
  assert_non_null(sessions);
  struct console_session opened, found;
  assert_int_equal(console_session_open(sessions, "alice", "auditor", 1000, &opened), 0);
  assert_int_equal(strlen(opened.id), CONSOLE_SECRET_SIZE - 1);
  assert_int_equal(strlen(opened.csrf), CONSOLE_SECRET_SIZE - 1);
  assert_string_not_equal(opened.id, opened.csrf);
  assert_int_equal(console_session_find(sessions, opened.id, 1059, &found), 0);
  assert_string_equal(found.operator_name, "alice");
  assert_string_equal(found.role, "auditor");
  /* used at 1059: still alive at 1118, gone at 1119 (60 s idle) */
  assert_int_equal(console_session_find(sessions, opened.id, 1118, &found), 0);
  assert_int_equal(console_session_find(sessions, opened.id, 1178, &found), -ENOENT);
  assert_int_equal(console_session_find(sessions, opened.id, 1118, &found), -ENOENT); /* removed */
  /* a wrong id of the right length, NULL, a short id */
  char wrong[CONSOLE_SECRET_SIZE];
  assert_int_equal(console_session_open(sessions, "bob", "operator", 2000, &opened), 0);
  memcpy(wrong, opened.id, sizeof wrong);
  wrong[5] = wrong[5] == 'A' ? 'B' : 'A';
  assert_int_equal(console_session_find(sessions, wrong, 2000, &found), -ENOENT);
  assert_int_equal(console_session_find(sessions, NULL, 2000, &found), -ENOENT);
  assert_int_equal(console_session_find(sessions, "short", 2000, &found), -ENOENT);
  console_session_close(sessions, opened.id);
  assert_int_equal(console_session_find(sessions, opened.id, 2000, &found), -ENOENT);
  /* bad role or name */
  assert_int_equal(console_session_open(sessions, "carol", "admin", 2000, &opened), -EINVAL);
  assert_int_equal(console_session_open(sessions, "", "auditor", 2000, &opened), -EINVAL);
  console_sessions_free(sessions);
}

static void test_session_bound_and_revoke(void **state) {
  (void)state;
  console_sessions *sessions = console_sessions_new(600, 3);
  struct console_session first, other, found;
  assert_int_equal(console_session_open(sessions, "alice", "auditor", 100, &first), 0);
  assert_int_equal(console_session_open(sessions, "bob", "operator", 101, &other), 0);
  assert_int_equal(console_session_open(sessions, "bob", "operator", 102, &other), 0);
  assert_int_equal(console_sessions_count(sessions, 103), 3);
  /* full: the least recently used (alice's, at 100) gives way */
  assert_int_equal(console_session_open(sessions, "carol", "auditor", 103, &other), 0);
  assert_int_equal(console_sessions_count(sessions, 103), 3);
  assert_int_equal(console_session_find(sessions, first.id, 103, &found), -ENOENT);
  assert_int_equal(console_sessions_close_operator(sessions, "bob"), 2);
  assert_int_equal(console_sessions_count(sessions, 103), 1);
  assert_int_equal(console_session_find(sessions, other.id, 104, &found), 0);
  console_sessions_free(sessions);
}

static void test_csrf(void **state) {
  (void)state;
  console_sessions *sessions = console_sessions_new(0, 0);
  assert_int_equal(console_sessions_idle_timeout(sessions), 900);
  struct console_session session;
  assert_int_equal(console_session_open(sessions, "alice", "operator", 1, &session), 0);
  assert_true(console_csrf_valid(&session, session.csrf));
  assert_false(console_csrf_valid(&session, NULL));
  assert_false(console_csrf_valid(&session, ""));
  assert_false(console_csrf_valid(&session, session.id));
  char truncated[CONSOLE_SECRET_SIZE];
  snprintf(truncated, sizeof truncated, "%.*s", CONSOLE_SECRET_SIZE - 2, session.csrf);
  assert_false(console_csrf_valid(&session, truncated));
  console_sessions_free(sessions);
}

static void test_cookie_value(void **state) {
  (void)state;
  char value[64];
  assert_true(console_cookie_value("dome_console=abc", "dome_console", value, sizeof value));
  assert_string_equal(value, "abc");
  assert_true(console_cookie_value("x=1; dome_console=def ; y=2", "dome_console", value, sizeof value));
  assert_string_equal(value, "def");
  assert_false(console_cookie_value("xdome_console=1; dome_consolex=2", "dome_console", value, sizeof value));
  assert_false(console_cookie_value("dome_console=", "dome_console", value, sizeof value));
  assert_false(console_cookie_value(NULL, "dome_console", value, sizeof value));
  char small[4];
  assert_false(console_cookie_value("dome_console=toolong", "dome_console", small, sizeof small));
}

static void test_login_limit(void **state) {
  (void)state;
  console_login_limit *limit = console_login_limit_new();
  bool first = false;
  for (int i = 0; i < CONSOLE_LOGIN_FAILURES_PER_SOURCE; i++) {
    assert_true(console_login_allowed(limit, "127.0.0.1", 10, &first));
    assert_false(first);
    console_login_failed(limit, "127.0.0.1", 10);
  }
  assert_false(console_login_allowed(limit, "127.0.0.1", 20, &first));
  assert_true(first);
  assert_false(console_login_allowed(limit, "127.0.0.1", 30, &first));
  assert_false(first); /* only the window's first refusal is reported */
  assert_int_equal(console_login_refused(limit, "127.0.0.1", 30), 2);
  assert_true(console_login_allowed(limit, "[::1]", 30, &first)); /* another source is not held back */
  /* the window passes */
  assert_true(console_login_allowed(limit, "127.0.0.1", 10 + CONSOLE_LOGIN_WINDOW_S, &first));
  /* all sources together */
  for (int i = 0; i < CONSOLE_LOGIN_FAILURES_TOTAL; i++) {
    char source[32];
    snprintf(source, sizeof source, "10.0.0.%d", i);
    console_login_failed(limit, source, 200);
  }
  assert_false(console_login_allowed(limit, "10.9.9.9", 201, &first));
  assert_true(console_login_allowed(limit, "10.9.9.9", 200 + CONSOLE_LOGIN_WINDOW_S, &first));
  console_login_limit_free(limit);
}

static void test_assets_and_headers(void **state) {
  (void)state;
  const struct console_asset *page = console_asset_find("index.html");
  assert_non_null(page);
  assert_true(page->length > 0);
  assert_string_equal(page->content_type, "text/html; charset=utf-8");
  assert_null(console_asset_find("../index.html"));
  assert_null(console_asset_find(""));
  assert_null(console_asset_find(NULL));
  bool csp = false, frame = false, referrer = false;
  for (size_t i = 0; console_security_headers[i]; i += 2) {
    if (strcmp(console_security_headers[i], "Content-Security-Policy") == 0)
      csp = strstr(console_security_headers[i + 1], "default-src 'self'") != NULL &&
            strstr(console_security_headers[i + 1], "unsafe-inline") == NULL;
    if (strcmp(console_security_headers[i], "X-Frame-Options") == 0)
      frame = strcmp(console_security_headers[i + 1], "DENY") == 0;
    if (strcmp(console_security_headers[i], "Referrer-Policy") == 0) referrer = true;
  }
  assert_true(csp && frame && referrer);
}

/* An anomaly.alert event as the journal holds it. */
static json_t *alert_event(uint64_t seq, const char *agent, const char *level) {
  return json_pack("{s:s,s:I,s:s,s:s,s:s}", "type", "anomaly.alert", "seq", (json_int_t)seq, "agent", agent,
                   "level", level, "rule_id", "r-1");
}

static void fold_new(struct console_alerts *alerts, json_t *event, size_t bytes, int level) {
  console_alerts_fold(alerts, event, (uint64_t)json_integer_value(json_object_get(event, "seq")), bytes,
                      level);
  json_decref(event);
}

static json_int_t seq_at(json_t *list, size_t i) {
  return json_integer_value(json_object_get(json_array_get(json_object_get(list, "alerts"), i), "seq"));
}

static void test_alerts_bounds_and_responses(void **state) {
  (void)state;
  struct console_alerts *alerts = console_alerts_new(3, 0);
  assert_non_null(alerts);
  struct console_alert_query all = {.limit = 100};
  json_t *list = console_alerts_list(alerts, &all);
  assert_int_equal(json_array_size(json_object_get(list, "alerts")), 0);
  assert_false(json_is_true(json_object_get(list, "older_dropped")));
  json_decref(list);
  for (uint64_t seq = 10; seq < 15; seq++)
    fold_new(alerts, alert_event(seq, seq % 2 ? "odd" : "even", "high"), 100, 4);
  fold_new(alerts, alert_event(12, "again", "high"), 100, 4); /* read already: ignored */
  list = console_alerts_list(alerts, &all);
  assert_int_equal(json_array_size(json_object_get(list, "alerts")), 3); /* the newest 3 */
  assert_int_equal(seq_at(list, 0), 14);
  assert_int_equal(seq_at(list, 2), 12);
  assert_int_equal(json_integer_value(json_object_get(list, "oldest_kept_seq")), 12);
  assert_true(json_is_true(json_object_get(list, "older_dropped")));
  json_decref(list);
  /* the response: the first agent.suspended naming a kept alert; one naming a dropped alert is ignored */
  json_t *suspended = json_pack("{s:s,s:I,s:s,s:I}", "type", "agent.suspended", "seq", (json_int_t)15,
                                "agent", "odd", "alert_seq", (json_int_t)13);
  console_alerts_fold(alerts, suspended, 15, 80, 0);
  json_decref(suspended);
  json_t *second = json_pack("{s:s,s:I,s:I}", "type", "agent.suspended", "seq", (json_int_t)16, "alert_seq",
                             (json_int_t)13);
  console_alerts_fold(alerts, second, 16, 80, 0);
  json_decref(second);
  json_t *dropped = json_pack("{s:s,s:I,s:I}", "type", "agent.suspended", "seq", (json_int_t)17, "alert_seq",
                              (json_int_t)10);
  console_alerts_fold(alerts, dropped, 17, 80, 0);
  json_decref(dropped);
  json_t *found = console_alerts_find(alerts, 13);
  assert_non_null(found);
  assert_int_equal(json_integer_value(json_object_get(json_object_get(found, "response"), "seq")), 15);
  json_decref(found);
  found = console_alerts_find(alerts, 14);
  assert_true(json_is_null(json_object_get(found, "response")));
  json_decref(found);
  assert_null(console_alerts_find(alerts, 10));
  assert_null(console_alerts_find(alerts, 15)); /* not an alert */
  /* filters: agent, level, limit */
  struct console_alert_query odd = {.agent = "odd", .limit = 100};
  list = console_alerts_list(alerts, &odd);
  assert_int_equal(json_array_size(json_object_get(list, "alerts")), 1);
  assert_int_equal(seq_at(list, 0), 13);
  json_decref(list);
  fold_new(alerts, alert_event(20, "odd", "medium"), 100, 3);
  struct console_alert_query high = {.min_level = 4, .limit = 100};
  list = console_alerts_list(alerts, &high);
  assert_int_equal(json_array_size(json_object_get(list, "alerts")), 2); /* 13 and 14; 20 is medium */
  assert_int_equal(seq_at(list, 0), 14);
  json_decref(list);
  struct console_alert_query one = {.limit = 1};
  list = console_alerts_list(alerts, &one);
  assert_int_equal(json_array_size(json_object_get(list, "alerts")), 1);
  assert_int_equal(seq_at(list, 0), 20);
  json_decref(list);
  console_alerts_free(alerts);
  /* bounded by the bytes of the lines too: 250 bytes hold two alerts of 100 */
  alerts = console_alerts_new(0, 250);
  for (uint64_t seq = 1; seq <= 4; seq++) fold_new(alerts, alert_event(seq, "a", "low"), 100, 2);
  list = console_alerts_list(alerts, &all);
  assert_int_equal(json_array_size(json_object_get(list, "alerts")), 2);
  assert_int_equal(seq_at(list, 1), 3);
  json_decref(list);
  console_alerts_free(alerts);
}

#define MINUTE INT64_C(60000000000)

static json_int_t minute_count(json_t *hour, const char *agent, size_t slot) {
  return json_integer_value(
      json_array_get(json_object_get(json_object_get(hour, agent), "calls_per_minute"), slot));
}

static void test_calls_per_minute(void **state) {
  (void)state;
  struct console_calls *calls = console_calls_new(2);
  assert_non_null(calls);
  int64_t now = 1000 * MINUTE + 30 * INT64_C(1000000000);
  console_calls_count(calls, "a", true, now);
  console_calls_count(calls, "a", false, now - 1);
  console_calls_count(calls, "a", true, now - 59 * MINUTE); /* the oldest minute of the hour */
  console_calls_count(calls, "a", true, now - 60 * MINUTE); /* out of the hour */
  json_t *hour = console_calls_last_hour(calls, now);
  assert_int_equal(json_array_size(json_object_get(json_object_get(hour, "a"), "calls_per_minute")), 60);
  assert_int_equal(minute_count(hour, "a", 59), 2);
  assert_int_equal(minute_count(hour, "a", 0), 1);
  assert_int_equal(json_integer_value(json_object_get(json_object_get(hour, "a"), "allow")), 2);
  assert_int_equal(json_integer_value(json_object_get(json_object_get(hour, "a"), "deny")), 1);
  json_decref(hour);
  /* an hour later the slots hold new minutes: nothing of the old hour is counted */
  console_calls_count(calls, "a", false, now + 60 * MINUTE);
  hour = console_calls_last_hour(calls, now + 60 * MINUTE);
  assert_int_equal(json_integer_value(json_object_get(json_object_get(hour, "a"), "allow")), 0);
  assert_int_equal(json_integer_value(json_object_get(json_object_get(hour, "a"), "deny")), 1);
  json_decref(hour);
  /* two agents at most: a third takes the place of the one whose last call is the oldest */
  console_calls_count(calls, "b", true, now + 61 * MINUTE);
  console_calls_count(calls, "a", true, now + 62 * MINUTE);
  console_calls_count(calls, "c", true, now + 63 * MINUTE);
  hour = console_calls_last_hour(calls, now + 63 * MINUTE);
  assert_null(json_object_get(hour, "b"));
  assert_non_null(json_object_get(hour, "a"));
  assert_int_equal(json_integer_value(json_object_get(json_object_get(hour, "c"), "allow")), 1);
  json_decref(hour);
  /* agents without a call in the hour are left out */
  hour = console_calls_last_hour(calls, now + 200 * MINUTE);
  assert_int_equal(json_object_size(hour), 0);
  json_decref(hour);
  console_calls_free(calls);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_session_life),
      cmocka_unit_test(test_session_bound_and_revoke),
      cmocka_unit_test(test_csrf),
      cmocka_unit_test(test_cookie_value),
      cmocka_unit_test(test_login_limit),
      cmocka_unit_test(test_assets_and_headers),
      cmocka_unit_test(test_alerts_bounds_and_responses),
      cmocka_unit_test(test_calls_per_minute),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
