/* The console (docs/console.md): its web files and its JSON API under /console/api/, for operators
 * logged in with a console token (`dome operators add`), never for agents. Login makes an HttpOnly,
 * SameSite=Strict cookie with an idle timeout and a CSRF token that every mutating request carries;
 * logins are rate-limited; logins, refusals and actions are journalled (console.login, console.refused,
 * console.action) with the operator's name. Agent-controlled values leave here as JSON text; the page
 * renders them as text. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "supervisor/audit/journal.h"
#include "supervisor/console/console.h"
#include "supervisor/domed/domed.h"
#include "supervisor/replay/replay.h"

#define API_PREFIX "/console/api/"
#define SEARCH_LIMIT_MAX 1000

static int64_t now_s(void) {
  return (int64_t)time(NULL);
}

static int reply_json(mcp_console_reply *reply, unsigned status, json_t *body /* stolen */) {
  reply->status = status;
  reply->content_type = "application/json";
  reply->body = body ? json_dumps(body, JSON_COMPACT) : NULL;
  json_decref(body);
  if (reply->body == NULL) return -ENOMEM;
  reply->length = strlen(reply->body);
  return 0;
}

static int reply_error(mcp_console_reply *reply, unsigned status, const char *message) {
  return reply_json(reply, status, json_pack("{s:s}", "error", message));
}

/* Journal a console event (stolen) and wait until it is durable. */
static int journal_console(struct domed *domed, json_t *event, dome_error *err) {
  int rc = domed_audit_append_sync(domed, event, err);
  json_decref(event);
  return rc;
}

/* ---- login ---- */

static int login(struct domed *domed, const mcp_console_request *request, mcp_console_reply *reply) {
  if (strcmp(request->method, "POST") != 0) return reply_error(reply, 405, "use POST");
  dome_error err = {0};
  int64_t now = now_s();
  bool first_refusal = false;
  if (!console_login_allowed(domed->console_logins, request->source, now, &first_refusal)) {
    if (first_refusal)
      journal_console(
          domed,
          json_pack("{s:s,s:s,s:s,s:s}", "type", "console.login", "outcome", "rate_limited", "source",
                    request->source, "reason", "too many failed logins from this source"),
          &err);
    return reply_error(reply, 429, "too many failed logins: try again in a minute");
  }
  json_error_t parse_error;
  json_t *body = json_loadb(request->body, request->length, 0, &parse_error);
  const char *token = json_string_value(json_object_get(body, "token"));
  if (token == NULL) {
    json_decref(body);
    return reply_error(reply, 400, "body: expected {\"token\": \"domeop_...\"}");
  }
  json_t *operator_record = control_operator_authenticate(domed->store, token, &err);
  json_decref(body);
  if (operator_record == NULL) {
    console_login_failed(domed->console_logins, request->source, now);
    dome_error journal_err = {0};
    if (journal_console(domed,
                        json_pack("{s:s,s:s,s:s,s:s}", "type", "console.login", "outcome", "refused",
                                  "source", request->source, "reason", err.message),
                        &journal_err) < 0)
      return reply_error(reply, 503, "the journal cannot record the login");
    return reply_error(reply, 401, "invalid login token");
  }
  const char *name = json_string_value(json_object_get(operator_record, "name"));
  const char *role = json_string_value(json_object_get(operator_record, "role"));
  if (journal_console(domed,
                      json_pack("{s:s,s:s,s:s,s:s,s:s}", "type", "console.login", "outcome", "accepted",
                                "operator", name, "role", role, "source", request->source),
                      &err) < 0) {
    json_decref(operator_record);
    return reply_error(reply, 503, "the journal cannot record the login");
  }
  struct console_session session;
  int rc = console_session_open(domed->console_sessions, name, role, now, &session);
  json_decref(operator_record);
  if (rc < 0) return reply_error(reply, 500, "cannot open a session");
  if (asprintf(&reply->set_cookie, CONSOLE_COOKIE_NAME "=%s; Path=/console; HttpOnly; SameSite=Strict%s",
               session.id, request->tls ? "; Secure" : "") < 0)
    reply->set_cookie = NULL;
  return reply_json(
      reply, 200,
      json_pack("{s:s,s:s,s:s,s:i}", "operator", session.operator_name, "role", session.role, "csrf",
                session.csrf, "idle_timeout_s", (int)console_sessions_idle_timeout(domed->console_sessions)));
}

