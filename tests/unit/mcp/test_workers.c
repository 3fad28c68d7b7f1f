/* The MCP server's worker threads (supervisor/mcp/workers.c): a job reuses an idle worker, which starts
 * it with the priority and signal mask of a new thread; concurrent jobs each get a thread at once; idle
 * workers over the cap or past the idle timeout end; a stop waits for the running jobs and leaves no
 * thread. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <dirent.h>
#include <errno.h>
#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "supervisor/mcp/mcp_internal.h"

#define SMALL_STACK (64u << 10)

/* Threads of this process now (entries of /proc/self/task). */
static unsigned thread_count(void) {
  DIR *directory = opendir("/proc/self/task");
  assert_non_null(directory);
  unsigned count = 0;
  for (struct dirent *entry; (entry = readdir(directory)) != NULL;)
    if (entry->d_name[0] != '.') count++;
  closedir(directory);
  return count;
}

static void sleep_ms(unsigned milliseconds) {
  struct timespec pause = {.tv_sec = milliseconds / 1000, .tv_nsec = (long)(milliseconds % 1000) * 1000000L};
  nanosleep(&pause, NULL);
}

/* Wait at most 3 s for the pool's counts to be `live` and `idle`; true when they are. */
static bool counts_reach(struct mcp_workers *pool, unsigned live, unsigned idle) {
  struct mcp_workers_counts counts;
  for (int i = 0; i < 300; i++) {
    mcp_workers_count(pool, &counts);
    if (counts.live == live && counts.idle == idle) return true;
    sleep_ms(10);
  }
  return false;
}

/* Wait at most 3 s for the process to have `expected` threads; true when it has. */
static bool threads_reach(unsigned expected) {
  for (int i = 0; i < 300; i++) {
    if (thread_count() == expected) return true;
    sleep_ms(10);
  }
  return false;
}

static pid_t own_tid(void) {
  return (pid_t)syscall(SYS_gettid);
}

/* What a job saw of its thread. */
struct sighting {
  pid_t tid;
  int nice;
  bool usr2_blocked;
  size_t stack_bytes;
  sem_t done;
};

static void sight(struct sighting *s) {
  s->tid = own_tid();
  errno = 0;
  s->nice = getpriority(PRIO_PROCESS, (id_t)s->tid);
  sigset_t mask;
  pthread_sigmask(SIG_SETMASK, NULL, &mask);
  s->usr2_blocked = sigismember(&mask, SIGUSR2) == 1;
  pthread_attr_t attributes;
  pthread_getattr_np(pthread_self(), &attributes);
  pthread_attr_getstacksize(&attributes, &s->stack_bytes);
  pthread_attr_destroy(&attributes);
}

/* Looks at its thread, then changes what a call could change of it: lower priority, SIGUSR2 blocked. */
static void *spoiling_job(void *argument) {
  struct sighting *s = argument;
  sight(s);
  setpriority(PRIO_PROCESS, (id_t)s->tid, s->nice + 5);
  sigset_t usr2;
  sigemptyset(&usr2);
  sigaddset(&usr2, SIGUSR2);
  pthread_sigmask(SIG_BLOCK, &usr2, NULL);
  sem_post(&s->done);
  return NULL;
}

static void *looking_job(void *argument) {
  struct sighting *s = argument;
  sight(s);
  sem_post(&s->done);
  return NULL;
}

/* Run looking_job on the pool with `stack_bytes` and wait for it to have looked. */
static void look(struct mcp_workers *pool, struct sighting *s, size_t stack_bytes) {
  assert_int_equal(mcp_workers_start(pool, looking_job, s, stack_bytes), 0);
  sem_wait(&s->done);
}

/* A new pool (SMALL_STACK, idle cap 4, idle timeout idle_ms) whose one worker ran looking_job and is idle. */
static void pool_with_one_idle(struct mcp_workers *pool, unsigned idle_ms, struct sighting *s) {
  assert_int_equal(mcp_workers_init(pool, SMALL_STACK, 4, idle_ms), 0);
  sem_init(&s->done, 0, 0);
  look(pool, s, SMALL_STACK);
  assert_true(counts_reach(pool, 1, 1));
}

