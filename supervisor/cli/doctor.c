/* dome doctor [--json]: what the host offers, what dome will use, and why a layer is missing. */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "supervisor/cli/command.h"
#include "supervisor/common/units.h"
#include "supervisor/control/control.h"
#include "supervisor/jail/jail.h"
#include "supervisor/kernel/kernel.h"
#include "supervisor/net/net.h"

static const char *yes(bool value) {
  return value ? "yes" : "no";
}

/* The running domed's journal side (control command `status`), or NULL when none answers. */
static json_t *domed_status(void) {
  json_t *status = NULL;
  dome_error err = {0};
  if (control_call(control_socket_path(NULL), "status", NULL, &status, &err) < 0) return NULL;
  return status;
}

static void print_journal_side(json_t *status) {
  if (status == NULL) {
    printf("blob store       unknown (domed not reachable on its control socket)\n");
    return;
  }
  json_t *blobs = json_object_get(status, "blobs");
  char used[32], quota[32];
  uint64_t quota_bytes = (uint64_t)json_integer_value(json_object_get(blobs, "quota_bytes"));
  printf("blob store       %s in %lld blobs of %s (blob_quota), %lld refused by a quota\n",
         dome_format_size((uint64_t)json_integer_value(json_object_get(blobs, "bytes")), used, sizeof used),
         (long long)json_integer_value(json_object_get(blobs, "blobs")),
         quota_bytes ? dome_format_size(quota_bytes, quota, sizeof quota) : "no limit",
         (long long)json_integer_value(json_object_get(blobs, "refused")));
  const char *owner;
  json_t *bytes;
  json_object_foreach(json_object_get(blobs, "owners"), owner, bytes)
      printf("  capability %-20s %s\n", owner,
             dome_format_size((uint64_t)json_integer_value(bytes), used, sizeof used));
  printf("journal refused  %lld events (each failed its call closed)\n",
         (long long)json_integer_value(json_object_get(status, "journal_refused")));
  json_t *pool = json_object_get(status, "jail_pool");
  long long size = (long long)json_integer_value(json_object_get(pool, "pool_size"));
  if (size == 0) {
    printf("jail pool        off (pool_size = 0: every call builds its jail)\n");
    return;
  }
  long long refills = (long long)json_integer_value(json_object_get(pool, "refills"));
  double seconds = json_number_value(json_object_get(pool, "refill_seconds"));
  printf(
      "jail pool        %lld ready, %lld per limits class (pool_size); %lld hits, %lld misses, %lld "
      "discarded; %lld prepared, %.1f ms each, %lld failed\n",
      (long long)json_integer_value(json_object_get(pool, "ready")), size,
      (long long)json_integer_value(json_object_get(pool, "hits")),
      (long long)json_integer_value(json_object_get(pool, "misses")),
      (long long)json_integer_value(json_object_get(pool, "discards")), refills,
      refills ? seconds * 1e3 / (double)refills : 0.0,
      (long long)json_integer_value(json_object_get(pool, "refill_failures")));
}

