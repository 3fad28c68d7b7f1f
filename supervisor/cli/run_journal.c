/* `dome run`'s journal sink (see run_journal.h). */
#include "supervisor/cli/run_journal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "supervisor/audit/journal.h"
#include "supervisor/blob/blob.h"
#include "supervisor/control/control.h"

#define DEFAULT_JOURNAL_DIR "/var/lib/dome/journal"
#define LOCK_WAIT_MS 30000     /* longest wait for another writer (a concurrent `dome run`) */
#define BATCH_RECORDS 1024     /* records per audit.record call */
#define BATCH_BYTES (4u << 20) /* about this many bytes of JSON per audit.record call */

enum destination { NOWHERE, THROUGH_DOMED, DIRECT };

struct run_journal {
  enum destination destination;
  char *dir;
  json_t *pending; /* records appended since the last sync */
  uint64_t written;
  struct exec_sink sink;
};

static bool same_directory(const char *a, const char *b) {
  struct stat sa, sb;
  return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

static int sink_append(void *context, json_t *record, uint64_t *ticket, dome_error *err) {
  struct run_journal *journal = context;
  if (journal->destination == NOWHERE) return 0;
  if (json_array_append(journal->pending, record) < 0) return dome_error_set(err, ENOMEM, "record");
  if (ticket) *ticket = journal->written + json_array_size(journal->pending);
  return 0;
}

static int flush_domed(struct run_journal *journal, dome_error *err) {
  size_t count = json_array_size(journal->pending), i = 0;
  while (i < count) {
    json_t *batch = json_array();
    size_t bytes = 0;
    while (i < count && json_array_size(batch) < BATCH_RECORDS && bytes < BATCH_BYTES) {
      json_t *record = json_array_get(journal->pending, i++);
      char *text = json_dumps(record, JSON_COMPACT);
      bytes += text ? strlen(text) : 0;
      free(text);
      json_array_append(batch, record);
    }
    json_t *args = json_pack("{s:o}", "records", batch), *result = NULL;
    int rc = control_call(control_socket_path(NULL), "audit.record", args, &result, err);
    json_decref(args);
    json_decref(result);
    if (rc < 0) return dome_error_wrap(err, "domed refused the records");
  }
  return 0;
}

static int open_waiting(const char *dir, journal **out, dome_error *err) {
  journal_options options;
  journal_options_init(&options, dir);
  for (int waited = 0;; waited += 10) {
    int rc = journal_open(&options, out, err);
    if (rc != -EBUSY || waited >= LOCK_WAIT_MS) return rc;
    struct timespec pause = {.tv_nsec = 10 * 1000000};
    nanosleep(&pause, NULL);
  }
}

static int flush_direct(struct run_journal *run, dome_error *err) {
  journal *j = NULL;
  int rc = open_waiting(run->dir, &j, err);
  if (rc < 0) return dome_error_wrap(err, "journal `%s`", run->dir);
  uint64_t seq = 0;
  size_t i;
  json_t *record;
  json_array_foreach(run->pending, i, record) {
    if ((rc = journal_append(j, record, &seq, err)) < 0) break;
  }
  if (rc == 0) rc = journal_sync(j, seq, err);
  dome_error close_err = {0};
  int closed = journal_close(j, &close_err);
  if (rc == 0 && closed < 0) {
    *err = close_err;
    rc = closed;
  }
  return rc < 0 ? dome_error_wrap(err, "journal `%s`", run->dir) : 0;
}

static int sink_sync(void *context, uint64_t ticket, dome_error *err) {
  (void)ticket;
  struct run_journal *journal = context;
  if (journal->destination == NOWHERE || json_array_size(journal->pending) == 0) return 0;
  int rc = journal->destination == THROUGH_DOMED ? flush_domed(journal, err) : flush_direct(journal, err);
  if (rc < 0) return rc;
  journal->written += json_array_size(journal->pending);
  json_array_clear(journal->pending);
  return 0;
}

/* Large inputs: kept beside a journal written directly; through domed they are recorded by digest only. */
static int sink_put_blob(void *context, const char *data, size_t length, const char *hex, dome_error *err) {
  struct run_journal *journal = context;
  if (journal->destination != DIRECT) {
    dome_error_set(err, ENOTSUP, "recorded by digest only: dome run keeps no blobs through domed");
    return 0;
  }
  char copy[65];
  snprintf(copy, sizeof copy, "%s", hex);
  int rc = blob_content_put(journal->dir, data, length, copy, err);
  return rc < 0 ? rc : 1;
}

int run_journal_open(const char *dir, bool disabled, struct run_journal **out, dome_error *err) {
  struct run_journal *journal = calloc(1, sizeof *journal);
  if (journal == NULL || (journal->pending = json_array()) == NULL) {
    free(journal);
    return dome_error_set(err, ENOMEM, "journal");
  }
  journal->sink = (struct exec_sink){
      .context = journal, .append = sink_append, .sync = sink_sync, .put_blob = sink_put_blob};
  if (disabled) {
    journal->destination = NOWHERE;
    *out = journal;
    return 0;
  }
  json_t *args = json_pack("{s:b}", "describe", 1), *result = NULL;
  dome_error ignored = {0};
  const char *live = NULL;
  if (control_call(control_socket_path(NULL), "audit.stream", args, &result, &ignored) == 0)
    live = json_string_value(json_object_get(result, "journal_dir"));
  json_decref(args);
  const char *env = getenv("DOME_JOURNAL_DIR");
  const char *chosen = dir ? dir : live ? live : env && env[0] ? env : DEFAULT_JOURNAL_DIR;
  journal->destination = live && (dir == NULL || same_directory(dir, live)) ? THROUGH_DOMED : DIRECT;
  journal->dir = strdup(chosen);
  json_decref(result);
  if (journal->dir == NULL) {
    run_journal_close(journal);
    return dome_error_set(err, ENOMEM, "journal");
  }
  *out = journal;
  return 0;
}

const struct exec_sink *run_journal_sink(struct run_journal *journal) {
  return &journal->sink;
}

json_t *run_journal_describe(const struct run_journal *journal) {
  if (journal->destination == NOWHERE) return json_null();
  return json_pack("{s:s,s:s,s:I}", "dir", journal->dir, "via",
                   journal->destination == THROUGH_DOMED ? "domed" : "direct", "records",
                   (json_int_t)journal->written);
}

void run_journal_close(struct run_journal *journal) {
  if (journal == NULL) return;
  json_decref(journal->pending);
  free(journal->dir);
  free(journal);
}
