/* execute_code: the MCP side of one execution. The program runs through supervisor/exec (exec_run: jail,
 * kernel rules, egress, redaction, the exec.* records) with the quota of the tool's capability; this file
 * gives it domed's parts — the journal as its sink (every record appended, the start and the end synced
 * with the call's decision), the shared kernel programs and egress path, the guard cache, progress
 * notifications and cancellation of the MCP call — and turns the outcome into the tool result: JSON-RPC
 * errors when the call must fail closed, the MCP output cap per stream, the line naming a limit. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "supervisor/common/cleanup.h"
#include "supervisor/exec/exec.h"
#include "supervisor/guards/guard.h"
#include "supervisor/jail/jail.h"
#include "supervisor/domed/domed.h"
#include "supervisor/session/session.h"

struct adapter {
  struct domed *domed;
  const struct domed_execution *execution;
  const char *capability;
  uint64_t streamed; /* bytes sent as progress */
  uint64_t sync_us;  /* time in the last sync: the journal phase */
  uint64_t kernel_finish_us;
  json_t *capabilities; /* the agent's, for the kernel tables */
  struct domed_principal principal;
  struct domed_kernel_run kernel_run;
  struct domed_egress_run egress;
  struct domed_path_rules *path_rules;
  struct exec_egress_provider *egress_provider;
};

/* Into the journal that holds the call's decision: never a reopened one that may have lost it. */
static int sink_append(void *context, json_t *record, uint64_t *ticket, dome_error *err) {
  struct adapter *a = context;
  return domed_audit_append_after(a->domed, a->execution->decision_ticket, record, ticket, err);
}

/* Durable with every earlier event of the call, its decision first. */
static int sink_sync(void *context, uint64_t ticket, dome_error *err) {
  struct adapter *a = context;
  uint64_t start = domed_now_us();
  int rc = domed_audit_sync_span(a->domed, a->execution->decision_ticket, ticket, err);
  a->sync_us = domed_now_us() - start;
  return rc;
}

static void sink_sync_begin(void *context, uint64_t ticket) {
  struct adapter *a = context;
  domed_audit_sync_begin(a->domed, ticket);
}

static int sink_put_blob(void *context, const char *data, size_t length, const char *hex, dome_error *err) {
  struct adapter *a = context;
  return domed_audit_put_blob(a->domed, a->capability, a->execution->quota.blob_bytes, data, length, hex,
                              err);
}

/* A recorded chunk as progress, when the client asked for it. */
static void sink_output(void *context, int stream, const char *text, size_t length) {
  struct adapter *a = context;
  if (a->execution->call == NULL || !mcp_call_wants_progress(a->execution->call)) return;
  char *message = NULL;
  if (asprintf(&message, "[%s] %.*s", stream == 1 ? "stdout" : "stderr", (int)length, text) < 0) return;
  a->streamed += length;
  mcp_call_progress(a->execution->call, (double)a->streamed, message);
  free(message);
}

static int kernel_attach(void *context, const struct jail_cgroup *leaf, dome_error *err) {
  struct adapter *a = context;
  return domed_kernel_attach(a->domed, &a->kernel_run, leaf, &a->principal, a->execution->rules,
                             a->execution->quota.egress, err);
}

static void kernel_report(void *context, bool finish, struct exec_kernel_report *report) {
  struct adapter *a = context;
  if (finish) {
    uint64_t start = domed_now_us();
    domed_kernel_finish(a->domed, &a->kernel_run);
    a->kernel_finish_us = domed_now_us() - start;
  }
  report->level = a->kernel_run.level ? a->kernel_run.level : "none";
  report->ruleset = a->kernel_run.ruleset;
  report->reason = a->kernel_run.reason ? a->kernel_run.reason : "policy";
  report->count = a->kernel_run.count;
  report->denials = NULL;
  if (!finish) return;
  report->denials = a->kernel_run.denials ? json_incref(a->kernel_run.denials) : json_array();
  report->shadows = a->kernel_run.shadows ? json_incref(a->kernel_run.shadows) : NULL;
  report->shadow_count = a->kernel_run.shadow_count;
}

