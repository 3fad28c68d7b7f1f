/* JSON -> Cedar values, schema-less (escapes) or typed by a schema type (implicit forms allowed). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "policy/entities/entities.h"

__attribute__((format(printf, 2, 3))) static int bad(cedar_json_reader *rd, const char *format, ...) {
  char msg[400];
  va_list ap;
  va_start(ap, format);
  vsnprintf(msg, sizeof msg, format, ap);
  va_end(ap);
  cedar_diag_set(rd->diag, rd->file, 0, 0, NULL, "%s: %s", cedar_json_where(rd), msg);
  return -EINVAL;
}

static int copy_str(cedar_json_reader *rd, json_t *s, cedar_str *out) {
  return cedar_json_copy_bytes(rd->arena, json_string_value(s), json_string_length(s), out);
}

/* The members "type" and "id" of an object when both are strings (other members are ignored, as
 * upstream's serde structs do); one walk over the members instead of hashed lookups. */
static bool uid_members(json_t *j, json_t **type, json_t **id) {
  *type = *id = NULL;
  if (!json_is_object(j)) return false;
  for (void *it = json_object_iter(j); it; it = json_object_iter_next(j, it)) {
    const char *k = json_object_iter_key(it);
    if (k[0] == 't' && strcmp(k, "type") == 0)
      *type = json_object_iter_value(it);
    else if (k[0] == 'i' && k[1] == 'd' && k[2] == 0)
      *id = json_object_iter_value(it);
  }
  return json_is_string(*type) && json_is_string(*id);
}

/* The only member of a one-member object and its key; NULL otherwise. */
static json_t *single_member(json_t *j, const char **key) {
  if (!json_is_object(j) || json_object_size(j) != 1) return NULL;
  void *it = json_object_iter(j);
  *key = json_object_iter_key(it);
  return json_object_iter_value(it);
}

int cedar_json_to_euid(cedar_json_reader *rd, json_t *json, const char *what, cedar_euid *out) {
  json_t *type, *id;
  const char *key;
  json_t *inner = single_member(json, &key);
  if (inner && strcmp(key, "__entity") == 0 && uid_members(inner, &type, &id)) json = inner;
  if (!uid_members(json, &type, &id))
    return bad(rd, "%s: expected a literal entity reference {\"type\": ..., \"id\": ...}", what);
  int r;
  if ((r = copy_str(rd, id, &out->id)) < 0) return r;
  /* entity types repeat: a type equal to the last one checked is that (valid) name. (The last type is
   * decoded and never holds the NUL sentinel, so equal bytes mean the same decoded name.) */
  const char *t = json_string_value(type);
  size_t tn = json_string_length(type);
  if (rd->last_type.ptr && tn == rd->last_type.len && memcmp(t, rd->last_type.ptr, tn) == 0) {
    out->type = rd->last_type;
    return 0;
  }
  if ((r = copy_str(rd, type, &out->type)) < 0) return r;
  if (!cedar_is_name(out->type))
    return bad(rd, "%s: `%s` is not a valid entity type name", what, json_string_value(type));
  rd->last_type = out->type;
  return 0;
}

static const char *const ctor_for_type[][2] = {
    {"ipaddr", "ip"}, {"decimal", "decimal"}, {"datetime", "datetime"}, {"duration", "duration"}};

