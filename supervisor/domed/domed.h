/* domed's internal interfaces: configuration, the daemon state, and the seams between the MCP
 * front end and the engines (Cedar authorization, jail execution, guards, journal). */
#ifndef DOME_DOMED_DOMED_H
#define DOME_DOMED_DOMED_H

#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include "supervisor/anomaly/anomaly.h"
#include "supervisor/common/error.h"
#include "supervisor/console/console.h"
#include "supervisor/control/control.h"
#include "supervisor/mcp/mcp.h"

#define DOMED_BUILTIN_TOOL "code-sandbox" /* Dome::MCPTool of the built-in backend */
#define DOMED_BUILTIN_CAPABILITY "code-execution"
#define DOMED_EXECUTE_TOOL "execute_code" /* its MCP tool */

/* ---- configuration (config.c) ---- */

struct domed_config {
  char listen[256];           /* listen = 127.0.0.1:8443 */
  char path[128];             /* path = /mcp */
  char state_dir[1024];       /* state_dir = /var/lib/dome */
  char journal_dir[1024];     /* journal_dir = /var/lib/dome/journal */
  char control_socket[108];   /* control_socket = /run/dome/control.sock */
  char control_group[64];     /* control_group = (none) */
  char tls_cert[1024];        /* tls_cert = (none): PEM file */
  char tls_key[1024];         /* tls_key = (none): PEM file */
  char allowed_origins[1024]; /* allowed_origins = (loopback): comma-separated exact origins */
  char image[64];             /* image = host-ro */
  unsigned max_jails;         /* max_jails = number of CPUs: concurrent executions */
  unsigned pool_size;         /* pool_size = number of CPUs: prepared jails kept per limits class of `image`
                               * (0: none, every call builds its jail; at most DOMED_POOL_SIZE_MAX) */
  unsigned session_pool_size; /* session_pool_size = 1: prepared session jails (ipykernel imported) kept per
                               * session limits class, made from the first create_session of that class
                               * (0: none, every session starts its jail and kernel; at most
                               * DOMED_POOL_SIZE_MAX) */
  unsigned max_queue;         /* max_queue = 64: calls waiting for a jail before "overloaded" */
  unsigned queue_timeout_s;   /* queue_timeout_s = 30 */
  size_t max_body_bytes;      /* max_body = 4M */
  unsigned max_batch;         /* max_batch = 32: messages of one JSON-RPC batch (MCP 2025-03-26 sessions) */
  size_t max_batch_bytes;     /* max_batch_bytes = 1M: body bytes of one batch (at most max_body) */
  unsigned http_timeout_s;    /* http_timeout_s = 30: idle connection timeout */
  unsigned max_connections;   /* max_connections = 1024 */
  unsigned max_sessions;      /* max_sessions = 4096 */
  unsigned session_idle_s;    /* session_idle_s = 3600 */
  unsigned max_sessions_per_agent; /* max_sessions_per_agent = 16: an agent's live sessions; its oldest idle
                                    * one is evicted for a new one (journalled session.closed) */
  unsigned max_queue_per_agent;    /* max_queue_per_agent = 16: calls of one agent waiting for a jail */
  unsigned session_rate_per_agent; /* session_rate_per_agent = 20: initialize per agent and second */
  int64_t token_ttl_s;             /* token_ttl = (none): lifetime of tokens issued without --ttl, seconds */
  char metrics_token[256];         /* metrics_token = (none): bearer token /metrics requires */
  char metrics_listen[256];        /* metrics_listen = (none): ADDR:PORT serving /metrics and /healthz only */
  char console_listen[256];        /* console_listen = (none): ADDR:PORT serving /console only (it is also on
                                      listen) */
  unsigned console_idle_s;         /* console_idle_s = 900: a console login ends after this long unused */
  char allowed_hosts[1024];  /* allowed_hosts = (loopback + listen address): comma-separated Host values */
  unsigned shutdown_grace_s; /* shutdown_grace_s = 10: running jails may finish, then are killed */
  /* journal_commit_window_ms = 2: an event no call waits for yet (an execution's output, denial and
   * redaction events before its end) is made durable by the journal's writer at the latest this long
   * after it was appended; decisions, exec.start and exec.end are synced by their call. Larger windows
   * save background fdatasyncs but leave more for the call's own sync before it answers: measured slower
   * per call (docs/domed.md). */
  unsigned journal_commit_window_ms;
  char net_mode[16]; /* net_mode = auto: egress path of jails, auto | user | routed | ipvlan | macvlan
                      * (docs/networking.md) */
  /* ipvlan / macvlan modes: net_uplink = IFNAME (the host interface jails join), net_uplink_pool =
   * A.B.C.D/LEN (addresses for jails on its network, dome's alone), net_uplink_gateway = A.B.C.D (router
   * for permitted destinations off that network; "" = none) */
  char net_uplink[16];
  char net_uplink_pool[24];
  char net_uplink_gateway[16];
  bool net_tcp_relay;          /* net_tcp_relay = false: user mode carries TCP through the splice relay */
  uint64_t egress_quota_bytes; /* egress_quota = 0: bytes a jail may send and receive (0: no quota) */
  unsigned gateway_timeout_ms; /* gateway_timeout_ms = 30000: a gateway backend's answer to one request */
  unsigned gateway_refresh_s;  /* gateway_refresh_s = 30: a backend's tools/list is reused this long */
  uint64_t blob_quota_bytes;   /* blob_quota = 1G: bytes of all blobs beside the journal (0: no quota) */
  /* journal_retention = 0 (bytes, 0: none) and journal_retention_age_s = 0 (0: none): sealed segments
   * are removed oldest first beyond either, and the blobs only they could name with them */
  uint64_t journal_retention_bytes;
  unsigned journal_retention_age_s;
  /* What an agent reads of an execution: mcp_output_limit = 64K: bytes of each output stream in the MCP
   * result (the rest is replaced by a marker; a capability's quota may set its own); output_event_bytes =
   * 64K and output_event_ms = 20: redacted output of one stream is journalled (exec.output) and sent as
   * progress in pieces of at most this many bytes, at most this long after it was written; a stream's
   * held-back bytes are released progress_quiet_ms = 50 after the program last wrote to it. */
  uint64_t mcp_output_limit_bytes;
  uint64_t output_event_bytes;
  unsigned output_event_ms;
  unsigned progress_quiet_ms;
  /* Resumable SSE streams (docs/domed.md "Resuming a stream"): sse_replay_bytes = 1M of events kept per
   * session for Last-Event-ID; sse_retry_ms = 500: the retry field of every priming event;
   * sse_resume_grace_ms = 1500: how long the calls of a stream whose client went away keep running for
   * it to resume before they are cancelled; sse_close_after_ms = 0: a tools/call stream of a 2025-11-25
   * session whose calls run this long is closed for the client to resume (0: never). */
  uint64_t sse_replay_bytes;
  unsigned sse_retry_ms;
  unsigned sse_resume_grace_ms;
  unsigned sse_close_after_ms;
  /* MCP tasks: task_ttl_max_s = 3600: the longest TTL a task gets (its result is kept that long);
   * max_tasks_per_agent = 16: tasks one agent holds until their TTL passes. A capability's quota may
   * set lower ones (dome quotas set --task-ttl --tasks). */
  unsigned task_ttl_max_s;
  unsigned max_tasks_per_agent;
  char config_file[1024]; /* the file read, "" for embedded defaults */

