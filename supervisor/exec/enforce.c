/* The request's compiled decision tables for one run: file entries as Landlock path rules, the tables in
 * cgroup BPF programs attached to the jail's leaf only (never to anything else), egress through
 * supervisor/net when they permit more than loopback, and the kernel's denials collected while the
 * program runs. The programs, maps and egress path live for this run only. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "policy/compile/compile.h"
#include "supervisor/exec/exec_internal.h"

static uint64_t monotonic_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static unsigned jail_access_of(uint8_t access) {
  return access == DOME_FILE_READ    ? JAIL_ACCESS_READ
         : access == DOME_FILE_WRITE ? JAIL_ACCESS_WRITE
                                     : JAIL_ACCESS_EXEC;
}

static bool beneath(const char *ancestor, const char *path) {
  if (strcmp(ancestor, "/") == 0) return true;
  size_t n = strlen(ancestor);
  return strncmp(ancestor, path, n) == 0 && (path[n] == 0 || path[n] == '/');
}

/* Deny entries of a forbid that lie inside an allowed subtree of the same access: what Landlock drops. */
static unsigned count_inexpressible(const struct dome_rule_tables *t) {
  unsigned count = 0;
  for (size_t i = 0; i < t->file_count; i++) {
    const struct dome_file_entry *d = &t->files[i];
    if (d->decision != DOME_DECISION_DENY) continue;
    for (size_t k = 0; k < t->file_count; k++) {
      const struct dome_file_entry *a = &t->files[k];
      if (a->decision == DOME_DECISION_ALLOW && a->match == DOME_MATCH_SUBTREE && a->access == d->access &&
          beneath(a->path, d->path)) {
        count++;
        break;
      }
    }
  }
  return count;
}

/* Landlock path rules from the ALLOW file entries, merged per (path, exact). */
static int build_path_rules(struct exec_enforcement *e, dome_error *err) {
  const struct dome_rule_tables *t = e->tables;
  e->path_rules = calloc(t->file_count + 1, sizeof *e->path_rules);
  if (e->path_rules == NULL) return dome_error_set(err, ENOMEM, "Landlock path rules");
  for (size_t i = 0; i < t->file_count; i++) {
    const struct dome_file_entry *entry = &t->files[i];
    if (entry->decision != DOME_DECISION_ALLOW) continue;
    bool exact = entry->match == DOME_MATCH_EXACT;
    struct jail_path_rule *rule = NULL;
    for (size_t k = 0; k < e->path_rule_count && rule == NULL; k++)
      if (strcmp(e->path_rules[k].path, entry->path) == 0 && e->path_rules[k].exact == exact)
        rule = &e->path_rules[k];
    if (rule == NULL) {
      if (e->path_rule_count >= JAIL_MAX_PATH_RULES)
        return dome_error_set(err, E2BIG, "rules: more than %u allowed paths for Landlock",
                              JAIL_MAX_PATH_RULES);
      rule = &e->path_rules[e->path_rule_count++];
      *rule = (struct jail_path_rule){.path = entry->path, .optional = true, .exact = exact};
    }
    rule->access |= jail_access_of(entry->access);
  }
  return 0;
}

json_t *exec_denial_json(const struct dome_denial *denial, uint64_t start_ns) {
  bool network = (denial->hook >= DOME_HOOK_CONNECT4 && denial->hook <= DOME_HOOK_BIND6) ||
                 denial->hook == DOME_HOOK_SOCKET_CONNECT;
  bool file = denial->hook == DOME_HOOK_FILE_OPEN || denial->hook == DOME_HOOK_FILE_PERMISSION ||
              denial->hook == DOME_HOOK_BPRM_CHECK;
  uint64_t offset_ms = denial->time_ns > start_ns ? (denial->time_ns - start_ns) / 1000000u : 0;
  json_t *o = json_pack("{s:s,s:s,s:I,s:I}", "hook", dome_hook_name(denial->hook), "object", denial->object,
                        "pid", (json_int_t)denial->pid, "offset_ms", (json_int_t)offset_ms);
  if (o == NULL) return NULL;
  const char *action = network ? (denial->net_action == DOME_NET_BIND   ? "net:bind"
                                  : denial->net_action == DOME_NET_SEND ? "net:send"
                                                                        : "net:connect")
                       : file  ? (denial->file_access == DOME_FILE_WRITE  ? "fs:write"
                                  : denial->file_access == DOME_FILE_EXEC ? "fs:exec"
                                                                          : "fs:read")
                               : NULL;
  if (action) json_object_set_new(o, "action", json_string(action));
  if (denial->policy_id) json_object_set_new(o, "policy_id", json_string(denial->policy_id));
  return o;
}

static void collect(void *context, const struct dome_denial *denial) {
  struct exec_enforcement *e = context;
  if (denial->cgroup_id != e->cgroup_id) return;
  e->denial_count++;
  if (json_array_size(e->denials) >= EXEC_DENIALS_KEPT) return;
  json_t *o = exec_denial_json(denial, e->start_ns);
  if (o) json_array_append_new(e->denials, o);
}

static void *poll_denials(void *context) {
  struct exec_enforcement *e = context;
  dome_error err;
  for (;;) {
    struct pollfd fds[2] = {{.fd = dome_kernel_denial_fd(e->kernel), .events = POLLIN},
                            {.fd = e->stop_fd, .events = POLLIN}};
    if (poll(fds, 2, 1000) < 0 && errno != EINTR) break;
    if (fds[0].revents & POLLIN) dome_kernel_poll_denials(e->kernel, 0, collect, e, &err);
    if (fds[1].revents & POLLIN) break;
  }
  return NULL;
}

