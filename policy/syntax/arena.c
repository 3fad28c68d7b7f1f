/* Bump allocator for policy sets, entity sets and per-request evaluation. */
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
};

#define ARENA_BLOCK_SIZE (16u * 1024u)

cedar_arena *cedar_arena_new(void) {
  return calloc(1, sizeof(cedar_arena));
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
  size = (size + 15u) & ~(size_t)15u;
  if (size == 0) size = 16;
  arena_block *b = arena->head;
  if (!b || b->size - b->used < size) {
    /* The head block keeps serving small allocations; a big request gets its own block behind it. */
    size_t bsize = size > ARENA_BLOCK_SIZE / 4 ? size : ARENA_BLOCK_SIZE;
    arena_block *nb = malloc(sizeof(arena_block) + bsize);
    if (!nb) return NULL;
    nb->size = bsize;
    nb->used = 0;
    if (b && bsize != ARENA_BLOCK_SIZE) {
      nb->next = b->next;
      b->next = nb;
    } else {
      nb->next = b;
      arena->head = nb;
    }
    b = nb;
  }
  void *p = b->data + b->used;
  b->used += size;
  arena->total += size;
  memset(p, 0, size);
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
