/* The control plane's state store: agents and tokens, quotas, tools, rules versions, parsers. */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "supervisor/control/control.h"
#include "tests/unit/control/store_fixture.h"

static void test_agent_tokens(void **state) {
  (void)state;
  control_store *store = open_store();
  dome_error err = {0};
  char token[CONTROL_TOKEN_SIZE];
  assert_int_equal(control_agent_register(store, "code-exec-agent", "code-execution, net", token, &err), 0);
  assert_true(strncmp(token, "dome_", 5) == 0 && strlen(token) == 48);
  assert_int_equal(control_agent_register(store, "code-exec-agent", "x", token + 0, &err), -EEXIST);
  assert_int_equal(control_agent_register(store, "bad name", "x", token, &err), -EINVAL);
  assert_int_equal(control_agent_register(store, "a", "ok,,bad", token, &err), -EINVAL);
  char first[CONTROL_TOKEN_SIZE];
  assert_int_equal(control_agent_register(store, "second", "", first, &err), 0);

  json_t *agent = control_agent_authenticate(store, first, &err);
  assert_non_null(agent);
  assert_string_equal(json_string_value(json_object_get(agent, "name")), "second");
  json_decref(agent);
  assert_null(control_agent_authenticate(store, "dome_wrong", &err));
  assert_null(control_agent_authenticate(store, NULL, &err));

  assert_int_equal(control_agent_set_status(store, "second", "suspended", &err), 0);
  assert_null(control_agent_authenticate(store, first, &err));
  assert_non_null(strstr(err.message, "suspended"));
  assert_int_equal(control_agent_set_status(store, "second", "active", &err), 0);
  agent = control_agent_authenticate(store, first, &err);
  assert_non_null(agent);
  json_decref(agent);
  assert_int_equal(control_agent_set_status(store, "second", "revoked", &err), 0);
  assert_null(control_agent_authenticate(store, first, &err));
  assert_int_equal(control_agent_set_status(store, "second", "active", &err), -EINVAL);
  assert_int_equal(control_agent_set_status(store, "nobody", "revoked", &err), -ENOENT);
  json_t *grants = json_pack("[s]", "Default");
  assert_int_equal(control_agent_set_member(store, "code-exec-agent", "gateways", grants, &err), 0);
  assert_int_equal(control_agent_set_member(store, "code-exec-agent", "token_hash", grants, &err), -EINVAL);
  assert_int_equal(control_agent_set_member(store, "nobody", "gateways", grants, &err), -ENOENT);
  json_decref(grants);
  json_t *record = control_agent_get(store, "code-exec-agent");
  assert_non_null(record);
  assert_non_null(json_object_get(record, "gateways"));
  assert_null(json_object_get(record, "token_hash"));
  json_decref(record);
  assert_null(control_agent_get(store, "nobody"));
  control_store_close(store);

  /* persisted: reopen, the first agent's token still resolves; the file holds no token */
  store = open_store();
  char rotated[CONTROL_TOKEN_SIZE];
  assert_int_equal(control_agent_rotate_token(store, "code-exec-agent", 0, rotated, &err), 0);
  assert_null(control_agent_authenticate(store, token, &err));
  agent = control_agent_authenticate(store, rotated, &err);
  assert_non_null(agent);
  assert_int_equal(json_array_size(json_object_get(agent, "capabilities")), 2);
  json_decref(agent);
  control_store_close(store);
  char path[256];
  snprintf(path, sizeof path, "%s/agents.json", directory);
  FILE *file = fopen(path, "r");
  assert_non_null(file);
  char text[8192] = {0};
  size_t n = fread(text, 1, sizeof text - 1, file);
  fclose(file);
  assert_true(n > 0);
  assert_null(strstr(text, rotated));
  assert_null(strstr(text, first));
}

