/* Unit tests for the Cedar engine (policy/cedar.h): parser, evaluator, authorizer, entities, printing,
 * EST. Expected results were checked against cedar-policy 4.13 (cedar-wasm). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <pthread.h>

#include "policy/cedar.h"
#include "policy/schema/schema.h"

static const char *entities_json =
    "[{\"uid\":{\"type\":\"User\",\"id\":\"alice\"},\"attrs\":{\"age\":30,\"name\":\"Alice\",\"tags\":[\"a\","
    "\"b\"],"
    "\"boss\":{\"__entity\":{\"type\":\"User\",\"id\":\"bob\"}},\"ip\":{\"__extn\":{\"fn\":\"ip\",\"arg\":"
    "\"10.1.2.3\"}},"
    "\"rec\":{\"x\":{\"y\":1}}},\"parents\":[{\"type\":\"Group\",\"id\":\"staff\"}],\"tags\":{\"t\":\"v\"}},"
    "{\"uid\":{\"type\":\"Group\",\"id\":\"staff\"},\"attrs\":{},\"parents\":[{\"type\":\"Group\",\"id\":"
    "\"all\"}]},"
    "{\"uid\":{\"type\":\"Group\",\"id\":\"all\"},\"attrs\":{},\"parents\":[]},"
    "{\"uid\":{\"type\":\"Photo\",\"id\":\"p\"},\"attrs\":{\"owner\":{\"__entity\":{\"type\":\"User\",\"id\":"
    "\"alice\"}}},"
    "\"parents\":[]}]";

typedef enum { ALLOW, DENY, ERROR } outcome;

/* Authorize `permit(principal, action, resource) when { expr };` for alice/view/p. */
static outcome eval_condition(const char *expr) {
  char text[4096];
  snprintf(text, sizeof text, "permit(principal, action, resource) when { %s };", expr);
  cedar_policy_set *set;
  cedar_diagnostic diag = {0};
  int r = cedar_policy_set_parse(text, strlen(text), "t.cedar", 0, &set, &diag);
  if (r < 0) fail_msg("parse failed for `%s`: %s", expr, diag.message);
  cedar_entities *entities;
  assert_int_equal(
      cedar_entities_parse_json(entities_json, strlen(entities_json), "e.json", NULL, &entities, &diag), 0);
  const char *ctx_text = "{\"n\": 5, \"s\": \"hello\", \"flag\": true}";
  cedar_context *ctx;
  assert_int_equal(cedar_context_parse_json(ctx_text, strlen(ctx_text), "c.json", NULL, NULL, &ctx, &diag),
                   0);
  cedar_request req = {{"User", "alice", 0}, {"Action", "view", 0}, {"Photo", "p", 0}, ctx};
  cedar_response resp;
  assert_int_equal(cedar_authorize(set, entities, &req, &resp), 0);
  outcome o = resp.error_count ? ERROR : resp.decision == CEDAR_ALLOW ? ALLOW : DENY;
  if (o == ALLOW) assert_int_equal(resp.reason_count, 1);
  cedar_response_release(&resp);
  cedar_context_free(ctx);
  cedar_entities_free(entities);
  cedar_policy_set_free(set);
  return o;
}

static void expect(const char *expr, outcome want) {
  outcome got = eval_condition(expr);
  if (got != want) fail_msg("`%s`: expected %d, got %d", expr, want, got);
}

static void operators_and_errors(void **state) {
  (void)state;
  expect("1 + 2 * 3 == 7", ALLOW);
  expect("-9223372036854775808 < 0", ALLOW);
  expect("9223372036854775807 + 1 == 0", ERROR);
  expect("- (-9223372036854775808) == 0", ERROR);
  expect("1 < 2 && !(2 < 1)", ALLOW);
  expect("false && (1 + \"a\")", DENY);
  expect("true || (1 + \"a\")", ALLOW);
  expect("(1 + \"a\") || true", ERROR);
  expect("if context.flag then 1 == 1 else 1 + \"a\"", ALLOW);
  expect("1 == \"1\"", DENY); /* == never errors */
  expect("[1, 2, 2] == [2, 1]", ALLOW);
  expect("{a: 1, b: [true]} == {b: [true], a: 1}", ALLOW);
  expect("\"a\" < \"b\"", ERROR);
  expect("context.n", ERROR); /* not a bool */
  /* unknown("name") parses (upstream's partial-evaluation extension) and errors when evaluated */
  expect("unknown(\"x\") == 1", ERROR);
  expect("true || unknown(\"x\")", ALLOW);
}

