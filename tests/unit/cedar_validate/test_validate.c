/* Unit tests for policy/validate: strict policy validation, request validation, messages. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "policy/validate/validate.h"

static const char *const schema_text =
    "namespace App {\n"
    "  entity Group;\n"
    "  entity User in [Group] { age: Long, name: String, email?: String, level: decimal,\n"
    "                           home: { city: String, zip?: Long }, friends: Set<User> } tags String;\n"
    "  entity Doc { owner: User, when: datetime, ttl: duration, ip: ipaddr };\n"
    "  entity Color enum [\"red\", \"blue\"];\n"
    "  action read, write appliesTo { principal: [User], resource: [Doc], context: { mfa: Bool, n?: Long } "
    "};\n"
    "  action paint appliesTo { principal: [User], resource: [Color] };\n"
    "  action all;\n"
    "  action edit in [all] appliesTo { principal: [User], resource: [Doc] };\n"
    "}\n";

static cedar_schema *schema(void) {
  cedar_schema *s = NULL;
  cedar_schema_error err;
  if (cedar_schema_parse(schema_text, strlen(schema_text), "app.cedarschema", &s, &err))
    fail_msg("schema: %s", err.message);
  return s;
}

/* Validate policy text; returns the result (caller releases). */
static cedar_validation_result run(const cedar_schema *s, const char *text) {
  cedar_policy_set *set = NULL;
  cedar_diagnostic diag;
  if (cedar_policy_set_parse(text, strlen(text), "test.cedar", 0, &set, &diag))
    fail_msg("parse: %s", diag.message);
  cedar_validation_result r;
  assert_int_equal(cedar_validate(s, set, &r), 0);
  cedar_policy_set_free(set);
  return r;
}

static bool passes(const cedar_schema *s, const char *text) {
  cedar_validation_result r = run(s, text);
  bool ok = cedar_validation_passed(&r);
  if (!ok && getenv("VERBOSE"))
    for (size_t i = 0; i < r.count; i++) printf("  %s\n", r.issues[i].message);
  cedar_validation_result_release(&r);
  return ok;
}

/* The first error's message contains `needle` (and validation failed). */
static void fails_with(const cedar_schema *s, const char *text, const char *needle) {
  cedar_validation_result r = run(s, text);
  assert_false(cedar_validation_passed(&r));
  bool found = false;
  for (size_t i = 0; i < r.count; i++)
    if (!r.issues[i].is_warning && strstr(r.issues[i].message, needle)) found = true;
  if (!found) {
    for (size_t i = 0; i < r.count; i++) printf("  got: %s\n", r.issues[i].message);
    fail_msg("no error containing `%s` for: %s", needle, text);
  }
  cedar_validation_result_release(&r);
}

static void seed_rules_validate_against_the_dome_schema(void **state) {
  (void)state;
  cedar_schema *s = NULL;
  cedar_schema_error err;
  assert_int_equal(cedar_schema_load_dome(&s, &err), 0);
  const char *seed =
      "permit(principal == Dome::Agent::\"code-exec-agent\", action == Dome::Action::\"mcp:call\",\n"
      "       resource == Dome::MCPTool::\"code-sandbox\");\n"
      "permit(principal == Dome::Agent::\"code-exec-agent\", action == Dome::Action::\"mcp:discover\", "
      "resource);\n"
      "forbid(principal == Dome::Agent::\"code-exec-agent\", action == Dome::Action::\"mcp:call\",\n"
      "       resource == Dome::MCPTool::\"production-deploy\");\n"
      "permit(principal, action == Dome::Action::\"net:connect\", resource == Dome::Network::\"egress\")\n"
      "  when { context.dst_ip.isInRange(ip(\"10.0.0.0/8\")) && context.dst_port == 443 &&\n"
      "         principal.capabilities.contains(\"net-egress\") };\n"
      "permit(principal, action in [Dome::Action::\"fs:read\", Dome::Action::\"fs:exec\"], resource)\n"
      "  when { resource in Dome::Path::\"/workspace\" };\n"
      "forbid(principal, action == Dome::Action::\"mcp:call\", resource)\n"
      "  when { context has arguments && context.arguments like \"*rm -rf*\" };\n";
  cedar_validation_result r = run(s, seed);
  assert_true(cedar_validation_passed(&r));
  assert_int_equal(r.count, 0);
  cedar_validation_result_release(&r);
  cedar_schema_free(s);
}

