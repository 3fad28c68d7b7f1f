/* exec_run: one program in a fresh jail, recorded through the sink (see exec.h). */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "supervisor/common/cleanup.h"
#include "supervisor/common/utf8.h"
#include "supervisor/exec/exec_internal.h"

DOME_DEFINE_FREEP(struct guard, guard_free)

static void strings_free(char **strings) {
  for (char **s = strings; *s; s++) free(*s);
  free(strings);
}
DOME_DEFINE_FREEP(char *, strings_free)

static uint64_t now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

struct run {
  const struct exec_request *request;
  const struct exec_sink *sink;
  struct exec_outcome *outcome;
  struct exec_output output;
  struct exec_enforcement enforcement;
  int stop_fd;            /* the jail's cancel_fd: the caller's cancel_fd or a sink refusal */
  uint64_t start_ticket;  /* exec.start, its sync begun (sink->sync_begin) and not yet waited for */
  uint64_t start_wait_us; /* the wait for it at before_program */
};

/* The first refusal of the sink: remembered, and the program is stopped (its result is never answered). */
static int refused(void *context, int rc, const dome_error *err) {
  struct run *run = context;
  if (run->outcome->journal_rc == 0) {
    run->outcome->journal_rc = rc;
    run->outcome->journal_err = *err;
    uint64_t one = 1;
    if (write(run->stop_fd, &one, sizeof one) < 0) { /* an eventfd of ours: cannot fill up */
    }
  }
  return rc;
}

static int append(struct run *run, json_t *record, uint64_t *ticket) {
  dome_error err = {0};
  int rc = run->sink->append(run->sink->context, record, ticket, &err);
  if (rc < 0) refused(run, rc, &err);
  return rc;
}

static void kernel_report(struct run *run, bool finish, struct exec_kernel_report *report) {
  const struct exec_kernel_provider *kernel = run->request->kernel;
  if (kernel) {
    *report = (struct exec_kernel_report){.level = "none"};
    kernel->report(kernel->context, finish, report);
  } else if (finish) {
    exec_enforcement_finish(&run->enforcement, report);
  } else {
    *report = (struct exec_kernel_report){
        .level = run->enforcement.kernel ? dome_enforcement_level_name(run->enforcement.level) : "none"};
  }
}

static int on_cgroup_ready(void *context, const struct jail_cgroup *leaf, dome_error *err) {
  struct run *run = context;
  const struct exec_kernel_provider *kernel = run->request->kernel;
  uint64_t attach_start = now_us();
  int rc = kernel ? kernel->attach(kernel->context, leaf, err)
                  : exec_enforcement_attach(&run->enforcement, leaf, err);
  run->outcome->attach_us += now_us() - attach_start;
  if (rc < 0) return rc;
  struct exec_kernel_report report;
  kernel_report(run, false, &report);
  json_decref(report.denials);
  /* the "jail set-up" step of the execution's timeline, with the kernel layer attached to this leaf:
   * "none", "reduced" or "full", and its ruleset (0: every connect/bind/send denied) */
  json_t *record = exec_record(&run->request->identity, "exec.jail");
  if (record == NULL) return dome_error_set(err, ENOMEM, "exec.jail");
  json_object_set_new(record, "jail_id", json_string(leaf->jail_id ? leaf->jail_id : ""));
  json_object_set_new(record, "cgroup_id", json_integer((json_int_t)leaf->id));
  json_object_set_new(record, "offset_ms", json_integer(0));
  json_object_set_new(record, "kernel", json_string(report.level ? report.level : "none"));
  json_object_set_new(record, "ruleset", json_integer(report.ruleset));
  rc = append(run, record, NULL);
  json_decref(record);
  if (rc < 0)
    return dome_error_set(err, -rc, "exec.jail not recorded: %s", run->outcome->journal_err.message);
  return 0;
}

static int on_namespaces_ready(void *context, pid_t child_pid, dome_error *err) {
  struct run *run = context;
  const struct exec_egress_provider *egress = run->request->egress;
  if (egress) return egress->namespaces_ready(egress->context, child_pid, err);
  return exec_enforcement_namespaces_ready(&run->enforcement, child_pid, err);
}

