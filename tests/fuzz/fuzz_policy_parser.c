/* libFuzzer target: the Cedar policy parser. Properties: never crashes; an accepted policy set prints to
 * text that parses again and prints identically; its EST JSON parses back to the same text; every
 * policy evaluates (against an empty entity set) without crashing. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "policy/cedar.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  cedar_policy_set *set;
  cedar_diagnostic diag;
  if (cedar_policy_set_parse((const char *)data, size, "fuzz", 0, &set, &diag) < 0) return 0;
  char *text = cedar_policy_set_to_text(set);
  if (!text) abort();
  cedar_policy_set *again;
  if (cedar_policy_set_parse(text, strlen(text), "printed", 0, &again, &diag) < 0) abort();
  char *text2 = cedar_policy_set_to_text(again);
  if (!text2 || strcmp(text, text2) != 0) abort();
  char *json = cedar_policy_set_to_json(set);
  if (!json) abort();
  cedar_policy_set *from_json;
  if (cedar_policy_set_parse_json(json, strlen(json), "est", &from_json, &diag) < 0) abort();
  char *text3 = cedar_policy_set_to_text(from_json);
  if (!text3 || strcmp(text, text3) != 0) abort();
  cedar_request req = {{"User", "alice", 0}, {"Action", "view", 0}, {"Photo", "p", 0}, NULL};
  cedar_response resp;
  if (cedar_authorize(set, NULL, &req, &resp) == 0) cedar_response_release(&resp);
  free(text);
  free(text2);
  free(text3);
  free(json);
  cedar_policy_set_free(set);
  cedar_policy_set_free(again);
  cedar_policy_set_free(from_json);
  return 0;
}
