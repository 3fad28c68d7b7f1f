/* Run an execution's inputs in a fresh jail and record it in the journal shape replay reads
 * (docs/simulate-replay.md, "Journal records"): exec.start with every input, exec.jail, timed and redacted
 * exec.output chunks, exec.redaction, exec.end. */
#include <errno.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "supervisor/blob/blob.h"
#include "supervisor/common/utf8.h"
#include "supervisor/guards/guard.h"
#include "supervisor/jail/jail.h"
#include "supervisor/replay/replay_internal.h"

#define OUTPUT_CHUNK_MAX 16384 /* bytes of redacted output per exec.output event */

/* Valid UTF-8 of carry + data[0..length) as a new json string; invalid bytes (and NUL) become U+FFFD. An
 * incomplete sequence at the end is left in *carry (up to 3 bytes) for the next chunk. */
static json_t *utf8_string(const char *data, size_t length, char carry[4], size_t *carry_length) {
  size_t out_length = 0;
  char *out = dome_utf8_sanitize_chunk(carry, carry_length, data, length, true, &out_length);
  if (out == NULL) return NULL;
  json_t *result = json_stringn(out, out_length);
  free(out);
  return result;
}

struct run_state {
  const json_t *inputs;
  struct replay_kernel *kernel;
  replay_append_fn append;
  void *context;
  struct guard *guard;
  struct guard_stream *streams[3];
  char carry[3][4];
  size_t carry_length[3];
  json_t *text[3]; /* redacted output kept for the outcome, per stream */
  int stream;
  uint64_t offset_ms;
  struct guard_findings findings;
  int error;
  dome_error append_error;
};

static json_t *base_event(const json_t *inputs, const char *type) {
  json_t *event = json_pack("{s:s}", "type", type);
  static const char *ids[] = {"exec_id", "agent", "actas", "policy_version", "rerun_of"};
  for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) {
    json_t *value = json_object_get(inputs, ids[i]);
    if (json_is_string(value)) json_object_set(event, ids[i], value);
  }
  json_object_set_new(event, "tool", json_string("code-sandbox"));
  return event;
}

static int append_event(struct run_state *run, json_t *event) {
  int rc = 0;
  if (run->append && run->error == 0) {
    rc = run->append(run->context, event, &run->append_error);
    if (rc < 0) run->error = rc;
  }
  json_decref(event);
  return rc;
}

static int emit_chunk(const char *data, size_t length, void *context) {
  struct run_state *run = context;
  int s = run->stream;
  while (length > 0) {
    size_t n = length > OUTPUT_CHUNK_MAX ? OUTPUT_CHUNK_MAX : length;
    json_t *text = utf8_string(data, n, run->carry[s], &run->carry_length[s]);
    if (text == NULL) return -ENOMEM;
    if (json_string_length(text) > 0) {
      json_t *all = run->text[s];
      char *joined = malloc(json_string_length(all) + json_string_length(text) + 1);
      if (joined) {
        memcpy(joined, json_string_value(all), json_string_length(all));
        memcpy(joined + json_string_length(all), json_string_value(text), json_string_length(text));
        json_string_setn_nocheck(all, joined, json_string_length(all) + json_string_length(text));
        free(joined);
      }
      json_t *event = base_event(run->inputs, "exec.output");
      json_object_set_new(event, "stream", json_string(s == 1 ? "stdout" : "stderr"));
      json_object_set_new(event, "offset_ms", json_integer((json_int_t)run->offset_ms));
      json_object_set_new(event, "bytes", json_integer((json_int_t)json_string_length(text)));
      json_object_set_new(event, "data", text);
      append_event(run, event);
    } else {
      json_decref(text);
    }
    data += n;
    length -= n;
  }
  return 0;
}

static int on_finding(const struct guard_finding *finding, void *context) {
  struct run_state *run = context;
  return guard_findings_add(&run->findings, finding);
}

