/* The typechecker of one policy condition in one request environment (cedar-policy validator
 * typecheck.rs, strict mode): singleton Bool types drive short-circuiting of && || if, capabilities
 * record which optional attributes and tags a `has`/hasTag guard made safe. */
#include <stdio.h>
#include <string.h>

#include "policy/eval/eval.h"
#include "policy/validate/types.h"

typedef struct answer {
  const vtype *type; /* NULL: no type */
  bool ok;           /* typechecked without error */
  const cap *caps;   /* capabilities when the expression is true */
} answer;

static answer typecheck(checker *c, const cap *prior, const cedar_expr *e);

static answer success(const vtype *t) {
  return (answer){t, true, NULL};
}
static answer failure(const vtype *t) {
  return (answer){t, false, NULL};
}

/* ---------------- helpers ---------------- */

static void error_at(checker *c, const cedar_expr *e, const char *format, ...)
    __attribute__((format(printf, 3, 4)));

/* The leftmost source position within e (binary nodes carry their operator's position). */
static void expr_start(const cedar_expr *e, unsigned *line, unsigned *column, int depth) {
  if (!e || depth > 64) return;
  if (e->line && (e->line < *line || (e->line == *line && e->column < *column)))
    *line = e->line, *column = e->column;
  switch ((cedar_expr_kind)e->kind) {
    case CX_SET:
    case CX_RECORD:
    case CX_CALL:
      if (e->u.list.count) expr_start(e->u.list.items[0], line, column, depth + 1);
      return;
    case CX_BOOL:
    case CX_LONG:
    case CX_STRING:
    case CX_ENTITY:
    case CX_VAR:
    case CX_SLOT:
    case CX_UNKNOWN:
    case CX_VALUE:
    case CX_IF:
      return;
    default:
      expr_start(e->u.op.a, line, column, depth + 1);
  }
}

static void error_at(checker *c, const cedar_expr *e, const char *format, ...) {
  char message[480];
  va_list ap;
  va_start(ap, format);
  vsnprintf(message, sizeof message, format, ap);
  va_end(ap);
  unsigned line = c->policy->line, column = c->policy->column;
  if (e && e->line) {
    line = e->line, column = e->column;
    expr_start(e, &line, &column, 0);
  }
  cedar_validate_add_finding(c->errors, line, column, "%s", message);
}

static const char *describe_expected(const vtype *const *expected, size_t count, schema_arena *arena) {
  const char *text = "";
  for (size_t i = 0; i < count; i++) {
    const char *one;
    switch (expected[i]->kind) {
      case VT_ANY_ENTITY:
        one = "an entity";
        break;
      case VT_RECORD:
        one = expected[i]->open && !expected[i]->attribute_count
                  ? "a record"
                  : cedar_validate_type_text(arena, expected[i]);
        break;
      case VT_SET:
        one = expected[i]->element ? "a set of entities" : "a set";
        break;
      default:
        one = cedar_validate_type_text(arena, expected[i]);
    }
    text = cedar_schema_arena_printf(arena, "%s%s%s", text, i ? (i + 1 == count ? " or " : ", ") : "", one);
  }
  return text ? text : "?";
}

static answer expect_one_of(checker *c, const cap *prior, const cedar_expr *e, const vtype *const *expected,
                            size_t count, const char *hint) {
  answer a = typecheck(c, prior, e);
  if (!a.type) return failure(NULL);
  for (size_t i = 0; i < count; i++)
    if (cedar_validate_vt_is_subtype(a.type, expected[i], true)) return a;
  error_at(c, e, "`%s` has type %s, but %s is expected here%s%s", cedar_validate_expr_text(c->arena, e),
           cedar_validate_type_text(c->arena, a.type), describe_expected(expected, count, c->arena),
           hint ? "; " : "", hint ? hint : "");
  return failure(NULL);
}

static answer expect(checker *c, const cap *prior, const cedar_expr *e, const vtype *expected,
                     const char *hint) {
  return expect_one_of(c, prior, e, &expected, 1, hint);
}

static const vtype *entity_type(checker *c, const char *name) {
  return cedar_validate_vt_new(c->arena, VT_ENTITY, name, NULL);
}

static const char *euid_type(checker *c, const cedar_euid *uid) {
  return cedar_validate_encode_str(c->arena, uid->type);
}

/* The uid an expression denotes when it is an entity literal or the `action` variable. */
static bool literal_uid(checker *c, const cedar_expr *e, const char **type, const char **id) {
  if (e->kind == CX_ENTITY) {
    *type = euid_type(c, &e->u.uid);
    *id = cedar_validate_encode_str(c->arena, e->u.uid.id);
    return true;
  }
  if (e->kind == CX_VAR && e->var == CEDAR_VAR_ACTION && c->env->action) {
    *type = c->env->action->uid.type;
    *id = c->env->action->uid.id;
    return true;
  }
  return false;
}

