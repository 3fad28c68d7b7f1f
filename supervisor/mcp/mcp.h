/* MCP server: the Streamable HTTP transport and the server side of the Model Context Protocol.
 *
 * Implements the MCP specification revision 2025-11-25 (basic/transports "Streamable HTTP",
 * basic/lifecycle, server/tools, basic/utilities cancellation, progress and ping) and negotiates the
 * revisions 2025-06-18 and 2025-03-26 as well. Transport behaviour:
 *   - one endpoint per gateway: `path` (the `Default` gateway, e.g. /mcp) and /gateways/<name>/mcp;
 *   - POST carries one JSON-RPC message; notifications and responses get 202; requests get an
 *     application/json body, except tools/call which answers with a text/event-stream carrying
 *     notifications/progress and then the response;
 *   - JSON-RPC batches (a POSTed array, JSON-RPC 2.0 section 6) only on sessions that negotiated
 *     2025-03-26, the one revision that allows them (2025-06-18 removed batching): each element is
 *     checked and answered on its own (invalid ones get a -32600 error with their index); the
 *     answers come as one JSON array, or, when the batch holds a tools/call, as SSE events (one per
 *     response, progress interleaved); a batch of notifications and responses only gets 202; an
 *     empty batch, one over max_batch_messages elements or max_batch_bytes bytes, one containing
 *     initialize (outside a session), and any batch on a newer revision get one -32600 error (400);
 *   - every event stream starts with a priming event (an id, the retry field, empty data); its events
 *     carry ids "S-N" (S: the stream, N: unique in the session), kept in a bounded per-session replay
 *     buffer; GET opens the session's own stream, or with Last-Event-ID resumes stream S after N
 *     (basic/transports "Resumability and Redelivery"); DELETE ends the session;
 *   - logging/setLevel and notifications/message (server/utilities/logging); tasks: task-augmented
 *     tools/call, tasks/get, tasks/result, tasks/cancel, tasks/list (basic/utilities/tasks);
 *   - Mcp-Session-Id: 256 random bits (libsodium), hex, after "<node>." when options.session_node is
 *     set; missing on a non-initialize request -> 400, unknown or expired -> 404, and an id naming
 *     another node -> 404 with the header "Dome-Session-Node: <that node>"; MCP-Protocol-Version:
 *     unsupported -> 400 (absent: the negotiated revision is assumed);
 *   - Origin, when present, must be in the allowed list (default: loopback origins) else 403;
 *   - Authorization: Bearer <token> on every request, resolved by the authenticate handler
 *     (401 with WWW-Authenticate on failure); X-Dome-Act-As passes a delegated identity through;
 *   - bodies bounded (413), idle connections closed after a timeout (slowloris), connections capped.
 * JSON-RPC error codes: -32700 parse error (HTTP 400), -32600 invalid request (HTTP 400),
 * -32601 method not found, -32602 invalid params, -32603 internal error (HTTP 200 bodies).
 *
 * Threads: libmicrohttpd runs one thread per connection; each tools/call runs on a thread of its own
 * while it runs (a worker kept for the next call, workers.c) so that its progress streams while it runs.
 * Handlers must be thread-safe; a handler's thread-local state outlives its call. */
#ifndef DOME_MCP_MCP_H
#define DOME_MCP_MCP_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "supervisor/common/error.h"

#define MCP_PROTOCOL_LATEST "2025-11-25"
#define MCP_SESSION_NODE_MAX 63                     /* characters of options.session_node */
#define MCP_SESSION_NODE_HEADER "Dome-Session-Node" /* names the node owning a session found elsewhere */
#define MCP_GATEWAY_DEFAULT "Default"

/* JSON-RPC 2.0 error codes (JSON-RPC 2.0 section 5.1). */
enum {
  MCP_PARSE_ERROR = -32700,
  MCP_INVALID_REQUEST = -32600,
  MCP_METHOD_NOT_FOUND = -32601,
  MCP_INVALID_PARAMS = -32602,
  MCP_INTERNAL_ERROR = -32603,
  MCP_SERVER_OVERLOADED = -32000, /* implementation-defined server error: too many concurrent calls */
};

