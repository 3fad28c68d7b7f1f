/* Which journal a read-only CLI command (rules simulate, rules apply --simulate-first) reads. */
#ifndef DOME_CLI_JOURNAL_LOCATION_H
#define DOME_CLI_JOURNAL_LOCATION_H

/* The journal directory, in this order: `flag` (--journal) when given; else the journal of the domed
 * answering on the control socket (`socket`, or DOME_CONTROL_SOCKET, or the default; asked with
 * `audit.stream` {describe}); else $DOME_JOURNAL_DIR; else NULL (the caller's default,
 * /var/lib/dome/journal). *owned receives a malloc'd copy to free when the answer came from domed.
 * Never fails: an unreachable domed only moves on to the next source. */
const char *cli_journal_location(const char *socket, const char *flag, char **owned);

#endif
