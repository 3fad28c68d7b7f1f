/* Leaf hashing in parallel for verification: leaf hashes are independent, only their order in the tree
 * matters, so a frame's lines are hashed by the calling thread and a few helpers, then appended to the
 * frontier in seq order by the caller. */
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include "supervisor/audit/journal_internal.h"

struct hash_pool {
  pthread_mutex_t lock;
  pthread_cond_t start, done;
  int helpers;
  pthread_t threads[8];
  uint64_t generation;
  int finished;
  bool stop;
  /* the current job */
  const char *base;
  const uint32_t *offsets, *lengths;
  size_t count;
  uint8_t (*out)[JOURNAL_HASH_BYTES];
  const uint8_t (*pairs)[JOURNAL_HASH_BYTES]; /* node job: out[i] = node_hash(pairs[2i], pairs[2i+1]) */
};

static void hash_stripe(hash_pool *p, int stripe, int stripes) {
  size_t per = (p->count + (size_t)stripes - 1) / (size_t)stripes;
  size_t begin = per * (size_t)stripe, end = begin + per < p->count ? begin + per : p->count;
  if (p->pairs)
    for (size_t i = begin; i < end; i++) merkle_node_hash(p->pairs[2 * i], p->pairs[2 * i + 1], p->out[i]);
  else
    for (size_t i = begin; i < end; i++) merkle_leaf_hash(p->base + p->offsets[i], p->lengths[i], p->out[i]);
}

struct helper_argument {
  hash_pool *pool;
  int index;
};

static void *helper_main(void *argument) {
  struct helper_argument *a = argument;
  hash_pool *p = a->pool;
  int index = a->index;
  free(a);
  uint64_t seen = 0;
  pthread_mutex_lock(&p->lock);
  for (;;) {
    while (!p->stop && p->generation == seen) pthread_cond_wait(&p->start, &p->lock);
    if (p->stop) break;
    seen = p->generation;
    pthread_mutex_unlock(&p->lock);
    hash_stripe(p, index + 1, p->helpers + 1);
    pthread_mutex_lock(&p->lock);
    if (++p->finished == p->helpers) pthread_cond_signal(&p->done);
  }
  pthread_mutex_unlock(&p->lock);
  return NULL;
}

hash_pool *hash_pool_create(void) {
  hash_pool *p = calloc(1, sizeof *p);
  if (!p) return NULL;
  pthread_mutex_init(&p->lock, NULL);
  pthread_cond_init(&p->start, NULL);
  pthread_cond_init(&p->done, NULL);
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  int helpers = cores > 1 ? (int)(cores - 1) : 0;
  if (helpers > 7) helpers = 7;
  for (int i = 0; i < helpers; i++) {
    struct helper_argument *a = malloc(sizeof *a);
    if (!a) break;
    *a = (struct helper_argument){p, p->helpers};
    if (pthread_create(&p->threads[p->helpers], NULL, helper_main, a) != 0) {
      free(a);
      break;
    }
    p->helpers++;
  }
  return p;
}

static void run(hash_pool *p, size_t count);

void hash_pool_leaves(hash_pool *p, const char *base, const uint32_t *offsets, const uint32_t *lengths,
                      size_t count, uint8_t (*out)[JOURNAL_HASH_BYTES]) {
  p->base = base;
  p->offsets = offsets;
  p->lengths = lengths;
  p->pairs = NULL;
  p->out = out;
  run(p, count);
}

void hash_pool_nodes(hash_pool *p, const uint8_t (*pairs)[JOURNAL_HASH_BYTES], size_t count,
                     uint8_t (*out)[JOURNAL_HASH_BYTES]) {
  p->pairs = pairs;
  p->out = out;
  run(p, count);
}

static void run(hash_pool *p, size_t count) {
  p->count = count;
  if (p->helpers == 0 || count < 64) {
    hash_stripe(p, 0, 1);
    return;
  }
  pthread_mutex_lock(&p->lock);
  p->finished = 0;
  p->generation++;
  pthread_cond_broadcast(&p->start);
  pthread_mutex_unlock(&p->lock);
  hash_stripe(p, 0, p->helpers + 1);
  pthread_mutex_lock(&p->lock);
  while (p->finished < p->helpers) pthread_cond_wait(&p->done, &p->lock);
  pthread_mutex_unlock(&p->lock);
}

void hash_pool_free(hash_pool *p) {
  if (!p) return;
  pthread_mutex_lock(&p->lock);
  p->stop = true;
  pthread_cond_broadcast(&p->start);
  pthread_mutex_unlock(&p->lock);
  for (int i = 0; i < p->helpers; i++) pthread_join(p->threads[i], NULL);
  pthread_mutex_destroy(&p->lock);
  pthread_cond_destroy(&p->start);
  pthread_cond_destroy(&p->done);
  free(p);
}
