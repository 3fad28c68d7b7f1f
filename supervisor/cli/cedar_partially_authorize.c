/* `dome cedar partially-authorize`: authorization with parts of the request unknown, as the upstream
 * `cedar partially-authorize`: a principal, action or resource left out is unknown (and the context with
 * --context-unknown, or parts of it written {"__extn": {"fn": "unknown", "arg": NAME}}). Prints ALLOW or
 * DENY when the known parts decide (exit 0 / 2), else UNKNOWN and the residual policies (exit 0);
 * 1 on failure. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "supervisor/cli/cedar_cli.h"
#include "supervisor/cli/command.h"

static const char usage_text[] =
    "usage: dome cedar partially-authorize [-p POLICIES] [--policy-format cedar|json] [-k TEMPLATE_LINKS]\n"
    "         [--entities FILE] [-s SCHEMA] [--schema-format cedar|json]\n"
    "         [-l PRINCIPAL] [-a ACTION] [-r RESOURCE] [-c CONTEXT | --context-unknown] [--request-json "
    "FILE]\n"
    "         [--principal-type TYPE] [--resource-type TYPE] [--residual-format cedar|json] [-v]\n"
    "Omitted principal/action/resource are unknown (of the given type with "
    "--principal-type/--resource-type).\n"
    "Exit: 0 allow or unknown, 2 deny, 1 failure.\n";

/* The flags only partially-authorize has. */
typedef struct partial_options {
  bool context_unknown, json;
  const char *principal_type, *resource_type;
} partial_options;

static int partial_option(void *state, int opt, const char *arg) {
  partial_options *own = state;
  if (opt == CEDAR_OPT_PRINCIPAL_TYPE) {
    own->principal_type = arg;
  } else if (opt == CEDAR_OPT_RESOURCE_TYPE) {
    own->resource_type = arg;
  } else if (opt == CEDAR_OPT_CONTEXT_UNKNOWN) {
    own->context_unknown = true;
  } else if (opt == CEDAR_OPT_RESIDUAL_FORMAT) {
    if (strcmp(arg, "json") && strcmp(arg, "cedar")) {
      cedar_cli_fail("cedar partially-authorize", "--residual-format: expected `cedar` or `json`, got `%s`",
                     arg);
      return -1;
    }
    own->json = strcmp(arg, "json") == 0;
  } else {
    return 0;
  }
  return 1;
}

static int partially_authorize_main(int argc, char **argv) {
  static const struct option options[] = {
      CEDAR_CLI_POLICY_OPTIONS,
      {"entities", required_argument, 0, CEDAR_OPT_ENTITIES},
      CEDAR_CLI_SCHEMA_OPTIONS,
      CEDAR_CLI_REQUEST_OPTIONS,
      {"context-unknown", no_argument, 0, CEDAR_OPT_CONTEXT_UNKNOWN},
      {"residual-format", required_argument, 0, CEDAR_OPT_RESIDUAL_FORMAT},
      {"principal-type", required_argument, 0, CEDAR_OPT_PRINCIPAL_TYPE},
      {"resource-type", required_argument, 0, CEDAR_OPT_RESOURCE_TYPE},
      {"verbose", no_argument, 0, 'v'},
      {"help", no_argument, 0, 'h'},
      {0, 0, 0, 0}};
  const char *cmd = "cedar partially-authorize";
  cedar_cli cli = {0};
  partial_options own = {0};
  int status;
  if (!cedar_cli_parse_options(&cli, argc, argv, "p:k:s:l:a:r:c:vh", options, usage_text, partial_option,
                               &own, &status))
    return status;
  if (optind < argc) return cedar_cli_fail(cmd, "unexpected argument `%s`", argv[optind]);
  if (own.context_unknown && cli.context)
    return cedar_cli_fail(cmd, "--context and --context-unknown exclude each other");
  cedar_cli_inputs in = {0};
  int rc = cedar_cli_load_inputs(&cli, cmd, false, &in);
  if (rc == 0) {
    cedar_partial_request pr = {in.request.principal, in.request.action, in.request.resource, in.context,
                                own.context_unknown};
    if (!pr.principal.type && own.principal_type) pr.principal = (cedar_uid_ref){own.principal_type, NULL, 0};
    if (!pr.resource.type && own.resource_type) pr.resource = (cedar_uid_ref){own.resource_type, NULL, 0};
    cedar_partial_response response;
    if (cedar_partially_authorize(in.set, in.entities, &pr, &response) < 0) {
      rc = cedar_cli_fail(cmd, "out of memory");
    } else {
      const char *names[] = {"DENY", "ALLOW", "UNKNOWN"};
      printf("%s\n", names[response.decision]);
      cedar_cli_print_policy_errors(response.errors, response.error_count);
      if (cli.verbose && response.satisfied_count) {
        printf("\nnote: satisfied whatever the unknowns are:\n");
        for (size_t i = 0; i < response.satisfied_count; i++) printf("  %s\n", response.satisfied[i]);
      }
      if (response.decision == CEDAR_PARTIAL_UNKNOWN ||
          (cli.verbose && cedar_policy_set_count(response.residuals))) {
        char *text = own.json ? cedar_policy_set_to_json(response.residuals)
                              : cedar_policy_set_to_text(response.residuals);
        printf("\nresidual policies:\n%s%s", text ? text : "(out of memory)\n", own.json ? "\n" : "");
        free(text);
      }
      rc = response.decision == CEDAR_PARTIAL_DENY ? CEDAR_EXIT_DENY : CEDAR_EXIT_SUCCESS;
      cedar_partial_response_release(&response);
    }
  }
  cedar_cli_inputs_release(&in);
  cedar_cli_release(&cli);
  return rc;
}
DOME_COMMAND(cedar_partially_authorize, "cedar partially-authorize",
             "authorize with unknown request parts, printing residual policies (upstream cedar CLI flags)",
             partially_authorize_main);
