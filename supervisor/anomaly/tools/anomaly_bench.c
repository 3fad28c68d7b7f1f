/* anomaly-bench RULES [EVENTS] [AGENTS]: the Sigma engine over a synthetic journal of realistic traffic
 * (per call: authz.decision, exec.start, exec.output, exec.redaction of the environment, exec.end; now
 * and then a refused connect, an OOM end, a denied call), events pre-parsed, one thread. Prints
 * markdown rows for scripts/bench-anomaly: events/s, p99 of one event's evaluation, alerts, and the
 * correlation state with one group per agent. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "supervisor/anomaly/anomaly.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts); /* one core: the thread's CPU time */
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int compare_doubles(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static json_t *event_of(size_t i, size_t agents) {
  char agent[32], exec_id[24];
  size_t call = i / 5;
  snprintf(agent, sizeof agent, "agent-%zu", call % agents);
  snprintf(exec_id, sizeof exec_id, "%016zx", call * 2654435761u);
  switch (i % 5) {
    case 0:
      return call % 97 == 0
                 ? json_pack("{s:s,s:s,s:s,s:s,s:s,s:s}", "type", "authz.decision", "agent", agent, "action",
                             "mcp:call", "decision", "deny", "tool", "database-write", "mcp_tool", "write")
                 : json_pack("{s:s,s:s,s:s,s:s,s:s,s:s,s:s}", "type", "authz.decision", "agent", agent,
                             "action", "mcp:call", "decision", "allow", "tool", "code-sandbox", "mcp_tool",
                             "execute_code", "exec_id", exec_id);
    case 1:
      return json_pack("{s:s,s:s,s:s,s:s,s:s,s:[]}", "type", "exec.start", "agent", agent, "exec_id", exec_id,
                       "language", "python", "code",
                       "import csv, statistics\nrows = list(csv.DictReader(open('sales.csv')))\n"
                       "print(statistics.mean(float(r['amount']) for r in rows))\n",
                       "files");
    case 2:
      return call % 53 == 0
                 ? json_pack("{s:s,s:s,s:s,s:s,s:s,s:s,s:{s:{s:s,s:i,s:s}}}", "type", "exec.denial", "agent",
                             agent, "exec_id", exec_id, "action", "net:connect", "hook", "connect4", "object",
                             "198.51.100.10:80", "request", "context", "dst_ip", "198.51.100.10", "dst_port",
                             80, "protocol", "tcp")
                 : json_pack("{s:s,s:s,s:s,s:s,s:s,s:i}", "type", "exec.output", "agent", agent, "exec_id",
                             exec_id, "stream", "stdout", "data", "150.1\n", "bytes", 6);
    case 3:
      return json_pack("{s:s,s:s,s:s,s:s,s:s,s:i}", "type", "exec.redaction", "agent", agent, "exec_id",
                       exec_id, "detector", "env-assignment", "field", "env_vars", "count", 3);
    default:
      return json_pack("{s:s,s:s,s:s,s:i,s:b,s:b,s:i,s:i}", "type", "exec.end", "agent", agent, "exec_id",
                       exec_id, "exit_code", 0, "oom_killed", call % 211 == 0, "timed_out", 0, "duration_ms",
                       80, "peak_pids", 2);
  }
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: anomaly-bench RULES [EVENTS] [AGENTS]\n");
    return 2;
  }
  size_t count = argc > 2 ? strtoul(argv[2], NULL, 10) : 1000000,
         agents = argc > 3 ? strtoul(argv[3], NULL, 10) : 10000;
  anomaly_rule_set *set = NULL;
  json_t *problems = NULL;
  dome_error err = {0};
  if (anomaly_rule_set_load(argv[1], &set, &problems, &err) < 0) {
    fprintf(stderr, "anomaly-bench: %s\n", err.message);
    return 1;
  }
  json_decref(problems);
  json_t **events = malloc(count * sizeof *events);
  for (size_t i = 0; i < count; i++) events[i] = event_of(i, agents);
  anomaly_engine *engine = NULL;
  if (anomaly_engine_create(set, NULL, &engine, &err) < 0) return 1;
  size_t samples = count < 100000 ? count : 100000;
  double *latency = malloc(samples * sizeof *latency);
  int64_t time_ns = INT64_C(1764633600) * 1000000000;
  double start = now_s();
  for (size_t i = 0; i < count; i++) {
    time_ns += 20000; /* 50,000 events a second of journal time */
    anomaly_engine_process(engine, events[i], i + 1, time_ns, NULL, NULL);
  }
  double elapsed = now_s() - start;
  anomaly_engine_stats stats;
  anomaly_engine_stats_get(engine, &stats);
  for (size_t i = 0; i < samples; i++) { /* one event at a time, timed */
    double t = now_s();
    time_ns += 20000;
    anomaly_engine_process(engine, events[i], count + i + 1, time_ns, NULL, NULL);
    latency[i] = now_s() - t;
  }
  qsort(latency, samples, sizeof *latency, compare_doubles);
  printf(
      "| anomaly: shipped rules (%zu) over %zu synthetic events, one core | %.0f events/s | | | >= 1000000 "
      "|\n",
      anomaly_rule_set_count(set), count, (double)count / elapsed);
  printf("| anomaly: one event's evaluation, p99 | %.2f us | | | <= 20 us |\n",
         latency[samples * 99 / 100] * 1e6);
  printf("| anomaly: correlation state, %llu groups (%zu agents) | %.1f MiB | | | report |\n",
         (unsigned long long)stats.groups, agents, (double)stats.state_bytes / 1048576.0);
  printf("| anomaly: alerts raised (%llu matches) | %llu | | | report |\n", (unsigned long long)stats.matches,
         (unsigned long long)stats.alerts);
  for (size_t i = 0; i < count; i++) json_decref(events[i]);
  free(events);
  free(latency);
  anomaly_engine_free(engine);
  anomaly_rule_set_release(set);
  return 0;
}
