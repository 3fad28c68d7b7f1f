/* gateway — domed as an MCP client of external backends: route, authorize, filter and audit calls to
 * MCP servers registered with `dome tool add --url U --protocol streamable-http`.
 *
 * Transport: the client side of MCP Streamable HTTP (MCP revision 2025-11-25, basic/transports; the
 * revisions 2025-06-18 and 2025-03-26 are accepted from the backend). Every JSON-RPC message is one
 * POST with `Accept: application/json, text/event-stream`; the answer is either one application/json
 * body or a text/event-stream (parsed here, WHATWG HTML "server-sent events" section 9.2.6) carrying
 * notifications (notifications/progress is passed through) and finally the response. Mcp-Session-Id and
 * MCP-Protocol-Version are sent after initialize; a 404 on a live session starts a new session once.
 * HTTP is libcurl's (connections kept alive and reused between calls); redirects are not followed and
 * proxies from the environment are not used (either would carry the injected credential elsewhere);
 * https backends are verified against the system's CAs or the entry's `ca_file`.
 *
 * Bounds: every request has a deadline (timeout_ms, covering connect, headers and the whole stream),
 * every JSON message and every SSE event is at most max_message_bytes, a stream at most
 * max_stream_bytes in total; a backend that hangs, answers garbage, closes mid-stream or streams forever
 * yields a one-line error naming the backend within the deadline. Memory per call is bounded by
 * about three times max_message_bytes (the SSE line and event buffers, grown on demand, and the
 * decoded message).
 *
 * Exposure: a backend's tool `t` is exposed as `<backend>.<t>` (MCP tool names: 1..128 of
 * [A-Za-z0-9_.-], revision 2025-11-25 server/tools "Tool names"); tools whose exposed name would be
 * illegal are not exposed. For Cedar the resource stays Dome::MCPTool::"<backend>" and `t` goes into
 * context.tool.
 *
 * Gateways and grants: an agent's record (control store, agents.json) holds `gateways` (the gateways it
 * is granted; absent = ["Default"]; read with control_agent_record_grants, so this library uses
 * supervisor/control, never the reverse) and optionally `delegates_to`. The Cedar principal
 * Dome::Agent::"<agent>" has its grants as parents, so rules may say `principal in Dome::Gateway::"G"`.
 * A delegated call (principal + context.actas) never gets more than the parent identity: grants and
 * capabilities are the intersection of both.
 *
 * Thread safety: a gateway_registry and its backends may be used from any number of threads at once. */
#ifndef DOME_GATEWAY_GATEWAY_H
#define DOME_GATEWAY_GATEWAY_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "supervisor/common/error.h"
#include "supervisor/guards/guard.h"

#define GATEWAY_DEFAULT "Default"
#define GATEWAY_TOOL_NAME_MAX 128 /* longest MCP tool name, bytes */
#define GATEWAY_AUTH_HEADER_MAX 8192
#define GATEWAY_MAX_TOOLS 1024 /* most tools one backend may list */

/* ------------------------------------------------------------------ one backend (client.c) */

typedef struct gateway_backend gateway_backend;

struct gateway_backend_options {
  const char *name;            /* backend name (registry name, Dome::MCPTool id); used in messages */
  const char *url;             /* http:// or https:// URL of the Streamable HTTP endpoint */
  const char *auth_header;     /* one "Name: value" header injected into every request, or NULL */
  unsigned connect_timeout_ms; /* TCP/TLS connect, milliseconds (0: 2000) */
  unsigned timeout_ms;         /* deadline of one request including its whole stream, ms (0: 30000) */
  size_t max_message_bytes;    /* largest JSON body or SSE event, bytes (0: 4 MiB) */
  size_t max_stream_bytes;     /* largest total of one SSE stream, bytes (0: 64 MiB) */
  const char *ca_file;         /* PEM CA bundle for an https backend (NULL: the system's) */
  const char *client_name;     /* clientInfo.name (NULL: "dome-gateway") */
  const char *client_version;  /* clientInfo.version (NULL: "0") */
};

/* Create a client for one backend and run the lifecycle: initialize (protocolVersion 2025-11-25,
 * capabilities {}), then notifications/initialized. Returns 0 and *backend, or:
 *   -EINVAL      bad options (URL scheme, auth header syntax; err names the option),
 *   -ECONNREFUSED / -EHOSTUNREACH  the backend cannot be reached,
 *   -ETIMEDOUT   no complete answer within timeout_ms,
 *   -EPROTO      not a JSON-RPC answer, bad content type, HTTP error status, unsupported revision,
 *   -EACCES      HTTP 401/403 (the credential was refused), -ENOENT HTTP 404 (wrong path, or a session
 *                that expired twice in a row),
 *   -EMSGSIZE    an answer over max_message_bytes / max_stream_bytes,
 *   -ECONNRESET  the connection closed before the response,
 *   -EREMOTEIO   the backend answered a JSON-RPC error (its code and message in err),
 *   -ENOMEM.
 * err reads "backend `NAME`: ..." in every case. */
