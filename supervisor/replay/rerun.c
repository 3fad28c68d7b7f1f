/* `dome audit replay EXEC_ID --rerun`: read an execution's inputs and outcome back from the journal, run
 * them again in a fresh jail (optionally re-authorized under other rules) and report what differs. */
#include <errno.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "supervisor/audit/journal.h"
#include "supervisor/blob/blob.h"
#include "supervisor/replay/replay_internal.h"

/* An input member of exec.start: inline text, or its blob. */
static int input_of(const char *journal_dir, json_t *holder, const char *member, bool required, json_t **out,
                    dome_error *err) {
  *out = NULL;
  json_t *inline_value = json_object_get(holder, member);
  if (json_is_string(inline_value)) {
    *out = json_incref(inline_value);
    return 0;
  }
  char key[64];
  snprintf(key, sizeof key, "%s_sha256", member);
  const char *hex = json_string_value(json_object_get(holder, key));
  if (hex == NULL) {
    if (!required) return 0;
    return dome_error_set(err, ENODATA, "exec.start records neither `%s` nor `%s`", member, key);
  }
  snprintf(key, sizeof key, "%s_stored", member);
  if (json_is_false(json_object_get(holder, key)))
    return dome_error_set(
        err, ENODATA,
        "exec.start `%s` was recorded by digest only (%s_stored false: a blob quota refused "
        "its bytes); it cannot be re-run",
        member, member);
  char *data = NULL;
  size_t length = 0;
  int rc = blob_content_get(journal_dir, hex, &data, &length, err);
  if (rc < 0) return dome_error_wrap(err, "exec.start `%s`", key);
  *out = json_stringn(data, length);
  free(data);
  if (*out == NULL) return dome_error_set(err, EBADMSG, "blob %s of `%s`: not UTF-8 text", hex, member);
  return 0;
}

static void add_outcome_output(json_t *outcome, const char *stream, json_t *data) {
  json_t *all = json_object_get(outcome, stream);
  size_t a = json_string_length(all), b = json_string_length(data);
  char *joined = malloc(a + b + 1);
  if (joined == NULL) return;
  memcpy(joined, json_string_value(all), a);
  memcpy(joined + a, json_string_value(data), b);
  json_object_set_new(outcome, stream, json_stringn_nocheck(joined, a + b));
  free(joined);
}

