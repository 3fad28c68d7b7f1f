/* Private structures of the MCP server, shared by its files. */
#ifndef DOME_MCP_INTERNAL_H
#define DOME_MCP_INTERNAL_H

#include <microhttpd.h>
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include "supervisor/mcp/mcp.h"

#define MCP_SESSION_ID_BYTES 32
/* The longest session id: "<node>.<64 hex>" with a node name of MCP_SESSION_NODE_MAX characters. */
#define MCP_SESSION_ID_TEXT_MAX (MCP_SESSION_NODE_MAX + 1 + MCP_SESSION_ID_BYTES * 2)
#define MCP_STREAM_RECORDS 64 /* streams of one session that can be resumed; the oldest is forgotten */

/* One SSE event kept for replay (basic/transports "Resumability and Redelivery"): the bytes exactly as
 * sent, after the handler's redaction. */
struct mcp_replay_event {
  struct mcp_replay_event *next;
  uint64_t id;     /* session-wide event number */
  unsigned stream; /* the stream it belongs to */
  size_t length;
  char text[]; /* "id: S-N\nevent: message\ndata: ...\n\n" */
};

/* A stream of the session that a client may resume with Last-Event-ID. */
struct mcp_stream_record {
  unsigned number;           /* 0: unused */
  uint64_t evicted_through;  /* highest event number of this stream dropped from the replay buffer */
  bool standalone;           /* the GET stream */
  struct mcp_stream *stream; /* while it exists; under replay_lock */
};

/* MCP basic/utilities logging levels, RFC 5424 order. */
enum mcp_log_level {
  MCP_LOG_DEBUG,
  MCP_LOG_INFO,
  MCP_LOG_NOTICE,
  MCP_LOG_WARNING,
  MCP_LOG_ERROR,
  MCP_LOG_CRITICAL,
  MCP_LOG_ALERT,
  MCP_LOG_EMERGENCY,
  MCP_LOG_LEVELS
};

struct mcp_session {
  char id[MCP_SESSION_ID_TEXT_MAX + 1];
  char agent[256];
  char gateway[128];
  char protocol_version[16];
  bool initialized;
  bool closed;
  time_t last_used;
  int refs;               /* table + requests holding it; under server->lock */
  struct mcp_call *calls; /* in-flight tools/call; under server->lock */
  atomic_int log_level;   /* enum mcp_log_level: the least severe notifications/message sent */
  /* The replay buffer: every event with an id sent on the session's streams, oldest first, at most
   * options.sse_replay_bytes bytes; the oldest events give way. replay_lock is taken after a
   * stream's lock, never before, and nothing is locked while it is held. */
  pthread_mutex_t replay_lock;
  uint64_t next_event;
  unsigned next_stream;
  struct mcp_replay_event *replay_head, *replay_tail;
  size_t replay_bytes;
  struct mcp_stream_record records[MCP_STREAM_RECORDS];
  unsigned next_record;
  struct mcp_stream *standalone; /* the open GET stream, NULL when none */
};

/* The Server-Sent Events body of one POST: the responses of one tools/call, or of every request of
 * a JSON-RPC batch (MCP 2025-03-26), with the progress notifications of its calls. */
struct mcp_stream {
  mcp_server *server;
  struct mcp_session *session; /* +1 ref: where its events are kept for replay */
  unsigned number;             /* the S of its event ids "S-N" */
  bool standalone;             /* the GET stream: no call answers on it, the session holds its writer */
  unsigned generation;         /* of the HTTP response now reading it; a resumption makes a new one */
  pthread_mutex_t lock;
  pthread_cond_t cond;
  char *out; /* SSE bytes not yet sent */
  size_t out_length, out_capacity, out_sent;
  unsigned writers;       /* calls (and the POST handler until mcp_stream_seal) that may still append */
  bool stream_gone;       /* no HTTP response reads it (the client went away, or has not resumed yet) */
  atomic_int refs;        /* the responses + one per writer + a resumption grace in progress */
  int socket_fd;          /* the reading connection's socket, polled for the client's close (-1: none) */
  struct mcp_call *calls; /* calls answering on this stream (next_in_stream); under lock */
};

/* A task (basic/utilities/tasks): a tools/call whose result is kept for its TTL and fetched with
 * tasks/result. Under server->lock. */
