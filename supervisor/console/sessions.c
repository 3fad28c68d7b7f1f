/* Operator login sessions: a table bounded in size, each entry ending after the idle timeout. */
#include <errno.h>
#include <pthread.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "supervisor/console/console.h"

const char *const console_security_headers[] = {
    "Content-Security-Policy",
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
    "X-Frame-Options",
    "DENY",
    "Referrer-Policy",
    "no-referrer",
    "X-Content-Type-Options",
    "nosniff",
    NULL,
};

struct console_sessions {
  pthread_mutex_t lock;
  unsigned idle_timeout_s, max, count;
  struct console_session *entries;
};

static void random_secret(char out[CONSOLE_SECRET_SIZE]) {
  unsigned char bytes[32];
  randombytes_buf(bytes, sizeof bytes);
  sodium_bin2base64(out, CONSOLE_SECRET_SIZE, bytes, sizeof bytes, sodium_base64_VARIANT_URLSAFE_NO_PADDING);
  sodium_memzero(bytes, sizeof bytes);
}

console_sessions *console_sessions_new(unsigned idle_timeout_s, unsigned max) {
  if (sodium_init() < 0) return NULL;
  console_sessions *sessions = calloc(1, sizeof *sessions);
  if (sessions == NULL) return NULL;
  sessions->idle_timeout_s = idle_timeout_s ? idle_timeout_s : 900;
  sessions->max = max ? max : CONSOLE_SESSIONS_MAX;
  sessions->entries = calloc(sessions->max, sizeof sessions->entries[0]);
  if (sessions->entries == NULL) {
    free(sessions);
    return NULL;
  }
  pthread_mutex_init(&sessions->lock, NULL);
  return sessions;
}

void console_sessions_free(console_sessions *sessions) {
  if (sessions == NULL) return;
  sodium_memzero(sessions->entries, sessions->max * sizeof sessions->entries[0]);
  free(sessions->entries);
  pthread_mutex_destroy(&sessions->lock);
  free(sessions);
}

unsigned console_sessions_idle_timeout(const console_sessions *sessions) {
  return sessions->idle_timeout_s;
}

static bool expired(const console_sessions *sessions, const struct console_session *entry, int64_t now_s) {
  return now_s - entry->last_used_s >= (int64_t)sessions->idle_timeout_s;
}

/* Remove entry i (the last one takes its place). Under lock. */
static void remove_at(console_sessions *sessions, unsigned i) {
  sessions->entries[i] = sessions->entries[--sessions->count];
  sodium_memzero(&sessions->entries[sessions->count], sizeof sessions->entries[0]);
}

int console_session_open(console_sessions *sessions, const char *operator_name, const char *role,
                         int64_t now_s, struct console_session *session) {
  if (operator_name == NULL || strlen(operator_name) >= CONSOLE_OPERATOR_NAME_MAX || operator_name[0] == '\0')
    return -EINVAL;
  if (role == NULL || (strcmp(role, "auditor") != 0 && strcmp(role, "operator") != 0)) return -EINVAL;
  struct console_session fresh = {.created_s = now_s, .last_used_s = now_s};
  random_secret(fresh.id);
  random_secret(fresh.csrf);
  snprintf(fresh.operator_name, sizeof fresh.operator_name, "%s", operator_name);
  snprintf(fresh.role, sizeof fresh.role, "%s", role);
  pthread_mutex_lock(&sessions->lock);
  for (unsigned i = 0; i < sessions->count;)
    if (expired(sessions, &sessions->entries[i], now_s))
      remove_at(sessions, i);
    else
      i++;
  if (sessions->count == sessions->max) {
    unsigned oldest = 0;
    for (unsigned i = 1; i < sessions->count; i++)
      if (sessions->entries[i].last_used_s < sessions->entries[oldest].last_used_s) oldest = i;
    remove_at(sessions, oldest);
  }
  sessions->entries[sessions->count++] = fresh;
  pthread_mutex_unlock(&sessions->lock);
  *session = fresh;
  sodium_memzero(&fresh, sizeof fresh);
  return 0;
}

int console_session_find(console_sessions *sessions, const char *id, int64_t now_s,
                         struct console_session *session) {
  if (id == NULL || strlen(id) != CONSOLE_SECRET_SIZE - 1) return -ENOENT;
  int rc = -ENOENT;
  pthread_mutex_lock(&sessions->lock);
  for (unsigned i = 0; i < sessions->count; i++) {
    struct console_session *entry = &sessions->entries[i];
    if (sodium_memcmp(entry->id, id, CONSOLE_SECRET_SIZE - 1) != 0) continue;
    if (expired(sessions, entry, now_s)) {
      remove_at(sessions, i);
      break;
    }
    entry->last_used_s = now_s;
    *session = *entry;
    rc = 0;
    break;
  }
  pthread_mutex_unlock(&sessions->lock);
  return rc;
}

void console_session_close(console_sessions *sessions, const char *id) {
  if (id == NULL || strlen(id) != CONSOLE_SECRET_SIZE - 1) return;
  pthread_mutex_lock(&sessions->lock);
  for (unsigned i = 0; i < sessions->count; i++)
    if (sodium_memcmp(sessions->entries[i].id, id, CONSOLE_SECRET_SIZE - 1) == 0) {
      remove_at(sessions, i);
      break;
    }
  pthread_mutex_unlock(&sessions->lock);
}

unsigned console_sessions_close_operator(console_sessions *sessions, const char *operator_name) {
  unsigned closed = 0;
  pthread_mutex_lock(&sessions->lock);
  for (unsigned i = 0; i < sessions->count;)
    if (strcmp(sessions->entries[i].operator_name, operator_name) == 0) {
      remove_at(sessions, i);
      closed++;
    } else {
      i++;
    }
  pthread_mutex_unlock(&sessions->lock);
  return closed;
}

unsigned console_sessions_count(console_sessions *sessions, int64_t now_s) {
  unsigned live = 0;
  pthread_mutex_lock(&sessions->lock);
  for (unsigned i = 0; i < sessions->count; i++) live += !expired(sessions, &sessions->entries[i], now_s);
  pthread_mutex_unlock(&sessions->lock);
  return live;
}

bool console_csrf_valid(const struct console_session *session, const char *header) {
  if (header == NULL || strlen(header) != CONSOLE_SECRET_SIZE - 1) return false;
  return sodium_memcmp(session->csrf, header, CONSOLE_SECRET_SIZE - 1) == 0;
}

bool console_cookie_value(const char *cookie_header, const char *name, char *value, size_t size) {
  if (cookie_header == NULL || name == NULL || size == 0) return false;
  size_t name_length = strlen(name);
  const char *p = cookie_header;
  while (*p) {
    while (*p == ' ' || *p == '\t' || *p == ';') p++;
    const char *end = strchr(p, ';');
    size_t length = end ? (size_t)(end - p) : strlen(p);
    if (length > name_length && strncmp(p, name, name_length) == 0 && p[name_length] == '=') {
      const char *start = p + name_length + 1;
      size_t value_length = length - name_length - 1;
      while (value_length && (start[value_length - 1] == ' ' || start[value_length - 1] == '\t'))
        value_length--;
      if (value_length == 0 || value_length >= size) return false;
      memcpy(value, start, value_length);
      value[value_length] = '\0';
      return true;
    }
    if (end == NULL) break;
    p = end + 1;
  }
  return false;
}
