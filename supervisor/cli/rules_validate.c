/* dome rules validate FILE [--tools FILE | --schema FILE] — check Cedar rules against the Dome schema
 * with context.input typed by the tool registry (domed's, or a saved copy), or against another schema. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/cedar.h"
#include "policy/schema/schema.h"
#include "policy/tool_input/tool_input.h"
#include "policy/validate/validate.h"
#include "supervisor/cli/command.h"
#include "supervisor/cli/rules_tools.h"

/* Exit status of a validation failure, as the upstream cedar CLI's `validate`. */
#define RULES_EXIT_INVALID 3

/* The Dome schema typing context.input by the registry (--tools FILE, else domed's; without either, no
 * tool is declared and a note says so). Returns 0 or -1 with the error printed. */
static int typed_dome_schema(const char *tools_file, const char *socket, cedar_schema **schema) {
  char source[512], error[700];
  json_t *tools = cli_rules_tools_load(tools_file, socket, source, sizeof source, error, sizeof error);
  if (tools == NULL) {
    if (tools_file) {
      fprintf(stderr, "dome rules validate: %s\n", error);
      return -1;
    }
    fprintf(stderr,
            "dome rules validate: note: no tool registry (%s): context.input declares no tool; pass "
            "--tools FILE\n",
            error);
    tools = json_array();
  }
  json_t *warnings = json_array();
  json_t *types = cli_rules_tool_types(tools, warnings);
  cli_rules_tools_print_warnings("rules validate", warnings);
  char *text = cedar_tool_input_dome_schema_text(types);
  json_decref(warnings);
  json_decref(types);
  json_decref(tools);
  cedar_schema_error schema_err;
  memset(&schema_err, 0, sizeof schema_err);
  int r =
      text ? cedar_schema_parse(text, strlen(text), CEDAR_SCHEMA_DOME_PATH, schema, &schema_err) : -ENOMEM;
  free(text);
  if (r < 0) {
    char buf[900];
    fprintf(stderr, "dome rules validate: schema: %s\n",
            r == -ENOMEM ? "out of memory" : cedar_schema_error_format(&schema_err, buf, sizeof buf));
    return -1;
  }
  return 0;
}

static int validate_main(int argc, char **argv) {
  const char *schema_path = NULL, *file = NULL, *tools_file = NULL, *socket = NULL;
  bool deny_warnings = false;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      printf(
          "usage: dome rules validate FILE [--tools FILE | --schema FILE] [--control-socket PATH]\n"
          "                           [--deny-warnings]\n"
          "Checks the Cedar rules in FILE against the schema (default: the shipped %s, with\n"
          "context.input typed from each tool's inputSchema: the running domed's tool registry, or the\n"
          "saved copy --tools FILE, e.g. the output of `dome rules schema --definitions`) in strict mode,\n"
          "as `cedar validate` does: unknown entity types and actions, misspelled or unguarded attributes,\n"
          "type errors, scopes no action applies to. Prints `validation passed`, or each problem as\n"
          "file:line:col and exits 3. Warnings (a policy that can never apply) fail only with "
          "--deny-warnings.\n",
          CEDAR_SCHEMA_DOME_PATH);
      return 0;
    }
    if ((strcmp(argv[i], "--schema") == 0 || strcmp(argv[i], "-s") == 0) && i + 1 < argc)
      schema_path = argv[++i];
    else if (strcmp(argv[i], "--tools") == 0 && i + 1 < argc)
      tools_file = argv[++i];
    else if (strcmp(argv[i], "--control-socket") == 0 && i + 1 < argc)
      socket = argv[++i];
    else if (strcmp(argv[i], "--deny-warnings") == 0)
      deny_warnings = true;
    else if (argv[i][0] != '-' && file == NULL)
      file = argv[i];
    else {
      fprintf(stderr, "dome rules validate: unexpected argument `%s` (see --help)\n", argv[i]);
      return DOME_EXIT_FAILURE;
    }
  }
  if (!file) {
    fprintf(stderr, "dome rules validate: FILE is required (see --help)\n");
    return DOME_EXIT_FAILURE;
  }
  if (schema_path && tools_file) {
    fprintf(stderr, "dome rules validate: --tools types the Dome schema: not with --schema\n");
    return DOME_EXIT_FAILURE;
  }
  cedar_schema *schema = NULL;
  cedar_schema_error schema_err;
  if (!schema_path && typed_dome_schema(tools_file, socket, &schema) < 0) return DOME_EXIT_FAILURE;
  int r = schema_path ? cedar_schema_load_file(schema_path, &schema, &schema_err) : 0;
  if (r < 0) {
    char buf[900];
    fprintf(stderr, "dome rules validate: schema: %s\n",
            cedar_schema_error_format(&schema_err, buf, sizeof buf));
    return DOME_EXIT_FAILURE;
  }
  cedar_policy_set *set = NULL;
  cedar_diagnostic diag;
  r = cedar_policy_set_load_file(file, 0, &set, &diag);
  if (r < 0) {
    char buf[1200];
    cedar_schema_free(schema);
    if (r == -EINVAL || r == -E2BIG) {
      printf("%s\n", cedar_diagnostic_format(&diag, buf, sizeof buf));
      return RULES_EXIT_INVALID;
    }
    fprintf(stderr, "dome rules validate: %s\n", cedar_diagnostic_format(&diag, buf, sizeof buf));
    return DOME_EXIT_FAILURE;
  }
  cedar_validation_result result;
  r = cedar_validate(schema, set, &result);
  if (r < 0) {
    fprintf(stderr, "dome rules validate: %s\n", strerror(-r));
    cedar_policy_set_free(set);
    cedar_schema_free(schema);
    return DOME_EXIT_FAILURE;
  }
  for (size_t i = 0; i < result.count; i++) {
    char buf[1200];
    printf("%s\n", cedar_validation_issue_format(&result.issues[i], buf, sizeof buf));
  }
  bool passed = cedar_validation_passed(&result) && !(deny_warnings && result.warning_count);
  if (passed)
    printf("validation passed\n");
  else
    printf("validation failed: %zu error%s, %zu warning%s\n", result.error_count,
           result.error_count == 1 ? "" : "s", result.warning_count, result.warning_count == 1 ? "" : "s");
  cedar_validation_result_release(&result);
  cedar_policy_set_free(set);
  cedar_schema_free(schema);
  return passed ? 0 : RULES_EXIT_INVALID;
}

DOME_COMMAND(rules_validate, "rules validate",
             "check Cedar rules against the Dome schema (strict validation)", validate_main);
