/* dome audit journal: append-only, zstd-compressed, tamper-evident, crash-safe.
 *
 * A journal is a directory of segment files (`segment-<first seq, 20 digits>.zst`). A segment is a
 * sequence of independent zstd frames (RFC 8878) holding events, one canonical JSON object per line
 * (jansson JSON_SORT_KEYS|JSON_COMPACT), so `zstdcat SEGMENT | jq .` reads it; a sealed segment ends
 * with a seek table in the zstd seekable format's skippable frame. Every event is a leaf of an
 * RFC 6962 / RFC 9162 Merkle tree (SHA-256 through libsodium); `journal.checkpoint` events record the
 * tree size and root signed with Ed25519. The byte-level format is docs/journal-format.md.
 *
 * Thread safety: journal_append and journal_sync may be called from any number of threads at once.
 * A journal_reader belongs to one thread. Functions return 0 (or a count) on success and a negative
 * -errno on failure with *err filled (supervisor/common/error.h). */
#ifndef DOME_AUDIT_JOURNAL_H
#define DOME_AUDIT_JOURNAL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "supervisor/common/error.h"

#define JOURNAL_DEFAULT_DIRECTORY "/var/lib/dome/journal"
/* Largest canonical JSON line of one event, bytes (larger events are refused with -E2BIG). */
#define JOURNAL_MAX_EVENT_BYTES (1024 * 1024)

/* ---------------------------------------------------------------------------------------------
 * Writer
 * ------------------------------------------------------------------------------------------- */

typedef struct journal_options {
  /* Journal directory; created (mode 0700) if missing. Required. */
  const char *directory;
  /* Ed25519 signing key (hex seed, mode 0600). NULL: <directory>/signing.key. Generated on first open
   * when missing; the public key is exported next to it as <path without .key>.pub (hex, 64 digits). */
  const char *signing_key_path;
  /* A signed checkpoint after this many events (default 10000) or this many ms since the last one
   * (default 1000), whichever comes first, and always at journal_close. */
  uint64_t checkpoint_every_events;
  uint64_t checkpoint_every_ms;
  /* Group commit: a producer blocked in journal_sync leads the next commit itself when none is running;
   * events appended while an fdatasync runs are committed together by the next one. An event nobody
   * syncs is committed by the writer thread at the latest this many ms after it was appended (default 2;
   * 0: at once). */
  uint64_t group_commit_window_ms;
  /* A segment is sealed (seek table written) and a new one started once it holds this many bytes
   * (default 16 MiB). A zstd frame is closed once it holds frame_bytes of JSON (default 1 MiB). */
  uint64_t segment_bytes;
  uint64_t frame_bytes;
  /* Retention: whole sealed segments are removed, oldest first, while the journal is larger than
   * retention_bytes or the segment was sealed (file mtime) longer than retention_age_ms ago (0: no limit).
   * Each removal is recorded as a `journal.retention` event. */
  uint64_t retention_bytes;
  uint64_t retention_age_ms;
  /* zstd compression level (default 3). */
  int compression_level;
} journal_options;

/* Fill *options with the defaults above for `directory`. */
void journal_options_init(journal_options *options, const char *directory);

typedef struct journal journal;

/* Open (or create) the journal in options->directory and start its writer thread.
 * Crash recovery: a torn or unterminated tail of the last segment is cut back to the last complete
 * event line (never before an event that journal_sync acknowledged) and a `journal.recovered` event
 * records what was dropped. Loads or generates the signing key.
 * Only the last segment is read (open costs one segment's decompression and hashing, not the journal's).
 * Returns 0 and *out, or -errno: -ENOENT/-EACCES/... (directory, key), -EBADMSG (the last segment is
 * damaged before its tail or has no valid header: run `dome audit verify`), -ENOSPC/-EIO (recovery
 * could not write). */
int journal_open(const journal_options *options, journal **out, dome_error *err);

