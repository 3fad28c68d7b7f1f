/* execute_code: one program in a fresh jail (supervisor/jail/jail.h) with the quota of the tool's
 * capability, output streamed as progress after redaction, the result redacted by the tool's field
 * classification (supervisor/guards/guard.h), and every step journalled and synced before the result
 * is returned. */
#include <errno.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "supervisor/common/utf8.h"
#include "supervisor/guards/guard.h"
#include "supervisor/jail/jail.h"
#include "supervisor/replay/replay.h"
#include "supervisor/domed/domed.h"

struct run_context {
  struct domed *domed;
  const struct domed_execution *execution;
  struct guard *guard;
  struct guard_stream *streams[3]; /* [1] stdout, [2] stderr */
  uint64_t streamed;
  int stream;         /* being fed */
  uint64_t offset_ms; /* of the chunk being fed, since the program started */
  /* The output event being gathered: redacted bytes of one stream, journalled as one exec.output and
   * sent as one progress notification once it holds output_event_bytes, is output_event_ms old, the
   * other stream emits, or the program is quiet. Events therefore keep the order of the two streams. */
  char *event;
  size_t event_length;
  int event_stream;
  uint64_t event_offset_ms;   /* when its first byte was emitted */
  uint64_t last_output_ms[3]; /* when the program last wrote to each stream */
  bool quiet_flushed[3];      /* its held-back bytes were released since */
  /* Redacted output as recorded in exec.output: an incomplete UTF-8 sequence at a chunk's end waits
   * for the next chunk; digest and size of each whole redacted stream for exec.end. */
  char carry[3][4];
  size_t carry_length[3];
  crypto_hash_sha256_state digest[3];
  uint64_t bytes[3];
  json_t *capabilities; /* the agent's, for the kernel tables and the denials' requests */
  struct domed_kernel_run kernel_run;
  uint64_t attach_us; /* time attaching the kernel layer (inside jail_run), microseconds */
  /* The first event of the execution the journal refused (0: none): the program is cancelled and the
   * call fails closed; journal_err says why. */
  int journal_rc;
  dome_error journal_err;
  struct domed_egress_run egress; /* egress.c: the jail's network path, when its rules permit one */
};

static json_t *base_event(const struct domed_execution *execution, const char *type);

/* Append an event of the running execution; on a refusal remember it and cancel the program (its
 * result is never answered). Returns 0 or the refusal. */
static int append_running(struct run_context *run, json_t *event) {
  dome_error err = {0};
  int rc = domed_audit_append(run->domed, event, NULL, &err);
  if (rc < 0 && run->journal_rc == 0) {
    run->journal_rc = rc;
    run->journal_err = err;
    uint64_t one = 1;
    int cancel_fd = mcp_call_cancel_fd(run->execution->call);
    if (cancel_fd >= 0 && write(cancel_fd, &one, sizeof one) < 0)
      domed_log("error", "execute", "msg=\"cannot cancel the execution: %s\"", strerror(errno));
  }
  return rc;
}

static int on_cgroup_ready(void *context, const struct jail_cgroup *leaf, dome_error *err) {
  struct run_context *run = context;
  struct domed_principal principal = {
      .agent = run->execution->identity->agent,
      .capabilities = run->capabilities,
      .gateway = run->execution->identity->gateway,
  };
  uint64_t attach_start = domed_now_us();
  int rc = domed_kernel_attach(run->domed, &run->kernel_run, leaf, &principal, run->execution->rules,
                               run->execution->quota.egress, err);
  run->attach_us += domed_now_us() - attach_start;
  if (rc < 0) return rc;
  /* the "jail set-up" step of the execution's timeline */
  json_t *event = base_event(run->execution, "exec.jail");
  json_object_set_new(event, "jail_id", json_string(leaf->jail_id ? leaf->jail_id : ""));
  json_object_set_new(event, "cgroup_id", json_integer((json_int_t)leaf->id));
  json_object_set_new(event, "offset_ms", json_integer(0));
  /* enforcement of this jail's network and files by cgroup BPF: "none", "reduced" or "full", and the
   * kernel ruleset (0: every connect/bind/send denied) */
  json_object_set_new(event, "kernel", json_string(run->kernel_run.level ? run->kernel_run.level : "none"));
  json_object_set_new(event, "ruleset", json_integer(run->kernel_run.ruleset));
  rc = append_running(run, event);
  json_decref(event);
  if (rc < 0) return dome_error_set(err, -rc, "exec.jail not journalled: %s", run->journal_err.message);
  return 0;
}

