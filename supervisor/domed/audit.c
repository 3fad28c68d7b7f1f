/* The journal (supervisor/audit/journal.h) and the blob store beside it (supervisor/blob/blob.h): every
 * authorization decision, execution, redaction and administrative change is appended here, bounded in
 * size, and calls act or answer only once their events are durable; `audit.stream` follows the journal
 * live for the CLI. */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>
#include <time.h>

#include "supervisor/audit/journal.h"
#include "supervisor/blob/blob.h"
#include "supervisor/domed/domed.h"

/* A ticket is (generation << TICKET_SEQ_BITS) | seq: a seq of a journal that failed and was reopened
 * since never names an event of its successor. */
#define TICKET_SEQ_BITS 44
#define TICKET_SEQ_MASK ((UINT64_C(1) << TICKET_SEQ_BITS) - 1)

static int64_t realtime_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int open_journal(struct domed *domed, journal **out, dome_error *err) {
  journal_options options;
  journal_options_init(&options, domed->config.journal_dir);
  options.group_commit_window_ms = domed->config.journal_commit_window_ms;
  options.retention_bytes = domed->config.journal_retention_bytes;
  options.retention_age_ms = (uint64_t)domed->config.journal_retention_age_s * 1000u;
  int rc = journal_open(&options, out, err);
  if (rc < 0) return dome_error_wrap(err, "journal `%s`", domed->config.journal_dir);
  return 0;
}

/* Time of the oldest event the journal keeps (Unix ns), 0 when it cannot be read. */
static int64_t oldest_event_ns(const char *journal_dir) {
  journal_reader *reader = NULL;
  dome_error err = {0};
  if (journal_reader_open(journal_dir, NULL, &reader, &err) < 0) return 0;
  journal_record record;
  int64_t oldest = journal_reader_next(reader, false, &record, &err) == 1 ? record.time_ns : 0;
  journal_reader_close(reader);
  return oldest;
}

/* Remove the blobs written before the oldest event kept: retention removed every event naming them.
 * At most once every 10 s (it reads the journal's first frame), except the first time. */
static void prune_blobs(struct domed *domed) {
  static _Atomic int64_t next_ns;
  int64_t now = realtime_ns(), due = atomic_load(&next_ns);
  if (now < due || !atomic_compare_exchange_strong(&next_ns, &due, now + 10 * INT64_C(1000000000))) return;
  int64_t oldest = oldest_event_ns(domed->config.journal_dir);
  if (oldest == 0) return;
  dome_error err = {0};
  int removed = blob_store_prune(domed->blobs, oldest, &err);
  if (removed < 0)
    domed_log("warn", "audit", "msg=\"pruning blobs: %s\"", err.message);
  else if (removed > 0)
    domed_log("info", "audit", "msg=\"blobs pruned with the journal's retention\" removed=%d", removed);
}

int domed_audit_open(struct domed *domed, dome_error *err) {
  pthread_rwlock_init(&domed->journal_lock, NULL);
  journal *j = NULL;
  int rc = open_journal(domed, &j, err);
  if (rc < 0) return rc;
  blob_store *blobs = NULL;
  rc = blob_store_open(domed->config.journal_dir, domed->config.blob_quota_bytes, &blobs, err);
  if (rc < 0) {
    dome_error ignored;
    journal_close(j, &ignored);
    return dome_error_wrap(err, "blob store of `%s`", domed->config.journal_dir);
  }
  domed->journal = j;
  domed->blobs = blobs;
  domed->journal_generation = 1;
  prune_blobs(domed);
  return 0;
}

void domed_audit_close(struct domed *domed) {
  dome_error err = {0};
  if (domed->journal) domed->journal_closed_seq = journal_last_seq(domed->journal) + 1; /* + its checkpoint */
  if (domed->journal && journal_close(domed->journal, &err) < 0)
    domed_log("error", "audit", "msg=\"closing the journal: %s\"", err.message);
  domed->journal = NULL;
  blob_store_close(domed->blobs);
  domed->blobs = NULL;
  pthread_rwlock_destroy(&domed->journal_lock);
}

