/* The journal of refused requests (auth.failed: tokens missing, invalid, expired, suspended, revoked;
 * session.refused: initialize without any permitted action), bounded against floods.
 *
 * Each refusal has a key: its type, reason, source address and principal (the token's first
 * characters, or the agent). The first refusal of a key in a second is journalled at once; the others
 * of that second are counted and journalled as one summary event (the first event's members plus
 * `count`, the refusals it stands for, and `window_s`: 1) when the second has ended. At most
 * REFUSALS_KEYS keys are tracked and at most REFUSALS_IMMEDIATE_PER_SECOND events are journalled at once
 * in a second: beyond either, refusals are counted into one overflow key whose summary names no
 * source. So a flood adds at most REFUSALS_IMMEDIATE_PER_SECOND + REFUSALS_KEYS + 1 events a second,
 * whatever its rate, and every refusal is counted in some event. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "supervisor/domed/domed.h"

#define REFUSALS_KEYS 256
#define REFUSALS_IMMEDIATE_PER_SECOND 64

struct refusal_key {
  bool used;
  char type[24], reason[24], source[64], principal[136];
  time_t second;  /* the second (CLOCK_MONOTONIC) of the last refusal */
  uint64_t count; /* refusals of that second not yet journalled */
  json_t *first;  /* the event journalled at once in that second: the summary's members */
};

static struct {
  pthread_mutex_t lock;
  pthread_cond_t wake;
  pthread_t thread;
  bool running, stopping;
  struct domed *domed; /* the summary thread's */
  struct refusal_key keys[REFUSALS_KEYS];
  struct refusal_key overflow;
  time_t immediate_second;
  unsigned immediate_count;
} refusals = {.lock = PTHREAD_MUTEX_INITIALIZER, .wake = PTHREAD_COND_INITIALIZER};

static time_t monotonic_second(void) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return now.tv_sec;
}

/* The summary of `key`'s last second (new reference), or NULL when nothing was held back. Resets it. */
static json_t *take_summary_locked(struct refusal_key *key) {
  if (key->count == 0) return NULL;
  json_t *summary = key->first ? json_deep_copy(key->first)
                               : json_pack("{s:s,s:s}", "type", key->type, "reason", key->reason);
  json_object_set_new(summary, "count", json_integer((json_int_t)key->count));
  json_object_set_new(summary, "window_s", json_integer(1));
  key->count = 0;
  return summary;
}

static void clear_key_locked(struct refusal_key *key) {
  json_decref(key->first);
  *key = (struct refusal_key){0};
}

static bool key_matches(const struct refusal_key *key, const char *type, const char *reason,
                        const char *source, const char *principal) {
  return key->used && strcmp(key->type, type) == 0 && strcmp(key->reason, reason) == 0 &&
         strcmp(key->source, source) == 0 && strcmp(key->principal, principal) == 0;
}

/* Collect the summaries of ended seconds into `out` and free the keys idle for a whole second. */
static void sweep_locked(time_t now, json_t *out) {
  for (size_t i = 0; i < REFUSALS_KEYS; i++) {
    struct refusal_key *key = &refusals.keys[i];
    if (!key->used || key->second >= now) continue;
    json_t *summary = take_summary_locked(key);
    if (summary) json_array_append_new(out, summary);
    if (key->second < now - 1) clear_key_locked(key);
  }
  if (refusals.overflow.second < now) {
    json_t *summary = take_summary_locked(&refusals.overflow);
    if (summary) json_array_append_new(out, summary);
  }
}

static void append_all(struct domed *domed, json_t *events) {
  size_t i;
  json_t *event;
  dome_error ignored = {0}; /* a refusal is answered as such whether or not its event is kept */
  json_array_foreach(events, i, event) domed_audit_append(domed, event, NULL, &ignored);
}

