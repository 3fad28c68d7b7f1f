/* Decision tables: JSON form, validation (the compiler's contract) and the reference lookups. */
#include <arpa/inet.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <cmocka.h>

#include "supervisor/kernel/kernel.h"

static const char *const sample =
    "{\"agent\": \"analyst\", \"policy_version\": \"v7\", \"policies\": [\"permit-web\", \"forbid-db\", "
    "\"baseline\"],"
    " \"network\": ["
    "  {\"action\": \"connect\", \"protocol\": \"tcp\", \"prefix\": \"10.0.0.0/8\", \"ports\": [0, 65535], "
    "\"decision\": \"allow\", \"policy\": \"permit-web\"},"
    "  {\"action\": \"connect\", \"protocol\": \"tcp\", \"prefix\": \"10.1.0.0/16\", \"ports\": [0, 5431], "
    "\"decision\": \"allow\", \"policy\": \"permit-web\"},"
    "  {\"action\": \"connect\", \"protocol\": \"tcp\", \"prefix\": \"10.1.0.0/16\", \"ports\": [5432, "
    "5432], \"decision\": \"deny\", \"policy\": \"forbid-db\"},"
    "  {\"action\": \"connect\", \"protocol\": \"tcp\", \"prefix\": \"10.1.0.0/16\", \"ports\": [5433, "
    "65535], \"decision\": \"allow\", \"policy\": \"permit-web\"},"
    "  {\"action\": \"send\", \"protocol\": \"udp\", \"prefix\": \"2001:db8::/32\", \"ports\": [53, 53], "
    "\"decision\": \"allow\", \"policy\": null}"
    " ], \"files\": ["
    "  {\"path\": \"/workspace\", \"match\": \"subtree\", \"access\": \"read\", \"decision\": \"allow\", "
    "\"policy\": \"baseline\"},"
    "  {\"path\": \"/workspace/secret\", \"match\": \"subtree\", \"access\": \"read\", \"decision\": "
    "\"deny\", \"policy\": \"forbid-db\"},"
    "  {\"path\": \"/workspace/secret\", \"match\": \"exact\", \"access\": \"read\", \"decision\": "
    "\"allow\", \"policy\": \"baseline\"},"
    "  {\"path\": \"/\", \"match\": \"subtree\", \"access\": \"exec\", \"decision\": \"allow\", \"policy\": "
    "\"baseline\"}"
    " ]}";

static void load(struct dome_rule_tables *tables, const char *json) {
  dome_error err = {0};
  int r = dome_rule_tables_from_json(json, strlen(json), tables, &err);
  if (r != 0) fail_msg("%s", err.message);
}

static void test_json_round_trip(void **state) {
  (void)state;
  struct dome_rule_tables tables, again;
  load(&tables, sample);
  assert_string_equal(tables.agent, "analyst");
  assert_int_equal(tables.policy_count, 3);
  assert_int_equal(tables.net_count, 5);
  assert_int_equal(tables.file_count, 4);
  assert_int_equal(tables.net[4].family, AF_INET6);
  assert_int_equal(tables.net[4].policy_index, DOME_NO_POLICY);
  char *json = NULL;
  dome_error err = {0};
  assert_int_equal(dome_rule_tables_to_json(&tables, false, &json, &err), 0);
  load(&again, json);
  char *json2 = NULL;
  assert_int_equal(dome_rule_tables_to_json(&again, false, &json2, &err), 0);
  assert_string_equal(json, json2);
  assert_non_null(strstr(json, "\"prefix\":\"2001:db8::/32\""));
  char *text = NULL;
  assert_int_equal(dome_rule_tables_format(&tables, &text, &err), 0);
  assert_non_null(strstr(text, "net:connect tcp 10.1.0.0/16"));
  assert_non_null(strstr(text, "(policy forbid-db)"));
  free(text);
  free(json);
  free(json2);
  dome_rule_tables_free(&tables);
  dome_rule_tables_free(&again);
}

