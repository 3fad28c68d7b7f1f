/* dome replay library: simulation of candidate Cedar rules against the journal's history
 * (`dome rules simulate`, `dome rules apply --simulate-first`) and replay of jailed executions
 * (`dome audit replay`: timeline, re-run).
 *
 * Both read a journal directory (supervisor/audit/journal.h) through the bounded-memory reader and never
 * change it (a re-run appends its own events through a callback the caller provides). The journal record
 * shapes they read are docs/simulate-replay.md ("Journal records"); authorization follows Cedar
 * "Authorization" (any satisfied forbid denies, else any satisfied permit allows, else deny) through
 * policy/cedar.h with the Dome schema (policy/schema/dome.cedarschema).
 *
 * Functions return 0 (or a count) on success and a negative -errno with *err filled on failure
 * (supervisor/common/error.h). Objects are owned by one thread. */
#ifndef DOME_REPLAY_REPLAY_H
#define DOME_REPLAY_REPLAY_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "supervisor/common/error.h"

/* ---------------------------------------------------------------------------------------------
 * Simulation
 * ------------------------------------------------------------------------------------------- */

/* A candidate policy set, parsed (policy ids from @id annotations, else policy0, policy1, ... as domed
 * names them) and validated in strict mode against the Dome schema. Immutable once built. */
typedef struct simulate_policy simulate_policy;

/* Parse text[0..length) (Cedar syntax, or the JSON policy format when it starts with '{'); `file` names
 * it in diagnostics. validate: also check it against the Dome schema as domed does before activating
 * rules. Returns 0 and *out, or -EINVAL (syntax or validation error: "file:line:col: ..." in *err),
 * -E2BIG (over the Cedar engine's limits), -ENOMEM. */
int replay_simulate_policy_parse(const char *text, size_t length, const char *file, bool validate,
                                 simulate_policy **out, dome_error *err);
/* The same, validated against `schema_text` (the Dome schema with context.input typed from the tool
 * registry: policy/tool_input cedar_tool_input_dome_schema_text) instead of the shipped one when not
 * NULL; a schema that does not parse is -EINVAL ("Dome schema: ..."). */
int replay_simulate_policy_parse_typed(const char *text, size_t length, const char *file, bool validate,
                                       const char *schema_text, simulate_policy **out, dome_error *err);
/* Read `path` and parse it as replay_simulate_policy_parse(_typed). Adds -ENOENT/-EACCES/... of
 * open/read. */
int replay_simulate_policy_load(const char *path, bool validate, simulate_policy **out, dome_error *err);
int replay_simulate_policy_load_typed(const char *path, bool validate, const char *schema_text,
                                      simulate_policy **out, dome_error *err);
void replay_simulate_policy_free(simulate_policy *policy);

/* Counts of one simulation. evaluated = unchanged + allow_to_deny + deny_to_allow. errors counts the
 * evaluated requests whose re-evaluation produced an error (a policy erred, or the recorded request
 * could not be rebuilt: then the new decision is deny, fail closed, as domed decides). */
typedef struct simulate_summary {
  uint64_t evaluated;
  uint64_t unchanged;
  uint64_t allow_to_deny;
  uint64_t deny_to_allow;
  uint64_t errors;
  uint64_t reconstructed;       /* authz.decision events without a `request` member, rebuilt from their ids */
  uint64_t events_read;         /* journal events scanned (all types) */
  uint64_t first_seq, last_seq; /* seq range of the evaluated requests (0 when none) */
} simulate_summary;

/* Called once per changed decision, in seq order, with the DecisionDiff (borrowed; incref to keep):
 *   {"seq", "time", "type", "agent", "actas"?, "exec_id"?, "principal", "action", "resource"
 *    (Cedar uid text, e.g. Dome::MCPTool::"code-sandbox"), "change": "allow_to_deny"|"deny_to_allow",
 *    "reconstructed"?: true,
 *    "old": {"decision", "determining": [ids], "policy_version"},
 *    "new": {"decision", "determining": [ids], "errors": [{"policy", "message"}]}}
 * Return < 0 (with *err) to stop the simulation with that value. */
