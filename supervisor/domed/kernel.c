/* In-kernel enforcement for jails (supervisor/kernel/kernel.h): the cgroup BPF programs are attached to
 * each jail's cgroup2 leaf in the jail's on_cgroup_ready hook, and the kernel's denial events are
 * collected for the execution they belong to (by cgroup id) and recorded as exec.denial events.
 *
 * Rulesets: ruleset 0 denies every connect/bind/send (a capability whose quota says egress deny, or
 * no rules applied: the baseline permits no network). Otherwise the agent's fs:* and net:* rules — the
 * shipped baseline plus the active rules version — are compiled (policy/compile/compile.h) for the
 * agent and installed once per (agent, rules version) into one of the other rulesets, reused by every
 * jail of that agent and version (least recently used slot replaced when none is free). A host where
 * the programs cannot be loaded runs without this layer; results say so in `enforcement`.
 *
 * Shadow rules (dome rules apply --shadow): the shadow version is compiled by the same compiler for the
 * agent and installed as the slot's shadow tables (dome_kernel_install_shadow_tables), replaced or removed
 * in place when the shadow changes; the programs report each access the shadow decides otherwise, which
 * becomes an exec.shadow record of the execution. The shadow never changes what is enforced: shadow rules
 * that do not compile for the agent are logged and the run goes on without them. An execution records the
 * differences of the shadow version its ruleset carried when it attached (none: it records none, even if a
 * later execution of the agent installs one meanwhile).
 *
 * Files: the agent's fs:* rules also become the jail's Landlock path rules (domed_kernel_path_rules, at the
 * end of this file), whatever the quota says. Egress plumbing (supervisor/net) for rules that permit more
 * than loopback is not wired yet: such connects fail in the jail's empty network namespace. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "supervisor/domed/domed.h"
#include "supervisor/jail/jail.h"
#include "supervisor/kernel/kernel.h"
#include "policy/compile/compile.h"

#define RULESET_SLOTS 64 /* rulesets 1..64 hold compiled (agent, version) tables */

struct ruleset_slot {
  char agent[256];
  int version;
  int shadow_version; /* shadow tables installed beside (0: none) */
  unsigned attached;  /* running jails using it */
  uint64_t used;
  bool installed;
};

struct domed_kernel {
  struct dome_kernel *kernel;
  struct ruleset_slot slots[RULESET_SLOTS];
  uint64_t tick;
  pthread_mutex_t lock; /* the kernel object is used by one thread at a time */
  struct domed_kernel_run *runs;
  /* Attachments of ended jails, detached by the poller (destroying a jail's links costs ~0.3 ms of
   * syscalls that need not delay the call's answer; the jail's cgroup is gone, so nothing runs under
   * them meanwhile). Under lock. */
  struct dome_kernel_attachment **reap;
  size_t reap_count, reap_capacity;
  pthread_t poller;
  atomic_bool stop;
};

/* Detach every attachment waiting in k->reap. Under k->lock. */
static void reap_locked(struct domed_kernel *k) {
  for (size_t i = 0; i < k->reap_count; i++) dome_kernel_detach(k->kernel, k->reap[i]);
  k->reap_count = 0;
}

static int install_rulesets(struct dome_kernel *kernel, dome_error *err) {
  struct dome_rule_tables deny_all;
  dome_rule_tables_init(&deny_all);
  int rc = dome_kernel_install_tables(kernel, 0, &deny_all, err);
  dome_rule_tables_free(&deny_all);
  return rc;
}

int domed_compile_tables(struct domed *domed, struct domed_rules *rules, const char *agent,
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
  int rc = domed_compile_tables(domed, rules, agent, capabilities, MCP_GATEWAY_DEFAULT, &tables, err);
  dome_rule_tables_free(&tables);
  json_decref(capabilities);
  if (rc < 0) return dome_error_wrap(err, "kernel rules for agent `%s`", agent);
  return 0;
}

