/* `dome audit replay --session SESSION_ID`: one sandbox session as one timeline — its own events
 * (session.created ... session.closed) and every event of the calls made in it (their decision and
 * what the call journalled), in seq order. */
#include <errno.h>
#include <string.h>

#include "supervisor/audit/journal.h"
#include "supervisor/replay/replay.h"

/* More calls than this in one session is refused rather than held in memory. */
enum { SESSION_CALLS_MAX = 1000000 };

struct kind_map {
  const char *type;
  const char *kind;
};

static const struct kind_map kinds[] = {
    {"session.created", "created"},      {"session.exec", "cell"},      {"session.file", "file"},
    {"session.snapshot", "snapshot"},    {"session.forked", "forked"},  {"session.rules", "rules"},
    {"session.close", "close"},          {"session.closed", "closed"},  {"session.expired", "closed"},
    {"authz.decision", "authorization"}, {"call.rejected", "rejected"}, {"session.list", "list"},
    {"session.unknown", "unknown"},
};

static const char *kind_of(const char *type) {
  for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
    if (strcmp(kinds[i].type, type) == 0) return kinds[i].kind;
  return "event";
}

static bool of_session(json_t *event, const char *session_id) {
  const char *id = json_string_value(json_object_get(event, "session_id"));
  return id && strcmp(id, session_id) == 0;
}

/* Pass one: the exec ids of the calls made in the session (their events that name it). */
static int collect_calls(const char *journal_dir, const char *session_id, json_t *calls, dome_error *err) {
  journal_filter filter = {0};
  journal_reader *reader = NULL;
  int rc = journal_reader_open(journal_dir, &filter, &reader, err);
  if (rc < 0) return dome_error_wrap(err, "journal `%s`", journal_dir);
  for (;;) {
    journal_record record;
    rc = journal_reader_next(reader, true, &record, err);
    if (rc <= 0) break;
    const char *exec_id = json_string_value(json_object_get(record.event, "exec_id"));
    if (exec_id && of_session(record.event, session_id)) {
      if (json_object_size(calls) >= SESSION_CALLS_MAX) {
        rc = dome_error_set(err, E2BIG, "session `%s` has more than %d calls", session_id, SESSION_CALLS_MAX);
        json_decref(record.event);
        break;
      }
      json_object_set_new(calls, exec_id, json_true());
    }
    json_decref(record.event);
  }
  journal_reader_close(reader);
  if (rc == -ENOENT) rc = 0;
  if (rc < 0 && rc != -E2BIG) dome_error_wrap(err, "journal `%s`", journal_dir);
  return rc;
}

int replay_session_timeline(const char *journal_dir, const char *session_id, replay_timeline_fn fn,
                            void *context, dome_error *err) {
  if (journal_dir == NULL) journal_dir = JOURNAL_DEFAULT_DIRECTORY;
  if (session_id == NULL || session_id[0] == '\0') return dome_error_set(err, EINVAL, "no session id");
  json_t *calls = json_object();
  if (calls == NULL) return dome_error_set(err, ENOMEM, "session timeline");
  int rc = collect_calls(journal_dir, session_id, calls, err);
  if (rc < 0) {
    json_decref(calls);
    return rc;
  }
  journal_filter filter = {0};
  journal_reader *reader = NULL;
  if ((rc = journal_reader_open(journal_dir, &filter, &reader, err)) < 0) {
    json_decref(calls);
    return dome_error_wrap(err, "journal `%s`", journal_dir);
  }
  int64_t created_ns = 0;
  int steps = 0;
  for (;;) {
    journal_record record;
    rc = journal_reader_next(reader, true, &record, err);
    if (rc <= 0) {
      if (rc < 0 && rc != -ENOENT) dome_error_wrap(err, "journal `%s`", journal_dir);
      if (rc == -ENOENT) rc = 0;
      break;
    }
    json_t *event = record.event;
    const char *exec_id = json_string_value(json_object_get(event, "exec_id"));
    if (!of_session(event, session_id) && !(exec_id && json_object_get(calls, exec_id))) {
      json_decref(event);
      continue;
    }
    const char *type = json_string_value(json_object_get(event, "type"));
    if (type == NULL) type = "?";
    if (created_ns == 0) created_ns = record.time_ns;
    json_t *step = json_pack("{s:I,s:O,s:s,s:s,s:I}", "seq", (json_int_t)record.seq, "time",
                             json_object_get(event, "time"), "kind", kind_of(type), "type", type, "offset_ms",
                             (json_int_t)((record.time_ns - created_ns) / 1000000));
    const char *key;
    json_t *value;
    json_object_foreach(event, key, value) {
      if (strcmp(key, "request") != 0 && !json_object_get(step, key)) json_object_set(step, key, value);
    }
    json_decref(event);
    steps++;
    rc = step ? fn(context, step, err) : dome_error_set(err, ENOMEM, "session timeline");
    json_decref(step);
    if (rc < 0) break;
  }
  journal_reader_close(reader);
  json_decref(calls);
  if (rc < 0) return rc;
  if (steps == 0)
    return dome_error_set(err, ENOENT, "no session `%s` in journal `%s`", session_id, journal_dir);
  return steps;
}

static int collect_step(void *context, json_t *step, dome_error *err) {
  json_t *timeline = context;
  if (!json_object_get(timeline, "agent") && json_is_string(json_object_get(step, "agent")))
    json_object_set(timeline, "agent", json_object_get(step, "agent"));
  if (json_array_append(json_object_get(timeline, "steps"), step) < 0)
    return dome_error_set(err, ENOMEM, "session timeline");
  return 0;
}

int replay_session_timeline_json(const char *journal_dir, const char *session_id, json_t **timeline,
                                 dome_error *err) {
  json_t *result = json_pack("{s:s,s:[]}", "session_id", session_id ? session_id : "", "steps");
  if (result == NULL) return dome_error_set(err, ENOMEM, "session timeline");
  int rc = replay_session_timeline(journal_dir, session_id, collect_step, result, err);
  if (rc < 0) {
    json_decref(result);
    return rc;
  }
  *timeline = result;
  return 0;
}
