/* Agents and their bearer tokens. A token is "dome_" + 256 random bits in URL-safe base64; it is
 * shown once and only its BLAKE2b-256 hash is stored (a fast hash suffices: the token has full
 * entropy, so there is nothing to brute-force). */
#include <errno.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "supervisor/control/store_internal.h"

static void token_hash(const char *token, char hex[65]) {
  unsigned char digest[32];
  crypto_generichash(digest, sizeof digest, (const unsigned char *)token, strlen(token), NULL, 0);
  sodium_bin2hex(hex, 65, digest, sizeof digest);
}

static void new_token(char token[CONTROL_TOKEN_SIZE], char hash[65]) {
  unsigned char random_bytes[32];
  randombytes_buf(random_bytes, sizeof random_bytes);
  memcpy(token, CONTROL_TOKEN_PREFIX, sizeof CONTROL_TOKEN_PREFIX - 1);
  sodium_bin2base64(token + sizeof CONTROL_TOKEN_PREFIX - 1,
                    CONTROL_TOKEN_SIZE - (sizeof CONTROL_TOKEN_PREFIX - 1), random_bytes, sizeof random_bytes,
                    sodium_base64_VARIANT_URLSAFE_NO_PADDING);
  sodium_memzero(random_bytes, sizeof random_bytes);
  token_hash(token, hash);
}

static int parse_capabilities(const char *text, json_t **out, dome_error *err) {
  json_t *list = json_array();
  const char *p = text ? text : "";
  while (*p) {
    const char *comma = strchr(p, ',');
    size_t length = comma ? (size_t)(comma - p) : strlen(p);
    while (length && (*p == ' ')) p++, length--;
    while (length && p[length - 1] == ' ') length--;
    char name[CONTROL_NAME_MAX];
    if (length == 0 || length >= sizeof name) {
      json_decref(list);
      return dome_error_set(err, EINVAL, "--capabilities: empty or too long capability in `%s`", text);
    }
    memcpy(name, p, length);
    name[length] = '\0';
    if (!control_name_valid(name)) {
      json_decref(list);
      return dome_error_set(err, EINVAL, "--capabilities: invalid capability `%s`", name);
    }
    bool duplicate = false;
    size_t i;
    json_t *existing;
    json_array_foreach(list, i, existing) duplicate |= strcmp(json_string_value(existing), name) == 0;
    if (!duplicate) json_array_append_new(list, json_string(name));
    if (!comma) break;
    p = comma + 1;
    if (*p == '\0') {
      json_decref(list);
      return dome_error_set(err, EINVAL, "--capabilities: trailing comma in `%s`", text);
    }
  }
  *out = list;
  return 0;
}

/* Replace the agents map with `next` (stolen) after writing it. Under store->lock. */
static int commit_locked(control_store *store, json_t *next, dome_error *err) {
  return control_store_replace_json(store, "agents.json", &store->agents, next, err);
}

/* The agent a delegate may act for: `parent` must exist, differ from `name` and not itself be a
 * delegate (so a chain never widens what the first parent holds). Under store->lock. */
static int delegate_parent_check_locked(control_store *store, const char *flag, const char *name,
                                        const char *parent, dome_error *err) {
  if (!control_name_valid(parent))
    return dome_error_set(err, EINVAL, "%s: invalid agent name `%s`", flag, parent ? parent : "");
  if (strcmp(parent, name) == 0)
    return dome_error_set(err, EINVAL, "%s: agent `%s` cannot act as itself", flag, name);
  json_t *record = json_object_get(store->agents, parent);
  if (record == NULL) return dome_error_set(err, ENOENT, "%s: agent `%s` not found", flag, parent);
  const char *grand = json_string_value(json_object_get(record, "delegates_to"));
  if (grand)
    return dome_error_set(err, EINVAL, "%s: agent `%s` is itself a delegate (of `%s`); name `%s` instead",
                          flag, parent, grand, grand);
  return 0;
}

int control_agent_register(control_store *store, const char *name, const char *capabilities,
                           char token[CONTROL_TOKEN_SIZE], dome_error *err) {
  return control_agent_register_delegate(store, name, capabilities, NULL, 0, token, err);
}