  /* anomaly_rules = (none): directory of Sigma rules evaluated live (docs/anomaly-detection.md);
   * anomaly_suspend_level = critical: alerts at or above it suspend their agent (none: never). */
  char anomaly_rules[1024];
  char anomaly_suspend_level[16];
  unsigned anomaly_risk_window_s; /* anomaly_risk_window_s = 3600: the alerts context.risk counts */

  /* Fleet mode (docs/fleet.md), off while fleet_url is empty: fleet_url = nats://HOST:PORT[,...] (the
   * NATS servers), fleet_name = default (stream DOME_<fleet>_AUDIT, buckets DOME_<fleet>_*), node_name =
   * (the host name: this node's subject token and message ids), fleet_creds = (none): NATS credentials
   * file, fleet_tls_ca / fleet_tls_cert / fleet_tls_key = (none): PEM files for TLS to NATS,
   * fleet_stale_s = 30: how long a node cut off from NATS serves from its local copy before it refuses
   * calls (0: for ever), fleet_replicas = 3: replicas of the stream and buckets this node creates. */
  char fleet_url[1024];
  char fleet_name[64];
  char node_name[64];
  char fleet_creds[1024];
  char fleet_tls_ca[1024];
  char fleet_tls_cert[1024];
  char fleet_tls_key[1024];
  unsigned fleet_stale_s;
  unsigned fleet_replicas;
};

void domed_config_defaults(struct domed_config *config);
/* Read a key = value file (see docs/domed.md). Returns 0 or -EINVAL with "FILE:LINE: ..." in *err. */
int domed_config_load(struct domed_config *config, const char *path, dome_error *err);
/* Set one key (shared by the file and the command-line flags). -EINVAL naming the key. */
int domed_config_set(struct domed_config *config, const char *key, const char *value, dome_error *err);

/* ---- MCP tasks (tasks.c): the mcp_handlers task_event, task_save, task_delete and task_limits, and
 * the records taken back at startup (returns how many) ---- */
void domed_task_event(void *context, const char *type, const char *agent, const char *gateway,
                      const char *task_id, const char *exec_id, const char *status, const char *reason);
int domed_task_save(void *context, const char *task_id, const json_t *record, dome_error *err);
void domed_task_delete(void *context, const char *task_id);
void domed_task_limits(void *context, const mcp_identity *identity, const char *tool, uint64_t *max_ttl_ms,
                       unsigned *max_tasks);
struct domed;
int domed_tasks_restore(struct domed *domed);

/* ---- logging (main.c): structured key=value lines on stderr ---- */
void domed_log(const char *level, const char *component, const char *format, ...)
    __attribute__((format(printf, 3, 4)));

/* ---- active rules ---- */

struct domed_rules {
  atomic_int refs;
  int version; /* 0: no rules applied (every request is denied) */
  char name[128];
  void *policies;        /* engine-specific compiled policy set (NULL for version 0) */
  void *kernel_policies; /* the baseline + these rules, for the Cedar -> kernel compiler (NULL: none) */
};

/* ---- metrics (metrics.c) ---- */

struct domed_metrics {
  atomic_uint_fast64_t executions;       /* jails run */
  atomic_uint_fast64_t execution_errors; /* jails that failed to start */
  atomic_uint_fast64_t timeouts, oom_kills, cancellations;
  atomic_uint_fast64_t decisions_allow, decisions_deny;
  atomic_uint_fast64_t redactions;
  atomic_uint_fast64_t denials_kernel;
  atomic_uint_fast64_t shadows_kernel; /* kernel shadow differences (exec.shadow), kept or not */
  atomic_uint_fast64_t overloaded;
  atomic_uint_fast64_t journal_refused; /* events the journal could not take or make durable */
  atomic_uint_fast64_t digest_only;     /* members recorded by digest whose bytes the blob store refused */
  atomic_uint_fast64_t refusals;        /* auth.failed and session.refused, journalled or summarized */
  atomic_uint_fast64_t calls_rejected;  /* call.rejected: unknown tool, invalid arguments */
  atomic_uint_fast64_t shadow_flips[2]; /* authz.shadow: [0] allow->deny, [1] deny->allow */
  atomic_uint_fast64_t queue_cancelled; /* calls cancelled while waiting for a jail */
  atomic_uint_fast64_t active_jails;
  atomic_uint_fast64_t queued;
  /* tools/call latency histogram, milliseconds: buckets <= 5,10,25,50,100,250,500,1000,2500,5000,10000,+Inf
   */
  atomic_uint_fast64_t latency_buckets[12];
  atomic_uint_fast64_t latency_sum_us;
  atomic_uint_fast64_t latency_count;
  /* time spent outside the program (dome overhead) per call, summed */
  atomic_uint_fast64_t overhead_sum_us;
  /* where a call's time goes, summed over calls, microseconds (DOMED_PHASE_*) */
  atomic_uint_fast64_t phase_sum_us[9]; /* DOMED_PHASES */
  atomic_uint_fast64_t start_sync_us;   /* exec.start's appends and syncs, microseconds */
};

enum {
  DOMED_PHASE_AUTHORIZE,  /* token, Cedar, journal append of the decision */
  DOMED_PHASE_QUEUE,      /* waiting for a jail slot */
  DOMED_PHASE_GUARD,      /* compiled guard lookup (or compile) */
  DOMED_PHASE_JAIL_SETUP, /* jail_run minus the program's own duration: namespaces, cgroup, mounts, teardown
                           */
  DOMED_PHASE_PROGRAM,    /* the program (exec to end) */
  DOMED_PHASE_REDACT,     /* guards over the result */
  DOMED_PHASE_JOURNAL,    /* journal_sync of the call's events */
  DOMED_PHASE_HTTP,       /* the POST's headers received -> the call's thread runs (body, token, session) */
  DOMED_PHASE_KERNEL,     /* cgroup BPF attach to the jail's leaf and collection of its denials */
  DOMED_PHASES
};
_Static_assert(DOMED_PHASES == sizeof((struct domed_metrics *)0)->phase_sum_us /
                                   sizeof((struct domed_metrics *)0)->phase_sum_us[0],
               "one sum per phase");
static inline uint64_t domed_now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

void domed_metrics_observe_call(struct domed_metrics *metrics, uint64_t total_us, uint64_t overhead_us);

/* ---- the daemon ---- */

#define DOMED_POOL_SIZE_MAX 64u
struct domed_jail_pool;

struct fleet;