static bool is_literal(const cedar_expr *e) {
  return e->kind == CX_BOOL || e->kind == CX_LONG || e->kind == CX_STRING || e->kind == CX_ENTITY;
}

/* Literal equality of two literal expressions (after replacing `action`). */
static bool literals_equal(checker *c, const cedar_expr *a, const cedar_expr *b) {
  const char *ta, *ia, *tb, *ib;
  bool ua = literal_uid(c, a, &ta, &ia), ub = literal_uid(c, b, &tb, &ib);
  if (ua || ub) return ua && ub && strcmp(ta, tb) == 0 && strcmp(ia, ib) == 0;
  if (a->kind != b->kind) return false;
  if (a->kind == CX_BOOL) return a->u.boolean == b->u.boolean;
  if (a->kind == CX_LONG) return a->u.number == b->u.number;
  return cedar_str_eq(a->u.s, b->u.s);
}

static bool is_literal_or_action(checker *c, const cedar_expr *e) {
  return is_literal(e) || (e->kind == CX_VAR && e->var == CEDAR_VAR_ACTION && c->env->action);
}

/* Attribute of an entity or record type: *found and *required. */
static const vtype *attribute_of(checker *c, const vtype *t, const char *attr, bool *found, bool *required) {
  *found = false;
  if (t->kind == VT_RECORD) {
    const vattr *a = cedar_validate_vt_record_attribute(t, attr);
    if (!a) return NULL;
    *found = true;
    *required = a->required;
    return a->type;
  }
  if (t->kind == VT_ENTITY) {
    const cedar_schema_type *s = cedar_schema_entity_attribute(c->schema, t->name, attr, required);
    if (!s) return NULL;
    *found = true;
    const vtype *v = cedar_validate_vt_from_schema(c->arena, s, 0);
    if (!v) c->failed_alloc = true;
    return v;
  }
  return NULL;
}

static bool may_have_attribute(checker *c, const vtype *t, const char *attr) {
  switch (t->kind) {
    case VT_NEVER:
    case VT_ANY_ENTITY:
      return true;
    case VT_RECORD:
      return t->open || cedar_validate_vt_record_attribute(t, attr) != NULL;
    case VT_ENTITY: {
      const cedar_schema_entity_type *e = cedar_schema_entity_type_find(c->schema, t->name);
      return e && (e->shape->additional_attributes || cedar_schema_record_attribute(e->shape, attr));
    }
    default:
      return false;
  }
}

static const char *attribute_names(checker *c, const vtype *t) {
  const char *text = "";
  if (t->kind == VT_RECORD) {
    for (size_t i = 0; i < t->attribute_count; i++)
      text = cedar_schema_arena_printf(c->arena, "%s%s%s", text, i ? ", " : "", t->attributes[i].name);
  } else if (t->kind == VT_ENTITY) {
    const cedar_schema_entity_type *e = cedar_schema_entity_type_find(c->schema, t->name);
    for (size_t i = 0; e && i < e->shape->attribute_count; i++)
      text = cedar_schema_arena_printf(c->arena, "%s%s%s", text, i ? ", " : "", e->shape->attributes[i].name);
  }
  return text && text[0] ? text : "(none)";
}

static const char *suggest_attribute(checker *c, const vtype *t, const char *attr) {
  const char *names[256];
  size_t n = 0;
  if (t->kind == VT_RECORD) {
    for (size_t i = 0; i < t->attribute_count && n < 256; i++) names[n++] = t->attributes[i].name;
  } else if (t->kind == VT_ENTITY) {
    const cedar_schema_entity_type *e = cedar_schema_entity_type_find(c->schema, t->name);
    for (size_t i = 0; e && i < e->shape->attribute_count && n < 256; i++)
      names[n++] = e->shape->attributes[i].name;
  }
  return cedar_validate_closest_name(attr, names, n);
}

/* May an entity of type `lhs` be `in` an entity of type `rhs` (entity or action hierarchy)? */
static bool may_be_descendant(checker *c, const char *lhs, const char *rhs) {
  if (cedar_schema_entity_type_may_be_in(c->schema, lhs, rhs)) return true;
  size_t n = cedar_schema_action_count(c->schema);
  for (size_t i = 0; i < n; i++) {
    const cedar_schema_action *a = cedar_schema_action_at(c->schema, i);
    if (strcmp(a->uid.type, lhs) != 0) continue;
    for (size_t j = 0; j < n; j++) {
      const cedar_schema_action *g = cedar_schema_action_at(c->schema, j);
      if (strcmp(g->uid.type, rhs) == 0 && cedar_schema_action_is_in(c->schema, &a->uid, &g->uid))
        return true;
    }
  }
  return false;
}

