/* Versions of the operator's Cedar rules: each apply stores rules/<version>.cedar and then switches
 * rules/index.json's `active` member in one atomic rename, so a crash leaves either version active. */
#include <errno.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "supervisor/control/store_internal.h"

int control_rules_store(control_store *store, const char *name, const char *text, dome_error *err) {
  if (!control_name_valid(name))
    return dome_error_set(err, EINVAL, "--name: invalid rules name `%s`", name ? name : "");
  if (text == NULL) return dome_error_set(err, EINVAL, "rules text missing");
  size_t length = strlen(text);
  unsigned char digest[crypto_hash_sha256_BYTES];
  crypto_hash_sha256(digest, (const unsigned char *)text, length);
  char hex[crypto_hash_sha256_BYTES * 2 + 1];
  sodium_bin2hex(hex, sizeof hex, digest, sizeof digest);
  pthread_mutex_lock(&store->lock);
  json_t *versions = json_object_get(store->rules, "versions");
  int version = (int)json_array_size(versions) + 1;
  char relative[64];
  snprintf(relative, sizeof relative, "rules/%d.cedar", version);
  int rc = control_store_write_text(store, relative, text, length, err);
  if (rc == 0) {
    json_t *next = json_deep_copy(store->rules);
    json_array_append_new(json_object_get(next, "versions"),
                          json_pack("{s:i,s:s,s:s,s:I,s:I}", "version", version, "name", name, "sha256", hex,
                                    "created", (json_int_t)control_store_now(), "bytes", (json_int_t)length));
    rc = control_store_replace_json(store, "rules/index.json", &store->rules, next, err);
  }
  pthread_mutex_unlock(&store->lock);
  return rc < 0 ? rc : version;
}

int control_rules_activate(control_store *store, int version, dome_error *err) {
  pthread_mutex_lock(&store->lock);
  int rc;
  if (version < 1 || (size_t)version > json_array_size(json_object_get(store->rules, "versions"))) {
    rc = dome_error_set(err, ENOENT, "rules version %d not found", version);
  } else {
    json_t *next = json_deep_copy(store->rules);
    json_object_set_new(next, "active", json_integer(version));
    rc = control_store_replace_json(store, "rules/index.json", &store->rules, next, err);
  }
  pthread_mutex_unlock(&store->lock);
  return rc;
}

int control_rules_active(control_store *store) {
  pthread_mutex_lock(&store->lock);
  int version = (int)json_integer_value(json_object_get(store->rules, "active"));
  pthread_mutex_unlock(&store->lock);
  return version;
}

json_t *control_rules_list(control_store *store) {
  pthread_mutex_lock(&store->lock);
  json_t *list = json_deep_copy(json_object_get(store->rules, "versions"));
  json_int_t active = json_integer_value(json_object_get(store->rules, "active"));
  pthread_mutex_unlock(&store->lock);
  size_t i;
  json_t *entry;
  json_array_foreach(list, i, entry) json_object_set_new(
      entry, "active", json_boolean(json_integer_value(json_object_get(entry, "version")) == active));
  return list;
}

char *control_rules_text(control_store *store, int version, dome_error *err) {
  if (version == 0) version = control_rules_active(store);
  if (version == 0) {
    dome_error_set(err, ENOENT, "no rules have been applied");
    return NULL;
  }
  char path[4400];
  snprintf(path, sizeof path, "%s/rules/%d.cedar", store->dir, version);
  FILE *file = fopen(path, "re");
  if (file == NULL) {
    dome_error_set_errno(err, errno, "rules version %d: `%s`", version, path);
    return NULL;
  }
  char *text = NULL;
  size_t size = 0;
  FILE *memory = open_memstream(&text, &size);
  char buffer[8192];
  size_t n;
  while ((n = fread(buffer, 1, sizeof buffer, file)) > 0) fwrite(buffer, 1, n, memory);
  fclose(file);
  fclose(memory);
  return text;
}
