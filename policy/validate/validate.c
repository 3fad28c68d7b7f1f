/* Policy-set validation: declared entity types, action ids and enum ids, action application of the scope,
 * and typechecking of each policy's condition in every request environment (see validate.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/validate/types.h"

typedef struct validation {
  const cedar_schema *schema;
  schema_arena arena;
  cedar_validation_result *result;
  unsigned flags;
  bool failed;
} validation;

static void add_issue(validation *v, const cedar_policy *p, bool warning, unsigned line, unsigned column,
                      const char *message) {
  cedar_validation_result *r = v->result;
  cedar_validation_issue *bigger = realloc(r->issues, (r->count + 1) * sizeof *bigger);
  if (!bigger) {
    v->failed = true;
    return;
  }
  r->issues = bigger;
  cedar_validation_issue *issue = &r->issues[r->count++];
  memset(issue, 0, sizeof *issue);
  issue->is_warning = warning;
  snprintf(issue->policy_id, sizeof issue->policy_id, "%s", p->id ? p->id : "");
  snprintf(issue->file, sizeof issue->file, "%s", p->file ? p->file : "");
  issue->line = line;
  issue->column = column;
  snprintf(issue->message, sizeof issue->message, "%s", message);
  if (warning)
    r->warning_count++;
  else
    r->error_count++;
}

static void flush_findings(validation *v, const cedar_policy *p, findings *f, bool warning) {
  for (size_t i = 0; i < f->count; i++)
    add_issue(v, p, warning, f->items[i].line, f->items[i].column, f->items[i].message);
  free(f->items);
  memset(f, 0, sizeof *f);
}

/* ---------------- synthetic condition ---------------- */

static cedar_expr *node(validation *v, const cedar_policy *p, cedar_expr_kind kind, cedar_expr *a,
                        cedar_expr *b) {
  cedar_expr *e = cedar_schema_arena_alloc(&v->arena, sizeof *e);
  if (!e) {
    v->failed = true;
    return NULL;
  }
  e->kind = (uint8_t)kind;
  e->line = p->line;
  e->column = p->column;
  e->u.op.a = a;
  e->u.op.b = b;
  return e;
}

static cedar_expr *var_node(validation *v, const cedar_policy *p, cedar_var var, bool slot) {
  cedar_expr *e = node(v, p, slot ? CX_SLOT : CX_VAR, NULL, NULL);
  if (e) e->var = (uint8_t)var;
  return e;
}

static cedar_expr *uid_node(validation *v, const cedar_policy *p, const cedar_euid *uid) {
  cedar_expr *e = node(v, p, CX_ENTITY, NULL, NULL);
  if (e) e->u.uid = *uid;
  return e;
}

static cedar_expr *scope_condition(validation *v, const cedar_policy *p, const cedar_scope *s,
                                   cedar_var var) {
  cedar_expr *subject = var_node(v, p, var, false);
  cedar_expr *object = s->slot ? var_node(v, p, var, true) : uid_node(v, p, &s->uid);
  switch ((cedar_scope_op)s->op) {
    case CEDAR_SCOPE_ANY: {
      cedar_expr *t = node(v, p, CX_BOOL, NULL, NULL);
      if (t) t->u.boolean = true;
      return t;
    }
    case CEDAR_SCOPE_EQ:
      return node(v, p, CX_EQ, subject, object);
    case CEDAR_SCOPE_IN:
      return node(v, p, CX_IN, subject, object);
    case CEDAR_SCOPE_IS:
    case CEDAR_SCOPE_IS_IN: {
      cedar_expr *is = node(v, p, CX_IS, subject, s->op == CEDAR_SCOPE_IS_IN ? object : NULL);
      if (is) is->u.op.name = s->type;
      return is;
    }
    case CEDAR_SCOPE_IN_LIST: {
      cedar_expr *set = node(v, p, CX_SET, NULL, NULL);
      cedar_expr **items = cedar_schema_arena_alloc(&v->arena, (s->list_count + 1) * sizeof *items);
      if (!set || !items) return NULL;
      for (size_t i = 0; i < s->list_count; i++) items[i] = uid_node(v, p, &s->list[i]);
      set->u.list.items = items;
      set->u.list.count = s->list_count;
      return node(v, p, CX_IN, subject, set);
    }
  }
  return NULL;
}

