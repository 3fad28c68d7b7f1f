/* dome control plane: the state domed keeps under --state-dir (agents and their bearer tokens, quotas
 * per capability, the tool registry, versions of the Cedar rules) and the control socket the `dome`
 * CLI talks to.
 *
 * State files (JSON, each replaced atomically: write a temporary file, fsync, rename, fsync the
 * directory): agents.json, quotas.json, tools.json, rules/index.json with rules/<version>.cedar,
 * secrets/<tool>.env (mode 0600). Bearer tokens are shown once at registration; only their BLAKE2b-256
 * hash (libsodium crypto_generichash) is stored.
 *
 * Control protocol: a SOCK_STREAM Unix socket; each request is one line of JSON
 * {"command": "agents.register", "args": {...}} and each answer one line {"ok": true, "result": ...} or
 * {"ok": false, "error": "one-line message"}. A streaming command (audit.stream) answers with one line
 * {"event": {...}} per event until either side closes. Requests are at most CONTROL_MAX_REQUEST bytes.
 * Peers are checked with SO_PEERCRED: root, domed's own uid, or a member of the configured group. */
#ifndef DOME_CONTROL_CONTROL_H
#define DOME_CONTROL_CONTROL_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "supervisor/common/error.h"

#define CONTROL_DEFAULT_SOCKET "/run/dome/control.sock"
#define CONTROL_MAX_REQUEST (8u << 20)
#define CONTROL_TOKEN_PREFIX "dome_"
#define CONTROL_TOKEN_SIZE 64 /* buffer for a token: "dome_" + 43 base64url characters + NUL */
#define CONTROL_NAME_MAX 128

/* ------------------------------------------------------------------ state store */

typedef struct control_store control_store;

/* A check every change of the store's JSON documents passes right before it is written (the store's
 * lock held; must not call back into the store): 0 lets the change take effect, -errno with *err refuses
 * it and the store stays unchanged (the caller gets that error). domed journals the administrative
 * event of the change there, so that no change takes effect before its record is durable. */
typedef int (*control_store_commit_hook)(void *context, dome_error *err);
/* Install `hook` (NULL: none) called with `context`; set once, before the store is shared. */
void control_store_set_commit_hook(control_store *store, control_store_commit_hook hook, void *context);

/* A change of one of the replicated documents, offered before the commit hook and the write (the store's
 * lock held; must not call back into the store): `document` is "agents", "quotas", "tools", "gateways"
 * or "rules" (rules/index.json; the text of a new version is already in rules/<version>.cedar),
 * `current` the committed version and `next` the one about to be written. 0 lets the change go on, -errno
 * with *err refuses it and nothing changes. Fleet mode writes the change to the fleet's key-value buckets
 * here (compare-and-set), so that a change the fleet refused never takes effect on one node alone. */
typedef int (*control_store_replicate_hook)(void *context, const char *document, const json_t *current,
                                            const json_t *next, dome_error *err);
/* Install `hook` (NULL: none); set once, before the store is shared. */
void control_store_set_replicate_hook(control_store *store, control_store_replicate_hook hook, void *context);

/* A copy of the replicated document `document` (as named for the replicate hook), a new reference, or NULL
 * for an unknown name. */
json_t *control_store_document(control_store *store, const char *document);

/* Apply one entry of a replicated document received from the fleet, without the hooks (the change was
 * committed by the node that made it): for "agents", "quotas", "tools" and "gateways", set member `key`
 * of the document to `value` (NULL: remove it); for "rules", key "index" replaces rules/index.json with
 * `value` and a key of decimal digits N writes `value`'s string member `text` to rules/N.cedar.
 * Written durably as any change. Returns 1 when the document changed, 0 when it already held that value,
 * -EINVAL (unknown document, invalid key or value: the message names it), -errno writing. */
int control_store_apply_entry(control_store *store, const char *document, const char *key,
                              const json_t *value, dome_error *err);