static void on_output(void *context, int stream, const char *data, size_t length, uint64_t offset_ms) {
  struct run *run = context;
  if (run->request->tap) run->request->tap(run->request->tap_context, stream, data, length);
  exec_output_feed(&run->output, stream, data, length, offset_ms);
}

/* The caller's cancellation reaches the jail through stop_fd (the caller's fd is only polled: a
 * signalfd or an MCP call's eventfd stays readable for its owner). */
static void on_tick(void *context, uint64_t offset_ms) {
  struct run *run = context;
  exec_output_tick(&run->output, offset_ms);
  int cancel_fd = run->request->cancel_fd;
  if (cancel_fd >= 0) {
    struct pollfd fd = {.fd = cancel_fd, .events = POLLIN};
    if (poll(&fd, 1, 0) == 1 && (fd.revents & (POLLIN | POLLHUP))) {
      uint64_t one = 1;
      if (write(run->stop_fd, &one, sizeof one) < 0) {
      }
    }
  }
}

char *const exec_base_environment[] = {"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/workspace", "LANG=C.UTF-8",
                                       NULL};

/* Environment: the fixed base, the secrets, then the agent's own variables. */
static json_t *environment_of(const struct exec_program *program) {
  json_t *environment = json_object();
  if (environment == NULL) return NULL;
  for (size_t i = 0; exec_base_environment[i]; i++) {
    const char *entry = exec_base_environment[i], *sign = strchr(entry, '=');
    json_object_setn_new(environment, entry, (size_t)(sign - entry), json_string(sign + 1));
  }
  if (program->secrets) json_object_update(environment, program->secrets);
  if (program->env) json_object_update(environment, program->env);
  return environment;
}

static char **environment_strings(json_t *environment) {
  char **env = calloc(json_object_size(environment) + 1, sizeof *env);
  if (env == NULL) return NULL;
  size_t e = 0;
  const char *key;
  json_t *value;
  json_object_foreach(environment, key, value) {
    if (asprintf(&env[e], "%s=%s", key, json_string_value(value)) < 0) {
      env[e] = NULL;
      strings_free(env);
      return NULL;
    }
    e++;
  }
  return env;
}

/* One exec.redaction per (field, detector) with the HMACs of up to 16 findings. */
static json_t *redaction_summary(const struct guard_findings *findings) {
  json_t *list = json_array();
  for (size_t i = 0; i < findings->count && list; i++) {
    json_t *entry = NULL, *candidate;
    size_t k;
    json_array_foreach(list, k, candidate) {
      if (strcmp(json_string_value(json_object_get(candidate, "field")), findings->items[i].field) == 0 &&
          strcmp(json_string_value(json_object_get(candidate, "detector")), findings->items[i].detector) == 0)
        entry = candidate;
    }
    if (entry == NULL) {
      entry = json_pack("{s:s,s:s,s:i}", "field", findings->items[i].field, "detector",
                        findings->items[i].detector, "count", 0);
      json_array_append_new(list, entry);
    }
    json_object_set_new(entry, "count",
                        json_integer(json_integer_value(json_object_get(entry, "count")) + 1));
  }
  return list;
}

