/* domed's gateway: external MCP backends registered with `dome tool add --url U --protocol
 * streamable-http --gateway G` (issue #9). A backend's tool `t` is exposed as `<backend>.<t>`
 * (supervisor/gateway/gateway.h); Cedar sees resource Dome::MCPTool::"<backend>" with context.tool = t.
 *   tools/list: the backend's tools that mcp:discover allows (each decision journalled);
 *   tools/call: mcp:call decided and journalled (authz.decision with its request) before anything is
 *     sent; a deny is the tool error "Call to <name> denied by policy."; an allow is forwarded through
 *     gateway_registry_call (progress passed on redacted, cancellation followed) and the result redacted
 *     with the entry's field classification before the agent sees it (journalled as gateway.call). */
#include <errno.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>

#include "supervisor/domed/domed.h"
#include "supervisor/gateway/gateway.h"
#include "supervisor/guards/guard.h"
#include "policy/tool_input/tool_input.h"

static bool on_gateway(json_t *entry, const mcp_identity *identity) {
  const char *gateway = json_string_value(json_object_get(entry, "gateway"));
  return gateway_entry_is_external(entry) &&
         strcmp(json_string_value(json_object_get(entry, "name")), DOMED_BUILTIN_TOOL) != 0 &&
         strcmp(gateway ? gateway : MCP_GATEWAY_DEFAULT, identity->gateway) == 0;
}

static json_t *tool_entity(json_t *entry) {
  const char *gateway = json_string_value(json_object_get(entry, "gateway"));
  json_t *entity = json_pack("{s:s,s:s}", "protocol", "streamable-http", "gateway",
                             gateway ? gateway : MCP_GATEWAY_DEFAULT);
  json_t *capability = json_object_get(entry, "capability");
  if (json_is_string(capability)) json_object_set(entity, "capability", capability);
  return entity;
}

/* Decide `action` on backend tool `tool` of `entry`, journal it; returns the decision's allow, false
 * with *journal_rc < 0 (*err) when the decision could not be journalled. */
static bool decide(struct domed *domed, const mcp_identity *identity, mcp_call *call, const char *exec_id,
                   const char *action, json_t *entry, const char *tool, json_t *arguments,
                   const char *exposed, json_t *input_schema, uint64_t *seq, int *journal_rc,
                   dome_error *err) {
  json_t *capabilities;
  struct domed_principal principal;
  domed_principal_of(domed, identity, &principal, &capabilities);
  json_t *entity = tool_entity(entry);
  const char *backend = json_string_value(json_object_get(entry, "name"));
  struct domed_rules *rules = domed_rules_acquire(domed);
  struct domed_decision decision;
  domed_authorize_input(domed, rules, &principal, action, backend, entity, tool, arguments, exposed,
                        input_schema, &decision);
  atomic_fetch_add(decision.allow ? &domed->metrics.decisions_allow : &domed->metrics.decisions_deny, 1);
  json_t *event = domed_decision_event(exec_id, identity, action, backend, tool, &decision, "policy");
  if (call) domed_audit_set_call(event, call);
  *journal_rc = domed_audit_append(domed, event, seq, err);
  json_decref(event);
  bool allow = decision.allow && *journal_rc == 0;
  domed_decision_release(&decision);
  domed_rules_release(rules);
  json_decref(entity);
  json_decref(principal.grants);
  json_decref(capabilities);
  return allow;
}

bool domed_gateway_discover_any(struct domed *domed, const mcp_identity *identity) {
  json_t *entries = control_tool_list(domed->store);
  bool allowed = false;
  size_t i;
  json_t *entry;
  json_array_foreach(entries, i, entry) {
    if (allowed || !gateway_entry_is_external(entry) ||
        strcmp(json_string_value(json_object_get(entry, "name")), DOMED_BUILTIN_TOOL) == 0)
      continue;
    json_t *capabilities;
    struct domed_principal principal;
    domed_principal_of(domed, identity, &principal, &capabilities);
    json_t *entity = tool_entity(entry);
    struct domed_rules *rules = domed_rules_acquire(domed);
    struct domed_decision decision;
    domed_authorize_resource(domed, rules, &principal, "mcp:discover",
                             json_string_value(json_object_get(entry, "name")), entity, "", NULL, &decision);
    allowed = decision.allow;
    domed_decision_release(&decision);
    domed_rules_release(rules);
    json_decref(entity);
    json_decref(principal.grants);
    json_decref(capabilities);
  }
  json_decref(entries);
  return allowed;
}

