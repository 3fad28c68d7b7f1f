/* `dome audit replay EXEC_ID`: the steps of one execution as recorded in the journal, in seq order. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "supervisor/audit/journal.h"
#include "supervisor/replay/replay.h"

struct kind_map {
  const char *type;
  const char *kind;
};

static const struct kind_map kinds[] = {
    {"authz.decision", "authorization"},
    {"exec.start", "start"},
    {"exec.jail", "jail"},
    {"exec.output", "output"},
    {"exec.denial", "denial"},
    {"exec.shadow", "shadow"},
    {"exec.access", "access"},
    {"exec.redaction", "redaction"},
    {"exec.end", "end"},
    {"exec.rerun.result", "rerun"},
    {"exec.rerun.start", "rerun-start"},
};

static const char *kind_of(const char *type) {
  for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
    if (strcmp(kinds[i].type, type) == 0) return kinds[i].kind;
  return "event";
}

/* Members not repeated in a step (the ids are the timeline's, seq/time/type are the step's own). */
static bool skipped(const char *key) {
  static const char *keys[] = {"seq", "time", "type", "exec_id", "tool", "request"};
  for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
    if (strcmp(key, keys[i]) == 0) return true;
  return false;
}

int replay_timeline(const char *journal_dir, const char *exec_id, replay_timeline_fn fn, void *context,
                    dome_error *err) {
  if (journal_dir == NULL) journal_dir = JOURNAL_DEFAULT_DIRECTORY;
  journal_filter filter = {.exec_id = exec_id};
  journal_reader *reader = NULL;
  int rc = journal_reader_open(journal_dir, &filter, &reader, err);
  if (rc < 0) return dome_error_wrap(err, "journal `%s`", journal_dir);
  int64_t start_ns = 0;
  int steps = 0;
  bool ended = false;
  for (;;) {
    journal_record record;
    rc = journal_reader_next(reader, true, &record, err);
    if (rc <= 0) {
      if (rc < 0 && rc != -ENOENT) dome_error_wrap(err, "journal `%s`", journal_dir);
      if (rc == -ENOENT) rc = 0;
      break;
    }
    json_t *event = record.event;
    const char *type = json_string_value(json_object_get(event, "type"));
    if (type == NULL) type = "?";
    /* The original's steps end at its exec.end; rerun results linked to it come later (rerun_of). */
    bool linked = json_object_get(event, "rerun_of") != NULL;
    if (ended && strcmp(type, "exec.rerun.result") != 0 && !linked) {
      json_decref(event);
      continue;
    }
    if (strcmp(type, "exec.start") == 0 && start_ns == 0) start_ns = record.time_ns;
    json_t *step = json_pack("{s:I,s:O,s:s,s:s}", "seq", (json_int_t)record.seq, "time",
                             json_object_get(event, "time"), "kind", kind_of(type), "type", type);
    json_t *offset = json_object_get(event, "offset_ms");
    if (json_is_integer(offset))
      json_object_set(step, "offset_ms", offset);
    else
      json_object_set_new(step, "offset_ms",
                          json_integer(start_ns ? (record.time_ns - start_ns) / 1000000 : 0));
    const char *key;
    json_t *value;
    json_object_foreach(event, key, value) if (!skipped(key) && !json_object_get(step, key))
        json_object_set(step, key, value);
    if (strcmp(type, "exec.end") == 0) ended = true;
    json_decref(event); /* `type` points into it */
    steps++;
    rc = fn(context, step, err);
    json_decref(step);
    if (rc < 0) break;
  }
  journal_reader_close(reader);
  if (rc < 0) return rc;
  if (steps == 0)
    return dome_error_set(err, ENOENT, "no execution `%s` in journal `%s`", exec_id, journal_dir);
  return steps;
}

static int collect_step(void *context, json_t *step, dome_error *err) {
  json_t *timeline = context;
  json_t *steps = json_object_get(timeline, "steps");
  static const char *ids[] = {"agent", "actas", "policy_version"};
  for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++)
    if (!json_object_get(timeline, ids[i]) && json_is_string(json_object_get(step, ids[i])))
      json_object_set(timeline, ids[i], json_object_get(step, ids[i]));
  if (json_array_append(steps, step) < 0) return dome_error_set(err, ENOMEM, "timeline");
  return 0;
}

int replay_timeline_json(const char *journal_dir, const char *exec_id, json_t **timeline, dome_error *err) {
  json_t *result = json_pack("{s:s,s:[]}", "exec_id", exec_id, "steps");
  if (result == NULL) return dome_error_set(err, ENOMEM, "timeline");
  int rc = replay_timeline(journal_dir, exec_id, collect_step, result, err);
  if (rc < 0) {
    json_decref(result);
    return rc;
  }
  *timeline = result;
  return 0;
}
