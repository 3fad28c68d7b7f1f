/* dome audit replay EXEC_ID [--journal DIR] [--speed X] [--json]
 * dome audit replay --session SESSION_ID [--journal DIR] [--speed X] [--json]
 * dome audit replay EXEC_ID --rerun [--rules FILE] [--journal DIR] [--record DIR] [--json]
 * The timeline of one jailed execution from the journal, or of one sandbox session and the calls made in
 * it, or a re-run of an execution's inputs in a fresh jail compared with what was recorded
 * (supervisor/replay/replay.h). */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "supervisor/audit/journal.h"
#include "supervisor/cli/command.h"
#include "supervisor/control/control.h"
#include "supervisor/replay/replay.h"

struct view {
  double speed; /* 0: instantly */
  int64_t last_offset_ms;
};

static const char *str(json_t *event, const char *key) {
  const char *value = json_string_value(json_object_get(event, key));
  return value ? value : "";
}

static long long num(json_t *event, const char *key) {
  return (long long)json_integer_value(json_object_get(event, key));
}

static void print_list(json_t *ids) {
  size_t i;
  json_t *id;
  if (json_array_size(ids) == 0) fputs("(no policy)", stdout);
  json_array_foreach(ids, i, id) printf("%s%s", i ? "," : "", json_string_value(id));
}