int replay_inputs(const char *journal_dir, const char *exec_id, json_t **inputs, dome_error *err) {
  if (journal_dir == NULL) journal_dir = JOURNAL_DEFAULT_DIRECTORY;
  journal_filter filter = {.exec_id = exec_id};
  journal_reader *reader = NULL;
  int rc = journal_reader_open(journal_dir, &filter, &reader, err);
  if (rc < 0) return dome_error_wrap(err, "journal `%s`", journal_dir);
  json_t *result = json_pack("{s:s,s:{},s:[]}", "exec_id", exec_id, "files", "env_names");
  json_t *outcome = json_pack("{s:s,s:s,s:[],s:[]}", "stdout", "", "stderr", "", "denials", "redactions");
  bool started = false, ended = false;
  while (!ended) {
    journal_record record;
    rc = journal_reader_next(reader, true, &record, err);
    if (rc <= 0) {
      if (rc < 0) dome_error_wrap(err, "journal `%s`", journal_dir);
      break;
    }
    json_t *event = record.event;
    const char *type = json_string_value(json_object_get(event, "type"));
    if (type == NULL) type = "";
    if (strcmp(type, "authz.decision") == 0) {
      json_t *request = json_object_get(event, "request");
      if (request) json_object_set(result, "request", request);
      json_object_set_new(
          result, "authorization",
          json_pack(
              "{s:O,s:O}", "decision", json_object_get(event, "decision"), "determining",
              json_object_get(event, "determining") ? json_object_get(event, "determining") : json_array()));
      /* a decision without `request`: rebuilt from its ids when rules are given */
      if (request == NULL) json_object_set(result, "decision_event", event);
    } else if (strcmp(type, "exec.start") == 0 && !started) {
      started = true;
      static const char *copied[] = {
          "agent",  "actas",          "policy_version", "language",         "image",      "image_digest",
          "limits", "classification", "env_names",      "env_short_values", "env_values", "env_secret_names"};
      for (size_t i = 0; i < sizeof copied / sizeof copied[0]; i++) {
        json_t *value = json_object_get(event, copied[i]);
        if (value) json_object_set(result, copied[i], value);
      }
      json_t *value = NULL;
      if ((rc = input_of(journal_dir, event, "code", true, &value, err)) == 0) {
        json_object_set_new(result, "code", value);
        rc = input_of(journal_dir, event, "stdin", false, &value, err);
        if (rc == 0 && value) json_object_set_new(result, "stdin", value);
      }
      /* a file list too large for one event is recorded by digest: its canonical JSON in the blob store */
      json_t *listed = json_incref(json_object_get(event, "files"));
      if (rc == 0 && listed == NULL && json_object_get(event, "files_sha256")) {
        json_t *text = NULL;
        rc = input_of(journal_dir, event, "files", true, &text, err);
        if (rc == 0) {
          listed = json_loadb(json_string_value(text), json_string_length(text), 0, NULL);
          if (!json_is_array(listed))
            rc = dome_error_set(err, EBADMSG, "exec.start `files_sha256`: the blob is not a JSON array");
        }
        json_decref(text);
      }
      size_t i;
      json_t *file;
      json_array_foreach(listed, i, file) {
        if (rc < 0) break;
        const char *path = json_string_value(json_object_get(file, "path"));
        if (path == NULL) {
          rc = dome_error_set(err, ENODATA, "exec.start files[%zu]: no `path`", i);
          break;
        }
        rc = input_of(journal_dir, file, "content", true, &value, err);
        if (rc == 0) json_object_set_new(json_object_get(result, "files"), path, value);
      }
      json_decref(listed);
    } else if (strcmp(type, "exec.output") == 0) {
      const char *stream = json_string_value(json_object_get(event, "stream"));
      json_t *data = json_object_get(event, "data");
      if (stream && json_is_string(data) && (!strcmp(stream, "stdout") || !strcmp(stream, "stderr")))
        add_outcome_output(outcome, stream, data);
    } else if (strcmp(type, "exec.denial") == 0) {
      json_array_append_new(json_object_get(outcome, "denials"),
                            json_pack("{s:O,s:O}", "hook", json_object_get(event, "hook"), "object",
                                      json_object_get(event, "object")));
    } else if (strcmp(type, "exec.redaction") == 0) {
      json_array_append_new(
          json_object_get(outcome, "redactions"),
          json_pack("{s:O,s:O,s:O}", "field", json_object_get(event, "field"), "detector",
                    json_object_get(event, "detector"), "count", json_object_get(event, "count")));
    } else if (strcmp(type, "exec.end") == 0) {
      ended = true;
      static const char *copied[] = {"exit_code", "signal", "timed_out", "oom_killed", "error"};
      for (size_t i = 0; i < sizeof copied / sizeof copied[0]; i++) {
        json_t *value = json_object_get(event, copied[i]);
        if (value) json_object_set(outcome, copied[i], value);
      }
    }
    json_decref(event);
    if (rc < 0) break;
  }
  journal_reader_close(reader);
  if (rc == 0 && !started)
    rc = dome_error_set(err, ENOENT, "no exec.start of execution `%s` in journal `%s`", exec_id, journal_dir);
  if (rc < 0) {
    json_decref(result);
    json_decref(outcome);
    return rc;
  }
  json_object_set_new(result, "outcome", outcome);
  *inputs = result;
  return 0;
}

static void differ(json_t *differences, const char *what, json_t *recorded, json_t *rerun) {
  if (recorded == NULL) recorded = json_null();
  if (rerun == NULL) rerun = json_null();
  if (json_equal(recorded, rerun)) return;
  json_array_append_new(differences,
                        json_pack("{s:s,s:O,s:O}", "what", what, "recorded", recorded, "rerun", rerun));
}

/* Redaction summaries compared as sets of {field, detector, count}. */
static json_t *sorted_redactions(json_t *list) {
  json_t *keyed = json_object();
  size_t i;
  json_t *entry;
  json_array_foreach(list, i, entry) {
    char key[512];
    snprintf(key, sizeof key, "%s/%s", json_string_value(json_object_get(entry, "field")),
             json_string_value(json_object_get(entry, "detector")));
    json_object_set(keyed, key, json_object_get(entry, "count"));
  }
  return keyed;
}

static int authorize_again(const replay_rerun_options *options, json_t *inputs, json_t *report, bool *allow) {
  *allow = true;
  if (options->rules == NULL) return 0;
  json_t *event = json_object_get(inputs, "decision_event");
  json_t *built = NULL;
  if (event == NULL) {
    json_t *request = json_object_get(inputs, "request");
    if (request == NULL) {
      json_object_set_new(report, "authorization",
                          json_pack("{s:s}", "error", "the record holds no authorization request"));
      return 0;
    }
    const char *decision =
        json_string_value(json_object_get(json_object_get(inputs, "authorization"), "decision"));
    built = json_pack("{s:s,s:s,s:O}", "type", "authz.decision", "decision", decision ? decision : "allow",
                      "request", request);
    event = built;
  }
  simulate_summary summary;
  memset(&summary, 0, sizeof summary);
  json_t *diff = NULL;
  const char *message = NULL;
  int rc = replay_simulate_event(options->rules, event, &summary, &diff, &message);
  json_decref(built);
  if (rc < 0) return rc;
  const char *recorded =
      json_string_value(json_object_get(json_object_get(inputs, "authorization"), "decision"));
  bool recorded_allow = recorded == NULL || strcmp(recorded, "allow") == 0;
  *allow = diff ? !recorded_allow : recorded_allow;
  json_t *authorization = json_pack("{s:s,s:s}", "recorded", recorded_allow ? "allow" : "deny", "rerun",
                                    *allow ? "allow" : "deny");
  if (diff)
    json_object_set(authorization, "determining",
                    json_object_get(json_object_get(diff, "new"), "determining"));
  if (message && message[0]) json_object_set_new(authorization, "error", json_string(message));
  json_object_set_new(report, "authorization", authorization);
  json_decref(diff);
  return 0;
}

