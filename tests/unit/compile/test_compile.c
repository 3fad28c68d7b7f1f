/* The Cedar → kernel compiler (policy/compile): tables for known rule sets, forbid over permit, the
 * IPv4-mapped rule, rejections naming the policy and sub-expression, bounds. */
#include <arpa/inet.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <cmocka.h>

#include "policy/compile/compile.h"
#include "supervisor/kernel/kernel.h"

static int compile_text(const char *rules, const char *entities_json, struct dome_rule_tables *tables,
                        dome_error *err) {
  cedar_policy_set *set = NULL;
  cedar_entities *entities = NULL;
  int rc = dome_compile_load_entities(entities_json, entities_json ? strlen(entities_json) : 0,
                                      "entities.json", NULL, &entities, err);
  if (rc == 0) rc = dome_compile_load_policies(rules, rules ? strlen(rules) : 0, "rules.cedar", &set, err);
  struct dome_compile_options options = {.agent = "a1"};
  if (rc == 0) rc = dome_compile_tables(set, entities, &options, tables, err);
  cedar_policy_set_free(set);
  cedar_entities_free(entities);
  return rc;
}

static enum dome_decision net(const struct dome_rule_tables *t, enum dome_net_action action, int protocol,
                              const char *address, uint16_t port, const char **policy) {
  uint8_t bytes[16] = {0};
  int family = strchr(address, ':') ? AF_INET6 : AF_INET;
  assert_int_equal(inet_pton(family, address, bytes), 1);
  long entry;
  enum dome_decision d =
      dome_rule_tables_lookup_net(t, action, (enum dome_net_protocol)protocol, family, bytes, port, &entry);
  if (policy) {
    uint32_t index = entry >= 0 ? t->net[entry].policy_index : DOME_NO_POLICY;
    *policy = index == DOME_NO_POLICY ? NULL : t->policy_ids[index];
  }
  return d;
}

static enum dome_decision file(const struct dome_rule_tables *t, enum dome_file_access access,
                               const char *path, const char **policy) {
  long entry;
  enum dome_decision d = dome_rule_tables_lookup_file(t, access, path, &entry);
  if (policy) {
    uint32_t index = entry >= 0 ? t->files[entry].policy_index : DOME_NO_POLICY;
    *policy = index == DOME_NO_POLICY ? NULL : t->policy_ids[index];
  }
  return d;
}

static void baseline_alone(void **state) {
  (void)state;
  struct dome_rule_tables t;
  dome_error err = {0};
  assert_int_equal(compile_text(NULL, NULL, &t, &err), 0);
  assert_int_equal(t.net_count, 0); /* no network at all */
  const char *policy;
  assert_int_equal(file(&t, DOME_FILE_READ, "/usr/bin/python3", &policy), DOME_DECISION_ALLOW);
  assert_string_equal(policy, "baseline-image-read-exec");
  assert_int_equal(file(&t, DOME_FILE_EXEC, "/usr/bin/python3", NULL), DOME_DECISION_ALLOW);
  assert_int_equal(file(&t, DOME_FILE_WRITE, "/usr/bin/python3", NULL), DOME_DECISION_DENY);
  assert_int_equal(file(&t, DOME_FILE_WRITE, "/workspace/out.csv", &policy), DOME_DECISION_ALLOW);
  assert_string_equal(policy, "baseline-workspace-read-write");
  assert_int_equal(file(&t, DOME_FILE_WRITE, "/tmp/x", NULL), DOME_DECISION_ALLOW);
  assert_int_equal(file(&t, DOME_FILE_WRITE, "/workspacex", NULL), DOME_DECISION_DENY);
  assert_int_equal(net(&t, DOME_NET_CONNECT, DOME_PROTOCOL_TCP, "127.0.0.1", 80, NULL), DOME_DECISION_DENY);
  dome_rule_tables_free(&t);
}

static void seed_rules_give_baseline_tables(void **state) {
  (void)state;
  /* the seed rules only speak of mcp:*: the kernel tables are the baseline's */
  static const char seed[] =
      "permit(principal == Dome::Agent::\"code-exec-agent\", action == Dome::Action::\"mcp:call\", resource "
      "== "
      "Dome::MCPTool::\"code-sandbox\");\n"
      "forbid(principal == Dome::Agent::\"code-exec-agent\", action == Dome::Action::\"mcp:call\", resource "
      "== "
      "Dome::MCPTool::\"production-deploy\");\n";
  struct dome_rule_tables a, b;
  dome_error err = {0};
  assert_int_equal(compile_text(seed, NULL, &a, &err), 0);
  assert_int_equal(compile_text(NULL, NULL, &b, &err), 0);
  char *ja, *jb;
  assert_int_equal(dome_rule_tables_to_json(&a, false, &ja, &err), 0);
  assert_int_equal(dome_rule_tables_to_json(&b, false, &jb, &err), 0);
  assert_string_equal(ja, jb);
  free(ja);
  free(jb);
  dome_rule_tables_free(&a);
  dome_rule_tables_free(&b);
}