/* ---------------- operators ---------------- */

static answer typecheck_in(checker *c, const cap *prior, const cedar_expr *e, const cedar_expr *lhs,
                           const cedar_expr *rhs) {
  static const vtype set_of_entities = {.kind = VT_SET, .element = &cedar_validate_vt_any_entity_type};
  (void)e;
  const vtype *rhs_expected[2] = {&set_of_entities, &cedar_validate_vt_any_entity_type};
  answer l = expect(c, prior, lhs, &cedar_validate_vt_any_entity_type,
                    "to test membership in a set use `.contains()`");
  answer r = expect_one_of(c, prior, rhs, rhs_expected, 2, NULL);
  if (!l.ok || !r.ok) return failure(&cedar_validate_vt_bool_type);
  const char *lt, *li;
  if (literal_uid(c, lhs, &lt, &li) && cedar_validate_is_action_type_name(lt)) {
    /* action literal or variable `in` entity literal(s): decided by the action hierarchy */
    const cedar_expr *const *items = &rhs;
    size_t count = 1;
    if (rhs->kind == CX_SET) items = (const cedar_expr *const *)rhs->u.list.items, count = rhs->u.list.count;
    bool all_literals = true, any_action = false, known = true, in = false;
    for (size_t i = 0; i < count; i++) {
      const char *rt, *ri;
      if (!literal_uid(c, items[i], &rt, &ri)) {
        all_literals = false;
        break;
      }
      if (!cedar_validate_is_action_type_name(rt)) continue;
      any_action = true;
      const cedar_schema_action *group = cedar_schema_action_find(c->schema, rt, ri);
      if (!group) {
        known = false;
        continue;
      }
      cedar_schema_action_ref me = {lt, li};
      if (cedar_schema_action_is_in(c->schema, &me, &group->uid)) in = true;
    }
    if (all_literals) {
      if (!any_action) return success(&cedar_validate_vt_false_type);
      if (!known) return failure(&cedar_validate_vt_bool_type);
      return success(in ? &cedar_validate_vt_true_type : &cedar_validate_vt_false_type);
    }
  }
  const char *lhs_type = l.type->kind == VT_ENTITY ? l.type->name : NULL;
  const char *rhs_type = r.type->kind == VT_ENTITY ? r.type->name : NULL;
  if (r.type->kind == VT_SET && r.type->element && r.type->element->kind == VT_ENTITY)
    rhs_type = r.type->element->name;
  if (lhs_type && rhs_type && !may_be_descendant(c, lhs_type, rhs_type))
    return success(&cedar_validate_vt_false_type);
  return success(&cedar_validate_vt_bool_type);
}

/* `==` in strict mode. */
static answer typecheck_equality(checker *c, const cap *prior, const cedar_expr *e, const cedar_expr *lhs,
                                 const cedar_expr *rhs) {
  answer l = typecheck(c, prior, lhs), r = typecheck(c, prior, rhs);
  const vtype *result = &cedar_validate_vt_bool_type;
  if (l.type && r.type && l.type->kind == VT_ENTITY && r.type->kind == VT_ENTITY &&
      strcmp(l.type->name, r.type->name) != 0)
    result = &cedar_validate_vt_false_type;
  else if (is_literal_or_action(c, lhs) && is_literal_or_action(c, rhs))
    result = literals_equal(c, lhs, rhs) ? &cedar_validate_vt_true_type : &cedar_validate_vt_false_type;
  bool ok = l.ok && r.ok;
  if (result == &cedar_validate_vt_bool_type && l.type && r.type &&
      !cedar_validate_vt_lub(c->arena, l.type, r.type)) {
    error_at(c, e, "`%s` compares %s with %s: both sides of `==` must have the same type",
             cedar_validate_expr_text(c->arena, e), cedar_validate_type_text(c->arena, l.type),
             cedar_validate_type_text(c->arena, r.type));
    ok = false;
  }
  return (answer){result, ok, NULL};
}

static bool orderable(const vtype *t) {
  return t->kind == VT_LONG ||
         (t->kind == VT_EXTENSION && (strcmp(t->name, "datetime") == 0 || strcmp(t->name, "duration") == 0));
}