/* Open (creating with mode 0700 when missing) the state directory and load its files.
 * Returns 0, or -errno with *err naming the file (and line:column for malformed JSON). */
int control_store_open(const char *state_dir, control_store **store, dome_error *err);
void control_store_close(control_store *store);
const char *control_store_dir(const control_store *store);

/* A valid name for agents, tools, capabilities, gateways: 1..127 of [A-Za-z0-9._-], not starting with
 * '.' or '-'. */
bool control_name_valid(const char *name);

/* --- agents --- */

#define CONTROL_TTL_MAX_S (3650ll * 86400) /* longest token lifetime: ten years */

/* Parse a token lifetime `N[s|m|h|d]` (no unit: seconds), 1 s .. 3650 d. Returns 0 and *seconds, or
 * -EINVAL with *err quoting the text. */
int control_ttl_parse(const char *text, int64_t *seconds, dome_error *err);

/* Register agent `name` with a comma-separated capability list (may be empty). Writes the new bearer
 * token (shown to the operator once) into token[CONTROL_TOKEN_SIZE]. Errors: -EINVAL bad name or
 * capability, -EEXIST agent exists, -errno writing agents.json. */
int control_agent_register(control_store *store, const char *name, const char *capabilities,
                           char token[CONTROL_TOKEN_SIZE], dome_error *err);

/* Register agent `name` as a delegate of `delegates_to` (NULL or "": an ordinary agent, as
 * control_agent_register): its record keeps `delegates_to`, and every call it makes is on behalf of
 * that identity (context.actas; grants and capabilities narrowed to the parent's, see gateway.h).
 * The parent must be a registered agent other than `name` that is not itself a delegate.
 * `expires`: when the token stops working, Unix seconds (0: never; `dome agents register --ttl`).
 * Errors: as control_agent_register, plus -ENOENT unknown parent, -EINVAL a parent that is `name` or a
 * delegate ("--delegates-to: ..."), -EINVAL an expiry that is negative or already past ("--ttl: ..."). */
int control_agent_register_delegate(control_store *store, const char *name, const char *capabilities,
                                    const char *delegates_to, int64_t expires, char token[CONTROL_TOKEN_SIZE],
                                    dome_error *err);

#define CONTROL_DELEGATED_TOKENS_MAX 64 /* most tokens minted with --act-as per agent */

/* Mint an additional token for agent `name` that acts as `act_as` (`dome agents token --act-as`): a
 * request with it is on behalf of act_as (as for a registered delegate). The agent's own token keeps
 * working; a second token for the same act_as replaces the first; rotating the agent's token retires
 * all of them. The record lists them as `delegated_tokens: [{act_as, created}]` (never the hashes).
 * Errors: -ENOENT unknown agent or act_as, -EINVAL revoked agent, act_as == name, act_as a delegate, or
 * an agent registered as delegate of another identity, an expiry already past; -ENOSPC more than
 * CONTROL_DELEGATED_TOKENS_MAX; `expires` as for control_agent_register_delegate (kept as the entry's
 * `expires`);
 * -errno writing agents.json. */
int control_agent_delegated_token(control_store *store, const char *name, const char *act_as, int64_t expires,
                                  char token[CONTROL_TOKEN_SIZE], dome_error *err);

/* Set an agent's status: "active" (resume), "suspended" or "revoked" (final: cannot be resumed).
 * Errors: -ENOENT unknown agent, -EINVAL bad status or a revoked agent, -errno writing. */
int control_agent_set_status(control_store *store, const char *name, const char *status, dome_error *err);

/* Issue a new token for an active agent (the old one and every token minted with --act-as stop
 * working) that expires at `expires` (Unix seconds, 0: never; the record's `token_expires`). Errors as
 * register. */
int control_agent_rotate_token(control_store *store, const char *name, int64_t expires,
                               char token[CONTROL_TOKEN_SIZE], dome_error *err);

