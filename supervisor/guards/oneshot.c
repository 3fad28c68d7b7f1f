/* One-shot redaction of a buffer or of the string values of a JSON structure, and the findings array. */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "supervisor/guards/internal.h"

enum { JSON_DEPTH_MAX = 64 };

int guard_findings_add(struct guard_findings *findings, const struct guard_finding *finding) {
  if (findings->count == findings->capacity) {
    size_t capacity = findings->capacity ? findings->capacity * 2 : 8;
    struct guard_finding *items = realloc(findings->items, capacity * sizeof *items);
    if (items) findings->items = items;
    char **fields = realloc(findings->fields, capacity * sizeof *fields);
    if (fields) findings->fields = fields;
    if (!items || !fields) return -ENOMEM;
    findings->capacity = capacity;
  }
  char *field = strdup(finding->field ? finding->field : "");
  if (field == NULL) return -ENOMEM;
  findings->fields[findings->count] = field;
  findings->items[findings->count] = *finding;
  findings->items[findings->count].field = field;
  findings->count++;
  return 0;
}

void guard_findings_free(struct guard_findings *findings) {
  if (findings == NULL) return;
  for (size_t i = 0; i < findings->count; i++) free(findings->fields[i]);
  free(findings->items);
  free(findings->fields);
  memset(findings, 0, sizeof *findings);
}

struct collector {
  char *data;
  size_t length;
  size_t capacity;
  struct guard_findings *findings;
};

static int collect_bytes(const char *data, size_t length, void *context) {
  struct collector *c = context;
  if (c->length + length + 1 > c->capacity) {
    size_t capacity = c->capacity ? c->capacity : 256;
    while (capacity < c->length + length + 1) capacity *= 2;
    char *grown = realloc(c->data, capacity);
    if (grown == NULL) return -ENOMEM;
    c->data = grown;
    c->capacity = capacity;
  }
  memcpy(c->data + c->length, data, length);
  c->length += length;
  return 0;
}

static int collect_finding(const struct guard_finding *finding, void *context) {
  struct collector *c = context;
  return c->findings ? guard_findings_add(c->findings, finding) : 0;
}

static int redact_class(const struct guard *guard, const char *field, enum guard_class class_,
                        const void *data, size_t length, char **out, size_t *out_length,
                        struct guard_findings *findings, dome_error *err) {
  *out = NULL;
  struct collector collector = {.findings = findings};
  struct guard_sink sink = {collect_bytes, collect_finding, &collector};
  struct guard_stream *stream = NULL;
  int r = guard_stream_open_class(guard, field, class_, &stream, err);
  if (r < 0) return r;
  if ((r = guard_stream_feed(stream, data, length, &sink, err)) == 0)
    r = guard_stream_finish(stream, &sink, err);
  guard_stream_close(stream);
  if (r == 0 && collect_bytes("", 0, &collector) < 0)
    r = dome_error_set(err, ENOMEM, "redact: out of memory");
  if (r < 0) {
    free(collector.data);
    return r;
  }
  collector.data[collector.length] = '\0';
  *out = collector.data;
  *out_length = collector.length;
  return 0;
}

int guard_redact_buffer(const struct guard *guard, const char *field, const void *data, size_t length,
                        char **out, size_t *out_length, struct guard_findings *findings, dome_error *err) {
  if (field == NULL) field = "stdout";
  return redact_class(guard, field, guard_field_class(guard, field), data, length, out, out_length, findings,
                      err);
}

static int json_depth_ok(json_t *value, int depth) {
  if (depth > JSON_DEPTH_MAX) return 0;
  if (json_is_object(value)) {
    const char *key;
    json_t *member;
    json_object_foreach(value, key, member) if (!json_depth_ok(member, depth + 1)) return 0;
  } else if (json_is_array(value)) {
    size_t i;
    json_t *member;
    json_array_foreach(value, i, member) if (!json_depth_ok(member, depth + 1)) return 0;
  }
  return 1;
}

/* An environment variable name as POSIX shells accept it: [A-Z_][A-Z0-9_]*. */
static bool env_name(const char *key) {
  if (!(isupper((unsigned char)*key) || *key == '_')) return false;
  for (const char *p = key; *p; p++)
    if (!(isupper((unsigned char)*p) || isdigit((unsigned char)*p) || *p == '_')) return false;
  return true;
}

static int redact_env_value(const struct guard *guard, json_t *value, const char *field,
                            struct guard_findings *findings, dome_error *err) {
  size_t length = json_string_length(value);
  if (length == 0) return 0;
  int detector = guard_detector_index("env-assignment");
  struct guard_finding finding = {
      .field = field, .detector = guard_detectors[detector].info.id, .length = length};
  guard_hmac_hex(guard, json_string_value(value), length, finding.hmac_hex);
  if (findings && guard_findings_add(findings, &finding) < 0)
    return dome_error_set(err, ENOMEM, "redact JSON: out of memory");
  if (json_string_set(value, "[REDACTED:env-assignment]") < 0)
    return dome_error_set(err, ENOMEM, "redact JSON: out of memory");
  return 0;
}

static int redact_json_value(const struct guard *guard, json_t *value, const char *field,
                             enum guard_class class_, struct guard_findings *findings, dome_error *err) {
  int r = 0;
  if (json_is_string(value)) {
    char *redacted;
    size_t length;
    size_t before = findings ? findings->count : 0;
    struct guard_findings local = {0};
    struct guard_findings *target = findings ? findings : &local;
    r = redact_class(guard, field, class_, json_string_value(value), json_string_length(value), &redacted,
                     &length, target, err);
    size_t found = target->count - (findings ? before : 0);
    guard_findings_free(&local);
    if (r < 0) return r;
    if (found > 0 && json_string_setn(value, redacted, length) < 0) {
      /* A redaction cut a multi-byte character: replace the whole value (fail closed). */
      json_string_set(value, "[REDACTED:invalid-utf8]");
    }
    free(redacted);
    return 0;
  }
  if (json_is_object(value)) {
    const char *key;
    json_t *member;
    json_object_foreach(value, key, member) {
      enum guard_class member_class = class_;
      for (size_t i = 0; i < guard->classification.count; i++)
        if (strcmp(guard->classification.entries[i].field, key) == 0)
          member_class = guard->classification.entries[i].class_;
      if (field != NULL && member_class == GUARD_CLASS_SENSITIVE && json_is_string(member) && env_name(key)) {
        /* {"NAME": "value"} inside a SENSITIVE field (env_vars): the value of an environment variable. */
        if ((r = redact_env_value(guard, member, field, findings, err)) < 0) return r;
        continue;
      }
      if ((r = redact_json_value(guard, member, field ? field : key, member_class, findings, err)) < 0)
        return r;
    }
  } else if (json_is_array(value)) {
    size_t i;
    json_t *member;
    json_array_foreach(value, i, member) if ((r = redact_json_value(guard, member, field, class_, findings,
                                                                    err)) < 0) return r;
  }
  return 0;
}

int guard_redact_json(const struct guard *guard, json_t *value, struct guard_findings *findings,
                      dome_error *err) {
  if (value == NULL) return 0;
  if (!json_depth_ok(value, 0))
    return dome_error_set(err, 0, "redact JSON: nesting deeper than %d levels", JSON_DEPTH_MAX);
  return redact_json_value(guard, value, NULL, GUARD_CLASS_PUBLIC, findings, err);
}
