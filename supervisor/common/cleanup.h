/* Scope-bound cleanup (systemd style): a variable declared with one of these attributes is released
 * when it goes out of scope, so every error path is a plain `return`. Steal ownership with
 * dome_steal_pointer(&p) / dome_steal_fd(&fd). */
#ifndef DOME_COMMON_CLEANUP_H
#define DOME_COMMON_CLEANUP_H

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static inline void dome_free_pointer(void *p) {
  free(*(void **)p);
}
static inline void dome_close_fd(const int *fd) {
  if (*fd >= 0) close(*fd);
}
static inline void dome_close_file(FILE **f) {
  if (*f) fclose(*f);
}

/* _cleanup_(type_freep): call type_freep(&variable) at the end of its scope; type_freep takes a pointer
 * to the variable and must accept a variable holding NULL (define it with DOME_DEFINE_FREEP). */
#define _cleanup_(function) __attribute__((cleanup(function)))
#define DOME_DEFINE_FREEP(type, function)          \
  static inline void function##p(type **pointer) { \
    if (*pointer) function(*pointer);              \
  }

#define _cleanup_free_ __attribute__((cleanup(dome_free_pointer)))
#define _cleanup_close_ __attribute__((cleanup(dome_close_fd)))
#define _cleanup_fclose_ __attribute__((cleanup(dome_close_file)))

static inline void *dome_steal_pointer_impl(void **p) {
  void *value = *p;
  *p = NULL;
  return value;
}
#define dome_steal_pointer(pp) dome_steal_pointer_impl((void **)(pp))

static inline int dome_steal_fd(int *fd) {
  int value = *fd;
  *fd = -1;
  return value;
}

#endif
