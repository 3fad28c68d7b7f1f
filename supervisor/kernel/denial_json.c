/* The JSON form of a kernel denial (kernel.h, dome_denial_to_json): one shape for results and records. */
#include <jansson.h>
#include <stdio.h>

#include "supervisor/kernel/kernel.h"

json_t *dome_denial_to_json(const struct dome_denial *denial, uint64_t start_ns) {
  uint64_t offset_ms = denial->time_ns > start_ns ? (denial->time_ns - start_ns) / 1000000u : 0;
  json_t *entry =
      json_pack("{s:s,s:s,s:I,s:I}", "hook", dome_hook_name(denial->hook), "object", denial->object, "pid",
                (json_int_t)denial->pid, "offset_ms", (json_int_t)offset_ms);
  if (entry == NULL) return NULL;
  char action[16] = "";
  switch (dome_hook_kind(denial->hook)) {
    case DOME_HOOK_KIND_NETWORK:
      snprintf(action, sizeof action, "net:%s", dome_net_action_name(denial->net_action));
      break;
    case DOME_HOOK_KIND_FILE:
      snprintf(action, sizeof action, "fs:%s", dome_file_access_name(denial->file_access));
      break;
    case DOME_HOOK_KIND_OTHER:
      break;
  }
  if ((action[0] && json_object_set_new(entry, "action", json_string(action)) < 0) ||
      (denial->policy_id && json_object_set_new(entry, "policy_id", json_string(denial->policy_id)) < 0)) {
    json_decref(entry);
    return NULL;
  }
  return entry;
}
