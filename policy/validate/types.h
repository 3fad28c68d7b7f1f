/* Validator type operations (internal; see validate_internal.h). */
#ifndef DOME_POLICY_VALIDATE_TYPES_H
#define DOME_POLICY_VALIDATE_TYPES_H

#include "policy/validate/validate_internal.h"

extern const vtype cedar_validate_vt_true_type, cedar_validate_vt_false_type, cedar_validate_vt_bool_type,
    cedar_validate_vt_long_type, cedar_validate_vt_string_type, cedar_validate_vt_any_set_type,
    cedar_validate_vt_any_entity_type, cedar_validate_vt_any_record_type, cedar_validate_vt_empty_record_type;

const vtype *cedar_validate_vt_new(schema_arena *arena, vt_kind kind, const char *name, const vtype *element);
/* The validator type of a schema type (records closed unless additionalAttributes). NULL on ENOMEM. */
const vtype *cedar_validate_vt_from_schema(schema_arena *arena, const cedar_schema_type *type, int depth);
const vattr *cedar_validate_vt_record_attribute(const vtype *record, const char *name);
/* a <: b. permissive: width subtyping for open records and entity <: any entity (as upstream's
 * expect_type); otherwise strict. */
bool cedar_validate_vt_is_subtype(const vtype *a, const vtype *b, bool permissive);
/* Strict least upper bound, NULL when none. */
const vtype *cedar_validate_vt_lub(schema_arena *arena, const vtype *a, const vtype *b);

#endif
