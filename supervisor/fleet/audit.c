/* The audit side of fleet mode: the stream DOME_<fleet>_AUDIT, the nodes bucket holding each node's
 * journal key, the publisher following the journal, and the readers of `dome audit ... --fleet`. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "supervisor/audit/journal.h"
#include "supervisor/fleet/fleet_internal.h"

/* The stream's duplicate window: a node that republishes what the stream already holds after a
 * reconnection does so within it (the publisher starts after the last id it finds in the stream). */
#define DUPLICATE_WINDOW_NS (INT64_C(120) * 1000000000)

static int ensure_stream(fleet *f, dome_error *err) {
  jsStreamInfo *info = NULL;
  jsErrCode code = 0;
  natsStatus s = js_GetStreamInfo(&info, f->js, f->stream, NULL, &code);
  if (s == NATS_OK) {
    jsStreamInfo_Destroy(info);
    return 0;
  }
  char subjects[FLEET_NAME_MAX + 16];
  snprintf(subjects, sizeof subjects, "%s.>", FLEET_SUBJECT_PREFIX);
  const char *list[] = {subjects};
  jsStreamConfig config;
  jsStreamConfig_Init(&config);
  config.Name = f->stream;
  config.Subjects = list;
  config.SubjectsLen = 1;
  config.Storage = js_FileStorage;
  config.Duplicates = DUPLICATE_WINDOW_NS;
  config.DenyDelete = true;
  config.DenyPurge = true;
  config.AllowDirect = true;
  for (int replicas = f->replicas; replicas >= 1; replicas -= 2) {
    config.Replicas = replicas;
    code = 0;
    s = js_AddStream(&info, f->js, &config, NULL, &code);
    if (s == NATS_OK || code == JSStreamNameExistErr) {
      jsStreamInfo_Destroy(info);
      return 0;
    }
    if (code != JSInsufficientResourcesErr && code != JSClusterNoPeersErr) break;
  }
  return fleet_nats_error(err, s, code, f->stream);
}

int fleet_bucket_open(fleet *f, const char *name, kvStore **kv, dome_error *err) {
  natsStatus s = js_KeyValue(kv, f->js, name);
  if (s == NATS_OK) return 0;
  kvConfig config;
  kvConfig_Init(&config);
  config.Bucket = name;
  config.History = 64;
  config.StorageType = js_FileStorage;
  for (int replicas = f->replicas; replicas >= 1; replicas -= 2) {
    config.Replicas = replicas;
    s = js_CreateKeyValue(kv, f->js, &config);
    if (s == NATS_OK) return 0;
    if (js_KeyValue(kv, f->js, name) == NATS_OK) return 0;
  }
  return fleet_nats_error(err, s, 0, name);
}

static int register_node(fleet *f, dome_error *err) {
  char bucket[FLEET_NAME_MAX + 16];
  snprintf(bucket, sizeof bucket, "DOME_%s_nodes", f->fleet_name);
  kvStore *kv = NULL;
  int rc = fleet_bucket_open(f, bucket, &kv, err);
  if (rc < 0) return rc;
  char value[160];
  snprintf(value, sizeof value, "{\"public_key\":\"%s\"}", f->public_key);
  uint64_t revision = 0;
  natsStatus s = kvStore_CreateString(&revision, kv, f->node, value);
  if (s != NATS_OK) {
    kvEntry *entry = NULL;
    if (kvStore_Get(&entry, kv, f->node) == NATS_OK) {
      bool same = strcmp(kvEntry_ValueString(entry), value) == 0;
      kvEntry_Destroy(entry);
      rc = same ? 0
                : dome_error_set(err, EEXIST,
                                 "node `%s` is registered in %s with another journal key: a node name "
                                 "belongs to one journal (remove the key to re-register)",
                                 f->node, bucket);
    } else {
      rc = fleet_nats_error(err, s, 0, bucket);
    }
  }
  kvStore_Destroy(kv);
  return rc;
}

int fleet_prepare(fleet *f, dome_error *err) {
  int rc = ensure_stream(f, err);
  if (rc == 0 && f->node[0] && f->public_key[0]) rc = register_node(f, err);
  return rc;
}

