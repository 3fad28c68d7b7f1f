/* The shapes of the exec.* records (docs/journal-format.md, "Execution records"): every one carries
 * type, exec_id, agent, tool, policy_version and, when set, actas and rerun_of. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "supervisor/exec/exec_internal.h"

const char *exec_interpreter(const char *language) {
  if (language == NULL) return NULL;
  if (strcmp(language, "python") == 0) return "/usr/bin/python3";
  if (strcmp(language, "bash") == 0) return "/bin/bash";
  if (strcmp(language, "sh") == 0) return "/bin/sh";
  if (strcmp(language, "javascript") == 0) return "/usr/bin/node";
  return NULL;
}

const char *exec_code_option(const char *language) {
  return language && strcmp(language, "javascript") == 0 ? "-e" : "-c";
}

json_t *exec_record(const struct exec_identity *identity, const char *type) {
  json_t *record = json_pack("{s:s,s:s,s:s,s:s}", "type", type, "exec_id", identity->exec_id, "agent",
                             identity->agent, "tool", identity->tool);
  if (record == NULL) return NULL;
  if (identity->actas && identity->actas[0])
    json_object_set_new(record, "actas", json_string(identity->actas));
  json_object_set_new(record, "policy_version",
                      json_string(identity->policy_version ? identity->policy_version : "0"));
  if (identity->rerun_of) json_object_set_new(record, "rerun_of", json_string(identity->rerun_of));
  return record;
}

json_t *exec_unstarted_end(const struct exec_identity *identity, uint64_t queued_ms) {
  json_t *end = exec_record(identity, "exec.end");
  if (end == NULL) return NULL;
  json_object_set_new(end, "cancelled", json_true());
  json_object_set_new(end, "started", json_false());
  json_object_set_new(end, "queued_ms", json_integer((json_int_t)queued_ms));
  return end;
}

struct input_budget {
  const struct exec_sink *sink;
  size_t inline_left;
};

/* holder[member] inline, or member_sha256 + member_bytes with the bytes given to the sink's blob store
 * (member_stored says whether it kept them). Always member_sha256 and member_bytes. */
static int record_input(struct input_budget *budget, json_t *holder, const char *member, const char *data,
                        size_t length, dome_error *err) {
  unsigned char digest[crypto_hash_sha256_BYTES];
  char hex[crypto_hash_sha256_BYTES * 2 + 1], key[160];
  crypto_hash_sha256(digest, (const unsigned char *)data, length);
  sodium_bin2hex(hex, sizeof hex, digest, sizeof digest);
  snprintf(key, sizeof key, "%s_sha256", member);
  json_object_set_new(holder, key, json_string(hex));
  snprintf(key, sizeof key, "%s_bytes", member);
  json_object_set_new(holder, key, json_integer((json_int_t)length));
  size_t inline_max =
      budget->inline_left < EXEC_INPUT_INLINE_MAX ? budget->inline_left : EXEC_INPUT_INLINE_MAX;
  if (length <= inline_max) {
    budget->inline_left -= length;
    json_t *value = json_stringn(data, length);
    if (value == NULL || json_object_set_new(holder, member, value) < 0)
      return dome_error_set(err, ENOMEM, "record member `%s`", member);
    return 0;
  }
  dome_error why = {0};
  int stored =
      budget->sink->put_blob ? budget->sink->put_blob(budget->sink->context, data, length, hex, &why) : 0;
  if (stored < 0) {
    *err = why;
    return dome_error_wrap(err, "blob store: `%s` of %zu bytes", member, length);
  }
  snprintf(key, sizeof key, "%s_stored", member);
  json_object_set_new(holder, key, json_boolean(stored == 1));
  return 0;
}

