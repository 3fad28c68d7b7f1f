/* Pinned tool definitions of the gateway backends (rug-pull defence): `dome tool add` and `dome tool
 * approve NAME` record the digest and definition of each of the backend's tools (name, description,
 * inputSchema, outputSchema, annotations; supervisor/gateway/pins.c) in <state_dir>/pins/<backend>.json.
 * On every later discovery a tool whose definition changed, a tool the pins do not hold and a pinned tool
 * the backend no longer lists are withheld from agents (not listed; a call is refused with a tool error)
 * and journalled once per new definition as tool.changed (old and new digest, the fields that differ)
 * until an operator approves the backend again. Approval checks the descriptions for hidden text and
 * instructions addressed to the model (gateway_tool_findings) and refuses while there are findings,
 * unless they are accepted. A backend never pinned (its first listing came after `dome tool add`) is
 * pinned at its first discovery, except its tools with findings, which stay withheld. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <sodium.h>

#include "supervisor/domed/domed.h"
#include "supervisor/gateway/gateway.h"

/* The pins files and the tool.changed events already journalled ("backend\ntool\ndigest"). */
static pthread_mutex_t pins_lock = PTHREAD_MUTEX_INITIALIZER;
#define PINS_REPORTED_MAX 4096
static json_t *reported;

static void pins_path(struct domed *domed, const char *backend, char *path, size_t size) {
  snprintf(path, size, "%s/pins/%s.json", domed->config.state_dir, backend);
}

/* The backend's pins {"approved_at", "tools": {tool: {digest, definition}}}, or NULL when never pinned. */
static json_t *pins_load(struct domed *domed, const char *backend) {
  char path[1200];
  pins_path(domed, backend, path, sizeof path);
  json_t *pins = json_load_file(path, 0, NULL);
  if (pins && !json_is_object(json_object_get(pins, "tools"))) {
    json_decref(pins);
    pins = NULL;
  }
  return pins;
}

static int pins_save(struct domed *domed, const char *backend, json_t *pins, dome_error *err) {
  char directory[1100], path[1200], temporary[1210];
  snprintf(directory, sizeof directory, "%s/pins", domed->config.state_dir);
  if (mkdir(directory, 0700) < 0 && errno != EEXIST)
    return dome_error_set_errno(err, errno, "create `%s`", directory);
  pins_path(domed, backend, path, sizeof path);
  snprintf(temporary, sizeof temporary, "%s.tmp", path);
  if (json_dump_file(pins, temporary, JSON_INDENT(1) | JSON_SORT_KEYS) < 0)
    return dome_error_set(err, EIO, "write `%s`", temporary);
  chmod(temporary, 0600);
  if (rename(temporary, path) < 0) return dome_error_set_errno(err, errno, "rename to `%s`", path);
  return 0;
}

void domed_pins_forget(struct domed *domed, const char *backend) {
  char path[1200];
  pins_path(domed, backend, path, sizeof path);
  pthread_mutex_lock(&pins_lock);
  unlink(path);
  pthread_mutex_unlock(&pins_lock);
}

/* Journal tool.changed once per (backend, tool, new definition). */
static void report_change(struct domed *domed, const char *backend, const char *tool, const char *change,
                          json_t *pin, json_t *definition, const char *digest) {
  char key[600];
  snprintf(key, sizeof key, "%s\n%s\n%s", backend, tool, digest ? digest : "removed");
  pthread_mutex_lock(&pins_lock);
  if (reported == NULL) reported = json_object();
  /* bounded: a backend that changes its definitions without end is reported again after a clear,
   * never held in memory without limit */
  if (json_object_size(reported) >= PINS_REPORTED_MAX) json_object_clear(reported);
  bool seen = json_object_get(reported, key) != NULL;
  if (!seen) json_object_set_new(reported, key, json_true());
  pthread_mutex_unlock(&pins_lock);
  if (seen) return;
  json_t *event = json_pack("{s:s,s:s,s:s,s:s}", "type", "tool.changed", "tool", backend, "mcp_tool", tool,
                            "change", change);
  if (pin) json_object_set(event, "old_digest", json_object_get(pin, "digest"));
  if (digest) json_object_set_new(event, "new_digest", json_string(digest));
  json_t *fields =
      pin && definition ? gateway_tool_diff(json_object_get(pin, "definition"), definition) : json_array();
  json_object_set_new(event, "fields", fields);
  domed_log("warn", "gateway",
            "backend=%s tool=%s msg=\"tool %s since approval: withheld until dome tool approve\"", backend,
            tool, change);
  dome_error ignored = {0};
  domed_audit_append(domed, event, NULL, &ignored);
  json_decref(event);
}

