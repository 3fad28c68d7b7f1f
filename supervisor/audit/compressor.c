/* The writer's zstd compressor, its memory kept out of every child the process forks.
 *
 * domed clones its jails from its own address space (supervisor/jail/run.c, clone3 without CLONE_VM),
 * and a jail's init, or a prepared jail waiting for its call, lives on as that copy. Each clone
 * write-protects every page domed has, so its next write to each one is a copy-on-write fault and a TLB
 * shootdown across the CPUs. The compressor's match tables (about 0.75 MiB at level 3) are written at
 * random places by every group's flush: with a jail cloned between two calls, that flush took 0.3–2.3 ms
 * of CPU for a group of two events instead of ~10 µs. Its memory is therefore mapped with
 * MADV_DONTFORK (madvise(2)): a child never receives it (and never uses it: a jail's child only issues
 * system calls), so domed's writes to it never fault. */
#define ZSTD_STATIC_LINKING_ONLY
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

#include "supervisor/audit/writer_internal.h"

/* Each allocation is its own mapping, its length in the first bytes of a leading page (zstd's free
 * does not pass the size); the caller's part starts page-aligned, which covers zstd's alignment. */
static void *compressor_alloc(void *opaque, size_t size) {
  (void)opaque;
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  if (size > SIZE_MAX - 2 * page) return NULL;
  size_t length = (size + 2 * page - 1) / page * page;
  uint8_t *base = mmap(NULL, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (base == MAP_FAILED) return NULL;
  if (madvise(base, length, MADV_DONTFORK) < 0) { /* then forks would copy it: refuse rather than fault */
    munmap(base, length);
    return NULL;
  }
  *(size_t *)base = length;
  return base + page;
}

static void compressor_free(void *opaque, void *address) {
  (void)opaque;
  if (address == NULL) return;
  uint8_t *base = (uint8_t *)address - sysconf(_SC_PAGESIZE);
  munmap(base, *(size_t *)base);
}

ZSTD_CCtx *journal_compressor_create(void) {
  return ZSTD_createCCtx_advanced((ZSTD_customMem){compressor_alloc, compressor_free, NULL});
}