static void test_second_job_reuses_the_thread_as_new(void **state) {
  (void)state;
  struct mcp_workers pool;
  assert_int_equal(mcp_workers_init(&pool, SMALL_STACK, 4, 30000), 0);
  errno = 0;
  int own_nice = getpriority(PRIO_PROCESS, (id_t)own_tid());
  assert_int_equal(errno, 0);
  struct sighting first = {0}, second = {0};
  sem_init(&first.done, 0, 0);
  sem_init(&second.done, 0, 0);
  assert_int_equal(mcp_workers_start(&pool, spoiling_job, &first, SMALL_STACK), 0);
  sem_wait(&first.done);
  assert_int_equal(first.nice, own_nice);
  assert_false(first.usr2_blocked);
  assert_true(counts_reach(&pool, 1, 1)); /* gone idle */
  look(&pool, &second, SMALL_STACK);
  assert_int_equal(second.tid, first.tid); /* the same thread */
  assert_int_equal(second.nice, own_nice); /* its priority given back */
  assert_false(second.usr2_blocked);       /* its signal mask too */
  assert_true(counts_reach(&pool, 1, 1));
  struct mcp_workers_counts counts;
  mcp_workers_count(&pool, &counts);
  assert_int_equal(counts.created, 1);
  assert_int_equal(counts.reused, 1);
  assert_int_equal(mcp_workers_stop(&pool, 5000), 0);
  sem_destroy(&first.done);
  sem_destroy(&second.done);
}

#define CONCURRENT 6

/* Jobs that each wait (at most 5 s) until all CONCURRENT run: one queued behind another never sees it. */
struct rendezvous {
  pthread_mutex_t lock;
  pthread_cond_t arrived_changed;
  unsigned arrived;
  atomic_uint met;
  pid_t tids[CONCURRENT];
  sem_t done;
};

static void *meeting_job(void *argument) {
  struct rendezvous *r = argument;
  struct timespec deadline;
  clock_gettime(CLOCK_REALTIME, &deadline);
  deadline.tv_sec += 5;
  pthread_mutex_lock(&r->lock);
  r->tids[r->arrived++] = own_tid();
  pthread_cond_broadcast(&r->arrived_changed);
  while (r->arrived < CONCURRENT)
    if (pthread_cond_timedwait(&r->arrived_changed, &r->lock, &deadline) == ETIMEDOUT) break;
  if (r->arrived == CONCURRENT) atomic_fetch_add(&r->met, 1);
  pthread_mutex_unlock(&r->lock);
  sem_post(&r->done);
  return NULL;
}

static void test_concurrent_jobs_each_get_a_thread_and_the_idle_cap_holds(void **state) {
  (void)state;
  unsigned threads_before = thread_count();
  struct mcp_workers pool;
  struct sighting warm = {0};
  pool_with_one_idle(&pool, 30000, &warm);

  struct rendezvous r = {.lock = PTHREAD_MUTEX_INITIALIZER, .arrived_changed = PTHREAD_COND_INITIALIZER};
  sem_init(&r.done, 0, 0);
  for (int i = 0; i < CONCURRENT; i++)
    assert_int_equal(mcp_workers_start(&pool, meeting_job, &r, SMALL_STACK), 0);
  for (int i = 0; i < CONCURRENT; i++) sem_wait(&r.done);
  assert_int_equal(atomic_load(&r.met), CONCURRENT); /* none waited for another to end */
  for (int i = 0; i < CONCURRENT; i++)
    for (int j = i + 1; j < CONCURRENT; j++) assert_int_not_equal(r.tids[i], r.tids[j]);
  struct mcp_workers_counts counts;
  mcp_workers_count(&pool, &counts);
  assert_int_equal(counts.created, CONCURRENT); /* the idle one was taken, five were made */
  assert_int_equal(counts.reused, 1);

  /* a burst leaves the cap: two of the six ended, and their threads are gone */
  assert_true(counts_reach(&pool, 4, 4));
  assert_true(threads_reach(threads_before + 4));
  assert_int_equal(mcp_workers_stop(&pool, 5000), 0);
  assert_true(threads_reach(threads_before));
  sem_destroy(&r.done);
  sem_destroy(&warm.done);
}

