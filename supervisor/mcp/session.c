/* MCP sessions (basic/transports "Session Management"): ids of 256 random bits from libsodium's
 * CSPRNG (after "<node>." in fleet mode), bound to the agent and gateway that initialized them, expired after
 * an idle timeout, at most max_sessions_per_agent per agent (its oldest idle session gives way to a new one).
 * Every session's creation and end is reported to the session_event handler, outside the server's lock. */
#include <errno.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>

#include "supervisor/mcp/mcp_internal.h"

/* A session event noted under the lock and reported after it. */
struct session_note {
  const char *type, *reason;
  char id[MCP_SESSION_ID_TEXT_MAX + 1];
  char agent[256];
  char gateway[128];
};

struct session_notes {
  struct session_note *items;
  size_t count, capacity;
};

static void note_locked(struct session_notes *notes, const struct mcp_session *session, const char *type,
                        const char *reason) {
  if (notes->count == notes->capacity) {
    size_t capacity = notes->capacity ? notes->capacity * 2 : 8;
    struct session_note *grown = realloc(notes->items, capacity * sizeof *grown);
    if (grown == NULL) return; /* the session still ends; only its report is lost to memory pressure */
    notes->items = grown;
    notes->capacity = capacity;
  }
  struct session_note *note = &notes->items[notes->count++];
  note->type = type;
  note->reason = reason;
  memcpy(note->id, session->id, sizeof note->id);
  memcpy(note->agent, session->agent, sizeof note->agent);
  memcpy(note->gateway, session->gateway, sizeof note->gateway);
}

/* Report every note. Returns 0, or the first handler's -errno (every note is still reported). */
static int notes_report(mcp_server *server, struct session_notes *notes) {
  int first_error = 0;
  for (size_t i = 0; i < notes->count; i++) {
    if (server->handlers.session_event == NULL) continue;
    int rc = server->handlers.session_event(
        server->handlers.context, notes->items[i].type, notes->items[i].agent, notes->items[i].gateway,
        notes->items[i].id, notes->items[i].reason, i + 1 == notes->count);
    if (rc < 0 && first_error == 0) first_error = rc;
  }
  free(notes->items);
  *notes = (struct session_notes){0};
  return first_error;
}

static void session_unref_locked(struct mcp_session *session) {
  if (--session->refs > 0) return;
  mcp_session_replay_free(session);
  free(session);
}

static bool idle_expired(const mcp_server *server, const struct mcp_session *session, time_t now) {
  return session->calls == NULL && now - session->last_used > (time_t)server->options.session_idle_timeout_s;
}

/* Drop sessions idle longer than the timeout that have no call in flight. Under server->lock. */
static void expire_locked(mcp_server *server, time_t now, struct session_notes *notes) {
  size_t kept = 0;
  for (size_t i = 0; i < server->session_count; i++) {
    struct mcp_session *session = server->sessions[i];
    if (idle_expired(server, session, now)) {
      note_locked(notes, session, "session.expired", NULL);
      session->closed = true;
      session_unref_locked(session);
      continue;
    }
    server->sessions[kept++] = session;
  }
  server->session_count = kept;
  server->stats.sessions_active = kept;
}

static void remove_at_locked(mcp_server *server, size_t index) {
  memmove(&server->sessions[index], &server->sessions[index + 1],
          (server->session_count - index - 1) * sizeof server->sessions[0]);
  server->session_count--;
  server->stats.sessions_active = server->session_count;
}

/* Make room for one more session of `agent`: when it holds max_sessions_per_agent, close its least
 * recently used session without a call in flight. Returns false when every one is busy. Under lock. */
static bool agent_room_locked(mcp_server *server, const char *agent, struct session_notes *notes) {
  size_t count = 0, oldest = SIZE_MAX;
  for (size_t i = 0; i < server->session_count; i++) {
    struct mcp_session *session = server->sessions[i];
    if (strcmp(session->agent, agent) != 0) continue;
    count++;
    if (session->calls == NULL &&
        (oldest == SIZE_MAX || session->last_used < server->sessions[oldest]->last_used))
      oldest = i;
  }
  if (count < server->options.max_sessions_per_agent) return true;
  if (oldest == SIZE_MAX) return false;
  struct mcp_session *session = server->sessions[oldest];
  note_locked(notes, session, "session.closed", "evicted");
  remove_at_locked(server, oldest);
  session->closed = true;
  session_unref_locked(session);
  server->stats.sessions_evicted++;
  return true;
}

