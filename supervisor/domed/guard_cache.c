/* A cache of compiled guards. Compiling a guard (one vectorscan database per class plus the exact
 * secret values) costs ~200 ms of CPU, far more than running a short program, while the inputs — the
 * tool's field classification and the secret values — rarely change between calls. Guards are
 * immutable and thread-shareable (guard.h), so calls with the same inputs share one, reference-counted;
 * the least recently used of DOMED_GUARD_CACHE_SIZE entries is dropped when a new one is needed. */
#include <errno.h>
#include <pthread.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>

#include "supervisor/domed/domed.h"
#include "supervisor/guards/guard.h"

#define DOMED_GUARD_CACHE_SIZE 8

struct cached_guard {
  unsigned char key[32]; /* BLAKE2b of the classification and the secrets */
  struct guard *guard;
  unsigned refs; /* cache + users */
  uint64_t used;
};

static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
/* one compile at a time: concurrent misses on one key wait for the first instead of compiling too */
static pthread_mutex_t compile_lock = PTHREAD_MUTEX_INITIALIZER;
static struct cached_guard *cache[DOMED_GUARD_CACHE_SIZE];
static uint64_t clock_tick;

static void unref_locked(struct cached_guard *entry) {
  if (--entry->refs == 0) {
    guard_free(entry->guard);
    sodium_memzero(entry->key, sizeof entry->key);
    free(entry);
  }
}

static void cache_key(const struct guard_options *options, unsigned char key[32]) {
  crypto_generichash_state state;
  crypto_generichash_init(&state, NULL, 0, 32);
  const char *classification = options->classification ? options->classification : "";
  crypto_generichash_update(&state, (const unsigned char *)classification, strlen(classification) + 1);
  for (size_t i = 0; i < options->secret_count; i++) {
    uint64_t length = options->secrets[i].length;
    crypto_generichash_update(&state, (const unsigned char *)&length, sizeof length);
    crypto_generichash_update(&state, options->secrets[i].value, options->secrets[i].length);
  }
  crypto_generichash_final(&state, key, 32);
}

static bool lookup(const unsigned char key[32], struct guard **guard, void **handle) {
  bool found = false;
  pthread_mutex_lock(&cache_lock);
  for (size_t i = 0; i < DOMED_GUARD_CACHE_SIZE && !found; i++)
    if (cache[i] && sodium_memcmp(cache[i]->key, key, 32) == 0) {
      cache[i]->refs++;
      cache[i]->used = ++clock_tick;
      *guard = cache[i]->guard;
      *handle = cache[i];
      found = true;
    }
  pthread_mutex_unlock(&cache_lock);
  return found;
}

static int compile(const struct guard_options *options, const unsigned char key[32], struct guard **guard,
                   void **handle, dome_error *err) {
  struct cached_guard *entry = calloc(1, sizeof *entry);
  if (entry == NULL) return dome_error_set(err, ENOMEM, "guard cache");
  int rc = guard_create(options, &entry->guard, err);
  if (rc < 0) {
    free(entry);
    return rc;
  }
  memcpy(entry->key, key, sizeof entry->key);
  entry->refs = 2; /* cache + caller */
  pthread_mutex_lock(&cache_lock);
  entry->used = ++clock_tick;
  size_t slot = 0;
  for (size_t i = 0; i < DOMED_GUARD_CACHE_SIZE; i++) {
    if (cache[i] == NULL) {
      slot = i;
      break;
    }
    if (cache[i]->used < cache[slot]->used) slot = i;
  }
  if (cache[slot]) unref_locked(cache[slot]);
  cache[slot] = entry;
  pthread_mutex_unlock(&cache_lock);
  *guard = entry->guard;
  *handle = entry;
  return 0;
}

int domed_guard_acquire(const struct guard_options *options, struct guard **guard, void **handle,
                        dome_error *err) {
  unsigned char key[32];
  cache_key(options, key);
  if (lookup(key, guard, handle)) return 0;
  pthread_mutex_lock(&compile_lock);
  int rc = lookup(key, guard, handle) ? 0 : compile(options, key, guard, handle, err);
  pthread_mutex_unlock(&compile_lock);
  return rc;
}

void domed_guard_release(void *handle) {
  if (handle == NULL) return;
  pthread_mutex_lock(&cache_lock);
  unref_locked(handle);
  pthread_mutex_unlock(&cache_lock);
}

void domed_guard_cache_clear(void) {
  pthread_mutex_lock(&cache_lock);
  for (size_t i = 0; i < DOMED_GUARD_CACHE_SIZE; i++)
    if (cache[i]) {
      unref_locked(cache[i]);
      cache[i] = NULL;
    }
  pthread_mutex_unlock(&cache_lock);
}
