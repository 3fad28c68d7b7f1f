/* Kernel denials as JSON (dome_denial_to_json) with the one hook classification (dome_hook_kind), every
 * hook of bpf/dome.h; shadow differences as JSON (dome_denial_shadow_to_json); and the file tables as the
 * jail's Landlock path rules. */
#include <errno.h>
#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "supervisor/jail/jail.h"
#include "supervisor/kernel/kernel.h"

struct hook_case {
  enum dome_hook hook;
  const char *name;
  const char *action; /* NULL: the hook carries no Cedar action */
};

/* The denial below carries net action bind and file access write: a network hook must answer net:bind,
 * a file hook fs:write, any other hook nothing. */
static const struct hook_case hook_cases[] = {
    {DOME_HOOK_CONNECT4, "connect4", "net:bind"},
    {DOME_HOOK_CONNECT6, "connect6", "net:bind"},
    {DOME_HOOK_SENDMSG4, "sendmsg4", "net:bind"},
    {DOME_HOOK_SENDMSG6, "sendmsg6", "net:bind"},
    {DOME_HOOK_BIND4, "bind4", "net:bind"},
    {DOME_HOOK_BIND6, "bind6", "net:bind"},
    {DOME_HOOK_SOCK_CREATE, "sock_create", NULL},
    {DOME_HOOK_EGRESS, "egress", NULL},
    {DOME_HOOK_FILE_OPEN, "file_open", "fs:write"},
    {DOME_HOOK_FILE_RECEIVE, "file_receive", "fs:write"},
    {DOME_HOOK_BPRM_CHECK, "bprm_check_security", "fs:write"},
    {DOME_HOOK_SOCKET_CONNECT, "socket_connect", "net:bind"},
    {DOME_HOOK_PTRACE, "ptrace_access_check", NULL},
    {DOME_HOOK_TASK_KILL, "task_kill", NULL},
    {DOME_HOOK_BPF, "bpf", NULL},
    {DOME_HOOK_FILE_PERMISSION, "file_permission", "fs:write"},
    {DOME_HOOK_SOCKET_CREATE, "socket_create", NULL},
    {DOME_HOOK_PATH_LINK, "path_link", "fs:write"},
    {DOME_HOOK_PATH_RENAME, "path_rename", "fs:write"},
};

static void test_every_hook_is_listed(void **state) {
  (void)state;
  assert_int_equal(sizeof hook_cases / sizeof hook_cases[0], DOME_HOOK_LAST);
  for (size_t i = 0; i < sizeof hook_cases / sizeof hook_cases[0]; i++)
    assert_int_equal(hook_cases[i].hook, (int)i + 1);
}

static void test_denial_json_per_hook(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof hook_cases / sizeof hook_cases[0]; i++) {
    const struct hook_case *c = &hook_cases[i];
    struct dome_denial denial = {.time_ns = 5000000000ull + 42000000ull,
                                 .pid = 77,
                                 .hook = c->hook,
                                 .entry = 3,
                                 .policy_id = "forbid-x",
                                 .net_action = DOME_NET_BIND,
                                 .file_access = DOME_FILE_WRITE};
    snprintf(denial.object, sizeof denial.object, "object %zu", i);
    json_t *o = dome_denial_to_json(&denial, 5000000000ull);
    assert_non_null(o);
    assert_string_equal(json_string_value(json_object_get(o, "hook")), c->name);
    assert_string_equal(json_string_value(json_object_get(o, "object")), denial.object);
    assert_int_equal(json_integer_value(json_object_get(o, "pid")), 77);
    assert_int_equal(json_integer_value(json_object_get(o, "offset_ms")), 42);
    assert_string_equal(json_string_value(json_object_get(o, "policy_id")), "forbid-x");
    assert_null(json_object_get(o, "policy"));
    json_t *action = json_object_get(o, "action");
    if (c->action) {
      assert_non_null(action);
      assert_string_equal(json_string_value(action), c->action);
    } else {
      assert_null(action);
    }
    enum dome_hook_kind kind = dome_hook_kind(c->hook);
    assert_int_equal(kind, c->action == NULL                    ? DOME_HOOK_KIND_OTHER
                           : strncmp(c->action, "net:", 4) == 0 ? DOME_HOOK_KIND_NETWORK
                                                                : DOME_HOOK_KIND_FILE);
    json_decref(o);
  }
}

static void test_denial_json_default_deny_and_early_event(void **state) {
  (void)state;
  struct dome_denial denial = {
      .time_ns = 100, .pid = 1, .hook = DOME_HOOK_CONNECT4, .entry = -1, .net_action = DOME_NET_CONNECT};
  snprintf(denial.object, sizeof denial.object, "203.0.113.7:443");
  json_t *o = dome_denial_to_json(&denial, 200); /* an event stamped before the base */
  assert_non_null(o);
  assert_null(json_object_get(o, "policy_id")); /* the default deny names no policy */
  assert_int_equal(json_integer_value(json_object_get(o, "offset_ms")), 0);
  assert_string_equal(json_string_value(json_object_get(o, "action")), "net:connect");
  json_decref(o);
}

