/* Authorization with dome's Cedar engine (policy/cedar.h): rules are parsed and validated in strict
 * mode against the Dome schema (policy/schema/dome.cedarschema, embedded at build time), and each
 * request is authorized with the agent, its gateway and the tool as entities:
 *   principal Dome::Agent::"<agent>" {capabilities} in Dome::Gateway::"<gateway>"
 *   action    Dome::Action::"mcp:call" | "mcp:discover"
 *   resource  Dome::MCPTool::"<tool>" {protocol, capability?} in Dome::Gateway::"<tool gateway>"
 *   context   {tool: <MCP tool name>, arguments?: <canonical JSON text>, actas?: <X-Dome-Act-As>,
 *              input: {"<tool as agents see it>": <arguments typed from its inputSchema>} for a call,
 *              {} otherwise}, session_id?: <the sandbox session the call runs in>,
 *              risk: {alerts, max_level} of the agent's recent anomaly alerts (risk.c)}
 * A call's context is typed by the Dome schema with that one tool's ToolInput attribute
 * (policy/tool_input), generated per call. Any failure to build the request is a deny (fail closed)
 * recorded in the decision's errors. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "policy/cedar.h"
#include "policy/compile/compile.h"
#include "policy/schema/schema.h"
#include "policy/tool_input/tool_input.h"
#include "policy/validate/validate.h"
#include "supervisor/domed/dome_schema.h"
#include "supervisor/domed/domed.h"

int domed_authz_init(struct domed *domed, dome_error *err) {
  cedar_schema *schema = NULL;
  cedar_schema_error schema_error;
  memset(&schema_error, 0, sizeof schema_error);
  int rc = cedar_schema_parse(dome_schema_text, strlen(dome_schema_text), "dome.cedarschema", &schema,
                              &schema_error);
  if (rc < 0) {
    char text[600];
    return dome_error_set(err, EINVAL, "Dome schema: %s",
                          cedar_schema_error_format(&schema_error, text, sizeof text));
  }
  domed->engine = schema;
  return 0;
}

static void typed_schemas_cleanup(void);

void domed_authz_cleanup(struct domed *domed) {
  domed_shadow_cleanup(domed);
  typed_schemas_cleanup();
  cedar_schema_free(domed->engine);
  domed->engine = NULL;
}

static int rules_compile(struct domed *domed, const char *text, const char *file, bool validate,
                         struct domed_rules **out, dome_error *err);

int domed_rules_compile(struct domed *domed, const char *text, const char *file, struct domed_rules **out,
                        dome_error *err) {
  return rules_compile(domed, text, file, true, out, err);
}

int domed_rules_load(struct domed *domed, const char *text, const char *file, struct domed_rules **out,
                     dome_error *err) {
  return rules_compile(domed, text, file, false, out, err);
}

static int rules_compile(struct domed *domed, const char *text, const char *file, bool validate,
                         struct domed_rules **out, dome_error *err) {
  cedar_policy_set *set = NULL;
  cedar_diagnostic diag;
  memset(&diag, 0, sizeof diag);
  char message[700];
  int rc = cedar_policy_set_parse(text, strlen(text), file, CEDAR_PARSE_ID_ANNOTATIONS, &set, &diag);
  if (rc < 0) return dome_error_set(err, -rc, "%s", cedar_diagnostic_format(&diag, message, sizeof message));
  /* validated against the schema typing context.input from the live tool registry */
  void *typed = NULL;
  if (validate && domed_typed_schema(domed, &typed, err) < 0) {
    cedar_policy_set_free(set);
    return dome_error_code(err);
  }
  cedar_validation_result result;
  memset(&result, 0, sizeof result);
  rc = validate ? cedar_validate(typed, set, &result) : 0;
  cedar_schema_free(typed);
  if (rc < 0) {
    cedar_policy_set_free(set);
    return dome_error_set(err, ENOMEM, "%s: validation failed: out of memory", file);
  }
  if (validate && !cedar_validation_passed(&result)) {
    for (size_t i = 0; i < result.count; i++)
      if (!result.issues[i].is_warning) {
        cedar_validation_issue_format(&result.issues[i], message, sizeof message);
        break;
      }
    dome_error_set(err, EINVAL, "%s (%zu error%s against the Dome schema)", message, result.error_count,
                   result.error_count == 1 ? "" : "s");
    cedar_validation_result_release(&result);
    cedar_policy_set_free(set);
    return -EINVAL;
  }
  if (validate) cedar_validation_result_release(&result);
  struct domed_rules *rules = calloc(1, sizeof *rules);
  if (rules == NULL) {
    cedar_policy_set_free(set);
    return dome_error_set(err, ENOMEM, "compile rules");
  }
  atomic_store(&rules->refs, 1);
  rules->policies = set;
  /* the kernel-level rules (fs:*, net:*) are the shipped baseline plus these */
  cedar_policy_set *kernel_set = NULL;
  rc = dome_compile_load_policies(text, strlen(text), file, &kernel_set, err);
  if (rc < 0) {
    domed_rules_release(rules);
    return dome_error_wrap(err, "kernel rules");
  }
  rules->kernel_policies = kernel_set;
  json_t *agents = control_agent_list(domed->store);
  size_t i;
  json_t *agent;
  json_array_foreach(agents, i, agent) {
    rc = domed_kernel_check(domed, rules, json_string_value(json_object_get(agent, "name")), err);
    if (rc < 0) break;
  }
  json_decref(agents);
  if (rc < 0) {
    domed_rules_release(rules);
    return rc;
  }
  *out = rules;
  return 0;
}