void domed_refusal_journal(struct domed *domed, json_t *event, const char *source, const char *principal) {
  const char *type = json_string_value(json_object_get(event, "type"));
  const char *reason = json_string_value(json_object_get(event, "reason"));
  if (type == NULL) type = "";
  if (reason == NULL) reason = "";
  if (source == NULL) source = "";
  if (principal == NULL) principal = "";
  if (source[0]) json_object_set_new(event, "source", json_string(source));
  time_t now = monotonic_second();
  json_t *ready = json_array();
  bool immediate = false;
  pthread_mutex_lock(&refusals.lock);
  sweep_locked(now, ready);
  if (refusals.immediate_second != now) {
    refusals.immediate_second = now;
    refusals.immediate_count = 0;
  }
  struct refusal_key *key = NULL, *free_slot = NULL;
  for (size_t i = 0; i < REFUSALS_KEYS && key == NULL; i++) {
    if (key_matches(&refusals.keys[i], type, reason, source, principal))
      key = &refusals.keys[i];
    else if (!refusals.keys[i].used && free_slot == NULL)
      free_slot = &refusals.keys[i];
  }
  if (key && key->second == now) {
    key->count++; /* journalled in the summary of this second */
  } else if ((key || free_slot) && refusals.immediate_count < REFUSALS_IMMEDIATE_PER_SECOND) {
    if (key == NULL) {
      key = free_slot;
      key->used = true;
      snprintf(key->type, sizeof key->type, "%s", type);
      snprintf(key->reason, sizeof key->reason, "%s", reason);
      snprintf(key->source, sizeof key->source, "%s", source);
      snprintf(key->principal, sizeof key->principal, "%s", principal);
    }
    key->second = now;
    json_decref(key->first);
    key->first = json_incref(event);
    refusals.immediate_count++;
    immediate = true;
  } else {
    struct refusal_key *overflow = &refusals.overflow;
    if (overflow->count == 0) {
      json_decref(overflow->first);
      overflow->first = json_pack("{s:s,s:s,s:s}", "type", type, "reason", "flood", "source", "*");
    }
    overflow->used = true;
    overflow->second = now;
    overflow->count++;
  }
  pthread_mutex_unlock(&refusals.lock);
  dome_error ignored = {0};
  if (immediate) domed_audit_append(domed, event, NULL, &ignored);
  append_all(domed, ready);
  json_decref(ready);
  atomic_fetch_add(&domed->metrics.refusals, 1);
}

/* Journal the summaries of each second shortly after it ended, also when no further refusal comes. */
static void *summary_thread(void *argument) {
  struct domed *domed = argument;
  pthread_mutex_lock(&refusals.lock);
  while (!refusals.stopping) {
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_nsec += 250 * 1000000L;
    if (deadline.tv_nsec >= 1000000000L) {
      deadline.tv_sec++;
      deadline.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(&refusals.wake, &refusals.lock, &deadline);
    json_t *ready = json_array();
    sweep_locked(monotonic_second(), ready);
    pthread_mutex_unlock(&refusals.lock);
    append_all(domed, ready);
    json_decref(ready);
    pthread_mutex_lock(&refusals.lock);
  }
  pthread_mutex_unlock(&refusals.lock);
  return NULL;
}

int domed_refusals_start(struct domed *domed, dome_error *err) {
  pthread_mutex_lock(&refusals.lock);
  refusals.domed = domed;
  refusals.stopping = false;
  int rc = pthread_create(&refusals.thread, NULL, summary_thread, domed);
  refusals.running = rc == 0;
  pthread_mutex_unlock(&refusals.lock);
  return rc == 0 ? 0 : dome_error_set(err, rc, "start the refusal summary thread");
}

void domed_refusals_stop(struct domed *domed) {
  pthread_mutex_lock(&refusals.lock);
  bool running = refusals.running;
  refusals.stopping = true;
  refusals.running = false;
  pthread_cond_broadcast(&refusals.wake);
  pthread_mutex_unlock(&refusals.lock);
  if (running) pthread_join(refusals.thread, NULL);
  /* what is still counted is journalled before the journal closes */
  json_t *ready = json_array();
  pthread_mutex_lock(&refusals.lock);
  sweep_locked(monotonic_second() + 2, ready);
  for (size_t i = 0; i < REFUSALS_KEYS; i++) clear_key_locked(&refusals.keys[i]);
  clear_key_locked(&refusals.overflow);
  pthread_mutex_unlock(&refusals.lock);
  append_all(domed, ready);
  json_decref(ready);
}
