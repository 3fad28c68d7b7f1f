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
      {"policies", required_argument, 0, 'p'},
      {"policy-format", required_argument, 0, CEDAR_OPT_POLICY_FORMAT},
      {"template-linked", required_argument, 0, 'k'},
      {"entities", required_argument, 0, CEDAR_OPT_ENTITIES},
      {"schema", required_argument, 0, 's'},
      {"schema-format", required_argument, 0, CEDAR_OPT_SCHEMA_FORMAT},
      {"principal", required_argument, 0, 'l'},
      {"action", required_argument, 0, 'a'},
      {"resource", required_argument, 0, 'r'},
      {"context", required_argument, 0, 'c'},
      {"request-json", required_argument, 0, CEDAR_OPT_REQUEST_JSON},
      {"request-validation", optional_argument, 0, CEDAR_OPT_REQUEST_VALIDATION},
      {"verbose", no_argument, 0, 'v'},
      {"timing", no_argument, 0, CEDAR_OPT_TIMING},
      {"help", no_argument, 0, 'h'},
      {0, 0, 0, 0}};
  const char *cmd = "cedar authorize";
  cedar_cli cli = {0};
  int opt;
  optind = 1;
  while ((opt = getopt_long(argc, argv, "p:k:s:l:a:r:c:vh", options, NULL)) != -1) {
    if (opt == 'h') {
      fputs(usage_text, stdout);
      return 0;
    }
    if (!cedar_cli_option(&cli, opt, optarg)) {
      fputs(usage_text, stderr);
      return CEDAR_EXIT_FAILURE;
    }
  }
  if (optind < argc) return cedar_cli_fail(cmd, "unexpected argument `%s`", argv[optind]);
  cedar_policy_set *set = NULL;
  cedar_entities *entities = NULL;
  cedar_context *context = NULL;
  cedar_request request;
  int rc = cedar_cli_load_schema(&cli, cmd);
  if (rc == 0) rc = cedar_cli_load_policies(&cli, cmd, &set);
  if (rc == 0) rc = cedar_cli_load_entities(&cli, cmd, &entities);
  if (rc == 0) rc = cedar_cli_load_request(&cli, cmd, true, &request, &context);
  if (rc == 0) {
    cedar_response response;
    if (cedar_authorize(set, entities, &request, &response) < 0) {
      rc = cedar_cli_fail(cmd, "out of memory");
    } else {
      printf("%s\n", response.decision == CEDAR_ALLOW ? "ALLOW" : "DENY");
      if (response.error_count) {
        printf("\n");
        for (size_t i = 0; i < response.error_count; i++)
          printf("error while evaluating policy `%s`: %s\n", response.errors[i].policy_id,
                 response.errors[i].message);
      }
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
  cedar_context_free(context);
  cedar_entities_free(entities);
  cedar_policy_set_free(set);
  cedar_cli_release(&cli);
  return rc;
}
DOME_COMMAND(cedar_authorize, "cedar authorize",
             "authorize a request with Cedar policies (upstream cedar CLI flags)", authorize_main);