static json_t *result_of(const struct exec_request *request, const struct jail_result *jail,
                         json_t *environment, json_t *denials) {
  char *out_text =
      dome_utf8_sanitize(jail->stdout_data ? jail->stdout_data : "", jail->stdout_length, true, NULL);
  char *err_text =
      dome_utf8_sanitize(jail->stderr_data ? jail->stderr_data : "", jail->stderr_length, true, NULL);
  json_t *paths = json_array();
  for (size_t i = 0; i < jail->output_path_count; i++) {
    char *clean = dome_utf8_sanitize(jail->output_paths[i], strlen(jail->output_paths[i]), true, NULL);
    json_array_append_new(paths, json_string(clean ? clean : ""));
    free(clean);
  }
  json_t *result =
      json_pack("{s:s,s:s,s:i,s:i,s:b,s:b,s:I,s:o,s:O,s:b,s:O,s:b,s:I,s:I,s:I,s:s,s:b}", "stdout",
                out_text ? out_text : "", "stderr", err_text ? err_text : "", "exit_code", jail->exit_code,
                "signal", jail->signal, "timed_out", jail->timed_out, "oom_killed", jail->oom_killed,
                "duration_ms", (json_int_t)jail->duration_ms, "output_paths", paths, "env_vars", environment,
                "truncated", jail->truncated, "denials", denials, "cancelled", jail->cancelled, "peak_pids",
                (json_int_t)jail->peak_pids, "cpu_ms", (json_int_t)jail->cpu_ms, "peak_memory_bytes",
                (json_int_t)jail->peak_memory_bytes, "enforcement", jail_enforcement_name(jail->enforcement),
                "pids_limited", jail->pids_limited);
  free(out_text);
  free(err_text);
  if (result == NULL) return NULL;
  /* the limits the program ran under, the cgroup ones as the kernel holds them */
  json_t *limits = json_pack("{s:I,s:f,s:I,s:I,s:I,s:I}", "memory_bytes",
                             (json_int_t)jail->limits.memory_bytes, "cpus", jail->limits.cpus, "pids",
                             (json_int_t)jail->limits.pids, "timeout_ms", (json_int_t)jail->limits.timeout_ms,
                             "workspace_bytes", (json_int_t)jail->limits.workspace_bytes, "output_bytes",
                             (json_int_t)jail->limits.output_limit_bytes);
  if (limits && request->extra_limits) json_object_update(limits, request->extra_limits);
  json_object_set_new(result, "limits", limits);
  return result;
}

static void end_counts(json_t *end, const struct jail_result *jail) {
  json_object_set_new(end, "exit_code", json_integer(jail->exit_code));
  json_object_set_new(end, "signal", json_integer(jail->signal));
  json_object_set_new(end, "timed_out", json_boolean(jail->timed_out));
  json_object_set_new(end, "oom_killed", json_boolean(jail->oom_killed));
  json_object_set_new(end, "cancelled", json_boolean(jail->cancelled));
  json_object_set_new(end, "truncated", json_boolean(jail->truncated));
  json_object_set_new(end, "duration_ms", json_integer((json_int_t)jail->duration_ms));
  json_object_set_new(end, "cpu_ms", json_integer((json_int_t)jail->cpu_ms));
  json_object_set_new(end, "peak_memory_bytes", json_integer((json_int_t)jail->peak_memory_bytes));
  json_object_set_new(end, "peak_pids", json_integer((json_int_t)jail->peak_pids));
  json_object_set_new(end, "output_paths", json_integer((json_int_t)jail->output_path_count));
  json_object_set_new(end, "enforcement", json_string(jail_enforcement_name(jail->enforcement)));
}

/* Append the last record and make every record durable. 0 or the first refusal (outcome->journal_*). */
static int append_last(struct run *run, json_t *record) {
  uint64_t ticket = 0;
  int rc = append(run, record, &ticket);
  dome_error err = {0};
  if (rc == 0 && run->outcome->journal_rc == 0 && run->sink->sync &&
      (rc = run->sink->sync(run->sink->context, ticket, &err)) < 0)
    refused(run, rc, &err);
  return run->outcome->journal_rc;
}

static void close_fd(int *fd) {
  if (*fd >= 0) close(*fd);
}

/* exec.start durable, its sync begun before the jail (jail_config.before_program, and after a jail that
 * failed before it): 0, or the sink's refusal (the program never runs). Once. */
static int start_durable(void *context, dome_error *err) {
  struct run *run = context;
  if (run->start_ticket == 0) return run->outcome->started ? 0 : run->outcome->journal_rc;
  uint64_t ticket = run->start_ticket, waited = now_us();
  run->start_ticket = 0;
  dome_error sync_err = {0};
  int rc = run->sink->sync(run->sink->context, ticket, &sync_err);
  run->start_wait_us = now_us() - waited;
  run->outcome->start_sync_us += run->start_wait_us;
  if (rc < 0) {
    refused(run, rc, &sync_err);
    *err = sync_err;
    return dome_error_wrap(err, "exec.start could not be recorded (fail closed)");
  }
  run->outcome->started = true;
  return 0;
}