static int make_extension(cedar_json_reader *rd, const char *fn, json_t *arg, cedar_value *out) {
  if (strcmp(fn, "unknown") == 0) {
    if (!json_is_string(arg)) return bad(rd, "the argument of `unknown` must be a string");
    out->kind = CV_UNKNOWN;
    return copy_str(rd, arg, &out->u.s);
  }
  if (!json_is_string(arg)) return bad(rd, "the argument of extension function `%s` must be a string", fn);
  const char *s = json_string_value(arg);
  size_t n = json_string_length(arg);
  int r;
  if (strcmp(fn, "ip") == 0 || strcmp(fn, "ipaddr") == 0) {
    out->kind = CV_IPADDR;
    r = cedar_ipaddr_parse(s, n, &out->u.ip);
  } else if (strcmp(fn, "decimal") == 0) {
    out->kind = CV_DECIMAL;
    r = cedar_decimal_parse(s, n, &out->u.number);
  } else if (strcmp(fn, "datetime") == 0) {
    out->kind = CV_DATETIME;
    r = cedar_datetime_parse(s, n, &out->u.number);
  } else if (strcmp(fn, "duration") == 0) {
    out->kind = CV_DURATION;
    r = cedar_duration_parse(s, n, &out->u.number);
  } else {
    return bad(rd, "unknown extension function `%s`", fn);
  }
  if (r < 0) return bad(rd, "invalid argument `%.80s` to extension function `%s`", s, fn);
  return 0;
}

/* {"__extn": {"fn": F, "arg": A}} or {"__extn": {"fn": F, "args": [..]}} (offset etc. are not constants). */
static int read_extn(cedar_json_reader *rd, json_t *ext, unsigned depth, cedar_value *out) {
  json_t *fn = json_object_get(ext, "fn");
  json_t *arg = json_object_get(ext, "arg");
  json_t *args = json_object_get(ext, "args");
  if (json_is_string(fn) && !arg && json_is_array(args) && json_array_size(args) == 1 &&
      json_is_string(json_array_get(args, 0)))
    arg = json_array_get(args, 0);
  if (json_is_string(fn) && !arg && json_is_array(args) && json_array_size(args) == 2 &&
      strcmp(json_string_value(fn), "offset") == 0) {
    /* {"fn": "offset", "args": [datetime, duration]}: the form upstream writes datetimes in */
    cedar_value a, b;
    int r;
    if ((r = cedar_json_to_value(rd, json_array_get(args, 0), NULL, depth + 1, &a)) < 0 ||
        (r = cedar_json_to_value(rd, json_array_get(args, 1), NULL, depth + 1, &b)) < 0)
      return r;
    if (a.kind != CV_DATETIME || b.kind != CV_DURATION)
      return bad(rd, "`offset` takes a datetime and a duration");
    out->kind = CV_DATETIME;
    if (cedar_datetime_offset(a.u.number, b.u.number, &out->u.number) < 0)
      return bad(rd, "overflow in `offset`");
    return 0;
  }
  if (!json_is_string(fn) || !arg) return bad(rd, "expected {\"__extn\": {\"fn\": ..., \"arg\": ...}}");
  return make_extension(rd, json_string_value(fn), arg, out);
}

static const char *json_kind(json_t *j) {
  switch (json_typeof(j)) {
    case JSON_OBJECT:
      return "object";
    case JSON_ARRAY:
      return "array";
    case JSON_STRING:
      return "string";
    case JSON_INTEGER:
      return "integer";
    case JSON_REAL:
      return "real number";
    case JSON_TRUE:
    case JSON_FALSE:
      return "bool";
    default:
      return "null";
  }
}