char *fleet_node_key(fleet *f, const char *node, dome_error *err) {
  char bucket[FLEET_NAME_MAX + 16];
  snprintf(bucket, sizeof bucket, "DOME_%s_nodes", f->fleet_name);
  kvStore *kv = NULL;
  if (js_KeyValue(&kv, f->js, bucket) != NATS_OK) {
    dome_error_set(err, ENOENT, "no bucket %s: no node registered", bucket);
    return NULL;
  }
  kvEntry *entry = NULL;
  char *key = NULL;
  if (kvStore_Get(&entry, kv, node) == NATS_OK) {
    json_t *value = json_loadb(kvEntry_Value(entry), (size_t)kvEntry_ValueLen(entry), 0, NULL);
    const char *hex = json_string_value(json_object_get(value, "public_key"));
    if (hex) key = strdup(hex);
    json_decref(value);
    kvEntry_Destroy(entry);
  }
  kvStore_Destroy(kv);
  if (key == NULL) dome_error_set(err, ENOENT, "node `%s` has no key in %s", node, bucket);
  return key;
}

int fleet_audit_publish_raw(fleet *f, const char *subject, const char *message_id, const char *data,
                            size_t length, dome_error *err) {
  natsMsg *message = NULL;
  if (natsMsg_Create(&message, subject, NULL, data, (int)length) != NATS_OK)
    return dome_error_set(err, ENOMEM, "message for `%s`", subject);
  jsPubOptions options;
  jsPubOptions_Init(&options);
  options.MsgId = message_id;
  options.ExpectStream = f->stream;
  options.MaxWait = 3000;
  jsPubAck *ack = NULL;
  jsErrCode code = 0;
  natsStatus s = js_PublishMsg(&ack, f->js, message, &options, &code);
  natsMsg_Destroy(message);
  int rc = s == NATS_OK ? (ack && ack->Duplicate ? 1 : 0) : fleet_nats_error(err, s, code, subject);
  jsPubAck_Destroy(ack);
  return rc;
}

/* A journal type as one or more subject tokens: [A-Za-z0-9_-] kept, '.' between non-empty tokens kept,
 * anything else '_'. */
static void subject_of(const fleet *f, const char *type, char *subject, size_t size) {
  int n = snprintf(subject, size, "%s.%s.", FLEET_SUBJECT_PREFIX, f->node);
  size_t at = n > 0 && (size_t)n < size ? (size_t)n : size - 1;
  bool token_empty = true;
  for (const char *c = type && type[0] ? type : "unknown"; *c && at + 1 < size; c++) {
    char out = *c;
    bool plain = (out >= 'a' && out <= 'z') || (out >= 'A' && out <= 'Z') || (out >= '0' && out <= '9') ||
                 out == '_' || out == '-';
    if (out == '.' && !token_empty && c[1] && c[1] != '.') {
      token_empty = true;
    } else {
      if (!plain) out = '_';
      token_empty = false;
    }
    subject[at++] = out;
  }
  subject[at] = '\0';
}

/* The journal seq after this node's last message in the stream (1 when it has none). */
static uint64_t resume_seq(fleet *f) {
  char subject[FLEET_NAME_MAX + 32];
  snprintf(subject, sizeof subject, "%s.%s.>", FLEET_SUBJECT_PREFIX, f->node);
  natsMsg *last = NULL;
  jsErrCode code = 0;
  uint64_t next = 1;
  if (js_GetLastMsg(&last, f->js, f->stream, subject, NULL, &code) == NATS_OK) {
    const char *id = NULL;
    if (natsMsgHeader_Get(last, "Nats-Msg-Id", &id) == NATS_OK && id) {
      const char *colon = strrchr(id, ':');
      if (colon) next = strtoull(colon + 1, NULL, 10) + 1;
    }
    natsMsg_Destroy(last);
  }
  return next;
}

static void *publisher_main(void *argument) {
  fleet *f = argument;
  journal_reader *reader = NULL;
  uint64_t epoch = 0, next = 0;
  while (!atomic_load(&f->stopping)) {
    uint64_t now_epoch = fleet_wait_prepared(f);
    if (now_epoch == 0) break;
    if (now_epoch != epoch) { /* a new connection: start after what the stream holds */
      epoch = now_epoch;
      uint64_t resume = resume_seq(f);
      if (reader == NULL || resume != next) {
        journal_reader_close(reader);
        reader = NULL;
        next = resume;
      }
    }
    dome_error err = {0};
    if (reader == NULL) {
      journal_filter filter = {.from_seq = next, .follow = true, .follow_timeout_ms = 200};
      if (journal_reader_open(f->journal_dir, &filter, &reader, &err) < 0) {
        fprintf(stderr, "fleet: audit publisher: %s\n", err.message);
        fleet_sleep_ms(500);
        continue;
      }
    }
    journal_record record;
    int rc = journal_reader_next(reader, true, &record, &err);
    if (rc == -EAGAIN || rc == 0) continue;
    if (rc < 0) {
      fprintf(stderr, "fleet: audit publisher: %s\n", err.message);
      journal_reader_close(reader);
      reader = NULL;
      fleet_sleep_ms(500);
      continue;
    }
    char subject[256], id[FLEET_NAME_MAX + 24];
    subject_of(f, json_string_value(json_object_get(record.event, "type")), subject, sizeof subject);
    snprintf(id, sizeof id, "%s:%" PRIu64, f->node, record.seq);
    /* at least once, in order: this event until the stream took it (or the node stops) */
    while (!atomic_load(&f->stopping)) {
      if (fleet_audit_publish_raw(f, subject, id, record.line, record.length, &err) >= 0) break;
      fleet_sleep_ms(100);
    }
    json_decref(record.event);
    next = record.seq + 1;
    atomic_store(&f->published, record.seq);
  }
  journal_reader_close(reader);
  return NULL;
}

