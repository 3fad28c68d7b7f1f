/* The writer thread: takes the queued events in seq order, builds each canonical line, adds it to the
 * Merkle tree and the open zstd frame, then flushes and fdatasyncs once for the whole group (group
 * commit). Also seals segments, applies retention and writes signed checkpoints. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/futex.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "supervisor/audit/writer_internal.h"
#include "supervisor/common/cleanup.h"

int journal_seek_entry_add(journal *j, uint32_t compressed, uint32_t decompressed, uint32_t checksum) {
  if (j->entry_count == j->entry_capacity) {
    size_t capacity = j->entry_capacity ? j->entry_capacity * 2 : 64;
    seek_entry *grown = realloc(j->entries, capacity * sizeof *grown);
    if (!grown) return -ENOMEM;
    j->entries = grown;
    j->entry_capacity = capacity;
  }
  j->entries[j->entry_count++] = (seek_entry){compressed, decompressed, checksum};
  return 0;
}

/* Run the compressor over data (mode: continue, flush or end), appending its output to j->out. */
static int compress(journal *j, const void *data, size_t length, ZSTD_EndDirective mode, dome_error *err) {
  ZSTD_inBuffer in = {data, length, 0};
  for (;;) {
    if (journal_byte_buffer_reserve(&j->out, ZSTD_CStreamOutSize()) < 0)
      return dome_error_set(err, ENOMEM, "compress: out of memory");
    ZSTD_outBuffer out = {j->out.data + j->out.length, j->out.capacity - j->out.length, 0};
    size_t remaining = ZSTD_compressStream2(j->cctx, &out, &in, mode);
    j->out.length += out.pos;
    if (ZSTD_isError(remaining)) return dome_error_set(err, EIO, "zstd: %s", ZSTD_getErrorName(remaining));
    if (mode == ZSTD_e_continue ? in.pos == in.size : remaining == 0) return 0;
  }
}

#ifdef DOME_TEST_HOOKS
/* Fault injection for the fault tests (tests/audit/test_journal_faults), compiled only with
 * DOME_TEST_HOOKS (TEST_HOOKS=1, supervisor/audit/module.mk): while the file named by the environment
 * variable DOME_JOURNAL_FAULT_FILE exists, every write of a segment fails with EIO. */
static ssize_t segment_pwrite(int fd, const void *data, size_t length, off_t offset) {
  const char *fault = getenv("DOME_JOURNAL_FAULT_FILE");
  if (fault && fault[0] && access(fault, F_OK) == 0) {
    errno = EIO;
    return -1;
  }
  return pwrite(fd, data, length, offset);
}
#else
#define segment_pwrite pwrite
#endif

static int write_out(journal *j, dome_error *err) {
  size_t done = 0;
  while (done < j->out.length) {
    ssize_t n = segment_pwrite(j->fd, j->out.data + done, j->out.length - done, j->written + (off_t)done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int e = n < 0 ? errno : EIO;
      /* Leave no partial group behind: cut back to what was durable (best effort). */
      if (ftruncate(j->fd, j->durable) == 0) j->written = j->durable;
      return dome_error_set_errno(err, e, "write segment `%s/%s`", j->directory, j->segment_name);
    }
    done += (size_t)n;
  }
  j->written += (off_t)done;
  j->out.length = 0;
  return 0;
}

static int sync_out(journal *j, dome_error *err) {
  int r = write_out(j, err);
  if (r < 0) return r;
  if (fdatasync(j->fd) < 0) {
    int e = errno;
    if (ftruncate(j->fd, j->durable) == 0) j->written = j->durable;
    return dome_error_set_errno(err, e, "fdatasync segment `%s/%s`", j->directory, j->segment_name);
  }
  j->durable = j->written;
  return 0;
}

static int frame_end(journal *j, dome_error *err) {
  if (!j->frame_open) return 0;
  int r = compress(j, NULL, 0, ZSTD_e_end, err);
  if (r < 0) return r;
  off_t end = j->written + (off_t)j->out.length;
  uint32_t checksum = journal_read_le32(j->out.data + j->out.length - 4);
  if (journal_seek_entry_add(j, (uint32_t)(end - j->frame_start), (uint32_t)j->frame_json_bytes, checksum) <
      0)
    return dome_error_set(err, ENOMEM, "seek table: out of memory");
  j->frame_open = false;
  return 0;
}

