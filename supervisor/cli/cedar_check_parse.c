/* `dome cedar check-parse`: parse policies (and optionally template links), as the upstream
 * `cedar check-parse` (exit 0 when they parse, 1 with the error otherwise). */
#include <stdio.h>

#include "supervisor/cli/cedar_cli.h"
#include "supervisor/cli/command.h"

static const char usage_text[] =
    "usage: dome cedar check-parse [-p POLICIES] [--policy-format cedar|json] [-k TEMPLATE_LINKS]\n";

static int check_parse_main(int argc, char **argv) {
  static const struct option options[] = {
      CEDAR_CLI_POLICY_OPTIONS, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
  cedar_cli cli = {0};
  int status;
  if (!cedar_cli_parse_options(&cli, argc, argv, "p:k:h", options, usage_text, NULL, NULL, &status))
    return status;
  if (optind < argc) return cedar_cli_fail("cedar check-parse", "unexpected argument `%s`", argv[optind]);
  cedar_policy_set *set = NULL;
  int rc = cedar_cli_load_policies(&cli, "cedar check-parse", &set);
  cedar_policy_set_free(set);
  cedar_cli_release(&cli);
  return rc;
}
DOME_COMMAND(cedar_check_parse, "cedar check-parse",
             "check that Cedar policies parse (upstream cedar CLI flags)", check_parse_main);
