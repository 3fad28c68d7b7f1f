/* What a tools/call's thread does once its answer is out (the mcp call_answered handler): the removal of
 * the cgroup leaves of the jails it ran. A jail's leaf outlives its processes by the time its rmdirs take
 * (on a hybrid host four leaves, ~0.2 ms and an RCU grace period); nothing of the answer depends on it,
 * so the call's thread does it after handing its answer to the thread that sends it. The list is the
 * thread's own: a jail run on any other thread (a session's, a task's result) releases its leaf itself. */
#include <stdlib.h>

#include "supervisor/domed/domed.h"
#include "supervisor/jail/jail.h"

#define ANSWERED_TEARDOWNS 8

static _Thread_local struct {
  bool open;
  size_t count;
  struct jail_teardown *teardowns[ANSWERED_TEARDOWNS];
} answered;

static void finish(struct jail_teardown *teardown) {
  dome_error err = {0};
  if (jail_teardown_finish(teardown, &err) < 0)
    domed_log("warn", "jail", "msg=\"jail teardown failed\" error=\"%s\"", err.message);
}

/* jail_config.defer_teardown: kept until domed_after_answer_run; a full list finishes it at once. */
static void defer(void *context, struct jail_teardown *teardown) {
  (void)context;
  if (answered.open && answered.count < ANSWERED_TEARDOWNS)
    answered.teardowns[answered.count++] = teardown;
  else
    finish(teardown);
}

void domed_after_answer_open(void) {
  domed_after_answer_run();
  answered.open = true;
}

void domed_after_answer_defer_jails(struct jail_config *config) {
  if (!answered.open) return;
  config->defer_teardown = defer;
  config->defer_teardown_context = NULL;
}

void domed_after_answer_run(void) {
  answered.open = false;
  for (size_t i = 0; i < answered.count; i++) finish(answered.teardowns[i]);
  answered.count = 0;
}
