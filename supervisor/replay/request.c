/* Rebuilding the authorization request a journal event records, for re-evaluation under other rules.
 *
 * The recorded form (docs/simulate-replay.md): `request` = {"principal": {type, id}, "action": {type, id},
 * "resource": {type, id}, "context": {...}, "entities": [...]} in Cedar's entities/context JSON formats,
 * exactly as domed handed them to the engine. Kernel-level requests on Dome::Path resources may omit the
 * path entities: a path is `in` each of its parent directories (schema), so the chain is added here. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "supervisor/replay/replay_internal.h"

#define PATH_MAX_COMPONENTS 256 /* parent chain of a Dome::Path, bounded */

bool replay_request_event_type(const char *type) {
  return type && (strcmp(type, "authz.decision") == 0 || strcmp(type, "exec.denial") == 0 ||
                  strcmp(type, "exec.access") == 0);
}

static void clear_entities(struct request_cache *cache) {
  json_decref(cache->entities_json);
  cedar_entities_free(cache->entities);
  cache->entities_json = NULL;
  cache->entities = NULL;
}

static void clear_context(struct request_cache *cache) {
  json_decref(cache->context_json);
  free(cache->context_action);
  cedar_context_free(cache->context);
  cache->context_json = NULL;
  cache->context_action = NULL;
  cache->context = NULL;
}

void replay_request_cache_clear(struct request_cache *cache) {
  clear_entities(cache);
  clear_context(cache);
  memset(cache, 0, sizeof *cache);
}

json_t *replay_request_uid_text(const cedar_uid_ref *uid) {
  char *text = NULL;
  size_t size = 0;
  FILE *out = open_memstream(&text, &size);
  if (out == NULL) return NULL;
  fprintf(out, "%s::\"", uid->type ? uid->type : "?");
  size_t length = uid->id ? (uid->id_length ? uid->id_length : strlen(uid->id)) : 0;
  for (size_t i = 0; i < length; i++) {
    unsigned char c = (unsigned char)uid->id[i];
    if (c == '"' || c == '\\')
      fprintf(out, "\\%c", c);
    else if (c == '\n')
      fputs("\\n", out);
    else if (c < 0x20 || c == 0x7f)
      fprintf(out, "\\u{%x}", c);
    else
      fputc(c, out);
  }
  fputc('"', out);
  fclose(out);
  json_t *result = json_stringn_nocheck(text, size);
  free(text);
  return result;
}

static int uid_of(json_t *value, const char *member, cedar_uid_ref *uid, char *message, size_t size) {
  json_t *type = json_object_get(value, "type"), *id = json_object_get(value, "id");
  if (!json_is_string(type) || !json_is_string(id)) {
    snprintf(message, size, "request.%s: expected {\"type\": string, \"id\": string}", member);
    return -EINVAL;
  }
  *uid = (cedar_uid_ref){json_string_value(type), json_string_value(id), json_string_length(id)};
  if (uid->id_length == 0) uid->id = "";
  return 0;
}

/* The request domed builds for mcp:call / mcp:discover (supervisor/domed/authz.c) from what an
 * authz.decision event without `request` records. The agent's capabilities and the tool's attributes are
 * not recorded there: the entities carry no attributes, so rules reading them error (reported). */
static json_t *reconstruct(json_t *event) {
  const char *agent = json_string_value(json_object_get(event, "agent"));
  const char *action = json_string_value(json_object_get(event, "action"));
  if (agent == NULL || action == NULL) return NULL;
  const char *gateway = json_string_value(json_object_get(event, "gateway"));
  const char *tool = json_string_value(json_object_get(event, "tool"));
  const char *mcp_tool = json_string_value(json_object_get(event, "mcp_tool"));
  const char *actas = json_string_value(json_object_get(event, "actas"));
  if (gateway == NULL) gateway = "Default";
  if (tool == NULL) tool = "code-sandbox";
  json_t *context = json_pack("{s:s}", "tool", mcp_tool ? mcp_tool : "");
  if (actas && actas[0]) json_object_set_new(context, "actas", json_string(actas));
  return json_pack(
      "{s:{s:s,s:s},s:{s:s,s:s},s:{s:s,s:s},s:o,s:[{s:{s:s,s:s},s:{},s:[{s:s,s:s}]},"
      "{s:{s:s,s:s},s:{},s:[{s:s,s:s}]},{s:{s:s,s:s},s:{},s:[]}]}",
      "principal", "type", "Dome::Agent", "id", agent, "action", "type", "Dome::Action", "id", action,
      "resource", "type", "Dome::MCPTool", "id", tool, "context", context, "entities", "uid", "type",
      "Dome::Agent", "id", agent, "attrs", "parents", "type", "Dome::Gateway", "id", gateway, "uid", "type",
      "Dome::MCPTool", "id", tool, "attrs", "parents", "type", "Dome::Gateway", "id", gateway, "uid", "type",
      "Dome::Gateway", "id", gateway, "attrs", "parents");
}

