/* Partial evaluation (Cedar "partial evaluation"): evaluate what the known parts of a request decide and
 * keep the rest as residual expressions.
 *
 * Each sub-expression evaluates to a value, an error, or a residual. The rules keep Cedar's semantics
 * exactly: strict operators with a residual operand stay residual; && || and if-then-else keep their
 * short-circuit order (a residual left operand keeps the right one, and an erroring right operand is kept
 * as its original text with the known variables substituted, so it still errors when reached);
 * `true && R` becomes R only when R is certainly boolean. Residuals mention only unknown variables and
 * unknown(NAME) values. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "policy/eval/eval.h"

typedef enum { PV_VALUE, PV_RESIDUAL, PV_ERROR } pv_kind;

typedef struct pval {
  pv_kind kind;
  cedar_value v; /* PV_VALUE */
  cedar_expr *e; /* PV_RESIDUAL */
} pval;

typedef struct pctx {
  cedar_eval ev; /* concrete evaluation; its arena is the residual set's arena */
  bool unknown[4];
  cedar_str known_type[4]; /* entity type of an unknown principal/action/resource when given */
  int oom;
} pctx;

static bool has_unknown(const cedar_value *v) {
  switch ((cedar_value_kind)v->kind) {
    case CV_UNKNOWN:
      return true;
    case CV_SET:
      for (size_t i = 0; i < v->u.set.count; i++)
        if (has_unknown(&v->u.set.items[i])) return true;
      return false;
    case CV_RECORD:
      for (size_t i = 0; i < v->u.record.count; i++)
        if (has_unknown(&v->u.record.values[i])) return true;
      return false;
    default:
      return false;
  }
}

static cedar_expr *new_node(pctx *c, cedar_expr_kind kind, cedar_expr *a, cedar_expr *b, cedar_expr *x) {
  cedar_expr *e = cedar_expr_new(c->ev.arena, kind, a, b, x);
  if (!e) c->oom = 1;
  return e;
}

static cedar_expr *value_expr(pctx *c, const cedar_value *v) {
  if (v->kind == CV_UNKNOWN) {
    cedar_expr *e = new_node(c, CX_UNKNOWN, NULL, NULL, NULL);
    if (e) e->u.s = v->u.s;
    return e;
  }
  cedar_value *copy = cedar_arena_alloc(c->ev.arena, sizeof *copy);
  cedar_expr *e = new_node(c, CX_VALUE, NULL, NULL, NULL);
  if (!copy || !e) return c->oom = 1, NULL;
  *copy = *v;
  e->u.value = copy;
  return e;
}

static pval value(cedar_value v) {
  return (pval){.kind = PV_VALUE, .v = v};
}
static pval residual(cedar_expr *e) {
  return (pval){.kind = e ? PV_RESIDUAL : PV_ERROR, .e = e};
}
static pval error(void) {
  return (pval){.kind = PV_ERROR};
}
static pval boolean(bool b) {
  cedar_value v = {.kind = CV_BOOL};
  v.u.boolean = b;
  return value(v);
}

/* A value holding unknowns is handled as a residual. */
static pval normalize(pctx *c, pval p) {
  if (p.kind == PV_VALUE && has_unknown(&p.v)) return residual(value_expr(c, &p.v));
  return p;
}

static cedar_expr *as_expr(pctx *c, const pval *p) {
  return p->kind == PV_RESIDUAL ? p->e : value_expr(c, &p->v);
}

/* Copy e with the known variables replaced by their values (for operands kept unevaluated). */
static cedar_expr *subst(pctx *c, const cedar_expr *e) {
  if (!e || c->oom) return NULL;
  if (e->kind == CX_VAR) {
    if (c->unknown[e->var]) return (cedar_expr *)e;
    return value_expr(c, &c->ev.vars[e->var]);
  }
  cedar_expr *n = cedar_arena_alloc(c->ev.arena, sizeof *n);
  if (!n) return c->oom = 1, NULL;
  *n = *e;
  switch ((cedar_expr_kind)e->kind) {
    case CX_SET:
    case CX_RECORD:
    case CX_CALL:
      n->u.list.items = cedar_arena_alloc(c->ev.arena, (e->u.list.count + 1) * sizeof *n->u.list.items);
      if (!n->u.list.items) return c->oom = 1, NULL;
      for (size_t i = 0; i < e->u.list.count; i++)
        if (!(n->u.list.items[i] = subst(c, e->u.list.items[i]))) return NULL;
      return n;
    case CX_BOOL:
    case CX_LONG:
    case CX_STRING:
    case CX_ENTITY:
    case CX_SLOT:
    case CX_UNKNOWN:
    case CX_VALUE:
    case CX_VAR:
      return n;
    default:
      if (e->u.op.a && !(n->u.op.a = subst(c, e->u.op.a))) return NULL;
      if (e->u.op.b && !(n->u.op.b = subst(c, e->u.op.b))) return NULL;
      if (e->u.op.c && !(n->u.op.c = subst(c, e->u.op.c))) return NULL;
      return n;
  }
}