static int on_namespaces_ready(void *context, pid_t child_pid, dome_error *err) {
  return domed_egress_namespaces_ready(&((struct run_context *)context)->egress, child_pid, err);
}

/* Valid UTF-8 of carry + data[0..length) as a new JSON string; invalid bytes become U+FFFD, and an
 * incomplete sequence at the very end is kept in the carry for the next chunk (so the concatenated
 * chunks do not depend on where the jail's reads cut the output, as supervisor/replay records it). */
static json_t *utf8_chunk(char carry[4], size_t *carry_length, const char *data, size_t length) {
  size_t out_length = 0;
  char *clean = dome_utf8_sanitize_chunk(carry, carry_length, data, length, true, &out_length);
  if (clean == NULL) return NULL;
  json_t *text = json_stringn(clean, out_length);
  free(clean);
  return text;
}

/* One redacted chunk: journalled as exec.output (always), sent as progress when the client asked. */
static void record_output(struct run_context *run, int stream, json_t *text, uint64_t offset_ms) {
  size_t length = json_string_length(text);
  if (length == 0) return;
  crypto_hash_sha256_update(&run->digest[stream], (const unsigned char *)json_string_value(text), length);
  run->bytes[stream] += length;
  json_t *event = base_event(run->execution, "exec.output");
  json_object_set_new(event, "stream", json_string(stream == 1 ? "stdout" : "stderr"));
  json_object_set_new(event, "offset_ms", json_integer((json_int_t)offset_ms));
  json_object_set_new(event, "bytes", json_integer((json_int_t)length));
  json_object_set(event, "data", text);
  append_running(run, event);
  json_decref(event);
  if (!mcp_call_wants_progress(run->execution->call)) return;
  char *message = NULL;
  if (asprintf(&message, "[%s] %s", stream == 1 ? "stdout" : "stderr", json_string_value(text)) < 0) return;
  run->streamed += length;
  mcp_call_progress(run->execution->call, (double)run->streamed, message);
  free(message);
}

/* The gathered output event out: journalled and sent (an incomplete UTF-8 sequence at its end waits for
 * the stream's next event). */
static int flush_event(struct run_context *run) {
  if (run->event_length == 0) return 0;
  int s = run->event_stream;
  json_t *text = utf8_chunk(run->carry[s], &run->carry_length[s], run->event, run->event_length);
  run->event_length = 0;
  if (text == NULL) return -ENOMEM;
  record_output(run, s, text, run->event_offset_ms);
  json_decref(text);
  return 0;
}

/* Redacted bytes of stream run->stream: gathered into output events (see struct run_context). */
static int emit_output(const char *data, size_t length, void *context) {
  struct run_context *run = context;
  size_t most = run->domed->config.output_event_bytes;
  if (run->event == NULL && (run->event = malloc(most)) == NULL) return -ENOMEM;
  while (length > 0) {
    if (run->event_length > 0 && run->event_stream != run->stream && flush_event(run) < 0) return -ENOMEM;
    if (run->event_length == 0) {
      run->event_stream = run->stream;
      run->event_offset_ms = run->offset_ms;
    }
    size_t n = most - run->event_length < length ? most - run->event_length : length;
    memcpy(run->event + run->event_length, data, n);
    run->event_length += n;
    data += n;
    length -= n;
    if (run->event_length == most && flush_event(run) < 0) return -ENOMEM;
  }
  return 0;
}

static void flush_event_if_old(struct run_context *run, uint64_t offset_ms) {
  if (run->event_length && offset_ms >= run->event_offset_ms + run->domed->config.output_event_ms)
    flush_event(run);
}

static void on_output(void *context, int stream, const char *data, size_t length, uint64_t offset_ms) {
  struct run_context *run = context;
  if (stream < 1 || stream > 2 || run->streams[stream] == NULL) return;
  struct guard_sink sink = {.emit = emit_output, .context = run};
  run->stream = stream;
  run->offset_ms = offset_ms;
  run->last_output_ms[stream] = offset_ms;
  run->quiet_flushed[stream] = false;
  dome_error err;
  if (guard_stream_feed(run->streams[stream], data, length, &sink, &err) < 0) {
    guard_stream_close(run->streams[stream]);
    run->streams[stream] = NULL;
  }
  flush_event_if_old(run, offset_ms);
}

