/* Live anomaly detection: every event domed journals is offered (after its append succeeded) to a
 * bounded queue that one detection thread drains through the applied Sigma rule set
 * (supervisor/anomaly/anomaly.h). The call path never waits: a full queue drops the event, counts it
 * and the detection thread journals `anomaly.behind` with the count. Alerts are journalled as
 * `anomaly.alert`; one at or above anomaly_suspend_level suspends its agent (`agent.suspended` names
 * the alert's seq). `anomalies.apply` / `anomalies.list` and SIGHUP replace or show the set; a set
 * with a problem is refused and the previous one kept. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "supervisor/anomaly/anomaly.h"
#include "supervisor/domed/domed.h"

#define QUEUE_CAPACITY 65536
#define RULE_COUNTERS 256

struct queued {
  anomaly_block text; /* the event's JSON text (anomaly_event_text) in a block of the queue's pool */
  uint64_t seq;
  int64_t time_ns;
  uint64_t queued_ns; /* CLOCK_MONOTONIC */
};

/* Durations in power-of-two buckets of ns (bucket b: < 2^(b+1) ns): the offer's cost on the call path
 * and the delay from an event's append to its alert being journalled. */
#define DURATION_BUCKETS 40

struct rule_counter {
  char rule_id[64];
  char level[16];
  uint64_t alerts;
};

/* After it drains the queue, the detection thread waits this long on a timed wait before it sleeps
 * until woken: an event offered meanwhile is not signalled (the offer makes no system call) and waits at
 * most this long. Only the first event after a quiet spell wakes the thread. */
#define LINGER_NS (2 * 1000 * 1000)
#define DRAIN_BATCH 64 /* events taken out of the queue at a time */

struct domed_anomaly {
  pthread_mutex_t lock;
  pthread_cond_t ready; /* on CLOCK_MONOTONIC */
  struct queued *queue;
  size_t head, count;
  bool stop;
  bool sleeping;             /* the detection thread waits untimed: an offer must signal */
  anomaly_block_pool blocks; /* the texts' blocks, handed back after evaluation (under lock) */
  pthread_t thread;
  bool thread_started;
  /* applied set, swapped under lock; the thread makes a new engine when it changes */
  anomaly_rule_set *set;
  uint64_t set_generation;
  char directory[1024];
  anomaly_level suspend_level;
  atomic_uint_fast64_t evaluated, dropped, alerts, suspensions;
  atomic_uint_fast64_t offer_ns[DURATION_BUCKETS], alert_delay_ns[DURATION_BUCKETS];
  uint64_t dropped_reported;
  struct rule_counter counters[RULE_COUNTERS];
  size_t counter_count;
};

static uint64_t monotonic_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void observe(atomic_uint_fast64_t *buckets, uint64_t ns) {
  unsigned bucket = 0;
  while (bucket + 1 < DURATION_BUCKETS && ns >> (bucket + 1)) bucket++;
  atomic_fetch_add(&buckets[bucket], 1);
}

/* The upper bound (ns) of the bucket holding the 99th percentile, 0 with no observation. */
static uint64_t p99_ns(atomic_uint_fast64_t *buckets) {
  uint64_t total = 0, seen = 0;
  for (unsigned b = 0; b < DURATION_BUCKETS; b++) total += atomic_load(&buckets[b]);
  if (total == 0) return 0;
  for (unsigned b = 0; b < DURATION_BUCKETS; b++) {
    seen += atomic_load(&buckets[b]);
    if (seen * 100 >= total * 99) return UINT64_C(2) << b;
  }
  return UINT64_C(2) << (DURATION_BUCKETS - 1);
}

