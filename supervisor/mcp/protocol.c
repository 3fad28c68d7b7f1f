/* The MCP methods served over POST and DELETE: lifecycle (initialize, notifications/initialized),
 * ping, tools/list, tools/call, notifications/cancelled (MCP 2025-11-25 basic/lifecycle,
 * basic/utilities, server/tools; basic/transports for the status codes). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "supervisor/mcp/mcp_internal.h"

struct MHD_Response *mcp_http_json_response(json_t *body) {
  char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
  json_decref(body);
  struct MHD_Response *response;
  if (text) {
    response = MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE);
    MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
  } else {
    response = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
  }
  return response;
}

static struct MHD_Response *error_response(const json_t *id, int code, const char *message, unsigned http,
                                           unsigned *status) {
  *status = http;
  return mcp_http_json_response(mcp_jsonrpc_error(id, code, message));
}

static json_t *initialize_result(mcp_server *server, const char *version) {
  json_t *result = json_pack("{s:s,s:{s:{s:b},s:{}},s:{s:s,s:s}}", "protocolVersion", version, "capabilities",
                             "tools", "listChanged", 0, "logging", "serverInfo", "name",
                             server->options.server_name, "version", server->options.server_version);
  /* tasks (basic/utilities/tasks) exist from revision 2025-11-25 */
  if (strcmp(version, "2025-11-25") == 0)
    json_object_set_new(json_object_get(result, "capabilities"), "tasks",
                        json_pack("{s:{},s:{},s:{s:{s:{}}}}", "list", "cancel", "requests", "tools", "call"));
  if (server->options.instructions)
    json_object_set_new(result, "instructions", json_string(server->options.instructions));
  return result;
}

static struct MHD_Response *handle_initialize(mcp_server *server, const struct mcp_post *post, json_t *id,
                                              json_t *params, unsigned *status) {
  json_t *requested = json_object_get(params, "protocolVersion");
  if (!json_is_string(requested))
    return error_response(id, MCP_INVALID_PARAMS, "initialize: params.protocolVersion must be a string", 200,
                          status);
  if (!json_is_object(json_object_get(params, "capabilities")) ||
      !json_is_object(json_object_get(params, "clientInfo")))
    return error_response(id, MCP_INVALID_PARAMS,
                          "initialize: params.capabilities and params.clientInfo are required", 200, status);
  if (!mcp_session_rate_allow(server, post->identity.agent)) {
    if (server->handlers.session_event)
      server->handlers.session_event(server->handlers.context, "session.refused", post->identity.agent,
                                     post->identity.gateway, "", "rate", true);
    char text[160];
    snprintf(text, sizeof text, "too many new sessions: at most %u a second for this agent",
             server->options.session_rate_per_agent);
    return error_response(id, MCP_SERVER_OVERLOADED, text, 429, status);
  }
  if (server->handlers.admit) {
    dome_error err = {0};
    if (server->handlers.admit(server->handlers.context, &post->identity, &err) < 0) {
      pthread_mutex_lock(&server->lock);
      server->stats.sessions_refused++;
      pthread_mutex_unlock(&server->lock);
      return error_response(id, MCP_INVALID_REQUEST, err.message[0] ? err.message : "initialize refused", 403,
                            status);
    }
  }
  const char *version = mcp_negotiate_version(json_string_value(requested));
  struct mcp_session *session = NULL;
  int rc = mcp_session_create(server, &post->identity, version, &session);
  if (rc == -EUSERS) {
    char text[160];
    snprintf(text, sizeof text, "too many sessions for this agent: all %u are busy",
             server->options.max_sessions_per_agent);
    return error_response(id, MCP_SERVER_OVERLOADED, text, 429, status);
  }
  if (rc == -EIO)
    return error_response(
        id, MCP_INTERNAL_ERROR,
        "initialize: the server cannot record this session (journal refused it; fail closed)", 500, status);
  if (rc < 0) return error_response(id, MCP_SERVER_OVERLOADED, "too many sessions", 503, status);
  struct MHD_Response *response =
      mcp_http_json_response(mcp_jsonrpc_result(id, initialize_result(server, version)));
  MHD_add_response_header(response, "Mcp-Session-Id", session->id);
  mcp_session_release(server, session);
  *status = 200;
  return response;
}

