/* The NATS connection of a node or a reader: options, reconnection, and the connection epochs the
 * publisher and the bucket watches follow. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "supervisor/fleet/fleet_internal.h"

int64_t fleet_monotonic_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void fleet_sleep_ms(int ms) {
  struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000};
  nanosleep(&ts, NULL);
}

bool fleet_name_valid(const char *name) {
  if (name == NULL || name[0] == '\0' || strlen(name) >= FLEET_NAME_MAX) return false;
  for (const char *c = name; *c; c++)
    if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '_' ||
          *c == '-'))
      return false;
  return true;
}

int fleet_nats_error(dome_error *err, natsStatus status, jsErrCode code, const char *what) {
  const char *last = nats_GetLastError(NULL);
  int number =
      status == NATS_TIMEOUT || status == NATS_NO_RESPONDERS ? ETIMEDOUT
      : status == NATS_CONNECTION_CLOSED || status == NATS_CONNECTION_DISCONNECTED || status == NATS_NO_SERVER
          ? ECONNREFUSED
      : status == NATS_NOT_FOUND ? ENOENT
                                 : EIO;
  if (code)
    return dome_error_set(err, number, "%s: %s (JetStream error %d%s%s)", what, natsStatus_GetText(status),
                          (int)code, last && last[0] ? ": " : "", last ? last : "");
  return dome_error_set(err, number, "%s: %s%s%s", what, natsStatus_GetText(status),
                        last && last[0] ? ": " : "", last ? last : "");
}

static void on_disconnected(natsConnection *connection, void *closure) {
  (void)connection;
  fleet *f = closure;
  pthread_mutex_lock(&f->lock);
  atomic_store(&f->connected, false);
  if (f->unsynced_ns == 0) f->unsynced_ns = fleet_monotonic_ns();
  pthread_cond_broadcast(&f->changed);
  pthread_mutex_unlock(&f->lock);
}

static void on_connected(natsConnection *connection, void *closure) {
  (void)connection;
  fleet *f = closure;
  pthread_mutex_lock(&f->lock);
  atomic_store(&f->connected, true);
  if (f->unsynced_ns == 0) f->unsynced_ns = fleet_monotonic_ns(); /* until the replay is done */
  f->epoch++;
  pthread_cond_broadcast(&f->changed);
  pthread_mutex_unlock(&f->lock);
}

bool fleet_connected(fleet *f) {
  return atomic_load(&f->connected);
}

uint64_t fleet_wait_prepared(fleet *f) {
  for (;;) {
    pthread_mutex_lock(&f->lock);
    while (!atomic_load(&f->stopping) && !atomic_load(&f->connected)) {
      struct timespec until;
      clock_gettime(CLOCK_REALTIME, &until);
      until.tv_nsec += 200000000;
      if (until.tv_nsec >= 1000000000) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000;
      }
      pthread_cond_timedwait(&f->changed, &f->lock, &until);
    }
    uint64_t epoch = f->epoch;
    bool ready = atomic_load(&f->connected) && f->prepared_epoch == epoch;
    pthread_mutex_unlock(&f->lock);
    if (atomic_load(&f->stopping)) return 0;
    if (ready) return epoch;
    dome_error err = {0};
    if (fleet_prepare(f, &err) == 0) {
      pthread_mutex_lock(&f->lock);
      if (f->epoch == epoch) f->prepared_epoch = epoch;
      fleet_update_sync(f);
      pthread_cond_broadcast(&f->changed);
      pthread_mutex_unlock(&f->lock);
    } else {
      fprintf(stderr, "fleet: setting up the stream and buckets: %s\n", err.message);
      fleet_sleep_ms(500);
    }
  }
}