static void newcomer_messages(void **state) {
  (void)state;
  cedar_schema *s = schema();
  fails_with(s, "permit(principal, action == App::Action::\"raed\", resource);",
             "unknown action `App::Action::\"raed\"`: did you mean `App::Action::\"read\"`?");
  fails_with(s, "permit(principal, action == App::Action::\"zzzzzzzzzz\", resource);", "the schema declares");
  fails_with(s,
             "permit(principal, action == App::Action::\"read\", resource) when { principal.nmae == \"x\" };",
             "attribute `nmae` not found in `principal` (type App::User); did you mean `name`?");
  fails_with(s,
             "permit(principal, action == App::Action::\"read\", resource) when { principal.age == \"42\" };",
             "compares Long with String");
  fails_with(s,
             "permit(principal, action == App::Action::\"read\", resource) when { principal.age < \"42\" };",
             "compares Long with String");
  fails_with(s, "permit(principal is App::Usr, action, resource);", "unknown entity type `App::Usr`");
  fails_with(
      s, "permit(principal, action == App::Action::\"read\", resource) when { principal.email == \"a\" };",
      "optional attribute `email`");
  fails_with(s, "permit(principal, action == App::Action::\"read\", resource) when { context.n > 1 };",
             "optional attribute `n`");
  cedar_validation_result r =
      run(s, "permit(principal, action, resource)\nwhen { principal.age == \"42\" };");
  assert_int_equal(r.issues[0].line, 2);
  assert_int_equal(r.issues[0].column, 8);
  assert_string_equal(r.issues[0].policy_id, "policy0");
  char buf[700];
  cedar_validation_issue_format(&r.issues[0], buf, sizeof buf);
  assert_true(strncmp(buf, "test.cedar:2:8: error: policy `policy0`: ", 41) == 0);
  cedar_validation_result_release(&r);
  cedar_schema_free(s);
}

