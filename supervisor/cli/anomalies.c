/* dome anomalies validate FILE|DIR          report every malformed rule with file:line:col
 * dome anomalies apply DIR | list            the rule set domed evaluates live (control socket)
 * dome audit anomalies [DIR] [--rules DIR] [--since T] [--until T] [--agent A] [--json]
 *                                            run the same rules over the journal's history
 * dome audit anomalies --fleet [--fleet-url URL] [--fleet-name N] [--fleet-creds F] [--rules DIR] ...
 *                                            the same over the fleet's audit stream: every node's
 *                                            events in stream order, so a correlation spans nodes
 * The rules are Sigma detection and correlation rules (docs/anomaly-detection.md). */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "supervisor/anomaly/anomaly.h"
#include "supervisor/audit/journal.h"
#include "supervisor/cli/command.h"
#include "supervisor/cli/control_list.h"
#include "supervisor/cli/journal_location.h"
#include "supervisor/control/control.h"
#include "supervisor/fleet/fleet.h"

#define DEFAULT_RULES "/etc/dome/anomaly"

static double seconds_since(const struct timespec *start) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return (double)(now.tv_sec - start->tv_sec) + (double)(now.tv_nsec - start->tv_nsec) / 1e9;
}

static int validate_main(int argc, char **argv) {
  bool json = false;
  int first = 1;
  for (; first < argc && argv[first][0] == '-'; first++) {
    if (strcmp(argv[first], "--help") == 0 || strcmp(argv[first], "-h") == 0) {
      printf(
          "usage: dome anomalies validate [--json] FILE|DIR...\n"
          "  loads Sigma rules as domed would; prints every problem as FILE:LINE:COL: rule ID: message\n"
          "  exit 0 when every rule loads, 1 when one does not\n");
      return 0;
    }
    if (strcmp(argv[first], "--json") == 0)
      json = true;
    else {
      fprintf(stderr, "dome anomalies validate: unknown flag `%s`\n", argv[first]);
      return DOME_EXIT_FAILURE;
    }
  }
  if (first >= argc) {
    fprintf(stderr, "dome anomalies validate: name a rule file or directory\n");
    return DOME_EXIT_FAILURE;
  }
  struct timespec start;
  clock_gettime(CLOCK_MONOTONIC, &start);
  anomaly_loader *loader = anomaly_loader_create();
  int loaded = 0;
  dome_error err = {0};
  for (int i = first; i < argc; i++) {
    int n = anomaly_loader_add_path(loader, argv[i], &err);
    if (n < 0) {
      fprintf(stderr, "dome anomalies validate: %s\n", err.message);
      anomaly_loader_free(loader);
      return DOME_EXIT_FAILURE;
    }
    loaded += n;
  }
  anomaly_rule_set *set = NULL;
  int rc = anomaly_loader_finish(loader, &set, &err);
  const json_t *problems = anomaly_loader_problems(loader);
  double elapsed = seconds_since(&start);
  if (json) {
    json_t *report = json_pack("{s:b,s:i,s:i,s:O,s:f,s:s?}", "valid", rc == 0, "rules", loaded, "active",
                               set ? (int)anomaly_rule_set_active_count(set) : 0, "problems", problems,
                               "seconds", elapsed, "digest", set ? anomaly_rule_set_digest(set) : NULL);
    char *text = json_dumps(report, JSON_COMPACT);
    puts(text);
    free(text);
    json_decref(report);
  } else {
    size_t i;
    const json_t *p;
    json_array_foreach(problems, i, p) printf("%s\n", json_string_value(p));
    printf("%d rules loaded (%zu for dome's journal), %zu problems, %.3f s\n", loaded,
           set ? anomaly_rule_set_active_count(set) : 0, json_array_size(problems), elapsed);
  }
  anomaly_rule_set_release(set);
  anomaly_loader_free(loader);
  return rc == 0 ? 0 : 1;
}
DOME_COMMAND(anomalies_validate, "anomalies validate",
             "check Sigma anomaly rules (file:line:col of each problem)", validate_main);