int domed_gateway_list_tools(struct domed *domed, const mcp_identity *identity, json_t *visible,
                             uint64_t *ticket, dome_error *error) {
  if (domed->gateways == NULL) return 0;
  int rc = 0;
  json_t *entries = control_tool_list(domed->store);
  size_t i;
  json_t *entry;
  json_array_foreach(entries, i, entry) {
    if (rc < 0) break;
    if (!on_gateway(entry, identity)) continue;
    const char *backend = json_string_value(json_object_get(entry, "name"));
    json_t *tools = NULL;
    dome_error err = {0};
    char *auth_header = control_tool_auth_header(domed->store, backend);
    int listed = gateway_registry_list_tools(domed->gateways, entry, auth_header, &tools, &err);
    if (auth_header) sodium_memzero(auth_header, strlen(auth_header));
    free(auth_header);
    if (listed < 0) {
      json_t *event = json_pack("{s:s,s:s,s:s,s:s}", "type", "gateway.error", "agent", identity->agent,
                                "tool", backend, "error", err.message);
      domed_log("warn", "gateway", "backend=%s msg=\"%s\"", backend, err.message);
      rc = domed_audit_append(domed, event, ticket, error);
      json_decref(event);
      continue;
    }
    /* only the tools whose definition is the approved one (tool_pins.c) */
    json_t *approved = domed_pins_filter(domed, entry, tools);
    json_decref(tools);
    tools = approved;
    size_t j;
    json_t *tool;
    json_array_foreach(tools, j, tool) {
      const char *original = json_string_value(json_object_get(tool, "x-dome-tool"));
      if (original && decide(domed, identity, NULL, NULL, "mcp:discover", entry, original, NULL, NULL, NULL,
                             ticket, &rc, error))
        json_array_append_new(visible, gateway_tool_public(tool));
      if (rc < 0) break;
    }
    json_decref(tools);
  }
  json_decref(entries);
  return rc;
}

static json_t *tool_error(const char *text) {
  return json_pack("{s:[{s:s,s:s}],s:b}", "content", "type", "text", "text", text, "isError", 1);
}

/* A call refused before authorization (its arguments fail the tool's inputSchema, the tool is withheld):
 * a deny without evaluation naming `reason`, and call.rejected with the detail; durable. */
static int journal_invalid(struct domed *domed, const mcp_identity *identity, mcp_call *call,
                           const char *backend, const char *tool, const char *name, const char *reason,
                           const char *detail, dome_error *err) {
  struct domed_decision decision = {.allow = false};
  atomic_fetch_add(&domed->metrics.decisions_deny, 1);
  json_t *refusal = domed_decision_event(NULL, identity, "mcp:call", backend, tool, &decision, reason);
  if (call) domed_audit_set_call(refusal, call);
  int refused = domed_audit_append(domed, refusal, NULL, err);
  json_decref(refusal);
  if (refused < 0) return refused;
  json_t *event = json_pack("{s:s,s:s,s:s,s:s}", "type", "call.rejected", "agent", identity->agent, "gateway",
                            identity->gateway, "reason", reason);
  domed_audit_set_text(event, "mcp_tool", name, strlen(name));
  domed_audit_set_text(event, "detail", detail, strlen(detail));
  if (call) domed_audit_set_call(event, call);
  if (identity->actas[0]) json_object_set_new(event, "actas", json_string(identity->actas));
  int rc = domed_audit_append_sync(domed, event, err);
  json_decref(event);
  atomic_fetch_add(&domed->metrics.calls_rejected, 1);
  return rc;
}

struct progress_context {
  const struct guard *guard;
  const char *classification;
  mcp_call *call;
};

static void on_progress(void *context, double progress, double total, const char *message) {
  struct progress_context *progress_context = context;
  (void)total;
  char *redacted = NULL;
  dome_error err;
  if (message && gateway_redact_text(progress_context->guard, progress_context->classification, message,
                                     &redacted, NULL, &err) < 0)
    return; /* never forward an unredacted message */
  mcp_call_progress(progress_context->call, progress, redacted);
  free(redacted);
}

/* Forward an allowed call; returns the (redacted) result or a tool error; fills *end. */
static json_t *forward(struct domed *domed, json_t *entry, const char *tool, json_t *arguments,
                       mcp_call *call, json_t *end) {
  char *classification = gateway_classification_text(entry);
  char *auth_header =
      control_tool_auth_header(domed->store, json_string_value(json_object_get(entry, "name")));
  struct guard_secret secrets[2];
  size_t secret_count = auth_header ? gateway_auth_header_secrets(auth_header, secrets) : 0;
  struct guard_options guard_options = {.classification = classification ? classification : "",
                                        .secrets = secrets,
                                        .secret_count = secret_count};
  struct guard *guard = NULL;
  void *guard_handle = NULL;
  dome_error call_error = {0};
  json_t *result = NULL;
  int rc = domed_guard_acquire(&guard_options, &guard, &guard_handle, &call_error);
  if (rc == 0) {
    struct progress_context progress = {guard, guard_options.classification, call};
    struct gateway_call_options options = {
        .on_progress = mcp_call_wants_progress(call) ? on_progress : NULL,
        .progress_context = &progress,
        .cancel_fd = mcp_call_cancel_fd(call),
    };
    int backend_rpc_error = 0;
    rc = gateway_registry_call(domed->gateways, entry, auth_header, tool, arguments, &options, &result,
                               &backend_rpc_error, &call_error);
    struct guard_findings findings = {0};
    if (rc == 0)
      rc = gateway_redact_result(guard, guard_options.classification, result, &findings, &call_error);
    if (rc == 0 && findings.count > 0) {
      atomic_fetch_add(&domed->metrics.redactions, findings.count);
      json_object_set_new(end, "redactions", json_integer((json_int_t)findings.count));
    }
    guard_findings_free(&findings);
  }
  if (rc < 0) {
    char *redacted = NULL;
    dome_error ignored;
    if (guard == NULL || gateway_redact_text(guard, guard_options.classification, call_error.message,
                                             &redacted, NULL, &ignored) < 0)
      redacted = strdup("backend error (message withheld)");
    json_object_set_new(end, "outcome", json_string("error"));
    json_object_set_new(end, "error", json_string(redacted ? redacted : ""));
    json_decref(result);
    result = tool_error(redacted ? redacted : "backend error");
    free(redacted);
  } else {
    json_object_set_new(end, "outcome",
                        json_string(json_is_true(json_object_get(result, "isError")) ? "tool_error" : "ok"));
  }
  if (guard_handle) domed_guard_release(guard_handle);
  free(classification);
  if (auth_header) sodium_memzero(auth_header, strlen(auth_header));
  free(auth_header);
  return result;
}

