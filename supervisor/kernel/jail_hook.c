/* The jail's on_cgroup_ready hook: attach the kernel programs to the jail's cgroup2 leaf. */
#include "supervisor/jail/jail.h"
#include "supervisor/kernel/kernel.h"

int dome_kernel_on_cgroup_ready(void *context, const struct jail_cgroup *leaf, dome_error *err) {
  struct dome_kernel_jail_hook *hook = context;
  struct dome_kernel_jail jail = {.cgroup_fd = leaf->fd,
                                  .cgroup_id = leaf->id,
                                  .ruleset = hook->ruleset,
                                  .families = hook->families,
                                  .allow_raw_sockets = hook->allow_raw_sockets,
                                  .egress_quota_bytes = hook->egress_quota_bytes};
  int r = dome_kernel_attach(hook->kernel, &jail, &hook->attachment, err);
  if (r < 0) return dome_error_wrap(err, "kernel enforcement for cgroup `%s`", leaf->path);
  return 0;
}