int gateway_backend_connect(const struct gateway_backend_options *options, gateway_backend **backend,
                            dome_error *err);

/* End the session (HTTP DELETE with the session id, best effort, bounded by the deadline) and free.
 * NULL is a no-op. No call may be running. */
void gateway_backend_close(gateway_backend *backend);

/* The backend's session id ("" when it gave none), negotiated revision, and serverInfo.name ("" when
 * absent). Valid until gateway_backend_close. */
const char *gateway_backend_session_id(gateway_backend *backend);
const char *gateway_backend_protocol_version(const gateway_backend *backend);
const char *gateway_backend_server_name(const gateway_backend *backend);

/* tools/list, following nextCursor (at most 64 pages). Returns 0 and *tools (new reference: the
 * array of Tool objects as the backend gave them), or the errors of gateway_backend_connect
 * (-EMSGSIZE also for more than GATEWAY_MAX_TOOLS tools, -EPROTO for more than 64 pages). */
int gateway_backend_list_tools(gateway_backend *backend, json_t **tools, dome_error *err);

/* Receives a backend's notifications/progress for a call: progress (as sent), total (NAN when absent),
 * message (NULL when absent). Called in the calling thread. */
typedef void (*gateway_progress_fn)(void *context, double progress, double total, const char *message);

struct gateway_call_options {
  gateway_progress_fn on_progress; /* NULL: no progress token is sent */
  void *progress_context;
  int cancel_fd;       /* readable = cancel (e.g. mcp_call_cancel_fd); -1 for none */
  unsigned timeout_ms; /* 0: the backend's timeout_ms; else the smaller of both */
};

/* tools/call `tool` (the backend's own name) with `arguments` (borrowed object; NULL = {}). Returns 0
 * and *result (new reference: the CallToolResult object), or the errors of gateway_backend_connect
 * plus -ECANCELED (cancel_fd became readable: notifications/cancelled is sent to the backend). On
 * -EREMOTEIO *rpc_error holds the backend's JSON-RPC error code (else 0). */
int gateway_backend_call_tool(gateway_backend *backend, const char *tool, json_t *arguments,
                              const struct gateway_call_options *options, json_t **result, int *rpc_error,
                              dome_error *err);

/* ------------------------------------------------------------------ SSE parsing (sse.c) */

/* An incremental text/event-stream parser (WHATWG HTML 9.2.6): lines end in CRLF, LF or CR; `data:`
 * lines are joined with LF; a blank line dispatches; `:` lines are comments; `event`, `id`, `retry`
 * are kept/ignored as the spec says. An event's data over max_event_bytes is an error. */
struct gateway_sse;
/* on_event returns 0 to continue, non-zero to stop (gateway_sse_feed returns that value). */
typedef int (*gateway_sse_event_fn)(void *context, const char *event_type, const char *data, size_t length);

/* Returns a parser or NULL (out of memory). max_event_bytes: 0 = 4 MiB. */
struct gateway_sse *gateway_sse_new(size_t max_event_bytes, gateway_sse_event_fn on_event, void *context);
void gateway_sse_free(struct gateway_sse *sse);
/* Feed bytes in any chunking. Returns 0, on_event's non-zero value, or -EMSGSIZE (an event or a line
 * over the bound). */
int gateway_sse_feed(struct gateway_sse *sse, const char *data, size_t length);
/* The last `id:` field seen ("" when none). */
const char *gateway_sse_last_event_id(const struct gateway_sse *sse);

/* ------------------------------------------------------------------ registry (registry.c) */

/* A registry entry as the control store keeps it (control_tool_get / control_tool_list):
 * {name, url, protocol, gateway, capability?, field_classification: {field: CLASS}, builtin?, ca_file?}. */

/* True when the entry is an external backend the gateway forwards to: a non-empty url, protocol
 * streamable-http, and not `builtin`. */
bool gateway_entry_is_external(json_t *entry);

/* Check the text of an --auth-header-file: one line "Name: value" (a trailing newline allowed), Name an
 * RFC 9110 token, value visible ASCII and spaces, at most GATEWAY_AUTH_HEADER_MAX bytes. Returns 0 or
 * -EINVAL ("--auth-header-file: ..."). */
