/* The MCP face of domed: identity (bearer tokens; every refusal journalled as auth.failed), admission
 * of sessions (initialize needs an action the rules permit; sessions journalled), tools/list filtered
 * by mcp:discover, and tools/call of the built-in code-sandbox's execute_code: authorize (Cedar
 * mcp:call + the tool's required capability), queue fairly for a jail slot, execute, and journal the
 * decision either way (and call.rejected for an unknown tool or invalid arguments). */
#include <errno.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "supervisor/domed/domed.h"
#include "supervisor/exec/exec.h"
#include "supervisor/gateway/gateway.h"

/* a refusal for a full agent queue is answered after this long, plus up to the jitter: refusals of
 * calls sent together are spread out instead of coming back (and being re-sent) in one burst */
#define DOMED_OVERLOAD_HOLD_MS 1000
#define DOMED_OVERLOAD_JITTER_MS 500

static uint64_t now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* The first characters of a bearer token, for telling floods apart in the journal without recording
 * the token: "dome_" and 4 characters (24 of its 256 random bits), bytes outside [A-Za-z0-9_-] as '?'. */
static void token_prefix(const char *token, char prefix[16]) {
  size_t n = 0;
  for (; token && token[n] && n < sizeof CONTROL_TOKEN_PREFIX - 1 + 4; n++) {
    char c = token[n];
    bool plain =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
    prefix[n] = plain ? c : '?';
  }
  prefix[n] = '\0';
}

static int authenticate(void *context, const char *token, mcp_identity *identity, dome_error *err) {
  struct domed *domed = context;
  if (domed_fleet_serving(domed, err) < 0) { /* cut off from the fleet: fail closed */
    json_t *event = json_pack("{s:s,s:s,s:s,s:s}", "type", "auth.failed", "reason", "fleet_unavailable",
                              "gateway", identity->gateway, "message", err->message);
    domed_refusal_journal(domed, event, identity->source, "fleet");
    json_decref(event);
    return -EPERM;
  }
  struct control_token_check check;
  json_t *agent = control_agent_authenticate_at(domed->store, token, (int64_t)time(NULL), &check, err);
  if (agent == NULL) {
    char prefix[16];
    token_prefix(token, prefix);
    json_t *event = json_pack("{s:s,s:s,s:s,s:s}", "type", "auth.failed", "reason",
                              control_token_refusal_name(check.refusal), "gateway", identity->gateway,
                              "token_prefix", prefix);
    if (check.agent[0]) json_object_set_new(event, "agent", json_string(check.agent));
    domed_refusal_journal(domed, event, identity->source, prefix);
    json_decref(event);
    return -EACCES;
  }
  snprintf(identity->agent, sizeof identity->agent, "%s", json_string_value(json_object_get(agent, "name")));
  /* Delegation (issue #9): a delegate's or --act-as token's calls are on behalf of its parent; any
   * other X-Dome-Act-As is refused. The gateway must be granted to the agent and, if delegated, to the
   * parent too. */
  const char *actas = NULL;
  json_t *parent = NULL;
  int rc = gateway_delegation_resolve(agent, identity->actas, &actas, err);
  if (rc == 0 && actas) {
    if (actas != identity->actas) snprintf(identity->actas, sizeof identity->actas, "%s", actas);
    parent = control_agent_get(domed->store, identity->actas);
    rc = gateway_delegation_check(agent, parent, identity->actas, err);
  }
  if (rc == 0 && (!control_gateway_exists(domed->store, identity->gateway) ||
                  !gateway_delegation_granted(agent, parent, identity->gateway))) {
    if (parent)
      rc = dome_error_set(err, EPERM, "agent `%s` acting as `%s` is not granted gateway `%s` (both must be)",
                          identity->agent, identity->actas, identity->gateway);
    else
      rc = dome_error_set(err, EPERM, "agent `%s` is not granted gateway `%s`", identity->agent,
                          identity->gateway);
  }
  json_decref(parent);
  json_decref(agent);
  if (rc < 0) {
    json_t *event = json_pack("{s:s,s:s,s:s,s:s,s:s}", "type", "gateway.access", "agent", identity->agent,
                              "gateway", identity->gateway, "decision", "deny", "reason", err->message);
    if (identity->actas[0]) json_object_set_new(event, "actas", json_string(identity->actas));
    dome_error journal_err = {0};
    if (domed_audit_append_sync(domed, event, &journal_err) < 0) /* still refused; counted and logged */
      domed_log("error", "audit", "msg=\"gateway.access deny not journalled: %s\"", journal_err.message);
    json_decref(event);
  }
  return rc;
}

