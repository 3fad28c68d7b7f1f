/* dome cedar validate — the upstream `cedar validate` command: strict validation of a policy set (and its
 * template links) against a schema, with the upstream flags and exit codes (0 passed, 1 bad input,
 * 3 validation failed). Option handling and loading are shared with the other `dome cedar` commands. */
#include <stdio.h>
#include <string.h>

#include "policy/validate/validate.h"
#include "supervisor/cli/cedar_cli.h"
#include "supervisor/cli/command.h"

#define CEDAR_EXIT_VALIDATION_FAILURE 3

enum { OPT_DENY_WARNINGS = 2000, OPT_VALIDATION_MODE, OPT_LEVEL };

static const char usage_text[] =
    "usage: dome cedar validate -s SCHEMA [--schema-format cedar|json] [-p POLICIES] [--policy-format "
    "cedar|json]\n"
    "                           [-k TEMPLATE_LINKS] [--validation-mode strict] [--deny-warnings]\n"
    "Validates the policies (standard input without -p) against the schema in strict mode, as cedar-policy\n"
    "4.13. Prints each error and warning with file:line:col, then `validation passed` or `validation "
    "failed`.\n"
    "Exit status: 0 passed, 1 bad input, 3 validation failed (warnings fail only with --deny-warnings).\n";

/* The flags only validate has; `state` is the --deny-warnings bool. */
static int validate_option(void *state, int opt, const char *arg) {
  if (opt == OPT_DENY_WARNINGS) {
    *(bool *)state = true;
  } else if (opt == OPT_VALIDATION_MODE) {
    if (strcmp(arg, "strict") != 0) {
      cedar_cli_fail("cedar validate", "--validation-mode `%s` is not supported (only `strict`)", arg);
      return -1;
    }
  } else {
    return 0;
  }
  return 1;
}

static int validate_main(int argc, char **argv) {
  static const struct option options[] = {CEDAR_CLI_SCHEMA_OPTIONS,
                                          CEDAR_CLI_POLICY_OPTIONS,
                                          {"deny-warnings", no_argument, 0, OPT_DENY_WARNINGS},
                                          {"validation-mode", required_argument, 0, OPT_VALIDATION_MODE},
                                          {"help", no_argument, 0, 'h'},
                                          {0, 0, 0, 0}};
  const char *command = "cedar validate";
  cedar_cli cli = {0};
  bool deny_warnings = false;
  int status;
  if (!cedar_cli_parse_options(&cli, argc, argv, "s:p:k:h", options, usage_text, validate_option,
                               &deny_warnings, &status))
    return status;
  if (optind < argc) return cedar_cli_fail(command, "unexpected argument `%s`", argv[optind]);
  if (!cli.schema) {
    fputs(usage_text, stderr);
    return cedar_cli_fail(command, "--schema is required");
  }
  cedar_policy_set *set = NULL;
  status = cedar_cli_load_schema(&cli, command);
  if (status == 0) status = cedar_cli_load_policies(&cli, command, &set);
  if (status == 0) {
    cedar_validation_result result;
    if (cedar_validate(cli.loaded_schema, set, &result) < 0) {
      status = cedar_cli_fail(command, "out of memory");
    } else {
      for (size_t i = 0; i < result.count; i++) {
        char buf[1200];
        printf("%s\n", cedar_validation_issue_format(&result.issues[i], buf, sizeof buf));
      }
      bool passed = cedar_validation_passed(&result) && !(deny_warnings && result.warning_count);
      printf(passed ? "validation passed\n" : "validation failed\n");
      status = passed ? 0 : CEDAR_EXIT_VALIDATION_FAILURE;
      cedar_validation_result_release(&result);
    }
  }
  cedar_policy_set_free(set);
  cedar_cli_release(&cli);
  return status;
}

DOME_COMMAND(cedar_validate, "cedar validate",
             "validate Cedar policies against a schema (upstream cedar CLI flags)", validate_main);
