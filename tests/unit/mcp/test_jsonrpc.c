/* JSON-RPC message shapes and MCP revision negotiation. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <string.h>

#include "supervisor/mcp/mcp.h"

static enum mcp_message_kind classify(const char *text) {
  json_error_t error;
  json_t *message = json_loads(text, JSON_DECODE_ANY, &error);
  assert_non_null(message);
  const char *why = NULL;
  enum mcp_message_kind kind = mcp_message_classify(message, &why);
  if (kind == MCP_MESSAGE_INVALID) assert_non_null(why);
  json_decref(message);
  return kind;
}

static void test_classify(void **state) {
  (void)state;
  assert_int_equal(classify("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}"), MCP_MESSAGE_REQUEST);
  assert_int_equal(classify("{\"jsonrpc\":\"2.0\",\"id\":\"a\",\"method\":\"tools/list\",\"params\":{}}"),
                   MCP_MESSAGE_REQUEST);
  assert_int_equal(classify("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}"),
                   MCP_MESSAGE_NOTIFICATION);
  assert_int_equal(classify("{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}"), MCP_MESSAGE_RESPONSE);
  assert_int_equal(classify("{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":1}}"),
                   MCP_MESSAGE_RESPONSE);
  assert_int_equal(classify("[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}]"), MCP_MESSAGE_INVALID);
  assert_int_equal(classify("{\"id\":1,\"method\":\"ping\"}"), MCP_MESSAGE_INVALID);
  assert_int_equal(classify("{\"jsonrpc\":\"2.0\",\"id\":null,\"method\":\"ping\"}"), MCP_MESSAGE_INVALID);
  assert_int_equal(classify("{\"jsonrpc\":\"2.0\",\"id\":1.5,\"method\":\"ping\"}"), MCP_MESSAGE_INVALID);
  assert_int_equal(classify("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\"}"), MCP_MESSAGE_INVALID);
  assert_int_equal(classify("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"x\",\"params\":[1]}"),
                   MCP_MESSAGE_INVALID);
  assert_int_equal(classify("{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{},\"error\":{}}"),
                   MCP_MESSAGE_INVALID);
  assert_int_equal(classify("{\"jsonrpc\":\"2.0\",\"id\":1}"), MCP_MESSAGE_INVALID);
  assert_int_equal(classify("7"), MCP_MESSAGE_INVALID);
}

static void test_negotiate(void **state) {
  (void)state;
  assert_string_equal(mcp_negotiate_version("2025-11-25"), "2025-11-25");
  assert_string_equal(mcp_negotiate_version("2025-06-18"), "2025-06-18");
  assert_string_equal(mcp_negotiate_version("2025-03-26"), "2025-03-26");
  assert_string_equal(mcp_negotiate_version("2024-11-05"), MCP_PROTOCOL_LATEST);
  assert_string_equal(mcp_negotiate_version(NULL), MCP_PROTOCOL_LATEST);
  assert_true(mcp_version_supported("2025-06-18"));
  assert_false(mcp_version_supported("1999-01-01"));
  assert_false(mcp_version_supported(NULL));
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_classify), cmocka_unit_test(test_negotiate)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
