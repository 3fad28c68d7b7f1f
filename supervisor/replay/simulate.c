/* `dome rules simulate`: every recorded request re-evaluated against candidate rules, compared with the
 * recorded decision. Streams the journal (one event in memory at a time); diffs go to a callback. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/validate/validate.h"
#include "supervisor/audit/journal.h"
#include "supervisor/common/cleanup.h"
#include "supervisor/replay/replay_internal.h"

int replay_simulate_policy_parse(const char *text, size_t length, const char *file, bool validate,
                                 simulate_policy **out, dome_error *err) {
  return replay_simulate_policy_parse_typed(text, length, file, validate, NULL, out, err);
}

int replay_simulate_policy_parse_typed(const char *text, size_t length, const char *file, bool validate,
                                       const char *schema_text, simulate_policy **out, dome_error *err) {
  if (file == NULL) file = "rules";
  struct simulate_policy *policy = calloc(1, sizeof *policy);
  if (policy == NULL) return dome_error_set(err, ENOMEM, "%s: out of memory", file);
  policy->text = malloc(length + 1);
  policy->file = strdup(file);
  if (policy->text == NULL || policy->file == NULL) {
    replay_simulate_policy_free(policy);
    return dome_error_set(err, ENOMEM, "%s: out of memory", file);
  }
  memcpy(policy->text, text, length);
  policy->text[length] = '\0';
  policy->length = length;
  cedar_schema_error schema_error;
  memset(&schema_error, 0, sizeof schema_error);
  int rc = schema_text ? cedar_schema_parse(schema_text, strlen(schema_text), CEDAR_SCHEMA_DOME_PATH,
                                            &policy->schema, &schema_error)
                       : cedar_schema_load_dome(&policy->schema, &schema_error);
  if (rc < 0) {
    char message[900];
    replay_simulate_policy_free(policy);
    return dome_error_set(err, -rc, "Dome schema: %s",
                          cedar_schema_error_format(&schema_error, message, sizeof message));
  }
  cedar_diagnostic diag;
  memset(&diag, 0, sizeof diag);
  size_t start = 0;
  while (start < length &&
         (text[start] == ' ' || text[start] == '\n' || text[start] == '\t' || text[start] == '\r'))
    start++;
  rc = start < length && text[start] == '{'
           ? cedar_policy_set_parse_json(text, length, file, &policy->set, &diag)
           : cedar_policy_set_parse(text, length, file, CEDAR_PARSE_ID_ANNOTATIONS, &policy->set, &diag);
  if (rc < 0) {
    char message[900];
    replay_simulate_policy_free(policy);
    return dome_error_set(err, -rc, "%s", cedar_diagnostic_format(&diag, message, sizeof message));
  }
  if (validate) {
    cedar_validation_result result;
    memset(&result, 0, sizeof result);
    rc = cedar_validate(policy->schema, policy->set, &result);
    if (rc < 0) {
      replay_simulate_policy_free(policy);
      return dome_error_set(err, -rc, "%s: validation failed", file);
    }
    if (!cedar_validation_passed(&result)) {
      char message[900] = "";
      for (size_t i = 0; i < result.count; i++)
        if (!result.issues[i].is_warning) {
          cedar_validation_issue_format(&result.issues[i], message, sizeof message);
          break;
        }
      size_t errors = result.error_count;
      cedar_validation_result_release(&result);
      replay_simulate_policy_free(policy);
      return dome_error_set(err, EINVAL, "%s (%zu error%s against the Dome schema)", message, errors,
                            errors == 1 ? "" : "s");
    }
    cedar_validation_result_release(&result);
  }
  *out = policy;
  return 0;
}

int replay_simulate_policy_load(const char *path, bool validate, simulate_policy **out, dome_error *err) {
  return replay_simulate_policy_load_typed(path, validate, NULL, out, err);
}

int replay_simulate_policy_load_typed(const char *path, bool validate, const char *schema_text,
                                      simulate_policy **out, dome_error *err) {
  _cleanup_fclose_ FILE *in = fopen(path, "re");
  if (in == NULL) return dome_error_set_errno(err, errno, "open `%s`", path);
  _cleanup_free_ char *text = NULL;
  size_t size = 0;
  FILE *buffer = open_memstream(&text, &size);
  if (buffer == NULL) return dome_error_set_errno(err, errno, "read `%s`", path);
  char chunk[65536];
  size_t n;
  while ((n = fread(chunk, 1, sizeof chunk, in)) > 0) {
    if (size + n > CEDAR_MAX_TEXT_BYTES) {
      fclose(buffer);
      return dome_error_set(err, E2BIG, "`%s`: larger than %u bytes", path, CEDAR_MAX_TEXT_BYTES);
    }
    fwrite(chunk, 1, n, buffer);
  }
  int read_error = ferror(in);
  fclose(buffer);
  if (read_error) return dome_error_set_errno(err, EIO, "read `%s`", path);
  return replay_simulate_policy_parse_typed(text ? text : "", size, path, validate, schema_text, out, err);
}

void replay_simulate_policy_free(simulate_policy *policy) {
  if (policy == NULL) return;
  cedar_policy_set_free(policy->set);
  cedar_schema_free(policy->schema);
  free(policy->text);
  free(policy->file);
  free(policy);
}

json_t *replay_simulate_summary_json(const simulate_summary *s) {
  return json_pack("{s:I,s:I,s:I,s:I,s:I,s:I,s:I}", "evaluated", (json_int_t)s->evaluated, "unchanged",
                   (json_int_t)s->unchanged, "allow_to_deny", (json_int_t)s->allow_to_deny, "deny_to_allow",
                   (json_int_t)s->deny_to_allow, "errors", (json_int_t)s->errors, "reconstructed",
                   (json_int_t)s->reconstructed, "events_read", (json_int_t)s->events_read);
}

/* The recorded decision: "allow"/"deny" (kernel events: exec.denial deny, exec.access allow). */
static bool recorded_allow(json_t *event, const char *type) {
  const char *decision = json_string_value(json_object_get(event, "decision"));
  if (decision) return strcmp(decision, "allow") == 0;
  return strcmp(type, "exec.access") == 0;
}

