/* Response filtering of forwarded calls: a backend's CallToolResult (and its progress messages and
 * error texts) is redacted with the backend's field classification before the agent sees it. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "supervisor/gateway/gateway.h"
#include "supervisor/guards/guard.h"

#define CONTENT_FIELD "content"

/* The classes content text is redacted with (see gateway_redact_result). Returns their count. */
static size_t content_classes(const char *classification, enum guard_class classes[GUARD_CLASS_COUNT],
                              dome_error *err, int *rc) {
  struct guard_classification parsed = {0};
  *rc = guard_classification_parse(classification ? classification : "", &parsed, err);
  if (*rc < 0) return 0;
  size_t count = 0;
  bool seen[GUARD_CLASS_COUNT] = {false};
  bool named = false;
  for (size_t i = 0; i < parsed.count; i++)
    if (strcmp(parsed.entries[i].field, CONTENT_FIELD) == 0) {
      classes[count++] = parsed.entries[i].class_;
      named = true;
    }
  for (size_t i = 0; !named && i < parsed.count; i++)
    if (!seen[parsed.entries[i].class_]) {
      seen[parsed.entries[i].class_] = true;
      classes[count++] = parsed.entries[i].class_;
    }
  if (count == 0) classes[count++] = GUARD_CLASS_PUBLIC;
  guard_classification_free(&parsed);
  return count;
}

struct collect {
  FILE *memory;
  struct guard_findings *findings;
};

static int collect_emit(const char *data, size_t length, void *context) {
  struct collect *collect = context;
  return fwrite(data, 1, length, collect->memory) == length ? 0 : -ENOMEM;
}

static int collect_finding(const struct guard_finding *finding, void *context) {
  struct collect *collect = context;
  return collect->findings ? guard_findings_add(collect->findings, finding) : 0;
}

static int redact_once(const struct guard *guard, enum guard_class class_, const char *text, char **out,
                       struct guard_findings *findings, dome_error *err) {
  char *buffer = NULL;
  size_t size = 0;
  struct collect collect = {.memory = open_memstream(&buffer, &size), .findings = findings};
  if (collect.memory == NULL) return dome_error_set(err, ENOMEM, "redact");
  struct guard_sink sink = {.emit = collect_emit, .finding = collect_finding, .context = &collect};
  struct guard_stream *stream = NULL;
  int rc = guard_stream_open_class(guard, CONTENT_FIELD, class_, &stream, err);
  if (rc == 0) rc = guard_stream_feed(stream, text, strlen(text), &sink, err);
  if (rc == 0) rc = guard_stream_finish(stream, &sink, err);
  guard_stream_close(stream);
  fclose(collect.memory);
  if (rc < 0) {
    free(buffer);
    return rc;
  }
  *out = buffer;
  return 0;
}

static int redact_with(const struct guard *guard, const enum guard_class *classes, size_t count,
                       const char *text, char **out, struct guard_findings *findings, dome_error *err) {
  char *current = strdup(text);
  if (current == NULL) return dome_error_set(err, ENOMEM, "redact");
  for (size_t i = 0; i < count; i++) {
    char *next = NULL;
    int rc = redact_once(guard, classes[i], current, &next, findings, err);
    free(current);
    if (rc < 0) return rc;
    current = next;
  }
  *out = current;
  return 0;
}

int gateway_redact_text(const struct guard *guard, const char *classification, const char *text, char **out,
                        struct guard_findings *findings, dome_error *err) {
  enum guard_class classes[GUARD_CLASS_COUNT];
  int rc;
  size_t count = content_classes(classification, classes, err, &rc);
  if (rc < 0) return rc;
  return redact_with(guard, classes, count, text ? text : "", out, findings, err);
}

/* Redact the string member `key` of `object` in place. */
static int redact_member(const struct guard *guard, const enum guard_class *classes, size_t count,
                         json_t *object, const char *key, struct guard_findings *findings, dome_error *err) {
  const char *text = json_string_value(json_object_get(object, key));
  if (text == NULL) return 0;
  char *redacted = NULL;
  int rc = redact_with(guard, classes, count, text, &redacted, findings, err);
  if (rc < 0) return rc;
  json_t *value = json_string(redacted);
  if (value == NULL) value = json_string("[REDACTED:invalid-utf8]");
  json_object_set_new(object, key, value);
  free(redacted);
  return 0;
}

int gateway_redact_result(const struct guard *guard, const char *classification, json_t *result,
                          struct guard_findings *findings, dome_error *err) {
  if (!json_is_object(result)) return dome_error_set(err, EINVAL, "CallToolResult is not an object");
  enum guard_class classes[GUARD_CLASS_COUNT];
  int rc;
  size_t count = content_classes(classification, classes, err, &rc);
  if (rc < 0) return rc;
  json_t *content = json_object_get(result, "content");
  size_t i;
  json_t *item;
  json_array_foreach(content, i, item) {
    if (!json_is_object(item)) continue;
    rc = redact_member(guard, classes, count, item, "text", findings, err);
    if (rc == 0)
      rc = redact_member(guard, classes, count, json_object_get(item, "resource"), "text", findings, err);
    if (rc < 0) return rc;
  }
  json_t *structured = json_object_get(result, "structuredContent");
  if (structured) {
    rc = guard_redact_json(guard, structured, findings, err);
    if (rc < 0) return rc;
  }
  return 0;
}