int journal_segment_start(journal *j, dome_error *err) {
  uint64_t first_seq = j->tree.size + 1;
  journal_segment_name(first_seq, j->segment_name, sizeof j->segment_name);
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", j->directory, j->segment_name);
  _cleanup_close_ int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return dome_error_set_errno(err, errno, "create segment `%s`", path);
  size_t length;
  _cleanup_free_ uint8_t *header = journal_header_encode(first_seq, &j->tree, &length);
  if (!header) return dome_error_set(err, ENOMEM, "segment header: out of memory");
  if (write(fd, header, length) != (ssize_t)length || fsync(fd) < 0) {
    int e = errno ? errno : EIO;
    unlink(path);
    return dome_error_set_errno(err, e, "write segment header `%s`", path);
  }
  int r = journal_fsync_directory(j->directory, err);
  if (r < 0) return r;
  if (j->fd >= 0) close(j->fd);
  j->fd = dome_steal_fd(&fd);
  j->segment_first_seq = first_seq;
  j->written = j->durable = (off_t)length;
  j->entry_count = 0;
  journal_seek_entry_add(j, (uint32_t)length, 0, JOURNAL_EMPTY_CHECKSUM);
  j->frame_open = false;
  return 0;
}

/* Close the open frame, append the seek table and fsync: the segment is sealed. */
static int segment_seal(journal *j, dome_error *err) {
  int r = frame_end(j, err);
  if (r < 0) return r;
  size_t length;
  _cleanup_free_ uint8_t *table = journal_seek_table_encode(j->entries, j->entry_count, &length);
  if (!table || journal_byte_buffer_append(&j->out, table, length) < 0)
    return dome_error_set(err, ENOMEM, "seek table: out of memory");
  return sync_out(j, err);
}

