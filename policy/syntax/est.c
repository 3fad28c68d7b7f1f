/* The JSON policy format (EST; Cedar "JSON policy format") both ways, and the policy-set JSON
 * ({"staticPolicies", "templates", "templateLinks"}). */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/syntax/syntax.h"
#include "policy/syntax/value.h"

/* ---------------- writing ---------------- */

static json_t *uid_json(const cedar_euid *uid) {
  return json_pack("{s:s%,s:s%}", "type", uid->type.ptr, uid->type.len, "id", uid->id.ptr, uid->id.len);
}

static const char *const var_names[] = {"principal", "action", "resource", "context"};

static json_t *binary(const char *op, const cedar_expr *e) {
  return json_pack("{s:{s:o,s:o}}", op, "left", cedar_expr_to_est(e->u.op.a), "right",
                   cedar_expr_to_est(e->u.op.b));
}

/* The EST keys of the binary operators (and the binary methods), both ways. */
static const struct {
  const char *name;
  cedar_expr_kind kind;
} est_binaries[] = {{"&&", CX_AND},
                    {"||", CX_OR},
                    {"==", CX_EQ},
                    {"!=", CX_NE},
                    {"<", CX_LT},
                    {"<=", CX_LE},
                    {">", CX_GT},
                    {">=", CX_GE},
                    {"+", CX_ADD},
                    {"-", CX_SUB},
                    {"*", CX_MUL},
                    {"in", CX_IN},
                    {"contains", CX_CONTAINS},
                    {"containsAll", CX_CONTAINS_ALL},
                    {"containsAny", CX_CONTAINS_ANY},
                    {"getTag", CX_GET_TAG},
                    {"hasTag", CX_HAS_TAG}};

static const char *binary_name(cedar_expr_kind k) {
  for (size_t i = 0; i < sizeof est_binaries / sizeof *est_binaries; i++)
    if (est_binaries[i].kind == k) return est_binaries[i].name;
  return NULL;
}

json_t *cedar_expr_to_est(const cedar_expr *e) {
  const char *op;
  switch ((cedar_expr_kind)e->kind) {
    case CX_BOOL:
      return json_pack("{s:b}", "Value", e->u.boolean);
    case CX_LONG:
      return json_pack("{s:I}", "Value", (json_int_t)e->u.number);
    case CX_STRING:
      return json_pack("{s:s%}", "Value", e->u.s.ptr, e->u.s.len);
    case CX_ENTITY:
      return json_pack("{s:{s:o}}", "Value", "__entity", uid_json(&e->u.uid));
    case CX_VAR:
      return json_pack("{s:s}", "Var", var_names[e->var & 3]);
    case CX_SLOT:
      return json_pack("{s:s}", "Slot", e->var == 0 ? "?principal" : "?resource");
    case CX_UNKNOWN:
      return json_pack("{s:{s:s%}}", "Unknown", "name", e->u.s.ptr, e->u.s.len);
    case CX_VALUE:
      return json_pack("{s:o}", "Value", cedar_value_to_json(e->u.value));
    case CX_NOT:
      return json_pack("{s:{s:o}}", "!", "arg", cedar_expr_to_est(e->u.op.a));
    case CX_NEG:
      return json_pack("{s:{s:o}}", "neg", "arg", cedar_expr_to_est(e->u.op.a));
    case CX_IS_EMPTY:
      return json_pack("{s:{s:o}}", "isEmpty", "arg", cedar_expr_to_est(e->u.op.a));
    case CX_IF:
      return json_pack("{s:{s:o,s:o,s:o}}", "if-then-else", "if", cedar_expr_to_est(e->u.op.a), "then",
                       cedar_expr_to_est(e->u.op.b), "else", cedar_expr_to_est(e->u.op.c));
    case CX_GET_ATTR:
    case CX_HAS_ATTR:
      return json_pack("{s:{s:o,s:s%}}", e->kind == CX_GET_ATTR ? "." : "has", "left",
                       cedar_expr_to_est(e->u.op.a), "attr", e->u.op.name.ptr, e->u.op.name.len);
    case CX_LIKE: {
      json_t *pattern = json_array();
      for (size_t i = 0; pattern && i < e->u.op.pattern.length; i++) {
        int16_t c = e->u.op.pattern.elements[i];
        if (c == CEDAR_PATTERN_STAR) {
          json_array_append_new(pattern, json_string("Wildcard"));
          continue;
        }
        /* one Literal per character (UTF-8 sequence) */
        size_t j = i + 1;
        while (j < e->u.op.pattern.length && (e->u.op.pattern.elements[j] & 0xc0) == 0x80) j++;
        char buf[8];
        size_t n = 0;
        for (size_t k = i; k < j && n < sizeof buf; k++) buf[n++] = (char)e->u.op.pattern.elements[k];
        json_array_append_new(pattern, json_pack("{s:s%}", "Literal", buf, n));
        i = j - 1;
      }
      return json_pack("{s:{s:o,s:o}}", "like", "left", cedar_expr_to_est(e->u.op.a), "pattern", pattern);
    }
    case CX_IS: {
      json_t *o = json_pack("{s:o,s:s%}", "left", cedar_expr_to_est(e->u.op.a), "entity_type",
                            e->u.op.name.ptr, e->u.op.name.len);
      if (o && e->u.op.b) json_object_set_new(o, "in", cedar_expr_to_est(e->u.op.b));
      return json_pack("{s:o}", "is", o);
    }
    case CX_SET: {
      json_t *a = json_array();
      for (size_t i = 0; a && i < e->u.list.count; i++)
        json_array_append_new(a, cedar_expr_to_est(e->u.list.items[i]));
      return json_pack("{s:o}", "Set", a);
    }
    case CX_RECORD: {
      json_t *o = json_object();
      for (size_t i = 0; o && i < e->u.list.count; i++)
        json_object_setn_new(o, e->u.list.keys[i].ptr, e->u.list.keys[i].len,
                             cedar_expr_to_est(e->u.list.items[i]));
      return json_pack("{s:o}", "Record", o);
    }
    case CX_CALL: {
      json_t *a = json_array();
      for (size_t i = 0; a && i < e->u.list.count; i++)
        json_array_append_new(a, cedar_expr_to_est(e->u.list.items[i]));
      json_t *o = json_object();
      if (o) json_object_setn_new(o, e->u.list.name.ptr, e->u.list.name.len, a);
      return o;
    }
    default:
      if ((op = binary_name((cedar_expr_kind)e->kind))) return binary(op, e);
      return json_null();
  }
}