static int print_step(void *context, json_t *step, dome_error *err) {
  (void)err;
  struct view *view = context;
  int64_t offset = json_integer_value(json_object_get(step, "offset_ms"));
  if (view->speed > 0 && offset > view->last_offset_ms) {
    double seconds = (double)(offset - view->last_offset_ms) / 1000.0 / view->speed;
    struct timespec pause = {(time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};
    nanosleep(&pause, NULL);
  }
  if (offset > view->last_offset_ms) view->last_offset_ms = offset;
  const char *kind = str(step, "kind");
  printf("%+8lldms #%-6lld %-13s ", (long long)offset, num(step, "seq"), kind);
  if (!strcmp(kind, "authorization")) {
    printf("%s %s by ", str(step, "action"), str(step, "decision"));
    print_list(json_object_get(step, "determining"));
    printf(" (policy version %s%s%s)\n", str(step, "policy_version"),
           strcmp(str(step, "reason"), "policy") && str(step, "reason")[0] ? "; " : "",
           strcmp(str(step, "reason"), "policy") ? str(step, "reason") : "");
  } else if (!strcmp(kind, "start")) {
    json_t *limits = json_object_get(step, "limits");
    printf(
        "%s on image %s%s%s, code %lld bytes, stdin %lld bytes, %zu files; limits memory=%lld pids=%lld "
        "timeout_ms=%lld\n",
        str(step, "language"), str(step, "image"), json_object_get(step, "image_digest") ? "@" : "",
        str(step, "image_digest"), num(step, "code_bytes"), num(step, "stdin_bytes"),
        json_array_size(json_object_get(step, "files")), num(limits, "memory_bytes"), num(limits, "pids"),
        num(limits, "timeout_ms") ? num(limits, "timeout_ms") : num(limits, "timeout_s") * 1000);
  } else if (!strcmp(kind, "jail")) {
    printf("%s cgroup %lld\n", str(step, "jail_id"), num(step, "cgroup_id"));
  } else if (!strcmp(kind, "output")) {
    const char *data = str(step, "data");
    printf("[%s]\n", str(step, "stream"));
    fwrite(data, 1, json_string_length(json_object_get(step, "data")), stdout);
    if (data[0] && data[strlen(data) - 1] != '\n') putchar('\n');
  } else if (!strcmp(kind, "denial") || !strcmp(kind, "access")) {
    printf("%s %s by %s\n", str(step, "hook"), str(step, "object"),
           str(step, "policy_id")[0] ? str(step, "policy_id") : "(default deny)");
  } else if (!strcmp(kind, "redaction")) {
    printf("%s: %s x%lld\n", str(step, "field"), str(step, "detector"), num(step, "count"));
  } else if (!strcmp(kind, "end")) {
    if (json_object_get(step, "error"))
      printf("failed: %s\n", str(step, "error"));
    else
      printf("exit %lld signal %lld%s%s duration %lldms cpu %lldms peak memory %lld bytes peak pids %lld\n",
             num(step, "exit_code"), num(step, "signal"),
             json_is_true(json_object_get(step, "timed_out")) ? " timed out" : "",
             json_is_true(json_object_get(step, "oom_killed")) ? " oom-killed" : "", num(step, "duration_ms"),
             num(step, "cpu_ms"), num(step, "peak_memory_bytes"), num(step, "peak_pids"));
  } else if (!strcmp(kind, "created")) {
    printf("session %s of agent %s on image %s\n", str(step, "session_id"), str(step, "agent"),
           str(step, "image"));
  } else if (!strcmp(kind, "cell")) {
    printf("%s %s, code %lld bytes (sha256 %.12s)%s%s%s\n", str(step, "exec_id"), str(step, "language"),
           num(step, "code_bytes"), str(step, "code_sha256"),
           json_is_true(json_object_get(step, "timed_out")) ? ", timed out" : "",
           json_is_true(json_object_get(step, "interrupted")) ? ", interrupted" : "",
           json_object_get(step, "error") ? ", failed" : "");
  } else if (!strcmp(kind, "file")) {
    printf("%s %s %s%s%s\n", str(step, "exec_id"), str(step, "tool"), str(step, "path"),
           json_object_get(step, "error") ? ": " : "", str(step, "error"));
  } else if (!strcmp(kind, "snapshot") || !strcmp(kind, "forked")) {
    printf("%s snapshot %s\n", str(step, "exec_id"), str(step, "snapshot_id"));
  } else if (!strcmp(kind, "closed") || !strcmp(kind, "rules")) {
    printf("%s%s%s\n", str(step, "type"), str(step, "reason")[0] ? ": " : "", str(step, "reason"));
  } else if (!strcmp(kind, "rerun")) {
    printf("re-run %s: %s\n", str(step, "rerun_exec_id"),
           json_is_true(json_object_get(step, "same")) ? "no difference" : "differs");
  } else {
    printf("%s\n", str(step, "type"));
  }
  fflush(stdout);
  return 0;
}

/* domed holds its journal while it runs (the journal has one writer): the CLI must not write to it then.
 * Whether `dir` is the journal of the domed answering on the control socket ($DOME_CONTROL_SOCKET or the
 * default), asked with `audit.stream` {describe}. Conservative: a domed that answers without naming a
 * journal this process can compare with `dir` (same device and inode) counts as writing `dir`. */
static bool domed_writes(const char *dir) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  struct sockaddr_un address = {.sun_family = AF_UNIX};
  snprintf(address.sun_path, sizeof address.sun_path, "%s", control_socket_path(NULL));
  bool running = connect(fd, (struct sockaddr *)&address, sizeof address) == 0;
  close(fd);
  if (!running) return false;
  json_t *args = json_pack("{s:b}", "describe", 1), *result = NULL;
  dome_error err = {0};
  int rc = control_call(control_socket_path(NULL), "audit.stream", args, &result, &err);
  json_decref(args);
  const char *live = rc == 0 ? json_string_value(json_object_get(result, "journal_dir")) : NULL;
  struct stat live_status, dir_status;
  bool same = live == NULL || stat(live, &live_status) < 0 || stat(dir, &dir_status) < 0 ||
              (live_status.st_dev == dir_status.st_dev && live_status.st_ino == dir_status.st_ino);
  json_decref(result);
  return same;
}

/* The journal read must be an existing directory: opening it to append a re-run would create it, and a
 * missing one is a mistyped --journal, not an execution missing from a journal. Prints the error. */
static int journal_directory_check(const char *dir) {
  struct stat status;
  if (stat(dir, &status) < 0) {
    if (errno == ENOENT)
      fprintf(stderr, "dome audit replay: journal `%s` does not exist (--journal DIR; default %s)\n", dir,
              JOURNAL_DEFAULT_DIRECTORY);
    else
      fprintf(stderr, "dome audit replay: journal `%s`: %s\n", dir, strerror(errno));
    return -1;
  }
  if (!S_ISDIR(status.st_mode)) {
    fprintf(stderr, "dome audit replay: journal `%s` is not a directory\n", dir);
    return -1;
  }
  return 0;
}

static int journal_append_event(void *context, json_t *event, dome_error *err) {
  return journal_append(context, event, NULL, err);
}

