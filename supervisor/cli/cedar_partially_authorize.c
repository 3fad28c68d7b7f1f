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

static int partially_authorize_main(int argc, char **argv) {
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
      {"context-unknown", no_argument, 0, CEDAR_OPT_CONTEXT_UNKNOWN},
      {"request-json", required_argument, 0, CEDAR_OPT_REQUEST_JSON},
      {"residual-format", required_argument, 0, CEDAR_OPT_RESIDUAL_FORMAT},
      {"principal-type", required_argument, 0, CEDAR_OPT_PRINCIPAL_TYPE},
      {"resource-type", required_argument, 0, CEDAR_OPT_RESOURCE_TYPE},
      {"verbose", no_argument, 0, 'v'},
      {"help", no_argument, 0, 'h'},
      {0, 0, 0, 0}};
  const char *cmd = "cedar partially-authorize";
  cedar_cli cli = {0};
  bool context_unknown = false, json = false;
  const char *principal_type = NULL, *resource_type = NULL;
  int opt;
  optind = 1;
  while ((opt = getopt_long(argc, argv, "p:k:s:l:a:r:c:vh", options, NULL)) != -1) {
    if (opt == 'h') {
      fputs(usage_text, stdout);
      return 0;
    } else if (opt == CEDAR_OPT_PRINCIPAL_TYPE) {
      principal_type = optarg;
    } else if (opt == CEDAR_OPT_RESOURCE_TYPE) {
      resource_type = optarg;
    } else if (opt == CEDAR_OPT_CONTEXT_UNKNOWN) {
      context_unknown = true;
    } else if (opt == CEDAR_OPT_RESIDUAL_FORMAT) {
      if (strcmp(optarg, "json") && strcmp(optarg, "cedar"))
        return cedar_cli_fail(cmd, "--residual-format: expected `cedar` or `json`, got `%s`", optarg);
      json = strcmp(optarg, "json") == 0;
    } else if (!cedar_cli_option(&cli, opt, optarg)) {
      fputs(usage_text, stderr);
      return CEDAR_EXIT_FAILURE;
    }
  }
  if (optind < argc) return cedar_cli_fail(cmd, "unexpected argument `%s`", argv[optind]);
  if (context_unknown && cli.context)
    return cedar_cli_fail(cmd, "--context and --context-unknown exclude each other");
  cedar_policy_set *set = NULL;
  cedar_entities *entities = NULL;
  cedar_context *context = NULL;
  cedar_request request;
  int rc = cedar_cli_load_schema(&cli, cmd);
  if (rc == 0) rc = cedar_cli_load_policies(&cli, cmd, &set);
  if (rc == 0) rc = cedar_cli_load_entities(&cli, cmd, &entities);
  if (rc == 0) rc = cedar_cli_load_request(&cli, cmd, false, &request, &context);
  if (rc == 0) {
    cedar_partial_request pr = {request.principal, request.action, request.resource, context,
                                context_unknown};
    if (!pr.principal.type && principal_type) pr.principal = (cedar_uid_ref){principal_type, NULL, 0};
    if (!pr.resource.type && resource_type) pr.resource = (cedar_uid_ref){resource_type, NULL, 0};
    cedar_partial_response response;
    if (cedar_partially_authorize(set, entities, &pr, &response) < 0) {
      rc = cedar_cli_fail(cmd, "out of memory");
    } else {
      const char *names[] = {"DENY", "ALLOW", "UNKNOWN"};
      printf("%s\n", names[response.decision]);
      if (response.error_count) {
        printf("\n");
        for (size_t i = 0; i < response.error_count; i++)
          printf("error while evaluating policy `%s`: %s\n", response.errors[i].policy_id,
                 response.errors[i].message);
      }
      if (cli.verbose && response.satisfied_count) {
        printf("\nnote: satisfied whatever the unknowns are:\n");
        for (size_t i = 0; i < response.satisfied_count; i++) printf("  %s\n", response.satisfied[i]);
      }
      if (response.decision == CEDAR_PARTIAL_UNKNOWN ||
          (cli.verbose && cedar_policy_set_count(response.residuals))) {
        char *text = json ? cedar_policy_set_to_json(response.residuals)
                          : cedar_policy_set_to_text(response.residuals);
        printf("\nresidual policies:\n%s%s", text ? text : "(out of memory)\n", json ? "\n" : "");
        free(text);
      }
      rc = response.decision == CEDAR_PARTIAL_DENY ? CEDAR_EXIT_DENY : CEDAR_EXIT_SUCCESS;
      cedar_partial_response_release(&response);
    }
  }
  cedar_context_free(context);
  cedar_entities_free(entities);
  cedar_policy_set_free(set);
  cedar_cli_release(&cli);
  return rc;
}
DOME_COMMAND(cedar_partially_authorize, "cedar partially-authorize",
             "authorize with unknown request parts, printing residual policies (upstream cedar CLI flags)",
             partially_authorize_main);