static cedar_expr *policy_condition(validation *v, const cedar_policy *p) {
  cedar_expr *scope = node(v, p, CX_AND,
                           node(v, p, CX_AND, scope_condition(v, p, &p->principal, CEDAR_VAR_PRINCIPAL),
                                scope_condition(v, p, &p->action, CEDAR_VAR_ACTION)),
                           scope_condition(v, p, &p->resource, CEDAR_VAR_RESOURCE));
  cedar_expr *body = NULL;
  for (size_t i = 0; i < p->condition_count; i++) {
    cedar_expr *one = p->conditions[i].body;
    if (!p->conditions[i].is_when) one = node(v, p, CX_NOT, one, NULL);
    body = body ? node(v, p, CX_AND, body, one) : one;
  }
  if (!body) {
    body = node(v, p, CX_BOOL, NULL, NULL);
    if (body) body->u.boolean = true;
  }
  return v->failed ? NULL : node(v, p, CX_AND, scope, body);
}

/* ---------------- entity literals: types, action ids, enum ids ---------------- */

static const char *suggest_entity_type(validation *v, const char *name) {
  size_t n = cedar_schema_entity_type_count(v->schema);
  const char **names = cedar_schema_arena_alloc(&v->arena, (n + 1) * sizeof *names);
  if (!names) return NULL;
  for (size_t i = 0; i < n; i++) names[i] = cedar_schema_entity_type_at(v->schema, i)->name;
  return cedar_validate_closest_name(name, names, n);
}

static const char *suggest_action(validation *v, const char *type, const char *id) {
  size_t n = cedar_schema_action_count(v->schema);
  const char **names = cedar_schema_arena_alloc(&v->arena, (n + 1) * sizeof *names);
  if (!names) return NULL;
  for (size_t i = 0; i < n; i++) {
    const cedar_schema_action *a = cedar_schema_action_at(v->schema, i);
    names[i] = cedar_schema_arena_printf(&v->arena, "%s::\"%s\"", a->uid.type, a->uid.id);
  }
  return cedar_validate_closest_name(cedar_schema_arena_printf(&v->arena, "%s::\"%s\"", type, id), names, n);
}

static const char *action_list(validation *v) {
  const char *text = "";
  size_t n = cedar_schema_action_count(v->schema);
  for (size_t i = 0; i < n && i < 12; i++) {
    const cedar_schema_action *a = cedar_schema_action_at(v->schema, i);
    text =
        cedar_schema_arena_printf(&v->arena, "%s%s%s::\"%s\"", text, i ? ", " : "", a->uid.type, a->uid.id);
  }
  if (n > 12) text = cedar_schema_arena_printf(&v->arena, "%s, ...", text);
  return n ? text : "(none)";
}

static void check_type_name(validation *v, findings *f, const char *type, unsigned line, unsigned column) {
  if (cedar_validate_is_action_type_name(type) || cedar_schema_entity_type_find(v->schema, type)) return;
  const char *s = suggest_entity_type(v, type);
  cedar_validate_add_finding(f, line, column,
                             "unknown entity type `%s`: the schema does not declare it%s%s%s", type,
                             s ? "; did you mean `" : "", s ? s : "", s ? "`?" : "");
}

static void check_uid(validation *v, findings *f, const cedar_euid *uid, unsigned line, unsigned column) {
  const char *type = cedar_validate_encode_str(&v->arena, uid->type);
  const char *id = cedar_validate_encode_str(&v->arena, uid->id);
  if (cedar_validate_is_action_type_name(type)) {
    if (cedar_schema_action_find(v->schema, type, id)) return;
    const char *s = suggest_action(v, type, id);
    if (s)
      cedar_validate_add_finding(f, line, column, "unknown action `%s::\"%s\"`: did you mean `%s`?", type, id,
                                 s);
    else
      cedar_validate_add_finding(f, line, column, "unknown action `%s::\"%s\"`: the schema declares %s", type,
                                 id, action_list(v));
    return;
  }
  check_type_name(v, f, type, line, column);
  const cedar_schema_entity_type *e = cedar_schema_entity_type_find(v->schema, type);
  if (!e || !e->is_enum) return;
  for (size_t i = 0; i < e->enum_id_count; i++)
    if (strcmp(e->enum_ids[i], id) == 0) return;
  cedar_validate_add_finding(
      f, line, column, "`%s::\"%s\"` is not one of the ids the schema allows for the enumerated type `%s`",
      type, id, type);
}