/* ---- the live stream (SSE) ---- */

struct live_stream {
  struct domed *domed;
  journal_reader *reader;
  char *tool, *decision;
  char *pending; /* formatted bytes not yet sent */
  size_t pending_length, pending_sent;
  int64_t last_write_ns;
  bool primed;
};

static int64_t monotonic_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static bool member_is(const json_t *event, const char *member, const char *wanted) {
  const char *value = json_string_value(json_object_get(event, member));
  return value && strcmp(value, wanted) == 0;
}

static bool live_matches(const struct live_stream *stream, const json_t *event) {
  if (stream->tool && !member_is(event, "tool", stream->tool) && !member_is(event, "mcp_tool", stream->tool))
    return false;
  if (stream->decision && !member_is(event, "decision", stream->decision)) return false;
  return true;
}

static ssize_t live_take(struct live_stream *stream, char *buffer, size_t size) {
  size_t n = stream->pending_length - stream->pending_sent;
  if (n > size) n = size;
  memcpy(buffer, stream->pending + stream->pending_sent, n);
  stream->pending_sent += n;
  if (stream->pending_sent == stream->pending_length) {
    free(stream->pending);
    stream->pending = NULL;
    stream->pending_length = stream->pending_sent = 0;
  }
  stream->last_write_ns = monotonic_ns();
  return (ssize_t)n;
}

static ssize_t live_read(void *state, char *buffer, size_t size) {
  struct live_stream *stream = state;
  if (stream->pending) return live_take(stream, buffer, size);
  if (!stream->primed) {
    stream->primed = true;
    static const char priming[] = "retry: 1000\n: live\n\n";
    size_t n = sizeof priming - 1 < size ? sizeof priming - 1 : size;
    memcpy(buffer, priming, n);
    return (ssize_t)n;
  }
  for (;;) {
    if (atomic_load(&stream->domed->stopping)) return -1;
    journal_record record;
    dome_error err = {0};
    int rc = journal_reader_next(stream->reader, true, &record, &err);
    if (rc == 1) {
      bool wanted = live_matches(stream, record.event);
      json_decref(record.event);
      if (!wanted) continue;
      FILE *out = open_memstream(&stream->pending, &stream->pending_length);
      if (out == NULL) return -1;
      fprintf(out, "id: %" PRIu64 "\nevent: event\ndata: %.*s\n\n", record.seq, (int)record.length,
              record.line);
      fclose(out);
      return live_take(stream, buffer, size);
    }
    if (rc == -EAGAIN) {
      if (monotonic_ns() - stream->last_write_ns < 1000000000) continue;
      static const char keepalive[] = ": keepalive\n\n";
      stream->last_write_ns = monotonic_ns();
      memcpy(buffer, keepalive, sizeof keepalive - 1 < size ? sizeof keepalive - 1 : size);
      return (ssize_t)(sizeof keepalive - 1 < size ? sizeof keepalive - 1 : size);
    }
    if (rc < 0) domed_log("warn", "console", "msg=\"live stream: %s\"", err.message);
    return -1;
  }
}

static void live_release(void *state) {
  struct live_stream *stream = state;
  journal_reader_close(stream->reader);
  free(stream->tool);
  free(stream->decision);
  free(stream->pending);
  free(stream);
}

static bool parse_unsigned(const char *text, uint64_t *value) {
  if (text == NULL || *text == '\0') return false;
  char *end;
  errno = 0;
  unsigned long long number = strtoull(text, &end, 10);
  if (errno || *end || text[0] == '-') return false;
  *value = number;
  return true;
}