static void test_idle_worker_ends_after_the_timeout(void **state) {
  (void)state;
  unsigned threads_before = thread_count();
  struct mcp_workers pool;
  assert_int_equal(mcp_workers_init(&pool, SMALL_STACK, 4, 100), 0);
  struct sighting s = {0};
  sem_init(&s.done, 0, 0);
  look(&pool, &s, SMALL_STACK);
  assert_true(counts_reach(&pool, 0, 0));
  assert_true(threads_reach(threads_before));
  /* the next job gets a new thread */
  pid_t first = s.tid;
  look(&pool, &s, SMALL_STACK);
  assert_int_not_equal(s.tid, first);
  assert_int_equal(mcp_workers_stop(&pool, 5000), 0);
  assert_true(threads_reach(threads_before));
  sem_destroy(&s.done);
}

/* A job that sleeps 200 ms, then counts itself done. */
static void *slow_job(void *argument) {
  sleep_ms(200);
  atomic_fetch_add((atomic_uint *)argument, 1);
  return NULL;
}

/* A job that runs until its semaphore is posted. */
static void *held_job(void *argument) {
  sem_wait(argument);
  return NULL;
}

static void test_stop_waits_for_jobs_and_leaves_no_thread(void **state) {
  (void)state;
  unsigned threads_before = thread_count();
  struct mcp_workers pool;
  struct sighting s = {0};
  pool_with_one_idle(&pool, 30000, &s);
  atomic_uint finished = 0;
  for (int i = 0; i < 3; i++) assert_int_equal(mcp_workers_start(&pool, slow_job, &finished, SMALL_STACK), 0);
  assert_int_equal(mcp_workers_stop(&pool, 5000), 0);
  assert_int_equal(atomic_load(&finished), 3); /* the stop waited for them */
  assert_true(threads_reach(threads_before));  /* and joined every worker */
  sem_destroy(&s.done);

  /* a job still running at the timeout: the pool is left to it, and a later stop ends it */
  assert_int_equal(mcp_workers_init(&pool, SMALL_STACK, 4, 30000), 0);
  sem_t release;
  sem_init(&release, 0, 0);
  assert_int_equal(mcp_workers_start(&pool, held_job, &release, SMALL_STACK), 0);
  assert_int_equal(mcp_workers_stop(&pool, 100), 1);
  assert_int_equal(mcp_workers_start(&pool, slow_job, &finished, SMALL_STACK), -ESHUTDOWN);
  sem_post(&release);
  assert_int_equal(mcp_workers_stop(&pool, 5000), 0);
  assert_true(threads_reach(threads_before));
  sem_destroy(&release);
}

static void test_a_worker_has_the_stack_asked_for(void **state) {
  (void)state;
  struct mcp_workers pool;
  struct sighting small = {0}, large = {0};
  pool_with_one_idle(&pool, 30000, &small);
  assert_true(small.stack_bytes >= SMALL_STACK);
  /* the idle worker's stack is too small: a new worker with the stack asked for */
  sem_init(&large.done, 0, 0);
  look(&pool, &large, 4u << 20);
  assert_int_not_equal(large.tid, small.tid);
  assert_true(large.stack_bytes >= 4u << 20);
  assert_true(counts_reach(&pool, 2, 2));
  /* a small job may take the large worker */
  look(&pool, &small, SMALL_STACK);
  assert_int_equal(small.tid, large.tid); /* the most recently idle */
  assert_int_equal(mcp_workers_stop(&pool, 5000), 0);
  sem_destroy(&small.done);
  sem_destroy(&large.done);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_second_job_reuses_the_thread_as_new),
      cmocka_unit_test(test_concurrent_jobs_each_get_a_thread_and_the_idle_cap_holds),
      cmocka_unit_test(test_idle_worker_ends_after_the_timeout),
      cmocka_unit_test(test_stop_waits_for_jobs_and_leaves_no_thread),
      cmocka_unit_test(test_a_worker_has_the_stack_asked_for),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
