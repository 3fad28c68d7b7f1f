/* Strict validation of Cedar policies, requests and entities against a schema.
 *
 * Implements Cedar's validator in strict mode (Cedar language reference "Policy validation";
 * cedar-policy 4.x validator: rbac.rs, typecheck.rs, types.rs):
 *   - every entity type named in a policy is declared (action types are checked by id instead);
 *   - every action uid names a declared action; enum entity uids use a declared id;
 *   - the scope can apply to some request: an action the scope admits applies to a principal type and a
 *     resource type the scope admits ("invalid action application"; a warning since 4.13, see below);
 *   - the condition `scope && when... && !unless...` typechecks in every request environment
 *     (principal type x action x resource type of the schema's appliesTo, template slots linked to each
 *     entity type they can take): singleton Bool types True/False for short-circuiting, least upper bounds
 *     without width subtyping, entity types never merged, attributes exist and optional ones are guarded
 *     by `has` (capabilities), tags guarded by hasTag, `==`/contains/containsAll/containsAny operands of
 *     compatible types, `<` etc. on Long/datetime/duration, extension functions with their signatures and
 *     constructors applied to valid string literals, no empty set literals;
 *   - a policy whose condition is False in every environment is reported as impossible (a warning, as
 *     upstream).
 * Template-linked policies are checked for their slot values (declared types, action application).
 *
 * All functions are thread-safe on shared immutable inputs. */
#ifndef DOME_POLICY_VALIDATE_VALIDATE_H
#define DOME_POLICY_VALIDATE_VALIDATE_H

#include <stdbool.h>
#include <stddef.h>

#include "policy/cedar.h"
#include "policy/schema/schema.h"

/* One validation finding. */
typedef struct cedar_validation_issue {
  bool is_warning;       /* warnings (impossible policy) do not fail validation */
  char policy_id[128];   /* the policy's id (truncated to fit) */
  char file[256];        /* policy source file ("" when unknown) */
  unsigned line, column; /* of the offending sub-expression (or the policy), 1-based; 0 when unknown */
  char message[512];     /* one line a newcomer can act on, naming the sub-expression */
} cedar_validation_issue;

typedef struct cedar_validation_result {
  cedar_validation_issue *issues; /* errors and warnings, by policy order then position */
  size_t count;
  size_t error_count;
  size_t warning_count;
} cedar_validation_result;

/* Validate every static policy, template and template-linked policy of `set` against `schema` in strict
 * mode, as cedar-policy 4.13 (the cedar-wasm reference): a scope no action applies to ("unable to find an
 * applicable action") and an impossible policy are warnings. Fills *result (release with
 * cedar_validation_result_release) and returns 0 whether or not the policies validate; -ENOMEM on
 * allocation failure (*result then empty). */
int cedar_validate(const cedar_schema *schema, const cedar_policy_set *set, cedar_validation_result *result);

/* Options of cedar_validate_with. */
enum {
  /* Report a scope no action applies to as an error, as the cedar-policy release that generated the
   * cedar-integration-tests corpus did (its `shouldValidate` expects it); 4.13 reports a warning. */
  CEDAR_VALIDATE_ACTION_APPLICATION_ERROR = 1u << 0,
};
int cedar_validate_with(const cedar_schema *schema, const cedar_policy_set *set, unsigned flags,
                        cedar_validation_result *result);

/* True when result has no errors (warnings allowed), as upstream's `validation_passed`. */
bool cedar_validation_passed(const cedar_validation_result *result);

void cedar_validation_result_release(cedar_validation_result *result);

/* Format one issue as "file:line:col: error: policy `id`: message" into buf (size bytes, NUL-terminated
 * when size > 0). Returns buf. */
const char *cedar_validation_issue_format(const cedar_validation_issue *issue, char *buf, size_t size);

/* Request validation (upstream Request::new with a schema): the action is declared, the principal and
 * resource types are among the action's appliesTo types, and the context conforms to the action's
 * context type (required attributes present, no undeclared attribute of a closed record, values of the
 * declared types). context may be NULL (the empty record). Returns 0 when valid, -EINVAL with a one-line
 * reason in message (size bytes) otherwise. */
int cedar_validate_request(const cedar_schema *schema, const cedar_request *request, char *message,
                           size_t size);

/* Entity validation (upstream entity conformance): the entity's type is declared (or it is a declared
 * action), enum entities use a declared id, its attributes match the declared shape (required ones present,
 * no undeclared ones in a closed record, values of the declared types), its tags match the declared tag
 * type (no tags when none are declared), and every direct parent's type is allowed by memberOfTypes.
 * Returns 0, or -EINVAL with a one-line reason naming the entity in message. */
struct cedar_entity;
int cedar_validate_entity(const cedar_schema *schema, const struct cedar_entity *entity, char *message,
                          size_t size);

#endif
