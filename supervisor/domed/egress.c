/* Jail networking for domed's executions (supervisor/net/net.h), as `dome run --rules` does it.
 *
 * A jail starts with loopback only. When the capability's quota allows egress and the agent's network
 * rules (the shipped baseline + the active rules version, compiled for the agent as for the kernel
 * tables) permit a destination beyond loopback, the jail gets a path to exactly those destinations: a
 * veth pair built in its on_namespaces_ready hook, its resolv.conf naming the permitted resolvers, and
 * nftables counters whose figures (bytes both ways, accepted and refused flows, the byte quota) go into
 * the result (`network`), exec.end and /metrics. The cgroup BPF programs stay the enforcement point: a
 * host without them (domed->kernel NULL) builds no path (fails closed, the result says why).
 *
 * The egress side (pasta in user mode, the host table in routed mode) is opened on first use and kept
 * until shutdown. Its state directory is `domed-net` beside the control socket (/run/dome/domed-net by
 * default), so that two domeds (and tests) never share one and `dome run --rules` (/run/dome/net) can run
 * beside domed; domed_egress_init reclaims what a crashed domed left there.
 *
 * Configuration keys (docs/domed.md): net_mode (auto, user, routed, ipvlan, macvlan: struct
 * dome_net_config.mode; ipvlan/macvlan also take net_uplink, net_uplink_pool, net_uplink_gateway),
 * egress_quota (bytes a jail may move through its egress path, both directions; 0: none — a capability's
 * own `dome quotas set --egress-bytes`, struct control_quota.egress_bytes, takes its place for the jails of
 * that capability), net_tcp_relay (user mode carries TCP through the splice relay:
 * dome_net_config.tcp_relay). */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "policy/compile/compile.h"
#include "supervisor/domed/domed.h"
#include "supervisor/jail/jail.h"
#include "supervisor/kernel/kernel.h"
#include "supervisor/net/net.h"

#define TABLES_CACHED 16 /* compiled network entries, by (rules version, agent, gateway, capabilities) */

struct cached_entries {
  char key[1024];
  uint64_t used;
  bool needs_egress;
  struct dome_net_entry *entries;
  size_t count;
};

static struct {
  pthread_mutex_t lock; /* the fields below but the counters */
  char state_dir[PATH_MAX];
  enum dome_net_mode mode;
  char uplink[16];                    /* ipvlan/macvlan modes */
  struct dome_net_prefix uplink_pool; /* ... */
  uint32_t uplink_gateway;            /* ... 0: none */
  uint64_t quota_bytes;
  bool tcp_relay;
  struct dome_net *net; /* opened on first use */
  struct cached_entries cache[TABLES_CACHED];
  uint64_t tick;
  /* /metrics */
  atomic_uint_fast64_t jails, errors, egress_bytes, ingress_bytes, connections, refused, quota_cuts;
} egress = {.lock = PTHREAD_MUTEX_INITIALIZER};