static json_t *scope_target(const cedar_scope *s, const char *slot) {
  return s->slot ? json_string(slot) : uid_json(&s->uid);
}

static json_t *scope_json(const cedar_scope *s, const char *slot) {
  const char *key = s->slot ? "slot" : "entity";
  switch ((cedar_scope_op)s->op) {
    case CEDAR_SCOPE_ANY:
      return json_pack("{s:s}", "op", "All");
    case CEDAR_SCOPE_EQ:
    case CEDAR_SCOPE_IN:
      return json_pack("{s:s,s:o}", "op", s->op == CEDAR_SCOPE_EQ ? "==" : "in", key, scope_target(s, slot));
    case CEDAR_SCOPE_IS:
      return json_pack("{s:s,s:s%}", "op", "is", "entity_type", s->type.ptr, s->type.len);
    case CEDAR_SCOPE_IS_IN:
      return json_pack("{s:s,s:s%,s:{s:o}}", "op", "is", "entity_type", s->type.ptr, s->type.len, "in", key,
                       scope_target(s, slot));
    case CEDAR_SCOPE_IN_LIST: {
      json_t *a = json_array();
      for (size_t i = 0; a && i < s->list_count; i++) json_array_append_new(a, uid_json(&s->list[i]));
      return json_pack("{s:s,s:o}", "op", "in", "entities", a);
    }
  }
  return json_null();
}

json_t *cedar_policy_to_est(const cedar_policy *p) {
  json_t *conds = json_array();
  for (size_t i = 0; conds && i < p->condition_count; i++)
    json_array_append_new(conds, json_pack("{s:s,s:o}", "kind", p->conditions[i].is_when ? "when" : "unless",
                                           "body", cedar_expr_to_est(p->conditions[i].body)));
  json_t *o =
      json_pack("{s:s,s:o,s:o,s:o,s:o}", "effect", p->effect == CEDAR_PERMIT ? "permit" : "forbid",
                "principal", scope_json(&p->principal, "?principal"), "action", scope_json(&p->action, NULL),
                "resource", scope_json(&p->resource, "?resource"), "conditions", conds);
  if (o && p->annotation_count) {
    json_t *ann = json_object();
    for (size_t i = 0; ann && i < p->annotation_count; i++)
      json_object_setn_new(ann, p->annotations[i].key.ptr, p->annotations[i].key.len,
                           p->annotations[i].has_value
                               ? json_stringn(p->annotations[i].value.ptr, p->annotations[i].value.len)
                               : json_null());
    json_object_set_new(o, "annotations", ann);
  }
  return o;
}

