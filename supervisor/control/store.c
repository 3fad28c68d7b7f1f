/* The state directory: loading and atomic replacement of its JSON files. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "supervisor/common/cleanup.h"
#include "supervisor/control/store_internal.h"

int64_t control_store_now(void) {
  return (int64_t)time(NULL);
}

bool control_name_valid(const char *name) {
  if (name == NULL || name[0] == '\0' || name[0] == '.' || name[0] == '-') return false;
  size_t length = strlen(name);
  if (length >= CONTROL_NAME_MAX) return false;
  for (size_t i = 0; i < length; i++) {
    char c = name[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
          c == '_' || c == '-'))
      return false;
  }
  return true;
}

static int mkdir_p(const char *path, mode_t mode, dome_error *err) {
  char buffer[4096];
  if (snprintf(buffer, sizeof buffer, "%s", path) >= (int)sizeof buffer)
    return dome_error_set(err, ENAMETOOLONG, "path `%s` too long", path);
  for (char *p = buffer + 1; *p; p++) {
    if (*p != '/') continue;
    *p = '\0';
    if (mkdir(buffer, 0755) < 0 && errno != EEXIST)
      return dome_error_set_errno(err, errno, "create `%s`", buffer);
    *p = '/';
  }
  if (mkdir(buffer, mode) < 0 && errno != EEXIST)
    return dome_error_set_errno(err, errno, "create `%s`", buffer);
  return 0;
}

int control_store_write_text(const control_store *store, const char *relative, const char *text,
                             size_t length, dome_error *err) {
  char path[4096], temporary[4200];
  snprintf(path, sizeof path, "%s/%s", store->dir, relative);
  snprintf(temporary, sizeof temporary, "%s.tmp.%d", path, (int)getpid());
  _cleanup_close_ int fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return dome_error_set_errno(err, errno, "write `%s`", temporary);
  size_t done = 0;
  while (done < length) {
    ssize_t n = write(fd, text + done, length - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int saved = errno;
      unlink(temporary);
      return dome_error_set_errno(err, saved, "write `%s`", temporary);
    }
    done += (size_t)n;
  }
  if (fsync(fd) < 0) {
    int saved = errno;
    unlink(temporary);
    return dome_error_set_errno(err, saved, "fsync `%s`", temporary);
  }
  if (rename(temporary, path) < 0) {
    int saved = errno;
    unlink(temporary);
    return dome_error_set_errno(err, saved, "rename `%s`", temporary);
  }
  char directory[4096];
  snprintf(directory, sizeof directory, "%s", path);
  char *slash = strrchr(directory, '/');
  if (slash) *slash = '\0';
  _cleanup_close_ int dir_fd = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd >= 0) fsync(dir_fd);
  return 0;
}

void control_store_set_commit_hook(control_store *store, control_store_commit_hook hook, void *context) {
  store->commit_hook = hook;
  store->commit_context = context;
}

int control_store_write_json(const control_store *store, const char *relative, json_t *value,
                             dome_error *err) {
  if (store->commit_hook) {
    int rc = store->commit_hook(store->commit_context, err);
    if (rc < 0) return rc;
  }
  _cleanup_free_ char *text = json_dumps(value, JSON_INDENT(2) | JSON_SORT_KEYS);
  if (text == NULL) return dome_error_set(err, ENOMEM, "encode `%s`", relative);
  size_t length = strlen(text);
  text[length] = '\0';
  _cleanup_free_ char *with_newline = malloc(length + 2);
  if (with_newline == NULL) return dome_error_set(err, ENOMEM, "encode `%s`", relative);
  memcpy(with_newline, text, length);
  with_newline[length] = '\n';
  return control_store_write_text(store, relative, with_newline, length + 1, err);
}

void control_store_set_replicate_hook(control_store *store, control_store_replicate_hook hook,
                                      void *context) {
  store->replicate_hook = hook;
  store->replicate_context = context;
}

/* The replicated document stored in `relative`, NULL for the others (secrets never leave the node). */
static const char *document_of(const char *relative) {
  static const char *const names[][2] = {{"agents.json", "agents"},
                                         {"quotas.json", "quotas"},
                                         {"tools.json", "tools"},
                                         {"gateways.json", "gateways"},
                                         {"rules/index.json", "rules"}};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (strcmp(relative, names[i][0]) == 0) return names[i][1];
  return NULL;
}