static answer typecheck_comparison(checker *c, const cap *prior, const cedar_expr *e, const cedar_expr *lhs,
                                   const cedar_expr *rhs) {
  answer l = typecheck(c, prior, lhs), r = typecheck(c, prior, rhs);
  if (!l.type || !r.type) return failure(&cedar_validate_vt_bool_type);
  bool ok = l.ok && r.ok;
  bool same = cedar_validate_vt_is_subtype(l.type, r.type, false) &&
              cedar_validate_vt_is_subtype(r.type, l.type, false);
  if (!(same && orderable(l.type))) {
    const cedar_expr *bad = orderable(l.type) ? rhs : lhs;
    const vtype *bad_type = orderable(l.type) ? r.type : l.type;
    error_at(c, bad,
             "`%s` compares %s with %s: `<`, `<=`, `>`, `>=` need two Longs, two datetimes or two durations",
             cedar_validate_expr_text(c->arena, e), cedar_validate_type_text(c->arena, l.type),
             cedar_validate_type_text(c->arena, r.type));
    (void)bad_type;
    ok = false;
  }
  return (answer){&cedar_validate_vt_bool_type, ok, NULL};
}

static const vtype *extension_vtype(checker *c, cedar_extension_type t) {
  switch (t) {
    case CEDAR_EXT_TYPE_BOOL:
      return &cedar_validate_vt_bool_type;
    case CEDAR_EXT_TYPE_LONG:
      return &cedar_validate_vt_long_type;
    case CEDAR_EXT_TYPE_STRING:
      return &cedar_validate_vt_string_type;
    default:
      return cedar_validate_vt_new(c->arena, VT_EXTENSION, cedar_extension_type_name(t), NULL);
  }
}

static bool constructor_argument_valid(const cedar_extension_function *f, cedar_str s) {
  cedar_ipaddr ip;
  int64_t v;
  if (strcmp(f->name, "ip") == 0) return cedar_ipaddr_parse(s.ptr, s.len, &ip) == 0;
  if (strcmp(f->name, "decimal") == 0) return cedar_decimal_parse(s.ptr, s.len, &v) == 0;
  if (strcmp(f->name, "datetime") == 0) return cedar_datetime_parse(s.ptr, s.len, &v) == 0;
  if (strcmp(f->name, "duration") == 0) return cedar_duration_parse(s.ptr, s.len, &v) == 0;
  return true;
}

static answer typecheck_call(checker *c, const cap *prior, const cedar_expr *e) {
  const cedar_extension_function *f = e->u.list.function;
  size_t n = e->u.list.count;
  if (!f) f = cedar_extension_function_find(cedar_validate_encode_str(c->arena, e->u.list.name));
  if (!f) {
    error_at(c, e, "unknown extension function `%.*s`", (int)e->u.list.name.len, e->u.list.name.ptr);
    for (size_t i = 0; i < n; i++) typecheck(c, prior, e->u.list.items[i]);
    return failure(NULL);
  }
  const vtype *result = extension_vtype(c, f->result);
  bool failed = false;
  if (n != f->argument_count) {
    error_at(c, e, "`%s` takes %u argument%s%s, but %zu %s given", f->name,
             f->method_style ? f->argument_count - 1 : f->argument_count,
             (f->method_style ? f->argument_count - 1 : f->argument_count) == 1 ? "" : "s",
             f->method_style ? " besides its receiver" : "", f->method_style && n ? n - 1 : n,
             (f->method_style && n ? n - 1 : n) == 1 ? "was" : "were");
    failed = true;
  }
  if (f->is_constructor) {
    for (size_t i = 0; i < n; i++) {
      const cedar_expr *arg = e->u.list.items[i];
      if (!is_literal(arg)) {
        error_at(c, e, "`%s(...)` must be applied to a string literal in strict validation, not to `%s`",
                 f->name, cedar_validate_expr_text(c->arena, arg));
        failed = true;
      } else if (arg->kind == CX_STRING && !constructor_argument_valid(f, arg->u.s)) {
        error_at(c, e, "`%s` is not a valid %s", cedar_validate_expr_text(c->arena, e),
                 cedar_extension_type_name(f->result));
        failed = true;
      }
    }
  }
  if (failed) {
    for (size_t i = 0; i < n; i++) typecheck(c, prior, e->u.list.items[i]);
    return failure(result);
  }
  bool ok = true;
  for (size_t i = 0; i < n; i++) {
    answer a = expect(c, prior, e->u.list.items[i], extension_vtype(c, f->arguments[i]), NULL);
    ok = ok && a.ok;
  }
  return ok ? success(result) : failure(result);
}

