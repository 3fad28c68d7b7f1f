/* Cedar policies: annotations, effect, scope (==, in, is, is ... in, action in [..]) and when/unless
 * conditions (Cedar "Policy grammar"). Expressions are parsed by parser.c. */
#include "policy/syntax/parser.h"

/* ---------------- policies ---------------- */

static bool parse_slot_or_entity(parser *p, cedar_scope *scope, const char *slot_name) {
  cedar_token *t = peek(p);
  if (t->kind == TK_QUESTION) {
    next(p);
    cedar_token *n = next(p);
    if (!is_kw(n, slot_name)) {
      fail(p, t, "expected ?%s here", slot_name);
      return false;
    }
    scope->slot = true;
    return true;
  }
  if (t->kind == TK_LBRACKET)
    return fail(p, t, "expected single entity uid or template slot, found set of entity uids"), false;
  return cedar_parser_entity(p, &scope->uid);
}

static bool is_action_type(cedar_str type) {
  return cedar_str_eq_c(type, "Action") ||
         (type.len > 8 && memcmp(type.ptr + type.len - 8, "::Action", 8) == 0);
}

static bool check_action_uid(parser *p, const cedar_token *at, const cedar_euid *uid) {
  if (is_action_type(uid->type)) return true;
  fail(p, at, "expected an entity uid with type `Action` but got `%.*s::\"%.*s\"`", (int)uid->type.len,
       uid->type.ptr, (int)(uid->id.len > 60 ? 60 : uid->id.len), uid->id.ptr);
  return false;
}

static bool parse_scope(parser *p, cedar_scope *scope, const char *var) {
  cedar_token *t = peek(p);
  if (!is_kw(t, var))
    return fail_unexpected(p, t,
                           var[0] == 'p'   ? "`principal`"
                           : var[0] == 'a' ? "`action`"
                                           : "`resource`"),
           false;
  next(p);
  bool is_action = var[0] == 'a';
  cedar_token *op = peek(p);
  if (op->kind == TK_EQ) {
    next(p);
    scope->op = CEDAR_SCOPE_EQ;
    cedar_token *at = peek(p);
    if (is_action) {
      if (at->kind == TK_LBRACKET)
        return fail(p, at, "expected single entity uid, found set of entity uids"), false;
      return cedar_parser_entity(p, &scope->uid) && check_action_uid(p, at, &scope->uid);
    }
    return parse_slot_or_entity(p, scope, var);
  }
  if (is_kw(op, "in")) {
    next(p);
    scope->op = CEDAR_SCOPE_IN;
    cedar_token *at = peek(p);
    if (!is_action) return parse_slot_or_entity(p, scope, var);
    if (at->kind == TK_LBRACKET) {
      next(p);
      scope->op = CEDAR_SCOPE_IN_LIST;
      size_t cap = 0;
      while (peek(p)->kind != TK_RBRACKET) {
        cedar_token *et = peek(p);
        cedar_euid uid;
        if (!cedar_parser_entity(p, &uid) || !check_action_uid(p, et, &uid)) return false;
        if (scope->list_count == cap) {
          cap = cap ? cap * 2 : 4;
          cedar_euid *nl = cedar_arena_alloc(p->arena, cap * sizeof *nl);
          if (!nl) return oom(p), false;
          if (scope->list_count) memcpy(nl, scope->list, scope->list_count * sizeof *nl);
          scope->list = nl;
        }
        scope->list[scope->list_count++] = uid;
        if (peek(p)->kind == TK_COMMA) {
          next(p);
          continue;
        }
        if (peek(p)->kind != TK_RBRACKET) return fail_unexpected(p, peek(p), "`,` or `]`"), false;
      }
      next(p);
      return true;
    }
    return cedar_parser_entity(p, &scope->uid) && check_action_uid(p, at, &scope->uid);
  }
  if (is_kw(op, "is")) {
    if (is_action) return fail(p, op, "`is` is not allowed on the action in the policy scope"), false;
    next(p);
    scope->op = CEDAR_SCOPE_IS;
    if (!cedar_parser_path(p, &scope->type)) return false;
    if (is_kw(peek(p), "in")) {
      next(p);
      scope->op = CEDAR_SCOPE_IS_IN;
      return parse_slot_or_entity(p, scope, var);
    }
    return true;
  }
  return true;
}

