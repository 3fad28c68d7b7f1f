/* execute_code: one program in a fresh jail (supervisor/jail/jail.h) with the quota of the tool's
 * capability, output streamed as progress after redaction, the result redacted by the tool's field
 * classification (supervisor/guards/guard.h), and every step journalled and synced before the result
 * is returned. */
#include <errno.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>

#include "supervisor/guards/guard.h"
#include "supervisor/jail/jail.h"
#include "supervisor/domed/domed.h"

#define PROGRESS_CHUNK_MAX 16384 /* bytes of redacted output per progress notification */

/* Copy of data[0..length) as valid UTF-8: each invalid byte becomes U+FFFD (as `dome run --json`). */
static char *utf8_sanitize(const char *data, size_t length) {
  char *out = malloc(length * 3 + 1);
  if (out == NULL) return NULL;
  size_t o = 0;
  const unsigned char *p = (const unsigned char *)data;
  for (size_t i = 0; i < length;) {
    unsigned char c = p[i];
    size_t need = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
    bool ok = need > 0 && i + need <= length && c != 0;
    for (size_t k = 1; ok && k < need; k++) ok = (p[i + k] & 0xC0) == 0x80;
    if (ok && need == 2) ok = c >= 0xC2;
    if (ok && need == 3) {
      unsigned cp = ((c & 0x0Fu) << 12) | ((p[i + 1] & 0x3Fu) << 6) | (p[i + 2] & 0x3Fu);
      ok = cp >= 0x800 && (cp < 0xD800 || cp > 0xDFFF);
    }
    if (ok && need == 4) {
      unsigned cp =
          ((c & 0x07u) << 18) | ((p[i + 1] & 0x3Fu) << 12) | ((p[i + 2] & 0x3Fu) << 6) | (p[i + 3] & 0x3Fu);
      ok = cp >= 0x10000 && cp <= 0x10FFFF;
    }
    if (ok) {
      memcpy(out + o, p + i, need);
      o += need;
      i += need;
    } else {
      memcpy(out + o, "\xEF\xBF\xBD", 3);
      o += 3;
      i++;
    }
  }
  out[o] = '\0';
  return out;
}

struct run_context {
  struct domed *domed;
  const struct domed_execution *execution;
  struct guard *guard;
  struct guard_stream *streams[3]; /* [1] stdout, [2] stderr */
  uint64_t streamed;
  int stream; /* being fed */
  struct domed_kernel_run kernel_run;
};

static int on_cgroup_ready(void *context, const struct jail_cgroup *leaf, dome_error *err) {
  struct run_context *run = context;
  json_t *capabilities = json_array();
  json_t *record = control_agent_get(run->domed->store, run->execution->identity->agent);
  if (record && json_is_array(json_object_get(record, "capabilities"))) {
    json_decref(capabilities);
    capabilities = json_incref(json_object_get(record, "capabilities"));
  }
  json_decref(record);
  struct domed_principal principal = {
      .agent = run->execution->identity->agent,
      .capabilities = capabilities,
      .gateway = run->execution->identity->gateway,
  };
  int rc = domed_kernel_attach(run->domed, &run->kernel_run, leaf, &principal, run->execution->rules,
                               run->execution->quota.egress, err);
  json_decref(capabilities);
  return rc;
}

static int emit_progress(const char *data, size_t length, void *context) {
  struct run_context *run = context;
  if (length == 0) return 0;
  if (length > PROGRESS_CHUNK_MAX) length = PROGRESS_CHUNK_MAX;
  char *text = malloc(length + 16);
  if (text == NULL) return 0;
  int prefix = sprintf(text, "[%s] ", run->stream == 1 ? "stdout" : "stderr");
  memcpy(text + prefix, data, length);
  text[prefix + length] = '\0';
  /* the chunk may end inside a UTF-8 sequence: jansson refuses invalid UTF-8, so cut it back */
  size_t end = (size_t)prefix + length;
  while (end > (size_t)prefix && (unsigned char)text[end - 1] >= 0x80) {
    size_t start = end - 1;
    while (start > (size_t)prefix && ((unsigned char)text[start] & 0xC0) == 0x80) start--;
    unsigned char lead = (unsigned char)text[start];
    size_t need = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
    if (end - start >= need) break;
    end = start;
  }
  text[end] = '\0';
  run->streamed += length;
  char *clean = utf8_sanitize(text, end);
  if (clean) mcp_call_progress(run->execution->call, (double)run->streamed, clean);
  free(clean);
  free(text);
  return 0;
}

