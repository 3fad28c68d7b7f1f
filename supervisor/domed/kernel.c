/* In-kernel enforcement for jails (supervisor/kernel/kernel.h): the cgroup BPF programs are attached to
 * each jail's cgroup2 leaf in the jail's on_cgroup_ready hook, and the kernel's denial events are
 * collected for the execution they belong to (by cgroup id) and recorded as exec.denial events.
 *
 * Rulesets: ruleset 0 denies every connect/bind/send (a capability whose quota says egress deny, or
 * no rules applied: the baseline permits no network). Otherwise the agent's fs:* and net:* rules — the
 * shipped baseline plus the active rules version — are compiled (policy/compile/compile.h) for the
 * agent and installed once per (agent, rules version) into one of the other rulesets, reused by every
 * jail of that agent and version (least recently used slot replaced when none is free). A host where
 * the programs cannot be loaded runs without this layer; results say so in `enforcement`. */
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
#include "policy/compile/compile.h"

#define RULESET_SLOTS 64 /* rulesets 1..64 hold compiled (agent, version) tables */

struct ruleset_slot {
  char agent[256];
  int version;
  unsigned attached; /* running jails using it */
  uint64_t used;
  bool installed;
};

struct domed_kernel {
  struct dome_kernel *kernel;
  struct ruleset_slot slots[RULESET_SLOTS];
  uint64_t tick;
  pthread_mutex_t lock; /* the kernel object is used by one thread at a time */
  struct domed_kernel_run *runs;
  pthread_t poller;
  atomic_bool stop;
};

static int install_rulesets(struct dome_kernel *kernel, dome_error *err) {
  struct dome_rule_tables deny_all;
  dome_rule_tables_init(&deny_all);
  int rc = dome_kernel_install_tables(kernel, 0, &deny_all, err);
  dome_rule_tables_free(&deny_all);
  return rc;
}

/* Compile the kernel tables of `agent` (with its capabilities and gateway as entity data). */
static int compile_tables(struct domed *domed, struct domed_rules *rules, const char *agent,
                          json_t *capabilities, const char *gateway, struct dome_rule_tables *tables,
                          dome_error *err) {
  json_t *entities =
      json_pack("[{s:{s:s,s:s},s:{s:O},s:[{s:s,s:s}]},{s:{s:s,s:s},s:{},s:[]}]", "uid", "type", "Dome::Agent",
                "id", agent, "attrs", "capabilities", capabilities, "parents", "type", "Dome::Gateway", "id",
                gateway, "uid", "type", "Dome::Gateway", "id", gateway, "attrs", "parents");
  char *text = json_dumps(entities, JSON_COMPACT);
  json_decref(entities);
  if (text == NULL) return dome_error_set(err, ENOMEM, "kernel rules entities");
  cedar_entities *parsed = NULL;
  int rc = dome_compile_load_entities(text, strlen(text), "agent entities", domed->engine, &parsed, err);
  free(text);
  if (rc < 0) return rc;
  char version[32];
  snprintf(version, sizeof version, "%d", rules->version);
  struct dome_compile_options options = {.agent = agent, .policy_version = version};
  rc = dome_compile_tables(rules->kernel_policies, parsed, &options, tables, err);
  cedar_entities_free(parsed);
  return rc;
}

int domed_kernel_check(struct domed *domed, struct domed_rules *rules, const char *agent, dome_error *err) {
  if (rules->kernel_policies == NULL) return 0;
  json_t *capabilities = json_array();
  json_t *record = control_agent_get(domed->store, agent);
  if (record && json_is_array(json_object_get(record, "capabilities"))) {
    json_decref(capabilities);
    capabilities = json_incref(json_object_get(record, "capabilities"));
  }
  json_decref(record);
  struct dome_rule_tables tables;
  int rc = compile_tables(domed, rules, agent, capabilities, MCP_GATEWAY_DEFAULT, &tables, err);
  dome_rule_tables_free(&tables);
  json_decref(capabilities);
  if (rc < 0) return dome_error_wrap(err, "kernel rules for agent `%s`", agent);
  return 0;
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

/* The ruleset of (agent, version), compiled and installed on first use. Under k->lock. */
static int ruleset_for(struct domed *domed, struct domed_kernel *k, const struct domed_principal *principal,
                       struct domed_rules *rules, uint32_t *ruleset, dome_error *err) {
  struct ruleset_slot *free_slot = NULL;
  for (size_t i = 0; i < RULESET_SLOTS; i++) {
    struct ruleset_slot *slot = &k->slots[i];
    if (slot->installed && slot->version == rules->version && strcmp(slot->agent, principal->agent) == 0) {
      slot->used = ++k->tick;
      slot->attached++;
      *ruleset = (uint32_t)i + 1;
      return 0;
    }
    if (slot->attached == 0 &&
        (free_slot == NULL || !slot->installed || (free_slot->installed && slot->used < free_slot->used)))
      if (free_slot == NULL || free_slot->installed) free_slot = slot;
  }
  if (free_slot == NULL) return dome_error_set(err, EBUSY, "every kernel ruleset is in use");
  struct dome_rule_tables tables;
  int rc = compile_tables(domed, rules, principal->agent, principal->capabilities, principal->gateway,
                          &tables, err);
  uint32_t index = (uint32_t)(free_slot - k->slots) + 1;
  if (rc == 0) rc = dome_kernel_install_tables(k->kernel, index, &tables, err);
  dome_rule_tables_free(&tables);
  if (rc < 0) {
    free_slot->installed = false;
    return dome_error_wrap(err, "kernel rules for agent `%s`", principal->agent);
  }
  snprintf(free_slot->agent, sizeof free_slot->agent, "%s", principal->agent);
  free_slot->version = rules->version;
  free_slot->installed = true;
  free_slot->attached = 1;
  free_slot->used = ++k->tick;
  *ruleset = index;
  return 0;
}

int domed_kernel_attach(struct domed *domed, struct domed_kernel_run *run, const struct jail_cgroup *leaf,
                        const struct domed_principal *principal, struct domed_rules *rules, bool egress,
                        dome_error *err) {
  struct domed_kernel *k = domed->kernel;
  if (k == NULL) return 0;
  pthread_mutex_lock(&k->lock);
  uint32_t ruleset = 0;
  int rc = 0;
  if (egress && rules && rules->kernel_policies) rc = ruleset_for(domed, k, principal, rules, &ruleset, err);
  struct dome_kernel_jail jail = {.cgroup_fd = leaf->fd, .cgroup_id = leaf->id, .ruleset = ruleset};
  if (rc == 0)
    rc = dome_kernel_attach(k->kernel, &jail, (struct dome_kernel_attachment **)&run->attachment, err);
  if (rc == 0) {
    run->cgroup_id = leaf->id;
    run->ruleset = ruleset;
    if (run->denials == NULL) run->denials = json_array();
    run->next = k->runs;
    k->runs = run;
  } else if (ruleset > 0) {
    k->slots[ruleset - 1].attached--;
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
  if (run->ruleset > 0 && k->slots[run->ruleset - 1].attached > 0) k->slots[run->ruleset - 1].attached--;
  pthread_mutex_unlock(&k->lock);
}
