/* dome's Cedar engine: the one public header.
 *
 * Implements the Cedar policy language (language version 4.5, as cedar-policy 4.12+): the policy syntax
 * and its JSON form (EST), entities and context JSON, evaluation and authorization
 * (docs.cedarpolicy.com "Policy syntax", "JSON policy format", "Entities & context JSON format",
 * "Operators and functions", "Authorization").
 *
 * Ownership and threads: every object is created by a *_parse or *_load function and released by the
 * matching *_free. A policy set, entity set and context are immutable once built (template links are
 * added before sharing); any number of threads may call cedar_authorize/cedar_evaluate on the same
 * objects at once. There is no global mutable state.
 *
 * Errors: fallible functions return 0 or a negative errno (-EINVAL bad input, -E2BIG input over a
 * limit, -ENOMEM, -errno of open/read) and fill a cedar_diagnostic naming the place (file:line:col) or
 * the policy id. Nothing is changed on failure.
 *
 * Schemas come from policy/schema/schema.h (struct cedar_schema); extension values from
 * policy/extensions/extensions.h. */
#ifndef DOME_POLICY_CEDAR_H
#define DOME_POLICY_CEDAR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct cedar_schema;

/* ---------------- limits ---------------- */

#define CEDAR_MAX_TEXT_BYTES (64u << 20) /* policy / entity / context text accepted, bytes */
#define CEDAR_MAX_DEPTH 256              /* nesting of expressions and JSON values */
#define CEDAR_MAX_CONDITIONS 128         /* when/unless clauses of one policy */

/* ---------------- diagnostics ---------------- */

/* Where an error is and what it says. line/column are 1-based (column in bytes), 0 when unknown.
 * policy_id is "" when the error is not tied to one policy. */
typedef struct cedar_diagnostic {
  char file[256];
  unsigned line;
  unsigned column;
  char policy_id[128];
  char message[512];
} cedar_diagnostic;

/* Format as "file:line:col: policy `id`: message" (unknown parts omitted) into buf (size bytes, always
 * NUL-terminated when size > 0). Returns buf. */
const char *cedar_diagnostic_format(const cedar_diagnostic *diag, char *buf, size_t size);

/* ---------------- entity uids ---------------- */

/* An entity uid as seen through the API. type is a NUL-terminated, fully-qualified entity type
 * ("Dome::Agent"); id is id_length bytes (may hold NUL bytes). When id_length is 0 and id is not NULL,
 * strlen(id) is used, so plain C strings can be passed with id_length 0 (the empty id is ""
 * with id == NULL or "" — both mean the empty string). */
typedef struct cedar_uid_ref {
  const char *type;
  const char *id;
  size_t id_length;
} cedar_uid_ref;

/* Parse an entity uid written in Cedar syntax (`Dome::Agent::"a1"`). On success stores malloc'd copies of
 * the type (NUL-terminated) and id (id_length bytes plus a NUL) in *type and *id. -EINVAL with a
 * diagnostic when text is not a single entity uid. */
int cedar_uid_parse(const char *text, size_t length, char **type, char **id, size_t *id_length,
                    cedar_diagnostic *diag);

/* ---------------- policies ---------------- */

typedef struct cedar_policy_set cedar_policy_set;
typedef struct cedar_policy cedar_policy;

typedef enum cedar_effect { CEDAR_FORBID = 0, CEDAR_PERMIT = 1 } cedar_effect;

/* Parse options. */
enum {
  /* Name policies by their @id("...") annotation where present (as the upstream CLI does); otherwise
   * (and without this flag) policies are named policy0, policy1, ... by position in the text. */
  CEDAR_PARSE_ID_ANNOTATIONS = 1u << 0,
};

/* Parse Cedar policy text[0..length) (UTF-8, need not be NUL-terminated). file names the source in
 * diagnostics (may be NULL). Static policies and templates (with ?principal/?resource slots) are kept
 * in source order. Returns 0 and *out, or -EINVAL (syntax error, with file:line:col), -E2BIG (over
 * CEDAR_MAX_TEXT_BYTES or nesting over CEDAR_MAX_DEPTH), -ENOMEM. */
int cedar_policy_set_parse(const char *text, size_t length, const char *file, unsigned flags,
                           cedar_policy_set **out, cedar_diagnostic *diag);

/* Parse the JSON policy format: either one EST policy object (named policy0) or a policy set
 * {"staticPolicies": {id: EST}, "templates": {id: EST}, "templateLinks": [{templateId, newId,
 * values: {"?principal": uid, "?resource": uid}}]}. Errors as cedar_policy_set_parse. */
int cedar_policy_set_parse_json(const char *text, size_t length, const char *file, cedar_policy_set **out,
                                cedar_diagnostic *diag);

