/* Internals of the validator: validator types, request environments and the typechecker. */
#ifndef DOME_POLICY_VALIDATE_VALIDATE_INTERNAL_H
#define DOME_POLICY_VALIDATE_VALIDATE_INTERNAL_H

#include "policy/schema/schema_internal.h"
#include "policy/syntax/syntax.h"
#include "policy/validate/validate.h"

/* Nesting bound of the typechecker's recursion (expressions are bounded by the parser too). */
#define MAX_TYPECHECK_DEPTH 512

/* Validator types (cedar-policy validator types.rs, strict mode); see types.h for operations. */
typedef enum vt_kind {
  VT_NEVER,
  VT_TRUE,
  VT_FALSE,
  VT_BOOL,
  VT_LONG,
  VT_STRING,
  VT_SET,        /* element NULL: any set (only as an expectation) */
  VT_RECORD,     /* attributes sorted by name */
  VT_ENTITY,     /* name: one entity type (or action type) */
  VT_ANY_ENTITY, /* an entity of unknown type (unlinked template slot) */
  VT_EXTENSION,  /* name */
} vt_kind;

typedef struct vtype vtype;
typedef struct vattr {
  const char *name; /* schema-encoded (NUL as C0 80) */
  const vtype *type;
  bool required;
} vattr;

struct vtype {
  vt_kind kind;
  const char *name;
  const vtype *element;
  const vattr *attributes;
  size_t attribute_count;
  bool open;
};

/* A request environment: principal type, action, resource type, and the types template slots are linked
 * to (NULL: no slot / any entity). */
typedef struct request_env {
  const char *principal;
  const cedar_schema_action *action;
  const char *resource;
  const char *principal_slot;
  const char *resource_slot;
} request_env;

/* A finding of the typechecker (deduplicated by the caller). */
typedef struct finding {
  unsigned line, column;
  char message[480];
} finding;

typedef struct findings {
  finding *items;
  size_t count, capacity;
} findings;

typedef struct checker {
  const cedar_schema *schema;
  schema_arena *arena; /* scratch memory of one validation */
  const cedar_policy *policy;
  const request_env *env;
  findings *errors;
  int depth;
  bool failed_alloc;
} checker;

/* A capability: `on has attr` (attr set) or `on.hasTag(tag)` (tag set) is known true. */
typedef struct cap cap;
struct cap {
  const cedar_expr *on;
  const char *attr;      /* attribute capability */
  const cedar_expr *tag; /* tag capability (attr NULL) */
  const cap *next;
};

/* Structural equality of expressions, source positions ignored (depth: recursion so far). */
bool cedar_validate_expr_equal(const cedar_expr *a, const cedar_expr *b, int depth);
/* A one-element capability set (NULL and c->failed_alloc on ENOMEM). */
const cap *cedar_validate_cap_single(checker *c, const cedar_expr *on, const char *attr,
                                     const cedar_expr *tag);
bool cedar_validate_cap_contains(const cap *caps, const cedar_expr *on, const char *attr,
                                 const cedar_expr *tag);
const cap *cedar_validate_cap_union(checker *c, const cap *a, const cap *b);
const cap *cedar_validate_cap_intersect(checker *c, const cap *a, const cap *b);

/* Typecheck `condition` (the whole policy condition) in one environment. Returns its type (NULL when it
 * has none) and sets *typechecked. Errors are appended to c->errors. */
const vtype *cedar_validate_typecheck_condition(checker *c, const cedar_expr *condition, bool *typechecked);

/* Add a finding. */
void cedar_validate_add_finding(findings *list, unsigned line, unsigned column, const char *format, ...)
    __attribute__((format(printf, 4, 5)));

/* Schema-encoded C string of s (arena). */
const char *cedar_validate_encode_str(schema_arena *arena, cedar_str s);
/* Text of an expression / type for messages (arena). */
const char *cedar_validate_expr_text(schema_arena *arena, const cedar_expr *e);
const char *cedar_validate_type_text(schema_arena *arena, const vtype *t);
/* Is `type` an action entity type name ("Action" or "...::Action")? */
bool cedar_validate_is_action_type_name(const char *type);
/* Closest candidate to `name` among candidates (NULL when none is close). */
const char *cedar_validate_closest_name(const char *name, const char *const *candidates, size_t count);

#endif
