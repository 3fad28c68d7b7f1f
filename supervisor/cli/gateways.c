/* dome gateways create|list|grant|revoke — named gateways (each its own MCP endpoint,
 * /gateways/<name>/mcp; `Default` is /mcp) and the agents' grants to them, via domed's control socket
 * (commands gateways.create {name}, gateways.list {}, gateways.grant / gateways.revoke {agent, gateway}).
 * Grants are the agent's parents in Cedar: rules may say `principal in Dome::Gateway::"G"`. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "supervisor/cli/command.h"
#include "supervisor/cli/control_list.h"
#include "supervisor/control/control.h"

/* Parse --name/--agent/--gateway/--control-socket/--json; a lone positional fills `positional`. */
struct gateway_flags {
  const char *name, *agent, *gateway, *socket;
  bool json;
};

static void print_usage(const char *command) {
  if (strcmp(command, "gateways create") == 0)
    printf(
        "usage: dome gateways create --name G [--control-socket PATH]\n"
        "Creates gateway G, its own MCP endpoint /gateways/G/mcp (`Default` is /mcp).\n");
  else if (strcmp(command, "gateways list") == 0)
    printf("usage: dome gateways list [--json] [--control-socket PATH]\n");
  else
    printf(
        "usage: dome %s --agent A --gateway G [--control-socket PATH]\n"
        "A grant makes gateway G a parent of agent A in Cedar (`principal in Dome::Gateway::\"G\"`).\n",
        command);
}

static int parse_flags(const char *command, int argc, char **argv, struct gateway_flags *flags,
                       const char **positional) {
  static const struct option options[] = {
      {"name", required_argument, NULL, 'n'},
      {"agent", required_argument, NULL, 'a'},
      {"gateway", required_argument, NULL, 'g'},
      {"control-socket", required_argument, NULL, 's'},
      {"json", no_argument, NULL, 'j'},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0},
  };
  optind = 1;
  opterr = 0;
  int c;
  while ((c = getopt_long(argc, argv, "", options, NULL)) != -1) {
    switch (c) {
      case 'n':
        flags->name = optarg;
        break;
      case 'a':
        flags->agent = optarg;
        break;
      case 'g':
        flags->gateway = optarg;
        break;
      case 's':
        flags->socket = optarg;
        break;
      case 'j':
        flags->json = true;
        break;
      case 'h':
        print_usage(command);
        return 1;
      default:
        fprintf(stderr, "dome %s: unknown or incomplete option `%s`\n", command, argv[optind - 1]);
        return -1;
    }
  }
  if (optind < argc && positional && *positional == NULL && optind + 1 == argc) {
    *positional = argv[optind];
  } else if (optind < argc) {
    fprintf(stderr, "dome %s: unexpected argument `%s`\n", command, argv[optind]);
    return -1;
  }
  return 0;
}

static int check_name(const char *command, const char *flag, const char *value) {
  if (value == NULL) {
    fprintf(stderr, "dome %s: %s is required\n", command, flag);
    return -1;
  }
  if (!control_name_valid(value)) {
    fprintf(stderr,
            "dome %s: %s: invalid name `%s` (1..127 of A-Z a-z 0-9 . _ -, not starting with . or -)\n",
            command, flag, value);
    return -1;
  }
  return 0;
}

static int create_main(int argc, char **argv) {
  struct gateway_flags flags = {0};
  int rc = parse_flags("gateways create", argc, argv, &flags, &flags.name);
  if (rc != 0) return rc > 0 ? 0 : DOME_EXIT_FAILURE;
  if (check_name("gateways create", "--name", flags.name) < 0) return DOME_EXIT_FAILURE;
  json_t *result = NULL;
  if (cli_control_call("gateways create", flags.socket, "gateways.create",
                       json_pack("{s:s}", "name", flags.name), &result) < 0)
    return DOME_EXIT_FAILURE;
  printf("Created gateway %s (endpoint /gateways/%s/mcp)\n", flags.name, flags.name);
  json_decref(result);
  return 0;
}
DOME_COMMAND(gateways_create, "gateways create", "create a named gateway (its own MCP endpoint)",
             create_main);

static void print_names(json_t *array) {
  size_t i;
  json_t *value;
  if (json_array_size(array) == 0) printf("-");
  json_array_foreach(array, i, value) printf("%s%s", i ? "," : "", json_string_value(value));
}

static int list_main(int argc, char **argv) {
  struct gateway_flags flags = {0};
  int rc = parse_flags("gateways list", argc, argv, &flags, NULL);
  if (rc != 0) return rc > 0 ? 0 : DOME_EXIT_FAILURE;
  json_t *result = NULL;
  if (cli_control_call("gateways list", flags.socket, "gateways.list", json_object(), &result) < 0)
    return DOME_EXIT_FAILURE;
  if (flags.json) {
    json_dumpf(result, stdout, JSON_INDENT(2));
    printf("\n");
  } else {
    printf("%-20s %-32s %s\n", "GATEWAY", "AGENTS", "TOOLS");
    size_t i;
    json_t *gateway;
    json_array_foreach(result, i, gateway) {
      printf("%-20s ", json_string_value(json_object_get(gateway, "name")));
      print_names(json_object_get(gateway, "agents"));
      printf(" ");
      print_names(json_object_get(gateway, "tools"));
      printf("\n");
    }
  }
  json_decref(result);
  return 0;
}
DOME_COMMAND(gateways_list, "gateways list", "list gateways with their granted agents and tools", list_main);

static int change_grant(int argc, char **argv, const char *command, const char *socket_command,
                        const char *verb) {
  struct gateway_flags flags = {0};
  int rc = parse_flags(command, argc, argv, &flags, NULL);
  if (rc != 0) return rc > 0 ? 0 : DOME_EXIT_FAILURE;
  if (check_name(command, "--agent", flags.agent) < 0 || check_name(command, "--gateway", flags.gateway) < 0)
    return DOME_EXIT_FAILURE;
  json_t *result = NULL;
  if (cli_control_call(command, flags.socket, socket_command,
                       json_pack("{s:s,s:s}", "agent", flags.agent, "gateway", flags.gateway), &result) < 0)
    return DOME_EXIT_FAILURE;
  printf("%s gateway %s %s agent %s; its gateways: ", verb, flags.gateway,
         strcmp(verb, "Granted") == 0 ? "to" : "from", flags.agent);
  print_names(json_object_get(result, "gateways"));
  printf("\n");
  json_decref(result);
  return 0;
}

static int grant_main(int argc, char **argv) {
  return change_grant(argc, argv, "gateways grant", "gateways.grant", "Granted");
}
DOME_COMMAND(gateways_grant, "gateways grant", "grant an agent a gateway (--agent A --gateway G)",
             grant_main);

static int revoke_main(int argc, char **argv) {
  return change_grant(argc, argv, "gateways revoke", "gateways.revoke", "Revoked");
}
DOME_COMMAND(gateways_revoke, "gateways revoke",
             "revoke an agent's grant to a gateway (--agent A --gateway G)", revoke_main);