int domed_gateway_call_tool(struct domed *domed, const mcp_identity *identity, const char *name,
                            json_t *arguments, mcp_call *call, json_t **result, int *rpc_error,
                            dome_error *err) {
  *result = NULL;
  if (domed->gateways == NULL) return 0;
  json_t *entries = control_tool_list(domed->store);
  json_t *candidates = json_array();
  size_t i;
  json_t *entry;
  json_array_foreach(entries, i, entry) if (on_gateway(entry, identity)) json_array_append(candidates, entry);
  json_decref(entries);
  char tool[GATEWAY_TOOL_NAME_MAX + 1];
  entry = gateway_registry_resolve(candidates, name, tool);
  if (entry == NULL) {
    json_decref(candidates);
    return 0;
  }
  uint64_t start = domed_now_us();
  const char *backend = json_string_value(json_object_get(entry, "name"));
  unsigned char random_bytes[8];
  randombytes_buf(random_bytes, sizeof random_bytes);
  char exec_id[24];
  sodium_bin2hex(exec_id, sizeof exec_id, random_bytes, sizeof random_bytes);
  /* arguments that fail the tool's inputSchema are a tool error before authorization */
  json_t *input_schema = NULL;
  char withheld[600];
  if (domed_pins_check_call(domed, entry, tool, &input_schema, withheld, sizeof withheld) < 0) {
    if (journal_invalid(domed, identity, call, backend, tool, name, "tool changed", withheld, err) < 0)
      *rpc_error = MCP_INTERNAL_ERROR;
    else
      *result = tool_error(withheld);
    json_decref(candidates);
    return 1;
  }
  char invalid[600];
  if (input_schema && cedar_tool_input_check(input_schema, arguments, invalid, sizeof invalid) < 0) {
    char text[700];
    snprintf(text, sizeof text, "invalid arguments: %s", invalid);
    if (journal_invalid(domed, identity, call, backend, tool, name, "invalid arguments", text, err) < 0)
      *rpc_error = MCP_INTERNAL_ERROR;
    else
      *result = tool_error(text);
    json_decref(input_schema);
    json_decref(candidates);
    return 1;
  }
  uint64_t seq = 0;
  int journal_rc = 0;
  bool allow = decide(domed, identity, call, exec_id, "mcp:call", entry, tool, arguments, name, input_schema,
                      &seq, &journal_rc, err);
  json_decref(input_schema);
  if (!allow) {
    if (journal_rc < 0 || domed_audit_sync(domed, seq, err) < 0) {
      *rpc_error = MCP_INTERNAL_ERROR;
    } else {
      char text[300];
      snprintf(text, sizeof text, "Call to %s denied by policy.", name);
      *result = tool_error(text);
    }
    json_decref(candidates);
    return 1;
  }
  /* nothing is forwarded before the decision is durable */
  if (domed_audit_sync(domed, seq, err) < 0) {
    *rpc_error = MCP_INTERNAL_ERROR;
    json_decref(candidates);
    return 1;
  }
  json_t *end = json_pack("{s:s,s:s,s:s,s:s,s:s,s:s}", "type", "gateway.call", "exec_id", exec_id, "agent",
                          identity->agent, "gateway", identity->gateway, "tool", backend, "mcp_tool", tool);
  if (identity->actas[0]) json_object_set_new(end, "actas", json_string(identity->actas));
  *result = forward(domed, entry, tool, arguments, call, end);
  json_object_set_new(end, "duration_ms", json_integer((json_int_t)((domed_now_us() - start) / 1000u)));
  uint64_t decision_ticket = seq;
  int appended = domed_audit_append(domed, end, &seq, err);
  json_decref(end);
  json_decref(candidates);
  if (appended < 0 || domed_audit_sync_span(domed, decision_ticket, seq, err) < 0) {
    json_decref(*result);
    *result = NULL;
    *rpc_error = MCP_INTERNAL_ERROR;
  }
  return 1;
}
