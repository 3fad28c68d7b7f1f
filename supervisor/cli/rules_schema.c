/* dome rules schema [--tools FILE] [--control-socket PATH] [--json | --definitions] — the generated part
 * of the Dome schema: context.input typed from each tool's inputSchema (policy/tool_input). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/tool_input/tool_input.h"
#include "supervisor/cli/command.h"
#include "supervisor/cli/rules_tools.h"

static int schema_main(int argc, char **argv) {
  const char *tools_file = NULL, *socket = NULL;
  bool json = false, definitions = false;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      printf(
          "usage: dome rules schema [--tools FILE] [--control-socket PATH] [--json | --definitions]\n"
          "Prints the part of the Dome schema generated from the tool registry (the running domed's, or\n"
          "the saved copy --tools FILE): `type ToolInput`, one optional attribute per tool name as agents\n"
          "see it, typed from the tool's inputSchema (docs/policy.md, \"Typed tool arguments\"). Parts of\n"
          "an inputSchema Cedar cannot type are listed on stderr with their schema path.\n"
          "--json: the fragment in the Cedar JSON schema format. --definitions: the tool definitions\n"
          "themselves ({\"tools\": [...]}), a copy for `dome rules validate --tools FILE`.\n");
      return 0;
    }
    if (strcmp(argv[i], "--tools") == 0 && i + 1 < argc)
      tools_file = argv[++i];
    else if (strcmp(argv[i], "--control-socket") == 0 && i + 1 < argc)
      socket = argv[++i];
    else if (strcmp(argv[i], "--json") == 0)
      json = true;
    else if (strcmp(argv[i], "--definitions") == 0)
      definitions = true;
    else {
      fprintf(stderr, "dome rules schema: unexpected argument `%s` (see --help)\n", argv[i]);
      return DOME_EXIT_FAILURE;
    }
  }
  if (json && definitions) {
    fprintf(stderr, "dome rules schema: --json or --definitions, not both\n");
    return DOME_EXIT_FAILURE;
  }
  char source[512], error[700];
  json_t *tools = cli_rules_tools_load(tools_file, socket, source, sizeof source, error, sizeof error);
  if (tools == NULL) {
    fprintf(stderr, "dome rules schema: %s\n", error);
    return DOME_EXIT_FAILURE;
  }
  if (definitions) {
    json_t *wrapped = json_pack("{s:o}", "tools", tools);
    char *text = json_dumps(wrapped, JSON_INDENT(2) | JSON_SORT_KEYS);
    json_decref(wrapped);
    if (text == NULL) return DOME_EXIT_FAILURE;
    printf("%s\n", text);
    free(text);
    return 0;
  }
  json_t *warnings = json_array();
  json_t *types = cli_rules_tool_types(tools, warnings);
  json_decref(tools);
  cli_rules_tools_print_warnings("rules schema", warnings);
  json_decref(warnings);
  int status = 0;
  if (json) {
    json_t *fragment = cedar_tool_input_fragment_json(types);
    char *text = fragment ? json_dumps(fragment, JSON_INDENT(2) | JSON_SORT_KEYS) : NULL;
    json_decref(fragment);
    if (text)
      printf("%s\n", text);
    else
      status = DOME_EXIT_FAILURE;
    free(text);
  } else {
    char *text = cedar_tool_input_fragment_text(types);
    if (text)
      printf("// generated from the inputSchemas of %s\n%s", source, text);
    else
      status = DOME_EXIT_FAILURE;
    free(text);
  }
  json_decref(types);
  return status;
}

DOME_COMMAND(rules_schema, "rules schema", "print the Dome schema part typing context.input from the tools",
             schema_main);