/* Array of {name, capabilities, status, created, updated, delegates_to?}: never the token hash. New
 * reference. */
json_t *control_agent_list(control_store *store);

/* One agent's record without its token hash: {name, capabilities, status, created, updated, and any
 * extension members such as gateways, delegates_to}, or NULL when unknown. New reference. */
json_t *control_agent_get(control_store *store, const char *name);

/* Set (value not NULL) or remove (value NULL) an extension member of an agent's record, e.g. "gateways"
 * (array of gateway names). The members name, capabilities, status, token_hash, created, updated and
 * the delegation members delegates_to, delegated_tokens, act_as are refused (-EINVAL). Errors: -ENOENT
 * unknown agent, -errno writing. */
int control_agent_set_member(control_store *store, const char *name, const char *member, json_t *value,
                             dome_error *err);

/* Resolve a bearer token. Returns a new reference to the record (as control_agent_get) of an active agent,
 * plus `act_as` (string) when the token was minted with --act-as,
 * or NULL with *err: "invalid token" (-EACCES), "agent `x` is suspended" / "is revoked" (-EACCES).
 * Constant time in the token (hash compared with sodium_memcmp). */
json_t *control_agent_authenticate(control_store *store, const char *token, dome_error *err);

/* Why a token was refused (the `reason` of the journal's auth.failed events). */
enum control_token_refusal {
  CONTROL_TOKEN_ACCEPTED,
  CONTROL_TOKEN_MISSING,   /* no bearer token */
  CONTROL_TOKEN_INVALID,   /* malformed or unknown */
  CONTROL_TOKEN_EXPIRED,   /* past its `--ttl` (RFC 6750 section 3.1 invalid_token) */
  CONTROL_TOKEN_SUSPENDED, /* the agent is suspended */
  CONTROL_TOKEN_REVOKED,   /* the agent is revoked */
};
struct control_token_check {
  enum control_token_refusal refusal;
  char agent[CONTROL_NAME_MAX]; /* the agent the token belongs to, "" when unknown */
};
/* "missing", "invalid", "expired", "suspended", "revoked" ("accepted" for CONTROL_TOKEN_ACCEPTED). */
const char *control_token_refusal_name(enum control_token_refusal refusal);

/* control_agent_authenticate at time `now` (Unix seconds), with why a token was refused in *check:
 * an expired token (now >= its expiry) gives NULL with -EKEYEXPIRED "token of agent `x` expired";
 * the other refusals as control_agent_authenticate (-EACCES). */
json_t *control_agent_authenticate_at(control_store *store, const char *token, int64_t now,
                                      struct control_token_check *check, dome_error *err);

/* --- console operators (operators.json): people who read the console, not agents --- */

#define CONTROL_OPERATOR_TOKEN_PREFIX "domeop_"

/* True for the roles "auditor" (reads everything) and "operator" (also suspends and resumes agents). */
bool control_operator_role_valid(const char *role);

/* Add operator `name` with `role`; writes the one-time login token ("domeop_" + 43 base64url
 * characters) into token[CONTROL_TOKEN_SIZE]; only its BLAKE2b-256 hash is kept. Errors: -EINVAL bad
 * name ("--name: ...") or role ("--role: ..."), -EEXIST name taken (revoked names stay taken), -errno
 * writing operators.json. */
int control_operator_add(control_store *store, const char *name, const char *role,
                         char token[CONTROL_TOKEN_SIZE], dome_error *err);
/* Revoke operator `name` (final): its token stops opening the console. -ENOENT unknown, -errno writing. */
int control_operator_revoke(control_store *store, const char *name, dome_error *err);
/* Array of {name, role, status, created, updated}: never the token hash. New reference. */
json_t *control_operator_list(control_store *store);
/* One operator as listed, or NULL when unknown. New reference. */
json_t *control_operator_get(control_store *store, const char *name);
/* Resolve a login token: a new reference to the record (as listed) of an active operator, or NULL with
 * -EACCES in *err: "invalid login token" (malformed, unknown) or "operator `x` is revoked". Compares the
 * hash with every record in constant time (sodium_memcmp). */