static int set_options(fleet *f, const fleet_options *options, dome_error *err) {
  natsOptions *o = NULL;
  natsStatus created = natsOptions_Create(&o); /* the first call into libnats: it may not load */
  if (created != NATS_OK) return fleet_nats_error(err, created, 0, "NATS options");
  f->options = o;
  char *urls = strdup(options->url);
  const char *servers[32];
  int count = 0;
  for (char *save = NULL, *item = strtok_r(urls, ", ", &save); item && count < 32;
       item = strtok_r(NULL, ", ", &save))
    servers[count++] = item;
  natsStatus s = count ? natsOptions_SetServers(o, servers, count) : NATS_INVALID_ARG;
  free(urls);
  if (s != NATS_OK)
    return dome_error_set(err, EINVAL, "fleet_url: `%s` is not a list of nats:// URLs", options->url);
  char name[2 * FLEET_NAME_MAX + 8];
  snprintf(name, sizeof name, "dome-%s", options->node ? options->node : "cli");
  natsOptions_SetName(o, name);
  natsOptions_SetMaxReconnect(o, -1);
  natsOptions_SetReconnectWait(o, 250);
  natsOptions_SetPingInterval(o, 1000);
  natsOptions_SetMaxPingsOut(o, 2);
  natsOptions_SetTimeout(o, 2000);
  natsOptions_SetReconnectBufSize(o, 8 << 20);
  natsOptions_SetDisconnectedCB(o, on_disconnected, f);
  natsOptions_SetReconnectedCB(o, on_connected, f);
  if (options->node) natsOptions_SetRetryOnFailedConnect(o, true, on_connected, f);
  if (options->creds && options->creds[0] &&
      natsOptions_SetUserCredentialsFromFiles(o, options->creds, NULL) != NATS_OK)
    return dome_error_set(err, EINVAL, "fleet_creds: `%s`: %s", options->creds, nats_GetLastError(NULL));
  if (options->tls_ca && options->tls_ca[0]) {
    if (natsOptions_SetSecure(o, true) != NATS_OK ||
        natsOptions_LoadCATrustedCertificates(o, options->tls_ca) != NATS_OK)
      return dome_error_set(err, EINVAL, "fleet_tls_ca: `%s`: %s", options->tls_ca, nats_GetLastError(NULL));
  }
  if ((options->tls_cert && options->tls_cert[0]) || (options->tls_key && options->tls_key[0])) {
    if (!options->tls_cert || !options->tls_cert[0] || !options->tls_key || !options->tls_key[0])
      return dome_error_set(err, EINVAL, "fleet_tls_cert and fleet_tls_key go together");
    if (natsOptions_SetSecure(o, true) != NATS_OK ||
        natsOptions_LoadCertificatesChain(o, options->tls_cert, options->tls_key) != NATS_OK)
      return dome_error_set(err, EINVAL, "fleet_tls_cert: `%s`: %s", options->tls_cert,
                            nats_GetLastError(NULL));
  }
  return 0;
}

int fleet_open(const fleet_options *options, int timeout_ms, fleet **out, dome_error *err) {
  if (!options->url || !options->url[0]) return dome_error_set(err, EINVAL, "fleet_url: missing");
  if (!fleet_name_valid(options->fleet))
    return dome_error_set(err, EINVAL, "fleet_name: `%s` is not 1..63 of [A-Za-z0-9_-]",
                          options->fleet ? options->fleet : "");
  if (options->node && !fleet_name_valid(options->node))
    return dome_error_set(err, EINVAL, "node_name: `%s` is not 1..63 of [A-Za-z0-9_-]", options->node);
  fleet *f = calloc(1, sizeof *f);
  if (f == NULL) return dome_error_set(err, ENOMEM, "fleet");
  snprintf(f->fleet_name, sizeof f->fleet_name, "%s", options->fleet);
  snprintf(f->node, sizeof f->node, "%s", options->node ? options->node : "");
  snprintf(f->stream, sizeof f->stream, "DOME_%s_AUDIT", options->fleet);
  f->replicas = options->replicas > 0 ? options->replicas : 3;
  f->unsynced_ns = fleet_monotonic_ns();
  pthread_mutex_init(&f->lock, NULL);
  pthread_cond_init(&f->changed, NULL);
  int rc = set_options(f, options, err);
  if (rc < 0) {
    fleet_close(f);
    return rc;
  }
  natsStatus s = natsConnection_Connect(&f->connection, f->options);
  if (s == NATS_OK) {
    pthread_mutex_lock(&f->lock);
    if (!atomic_load(&f->connected)) { /* a reader's first connection has no callback */
      atomic_store(&f->connected, true);
      f->epoch++;
    }
    pthread_mutex_unlock(&f->lock);
  } else if (!(options->node && s == NATS_NOT_YET_CONNECTED)) {
    (void)timeout_ms;
    rc = fleet_nats_error(err, s, 0, "connect to the fleet's NATS servers");
    fleet_close(f);
    return rc < 0 && rc != -ECONNREFUSED ? -ECONNREFUSED : rc;
  }
  if (!atomic_load(&f->connected)) {
    pthread_mutex_lock(&f->lock);
    f->unsynced_ns = fleet_monotonic_ns();
    pthread_mutex_unlock(&f->lock);
  }
  jsOptions js_options;
  jsOptions_Init(&js_options);
  js_options.Wait = 5000;
  if (natsConnection_JetStream(&f->js, f->connection, &js_options) != NATS_OK) {
    fleet_close(f);
    return dome_error_set(err, ENOMEM, "JetStream context");
  }
  *out = f;
  return 0;
}