/* A journal that failed (disk full, I/O error) refuses every append. Close it and open it again: the
 * open recovers the durable events from disk and cuts what was never acknowledged, then appends work
 * again once the cause is gone. At most one try a second. */
static void reopen_failed(struct domed *domed) {
  pthread_rwlock_wrlock(&domed->journal_lock);
  journal *j = domed->journal;
  int64_t now = realtime_ns();
  if ((j == NULL || journal_failed(j) < 0) && now >= domed->journal_retry_ns &&
      !atomic_load(&domed->stopping)) {
    domed->journal_retry_ns = now + 1000000000;
    dome_error err = {0};
    if (j) journal_close(j, &err); /* reports the failure again; the journal is freed either way */
    domed->journal = NULL;
    journal *reopened = NULL;
    if (open_journal(domed, &reopened, &err) == 0) {
      domed->journal = reopened;
      domed->journal_generation++;
      domed_log("info", "audit", "msg=\"journal reopened after a failure\" last_seq=%llu",
                (unsigned long long)journal_last_seq(reopened));
    } else {
      domed_log("error", "audit", "msg=\"journal still failing: %s\"", err.message);
    }
  }
  pthread_rwlock_unlock(&domed->journal_lock);
}

static int refuse(struct domed *domed, json_t *event, int rc, dome_error *err) {
  atomic_fetch_add(&domed->metrics.journal_refused, 1);
  domed_log("error", "audit", "msg=\"event refused by the journal: %s\" type=%s", err->message,
            json_string_value(json_object_get(event, "type"))
                ? json_string_value(json_object_get(event, "type"))
                : "?");
  return rc;
}

/* Members an event keeps whatever its size: the type and the identifiers tying events together. */
static bool member_kept(const char *key) {
  static const char *const kept[] = {"type",    "exec_id", "agent",    "actas",          "tool",
                                     "gateway", "session", "decision", "policy_version", "action"};
  for (size_t i = 0; i < sizeof kept / sizeof kept[0]; i++)
    if (strcmp(key, kept[i]) == 0) return true;
  return false;
}

/* Replace the largest members of `event` by their digest and size until its canonical text fits
 * DOMED_EVENT_BUDGET_BYTES. A string member is digested as its bytes, any other as its canonical JSON
 * text; the bytes go to the blob store when they fit its quota. Returns 0, or -E2BIG when nothing more
 * can be cut, or the blob store's write error. */
