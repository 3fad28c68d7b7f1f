/* Kernel-level rules for a recorded or re-run execution: the rules' fs:/net: part (after the shipped
 * baseline) compiled for the agent (policy/compile/compile.h), installed in the cgroup BPF programs
 * (supervisor/kernel/kernel.h) and attached to the jail's cgroup leaf only — never to anything else —, and
 * the kernel's denials collected for the execution. The programs and maps live only for one execution. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "policy/compile/compile.h"
#include "supervisor/jail/jail.h"
#include "supervisor/kernel/kernel.h"
#include "supervisor/replay/replay_internal.h"

struct replay_kernel {
  struct dome_kernel *kernel;
  struct dome_kernel_attachment *attachment;
  uint64_t cgroup_id;
  uint64_t start_ns; /* CLOCK_MONOTONIC at attachment, the base of offset_ms */
  json_t *denials;
  uint64_t dropped;
};

static uint64_t monotonic_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void replay_kernel_close(struct replay_kernel *k) {
  if (k == NULL) return;
  if (k->attachment) dome_kernel_detach(k->kernel, k->attachment);
  dome_kernel_close(k->kernel);
  json_decref(k->denials);
  free(k);
}

int replay_kernel_open(const struct simulate_policy *rules, const json_t *inputs, struct replay_kernel **out,
                       dome_error *err) {
  *out = NULL;
  const char *agent = json_string_value(json_object_get(inputs, "agent"));
  if (agent == NULL) return dome_error_set(err, EINVAL, "kernel rules: the execution names no agent");
  enum dome_enforcement_level level = dome_kernel_probe_level();
  if (level == DOME_LEVEL_NONE) return 0; /* no cgroup BPF here: the jail's empty netns alone */
  cedar_policy_set *set = NULL;
  int rc = dome_compile_load_policies(rules->text, rules->length, rules->file, &set, err);
  if (rc < 0) return rc;
  /* the agent's entity data as recorded with its authorization (capabilities, gateways) */
  cedar_entities *entities = NULL;
  json_t *recorded = json_object_get(json_object_get(inputs, "request"), "entities");
  if (recorded) {
    char *text = json_dumps(recorded, JSON_COMPACT);
    rc = text ? dome_compile_load_entities(text, strlen(text), "request.entities", rules->schema, &entities,
                                           err)
              : dome_error_set(err, ENOMEM, "kernel rules");
    free(text);
    if (rc < 0) {
      cedar_policy_set_free(set);
      return rc;
    }
  }
  struct dome_rule_tables tables;
  struct dome_compile_options compile = {
      .agent = agent, .policy_version = json_string_value(json_object_get(inputs, "policy_version"))};
  rc = dome_compile_tables(set, entities, &compile, &tables, err);
  cedar_entities_free(entities);
  cedar_policy_set_free(set);
  if (rc < 0) {
    dome_rule_tables_free(&tables);
    return dome_error_wrap(err, "compile `%s` for agent `%s`", rules->file, agent);
  }
  struct replay_kernel *k = calloc(1, sizeof *k);
  if (k == NULL || (k->denials = json_array()) == NULL) {
    free(k);
    dome_rule_tables_free(&tables);
    return dome_error_set(err, ENOMEM, "kernel rules");
  }
  /* BPF-LSM programs are global (scoped by cgroup id): only the cgroup programs, attached to the jail's
   * leaf, are used here. */
  struct dome_kernel_options options = {.level = DOME_LEVEL_REDUCED};
  rc = dome_kernel_open(&k->kernel, &options, err);
  if (rc == 0) rc = dome_kernel_install_tables(k->kernel, 0, &tables, err);
  dome_rule_tables_free(&tables);
  if (rc < 0) {
    replay_kernel_close(k);
    return dome_error_wrap(err, "kernel enforcement");
  }
  *out = k;
  return 0;
}

int replay_kernel_attach(struct replay_kernel *k, const struct jail_cgroup *leaf, dome_error *err) {
  struct dome_kernel_jail jail = {.cgroup_fd = leaf->fd, .cgroup_id = leaf->id, .ruleset = 0};
  int rc = dome_kernel_attach(k->kernel, &jail, &k->attachment, err);
  if (rc < 0) return dome_error_wrap(err, "attach kernel rules to `%s`", leaf->path);
  k->cgroup_id = leaf->id;
  k->start_ns = monotonic_ns();
  return 0;
}

static void collect(void *context, const struct dome_denial *denial) {
  struct replay_kernel *k = context;
  if (denial->cgroup_id != k->cgroup_id) return;
  if (json_array_size(k->denials) >= DOME_KERNEL_DENIALS_KEPT) {
    k->dropped++;
    return;
  }
  json_t *entry = dome_denial_to_json(denial, k->start_ns);
  if (entry) json_array_append_new(k->denials, entry);
}

json_t *replay_kernel_finish(struct replay_kernel *k) {
  if (k->attachment) {
    dome_error ignored;
    dome_kernel_poll_denials(k->kernel, 0, collect, k, &ignored);
    dome_kernel_detach(k->kernel, k->attachment);
    k->attachment = NULL;
  }
  return json_incref(k->denials);
}

const char *replay_kernel_level(const struct replay_kernel *k) {
  return k ? dome_enforcement_level_name(dome_kernel_level(k->kernel)) : "none";
}