static cedar_policy *parse_policy(parser *p, size_t index, unsigned flags) {
  cedar_policy *pol = cedar_arena_alloc(p->arena, sizeof *pol);
  if (!pol) return oom(p);
  pol->file = p->file;
  cedar_token *start = peek(p);
  pol->line = start->line;
  pol->column = start->column;
  size_t cap = 0;
  while (peek(p)->kind == TK_AT) {
    next(p);
    cedar_token *k = next(p);
    if (k->kind != TK_IDENT) return fail_unexpected(p, k, "an annotation name");
    cedar_annotation a = {.key = tok_copy(p, k)};
    if (peek(p)->kind == TK_LPAREN) {
      next(p);
      cedar_token *v = next(p);
      if (v->kind != TK_STRING) return fail_unexpected(p, v, "a string annotation value");
      if (!cedar_parser_unescape(p, v, false, &a.value, NULL)) return NULL;
      a.has_value = true;
      if (!expect(p, TK_RPAREN, "`)`")) return NULL;
    } else {
      a.value = (cedar_str){"", 0};
    }
    for (size_t i = 0; i < pol->annotation_count; i++)
      if (cedar_str_eq(pol->annotations[i].key, a.key))
        return fail(p, k, "duplicate annotation: @%.*s", (int)a.key.len, a.key.ptr);
    if (pol->annotation_count == cap) {
      cap = cap ? cap * 2 : 4;
      cedar_annotation *na = cedar_arena_alloc(p->arena, cap * sizeof *na);
      if (!na) return oom(p);
      if (pol->annotation_count) memcpy(na, pol->annotations, pol->annotation_count * sizeof *na);
      pol->annotations = na;
    }
    pol->annotations[pol->annotation_count++] = a;
  }
  cedar_token *eff = next(p);
  if (is_kw(eff, "permit"))
    pol->effect = CEDAR_PERMIT;
  else if (is_kw(eff, "forbid"))
    pol->effect = CEDAR_FORBID;
  else
    return fail_unexpected(p, eff, "`permit` or `forbid`");
  if (!expect(p, TK_LPAREN, "`(`")) return NULL;
  if (!parse_scope(p, &pol->principal, "principal") || !expect(p, TK_COMMA, "`,`") ||
      !parse_scope(p, &pol->action, "action") || !expect(p, TK_COMMA, "`,`") ||
      !parse_scope(p, &pol->resource, "resource"))
    return NULL;
  if (peek(p)->kind == TK_COMMA) next(p); /* upstream accepts one trailing comma in the scope */
  if (!expect(p, TK_RPAREN, "`)`")) return NULL;
  cap = 0;
  while (is_kw(peek(p), "when") || is_kw(peek(p), "unless")) {
    cedar_token *w = next(p);
    cedar_condition c = {.is_when = is_kw(w, "when")};
    if (pol->condition_count >= CEDAR_MAX_CONDITIONS)
      return fail(p, w, "more than %d when/unless clauses in one policy", CEDAR_MAX_CONDITIONS);
    if (!expect(p, TK_LBRACE, "`{`")) return NULL;
    if (peek(p)->kind == TK_RBRACE)
      return fail(p, peek(p), "empty `%s` clause: expected an expression", c.is_when ? "when" : "unless");
    c.body = cedar_parser_expr(p);
    if (!c.body || !expect(p, TK_RBRACE, "`}`")) return NULL;
    if (pol->condition_count == cap) {
      cap = cap ? cap * 2 : 2;
      cedar_condition *nc = cedar_arena_alloc(p->arena, cap * sizeof *nc);
      if (!nc) return oom(p);
      if (pol->condition_count) memcpy(nc, pol->conditions, pol->condition_count * sizeof *nc);
      pol->conditions = nc;
    }
    pol->conditions[pol->condition_count++] = c;
  }
  if (!expect(p, TK_SEMI, "`;`, `when` or `unless`")) return NULL;
  pol->is_template = pol->principal.slot || pol->resource.slot;
  const char *id = NULL;
  if (flags & CEDAR_PARSE_ID_ANNOTATIONS) {
    for (size_t i = 0; i < pol->annotation_count; i++)
      if (cedar_str_eq_c(pol->annotations[i].key, "id") && pol->annotations[i].has_value)
        id = cedar_arena_strndup(p->arena, pol->annotations[i].value.ptr, pol->annotations[i].value.len);
  }
  if (!id) {
    char name[32];
    snprintf(name, sizeof name, "policy%zu", index);
    id = cedar_arena_strndup(p->arena, name, strlen(name));
  }
  if (!id) return oom(p);
  pol->id = id;
  return pol;
}

int cedar_parse_policies(cedar_policy_set *set, const char *text, size_t length, const char *file,
                         unsigned flags, cedar_diagnostic *diag) {
  parser p = {.arena = set->arena, .file = file, .diag = diag};
  if (file && !(p.file = cedar_arena_strndup(set->arena, file, strlen(file)))) return -ENOMEM;
  int r = cedar_parser_lex(&p, text, length);
  if (r < 0) return r;
  size_t base = set->count;
  while (peek(&p)->kind != TK_EOF) {
    cedar_policy *pol = parse_policy(&p, set->count, flags);
    if (!pol) break;
    if (cedar_policy_set_find(set, pol->id)) {
      fail(&p, &(cedar_token){.line = pol->line, .column = pol->column}, "duplicate policy id `%s`", pol->id);
      break;
    }
    if (cedar_policy_set_append(set, pol) < 0) {
      oom(&p);
      break;
    }
  }
  if (p.error) {
    set->count = base;
    return p.error;
  }
  return 0;
}
