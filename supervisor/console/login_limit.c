/* The rate limit on console logins: failures counted per source address and in total, in fixed
 * windows of CONSOLE_LOGIN_WINDOW_S seconds (a guess at a 256-bit token cannot succeed; the limit keeps
 * a flood of attempts from filling the journal and the CPU). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "supervisor/console/console.h"

struct source_window {
  char source[64];
  int64_t window_start_s;
  unsigned failures, refused;
};

struct console_login_limit {
  pthread_mutex_t lock;
  struct source_window sources[CONSOLE_LOGIN_SOURCES];
  int64_t total_window_start_s;
  unsigned total_failures;
};

console_login_limit *console_login_limit_new(void) {
  console_login_limit *limit = calloc(1, sizeof *limit);
  if (limit) pthread_mutex_init(&limit->lock, NULL);
  return limit;
}

void console_login_limit_free(console_login_limit *limit) {
  if (limit == NULL) return;
  pthread_mutex_destroy(&limit->lock);
  free(limit);
}

/* The window of `source` (a new or the oldest slot when unknown, reset when its window passed). */
static struct source_window *window_of(console_login_limit *limit, const char *source, int64_t now_s,
                                       bool create) {
  struct source_window *oldest = &limit->sources[0];
  for (size_t i = 0; i < CONSOLE_LOGIN_SOURCES; i++) {
    struct source_window *window = &limit->sources[i];
    if (window->source[0] && strcmp(window->source, source) == 0) {
      if (now_s - window->window_start_s >= CONSOLE_LOGIN_WINDOW_S) {
        window->window_start_s = now_s;
        window->failures = window->refused = 0;
      }
      return window;
    }
    if (window->source[0] == '\0' || window->window_start_s < oldest->window_start_s) oldest = window;
  }
  if (!create) return NULL;
  *oldest = (struct source_window){.window_start_s = now_s};
  snprintf(oldest->source, sizeof oldest->source, "%s", source);
  return oldest;
}

static void roll_total(console_login_limit *limit, int64_t now_s) {
  if (now_s - limit->total_window_start_s >= CONSOLE_LOGIN_WINDOW_S) {
    limit->total_window_start_s = now_s;
    limit->total_failures = 0;
  }
}

bool console_login_allowed(console_login_limit *limit, const char *source, int64_t now_s,
                           bool *first_refusal) {
  if (source == NULL || source[0] == '\0') source = "unknown";
  pthread_mutex_lock(&limit->lock);
  roll_total(limit, now_s);
  struct source_window *window = window_of(limit, source, now_s, true);
  bool allowed = window->failures < CONSOLE_LOGIN_FAILURES_PER_SOURCE &&
                 limit->total_failures < CONSOLE_LOGIN_FAILURES_TOTAL;
  if (!allowed) window->refused++;
  if (first_refusal) *first_refusal = !allowed && window->refused == 1;
  pthread_mutex_unlock(&limit->lock);
  return allowed;
}

void console_login_failed(console_login_limit *limit, const char *source, int64_t now_s) {
  if (source == NULL || source[0] == '\0') source = "unknown";
  pthread_mutex_lock(&limit->lock);
  roll_total(limit, now_s);
  window_of(limit, source, now_s, true)->failures++;
  limit->total_failures++;
  pthread_mutex_unlock(&limit->lock);
}

unsigned console_login_refused(console_login_limit *limit, const char *source, int64_t now_s) {
  if (source == NULL || source[0] == '\0') source = "unknown";
  pthread_mutex_lock(&limit->lock);
  struct source_window *window = window_of(limit, source, now_s, false);
  unsigned refused = window ? window->refused : 0;
  pthread_mutex_unlock(&limit->lock);
  return refused;
}
