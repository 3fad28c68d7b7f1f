/* The fair queue of executions: at most max_jails jails run, at most `concurrency` (the capability
 * quota) of them for one agent, and a freed slot goes to the waiting agent with the fewest executions
 * running; among equals, round-robin in the order the agents joined the line (an agent joins at its
 * back when its first call starts to wait, and goes back there each time one of its calls is served),
 * so an agent at its limit delays another agent's call by at most one running execution, and waiting
 * agents are served first come, first served.
 * Each agent waits in its own FIFO of at most max_queue_per_agent calls (max_queue in all); a call
 * leaves the queue when its client cancels it or goes away, when domed stops, or after
 * queue_timeout_s.
 *
 * Invariant (under slots_lock, between calls): either every slot is taken or no waiting call could
 * run (its agent is at its limit), because every change that frees a slot or raises a limit
 * dispatches. So a call that finds a free slot and its agent under its limit runs at once without
 * passing anyone. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "supervisor/common/deadline.h"
#include "supervisor/domed/domed.h"

#define QUEUE_CANCEL_POLL_MS 200 /* how often a waiting call looks whether it was cancelled */

struct queue_waiter {
  pthread_cond_t cond;
  bool granted;
  struct queue_waiter *next;
};

struct queue_agent {
  char name[256];
  unsigned running, waiting, limit;
  uint64_t place; /* its place in the line while it has a call waiting: lower is served first */
  struct queue_waiter *head, *tail;
  struct queue_agent *next;
};

/* Agents with a call running or waiting; next_place numbers the back of the line. */
static struct queue_agent *agents;
static uint64_t next_place;

static struct queue_agent *agent_find_locked(const char *name) {
  for (struct queue_agent *agent = agents; agent; agent = agent->next)
    if (strcmp(agent->name, name) == 0) return agent;
  return NULL;
}

static void agent_forget_if_idle_locked(struct queue_agent *agent) {
  if (agent->running || agent->waiting) return;
  for (struct queue_agent **link = &agents; *link; link = &(*link)->next)
    if (*link == agent) {
      *link = agent->next;
      break;
    }
  free(agent);
}

/* Hand free slots to waiting calls, one agent after the other. Under slots_lock. */
static void dispatch_locked(struct domed *domed) {
  while (domed->jails_running < domed->config.max_jails) {
    /* the eligible agent with the fewest running, the earliest in the line among equals */
    struct queue_agent *chosen = NULL;
    for (struct queue_agent *agent = agents; agent; agent = agent->next)
      if (agent->head && agent->running < agent->limit &&
          (chosen == NULL || agent->running < chosen->running ||
           (agent->running == chosen->running && agent->place < chosen->place)))
        chosen = agent;
    if (chosen == NULL) return;
    struct queue_waiter *waiter = chosen->head;
    chosen->head = waiter->next;
    if (chosen->head == NULL) chosen->tail = NULL;
    if (chosen->waiting-- >= domed->config.max_queue_per_agent)
      pthread_cond_broadcast(&domed->slots_cond); /* room in chosen's full queue: domed_slot_wait_room */
    domed->jails_waiting--;
    chosen->running++;
    domed->jails_running++;
    waiter->granted = true;
    pthread_cond_signal(&waiter->cond);
    chosen->place = ++next_place; /* to the back of the line with its further calls */
  }
}

static void waiter_remove_locked(struct queue_agent *agent, struct queue_waiter *waiter) {
  struct queue_waiter *previous = NULL;
  for (struct queue_waiter *w = agent->head; w; previous = w, w = w->next) {
    if (w != waiter) continue;
    if (previous)
      previous->next = w->next;
    else
      agent->head = w->next;
    if (agent->tail == w) agent->tail = previous;
    return;
  }
}