int gateway_auth_header_check(const char *text, dome_error *err);

/* The value part of a "Name: value" header (pointer into text, trailing CR/LF not included in *length). */
const char *gateway_auth_header_value(const char *text, size_t *length);

/* The exact values to redact from everything a backend sends back, as guard secrets pointing into
 * `text` (a "Name: value" header): the whole value, and its credential part when the value has the
 * form "<scheme> <credential>" (e.g. "Bearer tok"). Writes 0..2 entries into secrets[2]; returns the count.
 */
size_t gateway_auth_header_secrets(const char *text, struct guard_secret secrets[2]);

/* "field=CLASS,..." text of an entry's field_classification object (malloc'd; "" when none; NULL on
 * out of memory), for guard_options.classification. */
char *gateway_classification_text(json_t *entry);

/* The exposed MCP name of backend tool `tool`: writes "<backend>.<tool>" into out[GATEWAY_TOOL_NAME_MAX+1]
 * and returns true, or false when it would not be a legal MCP tool name. */
bool gateway_exposed_name(const char *backend, const char *tool, char out[GATEWAY_TOOL_NAME_MAX + 1]);

typedef struct gateway_registry gateway_registry;

struct gateway_registry_options {
  unsigned connect_timeout_ms; /* 0: 2000 */
  unsigned timeout_ms;         /* per request, 0: 30000 */
  size_t max_message_bytes;    /* 0: 4 MiB */
  unsigned tools_ttl_ms;       /* how long a backend's tools/list stays cached, ms (0: 30000) */
};

/* Returns 0 and *registry, or -ENOMEM. options may be NULL. */
int gateway_registry_create(const struct gateway_registry_options *options, gateway_registry **registry,
                            dome_error *err);
/* Close every backend session and free. NULL is a no-op. No call may be running. */
void gateway_registry_free(gateway_registry *registry);

/* The backend's tools as exposed: an array of Tool objects renamed `<backend>.<tool>`, each with an
 * extra member "x-dome-tool" holding the backend's own name (remove it before sending to a client, or
 * use gateway_tool_public). The backend is connected (or reconnected when its url or auth header
 * changed) on first use; the list is cached for tools_ttl_ms. `entry` is a registry entry (borrowed),
 * auth_header its header text or NULL. Returns 0 and *tools (new reference) or the errors of
 * gateway_backend_connect. */
int gateway_registry_list_tools(gateway_registry *registry, json_t *entry, const char *auth_header,
                                json_t **tools, dome_error *err);

/* The backend's last listing as gateway_registry_list_tools gave it (however old), without contacting
 * it; NULL when it was never listed (or was forgotten since). New reference. */
json_t *gateway_registry_cached_tools(gateway_registry *registry, const char *name);

/* A copy of an exposed Tool object without dome's private members. New reference. */
json_t *gateway_tool_public(json_t *tool);

/* Find the backend of an exposed name among `entries` (an array of registry entries, borrowed): the
 * external entry whose name followed by '.' is the longest prefix of `exposed`. Returns the entry
 * (borrowed from `entries`) and writes the backend's tool name into tool[GATEWAY_TOOL_NAME_MAX+1], or
 * NULL when no backend matches. */
json_t *gateway_registry_resolve(json_t *entries, const char *exposed, char tool[GATEWAY_TOOL_NAME_MAX + 1]);

/* tools/call through the backend of `entry` (connecting on first use; once more after a failed
 * connection). Returns as gateway_backend_call_tool. */
int gateway_registry_call(gateway_registry *registry, json_t *entry, const char *auth_header,
                          const char *tool, json_t *arguments, const struct gateway_call_options *options,
                          json_t **result, int *rpc_error, dome_error *err);

/* Forget a backend (after `dome tool remove` or a changed registry entry): its client is dropped and
 * its session closed once no running call uses it. Unknown names are ignored. */
void gateway_registry_forget(gateway_registry *registry, const char *name);

/* ------------------------------------------------------------------ pinned definitions (pins.c) */

#define GATEWAY_DIGEST_HEX 64 /* SHA-256 in hex */

/* The pinned part of an exposed Tool object: {name (the backend's own, from x-dome-tool), description,
 * inputSchema, outputSchema, annotations}, absent members as null. New reference. */