#define MCP_TASK_ID_BYTES 32
struct mcp_task {
  char id[MCP_TASK_ID_BYTES * 2 + 1];
  char agent[256];
  char gateway[128];
  char status[16]; /* working, completed, failed, cancelled */
  char status_message[256];
  char exec_id[32];
  int64_t created_ms, updated_ms; /* CLOCK_REALTIME, Unix milliseconds */
  int64_t ttl_ms;
  json_t *outcome;       /* {"result": CallToolResult} or {"error": {code, message}}; NULL while working */
  struct mcp_call *call; /* while it runs */
  int refs;              /* the table + waiters of tasks/result */
  bool listed;           /* in server->tasks */
  bool created_noted;    /* task.created reported (once the call named its execution) */
  struct mcp_task *next;
};

/* The answer of a call cancelled because its agent was suspended or revoked. */
#define MCP_CANCELLED_AGENT "request cancelled: the agent was suspended or revoked"

struct mcp_call {
  mcp_server *server;
  struct mcp_task *task; /* +1 ref when the call runs as a task, else NULL */
  char exec_id[32];
  struct mcp_session *session;
  struct mcp_stream *stream; /* where its progress and response go */
  json_t *request_id;
  json_t *progress_token;
  char *request_id_text;
  char *tool_name;
  json_t *arguments;
  mcp_identity identity;
  char protocol_version[16];
  char session_id[MCP_SESSION_ID_TEXT_MAX + 1];
  uint64_t received_us; /* CLOCK_MONOTONIC when the POST's headers arrived */
  int cancel_fd;
  atomic_bool cancelled;
  _Atomic(const char *) cancel_reason; /* why the server cancelled it, a static string; NULL: shutdown */
  atomic_bool cancelled_by_client;     /* notifications/cancelled: no response is sent */
  double last_progress;                /* under stream->lock */
  struct mcp_call *next_in_session;    /* under server->lock */
  struct mcp_call *next_in_stream;     /* under stream->lock */
};

/* The initialize budget of one agent (a token bucket of session_rate_per_agent a second). */
struct mcp_session_rate {
  char agent[256];
  double tokens;
  struct timespec refilled;
};
#define MCP_SESSION_RATES 256 /* agents tracked; the least recently refilled is reused */

/* Reused threads that run the server's calls (workers.c). Private to workers.c but for its size. */
struct mcp_worker;
struct mcp_workers {
  pthread_mutex_t lock;
  pthread_cond_t ended;     /* a worker ended (mcp_workers_stop waits for the last) */
  struct mcp_worker *idle;  /* idle workers, the most recently idle first */
  unsigned idle_count;      /* on the idle list */
  unsigned live;            /* workers started and not ended: running a job or idle */
  unsigned running;         /* jobs handed over and not yet returned */
  unsigned idle_max;        /* a worker whose job ends while this many are idle ends */
  unsigned idle_timeout_ms; /* a worker idle this long ends */
  size_t stack_bytes;       /* the least stack of a new worker */
  uint64_t created, reused; /* threads created, jobs handed to an idle worker */
  bool ready;               /* initialized and not yet stopped */
  bool stopping;
  bool has_ended;
  pthread_t last_ended; /* ended, not joined yet: the next worker to end joins it, or mcp_workers_stop */
};

/* What mcp_workers_count reports. */
struct mcp_workers_counts {
  unsigned live, idle, running;
  uint64_t created, reused;
};

/* Threads the server keeps for its calls. */
#define MCP_WORKER_STACK_BYTES (1u << 20) /* the least stack of a worker: a tools/call's */
#define MCP_WORKERS_IDLE_MAX 4            /* idle workers kept after a burst */
#define MCP_WORKERS_IDLE_MS 30000         /* an idle worker ends after this long */

struct mcp_server {
  struct MHD_Daemon *daemon;
  struct MHD_Daemon *get_daemon;     /* options.get_listen: the GET paths only */
  struct MHD_Daemon *console_daemon; /* options.console_listen: /console only */
  char *console_headers[33];         /* copy of options.console_headers, NULL-terminated */
  struct mcp_server_options options;
  struct mcp_handlers handlers;
  char *path;
  char *tls_cert, *tls_key;
  char **allowed_origins;
  char **allowed_hosts;
  char *get_token;
  char session_node[MCP_SESSION_NODE_MAX + 1]; /* options.session_node, "" when none */
  uint16_t port, get_port, console_port;
  pthread_mutex_t lock;
  pthread_cond_t idle;
  struct mcp_session **sessions;
  size_t session_count;
  unsigned calls_active;
  unsigned streams_open; /* event-stream responses not yet fully sent or dropped */
  bool stopping;
  struct mcp_server_stats stats;
  struct mcp_session_rate rates[MCP_SESSION_RATES]; /* under lock */
  struct mcp_task *tasks;                           /* newest first; under lock */
  pthread_cond_t task_changed; /* a task reached a terminal status, or the server stops */
  struct mcp_workers workers;  /* the threads of its calls, task result waiters and stream graces */
};

