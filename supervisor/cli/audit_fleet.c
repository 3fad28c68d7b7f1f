/* dome audit stream|verify|export --fleet: the fleet's audit stream (supervisor/fleet/fleet.h) instead of
 * one journal. The NATS URL comes from --fleet-url URL or $DOME_FLEET_URL, the fleet's name from
 * --fleet-name NAME or $DOME_FLEET_NAME (default "default"), credentials from --fleet-creds FILE or
 * $DOME_FLEET_CREDS.
 *
 *   stream: the events of every node as they arrive (--no-follow: from the oldest kept, then end), each
 *           with a `node` member; --agent, --type, --node filter; --json prints NDJSON.
 *   verify: each node's replicated chain against the signed checkpoints, with the key the node
 *           registered in DOME_<fleet>_nodes: seq gaps per node, duplicates, an altered event, and a
 *           message on one node's subject whose id names another node. Exit 0 intact and gap-free, 1
 *           otherwise, 125 cannot run.
 *   export: every event (filters as stream) as NDJSON with its node (--format json: one array). */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "supervisor/audit/journal.h"
#include "supervisor/cli/audit_fleet.h"
#include "supervisor/cli/command.h"
#include "supervisor/fleet/fleet.h"

static volatile int stop;
static void on_signal(int signal_number) {
  (void)signal_number;
  stop = 1;
}

bool cli_fleet_requested(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--") == 0) return false;
    if (strcmp(argv[i], "--fleet") == 0) return true;
  }
  return false;
}

struct fleet_flags {
  const char *url, *name, *creds, *agent, *type, *node, *format;
  bool json, follow;
};

struct node_check {
  char node[FLEET_NAME_MAX];
  journal_chain *chain;
  uint64_t foreign; /* messages on this node's subject whose id names another node or no seq */
  char foreign_example[160];
  char key_error[1100];
};

struct reading {
  const char *mode;
  struct fleet_flags *flags;
  fleet *fleet;
  size_t printed;
  struct node_check *nodes;
  size_t node_count;
};

static bool type_matches(const char *filter, const char *type) {
  if (filter == NULL) return true;
  if (type == NULL) return false;
  size_t n = strlen(filter);
  if (n >= 2 && strcmp(filter + n - 2, ".*") == 0) n--;
  if (n && filter[n - 1] == '.') return strncmp(type, filter, n) == 0;
  return strcmp(type, filter) == 0;
}

static int print_event(struct reading *reading, const fleet_audit_message *m) {
  struct fleet_flags *flags = reading->flags;
  if (flags->node && strcmp(flags->node, m->node) != 0) return 0;
  json_error_t jerr;
  json_t *event = json_loadb(m->data, m->length, 0, &jerr);
  if (!json_is_object(event)) {
    json_decref(event);
    fprintf(stderr, "dome audit %s --fleet: stream seq %" PRIu64 " (%s) is not an event: skipped\n",
            reading->mode, m->stream_seq, m->subject);
    return 0;
  }
  const char *agent = json_string_value(json_object_get(event, "agent"));
  const char *type = json_string_value(json_object_get(event, "type"));
  if ((flags->agent && (!agent || strcmp(agent, flags->agent) != 0)) || !type_matches(flags->type, type)) {
    json_decref(event);
    return 0;
  }
  json_object_set_new(event, "node", json_string(m->node));
  bool array = strcmp(reading->mode, "export") == 0 && flags->format && strcmp(flags->format, "json") == 0;
  if (flags->json || strcmp(reading->mode, "export") == 0) {
    char *text = json_dumps(event, JSON_COMPACT | JSON_SORT_KEYS);
    if (array) fputs(reading->printed ? ",\n" : "[\n", stdout);
    if (text) fputs(text, stdout);
    if (!array) fputc('\n', stdout);
    free(text);
  } else {
    const char *time = json_string_value(json_object_get(event, "time"));
    json_int_t seq = json_integer_value(json_object_get(event, "seq"));
    printf("%.23s  %s#%lld  %-18s", time ? time : "?", m->node, (long long)seq, type ? type : "?");
    static const char *ids[] = {"agent", "actas", "exec_id", "tool", "decision", "reason"};
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) {
      const char *value = json_string_value(json_object_get(event, ids[i]));
      if (value) printf(" %s=%.80s", ids[i], value);
    }
    putchar('\n');
  }
  reading->printed++;
  json_decref(event);
  if (flags->follow) fflush(stdout);
  return ferror(stdout) ? 1 : 0;
}

static struct node_check *node_of(struct reading *reading, const char *node) {
  for (size_t i = 0; i < reading->node_count; i++)
    if (strcmp(reading->nodes[i].node, node) == 0) return &reading->nodes[i];
  struct node_check *grown = realloc(reading->nodes, (reading->node_count + 1) * sizeof *grown);
  if (grown == NULL) return NULL;
  reading->nodes = grown;
  struct node_check *check = &grown[reading->node_count++];
  memset(check, 0, sizeof *check);
  snprintf(check->node, sizeof check->node, "%s", node);
  dome_error err = {0};
  char *key = fleet_node_key(reading->fleet, node, &err);
  if (key == NULL || journal_chain_create(key, &check->chain, &err) < 0)
    snprintf(check->key_error, sizeof check->key_error, "%s", err.message);
  free(key);
  return check;
}

