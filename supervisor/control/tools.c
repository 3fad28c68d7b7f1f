/* The tool registry: backends reachable through gateways, their field classification and their
 * secret environment (kept in secrets/<tool>.env, mode 0600, never listed back). */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "supervisor/common/cleanup.h"
#include "supervisor/control/store_internal.h"

int control_parse_field_classification(const char *text, json_t **out, dome_error *err) {
  json_t *result = json_object();
  const char *p = text ? text : "";
  while (*p) {
    const char *comma = strchr(p, ',');
    size_t length = comma ? (size_t)(comma - p) : strlen(p);
    char item[256];
    if (length == 0 || length >= sizeof item) {
      json_decref(result);
      return dome_error_set(err, EINVAL, "--field-classification: empty or too long item in `%s`", text);
    }
    memcpy(item, p, length);
    item[length] = '\0';
    char *equals = strchr(item, '=');
    if (equals == NULL || equals == item || equals[1] == '\0') {
      json_decref(result);
      return dome_error_set(err, EINVAL, "--field-classification: expected field=CLASS, got `%s`", item);
    }
    *equals = '\0';
    const char *field = item, *class = equals + 1;
    bool valid = isupper((unsigned char)class[0]);
    for (const char *c = class; *c; c++)
      valid &= isupper((unsigned char)*c) || isdigit((unsigned char)*c) || *c == '_';
    for (const char *c = field; *c; c++)
      valid &= isalnum((unsigned char)*c) || *c == '_' || *c == '.' || *c == '-' || *c == '/';
    if (!valid) {
      json_decref(result);
      return dome_error_set(err, EINVAL, "--field-classification: invalid item `%s=%s` (CLASS is upper case)",
                            field, class);
    }
    json_object_set_new(result, field, json_string(class));
    if (!comma) break;
    p = comma + 1;
  }
  *out = result;
  return 0;
}

int control_parse_env_file(const char *text, json_t **out, dome_error *err) {
  json_t *result = json_object();
  int line_number = 0;
  const char *p = text ? text : "";
  while (*p) {
    line_number++;
    const char *newline = strchr(p, '\n');
    size_t length = newline ? (size_t)(newline - p) : strlen(p);
    _cleanup_free_ char *line = strndup(p, length);
    p += length + (newline ? 1 : 0);
    if (line == NULL) {
      json_decref(result);
      return dome_error_set(err, ENOMEM, "env file");
    }
    size_t n = strlen(line);
    if (n && line[n - 1] == '\r') line[--n] = '\0';
    char *start = line;
    while (*start == ' ' || *start == '\t') start++;
    if (*start == '\0' || *start == '#') continue;
    if (strncmp(start, "export ", 7) == 0) start += 7;
    char *equals = strchr(start, '=');
    bool valid = equals && equals != start && (isalpha((unsigned char)*start) || *start == '_');
    for (char *c = start; valid && c < equals; c++) valid = isalnum((unsigned char)*c) || *c == '_';
    if (!valid) {
      json_decref(result);
      return dome_error_set(err, EINVAL, "env file line %d: expected NAME=VALUE", line_number);
    }
    *equals = '\0';
    char *value = equals + 1;
    size_t value_length = strlen(value);
    if (value_length >= 2 && ((value[0] == '"' && value[value_length - 1] == '"') ||
                              (value[0] == '\'' && value[value_length - 1] == '\''))) {
      value[value_length - 1] = '\0';
      value++;
    }
    json_object_set_new(result, start, json_string(value));
  }
  *out = result;
  return 0;
}

static int load_secrets(const control_store *store, const char *name, json_t **out) {
  char relative[256];
  snprintf(relative, sizeof relative, "secrets/%s.env.json", name);
  dome_error ignored;
  return control_store_load_json(store, relative, json_object(), out, &ignored);
}