struct domed {
  struct domed_config config;
  control_store *store;
  mcp_server *mcp;
  control_server *control;
  void *journal; /* struct journal *; replaced under journal_lock (write) when it failed and reopens */
  void *blobs;   /* blob_store * beside the journal */
  pthread_rwlock_t journal_lock;
  uint64_t journal_generation; /* incremented by every reopen (journal_lock held for writing) */
  int64_t journal_retry_ns;    /* a failed journal is reopened at most once a second (journal_lock) */
  void *engine;                /* engine-wide state (schema) of the authorizer */
  void *kernel;                /* struct domed_kernel *: BPF enforcement, NULL when unavailable */
  void *gateways;              /* gateway_registry *: clients of external MCP backends (gateway.h) */
  pthread_mutex_t rules_lock;
  struct domed_rules *rules;   /* the active version; swapped atomically under rules_lock */
  struct domed_shadow *shadow; /* the shadow version beside it, or NULL (shadow.c; its own lock) */
  /* concurrency cap on jails */
  pthread_mutex_t slots_lock;
  pthread_cond_t slots_cond;
  unsigned jails_running, jails_waiting;
  atomic_bool stopping;
  struct domed_metrics metrics;
  struct domed_anomaly *anomaly;              /* live anomaly detection (anomaly.c), NULL before start */
  struct domed_risk *risk;                    /* the agents' recent alerts (risk.c), NULL before start */
  struct domed_jail_pool *jail_pool;          /* prepared jails (jail_pool.c), NULL when pool_size is 0 */
  struct console_sessions *console_sessions;  /* operator logins (console.c) */
  struct console_login_limit *console_logins; /* failed logins per source (console.c) */
  struct domed_console_index *console_index;  /* the executions search's index (console_index.c) */
  struct domed_console_overview *console_overview; /* 24 h of per-minute metrics (console_overview.c) */
  struct fleet *fleet;                             /* fleet mode (fleet.c), else NULL */
  uint64_t journal_closed_seq; /* last seq of the journal when it closed (its final checkpoint) */
};

/* ---- jail_pool.c: warm jails, prepared before their call (supervisor/jail's jail_prepare) ---- */

struct jail_config;
struct jail_result;
/* The program of every session's jail (session_launcher_program with jail_python_waiting_program), made once;
 * NULL when out of memory. A prepared session jail of the pool runs it in advance. */
const char *domed_session_program(void);

/* Start the refill thread (none when pool_size is 0). Returns 0, or -errno (-ENOMEM, pthread_create). */
int domed_jail_pool_start(struct domed *domed, dome_error *err);
/* Discard every ready jail, wait for the jails taken from the pool to finish, join the thread, free. */
void domed_jail_pool_stop(struct domed *domed);
/* Every jail prepared so far is stale (an administrative change: rules, quotas, agents, tools): discard
 * the ready ones now; a jail being prepared meanwhile is discarded when it is done. */
void domed_jail_pool_invalidate(struct domed *domed);
/* Run `config` as jail_run would: in a ready prepared jail of its limits class (prepared under the same
 * rules_version and pool generation), else at once in a fresh jail; calls with an egress hook or a
 * resolver always run fresh. Returns as jail_run; result->prepared tells which. */
int domed_jail_pool_run(struct domed *domed, int rules_version, const struct jail_config *config,
                        struct jail_result *result, dome_error *err);
/* The dome_jail_pool_* lines of /metrics. */
void domed_jail_pool_metrics(struct domed *domed, FILE *out);
/* {pool_size, ready, hits, misses, discards, refills, refill_failures, refill_seconds} for `status`
 * (dome doctor). New reference. */
json_t *domed_jail_pool_status(struct domed *domed);

/* ---- answered.c: what a tools/call's thread does once its answer is out ---- */

/* From now until domed_after_answer_run, the jails this thread runs (with a config passed through
 * domed_after_answer_defer_jails) keep their cgroup leaves for the thread to remove after the answer.
 * Called at the start of a tools/call; runs what an earlier call of the thread left, if anything. */
void domed_after_answer_open(void);
/* Set config's defer_teardown when this thread's list is open (domed_after_answer_open); else nothing. */
void domed_after_answer_defer_jails(struct jail_config *config);
/* Finish every teardown this thread kept (jail_teardown_finish: the leaves removed; a failure is logged,
 * the call already answered) and close the list. The mcp call_answered handler calls it. */
void domed_after_answer_run(void);

/* ---- console.c: /console and its API (docs/console.md) ---- */

/* The mcp_handlers console handler: the built-in files, and the JSON API for logged-in operators. */
int domed_console(void *context, const mcp_console_request *request, mcp_console_reply *reply);
/* Make the session table (console_idle_s) and the login limit. -ENOMEM. */
int domed_console_start(struct domed *domed, dome_error *err);
void domed_console_stop(struct domed *domed);
/* console_index.c: the ends of executions for the console's search, newest DOMED_CONSOLE_INDEX_MAX
 * kept in memory; older ones are found by a scan of the journal. */
#define DOMED_CONSOLE_INDEX_MAX 200000
struct domed_execution_query {
  const char *agent;          /* exact, or NULL */
  int64_t since_ns, until_ns; /* Unix ns; 0: no bound */
  bool exit_given, nonzero;   /* exit status: exit_code, or any but 0 with nonzero */
  int64_t exit_code;
  bool denials, redactions; /* at least one kernel denial / redaction */
  size_t limit;             /* most results, newest first */
};
/* Read what the journal holds since the last search into the index, then *found (new reference): an
 * array of {exec_id, agent, tool, seq, time, exit_code?, duration_ms, denials, redactions}, newest
 * first. Returns 0, or the journal reader's -errno with *err. */
int domed_console_index_search(struct domed *domed, const struct domed_execution_query *query, json_t **found,
                               dome_error *err);
/* The last hour of executions per agent, from the index: {agent: {per_minute: [60 counts, oldest
 * first, the last the current minute], executions, failed (exit not 0 or no exit), denials, redactions,
 * calls_per_minute: [60 Cedar decisions on mcp:call, as per_minute], allow, deny (those decisions)}}
 * (new reference), or NULL with *err. */
json_t *domed_console_index_activity(struct domed *domed, int64_t now_ns, dome_error *err);
/* The anomaly alerts the index keeps, for the Anomalies view (supervisor/console alerts.c): read what
 * the journal holds since into the index, then console_alerts_list's answer (new reference), or NULL
 * with the journal reader's error in *err. */
json_t *domed_console_index_alerts(struct domed *domed, const struct console_alert_query *query,
                                   dome_error *err);
/* The kept alert `seq` with its response in *alert (new reference), or NULL when the index does not
 * hold it. Returns 0, or the journal reader's -errno with *err. */
int domed_console_index_alert(struct domed *domed, uint64_t seq, json_t **alert, dome_error *err);
/* Make the index and start reading the existing journal into it in the background. -ENOMEM. */
int domed_console_index_start(struct domed *domed, dome_error *err);
void domed_console_index_stop(struct domed *domed);
/* console_overview.c: the last 24 h of /metrics counters, one sample a minute. {minute_s, since,
 * samples: [{time (Unix s, the minute's end), calls, allow, deny, denials, redactions, p50_ms, p99_ms
 * (bucket upper bounds, null without calls), partial? (the minute in progress)}], totals} (new
 * reference). */
