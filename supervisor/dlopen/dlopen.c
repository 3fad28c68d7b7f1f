/* dome_dlopen_resolve: dlopen(3) + dlsym(3) once per library, under one mutex (loading is rare). */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

#include "supervisor/dlopen/dlopen.h"

enum { STATE_UNTRIED = 0, STATE_LOADED = 1, STATE_FAILED = 2 };

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

bool dome_dlopen_resolve(const char *soname, const char *const *names, void **const *slots, int count,
                         int *state) {
  int seen = __atomic_load_n(state, __ATOMIC_ACQUIRE);
  if (seen != STATE_UNTRIED) return seen == STATE_LOADED;
  pthread_mutex_lock(&lock);
  if (*state == STATE_UNTRIED) {
    /* RTLD_LOCAL: the library's symbols stay out of the global scope, so they never resolve against (or
     * get shadowed by) the forwarders of the same name in the program. */
    void *handle = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
    const char *missing = NULL;
    for (int i = 0; handle && i < count && !missing; i++)
      if ((*slots[i] = dlsym(handle, names[i])) == NULL) missing = names[i];
    if (!handle)
      fprintf(stderr, "dome: cannot load %s: %s\n", soname, dlerror());
    else if (missing)
      fprintf(stderr, "dome: %s has no symbol `%s`\n", soname, missing);
    __atomic_store_n(state, handle && !missing ? STATE_LOADED : STATE_FAILED, __ATOMIC_RELEASE);
  }
  pthread_mutex_unlock(&lock);
  return *state == STATE_LOADED;
}