static int cut_to_budget(struct domed *domed, json_t *event, dome_error *err) {
  for (int round = 0; round < 64; round++) {
    char *whole = json_dumps(event, JSON_COMPACT | JSON_SORT_KEYS);
    size_t size = whole ? strlen(whole) : SIZE_MAX;
    free(whole);
    if (size <= DOMED_EVENT_BUDGET_BYTES) return 0;
    const char *largest = NULL;
    size_t largest_size = 0;
    const char *key;
    json_t *value;
    json_object_foreach(event, key, value) {
      if (member_kept(key)) continue;
      size_t member_size = json_is_string(value) ? json_string_length(value) : 0;
      if (!json_is_string(value)) {
        char *text = json_dumps(value, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
        member_size = text ? strlen(text) : 0;
        free(text);
      }
      if (member_size > largest_size) {
        largest = key;
        largest_size = member_size;
      }
    }
    if (largest == NULL || largest_size < 128)
      return dome_error_set(err, E2BIG, "event of %zu bytes: nothing left to record by digest", size);
    char *name = strdup(largest);
    json_t *member = json_incref(json_object_get(event, name));
    char *text =
        json_is_string(member) ? NULL : json_dumps(member, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
    const char *data = text ? text : json_string_value(member);
    size_t length = text ? strlen(text) : json_string_length(member);
    json_object_del(event, name);
    int rc =
        data ? domed_audit_record_input(domed, event, name, data, length, 0, DOMED_BLOB_OWNER_EVENTS, 0, err)
             : dome_error_set(err, ENOMEM, "event member `%s`", name);
    free(text);
    free(name);
    json_decref(member);
    if (rc < 0) return rc;
  }
  return dome_error_set(err, E2BIG, "event: too many members to record by digest");
}

#define ANY_GENERATION UINT64_MAX

/* domed_audit_append into the journal of `generation` only (ANY_GENERATION: whichever is open, reopened
 * once if it failed). */
static int append_in(struct domed *domed, uint64_t expected, json_t *event, uint64_t *ticket,
                     dome_error *err) {
  if (ticket) *ticket = 0;
  for (int attempt = 0; attempt < 2; attempt++) {
    pthread_rwlock_rdlock(&domed->journal_lock);
    journal *j = domed->journal;
    uint64_t generation = domed->journal_generation;
    int rc = j ? 0 : dome_error_set(err, EIO, "journal `%s` is not open", domed->config.journal_dir);
    if (rc == 0 && expected != ANY_GENERATION && generation != expected) {
      pthread_rwlock_unlock(&domed->journal_lock);
      dome_error_set(err, EIO,
                     "the journal failed and was reopened since this call's first event: its earlier events "
                     "may be lost (fail closed)");
      return refuse(domed, event, -EIO, err);
    }
    uint64_t seq = 0;
    if (rc == 0) rc = journal_append(j, event, &seq, err);
    if (rc == -E2BIG) {
      rc = cut_to_budget(domed, event, err);
      if (rc == 0) rc = journal_append(j, event, &seq, err);
    }
    bool failed = j == NULL || journal_failed(j) < 0;
    pthread_rwlock_unlock(&domed->journal_lock);
    if (rc == 0) {
      if (ticket) *ticket = generation << TICKET_SEQ_BITS | (seq & TICKET_SEQ_MASK);
      domed_anomaly_offer(domed, event, seq);
      return 0;
    }
    if (!failed || attempt == 1) return refuse(domed, event, rc, err);
    reopen_failed(domed);
    if (expected != ANY_GENERATION) {
      dome_error_set(err, EIO, "the journal failed: this call's earlier events may be lost (fail closed)");
      return refuse(domed, event, -EIO, err);
    }
  }
  return refuse(domed, event, -EIO, err);
}

int domed_audit_append(struct domed *domed, json_t *event, uint64_t *ticket, dome_error *err) {
  return append_in(domed, ANY_GENERATION, event, ticket, err);
}

int domed_audit_append_after(struct domed *domed, uint64_t first, json_t *event, uint64_t *ticket,
                             dome_error *err) {
  return append_in(domed, first ? first >> TICKET_SEQ_BITS : ANY_GENERATION, event, ticket, err);
}

int domed_audit_sync(struct domed *domed, uint64_t ticket, dome_error *err) {
  if (ticket == 0) return dome_error_set(err, EIO, "event not journalled");
  pthread_rwlock_rdlock(&domed->journal_lock);
  journal *j = domed->journal;
  int rc = 0;
  if (j == NULL || ticket >> TICKET_SEQ_BITS != domed->journal_generation)
    rc = dome_error_set(err, EIO, "journal failed and was reopened before the event was durable");
  else if (journal_failed(j) < 0)
    rc = dome_error_set(err, -journal_failed(j), "journal refuses events (fail closed)");
  else
    rc = journal_sync(j, ticket & TICKET_SEQ_MASK, err);
  pthread_rwlock_unlock(&domed->journal_lock);
  if (rc < 0) {
    atomic_fetch_add(&domed->metrics.journal_refused, 1);
    domed_log("error", "audit", "msg=\"event not durable: %s\"", err->message);
  }
  return rc;
}

void domed_audit_sync_begin(struct domed *domed, uint64_t ticket) {
  pthread_rwlock_rdlock(&domed->journal_lock);
  journal *j = domed->journal;
  if (j && ticket && ticket >> TICKET_SEQ_BITS == domed->journal_generation)
    journal_sync_begin(j, ticket & TICKET_SEQ_MASK);
  pthread_rwlock_unlock(&domed->journal_lock);
}

int domed_audit_sync_span(struct domed *domed, uint64_t first, uint64_t last, dome_error *err) {
  if (first == 0 || last == 0) return dome_error_set(err, EIO, "event not journalled");
  if (first >> TICKET_SEQ_BITS != last >> TICKET_SEQ_BITS) {
    atomic_fetch_add(&domed->metrics.journal_refused, 1);
    return dome_error_set(err, EIO,
                          "the journal failed and was reopened since this call's first event: its "
                          "earlier events are lost (fail closed)");
  }
  return domed_audit_sync(domed, last, err);
}

int domed_audit_append_sync(struct domed *domed, json_t *event, dome_error *err) {
  uint64_t ticket = 0;
  int rc = domed_audit_append(domed, event, &ticket, err);
  return rc < 0 ? rc : domed_audit_sync(domed, ticket, err);
}

static void digest_hex(const char *data, size_t length, char hex[crypto_hash_sha256_BYTES * 2 + 1]) {
  unsigned char digest[crypto_hash_sha256_BYTES];
  crypto_hash_sha256(digest, (const unsigned char *)data, length);
  sodium_bin2hex(hex, crypto_hash_sha256_BYTES * 2 + 1, digest, sizeof digest);
}

void domed_audit_set_text(json_t *holder, const char *member, const char *text, size_t length) {
  if (length <= DOMED_EVENT_TEXT_MAX) {
    json_t *value = json_stringn(text, length);
    json_object_set_new(holder, member, value ? value : json_string("\xEF\xBF\xBD"));
    return;
  }
  char hex[crypto_hash_sha256_BYTES * 2 + 1], key[160];
  digest_hex(text, length, hex);
  snprintf(key, sizeof key, "%s_sha256", member);
  json_object_set_new(holder, key, json_string(hex));
  snprintf(key, sizeof key, "%s_bytes", member);
  json_object_set_new(holder, key, json_integer((json_int_t)length));
}

void domed_audit_set_call(json_t *event, mcp_call *call) {
  json_object_set_new(event, "session", json_string(mcp_call_session_id(call)));
  const char *request_id = mcp_call_request_id(call) ? mcp_call_request_id(call) : "null";
  domed_audit_set_text(event, "request_id", request_id, strlen(request_id));
}

int domed_audit_record_input(struct domed *domed, json_t *holder, const char *member, const char *data,
                             size_t length, size_t inline_max, const char *owner, uint64_t owner_quota,
                             dome_error *err) {
  char hex[crypto_hash_sha256_BYTES * 2 + 1], key[160];
  digest_hex(data, length, hex);
  snprintf(key, sizeof key, "%s_sha256", member);
  json_object_set_new(holder, key, json_string(hex));
  snprintf(key, sizeof key, "%s_bytes", member);
  json_object_set_new(holder, key, json_integer((json_int_t)length));
  if (length <= inline_max) {
    json_t *value = json_stringn(data, length);
    if (value == NULL || json_object_set_new(holder, member, value) < 0)
      return dome_error_set(err, ENOMEM, "event member `%s`", member);
    return 0;
  }
  dome_error why = {0};
  int stored = domed_audit_put_blob(domed, owner, owner_quota, data, length, hex, &why);
  if (stored < 0) {
    *err = why;
    return dome_error_wrap(err, "blob store: `%s` of %zu bytes", member, length);
  }
  snprintf(key, sizeof key, "%s_stored", member);
  json_object_set_new(holder, key, json_boolean(stored == 1));
  if (stored == 0)
    domed_log("warn", "audit", "msg=\"recorded by digest only: %s\" member=%s", why.message, member);
  return 0;
}

int domed_audit_put_blob(struct domed *domed, const char *owner, uint64_t owner_quota, const char *data,
                         size_t length, const char *hex, dome_error *err) {
  int stored = domed->blobs ? blob_store_put(domed->blobs, owner, owner_quota, data, length, hex, err)
                            : dome_error_set(err, EIO, "no blob store");
  if (stored == 0 && domed->config.journal_retention_bytes + domed->config.journal_retention_age_s) {
    prune_blobs(domed); /* retention may have removed the events naming older blobs */
    stored = blob_store_put(domed->blobs, owner, owner_quota, data, length, hex, err);
  }
  if (stored == 0) atomic_fetch_add(&domed->metrics.digest_only, 1);
  return stored;
}

json_t *domed_audit_blob_usage(struct domed *domed) {
  if (domed->blobs == NULL)
    return json_pack("{s:I,s:I,s:I,s:I,s:I,s:{}}", "bytes", (json_int_t)0, "blobs", (json_int_t)0,
                     "quota_bytes", (json_int_t)0, "refused", (json_int_t)0, "pruned", (json_int_t)0,
                     "owners");
  struct blob_store_usage usage;
  blob_store_usage(domed->blobs, &usage);
  return json_pack("{s:I,s:I,s:I,s:I,s:I,s:o}", "bytes", (json_int_t)usage.bytes, "blobs",
                   (json_int_t)usage.blobs, "quota_bytes", (json_int_t)usage.quota_bytes, "refused",
                   (json_int_t)usage.refused, "pruned", (json_int_t)usage.pruned, "owners",
                   blob_store_owners(domed->blobs));
}

json_t *domed_decision_event(const char *exec_id, const mcp_identity *identity, const char *action,
                             const char *tool, const char *mcp_tool, const struct domed_decision *decision,
                             const char *reason) {
  json_t *determining = decision->determining ? json_incref(decision->determining) : json_array();
  json_t *errors = decision->errors ? json_incref(decision->errors) : json_array();
  json_t *event = json_pack("{s:s,s:s,s:s,s:s,s:s,s:s,s:o,s:o,s:s,s:s}", "type", "authz.decision", "agent",
                            identity->agent, "gateway", identity->gateway, "action", action, "tool", tool,
                            "decision", decision->allow ? "allow" : "deny", "determining", determining,
                            "errors", errors, "policy_name", decision->policy_name, "reason", reason);
  domed_audit_set_text(event, "mcp_tool", mcp_tool, strlen(mcp_tool));
  char version[32];
  snprintf(version, sizeof version, "%d", decision->policy_version);
  json_object_set_new(event, "policy_version", json_string(version));
  if (exec_id) json_object_set_new(event, "exec_id", json_string(exec_id));
  if (identity->actas[0]) json_object_set_new(event, "actas", json_string(identity->actas));
  if (decision->request) json_object_set(event, "request", decision->request);
  return event;
}

int domed_request_refused(void *context, const mcp_identity *identity, const char *session_id,
                          const char *method, const json_t *params, const char *request_id,
                          const char *reason, dome_error *err) {
  struct domed *domed = context;
  bool call = strcmp(method, "tools/call") == 0;
  const char *name = call ? json_string_value(json_object_get(params, "name")) : NULL;
  struct domed_decision decision = {.allow = false};
  json_t *event = domed_decision_event(NULL, identity, call ? "mcp:call" : "mcp:request", "",
                                       name ? name : "", &decision, reason);
  domed_audit_set_text(event, "method", method, strlen(method));
  domed_audit_set_text(event, "session", session_id ? session_id : "", session_id ? strlen(session_id) : 0);
  domed_audit_set_text(event, "request_id", request_id, strlen(request_id));
  atomic_fetch_add(&domed->metrics.decisions_deny, 1);
  int rc = domed_audit_append_sync(domed, event, err);
  json_decref(event);
  return rc;
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
  pthread_rwlock_rdlock(&domed->journal_lock);
  bool open = domed->journal != NULL;
  uint64_t last_seq = open ? journal_last_seq(domed->journal) : 0;
  pthread_rwlock_unlock(&domed->journal_lock);
  if (!open) {
    dome_error_set(err, EIO, "journal not open");
    return NULL;
  }
  json_t *args = request->args;
  if (json_is_true(json_object_get(args, "describe")))
    return json_pack("{s:s,s:I}", "journal_dir", domed->config.journal_dir, "last_seq", (json_int_t)last_seq);
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
  uint64_t from_seq = last_seq + 1;
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

uint64_t domed_audit_ticket_seq(uint64_t ticket) {
  return ticket & TICKET_SEQ_MASK;
}