static int apply_main(int argc, char **argv) {
  const char *socket = NULL, *path = NULL;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      printf(
          "usage: dome anomalies apply DIR [--control-socket PATH]\n"
          "  domed loads the rules in DIR (on its side), refuses a set with a problem and keeps the\n"
          "  previous one; journaled as `anomalies.applied` with the set's digest\n");
      return 0;
    }
    if (strcmp(argv[i], "--control-socket") == 0 && i + 1 < argc)
      socket = argv[++i];
    else if (argv[i][0] != '-' && path == NULL)
      path = argv[i];
    else {
      fprintf(stderr, "dome anomalies apply: unexpected argument `%s`\n", argv[i]);
      return DOME_EXIT_FAILURE;
    }
  }
  if (path == NULL) {
    fprintf(stderr, "dome anomalies apply: name the rule directory\n");
    return DOME_EXIT_FAILURE;
  }
  char absolute[PATH_MAX];
  if (realpath(path, absolute) == NULL) {
    fprintf(stderr, "dome anomalies apply: `%s`: no such file or directory\n", path);
    return DOME_EXIT_FAILURE;
  }
  json_t *args = json_pack("{s:s}", "directory", absolute), *result = NULL;
  if (cli_control_call("anomalies apply", socket, "anomalies.apply", args, &result) < 0) return 1;
  printf("applied %lld rules (%lld for dome's journal), digest %s\n",
         (long long)json_integer_value(json_object_get(result, "rules")),
         (long long)json_integer_value(json_object_get(result, "active")),
         json_string_value(json_object_get(result, "digest")));
  json_decref(result);
  return 0;
}
DOME_COMMAND(anomalies_apply, "anomalies apply", "have domed evaluate the Sigma rules of a directory",
             apply_main);

static int list_main(int argc, char **argv) {
  int status = 0;
  json_t *listing = cli_control_list(argc, argv, "anomalies.list", &status);
  if (listing == NULL) return status;
  printf("directory %s, digest %s\n", json_string_value(json_object_get(listing, "directory")),
         json_string_value(json_object_get(listing, "digest")));
  size_t i;
  json_t *rule;
  json_array_foreach(json_object_get(listing, "rules"), i, rule) {
    printf("%-36s %-13s %-16s %s\n", json_string_value(json_object_get(rule, "id")),
           json_string_value(json_object_get(rule, "level")),
           json_string_value(json_object_get(rule, "kind")),
           json_string_value(json_object_get(rule, "title")));
  }
  json_decref(listing);
  return 0;
}
DOME_COMMAND(anomalies_list, "anomalies list", "the anomaly rules domed evaluates", list_main);

/* The rules of `dome audit anomalies`: --rules; else the directory domed applied; else
 * $DOME_ANOMALY_RULES; else /etc/dome/anomaly. */
static const char *rules_location(const char *flag, char **owned) {
  *owned = NULL;
  if (flag) return flag;
  json_t *result = NULL;
  dome_error err = {0};
  if (control_call(control_socket_path(NULL), "anomalies.list", json_object(), &result, &err) == 0) {
    const char *dir = json_string_value(json_object_get(result, "directory"));
    if (dir && dir[0]) *owned = strdup(dir);
  }
  json_decref(result);
  if (*owned) return *owned;
  const char *env = getenv("DOME_ANOMALY_RULES");
  return env && env[0] ? env : DEFAULT_RULES;
}

/* The node of each recent fleet stream message, by stream seq (a ring: the nodes of an alert's events
 * are named while they are among the last NODE_RING messages, which covers every shipped timespan at
 * the journal's rates; older ones are left out of `nodes`). */
enum { NODE_RING = 65536, NODES_MAX = 256 };

struct node_slot {
  uint64_t seq;  /* fleet stream seq */
  uint16_t node; /* index into names */
};

struct fleet_origin {
  char names[NODES_MAX][FLEET_NAME_MAX];
  size_t count;
  struct node_slot ring[NODE_RING];
};

