/* `dome run --rules FILE --agent NAME`: compile the tables, read the egress mode, report (run_rules.h). */
#include "supervisor/cli/run_rules.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "policy/compile/compile.h"

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

int run_rules_prepare(struct run_rules *rules, const struct run_rules_options *options, dome_error *err) {
  memset(rules, 0, sizeof *rules);
  dome_rule_tables_init(&rules->tables);
  struct dome_compile_options compile = {.agent = options->agent};
  int rc = dome_compile_files(options->rules_path, options->entities_path, &compile, &rules->tables, err);
  if (rc < 0) return dome_error_wrap(err, "--rules");
  return net_config_from_environment(&rules->net, err);
}

/* When the kernel refused: the attachment's monotonic base plus offset_ms, as UTC. */
static json_t *denial_time(uint64_t start_ns, json_t *denial) {
  struct timespec real, mono;
  clock_gettime(CLOCK_REALTIME, &real);
  clock_gettime(CLOCK_MONOTONIC, &mono);
  int64_t at_mono =
      (int64_t)start_ns + (int64_t)json_integer_value(json_object_get(denial, "offset_ms")) * 1000000;
  int64_t now_mono = (int64_t)mono.tv_sec * 1000000000 + mono.tv_nsec;
  int64_t at = (int64_t)real.tv_sec * 1000000000 + real.tv_nsec - (now_mono - at_mono);
  time_t seconds = (time_t)(at / 1000000000);
  struct tm tm;
  gmtime_r(&seconds, &tm);
  char stamp[64];
  snprintf(stamp, sizeof stamp, "%04d-%02d-%02dT%02d:%02d:%02d.%09ldZ", tm.tm_year + 1900, tm.tm_mon + 1,
           tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (long)(at % 1000000000));
  return json_string(stamp);
}

void run_rules_report(const struct run_rules *rules, const struct exec_outcome *outcome, json_t *denials,
                      json_t *result) {
  json_t *list = json_array();
  size_t i;
  json_t *denial;
  json_array_foreach(denials, i, denial) {
    json_t *entry = json_deep_copy(denial);
    if (entry == NULL) continue;
    json_t *policy = json_object_get(denial, "policy_id");
    json_object_set_new(entry, "policy", policy ? json_incref(policy) : json_null());
    json_object_set_new(entry, "time", denial_time(outcome->kernel_start_ns, denial));
    json_array_append_new(list, entry);
  }
  json_object_set_new(result, "denials", list);
  json_t *o = json_pack("{s:s, s:s, s:b, s:i, s:i, s:i, s:b}", "agent",
                        rules->tables.agent ? rules->tables.agent : "", "level", outcome->kernel_level,
                        "degraded", outcome->degraded, "degraded_entries", (int)outcome->degraded_entries,
                        "network_entries", (int)rules->tables.net_count, "file_entries",
                        (int)rules->tables.file_count, "egress", outcome->egress);
  if (o && outcome->degraded)
    json_object_set_new(o, "degraded_reason", json_string(outcome->degraded_reason));
  if (o) json_object_set_new(o, "denials_total", json_integer((json_int_t)outcome->denial_count));
  json_object_set_new(result, "rules", o);
}

void run_rules_release(struct run_rules *rules) {
  dome_rule_tables_free(&rules->tables);
}