static void on_output(void *context, int stream, const char *data, size_t length, uint64_t offset_ms) {
  (void)offset_ms;
  struct run_context *run = context;
  if (stream < 1 || stream > 2 || run->streams[stream] == NULL) return;
  struct guard_sink sink = {.emit = emit_progress, .context = run};
  run->stream = stream;
  dome_error err;
  if (guard_stream_feed(run->streams[stream], data, length, &sink, &err) < 0) {
    guard_stream_close(run->streams[stream]);
    run->streams[stream] = NULL;
  }
}

/* "field=CLASS,..." of the tool's field_classification object. */
static char *classification_text(json_t *tool) {
  char *text = NULL;
  size_t size = 0;
  FILE *out = open_memstream(&text, &size);
  const char *field;
  json_t *class_;
  int n = 0;
  json_object_foreach(json_object_get(tool, "field_classification"), field, class_)
      fprintf(out, "%s%s=%s", n++ ? "," : "", field, json_string_value(class_));
  fclose(out);
  return text;
}

static void free_strings(char **strings) {
  if (strings == NULL) return;
  for (char **s = strings; *s; s++) free(*s);
  free(strings);
}

static json_t *redaction_summary(const struct guard_findings *findings) {
  json_t *by_key = json_object();
  for (size_t i = 0; i < findings->count; i++) {
    char key[320];
    snprintf(key, sizeof key, "%s\x1f%s", findings->items[i].field, findings->items[i].detector);
    json_t *entry = json_object_get(by_key, key);
    if (entry == NULL) {
      entry = json_pack("{s:s,s:s,s:i}", "field", findings->items[i].field, "detector",
                        findings->items[i].detector, "count", 0);
      json_object_set_new(by_key, key, entry);
    }
    json_object_set_new(entry, "count",
                        json_integer(json_integer_value(json_object_get(entry, "count")) + 1));
  }
  json_t *list = json_array();
  const char *key;
  json_t *entry;
  json_object_foreach(by_key, key, entry) json_array_append(list, entry);
  json_decref(by_key);
  return list;
}

static json_t *base_event(const struct domed_execution *execution, const char *type) {
  json_t *event = json_pack("{s:s,s:s,s:s,s:s}", "type", type, "exec_id", execution->exec_id, "agent",
                            execution->identity->agent, "tool", DOMED_BUILTIN_TOOL);
  if (execution->identity->actas[0])
    json_object_set_new(event, "actas", json_string(execution->identity->actas));
  char version[32];
  snprintf(version, sizeof version, "%d", execution->rules ? execution->rules->version : 0);
  json_object_set_new(event, "policy_version", json_string(version));
  return event;
}

static json_t *tool_error(const char *text) {
  return json_pack("{s:[{s:s,s:s}],s:b}", "content", "type", "text", "text", text, "isError", 1);
}