/* The registry entry of the built-in backend: what `dome tool add --name code-sandbox` recorded, or
 * the defaults. New reference. */
static json_t *builtin_tool(struct domed *domed) {
  json_t *tool = control_tool_get(domed->store, DOMED_BUILTIN_TOOL);
  if (tool == NULL)
    tool = json_pack("{s:s,s:s,s:s,s:{},s:[]}", "name", DOMED_BUILTIN_TOOL, "protocol", "streamable-http",
                     "gateway", MCP_GATEWAY_DEFAULT, "field_classification", "secret_env");
  if (json_object_get(tool, "capability") == NULL)
    json_object_set_new(tool, "capability", json_string(DOMED_BUILTIN_CAPABILITY));
  return tool;
}

static json_t *tool_entity(json_t *tool) {
  json_t *entity = json_pack("{s:O,s:O}", "protocol", json_object_get(tool, "protocol"), "gateway",
                             json_object_get(tool, "gateway"));
  json_t *capability = json_object_get(tool, "capability");
  if (capability) json_object_set(entity, "capability", capability);
  return entity;
}

void domed_principal_of(struct domed *domed, const mcp_identity *identity, struct domed_principal *principal,
                        json_t **capabilities) {
  json_t *record = control_agent_get(domed->store, identity->agent);
  json_t *parent = identity->actas[0] ? control_agent_get(domed->store, identity->actas) : NULL;
  if (record == NULL) record = json_object();
  gateway_delegation_effective(record, parent, &principal->grants, capabilities);
  json_decref(parent);
  json_decref(record);
  principal->agent = identity->agent;
  principal->capabilities = *capabilities;
  principal->gateway = identity->gateway;
  principal->actas = identity->actas[0] ? identity->actas : NULL;
}

static bool has_capability(json_t *capabilities, const char *capability) {
  if (capability == NULL) return true;
  size_t i;
  json_t *value;
  json_array_foreach(capabilities, i,
                     value) if (strcmp(json_string_value(value), capability) == 0) return true;
  return false;
}

/* A decision on the built-in backend: its registry entry and Cedar entity, the caller's principal and
 * the rules decided under (held until builtin_release: an execution runs under them). */
struct builtin_decision {
  json_t *tool;
  json_t *entity;
  json_t *capabilities;
  struct domed_principal principal;
  struct domed_rules *rules;
  struct domed_decision decision;
};

static void builtin_decide(struct domed *domed, const mcp_identity *identity, const char *action,
                           const char *mcp_tool, json_t *arguments, struct builtin_decision *d) {
  d->tool = builtin_tool(domed);
  d->entity = tool_entity(d->tool);
  domed_principal_of(domed, identity, &d->principal, &d->capabilities);
  d->rules = domed_rules_acquire(domed);
  domed_authorize(domed, d->rules, &d->principal, action, d->entity, mcp_tool, arguments, &d->decision);
}

static void builtin_release(struct builtin_decision *d) {
  domed_decision_release(&d->decision);
  domed_rules_release(d->rules);
  json_decref(d->capabilities);
  json_decref(d->principal.grants);
  json_decref(d->entity);
  json_decref(d->tool);
}

/* initialize: the identity must be permitted some action: mcp:discover of the built-in backend or of
 * an external backend. Decisions are not journalled one by one; a refusal is (session.refused,
 * bounded like auth.failed). */
static int admit(void *context, const mcp_identity *identity, dome_error *err) {
  struct domed *domed = context;
  struct builtin_decision d;
  builtin_decide(domed, identity, "mcp:discover", DOMED_EXECUTE_TOOL, NULL, &d);
  bool allowed = d.decision.allow;
  builtin_release(&d);
  if (!allowed) allowed = domed_gateway_discover_any(domed, identity);
  if (allowed) return 0;
  json_t *event = json_pack("{s:s,s:s,s:s,s:s}", "type", "session.refused", "reason", "no permitted action",
                            "agent", identity->agent, "gateway", identity->gateway);
  if (identity->actas[0]) json_object_set_new(event, "actas", json_string(identity->actas));
  domed_refusal_journal(domed, event, identity->source, identity->agent);
  json_decref(event);
  return dome_error_set(err, EPERM, "agent `%s` is permitted no action (no rule permits it mcp:discover)",
                        identity->agent);
}

