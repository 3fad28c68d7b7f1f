/* The journal writer: many producers append, one writer thread orders, hashes, compresses, writes and
 * fsyncs (group commit). Producers serialise their event outside the lock; under the lock they only take
 * a seq and a time and link the event into the queue. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/futex.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "supervisor/audit/writer_internal.h"
#include "supervisor/common/cleanup.h"

int64_t journal_mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int journal_byte_buffer_reserve(byte_buffer *b, size_t more) {
  if (b->capacity - b->length >= more) return 0;
  size_t capacity = b->capacity ? b->capacity : 64 * 1024;
  while (capacity - b->length < more) capacity *= 2;
  uint8_t *grown = realloc(b->data, capacity);
  if (!grown) return -ENOMEM;
  b->data = grown;
  b->capacity = capacity;
  return 0;
}

int journal_byte_buffer_append(byte_buffer *b, const void *data, size_t length) {
  if (journal_byte_buffer_reserve(b, length) < 0) return -ENOMEM;
  memcpy(b->data + b->length, data, length);
  b->length += length;
  return 0;
}

void journal_options_init(journal_options *o, const char *directory) {
  memset(o, 0, sizeof *o);
  o->directory = directory;
  o->checkpoint_every_events = 10000;
  o->checkpoint_every_ms = 1000;
  o->group_commit_window_ms = 2;
  o->segment_bytes = 16ull * 1024 * 1024;
  o->frame_bytes = 1024 * 1024;
  o->compression_level = 3;
}

/* ---- producers ---- */

/* Compare the raw (escape-free) key at text[0..length) with a reserved name, as strcmp would. */
static int compare_key(const char *key, size_t length, const char *name) {
  size_t n = strlen(name);
  int c = memcmp(key, name, length < n ? length : n);
  if (c != 0) return c;
  return length < n ? -1 : length > n;
}

/* Find where `seq` and `time` go among the top-level keys of a compact sorted dump. */
static int find_cuts(const char *text, size_t length, struct pending_event *p, dome_error *err) {
  bool seq_set = false, time_set = false;
  size_t at = 0, start, k;
  while (journal_line_next_key(text, length, &at, &start, &k)) {
    const char *key = text + start;
    size_t i = start - 1; /* the key's opening quote: where a member cut goes */
    if (memchr(key, '\\', k)) return dome_error_set(err, EINVAL, "event: top-level key needs a JSON escape");
    if (compare_key(key, k, "seq") == 0 || compare_key(key, k, "time") == 0)
      return dome_error_set(err, EINVAL, "event: member `%.*s` is reserved for the journal", (int)k, key);
    if (!seq_set && compare_key(key, k, "seq") > 0) p->cut_seq = i, seq_set = true;
    if (!time_set && compare_key(key, k, "time") > 0) p->cut_time = i, time_set = true;
  }
  if (!seq_set) p->cut_seq = length - 1;
  if (!time_set) p->cut_time = length - 1;
  return 0;
}

static int refuse(journal *j, dome_error *err) {
  if (j->failed)
    return dome_error_set(err, -j->failed, "journal `%s` refuses appends: %s", j->directory, j->failure);
  return dome_error_set(err, ESHUTDOWN, "journal `%s` is closing", j->directory);
}

static int append(journal *j, json_t *event, uint64_t *seq, bool internal, dome_error *err) {
  if (!json_is_object(event)) return dome_error_set(err, EINVAL, "event: not a JSON object");
  if (!json_is_string(json_object_get(event, "type")))
    return dome_error_set(err, EINVAL, "event: member `type` missing or not a string");
  /* Serialise outside the lock into a stack buffer (no allocation for usual events), then one
   * allocation holds the queue entry and its text. */
  canonical_buffer text;
  journal_canonical_buffer_init(&text);
  int dumped = journal_canonical_dump(event, &text);
  size_t length = text.length;
  if (dumped == 0 && length + 64 > JOURNAL_MAX_EVENT_BYTES) dumped = -E2BIG;
  if (dumped < 0) {
    journal_canonical_buffer_free(&text);
    if (dumped == -E2BIG)
      return dome_error_set(err, E2BIG, "event: more than the %d bytes allowed", JOURNAL_MAX_EVENT_BYTES);
    if (dumped == -ENOMEM) return dome_error_set(err, ENOMEM, "event: out of memory");
    return dome_error_set(err, EINVAL, "event: cannot be serialised (invalid UTF-8 or NaN?)");
  }
  struct pending_event *p = malloc(sizeof *p + length + 1);
  if (!p) {
    journal_canonical_buffer_free(&text);
    return dome_error_set(err, ENOMEM, "event: out of memory");
  }
  *p = (struct pending_event){.length = length};
  memcpy(p->text, text.data, length);
  p->text[length] = '\0';
  int r = 0;
  if (text.cuts_known && !text.reserved_key) { /* the serialiser saw where they go */
    p->cut_seq = text.cut_seq;
    p->cut_time = text.cut_time;
  } else {
    r = find_cuts(p->text, p->length, p, err);
  }
  journal_canonical_buffer_free(&text);
  if (r < 0) {
    free(p);
    return r;
  }
  pthread_mutex_lock(&j->lock);
  if (j->failed || (j->closing && !internal)) {
    r = refuse(j, err);
    pthread_mutex_unlock(&j->lock);
    free(p);
    return r;
  }
  int64_t now = journal_now_ns();
  p->time_ns = now > j->last_time_ns ? now : j->last_time_ns; /* non-decreasing with seq */
  j->last_time_ns = p->time_ns;
  p->seq = ++j->last_seq;
  if (!j->head) {
    j->head = p;
    j->oldest_pending_mono_ns = journal_mono_ns();
    /* Wake the writer only if it would otherwise sleep past this event's group-commit window. */
    if (j->writer_deadline > j->oldest_pending_mono_ns + (int64_t)j->options.group_commit_window_ms * 1000000)
      pthread_cond_signal(&j->writer_wake);
  } else {
    j->tail->next = p;
  }
  j->tail = p;
  j->pending_bytes += p->length;
  /* Every N events exactly: a checkpoint placeholder right after the Nth. */
  if (++j->queued_since_checkpoint >= j->options.checkpoint_every_events) journal_queue_checkpoint(j);
  if (j->pending_bytes >= j->options.frame_bytes) pthread_cond_signal(&j->writer_wake);
  if (seq) *seq = p->seq;
  pthread_mutex_unlock(&j->lock);
  return 0;
}