/* A request whose id's JSON text is over options.max_request_id_bytes: the refusal (-32600 once the
 * request_refused handler made it durable, else -32603), or NULL when the id is within the bound. */
static json_t *refuse_long_id(mcp_server *server, const struct mcp_post *post, const json_t *id,
                              const char *method, const json_t *params) {
  if (server->options.max_request_id_bytes == 0) return NULL;
  char *text = json_dumps(id, JSON_COMPACT | JSON_ENCODE_ANY);
  if (text == NULL) return mcp_jsonrpc_error(NULL, MCP_INTERNAL_ERROR, "cannot encode the request id");
  size_t length = strlen(text);
  if (length <= server->options.max_request_id_bytes) {
    free(text);
    return NULL;
  }
  char reason[128];
  snprintf(reason, sizeof reason, "request id of %zu bytes (at most %zu)", length,
           server->options.max_request_id_bytes);
  dome_error err = {0};
  int rc = server->handlers.request_refused
               ? server->handlers.request_refused(server->handlers.context, &post->identity,
                                                  post->session_header, method, params, text, reason, &err)
               : 0;
  free(text);
  char message[400];
  if (rc < 0) {
    snprintf(message, sizeof message, "%.60s refused (%s) but the refusal cannot be recorded: %.120s", method,
             reason, err.message);
    return mcp_jsonrpc_error(NULL, MCP_INTERNAL_ERROR, message);
  }
  snprintf(message, sizeof message, "%.60s refused: %s", method, reason);
  return mcp_jsonrpc_error(NULL, MCP_INVALID_REQUEST, message);
}

/* Session checks shared by POST and DELETE. Returns the session (+1 ref) or NULL with *response. */
static struct mcp_session *lookup_session(mcp_server *server, const mcp_identity *identity,
                                          const char *header, struct MHD_Response **response,
                                          unsigned *status) {
  if (header == NULL) {
    *response = error_response(NULL, MCP_INVALID_REQUEST, "missing Mcp-Session-Id header", 400, status);
    return NULL;
  }
  struct mcp_session *session = mcp_session_find(server, header);
  char owner[MCP_SESSION_NODE_MAX + 1];
  if (session == NULL && server->session_node[0] && mcp_session_id_node(header, owner, sizeof owner) &&
      strcmp(owner, server->session_node) != 0) {
    char message[MCP_SESSION_NODE_MAX + 64];
    snprintf(message, sizeof message, "session not found: it belongs to node %s", owner);
    *response = error_response(NULL, MCP_INVALID_REQUEST, message, 404, status);
    if (*response) MHD_add_response_header(*response, MCP_SESSION_NODE_HEADER, owner);
    return NULL;
  }
  if (session == NULL) {
    *response = error_response(NULL, MCP_INVALID_REQUEST, "session not found", 404, status);
    return NULL;
  }
  if (strcmp(session->agent, identity->agent) != 0 || strcmp(session->gateway, identity->gateway) != 0) {
    mcp_session_release(server, session);
    /* Not this caller's session: answer as if it did not exist. */
    *response = error_response(NULL, MCP_INVALID_REQUEST, "session not found", 404, status);
    return NULL;
  }
  return session;
}

/* The one revision whose transport allows JSON-RPC batches (2025-06-18 removed them). */
#define MCP_BATCH_REVISION "2025-03-26"

/* tools/call: validate, then start the call on *stream (created on first use, its MHD response in
 * *stream_response). Returns NULL when the call started, else the error message to answer with
 * (*http: its status when it is the only message of the POST). */