static void test_quotas(void **state) {
  (void)state;
  control_store *store = open_store();
  dome_error err = {0};
  struct control_quota quota;
  control_quota_get(store, "code-execution", &quota);
  assert_int_equal(quota.memory_bytes, 256u << 20);
  assert_int_equal(quota.timeout_ms, 10000);
  json_t *fields =
      json_pack("{s:s,s:s,s:s,s:s}", "memory", "512M", "timeout", "2.5", "pids", "32", "egress", "allow");
  assert_int_equal(control_quota_set(store, "code-execution", fields, &err), 0);
  json_decref(fields);
  control_quota_get(store, "code-execution", &quota);
  assert_int_equal(quota.memory_bytes, 512u << 20);
  assert_int_equal(quota.timeout_ms, 2500);
  assert_int_equal(quota.pids, 32);
  assert_true(quota.egress);
  fields = json_pack("{s:s}", "memory", "12Q");
  assert_int_equal(control_quota_set(store, "code-execution", fields, &err), -EINVAL);
  assert_non_null(strstr(err.message, "--memory"));
  json_decref(fields);
  fields = json_pack("{s:s}", "colour", "red");
  assert_int_equal(control_quota_set(store, "code-execution", fields, &err), -EINVAL);
  json_decref(fields);
  control_quota_get(store, "code-execution", &quota); /* unchanged by the failures */
  assert_int_equal(quota.memory_bytes, 512u << 20);
  /* --cpus: the jail's own range, the whole text a number (nothing changes when refused) */
  static const char *const bad_cpus[] = {"0", "0.001", "5000", "2abc", ""};
  for (size_t i = 0; i < sizeof bad_cpus / sizeof bad_cpus[0]; i++) {
    fields = json_pack("{s:s}", "cpus", bad_cpus[i]);
    assert_int_equal(control_quota_set(store, "code-execution", fields, &err), -EINVAL);
    assert_non_null(strstr(err.message, "--cpus"));
    json_decref(fields);
  }
  /* the session's own cgroup quota: 0 defers to the capability's, bad values name their flag */
  fields = json_pack("{s:s,s:s,s:s}", "session_memory", "300M", "session_cpus", "0.5", "session_pids", "40");
  assert_int_equal(control_quota_set(store, "code-execution", fields, &err), 0);
  json_decref(fields);
  struct control_quota session;
  control_quota_get(store, "code-execution", &quota);
  control_quota_for_session(&quota, &session);
  assert_int_equal(session.memory_bytes, 300u << 20);
  assert_true(session.cpus == 0.5);
  assert_int_equal(session.pids, 40);
  assert_int_equal(quota.memory_bytes, 512u << 20); /* the one-shot quota is its own */
  assert_int_equal(quota.pids, 32);
  static const char *const bad_session[][2] = {{"session_pids", "-1"},    {"session_pids", "12x"},
                                               {"session_cpus", "0.001"}, {"session_cpus", "many"},
                                               {"session_memory", "10"},  {"session_memory", "12Q"}};
  for (size_t i = 0; i < sizeof bad_session / sizeof bad_session[0]; i++) {
    fields = json_pack("{s:s}", bad_session[i][0], bad_session[i][1]);
    assert_int_equal(control_quota_set(store, "code-execution", fields, &err), -EINVAL);
    char flag[64];
    snprintf(flag, sizeof flag, "--%s", bad_session[i][0]);
    flag[9] = '-'; /* session_x -> session-x */
    assert_non_null(strstr(err.message, flag));
    json_decref(fields);
  }
  fields = json_pack("{s:i,s:i,s:i}", "session_memory", 0, "session_cpus", 0, "session_pids", 0);
  assert_int_equal(control_quota_set(store, "code-execution", fields, &err), 0);
  json_decref(fields);
  control_quota_get(store, "code-execution", &quota);
  control_quota_for_session(&quota, &session);
  assert_int_equal(session.memory_bytes, 512u << 20);
  assert_int_equal(session.pids, 32);
  fields = json_pack("{s:s}", "cpus", "2048");
  assert_int_equal(control_quota_set(store, "code-execution", fields, &err), 0);
  json_decref(fields);
  control_quota_get(store, "code-execution", &quota);
  assert_true(quota.cpus == 2048.0);
  /* the capability's egress byte quota: a size, 0 hands it back to domed's egress_quota */
  assert_int_equal(quota.egress_bytes, 0);
  fields = json_pack("{s:s}", "egress_bytes", "64M");
  assert_int_equal(control_quota_set(store, "code-execution", fields, &err), 0);
  json_decref(fields);
  control_quota_get(store, "code-execution", &quota);
  assert_int_equal(quota.egress_bytes, 64u << 20);
  assert_int_equal(quota.memory_bytes, 512u << 20); /* the other limits kept */
  fields = json_pack("{s:s}", "egress_bytes", "lots");
  assert_int_equal(control_quota_set(store, "code-execution", fields, &err), -EINVAL);
  assert_non_null(strstr(err.message, "--egress-bytes"));
  json_decref(fields);
  control_quota_get(store, "code-execution", &quota);
  assert_int_equal(quota.egress_bytes, 64u << 20);
  fields = json_pack("{s:s}", "egress_bytes", "0");
  assert_int_equal(control_quota_set(store, "code-execution", fields, &err), 0);
  json_decref(fields);
  control_quota_get(store, "code-execution", &quota);
  assert_int_equal(quota.egress_bytes, 0);
  control_store_close(store);
}