json_t *domed_console_overview(struct domed *domed);
/* Start the sampling thread. -ENOMEM. */
int domed_console_overview_start(struct domed *domed, dome_error *err);
void domed_console_overview_stop(struct domed *domed);
/* End every console session of `operator_name` (revoked). */
void domed_console_logout_operator(struct domed *domed, const char *operator_name);

/* ---- fleet.c: fleet mode on NATS JetStream (supervisor/fleet/fleet.h, docs/fleet.md) ---- */

/* With config.fleet_url set: connect, replicate the control store through the fleet's buckets and
 * publish the journal to its audit stream (waiting at most 5 s for the first replay of the buckets).
 * Without it: nothing (a single node). Returns 0, or -EINVAL (a fleet key) / -errno with *err. */
int domed_fleet_start(struct domed *domed, dome_error *err);
void domed_fleet_stop(struct domed *domed);
/* 0 when this node may serve a request now (always outside fleet mode); else -EPERM with *err saying
 * why (cut off for longer than fleet_stale_s, or still replaying the control plane). */
int domed_fleet_serving(struct domed *domed, dome_error *err);
/* Load the store's active rules version and install it (no rules: every call is denied). */
void domed_rules_load_active(struct domed *domed);

/* ---- anomaly.c: Sigma rules over every journalled event (docs/anomaly-detection.md) ---- */

/* Start the detection thread and apply config.anomaly_rules (a set with a problem is logged and not
 * applied). Returns 0, or -EINVAL (anomaly_suspend_level) / -ENOMEM / -EAGAIN. */
int domed_anomaly_start(struct domed *domed, dome_error *err);
/* Stop the thread (the queued events are evaluated first) and free. */
void domed_anomaly_stop(struct domed *domed);
/* Queue a copy of an event the journal accepted as `seq`; never blocks on detection (a full queue drops
 * it, counted and journalled as anomaly.behind). Events of type anomaly.* are not offered. */
void domed_anomaly_offer(struct domed *domed, const json_t *event, uint64_t seq);
/* SIGHUP: re-read `directory` (the previous set stays when it has a problem). */
void domed_anomaly_reload(struct domed *domed, const char *directory);
/* anomalies.apply {directory} / anomalies.list. */
json_t *domed_anomaly_command(struct domed *domed, const struct control_request *request, const char *verb,
                              dome_error *err);
/* The /metrics lines of detection (evaluated, dropped, suspensions, alerts by rule and level). */
void domed_anomaly_metrics(struct domed *domed, FILE *out);
/* The applied set's rule `rule_id`: {id, title, level, status, tags, kind, active, alerts, file, source
 * (the file's text as on disk now, null when it cannot be read), set_digest} (new reference), or NULL
 * when the applied set has no such rule (or no set is applied). */
json_t *domed_anomaly_rule(struct domed *domed, const char *rule_id);

/* ---- risk.c: an agent's recent anomaly alerts, as Cedar's context.risk ---- */

/* A record of alerts counted over the last `window_s` seconds. NULL when out of memory. */
struct domed_risk *domed_risk_create(unsigned window_s);
void domed_risk_free(struct domed_risk *risk);
/* An alert of `level` named `agent` now (CLOCK_MONOTONIC). risk NULL or agent NULL/"": nothing. */
void domed_risk_note(struct domed_risk *risk, const char *agent, anomaly_level level);
/* Close the agent's alerts (`dome agents resume`): its risk is none again. */
void domed_risk_clear(struct domed_risk *risk, const char *agent);
/* context.risk of `agent`: {"alerts": Long (alerts within the window, at least 64 once 64 are kept),
 * "max_level": "none"|"informational"|"low"|"medium"|"high"|"critical"}; {0, "none"} when risk is NULL.
 * NULL only when out of memory. */
json_t *domed_risk_context(struct domed_risk *risk, const char *agent);

/* Acquire/release the active rules (a reference; running executions keep their version). */
struct domed_rules *domed_rules_acquire(struct domed *domed);
void domed_rules_release(struct domed_rules *rules);
/* Replace the active rules (takes the reference). */
void domed_rules_install(struct domed *domed, struct domed_rules *rules);

/* ---- shadow.c: shadow rules beside the active ones ---- */
struct domed_shadow;
struct domed_principal;
struct domed_decision;
/* Make `rules` (takes the reference; version and name set) the shadow version, replacing any other (its
 * counts start again). -ENOMEM. */
int domed_shadow_install(struct domed *domed, struct domed_rules *rules, dome_error *err);
/* A reference to the shadow version, or NULL when there is none (release with domed_rules_release). */
struct domed_rules *domed_shadow_acquire(struct domed *domed);
/* Record one request evaluated under both versions: a flip is journalled (authz.shadow) and counted.
 * shadow_rules: what domed_shadow_acquire gave; counts are kept only while it is still the shadow. */
void domed_shadow_observe(struct domed *domed, struct domed_rules *shadow_rules,
                          const struct domed_principal *principal, const char *action, const char *resource,
                          const char *mcp_tool_name, const struct domed_decision *active, bool shadow_allow,
                          json_t *shadow_determining, bool shadow_errors);
/* The summary since the shadow was applied ({shadow: {name, version, since}, summary: {evaluated,
 * unchanged, allow_to_deny, deny_to_allow, errors}, by_tool, by_agent, by_policy, diffs: [the last 100
 * flips, in the DecisionDiff shape], diffs_truncated}), or NULL when there is none. New reference. */
json_t *domed_shadow_report(struct domed *domed);
/* End the shadow and hand its rules over (a reference), when there is one and `name` (NULL: any) is its
 * name; else NULL and nothing changes. */
struct domed_rules *domed_shadow_take(struct domed *domed, const char *name);
/* Drop any shadow (shutdown). */
void domed_shadow_cleanup(struct domed *domed);

/* ---- engine seams: authz.c / execute.c / audit.c (or pending.c while an engine is not built) ---- */

/* Engine-wide setup (schema). Returns 0 or -errno. */
int domed_authz_init(struct domed *domed, dome_error *err);
void domed_authz_cleanup(struct domed *domed);
/* Check rules text against the Dome schema and compile it. Returns 0 and *rules (refs 1, version 0,
 * name "") or -EINVAL with file:line:col / policy id in *err. */
int domed_rules_compile(struct domed *domed, const char *text, const char *file, struct domed_rules **rules,
                        dome_error *err);
/* The same for rules already validated when applied (the active version at start-up, before the gateway
 * backends that type their tools' arguments are reachable): parsed and compiled, not validated again. */
int domed_rules_load(struct domed *domed, const char *text, const char *file, struct domed_rules **rules,
                     dome_error *err);
void domed_rules_free_policies(struct domed_rules *rules);

struct domed_decision {
  bool allow;
  json_t *determining; /* array of policy ids (new reference) */
  json_t *errors;      /* array of {policy, message} */
  int policy_version;
  char policy_name[128];
  /* The request exactly as handed to the engine, for `dome rules simulate` (docs/simulate-replay.md):
   * {principal, action, resource: {type, id}, context, entities}; NULL when it could not be built. */
  json_t *request;
};