static json_t *start_tools_call(mcp_server *server, struct mcp_session *session, const struct mcp_post *post,
                                json_t *id, json_t *params, struct mcp_stream **stream,
                                struct MHD_Response **stream_response, unsigned *http) {
  json_t *name = json_object_get(params, "name");
  json_t *arguments = json_object_get(params, "arguments");
  if (!json_is_string(name))
    return mcp_jsonrpc_error(id, MCP_INVALID_PARAMS, "tools/call: params.name must be a string");
  if (arguments != NULL && !json_is_object(arguments))
    return mcp_jsonrpc_error(id, MCP_INVALID_PARAMS, "tools/call: params.arguments must be an object");
  if (server->handlers.call_admit) { /* a refusal costs no thread, no stream and no call */
    char *request_id = json_dumps(id, JSON_COMPACT | JSON_ENCODE_ANY);
    dome_error admit_err = {0};
    int admitted =
        server->handlers.call_admit(server->handlers.context, &post->identity, json_string_value(name),
                                    session->id, request_id ? request_id : "null", &admit_err);
    free(request_id);
    if (admitted < 0) return mcp_jsonrpc_error(id, MCP_SERVER_OVERLOADED, admit_err.message);
  }
  json_t *meta = json_object_get(params, "_meta");
  json_t *token = json_object_get(meta, "progressToken");
  if (token && !json_is_string(token) && !json_is_integer(token)) token = NULL;
  json_t *task = json_object_get(params, "task");
  if (task && strcmp(session->protocol_version, "2025-11-25") == 0) { /* answered at once */
    json_t *empty = arguments ? NULL : json_object();
    json_t *answer = mcp_task_start(server, session, &post->identity, id, json_string_value(name),
                                    arguments ? arguments : empty, task, token, post->received_us);
    json_decref(empty);
    return answer;
  }
  if (*stream == NULL) {
    *stream = mcp_stream_create(server, session, post->socket_fd, stream_response);
    if (*stream == NULL) {
      *http = 503;
      return mcp_jsonrpc_error(id, MCP_INTERNAL_ERROR, "cannot allocate the event stream");
    }
  }
  json_t *empty = arguments ? NULL : json_object();
  dome_error err = {0};
  int rc = mcp_call_start(server, session, &post->identity, id, json_string_value(name),
                          arguments ? arguments : empty, token, post->received_us, *stream, NULL, &err);
  json_decref(empty);
  if (rc < 0) {
    *http = 503;
    return mcp_jsonrpc_error(id, MCP_INTERNAL_ERROR, err.message);
  }
  return NULL;
}

/* A request other than initialize, in a session. Returns the answer, or NULL when it is a tools/call
 * that started on *stream. *http is the status to use when it is the only message of the POST. */