static void apply_retention(journal *j) {
  if (!j->options.retention_bytes && !j->options.retention_age_ms) return;
  dome_error err;
  journal_segment *segments = NULL;
  int count = journal_segments_list(j->directory, &segments, &err);
  if (count <= 1) {
    free(segments);
    return;
  }
  uint64_t total = 0, sizes[count];
  int64_t mtimes[count];
  for (int i = 0; i < count; i++) {
    char path[4096];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", j->directory, segments[i].name);
    sizes[i] = stat(path, &st) == 0 ? (uint64_t)st.st_size : 0;
    mtimes[i] = stat(path, &st) == 0 ? (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec : 0;
    total += sizes[i];
  }
  int64_t now = journal_now_ns();
  for (int i = 0; i < count - 1; i++) { /* never the active (last) segment */
    const char *reason = NULL;
    if (j->options.retention_bytes && total > j->options.retention_bytes)
      reason = "size";
    else if (j->options.retention_age_ms && now - mtimes[i] > (int64_t)j->options.retention_age_ms * 1000000)
      reason = "age";
    if (!reason) break;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", j->directory, segments[i].name);
    if (unlink(path) < 0) break;
    total -= sizes[i];
    json_t *event = json_pack("{s:s, s:s, s:I, s:I, s:I, s:s}", "type", "journal.retention", "segment",
                              segments[i].name, "first_seq", (json_int_t)segments[i].first_seq, "last_seq",
                              (json_int_t)(segments[i + 1].first_seq - 1), "bytes", (json_int_t)sizes[i],
                              "reason", reason);
    if (event) journal_append_internal(j, event, NULL, &err);
    json_decref(event);
  }
  journal_fsync_directory(j->directory, &err);
  free(segments);
}

/* Add one canonical line to the tree and the open frame; rotate when due. line[length] must be the
 * line's newline (compressed with it, not hashed). */
static int add_line(journal *j, const uint8_t *line, size_t length, dome_error *err) {
  uint8_t leaf[JOURNAL_HASH_BYTES];
  journal_merkle_leaf_hash(line, length, leaf);
  journal_merkle_append(&j->tree, leaf);
  if (!j->frame_open) {
    ZSTD_CCtx_reset(j->cctx, ZSTD_reset_session_only);
    j->frame_open = true;
    j->frame_start = j->written + (off_t)j->out.length;
    j->frame_json_bytes = 0;
  }
  int r = compress(j, line, length + 1, ZSTD_e_continue, err);
  if (r < 0) return r;
  j->frame_json_bytes += length + 1;
  if (j->frame_json_bytes < j->options.frame_bytes) return 0;
  r = frame_end(j, err);
  if (r < 0) return r;
  if ((uint64_t)(j->written + (off_t)j->out.length) < j->options.segment_bytes) return 0;
  r = segment_seal(j, err);
  if (r == 0) r = journal_segment_start(j, err);
  if (r == 0) apply_retention(j);
  return r;
}

/* Decimal digits of v at the end of buffer[0..20); returns where they start. */
static char *format_decimal(uint64_t v, char end[20]) {
  char *p = end + 20;
  do *--p = (char)('0' + v % 10);
  while (v /= 10);
  return p;
}

/* The line of a queued event: its text with `"seq":N` and `"time":"..."` put in their sorted places
 * (before the key at the cut, or as the last member when the cut is the closing brace). */
static int add_pending(journal *j, const struct pending_event *p, dome_error *err) {
  char digits[20], time_text[40];
  const char *seq_text = format_decimal(p->seq, digits);
  size_t seq_length = (size_t)(digits + 20 - seq_text);
  journal_format_time(p->time_ns, time_text, sizeof time_text);
  size_t time_length = strlen(time_text);
  byte_buffer *b = &j->line;
  b->length = 0;
  if (journal_byte_buffer_reserve(b, p->length + 96) < 0)
    return dome_error_set(err, ENOMEM, "line: out of memory");
  const char *t = p->text;
  char *o = (char *)b->data;
  memcpy(o, t, p->cut_seq), o += p->cut_seq;
  bool seq_last = t[p->cut_seq] == '}', time_last = t[p->cut_time] == '}';
  if (seq_last) *o++ = ',';
  memcpy(o, "\"seq\":", 6), o += 6;
  memcpy(o, seq_text, seq_length), o += seq_length;
  if (!seq_last) *o++ = ',';
  memcpy(o, t + p->cut_seq, p->cut_time - p->cut_seq), o += p->cut_time - p->cut_seq;
  if (time_last) *o++ = ',';
  memcpy(o, "\"time\":\"", 8), o += 8;
  memcpy(o, time_text, time_length), o += time_length;
  *o++ = '"';
  if (!time_last) *o++ = ',';
  memcpy(o, t + p->cut_time, p->length - p->cut_time), o += p->length - p->cut_time;
  *o = '\n';
  return add_line(j, b->data, (size_t)(o - (char *)b->data), err);
}

static int write_checkpoint_file(journal *j, const char *line, size_t length, dome_error *err) {
  char path[4096], temporary[4096];
  snprintf(path, sizeof path, "%s/checkpoint.json", j->directory);
  snprintf(temporary, sizeof temporary, "%s/checkpoint.json.tmp", j->directory);
  _cleanup_close_ int fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return dome_error_set_errno(err, errno, "create `%s`", temporary);
  if (write(fd, line, length) != (ssize_t)length || write(fd, "\n", 1) != 1 || fdatasync(fd) < 0)
    return dome_error_set_errno(err, errno ? errno : EIO, "write `%s`", temporary);
  if (rename(temporary, path) < 0) return dome_error_set_errno(err, errno, "rename `%s`", temporary);
  return 0;
}

static int add_checkpoint(journal *j, uint64_t seq, int64_t time_ns, char **line_out, dome_error *err) {
  uint8_t root[JOURNAL_HASH_BYTES];
  char root_hex[2 * JOURNAL_HASH_BYTES + 1], time_text[40], signature_hex[2 * crypto_sign_BYTES + 1];
  journal_merkle_root(&j->tree, root);
  journal_hex_encode(root, sizeof root, root_hex);
  journal_format_time(time_ns, time_text, sizeof time_text);
  _cleanup_free_ char *message = journal_checkpoint_message(j->tree.size, root_hex, time_text);
  if (!message) return dome_error_set(err, ENOMEM, "checkpoint: out of memory");
  uint8_t signature[crypto_sign_BYTES];
  crypto_sign_detached(signature, NULL, (const uint8_t *)message, strlen(message), j->key.secret_key);
  journal_hex_encode(signature, sizeof signature, signature_hex);
  json_t *event =
      json_pack("{s:{s:s, s:s, s:s, s:I}, s:I, s:s, s:s}", "checkpoint", "key_id", j->key.key_id, "root",
                root_hex, "signature", signature_hex, "tree_size", (json_int_t)j->tree.size, "seq",
                (json_int_t)seq, "time", time_text, "type", "journal.checkpoint");
  char *line = event ? json_dumps(event, JSON_SORT_KEYS | JSON_COMPACT) : NULL;
  json_decref(event);
  if (!line) return dome_error_set(err, ENOMEM, "checkpoint: out of memory");
  size_t length = strlen(line);
  j->line.length = 0;
  int r = journal_byte_buffer_append(&j->line, line, length) == 0 &&
                  journal_byte_buffer_append(&j->line, "\n", 1) == 0
              ? add_line(j, j->line.data, length, err)
              : dome_error_set(err, ENOMEM, "checkpoint: out of memory");
  j->last_checkpoint_mono_ns = journal_mono_ns();
  if (r < 0) {
    free(line);
    return r;
  }
  *line_out = line;
  return 0;
}

/* Write one group: its events and checkpoints in seq order, one flush and one fdatasync. */
static int commit_group(journal *j, struct pending_event *list, dome_error *err) {
  int r = 0;
  _cleanup_free_ char *checkpoint_line = NULL;
  while (list) {
    struct pending_event *next = list->next;
    if (r == 0 && list->checkpoint) {
      free(checkpoint_line);
      checkpoint_line = NULL;
      r = add_checkpoint(j, list->seq, list->time_ns, &checkpoint_line, err);
    } else if (r == 0) {
      r = add_pending(j, list, err);
    }
    free(list);
    list = next;
  }
  if (r == 0 && j->frame_open) r = compress(j, NULL, 0, ZSTD_e_flush, err);
  if (r == 0 && j->out.length) r = sync_out(j, err);
  if (r == 0 && checkpoint_line) r = write_checkpoint_file(j, checkpoint_line, strlen(checkpoint_line), err);
  return r;
}

int journal_queue_checkpoint(journal *j) {
  struct pending_event *p = calloc(1, sizeof *p);
  if (!p) return -ENOMEM;
  p->checkpoint = true;
  int64_t now = journal_now_ns();
  p->time_ns = now > j->last_time_ns ? now : j->last_time_ns;
  j->last_time_ns = p->time_ns;
  p->seq = ++j->last_seq;
  if (j->tail)
    j->tail->next = p;
  else
    j->head = p;
  j->tail = p;
  j->queued_since_checkpoint = 0;
  j->checkpoint_requested = false;
  return 0;
}

static bool writer_due(const journal *j, int64_t now);

void journal_wake_waiter(struct sync_waiter *w, uint32_t state) {
  uint32_t *word = &w->state;
  /* From here on w may be gone; a spinning waiter needs no wake. */
  if (__atomic_exchange_n(word, state, __ATOMIC_RELEASE) == SYNC_SLEEPING)
    syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

/* One commit round. Called with j->lock held and no round running; returns with it held. The thread
 * that runs it is the group's leader: the writer thread (window, checkpoint timer, close) or a
 * producer inside journal_sync, which thus commits without waiting for a hand-over. */
void journal_commit_round(journal *j) {
  j->committing = true;
  int64_t started = journal_mono_ns();
  int64_t checkpoint_every = (int64_t)j->options.checkpoint_every_ms * 1000000;
  int r = 0;
  dome_error err = {0};
  if (j->checkpoint_requested || (j->queued_since_checkpoint > 0 &&
                                  (j->closing || started >= j->last_checkpoint_mono_ns + checkpoint_every)))
    if (journal_queue_checkpoint(j) < 0) r = dome_error_set(&err, ENOMEM, "checkpoint: out of memory");
  struct pending_event *list = j->head;
  uint64_t group_last = j->tail ? j->tail->seq : j->committed_seq, group_checkpoint = 0;
  for (struct pending_event *p = list; p; p = p->next)
    if (p->checkpoint) group_checkpoint = p->seq;
  j->head = j->tail = NULL;
  j->pending_bytes = 0;
  pthread_mutex_unlock(&j->lock);

  if (r == 0) {
    r = commit_group(j, list, &err);
  } else {
    while (list) {
      struct pending_event *next = list->next;
      free(list);
      list = next;
    }
  }

  pthread_mutex_lock(&j->lock);
  if (r < 0) {
    j->failed = r;
    snprintf(j->failure, sizeof j->failure, "%.700s", err.message);
  } else {
    j->committed_seq = group_last;
    if (group_checkpoint) j->checkpoint_committed_seq = group_checkpoint;
  }
  j->committing = false;
  int64_t ended = journal_mono_ns();
  j->round_ns = (7 * j->round_ns + (ended - started)) / 8; /* what a waiter may spin for */
  pthread_cond_broadcast(&j->committed);
  /* Wake the producers this round made durable (all of them after a failure); of those still waiting,
   * the one with the lowest seq leads the next round. */
  struct sync_waiter **link = &j->waiters, *next_leader = NULL;
  while (*link) {
    struct sync_waiter *w = *link;
    if (w->seq <= j->committed_seq || j->failed) {
      *link = w->next;
      journal_wake_waiter(w, j->failed ? SYNC_FAILED : SYNC_DURABLE);
    } else {
      if (!next_leader || w->seq < next_leader->seq) next_leader = w;
      link = &w->next;
    }
  }
  if (next_leader) {
    for (link = &j->waiters; *link != next_leader;) link = &(*link)->next;
    *link = next_leader->next;
    journal_wake_waiter(next_leader, SYNC_LEAD);
  }
  /* The writer thread is not woken by every round (that costs a context switch per group under
   * load): only when it has work that fell due while this round ran. */
  if (writer_due(j, ended) ||
      (j->head &&
       j->writer_deadline > j->oldest_pending_mono_ns + (int64_t)j->options.group_commit_window_ms * 1000000))
    pthread_cond_signal(&j->writer_wake);
}

/* Whether the writer thread must run a round now (j->lock held). */
static bool writer_due(const journal *j, int64_t now) {
  if (j->failed) return false;
  if (j->closing || j->checkpoint_requested) return true;
  if (j->queued_since_checkpoint &&
      now >= j->last_checkpoint_mono_ns + (int64_t)j->options.checkpoint_every_ms * 1000000)
    return true;
  if (j->head && j->commit_requested_seq > j->committed_seq) return true; /* journal_sync_begin */
  return j->head && (j->pending_bytes >= j->options.frame_bytes ||
                     now >= j->oldest_pending_mono_ns + (int64_t)j->options.group_commit_window_ms * 1000000);
}

/* The writer thread commits what nobody syncs (within the group-commit window), checkpoints on time
 * and on request, and the rest at close. Producers calling journal_sync lead their own rounds, so under
 * load the writer mostly sleeps: while events keep coming it wakes once per window on its own timer
 * instead of being signalled by each append (journal_append signals it only when it would otherwise
 * sleep past the new event's window). */
void *journal_writer_main(void *argument) {
  journal *j = argument;
  pthread_mutex_lock(&j->lock);
  uint64_t seen_seq = j->last_seq;
  for (;;) {
    int64_t window = (int64_t)j->options.group_commit_window_ms * 1000000;
    int64_t checkpoint_every = (int64_t)j->options.checkpoint_every_ms * 1000000;
    while (!j->failed) {
      int64_t now = journal_mono_ns();
      bool due = writer_due(j, now);
      if (due && !j->committing) break;
      int64_t wake = INT64_MAX;
      if (!due) { /* else a round runs: its leader signals us when it ends (see journal_commit_round) */
        if (j->queued_since_checkpoint) wake = j->last_checkpoint_mono_ns + checkpoint_every;
        if (j->head && j->oldest_pending_mono_ns + window < wake) wake = j->oldest_pending_mono_ns + window;
        /* Appends since the last look: poll once per window rather than be signalled per append. */
        if (!j->head && j->last_seq != seen_seq && now + window < wake) wake = now + window;
      }
      seen_seq = j->last_seq;
      j->writer_deadline = wake;
      if (wake == INT64_MAX) {
        pthread_cond_wait(&j->writer_wake, &j->lock);
      } else {
        /* The condition variable runs on CLOCK_MONOTONIC (see journal_open). */
        struct timespec deadline = {.tv_sec = wake / 1000000000, .tv_nsec = wake % 1000000000};
        pthread_cond_timedwait(&j->writer_wake, &j->lock, &deadline);
      }
      j->writer_deadline = 0;
    }
    if (j->failed) break;
    bool closing = j->closing;
    journal_commit_round(j);
    if (j->failed || (closing && !j->head && !j->checkpoint_requested)) break;
  }
  /* Anything still queued after a failure will never be written: drop it (its syncs fail). */
  while (j->head) {
    struct pending_event *next = j->head->next;
    free(j->head);
    j->head = next;
  }
  j->tail = NULL;
  pthread_mutex_unlock(&j->lock);
  return NULL;
}

int journal_close(journal *j, dome_error *err) {
  if (!j) return 0;
  int r = 0;
  if (j->thread_started) {
    pthread_mutex_lock(&j->lock);
    j->closing = true;
    pthread_cond_signal(&j->writer_wake);
    pthread_mutex_unlock(&j->lock);
    pthread_join(j->thread, NULL);
    if (j->failed) {
      r = dome_error_set(err, -j->failed, "journal `%s`: %s", j->directory, j->failure);
    } else {
      r = segment_seal(j, err);
      if (r < 0) dome_error_wrap(err, "seal segment `%s`", j->segment_name);
    }
  }
  if (j->fd >= 0) close(j->fd);
  if (j->lock_fd > 0) close(j->lock_fd);
  ZSTD_freeCCtx(j->cctx);
  free(j->out.data);
  free(j->line.data);
  free(j->entries);
  free(j->directory);
  free(j->key_path);
  sodium_memzero(&j->key, sizeof j->key);
  pthread_mutex_destroy(&j->lock);
  pthread_cond_destroy(&j->writer_wake);
  pthread_cond_destroy(&j->committed);
  free(j);
  return r;
}