int mcp_session_create(mcp_server *server, const mcp_identity *identity, const char *version,
                       struct mcp_session **out) {
  struct mcp_session *session = calloc(1, sizeof *session);
  if (session == NULL) return -ENOMEM;
  unsigned char random_bytes[MCP_SESSION_ID_BYTES];
  randombytes_buf(random_bytes, sizeof random_bytes);
  char hex[MCP_SESSION_ID_BYTES * 2 + 1];
  sodium_bin2hex(hex, sizeof hex, random_bytes, sizeof random_bytes);
  if (server->session_node[0])
    snprintf(session->id, sizeof session->id, "%s.%s", server->session_node, hex);
  else
    memcpy(session->id, hex, sizeof hex);
  snprintf(session->agent, sizeof session->agent, "%s", identity->agent);
  snprintf(session->gateway, sizeof session->gateway, "%s", identity->gateway);
  snprintf(session->protocol_version, sizeof session->protocol_version, "%s", version);
  session->last_used = time(NULL);
  session->refs = 2; /* the table and the caller */
  atomic_init(&session->log_level, MCP_LOG_INFO);
  pthread_mutex_init(&session->replay_lock, NULL);
  struct session_notes notes = {0};
  int rc = 0;
  pthread_mutex_lock(&server->lock);
  expire_locked(server, session->last_used, &notes);
  if (!agent_room_locked(server, identity->agent, &notes))
    rc = -EUSERS;
  else if (server->session_count >= server->options.max_sessions)
    rc = -EBUSY;
  if (rc == 0) {
    server->sessions[server->session_count++] = session;
    server->stats.sessions_active = server->session_count;
    server->stats.sessions_created++;
    note_locked(&notes, session, "session.created", NULL);
  } else {
    server->stats.sessions_refused++;
  }
  pthread_mutex_unlock(&server->lock);
  int reported = notes_report(server, &notes);
  if (rc < 0) {
    mcp_session_replay_free(session);
    free(session);
    return rc;
  }
  if (reported < 0) { /* not on record: the session is removed before its id is ever answered */
    pthread_mutex_lock(&server->lock);
    for (size_t i = 0; i < server->session_count; i++)
      if (server->sessions[i] == session) {
        remove_at_locked(server, i);
        session->closed = true;
        session_unref_locked(session);
        break;
      }
    server->stats.sessions_created--;
    server->stats.sessions_refused++;
    session_unref_locked(session);
    pthread_mutex_unlock(&server->lock);
    return -EIO;
  }
  *out = session;
  return 0;
}

bool mcp_session_rate_allow(mcp_server *server, const char *agent) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  double rate = server->options.session_rate_per_agent;
  pthread_mutex_lock(&server->lock);
  struct mcp_session_rate *slot = NULL, *oldest = &server->rates[0];
  for (size_t i = 0; i < MCP_SESSION_RATES && slot == NULL; i++) {
    struct mcp_session_rate *entry = &server->rates[i];
    if (strcmp(entry->agent, agent) == 0 && entry->agent[0]) slot = entry;
    if (entry->refilled.tv_sec < oldest->refilled.tv_sec ||
        (entry->refilled.tv_sec == oldest->refilled.tv_sec &&
         entry->refilled.tv_nsec < oldest->refilled.tv_nsec))
      oldest = entry;
  }
  if (slot == NULL) { /* a new agent, or one not seen for long: a full budget */
    slot = oldest;
    snprintf(slot->agent, sizeof slot->agent, "%s", agent);
    slot->tokens = rate;
    slot->refilled = now;
  }
  double elapsed =
      (double)(now.tv_sec - slot->refilled.tv_sec) + (now.tv_nsec - slot->refilled.tv_nsec) / 1e9;
  slot->tokens += elapsed * rate;
  if (slot->tokens > rate) slot->tokens = rate;
  slot->refilled = now;
  bool allowed = slot->tokens >= 1.0;
  if (allowed)
    slot->tokens -= 1.0;
  else
    server->stats.sessions_refused++;
  pthread_mutex_unlock(&server->lock);
  return allowed;
}

