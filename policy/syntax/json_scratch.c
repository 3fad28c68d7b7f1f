/* Scratch trees: jansson's allocations for one load placed in bump-allocated blocks.
 *
 * jansson allocates every node, key and string separately and json_decref frees them one by one; for a
 * tree that is converted and dropped right away (entities and context JSON) that is a large part of
 * the cost. At program start this file chains jansson's allocation functions (json_set_alloc_funcs) to
 * hooks that behave exactly as the previous functions (malloc/free) except on a thread that is inside
 * cedar_json_scratch_load: there allocations come from that load's blocks and frees do nothing; the
 * blocks go at cedar_json_scratch_release. Every other user of jansson, on any thread, is unaffected.
 * A program that later installs its own functions replaces the hooks; cedar_json_scratch_load notices
 * and loads an ordinary tree instead. Each thread keeps one released block (up to SPARE_MAX bytes) for
 * its next load; a thread-specific-data destructor frees it when the thread ends. */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "policy/syntax/syntax.h"

typedef struct cedar_json_block {
  struct cedar_json_block *next;
  size_t size, used;
  _Alignas(16) unsigned char data[];
} cedar_json_block;

enum { FIRST_MIN = 4096, SPARE_MAX = 64 * 1024, BLOCK_MAX = 1 << 20 };

static _Thread_local cedar_json_scratch *active; /* the load in progress on this thread */
static _Thread_local cedar_json_block *spare;    /* a released block kept for the next load */
static json_malloc_t prev_malloc = malloc;
static json_free_t prev_free = free;
static pthread_key_t spare_key;
static pthread_once_t spare_once = PTHREAD_ONCE_INIT;
static bool spare_key_ok;

static void spare_destroy(void *block) {
  free(block);
}

static void spare_key_create(void) {
  spare_key_ok = pthread_key_create(&spare_key, spare_destroy) == 0;
}

/* A new head block with room for size bytes (the slow path of hook_malloc). */
__attribute__((noinline)) static cedar_json_block *block_new(cedar_json_scratch *s, size_t size) {
  if (size > SIZE_MAX / 2) return NULL;
  size_t bsize = s->head ? s->head->size * 2 : FIRST_MIN;
  if (bsize > BLOCK_MAX) bsize = BLOCK_MAX;
  if (bsize < size) bsize = size;
  cedar_json_block *b = malloc(sizeof *b + bsize);
  if (!b) return NULL;
  b->size = bsize;
  b->used = 0;
  b->next = s->head;
  s->head = b;
  return b;
}

static void *hook_malloc(size_t size) {
  cedar_json_scratch *s = active;
  if (!s) return prev_malloc(size);
  size = (size + 15u + !size) & ~(size_t)15u; /* 0 -> 16; a huge size wraps to a small one: see below */
  cedar_json_block *b = s->head;
  if (__builtin_expect(!b || b->size - b->used < size || size < 16, 0) &&
      !(b = block_new(s, size < 16 ? SIZE_MAX : size)))
    return NULL;
  void *p = b->data + b->used;
  b->used += size;
  return p;
}

static void hook_free(void *p) {
  if (!active) prev_free(p);
}

__attribute__((constructor)) static void install_hooks(void) {
  json_malloc_t m;
  json_free_t f;
  json_get_alloc_funcs(&m, &f);
  if (m == hook_malloc) return;
  prev_malloc = m ? m : malloc;
  prev_free = f ? f : free;
  json_set_alloc_funcs(hook_malloc, hook_free);
}

json_t *cedar_json_scratch_load(cedar_json_scratch *scratch, const char *text, size_t length,
                                void *json_error) {
  json_malloc_t m;
  json_free_t f;
  json_get_alloc_funcs(&m, &f);
  scratch->head = NULL;
  scratch->hooked = m == hook_malloc && f == hook_free;
  if (!scratch->hooked) return cedar_json_loadb(text, length, json_error);
  if (spare) { /* this thread's released block */
    scratch->head = spare;
    spare = NULL;
    scratch->head->used = 0;
    scratch->head->next = NULL;
  }
  cedar_json_scratch *saved = active;
  active = scratch;
  json_t *root = cedar_json_loadb(text, length, json_error);
  active = saved;
  if (!root) cedar_json_scratch_release(scratch, NULL);
  return root;
}

void cedar_json_scratch_release(cedar_json_scratch *scratch, json_t *root) {
  if (!scratch->hooked) {
    json_decref(root);
    return;
  }
  /* keep the largest block that is not too big for the next load on this thread */
  cedar_json_block *keep = NULL;
  for (cedar_json_block *b = scratch->head, *next; b; b = next) {
    next = b->next;
    if (b->size <= SPARE_MAX && (!keep || b->size > keep->size)) {
      free(keep);
      keep = b;
    } else {
      free(b);
    }
  }
  scratch->head = NULL;
  if (keep) {
    pthread_once(&spare_once, spare_key_create);
    if (!spare && spare_key_ok && pthread_setspecific(spare_key, keep) == 0)
      spare = keep;
    else
      free(keep);
  }
}