json_t *control_operator_authenticate(control_store *store, const char *token, dome_error *err);

/* --- quotas per capability --- */

struct control_quota {
  uint64_t memory_bytes;     /* cgroup memory.max, bytes (default 256 MiB) */
  double cpus;               /* cpu.max as CPUs (default 1) */
  uint64_t pids;             /* pids.max (default 64) */
  uint64_t timeout_ms;       /* wall-clock limit, milliseconds (default 10000) */
  uint64_t workspace_bytes;  /* /workspace tmpfs size, bytes (default 64 MiB) */
  uint64_t output_bytes;     /* per stream, bytes (default 1 MiB) */
  bool egress;               /* network egress allowed at all (default false; rules refine) */
  uint64_t egress_bytes;     /* byte quota of a jail's egress path, both directions, bytes; 0 (default) =
                                domed's `egress_quota` configuration applies */
  uint64_t blob_bytes;       /* bytes the capability's inputs may take in the blob store beside the journal
                                (default 256 MiB); larger inputs are journalled by digest only */
  uint64_t mcp_output_bytes; /* bytes of each output stream in the MCP result; 0 (default) = domed's
                                `mcp_output_limit` configuration applies */
  uint64_t concurrency;      /* executions one agent runs at once for this capability; 0 (default) = up to
                                domed's max_jails. Further calls wait in the agent's own queue. */
  uint64_t task_ttl_ms;      /* longest TTL of an MCP task of this capability, milliseconds; 0 (default) =
                                domed's task_ttl_max_s applies */
  uint64_t tasks;            /* MCP tasks one agent holds; 0 (default) = domed's max_tasks_per_agent */

  /* sandbox sessions (docs/sessions.md) */
  uint64_t sessions;            /* sessions one agent holds at once (default 0: sessions off, the session
                                   tools not listed) */
  uint64_t session_idle_ms;     /* a session unused this long is closed (default 600000) */
  uint64_t session_lifetime_ms; /* a session is closed this long after its creation (default 3600000) */
  /* the whole cgroup of a session's jail (its kernel, every process it starts); 0 (default): the
   * capability's memory_bytes, cpus, pids */
  uint64_t session_memory_bytes;
  double session_cpus;
  uint64_t session_pids;
  uint64_t snapshots;      /* snapshots one agent keeps (default 16; 0: snapshot_session refused) */
  uint64_t snapshot_bytes; /* bytes of all of one agent's snapshot files, as stored (default 256 MiB) */
};

void control_quota_defaults(struct control_quota *quota);

/* `quota` as a session's jail gets it: memory_bytes, cpus and pids replaced by session_memory_bytes,
 * session_cpus and session_pids where those are set (non-zero); everything else copied. */
void control_quota_for_session(const struct control_quota *quota, struct control_quota *session);

/* Update the quota of `capability` with the members present in `fields` ({memory, cpus, pids,
 * timeout, workspace_size, output_limit, egress, egress_bytes, blob_bytes, mcp_output_limit, concurrency,
 * sessions, session_idle, session_lifetime, session_memory, session_cpus, session_pids, snapshots,
 * snapshot_bytes}:
 * sizes as numbers of bytes or strings with IEC suffixes, durations as seconds, egress as boolean or
 * "allow"/"deny"; egress_bytes may be 0, which hands the jails of the capability back to domed's
 * egress_quota, and mcp_output_limit 0 likewise to mcp_output_limit; concurrency an integer in [0, 4096],
 * 0 meaning max_jails; task_ttl a duration (0: domed's task_ttl_max_s), tasks an integer in [0, 100000]
 * (0: domed's max_tasks_per_agent); sessions an integer in [0, 1024], session_idle and session_lifetime
 * durations in (0, 86400] seconds; session_memory a size of at least 1M, session_cpus as cpus, session_pids
 * as pids, each also 0: the capability's memory, cpus, pids; snapshots an integer in [0, 1024],
 * snapshot_bytes a size of at least 1K). Unset members keep their value. Errors: -EINVAL naming the field,
 * -errno writing quotas.json. */