void domed_rules_free_policies(struct domed_rules *rules) {
  cedar_policy_set_free(rules->policies);
  cedar_policy_set_free(rules->kernel_policies);
}

static void add_error(struct domed_decision *decision, const char *policy, const char *message) {
  json_array_append_new(decision->errors,
                        json_pack("{s:s,s:s}", "policy", policy ? policy : "", "message", message));
}

void domed_authorize(struct domed *domed, struct domed_rules *rules, const struct domed_principal *principal,
                     const char *action, json_t *tool_entity, const char *mcp_tool_name, json_t *arguments,
                     struct domed_decision *decision) {
  json_t *input_schema = NULL; /* the called tool's: execute_code's or a session tool's */
  if (strcmp(action, "mcp:call") == 0 && mcp_tool_name)
    input_schema = strcmp(mcp_tool_name, DOMED_EXECUTE_TOOL) == 0 ? domed_execute_code_input_schema()
                                                                  : domed_session_input_schema(mcp_tool_name);
  domed_authorize_input(domed, rules, principal, action, DOMED_BUILTIN_TOOL, tool_entity, mcp_tool_name,
                        arguments, mcp_tool_name, input_schema, decision);
  json_decref(input_schema);
}

static bool names_gateway(json_t *entities, const char *gateway) {
  size_t i;
  json_t *entity;
  json_array_foreach(entities, i, entity) {
    json_t *uid = json_object_get(entity, "uid");
    if (strcmp(json_string_value(json_object_get(uid, "type")), "Dome::Gateway") == 0 &&
        strcmp(json_string_value(json_object_get(uid, "id")), gateway) == 0)
      return true;
  }
  return false;
}

static void add_gateway(json_t *entities, const char *gateway) {
  if (!names_gateway(entities, gateway))
    json_array_append_new(entities, json_pack("{s:{s:s,s:s},s:{},s:[]}", "uid", "type", "Dome::Gateway", "id",
                                              gateway, "attrs", "parents"));
}

void domed_authorize_resource(struct domed *domed, struct domed_rules *rules,
                              const struct domed_principal *principal, const char *action,
                              const char *resource, json_t *tool_entity, const char *mcp_tool_name,
                              json_t *arguments, struct domed_decision *decision) {
  domed_authorize_input(domed, rules, principal, action, resource, tool_entity, mcp_tool_name, arguments,
                        NULL, NULL, decision);
}

/* The schema typing a call of `input_name` (its ToolInput attribute typed by `type`) into *schema, and
 * the view of `arguments` into *view. Returns 0, or -1 with the reason in message. */