int control_ttl_parse(const char *text, int64_t *seconds, dome_error *err) {
  char *end = NULL;
  errno = 0;
  unsigned long long number = text ? strtoull(text, &end, 10) : 0;
  if (text == NULL || end == text || errno || text[0] == '-')
    return dome_error_set(err, EINVAL, "invalid duration `%s`: expected N[s|m|h|d]", text ? text : "");
  uint64_t unit = 1;
  if (*end == 'm')
    unit = 60;
  else if (*end == 'h')
    unit = 3600;
  else if (*end == 'd')
    unit = 86400;
  else if (*end != 's' && *end != '\0')
    return dome_error_set(err, EINVAL, "invalid duration `%s`: unit must be s, m, h or d", text);
  if (*end != '\0' && end[1] != '\0')
    return dome_error_set(err, EINVAL, "invalid duration `%s`: trailing characters", text);
  if (number == 0 || number > CONTROL_TTL_MAX_S / unit)
    return dome_error_set(err, EINVAL, "invalid duration `%s`: expected 1s..3650d", text);
  *seconds = (int64_t)(number * unit);
  return 0;
}

static int expiry_check(int64_t expires, dome_error *err) {
  if (expires < 0) return dome_error_set(err, EINVAL, "--ttl: negative expiry");
  if (expires != 0 && expires <= control_store_now())
    return dome_error_set(err, EINVAL, "--ttl: expiry in the past");
  return 0;
}

int control_agent_register_delegate(control_store *store, const char *name, const char *capabilities,
                                    const char *delegates_to, int64_t expires, char token[CONTROL_TOKEN_SIZE],
                                    dome_error *err) {
  if (!control_name_valid(name))
    return dome_error_set(err, EINVAL, "--name: invalid agent name `%s`", name ? name : "");
  if (delegates_to && delegates_to[0] == '\0') delegates_to = NULL;
  int rc = expiry_check(expires, err);
  if (rc < 0) return rc;
  json_t *list = NULL;
  rc = parse_capabilities(capabilities, &list, err);
  if (rc < 0) return rc;
  char hash[65];
  new_token(token, hash);
  pthread_mutex_lock(&store->lock);
  json_t *existing = json_object_get(store->agents, name);
  if (existing && strcmp(json_string_value(json_object_get(existing, "status")), "revoked") == 0) {
    rc = dome_error_set(err, EEXIST,
                        "agent `%s` already exists and is revoked (the name stays taken); register "
                        "another name",
                        name);
  } else if (existing) {
    rc = dome_error_set(
        err, EEXIST, "agent `%s` already exists; for a new token: dome agents token --name %s", name, name);
  } else if (delegates_to) {
    rc = delegate_parent_check_locked(store, "--delegates-to", name, delegates_to, err);
  }
  if (rc < 0) {
    pthread_mutex_unlock(&store->lock);
    json_decref(list);
    sodium_memzero(token, CONTROL_TOKEN_SIZE);
    return rc;
  }
  json_t *next = json_deep_copy(store->agents);
  int64_t now = control_store_now();
  json_t *record = json_pack("{s:o,s:s,s:s,s:I,s:I}", "capabilities", list, "status", "active", "token_hash",
                             hash, "created", (json_int_t)now, "updated", (json_int_t)now);
  if (delegates_to) json_object_set_new(record, "delegates_to", json_string(delegates_to));
  if (expires) json_object_set_new(record, "token_expires", json_integer((json_int_t)expires));
  json_object_set_new(next, name, record);
  rc = commit_locked(store, next, err);
  pthread_mutex_unlock(&store->lock);
  if (rc < 0) sodium_memzero(token, CONTROL_TOKEN_SIZE);
  return rc;
}

/* Begin a new token for agent `name` (store->lock held): check the expiry (expiry_check), draw the token
 * and its hash (new_token) and find the agent into *agent (NULL when there is none). Returns 0, the
 * expiry's error (nothing drawn), -ENOENT when there is no such agent, -EINVAL when it is revoked. */
