/* The index of the console's executions search: one small summary per ended execution (exec.end, with
 * the count of its exec.redaction records), the newest DOMED_CONSOLE_INDEX_MAX of them, in seq order.
 * It follows the journal itself: a thread reads the existing journal at start and what was journalled
 * every 5 s, and every search first reads what came since, so it needs no hook on the write path and
 * holds each execution once. Executions older than the index holds are found by scanning the journal
 * before its oldest entry. Memory: about 100 bytes an execution, names interned.
 * The same reading keeps the Agents view's calls (the Cedar decisions on mcp:call of each agent per
 * minute for the last hour, supervisor/console calls.c) and the anomaly alerts (alerts.c). */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "supervisor/audit/journal.h"
#include "supervisor/console/console.h"
#include "supervisor/domed/domed.h"

#define EXEC_ID_MAX 48
#define PENDING_REDACTIONS_MAX 65536 /* executions with redactions and no end yet */
#define MINUTE_NS INT64_C(60000000000)

struct summary {
  char exec_id[EXEC_ID_MAX];
  uint32_t agent, tool; /* indices into names */
  uint32_t denials, redactions;
  bool has_exit;
  int64_t exit_code, duration_ms;
  uint64_t seq;
  int64_t time_ns;
};

struct domed_console_index {
  pthread_mutex_t lock;
  struct summary *ring; /* capacity DOMED_CONSOLE_INDEX_MAX; oldest at `head` */
  size_t head, count;
  uint64_t through_seq;        /* every event up to this seq is indexed */
  uint64_t first_kept_seq;     /* seq of the oldest summary kept, 0 when none was dropped */
  json_t *names, *name_ids;    /* array of interned names, and name -> index */
  json_t *pending;             /* exec_id -> redactions seen before its end */
  struct console_calls *calls; /* decisions on mcp:call per agent and minute */
  struct console_alerts *alerts;
  pthread_t warm_up;
  bool warm_up_started;
};

static uint32_t intern(struct domed_console_index *index, const char *name) {
  if (name == NULL) name = "";
  json_t *id = json_object_get(index->name_ids, name);
  if (id) return (uint32_t)json_integer_value(id);
  uint32_t next = (uint32_t)json_array_size(index->names);
  json_array_append_new(index->names, json_string(name));
  json_object_set_new(index->name_ids, name, json_integer(next));
  return next;
}

static const char *name_of(const struct domed_console_index *index, uint32_t id) {
  return json_string_value(json_array_get(index->names, id));
}

/* Count one authz.decision on mcp:call in its agent's minute. Under lock. */
static void fold_decision(struct domed_console_index *index, json_t *event, int64_t time_ns) {
  const char *action = json_string_value(json_object_get(event, "action"));
  const char *decision = json_string_value(json_object_get(event, "decision"));
  const char *agent = json_string_value(json_object_get(event, "agent"));
  if (action == NULL || strcmp(action, "mcp:call") != 0 || decision == NULL || agent == NULL) return;
  console_calls_count(index->calls, agent, strcmp(decision, "allow") == 0, time_ns);
}

/* Keep an anomaly.alert (with its level's rank) or attach an agent.suspended. Under lock. */
static void fold_alert(struct domed_console_index *index, const journal_record *record) {
  anomaly_level level = ANOMALY_LEVEL_NONE;
  dome_error err = {0};
  const char *text = json_string_value(json_object_get(record->event, "level"));
  if (text && anomaly_level_parse(text, &level, &err) < 0) level = ANOMALY_LEVEL_NONE;
  console_alerts_fold(index->alerts, record->event, record->seq, record->length, (int)level);
}

