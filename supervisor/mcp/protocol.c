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
  json_t *result = json_pack("{s:s,s:{s:{s:b}},s:{s:s,s:s}}", "protocolVersion", version, "capabilities",
                             "tools", "listChanged", 0, "serverInfo", "name", server->options.server_name,
                             "version", server->options.server_version);
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
  const char *version = mcp_negotiate_version(json_string_value(requested));
  struct mcp_session *session = NULL;
  if (mcp_session_create(server, &post->identity, version, &session) < 0)
    return error_response(id, MCP_SERVER_OVERLOADED, "too many sessions", 503, status);
  struct MHD_Response *response =
      mcp_http_json_response(mcp_jsonrpc_result(id, initialize_result(server, version)));
  MHD_add_response_header(response, "Mcp-Session-Id", session->id);
  mcp_session_release(server, session);
  *status = 200;
  return response;
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

static struct MHD_Response *handle_tools_call(mcp_server *server, struct mcp_session *session,
                                              const struct mcp_post *post, json_t *id, json_t *params,
                                              unsigned *status) {
  json_t *name = json_object_get(params, "name");
  json_t *arguments = json_object_get(params, "arguments");
  if (!json_is_string(name))
    return error_response(id, MCP_INVALID_PARAMS, "tools/call: params.name must be a string", 200, status);
  if (arguments != NULL && !json_is_object(arguments))
    return error_response(id, MCP_INVALID_PARAMS, "tools/call: params.arguments must be an object", 200,
                          status);
  json_t *empty = arguments ? NULL : json_object();
  json_t *meta = json_object_get(params, "_meta");
  json_t *token = json_object_get(meta, "progressToken");
  if (token && !json_is_string(token) && !json_is_integer(token)) token = NULL;
  struct MHD_Response *response = NULL;
  dome_error err = {0};
  int rc = mcp_call_start(server, session, &post->identity, id, json_string_value(name),
                          arguments ? arguments : empty, token, &response, &err);
  json_decref(empty);
  if (rc < 0) return error_response(id, MCP_INTERNAL_ERROR, err.message, 503, status);
  MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
  MHD_add_response_header(response, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
  *status = 200;
  return response;
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
    if (kind == MCP_MESSAGE_NOTIFICATION && strcmp(method, "notifications/initialized") == 0) {
      pthread_mutex_lock(&server->lock);
      session->initialized = true;
      pthread_mutex_unlock(&server->lock);
    } else if (kind == MCP_MESSAGE_NOTIFICATION && strcmp(method, "notifications/cancelled") == 0) {
      json_t *request_id = json_object_get(params, "requestId");
      if (request_id) mcp_session_cancel_request(server, session, request_id);
    }
    /* other notifications and client responses are accepted and ignored */
    response = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    *status = 202;
  } else if (strcmp(method, "ping") == 0) {
    response = mcp_http_json_response(mcp_jsonrpc_result(id, json_object()));
    *status = 200;
  } else if (strcmp(method, "tools/list") == 0) {
    json_t *tools = server->handlers.list_tools(server->handlers.context, &post->identity);
    response = mcp_http_json_response(
        mcp_jsonrpc_result(id, json_pack("{s:o}", "tools", tools ? tools : json_array())));
    *status = 200;
  } else if (strcmp(method, "tools/call") == 0) {
    response = handle_tools_call(server, session, post, id, params, status);
  } else {
    char text[200];
    snprintf(text, sizeof text, "method not found: %.120s", method);
    response = error_response(id, MCP_METHOD_NOT_FOUND, text, 200, status);
  }
  mcp_session_release(server, session);
out:
  json_decref(empty_params);
  json_decref(message);
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