static bool has_entity(json_t *entities, const char *type, const char *id) {
  size_t i;
  json_t *entity;
  json_array_foreach(entities, i, entity) {
    json_t *uid = json_object_get(entity, "uid");
    if (json_object_get(uid, "__entity")) uid = json_object_get(uid, "__entity");
    const char *t = json_string_value(json_object_get(uid, "type"));
    const char *d = json_string_value(json_object_get(uid, "id"));
    if (t && d && strcmp(t, type) == 0 && strcmp(d, id) == 0) return true;
  }
  return false;
}

/* Add Dome::Path entities for `path` and each parent directory, each `in` its parent (when missing). */
static int add_path_chain(json_t *entities, const char *path) {
  if (path[0] != '/') return 0;
  char *current = strdup(path);
  if (current == NULL) return -ENOMEM;
  for (int depth = 0; depth < PATH_MAX_COMPONENTS; depth++) {
    size_t length = strlen(current);
    while (length > 1 && current[length - 1] == '/') current[--length] = '\0';
    char parent[4096] = "";
    if (length > 1) {
      char *slash = strrchr(current, '/');
      size_t plen = slash == current ? 1 : (size_t)(slash - current);
      if (plen >= sizeof parent) break;
      memcpy(parent, current, plen);
      parent[plen] = '\0';
    }
    if (!has_entity(entities, "Dome::Path", current)) {
      json_t *parents = json_array();
      if (parent[0])
        json_array_append_new(parents, json_pack("{s:s,s:s}", "type", "Dome::Path", "id", parent));
      json_array_append_new(entities, json_pack("{s:{s:s,s:s},s:{},s:o}", "uid", "type", "Dome::Path", "id",
                                                current, "attrs", "parents", parents));
    }
    if (parent[0] == '\0') break;
    strcpy(current, parent);
  }
  free(current);
  return 0;
}

static int parse_entities(const struct simulate_policy *policy, struct request_cache *cache, json_t *entities,
                          bool with_schema, const cedar_entities **out, char *message, size_t size) {
  json_t *key = entities ? json_incref(entities) : json_array();
  if (key == NULL) return -ENOMEM;
  if (cache->entities && cache->with_schema == with_schema && json_equal(cache->entities_json, key)) {
    json_decref(key);
    *out = cache->entities;
    return 0;
  }
  clear_entities(cache);
  char *text = json_dumps(key, JSON_COMPACT);
  if (text == NULL) {
    json_decref(key);
    return -ENOMEM;
  }
  cedar_diagnostic diag;
  memset(&diag, 0, sizeof diag);
  cedar_entities *parsed = NULL;
  int rc = cedar_entities_parse_json(text, strlen(text), "request.entities",
                                     with_schema ? policy->schema : NULL, &parsed, &diag);
  free(text);
  if (rc < 0) {
    json_decref(key);
    if (rc == -ENOMEM) return rc;
    char diagnostic[900];
    snprintf(message, size, "%s", cedar_diagnostic_format(&diag, diagnostic, sizeof diagnostic));
    return -EINVAL;
  }
  cache->entities_json = key;
  cache->entities = parsed;
  cache->with_schema = with_schema;
  *out = parsed;
  return 0;
}

