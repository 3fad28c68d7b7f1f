/* dome-fleet-tool: the tampering of tests/fleet/test_fleet, through nats.c directly.
 *
 *   dome-fleet-tool copy URL FLEET TO_URL [--alter NODE:SEQ] [--drop NODE:SEQ]
 *       copy the audit stream DOME_<FLEET>_AUDIT into a new one of the same name on the NATS server at
 *       TO_URL (same subjects, ids and order; the events named by --alter get a member "tampered": true,
 *       those named by --drop are left out) and the node keys of DOME_<FLEET>_nodes with it.
 *   dome-fleet-tool ready URL SECONDS
 *       wait until JetStream answers at URL (a cluster's meta leader is elected), at most SECONDS.
 *   dome-fleet-tool publish URL FLEET SUBJECT ID TEXT
 *       publish TEXT on SUBJECT of DOME_<FLEET>_AUDIT with message id ID ("-": none).
 *   dome-fleet-tool times URL STREAM
 *       print one line per message of STREAM (an audit stream, or a bucket's KV_<bucket>):
 *       "<stream seq> <time the stream stored it, ns since the epoch> <Nats-Msg-Id or -> <subject>",
 *       for scripts/bench-fleet's replication lag and KV propagation.
 * Exit 0, or 1 with the reason on stderr. */
#include <jansson.h>
#include <nats/nats.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(const char *what, natsStatus s) {
  fprintf(stderr, "dome-fleet-tool: %s: %s %s\n", what, natsStatus_GetText(s), nats_GetLastError(NULL));
  return 1;
}

static bool named(const char *list, const char *id) {
  return list && id && strcmp(list, id) == 0;
}

static int copy_stream(jsCtx *js, jsCtx *target_js, const char *fleet, const char *alter, const char *drop) {
  char source[128];
  snprintf(source, sizeof source, "DOME_%s_AUDIT", fleet);
  const char *target = source, *from = fleet, *to = fleet;
  char subjects_text[] = "dome.audit.>";
  jsStreamInfo *info = NULL;
  natsStatus s = js_GetStreamInfo(&info, js, source, NULL, NULL);
  if (s != NATS_OK) return fail(source, s);
  uint64_t first = info->State.FirstSeq, last = info->State.LastSeq;
  jsStreamInfo_Destroy(info);
  const char *list[] = {subjects_text};
  jsStreamConfig config;
  jsStreamConfig_Init(&config);
  config.Name = target;
  config.Subjects = list;
  config.SubjectsLen = 1;
  config.Storage = js_MemoryStorage;
  config.Replicas = 1;
  s = js_AddStream(NULL, target_js, &config, NULL, NULL);
  if (s != NATS_OK) return fail(target, s);
  for (uint64_t seq = first; seq <= last; seq++) {
    natsMsg *m = NULL;
    if (js_GetMsg(&m, js, source, seq, NULL, NULL) != NATS_OK) continue;
    const char *id = NULL;
    natsMsgHeader_Get(m, "Nats-Msg-Id", &id);
    if (named(drop, id)) {
      natsMsg_Destroy(m);
      continue;
    }
    char *data = NULL;
    if (named(alter, id)) {
      json_t *event = json_loadb(natsMsg_GetData(m), (size_t)natsMsg_GetDataLength(m), 0, NULL);
      json_object_set_new(event, "tampered", json_true());
      data = json_dumps(event, JSON_COMPACT | JSON_SORT_KEYS);
      json_decref(event);
    } else {
      data = strndup(natsMsg_GetData(m), (size_t)natsMsg_GetDataLength(m));
    }
    char subject[512];
    snprintf(subject, sizeof subject, "%s", natsMsg_GetSubject(m));
    natsMsg *copy = NULL;
    natsMsg_Create(&copy, subject, NULL, data, (int)strlen(data));
    if (id) natsMsgHeader_Set(copy, "Nats-Msg-Id", id);
    s = js_PublishMsg(NULL, target_js, copy, NULL, NULL);
    natsMsg_Destroy(copy);
    natsMsg_Destroy(m);
    free(data);
    if (s != NATS_OK) return fail(subject, s);
  }
  char bucket_from[128], bucket_to[128];
  snprintf(bucket_from, sizeof bucket_from, "DOME_%s_nodes", from);
  snprintf(bucket_to, sizeof bucket_to, "DOME_%s_nodes", to);
  kvStore *kv_from = NULL, *kv_to = NULL;
  if ((s = js_KeyValue(&kv_from, js, bucket_from)) != NATS_OK) return fail(bucket_from, s);
  kvConfig kv_config;
  kvConfig_Init(&kv_config);
  kv_config.Bucket = bucket_to;
  kv_config.StorageType = js_MemoryStorage;
  if ((s = js_CreateKeyValue(&kv_to, target_js, &kv_config)) != NATS_OK) return fail(bucket_to, s);
  kvKeysList keys;
  if ((s = kvStore_Keys(&keys, kv_from, NULL)) != NATS_OK) return fail(bucket_from, s);
  for (int i = 0; i < keys.Count; i++) {
    kvEntry *entry = NULL;
    if (kvStore_Get(&entry, kv_from, keys.Keys[i]) != NATS_OK) continue;
    kvStore_Put(NULL, kv_to, keys.Keys[i], kvEntry_Value(entry), kvEntry_ValueLen(entry));
    kvEntry_Destroy(entry);
  }
  kvKeysList_Destroy(&keys);
  kvStore_Destroy(kv_from);
  kvStore_Destroy(kv_to);
  return 0;
}

