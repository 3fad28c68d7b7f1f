/* dome rules simulate FILE [--journal DIR] [--since T] [--until T] [--agent A] [--json]
 * Re-evaluates every recorded request against the rules in FILE and prints the DecisionDiffs and a
 * summary (supervisor/replay/replay.h). Reads the journal only; exit 0 with or without diffs. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "supervisor/audit/journal.h"
#include "supervisor/cli/command.h"
#include "supervisor/cli/journal_location.h"
#include "supervisor/cli/rules_tools.h"
#include "supervisor/common/cleanup.h"
#include "supervisor/replay/replay.h"

#define MAX_ERRORS_SHOWN 10

struct output {
  bool json;
  uint64_t diffs;
  uint64_t errors_shown;
};

static void print_ids(json_t *ids) {
  if (json_array_size(ids) == 0) {
    fputs("(none)", stdout);
    return;
  }
  size_t i;
  json_t *id;
  json_array_foreach(ids, i, id) printf("%s%s", i ? "," : "", json_string_value(id));
}

static int on_diff(void *context, json_t *diff, dome_error *err) {
  (void)err;
  struct output *out = context;
  if (out->json) {
    char *text = json_dumps(diff, JSON_COMPACT | JSON_SORT_KEYS);
    if (text == NULL) return dome_error_set(err, ENOMEM, "print diff");
    printf("%s\n  %s", out->diffs ? "," : "", text);
    free(text);
  } else {
    json_t *old = json_object_get(diff, "old"), *new = json_object_get(diff, "new");
    const char *actas = json_string_value(json_object_get(diff, "actas"));
    printf("#%lld %s %s agent=%s%s%s %s %s\n    %s -> %s  (was ",
           (long long)json_integer_value(json_object_get(diff, "seq")),
           json_string_value(json_object_get(diff, "time")), json_string_value(json_object_get(diff, "type")),
           json_string_value(json_object_get(diff, "agent"))
               ? json_string_value(json_object_get(diff, "agent"))
               : "?",
           actas ? " actas=" : "", actas ? actas : "", json_string_value(json_object_get(diff, "action")),
           json_string_value(json_object_get(diff, "resource")),
           json_string_value(json_object_get(old, "decision")),
           json_string_value(json_object_get(new, "decision")));
    print_ids(json_object_get(old, "determining"));
    printf(" at policy version %s; now ", json_string_value(json_object_get(old, "policy_version"))
                                              ? json_string_value(json_object_get(old, "policy_version"))
                                              : "?");
    print_ids(json_object_get(new, "determining"));
    printf(")\n");
    size_t i;
    json_t *e;
    json_array_foreach(json_object_get(new, "errors"), i, e)
        printf("    error: %s%s%s\n", json_string_value(json_object_get(e, "policy")),
               json_string_length(json_object_get(e, "policy")) ? ": " : "",
               json_string_value(json_object_get(e, "message")));
  }
  out->diffs++;
  fflush(stdout);
  return 0;
}

static void on_error(void *context, uint64_t seq, const char *message) {
  struct output *out = context;
  if (out->errors_shown++ < MAX_ERRORS_SHOWN)
    fprintf(stderr, "dome rules simulate: seq %llu: %s\n", (unsigned long long)seq, message);
}

static int simulate_main(int argc, char **argv) {
  static const struct option options[] = {{"journal", required_argument, NULL, 'j'},
                                          {"since", required_argument, NULL, 's'},
                                          {"until", required_argument, NULL, 'u'},
                                          {"agent", required_argument, NULL, 'a'},
                                          {"json", no_argument, NULL, 'J'},
                                          {"no-validate", no_argument, NULL, 'N'},
                                          {"control-socket", required_argument, NULL, 'S'},
                                          {"tools", required_argument, NULL, 'T'},
                                          {"help", no_argument, NULL, 'h'},
                                          {NULL, 0, NULL, 0}};
  simulate_options sim = {.journal_dir = NULL};
  const char *socket = NULL, *tools_file = NULL;
  _cleanup_free_ char *domed_journal = NULL;
  struct output out = {0};
  bool validate = true;
  dome_error err = {0};
  int c;
  optind = 1;
  while ((c = getopt_long(argc, argv, "j:s:u:a:Jh", options, NULL)) != -1) {
    switch (c) {
      case 'j':
        sim.journal_dir = optarg;
        break;
      case 'S':
        socket = optarg;
        break;
      case 'T':
        tools_file = optarg;
        break;
      case 's':
      case 'u':
        if (journal_parse_time(optarg, c == 's' ? &sim.since_ns : &sim.until_ns, &err) < 0) {
          fprintf(stderr, "dome rules simulate: --%s: %s\n", c == 's' ? "since" : "until", err.message);
          return DOME_EXIT_FAILURE;
        }
        break;
      case 'a':
        sim.agent = optarg;
        break;
      case 'J':
        out.json = true;
        break;
      case 'N':
        validate = false;
        break;
      case 'h':
        printf(
            "usage: dome rules simulate FILE [--journal DIR] [--control-socket PATH] [--since T] [--until "
            "T]\n"
            "                           [--agent A] [--json] [--no-validate] [--tools FILE]\n"
            "Re-evaluates every authorization request recorded in the journal (--journal; else the running\n"
            "domed's; else $DOME_JOURNAL_DIR; else %s) against the\n"
            "Cedar rules in FILE and lists each request whose decision would change (DecisionDiff: seq, "
            "time,\n"
            "agent, action, resource, old and new decision with their determining policies, new errors),\n"
            "then a summary. Changes nothing. T: RFC 3339 time or date. --json: one document\n"
            "{\"diffs\": [...], \"summary\": {...}}. --no-validate: skip the Dome schema check of FILE, "
            "whose\n"
            "context.input is typed by the running domed's tool registry or the saved copy --tools FILE.\n"
            "Exit 0 with or without diffs; 125 on failure.\n",
            JOURNAL_DEFAULT_DIRECTORY);
        return 0;
      default:
        return DOME_EXIT_FAILURE;
    }
  }
  if (optind != argc - 1) {
    fprintf(stderr, "dome rules simulate: exactly one FILE is required (see --help)\n");
    return DOME_EXIT_FAILURE;
  }
  const char *file = argv[optind];
  /* The journal: --journal, else the running domed's (so `dome rules simulate FILE` beside a domed with
   * its own --journal-dir reads that history), else $DOME_JOURNAL_DIR, else the default. */
  sim.journal_dir = cli_journal_location(socket, sim.journal_dir, &domed_journal);
  if (sim.journal_dir == NULL) sim.journal_dir = JOURNAL_DEFAULT_DIRECTORY;
  simulate_policy *policy = NULL;
  /* candidates are validated with context.input typed by --tools FILE or domed's registry */
  bool schema_failed = false;
  char *schema_text =
      validate ? cli_rules_typed_schema_text("rules simulate", tools_file, socket, false, &schema_failed)
               : NULL;
  if (schema_failed) return DOME_EXIT_FAILURE;
  int loaded = replay_simulate_policy_load_typed(file, validate, schema_text, &policy, &err);
  free(schema_text);
  if (loaded < 0) {
    fprintf(stderr, "dome rules simulate: %s\n", err.message);
    return DOME_EXIT_FAILURE;
  }
  sim.on_diff = on_diff;
  sim.on_error = on_error;
  sim.context = &out;
  if (out.json) printf("{\"diffs\": [");
  simulate_summary summary;
  int rc = replay_simulate_journal(policy, &sim, &summary, &err);
  replay_simulate_policy_free(policy);
  if (rc < 0) {
    if (out.json) printf("]}\n");
    fprintf(stderr, "dome rules simulate: %s\n", err.message);
    return DOME_EXIT_FAILURE;
  }
  json_t *summary_json = replay_simulate_summary_json(&summary);
  if (out.json) {
    char *text = json_dumps(summary_json, JSON_COMPACT | JSON_SORT_KEYS);
    printf("%s],\n \"summary\": %s}\n", out.diffs ? "\n" : "", text ? text : "{}");
    free(text);
  } else {
    printf(
        "%s%llu requests evaluated from %s: %llu unchanged, %llu allow->deny, %llu deny->allow, %llu "
        "errors\n",
        out.diffs ? "\n" : "", (unsigned long long)summary.evaluated, sim.journal_dir,
        (unsigned long long)summary.unchanged, (unsigned long long)summary.allow_to_deny,
        (unsigned long long)summary.deny_to_allow, (unsigned long long)summary.errors);
    if (summary.events_read == 0)
      printf("(journal %s holds no events%s)\n", sim.journal_dir,
             access(sim.journal_dir, F_OK) == 0 ? "" : ": it does not exist yet");
    if (summary.reconstructed)
      printf("(%llu decisions recorded without their full request were rebuilt from their ids)\n",
             (unsigned long long)summary.reconstructed);
  }
  json_decref(summary_json);
  return 0;
}

DOME_COMMAND(rules_simulate, "rules simulate", "re-evaluate recorded requests against candidate rules",
             simulate_main);