typedef struct mcp_server mcp_server;
typedef struct mcp_call mcp_call;

/* Who is calling, as resolved by the authenticate handler. */
typedef struct mcp_identity {
  char agent[256];   /* agent name: the Cedar principal Dome::Agent::"<agent>" */
  char actas[256];   /* X-Dome-Act-As header value, "" when absent (delegated identity) */
  char gateway[128]; /* the endpoint's gateway: "Default" for `path`, else <name> of /gateways/<name>/mcp */
  char source[64];   /* the peer's address: "127.0.0.1", "[::1]" ("" when unknown) */
} mcp_identity;

/* A request whose path is /console or lies beneath it, handed to handlers.console once its body is
 * read (Host and Origin checked first, as for every path). */
typedef struct mcp_console_request {
  const char *method;
  const char *path; /* the URL path, without the query */
  const char *body; /* the body, NUL-terminated, `length` bytes ("" when none) */
  size_t length;
  bool body_too_large; /* the body was over options.max_body_bytes and was dropped (body is "") */
  bool tls;            /* the request came over HTTPS */
  char source[64];     /* the peer's address, as mcp_identity.source */
  void *connection;    /* the server's; for mcp_console_header and mcp_console_query */
} mcp_console_request;

/* The value of request header `name` (case-insensitive), or NULL. */
const char *mcp_console_header(const mcp_console_request *request, const char *name);
/* The value of query argument `name` ("?agent=x" -> "x", URL-decoded), or NULL. */
const char *mcp_console_query(const mcp_console_request *request, const char *name);

/* The console handler's answer. Exactly one of body, static_body or read is used. */
typedef struct mcp_console_reply {
  unsigned status;                  /* HTTP status (0: 500) */
  const char *content_type;         /* static text */
  char *body;                       /* malloc'd, `length` bytes, freed by the server */
  const unsigned char *static_body; /* or a body that outlives the server (built-in assets), `length` bytes */
  size_t length;
  char *set_cookie;          /* malloc'd Set-Cookie value, or NULL */
  const char *cache_control; /* static Cache-Control value, or NULL ("no-store" is sent) */
  /* Or a streamed body of unknown length (text/event-stream): read is called in the connection's
   * thread, may block, and returns the bytes it wrote into buffer (at most size, > 0) or -1 to end the
   * body; release(state) is called once when the response is done or the client went away. */
  ssize_t (*read)(void *state, char *buffer, size_t size);
  void (*release)(void *state);
  void *state;
} mcp_console_reply;

