/* The backend registry model: which registry entries are external backends, their credentials and
 * classification, the MCP names their tools are exposed under, and the live client of each backend
 * (connected on first use, its tools/list cached). */
#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "supervisor/gateway/gateway.h"

#define PRIVATE_MEMBER "x-dome-tool"

bool gateway_entry_is_external(json_t *entry) {
  const char *url = json_string_value(json_object_get(entry, "url"));
  const char *protocol = json_string_value(json_object_get(entry, "protocol"));
  if (url == NULL || url[0] == '\0' || json_is_true(json_object_get(entry, "builtin"))) return false;
  return protocol == NULL || strcmp(protocol, "streamable-http") == 0;
}

const char *gateway_auth_header_value(const char *text, size_t *length) {
  const char *colon = text ? strchr(text, ':') : NULL;
  if (colon == NULL) {
    *length = 0;
    return "";
  }
  const char *value = colon + 1;
  while (*value == ' ' || *value == '\t') value++;
  size_t n = strcspn(value, "\r\n");
  while (n && (value[n - 1] == ' ' || value[n - 1] == '\t')) n--;
  *length = n;
  return value;
}

size_t gateway_auth_header_secrets(const char *text, struct guard_secret secrets[2]) {
  size_t length;
  const char *value = gateway_auth_header_value(text, &length);
  if (length == 0) return 0;
  size_t count = 0;
  secrets[count++] = (struct guard_secret){.name = "auth-header", .value = value, .length = length};
  const char *space = memchr(value, ' ', length);
  if (space) {
    const char *credential = space + 1;
    while (credential < value + length && *credential == ' ') credential++;
    if (credential < value + length)
      secrets[count++] = (struct guard_secret){
          .name = "auth-credential", .value = credential, .length = (size_t)(value + length - credential)};
  }
  return count;
}

char *gateway_classification_text(json_t *entry) {
  json_t *classification = json_object_get(entry, "field_classification");
  char *text = NULL;
  size_t size = 0;
  FILE *memory = open_memstream(&text, &size);
  if (memory == NULL) return NULL;
  const char *field;
  json_t *class_;
  bool first = true;
  json_object_foreach(classification, field, class_) {
    if (!json_is_string(class_)) continue;
    fprintf(memory, "%s%s=%s", first ? "" : ",", field, json_string_value(class_));
    first = false;
  }
  fclose(memory);
  return text;
}

static bool tool_name_char(char c) {
  return isalnum((unsigned char)c) || c == '_' || c == '-' || c == '.';
}

bool gateway_exposed_name(const char *backend, const char *tool, char out[GATEWAY_TOOL_NAME_MAX + 1]) {
  if (backend == NULL || tool == NULL || backend[0] == '\0' || tool[0] == '\0') return false;
  size_t length = strlen(backend) + 1 + strlen(tool);
  if (length > GATEWAY_TOOL_NAME_MAX) return false;
  for (const char *c = backend; *c; c++)
    if (!tool_name_char(*c)) return false;
  for (const char *c = tool; *c; c++)
    if (!tool_name_char(*c)) return false;
  size_t backend_length = strlen(backend);
  memcpy(out, backend, backend_length);
  out[backend_length] = '.';
  memcpy(out + backend_length + 1, tool, strlen(tool) + 1);
  return true;
}

json_t *gateway_tool_public(json_t *tool) {
  json_t *copy = json_deep_copy(tool);
  json_object_del(copy, PRIVATE_MEMBER);
  return copy;
}

json_t *gateway_registry_resolve(json_t *entries, const char *exposed, char tool[GATEWAY_TOOL_NAME_MAX + 1]) {
  json_t *best = NULL;
  size_t best_length = 0;
  size_t i;
  json_t *entry;
  if (exposed == NULL) return NULL;
  json_array_foreach(entries, i, entry) {
    const char *name = json_string_value(json_object_get(entry, "name"));
    if (name == NULL || !gateway_entry_is_external(entry)) continue;
    size_t length = strlen(name);
    if (strncmp(exposed, name, length) == 0 && exposed[length] == '.' && exposed[length + 1] != '\0' &&
        length > best_length) {
      best = entry;
      best_length = length;
    }
  }
  if (best == NULL || strlen(exposed + best_length + 1) > GATEWAY_TOOL_NAME_MAX) return NULL;
  snprintf(tool, GATEWAY_TOOL_NAME_MAX + 1, "%s", exposed + best_length + 1);
  return best;
}