static char *dump(json_t *j) {
  if (!j) return NULL;
  char *s = json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
  json_decref(j);
  return s;
}

char *cedar_policy_to_json(const cedar_policy *policy) {
  return dump(cedar_policy_to_est(policy));
}

char *cedar_policy_set_to_json(const cedar_policy_set *set) {
  json_t *st = json_object(), *tp = json_object(), *links = json_array();
  for (size_t i = 0; i < set->count; i++) {
    const cedar_policy *p = set->policies[i];
    if (p->template_id) {
      json_t *values = json_object();
      const cedar_policy *t = cedar_policy_set_find(set, p->template_id);
      if (t && t->principal.slot) json_object_set_new(values, "?principal", uid_json(&p->principal.uid));
      if (t && t->resource.slot) json_object_set_new(values, "?resource", uid_json(&p->resource.uid));
      json_array_append_new(
          links, json_pack("{s:s,s:s,s:o}", "templateId", p->template_id, "newId", p->id, "values", values));
    } else {
      json_object_set_new(p->is_template ? tp : st, p->id, cedar_policy_to_est(p));
    }
  }
  return dump(json_pack("{s:o,s:o,s:o}", "staticPolicies", st, "templates", tp, "templateLinks", links));
}

/* ---------------- reading ---------------- */

typedef struct est_reader {
  cedar_arena *arena;
  const char *file;
  const char *id;
  cedar_diagnostic *diag;
  int error;
} est_reader;

__attribute__((format(printf, 2, 3))) static void *est_fail(est_reader *r, const char *format, ...) {
  if (r->error) return NULL;
  r->error = -EINVAL;
  char msg[400];
  va_list ap;
  va_start(ap, format);
  vsnprintf(msg, sizeof msg, format, ap);
  va_end(ap);
  cedar_diag_set(r->diag, r->file, 0, 0, r->id, "JSON policy: %s", msg);
  return NULL;
}

static bool est_str(est_reader *r, json_t *j, cedar_str *out) {
  if (!json_is_string(j)) return est_fail(r, "expected a string"), false;
  if (cedar_json_copy_bytes(r->arena, json_string_value(j), json_string_length(j), out) < 0)
    return r->error = -ENOMEM, false;
  return true;
}

static bool est_uid(est_reader *r, json_t *j, cedar_euid *uid) {
  if (json_is_object(j) && json_object_get(j, "__entity")) j = json_object_get(j, "__entity");
  if (!json_is_object(j) || !est_str(r, json_object_get(j, "type"), &uid->type) ||
      !est_str(r, json_object_get(j, "id"), &uid->id))
    return est_fail(r, "expected an entity uid {\"type\": ..., \"id\": ...}"), false;
  if (!cedar_is_name(uid->type)) return est_fail(r, "invalid entity type `%s`", uid->type.ptr), false;
  return true;
}

static cedar_expr *est_expr(est_reader *r, json_t *j, unsigned depth);

static cedar_expr *node(est_reader *r, cedar_expr_kind kind, cedar_expr *a, cedar_expr *b, cedar_expr *c) {
  cedar_expr *e = cedar_expr_new(r->arena, kind, a, b, c);
  if (!e) r->error = -ENOMEM;
  return e;
}

