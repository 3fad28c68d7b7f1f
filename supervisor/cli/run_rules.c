/* `dome run --rules FILE --agent NAME`: compile, enforce, collect denials (see run_rules.h). */
#include "supervisor/cli/run_rules.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "policy/compile/compile.h"

/* ---- denials ---- */

static void collect(void *context, const struct dome_denial *denial) {
  struct run_rules *rules = context;
  if (denial->cgroup_id != rules->cgroup_id) return;
  rules->denial_count++;
  if (json_array_size(rules->denials) >= DOME_KERNEL_DENIALS_KEPT) return;
  json_t *entry = dome_denial_to_json(denial, rules->start_ns);
  if (entry) json_array_append_new(rules->denials, entry);
}

static void *poll_denials(void *context) {
  struct run_rules *rules = context;
  dome_error err;
  for (;;) {
    struct pollfd fds[2] = {{.fd = dome_kernel_denial_fd(rules->kernel), .events = POLLIN},
                            {.fd = rules->stop_fd, .events = POLLIN}};
    if (poll(fds, 2, 1000) < 0 && errno != EINTR) break;
    if (fds[0].revents & POLLIN) dome_kernel_poll_denials(rules->kernel, 0, collect, rules, &err);
    if (fds[1].revents & POLLIN) break;
  }
  return NULL;
}

/* ---- jail hooks (each adapter takes its own context) ---- */

