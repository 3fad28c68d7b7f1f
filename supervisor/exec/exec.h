/* supervisor/exec — run one program of an agent under its rules and record the run.
 *
 * exec_run is the one execution pipeline of dome: domed's execute_code (supervisor/domed/execute.c),
 * `dome run` (supervisor/cli/run.c) and the re-run of a recorded execution (supervisor/replay) are
 * adapters around it. It builds the jail (supervisor/jail/jail.h), turns the compiled decision tables
 * into Landlock path rules and cgroup BPF enforcement (supervisor/kernel/kernel.h), plumbs egress for
 * tables that permit network (supervisor/net/net.h), redacts the output as it streams and the result as
 * a whole (supervisor/guards/guard.h), and writes the execution's records — exec.start, exec.jail,
 * exec.output, exec.denial, exec.shadow, exec.redaction, exec.end, in the shapes of docs/journal-format.md —
 * to a sink. It knows nothing of MCP, of the journal's files or of domed: the sink decides where records go.
 *
 * Fail closed: a record the sink refuses stops the execution. exec.start must be durable (sink->sync)
 * before the program starts; a refusal while the program runs cancels it; exec_run reports the refusal
 * and the caller must not answer with the result. */
#ifndef DOME_EXEC_EXEC_H
#define DOME_EXEC_EXEC_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "supervisor/common/error.h"
#include "supervisor/jail/jail.h"

struct dome_rule_tables;
struct dome_net_config;

/* Inputs up to this many bytes each are kept inline in exec.start (docs/journal-format.md). */
#define EXEC_INPUT_INLINE_MAX (64 * 1024)
/* Input bytes one exec.start keeps inline in all; the rest are recorded by digest. */
#define EXEC_INPUTS_INLINE_BUDGET (128 * 1024)
/* Environment values shorter than this are not redacted by the guards (their default min_secret_length):
 * exec.start keeps the agent's short values in `env_short_values`. */
#define EXEC_SECRET_MIN_BYTES 8

/* Who and what the records name: every exec.* record carries exec_id, agent, tool, policy_version and,
 * when set, actas and rerun_of. All borrowed; exec_id, agent and tool required. */
struct exec_identity {
  const char *exec_id;
  const char *agent;          /* the agent's name, or "operator:<uid>" for an operator's `dome run` */
  const char *actas;          /* NULL or "": none */
  const char *tool;           /* "code-sandbox" (domed, replay) or "dome-run" */
  const char *policy_version; /* NULL: "0" (no rules version) */
  const char *rerun_of;       /* the recorded execution a re-run repeats, or NULL */
};

/* The program. Either `language` + `code` (python → /usr/bin/python3 -c CODE, bash → /bin/bash -c CODE,
 * sh → /bin/sh -c CODE, javascript → /usr/bin/node -e CODE: Debian's nodejs) or `argv`; an argv that is
 * exactly one of those forms is recorded as language + code, so the same program has the same exec.start
 * whoever ran it. */
struct exec_program {
  const char *language;
  const char *code;
  size_t code_length;
  char *const *argv; /* NULL-terminated; used when language is NULL */
  const char *stdin_data;
  size_t stdin_length;
  bool has_stdin;
  int stdin_fd; /* >= 0: forwarded (not recorded; exec.start says `stdin_forwarded`); -1: none */
  const struct jail_input_file *files;
  size_t file_count;
  const char *workspace_dir; /* host directory copied in (recorded by path); NULL: none */
  bool copy_out;
  /* Environment: PATH, HOME=/workspace and LANG=C.UTF-8, then `secrets` (the operator's values,
   * redacted from every output, recorded by name only), then `env` (the agent's own values, documented
   * as non-secret, recorded in `env_values` when small). Objects of strings, borrowed, may be NULL. */
  json_t *env;
  json_t *secrets;
};

/* Limits the jail enforces (jail_config's units); 0 takes the jail's default. */
struct exec_limits {
  uint64_t memory_bytes;
  double cpus;
  uint32_t pids;
  uint64_t timeout_ms;
  uint64_t workspace_bytes;
  uint64_t output_bytes; /* kept per stream */
};

/* Kernel enforcement provided by the caller (domed's shared BPF programs and rulesets). */
struct exec_kernel_report {
  const char *level;  /* "none", "reduced", "full" (static) */
  uint32_t ruleset;   /* 0: every connect/bind/send denied */
  const char *reason; /* why ruleset 0: "quota" or "policy" (static, may be NULL) */
  json_t *denials;    /* new reference: array of kernel denial objects, at most DOME_KERNEL_DENIALS_KEPT
                         (supervisor/kernel/kernel.h) */
  uint64_t count;     /* denials seen, kept or not */
  /* Shadow tables in effect: new reference, array of shadow difference objects (dome_denial_shadow_to_json),
   * at most DOME_KERNEL_DENIALS_KEPT; NULL: no shadow tables for this run. */
  json_t *shadows;
  uint64_t shadow_count; /* differences seen, kept or not */
};
struct exec_kernel_provider {
  void *context;
  /* On the jail's cgroup leaf, before the program runs. Returns 0 or -errno (the run fails). */
  int (*attach)(void *context, const struct jail_cgroup *leaf, dome_error *err);
  /* While attached and after the program: the level (for exec.jail) and, with finish, the denials. */
  void (*report)(void *context, bool finish, struct exec_kernel_report *report);
};

