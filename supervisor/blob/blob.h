/* The blob store beside the journal: inputs of executions too large to keep inline in an event, named
 * by their SHA-256 and counted against quotas.
 *
 * Layout (docs/simulate-replay.md): the content at <journal>/blobs/sha256/<2 hex>/<64 hex> (what
 * `dome audit replay --rerun` reads back), and one hard link per owner (a capability) that stored it at
 * <journal>/blobs/owners/<owner>/<64 hex>, so that each owner's use survives a restart and is counted
 * from the links alone. A blob counts once against the total and once against every owner linking it.
 *
 * Thread safety: every function may be called from any number of threads at once. Functions return 0
 * (or a count) on success and -errno with *err filled on failure (supervisor/common/error.h). */
#ifndef DOME_BLOB_BLOB_H
#define DOME_BLOB_BLOB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "supervisor/common/error.h"

typedef struct blob_store blob_store;

/* Open the store of `journal_dir` (directories made on first put) with a quota of total_quota bytes
 * over all blobs (0: no total quota), and count what is there. Returns 0 and *out, or -ENOMEM / the
 * errno of reading a directory that exists. */
int blob_store_open(const char *journal_dir, uint64_t total_quota, blob_store **out, dome_error *err);
void blob_store_close(blob_store *store);

/* Keep data[0..length) (whose SHA-256 is `hex`, 64 lower-case hex digits) for `owner` (a capability
 * name: [A-Za-z0-9._-], 1..128 bytes), whose blobs may take owner_quota bytes (0: no owner quota).
 * A blob the owner already holds has its mtime refreshed (pruning goes by mtime). Written to a temp file,
 * fsync'd, renamed, then linked for the owner.
 * Returns 1 (kept), 0 (not kept: a quota would be exceeded; *err says which, nothing written), or -errno
 * when writing failed (-ENOSPC, -EIO, ...: nothing is left half-written) or -EINVAL (bad owner or hex). */
int blob_store_put(blob_store *store, const char *owner, uint64_t owner_quota, const void *data,
                   size_t length, const char *hex, dome_error *err);

/* `owner` no longer needs blob `hex`: its link goes, and the content with it when no other owner links
 * it (a task's result whose TTL passed). Returns 1 (content removed), 0 (the link went, other owners
 * keep the content; or the owner held no such blob), -EINVAL (bad owner or hex) or -errno. */
int blob_store_release(blob_store *store, const char *owner, const char *hex, dome_error *err);

struct blob_store_usage {
  uint64_t bytes;       /* content bytes of all blobs */
  uint64_t blobs;       /* number of blobs */
  uint64_t quota_bytes; /* the total quota (0: none) */
  uint64_t refused;     /* puts refused by a quota since open */
  uint64_t pruned;      /* blobs removed by blob_store_prune since open */
};
void blob_store_usage(blob_store *store, struct blob_store_usage *usage);
/* Bytes of the blobs `owner` links (0 for an unknown owner). */
uint64_t blob_store_owner_bytes(blob_store *store, const char *owner);

/* Object owner -> bytes of every owner holding blobs (requires jansson). New reference. */
struct json_t;
struct json_t *blob_store_owners(blob_store *store);

/* Store data[0..length) under its SHA-256 without accounting (offline writers: re-runs recorded by
 * `dome audit replay --rerun`; written to a temp file, fsync'd, renamed; a blob already present is left as
 * is). hex receives the 64 hex digits + NUL. Returns 0 or -errno. */
int blob_content_put(const char *journal_dir, const void *data, size_t length, char hex[65], dome_error *err);
/* Read the blob `hex` of the store beside journal_dir (malloc'd into *data, *length bytes, NUL-terminated
 * for convenience; at most 1 GiB) and check its digest. Returns 0, -ENOENT (not kept: removed by
 * retention, refused by a quota or never stored), -EBADMSG (content does not match its digest), -EINVAL
 * (hex is not 64 hex digits), -E2BIG, -errno. */
int blob_content_get(const char *journal_dir, const char *hex, char **data, size_t *length, dome_error *err);

/* Remove every blob last stored or refreshed before before_ns (CLOCK_REALTIME, Unix ns), with its
 * owners' links: the journal's retention removed every event that could name it. Returns the number
 * of blobs removed, or -errno reading the store. */
int blob_store_prune(blob_store *store, int64_t before_ns, dome_error *err);

#endif