static uint64_t journal_last(struct domed *domed) {
  pthread_rwlock_rdlock(&domed->journal_lock);
  uint64_t last = domed->journal ? journal_last_seq(domed->journal) : 0;
  pthread_rwlock_unlock(&domed->journal_lock);
  return last;
}

static const char *query(const mcp_console_request *request, const char *name) {
  const char *value = mcp_console_query(request, name);
  return value && value[0] ? value : NULL;
}

static int live(struct domed *domed, const mcp_console_request *request, mcp_console_reply *reply) {
  uint64_t from_seq = journal_last(domed) + 1;
  const char *from = query(request, "from_seq");
  if (from && !parse_unsigned(from, &from_seq)) return reply_error(reply, 400, "from_seq: expected a number");
  const char *last_event = mcp_console_header(request, "Last-Event-ID");
  uint64_t resumed;
  if (last_event && parse_unsigned(last_event, &resumed)) from_seq = resumed + 1;
  journal_filter filter = {
      .from_seq = from_seq,
      .agent = query(request, "agent"),
      .type = query(request, "type"),
      .exec_id = query(request, "exec_id"),
      .follow = true,
      .follow_timeout_ms = 200,
  };
  struct live_stream *stream = calloc(1, sizeof *stream);
  if (stream == NULL) return -ENOMEM;
  stream->domed = domed;
  stream->last_write_ns = monotonic_ns();
  if (query(request, "tool")) stream->tool = strdup(query(request, "tool"));
  if (query(request, "decision")) stream->decision = strdup(query(request, "decision"));
  dome_error err = {0};
  if (journal_reader_open(domed->config.journal_dir, &filter, &stream->reader, &err) < 0) {
    live_release(stream);
    return reply_error(reply, 503, err.message);
  }
  reply->status = 200;
  reply->content_type = "text/event-stream";
  reply->read = live_read;
  reply->release = live_release;
  reply->state = stream;
  return 0;
}

/* ---- executions ---- */

static bool parse_time_query(const mcp_console_request *request, const char *name, int64_t *ns,
                             mcp_console_reply *reply, int *rc) {
  const char *text = query(request, name);
  *ns = 0;
  if (text == NULL) return true;
  dome_error err = {0};
  if (journal_parse_time(text, ns, &err) < 0) {
    char message[1100];
    snprintf(message, sizeof message, "%s: %.1000s", name, err.message);
    *rc = reply_error(reply, 400, message);
    return false;
  }
  return true;
}

/* Search the ends of executions (console_index.c): agent, since/until (RFC 3339), exit (a number or
 * "nonzero"), denials=1 / redactions=1 (at least one), limit (newest first, at most SEARCH_LIMIT_MAX). */
static int executions_search(struct domed *domed, const mcp_console_request *request,
                             mcp_console_reply *reply) {
  int rc = 0;
  struct domed_execution_query search = {.agent = query(request, "agent"), .limit = 100};
  if (!parse_time_query(request, "since", &search.since_ns, reply, &rc) ||
      !parse_time_query(request, "until", &search.until_ns, reply, &rc))
    return rc;
  uint64_t limit = 100;
  if (query(request, "limit") && (!parse_unsigned(query(request, "limit"), &limit) || limit == 0))
    return reply_error(reply, 400, "limit: expected a positive number");
  search.limit = limit > SEARCH_LIMIT_MAX ? SEARCH_LIMIT_MAX : (size_t)limit;
  const char *exit_text = query(request, "exit");
  uint64_t exit_code = 0;
  search.exit_given = exit_text != NULL;
  search.nonzero = exit_text && strcmp(exit_text, "nonzero") == 0;
  if (exit_text && !search.nonzero && !parse_unsigned(exit_text, &exit_code))
    return reply_error(reply, 400, "exit: expected a number or `nonzero`");
  search.exit_code = (int64_t)exit_code;
  search.denials = query(request, "denials") != NULL;
  search.redactions = query(request, "redactions") != NULL;
  json_t *found = NULL;
  dome_error err = {0};
  if (domed_console_index_search(domed, &search, &found, &err) < 0)
    return reply_error(reply, 503, err.message);
  return reply_json(reply, 200, json_pack("{s:o}", "executions", found));
}