struct domed_principal {
  const char *agent;
  json_t *capabilities; /* array of strings */
  const char *gateway;
  const char *actas; /* "" or NULL when none */
  json_t *grants;    /* the gateways granted (the principal's Cedar parents); NULL: [gateway] */
};

/* Authorize `action` ("mcp:call", "mcp:discover") of principal on Dome::MCPTool::"tool" with
 * context {tool: mcp_tool_name, arguments: canonical JSON text?, actas?}. Never fails open: any error
 * is a deny. Fills *decision (release with domed_decision_release). */
void domed_authorize(struct domed *domed, struct domed_rules *rules, const struct domed_principal *principal,
                     const char *action, json_t *tool_entity, const char *mcp_tool_name, json_t *arguments,
                     struct domed_decision *decision);
/* The same for resource Dome::MCPTool::"<resource>" (an external backend's registry name). */
void domed_authorize_resource(struct domed *domed, struct domed_rules *rules,
                              const struct domed_principal *principal, const char *action,
                              const char *resource, json_t *tool_entity, const char *mcp_tool_name,
                              json_t *arguments, struct domed_decision *decision);
/* The same with typed arguments: for a call (input_name and input_schema not NULL), context.input is
 * {input_name: <arguments typed from input_schema>} (policy/tool_input/tool_input.h) and the context is
 * typed by the Dome schema with that attribute; otherwise context.input is {}. Arguments that do not
 * have the type are a deny with the reason in the decision's errors (callers check them first with
 * cedar_tool_input_check). */
void domed_authorize_input(struct domed *domed, struct domed_rules *rules,
                           const struct domed_principal *principal, const char *action, const char *resource,
                           json_t *tool_entity, const char *mcp_tool_name, json_t *arguments,
                           const char *input_name, json_t *input_schema, struct domed_decision *decision);
void domed_decision_release(struct domed_decision *decision);

/* Journal (audit.c). The rule: nothing runs and nothing is answered unless its events are durable
 * (docs/threat-model.md). Every event goes through domed_audit_append; a caller that cannot append or
 * sync fails its call closed (a tool error or a JSON-RPC internal error) before acting on it.
 *
 * Events are bounded: an identifier (request id, tool name) over DOMED_EVENT_TEXT_MAX bytes is recorded
 * by domed_audit_set_text as digest and size; an input (code, stdin, file) by domed_audit_record_input;
 * and an event still larger than the journal takes has its largest members replaced by their digest
 * and size until it fits DOMED_EVENT_BUDGET_BYTES (the bytes kept in the blob store when its quotas
 * allow, `<member>_stored` false when not). */
#define DOMED_EVENT_TEXT_MAX 256                /* bytes of an identifier kept inline */
#define DOMED_REQUEST_ID_MAX 256                /* bytes of a JSON-RPC id (its JSON text) domed accepts */
#define DOMED_EVENT_BUDGET_BYTES (256 * 1024)   /* canonical size an oversized event is cut down to */
#define DOMED_INPUTS_INLINE_BUDGET (128 * 1024) /* input bytes one exec.start keeps inline, in all */
#define DOMED_BLOB_OWNER_EVENTS "-events"       /* blob owner of members cut from oversized events */
int domed_audit_open(struct domed *domed, dome_error *err);
void domed_audit_close(struct domed *domed);
/* Append `event` (borrowed; it may be changed: oversized members are replaced by their digest).
 * Returns 0 and *ticket (for domed_audit_sync; may be NULL), or -errno with *err saying why the event
 * was refused (-E2BIG: still too large, -ENOSPC/-EIO/-EROFS: the journal failed, -ESHUTDOWN); the refusal
 * is logged and counted (dome_journal_refused_total). A failed journal is reopened (its durable events
 * recovered) at most once a second, so domed serves again once space returns. */
int domed_audit_append(struct domed *domed, json_t *event, uint64_t *ticket, dome_error *err);
/* The journal seq of the event a ticket names (its `seq` in the journal). */
uint64_t domed_audit_ticket_seq(uint64_t ticket);
/* Block until the event of `ticket` and every earlier one is durable. Returns 0, or -errno (the event is
 * not durable: the caller fails its call; counted like a refused append). */
int domed_audit_sync(struct domed *domed, uint64_t ticket, dome_error *err);
/* domed_audit_append for an event that follows the event of ticket `first` (0: none), the first of its
 * call: refused with -EIO, not appended, when the journal failed and was reopened since `first` (the
 * reopened journal may have lost it, and must not hold a later event of the call without its first). */
int domed_audit_append_after(struct domed *domed, uint64_t first, json_t *event, uint64_t *ticket,
                             dome_error *err);
/* Start making the event of `ticket` and every earlier one durable without waiting (journal_sync_begin):
 * a later domed_audit_sync waits for what remains. A ticket of a journal since reopened: nothing. */
void domed_audit_sync_begin(struct domed *domed, uint64_t ticket);
/* Block until every event from ticket `first` to ticket `last` (appended later) is durable. Returns 0,
 * -EIO when the journal failed and was reopened in between (the events before the failure are lost: the
 * call they belong to must fail), or domed_audit_sync's error. */
int domed_audit_sync_span(struct domed *domed, uint64_t first, uint64_t last, dome_error *err);
/* domed_audit_append then domed_audit_sync. */
int domed_audit_append_sync(struct domed *domed, json_t *event, dome_error *err);
/* Set holder[member] to text[0..length) when length <= DOMED_EVENT_TEXT_MAX, else holder[member_sha256]
 * and holder[member_bytes] (the text is not kept). */
void domed_audit_set_text(json_t *holder, const char *member, const char *text, size_t length);
/* Set event["session"] (the MCP session id) and event["request_id"] (the JSON-RPC id's JSON text, "null"
 * for none; by digest when long, as domed_audit_set_text) of `call`: every event answering a tools/call
 * names the request it answers (MCP 2025-06-18, Basic: JSON-RPC ids). */
void domed_audit_set_call(json_t *event, mcp_call *call);
/* Keep data[0..length) (SHA-256 `hex`) in the blob store for `owner` within owner_quota, pruning once by
 * the journal's retention when a quota refuses it. Returns 1 (kept), 0 (refused by a quota: *err says
 * which; counted as recorded by digest only) or -errno. */
int domed_audit_put_blob(struct domed *domed, const char *owner, uint64_t owner_quota, const char *data,
                         size_t length, const char *hex, dome_error *err);
/* Record an input: holder[member_sha256], holder[member_bytes], and holder[member] inline when length <=
 * inline_max, else the bytes in the blob store for `owner` (a capability, within owner_quota bytes; 0: no
 * quota) with holder[member_stored] true, or false when a quota refused them (counted in /metrics).
 * Returns 0, or -errno when the blob store could not write (disk full, I/O error): the call fails. */
int domed_audit_record_input(struct domed *domed, json_t *holder, const char *member, const char *data,
                             size_t length, size_t inline_max, const char *owner, uint64_t owner_quota,
                             dome_error *err);
