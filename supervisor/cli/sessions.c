/* dome sessions list|show|kill|snapshots — the live sandbox sessions of domed and their snapshots
 * (docs/sessions.md). */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "supervisor/cli/command.h"
#include "supervisor/cli/control_list.h"
#include "supervisor/control/control.h"

static int list_main(int argc, char **argv) {
  int status;
  json_t *result = cli_control_list(argc, argv, "sessions.list", &status);
  if (result == NULL) return status;
  printf("%-38s %-24s %-16s %-10s %-10s %s\n", "SESSION", "AGENT", "CAPABILITY", "IDLE-S", "LIFETIME-S",
         "BUSY");
  size_t i;
  json_t *s;
  json_array_foreach(json_object_get(result, "sessions"), i, s) {
    printf("%-38s %-24s %-16s %-10lld %-10lld %s\n", json_string_value(json_object_get(s, "session_id")),
           json_string_value(json_object_get(s, "agent")),
           json_string_value(json_object_get(s, "capability")),
           (long long)json_integer_value(json_object_get(s, "idle_ms")) / 1000,
           (long long)json_integer_value(json_object_get(s, "lifetime_ms")) / 1000,
           json_is_true(json_object_get(s, "busy")) ? "yes" : "no");
  }
  json_decref(result);
  return 0;
}
DOME_COMMAND(sessions_list, "sessions list", "list the live sandbox sessions", list_main);

/* show and kill: --id ID [--control-socket PATH] */
static int one_session(int argc, char **argv, const char *method, const char *usage) {
  static const struct option options[] = {
      {"id", required_argument, NULL, 'i'},
      {"control-socket", required_argument, NULL, 's'},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0},
  };
  const char *socket = NULL, *id = NULL;
  optind = 1;
  opterr = 0;
  int c;
  while ((c = getopt_long(argc, argv, "", options, NULL)) != -1) {
    if (c == 'i') {
      id = optarg;
    } else if (c == 's') {
      socket = optarg;
    } else if (c == 'h') {
      printf("usage: %s\n", usage);
      return 0;
    } else {
      fprintf(stderr, "dome %s: unknown or incomplete option `%s`\n", argv[0], argv[optind - 1]);
      return DOME_EXIT_FAILURE;
    }
  }
  if (id == NULL || optind < argc) {
    fprintf(stderr, "dome %s: %s\n", argv[0], id ? "unexpected argument" : "--id is required");
    return DOME_EXIT_FAILURE;
  }
  json_t *args = json_pack("{s:s}", "session_id", id), *result = NULL;
  if (cli_control_call(argv[0], socket, method, args, &result) < 0) return DOME_EXIT_FAILURE;
  json_dumpf(result, stdout, JSON_INDENT(2));
  printf("\n");
  json_decref(result);
  return 0;
}

static int show_main(int argc, char **argv) {
  return one_session(argc, argv, "sessions.show", "dome sessions show --id SESSION [--control-socket PATH]");
}
DOME_COMMAND(sessions_show, "sessions show", "show one live sandbox session", show_main);

static int kill_main(int argc, char **argv) {
  return one_session(
      argc, argv, "sessions.kill",
      "dome sessions kill --id SESSION [--control-socket PATH]  (ends it: session.closed reason=operator)");
}
DOME_COMMAND(sessions_kill, "sessions kill", "end a live sandbox session", kill_main);

/* snapshots [--agent A] [--json] [--delete SNAP] [--control-socket PATH] */
static int snapshots_main(int argc, char **argv) {
  static const struct option options[] = {
      {"agent", required_argument, NULL, 'a'}, {"delete", required_argument, NULL, 'd'},
      {"json", no_argument, NULL, 'j'},        {"control-socket", required_argument, NULL, 's'},
      {"help", no_argument, NULL, 'h'},        {NULL, 0, NULL, 0},
  };
  const char *socket = NULL, *agent = NULL, *delete_id = NULL;
  bool json_output = false;
  optind = 1;
  opterr = 0;
  int c;
  while ((c = getopt_long(argc, argv, "", options, NULL)) != -1) {
    if (c == 'a') {
      agent = optarg;
    } else if (c == 'd') {
      delete_id = optarg;
    } else if (c == 'j') {
      json_output = true;
    } else if (c == 's') {
      socket = optarg;
    } else if (c == 'h') {
      printf(
          "usage: dome sessions snapshots [--agent AGENT] [--json] [--delete SNAPSHOT] [--control-socket "
          "PATH]\n"
          "  lists the session snapshots kept in domed's state directory (they survive a restart);\n"
          "  --delete removes one (journalled as session.snapshot_deleted)\n");
      return 0;
    } else {
      fprintf(stderr, "dome %s: unknown or incomplete option `%s`\n", argv[0], argv[optind - 1]);
      return DOME_EXIT_FAILURE;
    }
  }
  if (optind < argc) {
    fprintf(stderr, "dome %s: unexpected argument `%s`\n", argv[0], argv[optind]);
    return DOME_EXIT_FAILURE;
  }
  json_t *args =
      delete_id ? json_pack("{s:s}", "snapshot_id", delete_id) : json_pack("{s:s?}", "agent", agent);
  json_t *result = NULL;
  if (cli_control_call(argv[0], socket, delete_id ? "sessions.snapshot_delete" : "sessions.snapshots", args,
                       &result) < 0)
    return DOME_EXIT_FAILURE;
  if (json_output || delete_id) {
    if (delete_id && !json_output)
      printf("Deleted snapshot %s\n", delete_id);
    else {
      json_dumpf(result, stdout, JSON_INDENT(2));
      printf("\n");
    }
    json_decref(result);
    return 0;
  }
  printf("%-38s %-24s %-38s %-21s %-7s %-10s %s\n", "SNAPSHOT", "AGENT", "FROM-SESSION", "CREATED", "FILES",
         "STORED", "NAME");
  size_t i;
  json_t *s;
  json_array_foreach(json_object_get(result, "snapshots"), i, s) {
    printf(
        "%-38s %-24s %-38s %-21s %-7lld %-10lld %s\n", json_string_value(json_object_get(s, "snapshot_id")),
        json_string_value(json_object_get(s, "agent")), json_string_value(json_object_get(s, "session_id")),
        json_string_value(json_object_get(s, "created_at")),
        (long long)json_integer_value(json_object_get(s, "files")),
        (long long)json_integer_value(json_object_get(s, "stored_bytes")),
        json_string_value(json_object_get(s, "name")) ?: "");
  }
  json_decref(result);
  return 0;
}
DOME_COMMAND(sessions_snapshots, "sessions snapshots", "list or delete session snapshots", snapshots_main);
