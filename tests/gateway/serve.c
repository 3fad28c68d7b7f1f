/* `dome-gateway-harness serve`: a gateway front end built only from dome's libraries — the MCP server
 * (supervisor/mcp), the gateway (supervisor/gateway), Cedar (policy/cedar.h), guards and the journal —
 * the way domed is to route external backends. Used by tests/gateway/test_gateway_endpoint and
 * scripts/bench-gateway until domed itself routes to the gateway library.
 *
 *   serve BACKEND_URL AUTH_FILE AGENTS_JSON RULES_FILE JOURNAL_DIR CLASSIFICATION
 * AGENTS_JSON: {"<bearer token>": {name, capabilities, gateways?, delegates_to?, status?}, ...}.
 * The backend is registered as `ext` on gateway Default. Prints {"port": N}; runs until stdin closes. */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "policy/cedar.h"
#include "policy/schema/schema.h"
#include "supervisor/audit/journal.h"
#include "supervisor/gateway/gateway.h"
#include "supervisor/guards/guard.h"
#include "supervisor/mcp/mcp.h"

struct front {
  json_t *agents;  /* token -> agent record */
  json_t *entries; /* registry entries */
  char *auth_header;
  char *classification;
  gateway_registry *registry;
  cedar_schema *schema;
  cedar_policy_set *rules;
  struct guard *guard;
  journal *journal;
};

static char *slurp(const char *path) {
  if (strcmp(path, "-") == 0) return NULL;
  FILE *file = fopen(path, "re");
  if (file == NULL) {
    fprintf(stderr, "serve: %s: %s\n", path, strerror(errno));
    exit(2);
  }
  char *text = calloc(1, 1 << 20);
  size_t n = fread(text, 1, (1 << 20) - 1, file);
  text[n] = '\0';
  fclose(file);
  return text;
}

static uint64_t journal_event(struct front *front, json_t *event) {
  uint64_t seq = 0;
  dome_error err;
  if (journal_append(front->journal, event, &seq, &err) < 0)
    fprintf(stderr, "serve: journal: %s\n", err.message);
  json_decref(event);
  return seq;
}

static json_t *agent_by_name(struct front *front, const char *name) {
  const char *token;
  json_t *agent;
  json_object_foreach(front->agents, token, agent) {
    const char *agent_name = json_string_value(json_object_get(agent, "name"));
    if (agent_name && strcmp(agent_name, name) == 0) return agent;
  }
  return NULL;
}

static json_t *agent_by_identity(struct front *front, const mcp_identity *identity) {
  return agent_by_name(front, identity->agent);
}

static int authenticate(void *context, const char *token, mcp_identity *identity, dome_error *err) {
  struct front *front = context;
  json_t *agent = token ? json_object_get(front->agents, token) : NULL;
  if (agent == NULL) return dome_error_set(err, EACCES, "invalid bearer token");
  snprintf(identity->agent, sizeof identity->agent, "%s", json_string_value(json_object_get(agent, "name")));
  /* As domed: a delegate is bound to its parent (header absent or naming it); others may not send one. */
  const char *actas = NULL;
  json_t *parent = NULL;
  int rc = gateway_delegation_resolve(agent, identity->actas, &actas, err);
  if (rc == 0 && actas) {
    if (actas != identity->actas) snprintf(identity->actas, sizeof identity->actas, "%s", actas);
    parent = agent_by_name(front, identity->actas);
    rc = gateway_delegation_check(agent, parent, identity->actas, err);
  }
  json_t *grants = NULL, *capabilities = NULL;
  if (rc == 0) {
    gateway_delegation_effective(agent, parent, &grants, &capabilities);
    bool granted = false;
    size_t i;
    json_t *grant;
    json_array_foreach(grants, i, grant) granted |= strcmp(json_string_value(grant), identity->gateway) == 0;
    if (!granted)
      rc = dome_error_set(err, EPERM, "agent `%s` is not granted gateway `%s`", identity->agent,
                          identity->gateway);
  }
  if (rc < 0) {
    json_t *event = json_pack("{s:s,s:s,s:s,s:s,s:s}", "type", "gateway.access", "agent", identity->agent,
                              "gateway", identity->gateway, "decision", "deny", "reason", err->message);
    if (identity->actas[0]) json_object_set_new(event, "actas", json_string(identity->actas));
    journal_event(front, event);
  }
  json_decref(grants);
  json_decref(capabilities);
  return rc < 0 ? -EPERM : 0;
}

