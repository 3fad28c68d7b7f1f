/* MCP sessions (basic/transports "Session Management"): ids of 256 random bits from libsodium's
 * CSPRNG, bound to the agent and gateway that initialized them, expired after an idle timeout. */
#include <errno.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>

#include "supervisor/mcp/mcp_internal.h"

static void session_unref_locked(struct mcp_session *session) {
  if (--session->refs == 0) free(session);
}

/* Drop sessions idle longer than the timeout that have no call in flight. Under server->lock. */
static void expire_locked(mcp_server *server, time_t now) {
  size_t kept = 0;
  for (size_t i = 0; i < server->session_count; i++) {
    struct mcp_session *session = server->sessions[i];
    if (session->calls == NULL && now - session->last_used > (time_t)server->options.session_idle_timeout_s) {
      session->closed = true;
      session_unref_locked(session);
      continue;
    }
    server->sessions[kept++] = session;
  }
  server->session_count = kept;
  server->stats.sessions_active = kept;
}

int mcp_session_create(mcp_server *server, const mcp_identity *identity, const char *version,
                       struct mcp_session **out) {
  struct mcp_session *session = calloc(1, sizeof *session);
  if (session == NULL) return -ENOMEM;
  unsigned char random_bytes[MCP_SESSION_ID_BYTES];
  randombytes_buf(random_bytes, sizeof random_bytes);
  sodium_bin2hex(session->id, sizeof session->id, random_bytes, sizeof random_bytes);
  snprintf(session->agent, sizeof session->agent, "%s", identity->agent);
  snprintf(session->gateway, sizeof session->gateway, "%s", identity->gateway);
  snprintf(session->protocol_version, sizeof session->protocol_version, "%s", version);
  session->last_used = time(NULL);
  session->refs = 2; /* the table and the caller */
  pthread_mutex_lock(&server->lock);
  expire_locked(server, session->last_used);
  if (server->session_count >= server->options.max_sessions) {
    pthread_mutex_unlock(&server->lock);
    free(session);
    return -EBUSY;
  }
  server->sessions[server->session_count++] = session;
  server->stats.sessions_active = server->session_count;
  server->stats.sessions_created++;
  pthread_mutex_unlock(&server->lock);
  *out = session;
  return 0;
}

struct mcp_session *mcp_session_find(mcp_server *server, const char *id) {
  if (id == NULL || strlen(id) != MCP_SESSION_ID_BYTES * 2) return NULL;
  struct mcp_session *found = NULL;
  time_t now = time(NULL);
  pthread_mutex_lock(&server->lock);
  for (size_t i = 0; i < server->session_count; i++) {
    struct mcp_session *session = server->sessions[i];
    if (sodium_memcmp(session->id, id, MCP_SESSION_ID_BYTES * 2) == 0) {
      if (session->calls == NULL && now - session->last_used > (time_t)server->options.session_idle_timeout_s)
        break; /* expired: removed by the next sweep */
      session->last_used = now;
      session->refs++;
      found = session;
      break;
    }
  }
  pthread_mutex_unlock(&server->lock);
  return found;
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
  pthread_mutex_lock(&server->lock);
  for (size_t i = 0; i < server->session_count; i++) {
    if (server->sessions[i] != session) continue;
    memmove(&server->sessions[i], &server->sessions[i + 1],
            (server->session_count - i - 1) * sizeof server->sessions[0]);
    server->session_count--;
    server->stats.sessions_active = server->session_count;
    session->closed = true;
    cancel_calls_locked(session);
    session_unref_locked(session);
    break;
  }
  pthread_mutex_unlock(&server->lock);
}

void mcp_session_close_all(mcp_server *server) {
  pthread_mutex_lock(&server->lock);
  for (size_t i = 0; i < server->session_count; i++) {
    server->sessions[i]->closed = true;
    cancel_calls_locked(server->sessions[i]);
    session_unref_locked(server->sessions[i]);
  }
  server->session_count = 0;
  server->stats.sessions_active = 0;
  pthread_mutex_unlock(&server->lock);
}

void mcp_session_cancel_request(mcp_server *server, struct mcp_session *session, const json_t *request_id) {
  pthread_mutex_lock(&server->lock);
  for (mcp_call *call = session->calls; call; call = call->next_in_session)
    if (json_equal(call->request_id, (json_t *)request_id)) mcp_call_cancel(call, true);
  pthread_mutex_unlock(&server->lock);
}
