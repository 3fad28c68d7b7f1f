/* Gateways (gateways.json: name -> {created}; Default is implicit) and the grants of agents (the
 * `gateways` member of an agent's record in agents.json; absent means ["Default"], so agents registered
 * before gateways existed keep their access). */
#include <errno.h>
#include <string.h>

#include "supervisor/control/store_internal.h"

static bool exists_locked(control_store *store, const char *name) {
  return strcmp(name, CONTROL_GATEWAY_DEFAULT) == 0 || json_object_get(store->gateways, name) != NULL;
}

int control_gateway_create(control_store *store, const char *name, dome_error *err) {
  if (name == NULL || !control_name_valid(name))
    return dome_error_set(err, EINVAL, "--name: invalid gateway name `%s`", name ? name : "");
  pthread_mutex_lock(&store->lock);
  int rc = 0;
  if (exists_locked(store, name)) {
    rc = dome_error_set(err, EEXIST, "gateway `%s` exists", name);
  } else {
    json_t *next = json_deep_copy(store->gateways);
    json_object_set_new(next, name, json_pack("{s:I}", "created", (json_int_t)control_store_now()));
    rc = control_store_replace_json(store, "gateways.json", &store->gateways, next, err);
  }
  pthread_mutex_unlock(&store->lock);
  return rc;
}

bool control_gateway_exists(control_store *store, const char *name) {
  if (name == NULL) return false;
  pthread_mutex_lock(&store->lock);
  bool exists = exists_locked(store, name);
  pthread_mutex_unlock(&store->lock);
  return exists;
}

json_t *control_agent_record_grants(json_t *agent) {
  json_t *grants = json_object_get(agent, "gateways");
  if (!json_is_array(grants)) return json_pack("[s]", CONTROL_GATEWAY_DEFAULT);
  json_t *copy = json_array();
  size_t i;
  json_t *grant;
  json_array_foreach(grants, i, grant) if (json_is_string(grant)) json_array_append(copy, grant);
  return copy;
}

static bool contains(json_t *array, const char *value) {
  size_t i;
  json_t *item;
  json_array_foreach(array, i, item) if (strcmp(json_string_value(item), value) == 0) return true;
  return false;
}

json_t *control_agent_grants(control_store *store, const char *agent) {
  pthread_mutex_lock(&store->lock);
  json_t *record = agent ? json_object_get(store->agents, agent) : NULL;
  json_t *grants = record ? control_agent_record_grants(record) : NULL;
  pthread_mutex_unlock(&store->lock);
  return grants;
}

json_t *control_gateway_list(control_store *store) {
  pthread_mutex_lock(&store->lock);
  json_t *names = json_pack("[s]", CONTROL_GATEWAY_DEFAULT);
  const char *name;
  json_t *value;
  json_object_foreach(store->gateways, name, value) json_array_append_new(names, json_string(name));
  json_t *list = json_array();
  size_t i;
  json_array_foreach(names, i, value) {
    const char *gateway = json_string_value(value);
    json_t *agents = json_array(), *tools = json_array();
    const char *key;
    json_t *record;
    json_object_foreach(store->agents, key, record) {
      json_t *grants = control_agent_record_grants(record);
      if (contains(grants, gateway)) json_array_append_new(agents, json_string(key));
      json_decref(grants);
    }
    json_object_foreach(store->tools, key, record) {
      const char *tool_gateway = json_string_value(json_object_get(record, "gateway"));
      if (strcmp(tool_gateway ? tool_gateway : CONTROL_GATEWAY_DEFAULT, gateway) == 0)
        json_array_append_new(tools, json_string(key));
    }
    json_array_append_new(list,
                          json_pack("{s:s,s:o,s:o}", "name", gateway, "agents", agents, "tools", tools));
  }
  pthread_mutex_unlock(&store->lock);
  json_decref(names);
  return list;
}

static int change_grant(control_store *store, const char *agent, const char *gateway, bool grant,
                        json_t **out, dome_error *err) {
  if (out) *out = NULL;
  pthread_mutex_lock(&store->lock);
  int rc = 0;
  json_t *record = agent ? json_object_get(store->agents, agent) : NULL;
  if (record == NULL) {
    rc = dome_error_set(err, ENOENT, "agent `%s` not found", agent ? agent : "");
  } else if (gateway == NULL || !exists_locked(store, gateway)) {
    rc = dome_error_set(err, ENOENT, "gateway `%s` not found", gateway ? gateway : "");
  } else {
    json_t *grants = control_agent_record_grants(record);
    json_t *changed = json_array();
    size_t i;
    json_t *item;
    json_array_foreach(grants, i, item) if (strcmp(json_string_value(item), gateway) != 0)
        json_array_append(changed, item);
    if (grant) json_array_append_new(changed, json_string(gateway));
    json_decref(grants);
    json_t *next = json_deep_copy(store->agents);
    json_t *copy = json_object_get(next, agent);
    json_object_set(copy, "gateways", changed);
    json_object_set_new(copy, "updated", json_integer(control_store_now()));
    rc = control_store_replace_json(store, "agents.json", &store->agents, next, err);
    if (rc == 0 && out)
      *out = changed;
    else
      json_decref(changed);
  }
  pthread_mutex_unlock(&store->lock);
  return rc;
}

int control_gateway_grant(control_store *store, const char *agent, const char *gateway, json_t **grants,
                          dome_error *err) {
  return change_grant(store, agent, gateway, true, grants, err);
}

int control_gateway_revoke(control_store *store, const char *agent, const char *gateway, json_t **grants,
                           dome_error *err) {
  return change_grant(store, agent, gateway, false, grants, err);
}