/* Egress provided by the caller (domed's configured network path); exec_run calls its hooks. */
struct exec_egress_provider {
  void *context;
  bool wanted; /* a network path is built in the jail's namespace (on_namespaces_ready is called) */
  const char *resolv_conf;
  bool hosts_dns;
  int (*namespaces_ready)(void *context, pid_t child_pid, dome_error *err);
  void (*finish)(void *context);
  void (*report)(void *context, json_t *object); /* adds its members to exec.end and the result */
};

/* Where the records go. */
struct exec_sink {
  void *context;
  /* Append one record (borrowed); *ticket (may be NULL) names it for sync. 0 or -errno: a refusal stops
   * the execution (fail closed). Required. */
  int (*append)(void *context, json_t *record, uint64_t *ticket, dome_error *err);
  /* Every record up to `ticket` durable. NULL: append is durable on return. */
  int (*sync)(void *context, uint64_t ticket, dome_error *err);
  /* Optional (with sync): start making every record up to `ticket` durable without waiting; a later
   * sync(ticket) waits for it. exec.start's sync then runs beside the jail's set-up, and the program is
   * held until it returns (jail_config.before_program). */
  void (*sync_begin)(void *context, uint64_t ticket);
  /* Keep an input too large to be inline (data, its SHA-256 as 64 hex digits). Returns 1 (kept), 0
   * (not kept: recorded by digest with `<member>_stored` false; *err says why) or -errno (the
   * execution fails: nothing runs whose inputs cannot be recorded). NULL: never kept. */
  int (*put_blob)(void *context, const char *data, size_t length, const char *hex, dome_error *err);
  /* A redacted output chunk as recorded in exec.output (UTF-8; stream 1 stdout, 2 stderr). May be NULL. */
  void (*output)(void *context, int stream, const char *text, size_t length);
};

struct exec_request {
  struct exec_identity identity;
  struct exec_program program;
  struct exec_limits limits;
  const char *image;        /* NULL: JAIL_DEFAULT_IMAGE */
  const char *image_digest; /* recorded when known, NULL otherwise */
  const char *image_store;  /* NULL: the jail's default */
  /* Guards: the field classification ("field=CLASS,...", NULL: the guards' default) of the output
   * streams and the result; the guard itself is compiled from it and the secrets unless given. */
  const char *classification;
  struct guard *guard; /* borrowed, may be NULL */
  /* No redaction at all (no guard is compiled, records carry the bytes as written, no exec.redaction):
   * only for a sink that keeps nothing (`dome run --no-journal`). */
  bool unredacted;
  /* Rules: the compiled decision tables (borrowed) enforced by Landlock and by cgroup BPF programs
   * that exec_run loads for this run, and egress when they permit network; or a kernel provider. NULL
   * for both: the jail's baseline (no network, no extra paths). */
  const struct dome_rule_tables *tables;
  /* Shadow tables (borrowed, NULL: none; only with `tables`): installed beside them in the cgroup BPF
   * programs (and the BPF-LSM ones at the full level), not enforced; each access they would decide
   * otherwise is recorded as exec.shadow. Landlock has no shadow mode: at the reduced level only network
   * differences are seen. shadow_version names them in the records (NULL: absent). */
  const struct dome_rule_tables *shadow_tables;
  const char *shadow_version;
  bool allow_degraded;               /* run even when Landlock cannot express a file deny of the tables */
  const struct dome_net_config *net; /* egress mode for tables that permit network; NULL: auto */
  const struct exec_kernel_provider *kernel;
  /* With a kernel provider: the Landlock path rules of the tables it compiled (borrowed; none: the jail's
   * baseline). */
  const struct jail_path_rule *path_rules;
  size_t path_rule_count;
  const struct exec_egress_provider *egress;
  /* The agent's entity data (a Cedar entities JSON array, borrowed) recorded with each exec.denial's
   * request so that `dome rules simulate` can re-evaluate it; NULL: the agent with no attributes. */
  json_t *entities;
  const char *gateway; /* NULL: "Default" */
  /* Readable (eventfd, signalfd, pipe) when the caller cancels; -1: none. Not read. */
  int cancel_fd;
  /* Output records: up to event_bytes (0: 64 KiB) of one stream, out after event_ms (0: 20 ms); a
   * quiet stream releases held-back bytes after quiet_ms (0: 50 ms). */
  size_t event_bytes;
  unsigned event_ms;
  unsigned quiet_ms;
  /* The caller's own set-up once exec.start is durable, before the jail: it may set config's path_rules,
   * resolv_conf and hosts_dns and its egress provider's `wanted`. A failure is recorded in exec.end
   * `error` as a jail failure is. May be NULL. */
  int (*before_jail)(void *context, struct jail_config *config, dome_error *err);
  void *before_jail_context;
  /* The program's bytes as it writes them, before redaction (`dome run`'s terminal); may be NULL. */
  void (*tap)(void *context, int stream, const char *data, size_t length);
  void *tap_context;
  /* Extra limits recorded in the result's `limits` (e.g. mcp_output_bytes): an object, borrowed. */
  json_t *extra_limits;
  /* Where the jail comes from: NULL runs jail_run (a fresh jail); otherwise called instead of jail_run with
   * the complete config, and it must behave as jail_run (domed: a prepared jail of its pool). */
  int (*run_jail)(void *context, const struct jail_config *config, struct jail_result *result,
                  dome_error *err);
  void *run_jail_context;
};

