/* The tool registry as Cedar sees it: every tool's definition (the built-in execute_code and each
 * gateway backend's tools, as agents see them, from their last discovery) and the Dome schema with
 * context.input typed from their inputSchemas (policy/tool_input), against which rules are validated when
 * applied. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "policy/schema/schema.h"
#include "policy/tool_input/tool_input.h"
#include "supervisor/domed/domed.h"
#include "supervisor/gateway/gateway.h"

json_t *domed_tool_definitions(struct domed *domed, json_t *errors) {
  json_t *definitions = json_array();
  json_t *builtin = control_tool_get(domed->store, DOMED_BUILTIN_TOOL);
  const char *capability = json_string_value(json_object_get(builtin, "capability"));
  struct control_quota quota;
  control_quota_get(domed->store, capability ? capability : DOMED_BUILTIN_CAPABILITY, &quota);
  json_decref(builtin);
  json_array_append_new(definitions, domed_execute_code_tool(&quota, domed->config.mcp_output_limit_bytes));
  if (domed->gateways == NULL) return definitions;
  json_t *entries = control_tool_list(domed->store);
  size_t i;
  json_t *entry;
  json_array_foreach(entries, i, entry) {
    const char *backend = json_string_value(json_object_get(entry, "name"));
    if (!gateway_entry_is_external(entry) || strcmp(backend, DOMED_BUILTIN_TOOL) == 0) continue;
    /* the last discovery's definitions: applying rules contacts no backend */
    json_t *tools = gateway_registry_cached_tools(domed->gateways, backend);
    if (tools == NULL) {
      if (errors)
        json_array_append_new(errors,
                              json_pack("{s:s,s:s}", "tool", backend, "error",
                                        "not discovered yet (no tools/list reached it since domed started)"));
      continue;
    }
    json_t *approved = domed_pins_filter(domed, entry, tools); /* the tools agents see */
    json_decref(tools);
    size_t j;
    json_t *tool;
    json_array_foreach(approved, j, tool) json_array_append_new(definitions, gateway_tool_public(tool));
    json_decref(approved);
  }
  json_decref(entries);
  return definitions;
}

int domed_typed_schema(struct domed *domed, void **schema, dome_error *err) {
  json_t *definitions = domed_tool_definitions(domed, NULL);
  json_t *types = json_object();
  size_t i;
  json_t *tool;
  json_array_foreach(definitions, i, tool) {
    const char *name = json_string_value(json_object_get(tool, "name"));
    json_t *type = name ? cedar_tool_input_type(json_object_get(tool, "inputSchema"), name, NULL) : NULL;
    if (type) json_object_set_new(types, name, type);
  }
  json_decref(definitions);
  char *text = cedar_tool_input_dome_schema_text(types);
  json_decref(types);
  if (text == NULL) return dome_error_set(err, ENOMEM, "typed Dome schema");
  cedar_schema_error schema_error;
  memset(&schema_error, 0, sizeof schema_error);
  cedar_schema *parsed = NULL;
  int rc = cedar_schema_parse(text, strlen(text), "dome.cedarschema+tools", &parsed, &schema_error);
  free(text);
  if (rc < 0) {
    char message[600];
    return dome_error_set(err, -rc, "typed Dome schema: %s",
                          cedar_schema_error_format(&schema_error, message, sizeof message));
  }
  *schema = parsed;
  return 0;
}
