/* `dome run --rules FILE --agent NAME`: the agent's decision tables compiled from the rules (with the
 * shipped baseline) and the egress mode, for supervisor/exec to enforce; the result's report. */
#ifndef DOME_CLI_RUN_RULES_H
#define DOME_CLI_RUN_RULES_H

#include <jansson.h>
#include <stdbool.h>

#include "supervisor/exec/exec.h"
#include "supervisor/kernel/kernel.h"
#include "supervisor/net/net.h"

struct run_rules_options {
  const char *rules_path;
  const char *agent;
  const char *entities_path; /* may be NULL */
  bool allow_degraded;
};

struct run_rules {
  struct dome_rule_tables tables;
  struct dome_net_config net;
};

/* Compile the tables and read the egress mode (DOME_NET_MODE ...). Returns 0 or -errno with err naming
 * the flag ("--rules: ..."); run_rules_release in every case. */
int run_rules_prepare(struct run_rules *rules, const struct run_rules_options *options, dome_error *err);

/* The result's "denials" [{time, pid, hook, object, action?, policy, policy_id?, offset_ms}] (from the
 * run's result) and "rules" {agent, level, degraded, degraded_entries, degraded_reason?, network_entries,
 * file_entries, egress, denials_total}. */
void run_rules_report(const struct run_rules *rules, const struct exec_outcome *outcome, json_t *denials,
                      json_t *result);

void run_rules_release(struct run_rules *rules);

#endif
