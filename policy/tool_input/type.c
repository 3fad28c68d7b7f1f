/* The Cedar type of a tool's input, derived from its MCP inputSchema (mapping in tool_input.h). */
#include <stdio.h>
#include <string.h>

#include "policy/tool_input/tool_input.h"

static void warn(json_t *warnings, const char *tool, const char *path, const char *message) {
  if (warnings == NULL) return;
  json_array_append_new(warnings, json_pack("{s:s,s:s,s:s}", "tool", tool ? tool : "", "path",
                                            path[0] ? path : "/", "message", message));
}

static json_t *primitive(const char *name) {
  return json_pack("{s:s}", "type", name);
}

/* The one JSON type a schema names, or NULL with *reason for a union / no type. */
static const char *single_type(const json_t *schema, const char **reason) {
  const json_t *type = json_object_get(schema, "type");
  if (json_object_get(schema, "anyOf") || json_object_get(schema, "oneOf") ||
      json_object_get(schema, "allOf")) {
    *reason = "a union (anyOf/oneOf/allOf) has no Cedar type";
    return NULL;
  }
  if (json_is_string(type)) return json_string_value(type);
  if (json_is_array(type)) {
    if (json_array_size(type) == 1 && json_is_string(json_array_get(type, 0)))
      return json_string_value(json_array_get(type, 0));
    *reason = "a union of types has no Cedar type";
    return NULL;
  }
  if (type != NULL) {
    *reason = "`type` is neither a string nor a list";
    return NULL;
  }
  const json_t *enumeration = json_object_get(schema, "enum");
  if (json_is_array(enumeration) && json_array_size(enumeration) > 0) {
    size_t i;
    const json_t *value;
    bool strings = true;
    json_array_foreach(enumeration, i, value) strings &= json_is_string(value);
    if (strings) return "string";
  }
  if (json_is_string(json_object_get(schema, "const"))) return "string";
  if (json_is_object(json_object_get(schema, "properties"))) return "object";
  *reason = "no `type`: a free-form value has no Cedar type";
  return NULL;
}

static json_t *derive(const json_t *schema, const char *tool, char *path, size_t path_length, unsigned depth,
                      json_t *warnings);

static json_t *derive_object(const json_t *schema, const char *tool, char *path, size_t path_length,
                             unsigned depth, json_t *warnings) {
  const json_t *properties = json_object_get(schema, "properties");
  const json_t *additional = json_object_get(schema, "additionalProperties");
  if (!json_is_object(properties) || json_object_size(properties) == 0) {
    if (json_is_object(additional)) {
      /* a map: its keys are a set of strings */
      snprintf(path + path_length, 1024 - path_length, "/additionalProperties");
      warn(warnings, tool, path, "the values of a map are not typed: its keys are a Set<String>");
      path[path_length] = '\0';
      return json_pack("{s:s,s:{s:s},s:s}", "type", "Set", "element", "type", "String", "x-dome", "keys");
    }
    if (!json_is_false(additional)) {
      warn(warnings, tool, path, "a free-form object (no properties) has no Cedar type");
      return NULL;
    }
  }
  json_t *attributes = json_object();
  json_t *record = json_pack("{s:s,s:o}", "type", "Record", "attributes", attributes);
  const json_t *required = json_object_get(schema, "required");
  const char *name;
  const json_t *property;
  size_t count = 0;
  json_object_foreach((json_t *)properties, name, property) {
    if (++count > CEDAR_TOOL_INPUT_MAX_ATTRIBUTES) {
      warn(warnings, tool, path, "more than 1024 properties: the rest are not typed");
      break;
    }
    int written = snprintf(path + path_length, 1024 - path_length, "/properties/%s", name);
    size_t length =
        written > 0 && (size_t)written < 1024 - path_length ? path_length + (size_t)written : 1023;
    json_t *type = derive(property, tool, path, length, depth + 1, warnings);
    path[path_length] = '\0';
    if (type == NULL) continue;
    bool is_required = false;
    size_t i;
    const json_t *entry;
    json_array_foreach(required, i, entry) is_required |=
        json_is_string(entry) && strcmp(json_string_value(entry), name) == 0;
    json_object_set_new(type, "required", json_boolean(is_required));
    json_object_set_new(attributes, name, type);
  }
  return record;
}