static int read_record(cedar_json_reader *rd, json_t *json, const cedar_schema_type *type, unsigned depth,
                       cedar_value *out) {
  size_t n = json_object_size(json);
  cedar_str *keys = n ? cedar_arena_alloc(rd->arena, n * sizeof *keys) : NULL;
  cedar_value *values = n ? cedar_arena_alloc(rd->arena, n * sizeof *values) : NULL;
  if (n && (!keys || !values)) return -ENOMEM;
  size_t i = 0;
  for (void *it = json_object_iter(json); it; it = json_object_iter_next(json, it), i++) {
    if (cedar_json_copy_bytes(rd->arena, json_object_iter_key(it), json_object_iter_key_len(it), &keys[i]) <
        0)
      return -ENOMEM;
    const cedar_schema_type *at = NULL;
    if (type) {
      /* schema names keep NUL as 0xC0 0x80; short names are encoded on the stack */
      char small[128];
      char *encoded = keys[i].len < sizeof small / 2 ? small : cedar_schema_name_encode(keys[i]);
      if (!encoded) return -ENOMEM;
      if (encoded == small) cedar_schema_encode_name(keys[i].ptr, keys[i].len, small, sizeof small);
      const cedar_schema_attribute *attr = cedar_schema_record_attribute(type, encoded);
      if (encoded != small) free(encoded);
      if (!attr) {
        if (!type->additional_attributes)
          return bad(rd, "attribute `%.*s` is not declared in the schema",
                     (int)(keys[i].len > 60 ? 60 : keys[i].len), keys[i].ptr);
      } else {
        at = attr->type;
      }
    }
    int r = cedar_json_to_value(rd, json_object_iter_value(it), at, depth + 1, &values[i]);
    if (r < 0) return r;
  }
  size_t dup = 0;
  if (cedar_value_record_normalize(keys, values, n, &dup) < 0)
    return bad(rd, "duplicate attribute `%.*s`", (int)keys[dup].len, keys[dup].ptr);
  out->kind = CV_RECORD;
  out->u.record.keys = keys;
  out->u.record.values = values;
  out->u.record.count = n;
  if (type) {
    for (size_t a = 0; a < type->attribute_count; a++) {
      if (!type->attributes[a].required) continue;
      cedar_str name;
      if (cedar_schema_name_decode(rd->arena, type->attributes[a].name, &name) < 0) return -ENOMEM;
      if (!cedar_record_get(out, name))
        return bad(rd, "required attribute `%s` is missing", type->attributes[a].name);
    }
  }
  return 0;
}