/* domed denies some calls after Cedar allowed them (tool on another gateway, agent lacking the tool's
 * capability: `reason` other than "policy"). Those checks do not depend on rules: such a call stays denied.
 */
static bool gate_denied(json_t *event) {
  const char *reason = json_string_value(json_object_get(event, "reason"));
  return reason && strcmp(reason, "policy") != 0;
}

static json_t *determining_of(json_t *event) {
  json_t *determining = json_object_get(event, "determining");
  if (json_is_array(determining)) return json_incref(determining);
  const char *policy_id = json_string_value(json_object_get(event, "policy_id"));
  return policy_id ? json_pack("[s]", policy_id) : json_array();
}

static json_t *make_diff(json_t *event, const char *type, const struct rebuilt_request *request,
                         bool old_allow, bool new_allow, json_t *new_determining, json_t *new_errors) {
  json_t *seq = json_object_get(event, "seq"), *time = json_object_get(event, "time");
  json_t *diff =
      json_pack("{s:O,s:O,s:s,s:s}", "seq", seq ? seq : json_null(), "time", time ? time : json_null(),
                "type", type, "change", old_allow ? "allow_to_deny" : "deny_to_allow");
  if (diff == NULL) return NULL;
  static const char *ids[] = {"agent", "actas", "exec_id"};
  for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) {
    json_t *value = json_object_get(event, ids[i]);
    if (json_is_string(value)) json_object_set(diff, ids[i], value);
  }
  if (request->json) {
    json_object_set_new(diff, "principal", replay_request_uid_text(&request->request.principal));
    json_object_set_new(diff, "action", replay_request_uid_text(&request->request.action));
    json_object_set_new(diff, "resource", replay_request_uid_text(&request->request.resource));
  }
  if (request->reconstructed) json_object_set_new(diff, "reconstructed", json_true());
  json_t *version = json_object_get(event, "policy_version");
  json_object_set_new(diff, "old",
                      json_pack("{s:s,s:o,s:O}", "decision", old_allow ? "allow" : "deny", "determining",
                                determining_of(event), "policy_version", version ? version : json_null()));
  json_object_set_new(diff, "new",
                      json_pack("{s:s,s:O,s:O}", "decision", new_allow ? "allow" : "deny", "determining",
                                new_determining, "errors", new_errors));
  return diff;
}

