/* Gateway grants, delegated identity and the Cedar entities of an mcp:* request. */
#include <errno.h>
#include <string.h>

#include "supervisor/control/control.h"
#include "supervisor/gateway/gateway.h"

static bool contains(json_t *array, const char *value) {
  size_t i;
  json_t *item;
  json_array_foreach(
      array, i, item) if (json_is_string(item) && strcmp(json_string_value(item), value) == 0) return true;
  return false;
}

bool gateway_agent_granted(json_t *agent, const char *gateway) {
  if (agent == NULL || gateway == NULL) return false;
  json_t *grants = control_agent_record_grants(agent);
  bool granted = contains(grants, gateway);
  json_decref(grants);
  return granted;
}

int gateway_delegation_resolve(json_t *agent, const char *requested, const char **actas, dome_error *err) {
  const char *name = json_string_value(json_object_get(agent, "name"));
  if (name == NULL) name = "?";
  const char *bound = json_string_value(json_object_get(agent, "act_as")); /* token minted --act-as */
  if (bound == NULL) bound = json_string_value(json_object_get(agent, "delegates_to"));
  if (bound && bound[0] == '\0') bound = NULL;
  *actas = NULL;
  if (requested && requested[0] == '\0') requested = NULL;
  if (requested && bound == NULL)
    return dome_error_set(err, EPERM,
                          "agent `%s` may not act as `%.200s` (X-Dome-Act-As needs `dome agents register "
                          "--delegates-to` or a token from `dome agents token --act-as`)",
                          name, requested);
  if (requested && strcmp(requested, bound) != 0)
    return dome_error_set(err, EPERM, "agent `%s` may not act as `%.200s`: this token acts only as `%s`",
                          name, requested, bound);
  *actas = bound;
  return 0;
}

bool gateway_delegation_granted(json_t *agent, json_t *parent, const char *gateway) {
  if (agent == NULL || gateway == NULL) return false;
  json_t *grants, *capabilities;
  gateway_delegation_effective(agent, parent, &grants, &capabilities);
  bool granted = contains(grants, gateway);
  json_decref(grants);
  json_decref(capabilities);
  return granted;
}

int gateway_delegation_check(json_t *agent, json_t *parent, const char *actas, dome_error *err) {
  if (actas == NULL || actas[0] == '\0') return 0;
  const char *name = json_string_value(json_object_get(agent, "name"));
  if (name == NULL) name = "?";
  const char *delegates_to = json_string_value(json_object_get(agent, "delegates_to"));
  json_t *act_as = json_object_get(agent, "act_as");
  bool allowed = (delegates_to && strcmp(delegates_to, actas) == 0) ||
                 (json_is_array(act_as) && contains(act_as, actas)) ||
                 (json_is_string(act_as) && strcmp(json_string_value(act_as), actas) == 0);
  if (!allowed)
    return dome_error_set(err, EPERM, "agent `%s` may not act as `%.200s` (not registered as its delegate)",
                          name, actas);
  if (parent == NULL)
    return dome_error_set(err, EPERM, "agent `%s` acts as `%.200s`, which is not a registered agent", name,
                          actas);
  const char *status = json_string_value(json_object_get(parent, "status"));
  if (status && strcmp(status, "active") != 0)
    return dome_error_set(err, EPERM, "agent `%s` acts as `%.200s`, which is %s", name, actas, status);
  return 0;
}

static json_t *intersection(json_t *a, json_t *b) {
  json_t *result = json_array();
  size_t i;
  json_t *item;
  json_array_foreach(a, i, item) if (json_is_string(item) && contains(b, json_string_value(item)) &&
                                     !contains(result, json_string_value(item)))
      json_array_append(result, item);
  return result;
}

void gateway_delegation_effective(json_t *agent, json_t *parent, json_t **grants, json_t **capabilities) {
  json_t *own_grants = control_agent_record_grants(agent);
  json_t *own_capabilities = json_object_get(agent, "capabilities");
  if (!json_is_array(own_capabilities)) own_capabilities = NULL;
  if (parent == NULL) {
    *grants = own_grants;
    *capabilities = own_capabilities ? json_deep_copy(own_capabilities) : json_array();
    return;
  }
  json_t *parent_grants = control_agent_record_grants(parent);
  json_t *parent_capabilities = json_object_get(parent, "capabilities");
  *grants = intersection(own_grants, parent_grants);
  json_t *empty = json_array();
  *capabilities = intersection(own_capabilities ? own_capabilities : empty,
                               json_is_array(parent_capabilities) ? parent_capabilities : empty);
  json_decref(empty);
  json_decref(own_grants);
  json_decref(parent_grants);
}

static json_t *uid(const char *type, const char *id) {
  return json_pack("{s:s,s:s}", "type", type, "id", id);
}

json_t *gateway_cedar_entities(const char *agent, json_t *capabilities, json_t *grants, const char *tool,
                               const char *protocol, const char *capability, const char *tool_gateway) {
  json_t *entities = json_array();
  json_t *gateways = json_array(); /* every gateway named, once */
  json_t *parents = json_array();
  size_t i;
  json_t *grant;
  json_array_foreach(grants, i, grant) {
    if (!json_is_string(grant) || contains(gateways, json_string_value(grant))) continue;
    json_array_append(gateways, grant);
    json_array_append_new(parents, uid("Dome::Gateway", json_string_value(grant)));
  }
  json_t *caps = json_array();
  json_array_foreach(capabilities, i, grant) if (json_is_string(grant)) json_array_append(caps, grant);
  json_array_append_new(entities, json_pack("{s:o,s:{s:o},s:o}", "uid", uid("Dome::Agent", agent), "attrs",
                                            "capabilities", caps, "parents", parents));
  const char *home = tool_gateway ? tool_gateway : GATEWAY_DEFAULT;
  json_t *attrs = json_pack("{s:s}", "protocol", protocol ? protocol : "streamable-http");
  if (capability) json_object_set_new(attrs, "capability", json_string(capability));
  json_array_append_new(entities, json_pack("{s:o,s:o,s:[o]}", "uid", uid("Dome::MCPTool", tool), "attrs",
                                            attrs, "parents", uid("Dome::Gateway", home)));
  if (!contains(gateways, home)) json_array_append_new(gateways, json_string(home));
  json_array_foreach(gateways, i, grant) json_array_append_new(
      entities, json_pack("{s:o,s:{},s:[]}", "uid", uid("Dome::Gateway", json_string_value(grant)), "attrs",
                          "parents"));
  json_decref(gateways);
  return entities;
}
