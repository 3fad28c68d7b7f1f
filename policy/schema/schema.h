/* Cedar schemas: the model and its two source formats.
 *
 * Implements the Cedar schema of the Cedar language reference ("Schema", "Schema format" — the
 * human-readable .cedarschema syntax — and "JSON schema format"), as cedar-policy 4.x parses and
 * resolves it:
 *   - namespaces (possibly nested names `A::B`, several blocks of one namespace merge), the empty
 *     namespace for declarations outside any `namespace` block;
 *   - common types (`type T = ...;`), entity types with attribute records (optional attributes `a?`,
 *     nested records), `tags`, `in [..]` (memberOfTypes), enum entity types (`entity E enum ["a"]`);
 *   - actions (`action "a", b in [group] appliesTo { principal: [..], resource: [..], context: .. }`),
 *     action groups by memberOf, actions without appliesTo (they apply to no request);
 *   - primitive types Bool/Boolean, Long, String, Set<T>, records, extension types
 *     ipaddr/decimal/datetime/duration, `__cedar::` qualified built-ins;
 *   - name resolution as upstream: an unqualified type name `T` used inside namespace `N` is the common
 *     type N::T, else the entity type N::T, else the common type T of the empty namespace, else the
 *     entity type T of the empty namespace, else the built-in `__cedar::T`; a qualified name `A::T` is
 *     the common type A::T, else the entity type A::T. An action reference without a type means
 *     `N::Action` of the enclosing namespace.
 *
 * The model is immutable after parsing: lookups are thread-safe. Every string and type a lookup returns
 * lives as long as the schema (one arena, released by cedar_schema_free).
 *
 * Names are always fully qualified in the model: entity type "Dome::Agent", action type
 * "Dome::Action" with id "mcp:call". Entity types of the empty namespace have no prefix ("User"). */
#ifndef DOME_POLICY_SCHEMA_SCHEMA_H
#define DOME_POLICY_SCHEMA_SCHEMA_H

#include <stdbool.h>
#include <stddef.h>

/* Where a schema error is and what it says. line/column are 1-based (column in bytes); 0 when the error
 * has no single place (e.g. a cycle among common types, reported at the first definition's place when
 * known). file is the name given to the parser ("" when none), truncated to fit. */
typedef struct cedar_schema_error {
  char file[256];
  unsigned line;
  unsigned column;
  char message[512];
} cedar_schema_error;

/* Format err as "file:line:col: message" (file/line parts omitted when unknown) into buf (size bytes,
 * always NUL-terminated when size > 0). Returns buf. */
const char *cedar_schema_error_format(const cedar_schema_error *err, char *buf, size_t size);

typedef enum cedar_schema_type_kind {
  CEDAR_SCHEMA_BOOL,
  CEDAR_SCHEMA_LONG,
  CEDAR_SCHEMA_STRING,
  CEDAR_SCHEMA_SET,       /* element */
  CEDAR_SCHEMA_RECORD,    /* attributes, additional_attributes */
  CEDAR_SCHEMA_ENTITY,    /* name = fully-qualified entity type (or action type "N::Action") */
  CEDAR_SCHEMA_EXTENSION, /* name = "ipaddr", "decimal", "datetime" or "duration" */
} cedar_schema_type_kind;

typedef struct cedar_schema_type cedar_schema_type;

/* One attribute of a record type. */
typedef struct cedar_schema_attribute {
  const char *name;
  const cedar_schema_type *type;
  bool required; /* false for `name?: T` / JSON "required": false */
} cedar_schema_attribute;

/* A resolved type (common types are already substituted: no type refers to a common type). */
struct cedar_schema_type {
  cedar_schema_type_kind kind;
  const char *name;                         /* ENTITY / EXTENSION */
  const cedar_schema_type *element;         /* SET */
  const cedar_schema_attribute *attributes; /* RECORD: sorted by name (strcmp), unique */
  size_t attribute_count;
  bool additional_attributes; /* RECORD: JSON "additionalAttributes": true (open record) */
};

/* An entity type declaration. */
typedef struct cedar_schema_entity_type {
  const char *name;               /* fully qualified, e.g. "Dome::Agent" */
  const cedar_schema_type *shape; /* RECORD (empty record when the declaration has none) */
  const cedar_schema_type *tags;  /* type of every tag value, NULL when the type has no tags */
  const char *const *member_of;   /* memberOfTypes, fully qualified, as declared (not transitive) */
  size_t member_of_count;
  bool is_enum; /* `enum [..]`: the only valid ids are enum_ids */
  const char *const *enum_ids;
  size_t enum_id_count;
  unsigned line, column; /* where declared (0 when parsed from JSON without positions) */
} cedar_schema_entity_type;

/* An action (an entity of type "<namespace>::Action", or "Action" in the empty namespace). */
typedef struct cedar_schema_action_ref {
  const char *type; /* "Dome::Action" */
  const char *id;   /* "mcp:call" */
} cedar_schema_action_ref;

typedef struct cedar_schema_action {
  cedar_schema_action_ref uid;
  const cedar_schema_action_ref *member_of; /* action groups it is declared in (not transitive) */
  size_t member_of_count;
  bool has_applies_to;                /* false: the action applies to no request */
  const char *const *principal_types; /* fully-qualified entity types; count 0 with has_applies_to
                                       * means none (the action is unusable in requests) */
  size_t principal_type_count;
  const char *const *resource_types;
  size_t resource_type_count;
  const cedar_schema_type *context; /* RECORD; the empty record when not declared */
  unsigned line, column;
} cedar_schema_action;

