/* libFuzzer target: the JSON policy format (EST and policy-set JSON). Accepted input must print to Cedar
 * text and authorize a request without crashing. */
#include <stdint.h>
#include <stdlib.h>

#include "policy/cedar.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  cedar_policy_set *set;
  cedar_diagnostic diag;
  if (cedar_policy_set_parse_json((const char *)data, size, "fuzz", &set, &diag) < 0) return 0;
  free(cedar_policy_set_to_text(set));
  free(cedar_policy_set_to_json(set));
  cedar_request req = {{"User", "alice", 0}, {"Action", "view", 0}, {"Photo", "p", 0}, NULL};
  cedar_response resp;
  if (cedar_authorize(set, NULL, &req, &resp) == 0) cedar_response_release(&resp);
  cedar_policy_set_free(set);
  return 0;
}