static void entities_and_hierarchy(void **state) {
  (void)state;
  expect("principal in Group::\"all\"", ALLOW);
  expect("principal in [Group::\"nope\", Group::\"staff\"]", ALLOW);
  expect("Group::\"all\" in Group::\"staff\"", DENY);
  expect("principal in principal", ALLOW);
  expect("User::\"ghost\" in User::\"ghost\"", ALLOW);
  expect("principal in [1]", ERROR);
  expect("principal.age >= 30 && principal.name like \"Al*\"", ALLOW);
  expect("principal.missing == 1", ERROR);
  expect("User::\"ghost\".age == 1", ERROR);
  expect("User::\"ghost\" has age", DENY);
  expect("principal has rec.x.y && principal.rec.x.y == 1", ALLOW);
  expect("principal has rec.x.z", DENY);
  expect("principal.boss == User::\"bob\" && resource.owner == principal", ALLOW);
  expect("principal is User && resource is Photo in Photo::\"p\"", ALLOW);
  expect("principal.getTag(\"t\") == \"v\" && principal.hasTag(\"t\") && !principal.hasTag(\"u\")", ALLOW);
  expect("principal.getTag(\"u\") == \"v\"", ERROR);
  expect(
      "principal.tags.contains(\"a\") && principal.tags.containsAll([\"b\"]) && "
      "!principal.tags.containsAny([])",
      ALLOW);
  expect("principal[\"name\"] == \"Alice\"", ALLOW);
}

static void extensions_and_like(void **state) {
  (void)state;
  expect("principal.ip.isInRange(ip(\"10.0.0.0/8\")) && ip(\"::1\").isLoopback()", ALLOW);
  expect("ip(\"10.0.0.1/24\") == ip(\"10.0.0.0/24\")", DENY);
  expect("ip(\"not an ip\").isIpv4()", ERROR);
  expect("ip(\"1.2.3.4\", \"x\").isIpv4()", ERROR);
  expect("decimal(\"1.0\") == decimal(\"1.0000\") && decimal(\"1.5\").lessThan(decimal(\"2\"))", ERROR);
  expect("decimal(\"1.0\") == decimal(\"1.0000\") && decimal(\"1.5\").lessThan(decimal(\"2.0\"))", ALLOW);
  expect("decimal(\"1.0\") < decimal(\"2.0\")", ERROR);
  expect("datetime(\"2024-01-01\") < datetime(\"2024-01-02T00:00:00Z\")", ALLOW);
  expect("datetime(\"2024-01-01\").offset(duration(\"1d\")) == datetime(\"2024-01-02\")", ALLOW);
  expect("duration(\"1h30m\").toMinutes() == 90", ALLOW);
  expect("\"a*b\" like \"a\\*b\" && !(\"axb\" like \"a\\*b\") && \"axxb\" like \"a*b\"", ALLOW);
  /* worst case for backtracking matchers: finishes at once here */
  expect(
      "\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaab"
      "\" like "
      "\"*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*ac\"",
      DENY);
}

static void parse_error(const char *text, const char *needle, unsigned line, unsigned column) {
  cedar_policy_set *set = NULL;
  cedar_diagnostic diag = {0};
  int r = cedar_policy_set_parse(text, strlen(text), "bad.cedar", 0, &set, &diag);
  if (r >= 0) fail_msg("`%s` parsed but should not", text);
  assert_null(set);
  if (!strstr(diag.message, needle)) fail_msg("`%s`: message `%s` lacks `%s`", text, diag.message, needle);
  assert_string_equal(diag.file, "bad.cedar");
  if (line) {
    assert_int_equal(diag.line, line);
    assert_int_equal(diag.column, column);
  }
}