static void forget_reports(const char *backend) {
  pthread_mutex_lock(&pins_lock);
  if (reported) {
    size_t length = strlen(backend);
    const char *key;
    json_t *value;
    void *tmp;
    json_object_foreach_safe(reported, tmp, key, value) {
      if (strncmp(key, backend, length) == 0 && key[length] == '\n') json_object_del(reported, key);
    }
  }
  pthread_mutex_unlock(&pins_lock);
}

/* Pin every tool of `tools` without findings (first discovery of a backend never pinned). */
static json_t *pin_first(struct domed *domed, const char *backend, json_t *tools) {
  json_t *pinned = json_object();
  size_t i;
  json_t *tool;
  json_array_foreach(tools, i, tool) {
    json_t *definition = gateway_tool_definition(tool);
    json_t *findings = gateway_tool_findings(definition);
    char digest[GATEWAY_DIGEST_HEX + 1];
    if (json_array_size(findings) == 0 && gateway_tool_digest(definition, digest) == 0)
      json_object_set_new(pinned, json_string_value(json_object_get(definition, "name")),
                          json_pack("{s:s,s:O}", "digest", digest, "definition", definition));
    json_decref(findings);
    json_decref(definition);
  }
  json_t *pins =
      json_pack("{s:I,s:o,s:b}", "approved_at", (json_int_t)time(NULL), "tools", pinned, "first_use", 1);
  dome_error err = {0};
  pthread_mutex_lock(&pins_lock);
  json_t *existing = pins_load(domed, backend);
  int rc = existing ? 0 : pins_save(domed, backend, pins, &err);
  pthread_mutex_unlock(&pins_lock);
  if (existing) {
    json_decref(pins);
    return existing;
  }
  if (rc < 0) domed_log("error", "gateway", "backend=%s msg=\"pins not saved: %s\"", backend, err.message);
  json_t *event = json_pack("{s:s,s:s,s:I}", "type", "tool.pinned", "tool", backend, "tools",
                            (json_int_t)json_object_size(pinned));
  domed_audit_append(domed, event, NULL, &err);
  json_decref(event);
  return pins;
}

json_t *domed_pins_filter(struct domed *domed, json_t *entry, json_t *tools) {
  const char *backend = json_string_value(json_object_get(entry, "name"));
  pthread_mutex_lock(&pins_lock);
  json_t *pins = pins_load(domed, backend);
  pthread_mutex_unlock(&pins_lock);
  if (pins == NULL) pins = pin_first(domed, backend, tools);
  json_t *pinned = json_object_get(pins, "tools");
  json_t *allowed = json_array();
  json_t *seen = json_object();
  size_t i;
  json_t *tool;
  json_array_foreach(tools, i, tool) {
    json_t *definition = gateway_tool_definition(tool);
    const char *name = json_string_value(json_object_get(definition, "name"));
    char digest[GATEWAY_DIGEST_HEX + 1] = "";
    gateway_tool_digest(definition, digest);
    json_t *pin = name ? json_object_get(pinned, name) : NULL;
    if (name) json_object_set_new(seen, name, json_true());
    if (pin && strcmp(json_string_value(json_object_get(pin, "digest")), digest) == 0)
      json_array_append(allowed, tool);
    else if (name)
      report_change(domed, backend, name, pin ? "changed" : "added", pin, definition, digest);
    json_decref(definition);
  }
  const char *name;
  json_t *pin;
  json_object_foreach(pinned, name, pin) {
    if (json_object_get(seen, name) == NULL) report_change(domed, backend, name, "removed", pin, NULL, NULL);
  }
  json_decref(seen);
  json_decref(pins);
  return allowed;
}