static int64_t realtime_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void count_alert(struct domed_anomaly *a, const char *rule_id, const char *level) {
  pthread_mutex_lock(&a->lock);
  size_t i = 0;
  while (i < a->counter_count &&
         strncmp(a->counters[i].rule_id, rule_id, sizeof a->counters[i].rule_id - 1) != 0)
    i++;
  if (i == a->counter_count && a->counter_count < RULE_COUNTERS) {
    size_t n = 0; /* a Prometheus label value: no quote, backslash or control character */
    for (const char *c = rule_id; *c && n + 1 < sizeof a->counters[i].rule_id; c++)
      if (*c != '"' && *c != '\\' && (unsigned char)*c >= 0x20) a->counters[i].rule_id[n++] = *c;
    a->counters[i].rule_id[n] = '\0';
    snprintf(a->counters[i].level, sizeof a->counters[i].level, "%s", level);
    a->counter_count++;
  }
  if (i < a->counter_count) a->counters[i].alerts++;
  pthread_mutex_unlock(&a->lock);
}

struct alert_context {
  struct domed *domed;
  uint64_t queued_ns; /* of the event being evaluated */
};

static void suspend_agent(struct domed *domed, const char *agent, uint64_t alert_seq, const char *rule_id) {
  dome_error err = {0};
  json_t *info = control_agent_get(domed->store, agent);
  const json_t *current = json_object_get(info, "status");
  bool active = json_is_string(current) && strcmp(json_string_value(current), "active") == 0;
  json_decref(info);
  if (!active) return;
  if (control_agent_set_status(domed->store, agent, "suspended", &err) < 0) {
    domed_log("error", "anomaly", "msg=\"suspending the agent failed: %s\" agent=%s", err.message, agent);
    return;
  }
  atomic_fetch_add(&domed->anomaly->suspensions, 1);
  size_t cancelled = mcp_server_cancel_agent(domed->mcp, agent);
  json_t *event =
      json_pack("{s:s,s:s,s:s,s:I,s:s,s:I}", "type", "agent.suspended", "agent", agent, "status", "suspended",
                "alert_seq", (json_int_t)alert_seq, "rule_id", rule_id, "cancelled", (json_int_t)cancelled);
  if (domed_audit_append_sync(domed, event, &err) < 0)
    domed_log("error", "anomaly", "msg=\"agent.suspended not journalled: %s\" agent=%s", err.message, agent);
  json_decref(event);
  domed_log("warn", "anomaly", "msg=\"agent suspended by an anomaly alert\" agent=%s alert_seq=%llu rule=%s",
            agent, (unsigned long long)alert_seq, rule_id);
}

static void on_alert(const json_t *alert, void *context) {
  struct alert_context *c = context;
  struct domed *domed = c->domed;
  struct domed_anomaly *a = domed->anomaly;
  json_t *event = json_deep_copy(alert);
  uint64_t ticket = 0;
  dome_error err = {0};
  if (event == NULL || domed_audit_append(domed, event, &ticket, &err) < 0) {
    domed_log("error", "anomaly", "msg=\"alert not journalled: %s\"", err.message);
    json_decref(event);
    return;
  }
  json_decref(event);
  observe(a->alert_delay_ns, monotonic_ns() - c->queued_ns);
  atomic_fetch_add(&a->alerts, 1);
  const char *rule_id = json_string_value(json_object_get(alert, "rule_id"));
  const char *level_name = json_string_value(json_object_get(alert, "level"));
  count_alert(a, rule_id ? rule_id : "-", level_name ? level_name : "-");
  anomaly_level level = ANOMALY_LEVEL_NONE;
  anomaly_level_parse(level_name, &level, &err);
  const char *agent = json_string_value(json_object_get(alert, "agent"));
  domed_risk_note(domed->risk, agent, level);
  if (agent && a->suspend_level != ANOMALY_LEVEL_NONE && level >= a->suspend_level)
    suspend_agent(domed, agent, ticket & ((UINT64_C(1) << 44) - 1), rule_id ? rule_id : "-");
}

