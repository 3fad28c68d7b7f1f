/* The shared front of the `dome` commands that ask domed over its control socket: one call with its error
 * printed, and the `dome ... list` commands. */
#ifndef DOME_CLI_CONTROL_LIST_H
#define DOME_CLI_CONTROL_LIST_H

#include <jansson.h>

/* Call `method` (e.g. "agents.register") with args on domed's control socket at `socket` (NULL: the
 * default, control_socket_path) for `dome <command>`. Takes args (NULL for none) and releases it. Returns 0
 * with *result set (the caller releases it), or -1 after printing `dome <command>: <reason>` on stderr, where
 * the reason is control_call's (domed unreachable, refused, or the command's own error message). */
int cli_control_call(const char *command, const char *socket, const char *method, json_t *args,
                     json_t **result);

/* Parse `[--json] [--control-socket PATH] [--help]` (argv[0] is the command, e.g. "rules list") and call
 * `method` (e.g. "rules.list") on domed. Returns the listing for the caller to print as a table (the
 * caller releases it), or NULL with *exit_status set when nothing is left to do: --help printed (0),
 * --json printed (0), or a one-line error printed (125: unexpected argument, domed unreachable). */
json_t *cli_control_list(int argc, char **argv, const char *method, int *exit_status);

#endif