static void typing_rules(void **state) {
  (void)state;
  cedar_schema *s = schema();
  /* capabilities from has, also through && and if */
  assert_true(passes(
      s,
      "permit(principal, action, resource) when { principal has email && principal.email like \"*@x\" };"));
  assert_true(passes(s,
                     "permit(principal, action, resource) when { if principal has email then principal.email "
                     "== \"a\" else false };"));
  assert_false(passes(
      s, "permit(principal, action, resource) when { principal has email || principal.email == \"a\" };"));
  assert_true(passes(s,
                     "permit(principal, action == App::Action::\"read\", resource) when { context has n && "
                     "context.n > 1 };"));
  assert_true(passes(s, "permit(principal, action, resource) when { principal.home.city == \"Oslo\" };"));
  assert_false(passes(s, "permit(principal, action, resource) when { principal.home.zip == 1 };"));
  assert_true(passes(
      s, "permit(principal, action, resource) when { principal.home has zip && principal.home.zip == 1 };"));
  /* tags */
  assert_true(passes(s,
                     "permit(principal, action, resource) when { principal.hasTag(\"k\") && "
                     "principal.getTag(\"k\") == \"v\" };"));
  assert_false(passes(s, "permit(principal, action, resource) when { principal.getTag(\"k\") == \"v\" };"));
  /* sets */
  assert_true(passes(s, "permit(principal, action, resource) when { [1, 2].contains(principal.age) };"));
  assert_false(passes(s, "permit(principal, action, resource) when { [1, \"a\"].contains(1) };"));
  assert_false(passes(s, "permit(principal, action, resource) when { [].isEmpty() };"));
  assert_false(passes(s, "permit(principal, action, resource) when { [1].contains(\"a\") };"));
  assert_true(
      passes(s, "permit(principal, action, resource) when { principal.friends.contains(principal) };"));
  /* entity types never merge in strict mode */
  assert_false(passes(s,
                      "permit(principal, action, resource) when { (if principal.age > 1 then principal else "
                      "resource) == principal };"));
  /* extensions */
  assert_true(passes(s,
                     "permit(principal, action, resource == App::Doc::\"d\") when { resource.when < "
                     "datetime(\"2024-01-01\") && resource.ttl > duration(\"1h\") && "
                     "resource.ip.isInRange(ip(\"10.0.0.0/8\")) };"));
  assert_true(
      passes(s, "permit(principal, action, resource) when { principal.level.lessThan(decimal(\"1.5\")) };"));
  assert_false(passes(s, "permit(principal, action, resource) when { principal.level < decimal(\"1.5\") };"));
  assert_false(passes(s, "permit(principal, action, resource) when { ip(\"300.0.0.1\").isIpv4() };"));
  assert_false(passes(s, "permit(principal, action, resource) when { ip(principal.name).isIpv4() };"));
  assert_false(passes(s, "permit(principal, action, resource) when { principal.age + \"1\" == 2 };"));
  assert_false(passes(s, "permit(principal, action, resource) when { principal.name.isIpv4() };"));
  /* a literal comparison of different types is simply false */
  assert_true(passes(s, "permit(principal, action, resource) when { 1 == \"a\" || principal.age == 1 };"));
  /* `in` and `is` */
  assert_true(
      passes(s, "permit(principal in App::Group::\"g\", action == App::Action::\"read\", resource);"));
  assert_true(passes(s, "permit(principal, action in App::Action::\"all\", resource);"));
  assert_true(passes(
      s,
      "permit(principal, action == App::Action::\"read\", resource) when { principal in resource.owner };"));
  /* enum ids */
  assert_true(passes(s, "permit(principal, action, resource == App::Color::\"red\");"));
  assert_false(passes(s, "permit(principal, action, resource == App::Color::\"green\");"));
  cedar_schema_free(s);
}

static void scope_and_impossible_policies(void **state) {
  (void)state;
  cedar_schema *s = schema();
  /* the scope admits no action/principal/resource combination: a warning in cedar 4.13 */
  cedar_validation_result w =
      run(s, "permit(principal == App::Group::\"g\", action == App::Action::\"read\", resource);");
  assert_true(cedar_validation_passed(&w));
  assert_true(w.warning_count >= 1);
  assert_non_null(strstr(w.issues[0].message, "no action in the schema applies"));
  cedar_validation_result_release(&w);
  /* ... and an error with the flag the integration corpus expects */
  cedar_policy_set *set = NULL;
  cedar_diagnostic diag;
  const char *text = "permit(principal == App::Group::\"g\", action == App::Action::\"read\", resource);";
  assert_int_equal(cedar_policy_set_parse(text, strlen(text), "t.cedar", 0, &set, &diag), 0);
  assert_int_equal(cedar_validate_with(s, set, CEDAR_VALIDATE_ACTION_APPLICATION_ERROR, &w), 0);
  assert_false(cedar_validation_passed(&w));
  assert_non_null(strstr(w.issues[0].message, "no action in the schema applies"));
  cedar_validation_result_release(&w);
  cedar_policy_set_free(set);
  /* a condition that is always false: a warning, validation passes */
  cedar_validation_result r = run(s, "permit(principal, action, resource) when { principal is App::Group };");
  assert_true(cedar_validation_passed(&r));
  assert_int_equal(r.warning_count, 1);
  assert_true(r.issues[0].is_warning);
  cedar_validation_result_release(&r);
  cedar_schema_free(s);
}