static answer typecheck_attribute(checker *c, const cap *prior, const cedar_expr *e) {
  static const vtype *const entity_or_record[2] = {&cedar_validate_vt_any_entity_type,
                                                   &cedar_validate_vt_any_record_type};
  const cedar_expr *target = e->u.op.a;
  const char *attr = cedar_validate_encode_str(c->arena, e->u.op.name);
  bool has = e->kind == CX_HAS_ATTR;
  answer t = expect_one_of(c, prior, target, entity_or_record, 2, NULL);
  if (!t.type) return failure(has ? &cedar_validate_vt_bool_type : NULL);
  bool found = false, required = false;
  const vtype *attribute = attribute_of(c, t.type, attr, &found, &required);
  bool guarded = cedar_validate_cap_contains(prior, target, attr, NULL);
  if (has) {
    if (found) {
      bool known = (required && t.type->kind == VT_RECORD) || guarded;
      return (answer){known ? &cedar_validate_vt_true_type : &cedar_validate_vt_bool_type, t.ok,
                      cedar_validate_cap_single(c, target, attr, NULL)};
    }
    return (answer){
        may_have_attribute(c, t.type, attr) ? &cedar_validate_vt_bool_type : &cedar_validate_vt_false_type,
        t.ok, NULL};
  }
  if (found) {
    if (required || guarded) return (answer){attribute, t.ok, NULL};
    error_at(c, e,
             "`%s` reads the optional attribute `%s` of %s without a guard: write `%s has %s && ...` first",
             cedar_validate_expr_text(c->arena, e), attr, cedar_validate_type_text(c->arena, t.type),
             cedar_validate_expr_text(c->arena, target), attr);
    return failure(attribute);
  }
  const char *suggestion = suggest_attribute(c, t.type, attr);
  error_at(c, e, "attribute `%s` not found in `%s` (type %s)%s%s%s; its attributes are: %s", attr,
           cedar_validate_expr_text(c->arena, target), cedar_validate_type_text(c->arena, t.type),
           suggestion ? "; did you mean `" : "", suggestion ? suggestion : "", suggestion ? "`?" : "",
           attribute_names(c, t.type));
  return failure(NULL);
}

static const vtype *tag_type(checker *c, const vtype *entity) {
  if (entity->kind == VT_ENTITY) {
    const cedar_schema_entity_type *e = cedar_schema_entity_type_find(c->schema, entity->name);
    if (!e || !e->tags) return NULL;
    const vtype *v = cedar_validate_vt_from_schema(c->arena, e->tags, 0);
    if (!v) c->failed_alloc = true;
    return v;
  }
  /* any entity: the LUB of every declared tag type */
  const vtype *lub = NULL;
  for (size_t i = 0; i < cedar_schema_entity_type_count(c->schema); i++) {
    const cedar_schema_entity_type *e = cedar_schema_entity_type_at(c->schema, i);
    if (!e->tags) continue;
    const vtype *v = cedar_validate_vt_from_schema(c->arena, e->tags, 0);
    lub = lub ? (v ? cedar_validate_vt_lub(c->arena, lub, v) : NULL) : v;
    if (!lub) return NULL;
  }
  return lub;
}

static answer typecheck_tag(checker *c, const cap *prior, const cedar_expr *e) {
  const cedar_expr *target = e->u.op.a, *key = e->u.op.b;
  answer t = expect(c, prior, target, &cedar_validate_vt_any_entity_type, NULL);
  answer k = t.type ? expect(c, prior, key, &cedar_validate_vt_string_type, NULL) : failure(NULL);
  if (!t.type || !k.type) return failure(e->kind == CX_HAS_TAG ? &cedar_validate_vt_bool_type : NULL);
  const vtype *tags = tag_type(c, t.type);
  bool guarded = cedar_validate_cap_contains(prior, target, NULL, key);
  if (e->kind == CX_HAS_TAG) {
    const vtype *result = !tags     ? &cedar_validate_vt_false_type
                          : guarded ? &cedar_validate_vt_true_type
                                    : &cedar_validate_vt_bool_type;
    return (answer){result, t.ok && k.ok, cedar_validate_cap_single(c, target, NULL, key)};
  }
  if (!guarded) {
    error_at(c, e, "`%s` reads a tag without a guard: write `%s.hasTag(%s) && ...` first",
             cedar_validate_expr_text(c->arena, e), cedar_validate_expr_text(c->arena, target),
             cedar_validate_expr_text(c->arena, key));
    return failure(NULL);
  }
  if (!tags) {
    error_at(c, e, "`%s` reads a tag, but %s has no tags in the schema",
             cedar_validate_expr_text(c->arena, e), cedar_validate_type_text(c->arena, t.type));
    return failure(NULL);
  }
  return (answer){tags, t.ok && k.ok, NULL};
}