/* Append one event. `event` is a JSON object with a string member `type` (authz.decision,
 * exec.start, exec.output, exec.denial, exec.redaction, exec.end, rules.applied, agent.registered, ...),
 * the ids that tie events together as strings (`exec_id`, `agent`, `actas`, `tool`, `policy_version`)
 * and any payload members. The journal adds `seq` (gap-free, 1-based) and `time` (RFC 3339 UTC with
 * nanoseconds, non-decreasing in seq order); `event` is not modified (the caller keeps its reference).
 * On return the event is queued, not yet durable: call journal_sync(seq) before acting on it.
 * Returns 0 and *seq (may be NULL), or -EINVAL (not an object, no string `type`, or a reserved member
 * `seq`/`time` present), -E2BIG (canonical form > JOURNAL_MAX_EVENT_BYTES), -EROFS/-ENOSPC/-EIO (the
 * journal failed earlier: it refuses every append from then on, fail closed; the message says why),
 * -ESHUTDOWN (journal closing). */
int journal_append(journal *j, json_t *event, uint64_t *seq, dome_error *err);

/* Block until the event `seq` (and every event before it) is written and fsync'd. Events appended
 * by other threads meanwhile are committed in the same fsync (group commit).
 * Returns 0, or -ENOSPC/-EIO/... when the write failed (then the event is NOT durable, and the journal
 * refuses further appends), -EINVAL when seq was never assigned. */
int journal_sync(journal *j, uint64_t seq, dome_error *err);

/* Start making the event `seq` (and every event before it) durable without waiting: the writer thread
 * commits it at once instead of at the end of the group-commit window, while the caller does other work;
 * journal_sync(seq) then waits for what remains of that commit (or leads it, should the writer thread not
 * have started it yet). Nothing may act on the event before journal_sync returns 0. A seq already durable,
 * never assigned, or a failed or closing journal: nothing to start (journal_sync reports those). */
void journal_sync_begin(journal *j, uint64_t seq);

/* journal_append followed by journal_sync. */
int journal_append_sync(journal *j, json_t *event, uint64_t *seq, dome_error *err);

/* Queue a signed checkpoint of everything appended so far and wait until it is durable (checkpoints are
 * also written after every checkpoint_every_events events exactly, every checkpoint_every_ms, at close).
 * Returns 0 and *checkpoint_seq (may be NULL), or the errors of journal_sync. */
int journal_checkpoint(journal *j, uint64_t *checkpoint_seq, dome_error *err);

/* Last seq assigned (0 for an empty journal). */
uint64_t journal_last_seq(journal *j);

/* Non-zero -errno once the journal has failed (disk full, I/O error) and refuses appends; 0 otherwise. */
int journal_failed(journal *j);

/* Commit everything queued, write a final checkpoint, seal the active segment, stop the writer and
 * free j (also on error). Returns 0, or the first write error. j may be NULL. */
int journal_close(journal *j, dome_error *err);

/* ---------------------------------------------------------------------------------------------
 * Reader (bounded memory: one frame buffer and one event line, whatever the journal's size)
 * ------------------------------------------------------------------------------------------- */

typedef struct journal_filter {
  uint64_t from_seq;   /* first seq to return; 0 or 1 = from the oldest event kept */
  uint64_t to_seq;     /* last seq to return; 0 = no bound */
  int64_t since_ns;    /* events with time >= since (Unix ns); 0 = no bound */
  int64_t until_ns;    /* events with time < until (Unix ns); 0 = no bound */
  const char *agent;   /* exact `agent` member, or NULL */
  const char *exec_id; /* exact `exec_id` member, or NULL */
  const char *type;    /* exact `type`, or a prefix ending in '.' or ".*" ("exec." / "exec.*"), or NULL */
  /* Follow mode (`audit stream --follow`): at the end of the journal, wait for new events instead of
   * returning 0. follow_timeout_ms: longest wait of one journal_reader_next call, -1 = forever; when
   * it passes without a new event, next returns -EAGAIN (so a server can check for cancellation). */
  bool follow;
  int follow_timeout_ms;
} journal_filter;

