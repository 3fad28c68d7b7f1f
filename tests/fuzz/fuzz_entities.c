/* libFuzzer target: entities JSON (schema-less, and typed by a small schema) and context JSON. Accepted
 * entities are used to authorize a fixed policy set that reads attributes, tags and the hierarchy. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "policy/cedar.h"
#include "policy/schema/schema.h"

static const char policies[] =
    "permit(principal in Group::\"g\", action, resource) when { principal.a == resource.b || "
    "principal.getTag(\"t\") == 1 };\n"
    "forbid(principal, action, resource) when { context.x.contains(principal) && principal has c };\n";
static const char schema_text[] =
    "entity Group; entity User in [Group] { a?: Long, c?: ipaddr, d?: Set<User> } tags Long;\n"
    "entity Photo { b: Long };\n"
    "action view appliesTo { principal: User, resource: Photo, context: { x?: Set<User> } };\n";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static cedar_policy_set *set;
  static cedar_schema *schema;
  cedar_diagnostic diag;
  if (!set && cedar_policy_set_parse(policies, sizeof policies - 1, "p", 0, &set, &diag) < 0) abort();
  if (!schema && cedar_schema_parse(schema_text, sizeof schema_text - 1, "s", &schema, NULL) < 0) abort();
  for (int typed = 0; typed < 2; typed++) {
    cedar_entities *es;
    if (cedar_entities_parse_json((const char *)data, size, "fuzz", typed ? schema : NULL, &es, &diag) == 0) {
      cedar_request req = {{"User", "u", 0}, {"Action", "view", 0}, {"Photo", "p", 0}, NULL};
      cedar_response resp;
      if (cedar_authorize(set, es, &req, &resp) == 0) cedar_response_release(&resp);
      cedar_entities_free(es);
    }
    cedar_context *ctx;
    cedar_uid_ref action = {"Action", "view", 0};
    if (cedar_context_parse_json((const char *)data, size, "fuzz", typed ? schema : NULL,
                                 typed ? &action : NULL, &ctx, &diag) == 0) {
      cedar_request req = {{"User", "u", 0}, action, {"Photo", "p", 0}, ctx};
      cedar_response resp;
      if (cedar_authorize(set, NULL, &req, &resp) == 0) cedar_response_release(&resp);
      cedar_context_free(ctx);
    }
  }
  return 0;
}
