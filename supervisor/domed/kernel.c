/* In-kernel enforcement for jails (supervisor/kernel/kernel.h): the cgroup BPF programs are attached to
 * each jail's cgroup2 leaf in the jail's on_cgroup_ready hook, and the kernel's denial events are
 * collected for the execution they belong to (by cgroup id) and recorded as exec.denial events.
 *
 * Rulesets: until the Cedar -> kernel compiler lands, domed installs the baseline's network decision
 * directly: ruleset 0 denies every connect/bind/send (the baseline permits no network), ruleset 1
 * allows them (a capability whose quota says egress allow). A host where the programs cannot be loaded
 * runs without this layer; results say so in `enforcement`. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "supervisor/domed/domed.h"
#include "supervisor/jail/jail.h"
#include "supervisor/kernel/kernel.h"

struct domed_kernel {
  struct dome_kernel *kernel;
  pthread_mutex_t lock; /* the kernel object is used by one thread at a time */
  struct domed_kernel_run *runs;
  pthread_t poller;
  atomic_bool stop;
};

static int install_rulesets(struct dome_kernel *kernel, dome_error *err) {
  struct dome_rule_tables deny_all, allow_all;
  dome_rule_tables_init(&deny_all);
  dome_rule_tables_init(&allow_all);
  int rc = dome_kernel_install_tables(kernel, 0, &deny_all, err);
  uint32_t policy = DOME_NO_POLICY;
  for (int action = 0; rc == 0 && action < DOME_NET_ACTION_COUNT; action++)
    for (int p = 0; rc == 0 && p < 2; p++)
      for (int family = 0; rc == 0 && family < 2; family++) {
        struct dome_net_entry entry = {
            .action = (uint8_t)action,
            .protocol = p == 0 ? DOME_PROTOCOL_TCP : DOME_PROTOCOL_UDP,
            .family = family == 0 ? AF_INET : AF_INET6,
            .prefix_len = 0,
            .port_first = 0,
            .port_last = 65535,
            .decision = DOME_DECISION_ALLOW,
            .policy_index = policy,
        };
        rc = dome_rule_tables_add_net(&allow_all, &entry, err);
      }
  if (rc == 0) rc = dome_kernel_install_tables(kernel, 1, &allow_all, err);
  dome_rule_tables_free(&deny_all);
  dome_rule_tables_free(&allow_all);
  return rc;
}

static void collect(void *context, const struct dome_denial *denial) {
  struct domed_kernel *k = context;
  for (struct domed_kernel_run *run = k->runs; run; run = run->next) {
    if (run->cgroup_id != denial->cgroup_id) continue;
    if (json_array_size(run->denials) >= 256) return; /* bounded: the count still goes to metrics */
    bool network = denial->hook <= DOME_HOOK_EGRESS || denial->hook == DOME_HOOK_SOCKET_CONNECT;
    json_t *entry = json_pack("{s:s,s:s,s:i,s:s}", "hook", dome_hook_name(denial->hook), "object",
                              denial->object, "pid", (int)denial->pid, "action",
                              network ? (denial->net_action == DOME_NET_BIND   ? "net:bind"
                                         : denial->net_action == DOME_NET_SEND ? "net:send"
                                                                               : "net:connect")
                                      : (denial->file_access == DOME_FILE_WRITE  ? "fs:write"
                                         : denial->file_access == DOME_FILE_EXEC ? "fs:exec"
                                                                                 : "fs:read"));
    json_object_set_new(entry, "policy", denial->policy_id ? json_string(denial->policy_id) : json_null());
    json_array_append_new(run->denials, entry);
    run->count++;
    return;
  }
}

static void *poller(void *argument) {
  struct domed_kernel *k = argument;
  while (!atomic_load(&k->stop)) {
    pthread_mutex_lock(&k->lock);
    dome_error err;
    dome_kernel_poll_denials(k->kernel, 0, collect, k, &err);
    pthread_mutex_unlock(&k->lock);
    usleep(50000);
  }
  return NULL;
}

void domed_kernel_init(struct domed *domed) {
  enum dome_enforcement_level level = dome_kernel_probe_level();
  if (level == DOME_LEVEL_NONE) {
    domed_log("warn", "kernel",
              "msg=\"no cgroup BPF on this host: network rules rely on the jail's empty netns\"");
    return;
  }
  struct domed_kernel *k = calloc(1, sizeof *k);
  struct dome_kernel_options options = {.level = level};
  dome_error err = {0};
  int rc = dome_kernel_open(&k->kernel, &options, &err);
  if (rc < 0 && level == DOME_LEVEL_FULL) {
    options.level = DOME_LEVEL_REDUCED;
    rc = dome_kernel_open(&k->kernel, &options, &err);
  }
  if (rc == 0) rc = install_rulesets(k->kernel, &err);
  if (rc < 0) {
    domed_log("warn", "kernel", "msg=\"kernel enforcement unavailable: %s\"", err.message);
    dome_kernel_close(k->kernel);
    free(k);
    return;
  }
  pthread_mutex_init(&k->lock, NULL);
  pthread_create(&k->poller, NULL, poller, k);
  domed->kernel = k;
  domed_log("info", "kernel", "level=%s", dome_enforcement_level_name(dome_kernel_level(k->kernel)));
}

void domed_kernel_cleanup(struct domed *domed) {
  struct domed_kernel *k = domed->kernel;
  if (k == NULL) return;
  atomic_store(&k->stop, true);
  pthread_join(k->poller, NULL);
  dome_kernel_close(k->kernel);
  pthread_mutex_destroy(&k->lock);
  free(k);
  domed->kernel = NULL;
}

int domed_kernel_attach(struct domed *domed, struct domed_kernel_run *run, const struct jail_cgroup *leaf,
                        bool egress, dome_error *err) {
  struct domed_kernel *k = domed->kernel;
  if (k == NULL) return 0;
  struct dome_kernel_jail jail = {.cgroup_fd = leaf->fd, .cgroup_id = leaf->id, .ruleset = egress ? 1 : 0};
  pthread_mutex_lock(&k->lock);
  int rc = dome_kernel_attach(k->kernel, &jail, (struct dome_kernel_attachment **)&run->attachment, err);
  if (rc == 0) {
    run->cgroup_id = leaf->id;
    if (run->denials == NULL) run->denials = json_array();
    run->next = k->runs;
    k->runs = run;
  }
  pthread_mutex_unlock(&k->lock);
  if (rc < 0) return dome_error_wrap(err, "kernel enforcement for `%s`", leaf->path);
  return 0;
}

void domed_kernel_finish(struct domed *domed, struct domed_kernel_run *run) {
  struct domed_kernel *k = domed->kernel;
  if (k == NULL || run->attachment == NULL) return;
  pthread_mutex_lock(&k->lock);
  dome_error err;
  dome_kernel_poll_denials(k->kernel, 0, collect, k, &err); /* everything the jail's hooks emitted */
  for (struct domed_kernel_run **link = &k->runs; *link; link = &(*link)->next)
    if (*link == run) {
      *link = run->next;
      break;
    }
  dome_kernel_detach(k->kernel, run->attachment);
  run->attachment = NULL;
  pthread_mutex_unlock(&k->lock);
}
