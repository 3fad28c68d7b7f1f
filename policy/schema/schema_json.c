/* Parser of the Cedar JSON schema format into raw declarations (Cedar language reference, "JSON schema
 * format"): { "<namespace>": { "entityTypes": {..}, "actions": {..}, "commonTypes": {..} }, ... }.
 * Errors name the JSON path of the offending value ("Dome.entityTypes.Agent.shape: ..."). */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "policy/schema/schema_internal.h"

typedef struct json_parser {
  schema_arena *arena;
  const char *file;
  cedar_schema_error *err;
  raw_schema *raw;
  const char *name_space;
  int depth;
} json_parser;

static int json_fail(json_parser *p, const char *path, const char *format, ...)
    __attribute__((format(printf, 3, 4)));

static int json_fail(json_parser *p, const char *path, const char *format, ...) {
  char message[400];
  va_list ap;
  va_start(ap, format);
  vsnprintf(message, sizeof message, format, ap);
  va_end(ap);
  return cedar_schema_set_error(p->err, p->file, 0, 0, "%s: %s", path, message);
}

static char *dup_string(json_parser *p, json_t *value) {
  size_t length = json_string_length(value);
  char *out = cedar_schema_arena_alloc(p->arena, 2 * length + 1);
  if (out) cedar_schema_encode_name(json_string_value(value), length, out, 2 * length + 1);
  return out;
}

static char *dup_key(json_parser *p, const char *key, size_t length) {
  char *out = cedar_schema_arena_alloc(p->arena, 2 * length + 1);
  if (out) cedar_schema_encode_name(key, length, out, 2 * length + 1);
  return out;
}

static char *sub_path(json_parser *p, const char *path, const char *key) {
  return cedar_schema_arena_printf(p->arena, "%s.%s", path, key);
}

static int check_keys(json_parser *p, json_t *object, const char *path, const char *const *allowed) {
  const char *key;
  json_t *value;
  json_object_foreach(object, key, value) {
    bool ok = false;
    for (const char *const *a = allowed; *a; a++)
      if (strcmp(*a, key) == 0) ok = true;
    if (!ok) return json_fail(p, path, "unknown field `%s`", key);
  }
  return 0;
}

static raw_type *parse_json_type(json_parser *p, json_t *json, const char *path, int *status);

static raw_type *parse_json_record(json_parser *p, json_t *json, const char *path, raw_type *record,
                                   int *status) {
  json_t *attributes = json_object_get(json, "attributes");
  json_t *additional = json_object_get(json, "additionalAttributes");
  if (additional) {
    if (!json_is_boolean(additional)) {
      *status = json_fail(p, path, "`additionalAttributes` must be a boolean");
      return NULL;
    }
    record->additional_attributes = json_is_true(additional);
  }
  if (!attributes) return record;
  if (!json_is_object(attributes)) {
    *status = json_fail(p, path, "`attributes` must be an object");
    return NULL;
  }
  const char *key;
  json_t *value;
  size_t key_length;
  json_object_keylen_foreach(attributes, key, key_length, value) {
    char *attribute_path = sub_path(p, path, key);
    if (!json_is_object(value)) {
      *status = json_fail(p, attribute_path, "an attribute must be an object with a `type`");
      return NULL;
    }
    raw_type *type = parse_json_type(p, value, attribute_path, status);
    if (!type) return NULL;
    json_t *required = json_object_get(value, "required");
    if (required && !json_is_boolean(required)) {
      *status = json_fail(p, attribute_path, "`required` must be a boolean");
      return NULL;
    }
    raw_attribute *a =
        cedar_schema_arena_push(p->arena, (void **)&record->attributes, &record->attribute_count,
                                &record->attribute_capacity, sizeof *a);
    if (!a) {
      *status = -ENOMEM;
      return NULL;
    }
    a->name = dup_key(p, key, key_length);
    a->type = type;
    a->required = !required || json_is_true(required);
  }
  return record;
}