/* Every whole-number and size field of a quota: its edges are stored, one past an edge is refused with
 * the field's flag named, and a refusal changes nothing. */
static void test_quota_bounds(void **state) {
  (void)state;
  control_store *store = open_store();
  struct field_case {
    const char *key, *value, *flag; /* value as the CLI sends it */
    size_t offset;                  /* of the uint64_t it sets in struct control_quota */
    uint64_t expected;              /* 0 with flag set: refused */
  };
#define FIELD(member) offsetof(struct control_quota, member)
  static const struct field_case cases[] = {
      {"concurrency", "0", NULL, FIELD(concurrency), 0},
      {"concurrency", "4096", NULL, FIELD(concurrency), 4096},
      {"concurrency", "4097", "--concurrency", FIELD(concurrency), 0},
      {"concurrency", "3x", "--concurrency", FIELD(concurrency), 0},
      {"tasks", "100000", NULL, FIELD(tasks), 100000},
      {"tasks", "-1", "--tasks", FIELD(tasks), 0},
      {"sessions", "1024", NULL, FIELD(sessions), 1024},
      {"sessions", "1025", "--sessions", FIELD(sessions), 0},
      {"snapshots", "0", NULL, FIELD(snapshots), 0},
      {"snapshots", "2000", "--snapshots", FIELD(snapshots), 0},
      {"pids", "1", NULL, FIELD(pids), 1},
      {"pids", "0", "--pids", FIELD(pids), 0},
      {"pids", "1000001", "--pids", FIELD(pids), 0},
      {"session_pids", "0", NULL, FIELD(session_pids), 0},
      {"mcp_output_limit", "0", NULL, FIELD(mcp_output_bytes), 0},
      {"mcp_output_limit", "1K", NULL, FIELD(mcp_output_bytes), 1024},
      {"mcp_output_limit", "64M", NULL, FIELD(mcp_output_bytes), 64u << 20},
      {"mcp_output_limit", "1023", "--mcp-output-limit", FIELD(mcp_output_bytes), 0},
      {"mcp_output_limit", "65M", "--mcp-output-limit", FIELD(mcp_output_bytes), 0},
      {"snapshot_bytes", "1K", NULL, FIELD(snapshot_bytes), 1024},
      {"snapshot_bytes", "1000", "--snapshot-bytes", FIELD(snapshot_bytes), 0},
      {"session_memory", "1M", NULL, FIELD(session_memory_bytes), 1u << 20},
      {"session_memory", "1000000", "--session-memory", FIELD(session_memory_bytes), 0},
      {"egress_bytes", "1", NULL, FIELD(egress_bytes), 1},
      {"workspace_size", "0", "--workspace-size", FIELD(workspace_bytes), 0},
      {"output_limit", "lots", "--output-limit", FIELD(output_bytes), 0},
      {"timeout", "86400", NULL, FIELD(timeout_ms), 86400000},
      {"timeout", "86401", "--timeout", FIELD(timeout_ms), 0},
      {"session_idle", "90", NULL, FIELD(session_idle_ms), 90000},
      {"session_lifetime", "0", "--session-lifetime", FIELD(session_lifetime_ms), 0},
  };
#undef FIELD
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const struct field_case *c = &cases[i];
    struct control_quota before, after;
    control_quota_get(store, "code-execution", &before);
    json_t *fields = json_pack("{s:s}", c->key, c->value);
    dome_error err = {0};
    int rc = control_quota_set(store, "code-execution", fields, &err);
    json_decref(fields);
    control_quota_get(store, "code-execution", &after);
    uint64_t stored;
    memcpy(&stored, (const char *)&after + c->offset, sizeof stored);
    if (c->flag) {
      if (rc != -EINVAL || strstr(err.message, c->flag) == NULL ||
          memcmp(&before, &after, sizeof before) != 0)
        fail_msg("%s=%s: expected a refusal naming %s with nothing changed, got %d `%s`", c->key, c->value,
                 c->flag, rc, err.message);
    } else if (rc != 0 || stored != c->expected) {
      fail_msg("%s=%s: expected %llu stored, got %d `%s` and %llu", c->key, c->value,
               (unsigned long long)c->expected, rc, err.message, (unsigned long long)stored);
    }
  }
  control_store_close(store);
}

