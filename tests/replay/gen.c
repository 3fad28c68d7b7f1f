/* dome-replay-gen: journals for the simulate/replay tests and scripts/bench-simulate.
 *   dome-replay-gen decisions DIR POLICY SCENARIO.json   each scenario entry authorized under POLICY with the
 *       Dome schema and recorded with its full request (authz.decision for mcp:*, exec.access / exec.denial
 *       for kernel-level actions); entries carry `label` so tests can find them by name.
 *   dome-replay-gen bulk DIR N                           N authz.decision events (4 agents, 2 tools)
 *   dome-replay-gen run DIR TASK.json EXEC_ID AGENT [POLICY]   record an agent task run in a fresh jail
 * Scenario entry: {"label", "agent", "capabilities"?, "gateway"?, "actas"?, "action",
 *   "resource": {"type", "id"}, "context"?, "tool"? ({protocol, capability?}), "exec_id"?}. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/cedar.h"
#include "policy/schema/schema.h"
#include "supervisor/audit/journal.h"
#include "supervisor/replay/replay.h"

static cedar_schema *schema;

static void die(const char *what, const char *message) {
  fprintf(stderr, "dome-replay-gen: %s: %s\n", what, message);
  exit(2);
}

static json_t *request_of(json_t *entry) {
  const char *agent = json_string_value(json_object_get(entry, "agent"));
  const char *gateway = json_string_value(json_object_get(entry, "gateway"));
  if (gateway == NULL) gateway = "Default";
  json_t *capabilities = json_object_get(entry, "capabilities");
  json_t *resource = json_object_get(entry, "resource");
  const char *rtype = json_string_value(json_object_get(resource, "type"));
  json_t *entities =
      json_pack("[{s:{s:s,s:s},s:{s:o},s:[{s:s,s:s}]},{s:{s:s,s:s},s:{},s:[]}]", "uid", "type", "Dome::Agent",
                "id", agent, "attrs", "capabilities", capabilities ? json_incref(capabilities) : json_array(),
                "parents", "type", "Dome::Gateway", "id", gateway, "uid", "type", "Dome::Gateway", "id",
                gateway, "attrs", "parents");
  if (strcmp(rtype, "Dome::MCPTool") == 0) {
    json_t *tool = json_object_get(entry, "tool");
    json_t *attrs = tool ? json_deep_copy(tool) : json_pack("{s:s}", "protocol", "streamable-http");
    json_array_append_new(entities, json_pack("{s:O,s:o,s:[{s:s,s:s}]}", "uid", resource, "attrs", attrs,
                                              "parents", "type", "Dome::Gateway", "id", gateway));
  } else if (strcmp(rtype, "Dome::Path") == 0) {
    /* the path and each parent directory, each `in` its parent (docs: Path::"/a/b" in Path::"/a" in
     * Path::"/") */
    char path[1024];
    snprintf(path, sizeof path, "%s", json_string_value(json_object_get(resource, "id")));
    for (;;) {
      char *slash = strrchr(path, '/');
      json_t *parents = json_array();
      char parent[1024] = "";
      if (slash && strcmp(path, "/") != 0) {
        snprintf(parent, sizeof parent, "%.*s", slash == path ? 1 : (int)(slash - path), path);
        json_array_append_new(parents, json_pack("{s:s,s:s}", "type", "Dome::Path", "id", parent));
      }
      json_array_append_new(entities, json_pack("{s:{s:s,s:s},s:{},s:o}", "uid", "type", "Dome::Path", "id",
                                                path, "attrs", "parents", parents));
      if (!parent[0]) break;
      snprintf(path, sizeof path, "%s", parent);
    }
  } else if (strcmp(rtype, "Dome::Network") == 0) {
    json_array_append_new(entities, json_pack("{s:O,s:{},s:[]}", "uid", resource, "attrs", "parents"));
  }
  json_t *context = json_object_get(entry, "context");
  context = context ? json_deep_copy(context) : json_object();
  /* a gateway request's context always has the typed arguments (domed: context.input, {} here) */
  const char *action = json_string_value(json_object_get(entry, "action"));
  if (action && strncmp(action, "mcp:", 4) == 0 && json_object_get(context, "input") == NULL)
    json_object_set_new(context, "input", json_object());
  /* and the agent's risk (domed: its recent anomaly alerts; none here) */
  if (action && strncmp(action, "mcp:", 4) == 0 && json_object_get(context, "risk") == NULL)
    json_object_set_new(context, "risk", json_pack("{s:i,s:s}", "alerts", 0, "max_level", "none"));
  return json_pack("{s:{s:s,s:s},s:{s:s,s:O},s:O,s:o,s:o}", "principal", "type", "Dome::Agent", "id", agent,
                   "action", "type", "Dome::Action", "id", json_object_get(entry, "action"), "resource",
                   resource, "context", context, "entities", entities);
}