static void parser_errors(void **state) {
  (void)state;
  parse_error("permit(principal, action, resource) when { 1 < 2 < 3 };", "multiple relational", 1, 50);
  parse_error("permit(principal, action, resource) when { !!!!!true };", "too many", 1, 44);
  parse_error("permit(principal, action, resource) when { context.if };", "reserved", 0, 0);
  parse_error("permit(principal, action, resource) when { 9223372036854775808 == 0 };", "too large", 0, 0);
  parse_error("permit(principal, action, resource) when { \"\\q\" };", "invalid escape", 1, 45);
  parse_error("permit(principal, action, resource) when { [].contains(1, 2) };", "exactly 1 argument", 0, 0);
  parse_error("permit(principal, action, resource) when { isIpv4(ip(\"1.2.3.4\")) };", "is a method", 0, 0);
  parse_error("permit(principal, action, resource) when { foo(1) };", "not a valid function", 0, 0);
  parse_error("permit(principal, action == User::\"a\", resource);", "type `Action`", 0, 0);
  parse_error("permit(principal, action, resource)\nwhen { 1 / 2 };", "division", 2, 10);
  parse_error("permit(principal, action, resource) when { {a: 1, a: 2} };", "duplicate key", 0, 0);
  parse_error("@a(\"x\") @a(\"y\") permit(principal, action, resource);", "duplicate annotation", 0, 0);
  parse_error("permit(principal, action, resource) when { ?principal };", "slot", 0, 0);
  parse_error("permit(principal, action, resource)", "expected", 0, 0);
  parse_error("permit(principal, action, resource,,);", "unexpected token `,`", 1, 36);
  parse_error("permit(principal, action,);", "expected `resource`", 0, 0);
  /* nesting is bounded with an explicit error, not a crash */
  char deep[4000] = "permit(principal, action, resource) when { ";
  for (int i = 0; i < 600; i++) strcat(deep, "(");
  strcat(deep, "true");
  for (int i = 0; i < 600; i++) strcat(deep, ")");
  strcat(deep, " };");
  parse_error(deep, "nested deeper", 0, 0);
  static char many[8192] = "permit(principal, action, resource)";
  for (int i = 0; i < 200; i++) strcat(many, " when { true }");
  strcat(many, ";");
  parse_error(many, "when/unless clauses", 0, 0);
}

/* Found by the difftest: upstream accepts one trailing comma after the scope. */
static void trailing_comma_in_scope(void **state) {
  (void)state;
  const char *text = "permit(principal, action, resource == NS::Doc::\"b\",) when { true };";
  cedar_policy_set *set;
  cedar_diagnostic diag = {0};
  assert_int_equal(cedar_policy_set_parse(text, strlen(text), NULL, 0, &set, &diag), 0);
  cedar_policy_set_free(set);
}

static void ids_templates_and_links(void **state) {
  (void)state;
  const char *text =
      "@id(\"first\") permit(principal == ?principal, action, resource in ?resource);\n"
      "forbid(principal, action, resource) unless { true };";
  cedar_policy_set *set;
  cedar_diagnostic diag = {0};
  assert_int_equal(cedar_policy_set_parse(text, strlen(text), NULL, CEDAR_PARSE_ID_ANNOTATIONS, &set, &diag),
                   0);
  assert_int_equal(cedar_policy_set_count(set), 2);
  assert_string_equal(cedar_policy_id(cedar_policy_set_at(set, 0)), "first");
  assert_string_equal(cedar_policy_id(cedar_policy_set_at(set, 1)), "policy1");
  assert_true(cedar_policy_is_template(cedar_policy_set_at(set, 0)));
  assert_string_equal(cedar_policy_annotation(cedar_policy_set_at(set, 0), "id"), "first");
  cedar_uid_ref alice = {"User", "alice", 0}, photo = {"Photo", "p", 0};
  assert_int_equal(cedar_policy_set_link(set, "first", "link1", &alice, &photo, &diag), 0);
  assert_int_equal(cedar_policy_set_link(set, "first", "link1", &alice, &photo, &diag), -EINVAL);
  assert_int_equal(cedar_policy_set_link(set, "first", "link2", &alice, NULL, &diag), -EINVAL);
  cedar_request req = {{"User", "alice", 0}, {"Action", "view", 0}, {"Photo", "p", 0}, NULL};
  cedar_response resp;
  assert_int_equal(cedar_authorize(set, NULL, &req, &resp), 0);
  assert_int_equal(resp.decision, CEDAR_ALLOW);
  assert_int_equal(resp.reason_count, 1);
  assert_string_equal(resp.reason[0], "link1");
  cedar_response_release(&resp);
  req.principal.id = "bob";
  assert_int_equal(cedar_authorize(set, NULL, &req, &resp), 0);
  assert_int_equal(resp.decision, CEDAR_DENY);
  assert_int_equal(resp.reason_count, 0);
  cedar_response_release(&resp);
  /* the policy-set JSON keeps the template and the link */
  char *json = cedar_policy_set_to_json(set);
  assert_non_null(json);
  cedar_policy_set *back;
  assert_int_equal(cedar_policy_set_parse_json(json, strlen(json), "set.json", &back, &diag), 0);
  assert_int_equal(cedar_policy_set_count(back), 3);
  assert_non_null(cedar_policy_set_find(back, "link1"));
  free(json);
  cedar_policy_set_free(back);
  cedar_policy_set_free(set);
}