static _Thread_local char first_error[1024];

static int simulate_one(const struct simulate_policy *policy, struct request_cache *cache, json_t *event,
                        simulate_summary *summary, json_t **diff) {
  *diff = NULL;
  first_error[0] = '\0';
  const char *type = json_string_value(json_object_get(event, "type"));
  if (!replay_request_event_type(type)) return 0;
  struct rebuilt_request request;
  char message[1024];
  int rc = replay_request_rebuild(policy, cache, event, &request, message, sizeof message);
  if (rc == 0 || rc == -ENOMEM) {
    replay_rebuilt_request_release(&request);
    return rc;
  }
  bool old_allow = recorded_allow(event, type);
  bool new_allow = false;
  json_t *determining = json_array(), *errors = json_array();
  if (rc < 0) {
    json_array_append_new(errors, json_pack("{s:s,s:s}", "policy", "", "message", message));
  } else {
    cedar_response response;
    memset(&response, 0, sizeof response);
    if (cedar_authorize(policy->set, request.entities, &request.request, &response) < 0) {
      json_decref(determining);
      json_decref(errors);
      replay_rebuilt_request_release(&request);
      return -ENOMEM;
    }
    new_allow = response.decision == CEDAR_ALLOW;
    for (size_t i = 0; i < response.reason_count; i++)
      json_array_append_new(determining, json_string(response.reason[i]));
    for (size_t i = 0; i < response.error_count; i++)
      json_array_append_new(errors, json_pack("{s:s,s:s}", "policy", response.errors[i].policy_id, "message",
                                              response.errors[i].message ? response.errors[i].message : ""));
    cedar_response_release(&response);
    if (strcmp(type, "authz.decision") == 0 && gate_denied(event)) new_allow = false;
  }
  summary->evaluated++;
  if (summary->first_seq == 0)
    summary->first_seq = (uint64_t)json_integer_value(json_object_get(event, "seq"));
  summary->last_seq = (uint64_t)json_integer_value(json_object_get(event, "seq"));
  if (request.reconstructed) summary->reconstructed++;
  if (json_array_size(errors) > 0) {
    summary->errors++;
    json_t *e = json_array_get(errors, 0);
    const char *policy_id = json_string_value(json_object_get(e, "policy"));
    snprintf(first_error, sizeof first_error, "%s%s%s%s", policy_id && policy_id[0] ? "policy `" : "",
             policy_id && policy_id[0] ? policy_id : "", policy_id && policy_id[0] ? "`: " : "",
             json_string_value(json_object_get(e, "message")));
  }
  if (old_allow == new_allow) {
    summary->unchanged++;
  } else {
    if (old_allow)
      summary->allow_to_deny++;
    else
      summary->deny_to_allow++;
    *diff = make_diff(event, type, &request, old_allow, new_allow, determining, errors);
  }
  json_decref(determining);
  json_decref(errors);
  replay_rebuilt_request_release(&request);
  if (old_allow != new_allow && *diff == NULL) return -ENOMEM;
  return 1;
}

int replay_simulate_event(const simulate_policy *policy, json_t *event, simulate_summary *summary,
                          json_t **diff, const char **error_message) {
  struct request_cache cache;
  memset(&cache, 0, sizeof cache);
  int rc = simulate_one(policy, &cache, event, summary, diff);
  replay_request_cache_clear(&cache);
  if (error_message) *error_message = first_error;
  return rc;
}