static answer typecheck_set_operation(checker *c, const cap *prior, const cedar_expr *e) {
  const cedar_expr *set = e->u.op.a, *arg = e->u.op.b;
  answer s = expect(c, prior, set, &cedar_validate_vt_any_set_type, NULL);
  if (!s.type) {
    typecheck(c, prior, arg);
    return failure(&cedar_validate_vt_bool_type);
  }
  answer a = e->kind == CX_CONTAINS ? typecheck(c, prior, arg)
                                    : expect(c, prior, arg, &cedar_validate_vt_any_set_type, NULL);
  if (!a.type) return failure(&cedar_validate_vt_bool_type);
  const vtype *left = e->kind == CX_CONTAINS ? s.type->element : s.type;
  bool ok = s.ok && a.ok;
  if (left && !cedar_validate_vt_lub(c->arena, left, a.type)) {
    error_at(c, e, "`%s` mixes %s and %s: the set's elements and the argument must have the same type",
             cedar_validate_expr_text(c->arena, e), cedar_validate_type_text(c->arena, left),
             cedar_validate_type_text(c->arena, a.type));
    ok = false;
  }
  return (answer){&cedar_validate_vt_bool_type, ok, NULL};
}

static answer typecheck_set(checker *c, const cap *prior, const cedar_expr *e) {
  size_t n = e->u.list.count;
  bool ok = true;
  const vtype *lub = NULL;
  bool have_all = true;
  for (size_t i = 0; i < n; i++) {
    answer a = typecheck(c, prior, e->u.list.items[i]);
    ok = ok && a.ok;
    if (!a.type) have_all = false;
    if (!have_all) continue;
    const vtype *next = lub ? cedar_validate_vt_lub(c->arena, lub, a.type) : a.type;
    if (!next) {
      error_at(c, e, "the set `%s` mixes elements of type %s and %s: all elements must have the same type",
               cedar_validate_expr_text(c->arena, e), cedar_validate_type_text(c->arena, lub),
               cedar_validate_type_text(c->arena, a.type));
      have_all = false;
      ok = false;
      lub = NULL;
      continue;
    }
    lub = next;
  }
  if (n == 0) {
    error_at(c, e,
             "empty set literals `[]` are not allowed in strict validation (their element type is unknown)");
    return failure(NULL);
  }
  if (!have_all || !lub) return failure(NULL);
  const vtype *t = cedar_validate_vt_new(c->arena, VT_SET, NULL, lub);
  return (answer){t, ok, NULL};
}

static answer typecheck_record(checker *c, const cap *prior, const cedar_expr *e) {
  size_t n = e->u.list.count;
  vtype *t = (vtype *)cedar_validate_vt_new(c->arena, VT_RECORD, NULL, NULL);
  vattr *attrs = cedar_schema_arena_alloc(c->arena, (n + 1) * sizeof *attrs);
  if (!t || !attrs) {
    c->failed_alloc = true;
    return failure(NULL);
  }
  bool ok = true, typed = true;
  for (size_t i = 0; i < n; i++) {
    answer a = typecheck(c, prior, e->u.list.items[i]);
    ok = ok && a.ok;
    if (!a.type) typed = false;
    attrs[i] = (vattr){cedar_validate_encode_str(c->arena, e->u.list.keys[i]), a.type, true};
  }
  t->attributes = attrs;
  t->attribute_count = n;
  return (answer){typed ? t : NULL, ok && typed, NULL};
}

static answer typecheck_entity_literal(checker *c, const cedar_expr *e) {
  const char *type = euid_type(c, &e->u.uid);
  if (cedar_validate_is_action_type_name(type)) {
    if (cedar_schema_action_find(c->schema, type, cedar_validate_encode_str(c->arena, e->u.uid.id)))
      return success(entity_type(c, type));
    return failure(NULL); /* reported once per policy by the action check */
  }
  if (cedar_schema_entity_type_find(c->schema, type)) return success(entity_type(c, type));
  return failure(NULL); /* reported once per policy by the entity type check */
}

static answer typecheck_var(checker *c, const cedar_expr *e) {
  const request_env *env = c->env;
  switch (e->var) {
    case CEDAR_VAR_PRINCIPAL:
      return success(entity_type(c, env->principal));
    case CEDAR_VAR_RESOURCE:
      return success(entity_type(c, env->resource));
    case CEDAR_VAR_ACTION:
      return success(entity_type(c, env->action->uid.type));
    default: {
      const vtype *t = cedar_validate_vt_from_schema(c->arena, env->action->context, 0);
      if (!t) c->failed_alloc = true;
      return t ? success(t) : failure(NULL);
    }
  }
}