/* The blob store's use for /metrics and `dome doctor`: {bytes, blobs, quota_bytes, refused, pruned,
 * owners: {capability: bytes}}. New reference. */
json_t *domed_audit_blob_usage(struct domed *domed);
/* The `authz.decision` event of `decision` (docs/journal-format.md), members in this order: type,
 * agent, gateway (the identity's), action, tool (the registry name: the built-in backend or an external
 * one), mcp_tool, decision ("allow"/"deny"), determining, errors (empty arrays when the decision has
 * none), policy_name, reason, policy_version (as a string); then exec_id when not NULL, actas when the
 * identity acts for another, request when the decision recorded one. New reference. */
json_t *domed_decision_event(const char *exec_id, const mcp_identity *identity, const char *action,
                             const char *tool, const char *mcp_tool, const struct domed_decision *decision,
                             const char *reason);
/* The store's commit hook (control_store_set_commit_hook, context: the domed): while a control command
 * changes the store, makes its administrative event durable (domed_audit_append_sync) before the first
 * write, so that a change whose record the journal refuses never takes effect: the command fails with
 * that error and the store is unchanged. Returns 0 (also for writes outside an administrative command,
 * which journal their own events), or -errno with *err. */
int domed_admin_commit_hook(void *context, dome_error *err);
/* The mcp request_refused handler (supervisor/mcp/mcp.h): a request refused before any work (its id too
 * long) journalled as an authz.decision deny with `reason`, action mcp:call (tools/call, mcp_tool its
 * params.name) or mcp:request, its method, session header and id by digest when long
 * (domed_audit_set_text). Returns 0 once durable, else domed_audit_append_sync's -errno (*err). */
int domed_request_refused(void *context, const mcp_identity *identity, const char *session_id,
                          const char *method, const json_t *params, const char *request_id,
                          const char *reason, dome_error *err);
/* Serve `audit.stream` on a control connection until the client leaves. */
json_t *domed_audit_stream(struct domed *domed, const struct control_request *request, dome_error *err);

struct domed_kernel_run;
/* One execute_code call, already authorized. Returns the CallToolResult (new reference) or NULL with
 * *rpc_error and *err. exec_id names the execution in the journal. */
struct domed_execution {
  const mcp_identity *identity;
  json_t *tool;      /* the registry entry of code-sandbox (classification, secret env names) */
  json_t *arguments; /* validated execute_code arguments */
  struct control_quota quota;
  struct domed_rules *rules;
  const char *exec_id;
  mcp_call *call;
  uint64_t decision_ticket; /* of the call's authz.decision: every later sync of the call covers it */
  /* A sandbox session's jail (domed/sessions.c) runs with call NULL: cancel_fd ends it, nothing is
   * streamed, and on_jail_started gets the host pid of the jail's init once its namespaces exist, and the
   * kernel layer's attachment of its cgroup (ruleset, reason; level NULL: no kernel layer). */
  int cancel_fd;
  void (*on_jail_started)(void *context, pid_t init_pid, const struct domed_kernel_run *kernel_run);
  void *jail_context;
};
json_t *domed_execute(struct domed *domed, const struct domed_execution *execution, int *rpc_error,
                      dome_error *err);

/* ---- sessions.c: sandbox sessions (supervisor/session, docs/sessions.md) ---- */
/* Whether `name` is a session tool (create_session, close_session, list_sessions, write_file, read_file,
 * list_files, delete_file) or an execute_code call that names a session_id. */
bool domed_session_handles(const char *name, json_t *arguments);
/* Run an authorized call of a session tool (or execute_code in a session). execution->decision_ticket is
 * made durable before a cell, a process, a file change or a snapshot acts, and before any answer leaves
 * (docs/threat-model.md, "The audit rule"). The result or NULL with *rpc_error -32603 and *err (fail
 * closed: the journal refused or could not make an event durable, or it was reopened during the call). */
json_t *domed_session_call(struct domed *domed, const char *name, const struct domed_execution *execution,
                           int *rpc_error, dome_error *err);
/* After the active rules changed (rules apply, promote): every live session's jail gets the new version's
 * kernel network tables in place (its ruleset swapped), or is ended (session.closed reason "rules changed:
 * ...") when the version changes its file rules, which a running jail's Landlock cannot take; each is
 * journalled as session.rules {session_id, outcome: updated|unchanged|closed, policy_version,
 * previous_version, reason?}. Returns those outcomes as an array (new reference). */
json_t *domed_sessions_rules_changed(struct domed *domed);
/* Why a snapshot does not keep the session's interpreter on this host (the outcome of `criu check`, run
 * once: CRIU missing, the kernel features it lacks, or that checkpointing a session's jail is not built);
 * a static string. */
const char *domed_sessions_kernel_state_reason(void);
/* The session tools' definitions appended to `tools` (inputSchema, outputSchema). */
void domed_session_tools(json_t *tools, const struct control_quota *quota);
/* The inputSchema of session tool `name` (new reference), NULL for any other name: what types its
 * arguments for Cedar (context.input.<name>, docs/policy.md). */
json_t *domed_session_input_schema(const char *name);
/* Start the reaper (idle, lifetime, lost sessions); end every session (`session.closed`
 * reason=shutdown) at shutdown. The number of live sessions for /metrics. */
int domed_sessions_start(struct domed *domed, dome_error *err);
void domed_sessions_stop(struct domed *domed);
size_t domed_sessions_live(void);
/* Control commands sessions.list / sessions.show / sessions.kill: the result or NULL with *err. */
json_t *domed_sessions_command(struct domed *domed, const char *command, json_t *args, dome_error *err);

/* ---- output_limit.c: what an agent reads of an execution's output ---- */
/* Keep at most `limit` bytes of result[field] (a redacted output stream, valid UTF-8), cut before a
 * UTF-8 sequence or a [REDACTED:...] marker it would split, and end it with the line
 * "[... 4.9 MiB truncated: stdout was 5,242,880 bytes]" (bytes left out of the text and dropped by the
 * jail beyond its output limit; the bytes the program wrote) and result.truncated true. Unchanged when
 * the stream fits and the jail kept all of it (written_bytes <= kept_bytes). */
void domed_output_limit(json_t *result, const char *field, uint64_t limit, uint64_t written_bytes,
                        uint64_t kept_bytes);
/* Append `lines` ('\n'-terminated) to the string result[field], on a line of their own. */
void domed_output_append_line(json_t *result, const char *field, const char *lines);

/* ---- guard_cache.c: compiled guards shared by calls with the same classification and secrets ---- */
struct guard;
struct guard_options;
/* Returns 0 with *guard (shared, immutable) and *handle for domed_guard_release, or guard_create's error. */
int domed_guard_acquire(const struct guard_options *options, struct guard **guard, void **handle,
                        dome_error *err);
void domed_guard_release(void *handle);
void domed_guard_cache_clear(void);

