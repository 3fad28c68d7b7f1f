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

static void collect(void *context, const struct dome_denial *denial) {
  struct exec_enforcement *e = context;
  if (denial->cgroup_id != e->cgroup_id) return;
  if (denial->kind == DOME_EVENT_SHADOW) {
    if (e->shadows == NULL) return; /* no shadow tables of this run */
    e->shadow_count++;
    if (json_array_size(e->shadows) >= DOME_KERNEL_DENIALS_KEPT) return;
    json_t *o = dome_denial_shadow_to_json(denial, e->start_ns);
    if (o) json_array_append_new(e->shadows, o);
    return;
  }
  e->denial_count++;
  if (json_array_size(e->denials) >= DOME_KERNEL_DENIALS_KEPT) return;
  json_t *o = dome_denial_to_json(denial, e->start_ns);
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
    e->degraded_entries = dome_landlock_inexpressible_count(e->tables);
  }
  int rc = dome_landlock_path_rules_from_tables(e->tables, &e->path_rules, err);
  if (rc < 0) return dome_error_wrap(err, "rules");
  config->path_rules = e->path_rules.rules;
  config->path_rule_count = e->path_rules.count;
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
  if (request->shadow_tables) {
    if ((e->shadows = json_array()) == NULL) return dome_error_set(err, ENOMEM, "kernel shadow differences");
    if ((rc = dome_kernel_install_shadow_tables(e->kernel, 0, request->shadow_tables, err)) < 0)
      return dome_error_wrap(err, "install the shadow decision tables");
  }
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
        .shadows = e->shadows ? json_incref(e->shadows) : NULL,
        .shadow_count = e->shadow_count,
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
  dome_landlock_path_rules_free(&e->path_rules);
  json_decref(e->denials);
  e->denials = NULL;
  json_decref(e->shadows);
  e->shadows = NULL;
}