/* Authorize `request` under `set` as domed does; fills decision/determining/errors of event. */
static void decide(cedar_policy_set *set, json_t *request, json_t *event) {
  char *entities_text = json_dumps(json_object_get(request, "entities"), JSON_COMPACT);
  char *context_text = json_dumps(json_object_get(request, "context"), JSON_COMPACT);
  cedar_diagnostic diag;
  char message[900];
  cedar_entities *entities = NULL;
  cedar_context *context = NULL;
  cedar_uid_ref action = {"Dome::Action",
                          json_string_value(json_object_get(json_object_get(request, "action"), "id")), 0};
  if (cedar_entities_parse_json(entities_text, strlen(entities_text), "entities", schema, &entities, &diag) <
      0)
    die("entities", cedar_diagnostic_format(&diag, message, sizeof message));
  if (cedar_context_parse_json(context_text, strlen(context_text), "context", schema, &action, &context,
                               &diag) < 0)
    die("context", cedar_diagnostic_format(&diag, message, sizeof message));
  json_t *resource = json_object_get(request, "resource");
  cedar_request r = {
      .principal = {"Dome::Agent",
                    json_string_value(json_object_get(json_object_get(request, "principal"), "id")), 0},
      .action = action,
      .resource = {json_string_value(json_object_get(resource, "type")),
                   json_string_value(json_object_get(resource, "id")), 0},
      .context = context};
  cedar_response response;
  if (cedar_authorize(set, entities, &r, &response) < 0) die("authorize", "out of memory");
  json_t *determining = json_array(), *errors = json_array();
  for (size_t i = 0; i < response.reason_count; i++)
    json_array_append_new(determining, json_string(response.reason[i]));
  for (size_t i = 0; i < response.error_count; i++)
    json_array_append_new(errors, json_pack("{s:s,s:s}", "policy", response.errors[i].policy_id, "message",
                                            response.errors[i].message));
  json_object_set_new(event, "decision", json_string(response.decision == CEDAR_ALLOW ? "allow" : "deny"));
  json_object_set_new(event, "determining", determining);
  json_object_set_new(event, "errors", errors);
  cedar_response_release(&response);
  cedar_context_free(context);
  cedar_entities_free(entities);
  free(entities_text);
  free(context_text);
}

static cedar_policy_set *load_policy(const char *path) {
  cedar_policy_set *set = NULL;
  cedar_diagnostic diag;
  char message[900];
  if (cedar_policy_set_load_file(path, CEDAR_PARSE_ID_ANNOTATIONS, &set, &diag) < 0)
    die(path, cedar_diagnostic_format(&diag, message, sizeof message));
  return set;
}

static journal *open_journal(const char *dir) {
  journal_options options;
  journal_options_init(&options, dir);
  journal *j = NULL;
  dome_error err = {0};
  if (journal_open(&options, &j, &err) < 0) die(dir, err.message);
  return j;
}

static void append(journal *j, json_t *event) {
  dome_error err = {0};
  if (journal_append(j, event, NULL, &err) < 0) die("append", err.message);
}

static int append_fn(void *context, json_t *event, dome_error *err) {
  return journal_append(context, event, NULL, err);
}

/* The authz.decision of an entry, decided under set (as domed records it). */
static json_t *decision_event(cedar_policy_set *set, json_t *entry) {
  json_t *request = request_of(entry);
  const char *action = json_string_value(json_object_get(entry, "action"));
  bool kernel = strncmp(action, "fs:", 3) == 0 || strncmp(action, "net:", 4) == 0;
  json_t *event =
      json_pack("{s:s,s:O,s:s,s:s,s:O}", "type", "authz.decision", "agent", json_object_get(entry, "agent"),
                "action", action, "policy_version", "1", "label", json_object_get(entry, "label"));
  decide(set, request, event);
  if (kernel) {
    bool allow = strcmp(json_string_value(json_object_get(event, "decision")), "allow") == 0;
    json_object_set_new(event, "type", json_string(allow ? "exec.access" : "exec.denial"));
    json_t *context = json_object_get(entry, "context");
    char object[300];
    if (json_object_get(context, "dst_ip"))
      snprintf(object, sizeof object, "%s:%lld", json_string_value(json_object_get(context, "dst_ip")),
               (long long)json_integer_value(json_object_get(context, "dst_port")));
    else
      snprintf(object, sizeof object, "%s",
               json_string_value(json_object_get(json_object_get(entry, "resource"), "id")));
    json_object_set_new(event, "object", json_string(object));
    json_object_set_new(event, "hook",
                        json_string(strncmp(action, "net:", 4) == 0 ? "connect4" : "file_open"));
    json_t *determining = json_object_get(event, "determining");
    if (json_array_size(determining)) json_object_set(event, "policy_id", json_array_get(determining, 0));
  } else {
    json_object_set_new(event, "gateway", json_string("Default"));
    json_object_set(event, "tool", json_object_get(json_object_get(entry, "resource"), "id"));
    json_object_set_new(event, "mcp_tool", json_string("execute_code"));
    json_object_set_new(event, "reason", json_string("policy"));
    json_object_set_new(event, "policy_name", json_string("v1"));
  }
  if (json_object_get(entry, "actas")) json_object_set(event, "actas", json_object_get(entry, "actas"));
  if (json_object_get(entry, "exec_id")) json_object_set(event, "exec_id", json_object_get(entry, "exec_id"));
  json_object_set_new(event, "request", request);
  return event;
}

