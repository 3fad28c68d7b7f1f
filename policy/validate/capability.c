/* Capabilities of the typechecker (cedar-policy validator types/capability.rs): which attribute or tag
 * accesses a guard (`e has a`, `e.hasTag(k)`) made safe, keyed by the guarded expression's structure. */
#include <string.h>

#include "policy/eval/eval.h"
#include "policy/validate/validate_internal.h"

/* ---------------- structural equality of expressions (source positions ignored) ---------------- */

bool cedar_validate_expr_equal(const cedar_expr *a, const cedar_expr *b, int depth) {
  if (a == b) return true;
  if (!a || !b || a->kind != b->kind || depth > MAX_TYPECHECK_DEPTH) return false;
  switch ((cedar_expr_kind)a->kind) {
    case CX_BOOL:
      return a->u.boolean == b->u.boolean;
    case CX_LONG:
      return a->u.number == b->u.number;
    case CX_STRING:
    case CX_UNKNOWN:
      return cedar_str_eq(a->u.s, b->u.s);
    case CX_ENTITY:
      return cedar_euid_eq(&a->u.uid, &b->u.uid);
    case CX_VAR:
    case CX_SLOT:
      return a->var == b->var;
    case CX_VALUE:
      return cedar_value_eq(a->u.value, b->u.value);
    case CX_SET:
    case CX_RECORD:
    case CX_CALL:
      if (a->u.list.count != b->u.list.count) return false;
      if (a->kind == CX_CALL && !cedar_str_eq(a->u.list.name, b->u.list.name)) return false;
      for (size_t i = 0; i < a->u.list.count; i++) {
        if (a->kind == CX_RECORD && !cedar_str_eq(a->u.list.keys[i], b->u.list.keys[i])) return false;
        if (!cedar_validate_expr_equal(a->u.list.items[i], b->u.list.items[i], depth + 1)) return false;
      }
      return true;
    case CX_LIKE:
      if (a->u.op.pattern.length != b->u.op.pattern.length) return false;
      if (a->u.op.pattern.length && memcmp(a->u.op.pattern.elements, b->u.op.pattern.elements,
                                           a->u.op.pattern.length * sizeof(int16_t)))
        return false;
      break;
    case CX_GET_ATTR:
    case CX_HAS_ATTR:
    case CX_IS:
      if (!cedar_str_eq(a->u.op.name, b->u.op.name)) return false;
      break;
    default:
      break;
  }
  return cedar_validate_expr_equal(a->u.op.a, b->u.op.a, depth + 1) &&
         cedar_validate_expr_equal(a->u.op.b, b->u.op.b, depth + 1) &&
         cedar_validate_expr_equal(a->u.op.c, b->u.op.c, depth + 1);
}

/* ---------------- capabilities ---------------- */

const cap *cedar_validate_cap_single(checker *c, const cedar_expr *on, const char *attr,
                                     const cedar_expr *tag) {
  cap *k = cedar_schema_arena_alloc(c->arena, sizeof *k);
  if (!k) {
    c->failed_alloc = true;
    return NULL;
  }
  k->on = on;
  k->attr = attr;
  k->tag = tag;
  return k;
}

bool cedar_validate_cap_contains(const cap *caps, const cedar_expr *on, const char *attr,
                                 const cedar_expr *tag) {
  for (const cap *k = caps; k; k = k->next) {
    if (attr ? (!k->attr || strcmp(k->attr, attr) != 0)
             : (k->attr || !cedar_validate_expr_equal(k->tag, tag, 0)))
      continue;
    if (cedar_validate_expr_equal(k->on, on, 0)) return true;
  }
  return false;
}

/* A copy of capability `k` in the checker's arena, in front of `list`: the new list, or NULL (and
 * c->failed_alloc set) when the arena is exhausted. */
static const cap *cap_push(checker *c, const cap *k, const cap *list) {
  cap *copy = cedar_schema_arena_alloc(c->arena, sizeof *copy);
  if (!copy) {
    c->failed_alloc = true;
    return NULL;
  }
  *copy = *k;
  copy->next = list;
  return copy;
}

const cap *cedar_validate_cap_union(checker *c, const cap *a, const cap *b) {
  if (!a) return b;
  if (!b) return a;
  const cap *out = b;
  for (const cap *k = a; k; k = k->next) {
    const cap *pushed = cap_push(c, k, out);
    if (!pushed) return out;
    out = pushed;
  }
  return out;
}

const cap *cedar_validate_cap_intersect(checker *c, const cap *a, const cap *b) {
  const cap *out = NULL;
  for (const cap *k = a; k; k = k->next) {
    if (!cedar_validate_cap_contains(b, k->on, k->attr, k->tag)) continue;
    const cap *pushed = cap_push(c, k, out);
    if (!pushed) return out;
    out = pushed;
  }
  return out;
}
