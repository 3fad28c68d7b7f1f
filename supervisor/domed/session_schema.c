/* The MCP Tool definitions of the session tools (inputSchema, outputSchema; MCP server/tools). Their
 * arguments are checked where they are used (domed/sessions.c): a bad one is a tool error naming it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "supervisor/domed/domed.h"

static json_t *string_property(const char *description) {
  return json_pack("{s:s,s:s}", "type", "string", "description", description);
}

static json_t *session_id_property(void) {
  return string_property("the session, as create_session returned it");
}

static json_t *object_schema(json_t *properties, json_t *required) {
  return json_pack("{s:s,s:o,s:o,s:b}", "type", "object", "properties", properties, "required",
                   required ? required : json_array(), "additionalProperties", 0);
}

static json_t *output_schema(json_t *properties, json_t *required) {
  return json_pack("{s:s,s:o,s:o}", "type", "object", "properties", properties, "required", required);
}

static json_t *tool(const char *name, const char *title, const char *description, json_t *input,
                    json_t *output, bool read_only, bool destructive) {
  return json_pack("{s:s,s:s,s:s,s:o,s:o,s:{s:b,s:b,s:b}}", "name", name, "title", title, "description",
                   description, "inputSchema", input, "outputSchema", output, "annotations", "readOnlyHint",
                   read_only, "destructiveHint", destructive, "openWorldHint", 0);
}

void domed_session_tools(json_t *tools, const struct control_quota *quota) {
  char description[640];
  snprintf(
      description, sizeof description,
      "Start a sandbox session: one isolated sandbox that lives across calls, with a live Python "
      "interpreter (a Jupyter kernel: variables and imports persist between execute_code calls that name "
      "its session_id) and a persistent /workspace. It is closed after %llu s unused or %llu s in all "
      "(or by close_session); at most %llu at once per agent. `limits` bound the whole session (memory, "
      "CPUs, processes of everything it runs); `cgroup` is what the kernel holds for it, read back.",
      (unsigned long long)(quota->session_idle_ms / 1000),
      (unsigned long long)(quota->session_lifetime_ms / 1000), (unsigned long long)quota->sessions);
  json_t *limits = json_pack("{s:s}", "type", "object");
  json_t *number_or_null = json_pack("{s:[ss]}", "type", "number", "null");
  json_t *cgroup = json_pack("{s:s,s:{s:O,s:O,s:O}}", "type", "object", "properties", "memory_bytes",
                             number_or_null, "cpus", number_or_null, "pids", number_or_null);
  json_decref(number_or_null);
  json_array_append_new(
      tools,
      tool("create_session", "Create a sandbox session", description,
           object_schema(json_pack("{s:o,s:{s:s,s:s,s:i}}", "image",
                                   string_property("the sandbox image (default: the server's)"),
                                   "idle_timeout_s", "type", "number", "description",
                                   "close the session after this many seconds unused (lowers the quota's)",
                                   "exclusiveMinimum", 0),
                         NULL),
           output_schema(json_pack("{s:{s:s},s:{s:s},s:o,s:o,s:{s:s},s:{s:s},s:{s:s,s:{s:s}}}", "session_id",
                                   "type", "string", "image", "type", "string", "limits", limits, "cgroup",
                                   cgroup, "expires_at", "type", "string", "ready_ms", "type", "integer",
                                   "phases_ms", "type", "object", "additionalProperties", "type", "integer"),
                         json_pack("[ssss]", "session_id", "image", "limits", "expires_at")),
           false, false));
  json_array_append_new(tools, tool("close_session", "Close a sandbox session",
                                    "End a session: its interpreter, processes and /workspace are gone.",
                                    object_schema(json_pack("{s:o}", "session_id", session_id_property()),
                                                  json_pack("[s]", "session_id")),
                                    output_schema(json_pack("{s:{s:s},s:{s:s}}", "session_id", "type",
                                                            "string", "closed", "type", "boolean"),
                                                  json_pack("[ss]", "session_id", "closed")),
                                    false, true));
  json_array_append_new(tools, tool("list_sessions", "List my sandbox sessions",
                                    "The caller's own live sessions.", object_schema(json_object(), NULL),
                                    output_schema(json_pack("{s:{s:s,s:{s:s}}}", "sessions", "type", "array",
                                                            "items", "type", "object"),
                                                  json_pack("[s]", "sessions")),
                                    true, false));
  json_array_append_new(
      tools,
      tool("write_file", "Write a file into a session",
           "Write a file at a path relative to the session's /workspace (parent directories are made). `..`, "
           "absolute paths, symlinks and special files are refused.",
           object_schema(
               json_pack("{s:o,s:o,s:o,s:{s:s,s:[ss]}}", "session_id", session_id_property(), "path",
                         string_property("relative to /workspace"), "content",
                         string_property("the file's content (text, or base64 with encoding base64)"),
                         "encoding", "type", "string", "enum", "utf-8", "base64"),
               json_pack("[sss]", "session_id", "path", "content")),
           output_schema(json_pack("{s:{s:s},s:{s:s},s:{s:s}}", "session_id", "type", "string", "path",
                                   "type", "string", "bytes", "type", "integer"),
                         json_pack("[sss]", "session_id", "path", "bytes")),
           false, false));
  json_array_append_new(
      tools,
      tool("read_file", "Read a file of a session",
           "Read a file relative to the session's /workspace: text (redacted like program output) or base64 "
           "for binary content. Symlinks and special files are refused.",
           object_schema(json_pack("{s:o,s:o}", "session_id", session_id_property(), "path",
                                   string_property("relative to /workspace")),
                         json_pack("[ss]", "session_id", "path")),
           output_schema(
               json_pack("{s:{s:s},s:{s:s},s:{s:s},s:{s:s},s:{s:s},s:{s:s}}", "session_id", "type", "string",
                         "path", "type", "string", "encoding", "type", "string", "content", "type", "string",
                         "bytes", "type", "integer", "redactions", "type", "array"),
               json_pack("[sssss]", "session_id", "path", "encoding", "content", "bytes")),
           true, false));
  json_array_append_new(
      tools,
      tool("list_files", "List the files of a session",
           "List /workspace (or a directory beneath it) of a session, depth-first; symlinks are listed, "
           "never followed.",
           object_schema(json_pack("{s:o,s:o}", "session_id", session_id_property(), "path",
                                   string_property("a directory relative to /workspace (default: all)")),
                         json_pack("[s]", "session_id")),
           output_schema(
               json_pack("{s:{s:s},s:{s:s,s:{s:s}},s:{s:s}}", "session_id", "type", "string", "entries",
                         "type", "array", "items", "type", "object", "truncated", "type", "boolean"),
               json_pack("[ss]", "session_id", "entries")),
           true, false));
  json_array_append_new(
      tools, tool("delete_file", "Delete a file of a session",
                  "Remove a file, a symlink (never its target) or an empty directory relative to /workspace.",
                  object_schema(json_pack("{s:o,s:o}", "session_id", session_id_property(), "path",
                                          string_property("relative to /workspace")),
                                json_pack("[ss]", "session_id", "path")),
                  output_schema(json_pack("{s:{s:s},s:{s:s},s:{s:s}}", "session_id", "type", "string", "path",
                                          "type", "string", "deleted", "type", "boolean"),
                                json_pack("[sss]", "session_id", "path", "deleted")),
                  false, true));
  json_array_append_new(
      tools,
      tool("snapshot_session", "Snapshot a session's files",
           "Keep the session's /workspace (regular files and directories; not the interpreter's variables) "
           "as a snapshot that fork_session can start a new session from. Bounded by the workspace size and "
           "the agent's snapshot quota; kernel_state says whether the interpreter was kept and why not.",
           object_schema(json_pack("{s:o,s:o,s:{s:s,s:s}}", "session_id", session_id_property(), "name",
                                   string_property("a label for the snapshot"), "kernel", "type", "boolean",
                                   "description",
                                   "true: also keep the interpreter's state (CRIU), or fail where the host "
                                   "cannot; absent or false: /workspace only"),
                         json_pack("[s]", "session_id")),
           output_schema(
               json_pack("{s:{s:s},s:{s:s},s:{s:s},s:{s:s},s:{s:s,s:{s:{s:s},s:{s:s}}}}", "snapshot_id",
                         "type", "string", "session_id", "type", "string", "files", "type", "integer",
                         "bytes", "type", "integer", "kernel_state", "type", "object", "properties", "kept",
                         "type", "boolean", "reason", "type", "string"),
               json_pack("[ss]", "snapshot_id", "session_id")),
           false, false));
  json_array_append_new(
      tools, tool("fork_session", "Start a session from a snapshot",
                  "Create a new session whose /workspace holds the snapshot's files (a fresh interpreter).",
                  object_schema(
                      json_pack("{s:o}", "snapshot_id", string_property("as snapshot_session returned it")),
                      json_pack("[s]", "snapshot_id")),
                  output_schema(json_pack("{s:{s:s},s:{s:s},s:{s:s},s:{s:s}}", "session_id", "type", "string",
                                          "snapshot_id", "type", "string", "image", "type", "string",
                                          "expires_at", "type", "string"),
                                json_pack("[ss]", "session_id", "snapshot_id")),
                  false, false));
}

json_t *domed_session_input_schema(const char *name) {
  struct control_quota quota = {0}; /* the quota changes descriptions only, never a type */
  json_t *tools = json_array(), *schema = NULL;
  if (tools == NULL) return NULL;
  domed_session_tools(tools, &quota);
  size_t i;
  json_t *tool;
  json_array_foreach(tools, i, tool) if (strcmp(json_string_value(json_object_get(tool, "name")), name) == 0)
      schema = json_incref(json_object_get(tool, "inputSchema"));
  json_decref(tools);
  return schema;
}
