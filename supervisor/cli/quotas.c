/* dome quotas set|list — resource limits per capability, via domed. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "supervisor/cli/command.h"
#include "supervisor/cli/control_list.h"
#include "supervisor/common/units.h"
#include "supervisor/control/control.h"

static int set_main(int argc, char **argv) {
  static const struct option options[] = {
      {"capability", required_argument, NULL, 'c'},
      {"memory", required_argument, NULL, 'm'},
      {"cpus", required_argument, NULL, 'C'},
      {"pids", required_argument, NULL, 'p'},
      {"timeout", required_argument, NULL, 't'},
      {"workspace-size", required_argument, NULL, 'w'},
      {"output-limit", required_argument, NULL, 'o'},
      {"egress", required_argument, NULL, 'e'},
      {"egress-bytes", required_argument, NULL, 'b'},
      {"blob-bytes", required_argument, NULL, 'B'},
      {"mcp-output-limit", required_argument, NULL, 'M'},
      {"concurrency", required_argument, NULL, 'N'},
      {"task-ttl", required_argument, NULL, 'T'},
      {"tasks", required_argument, NULL, 'K'},
      {"sessions", required_argument, NULL, 'S'},
      {"session-idle", required_argument, NULL, 'I'},
      {"session-lifetime", required_argument, NULL, 'L'},
      {"session-memory", required_argument, NULL, 'Y'},
      {"session-cpus", required_argument, NULL, 'U'},
      {"session-pids", required_argument, NULL, 'P'},
      {"snapshots", required_argument, NULL, 'n'},
      {"snapshot-bytes", required_argument, NULL, 'z'},
      {"control-socket", required_argument, NULL, 's'},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0},
  };
  const char *socket = NULL, *capability = NULL;
  json_t *fields = json_object();
  optind = 1;
  opterr = 0;
  int c;
  while ((c = getopt_long(argc, argv, "", options, NULL)) != -1) {
    const char *key = NULL;
    switch (c) {
      case 'c':
        capability = optarg;
        break;
      case 's':
        socket = optarg;
        break;
      case 'm':
        key = "memory";
        break;
      case 'C':
        key = "cpus";
        break;
      case 'p':
        key = "pids";
        break;
      case 't':
        key = "timeout";
        break;
      case 'w':
        key = "workspace_size";
        break;
      case 'o':
        key = "output_limit";
        break;
      case 'e':
        key = "egress";
        break;
      case 'b':
        key = "egress_bytes";
        break;
      case 'B':
        key = "blob_bytes";
        break;
      case 'M':
        key = "mcp_output_limit";
        break;
      case 'N':
        key = "concurrency";
        break;
      case 'T':
        key = "task_ttl";
        break;
      case 'K':
        key = "tasks";
        break;
      case 'S':
        key = "sessions";
        break;
      case 'I':
        key = "session_idle";
        break;
      case 'L':
        key = "session_lifetime";
        break;
      case 'Y':
        key = "session_memory";
        break;
      case 'U':
        key = "session_cpus";
        break;
      case 'P':
        key = "session_pids";
        break;
      case 'n':
        key = "snapshots";
        break;
      case 'z':
        key = "snapshot_bytes";
        break;
      case 'h':
        printf(
            "usage: dome quotas set --capability C [--memory SIZE] [--cpus N] [--pids N] [--timeout SEC]\n"
            "                      [--workspace-size SIZE] [--output-limit SIZE] [--egress allow|deny]\n"
            "                      [--egress-bytes SIZE] [--blob-bytes SIZE] [--mcp-output-limit SIZE]\n"
            "                      [--concurrency N] [--task-ttl DURATION] [--tasks N]\n"
            "                      [--sessions N] [--session-idle SEC] [--session-lifetime SEC]\n"
            "                      [--session-memory SIZE] [--session-cpus N] [--session-pids N]\n"
            "                      [--snapshots N] [--snapshot-bytes SIZE]\n"
            "  --egress-bytes: byte quota of each jail's egress path (both directions) for this capability;\n"
            "                  0 (list: config): domed's egress_quota applies\n"
            "  --blob-bytes:   bytes this capability's large inputs may take in the journal's blob store\n"
            "                  (default 256M); beyond it inputs are journalled by digest only\n"
            "  --mcp-output-limit: bytes of each output stream an agent reads in the MCP result (the rest\n"
            "                  is replaced by a marker); 0 (list: config): domed's mcp_output_limit "
            "applies\n"
            "  --concurrency:  executions one agent runs at once for this capability (0: up to max_jails);\n"
            "                  its further calls wait in its own queue, served round-robin with other "
            "agents\n"
            "  --task-ttl:     longest TTL of an MCP task (its result is kept that long; 0: domed's "
            "task_ttl_max_s)\n"
            "  --tasks:        MCP tasks one agent holds until their TTL passes (0: domed's "
            "max_tasks_per_agent)\n"
            "  --sessions:     sandbox sessions (create_session) one agent holds at once (default 0: off)\n"
            "  --session-idle, --session-lifetime: a session unused this long, or this long after its\n"
            "                  creation, is closed (defaults 10m and 1h; docs/sessions.md)\n"
            "  --session-memory, --session-cpus, --session-pids: the whole cgroup of one session (its\n"
            "                  kernel and every process it starts); 0 (default): --memory, --cpus, --pids\n"
            "  --snapshots, --snapshot-bytes: session snapshots one agent keeps, and their bytes as stored\n"
            "                  (defaults 16 and 256M; --snapshots 0 refuses snapshot_session)\n");
        json_decref(fields);
        return 0;
      default:
        fprintf(stderr, "dome quotas set: unknown or incomplete option `%s`\n", argv[optind - 1]);
        json_decref(fields);
        return DOME_EXIT_FAILURE;
    }
    if (key) json_object_set_new(fields, key, json_string(optarg));
  }
  if (capability == NULL || optind < argc) {
    fprintf(stderr, "dome quotas set: %s\n", capability ? "unexpected argument" : "--capability is required");
    json_decref(fields);
    return DOME_EXIT_FAILURE;
  }
  json_object_set_new(fields, "capability", json_string(capability));
  json_t *result = NULL;
  if (cli_control_call("quotas set", socket, "quotas.set", fields, &result) < 0) return DOME_EXIT_FAILURE;
  printf("Quota of capability %s: ", capability);
  json_dumpf(result, stdout, JSON_COMPACT);
  printf("\n");
  json_decref(result);
  return 0;
}
DOME_COMMAND(quotas_set, "quotas set", "set the jail limits of a capability", set_main);

static int list_main(int argc, char **argv) {
  int status;
  json_t *result = cli_control_list(argc, argv, "quotas.list", &status);
  if (result == NULL) return status;
  printf("%-24s %-8s %-6s %-6s %-9s %-10s %-8s %-10s %-7s %-12s %s\n", "CAPABILITY", "MEMORY", "CPUS", "PIDS",
         "TIMEOUT", "WORKSPACE", "OUTPUT", "MCP-OUTPUT", "EGRESS", "EGRESS-BYTES", "CONCURRENCY");
  const char *name;
  json_t *q;
  json_object_foreach(result, name, q) {
    char memory[32], workspace[32], output[32], egress_bytes[32], mcp_output[32];
    uint64_t egress_quota = (uint64_t)json_integer_value(json_object_get(q, "egress_bytes"));
    uint64_t mcp_output_quota = (uint64_t)json_integer_value(json_object_get(q, "mcp_output_bytes"));
    long long concurrency = (long long)json_integer_value(json_object_get(q, "concurrency"));
    char concurrency_text[24];
    snprintf(concurrency_text, sizeof concurrency_text, "%lld", concurrency);
    printf("%-24s %-8s %-6g %-6lld %-9.3g %-10s %-8s %-10s %-7s %-12s %s\n", name,
           dome_format_size((uint64_t)json_integer_value(json_object_get(q, "memory_bytes")), memory,
                            sizeof memory),
           json_number_value(json_object_get(q, "cpus")),
           (long long)json_integer_value(json_object_get(q, "pids")),
           json_integer_value(json_object_get(q, "timeout_ms")) / 1000.0,
           dome_format_size((uint64_t)json_integer_value(json_object_get(q, "workspace_bytes")), workspace,
                            sizeof workspace),
           dome_format_size((uint64_t)json_integer_value(json_object_get(q, "output_bytes")), output,
                            sizeof output),
           mcp_output_quota ? dome_format_size(mcp_output_quota, mcp_output, sizeof mcp_output) : "config",
           json_is_true(json_object_get(q, "egress")) ? "allow" : "deny",
           egress_quota ? dome_format_size(egress_quota, egress_bytes, sizeof egress_bytes) : "config",
           concurrency ? concurrency_text : "max_jails");
  }
  json_decref(result);
  return 0;
}
DOME_COMMAND(quotas_list, "quotas list", "list the jail limits per capability", list_main);
