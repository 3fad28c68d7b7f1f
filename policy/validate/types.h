/* Validator type operations (internal; see validate_internal.h). */
#ifndef DOME_POLICY_VALIDATE_TYPES_H
#define DOME_POLICY_VALIDATE_TYPES_H

#include "policy/validate/validate_internal.h"

extern const vtype VT_TRUE_TYPE, VT_FALSE_TYPE, VT_BOOL_TYPE, VT_LONG_TYPE, VT_STRING_TYPE, VT_ANY_SET_TYPE,
    VT_ANY_ENTITY_TYPE, VT_ANY_RECORD_TYPE, VT_EMPTY_RECORD_TYPE;

const vtype *vt_new(schema_arena *arena, vt_kind kind, const char *name, const vtype *element);
/* The validator type of a schema type (records closed unless additionalAttributes). NULL on ENOMEM. */
const vtype *vt_from_schema(schema_arena *arena, const cedar_schema_type *type, int depth);
const vattr *vt_record_attribute(const vtype *record, const char *name);
/* a <: b. permissive: width subtyping for open records and entity <: any entity (as upstream's
 * expect_type); otherwise strict. */
bool vt_is_subtype(const vtype *a, const vtype *b, bool permissive);
/* Strict least upper bound, NULL when none. */
const vtype *vt_lub(schema_arena *arena, const vtype *a, const vtype *b);

#endif
