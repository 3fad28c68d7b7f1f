/* dome fleet mode: many domed nodes sharing one control plane and one audit stream on NATS JetStream
 * (the official C client, nats.c; design and guarantees in docs/fleet.md).
 *
 * - Audit: every event and checkpoint of a node's journal is published, in seq order and at least once,
 *   to the stream DOME_<fleet>_AUDIT on subject dome.audit.<node>.<type> with Nats-Msg-Id <node>:<seq>
 *   (the stream drops a repeated id within its duplicate window). A background thread follows the
 *   journal on disk, so the calls never wait on NATS and a node that was cut off catches up from its
 *   journal. The node's Ed25519 public key is registered in the bucket DOME_<fleet>_nodes (key <node>).
 * - Control plane: the replicated documents of the control store (agents with their token hashes and
 *   grants, quotas, tools without secrets, gateways, rule versions) live in key-value buckets
 *   DOME_<fleet>_agents, _quotas, _tools, _gateways, _rules, one key per entry. A change is written with
 *   compare-and-set revisions before it takes effect locally; every node applies every change from its
 *   watch of the buckets.
 *
 * Thread safety: every function may be called from any thread. Functions return 0 (or a count) or a
 * negative -errno with *err filled. */
#ifndef DOME_FLEET_FLEET_H
#define DOME_FLEET_FLEET_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "supervisor/common/error.h"
#include "supervisor/control/control.h"

#define FLEET_NAME_MAX 64
#define FLEET_DEFAULT_NAME "default"
#define FLEET_SUBJECT_PREFIX "dome.audit"

/* A fleet or node name: 1..63 of [A-Za-z0-9_-] (one NATS subject token and part of stream names). */
bool fleet_name_valid(const char *name);

typedef struct fleet_options {
  const char *url;                /* comma-separated NATS URLs: nats://host:port[,nats://...]; required */
  const char *fleet;              /* fleet name (stream and bucket names); required */
  const char *node;               /* this node's name; required for a node, NULL for a reader (the CLI) */
  const char *creds;              /* NATS credentials file (JWT + NKey seed), or NULL */
  const char *tls_ca;             /* CA certificates to trust (PEM), or NULL */
  const char *tls_cert, *tls_key; /* client certificate chain and key (PEM), or NULL */
  int replicas; /* replicas of the stream and buckets when this node creates them (default 3;
                 * fewer servers than that: as many as answer) */
} fleet_options;

typedef struct fleet fleet;

/* Connect to the NATS servers of options->url (reconnecting for ever in the background; a node whose
 * servers are all down at start is connected as soon as one answers). A reader (options->node NULL)
 * waits for the first connection at most timeout_ms and fails with -ECONNREFUSED otherwise.
 * Returns 0 and *out, or -EINVAL (bad name or URL: the message names the option), -ECONNREFUSED,
 * -ENOMEM. */
int fleet_open(const fleet_options *options, int timeout_ms, fleet **out, dome_error *err);

/* Stop the threads, close the connection, free f (may be NULL). */
void fleet_close(fleet *f);

/* ---- node state ---- */

/* 0 while the node may serve calls: connected with the control plane caught up, or disconnected for
 * less than stale_s seconds (0: never stale). When it reconnected and is still replaying the buckets,
 * waits at most wait_ms for that. Otherwise -ESTALE (cut off longer than stale_s) or -EAGAIN (still
 * catching up), the message saying which and for how long. */
int fleet_serving(fleet *f, unsigned stale_s, int wait_ms, dome_error *err);

/* Whether the connection is up now. */
bool fleet_connected(fleet *f);

/* ---- audit publisher ---- */

/* Follow the journal in journal_dir from the event after the last one of this node in the stream and
 * publish every event (see above); public_key_hex is the journal's signing.pub (registered in the
 * nodes bucket). The thread runs until fleet_close. Returns 0, -EALREADY, -EINVAL. */
int fleet_audit_start(fleet *f, const char *journal_dir, const char *public_key_hex, dome_error *err);

/* Highest journal seq the stream acknowledged (0 before the first). */
uint64_t fleet_audit_published(fleet *f);

/* ---- control plane ---- */

/* Called for every entry received from a bucket (this node's own changes included), after it was
 * applied to the store: document as for control_store_apply_entry, `changed` whether the store
 * changed. */
typedef void (*fleet_applied)(void *context, const char *document, const char *key, bool changed,
                              uint64_t revision);

/* Replicate `store` (control_store_set_replicate_hook is installed with this fleet as context) and apply
 * the buckets' entries to it from one watch per bucket, replayed from the start at every (re)connection
 * before fleet_serving lets calls through. Returns 0, -EALREADY. */
int fleet_control_start(fleet *f, control_store *store, fleet_applied applied, void *context,
                        dome_error *err);

/* The store's replicate hook (control_store_replicate_hook; context: the fleet): writes the entries that
 * differ between current and next to their bucket, each with the revision this node last saw of it
 * (create when it saw none), new rule texts before the index. Returns 0, -ESTALE (no connection:
 * changes are refused while cut off), -EBUSY (another node changed an entry first: retry), -EIO. */
int fleet_control_replicate(void *f, const char *document, const json_t *current, const json_t *next,
                            dome_error *err);

/* ---- readers (the CLI's `dome audit ... --fleet`) ---- */

/* One message of the audit stream: subject, its Nats-Msg-Id (NULL when absent), the event line. */
typedef struct fleet_audit_message {
  uint64_t stream_seq;
  const char *subject;
  const char *node; /* the subject's node token */
  const char *message_id;
  const char *data;
  size_t length;
} fleet_audit_message;

/* Call `each` for every message of the audit stream from stream seq from_seq (1: the oldest kept; 0: the
 * messages stored after this call), in stream order; follow: then wait for new ones until `each` returns
 * non-zero or *stop becomes true. Returns 0 (the end reached, or stopped), -ENOENT (no such stream), -EIO. */
int fleet_audit_read(fleet *f, uint64_t from_seq, bool follow, volatile int *stop,
                     int (*each)(void *context, const fleet_audit_message *message), void *context,
                     dome_error *err);

/* The public key (hex) node `node` registered in the nodes bucket, malloc'd, or NULL with -ENOENT. */
char *fleet_node_key(fleet *f, const char *node, dome_error *err);

/* Publish `length` bytes to `subject` of the audit stream with message id `message_id` (NULL: none),
 * waiting for the stream's acknowledgement; 1 when the stream dropped it as a duplicate. For tests and
 * tools that inject messages (the publisher uses the same path). */
int fleet_audit_publish_raw(fleet *f, const char *subject, const char *message_id, const char *data,
                            size_t length, dome_error *err);

#endif
