/* The execute_code tool: its MCP Tool definition (inputSchema, outputSchema; MCP server/tools) and
 * the validation of its arguments (bounded sizes; a bad argument is a tool error naming it). */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "supervisor/domed/domed.h"

#define MAX_CODE_BYTES (1u << 20)
#define MAX_FILES 256
#define MAX_ENV 256
#define MAX_ENV_VALUE_BYTES 4096u
/* "ses_" and 32 hex digits (supervisor/session/session.h SESSION_ID_SIZE without the NUL) */
#define SESSION_ID_LENGTH 36u

/* Bytes as the largest IEC unit dividing them ("256 MiB"), else KiB with one decimal. */
static void format_bytes(uint64_t bytes, char *buffer, size_t size) {
  static const char *const units[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
  unsigned index = 0;
  uint64_t value = bytes;
  while (index < 4 && value != 0 && value % 1024 == 0) {
    value /= 1024;
    index++;
  }
  if (index == 0 && bytes >= 1024)
    snprintf(buffer, size, "%.1f KiB", (double)bytes / 1024.0);
  else
    snprintf(buffer, size, "%llu %s", (unsigned long long)value, units[index]);
}

/* What a model needs before its first call: the limits it runs under, where files go, that nothing
 * survives the call, the network, the redaction, and how a limit shows. */
static char *tool_description(const struct control_quota *quota, uint64_t mcp_output_limit) {
  char memory[32], workspace[32], shown[32], kept[32];
  format_bytes(quota->memory_bytes, memory, sizeof memory);
  format_bytes(quota->workspace_bytes, workspace, sizeof workspace);
  format_bytes(quota->mcp_output_bytes ? quota->mcp_output_bytes : mcp_output_limit, shown, sizeof shown);
  format_bytes(quota->output_bytes, kept, sizeof kept);
  char *text = NULL;
  if (asprintf(&text,
               "Run a Python, bash, sh or JavaScript (Node.js) program in a fresh, isolated sandbox. Limits: "
               "%s memory, %g CPU, "
               "%llu processes, %g s wall clock (timeout_s may lower it), %s for /workspace and /tmp; "
               "stdout and stderr are shown up to %s each (the rest is replaced by a `[... truncated: ...]` "
               "line; %s per stream is kept). The program starts in /workspace (HOME=/workspace), where "
               "`files` are placed. Nothing is kept between calls: every call gets a new sandbox, and its "
               "files and processes are gone when it ends. No network unless the operator's rules permit "
               "a destination. Output is redacted: credentials and the tool's secret values in every "
               "field, sensitive data and PII in the fields the operator classified so; `env` values are "
               "yours and are not treated as secrets. A program ended by a limit gets a line on stderr "
               "naming it (`dome: killed: timeout (limit 10 s)`, out of memory, pids).",
               memory, quota->cpus, (unsigned long long)quota->pids, (double)quota->timeout_ms / 1000.0,
               workspace, shown, kept) < 0)
    return NULL;
  return text;
}

json_t *domed_execute_code_input_schema(void) {
  json_t *string = json_pack("{s:s}", "type", "string");
  json_t *input = json_pack(
      "{s:s,s:{s:{s:s,s:[ssss],s:s},s:{s:s,s:s},s:{s:s,s:s},s:{s:s,s:O,s:s},s:{s:s,s:O,s:s},s:{s:s,s:i,s:i,s:"
      "s}},"
      "s:[ss],s:b}",
      "type", "object", "properties", "language", "type", "string", "enum", "python", "bash", "sh",
      "javascript", "description",
      "interpreter: python (Debian's python3), bash, sh or javascript (Debian's nodejs)", "code", "type",
      "string", "description", "the program text", "stdin", "type", "string", "description",
      "bytes given on standard input", "files", "type", "object", "additionalProperties", string,
      "description",
      "files placed in /workspace (the program's working directory) before the run: relative path -> "
      "content",
      "env", "type", "object", "additionalProperties", string, "description",
      "environment variables for the program: non-secret, shown in output as printed (the operator's "
      "secrets are injected by the tool and redacted)",
      "timeout_s", "type", "integer", "minimum", 1, "maximum", 86400, "description",
      "wall-clock limit in whole seconds, 1 to 86400 (clamped by the quota)", "required", "language", "code",
      "additionalProperties", 0);
  json_decref(string);
  return input;
}

json_t *domed_execute_code_tool(const struct control_quota *quota, uint64_t mcp_output_limit) {
  json_t *string = json_pack("{s:s}", "type", "string");
  json_t *string_map = json_pack("{s:s,s:O}", "type", "object", "additionalProperties", string);
  json_t *input = domed_execute_code_input_schema();
  /* structuredContent.network (domed/egress.c domed_egress_report): the jail's egress path, if any */
  json_t *network = json_pack(
      "{s:s,s:{s:{s:s},s:{s:s},s:{s:s},s:{s:s},s:{s:s},s:{s:s},s:{s:s},s:{s:s},s:{s:s},s:{s:s}},s:[s]}",
      "type", "object", "properties", "egress", "type", "boolean", "mode", "type", "string", "address",
      "type", "string", "egress_bytes", "type", "integer", "ingress_bytes", "type", "integer", "connections",
      "type", "integer", "refused", "type", "integer", "quota_bytes", "type", "integer", "quota_exceeded",
      "type", "boolean", "error", "type", "string", "required", "egress");
  json_t *output = json_pack(
      "{s:s,s:{s:O,s:O,s:{s:s},s:{s:s},s:{s:s},s:{s:s},s:{s:s},s:{s:s,s:O},s:O,s:{s:s},s:{s:s},s:{s:s},s:o,"
      "s:{s:s},s:{s:s}},s:[sssssssssss]}",
      "type", "object", "properties", "stdout", string, "stderr", string, "exit_code", "type", "integer",
      "signal", "type", "integer", "timed_out", "type", "boolean", "oom_killed", "type", "boolean",
      "duration_ms", "type", "integer", "output_paths", "type", "array", "items", string, "env_vars",
      string_map, "truncated", "type", "boolean", "denials", "type", "array", "redactions", "type", "array",
      "network", network, "pids_limited", "type", "boolean", "limits", "type", "object", "required", "stdout",
      "stderr", "exit_code", "signal", "timed_out", "oom_killed", "duration_ms", "output_paths", "env_vars",
      "truncated", "redactions");
  /* sessions enabled for the capability (dome quotas set --sessions N): execute_code may name one */
  if (quota->sessions > 0)
    json_object_set_new(
        json_object_get(input, "properties"), "session_id",
        json_pack("{s:s,s:s}", "type", "string", "description",
                  "run in this session (create_session): python in its live interpreter, "
                  "bash/sh/javascript as a new process of its sandbox; files and variables persist"));
  json_decref(string);
  json_decref(string_map);
  char *description = tool_description(quota, mcp_output_limit);
  json_t *tool = json_pack(
      "{s:s,s:s,s:s,s:o,s:o,s:{s:b,s:b,s:b}}", "name", DOMED_EXECUTE_TOOL, "title", "Execute code",
      "description",
      description ? description : "Run a Python, bash, sh or JavaScript program in a fresh sandbox.",
      "inputSchema", input, "outputSchema", output, "annotations", "readOnlyHint", 0, "destructiveHint", 0,
      "openWorldHint", 0);
  free(description);
  return tool;
}

static bool relative_path_ok(const char *path) {
  size_t total = strlen(path);
  /* a trailing slash names a directory, which `files` cannot hold */
  if (total == 0 || path[0] == '/' || total > 1024 || path[total - 1] == '/') return false;
  const char *p = path;
  while (*p) {
    const char *slash = strchr(p, '/');
    size_t length = slash ? (size_t)(slash - p) : strlen(p);
    if (length == 0 || (length == 1 && p[0] == '.') || (length == 2 && p[0] == '.' && p[1] == '.'))
      return false;
    p += length;
    if (*p == '/') p++;
  }
  return true;
}

int domed_execute_arguments_check(json_t *arguments, dome_error *err) {
  static const char *const known[] = {"language", "code", "stdin", "files", "env", "timeout_s", "session_id"};
  const char *key;
  json_t *value;
  json_object_foreach(arguments, key, value) {
    bool ok = false;
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) ok |= strcmp(key, known[i]) == 0;
    if (!ok) return dome_error_set(err, EINVAL, "invalid arguments: unknown argument `%.64s`", key);
  }
  const char *language = json_string_value(json_object_get(arguments, "language"));
  if (language == NULL || (strcmp(language, "python") != 0 && strcmp(language, "bash") != 0 &&
                           strcmp(language, "sh") != 0 && strcmp(language, "javascript") != 0))
    return dome_error_set(err, EINVAL,
                          "invalid arguments: `language` must be one of python, bash, sh, javascript");
  json_t *code = json_object_get(arguments, "code");
  if (!json_is_string(code)) return dome_error_set(err, EINVAL, "invalid arguments: `code` must be a string");
  if (json_string_length(code) > MAX_CODE_BYTES)
    return dome_error_set(err, EINVAL, "invalid arguments: `code` larger than %u bytes", MAX_CODE_BYTES);
  json_t *stdin_value = json_object_get(arguments, "stdin");
  if (stdin_value && !json_is_string(stdin_value))
    return dome_error_set(err, EINVAL, "invalid arguments: `stdin` must be a string");
  json_t *files = json_object_get(arguments, "files");
  if (files) {
    if (!json_is_object(files))
      return dome_error_set(err, EINVAL, "invalid arguments: `files` must be an object");
    if (json_object_size(files) > MAX_FILES)
      return dome_error_set(err, EINVAL, "invalid arguments: more than %d files", MAX_FILES);
    json_object_foreach(files, key, value) {
      if (!relative_path_ok(key))
        return dome_error_set(err, EINVAL, "invalid arguments: files: `%.128s` is not a relative path", key);
      if (!json_is_string(value))
        return dome_error_set(err, EINVAL, "invalid arguments: files: `%.128s` must be a string", key);
    }
  }
  json_t *env = json_object_get(arguments, "env");
  if (env) {
    if (!json_is_object(env))
      return dome_error_set(err, EINVAL, "invalid arguments: `env` must be an object");
    if (json_object_size(env) > MAX_ENV)
      return dome_error_set(err, EINVAL, "invalid arguments: more than %d env", MAX_ENV);
    json_object_foreach(env, key, value) {
      bool ok = (isalpha((unsigned char)key[0]) || key[0] == '_') && strlen(key) < 256;
      for (const char *c = key; ok && *c; c++) ok = isalnum((unsigned char)*c) || *c == '_';
      if (!ok)
        return dome_error_set(err, EINVAL, "invalid arguments: env: `%.64s` is not a variable name", key);
      if (!json_is_string(value) || strlen(json_string_value(value)) != json_string_length(value))
        return dome_error_set(err, EINVAL, "invalid arguments: env: `%.64s` must be a string without NUL",
                              key);
      /* every value is also an exact-match secret of the output guard, which takes at most 4096 bytes */
      if (json_string_length(value) > MAX_ENV_VALUE_BYTES)
        return dome_error_set(err, EINVAL, "invalid arguments: env: `%.64s` is longer than %u bytes", key,
                              MAX_ENV_VALUE_BYTES);
    }
  }
  json_t *session_id = json_object_get(arguments, "session_id");
  if (session_id && (!json_is_string(session_id) || json_string_length(session_id) != SESSION_ID_LENGTH))
    return dome_error_set(err, EINVAL,
                          "invalid arguments: `session_id` must be a session id from create_session");
  json_t *timeout = json_object_get(arguments, "timeout_s");
  /* whole seconds: the inputSchema's integer, which rules read as a Cedar Long (context.input) */
  if (timeout &&
      (!json_is_number(timeout) || json_number_value(timeout) != floor(json_number_value(timeout)) ||
       json_number_value(timeout) < 1 || json_number_value(timeout) > 86400))
    return dome_error_set(err, EINVAL, "invalid arguments: `timeout_s` must be an integer in [1, 86400]");
  return 0;
}
