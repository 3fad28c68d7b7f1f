/* dome-gateway-harness: drives supervisor/gateway/gateway.h against a live MCP backend for
 * tests/gateway/test_gateway and scripts/bench-gateway. Every mode prints one JSON object.
 *
 *   list URL AUTH_FILE                          exposed tools of the backend (registry, cached list)
 *   call URL AUTH_FILE CLASSIFICATION TOOL ARGS [TIMEOUT_MS]
 *                                               forward a call, redact its result and progress
 *   concurrent URL AUTH_FILE TOOL TIMEOUT_MS    call TOOL (a broken one) while a healthy call (add)
 *                                               runs on the same registry; both outcomes and times
 *   reconnect URL AUTH_FILE                     list, forget, list, change the url, list, call
 *   serve ...                                   a gateway MCP endpoint (serve.c)
 *   bench URL AUTH_FILE N                       N calls of add: median µs of the bare client and of
 *                                               the gateway path (resolve + Cedar + forward + redact)
 * AUTH_FILE "-" means no auth header. */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "policy/cedar.h"
#include "policy/schema/schema.h"
#include "supervisor/gateway/gateway.h"
#include "supervisor/guards/guard.h"

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static char *read_file(const char *path) {
  if (strcmp(path, "-") == 0) return NULL;
  FILE *file = fopen(path, "re");
  if (file == NULL) {
    fprintf(stderr, "harness: %s: %s\n", path, strerror(errno));
    exit(2);
  }
  char *text = calloc(1, 1 << 20);
  size_t n = fread(text, 1, (1 << 20) - 1, file);
  text[n] = '\0';
  fclose(file);
  return text;
}

