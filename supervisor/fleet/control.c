/* The control plane of fleet mode: the store's replicated documents in key-value buckets, one key per
 * entry, written with compare-and-set revisions and applied from one watch per bucket. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "supervisor/fleet/fleet_internal.h"

static const char *const documents[FLEET_DOCUMENTS] = {"agents", "quotas", "tools", "gateways", "rules"};

static struct fleet_bucket *bucket_of(fleet *f, const char *document) {
  for (int i = 0; i < FLEET_DOCUMENTS; i++)
    if (strcmp(documents[i], document) == 0) return &f->buckets[i];
  return NULL;
}

/* The bucket's kvStore for this connection, opened (created) on first use. Lock not held. */
static kvStore *bucket_store(fleet *f, struct fleet_bucket *bucket, dome_error *err) {
  pthread_mutex_lock(&f->lock);
  kvStore *kv = bucket->kv;
  pthread_mutex_unlock(&f->lock);
  if (kv) return kv;
  if (fleet_bucket_open(f, bucket->name, &kv, err) < 0) return NULL;
  pthread_mutex_lock(&f->lock);
  if (bucket->kv == NULL) {
    bucket->kv = kv;
  } else {
    kvStore_Destroy(kv);
    kv = bucket->kv;
  }
  pthread_mutex_unlock(&f->lock);
  return kv;
}

static void apply_entry(fleet *f, struct fleet_bucket *bucket, kvEntry *entry) {
  const char *key = kvEntry_Key(entry);
  uint64_t revision = kvEntry_Revision(entry);
  json_t *value = NULL;
  bool removal = kvEntry_Operation(entry) != kvOp_Put;
  if (!removal) {
    json_error_t jerr;
    value = json_loadb(kvEntry_Value(entry), (size_t)kvEntry_ValueLen(entry), 0, &jerr);
    if (value == NULL) {
      fprintf(stderr, "fleet: %s/%s revision %" PRIu64 ": not JSON (%s): ignored\n", bucket->name, key,
              revision, jerr.text);
      return;
    }
  }
  dome_error err = {0};
  int rc = control_store_apply_entry(f->store, bucket->document, key, value, &err);
  json_decref(value);
  if (rc < 0) {
    fprintf(stderr, "fleet: %s/%s revision %" PRIu64 ": %s\n", bucket->name, key, revision, err.message);
    return;
  }
  pthread_mutex_lock(&f->lock);
  if (removal)
    json_object_del(bucket->revisions, key);
  else
    json_object_set_new(bucket->revisions, key, json_integer((json_int_t)revision));
  pthread_mutex_unlock(&f->lock);
  if (f->applied) f->applied(f->applied_context, bucket->document, key, rc == 1, revision);
}

/* One bucket's watch: at every connection epoch a new watch of all keys, whose replay of the latest
 * value of every key ends with a NULL entry; then its updates as they come. */
/* Whether a watch's replay, which delivered revisions up to `replayed`, missed the bucket stream's last
 * message as its leader reports it (a server that just restarted may answer from a copy that is not
 * current yet): a replay is only complete when it holds the latest write. */
static bool replay_behind(fleet *f, struct fleet_bucket *bucket, uint64_t replayed, uint64_t *last) {
  char stream[sizeof bucket->name + 8];
  snprintf(stream, sizeof stream, "KV_%s", bucket->name);
  jsStreamInfo *info = NULL;
  jsErrCode code = 0;
  if (js_GetStreamInfo(&info, f->js, stream, NULL, &code) != NATS_OK) return true; /* unknown: watch again */
  *last = info->State.LastSeq;
  jsStreamInfo_Destroy(info);
  return *last > replayed;
}

static void *watch_main(void *argument) {
  struct fleet_bucket *bucket = argument;
  fleet *f = bucket->owner;
  while (!atomic_load(&f->stopping)) {
    uint64_t epoch = fleet_wait_prepared(f);
    if (epoch == 0) break;
    dome_error err = {0};
    kvStore *kv = bucket_store(f, bucket, &err);
    kvWatcher *watcher = NULL;
    natsStatus s = kv ? kvStore_WatchAll(&watcher, kv, NULL) : NATS_ERR;
    if (s != NATS_OK) {
      if (kv) fleet_nats_error(&err, s, 0, bucket->name);
      fprintf(stderr, "fleet: watch of %s: %s\n", bucket->name, err.message);
      fleet_sleep_ms(500);
      continue;
    }
    uint64_t replayed = 0; /* highest revision this watch delivered */
    for (;;) {
      pthread_mutex_lock(&f->lock);
      bool current = f->epoch == epoch && atomic_load(&f->connected);
      pthread_mutex_unlock(&f->lock);
      if (atomic_load(&f->stopping) || !current) break; /* a new connection replays from the start */
      kvEntry *entry = NULL;
      s = kvWatcher_Next(&entry, watcher, 100);
      if (s == NATS_TIMEOUT) continue;
      if (s != NATS_OK) {
        fleet_nats_error(&err, s, 0, bucket->name);
        fprintf(stderr, "fleet: watch of %s: %s\n", bucket->name, err.message);
        break;
      }
      if (entry == NULL) { /* the replay is complete if it reached the stream's last message */
        uint64_t last = 0;
        if (replay_behind(f, bucket, replayed, &last)) {
          fprintf(stderr,
                  "fleet: replay of %s ended at revision %" PRIu64 " before the stream's %" PRIu64
                  ": watching again\n",
                  bucket->name, replayed, last);
          fleet_sleep_ms(200);
          break;
        }
        pthread_mutex_lock(&f->lock);
        bucket->synced_epoch = epoch;
        fleet_update_sync(f);
        pthread_cond_broadcast(&f->changed);
        pthread_mutex_unlock(&f->lock);
        continue;
      }
      if (kvEntry_Revision(entry) > replayed) replayed = kvEntry_Revision(entry);
      apply_entry(f, bucket, entry);
      kvEntry_Destroy(entry);
    }
    kvWatcher_Destroy(watcher);
  }
  return NULL;
}