/* ---- live backends ----
 * Each backend name has a slot; the slot's current client is a `struct live`, reference-counted so that
 * a client replaced (url or credential changed, failed listing, `forget`) is closed when its last
 * running call ends, never under it. */

struct live {
  gateway_backend *backend;
  unsigned refs; /* calls using it, + 1 while it is the slot's current client; under registry->lock */
};

struct slot {
  char name[128];
  char *url;
  char *auth_header;
  struct live *live; /* NULL: not connected */
  json_t *tools;     /* exposed list of the current client */
  uint64_t tools_at_ms;
  pthread_mutex_t lock; /* connect, live and the cached list */
  struct slot *next;
};

struct gateway_registry {
  struct gateway_registry_options options;
  pthread_mutex_t lock; /* the slot list and every live->refs */
  struct slot *slots;
};

static uint64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

int gateway_registry_create(const struct gateway_registry_options *options, gateway_registry **out,
                            dome_error *err) {
  gateway_registry *registry = calloc(1, sizeof *registry);
  if (registry == NULL) return dome_error_set(err, ENOMEM, "gateway registry");
  if (options) registry->options = *options;
  if (registry->options.tools_ttl_ms == 0) registry->options.tools_ttl_ms = 30000;
  pthread_mutex_init(&registry->lock, NULL);
  *out = registry;
  return 0;
}

static void live_release(gateway_registry *registry, struct live *live) {
  if (live == NULL) return;
  pthread_mutex_lock(&registry->lock);
  bool last = --live->refs == 0;
  pthread_mutex_unlock(&registry->lock);
  if (last) {
    gateway_backend_close(live->backend); /* ends the backend session (bounded by its timeouts) */
    free(live);
  }
}

static struct live *live_acquire(gateway_registry *registry, struct live *live) {
  pthread_mutex_lock(&registry->lock);
  live->refs++;
  pthread_mutex_unlock(&registry->lock);
  return live;
}

/* Drop the slot's current client (under slot->lock). */
static void retire(gateway_registry *registry, struct slot *slot) {
  struct live *live = slot->live;
  slot->live = NULL;
  json_decref(slot->tools);
  slot->tools = NULL;
  live_release(registry, live);
}

static void slot_free(gateway_registry *registry, struct slot *slot) {
  retire(registry, slot);
  free(slot->url);
  if (slot->auth_header) explicit_bzero(slot->auth_header, strlen(slot->auth_header));
  free(slot->auth_header);
  pthread_mutex_destroy(&slot->lock);
  free(slot);
}

void gateway_registry_free(gateway_registry *registry) {
  if (registry == NULL) return;
  for (struct slot *slot = registry->slots, *next; slot; slot = next) {
    next = slot->next;
    slot_free(registry, slot);
  }
  pthread_mutex_destroy(&registry->lock);
  free(registry);
}

static struct slot *slot_find(gateway_registry *registry, const char *name, bool create) {
  pthread_mutex_lock(&registry->lock);
  struct slot *slot = registry->slots;
  while (slot && strcmp(slot->name, name) != 0) slot = slot->next;
  if (slot == NULL && create) {
    slot = calloc(1, sizeof *slot);
    if (slot) {
      snprintf(slot->name, sizeof slot->name, "%s", name);
      pthread_mutex_init(&slot->lock, NULL);
      slot->next = registry->slots;
      registry->slots = slot;
    }
  }
  pthread_mutex_unlock(&registry->lock);
  return slot;
}

static bool same(const char *a, const char *b) {
  return (a == NULL && b == NULL) || (a && b && strcmp(a, b) == 0);
}

/* The connected client of `entry`'s backend (a reference: live_release it) and its slot, returned with
 * slot->lock held. */