static json_t *entry_of(const char *url, const char *classification) {
  json_t *entry = json_pack("{s:s,s:s,s:s,s:s,s:{}}", "name", "ext", "url", url, "protocol",
                            "streamable-http", "gateway", "Default", "field_classification");
  dome_error err;
  if (classification && classification[0]) {
    /* "f=C,..." as the control store keeps it: an object */
    char *copy = strdup(classification), *save = NULL;
    for (char *item = strtok_r(copy, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
      char *equals = strchr(item, '=');
      if (equals == NULL) continue;
      *equals = '\0';
      json_object_set_new(json_object_get(entry, "field_classification"), item, json_string(equals + 1));
    }
    free(copy);
  }
  (void)err;
  return entry;
}

static void print(json_t *value) {
  char *text = json_dumps(value, JSON_COMPACT);
  puts(text);
  free(text);
  json_decref(value);
}

static json_t *error_json(int rc, int rpc_error, const dome_error *err, double elapsed) {
  return json_pack("{s:b,s:i,s:s,s:i,s:f}", "ok", 0, "errno", -rc, "error", err->message, "rpc_error",
                   rpc_error, "elapsed_ms", elapsed);
}

struct progress_log {
  json_t *items;
  const struct guard *guard;
  const char *classification;
};

static void on_progress(void *context, double progress, double total, const char *message) {
  struct progress_log *log = context;
  char *redacted = NULL;
  dome_error err;
  if (message && gateway_redact_text(log->guard, log->classification, message, &redacted, NULL, &err) < 0)
    return;
  json_t *item = json_pack("{s:f}", "progress", progress);
  if (!isnan(total)) json_object_set_new(item, "total", json_real(total));
  if (redacted) json_object_set_new(item, "message", json_string(redacted));
  free(redacted);
  json_array_append_new(log->items, item);
}

static int make_guard(const char *classification, const char *auth_header, struct guard **guard) {
  struct guard_secret secrets[2];
  size_t count = auth_header ? gateway_auth_header_secrets(auth_header, secrets) : 0;
  struct guard_options options = {
      .classification = classification, .secrets = secrets, .secret_count = count};
  dome_error err;
  if (guard_create(&options, guard, &err) < 0) {
    fprintf(stderr, "harness: guard: %s\n", err.message);
    return -1;
  }
  return 0;
}

static json_t *forward(gateway_registry *registry, json_t *entry, const char *auth, const char *exposed,
                       json_t *arguments, unsigned timeout_ms, const struct guard *guard,
                       bool with_progress) {
  json_t *entries = json_pack("[O]", entry);
  char tool[GATEWAY_TOOL_NAME_MAX + 1];
  json_t *found = gateway_registry_resolve(entries, exposed, tool);
  if (found == NULL) {
    json_decref(entries);
    return json_pack("{s:b,s:s}", "ok", 0, "error", "no backend for this name");
  }
  char *classification = gateway_classification_text(found);
  struct progress_log log = {.items = json_array(), .guard = guard, .classification = classification};
  struct gateway_call_options options = {.on_progress = with_progress ? on_progress : NULL,
                                         .progress_context = &log,
                                         .cancel_fd = -1,
                                         .timeout_ms = timeout_ms};
  json_t *result = NULL;
  int rpc_error = 0;
  dome_error err = {0};
  double start = now_ms();
  int rc = gateway_registry_call(registry, found, auth, tool, arguments, &options, &result, &rpc_error, &err);
  double elapsed = now_ms() - start;
  json_t *out;
  if (rc < 0) {
    out = error_json(rc, rpc_error, &err, elapsed);
  } else {
    struct guard_findings findings = {0};
    rc = gateway_redact_result(guard, classification, result, &findings, &err);
    if (rc < 0) {
      out = error_json(rc, 0, &err, elapsed);
    } else {
      json_t *list = json_array();
      for (size_t i = 0; i < findings.count; i++)
        json_array_append_new(list, json_pack("{s:s,s:s}", "field", findings.items[i].field, "detector",
                                              findings.items[i].detector));
      out =
          json_pack("{s:b,s:O,s:o,s:f}", "ok", 1, "result", result, "findings", list, "elapsed_ms", elapsed);
    }
    guard_findings_free(&findings);
    json_decref(result);
  }
  json_object_set(out, "progress", log.items);
  json_decref(log.items);
  free(classification);
  json_decref(entries);
  return out;
}

struct concurrent_call {
  gateway_registry *registry;
  json_t *entry;
  const char *auth;
  const char *tool;
  unsigned timeout_ms;
  const struct guard *guard;
  json_t *out;
};

static void *concurrent_thread(void *context) {
  struct concurrent_call *call = context;
  call->out =
      forward(call->registry, call->entry, call->auth, call->tool, NULL, call->timeout_ms, call->guard, true);
  return NULL;
}

static int compare(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* Cedar setup for bench: the schema and a permit on the gateway grant. */
static int bench(gateway_registry *registry, json_t *entry, const char *auth, int n) {
  cedar_schema *schema = NULL;
  cedar_schema_error schema_error;
  memset(&schema_error, 0, sizeof schema_error);
  char *schema_text = read_file("policy/schema/dome.cedarschema");
  if (cedar_schema_parse(schema_text, strlen(schema_text), "dome.cedarschema", &schema, &schema_error) < 0)
    return 1;
  static const char rules[] =
      "permit(principal in Dome::Gateway::\"Default\", action == Dome::Action::\"mcp:call\", resource)\n"
      "  when { context.tool == \"add\" };\n";
  cedar_policy_set *set = NULL;
  cedar_diagnostic diag;
  memset(&diag, 0, sizeof diag);
  if (cedar_policy_set_parse(rules, strlen(rules), "bench.cedar", 0, &set, &diag) < 0) return 1;
  struct guard *guard = NULL;
  char *classification = gateway_classification_text(entry);
  if (make_guard(classification, auth, &guard) < 0) return 1;
  const char *url = json_string_value(json_object_get(entry, "url"));
  struct gateway_backend_options options = {.name = "direct", .url = url, .auth_header = auth};
  gateway_backend *direct = NULL;
  dome_error err;
  if (gateway_backend_connect(&options, &direct, &err) < 0) {
    fprintf(stderr, "harness: %s\n", err.message);
    return 1;
  }
  json_t *arguments = json_pack("{s:i,s:i}", "a", 2, "b", 3);
  double *bare = calloc((size_t)n, sizeof *bare), *gated = calloc((size_t)n, sizeof *gated);
  json_t *entries = json_pack("[O]", entry);
  json_t *capabilities = json_array(), *grants = json_pack("[s]", "Default");
  int failures = 0;
  for (int i = 0; i < 2 * n + 10; i++) {
    bool gateway_path = i % 2;
    int index = (i - 10) / 2;
    double start = now_ms();
    json_t *result = NULL;
    int rc;
    if (!gateway_path) {
      rc = gateway_backend_call_tool(direct, "add", arguments, NULL, &result, NULL, &err);
    } else {
      char tool[GATEWAY_TOOL_NAME_MAX + 1];
      json_t *found = gateway_registry_resolve(entries, "ext.add", tool);
      json_t *entities = gateway_cedar_entities("bench-agent", capabilities, grants, "ext", "streamable-http",
                                                NULL, "Default");
      char *entities_text = json_dumps(entities, JSON_COMPACT);
      json_decref(entities);
      cedar_entities *cedar_entities = NULL;
      cedar_context *context = NULL;
      cedar_uid_ref action = {"Dome::Action", "mcp:call", 0};
      char context_text[200];
      snprintf(context_text, sizeof context_text, "{\"tool\":\"%s\"}", tool);
      cedar_response response;
      memset(&response, 0, sizeof response);
      rc = cedar_entities_parse_json(entities_text, strlen(entities_text), "entities", schema,
                                     &cedar_entities, &diag);
      if (rc == 0)
        rc = cedar_context_parse_json(context_text, strlen(context_text), "context", schema, &action,
                                      &context, &diag);
      cedar_request request = {
          {"Dome::Agent", "bench-agent", 0}, action, {"Dome::MCPTool", "ext", 0}, context};
      if (rc == 0) rc = cedar_authorize(set, cedar_entities, &request, &response);
      if (rc == 0 && response.decision != CEDAR_ALLOW) rc = -EPERM;
      cedar_response_release(&response);
      cedar_context_free(context);
      cedar_entities_free(cedar_entities);
      free(entities_text);
      if (rc == 0)
        rc = gateway_registry_call(registry, found, auth, tool, arguments, NULL, &result, NULL, &err);
      if (rc == 0) rc = gateway_redact_result(guard, classification, result, NULL, &err);
    }
    double elapsed = now_ms() - start;
    if (rc < 0) failures++;
    json_decref(result);
    if (i >= 10) (gateway_path ? gated : bare)[index] = elapsed;
  }
  qsort(bare, (size_t)n, sizeof *bare, compare);
  qsort(gated, (size_t)n, sizeof *gated, compare);
  print(json_pack("{s:f,s:f,s:i,s:i}", "direct_median_ms", bare[n / 2], "gateway_median_ms", gated[n / 2],
                  "calls", n, "failures", failures));
  gateway_backend_close(direct);
  guard_free(guard);
  cedar_policy_set_free(set);
  cedar_schema_free(schema);
  free(schema_text);
  free(classification);
  free(bare);
  free(gated);
  json_decref(entries);
  json_decref(arguments);
  json_decref(capabilities);
  json_decref(grants);
  return failures ? 1 : 0;
}

int serve_main(int argc, char **argv); /* serve.c */

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "serve") == 0) return serve_main(argc, argv);
  if (argc < 4) {
    fprintf(stderr, "usage: dome-gateway-harness list|call|concurrent|bench URL AUTH_FILE ...\n");
    return 2;
  }
  const char *mode = argv[1], *url = argv[2];
  char *auth = read_file(argv[3]);
  struct gateway_registry_options registry_options = {.timeout_ms = 10000};
  gateway_registry *registry = NULL;
  dome_error err;
  gateway_registry_create(&registry_options, &registry, &err);
  int status = 0;
  if (strcmp(mode, "list") == 0) {
    json_t *entry = entry_of(url, NULL);
    json_t *tools = NULL;
    int rc = gateway_registry_list_tools(registry, entry, auth, &tools, &err);
    if (rc < 0) {
      print(error_json(rc, 0, &err, 0));
      status = 1;
    } else {
      json_t *names = json_array(), *originals = json_array();
      size_t i;
      json_t *tool;
      json_array_foreach(tools, i, tool) {
        json_t *visible = gateway_tool_public(tool);
        json_array_append(names, json_object_get(visible, "name"));
        json_array_append(originals, json_object_get(tool, "x-dome-tool"));
        json_decref(visible);
      }
      print(json_pack("{s:b,s:o,s:o}", "ok", 1, "names", names, "originals", originals));
      json_decref(tools);
    }
    json_decref(entry);
  } else if (strcmp(mode, "call") == 0 && argc >= 7) {
    json_t *entry = entry_of(url, argv[4]);
    json_error_t json_error;
    json_t *arguments = json_loads(argv[6], 0, &json_error);
    struct guard *guard = NULL;
    if (make_guard(argv[4], auth, &guard) < 0) return 1;
    json_t *out = forward(registry, entry, auth, argv[5], arguments, argc > 7 ? (unsigned)atoi(argv[7]) : 0,
                          guard, true);
    status = json_is_true(json_object_get(out, "ok")) ? 0 : 1;
    print(out);
    guard_free(guard);
    json_decref(arguments);
    json_decref(entry);
  } else if (strcmp(mode, "concurrent") == 0 && argc >= 6) {
    json_t *entry = entry_of(url, "");
    struct guard *guard = NULL;
    if (make_guard("", auth, &guard) < 0) return 1;
    /* connect first so that both calls share one backend client */
    json_t *tools = NULL;
    if (gateway_registry_list_tools(registry, entry, auth, &tools, &err) < 0) {
      fprintf(stderr, "harness: %s\n", err.message);
      return 1;
    }
    json_decref(tools);
    struct concurrent_call broken = {registry, entry, auth, argv[4], (unsigned)atoi(argv[5]), guard, NULL};
    pthread_t thread;
    pthread_create(&thread, NULL, concurrent_thread, &broken);
    struct timespec pause = {0, 200 * 1000000L};
    nanosleep(&pause, NULL);
    json_t *arguments = json_pack("{s:i,s:i}", "a", 20, "b", 22);
    double healthy_start = now_ms();
    json_t *healthy = forward(registry, entry, auth, "ext.add", arguments, 0, guard, false);
    double healthy_done = now_ms();
    pthread_join(thread, NULL);
    double broken_done = now_ms();
    json_object_set_new(healthy, "finished_before_broken", json_boolean(healthy_done < broken_done - 1));
    json_object_set_new(healthy, "wall_ms", json_real(healthy_done - healthy_start));
    print(json_pack("{s:o,s:o}", "broken", broken.out, "healthy", healthy));
    json_decref(arguments);
    guard_free(guard);
    json_decref(entry);
  } else if (strcmp(mode, "reconnect") == 0) {
    /* list; forget; list; the entry's url changes; list; a call; all on fresh clients */
    json_t *entry = entry_of(url, NULL);
    json_t *results = json_array();
    for (int step = 0; step < 3; step++) {
      if (step == 1) gateway_registry_forget(registry, "ext");
      if (step == 2) {
        char changed[1100];
        snprintf(changed, sizeof changed, "%s?changed=1", url);
        json_object_set_new(entry, "url", json_string(changed));
      }
      json_t *tools = NULL;
      int rc = gateway_registry_list_tools(registry, entry, auth, &tools, &err);
      json_array_append_new(results, json_integer(rc == 0 ? (json_int_t)json_array_size(tools) : rc));
      json_decref(tools);
    }
    json_t *arguments = json_pack("{s:i,s:i}", "a", 1, "b", 2);
    json_t *result = NULL;
    int rc = gateway_registry_call(registry, entry, auth, "add", arguments, NULL, &result, NULL, &err);
    json_array_append_new(results,
                          json_integer(rc == 0 ? json_integer_value(json_object_get(
                                                     json_object_get(result, "structuredContent"), "sum"))
                                               : rc));
    print(json_pack("{s:b,s:o}", "ok", 1, "steps", results));
    json_decref(result);
    json_decref(arguments);
    json_decref(entry);
  } else if (strcmp(mode, "bench") == 0 && argc >= 5) {
    json_t *entry = entry_of(url, "content=SENSITIVE");
    status = bench(registry, entry, auth, atoi(argv[4]));
    json_decref(entry);
  } else {
    fprintf(stderr, "harness: unknown mode or missing arguments: %s\n", mode);
    status = 2;
  }
  gateway_registry_free(registry);
  free(auth);
  return status;
}