static int token_begin_locked(control_store *store, const char *name, int64_t expires,
                              char token[CONTROL_TOKEN_SIZE], char hash[65], json_t **agent,
                              dome_error *err) {
  *agent = NULL;
  int rc = expiry_check(expires, err);
  if (rc < 0) return rc;
  new_token(token, hash);
  *agent = json_object_get(store->agents, name ? name : "");
  if (*agent == NULL) return dome_error_set(err, ENOENT, "agent `%s` not found", name ? name : "");
  if (strcmp(json_string_value(json_object_get(*agent, "status")), "revoked") == 0)
    return dome_error_set(err, EINVAL, "agent `%s` is revoked", name);
  return 0;
}

int control_agent_delegated_token(control_store *store, const char *name, const char *act_as, int64_t expires,
                                  char token[CONTROL_TOKEN_SIZE], dome_error *err) {
  char hash[65];
  json_t *agent;
  pthread_mutex_lock(&store->lock);
  int rc = token_begin_locked(store, name, expires, token, hash, &agent, err);
  const char *delegates_to = json_string_value(json_object_get(agent, "delegates_to"));
  json_t *tokens = json_object_get(agent, "delegated_tokens");
  if (rc == 0) rc = delegate_parent_check_locked(store, "--act-as", name, act_as, err);
  if (rc == 0 && delegates_to && strcmp(delegates_to, act_as) != 0)
    rc = dome_error_set(err, EINVAL, "--act-as: agent `%s` is a delegate of `%s` and acts only as `%s`", name,
                        delegates_to, delegates_to);
  if (rc == 0 && json_array_size(tokens) >= CONTROL_DELEGATED_TOKENS_MAX)
    rc = dome_error_set(err, ENOSPC, "--act-as: agent `%s` already has %d delegated tokens", name,
                        CONTROL_DELEGATED_TOKENS_MAX);
  if (rc == 0) {
    json_t *next = json_deep_copy(store->agents);
    json_t *copy = json_object_get(next, name);
    json_t *kept = json_array();
    size_t i;
    json_t *entry;
    /* One delegated token per identity: a new one replaces the previous. */
    json_array_foreach(json_object_get(copy, "delegated_tokens"), i, entry) {
      const char *other = json_string_value(json_object_get(entry, "act_as"));
      if (other && strcmp(other, act_as) != 0) json_array_append(kept, entry);
    }
    int64_t now = control_store_now();
    json_t *entry_new =
        json_pack("{s:s,s:s,s:I}", "act_as", act_as, "token_hash", hash, "created", (json_int_t)now);
    if (expires) json_object_set_new(entry_new, "expires", json_integer((json_int_t)expires));
    json_array_append_new(kept, entry_new);
    json_object_set_new(copy, "delegated_tokens", kept);
    json_object_set_new(copy, "updated", json_integer(now));
    rc = commit_locked(store, next, err);
  }
  pthread_mutex_unlock(&store->lock);
  if (rc < 0) sodium_memzero(token, CONTROL_TOKEN_SIZE);
  return rc;
}

int control_agent_set_status(control_store *store, const char *name, const char *status, dome_error *err) {
  if (strcmp(status, "active") != 0 && strcmp(status, "suspended") != 0 && strcmp(status, "revoked") != 0)
    return dome_error_set(err, EINVAL, "invalid agent status `%s`", status);
  pthread_mutex_lock(&store->lock);
  json_t *agent = json_object_get(store->agents, name ? name : "");
  int rc = 0;
  if (agent == NULL) {
    rc = dome_error_set(err, ENOENT, "agent `%s` not found", name ? name : "");
  } else if (strcmp(json_string_value(json_object_get(agent, "status")), "revoked") == 0 &&
             strcmp(status, "revoked") != 0) {
    rc = dome_error_set(err, EINVAL, "agent `%s` is revoked; register a new agent", name);
  } else {
    json_t *next = json_deep_copy(store->agents);
    json_t *copy = json_object_get(next, name);
    json_object_set_new(copy, "status", json_string(status));
    json_object_set_new(copy, "updated", json_integer(control_store_now()));
    rc = commit_locked(store, next, err);
  }
  pthread_mutex_unlock(&store->lock);
  return rc;
}

