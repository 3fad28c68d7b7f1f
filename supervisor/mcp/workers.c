/* Reused threads for the server's calls (tools/call, the tasks/result waiters, a stream's resumption
 * grace): creating a thread costs ~0.2 ms between clone3 and its first instruction on a small VM, on the
 * answer's critical path; handing a job to a thread that waits costs one futex wake.
 *
 * A start hands the job to an idle worker whose stack is large enough (the most recently idle first: its
 * stack and caches are warm), or creates a worker when none is: a job never waits behind another. A
 * worker whose job ends gets back the scheduling priority and signal mask it started with (what a new
 * thread would have) and goes idle; it ends instead when idle_max workers already are, when it cannot get
 * its priority back, after idle_timeout_ms idle, or when the pool stops. Workers are joinable: one that
 * ends joins the one that ended before it, and mcp_workers_stop joins the last, so no thread outlives the
 * pool. */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "supervisor/common/deadline.h"
#include "supervisor/mcp/mcp_internal.h"

struct mcp_worker {
  struct mcp_workers *pool;
  struct mcp_worker *next_idle; /* under pool->lock */
  size_t stack_bytes;
  pthread_cond_t wake;      /* CLOCK_MONOTONIC: a job was handed over, or the pool stops */
  void *(*routine)(void *); /* the job handed over; NULL while idle. Under pool->lock */
  void *argument;
  int nice;      /* its scheduling priority when it started (its creator's) */
  sigset_t mask; /* its signal mask when it started (its creator's) */
};

int mcp_workers_init(struct mcp_workers *workers, size_t stack_bytes, unsigned idle_max,
                     unsigned idle_timeout_ms) {
  *workers = (struct mcp_workers){.stack_bytes = stack_bytes,
                                  .idle_max = idle_max,
                                  .idle_timeout_ms = idle_timeout_ms ? idle_timeout_ms : 1};
  int rc = pthread_mutex_init(&workers->lock, NULL);
  if (rc != 0) return -rc;
  if ((rc = pthread_cond_init(&workers->ended, NULL)) != 0) {
    pthread_mutex_destroy(&workers->lock);
    return -rc;
  }
  workers->ready = true;
  return 0;
}

#define NICE_UNKNOWN INT_MIN

/* The calling thread's nice value, or NICE_UNKNOWN when it cannot be read. */
static int own_nice(void) {
  errno = 0;
  int nice = getpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid));
  return nice == -1 && errno != 0 ? NICE_UNKNOWN : nice;
}

/* After a job: the worker's signal mask and priority as they were when it started. False when the
 * priority cannot be given back (a job lowered it and raising it takes CAP_SYS_NICE): the worker ends. */
static bool worker_reset(const struct mcp_worker *worker) {
  pthread_sigmask(SIG_SETMASK, &worker->mask, NULL);
  if (worker->nice == NICE_UNKNOWN) return true; /* unknown at start: nothing to compare with */
  int nice = own_nice();
  if (nice == worker->nice) return true;
  return setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), worker->nice) == 0 &&
         own_nice() == worker->nice;
}

/* Unlink `worker` from the idle list. Under pool->lock. */
static void idle_remove_locked(struct mcp_workers *pool, struct mcp_worker *worker) {
  for (struct mcp_worker **link = &pool->idle; *link; link = &(*link)->next_idle)
    if (*link == worker) {
      *link = worker->next_idle;
      pool->idle_count--;
      return;
    }
}

static void *worker_main(void *argument) {
  struct mcp_worker *worker = argument;
  struct mcp_workers *pool = worker->pool;
  worker->nice = own_nice();
  pthread_sigmask(SIG_SETMASK, NULL, &worker->mask);
  pthread_mutex_lock(&pool->lock);
  for (;;) {
    void *(*routine)(void *) = worker->routine;
    void *job = worker->argument;
    pthread_mutex_unlock(&pool->lock);
    routine(job);
    bool reset = worker_reset(worker);
    pthread_mutex_lock(&pool->lock);
    worker->routine = NULL;
    worker->argument = NULL;
    pool->running--;
    if (!reset || pool->stopping || pool->idle_count >= pool->idle_max) break;
    worker->next_idle = pool->idle;
    pool->idle = worker;
    pool->idle_count++;
    struct timespec deadline = dome_deadline_on_clock_after_ms(CLOCK_MONOTONIC, pool->idle_timeout_ms);
    while (worker->routine == NULL && !pool->stopping)
      if (pthread_cond_timedwait(&worker->wake, &pool->lock, &deadline) == ETIMEDOUT) break;
    if (worker->routine == NULL) { /* idle too long, or the pool stops */
      idle_remove_locked(pool, worker);
      break;
    }
    /* mcp_workers_start took it off the idle list and counted it running */
  }
  /* under pool->lock: end, and join the worker that ended before this one */
  pool->live--;
  bool join = pool->has_ended;
  pthread_t previous = pool->last_ended;
  pool->last_ended = pthread_self();
  pool->has_ended = true;
  pthread_cond_broadcast(&pool->ended);
  pthread_mutex_unlock(&pool->lock);
  if (join) pthread_join(previous, NULL);
  pthread_cond_destroy(&worker->wake);
  free(worker);
  return NULL;
}

