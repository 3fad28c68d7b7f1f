/* dome rules apply|list|show — versions of the Cedar rules domed enforces.
 * `dome rules apply FILE --name N --simulate-first [--accept-diffs N] [--journal DIR]` first simulates
 * FILE against domed's journal (supervisor/replay/replay.h replay_simulate_rules_text) and activates it only
 * when the number of changed decisions (allow->deny + deny->allow) is exactly the accepted count (default 0).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "supervisor/cli/command.h"
#include "supervisor/cli/control_list.h"
#include "supervisor/cli/journal_location.h"
#include "supervisor/cli/rules_tools.h"
#include "supervisor/control/control.h"
#include "supervisor/replay/replay.h"

#define SIMULATE_DIFFS_SHOWN 50 /* diffs printed before a refusal; the count covers them all */

static void print_ids(json_t *ids) {
  size_t i;
  json_t *id;
  if (json_array_size(ids) == 0) fputs("no policy", stdout);
  json_array_foreach(ids, i, id) printf("%s%s", i ? "," : "", json_string_value(id));
}

static const char *text_of(json_t *object, const char *key) {
  const char *value = json_string_value(json_object_get(object, key));
  return value ? value : "?";
}

/* Simulate `text` against the journal; print the first diffs and the summary. Returns the number of
 * changed decisions (>= 0), or -1 with the error printed (bad rules: file:line:col; damaged journal). */
static long long simulate_first(const char *text, size_t length, const char *file, const char *journal_dir,
                                const char *socket) {
  json_t *report = NULL;
  dome_error err = {0};
  /* validated as domed will validate it: context.input typed by domed's registry */
  bool failed = false;
  char *schema_text = cli_rules_typed_schema_text("rules apply", NULL, socket, false, &failed);
  int rc = replay_simulate_rules_text_typed(text, length, file, journal_dir, schema_text,
                                            SIMULATE_DIFFS_SHOWN, &report, &err);
  free(schema_text);
  if (rc < 0) {
    fprintf(stderr, "dome rules apply: --simulate-first: %s\n", err.message);
    return -1;
  }
  json_t *summary = json_object_get(report, "summary");
  long long to_deny = json_integer_value(json_object_get(summary, "allow_to_deny"));
  long long to_allow = json_integer_value(json_object_get(summary, "deny_to_allow"));
  size_t i;
  json_t *diff;
  json_array_foreach(json_object_get(report, "diffs"), i, diff) {
    json_t *old = json_object_get(diff, "old"), *new = json_object_get(diff, "new");
    printf("#%lld %s agent=%s %s %s: %s -> %s (was ",
           (long long)json_integer_value(json_object_get(diff, "seq")), text_of(diff, "type"),
           text_of(diff, "agent"), text_of(diff, "action"), text_of(diff, "resource"),
           text_of(old, "decision"), text_of(new, "decision"));
    print_ids(json_object_get(old, "determining"));
    printf("; now ");
    print_ids(json_object_get(new, "determining"));
    printf(")\n");
  }
  if (json_is_true(json_object_get(report, "diffs_truncated")))
    printf("... (first %d diffs shown)\n", SIMULATE_DIFFS_SHOWN);
  printf(
      "Simulated %s against %lld recorded requests of %s: %lld unchanged, %lld allow->deny, %lld "
      "deny->allow, %lld errors\n",
      file, (long long)json_integer_value(json_object_get(summary, "evaluated")),
      journal_dir ? journal_dir : "the default journal",
      (long long)json_integer_value(json_object_get(summary, "unchanged")), to_deny, to_allow,
      (long long)json_integer_value(json_object_get(summary, "errors")));
  json_decref(report);
  return to_deny + to_allow;
}