/* Fold one exec.redaction or exec.end event into the index. Under lock. */
static void fold(struct domed_console_index *index, const journal_record *record) {
  json_t *event = record->event;
  const char *type = json_string_value(json_object_get(event, "type"));
  const char *exec_id = json_string_value(json_object_get(event, "exec_id"));
  if (type == NULL || exec_id == NULL || strlen(exec_id) >= EXEC_ID_MAX) return;
  if (strcmp(type, "exec.redaction") == 0) {
    if (json_object_size(index->pending) >= PENDING_REDACTIONS_MAX) json_object_clear(index->pending);
    json_int_t count = json_integer_value(json_object_get(index->pending, exec_id));
    json_object_set_new(index->pending, exec_id, json_integer(count + 1));
    return;
  }
  if (strcmp(type, "exec.end") != 0) return;
  struct summary summary = {
      .agent = intern(index, json_string_value(json_object_get(event, "agent"))),
      .tool = intern(index, json_string_value(json_object_get(event, "tool"))),
      .denials = (uint32_t)json_integer_value(json_object_get(event, "denials")),
      .redactions = (uint32_t)json_integer_value(json_object_get(index->pending, exec_id)),
      .has_exit = json_is_integer(json_object_get(event, "exit_code")),
      .exit_code = json_integer_value(json_object_get(event, "exit_code")),
      .duration_ms = json_integer_value(json_object_get(event, "duration_ms")),
      .seq = record->seq,
      .time_ns = record->time_ns,
  };
  memcpy(summary.exec_id, exec_id, strlen(exec_id) + 1);
  json_object_del(index->pending, exec_id);
  if (index->count == DOMED_CONSOLE_INDEX_MAX) {
    index->head = (index->head + 1) % DOMED_CONSOLE_INDEX_MAX;
    index->count--;
    index->first_kept_seq = index->ring[index->head].seq;
  }
  index->ring[(index->head + index->count) % DOMED_CONSOLE_INDEX_MAX] = summary;
  index->count++;
}

/* Whether a line may be of a type the index folds: its compact JSON holds `"type":"<type>` (a string
 * value cannot: its quotes are escaped). Only a hint; the parsed top-level type decides. */
static bool may_fold(const char *line, size_t length) {
  static const char *const wanted[] = {"\"type\":\"exec.", "\"type\":\"authz.decision\"",
                                       "\"type\":\"anomaly.alert\"", "\"type\":\"agent.suspended\""};
  for (size_t i = 0; i < sizeof wanted / sizeof wanted[0]; i++)
    if (memmem(line, length, wanted[i], strlen(wanted[i]))) return true;
  return false;
}

/* Read the journal from through_seq + 1 to its end into the index. Under lock. */
static int catch_up(struct domed *domed, struct domed_console_index *index, dome_error *err) {
  journal_filter filter = {.from_seq = index->through_seq + 1};
  journal_reader *reader = NULL;
  int rc = journal_reader_open(domed->config.journal_dir, &filter, &reader, err);
  if (rc < 0) return rc == -ENOENT ? 0 : rc;
  journal_record record;
  uint64_t last = index->through_seq;
  while ((rc = journal_reader_next(reader, false, &record, err)) == 1) {
    last = record.seq;
    if (may_fold(record.line, record.length)) {
      json_error_t parse_error;
      record.event = json_loadb(record.line, record.length, 0, &parse_error);
      const char *type = json_string_value(json_object_get(record.event, "type"));
      if (type && strncmp(type, "exec.", 5) == 0)
        fold(index, &record);
      else if (type && strcmp(type, "authz.decision") == 0)
        fold_decision(index, record.event, record.time_ns);
      else if (type)
        fold_alert(index, &record);
      json_decref(record.event);
    }
    if (atomic_load(&domed->stopping)) break;
  }
  journal_reader_close(reader);
  index->through_seq = last;
  return rc < 0 ? rc : 0;
}

static bool matches(const struct domed_console_index *index, const struct summary *s,
                    const struct domed_execution_query *query) {
  if (query->agent && strcmp(name_of(index, s->agent), query->agent) != 0) return false;
  if (query->since_ns && s->time_ns < query->since_ns) return false;
  if (query->until_ns && s->time_ns >= query->until_ns) return false;
  if (query->exit_given) {
    if (!s->has_exit) return false;
    if (query->nonzero ? s->exit_code == 0 : s->exit_code != query->exit_code) return false;
  }
  if (query->denials && s->denials == 0) return false;
  if (query->redactions && s->redactions == 0) return false;
  return true;
}

static json_t *summary_json(const struct domed_console_index *index, const struct summary *s) {
  char when[40];
  journal_format_time(s->time_ns, when, sizeof when);
  json_t *item = json_pack("{s:s,s:s,s:s,s:I,s:s,s:I,s:I,s:I}", "exec_id", s->exec_id, "agent",
                           name_of(index, s->agent), "tool", name_of(index, s->tool), "seq",
                           (json_int_t)s->seq, "time", when, "duration_ms", (json_int_t)s->duration_ms,
                           "denials", (json_int_t)s->denials, "redactions", (json_int_t)s->redactions);
  if (s->has_exit) json_object_set_new(item, "exit_code", json_integer((json_int_t)s->exit_code));
  return item;
}

/* The executions the index no longer holds: a scan of the journal before `to_seq`, newest first
 * appended to `found` until `limit`. */