static int egress_namespaces_ready(void *context, pid_t child_pid, dome_error *err) {
  struct adapter *a = context;
  if (a->execution->on_jail_started)
    a->execution->on_jail_started(a->execution->jail_context, child_pid, &a->kernel_run);
  if (!a->egress.wanted) return 0;
  return domed_egress_namespaces_ready(&a->egress, child_pid, err);
}
static void egress_finish(void *context) {
  domed_egress_finish(&((struct adapter *)context)->egress);
}
static void egress_report(void *context, json_t *object) {
  domed_egress_report(&((struct adapter *)context)->egress, object);
}

/* Once exec.start is durable: the agent's file rules as the jail's Landlock path rules (none: the jail's
 * baseline) and its egress path. */
/* The jail of the call: a prepared one of domed's pool when one of its limits class is ready. */
static int run_jail(void *context, const struct jail_config *config, struct jail_result *result,
                    dome_error *err) {
  struct adapter *a = context;
  int version = a->execution->rules ? a->execution->rules->version : 0;
  /* A session's jail without an egress path: its hook only learns the init (so it may run at the bind of
   * a prepared jail), and a prepared session jail (its kernel imported) may serve it */
  if (a->execution->on_jail_started && !a->egress.wanted) {
    struct jail_config session = *config; /* a session's jail stays: its leaf goes with the session */
    session.namespaces_hook_late = true;
    session.prepared_python_program = domed_session_program();
    return domed_jail_pool_run(a->domed, version, &session, result, err);
  }
  struct jail_config call = *config;
  if (!a->execution->on_jail_started) domed_after_answer_defer_jails(&call);
  return domed_jail_pool_run(a->domed, version, &call, result, err);
}

static int before_jail(void *context, struct jail_config *config, dome_error *err) {
  struct adapter *a = context;
  int rc = domed_kernel_path_rules(a->domed, &a->principal, a->execution->rules, &a->path_rules, err);
  if (rc == 0)
    rc = domed_egress_prepare(a->domed, &a->principal, a->execution->rules, &a->execution->quota, config,
                              &a->egress, err);
  if (rc < 0) return rc;
  config->path_rules = domed_path_rules_list(a->path_rules, &config->path_rule_count);
  /* a session's jail: the hook that names its init runs whether or not there is an egress path */
  a->egress_provider->wanted = a->egress.wanted || a->execution->on_jail_started != NULL;
  if (a->egress.needs_egress &&
      a->execution->call) { /* what the agent should know of its network (counts, not destinations) */
    char text[200];
    if (a->egress.wanted)
      snprintf(text, sizeof text, "egress: %zu permitted network entries, path through %s", a->egress.count,
               a->domed->config.net_mode);
    else
      snprintf(text, sizeof text, "egress: the rules permit destinations but the egress path is closed");
    mcp_call_log(a->execution->call, a->egress.wanted ? "info" : "warning", "dome", text);
  }
  return 0;
}

/* "field=CLASS,..." of the tool's field_classification object; NULL when out of memory. */
static char *classification_text(json_t *tool) {
  char *text = NULL;
  size_t size = 0;
  FILE *out = open_memstream(&text, &size);
  if (out == NULL) return NULL;
  const char *field;
  json_t *class_;
  int n = 0;
  json_object_foreach(json_object_get(tool, "field_classification"), field, class_)
      fprintf(out, "%s%s=%s", n++ ? "," : "", field, json_string_value(class_));
  fclose(out);
  return text;
}

static json_t *tool_error(const char *text) {
  return json_pack("{s:[{s:s,s:s}],s:b}", "content", "type", "text", "text", text, "isError", 1);
}

static void release_guard(void **handle) {
  domed_guard_release(*handle);
}

