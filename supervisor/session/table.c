/* The table of live sessions: owners, deadlines, counts per agent (see session.h). */
#include <errno.h>
#include <sodium.h>
#include <string.h>

#include "supervisor/session/session.h"

static pthread_cond_t idle_changed = PTHREAD_COND_INITIALIZER;

void session_table_init(struct session_table *table) {
  pthread_mutex_init(&table->lock, NULL);
  table->head = NULL;
  table->count = 0;
}

void session_table_destroy(struct session_table *table) {
  pthread_mutex_destroy(&table->lock);
}

void session_new_id(char id[SESSION_ID_SIZE]) {
  unsigned char bytes[16];
  randombytes_buf(bytes, sizeof bytes);
  memcpy(id, "ses_", 4);
  sodium_bin2hex(id + 4, SESSION_ID_SIZE - 4, bytes, sizeof bytes);
}

int session_table_add(struct session_table *table, struct session_entry *entry, unsigned max_per_agent,
                      dome_error *err) {
  pthread_mutex_lock(&table->lock);
  unsigned held = 0;
  for (struct session_entry *e = table->head; e; e = e->next)
    if (strcmp(e->agent, entry->agent) == 0) held++;
  if (max_per_agent && held >= max_per_agent) {
    pthread_mutex_unlock(&table->lock);
    return dome_error_set(err, EDQUOT,
                          "session quota reached: agent `%s` holds %u of %u sessions allowed for capability "
                          "`%s` (close one with close_session)",
                          entry->agent, held, max_per_agent, entry->capability);
  }
  entry->next = table->head;
  table->head = entry;
  table->count++;
  pthread_mutex_unlock(&table->lock);
  return 0;
}

struct session_entry *session_table_get(struct session_table *table, const char *id, const char *agent) {
  pthread_mutex_lock(&table->lock);
  struct session_entry *found = NULL;
  for (struct session_entry *e = table->head; e && !found; e = e->next)
    if (strcmp(e->id, id) == 0 && !e->closing && (agent == NULL || strcmp(e->agent, agent) == 0)) found = e;
  if (found) {
    found->busy++;
    found->last_used_ms = session_monotonic_ms();
  }
  pthread_mutex_unlock(&table->lock);
  return found;
}

struct session_entry *session_table_hold(struct session_table *table, const char *id) {
  pthread_mutex_lock(&table->lock);
  struct session_entry *found = NULL;
  for (struct session_entry *e = table->head; e && !found; e = e->next)
    if (strcmp(e->id, id) == 0 && !e->closing) found = e;
  if (found) found->busy++;
  pthread_mutex_unlock(&table->lock);
  return found;
}

void session_table_unhold(struct session_table *table, struct session_entry *entry) {
  pthread_mutex_lock(&table->lock);
  entry->busy--;
  pthread_cond_broadcast(&idle_changed);
  pthread_mutex_unlock(&table->lock);
}

void session_table_put(struct session_table *table, struct session_entry *entry) {
  pthread_mutex_lock(&table->lock);
  entry->busy--;
  entry->last_used_ms = session_monotonic_ms();
  pthread_cond_broadcast(&idle_changed);
  pthread_mutex_unlock(&table->lock);
}

static void unlink_entry(struct session_table *table, struct session_entry *entry) {
  for (struct session_entry **p = &table->head; *p; p = &(*p)->next)
    if (*p == entry) {
      *p = entry->next;
      table->count--;
      break;
    }
  entry->next = NULL;
  entry->closing = true;
}

struct session_entry *session_table_take(struct session_table *table, const char *id, const char *agent) {
  pthread_mutex_lock(&table->lock);
  struct session_entry *found = NULL;
  for (struct session_entry *e = table->head; e && !found; e = e->next)
    if ((id == NULL || strcmp(e->id, id) == 0) && (agent == NULL || strcmp(e->agent, agent) == 0)) found = e;
  if (found) unlink_entry(table, found);
  pthread_mutex_unlock(&table->lock);
  return found;
}

void session_table_wait_idle(struct session_table *table, struct session_entry *entry) {
  pthread_mutex_lock(&table->lock);
  while (entry->busy) pthread_cond_wait(&idle_changed, &table->lock);
  pthread_mutex_unlock(&table->lock);
}

struct session_entry *session_table_take_expired(struct session_table *table, uint64_t now_ms,
                                                 const char **reason) {
  pthread_mutex_lock(&table->lock);
  struct session_entry *found = NULL;
  for (struct session_entry *e = table->head; e && !found; e = e->next) {
    if (e->lost) {
      found = e;
      *reason = "lost";
    } else if (e->lifetime_ms && now_ms >= e->created_mono_ms + e->lifetime_ms) {
      found = e;
      *reason = "lifetime";
    } else if (e->idle_ms && e->busy == 0 && now_ms >= e->last_used_ms + e->idle_ms) {
      found = e;
      *reason = "idle";
    }
  }
  if (found) unlink_entry(table, found);
  pthread_mutex_unlock(&table->lock);
  return found;
}

json_t *session_table_list(struct session_table *table, const char *agent, uint64_t now_ms) {
  json_t *list = json_array();
  pthread_mutex_lock(&table->lock);
  for (struct session_entry *e = table->head; e; e = e->next) {
    if (agent && strcmp(e->agent, agent) != 0) continue;
    uint64_t expires = 0;
    if (e->lifetime_ms) expires = e->created_ms + e->lifetime_ms;
    json_array_append_new(
        list, json_pack("{s:s,s:s,s:s,s:I,s:I,s:I,s:I,s:I,s:b}", "session_id", e->id, "agent", e->agent,
                        "capability", e->capability, "created_at_ms", (json_int_t)e->created_ms, "idle_ms",
                        (json_int_t)(now_ms > e->last_used_ms ? now_ms - e->last_used_ms : 0),
                        "idle_timeout_ms", (json_int_t)e->idle_ms, "lifetime_ms", (json_int_t)e->lifetime_ms,
                        "expires_at_ms", (json_int_t)expires, "busy", e->busy > 0));
    if (e->detail) json_object_update(json_array_get(list, json_array_size(list) - 1), e->detail);
  }
  pthread_mutex_unlock(&table->lock);
  return list;
}
