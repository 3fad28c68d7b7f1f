/* `dome cedar check-parse`: parse policies (and optionally template links), as the upstream
 * `cedar check-parse` (exit 0 when they parse, 1 with the error otherwise). */
#include <stdio.h>

#include "supervisor/cli/cedar_cli.h"
#include "supervisor/cli/command.h"

static const char usage_text[] =
    "usage: dome cedar check-parse [-p POLICIES] [--policy-format cedar|json] [-k TEMPLATE_LINKS]\n";

static int check_parse_main(int argc, char **argv) {
  static const struct option options[] = {{"policies", required_argument, 0, 'p'},
                                          {"policy-format", required_argument, 0, CEDAR_OPT_POLICY_FORMAT},
                                          {"template-linked", required_argument, 0, 'k'},
                                          {"help", no_argument, 0, 'h'},
                                          {0, 0, 0, 0}};
  cedar_cli cli = {0};
  int opt;
  optind = 1;
  while ((opt = getopt_long(argc, argv, "p:k:h", options, NULL)) != -1) {
    if (opt == 'h') {
      fputs(usage_text, stdout);
      return 0;
    }
    if (!cedar_cli_option(&cli, opt, optarg)) {
      fputs(usage_text, stderr);
      return CEDAR_EXIT_FAILURE;
    }
  }
  if (optind < argc) return cedar_cli_fail("cedar check-parse", "unexpected argument `%s`", argv[optind]);
  cedar_policy_set *set = NULL;
  int rc = cedar_cli_load_policies(&cli, "cedar check-parse", &set);
  cedar_policy_set_free(set);
  cedar_cli_release(&cli);
  return rc;
}
DOME_COMMAND(cedar_check_parse, "cedar check-parse",
             "check that Cedar policies parse (upstream cedar CLI flags)", check_parse_main);