json_t *domed_execute(struct domed *domed, const struct domed_execution *execution, int *rpc_error,
                      dome_error *err) {
  json_t *arguments = execution->arguments;
  const char *capability = json_string_value(json_object_get(execution->tool, "capability"));
  struct adapter a = {.domed = domed,
                      .execution = execution,
                      .capability = capability ? capability : DOMED_BUILTIN_CAPABILITY};
  *rpc_error = MCP_INTERNAL_ERROR; /* until the call is answered otherwise */
  uint64_t phase_start = domed_now_us();

  /* The tool's secret environment (redacted from every field, also when the agent's variable of the same
   * name replaced one) and the agent's own variables (its input, documented as non-secret). */
  json_auto_t *secrets = control_tool_secret_env(domed->store, DOMED_BUILTIN_TOOL);
  json_t *agent_env = json_object_get(arguments, "env");
  _cleanup_free_ struct guard_secret *guard_secrets =
      calloc(json_object_size(secrets) + 1, sizeof *guard_secrets);
  _cleanup_free_ char *classification = classification_text(execution->tool);
  if (secrets == NULL || guard_secrets == NULL || classification == NULL) {
    dome_error_set(err, ENOMEM, "execute: out of memory");
    return NULL;
  }
  struct exec_program program = {.env = agent_env, .secrets = secrets};
  _cleanup_free_ struct jail_input_file *input_files = NULL;
  if (exec_program_from_arguments(arguments, &program, &input_files, err) < 0) return NULL;
  size_t secret_count = 0;
  const char *key;
  json_t *value;
  json_object_foreach(secrets, key, value) guard_secrets[secret_count++] =
      (struct guard_secret){key, json_string_value(value), json_string_length(value)};

  struct guard_options guard_options = {
      .classification = classification, .secrets = guard_secrets, .secret_count = secret_count};
  struct guard *guard = NULL;
  __attribute__((cleanup(release_guard))) void *guard_handle = NULL;
  if (domed_guard_acquire(&guard_options, &guard, &guard_handle, err) < 0) {
    dome_error_wrap(err, "guard");
    return NULL;
  }
  json_t *record = control_agent_get(domed->store, execution->identity->agent);
  json_t *agent_capabilities = json_object_get(record, "capabilities");
  json_auto_t *capabilities =
      json_is_array(agent_capabilities) ? json_incref(agent_capabilities) : json_array();
  json_decref(record);
  a.capabilities = capabilities;
  a.principal = (struct domed_principal){.agent = execution->identity->agent,
                                         .capabilities = capabilities,
                                         .gateway = execution->identity->gateway};
  atomic_fetch_add(&domed->metrics.phase_sum_us[DOMED_PHASE_GUARD], domed_now_us() - phase_start);

  char version[32];
  snprintf(version, sizeof version, "%d", execution->rules ? execution->rules->version : 0);
  json_auto_t *extra_limits =
      json_pack("{s:I}", "mcp_output_bytes",
                (json_int_t)(execution->quota.mcp_output_bytes ? execution->quota.mcp_output_bytes
                                                               : domed->config.mcp_output_limit_bytes));
  struct exec_kernel_provider kernel = {.context = &a, .attach = kernel_attach, .report = kernel_report};
  struct exec_egress_provider egress = {.context = &a,
                                        .namespaces_ready = egress_namespaces_ready,
                                        .finish = egress_finish,
                                        .report = egress_report};
  struct exec_request request = {
      .identity = {.exec_id = execution->exec_id,
                   .agent = execution->identity->agent,
                   .actas = execution->identity->actas,
                   .tool = DOMED_BUILTIN_TOOL,
                   .policy_version = version},
      .program = program,
      .limits = {.memory_bytes = execution->quota.memory_bytes,
                 .cpus = execution->quota.cpus,
                 .pids = (uint32_t)execution->quota.pids,
                 .timeout_ms = execution->quota.timeout_ms,
                 .workspace_bytes = execution->quota.workspace_bytes,
                 .output_bytes = execution->quota.output_bytes},
      .image = domed->config.image,
      .classification = classification,
      .guard = guard,
      .kernel = &kernel,
      .egress = &egress,
      .before_jail = before_jail,
      .before_jail_context = &a,
      .gateway = execution->identity->gateway,
      .cancel_fd = execution->call ? mcp_call_cancel_fd(execution->call) : execution->cancel_fd,
      .event_bytes = domed->config.output_event_bytes,
      .event_ms = domed->config.output_event_ms,
      .quiet_ms = domed->config.progress_quiet_ms,
      .extra_limits = extra_limits,
      .run_jail = run_jail,
      .run_jail_context = &a,
  };
  struct exec_sink sink = {.context = &a,
                           .append = sink_append,
                           .sync = sink_sync,
                           .sync_begin = sink_sync_begin,
                           .put_blob = sink_put_blob,
                           .output = sink_output};
  /* the denials' Cedar request carries the agent's entity data as the tables were compiled with */
  json_auto_t *entities = json_pack(
      "[{s:{s:s,s:s},s:{s:O},s:[{s:s,s:s}]},{s:{s:s,s:s},s:{},s:[]}]", "uid", "type", "Dome::Agent", "id",
      a.principal.agent, "attrs", "capabilities", capabilities, "parents", "type", "Dome::Gateway", "id",
      a.principal.gateway, "uid", "type", "Dome::Gateway", "id", a.principal.gateway, "attrs", "parents");
  request.entities = entities;
  a.egress_provider = &egress;
  atomic_fetch_add(&domed->metrics.executions, 1);
  struct exec_outcome outcome;
  int rc = exec_run(&request, &sink, &outcome, err);
  json_decref(a.kernel_run.denials);
  json_decref(a.kernel_run.shadows);
  domed_path_rules_release(a.path_rules);
  atomic_fetch_add(&domed->metrics.phase_sum_us[DOMED_PHASE_KERNEL], outcome.attach_us + a.kernel_finish_us);
  atomic_fetch_add(&domed->metrics.denials_kernel, outcome.denial_count);
  atomic_fetch_add(&domed->metrics.shadows_kernel, outcome.shadow_count);
  atomic_fetch_add(&domed->metrics.start_sync_us, outcome.start_sync_us);
  if (rc < 0 && !outcome.started) { /* nothing ran: an input could not be kept or exec.start not durable */
    exec_outcome_release(&outcome);
    atomic_fetch_add(&domed->metrics.execution_errors, 1);
    return NULL;
  }
  if (rc < 0 && !outcome.ran && outcome.recorded) { /* the jail failed, and its exec.end is durable */
    exec_outcome_release(&outcome);
    atomic_fetch_add(&domed->metrics.execution_errors, 1);
    char text[1200];
    snprintf(text, sizeof text, "execution failed: %s", err->message);
    return tool_error(text);
  }
  if (rc < 0) { /* a record refused (fail closed) or the result could not be redacted: nothing goes back */
    exec_outcome_release(&outcome);
    return NULL;
  }
  const struct jail_result *jail = &outcome.jail;
  if (jail->timed_out) atomic_fetch_add(&domed->metrics.timeouts, 1);
  if (jail->oom_killed) atomic_fetch_add(&domed->metrics.oom_kills, 1);
  if (jail->cancelled) atomic_fetch_add(&domed->metrics.cancellations, 1);
  atomic_fetch_add(&domed->metrics.redactions, outcome.redaction_count);
  uint64_t program_us = jail->duration_ms * 1000u;
  if (outcome.jail_us > program_us)
    atomic_fetch_add(&domed->metrics.phase_sum_us[DOMED_PHASE_JAIL_SETUP], outcome.jail_us - program_us);
  atomic_fetch_add(&domed->metrics.phase_sum_us[DOMED_PHASE_PROGRAM], program_us);
  atomic_fetch_add(&domed->metrics.phase_sum_us[DOMED_PHASE_REDACT],
                   outcome.redact_us > a.sync_us ? outcome.redact_us - a.sync_us : 0);
  atomic_fetch_add(&domed->metrics.phase_sum_us[DOMED_PHASE_JOURNAL], a.sync_us);

  /* What the agent reads: each stream within the MCP output limit, and the line naming a limit that
   * ended the program (the journal keeps the redacted output as the jail kept it). */
  json_t *structured = dome_steal_pointer(&outcome.result);
  uint64_t mcp_limit = (uint64_t)json_integer_value(json_object_get(extra_limits, "mcp_output_bytes"));
  domed_output_limit(structured, "stdout", mcp_limit, jail->stdout_total_bytes, jail->stdout_length);
  domed_output_limit(structured, "stderr", mcp_limit, jail->stderr_total_bytes, jail->stderr_length);
  char notice[512];
  if (jail_limit_notice(jail, notice, sizeof notice)) domed_output_append_line(structured, "stderr", notice);
  exec_outcome_release(&outcome);
  char *text = json_dumps(structured, JSON_COMPACT);
  json_t *result = json_pack("{s:[{s:s,s:s}],s:o,s:b}", "content", "type", "text", "text", text ? text : "{}",
                             "structuredContent", structured, "isError", 0);
  free(text);
  *rpc_error = 0;
  return result;
}
