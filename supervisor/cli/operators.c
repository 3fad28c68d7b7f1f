/* dome operators add|list|revoke — the people who log in to the console (docs/console.md), via domed.
 * `add` prints a login token once; only its hash is kept. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "supervisor/cli/command.h"
#include "supervisor/cli/control_list.h"
#include "supervisor/control/control.h"

static const struct option operator_options[] = {
    {"name", required_argument, NULL, 'n'},
    {"role", required_argument, NULL, 'r'},
    {"control-socket", required_argument, NULL, 's'},
    {"json", no_argument, NULL, 'j'},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

struct operator_flags {
  const char *name, *role, *socket;
  bool json, help;
};

static int parse(int argc, char **argv, struct operator_flags *flags) {
  *flags = (struct operator_flags){0};
  optind = 1;
  opterr = 0;
  int c;
  while ((c = getopt_long(argc, argv, "", operator_options, NULL)) != -1) {
    switch (c) {
      case 'n':
        flags->name = optarg;
        break;
      case 'r':
        flags->role = optarg;
        break;
      case 's':
        flags->socket = optarg;
        break;
      case 'j':
        flags->json = true;
        break;
      case 'h':
        flags->help = true;
        break;
      default:
        fprintf(stderr, "dome %s: unknown or incomplete option `%s`\n", argv[0], argv[optind - 1]);
        return -1;
    }
  }
  if (optind < argc && flags->name == NULL) flags->name = argv[optind++];
  if (optind < argc) {
    fprintf(stderr, "dome %s: unexpected argument `%s`\n", argv[0], argv[optind]);
    return -1;
  }
  return 0;
}

static int add_main(int argc, char **argv) {
  struct operator_flags flags;
  if (parse(argc, argv, &flags) < 0) return DOME_EXIT_FAILURE;
  if (flags.help) {
    printf(
        "usage: dome operators add --name NAME --role auditor|operator [--json] [--control-socket PATH]\n"
        "Adds a console operator and prints its login token (POST /console/api/login); shown only this "
        "once.\n"
        "auditor: reads every view; operator: also suspends and resumes agents.\n");
    return 0;
  }
  if (flags.name == NULL || flags.role == NULL) {
    fprintf(stderr, "dome operators add: --name and --role are required\n");
    return DOME_EXIT_FAILURE;
  }
  if (!control_operator_role_valid(flags.role)) {
    fprintf(stderr, "dome operators add: --role: expected auditor or operator, got `%s`\n", flags.role);
    return DOME_EXIT_FAILURE;
  }
  json_t *result = NULL;
  int rc = cli_control_call(argv[0], flags.socket, "operators.add",
                            json_pack("{s:s,s:s}", "name", flags.name, "role", flags.role), &result);
  if (rc < 0) return DOME_EXIT_FAILURE;
  if (flags.json) {
    json_dumpf(result, stdout, JSON_INDENT(2));
    printf("\n");
  } else {
    printf("Added operator %s (%s)\nToken: %s\n", json_string_value(json_object_get(result, "name")),
           json_string_value(json_object_get(result, "role")),
           json_string_value(json_object_get(result, "token")));
    printf("Store this token now: it is not shown again (only its hash is kept).\n");
  }
  json_decref(result);
  return 0;
}
DOME_COMMAND(operators_add, "operators add",
             "add a console operator (auditor or operator); prints its token once", add_main);

static int list_main(int argc, char **argv) {
  int status = 0;
  json_t *result = cli_control_list(argc, argv, "operators.list", &status);
  if (result == NULL) return status;
  printf("%-32s %-10s %s\n", "NAME", "ROLE", "STATUS");
  size_t i;
  json_t *entry;
  json_array_foreach(result, i, entry) printf(
      "%-32s %-10s %s\n", json_string_value(json_object_get(entry, "name")),
      json_string_value(json_object_get(entry, "role")), json_string_value(json_object_get(entry, "status")));
  json_decref(result);
  return 0;
}
DOME_COMMAND(operators_list, "operators list", "list console operators and their roles", list_main);

static int revoke_main(int argc, char **argv) {
  struct operator_flags flags;
  if (parse(argc, argv, &flags) < 0) return DOME_EXIT_FAILURE;
  if (flags.help) {
    printf(
        "usage: dome operators revoke --name NAME [--control-socket PATH]\n"
        "Revokes a console operator for good: its token stops working and its sessions end.\n");
    return 0;
  }
  if (flags.name == NULL || flags.role) {
    fprintf(stderr, "dome operators revoke: --name is required (and --role is not an option of it)\n");
    return DOME_EXIT_FAILURE;
  }
  json_t *result = NULL;
  int rc = cli_control_call(argv[0], flags.socket, "operators.revoke", json_pack("{s:s}", "name", flags.name),
                            &result);
  if (rc < 0) return DOME_EXIT_FAILURE;
  printf("Operator %s revoked: its token is refused and its console sessions ended\n", flags.name);
  json_decref(result);
  return 0;
}
DOME_COMMAND(operators_revoke, "operators revoke",
             "revoke a console operator (token refused, sessions ended)", revoke_main);