static json_t *handle_request(mcp_server *server, struct mcp_session *session, const struct mcp_post *post,
                              json_t *id, const char *method, json_t *params, struct mcp_stream **stream,
                              struct MHD_Response **stream_response, unsigned *http) {
  *http = 200;
  if (strcmp(method, "ping") == 0) return mcp_jsonrpc_result(id, json_object());
  if (strcmp(method, "tools/list") == 0) {
    json_t *tools = server->handlers.list_tools(server->handlers.context, &post->identity);
    if (tools == NULL)
      return mcp_jsonrpc_error(id, MCP_INTERNAL_ERROR,
                               "tools/list: the server cannot record this listing (fail closed)");
    size_t index;
    json_t *tool;
    json_array_foreach(tools, index, tool) { /* every call may run as a task (2025-11-25) */
      if (strcmp(session->protocol_version, "2025-11-25") == 0 && !json_object_get(tool, "execution"))
        json_object_set_new(tool, "execution", json_pack("{s:s}", "taskSupport", "optional"));
    }
    return mcp_jsonrpc_result(id, json_pack("{s:o}", "tools", tools));
  }
  if (strncmp(method, "tasks/", 6) == 0 &&
      (strcmp(method, "tasks/get") == 0 || strcmp(method, "tasks/result") == 0 ||
       strcmp(method, "tasks/cancel") == 0 || strcmp(method, "tasks/list") == 0) &&
      strcmp(session->protocol_version, "2025-11-25") == 0)
    return mcp_task_request(server, session, &post->identity, id, method, params, post->socket_fd, stream,
                            stream_response);
  if (strcmp(method, "tools/call") == 0)
    return start_tools_call(server, session, post, id, params, stream, stream_response, http);
  if (strcmp(method, "logging/setLevel") == 0) { /* server/utilities/logging */
    json_t *level = json_object_get(params, "level");
    int severity = json_is_string(level) ? mcp_log_level_parse(json_string_value(level)) : -1;
    if (severity < 0)
      return mcp_jsonrpc_error(id, MCP_INVALID_PARAMS,
                               "logging/setLevel: params.level must be one of debug, info, notice, warning, "
                               "error, critical, alert, emergency");
    atomic_store(&session->log_level, severity);
    return mcp_jsonrpc_result(id, json_object());
  }
  char text[200];
  snprintf(text, sizeof text, "method not found: %.120s", method);
  return mcp_jsonrpc_error(id, MCP_METHOD_NOT_FOUND, text);
}

/* Notifications and client responses: acted on where they mean something, never answered. */
static void handle_notification(mcp_server *server, struct mcp_session *session, enum mcp_message_kind kind,
                                const char *method, json_t *params) {
  if (kind == MCP_MESSAGE_NOTIFICATION && strcmp(method, "notifications/initialized") == 0) {
    pthread_mutex_lock(&server->lock);
    session->initialized = true;
    pthread_mutex_unlock(&server->lock);
  } else if (kind == MCP_MESSAGE_NOTIFICATION && strcmp(method, "notifications/cancelled") == 0) {
    json_t *request_id = json_object_get(params, "requestId");
    if (request_id) mcp_session_cancel_request(server, session, request_id);
  }
  /* other notifications and client responses are accepted and ignored */
}

/* Drop a stream no call was started on. */
static void stream_discard(struct mcp_stream *stream, struct MHD_Response *stream_response) {
  if (stream == NULL) return;
  mcp_stream_seal(stream);
  MHD_destroy_response(stream_response);
}

static bool batch_has_initialize(const json_t *batch) {
  size_t index;
  json_t *element;
  json_array_foreach(batch, index, element) {
    json_t *method = json_object_get(element, "method");
    if (json_is_string(method) && strcmp(json_string_value(method), "initialize") == 0) return true;
  }
  return false;
}

/* A JSON-RPC batch (JSON-RPC 2.0 section 6; MCP 2025-03-26 basic/transports "Sending Messages to the
 * Server": the body may be an array of requests, notifications and responses). */