int exec_run(const struct exec_request *request, const struct exec_sink *sink, struct exec_outcome *outcome,
             dome_error *err) {
  memset(outcome, 0, sizeof *outcome);
  outcome->kernel_level = "none";
  const struct exec_program *program = &request->program;
  char *language_argv[4] = {NULL};
  char *const *argv = program->argv;
  if (program->language) {
    const char *interpreter = exec_interpreter(program->language);
    if (interpreter == NULL || program->code == NULL)
      return dome_error_set(err, EINVAL, "program: unknown language `%s` or no code", program->language);
    language_argv[0] = (char *)interpreter;
    language_argv[1] = (char *)exec_code_option(program->language);
    language_argv[2] = (char *)program->code;
    argv = language_argv;
  }
  if (argv == NULL || argv[0] == NULL) return dome_error_set(err, EINVAL, "program: no argv and no language");
  if (request->identity.exec_id == NULL || request->identity.agent == NULL || request->identity.tool == NULL)
    return dome_error_set(err, EINVAL, "identity: exec_id, agent and tool required");

  _cleanup_(json_decrefp) json_t *environment = environment_of(program);
  _cleanup_(strings_freep) char **env = environment ? environment_strings(environment) : NULL;
  _cleanup_free_ struct guard_secret *secrets =
      calloc(json_object_size(program->secrets) + 1, sizeof *secrets);
  if (env == NULL || secrets == NULL) return dome_error_set(err, ENOMEM, "environment of the program");
  size_t secret_count = 0;
  const char *key;
  json_t *value;
  json_object_foreach(program->secrets, key, value) secrets[secret_count++] =
      (struct guard_secret){key, json_string_value(value), json_string_length(value)};
  _cleanup_(guard_freep) struct guard *own_guard = NULL;
  struct guard *guard = request->guard;
  if (guard == NULL && !request->unredacted) {
    struct guard_options options = {
        .classification = request->classification, .secrets = secrets, .secret_count = secret_count};
    int rc = guard_create(&options, &own_guard, err);
    if (rc < 0) return dome_error_wrap(err, "guard");
    guard = own_guard;
  }

  __attribute__((cleanup(close_fd))) int stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (stop_fd < 0) return dome_error_set_errno(err, errno, "eventfd");
  struct run run = {.request = request, .sink = sink, .outcome = outcome, .stop_fd = stop_fd};
  run.enforcement.stop_fd = -1; /* released whether or not it is prepared (a kernel provider's run) */
  run.output = (struct exec_output){.request = request,
                                    .sink = sink,
                                    .event_bytes = request->event_bytes,
                                    .event_ms = request->event_ms,
                                    .quiet_ms = request->quiet_ms,
                                    .refused = refused,
                                    .refused_context = &run};
  struct jail_config config;
  jail_config_init(&config);
  int rc = exec_output_open(&run.output, guard, err);
  if (rc == 0 && request->kernel == NULL)
    rc = exec_enforcement_prepare(&run.enforcement, request, &config, err);
  if (rc == 0 && request->kernel) {
    config.path_rules = request->path_rules;
    config.path_rule_count = request->path_rule_count;
  }
  if (rc < 0) {
    exec_output_close(&run.output);
    exec_enforcement_release(&run.enforcement);
    return rc;
  }
  outcome->degraded = run.enforcement.degraded;
  outcome->degraded_entries = run.enforcement.degraded_entries;
  snprintf(outcome->degraded_reason, sizeof outcome->degraded_reason, "%s", run.enforcement.degraded_reason);
  outcome->egress = run.enforcement.egress || (request->egress && request->egress->wanted);

  /* nothing runs before its start is durable (an input that cannot be kept: nothing runs either) */
  _cleanup_(json_decrefp) json_t *start = exec_start_record(request, argv, sink, err);
  uint64_t start_sync = now_us();
  if (start == NULL) {
    rc = dome_error_wrap(err, "record the inputs");
  } else if (sink->sync && sink->sync_begin) {
    /* its sync runs beside the jail's set-up; the program waits for it (start_durable) */
    if (append(&run, start, &run.start_ticket) < 0) {
      *err = outcome->journal_err;
      rc = dome_error_wrap(err, "exec.start could not be recorded (fail closed)");
    } else {
      sink->sync_begin(sink->context, run.start_ticket);
      config.before_program = start_durable;
    }
  } else if (append_last(&run, start) < 0) {
    *err = outcome->journal_err;
    rc = dome_error_wrap(err, "exec.start could not be recorded (fail closed)");
  } else {
    outcome->started = true;
  }
  if (rc < 0) {
    exec_output_close(&run.output);
    exec_enforcement_release(&run.enforcement);
    return rc;
  }
  outcome->start_sync_us = now_us() - start_sync;

  config.argv = argv;
  config.env = env;
  if (program->has_stdin) {
    config.stdin_data = program->stdin_data;
    config.stdin_length = program->stdin_length;
  }
  config.stdin_fd = program->stdin_fd;
  config.input_files = program->files;
  config.input_file_count = program->file_count;
  config.workspace_dir = program->workspace_dir;
  config.copy_out = program->copy_out;
  config.image = request->image;
  config.image_store = request->image_store;
  config.memory_bytes = request->limits.memory_bytes;
  config.pids = request->limits.pids;
  config.cpus = request->limits.cpus;
  config.timeout_ms = request->limits.timeout_ms;
  config.workspace_bytes = request->limits.workspace_bytes;
  config.output_limit = request->limits.output_bytes;
  config.cancel_fd = stop_fd;
  config.hook_context = &run;
  config.on_output = on_output;
  config.on_tick = on_tick;
  unsigned quiet_ms = run.output.quiet_ms, event_ms = run.output.event_ms;
  config.tick_ms = (event_ms < quiet_ms ? event_ms : quiet_ms) / 2;
  if (config.tick_ms < 5) config.tick_ms = 5;
  config.on_cgroup_ready = on_cgroup_ready;
  if (request->egress) {
    config.resolv_conf = request->egress->resolv_conf;
    config.hosts_dns = request->egress->hosts_dns;
  }
  /* Only when an egress path is built into the jail's network namespace: without the hook the jail makes
   * its namespace beside its mounts (supervisor/jail/child.c), which starts it sooner. */
  uint64_t jail_start = now_us();
  if (request->before_jail) rc = request->before_jail(request->before_jail_context, &config, err);
  if (request->egress) outcome->egress = request->egress->wanted;
  if (outcome->egress) config.on_namespaces_ready = on_namespaces_ready;
  if (rc == 0)
    rc = request->run_jail ? request->run_jail(request->run_jail_context, &config, &outcome->jail, err)
                           : jail_run(&config, &outcome->jail, err);
  outcome->ran = rc == 0;
  if (request->egress && request->egress->finish) request->egress->finish(request->egress->context);
  dome_error start_err = {0};
  if (start_durable(&run, &start_err) < 0 || !outcome->started) {
    /* exec.start never became durable: the program never ran (before_program held it), nothing is
     * answered (fail closed); the kernel layer the jail attached is let go all the same */
    struct exec_kernel_report unused;
    kernel_report(&run, true, &unused);
    json_decref(unused.denials);
    json_decref(unused.shadows);
    *err = outcome->journal_err;
    dome_error_wrap(err, "exec.start could not be recorded (fail closed)");
    exec_output_close(&run.output);
    exec_enforcement_release(&run.enforcement);
    return outcome->journal_rc < 0 ? outcome->journal_rc : -EIO;
  }
  outcome->kernel_start_ns = run.enforcement.start_ns;
  /* the network path of this jail, as the egress provider reports it otherwise */
  _cleanup_(json_decrefp) json_t *network =
      json_pack("{s:b}", "egress", run.enforcement.net_hook.jail != NULL);
  if (network && run.enforcement.net_hook.jail)
    json_object_set_new(network, "mode",
                        json_string(dome_net_mode_name(dome_net_mode_in_effect(run.enforcement.net))));
  struct exec_kernel_report report;
  kernel_report(&run, true, &report);
  uint64_t jail_us = now_us() - jail_start - run.start_wait_us;
  outcome->jail_us = jail_us > outcome->attach_us ? jail_us - outcome->attach_us : 0;
  outcome->kernel_level = report.level ? report.level : "none";
  outcome->denial_count = report.count;
  _cleanup_(json_decrefp) json_t *denials = report.denials ? report.denials : json_array();
  exec_output_finish(&run.output, outcome->jail.duration_ms);
  size_t d;
  json_t *denial;
  json_array_foreach(denials, d, denial) {
    json_t *record = exec_denial_record(request, denial, report.reason);
    if (record) append(&run, record, NULL);
    json_decref(record);
  }
  /* shadow differences, bounded as the denials: the kept ones as records, all counted in exec.end */
  _cleanup_(json_decrefp) json_t *shadows = report.shadows;
  outcome->shadow_count = report.shadow_count;
  json_array_foreach(shadows, d, denial) {
    json_t *record = exec_shadow_record(request, denial);
    if (record) append(&run, record, NULL);
    json_decref(record);
  }
  _cleanup_(json_decrefp) json_t *end = exec_record(&request->identity, "exec.end");
  if (end == NULL) {
    exec_output_close(&run.output);
    exec_enforcement_release(&run.enforcement);
    return dome_error_set(err, ENOMEM, "exec.end");
  }
  json_object_set_new(end, "jail_id", json_string(outcome->jail.jail_id));
  json_object_set_new(end, "offset_ms", json_integer((json_int_t)outcome->jail.duration_ms));
  json_object_set_new(end, "kernel", json_string(outcome->kernel_level));
  json_object_set_new(end, "denials", json_integer((json_int_t)report.count));
  if (shadows) {
    json_object_set_new(end, "shadows", json_integer((json_int_t)report.shadow_count));
    json_object_set_new(end, "shadows_dropped",
                        json_integer((json_int_t)(report.shadow_count - json_array_size(shadows))));
  }
  exec_output_digests(&run.output, end);
  exec_output_close(&run.output);
  exec_enforcement_release(&run.enforcement);
  if (rc < 0) {
    json_object_set_new(end, "error", json_string(err->message));
    dome_error run_err = *err;
    outcome->recorded = append_last(&run, end) == 0;
    *err = outcome->recorded ? run_err : outcome->journal_err; /* unrecorded: the refusal is what counts */
    return outcome->recorded ? rc : outcome->journal_rc;
  }

  uint64_t redact_start = now_us();
  _cleanup_(json_decrefp) json_t *result = result_of(request, &outcome->jail, environment, denials);
  if (result == NULL) return dome_error_set(err, ENOMEM, "result");
  if (request->egress && request->egress->report)
    request->egress->report(request->egress->context, result);
  else
    json_object_set(result, "network", network);
  struct guard_findings findings;
  memset(&findings, 0, sizeof findings);
  /* fail closed: nothing unredacted goes back, and the run stays without exec.end */
  if (guard && (rc = guard_redact_json(guard, result, &findings, err)) < 0) {
    guard_findings_free(&findings);
    return dome_error_wrap(err, "redact result");
  }
  json_t *redactions = redaction_summary(&findings);
  outcome->redaction_count = findings.count;
  json_object_set_new(result, "redactions", redactions);
  size_t i;
  json_t *entry;
  json_array_foreach(redactions, i, entry) {
    json_t *record = exec_record(&request->identity, "exec.redaction");
    if (record == NULL) continue;
    json_object_update(record, entry);
    json_t *hashes = json_array();
    for (size_t k = 0; k < findings.count && json_array_size(hashes) < 16; k++)
      if (strcmp(findings.items[k].field, json_string_value(json_object_get(entry, "field"))) == 0 &&
          strcmp(findings.items[k].detector, json_string_value(json_object_get(entry, "detector"))) == 0)
        json_array_append_new(hashes, json_string(findings.items[k].hmac_hex));
    json_object_set_new(record, "hmac", hashes);
    append(&run, record, NULL);
    json_decref(record);
  }
  guard_findings_free(&findings);
  end_counts(end, &outcome->jail);
  if (request->egress && request->egress->report)
    request->egress->report(request->egress->context, end);
  else
    json_object_set(end, "network", network);
  /* the result goes back only once every record of the execution is durable */
  if (append_last(&run, end) < 0) {
    *err = outcome->journal_err;
    return dome_error_wrap(err, "record");
  }
  outcome->recorded = true;
  outcome->redact_us = now_us() - redact_start;
  outcome->result = dome_steal_pointer(&result);
  return 0;
}

void exec_outcome_release(struct exec_outcome *outcome) {
  json_decref(outcome->result);
  outcome->result = NULL;
  jail_result_release(&outcome->jail);
}
