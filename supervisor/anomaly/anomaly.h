/* dome anomaly detection: Sigma rules (detection and correlation) evaluated over audit journal events.
 *
 * Rules are the SigmaHQ format: ../shared/sigma/specification (sigma-rules-specification.md 2.x,
 * sigma-correlation-rules-specification.md 2.x, sigma-appendix-modifiers.md 2.1), parsed with libyaml.
 * A rule applies to journal events when its logsource is `product: dome` (and `service: audit` when a
 * service is named); rules for other log sources load and never match. Field names are the members of
 * a journal event (docs/journal-format.md), dotted for nesting (`request.context.tool`).
 *
 * Matching: strings are compared case-insensitively (ASCII letters fold; other code points compare
 * byte for byte) unless `cased`; `*` and `?` are wildcards (`?` one code point), `\` escapes them.
 * An event member that is an array matches when one element matches. `re` uses PCRE2.
 *
 * Thread safety: a rule set is immutable once built and may be shared; an engine belongs to one
 * thread. Functions return 0 (or a count) on success and -errno with *err filled on failure. */
#ifndef DOME_ANOMALY_ANOMALY_H
#define DOME_ANOMALY_ANOMALY_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "supervisor/common/error.h"

/* Sigma levels in increasing order; ANOMALY_LEVEL_NONE is below every level (`none`: nothing). */
typedef enum anomaly_level {
  ANOMALY_LEVEL_NONE = 0,
  ANOMALY_LEVEL_INFORMATIONAL,
  ANOMALY_LEVEL_LOW,
  ANOMALY_LEVEL_MEDIUM,
  ANOMALY_LEVEL_HIGH,
  ANOMALY_LEVEL_CRITICAL,
} anomaly_level;

/* "none", "informational", "low", "medium", "high", "critical". */
const char *anomaly_level_name(anomaly_level level);

/* Parse one of the names above. Returns 0 and *level, or -EINVAL naming the text. */
int anomaly_level_parse(const char *text, anomaly_level *level, dome_error *err);

/* Largest rule file read, bytes; a rule set holds at most this many rules. */
#define ANOMALY_MAX_FILE_BYTES (1024 * 1024)
#define ANOMALY_MAX_RULES 20000

/* ---------------------------------------------------------------------------------------------
 * Loading
 * ------------------------------------------------------------------------------------------- */

typedef struct anomaly_loader anomaly_loader;
typedef struct anomaly_rule_set anomaly_rule_set;

/* A new, empty loader, or NULL when out of memory. */
anomaly_loader *anomaly_loader_create(void);

/* Parse `text` (`length` bytes of YAML, one rule a document) named `file_name` in messages. A rule
 * that does not validate is left out and recorded as a problem "FILE:LINE:COL: rule ID: message"
 * (1-based line and column of the offending node; ID `-` when the rule has none).
 * Returns the number of rules added (0 or more). */
int anomaly_loader_add_text(anomaly_loader *loader, const char *file_name, const char *text, size_t length);

/* Add a file, or every `*.yml`/`*.yaml` file beneath a directory (recursively, in name order).
 * Returns the number of rules added, or -errno when the path cannot be read (*err; a file that
 * cannot be read below a directory is a problem, not an error). */
int anomaly_loader_add_path(anomaly_loader *loader, const char *path, dome_error *err);

/* The problems found so far: a JSON array of strings as above (borrowed). */
const json_t *anomaly_loader_problems(const anomaly_loader *loader);

/* Resolve the correlation rules' references (by id or name; an unknown reference, a duplicate id and
 * a cycle are problems) and build the set. Returns 0 and *out when there is no problem at all, else
 * -EINVAL with the first problem in *err (all of them stay in anomaly_loader_problems). The loader
 * stays valid and is freed by anomaly_loader_free. */
int anomaly_loader_finish(anomaly_loader *loader, anomaly_rule_set **out, dome_error *err);

void anomaly_loader_free(anomaly_loader *loader);

/* Load `path` (file or directory) into *out: anomaly_loader_add_path and _finish. Returns 0, or
 * -EINVAL with every problem in *problems (new reference, may be NULL) and the first in *err. */
int anomaly_rule_set_load(const char *path, anomaly_rule_set **out, json_t **problems, dome_error *err);

/* Rules in the set, and those whose logsource is dome's audit journal (the others never match). */
size_t anomaly_rule_set_count(const anomaly_rule_set *set);
size_t anomaly_rule_set_active_count(const anomaly_rule_set *set);

/* SHA-256 (hex, 64 digits) over the loaded files' names and bytes in load order. */
const char *anomaly_rule_set_digest(const anomaly_rule_set *set);