/* Read `path` and parse it: JSON when the first non-blank byte is '{', else Cedar text. */
int cedar_policy_set_load_file(const char *path, unsigned flags, cedar_policy_set **out,
                               cedar_diagnostic *diag);

/* Link template `template_id` into a new static policy `new_id` with the given slot values (NULL for a
 * slot the template does not have). -EINVAL: unknown template, duplicate id, slot mismatch. Not
 * thread-safe: link before sharing the set. */
int cedar_policy_set_link(cedar_policy_set *set, const char *template_id, const char *new_id,
                          const cedar_uid_ref *principal, const cedar_uid_ref *resource,
                          cedar_diagnostic *diag);

void cedar_policy_set_free(cedar_policy_set *set);

/* Policies (static ones, templates and template-linked ones), in order. */
size_t cedar_policy_set_count(const cedar_policy_set *set);
const cedar_policy *cedar_policy_set_at(const cedar_policy_set *set, size_t index);
const cedar_policy *cedar_policy_set_find(const cedar_policy_set *set, const char *id);

const char *cedar_policy_id(const cedar_policy *policy);
cedar_effect cedar_policy_effect(const cedar_policy *policy);
bool cedar_policy_is_template(const cedar_policy *policy);
/* Value of annotation `key` ("" for `@key` without value), NULL when absent. */
const char *cedar_policy_annotation(const cedar_policy *policy, const char *key);
/* Where the policy starts in its source (line/column 0 for JSON sources). */
void cedar_policy_location(const cedar_policy *policy, const char **file, unsigned *line, unsigned *column);

/* Canonical Cedar text of the whole set / one policy (malloc'd, NUL-terminated; NULL on ENOMEM).
 * Parsing the text gives the same policies. Template-linked policies are not printed by the set form
 * (their templates are). */
char *cedar_policy_set_to_text(const cedar_policy_set *set);
char *cedar_policy_to_text(const cedar_policy *policy);
/* EST JSON of one policy / the policy-set JSON (malloc'd, NUL-terminated; NULL on ENOMEM). */
char *cedar_policy_to_json(const cedar_policy *policy);
char *cedar_policy_set_to_json(const cedar_policy_set *set);

/* ---------------- entities and context ---------------- */

typedef struct cedar_entities cedar_entities;
typedef struct cedar_context cedar_context;
struct json_t; /* jansson's json_t */

/* Parse an entities JSON array ([{"uid", "attrs", "parents", "tags"?}]). With a schema, attribute and
 * tag values are typed by it (entity references and extension values may be written implicitly),
 * entities are checked against it, and the schema's action entities (with their action groups) are
 * added. The parent relation is closed transitively; a cycle in it is an error, as upstream. An entity
 * listed twice must be identical. Unknown fields of an entity are ignored; `attrs` and `parents` are
 * required. Errors name the file and the entity. With a schema, the set refers to the schema's names:
 * free the set before the schema. Thread-safe; jansson parses the text (whitespace between tokens is
 * dropped first, and jansson's nodes live in a scratch arena: see policy/syntax/json_load.c).
 * Returns 0, -EINVAL, -E2BIG (size or nesting), -ENOMEM. */
int cedar_entities_parse_json(const char *text, size_t length, const char *file,
                              const struct cedar_schema *schema, cedar_entities **out,
                              cedar_diagnostic *diag);
/* The same from an already parsed jansson value (for a caller that holds the JSON as a tree, e.g. a
 * JSON-RPC message); the tree is only read. Errors carry no line/column. */
int cedar_entities_from_json(const struct json_t *json, const char *file, const struct cedar_schema *schema,
                             cedar_entities **out, cedar_diagnostic *diag);
/* An empty entity set (still needs cedar_entities_free). */
int cedar_entities_empty(cedar_entities **out);
void cedar_entities_free(cedar_entities *entities);
size_t cedar_entities_count(const cedar_entities *entities);

/* Parse a context JSON object. With a schema and the request's action, values are typed by the action's
 * context type: implicit entity references and extension values are converted, undeclared or missing
 * attributes and set/record shape errors are refused; as upstream, a primitive value of another type is
 * kept as written (request validation, policy/validate, reports it). {"__extn": {"fn": "unknown", "arg":
 * NAME}} marks an unknown value (partial evaluation). Errors as cedar_entities_parse_json. */
int cedar_context_parse_json(const char *text, size_t length, const char *file,
                             const struct cedar_schema *schema, const cedar_uid_ref *action,
                             cedar_context **out, cedar_diagnostic *diag);
/* The same from an already parsed jansson value (only read). */
int cedar_context_from_json(const struct json_t *json, const char *file, const struct cedar_schema *schema,
                            const cedar_uid_ref *action, cedar_context **out, cedar_diagnostic *diag);
