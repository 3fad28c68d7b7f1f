/* Private state of the loader (supervisor/kernel/): shared by loader.c and events.c only. */
#ifndef DOME_KERNEL_LOADER_H
#define DOME_KERNEL_LOADER_H

#include "supervisor/kernel/kernel.h"

struct dome_bpf;
struct bpf_link;
struct ring_buffer;

#define DOME_KERNEL_LSM_PROGRAMS 19
#define DOME_KERNEL_CGROUP_PROGRAMS 8

struct dome_kernel_attachment {
  uint64_t cgroup_id;
  uint32_t slot; /* index in the jails map */
  struct bpf_link *links[DOME_KERNEL_CGROUP_PROGRAMS];
  struct dome_kernel_attachment *next;
};

/* Tables installed for one ruleset: the current generation, and the previous one kept so that late
 * events of the old generation still name their policy; the same for the shadow tables. */
struct dome_kernel_ruleset {
  uint32_t generation; /* 0: not installed */
  struct dome_rule_tables current;
  uint32_t previous_generation;
  struct dome_rule_tables previous;
  uint32_t shadow_generation; /* 0: no shadow tables */
  struct dome_rule_tables shadow;
  uint32_t previous_shadow_generation;
  struct dome_rule_tables previous_shadow;
};

struct dome_kernel {
  enum dome_enforcement_level level;
  struct dome_bpf *skel;
  struct bpf_link *lsm_links[DOME_KERNEL_LSM_PROGRAMS];
  struct dome_kernel_attachment *attachments;
  struct dome_kernel_attachment *prelinked; /* links without a jail-map slot yet (dome_kernel_prelink) */
  uint32_t last_generation;
  struct dome_kernel_ruleset rulesets[DOME_KERNEL_MAX_RULESETS];
  /* events.c */
  struct ring_buffer *ring;
  dome_denial_fn denial_fn;
  void *denial_context;
  unsigned delivered;
  struct dome_denial *denial; /* scratch (large: DOME_PATH_MAX object) */
};

/* aliases.c: hard-linked files of DENY subtrees (device+inode) and "deny beneath" markers of generation.
 * Returns 0, -E2BIG (a deny subtree too large to scan) or -errno of a map update. */
int dome_kernel_install_aliases(struct dome_kernel *kernel, const struct dome_rule_tables *tables,
                                uint32_t generation, dome_error *err);

int dome_kernel_events_open(struct dome_kernel *kernel, dome_error *err);
void dome_kernel_events_close(struct dome_kernel *kernel);

#endif