/* The expression standing for an operand in a residual: its residual, its value, or (for an error)
 * its substituted original text. */
static cedar_expr *keep(pctx *c, const pval *p, const cedar_expr *original) {
  return p->kind == PV_ERROR ? subst(c, original) : as_expr(c, p);
}

static bool certainly_bool(const cedar_expr *e) {
  switch ((cedar_expr_kind)e->kind) {
    case CX_BOOL:
    case CX_NOT:
    case CX_AND:
    case CX_OR:
    case CX_EQ:
    case CX_NE:
    case CX_LT:
    case CX_LE:
    case CX_GT:
    case CX_GE:
    case CX_IN:
    case CX_CONTAINS:
    case CX_CONTAINS_ALL:
    case CX_CONTAINS_ANY:
    case CX_IS_EMPTY:
    case CX_HAS_TAG:
    case CX_HAS_ATTR:
    case CX_LIKE:
    case CX_IS:
      return true;
    case CX_CALL:
      return e->u.list.function && e->u.list.function->result == CEDAR_EXT_TYPE_BOOL;
    case CX_VALUE:
      return e->u.value->kind == CV_BOOL;
    default:
      return false;
  }
}

static pval peval(pctx *c, const cedar_expr *e);

/* The entity type of a residual that is a bare unknown variable of known type, else NULL. */
static const cedar_str *typed_var(const pctx *c, const cedar_expr *e) {
  if (e->kind != CX_VAR || !c->unknown[e->var] || !c->known_type[e->var].ptr) return NULL;
  return &c->known_type[e->var];
}

/* `x == E` / `E == x` for a variable of known type and an entity of another type (or any non-entity
 * value) is false; `x is T` is decided by the type. NULL when the types do not decide. */
static const bool *decided_by_type(const pctx *c, const cedar_expr *e, const pval *a, const pval *b) {
  static const bool t = true, f = false;
  if (e->kind == CX_IS && !e->u.op.b && a->kind == PV_RESIDUAL) {
    const cedar_str *type = typed_var(c, a->e);
    if (type) return cedar_str_eq(*type, e->u.op.name) ? &t : &f;
  }
  if ((e->kind == CX_EQ || e->kind == CX_NE) && b) {
    const pval *var = a->kind == PV_RESIDUAL ? a : b, *lit = a->kind == PV_RESIDUAL ? b : a;
    const cedar_str *type = var->kind == PV_RESIDUAL ? typed_var(c, var->e) : NULL;
    if (type && lit->kind == PV_VALUE &&
        (lit->v.kind != CV_ENTITY || !cedar_str_eq(lit->v.u.uid.type, *type)))
      return e->kind == CX_EQ ? &f : &t;
  }
  return NULL;
}

/* Concrete evaluation of node e whose operands are the given values. */
static pval eval_with(pctx *c, const cedar_expr *e, cedar_expr **operands, size_t count, bool list) {
  cedar_expr tmp = *e;
  if (list) {
    tmp.u.list.items = operands;
  } else {
    tmp.u.op.a = count > 0 ? operands[0] : NULL;
    tmp.u.op.b = count > 1 ? operands[1] : NULL;
    tmp.u.op.c = count > 2 ? operands[2] : NULL;
  }
  cedar_value out;
  int r = cedar_eval_expr(&c->ev, &tmp, &out);
  if (r == -ENOMEM) return c->oom = 1, error();
  if (r < 0) return error();
  return normalize(c, value(out));
}

