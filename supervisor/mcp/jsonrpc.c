/* JSON-RPC 2.0 message shapes (JSON-RPC 2.0 sections 4-5, as MCP basic/index restricts them:
 * ids are strings or integers, never null; params are objects) and protocol revision negotiation
 * (MCP basic/lifecycle "Version Negotiation"). */
#include <string.h>

#include "supervisor/mcp/mcp_internal.h"

static const char *const supported_versions[] = {"2025-11-25", "2025-06-18", "2025-03-26"};

bool mcp_version_supported(const char *version) {
  if (version == NULL) return false;
  for (size_t i = 0; i < sizeof supported_versions / sizeof supported_versions[0]; i++)
    if (strcmp(version, supported_versions[i]) == 0) return true;
  return false;
}

const char *mcp_negotiate_version(const char *requested) {
  for (size_t i = 0; requested && i < sizeof supported_versions / sizeof supported_versions[0]; i++)
    if (strcmp(requested, supported_versions[i]) == 0) return supported_versions[i];
  return MCP_PROTOCOL_LATEST;
}

static bool valid_id(const json_t *id) {
  return json_is_string(id) || json_is_integer(id);
}

enum mcp_message_kind mcp_message_classify(const json_t *message, const char **why) {
  const char *unused;
  if (why == NULL) why = &unused;
  *why = NULL;
  if (!json_is_object(message)) {
    *why = json_is_array(message) ? "batch messages are not supported" : "message is not a JSON object";
    return MCP_MESSAGE_INVALID;
  }
  json_t *version = json_object_get(message, "jsonrpc");
  if (!json_is_string(version) || strcmp(json_string_value(version), "2.0") != 0) {
    *why = "member `jsonrpc` must be \"2.0\"";
    return MCP_MESSAGE_INVALID;
  }
  json_t *id = json_object_get(message, "id");
  json_t *method = json_object_get(message, "method");
  if (method != NULL) {
    if (!json_is_string(method) || json_string_length(method) == 0) {
      *why = "member `method` must be a non-empty string";
      return MCP_MESSAGE_INVALID;
    }
    json_t *params = json_object_get(message, "params");
    if (params != NULL && !json_is_object(params)) {
      *why = "member `params` must be an object";
      return MCP_MESSAGE_INVALID;
    }
    if (json_object_get(message, "result") || json_object_get(message, "error")) {
      *why = "a request cannot carry `result` or `error`";
      return MCP_MESSAGE_INVALID;
    }
    if (id == NULL) return MCP_MESSAGE_NOTIFICATION;
    if (!valid_id(id)) {
      *why = "member `id` must be a string or an integer";
      return MCP_MESSAGE_INVALID;
    }
    return MCP_MESSAGE_REQUEST;
  }
  bool has_result = json_object_get(message, "result") != NULL;
  bool has_error = json_object_get(message, "error") != NULL;
  if (has_result == has_error) {
    *why = "message has no `method`, and not exactly one of `result` and `error`";
    return MCP_MESSAGE_INVALID;
  }
  if (!valid_id(id) && !(has_error && json_is_null(id))) {
    *why = "response member `id` must be a string or an integer";
    return MCP_MESSAGE_INVALID;
  }
  return MCP_MESSAGE_RESPONSE;
}

json_t *mcp_jsonrpc_error(const json_t *id, int code, const char *message) {
  json_t *error = json_pack("{s:i,s:s}", "code", code, "message", message ? message : "error");
  return json_pack("{s:s,s:O,s:o}", "jsonrpc", "2.0", "id", id ? (json_t *)id : json_null(), "error", error);
}

json_t *mcp_jsonrpc_result(const json_t *id, json_t *result) {
  return json_pack("{s:s,s:O,s:o}", "jsonrpc", "2.0", "id", (json_t *)id, "result",
                   result ? result : json_object());
}