static void print_differences(json_t *report) {
  json_t *authorization = json_object_get(report, "authorization");
  if (authorization)
    printf("authorization: recorded %s, re-run %s%s%s\n", str(authorization, "recorded"),
           str(authorization, "rerun"), json_object_get(authorization, "error") ? ": " : "",
           str(authorization, "error"));
  size_t i;
  json_t *difference;
  json_array_foreach(json_object_get(report, "differences"), i, difference) {
    char *recorded = json_dumps(json_object_get(difference, "recorded"), JSON_ENCODE_ANY | JSON_COMPACT);
    char *rerun = json_dumps(json_object_get(difference, "rerun"), JSON_ENCODE_ANY | JSON_COMPACT);
    printf("differs: %s: recorded %.300s, re-run %.300s\n", str(difference, "what"),
           recorded ? recorded : "?", rerun ? rerun : "?");
    free(recorded);
    free(rerun);
  }
  printf("re-run %s of %s: %s\n", str(report, "exec_id"), str(report, "rerun_of"),
         json_is_true(json_object_get(report, "same")) ? "no difference" : "differences found");
}

static int rerun(const char *journal_dir, const char *exec_id, const char *rules_path, const char *record_dir,
                 bool json) {
  dome_error err = {0};
  simulate_policy *rules = NULL;
  if (rules_path && replay_simulate_policy_load(rules_path, true, &rules, &err) < 0) {
    fprintf(stderr, "dome audit replay: --rules: %s\n", err.message);
    return DOME_EXIT_FAILURE;
  }
  journal *j = NULL;
  const char *target = record_dir ? record_dir : journal_dir;
  if (record_dir == NULL && domed_writes(journal_dir)) {
    fprintf(stderr,
            "dome audit replay: --rerun: domed is running and writes journal `%s`; pass --record DIR to "
            "journal the re-run elsewhere\n",
            journal_dir);
    replay_simulate_policy_free(rules);
    return DOME_EXIT_FAILURE;
  }
  journal_options options;
  journal_options_init(&options, target);
  if (journal_open(&options, &j, &err) < 0) {
    fprintf(stderr, "dome audit replay: --rerun: journal `%s`: %s\n", target, err.message);
    replay_simulate_policy_free(rules);
    return DOME_EXIT_FAILURE;
  }
  replay_rerun_options rerun_options = {.journal_dir = journal_dir,
                                        .exec_id = exec_id,
                                        .rules = rules,
                                        .append = journal_append_event,
                                        .context = j};
  const char *store = getenv("DOME_IMAGE_STORE");
  rerun_options.image_store = store;
  json_t *report = NULL;
  int rc = replay_rerun(&rerun_options, &report, &err);
  dome_error close_err = {0};
  int closed = journal_close(j, &close_err);
  replay_simulate_policy_free(rules);
  if (rc < 0) {
    fprintf(stderr, "dome audit replay: --rerun %s: %s\n", exec_id, err.message);
    return DOME_EXIT_FAILURE;
  }
  if (closed < 0) fprintf(stderr, "dome audit replay: journal `%s`: %s\n", target, close_err.message);
  if (json) {
    char *text = json_dumps(report, JSON_COMPACT | JSON_SORT_KEYS);
    printf("%s\n", text ? text : "{}");
    free(text);
  } else {
    print_differences(report);
  }
  json_decref(report);
  return closed < 0 ? DOME_EXIT_FAILURE : 0;
}

/* A timeline document on stdout, one line of canonical JSON (the caller's reference released). */
static void print_timeline_json(json_t *timeline) {
  char *text = json_dumps(timeline, JSON_COMPACT | JSON_SORT_KEYS);
  printf("%s\n", text ? text : "{}");
  free(text);
  json_decref(timeline);
}

static int session_main(const char *journal_dir, const char *session_id, struct view *view, bool json) {
  dome_error err = {0};
  if (json) {
    json_t *timeline = NULL;
    if (replay_session_timeline_json(journal_dir, session_id, &timeline, &err) < 0) {
      fprintf(stderr, "dome audit replay: %s\n", err.message);
      return DOME_EXIT_FAILURE;
    }
    print_timeline_json(timeline);
    return 0;
  }
  printf("session %s (journal %s)\n", session_id, journal_dir);
  if (replay_session_timeline(journal_dir, session_id, print_step, view, &err) < 0) {
    fprintf(stderr, "dome audit replay: %s\n", err.message);
    return DOME_EXIT_FAILURE;
  }
  return 0;
}