static json_t *derive(const json_t *schema, const char *tool, char *path, size_t path_length, unsigned depth,
                      json_t *warnings) {
  if (!json_is_object(schema)) {
    warn(warnings, tool, path, "not a schema object: a free-form value has no Cedar type");
    return NULL;
  }
  if (depth > CEDAR_TOOL_INPUT_MAX_DEPTH) {
    warn(warnings, tool, path, "nested deeper than 32: not typed");
    return NULL;
  }
  const char *reason = NULL;
  const char *type = single_type(schema, &reason);
  if (type == NULL) {
    warn(warnings, tool, path, reason);
    return NULL;
  }
  if (strcmp(type, "string") == 0) {
    const json_t *enumeration = json_object_get(schema, "enum");
    if (enumeration) {
      size_t i;
      const json_t *value;
      bool strings = json_is_array(enumeration);
      json_array_foreach(enumeration, i, value) strings &= json_is_string(value);
      if (!strings) {
        warn(warnings, tool, path, "an enum of other values than strings has no Cedar type");
        return NULL;
      }
    }
    const char *format = json_string_value(json_object_get(schema, "format"));
    if (format && (strcmp(format, "ipv4") == 0 || strcmp(format, "ipv6") == 0))
      return json_pack("{s:s,s:s,s:s}", "type", "Extension", "name", "ipaddr", "x-dome", format);
    if (format && strcmp(format, "date-time") == 0)
      return json_pack("{s:s,s:s}", "type", "Extension", "name", "datetime");
    return primitive("String");
  }
  if (strcmp(type, "integer") == 0) return primitive("Long");
  if (strcmp(type, "boolean") == 0) return primitive("Boolean");
  if (strcmp(type, "number") == 0) {
    warn(warnings, tool, path, "a number (floating point) has no exact Cedar type");
    return NULL;
  }
  if (strcmp(type, "array") == 0) {
    const json_t *items = json_object_get(schema, "items");
    if (json_object_get(schema, "prefixItems") || json_is_array(items)) {
      warn(warnings, tool, path, "a tuple (prefixItems) has no Cedar type");
      return NULL;
    }
    if (!json_is_object(items)) {
      warn(warnings, tool, path, "an array without one `items` schema has no Cedar type");
      return NULL;
    }
    snprintf(path + path_length, 1024 - path_length, "/items");
    json_t *element = derive(items, tool, path, strlen(path), depth + 1, warnings);
    path[path_length] = '\0';
    if (element == NULL) return NULL;
    return json_pack("{s:s,s:o}", "type", "Set", "element", element);
  }
  if (strcmp(type, "object") == 0) return derive_object(schema, tool, path, path_length, depth, warnings);
  char message[128];
  snprintf(message, sizeof message, "type `%.40s` has no Cedar type", type);
  warn(warnings, tool, path, message);
  return NULL;
}

json_t *cedar_tool_input_type(const json_t *input_schema, const char *tool, json_t *warnings) {
  char path[1024] = "";
  const char *reason = NULL;
  const char *type = json_is_object(input_schema) ? single_type(input_schema, &reason) : NULL;
  json_t *record = NULL;
  if (type == NULL || strcmp(type, "object") != 0) {
    warn(warnings, tool, path,
         type     ? "the inputSchema is not an object schema"
         : reason ? reason
                  : "no inputSchema");
  } else {
    record = derive_object(input_schema, tool, path, 0, 0, warnings);
  }
  if (record == NULL || strcmp(json_string_value(json_object_get(record, "type")), "Record") != 0) {
    /* arguments are always an object: without typed properties (a free-form object, a map), the
     * tool's input is the empty record */
    json_decref(record);
    record = json_pack("{s:s,s:{}}", "type", "Record", "attributes");
  }
  return record;
}

static json_t *strip(const json_t *type) {
  if (json_is_object(type)) {
    json_t *copy = json_object();
    const char *key;
    json_t *value;
    json_object_foreach((json_t *)type, key, value) {
      if (strcmp(key, "x-dome") == 0) continue;
      json_object_set_new(copy, key, strip(value));
    }
    return copy;
  }
  return json_deep_copy(type);
}

json_t *cedar_tool_input_type_public(const json_t *type) {
  return strip(type);
}