static void test_net_lookup_longest_prefix(void **state) {
  (void)state;
  struct dome_rule_tables tables;
  load(&tables, sample);
  uint8_t a[16] = {0};
  long entry;
  inet_pton(AF_INET, "10.1.2.3", a);
  assert_int_equal(
      dome_rule_tables_lookup_net(&tables, DOME_NET_CONNECT, DOME_PROTOCOL_TCP, AF_INET, a, 5432, &entry),
      DOME_DECISION_DENY);
  assert_int_equal(entry, 2); /* forbid overrides permit: the flattened entry names forbid-db */
  assert_int_equal(
      dome_rule_tables_lookup_net(&tables, DOME_NET_CONNECT, DOME_PROTOCOL_TCP, AF_INET, a, 443, &entry),
      DOME_DECISION_ALLOW);
  assert_int_equal(entry, 1);
  inet_pton(AF_INET, "10.9.9.9", a);
  assert_int_equal(
      dome_rule_tables_lookup_net(&tables, DOME_NET_CONNECT, DOME_PROTOCOL_TCP, AF_INET, a, 5432, &entry),
      DOME_DECISION_ALLOW);
  assert_int_equal(entry, 0);
  /* other protocol, other action, outside every prefix: default deny with no entry */
  assert_int_equal(
      dome_rule_tables_lookup_net(&tables, DOME_NET_CONNECT, DOME_PROTOCOL_UDP, AF_INET, a, 53, &entry),
      DOME_DECISION_DENY);
  assert_int_equal(entry, -1);
  inet_pton(AF_INET, "192.0.2.1", a);
  assert_int_equal(
      dome_rule_tables_lookup_net(&tables, DOME_NET_CONNECT, DOME_PROTOCOL_TCP, AF_INET, a, 80, &entry),
      DOME_DECISION_DENY);
  assert_int_equal(entry, -1);
  /* IPv4-mapped IPv6 decides as IPv4 */
  uint8_t mapped[16];
  inet_pton(AF_INET6, "::ffff:10.1.2.3", mapped);
  assert_int_equal(dome_rule_tables_lookup_net(&tables, DOME_NET_CONNECT, DOME_PROTOCOL_TCP, AF_INET6, mapped,
                                               5432, &entry),
                   DOME_DECISION_DENY);
  assert_int_equal(entry, 2);
  inet_pton(AF_INET6, "2001:db8::35", mapped);
  assert_int_equal(
      dome_rule_tables_lookup_net(&tables, DOME_NET_SEND, DOME_PROTOCOL_UDP, AF_INET6, mapped, 53, &entry),
      DOME_DECISION_ALLOW);
  dome_rule_tables_free(&tables);
}

static void test_file_lookup_most_specific(void **state) {
  (void)state;
  struct dome_rule_tables tables;
  load(&tables, sample);
  long entry;
  assert_int_equal(dome_rule_tables_lookup_file(&tables, DOME_FILE_READ, "/workspace/a.csv", &entry),
                   DOME_DECISION_ALLOW);
  assert_int_equal(entry, 0);
  assert_int_equal(dome_rule_tables_lookup_file(&tables, DOME_FILE_READ, "/workspace/secret/k", &entry),
                   DOME_DECISION_DENY);
  assert_int_equal(entry, 1);
  /* exact beats subtree at the same path */
  assert_int_equal(dome_rule_tables_lookup_file(&tables, DOME_FILE_READ, "/workspace/secret", &entry),
                   DOME_DECISION_ALLOW);
  assert_int_equal(entry, 2);
  /* a sibling sharing the prefix string is not beneath */
  assert_int_equal(dome_rule_tables_lookup_file(&tables, DOME_FILE_READ, "/workspace2/x", &entry),
                   DOME_DECISION_DENY);
  assert_int_equal(entry, -1);
  assert_int_equal(dome_rule_tables_lookup_file(&tables, DOME_FILE_EXEC, "/usr/bin/python3", &entry),
                   DOME_DECISION_ALLOW);
  assert_int_equal(dome_rule_tables_lookup_file(&tables, DOME_FILE_WRITE, "/workspace/a.csv", &entry),
                   DOME_DECISION_DENY);
  dome_rule_tables_free(&tables);
}

static void expect_invalid(const char *json, const char *needle) {
  struct dome_rule_tables tables;
  dome_rule_tables_init(&tables);
  dome_error err = {0};
  int r = dome_rule_tables_from_json(json, strlen(json), &tables, &err);
  if (r != -EINVAL && r != -E2BIG) fail_msg("accepted: %s", json);
  if (!strstr(err.message, needle)) fail_msg("message `%s` lacks `%s`", err.message, needle);
  assert_null(tables.net); /* output untouched */
}

#define NET(x) "{\"policies\": [], \"network\": [" x "]}"
#define FILES(x) "{\"policies\": [\"p\"], \"files\": [" x "]}"