static cedar_expr *est_value(est_reader *r, json_t *v, unsigned depth) {
  if (depth > CEDAR_MAX_DEPTH) return est_fail(r, "nested deeper than %d levels", CEDAR_MAX_DEPTH);
  cedar_expr *e;
  switch (json_typeof(v)) {
    case JSON_TRUE:
    case JSON_FALSE:
      if ((e = node(r, CX_BOOL, NULL, NULL, NULL))) e->u.boolean = json_is_true(v);
      return e;
    case JSON_INTEGER:
      if ((e = node(r, CX_LONG, NULL, NULL, NULL))) e->u.number = json_integer_value(v);
      return e;
    case JSON_STRING:
      if ((e = node(r, CX_STRING, NULL, NULL, NULL)) && !est_str(r, v, &e->u.s)) return NULL;
      return e;
    case JSON_OBJECT:
      if (json_object_get(v, "__entity")) {
        if ((e = node(r, CX_ENTITY, NULL, NULL, NULL)) && !est_uid(r, v, &e->u.uid)) return NULL;
        return e;
      }
      if (json_object_get(v, "__extn")) {
        json_t *x = json_object_get(v, "__extn");
        json_t *fn = json_object_get(x, "fn"), *arg = json_object_get(x, "arg");
        if (!json_is_string(fn) || !arg) return est_fail(r, "bad __extn value");
        const cedar_extension_function *f = cedar_extension_function_find(json_string_value(fn));
        if (!f || !f->is_constructor)
          return est_fail(r, "unknown extension function `%s`", json_string_value(fn));
        cedar_expr *a = est_value(r, arg, depth + 1);
        if (!a || !(e = node(r, CX_CALL, NULL, NULL, NULL))) return NULL;
        e->u.list.items = cedar_arena_alloc(r->arena, sizeof(cedar_expr *));
        if (!e->u.list.items) return r->error = -ENOMEM, NULL;
        e->u.list.items[0] = a;
        e->u.list.count = 1;
        e->u.list.function = f;
        e->u.list.name = (cedar_str){f->name, strlen(f->name)};
        e->depth = (uint16_t)(a->depth + 1);
        return e;
      }
      /* a record value */
      {
        json_t *rec = json_object();
        const char *k;
        json_t *item;
        json_object_foreach(v, k, item) json_object_set_new(rec, k, json_pack("{s:O}", "Value", item));
        json_t *wrapped = json_pack("{s:o}", "Record", rec);
        e = est_expr(r, wrapped, depth);
        json_decref(wrapped);
        return e;
      }
    case JSON_ARRAY: {
      json_t *set = json_array();
      for (size_t i = 0; i < json_array_size(v); i++)
        json_array_append_new(set, json_pack("{s:O}", "Value", json_array_get(v, i)));
      json_t *wrapped = json_pack("{s:o}", "Set", set);
      e = est_expr(r, wrapped, depth);
      json_decref(wrapped);
      return e;
    }
    default:
      return est_fail(r, "unsupported literal value");
  }
}