/* format(parse(x)) parses to the same canonical text, and EST round-trips. */
static void printing_round_trips(void **state) {
  (void)state;
  const char *text =
      "@a(\"x\") @b permit(principal is User in Group::\"g\", action in [Action::\"a\", NS::Action::\"b\"], "
      "resource) when { if principal has a.b then !(-context.x > 3) && [1, \"s\\n\", {\"k y\": true}]"
      ".contains(ip(\"1.2.3.4\").isInRange(ip(\"1.0.0.0/8\"))) else resource like \"a*b\\*c\" } unless { "
      "-(-5) == - 5 && --context.x == 1 && !!context.y && context[\"x y\"] && (1 + 2) * 3 - 4 != 0 && "
      "(if true then 1 else 2) == 1 && principal.getTag(\"t\") };";
  cedar_policy_set *set;
  cedar_diagnostic diag = {0};
  assert_int_equal(cedar_policy_set_parse(text, strlen(text), NULL, 0, &set, &diag), 0);
  char *once = cedar_policy_set_to_text(set);
  cedar_policy_set *again;
  if (cedar_policy_set_parse(once, strlen(once), NULL, 0, &again, &diag) < 0)
    fail_msg("formatted text does not parse: %s\n%s", diag.message, once);
  char *twice = cedar_policy_set_to_text(again);
  assert_string_equal(once, twice);
  char *json = cedar_policy_set_to_json(set);
  cedar_policy_set *from_json;
  if (cedar_policy_set_parse_json(json, strlen(json), NULL, &from_json, &diag) < 0)
    fail_msg("EST does not parse: %s", diag.message);
  char *thrice = cedar_policy_set_to_text(from_json);
  assert_string_equal(once, thrice);
  free(once);
  free(twice);
  free(thrice);
  free(json);
  cedar_policy_set_free(set);
  cedar_policy_set_free(again);
  cedar_policy_set_free(from_json);
}

static void entity_json_errors(void **state) {
  (void)state;
  cedar_entities *es = NULL;
  cedar_diagnostic diag = {0};
  const char *dup =
      "[{\"uid\":{\"type\":\"A\",\"id\":\"x\"},\"attrs\":{\"n\":1},\"parents\":[]},"
      "{\"uid\":{\"type\":\"A\",\"id\":\"x\"},\"attrs\":{},\"parents\":[]}]";
  assert_int_equal(cedar_entities_parse_json(dup, strlen(dup), "e.json", NULL, &es, &diag), -EINVAL);
  assert_non_null(strstr(diag.message, "duplicate"));
  /* an identical repeat is accepted, as upstream does; unknown fields are ignored */
  const char *same =
      "[{\"uid\":{\"type\":\"A\",\"id\":\"x\"},\"attrs\":{},\"parents\":[],\"note\":1},"
      "{\"uid\":{\"type\":\"A\",\"id\":\"x\"},\"attrs\":{},\"parents\":[]}]";
  assert_int_equal(cedar_entities_parse_json(same, strlen(same), "e.json", NULL, &es, &diag), 0);
  cedar_entities_free(es);
  /* found by the difftest: a cycle in the parent relation is refused, as upstream does */
  const char *cycle =
      "[{\"uid\":{\"type\":\"G\",\"id\":\"a\"},\"attrs\":{},\"parents\":[{\"type\":\"G\",\"id\":\"b\"}]},"
      "{\"uid\":{\"type\":\"G\",\"id\":\"b\"},\"attrs\":{},\"parents\":[{\"type\":\"G\",\"id\":\"a\"}]}]";
  assert_int_equal(cedar_entities_parse_json(cycle, strlen(cycle), "e.json", NULL, &es, &diag), -EINVAL);
  assert_non_null(strstr(diag.message, "cycle"));
  const char *missing = "[{\"uid\":{\"type\":\"A\",\"id\":\"x\"},\"parents\":[]}]";
  assert_int_equal(cedar_entities_parse_json(missing, strlen(missing), "e.json", NULL, &es, &diag), -EINVAL);
  assert_non_null(strstr(diag.message, "attrs"));
  /* a one-key object that is not a valid escape is a record */
  const char *rec =
      "[{\"uid\":{\"type\":\"A\",\"id\":\"x\"},\"attrs\":{\"b\":{\"__entity\":{\"type\":\"U\"}}},"
      "\"parents\":[]}]";
  assert_int_equal(cedar_entities_parse_json(rec, strlen(rec), "e.json", NULL, &es, &diag), 0);
  cedar_entities_free(es);
  const char *bad = "[{\"uid\":{\"type\":\"A\",\"id\":\"x\"},\"attrs\":{\"f\":1.5},\"parents\":[]}]";
  assert_int_equal(cedar_entities_parse_json(bad, strlen(bad), "e.json", NULL, &es, &diag), -EINVAL);
  assert_non_null(strstr(diag.message, "A::\"x\""));
  const char *syntax = "[{\"uid\": }]";
  assert_int_equal(cedar_entities_parse_json(syntax, strlen(syntax), "e.json", NULL, &es, &diag), -EINVAL);
  assert_int_equal(diag.line, 1);
  /* NUL bytes in ids and attribute names survive */
  const char *nul =
      "[{\"uid\":{\"type\":\"A\",\"id\":\"a\\u0000b\"},\"attrs\":{\"k\\u0000\":1},\"parents\":[]}]";
  assert_int_equal(cedar_entities_parse_json(nul, strlen(nul), "e.json", NULL, &es, &diag), 0);
  assert_int_equal(cedar_entities_count(es), 1);
  cedar_policy_set *set;
  const char *p = "permit(principal, action, resource) when { principal[\"k\\0\"] == 1 };";
  assert_int_equal(cedar_policy_set_parse(p, strlen(p), NULL, 0, &set, &diag), 0);
  cedar_request req = {{"A", "a\0b", 3}, {"Action", "v", 0}, {"A", "a\0b", 3}, NULL};
  cedar_response resp;
  assert_int_equal(cedar_authorize(set, es, &req, &resp), 0);
  assert_int_equal(resp.decision, CEDAR_ALLOW);
  cedar_response_release(&resp);
  cedar_policy_set_free(set);
  cedar_entities_free(es);
}