typedef struct journal_reader journal_reader;

/* One event as read. `line` is the canonical JSON without the newline, `length` bytes, valid until the
 * next journal_reader_next call; `event` is a new reference the caller owns (json_decref) or NULL when
 * the reader was asked for lines only. */
typedef struct journal_record {
  uint64_t seq;
  int64_t time_ns; /* Unix ns */
  const char *line;
  size_t length;
  json_t *event;
} journal_record;

/* The next member key at the top level of a canonical JSON object (compact: no white space between tokens,
 * docs/journal-format.md section 3), `length` bytes at `line`. *at is 0 to begin, then what the previous
 * call left. Strings and nested values are skipped. Returns true with the key's raw text (between its
 * quotes, escapes as written) at [*key, *key + *key_length) and *at just past its closing quote; false when
 * no key is left (or the text ends inside one). */
bool journal_line_next_key(const char *line, size_t length, size_t *at, size_t *key, size_t *key_length);

/* Open a reader on `directory` with `filter` (NULL: everything). Nothing is read until next.
 * Returns 0 and *out, or -ENOENT (no such directory) / -ENOMEM. */
int journal_reader_open(const char *directory, const journal_filter *filter, journal_reader **out,
                        dome_error *err);

/* Next event matching the filter. parse_json: fill record->event (else NULL; faster).
 * Returns 1 with *record, 0 at the end (not in follow mode), -EAGAIN (follow timeout passed),
 * -EBADMSG (damaged frame or event line; the message names segment, offset and seq), -errno on I/O.
 * An unterminated tail of the last segment (writer running or crashed) is treated as the end. */
int journal_reader_next(journal_reader *r, bool parse_json, journal_record *record, dome_error *err);

void journal_reader_close(journal_reader *r);

/* ---------------------------------------------------------------------------------------------
 * Verification and inclusion proofs
 * ------------------------------------------------------------------------------------------- */

typedef struct journal_verify_result {
  uint64_t events;           /* event lines checked */
  uint64_t first_seq;        /* oldest seq kept (retention may have removed older segments) */
  uint64_t last_seq;         /* last seq seen */
  uint64_t checkpoints;      /* signatures checked */
  uint64_t signed_tree_size; /* tree size of the last valid checkpoint (events it vouches for) */
  uint64_t checkpoint_seq;   /* seq of that checkpoint event itself (signed_tree_size + 1), 0 if none */
  uint64_t segments;
  uint64_t json_bytes;       /* uncompressed bytes of event lines */
  uint64_t compressed_bytes; /* bytes of segment files */
  bool tail_unterminated;    /* the last segment ends in an open/torn frame (writer running/crashed) */
  uint64_t bad_seq;          /* 0 when the journal is intact; else the first seq found bad */
  char reason[512];          /* what is wrong at bad_seq ("" when intact) */
} journal_verify_result;

/* Verify `directory`: every zstd frame and its checksum, segment headers and seek tables, seq
 * continuity (gap-free across segments), time order, every leaf against the Merkle roots of the
 * checkpoints (RFC 6962 section 2.1), every checkpoint's Ed25519 signature against the public key at
 * public_key_path (NULL: <directory>/signing.pub), and the signed head file <directory>/checkpoint.json
 * (events it vouches for must be present). Stops at the first problem. Data frames are decoded and
 * their leaves hashed on one worker thread per online core (at most 8, started and joined inside);
 * memory stays bounded (a few frames in flight, each at most 32 MiB decoded).
 * Returns 0 (intact), -EBADMSG (result->bad_seq and result->reason say where and what; *err too),
 * or -errno when it could not run (no directory, unreadable key). */
int journal_verify(const char *directory, const char *public_key_path, journal_verify_result *result,
                   dome_error *err);