int control_store_replace_json(const control_store *store, const char *relative, json_t **current,
                               json_t *next, dome_error *err) {
  const char *document = document_of(relative);
  if (store->replicate_hook && document) {
    int rc = store->replicate_hook(store->replicate_context, document, *current, next, err);
    if (rc < 0) {
      json_decref(next);
      return rc;
    }
  }
  int rc = control_store_write_json(store, relative, next, err);
  if (rc < 0) {
    json_decref(next);
    return rc;
  }
  json_decref(*current);
  *current = next;
  return 0;
}

int control_store_load_json(const control_store *store, const char *relative, json_t *fallback,
                            json_t **value, dome_error *err) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", store->dir, relative);
  if (access(path, F_OK) < 0 && errno == ENOENT) {
    *value = fallback;
    return 0;
  }
  json_error_t error;
  json_t *loaded = json_load_file(path, JSON_REJECT_DUPLICATES, &error);
  if (loaded == NULL) {
    json_decref(fallback);
    return dome_error_set(err, EINVAL, "%s:%d:%d: %s", path, error.line, error.column, error.text);
  }
  if (!json_is_object(loaded)) {
    json_decref(loaded);
    json_decref(fallback);
    return dome_error_set(err, EINVAL, "%s: expected a JSON object", path);
  }
  json_decref(fallback);
  *value = loaded;
  return 0;
}

int control_store_open(const char *state_dir, control_store **out, dome_error *err) {
  int rc = mkdir_p(state_dir, 0700, err);
  if (rc < 0) return dome_error_wrap(err, "state directory");
  control_store *store = calloc(1, sizeof *store);
  if (store == NULL) return dome_error_set(err, ENOMEM, "allocate store");
  store->dir = strdup(state_dir);
  pthread_mutex_init(&store->lock, NULL);
  char sub[4200];
  snprintf(sub, sizeof sub, "%s/rules", state_dir);
  if ((rc = mkdir_p(sub, 0700, err)) < 0) goto fail;
  snprintf(sub, sizeof sub, "%s/secrets", state_dir);
  if ((rc = mkdir_p(sub, 0700, err)) < 0) goto fail;
  if ((rc = control_store_load_json(store, "agents.json", json_object(), &store->agents, err)) < 0) goto fail;
  if ((rc = control_store_load_json(store, "quotas.json", json_object(), &store->quotas, err)) < 0) goto fail;
  if ((rc = control_store_load_json(store, "tools.json", json_object(), &store->tools, err)) < 0) goto fail;
  if ((rc = control_store_load_json(store, "gateways.json", json_object(), &store->gateways, err)) < 0)
    goto fail;
  if ((rc = control_store_load_json(store, "operators.json", json_object(), &store->operators, err)) < 0)
    goto fail;
  if ((rc = control_store_load_json(store, "rules/index.json",
                                    json_pack("{s:i,s:[]}", "active", 0, "versions"), &store->rules, err)) <
      0)
    goto fail;
  if (!json_is_array(json_object_get(store->rules, "versions")) ||
      !json_is_integer(json_object_get(store->rules, "active"))) {
    rc = dome_error_set(err, EINVAL, "%s/rules/index.json: expected {active, versions}", state_dir);
    goto fail;
  }
  *out = store;
  return 0;
fail:
  control_store_close(store);
  return rc;
}

void control_store_close(control_store *store) {
  if (store == NULL) return;
  json_decref(store->agents);
  json_decref(store->quotas);
  json_decref(store->tools);
  json_decref(store->gateways);
  json_decref(store->operators);
  json_decref(store->rules);
  pthread_mutex_destroy(&store->lock);
  free(store->dir);
  free(store);
}

const char *control_store_dir(const control_store *store) {
  return store->dir;
}