json_t *domed_pins_approve(struct domed *domed, json_t *entry, bool accept_findings,
                           int (*record)(void *context, const json_t *approval, dome_error *err),
                           void *record_context, dome_error *err) {
  const char *backend = json_string_value(json_object_get(entry, "name"));
  /* a fresh listing: the cached one may predate the change being approved */
  gateway_registry_forget(domed->gateways, backend);
  char *auth_header = control_tool_auth_header(domed->store, backend);
  json_t *tools = NULL;
  int rc = gateway_registry_list_tools(domed->gateways, entry, auth_header, &tools, err);
  if (auth_header) sodium_memzero(auth_header, strlen(auth_header));
  free(auth_header);
  if (rc < 0) {
    dome_error_wrap(err, "list the tools of `%s`", backend);
    return NULL;
  }
  pthread_mutex_lock(&pins_lock);
  json_t *old = pins_load(domed, backend);
  pthread_mutex_unlock(&pins_lock);
  json_t *old_tools = old ? json_object_get(old, "tools") : NULL;
  json_t *pinned = json_object(), *changes = json_array(), *findings = json_array();
  size_t i;
  json_t *tool;
  json_array_foreach(tools, i, tool) {
    json_t *definition = gateway_tool_definition(tool);
    const char *name = json_string_value(json_object_get(definition, "name"));
    char digest[GATEWAY_DIGEST_HEX + 1] = "";
    gateway_tool_digest(definition, digest);
    json_t *pin = json_object_get(old_tools, name);
    if (pin == NULL || strcmp(json_string_value(json_object_get(pin, "digest")), digest) != 0) {
      json_t *change = json_pack("{s:s,s:s,s:s,s:O}", "mcp_tool", name, "change", pin ? "changed" : "added",
                                 "new_digest", digest, "new", definition);
      if (pin) {
        json_object_set(change, "old_digest", json_object_get(pin, "digest"));
        json_object_set(change, "old", json_object_get(pin, "definition"));
        json_object_set_new(change, "fields",
                            gateway_tool_diff(json_object_get(pin, "definition"), definition));
      }
      json_array_append_new(changes, change);
    }
    json_t *found = gateway_tool_findings(definition);
    size_t j;
    json_t *finding;
    json_array_foreach(found, j, finding) {
      json_object_set_new(finding, "mcp_tool", json_string(name));
      json_array_append(findings, finding);
    }
    json_decref(found);
    json_object_set_new(pinned, name, json_pack("{s:s,s:o}", "digest", digest, "definition", definition));
  }
  const char *name;
  json_t *pin;
  json_object_foreach(old_tools, name, pin) {
    if (json_object_get(pinned, name) == NULL)
      json_array_append_new(changes, json_pack("{s:s,s:s,s:O}", "mcp_tool", name, "change", "removed",
                                               "old_digest", json_object_get(pin, "digest")));
  }
  json_decref(tools);
  json_decref(old);
  json_t *result = json_pack("{s:s,s:o,s:o,s:I}", "tool", backend, "changes", changes, "findings", findings,
                             "pinned", (json_int_t)json_object_size(pinned));
  if (json_array_size(findings) > 0 && !accept_findings) {
    json_t *event = json_pack("{s:s,s:s,s:O,s:b}", "type", "tool.findings", "tool", backend, "findings",
                              findings, "approved", 0);
    dome_error ignored = {0};
    domed_audit_append_sync(domed, event, &ignored);
    json_decref(event);
    json_decref(pinned);
    json_object_set_new(result, "approved", json_false());
    return result;
  }
  json_object_set_new(result, "approved", json_true());
  json_t *pins = json_pack("{s:I,s:o}", "approved_at", (json_int_t)time(NULL), "tools", pinned);
  rc = record ? record(record_context, result, err) : 0; /* on record before the pins change */
  if (rc == 0) {
    pthread_mutex_lock(&pins_lock);
    rc = pins_save(domed, backend, pins, err);
    pthread_mutex_unlock(&pins_lock);
  }
  json_decref(pins);
  if (rc < 0) {
    json_decref(result);
    return NULL;
  }
  forget_reports(backend);
  return result;
}

int domed_pins_check_call(struct domed *domed, json_t *entry, const char *tool, json_t **input_schema,
                          char *reason, size_t size) {
  *input_schema = NULL;
  const char *backend = json_string_value(json_object_get(entry, "name"));
  char *auth_header = control_tool_auth_header(domed->store, backend);
  json_t *tools = NULL;
  dome_error ignored = {0};
  int listed = gateway_registry_list_tools(domed->gateways, entry, auth_header, &tools, &ignored);
  if (auth_header) sodium_memzero(auth_header, strlen(auth_header));
  free(auth_header);
  if (listed < 0) return 0; /* the backend cannot be reached: the call fails there */
  json_t *allowed = domed_pins_filter(domed, entry, tools);
  pthread_mutex_lock(&pins_lock);
  json_t *pins = pins_load(domed, backend);
  pthread_mutex_unlock(&pins_lock);
  bool was_pinned = json_object_get(json_object_get(pins, "tools"), tool) != NULL;
  json_decref(pins);
  bool listed_raw = false, approved = false;
  size_t i;
  json_t *definition;
  json_array_foreach(tools, i, definition) {
    const char *original = json_string_value(json_object_get(definition, "x-dome-tool"));
    listed_raw |= original && strcmp(original, tool) == 0;
  }
  json_array_foreach(allowed, i, definition) {
    const char *original = json_string_value(json_object_get(definition, "x-dome-tool"));
    if (original && strcmp(original, tool) == 0) {
      approved = true;
      *input_schema = json_incref(json_object_get(definition, "inputSchema"));
    }
  }
  json_decref(allowed);
  json_decref(tools);
  /* a tool the backend neither lists nor ever listed is left to the rules and to the backend */
  if (approved || (!listed_raw && !was_pinned)) return 0;
  if (listed_raw)
    snprintf(reason, size,
             "tool `%s` of `%s` changed since it was approved: withheld until `dome tool approve %s`", tool,
             backend, backend);
  else
    snprintf(reason, size,
             "tool `%s` of `%s` was removed since it was approved: withheld until `dome tool approve %s`",
             tool, backend, backend);
  return -1;
}