typedef int (*simulate_diff_fn)(void *context, json_t *diff, dome_error *err);

typedef struct simulate_options {
  const char *journal_dir; /* NULL: JOURNAL_DEFAULT_DIRECTORY */
  int64_t since_ns;        /* only events with time >= since (Unix ns); 0 = no bound */
  int64_t until_ns;        /* only events with time < until; 0 = no bound */
  const char *agent;       /* only this agent's events, or NULL */
  uint64_t from_seq;       /* 0 = from the oldest */
  uint64_t to_seq;         /* 0 = to the newest */
  simulate_diff_fn on_diff;
  void *context;
  /* Up to this many evaluation errors are passed to on_error (first ones, in seq order); may be NULL. */
  void (*on_error)(void *context, uint64_t seq, const char *message);
} simulate_options;

/* Re-evaluate every recorded request of the journal (authz.decision, and exec.denial / exec.access events
 * that carry a `request`) against `policy` and compare with the recorded decision. Streams: memory does
 * not grow with the number of events or diffs. A journal directory that does not exist, or is empty,
 * gives an all-zero summary (not an error). Never writes anything.
 * Returns 0 and *summary, -EBADMSG (damaged journal: the message names segment, offset and seq), -errno
 * on I/O, or what on_diff returned. */
int replay_simulate_journal(const simulate_policy *policy, const simulate_options *options,
                            simulate_summary *summary, dome_error *err);

/* Simulate one event (a journal event object). Returns 1 with *diff (new reference, NULL when the decision
 * is unchanged) and the counters of *summary advanced, 0 when the event is not a recorded request (not
 * counted), or -ENOMEM. *error_message (may be NULL) receives the first evaluation error (static until the
 * next call), or "" when none. */
int replay_simulate_event(const simulate_policy *policy, json_t *event, simulate_summary *summary,
                          json_t **diff, const char **error_message);

/* {"evaluated", "unchanged", "allow_to_deny", "deny_to_allow", "errors", "reconstructed", "events_read"}.
 * New reference (NULL on ENOMEM). */
json_t *replay_simulate_summary_json(const simulate_summary *summary);

/* For `dome rules apply --simulate-first`: simulate candidate rules text against journal_dir (NULL: the
 * default) and return {"summary": {...}, "diffs": [first max_diffs diffs], "diffs_truncated": bool}.
 * The count to compare with --accept-diffs is summary.allow_to_deny + summary.deny_to_allow (every diff,
 * also those beyond max_diffs). Returns 0 and *report (new reference), or the errors of
 * replay_simulate_policy_parse (validate = true) and replay_simulate_journal. */
int replay_simulate_rules_text(const char *text, size_t length, const char *file, const char *journal_dir,
                               size_t max_diffs, json_t **report, dome_error *err);
/* The same, validating against `schema_text` as replay_simulate_policy_parse_typed. */
int replay_simulate_rules_text_typed(const char *text, size_t length, const char *file,
                                     const char *journal_dir, const char *schema_text, size_t max_diffs,
                                     json_t **report, dome_error *err);

/* ---------------------------------------------------------------------------------------------
 * Replay: an execution's timeline
 * ------------------------------------------------------------------------------------------- */

/* One step of an execution, in seq order, passed to replay_timeline_fn (borrowed): the event's members
 * (without `request` and the ids tool/exec_id) plus {"seq", "time", "type", "kind", "offset_ms"} where
 * offset_ms is the event's own offset_ms (output, denial, end) or else ms since its exec.start (0 before).
 * kind: "authorization" (authz.decision), "start" (exec.start: language, image, limits, classification, code,
 * stdin, files, env_names), "jail" (exec.jail), "output" (exec.output: stream, data, bytes), "denial"
 * (exec.denial: hook, object, policy_id, action), "access" (exec.access), "redaction" (exec.redaction:
 * field, detector, count), "end" (exec.end: exit_code, signal, timed_out, oom_killed, duration_ms, cpu_ms,
 * peak_memory_bytes, peak_pids, error?), "rerun" (exec.rerun.result: rerun_exec_id, same, differences),
 * "rerun-start", or "event" (any other type). */
