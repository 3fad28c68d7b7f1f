/* supervisor/gateway without a network: SSE parsing, auth headers, exposed names, grants, delegation,
 * the Cedar entities under the real engine and schema, and result redaction. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "policy/cedar.h"
#include "policy/schema/schema.h"
#include "supervisor/gateway/gateway.h"
#include "supervisor/guards/guard.h"

/* ---- SSE ---- */

struct events {
  char text[4096];
  int count;
};

static int collect(void *context, const char *type, const char *data, size_t length) {
  struct events *events = context;
  size_t used = strlen(events->text);
  snprintf(events->text + used, sizeof events->text - used, "[%s|%.*s]", type, (int)length, data);
  events->count++;
  return 0;
}

static const char stream[] =
    "\xEF\xBB\xBF: comment\r\n"
    "event: message\r\ndata: {\"a\":1}\r\n\r\n"
    "data: line1\ndata:line2\n\n"
    "id: 7\rdata: cr\r\r"
    "event: other\ndata\n\n"
    "retry: 10\nunknown: x\n\n"
    "data: unterminated";

static void test_sse_any_chunking(void **state) {
  (void)state;
  const char *expected = "[message|{\"a\":1}][message|line1\nline2][message|cr][other|]";
  for (size_t chunk = 1; chunk <= sizeof stream; chunk++) {
    struct events events = {0};
    struct gateway_sse *sse = gateway_sse_new(0, collect, &events);
    assert_non_null(sse);
    for (size_t offset = 0; offset < sizeof stream - 1; offset += chunk) {
      size_t length = sizeof stream - 1 - offset < chunk ? sizeof stream - 1 - offset : chunk;
      assert_int_equal(gateway_sse_feed(sse, stream + offset, length), 0);
    }
    assert_string_equal(events.text, expected);
    assert_int_equal(events.count, 4); /* the unterminated event is never dispatched */
    assert_string_equal(gateway_sse_last_event_id(sse), "7");
    gateway_sse_free(sse);
  }
}

static int stop_at_first(void *context, const char *type, const char *data, size_t length) {
  (void)type, (void)data, (void)length;
  ++*(int *)context;
  return 1;
}

static void test_sse_bounds_and_stop(void **state) {
  (void)state;
  struct events events = {0};
  struct gateway_sse *sse = gateway_sse_new(16, collect, &events);
  assert_int_equal(gateway_sse_feed(sse, "data: 0123456789\n", 17), 0);
  assert_int_equal(gateway_sse_feed(sse, "data: 0123456789\n", 17), -EMSGSIZE); /* event over 16 bytes */
  gateway_sse_free(sse);
  sse = gateway_sse_new(16, collect, &events);
  char line[40];
  memset(line, 'x', sizeof line);
  assert_int_equal(gateway_sse_feed(sse, line, sizeof line), -EMSGSIZE); /* endless line */
  gateway_sse_free(sse);
  int calls = 0;
  sse = gateway_sse_new(0, stop_at_first, &calls);
  assert_int_equal(gateway_sse_feed(sse, "data: a\n\ndata: b\n\n", 18), 1);
  assert_int_equal(calls, 1);
  gateway_sse_free(sse);
}

/* ---- auth header, names, registry entries ---- */

static void test_auth_header(void **state) {
  (void)state;
  dome_error err;
  assert_int_equal(gateway_auth_header_check("Authorization: Bearer abc\n", &err), 0);
  assert_int_equal(gateway_auth_header_check("X-Api-Key: k1", &err), 0);
  assert_int_equal(gateway_auth_header_check("no colon here", &err), -EINVAL);
  assert_non_null(strstr(err.message, "--auth-header-file"));
  assert_int_equal(gateway_auth_header_check("Bad Name: v", &err), -EINVAL);
  assert_int_equal(gateway_auth_header_check("A: v\nB: w\n", &err), -EINVAL);
  assert_int_equal(gateway_auth_header_check("A:   \n", &err), -EINVAL);
  assert_int_equal(gateway_auth_header_check("Mcp-Session-Id: x", &err), -EINVAL);
  assert_int_equal(gateway_auth_header_check("A: caf\xc3\xa9", &err), -EINVAL);
  struct guard_secret secrets[2];
  assert_int_equal(gateway_auth_header_secrets("Authorization: Bearer tok-123\r\n", secrets), 2);
  assert_int_equal(secrets[0].length, strlen("Bearer tok-123"));
  assert_memory_equal(secrets[0].value, "Bearer tok-123", secrets[0].length);
  assert_memory_equal(secrets[1].value, "tok-123", secrets[1].length);
  assert_int_equal(secrets[1].length, 7);
  assert_int_equal(gateway_auth_header_secrets("X-Api-Key: k1", secrets), 1);
}