/* Strict operators: every operand is evaluated, left to right. */
static pval strict(pctx *c, const cedar_expr *e) {
  bool list = e->kind == CX_SET || e->kind == CX_RECORD || e->kind == CX_CALL;
  const cedar_expr *ops[3] = {e->u.op.a, e->u.op.b, e->u.op.c};
  size_t count = list ? e->u.list.count : (size_t)(ops[0] != NULL) + (ops[1] != NULL) + (ops[2] != NULL);
  cedar_expr **operands = cedar_arena_alloc(c->ev.arena, (count + 1) * sizeof *operands);
  if (!operands) return c->oom = 1, error();
  bool any_residual = false;
  pval first[2];
  for (size_t i = 0; i < count; i++) {
    pval p = peval(c, list ? e->u.list.items[i] : ops[i]);
    if (p.kind == PV_ERROR) return error();
    if (p.kind == PV_RESIDUAL) any_residual = true;
    if (i < 2) first[i] = p;
    if (!(operands[i] = as_expr(c, &p))) return error();
  }
  if (!any_residual) return eval_with(c, e, operands, count, list);
  if (!list) {
    const bool *decided = decided_by_type(c, e, &first[0], count > 1 ? &first[1] : NULL);
    if (decided) return boolean(*decided);
  }
  cedar_expr *n = cedar_arena_alloc(c->ev.arena, sizeof *n);
  if (!n) return c->oom = 1, error();
  *n = *e;
  unsigned depth = 0;
  for (size_t i = 0; i < count; i++)
    if (operands[i]->depth > depth) depth = operands[i]->depth;
  n->depth = (uint16_t)(depth + 1 > 0xffff ? 0xffff : depth + 1);
  if (list) {
    n->u.list.items = operands;
  } else {
    n->u.op.a = count > 0 ? operands[0] : NULL;
    n->u.op.b = count > 1 ? operands[1] : NULL;
    n->u.op.c = count > 2 ? operands[2] : NULL;
  }
  return residual(n);
}

/* A boolean operand: value (checked to be bool), residual, or error. */
static pval bool_operand(pctx *c, const cedar_expr *e) {
  pval p = peval(c, e);
  if (p.kind == PV_VALUE && p.v.kind != CV_BOOL) return error();
  return p;
}

static pval and_or(pctx *c, const cedar_expr *e) {
  bool is_and = e->kind == CX_AND;
  pval a = bool_operand(c, e->u.op.a);
  if (a.kind == PV_ERROR) return a;
  if (a.kind == PV_VALUE) {
    if (a.v.u.boolean != is_and) return a; /* false && _, true || _ */
    pval b = bool_operand(c, e->u.op.b);
    if (b.kind != PV_RESIDUAL || certainly_bool(b.e)) return b;
    return residual(new_node(c, e->kind, value_expr(c, &a.v), b.e, NULL));
  }
  pval b = bool_operand(c, e->u.op.b);
  if (b.kind == PV_VALUE && b.v.u.boolean == is_and && certainly_bool(a.e))
    return a; /* R && true, R || false */
  cedar_expr *right = keep(c, &b, e->u.op.b);
  if (!right) return error();
  return residual(new_node(c, e->kind, a.e, right, NULL));
}

static pval if_then_else(pctx *c, const cedar_expr *e) {
  pval cond = bool_operand(c, e->u.op.a);
  if (cond.kind == PV_ERROR) return cond;
  if (cond.kind == PV_VALUE) return peval(c, cond.v.u.boolean ? e->u.op.b : e->u.op.c);
  pval t = peval(c, e->u.op.b), f = peval(c, e->u.op.c);
  cedar_expr *te = keep(c, &t, e->u.op.b), *fe = keep(c, &f, e->u.op.c);
  if (!te || !fe) return error();
  return residual(new_node(c, CX_IF, cond.e, te, fe));
}

/* `a is T in b`: b is evaluated only when a has type T. */
static pval is_in(pctx *c, const cedar_expr *e) {
  if (!e->u.op.b) return strict(c, e);
  pval a = peval(c, e->u.op.a);
  if (a.kind == PV_ERROR) return a;
  if (a.kind == PV_VALUE) {
    if (a.v.kind != CV_ENTITY) return error();
    if (!cedar_str_eq(a.v.u.uid.type, e->u.op.name)) return boolean(false);
    return strict(c, e);
  }
  const cedar_str *type = typed_var(c, a.e);
  if (type && !cedar_str_eq(*type, e->u.op.name)) return boolean(false);
  pval b = peval(c, e->u.op.b);
  cedar_expr *be = keep(c, &b, e->u.op.b);
  cedar_expr *n = be ? new_node(c, CX_IS, a.e, be, NULL) : NULL;
  if (n) n->u.op.name = e->u.op.name;
  return residual(n);
}

