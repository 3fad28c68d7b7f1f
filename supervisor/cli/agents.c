/* dome agents register|list|suspend|revoke|resume|token — agents and their bearer tokens, via domed.
 * Delegation: `register --delegates-to P` makes a delegate whose calls are all on behalf of P;
 * `token --act-as P` mints an extra token that acts as P (docs/gateway.md, "Delegated agents"). */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "supervisor/cli/command.h"
#include "supervisor/cli/control_list.h"
#include "supervisor/control/control.h"

static const struct option agent_options[] = {
    {"name", required_argument, NULL, 'n'},
    {"capabilities", required_argument, NULL, 'c'},
    {"delegates-to", required_argument, NULL, 'd'},
    {"act-as", required_argument, NULL, 'a'},
    {"ttl", required_argument, NULL, 't'},
    {"control-socket", required_argument, NULL, 's'},
    {"json", no_argument, NULL, 'j'},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

struct agent_flags {
  const char *name, *capabilities, *delegates_to, *act_as, *ttl, *socket;
  bool json, help;
};

static int parse(int argc, char **argv, struct agent_flags *flags) {
  *flags = (struct agent_flags){0};
  optind = 1;
  opterr = 0;
  int c;
  while ((c = getopt_long(argc, argv, "", agent_options, NULL)) != -1) {
    switch (c) {
      case 'n':
        flags->name = optarg;
        break;
      case 'c':
        flags->capabilities = optarg;
        break;
      case 'd':
        flags->delegates_to = optarg;
        break;
      case 'a':
        flags->act_as = optarg;
        break;
      case 't':
        flags->ttl = optarg;
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
  int64_t seconds;
  dome_error err = {0};
  if (flags->ttl && control_ttl_parse(flags->ttl, &seconds, &err) < 0) {
    fprintf(stderr, "dome %s: --ttl: %s\n", argv[0], err.message);
    return -1;
  }
  if (optind < argc && flags->name == NULL) flags->name = argv[optind++];
  if (optind < argc) {
    fprintf(stderr, "dome %s: unexpected argument `%s`\n", argv[0], argv[optind]);
    return -1;
  }
  return 0;
}

/* Options that only one subcommand takes are refused by the others. */
static int refuse(const char *command, const char *flag, const char *value) {
  if (value == NULL) return 0;
  fprintf(stderr, "dome %s: %s is not an option of this command\n", command, flag);
  return -1;
}

static int register_main(int argc, char **argv) {
  struct agent_flags flags;
  if (parse(argc, argv, &flags) < 0 || refuse(argv[0], "--act-as", flags.act_as) < 0)
    return DOME_EXIT_FAILURE;
  if (flags.help) {
    printf(
        "usage: dome agents register --name NAME --capabilities CAP[,CAP] [--delegates-to AGENT] [--ttl "
        "DURATION]\n"
        "                            [--json] [--control-socket PATH]\n"
        "Registers an agent and prints its bearer token. The token is shown only this once.\n"
        "--ttl DURATION: the token stops working after N[s|m|h|d] (default: domed's token_ttl, else never).\n"
        "--delegates-to AGENT: the new agent calls on behalf of AGENT (Cedar: principal = the new agent,\n"
        "context.actas = AGENT); its gateway grants and capabilities are narrowed to those AGENT holds.\n");
    return 0;
  }
  if (flags.name == NULL) {
    fprintf(stderr, "dome agents register: --name is required\n");
    return DOME_EXIT_FAILURE;
  }
  json_t *args = json_pack("{s:s,s:s}", "name", flags.name, "capabilities",
                           flags.capabilities ? flags.capabilities : "");
  if (flags.delegates_to) json_object_set_new(args, "delegates_to", json_string(flags.delegates_to));
  if (flags.ttl) json_object_set_new(args, "ttl", json_string(flags.ttl));
  json_t *result = NULL;
  int rc = cli_control_call(argv[0], flags.socket, "agents.register", args, &result);
  if (rc < 0) return DOME_EXIT_FAILURE;
  if (flags.json) {
    json_dumpf(result, stdout, JSON_INDENT(2));
    printf("\n");
  } else {
    printf("Registered agent %s", json_string_value(json_object_get(result, "name")));
    if (flags.delegates_to) printf(" (delegate of %s)", flags.delegates_to);
    printf("\nToken: %s\n", json_string_value(json_object_get(result, "token")));
    json_t *expires = json_object_get(result, "expires");
    if (expires) printf("Expires: %lld (Unix time)\n", (long long)json_integer_value(expires));
    printf("Store this token now: it is not shown again (only its hash is kept).\n");
  }
  json_decref(result);
  return 0;
}
DOME_COMMAND(agents_register, "agents register", "register an agent with capabilities; prints its token once",
             register_main);

static int list_main(int argc, char **argv) {
  struct agent_flags flags;
  if (parse(argc, argv, &flags) < 0 || refuse(argv[0], "--act-as", flags.act_as) < 0 ||
      refuse(argv[0], "--delegates-to", flags.delegates_to) < 0 || refuse(argv[0], "--ttl", flags.ttl) < 0)
    return DOME_EXIT_FAILURE;
  if (flags.help) {
    printf("usage: dome agents list [--json] [--control-socket PATH]\n");
    return 0;
  }
  json_t *result = NULL;
  int rc = cli_control_call(argv[0], flags.socket, "agents.list", json_object(), &result);
  if (rc < 0) return DOME_EXIT_FAILURE;
  if (flags.json) {
    json_dumpf(result, stdout, JSON_INDENT(2));
    printf("\n");
  } else {
    printf("%-32s %-10s %s\n", "NAME", "STATUS", "CAPABILITIES");
    size_t i, j;
    json_t *agent, *capability;
    json_array_foreach(result, i, agent) {
      printf("%-32s %-10s ", json_string_value(json_object_get(agent, "name")),
             json_string_value(json_object_get(agent, "status")));
      json_array_foreach(json_object_get(agent, "capabilities"), j, capability)
          printf("%s%s", j ? "," : "", json_string_value(capability));
      const char *delegates_to = json_string_value(json_object_get(agent, "delegates_to"));
      if (delegates_to) printf("  (delegate of %s)", delegates_to);
      printf("\n");
    }
  }
  json_decref(result);
  return 0;
}
DOME_COMMAND(agents_list, "agents list", "list agents and their status", list_main);

static int status_main(int argc, char **argv, const char *command, const char *done) {
  struct agent_flags flags;
  if (parse(argc, argv, &flags) < 0 || refuse(argv[0], "--act-as", flags.act_as) < 0 ||
      refuse(argv[0], "--delegates-to", flags.delegates_to) < 0 || refuse(argv[0], "--ttl", flags.ttl) < 0)
    return DOME_EXIT_FAILURE;
  if (flags.help) {
    printf("usage: dome %s --name NAME [--json] [--control-socket PATH]\n", argv[0]);
    return 0;
  }
  if (flags.name == NULL) {
    fprintf(stderr, "dome %s: --name is required\n", argv[0]);
    return DOME_EXIT_FAILURE;
  }
  json_t *result = NULL;
  int rc = cli_control_call(argv[0], flags.socket, command, json_pack("{s:s}", "name", flags.name), &result);
  if (rc < 0) return DOME_EXIT_FAILURE;
  json_int_t cancelled = json_integer_value(json_object_get(result, "cancelled"));
  if (flags.json) {
    json_dumpf(result, stdout, JSON_INDENT(2));
    printf("\n");
  } else if (cancelled > 0)
    printf("Agent %s %s; %lld of its running calls cancelled\n", flags.name, done, (long long)cancelled);
  else
    printf("Agent %s %s\n", flags.name, done);
  json_decref(result);
  return 0;
}
static int suspend_main(int argc, char **argv) {
  return status_main(argc, argv, "agents.suspend", "suspended: its token is refused until resumed");
}
static int revoke_main(int argc, char **argv) {
  return status_main(argc, argv, "agents.revoke", "revoked: its token is refused from now on");
}
static int resume_main(int argc, char **argv) {
  return status_main(argc, argv, "agents.resume", "resumed");
}
DOME_COMMAND(agents_suspend, "agents suspend", "suspend an agent (its token is refused until resumed)",
             suspend_main);
DOME_COMMAND(agents_revoke, "agents revoke", "revoke an agent for good (its token is refused)", revoke_main);
DOME_COMMAND(agents_resume, "agents resume", "resume a suspended agent", resume_main);

static int token_main(int argc, char **argv) {
  struct agent_flags flags;
  if (parse(argc, argv, &flags) < 0 || refuse(argv[0], "--delegates-to", flags.delegates_to) < 0)
    return DOME_EXIT_FAILURE;
  if (flags.name == NULL && !flags.help) {
    fprintf(stderr, "dome agents token: --name is required\n");
    return DOME_EXIT_FAILURE;
  }
  if (flags.help) {
    printf(
        "usage: dome agents token --name NAME [--act-as AGENT] [--ttl DURATION] [--control-socket PATH]\n"
        "Issues a new token; the old one (and every --act-as token of NAME) stops working.\n"
        "--ttl DURATION: the new token stops working after N[s|m|h|d] (default: domed's token_ttl).\n"
        "--act-as AGENT: issues an additional token with which NAME calls on behalf of AGENT (narrowed\n"
        "to AGENT's grants and capabilities); NAME's own token keeps working.\n"
        "--json: prints {\"name\": NAME, \"token\": TOKEN} (with \"act_as\": AGENT for --act-as), as\n"
        "`dome agents register --json` does.\n");
    return 0;
  }
  json_t *args = json_pack("{s:s}", "name", flags.name);
  if (flags.act_as) json_object_set_new(args, "act_as", json_string(flags.act_as));
  if (flags.ttl) json_object_set_new(args, "ttl", json_string(flags.ttl));
  json_t *result = NULL;
  int rc = cli_control_call(argv[0], flags.socket, "agents.token", args, &result);
  if (rc < 0) return DOME_EXIT_FAILURE;
  if (flags.json) {
    json_dumpf(result, stdout, JSON_INDENT(2));
    printf("\n");
  } else {
    printf("Token: %s\n", json_string_value(json_object_get(result, "token")));
    json_t *expires = json_object_get(result, "expires");
    if (expires) printf("Expires: %lld (Unix time)\n", (long long)json_integer_value(expires));
  }
  json_decref(result);
  return 0;
}
DOME_COMMAND(agents_token, "agents token",
             "issue a new bearer token for an agent (the old one stops working)", token_main);