static void test_validation_errors(void **state) {
  (void)state;
  expect_invalid("{", "line 1");
  expect_invalid(NET("{\"action\": \"listen\", \"protocol\": \"tcp\", \"prefix\": \"10.0.0.0/8\", \"ports\": "
                     "[1, 2], \"decision\": \"allow\"}"),
                 "network[0].action");
  expect_invalid(NET("{\"action\": \"connect\", \"protocol\": \"tcp\", \"prefix\": \"10.0.0.1/8\", "
                     "\"ports\": [1, 2], \"decision\": \"allow\"}"),
                 "beyond the prefix");
  expect_invalid(NET("{\"action\": \"connect\", \"protocol\": \"tcp\", \"prefix\": \"10.0.0.0/33\", "
                     "\"ports\": [1, 2], \"decision\": \"allow\"}"),
                 "prefix length 33");
  expect_invalid(NET("{\"action\": \"connect\", \"protocol\": \"tcp\", \"prefix\": \"10.0.0.0/8\", "
                     "\"ports\": [9, 2], \"decision\": \"allow\"}"),
                 "reversed");
  expect_invalid(NET("{\"action\": \"connect\", \"protocol\": \"tcp\", \"prefix\": \"10.0.0.0/8\", "
                     "\"ports\": [1, 70000], \"decision\": \"allow\"}"),
                 "network[0].ports");
  expect_invalid(NET("{\"action\": \"connect\", \"protocol\": \"tcp\", \"prefix\": \"10.0.0.0/8\", "
                     "\"ports\": [1, 20], \"decision\": \"allow\"},"
                     "{\"action\": \"connect\", \"protocol\": \"tcp\", \"prefix\": \"10.0.0.0/8\", "
                     "\"ports\": [20, 30], \"decision\": \"deny\"}"),
                 "overlap");
  expect_invalid(NET("{\"action\": \"connect\", \"protocol\": \"tcp\", \"prefix\": \"::ffff:10.0.0.0/104\", "
                     "\"ports\": [1, 2], \"decision\": \"allow\"}"),
                 "IPv4-mapped");
  expect_invalid(NET("{\"action\": \"connect\", \"protocol\": \"tcp\", \"prefix\": \"10.0.0.0/8\", "
                     "\"ports\": [1, 2], \"decision\": \"allow\", \"policy\": \"nope\"}"),
                 "not in \"policies\"");
  expect_invalid(FILES("{\"path\": \"/a/../b\", \"match\": \"exact\", \"access\": \"read\", \"decision\": "
                       "\"allow\", \"policy\": \"p\"}"),
                 "normalized");
  expect_invalid(FILES("{\"path\": \"/a/\", \"match\": \"exact\", \"access\": \"read\", \"decision\": "
                       "\"allow\", \"policy\": \"p\"}"),
                 "normalized");
  expect_invalid(FILES("{\"path\": \"a\", \"match\": \"exact\", \"access\": \"read\", \"decision\": "
                       "\"allow\", \"policy\": \"p\"}"),
                 "normalized");
  expect_invalid(FILES("{\"path\": \"/a\", \"match\": \"exact\", \"access\": \"read\", \"decision\": "
                       "\"allow\", \"policy\": \"p\"},"
                       "{\"path\": \"/a\", \"match\": \"exact\", \"access\": \"read\", \"decision\": "
                       "\"deny\", \"policy\": \"p\"}"),
                 "duplicates");
  expect_invalid(
      FILES("{\"path\": \"/a\", \"match\": \"exact\", \"access\": \"append\", \"decision\": \"allow\"}"),
      "files[0].access");
}

static void test_landlock_refuses_forbid_inside_permit(void **state) {
  (void)state;
  struct dome_rule_tables tables;
  load(&tables, sample);
  dome_error err = {0};
  assert_int_equal(dome_landlock_check_tables(&tables, &err), -EOPNOTSUPP);
  assert_non_null(strstr(err.message, "/workspace/secret"));
  assert_non_null(strstr(err.message, "forbid-db"));
  assert_non_null(strstr(err.message, "--allow-degraded"));
  dome_rule_tables_free(&tables);
  load(&tables, FILES("{\"path\": \"/w\", \"match\": \"subtree\", \"access\": \"read\", \"decision\": "
                      "\"allow\", \"policy\": \"p\"},"
                      "{\"path\": \"/x\", \"match\": \"subtree\", \"access\": \"read\", \"decision\": "
                      "\"deny\", \"policy\": \"p\"},"
                      "{\"path\": \"/w/k\", \"match\": \"exact\", \"access\": \"write\", \"decision\": "
                      "\"deny\", \"policy\": \"p\"}"));
  assert_int_equal(dome_landlock_check_tables(&tables, &err),
                   0); /* denies outside allowed trees are the default */
  dome_rule_tables_free(&tables);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_json_round_trip),
      cmocka_unit_test(test_net_lookup_longest_prefix),
      cmocka_unit_test(test_file_lookup_most_specific),
      cmocka_unit_test(test_validation_errors),
      cmocka_unit_test(test_landlock_refuses_forbid_inside_permit),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