static pval peval(pctx *c, const cedar_expr *e) {
  if (c->oom) return error();
  switch ((cedar_expr_kind)e->kind) {
    case CX_VAR:
      if (c->unknown[e->var]) return residual((cedar_expr *)e);
      return normalize(c, value(c->ev.vars[e->var]));
    case CX_UNKNOWN:
      return residual((cedar_expr *)e);
    case CX_BOOL:
    case CX_LONG:
    case CX_STRING:
    case CX_ENTITY:
    case CX_VALUE:
    case CX_SLOT: {
      cedar_value out;
      int r = cedar_eval_expr(&c->ev, e, &out);
      if (r == -ENOMEM) c->oom = 1;
      return r < 0 ? error() : normalize(c, value(out));
    }
    case CX_AND:
    case CX_OR:
      return and_or(c, e);
    case CX_IF:
      return if_then_else(c, e);
    case CX_IS:
      return is_in(c, e);
    case CX_GET_ATTR:
    case CX_HAS_ATTR: {
      /* a record holding unknowns elsewhere still answers for its known attributes */
      pval a = peval(c, e->u.op.a);
      if (a.kind == PV_ERROR) return a;
      if (a.kind == PV_RESIDUAL && a.e->kind == CX_VALUE && a.e->u.value->kind == CV_RECORD) {
        a.kind = PV_VALUE;
        a.v = *a.e->u.value;
      }
      if (a.kind == PV_VALUE) {
        cedar_expr *operand = value_expr(c, &a.v);
        if (!operand) return error();
        cedar_expr *ops[1] = {operand};
        return eval_with(c, e, ops, 1, false);
      }
      cedar_expr *n = new_node(c, e->kind, a.e, NULL, NULL);
      if (n) n->u.op.name = e->u.op.name;
      return residual(n);
    }
    default:
      return strict(c, e);
  }
}

/* The policy as one expression: scope constraints && when-bodies && !unless-bodies. */
static cedar_expr *scope_expr(pctx *c, const cedar_scope *s, cedar_var var) {
  if (s->op == CEDAR_SCOPE_ANY) return NULL;
  cedar_expr *v = new_node(c, CX_VAR, NULL, NULL, NULL);
  if (!v) return NULL;
  v->var = (uint8_t)var;
  cedar_expr *target = NULL;
  if (s->op == CEDAR_SCOPE_EQ || s->op == CEDAR_SCOPE_IN || s->op == CEDAR_SCOPE_IS_IN) {
    target = new_node(c, CX_ENTITY, NULL, NULL, NULL);
    if (!target) return NULL;
    target->u.uid = s->uid;
  } else if (s->op == CEDAR_SCOPE_IN_LIST) {
    target = new_node(c, CX_SET, NULL, NULL, NULL);
    cedar_expr **items = cedar_arena_alloc(c->ev.arena, (s->list_count + 1) * sizeof *items);
    if (!target || !items) return c->oom = 1, NULL;
    for (size_t i = 0; i < s->list_count; i++) {
      if (!(items[i] = new_node(c, CX_ENTITY, NULL, NULL, NULL))) return NULL;
      items[i]->u.uid = s->list[i];
    }
    target->u.list.items = items;
    target->u.list.count = s->list_count;
  }
  cedar_expr *e;
  switch ((cedar_scope_op)s->op) {
    case CEDAR_SCOPE_EQ:
      return new_node(c, CX_EQ, v, target, NULL);
    case CEDAR_SCOPE_IN:
    case CEDAR_SCOPE_IN_LIST:
      return new_node(c, CX_IN, v, target, NULL);
    case CEDAR_SCOPE_IS:
    case CEDAR_SCOPE_IS_IN:
      e = new_node(c, CX_IS, v, target, NULL);
      if (e) e->u.op.name = s->type;
      return e;
    default:
      return NULL;
  }
}

static cedar_expr *policy_expr(pctx *c, const cedar_policy *p) {
  cedar_expr *acc = NULL;
  const cedar_scope *scopes[3] = {&p->principal, &p->action, &p->resource};
  cedar_var vars[3] = {CEDAR_VAR_PRINCIPAL, CEDAR_VAR_ACTION, CEDAR_VAR_RESOURCE};
  for (int i = 0; i < 3; i++) {
    cedar_expr *s = scope_expr(c, scopes[i], vars[i]);
    if (c->oom) return NULL;
    if (s) acc = acc ? new_node(c, CX_AND, acc, s, NULL) : s;
  }
  for (size_t i = 0; i < p->condition_count; i++) {
    cedar_expr *body = p->conditions[i].body;
    if (!p->conditions[i].is_when) body = new_node(c, CX_NOT, body, NULL, NULL);
    if (!body) return NULL;
    acc = acc ? new_node(c, CX_AND, acc, body, NULL) : body;
  }
  if (!acc) {
    acc = new_node(c, CX_BOOL, NULL, NULL, NULL);
    if (acc) acc->u.boolean = true;
  }
  return acc;
}

