/* journal-load — generate audit-journal load for the fault tests and scripts/bench-journal.
 *
 *   journal-load DIR [--events N] [--threads T] [--sync every|end|none] [--seconds S]
 *                    [--synced-log FILE] [--segment-bytes B] [--frame-bytes B] [--checkpoint-every N]
 *   journal-load --hash-speed [LINE_BYTES]
 *
 * Appends realistic execution events (authz.decision, exec.start, exec.output, exec.end) from T
 * threads. With --sync every, each event is journal_sync'ed before the next; each synced seq is
 * written to --synced-log as "SEQ LOAD_ID" (one line, O_APPEND; events then carry `load_id`) so a test that
 * kill -9s this process knows what was acknowledged. Prints one JSON line of figures at the end: events,
 * seconds, events_per_s, sync_p50_us, sync_p99_us, json_bytes. Exit 0, or 1 with the journal's error on
 * stderr.
 *
 * --hash-speed: one thread's SHA-256 speed through libsodium on this CPU, the ceiling of verification:
 * bulk MB/s, and Merkle leaf+node hashes per second for lines of LINE_BYTES (default 264, the bench's
 * average), as JSON: sha256_mb_s, events_per_s, json_mb_s. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "supervisor/audit/journal.h"
#include "supervisor/audit/journal_internal.h"

static journal *the_journal;
static uint64_t events_per_thread = 1000;
static double seconds_limit = 0;
static int sync_mode = 0; /* 0 every, 1 end, 2 none */
static int synced_log = -1;
static volatile int failed;

typedef struct worker {
  int index;
  uint64_t done;
  uint64_t bytes;
  uint32_t *latency_us;
  size_t latency_count, latency_capacity;
} worker;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static const char *stdout_lines[] = {
    "Epoch 3/10 - loss: 0.4172 - accuracy: 0.8731 - val_loss: 0.4410",
    "Reading /workspace/data/customers.csv (12840 rows, 14 columns)",
    "Traceback (most recent call last):\n  File \"/workspace/main.py\", line 42, in <module>",
    "wrote /workspace/out/report.json (4.2 KiB)",
    "summary: mean=41.27 median=39.00 p95=88.10 n=12840",
};

static json_t *make_event(unsigned *rng, uint64_t n, int thread) {
  char exec_id[48], agent[40];
  snprintf(exec_id, sizeof exec_id, "exec-%04d-%08" PRIu64, thread, n / 6);
  snprintf(agent, sizeof agent, "code-exec-agent-%u", (unsigned)(n / 6) % 7);
  json_t *e;
  switch (n % 6) {
    case 0:
      e = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:[s], s:s, s:{s:s, s:s}}", "type", "authz.decision",
                    "agent", agent, "exec_id", exec_id, "tool", "code-sandbox", "policy_version", "rules-v42",
                    "decision", "allow", "determining_policies", "baseline-permit-exec", "action",
                    "Dome::Action::\"mcp:call\"", "context", "tool", "execute_code", "language", "python3");
      break;
    case 1:
      e = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:I, s:I, s:s, s:i}", "type", "exec.start", "agent",
                    agent, "exec_id", exec_id, "tool", "code-sandbox", "policy_version", "rules-v42",
                    "language", "python3", "memory_bytes", (json_int_t)268435456, "pids", (json_int_t)64,
                    "image", "host-ro", "code_bytes", (int)(rand_r(rng) % 4000));
      break;
    case 2:
    case 3:
      e = json_pack("{s:s, s:s, s:s, s:s, s:s, s:i}", "type", "exec.output", "agent", agent, "exec_id",
                    exec_id, "stream", n % 6 == 2 ? "stdout" : "stderr", "text",
                    stdout_lines[rand_r(rng) % 5], "offset", (int)(rand_r(rng) % 100000));
      break;
    case 4:
      e = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:i}", "type", "exec.redaction", "agent", agent,
                    "exec_id", exec_id, "field", "stdout", "class", "PII", "rule", "email-address", "count",
                    (int)(rand_r(rng) % 5));
      break;
    default:
      e = json_pack("{s:s, s:s, s:s, s:s, s:i, s:n, s:b, s:b, s:i, s:i, s:I}", "type", "exec.end", "agent",
                    agent, "exec_id", exec_id, "tool", "code-sandbox", "exit_code", 0, "signal", "timed_out",
                    0, "oom_killed", 0, "duration_ms", (int)(rand_r(rng) % 3000), "cpu_ms",
                    (int)(rand_r(rng) % 2500), "peak_memory_bytes", (json_int_t)(rand_r(rng) % 200000000));
  }
  return e;
}