/* The seq of an event line, 0 when it has none. */
static uint64_t line_seq(const char *data, size_t length) {
  json_t *event = json_loadb(data, length, 0, NULL);
  json_int_t seq = json_integer_value(json_object_get(event, "seq"));
  json_decref(event);
  return seq > 0 ? (uint64_t)seq : 0;
}

static int check_message(struct reading *reading, const fleet_audit_message *m) {
  struct node_check *check = node_of(reading, m->node[0] ? m->node : "?");
  if (check == NULL) return 1;
  char expected[FLEET_NAME_MAX + 24];
  snprintf(expected, sizeof expected, "%s:%" PRIu64, m->node, line_seq(m->data, m->length));
  if (m->message_id == NULL || strcmp(m->message_id, expected) != 0) {
    if (check->foreign++ == 0)
      snprintf(check->foreign_example, sizeof check->foreign_example,
               "stream seq %" PRIu64 " on %s has message id `%s` (expected `%s`)", m->stream_seq, m->subject,
               m->message_id ? m->message_id : "(none)", expected);
    return 0;
  }
  dome_error err = {0};
  if (check->chain) journal_chain_add(check->chain, m->data, m->length, &err);
  return 0;
}

static int each_message(void *context, const fleet_audit_message *m) {
  struct reading *reading = context;
  if (strcmp(reading->mode, "verify") == 0) return check_message(reading, m);
  return print_event(reading, m);
}

static int report(struct reading *reading) {
  int failed = 0;
  json_t *nodes = json_array();
  for (size_t i = 0; i < reading->node_count; i++) {
    struct node_check *check = &reading->nodes[i];
    journal_chain_result r = {0};
    if (check->chain) journal_chain_result_get(check->chain, &r);
    bool ok = check->chain && r.bad_seq == 0 && r.gaps == 0 && check->foreign == 0 && r.first_seq <= 1;
    failed += !ok;
    json_t *entry =
        json_pack("{s:s,s:b,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I}", "node", check->node, "ok", ok, "events",
                  (json_int_t)r.events, "first_seq", (json_int_t)r.first_seq, "last_seq",
                  (json_int_t)r.last_seq, "checkpoints", (json_int_t)r.checkpoints, "signed_tree_size",
                  (json_int_t)r.signed_tree_size, "duplicates", (json_int_t)r.duplicates, "gaps",
                  (json_int_t)r.gaps, "foreign", (json_int_t)check->foreign);
    if (r.gaps) json_object_set_new(entry, "missing", json_string(r.gap_list));
    if (r.bad_seq) {
      json_object_set_new(entry, "bad_seq", json_integer((json_int_t)r.bad_seq));
      json_object_set_new(entry, "reason", json_string(r.reason));
    }
    if (check->key_error[0]) json_object_set_new(entry, "reason", json_string(check->key_error));
    json_array_append_new(nodes, entry);
    if (reading->flags->json) continue;
    if (!check->chain) {
      printf("%s: FAILED: %s\n", check->node, check->key_error);
      continue;
    }
    printf("%s: %s: %" PRIu64 " events (seq %" PRIu64 "..%" PRIu64 "), %" PRIu64
           " checkpoints verified, signed up to seq %" PRIu64,
           check->node, ok ? "ok" : "FAILED", r.events, r.first_seq, r.last_seq, r.checkpoints,
           r.signed_tree_size);
    if (r.duplicates) printf(", %" PRIu64 " duplicates (identical)", r.duplicates);
    putchar('\n');
    if (r.first_seq > 1) printf("  missing: seq 1-%" PRIu64 " (the stream starts later)\n", r.first_seq - 1);
    if (r.gaps)
      printf("  gaps: %" PRIu64 " (%" PRIu64 " events missing): %s\n", r.gaps, r.missing, r.gap_list);
    if (r.bad_seq) printf("  first bad seq %" PRIu64 ": %s\n", r.bad_seq, r.reason);
    if (check->foreign)
      printf("  %" PRIu64 " messages not published as this node's: %s\n", check->foreign,
             check->foreign_example);
    if (r.signed_tree_size + 1 < r.last_seq && r.bad_seq == 0)
      printf("  note: seq %" PRIu64 "..%" PRIu64 " not yet covered by a signed checkpoint\n",
             r.signed_tree_size + 1, r.last_seq);
  }
  if (reading->flags->json) {
    char *text = json_dumps(
        json_pack("{s:b,s:o}", "ok", failed == 0 && reading->node_count > 0, "nodes", nodes), JSON_COMPACT);
    puts(text ? text : "{}");
    free(text);
  } else {
    json_decref(nodes);
    if (reading->node_count == 0) printf("no events in the fleet's audit stream\n");
  }
  for (size_t i = 0; i < reading->node_count; i++) journal_chain_free(reading->nodes[i].chain);
  free(reading->nodes);
  return failed || reading->node_count == 0 ? 1 : 0;
}

