/* Shared libraries dome loads on first use instead of at program start.
 *
 * Linking a library makes every start of every program pay for loading it, its dependencies and their
 * relocations: vectorscan pulls in libstdc++, libnftables four more libraries, libnats libssl, libcrypto
 * and libprotobuf-c; together they cost more than a jail start itself. The few commands that need them
 * (redaction, routed egress, fleet mode) load them when they first call into them. The folder holds one
 * file per library that defines that library's functions used by dome (same names and prototypes as its
 * header) as forwarders to the dlopen()ed library, so the callers are unchanged and the library is not
 * linked (see the Makefile's DLOPEN_PACKAGES). */
#ifndef DOME_DLOPEN_H
#define DOME_DLOPEN_H

#include <stdbool.h>

/* Resolve `count` symbols `names[i]` of the shared object `soname` into `*slots[i]`, once per process for
 * a given `once` flag (pthread_once semantics, thread-safe). Returns true when the library and every
 * symbol were found. On failure returns false every time it is called, and the first failure writes one
 * line to stderr naming the library and dlerror(3)'s reason ("dome: cannot load libhs.so.5: ...") so the
 * caller's own error (which only sees an error code) has its cause next to it. */
bool dome_dlopen_resolve(const char *soname, const char *const *names, void **const *slots, int count,
                         int *state);

#endif