int control_agent_rotate_token(control_store *store, const char *name, int64_t expires,
                               char token[CONTROL_TOKEN_SIZE], dome_error *err) {
  char hash[65];
  json_t *agent;
  pthread_mutex_lock(&store->lock);
  int rc = token_begin_locked(store, name, expires, token, hash, &agent, err);
  if (rc == 0) {
    json_t *next = json_deep_copy(store->agents);
    json_t *copy = json_object_get(next, name);
    json_object_set_new(copy, "token_hash", json_string(hash));
    if (expires)
      json_object_set_new(copy, "token_expires", json_integer((json_int_t)expires));
    else
      json_object_del(copy, "token_expires");
    json_object_del(copy, "delegated_tokens"); /* rotation retires every token of the agent */
    json_object_set_new(copy, "updated", json_integer(control_store_now()));
    rc = commit_locked(store, next, err);
  }
  pthread_mutex_unlock(&store->lock);
  if (rc < 0) sodium_memzero(token, CONTROL_TOKEN_SIZE);
  return rc;
}

static json_t *public_record(const char *name, json_t *agent) {
  json_t *record = json_deep_copy(agent);
  json_object_del(record, "token_hash");
  json_object_del(record, "act_as");
  json_t *tokens = json_object_get(record, "delegated_tokens");
  if (tokens) {
    json_t *shown = json_array(); /* which identities have a delegated token, never the hashes */
    size_t i;
    json_t *entry;
    json_array_foreach(tokens, i, entry) {
      json_t *item = json_pack("{s:O,s:O}", "act_as", json_object_get(entry, "act_as"), "created",
                               json_object_get(entry, "created"));
      json_t *expires = json_object_get(entry, "expires");
      if (expires) json_object_set(item, "expires", expires);
      json_array_append_new(shown, item);
    }
    json_object_set_new(record, "delegated_tokens", shown);
  }
  json_object_set_new(record, "name", json_string(name));
  return record;
}

json_t *control_agent_get(control_store *store, const char *name) {
  pthread_mutex_lock(&store->lock);
  json_t *agent = json_object_get(store->agents, name ? name : "");
  json_t *record = agent ? public_record(name, agent) : NULL;
  pthread_mutex_unlock(&store->lock);
  return record;
}

int control_agent_set_member(control_store *store, const char *name, const char *member, json_t *value,
                             dome_error *err) {
  static const char *const reserved[] = {
      "name",    "capabilities",  "status",       "token_hash",       "created",
      "updated", "token_expires", "delegates_to", "delegated_tokens", "act_as"};
  for (size_t i = 0; i < sizeof reserved / sizeof reserved[0]; i++)
    if (member == NULL || strcmp(member, reserved[i]) == 0)
      return dome_error_set(err, EINVAL, "agent member `%s` cannot be set", member ? member : "");
  pthread_mutex_lock(&store->lock);
  int rc;
  if (json_object_get(store->agents, name ? name : "") == NULL) {
    rc = dome_error_set(err, ENOENT, "agent `%s` not found", name ? name : "");
  } else {
    json_t *next = json_deep_copy(store->agents);
    json_t *copy = json_object_get(next, name);
    if (value)
      json_object_set(copy, member, value);
    else
      json_object_del(copy, member);
    json_object_set_new(copy, "updated", json_integer(control_store_now()));
    rc = commit_locked(store, next, err);
  }
  pthread_mutex_unlock(&store->lock);
  return rc;
}

json_t *control_agent_list(control_store *store) {
  json_t *list = json_array();
  pthread_mutex_lock(&store->lock);
  const char *name;
  json_t *agent;
  json_object_foreach(store->agents, name, agent) {
    json_t *item =
        json_pack("{s:s,s:O,s:O,s:O,s:O}", "name", name, "capabilities",
                  json_object_get(agent, "capabilities"), "status", json_object_get(agent, "status"),
                  "created", json_object_get(agent, "created"), "updated", json_object_get(agent, "updated"));
    json_t *delegates_to = json_object_get(agent, "delegates_to");
    if (json_is_string(delegates_to)) json_object_set(item, "delegates_to", delegates_to);
    json_array_append_new(list, item);
  }
  pthread_mutex_unlock(&store->lock);
  return list;
}

