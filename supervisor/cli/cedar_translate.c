/* `dome cedar translate-policy --direction cedar-to-json|json-to-cedar [-p FILE]`: convert between the
 * Cedar policy syntax and the JSON policy format, as the upstream `cedar translate-policy`. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "supervisor/cli/cedar_cli.h"
#include "supervisor/cli/command.h"

static const char usage_text[] =
    "usage: dome cedar translate-policy --direction cedar-to-json|json-to-cedar [-p|--input-file FILE]\n";

static int translate_main(int argc, char **argv) {
  static const struct option options[] = {{"direction", required_argument, 0, CEDAR_OPT_DIRECTION},
                                          {"input-file", required_argument, 0, 'p'},
                                          {"policies", required_argument, 0, 'p'},
                                          {"help", no_argument, 0, 'h'},
                                          {0, 0, 0, 0}};
  const char *cmd = "cedar translate-policy";
  cedar_cli cli = {0};
  const char *direction = NULL;
  int opt;
  optind = 1;
  while ((opt = getopt_long(argc, argv, "p:h", options, NULL)) != -1) {
    if (opt == CEDAR_OPT_DIRECTION) {
      direction = optarg;
    } else if (opt == 'p') {
      cli.policies = optarg;
    } else if (opt == 'h') {
      fputs(usage_text, stdout);
      return 0;
    } else {
      fputs(usage_text, stderr);
      return CEDAR_EXIT_FAILURE;
    }
  }
  if (!direction || (strcmp(direction, "cedar-to-json") && strcmp(direction, "json-to-cedar")))
    return cedar_cli_fail(cmd, "--direction: expected `cedar-to-json` or `json-to-cedar`");
  bool to_json = strcmp(direction, "cedar-to-json") == 0;
  cli.policy_format = to_json ? "cedar" : "json";
  cedar_policy_set *set = NULL;
  int rc = cedar_cli_load_policies(&cli, cmd, &set);
  if (rc == 0) {
    char *out = to_json ? cedar_policy_set_to_json(set) : cedar_policy_set_to_text(set);
    if (!out) {
      rc = cedar_cli_fail(cmd, "out of memory");
    } else {
      fputs(out, stdout);
      if (to_json) fputc('\n', stdout);
      free(out);
    }
  }
  cedar_policy_set_free(set);
  cedar_cli_release(&cli);
  return rc;
}
DOME_COMMAND(cedar_translate_policy, "cedar translate-policy",
             "translate policies between Cedar syntax and JSON (upstream cedar CLI flags)", translate_main);
