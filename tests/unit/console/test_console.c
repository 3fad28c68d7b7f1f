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

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_session_life), cmocka_unit_test(test_session_bound_and_revoke),
      cmocka_unit_test(test_csrf),         cmocka_unit_test(test_cookie_value),
      cmocka_unit_test(test_login_limit),  cmocka_unit_test(test_assets_and_headers),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