/* A session's life cycle: every event but session.refused is durable before the server goes on (a
 * session.created refused fails its initialize): the events reported together are appended in order and
 * synced once, at the last (the journal is sequential: its sync covers the earlier ones). The ends at
 * shutdown are appended only, made durable together by the journal's close (journal_close commits
 * everything queued). session.refused is bounded like auth.failed. */
static int session_event(void *context, const char *type, const char *agent, const char *gateway,
                         const char *session_id, const char *reason, bool last) {
  struct domed *domed = context;
  if (strcmp(type, "session.refused") == 0) { /* a flood of them: bounded like auth.failed */
    json_t *event = json_pack("{s:s,s:s,s:s,s:s}", "type", type, "reason", reason ? reason : "", "agent",
                              agent, "gateway", gateway);
    domed_refusal_journal(domed, event, NULL, agent);
    json_decref(event);
    return 0;
  }
  json_t *event =
      json_pack("{s:s,s:s,s:s,s:s}", "type", type, "agent", agent, "gateway", gateway, "session", session_id);
  if (reason) json_object_set_new(event, "reason", json_string(reason));
  dome_error err = {0}; /* a refusal is also logged and counted by audit.c */
  bool shutdown = reason && strcmp(reason, "shutdown") == 0;
  static _Thread_local uint64_t first; /* the report's first event not yet synced (0: none) */
  uint64_t ticket = 0;
  int rc = domed_audit_append(domed, event, &ticket, &err);
  if (rc == 0 && first == 0) first = ticket;
  if (rc == 0 && last && !shutdown) rc = domed_audit_sync_span(domed, first, ticket, &err);
  if (rc < 0 || last) first = 0;
  json_decref(event);
  return rc;
}

/* An execute_code call whose arguments fail validation (call.rejected, before any decision): nothing
 * runs. Returns 0 once durable, else -errno (*err). */
static int journal_rejected(struct domed *domed, const mcp_identity *identity, mcp_call *call,
                            const char *exec_id, const char *name, const char *reason, const char *detail,
                            dome_error *err) {
  json_t *event = json_pack("{s:s,s:s,s:s,s:s}", "type", "call.rejected", "agent", identity->agent, "gateway",
                            identity->gateway, "reason", reason);
  domed_audit_set_text(event, "mcp_tool", name, strlen(name));
  domed_audit_set_call(event, call);
  if (detail) domed_audit_set_text(event, "detail", detail, strlen(detail));
  if (exec_id) json_object_set_new(event, "exec_id", json_string(exec_id));
  if (identity->actas[0]) json_object_set_new(event, "actas", json_string(identity->actas));
  int rc = domed_audit_append_sync(domed, event, err);
  json_decref(event);
  atomic_fetch_add(&domed->metrics.calls_rejected, 1);
  return rc;
}

static json_t *list_tools(void *context, const mcp_identity *identity) {
  struct domed *domed = context;
  json_t *tools = json_array();
  struct builtin_decision d;
  builtin_decide(domed, identity, "mcp:discover", DOMED_EXECUTE_TOOL, NULL, &d);
  if (d.decision.allow)
    atomic_fetch_add(&domed->metrics.decisions_allow, 1);
  else
    atomic_fetch_add(&domed->metrics.decisions_deny, 1);
  json_t *event = domed_decision_event(NULL, identity, "mcp:discover", DOMED_BUILTIN_TOOL, DOMED_EXECUTE_TOOL,
                                       &d.decision, "policy");
  dome_error err = {0};
  uint64_t ticket = 0;
  int rc = domed_audit_append(domed, event, &ticket, &err);
  json_decref(event);
  if (rc == 0 && d.decision.allow &&
      strcmp(json_string_value(json_object_get(d.tool, "gateway")), identity->gateway) == 0) {
    struct control_quota quota; /* the limits a call would run under, for the description */
    const char *capability = json_string_value(json_object_get(d.tool, "capability"));
    control_quota_get(domed->store, capability ? capability : DOMED_BUILTIN_CAPABILITY, &quota);
    json_array_append_new(tools, domed_execute_code_tool(&quota, domed->config.mcp_output_limit_bytes));
    if (quota.sessions > 0) domed_session_tools(tools, &quota); /* the operator enabled sessions */
  }
  builtin_release(&d);
  /* the listing is answered only once every discovery decision it reflects is durable */
  uint64_t first = ticket;
  if (rc == 0) rc = domed_gateway_list_tools(domed, identity, tools, &ticket, &err);
  if (rc == 0) rc = domed_audit_sync_span(domed, first, ticket, &err);
  if (rc < 0) {
    json_decref(tools);
    return NULL;
  }
  return tools;
}