static void loopback_port_and_forbid_override(void **state) {
  (void)state;
  static const char rules[] =
      "@id(\"local-8000\")\n"
      "permit(principal, action == Dome::Action::\"net:connect\", resource) when {\n"
      "  context.dst_ip.isInRange(ip(\"127.0.0.0/8\")) && context.dst_port >= 8000 && context.dst_port <= "
      "8010 &&\n"
      "  context.protocol == \"tcp\" };\n"
      "@id(\"not-8005\")\n"
      "forbid(principal, action == Dome::Action::\"net:connect\", resource) when { context.dst_port == 8005 "
      "};\n"
      "@id(\"no-shadow\")\n"
      "forbid(principal, action == Dome::Action::\"fs:read\", resource == Dome::Path::\"/etc/shadow\");\n";
  struct dome_rule_tables t;
  dome_error err = {0};
  assert_int_equal(compile_text(rules, NULL, &t, &err), 0);
  const char *policy;
  assert_int_equal(net(&t, DOME_NET_CONNECT, DOME_PROTOCOL_TCP, "127.0.0.1", 8000, &policy),
                   DOME_DECISION_ALLOW);
  assert_string_equal(policy, "local-8000");
  assert_int_equal(net(&t, DOME_NET_CONNECT, DOME_PROTOCOL_TCP, "127.0.0.1", 8005, &policy),
                   DOME_DECISION_DENY);
  assert_string_equal(policy, "not-8005");
  assert_int_equal(net(&t, DOME_NET_CONNECT, DOME_PROTOCOL_TCP, "127.0.0.1", 9000, &policy),
                   DOME_DECISION_DENY);
  assert_null(policy);
  assert_int_equal(net(&t, DOME_NET_CONNECT, DOME_PROTOCOL_UDP, "127.0.0.1", 8000, NULL), DOME_DECISION_DENY);
  assert_int_equal(net(&t, DOME_NET_CONNECT, DOME_PROTOCOL_TCP, "10.0.0.1", 8000, NULL), DOME_DECISION_DENY);
  /* IPv4-mapped IPv6 decides as IPv4 */
  assert_int_equal(net(&t, DOME_NET_CONNECT, DOME_PROTOCOL_TCP, "::ffff:127.0.0.1", 8001, NULL),
                   DOME_DECISION_ALLOW);
  assert_int_equal(net(&t, DOME_NET_CONNECT, DOME_PROTOCOL_TCP, "::ffff:127.0.0.1", 8005, NULL),
                   DOME_DECISION_DENY);
  assert_int_equal(net(&t, DOME_NET_CONNECT, DOME_PROTOCOL_TCP, "::1", 8001, NULL), DOME_DECISION_DENY);
  assert_false(dome_compile_needs_egress(&t));
  /* the forbid overrides the baseline's permit of "/" */
  assert_int_equal(file(&t, DOME_FILE_READ, "/etc/shadow", &policy), DOME_DECISION_DENY);
  assert_string_equal(policy, "no-shadow");
  assert_int_equal(file(&t, DOME_FILE_READ, "/etc/shadow/x", NULL), DOME_DECISION_ALLOW);
  assert_int_equal(file(&t, DOME_FILE_READ, "/etc/passwd", NULL), DOME_DECISION_ALLOW);
  /* which Landlock cannot express: the reduced level must refuse it */
  assert_int_equal(dome_landlock_check_tables(&t, &err), -EOPNOTSUPP);
  assert_non_null(strstr(err.message, "no-shadow"));
  dome_rule_tables_free(&t);
}

static void capabilities_from_entities(void **state) {
  (void)state;
  static const char rules[] =
      "@id(\"egress\")\n"
      "permit(principal, action == Dome::Action::\"net:connect\", resource == Dome::Network::\"egress\") "
      "when {\n"
      "  principal.capabilities.contains(\"net-egress\") && context.dst_ip.isInRange(ip(\"203.0.113.0/24\")) "
      "&&\n"
      "  context.dst_port == 443 };\n";
  static const char with[] =
      "[{\"uid\": {\"type\": \"Dome::Agent\", \"id\": \"a1\"}, \"attrs\": {\"capabilities\": "
      "[\"net-egress\"]}, "
      "\"parents\": []}]";
  struct dome_rule_tables t;
  dome_error err = {0};
  assert_int_equal(compile_text(rules, with, &t, &err), 0);
  assert_int_equal(net(&t, DOME_NET_CONNECT, DOME_PROTOCOL_TCP, "203.0.113.7", 443, NULL),
                   DOME_DECISION_ALLOW);
  assert_int_equal(net(&t, DOME_NET_CONNECT, DOME_PROTOCOL_TCP, "203.0.113.7", 80, NULL), DOME_DECISION_DENY);
  assert_true(dome_compile_needs_egress(&t));
  dome_rule_tables_free(&t);
  /* without entity data the agent has no capabilities: the attribute access errors, the permit never applies
   */
  assert_int_equal(compile_text(rules, NULL, &t, &err), 0);
  assert_int_equal(net(&t, DOME_NET_CONNECT, DOME_PROTOCOL_TCP, "203.0.113.7", 443, NULL),
                   DOME_DECISION_DENY);
  assert_false(dome_compile_needs_egress(&t));
  dome_rule_tables_free(&t);
}