int control_tool_add(control_store *store, json_t *tool, const char *env_file, dome_error *err) {
  if (!json_is_object(tool)) return dome_error_set(err, EINVAL, "tool must be an object");
  const char *name = json_string_value(json_object_get(tool, "name"));
  if (!control_name_valid(name))
    return dome_error_set(err, EINVAL, "--name: invalid tool name `%s`", name ? name : "");
  const char *url = json_string_value(json_object_get(tool, "url"));
  if (url && strncmp(url, "http://", 7) != 0 && strncmp(url, "https://", 8) != 0)
    return dome_error_set(err, EINVAL, "--url: expected an http:// or https:// URL, got `%s`", url);
  const char *protocol = json_string_value(json_object_get(tool, "protocol"));
  if (protocol == NULL) protocol = "streamable-http";
  if (strcmp(protocol, "streamable-http") != 0)
    return dome_error_set(err, EINVAL, "--protocol: only streamable-http is supported, got `%s`", protocol);
  const char *gateway = json_string_value(json_object_get(tool, "gateway"));
  if (gateway == NULL) gateway = "Default";
  if (!control_name_valid(gateway))
    return dome_error_set(err, EINVAL, "--gateway: invalid gateway `%s`", gateway);
  const char *capability = json_string_value(json_object_get(tool, "capability"));
  if (capability && !control_name_valid(capability))
    return dome_error_set(err, EINVAL, "--capability: invalid capability `%s`", capability);
  json_t *classification = json_object_get(tool, "field_classification");
  if (classification && !json_is_object(classification))
    return dome_error_set(err, EINVAL, "field_classification must be an object");
  json_t *secrets = NULL;
  if (env_file) {
    int rc = control_parse_env_file(env_file, &secrets, err);
    if (rc < 0) return dome_error_wrap(err, "--env-file");
  }
  json_t *entry = json_pack("{s:s,s:s,s:s,s:I}", "protocol", protocol, "gateway", gateway, "url",
                            url ? url : "", "updated", (json_int_t)control_store_now());
  if (capability) json_object_set_new(entry, "capability", json_string(capability));
  json_object_set(entry, "field_classification", classification ? classification : json_object());
  if (json_is_true(json_object_get(tool, "builtin"))) json_object_set_new(entry, "builtin", json_true());
  json_t *other;
  const char *key;
  json_object_foreach(tool, key, other) { /* extension members (e.g. auth_header) the gateway may add */
    if (json_object_get(entry, key) == NULL && strcmp(key, "name") != 0) json_object_set(entry, key, other);
  }
  pthread_mutex_lock(&store->lock);
  int rc = 0;
  if (secrets) {
    char relative[256];
    snprintf(relative, sizeof relative, "secrets/%s.env.json", name);
    rc = control_store_write_json(store, relative, secrets, err);
  } else {
    json_t *previous = json_object_get(store->tools, name);
    json_t *names = json_object_get(previous, "secret_env");
    if (names) json_object_set(entry, "secret_env", names);
  }
  if (secrets && rc == 0) {
    json_t *names = json_array();
    json_object_foreach(secrets, key, other) json_array_append_new(names, json_string(key));
    json_object_set_new(entry, "secret_env", names);
  }
  if (rc == 0) {
    json_t *next = json_deep_copy(store->tools);
    json_object_set(next, name, entry);
    rc = control_store_replace_json(store, "tools.json", &store->tools, next, err);
  }
  pthread_mutex_unlock(&store->lock);
  json_decref(entry);
  json_decref(secrets);
  return rc;
}

int control_tool_remove(control_store *store, const char *name, dome_error *err) {
  pthread_mutex_lock(&store->lock);
  int rc;
  if (json_object_get(store->tools, name ? name : "") == NULL) {
    rc = dome_error_set(err, ENOENT, "tool `%s` not found", name ? name : "");
  } else {
    json_t *next = json_deep_copy(store->tools);
    json_object_del(next, name);
    rc = control_store_replace_json(store, "tools.json", &store->tools, next, err);
    if (rc == 0) {
      char path[4400];
      snprintf(path, sizeof path, "%s/secrets/%s.env.json", store->dir, name);
      unlink(path);
      snprintf(path, sizeof path, "%s/secrets/%s.auth.json", store->dir, name);
      unlink(path);
    }
  }
  pthread_mutex_unlock(&store->lock);
  return rc;
}

static json_t *listed(const char *name, json_t *tool) {
  json_t *copy = json_deep_copy(tool);
  json_object_set_new(copy, "name", json_string(name));
  if (json_object_get(copy, "secret_env") == NULL) json_object_set_new(copy, "secret_env", json_array());
  return copy;
}

json_t *control_tool_list(control_store *store) {
  json_t *list = json_array();
  pthread_mutex_lock(&store->lock);
  const char *name;
  json_t *tool;
  json_object_foreach(store->tools, name, tool) json_array_append_new(list, listed(name, tool));
  pthread_mutex_unlock(&store->lock);
  return list;
}

json_t *control_tool_get(control_store *store, const char *name) {
  pthread_mutex_lock(&store->lock);
  json_t *tool = json_object_get(store->tools, name ? name : "");
  json_t *result = tool ? listed(name, tool) : NULL;
  pthread_mutex_unlock(&store->lock);
  return result;
}

json_t *control_tool_secret_env(control_store *store, const char *name) {
  if (!control_name_valid(name)) return json_object();
  json_t *secrets = NULL;
  pthread_mutex_lock(&store->lock);
  if (load_secrets(store, name, &secrets) < 0 || secrets == NULL) secrets = json_object();
  pthread_mutex_unlock(&store->lock);
  return secrets;
}

int control_tool_set_auth_header(control_store *store, const char *name, const char *text, dome_error *err) {
  if (!control_name_valid(name))
    return dome_error_set(err, EINVAL, "--name: invalid tool name `%s`", name ? name : "");
  char relative[256];
  snprintf(relative, sizeof relative, "secrets/%s.auth.json", name);
  json_t *value = json_pack("{s:s}", "header", text ? text : "");
  if (value == NULL) return dome_error_set(err, EINVAL, "--auth-header-file: not UTF-8 text");
  pthread_mutex_lock(&store->lock);
  int rc = control_store_write_json(store, relative, value, err);
  pthread_mutex_unlock(&store->lock);
  json_decref(value);
  return rc;
}

char *control_tool_auth_header(control_store *store, const char *name) {
  if (!control_name_valid(name)) return NULL;
  char relative[256];
  snprintf(relative, sizeof relative, "secrets/%s.auth.json", name);
  json_t *value = NULL;
  dome_error ignored;
  pthread_mutex_lock(&store->lock);
  int rc = control_store_load_json(store, relative, NULL, &value, &ignored);
  pthread_mutex_unlock(&store->lock);
  const char *header = rc == 0 ? json_string_value(json_object_get(value, "header")) : NULL;
  char *copy = header && header[0] ? strdup(header) : NULL;
  json_decref(value);
  return copy;
}