/* The document's file and its slot in the store. */
static int document_slot(control_store *store, const char *document, const char **relative, json_t ***slot) {
  static const char *const files[] = {"agents.json", "quotas.json", "tools.json", "gateways.json",
                                      "rules/index.json"};
  json_t **slots[] = {&store->agents, &store->quotas, &store->tools, &store->gateways, &store->rules};
  for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
    if (strcmp(document_of(files[i]), document) == 0) {
      *relative = files[i];
      *slot = slots[i];
      return 0;
    }
  }
  return -EINVAL;
}

json_t *control_store_document(control_store *store, const char *document) {
  const char *relative;
  json_t **slot;
  if (document == NULL || document_slot(store, document, &relative, &slot) < 0) return NULL;
  pthread_mutex_lock(&store->lock);
  json_t *copy = json_deep_copy(*slot);
  pthread_mutex_unlock(&store->lock);
  return copy;
}

/* Write a document received from the fleet: as control_store_write_json without the hooks. */
static int write_document(const control_store *store, const char *relative, json_t *value, dome_error *err) {
  _cleanup_free_ char *text = json_dumps(value, JSON_INDENT(2) | JSON_SORT_KEYS);
  if (text == NULL) return dome_error_set(err, ENOMEM, "encode `%s`", relative);
  size_t length = strlen(text);
  _cleanup_free_ char *with_newline = malloc(length + 2);
  if (with_newline == NULL) return dome_error_set(err, ENOMEM, "encode `%s`", relative);
  memcpy(with_newline, text, length);
  with_newline[length] = '\n';
  return control_store_write_text(store, relative, with_newline, length + 1, err);
}

static bool digits_only(const char *key) {
  if (key[0] == '\0' || key[0] == '0' || strlen(key) > 9) return false;
  for (const char *c = key; *c; c++)
    if (*c < '0' || *c > '9') return false;
  return true;
}

static int apply_rules_text(control_store *store, const char *key, const json_t *value, dome_error *err) {
  const char *text = json_string_value(json_object_get(value, "text"));
  if (text == NULL) return dome_error_set(err, EINVAL, "rules/%s: expected {\"text\": \"...\"}", key);
  char relative[64];
  snprintf(relative, sizeof relative, "rules/%s.cedar", key);
  char *existing = control_rules_text(store, atoi(key), &(dome_error){0});
  bool same = existing && strcmp(existing, text) == 0;
  free(existing);
  if (same) return 0;
  int rc = control_store_write_text(store, relative, text, strlen(text), err);
  return rc < 0 ? rc : 1;
}

int control_store_apply_entry(control_store *store, const char *document, const char *key,
                              const json_t *value, dome_error *err) {
  const char *relative;
  json_t **slot;
  if (document == NULL || document_slot(store, document, &relative, &slot) < 0)
    return dome_error_set(err, EINVAL, "unknown replicated document `%s`", document ? document : "");
  bool rules = strcmp(document, "rules") == 0;
  if (rules && digits_only(key)) return apply_rules_text(store, key, value, err);
  if (rules ? strcmp(key, "index") != 0 : !control_name_valid(key))
    return dome_error_set(err, EINVAL, "%s: invalid key `%s`", document, key);
  if (value && !json_is_object(value))
    return dome_error_set(err, EINVAL, "%s/%s: expected a JSON object", document, key);
  if (rules && (value == NULL || !json_is_array(json_object_get(value, "versions")) ||
                !json_is_integer(json_object_get(value, "active"))))
    return dome_error_set(err, EINVAL, "rules/index: expected {active, versions}");
  pthread_mutex_lock(&store->lock);
  json_t *next;
  if (rules) {
    next = json_equal(*slot, value) ? NULL : json_deep_copy(value);
  } else {
    json_t *held = json_object_get(*slot, key);
    bool same = value ? held && json_equal(held, value) : held == NULL;
    next = same ? NULL : json_deep_copy(*slot);
    if (next && value) json_object_set_new(next, key, json_deep_copy(value));
    if (next && !value) json_object_del(next, key);
  }
  int rc = 0;
  if (next) {
    rc = write_document(store, relative, next, err);
    if (rc == 0) {
      json_decref(*slot);
      *slot = next;
      rc = 1;
    } else {
      json_decref(next);
    }
  }
  pthread_mutex_unlock(&store->lock);
  return rc;
}