static int doctor_main(int argc, char **argv) {
  bool json = false;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--json") == 0) {
      json = true;
    } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      printf(
          "usage: dome doctor [--json]\n\nReport the isolation layers this host offers and the enforcement "
          "level "
          "dome runs jails with.\n");
      return 0;
    } else {
      fprintf(stderr, "dome doctor: unknown option `%s`\n", argv[i]);
      return DOME_EXIT_FAILURE;
    }
  }
  struct jail_host_report report;
  dome_error err = {0};
  if (jail_probe_host(&report, &err) < 0) {
    fprintf(stderr, "dome doctor: %s\n", err.message);
    return DOME_EXIT_FAILURE;
  }
  const char *mode = report.cgroup_unified ? "unified" : report.cgroup_hybrid ? "hybrid" : "none";
  /* The kernel-rule layers (dome run --rules, domed): which level the Cedar-compiled tables get. */
  enum dome_enforcement_level level = dome_kernel_probe_level();
  if (level > DOME_LEVEL_NONE && !report.cgroup_bpf) level = DOME_LEVEL_NONE;
  const char *level_text = level == DOME_LEVEL_FULL ? "BPF-LSM + cgroup BPF + Landlock"
                           : level == DOME_LEVEL_REDUCED
                               ? "cgroup BPF for the network, Landlock for files "
                                 "(BPF-LSM unavailable: a forbid inside a permitted "
                                 "subtree needs --allow-degraded)"
                               : "none: cgroup BPF cannot be attached";
  /* Shadow rules in the kernel (dome rules apply --shadow): the BPF programs decide under the shadow tables
   * too where they decide at all; Landlock (files without BPF-LSM) has no second ruleset. */
  const char *shadow = level == DOME_LEVEL_FULL      ? "network+files"
                       : level == DOME_LEVEL_REDUCED ? "network"
                                                     : "none";
  const char *shadow_text = level == DOME_LEVEL_FULL ? "exec.shadow for network and file rules"
                            : level == DOME_LEVEL_REDUCED
                                ? "exec.shadow for network rules only: file rules are Landlock's, which "
                                  "cannot shadow; that needs BPF-LSM"
                                : "unavailable: no cgroup BPF";
  struct dome_net_host_report net;
  dome_net_probe_host(NULL, &net);
  if (json) {
    json_t *reasons = json_array();
    char copy[sizeof report.reasons];
    memcpy(copy, report.reasons, sizeof copy);
    for (char *line = strtok(copy, "\n"); line; line = strtok(NULL, "\n"))
      json_array_append_new(reasons, json_string(line));
    json_t *net_reasons = json_array();
    char net_copy[sizeof net.reasons];
    memcpy(net_copy, net.reasons, sizeof net_copy);
    for (char *line = strtok(net_copy, "\n"); line; line = strtok(NULL, "\n"))
      json_array_append_new(net_reasons, json_string(line));
    json_t *o = json_pack("{s:s, s:s, s:s, s:b, s:b, s:i, s:b, s:b, s:b, s:b, s:s, s:o}", "cgroup_mode", mode,
                          "cgroup2_mount", report.cgroup2_mount, "controllers", report.controllers,
                          "user_namespaces", report.user_namespaces, "seccomp", report.seccomp,
                          "landlock_abi", report.landlock_abi, "cgroup_bpf", report.cgroup_bpf, "bpf_lsm",
                          report.bpf_lsm, "btf", report.btf, "clone_into_cgroup", report.clone_into_cgroup,
                          "enforcement", jail_enforcement_name(report.enforcement), "reasons", reasons);
    json_object_set_new(o, "kernel_rules_level", json_string(dome_enforcement_level_name(level)));
    json_object_set_new(o, "kernel_shadow", json_string(shadow));
    json_t *egress = json_pack("{s:b, s:b, s:b, s:b, s:b, s:s, s:o}", "routed_available",
                               net.routed_available, "user_available", net.user_available, "ip_forward",
                               net.ip_forward, "nftables", net.nftables, "pasta", net.pasta, "auto_mode",
                               dome_net_mode_name(net.auto_mode), "reasons", net_reasons);
    if (egress) {
      json_object_set_new(egress, "ipvlan", json_boolean(net.ipvlan));
      json_object_set_new(egress, "macvlan", json_boolean(net.macvlan));
    }
    json_object_set_new(o, "egress", egress);
    json_t *status = domed_status();
    if (status) {
      json_object_set(o, "blobs", json_object_get(status, "blobs"));
      json_object_set(o, "journal_refused", json_object_get(status, "journal_refused"));
      json_object_set(o, "jail_pool", json_object_get(status, "jail_pool"));
      json_decref(status);
    }
    json_dumpf(o, stdout, JSON_COMPACT);
    fputc('\n', stdout);
    json_decref(o);
    return 0;
  }
  printf("cgroups          %s (controllers: %s; cgroup2 at %s)\n", mode,
         report.controllers[0] ? report.controllers : "none",
         report.cgroup2_mount[0] ? report.cgroup2_mount : "-");
  printf("user namespaces  %s\n", yes(report.user_namespaces));
  printf("seccomp          %s\n", yes(report.seccomp));
  if (report.landlock_abi)
    printf("Landlock         ABI %d\n", report.landlock_abi);
  else
    printf("Landlock         no\n");
  printf("cgroup BPF       %s\n", yes(report.cgroup_bpf));
  printf("BPF-LSM          %s\n", yes(report.bpf_lsm));
  printf("BTF              %s\n", yes(report.btf));
  printf("enforcement      %s\n", jail_enforcement_name(report.enforcement));
  printf("kernel rules     %s (%s)\n", dome_enforcement_level_name(level), level_text);
  printf("kernel shadow    %s (%s)\n", shadow, shadow_text);
  printf("egress routed    %s\n", yes(net.routed_available));
  printf("egress user      %s (pasta %s, nftables %s)\n", yes(net.user_available), yes(net.pasta),
         yes(net.nftables));
  printf("egress mode      %s\n", dome_net_mode_name(net.auto_mode));
  printf("egress uplink    ipvlan %s, macvlan %s (opt-in: net_mode = ipvlan | macvlan)\n", yes(net.ipvlan),
         yes(net.macvlan));
  json_t *status = domed_status();
  print_journal_side(status);
  json_decref(status);
  if (report.reasons[0] || net.reasons[0]) {
    printf("\nmissing or degraded:\n");
    char copy[sizeof report.reasons];
    memcpy(copy, report.reasons, sizeof copy);
    for (char *line = strtok(copy, "\n"); line; line = strtok(NULL, "\n")) printf("  - %s\n", line);
    char net_copy[sizeof net.reasons];
    memcpy(net_copy, net.reasons, sizeof net_copy);
    for (char *line = strtok(net_copy, "\n"); line; line = strtok(NULL, "\n"))
      printf("  - egress: %s\n", line);
  }
  return 0;
}
DOME_COMMAND(doctor, "doctor", "report the isolation layers of this host and the enforcement level",
             doctor_main);