int control_quota_set(control_store *store, const char *capability, json_t *fields, dome_error *err);

/* The quota of `capability` (defaults when none was set). */
void control_quota_get(control_store *store, const char *capability, struct control_quota *quota);

/* Object capability -> {memory_bytes, cpus, pids, timeout_ms, workspace_bytes, output_bytes, egress,
 * egress_bytes, blob_bytes, concurrency, sessions, session_idle_ms, session_lifetime_ms,
 * session_memory_bytes, session_cpus, session_pids}. */
json_t *control_quota_list(control_store *store);

/* --- tool registry --- */

/* Add or replace a tool. `tool` holds {name, url, protocol, gateway?, capability?, builtin?,
 * field_classification?: {field: CLASS}}; `env_file` is the text of a KEY=VALUE file of secret
 * environment (NULL: keep the current secrets; "" clears them). Errors: -EINVAL naming the field
 * or env_file:line, -errno writing. */
int control_tool_add(control_store *store, json_t *tool, const char *env_file, dome_error *err);
int control_tool_remove(control_store *store, const char *name, dome_error *err); /* -ENOENT */
/* Array of tools; secrets appear only as the list of their names (secret_env). New reference. */
json_t *control_tool_list(control_store *store);
/* One tool (as listed) or NULL. New reference. */
json_t *control_tool_get(control_store *store, const char *name);
/* The secret environment of a tool as {NAME: value} (empty object when none). New reference. */
json_t *control_tool_secret_env(control_store *store, const char *name);

/* The credential header injected into every request to an external backend (`--auth-header-file`: one
 * "Name: value" line), kept in secrets/<tool>.auth.json (mode 0600), never listed back (the tool entry
 * carries only "auth_header": true). set: "" removes it in effect; -EINVAL bad name, -errno writing.
 * get: malloc'd text, or NULL when none. */
int control_tool_set_auth_header(control_store *store, const char *name, const char *text, dome_error *err);
char *control_tool_auth_header(control_store *store, const char *name);

/* Parse "field=CLASS,field=CLASS" (CLASS: [A-Z][A-Z0-9_]*) into an object. -EINVAL naming the item. */
int control_parse_field_classification(const char *text, json_t **classification, dome_error *err);
/* Parse KEY=VALUE lines (# comments, blank lines; KEY a shell identifier) into an object.
 * -EINVAL with "line N: ..." on a bad line. */
int control_parse_env_file(const char *text, json_t **environment, dome_error *err);

/* --- gateways and grants (gateways.json; an agent's grants are its record's `gateways` member) --- */

#define CONTROL_GATEWAY_DEFAULT "Default" /* always exists, never stored, cannot be removed */

/* Create gateway `name`. Errors: -EINVAL bad name, -EEXIST exists (or Default), -errno writing. */
int control_gateway_create(control_store *store, const char *name, dome_error *err);
/* True when `name` is Default or a created gateway. */
bool control_gateway_exists(control_store *store, const char *name);
/* Array of {name, agents: [granted agents], tools: [tools on it]}, Default first. New reference. */
json_t *control_gateway_list(control_store *store);
/* The gateways an agent is granted: its `gateways` member, or ["Default"] when absent. New reference,
 * or NULL for an unknown agent. */
json_t *control_agent_grants(control_store *store, const char *agent);
/* The gateways an agent record (an agents.json entry, as control_agent_get returns) is granted: the
 * strings of its `gateways` member, or ["Default"] when the member is absent or not an array. New
 * reference (an array of strings); never NULL. */