static void templates(void **state) {
  (void)state;
  cedar_schema *s = schema();
  assert_true(
      passes(s, "permit(principal == ?principal, action == App::Action::\"read\", resource in ?resource);"));
  assert_true(passes(s, "permit(principal in ?principal, action, resource) when { principal.age > 3 };"));
  fails_with(s, "permit(principal == ?principal, action, resource) when { principal.agee > 3 };", "agee");
  cedar_policy_set *set = NULL;
  cedar_diagnostic diag;
  const char *text = "@id(\"t\") permit(principal == ?principal, action == App::Action::\"read\", resource);";
  assert_int_equal(
      cedar_policy_set_parse(text, strlen(text), "t.cedar", CEDAR_PARSE_ID_ANNOTATIONS, &set, &diag), 0);
  cedar_uid_ref bad = {"App::Nope", "x", 0}, good = {"App::User", "alice", 0};
  assert_int_equal(cedar_policy_set_link(set, "t", "linked_bad", &bad, NULL, &diag), 0);
  assert_int_equal(cedar_policy_set_link(set, "t", "linked_good", &good, NULL, &diag), 0);
  cedar_validation_result r;
  assert_int_equal(cedar_validate(s, set, &r), 0);
  bool bad_reported = false;
  for (size_t i = 0; i < r.count; i++) {
    if (!r.issues[i].is_warning) assert_string_equal(r.issues[i].policy_id, "linked_bad");
    if (strstr(r.issues[i].message, "App::Nope")) bad_reported = true;
  }
  assert_true(bad_reported);
  cedar_validation_result_release(&r);
  cedar_policy_set_free(set);
  cedar_schema_free(s);
}

static int request_check(const cedar_schema *s, const char *principal_type, const char *action,
                         const char *context, char *message) {
  cedar_request req = {{principal_type, "p", 0}, {"App::Action", action, 0}, {"App::Doc", "d", 0}, NULL};
  cedar_context *c = NULL;
  cedar_diagnostic diag;
  if (context && cedar_context_parse_json(context, strlen(context), "ctx", NULL, &req.action, &c, &diag))
    fail_msg("context: %s", diag.message);
  req.context = c;
  int r = cedar_validate_request(s, &req, message, 300);
  cedar_context_free(c);
  return r;
}

static void request_validation(void **state) {
  (void)state;
  cedar_schema *s = schema();
  char message[300];
  assert_int_equal(request_check(s, "App::User", "read", "{\"mfa\": true}", message), 0);
  assert_int_equal(request_check(s, "App::User", "read", "{\"mfa\": true, \"n\": 3}", message), 0);
  assert_int_equal(request_check(s, "App::Group", "read", "{\"mfa\": true}", message), -EINVAL);
  assert_non_null(strstr(message, "principal type `App::Group`"));
  assert_int_equal(request_check(s, "App::User", "reed", "{}", message), -EINVAL);
  assert_non_null(strstr(message, "not declared"));
  assert_int_equal(request_check(s, "App::User", "read", "{}", message), -EINVAL);
  assert_non_null(strstr(message, "required attribute `mfa`"));
  assert_int_equal(request_check(s, "App::User", "read", "{\"mfa\": 1}", message), -EINVAL);
  assert_non_null(strstr(message, "attribute `mfa`"));
  assert_int_equal(request_check(s, "App::User", "read", "{\"mfa\": true, \"x\": 1}", message), -EINVAL);
  assert_non_null(strstr(message, "`x` is not declared"));
  assert_int_equal(request_check(s, "App::User", "all", "{}", message), -EINVAL);
  cedar_schema_free(s);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(seed_rules_validate_against_the_dome_schema),
      cmocka_unit_test(newcomer_messages),
      cmocka_unit_test(typing_rules),
      cmocka_unit_test(scope_and_impossible_policies),
      cmocka_unit_test(templates),
      cmocka_unit_test(request_validation),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