/* ---- kernel.c: cgroup BPF enforcement and denial events of jails ---- */
struct jail_cgroup;
struct domed_kernel_run {
  uint64_t cgroup_id;
  void *attachment; /* struct dome_kernel_attachment * */
  json_t *denials;  /* array of {hook, object, pid, action, policy, offset_ms}; owned by the caller */
  uint64_t count;
  uint32_t ruleset;   /* 0: deny all network */
  uint64_t start_ns;  /* CLOCK_MONOTONIC at attachment: the base of the denials' offset_ms */
  const char *level;  /* "reduced"/"full" while attached (static), NULL: no kernel layer */
  const char *reason; /* why ruleset 0: "quota" (the capability's quota denies egress), else "policy" */
  /* Shadow rules whose kernel tables the ruleset carries (dome rules apply --shadow): their version (0:
   * none) and the differences seen (dome_denial_shadow_to_json objects plus shadow_version, at most
   * DOME_KERNEL_DENIALS_KEPT; NULL: none; owned by the caller) and counted. */
  int shadow_version;
  json_t *shadows;
  uint64_t shadow_count;
  struct domed_kernel_run *next;
};
/* Install `rules` compiled for `principal` into the kernel ruleset `ruleset` (one a running jail of that
 * agent is attached to), so that every jail attached to it enforces them from the next connect on (the
 * tables switch in one map update: dome_kernel_install_tables). The slot then counts as holding
 * rules->version. Returns 1 (installed, or the slot already held that version), 0 (no kernel layer, or
 * ruleset 0: that jail denies every connect whatever the rules say), -EINVAL (rules without kernel
 * policies), -ENOENT (the ruleset is not that agent's), -errno of the compiler or of a map update. */
int domed_kernel_update_ruleset(struct domed *domed, uint32_t ruleset,
                                const struct domed_principal *principal, struct domed_rules *rules,
                                dome_error *err);
void domed_kernel_init(struct domed *domed); /* never fatal: logs the level or why it is missing */
void domed_kernel_cleanup(struct domed *domed);
/* Attach the programs to a jail's leaf (the jail's on_cgroup_ready hook). 0 when unavailable. */
int domed_kernel_attach(struct domed *domed, struct domed_kernel_run *run, const struct jail_cgroup *leaf,
                        const struct domed_principal *principal, struct domed_rules *rules, bool egress,
                        dome_error *err);
/* Attach the programs to a prepared jail's leaf before its call (dome_kernel_prelink), so that the call's
 * domed_kernel_attach only registers the jail. 0 when unavailable (no kernel layer) or done; -errno of
 * dome_kernel_prelink otherwise (the call then attaches as a fresh jail's does). */
int domed_kernel_prelink(struct domed *domed, const struct jail_cgroup *leaf, dome_error *err);
/* Drop what domed_kernel_prelink made for `cgroup_id` and no call took (dome_kernel_prelink_drop). */
void domed_kernel_prelink_drop(struct domed *domed, uint64_t cgroup_id);
/* Leaves holding prelinked programs that no call took yet (0 without a kernel layer). */
size_t domed_kernel_prelinked(struct domed *domed);
/* Check that `rules` compile into kernel tables for `agent` (rules apply refuses rules that cannot). */
struct dome_rule_tables;
/* Compile the kernel decision tables (policy/compile) of `agent` under `rules`, with its capabilities
 * (a JSON array, borrowed) and gateway as its entity data. Returns 0 with *tables filled (free with
 * dome_rule_tables_free), or -errno from the compiler naming the policy and sub-expression it refused. */
int domed_compile_tables(struct domed *domed, struct domed_rules *rules, const char *agent,
                         json_t *capabilities, const char *gateway, struct dome_rule_tables *tables,
                         dome_error *err);
int domed_kernel_check(struct domed *domed, struct domed_rules *rules, const char *agent, dome_error *err);
/* After the jail ended: collect its last denials and detach. */
void domed_kernel_finish(struct domed *domed, struct domed_kernel_run *run);
/* Landlock path rules for a jail of `principal` under `rules`: the ALLOW file entries of the baseline +
 * rules compiled for the agent (as `dome run --rules`). Returns 0 with *out (release it), or *out NULL when
 * there is nothing to add (no rules: the jail's baseline); -EINVAL/-E2BIG/... with *err when the tables
 * cannot be enforced (without BPF-LSM, a deny inside an allowed subtree: the execution must not run). */
struct domed_path_rules;
struct jail_path_rule;
int domed_kernel_path_rules(struct domed *domed, const struct domed_principal *principal,
                            struct domed_rules *rules, struct domed_path_rules **out, dome_error *err);
const struct jail_path_rule *domed_path_rules_list(const struct domed_path_rules *rules, size_t *count);
void domed_path_rules_release(struct domed_path_rules *rules);

/* ---- commands.c: the control socket handler ---- */
json_t *domed_control_handle(void *context, const struct control_request *request, dome_error *err);

/* ---- refusals.c: auth.failed / session.refused, bounded per (source, principal) and second ---- */
/* Journal `event` (borrowed; its type and reason members are part of the key, `source` is added) at
 * once when it is the first of its key this second, else count it into the second's summary event
 * ({...first event, count, window_s: 1}, journalled when the second has ended). source: the peer
 * address; principal: the token's first characters or the agent. */
void domed_refusal_journal(struct domed *domed, json_t *event, const char *source, const char *principal);
/* The thread journalling the summaries of ended seconds; stop journals what is still counted. */
int domed_refusals_start(struct domed *domed, dome_error *err);
void domed_refusals_stop(struct domed *domed);

/* ---- fair_queue.c: jail slots shared fairly between agents ---- */
/* Wait for a jail slot for `agent` (at most `concurrency` running for it, 0: max_jails). Returns 0 (the
 * slot is held until domed_slot_release), -EBUSY (the agent's queue of max_queue_per_agent or the
 * whole queue of max_queue is full, or no slot within queue_timeout_s) or -ECANCELED (the call was
 * cancelled or domed stops) with *err. */
int domed_slot_acquire(struct domed *domed, const char *agent, unsigned concurrency, mcp_call *call,
                       dome_error *err);
void domed_slot_release(struct domed *domed, const char *agent);
/* Returns true at once when `agent` has fewer than max_queue_per_agent calls waiting; else waits up to
 * wait_ms milliseconds for room in its queue (or domed's stop) and returns whether there is room, with
 * its running and waiting counts. Runs in the HTTP connection's thread before any call thread exists;
 * the wait is woken only when a full queue of some agent gets room, so a held refusal costs one wake-up.
 * It holds back the refusal of an agent that keeps re-sending calls its queue cannot take (its retries
 * come at most once per wait). A snapshot: the next domed_slot_acquire decides. */
bool domed_slot_wait_room(struct domed *domed, const char *agent, unsigned wait_ms, unsigned *running,
                          unsigned *waiting);
/* After max_jails changed (SIGHUP): hand out the slots that became free. */
void domed_slots_changed(struct domed *domed);

/* ---- sandbox.c: MCP handlers ---- */
extern const struct mcp_handlers domed_mcp_handlers; /* context: struct domed * */
/* The execute_code Tool object (name, description, inputSchema, outputSchema). The description states
 * `quota`'s limits (mcp_output_limit: bytes shown per stream when the quota sets none). New reference. */