/* While the program runs: a stream it has not written to for progress_quiet_ms releases its held-back
 * bytes that no detector can still match (guard_stream_flush keeps the redaction exact), and the
 * gathered event goes out at once, so a short line reaches the agent as it is written. */
static void on_tick(void *context, uint64_t offset_ms) {
  struct run_context *run = context;
  run->offset_ms = offset_ms;
  bool released = false;
  for (int s = 1; s <= 2; s++) {
    if (run->streams[s] == NULL || run->quiet_flushed[s] ||
        offset_ms < run->last_output_ms[s] + run->domed->config.progress_quiet_ms)
      continue;
    run->quiet_flushed[s] = true;
    if (guard_stream_held_bytes(run->streams[s]) == 0) continue;
    struct guard_sink sink = {.emit = emit_output, .context = run};
    run->stream = s;
    dome_error err;
    if (guard_stream_flush(run->streams[s], &sink, &err) < 0) {
      guard_stream_close(run->streams[s]);
      run->streams[s] = NULL;
    }
    released = true;
  }
  if (released)
    flush_event(run);
  else
    flush_event_if_old(run, offset_ms);
}

/* End of the program: the held-back bytes of each stream, then a lone incomplete sequence as U+FFFD. */
static void finish_output(struct run_context *run, uint64_t offset_ms) {
  run->offset_ms = offset_ms;
  for (int s = 1; s <= 2; s++) {
    if (run->streams[s] == NULL) continue;
    struct guard_sink sink = {.emit = emit_output, .context = run};
    run->stream = s;
    dome_error ignored;
    guard_stream_finish(run->streams[s], &sink, &ignored);
  }
  flush_event(run);
  for (int s = 1; s <= 2; s++) {
    if (run->streams[s] == NULL || run->carry_length[s] == 0) continue;
    run->carry_length[s] = 0;
    json_t *replacement = json_string("\xEF\xBF\xBD");
    record_output(run, s, replacement, offset_ms);
    json_decref(replacement);
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

/* Where the inputs of one exec.start go: inline while each is at most REPLAY_BLOB_INLINE_MAX bytes and
 * all together at most DOMED_INPUTS_INLINE_BUDGET, else by digest with the bytes in the blob store
 * (charged to the tool's capability, within its blob_bytes quota) or `<member>_stored` false. */
struct input_budget {
  struct domed *domed;
  const char *capability;
  uint64_t blob_bytes;
  size_t inline_left;
};

/* An input of exec.start (docs/simulate-replay.md). Returns 0 or the blob store's write error. */
static int record_input(struct input_budget *budget, json_t *holder, const char *member, const char *data,
                        size_t length, dome_error *err) {
  size_t inline_max =
      budget->inline_left < REPLAY_BLOB_INLINE_MAX ? budget->inline_left : REPLAY_BLOB_INLINE_MAX;
  if (length <= inline_max) budget->inline_left -= length;
  return domed_audit_record_input(budget->domed, holder, member, data, length, inline_max, budget->capability,
                                  budget->blob_bytes, err);
}

/* exec.start with every input a re-run needs: code, stdin, files, image, limits, classification, and the
 * environment: its names; the agent's own values (non-secret, shown in output as printed) in `env_values`
 * when they total at most REPLAY_BLOB_INLINE_MAX bytes and fit the inline budget, and its values shorter than
 * REPLAY_SECRET_MIN_BYTES in `env_short_values`; never the tool's secret values, whose names (those the
 * agent did not replace) are `env_secret_names`, redacted from output. NULL with *err when an input could
 * not be stored. */
static json_t *start_event(struct domed *domed, const struct domed_execution *execution, json_t *secrets,
                           json_t *agent_env, const char *classification, dome_error *err) {
  json_t *arguments = execution->arguments;
  const char *capability = json_string_value(json_object_get(execution->tool, "capability"));
  struct input_budget budget = {
      .domed = domed,
      .capability = capability ? capability : DOMED_BUILTIN_CAPABILITY,
      .blob_bytes = execution->quota.blob_bytes,
      .inline_left = DOMED_INPUTS_INLINE_BUDGET,
  };
  json_t *start = base_event(execution, "exec.start");
  json_object_set(start, "language", json_object_get(arguments, "language"));
  json_object_set_new(start, "image", json_string(domed->config.image));
  json_object_set_new(
      start, "limits",
      json_pack("{s:I,s:f,s:I,s:I,s:I,s:I}", "memory_bytes", (json_int_t)execution->quota.memory_bytes,
                "cpus", execution->quota.cpus, "pids", (json_int_t)execution->quota.pids, "timeout_ms",
                (json_int_t)execution->quota.timeout_ms, "workspace_bytes",
                (json_int_t)execution->quota.workspace_bytes, "output_bytes",
                (json_int_t)execution->quota.output_bytes));
  json_object_set_new(start, "classification", json_string(classification ? classification : ""));
  json_t *code = json_object_get(arguments, "code");
  int rc = record_input(&budget, start, "code", json_string_value(code), json_string_length(code), err);
  json_t *stdin_value = json_object_get(arguments, "stdin");
  if (rc == 0 && json_is_string(stdin_value))
    rc = record_input(&budget, start, "stdin", json_string_value(stdin_value),
                      json_string_length(stdin_value), err);
  json_t *files = json_array();
  const char *path;
  json_t *content;
  json_object_foreach(json_object_get(arguments, "files"), path, content) {
    if (rc < 0) break;
    json_t *file = json_pack("{s:s}", "path", path);
    rc = record_input(&budget, file, "content", json_string_value(content), json_string_length(content), err);
    json_array_append_new(files, file);
  }
  json_object_set_new(start, "files", files);
  json_t *names = json_array(), *short_values = json_object(), *values = json_object();
  json_t *secret_names = json_array();
  const char *name;
  json_t *value;
  size_t value_bytes = 0;
  json_object_foreach(secrets, name, value) {
    json_array_append_new(names, json_string(name));
    if (json_object_get(agent_env, name) == NULL) json_array_append_new(secret_names, json_string(name));
  }
  json_object_foreach(agent_env, name, value) {
    if (json_object_get(secrets, name) == NULL) json_array_append_new(names, json_string(name));
    if (json_string_length(value) < REPLAY_SECRET_MIN_BYTES) json_object_set(short_values, name, value);
    json_object_set(values, name, value);
    value_bytes += json_string_length(value);
  }
  json_object_set_new(start, "env_names", names);
  json_object_set_new(start, "env_short_values", short_values);
  if (value_bytes <= REPLAY_BLOB_INLINE_MAX && value_bytes <= budget.inline_left) {
    budget.inline_left -= value_bytes; /* charged as the inline inputs are */
    json_object_set_new(start, "env_values", values);
  } else {
    json_decref(values);
  }
  json_object_set_new(start, "env_secret_names", secret_names);
  if (rc < 0) {
    json_decref(start);
    return NULL;
  }
  return start;
}

/* "203.0.113.7:443" / "[::1]:80" -> ip, port. false when the object is no address. */
static bool split_address(const char *object, char *ip, size_t size, long *port) {
  const char *colon = strrchr(object, ':');
  if (colon == NULL || colon == object) return false;
  const char *host = object, *host_end = colon;
  if (object[0] == '[') {
    if (colon[-1] != ']') return false;
    host++;
    host_end--;
  }
  char *end;
  *port = strtol(colon + 1, &end, 10);
  if (*end || colon[1] == '\0' || *port < 0 || *port > 65535 || (size_t)(host_end - host) >= size)
    return false;
  memcpy(ip, host, (size_t)(host_end - host));
  ip[host_end - host] = '\0';
  return ip[0] != '\0';
}

/* The Cedar request a kernel denial answered, in the shape of docs/simulate-replay.md (`dome rules
 * simulate` re-evaluates it): net:* on Dome::Network::"loopback"/"egress" with context {dst_ip, dst_port,
 * protocol}, fs:* on Dome::Path::"<path>". NULL when the hook's object names neither (sock_create,
 * egress byte quota, ptrace, ...). The kernel event does not carry the protocol: connect and bind are
 * recorded as "tcp", sendmsg (unconnected datagrams) as "udp". */
static json_t *denial_request(struct run_context *run, const char *hook, const char *action,
                              const char *object) {
  json_t *resource = NULL, *context = NULL;
  if (strncmp(action, "net:", 4) == 0) {
    char ip[64];
    long port;
    if (!split_address(object, ip, sizeof ip, &port)) return NULL;
    bool loopback =
        strncmp(ip, "127.", 4) == 0 || strcmp(ip, "::1") == 0 || strncmp(ip, "::ffff:127.", 11) == 0;
    resource = json_pack("{s:s,s:s}", "type", "Dome::Network", "id", loopback ? "loopback" : "egress");
    context = json_pack("{s:s,s:i,s:s}", "dst_ip", ip, "dst_port", (int)port, "protocol",
                        strncmp(hook, "sendmsg", 7) == 0 ? "udp" : "tcp");
  } else {
    if (object[0] != '/') return NULL;
    resource = json_pack("{s:s,s:s}", "type", "Dome::Path", "id", object);
    context = json_object();
  }
  const char *agent = run->execution->identity->agent, *gateway = run->execution->identity->gateway;
  json_t *entities =
      json_pack("[{s:{s:s,s:s},s:{s:O},s:[{s:s,s:s}]},{s:{s:s,s:s},s:{},s:[]}]", "uid", "type", "Dome::Agent",
                "id", agent, "attrs", "capabilities", run->capabilities, "parents", "type", "Dome::Gateway",
                "id", gateway, "uid", "type", "Dome::Gateway", "id", gateway, "attrs", "parents");
  return json_pack("{s:{s:s,s:s},s:{s:s,s:s},s:o,s:o,s:o}", "principal", "type", "Dome::Agent", "id", agent,
                   "action", "type", "Dome::Action", "id", action, "resource", resource, "context", context,
                   "entities", entities);
}

/* exec.denial: the kernel's report plus decision, determining policy, why (`reason` "quota" when the
 * capability's quota denied all network whatever the rules: simulation keeps such denials) and the
 * request where the object names one. */
static json_t *denial_event(struct run_context *run, json_t *denial) {
  json_t *event = base_event(run->execution, "exec.denial");
  json_object_update(event, denial);
  const char *policy = json_string_value(json_object_get(denial, "policy"));
  if (policy) json_object_set_new(event, "policy_id", json_string(policy));
  json_object_set_new(event, "decision", json_string("deny"));
  json_object_set_new(event, "determining", policy ? json_pack("[s]", policy) : json_array());
  json_object_set_new(event, "reason",
                      json_string(run->kernel_run.reason ? run->kernel_run.reason : "policy"));
  const char *hook = json_string_value(json_object_get(denial, "hook"));
  const char *action = json_string_value(json_object_get(denial, "action"));
  const char *object = json_string_value(json_object_get(denial, "object"));
  json_t *request = hook && action && object ? denial_request(run, hook, action, object) : NULL;
  if (request) json_object_set_new(event, "request", request);
  return event;
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

  /* Environment: a fixed base, the tool's secret environment, then the agent's own variables. The
   * operator's secret values are redacted from every field (the guard's exact-value detectors), also
   * when the agent's variable of the same name replaced one; the agent's own values are its input,
   * documented as non-secret, and come back as printed (the detectors still apply to them). */
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
  }
  json_object_foreach(secrets, key, value) {
    if (secret_count < env_count)
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
  struct domed_path_rules *path_rules = NULL;
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
  /* the redacted output is journalled for every execution (exec.output), streamed as progress on request */
  if ((rc = guard_stream_open(run.guard, "stdout", &run.streams[1], err)) < 0 ||
      (rc = guard_stream_open(run.guard, "stderr", &run.streams[2], err)) < 0) {
    dome_error_wrap(err, "guard");
    *rpc_error = MCP_INTERNAL_ERROR;
    goto out;
  }
  for (int s = 1; s <= 2; s++) crypto_hash_sha256_init(&run.digest[s]);
  json_t *record = control_agent_get(domed->store, execution->identity->agent);
  json_t *capabilities = json_object_get(record, "capabilities");
  run.capabilities = json_is_array(capabilities) ? json_incref(capabilities) : json_array();
  json_decref(record);

  json_t *start = start_event(domed, execution, secrets, agent_env, classification, err);
  if (start == NULL) { /* an input could not be kept: nothing runs that the journal cannot replay */
    *rpc_error = MCP_INTERNAL_ERROR;
    dome_error_wrap(err, "journal the inputs");
    goto out;
  }
  /* nothing runs before its decision and its start are durable (the start's sync covers the decision) */
  uint64_t start_ticket = 0;
  rc = domed_audit_append(domed, start, &start_ticket, err);
  json_decref(start);
  if (rc == 0) rc = domed_audit_sync_span(domed, execution->decision_ticket, start_ticket, err);
  if (rc < 0) {
    *rpc_error = MCP_INTERNAL_ERROR;
    dome_error_wrap(err, "exec.start could not be journalled (fail closed)");
    goto out;
  }

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
  config.on_tick = on_tick;
  unsigned quiet_ms = domed->config.progress_quiet_ms, event_ms = domed->config.output_event_ms;
  config.tick_ms = (event_ms && event_ms < quiet_ms ? event_ms : quiet_ms) / 2;
  if (config.tick_ms < 5) config.tick_ms = 5;
  config.on_cgroup_ready = on_cgroup_ready;
  atomic_fetch_add(&domed->metrics.executions, 1);
  atomic_fetch_add(&domed->metrics.phase_sum_us[DOMED_PHASE_GUARD], domed_now_us() - phase_start);
  phase_start = domed_now_us();
  /* the agent's file rules as the jail's Landlock path rules (none: the jail's baseline) */
  struct domed_principal principal = {.agent = execution->identity->agent,
                                      .capabilities = run.capabilities,
                                      .gateway = execution->identity->gateway};
  rc = domed_kernel_path_rules(domed, &principal, execution->rules, &path_rules, err);
  if (rc == 0)
    rc = domed_egress_prepare(domed, &principal, execution->rules, &execution->quota, &config, &run.egress,
                              err);
  if (rc == 0) {
    config.path_rules = domed_path_rules_list(path_rules, &config.path_rule_count);
    /* Only when an egress path is built into the jail's network namespace: without the hook the jail
     * makes its namespace beside its mounts (supervisor/jail/child.c), which starts it sooner. */
    if (run.egress.wanted) config.on_namespaces_ready = on_namespaces_ready;
    rc = jail_run(&config, &jail_result, err);
  }
  domed_egress_finish(&run.egress);
  uint64_t jail_us = domed_now_us() - phase_start;
  uint64_t finish_start = domed_now_us();
  domed_kernel_finish(domed, &run.kernel_run);
  atomic_fetch_add(&domed->metrics.phase_sum_us[DOMED_PHASE_KERNEL],
                   run.attach_us + (domed_now_us() - finish_start));
  jail_us = jail_us > run.attach_us ? jail_us - run.attach_us : 0; /* the jail's own set-up and teardown */
  denials = run.kernel_run.denials ? json_incref(run.kernel_run.denials) : json_array();
  atomic_fetch_add(&domed->metrics.denials_kernel, run.kernel_run.count);
  finish_output(&run, jail_result.duration_ms);
  size_t d;
  json_t *denial;
  json_array_foreach(denials, d, denial) {
    json_t *event = denial_event(&run, denial);
    append_running(&run, event);
    json_decref(event);
  }
  json_t *end = base_event(execution, "exec.end");
  json_object_set_new(end, "jail_id", json_string(jail_result.jail_id));
  json_object_set_new(end, "offset_ms", json_integer((json_int_t)jail_result.duration_ms));
  json_object_set_new(end, "kernel", json_string(run.kernel_run.level ? run.kernel_run.level : "none"));
  json_object_set_new(end, "denials", json_integer((json_int_t)json_array_size(denials)));
  for (int s = 1; s <= 2; s++) {
    unsigned char digest[crypto_hash_sha256_BYTES];
    char hex[crypto_hash_sha256_BYTES * 2 + 1];
    crypto_hash_sha256_final(&run.digest[s], digest);
    sodium_bin2hex(hex, sizeof hex, digest, sizeof digest);
    json_object_set_new(end, s == 1 ? "stdout_sha256" : "stderr_sha256", json_string(hex));
    json_object_set_new(end, s == 1 ? "stdout_bytes" : "stderr_bytes",
                        json_integer((json_int_t)run.bytes[s]));
  }
  if (rc < 0) {
    atomic_fetch_add(&domed->metrics.execution_errors, 1);
    json_object_set_new(end, "error", json_string(err->message));
    uint64_t seq = 0;
    dome_error sync_err = {0};
    int appended = domed_audit_append(domed, end, &seq, &sync_err);
    json_decref(end);
    if (appended < 0 || run.journal_rc < 0 ||
        domed_audit_sync_span(domed, execution->decision_ticket, seq, &sync_err) < 0) {
      if (appended == 0 && run.journal_rc < 0) sync_err = run.journal_err;
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

  char *out_text = dome_utf8_sanitize(jail_result.stdout_data ? jail_result.stdout_data : "",
                                      jail_result.stdout_length, true, NULL);
  char *err_text = dome_utf8_sanitize(jail_result.stderr_data ? jail_result.stderr_data : "",
                                      jail_result.stderr_length, true, NULL);
  json_t *paths = json_array();
  for (size_t i = 0; i < jail_result.output_path_count; i++) {
    char *clean =
        dome_utf8_sanitize(jail_result.output_paths[i], strlen(jail_result.output_paths[i]), true, NULL);
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
  json_object_set_new(structured, "pids_limited", json_boolean(jail_result.pids_limited));
  /* the limits the program ran under, the cgroup ones as the kernel holds them */
  json_object_set_new(
      structured, "limits",
      json_pack("{s:I,s:f,s:I,s:I,s:I,s:I,s:I}", "memory_bytes", (json_int_t)jail_result.limits.memory_bytes,
                "cpus", jail_result.limits.cpus, "pids", (json_int_t)jail_result.limits.pids, "timeout_ms",
                (json_int_t)jail_result.limits.timeout_ms, "workspace_bytes",
                (json_int_t)jail_result.limits.workspace_bytes, "output_bytes",
                (json_int_t)jail_result.limits.output_limit_bytes, "mcp_output_bytes",
                (json_int_t)(execution->quota.mcp_output_bytes ? execution->quota.mcp_output_bytes
                                                               : domed->config.mcp_output_limit_bytes)));
  domed_egress_report(&run.egress, structured);
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
    append_running(&run, event);
    json_decref(event);
  }
  json_decref(redactions);
  guard_findings_free(&findings);
  /* What the agent reads: each stream within the MCP output limit, and the line naming a limit that
   * ended the program (the journal keeps the redacted output as the jail kept it, above). */
  uint64_t mcp_limit = (uint64_t)json_integer_value(
      json_object_get(json_object_get(structured, "limits"), "mcp_output_bytes"));
  domed_output_limit(structured, "stdout", mcp_limit, jail_result.stdout_total_bytes,
                     jail_result.stdout_length);
  domed_output_limit(structured, "stderr", mcp_limit, jail_result.stderr_total_bytes,
                     jail_result.stderr_length);
  char notice[512];
  if (jail_limit_notice(&jail_result, notice, sizeof notice))
    domed_output_append_line(structured, "stderr", notice);
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
  domed_egress_report(&run.egress, end);
  uint64_t seq = 0;
  int appended = domed_audit_append(domed, end, &seq, err);
  json_decref(end);
  atomic_fetch_add(&domed->metrics.phase_sum_us[DOMED_PHASE_REDACT], domed_now_us() - phase_start);
  phase_start = domed_now_us();
  if (appended == 0 && run.journal_rc < 0) {
    appended = run.journal_rc;
    *err = run.journal_err;
  }
  /* the result goes back only once every event of the execution is durable */
  if (appended < 0 || domed_audit_sync_span(domed, execution->decision_ticket, seq, err) < 0) {
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
  free(run.event);
  domed_guard_release(guard_handle);
  domed_path_rules_release(path_rules);
  jail_result_release(&jail_result);
  free(classification);
  free(input_files);
  free(guard_secrets);
  free_strings(env);
  json_decref(denials);
  json_decref(run.kernel_run.denials);
  json_decref(secrets);
  json_decref(environment);
  json_decref(run.capabilities);
  return result;
}