static void rejects(const char *rules, const char *expect1, const char *expect2) {
  struct dome_rule_tables t;
  dome_rule_tables_init(&t);
  dome_error err = {0};
  assert_int_equal(compile_text(rules, NULL, &t, &err), -EINVAL);
  if (!strstr(err.message, expect1) || (expect2 && !strstr(err.message, expect2)))
    fail_msg("message `%s` lacks `%s` / `%s`", err.message, expect1, expect2 ? expect2 : "");
  assert_int_equal(t.net_count + t.file_count, 0);
  dome_rule_tables_free(&t);
}

static void inexpressible_rules_are_rejected(void **state) {
  (void)state;
  rejects(
      "@id(\"py\") permit(principal, action == Dome::Action::\"fs:exec\", resource) when "
      "{ resource.name like \"*.py\" };",
      "policy `py`", "resource.name");
  rejects(
      "permit(principal, action == Dome::Action::\"net:connect\", resource) when { context.dst_port + 1 == "
      "444 };",
      "policy `policy0`", NULL);
  rejects(
      "@id(\"m\") permit(principal, action == Dome::Action::\"net:connect\", resource) when "
      "{ context.dst_ip.isInRange(ip(\"::ffff:a00:0/104\")) };",
      "policy `m`", "IPv4-mapped");
  rejects(
      "@id(\"p\") permit(principal, action == Dome::Action::\"fs:read\", resource in "
      "Dome::Path::\"/data/\");",
      "policy `p`", "normalized");
  rejects(
      "@id(\"x\") permit(principal, action == Dome::Action::\"net:send\", resource) when "
      "{ context.dst_port < context.dst_port + 1 };",
      "policy `x`", "net:send");
  rejects(
      "@id(\"l\") permit(principal, action == Dome::Action::\"net:connect\", resource) when "
      "{ context.dst_port == context.dst_port };",
      "policy `l`", "request values");
  /* an operator policy may not take a baseline id */
  rejects("@id(\"baseline-tmp-read-write\") permit(principal, action, resource);", "rules.cedar:1:1",
          "baseline-tmp-read-write");
}

static void table_bounds(void **state) {
  (void)state;
  /* 20 single ports allowed on one prefix: more distinct ranges than one kernel group holds */
  char rules[4096] = "permit(principal, action == Dome::Action::\"net:connect\", resource) when { ";
  for (int i = 0; i < 20; i++) {
    char part[64];
    snprintf(part, sizeof part, "%scontext.dst_port == %d", i ? " || " : "", 1000 + 2 * i);
    strcat(rules, part);
  }
  strcat(rules, " };");
  struct dome_rule_tables t;
  dome_error err = {0};
  assert_int_equal(compile_text(rules, NULL, &t, &err), -E2BIG);
  assert_non_null(strstr(err.message, "port ranges"));
  dome_rule_tables_free(&t);
}

static void path_entities_are_refused(void **state) {
  (void)state;
  static const char entities[] =
      "[{\"uid\": {\"type\": \"Dome::Path\", \"id\": \"/etc\"}, \"attrs\": {}, \"parents\": [{\"type\": "
      "\"Dome::Path\", \"id\": \"/workspace\"}]}]";
  cedar_entities *out = NULL;
  dome_error err = {0};
  assert_int_equal(dome_compile_load_entities(entities, strlen(entities), "e.json", NULL, &out, &err),
                   -EINVAL);
  assert_non_null(strstr(err.message, "Dome::Path"));
  assert_null(out);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(baseline_alone),
      cmocka_unit_test(seed_rules_give_baseline_tables),
      cmocka_unit_test(loopback_port_and_forbid_override),
      cmocka_unit_test(capabilities_from_entities),
      cmocka_unit_test(inexpressible_rules_are_rejected),
      cmocka_unit_test(table_bounds),
      cmocka_unit_test(path_entities_are_refused),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