static json_t *tool_error(const char *text) {
  return json_pack("{s:[{s:s,s:s}],s:b}", "content", "type", "text", "text", text, "isError", 1);
}

/* A call refused before any authorization (its tool unknown): journalled as a
 * deny with `reason`, the long members by digest. Returns 0 once durable, else -errno (*err). */
static int journal_refusal(struct domed *domed, const mcp_identity *identity, const char *name,
                           mcp_call *call, const char *reason, dome_error *err) {
  struct domed_decision decision = {.allow = false};
  json_t *event = domed_decision_event(NULL, identity, "mcp:call", "", name, &decision, reason);
  domed_audit_set_call(event, call);
  int rc = domed_audit_append_sync(domed, event, err);
  json_decref(event);
  return rc;
}

/* An agent whose own queue stays full for a second is refused before any decision, in the HTTP
 * connection's thread: a flood of such calls costs no authorization and no call thread, comes back at
 * most once a second per connection (spread over the jitter), and adds at most the bounded call.rejected
 * events of refusals.c to the journal. A request id over DOMED_REQUEST_ID_MAX never gets here (the mcp
 * server refuses it where it parses the request: domed_request_refused). */
static int call_admit(void *context, const mcp_identity *identity, const char *name, const char *session_id,
                      const char *request_id, dome_error *err) {
  struct domed *domed = context;
  if (strcmp(name, DOMED_EXECUTE_TOOL) != 0) return 0;
  unsigned running = 0, waiting = 0;
  unsigned hold_ms = DOMED_OVERLOAD_HOLD_MS + randombytes_uniform(DOMED_OVERLOAD_JITTER_MS);
  if (domed_slot_wait_room(domed, identity->agent, hold_ms, &running, &waiting)) return 0;
  atomic_fetch_add(&domed->metrics.overloaded, 1);
  json_t *event = json_pack("{s:s,s:s,s:s,s:s,s:s,s:s,s:s}", "type", "call.rejected", "reason", "overloaded",
                            "agent", identity->agent, "gateway", identity->gateway, "mcp_tool",
                            DOMED_EXECUTE_TOOL, "session", session_id, "request_id", request_id);
  if (identity->actas[0]) json_object_set_new(event, "actas", json_string(identity->actas));
  domed_refusal_journal(domed, event, identity->source, identity->agent);
  json_decref(event);
  return dome_error_set(err, EBUSY, "server overloaded: agent `%s` has %u executions running and %u queued",
                        identity->agent, running, waiting);
}

