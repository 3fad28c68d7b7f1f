/* dome-kernel-probe: scenario runner for the kernel-enforcement suites (host reduced level and VM full
 * level). Each scenario creates its own cgroup2 leaf beneath the caller's cgroup, forks a child into it,
 * checks syscalls' outcomes and the denial events, and removes everything it made. */
#ifndef DOME_TESTS_KERNEL_PROBE_H
#define DOME_TESTS_KERNEL_PROBE_H

#include <stdbool.h>
#include <stdint.h>

#include "supervisor/kernel/kernel.h"

struct probe_counts {
  unsigned passed, failed;
};
extern struct probe_counts *probe_counts; /* shared memory: children count too */

/* Record one check: prints "ok NAME" or "not ok NAME: detail". Returns cond. */
bool probe_check(bool cond, const char *name, const char *format, ...) __attribute__((format(printf, 3, 4)));

/* A cgroup2 leaf created beneath our own cgroup. */
struct probe_leaf {
  char path[512];
  int fd;
  uint64_t id;
};
int probe_leaf_create(struct probe_leaf *leaf, const char *name);
void probe_leaf_remove(struct probe_leaf *leaf);
/* Move the calling process into the leaf. Returns 0 or -errno. */
int probe_leaf_enter(const struct probe_leaf *leaf);

/* Parse tables from JSON text (aborts the scenario on error). */
int probe_tables(struct dome_rule_tables *tables, const char *json);

/* Collected events (denials and shadow differences) of the last probe_collect() call. */
struct probe_denial {
  enum dome_event_kind kind;
  bool allowed, shadow_allowed; /* DOME_EVENT_SHADOW */
  char shadow_policy[64];
  enum dome_hook hook;
  char object[512];
  long entry;
  char policy[64];
  uint64_t cgroup_id;
};
#define PROBE_MAX_DENIALS 64
extern struct probe_denial probe_denials[PROBE_MAX_DENIALS];
extern unsigned probe_denial_count;
/* Drain the ring buffer (waiting up to timeout_ms for the first event). */
void probe_collect(struct dome_kernel *kernel, int timeout_ms);
/* Is there a collected denial with this hook and object (and policy, when not NULL)? */
bool probe_has_denial(enum dome_hook hook, const char *object, const char *policy);
/* Collected events of this kind. */
unsigned probe_kind_count(enum dome_event_kind kind);

/* Run fn in a child inside leaf; the child's exit status is returned (or -1). */
int probe_in_leaf(const struct probe_leaf *leaf, int (*fn)(void *), void *arg);

int probe_scenario_net(enum dome_enforcement_level level);
int probe_scenario_landlock(void);
int probe_scenario_files(void);
int probe_scenario_bench(void);
int probe_scenario_bench_shadow(void);
int probe_scenario_property(enum dome_enforcement_level level);
int probe_scenario_shadow(enum dome_enforcement_level level);

#endif