static void test_tools_and_parsers(void **state) {
  (void)state;
  control_store *store = open_store();
  dome_error err = {0};
  json_t *classification = NULL;
  assert_int_equal(control_parse_field_classification("output_paths=SENSITIVE,env_vars=SENSITIVE,stderr=PII",
                                                      &classification, &err),
                   0);
  assert_string_equal(json_string_value(json_object_get(classification, "stderr")), "PII");
  json_t *bad = NULL;
  assert_int_equal(control_parse_field_classification("stderr=pii", &bad, &err), -EINVAL);
  assert_int_equal(control_parse_field_classification("stderr", &bad, &err), -EINVAL);
  json_t *env = NULL;
  assert_int_equal(control_parse_env_file("# c\nexport A=1\nB=\"two words\"\n\n", &env, &err), 0);
  assert_string_equal(json_string_value(json_object_get(env, "B")), "two words");
  json_decref(env);
  assert_int_equal(control_parse_env_file("A=1\n1BAD=2\n", &env, &err), -EINVAL);
  assert_non_null(strstr(err.message, "line 2"));

  json_t *tool =
      json_pack("{s:s,s:s,s:s,s:s,s:o}", "name", "code-sandbox", "url", "https://sandbox.internal:8443",
                "protocol", "streamable-http", "gateway", "Default", "field_classification", classification);
  assert_int_equal(control_tool_add(store, tool, "API_KEY=sk-secret-value-123\n", &err), 0);
  json_t *listed = control_tool_list(store);
  char *text = json_dumps(listed, 0);
  assert_null(strstr(text, "sk-secret-value-123"));
  assert_non_null(strstr(text, "API_KEY"));
  free(text);
  json_decref(listed);
  json_t *secrets = control_tool_secret_env(store, "code-sandbox");
  assert_string_equal(json_string_value(json_object_get(secrets, "API_KEY")), "sk-secret-value-123");
  json_decref(secrets);
  json_object_set_new(tool, "url", json_string("ftp://x"));
  assert_int_equal(control_tool_add(store, tool, NULL, &err), -EINVAL);
  json_decref(tool);
  assert_int_equal(control_tool_remove(store, "code-sandbox", &err), 0);
  assert_int_equal(control_tool_remove(store, "code-sandbox", &err), -ENOENT);
  control_store_close(store);
}

static void test_rules_versions(void **state) {
  (void)state;
  control_store *store = open_store();
  dome_error err = {0};
  assert_int_equal(control_rules_active(store), 0);
  assert_null(control_rules_text(store, 0, &err));
  int v1 = control_rules_store(store, "first", "permit(principal, action, resource);\n", &err);
  assert_int_equal(v1, 1);
  assert_int_equal(control_rules_active(store), 0); /* stored, not yet active */
  assert_int_equal(control_rules_activate(store, v1, &err), 0);
  int v2 = control_rules_store(store, "second", "forbid(principal, action, resource);\n", &err);
  assert_int_equal(v2, 2);
  assert_int_equal(control_rules_activate(store, v2, &err), 0);
  assert_int_equal(control_rules_activate(store, 9, &err), -ENOENT);
  control_store_close(store);
  store = open_store();
  assert_int_equal(control_rules_active(store), 2);
  char *text = control_rules_text(store, 0, &err);
  assert_non_null(text);
  assert_non_null(strstr(text, "forbid"));
  free(text);
  json_t *list = control_rules_list(store);
  assert_int_equal(json_array_size(list), 2);
  assert_true(json_is_true(json_object_get(json_array_get(list, 1), "active")));
  assert_false(json_is_true(json_object_get(json_array_get(list, 0), "active")));
  json_decref(list);
  control_store_close(store);
}

