/* The control store's replication seams (fleet mode): the replicate hook sees every change of a
 * replicated document before it is written and can refuse it; control_store_apply_entry applies an
 * entry received from the fleet, durably, and says whether anything changed. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "supervisor/control/control.h"
#include "tests/unit/control/store_fixture.h"

struct offered {
  int calls;
  char document[32];
  bool had_key, has_key;
  bool refuse;
};

static int hook(void *context, const char *document, const json_t *current, const json_t *next,
                dome_error *err) {
  struct offered *offered = context;
  offered->calls++;
  snprintf(offered->document, sizeof offered->document, "%s", document);
  offered->had_key = json_object_get(current, "agent-1") != NULL;
  offered->has_key = json_object_get(next, "agent-1") != NULL;
  if (offered->refuse) return dome_error_set(err, EBUSY, "changed by another node meanwhile");
  return 0;
}

static void test_hook_sees_and_can_refuse_changes(void **state) {
  (void)state;
  control_store *store = open_store();
  struct offered offered = {.refuse = true};
  control_store_set_replicate_hook(store, hook, &offered);
  dome_error err = {0};
  char token[CONTROL_TOKEN_SIZE];
  assert_int_equal(control_agent_register(store, "agent-1", "code-execution", token, &err), -EBUSY);
  assert_string_equal(offered.document, "agents");
  assert_false(offered.had_key);
  assert_true(offered.has_key);
  assert_null(control_agent_get(store, "agent-1")); /* refused: nothing changed */
  offered.refuse = false;
  assert_int_equal(control_agent_register(store, "agent-1", "code-execution", token, &err), 0);
  json_t *agent = control_agent_get(store, "agent-1");
  assert_non_null(agent);
  json_decref(agent);
  assert_int_equal(control_rules_store(store, "v1", "permit(principal, action, resource);\n", &err), 1);
  assert_string_equal(offered.document, "rules");
  control_store_close(store);
}

static void test_apply_entry(void **state) {
  (void)state;
  control_store *store = open_store();
  dome_error err = {0};
  json_t *record = json_pack("{s:s,s:s,s:s,s:i,s:i}", "capabilities", "code-execution", "status", "revoked",
                             "token_hash", "00ff", "created", 1, "updated", 2);
  assert_int_equal(control_store_apply_entry(store, "agents", "remote", record, &err), 1);
  assert_int_equal(control_store_apply_entry(store, "agents", "remote", record, &err), 0); /* unchanged */
  struct control_token_check check;
  assert_null(control_agent_authenticate_at(store, "dome_nothing", 10, &check, &err));
  json_t *agent = control_agent_get(store, "remote");
  assert_non_null(agent);
  assert_string_equal(json_string_value(json_object_get(agent, "status")), "revoked");
  assert_null(json_object_get(agent, "token_hash")); /* never shown */
  json_decref(agent);
  assert_int_equal(control_store_apply_entry(store, "agents", "../escape", record, &err), -EINVAL);
  assert_non_null(strstr(err.message, "invalid key"));
  assert_int_equal(control_store_apply_entry(store, "secrets", "x", record, &err), -EINVAL);
  json_t *array = json_array();
  assert_int_equal(control_store_apply_entry(store, "quotas", "code-execution", array, &err), -EINVAL);
  json_decref(array);
  /* rules: the text of version 1, then the index activating it */
  json_t *text = json_pack("{s:s}", "text", "permit(principal, action, resource);\n");
  assert_int_equal(control_store_apply_entry(store, "rules", "1", text, &err), 1);
  assert_int_equal(control_store_apply_entry(store, "rules", "1", text, &err), 0);
  json_t *index = json_pack("{s:i,s:[{s:i,s:s,s:s,s:i,s:i}]}", "active", 1, "versions", "version", 1, "name",
                            "r", "sha256", "00", "created", 1, "bytes", 36);
  assert_int_equal(control_store_apply_entry(store, "rules", "index", index, &err), 1);
  assert_int_equal(control_rules_active(store), 1);
  control_store_close(store);
  /* durable: a reopened store has them */
  store = open_store();
  assert_int_equal(control_rules_active(store), 1);
  char *rules = control_rules_text(store, 1, &err);
  assert_non_null(rules);
  assert_string_equal(rules, "permit(principal, action, resource);\n");
  free(rules);
  agent = control_agent_get(store, "remote");
  assert_non_null(agent);
  json_decref(agent);
  assert_int_equal(control_store_apply_entry(store, "agents", "remote", NULL, &err), 1);
  assert_null(control_agent_get(store, "remote"));
  control_store_close(store);
  json_decref(record);
  json_decref(text);
  json_decref(index);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_hook_sees_and_can_refuse_changes, setup, teardown),
      cmocka_unit_test_setup_teardown(test_apply_entry, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