static void evaluate_expression(void **state) {
  (void)state;
  cedar_expression *x;
  cedar_diagnostic diag = {0};
  const char *text = "[3, 1, 2].contains(1) && {a: decimal(\"1.5\")}.a.greaterThan(decimal(\"1.0\"))";
  assert_int_equal(cedar_expression_parse(text, strlen(text), NULL, &x, &diag), 0);
  cedar_request req = {{"A", "a", 0}, {"Action", "v", 0}, {"A", "b", 0}, NULL};
  char *out = NULL;
  assert_int_equal(cedar_evaluate(x, NULL, &req, &out, &diag), 0);
  assert_string_equal(out, "true");
  free(out);
  cedar_expression_free(x);
  char *type, *id;
  size_t n;
  assert_int_equal(cedar_uid_parse("Dome::Agent::\"a\\u{1}\"", 21, &type, &id, &n, &diag), 0);
  assert_string_equal(type, "Dome::Agent");
  assert_int_equal(n, 2);
  free(type);
  free(id);
  assert_int_equal(cedar_uid_parse("1 + 2", 5, &type, &id, &n, &diag), -EINVAL);
}

/* One immutable policy set and entity set authorized from several threads at once. */
typedef struct shared_inputs {
  const cedar_policy_set *set;
  const cedar_entities *entities;
  int mismatches;
} shared_inputs;

static void *authorize_many(void *arg) {
  shared_inputs *in = arg;
  for (int i = 0; i < 2000; i++) {
    bool alice = i % 2 == 0;
    cedar_request req = {
        {"User", alice ? "alice" : "ghost", 0}, {"Action", "view", 0}, {"Photo", "p", 0}, NULL};
    cedar_response resp;
    if (cedar_authorize(in->set, in->entities, &req, &resp) < 0) {
      __atomic_add_fetch(&in->mismatches, 1, __ATOMIC_RELAXED);
      continue;
    }
    if ((resp.decision == CEDAR_ALLOW) != alice || resp.error_count != 0)
      __atomic_add_fetch(&in->mismatches, 1, __ATOMIC_RELAXED);
    cedar_response_release(&resp);
  }
  return NULL;
}