struct offline {
  bool json;
  const char *agent;
  size_t alerts;
  int64_t time_ns;             /* of the event being processed */
  struct fleet_origin *origin; /* fleet mode: seqs are the fleet stream's; NULL for a journal */
  int64_t since_ns, until_ns;  /* fleet mode's time filter (a journal reader filters itself) */
  anomaly_engine *engine;
  size_t events;
};

/* fleet mode: the alert's `nodes`, from the ring */
static void add_nodes(json_t *alert, const struct fleet_origin *origin) {
  json_t *nodes = json_array();
  bool seen[NODES_MAX] = {false};
  size_t i;
  json_t *seq;
  json_array_foreach(json_object_get(alert, "seqs"), i, seq) {
    uint64_t s = (uint64_t)json_integer_value(seq);
    const struct node_slot *slot = &origin->ring[s % NODE_RING];
    if (slot->seq != s || seen[slot->node]) continue;
    seen[slot->node] = true;
    json_array_append_new(nodes, json_string(origin->names[slot->node]));
  }
  json_object_set_new(alert, "nodes", nodes);
}

static void print_alert(const json_t *alert, void *context) {
  struct offline *o = context;
  const char *agent = json_string_value(json_object_get(alert, "agent"));
  if (o->agent && (agent == NULL || strcmp(agent, o->agent) != 0)) return;
  o->alerts++;
  json_t *shown = json_deep_copy(alert);
  if (shown == NULL) return;
  if (o->origin) add_nodes(shown, o->origin);
  if (o->json) {
    char *text = json_dumps(shown, JSON_COMPACT | JSON_SORT_KEYS);
    puts(text);
    free(text);
    json_decref(shown);
    return;
  }
  char when[40];
  journal_format_time(o->time_ns, when, sizeof when);
  char *seqs = json_dumps(json_object_get(shown, "seqs"), JSON_COMPACT);
  char *nodes = o->origin ? json_dumps(json_object_get(shown, "nodes"), JSON_COMPACT) : NULL;
  printf("%s %-8s %s %s agent=%s %sseqs=%s%s%s\n", when, json_string_value(json_object_get(shown, "level")),
         json_string_value(json_object_get(shown, "rule_id")),
         json_string_value(json_object_get(shown, "title")), agent ? agent : "-", o->origin ? "stream " : "",
         seqs ? seqs : "[]", nodes ? " nodes=" : "", nodes ? nodes : "");
  free(seqs);
  free(nodes);
  json_decref(shown);
}

static volatile int fleet_stop;

/* One message of the fleet's audit stream: its event, with its node, through the engine. */
static int each_fleet_message(void *context, const fleet_audit_message *m) {
  struct offline *o = context;
  json_t *event = json_loadb(m->data, m->length, 0, NULL);
  if (!json_is_object(event)) { /* not an event (a checkpoint is one too): nothing to match */
    json_decref(event);
    return 0;
  }
  int64_t time_ns = 0;
  dome_error ignored = {0};
  const char *time_text = json_string_value(json_object_get(event, "time"));
  if (time_text == NULL || journal_parse_time(time_text, &time_ns, &ignored) < 0 ||
      (o->since_ns && time_ns < o->since_ns) || (o->until_ns && time_ns >= o->until_ns)) {
    json_decref(event);
    return 0;
  }
  struct fleet_origin *origin = o->origin;
  size_t node = 0;
  while (node < origin->count && strcmp(origin->names[node], m->node) != 0) node++;
  if (node == origin->count && origin->count < NODES_MAX)
    snprintf(origin->names[origin->count++], FLEET_NAME_MAX, "%s", m->node);
  if (node < origin->count) {
    origin->ring[m->stream_seq % NODE_RING].seq = m->stream_seq;
    origin->ring[m->stream_seq % NODE_RING].node = (uint16_t)node;
  }
  if (!json_object_get(event, "node")) json_object_set_new(event, "node", json_string(m->node));
  o->time_ns = time_ns;
  anomaly_engine_process(o->engine, event, m->stream_seq, time_ns, print_alert, o);
  json_decref(event);
  o->events++;
  return fleet_stop ? 1 : 0;
}