typedef int (*replay_timeline_fn)(void *context, json_t *step, dome_error *err);

/* Walk the journal for exec_id and call fn for each step, in seq order. The steps end at the execution's
 * exec.end; later exec.rerun.result events of re-runs of it (which carry its exec_id) are included.
 * Reads the whole journal once (bounded memory: one event at a time).
 * Returns the number of steps (> 0), -ENOENT (no event with that exec_id, or no journal), -EBADMSG, -errno,
 * or what fn returned. */
int replay_timeline(const char *journal_dir, const char *exec_id, replay_timeline_fn fn, void *context,
                    dome_error *err);

/* The whole timeline as one document: {"exec_id", "agent", "actas"?, "policy_version", "steps": [...]}.
 * Memory grows with the execution's events (bounded by its output quota). Errors as replay_timeline. */
int replay_timeline_json(const char *journal_dir, const char *exec_id, json_t **timeline, dome_error *err);

/* One sandbox session as one timeline (docs/sessions.md): every event that names session_id in its
 * `session_id` member (session.created, session.exec, session.file, session.snapshot, session.forked,
 * session.rules, session.close, session.closed / session.expired) and every event of the calls made in it
 * (matched by `exec_id`: their authz.decision, call.rejected), in seq order, passed to fn as steps of
 * replay_timeline's shape with `exec_id` kept; offset_ms counts from the session's first event; kind:
 * "created", "cell", "file", "snapshot", "forked", "rules", "close", "closed", "authorization", "rejected",
 * "list", "unknown" (a call naming the session that found none: closed, or another agent's) or "event". Reads
 * the journal twice (the decision of a call comes before the event that names the session); memory: one exec
 * id per call, at most 1,000,000 calls (-E2BIG beyond). Returns the number of steps (> 0), -ENOENT (no such
 * session, or no journal), -EINVAL (empty id), -E2BIG, -EBADMSG, -errno, or what fn returned. */
int replay_session_timeline(const char *journal_dir, const char *session_id, replay_timeline_fn fn,
                            void *context, dome_error *err);

/* The session's timeline as one document: {"session_id", "agent" (the first step's), "steps": [...]}.
 * Memory grows with the session's events. Errors as replay_session_timeline. */
int replay_session_timeline_json(const char *journal_dir, const char *session_id, json_t **timeline,
                                 dome_error *err);

/* ---------------------------------------------------------------------------------------------
 * Replay: content-addressed blob store beside the journal (<journal>/blobs/sha256/<2 hex>/<64 hex>)
 * ------------------------------------------------------------------------------------------- */

#define REPLAY_BLOB_INLINE_MAX (64 * 1024) /* inputs up to this many bytes are kept inline in exec.start */
/* Environment values shorter than this are not redacted by the guards (their default min_secret_length) and
 * are recorded in exec.start `env_short_values`; longer values are recorded by name only. */
#define REPLAY_SECRET_MIN_BYTES 8

/* The blobs themselves are read and written through supervisor/blob/blob.h. */

/* ---------------------------------------------------------------------------------------------
 * Replay: re-run
 * ------------------------------------------------------------------------------------------- */

/* The inputs of a recorded execution, read back from its exec.start (and authz.decision) events.
 * json: {"exec_id", "agent", "actas"?, "language", "code", "stdin"?, "files": {path: content},
 *        "env_names": [...], "image", "image_digest"?, "limits": {...}, "classification"?,
 *        "policy_version", "request"? (the recorded authorization request)}
 * plus the recorded outcome {"outcome": {"exit_code", "signal", "timed_out", "oom_killed", "stdout",
 * "stderr", "denials": [{hook, object}], "redactions": [{field, detector, count}]}}.
 * Returns 0 and *inputs (new reference), -ENOENT (unknown exec_id), -ENODATA (the record lacks what a
 * re-run needs: the message names the member, e.g. `code`), -EBADMSG, -errno. */
