/* Kernel-level rules for a recorded or re-run execution: the rules' fs:/net: part (after the shipped
 * baseline) compiled for the agent (policy/compile/compile.h) with the entity data recorded with its
 * authorization. supervisor/exec enforces the tables on the jail's cgroup leaf only and collects the
 * kernel's denials. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "policy/compile/compile.h"
#include "supervisor/kernel/kernel.h"
#include "supervisor/replay/replay_internal.h"

int replay_kernel_tables(const struct simulate_policy *rules, const json_t *inputs,
                         struct dome_rule_tables *tables, dome_error *err) {
  dome_rule_tables_init(tables);
  const char *agent = json_string_value(json_object_get(inputs, "agent"));
  if (agent == NULL) return dome_error_set(err, EINVAL, "kernel rules: the execution names no agent");
  if (dome_kernel_probe_level() == DOME_LEVEL_NONE) return 0;
  cedar_policy_set *set = NULL;
  int rc = dome_compile_load_policies(rules->text, rules->length, rules->file, &set, err);
  if (rc < 0) return rc;
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
  struct dome_compile_options compile = {
      .agent = agent, .policy_version = json_string_value(json_object_get(inputs, "policy_version"))};
  rc = dome_compile_tables(set, entities, &compile, tables, err);
  cedar_entities_free(entities);
  cedar_policy_set_free(set);
  if (rc < 0) {
    dome_rule_tables_free(tables);
    return dome_error_wrap(err, "compile `%s` for agent `%s`", rules->file, agent);
  }
  return 1;
}