/* The program as recorded: language + code when argv is one of the interpreters' `-c CODE` forms. */
static void record_program(const struct exec_request *request, char *const *argv, const char **language,
                           const char **code, size_t *code_length) {
  *language = request->program.language;
  *code = request->program.code;
  *code_length = request->program.code_length;
  if (*language || argv == NULL) return;
  static const char *const languages[] = {"python", "bash", "sh", "javascript"};
  if (argv[0] && argv[1] && argv[2] && argv[3] == NULL)
    for (size_t i = 0; i < sizeof languages / sizeof languages[0]; i++)
      if (strcmp(argv[0], exec_interpreter(languages[i])) == 0 &&
          strcmp(argv[1], exec_code_option(languages[i])) == 0) {
        *language = languages[i];
        *code = argv[2];
        *code_length = strlen(argv[2]);
      }
}

json_t *exec_start_record(const struct exec_request *request, char *const *argv, const struct exec_sink *sink,
                          dome_error *err) {
  const struct exec_program *program = &request->program;
  const struct exec_limits *limits = &request->limits;
  struct input_budget budget = {.sink = sink, .inline_left = EXEC_INPUTS_INLINE_BUDGET};
  json_t *start = exec_record(&request->identity, "exec.start");
  if (start == NULL) {
    dome_error_set(err, ENOMEM, "exec.start");
    return NULL;
  }
  const char *language, *code;
  size_t code_length;
  record_program(request, argv, &language, &code, &code_length);
  int rc = 0;
  if (language) {
    json_object_set_new(start, "language", json_string(language));
    rc = record_input(&budget, start, "code", code, code_length, err);
  } else {
    json_t *list = json_array();
    for (size_t i = 0; argv && argv[i]; i++) json_array_append_new(list, json_string(argv[i]));
    json_object_set_new(start, "argv", list);
  }
  json_object_set_new(start, "image", json_string(request->image ? request->image : JAIL_DEFAULT_IMAGE));
  if (request->image_digest) json_object_set_new(start, "image_digest", json_string(request->image_digest));
  json_object_set_new(
      start, "limits",
      json_pack(
          "{s:I,s:f,s:I,s:I,s:I,s:I}", "memory_bytes",
          (json_int_t)(limits->memory_bytes ? limits->memory_bytes : JAIL_DEFAULT_MEMORY_BYTES), "cpus",
          limits->cpus > 0 ? limits->cpus : JAIL_DEFAULT_CPUS, "pids",
          (json_int_t)(limits->pids ? limits->pids : JAIL_DEFAULT_PIDS), "timeout_ms",
          (json_int_t)(limits->timeout_ms ? limits->timeout_ms : JAIL_DEFAULT_TIMEOUT_MS), "workspace_bytes",
          (json_int_t)(limits->workspace_bytes ? limits->workspace_bytes : JAIL_DEFAULT_WORKSPACE_BYTES),
          "output_bytes",
          (json_int_t)(limits->output_bytes ? limits->output_bytes : JAIL_DEFAULT_OUTPUT_LIMIT_BYTES)));
  json_object_set_new(start, "classification",
                      json_string(request->classification ? request->classification : ""));
  if (rc == 0 && program->has_stdin)
    rc = record_input(&budget, start, "stdin", program->stdin_data, program->stdin_length, err);
  if (program->stdin_fd >= 0) json_object_set_new(start, "stdin_forwarded", json_true());
  json_t *files = json_array();
  for (size_t i = 0; i < program->file_count && rc == 0; i++) {
    json_t *file = json_pack("{s:s}", "path", program->files[i].path);
    rc = record_input(&budget, file, "content", program->files[i].data, program->files[i].length, err);
    json_array_append_new(files, file);
  }
  json_object_set_new(start, "files", files);
  if (program->workspace_dir) {
    json_object_set_new(start, "workspace_dir", json_string(program->workspace_dir));
    json_object_set_new(start, "copy_out", json_boolean(program->copy_out));
  }
  /* The environment's names; the agent's own values (non-secret, shown in output as printed) in
   * `env_values` when they total at most EXEC_INPUT_INLINE_MAX bytes and fit the inline budget; every value
   * shorter than EXEC_SECRET_MIN_BYTES (the guards do not redact it, output shows it anyway) in
   * `env_short_values`, so that a re-run reproduces it; never the other secret values, whose names (those the
   * agent did not replace) are `env_secret_names`. */
  json_t *names = json_array(), *short_values = json_object(), *values = json_object();
  json_t *secret_names = json_array();
  const char *name;
  json_t *value;
  size_t value_bytes = 0;
  json_object_foreach(program->secrets, name, value) {
    json_array_append_new(names, json_string(name));
    if (json_object_get(program->env, name) != NULL) continue;
    json_array_append_new(secret_names, json_string(name));
    if (json_string_length(value) < EXEC_SECRET_MIN_BYTES) json_object_set(short_values, name, value);
  }
  json_object_foreach(program->env, name, value) {
    if (json_object_get(program->secrets, name) == NULL) json_array_append_new(names, json_string(name));
    if (json_string_length(value) < EXEC_SECRET_MIN_BYTES) json_object_set(short_values, name, value);
    json_object_set(values, name, value);
    value_bytes += json_string_length(value);
  }
  json_object_set_new(start, "env_names", names);
  json_object_set_new(start, "env_short_values", short_values);
  if (value_bytes <= EXEC_INPUT_INLINE_MAX && value_bytes <= budget.inline_left) {
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

/* The Cedar request a kernel denial answered (docs/simulate-replay.md; `dome rules simulate` re-evaluates
 * it): net:* on Dome::Network::"loopback"/"egress" with context {dst_ip, dst_port, protocol}, fs:* on
 * Dome::Path::"<path>". NULL when the object names neither (sock_create, egress byte quota, ptrace...).
 * The kernel event does not carry the protocol: connect and bind are recorded as "tcp", sendmsg
 * (unconnected datagrams) as "udp". */
static json_t *denial_request(const struct exec_request *request, const char *hook, const char *action,
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
  const char *agent = request->identity.agent, *gateway = request->gateway ? request->gateway : "Default";
  json_t *entities =
      request->entities
          ? json_incref(request->entities)
          : json_pack("[{s:{s:s,s:s},s:{s:[]},s:[{s:s,s:s}]},{s:{s:s,s:s},s:{},s:[]}]", "uid", "type",
                      "Dome::Agent", "id", agent, "attrs", "capabilities", "parents", "type", "Dome::Gateway",
                      "id", gateway, "uid", "type", "Dome::Gateway", "id", gateway, "attrs", "parents");
  return json_pack("{s:{s:s,s:s},s:{s:s,s:s},s:o,s:o,s:o}", "principal", "type", "Dome::Agent", "id", agent,
                   "action", "type", "Dome::Action", "id", action, "resource", resource, "context", context,
                   "entities", entities);
}

json_t *exec_shadow_record(const struct exec_request *request, json_t *shadow) {
  json_t *record = exec_record(&request->identity, "exec.shadow");
  if (record == NULL) return NULL;
  if (json_object_update(record, shadow) < 0 ||
      (request->shadow_version &&
       json_object_set_new(record, "shadow_version", json_string(request->shadow_version)) < 0)) {
    json_decref(record);
    return NULL;
  }
  return record;
}

json_t *exec_denial_record(const struct exec_request *request, json_t *denial, const char *reason) {
  json_t *record = exec_record(&request->identity, "exec.denial");
  if (record == NULL) return NULL;
  json_object_update(record, denial);
  const char *policy = json_string_value(json_object_get(denial, "policy_id"));
  json_object_set_new(record, "decision", json_string("deny"));
  json_object_set_new(record, "determining", policy ? json_pack("[s]", policy) : json_array());
  json_object_set_new(record, "reason", json_string(reason ? reason : "policy"));
  const char *hook = json_string_value(json_object_get(denial, "hook"));
  const char *action = json_string_value(json_object_get(denial, "action"));
  const char *object = json_string_value(json_object_get(denial, "object"));
  json_t *cedar_request = hook && action && object ? denial_request(request, hook, action, object) : NULL;
  if (cedar_request) json_object_set_new(record, "request", cedar_request);
  return record;
}