static raw_type *parse_json_type(json_parser *p, json_t *json, const char *path, int *status) {
  static const char *const record_keys[] = {"type",     "attributes",  "additionalAttributes",
                                            "required", "annotations", NULL};
  static const char *const set_keys[] = {"type", "element", "required", "annotations", NULL};
  static const char *const named_keys[] = {"type", "name", "required", "annotations", NULL};
  static const char *const plain_keys[] = {"type", "required", "annotations", NULL};
  if (!json_is_object(json)) {
    *status = json_fail(p, path, "a type must be an object with a `type` field");
    return NULL;
  }
  if (++p->depth > CEDAR_SCHEMA_MAX_DEPTH) {
    *status = json_fail(p, path, "types nested deeper than %d levels", CEDAR_SCHEMA_MAX_DEPTH);
    return NULL;
  }
  raw_type *t = cedar_schema_arena_alloc(p->arena, sizeof *t);
  json_t *type = json_object_get(json, "type");
  raw_type *result = NULL;
  if (!t) {
    *status = -ENOMEM;
  } else if (!json_is_string(type)) {
    *status = json_fail(p, path, "missing or non-string `type` field");
  } else {
    const char *kind = json_string_value(type);
    const char *const *keys = plain_keys;
    if (strcmp(kind, "Long") == 0) {
      t->kind = RAW_LONG;
    } else if (strcmp(kind, "String") == 0) {
      t->kind = RAW_STRING;
    } else if (strcmp(kind, "Boolean") == 0) {
      t->kind = RAW_BOOL;
    } else if (strcmp(kind, "Set") == 0) {
      keys = set_keys;
      t->kind = RAW_SET;
      json_t *element = json_object_get(json, "element");
      if (!element) {
        *status = json_fail(p, path, "a Set type needs an `element` type");
      } else {
        t->element = parse_json_type(p, element, sub_path(p, path, "element"), status);
      }
    } else if (strcmp(kind, "Record") == 0) {
      keys = record_keys;
      t->kind = RAW_RECORD;
      parse_json_record(p, json, path, t, status);
    } else if (strcmp(kind, "Entity") == 0 || strcmp(kind, "Extension") == 0 ||
               strcmp(kind, "EntityOrCommon") == 0) {
      keys = named_keys;
      t->kind = strcmp(kind, "Entity") == 0      ? RAW_ENTITY
                : strcmp(kind, "Extension") == 0 ? RAW_EXTENSION
                                                 : RAW_NAME;
      json_t *name = json_object_get(json, "name");
      if (!json_is_string(name))
        *status = json_fail(p, path, "a %s type needs a string `name`", kind);
      else
        t->name = dup_string(p, name);
    } else {
      t->kind = RAW_COMMON;
      t->name = dup_string(p, type);
    }
    if (!*status) *status = check_keys(p, json, path, keys);
    if (!*status) result = t;
  }
  p->depth--;
  return result;
}

static int parse_string_list(json_parser *p, json_t *json, const char *path, const char ***list,
                             size_t *count, size_t *capacity) {
  if (!json_is_array(json)) return json_fail(p, path, "expected an array of type names");
  size_t i;
  json_t *item;
  json_array_foreach(json, i, item) {
    if (!json_is_string(item)) return json_fail(p, path, "element %zu is not a string", i);
    const char **slot = cedar_schema_arena_push(p->arena, (void **)list, count, capacity, sizeof *slot);
    if (!slot) return -ENOMEM;
    *slot = dup_string(p, item);
  }
  return 0;
}

static int parse_json_entity(json_parser *p, const char *name, json_t *json, const char *path) {
  static const char *const keys[] = {"memberOfTypes", "shape", "tags", "enum", "annotations", NULL};
  if (!json_is_object(json)) return json_fail(p, path, "an entity type must be an object");
  int status = check_keys(p, json, path, keys);
  if (status) return status;
  raw_entity *e = cedar_schema_arena_push(p->arena, (void **)&p->raw->entities, &p->raw->entity_count,
                                          &p->raw->entity_capacity, sizeof *e);
  if (!e) return -ENOMEM;
  e->name_space = p->name_space;
  e->name = dup_key(p, name, strlen(name));
  json_t *member_of = json_object_get(json, "memberOfTypes");
  if (member_of && (status = parse_string_list(p, member_of, sub_path(p, path, "memberOfTypes"),
                                               &e->member_of, &e->member_of_count, &e->member_of_capacity)))
    return status;
  json_t *shape = json_object_get(json, "shape");
  if (shape) {
    e->shape = parse_json_type(p, shape, sub_path(p, path, "shape"), &status);
    if (!e->shape) return status;
  }
  json_t *tags = json_object_get(json, "tags");
  if (tags) {
    e->tags = parse_json_type(p, tags, sub_path(p, path, "tags"), &status);
    if (!e->tags) return status;
  }
  json_t *enumeration = json_object_get(json, "enum");
  if (enumeration) {
    e->is_enum = true;
    if ((status = parse_string_list(p, enumeration, sub_path(p, path, "enum"), &e->enum_ids,
                                    &e->enum_id_count, &e->enum_id_capacity)))
      return status;
    if (e->enum_id_count == 0) return json_fail(p, path, "`enum` needs at least one id");
  }
  return 0;
}