int replay_rerun(const replay_rerun_options *options, json_t **report, dome_error *err) {
  json_t *inputs = NULL;
  int rc = replay_inputs(options->journal_dir, options->exec_id, &inputs, err);
  if (rc < 0) return rc;
  unsigned char random_bytes[8];
  randombytes_buf(random_bytes, sizeof random_bytes);
  char exec_id[17];
  sodium_bin2hex(exec_id, sizeof exec_id, random_bytes, sizeof random_bytes);
  json_t *result =
      json_pack("{s:s,s:s,s:[]}", "exec_id", exec_id, "rerun_of", options->exec_id, "differences");
  json_t *differences = json_object_get(result, "differences");
  json_t *recorded = json_object_get(inputs, "outcome");
  bool allow = true;
  if ((rc = authorize_again(options, inputs, result, &allow)) < 0) {
    dome_error_set(err, -rc, "re-authorize `%s`", options->exec_id);
    goto out;
  }
  /* Secrets are not recorded: stand-ins of the same names (redacted the same way) take their place; the
   * agent's own values are, when they were small enough. */
  json_t *env = json_object();
  size_t i;
  json_t *name;
  json_array_foreach(json_object_get(inputs, "env_names"), i, name) {
    json_t *short_value = json_object_get(json_object_get(inputs, "env_values"), json_string_value(name));
    if (short_value == NULL)
      short_value = json_object_get(json_object_get(inputs, "env_short_values"), json_string_value(name));
    char stand_in[300];
    snprintf(stand_in, sizeof stand_in, "dome-replay-stand-in-%s", json_string_value(name));
    json_object_set_new(env, json_string_value(name),
                        short_value ? json_incref(short_value) : json_string(stand_in));
  }
  json_object_set_new(inputs, "env", env);
  json_object_set_new(inputs, "rerun_of", json_string(options->exec_id));
  json_object_set_new(inputs, "exec_id", json_string(exec_id));
  if (options->append) {
    json_t *event = json_pack("{s:s,s:s,s:s}", "type", "exec.rerun.start", "exec_id", exec_id, "rerun_of",
                              options->exec_id);
    rc = options->append(options->context, event, err);
    json_decref(event);
    if (rc < 0) goto out;
  }
  if (!allow) {
    json_array_append_new(differences, json_pack("{s:s,s:s,s:s}", "what", "authorization", "recorded",
                                                 "allow", "rerun", "deny"));
  } else {
    json_t *outcome = NULL;
    replay_execute_options execute = {.journal_dir = options->journal_dir,
                                      .image_store = options->image_store,
                                      .rules = options->rules,
                                      .append = options->append,
                                      .context = options->context};
    rc = replay_execute(inputs, &execute, &outcome, err);
    if (rc < 0) goto out;
    static const char *fields[] = {"exit_code", "signal", "timed_out", "oom_killed",
                                   "stdout",    "stderr", "denials"};
    for (size_t k = 0; k < sizeof fields / sizeof fields[0]; k++)
      differ(differences, fields[k], json_object_get(recorded, fields[k]),
             json_object_get(outcome, fields[k]));
    json_t *a = sorted_redactions(json_object_get(recorded, "redactions"));
    json_t *b = sorted_redactions(json_object_get(outcome, "redactions"));
    differ(differences, "redactions", a, b);
    json_decref(a);
    json_decref(b);
    json_object_set_new(result, "result", outcome);
  }
  json_object_set_new(result, "same", json_boolean(json_array_size(differences) == 0));
  if (options->append) {
    /* Linked to the original: exec_id is the original's (it shows in its timeline), rerun_exec_id the new. */
    json_t *event = json_pack("{s:s,s:s,s:s,s:O,s:O}", "type", "exec.rerun.result", "exec_id",
                              options->exec_id, "rerun_exec_id", exec_id, "differences", differences, "same",
                              json_object_get(result, "same"));
    rc = options->append(options->context, event, err);
    json_decref(event);
    if (rc < 0) goto out;
  }
  *report = json_incref(result);
out:
  json_decref(result);
  json_decref(inputs);
  return rc < 0 ? rc : 0;
}