void cedar_context_free(cedar_context *context);

/* ---------------- requests and authorization ---------------- */

typedef struct cedar_request {
  cedar_uid_ref principal;
  cedar_uid_ref action;
  cedar_uid_ref resource;
  const cedar_context *context; /* NULL: the empty record */
} cedar_request;

typedef enum cedar_decision { CEDAR_DENY = 0, CEDAR_ALLOW = 1 } cedar_decision;

/* An evaluation error of one policy. */
typedef struct cedar_policy_error {
  const char *policy_id; /* points into the policy set */
  char *message;         /* one line, owned by the response */
} cedar_policy_error;

typedef struct cedar_response {
  cedar_decision decision;
  const char **reason; /* determining policy ids (satisfied forbids when denied by one, else satisfied
                        * permits), in policy order; point into the policy set */
  size_t reason_count;
  cedar_policy_error *errors; /* policies whose evaluation errored (they are skipped) */
  size_t error_count;
} cedar_response;

/* Authorize one request (Cedar "Authorization"): any satisfied forbid denies; else any satisfied permit
 * allows; else deny. entities may be NULL (empty). Thread-safe on shared, immutable set/entities.
 * Returns 0 and fills *response (release with cedar_response_release), or -ENOMEM. */
int cedar_authorize(const cedar_policy_set *set, const cedar_entities *entities, const cedar_request *request,
                    cedar_response *response);
void cedar_response_release(cedar_response *response);

/* ---------------- expressions ---------------- */

typedef struct cedar_expression cedar_expression;

/* Parse one expression (`principal.age > 3`). Errors as cedar_policy_set_parse. */
int cedar_expression_parse(const char *text, size_t length, const char *file, cedar_expression **out,
                           cedar_diagnostic *diag);
void cedar_expression_free(cedar_expression *expression);

/* Evaluate an expression for a request. On success returns 0 and stores in *text the value in Cedar
 * syntax (malloc'd); on an evaluation error returns -EINVAL with the message in diag; -ENOMEM. */
int cedar_evaluate(const cedar_expression *expression, const cedar_entities *entities,
                   const cedar_request *request, char **text, cedar_diagnostic *diag);

/* ---------------- partial evaluation ---------------- */

/* A request whose principal, action, resource or context may be unknown. Parts of the context may be
 * unknown too: {"__extn": {"fn": "unknown", "arg": NAME}} in the context JSON. */
/* principal/action/resource: type NULL: unknown; type set and id NULL: an unknown entity of that type
 * (e.g. the resource of an fs: action is some Dome::Path), which decides `is` tests and `==` against
 * entities of other types. */
typedef struct cedar_partial_request {
  cedar_uid_ref principal;
  cedar_uid_ref action;
  cedar_uid_ref resource;
  const cedar_context *context; /* NULL: the empty record (unless context_unknown) */
  bool context_unknown;         /* the whole context is unknown */
} cedar_partial_request;

typedef enum cedar_partial_decision {
  CEDAR_PARTIAL_DENY = 0,
  CEDAR_PARTIAL_ALLOW = 1,
  CEDAR_PARTIAL_UNKNOWN = 2, /* depends on the unknowns: see the residual policies */
} cedar_partial_decision;

typedef struct cedar_partial_response {
  cedar_partial_decision decision;
  /* every policy satisfied whatever the unknowns are, both effects, in policy order; when the decision
   * is known, the determining policies are those of them with the deciding effect (forbid for DENY) */
  const char **satisfied;
  size_t satisfied_count;
  /* policies that error whatever the unknowns are */
  cedar_policy_error *errors;
  size_t error_count;
  /* One residual policy per policy whose outcome depends on the unknowns, with the original id and
   * effect: `effect(principal, action, resource) when { R };` where R mentions only the unknown
   * variables / unknown(NAME) values. Substituting any values for the unknowns and evaluating R gives the
   * original policy's outcome (satisfied, not satisfied, or error). Print with cedar_policy_set_to_text /
   * cedar_policy_set_to_json. The residual set refers to the original set's and the entities' memory: free
   * it (cedar_partial_response_release) before them. */
  cedar_policy_set *residuals;
} cedar_partial_response;

/* Partially authorize (Cedar partial evaluation): the decision when it is determined (a forbid satisfied
 * whatever the unknowns; or a permit satisfied and no forbid that could be), else CEDAR_PARTIAL_UNKNOWN with
 * residuals. Thread-safe like cedar_authorize. Returns 0 or -ENOMEM. */
int cedar_partially_authorize(const cedar_policy_set *set, const cedar_entities *entities,
                              const cedar_partial_request *request, cedar_partial_response *response);
void cedar_partial_response_release(cedar_partial_response *response);

#endif
