/* dome tool approve NAME [--accept-findings] — pin the current definitions of a gateway backend's tools
 * (rug-pull defence: a tool whose definition changed since it was approved is withheld from agents). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "supervisor/cli/command.h"
#include "supervisor/cli/control_list.h"
#include "supervisor/control/control.h"

static const char *text_or(json_t *value, const char *fallback) {
  return json_is_string(value) ? json_string_value(value) : fallback;
}

static int approve_main(int argc, char **argv) {
  const char *socket = NULL, *name = NULL;
  bool accept = false, json = false;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      printf(
          "usage: dome tool approve NAME [--accept-findings] [--json] [--control-socket PATH]\n"
          "Pins the current definitions (name, description, inputSchema, outputSchema, annotations) of the\n"
          "tools of gateway backend NAME, after showing what changed since the last approval. A tool\n"
          "whose definition changes later is withheld from agents (not listed, calls refused) and\n"
          "journalled as tool.changed until approved again. Descriptions are checked for hidden text\n"
          "(Unicode tag characters, bidirectional overrides, zero-width runs, HTML comments) and for\n"
          "instructions addressed to the model: with findings nothing is approved (exit 125) unless\n"
          "--accept-findings is given.\n");
      return 0;
    }
    if (strcmp(argv[i], "--control-socket") == 0 && i + 1 < argc)
      socket = argv[++i];
    else if (strcmp(argv[i], "--accept-findings") == 0)
      accept = true;
    else if (strcmp(argv[i], "--json") == 0)
      json = true;
    else if (argv[i][0] != '-' && name == NULL)
      name = argv[i];
    else {
      fprintf(stderr, "dome tool approve: unexpected argument `%s`\n", argv[i]);
      return DOME_EXIT_FAILURE;
    }
  }
  if (name == NULL) {
    fprintf(stderr, "dome tool approve: NAME is required (see --help)\n");
    return DOME_EXIT_FAILURE;
  }
  json_t *args = json_pack("{s:s,s:b}", "name", name, "accept_findings", accept), *result = NULL;
  if (cli_control_call("tool approve", socket, "tools.approve", args, &result) < 0) return DOME_EXIT_FAILURE;
  bool approved = json_is_true(json_object_get(result, "approved"));
  if (json) {
    char *text = json_dumps(result, JSON_INDENT(2) | JSON_SORT_KEYS);
    if (text) printf("%s\n", text);
    free(text);
    json_decref(result);
    return approved ? 0 : DOME_EXIT_FAILURE;
  }
  size_t i;
  json_t *change;
  json_array_foreach(json_object_get(result, "changes"), i, change) {
    const char *tool = text_or(json_object_get(change, "mcp_tool"), "?");
    const char *kind = text_or(json_object_get(change, "change"), "?");
    printf("%s %s", kind, tool);
    json_t *fields = json_object_get(change, "fields");
    size_t j;
    json_t *field;
    json_array_foreach(fields, j, field) printf("%s%s", j ? ", " : " (", json_string_value(field));
    if (json_array_size(fields)) printf(")");
    printf("\n");
    json_array_foreach(fields, j, field) {
      const char *key = json_string_value(field);
      char *old =
          json_dumps(json_object_get(json_object_get(change, "old"), key), JSON_ENCODE_ANY | JSON_COMPACT);
      char *new =
          json_dumps(json_object_get(json_object_get(change, "new"), key), JSON_ENCODE_ANY | JSON_COMPACT);
      printf("  - %s: %s\n  + %s: %s\n", key, old ? old : "null", key, new ? new : "null");
      free(old);
      free(new);
    }
  }
  json_t *finding;
  json_array_foreach(json_object_get(result, "findings"), i, finding)
      printf("finding: %s %s at byte %lld: %s (%s)\n", text_or(json_object_get(finding, "mcp_tool"), "?"),
             text_or(json_object_get(finding, "field"), "?"),
             (long long)json_integer_value(json_object_get(finding, "offset")),
             text_or(json_object_get(finding, "detail"), ""), text_or(json_object_get(finding, "kind"), ""));
  if (approved)
    printf("Approved %s: %lld tools pinned%s\n", name,
           (long long)json_integer_value(json_object_get(result, "pinned")),
           json_array_size(json_object_get(result, "findings")) ? " (findings accepted)" : "");
  else
    fprintf(stderr,
            "dome tool approve: %zu findings: nothing approved (pass --accept-findings to approve anyway)\n",
            json_array_size(json_object_get(result, "findings")));
  json_decref(result);
  return approved ? 0 : DOME_EXIT_FAILURE;
}

DOME_COMMAND(tool_approve, "tool approve", "pin a gateway backend's tool definitions (after showing changes)",
             approve_main);
