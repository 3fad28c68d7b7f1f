/* The console's anomaly alerts: the newest anomaly.alert events of the journal (bounded in count and in
 * the bytes of their lines; the oldest give way), in seq order, each with the agent.suspended event that
 * names its seq (`alert_seq`: the response domed took). Not locked: its owner serializes the calls. */
#include <stdlib.h>
#include <string.h>

#include "supervisor/console/console.h"

struct kept_alert {
  uint64_t seq;
  size_t bytes;     /* the alert's journal line */
  json_t *alert;    /* the journal event, seq and time included */
  json_t *response; /* the agent.suspended naming it, or NULL */
  int level;
};

struct console_alerts {
  size_t max_alerts, max_bytes;
  struct kept_alert *ring; /* capacity max_alerts, oldest at head */
  size_t head, count, bytes;
  bool dropped; /* an older alert gave way */
};

struct console_alerts *console_alerts_new(size_t max_alerts, size_t max_bytes) {
  struct console_alerts *alerts = calloc(1, sizeof *alerts);
  if (alerts) {
    alerts->max_alerts = max_alerts ? max_alerts : CONSOLE_ALERTS_MAX;
    alerts->max_bytes = max_bytes ? max_bytes : CONSOLE_ALERTS_BYTES;
    alerts->ring = calloc(alerts->max_alerts, sizeof alerts->ring[0]);
  }
  if (alerts && alerts->ring == NULL) {
    free(alerts);
    alerts = NULL;
  }
  return alerts;
}

static struct kept_alert *at(struct console_alerts *alerts, size_t i) {
  return &alerts->ring[(alerts->head + i) % alerts->max_alerts];
}

static void drop_oldest(struct console_alerts *alerts) {
  struct kept_alert *oldest = at(alerts, 0);
  alerts->bytes -= oldest->bytes;
  json_decref(oldest->alert);
  json_decref(oldest->response);
  *oldest = (struct kept_alert){0};
  alerts->head = (alerts->head + 1) % alerts->max_alerts;
  alerts->count--;
  alerts->dropped = true;
}

void console_alerts_free(struct console_alerts *alerts) {
  if (alerts == NULL) return;
  while (alerts->count) drop_oldest(alerts);
  free(alerts->ring);
  free(alerts);
}

/* The kept alert with `seq` (binary search: the ring is in seq order), or NULL. */
static struct kept_alert *find(struct console_alerts *alerts, uint64_t seq) {
  size_t low = 0, high = alerts->count;
  while (low < high) {
    size_t middle = low + (high - low) / 2;
    struct kept_alert *kept = at(alerts, middle);
    if (kept->seq == seq) return kept;
    if (kept->seq < seq)
      low = middle + 1;
    else
      high = middle;
  }
  return NULL;
}

void console_alerts_fold(struct console_alerts *alerts, json_t *event, uint64_t seq, size_t bytes,
                         int level) {
  const char *type = json_string_value(json_object_get(event, "type"));
  if (type == NULL) return;
  if (strcmp(type, "agent.suspended") == 0) {
    json_t *alert_seq = json_object_get(event, "alert_seq");
    struct kept_alert *kept =
        json_is_integer(alert_seq) ? find(alerts, (uint64_t)json_integer_value(alert_seq)) : NULL;
    if (kept && kept->response == NULL) kept->response = json_incref(event);
    return;
  }
  if (strcmp(type, "anomaly.alert") != 0) return;
  if (alerts->count && at(alerts, alerts->count - 1)->seq >= seq) return; /* read already */
  while (alerts->count && (alerts->count == alerts->max_alerts || alerts->bytes + bytes > alerts->max_bytes))
    drop_oldest(alerts);
  *at(alerts, alerts->count) =
      (struct kept_alert){.seq = seq, .bytes = bytes, .alert = json_incref(event), .level = level};
  alerts->count++;
  alerts->bytes += bytes;
}

static json_t *with_response(const struct kept_alert *kept) {
  json_t *item = json_deep_copy(kept->alert);
  json_object_set_new(item, "response", kept->response ? json_deep_copy(kept->response) : json_null());
  return item;
}

json_t *console_alerts_list(struct console_alerts *alerts, const struct console_alert_query *query) {
  json_t *list = json_array();
  for (size_t i = alerts->count; i-- > 0 && json_array_size(list) < query->limit;) {
    const struct kept_alert *kept = at(alerts, i);
    if (kept->level < query->min_level) continue;
    const char *agent = json_string_value(json_object_get(kept->alert, "agent"));
    if (query->agent && (agent == NULL || strcmp(agent, query->agent) != 0)) continue;
    json_array_append_new(list, with_response(kept));
  }
  return json_pack("{s:o,s:I,s:I,s:b}", "alerts", list, "kept", (json_int_t)alerts->count, "oldest_kept_seq",
                   (json_int_t)(alerts->count ? at(alerts, 0)->seq : 0), "older_dropped", alerts->dropped);
}

json_t *console_alerts_find(struct console_alerts *alerts, uint64_t seq) {
  struct kept_alert *kept = find(alerts, seq);
  return kept ? with_response(kept) : NULL;
}