void cedar_partial_response_release(cedar_partial_response *response) {
  if (!response) return;
  for (size_t i = 0; i < response->error_count; i++) free(response->errors[i].message);
  free(response->errors);
  free(response->satisfied);
  cedar_policy_set_free(response->residuals);
  memset(response, 0, sizeof *response);
}

int cedar_partially_authorize(const cedar_policy_set *set, const cedar_entities *entities,
                              const cedar_partial_request *request, cedar_partial_response *response) {
  memset(response, 0, sizeof *response);
  if (cedar_policy_set_new(&response->residuals) < 0) return -ENOMEM;
  pctx c = {0};
  cedar_request concrete = {request->principal, request->action, request->resource, request->context};
  const cedar_uid_ref *refs[3] = {&request->principal, &request->action, &request->resource};
  cedar_eval_init(&c.ev, response->residuals->arena, entities, &concrete);
  cedar_var vars[3] = {CEDAR_VAR_PRINCIPAL, CEDAR_VAR_ACTION, CEDAR_VAR_RESOURCE};
  for (int i = 0; i < 3; i++) {
    c.unknown[vars[i]] = refs[i]->type == NULL || refs[i]->id == NULL;
    if (refs[i]->type && !refs[i]->id)
      c.known_type[vars[i]] = (cedar_str){refs[i]->type, strlen(refs[i]->type)};
  }
  c.unknown[CEDAR_VAR_CONTEXT] = request->context_unknown;
  size_t n = set->count;
  unsigned char *outcome = calloc(n + 1, 1); /* 1 satisfied, 2 residual */
  response->satisfied = calloc(n + 1, sizeof *response->satisfied);
  response->errors = calloc(n + 1, sizeof *response->errors);
  if (!outcome || !response->satisfied || !response->errors) {
    free(outcome);
    cedar_partial_response_release(response);
    return -ENOMEM;
  }
  bool forbid_true = false, forbid_residual = false, permit_true = false, permit_residual = false;
  for (size_t i = 0; i < n && !c.oom; i++) {
    const cedar_policy *p = set->policies[i];
    if (p->is_template) continue;
    cedar_expr *whole = policy_expr(&c, p);
    if (!whole) break;
    pval r = peval(&c, whole);
    if (r.kind == PV_VALUE && r.v.kind != CV_BOOL) r = error();
    if (r.kind == PV_ERROR) {
      if (c.oom) break;
      cedar_policy_error *pe = &response->errors[response->error_count];
      pe->policy_id = p->id;
      pe->message = strdup(c.ev.error[0] ? c.ev.error : "evaluation error");
      if (!pe->message) c.oom = 1;
      response->error_count++;
    } else if (r.kind == PV_VALUE) {
      if (r.v.u.boolean) {
        outcome[i] = 1;
        if (p->effect == CEDAR_FORBID)
          forbid_true = true;
        else
          permit_true = true;
      }
    } else {
      outcome[i] = 2;
      if (p->effect == CEDAR_FORBID)
        forbid_residual = true;
      else
        permit_residual = true;
      cedar_policy *rp = cedar_arena_alloc(c.ev.arena, sizeof *rp);
      cedar_condition *cond = cedar_arena_alloc(c.ev.arena, sizeof *cond);
      if (!rp || !cond) {
        c.oom = 1;
        break;
      }
      rp->id = p->id;
      rp->effect = p->effect;
      rp->annotations = p->annotations;
      rp->annotation_count = p->annotation_count;
      rp->file = p->file;
      rp->line = p->line;
      rp->column = p->column;
      cond->is_when = true;
      cond->body = r.e;
      rp->conditions = cond;
      rp->condition_count = 1;
      if (cedar_policy_set_append(response->residuals, rp) < 0) c.oom = 1;
    }
  }
  if (c.oom) {
    free(outcome);
    cedar_partial_response_release(response);
    return -ENOMEM;
  }
  if (forbid_true)
    response->decision = CEDAR_PARTIAL_DENY;
  else if (forbid_residual)
    response->decision = CEDAR_PARTIAL_UNKNOWN;
  else if (permit_true)
    response->decision = CEDAR_PARTIAL_ALLOW;
  else
    response->decision = permit_residual ? CEDAR_PARTIAL_UNKNOWN : CEDAR_PARTIAL_DENY;
  for (size_t i = 0; i < n; i++)
    if (outcome[i] == 1) response->satisfied[response->satisfied_count++] = set->policies[i]->id;
  free(outcome);
  return 0;
}
