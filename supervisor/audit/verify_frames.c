/* Parallel half of verification: worker threads take whole data frames, decode them, scan their event
 * lines (seq continuity and time order inside the frame) and hash every line as a Merkle leaf. What
 * needs the journal's order (the tree, checkpoints, continuity across frames) stays with the caller,
 * which consumes the frames in file order (verify.c). Leaf hashing is two thirds of verification's work
 * and frames are independent, so this spreads it over the cores without changing what is checked. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "supervisor/audit/journal_internal.h"

#define FRAME_POOL_MAX_WORKERS 8

struct frame_pool {
  pthread_mutex_t lock;
  pthread_cond_t work_ready, work_done;
  pthread_t threads[FRAME_POOL_MAX_WORKERS];
  int workers;
  bool stop;
  frame_work *slots;
  size_t slot_count;
  ZSTD_DCtx *caller_dctx; /* the caller works too while it waits (see journal_frame_pool_oldest) */
  /* Ring positions (monotonic): submitted = next slot to fill, taken = next slot a worker takes,
   * consumed = oldest slot the caller has not released. */
  uint64_t submitted, taken, consumed;
};

static int reserve_lines(frame_work *w, size_t n) {
  if (n <= w->line_capacity) return 0;
  size_t capacity = w->line_capacity ? w->line_capacity : 1024;
  while (capacity < n) capacity *= 2;
  uint32_t *offsets = realloc(w->offsets, capacity * sizeof *offsets);
  if (offsets) w->offsets = offsets;
  uint32_t *lengths = realloc(w->lengths, capacity * sizeof *lengths);
  if (lengths) w->lengths = lengths;
  bool *checkpoint = realloc(w->checkpoint, capacity * sizeof *checkpoint);
  if (checkpoint) w->checkpoint = checkpoint;
  uint8_t(*leaves)[JOURNAL_HASH_BYTES] = realloc(w->leaves, capacity * sizeof *leaves);
  if (leaves) w->leaves = leaves;
  if (!offsets || !lengths || !checkpoint || !leaves) return -ENOMEM;
  w->line_capacity = capacity;
  return 0;
}

/* Decode the frame into w->content (bounded by JOURNAL_MAX_FRAME_BYTES). Returns 0 or -1. */
static int decode(ZSTD_DCtx *dctx, frame_work *w) {
  ZSTD_DCtx_reset(dctx, ZSTD_reset_session_only);
  ZSTD_inBuffer in = {w->compressed, w->compressed_size, 0};
  w->content_length = 0;
  for (;;) {
    if (w->content_length == w->content_capacity) {
      if (w->content_capacity >= JOURNAL_MAX_FRAME_BYTES) return -1;
      size_t capacity = w->content_capacity ? w->content_capacity * 2 : 2 * 1024 * 1024;
      char *grown = realloc(w->content, capacity);
      if (!grown) return -1;
      w->content = grown;
      w->content_capacity = capacity;
    }
    ZSTD_outBuffer out = {w->content, w->content_capacity, w->content_length};
    size_t r = ZSTD_decompressStream(dctx, &out, &in);
    w->content_length = out.pos;
    if (ZSTD_isError(r)) return -1;
    if (r == 0) return in.pos == in.size ? 0 : -1;
    if (in.pos == in.size && out.pos < out.size) return -1; /* truncated */
  }
}

/* Lines, seqs and times of a decoded frame, then the leaf hashes. Anything unusual (a malformed line,
 * a seq out of order, time going back) leaves the frame to the caller's serial check, which words the
 * error exactly. */
static void scan_and_hash(frame_work *w) {
  const char *p = w->content, *end = w->content + w->content_length;
  size_t n = 0;
  uint64_t expected = 0;
  const char *last_time = NULL;
  size_t last_time_length = 0;
  w->status = FRAME_WORK_SERIAL;
  if (w->content_length == 0 || end[-1] != '\n') return;
  while (p < end) {
    const char *newline = memchr(p, '\n', (size_t)(end - p));
    size_t length = (size_t)(newline - p);
    line_fields fields;
    if (journal_scan_line(p, length, &fields) < 0 || !fields.time || fields.time_length >= 40) return;
    if (n == 0) {
      w->first_seq = fields.seq;
      w->first_time = fields.time;
      w->first_time_length = fields.time_length;
    } else if (fields.seq != expected ||
               memcmp(fields.time, last_time,
                      fields.time_length < last_time_length ? fields.time_length : last_time_length) < 0) {
      return;
    }
    if (reserve_lines(w, n + 1) < 0) return;
    w->offsets[n] = (uint32_t)(p - w->content);
    w->lengths[n] = (uint32_t)length;
    w->checkpoint[n] =
        fields.type && fields.type_length == 18 && memcmp(fields.type, "journal.checkpoint", 18) == 0;
    expected = fields.seq + 1;
    last_time = fields.time;
    last_time_length = fields.time_length;
    n++;
    p = newline + 1;
  }
  w->lines = n;
  w->last_time = last_time;
  w->last_time_length = last_time_length;
  for (size_t i = 0; i < n; i++)
    journal_merkle_leaf_hash(w->content + w->offsets[i], w->lengths[i], w->leaves[i]);
  w->status = FRAME_WORK_OK;
}