/* New JSON array: one {"id","title","level","status","tags","kind","active"} a rule, kind being
 * "detection" or the correlation type. */
json_t *anomaly_rule_set_describe(const anomaly_rule_set *set);

/* The file the rule with `id` was read from, as named to the loader (borrowed, valid while the set is),
 * or NULL when no rule of the set has that id. */
const char *anomaly_rule_set_rule_file(const anomaly_rule_set *set, const char *id);

/* Shared ownership: a set may be used by several engines; the last release frees it. */
anomaly_rule_set *anomaly_rule_set_retain(anomaly_rule_set *set);
void anomaly_rule_set_release(anomaly_rule_set *set);

/* ---------------------------------------------------------------------------------------------
 * Evaluation
 * ------------------------------------------------------------------------------------------- */

typedef struct anomaly_engine anomaly_engine;

typedef struct anomaly_engine_options {
  /* Correlation groups kept per correlation rule (default 100000); a new group beyond it is refused
   * (counted in groups_refused) after the groups older than their timespan were evicted. */
  size_t max_groups_per_rule;
} anomaly_engine_options;

typedef struct anomaly_engine_stats {
  uint64_t events;         /* events evaluated */
  uint64_t matches;        /* detection rule matches */
  uint64_t alerts;         /* alerts handed to the callback */
  uint64_t groups;         /* correlation groups held now */
  uint64_t groups_evicted; /* groups removed after their timespan passed */
  uint64_t groups_refused; /* new groups refused at max_groups_per_rule */
  uint64_t state_bytes;    /* bytes held by correlation state now */
} anomaly_engine_stats;

/* An alert (borrowed: valid during the call): {"type": "anomaly.alert", "rule_id", "title", "level",
 * "tags", "agent" (the group-by `agent` of a correlation, the event's `agent` for a detection rule;
 * absent when neither has one), "seqs" (the seqs of the events that made it fire, at most 64, oldest
 * first), "exec_ids" (their distinct exec_id members, at most 16), "correlation" ({"type", "value",
 * "group", "timespan_s"}; {"type": "detection", "value": 1} for a detection rule)}. */
typedef void (*anomaly_alert_callback)(const json_t *alert, void *context);

/* An engine over `set` (retained). options may be NULL. Returns 0 and *out, or -ENOMEM. */
int anomaly_engine_create(anomaly_rule_set *set, const anomaly_engine_options *options, anomaly_engine **out,
                          dome_error *err);

/* Evaluate one journal event (`seq`, `time_ns` Unix ns: the journal's members). Events whose type
 * starts with `anomaly.` are skipped (alerts are not evaluated again). Times that go backwards within a
 * group count as the group's latest time. Every alert is handed to `callback` before the call returns.
 * Returns the number of alerts. */
int anomaly_engine_process(anomaly_engine *engine, const json_t *event, uint64_t seq, int64_t time_ns,
                           anomaly_alert_callback callback, void *context);

void anomaly_engine_stats_get(const anomaly_engine *engine, anomaly_engine_stats *stats);

void anomaly_engine_free(anomaly_engine *engine);

/* Handing events to a detection thread without allocating on the journalling thread in the steady state.
 * anomaly_event_text: `event`'s compact JSON text (RFC 8259), *length bytes, not NUL-terminated, in a
 * buffer the calling thread keeps (valid until its next call; freed when the thread ends). NULL when out
 * of memory or the text exceeds 4 MiB. */
const char *anomaly_event_text(const json_t *event, size_t *length);

/* A block of text in a pool of spare blocks. The pool is not locked: use it under the queue's lock. */
typedef struct anomaly_block {
  char *data;
  size_t length, capacity; /* bytes */
} anomaly_block;

typedef struct anomaly_block_pool {
  anomaly_block *spare;
  size_t count;
} anomaly_block_pool;

#define ANOMALY_BLOCKS_KEPT 4096          /* spare blocks a pool keeps at most */
#define ANOMALY_BLOCK_KEPT_MAX (64 << 10) /* larger blocks are freed, not kept (bytes) */

/* Copy `length` bytes of `text` into a block taken from the pool (grown when too small; a new one when
 * the pool is empty). Returns 0, or -ENOMEM with *block empty. */
int anomaly_block_fill(anomaly_block_pool *pool, const char *text, size_t length, anomaly_block *block);

/* Give a block back to the pool (freed when the pool is full or the block is over
 * ANOMALY_BLOCK_KEPT_MAX); *block is emptied. */
void anomaly_block_release(anomaly_block_pool *pool, anomaly_block *block);

/* Free every spare block. */
void anomaly_block_pool_clear(anomaly_block_pool *pool);

#endif