static void test_names(void **state) {
  (void)state;
  char name[GATEWAY_TOOL_NAME_MAX + 1];
  assert_true(gateway_exposed_name("github", "create_issue", name));
  assert_string_equal(name, "github.create_issue");
  assert_false(gateway_exposed_name("github", "bad name", name));
  assert_false(gateway_exposed_name("github", "", name));
  char long_tool[130];
  memset(long_tool, 'a', 122);
  long_tool[122] = '\0';
  assert_false(gateway_exposed_name("github", long_tool, name)); /* 6 + 1 + 122 > 128 */
  long_tool[121] = '\0';
  assert_true(gateway_exposed_name("github", long_tool, name));

  json_t *entries = json_loads(
      "[{\"name\":\"code-sandbox\",\"url\":\"\",\"builtin\":true},"
      "{\"name\":\"db\",\"url\":\"http://a/mcp\",\"protocol\":\"streamable-http\"},"
      "{\"name\":\"db.v2\",\"url\":\"http://b/mcp\"},"
      "{\"name\":\"local\",\"url\":\"http://c/mcp\",\"builtin\":true}]",
      0, NULL);
  char tool[GATEWAY_TOOL_NAME_MAX + 1];
  json_t *entry = gateway_registry_resolve(entries, "db.query", tool);
  assert_non_null(entry);
  assert_string_equal(json_string_value(json_object_get(entry, "name")), "db");
  assert_string_equal(tool, "query");
  entry = gateway_registry_resolve(entries, "db.v2.query", tool); /* the longest backend name wins */
  assert_string_equal(json_string_value(json_object_get(entry, "name")), "db.v2");
  assert_string_equal(tool, "query");
  assert_null(gateway_registry_resolve(entries, "local.x", tool)); /* built-in: not forwarded */
  assert_null(gateway_registry_resolve(entries, "code-sandbox.execute_code", tool));
  assert_null(gateway_registry_resolve(entries, "db.", tool));
  assert_null(gateway_registry_resolve(entries, "nosuch.x", tool));
  json_decref(entries);

  json_t *with =
      json_loads("{\"field_classification\":{\"address\":\"SENSITIVE\",\"email\":\"PII\"}}", 0, NULL);
  char *text = gateway_classification_text(with);
  assert_true(strcmp(text, "address=SENSITIVE,email=PII") == 0 ||
              strcmp(text, "email=PII,address=SENSITIVE") == 0);
  free(text);
  json_decref(with);
  text = gateway_classification_text(NULL);
  assert_string_equal(text, "");
  free(text);
}

/* ---- grants and delegation ---- */