typedef struct cedar_schema cedar_schema;

/* Parse the human-readable schema syntax (.cedarschema) of text[0..length) (need not be
 * NUL-terminated; UTF-8). file names the source in errors (may be NULL).
 * On success stores a new schema in *out and returns 0. On failure returns -EINVAL (syntax error,
 * unknown or duplicate type/action/attribute, cyclic common types or action groups, nesting deeper than
 * CEDAR_SCHEMA_MAX_DEPTH), -E2BIG (input over CEDAR_SCHEMA_MAX_BYTES) or -ENOMEM, fills *err
 * (may be NULL) and leaves *out untouched. */
int cedar_schema_parse(const char *text, size_t length, const char *file, cedar_schema **out,
                       cedar_schema_error *err);

/* As cedar_schema_parse, for the JSON schema format (an object of namespaces, each with "entityTypes",
 * "actions" and optionally "commonTypes"). Errors carry the JSON line:column when known. */
int cedar_schema_parse_json(const char *text, size_t length, const char *file, cedar_schema **out,
                            cedar_schema_error *err);

/* Read and parse a schema file: JSON when the name ends in ".json" or the first non-blank byte is '{'
 * and the file does not parse as .cedarschema, else .cedarschema. Errors as above plus -errno of
 * open/read (message names the path). */
int cedar_schema_load_file(const char *path, cedar_schema **out, cedar_schema_error *err);

/* The shipped Dome schema (policy/schema/dome.cedarschema, embedded in the library at build time; errors
 * name CEDAR_SCHEMA_DOME_PATH). Returns as cedar_schema_parse. */
#define CEDAR_SCHEMA_DOME_PATH "policy/schema/dome.cedarschema"
int cedar_schema_load_dome(cedar_schema **out, cedar_schema_error *err);
/* Its text (NUL-terminated, static). */
const char *cedar_schema_dome_text(void);

/* Release a schema (NULL is fine). */
void cedar_schema_free(cedar_schema *schema);

/* Names (attributes, entity ids, action ids) may contain NUL bytes in Cedar. The model stores every name
 * as a C string in which each NUL byte is encoded as the two bytes 0xC0 0x80 (as "modified UTF-8");
 * other bytes are unchanged. Encode a length-delimited name the same way before a lookup: writes the
 * encoded name into buf (size bytes, NUL-terminated when size > 0) and returns the encoded length
 * (as snprintf; at most 2 * length). */
size_t cedar_schema_encode_name(const char *text, size_t length, char *buf, size_t size);

#define CEDAR_SCHEMA_MAX_BYTES (16u << 20) /* bytes of schema text accepted */
#define CEDAR_SCHEMA_MAX_DEPTH 64          /* nesting of types (Set<..>, records) */

/* ---- lookups (all O(log n) or better; NULL when absent) ---- */

/* Entity types, in declaration order. */
size_t cedar_schema_entity_type_count(const cedar_schema *schema);
const cedar_schema_entity_type *cedar_schema_entity_type_at(const cedar_schema *schema, size_t index);
/* The entity type named (fully qualified) `name`, or NULL. Action types are not entity types here. */
const cedar_schema_entity_type *cedar_schema_entity_type_find(const cedar_schema *schema, const char *name);

/* Actions, in declaration order. */
size_t cedar_schema_action_count(const cedar_schema *schema);
const cedar_schema_action *cedar_schema_action_at(const cedar_schema *schema, size_t index);
/* The action type ("Dome::Action") and id ("mcp:call"), or NULL. */
const cedar_schema_action *cedar_schema_action_find(const cedar_schema *schema, const char *type,
                                                    const char *id);
/* True when `type` is the type of some declared action ("Action", "Dome::Action"). */
bool cedar_schema_is_action_type(const cedar_schema *schema, const char *type);

/* Type of attribute `attribute` of entity type `entity_type`; *required (may be NULL) tells whether it
 * is required. NULL when the type or the attribute is unknown. */
const cedar_schema_type *cedar_schema_entity_attribute(const cedar_schema *schema, const char *entity_type,
                                                       const char *attribute, bool *required);

/* Context record type of an action; NULL when the action is unknown. */
const cedar_schema_type *cedar_schema_action_context(const cedar_schema *schema, const char *action_type,
                                                     const char *action_id);

/* Attribute `name` of a RECORD type, or NULL. */
const cedar_schema_attribute *cedar_schema_record_attribute(const cedar_schema_type *record,
                                                            const char *name);

/* True when an entity of type `descendant` may be (transitively) a member of an entity of type
 * `ancestor` per memberOfTypes (reflexive: a type is always "in" itself). */
bool cedar_schema_entity_type_may_be_in(const cedar_schema *schema, const char *descendant,
                                        const char *ancestor);

/* True when action `descendant` is transitively a member of action group `ancestor` (reflexive). */
bool cedar_schema_action_is_in(const cedar_schema *schema, const cedar_schema_action_ref *descendant,
                               const cedar_schema_action_ref *ancestor);

/* True for the extension type names the schema accepts ("ipaddr", "decimal", "datetime", "duration"). */
bool cedar_schema_is_extension_type(const char *name);

/* Write `type` in .cedarschema syntax ("Set<Dome::Agent>", "{ a: Long, b?: String }") into buf;
 * returns the length it needed (as snprintf). */
size_t cedar_schema_type_format(const cedar_schema_type *type, char *buf, size_t size);

#endif
