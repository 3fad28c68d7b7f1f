/* dome audit stream [DIR] [--journal DIR] [--agent A] [--exec ID] [--type T] [--since T] [--follow] [--json]
 * One event per line: human format by default, canonical NDJSON with --json. Reads the journal
 * directory (domed's live stream arrives with domed); --follow waits for new events. */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "supervisor/audit/journal.h"
#include "supervisor/cli/command.h"

static volatile sig_atomic_t stop;
static void on_signal(int signal_number) {
  (void)signal_number;
  stop = 1;
}

/* "14:37:20.240 #12 authz.decision agent=a exec=e decision=allow ..." */
static void print_human(const journal_record *record) {
  json_t *event = record->event;
  const char *time = json_string_value(json_object_get(event, "time"));
  const char *type = json_string_value(json_object_get(event, "type"));
  printf("%.23s  #%llu  %-18s", time ? time : "?", (unsigned long long)record->seq, type ? type : "?");
  static const char *ids[] = {"agent", "actas", "exec_id", "tool", "policy_version"};
  for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) {
    const char *value = json_string_value(json_object_get(event, ids[i]));
    if (value) printf(" %s=%s", ids[i], value);
  }
  const char *key;
  json_t *value;
  int shown = 0;
  json_object_foreach(event, key, value) {
    if (!strcmp(key, "seq") || !strcmp(key, "time") || !strcmp(key, "type")) continue;
    bool id = false;
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) id = id || !strcmp(key, ids[i]);
    if (id || shown >= 8) continue;
    char *text = json_dumps(value, JSON_ENCODE_ANY | JSON_COMPACT | JSON_SORT_KEYS);
    if (!text) continue;
    /* Plain strings bare; anything with control characters (newlines of program output) JSON-quoted, so
     * one event stays one line. */
    const char *plain = json_string_value(value);
    for (const char *c = plain; c && *c; c++)
      if ((unsigned char)*c < 0x20) plain = NULL;
    const char *shown_text = plain ? plain : text;
    printf(" %s=%.80s%s", key, shown_text, strlen(shown_text) > 80 ? "..." : "");
    free(text);
    shown++;
  }
  putchar('\n');
}

static int stream_main(int argc, char **argv) {
  static const struct option options[] = {{"journal", required_argument, NULL, 'j'},
                                          {"agent", required_argument, NULL, 'a'},
                                          {"exec", required_argument, NULL, 'e'},
                                          {"type", required_argument, NULL, 't'},
                                          {"since", required_argument, NULL, 's'},
                                          {"follow", no_argument, NULL, 'f'},
                                          {"json", no_argument, NULL, 'J'},
                                          {"help", no_argument, NULL, 'h'},
                                          {NULL, 0, NULL, 0}};
  const char *directory = NULL;
  journal_filter filter = {.follow_timeout_ms = 500};
  bool json = false;
  dome_error err = {0};
  int c;
  while ((c = getopt_long(argc, argv, "f", options, NULL)) != -1) {
    switch (c) {
      case 'j':
        directory = optarg;
        break;
      case 'a':
        filter.agent = optarg;
        break;
      case 'e':
        filter.exec_id = optarg;
        break;
      case 't':
        filter.type = optarg;
        break;
      case 's':
        if (journal_parse_time(optarg, &filter.since_ns, &err) < 0) {
          fprintf(stderr, "dome audit stream: --since: %s\n", err.message);
          return DOME_EXIT_FAILURE;
        }
        break;
      case 'f':
        filter.follow = true;
        break;
      case 'J':
        json = true;
        break;
      case 'h':
        printf(
            "usage: dome audit stream [DIR] [--agent A] [--exec ID] [--type T] [--since T] [--follow] "
            "[--json]\n");
        return 0;
      default:
        return DOME_EXIT_FAILURE;
    }
  }
  if (optind < argc) directory = argv[optind++];
  if (optind < argc) {
    fprintf(stderr, "dome audit stream: unexpected argument `%s`\n", argv[optind]);
    return DOME_EXIT_FAILURE;
  }
  if (!directory) directory = JOURNAL_DEFAULT_DIRECTORY;
  struct sigaction action = {.sa_handler = on_signal};
  sigaction(SIGINT, &action, NULL);
  sigaction(SIGTERM, &action, NULL);
  signal(SIGPIPE, SIG_IGN);
  journal_reader *reader;
  if (journal_reader_open(directory, &filter, &reader, &err) < 0) {
    fprintf(stderr, "dome audit stream: %s\n", err.message);
    return DOME_EXIT_FAILURE;
  }
  int r = 0;
  journal_record record;
  while (!stop) {
    r = journal_reader_next(reader, !json, &record, &err);
    if (r == -EAGAIN) continue;
    if (r <= 0) break;
    if (json) {
      fwrite(record.line, 1, record.length, stdout);
      fputc('\n', stdout);
    } else {
      print_human(&record);
      json_decref(record.event);
    }
    if (filter.follow) fflush(stdout);
    if (ferror(stdout)) break;
  }
  journal_reader_close(reader);
  if (r < 0 && r != -EAGAIN) {
    fprintf(stderr, "dome audit stream: %s\n", err.message);
    return 1;
  }
  return 0;
}
DOME_COMMAND(audit_stream, "audit stream", "print journal events as they are written (--follow)",
             stream_main);