void domed_egress_init(struct domed *domed) {
  /* `domed-net` beside the control socket: /run/dome/domed-net for the default /run/dome/control.sock
   * (`dome run --rules` uses /run/dome/net: the two may run side by side) */
  char directory[sizeof domed->config.control_socket];
  snprintf(directory, sizeof directory, "%s", domed->config.control_socket);
  char *slash = strrchr(directory, '/');
  if (slash == NULL)
    snprintf(directory, sizeof directory, ".");
  else if (slash == directory)
    slash[1] = '\0';
  else
    *slash = '\0';
  snprintf(egress.state_dir, sizeof egress.state_dir, "%s%sdomed-net", directory,
           directory[strlen(directory) - 1] == '/' ? "" : "/");
  if (dome_net_mode_parse(domed->config.net_mode, &egress.mode) < 0) egress.mode = DOME_NET_MODE_AUTO;
  /* the uplink keys were checked by domed_config_set; dome_net_open says what is missing */
  snprintf(egress.uplink, sizeof egress.uplink, "%s", domed->config.net_uplink);
  memset(&egress.uplink_pool, 0, sizeof egress.uplink_pool);
  egress.uplink_gateway = 0;
  if (domed->config.net_uplink_pool[0])
    dome_net_prefix_parse(domed->config.net_uplink_pool, &egress.uplink_pool, NULL);
  struct dome_net_prefix gateway = {0};
  if (domed->config.net_uplink_gateway[0] &&
      dome_net_prefix_parse(domed->config.net_uplink_gateway, &gateway, NULL) == 0)
    egress.uplink_gateway = gateway.address;
  egress.tcp_relay = domed->config.net_tcp_relay;
  egress.quota_bytes = domed->config.egress_quota_bytes;
  struct dome_net_config config = {.mode = egress.mode, .state_dir = egress.state_dir};
  dome_error err = {0};
  int removed = dome_net_reclaim(&config, &err);
  if (removed < 0)
    domed_log("warn", "net", "state_dir=%s msg=\"reclaim failed: %s\"", egress.state_dir, err.message);
  else if (removed > 0)
    domed_log("info", "net", "state_dir=%s msg=\"reclaimed what a previous domed left\" objects=%d",
              egress.state_dir, removed);
}

void domed_egress_cleanup(struct domed *domed) {
  (void)domed;
  pthread_mutex_lock(&egress.lock);
  dome_net_close(egress.net); /* every jail is torn down by now; removes the table, pasta, state files */
  egress.net = NULL;
  for (size_t i = 0; i < TABLES_CACHED; i++) {
    free(egress.cache[i].entries);
    memset(&egress.cache[i], 0, sizeof egress.cache[i]);
  }
  pthread_mutex_unlock(&egress.lock);
}

/* The agent's network entries under `rules` (cached). Under egress.lock. */
static int agent_entries(struct domed *domed, const struct domed_principal *principal,
                         struct domed_rules *rules, struct domed_egress_run *run, dome_error *err) {
  const char *gateway = principal->gateway ? principal->gateway : MCP_GATEWAY_DEFAULT;
  char *capabilities = json_dumps(principal->capabilities, JSON_COMPACT | JSON_ENCODE_ANY);
  char key[1024];
  snprintf(key, sizeof key, "%d\x1f%s\x1f%s\x1f%s", rules->version, principal->agent, gateway,
           capabilities ? capabilities : "");
  free(capabilities);
  struct cached_entries *slot = &egress.cache[0];
  for (size_t i = 0; i < TABLES_CACHED; i++) {
    struct cached_entries *c = &egress.cache[i];
    if (c->key[0] && strcmp(c->key, key) == 0) {
      slot = c;
      goto found;
    }
    if (c->used < slot->used) slot = c;
  }
  struct dome_rule_tables tables;
  int rc =
      domed_compile_tables(domed, rules, principal->agent, principal->capabilities, gateway, &tables, err);
  if (rc < 0) return rc;
  struct dome_net_entry *copy = calloc(tables.net_count + 1, sizeof *copy);
  if (copy == NULL) {
    dome_rule_tables_free(&tables);
    return dome_error_set(err, ENOMEM, "network rules: out of memory");
  }
  if (tables.net_count) memcpy(copy, tables.net, tables.net_count * sizeof *copy);
  free(slot->entries);
  snprintf(slot->key, sizeof slot->key, "%s", key);
  slot->entries = copy;
  slot->count = tables.net_count;
  slot->needs_egress = dome_compile_needs_egress(&tables);
  dome_rule_tables_free(&tables);
found:
  slot->used = ++egress.tick;
  run->needs_egress = slot->needs_egress;
  run->count = slot->count;
  run->entries = NULL;
  if (!slot->needs_egress) return 0;
  run->entries = calloc(slot->count + 1, sizeof(struct dome_net_entry));
  if (run->entries == NULL) return dome_error_set(err, ENOMEM, "network rules: out of memory");
  memcpy(run->entries, slot->entries, slot->count * sizeof(struct dome_net_entry));
  return 0;
}