int domed_slot_acquire(struct domed *domed, const char *agent_name, unsigned concurrency, mcp_call *call,
                       dome_error *err) {
  pthread_mutex_lock(&domed->slots_lock);
  struct queue_agent *agent = agent_find_locked(agent_name);
  if (agent == NULL) {
    agent = calloc(1, sizeof *agent);
    if (agent == NULL) {
      pthread_mutex_unlock(&domed->slots_lock);
      return dome_error_set(err, ENOMEM, "allocate the queue of agent `%s`", agent_name);
    }
    snprintf(agent->name, sizeof agent->name, "%s", agent_name);
    agent->next = agents;
    agents = agent;
  }
  unsigned limit =
      concurrency && concurrency < domed->config.max_jails ? concurrency : domed->config.max_jails;
  bool raised = limit > agent->limit;
  agent->limit = limit;
  if (raised) dispatch_locked(domed);
  if (agent->head == NULL && agent->running < agent->limit &&
      domed->jails_running < domed->config.max_jails) {
    agent->running++;
    domed->jails_running++;
    pthread_mutex_unlock(&domed->slots_lock);
    return 0;
  }
  int rc = 0;
  if (agent->waiting >= domed->config.max_queue_per_agent)
    rc = dome_error_set(err, EBUSY, "server overloaded: agent `%s` has %u executions running and %u queued",
                        agent_name, agent->running, agent->waiting);
  else if (domed->jails_waiting >= domed->config.max_queue)
    rc = dome_error_set(err, EBUSY, "server overloaded: %u executions running and %u queued",
                        domed->jails_running, domed->jails_waiting);
  if (rc < 0) {
    agent_forget_if_idle_locked(agent);
    pthread_mutex_unlock(&domed->slots_lock);
    return rc;
  }
  if (call) {
    char text[200];
    snprintf(text, sizeof text, "queued: waiting for a jail (%u of this agent's %u running, %u of %u in all)",
             agent->running, agent->limit, domed->jails_running, domed->config.max_jails);
    mcp_call_log(call, "info", "dome", text);
  }
  struct queue_waiter waiter = {.granted = false};
  pthread_condattr_t attributes;
  pthread_condattr_init(&attributes);
  pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC);
  pthread_cond_init(&waiter.cond, &attributes);
  pthread_condattr_destroy(&attributes);
  if (agent->tail) {
    agent->tail->next = &waiter;
  } else {
    agent->head = &waiter;
    agent->place = ++next_place; /* its first waiting call: it joins the back of the line */
  }
  agent->tail = &waiter;
  agent->waiting++;
  domed->jails_waiting++;
  atomic_fetch_add(&domed->metrics.queued, 1);
  struct timespec deadline;
  clock_gettime(CLOCK_MONOTONIC, &deadline);
  deadline.tv_sec += domed->config.queue_timeout_s;
  while (!waiter.granted) {
    if (mcp_call_cancelled(call) || atomic_load(&domed->stopping)) {
      rc = dome_error_set(err, ECANCELED, "cancelled while queued");
      break;
    }
    struct timespec step;
    clock_gettime(CLOCK_MONOTONIC, &step);
    if (step.tv_sec > deadline.tv_sec ||
        (step.tv_sec == deadline.tv_sec && step.tv_nsec >= deadline.tv_nsec)) {
      rc = dome_error_set(err, EBUSY, "server overloaded: no execution slot within %u s",
                          domed->config.queue_timeout_s);
      break;
    }
    step.tv_nsec += QUEUE_CANCEL_POLL_MS * 1000000L;
    if (step.tv_nsec >= 1000000000L) {
      step.tv_sec++;
      step.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(&waiter.cond, &domed->slots_lock, &step);
  }
  if (!waiter.granted) {
    waiter_remove_locked(agent, &waiter);
    if (agent->waiting-- >= domed->config.max_queue_per_agent) pthread_cond_broadcast(&domed->slots_cond);
    domed->jails_waiting--;
    agent_forget_if_idle_locked(agent);
  } else {
    rc = 0; /* granted while it was being cancelled: it runs, and the jail sees the cancellation */
  }
  atomic_fetch_sub(&domed->metrics.queued, 1);
  pthread_mutex_unlock(&domed->slots_lock);
  pthread_cond_destroy(&waiter.cond);
  return rc;
}

static bool queue_full_locked(struct domed *domed, const char *agent_name, unsigned *running,
                              unsigned *waiting) {
  struct queue_agent *agent = agent_find_locked(agent_name);
  *running = agent ? agent->running : 0;
  *waiting = agent ? agent->waiting : 0;
  return agent && agent->waiting >= domed->config.max_queue_per_agent;
}

bool domed_slot_wait_room(struct domed *domed, const char *agent_name, unsigned wait_ms, unsigned *running,
                          unsigned *waiting) {
  struct timespec deadline = dome_deadline_after_ms(wait_ms);
  pthread_mutex_lock(&domed->slots_lock);
  bool full;
  while ((full = queue_full_locked(domed, agent_name, running, waiting)) && !atomic_load(&domed->stopping))
    if (pthread_cond_timedwait(&domed->slots_cond, &domed->slots_lock, &deadline) == ETIMEDOUT) {
      full = queue_full_locked(domed, agent_name, running, waiting);
      break;
    }
  pthread_mutex_unlock(&domed->slots_lock);
  return !full;
}

void domed_slot_release(struct domed *domed, const char *agent_name) {
  pthread_mutex_lock(&domed->slots_lock);
  struct queue_agent *agent = agent_find_locked(agent_name);
  if (agent && agent->running > 0) {
    agent->running--;
    domed->jails_running--;
    dispatch_locked(domed);
    agent_forget_if_idle_locked(agent);
  }
  pthread_mutex_unlock(&domed->slots_lock);
}

void domed_slots_changed(struct domed *domed) {
  pthread_mutex_lock(&domed->slots_lock);
  dispatch_locked(domed);
  pthread_mutex_unlock(&domed->slots_lock);
}