static void check_literals(validation *v, findings *f, const cedar_expr *e, int depth) {
  if (!e || depth > 1024) return;
  switch ((cedar_expr_kind)e->kind) {
    case CX_ENTITY:
      check_uid(v, f, &e->u.uid, e->line, e->column);
      return;
    case CX_IS:
      check_type_name(v, f, cedar_validate_encode_str(&v->arena, e->u.op.name), e->line, e->column);
      break;
    case CX_SET:
    case CX_RECORD:
    case CX_CALL:
      for (size_t i = 0; i < e->u.list.count; i++) check_literals(v, f, e->u.list.items[i], depth + 1);
      return;
    case CX_BOOL:
    case CX_LONG:
    case CX_STRING:
    case CX_VAR:
    case CX_SLOT:
    case CX_UNKNOWN:
    case CX_VALUE:
      return;
    default:
      break;
  }
  check_literals(v, f, e->u.op.a, depth + 1);
  check_literals(v, f, e->u.op.b, depth + 1);
  check_literals(v, f, e->u.op.c, depth + 1);
}

static void check_scope_literals(validation *v, findings *f, const cedar_policy *p, const cedar_scope *s) {
  if ((s->op == CEDAR_SCOPE_IS || s->op == CEDAR_SCOPE_IS_IN))
    check_type_name(v, f, cedar_validate_encode_str(&v->arena, s->type), p->line, p->column);
  if ((s->op == CEDAR_SCOPE_EQ || s->op == CEDAR_SCOPE_IN || s->op == CEDAR_SCOPE_IS_IN) && !s->slot)
    check_uid(v, f, &s->uid, p->line, p->column);
  for (size_t i = 0; s->op == CEDAR_SCOPE_IN_LIST && i < s->list_count; i++)
    check_uid(v, f, &s->list[i], p->line, p->column);
}

/* ---------------- action application ---------------- */

/* Entity types the scope admits for principal/resource (NULL entry list means "every type"). */
static bool scope_admits_type(validation *v, const cedar_scope *s, const char *type) {
  switch ((cedar_scope_op)s->op) {
    case CEDAR_SCOPE_ANY:
      return true;
    case CEDAR_SCOPE_EQ:
      return s->slot || strcmp(cedar_validate_encode_str(&v->arena, s->uid.type), type) == 0;
    case CEDAR_SCOPE_IN:
      return s->slot ||
             (cedar_schema_entity_type_find(v->schema, cedar_validate_encode_str(&v->arena, s->uid.type)) &&
              cedar_schema_entity_type_may_be_in(v->schema, type,
                                                 cedar_validate_encode_str(&v->arena, s->uid.type)));
    case CEDAR_SCOPE_IS:
      return strcmp(cedar_validate_encode_str(&v->arena, s->type), type) == 0 &&
             cedar_schema_entity_type_find(v->schema, type);
    case CEDAR_SCOPE_IS_IN:
      if (strcmp(cedar_validate_encode_str(&v->arena, s->type), type) != 0 ||
          !cedar_schema_entity_type_find(v->schema, type))
        return false;
      return s->slot ||
             (cedar_schema_entity_type_find(v->schema, cedar_validate_encode_str(&v->arena, s->uid.type)) &&
              cedar_schema_entity_type_may_be_in(v->schema, type,
                                                 cedar_validate_encode_str(&v->arena, s->uid.type)));
    default:
      return false;
  }
}