static cedar_expr *est_expr(est_reader *r, json_t *j, unsigned depth) {
  if (depth > CEDAR_MAX_DEPTH) {
    est_fail(r, "nested deeper than %d levels", CEDAR_MAX_DEPTH);
    r->error = -E2BIG;
    return NULL;
  }
  if (!json_is_object(j) || json_object_size(j) != 1)
    return est_fail(r, "expected an object with one key (an expression)");
  const char *key = json_object_iter_key(json_object_iter(j));
  json_t *v = json_object_iter_value(json_object_iter(j));
  cedar_expr *e;
  if (strcmp(key, "Value") == 0) return est_value(r, v, depth + 1);
  if (strcmp(key, "Var") == 0) {
    for (int i = 0; i < 4; i++)
      if (json_is_string(v) && strcmp(json_string_value(v), var_names[i]) == 0) {
        if ((e = node(r, CX_VAR, NULL, NULL, NULL))) e->var = (uint8_t)i;
        return e;
      }
    return est_fail(r, "unknown variable");
  }
  if (strcmp(key, "Slot") == 0) {
    const char *s = json_string_value(v);
    if (!s || (strcmp(s, "?principal") && strcmp(s, "?resource"))) return est_fail(r, "unknown slot");
    if ((e = node(r, CX_SLOT, NULL, NULL, NULL)))
      e->var = s[1] == 'p' ? CEDAR_VAR_PRINCIPAL : CEDAR_VAR_RESOURCE;
    return e;
  }
  if (strcmp(key, "Unknown") == 0) {
    if ((e = node(r, CX_UNKNOWN, NULL, NULL, NULL)) && !est_str(r, json_object_get(v, "name"), &e->u.s))
      return NULL;
    return e;
  }
  if (strcmp(key, "!") == 0 || strcmp(key, "neg") == 0 || strcmp(key, "isEmpty") == 0) {
    cedar_expr *a = est_expr(r, json_object_get(v, "arg"), depth + 1);
    return a ? node(r, key[0] == '!' ? CX_NOT : key[0] == 'n' ? CX_NEG : CX_IS_EMPTY, a, NULL, NULL) : NULL;
  }
  for (size_t i = 0; i < sizeof est_binaries / sizeof *est_binaries; i++) {
    if (strcmp(key, est_binaries[i].name)) continue;
    cedar_expr *a = est_expr(r, json_object_get(v, "left"), depth + 1);
    cedar_expr *b = a ? est_expr(r, json_object_get(v, "right"), depth + 1) : NULL;
    return b ? node(r, est_binaries[i].kind, a, b, NULL) : NULL;
  }
  if (strcmp(key, "if-then-else") == 0) {
    cedar_expr *a = est_expr(r, json_object_get(v, "if"), depth + 1);
    cedar_expr *b = a ? est_expr(r, json_object_get(v, "then"), depth + 1) : NULL;
    cedar_expr *c = b ? est_expr(r, json_object_get(v, "else"), depth + 1) : NULL;
    return c ? node(r, CX_IF, a, b, c) : NULL;
  }
  if (strcmp(key, ".") == 0 || strcmp(key, "has") == 0) {
    cedar_expr *a = est_expr(r, json_object_get(v, "left"), depth + 1);
    if (!a) return NULL;
    json_t *attr = json_object_get(v, "attr");
    if (key[0] == 'h' && json_is_array(attr) && json_array_size(attr) > 0) {
      /* extended `has` path: e has a.b == e has a && e.a has b */
      cedar_expr *acc = NULL, *cur = a;
      for (size_t i = 0; i < json_array_size(attr); i++) {
        cedar_str name;
        if (!est_str(r, json_array_get(attr, i), &name)) return NULL;
        cedar_expr *h = node(r, CX_HAS_ATTR, cur, NULL, NULL);
        if (!h) return NULL;
        h->u.op.name = name;
        acc = acc ? node(r, CX_AND, acc, h, NULL) : h;
        cedar_expr *g = node(r, CX_GET_ATTR, cur, NULL, NULL);
        if (!acc || !g) return NULL;
        g->u.op.name = name;
        cur = g;
      }
      return acc;
    }
    if ((e = node(r, key[0] == '.' ? CX_GET_ATTR : CX_HAS_ATTR, a, NULL, NULL)) &&
        !est_str(r, attr, &e->u.op.name))
      return NULL;
    return e;
  }
  if (strcmp(key, "like") == 0) {
    cedar_expr *a = est_expr(r, json_object_get(v, "left"), depth + 1);
    json_t *pat = json_object_get(v, "pattern");
    if (!a) return NULL;
    if (!(e = node(r, CX_LIKE, a, NULL, NULL))) return NULL;
    size_t total = 0;
    if (json_is_string(pat))
      return est_fail(r, "`pattern` must be an array of \"Wildcard\" and {\"Literal\": ...}");
    for (size_t i = 0; i < json_array_size(pat); i++) {
      json_t *p = json_array_get(pat, i);
      total += json_is_string(p) ? 1 : json_string_length(json_object_get(p, "Literal"));
    }
    int16_t *el = cedar_arena_alloc(r->arena, (total + 1) * sizeof *el);
    if (!el) return r->error = -ENOMEM, NULL;
    size_t n = 0;
    for (size_t i = 0; i < json_array_size(pat); i++) {
      json_t *p = json_array_get(pat, i);
      if (json_is_string(p) && strcmp(json_string_value(p), "Wildcard") == 0) {
        el[n++] = CEDAR_PATTERN_STAR;
      } else if (json_is_string(json_object_get(p, "Literal"))) {
        cedar_str lit;
        if (!est_str(r, json_object_get(p, "Literal"), &lit)) return NULL;
        for (size_t k = 0; k < lit.len; k++) el[n++] = (int16_t)(unsigned char)lit.ptr[k];
      } else {
        return est_fail(r, "bad `like` pattern element");
      }
    }
    e->u.op.pattern = (cedar_pattern){el, n};
    return e;
  }
  if (strcmp(key, "is") == 0) {
    cedar_expr *a = est_expr(r, json_object_get(v, "left"), depth + 1);
    if (!a) return NULL;
    json_t *in = json_object_get(v, "in");
    cedar_expr *b = in ? est_expr(r, in, depth + 1) : NULL;
    if (in && !b) return NULL;
    if ((e = node(r, CX_IS, a, b, NULL)) && !est_str(r, json_object_get(v, "entity_type"), &e->u.op.name))
      return NULL;
    if (e && !cedar_is_name(e->u.op.name)) return est_fail(r, "invalid entity type in `is`");
    return e;
  }
  if (strcmp(key, "Set") == 0 || strcmp(key, "Record") == 0) {
    bool set = key[0] == 'S';
    if (set ? !json_is_array(v) : !json_is_object(v)) return est_fail(r, "bad `%s`", key);
    size_t n = set ? json_array_size(v) : json_object_size(v);
    if (!(e = node(r, set ? CX_SET : CX_RECORD, NULL, NULL, NULL))) return NULL;
    e->u.list.items = cedar_arena_alloc(r->arena, (n + 1) * sizeof *e->u.list.items);
    if (!set) e->u.list.keys = cedar_arena_alloc(r->arena, (n + 1) * sizeof *e->u.list.keys);
    if (!e->u.list.items || (!set && !e->u.list.keys)) return r->error = -ENOMEM, NULL;
    unsigned d = 0;
    if (set) {
      for (size_t i = 0; i < n; i++)
        if (!(e->u.list.items[i] = est_expr(r, json_array_get(v, i), depth + 1))) return NULL;
    } else {
      size_t i = 0;
      for (void *it = json_object_iter(v); it; it = json_object_iter_next(v, it), i++) {
        if (!(e->u.list.items[i] = est_expr(r, json_object_iter_value(it), depth + 1))) return NULL;
        if (cedar_json_copy_bytes(r->arena, json_object_iter_key(it), json_object_iter_key_len(it),
                                  &e->u.list.keys[i]) < 0)
          return r->error = -ENOMEM, NULL;
      }
    }
    for (size_t i = 0; i < n; i++)
      if (e->u.list.items[i]->depth > d) d = e->u.list.items[i]->depth;
    e->u.list.count = n;
    e->depth = (uint16_t)(d + 1);
    return e;
  }
  if (strcmp(key, "unknown") == 0 && json_is_array(v)) {
    /* {"unknown": [{"Value": "name"}]}: upstream's partial-evaluation extension call */
    json_t *arg = json_object_get(json_array_get(v, 0), "Value");
    if ((e = node(r, CX_UNKNOWN, NULL, NULL, NULL)) && json_is_string(arg) && !est_str(r, arg, &e->u.s))
      return NULL;
    if (e && !json_is_string(arg)) e->u.s = (cedar_str){"", 0};
    return e;
  }
  /* extension function or method: {"name": [args]} */
  const cedar_extension_function *f = cedar_extension_function_find(key);
  if (!f) return est_fail(r, "unknown expression kind `%s`", key);
  if (!json_is_array(v)) return est_fail(r, "arguments of `%s` must be an array", key);
  size_t n = json_array_size(v);
  if (!(e = node(r, CX_CALL, NULL, NULL, NULL))) return NULL;
  e->u.list.items = cedar_arena_alloc(r->arena, (n + 1) * sizeof *e->u.list.items);
  if (!e->u.list.items) return r->error = -ENOMEM, NULL;
  unsigned d = 0;
  for (size_t i = 0; i < n; i++) {
    if (!(e->u.list.items[i] = est_expr(r, json_array_get(v, i), depth + 1))) return NULL;
    if (e->u.list.items[i]->depth > d) d = e->u.list.items[i]->depth;
  }
  e->u.list.count = n;
  e->u.list.function = f;
  e->u.list.name = (cedar_str){f->name, strlen(f->name)};
  e->depth = (uint16_t)(d + 1);
  return e;
}