int journal_append(journal *j, json_t *event, uint64_t *seq, dome_error *err) {
  if (!j) return dome_error_set(err, EINVAL, "journal_append: no journal");
  return append(j, event, seq, false, err);
}

int journal_append_internal(journal *j, json_t *event, uint64_t *seq, dome_error *err) {
  return append(j, event, seq, true, err);
}

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

/* Spin on the waiter's word for up to spin_ns, then sleep on it. Returns the state a round set. */
static uint32_t wait_for_round(struct sync_waiter *w, int64_t spin_ns) {
  uint32_t state;
  int64_t give_up = 0;
  for (unsigned i = 1; (state = __atomic_load_n(&w->state, __ATOMIC_ACQUIRE)) == SYNC_WAITING; i++) {
    if (spin_ns <= 0) break;
    cpu_relax();
    if (i % 64) continue;
    int64_t now = journal_mono_ns();
    if (!give_up) give_up = now + spin_ns;
    if (now >= give_up) break;
  }
  if (state != SYNC_WAITING) return state;
  uint32_t expected = SYNC_WAITING;
  if (!__atomic_compare_exchange_n(&w->state, &expected, SYNC_SLEEPING, false, __ATOMIC_ACQ_REL,
                                   __ATOMIC_ACQUIRE))
    return expected; /* set meanwhile */
  while ((state = __atomic_load_n(&w->state, __ATOMIC_ACQUIRE)) == SYNC_SLEEPING)
    syscall(SYS_futex, &w->state, FUTEX_WAIT_PRIVATE, SYNC_SLEEPING, NULL, NULL, 0);
  return state;
}

int journal_sync(journal *j, uint64_t seq, dome_error *err) {
  pthread_mutex_lock(&j->lock);
  if (seq > j->last_seq) {
    pthread_mutex_unlock(&j->lock);
    return dome_error_set(err, EINVAL, "journal_sync: seq %" PRIu64 " was never assigned", seq);
  }
  int r = 0;
  while (j->committed_seq < seq && !j->failed) {
    if (!j->committing && j->head) {
      journal_commit_round(j); /* lead this group ourselves */
      continue;
    }
    /* A round runs: wait until it (or a later one) has made seq durable, or hands us the lead. */
    struct sync_waiter w = {.next = j->waiters, .seq = seq, .state = SYNC_WAITING};
    j->waiters = &w;
    int64_t spin_ns = 2 * j->round_ns <= JOURNAL_SYNC_SPIN_NS ? 2 * j->round_ns : 0;
    pthread_mutex_unlock(&j->lock);
    uint32_t state = wait_for_round(&w, spin_ns);
    if (state == SYNC_DURABLE) return 0;
    pthread_mutex_lock(&j->lock); /* lead the next round, or report the failure */
  }
  if (j->committed_seq < seq) r = refuse(j, err);
  pthread_mutex_unlock(&j->lock);
  return r;
}

void journal_sync_begin(journal *j, uint64_t seq) {
  pthread_mutex_lock(&j->lock);
  if (seq <= j->last_seq && seq > j->committed_seq && seq > j->commit_requested_seq && !j->failed &&
      !j->closing) {
    j->commit_requested_seq = seq;
    if (j->writer_deadline != 0) pthread_cond_signal(&j->writer_wake); /* it sleeps: wake it */
  }
  pthread_mutex_unlock(&j->lock);
}

int journal_append_sync(journal *j, json_t *event, uint64_t *seq, dome_error *err) {
  uint64_t assigned;
  int r = journal_append(j, event, &assigned, err);
  if (r < 0) return r;
  if (seq) *seq = assigned;
  return journal_sync(j, assigned, err);
}

int journal_checkpoint(journal *j, uint64_t *checkpoint_seq, dome_error *err) {
  pthread_mutex_lock(&j->lock);
  j->checkpoint_requested = true;
  uint64_t target = j->last_seq + 1; /* the checkpoint takes the next seq */
  pthread_cond_signal(&j->writer_wake);
  pthread_mutex_unlock(&j->lock);
  /* Wait until the writer has assigned and committed it. */
  pthread_mutex_lock(&j->lock);
  while (j->checkpoint_committed_seq < target && !j->failed) {
    pthread_cond_signal(&j->writer_wake);
    pthread_cond_wait(&j->committed, &j->lock);
  }
  int r = j->checkpoint_committed_seq >= target ? 0 : refuse(j, err);
  if (r == 0 && checkpoint_seq) *checkpoint_seq = j->checkpoint_committed_seq;
  pthread_mutex_unlock(&j->lock);
  return r;
}

uint64_t journal_last_seq(journal *j) {
  pthread_mutex_lock(&j->lock);
  uint64_t seq = j->last_seq;
  pthread_mutex_unlock(&j->lock);
  return seq;
}

int journal_failed(journal *j) {
  pthread_mutex_lock(&j->lock);
  int failed = j->failed;
  pthread_mutex_unlock(&j->lock);
  return failed;
}
