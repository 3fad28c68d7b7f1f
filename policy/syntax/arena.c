/* Bump allocator for policy sets, entity sets and per-request evaluation. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "policy/syntax/syntax.h"

typedef struct arena_block {
  struct arena_block *next;
  size_t size, used;
  _Alignas(16) unsigned char data[];
} arena_block;

struct cedar_arena {
  arena_block *head;
  size_t total;
  size_t first, limit; /* size of the first block; blocks double up to limit (0: the defaults) */
};

#define ARENA_BLOCK_SIZE (16u * 1024u)
/* The first block is small (a per-request context or a handful of entities fits, and malloc serves it
 * from its small-chunk caches); each new block doubles, up to ARENA_BLOCK_SIZE. */
#define ARENA_FIRST_BLOCK (1024u - 64u)

cedar_arena *cedar_arena_new(void) {
  return calloc(1, sizeof(cedar_arena));
}

cedar_arena *cedar_arena_new_sized(size_t first_block, size_t max_block) {
  cedar_arena *arena = calloc(1, sizeof(cedar_arena));
  if (!arena) return NULL;
  arena->first = first_block < 256 ? 256 : first_block;
  arena->limit = max_block < arena->first ? arena->first : max_block;
  return arena;
}

void cedar_arena_free(cedar_arena *arena) {
  if (!arena) return;
  arena_block *b = arena->head;
  while (b) {
    arena_block *next = b->next;
    free(b);
    b = next;
  }
  free(arena);
}

void cedar_arena_reset(cedar_arena *arena) {
  arena_block *b = arena->head;
  if (!b) return;
  while (b->next) {
    arena_block *last = b->next;
    b->next = last->next;
    free(last);
  }
  b->used = 0;
  arena->total = 0;
}

void *cedar_arena_alloc(cedar_arena *arena, size_t size) {
  void *p = cedar_arena_alloc_uninit(arena, size);
  if (p) memset(p, 0, (size + 15u) & ~(size_t)15u);
  return p;
}

/* A new block for size bytes (size rounded, larger than what the head block has left). */
__attribute__((noinline)) static void *arena_grow(cedar_arena *arena, size_t size) {
  arena_block *b = arena->head;
  /* The head block keeps serving small allocations; a big request gets its own block behind it. */
  size_t limit = arena->limit ? arena->limit : ARENA_BLOCK_SIZE;
  size_t grow = !b                     ? (arena->first ? arena->first : ARENA_FIRST_BLOCK)
                : b->size >= limit / 2 ? limit
                                       : b->size * 2;
  size_t bsize = size > grow / 4 ? size : grow;
  arena_block *nb = malloc(sizeof(arena_block) + bsize);
  if (!nb) return NULL;
  nb->size = bsize;
  nb->used = size;
  if (b && bsize != grow) {
    nb->next = b->next;
    b->next = nb;
  } else {
    nb->next = b;
    arena->head = nb;
  }
  arena->total += size;
  return nb->data;
}

void *cedar_arena_alloc_uninit(cedar_arena *arena, size_t size) {
  if (size > SIZE_MAX / 2) return NULL;
  size = size ? (size + 15u) & ~(size_t)15u : 16;
  arena_block *b = arena->head;
  if (__builtin_expect(!b || b->size - b->used < size, 0)) return arena_grow(arena, size);
  void *p = b->data + b->used;
  b->used += size;
  arena->total += size;
  return p;
}

char *cedar_arena_strndup(cedar_arena *arena, const char *s, size_t length) {
  char *p = cedar_arena_alloc(arena, length + 1);
  if (!p) return NULL;
  if (length) memcpy(p, s, length);
  p[length] = 0;
  return p;
}

size_t cedar_arena_used(const cedar_arena *arena) {
  return arena->total;
}