static struct MHD_Response *handle_batch(mcp_server *server, const struct mcp_post *post, json_t *batch,
                                         unsigned *status) {
  size_t count = json_array_size(batch);
  if (count == 0)
    return error_response(NULL, MCP_INVALID_REQUEST,
                          "empty JSON-RPC batch: an array needs at least one message", 400, status);
  if (post->session_header == NULL && batch_has_initialize(batch))
    return error_response(NULL, MCP_INVALID_REQUEST,
                          "initialize must not be part of a JSON-RPC batch: send it alone", 400, status);
  struct MHD_Response *response = NULL;
  struct mcp_session *session =
      lookup_session(server, &post->identity, post->session_header, &response, status);
  if (session == NULL) return response;
  char text[300];
  if (post->version_header && !mcp_version_supported(post->version_header)) {
    response = error_response(NULL, MCP_INVALID_REQUEST, "unsupported MCP-Protocol-Version", 400, status);
  } else if (strcmp(session->protocol_version, MCP_BATCH_REVISION) != 0) {
    snprintf(text, sizeof text,
             "JSON-RPC batches are not supported in MCP revision %s (negotiated for this session); "
             "only " MCP_BATCH_REVISION " allows them: send one message per POST",
             session->protocol_version);
    response = error_response(NULL, MCP_INVALID_REQUEST, text, 400, status);
  } else if (count > server->options.max_batch_messages) {
    snprintf(text, sizeof text, "JSON-RPC batch of %zu messages exceeds the limit of %u", count,
             server->options.max_batch_messages);
    response = error_response(NULL, MCP_INVALID_REQUEST, text, 400, status);
  } else if (post->length > server->options.max_batch_bytes) {
    snprintf(text, sizeof text, "JSON-RPC batch of %zu bytes exceeds the limit of %zu bytes", post->length,
             server->options.max_batch_bytes);
    response = error_response(NULL, MCP_INVALID_REQUEST, text, 400, status);
  }
  if (response) {
    mcp_session_release(server, session);
    return response;
  }

  json_t *answers = json_array();
  struct mcp_stream *stream = NULL;
  struct MHD_Response *stream_response = NULL;
  size_t calls = 0, index;
  json_t *element;
  json_array_foreach(batch, index, element) {
    const char *why = NULL;
    enum mcp_message_kind kind =
        json_is_array(element) ? MCP_MESSAGE_INVALID : mcp_message_classify(element, &why);
    if (json_is_array(element)) why = "a batch element must be a JSON object, not an array";
    json_t *id = json_object_get(element, "id");
    if (!json_is_string(id) && !json_is_integer(id)) id = NULL;
    if (kind == MCP_MESSAGE_INVALID) {
      snprintf(text, sizeof text, "batch element %zu: %s", index, why);
      json_array_append_new(answers, mcp_jsonrpc_error(id, MCP_INVALID_REQUEST, text));
      continue;
    }
    const char *method = json_string_value(json_object_get(element, "method"));
    json_t *params = json_object_get(element, "params");
    json_t *empty_params = params ? NULL : json_object();
    json_t *refusal = kind == MCP_MESSAGE_REQUEST
                          ? refuse_long_id(server, post, id, method, params ? params : empty_params)
                          : NULL;
    if (refusal) {
      json_array_append_new(answers, refusal);
    } else if (kind != MCP_MESSAGE_REQUEST) {
      handle_notification(server, session, kind, method, params ? params : empty_params);
    } else if (strcmp(method, "initialize") == 0) {
      snprintf(text, sizeof text, "batch element %zu: initialize must not be part of a JSON-RPC batch",
               index);
      json_array_append_new(answers, mcp_jsonrpc_error(id, MCP_INVALID_REQUEST, text));
    } else {
      unsigned http;
      json_t *answer = handle_request(server, session, post, id, method, params ? params : empty_params,
                                      &stream, &stream_response, &http);
      if (answer)
        json_array_append_new(answers, answer);
      else
        calls++;
    }
    json_decref(empty_params);
  }
  mcp_session_release(server, session);

  if (calls == 0) {
    stream_discard(stream, stream_response);
    if (json_array_size(answers) == 0) { /* only notifications and responses */
      json_decref(answers);
      *status = 202;
      return MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    }
    *status = 200;
    return mcp_http_json_response(answers);
  }
  /* the calls answer as they finish; the other answers go first, one SSE event per message */
  json_array_foreach(answers, index, element) mcp_stream_send(stream, json_incref(element));
  json_decref(answers);
  mcp_stream_seal(stream);
  *status = 200;
  return stream_response;
}