int fleet_control_start(fleet *f, control_store *store, fleet_applied applied, void *context,
                        dome_error *err) {
  if (f->controlling) return dome_error_set(err, EALREADY, "control plane already replicated");
  f->store = store;
  f->applied = applied;
  f->applied_context = context;
  char fleet_name[sizeof f->fleet_name]; /* a copy: the bucket names are written inside *f */
  memcpy(fleet_name, f->fleet_name, sizeof fleet_name);
  for (int i = 0; i < FLEET_DOCUMENTS; i++) {
    struct fleet_bucket *bucket = &f->buckets[i];
    bucket->owner = f;
    bucket->document = documents[i];
    snprintf(bucket->name, sizeof bucket->name, "DOME_%s_%s", fleet_name, documents[i]);
    bucket->revisions = json_object();
  }
  f->controlling = true;
  control_store_set_replicate_hook(store, fleet_control_replicate, f);
  for (int i = 0; i < FLEET_DOCUMENTS; i++) {
    if (pthread_create(&f->buckets[i].thread, NULL, watch_main, &f->buckets[i]) != 0)
      return dome_error_set(err, EAGAIN, "watch thread of %s", f->buckets[i].name);
    f->buckets[i].started = true;
  }
  return 0;
}

/* Write one key with the revision this node last saw (create when none): -EBUSY when another node
 * changed it since. */
static int write_key(fleet *f, struct fleet_bucket *bucket, kvStore *kv, const char *key, const json_t *value,
                     dome_error *err) {
  pthread_mutex_lock(&f->lock);
  uint64_t seen = (uint64_t)json_integer_value(json_object_get(bucket->revisions, key));
  pthread_mutex_unlock(&f->lock);
  char *text = value ? json_dumps(value, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
  if (value && text == NULL) return dome_error_set(err, ENOMEM, "%s/%s", bucket->name, key);
  natsStatus s;
  uint64_t revision = 0;
  /* a leader election of the bucket's stream (a NATS server lost) answers with no responder or not at
   * all for a few seconds: the same write is tried again for up to 5 s */
  for (int attempt = 0;; attempt++) {
    if (value == NULL)
      s = kvStore_Delete(kv, key);
    else if (seen)
      s = kvStore_Update(&revision, kv, key, text, (int)strlen(text), seen);
    else
      s = kvStore_Create(&revision, kv, key, text, (int)strlen(text));
    if ((s != NATS_NO_RESPONDERS && s != NATS_TIMEOUT) || attempt == 16 || atomic_load(&f->stopping)) break;
    fleet_sleep_ms(300);
  }
  free(text);
  if (s != NATS_OK) {
    const char *last = nats_GetLastError(NULL);
    if (last && (strstr(last, "wrong last sequence") || strstr(last, "key exists")))
      return dome_error_set(err, EBUSY,
                            "%s/%s was changed by another node meanwhile: nothing changed here; run the "
                            "command again",
                            bucket->name, key);
    return fleet_nats_error(err, s, 0, bucket->name);
  }
  pthread_mutex_lock(&f->lock);
  if (value)
    json_object_set_new(bucket->revisions, key, json_integer((json_int_t)revision));
  else
    json_object_del(bucket->revisions, key);
  pthread_mutex_unlock(&f->lock);
  return 0;
}

/* New rule versions' texts (rules/<N>.cedar, written before the index) under keys N. */
static int write_rule_texts(fleet *f, struct fleet_bucket *bucket, kvStore *kv, const json_t *current,
                            const json_t *next, dome_error *err) {
  size_t known = json_array_size(json_object_get(current, "versions"));
  json_t *versions = json_object_get(next, "versions");
  for (size_t i = known; i < json_array_size(versions); i++) {
    int version = (int)json_integer_value(json_object_get(json_array_get(versions, i), "version"));
    char *text = control_rules_text(f->store, version, err);
    if (text == NULL) return -EIO;
    char key[16];
    snprintf(key, sizeof key, "%d", version);
    json_t *value = json_pack("{s:s}", "text", text);
    free(text);
    int rc = value ? write_key(f, bucket, kv, key, value, err) : dome_error_set(err, ENOMEM, "rules");
    json_decref(value);
    if (rc < 0) return rc;
  }
  return 0;
}

int fleet_control_replicate(void *context, const char *document, const json_t *current, const json_t *next,
                            dome_error *err) {
  fleet *f = context;
  struct fleet_bucket *bucket = bucket_of(f, document);
  if (bucket == NULL) return 0;
  if (!atomic_load(&f->connected))
    return dome_error_set(
        err, ESTALE, "this node is cut off from the fleet: control changes are refused until it is back");
  kvStore *kv = bucket_store(f, bucket, err);
  if (kv == NULL) return -EIO;
  if (strcmp(document, "rules") == 0) {
    int rc = write_rule_texts(f, bucket, kv, current, next, err);
    return rc < 0 ? rc : write_key(f, bucket, kv, "index", next, err);
  }
  const char *key;
  json_t *value;
  json_object_foreach((json_t *)next, key, value) {
    json_t *held = json_object_get(current, key);
    if (held && json_equal(held, value)) continue;
    int rc = write_key(f, bucket, kv, key, value, err);
    if (rc < 0) return rc;
  }
  json_object_foreach((json_t *)current, key, value) {
    if (json_object_get(next, key)) continue;
    int rc = write_key(f, bucket, kv, key, NULL, err);
    if (rc < 0) return rc;
  }
  return 0;
}
