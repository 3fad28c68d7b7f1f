/* The journal filter flags `dome audit export` and `dome audit stream` share, and their DIR operand. */
#ifndef DOME_CLI_JOURNAL_FILTER_FLAGS_H
#define DOME_CLI_JOURNAL_FILTER_FLAGS_H

#include <getopt.h>

#include "supervisor/audit/journal.h"

/* getopt_long rows of --agent A, --exec ID, --type T and --since T (no trailing comma). */
// clang-format off
#define CLI_JOURNAL_FILTER_OPTIONS              \
  {"agent", required_argument, NULL, 'a'},      \
  {"exec", required_argument, NULL, 'e'},       \
  {"type", required_argument, NULL, 't'},       \
  {"since", required_argument, NULL, 's'}
// clang-format on

/* Take one filter flag into *filter: 'a' --agent, 'e' --exec, 't' --type (the argument kept, not copied),
 * 's' --since and 'u' --until (an RFC 3339 time or date, read by journal_parse_time). Returns 1 when taken,
 * 0 when `option` is none of these, -1 after printing "dome COMMAND: --since: WHY" on stderr for a time
 * that does not parse. */
int cli_journal_filter_option(const char *command, int option, const char *arg, journal_filter *filter);

/* After getopt: the optional DIR operand at argv[optind] into *directory (left as it is when there is none).
 * Returns 0, or -1 after printing "dome COMMAND: unexpected argument `X`" on stderr for a second operand. */
int cli_journal_directory_operand(const char *command, int argc, char **argv, const char **directory);

#endif
