/* Private: the fleet's state shared by its files. */
#ifndef DOME_FLEET_FLEET_INTERNAL_H
#define DOME_FLEET_FLEET_INTERNAL_H

#include <nats/nats.h>
#include <pthread.h>
#include <stdatomic.h>

#include "supervisor/fleet/fleet.h"

#define FLEET_DOCUMENTS 5 /* agents, quotas, tools, gateways, rules */

struct fleet;
struct fleet_bucket {
  struct fleet *owner;
  const char *document;
  char name[2 * FLEET_NAME_MAX + 32]; /* DOME_<fleet>_<document> */
  kvStore *kv;                        /* under the fleet's lock */
  json_t *revisions;                  /* key -> revision last seen (lock) */
  uint64_t synced_epoch;              /* connection epoch whose replay this bucket finished (lock) */
  pthread_t thread;
  bool started;
};

struct fleet {
  char fleet_name[FLEET_NAME_MAX];
  char node[FLEET_NAME_MAX];
  char stream[FLEET_NAME_MAX + 16]; /* DOME_<fleet>_AUDIT */
  int replicas;
  natsOptions *options;
  natsConnection *connection;
  jsCtx *js;
  pthread_mutex_t lock;
  pthread_cond_t changed; /* epoch, synced_epoch, stopping */
  atomic_bool stopping;
  atomic_bool connected;
  uint64_t epoch;          /* incremented at every (re)connection (lock) */
  uint64_t prepared_epoch; /* epoch whose stream, buckets and node key are set up (lock) */
  /* CLOCK_MONOTONIC since when this node is out of sync with the fleet (disconnected, or reconnected and
   * still replaying the buckets), 0 while in sync (lock); ever_synced: it was in sync once since start */
  int64_t unsynced_ns;
  bool ever_synced;
  /* audit publisher */
  char *journal_dir;
  char public_key[72];
  pthread_t publisher;
  bool publishing;
  _Atomic uint64_t published;
  /* control plane */
  control_store *store;
  fleet_applied applied;
  void *applied_context;
  struct fleet_bucket buckets[FLEET_DOCUMENTS];
  bool controlling;
};

int64_t fleet_monotonic_ns(void);
/* Wait (lock not held) until the connection is up and set up for its epoch, or stopping; returns the
 * epoch, 0 when stopping. */
uint64_t fleet_wait_prepared(fleet *f);
/* Set up what this epoch's connection needs (stream, nodes bucket, this node's key). Lock not held. */
int fleet_prepare(fleet *f, dome_error *err);
/* A NATS status as an error message. */
int fleet_nats_error(dome_error *err, natsStatus status, jsErrCode code, const char *what);
void fleet_sleep_ms(int ms);
/* Note the end of a replay or a set-up (lock held): in sync again when connected, set up and every bucket
 * replayed for the current epoch. */
void fleet_update_sync(fleet *f);
/* Open bucket `name`, creating it with f->replicas replicas (fewer when the cluster has fewer servers). */
int fleet_bucket_open(fleet *f, const char *name, kvStore **kv, dome_error *err);

#endif