static int parse_json_action(json_parser *p, const char *id, json_t *json, const char *path) {
  static const char *const keys[] = {"memberOf", "appliesTo", "attributes", "annotations", NULL};
  static const char *const applies_keys[] = {"principalTypes", "resourceTypes", "context", NULL};
  if (!json_is_object(json)) return json_fail(p, path, "an action must be an object");
  int status = check_keys(p, json, path, keys);
  if (status) return status;
  raw_action *a = cedar_schema_arena_push(p->arena, (void **)&p->raw->actions, &p->raw->action_count,
                                          &p->raw->action_capacity, sizeof *a);
  if (!a) return -ENOMEM;
  a->name_space = p->name_space;
  a->id = dup_key(p, id, strlen(id));
  json_t *member_of = json_object_get(json, "memberOf");
  if (member_of && !json_is_null(member_of)) {
    if (!json_is_array(member_of)) return json_fail(p, path, "`memberOf` must be an array");
    size_t i;
    json_t *item;
    json_array_foreach(member_of, i, item) {
      json_t *item_id = json_object_get(item, "id"), *item_type = json_object_get(item, "type");
      if (!json_is_string(item_id) || (item_type && !json_is_string(item_type)))
        return json_fail(p, path, "`memberOf` element %zu needs a string `id` (and optional string `type`)",
                         i);
      raw_action_ref *ref = cedar_schema_arena_push(p->arena, (void **)&a->member_of, &a->member_of_count,
                                                    &a->member_of_capacity, sizeof *ref);
      if (!ref) return -ENOMEM;
      ref->id = dup_string(p, item_id);
      ref->type = item_type ? dup_string(p, item_type) : NULL;
    }
  }
  json_t *applies = json_object_get(json, "appliesTo");
  if (applies && !json_is_null(applies)) {
    char *applies_path = sub_path(p, path, "appliesTo");
    if (!json_is_object(applies)) return json_fail(p, applies_path, "must be an object");
    if ((status = check_keys(p, applies, applies_path, applies_keys))) return status;
    a->has_applies_to = true;
    json_t *principals = json_object_get(applies, "principalTypes");
    json_t *resources = json_object_get(applies, "resourceTypes");
    if (!principals || !resources)
      return json_fail(p, applies_path, "missing field `%s`",
                       principals ? "resourceTypes" : "principalTypes");
    if (principals &&
        (status = parse_string_list(p, principals, sub_path(p, applies_path, "principalTypes"),
                                    &a->principals, &a->principal_count, &a->principal_capacity)))
      return status;
    if (resources && (status = parse_string_list(p, resources, sub_path(p, applies_path, "resourceTypes"),
                                                 &a->resources, &a->resource_count, &a->resource_capacity)))
      return status;
    json_t *context = json_object_get(applies, "context");
    if (context) {
      a->context = parse_json_type(p, context, sub_path(p, applies_path, "context"), &status);
      if (!a->context) return status;
    }
  }
  return 0;
}

static int parse_json_namespace(json_parser *p, const char *name, json_t *json) {
  static const char *const keys[] = {"entityTypes", "actions", "commonTypes", "annotations", NULL};
  const char *path = name[0] ? name : "(empty namespace)";
  if (!json_is_object(json)) return json_fail(p, path, "a namespace must be an object");
  int status = check_keys(p, json, path, keys);
  if (status) return status;
  if (strcmp(name, "__cedar") == 0) return json_fail(p, path, "the namespace `__cedar` is reserved");
  p->name_space = cedar_schema_arena_strndup(p->arena, name, strlen(name));
  json_t *entity_types = json_object_get(json, "entityTypes");
  json_t *actions = json_object_get(json, "actions");
  json_t *commons = json_object_get(json, "commonTypes");
  if (!json_is_object(entity_types)) return json_fail(p, path, "missing object `entityTypes`");
  if (!json_is_object(actions)) return json_fail(p, path, "missing object `actions`");
  const char *key;
  json_t *value;
  json_object_foreach(entity_types, key, value) {
    if ((status = parse_json_entity(p, key, value, sub_path(p, path, key)))) return status;
  }
  json_object_foreach(actions, key, value) {
    if ((status = parse_json_action(p, key, value, sub_path(p, path, key)))) return status;
  }
  if (commons) {
    if (!json_is_object(commons)) return json_fail(p, path, "`commonTypes` must be an object");
    json_object_foreach(commons, key, value) {
      raw_common *c = cedar_schema_arena_push(p->arena, (void **)&p->raw->commons, &p->raw->common_count,
                                              &p->raw->common_capacity, sizeof *c);
      if (!c) return -ENOMEM;
      c->name_space = p->name_space;
      c->name = cedar_schema_arena_strndup(p->arena, key, strlen(key));
      c->type = parse_json_type(p, value, sub_path(p, path, key), &status);
      if (!c->type) return status;
    }
  }
  return 0;
}

int cedar_schema_parse_json_raw(schema_arena *arena, const char *text, size_t length, const char *file,
                                raw_schema *raw, cedar_schema_error *err) {
  json_error_t error;
  json_t *root = json_loadb(text, length, JSON_REJECT_DUPLICATES, &error);
  if (!root)
    return cedar_schema_set_error(err, file, (unsigned)error.line, (unsigned)error.column, "%s", error.text);
  json_parser p = {.arena = arena, .file = file, .err = err, .raw = raw};
  int status = 0;
  if (!json_is_object(root)) {
    status = cedar_schema_set_error(err, file, 1, 1, "a JSON schema must be an object of namespaces");
  } else {
    const char *key;
    json_t *value;
    json_object_foreach(root, key, value) {
      if ((status = parse_json_namespace(&p, key, value))) break;
    }
  }
  json_decref(root);
  if (arena->failed) return -ENOMEM;
  return status;
}