static bool est_scope(est_reader *r, json_t *j, cedar_scope *s, const char *var) {
  const char *op = json_string_value(json_object_get(j, "op"));
  if (!op) return est_fail(r, "`%s` needs an `op`", var), false;
  bool is_action = strcmp(var, "action") == 0;
  char slot[16];
  snprintf(slot, sizeof slot, "?%s", var);
  json_t *target = j;
  if (strcmp(op, "All") == 0) {
    s->op = CEDAR_SCOPE_ANY;
    return true;
  }
  if (strcmp(op, "is") == 0 && !is_action) {
    if (!est_str(r, json_object_get(j, "entity_type"), &s->type) || !cedar_is_name(s->type))
      return est_fail(r, "`%s`: bad `entity_type`", var), false;
    target = json_object_get(j, "in");
    s->op = target ? CEDAR_SCOPE_IS_IN : CEDAR_SCOPE_IS;
    if (!target) return true;
  } else if (strcmp(op, "==") == 0) {
    s->op = CEDAR_SCOPE_EQ;
  } else if (strcmp(op, "in") == 0) {
    s->op = CEDAR_SCOPE_IN;
    json_t *list = json_object_get(j, "entities");
    if (is_action && list) {
      s->op = CEDAR_SCOPE_IN_LIST;
      s->list_count = json_array_size(list);
      s->list = cedar_arena_alloc(r->arena, (s->list_count + 1) * sizeof *s->list);
      if (!s->list) return r->error = -ENOMEM, false;
      for (size_t i = 0; i < s->list_count; i++)
        if (!est_uid(r, json_array_get(list, i), &s->list[i])) return false;
      return true;
    }
  } else {
    return est_fail(r, "`%s`: unknown op `%s`", var, op), false;
  }
  json_t *sl = json_object_get(target, "slot");
  if (sl) {
    if (is_action || !json_is_string(sl) || strcmp(json_string_value(sl), slot))
      return est_fail(r, "`%s`: invalid slot", var), false;
    s->slot = true;
    return true;
  }
  return est_uid(r, json_object_get(target, "entity"), &s->uid);
}