static void *detection_thread(void *argument) {
  struct domed *domed = argument;
  struct domed_anomaly *a = domed->anomaly;
  anomaly_engine *engine = NULL;
  uint64_t generation = 0;
  struct alert_context context = {.domed = domed};
  bool lingering = false;
  pthread_mutex_lock(&a->lock);
  for (;;) {
    while (a->count == 0 && !a->stop && a->dropped_reported == atomic_load(&a->dropped)) {
      if (lingering) {
        struct timespec until;
        clock_gettime(CLOCK_MONOTONIC, &until);
        until.tv_nsec += LINGER_NS;
        if (until.tv_nsec >= 1000000000L) {
          until.tv_sec++;
          until.tv_nsec -= 1000000000L;
        }
        if (pthread_cond_timedwait(&a->ready, &a->lock, &until) == ETIMEDOUT) lingering = false;
      } else {
        a->sleeping = true;
        pthread_cond_wait(&a->ready, &a->lock);
        a->sleeping = false;
      }
    }
    lingering = true;
    if (a->stop && a->count == 0) break;
    if (generation != a->set_generation) {
      anomaly_engine_free(engine);
      engine = NULL;
      dome_error err = {0};
      if (a->set && anomaly_engine_create(a->set, NULL, &engine, &err) < 0)
        domed_log("error", "anomaly", "msg=\"no engine: %s\"", err.message);
      generation = a->set_generation;
    }
    uint64_t dropped = atomic_load(&a->dropped);
    if (dropped != a->dropped_reported) {
      uint64_t missed = dropped - a->dropped_reported;
      a->dropped_reported = dropped;
      pthread_mutex_unlock(&a->lock);
      json_t *event = json_pack("{s:s,s:I,s:I}", "type", "anomaly.behind", "dropped", (json_int_t)missed,
                                "dropped_total", (json_int_t)dropped);
      dome_error err = {0};
      uint64_t ticket;
      domed_audit_append(domed, event, &ticket, &err);
      json_decref(event);
      pthread_mutex_lock(&a->lock);
      continue;
    }
    if (a->count == 0) continue;
    /* a batch out of the queue under one hold of the lock, evaluated without it: an offer seldom finds
     * the lock taken */
    struct queued batch[DRAIN_BATCH];
    size_t taken = 0;
    while (a->count > 0 && taken < DRAIN_BATCH) {
      batch[taken++] = a->queue[a->head];
      a->head = (a->head + 1) % QUEUE_CAPACITY;
      a->count--;
    }
    pthread_mutex_unlock(&a->lock);
    for (size_t i = 0; i < taken; i++) {
      context.queued_ns = batch[i].queued_ns;
      json_t *event = json_loadb(batch[i].text.data, batch[i].text.length, 0, NULL);
      if (engine && event)
        anomaly_engine_process(engine, event, batch[i].seq, batch[i].time_ns, on_alert, &context);
      atomic_fetch_add(&a->evaluated, 1);
      json_decref(event);
    }
    pthread_mutex_lock(&a->lock);
    for (size_t i = 0; i < taken; i++) anomaly_block_release(&a->blocks, &batch[i].text);
  }
  pthread_mutex_unlock(&a->lock);
  anomaly_engine_free(engine);
  return NULL;
}

/* Load `directory` and make it the applied set. Returns 0 and fills *result, or -EINVAL with the
 * problems in *err (the previous set stays). */