static int on_cgroup_ready(void *context, const struct jail_cgroup *leaf, dome_error *err) {
  struct run_rules *rules = context;
  int r = dome_kernel_on_cgroup_ready(&rules->kernel_hook, leaf, err);
  if (r < 0) return r;
  rules->cgroup_id = leaf->id;
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  rules->start_ns = (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
  /* from here until run_rules_finish only the poller uses the kernel object */
  pthread_t thread;
  if (pthread_create(&thread, NULL, poll_denials, rules) != 0)
    return dome_error_set(err, EAGAIN, "start the denial collector");
  rules->poller = (unsigned long)thread;
  rules->poller_running = true;
  return 0;
}

/* The egress mode of `dome run --rules` (domed has its own keys): DOME_NET_MODE (auto, user, routed, ipvlan,
 * macvlan; default auto) and, for ipvlan/macvlan, DOME_NET_UPLINK (interface), DOME_NET_UPLINK_POOL
 * (A.B.C.D/LEN) and DOME_NET_UPLINK_GATEWAY (A.B.C.D, optional) — docs/networking.md. */
static int net_config_from_environment(struct dome_net_config *config, dome_error *err) {
  const char *mode = getenv("DOME_NET_MODE");
  if (mode && mode[0] && dome_net_mode_parse(mode, &config->mode) < 0)
    return dome_error_set(err, EINVAL,
                          "DOME_NET_MODE: expected auto, user, routed, ipvlan or macvlan, got `%s`", mode);
  config->uplink = getenv("DOME_NET_UPLINK");
  const char *pool = getenv("DOME_NET_UPLINK_POOL"), *gateway = getenv("DOME_NET_UPLINK_GATEWAY");
  dome_error parse_err = {0};
  if (pool && pool[0] && dome_net_prefix_parse(pool, &config->uplink_pool, &parse_err) < 0)
    return dome_error_set(err, EINVAL, "DOME_NET_UPLINK_POOL: %s", parse_err.message);
  struct dome_net_prefix address = {0};
  if (gateway && gateway[0] &&
      (dome_net_prefix_parse(gateway, &address, &parse_err) < 0 || strchr(gateway, '/') != NULL))
    return dome_error_set(err, EINVAL, "DOME_NET_UPLINK_GATEWAY: expected A.B.C.D, got `%s`", gateway);
  config->uplink_gateway = address.address;
  return 0;
}

static int on_namespaces_ready(void *context, pid_t child_pid, dome_error *err) {
  struct run_rules *rules = context;
  if (!rules->egress) return 0;
  return dome_net_on_namespaces_ready(&rules->net_hook, child_pid, err);
}

int run_rules_prepare(struct run_rules *rules, const struct run_rules_options *options,
                      struct jail_config *config, dome_error *err) {
  memset(rules, 0, sizeof *rules);
  rules->stop_fd = -1;
  dome_rule_tables_init(&rules->tables);
  rules->denials = json_array();
  struct dome_compile_options compile = {.agent = options->agent};
  int r = dome_compile_files(options->rules_path, options->entities_path, &compile, &rules->tables, err);
  if (r < 0) return dome_error_wrap(err, "--rules");

  rules->level = dome_kernel_probe_level();
  if (rules->level == DOME_LEVEL_NONE)
    return dome_error_set(
        err, ENOTSUP,
        "--rules: this host cannot load cgroup BPF programs (no cgroup2 or BPF): network rules "
        "cannot be enforced (see dome doctor)");
  if (rules->level == DOME_LEVEL_REDUCED && dome_landlock_check_tables(&rules->tables, err) < 0) {
    if (!options->allow_degraded)
      return dome_error_wrap(err, "--rules: reduced enforcement level (no BPF-LSM)");
    snprintf(rules->degraded_reason, sizeof rules->degraded_reason, "%s", err->message);
    rules->degraded_entries = dome_landlock_inexpressible_count(&rules->tables);
  }
  if ((r = dome_landlock_path_rules_from_tables(&rules->tables, &rules->path_rules, err)) < 0)
    return dome_error_wrap(err, "--rules");
  config->path_rules = rules->path_rules.rules;
  config->path_rule_count = rules->path_rules.count;

  int n = dome_net_resolv_conf_for_entries(rules->tables.net, rules->tables.net_count, rules->resolv_conf,
                                           sizeof rules->resolv_conf, &rules->has_resolver, err);
  if (n < 0) return dome_error_wrap(err, "--rules: resolv.conf");
  config->resolv_conf = rules->resolv_conf;
  config->hosts_dns = rules->has_resolver;

  struct dome_kernel_options kernel_options = {.level = rules->level};
  if ((r = dome_kernel_open(&rules->kernel, &kernel_options, err)) < 0)
    return dome_error_wrap(err, "load the kernel programs");
  if ((r = dome_kernel_install_tables(rules->kernel, 0, &rules->tables, err)) < 0)
    return dome_error_wrap(err, "install the decision tables");
  rules->kernel_hook = (struct dome_kernel_jail_hook){.kernel = rules->kernel, .ruleset = 0};

  rules->egress = dome_compile_needs_egress(&rules->tables);
  if (rules->egress) {
    struct dome_net_config net_config = {0};
    if ((r = net_config_from_environment(&net_config, err)) < 0) return r;
    /* dome_net_open creates its state directory but not /run/dome itself (domed's runtime directory) */
    if (mkdir("/run/dome", 0700) < 0 && errno != EEXIST)
      return dome_error_set_errno(err, errno, "create `/run/dome`");
    if ((r = dome_net_open(&net_config, &rules->net, err)) < 0)
      return dome_error_wrap(err, "egress for the permitted network");
    rules->net_hook = (struct dome_net_hook){
        .net = rules->net, .entries = rules->tables.net, .count = rules->tables.net_count};
  }
  rules->stop_fd = eventfd(0, EFD_CLOEXEC);
  if (rules->stop_fd < 0) return dome_error_set_errno(err, errno, "eventfd");
  config->hook_context = rules;
  config->on_cgroup_ready = on_cgroup_ready;
  config->on_namespaces_ready = on_namespaces_ready;
  return 0;
}

void run_rules_finish(struct run_rules *rules) {
  if (rules->poller_running) {
    uint64_t one = 1;
    if (write(rules->stop_fd, &one, sizeof one) < 0) { /* the poller also wakes every second */
    }
    pthread_join((pthread_t)rules->poller, NULL);
    rules->poller_running = false;
  }
  dome_error err;
  if (rules->kernel) {
    /* the hooks run synchronously in the refused task: everything is in the ring buffer already */
    while (dome_kernel_poll_denials(rules->kernel, 0, collect, rules, &err) > 0) {
    }
    if (rules->kernel_hook.attachment) dome_kernel_detach(rules->kernel, rules->kernel_hook.attachment);
    rules->kernel_hook.attachment = NULL;
  }
  if (rules->net && rules->net_hook.jail) dome_net_jail_teardown(rules->net, rules->net_hook.jail, &err);
  rules->net_hook.jail = NULL;
}

void run_rules_report(const struct run_rules *rules, json_t *result) {
  json_object_set(result, "denials", rules->denials);
  json_t *o = json_pack(
      "{s:s, s:s, s:b, s:i, s:i, s:i, s:b}", "agent", rules->tables.agent ? rules->tables.agent : "", "level",
      dome_enforcement_level_name(rules->level), "degraded", rules->degraded_reason[0] != 0,
      "degraded_entries", (int)rules->degraded_entries, "network_entries", (int)rules->tables.net_count,
      "file_entries", (int)rules->tables.file_count, "egress", rules->egress);
  if (o && rules->degraded_reason[0])
    json_object_set_new(o, "degraded_reason", json_string(rules->degraded_reason));
  if (o) json_object_set_new(o, "denials_total", json_integer((json_int_t)rules->denial_count));
  json_object_set_new(result, "rules", o);
}

void run_rules_release(struct run_rules *rules) {
  run_rules_finish(rules);
  dome_kernel_close(rules->kernel);
  rules->kernel = NULL;
  dome_net_close(rules->net);
  rules->net = NULL;
  if (rules->stop_fd >= 0) close(rules->stop_fd);
  rules->stop_fd = -1;
  dome_landlock_path_rules_free(&rules->path_rules);
  json_decref(rules->denials);
  rules->denials = NULL;
  dome_rule_tables_free(&rules->tables);
}