/* Cheap test on the canonical line before parsing it: every request event's line holds its type. */
static bool may_be_request(const char *line, size_t length) {
  static const char *needles[] = {"\"type\":\"authz.decision\"", "\"type\":\"exec.denial\"",
                                  "\"type\":\"exec.access\""};
  for (size_t i = 0; i < sizeof needles / sizeof needles[0]; i++)
    if (memmem(line, length, needles[i], strlen(needles[i]))) return true;
  return false;
}

/* The top-level `"request":{...}` member of a canonical event line: [*start, *end) is the object's text.
 * A scan that tracks strings and depth, so a "request" inside a string or a nested object is not taken. */
static bool find_request(const char *line, size_t length, size_t *start, size_t *end) {
  size_t at = 0, key, key_length;
  while (journal_line_next_key(line, length, &at, &key, &key_length)) {
    if (key_length != 7 || memcmp(line + key, "request", 7) != 0) continue;
    if (length - at < 2 || line[at] != ':' || line[at + 1] != '{') continue;
    size_t open = at + 1;
    int inner = 0;
    bool quoted = false;
    for (size_t k = open; k < length; k++) {
      char d = line[k];
      if (quoted) {
        if (d == '\\')
          k++;
        else if (d == '"')
          quoted = false;
      } else if (d == '"') {
        quoted = true;
      } else if (d == '{' || d == '[') {
        inner++;
      } else if ((d == '}' || d == ']') && --inner == 0) {
        *start = open;
        *end = k + 1;
        return true;
      }
    }
    return false;
  }
  return false;
}

/* The last recorded request seen, by its exact text: consecutive events usually record the same request
 * (one agent calling one tool), so its JSON is parsed once and shared, and the entity and context caches
 * then hit at once. Bounded: one entry. */
struct line_cache {
  char *text;
  size_t length;
  json_t *request;
  char *scratch; /* the line with the request replaced by 0 */
  size_t scratch_size;
};

static void line_cache_clear(struct line_cache *cache) {
  free(cache->text);
  free(cache->scratch);
  json_decref(cache->request);
  memset(cache, 0, sizeof *cache);
}

/* Parse a line, sharing the request member's JSON with the previous line when its text is the same. */
static json_t *load_event(struct line_cache *cache, const char *line, size_t length, json_error_t *error) {
  size_t start, end;
  if (!find_request(line, length, &start, &end)) return json_loadb(line, length, 0, error);
  size_t request_length = end - start;
  if (cache->request == NULL || cache->length != request_length ||
      memcmp(cache->text, line + start, request_length) != 0) {
    json_t *request = json_loadb(line + start, request_length, 0, error);
    char *text = malloc(request_length);
    if (request == NULL || text == NULL) {
      json_decref(request);
      free(text);
      return request == NULL ? NULL : json_loadb(line, length, 0, error);
    }
    memcpy(text, line + start, request_length);
    free(cache->text);
    json_decref(cache->request);
    cache->text = text;
    cache->length = request_length;
    cache->request = request;
  }
  size_t rest = length - request_length + 1;
  if (rest > cache->scratch_size) {
    char *scratch = realloc(cache->scratch, rest);
    if (scratch == NULL) return json_loadb(line, length, 0, error);
    cache->scratch = scratch;
    cache->scratch_size = rest;
  }
  memcpy(cache->scratch, line, start);
  cache->scratch[start] = '0';
  memcpy(cache->scratch + start + 1, line + end, length - end);
  json_t *event = json_loadb(cache->scratch, rest, 0, error);
  if (event && json_object_set(event, "request", cache->request) < 0) {
    json_decref(event);
    return NULL;
  }
  return event;
}