json_t *gateway_tool_definition(json_t *tool);
/* SHA-256 (hex) of a definition's canonical JSON (keys sorted, no whitespace). Returns 0, -1 on ENOMEM. */
int gateway_tool_digest(json_t *definition, char digest[GATEWAY_DIGEST_HEX + 1]);
/* The pinned fields in which two definitions differ, in field order (array of names). New reference. */
json_t *gateway_tool_diff(json_t *old, json_t *new);
/* Hidden text and instructions addressed to the model in a definition's description, title and the
 * descriptions of its inputSchema (nested properties and items, 16 levels): Unicode tag characters
 * (U+E0000..U+E007F), bidirectional overrides and isolates (U+202A..U+202E, U+2066..U+2069), runs of two
 * or more zero-width characters (U+200B..U+200D, U+2060, U+FEFF), HTML comments, and a fixed list of
 * phrases ("ignore previous instructions", "do not tell the user", ...). Array of {field, kind,
 * offset (bytes), detail}; empty when clean. New reference. */
json_t *gateway_tool_findings(json_t *definition);

/* ------------------------------------------------------------------ grants, delegation, Cedar (entities.c)
 */

/* True when the agent record is granted `gateway` (its grants as control_agent_record_grants reads
 * them: the `gateways` member, or ["Default"] when absent). */
bool gateway_agent_granted(json_t *agent, const char *gateway);

/* The identity a request acts for. A token minted with `dome agents token --act-as P` (the record from
 * control_agent_authenticate carries `act_as`: P) or an agent registered with `--delegates-to P` is
 * bound to P: every request is on P's behalf, X-Dome-Act-As may be absent or must say P. Any other
 * agent may not send X-Dome-Act-As. `requested` is the header's value (NULL or "" when absent).
 * Returns 0 and *actas (NULL: the agent acts for itself; else a pointer into `agent` or `requested`),
 * or -EPERM with err naming the agent and the identity. */
int gateway_delegation_resolve(json_t *agent, const char *requested, const char **actas, dome_error *err);

/* May `agent` act as `actas`? Yes when actas is NULL or "", or when the agent record's `delegates_to`
 * equals actas (a registered delegate) or its `act_as` member (a string, or a list of strings; set by
 * control_agent_authenticate for a token minted with --act-as) names it; and the parent record (NULL
 * when unknown) exists and is active. Returns 0 or -EPERM with err naming both. Call it after
 * gateway_delegation_resolve, with the record of the identity that resolved to. */
int gateway_delegation_check(json_t *agent, json_t *parent, const char *actas, dome_error *err);

/* The effective grants and capabilities of a call: the agent's own, or for a delegated call
 * (parent not NULL) the intersection with the parent's, so a delegate never exceeds its parent.
 * *grants and *capabilities are new references (arrays of strings). */
void gateway_delegation_effective(json_t *agent, json_t *parent, json_t **grants, json_t **capabilities);

/* True when the call's effective grants (gateway_delegation_effective: for a delegated call those the
 * agent AND its parent hold) include `gateway`. */
bool gateway_delegation_granted(json_t *agent, json_t *parent, const char *gateway);

/* The Cedar entities (JSON entity format, Cedar docs "Entities & JSON syntax") of one mcp:* request:
 *   Dome::Agent::"<agent>" {capabilities} with parents = every gateway in `grants`;
 *   Dome::MCPTool::"<tool>" {protocol, capability?} with parent Dome::Gateway::"<tool_gateway>";
 *   one Dome::Gateway entity for each gateway named.
 * capabilities and grants are arrays of strings (borrowed). New reference. */
json_t *gateway_cedar_entities(const char *agent, json_t *capabilities, json_t *grants, const char *tool,
                               const char *protocol, const char *capability, const char *tool_gateway);

/* ------------------------------------------------------------------ response filtering (redact.c) */

/* Redact a backend's CallToolResult in place before it goes to the agent:
 *   structuredContent: guard_redact_json (each top-level key has its class from the classification);
 *   content[].text (and resource.text of embedded resources): the class of field "content" when the
 *     classification names it, else every class the classification uses, applied in turn (the text
 *     often mirrors structuredContent); findings name the field "content";
 * with `guard` built from the entry's classification and the backend's auth header as a secret (so a
 * credential echoed back is redacted in every field). Returns 0, or -EINVAL/-ENOMEM/-EIO from the
 * guard; on failure the result must not be forwarded. */
int gateway_redact_result(const struct guard *guard, const char *classification, json_t *result,
                          struct guard_findings *findings, dome_error *err);

/* Redact one text that is not part of a result (progress message, backend error message) with the
 * "content" rule above. *out is malloc'd. Returns 0 or the guard's error. */
int gateway_redact_text(const struct guard *guard, const char *classification, const char *text, char **out,
                        struct guard_findings *findings, dome_error *err);

#endif