void fleet_close(fleet *f) {
  if (f == NULL) return;
  pthread_mutex_lock(&f->lock);
  atomic_store(&f->stopping, true);
  pthread_cond_broadcast(&f->changed);
  pthread_mutex_unlock(&f->lock);
  if (f->publishing) pthread_join(f->publisher, NULL);
  for (int i = 0; i < FLEET_DOCUMENTS; i++)
    if (f->buckets[i].started) pthread_join(f->buckets[i].thread, NULL);
  for (int i = 0; i < FLEET_DOCUMENTS; i++) {
    kvStore_Destroy(f->buckets[i].kv);
    json_decref(f->buckets[i].revisions);
  }
  if (f->connection) natsConnection_Close(f->connection);
  jsCtx_Destroy(f->js);
  natsConnection_Destroy(f->connection);
  natsOptions_Destroy(f->options);
  free(f->journal_dir);
  pthread_cond_destroy(&f->changed);
  pthread_mutex_destroy(&f->lock);
  free(f);
}

void fleet_update_sync(fleet *f) {
  bool synced = atomic_load(&f->connected) && f->prepared_epoch == f->epoch;
  for (int i = 0; synced && f->controlling && i < FLEET_DOCUMENTS; i++)
    synced = f->buckets[i].synced_epoch == f->epoch;
  if (synced && f->unsynced_ns) {
    fprintf(stderr, "fleet: in sync with the fleet (node %s, connection %llu)\n", f->node,
            (unsigned long long)f->epoch);
    f->unsynced_ns = 0;
    f->ever_synced = true;
  }
}

/* In sync: serve. Out of sync (disconnected, or reconnected and replaying) for less than stale_s after
 * having been in sync: serve from the local copy. Otherwise a reconnected node waits for its replay (a
 * change made meanwhile, a revocation, is applied before the next call) and a disconnected one refuses. */
int fleet_serving(fleet *f, unsigned stale_s, int wait_ms, dome_error *err) {
  int64_t deadline = fleet_monotonic_ns() + (int64_t)wait_ms * 1000000;
  pthread_mutex_lock(&f->lock);
  for (;;) {
    if (f->unsynced_ns == 0) break;
    int64_t now = fleet_monotonic_ns(), away = now - f->unsynced_ns;
    if (f->ever_synced && (stale_s == 0 || away < (int64_t)stale_s * 1000000000)) break;
    if (!atomic_load(&f->connected)) {
      pthread_mutex_unlock(&f->lock);
      if (!f->ever_synced)
        return dome_error_set(err, ESTALE,
                              "this node has not reached the fleet's NATS servers since it started: refusing "
                              "calls until it has its control plane (fail closed)");
      return dome_error_set(err, ESTALE,
                            "this node has been cut off from the fleet for %lld s (fleet_stale_s = %u): "
                            "refusing calls until it is back (fail closed)",
                            (long long)(away / 1000000000), stale_s);
    }
    if (now >= deadline) {
      pthread_mutex_unlock(&f->lock);
      return dome_error_set(err, EAGAIN, "this node is still catching up with the fleet's control plane");
    }
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_nsec += 20000000;
    if (until.tv_nsec >= 1000000000) {
      until.tv_sec++;
      until.tv_nsec -= 1000000000;
    }
    pthread_cond_timedwait(&f->changed, &f->lock, &until);
  }
  pthread_mutex_unlock(&f->lock);
  return 0;
}