bool mcp_session_node_valid(const char *name) {
  size_t length = strlen(name);
  if (length == 0 || length > MCP_SESSION_NODE_MAX) return false;
  for (const char *c = name; *c; c++)
    if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '_' ||
          *c == '-'))
      return false;
  return true;
}

bool mcp_session_id_node(const char *id, char *node, size_t size) {
  if (size) node[0] = '\0';
  const char *dot = id ? strchr(id, '.') : NULL;
  if (dot == NULL || size < MCP_SESSION_NODE_MAX + 1) return false;
  size_t length = (size_t)(dot - id);
  if (length == 0 || length > MCP_SESSION_NODE_MAX || strlen(dot + 1) != MCP_SESSION_ID_BYTES * 2)
    return false;
  for (const char *c = dot + 1; *c; c++)
    if (!((*c >= '0' && *c <= '9') || (*c >= 'a' && *c <= 'f'))) return false;
  char name[MCP_SESSION_NODE_MAX + 1];
  memcpy(name, id, length);
  name[length] = '\0';
  if (!mcp_session_node_valid(name)) return false;
  memcpy(node, name, length + 1);
  return true;
}

struct mcp_session *mcp_session_find(mcp_server *server, const char *id) {
  size_t node_length = server->session_node[0] ? strlen(server->session_node) + 1 : 0;
  size_t id_length = node_length + MCP_SESSION_ID_BYTES * 2;
  if (id == NULL || strlen(id) != id_length) return NULL;
  struct mcp_session *found = NULL;
  time_t now = time(NULL);
  struct session_notes notes = {0};
  pthread_mutex_lock(&server->lock);
  for (size_t i = 0; i < server->session_count; i++) {
    struct mcp_session *session = server->sessions[i];
    if (sodium_memcmp(session->id, id, id_length) == 0) {
      if (idle_expired(server, session, now)) {
        /* expired: ended now, so that its end is journalled when it is first noticed */
        note_locked(&notes, session, "session.expired", NULL);
        remove_at_locked(server, i);
        session->closed = true;
        session_unref_locked(session);
        break;
      }
      session->last_used = now;
      session->refs++;
      found = session;
      break;
    }
  }
  pthread_mutex_unlock(&server->lock);
  notes_report(server, &notes);
  return found;
}

void mcp_session_sweep(mcp_server *server) {
  struct session_notes notes = {0};
  pthread_mutex_lock(&server->lock);
  expire_locked(server, time(NULL), &notes);
  pthread_mutex_unlock(&server->lock);
  notes_report(server, &notes);
}

void mcp_session_release(mcp_server *server, struct mcp_session *session) {
  if (session == NULL) return;
  pthread_mutex_lock(&server->lock);
  session_unref_locked(session);
  pthread_mutex_unlock(&server->lock);
}

static void cancel_calls_locked(struct mcp_session *session) {
  for (mcp_call *call = session->calls; call; call = call->next_in_session) mcp_call_cancel(call, false);
}

void mcp_session_close(mcp_server *server, struct mcp_session *session) {
  struct session_notes notes = {0};
  pthread_mutex_lock(&server->lock);
  for (size_t i = 0; i < server->session_count; i++) {
    if (server->sessions[i] != session) continue;
    note_locked(&notes, session, "session.closed", "client");
    remove_at_locked(server, i);
    session->closed = true;
    cancel_calls_locked(session);
    session_unref_locked(session);
    break;
  }
  pthread_mutex_unlock(&server->lock);
  notes_report(server, &notes);
}

void mcp_session_close_all(mcp_server *server) {
  struct session_notes notes = {0};
  pthread_mutex_lock(&server->lock);
  for (size_t i = 0; i < server->session_count; i++) {
    note_locked(&notes, server->sessions[i], "session.closed", "shutdown");
    server->sessions[i]->closed = true;
    cancel_calls_locked(server->sessions[i]);
    session_unref_locked(server->sessions[i]);
  }
  server->session_count = 0;
  server->stats.sessions_active = 0;
  pthread_mutex_unlock(&server->lock);
  notes_report(server, &notes);
}

void mcp_session_cancel_request(mcp_server *server, struct mcp_session *session, const json_t *request_id) {
  pthread_mutex_lock(&server->lock);
  for (mcp_call *call = session->calls; call; call = call->next_in_session)
    if (json_equal(call->request_id, (json_t *)request_id)) mcp_call_cancel(call, true);
  pthread_mutex_unlock(&server->lock);
}