static void on_output(void *context, int stream, const char *data, size_t length, uint64_t offset_ms) {
  struct run_state *run = context;
  if (stream < 1 || stream > 2 || run->streams[stream] == NULL) return;
  run->stream = stream;
  run->offset_ms = offset_ms;
  struct guard_sink sink = {.emit = emit_chunk, .finding = on_finding, .context = run};
  dome_error ignored;
  if (guard_stream_feed(run->streams[stream], data, length, &sink, &ignored) < 0) {
    guard_stream_close(run->streams[stream]);
    run->streams[stream] = NULL;
    run->error = dome_error_set(&run->append_error, EIO, "redact %s", stream == 1 ? "stdout" : "stderr");
  }
}

static int on_cgroup_ready(void *context, const struct jail_cgroup *leaf, dome_error *err) {
  struct run_state *run = context;
  if (run->kernel) {
    int rc = replay_kernel_attach(run->kernel, leaf, err);
    if (rc < 0) return rc;
  }
  json_t *event = base_event(run->inputs, "exec.jail");
  json_object_set_new(event, "jail_id", json_string(leaf->jail_id ? leaf->jail_id : ""));
  json_object_set_new(event, "cgroup_id", json_integer((json_int_t)leaf->id));
  json_object_set_new(event, "offset_ms", json_integer(0));
  append_event(run, event);
  return 0;
}

/* An input kept inline, or as a blob when larger than REPLAY_BLOB_INLINE_MAX. */
static int record_input(json_t *start, const char *member, const char *data, size_t length,
                        const char *journal_dir, dome_error *err) {
  unsigned char digest[crypto_hash_sha256_BYTES];
  char hex[65];
  crypto_hash_sha256(digest, (const unsigned char *)data, length);
  sodium_bin2hex(hex, sizeof hex, digest, sizeof digest);
  char key[64];
  snprintf(key, sizeof key, "%s_sha256", member);
  json_object_set_new(start, key, json_string(hex));
  snprintf(key, sizeof key, "%s_bytes", member);
  json_object_set_new(start, key, json_integer((json_int_t)length));
  if (length <= REPLAY_BLOB_INLINE_MAX || journal_dir == NULL)
    return json_object_set_new(start, member, json_stringn(data, length)) < 0 ? -ENOMEM : 0;
  return blob_content_put(journal_dir, data, length, hex, err);
}

static json_t *start_event(const json_t *inputs, const char *journal_dir, const char *image,
                           dome_error *err) {
  json_t *start = base_event(inputs, "exec.start");
  json_t *code = json_object_get(inputs, "code");
  json_object_set(start, "language", json_object_get(inputs, "language"));
  json_object_set_new(start, "image", json_string(image));
  json_t *digest = json_object_get(inputs, "image_digest");
  if (digest) json_object_set(start, "image_digest", digest);
  json_t *limits = json_object_get(inputs, "limits");
  json_object_set_new(start, "limits", limits ? json_deep_copy(limits) : json_object());
  json_t *classification = json_object_get(inputs, "classification");
  if (classification) json_object_set(start, "classification", classification);
  int rc = record_input(start, "code", json_string_value(code), json_string_length(code), journal_dir, err);
  json_t *stdin_value = json_object_get(inputs, "stdin");
  if (rc == 0 && json_is_string(stdin_value))
    rc = record_input(start, "stdin", json_string_value(stdin_value), json_string_length(stdin_value),
                      journal_dir, err);
  json_t *files = json_array();
  const char *path;
  json_t *content;
  json_object_foreach((json_t *)json_object_get(inputs, "files"), path, content) {
    if (rc < 0) break;
    json_t *file = json_pack("{s:s}", "path", path);
    rc = record_input(file, "content", json_string_value(content), json_string_length(content), journal_dir,
                      err);
    json_array_append_new(files, file);
  }
  json_object_set_new(start, "files", files);
  /* Environment values are the agent's secrets: only their names are recorded, except values shorter than
   * the guard's minimum secret length, which are not redacted from output and so are no secret of the record
   * (kept so that a re-run reproduces them). */
  json_t *names = json_array(), *short_values = json_object();
  json_t *value;
  json_object_foreach((json_t *)json_object_get(inputs, "env"), path, value) {
    json_array_append_new(names, json_string(path));
    if (json_string_length(value) < REPLAY_SECRET_MIN_BYTES) json_object_set(short_values, path, value);
  }
  json_t *recorded_short = json_object_get(inputs, "env_short_values");
  if (json_object_size(short_values) == 0 && recorded_short) json_object_update(short_values, recorded_short);
  json_object_set_new(start, "env_short_values", short_values);
  /* a re-run records as domed does: the agent's values, the secrets' names */
  json_t *recorded_values = json_object_get(inputs, "env_values");
  if (recorded_values) json_object_set(start, "env_values", recorded_values);
  json_t *recorded_secret_names = json_object_get(inputs, "env_secret_names");
  if (recorded_secret_names) json_object_set(start, "env_secret_names", recorded_secret_names);
  json_t *recorded_names = json_object_get(inputs, "env_names");
  json_object_set_new(start, "env_names", json_array_size(names) ? names : json_incref(recorded_names));
  if (json_array_size(names) == 0) json_decref(names);
  if (json_object_get(start, "env_names") == NULL) json_object_set_new(start, "env_names", json_array());
  if (rc < 0) {
    json_decref(start);
    return NULL;
  }
  return start;
}