static bool scope_admits_action(validation *v, const cedar_scope *s, const cedar_schema_action *a) {
  const cedar_euid *list = &s->uid;
  size_t count = 1;
  switch ((cedar_scope_op)s->op) {
    case CEDAR_SCOPE_ANY:
      return true;
    case CEDAR_SCOPE_EQ:
      return strcmp(cedar_validate_encode_str(&v->arena, s->uid.type), a->uid.type) == 0 &&
             strcmp(cedar_validate_encode_str(&v->arena, s->uid.id), a->uid.id) == 0;
    case CEDAR_SCOPE_IN_LIST:
      list = s->list, count = s->list_count; /* fall through */
    case CEDAR_SCOPE_IN: {
      bool in = false;
      for (size_t i = 0; i < count; i++) {
        const cedar_schema_action *group =
            cedar_schema_action_find(v->schema, cedar_validate_encode_str(&v->arena, list[i].type),
                                     cedar_validate_encode_str(&v->arena, list[i].id));
        if (!group) return false; /* an unknown action in the list: upstream admits none */
        if (cedar_schema_action_is_in(v->schema, &a->uid, &group->uid)) in = true;
      }
      return in;
    }
    default:
      return false;
  }
}

static bool action_applies(validation *v, const cedar_policy *p) {
  size_t n = cedar_schema_action_count(v->schema);
  for (size_t i = 0; i < n; i++) {
    const cedar_schema_action *a = cedar_schema_action_at(v->schema, i);
    if (!scope_admits_action(v, &p->action, a)) continue;
    bool principal = false, resource = false;
    for (size_t k = 0; k < a->principal_type_count && !principal; k++)
      principal = scope_admits_type(v, &p->principal, a->principal_types[k]);
    for (size_t k = 0; k < a->resource_type_count && !resource; k++)
      resource = scope_admits_type(v, &p->resource, a->resource_types[k]);
    if (principal && resource) return true;
  }
  return false;
}

/* ---------------- typechecking over request environments ---------------- */

typedef struct slot_links {
  const char **types; /* NULL entry: no slot */
  size_t count;
} slot_links;

static slot_links links_for(validation *v, const cedar_scope *s, const char *var_type) {
  slot_links links = {0};
  size_t n = cedar_schema_entity_type_count(v->schema);
  links.types = cedar_schema_arena_alloc(&v->arena, (n + 2) * sizeof *links.types);
  if (!links.types) {
    v->failed = true;
    return links;
  }
  if (!s->slot) {
    links.types[links.count++] = NULL;
  } else if (s->op == CEDAR_SCOPE_EQ) {
    links.types[links.count++] = var_type;
  } else if (s->op == CEDAR_SCOPE_IN || s->op == CEDAR_SCOPE_IS_IN) {
    links.types[links.count++] = var_type;
    for (size_t i = 0; i < n; i++) {
      const char *t = cedar_schema_entity_type_at(v->schema, i)->name;
      if (strcmp(t, var_type) != 0 && cedar_schema_entity_type_may_be_in(v->schema, var_type, t))
        links.types[links.count++] = t;
    }
  } else {
    for (size_t i = 0; i < n; i++)
      links.types[links.count++] = cedar_schema_entity_type_at(v->schema, i)->name;
  }
  return links;
}

/* Typecheck p in every environment; true when its condition is False in all of them (impossible). */
static bool typecheck_policy(validation *v, const cedar_policy *p, findings *errors) {
  cedar_expr *condition = policy_condition(v, p);
  if (!condition) return false;
  bool all_false = true;
  size_t n = cedar_schema_action_count(v->schema);
  for (size_t i = 0; i < n && !v->failed; i++) {
    const cedar_schema_action *a = cedar_schema_action_at(v->schema, i);
    if (!a->has_applies_to) continue;
    for (size_t pi = 0; pi < a->principal_type_count; pi++) {
      for (size_t ri = 0; ri < a->resource_type_count; ri++) {
        slot_links principal_links = links_for(v, &p->principal, a->principal_types[pi]);
        slot_links resource_links = links_for(v, &p->resource, a->resource_types[ri]);
        for (size_t x = 0; x < principal_links.count; x++) {
          for (size_t y = 0; y < resource_links.count; y++) {
            request_env env = {a->principal_types[pi], a, a->resource_types[ri], principal_links.types[x],
                               resource_links.types[y]};
            checker c = {.schema = v->schema, .arena = &v->arena, .policy = p, .env = &env, .errors = errors};
            bool typechecked = false;
            const vtype *t = cedar_validate_typecheck_condition(&c, condition, &typechecked);
            if (c.failed_alloc) v->failed = true;
            bool is_false = t && t->kind == VT_FALSE;
            if (!is_false) all_false = false;
          }
        }
      }
    }
  }
  return all_false && !v->failed;
}