/* A shadow difference of a run: kept (bounded as denials) with the shadow version, and counted. */
static void collect_shadow(struct domed_kernel_run *run, const struct dome_denial *denial) {
  if (run->shadows == NULL) return; /* shadow tables removed since: not this run's shadow */
  run->shadow_count++;
  if (json_array_size(run->shadows) >= DOME_KERNEL_DENIALS_KEPT) return;
  json_t *entry = dome_denial_shadow_to_json(denial, run->start_ns);
  if (entry == NULL) return;
  char version[32];
  snprintf(version, sizeof version, "%d", run->shadow_version);
  json_object_set_new(entry, "shadow_version", json_string(version));
  json_array_append_new(run->shadows, entry);
}

static void collect(void *context, const struct dome_denial *denial) {
  struct domed_kernel *k = context;
  for (struct domed_kernel_run *run = k->runs; run; run = run->next) {
    if (run->cgroup_id != denial->cgroup_id) continue;
    if (denial->kind == DOME_EVENT_SHADOW) {
      collect_shadow(run, denial);
      return;
    }
    if (json_array_size(run->denials) >= DOME_KERNEL_DENIALS_KEPT) return; /* the count goes to metrics */
    json_t *entry = dome_denial_to_json(denial, run->start_ns);
    if (entry == NULL) return;
    /* the executor reads the determining policy as `policy` */
    json_t *policy = json_object_get(entry, "policy_id");
    if (policy) json_object_set(entry, "policy", policy);
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
    reap_locked(k);
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

void domed_path_rules_clear(void);

void domed_kernel_cleanup(struct domed *domed) {
  domed_path_rules_clear();
  struct domed_kernel *k = domed->kernel;
  if (k == NULL) return;
  atomic_store(&k->stop, true);
  pthread_join(k->poller, NULL);
  reap_locked(k);
  free(k->reap);
  dome_kernel_close(k->kernel);
  pthread_mutex_destroy(&k->lock);
  free(k);
  domed->kernel = NULL;
}

/* Make the slot's shadow tables those of `shadow` (NULL: none) compiled for the principal, in place (every
 * jail of the slot moves at once). A shadow that does not compile is logged and left out: it never stops
 * an execution. Under k->lock. */
static void shadow_for(struct domed *domed, struct domed_kernel *k, struct ruleset_slot *slot, uint32_t index,
                       const struct domed_principal *principal, struct domed_rules *shadow) {
  int wanted = shadow && shadow->kernel_policies ? shadow->version : 0;
  if (slot->shadow_version == wanted) return;
  struct dome_rule_tables tables;
  dome_rule_tables_init(&tables);
  dome_error err = {0};
  int rc = wanted ? domed_compile_tables(domed, shadow, principal->agent, principal->capabilities,
                                         principal->gateway, &tables, &err)
                  : 0;
  if (rc == 0) rc = dome_kernel_install_shadow_tables(k->kernel, index, wanted ? &tables : NULL, &err);
  dome_rule_tables_free(&tables);
  if (rc < 0) {
    domed_log("warn", "kernel", "agent=%s shadow_version=%d msg=\"shadow kernel rules left out: %s\"",
              principal->agent, wanted, err.message);
    dome_kernel_install_shadow_tables(k->kernel, index, NULL, &err); /* none rather than a stale one */
  }
  slot->shadow_version = wanted; /* also when left out: not retried for every execution */
}

/* The ruleset of (agent, version), compiled and installed on first use; its shadow tables those of the
 * current shadow rules. Under k->lock. */
static int ruleset_for(struct domed *domed, struct domed_kernel *k, const struct domed_principal *principal,
                       struct domed_rules *rules, struct domed_rules *shadow, uint32_t *ruleset,
                       dome_error *err) {
  struct ruleset_slot *free_slot = NULL;
  for (size_t i = 0; i < RULESET_SLOTS; i++) {
    struct ruleset_slot *slot = &k->slots[i];
    if (slot->installed && slot->version == rules->version && strcmp(slot->agent, principal->agent) == 0) {
      slot->used = ++k->tick;
      slot->attached++;
      *ruleset = (uint32_t)i + 1;
      shadow_for(domed, k, slot, *ruleset, principal, shadow);
      return 0;
    }
    if (slot->attached == 0 &&
        (free_slot == NULL || !slot->installed || (free_slot->installed && slot->used < free_slot->used)))
      if (free_slot == NULL || free_slot->installed) free_slot = slot;
  }
  if (free_slot == NULL) return dome_error_set(err, EBUSY, "every kernel ruleset is in use");
  struct dome_rule_tables tables;
  int rc = domed_compile_tables(domed, rules, principal->agent, principal->capabilities, principal->gateway,
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
  /* a new install of the ruleset keeps the shadow tables of the slot's previous holder: replace them */
  free_slot->shadow_version = -1;
  shadow_for(domed, k, free_slot, index, principal, shadow);
  *ruleset = index;
  return 0;
}

int domed_kernel_attach(struct domed *domed, struct domed_kernel_run *run, const struct jail_cgroup *leaf,
                        const struct domed_principal *principal, struct domed_rules *rules, bool egress,
                        dome_error *err) {
  struct domed_kernel *k = domed->kernel;
  if (k == NULL) return 0;
  struct domed_rules *shadow = egress && rules && rules->kernel_policies ? domed_shadow_acquire(domed) : NULL;
  pthread_mutex_lock(&k->lock);
  uint32_t ruleset = 0;
  int rc = 0;
  if (egress && rules && rules->kernel_policies)
    rc = ruleset_for(domed, k, principal, rules, shadow, &ruleset, err);
  struct dome_kernel_jail jail = {.cgroup_fd = leaf->fd, .cgroup_id = leaf->id, .ruleset = ruleset};
  if (rc == 0)
    rc = dome_kernel_attach(k->kernel, &jail, (struct dome_kernel_attachment **)&run->attachment, err);
  if (rc == 0) {
    run->cgroup_id = leaf->id;
    run->ruleset = ruleset;
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    run->start_ns = (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
    run->level = dome_enforcement_level_name(dome_kernel_level(k->kernel));
    run->reason = ruleset == 0 && !egress && rules && rules->kernel_policies ? "quota" : "policy";
    if (run->denials == NULL) run->denials = json_array();
    run->shadow_version = ruleset > 0 ? k->slots[ruleset - 1].shadow_version : 0;
    if (run->shadow_version > 0 && run->shadows == NULL) run->shadows = json_array();
    run->next = k->runs;
    k->runs = run;
  } else if (ruleset > 0) {
    k->slots[ruleset - 1].attached--;
  }
  pthread_mutex_unlock(&k->lock);
  domed_rules_release(shadow);
  if (rc < 0) return dome_error_wrap(err, "kernel enforcement for `%s`", leaf->path);
  return 0;
}

int domed_kernel_prelink(struct domed *domed, const struct jail_cgroup *leaf, dome_error *err) {
  struct domed_kernel *k = domed->kernel;
  if (k == NULL) return 0;
  pthread_mutex_lock(&k->lock);
  int rc = dome_kernel_prelink(k->kernel, leaf->fd, leaf->id, err);
  pthread_mutex_unlock(&k->lock);
  return rc < 0 ? dome_error_wrap(err, "kernel programs for `%s`", leaf->path) : 0;
}

void domed_kernel_prelink_drop(struct domed *domed, uint64_t cgroup_id) {
  struct domed_kernel *k = domed->kernel;
  if (k == NULL || cgroup_id == 0) return;
  pthread_mutex_lock(&k->lock);
  dome_kernel_prelink_drop(k->kernel, cgroup_id);
  pthread_mutex_unlock(&k->lock);
}

size_t domed_kernel_prelinked(struct domed *domed) {
  struct domed_kernel *k = domed->kernel;
  if (k == NULL) return 0;
  pthread_mutex_lock(&k->lock);
  size_t count = dome_kernel_prelinked_count(k->kernel);
  pthread_mutex_unlock(&k->lock);
  return count;
}

int domed_kernel_update_ruleset(struct domed *domed, uint32_t ruleset,
                                const struct domed_principal *principal, struct domed_rules *rules,
                                dome_error *err) {
  struct domed_kernel *k = domed->kernel;
  if (k == NULL || ruleset == 0) return 0;
  if (ruleset > RULESET_SLOTS || rules == NULL || rules->kernel_policies == NULL)
    return dome_error_set(err, EINVAL, "kernel ruleset %u cannot take rules version %d", ruleset,
                          rules ? rules->version : 0);
  pthread_mutex_lock(&k->lock);
  struct ruleset_slot *slot = &k->slots[ruleset - 1];
  int rc = 0;
  if (!slot->installed || strcmp(slot->agent, principal->agent) != 0)
    rc = dome_error_set(err, ENOENT, "kernel ruleset %u is not agent `%s`'s", ruleset, principal->agent);
  else if (slot->version != rules->version) {
    struct dome_rule_tables tables;
    rc = domed_compile_tables(domed, rules, principal->agent, principal->capabilities, principal->gateway,
                              &tables, err);
    /* one map update: every jail attached to the slot sees the old tables or the new, never a mix */
    if (rc == 0) rc = dome_kernel_install_tables(k->kernel, ruleset, &tables, err);
    dome_rule_tables_free(&tables);
    if (rc == 0) {
      slot->version = rules->version;
      slot->used = ++k->tick;
    }
  }
  pthread_mutex_unlock(&k->lock);
  if (rc < 0) return dome_error_wrap(err, "kernel rules for agent `%s`", principal->agent);
  return 1;
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
  if (k->reap_count == k->reap_capacity) {
    size_t capacity = k->reap_capacity ? 2 * k->reap_capacity : 64;
    struct dome_kernel_attachment **grown = realloc(k->reap, capacity * sizeof *grown);
    if (grown) {
      k->reap = grown;
      k->reap_capacity = capacity;
    }
  }
  if (k->reap_count < k->reap_capacity)
    k->reap[k->reap_count++] = run->attachment; /* detached by the poller within 50 ms */
  else
    dome_kernel_detach(k->kernel, run->attachment);
  run->attachment = NULL;
  if (run->ruleset > 0 && k->slots[run->ruleset - 1].attached > 0) k->slots[run->ruleset - 1].attached--;
  pthread_mutex_unlock(&k->lock);
}

/* ---- Landlock path rules of the agent's compiled file tables ----
 * The jail's Landlock layer gets the ALLOW file entries of (baseline + active rules) compiled for the
 * agent (as `dome run --rules` does), merged per (path, exact). Without BPF-LSM (level reduced or none)
 * Landlock is the only file layer: tables with a deny inside an allowed subtree, which Landlock cannot
 * express, refuse the execution (fail closed). Compiled once per (agent, capabilities, rules version). */

#define PATH_RULES_CACHED 32

struct domed_path_rules {
  unsigned refs; /* under path_cache_lock */
  char key[1024];
  uint64_t used;
  struct dome_landlock_path_rules landlock;
};

static pthread_mutex_t path_cache_lock = PTHREAD_MUTEX_INITIALIZER;
static struct domed_path_rules *path_cache[PATH_RULES_CACHED];
static uint64_t path_cache_tick;

static void path_rules_free(struct domed_path_rules *p) {
  if (p == NULL) return;
  dome_landlock_path_rules_free(&p->landlock);
  free(p);
}

int domed_kernel_path_rules(struct domed *domed, const struct domed_principal *principal,
                            struct domed_rules *rules, struct domed_path_rules **out, dome_error *err) {
  *out = NULL;
  if (rules == NULL || rules->kernel_policies == NULL) return 0;
  char *capabilities = json_dumps(principal->capabilities, JSON_COMPACT | JSON_ENCODE_ANY);
  char key[1024];
  snprintf(key, sizeof key, "%d\x1f%s\x1f%s\x1f%s", rules->version, principal->agent,
           principal->gateway ? principal->gateway : "", capabilities ? capabilities : "");
  free(capabilities);
  pthread_mutex_lock(&path_cache_lock);
  for (size_t i = 0; i < PATH_RULES_CACHED; i++)
    if (path_cache[i] && strcmp(path_cache[i]->key, key) == 0) {
      path_cache[i]->used = ++path_cache_tick;
      if (path_cache[i]->landlock.count > 0) { /* none: the jail's baseline rules */
        path_cache[i]->refs++;
        *out = path_cache[i];
      }
      pthread_mutex_unlock(&path_cache_lock);
      return 0;
    }
  pthread_mutex_unlock(&path_cache_lock);

  struct dome_rule_tables tables;
  int rc = domed_compile_tables(domed, rules, principal->agent, principal->capabilities,
                                principal->gateway ? principal->gateway : MCP_GATEWAY_DEFAULT, &tables, err);
  struct domed_kernel *k = domed->kernel;
  enum dome_enforcement_level level = DOME_LEVEL_NONE;
  if (k) {
    pthread_mutex_lock(&k->lock);
    level = dome_kernel_level(k->kernel);
    pthread_mutex_unlock(&k->lock);
  }
  if (rc == 0 && level != DOME_LEVEL_FULL && tables.file_count > 0 &&
      dome_landlock_check_tables(&tables, err) < 0)
    rc = dome_error_wrap(err, "file rules cannot be enforced without BPF-LSM");
  struct domed_path_rules *p = rc == 0 ? calloc(1, sizeof *p) : NULL;
  if (rc == 0 && p == NULL) rc = dome_error_set(err, ENOMEM, "path rules");
  if (rc == 0) {
    snprintf(p->key, sizeof p->key, "%s", key);
    rc = dome_landlock_path_rules_from_tables(&tables, &p->landlock, err);
  }
  dome_rule_tables_free(&tables);
  if (rc < 0) {
    path_rules_free(p);
    return dome_error_wrap(err, "kernel rules for agent `%s`", principal->agent);
  }
  pthread_mutex_lock(&path_cache_lock);
  p->refs = 2; /* the cache's and the caller's */
  p->used = ++path_cache_tick;
  struct domed_path_rules **slot = NULL;
  for (size_t i = 0; i < PATH_RULES_CACHED; i++) {
    if (path_cache[i] == NULL) {
      slot = &path_cache[i];
      break;
    }
    if (path_cache[i]->refs == 1 && (slot == NULL || path_cache[i]->used < (*slot)->used))
      slot = &path_cache[i];
  }
  if (slot) {
    if (*slot) path_rules_free(*slot); /* refs 1: only the cache held it */
    *slot = p;
  } else {
    p->refs = 1; /* every slot in use: not cached */
  }
  pthread_mutex_unlock(&path_cache_lock);
  if (p->landlock.count == 0) {
    domed_path_rules_release(p);
    return 0;
  }
  *out = p;
  return 0;
}

const struct jail_path_rule *domed_path_rules_list(const struct domed_path_rules *p, size_t *count) {
  *count = p ? p->landlock.count : 0;
  return p ? p->landlock.rules : NULL;
}

void domed_path_rules_release(struct domed_path_rules *p) {
  if (p == NULL) return;
  pthread_mutex_lock(&path_cache_lock);
  bool last = --p->refs == 0;
  pthread_mutex_unlock(&path_cache_lock);
  if (last) path_rules_free(p);
}

/* Drop the cached path rules (at shutdown; executions holding some keep them until released). */
void domed_path_rules_clear(void) {
  pthread_mutex_lock(&path_cache_lock);
  for (size_t i = 0; i < PATH_RULES_CACHED; i++) {
    if (path_cache[i] && --path_cache[i]->refs == 0) path_rules_free(path_cache[i]);
    path_cache[i] = NULL;
  }
  pthread_mutex_unlock(&path_cache_lock);
}
