/* dome audit export [DIR] [--journal DIR] [--since T] [--until T] [--agent A] [--exec ID] [--type T]
 *                   [--from-seq N] [--to-seq N] [--format ndjson|json]
 * Prints the matching events as canonical NDJSON (default) or one JSON array. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "supervisor/audit/journal.h"
#include "supervisor/cli/audit_fleet.h"
#include "supervisor/cli/command.h"
#include "supervisor/cli/journal_filter_flags.h"

static int parse_seq(const char *flag, const char *text, uint64_t *out) {
  char *end;
  unsigned long long value = strtoull(text, &end, 10);
  if (!*text || *end || value == 0) {
    fprintf(stderr, "dome audit export: %s: `%s` is not a seq (1, 2, ...)\n", flag, text);
    return -1;
  }
  *out = value;
  return 0;
}

static int export_main(int argc, char **argv) {
  if (cli_fleet_requested(argc, argv)) return cli_audit_fleet("export", argc, argv);
  static const struct option options[] = {{"journal", required_argument, NULL, 'j'},
                                          {"until", required_argument, NULL, 'u'},
                                          {"format", required_argument, NULL, 'f'},
                                          {"from-seq", required_argument, NULL, 'F'},
                                          {"to-seq", required_argument, NULL, 'T'},
                                          {"help", no_argument, NULL, 'h'},
                                          CLI_JOURNAL_FILTER_OPTIONS,
                                          {NULL, 0, NULL, 0}};
  const char *directory = NULL, *format = "ndjson";
  journal_filter filter = {0};
  dome_error err = {0};
  int c;
  while ((c = getopt_long(argc, argv, "", options, NULL)) != -1) {
    switch (c) {
      case 'j':
        directory = optarg;
        break;
      case 'f':
        format = optarg;
        break;
      case 'F':
        if (parse_seq("--from-seq", optarg, &filter.from_seq) < 0) return DOME_EXIT_FAILURE;
        break;
      case 'T':
        if (parse_seq("--to-seq", optarg, &filter.to_seq) < 0) return DOME_EXIT_FAILURE;
        break;
      case 'h':
        printf(
            "usage: dome audit export [DIR] [--since T] [--until T] [--agent A] [--exec ID] [--type T]\n"
            "                         [--from-seq N] [--to-seq N] [--format ndjson|json]\n"
            "       dome audit export --fleet [--fleet-url URL] [--fleet-name NAME] [--agent A] [--type T]\n"
            "                         [--node N] [--format ndjson|json]   (every node, with its `node`)\n"
            "  T: RFC 3339 time or date; --type exec.* matches a prefix\n");
        return 0;
      default: /* a filter flag, else an unknown option (getopt_long printed it) */
        if (cli_journal_filter_option("audit export", c, optarg, &filter) != 1) return DOME_EXIT_FAILURE;
        break;
    }
  }
  if (strcmp(format, "ndjson") != 0 && strcmp(format, "json") != 0) {
    fprintf(stderr, "dome audit export: --format: `%s` is not ndjson or json\n", format);
    return DOME_EXIT_FAILURE;
  }
  if (cli_journal_directory_operand("audit export", argc, argv, &directory) < 0) return DOME_EXIT_FAILURE;
  if (!directory) directory = JOURNAL_DEFAULT_DIRECTORY;
  journal_reader *reader;
  if (journal_reader_open(directory, &filter, &reader, &err) < 0) {
    fprintf(stderr, "dome audit export: %s\n", err.message);
    return DOME_EXIT_FAILURE;
  }
  bool array = strcmp(format, "json") == 0;
  size_t n = 0;
  int r;
  journal_record record;
  if (array) fputs("[", stdout);
  while ((r = journal_reader_next(reader, false, &record, &err)) > 0) {
    if (array) fputs(n ? ",\n" : "\n", stdout);
    fwrite(record.line, 1, record.length, stdout);
    if (!array) fputc('\n', stdout);
    n++;
  }
  if (array) fputs(n ? "\n]\n" : "]\n", stdout);
  journal_reader_close(reader);
  if (r < 0) {
    fprintf(stderr, "dome audit export: %s\n", err.message);
    return 1;
  }
  return fflush(stdout) == 0 ? 0 : 1;
}
DOME_COMMAND(audit_export, "audit export", "export journal events (filters by time, agent, exec, type)",
             export_main);