static void refuse(struct domed_egress_run *run, const char *detail) {
  snprintf(run->error, sizeof run->error, "no egress: %.500s", detail);
  atomic_fetch_add(&egress.errors, 1);
}

int domed_egress_prepare(struct domed *domed, const struct domed_principal *principal,
                         struct domed_rules *rules, const struct control_quota *quota,
                         struct jail_config *config, struct domed_egress_run *run, dome_error *err) {
  memset(run, 0, sizeof *run);
  /* the capability's own byte quota (dome quotas set --egress-bytes) before the configuration's */
  run->quota_bytes = quota->egress_bytes ? quota->egress_bytes : egress.quota_bytes;
  if (!quota->egress || rules == NULL || rules->kernel_policies == NULL) return 0; /* all network denied */
  pthread_mutex_lock(&egress.lock);
  dome_error compile_err = {0};
  int rc = agent_entries(domed, principal, rules, run, &compile_err);
  if (rc < 0) {
    pthread_mutex_unlock(&egress.lock);
    return dome_error_set(err, -rc, "network rules of agent `%s`: %s", principal->agent, compile_err.message);
  }
  if (!run->needs_egress) {
    pthread_mutex_unlock(&egress.lock);
    return 0;
  }
  if (domed->kernel == NULL) {
    /* the plumbing never widens what is enforced: without the BPF programs there is nothing to narrow */
    pthread_mutex_unlock(&egress.lock);
    refuse(run, "this host cannot enforce network rules in the kernel (see dome doctor)");
    return 0;
  }
  if (egress.net == NULL) {
    struct dome_net_config net_config = {.mode = egress.mode,
                                         .state_dir = egress.state_dir,
                                         .jail_quota_bytes = egress.quota_bytes,
                                         .tcp_relay = egress.tcp_relay,
                                         .uplink = egress.uplink,
                                         .uplink_pool = egress.uplink_pool,
                                         .uplink_gateway = egress.uplink_gateway};
    char parent[sizeof egress.state_dir];
    snprintf(parent, sizeof parent, "%s", egress.state_dir);
    char *slash = strrchr(parent, '/');
    if (slash && slash != parent) *slash = '\0';
    mkdir(parent, 0700); /* /run/dome may not exist yet; dome_net_open makes only its own directory */
    dome_error open_err = {0};
    if (dome_net_open(&net_config, &egress.net, &open_err) < 0) {
      egress.net = NULL;
      pthread_mutex_unlock(&egress.lock);
      domed_log("warn", "net", "msg=\"egress unavailable: %s\"", open_err.message);
      refuse(run, open_err.message);
      return 0;
    }
    domed_log("info", "net", "egress=%s state_dir=%s quota_bytes=%llu tcp_relay=%d",
              dome_net_mode_name(dome_net_mode_in_effect(egress.net)), egress.state_dir,
              (unsigned long long)egress.quota_bytes, egress.tcp_relay);
  }
  run->net = egress.net;
  pthread_mutex_unlock(&egress.lock);
  run->wanted = true;
  bool has_resolver = false;
  rc = dome_net_resolv_conf_for_entries(run->entries, run->count, run->resolv_conf, sizeof run->resolv_conf,
                                        &has_resolver, err);
  if (rc < 0) return dome_error_wrap(err, "resolv.conf");
  /* only the host-ro image lays out /etc per run (jail.h); elsewhere lookups fail as without a resolver */
  if (strcmp(domed->config.image, "host-ro") == 0) {
    config->resolv_conf = run->resolv_conf;
    config->hosts_dns = has_resolver;
  }
  return 0;
}

int domed_egress_namespaces_ready(struct domed_egress_run *run, pid_t child_pid, dome_error *err) {
  (void)err;
  if (!run->wanted) return 0;
  struct dome_net_jail_options options = {.quota_bytes = run->quota_bytes};
  dome_error setup_err = {0};
  if (dome_net_jail_setup_options(run->net, child_pid, run->entries, run->count, &options, &run->jail,
                                  &setup_err) < 0) {
    run->jail = NULL;
    domed_log("warn", "net", "msg=\"jail egress not built: %s\"", setup_err.message);
    refuse(run, setup_err.message);
    return 0; /* the jail runs with loopback only; the result says why */
  }
  atomic_fetch_add(&egress.jails, 1);
  return 0;
}

