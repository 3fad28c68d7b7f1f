/* Private: the state store's structure, shared by its files. */
#ifndef DOME_CONTROL_STORE_INTERNAL_H
#define DOME_CONTROL_STORE_INTERNAL_H

#include <pthread.h>

#include "supervisor/control/control.h"

struct control_store {
  char *dir;
  pthread_mutex_t lock;
  json_t *agents;    /* name -> {capabilities, status, token_hash, created, updated} */
  json_t *quotas;    /* capability -> quota object */
  json_t *tools;     /* name -> tool object */
  json_t *gateways;  /* name -> {created}; "Default" is implicit */
  json_t *operators; /* name -> {role, status, token_hash, created, updated} (console users) */
  json_t *rules;     /* {"active": N, "versions": [ {version, name, sha256, created, bytes} ]} */
  control_store_commit_hook commit_hook; /* passed by every control_store_write_json, or NULL */
  void *commit_context;
  control_store_replicate_hook replicate_hook; /* passed by every control_store_replace_json, or NULL */
  void *replicate_context;
};

/* Write `value` to dir/relative atomically (tmp + fsync + rename + fsync dir), mode 0600, once the commit
 * hook (if any) let it: its refusal is returned with nothing written. */
int control_store_write_json(const control_store *store, const char *relative, json_t *value,
                             dome_error *err);
/* Commit a new version of one of the store's documents (store->lock held): write `next` to dir/relative
 * (control_store_write_json) and, when that succeeds, make it *current (the previous one released).
 * Takes `next` either way. Returns 0, or control_store_write_json's error with *current unchanged. */
int control_store_replace_json(const control_store *store, const char *relative, json_t **current,
                               json_t *next, dome_error *err);
int control_store_write_text(const control_store *store, const char *relative, const char *text,
                             size_t length, dome_error *err);
/* Load dir/relative: a new reference, or `fallback` (stolen) when the file does not exist. */
int control_store_load_json(const control_store *store, const char *relative, json_t *fallback,
                            json_t **value, dome_error *err);
int64_t control_store_now(void);

#endif