int cli_audit_fleet(const char *mode, int argc, char **argv) {
  static const struct option options[] = {{"fleet", no_argument, NULL, 'F'},
                                          {"fleet-url", required_argument, NULL, 'u'},
                                          {"fleet-name", required_argument, NULL, 'N'},
                                          {"fleet-creds", required_argument, NULL, 'c'},
                                          {"agent", required_argument, NULL, 'a'},
                                          {"type", required_argument, NULL, 't'},
                                          {"node", required_argument, NULL, 'n'},
                                          {"format", required_argument, NULL, 'f'},
                                          {"json", no_argument, NULL, 'J'},
                                          {"follow", no_argument, NULL, 'w'},
                                          {"no-follow", no_argument, NULL, 'W'},
                                          {NULL, 0, NULL, 0}};
  struct fleet_flags flags = {.url = getenv("DOME_FLEET_URL"),
                              .name = getenv("DOME_FLEET_NAME"),
                              .creds = getenv("DOME_FLEET_CREDS"),
                              .follow = strcmp(mode, "stream") == 0};
  bool follow_flag = false, no_follow = false;
  int c;
  optind = 1;
  while ((c = getopt_long(argc, argv, "", options, NULL)) != -1) {
    switch (c) {
      case 'F':
        break;
      case 'u':
        flags.url = optarg;
        break;
      case 'N':
        flags.name = optarg;
        break;
      case 'c':
        flags.creds = optarg;
        break;
      case 'a':
        flags.agent = optarg;
        break;
      case 't':
        flags.type = optarg;
        break;
      case 'n':
        flags.node = optarg;
        break;
      case 'f':
        flags.format = optarg;
        break;
      case 'J':
        flags.json = true;
        break;
      case 'w':
        follow_flag = true;
        break;
      case 'W':
        no_follow = true;
        break;
      default:
        fprintf(stderr,
                "dome audit %s --fleet: takes --fleet-url, --fleet-name, --fleet-creds, --agent, --type, "
                "--node, --json%s\n",
                mode,
                strcmp(mode, "stream") == 0   ? ", --no-follow"
                : strcmp(mode, "export") == 0 ? ", --format"
                                              : "");
        return DOME_EXIT_FAILURE;
    }
  }
  if (optind < argc) {
    fprintf(stderr, "dome audit %s --fleet: unexpected argument `%s` (the fleet has no journal directory)\n",
            mode, argv[optind]);
    return DOME_EXIT_FAILURE;
  }
  if (follow_flag && no_follow) {
    fprintf(stderr, "dome audit %s: --follow and --no-follow exclude each other\n", mode);
    return DOME_EXIT_FAILURE;
  }
  if (no_follow || strcmp(mode, "stream") != 0) flags.follow = follow_flag && strcmp(mode, "stream") == 0;
  if (flags.format && strcmp(flags.format, "ndjson") != 0 && strcmp(flags.format, "json") != 0) {
    fprintf(stderr, "dome audit %s: --format: `%s` is not ndjson or json\n", mode, flags.format);
    return DOME_EXIT_FAILURE;
  }
  if (flags.url == NULL || flags.url[0] == '\0') {
    fprintf(stderr,
            "dome audit %s --fleet: no NATS URL: pass --fleet-url nats://HOST:PORT or set DOME_FLEET_URL\n",
            mode);
    return DOME_EXIT_FAILURE;
  }
  fleet_options fleet_opts = {.url = flags.url,
                              .fleet = flags.name && flags.name[0] ? flags.name : FLEET_DEFAULT_NAME,
                              .creds = flags.creds};
  fleet *f = NULL;
  dome_error err = {0};
  if (fleet_open(&fleet_opts, 5000, &f, &err) < 0) {
    fprintf(stderr, "dome audit %s --fleet: %s\n", mode, err.message);
    return DOME_EXIT_FAILURE;
  }
  struct sigaction action = {.sa_handler = on_signal};
  sigaction(SIGINT, &action, NULL);
  sigaction(SIGTERM, &action, NULL);
  signal(SIGPIPE, SIG_IGN);
  struct reading reading = {.mode = mode, .flags = &flags, .fleet = f};
  /* the default stream is live (from the next message on); --follow and --no-follow start at the oldest */
  uint64_t from = strcmp(mode, "stream") == 0 && flags.follow && !follow_flag ? 0 : 1;
  int rc = fleet_audit_read(f, from, flags.follow, &stop, each_message, &reading, &err);
  int status = 0;
  if (rc < 0) {
    fprintf(stderr, "dome audit %s --fleet: %s\n", mode, err.message);
    status = strcmp(mode, "verify") == 0 ? DOME_EXIT_FAILURE : 1;
  } else if (strcmp(mode, "verify") == 0) {
    status = report(&reading);
  } else if (strcmp(mode, "export") == 0 && flags.format && strcmp(flags.format, "json") == 0) {
    fputs(reading.printed ? "\n]\n" : "[]\n", stdout);
  }
  fleet_close(f);
  return status ? status : (fflush(stdout) == 0 ? 0 : 1);
}