struct fleet_source {
  bool requested;
  const char *url, *name, *creds;
};

/* The fleet's stream from its oldest message to its end through the engine. Returns 0, or 1 after
 * printing the error. */
static int run_fleet(const struct fleet_source *source, struct offline *o) {
  if (source->url == NULL || source->url[0] == '\0') {
    fprintf(stderr,
            "dome audit anomalies --fleet: no NATS URL: pass --fleet-url nats://HOST:PORT or set "
            "DOME_FLEET_URL\n");
    return DOME_EXIT_FAILURE;
  }
  fleet_options options = {.url = source->url,
                           .fleet = source->name && source->name[0] ? source->name : FLEET_DEFAULT_NAME,
                           .creds = source->creds};
  fleet *f = NULL;
  dome_error err = {0};
  if (fleet_open(&options, 5000, &f, &err) < 0) {
    fprintf(stderr, "dome audit anomalies --fleet: %s\n", err.message);
    return DOME_EXIT_FAILURE;
  }
  o->origin = calloc(1, sizeof *o->origin);
  int rc = o->origin ? fleet_audit_read(f, 1, false, &fleet_stop, each_fleet_message, o, &err)
                     : dome_error_set(&err, ENOMEM, "out of memory");
  fleet_close(f);
  free(o->origin);
  o->origin = NULL;
  if (rc < 0) {
    fprintf(stderr, "dome audit anomalies --fleet: %s\n", err.message);
    return 1;
  }
  return 0;
}