int fleet_audit_start(fleet *f, const char *journal_dir, const char *public_key_hex, dome_error *err) {
  if (f->publishing) return dome_error_set(err, EALREADY, "audit publisher already running");
  if (!f->node[0]) return dome_error_set(err, EINVAL, "a reader does not publish");
  if (!public_key_hex || strlen(public_key_hex) != 64)
    return dome_error_set(err, EINVAL, "journal public key: expected 64 hex digits");
  f->journal_dir = strdup(journal_dir);
  pthread_mutex_lock(&f->lock);
  snprintf(f->public_key, sizeof f->public_key, "%s", public_key_hex);
  f->prepared_epoch = 0; /* register the key with the next set-up */
  pthread_mutex_unlock(&f->lock);
  if (pthread_create(&f->publisher, NULL, publisher_main, f) != 0)
    return dome_error_set(err, EAGAIN, "audit publisher thread");
  f->publishing = true;
  return 0;
}

uint64_t fleet_audit_published(fleet *f) {
  return atomic_load(&f->published);
}

int fleet_audit_read(fleet *f, uint64_t from_seq, bool follow, volatile int *stop,
                     int (*each)(void *context, const fleet_audit_message *message), void *context,
                     dome_error *err) {
  jsStreamInfo *info = NULL;
  jsErrCode code = 0;
  natsStatus s = js_GetStreamInfo(&info, f->js, f->stream, NULL, &code);
  if (s != NATS_OK) return fleet_nats_error(err, s, code, f->stream);
  uint64_t last = info->State.LastSeq, first = info->State.FirstSeq;
  jsStreamInfo_Destroy(info);
  uint64_t seq = from_seq == 0 ? last + 1 : from_seq > first ? from_seq : first;
  for (;;) {
    if (stop && *stop) return 0;
    if (seq > last) {
      if (!follow) return 0;
      fleet_sleep_ms(100);
      if (js_GetStreamInfo(&info, f->js, f->stream, NULL, &code) == NATS_OK) {
        last = info->State.LastSeq;
        jsStreamInfo_Destroy(info);
      }
      continue;
    }
    natsMsg *message = NULL;
    s = js_GetMsg(&message, f->js, f->stream, seq, NULL, &code);
    if (s == NATS_NOT_FOUND || code == JSNoMessageFoundErr) { /* removed (limits): skip */
      seq++;
      continue;
    }
    if (s != NATS_OK) {
      if (follow) {
        fleet_sleep_ms(200);
        continue;
      }
      return fleet_nats_error(err, s, code, f->stream);
    }
    const char *subject = natsMsg_GetSubject(message), *id = NULL;
    natsMsgHeader_Get(message, "Nats-Msg-Id", &id);
    char node[FLEET_NAME_MAX] = "";
    size_t prefix = strlen(FLEET_SUBJECT_PREFIX ".");
    if (strncmp(subject, FLEET_SUBJECT_PREFIX ".", prefix) == 0) {
      const char *end = strchr(subject + prefix, '.');
      size_t length = end ? (size_t)(end - subject - prefix) : strlen(subject + prefix);
      if (length < sizeof node) memcpy(node, subject + prefix, length), node[length] = '\0';
    }
    fleet_audit_message m = {.stream_seq = seq,
                             .subject = subject,
                             .node = node,
                             .message_id = id,
                             .data = natsMsg_GetData(message),
                             .length = (size_t)natsMsg_GetDataLength(message)};
    int stopped = each(context, &m);
    natsMsg_Destroy(message);
    if (stopped) return 0;
    seq++;
  }
}