int exec_enforcement_prepare(struct exec_enforcement *e, const struct exec_request *request,
                             struct jail_config *config, dome_error *err) {
  memset(e, 0, sizeof *e);
  e->stop_fd = -1;
  e->tables = request->tables;
  if (e->tables == NULL) return 0;
  if ((e->denials = json_array()) == NULL) return dome_error_set(err, ENOMEM, "kernel denials");
  e->level = dome_kernel_probe_level();
  if (e->level == DOME_LEVEL_NONE)
    return dome_error_set(
        err, ENOTSUP,
        "rules: this host cannot load cgroup BPF programs (no cgroup2 or BPF): network rules "
        "cannot be enforced (see dome doctor)");
  if (e->level == DOME_LEVEL_REDUCED && dome_landlock_check_tables(e->tables, err) < 0) {
    if (!request->allow_degraded)
      return dome_error_wrap(err, "rules: reduced enforcement level (no BPF-LSM)");
    e->degraded = true;
    snprintf(e->degraded_reason, sizeof e->degraded_reason, "%s", err->message);
    e->degraded_entries = count_inexpressible(e->tables);
  }
  int rc = build_path_rules(e, err);
  if (rc < 0) return rc;
  config->path_rules = e->path_rules;
  config->path_rule_count = e->path_rule_count;
  if (dome_net_resolv_conf_for_entries(e->tables->net, e->tables->net_count, e->resolv_conf,
                                       sizeof e->resolv_conf, &e->has_resolver, err) < 0)
    return dome_error_wrap(err, "rules: resolv.conf");
  config->resolv_conf = e->resolv_conf;
  config->hosts_dns = e->has_resolver;
  struct dome_kernel_options kernel_options = {.level = e->level};
  if ((rc = dome_kernel_open(&e->kernel, &kernel_options, err)) < 0)
    return dome_error_wrap(err, "load the kernel programs");
  if ((rc = dome_kernel_install_tables(e->kernel, 0, e->tables, err)) < 0)
    return dome_error_wrap(err, "install the decision tables");
  e->kernel_hook = (struct dome_kernel_jail_hook){.kernel = e->kernel, .ruleset = 0};
  e->egress = dome_compile_needs_egress(e->tables);
  if (e->egress) {
    struct dome_net_config net_config = {0};
    if (request->net) net_config = *request->net;
    /* dome_net_open creates its state directory but not /run/dome itself (domed's runtime directory) */
    if (mkdir("/run/dome", 0700) < 0 && errno != EEXIST)
      return dome_error_set_errno(err, errno, "create `/run/dome`");
    if ((rc = dome_net_open(&net_config, &e->net, err)) < 0)
      return dome_error_wrap(err, "egress for the permitted network");
    e->net_hook =
        (struct dome_net_hook){.net = e->net, .entries = e->tables->net, .count = e->tables->net_count};
  }
  e->stop_fd = eventfd(0, EFD_CLOEXEC);
  if (e->stop_fd < 0) return dome_error_set_errno(err, errno, "eventfd");
  return 0;
}

int exec_enforcement_attach(struct exec_enforcement *e, const struct jail_cgroup *leaf, dome_error *err) {
  if (e->kernel == NULL) return 0;
  int rc = dome_kernel_on_cgroup_ready(&e->kernel_hook, leaf, err);
  if (rc < 0) return rc;
  e->cgroup_id = leaf->id;
  e->start_ns = monotonic_ns();
  /* from here until exec_enforcement_finish only the poller uses the kernel object */
  pthread_t thread;
  if (pthread_create(&thread, NULL, poll_denials, e) != 0)
    return dome_error_set(err, EAGAIN, "start the denial collector");
  e->poller = (unsigned long)thread;
  e->poller_running = true;
  return 0;
}

int exec_enforcement_namespaces_ready(struct exec_enforcement *e, pid_t child_pid, dome_error *err) {
  if (!e->egress) return 0;
  return dome_net_on_namespaces_ready(&e->net_hook, child_pid, err);
}

void exec_enforcement_finish(struct exec_enforcement *e, struct exec_kernel_report *report) {
  if (e->poller_running) {
    uint64_t one = 1;
    if (write(e->stop_fd, &one, sizeof one) < 0) { /* the poller also wakes every second */
    }
    pthread_join((pthread_t)e->poller, NULL);
    e->poller_running = false;
  }
  dome_error err;
  if (e->kernel) {
    /* the hooks run synchronously in the refused task: everything is in the ring buffer already */
    while (dome_kernel_poll_denials(e->kernel, 0, collect, e, &err) > 0) {
    }
    if (e->kernel_hook.attachment) dome_kernel_detach(e->kernel, e->kernel_hook.attachment);
    e->kernel_hook.attachment = NULL;
  }
  if (e->net && e->net_hook.jail) dome_net_jail_teardown(e->net, e->net_hook.jail, &err);
  e->net_hook.jail = NULL;
  if (report) {
    *report = (struct exec_kernel_report){
        .level = e->kernel ? dome_enforcement_level_name(e->level) : "none",
        .ruleset = 0,
        .reason = "policy",
        .denials = e->denials ? json_incref(e->denials) : json_array(),
        .count = e->denial_count,
    };
  }
}

void exec_enforcement_release(struct exec_enforcement *e) {
  exec_enforcement_finish(e, NULL);
  dome_kernel_close(e->kernel);
  e->kernel = NULL;
  dome_net_close(e->net);
  e->net = NULL;
  if (e->stop_fd >= 0) close(e->stop_fd);
  e->stop_fd = -1;
  free(e->path_rules);
  e->path_rules = NULL;
  json_decref(e->denials);
  e->denials = NULL;
}