static answer typecheck_and_or(checker *c, const cap *prior, const cedar_expr *e) {
  bool is_and = e->kind == CX_AND;
  answer l = expect(c, prior, e->u.op.a, &cedar_validate_vt_bool_type, NULL);
  if (l.type && l.type->kind == (is_and ? VT_FALSE : VT_TRUE))
    return (answer){l.type, l.ok, is_and ? NULL : l.caps};
  answer r = expect(c, is_and ? cedar_validate_cap_union(c, prior, l.caps) : prior, e->u.op.b,
                    &cedar_validate_vt_bool_type, NULL);
  bool ok = l.ok && r.ok;
  if (!l.type || !r.type) return (answer){&cedar_validate_vt_bool_type, false, NULL};
  if (is_and) {
    if (r.type->kind == VT_FALSE) return (answer){&cedar_validate_vt_false_type, ok, NULL};
    if (r.type->kind == VT_TRUE) return (answer){l.type, ok, cedar_validate_cap_union(c, l.caps, r.caps)};
    if (l.type->kind == VT_TRUE) return (answer){r.type, ok, cedar_validate_cap_union(c, r.caps, r.caps)};
    return (answer){&cedar_validate_vt_bool_type, ok, cedar_validate_cap_union(c, l.caps, r.caps)};
  }
  if (r.type->kind == VT_TRUE) return (answer){&cedar_validate_vt_true_type, ok, r.caps};
  if (r.type->kind == VT_FALSE) return (answer){l.type, ok, l.caps};
  if (l.type->kind == VT_FALSE) return (answer){r.type, ok, r.caps};
  return (answer){&cedar_validate_vt_bool_type, ok, cedar_validate_cap_intersect(c, r.caps, l.caps)};
}

static answer typecheck_if(checker *c, const cap *prior, const cedar_expr *e) {
  answer test = expect(c, prior, e->u.op.a, &cedar_validate_vt_bool_type, NULL);
  if (test.type && test.type->kind == VT_TRUE) {
    answer then = typecheck(c, cedar_validate_cap_union(c, prior, test.caps), e->u.op.b);
    return (answer){then.type, test.ok && then.ok, cedar_validate_cap_union(c, then.caps, test.caps)};
  }
  if (test.type && test.type->kind == VT_FALSE) {
    answer otherwise = typecheck(c, prior, e->u.op.c);
    return (answer){otherwise.type, test.ok && otherwise.ok, otherwise.caps};
  }
  answer then = typecheck(c, cedar_validate_cap_union(c, prior, test.caps), e->u.op.b);
  answer otherwise = typecheck(c, prior, e->u.op.c);
  bool ok = test.ok && then.ok && otherwise.ok;
  if (!then.type || !otherwise.type) return (answer){NULL, false, NULL};
  const vtype *lub = cedar_validate_vt_lub(c->arena, then.type, otherwise.type);
  if (!lub) {
    error_at(c, e, "the branches of `%s` have types %s and %s: both branches must have the same type",
             cedar_validate_expr_text(c->arena, e), cedar_validate_type_text(c->arena, then.type),
             cedar_validate_type_text(c->arena, otherwise.type));
    return (answer){NULL, false, NULL};
  }
  return (answer){
      lub, ok,
      cedar_validate_cap_intersect(c, otherwise.caps, cedar_validate_cap_union(c, then.caps, test.caps))};
}

static answer typecheck_is(checker *c, const cap *prior, const cedar_expr *e) {
  answer t =
      expect(c, prior, e->u.op.a, &cedar_validate_vt_any_entity_type, "`is` tests the type of an entity");
  const char *type = cedar_validate_encode_str(c->arena, e->u.op.name);
  answer is;
  if (!t.type)
    is = failure(&cedar_validate_vt_bool_type);
  else if (t.type->kind == VT_ENTITY)
    is = (answer){
        strcmp(t.type->name, type) == 0 ? &cedar_validate_vt_true_type : &cedar_validate_vt_false_type, t.ok,
        NULL};
  else
    is = (answer){&cedar_validate_vt_bool_type, t.ok, NULL};
  if (!e->u.op.b) return is;
  /* `x is T in y` is `x is T && x in y` */
  if (is.type && is.type->kind == VT_FALSE) return is;
  answer in = typecheck_in(c, prior, e, e->u.op.a, e->u.op.b);
  bool ok = is.ok && in.ok;
  if (in.type->kind == VT_FALSE) return (answer){&cedar_validate_vt_false_type, ok, NULL};
  if (in.type->kind == VT_TRUE) return (answer){is.type, ok, NULL};
  if (is.type->kind == VT_TRUE) return (answer){in.type, ok, NULL};
  return (answer){&cedar_validate_vt_bool_type, ok, NULL};
}