static bool exec_id_valid(const char *id) {
  size_t length = strlen(id);
  if (length == 0 || length > 64) return false;
  for (size_t i = 0; i < length; i++) {
    char c = id[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_'))
      return false;
  }
  return true;
}

/* Every event of one execution, in journal order (the decision, start, jail, output, denials,
 * redactions, end). */
static int execution(struct domed *domed, const char *exec_id, mcp_console_reply *reply) {
  if (!exec_id_valid(exec_id)) return reply_error(reply, 400, "execution id: expected [A-Za-z0-9_-]{1,64}");
  journal_filter filter = {.exec_id = exec_id};
  journal_reader *reader = NULL;
  dome_error err = {0};
  if (journal_reader_open(domed->config.journal_dir, &filter, &reader, &err) < 0)
    return reply_error(reply, 503, err.message);
  json_t *events = json_array();
  journal_record record;
  int rc;
  size_t bytes = 0;
  while ((rc = journal_reader_next(reader, true, &record, &err)) == 1) {
    bytes += record.length;
    if (bytes > (64u << 20)) { /* bounded: an execution's records are bounded far below this */
      json_decref(record.event);
      break;
    }
    json_array_append_new(events, record.event);
  }
  journal_reader_close(reader);
  if (rc < 0) {
    json_decref(events);
    return reply_error(reply, 503, err.message);
  }
  if (json_array_size(events) == 0) {
    json_decref(events);
    return reply_error(reply, 404, "no such execution");
  }
  return reply_json(reply, 200, json_pack("{s:s,s:o}", "exec_id", exec_id, "events", events));
}

/* ---- inclusion proofs ---- */

static int proof(struct domed *domed, const mcp_console_request *request, mcp_console_reply *reply) {
  uint64_t seq = 0;
  if (!parse_unsigned(query(request, "seq"), &seq) || seq == 0)
    return reply_error(reply, 400, "seq: expected a positive number");
  if (seq > journal_last(domed)) return reply_error(reply, 404, "no such event");
  json_t *result = NULL;
  dome_error err = {0};
  int rc = journal_prove(domed->config.journal_dir, seq, &result, &err);
  if (rc == -ENOENT) {
    /* not yet under a checkpoint: sign one now (what any append after checkpoint_every_ms would do) */
    pthread_rwlock_rdlock(&domed->journal_lock);
    rc = domed->journal ? journal_checkpoint(domed->journal, NULL, &err) : -EIO;
    pthread_rwlock_unlock(&domed->journal_lock);
    if (rc == 0) rc = journal_prove(domed->config.journal_dir, seq, &result, &err);
  }
  if (rc < 0) return reply_error(reply, rc == -ENOENT ? 404 : 503, err.message);
  return reply_json(reply, 200, result);
}

static int journal_key(struct domed *domed, mcp_console_reply *reply) {
  char path[1200];
  snprintf(path, sizeof path, "%s/signing.pub", domed->config.journal_dir);
  FILE *file = fopen(path, "re");
  char text[200] = "";
  if (file == NULL || fgets(text, sizeof text, file) == NULL) {
    if (file) fclose(file);
    return reply_error(reply, 503, "the journal's public key cannot be read");
  }
  fclose(file);
  text[strcspn(text, "\r\n")] = '\0';
  return reply_json(reply, 200, json_pack("{s:s}", "public_key", text));
}

/* ---- agents ---- */

static int agents(struct domed *domed, mcp_console_reply *reply) {
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  dome_error err = {0};
  json_t *activity =
      domed_console_index_activity(domed, (int64_t)now.tv_sec * 1000000000 + now.tv_nsec, &err);
  if (activity == NULL) return reply_error(reply, 503, err.message);
  return reply_json(reply, 200,
                    json_pack("{s:o,s:o,s:o}", "agents", control_agent_list(domed->store), "quotas",
                              control_quota_list(domed->store), "activity", activity));
}

/* POST /console/api/agents/<name>/(suspend|resume): operator role only. The console.action record is
 * durable before the change; the change itself journals agent.status as from the CLI. */
static int agent_action(struct domed *domed, const struct console_session *session, const char *rest,
                        mcp_console_reply *reply) {
  const char *slash = strrchr(rest, '/');
  if (slash == NULL) return reply_error(reply, 404, "not found");
  char name[CONTROL_NAME_MAX];
  size_t length = (size_t)(slash - rest);
  if (length == 0 || length >= sizeof name) return reply_error(reply, 400, "agent: invalid name");
  memcpy(name, rest, length);
  name[length] = '\0';
  const char *verb = slash + 1;
  if (strcmp(verb, "suspend") != 0 && strcmp(verb, "resume") != 0)
    return reply_error(reply, 404, "not found");
  char action[32];
  snprintf(action, sizeof action, "agents.%s", verb);
  dome_error err = {0};
  if (strcmp(session->role, "operator") != 0) {
    journal_console(domed,
                    json_pack("{s:s,s:s,s:s,s:s,s:s,s:s}", "type", "console.action", "operator",
                              session->operator_name, "role", session->role, "action", action, "agent", name,
                              "outcome", "refused: the auditor role reads only"),
                    &err);
    return reply_error(reply, 403, "the auditor role may not change agents");
  }
  if (!control_name_valid(name)) return reply_error(reply, 400, "agent: invalid name");
  if (journal_console(
          domed,
          json_pack("{s:s,s:s,s:s,s:s,s:s,s:s}", "type", "console.action", "operator", session->operator_name,
                    "role", session->role, "action", action, "agent", name, "outcome", "requested"),
          &err) < 0)
    return reply_error(reply, 503, "the journal cannot record the action");
  json_t *args = json_pack("{s:s}", "name", name);
  struct control_request control = {.command = action, .args = args, .uid = 0, .fd = -1};
  json_t *result = domed_control_handle(domed, &control, &err);
  json_decref(args);
  if (result == NULL) return reply_error(reply, err.errno_value == ENOENT ? 404 : 400, err.message);
  return reply_json(reply, 200, result);
}

/* ---- anomalies ---- */

#define ALERTS_LIMIT_MAX 1000
#define RESPONSE_SCAN_EVENTS 100000 /* how far past an alert no longer kept its suspension is looked for */

/* GET /console/api/anomalies?level=&agent=&limit=: the kept alerts, newest first, at or above `level`. */
static int anomalies(struct domed *domed, const mcp_console_request *request, mcp_console_reply *reply) {
  struct console_alert_query search = {.agent = query(request, "agent"), .limit = 100};
  dome_error err = {0};
  const char *level = query(request, "level");
  anomaly_level min_level = ANOMALY_LEVEL_NONE;
  if (level && anomaly_level_parse(level, &min_level, &err) < 0) {
    char message[600];
    snprintf(message, sizeof message, "level: %.500s", err.message);
    return reply_error(reply, 400, message);
  }
  uint64_t limit = 100;
  if (query(request, "limit") && (!parse_unsigned(query(request, "limit"), &limit) || limit == 0))
    return reply_error(reply, 400, "limit: expected a positive number");
  search.limit = limit > ALERTS_LIMIT_MAX ? ALERTS_LIMIT_MAX : (size_t)limit;
  search.min_level = (int)min_level;
  json_t *found = domed_console_index_alerts(domed, &search, &err);
  if (found == NULL) return reply_error(reply, 503, err.message);
  return reply_json(reply, 200, found);
}

/* The journal's events with seq in [from, to] of `type` (NULL: any), at most `most`, appended to
 * `events`. Returns 0 or the reader's -errno. */
static int read_events(struct domed *domed, uint64_t from, uint64_t to, const char *type, size_t most,
                       json_t *events, dome_error *err) {
  journal_filter filter = {.from_seq = from, .to_seq = to, .type = type};
  journal_reader *reader = NULL;
  int rc = journal_reader_open(domed->config.journal_dir, &filter, &reader, err);
  if (rc < 0) return rc;
  journal_record record;
  while (json_array_size(events) < most && (rc = journal_reader_next(reader, true, &record, err)) == 1)
    json_array_append_new(events, record.event);
  journal_reader_close(reader);
  return rc < 0 ? rc : 0;
}

/* An alert no longer kept in memory: from the journal, with the agent.suspended naming it among the
 * RESPONSE_SCAN_EVENTS events after it. NULL when `seq` is not an anomaly.alert. */
static json_t *alert_from_journal(struct domed *domed, uint64_t seq, dome_error *err) {
  json_t *found = json_array();
  json_t *alert = NULL;
  if (read_events(domed, seq, seq, "anomaly.alert", 1, found, err) == 0 && json_array_size(found) == 1) {
    alert = json_incref(json_array_get(found, 0));
    json_array_clear(found);
    json_t *response = NULL;
    if (read_events(domed, seq + 1, seq + RESPONSE_SCAN_EVENTS, "agent.suspended", RESPONSE_SCAN_EVENTS,
                    found, err) == 0) {
      size_t i;
      json_t *event;
      json_array_foreach(found, i, event) {
        if (json_integer_value(json_object_get(event, "alert_seq")) == (json_int_t)seq) {
          response = json_incref(event);
          break;
        }
      }
    }
    json_object_set_new(alert, "response", response ? response : json_null());
  }
  json_decref(found);
  return alert;
}

/* GET /console/api/anomalies/<seq>: {alert (with response), events (the contributing events, by the
 * alert's seqs, in order; a seq retention removed is missing), rule (the applied set's rule with its
 * source, or null)}. */
static int anomaly(struct domed *domed, const char *rest, mcp_console_reply *reply) {
  uint64_t seq = 0;
  if (!parse_unsigned(rest, &seq) || seq == 0)
    return reply_error(reply, 400, "alert: expected its seq (a positive number)");
  dome_error err = {0};
  json_t *alert = NULL;
  if (domed_console_index_alert(domed, seq, &alert, &err) < 0) return reply_error(reply, 503, err.message);
  if (alert == NULL && seq <= journal_last(domed)) alert = alert_from_journal(domed, seq, &err);
  if (alert == NULL) return reply_error(reply, 404, "no such alert");
  json_t *events = json_array();
  size_t i;
  json_t *value;
  json_array_foreach(json_object_get(alert, "seqs"), i, value) {
    uint64_t contributing = (uint64_t)json_integer_value(value);
    if (contributing == 0 || contributing >= seq) continue; /* an alert follows what made it fire */
    if (read_events(domed, contributing, contributing, NULL, json_array_size(events) + 1, events, &err) < 0) {
      json_decref(events);
      json_decref(alert);
      return reply_error(reply, 503, err.message);
    }
  }
  json_t *rule = domed_anomaly_rule(domed, json_string_value(json_object_get(alert, "rule_id")));
  return reply_json(
      reply, 200,
      json_pack("{s:o,s:o,s:o}", "alert", alert, "events", events, "rule", rule ? rule : json_null()));
}

/* ---- rules ---- */

static int rules(struct domed *domed, const char *rest, mcp_console_reply *reply) {
  if (*rest == '\0')
    return reply_json(reply, 200, json_pack("{s:o}", "versions", control_rules_list(domed->store)));
  uint64_t version = 0;
  if (!parse_unsigned(rest, &version) || version == 0 || version > 1000000)
    return reply_error(reply, 400, "rules version: expected a positive number");
  dome_error err = {0};
  char *text = control_rules_text(domed->store, (int)version, &err);
  if (text == NULL) return reply_error(reply, 404, err.message);
  json_t *body = json_pack("{s:I,s:s}", "version", (json_int_t)version, "text", text);
  free(text);
  return reply_json(reply, 200, body);
}

#define SIMULATE_DIFFS_MAX 500

/* POST /console/api/rules/simulate {"text": candidate rules}: the DecisionDiffs of the candidate
 * against every recorded request (`dome rules simulate`), the first SIMULATE_DIFFS_MAX of them. Changes
 * nothing; journalled as console.action with the candidate's digest. */
static int rules_simulate(struct domed *domed, const struct console_session *session,
                          const mcp_console_request *request, mcp_console_reply *reply) {
  json_error_t parse_error;
  json_t *body = json_loadb(request->body, request->length, 0, &parse_error);
  const char *text = json_string_value(json_object_get(body, "text"));
  if (text == NULL) {
    json_decref(body);
    return reply_error(reply, 400, "body: expected {\"text\": \"<Cedar policies>\"}");
  }
  size_t length = json_string_length(json_object_get(body, "text"));
  dome_error err = {0};
  json_t *event = json_pack("{s:s,s:s,s:s,s:s}", "type", "console.action", "operator", session->operator_name,
                            "role", session->role, "action", "rules.simulate");
  domed_audit_set_text(event, "candidate", text, length);
  if (journal_console(domed, event, &err) < 0) {
    json_decref(body);
    return reply_error(reply, 503, "the journal cannot record the action");
  }
  json_t *report = NULL;
  int rc = replay_simulate_rules_text(text, length, "candidate.cedar", domed->config.journal_dir,
                                      SIMULATE_DIFFS_MAX, &report, &err);
  json_decref(body);
  if (rc < 0) return reply_error(reply, rc == -EINVAL ? 400 : 503, err.message);
  return reply_json(reply, 200, report);
}

/* ---- routing ---- */

static bool mutating(const char *method) {
  return strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0;
}

static int api(struct domed *domed, const mcp_console_request *request, mcp_console_reply *reply) {
  const char *route = request->path + sizeof API_PREFIX - 1;
  if (request->body_too_large) return reply_error(reply, 413, "request body too large");
  if (strcmp(route, "login") == 0) return login(domed, request, reply);
  char cookie[CONSOLE_SECRET_SIZE + 8];
  struct console_session session;
  if (!console_cookie_value(mcp_console_header(request, "Cookie"), CONSOLE_COOKIE_NAME, cookie,
                            sizeof cookie) ||
      console_session_find(domed->console_sessions, cookie, now_s(), &session) < 0)
    return reply_error(reply, 401, "not logged in (or the session was idle too long)");
  if (mutating(request->method) &&
      !console_csrf_valid(&session, mcp_console_header(request, "X-CSRF-Token"))) {
    dome_error err = {0};
    journal_console(domed,
                    json_pack("{s:s,s:s,s:s,s:s,s:s,s:s}", "type", "console.refused", "reason",
                              "missing or wrong CSRF token", "operator", session.operator_name, "method",
                              request->method, "path", request->path, "source", request->source),
                    &err);
    return reply_error(reply, 403, "missing or wrong X-CSRF-Token");
  }
  bool get = strcmp(request->method, "GET") == 0;
  if (strcmp(route, "session") == 0 && get)
    return reply_json(reply, 200,
                      json_pack("{s:s,s:s,s:s,s:i}", "operator", session.operator_name, "role", session.role,
                                "csrf", session.csrf, "idle_timeout_s",
                                (int)console_sessions_idle_timeout(domed->console_sessions)));
  if (strcmp(route, "logout") == 0 && strcmp(request->method, "POST") == 0) {
    console_session_close(domed->console_sessions, session.id);
    reply->set_cookie = strdup(CONSOLE_COOKIE_NAME "=; Path=/console; HttpOnly; SameSite=Strict; Max-Age=0");
    return reply_json(reply, 200, json_pack("{s:b}", "logged_out", 1));
  }
  if (strcmp(route, "events") == 0 && get) return live(domed, request, reply);
  if (strcmp(route, "executions") == 0 && get) return executions_search(domed, request, reply);
  if (strncmp(route, "executions/", 11) == 0 && get) return execution(domed, route + 11, reply);
  if (strcmp(route, "proof") == 0 && get) return proof(domed, request, reply);
  if (strcmp(route, "journal-key") == 0 && get) return journal_key(domed, reply);
  if (strcmp(route, "agents") == 0 && get) return agents(domed, reply);
  if (strcmp(route, "overview") == 0 && get) return reply_json(reply, 200, domed_console_overview(domed));
  if (strncmp(route, "agents/", 7) == 0 && strcmp(request->method, "POST") == 0)
    return agent_action(domed, &session, route + 7, reply);
  if (strcmp(route, "rules/simulate") == 0 && strcmp(request->method, "POST") == 0)
    return rules_simulate(domed, &session, request, reply);
  if (strcmp(route, "anomalies") == 0 && get) return anomalies(domed, request, reply);
  if (strncmp(route, "anomalies/", 10) == 0 && get) return anomaly(domed, route + 10, reply);
  if (strcmp(route, "rules/shadow") == 0 && get) {
    /* the summary `dome rules shadow` prints (shadow.c), or none */
    json_t *report = domed_shadow_report(domed);
    return reply_json(reply, 200, report ? report : json_pack("{s:n}", "shadow"));
  }
  if (strcmp(route, "rules") == 0 && get) return rules(domed, "", reply);
  if (strncmp(route, "rules/", 6) == 0 && get) return rules(domed, route + 6, reply);
  return reply_error(reply, 404, "no such console API");
}

/* The page (index.html) for /console and every view path (/console/live, /console/executions/ID, ...),
 * the built-in file for a path that names one. */
static int asset(const mcp_console_request *request, mcp_console_reply *reply) {
  if (strcmp(request->method, "GET") != 0 && strcmp(request->method, "HEAD") != 0)
    return reply_error(reply, 405, "use GET");
  const char *path = request->path + strlen("/console");
  if (*path == '/') path++;
  const struct console_asset *file = console_asset_find(path);
  if (file == NULL && strchr(path, '.') == NULL) file = console_asset_find("index.html");
  if (file == NULL) return reply_error(reply, 404, "not found");
  reply->status = 200;
  reply->content_type = file->content_type;
  reply->static_body = file->data;
  reply->length = file->length;
  reply->cache_control = "no-cache";
  return 0;
}

int domed_console(void *context, const mcp_console_request *request, mcp_console_reply *reply) {
  struct domed *domed = context;
  const char *authorization = mcp_console_header(request, "Authorization");
  if (authorization) {
    /* agents never open the console: whatever the token, refused and journalled */
    const char *token = strncasecmp(authorization, "Bearer ", 7) == 0 ? authorization + 7 : "";
    dome_error err = {0};
    json_t *agent = control_agent_authenticate(domed->store, token, &err);
    journal_console(domed,
                    json_pack("{s:s,s:s,s:s?,s:s,s:s,s:s}", "type", "console.refused", "reason",
                              agent ? "agent bearer token" : "bearer token", "agent",
                              agent ? json_string_value(json_object_get(agent, "name")) : NULL, "method",
                              request->method, "path", request->path, "source", request->source),
                    &err);
    json_decref(agent);
    return reply_error(reply, 403, "the console does not take bearer tokens: log in as an operator");
  }
  if (strncmp(request->path, API_PREFIX, sizeof API_PREFIX - 1) == 0) return api(domed, request, reply);
  return asset(request, reply);
}

int domed_console_start(struct domed *domed, dome_error *err) {
  domed->console_sessions = console_sessions_new(domed->config.console_idle_s, 0);
  domed->console_logins = console_login_limit_new();
  if (domed->console_sessions == NULL || domed->console_logins == NULL)
    return dome_error_set(err, ENOMEM, "console: out of memory");
  int rc = domed_console_overview_start(domed, err);
  return rc < 0 ? rc : domed_console_index_start(domed, err);
}

void domed_console_stop(struct domed *domed) {
  domed_console_index_stop(domed);
  domed_console_overview_stop(domed);
  console_sessions_free(domed->console_sessions);
  console_login_limit_free(domed->console_logins);
  domed->console_sessions = NULL;
  domed->console_logins = NULL;
}

void domed_console_logout_operator(struct domed *domed, const char *operator_name) {
  if (domed->console_sessions) console_sessions_close_operator(domed->console_sessions, operator_name);
}
