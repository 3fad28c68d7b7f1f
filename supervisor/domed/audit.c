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

static bool peer_gone(int fd) {
  struct pollfd pfd = {.fd = fd, .events = POLLIN | POLLRDHUP};
  if (poll(&pfd, 1, 0) <= 0) return false;
  return (pfd.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

json_t *domed_audit_stream(struct domed *domed, const struct control_request *request, dome_error *err) {
  if (domed->journal == NULL) {
    dome_error_set(err, EIO, "journal not open");
    return NULL;
  }
  const char *agent = json_string_value(json_object_get(request->args, "agent"));
  const char *type = json_string_value(json_object_get(request->args, "type"));
  json_t *from = json_object_get(request->args, "from_seq");
  journal_filter filter = {
      .from_seq =
          json_is_integer(from) ? (uint64_t)json_integer_value(from) : journal_last_seq(domed->journal) + 1,
      .agent = agent,
      .type = type,
      .follow = !json_is_false(json_object_get(request->args, "follow")),
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