static void test_delegation(void **state) {
  (void)state;
  control_store *store = open_store();
  dome_error err = {0};
  char parent_token[CONTROL_TOKEN_SIZE], token[CONTROL_TOKEN_SIZE], act_token[CONTROL_TOKEN_SIZE];
  assert_int_equal(control_agent_register(store, "alice", "code-execution", parent_token, &err), 0);
  assert_int_equal(
      control_agent_register_delegate(store, "helper", "code-execution", "alice", 0, token, &err), 0);
  json_t *record = control_agent_authenticate(store, token, &err);
  assert_non_null(record);
  assert_string_equal(json_string_value(json_object_get(record, "delegates_to")), "alice");
  assert_null(json_object_get(record, "act_as"));
  json_decref(record);
  /* refused: unknown parent, itself, a delegate as parent (no chains); nothing is stored */
  assert_int_equal(control_agent_register_delegate(store, "x", "", "nobody", 0, token, &err), -ENOENT);
  assert_non_null(strstr(err.message, "--delegates-to"));
  assert_int_equal(control_agent_register_delegate(store, "y", "", "y", 0, token, &err), -EINVAL);
  assert_int_equal(control_agent_register_delegate(store, "z", "", "helper", 0, token, &err), -EINVAL);
  assert_non_null(strstr(err.message, "itself a delegate"));
  assert_null(control_agent_get(store, "x"));
  assert_null(control_agent_get(store, "z"));
  assert_int_equal(control_agent_set_member(store, "helper", "delegates_to", NULL, &err), -EINVAL);

  /* --act-as tokens: an extra token bound to the parent; the agent's own token keeps working */
  char own[CONTROL_TOKEN_SIZE];
  assert_int_equal(control_agent_register(store, "bob", "", own, &err), 0);
  assert_int_equal(control_agent_delegated_token(store, "bob", "alice", 0, act_token, &err), 0);
  record = control_agent_authenticate(store, act_token, &err);
  assert_non_null(record);
  assert_string_equal(json_string_value(json_object_get(record, "name")), "bob");
  assert_string_equal(json_string_value(json_object_get(record, "act_as")), "alice");
  json_t *listed = json_object_get(record, "delegated_tokens");
  assert_int_equal(json_array_size(listed), 1);
  assert_null(json_object_get(json_array_get(listed, 0), "token_hash"));
  json_decref(record);
  record = control_agent_authenticate(store, own, &err);
  assert_non_null(record);
  assert_null(json_object_get(record, "act_as"));
  json_decref(record);
  assert_int_equal(control_agent_delegated_token(store, "bob", "bob", 0, token, &err), -EINVAL);
  assert_int_equal(control_agent_delegated_token(store, "bob", "nobody", 0, token, &err), -ENOENT);
  assert_int_equal(control_agent_delegated_token(store, "bob", "helper", 0, token, &err), -EINVAL);
  assert_int_equal(control_agent_delegated_token(store, "helper", "bob", 0, token, &err), -EINVAL);
  assert_non_null(strstr(err.message, "acts only as `alice`"));
  assert_int_equal(control_agent_delegated_token(store, "nobody", "alice", 0, token, &err), -ENOENT);
  /* a second token for the same identity replaces the first */
  char second[CONTROL_TOKEN_SIZE];
  assert_int_equal(control_agent_delegated_token(store, "bob", "alice", 0, second, &err), 0);
  assert_null(control_agent_authenticate(store, act_token, &err));
  record = control_agent_authenticate(store, second, &err);
  assert_non_null(record);
  json_decref(record);
  /* rotating the agent's token retires its delegated tokens */
  assert_int_equal(control_agent_rotate_token(store, "bob", 0, own, &err), 0);
  assert_null(control_agent_authenticate(store, second, &err));
  control_store_close(store);
}

/* Registering a name taken says what to do instead: a new token for a live agent, another name for a
 * revoked one (its name is never reused). */