struct MHD_Response *mcp_protocol_post(mcp_server *server, const struct mcp_post *post, unsigned *status) {
  json_error_t parse_error;
  json_t *message =
      json_loadb(post->body, post->length, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &parse_error);
  if (message == NULL) {
    char text[300];
    snprintf(text, sizeof text, "parse error at line %d column %d: %s", parse_error.line, parse_error.column,
             parse_error.text);
    return error_response(NULL, MCP_PARSE_ERROR, text, 400, status);
  }
  if (json_is_array(message)) {
    struct MHD_Response *response = handle_batch(server, post, message, status);
    json_decref(message);
    return response;
  }
  const char *why = NULL;
  enum mcp_message_kind kind = mcp_message_classify(message, &why);
  json_t *id = json_object_get(message, "id");
  if (kind == MCP_MESSAGE_INVALID) {
    struct MHD_Response *response = error_response(json_is_string(id) || json_is_integer(id) ? id : NULL,
                                                   MCP_INVALID_REQUEST, why, 400, status);
    json_decref(message);
    return response;
  }
  const char *method = json_string_value(json_object_get(message, "method"));
  json_t *params = json_object_get(message, "params");
  json_t *empty_params = NULL;
  if (params == NULL) params = empty_params = json_object();
  struct MHD_Response *response = NULL;

  json_t *refusal = kind == MCP_MESSAGE_REQUEST ? refuse_long_id(server, post, id, method, params) : NULL;
  if (refusal) { /* before any session lookup or other work, whatever the method */
    *status =
        json_integer_value(json_object_get(json_object_get(refusal, "error"), "code")) == MCP_INVALID_REQUEST
            ? 400
            : 500;
    response = mcp_http_json_response(refusal);
    goto out;
  }
  if (kind == MCP_MESSAGE_REQUEST && strcmp(method, "initialize") == 0) {
    if (post->version_header && !mcp_version_supported(post->version_header))
      response = error_response(id, MCP_INVALID_REQUEST, "unsupported MCP-Protocol-Version", 400, status);
    else
      response = handle_initialize(server, post, id, params, status);
    goto out;
  }
  struct mcp_session *session =
      lookup_session(server, &post->identity, post->session_header, &response, status);
  if (session == NULL) goto out;
  /* Any supported revision is accepted on later requests (the conformance suite sends an older one
   * than negotiated); an unsupported or malformed one is refused (basic/transports). */
  if (post->version_header && !mcp_version_supported(post->version_header)) {
    response = error_response(NULL, MCP_INVALID_REQUEST, "unsupported MCP-Protocol-Version", 400, status);
  } else if (kind != MCP_MESSAGE_REQUEST) {
    handle_notification(server, session, kind, method, params);
    response = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    *status = 202;
  } else {
    struct mcp_stream *stream = NULL;
    struct MHD_Response *stream_response = NULL;
    unsigned http = 200;
    json_t *answer =
        handle_request(server, session, post, id, method, params, &stream, &stream_response, &http);
    if (answer) {
      stream_discard(stream, stream_response);
      response = mcp_http_json_response(answer);
      *status = http;
    } else {
      mcp_stream_seal(stream);
      response = stream_response;
      *status = 200;
    }
  }
  mcp_session_release(server, session);
out:
  json_decref(empty_params);
  json_decref(message);
  return response;
}

struct MHD_Response *mcp_protocol_get(mcp_server *server, const mcp_identity *identity,
                                      const char *session_header, const char *last_event_id, int socket_fd,
                                      unsigned *status) {
  struct MHD_Response *response = NULL;
  struct mcp_session *session = lookup_session(server, identity, session_header, &response, status);
  if (session == NULL) return response;
  response = mcp_stream_get(server, session, last_event_id, socket_fd, status);
  mcp_session_release(server, session);
  return response;
}

struct MHD_Response *mcp_protocol_delete(mcp_server *server, const mcp_identity *identity, const char *header,
                                         unsigned *status) {
  struct MHD_Response *response = NULL;
  struct mcp_session *session = lookup_session(server, identity, header, &response, status);
  if (session == NULL) return response;
  mcp_session_close(server, session);
  mcp_session_release(server, session);
  *status = 200;
  return MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
}
