/* Request and entity validation against a schema (see validate.h): value conformance to schema types as
 * upstream's request/entity conformance checks. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/eval/eval.h"
#include "policy/validate/validate.h"

#define MAX_CONFORMANCE_DEPTH 256

static int reason(char *message, size_t size, const char *format, ...) __attribute__((format(printf, 3, 4)));

static int reason(char *message, size_t size, const char *format, ...) {
  if (message && size) {
    va_list ap;
    va_start(ap, format);
    vsnprintf(message, size, format, ap);
    va_end(ap);
  }
  return -EINVAL;
}

/* Schema-encoded copy of a byte string (caller frees); NULL on ENOMEM. */
static char *encoded(const char *s, size_t length) {
  char *out = malloc(2 * length + 1);
  if (out) cedar_schema_encode_name(s ? s : "", length, out, 2 * length + 1);
  return out;
}

static bool str_equals_encoded(cedar_str s, const char *name) {
  char *e = encoded(s.ptr, s.len);
  bool same = e && strcmp(e, name) == 0;
  free(e);
  return same;
}

static const char *kind_name(const cedar_value *v) {
  return cedar_value_kind_name((cedar_value_kind)v->kind);
}

/* Does value conform to type? On failure writes a reason naming `where`. */
static int conforms(const cedar_value *v, const cedar_schema_type *t, const char *where, int depth,
                    char *message, size_t size) {
  if (depth > MAX_CONFORMANCE_DEPTH) return reason(message, size, "%s: value nested too deeply", where);
  if (v->kind == CV_UNKNOWN) return 0;
  static const char *const extension_kinds[] = {"ipaddr", "decimal", "datetime", "duration"};
  switch (t->kind) {
    case CEDAR_SCHEMA_BOOL:
      if (v->kind == CV_BOOL) return 0;
      break;
    case CEDAR_SCHEMA_LONG:
      if (v->kind == CV_LONG) return 0;
      break;
    case CEDAR_SCHEMA_STRING:
      if (v->kind == CV_STRING) return 0;
      break;
    case CEDAR_SCHEMA_EXTENSION: {
      int k = v->kind == CV_IPADDR     ? 0
              : v->kind == CV_DECIMAL  ? 1
              : v->kind == CV_DATETIME ? 2
              : v->kind == CV_DURATION ? 3
                                       : -1;
      if (k >= 0 && strcmp(extension_kinds[k], t->name) == 0) return 0;
      break;
    }
    case CEDAR_SCHEMA_ENTITY:
      if (v->kind == CV_ENTITY) {
        if (str_equals_encoded(v->u.uid.type, t->name)) return 0;
        return reason(message, size, "%s: expected an entity of type %s, found one of type %.*s", where,
                      t->name, (int)v->u.uid.type.len, v->u.uid.type.ptr);
      }
      break;
    case CEDAR_SCHEMA_SET:
      if (v->kind == CV_SET) {
        for (size_t i = 0; i < v->u.set.count; i++) {
          int r = conforms(&v->u.set.items[i], t->element, where, depth + 1, message, size);
          if (r) return r;
        }
        return 0;
      }
      break;
    case CEDAR_SCHEMA_RECORD:
      if (v->kind == CV_RECORD) {
        for (size_t i = 0; i < v->u.record.count; i++) {
          char *key = encoded(v->u.record.keys[i].ptr, v->u.record.keys[i].len);
          if (!key) return -ENOMEM;
          const cedar_schema_attribute *a = cedar_schema_record_attribute(t, key);
          int r = 0;
          if (!a && !t->additional_attributes)
            r = reason(message, size, "%s: attribute `%s` is not declared in the schema", where, key);
          else if (a) {
            char inner[300];
            snprintf(inner, sizeof inner, "%s, attribute `%s`", where, key);
            r = conforms(&v->u.record.values[i], a->type, inner, depth + 1, message, size);
          }
          free(key);
          if (r) return r;
        }
        for (size_t i = 0; i < t->attribute_count; i++) {
          if (!t->attributes[i].required) continue;
          bool present = false;
          for (size_t k = 0; k < v->u.record.count && !present; k++)
            present = str_equals_encoded(v->u.record.keys[k], t->attributes[i].name);
          if (!present)
            return reason(message, size, "%s: required attribute `%s` is missing", where,
                          t->attributes[i].name);
        }
        return 0;
      }
      break;
  }
  char expected[200];
  cedar_schema_type_format(t, expected, sizeof expected);
  return reason(message, size, "%s: expected %s, found a %s", where, expected, kind_name(v));
}

static int check_enum(const cedar_schema_entity_type *e, const char *id, const char *what, char *message,
                      size_t size) {
  if (!e->is_enum) return 0;
  for (size_t i = 0; i < e->enum_id_count; i++)
    if (strcmp(e->enum_ids[i], id) == 0) return 0;
  return reason(message, size, "%s `%s::\"%s\"` is not one of the ids declared for the enumerated type", what,
                e->name, id);
}