int cedar_policy_from_est(cedar_policy_set *set, json_t *est, const char *id, const char *file,
                          cedar_policy **out, cedar_diagnostic *diag) {
  est_reader r = {.arena = set->arena, .file = file, .id = id, .diag = diag};
  cedar_policy *p = cedar_arena_alloc(set->arena, sizeof *p);
  if (!p) return -ENOMEM;
  p->id = cedar_arena_strndup(set->arena, id, strlen(id));
  p->file = file ? cedar_arena_strndup(set->arena, file, strlen(file)) : NULL;
  if (!p->id || (file && !p->file)) return -ENOMEM;
  const char *effect = json_string_value(json_object_get(est, "effect"));
  if (!json_is_object(est) || !effect || (strcmp(effect, "permit") && strcmp(effect, "forbid"))) {
    est_fail(&r, "expected an object with \"effect\": \"permit\" or \"forbid\"");
    return r.error;
  }
  p->effect = effect[0] == 'p' ? CEDAR_PERMIT : CEDAR_FORBID;
  if (!est_scope(&r, json_object_get(est, "principal"), &p->principal, "principal") ||
      !est_scope(&r, json_object_get(est, "action"), &p->action, "action") ||
      !est_scope(&r, json_object_get(est, "resource"), &p->resource, "resource"))
    return r.error;
  json_t *conds = json_object_get(est, "conditions");
  p->condition_count = json_array_size(conds);
  if (p->condition_count > CEDAR_MAX_CONDITIONS) {
    est_fail(&r, "more than %d conditions in one policy", CEDAR_MAX_CONDITIONS);
    return r.error;
  }
  p->conditions = cedar_arena_alloc(set->arena, (p->condition_count + 1) * sizeof *p->conditions);
  if (!p->conditions) return -ENOMEM;
  for (size_t i = 0; i < p->condition_count; i++) {
    json_t *c = json_array_get(conds, i);
    const char *kind = json_string_value(json_object_get(c, "kind"));
    if (!kind || (strcmp(kind, "when") && strcmp(kind, "unless"))) {
      est_fail(&r, "condition #%zu: `kind` must be \"when\" or \"unless\"", i);
      return r.error;
    }
    p->conditions[i].is_when = kind[0] == 'w';
    if (!(p->conditions[i].body = est_expr(&r, json_object_get(c, "body"), 0)))
      return r.error ? r.error : -EINVAL;
  }
  json_t *ann = json_object_get(est, "annotations");
  p->annotation_count = json_object_size(ann);
  p->annotations = cedar_arena_alloc(set->arena, (p->annotation_count + 1) * sizeof *p->annotations);
  if (!p->annotations) return -ENOMEM;
  size_t i = 0;
  for (void *it = ann ? json_object_iter(ann) : NULL; it; it = json_object_iter_next(ann, it), i++) {
    cedar_annotation *a = &p->annotations[i];
    const char *k = json_object_iter_key(it);
    a->key = (cedar_str){cedar_arena_strndup(set->arena, k, strlen(k)), strlen(k)};
    json_t *v = json_object_iter_value(it);
    if (json_is_string(v)) {
      if (!est_str(&r, v, &a->value)) return r.error;
      a->has_value = true;
    } else {
      a->value = (cedar_str){"", 0};
    }
  }
  p->is_template = p->principal.slot || p->resource.slot;
  *out = p;
  return 0;
}

