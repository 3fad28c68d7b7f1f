/* `dome cedar format`: canonical Cedar text of policies, as the upstream `cedar format`
 * (-p FILE or stdin; --check exits 1 when the input is not already formatted; --write rewrites FILE). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "supervisor/cli/cedar_cli.h"
#include "supervisor/cli/command.h"

static const char usage_text[] =
    "usage: dome cedar format [-p POLICIES] [-w LINE_WIDTH] [-i INDENT_WIDTH] [-c|--check] [-W|--write]\n";

static int format_main(int argc, char **argv) {
  static const struct option options[] = {{"policies", required_argument, 0, 'p'},
                                          {"line-width", required_argument, 0, 'w'},
                                          {"indent-width", required_argument, 0, 'i'},
                                          {"check", no_argument, 0, 'c'},
                                          {"write", no_argument, 0, 'W'},
                                          {"help", no_argument, 0, 'h'},
                                          {0, 0, 0, 0}};
  const char *cmd = "cedar format";
  cedar_cli cli = {0};
  bool check = false, write = false;
  int opt;
  optind = 1;
  while ((opt = getopt_long(argc, argv, "p:w:i:cWh", options, NULL)) != -1) {
    switch (opt) {
      case 'p':
        cli.policies = optarg;
        break;
      case 'w':
      case 'i': {
        char *end;
        long v = strtol(optarg, &end, 10);
        if (*end || v < 0 || v > 1000)
          return cedar_cli_fail(cmd, "-%c: expected a width, got `%s`", opt, optarg);
        break;
      }
      case 'c':
        check = true;
        break;
      case 'W':
        write = true;
        break;
      case 'h':
        fputs(usage_text, stdout);
        return 0;
      default:
        fputs(usage_text, stderr);
        return CEDAR_EXIT_FAILURE;
    }
  }
  if (optind < argc) return cedar_cli_fail(cmd, "unexpected argument `%s`", argv[optind]);
  if (write && (!cli.policies || strcmp(cli.policies, "-") == 0))
    return cedar_cli_fail(cmd, "--write needs -p FILE");
  /* Read the text once so --check can compare it with the canonical form. */
  char *original = NULL;
  size_t length = 0;
  cedar_diagnostic diag = {0};
  FILE *f = !cli.policies || strcmp(cli.policies, "-") == 0 ? stdin : fopen(cli.policies, "rb");
  if (!f) return cedar_cli_fail(cmd, "--policies `%s`: %s", cli.policies, strerror(errno));
  FILE *mem = open_memstream(&original, &length);
  char chunk[65536];
  size_t n;
  while (mem && (n = fread(chunk, 1, sizeof chunk, f)) > 0) fwrite(chunk, 1, n, mem);
  if (f != stdin) fclose(f);
  if (!mem) return cedar_cli_fail(cmd, "out of memory");
  fclose(mem);
  cedar_policy_set *set = NULL;
  int rc = 0;
  if (cedar_policy_set_parse(original, length, cli.policies ? cli.policies : "<stdin>", 0, &set, &diag) < 0) {
    rc = cedar_cli_fail_diag(cmd, &diag);
  } else {
    char *text = cedar_policy_set_to_text(set);
    if (!text) {
      rc = cedar_cli_fail(cmd, "out of memory");
    } else if (check) {
      rc = strcmp(text, original) == 0 ? 0 : CEDAR_EXIT_FAILURE;
      if (rc)
        fprintf(stderr, "dome %s: `%s` is not formatted canonically\n", cmd,
                cli.policies ? cli.policies : "<stdin>");
    } else if (write) {
      FILE *out = fopen(cli.policies, "w");
      if (!out || fputs(text, out) < 0 || fclose(out) != 0)
        rc = cedar_cli_fail(cmd, "write `%s`: %s", cli.policies, strerror(errno));
    } else {
      fputs(text, stdout);
    }
    free(text);
  }
  cedar_policy_set_free(set);
  free(original);
  return rc;
}
DOME_COMMAND(cedar_format, "cedar format",
             "print Cedar policies in canonical form (upstream cedar CLI flags)", format_main);