void domed_egress_finish(struct domed_egress_run *run) {
  if (run->jail) {
    dome_error err = {0};
    if (dome_net_jail_usage(run->net, run->jail, &run->usage, &err) < 0)
      domed_log("warn", "net", "msg=\"egress counters: %s\"", err.message);
    run->address = dome_net_jail_address(run->jail);
    if (dome_net_jail_teardown(run->net, run->jail, &err) < 0)
      domed_log("warn", "net", "msg=\"jail egress teardown: %s\"", err.message);
    run->jail = NULL;
    run->built = true;
    atomic_fetch_add(&egress.egress_bytes, run->usage.egress_bytes);
    atomic_fetch_add(&egress.ingress_bytes, run->usage.ingress_bytes);
    atomic_fetch_add(&egress.connections, run->usage.connections);
    atomic_fetch_add(&egress.refused, run->usage.refused);
    if (run->usage.quota_exceeded) atomic_fetch_add(&egress.quota_cuts, 1);
  }
  free(run->entries);
  run->entries = NULL;
}

void domed_egress_report(const struct domed_egress_run *run, json_t *object) {
  json_t *network = json_pack("{s:b}", "egress", run->built);
  if (run->built) {
    char address[16];
    snprintf(address, sizeof address, "%u.%u.%u.%u", run->address >> 24, (run->address >> 16) & 255,
             (run->address >> 8) & 255, run->address & 255);
    json_object_set_new(network, "mode", json_string(dome_net_mode_name(dome_net_mode_in_effect(run->net))));
    json_object_set_new(network, "address", json_string(address));
    json_object_set_new(network, "egress_bytes", json_integer((json_int_t)run->usage.egress_bytes));
    json_object_set_new(network, "ingress_bytes", json_integer((json_int_t)run->usage.ingress_bytes));
    json_object_set_new(network, "connections", json_integer((json_int_t)run->usage.connections));
    json_object_set_new(network, "refused", json_integer((json_int_t)run->usage.refused));
    json_object_set_new(network, "quota_bytes", json_integer((json_int_t)run->usage.quota_bytes));
    json_object_set_new(network, "quota_exceeded", json_boolean(run->usage.quota_exceeded));
  }
  if (run->error[0]) json_object_set_new(network, "error", json_string(run->error));
  json_object_set_new(object, "network", network);
}

void domed_egress_metrics(FILE *out) {
#define EGRESS_COUNTER(name, help, value)                                            \
  fprintf(out, "# HELP %s %s\n# TYPE %s counter\n%s %llu\n", name, help, name, name, \
          (unsigned long long)atomic_load(&(value)))
  EGRESS_COUNTER("dome_egress_jails_total",
                 "Jails given an egress path (their rules permit more than loopback).", egress.jails);
  EGRESS_COUNTER("dome_egress_errors_total", "Jails whose permitted egress could not be built (ran without).",
                 egress.errors);
  EGRESS_COUNTER("dome_egress_bytes_total", "Bytes jails sent through their egress paths.",
                 egress.egress_bytes);
  EGRESS_COUNTER("dome_ingress_bytes_total", "Bytes jails received through their egress paths.",
                 egress.ingress_bytes);
  EGRESS_COUNTER("dome_egress_connections_total", "New flows the jails' egress filters accepted.",
                 egress.connections);
  EGRESS_COUNTER("dome_egress_refused_total", "New flows the jails' egress filters rejected.",
                 egress.refused);
  EGRESS_COUNTER("dome_egress_quota_exceeded_total", "Jails whose egress byte quota ran out.",
                 egress.quota_cuts);
#undef EGRESS_COUNTER
}
