/* Internals shared by the schema parsers and the resolver: an arena, the unresolved ("raw")
 * declarations both source formats produce, and the resolved model. Not part of the public API. */
#ifndef DOME_POLICY_SCHEMA_SCHEMA_INTERNAL_H
#define DOME_POLICY_SCHEMA_SCHEMA_INTERNAL_H

#include <stdarg.h>
#include <stdint.h>

#include "policy/schema/schema.h"

/* ---- arena: every allocation of a schema lives until cedar_schema_free ---- */
typedef struct schema_arena_chunk schema_arena_chunk;
typedef struct schema_arena {
  schema_arena_chunk *chunks;
  bool failed; /* an allocation failed: the parse reports -ENOMEM */
} schema_arena;

void *cedar_schema_arena_alloc(schema_arena *arena, size_t size); /* zeroed; NULL on ENOMEM */
char *cedar_schema_arena_strndup(schema_arena *arena, const char *text, size_t length);
char *cedar_schema_arena_printf(schema_arena *arena, const char *format, ...)
    __attribute__((format(printf, 2, 3)));
/* Append one element of `size` bytes to the array *items holding *count elements (capacity
 * doubling inside the arena). Returns the new element (zeroed) or NULL. */
void *cedar_schema_arena_push(schema_arena *arena, void **items, size_t *count, size_t *capacity,
                              size_t size);
void cedar_schema_arena_release(schema_arena *arena);

/* ---- raw declarations (names as written, relative to their namespace) ---- */
typedef enum raw_type_kind {
  RAW_NAME,      /* a name to resolve: common type, entity type or built-in (human syntax,
                  * JSON "EntityOrCommon") */
  RAW_COMMON,    /* JSON {"type": "X"} with X not a built-in keyword: a common type only */
  RAW_ENTITY,    /* JSON {"type": "Entity", "name": X} */
  RAW_EXTENSION, /* JSON {"type": "Extension", "name": X} */
  RAW_BOOL,
  RAW_LONG,
  RAW_STRING,
  RAW_SET,
  RAW_RECORD,
} raw_type_kind;

typedef struct raw_type raw_type;
typedef struct raw_attribute {
  const char *name;
  raw_type *type;
  bool required;
  unsigned line, column;
} raw_attribute;

struct raw_type {
  raw_type_kind kind;
  const char *name;
  raw_type *element;
  raw_attribute *attributes;
  size_t attribute_count, attribute_capacity;
  bool additional_attributes;
  unsigned line, column;
};

typedef struct raw_entity {
  const char *name_space; /* "" for the empty namespace */
  const char *name;       /* basename */
  raw_type *shape;        /* NULL: empty record */
  raw_type *tags;
  const char **member_of;
  size_t member_of_count, member_of_capacity;
  bool is_enum;
  const char **enum_ids;
  size_t enum_id_count, enum_id_capacity;
  unsigned line, column;
} raw_entity;

typedef struct raw_action_ref {
  const char *type; /* NULL: the enclosing namespace's Action type */
  const char *id;
} raw_action_ref;

typedef struct raw_action {
  const char *name_space;
  const char *id;
  raw_action_ref *member_of;
  size_t member_of_count, member_of_capacity;
  bool has_applies_to;
  const char **principals;
  size_t principal_count, principal_capacity;
  const char **resources;
  size_t resource_count, resource_capacity;
  raw_type *context; /* NULL: empty record */
  unsigned line, column;
} raw_action;

typedef struct raw_common {
  const char *name_space;
  const char *name;
  raw_type *type;
  unsigned line, column;
  /* resolution state */
  int state; /* 0 unresolved, 1 resolving (cycle check), 2 done */
  const cedar_schema_type *resolved;
} raw_common;

typedef struct raw_schema {
  raw_entity *entities;
  size_t entity_count, entity_capacity;
  raw_action *actions;
  size_t action_count, action_capacity;
  raw_common *commons;
  size_t common_count, common_capacity;
} raw_schema;

/* ---- the resolved model ---- */
struct cedar_schema {
  schema_arena arena;
  cedar_schema_entity_type *entity_types;
  size_t entity_type_count;
  size_t *entity_index; /* indices into entity_types sorted by name */
  cedar_schema_action *actions;
  size_t action_count;
  size_t *action_index;      /* sorted by (type, id) */
  const char **action_types; /* distinct action type names, sorted */
  size_t action_type_count;
  uint64_t *entity_ancestors; /* entity_type_count x words bitset: [i] may be in [j] (transitive) */
  uint64_t *action_ancestors; /* action_count x words bitset */
  size_t entity_words, action_words;
};

/* Fill err (may be NULL) with file/line/column/message; returns -EINVAL. */
int cedar_schema_set_error(cedar_schema_error *err, const char *file, unsigned line, unsigned column,
                           const char *format, ...) __attribute__((format(printf, 5, 6)));

/* Resolve raw declarations into *schema (whose arena holds raw). Returns 0 or -EINVAL/-ENOMEM. */
int cedar_schema_resolve(cedar_schema *schema, raw_schema *raw, const char *file, cedar_schema_error *err);

/* Parse the human syntax into raw (allocations in arena). */
int cedar_schema_parse_human(schema_arena *arena, const char *text, size_t length, const char *file,
                             raw_schema *raw, cedar_schema_error *err);
/* Parse the JSON format into raw. */
int cedar_schema_parse_json_raw(schema_arena *arena, const char *text, size_t length, const char *file,
                                raw_schema *raw, cedar_schema_error *err);

#endif
