/* Server-sent events parsing (WHATWG HTML, section 9.2.6 "Interpreting an event stream"), incremental
 * and bounded: the current line and the current event's data never exceed max_event_bytes. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "supervisor/gateway/gateway.h"

struct gateway_sse {
  size_t max_event_bytes;
  gateway_sse_event_fn on_event;
  void *context;
  char *line; /* current line (without its end); grown on demand up to max_event_bytes + 1 */
  size_t line_length, line_capacity;
  char *data; /* data buffer of the current event; likewise */
  size_t data_length, data_capacity;
  char event_type[64];
  char last_id[256];
  bool pending_cr; /* the previous chunk ended in CR: a following LF belongs to it */
  bool started;    /* a leading UTF-8 BOM is skipped once */
};

struct gateway_sse *gateway_sse_new(size_t max_event_bytes, gateway_sse_event_fn on_event, void *context) {
  struct gateway_sse *sse = calloc(1, sizeof *sse);
  if (sse == NULL) return NULL;
  sse->max_event_bytes = max_event_bytes ? max_event_bytes : (4u << 20);
  sse->on_event = on_event;
  sse->context = context;
  return sse;
}

void gateway_sse_free(struct gateway_sse *sse) {
  if (sse == NULL) return;
  free(sse->line);
  free(sse->data);
  free(sse);
}

const char *gateway_sse_last_event_id(const struct gateway_sse *sse) {
  return sse->last_id;
}

/* Make room for `needed` bytes (+1 for a NUL) in *buffer, never beyond max_event_bytes + 1. */
static int reserve(struct gateway_sse *sse, char **buffer, size_t *capacity, size_t needed) {
  if (needed > sse->max_event_bytes) return -EMSGSIZE;
  if (needed + 1 <= *capacity) return 0;
  size_t next = *capacity ? *capacity : 256;
  while (next < needed + 1) next *= 2;
  if (next > sse->max_event_bytes + 1) next = sse->max_event_bytes + 1;
  char *grown = realloc(*buffer, next);
  if (grown == NULL) return -ENOMEM;
  *buffer = grown;
  *capacity = next;
  return 0;
}

static int dispatch(struct gateway_sse *sse) {
  int rc = 0;
  if (sse->data_length > 0) {
    /* The spec removes the last LF of the data buffer. */
    size_t length = sse->data_length - 1;
    sse->data[length] = '\0';
    rc = sse->on_event(sse->context, sse->event_type[0] ? sse->event_type : "message", sse->data, length);
  }
  sse->data_length = 0;
  sse->event_type[0] = '\0';
  return rc;
}

static int process_line(struct gateway_sse *sse) {
  int rc = reserve(sse, &sse->line, &sse->line_capacity, sse->line_length);
  if (rc < 0) return rc;
  char *line = sse->line;
  size_t length = sse->line_length;
  line[length] = '\0';
  if (length == 0) return dispatch(sse);
  if (line[0] == ':') return 0; /* comment */
  char *colon = memchr(line, ':', length);
  const char *value = "";
  size_t value_length = 0;
  if (colon) {
    *colon = '\0';
    value = colon + 1;
    if (*value == ' ') value++;
    value_length = length - (size_t)(value - line);
  }
  if (strcmp(line, "data") == 0) {
    rc = reserve(sse, &sse->data, &sse->data_capacity, sse->data_length + value_length + 1);
    if (rc < 0) return rc;
    memcpy(sse->data + sse->data_length, value, value_length);
    sse->data_length += value_length;
    sse->data[sse->data_length++] = '\n';
  } else if (strcmp(line, "event") == 0) {
    snprintf(sse->event_type, sizeof sse->event_type, "%s", value);
  } else if (strcmp(line, "id") == 0) {
    if (memchr(value, '\0', value_length) == NULL) snprintf(sse->last_id, sizeof sse->last_id, "%s", value);
  } /* "retry" and unknown fields are ignored */
  return 0;
}

int gateway_sse_feed(struct gateway_sse *sse, const char *data, size_t length) {
  size_t i = 0;
  if (!sse->started && length > 0) {
    sse->started = true;
    if (length >= 3 && memcmp(data, "\xEF\xBB\xBF", 3) == 0) i = 3;
  }
  for (; i < length; i++) {
    char c = data[i];
    if (sse->pending_cr) {
      sse->pending_cr = false;
      if (c == '\n') continue;
    }
    if (c == '\r' || c == '\n') {
      if (c == '\r') sse->pending_cr = true;
      int rc = process_line(sse);
      sse->line_length = 0;
      if (rc != 0) return rc;
      continue;
    }
    if (sse->line_length >= sse->line_capacity) {
      int rc = reserve(sse, &sse->line, &sse->line_capacity, sse->line_length + 1);
      if (rc < 0) return rc;
    }
    sse->line[sse->line_length++] = c;
  }
  return 0;
}