static void test_grants_and_delegation(void **state) {
  (void)state;
  json_t *legacy = json_loads("{\"name\":\"a\",\"capabilities\":[\"x\"],\"status\":\"active\"}", 0, NULL);
  json_t *scoped = json_loads(
      "{\"name\":\"b\",\"capabilities\":[\"x\",\"y\"],\"gateways\":[\"Ops\"],"
      "\"delegates_to\":\"a\",\"status\":\"active\"}",
      0, NULL);
  json_t *parent = json_loads(
      "{\"name\":\"p\",\"capabilities\":[\"y\"],\"gateways\":[\"Default\",\"Ops\"],"
      "\"status\":\"active\"}",
      0, NULL);
  json_t *delegate = json_loads(
      "{\"name\":\"d\",\"capabilities\":[\"x\",\"y\"],\"gateways\":[\"Default\",\"Ops\","
      "\"Admin\"],\"delegates_to\":\"p\",\"status\":\"active\"}",
      0, NULL);
  assert_true(gateway_agent_granted(legacy, "Default")); /* absent list: Default */
  assert_false(gateway_agent_granted(legacy, "Ops"));
  assert_true(gateway_agent_granted(scoped, "Ops"));
  assert_false(gateway_agent_granted(scoped, "Default"));
  dome_error err;
  assert_int_equal(gateway_delegation_check(delegate, parent, "p", &err), 0);
  assert_int_equal(gateway_delegation_check(delegate, parent, NULL, &err), 0);
  assert_int_equal(gateway_delegation_check(legacy, parent, "p", &err), -EPERM); /* not its delegate */
  assert_non_null(strstr(err.message, "may not act as"));
  assert_int_equal(gateway_delegation_check(delegate, NULL, "p", &err), -EPERM); /* unknown parent */
  json_object_set_new(parent, "status", json_string("suspended"));
  assert_int_equal(gateway_delegation_check(delegate, parent, "p", &err), -EPERM);
  json_object_set_new(parent, "status", json_string("active"));
  json_t *grants, *capabilities;
  gateway_delegation_effective(delegate, parent, &grants, &capabilities);
  assert_int_equal(json_array_size(grants), 2); /* Admin is the delegate's own: never exceeded */
  assert_false(json_string_value(json_array_get(grants, 0))[0] == 'A');
  assert_false(json_string_value(json_array_get(grants, 1))[0] == 'A');
  assert_int_equal(json_array_size(capabilities), 1);
  assert_string_equal(json_string_value(json_array_get(capabilities, 0)), "y");
  json_decref(grants);
  json_decref(capabilities);
  gateway_delegation_effective(delegate, NULL, &grants, &capabilities);
  assert_int_equal(json_array_size(grants), 3);
  json_decref(grants);
  json_decref(capabilities);
  /* effective grants: a delegated call needs the gateway on both records */
  assert_true(gateway_delegation_granted(delegate, parent, "Ops"));
  assert_false(gateway_delegation_granted(delegate, parent, "Admin")); /* only the delegate holds it */
  assert_true(gateway_delegation_granted(delegate, NULL, "Admin"));
  assert_false(gateway_delegation_granted(NULL, parent, "Ops"));

  /* resolve: a delegate is bound to its parent; others may not send X-Dome-Act-As */
  const char *actas = "unset";
  assert_int_equal(gateway_delegation_resolve(delegate, NULL, &actas, &err), 0);
  assert_string_equal(actas, "p"); /* no header: still on behalf of p */
  assert_int_equal(gateway_delegation_resolve(delegate, "p", &actas, &err), 0);
  assert_string_equal(actas, "p");
  assert_int_equal(gateway_delegation_resolve(delegate, "a", &actas, &err), -EPERM);
  assert_non_null(strstr(err.message, "acts only as `p`"));
  assert_int_equal(gateway_delegation_resolve(legacy, "", &actas, &err), 0);
  assert_null(actas);
  assert_int_equal(gateway_delegation_resolve(legacy, "p", &actas, &err), -EPERM);
  assert_non_null(strstr(err.message, "agent `a` may not act as `p`"));
  /* a token minted with --act-as: control_agent_authenticate adds act_as to the record */
  json_object_set_new(legacy, "act_as", json_string("p"));
  assert_int_equal(gateway_delegation_resolve(legacy, NULL, &actas, &err), 0);
  assert_string_equal(actas, "p");
  assert_int_equal(gateway_delegation_check(legacy, parent, "p", &err), 0);
  assert_int_equal(gateway_delegation_resolve(legacy, "q", &actas, &err), -EPERM);
  json_decref(legacy);
  json_decref(scoped);
  json_decref(parent);
  json_decref(delegate);
}

/* ---- Cedar: the entities under the engine and the Dome schema ---- */

static cedar_schema *schema;

static char *slurp(const char *path) {
  FILE *file = fopen(path, "re");
  assert_non_null(file);
  char *text = calloc(1, 1 << 16);
  size_t n = fread(text, 1, (1 << 16) - 1, file);
  text[n] = '\0';
  fclose(file);
  return text;
}

static bool authorize(const char *rules, json_t *grants, const char *tool, const char *actas) {
  cedar_policy_set *set = NULL;
  cedar_diagnostic diag;
  memset(&diag, 0, sizeof diag);
  assert_int_equal(cedar_policy_set_parse(rules, strlen(rules), "rules.cedar", 0, &set, &diag), 0);
  json_t *capabilities = json_pack("[s]", "code-execution");
  json_t *entities =
      gateway_cedar_entities("agent-1", capabilities, grants, "ext", "streamable-http", NULL, "Default");
  char *text = json_dumps(entities, JSON_COMPACT);
  cedar_entities *parsed = NULL;
  int rc = cedar_entities_parse_json(text, strlen(text), "entities", schema, &parsed, &diag);
  if (rc < 0) fprintf(stderr, "entities: %s\n", diag.message);
  assert_int_equal(rc, 0);
  json_t *context_json =
      json_pack("{s:s,s:{},s:{s:i,s:s}}", "tool", tool, "input", "risk", "alerts", 0, "max_level", "none");
  if (actas) json_object_set_new(context_json, "actas", json_string(actas));
  char *context_text = json_dumps(context_json, JSON_COMPACT);
  cedar_uid_ref action = {"Dome::Action", "mcp:call", 0};
  cedar_context *context = NULL;
  assert_int_equal(cedar_context_parse_json(context_text, strlen(context_text), "context", schema, &action,
                                            &context, &diag),
                   0);
  cedar_request request = {{"Dome::Agent", "agent-1", 0}, action, {"Dome::MCPTool", "ext", 0}, context};
  cedar_response response;
  memset(&response, 0, sizeof response);
  assert_int_equal(cedar_authorize(set, parsed, &request, &response), 0);
  bool allow = response.decision == CEDAR_ALLOW;
  cedar_response_release(&response);
  cedar_context_free(context);
  cedar_entities_free(parsed);
  cedar_policy_set_free(set);
  free(text);
  free(context_text);
  json_decref(context_json);
  json_decref(entities);
  json_decref(capabilities);
  return allow;
}

