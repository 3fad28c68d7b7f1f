/* Registration of `dome` subcommands.
 *
 * Each subcommand file registers itself:
 *
 *   static int run_main(int argc, char **argv) { ... }
 *   DOME_COMMAND(run, "run", "run a program in a fresh jail", run_main);
 *   DOME_COMMAND(audit_verify, "audit verify", "check a journal's hash chain and signatures", verify_main);
 *
 * `name` may hold several words; main() picks the registered command whose words match the longest
 * prefix of the command line and calls handler(argc, argv) with argv[0] = the full command name
 * ("audit verify") and the remaining arguments after it. Handlers return the process exit status.
 *
 * Every handler answers handler(2, {name, "--help", NULL}) with its usage on stdout, first line
 * "usage: dome <name> ...", and exit 0: main() calls it so for `dome <name> -h`, `dome <name> --help`
 * and `dome help <name>` (tests/integration/cli/test_help holds every registered command to it). Groups
 * (`dome agents` lists the commands named "agents ...") and the did-you-mean of a mistyped word come
 * from the names alone: a new command needs no other registration.
 *
 * Exit statuses common to every subcommand: 0 success (and every usage asked for), 125 dome's own failure
 * (bad flag, bad input, unknown or incomplete command, setup error; as env(1) and container runtimes use).
 * Commands mirroring upstream tools (the cedar CLI) keep that tool's statuses. */
#ifndef DOME_CLI_COMMAND_H
#define DOME_CLI_COMMAND_H

struct dome_command {
  const char *name;
  const char *summary;
  int (*handler)(int argc, char **argv);
};

#define DOME_COMMAND(symbol, name_, summary_, handler_)  \
  static const struct dome_command dome_command_##symbol \
      __attribute__((used, section("dome_commands"), aligned(sizeof(void *)))) = {name_, summary_, handler_}

/* Exit status for dome's own failures. */
#define DOME_EXIT_FAILURE 125

#endif