static int replay_main(int argc, char **argv) {
  static const struct option options[] = {{"journal", required_argument, NULL, 'j'},
                                          {"speed", required_argument, NULL, 's'},
                                          {"json", no_argument, NULL, 'J'},
                                          {"rerun", no_argument, NULL, 'r'},
                                          {"rules", required_argument, NULL, 'R'},
                                          {"record", required_argument, NULL, 'o'},
                                          {"session", required_argument, NULL, 'S'},
                                          {"help", no_argument, NULL, 'h'},
                                          {NULL, 0, NULL, 0}};
  const char *journal_dir = JOURNAL_DEFAULT_DIRECTORY, *rules = NULL, *record = NULL, *session = NULL;
  struct view view = {0};
  bool json = false, do_rerun = false;
  int c;
  optind = 1;
  while ((c = getopt_long(argc, argv, "j:s:Jh", options, NULL)) != -1) {
    switch (c) {
      case 'j':
        journal_dir = optarg;
        break;
      case 's': {
        char *end = NULL;
        view.speed = strtod(optarg, &end);
        if (end == optarg || *end || view.speed < 0 || view.speed > 1e6) {
          fprintf(stderr, "dome audit replay: --speed: `%s` is not a factor in 0..1000000\n", optarg);
          return DOME_EXIT_FAILURE;
        }
        break;
      }
      case 'J':
        json = true;
        break;
      case 'r':
        do_rerun = true;
        break;
      case 'R':
        rules = optarg;
        break;
      case 'o':
        record = optarg;
        break;
      case 'S':
        session = optarg;
        break;
      case 'h':
        printf(
            "usage: dome audit replay EXEC_ID [--journal DIR] [--speed X] [--json]\n"
            "       dome audit replay EXEC_ID --rerun [--rules FILE] [--record DIR] [--journal DIR] "
            "[--json]\n"
            "       dome audit replay --session SESSION_ID [--journal DIR] [--speed X] [--json]\n"
            "Prints the timeline of a jailed execution from the journal (default %s): authorization, jail\n"
            "set-up, output chunks, kernel denials, redactions, exit and resource use. --speed X: output at "
            "X\n"
            "times the recorded pace (default: instantly). --json: the timeline as one document.\n"
            "--rerun: run the recorded inputs again in a fresh jail (under FILE's rules when given) and "
            "report\n"
            "what differs; the re-run is journalled (in --record DIR, else in the journal) linked to the "
            "original.\n"
            "--session: one sandbox session as one timeline: its creation, every call made in it (decision,\n"
            "cells, files, snapshots) and its end.\n",
            JOURNAL_DEFAULT_DIRECTORY);
        return 0;
      default:
        return DOME_EXIT_FAILURE;
    }
  }
  if (session) {
    if (optind != argc || do_rerun || rules || record) {
      fprintf(stderr, "dome audit replay: --session takes no EXEC_ID, --rerun, --rules or --record\n");
      return DOME_EXIT_FAILURE;
    }
    if (journal_directory_check(journal_dir) < 0) return DOME_EXIT_FAILURE;
    return session_main(journal_dir, session, &view, json);
  }
  if (optind != argc - 1) {
    fprintf(stderr, "dome audit replay: exactly one EXEC_ID is required (see --help)\n");
    return DOME_EXIT_FAILURE;
  }
  const char *exec_id = argv[optind];
  if (rules && !do_rerun) {
    fprintf(stderr, "dome audit replay: --rules needs --rerun\n");
    return DOME_EXIT_FAILURE;
  }
  if (journal_directory_check(journal_dir) < 0) return DOME_EXIT_FAILURE;
  if (do_rerun) return rerun(journal_dir, exec_id, rules, record, json);
  dome_error err = {0};
  if (json) {
    json_t *timeline = NULL;
    if (replay_timeline_json(journal_dir, exec_id, &timeline, &err) < 0) {
      fprintf(stderr, "dome audit replay: %s\n", err.message);
      return DOME_EXIT_FAILURE;
    }
    print_timeline_json(timeline);
    return 0;
  }
  printf("execution %s (journal %s)\n", exec_id, journal_dir);
  if (replay_timeline(journal_dir, exec_id, print_step, &view, &err) < 0) {
    fprintf(stderr, "dome audit replay: %s\n", err.message);
    return DOME_EXIT_FAILURE;
  }
  return 0;
}

DOME_COMMAND(audit_replay, "audit replay", "print a jailed execution's timeline, or re-run it (--rerun)",
             replay_main);
