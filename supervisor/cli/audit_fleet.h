/* `dome audit stream|verify|export --fleet` (audit_fleet.c): the fleet's audit stream on NATS JetStream. */
#ifndef DOME_CLI_AUDIT_FLEET_H
#define DOME_CLI_AUDIT_FLEET_H

#include <stdbool.h>

/* Whether the command line holds --fleet (before any `--`). */
bool cli_fleet_requested(int argc, char **argv);

/* Run `dome audit MODE --fleet ...` (MODE: "stream", "verify" or "export") with the command's argv.
 * Returns the exit status (as the command's own: 0, 1, 125). */
int cli_audit_fleet(const char *mode, int argc, char **argv);

#endif
