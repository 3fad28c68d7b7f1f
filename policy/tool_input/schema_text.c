/* Printing derived input types in the human schema syntax and composing the typed Dome schema. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/schema/schema.h"
#include "policy/tool_input/tool_input.h"

/* The shipped schema declares ToolInput so, in namespace Dome; the generated declaration replaces it. */
static const char tool_input_marker[] = "\n  type ToolInput = {};\n";

static bool plain_identifier(const char *name) {
  static const char *const keywords[] = {"namespace", "entity",  "action", "type",   "appliesTo", "principal",
                                         "resource",  "context", "in",     "tags",   "enum",      "Set",
                                         "Bool",      "Boolean", "Long",   "String", "true",      "false",
                                         "if",        "then",    "else",   "like",   "has",       "is"};
  if (!(isalpha((unsigned char)name[0]) || name[0] == '_')) return false;
  for (const char *c = name; *c; c++)
    if (!isalnum((unsigned char)*c) && *c != '_') return false;
  for (size_t i = 0; i < sizeof keywords / sizeof keywords[0]; i++)
    if (strcmp(name, keywords[i]) == 0) return false;
  return true;
}

static void print_name(FILE *out, const char *name) {
  if (plain_identifier(name)) {
    fputs(name, out);
    return;
  }
  fputc('"', out);
  for (const unsigned char *c = (const unsigned char *)name; *c; c++) {
    if (*c == '"' || *c == '\\')
      fprintf(out, "\\%c", *c);
    else if (*c == '\n')
      fputs("\\n", out);
    else if (*c < 0x20 || *c == 0x7f)
      fprintf(out, "\\u{%x}", *c);
    else
      fputc(*c, out);
  }
  fputc('"', out);
}

static int compare_names(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static void print_type(FILE *out, const json_t *type, unsigned indent) {
  const char *kind = json_string_value(json_object_get(type, "type"));
  if (kind == NULL) {
    fputs("{}", out);
  } else if (strcmp(kind, "Boolean") == 0) {
    fputs("Bool", out);
  } else if (strcmp(kind, "String") == 0 || strcmp(kind, "Long") == 0) {
    fputs(kind, out);
  } else if (strcmp(kind, "Extension") == 0) {
    fputs(json_string_value(json_object_get(type, "name")), out);
  } else if (strcmp(kind, "Set") == 0) {
    fputs("Set<", out);
    print_type(out, json_object_get(type, "element"), indent);
    fputc('>', out);
  } else {
    json_t *attributes = json_object_get(type, "attributes");
    if (json_object_size(attributes) == 0) {
      fputs("{}", out);
      return;
    }
    /* attributes by name (as the schema model and `--json` order them): the text does not depend on
     * the order of a backend's properties */
    size_t count = json_object_size(attributes);
    const char **names = malloc(count * sizeof *names);
    if (names == NULL) return;
    size_t n = 0;
    const char *name;
    json_t *attribute;
    json_object_foreach(attributes, name, attribute) names[n++] = name;
    qsort(names, n, sizeof *names, compare_names);
    fputs("{\n", out);
    for (size_t i = 0; i < n; i++) {
      attribute = json_object_get(attributes, names[i]);
      fprintf(out, "%*s", (int)(indent + 2), "");
      print_name(out, names[i]);
      fputs(json_is_true(json_object_get(attribute, "required")) ? ": " : "?: ", out);
      print_type(out, attribute, indent + 2);
      fputs(",\n", out);
    }
    free(names);
    fprintf(out, "%*s}", (int)indent, "");
  }
}

char *cedar_tool_input_type_text(const json_t *type, unsigned indent) {
  char *text = NULL;
  size_t size = 0;
  FILE *out = open_memstream(&text, &size);
  if (out == NULL) return NULL;
  print_type(out, type, indent);
  if (fclose(out) != 0) {
    free(text);
    return NULL;
  }
  return text;
}

/* The ToolInput record: an optional attribute per tool. */
static json_t *tool_input_record(const json_t *tools) {
  json_t *attributes = json_object();
  const char *name;
  json_t *type;
  json_object_foreach((json_t *)tools, name, type) {
    json_t *attribute = json_deep_copy(type);
    json_object_set_new(attribute, "required", json_false());
    json_object_set_new(attributes, name, attribute);
  }
  return json_pack("{s:s,s:o}", "type", "Record", "attributes", attributes);
}

char *cedar_tool_input_fragment_text(const json_t *tools) {
  if (json_object_size(tools) > CEDAR_TOOL_INPUT_MAX_TOOLS) return NULL;
  json_t *record = tool_input_record(tools);
  char *type = record ? cedar_tool_input_type_text(record, 2) : NULL;
  json_decref(record);
  if (type == NULL) return NULL;
  char *text = NULL;
  if (asprintf(&text, "namespace Dome {\n  type ToolInput = %s;\n}\n", type) < 0) text = NULL;
  free(type);
  return text;
}

json_t *cedar_tool_input_fragment_json(const json_t *tools) {
  if (json_object_size(tools) > CEDAR_TOOL_INPUT_MAX_TOOLS) return NULL;
  json_t *record = tool_input_record(tools);
  json_t *public = record ? cedar_tool_input_type_public(record) : NULL;
  json_decref(record);
  if (public == NULL) return NULL;
  return json_pack("{s:{s:{s:o},s:{},s:{}}}", "Dome", "commonTypes", "ToolInput", public, "entityTypes",
                   "actions");
}

char *cedar_tool_input_dome_schema_text(const json_t *tools) {
  const char *base = cedar_schema_dome_text();
  const char *marker = strstr(base, tool_input_marker);
  if (marker == NULL) return NULL; /* the shipped schema always ends with it (tests/unit/cedar) */
  if (json_object_size(tools) > CEDAR_TOOL_INPUT_MAX_TOOLS) return NULL;
  json_t *record = tool_input_record(tools);
  char *type = record ? cedar_tool_input_type_text(record, 2) : NULL;
  json_decref(record);
  if (type == NULL) return NULL;
  char *text = NULL;
  if (asprintf(&text, "%.*s\n  type ToolInput = %s;\n%s", (int)(marker - base), base, type,
               marker + strlen(tool_input_marker)) < 0)
    text = NULL;
  free(type);
  return text;
}