json_t *control_agent_record_grants(json_t *agent);
/* Grant (idempotent) / revoke an agent's gateway; *grants (may be NULL) receives the new list.
 * Errors: -ENOENT unknown agent or gateway, -errno writing agents.json. */
int control_gateway_grant(control_store *store, const char *agent, const char *gateway, json_t **grants,
                          dome_error *err);
int control_gateway_revoke(control_store *store, const char *agent, const char *gateway, json_t **grants,
                           dome_error *err);

/* --- rules versions --- */

/* Store `text` as a new version named `name`. Returns the version number (>= 1) or -errno. The new
 * version is not active until control_rules_activate. */
int control_rules_store(control_store *store, const char *name, const char *text, dome_error *err);
/* Make `version` the active one (written atomically to rules/index.json). -ENOENT unknown version. */
int control_rules_activate(control_store *store, int version, dome_error *err);
/* The active version number, 0 when no rules were ever applied. */
int control_rules_active(control_store *store);
/* Array of {version, name, sha256, created, active, bytes}. New reference. */
json_t *control_rules_list(control_store *store);
/* Text of `version` (0: the active one) as a malloc'd string, or NULL with *err (-ENOENT). */
char *control_rules_text(control_store *store, int version, dome_error *err);

/* ------------------------------------------------------------------ socket server */

typedef struct control_server control_server;

struct control_request {
  const char *command; /* e.g. "agents.register" */
  json_t *args;        /* object (borrowed) */
  uid_t uid;           /* peer credentials (SO_PEERCRED) */
  gid_t gid;
  pid_t pid;
  int fd; /* the connection, for streaming commands (control_send_event) */
};

/* Handle one request: return a new reference to the result (any JSON value), or NULL with *err.
 * Streaming commands send events with control_send_event and return when it fails (client gone) or
 * the server stops (control_server_stopping). Called from one thread per connection. */
typedef json_t *(*control_handler)(void *context, const struct control_request *request, dome_error *err);

/* Listen on `path` (parent directory created 0755; a stale socket replaced; the socket chmod 0660 and
 * chgrp'd to `group` when given). Peers allowed: uid 0, our euid, or members of `group` (NULL: none).
 * Errors: -errno naming the path, -ENOENT unknown group. */
int control_server_start(const char *path, const char *group, control_handler handler, void *context,
                         control_server **server, dome_error *err);
/* Stop accepting, wake streaming handlers, wait for connection threads, unlink the socket. */
void control_server_stop(control_server *server);
bool control_server_stopping(const control_server *server);

/* Send one {"event": event} line (event borrowed). Returns 0, or -errno when the peer is gone. */
int control_send_event(int fd, json_t *event);

/* ------------------------------------------------------------------ client */

/* The socket path: `flag` when not NULL, else $DOME_CONTROL_SOCKET, else CONTROL_DEFAULT_SOCKET. */
const char *control_socket_path(const char *flag);

/* Send one command and wait for its answer (timeout 60 s). Returns 0 and *result (new reference, may
 * be JSON null), or -errno: -ECONNREFUSED/-ENOENT "domed is not running at PATH", -EPROTO for a
 * malformed answer, -EREMOTEIO with the server's error message in *err. */
int control_call(const char *socket_path, const char *command, json_t *args, json_t **result,
                 dome_error *err);

/* Send a streaming command and call on_event(context, event) for each event until the server closes
 * (returns 0) or on_event returns non-zero (returns that value). Errors as control_call.
 * Used by `dome audit stream`: command "audit.stream", args {"agent": A} (optional) and
 * {"follow": true}; events are journal events as JSON objects. */
int control_stream(const char *socket_path, const char *command, json_t *args,
                   int (*on_event)(void *context, json_t *event), void *context, dome_error *err);

#endif