/* Cedar decision for one mcp:* request (fail closed). */
static bool authorize(struct front *front, const mcp_identity *identity, const char *action, json_t *entry,
                      const char *tool, json_t *determining) {
  json_t *agent = agent_by_identity(front, identity);
  json_t *parent = identity->actas[0] ? agent_by_name(front, identity->actas) : NULL;
  json_t *grants, *capabilities;
  gateway_delegation_effective(agent, parent, &grants, &capabilities);
  const char *backend = json_string_value(json_object_get(entry, "name"));
  json_t *entities = gateway_cedar_entities(identity->agent, capabilities, grants, backend, "streamable-http",
                                            json_string_value(json_object_get(entry, "capability")),
                                            json_string_value(json_object_get(entry, "gateway")));
  char *entities_text = json_dumps(entities, JSON_COMPACT);
  json_t *context_json = json_pack("{s:s,s:{},s:{s:i,s:s}}", "tool", tool, "input", "risk", "alerts", 0,
                                   "max_level", "none"); /* this front end keeps no anomaly record */
  if (identity->actas[0]) json_object_set_new(context_json, "actas", json_string(identity->actas));
  char *context_text = json_dumps(context_json, JSON_COMPACT);
  cedar_diagnostic diag;
  memset(&diag, 0, sizeof diag);
  cedar_entities *parsed = NULL;
  cedar_context *context = NULL;
  cedar_uid_ref action_uid = {"Dome::Action", action, 0};
  bool allow = false;
  if (cedar_entities_parse_json(entities_text, strlen(entities_text), "entities", front->schema, &parsed,
                                &diag) == 0 &&
      cedar_context_parse_json(context_text, strlen(context_text), "context", front->schema, &action_uid,
                               &context, &diag) == 0) {
    cedar_request request = {
        {"Dome::Agent", identity->agent, 0}, action_uid, {"Dome::MCPTool", backend, 0}, context};
    cedar_response response;
    memset(&response, 0, sizeof response);
    if (cedar_authorize(front->rules, parsed, &request, &response) == 0) {
      allow = response.decision == CEDAR_ALLOW;
      for (size_t i = 0; i < response.reason_count; i++)
        json_array_append_new(determining, json_string(response.reason[i]));
      cedar_response_release(&response);
    }
  }
  cedar_context_free(context);
  cedar_entities_free(parsed);
  free(entities_text);
  free(context_text);
  json_decref(context_json);
  json_decref(entities);
  json_decref(grants);
  json_decref(capabilities);
  return allow;
}

static json_t *decision_event(const mcp_identity *identity, const char *action, const char *backend,
                              const char *tool, bool allow, json_t *determining) {
  json_t *event =
      json_pack("{s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:o}", "type", "authz.decision", "agent", identity->agent,
                "gateway", identity->gateway, "action", action, "tool", backend, "mcp_tool", tool, "decision",
                allow ? "allow" : "deny", "determining", determining);
  if (identity->actas[0]) json_object_set_new(event, "actas", json_string(identity->actas));
  return event;
}