struct exec_outcome {
  bool started;  /* exec.start was durable: the program may have run */
  bool ran;      /* jail_run returned a result */
  bool recorded; /* every record of the execution was appended and is durable */
  /* The redacted result (new reference, NULL unless ran and recorded): stdout, stderr (valid UTF-8),
   * exit_code, signal, timed_out, oom_killed, cancelled, truncated, pids_limited, duration_ms, cpu_ms,
   * peak_memory_bytes, peak_pids, output_paths, env_vars, denials, enforcement, kernel, limits, redactions
   * and the egress provider's members. */
  json_t *result;
  struct jail_result
      jail; /* the jail's own result (raw output, copy-out errors); release with exec_outcome_release */
  const char *kernel_level; /* "none", "reduced", "full" */
  uint64_t denial_count;
  uint64_t shadow_count; /* shadow differences seen (exec.shadow records: at most DOME_KERNEL_DENIALS_KEPT) */
  size_t redaction_count;
  bool degraded; /* Landlock could not express a file deny (allowed by allow_degraded) */
  char degraded_reason[1024];
  unsigned degraded_entries;
  bool egress;              /* an egress path was built */
  uint64_t kernel_start_ns; /* CLOCK_MONOTONIC of the kernel attachment: the base of the denials' offset_ms */
  /* Time spent, microseconds: attaching the kernel layer, the jail apart from that, redacting and
   * recording the end. */
  uint64_t attach_us, jail_us, redact_us;
  /* Time the call waited for exec.start's append and sync (microseconds): before the jail, or, with
   * sink->sync_begin, at the jail's before_program (what remained of the sync after the jail's set-up). */
  uint64_t start_sync_us;
  /* A record the sink refused (0: none): the call must fail closed. */
  int journal_rc;
  dome_error journal_err;
};

/* Run request->program in a fresh jail and record it through `sink`.
 * Order: exec.start (inputs inline within EXEC_INPUT_INLINE_MAX each and EXEC_INPUTS_INLINE_BUDGET in
 * all, else by SHA-256 with the bytes given to sink->put_blob), synced; the jail; exec.jail once its
 * cgroup leaf exists and the kernel layer is attached; exec.output per coalesced redacted chunk;
 * exec.denial per kernel denial kept; exec.shadow per shadow difference kept; exec.redaction per (field,
 * detector) found in the result; exec.end, synced. Returns 0 when the program ran and every record is durable
 * (outcome->result set). Otherwise -errno with *err: -EINVAL (bad request: no program, tables Landlock cannot
 * express without allow_degraded), -ENOMEM, a sink refusal (outcome->journal_rc set, fail closed), a jail_run
 * error (outcome->recorded true when its exec.end with `error` is durable: the caller may answer with that
 * error). `outcome` is always initialised; release it with exec_outcome_release. */
int exec_run(const struct exec_request *request, const struct exec_sink *sink, struct exec_outcome *outcome,
             dome_error *err);

void exec_outcome_release(struct exec_outcome *outcome);

/* The program of an execute_code arguments object, as domed receives it and exec.start records it
 * (docs/journal-format.md): `language`, `code`, `stdin` (string, optional), `files` (object of path →
 * UTF-8 content, optional). Sets program's language, code, stdin and files (program->files points into
 * *files, an array the caller frees, and into `arguments`, which must outlive the program); env, secrets
 * and the other members are left to the caller (stdin_fd is set to -1). Returns 0, -EINVAL (no
 * `language` or `code` string; *err names the member) or -ENOMEM. */
int exec_program_from_arguments(const json_t *arguments, struct exec_program *program,
                                struct jail_input_file **files, dome_error *err);

/* The exec.end of an execution that was allowed but never started (cancelled while it waited, queued_ms
 * milliseconds, for a jail): `started` false, `cancelled` true; no exec.start precedes it. New reference,
 * NULL when out of memory. */
json_t *exec_unstarted_end(const struct exec_identity *identity, uint64_t queued_ms);

/* The interpreter of a language (python, bash, sh, javascript), or NULL. */
const char *exec_interpreter(const char *language);
/* The environment every program starts from, before the secrets and then the agent's own variables
 * override or extend it: NULL-terminated "KEY=VALUE" strings (PATH, HOME=/workspace, LANG=C.UTF-8). A
 * prepared interpreter starts with exactly this. */
extern char *const exec_base_environment[];
/* The option that hands it the program text: "-e" for javascript (node), "-c" for the others. */
const char *exec_code_option(const char *language);

#endif