/* Both sides in authz.shadow's shape: decision and determining policies ([] for the default deny). */
static void test_shadow_json_sides(void **state) {
  (void)state;
  struct dome_denial shadow = {.kind = DOME_EVENT_SHADOW,
                               .time_ns = 3000000000ull,
                               .pid = 9,
                               .hook = DOME_HOOK_CONNECT4,
                               .entry = 0,
                               .policy_id = "permit-local",
                               .net_action = DOME_NET_CONNECT,
                               .allowed = true,
                               .shadow_allowed = false,
                               .shadow_entry = -1};
  snprintf(shadow.object, sizeof shadow.object, "127.0.0.1:8080");
  json_t *o = dome_denial_shadow_to_json(&shadow, 1000000000ull);
  assert_non_null(o);
  char *text = json_dumps(o, JSON_SORT_KEYS | JSON_COMPACT);
  assert_string_equal(
      text,
      "{\"action\":\"net:connect\",\"active\":{\"decision\":\"allow\",\"determining\":[\"permit-"
      "local\"]},\"hook\":\"connect4\",\"object\":\"127.0.0.1:8080\",\"offset_ms\":2000,\"pid\":9,"
      "\"shadow\":{\"decision\":\"deny\",\"determining\":[]}}");
  free(text);
  json_decref(o);
  /* the reverse, a file hook, both policies named */
  shadow.hook = DOME_HOOK_FILE_OPEN;
  shadow.file_access = DOME_FILE_READ;
  shadow.allowed = false;
  shadow.policy_id = "forbid-secret";
  shadow.shadow_allowed = true;
  shadow.shadow_entry = 2;
  shadow.shadow_policy_id = "permit-files";
  snprintf(shadow.object, sizeof shadow.object, "/workspace/secret");
  o = dome_denial_shadow_to_json(&shadow, 0);
  assert_non_null(o);
  assert_string_equal(json_string_value(json_object_get(o, "action")), "fs:read");
  assert_string_equal(json_string_value(json_object_get(json_object_get(o, "active"), "decision")), "deny");
  assert_string_equal(
      json_string_value(json_array_get(json_object_get(json_object_get(o, "active"), "determining"), 0)),
      "forbid-secret");
  assert_string_equal(json_string_value(json_object_get(json_object_get(o, "shadow"), "decision")), "allow");
  assert_string_equal(
      json_string_value(json_array_get(json_object_get(json_object_get(o, "shadow"), "determining"), 0)),
      "permit-files");
  assert_null(json_object_get(o, "policy_id")); /* the sides carry the policies */
  json_decref(o);
  /* a denial is no shadow difference */
  shadow.kind = DOME_EVENT_DENIAL;
  assert_null(dome_denial_shadow_to_json(&shadow, 0));
}

static void add_file(struct dome_rule_tables *tables, const char *path, enum dome_file_match match,
                     enum dome_file_access access, enum dome_decision decision) {
  dome_error err = {0};
  assert_int_equal(dome_rule_tables_add_file(tables, path, match, access, decision, DOME_NO_POLICY, &err), 0);
}

static void test_path_rules_merged_per_path(void **state) {
  (void)state;
  struct dome_rule_tables tables;
  dome_rule_tables_init(&tables);
  dome_error err = {0};
  add_file(&tables, "/workspace", DOME_MATCH_SUBTREE, DOME_FILE_READ, DOME_DECISION_ALLOW);
  add_file(&tables, "/workspace", DOME_MATCH_SUBTREE, DOME_FILE_WRITE, DOME_DECISION_ALLOW);
  add_file(&tables, "/workspace", DOME_MATCH_EXACT, DOME_FILE_EXEC, DOME_DECISION_ALLOW);
  add_file(&tables, "/workspace/secret", DOME_MATCH_SUBTREE, DOME_FILE_READ, DOME_DECISION_DENY);
  add_file(&tables, "/usr", DOME_MATCH_SUBTREE, DOME_FILE_EXEC, DOME_DECISION_ALLOW);
  struct dome_landlock_path_rules rules;
  assert_int_equal(dome_landlock_path_rules_from_tables(&tables, &rules, &err), 0);
  assert_int_equal(rules.count, 3); /* (/workspace, subtree), (/workspace, exact), (/usr, subtree) */
  assert_string_equal(rules.rules[0].path, "/workspace");
  assert_false(rules.rules[0].exact);
  assert_int_equal(rules.rules[0].access, JAIL_ACCESS_READ | JAIL_ACCESS_WRITE);
  assert_true(rules.rules[0].optional);
  assert_string_equal(rules.rules[1].path, "/workspace");
  assert_true(rules.rules[1].exact);
  assert_int_equal(rules.rules[1].access, JAIL_ACCESS_EXEC);
  assert_string_equal(rules.rules[2].path, "/usr");
  assert_int_equal(rules.rules[2].access, JAIL_ACCESS_EXEC);
  assert_int_equal(dome_landlock_inexpressible_count(&tables), 1); /* the deny inside /workspace */
  dome_landlock_path_rules_free(&rules);
  assert_int_equal(rules.count, 0);
  dome_rule_tables_free(&tables);
}

static void test_path_rules_bounded(void **state) {
  (void)state;
  struct dome_rule_tables tables;
  dome_rule_tables_init(&tables);
  dome_error err = {0};
  for (unsigned i = 0; i <= JAIL_MAX_PATH_RULES; i++) {
    char path[32];
    snprintf(path, sizeof path, "/d%u", i);
    add_file(&tables, path, DOME_MATCH_SUBTREE, DOME_FILE_READ, DOME_DECISION_ALLOW);
  }
  struct dome_landlock_path_rules rules;
  assert_int_equal(dome_landlock_path_rules_from_tables(&tables, &rules, &err), -E2BIG);
  assert_non_null(strstr(err.message, "allowed paths for Landlock"));
  assert_null(rules.rules);
  assert_int_equal(rules.count, 0);
  dome_rule_tables_free(&tables);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_hook_is_listed),
      cmocka_unit_test(test_denial_json_per_hook),
      cmocka_unit_test(test_denial_json_default_deny_and_early_event),
      cmocka_unit_test(test_shadow_json_sides),
      cmocka_unit_test(test_path_rules_merged_per_path),
      cmocka_unit_test(test_path_rules_bounded),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