int cedar_json_to_value(cedar_json_reader *rd, json_t *json, const cedar_schema_type *type, unsigned depth,
                        cedar_value *out) {
  if (depth > CEDAR_MAX_DEPTH) {
    bad(rd, "value nested deeper than %d levels", CEDAR_MAX_DEPTH);
    return -E2BIG;
  }
  memset(out, 0, sizeof *out);
  /* Escapes are accepted whatever the expected type; the kind is checked below. */
  /* A one-key object {"__extn": {fn, arg|args}} or {"__entity": {type, id}} is an escape; other shapes
   * (extra keys, missing fields) are plain records, as upstream's untagged JSON reading does. */
  const char *key;
  json_t *member = single_member(json, &key);
  if (member && key[0] == '_' && key[1] == '_') {
    json_t *ext = strcmp(key, "__extn") == 0 ? member : NULL, *t, *i;
    if (json_is_object(ext) && json_is_string(json_object_get(ext, "fn")) &&
        (json_object_get(ext, "arg") || json_is_array(json_object_get(ext, "args")))) {
      int r = read_extn(rd, ext, depth, out);
      if (r < 0) return r;
      goto check;
    }
    if (strcmp(key, "__entity") == 0 && uid_members(member, &t, &i)) {
      out->kind = CV_ENTITY;
      int r = cedar_json_to_euid(rd, json, "entity reference", &out->u.uid);
      if (r < 0) return r;
      goto check;
    }
    if (strcmp(key, "__expr") == 0) return bad(rd, "the `__expr` escape is no longer supported");
  }
  if (type && type->kind == CEDAR_SCHEMA_ENTITY && json_is_object(json)) {
    out->kind = CV_ENTITY;
    int r = cedar_json_to_euid(rd, json, "entity reference", &out->u.uid);
    if (r < 0) return r;
    goto check;
  }
  if (type && type->kind == CEDAR_SCHEMA_EXTENSION) {
    const char *fn = NULL;
    for (size_t i = 0; i < 4; i++)
      if (strcmp(type->name, ctor_for_type[i][0]) == 0) fn = ctor_for_type[i][1];
    if (json_is_string(json) && fn) {
      int r = make_extension(rd, fn, json, out);
      if (r < 0) return r;
      goto check;
    }
    if (json_is_object(json) && json_object_get(json, "fn")) {
      int r = read_extn(rd, json, depth, out);
      if (r < 0) return r;
      goto check;
    }
  }
  switch (json_typeof(json)) {
    case JSON_TRUE:
    case JSON_FALSE:
      out->kind = CV_BOOL;
      out->u.boolean = json_is_true(json);
      break;
    case JSON_INTEGER:
      out->kind = CV_LONG;
      out->u.number = json_integer_value(json);
      break;
    case JSON_STRING: {
      out->kind = CV_STRING;
      int r = copy_str(rd, json, &out->u.s);
      if (r < 0) return r;
      break;
    }
    case JSON_ARRAY: {
      size_t n = json_array_size(json);
      cedar_value *items = n ? cedar_arena_alloc(rd->arena, n * sizeof *items) : NULL;
      if (n && !items) return -ENOMEM;
      const cedar_schema_type *et = type && type->kind == CEDAR_SCHEMA_SET ? type->element : NULL;
      for (size_t i = 0; i < n; i++) {
        int r = cedar_json_to_value(rd, json_array_get(json, i), et, depth + 1, &items[i]);
        if (r < 0) return r;
      }
      out->kind = CV_SET;
      out->u.set.items = items;
      out->u.set.count = cedar_value_set_normalize(items, n);
      break;
    }
    case JSON_OBJECT: {
      int r = read_record(rd, json, type && type->kind == CEDAR_SCHEMA_RECORD ? type : NULL, depth, out);
      if (r < 0) return r;
      break;
    }
    case JSON_REAL:
      return bad(rd, "numbers must be integers (Cedar has no floating point)");
    default:
      return bad(rd, "null is not a Cedar value");
  }
check:
  if (type && out->kind != CV_UNKNOWN) {
    static const cedar_value_kind want[] = {
        [CEDAR_SCHEMA_BOOL] = CV_BOOL, [CEDAR_SCHEMA_LONG] = CV_LONG,     [CEDAR_SCHEMA_STRING] = CV_STRING,
        [CEDAR_SCHEMA_SET] = CV_SET,   [CEDAR_SCHEMA_RECORD] = CV_RECORD, [CEDAR_SCHEMA_ENTITY] = CV_ENTITY};
    cedar_value_kind expected = type->kind == CEDAR_SCHEMA_EXTENSION
                                    ? (strcmp(type->name, "ipaddr") == 0     ? CV_IPADDR
                                       : strcmp(type->name, "decimal") == 0  ? CV_DECIMAL
                                       : strcmp(type->name, "datetime") == 0 ? CV_DATETIME
                                                                             : CV_DURATION)
                                    : want[type->kind];
    /* Context parsing (as upstream's) only needs the schema for the shape and the implicit forms: a
     * primitive or entity-type mismatch is left to request validation. */
    bool primitive = expected == CV_BOOL || expected == CV_LONG || expected == CV_STRING;
    if (rd->lenient &&
        ((primitive && (out->kind == CV_BOOL || out->kind == CV_LONG || out->kind == CV_STRING)) ||
         (expected == CV_ENTITY && out->kind == CV_ENTITY)))
      return 0;
    if (out->kind != expected)
      return bad(rd, "type mismatch: expected %s, got %s", cedar_value_kind_name(expected),
                 out->kind == CV_LONG || out->kind == CV_BOOL || out->kind == CV_STRING
                     ? cedar_value_kind_name(out->kind)
                     : json_kind(json));
    if (expected == CV_ENTITY && !cedar_str_eq_c(out->u.uid.type, type->name))
      return bad(rd, "type mismatch: expected an entity of type `%s`, got `%.*s`", type->name,
                 (int)out->u.uid.type.len, out->u.uid.type.ptr);
  }
  return 0;
}
