/* dome anomalies validate FILE|DIR          report every malformed rule with file:line:col
 * dome anomalies apply DIR | list            the rule set domed evaluates live (control socket)
 * dome audit anomalies [DIR] [--rules DIR] [--since T] [--until T] [--agent A] [--json]
 *                                            run the same rules over the journal's history
 * The rules are Sigma detection and correlation rules (docs/anomaly-detection.md). */
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
  dome_error err = {0};
  int rc = control_call(control_socket_path(socket), "anomalies.apply", args, &result, &err);
  json_decref(args);
  if (rc < 0) {
    fprintf(stderr, "dome anomalies apply: %s\n", err.message);
    json_decref(result);
    return 1;
  }
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

struct offline {
  bool json;
  const char *agent;
  size_t alerts;
  const journal_record *record;
};

static void print_alert(const json_t *alert, void *context) {
  struct offline *o = context;
  const char *agent = json_string_value(json_object_get(alert, "agent"));
  if (o->agent && (agent == NULL || strcmp(agent, o->agent) != 0)) return;
  o->alerts++;
  if (o->json) {
    char *text = json_dumps(alert, JSON_COMPACT | JSON_SORT_KEYS);
    puts(text);
    free(text);
    return;
  }
  char when[40];
  journal_format_time(o->record->time_ns, when, sizeof when);
  char *seqs = json_dumps(json_object_get(alert, "seqs"), JSON_COMPACT);
  printf("%s %-8s %s %s agent=%s seqs=%s\n", when, json_string_value(json_object_get(alert, "level")),
         json_string_value(json_object_get(alert, "rule_id")),
         json_string_value(json_object_get(alert, "title")), agent ? agent : "-", seqs ? seqs : "[]");
  free(seqs);
}

static int offline_main(int argc, char **argv) {
  static const struct option options[] = {
      {"rules", required_argument, NULL, 'r'}, {"journal", required_argument, NULL, 'j'},
      {"since", required_argument, NULL, 's'}, {"until", required_argument, NULL, 'u'},
      {"agent", required_argument, NULL, 'a'}, {"json", no_argument, NULL, 'J'},
      {"help", no_argument, NULL, 'h'},        {NULL, 0, NULL, 0}};
  const char *directory = NULL, *rules_flag = NULL;
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
      case 'h':
        printf(
            "usage: dome audit anomalies [DIR] [--rules DIR] [--since T] [--until T] [--agent A] [--json]\n"
            "  the anomaly rules over the journal's events; one alert a line (JSON objects with --json)\n"
            "  rules: --rules, else the set domed applied, else $DOME_ANOMALY_RULES, else %s\n",
            DEFAULT_RULES);
        return 0;
      default:
        return DOME_EXIT_FAILURE;
    }
  }
  if (optind < argc) directory = argv[optind++];
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
  o.record = &record;
  while ((r = journal_reader_next(reader, true, &record, &err)) > 0) {
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
