/* anomaly-bench RULES [EVENTS] [AGENTS]: the Sigma engine over a synthetic journal of realistic traffic
 * (per call: authz.decision, exec.start, exec.output, exec.redaction of the environment, exec.end; now
 * and then a refused connect, an OOM end, a denied call), events pre-parsed 1,000 at a time (the timed
 * evaluation sees recent events, as domed and `dome audit anomalies` do). Prints markdown rows for
 * scripts/bench-anomaly, each with its target:
 * - events/s of one core (the thread's CPU time over EVENTS events);
 * - one event's evaluation, p50 and p99 (the wall-clock time of each of 100,000 events: the thread's
 *   CPU clock is a system call here, dearer than an evaluation);
 * - live: a producer paced at 50,000 events/s hands each event to a detection thread the way domed
 *   does (supervisor/domed/anomaly.c, domed_anomaly_offer: the event's text copied into
 * a block of the queue's pool, a bounded queue under a mutex, a signal when the detection thread sleeps). The
 * added latency per journaled event is the producer's wall-clock time of that hand-off, waking the detection
 * thread included (what the journaling call waits for; the evaluation runs on the detection thread). The
 * alert latency is the wall-clock time from the hand-off of an escape-attempt event (one in 1,000, each from
 * its own agent) to the engine's alert callback for it: queue wait and evaluation;
 * - the correlation state with one group per agent and rule. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
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

static double monotonic_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
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

/* ---- live: the hand-off to a detection thread ---- */

#define BLOCK 1000 /* events made, then evaluated, at a time */
#define QUEUE_CAPACITY 65536
#define LIVE_EVENTS 100000
#define LIVE_INTERVAL_NS 20000 /* 50,000 events a second */
#define ATTACK_EVERY 1000

struct queued {
  anomaly_block text; /* anomaly_event_text's, in a block of the queue's pool */
  uint64_t seq;
  int64_t time_ns;
  double queued_s;
};

#define LINGER_NS (2 * 1000 * 1000) /* as supervisor/domed/anomaly.c */
#define DRAIN_BATCH 64

struct live {
  pthread_mutex_t lock;
  pthread_cond_t ready; /* on CLOCK_MONOTONIC */
  struct queued *queue;
  size_t head, count;
  bool stop;
  bool sleeping;
  anomaly_block_pool blocks;
  uint64_t dropped;
  anomaly_engine *engine;
  double *alert_delays;
  size_t alert_count;
  double queued_s; /* of the event being evaluated */
};

static void on_live_alert(const json_t *alert, void *context) {
  struct live *l = context;
  (void)alert;
  if (l->alert_count < LIVE_EVENTS) l->alert_delays[l->alert_count++] = monotonic_s() - l->queued_s;
}

static void *detection_thread(void *argument) {
  struct live *l = argument;
  bool lingering = false;
  pthread_mutex_lock(&l->lock);
  for (;;) {
    while (l->count == 0 && !l->stop) {
      if (lingering) {
        struct timespec until;
        clock_gettime(CLOCK_MONOTONIC, &until);
        until.tv_nsec += LINGER_NS;
        if (until.tv_nsec >= 1000000000L) {
          until.tv_sec++;
          until.tv_nsec -= 1000000000L;
        }
        if (pthread_cond_timedwait(&l->ready, &l->lock, &until) == ETIMEDOUT) lingering = false;
      } else {
        l->sleeping = true;
        pthread_cond_wait(&l->ready, &l->lock);
        l->sleeping = false;
      }
    }
    lingering = true;
    if (l->count == 0) break;
    struct queued batch[DRAIN_BATCH];
    size_t taken = 0;
    while (l->count > 0 && taken < DRAIN_BATCH) {
      batch[taken++] = l->queue[l->head];
      l->head = (l->head + 1) % QUEUE_CAPACITY;
      l->count--;
    }
    pthread_mutex_unlock(&l->lock);
    for (size_t i = 0; i < taken; i++) {
      l->queued_s = batch[i].queued_s;
      json_t *event = json_loadb(batch[i].text.data, batch[i].text.length, 0, NULL);
      if (event) anomaly_engine_process(l->engine, event, batch[i].seq, batch[i].time_ns, on_live_alert, l);
      json_decref(event);
    }
    pthread_mutex_lock(&l->lock);
    for (size_t i = 0; i < taken; i++) anomaly_block_release(&l->blocks, &batch[i].text);
  }
  pthread_mutex_unlock(&l->lock);
  return NULL;
}