static int add_est(cedar_policy_set *set, json_t *est, const char *id, const char *file, bool want_template,
                   cedar_diagnostic *diag) {
  if (cedar_policy_set_find(set, id)) {
    cedar_diag_set(diag, file, 0, 0, id, "duplicate policy id");
    return -EINVAL;
  }
  cedar_policy *p;
  int r = cedar_policy_from_est(set, est, id, file, &p, diag);
  if (r < 0) return r;
  if (p->is_template != want_template) {
    cedar_diag_set(diag, file, 0, 0, id,
                   want_template ? "a template must have a slot" : "a static policy cannot have slots");
    return -EINVAL;
  }
  return cedar_policy_set_append(set, p);
}

static bool link_uid(cedar_arena *arena, json_t *j, cedar_uid_ref *ref) {
  if (json_is_object(j) && json_object_get(j, "__entity")) j = json_object_get(j, "__entity");
  ref->type = json_string_value(json_object_get(j, "type"));
  json_t *id = json_object_get(j, "id");
  cedar_str decoded;
  if (!ref->type || !json_is_string(id) ||
      cedar_json_copy_bytes(arena, json_string_value(id), json_string_length(id), &decoded) < 0)
    return false;
  ref->id = decoded.ptr;
  ref->id_length = decoded.len;
  if (decoded.len == 0) ref->id = "";
  return true;
}

int cedar_policy_set_parse_json(const char *text, size_t length, const char *file, cedar_policy_set **out,
                                cedar_diagnostic *diag) {
  json_error_t jerr;
  json_t *root = cedar_json_loadb(text, length, &jerr);
  if (!root) {
    cedar_diag_set(diag, file, (unsigned)(jerr.line > 0 ? jerr.line : 0),
                   (unsigned)(jerr.column > 0 ? jerr.column : 0), NULL, "invalid JSON: %s", jerr.text);
    return -EINVAL;
  }
  cedar_policy_set *set;
  int r = cedar_policy_set_new(&set);
  if (r < 0) {
    json_decref(root);
    return r;
  }
  if (json_object_get(root, "effect")) {
    cedar_policy *p;
    r = cedar_policy_from_est(set, root, "policy0", file, &p, diag);
    if (r >= 0) r = cedar_policy_set_append(set, p);
  } else if (json_is_object(root)) {
    const char *key;
    json_t *v;
    json_object_foreach(root, key, v) {
      if (strcmp(key, "staticPolicies") && strcmp(key, "templates") && strcmp(key, "templateLinks")) {
        cedar_diag_set(diag, file, 0, 0, NULL, "policy set JSON: unexpected field `%s`", key);
        r = -EINVAL;
      }
    }
    json_t *st = json_object_get(root, "staticPolicies"), *tp = json_object_get(root, "templates");
    json_object_foreach(st, key, v) if (r >= 0) r = add_est(set, v, key, file, false, diag);
    json_object_foreach(tp, key, v) if (r >= 0) r = add_est(set, v, key, file, true, diag);
    json_t *links = json_object_get(root, "templateLinks");
    for (size_t i = 0; r >= 0 && i < json_array_size(links); i++) {
      json_t *l = json_array_get(links, i);
      const char *tid = json_string_value(json_object_get(l, "templateId"));
      const char *nid = json_string_value(json_object_get(l, "newId"));
      json_t *values = json_object_get(l, "values");
      cedar_uid_ref pr, rs;
      bool has_p = json_object_get(values, "?principal") != NULL,
           has_r = json_object_get(values, "?resource") != NULL;
      if (!tid || !nid || (has_p && !link_uid(set->arena, json_object_get(values, "?principal"), &pr)) ||
          (has_r && !link_uid(set->arena, json_object_get(values, "?resource"), &rs))) {
        cedar_diag_set(diag, file, 0, 0, NULL, "templateLinks[%zu]: expected templateId, newId and values",
                       i);
        r = -EINVAL;
        break;
      }
      r = cedar_policy_set_link(set, tid, nid, has_p ? &pr : NULL, has_r ? &rs : NULL, diag);
    }
  } else {
    cedar_diag_set(diag, file, 0, 0, NULL, "JSON policies must be an object");
    r = -EINVAL;
  }
  json_decref(root);
  if (r < 0) {
    cedar_policy_set_free(set);
    return r;
  }
  *out = set;
  return 0;
}
