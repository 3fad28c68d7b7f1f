/* Loading the tool registry for typed rules (rules_tools.h). */
#include "supervisor/cli/rules_tools.h"

#include <stdio.h>
#include <string.h>

#include "policy/tool_input/tool_input.h"
#include "supervisor/control/control.h"

json_t *cli_rules_tools_load(const char *tools_file, const char *socket, char *source, size_t source_size,
                             char *error, size_t error_size) {
  json_t *loaded = NULL;
  if (tools_file) {
    json_error_t json_error;
    loaded = json_load_file(tools_file, JSON_REJECT_DUPLICATES, &json_error);
    if (loaded == NULL) {
      snprintf(error, error_size, "--tools: %s:%d:%d: %s", tools_file, json_error.line, json_error.column,
               json_error.text);
      return NULL;
    }
    snprintf(source, source_size, "%s", tools_file);
  } else {
    dome_error err = {0};
    json_t *args = json_object();
    int rc = control_call(control_socket_path(socket), "tools.definitions", args, &loaded, &err);
    json_decref(args);
    if (rc < 0) {
      snprintf(error, error_size, "%s", err.message);
      return NULL;
    }
    snprintf(source, source_size, "domed");
  }
  json_t *tools = json_is_array(loaded) ? json_incref(loaded) : json_incref(json_object_get(loaded, "tools"));
  json_decref(loaded);
  if (!json_is_array(tools)) {
    json_decref(tools);
    snprintf(error, error_size, "%s: expected {\"tools\": [...]} or an array of MCP Tool objects",
             tools_file ? tools_file : "domed's answer");
    return NULL;
  }
  return tools;
}

json_t *cli_rules_tool_types(json_t *tools, json_t *warnings) {
  json_t *types = json_object();
  size_t i;
  json_t *tool;
  json_array_foreach(tools, i, tool) {
    const char *name = json_string_value(json_object_get(tool, "name"));
    if (name == NULL || name[0] == '\0') {
      char message[64];
      snprintf(message, sizeof message, "tools[%zu] has no name: skipped", i);
      json_array_append_new(warnings,
                            json_pack("{s:s,s:s,s:s}", "tool", "", "path", "/", "message", message));
      continue;
    }
    json_t *type = cedar_tool_input_type(json_object_get(tool, "inputSchema"), name, warnings);
    if (type) json_object_set_new(types, name, type);
  }
  return types;
}

void cli_rules_tools_print_warnings(const char *command, json_t *warnings) {
  size_t i;
  json_t *warning;
  json_array_foreach(warnings, i, warning)
      fprintf(stderr, "dome %s: warning: tool `%s`: %s: %s (context.arguments has it)\n", command,
              json_string_value(json_object_get(warning, "tool")),
              json_string_value(json_object_get(warning, "path")),
              json_string_value(json_object_get(warning, "message")));
}

char *cli_rules_typed_schema_text(const char *command, const char *tools_file, const char *socket, bool note,
                                  bool *failed) {
  *failed = false;
  char source[512], error[700];
  json_t *tools = cli_rules_tools_load(tools_file, socket, source, sizeof source, error, sizeof error);
  if (tools == NULL) {
    if (tools_file) {
      fprintf(stderr, "dome %s: %s\n", command, error);
      *failed = true;
    } else if (note) {
      fprintf(stderr,
              "dome %s: note: no tool registry (%s): context.input declares no tool; pass --tools FILE\n",
              command, error);
    }
    return NULL;
  }
  json_t *warnings = json_array();
  json_t *types = cli_rules_tool_types(tools, warnings);
  json_decref(warnings); /* `dome rules schema` lists them */
  json_decref(tools);
  char *text = cedar_tool_input_dome_schema_text(types);
  json_decref(types);
  if (text == NULL) {
    fprintf(stderr, "dome %s: typed schema: out of memory\n", command);
    *failed = true;
  }
  return text;
}