static void *work(void *argument) {
  worker *w = argument;
  unsigned rng = (unsigned)w->index * 7919u + 1;
  double start = now_s();
  uint64_t last = 0;
  for (uint64_t i = 0; !failed; i++) {
    if (seconds_limit > 0 ? now_s() - start >= seconds_limit : i >= events_per_thread) break;
    json_t *event = make_event(&rng, i, w->index);
    char load_id[64] = "";
    if (synced_log >= 0) {
      snprintf(load_id, sizeof load_id, "%d-%d-%" PRIu64, (int)getpid(), w->index, i);
      json_object_set_new(event, "load_id", json_string(load_id));
    }
    dome_error err;
    uint64_t seq;
    int r = journal_append(the_journal, event, &seq, &err);
    json_decref(event);
    if (r == 0 && sync_mode == 0) {
      double t0 = now_s();
      r = journal_sync(the_journal, seq, &err);
      if (r == 0 && w->latency_count < w->latency_capacity)
        w->latency_us[w->latency_count++] = (uint32_t)((now_s() - t0) * 1e6);
      if (r == 0 && synced_log >= 0) {
        char line[96];
        int n = snprintf(line, sizeof line, "%" PRIu64 " %s\n", seq, load_id);
        if (write(synced_log, line, (size_t)n) < 0) failed = 1;
      }
    }
    if (r < 0) {
      fprintf(stderr, "journal-load: %s\n", err.message);
      failed = 1;
      break;
    }
    last = seq;
    w->done++;
  }
  if (sync_mode == 1 && last && !failed) {
    dome_error err;
    if (journal_sync(the_journal, last, &err) < 0) {
      fprintf(stderr, "journal-load: %s\n", err.message);
      failed = 1;
    }
  }
  return NULL;
}

static int compare_u32(const void *a, const void *b) {
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  return x < y ? -1 : x > y;
}

/* Hash for ~0.3 s of CPU each: bulk SHA-256, then one leaf and one node hash per line (a Merkle tree
 * does one node hash per leaf on average). */
