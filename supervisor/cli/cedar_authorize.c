/* `dome cedar authorize`: one authorization request, as the upstream `cedar authorize`
 * (prints ALLOW or DENY; exit 0 allow, 2 deny, 1 failure). */
#include <stdio.h>
#include <string.h>

#include "supervisor/cli/cedar_cli.h"
#include "supervisor/cli/command.h"

static const char usage_text[] =
    "usage: dome cedar authorize [-p POLICIES] [--policy-format cedar|json] [-k TEMPLATE_LINKS]\n"
    "         [--entities FILE] [-s SCHEMA] [--schema-format cedar|json]\n"
    "         (-l PRINCIPAL -a ACTION -r RESOURCE [-c CONTEXT] | --request-json FILE) "
    "[--request-validation[=false]] "
    "[-v]\n"
    "Exit: 0 allow, 2 deny, 1 failure.\n";

static int authorize_main(int argc, char **argv) {
  static const struct option options[] = {
      CEDAR_CLI_POLICY_OPTIONS,
      {"entities", required_argument, 0, CEDAR_OPT_ENTITIES},
      CEDAR_CLI_SCHEMA_OPTIONS,
      CEDAR_CLI_REQUEST_OPTIONS,
      {"request-validation", optional_argument, 0, CEDAR_OPT_REQUEST_VALIDATION},
      {"verbose", no_argument, 0, 'v'},
      {"timing", no_argument, 0, CEDAR_OPT_TIMING},
      {"help", no_argument, 0, 'h'},
      {0, 0, 0, 0}};
  const char *cmd = "cedar authorize";
  cedar_cli cli = {0};
  int status;
  if (!cedar_cli_parse_options(&cli, argc, argv, "p:k:s:l:a:r:c:vh", options, usage_text, NULL, NULL,
                               &status))
    return status;
  if (optind < argc) return cedar_cli_fail(cmd, "unexpected argument `%s`", argv[optind]);
  cedar_cli_inputs in = {0};
  int rc = cedar_cli_load_inputs(&cli, cmd, true, &in);
  if (rc == 0) {
    cedar_response response;
    if (cedar_authorize(in.set, in.entities, &in.request, &response) < 0) {
      rc = cedar_cli_fail(cmd, "out of memory");
    } else {
      printf("%s\n", response.decision == CEDAR_ALLOW ? "ALLOW" : "DENY");
      cedar_cli_print_policy_errors(response.errors, response.error_count);
      if (cli.verbose) {
        printf("\n");
        if (!response.reason_count) {
          printf("note: no policies applied to this request\n");
        } else {
          printf("note: this decision was due to the following policies:\n");
          for (size_t i = 0; i < response.reason_count; i++) printf("  %s\n", response.reason[i]);
          printf("\n");
        }
      }
      rc = response.decision == CEDAR_ALLOW ? CEDAR_EXIT_SUCCESS : CEDAR_EXIT_DENY;
      cedar_response_release(&response);
    }
  }
  cedar_cli_inputs_release(&in);
  cedar_cli_release(&cli);
  return rc;
}
DOME_COMMAND(cedar_authorize, "cedar authorize",
             "authorize a request with Cedar policies (upstream cedar CLI flags)", authorize_main);