static int print_times(jsCtx *js, const char *stream) {
  jsStreamInfo *info = NULL;
  natsStatus s = js_GetStreamInfo(&info, js, stream, NULL, NULL);
  if (s != NATS_OK) return fail(stream, s);
  uint64_t first = info->State.FirstSeq, last = info->State.LastSeq;
  jsStreamInfo_Destroy(info);
  for (uint64_t seq = first; seq <= last && seq > 0; seq++) {
    natsMsg *m = NULL;
    if (js_GetMsg(&m, js, stream, seq, NULL, NULL) != NATS_OK) continue;
    const char *id = NULL;
    if (natsMsgHeader_Get(m, "Nats-Msg-Id", &id) != NATS_OK) id = "-";
    printf("%llu %lld %s %s\n", (unsigned long long)seq, (long long)natsMsg_GetTime(m), id,
           natsMsg_GetSubject(m));
    natsMsg_Destroy(m);
  }
  return fflush(stdout) == 0 ? 0 : 1;
}

/* A cluster's meta leader answers stream creation: a probe stream is created and deleted. */
static int wait_ready(const char *url, int seconds) {
  for (int tenth = 0; tenth < seconds * 10; tenth++) {
    natsConnection *connection = NULL;
    if (natsConnection_ConnectTo(&connection, url) == NATS_OK) {
      jsCtx *js = NULL;
      jsAccountInfo *info = NULL;
      natsConnection_JetStream(&js, connection, NULL);
      natsStatus s = js_GetAccountInfo(&info, js, NULL, NULL);
      jsAccountInfo_Destroy(info);
      if (s == NATS_OK) {
        const char *subjects[] = {"dome-ready-probe"};
        jsStreamConfig config;
        jsStreamConfig_Init(&config);
        config.Name = "DOME_READY_PROBE";
        config.Subjects = subjects;
        config.SubjectsLen = 1;
        config.Storage = js_MemoryStorage;
        s = js_AddStream(NULL, js, &config, NULL, NULL);
        if (s == NATS_OK) s = js_DeleteStream(js, "DOME_READY_PROBE", NULL, NULL);
      }
      jsCtx_Destroy(js);
      natsConnection_Destroy(connection);
      if (s == NATS_OK) return 0;
    }
    nats_Sleep(100);
  }
  fprintf(stderr, "dome-fleet-tool: JetStream at %s did not answer within %d s\n", url, seconds);
  return 1;
}

int main(int argc, char **argv) {
  if (argc == 4 && strcmp(argv[1], "ready") == 0) return wait_ready(argv[2], atoi(argv[3]));
  bool copy = argc >= 5 && strcmp(argv[1], "copy") == 0;
  natsConnection *target_connection = NULL;
  jsCtx *target_js = NULL;
  bool publish = argc == 7 && strcmp(argv[1], "publish") == 0;
  bool times = argc == 4 && strcmp(argv[1], "times") == 0;
  if (!copy && !publish && !times) {
    fprintf(stderr,
            "usage: dome-fleet-tool copy URL FLEET TO_URL [--alter NODE:SEQ] [--drop NODE:SEQ]\n"
            "       dome-fleet-tool publish URL FLEET SUBJECT ID TEXT\n"
            "       dome-fleet-tool times URL STREAM\n"
            "       dome-fleet-tool ready URL SECONDS\n");
    return 2;
  }
  const char *alter = NULL, *drop = NULL;
  for (int i = 5; copy && i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--alter") == 0) alter = argv[i + 1];
    if (strcmp(argv[i], "--drop") == 0) drop = argv[i + 1];
  }
  natsConnection *connection = NULL;
  natsStatus s = natsConnection_ConnectTo(&connection, argv[2]);
  if (s != NATS_OK) return fail(argv[2], s);
  jsCtx *js = NULL;
  natsConnection_JetStream(&js, connection, NULL);
  int rc;
  if (times) {
    rc = print_times(js, argv[3]);
  } else if (copy) {
    if ((s = natsConnection_ConnectTo(&target_connection, argv[4])) != NATS_OK) return fail(argv[4], s);
    natsConnection_JetStream(&target_js, target_connection, NULL);
    rc = copy_stream(js, target_js, argv[3], alter, drop);
    jsCtx_Destroy(target_js);
    natsConnection_Destroy(target_connection);
  } else {
    natsMsg *m = NULL;
    natsMsg_Create(&m, argv[4], NULL, argv[6], (int)strlen(argv[6]));
    if (strcmp(argv[5], "-") != 0) natsMsgHeader_Set(m, "Nats-Msg-Id", argv[5]);
    s = js_PublishMsg(NULL, js, m, NULL, NULL);
    natsMsg_Destroy(m);
    rc = s == NATS_OK ? 0 : fail(argv[4], s);
  }
  jsCtx_Destroy(js);
  natsConnection_Destroy(connection);
  return rc;
}
