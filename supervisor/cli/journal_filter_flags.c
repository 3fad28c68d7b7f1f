/* The journal filter flags of `dome audit export` and `dome audit stream`. */
#include "supervisor/cli/journal_filter_flags.h"

#include <stdio.h>

int cli_journal_filter_option(const char *command, int option, const char *arg, journal_filter *filter) {
  dome_error err = {0};
  switch (option) {
    case 'a':
      filter->agent = arg;
      return 1;
    case 'e':
      filter->exec_id = arg;
      return 1;
    case 't':
      filter->type = arg;
      return 1;
    case 's':
    case 'u':
      if (journal_parse_time(arg, option == 's' ? &filter->since_ns : &filter->until_ns, &err) < 0) {
        fprintf(stderr, "dome %s: %s: %s\n", command, option == 's' ? "--since" : "--until", err.message);
        return -1;
      }
      return 1;
    default:
      return 0;
  }
}

int cli_journal_directory_operand(const char *command, int argc, char **argv, const char **directory) {
  if (optind < argc) *directory = argv[optind++];
  if (optind < argc) {
    fprintf(stderr, "dome %s: unexpected argument `%s`\n", command, argv[optind]);
    return -1;
  }
  return 0;
}
