/* Console operators (people, not agents) and their login tokens. A login token is "domeop_" + 256
 * random bits in URL-safe base64, shown once; only its BLAKE2b-256 hash is stored in operators.json
 * (the token has full entropy: a fast hash leaves nothing to brute-force offline). */
#include <errno.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "supervisor/control/store_internal.h"

static void operator_token_hash(const char *token, char hex[65]) {
  unsigned char digest[32];
  crypto_generichash(digest, sizeof digest, (const unsigned char *)token, strlen(token), NULL, 0);
  sodium_bin2hex(hex, 65, digest, sizeof digest);
}

bool control_operator_role_valid(const char *role) {
  return role && (strcmp(role, "auditor") == 0 || strcmp(role, "operator") == 0);
}

int control_operator_add(control_store *store, const char *name, const char *role,
                         char token[CONTROL_TOKEN_SIZE], dome_error *err) {
  if (!control_name_valid(name))
    return dome_error_set(err, EINVAL, "--name: invalid operator name `%s`", name ? name : "");
  if (!control_operator_role_valid(role))
    return dome_error_set(err, EINVAL, "--role: expected auditor or operator, got `%s`", role ? role : "");
  unsigned char random_bytes[32];
  randombytes_buf(random_bytes, sizeof random_bytes);
  memcpy(token, CONTROL_OPERATOR_TOKEN_PREFIX, sizeof CONTROL_OPERATOR_TOKEN_PREFIX - 1);
  sodium_bin2base64(token + sizeof CONTROL_OPERATOR_TOKEN_PREFIX - 1,
                    CONTROL_TOKEN_SIZE - (sizeof CONTROL_OPERATOR_TOKEN_PREFIX - 1), random_bytes,
                    sizeof random_bytes, sodium_base64_VARIANT_URLSAFE_NO_PADDING);
  sodium_memzero(random_bytes, sizeof random_bytes);
  char hash[65];
  operator_token_hash(token, hash);
  pthread_mutex_lock(&store->lock);
  int rc = 0;
  if (json_object_get(store->operators, name)) {
    rc = dome_error_set(err, EEXIST, "operator `%s` already exists (a revoked name stays taken)", name);
  } else {
    int64_t now = control_store_now();
    json_t *next = json_deep_copy(store->operators);
    json_object_set_new(next, name,
                        json_pack("{s:s,s:s,s:s,s:I,s:I}", "role", role, "status", "active", "token_hash",
                                  hash, "created", (json_int_t)now, "updated", (json_int_t)now));
    rc = control_store_replace_json(store, "operators.json", &store->operators, next, err);
  }
  pthread_mutex_unlock(&store->lock);
  if (rc < 0) sodium_memzero(token, CONTROL_TOKEN_SIZE);
  return rc;
}

int control_operator_revoke(control_store *store, const char *name, dome_error *err) {
  pthread_mutex_lock(&store->lock);
  int rc = 0;
  json_t *record = json_object_get(store->operators, name ? name : "");
  if (record == NULL) {
    rc = dome_error_set(err, ENOENT, "operator `%s` not found", name ? name : "");
  } else {
    json_t *next = json_deep_copy(store->operators);
    json_t *copy = json_object_get(next, name);
    json_object_set_new(copy, "status", json_string("revoked"));
    json_object_set_new(copy, "updated", json_integer((json_int_t)control_store_now()));
    rc = control_store_replace_json(store, "operators.json", &store->operators, next, err);
  }
  pthread_mutex_unlock(&store->lock);
  return rc;
}

static json_t *public_operator(const char *name, json_t *record) {
  json_t *copy = json_deep_copy(record);
  json_object_del(copy, "token_hash");
  json_object_set_new(copy, "name", json_string(name));
  return copy;
}

json_t *control_operator_list(control_store *store) {
  json_t *list = json_array();
  pthread_mutex_lock(&store->lock);
  const char *name;
  json_t *record;
  json_object_foreach(store->operators, name, record)
      json_array_append_new(list, public_operator(name, record));
  pthread_mutex_unlock(&store->lock);
  return list;
}

json_t *control_operator_authenticate(control_store *store, const char *token, dome_error *err) {
  if (token == NULL ||
      strncmp(token, CONTROL_OPERATOR_TOKEN_PREFIX, sizeof CONTROL_OPERATOR_TOKEN_PREFIX - 1) != 0 ||
      strlen(token) >= CONTROL_TOKEN_SIZE) {
    dome_error_set(err, EACCES, "invalid login token");
    return NULL;
  }
  char hash[65];
  operator_token_hash(token, hash);
  json_t *found = NULL;
  pthread_mutex_lock(&store->lock);
  const char *name;
  json_t *record;
  /* every record is compared, so the time taken does not say which one matched */
  json_object_foreach(store->operators, name, record) {
    const char *stored = json_string_value(json_object_get(record, "token_hash"));
    if (stored && strlen(stored) == 64 && sodium_memcmp(stored, hash, 64) == 0 && found == NULL)
      found = public_operator(name, record);
  }
  pthread_mutex_unlock(&store->lock);
  if (found == NULL) {
    dome_error_set(err, EACCES, "invalid login token");
    return NULL;
  }
  if (strcmp(json_string_value(json_object_get(found, "status")), "active") != 0) {
    dome_error_set(err, EACCES, "operator `%s` is revoked",
                   json_string_value(json_object_get(found, "name")));
    json_decref(found);
    return NULL;
  }
  return found;
}

json_t *control_operator_get(control_store *store, const char *name) {
  pthread_mutex_lock(&store->lock);
  json_t *record = json_object_get(store->operators, name ? name : "");
  json_t *copy = record ? public_operator(name, record) : NULL;
  pthread_mutex_unlock(&store->lock);
  return copy;
}
