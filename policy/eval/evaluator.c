/* The Cedar evaluator (Cedar "Operators and functions", "Policy evaluation"): short-circuit && || if,
 * type errors, missing attributes/entities, overflow and extension errors make the policy erroneous. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/eval/eval.h"

#define EVAL_ERROR(ev, ...) (snprintf((ev)->error, sizeof(ev)->error, __VA_ARGS__), -1)

static void euid_text(const cedar_euid *uid, char *buf, size_t size) {
  cedar_buf b = {0};
  cedar_print_euid(&b, uid);
  char *t = cedar_buf_finish(&b);
  snprintf(buf, size, "%s", t ? t : "?");
  free(t);
}

static int type_error(cedar_eval *ev, const char *expected, const cedar_value *got) {
  return EVAL_ERROR(ev, "type error: expected %s, got %s", expected, cedar_value_kind_name(got->kind));
}

void cedar_eval_init(cedar_eval *ev, cedar_arena *arena, const cedar_entities *entities,
                     const cedar_request *request) {
  memset(ev, 0, sizeof *ev);
  ev->arena = arena;
  ev->entities = entities;
  const cedar_uid_ref *refs[3] = {&request->principal, &request->action, &request->resource};
  int slots[3] = {CEDAR_VAR_PRINCIPAL, CEDAR_VAR_ACTION, CEDAR_VAR_RESOURCE};
  for (int i = 0; i < 3; i++) {
    cedar_value *v = &ev->vars[slots[i]];
    v->kind = CV_ENTITY;
    const char *type = refs[i]->type ? refs[i]->type : "";
    v->u.uid.type = (cedar_str){type, strlen(type)};
    const char *id = refs[i]->id ? refs[i]->id : "";
    v->u.uid.id = (cedar_str){id, refs[i]->id_length ? refs[i]->id_length : strlen(id)};
  }
  ev->vars[CEDAR_VAR_CONTEXT] = *cedar_context_value(request->context);
}

static bool entity_in(cedar_eval *ev, const cedar_euid *a, const cedar_euid *b) {
  if (cedar_euid_eq(a, b)) return true;
  const cedar_entity *e = ev->entities ? cedar_entities_find(ev->entities, a) : NULL;
  return e && cedar_entity_has_ancestor(e, b);
}

static bool set_contains(const cedar_value *set, const cedar_value *v) {
  size_t lo = 0, hi = set->u.set.count;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    int c = cedar_value_cmp(&set->u.set.items[mid], v);
    if (c == 0) return true;
    if (c < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  return false;
}

static int eval_bool(cedar_eval *ev, const cedar_expr *e, bool *out) {
  cedar_value v;
  int r = cedar_eval_expr(ev, e, &v);
  if (r < 0) return r;
  if (v.kind != CV_BOOL) return type_error(ev, "bool", &v);
  *out = v.u.boolean;
  return 0;
}

static int ext_kind_check(cedar_eval *ev, const cedar_value *v, cedar_extension_type t) {
  static const uint8_t kinds[] = {
      [CEDAR_EXT_TYPE_BOOL] = CV_BOOL,        [CEDAR_EXT_TYPE_LONG] = CV_LONG,
      [CEDAR_EXT_TYPE_STRING] = CV_STRING,    [CEDAR_EXT_TYPE_IPADDR] = CV_IPADDR,
      [CEDAR_EXT_TYPE_DECIMAL] = CV_DECIMAL,  [CEDAR_EXT_TYPE_DATETIME] = CV_DATETIME,
      [CEDAR_EXT_TYPE_DURATION] = CV_DURATION};
  if (v->kind == kinds[t]) return 0;
  return type_error(ev, cedar_extension_type_name(t), v);
}

static int call_extension(cedar_eval *ev, const cedar_expr *e, cedar_value *out) {
  const cedar_extension_function *fn = e->u.list.function;
  size_t n = e->u.list.count;
  cedar_value args[2];
  for (size_t i = 0; i < n; i++) {
    cedar_value v;
    int r = cedar_eval_expr(ev, e->u.list.items[i], &v);
    if (r < 0) return r;
    if (i < 2) args[i] = v;
  }
  if (n != fn->argument_count)
    return EVAL_ERROR(ev,
                      "wrong number of arguments provided to extension function `%s`: expected %u, got %zu",
                      fn->name, fn->argument_count, n);
  for (size_t i = 0; i < n; i++) {
    int r = ext_kind_check(ev, &args[i], fn->arguments[i]);
    if (r < 0) return r;
  }
  const char *name = fn->name;
  int r = 0;
  int64_t x = 0;
  if (fn->is_constructor) {
    cedar_str s = args[0].u.s;
    if (strcmp(name, "ip") == 0) {
      out->kind = CV_IPADDR;
      r = cedar_ipaddr_parse(s.ptr, s.len, &out->u.ip);
    } else if (strcmp(name, "decimal") == 0) {
      out->kind = CV_DECIMAL;
      r = cedar_decimal_parse(s.ptr, s.len, &out->u.number);
    } else if (strcmp(name, "datetime") == 0) {
      out->kind = CV_DATETIME;
      r = cedar_datetime_parse(s.ptr, s.len, &out->u.number);
    } else {
      out->kind = CV_DURATION;
      r = cedar_duration_parse(s.ptr, s.len, &out->u.number);
    }
    if (r < 0)
      return EVAL_ERROR(ev, "error while evaluating `%s` extension function: %s `%.*s`", name,
                        r == -ERANGE ? "value out of range:" : "invalid argument",
                        (int)(s.len > 80 ? 80 : s.len), s.ptr);
    return 0;
  }
  const cedar_value *a = &args[0], *b = &args[1];
  out->kind = CV_BOOL;
  switch (name[0]) {
    case 'i':
      if (strcmp(name, "isIpv4") == 0) return out->u.boolean = cedar_ipaddr_is_ipv4(&a->u.ip), 0;
      if (strcmp(name, "isIpv6") == 0) return out->u.boolean = cedar_ipaddr_is_ipv6(&a->u.ip), 0;
      if (strcmp(name, "isLoopback") == 0) return out->u.boolean = cedar_ipaddr_is_loopback(&a->u.ip), 0;
      if (strcmp(name, "isMulticast") == 0) return out->u.boolean = cedar_ipaddr_is_multicast(&a->u.ip), 0;
      if (strcmp(name, "isInRange") == 0)
        return out->u.boolean = cedar_ipaddr_is_in_range(&a->u.ip, &b->u.ip), 0;
      break;
    case 'l':
      if (strcmp(name, "lessThan") == 0) return out->u.boolean = a->u.number < b->u.number, 0;
      if (strcmp(name, "lessThanOrEqual") == 0) return out->u.boolean = a->u.number <= b->u.number, 0;
      break;
    case 'g':
      if (strcmp(name, "greaterThan") == 0) return out->u.boolean = a->u.number > b->u.number, 0;
      if (strcmp(name, "greaterThanOrEqual") == 0) return out->u.boolean = a->u.number >= b->u.number, 0;
      break;
    case 'o':
      if (strcmp(name, "offset") == 0) {
        out->kind = CV_DATETIME;
        r = cedar_datetime_offset(a->u.number, b->u.number, &out->u.number);
        goto overflow;
      }
      break;
    case 'd':
      if (strcmp(name, "durationSince") == 0) {
        out->kind = CV_DURATION;
        r = cedar_datetime_duration_since(a->u.number, b->u.number, &out->u.number);
        goto overflow;
      }
      break;
    case 't':
      if (strcmp(name, "toDate") == 0) {
        out->kind = CV_DATETIME;
        r = cedar_datetime_to_date(a->u.number, &out->u.number);
        goto overflow;
      }
      if (strcmp(name, "toTime") == 0) {
        out->kind = CV_DURATION;
        out->u.number = cedar_datetime_to_time(a->u.number);
        return 0;
      }
      out->kind = CV_LONG;
      if (strcmp(name, "toDays") == 0)
        x = cedar_duration_to_days(a->u.number);
      else if (strcmp(name, "toHours") == 0)
        x = cedar_duration_to_hours(a->u.number);
      else if (strcmp(name, "toMinutes") == 0)
        x = cedar_duration_to_minutes(a->u.number);
      else if (strcmp(name, "toSeconds") == 0)
        x = cedar_duration_to_seconds(a->u.number);
      else if (strcmp(name, "toMilliseconds") == 0)
        x = cedar_duration_to_milliseconds(a->u.number);
      else
        break;
      out->u.number = x;
      return 0;
  }
  if (0) {
  overflow:
    if (r < 0) return EVAL_ERROR(ev, "overflow while evaluating `%s`", name);
    return 0;
  }
  return EVAL_ERROR(ev, "extension function `%s` is not supported", name);
}

static int get_attr(cedar_eval *ev, const cedar_value *target, cedar_str name, cedar_value *out) {
  const cedar_value *rec;
  if (target->kind == CV_ENTITY) {
    const cedar_entity *ent = ev->entities ? cedar_entities_find(ev->entities, &target->u.uid) : NULL;
    char t[200];
    if (!ent) {
      euid_text(&target->u.uid, t, sizeof t);
      return EVAL_ERROR(ev, "entity `%s` does not exist", t);
    }
    const cedar_value *v = cedar_record_get(&ent->attrs, name);
    if (!v) {
      euid_text(&target->u.uid, t, sizeof t);
      return EVAL_ERROR(ev, "`%s` does not have the attribute `%.*s`", t,
                        (int)(name.len > 60 ? 60 : name.len), name.ptr);
    }
    *out = *v;
    return 0;
  }
  if (target->kind != CV_RECORD) return type_error(ev, "entity or record", target);
  rec = cedar_record_get(target, name);
  if (!rec)
    return EVAL_ERROR(ev, "record does not have the attribute `%.*s`", (int)(name.len > 60 ? 60 : name.len),
                      name.ptr);
  *out = *rec;
  return 0;
}

static int has_attr(cedar_eval *ev, const cedar_value *target, cedar_str name, bool *out) {
  if (target->kind == CV_ENTITY) {
    const cedar_entity *ent = ev->entities ? cedar_entities_find(ev->entities, &target->u.uid) : NULL;
    *out = ent && cedar_record_get(&ent->attrs, name);
    return 0;
  }
  if (target->kind != CV_RECORD) return type_error(ev, "entity or record", target);
  *out = cedar_record_get(target, name) != NULL;
  return 0;
}

static int eval_in(cedar_eval *ev, const cedar_value *a, const cedar_value *b, bool *out) {
  if (a->kind != CV_ENTITY) return type_error(ev, "entity", a);
  if (b->kind == CV_ENTITY) {
    *out = entity_in(ev, &a->u.uid, &b->u.uid);
    return 0;
  }
  if (b->kind != CV_SET) return type_error(ev, "set or entity", b);
  for (size_t i = 0; i < b->u.set.count; i++)
    if (b->u.set.items[i].kind != CV_ENTITY) return type_error(ev, "entity", &b->u.set.items[i]);
  *out = false;
  if (b->u.set.count) {
    const cedar_entity *ent = ev->entities ? cedar_entities_find(ev->entities, &a->u.uid) : NULL;
    for (size_t i = 0; i < b->u.set.count; i++) {
      const cedar_euid *u = &b->u.set.items[i].u.uid;
      if (cedar_euid_eq(&a->u.uid, u) || (ent && cedar_entity_has_ancestor(ent, u))) {
        *out = true;
        break;
      }
    }
  }
  return 0;
}

int cedar_eval_expr(cedar_eval *ev, const cedar_expr *e, cedar_value *out) {
  cedar_value a, b;
  int r;
  bool flag;
  switch ((cedar_expr_kind)e->kind) {
    case CX_BOOL:
      out->kind = CV_BOOL;
      out->u.boolean = e->u.boolean;
      return 0;
    case CX_LONG:
      out->kind = CV_LONG;
      out->u.number = e->u.number;
      return 0;
    case CX_STRING:
      out->kind = CV_STRING;
      out->u.s = e->u.s;
      return 0;
    case CX_ENTITY:
      out->kind = CV_ENTITY;
      out->u.uid = e->u.uid;
      return 0;
    case CX_VAR:
      *out = ev->vars[e->var];
      return 0;
    case CX_VALUE:
      *out = *e->u.value;
      return 0;
    case CX_SLOT:
      return EVAL_ERROR(ev, "template slot ?%s is not filled",
                        e->var == CEDAR_VAR_PRINCIPAL ? "principal" : "resource");
    case CX_UNKNOWN:
      return EVAL_ERROR(ev, "unknown `%.*s` cannot be evaluated", (int)e->u.s.len, e->u.s.ptr);
    case CX_NOT:
      if ((r = eval_bool(ev, e->u.op.a, &flag)) < 0) return r;
      out->kind = CV_BOOL;
      out->u.boolean = !flag;
      return 0;
    case CX_NEG:
      if ((r = cedar_eval_expr(ev, e->u.op.a, &a)) < 0) return r;
      if (a.kind != CV_LONG) return type_error(ev, "long", &a);
      if (a.u.number == INT64_MIN)
        return EVAL_ERROR(ev, "integer overflow while attempting to negate `%lld`", (long long)a.u.number);
      out->kind = CV_LONG;
      out->u.number = -a.u.number;
      return 0;
    case CX_AND:
    case CX_OR:
      if ((r = eval_bool(ev, e->u.op.a, &flag)) < 0) return r;
      out->kind = CV_BOOL;
      if (flag == (e->kind == CX_OR)) {
        out->u.boolean = flag;
        return 0;
      }
      if ((r = eval_bool(ev, e->u.op.b, &flag)) < 0) return r;
      out->u.boolean = flag;
      return 0;
    case CX_IF:
      if ((r = eval_bool(ev, e->u.op.a, &flag)) < 0) return r;
      return cedar_eval_expr(ev, flag ? e->u.op.b : e->u.op.c, out);
    case CX_EQ:
    case CX_NE:
      if ((r = cedar_eval_expr(ev, e->u.op.a, &a)) < 0 || (r = cedar_eval_expr(ev, e->u.op.b, &b)) < 0)
        return r;
      out->kind = CV_BOOL;
      out->u.boolean = cedar_value_eq(&a, &b) == (e->kind == CX_EQ);
      return 0;
    case CX_LT:
    case CX_LE:
    case CX_GT:
    case CX_GE:
      if ((r = cedar_eval_expr(ev, e->u.op.a, &a)) < 0 || (r = cedar_eval_expr(ev, e->u.op.b, &b)) < 0)
        return r;
      if (a.kind != CV_LONG && a.kind != CV_DATETIME && a.kind != CV_DURATION)
        return type_error(ev, "one of [long, datetime, duration]", &a);
      if (b.kind != a.kind) return type_error(ev, cedar_value_kind_name(a.kind), &b);
      out->kind = CV_BOOL;
      out->u.boolean = e->kind == CX_LT   ? a.u.number < b.u.number
                       : e->kind == CX_LE ? a.u.number <= b.u.number
                       : e->kind == CX_GT ? a.u.number > b.u.number
                                          : a.u.number >= b.u.number;
      return 0;
    case CX_ADD:
    case CX_SUB:
    case CX_MUL: {
      if ((r = cedar_eval_expr(ev, e->u.op.a, &a)) < 0 || (r = cedar_eval_expr(ev, e->u.op.b, &b)) < 0)
        return r;
      if (a.kind != CV_LONG) return type_error(ev, "long", &a);
      if (b.kind != CV_LONG) return type_error(ev, "long", &b);
      int64_t res;
      bool overflow = e->kind == CX_ADD   ? __builtin_add_overflow(a.u.number, b.u.number, &res)
                      : e->kind == CX_SUB ? __builtin_sub_overflow(a.u.number, b.u.number, &res)
                                          : __builtin_mul_overflow(a.u.number, b.u.number, &res);
      if (overflow)
        return EVAL_ERROR(ev, "integer overflow while attempting to %s `%lld` and `%lld`",
                          e->kind == CX_ADD   ? "add"
                          : e->kind == CX_SUB ? "subtract"
                                              : "multiply",
                          (long long)a.u.number, (long long)b.u.number);
      out->kind = CV_LONG;
      out->u.number = res;
      return 0;
    }
    case CX_IN:
      if ((r = cedar_eval_expr(ev, e->u.op.a, &a)) < 0 || (r = cedar_eval_expr(ev, e->u.op.b, &b)) < 0)
        return r;
      if ((r = eval_in(ev, &a, &b, &flag)) < 0) return r;
      out->kind = CV_BOOL;
      out->u.boolean = flag;
      return 0;
    case CX_CONTAINS:
    case CX_CONTAINS_ALL:
    case CX_CONTAINS_ANY:
      if ((r = cedar_eval_expr(ev, e->u.op.a, &a)) < 0 || (r = cedar_eval_expr(ev, e->u.op.b, &b)) < 0)
        return r;
      if (a.kind != CV_SET) return type_error(ev, "set", &a);
      out->kind = CV_BOOL;
      if (e->kind == CX_CONTAINS) {
        out->u.boolean = set_contains(&a, &b);
        return 0;
      }
      if (b.kind != CV_SET) return type_error(ev, "set", &b);
      if (e->kind == CX_CONTAINS_ALL) {
        out->u.boolean = true;
        for (size_t i = 0; i < b.u.set.count && out->u.boolean; i++)
          out->u.boolean = set_contains(&a, &b.u.set.items[i]);
      } else {
        out->u.boolean = false;
        for (size_t i = 0; i < b.u.set.count && !out->u.boolean; i++)
          out->u.boolean = set_contains(&a, &b.u.set.items[i]);
      }
      return 0;
    case CX_IS_EMPTY:
      if ((r = cedar_eval_expr(ev, e->u.op.a, &a)) < 0) return r;
      if (a.kind != CV_SET) return type_error(ev, "set", &a);
      out->kind = CV_BOOL;
      out->u.boolean = a.u.set.count == 0;
      return 0;
    case CX_GET_TAG:
    case CX_HAS_TAG: {
      if ((r = cedar_eval_expr(ev, e->u.op.a, &a)) < 0 || (r = cedar_eval_expr(ev, e->u.op.b, &b)) < 0)
        return r;
      if (a.kind != CV_ENTITY) return type_error(ev, "entity", &a);
      if (b.kind != CV_STRING) return type_error(ev, "string", &b);
      const cedar_entity *ent = ev->entities ? cedar_entities_find(ev->entities, &a.u.uid) : NULL;
      const cedar_value *tag = ent ? cedar_record_get(&ent->tags, b.u.s) : NULL;
      if (e->kind == CX_HAS_TAG) {
        out->kind = CV_BOOL;
        out->u.boolean = tag != NULL;
        return 0;
      }
      char t[200];
      euid_text(&a.u.uid, t, sizeof t);
      if (!ent) return EVAL_ERROR(ev, "entity `%s` does not exist", t);
      if (!tag)
        return EVAL_ERROR(ev, "`%s` does not have the tag `%.*s`", t, (int)(b.u.s.len > 60 ? 60 : b.u.s.len),
                          b.u.s.ptr);
      *out = *tag;
      return 0;
    }
    case CX_GET_ATTR:
      if ((r = cedar_eval_expr(ev, e->u.op.a, &a)) < 0) return r;
      return get_attr(ev, &a, e->u.op.name, out);
    case CX_HAS_ATTR:
      if ((r = cedar_eval_expr(ev, e->u.op.a, &a)) < 0) return r;
      if ((r = has_attr(ev, &a, e->u.op.name, &flag)) < 0) return r;
      out->kind = CV_BOOL;
      out->u.boolean = flag;
      return 0;
    case CX_LIKE:
      if ((r = cedar_eval_expr(ev, e->u.op.a, &a)) < 0) return r;
      if (a.kind != CV_STRING) return type_error(ev, "string", &a);
      out->kind = CV_BOOL;
      out->u.boolean = cedar_like_match(a.u.s, &e->u.op.pattern);
      return 0;
    case CX_IS:
      if ((r = cedar_eval_expr(ev, e->u.op.a, &a)) < 0) return r;
      if (a.kind != CV_ENTITY) return type_error(ev, "entity", &a);
      out->kind = CV_BOOL;
      out->u.boolean = cedar_str_eq(a.u.uid.type, e->u.op.name);
      if (!out->u.boolean || !e->u.op.b) return 0;
      if ((r = cedar_eval_expr(ev, e->u.op.b, &b)) < 0) return r;
      if ((r = eval_in(ev, &a, &b, &flag)) < 0) return r;
      out->kind = CV_BOOL;
      out->u.boolean = flag;
      return 0;
    case CX_SET: {
      size_t n = e->u.list.count;
      cedar_value *items = n ? cedar_arena_alloc(ev->arena, n * sizeof *items) : NULL;
      if (n && !items) return -ENOMEM;
      for (size_t i = 0; i < n; i++)
        if ((r = cedar_eval_expr(ev, e->u.list.items[i], &items[i])) < 0) return r;
      out->kind = CV_SET;
      out->u.set.items = items;
      out->u.set.count = cedar_value_set_normalize(items, n);
      return 0;
    }
    case CX_RECORD: {
      size_t n = e->u.list.count;
      cedar_value *values = n ? cedar_arena_alloc(ev->arena, n * sizeof *values) : NULL;
      cedar_str *keys = n ? cedar_arena_alloc(ev->arena, n * sizeof *keys) : NULL;
      if (n && (!values || !keys)) return -ENOMEM;
      for (size_t i = 0; i < n; i++) {
        if ((r = cedar_eval_expr(ev, e->u.list.items[i], &values[i])) < 0) return r;
        keys[i] = e->u.list.keys[i];
      }
      cedar_value_record_normalize(keys, values, n, NULL);
      out->kind = CV_RECORD;
      out->u.record.keys = keys;
      out->u.record.values = values;
      out->u.record.count = n;
      return 0;
    }
    case CX_CALL:
      return call_extension(ev, e, out);
  }
  return EVAL_ERROR(ev, "unsupported expression");
}

static bool scope_matches(cedar_eval *ev, const cedar_scope *s, const cedar_value *var) {
  const cedar_euid *uid = &var->u.uid;
  switch ((cedar_scope_op)s->op) {
    case CEDAR_SCOPE_ANY:
      return true;
    case CEDAR_SCOPE_EQ:
      return cedar_euid_eq(uid, &s->uid);
    case CEDAR_SCOPE_IN:
      return entity_in(ev, uid, &s->uid);
    case CEDAR_SCOPE_IS:
      return cedar_str_eq(uid->type, s->type);
    case CEDAR_SCOPE_IS_IN:
      return cedar_str_eq(uid->type, s->type) && entity_in(ev, uid, &s->uid);
    case CEDAR_SCOPE_IN_LIST:
      for (size_t i = 0; i < s->list_count; i++)
        if (entity_in(ev, uid, &s->list[i])) return true;
      return false;
  }
  return false;
}

int cedar_eval_policy(cedar_eval *ev, const cedar_policy *policy) {
  if (policy->is_template) return EVAL_ERROR(ev, "a template cannot be evaluated");
  if (!scope_matches(ev, &policy->principal, &ev->vars[CEDAR_VAR_PRINCIPAL]) ||
      !scope_matches(ev, &policy->action, &ev->vars[CEDAR_VAR_ACTION]) ||
      !scope_matches(ev, &policy->resource, &ev->vars[CEDAR_VAR_RESOURCE]))
    return 0;
  for (size_t i = 0; i < policy->condition_count; i++) {
    bool value;
    int r = eval_bool(ev, policy->conditions[i].body, &value);
    if (r < 0) return r;
    if (value != policy->conditions[i].is_when) return 0;
  }
  return 1;
}

bool cedar_like_match(cedar_str s, const cedar_pattern *pattern) {
  const int16_t *p = pattern->elements;
  size_t n = pattern->length, si = 0, pi = 0, star = (size_t)-1, mark = 0;
  while (si < s.len) {
    if (pi < n && p[pi] == CEDAR_PATTERN_STAR) {
      star = pi++;
      mark = si;
    } else if (pi < n && p[pi] == (int16_t)(unsigned char)s.ptr[si]) {
      si++;
      pi++;
    } else if (star != (size_t)-1) {
      pi = star + 1;
      si = ++mark;
    } else {
      return false;
    }
  }
  while (pi < n && p[pi] == CEDAR_PATTERN_STAR) pi++;
  return pi == n;
}