/* The typed schemas of recent calls, by their text (a tool's schema changes only with its inputSchema):
 * parsing one costs ~0.1 ms, a lookup a string compare. An entry in use is never freed; when every
 * entry is in use a schema is parsed for the one call (uncached). */
#define TYPED_SCHEMAS_KEPT 32
struct typed_schema {
  char *text;
  cedar_schema *schema;
  unsigned refs;
  bool cached;
  uint64_t used;
};
static pthread_mutex_t typed_lock = PTHREAD_MUTEX_INITIALIZER;
static struct typed_schema *typed_schemas[TYPED_SCHEMAS_KEPT];
static uint64_t typed_clock;

static void typed_schema_free(struct typed_schema *entry) {
  cedar_schema_free(entry->schema);
  free(entry->text);
  free(entry);
}

static void typed_schema_release(struct typed_schema *entry) {
  if (entry == NULL) return;
  pthread_mutex_lock(&typed_lock);
  bool last = --entry->refs == 0 && !entry->cached;
  pthread_mutex_unlock(&typed_lock);
  if (last) typed_schema_free(entry);
}

/* The parsed schema of `text` (takes it), a reference; NULL with *rc (and schema_error) on failure. */
static struct typed_schema *typed_schema_acquire(char *text, int *rc, cedar_schema_error *schema_error) {
  pthread_mutex_lock(&typed_lock);
  for (size_t i = 0; i < TYPED_SCHEMAS_KEPT; i++) {
    struct typed_schema *entry = typed_schemas[i];
    if (entry && strcmp(entry->text, text) == 0) {
      entry->refs++;
      entry->used = ++typed_clock;
      pthread_mutex_unlock(&typed_lock);
      free(text);
      return entry;
    }
  }
  pthread_mutex_unlock(&typed_lock);
  struct typed_schema *entry = calloc(1, sizeof *entry);
  if (entry == NULL) {
    free(text);
    *rc = -ENOMEM;
    return NULL;
  }
  entry->text = text;
  entry->refs = 1;
  *rc = cedar_schema_parse(text, strlen(text), "dome.cedarschema+input", &entry->schema, schema_error);
  if (*rc < 0) {
    typed_schema_free(entry);
    return NULL;
  }
  pthread_mutex_lock(&typed_lock);
  size_t slot = TYPED_SCHEMAS_KEPT;
  for (size_t i = 0; i < TYPED_SCHEMAS_KEPT && slot == TYPED_SCHEMAS_KEPT; i++)
    if (typed_schemas[i] == NULL) slot = i;
  if (slot == TYPED_SCHEMAS_KEPT) /* the least recently used entry not in use */
    for (size_t i = 0; i < TYPED_SCHEMAS_KEPT; i++)
      if (typed_schemas[i]->refs == 0 &&
          (slot == TYPED_SCHEMAS_KEPT || typed_schemas[i]->used < typed_schemas[slot]->used))
        slot = i;
  struct typed_schema *evicted = NULL;
  if (slot < TYPED_SCHEMAS_KEPT) {
    evicted = typed_schemas[slot];
    typed_schemas[slot] = entry;
    entry->cached = true;
    entry->used = ++typed_clock;
  }
  pthread_mutex_unlock(&typed_lock);
  if (evicted) typed_schema_free(evicted);
  return entry;
}

static void typed_schemas_cleanup(void) {
  pthread_mutex_lock(&typed_lock);
  for (size_t i = 0; i < TYPED_SCHEMAS_KEPT; i++) {
    struct typed_schema *entry = typed_schemas[i];
    typed_schemas[i] = NULL;
    if (entry == NULL) continue;
    if (entry->refs == 0)
      typed_schema_free(entry);
    else
      entry->cached = false; /* freed by its last release */
  }
  pthread_mutex_unlock(&typed_lock);
}

