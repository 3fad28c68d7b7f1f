/* Configuration defaults, the baseline Landlock rules and result release. */
#include <stdlib.h>
#include <string.h>

#include "supervisor/jail/jail.h"

const struct jail_path_rule jail_baseline_path_rules[] = {
    {"/", JAIL_ACCESS_READ | JAIL_ACCESS_EXEC},
    {"/workspace", JAIL_ACCESS_READ | JAIL_ACCESS_WRITE | JAIL_ACCESS_EXEC},
    {"/tmp", JAIL_ACCESS_READ | JAIL_ACCESS_WRITE | JAIL_ACCESS_EXEC},
};
const size_t jail_baseline_path_rule_count =
    sizeof jail_baseline_path_rules / sizeof jail_baseline_path_rules[0];

void jail_config_init(struct jail_config *config) {
  memset(config, 0, sizeof *config);
  config->stdin_fd = -1;
  config->cancel_fd = -1;
}

const char *jail_enforcement_name(enum jail_enforcement level) {
  switch (level) {
    case JAIL_ENFORCEMENT_FULL:
      return "full";
    case JAIL_ENFORCEMENT_HYBRID:
      return "hybrid";
    case JAIL_ENFORCEMENT_REDUCED:
      return "reduced";
  }
  return "unknown";
}

void jail_result_release(struct jail_result *result) {
  if (!result) return;
  free(result->stdout_data);
  free(result->stderr_data);
  for (size_t i = 0; i < result->output_path_count; i++) free(result->output_paths[i]);
  free(result->output_paths);
  for (size_t i = 0; i < result->copy_out_error_count; i++) free(result->copy_out_errors[i]);
  free(result->copy_out_errors);
  memset(result, 0, sizeof *result);
}