/* The SSE retry field (milliseconds) in every priming event. */
#define MCP_SSE_RETRY_DEFAULT_MS 500

/* workers.c */
/* An empty pool: new workers get at least stack_bytes of stack; a worker whose job ends while idle_max
 * others are idle ends, and an idle worker ends after idle_timeout_ms milliseconds (0 counts as 1).
 * Returns 0 or -errno (pthread_mutex_init, pthread_cond_init). */
int mcp_workers_init(struct mcp_workers *workers, size_t stack_bytes, unsigned idle_max,
                     unsigned idle_timeout_ms);
/* Run routine(argument) now on a thread of the pool with at least stack_bytes of stack: an idle worker
 * with enough stack, else a new worker (a job never waits behind another). The thread's signal mask and
 * nice value are those a new thread created by the pool's first caller would have (a worker gets back its
 * own after each job). Returns 0, -ESHUTDOWN while mcp_workers_stop runs, or -errno of pthread_create
 * (-EAGAIN: no thread) or -ENOMEM. Never call it once mcp_workers_stop has returned 0. */
int mcp_workers_start(struct mcp_workers *workers, void *(*routine)(void *), void *argument,
                      size_t stack_bytes);
/* The pool's counts now (thread-safe). */
void mcp_workers_count(struct mcp_workers *workers, struct mcp_workers_counts *counts);
/* Refuse new jobs, end the idle workers, wait at most timeout_ms milliseconds for the running jobs to
 * return, and join every worker. Returns 0 when no worker is left (the pool is then destroyed), else the
 * number of workers still running a job (the pool is left as it is: they still use it). */
unsigned mcp_workers_stop(struct mcp_workers *workers, unsigned timeout_ms);

/* jsonrpc.c */
json_t *mcp_jsonrpc_error(const json_t *id, int code, const char *message);
json_t *mcp_jsonrpc_result(const json_t *id, json_t *result /* stolen */);

/* session.c (all take server->lock themselves) */
int mcp_session_create(mcp_server *server, const mcp_identity *identity, const char *version,
                       struct mcp_session **session);
struct mcp_session *mcp_session_find(mcp_server *server, const char *id); /* +1 ref or NULL */
/* A node name of options.session_node: 1..MCP_SESSION_NODE_MAX of [A-Za-z0-9_-]. */
bool mcp_session_node_valid(const char *name);
void mcp_session_release(mcp_server *server, struct mcp_session *session);
void mcp_session_close(mcp_server *server, struct mcp_session *session); /* remove from table, cancel calls */
void mcp_session_close_all(mcp_server *server);
void mcp_session_cancel_request(mcp_server *server, struct mcp_session *session, const json_t *request_id);
void mcp_session_sweep(mcp_server *server); /* end the sessions idle past the timeout */
/* Take one initialize from the agent's budget; false when it is spent (the caller answers 429). */
bool mcp_session_rate_allow(mcp_server *server, const char *agent);

/* call.c */
/* A new stream of `session` with one writer (the caller) and its MHD response (*response, owned by the
 * caller until queued), its priming event (an id, the retry field, empty data) already in it. Returns
 * NULL on allocation failure. */
struct mcp_stream *mcp_stream_create(mcp_server *server, struct mcp_session *session, int socket_fd,
                                     struct MHD_Response **response);
/* GET on the endpoint (basic/transports "Listening for Messages from the Server", "Resumability and
 * Redelivery"): without last_event_id, open the session's standalone stream (409 when one is open);
 * with it ("S-N"), the events of stream S after N, then the rest of S while it lasts. *status is the
 * HTTP status; errors are JSON-RPC error bodies (400: malformed or unknown id, events dropped). */
