/* The journal (supervisor/audit/journal.h): every authorization decision, execution, redaction and
 * administrative change is appended; calls wait for journal_sync before answering; `audit.stream`
 * follows the journal live for the CLI. */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>

#include "supervisor/audit/journal.h"
#include "supervisor/domed/domed.h"

int domed_audit_open(struct domed *domed, dome_error *err) {
  journal_options options;
  journal_options_init(&options, domed->config.journal_dir);
  options.group_commit_window_ms = domed->config.journal_commit_window_ms;
  journal *j = NULL;
  int rc = journal_open(&options, &j, err);
  if (rc < 0) return dome_error_wrap(err, "journal `%s`", domed->config.journal_dir);
  domed->journal = j;
  return 0;
}

void domed_audit_close(struct domed *domed) {
  dome_error err = {0};
  if (domed->journal && journal_close(domed->journal, &err) < 0)
    domed_log("error", "audit", "msg=\"closing the journal: %s\"", err.message);
  domed->journal = NULL;
}

uint64_t domed_audit_append(struct domed *domed, json_t *event) {
  if (domed->journal == NULL) return 0;
  uint64_t seq = 0;
  dome_error err = {0};
  if (journal_append(domed->journal, event, &seq, &err) < 0) {
    domed_log("error", "audit", "msg=\"journal append failed: %s\"", err.message);
    return 0;
  }
  return seq;
}

int domed_audit_sync(struct domed *domed, uint64_t seq, dome_error *err) {
  if (domed->journal == NULL) return dome_error_set(err, EIO, "journal not open");
  int failed = journal_failed(domed->journal);
  if (failed < 0) return dome_error_set(err, -failed, "journal refuses events (fail closed)");
  if (seq == 0) return dome_error_set(err, EIO, "event not journalled");
  return journal_sync(domed->journal, seq, err);
}

json_t *domed_decision_event(const char *exec_id, const mcp_identity *identity, const char *action,
                             const char *tool, const char *mcp_tool, const struct domed_decision *decision,
                             const char *reason) {
  json_t *determining = decision->determining ? json_incref(decision->determining) : json_array();
  json_t *errors = decision->errors ? json_incref(decision->errors) : json_array();
  json_t *event =
      json_pack("{s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:o,s:o,s:s,s:s}", "type", "authz.decision", "agent",
                identity->agent, "gateway", identity->gateway, "action", action, "tool", tool, "mcp_tool",
                mcp_tool, "decision", decision->allow ? "allow" : "deny", "determining", determining,
                "errors", errors, "policy_name", decision->policy_name, "reason", reason);
  char version[32];
  snprintf(version, sizeof version, "%d", decision->policy_version);
  json_object_set_new(event, "policy_version", json_string(version));
  if (exec_id) json_object_set_new(event, "exec_id", json_string(exec_id));
  if (identity->actas[0]) json_object_set_new(event, "actas", json_string(identity->actas));
  if (decision->request) json_object_set(event, "request", decision->request);
  return event;
}

static bool peer_gone(int fd) {
  struct pollfd pfd = {.fd = fd, .events = POLLIN | POLLRDHUP};
  if (poll(&pfd, 1, 0) <= 0) return false;
  return (pfd.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

/* `audit.stream` args (all optional): agent, exec_id, type (filters as journal_filter), since_ns (Unix
 * ns), from_seq (default: the next event journalled, or the oldest kept when since_ns is given), follow
 * (default true: wait for new events until the client leaves or domed stops). {"describe": true} answers
 * at once with {"journal_dir", "last_seq"} (for clients that read domed's journal themselves, e.g.
 * `dome rules apply --simulate-first`). */
json_t *domed_audit_stream(struct domed *domed, const struct control_request *request, dome_error *err) {
  if (domed->journal == NULL) {
    dome_error_set(err, EIO, "journal not open");
    return NULL;
  }
  json_t *args = request->args;
  if (json_is_true(json_object_get(args, "describe")))
    return json_pack("{s:s,s:I}", "journal_dir", domed->config.journal_dir, "last_seq",
                     (json_int_t)journal_last_seq(domed->journal));
  static const char *strings[] = {"agent", "exec_id", "type"};
  for (size_t i = 0; i < sizeof strings / sizeof strings[0]; i++) {
    json_t *value = json_object_get(args, strings[i]);
    if (value && !json_is_string(value)) {
      dome_error_set(err, EINVAL, "audit.stream: `%s` must be a string", strings[i]);
      return NULL;
    }
  }
  json_t *from = json_object_get(args, "from_seq"), *since = json_object_get(args, "since_ns");
  if ((from && (!json_is_integer(from) || json_integer_value(from) < 0)) ||
      (since && (!json_is_integer(since) || json_integer_value(since) < 0))) {
    dome_error_set(err, EINVAL, "audit.stream: `%s` must be a non-negative integer",
                   from && !json_is_integer(from) ? "from_seq" : "since_ns");
    return NULL;
  }
  uint64_t from_seq = journal_last_seq(domed->journal) + 1;
  if (json_is_integer(from))
    from_seq = (uint64_t)json_integer_value(from);
  else if (since)
    from_seq = 1;
  journal_filter filter = {
      .from_seq = from_seq,
      .since_ns = since ? (int64_t)json_integer_value(since) : 0,
      .agent = json_string_value(json_object_get(args, "agent")),
      .exec_id = json_string_value(json_object_get(args, "exec_id")),
      .type = json_string_value(json_object_get(args, "type")),
      .follow = !json_is_false(json_object_get(args, "follow")),
      .follow_timeout_ms = 500,
  };
  journal_reader *reader = NULL;
  if (journal_reader_open(domed->config.journal_dir, &filter, &reader, err) < 0) return NULL;
  json_t *result = NULL;
  for (;;) {
    if (atomic_load(&domed->stopping) || control_server_stopping(domed->control) || peer_gone(request->fd)) {
      result = json_pack("{s:b}", "ended", 1);
      break;
    }
    journal_record record;
    int rc = journal_reader_next(reader, true, &record, err);
    if (rc == -EAGAIN) continue;
    if (rc == 0) {
      result = json_pack("{s:b}", "ended", 1);
      break;
    }
    if (rc < 0) break;
    int sent = control_send_event(request->fd, record.event);
    json_decref(record.event);
    if (sent < 0) {
      result = json_pack("{s:b}", "ended", 1);
      break;
    }
  }
  journal_reader_close(reader);
  return result;
}
