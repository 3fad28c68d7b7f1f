/* Engine-internal: JSON -> Cedar values (with or without a schema type) for entities and context
 * (Cedar "Entities & context JSON format"). The public API is in policy/cedar.h. */
#ifndef DOME_POLICY_ENTITIES_ENTITIES_H
#define DOME_POLICY_ENTITIES_ENTITIES_H

#include <jansson.h>

#include "policy/eval/eval.h"
#include "policy/schema/schema.h"

/* Conversion state: errors are written to diag with `file` and a path of the value ("attribute `a`"). */
typedef struct cedar_json_reader {
  cedar_arena *arena;
  const char *file;
  cedar_diagnostic *diag;
  char where[200];                /* what is being read: "entity #3", "context" */
  const cedar_euid *where_entity; /* when set, `where` is this entity (formatted only for an error) */
  size_t where_index;             /* when where_entity is NULL and where is empty: "entity #where_index" */
  cedar_str last_type;            /* the last entity type name found valid (types repeat) */
  bool lenient; /* context: primitive and entity-type mismatches are left to request validation */
} cedar_json_reader;

/* The place being read, for an error message ("entity `User::\"a\"`", "context"). */
const char *cedar_json_where(cedar_json_reader *reader);

/* Convert json to a value. type: the schema type expected (NULL: schema-less rules, where entity refs
 * and extension values must use the __entity / __extn escapes). depth: current nesting.
 * Returns 0, -EINVAL (diag set), -E2BIG (nesting over CEDAR_MAX_DEPTH), -ENOMEM. */
int cedar_json_to_value(cedar_json_reader *reader, json_t *json, const cedar_schema_type *type,
                        unsigned depth, cedar_value *out);
/* Read an entity uid: {"type": T, "id": I} or {"__entity": {...}}. */
int cedar_json_to_euid(cedar_json_reader *reader, json_t *json, const char *what, cedar_euid *out);

#endif
