/* Deadlines for pthread_cond_timedwait (POSIX: an absolute CLOCK_REALTIME time). */
#ifndef DOME_COMMON_DEADLINE_H
#define DOME_COMMON_DEADLINE_H

#include <stdbool.h>
#include <time.h>

/* The CLOCK_REALTIME time `milliseconds` from now, normalised (0 <= tv_nsec < 1e9). */
struct timespec dome_deadline_after_ms(unsigned milliseconds);

/* The time on `clock` `milliseconds` from now, normalised: the deadline of a condition variable whose
 * clock attribute is `clock` (pthread_condattr_setclock, e.g. CLOCK_MONOTONIC: no wall-clock step moves
 * it). */
struct timespec dome_deadline_on_clock_after_ms(clockid_t clock, unsigned milliseconds);

/* True when `a` is strictly earlier than `b` (both normalised). */
bool dome_deadline_before(const struct timespec *a, const struct timespec *b);

#endif