static int apply_main(int argc, char **argv) {
  const char *socket = NULL, *name = NULL, *file = NULL, *journal_flag = NULL;
  bool simulate = false, shadow = false;
  long long accepted = 0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--help") == 0) {
      printf(
          "usage: dome rules apply FILE --name NAME [--simulate-first [--accept-diffs N] [--journal DIR]]\n"
          "                        [--shadow] [--control-socket PATH]\n"
          "Validates FILE against the Dome schema, stores it as a new version and activates it atomically:\n"
          "running executions keep their version, new calls get the new one.\n"
          "--simulate-first: first re-evaluate the decisions recorded in domed's journal (or DIR) under "
          "FILE\n"
          "and print what changes; refuse (exit 125, nothing applied) unless the number of changed\n"
          "decisions is exactly N (default 0).\n"
          "--shadow: store FILE and evaluate it beside the active version on every live request without\n"
          "enforcing it; each request it decides otherwise is journalled (authz.shadow). See `dome rules\n"
          "shadow` and `dome rules promote NAME`.\n");
      return 0;
    }
    if (strcmp(argv[i], "--control-socket") == 0 && i + 1 < argc)
      socket = argv[++i];
    else if (strcmp(argv[i], "--name") == 0 && i + 1 < argc)
      name = argv[++i];
    else if (strcmp(argv[i], "--simulate-first") == 0)
      simulate = true;
    else if (strcmp(argv[i], "--shadow") == 0)
      shadow = true;
    else if (strcmp(argv[i], "--journal") == 0 && i + 1 < argc)
      journal_flag = argv[++i];
    else if (strcmp(argv[i], "--accept-diffs") == 0 && i + 1 < argc) {
      char *end;
      errno = 0;
      accepted = strtoll(argv[++i], &end, 10);
      if (errno || *end || end == argv[i] || accepted < 0) {
        fprintf(stderr, "dome rules apply: --accept-diffs: expected a count >= 0, got `%s`\n", argv[i]);
        return DOME_EXIT_FAILURE;
      }
      simulate = true;
    } else if (argv[i][0] != '-' && file == NULL)
      file = argv[i];
    else {
      fprintf(stderr, "dome rules apply: unexpected argument `%s`\n", argv[i]);
      return DOME_EXIT_FAILURE;
    }
  }
  if (file == NULL || name == NULL) {
    fprintf(stderr, "dome rules apply: FILE and --name are required\n");
    return DOME_EXIT_FAILURE;
  }
  FILE *input = fopen(file, "re");
  if (input == NULL) {
    fprintf(stderr, "dome rules apply: `%s`: %s\n", file, strerror(errno));
    return DOME_EXIT_FAILURE;
  }
  char *text = NULL;
  size_t size = 0;
  FILE *memory = open_memstream(&text, &size);
  char buffer[8192];
  size_t n, total = 0;
  while ((n = fread(buffer, 1, sizeof buffer, input)) > 0) {
    fwrite(buffer, 1, n, memory);
    total += n;
  }
  fclose(input);
  fclose(memory);
  if (total > CONTROL_MAX_REQUEST / 2 || strlen(text) != total) {
    fprintf(stderr, "dome rules apply: `%s`: too large or contains NUL bytes\n", file);
    free(text);
    return DOME_EXIT_FAILURE;
  }
  if (simulate) {
    char *owned = NULL;
    const char *journal_dir = cli_journal_location(socket, journal_flag, &owned);
    long long diffs = simulate_first(text, total, file, journal_dir, socket);
    free(owned);
    if (diffs < 0 || diffs != accepted) {
      if (diffs >= 0)
        fprintf(stderr, "dome rules apply: %lld diffs: pass --accept-diffs %lld to apply (nothing applied)\n",
                diffs, diffs);
      free(text);
      return DOME_EXIT_FAILURE;
    }
  }
  json_t *args = json_pack("{s:s,s:s,s:s,s:b}", "name", name, "text", text, "file", file, "shadow", shadow),
         *result = NULL;
  free(text);
  if (cli_control_call("rules apply", socket, "rules.apply", args, &result) < 0) return DOME_EXIT_FAILURE;
  if (shadow)
    printf("Applied %s as version %lld (shadow: evaluated beside the active version, not enforced)\n", name,
           (long long)json_integer_value(json_object_get(result, "version")));
  else
    printf("Applied %s as version %lld (active)\n", name,
           (long long)json_integer_value(json_object_get(result, "version")));
  /* the live sandbox sessions the version reached (docs/sessions.md) */
  size_t i;
  json_t *session;
  json_array_foreach(json_object_get(result, "sessions"), i, session) {
    const char *reason = json_string_value(json_object_get(session, "reason"));
    printf("Session %s: %s%s%s%s\n", json_string_value(json_object_get(session, "session_id")),
           json_string_value(json_object_get(session, "outcome")), reason ? " (" : "", reason ? reason : "",
           reason ? ")" : "");
  }
  json_decref(result);
  return 0;
}
DOME_COMMAND(rules_apply, "rules apply", "validate, store and activate Cedar rules as a new version",
             apply_main);