static int check_request_entity(const cedar_schema *schema, const cedar_schema_action *a,
                                const cedar_uid_ref *uid, bool principal, char *message, size_t size) {
  const char *what = principal ? "principal" : "resource";
  const char *const *types = principal ? a->principal_types : a->resource_types;
  size_t count = principal ? a->principal_type_count : a->resource_type_count;
  if (!uid->type) return reason(message, size, "the request has no %s", what);
  bool allowed = false;
  for (size_t i = 0; i < count && !allowed; i++) allowed = strcmp(types[i], uid->type) == 0;
  if (!allowed)
    return reason(message, size, "%s type `%s` is not one the action `%s::\"%s\"` applies to", what,
                  uid->type, a->uid.type, a->uid.id);
  const cedar_schema_entity_type *e = cedar_schema_entity_type_find(schema, uid->type);
  if (!e) return 0;
  size_t length = uid->id ? (uid->id_length ? uid->id_length : strlen(uid->id)) : 0;
  char *id = encoded(uid->id, length);
  if (!id) return -ENOMEM;
  int r = check_enum(e, id, what, message, size);
  free(id);
  return r;
}

int cedar_validate_request(const cedar_schema *schema, const cedar_request *request, char *message,
                           size_t size) {
  const cedar_uid_ref *action = &request->action;
  if (!action->type) return reason(message, size, "the request has no action");
  size_t length = action->id ? (action->id_length ? action->id_length : strlen(action->id)) : 0;
  char *id = encoded(action->id, length);
  if (!id) return -ENOMEM;
  const cedar_schema_action *a = cedar_schema_action_find(schema, action->type, id);
  int r = 0;
  if (!a)
    r = reason(message, size, "action `%s::\"%s\"` is not declared in the schema", action->type, id);
  else if (!a->has_applies_to)
    r = reason(message, size, "action `%s::\"%s\"` applies to no principal and resource in the schema",
               action->type, id);
  free(id);
  if (r) return r;
  if ((r = check_request_entity(schema, a, &request->principal, true, message, size))) return r;
  if ((r = check_request_entity(schema, a, &request->resource, false, message, size))) return r;
  static const cedar_value empty = {.kind = CV_RECORD};
  const cedar_value *context = request->context ? cedar_context_value(request->context) : &empty;
  return conforms(context, a->context, "context", 0, message, size);
}

int cedar_validate_entity(const cedar_schema *schema, const cedar_entity *entity, char *message,
                          size_t size) {
  char *type = encoded(entity->uid.type.ptr, entity->uid.type.len);
  char *id = encoded(entity->uid.id.ptr, entity->uid.id.len);
  char where[400];
  int r = 0;
  if (!type || !id) {
    r = -ENOMEM;
    goto out;
  }
  snprintf(where, sizeof where, "entity `%s::\"%s\"`", type, id);
  const cedar_schema_entity_type *e = cedar_schema_entity_type_find(schema, type);
  if (!e) {
    if (cedar_schema_is_action_type(schema, type) && cedar_schema_action_find(schema, type, id)) goto out;
    r = reason(message, size, "%s: entity type `%s` is not declared in the schema", where, type);
    goto out;
  }
  if ((r = check_enum(e, id, "entity", message, size))) goto out;
  if ((r = conforms(&entity->attrs, e->shape, where, 0, message, size))) goto out;
  if (entity->tags.kind == CV_RECORD && entity->tags.u.record.count) {
    if (!e->tags) {
      r = reason(message, size, "%s: has tags, but its type declares none", where);
      goto out;
    }
    for (size_t i = 0; i < entity->tags.u.record.count; i++) {
      char inner[500];
      snprintf(inner, sizeof inner, "%s, tag `%.*s`", where, (int)entity->tags.u.record.keys[i].len,
               entity->tags.u.record.keys[i].ptr);
      if ((r = conforms(&entity->tags.u.record.values[i], e->tags, inner, 0, message, size))) goto out;
    }
  }
  for (size_t i = 0; i < entity->parent_count; i++) {
    char *parent = encoded(entity->parents[i].type.ptr, entity->parents[i].type.len);
    if (!parent) {
      r = -ENOMEM;
      goto out;
    }
    bool allowed = false;
    for (size_t k = 0; k < e->member_of_count && !allowed; k++)
      allowed = strcmp(e->member_of[k], parent) == 0;
    if (!allowed)
      r = reason(message, size, "%s: a parent of type `%s` is not allowed by its memberOfTypes", where,
                 parent);
    free(parent);
    if (r) goto out;
  }
out:
  free(type);
  free(id);
  return r;
}
