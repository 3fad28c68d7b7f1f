/* Deadlines for pthread_cond_timedwait. */
#include "supervisor/common/deadline.h"

struct timespec dome_deadline_after_ms(unsigned milliseconds) {
  return dome_deadline_on_clock_after_ms(CLOCK_REALTIME, milliseconds);
}

struct timespec dome_deadline_on_clock_after_ms(clockid_t clock, unsigned milliseconds) {
  struct timespec at;
  clock_gettime(clock, &at);
  at.tv_sec += milliseconds / 1000;
  at.tv_nsec += (long)(milliseconds % 1000) * 1000000L;
  if (at.tv_nsec >= 1000000000L) {
    at.tv_sec++;
    at.tv_nsec -= 1000000000L;
  }
  return at;
}

bool dome_deadline_before(const struct timespec *a, const struct timespec *b) {
  return a->tv_sec < b->tv_sec || (a->tv_sec == b->tv_sec && a->tv_nsec < b->tv_nsec);
}
