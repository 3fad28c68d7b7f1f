/* The console's own state, apart from HTTP and domed: operator login sessions (the cookie, the CSRF
 * token, the idle timeout), the rate limit on login attempts, the security headers of every console
 * response, the bounded stores behind the Anomalies and Agents views (alerts, calls per minute), and
 * the web assets built into the binary (generated from console/ at build time). */
#ifndef DOME_CONSOLE_CONSOLE_H
#define DOME_CONSOLE_CONSOLE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CONSOLE_COOKIE_NAME "dome_console"
#define CONSOLE_SECRET_SIZE 44 /* 32 random bytes in URL-safe base64 without padding (43) + NUL */
#define CONSOLE_SESSIONS_MAX 256
#define CONSOLE_OPERATOR_NAME_MAX 128

/* Headers of every console response (name, value, ..., NULL): a Content-Security-Policy that allows
 * nothing but the console's own files (no inline script or style, no framing, no plug-ins),
 * X-Frame-Options DENY, Referrer-Policy no-referrer, X-Content-Type-Options nosniff. */
extern const char *const console_security_headers[];

/* ---- sessions ---- */

struct console_session {
  char id[CONSOLE_SECRET_SIZE];   /* the cookie's value */
  char csrf[CONSOLE_SECRET_SIZE]; /* the X-CSRF-Token every mutating request carries */
  char operator_name[CONSOLE_OPERATOR_NAME_MAX];
  char role[16]; /* "auditor" or "operator" */
  int64_t created_s, last_used_s;
};

typedef struct console_sessions console_sessions;

/* A table of at most `max` sessions (0: CONSOLE_SESSIONS_MAX) that end after `idle_timeout_s`
 * seconds without a request (0: 900). NULL when out of memory. Thread-safe. */
console_sessions *console_sessions_new(unsigned idle_timeout_s, unsigned max);
void console_sessions_free(console_sessions *sessions);
unsigned console_sessions_idle_timeout(const console_sessions *sessions);

/* Open a session for `operator_name` with `role` at `now_s` (Unix seconds): fresh random id and CSRF
 * token in *session. A full table gives up its least recently used session. Returns 0, or -EINVAL
 * for a name too long or an unknown role. */
int console_session_open(console_sessions *sessions, const char *operator_name, const char *role,
                         int64_t now_s, struct console_session *session);

/* The session named by `id` if it was used within the idle timeout: copied into *session and its
 * last use set to now_s; an expired one is removed. Returns 0, or -ENOENT (unknown, expired, NULL).
 * The comparison takes the same time whichever byte differs (sodium_memcmp). */
int console_session_find(console_sessions *sessions, const char *id, int64_t now_s,
                         struct console_session *session);

/* End session `id` (logout); nothing when unknown. */
void console_session_close(console_sessions *sessions, const char *id);
/* End every session of `operator_name` (revoked); returns how many. */
unsigned console_sessions_close_operator(console_sessions *sessions, const char *operator_name);
/* Live sessions (expired ones not counted). */
unsigned console_sessions_count(console_sessions *sessions, int64_t now_s);

/* True when `header` (the X-CSRF-Token value, may be NULL) equals the session's CSRF token, in time
 * independent of where they differ. */
bool console_csrf_valid(const struct console_session *session, const char *header);

/* The value of cookie `name` in a Cookie header (RFC 6265 section 5.4: "a=1; b=2"), copied into
 * value[size]. False when absent, empty, or longer than size - 1. */
bool console_cookie_value(const char *cookie_header, const char *name, char *value, size_t size);

/* ---- login rate limit ---- */

/* Failed logins allowed per source address in CONSOLE_LOGIN_WINDOW_S seconds, and in total. */
#define CONSOLE_LOGIN_FAILURES_PER_SOURCE 5
#define CONSOLE_LOGIN_FAILURES_TOTAL 50
#define CONSOLE_LOGIN_WINDOW_S 60
#define CONSOLE_LOGIN_SOURCES 512 /* sources tracked; the oldest window is reused */