struct mcp_handlers {
  void *context; /* passed to every handler */
  /* Resolve a bearer token (NULL when the request has no Authorization: Bearer header) for the
   * gateway endpoint in identity->gateway. Fill identity->agent and return 0; return -EACCES (401:
   * missing, invalid, expired, suspended or revoked token: with a token, WWW-Authenticate carries
   * error="invalid_token", RFC 6750 section 3.1) or -EPERM (403: agent not granted this gateway),
   * with err->message a one-line reason that is sent to the client. identity->source is set. */
  int (*authenticate)(void *context, const char *bearer_token, mcp_identity *identity, dome_error *err);
  /* Optional: admission of an `initialize` by an authenticated identity. Return 0 to create the
   * session, or -EPERM (403) with err->message when the identity may do nothing on this gateway. */
  int (*admit)(void *context, const mcp_identity *identity, dome_error *err);
  /* Optional: a session's life cycle, for the journal. type is "session.created", "session.expired"
   * (idle past session_idle_timeout_s) or "session.closed" with reason "client" (DELETE), "evicted"
   * (the agent's oldest idle session made room for a new one) or "shutdown", or "session.refused"
   * with reason "rate" (session_rate_per_agent exceeded; session_id ""); reason NULL otherwise.
   * Called without the server's locks held, the events noted together in order, `last` true on the
   * last of them. Returns 0 once the event is durable (with last false: once it is recorded, durable at
   * the latest when the call with last true returns 0), else -errno: a session.created (or the eviction
   * that made room for it) that cannot be made durable fails the initialize with a JSON-RPC internal
   * error (HTTP 500) and the session is removed, never answered. */
  int (*session_event)(void *context, const char *type, const char *agent, const char *gateway,
                       const char *session_id, const char *reason, bool last);
  /* Optional: a request refused before any work (its id's JSON text is over options.max_request_id_bytes),
   * for the journal: `method` and `params` (borrowed, an object) as received, `session_id` the
   * Mcp-Session-Id header as sent (NULL when absent; unchecked, any length), `request_id` the id's compact
   * JSON text, `reason` why. Return 0 once the refusal is durable: answered JSON-RPC -32600; or -errno
   * with err->message: answered -32603 (fail closed). */
  int (*request_refused)(void *context, const mcp_identity *identity, const char *session_id,
                         const char *method, const json_t *params, const char *request_id, const char *reason,
                         dome_error *err);
  /* tools/list: a new reference to a JSON array of MCP Tool objects visible to the identity, or NULL
   * when the listing cannot be answered (its audit events were refused): a JSON-RPC internal error. */
  json_t *(*list_tools)(void *context, const mcp_identity *identity);
  /* Optional: admission of a tools/call of tool `name` in session `session_id` (request_id: its
   * JSON-RPC id as compact JSON text), in the connection's thread, before any thread or event stream
   * is made for the call. Return 0 to start it, or -EBUSY with err->message when the agent holds every
   * queue place it may: answered at once as a JSON-RPC MCP_SERVER_OVERLOADED error (HTTP 200 when it
   * is the POST's only message). The handler journals the refusal; it may wait a bounded time first. */
  int (*call_admit)(void *context, const mcp_identity *identity, const char *name, const char *session_id,
                    const char *request_id, dome_error *err);
  /* tools/call: called in its own thread. Return a new reference to a CallToolResult object, or
   * NULL with *rpc_error set to a JSON-RPC error code and err->message (e.g. -32602 unknown tool,
   * MCP_SERVER_OVERLOADED). `arguments` is borrowed (an object, possibly empty). */
  json_t *(*call_tool)(void *context, const mcp_identity *identity, const char *name, json_t *arguments,
                       mcp_call *call, int *rpc_error, dome_error *err);
  /* Optional: called in the thread of a tools/call once its answer has been handed to the stream that
   * sends it and the call has left that stream (or the answer was kept for tasks/result, or dropped for a
   * request the client cancelled), before the server counts the call as done: work the answer need not
   * wait for (mcp_server_stop waits for it). The call's stream is no longer reachable from `call`. */
  void (*call_answered)(void *context, mcp_call *call);
  /* Optional: GET on other paths (/metrics, /healthz). Return 0 with a malloc'd *body (freed by the
   * server) of *length bytes and a static *content_type, or -ENOENT for 404. Host and Origin are checked
   * first as for the MCP endpoints; with options.get_token, every path but /healthz needs
   * "Authorization: Bearer <get_token>" (else 401). */
  int (*http_get)(void *context, const char *path, char **body, size_t *length, const char **content_type);
  /* Optional: every request to /console or beneath it, on `listen` and on options.console_listen.
   * Fill *reply (zeroed) and return 0; a negative return answers 500. Without this handler such paths
   * are 404. Every response to such a path, the server's own errors included, carries the headers of
   * options.console_headers. */
  int (*console)(void *context, const mcp_console_request *request, mcp_console_reply *reply);
  /* Tasks (MCP 2025-11-25 basic/utilities/tasks), all optional. task_limits: the longest TTL
   * (milliseconds) and the most live tasks the identity may hold for a task-augmented call of `tool`
   * (left as set: options.task_ttl_max_ms and options.max_tasks_per_agent). */
  void (*task_limits)(void *context, const mcp_identity *identity, const char *tool, uint64_t *max_ttl_ms,
                      unsigned *max_tasks);
  /* A task's life for the journal: type "task.created", "task.completed" (status "completed" or
   * "failed"), "task.cancelled", "task.expired" (its TTL passed: deleted) or "task.denied" (another
   * agent named it: answered "not found"); exec_id "" when the call set none; reason NULL or a line.
   * Called without the server's locks held. */
  void (*task_event)(void *context, const char *type, const char *agent, const char *gateway,
                     const char *task_id, const char *exec_id, const char *status, const char *reason);
  /* Keep `record` (borrowed: the task with its outcome, see mcp_server_task_restore) across restarts,
   * replacing an earlier one of the same task_id; return 0 or -errno with *err (logged; the task lives
   * on in memory). task_delete forgets it. */
  int (*task_save)(void *context, const char *task_id, const json_t *record, dome_error *err);
  void (*task_delete)(void *context, const char *task_id);
};