static int offline_main(int argc, char **argv) {
  static const struct option options[] = {{"rules", required_argument, NULL, 'r'},
                                          {"journal", required_argument, NULL, 'j'},
                                          {"since", required_argument, NULL, 's'},
                                          {"until", required_argument, NULL, 'u'},
                                          {"agent", required_argument, NULL, 'a'},
                                          {"json", no_argument, NULL, 'J'},
                                          {"fleet", no_argument, NULL, 'F'},
                                          {"fleet-url", required_argument, NULL, 'U'},
                                          {"fleet-name", required_argument, NULL, 'N'},
                                          {"fleet-creds", required_argument, NULL, 'C'},
                                          {"help", no_argument, NULL, 'h'},
                                          {NULL, 0, NULL, 0}};
  const char *directory = NULL, *rules_flag = NULL;
  struct fleet_source fleet_source = {.url = getenv("DOME_FLEET_URL"),
                                      .name = getenv("DOME_FLEET_NAME"),
                                      .creds = getenv("DOME_FLEET_CREDS")};
  journal_filter filter = {0};
  struct offline o = {0};
  dome_error err = {0};
  int c;
  while ((c = getopt_long(argc, argv, "", options, NULL)) != -1) {
    switch (c) {
      case 'r':
        rules_flag = optarg;
        break;
      case 'j':
        directory = optarg;
        break;
      case 's':
      case 'u':
        if (journal_parse_time(optarg, c == 's' ? &filter.since_ns : &filter.until_ns, &err) < 0) {
          fprintf(stderr, "dome audit anomalies: %s: %s\n", c == 's' ? "--since" : "--until", err.message);
          return DOME_EXIT_FAILURE;
        }
        break;
      case 'a':
        o.agent = optarg;
        break;
      case 'J':
        o.json = true;
        break;
      case 'F':
        fleet_source.requested = true;
        break;
      case 'U':
        fleet_source.url = optarg;
        break;
      case 'N':
        fleet_source.name = optarg;
        break;
      case 'C':
        fleet_source.creds = optarg;
        break;
      case 'h':
        printf(
            "usage: dome audit anomalies [DIR] [--rules DIR] [--since T] [--until T] [--agent A] [--json]\n"
            "       dome audit anomalies --fleet [--fleet-url URL] [--fleet-name N] [--fleet-creds FILE] "
            "[--rules DIR] [--since T] [--until T] [--agent A] [--json]\n"
            "  the anomaly rules over the journal's events; one alert a line (JSON objects with --json)\n"
            "  rules: --rules, else the set domed applied, else $DOME_ANOMALY_RULES, else %s\n"
            "  --fleet: every node's events from the fleet's audit stream, in stream order (seqs are the\n"
            "  stream's, `nodes` names the nodes of an alert's events)\n",
            DEFAULT_RULES);
        return 0;
      default:
        return DOME_EXIT_FAILURE;
    }
  }
  if (optind < argc) directory = argv[optind++];
  if (fleet_source.requested && directory) {
    fprintf(stderr,
            "dome audit anomalies --fleet: unexpected argument `%s` (the fleet has no journal directory)\n",
            directory);
    return DOME_EXIT_FAILURE;
  }
  if (optind < argc) {
    fprintf(stderr, "dome audit anomalies: unexpected argument `%s`\n", argv[optind]);
    return DOME_EXIT_FAILURE;
  }
  char *owned_journal = NULL, *owned_rules = NULL;
  directory = cli_journal_location(NULL, directory, &owned_journal);
  if (directory == NULL) directory = JOURNAL_DEFAULT_DIRECTORY;
  const char *rules = rules_location(rules_flag, &owned_rules);
  anomaly_rule_set *set = NULL;
  json_t *problems = NULL;
  int status = 0;
  if (anomaly_rule_set_load(rules, &set, &problems, &err) < 0) {
    size_t i;
    json_t *p;
    json_array_foreach(problems, i, p) fprintf(stderr, "%s\n", json_string_value(p));
    fprintf(stderr, "dome audit anomalies: rules `%s`: %s\n", rules, err.message);
    status = DOME_EXIT_FAILURE;
    goto done;
  }
  anomaly_engine *engine = NULL;
  journal_reader *reader = NULL;
  if (fleet_source.requested) {
    if (anomaly_engine_create(set, NULL, &engine, &err) < 0) {
      fprintf(stderr, "dome audit anomalies: %s\n", err.message);
      status = DOME_EXIT_FAILURE;
      goto done;
    }
    o.engine = engine;
    o.since_ns = filter.since_ns;
    o.until_ns = filter.until_ns;
    status = run_fleet(&fleet_source, &o);
    anomaly_engine_free(engine);
    if (status == 0 && !o.json)
      printf("%zu events, %zu alerts (fleet stream, rules %s, digest %.12s)\n", o.events, o.alerts, rules,
             anomaly_rule_set_digest(set));
    goto done;
  }
  if (anomaly_engine_create(set, NULL, &engine, &err) < 0 ||
      journal_reader_open(directory, &filter, &reader, &err) < 0) {
    fprintf(stderr, "dome audit anomalies: %s\n", err.message);
    anomaly_engine_free(engine);
    status = DOME_EXIT_FAILURE;
    goto done;
  }
  journal_record record;
  int r;
  size_t events = 0;
  while ((r = journal_reader_next(reader, true, &record, &err)) > 0) {
    o.time_ns = record.time_ns;
    anomaly_engine_process(engine, record.event, record.seq, record.time_ns, print_alert, &o);
    json_decref(record.event);
    events++;
  }
  journal_reader_close(reader);
  anomaly_engine_free(engine);
  if (r < 0) {
    fprintf(stderr, "dome audit anomalies: %s\n", err.message);
    status = 1;
  } else if (!o.json) {
    printf("%zu events, %zu alerts (rules %s, digest %.12s)\n", events, o.alerts, rules,
           anomaly_rule_set_digest(set));
  }
done:
  anomaly_rule_set_release(set);
  json_decref(problems);
  free(owned_journal);
  free(owned_rules);
  return status;
}
DOME_COMMAND(audit_anomalies, "audit anomalies", "run the anomaly rules over the journal's history",
             offline_main);