/* domed_anomaly_offer's work on the caller's side: copy (outside the lock), enqueue, signal if asleep. */
static void offer(struct live *l, const json_t *event, uint64_t seq, int64_t time_ns, double start) {
  size_t length = 0;
  const char *text = anomaly_event_text(event, &length);
  pthread_mutex_lock(&l->lock);
  anomaly_block block = {0};
  if (text == NULL || l->count == QUEUE_CAPACITY ||
      anomaly_block_fill(&l->blocks, text, length, &block) < 0) {
    l->dropped++;
  } else {
    l->queue[(l->head + l->count) % QUEUE_CAPACITY] = (struct queued){block, seq, time_ns, start};
    l->count++;
  }
  if (l->sleeping || l->count >= QUEUE_CAPACITY / 2) pthread_cond_signal(&l->ready);
  pthread_mutex_unlock(&l->lock);
}

static json_t *attack_of(size_t i) {
  char agent[32];
  snprintf(agent, sizeof agent, "attacker-%zu", i);
  return json_pack(
      "{s:s,s:s,s:s,s:s,s:s}", "type", "exec.start", "agent", agent, "exec_id", "00000000000000aa",
      "language", "python", "code",
      "import ctypes\nlibc = ctypes.CDLL(None)\nlibc.unshare(0x20000000)\nprint(open('/etc/hostname')"
      ".read())\n");
}

/* One markdown row of scripts/bench-anomaly: what, figure, two empty columns, the target. */
static void row(const char *what, const char *figure, const char *target) {
  printf("| anomaly: %s | %s | | | %s |\n", what, figure, target);
}

static int percentile_index(size_t count, unsigned per_mille) {
  return count ? (int)((count - 1) * per_mille / 1000) : 0;
}

