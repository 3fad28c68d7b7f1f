/* dome rules compile FILE --agent NAME [--entities FILE] [--json]: the decision tables the kernel enforces
 * for one agent (policy/compile/compile.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/compile/compile.h"
#include "supervisor/cli/command.h"

static void usage(FILE *out) {
  fprintf(out,
          "usage: dome rules compile FILE --agent NAME [--entities FILE] [--json]\n"
          "\n"
          "Compile the shipped baseline (policy/baseline.cedar) plus the Cedar rules in FILE for the agent\n"
          "Dome::Agent::\"NAME\" into the kernel's decision tables for fs:read, fs:write, fs:exec,\n"
          "net:connect, net:bind and net:send, and print them (one entry a line, or JSON with --json).\n"
          "--entities gives the agent's entity data (capabilities, gateways; JSON entities format); without\n"
          "it the agent has no attributes and no parents. A rule the tables cannot express exactly is\n"
          "rejected with its policy id and sub-expression (exit 125); see docs/policy.md.\n");
}

static void warn(void *context, const char *action, const char *policy_id, const char *message) {
  const char *file = context;
  fprintf(stderr, "dome rules compile: warning: %s: %s: policy `%s` never applies (evaluation error: %s)\n",
          file, action, policy_id, message);
}

static int compile_main(int argc, char **argv) {
  const char *file = NULL, *agent = NULL, *entities = NULL;
  bool json = false;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      usage(stdout);
      return 0;
    } else if (strcmp(argv[i], "--agent") == 0 || strcmp(argv[i], "--entities") == 0) {
      if (i + 1 >= argc) {
        fprintf(stderr, "dome rules compile: %s: missing value\n", argv[i]);
        return DOME_EXIT_FAILURE;
      }
      if (argv[i][2] == 'a')
        agent = argv[++i];
      else
        entities = argv[++i];
    } else if (strcmp(argv[i], "--json") == 0) {
      json = true;
    } else if (argv[i][0] != '-' && !file) {
      file = argv[i];
    } else {
      fprintf(stderr, "dome rules compile: unexpected argument `%s` (see --help)\n", argv[i]);
      return DOME_EXIT_FAILURE;
    }
  }
  if (!file) {
    fprintf(stderr, "dome rules compile: FILE is required (see --help)\n");
    return DOME_EXIT_FAILURE;
  }
  if (!agent || !agent[0]) {
    fprintf(stderr, "dome rules compile: --agent: required (the agent's entity id)\n");
    return DOME_EXIT_FAILURE;
  }
  struct dome_rule_tables tables;
  struct dome_compile_options options = {.agent = agent, .warn = warn, .warn_context = (void *)file};
  dome_error err = {0};
  if (dome_compile_files(file, entities, &options, &tables, &err) < 0) {
    fprintf(stderr, "dome rules compile: %s\n", err.message);
    dome_rule_tables_free(&tables);
    return DOME_EXIT_FAILURE;
  }
  char *text = NULL;
  int rc = json ? dome_rule_tables_to_json(&tables, true, &text, &err)
                : dome_rule_tables_format(&tables, &text, &err);
  dome_rule_tables_free(&tables);
  if (rc < 0) {
    fprintf(stderr, "dome rules compile: %s\n", err.message);
    return DOME_EXIT_FAILURE;
  }
  fputs(text, stdout);
  if (text[0] && text[strlen(text) - 1] != '\n') fputc('\n', stdout);
  free(text);
  return 0;
}
DOME_COMMAND(rules_compile, "rules compile", "compile Cedar fs/net rules into the kernel's decision tables",
             compile_main);