static double cpu_s(void) { /* this thread's CPU time: the machine may be shared */
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int hash_speed(size_t line_bytes) {
  if (sodium_init() < 0 || line_bytes == 0 || line_bytes > (1u << 20)) return 1;
  static uint8_t bulk[1 << 20];
  memset(bulk, 'x', sizeof bulk);
  uint8_t out[JOURNAL_HASH_BYTES];
  double start = cpu_s();
  size_t rounds = 0;
  while (cpu_s() - start < 0.3) crypto_hash_sha256(out, bulk, sizeof bulk), rounds++;
  double bulk_mb_s = (double)rounds * sizeof bulk / (cpu_s() - start) / 1e6;
  start = cpu_s();
  size_t lines = 0;
  while (cpu_s() - start < 0.3)
    for (int i = 0; i < 1000; i++, lines++) {
      journal_merkle_leaf_hash(bulk, line_bytes, out);
      journal_merkle_node_hash(out, out, out);
    }
  double events_per_s = (double)lines / (cpu_s() - start);
  printf("{\"sha256_mb_s\":%.0f,\"line_bytes\":%zu,\"events_per_s\":%.0f,\"json_mb_s\":%.0f}\n", bulk_mb_s,
         line_bytes, events_per_s, events_per_s * (double)(line_bytes + 1) / 1e6);
  return 0;
}

int main(int argc, char **argv) {
  if (argc >= 2 && strcmp(argv[1], "--hash-speed") == 0)
    return hash_speed(argc >= 3 ? strtoull(argv[2], NULL, 10) : 264);
  if (argc < 2) {
    fprintf(stderr,
            "usage: journal-load DIR [--events N] [--threads T] [--sync every|end|none] [--seconds S]\n"
            "       [--synced-log FILE] [--segment-bytes B] [--frame-bytes B] [--checkpoint-every N]\n"
            "       journal-load --hash-speed [LINE_BYTES]\n");
    return 2;
  }
  journal_options options;
  journal_options_init(&options, argv[1]);
  int threads = 4;
  for (int i = 2; i < argc; i++) {
    const char *value = i + 1 < argc ? argv[i + 1] : "";
    if (strcmp(argv[i], "--events") == 0)
      events_per_thread = strtoull(value, NULL, 10), i++;
    else if (strcmp(argv[i], "--threads") == 0)
      threads = atoi(value), i++;
    else if (strcmp(argv[i], "--seconds") == 0)
      seconds_limit = atof(value), i++;
    else if (strcmp(argv[i], "--sync") == 0)
      sync_mode = strcmp(value, "every") == 0 ? 0 : strcmp(value, "end") == 0 ? 1 : 2, i++;
    else if (strcmp(argv[i], "--synced-log") == 0)
      synced_log = open(value, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644), i++;
    else if (strcmp(argv[i], "--segment-bytes") == 0)
      options.segment_bytes = strtoull(value, NULL, 10), i++;
    else if (strcmp(argv[i], "--frame-bytes") == 0)
      options.frame_bytes = strtoull(value, NULL, 10), i++;
    else if (strcmp(argv[i], "--checkpoint-every") == 0)
      options.checkpoint_every_events = strtoull(value, NULL, 10), i++;
    else {
      fprintf(stderr, "journal-load: unknown option `%s`\n", argv[i]);
      return 2;
    }
  }
  if (threads < 1 || threads > 64) threads = 4;
  dome_error err;
  if (journal_open(&options, &the_journal, &err) < 0) {
    fprintf(stderr, "journal-load: %s\n", err.message);
    return 1;
  }
  worker workers[64];
  pthread_t ids[64];
  double start = now_s();
  for (int i = 0; i < threads; i++) {
    workers[i] = (worker){.index = i, .latency_capacity = 1 << 20};
    workers[i].latency_us = malloc(workers[i].latency_capacity * sizeof(uint32_t));
    pthread_create(&ids[i], NULL, work, &workers[i]);
  }
  uint64_t total = 0, samples = 0;
  for (int i = 0; i < threads; i++) {
    pthread_join(ids[i], NULL);
    total += workers[i].done;
    samples += workers[i].latency_count;
  }
  double elapsed = now_s() - start;
  uint32_t *all = malloc((samples ? samples : 1) * sizeof *all);
  size_t k = 0;
  for (int i = 0; i < threads; i++) {
    memcpy(all + k, workers[i].latency_us, workers[i].latency_count * sizeof *all);
    k += workers[i].latency_count;
    free(workers[i].latency_us);
  }
  qsort(all, samples, sizeof *all, compare_u32);
  int r = journal_close(the_journal, &err);
  if (r < 0) fprintf(stderr, "journal-load: close: %s\n", err.message);
  printf("{\"events\":%" PRIu64
         ",\"seconds\":%.3f,\"events_per_s\":%.0f,\"sync_p50_us\":%u,\"sync_p99_us\":%u}\n",
         total, elapsed, (double)total / elapsed, samples ? all[samples / 2] : 0,
         samples ? all[samples * 99 / 100] : 0);
  free(all);
  return failed || r < 0 ? 1 : 0;
}