static int list_main(int argc, char **argv) {
  int status;
  json_t *result = cli_control_list(argc, argv, "rules.list", &status);
  if (result == NULL) return status;
  printf("%-8s %-6s %-32s %s\n", "VERSION", "ACTIVE", "NAME", "SHA256");
  size_t i;
  json_t *v;
  json_array_foreach(result, i, v)
      printf("%-8lld %-6s %-32s %s\n", (long long)json_integer_value(json_object_get(v, "version")),
             json_is_true(json_object_get(v, "active")) ? "*" : "",
             json_string_value(json_object_get(v, "name")), json_string_value(json_object_get(v, "sha256")));
  json_decref(result);
  return 0;
}
DOME_COMMAND(rules_list, "rules list", "list the stored versions of the rules", list_main);

static int show_main(int argc, char **argv) {
  const char *socket = NULL;
  long version = 0;
  for (int i = 1; i < argc; i++) {
    char *end;
    if (strcmp(argv[i], "--control-socket") == 0 && i + 1 < argc)
      socket = argv[++i];
    else if (strcmp(argv[i], "--version") == 0 && i + 1 < argc) {
      version = strtol(argv[++i], &end, 10);
      if (*end || version < 1) {
        fprintf(stderr, "dome rules show: --version: expected a positive integer\n");
        return DOME_EXIT_FAILURE;
      }
    } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      printf(
          "usage: dome rules show [--control-socket PATH] [--version N]\n"
          "Prints a stored version of the rules (default: the active one).\n");
      return 0;
    } else {
      fprintf(stderr, "dome rules show: unexpected argument `%s`\n", argv[i]);
      return DOME_EXIT_FAILURE;
    }
  }
  json_t *args = json_pack("{s:i}", "version", (int)version), *result = NULL;
  if (cli_control_call("rules show", socket, "rules.show", args, &result) < 0) return DOME_EXIT_FAILURE;
  fputs(json_string_value(json_object_get(result, "text")), stdout);
  json_decref(result);
  return 0;
}
DOME_COMMAND(rules_show, "rules show", "print a version of the rules (default: the active one)", show_main);

static void print_table(const char *title, json_t *table) {
  if (json_object_size(table) == 0) return;
  printf("%-40s %13s %13s\n", title, "ALLOW->DENY", "DENY->ALLOW");
  const char *key;
  json_t *row;
  json_object_foreach(table, key, row) printf(
      "%-40s %13lld %13lld\n", key, (long long)json_integer_value(json_object_get(row, "allow_to_deny")),
      (long long)json_integer_value(json_object_get(row, "deny_to_allow")));
}