json_t *domed_execute(struct domed *domed, const struct domed_execution *execution, int *rpc_error,
                      dome_error *err) {
  json_t *arguments = execution->arguments;
  const char *language = json_string_value(json_object_get(arguments, "language"));
  const char *code = json_string_value(json_object_get(arguments, "code"));
  const char *interpreter = strcmp(language, "python") == 0 ? "/usr/bin/python3"
                            : strcmp(language, "bash") == 0 ? "/bin/bash"
                                                            : "/bin/sh";
  char *argv[] = {(char *)interpreter, (char *)"-c", (char *)code, NULL};

  /* Environment: a fixed base, the tool's secret environment, then the agent's own variables. Every
   * value given to the jail is redacted from every field (the guard's exact-value detectors). */
  json_t *environment = json_pack("{s:s,s:s,s:s}", "PATH", "/usr/local/bin:/usr/bin:/bin", "HOME",
                                  "/workspace", "LANG", "C.UTF-8");
  json_t *secrets = control_tool_secret_env(domed->store, DOMED_BUILTIN_TOOL);
  json_t *agent_env = json_object_get(arguments, "env");
  json_object_update(environment, secrets);
  if (agent_env) json_object_update(environment, agent_env);
  size_t env_count = json_object_size(environment);
  char **env = calloc(env_count + 1, sizeof(char *));
  struct guard_secret *guard_secrets = calloc(env_count + 1, sizeof *guard_secrets);
  size_t secret_count = 0, e = 0;
  const char *key;
  json_t *value;
  json_object_foreach(environment, key, value) {
    if (asprintf(&env[e++], "%s=%s", key, json_string_value(value)) < 0) env[--e] = NULL;
    bool given = json_object_get(secrets, key) || (agent_env && json_object_get(agent_env, key));
    if (given)
      guard_secrets[secret_count++] =
          (struct guard_secret){key, json_string_value(value), strlen(json_string_value(value))};
  }

  json_t *files = json_object_get(arguments, "files");
  size_t file_count = json_object_size(files), f = 0;
  struct jail_input_file *input_files = calloc(file_count + 1, sizeof *input_files);
  json_object_foreach(files, key, value) input_files[f++] = (struct jail_input_file){
      .path = key, .data = json_string_value(value), .length = json_string_length(value)};

  char *classification = classification_text(execution->tool);
  struct guard_options guard_options = {
      .classification = classification,
      .secrets = guard_secrets,
      .secret_count = secret_count,
  };
  struct run_context run = {.domed = domed, .execution = execution};
  void *guard_handle = NULL;
  json_t *denials = NULL;
  json_t *result = NULL;
  struct jail_result jail_result;
  memset(&jail_result, 0, sizeof jail_result);
  uint64_t phase_start = domed_now_us();
  int rc = domed_guard_acquire(&guard_options, &run.guard, &guard_handle, err);
  if (rc < 0) {
    dome_error_wrap(err, "guard");
    *rpc_error = MCP_INTERNAL_ERROR;
    goto out;
  }
  if (mcp_call_wants_progress(execution->call)) {
    guard_stream_open(run.guard, "stdout", &run.streams[1], err);
    guard_stream_open(run.guard, "stderr", &run.streams[2], err);
  }

  json_t *start = base_event(execution, "exec.start");
  char code_hash[crypto_hash_sha256_BYTES * 2 + 1];
  unsigned char digest[crypto_hash_sha256_BYTES];
  crypto_hash_sha256(digest, (const unsigned char *)code, strlen(code));
  sodium_bin2hex(code_hash, sizeof code_hash, digest, sizeof digest);
  json_object_set_new(start, "language", json_string(language));
  json_object_set_new(start, "code_sha256", json_string(code_hash));
  json_object_set_new(start, "code_bytes", json_integer((json_int_t)strlen(code)));
  json_object_set_new(
      start, "limits",
      json_pack("{s:I,s:f,s:I,s:I,s:I,s:I}", "memory_bytes", (json_int_t)execution->quota.memory_bytes,
                "cpus", execution->quota.cpus, "pids", (json_int_t)execution->quota.pids, "timeout_ms",
                (json_int_t)execution->quota.timeout_ms, "workspace_bytes",
                (json_int_t)execution->quota.workspace_bytes, "output_bytes",
                (json_int_t)execution->quota.output_bytes));
  domed_audit_append(domed, start);
  json_decref(start);

  struct jail_config config;
  jail_config_init(&config);
  config.argv = argv;
  config.env = env;
  const char *stdin_text = json_string_value(json_object_get(arguments, "stdin"));
  if (stdin_text) {
    config.stdin_data = stdin_text;
    config.stdin_length = json_string_length(json_object_get(arguments, "stdin"));
  }
  config.input_files = input_files;
  config.input_file_count = file_count;
  config.image = domed->config.image;
  config.memory_bytes = execution->quota.memory_bytes;
  config.pids = (uint32_t)execution->quota.pids;
  config.cpus = execution->quota.cpus;
  config.timeout_ms = execution->quota.timeout_ms;
  config.workspace_bytes = execution->quota.workspace_bytes;
  config.output_limit = execution->quota.output_bytes;
  config.cancel_fd = mcp_call_cancel_fd(execution->call);
  config.hook_context = &run;
  config.on_output = on_output;
  config.on_cgroup_ready = on_cgroup_ready;
  atomic_fetch_add(&domed->metrics.executions, 1);
  atomic_fetch_add(&domed->metrics.phase_sum_us[DOMED_PHASE_GUARD], domed_now_us() - phase_start);
  phase_start = domed_now_us();
  rc = jail_run(&config, &jail_result, err);
  uint64_t jail_us = domed_now_us() - phase_start;
  domed_kernel_finish(domed, &run.kernel_run);
  denials = run.kernel_run.denials ? json_incref(run.kernel_run.denials) : json_array();
  atomic_fetch_add(&domed->metrics.denials_kernel, run.kernel_run.count);
  size_t d;
  json_t *denial;
  json_array_foreach(denials, d, denial) {
    json_t *event = base_event(execution, "exec.denial");
    json_object_update(event, denial);
    domed_audit_append(domed, event);
    json_decref(event);
  }
  for (int s = 1; s <= 2; s++)
    if (run.streams[s]) {
      struct guard_sink sink = {.emit = emit_progress, .context = &run};
      run.stream = s;
      dome_error ignored;
      guard_stream_finish(run.streams[s], &sink, &ignored);
    }
  json_t *end = base_event(execution, "exec.end");
  if (rc < 0) {
    atomic_fetch_add(&domed->metrics.execution_errors, 1);
    json_object_set_new(end, "error", json_string(err->message));
    uint64_t seq = domed_audit_append(domed, end);
    json_decref(end);
    dome_error sync_err = {0};
    if (domed_audit_sync(domed, seq, &sync_err) < 0) {
      *rpc_error = MCP_INTERNAL_ERROR;
      *err = sync_err;
      goto out;
    }
    char text[1200];
    snprintf(text, sizeof text, "execution failed: %s", err->message);
    result = tool_error(text);
    goto out;
  }
  if (jail_result.timed_out) atomic_fetch_add(&domed->metrics.timeouts, 1);
  if (jail_result.oom_killed) atomic_fetch_add(&domed->metrics.oom_kills, 1);
  if (jail_result.cancelled) atomic_fetch_add(&domed->metrics.cancellations, 1);

  char *out_text =
      utf8_sanitize(jail_result.stdout_data ? jail_result.stdout_data : "", jail_result.stdout_length);
  char *err_text =
      utf8_sanitize(jail_result.stderr_data ? jail_result.stderr_data : "", jail_result.stderr_length);
  json_t *paths = json_array();
  for (size_t i = 0; i < jail_result.output_path_count; i++) {
    char *clean = utf8_sanitize(jail_result.output_paths[i], strlen(jail_result.output_paths[i]));
    json_array_append_new(paths, json_string(clean ? clean : ""));
    free(clean);
  }
  json_t *structured = json_pack(
      "{s:s,s:s,s:i,s:i,s:b,s:b,s:I,s:o,s:O,s:b,s:O,s:b,s:I,s:I,s:I,s:s}", "stdout", out_text ? out_text : "",
      "stderr", err_text ? err_text : "", "exit_code", jail_result.exit_code, "signal", jail_result.signal,
      "timed_out", jail_result.timed_out, "oom_killed", jail_result.oom_killed, "duration_ms",
      (json_int_t)jail_result.duration_ms, "output_paths", paths, "env_vars", environment, "truncated",
      jail_result.truncated, "denials", denials, "cancelled", jail_result.cancelled, "peak_pids",
      (json_int_t)jail_result.peak_pids, "cpu_ms", (json_int_t)jail_result.cpu_ms, "peak_memory_bytes",
      (json_int_t)jail_result.peak_memory_bytes, "enforcement",
      jail_enforcement_name(jail_result.enforcement));
  free(out_text);
  free(err_text);
  if (jail_us > jail_result.duration_ms * 1000u)
    atomic_fetch_add(&domed->metrics.phase_sum_us[DOMED_PHASE_JAIL_SETUP],
                     jail_us - jail_result.duration_ms * 1000u);
  atomic_fetch_add(&domed->metrics.phase_sum_us[DOMED_PHASE_PROGRAM], jail_result.duration_ms * 1000u);
  phase_start = domed_now_us();
  struct guard_findings findings;
  memset(&findings, 0, sizeof findings);
  rc = guard_redact_json(run.guard, structured, &findings, err);
  if (rc < 0) {
    /* fail closed: nothing unredacted goes back */
    json_decref(structured);
    guard_findings_free(&findings);
    *rpc_error = MCP_INTERNAL_ERROR;
    dome_error_wrap(err, "redact result");
    json_decref(end);
    goto out;
  }
  json_t *redactions = redaction_summary(&findings);
  atomic_fetch_add(&domed->metrics.redactions, findings.count);
  json_object_set(structured, "redactions", redactions);
  size_t i;
  json_t *entry;
  json_array_foreach(redactions, i, entry) {
    json_t *event = base_event(execution, "exec.redaction");
    json_object_update(event, entry);
    json_t *hashes = json_array();
    for (size_t k = 0; k < findings.count && json_array_size(hashes) < 16; k++)
      if (strcmp(findings.items[k].field, json_string_value(json_object_get(entry, "field"))) == 0 &&
          strcmp(findings.items[k].detector, json_string_value(json_object_get(entry, "detector"))) == 0)
        json_array_append_new(hashes, json_string(findings.items[k].hmac_hex));
    json_object_set_new(event, "hmac", hashes);
    domed_audit_append(domed, event);
    json_decref(event);
  }
  json_decref(redactions);
  guard_findings_free(&findings);
  json_object_set_new(end, "exit_code", json_integer(jail_result.exit_code));
  json_object_set_new(end, "signal", json_integer(jail_result.signal));
  json_object_set_new(end, "timed_out", json_boolean(jail_result.timed_out));
  json_object_set_new(end, "oom_killed", json_boolean(jail_result.oom_killed));
  json_object_set_new(end, "cancelled", json_boolean(jail_result.cancelled));
  json_object_set_new(end, "truncated", json_boolean(jail_result.truncated));
  json_object_set_new(end, "duration_ms", json_integer((json_int_t)jail_result.duration_ms));
  json_object_set_new(end, "cpu_ms", json_integer((json_int_t)jail_result.cpu_ms));
  json_object_set_new(end, "peak_memory_bytes", json_integer((json_int_t)jail_result.peak_memory_bytes));
  json_object_set_new(end, "peak_pids", json_integer((json_int_t)jail_result.peak_pids));
  json_object_set_new(end, "output_paths", json_integer((json_int_t)jail_result.output_path_count));
  json_object_set_new(end, "enforcement", json_string(jail_enforcement_name(jail_result.enforcement)));
  uint64_t seq = domed_audit_append(domed, end);
  json_decref(end);
  atomic_fetch_add(&domed->metrics.phase_sum_us[DOMED_PHASE_REDACT], domed_now_us() - phase_start);
  phase_start = domed_now_us();
  /* the result goes back only once every event of the execution is durable */
  if (domed_audit_sync(domed, seq, err) < 0) {
    json_decref(structured);
    *rpc_error = MCP_INTERNAL_ERROR;
    dome_error_wrap(err, "journal");
    goto out;
  }
  atomic_fetch_add(&domed->metrics.phase_sum_us[DOMED_PHASE_JOURNAL], domed_now_us() - phase_start);
  char *text = json_dumps(structured, JSON_COMPACT);
  result = json_pack("{s:[{s:s,s:s}],s:o,s:b}", "content", "type", "text", "text", text ? text : "{}",
                     "structuredContent", structured, "isError", 0);
  free(text);
out:
  for (int s = 1; s <= 2; s++) guard_stream_close(run.streams[s]);
  domed_guard_release(guard_handle);
  jail_result_release(&jail_result);
  free(classification);
  free(input_files);
  free(guard_secrets);
  free_strings(env);
  json_decref(denials);
  json_decref(run.kernel_run.denials);
  json_decref(secrets);
  json_decref(environment);
  return result;
}