json_t *domed_execute_code_tool(const struct control_quota *quota, uint64_t mcp_output_limit);
/* ---- tool_types.c: the tool registry as Cedar sees it ---- */
/* Every tool's MCP Tool object as agents see it (execute_code, then each gateway backend's approved
 * `<backend>.<t>` from its last discovery; no backend is contacted). A backend not discovered yet is left
 * out and {tool, error} appended to `errors` (may be NULL). New reference. */
json_t *domed_tool_definitions(struct domed *domed, json_t *errors);
/* The Dome schema with context.input typed from those definitions (a cedar_schema *, released with
 * cedar_schema_free). Returns 0, or -errno with *err. */
int domed_typed_schema(struct domed *domed, void **schema, dome_error *err);
/* ---- tool_pins.c: pinned definitions of the gateway backends' tools ---- */
/* The tools of `tools` (an exposed listing of backend `entry`) whose definition is the pinned one; the
 * others are withheld and journalled (tool.changed, once per new definition). A backend never pinned is
 * pinned now (tool.pinned), its tools with findings excepted. New reference. */
json_t *domed_pins_filter(struct domed *domed, json_t *entry, json_t *tools);
/* Pin the backend's current tools (a fresh listing): returns {tool, changes: [{mcp_tool, change:
 * changed|added|removed, fields?, old_digest?, new_digest?, old?, new?}], findings: [{mcp_tool, field,
 * kind, offset, detail}], pinned, approved}; with findings and !accept_findings nothing is pinned
 * (approved false, tool.findings journalled). Before anything is pinned, record(record_context, the
 * answer, err) is called (when not NULL): the pins are saved only when it returns 0 (the administrative
 * record is durable first). NULL with *err when the backend cannot be listed, record refused, or the
 * pins were not saved. */
json_t *domed_pins_approve(struct domed *domed, json_t *entry, bool accept_findings,
                           int (*record)(void *context, const json_t *approval, dome_error *err),
                           void *record_context, dome_error *err);
/* May backend tool `tool` be called: 0 (its pinned inputSchema in *input_schema, a new reference, or
 * NULL when the backend cannot be listed now), or -1 with the reason (withheld: changed, or not among
 * the approved tools). */
int domed_pins_check_call(struct domed *domed, json_t *entry, const char *tool, json_t **input_schema,
                          char *reason, size_t size);
/* Drop a backend's pins (dome tool remove). */
void domed_pins_forget(struct domed *domed, const char *backend);
/* The execute_code inputSchema (JSON Schema; new reference). */
json_t *domed_execute_code_input_schema(void);
/* Validate execute_code arguments; -EINVAL with a one-line message naming the argument. */
int domed_execute_arguments_check(json_t *arguments, dome_error *err);
/* The principal of a call by `identity` (its agent record from the control store; an unknown agent
 * has no capabilities and the Default grant): a delegated call (identity->actas, checked at
 * authentication) gets only the grants and capabilities both the agent and its parent hold
 * (gateway_delegation_effective). principal->grants and *capabilities are new references the caller
 * releases; the strings point into `identity`. */
void domed_principal_of(struct domed *domed, const mcp_identity *identity, struct domed_principal *principal,
                        json_t **capabilities);

/* ---- gateway_route.c: external MCP backends registered with `dome tool add --url` (gateway.h) ---- */
/* Append to `tools` the backend tools on the identity's gateway that mcp:discover allows (journalled;
 * *ticket: the last event's, for domed_audit_sync). Returns 0, or -errno when an event was refused (the
 * listing must not be answered). */
int domed_gateway_list_tools(struct domed *domed, const mcp_identity *identity, json_t *tools,
                             uint64_t *ticket, dome_error *err);
/* True when mcp:discover is allowed on some external backend (context.tool "": the backend as a whole;
 * its tool list is not fetched). Not journalled (admission of initialize). */
bool domed_gateway_discover_any(struct domed *domed, const mcp_identity *identity);
/* tools/call of `<backend>.<tool>`: returns 1 with *result (or NULL with *rpc_error and *err) when `name`
 * names a backend tool on the identity's gateway, 0 when it does not. */
int domed_gateway_call_tool(struct domed *domed, const mcp_identity *identity, const char *name,
                            json_t *arguments, mcp_call *call, json_t **result, int *rpc_error,
                            dome_error *err);

/* ---- metrics.c ---- */
int domed_http_get(void *context, const char *path, char **body, size_t *length, const char **content_type);

/* ---- egress.c: jail networking (supervisor/net) for jails whose rules permit more than loopback ---- */
#include <stdio.h>

#include "supervisor/net/net.h"
struct jail_config;
struct domed_egress_run {
  bool needs_egress; /* the agent's rules permit a destination beyond loopback (and the quota egress) */
  bool wanted;       /* ... and the egress side is open: build the path in on_namespaces_ready */
  bool built;        /* the path was built (usage is valid) */
  struct dome_net *net;
  struct dome_net_jail *jail;
  struct dome_net_entry *entries; /* the agent's network entries (owned) */
  size_t count;
  uint32_t address;     /* the jail's, host byte order */
  uint64_t quota_bytes; /* the jail's egress byte quota: the capability's egress_bytes, else egress_quota */
  struct dome_net_jail_usage usage;
  char resolv_conf[1024];
  char error[600]; /* why a permitted egress was not built ("" when it was, or none was needed) */
};
/* Startup: reclaim what a crashed domed left in the state directory (`domed-net` beside the control
 * socket). */
void domed_egress_init(struct domed *domed);
/* Shutdown, after every jail ended: remove the egress side (pasta / host table) and its state. */
void domed_egress_cleanup(struct domed *domed);
/* Before jail_run: decide (quota->egress + the agent's compiled network entries), open the egress side on
 * first use, set config->resolv_conf / hosts_dns; the jail's byte quota is quota->egress_bytes when set,
 * else the `egress_quota` configuration. Never leaves a path half-built; a permitted egress that
 * cannot be built makes run->error (the jail then runs with loopback only). Returns 0, or -errno when the
 * agent's rules cannot be compiled (the execution must not run). */
int domed_egress_prepare(struct domed *domed, const struct domed_principal *principal,
                         struct domed_rules *rules, const struct control_quota *quota,
                         struct jail_config *config, struct domed_egress_run *run, dome_error *err);
/* From the jail's on_namespaces_ready hook: build the path to child_pid's namespace. Returns 0. */
int domed_egress_namespaces_ready(struct domed_egress_run *run, pid_t child_pid, dome_error *err);
/* After jail_run (always): read the jail's counters, tear its path down, free run's memory. */
void domed_egress_finish(struct domed_egress_run *run);
/* object.network = {egress, mode?, address?, egress_bytes?, ingress_bytes?, connections?, refused?,
 * quota_bytes?, quota_exceeded?, error?} (the result's structuredContent, exec.end). */
void domed_egress_report(const struct domed_egress_run *run, json_t *object);
/* The dome_egress_* counters of /metrics (Prometheus text format). */
void domed_egress_metrics(FILE *out);

#endif