static int apply_directory(struct domed *domed, const char *directory, json_t **result, dome_error *err) {
  struct domed_anomaly *a = domed->anomaly;
  anomaly_rule_set *set = NULL;
  json_t *problems = NULL;
  int rc = anomaly_rule_set_load(directory, &set, &problems, err);
  if (rc < 0) {
    size_t count = problems ? json_array_size(problems) : 0;
    if (count > 0) {
      char first[900];
      snprintf(first, sizeof first, "%s", json_string_value(json_array_get(problems, 0)));
      dome_error_set(err, EINVAL, "anomaly rules `%s` refused (the previous set stays): %zu problem(s); %s",
                     directory, count, first);
    } else {
      dome_error_wrap(err, "anomaly rules `%s` refused (the previous set stays)", directory);
    }
    json_decref(problems);
    return -EINVAL;
  }
  json_decref(problems);
  pthread_mutex_lock(&a->lock);
  anomaly_rule_set *old = a->set;
  a->set = set;
  a->set_generation++;
  snprintf(a->directory, sizeof a->directory, "%s", directory);
  pthread_cond_signal(&a->ready);
  pthread_mutex_unlock(&a->lock);
  anomaly_rule_set_release(old);
  json_t *event =
      json_pack("{s:s,s:s,s:s,s:I,s:I}", "type", "anomalies.applied", "directory", directory, "digest",
                anomaly_rule_set_digest(set), "rules", (json_int_t)anomaly_rule_set_count(set), "active",
                (json_int_t)anomaly_rule_set_active_count(set));
  dome_error ignored = {0};
  domed_audit_append_sync(domed, event, &ignored);
  json_decref(event);
  domed_log("info", "anomaly", "msg=\"anomaly rules applied\" directory=%s rules=%zu digest=%.12s", directory,
            anomaly_rule_set_count(set), anomaly_rule_set_digest(set));
  if (result)
    *result = json_pack("{s:s,s:s,s:I,s:I}", "directory", directory, "digest", anomaly_rule_set_digest(set),
                        "rules", (json_int_t)anomaly_rule_set_count(set), "active",
                        (json_int_t)anomaly_rule_set_active_count(set));
  return 0;
}

int domed_anomaly_start(struct domed *domed, dome_error *err) {
  struct domed_anomaly *a = calloc(1, sizeof *a);
  if (a == NULL || (a->queue = calloc(QUEUE_CAPACITY, sizeof *a->queue)) == NULL) {
    free(a);
    return dome_error_set(err, ENOMEM, "anomaly queue");
  }
  pthread_mutex_init(&a->lock, NULL);
  pthread_condattr_t monotonic;
  pthread_condattr_init(&monotonic);
  pthread_condattr_setclock(&monotonic, CLOCK_MONOTONIC);
  pthread_cond_init(&a->ready, &monotonic);
  pthread_condattr_destroy(&monotonic);
  if (anomaly_level_parse(domed->config.anomaly_suspend_level, &a->suspend_level, err) < 0) {
    free(a->queue);
    free(a);
    return dome_error_wrap(err, "anomaly_suspend_level");
  }
  if ((domed->risk = domed_risk_create(domed->config.anomaly_risk_window_s)) == NULL) {
    free(a->queue);
    free(a);
    return dome_error_set(err, ENOMEM, "anomaly risk record");
  }
  domed->anomaly = a;
  if (domed->config.anomaly_rules[0]) {
    dome_error why = {0};
    if (apply_directory(domed, domed->config.anomaly_rules, NULL, &why) < 0)
      domed_log("error", "anomaly", "msg=\"%s\"", why.message);
  }
  if (pthread_create(&a->thread, NULL, detection_thread, domed) != 0) {
    domed->anomaly = NULL;
    domed_risk_free(domed->risk);
    domed->risk = NULL;
    anomaly_rule_set_release(a->set);
    free(a->queue);
    free(a);
    return dome_error_set(err, EAGAIN, "anomaly detection thread");
  }
  a->thread_started = true;
  return 0;
}

void domed_anomaly_stop(struct domed *domed) {
  struct domed_anomaly *a = domed->anomaly;
  if (a == NULL) return;
  pthread_mutex_lock(&a->lock);
  a->stop = true;
  pthread_cond_signal(&a->ready);
  pthread_mutex_unlock(&a->lock);
  if (a->thread_started) pthread_join(a->thread, NULL);
  domed->anomaly = NULL;
  for (size_t i = 0; i < a->count; i++) free(a->queue[(a->head + i) % QUEUE_CAPACITY].text.data);
  anomaly_block_pool_clear(&a->blocks);
  anomaly_rule_set_release(a->set);
  free(a->queue);
  domed_risk_free(domed->risk);
  domed->risk = NULL;
  pthread_mutex_destroy(&a->lock);
  pthread_cond_destroy(&a->ready);
  free(a);
}