struct mcp_server_options {
  const char *listen;                 /* "ADDR:PORT", "[ADDR6]:PORT"; PORT 0 picks a free one */
  const char *path;                   /* endpoint of the Default gateway, e.g. "/mcp" */
  const char *tls_cert_pem;           /* PEM contents (not paths); both set -> HTTPS through GnuTLS */
  const char *tls_key_pem;            /* PEM contents */
  size_t max_body_bytes;              /* largest accepted POST body, bytes (0: 4 MiB) */
  unsigned connection_timeout_s;      /* idle connection timeout, seconds (0: 30) */
  unsigned max_connections;           /* concurrent connections (0: 1024) */
  unsigned max_sessions;              /* live sessions (0: 4096) */
  unsigned session_idle_timeout_s;    /* sessions unused this long expire, seconds (0: 3600) */
  unsigned max_sessions_per_agent;    /* live sessions of one agent (0: 16); the oldest idle one is
                                         evicted for a new one, and without an idle one -> 429 */
  unsigned session_rate_per_agent;    /* initialize per agent and second, with a burst of as many (0:
                                         20); beyond -> 429 before any decision (session.refused) */
  const char *const *allowed_origins; /* NULL-terminated list of exact origins; NULL: loopback only */
  /* Host header values accepted besides IP literals and localhost (DNS-rebinding protection: a page
   * on an attacker's name that resolves to this server sends that name as Host), and the hosts of
   * allowed_origins; NULL-terminated, names without port, compared without case. */
  const char *const *allowed_hosts;
  const char *get_token;      /* bearer token the GET paths other than /healthz need (NULL: none) */
  const char *get_listen;     /* "ADDR:PORT" of a second listener serving only the GET paths; NULL:
                                 they are served on `listen` (with it set, `listen` serves only /healthz) */
  const char *console_listen; /* "ADDR:PORT" of a listener serving only /console (NULL: none) */
  /* Headers of every response to a /console path: name, value, name, value, ..., NULL (at most 16
   * pairs; NULL: none). The strings must outlive the server. */
  const char *const *console_headers;
  const char *server_name;     /* serverInfo.name */
  const char *server_version;  /* serverInfo.version */
  const char *instructions;    /* InitializeResult.instructions, or NULL */
  unsigned max_batch_messages; /* elements of one JSON-RPC batch (0: 32) */
  size_t max_batch_bytes;      /* body bytes of one JSON-RPC batch (0: 1 MiB, at most max_body_bytes) */
  size_t sse_replay_bytes;     /* SSE events kept per session for Last-Event-ID resumption (0: 1 MiB) */
  unsigned sse_retry_ms;       /* the retry field of every priming event, milliseconds (0: 500) */
  /* how long the calls of a POST stream whose client went away keep running for it to resume with
   * Last-Event-ID, milliseconds (0: 1500); then they are cancelled as before */
  unsigned sse_resume_grace_ms;
  /* Polling (basic/transports "Sending Messages to the Server" 6, SEP-1699): on a 2025-11-25 session, a
   * tools/call stream whose calls have not answered this long after its priming event, with nothing
   * left to send, is closed by the server (the calls go on); the client reconnects after `retry` with
   * GET and Last-Event-ID and gets the rest of the stream there (milliseconds; 0: never, the POST
   * stream stays open to the end). Resumed streams are not closed again. Needs sse_resume_grace_ms. */
  unsigned sse_close_after_ms;
  uint64_t task_ttl_max_ms; /* longest task TTL, milliseconds (0: 1 hour); a request asking more gets this */
  unsigned max_tasks_per_agent; /* live tasks of one agent (0: 16); beyond, MCP_SERVER_OVERLOADED */
  unsigned task_poll_ms;        /* the pollInterval suggested, milliseconds (0: 1000) */
  /* Fleet mode (docs/fleet.md): this node's name, 1..MCP_SESSION_NODE_MAX of [A-Za-z0-9_-] (else
   * mcp_server_start fails with -EINVAL). Session ids are then "<node>.<64 hex>", and a request carrying
   * an id "<other>.<64 hex>" of another node is answered 404 with MCP_SESSION_NODE_HEADER: <other>, so
   * that a load balancer or a client tells "wrong node" from "no such session". NULL: ids are 64 hex and
   * every unknown id is a plain 404. */
  const char *session_node;
  size_t max_request_id_bytes; /* JSON text of a request's id (JSON-RPC 2.0 leaves its size to the server):
                                  a longer one is refused (-32600) before any work, whatever the method,
                                  and reported to handlers.request_refused (0: no bound) */
};