static int scan_older(struct domed *domed, const struct domed_execution_query *query, uint64_t to_seq,
                      json_t *found, dome_error *err) {
  struct domed_console_index scratch = {
      .names = json_array(), .name_ids = json_object(), .pending = json_object()};
  scratch.ring = calloc(DOMED_CONSOLE_INDEX_MAX, sizeof scratch.ring[0]);
  int rc = scratch.ring ? 0 : dome_error_set(err, ENOMEM, "search: out of memory");
  journal_filter filter = {.to_seq = to_seq,
                           .type = "exec.",
                           .agent = query->agent,
                           .since_ns = query->since_ns,
                           .until_ns = query->until_ns};
  journal_reader *reader = NULL;
  if (rc == 0) rc = journal_reader_open(domed->config.journal_dir, &filter, &reader, err);
  journal_record record;
  while (rc == 0 && (rc = journal_reader_next(reader, true, &record, err)) == 1) {
    fold(&scratch, &record);
    json_decref(record.event);
    rc = 0;
  }
  if (reader) journal_reader_close(reader);
  for (size_t i = scratch.count; rc == 0 && i-- > 0 && json_array_size(found) < query->limit;) {
    const struct summary *s = &scratch.ring[(scratch.head + i) % DOMED_CONSOLE_INDEX_MAX];
    if (matches(&scratch, s, query)) json_array_append_new(found, summary_json(&scratch, s));
  }
  free(scratch.ring);
  json_decref(scratch.names);
  json_decref(scratch.name_ids);
  json_decref(scratch.pending);
  return rc < 0 ? rc : 0;
}

int domed_console_index_search(struct domed *domed, const struct domed_execution_query *query, json_t **found,
                               dome_error *err) {
  struct domed_console_index *index = domed->console_index;
  pthread_mutex_lock(&index->lock);
  int rc = catch_up(domed, index, err);
  json_t *list = json_array();
  for (size_t i = index->count; rc == 0 && i-- > 0 && json_array_size(list) < query->limit;) {
    const struct summary *s = &index->ring[(index->head + i) % DOMED_CONSOLE_INDEX_MAX];
    if (matches(index, s, query)) json_array_append_new(list, summary_json(index, s));
  }
  uint64_t first_kept = index->first_kept_seq;
  pthread_mutex_unlock(&index->lock);
  if (rc == 0 && first_kept && json_array_size(list) < query->limit)
    rc = scan_older(domed, query, first_kept - 1, list, err);
  if (rc < 0) {
    json_decref(list);
    return rc;
  }
  *found = list;
  return 0;
}

json_t *domed_console_index_activity(struct domed *domed, int64_t now_ns, dome_error *err) {
  struct domed_console_index *index = domed->console_index;
  const int64_t minute_ns = MINUTE_NS;
  pthread_mutex_lock(&index->lock);
  int rc = catch_up(domed, index, err);
  json_t *activity = json_object();
  for (size_t i = index->count; rc == 0 && i-- > 0;) {
    const struct summary *s = &index->ring[(index->head + i) % DOMED_CONSOLE_INDEX_MAX];
    if (s->time_ns < now_ns - 60 * minute_ns) break;
    const char *agent = name_of(index, s->agent);
    json_t *entry = json_object_get(activity, agent);
    if (entry == NULL) {
      json_t *minutes = json_array();
      for (int m = 0; m < 60; m++) json_array_append_new(minutes, json_integer(0));
      entry = json_pack("{s:o,s:I,s:I,s:I,s:I}", "per_minute", minutes, "executions", (json_int_t)0, "failed",
                        (json_int_t)0, "denials", (json_int_t)0, "redactions", (json_int_t)0);
      json_object_set_new(activity, agent, entry);
    }
    int64_t age = (now_ns - s->time_ns) / minute_ns;
    size_t slot = age < 0 ? 59 : (size_t)(59 - (age > 59 ? 59 : age));
    json_t *minutes = json_object_get(entry, "per_minute");
    json_array_set_new(minutes, slot, json_integer(json_integer_value(json_array_get(minutes, slot)) + 1));
    static const char *const counters[] = {"executions", "failed", "denials", "redactions"};
    json_int_t add[] = {1, s->has_exit && s->exit_code == 0 ? 0 : 1, s->denials, s->redactions};
    for (size_t c = 0; c < 4; c++)
      json_object_set_new(entry, counters[c],
                          json_integer(json_integer_value(json_object_get(entry, counters[c])) + add[c]));
  }
  json_t *calls = rc == 0 ? console_calls_last_hour(index->calls, now_ns) : NULL;
  const char *agent;
  json_t *entry, *counted;
  json_object_foreach(calls, agent, counted) {
    entry = json_object_get(activity, agent);
    if (entry == NULL) {
      json_t *executions = json_array();
      for (int m = 0; m < 60; m++) json_array_append_new(executions, json_integer(0));
      entry = json_pack("{s:o,s:I,s:I,s:I,s:I}", "per_minute", executions, "executions", (json_int_t)0,
                        "failed", (json_int_t)0, "denials", (json_int_t)0, "redactions", (json_int_t)0);
      json_object_set_new(activity, agent, entry);
    }
    json_object_update(entry, counted);
  }
  json_decref(calls);
  pthread_mutex_unlock(&index->lock);
  if (rc < 0) {
    json_decref(activity);
    return NULL;
  }
  /* agents with executions but no decision kept (older than the hour, or evicted) */
  json_object_foreach(activity, agent, entry) {
    if (json_object_get(entry, "calls_per_minute")) continue;
    json_t *minutes = json_array();
    for (int m = 0; m < 60; m++) json_array_append_new(minutes, json_integer(0));
    json_object_set_new(entry, "calls_per_minute", minutes);
    json_object_set_new(entry, "allow", json_integer(0));
    json_object_set_new(entry, "deny", json_integer(0));
  }
  return activity;
}

