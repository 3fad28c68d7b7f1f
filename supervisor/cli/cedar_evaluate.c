/* `dome cedar evaluate EXPRESSION`: evaluate a Cedar expression for a request, as the upstream
 * `cedar evaluate` (prints the value; exit 0, or 1 on a parse or evaluation error). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "supervisor/cli/cedar_cli.h"
#include "supervisor/cli/command.h"

static const char usage_text[] =
    "usage: dome cedar evaluate [--entities FILE] [-s SCHEMA] [--schema-format cedar|json]\n"
    "         [-l PRINCIPAL] [-a ACTION] [-r RESOURCE] [-c CONTEXT | --request-json FILE] EXPRESSION\n";

static int evaluate_main(int argc, char **argv) {
  static const struct option options[] = {
      {"entities", required_argument, 0, CEDAR_OPT_ENTITIES},
      CEDAR_CLI_SCHEMA_OPTIONS,
      CEDAR_CLI_REQUEST_OPTIONS,
      {"request-validation", optional_argument, 0, CEDAR_OPT_REQUEST_VALIDATION},
      {"help", no_argument, 0, 'h'},
      {0, 0, 0, 0}};
  const char *cmd = "cedar evaluate";
  cedar_cli cli = {0};
  int status;
  if (!cedar_cli_parse_options(&cli, argc, argv, "s:l:a:r:c:h", options, usage_text, NULL, NULL, &status))
    return status;
  if (optind + 1 != argc) {
    fputs(usage_text, stderr);
    return CEDAR_EXIT_FAILURE;
  }
  const char *text = argv[optind];
  cedar_expression *expr = NULL;
  cedar_entities *entities = NULL;
  cedar_context *context = NULL;
  cedar_request request;
  cedar_diagnostic diag = {0};
  int rc = cedar_cli_load_schema(&cli, cmd);
  if (rc == 0 && cedar_expression_parse(text, strlen(text), "<expression>", &expr, &diag) < 0)
    rc = cedar_cli_fail_diag(cmd, &diag);
  if (rc == 0) rc = cedar_cli_load_entities(&cli, cmd, &entities);
  if (rc == 0) rc = cedar_cli_load_request(&cli, cmd, false, &request, &context);
  if (rc == 0) {
    /* Variables the request leaves out are the placeholder entity `__cedar::EvalEntity::"unspecified"`. */
    cedar_uid_ref *uids[3] = {&request.principal, &request.action, &request.resource};
    for (int i = 0; i < 3; i++)
      if (!uids[i]->type) *uids[i] = (cedar_uid_ref){"__cedar::EvalEntity", "unspecified", 0};
    char *value = NULL;
    int r = cedar_evaluate(expr, entities, &request, &value, &diag);
    if (r < 0) {
      rc = cedar_cli_fail_diag(cmd, &diag);
    } else {
      printf("%s\n", value);
      free(value);
    }
  }
  cedar_expression_free(expr);
  cedar_context_free(context);
  cedar_entities_free(entities);
  cedar_cli_release(&cli);
  return rc;
}
DOME_COMMAND(cedar_evaluate, "cedar evaluate", "evaluate a Cedar expression (upstream cedar CLI flags)",
             evaluate_main);