/* The node a session id names: for an id "<node>.<64 lowercase hex>" whose node is 1..MCP_SESSION_NODE_MAX
 * of [A-Za-z0-9_-], copies the node name into node (size bytes, at least MCP_SESSION_NODE_MAX + 1) and
 * returns true; for any other text (a plain 64-hex id, NULL, a bad name or suffix) returns false and
 * leaves node "". The form is this server's (options.session_node), readable by every node. */
bool mcp_session_id_node(const char *id, char *node, size_t size);

/* Counters for /metrics. */
struct mcp_server_stats {
  uint64_t http_requests;      /* requests answered */
  uint64_t http_errors;        /* answered with a 4xx/5xx status */
  uint64_t unauthorized;       /* 401 */
  uint64_t sessions_active;    /* live sessions */
  uint64_t sessions_created;   /* since start */
  uint64_t calls_active;       /* tools/call in flight */
  uint64_t sessions_evicted;   /* oldest idle sessions closed for a new one of the same agent */
  uint64_t sessions_refused;   /* initialize refused: admission (403) or per-agent cap (429) */
  uint64_t calls_disconnected; /* tools/call cancelled because the client closed its connection */
  uint64_t
      streams_polled; /* tools/call streams the server closed for the client to resume (sse_close_after_ms) */
  uint64_t
      replay_bytes; /* SSE events kept for Last-Event-ID, all live sessions (at most sse_replay_bytes each) */
};

/* Start listening. The handlers struct is copied. Returns 0 and *server, or -EINVAL (bad listen
 * address, TLS material refused), -EADDRINUSE / -errno (bind failure) with *err. */
int mcp_server_start(const struct mcp_server_options *options, const struct mcp_handlers *handlers,
                     mcp_server **server, dome_error *err);

/* The TCP port actually bound (useful with port 0). */
uint16_t mcp_server_port(const mcp_server *server);
/* The port of the get_listen listener, 0 when there is none. */
uint16_t mcp_server_get_port(const mcp_server *server);
/* The port of the console_listen listener, 0 when there is none. */
uint16_t mcp_server_console_port(const mcp_server *server);

/* End the sessions idle past session_idle_timeout_s now (reported as session.expired); they are
 * otherwise ended when a session is created or looked up. */
void mcp_server_sweep_sessions(mcp_server *server);

/* Stop accepting new connections (SIGTERM, first step). Running calls continue. */
void mcp_server_quiesce(mcp_server *server);

/* Cancel every in-flight tools/call (their cancel fds become readable) without waiting. */
void mcp_server_cancel_all(mcp_server *server);

/* Cancel every in-flight tools/call of `agent` (the principal its token named), whether it runs, waits
 * for a jail slot or runs as a task, without waiting for it to end: used when the agent is suspended or
 * revoked, so that its token being refused also stops what it already started. Returns the number of
 * calls cancelled (0 when it has none; agent NULL or "" cancels nothing). */
size_t mcp_server_cancel_agent(mcp_server *server, const char *agent);

