/* The console's Overview: domed's /metrics counters sampled once a minute for the last 24 hours
 * (1,440 samples in a ring, bounded), as per-minute deltas of calls, decisions, kernel denials and
 * redactions, and the p50 / p99 of tools/call latency from the histogram's buckets (the upper bound
 * of the bucket that holds the quantile). The answer adds the minute in progress. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "supervisor/domed/domed.h"

#define SAMPLES 1440
#define BUCKETS 12

static const double bucket_upper_ms[BUCKETS] = {5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 1e9};

struct counters {
  int64_t time_s;
  uint64_t calls, allow, deny, denials, redactions;
  uint64_t buckets[BUCKETS];
};

struct domed_console_overview {
  pthread_mutex_t lock;
  pthread_cond_t wake;
  bool stop;
  pthread_t thread;
  bool started;
  struct counters previous;        /* the counters at the last sample */
  struct counters deltas[SAMPLES]; /* per minute, oldest at head */
  size_t head, count;
};

static void read_counters(struct domed *domed, struct counters *out) {
  struct domed_metrics *m = &domed->metrics;
  out->time_s = (int64_t)time(NULL);
  out->calls = atomic_load(&m->latency_count);
  out->allow = atomic_load(&m->decisions_allow);
  out->deny = atomic_load(&m->decisions_deny);
  out->denials = atomic_load(&m->denials_kernel);
  out->redactions = atomic_load(&m->redactions);
  for (size_t i = 0; i < BUCKETS; i++) out->buckets[i] = atomic_load(&m->latency_buckets[i]);
}

static void subtract(const struct counters *now, const struct counters *before, struct counters *delta) {
  delta->time_s = now->time_s;
  delta->calls = now->calls - before->calls;
  delta->allow = now->allow - before->allow;
  delta->deny = now->deny - before->deny;
  delta->denials = now->denials - before->denials;
  delta->redactions = now->redactions - before->redactions;
  for (size_t i = 0; i < BUCKETS; i++) delta->buckets[i] = now->buckets[i] - before->buckets[i];
}

static json_t *quantile(const struct counters *delta, double q) {
  uint64_t total = 0;
  for (size_t i = 0; i < BUCKETS; i++) total += delta->buckets[i];
  if (total == 0) return json_null();
  uint64_t rank = (uint64_t)(q * (double)total + 0.999999), seen = 0;
  for (size_t i = 0; i < BUCKETS; i++) {
    seen += delta->buckets[i];
    if (seen >= rank) return i + 1 < BUCKETS ? json_real(bucket_upper_ms[i]) : json_string("> 10000");
  }
  return json_null();
}

static json_t *sample_json(const struct counters *delta, bool partial) {
  json_t *sample =
      json_pack("{s:I,s:I,s:I,s:I,s:I,s:I,s:o,s:o}", "time", (json_int_t)delta->time_s, "calls",
                (json_int_t)delta->calls, "allow", (json_int_t)delta->allow, "deny", (json_int_t)delta->deny,
                "denials", (json_int_t)delta->denials, "redactions", (json_int_t)delta->redactions, "p50_ms",
                quantile(delta, 0.5), "p99_ms", quantile(delta, 0.99));
  if (partial) json_object_set_new(sample, "partial", json_true());
  return sample;
}

static void take_sample(struct domed *domed, struct domed_console_overview *overview) {
  struct counters now, delta;
  read_counters(domed, &now);
  subtract(&now, &overview->previous, &delta);
  overview->previous = now;
  if (overview->count == SAMPLES) {
    overview->head = (overview->head + 1) % SAMPLES;
    overview->count--;
  }
  overview->deltas[(overview->head + overview->count) % SAMPLES] = delta;
  overview->count++;
}

static void *sampler(void *context) {
  struct domed *domed = context;
  struct domed_console_overview *overview = domed->console_overview;
  pthread_mutex_lock(&overview->lock);
  while (!overview->stop) {
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += 60;
    if (pthread_cond_timedwait(&overview->wake, &overview->lock, &deadline) == ETIMEDOUT && !overview->stop)
      take_sample(domed, overview);
  }
  pthread_mutex_unlock(&overview->lock);
  return NULL;
}

json_t *domed_console_overview(struct domed *domed) {
  struct domed_console_overview *overview = domed->console_overview;
  json_t *samples = json_array();
  struct counters totals = {0};
  pthread_mutex_lock(&overview->lock);
  for (size_t i = 0; i < overview->count; i++) {
    const struct counters *delta = &overview->deltas[(overview->head + i) % SAMPLES];
    json_array_append_new(samples, sample_json(delta, false));
  }
  struct counters now, partial;
  read_counters(domed, &now);
  subtract(&now, &overview->previous, &partial);
  json_array_append_new(samples, sample_json(&partial, true));
  int64_t since = overview->count ? overview->deltas[overview->head].time_s - 60 : overview->previous.time_s;
  pthread_mutex_unlock(&overview->lock);
  size_t i;
  json_t *sample;
  json_array_foreach(samples, i, sample) {
    totals.calls += (uint64_t)json_integer_value(json_object_get(sample, "calls"));
    totals.allow += (uint64_t)json_integer_value(json_object_get(sample, "allow"));
    totals.deny += (uint64_t)json_integer_value(json_object_get(sample, "deny"));
    totals.denials += (uint64_t)json_integer_value(json_object_get(sample, "denials"));
    totals.redactions += (uint64_t)json_integer_value(json_object_get(sample, "redactions"));
  }
  return json_pack("{s:i,s:I,s:o,s:{s:I,s:I,s:I,s:I,s:I}}", "minute_s", 60, "since", (json_int_t)since,
                   "samples", samples, "totals", "calls", (json_int_t)totals.calls, "allow",
                   (json_int_t)totals.allow, "deny", (json_int_t)totals.deny, "denials",
                   (json_int_t)totals.denials, "redactions", (json_int_t)totals.redactions);
}

int domed_console_overview_start(struct domed *domed, dome_error *err) {
  struct domed_console_overview *overview = calloc(1, sizeof *overview);
  if (overview == NULL) return dome_error_set(err, ENOMEM, "console: overview: out of memory");
  pthread_mutex_init(&overview->lock, NULL);
  pthread_cond_init(&overview->wake, NULL);
  read_counters(domed, &overview->previous);
  domed->console_overview = overview;
  overview->started = pthread_create(&overview->thread, NULL, sampler, domed) == 0;
  return 0;
}

void domed_console_overview_stop(struct domed *domed) {
  struct domed_console_overview *overview = domed->console_overview;
  if (overview == NULL) return;
  pthread_mutex_lock(&overview->lock);
  overview->stop = true;
  pthread_cond_broadcast(&overview->wake);
  pthread_mutex_unlock(&overview->lock);
  if (overview->started) pthread_join(overview->thread, NULL);
  pthread_cond_destroy(&overview->wake);
  pthread_mutex_destroy(&overview->lock);
  free(overview);
  domed->console_overview = NULL;
}
