/* Unit tests for partial evaluation (cedar_partially_authorize): decisions known from the known parts,
 * residuals that keep Cedar's short-circuit and error semantics, residual text and EST. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "policy/cedar.h"

static const char *entities_json =
    "[{\"uid\":{\"type\":\"Dome::Agent\",\"id\":\"a\"},\"attrs\":{\"admin\":false,\"level\":3},\"parents\":[]"
    "},"
    "{\"uid\":{\"type\":\"Dome::Path\",\"id\":\"/workspace/a.csv\"},\"attrs\":{},"
    "\"parents\":[{\"type\":\"Dome::Path\",\"id\":\"/workspace\"}]}]";

typedef struct run {
  cedar_policy_set *set;
  cedar_entities *entities;
  cedar_context *context;
  cedar_partial_response response;
  char *residual_text;
} run;

/* Partially authorize `policies` for agent a / fs:read with the resource unknown. */
static void partial(run *r, const char *policies, const char *context_json, bool principal_unknown) {
  cedar_diagnostic diag = {0};
  memset(r, 0, sizeof *r);
  if (cedar_policy_set_parse(policies, strlen(policies), "p.cedar", 0, &r->set, &diag) < 0)
    fail_msg("parse: %s", diag.message);
  assert_int_equal(
      cedar_entities_parse_json(entities_json, strlen(entities_json), NULL, NULL, &r->entities, &diag), 0);
  if (context_json)
    assert_int_equal(
        cedar_context_parse_json(context_json, strlen(context_json), NULL, NULL, NULL, &r->context, &diag),
        0);
  cedar_partial_request req = {{principal_unknown ? NULL : "Dome::Agent", "a", 0},
                               {"Dome::Action", "fs:read", 0},
                               {NULL, NULL, 0},
                               r->context,
                               false};
  assert_int_equal(cedar_partially_authorize(r->set, r->entities, &req, &r->response), 0);
  r->residual_text = cedar_policy_set_to_text(r->response.residuals);
  assert_non_null(r->residual_text);
}

static void release(run *r) {
  free(r->residual_text);
  cedar_partial_response_release(&r->response);
  cedar_context_free(r->context);
  cedar_entities_free(r->entities);
  cedar_policy_set_free(r->set);
}

static void has_residual(const run *r, const char *needle) {
  if (!strstr(r->residual_text, needle)) fail_msg("residuals lack `%s`:\n%s", needle, r->residual_text);
}

static void decided_without_the_unknowns(void **state) {
  (void)state;
  run r;
  /* a forbid that holds whatever the resource is decides */
  partial(&r,
          "permit(principal, action, resource in Dome::Path::\"/workspace\");\n"
          "forbid(principal == Dome::Agent::\"a\", action, resource);",
          NULL, false);
  assert_int_equal(r.response.decision, CEDAR_PARTIAL_DENY);
  assert_int_equal(r.response.satisfied_count, 1);
  assert_string_equal(r.response.satisfied[0], "policy1");
  release(&r);
  /* a permit that holds and no forbid that could: allow */
  partial(&r,
          "permit(principal, action == Dome::Action::\"fs:read\", resource);\n"
          "forbid(principal, action, resource) when { principal.admin };",
          NULL, false);
  assert_int_equal(r.response.decision, CEDAR_PARTIAL_ALLOW);
  assert_int_equal(cedar_policy_set_count(r.response.residuals), 0);
  release(&r);
  /* nothing can apply: deny */
  partial(&r, "permit(principal == Dome::Agent::\"b\", action, resource);", NULL, false);
  assert_int_equal(r.response.decision, CEDAR_PARTIAL_DENY);
  release(&r);
}