/* Inclusion proof (RFC 9162 section 2.1.3) of event `seq` against the latest checkpoint that covers
 * it. *proof (new reference): {"seq", "leaf_index", "tree_size", "leaf_hash", "audit_path": [hex...],
 * "root", "checkpoint": {the checkpoint event}, "event": "<canonical line>"}.
 * Returns 0, -ENOENT (no such seq / no checkpoint covers it yet), -EBADMSG (journal damaged). */
int journal_prove(const char *directory, uint64_t seq, json_t **proof, dome_error *err);

/* Check a proof made by journal_prove: leaf hash of `event`, audit path to `root`, and the
 * checkpoint's signature with the public key at public_key_path (NULL: trust the key id only if the
 * proof carries no key; pass a key to check the signature). Returns 0 or -EBADMSG with the reason. */
int journal_proof_check(const json_t *proof, const char *public_key_path, dome_error *err);

/* ---------------------------------------------------------------------------------------------
 * Chain check of a copy of the journal's event lines (a replica: the fleet's audit stream)
 * ------------------------------------------------------------------------------------------- */

/* Checks canonical event lines of one journal arriving one at a time, in seq order, against the
 * journal's signing key: seq continuity (a missing range is a gap), every leaf against the Merkle root
 * each journal.checkpoint signs, and its Ed25519 signature (as journal_verify does for a directory). */
typedef struct journal_chain journal_chain;

typedef struct journal_chain_result {
  uint64_t events;           /* lines taken (duplicates not counted) */
  uint64_t first_seq;        /* seq of the first line taken */
  uint64_t last_seq;         /* highest seq taken */
  uint64_t checkpoints;      /* signatures checked */
  uint64_t signed_tree_size; /* events the last valid checkpoint vouches for */
  uint64_t duplicates;       /* lines whose seq was taken before (identical text) */
  uint64_t gaps;             /* missing ranges */
  uint64_t missing;          /* seqs missing in them */
  uint64_t unverifiable;     /* checkpoints after the first gap or a start past seq 1 (no tree to check) */
  uint64_t bad_seq;          /* 0 while intact; else the first seq found bad */
  char reason[512];          /* what is wrong at bad_seq */
  char gap_list[512];        /* "12-40, 90-90" (truncated with "...") */
} journal_chain_result;

/* A chain checked with the Ed25519 public key `public_key_hex` (64 hex digits, as signing.pub holds).
 * Returns 0 and *out, -EINVAL (not a key), -ENOMEM. */
int journal_chain_create(const char *public_key_hex, journal_chain **out, dome_error *err);

/* Take the next line (`length` bytes of canonical JSON, no newline). A seq below the next expected one
 * is a duplicate: identical text is counted, different text is tampering. A seq above it records a gap.
 * Returns 0, or -EBADMSG (not an event line, a checkpoint whose root or signature does not verify, a
 * duplicate seq with other text, time going back): the first such problem stays in the result and
 * later lines are still counted. */
int journal_chain_add(journal_chain *chain, const char *line, size_t length, dome_error *err);

/* The result so far. */
void journal_chain_result_get(const journal_chain *chain, journal_chain_result *result);

void journal_chain_free(journal_chain *chain);

/* ---------------------------------------------------------------------------------------------
 * Time helpers (RFC 3339)
 * ------------------------------------------------------------------------------------------- */

/* Format Unix ns as "2026-11-29T14:27:37.123456789Z" into buffer (>= 32 bytes). Returns buffer. */
const char *journal_format_time(int64_t unix_ns, char *buffer, size_t size);

/* Parse an RFC 3339 time ("2026-11-29T14:27:37Z", fraction and offset optional, or a date
 * "2026-11-29") into Unix ns. Returns 0, or -EINVAL naming the text. */
int journal_parse_time(const char *text, int64_t *unix_ns, dome_error *err);

#endif