void domed_anomaly_offer(struct domed *domed, const json_t *event, uint64_t seq) {
  struct domed_anomaly *a = domed->anomaly;
  if (a == NULL) return;
  const char *type = json_string_value(json_object_get(event, "type"));
  if (type == NULL || strncmp(type, "anomaly.", 8) == 0 || strcmp(type, "journal.checkpoint") == 0) return;
  uint64_t start = monotonic_ns();
  pthread_mutex_lock(&a->lock);
  if (a->set == NULL || anomaly_rule_set_active_count(a->set) == 0) {
    pthread_mutex_unlock(&a->lock);
    return;
  }
  if (a->count == QUEUE_CAPACITY) {
    atomic_fetch_add(&a->dropped, 1);
    pthread_cond_signal(&a->ready);
    pthread_mutex_unlock(&a->lock);
    return;
  }
  pthread_mutex_unlock(&a->lock);
  /* serialized outside the lock (the caller keeps, and may change, its event), copied under it into a
   * block of the queue's pool: no allocation in the steady state */
  size_t length = 0;
  const char *text = anomaly_event_text(event, &length);
  pthread_mutex_lock(&a->lock);
  anomaly_block block = {0};
  if (text == NULL || a->count == QUEUE_CAPACITY ||
      anomaly_block_fill(&a->blocks, text, length, &block) < 0) {
    atomic_fetch_add(&a->dropped, 1);
  } else {
    a->queue[(a->head + a->count) % QUEUE_CAPACITY] = (struct queued){block, seq, realtime_ns(), start};
    a->count++;
  }
  /* a lingering thread finds the event within LINGER_NS; a half-full queue is worth the wake-up */
  if (a->sleeping || a->count >= QUEUE_CAPACITY / 2) pthread_cond_signal(&a->ready);
  pthread_mutex_unlock(&a->lock);
  observe(a->offer_ns, monotonic_ns() - start);
}

void domed_anomaly_reload(struct domed *domed, const char *directory) {
  if (domed->anomaly == NULL || directory == NULL || directory[0] == '\0') return;
  dome_error err = {0};
  if (apply_directory(domed, directory, NULL, &err) < 0)
    domed_log("error", "anomaly", "msg=\"%s\"", err.message);
}

json_t *domed_anomaly_command(struct domed *domed, const struct control_request *request, const char *verb,
                              dome_error *err) {
  struct domed_anomaly *a = domed->anomaly;
  if (a == NULL) {
    dome_error_set(err, EIO, "anomaly detection is not running");
    return NULL;
  }
  if (strcmp(verb, "apply") == 0) {
    const char *directory = json_string_value(json_object_get(request->args, "directory"));
    if (directory == NULL || directory[0] != '/') {
      dome_error_set(err, EINVAL, "anomalies.apply: `directory` must be an absolute path");
      return NULL;
    }
    json_t *result = NULL;
    return apply_directory(domed, directory, &result, err) < 0 ? NULL : result;
  }
  if (strcmp(verb, "list") == 0) {
    pthread_mutex_lock(&a->lock);
    anomaly_rule_set *set = anomaly_rule_set_retain(a->set);
    json_t *result = json_pack(
        "{s:s,s:s,s:I,s:I,s:I,s:I,s:s}", "directory", a->directory, "digest",
        set ? anomaly_rule_set_digest(set) : "", "evaluated", (json_int_t)atomic_load(&a->evaluated),
        "dropped", (json_int_t)atomic_load(&a->dropped), "alerts", (json_int_t)atomic_load(&a->alerts),
        "queued", (json_int_t)a->count, "suspend_level", anomaly_level_name(a->suspend_level));
    pthread_mutex_unlock(&a->lock);
    json_object_set_new(result, "offer_p99_ns", json_integer((json_int_t)p99_ns(a->offer_ns)));
    json_object_set_new(result, "alert_delay_p99_ns", json_integer((json_int_t)p99_ns(a->alert_delay_ns)));
    json_object_set_new(result, "rules", set ? anomaly_rule_set_describe(set) : json_array());
    anomaly_rule_set_release(set);
    return result;
  }
  dome_error_set(err, EINVAL, "unknown command `anomalies.%s`", verb);
  return NULL;
}