static void validate_policy(validation *v, const cedar_policy *p) {
  findings errors = {0};
  if (p->template_id) {
    /* template-linked: the slot values' types and the linked scope's action application */
    if (!p->principal.slot && p->principal.op != CEDAR_SCOPE_ANY && p->principal.op != CEDAR_SCOPE_IS)
      check_type_name(v, &errors, cedar_validate_encode_str(&v->arena, p->principal.uid.type), p->line,
                      p->column);
    if (!p->resource.slot && p->resource.op != CEDAR_SCOPE_ANY && p->resource.op != CEDAR_SCOPE_IS)
      check_type_name(v, &errors, cedar_validate_encode_str(&v->arena, p->resource.uid.type), p->line,
                      p->column);
  } else {
    check_scope_literals(v, &errors, p, &p->principal);
    check_scope_literals(v, &errors, p, &p->action);
    check_scope_literals(v, &errors, p, &p->resource);
    for (size_t i = 0; i < p->condition_count; i++) check_literals(v, &errors, p->conditions[i].body, 0);
  }
  bool impossible = !p->template_id && typecheck_policy(v, p, &errors);
  flush_findings(v, p, &errors, false);
  findings warnings = {0};
  /* Both are warnings in cedar-policy 4.13 (as cedar-wasm reports them): validation still passes. */
  bool application_error = v->flags & CEDAR_VALIDATE_ACTION_APPLICATION_ERROR;
  if (!action_applies(v, p)) {
    cedar_validate_add_finding(
        application_error ? &errors : &warnings, p->line, p->column,
        "no action in the schema applies to the principal and resource this policy's scope allows "
        "(check the action's appliesTo principal and resource types)");
    if (application_error) flush_findings(v, p, &errors, false);
  }
  if (impossible) {
    cedar_validate_add_finding(
        &warnings, p->line, p->column,
        "this policy can never apply: its scope and conditions are false for every principal, action and "
        "resource type the schema allows");
  }
  flush_findings(v, p, &warnings, true);
}

int cedar_validate(const cedar_schema *schema, const cedar_policy_set *set, cedar_validation_result *result) {
  return cedar_validate_with(schema, set, 0, result);
}

int cedar_validate_with(const cedar_schema *schema, const cedar_policy_set *set, unsigned flags,
                        cedar_validation_result *result) {
  memset(result, 0, sizeof *result);
  validation v = {.schema = schema, .result = result, .flags = flags};
  size_t n = cedar_policy_set_count(set);
  for (size_t i = 0; i < n && !v.failed; i++) validate_policy(&v, cedar_policy_set_at(set, i));
  cedar_schema_arena_release(&v.arena);
  if (v.failed || v.arena.failed) {
    cedar_validation_result_release(result);
    return -ENOMEM;
  }
  return 0;
}

bool cedar_validation_passed(const cedar_validation_result *result) {
  return result->error_count == 0;
}

void cedar_validation_result_release(cedar_validation_result *result) {
  free(result->issues);
  memset(result, 0, sizeof *result);
}

const char *cedar_validation_issue_format(const cedar_validation_issue *issue, char *buf, size_t size) {
  if (!size) return buf;
  char place[320] = "";
  if (issue->file[0] && issue->line)
    snprintf(place, sizeof place, "%s:%u:%u: ", issue->file, issue->line, issue->column);
  else if (issue->line)
    snprintf(place, sizeof place, "%u:%u: ", issue->line, issue->column);
  else if (issue->file[0])
    snprintf(place, sizeof place, "%s: ", issue->file);
  snprintf(buf, size, "%s%s: policy `%s`: %s", place, issue->is_warning ? "warning" : "error",
           issue->policy_id, issue->message);
  return buf;
}