static uint64_t limit(const json_t *limits, const char *key) {
  json_t *value = json_object_get(limits, key);
  return json_is_number(value) && json_number_value(value) > 0 ? (uint64_t)json_number_value(value) : 0;
}

int replay_execute(const json_t *inputs, const replay_execute_options *options, json_t **outcome,
                   dome_error *err) {
  const char *journal_dir = options->journal_dir, *image_store = options->image_store;
  replay_append_fn append = options->append;
  void *context = options->context;
  if (outcome) *outcome = NULL;
  const char *language = json_string_value(json_object_get(inputs, "language"));
  const char *code = json_string_value(json_object_get(inputs, "code"));
  if (language == NULL || code == NULL)
    return dome_error_set(err, EINVAL, "inputs: `language` and `code` required");
  const char *image = json_string_value(json_object_get(inputs, "image"));
  if (image == NULL) image = JAIL_DEFAULT_IMAGE;
  const char *interpreter = strcmp(language, "python") == 0 ? "/usr/bin/python3"
                            : strcmp(language, "bash") == 0 ? "/bin/bash"
                                                            : "/bin/sh";
  char *argv[] = {(char *)interpreter, (char *)"-c", (char *)code, NULL};

  /* Environment as domed gives it: a fixed base, then the execution's own variables (secrets). */
  json_t *environment = json_pack("{s:s,s:s,s:s}", "PATH", "/usr/local/bin:/usr/bin:/bin", "HOME",
                                  "/workspace", "LANG", "C.UTF-8");
  json_t *given = json_object_get(inputs, "env");
  if (given) json_object_update(environment, given);
  size_t env_count = json_object_size(environment), e = 0, secret_count = 0;
  char **env = calloc(env_count + 1, sizeof(char *));
  struct guard_secret *secrets = calloc(env_count + 1, sizeof *secrets);
  json_t *files = json_object_get(inputs, "files");
  struct jail_input_file *input_files = calloc(json_object_size(files) + 1, sizeof *input_files);
  struct run_state run = {.inputs = inputs, .append = append, .context = context};
  run.text[1] = json_string("");
  run.text[2] = json_string("");
  struct jail_result result;
  memset(&result, 0, sizeof result);
  int rc = 0;
  if (env == NULL || secrets == NULL || input_files == NULL) {
    rc = dome_error_set(err, ENOMEM, "execute");
    goto out;
  }
  const char *key;
  json_t *value;
  json_object_foreach(environment, key, value) {
    if (asprintf(&env[e], "%s=%s", key, json_string_value(value)) < 0) {
      rc = dome_error_set(err, ENOMEM, "execute");
      goto out;
    }
    e++;
    /* the tool's secrets (env_secret_names) are redacted; a record without that list (made when every
     * variable was) has all of them redacted */
    bool secret = given && json_object_get(given, key);
    json_t *secret_names = json_object_get(inputs, "env_secret_names");
    if (secret && json_is_array(secret_names)) {
      secret = false;
      size_t n;
      json_t *secret_name;
      json_array_foreach(secret_names, n, secret_name) secret |=
          strcmp(json_string_value(secret_name), key) == 0;
    }
    if (secret)
      secrets[secret_count++] =
          (struct guard_secret){key, json_string_value(value), json_string_length(value)};
  }
  size_t f = 0;
  json_object_foreach(files, key, value) input_files[f++] = (struct jail_input_file){
      .path = key, .data = json_string_value(value), .length = json_string_length(value)};

  const char *classification = json_string_value(json_object_get(inputs, "classification"));
  struct guard_options guard_options = {
      .classification = classification, .secrets = secrets, .secret_count = secret_count};
  if (options->rules && (rc = replay_kernel_open(options->rules, inputs, &run.kernel, err)) < 0) goto out;
  if ((rc = guard_create(&guard_options, &run.guard, err)) < 0) {
    dome_error_wrap(err, "guard");
    goto out;
  }
  if ((rc = guard_stream_open(run.guard, "stdout", &run.streams[1], err)) < 0 ||
      (rc = guard_stream_open(run.guard, "stderr", &run.streams[2], err)) < 0)
    goto out;

  json_t *start = start_event(inputs, journal_dir, image, err);
  if (start == NULL) {
    rc = dome_error_code(err);
    goto out;
  }
  append_event(&run, start);

  const json_t *limits = json_object_get(inputs, "limits");
  struct jail_config config;
  jail_config_init(&config);
  config.argv = argv;
  config.env = env;
  json_t *stdin_value = json_object_get(inputs, "stdin");
  if (json_is_string(stdin_value)) {
    config.stdin_data = json_string_value(stdin_value);
    config.stdin_length = json_string_length(stdin_value);
  }
  config.input_files = input_files;
  config.input_file_count = f;
  config.image = image;
  config.image_store = image_store;
  config.memory_bytes = limit(limits, "memory_bytes");
  config.pids = (uint32_t)limit(limits, "pids");
  json_t *cpus = json_object_get(limits, "cpus");
  config.cpus = json_is_number(cpus) ? json_number_value(cpus) : 0;
  config.timeout_ms = limit(limits, "timeout_ms");
  if (config.timeout_ms == 0 && json_is_number(json_object_get(limits, "timeout_s")))
    config.timeout_ms = (uint64_t)(json_number_value(json_object_get(limits, "timeout_s")) * 1000.0);
  config.workspace_bytes = limit(limits, "workspace_bytes");
  config.output_limit = limit(limits, "output_bytes");
  config.hook_context = &run;
  config.on_output = on_output;
  config.on_cgroup_ready = on_cgroup_ready;
  rc = jail_run(&config, &result, err);
  json_t *denials = run.kernel ? replay_kernel_finish(run.kernel) : json_array();
  json_t *end = base_event(inputs, "exec.end");
  if (rc < 0) {
    json_object_set_new(end, "error", json_string(err->message));
    append_event(&run, end);
    json_decref(denials);
    goto out;
  }
  for (int s = 1; s <= 2; s++) {
    if (run.streams[s] == NULL) continue;
    struct guard_sink sink = {.emit = emit_chunk, .finding = on_finding, .context = &run};
    run.stream = s;
    run.offset_ms = result.duration_ms;
    dome_error ignored;
    guard_stream_finish(run.streams[s], &sink, &ignored);
    if (run.carry_length[s]) { /* a truncated sequence at the very end */
      run.carry_length[s] = 0;
      emit_chunk("\xEF\xBF\xBD", 3, &run);
    }
  }
  /* Kernel denials, as the kernel reported them (offset_ms since the jail's set-up). */
  json_t *denial;
  size_t d;
  json_array_foreach(denials, d, denial) {
    json_t *event = base_event(inputs, "exec.denial");
    json_object_update(event, denial);
    json_object_set_new(event, "decision", json_string("deny"));
    json_t *policy_id = json_object_get(denial, "policy_id");
    json_object_set_new(event, "determining", policy_id ? json_pack("[O]", policy_id) : json_array());
    append_event(&run, event);
  }
  /* One exec.redaction per (field, detector), as domed records them. */
  json_t *redactions = json_array();
  for (size_t i = 0; i < run.findings.count; i++) {
    json_t *entry = NULL;
    size_t k;
    json_t *candidate;
    json_array_foreach(redactions, k,
                       candidate) if (strcmp(json_string_value(json_object_get(candidate, "field")),
                                             run.findings.items[i].field) == 0 &&
                                      strcmp(json_string_value(json_object_get(candidate, "detector")),
                                             run.findings.items[i].detector) == 0) entry = candidate;
    if (entry == NULL) {
      entry = json_pack("{s:s,s:s,s:i}", "field", run.findings.items[i].field, "detector",
                        run.findings.items[i].detector, "count", 0);
      json_array_append_new(redactions, entry);
    }
    json_object_set_new(entry, "count",
                        json_integer(json_integer_value(json_object_get(entry, "count")) + 1));
  }
  size_t i;
  json_array_foreach(redactions, i, value) {
    json_t *event = base_event(inputs, "exec.redaction");
    json_object_update(event, value);
    json_object_set_new(event, "offset_ms", json_integer((json_int_t)result.duration_ms));
    append_event(&run, event);
  }
  json_object_set_new(end, "exit_code", json_integer(result.exit_code));
  json_object_set_new(end, "signal", json_integer(result.signal));
  json_object_set_new(end, "timed_out", json_boolean(result.timed_out));
  json_object_set_new(end, "oom_killed", json_boolean(result.oom_killed));
  json_object_set_new(end, "truncated", json_boolean(result.truncated));
  json_object_set_new(end, "duration_ms", json_integer((json_int_t)result.duration_ms));
  json_object_set_new(end, "offset_ms", json_integer((json_int_t)result.duration_ms));
  json_object_set_new(end, "cpu_ms", json_integer((json_int_t)result.cpu_ms));
  json_object_set_new(end, "peak_memory_bytes", json_integer((json_int_t)result.peak_memory_bytes));
  json_object_set_new(end, "peak_pids", json_integer((json_int_t)result.peak_pids));
  json_object_set_new(end, "jail_id", json_string(result.jail_id));
  json_object_set_new(end, "enforcement", json_string(jail_enforcement_name(result.enforcement)));
  json_object_set_new(end, "kernel", json_string(replay_kernel_level(run.kernel)));
  json_object_set_new(end, "denials", json_integer((json_int_t)json_array_size(denials)));
  for (int s = 1; s <= 2; s++) {
    unsigned char digest[crypto_hash_sha256_BYTES];
    char hex[65];
    crypto_hash_sha256(digest, (const unsigned char *)json_string_value(run.text[s]),
                       json_string_length(run.text[s]));
    sodium_bin2hex(hex, sizeof hex, digest, sizeof digest);
    json_object_set_new(end, s == 1 ? "stdout_sha256" : "stderr_sha256", json_string(hex));
    json_object_set_new(end, s == 1 ? "stdout_bytes" : "stderr_bytes",
                        json_integer((json_int_t)json_string_length(run.text[s])));
  }
  append_event(&run, end);
  json_t *denial_summary = json_array();
  json_array_foreach(denials, d, denial)
      json_array_append_new(denial_summary, json_pack("{s:O,s:O}", "hook", json_object_get(denial, "hook"),
                                                      "object", json_object_get(denial, "object")));
  json_decref(denials);
  if (outcome) {
    *outcome = json_pack("{s:i,s:i,s:b,s:b,s:O,s:O,s:o,s:o,s:s}", "exit_code", result.exit_code, "signal",
                         result.signal, "timed_out", result.timed_out, "oom_killed", result.oom_killed,
                         "stdout", run.text[1], "stderr", run.text[2], "redactions", redactions, "denials",
                         denial_summary, "kernel", replay_kernel_level(run.kernel));
  } else {
    json_decref(redactions);
    json_decref(denial_summary);
  }
  if (run.error < 0) {
    *err = run.append_error;
    rc = run.error;
  }
out:
  for (int s = 1; s <= 2; s++) {
    guard_stream_close(run.streams[s]);
    json_decref(run.text[s]);
  }
  guard_findings_free(&run.findings);
  guard_free(run.guard);
  replay_kernel_close(run.kernel);
  jail_result_release(&result);
  for (size_t k = 0; env && k < e; k++) free(env[k]);
  free(env);
  free(secrets);
  free(input_files);
  json_decref(environment);
  return rc;
}