static int slot_acquire(gateway_registry *registry, json_t *entry, const char *auth_header, struct slot **out,
                        struct live **live_out, dome_error *err) {
  const char *name = json_string_value(json_object_get(entry, "name"));
  const char *url = json_string_value(json_object_get(entry, "url"));
  if (name == NULL || !gateway_entry_is_external(entry))
    return dome_error_set(err, EINVAL, "backend `%s`: not an external streamable-http backend",
                          name ? name : "");
  struct slot *slot = slot_find(registry, name, true);
  if (slot == NULL) return dome_error_set(err, ENOMEM, "backend `%s`", name);
  pthread_mutex_lock(&slot->lock);
  if (slot->live && (!same(slot->url, url) || !same(slot->auth_header, auth_header))) retire(registry, slot);
  if (slot->live == NULL) {
    free(slot->url);
    free(slot->auth_header);
    slot->url = strdup(url);
    slot->auth_header = auth_header ? strdup(auth_header) : NULL;
    struct gateway_backend_options options = {
        .name = name,
        .url = url,
        .auth_header = auth_header,
        .connect_timeout_ms = registry->options.connect_timeout_ms,
        .timeout_ms = registry->options.timeout_ms,
        .max_message_bytes = registry->options.max_message_bytes,
        .ca_file = json_string_value(json_object_get(entry, "ca_file")),
        .client_name = "dome",
    };
    struct live *live = calloc(1, sizeof *live);
    int rc = live ? gateway_backend_connect(&options, &live->backend, err)
                  : dome_error_set(err, ENOMEM, "backend `%s`", name);
    if (rc < 0) {
      free(live);
      pthread_mutex_unlock(&slot->lock);
      return rc;
    }
    live->refs = 1; /* the slot's */
    slot->live = live;
  }
  *live_out = live_acquire(registry, slot->live);
  *out = slot;
  return 0;
}

static json_t *expose(const char *backend, json_t *tools) {
  json_t *exposed = json_array();
  size_t i;
  json_t *tool;
  json_array_foreach(tools, i, tool) {
    const char *original = json_string_value(json_object_get(tool, "name"));
    char name[GATEWAY_TOOL_NAME_MAX + 1];
    if (!gateway_exposed_name(backend, original, name)) continue; /* not a legal MCP name once prefixed */
    json_t *copy = json_deep_copy(tool);
    json_object_set_new(copy, "name", json_string(name));
    json_object_set_new(copy, PRIVATE_MEMBER, json_string(original));
    json_array_append_new(exposed, copy);
  }
  return exposed;
}

int gateway_registry_list_tools(gateway_registry *registry, json_t *entry, const char *auth_header,
                                json_t **out, dome_error *err) {
  struct slot *slot;
  struct live *live;
  int rc = slot_acquire(registry, entry, auth_header, &slot, &live, err);
  if (rc < 0) return rc;
  uint64_t now = now_ms();
  if (slot->tools && now - slot->tools_at_ms < registry->options.tools_ttl_ms) {
    *out = json_deep_copy(slot->tools);
    pthread_mutex_unlock(&slot->lock);
    live_release(registry, live);
    return 0;
  }
  /* Listed without the slot lock: a slow backend delays no call. */
  pthread_mutex_unlock(&slot->lock);
  json_t *tools = NULL;
  rc = gateway_backend_list_tools(live->backend, &tools, err);
  pthread_mutex_lock(&slot->lock);
  if (rc == 0) {
    json_t *exposed = expose(slot->name, tools);
    if (slot->live == live) {
      json_decref(slot->tools);
      slot->tools = json_incref(exposed);
      slot->tools_at_ms = now;
    }
    *out = exposed;
    json_decref(tools);
  } else if (rc != -EREMOTEIO && slot->live == live) {
    retire(registry, slot); /* reconnect on the next use */
  }
  pthread_mutex_unlock(&slot->lock);
  live_release(registry, live);
  return rc;
}

json_t *gateway_registry_cached_tools(gateway_registry *registry, const char *name) {
  struct slot *slot = slot_find(registry, name, false);
  if (slot == NULL) return NULL;
  pthread_mutex_lock(&slot->lock);
  json_t *tools = slot->tools ? json_deep_copy(slot->tools) : NULL;
  pthread_mutex_unlock(&slot->lock);
  return tools;
}

int gateway_registry_call(gateway_registry *registry, json_t *entry, const char *auth_header,
                          const char *tool, json_t *arguments, const struct gateway_call_options *options,
                          json_t **result, int *rpc_error, dome_error *err) {
  if (rpc_error) *rpc_error = 0;
  struct slot *slot;
  struct live *live;
  int rc = slot_acquire(registry, entry, auth_header, &slot, &live, err);
  if (rc < 0) return rc;
  pthread_mutex_unlock(&slot->lock);
  rc = gateway_backend_call_tool(live->backend, tool, arguments, options, result, rpc_error, err);
  live_release(registry, live);
  return rc;
}

void gateway_registry_forget(gateway_registry *registry, const char *name) {
  struct slot *slot = name ? slot_find(registry, name, false) : NULL;
  if (slot == NULL) return;
  pthread_mutex_lock(&slot->lock);
  retire(registry, slot);
  pthread_mutex_unlock(&slot->lock);
}