static int shadow_main(int argc, char **argv) {
  const char *socket = NULL;
  bool json = false, stop = false;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      printf(
          "usage: dome rules shadow [--json] [--stop] [--control-socket PATH]\n"
          "Summarizes the shadow rules (dome rules apply FILE --name N --shadow) since they were applied:\n"
          "the requests evaluated, those the shadow decides otherwise (allow->deny, deny->allow) by tool,\n"
          "agent and policy, and the last flips in the DecisionDiff shape of `dome rules simulate`\n"
          "(seq of their authz.shadow event, agent, action, resource, old = active, new = shadow).\n"
          "--stop: end the shadow (journalled, with this summary). Exit 125 when there is none.\n");
      return 0;
    }
    if (strcmp(argv[i], "--control-socket") == 0 && i + 1 < argc)
      socket = argv[++i];
    else if (strcmp(argv[i], "--json") == 0)
      json = true;
    else if (strcmp(argv[i], "--stop") == 0)
      stop = true;
    else {
      fprintf(stderr, "dome rules shadow: unexpected argument `%s`\n", argv[i]);
      return DOME_EXIT_FAILURE;
    }
  }
  json_t *args = json_pack("{s:b}", "stop", stop), *report = NULL;
  if (cli_control_call("rules shadow", socket, "rules.shadow", args, &report) < 0) return DOME_EXIT_FAILURE;
  if (json) {
    char *text = json_dumps(report, JSON_INDENT(2) | JSON_SORT_KEYS);
    if (text) printf("%s\n", text);
    free(text);
    json_decref(report);
    return 0;
  }
  json_t *shadow = json_object_get(report, "shadow"), *summary = json_object_get(report, "summary");
  size_t i;
  json_t *diff;
  json_array_foreach(json_object_get(report, "diffs"), i, diff) {
    json_t *old = json_object_get(diff, "old"), *new = json_object_get(diff, "new");
    printf("#%lld agent=%s %s %s %s: %s -> %s (active ",
           (long long)json_integer_value(json_object_get(diff, "seq")), text_of(diff, "agent"),
           text_of(diff, "action"), text_of(diff, "resource"), text_of(diff, "mcp_tool"),
           text_of(old, "decision"), text_of(new, "decision"));
    print_ids(json_object_get(old, "determining"));
    printf("; shadow ");
    print_ids(json_object_get(new, "determining"));
    printf(")\n");
  }
  print_table("TOOL", json_object_get(report, "by_tool"));
  print_table("AGENT", json_object_get(report, "by_agent"));
  print_table("POLICY", json_object_get(report, "by_policy"));
  printf(
      "Shadow %s (version %lld)%s: %lld requests evaluated: %lld unchanged, %lld allow->deny, %lld "
      "deny->allow, %lld "
      "errors\n",
      text_of(shadow, "name"), (long long)json_integer_value(json_object_get(shadow, "version")),
      stop ? " stopped" : "", (long long)json_integer_value(json_object_get(summary, "evaluated")),
      (long long)json_integer_value(json_object_get(summary, "unchanged")),
      (long long)json_integer_value(json_object_get(summary, "allow_to_deny")),
      (long long)json_integer_value(json_object_get(summary, "deny_to_allow")),
      (long long)json_integer_value(json_object_get(summary, "errors")));
  json_decref(report);
  return 0;
}
DOME_COMMAND(rules_shadow, "rules shadow", "summarize (or stop) the shadow rules evaluated on live traffic",
             shadow_main);

static int promote_main(int argc, char **argv) {
  const char *socket = NULL, *name = NULL;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      printf(
          "usage: dome rules promote NAME [--control-socket PATH]\n"
          "Makes the shadow rules NAME the active version in one switch (journalled as rules.promoted with\n"
          "the shadow's summary); the shadow ends.\n");
      return 0;
    }
    if (strcmp(argv[i], "--control-socket") == 0 && i + 1 < argc)
      socket = argv[++i];
    else if (argv[i][0] != '-' && name == NULL)
      name = argv[i];
    else {
      fprintf(stderr, "dome rules promote: unexpected argument `%s`\n", argv[i]);
      return DOME_EXIT_FAILURE;
    }
  }
  if (name == NULL) {
    fprintf(stderr, "dome rules promote: NAME is required (see --help)\n");
    return DOME_EXIT_FAILURE;
  }
  json_t *args = json_pack("{s:s}", "name", name), *result = NULL;
  if (cli_control_call("rules promote", socket, "rules.promote", args, &result) < 0) return DOME_EXIT_FAILURE;
  printf("Promoted %s: version %lld is active (was %lld)\n", name,
         (long long)json_integer_value(json_object_get(result, "version")),
         (long long)json_integer_value(json_object_get(result, "previous_version")));
  json_decref(result);
  return 0;
}
DOME_COMMAND(rules_promote, "rules promote", "make the shadow rules the active version", promote_main);
