/* `dome run --rules`: compile the agent's tables and enforce them for one jail run — network tables through
 * the kernel's cgroup programs on the jail's cgroup2 leaf (plus egress plumbing through supervisor/net when
 * they permit more than loopback), file tables through Landlock path rules at the reduced level — and
 * collect the kernel's denial events for the result. */
#ifndef DOME_CLI_RUN_RULES_H
#define DOME_CLI_RUN_RULES_H

#include <jansson.h>
#include <stdbool.h>

#include "supervisor/jail/jail.h"
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
  enum dome_enforcement_level level;
  unsigned degraded_entries; /* file entries Landlock could not express, dropped under --allow-degraded */
  char degraded_reason[1024];
  struct dome_landlock_path_rules path_rules;
  char resolv_conf[1024];
  bool has_resolver;
  bool egress;
  struct dome_kernel *kernel;
  struct dome_kernel_jail_hook kernel_hook;
  struct dome_net *net;
  struct dome_net_hook net_hook;
  uint64_t cgroup_id;
  uint64_t start_ns; /* CLOCK_MONOTONIC at the jail's attachment: the base of the denials' offset_ms */
  /* denial collection during the run (a thread started once the jail is attached) */
  json_t *denials;
  size_t denial_count; /* all delivered, also those beyond the kept bound */
  int stop_fd;
  bool poller_running;
  unsigned long poller;
};

/* Compile and prepare (kernel programs loaded, tables installed, Landlock rules built, egress opened).
 * Fills config's path_rules, resolv_conf, hosts_dns and hooks. Returns 0 or -errno with err naming the
 * flag ("--rules: ...", "--agent: ..."); run_rules_release in every case. */
int run_rules_prepare(struct run_rules *rules, const struct run_rules_options *options,
                      struct jail_config *config, dome_error *err);

/* After jail_run: stop collecting, drain the ring buffer, detach, tear the egress down. */
void run_rules_finish(struct run_rules *rules);

/* The result's additions: "denials" [{time, pid, hook, object, policy, entry}], "rules" {agent, level,
 * degraded, degraded_entries, reason?, network_entries, file_entries, egress}. */
void run_rules_report(const struct run_rules *rules, json_t *result);

void run_rules_release(struct run_rules *rules);

#endif