/* A new worker running routine(argument) first. Returns 0 or a positive pthread_create error. */
static int worker_create(struct mcp_workers *pool, void *(*routine)(void *), void *argument,
                         size_t stack_bytes) {
  struct mcp_worker *worker = calloc(1, sizeof *worker);
  if (worker == NULL) return ENOMEM;
  worker->pool = pool;
  worker->stack_bytes = stack_bytes;
  worker->routine = routine;
  worker->argument = argument;
  pthread_condattr_t condattr;
  pthread_condattr_init(&condattr);
  pthread_condattr_setclock(&condattr, CLOCK_MONOTONIC);
  int rc = pthread_cond_init(&worker->wake, &condattr);
  pthread_condattr_destroy(&condattr);
  if (rc != 0) {
    free(worker);
    return rc;
  }
  pthread_attr_t attributes;
  pthread_attr_init(&attributes);
  pthread_attr_setstacksize(&attributes, stack_bytes);
  pthread_t thread;
  rc = pthread_create(&thread, &attributes, worker_main, worker);
  pthread_attr_destroy(&attributes);
  if (rc != 0) {
    pthread_cond_destroy(&worker->wake);
    free(worker);
  }
  return rc;
}

int mcp_workers_start(struct mcp_workers *pool, void *(*routine)(void *), void *argument,
                      size_t stack_bytes) {
  pthread_mutex_lock(&pool->lock);
  if (pool->stopping) {
    pthread_mutex_unlock(&pool->lock);
    return -ESHUTDOWN;
  }
  for (struct mcp_worker *worker = pool->idle; worker; worker = worker->next_idle)
    if (worker->stack_bytes >= stack_bytes) {
      idle_remove_locked(pool, worker);
      worker->routine = routine;
      worker->argument = argument;
      pool->running++;
      pool->reused++;
      pthread_cond_signal(&worker->wake);
      pthread_mutex_unlock(&pool->lock);
      return 0;
    }
  /* none fits: a new worker, created outside the lock (other starts and ending jobs go on meanwhile) */
  pool->live++;
  pool->running++;
  pool->created++;
  size_t stack = stack_bytes > pool->stack_bytes ? stack_bytes : pool->stack_bytes;
  pthread_mutex_unlock(&pool->lock);
  int rc = worker_create(pool, routine, argument, stack);
  if (rc == 0) return 0;
  pthread_mutex_lock(&pool->lock);
  pool->live--;
  pool->running--;
  pool->created--;
  pthread_cond_broadcast(&pool->ended);
  pthread_mutex_unlock(&pool->lock);
  return -rc;
}

void mcp_workers_count(struct mcp_workers *pool, struct mcp_workers_counts *counts) {
  pthread_mutex_lock(&pool->lock);
  *counts = (struct mcp_workers_counts){.live = pool->live,
                                        .idle = pool->idle_count,
                                        .running = pool->running,
                                        .created = pool->created,
                                        .reused = pool->reused};
  pthread_mutex_unlock(&pool->lock);
}

unsigned mcp_workers_stop(struct mcp_workers *pool, unsigned timeout_ms) {
  if (!pool->ready) return 0;
  struct timespec deadline = dome_deadline_after_ms(timeout_ms);
  pthread_mutex_lock(&pool->lock);
  pool->stopping = true;
  for (struct mcp_worker *worker = pool->idle; worker; worker = worker->next_idle)
    pthread_cond_signal(&worker->wake);
  while (pool->live > 0)
    if (pthread_cond_timedwait(&pool->ended, &pool->lock, &deadline) == ETIMEDOUT) break;
  unsigned left = pool->live;
  pthread_mutex_unlock(&pool->lock);
  if (left > 0) return left; /* jobs still run and refer to the pool: it is left as it is */
  /* no worker is left to end: the last one to end joined the one before it, and so on */
  if (pool->has_ended) pthread_join(pool->last_ended, NULL);
  pool->has_ended = false;
  pthread_cond_destroy(&pool->ended);
  pthread_mutex_destroy(&pool->lock);
  pool->ready = false;
  return 0;
}