static void test_register_existing(void **state) {
  (void)state;
  control_store *store = open_store();
  dome_error err = {0};
  char token[CONTROL_TOKEN_SIZE];
  assert_int_equal(control_agent_register(store, "taken", "code-execution", token, &err), 0);
  assert_int_equal(control_agent_register(store, "taken", "code-execution", token, &err), -EEXIST);
  assert_string_equal(err.message,
                      "agent `taken` already exists; for a new token: dome agents token --name taken");
  assert_int_equal(control_agent_set_status(store, "taken", "suspended", &err), 0);
  assert_int_equal(control_agent_register(store, "taken", "", token, &err), -EEXIST);
  assert_non_null(strstr(err.message, "dome agents token --name taken"));
  assert_int_equal(control_agent_set_status(store, "taken", "revoked", &err), 0);
  assert_int_equal(control_agent_register(store, "taken", "", token, &err), -EEXIST);
  assert_string_equal(
      err.message,
      "agent `taken` already exists and is revoked (the name stays taken); register another name");
  control_store_close(store);
}

static void test_operators(void **state) {
  (void)state;
  control_store *store = open_store();
  dome_error err = {0};
  char token[CONTROL_TOKEN_SIZE], second[CONTROL_TOKEN_SIZE];
  assert_int_equal(control_operator_add(store, "alice", "auditor", token, &err), 0);
  assert_true(strncmp(token, "domeop_", 7) == 0 && strlen(token) == 50);
  assert_int_equal(control_operator_add(store, "alice", "operator", second, &err), -EEXIST);
  assert_int_equal(control_operator_add(store, "bob", "admin", second, &err), -EINVAL);
  assert_non_null(strstr(err.message, "--role"));
  assert_int_equal(control_operator_add(store, "bad name", "auditor", second, &err), -EINVAL);
  assert_int_equal(control_operator_add(store, "bob", "operator", second, &err), 0);
  json_t *found = control_operator_authenticate(store, second, &err);
  assert_non_null(found);
  assert_string_equal(json_string_value(json_object_get(found, "name")), "bob");
  assert_string_equal(json_string_value(json_object_get(found, "role")), "operator");
  assert_null(json_object_get(found, "token_hash"));
  json_decref(found);
  /* an agent-shaped token, a wrong one, none */
  assert_null(control_operator_authenticate(store, "dome_abc", &err));
  assert_null(control_operator_authenticate(store, "domeop_wrong", &err));
  assert_null(control_operator_authenticate(store, NULL, &err));
  /* durable: a reopened store knows them; only hashes are on disk */
  control_store_close(store);
  store = open_store();
  char path[256];
  snprintf(path, sizeof path, "%s/operators.json", directory);
  FILE *file = fopen(path, "r");
  assert_non_null(file);
  char text[4096] = "";
  size_t n = fread(text, 1, sizeof text - 1, file);
  fclose(file);
  text[n] = '\0';
  assert_null(strstr(text, token + 7));
  assert_non_null(strstr(text, "token_hash"));
  found = control_operator_authenticate(store, token, &err);
  assert_non_null(found);
  json_decref(found);
  json_t *list = control_operator_list(store);
  assert_int_equal(json_array_size(list), 2);
  json_decref(list);
  assert_int_equal(control_operator_revoke(store, "alice", &err), 0);
  assert_null(control_operator_authenticate(store, token, &err));
  assert_non_null(strstr(err.message, "revoked"));
  assert_int_equal(control_operator_revoke(store, "nobody", &err), -ENOENT);
  assert_int_equal(control_operator_add(store, "alice", "auditor", second, &err), -EEXIST);
  control_store_close(store);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_agent_tokens, setup, teardown),
      cmocka_unit_test_setup_teardown(test_quotas, setup, teardown),
      cmocka_unit_test_setup_teardown(test_quota_bounds, setup, teardown),
      cmocka_unit_test_setup_teardown(test_tools_and_parsers, setup, teardown),
      cmocka_unit_test_setup_teardown(test_rules_versions, setup, teardown),
      cmocka_unit_test_setup_teardown(test_delegation, setup, teardown),
      cmocka_unit_test_setup_teardown(test_register_existing, setup, teardown),
      cmocka_unit_test_setup_teardown(test_operators, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
