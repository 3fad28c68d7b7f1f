/* The JSON forms of kernel events (kernel.h, dome_denial_to_json and dome_denial_shadow_to_json): one shape
 * for results and records. */
#include <jansson.h>
#include <stdio.h>

#include "supervisor/kernel/kernel.h"

/* hook, object, pid, offset_ms and, for a network or file hook, action. */
static json_t *event_json(const struct dome_denial *denial, uint64_t start_ns) {
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
  if (action[0] && json_object_set_new(entry, "action", json_string(action)) < 0) {
    json_decref(entry);
    return NULL;
  }
  return entry;
}

json_t *dome_denial_to_json(const struct dome_denial *denial, uint64_t start_ns) {
  json_t *entry = event_json(denial, start_ns);
  if (entry == NULL) return NULL;
  if (denial->policy_id && json_object_set_new(entry, "policy_id", json_string(denial->policy_id)) < 0) {
    json_decref(entry);
    return NULL;
  }
  return entry;
}

/* {"decision": "allow"|"deny", "determining": [policy] or []} */
static json_t *side(bool allowed, const char *policy_id) {
  return json_pack("{s:s,s:o}", "decision", allowed ? "allow" : "deny", "determining",
                   policy_id ? json_pack("[s]", policy_id) : json_array());
}

json_t *dome_denial_shadow_to_json(const struct dome_denial *denial, uint64_t start_ns) {
  if (denial->kind != DOME_EVENT_SHADOW) return NULL;
  json_t *entry = event_json(denial, start_ns);
  if (entry == NULL) return NULL;
  json_t *active = side(denial->allowed, denial->policy_id);
  json_t *shadow = side(denial->shadow_allowed, denial->shadow_policy_id);
  if (active == NULL || shadow == NULL || json_object_set_new(entry, "active", active) < 0 ||
      json_object_set_new(entry, "shadow", shadow) < 0) {
    json_decref(entry);
    return NULL;
  }
  return entry;
}