static answer typecheck(checker *c, const cap *prior, const cedar_expr *e) {
  if (c->failed_alloc) return failure(NULL);
  if (++c->depth > MAX_TYPECHECK_DEPTH) {
    c->depth--;
    error_at(c, e, "expression nested deeper than %d levels", MAX_TYPECHECK_DEPTH);
    return failure(NULL);
  }
  answer a;
  switch ((cedar_expr_kind)e->kind) {
    case CX_BOOL:
      a = success(e->u.boolean ? &cedar_validate_vt_true_type : &cedar_validate_vt_false_type);
      break;
    case CX_LONG:
      a = success(&cedar_validate_vt_long_type);
      break;
    case CX_STRING:
      a = success(&cedar_validate_vt_string_type);
      break;
    case CX_ENTITY:
      a = typecheck_entity_literal(c, e);
      break;
    case CX_VAR:
      a = typecheck_var(c, e);
      break;
    case CX_SLOT: {
      const char *slot = e->var == CEDAR_VAR_PRINCIPAL ? c->env->principal_slot : c->env->resource_slot;
      a = success(slot ? entity_type(c, slot) : &cedar_validate_vt_any_entity_type);
      break;
    }
    case CX_UNKNOWN:
    case CX_VALUE:
      error_at(c, e, "`%s` cannot be validated (unknowns and residual values are not policy syntax)",
               cedar_validate_expr_text(c->arena, e));
      a = failure(NULL);
      break;
    case CX_NOT: {
      answer x = expect(c, prior, e->u.op.a, &cedar_validate_vt_bool_type, NULL);
      const vtype *t = !x.type                    ? NULL
                       : x.type->kind == VT_TRUE  ? &cedar_validate_vt_false_type
                       : x.type->kind == VT_FALSE ? &cedar_validate_vt_true_type
                                                  : &cedar_validate_vt_bool_type;
      a = (answer){t ? t : &cedar_validate_vt_bool_type, x.ok && t, NULL};
      break;
    }
    case CX_NEG: {
      answer x = expect(c, prior, e->u.op.a, &cedar_validate_vt_long_type, NULL);
      a = (answer){&cedar_validate_vt_long_type, x.ok && x.type, NULL};
      break;
    }
    case CX_AND:
    case CX_OR:
      a = typecheck_and_or(c, prior, e);
      break;
    case CX_IF:
      a = typecheck_if(c, prior, e);
      break;
    case CX_EQ:
    case CX_NE: {
      a = typecheck_equality(c, prior, e, e->u.op.a, e->u.op.b);
      if (e->kind == CX_NE)
        a.type = a.type->kind == VT_TRUE    ? &cedar_validate_vt_false_type
                 : a.type->kind == VT_FALSE ? &cedar_validate_vt_true_type
                                            : a.type;
      a.caps = NULL;
      break;
    }
    case CX_LT:
    case CX_LE:
      a = typecheck_comparison(c, prior, e, e->u.op.a, e->u.op.b);
      break;
    case CX_GT:
    case CX_GE:
      a = typecheck_comparison(c, prior, e, e->u.op.a, e->u.op.b);
      break;
    case CX_ADD:
    case CX_SUB:
    case CX_MUL: {
      const char *hint = e->kind == CX_ADD ? "`+` adds Longs (strings cannot be concatenated)" : NULL;
      answer x = expect(c, prior, e->u.op.a, &cedar_validate_vt_long_type, hint);
      answer y = expect(c, prior, e->u.op.b, &cedar_validate_vt_long_type, hint);
      a = (answer){&cedar_validate_vt_long_type, x.ok && y.ok && x.type && y.type, NULL};
      break;
    }
    case CX_IN:
      a = typecheck_in(c, prior, e, e->u.op.a, e->u.op.b);
      break;
    case CX_CONTAINS:
    case CX_CONTAINS_ALL:
    case CX_CONTAINS_ANY:
      a = typecheck_set_operation(c, prior, e);
      break;
    case CX_IS_EMPTY: {
      answer x = expect(c, prior, e->u.op.a, &cedar_validate_vt_any_set_type, NULL);
      a = (answer){&cedar_validate_vt_bool_type, x.ok && x.type, NULL};
      break;
    }
    case CX_GET_TAG:
    case CX_HAS_TAG:
      a = typecheck_tag(c, prior, e);
      break;
    case CX_GET_ATTR:
    case CX_HAS_ATTR:
      a = typecheck_attribute(c, prior, e);
      break;
    case CX_LIKE: {
      answer x = expect(c, prior, e->u.op.a, &cedar_validate_vt_string_type, NULL);
      a = (answer){&cedar_validate_vt_bool_type, x.ok && x.type, NULL};
      break;
    }
    case CX_IS:
      a = typecheck_is(c, prior, e);
      break;
    case CX_SET:
      a = typecheck_set(c, prior, e);
      break;
    case CX_RECORD:
      a = typecheck_record(c, prior, e);
      break;
    case CX_CALL:
      a = typecheck_call(c, prior, e);
      break;
    default:
      error_at(c, e, "unsupported expression");
      a = failure(NULL);
  }
  c->depth--;
  return a;
}

const vtype *cedar_validate_typecheck_condition(checker *c, const cedar_expr *condition, bool *typechecked) {
  answer a = expect(c, NULL, condition, &cedar_validate_vt_bool_type, NULL);
  *typechecked = a.ok && !c->failed_alloc;
  return a.type;
}