static void residuals_over_the_resource(void **state) {
  (void)state;
  run r;
  partial(&r,
          "permit(principal == Dome::Agent::\"a\", action, resource in Dome::Path::\"/workspace\") "
          "when { principal.level > 2 && resource.size < 10 };\n"
          "forbid(principal, action, resource) when { principal.admin || resource like \"*secret*\" };",
          NULL, false);
  assert_int_equal(r.response.decision, CEDAR_PARTIAL_UNKNOWN);
  assert_int_equal(cedar_policy_set_count(r.response.residuals), 2);
  /* the known parts are gone: no principal, no `true &&`, no `false ||` */
  has_residual(&r, "when { resource in Dome::Path::\"/workspace\" && resource.size < 10 };");
  has_residual(&r, "when { resource like \"*secret*\" };");
  assert_null(strstr(r.residual_text, "principal."));
  /* residual text parses again, and so does its EST */
  cedar_policy_set *again;
  cedar_diagnostic diag;
  assert_int_equal(cedar_policy_set_parse(r.residual_text, strlen(r.residual_text), NULL, 0, &again, &diag),
                   0);
  cedar_policy_set_free(again);
  char *json = cedar_policy_set_to_json(r.response.residuals);
  assert_int_equal(cedar_policy_set_parse_json(json, strlen(json), NULL, &again, &diag), 0);
  free(json);
  cedar_policy_set_free(again);
  release(&r);
}

static void errors_keep_their_place(void **state) {
  (void)state;
  run r;
  /* errors reached whatever the resource is are reported, not residual */
  partial(&r, "permit(principal, action, resource) when { principal.missing == 1 };", NULL, false);
  assert_int_equal(r.response.decision, CEDAR_PARTIAL_DENY);
  assert_int_equal(r.response.error_count, 1);
  release(&r);
  /* an error behind a residual && stays in the residual (it happens only when the resource matches) */
  partial(&r, "permit(principal, action, resource) when { resource.ok && principal.missing == 1 };", NULL,
          false);
  assert_int_equal(r.response.decision, CEDAR_PARTIAL_UNKNOWN);
  assert_int_equal(r.response.error_count, 0);
  has_residual(&r, "resource.ok && Dome::Agent::\"a\".missing == 1");
  release(&r);
  /* `R && true` keeps `true` unless R is certainly boolean */
  partial(&r, "permit(principal, action, resource) when { resource.flag && true };", NULL, false);
  has_residual(&r, "resource.flag && true");
  release(&r);
}

static void unknown_principal_and_context_parts(void **state) {
  (void)state;
  run r;
  partial(&r, "permit(principal in Dome::Group::\"ops\", action, resource) when { context.port == 443 };",
          "{\"port\": {\"__extn\": {\"fn\": \"unknown\", \"arg\": \"port\"}}}", true);
  assert_int_equal(r.response.decision, CEDAR_PARTIAL_UNKNOWN);
  has_residual(&r, "principal in Dome::Group::\"ops\" && unknown(\"port\") == 443");
  release(&r);
}

/* An unknown resource of known type decides `is` and `==` against other types. */
static void unknown_resource_of_known_type(void **state) {
  (void)state;
  const char *text =
      "permit(principal, action, resource is Dome::Path) when { resource in Dome::Path::\"/workspace\" };\n"
      "forbid(principal, action, resource == Dome::Agent::\"x\");\n"
      "forbid(principal, action, resource is Dome::Agent in Dome::Group::\"g\");";
  cedar_policy_set *set;
  cedar_diagnostic diag = {0};
  assert_int_equal(cedar_policy_set_parse(text, strlen(text), NULL, 0, &set, &diag), 0);
  cedar_partial_request req = {
      {"Dome::Agent", "a", 0}, {"Dome::Action", "fs:read", 0}, {"Dome::Path", NULL, 0}, NULL, false};
  cedar_partial_response resp;
  assert_int_equal(cedar_partially_authorize(set, NULL, &req, &resp), 0);
  assert_int_equal(resp.decision, CEDAR_PARTIAL_UNKNOWN);
  assert_int_equal(cedar_policy_set_count(resp.residuals), 1); /* both forbids are decided false */
  char *residual = cedar_policy_set_to_text(resp.residuals);
  assert_non_null(strstr(residual, "when { resource in Dome::Path::\"/workspace\" };"));
  free(residual);
  cedar_partial_response_release(&resp);
  cedar_policy_set_free(set);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(decided_without_the_unknowns),   cmocka_unit_test(residuals_over_the_resource),
      cmocka_unit_test(errors_keep_their_place),        cmocka_unit_test(unknown_principal_and_context_parts),
      cmocka_unit_test(unknown_resource_of_known_type),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