static json_t *call_tool(void *context, const mcp_identity *identity, const char *name, json_t *arguments,
                         mcp_call *call, int *rpc_error, dome_error *err) {
  struct domed *domed = context;
  uint64_t start = now_us();
  domed_after_answer_open();
  bool in_session = domed_session_handles(name, arguments);
  if (strcmp(name, DOMED_EXECUTE_TOOL) != 0 && !in_session) {
    json_t *routed = NULL;
    if (domed_gateway_call_tool(domed, identity, name, arguments, call, &routed, rpc_error, err) > 0)
      return routed;
    atomic_fetch_add(&domed->metrics.decisions_deny, 1);
    if (journal_refusal(domed, identity, name, call, "unknown tool", err) < 0) {
      *rpc_error = MCP_INTERNAL_ERROR;
      return NULL;
    }
    *rpc_error = MCP_INVALID_PARAMS;
    dome_error_set(err, ENOENT, "unknown tool: %.100s%s", name, strlen(name) > 100 ? "..." : "");
    return NULL;
  }
  uint64_t received = mcp_call_received_us(call);
  if (received && start > received)
    atomic_fetch_add(&domed->metrics.phase_sum_us[DOMED_PHASE_HTTP], start - received);
  unsigned char random_bytes[8];
  randombytes_buf(random_bytes, sizeof random_bytes);
  char exec_id[24];
  sodium_bin2hex(exec_id, sizeof exec_id, random_bytes, sizeof random_bytes);
  mcp_call_set_exec_id(call, exec_id);

  /* arguments that fail the inputSchema are a tool error before any authorization: Cedar sees only
   * arguments of the tool's type (context.input). Journalled as a deny without evaluation (reason
   * "invalid arguments"), like every refusal before authorization, and as call.rejected with the detail. */
  dome_error check = {0};
  if (strcmp(name, DOMED_EXECUTE_TOOL) == 0 && domed_execute_arguments_check(arguments, &check) < 0) {
    atomic_fetch_add(&domed->metrics.decisions_deny, 1);
    if (journal_refusal(domed, identity, name, call, "invalid arguments", err) < 0 ||
        journal_rejected(domed, identity, call, exec_id, name, "invalid arguments", check.message, err) < 0) {
      *rpc_error = MCP_INTERNAL_ERROR;
      return NULL;
    }
    return tool_error(check.message);
  }
  struct builtin_decision d;
  builtin_decide(domed, identity, "mcp:call", name, arguments, &d);
  const char *capability = json_string_value(json_object_get(d.tool, "capability"));
  const char *reason = "policy";
  bool allow = d.decision.allow;
  if (allow && strcmp(json_string_value(json_object_get(d.tool, "gateway")), identity->gateway) != 0) {
    allow = false;
    reason = "tool not on this gateway";
  }
  if (allow && !has_capability(d.capabilities, capability)) {
    allow = false;
    reason = "agent lacks the tool's capability";
  }
  d.decision.allow = allow;
  atomic_fetch_add(allow ? &domed->metrics.decisions_allow : &domed->metrics.decisions_deny, 1);
  json_t *event =
      domed_decision_event(exec_id, identity, "mcp:call", DOMED_BUILTIN_TOOL, name, &d.decision, reason);
  domed_audit_set_call(event, call);
  uint64_t seq = 0;
  int appended = domed_audit_append(domed, event, &seq, err);
  json_decref(event);
  json_t *result = NULL;
  if (appended < 0) { /* no decision on record: nothing runs */
    *rpc_error = MCP_INTERNAL_ERROR;
    dome_error_wrap(err, "the decision could not be journalled (fail closed)");
    goto out;
  }
  if (!allow) {
    int rc = domed_audit_sync(domed, seq, err);
    if (rc < 0) {
      *rpc_error = MCP_INTERNAL_ERROR;
    } else {
      char text[256];
      if (strcmp(reason, "policy") == 0)
        snprintf(text, sizeof text, "Call to %s denied by policy.", DOMED_BUILTIN_TOOL);
      else
        snprintf(text, sizeof text, "Call to %s denied by policy: %s.", DOMED_BUILTIN_TOOL, reason);
      result = tool_error(text);
    }
    goto out;
  }
  if (in_session && strcmp(name, DOMED_EXECUTE_TOOL) != 0) { /* a session tool: checks its own arguments */
    struct domed_execution execution = {.identity = identity,
                                        .tool = d.tool,
                                        .arguments = arguments,
                                        .rules = d.rules,
                                        .exec_id = exec_id,
                                        .call = call,
                                        .decision_ticket = seq};
    control_quota_get(domed->store, capability ? capability : DOMED_BUILTIN_CAPABILITY, &execution.quota);
    result = domed_session_call(domed, name, &execution, rpc_error, err);
    goto out;
  }
  struct domed_execution execution = {
      .identity = identity,
      .tool = d.tool,
      .arguments = arguments,
      .rules = d.rules,
      .exec_id = exec_id,
      .call = call,
      .decision_ticket = seq,
  };
  control_quota_get(domed->store, capability ? capability : DOMED_BUILTIN_CAPABILITY, &execution.quota);
  /* stdin is written into the jail's workspace: at most its size */
  json_t *stdin_value = json_object_get(arguments, "stdin");
  if (json_string_length(stdin_value) > execution.quota.workspace_bytes) {
    char text[200];
    snprintf(text, sizeof text, "stdin of %zu bytes exceeds the workspace size of %llu bytes",
             json_string_length(stdin_value), (unsigned long long)execution.quota.workspace_bytes);
    if (domed_audit_sync(domed, seq, err) < 0)
      *rpc_error = MCP_INTERNAL_ERROR;
    else
      result = tool_error(text);
    goto out;
  }
  json_t *timeout = json_object_get(arguments, "timeout_s");
  if (timeout) {
    uint64_t ms = (uint64_t)(json_number_value(timeout) * 1000.0);
    if (ms > 0 && ms < execution.quota.timeout_ms) execution.quota.timeout_ms = ms;
    if (ms > execution.quota.timeout_ms) {
      char text[200];
      snprintf(text, sizeof text, "timeout_s %.3f clamped to the quota of capability `%s`: %.3f s",
               json_number_value(timeout), capability ? capability : DOMED_BUILTIN_CAPABILITY,
               (double)execution.quota.timeout_ms / 1000.0);
      mcp_call_log(call, "notice", "dome", text);
    }
  }
  atomic_fetch_add(&domed->metrics.phase_sum_us[DOMED_PHASE_AUTHORIZE], now_us() - start);
  if (in_session) { /* the session's jail runs already: no slot to wait for */
    result = domed_session_call(domed, name, &execution, rpc_error, err);
    goto out;
  }
  uint64_t queued = now_us();
  int rc = domed_slot_acquire(domed, identity->agent, (unsigned)execution.quota.concurrency, call, err);
  uint64_t queued_us = now_us() - queued;
  atomic_fetch_add(&domed->metrics.phase_sum_us[DOMED_PHASE_QUEUE], queued_us);
  if (rc < 0) {
    if (rc == -EBUSY) atomic_fetch_add(&domed->metrics.overloaded, 1);
    if (rc == -ECANCELED) {
      /* the decision allowed it, nothing ran: its end says so */
      atomic_fetch_add(&domed->metrics.queue_cancelled, 1);
      char version[32];
      snprintf(version, sizeof version, "%d", d.rules ? d.rules->version : 0);
      struct exec_identity unstarted = {.exec_id = exec_id,
                                        .agent = identity->agent,
                                        .actas = identity->actas,
                                        .tool = DOMED_BUILTIN_TOOL,
                                        .policy_version = version};
      json_t *end = exec_unstarted_end(&unstarted, queued_us / 1000);
      dome_error ignored = {0}; /* nothing ran and nothing is answered: the call was cancelled */
      if (end) domed_audit_append(domed, end, NULL, &ignored);
      json_decref(end);
    }
    *rpc_error = rc == -EBUSY ? MCP_SERVER_OVERLOADED : MCP_INTERNAL_ERROR;
    dome_error journal_err = {0};
    if (domed_audit_sync(domed, seq, &journal_err) < 0) { /* the refusal answers only once on record */
      *rpc_error = MCP_INTERNAL_ERROR;
      *err = journal_err;
    }
    goto out;
  }
  atomic_fetch_add(&domed->metrics.active_jails, 1);
  result = domed_execute(domed, &execution, rpc_error, err);
  atomic_fetch_sub(&domed->metrics.active_jails, 1);
  domed_slot_release(domed, identity->agent);
  if (result) {
    json_t *structured = json_object_get(result, "structuredContent");
    uint64_t program_us = (uint64_t)json_integer_value(json_object_get(structured, "duration_ms")) * 1000u;
    uint64_t total = now_us() - start;
    domed_metrics_observe_call(&domed->metrics, total, total > program_us ? total - program_us : 0);
  }
out:
  builtin_release(&d);
  return result;
}

/* After the answer of a tools/call: the leaves of the jails it ran (answered.c). */
static void call_answered(void *context, mcp_call *call) {
  (void)context;
  (void)call;
  domed_after_answer_run();
}

const struct mcp_handlers domed_mcp_handlers = {
    .authenticate = authenticate,
    .admit = admit,
    .session_event = session_event,
    .request_refused = domed_request_refused,
    .list_tools = list_tools,
    .call_admit = call_admit,
    .call_tool = call_tool,
    .call_answered = call_answered,
    .http_get = domed_http_get,
};