static void test_cedar_entities(void **state) {
  (void)state;
  char *schema_text = slurp("policy/schema/dome.cedarschema");
  cedar_schema_error schema_error;
  memset(&schema_error, 0, sizeof schema_error);
  assert_int_equal(
      cedar_schema_parse(schema_text, strlen(schema_text), "dome.cedarschema", &schema, &schema_error), 0);
  free(schema_text);
  const char *rules =
      "permit(principal in Dome::Gateway::\"Default\", action == Dome::Action::\"mcp:call\", resource in "
      "Dome::Gateway::\"Default\") when { context.tool == \"add\" };\n"
      "forbid(principal, action, resource == Dome::MCPTool::\"ext\") when { context.tool == \"echo_config\" "
      "};\n"
      "permit(principal in Dome::Gateway::\"Ops\", action == Dome::Action::\"mcp:call\", resource) when { "
      "context "
      "has actas && context.actas == \"parent\" };\n";
  json_t *default_only = json_pack("[s]", "Default"), *ops_only = json_pack("[s]", "Ops"),
         *both = json_pack("[s,s,s]", "Default", "Ops", "Default");
  assert_true(authorize(rules, default_only, "add", NULL));
  assert_false(authorize(rules, default_only, "echo_config", NULL)); /* forbidden tool of the backend */
  assert_false(authorize(rules, ops_only, "add", NULL));             /* no Default grant */
  assert_true(authorize(rules, ops_only, "other", "parent"));        /* actas reaches Cedar's context */
  assert_false(authorize(rules, ops_only, "other", "someone"));
  assert_true(authorize(rules, both, "add", NULL)); /* duplicate grants are listed once */
  json_decref(default_only);
  json_decref(ops_only);
  json_decref(both);
  cedar_schema_free(schema);
  schema = NULL;
}

/* ---- redaction ---- */

static void test_redact_result(void **state) {
  (void)state;
  const char *classification = "address=SENSITIVE,email=PII";
  struct guard_secret secrets[2];
  size_t count = gateway_auth_header_secrets("Authorization: Bearer s3cr3t-Value-987654", secrets);
  struct guard_options options = {
      .classification = classification, .secrets = secrets, .secret_count = count};
  struct guard *guard = NULL;
  dome_error err;
  assert_int_equal(guard_create(&options, &guard, &err), 0);
  json_t *result = json_loads(
      "{\"content\":[{\"type\":\"text\",\"text\":\"key s3cr3t-Value-987654 at 10.1.2.3 mail "
      "bob@example.com\"},{\"type\":\"image\",\"data\":\"AAAA\"}],"
      "\"structuredContent\":{\"address\":\"10.1.2.3\",\"email\":\"bob@example.com\","
      "\"note\":\"10.1.2.4\",\"key\":\"s3cr3t-Value-987654\"}}",
      0, NULL);
  struct guard_findings findings = {0};
  assert_int_equal(gateway_redact_result(guard, classification, result, &findings, &err), 0);
  char *text = json_dumps(result, JSON_COMPACT);
  assert_null(strstr(text, "s3cr3t-Value"));
  assert_null(strstr(text, "bob@example.com"));
  assert_null(strstr(text, "10.1.2.3"));
  json_t *structured = json_object_get(result, "structuredContent");
  assert_string_equal(json_string_value(json_object_get(structured, "note")), "10.1.2.4"); /* PUBLIC field */
  assert_true(findings.count >= 6);
  free(text);
  guard_findings_free(&findings);
  char *out = NULL;
  /* "content" named by the classification: only its class applies */
  assert_int_equal(gateway_redact_text(guard, "content=PII", "at 10.1.2.3 bob@example.com", &out, NULL, &err),
                   0);
  assert_null(strstr(out, "bob@example.com"));
  free(out);
  assert_int_equal(gateway_redact_text(guard, "bad classification", "x", &out, NULL, &err), -EINVAL);
  json_decref(result);
  guard_free(guard);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_sse_any_chunking),      cmocka_unit_test(test_sse_bounds_and_stop),
      cmocka_unit_test(test_auth_header),           cmocka_unit_test(test_names),
      cmocka_unit_test(test_grants_and_delegation), cmocka_unit_test(test_cedar_entities),
      cmocka_unit_test(test_redact_result),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