static int parse_context(const struct simulate_policy *policy, struct request_cache *cache, json_t *context,
                         bool with_schema, const cedar_uid_ref *action, const cedar_context **out,
                         char *message, size_t size) {
  json_t *key = context ? json_incref(context) : json_object();
  if (key == NULL) return -ENOMEM;
  if (strncmp(action->id, "mcp:", 4) == 0) {
    /* A gateway request's context.input: absent in records made before arguments were typed (the empty
     * record then), else the typed arguments as domed handed them to the engine, in Cedar's context
     * JSON with explicit extension values; they are typed by the called tool's inputSchema, which the
     * shipped schema does not declare, so such a context is read without the schema (the same values). */
    json_t *input = json_object_get(key, "input");
    if (input == NULL || json_object_get(key, "risk") == NULL) {
      /* context.risk: absent in records made before it was recorded: no alert then */
      json_t *copy = json_deep_copy(key);
      json_decref(key);
      if (copy == NULL) return -ENOMEM;
      if (input == NULL) json_object_set_new(copy, "input", json_object());
      if (json_object_get(copy, "risk") == NULL)
        json_object_set_new(copy, "risk", json_pack("{s:i,s:s}", "alerts", 0, "max_level", "none"));
      key = copy;
      input = json_object_get(key, "input");
    }
    if (json_object_size(input) > 0) with_schema = false;
  }
  if (cache->context && cache->context_with_schema == with_schema &&
      strcmp(cache->context_action, action->id) == 0 && json_equal(cache->context_json, key)) {
    json_decref(key);
    *out = cache->context;
    return 0;
  }
  clear_context(cache);
  char *text = json_dumps(key, JSON_COMPACT);
  char *action_id = strdup(action->id);
  if (text == NULL || action_id == NULL) {
    free(text);
    free(action_id);
    json_decref(key);
    return -ENOMEM;
  }
  cedar_diagnostic diag;
  memset(&diag, 0, sizeof diag);
  cedar_context *parsed = NULL;
  int rc = cedar_context_parse_json(text, strlen(text), "request.context",
                                    with_schema ? policy->schema : NULL, action, &parsed, &diag);
  free(text);
  if (rc < 0) {
    free(action_id);
    json_decref(key);
    if (rc == -ENOMEM) return rc;
    char diagnostic[900];
    snprintf(message, size, "%s", cedar_diagnostic_format(&diag, diagnostic, sizeof diagnostic));
    return -EINVAL;
  }
  cache->context_json = key;
  cache->context_action = action_id;
  cache->context_with_schema = with_schema;
  cache->context = parsed;
  *out = parsed;
  return 0;
}

int replay_request_rebuild(const struct simulate_policy *policy, struct request_cache *cache, json_t *event,
                           struct rebuilt_request *out, char *message, size_t size) {
  memset(out, 0, sizeof *out);
  message[0] = '\0';
  const char *type = json_string_value(json_object_get(event, "type"));
  if (!replay_request_event_type(type)) return 0;
  json_t *request = json_object_get(event, "request");
  if (json_is_object(request)) {
    out->json = json_incref(request);
  } else if (strcmp(type, "authz.decision") == 0) {
    out->json = reconstruct(event);
    if (out->json == NULL) {
      snprintf(message, size, "authz.decision records neither `request` nor `agent` and `action`");
      return -EINVAL;
    }
    out->reconstructed = true;
  } else {
    return 0; /* a kernel event without its request: not re-evaluable */
  }
  int rc;
  if ((rc = uid_of(json_object_get(out->json, "principal"), "principal", &out->request.principal, message,
                   size)) < 0 ||
      (rc = uid_of(json_object_get(out->json, "action"), "action", &out->request.action, message, size)) <
          0 ||
      (rc = uid_of(json_object_get(out->json, "resource"), "resource", &out->request.resource, message,
                   size)) < 0)
    return rc;
  json_t *entities = json_object_get(out->json, "entities");
  if (entities && !json_is_array(entities)) {
    snprintf(message, size, "request.entities: expected an array");
    return -EINVAL;
  }
  json_t *copy = NULL;
  if (strcmp(out->request.resource.type, "Dome::Path") == 0) {
    copy = entities ? json_deep_copy(entities) : json_array();
    if (copy == NULL || add_path_chain(copy, out->request.resource.id) < 0) {
      json_decref(copy);
      return -ENOMEM;
    }
    entities = copy;
  }
  bool with_schema = !out->reconstructed;
  rc = parse_entities(policy, cache, entities, with_schema, &out->entities, message, size);
  json_decref(copy);
  if (rc < 0) return rc;
  json_t *context = json_object_get(out->json, "context");
  if (context && !json_is_object(context)) {
    snprintf(message, size, "request.context: expected an object");
    return -EINVAL;
  }
  return (rc = parse_context(policy, cache, context, with_schema, &out->request.action, &out->request.context,
                             message, size)) < 0
             ? rc
             : 1;
}

void replay_rebuilt_request_release(struct rebuilt_request *request) {
  json_decref(request->json);
  memset(request, 0, sizeof *request);
}