static void concurrent_authorization(void **state) {
  (void)state;
  const char *text = "permit(principal in Group::\"all\", action, resource) when { principal.age > 18 };";
  cedar_policy_set *set;
  cedar_entities *entities;
  cedar_diagnostic diag = {0};
  assert_int_equal(cedar_policy_set_parse(text, strlen(text), NULL, 0, &set, &diag), 0);
  assert_int_equal(
      cedar_entities_parse_json(entities_json, strlen(entities_json), NULL, NULL, &entities, &diag), 0);
  shared_inputs in = {set, entities, 0};
  pthread_t threads[4];
  for (int i = 0; i < 4; i++) assert_int_equal(pthread_create(&threads[i], NULL, authorize_many, &in), 0);
  for (int i = 0; i < 4; i++) pthread_join(threads[i], NULL);
  assert_int_equal(in.mismatches, 0);
  cedar_entities_free(entities);
  cedar_policy_set_free(set);
}

/* Data typed by a schema: implicit entity references and extension values; entities must conform, a
 * context only needs the right shape (found by the difftest against cedar-wasm). */
static void schema_typed_data(void **state) {
  (void)state;
  const char *schema_text =
      "entity User; entity Photo { owner: User, ip?: ipaddr };\n"
      "action view appliesTo { principal: [User], resource: [Photo], context: { src?: ipaddr, flag?: Bool } "
      "};";
  cedar_schema *schema;
  assert_int_equal(cedar_schema_parse(schema_text, strlen(schema_text), "s", &schema, NULL), 0);
  cedar_diagnostic diag = {0};
  cedar_entities *es;
  const char *ok =
      "[{\"uid\":{\"type\":\"Photo\",\"id\":\"p\"},\"attrs\":{\"owner\":{\"type\":\"User\","
      "\"id\":\"a\"},\"ip\":\"10.0.0.1\"},\"parents\":[]}]";
  assert_int_equal(cedar_entities_parse_json(ok, strlen(ok), "e", schema, &es, &diag), 0);
  const char *wrong =
      "[{\"uid\":{\"type\":\"Photo\",\"id\":\"p\"},\"attrs\":{\"owner\":{\"type\":\"User\","
      "\"id\":\"a\"},\"ip\":5},\"parents\":[]}]";
  cedar_entities *bad;
  assert_int_equal(cedar_entities_parse_json(wrong, strlen(wrong), "e", schema, &bad, &diag), -EINVAL);
  const char *missing = "[{\"uid\":{\"type\":\"Photo\",\"id\":\"q\"},\"attrs\":{},\"parents\":[]}]";
  assert_int_equal(cedar_entities_parse_json(missing, strlen(missing), "e", schema, &bad, &diag), -EINVAL);
  assert_non_null(strstr(diag.message, "owner"));
  cedar_uid_ref view = {"Action", "view", 0};
  cedar_context *ctx;
  const char *c1 = "{\"src\": \"10.0.0.1\", \"flag\": 3}"; /* flag's type is request validation's business */
  assert_int_equal(cedar_context_parse_json(c1, strlen(c1), "c", schema, &view, &ctx, &diag), 0);
  const char *c2 = "{\"zzz\": 1}";
  cedar_context *bad_ctx;
  assert_int_equal(cedar_context_parse_json(c2, strlen(c2), "c", schema, &view, &bad_ctx, &diag), -EINVAL);
  const char *text =
      "permit(principal, action, resource) when { resource.owner == principal && resource.ip.isLoopback() == "
      "false "
      "&& context.src.isInRange(ip(\"10.0.0.0/8\")) && context.flag == 3 };";
  cedar_policy_set *set;
  assert_int_equal(cedar_policy_set_parse(text, strlen(text), NULL, 0, &set, &diag), 0);
  cedar_request req = {{"User", "a", 0}, view, {"Photo", "p", 0}, ctx};
  cedar_response resp;
  assert_int_equal(cedar_authorize(set, es, &req, &resp), 0);
  assert_int_equal(resp.decision, CEDAR_ALLOW);
  cedar_response_release(&resp);
  cedar_policy_set_free(set);
  cedar_context_free(ctx);
  cedar_entities_free(es);
  cedar_schema_free(schema);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(operators_and_errors),    cmocka_unit_test(entities_and_hierarchy),
      cmocka_unit_test(extensions_and_like),     cmocka_unit_test(parser_errors),
      cmocka_unit_test(ids_templates_and_links), cmocka_unit_test(trailing_comma_in_scope),
      cmocka_unit_test(printing_round_trips),    cmocka_unit_test(entity_json_errors),
      cmocka_unit_test(schema_typed_data),       cmocka_unit_test(concurrent_authorization),
      cmocka_unit_test(evaluate_expression),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