static json_t *list_tools(void *context, const mcp_identity *identity) {
  struct front *front = context;
  json_t *visible = json_array();
  size_t i;
  json_t *entry;
  json_array_foreach(front->entries, i, entry) {
    if (!gateway_entry_is_external(entry) ||
        strcmp(json_string_value(json_object_get(entry, "gateway")), identity->gateway) != 0)
      continue;
    json_t *tools = NULL;
    dome_error err;
    if (gateway_registry_list_tools(front->registry, entry, front->auth_header, &tools, &err) < 0) {
      journal_event(front,
                    json_pack("{s:s,s:s,s:s,s:s}", "type", "gateway.error", "agent", identity->agent, "tool",
                              json_string_value(json_object_get(entry, "name")), "error", err.message));
      continue;
    }
    size_t j;
    json_t *tool;
    json_array_foreach(tools, j, tool) {
      const char *original = json_string_value(json_object_get(tool, "x-dome-tool"));
      json_t *determining = json_array();
      bool allow = authorize(front, identity, "mcp:discover", entry, original, determining);
      journal_event(
          front, decision_event(identity, "mcp:discover", json_string_value(json_object_get(entry, "name")),
                                original, allow, determining));
      if (allow) json_array_append_new(visible, gateway_tool_public(tool));
    }
    json_decref(tools);
  }
  return visible;
}

struct progress_context {
  struct front *front;
  mcp_call *call;
};

static void on_progress(void *context, double progress, double total, const char *message) {
  struct progress_context *progress_context = context;
  (void)total;
  char *redacted = NULL;
  dome_error err;
  if (message && gateway_redact_text(progress_context->front->guard, progress_context->front->classification,
                                     message, &redacted, NULL, &err) < 0)
    return; /* never forward an unredacted message */
  mcp_call_progress(progress_context->call, progress, redacted);
  free(redacted);
}

static json_t *tool_error(const char *text) {
  return json_pack("{s:[{s:s,s:s}],s:b}", "content", "type", "text", "text", text, "isError", 1);
}

static json_t *call_tool(void *context, const mcp_identity *identity, const char *name, json_t *arguments,
                         mcp_call *call, int *rpc_error, dome_error *err) {
  struct front *front = context;
  char tool[GATEWAY_TOOL_NAME_MAX + 1];
  json_t *entry = gateway_registry_resolve(front->entries, name, tool);
  if (entry == NULL || strcmp(json_string_value(json_object_get(entry, "gateway")), identity->gateway) != 0) {
    *rpc_error = MCP_INVALID_PARAMS;
    dome_error_set(err, ENOENT, "unknown tool: %.100s", name);
    return NULL;
  }
  const char *backend = json_string_value(json_object_get(entry, "name"));
  unsigned char random_bytes[8];
  randombytes_buf(random_bytes, sizeof random_bytes);
  char exec_id[24];
  sodium_bin2hex(exec_id, sizeof exec_id, random_bytes, sizeof random_bytes);
  json_t *determining = json_array();
  bool allow = authorize(front, identity, "mcp:call", entry, tool, determining);
  json_t *event = decision_event(identity, "mcp:call", backend, tool, allow, determining);
  json_object_set_new(event, "exec_id", json_string(exec_id));
  uint64_t seq = journal_event(front, event);
  if (!allow) {
    if (journal_sync(front->journal, seq, err) < 0) {
      *rpc_error = MCP_INTERNAL_ERROR;
      return NULL;
    }
    char text[300];
    snprintf(text, sizeof text, "Call to %s denied by policy.", name);
    return tool_error(text);
  }
  struct progress_context progress = {front, call};
  struct gateway_call_options options = {
      .on_progress = mcp_call_wants_progress(call) ? on_progress : NULL,
      .progress_context = &progress,
      .cancel_fd = mcp_call_cancel_fd(call),
  };
  json_t *result = NULL;
  int backend_rpc_error = 0;
  dome_error call_error = {0};
  int rc = gateway_registry_call(front->registry, entry, front->auth_header, tool, arguments, &options,
                                 &result, &backend_rpc_error, &call_error);
  json_t *end = json_pack("{s:s,s:s,s:s,s:s,s:s}", "type", "gateway.call", "exec_id", exec_id, "agent",
                          identity->agent, "tool", backend, "mcp_tool", tool);
  if (rc == 0) rc = gateway_redact_result(front->guard, front->classification, result, NULL, &call_error);
  if (rc < 0) {
    /* the backend's words may echo secrets too */
    char *redacted = NULL;
    dome_error ignored;
    if (gateway_redact_text(front->guard, front->classification, call_error.message, &redacted, NULL,
                            &ignored) < 0)
      redacted = strdup("backend error (message withheld)");
    json_object_set_new(end, "outcome", json_string("error"));
    json_object_set_new(end, "error", json_string(redacted));
    json_decref(result);
    result = tool_error(redacted);
    free(redacted);
  } else {
    json_object_set_new(end, "outcome",
                        json_string(json_is_true(json_object_get(result, "isError")) ? "tool_error" : "ok"));
  }
  seq = journal_event(front, end);
  if (journal_sync(front->journal, seq, err) < 0) {
    json_decref(result);
    *rpc_error = MCP_INTERNAL_ERROR;
    return NULL;
  }
  return result;
}

