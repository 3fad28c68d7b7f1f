/* dome audit stream [DIR] [--journal DIR] [--agent A] [--exec ID] [--type T] [--since T] [--follow]
 *                   [--no-follow] [--json] [--control-socket PATH]
 * One event per line: human format by default, canonical NDJSON with --json.
 * Without DIR/--journal the events come live from domed (control command `audit.stream`, on
 * --control-socket, $DOME_CONTROL_SOCKET or the default socket): new events as they are journalled,
 * until domed stops or the stream is interrupted; --since T or --no-follow start from the oldest kept
 * event (--no-follow ends at the current end). When no domed answers there (and no --control-socket was
 * given), the journal directory ($DOME_JOURNAL_DIR, else the default) is read instead: its events so
 * far, and with --follow the new ones as they are written. */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "supervisor/audit/journal.h"
#include "supervisor/cli/audit_fleet.h"
#include "supervisor/cli/command.h"
#include "supervisor/cli/journal_filter_flags.h"
#include "supervisor/control/control.h"

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

struct live {
  bool json;
  uint64_t events;
};

/* One event from domed: printed as it came, flushed at once (a monitor reads it live). */
static int on_live_event(void *context, json_t *event) {
  struct live *live = context;
  if (!json_is_object(event)) return 0;
  if (live->json) {
    char *text = json_dumps(event, JSON_COMPACT | JSON_SORT_KEYS);
    if (text) puts(text);
    free(text);
  } else {
    json_t *seq = json_object_get(event, "seq");
    journal_record record = {.seq = json_is_integer(seq) ? (uint64_t)json_integer_value(seq) : 0,
                             .event = event};
    print_human(&record);
  }
  live->events++;
  fflush(stdout);
  return ferror(stdout) ? 1 : 0;
}

/* Stream from domed. Returns 0 (the stream ended: domed stopped, or --no-follow reached the end), 1 when
 * domed is not reachable and the caller may read the journal itself, or DOME_EXIT_FAILURE. */
static int stream_live(const char *socket_flag, const journal_filter *filter, bool follow, bool from_oldest,
                       bool json) {
  json_t *args = json_pack("{s:b}", "follow", follow);
  if (filter->agent) json_object_set_new(args, "agent", json_string(filter->agent));
  if (filter->exec_id) json_object_set_new(args, "exec_id", json_string(filter->exec_id));
  if (filter->type) json_object_set_new(args, "type", json_string(filter->type));
  if (filter->since_ns) json_object_set_new(args, "since_ns", json_integer((json_int_t)filter->since_ns));
  if (from_oldest || filter->since_ns) json_object_set_new(args, "from_seq", json_integer(1));
  struct live live = {.json = json};
  dome_error err = {0};
  const char *socket = control_socket_path(socket_flag);
  int rc = control_stream(socket, "audit.stream", args, on_live_event, &live, &err);
  json_decref(args);
  if (rc == 1) return 0; /* stopped by us: output closed or interrupted */
  if ((rc == -ENOENT || rc == -ECONNREFUSED) && socket_flag == NULL) return 1;
  if (rc < 0) {
    fprintf(stderr, "dome audit stream: %s\n", err.message);
    return DOME_EXIT_FAILURE;
  }
  return 0;
}

static int stream_main(int argc, char **argv) {
  if (cli_fleet_requested(argc, argv)) return cli_audit_fleet("stream", argc, argv);
  static const struct option options[] = {{"journal", required_argument, NULL, 'j'},
                                          CLI_JOURNAL_FILTER_OPTIONS,
                                          {"follow", no_argument, NULL, 'f'},
                                          {"no-follow", no_argument, NULL, 'n'},
                                          {"control-socket", required_argument, NULL, 'c'},
                                          {"json", no_argument, NULL, 'J'},
                                          {"help", no_argument, NULL, 'h'},
                                          {NULL, 0, NULL, 0}};
  const char *directory = NULL, *socket = NULL;
  journal_filter filter = {.follow_timeout_ms = 500};
  bool json = false, no_follow = false;
  dome_error err = {0};
  int c;
  while ((c = getopt_long(argc, argv, "f", options, NULL)) != -1) {
    switch (c) {
      case 'j':
        directory = optarg;
        break;
      case 'f':
        filter.follow = true;
        break;
      case 'J':
        json = true;
        break;
      case 'n':
        no_follow = true;
        break;
      case 'c':
        socket = optarg;
        break;
      case 'h':
        printf(
            "usage: dome audit stream [DIR | --journal DIR] [--agent A] [--exec ID] [--type T] [--since T]\n"
            "                         [--follow] [--no-follow] [--json] [--control-socket PATH]\n"
            "       dome audit stream --fleet [--fleet-url URL] [--fleet-name NAME] [--agent A] [--type T]\n"
            "                         [--node N] [--no-follow] [--json]   (every node, from NATS JetStream)\n"
            "Without DIR: live from domed's control socket (new events until domed stops; --since or\n"
            "--no-follow start from the oldest event); when no domed answers, the journal directory\n"
            "($DOME_JOURNAL_DIR or %s) is read (--follow: and followed).\n",
            JOURNAL_DEFAULT_DIRECTORY);
        return 0;
      default: /* a filter flag, else an unknown option (getopt_long printed it) */
        if (cli_journal_filter_option("audit stream", c, optarg, &filter) != 1) return DOME_EXIT_FAILURE;
        break;
    }
  }
  if (cli_journal_directory_operand("audit stream", argc, argv, &directory) < 0) return DOME_EXIT_FAILURE;
  if (filter.follow && no_follow) {
    fprintf(stderr, "dome audit stream: --follow and --no-follow exclude each other\n");
    return DOME_EXIT_FAILURE;
  }
  signal(SIGPIPE, SIG_IGN);
  /* live from domed: SIGINT/SIGTERM end the command as usual (every event is flushed as it arrives) */
  if (!directory) {
    int live = stream_live(socket, &filter, !no_follow, no_follow, json);
    if (live != 1) return live;
    directory = getenv("DOME_JOURNAL_DIR");
    if (directory == NULL || directory[0] == '\0') directory = JOURNAL_DEFAULT_DIRECTORY;
    fprintf(stderr, "dome audit stream: domed is not running at `%s`: reading journal `%s`%s\n",
            control_socket_path(NULL), directory, filter.follow ? "" : " (--follow to wait for new events)");
  } else if (socket) {
    fprintf(stderr, "dome audit stream: --control-socket and a journal directory exclude each other\n");
    return DOME_EXIT_FAILURE;
  }
  struct sigaction action = {.sa_handler = on_signal};
  sigaction(SIGINT, &action, NULL);
  sigaction(SIGTERM, &action, NULL);
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