static int typed_input(const char *input_name, const json_t *type, json_t *arguments,
                       struct typed_schema **schema, json_t **view, char *message, size_t size) {
  *view = cedar_tool_input_view(type, arguments, message, size);
  if (*view == NULL) return -1;
  json_t *tools = json_pack("{s:O}", input_name, type);
  char *text = tools ? cedar_tool_input_dome_schema_text(tools) : NULL;
  json_decref(tools);
  cedar_schema_error schema_error;
  memset(&schema_error, 0, sizeof schema_error);
  int rc = -ENOMEM;
  *schema = text ? typed_schema_acquire(text, &rc, &schema_error) : NULL;
  if (*schema == NULL) {
    char formatted[600];
    snprintf(message, size, "typed input of `%s`: %s", input_name,
             rc == -ENOMEM ? "out of memory"
                           : cedar_schema_error_format(&schema_error, formatted, sizeof formatted));
    json_decref(*view);
    *view = NULL;
    return -1;
  }
  return 0;
}

void domed_authorize_input(struct domed *domed, struct domed_rules *rules,
                           const struct domed_principal *principal, const char *action, const char *resource,
                           json_t *tool_entity, const char *mcp_tool_name, json_t *arguments,
                           const char *input_name, json_t *input_schema, struct domed_decision *decision) {
  *decision = (struct domed_decision){.allow = false, .determining = json_array(), .errors = json_array()};
  decision->policy_version = rules ? rules->version : 0;
  if (rules) snprintf(decision->policy_name, sizeof decision->policy_name, "%s", rules->name);
  if (rules == NULL || rules->policies == NULL) return; /* no rules: default deny */
  const char *tool_gateway = json_string_value(json_object_get(tool_entity, "gateway"));
  json_t *tool_attrs = json_deep_copy(tool_entity);
  json_object_del(tool_attrs, "gateway");
  /* the principal's parents: every gateway it is granted (and the endpoint's) */
  json_t *parents = json_array();
  json_array_append_new(parents, json_pack("{s:s,s:s}", "type", "Dome::Gateway", "id", principal->gateway));
  size_t index;
  json_t *grant;
  json_array_foreach(principal->grants, index, grant) {
    if (!json_is_string(grant) || strcmp(json_string_value(grant), principal->gateway) == 0) continue;
    json_array_append_new(parents, json_pack("{s:s,s:O}", "type", "Dome::Gateway", "id", grant));
  }
  json_t *entities =
      json_pack("[{s:{s:s,s:s},s:{s:O},s:o},{s:{s:s,s:s},s:o,s:[{s:s,s:s}]}]", "uid", "type", "Dome::Agent",
                "id", principal->agent, "attrs", "capabilities", principal->capabilities, "parents", parents,
                "uid", "type", "Dome::MCPTool", "id", resource, "attrs", tool_attrs, "parents", "type",
                "Dome::Gateway", "id", tool_gateway ? tool_gateway : MCP_GATEWAY_DEFAULT);
  json_t *parent;
  json_array_foreach(parents, index, parent)
      add_gateway(entities, json_string_value(json_object_get(parent, "id")));
  add_gateway(entities, tool_gateway ? tool_gateway : MCP_GATEWAY_DEFAULT);
  json_t *context = json_pack("{s:s}", "tool", mcp_tool_name ? mcp_tool_name : "");
  if (arguments && json_object_size(arguments) > 0) {
    char *canonical = json_dumps(arguments, JSON_COMPACT | JSON_SORT_KEYS);
    if (canonical) json_object_set_new(context, "arguments", json_string(canonical));
    free(canonical);
  }
  if (principal->actas && principal->actas[0])
    json_object_set_new(context, "actas", json_string(principal->actas));
  struct typed_schema *typed_schema = NULL;
  bool typed_failed = false;
  char typed_message[700] = "";
  json_t *input = json_object();
  if (input_name && input_schema) {
    json_t *type = cedar_tool_input_type(input_schema, input_name, NULL);
    json_t *view = NULL;
    if (type == NULL) {
      snprintf(typed_message, sizeof typed_message, "typed input of `%s`: out of memory", input_name);
      typed_failed = true;
    } else if (typed_input(input_name, type, arguments, &typed_schema, &view, typed_message,
                           sizeof typed_message) < 0) {
      typed_failed = true;
    } else {
      json_object_set_new(input, input_name, view);
    }
    json_decref(type);
  }
  json_object_set_new(context, "input", input);
  json_t *risk = domed_risk_context(domed->risk, principal->agent);
  if (risk) json_object_set_new(context, "risk", risk);
  /* a call inside a sandbox session names it (docs/sessions.md) */
  json_t *session_id = json_object_get(arguments, "session_id");
  if (json_is_string(session_id)) json_object_set(context, "session_id", session_id);
  char *entities_text = json_dumps(entities, JSON_COMPACT);
  char *context_text = json_dumps(context, JSON_COMPACT);
  decision->request =
      json_pack("{s:{s:s,s:s},s:{s:s,s:s},s:{s:s,s:s},s:o,s:o}", "principal", "type", "Dome::Agent", "id",
                principal->agent, "action", "type", "Dome::Action", "id", action, "resource", "type",
                "Dome::MCPTool", "id", resource, "context", context, "entities", entities);
  cedar_entities *cedar_entities = NULL;
  cedar_context *cedar_context = NULL;
  cedar_diagnostic diag;
  memset(&diag, 0, sizeof diag);
  char message[700];
  cedar_uid_ref action_uid = {"Dome::Action", action, 0};
  if (typed_failed) {
    /* arguments that do not have the tool's type never reach Cedar half-typed (fail closed) */
    add_error(decision, NULL, typed_message);
  } else if (entities_text == NULL || context_text == NULL) {
    add_error(decision, NULL, "out of memory building the request");
  } else if (cedar_entities_parse_json(entities_text, strlen(entities_text), "entities", domed->engine,
                                       &cedar_entities, &diag) < 0) {
    add_error(decision, NULL, cedar_diagnostic_format(&diag, message, sizeof message));
  } else if (cedar_context_parse_json(context_text, strlen(context_text), "context",
                                      typed_schema ? typed_schema->schema : domed->engine, &action_uid,
                                      &cedar_context, &diag) < 0) {
    add_error(decision, NULL, cedar_diagnostic_format(&diag, message, sizeof message));
  } else {
    cedar_request request = {
        .principal = {"Dome::Agent", principal->agent, 0},
        .action = action_uid,
        .resource = {"Dome::MCPTool", resource, 0},
        .context = cedar_context,
    };
    cedar_response response;
    memset(&response, 0, sizeof response);
    if (cedar_authorize(rules->policies, cedar_entities, &request, &response) < 0) {
      add_error(decision, NULL, "out of memory during authorization");
    } else {
      decision->allow = response.decision == CEDAR_ALLOW;
      for (size_t i = 0; i < response.reason_count; i++)
        json_array_append_new(decision->determining, json_string(response.reason[i]));
      for (size_t i = 0; i < response.error_count; i++)
        add_error(decision, response.errors[i].policy_id, response.errors[i].message);
      cedar_response_release(&response);
      /* the shadow version, if any, decides the same request; only a difference is recorded */
      struct domed_rules *shadow = domed_shadow_acquire(domed);
      cedar_response shadow_response;
      memset(&shadow_response, 0, sizeof shadow_response);
      if (shadow && shadow->policies &&
          cedar_authorize(shadow->policies, cedar_entities, &request, &shadow_response) == 0) {
        json_t *determining = json_array();
        for (size_t i = 0; i < shadow_response.reason_count; i++)
          json_array_append_new(determining, json_string(shadow_response.reason[i]));
        domed_shadow_observe(domed, shadow, principal, action, resource, mcp_tool_name, decision,
                             shadow_response.decision == CEDAR_ALLOW, determining,
                             shadow_response.error_count > 0);
        json_decref(determining);
        cedar_response_release(&shadow_response);
      }
      domed_rules_release(shadow);
    }
  }
  cedar_context_free(cedar_context);
  cedar_entities_free(cedar_entities);
  typed_schema_release(typed_schema); /* after the context, which refers to its names */
  free(entities_text);
  free(context_text);
}

void domed_decision_release(struct domed_decision *decision) {
  json_decref(decision->determining);
  json_decref(decision->errors);
  json_decref(decision->request);
  decision->request = NULL;
  decision->determining = decision->errors = NULL;
}