int serve_main(int argc, char **argv) {
  if (argc < 8) {
    fprintf(stderr,
            "usage: dome-gateway-harness serve BACKEND_URL AUTH_FILE AGENTS_JSON RULES_FILE JOURNAL_DIR "
            "CLASSIFICATION\n");
    return 2;
  }
  struct front front = {0};
  dome_error err;
  front.auth_header = slurp(argv[3]);
  json_error_t json_error;
  front.agents = json_load_file(argv[4], 0, &json_error);
  if (!json_is_object(front.agents)) {
    fprintf(stderr, "serve: %s:%d:%d: %s\n", argv[4], json_error.line, json_error.column, json_error.text);
    return 2;
  }
  front.classification = strdup(argv[7]);
  front.entries = json_pack("[{s:s,s:s,s:s,s:s}]", "name", "ext", "url", argv[2], "protocol",
                            "streamable-http", "gateway", "Default");
  char *schema_text = slurp("policy/schema/dome.cedarschema");
  cedar_schema_error schema_error;
  memset(&schema_error, 0, sizeof schema_error);
  char *rules_text = slurp(argv[5]);
  cedar_diagnostic diag;
  memset(&diag, 0, sizeof diag);
  if (cedar_schema_parse(schema_text, strlen(schema_text), "dome.cedarschema", &front.schema, &schema_error) <
          0 ||
      cedar_policy_set_parse(rules_text, strlen(rules_text), argv[5], 0, &front.rules, &diag) < 0) {
    fprintf(stderr, "serve: rules or schema do not parse: %s\n", diag.message);
    return 2;
  }
  struct guard_secret secrets[2];
  size_t count = front.auth_header ? gateway_auth_header_secrets(front.auth_header, secrets) : 0;
  struct guard_options guard_options = {
      .classification = front.classification, .secrets = secrets, .secret_count = count};
  journal_options journal_options;
  journal_options_init(&journal_options, argv[6]);
  struct gateway_registry_options registry_options = {.timeout_ms = 3000};
  if (guard_create(&guard_options, &front.guard, &err) < 0 ||
      journal_open(&journal_options, &front.journal, &err) < 0 ||
      gateway_registry_create(&registry_options, &front.registry, &err) < 0) {
    fprintf(stderr, "serve: %s\n", err.message);
    return 2;
  }
  struct mcp_handlers handlers = {
      .context = &front, .authenticate = authenticate, .list_tools = list_tools, .call_tool = call_tool};
  struct mcp_server_options options = {
      .listen = "127.0.0.1:0", .path = "/mcp", .server_name = "dome-gateway-harness", .server_version = "0"};
  mcp_server *server = NULL;
  if (mcp_server_start(&options, &handlers, &server, &err) < 0) {
    fprintf(stderr, "serve: %s\n", err.message);
    return 2;
  }
  printf("{\"port\":%u}\n", mcp_server_port(server));
  fflush(stdout);
  char buffer[64];
  while (read(0, buffer, sizeof buffer) > 0) {
  }
  mcp_server_stop(server);
  gateway_registry_free(front.registry);
  journal_close(front.journal, &err);
  guard_free(front.guard);
  cedar_policy_set_free(front.rules);
  cedar_schema_free(front.schema);
  json_decref(front.agents);
  json_decref(front.entries);
  free(front.auth_header);
  free(front.classification);
  free(schema_text);
  free(rules_text);
  return 0;
}