/* Returns 0, or 1 when the thread cannot start. */
static int run_live(anomaly_rule_set *set, size_t agents, int64_t *time_ns, uint64_t seq, double *offer_p50,
                    double *offer_p99, double *alert_p50, double *alert_p99, size_t *alerts,
                    uint64_t *dropped) {
  struct live l = {.queue = calloc(QUEUE_CAPACITY, sizeof(struct queued)),
                   .alert_delays = calloc(LIVE_EVENTS, sizeof(double))};
  double *offers = calloc(LIVE_EVENTS, sizeof *offers);
  dome_error err = {0};
  pthread_t thread;
  if (l.queue == NULL || l.alert_delays == NULL || offers == NULL ||
      anomaly_engine_create(set, NULL, &l.engine, &err) < 0)
    return 1;
  pthread_mutex_init(&l.lock, NULL);
  pthread_condattr_t monotonic;
  pthread_condattr_init(&monotonic);
  pthread_condattr_setclock(&monotonic, CLOCK_MONOTONIC);
  pthread_cond_init(&l.ready, &monotonic);
  pthread_condattr_destroy(&monotonic);
  if (pthread_create(&thread, NULL, detection_thread, &l) != 0) return 1;
  struct timespec next;
  clock_gettime(CLOCK_MONOTONIC, &next);
  for (size_t i = 0; i < LIVE_EVENTS; i++) {
    /* paced at the journal's rate (sleeping, so the detection thread keeps its core) */
    clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL);
    next.tv_nsec += LIVE_INTERVAL_NS;
    if (next.tv_nsec >= 1000000000) {
      next.tv_sec++;
      next.tv_nsec -= 1000000000;
    }
    json_t *event = i % ATTACK_EVERY == ATTACK_EVERY / 2 ? attack_of(i) : event_of(i, agents);
    *time_ns += 20000;
    double start = monotonic_s();
    offer(&l, event, seq + i, *time_ns, start);
    offers[i] = monotonic_s() - start;
    json_decref(event);
  }
  pthread_mutex_lock(&l.lock);
  l.stop = true;
  pthread_cond_signal(&l.ready);
  pthread_mutex_unlock(&l.lock);
  pthread_join(thread, NULL);
  qsort(offers, LIVE_EVENTS, sizeof *offers, compare_doubles);
  qsort(l.alert_delays, l.alert_count, sizeof *l.alert_delays, compare_doubles);
  *offer_p50 = offers[percentile_index(LIVE_EVENTS, 500)];
  *offer_p99 = offers[percentile_index(LIVE_EVENTS, 990)];
  *alert_p50 = l.alert_count ? l.alert_delays[percentile_index(l.alert_count, 500)] : 0;
  *alert_p99 = l.alert_count ? l.alert_delays[percentile_index(l.alert_count, 990)] : 0;
  *alerts = l.alert_count;
  *dropped = l.dropped;
  anomaly_engine_free(l.engine);
  anomaly_block_pool_clear(&l.blocks);
  pthread_mutex_destroy(&l.lock);
  pthread_cond_destroy(&l.ready);
  free(l.queue);
  free(l.alert_delays);
  free(offers);
  return 0;
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
  anomaly_engine *engine = NULL;
  if (anomaly_engine_create(set, NULL, &engine, &err) < 0) return 1;
  size_t samples = count < 100000 ? count : 100000;
  double *latency = malloc(samples * sizeof *latency);
  int64_t time_ns = INT64_C(1764633600) * 1000000000;
  /* events are made a block at a time and evaluated while recent, as domed's just journaled event
   * and `dome audit anomalies`' just parsed one are (not a heap of a million built beforehand) */
  json_t *block[BLOCK];
  double elapsed = 0;
  for (size_t i = 0; i < count; i += BLOCK) {
    size_t n = count - i < BLOCK ? count - i : BLOCK;
    for (size_t k = 0; k < n; k++) block[k] = event_of(i + k, agents);
    double start = now_s();
    for (size_t k = 0; k < n; k++) {
      time_ns += 20000; /* 50,000 events a second of journal time */
      anomaly_engine_process(engine, block[k], i + k + 1, time_ns, NULL, NULL);
    }
    elapsed += now_s() - start;
    for (size_t k = 0; k < n; k++) json_decref(block[k]);
  }
  anomaly_engine_stats stats;
  anomaly_engine_stats_get(engine, &stats);
  for (size_t i = 0; i < samples; i++) { /* one event at a time, timed */
    json_t *event = event_of(i, agents);
    time_ns += 20000;
    double t = monotonic_s(); /* the thread CPU clock is a system call (about 2 us on this VM) */
    anomaly_engine_process(engine, event, count + i + 1, time_ns, NULL, NULL);
    latency[i] = monotonic_s() - t;
    json_decref(event);
  }
  qsort(latency, samples, sizeof *latency, compare_doubles);
  double offer_p50 = 0, offer_p99 = 0, alert_p50 = 0, alert_p99 = 0;
  size_t live_alerts = 0;
  uint64_t dropped = 0;
  if (run_live(set, agents, &time_ns, count + samples + 1, &offer_p50, &offer_p99, &alert_p50, &alert_p99,
               &live_alerts, &dropped) != 0) {
    fprintf(stderr, "anomaly-bench: the live run could not start\n");
    return 1;
  }
  double load = 0;
  FILE *loadavg = fopen("/proc/loadavg", "r");
  if (loadavg) {
    if (fscanf(loadavg, "%lf", &load) != 1) load = 0;
    fclose(loadavg);
  }
  char what[256], figure[128];
  snprintf(what, sizeof what, "shipped rules (%zu) over %zu synthetic events, one core (load average %.2f)",
           anomaly_rule_set_count(set), count, load);
  snprintf(figure, sizeof figure, "%.0f events/s", (double)count / elapsed);
  row(what, figure, ">= 1000000 events/s");
  snprintf(figure, sizeof figure, "%.2f / %.2f us", latency[percentile_index(samples, 500)] * 1e6,
           latency[percentile_index(samples, 990)] * 1e6);
  row("one event's evaluation (wall), p50 / p99", figure, "report");
  snprintf(figure, sizeof figure, "%.2f / %.2f us", offer_p50 * 1e6, offer_p99 * 1e6);
  row("live added latency per journaled event (hand-off: copy + queue + wake), p50 / p99", figure,
      "<= 20 us");
  snprintf(what, sizeof what,
           "alert latency after the triggering event's hand-off (%zu alerts, %llu dropped), p50 / p99",
           live_alerts, (unsigned long long)dropped);
  snprintf(figure, sizeof figure, "%.3f / %.3f ms", alert_p50 * 1e3, alert_p99 * 1e3);
  row(what, figure, "<= 10 ms");
  snprintf(what, sizeof what, "correlation state, %llu groups (%zu agents)", (unsigned long long)stats.groups,
           agents);
  snprintf(figure, sizeof figure, "%.1f MiB (%.0f bytes a group)", (double)stats.state_bytes / 1048576.0,
           stats.groups ? (double)stats.state_bytes / (double)stats.groups : 0.0);
  row(what, figure, "report");
  snprintf(what, sizeof what, "alerts raised by the ordinary traffic (%llu matches)",
           (unsigned long long)stats.matches);
  snprintf(figure, sizeof figure, "%llu", (unsigned long long)stats.alerts);
  row(what, figure, "0");
  free(latency);
  anomaly_engine_free(engine);
  anomaly_rule_set_release(set);
  return 0;
}