const char *control_token_refusal_name(enum control_token_refusal refusal) {
  switch (refusal) {
    case CONTROL_TOKEN_MISSING:
      return "missing";
    case CONTROL_TOKEN_INVALID:
      return "invalid";
    case CONTROL_TOKEN_EXPIRED:
      return "expired";
    case CONTROL_TOKEN_SUSPENDED:
      return "suspended";
    case CONTROL_TOKEN_REVOKED:
      return "revoked";
    case CONTROL_TOKEN_ACCEPTED:
      break;
  }
  return "accepted";
}

json_t *control_agent_authenticate(control_store *store, const char *token, dome_error *err) {
  struct control_token_check check;
  return control_agent_authenticate_at(store, token, control_store_now(), &check, err);
}

json_t *control_agent_authenticate_at(control_store *store, const char *token, int64_t now,
                                      struct control_token_check *check, dome_error *err) {
  *check = (struct control_token_check){.refusal = CONTROL_TOKEN_ACCEPTED};
  enum control_token_refusal *refusal = &check->refusal;
  if (token == NULL || strncmp(token, CONTROL_TOKEN_PREFIX, sizeof CONTROL_TOKEN_PREFIX - 1) != 0 ||
      strlen(token) >= CONTROL_TOKEN_SIZE) {
    *refusal = token ? CONTROL_TOKEN_INVALID : CONTROL_TOKEN_MISSING;
    dome_error_set(err, EACCES, token ? "invalid token" : "missing bearer token");
    return NULL;
  }
  char hash[65];
  token_hash(token, hash);
  json_t *found = NULL;
  const char *found_name = NULL, *found_act_as = NULL;
  int64_t found_expires = 0;
  pthread_mutex_lock(&store->lock);
  const char *name;
  json_t *agent;
  json_object_foreach(store->agents, name, agent) {
    const char *stored = json_string_value(json_object_get(agent, "token_hash"));
    if (stored && strlen(stored) == 64 && sodium_memcmp(stored, hash, 64) == 0) {
      found = agent;
      found_name = name;
      found_act_as = NULL;
      found_expires = json_integer_value(json_object_get(agent, "token_expires"));
    }
    size_t i;
    json_t *entry;
    json_array_foreach(json_object_get(agent, "delegated_tokens"), i, entry) {
      stored = json_string_value(json_object_get(entry, "token_hash"));
      if (stored && strlen(stored) == 64 && sodium_memcmp(stored, hash, 64) == 0) {
        found = agent;
        found_name = name;
        found_act_as = json_string_value(json_object_get(entry, "act_as"));
        found_expires = json_integer_value(json_object_get(entry, "expires"));
      }
    }
  }
  json_t *result = NULL;
  if (found_name) snprintf(check->agent, sizeof check->agent, "%s", found_name);
  if (found == NULL) {
    *refusal = CONTROL_TOKEN_INVALID;
    dome_error_set(err, EACCES, "invalid token");
  } else {
    const char *status = json_string_value(json_object_get(found, "status"));
    if (strcmp(status, "active") != 0) {
      *refusal = strcmp(status, "revoked") == 0 ? CONTROL_TOKEN_REVOKED : CONTROL_TOKEN_SUSPENDED;
      dome_error_set(err, EACCES, "agent `%s` is %s", found_name, status);
    } else if (found_expires > 0 && now >= found_expires) {
      /* the agent stays identified in the journal (err names it), the caller is refused */
      *refusal = CONTROL_TOKEN_EXPIRED;
      dome_error_set(err, EKEYEXPIRED, "token of agent `%s` expired", found_name);
    } else {
      result = public_record(found_name, found);
    }
    if (result && found_act_as) json_object_set_new(result, "act_as", json_string(found_act_as));
  }
  pthread_mutex_unlock(&store->lock);
  return result;
}