/* Reads the existing journal at start, then what was journalled every 5 s, so that a search seldom
 * has much to read first; ends when domed stops. */
static void *warm_up(void *context) {
  struct domed *domed = context;
  struct domed_console_index *index = domed->console_index;
  while (!atomic_load(&domed->stopping)) {
    dome_error err = {0};
    pthread_mutex_lock(&index->lock);
    if (catch_up(domed, index, &err) < 0)
      domed_log("warn", "console", "msg=\"execution index: %s\"", err.message);
    pthread_mutex_unlock(&index->lock);
    for (int i = 0; i < 20 && !atomic_load(&domed->stopping); i++)
      nanosleep(&(struct timespec){.tv_nsec = 250000000}, NULL);
  }
  return NULL;
}

int domed_console_index_start(struct domed *domed, dome_error *err) {
  struct domed_console_index *index = calloc(1, sizeof *index);
  if (index) {
    index->ring = calloc(DOMED_CONSOLE_INDEX_MAX, sizeof index->ring[0]);
    index->calls = console_calls_new(0);
    index->alerts = console_alerts_new(0, 0);
  }
  if (index == NULL || index->ring == NULL || index->calls == NULL || index->alerts == NULL) {
    if (index) {
      free(index->ring);
      console_calls_free(index->calls);
      console_alerts_free(index->alerts);
    }
    free(index);
    return dome_error_set(err, ENOMEM, "console: execution index: out of memory");
  }
  pthread_mutex_init(&index->lock, NULL);
  index->names = json_array();
  index->name_ids = json_object();
  index->pending = json_object();
  domed->console_index = index;
  index->warm_up_started = pthread_create(&index->warm_up, NULL, warm_up, domed) == 0;
  return 0;
}

void domed_console_index_stop(struct domed *domed) {
  struct domed_console_index *index = domed->console_index;
  if (index == NULL) return;
  if (index->warm_up_started) pthread_join(index->warm_up, NULL);
  pthread_mutex_destroy(&index->lock);
  json_decref(index->names);
  json_decref(index->name_ids);
  json_decref(index->pending);
  console_alerts_free(index->alerts);
  console_calls_free(index->calls);
  free(index->ring);
  free(index);
  domed->console_index = NULL;
}

json_t *domed_console_index_alerts(struct domed *domed, const struct console_alert_query *query,
                                   dome_error *err) {
  struct domed_console_index *index = domed->console_index;
  pthread_mutex_lock(&index->lock);
  int rc = catch_up(domed, index, err);
  json_t *found = rc < 0 ? NULL : console_alerts_list(index->alerts, query);
  pthread_mutex_unlock(&index->lock);
  return found;
}

int domed_console_index_alert(struct domed *domed, uint64_t seq, json_t **alert, dome_error *err) {
  struct domed_console_index *index = domed->console_index;
  pthread_mutex_lock(&index->lock);
  int rc = catch_up(domed, index, err);
  *alert = rc < 0 ? NULL : console_alerts_find(index->alerts, seq);
  pthread_mutex_unlock(&index->lock);
  return rc < 0 ? rc : 0;
}
