/* Run an execution's recorded inputs again (supervisor/exec) and record it in the shape domed records
 * (docs/journal-format.md): the inputs of replay_inputs become an exec_request, the records go to
 * options->append. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "supervisor/blob/blob.h"
#include "supervisor/exec/exec.h"
#include "supervisor/kernel/kernel.h"
#include "supervisor/replay/replay_internal.h"

struct sink_context {
  const replay_execute_options *options;
};

static int sink_append(void *context, json_t *record, uint64_t *ticket, dome_error *err) {
  const replay_execute_options *options = ((struct sink_context *)context)->options;
  if (ticket) *ticket = 0;
  return options->append ? options->append(options->context, record, err) : 0;
}

static int sink_put_blob(void *context, const char *data, size_t length, const char *hex, dome_error *err) {
  const replay_execute_options *options = ((struct sink_context *)context)->options;
  char copy[65];
  snprintf(copy, sizeof copy, "%s", hex);
  int rc = blob_content_put(options->journal_dir, data, length, copy, err);
  return rc < 0 ? rc : 1;
}

static uint64_t limit(const json_t *limits, const char *key) {
  json_t *value = json_object_get(limits, key);
  return json_is_number(value) && json_number_value(value) > 0 ? (uint64_t)json_number_value(value) : 0;
}

/* The recorded environment split as exec.start recorded it: the names in env_secret_names are the tool's
 * secrets (redacted), the others the agent's own values; a record without that list (made when every
 * variable was a secret) has all of them redacted. */
static void split_environment(const json_t *inputs, json_t *secrets, json_t *agent_env) {
  json_t *secret_names = json_object_get(inputs, "env_secret_names");
  const char *key;
  json_t *value;
  json_object_foreach((json_t *)json_object_get(inputs, "env"), key, value) {
    bool secret = true;
    if (json_is_array(secret_names)) {
      secret = false;
      size_t n;
      json_t *name;
      json_array_foreach(secret_names, n, name) secret |= strcmp(json_string_value(name), key) == 0;
    }
    json_object_set(secret ? secrets : agent_env, key, value);
  }
}

int replay_execute(const json_t *inputs, const replay_execute_options *options, json_t **outcome,
                   dome_error *err) {
  if (outcome) *outcome = NULL;
  const char *language = json_string_value(json_object_get(inputs, "language"));
  json_t *code = json_object_get(inputs, "code");
  if (language == NULL || !json_is_string(code))
    return dome_error_set(err, EINVAL, "inputs: `language` and `code` required");
  json_auto_t *secrets = json_object(), *agent_env = json_object();
  if (secrets == NULL || agent_env == NULL) return dome_error_set(err, ENOMEM, "execute");
  split_environment(inputs, secrets, agent_env);
  struct exec_program program = {.env = agent_env, .secrets = secrets};
  struct jail_input_file *input_files = NULL;
  int built = exec_program_from_arguments(inputs, &program, &input_files, err);
  if (built < 0) return built;
  const json_t *limits = json_object_get(inputs, "limits");
  json_t *cpus = json_object_get(limits, "cpus");
  struct exec_request request = {
      .identity = {.exec_id = json_string_value(json_object_get(inputs, "exec_id")),
                   .agent = json_string_value(json_object_get(inputs, "agent")),
                   .actas = json_string_value(json_object_get(inputs, "actas")),
                   .tool = "code-sandbox",
                   .policy_version = json_string_value(json_object_get(inputs, "policy_version")),
                   .rerun_of = json_string_value(json_object_get(inputs, "rerun_of"))},
      .program = program,
      .limits = {.memory_bytes = limit(limits, "memory_bytes"),
                 .pids = (uint32_t)limit(limits, "pids"),
                 .cpus = json_is_number(cpus) ? json_number_value(cpus) : 0,
                 .timeout_ms = limit(limits, "timeout_ms"),
                 .workspace_bytes = limit(limits, "workspace_bytes"),
                 .output_bytes = limit(limits, "output_bytes")},
      .image = json_string_value(json_object_get(inputs, "image")),
      .image_digest = json_string_value(json_object_get(inputs, "image_digest")),
      .image_store = options->image_store,
      .classification = json_string_value(json_object_get(inputs, "classification")),
      .entities = json_object_get(json_object_get(inputs, "request"), "entities"),
      .cancel_fd = -1,
  };
  if (request.classification && request.classification[0] == '\0') request.classification = NULL;
  if (request.limits.timeout_ms == 0 && json_is_number(json_object_get(limits, "timeout_s")))
    request.limits.timeout_ms = (uint64_t)(json_number_value(json_object_get(limits, "timeout_s")) * 1000.0);
  if (request.identity.exec_id == NULL || request.identity.agent == NULL) {
    free(input_files);
    return dome_error_set(err, EINVAL, "inputs: `exec_id` and `agent` required");
  }
  struct dome_rule_tables tables;
  dome_rule_tables_init(&tables);
  int rc = options->rules ? replay_kernel_tables(options->rules, inputs, &tables, err) : 0;
  if (rc < 0) {
    free(input_files);
    return rc;
  }
  if (rc == 1) request.tables = &tables;
  struct sink_context context = {.options = options};
  struct exec_sink sink = {
      .context = &context, .append = sink_append, .put_blob = options->journal_dir ? sink_put_blob : NULL};
  struct exec_outcome run;
  rc = exec_run(&request, &sink, &run, err);
  dome_rule_tables_free(&tables);
  free(input_files);
  if (rc < 0) {
    exec_outcome_release(&run);
    return rc;
  }
  json_t *result = run.result;
  json_t *denial_summary = json_array();
  size_t d;
  json_t *denial;
  json_array_foreach(json_object_get(result, "denials"), d, denial)
      json_array_append_new(denial_summary, json_pack("{s:O,s:O}", "hook", json_object_get(denial, "hook"),
                                                      "object", json_object_get(denial, "object")));
  json_t *redactions = json_array();
  json_t *entry;
  json_array_foreach(json_object_get(result, "redactions"), d, entry) json_array_append_new(
      redactions, json_pack("{s:O,s:O,s:O}", "field", json_object_get(entry, "field"), "detector",
                            json_object_get(entry, "detector"), "count", json_object_get(entry, "count")));
  if (outcome)
    *outcome =
        json_pack("{s:O,s:O,s:O,s:O,s:O,s:O,s:o,s:o,s:s}", "exit_code", json_object_get(result, "exit_code"),
                  "signal", json_object_get(result, "signal"), "timed_out",
                  json_object_get(result, "timed_out"), "oom_killed", json_object_get(result, "oom_killed"),
                  "stdout", json_object_get(result, "stdout"), "stderr", json_object_get(result, "stderr"),
                  "redactions", redactions, "denials", denial_summary, "kernel", run.kernel_level);
  else {
    json_decref(redactions);
    json_decref(denial_summary);
  }
  exec_outcome_release(&run);
  return 0;
}