/* The rule's file as it is on disk now, at most ANOMALY_MAX_FILE_BYTES; NULL when it cannot be read. */
static json_t *rule_source(const char *path) {
  FILE *file = path ? fopen(path, "re") : NULL;
  if (file == NULL) return NULL;
  char *text = malloc(ANOMALY_MAX_FILE_BYTES + 1);
  size_t length = text ? fread(text, 1, ANOMALY_MAX_FILE_BYTES + 1, file) : 0;
  bool whole = text && !ferror(file) && length <= ANOMALY_MAX_FILE_BYTES;
  fclose(file);
  json_t *source = whole ? json_stringn(text, length) : NULL; /* NULL too when not UTF-8 */
  free(text);
  return source;
}

json_t *domed_anomaly_rule(struct domed *domed, const char *rule_id) {
  struct domed_anomaly *a = domed->anomaly;
  if (a == NULL || rule_id == NULL) return NULL;
  pthread_mutex_lock(&a->lock);
  anomaly_rule_set *set = anomaly_rule_set_retain(a->set);
  pthread_mutex_unlock(&a->lock);
  json_t *found = NULL;
  json_t *rules = set ? anomaly_rule_set_describe(set) : NULL;
  size_t i;
  json_t *rule;
  json_array_foreach(rules, i, rule) {
    const char *id = json_string_value(json_object_get(rule, "id"));
    if (id == NULL || strcmp(id, rule_id) != 0) continue;
    found = json_deep_copy(rule);
    const char *file = anomaly_rule_set_rule_file(set, rule_id);
    json_object_set_new(found, "file", file ? json_string(file) : json_null());
    json_t *source = rule_source(file);
    json_object_set_new(found, "source", source ? source : json_null());
    json_object_set_new(found, "set_digest", json_string(anomaly_rule_set_digest(set)));
    break;
  }
  json_decref(rules);
  anomaly_rule_set_release(set);
  return found;
}

void domed_anomaly_metrics(struct domed *domed, FILE *out) {
  struct domed_anomaly *a = domed->anomaly;
  if (a == NULL) return;
  fprintf(out,
          "# HELP dome_anomaly_events_evaluated_total Journal events evaluated by the anomaly rules.\n"
          "# TYPE dome_anomaly_events_evaluated_total counter\ndome_anomaly_events_evaluated_total %llu\n"
          "# HELP dome_anomaly_events_dropped_total Events not evaluated because detection fell behind.\n"
          "# TYPE dome_anomaly_events_dropped_total counter\ndome_anomaly_events_dropped_total %llu\n"
          "# HELP dome_anomaly_suspensions_total Agents suspended by an anomaly alert.\n"
          "# TYPE dome_anomaly_suspensions_total counter\ndome_anomaly_suspensions_total %llu\n"
          "# HELP dome_anomaly_alerts_total anomaly.alert events by rule and level.\n"
          "# TYPE dome_anomaly_alerts_total counter\n",
          (unsigned long long)atomic_load(&a->evaluated), (unsigned long long)atomic_load(&a->dropped),
          (unsigned long long)atomic_load(&a->suspensions));
  pthread_mutex_lock(&a->lock);
  for (size_t i = 0; i < a->counter_count; i++)
    fprintf(out, "dome_anomaly_alerts_total{rule_id=\"%s\",level=\"%s\"} %llu\n", a->counters[i].rule_id,
            a->counters[i].level, (unsigned long long)a->counters[i].alerts);
  pthread_mutex_unlock(&a->lock);
}