struct MHD_Response *mcp_stream_get(mcp_server *server, struct mcp_session *session,
                                    const char *last_event_id, int socket_fd, unsigned *status);
/* The enum mcp_log_level of a level name ("debug" .. "emergency"), -1 when unknown. */
int mcp_log_level_parse(const char *name);
/* Free the replay buffer of a session no one refers to. */
void mcp_session_replay_free(struct mcp_session *session);
/* Append one message (stolen) as an SSE event. Thread-safe. */
void mcp_stream_send(struct mcp_stream *stream, json_t *message);
/* The caller will append nothing more; the body ends when every call has answered. */
void mcp_stream_seal(struct mcp_stream *stream);
/* Run routine(argument) on a worker of the server (at least stack_bytes of stack, mcp_workers_start)
 * that writes on `stream`: the stream gets one more writer and reference for it, given back by its
 * mcp_stream_seal (a tools/call gives them back itself). Returns 0, or -errno of mcp_workers_start (the
 * writer is taken back). */
int mcp_stream_writer_start(struct mcp_stream *stream, void *(*routine)(void *), void *argument,
                            size_t stack_bytes);
/* Start a tools/call thread that sends its progress and response on `stream`. Returns 0, or -errno
 * with *err (server shutting down, session closed, no thread). */
int mcp_call_start(mcp_server *server, struct mcp_session *session, const mcp_identity *identity,
                   const json_t *request_id, const char *name, json_t *arguments,
                   const json_t *progress_token, uint64_t received_us, struct mcp_stream *stream,
                   struct mcp_task *task /* NULL: a plain call */, dome_error *err);
void mcp_call_cancel(mcp_call *call, bool by_client);
/* A stream that sends nothing (a task's call: its result goes to the task). NULL on allocation failure. */
struct mcp_stream *mcp_stream_sink(mcp_server *server, struct mcp_session *session);
/* task.c */
/* A task-augmented tools/call (params.task given): admitted by the caller; answers the
 * CreateTaskResult, or an error. */
json_t *mcp_task_start(mcp_server *server, struct mcp_session *session, const mcp_identity *identity,
                       json_t *id, const char *name, json_t *arguments, json_t *task_params,
                       const json_t *progress_token, uint64_t received_us);
/* The call of a task ended with `message` (stolen: its JSON-RPC response). */
void mcp_task_finish(mcp_server *server, mcp_call *call, json_t *message);
/* tasks/get, tasks/list, tasks/cancel: the answer. tasks/result: NULL when it started on *stream. */
json_t *mcp_task_request(mcp_server *server, struct mcp_session *session, const mcp_identity *identity,
                         json_t *id, const char *method, json_t *params, int socket_fd,
                         struct mcp_stream **stream, struct MHD_Response **stream_response);
/* The call of a task made progress (bytes of output so far): its statusMessage says so. */
void mcp_task_progress(mcp_server *server, mcp_call *call, double progress);
/* The call of a task named its execution: task.created is reported with its exec_id. */
void mcp_task_named(mcp_server *server, mcp_call *call);
void mcp_task_cancel_all_locked(mcp_server *server); /* server->lock held: cancel running task calls */
/* Cancel every running task of `agent` (status cancelled, status message and task.cancelled reason
 * `reason`, records saved); takes server->lock. Returns how many. */
size_t mcp_task_cancel_agent(mcp_server *server, const char *agent, const char *reason);
void mcp_tasks_free(mcp_server *server);

/* protocol.c: handle one POSTed message; returns the HTTP response queued by the caller. */
struct mcp_post {
  mcp_identity identity;
  const char *session_header;
  const char *version_header;
  const char *body;
  size_t length;
  uint64_t received_us; /* CLOCK_MONOTONIC, microseconds: when the request's headers arrived */
  int socket_fd;        /* the connection's socket (-1: unknown) */
};
struct MHD_Response *mcp_protocol_post(mcp_server *server, const struct mcp_post *post, unsigned *status);
struct MHD_Response *mcp_protocol_get(mcp_server *server, const mcp_identity *identity,
                                      const char *session_header, const char *last_event_id, int socket_fd,
                                      unsigned *status);
struct MHD_Response *mcp_protocol_delete(mcp_server *server, const mcp_identity *identity,
                                         const char *session_header, unsigned *status);
struct MHD_Response *mcp_http_json_response(json_t *body /* stolen, may be NULL */);

#endif
