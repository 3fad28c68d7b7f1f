/* The shared front of the `dome ... list` commands that ask domed for a listing over the control socket. */
#ifndef DOME_CLI_CONTROL_LIST_H
#define DOME_CLI_CONTROL_LIST_H

#include <jansson.h>

/* Parse `[--json] [--control-socket PATH] [--help]` (argv[0] is the command, e.g. "rules list") and call
 * `method` (e.g. "rules.list") on domed. Returns the listing for the caller to print as a table (the
 * caller releases it), or NULL with *exit_status set when nothing is left to do: --help printed (0),
 * --json printed (0), or a one-line error printed (125: unexpected argument, domed unreachable). */
json_t *cli_control_list(int argc, char **argv, const char *method, int *exit_status);

#endif