int replay_simulate_journal(const simulate_policy *policy, const simulate_options *options,
                            simulate_summary *summary, dome_error *err) {
  memset(summary, 0, sizeof *summary);
  const char *directory = options->journal_dir ? options->journal_dir : JOURNAL_DEFAULT_DIRECTORY;
  journal_filter filter = {
      .from_seq = options->from_seq,
      .to_seq = options->to_seq,
      .since_ns = options->since_ns,
      .until_ns = options->until_ns,
      .agent = options->agent,
  };
  journal_reader *reader = NULL;
  int rc = journal_reader_open(directory, &filter, &reader, err);
  if (rc == -ENOENT) return 0; /* no journal yet: nothing was decided */
  if (rc < 0) return dome_error_wrap(err, "journal `%s`", directory);
  struct request_cache cache;
  memset(&cache, 0, sizeof cache);
  struct line_cache lines;
  memset(&lines, 0, sizeof lines);
  for (;;) {
    journal_record record;
    rc = journal_reader_next(reader, false, &record, err);
    if (rc == 0) break;
    if (rc < 0) {
      if (rc == -ENOENT)
        rc = 0; /* directory without segments */
      else
        dome_error_wrap(err, "journal `%s`", directory);
      break;
    }
    summary->events_read++;
    if (!may_be_request(record.line, record.length)) continue;
    json_error_t json_error;
    json_t *event = load_event(&lines, record.line, record.length, &json_error);
    if (event == NULL) {
      rc = dome_error_set(err, EBADMSG, "journal `%s`: seq %llu: %s", directory,
                          (unsigned long long)record.seq, json_error.text);
      break;
    }
    json_t *diff = NULL;
    rc = simulate_one(policy, &cache, event, summary, &diff);
    if (rc > 0 && first_error[0] && options->on_error)
      options->on_error(options->context, record.seq, first_error);
    json_decref(event);
    if (rc == -ENOMEM) {
      dome_error_set(err, ENOMEM, "simulate seq %llu: out of memory", (unsigned long long)record.seq);
      break;
    }
    rc = 0;
    if (diff && options->on_diff) rc = options->on_diff(options->context, diff, err);
    json_decref(diff);
    if (rc < 0) break;
  }
  replay_request_cache_clear(&cache);
  line_cache_clear(&lines);
  journal_reader_close(reader);
  return rc < 0 ? rc : 0;
}

struct collect {
  json_t *diffs;
  size_t max;
  bool truncated;
};

static int collect_diff(void *context, json_t *diff, dome_error *err) {
  struct collect *collect = context;
  if (json_array_size(collect->diffs) >= collect->max) {
    collect->truncated = true;
    return 0;
  }
  if (json_array_append(collect->diffs, diff) < 0) return dome_error_set(err, ENOMEM, "collect diffs");
  return 0;
}

int replay_simulate_rules_text(const char *text, size_t length, const char *file, const char *journal_dir,
                               size_t max_diffs, json_t **report, dome_error *err) {
  return replay_simulate_rules_text_typed(text, length, file, journal_dir, NULL, max_diffs, report, err);
}

int replay_simulate_rules_text_typed(const char *text, size_t length, const char *file,
                                     const char *journal_dir, const char *schema_text, size_t max_diffs,
                                     json_t **report, dome_error *err) {
  simulate_policy *policy = NULL;
  int rc = replay_simulate_policy_parse_typed(text, length, file, true, schema_text, &policy, err);
  if (rc < 0) return rc;
  struct collect collect = {.diffs = json_array(), .max = max_diffs};
  simulate_options options = {.journal_dir = journal_dir, .on_diff = collect_diff, .context = &collect};
  simulate_summary summary;
  rc = replay_simulate_journal(policy, &options, &summary, err);
  replay_simulate_policy_free(policy);
  if (rc < 0) {
    json_decref(collect.diffs);
    return rc;
  }
  *report = json_pack("{s:o,s:o,s:b}", "summary", replay_simulate_summary_json(&summary), "diffs",
                      collect.diffs, "diffs_truncated", collect.truncated);
  if (*report == NULL) return dome_error_set(err, ENOMEM, "simulate report");
  return 0;
}