/* Wait until no tools/call is in flight, at most timeout_ms milliseconds. Returns true when idle. */
bool mcp_server_wait_idle(mcp_server *server, unsigned timeout_ms);

/* Take back a task kept by task_save: {taskId, agent, gateway, status, statusMessage?, createdAt,
 * lastUpdatedAt (Unix milliseconds), ttl (ms), exec_id?, outcome?: {result} | {error}}. A task that was
 * still "working" becomes "failed" with a JSON-RPC error outcome saying the server stopped while it ran
 * (saved again). Returns 0, -EINVAL (*err names the member), -EEXIST or -ENOMEM. */
int mcp_server_task_restore(mcp_server *server, const json_t *record, dome_error *err);

/* Stop: close all connections and sessions, wait for the calls, end and join the server's worker
 * threads, free. A job still running 10 s after the calls were waited for leaves the server allocated
 * (not freed under it). NULL is a no-op. */
void mcp_server_stop(mcp_server *server);

/* The server's counters now into *stats; replay_bytes is summed over the live sessions. */
void mcp_server_get_stats(mcp_server *server, struct mcp_server_stats *stats);

/* --- for call_tool handlers --- */

/* True when the request carried params._meta.progressToken, or runs as a task (whose progress tasks/get
 * reports). */
bool mcp_call_wants_progress(const mcp_call *call);

/* Send notifications/progress (MCP basic/utilities/progress) with a progress value that increases on
 * every call (bytes so far) and `message` (e.g. a redacted stdout chunk, UTF-8; may be NULL).
 * No-op without a progress token. Thread-safe. */
void mcp_call_progress(mcp_call *call, double progress, const char *message);

/* Send notifications/message (MCP server/utilities/logging) on the call's stream when `level`
 * ("debug" .. "emergency") is at least the level the client set with logging/setLevel (default
 * "info"). `text` must hold nothing a guard would redact (the handler's own words: limits, queueing);
 * logger names the source ("dome"). No-op for an unknown level or a cancelled call. Thread-safe. */
void mcp_call_log(mcp_call *call, const char *level, const char *logger, const char *text);

/* A file descriptor (eventfd) that becomes readable when the client cancels the request
 * (notifications/cancelled: no response is sent), ends the session, or the server shuts down (then the
 * client gets -32603 whatever the handler returns). Owned by the call. */
int mcp_call_cancel_fd(const mcp_call *call);
bool mcp_call_cancelled(const mcp_call *call);

/* The protocol revision negotiated for the call's session, e.g. "2025-11-25". */
const char *mcp_call_protocol_version(const mcp_call *call);

/* The JSON-RPC id of the request, as compact JSON text (for the journal). */
const char *mcp_call_request_id(const mcp_call *call);

/* When the POST carrying the call arrived (its headers), CLOCK_MONOTONIC microseconds: the call's
 * time in the HTTP layer and the hand-over to its thread is the handler's start minus this. */
uint64_t mcp_call_received_us(const mcp_call *call);

/* Name the execution the call started (its exec_id, at most 31 bytes), for the task events. */
void mcp_call_set_exec_id(mcp_call *call, const char *exec_id);

/* True when the call runs as a task (its result is fetched with tasks/result). */
bool mcp_call_is_task(const mcp_call *call);

/* The session id (hex) of the call. */
const char *mcp_call_session_id(const mcp_call *call);

/* --- JSON-RPC helpers (exposed for tests) --- */

enum mcp_message_kind {
  MCP_MESSAGE_INVALID,
  MCP_MESSAGE_REQUEST,
  MCP_MESSAGE_NOTIFICATION,
  MCP_MESSAGE_RESPONSE
};

/* Classify one decoded JSON-RPC 2.0 message; on MCP_MESSAGE_INVALID *why names the offending member. */
enum mcp_message_kind mcp_message_classify(const json_t *message, const char **why);

/* The revision to answer an initialize request asking for `requested` (NULL: not given): the same
 * when supported, else MCP_PROTOCOL_LATEST. */
const char *mcp_negotiate_version(const char *requested);

/* True when `version` is one of the supported revisions. */
bool mcp_version_supported(const char *version);

#endif