int main(int argc, char **argv) {
  cedar_schema_error schema_error;
  if (cedar_schema_load_dome(&schema, &schema_error) < 0) die("schema", "cannot load the Dome schema");
  if (argc == 5 && strcmp(argv[1], "decisions") == 0) {
    cedar_policy_set *set = load_policy(argv[3]);
    json_error_t error;
    json_t *scenario = json_load_file(argv[4], 0, &error);
    if (!json_is_array(scenario)) die(argv[4], error.text);
    journal *j = open_journal(argv[2]);
    size_t i;
    json_t *entry;
    json_array_foreach(scenario, i, entry) {
      json_t *event = decision_event(set, entry);
      append(j, event);
      json_decref(event);
      json_t *noise = json_pack("{s:s,s:s}", "type", "agent.registered", "agent", "noise");
      append(j, noise);
      json_decref(noise);
    }
    dome_error err = {0};
    if (journal_close(j, &err) < 0) die("close", err.message);
    json_decref(scenario);
    cedar_policy_set_free(set);
  } else if (argc == 4 && strcmp(argv[1], "bulk") == 0) {
    unsigned long long n = strtoull(argv[3], NULL, 10);
    journal *j = open_journal(argv[2]);
    static const char *agents[] = {"analyst", "intern-bot", "reporter", "ops"};
    static const char *tools[] = {"code-sandbox", "report-builder"};
    json_t *events[8];
    for (int k = 0; k < 8; k++) {
      json_t *entry =
          json_pack("{s:s,s:s,s:[s],s:s,s:{s:s,s:s},s:{s:s}}", "label", "bulk", "agent", agents[k % 4],
                    "capabilities", "code-execution", "action", "mcp:call", "resource", "type",
                    "Dome::MCPTool", "id", tools[k / 4], "context", "tool", "execute_code");
      events[k] = json_pack("{s:s,s:s,s:s,s:s,s:[s],s:[],s:s,s:s,s:o}", "type", "authz.decision", "agent",
                            agents[k % 4], "action", "mcp:call", "decision", k / 4 ? "deny" : "allow",
                            "determining", "policy0", "errors", "policy_version", "1", "reason", "policy",
                            "request", request_of(entry));
      json_decref(entry);
    }
    for (unsigned long long i = 0; i < n; i++) {
      /* a few runs of the same request between changes, as real traffic has */
      append(j, events[(i / 3) % 8]);
    }
    for (int k = 0; k < 8; k++) json_decref(events[k]);
    dome_error err = {0};
    if (journal_close(j, &err) < 0) die("close", err.message);
  } else if ((argc == 6 || argc == 7) && strcmp(argv[1], "run") == 0) {
    json_error_t error;
    json_t *task = json_load_file(argv[3], 0, &error);
    if (!json_is_object(task)) die(argv[3], error.text);
    const char *exec_id = argv[4], *agent = argv[5];
    journal *j = open_journal(argv[2]);
    if (argc == 7) {
      cedar_policy_set *set = load_policy(argv[6]);
      json_t *entry = json_pack("{s:s,s:s,s:[s],s:s,s:{s:s,s:s},s:{s:s},s:s}", "label", "run", "agent", agent,
                                "capabilities", "code-execution", "action", "mcp:call", "resource", "type",
                                "Dome::MCPTool", "id", "code-sandbox", "context", "tool", "execute_code",
                                "exec_id", exec_id);
      json_t *event = decision_event(set, entry);
      append(j, event);
      json_decref(event);
      json_decref(entry);
      cedar_policy_set_free(set);
    }
    json_t *inputs = json_deep_copy(task);
    json_object_set_new(inputs, "exec_id", json_string(exec_id));
    json_object_set_new(inputs, "agent", json_string(agent));
    json_object_set_new(inputs, "policy_version", json_string("1"));
    json_object_set_new(inputs, "classification",
                        json_string("output_paths=SENSITIVE,env_vars=SENSITIVE,stderr=PII"));
    dome_error err = {0};
    json_t *outcome = NULL;
    simulate_policy *rules = NULL;
    if (argc == 7 && replay_simulate_policy_load(argv[6], true, &rules, &err) < 0) die(argv[6], err.message);
    replay_execute_options options = {.journal_dir = argv[2],
                                      .image_store = getenv("DOME_IMAGE_STORE"),
                                      .rules = rules,
                                      .append = append_fn,
                                      .context = j};
    if (replay_execute(inputs, &options, &outcome, &err) < 0) die("run", err.message);
    replay_simulate_policy_free(rules);
    char *text = json_dumps(outcome, JSON_COMPACT);
    printf("%s\n", text);
    free(text);
    json_decref(outcome);
    json_decref(inputs);
    json_decref(task);
    if (journal_close(j, &err) < 0) die("close", err.message);
  } else {
    fprintf(stderr,
            "usage: dome-replay-gen decisions DIR POLICY SCENARIO.json | bulk DIR N | "
            "run DIR TASK.json EXEC_ID AGENT [POLICY]\n");
    return 2;
  }
  cedar_schema_free(schema);
  return 0;
}
