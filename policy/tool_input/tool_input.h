/* Typed tool arguments for Cedar: the Cedar type of an MCP tool's input derived from its `inputSchema`
 * (JSON Schema, draft 2020-12 as MCP "Tools" uses it), the typed view of one call's `arguments` that
 * rules read as `context.input.<tool>`, and the check of the arguments against the inputSchema.
 *
 * Mapping (docs/policy.md "Typed tool arguments"):
 *   {"type":"string"} (with or without enum/const)      String
 *   {"type":"string","format":"ipv4"|"ipv6"}              ipaddr
 *   {"type":"string","format":"date-time"}                datetime
 *   {"type":"integer"}                                    Long
 *   {"type":"boolean"}                                    Bool
 *   {"type":"array","items":S} with S representable       Set<type of S>
 *   {"type":"object","properties":{..},"required":[..]}   record: a required attribute for each
 *                                                         representable property named in `required`,
 *                                                         an optional one for the others
 *   {"type":"object","additionalProperties":S}, no        Set<String> of its keys (a map: the values are
 *     properties (a map)                                  not typed)
 * Left out of the typed view, each with a warning naming the schema path (they stay reachable through
 * context.arguments, the canonical JSON text): numbers (floating point), unions (a `type` list,
 * anyOf/oneOf/allOf), `null`, free-form objects and arrays (no properties nor typed values / no items),
 * tuples, and anything nested deeper than CEDAR_TOOL_INPUT_MAX_DEPTH.
 *
 * Types are returned in the Cedar JSON schema format ({"type":"Record","attributes":{..}}, "Set" with
 * "element", "Extension" with "name", "String", "Long", "Boolean"), each node also carrying the member
 * "x-dome" ("keys" for a map's key set, "ipv4"/"ipv6" for addresses) that cedar_tool_input_type_public
 * strips. All functions are thread-safe (no shared state). */
#ifndef DOME_POLICY_TOOL_INPUT_TOOL_INPUT_H
#define DOME_POLICY_TOOL_INPUT_TOOL_INPUT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#define CEDAR_TOOL_INPUT_MAX_DEPTH 32                /* nesting of objects/arrays typed */
#define CEDAR_TOOL_INPUT_MAX_ATTRIBUTES 1024         /* properties of one object typed */
#define CEDAR_TOOL_INPUT_MAX_TOOLS 4096              /* tools in one generated schema */
#define CEDAR_TOOL_INPUT_MAX_SCHEMA_BYTES (1u << 20) /* serialized inputSchema accepted */

/* Derive the Cedar type of the input of tool `tool` from `input_schema` (borrowed). Returns the record
 * type (new reference; the empty record when the schema has no representable property, is free-form, is
 * not an object schema or is NULL), or NULL on ENOMEM. Each part left out appends {"tool": tool,
 * "path": "/properties/x/...", "message": "..."} to `warnings` (an array; may be NULL). */
json_t *cedar_tool_input_type(const json_t *input_schema, const char *tool, json_t *warnings);

/* A copy of `type` without the private "x-dome" members: a type of the Cedar JSON schema format.
 * New reference, NULL on ENOMEM. */
json_t *cedar_tool_input_type_public(const json_t *type);

/* `type` in the human-readable schema syntax ("{ code: String, \"dry-run\"?: Bool }"), attribute names
 * quoted unless they are plain identifiers that are no keyword. indent: spaces before nested lines
 * (records are printed one attribute a line). malloc'd, NULL on ENOMEM. */
char *cedar_tool_input_type_text(const json_t *type, unsigned indent);

/* The typed view of `arguments` (a JSON object, borrowed; NULL is the empty object) under `type`: a value
 * in Cedar's context JSON format (addresses and datetimes as {"__extn": {"fn": "ip"|"datetime", "arg":
 * ..}}, sets as arrays, records as objects) holding exactly the representable part: a property the type
 * has is present when the arguments have it; others are absent. A datetime is given to Cedar in its own
 * form (RFC 3339's `+hh:mm` offset written `+hhmm`, lowercase `t`/`z` uppercased). Returns the view (new
 * reference), or NULL with `error` (size bytes) naming the argument path ("`/files`: expected an
 * object") when the arguments do not have the type (a missing required property, a wrong JSON type, an
 * address or datetime Cedar cannot parse, an integer out of range), or "out of memory". */
json_t *cedar_tool_input_view(const json_t *type, const json_t *arguments, char *error, size_t size);

/* Check `arguments` (borrowed; NULL is the empty object) against the JSON Schema `input_schema`:
 * type (one or a list; "integer" accepts a number with no fraction), enum, const, required,
 * properties, additionalProperties (false or a schema), items (one schema), minItems/maxItems,
 * uniqueItems, minLength/maxLength (in code points), minimum/maximum/exclusiveMinimum/
 * exclusiveMaximum (numbers), format ipv4/ipv6/date-time (RFC 3339 5.6), anyOf/oneOf/allOf/not;
 * other keywords are annotations here. Returns 0, or -EINVAL with `error` naming the first failing
 * argument path and the keyword ("`/timeout_s`: must be > 0 (exclusiveMinimum)"), -E2BIG when nested
 * deeper than 64. */
int cedar_tool_input_check(const json_t *input_schema, const json_t *arguments, char *error, size_t size);

/* The Dome schema (policy/schema/dome.cedarschema) with `context.input` typed: `tools` (borrowed) maps
 * each tool name as agents see it to its input type (from cedar_tool_input_type); the result declares
 * `type ToolInput = { "<tool>"?: <type>, ... }` in namespace Dome (NULL or {} leaves it the empty record
 * of the shipped text). Returns the schema text (malloc'd) or NULL on ENOMEM or when `tools` has more
 * than CEDAR_TOOL_INPUT_MAX_TOOLS entries. */
char *cedar_tool_input_dome_schema_text(const json_t *tools);

/* The generated fragment alone: in the human syntax (`namespace Dome { type ToolInput = {...}; }`,
 * malloc'd) and in the JSON schema format ({"Dome": {"commonTypes": {"ToolInput": ...}, "entityTypes":
 * {}, "actions": {}}}, new reference). NULL on ENOMEM. */
char *cedar_tool_input_fragment_text(const json_t *tools);
json_t *cedar_tool_input_fragment_json(const json_t *tools);

#endif
