/* Session ids that name their node (fleet mode, docs/fleet.md): "<node>.<64 lowercase hex>". */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <string.h>

#include "supervisor/mcp/mcp.h"

#define HEX "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

static void test_node_named(void **state) {
  (void)state;
  char node[MCP_SESSION_NODE_MAX + 1];
  assert_true(mcp_session_id_node("A." HEX, node, sizeof node));
  assert_string_equal(node, "A");
  assert_true(mcp_session_id_node("node-1_b." HEX, node, sizeof node));
  assert_string_equal(node, "node-1_b");
  char longest[MCP_SESSION_NODE_MAX + 2 + 64 + 1];
  memset(longest, 'n', MCP_SESSION_NODE_MAX);
  snprintf(longest + MCP_SESSION_NODE_MAX, sizeof longest - MCP_SESSION_NODE_MAX, ".%s", HEX);
  assert_true(mcp_session_id_node(longest, node, sizeof node));
  assert_int_equal(strlen(node), MCP_SESSION_NODE_MAX);
}

static void test_other_forms_name_no_node(void **state) {
  (void)state;
  char node[MCP_SESSION_NODE_MAX + 1];
  const char *refused[] = {
      HEX,                                                                  /* single node: no node */
      "." HEX,                                                              /* empty node */
      "A." HEX "0",                                                         /* 65 hex */
      "A.0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcde",  /* 63 hex */
      "A.0123456789ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef", /* upper case hex */
      "A.0123456789abcdeg0123456789abcdef0123456789abcdef0123456789abcdef", /* not hex */
      "a.b." HEX,                                                           /* a dot in the node */
      "A B." HEX,                                                           /* a space in the node */
      "A/." HEX,                                                            /* a slash */
      "",
  };
  for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
    strcpy(node, "stale");
    assert_false(mcp_session_id_node(refused[i], node, sizeof node));
    assert_string_equal(node, "");
  }
  char too_long[MCP_SESSION_NODE_MAX + 2 + 64 + 1];
  memset(too_long, 'n', MCP_SESSION_NODE_MAX + 1);
  snprintf(too_long + MCP_SESSION_NODE_MAX + 1, sizeof too_long - MCP_SESSION_NODE_MAX - 1, ".%s", HEX);
  assert_false(mcp_session_id_node(too_long, node, sizeof node));
  assert_false(mcp_session_id_node(NULL, node, sizeof node));
  char small[8];
  assert_false(mcp_session_id_node("A." HEX, small, sizeof small)); /* no room for every node name */
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_node_named),
                                     cmocka_unit_test(test_other_forms_name_no_node)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
