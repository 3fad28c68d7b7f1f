/* Engine-internal: JSON -> Cedar values (with or without a schema type) for entities and context
 * (Cedar "Entities & context JSON format"). The public API is in policy/cedar.h. */
#ifndef DOME_POLICY_ENTITIES_ENTITIES_H
#define DOME_POLICY_ENTITIES_ENTITIES_H

#include <jansson.h>

#include "policy/schema/schema.h"
#include "policy/syntax/value.h"

/* ---------------- entity store (read by the evaluator) ---------------- */

typedef struct cedar_entity {
  cedar_euid uid;
  cedar_value attrs;         /* RECORD */
  cedar_value tags;          /* RECORD (count 0 when none) */
  const cedar_euid *parents; /* direct parents as given */
  size_t parent_count;
  const cedar_euid *ancestors; /* transitive closure, sorted by cedar_euid_cmp */
  size_t ancestor_count;
} cedar_entity;

const cedar_entity *cedar_entities_find(const cedar_entities *entities, const cedar_euid *uid);
bool cedar_entity_has_ancestor(const cedar_entity *entity, const cedar_euid *ancestor);

/* The record value of a context (the empty record for NULL). */
const cedar_value *cedar_context_value(const cedar_context *context);

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