int replay_inputs(const char *journal_dir, const char *exec_id, json_t **inputs, dome_error *err);

/* Appends one journal event (borrowed). */
typedef int (*replay_append_fn)(void *context, json_t *event, dome_error *err);

typedef struct replay_rerun_options {
  const char *journal_dir;
  const char *exec_id;
  /* Rules to authorize the re-run with; NULL: no re-authorization (the recorded decision stands, as the
   * recorded policy version's text is not in the journal). */
  const simulate_policy *rules;
  const char *image_store; /* NULL: the jail's default */
  /* Journal the re-run: called with each event — exec.rerun.start and the run's own exec.start ... exec.end
   * (exec_id = the new id, rerun_of = the original), then exec.rerun.result {exec_id = the original,
   * rerun_exec_id, same, differences}, which shows in the original's timeline. May be NULL. */
  replay_append_fn append;
  void *context;
} replay_rerun_options;

typedef struct replay_execute_options {
  const char *journal_dir; /* where large inputs are stored as blobs (NULL: always inline) */
  const char *image_store; /* NULL: the jail's default */
  /* Rules whose kernel-level part (fs:*, net:*; with the shipped baseline, policy/compile/compile.h) is
   * compiled for inputs.agent and enforced on the jail's network through cgroup BPF; NULL: none (the jail's
   * empty network namespace alone). The kernel's denials become exec.denial events. */
  const simulate_policy *rules;
  replay_append_fn append; /* may be NULL */
  void *context;
} replay_execute_options;

/* Run `inputs` (the replay_inputs shape; "exec_id", "agent", "policy_version" name the record) in a fresh
 * jail and record it in the documented shape through options->append: exec.start (inputs inline up to
 * REPLAY_BLOB_INLINE_MAX, else as SHA-256 with the content stored by blob_content_put
 * (supervisor/blob/blob.h) under journal_dir), exec.jail, exec.output chunks (redacted, UTF-8, offset_ms),
 * exec.denial, exec.redaction, exec.end. Secrets: the values of inputs.env (an object; only env_names are
 * recorded) are redacted from every output. This is the reference of what domed records
 * (docs/simulate-replay.md); the generator of the tests and
 * --rerun use it. *outcome (new reference, may be NULL): {"exit_code", "signal", "timed_out", "oom_killed",
 * "stdout", "stderr" (redacted), "redactions": [{field, detector, count}], "denials": [{hook, object}],
 * "kernel": "none"|"reduced"|"full"}.
 * Returns 0 (the program ran), -EINVAL (inputs lack language/code, or rules the kernel compiler cannot
 * express: the message names the policy), -EPERM (BPF refused), jail_run's or append's errors. */
int replay_execute(const json_t *inputs, const replay_execute_options *options, json_t **outcome,
                   dome_error *err);

/* Run the recorded inputs again in a fresh jail (supervisor/jail/jail.h) with the recorded image and
 * quotas, redact the output as recorded (supervisor/guards/guard.h), and compare with the recorded
 * outcome. *report (new reference): {"exec_id" (new), "rerun_of", "authorization": {...}?,
 * "differences": [{"what": "exit_code"|"signal"|"timed_out"|"oom_killed"|"stdout"|"stderr"|"denials"|
 * "redactions"|"authorization", "recorded", "rerun"}], "same": bool, "result": {...}}.
 * Returns 0 (ran and compared, whatever the differences), the errors of replay_inputs, or jail_run's
 * errors (the message names the step). */
int replay_rerun(const replay_rerun_options *options, json_t **report, dome_error *err);

#endif