typedef struct console_login_limit console_login_limit;

console_login_limit *console_login_limit_new(void);
void console_login_limit_free(console_login_limit *limit);

/* Whether a login from `source` may be tried at now_s: false once the source (or all sources
 * together) failed the allowed number of times within the window; then *first_refusal tells whether
 * this is the window's first refused attempt of the source (journal it, not every one). */
bool console_login_allowed(console_login_limit *limit, const char *source, int64_t now_s,
                           bool *first_refusal);
/* Count a failed login of `source`. */
void console_login_failed(console_login_limit *limit, const char *source, int64_t now_s);
/* Attempts from `source` refused in its current window (0 when none). */
unsigned console_login_refused(console_login_limit *limit, const char *source, int64_t now_s);

/* ---- assets ---- */

struct console_asset {
  const char *path;         /* beneath /console/, e.g. "app.js" */
  const char *content_type; /* e.g. "text/javascript; charset=utf-8" */
  const unsigned char *data;
  size_t length;
};

/* The built-in file at `path` (relative to /console/, no leading slash), or NULL. */
const struct console_asset *console_asset_find(const char *path);

/* ---- alerts.c: the newest anomaly alerts, for the Anomalies view ---- */

#define CONSOLE_ALERTS_MAX 10000
#define CONSOLE_ALERTS_BYTES (16u << 20) /* of their journal lines */
struct console_alerts;
/* A new, empty store keeping at most `max_alerts` alerts and `max_bytes` of their journal lines (0: the
 * defaults above), or NULL (out of memory). */
struct console_alerts *console_alerts_new(size_t max_alerts, size_t max_bytes);
void console_alerts_free(struct console_alerts *alerts);
/* Fold one journal event (borrowed; a reference is kept), `seq` its seq and `bytes` its line's length:
 * an anomaly.alert is kept, `level` its Sigma level's rank (anomaly_level: higher is more severe; the
 * oldest alerts give way past the bounds; one not newer than the newest kept is ignored); an
 * agent.suspended is attached as the response of the kept alert its `alert_seq` names (the first
 * only). Other events are ignored. */
void console_alerts_fold(struct console_alerts *alerts, json_t *event, uint64_t seq, size_t bytes, int level);
struct console_alert_query {
  const char *agent; /* exact, or NULL */
  int min_level;     /* alerts whose level's rank is at least this */
  size_t limit;      /* most results, newest first */
};
/* {alerts: [the alert events, each with `response` (the agent.suspended event, or null)], kept (the count
 * held), oldest_kept_seq (0 when none), older_dropped (an older alert gave way)} (new reference). */
json_t *console_alerts_list(struct console_alerts *alerts, const struct console_alert_query *query);
/* A copy of the kept alert `seq` with its response, or NULL. */
json_t *console_alerts_find(struct console_alerts *alerts, uint64_t seq);

/* ---- calls.c: each agent's calls per minute over the last hour, for the Agents view ---- */

#define CONSOLE_CALLS_AGENTS_MAX 4096
struct console_calls;
/* A new table for at most `max_agents` agents (0: CONSOLE_CALLS_AGENTS_MAX), or NULL (out of memory).
 * About 1 KiB an agent. */
struct console_calls *console_calls_new(size_t max_agents);
void console_calls_free(struct console_calls *calls);
/* Count one call of `agent` at `time_ns` (Unix ns), allowed or denied. A new agent beyond the bound
 * takes the place of the agent whose last call is the oldest. */
void console_calls_count(struct console_calls *calls, const char *agent, bool allow, int64_t time_ns);
/* {agent: {calls_per_minute: [60 counts, oldest first, the last the minute of now_ns], allow, deny (over
 * those 60 minutes)}} for the agents with a call in them (new reference). */
json_t *console_calls_last_hour(const struct console_calls *calls, int64_t now_ns);

#endif