/* Take the next submitted frame and check it (p->lock held; released while working). */
static void work_one(frame_pool *p, ZSTD_DCtx *dctx) {
  frame_work *w = &p->slots[p->taken++ % p->slot_count];
  pthread_mutex_unlock(&p->lock);
  if (!dctx || decode(dctx, w) < 0)
    w->status = FRAME_WORK_UNDECODABLE;
  else
    scan_and_hash(w);
  pthread_mutex_lock(&p->lock);
  w->done = true;
  pthread_cond_broadcast(&p->work_done);
}

static void *worker_main(void *argument) {
  frame_pool *p = argument;
  ZSTD_DCtx *dctx = ZSTD_createDCtx();
  pthread_mutex_lock(&p->lock);
  for (;;) {
    while (!p->stop && p->taken == p->submitted) pthread_cond_wait(&p->work_ready, &p->lock);
    if (p->stop) break;
    work_one(p, dctx);
  }
  pthread_mutex_unlock(&p->lock);
  ZSTD_freeDCtx(dctx);
  return NULL;
}

frame_pool *journal_frame_pool_create(void) {
  frame_pool *p = calloc(1, sizeof *p);
  if (!p) return NULL;
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  int workers = cores < 1 ? 1 : cores > FRAME_POOL_MAX_WORKERS ? FRAME_POOL_MAX_WORKERS : (int)cores;
  p->slot_count = 2 * (size_t)workers + 2;
  p->slots = calloc(p->slot_count, sizeof *p->slots);
  p->caller_dctx = ZSTD_createDCtx();
  if (!p->slots || !p->caller_dctx) {
    ZSTD_freeDCtx(p->caller_dctx);
    free(p->slots);
    free(p);
    return NULL;
  }
  pthread_mutex_init(&p->lock, NULL);
  pthread_cond_init(&p->work_ready, NULL);
  pthread_cond_init(&p->work_done, NULL);
  for (int i = 0; i < workers; i++)
    if (pthread_create(&p->threads[p->workers], NULL, worker_main, p) == 0) p->workers++;
  if (p->workers == 0) {
    journal_frame_pool_free(p);
    return NULL;
  }
  return p;
}

bool journal_frame_pool_full(const frame_pool *p) {
  return p->submitted - p->consumed == p->slot_count;
}

bool journal_frame_pool_pending(const frame_pool *p) {
  return p->submitted != p->consumed;
}

frame_work *journal_frame_pool_next_slot(frame_pool *p) {
  frame_work *w = &p->slots[p->submitted % p->slot_count];
  w->done = false;
  w->lines = 0;
  return w;
}

void journal_frame_pool_submit(frame_pool *p) {
  pthread_mutex_lock(&p->lock);
  p->submitted++;
  pthread_cond_signal(&p->work_ready);
  pthread_mutex_unlock(&p->lock);
}

/* Rather than sleep until a worker gets to the oldest frame (on a busy machine a woken worker can wait
 * a whole scheduling period), the caller checks frames nobody has taken yet itself. */
frame_work *journal_frame_pool_oldest(frame_pool *p) {
  frame_work *w = &p->slots[p->consumed % p->slot_count];
  pthread_mutex_lock(&p->lock);
  while (!w->done) {
    if (p->taken != p->submitted)
      work_one(p, p->caller_dctx);
    else
      pthread_cond_wait(&p->work_done, &p->lock);
  }
  pthread_mutex_unlock(&p->lock);
  return w;
}

void journal_frame_pool_release(frame_pool *p) {
  p->consumed++;
}

void journal_frame_pool_free(frame_pool *p) {
  if (!p) return;
  pthread_mutex_lock(&p->lock);
  p->stop = true;
  pthread_cond_broadcast(&p->work_ready);
  pthread_mutex_unlock(&p->lock);
  for (int i = 0; i < p->workers; i++) pthread_join(p->threads[i], NULL);
  for (size_t i = 0; i < p->slot_count; i++) {
    frame_work *w = &p->slots[i];
    free(w->compressed);
    free(w->content);
    free(w->offsets);
    free(w->lengths);
    free(w->checkpoint);
    free(w->leaves);
  }
  free(p->slots);
  ZSTD_freeDCtx(p->caller_dctx);
  pthread_mutex_destroy(&p->lock);
  pthread_cond_destroy(&p->work_ready);
  pthread_cond_destroy(&p->work_done);
  free(p);
}
