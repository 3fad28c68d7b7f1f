/* Recursive-descent parser for Cedar policies (Cedar "Policy grammar", language version 4.5).
 *
 * Precedence, low to high: if-then-else; ||; &&; relations (== != < <= > >= in has like is, not
 * associative); + -; *; unary ! and - (at most 4 of one kind); member access and method calls; primary.
 * Nesting is bounded by CEDAR_MAX_DEPTH, both the parser's recursion and the depth of the tree built. */
#include "policy/syntax/parser.h"

static cedar_expr *mk(parser *p, const cedar_token *at, cedar_expr_kind kind, cedar_expr *a, cedar_expr *b,
                      cedar_expr *c) {
  cedar_expr *e = cedar_expr_new(p->arena, kind, a, b, c);
  if (!e) return oom(p);
  e->line = at->line;
  e->column = at->column;
  if (e->depth > CEDAR_MAX_DEPTH) {
    fail(p, at, "expression nested deeper than %d levels", CEDAR_MAX_DEPTH);
    p->error = -E2BIG;
    return NULL;
  }
  return e;
}

bool cedar_parser_unescape(parser *p, const cedar_token *t, bool pattern, cedar_str *out,
                           cedar_pattern *pat) {
  char msg[200];
  size_t bad = 0;
  int r = cedar_unescape(p->arena, t->start + 1, t->length - 2, pattern, out, pat, msg, sizeof msg, &bad);
  if (r == -ENOMEM) return oom(p), false;
  if (r < 0) {
    /* Column of the bad escape: count bytes on the token's line (strings may span lines). */
    unsigned line = t->line, col = t->column + 1;
    for (size_t i = 0; i < bad; i++) {
      if (t->start[1 + i] == '\n') {
        line++;
        col = 1;
      } else {
        col++;
      }
    }
    cedar_token where = *t;
    where.line = line;
    where.column = col;
    fail(p, &where, "%s", msg);
    return false;
  }
  return true;
}

/* An identifier usable as a name part, attribute or record key (not reserved). */
bool cedar_parser_check_ident(parser *p, const cedar_token *t) {
  if (t->kind != TK_IDENT) {
    fail_unexpected(p, t, "an identifier");
    return false;
  }
  if (cedar_is_reserved(tok_str(t))) {
    if (is_kw(t, "__cedar"))
      fail(p, t, "the name `__cedar` is reserved");
    else
      fail(p, t, "this identifier is reserved and cannot be used: %.*s", (int)t->length, t->start);
    return false;
  }
  return true;
}

/* Path: IDENT {'::' IDENT}, stopping before '::' STRING. */
bool cedar_parser_path(parser *p, cedar_str *out) {
  cedar_token *first = peek(p);
  if (!cedar_parser_check_ident(p, first)) return false;
  next(p);
  const char *end = first->start + first->length;
  while (peek(p)->kind == TK_COLONCOLON && peek_at(p, 1)->kind == TK_IDENT) {
    next(p);
    cedar_token *t = next(p);
    if (!cedar_parser_check_ident(p, t)) return false;
    end = t->start + t->length;
  }
  /* Re-assemble without whitespace/comments between the parts. */
  cedar_buf b = {0};
  const char *s = first->start;
  for (const char *q = s; q < end;) {
    if (*q == ':' || (*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z') || (*q >= '0' && *q <= '9') ||
        *q == '_') {
      cedar_buf_append(&b, q, 1);
      q++;
    } else if (*q == '/' && q + 1 < end && q[1] == '/') {
      while (q < end && *q != '\n') q++;
    } else {
      q++;
    }
  }
  char *joined = cedar_buf_finish(&b);
  if (!joined) return oom(p), false;
  out->ptr = cedar_arena_strndup(p->arena, joined, strlen(joined));
  out->len = strlen(joined);
  free(joined);
  if (!out->ptr) return oom(p), false;
  return true;
}

/* Entity uid: Path '::' STRING. */
bool cedar_parser_entity(parser *p, cedar_euid *uid) {
  if (!cedar_parser_path(p, &uid->type)) return false;
  if (!expect(p, TK_COLONCOLON, "`::` and an entity id")) return false;
  cedar_token *t = peek(p);
  if (t->kind != TK_STRING) return fail_unexpected(p, t, "a string (the entity id)"), false;
  next(p);
  return cedar_parser_unescape(p, t, false, &uid->id, NULL);
}

static cedar_expr *parse_add(parser *p);

/* '(' [expr {',' expr} [',']] ')' after the '(' was consumed, or '[' ... ']'. */
static bool parse_list(parser *p, cedar_token_kind close, cedar_expr ***items, size_t *count) {
  size_t cap = 0, n = 0;
  cedar_expr **v = NULL;
  while (peek(p)->kind != close) {
    cedar_expr *e = cedar_parser_expr(p);
    if (!e) return false;
    if (n == cap) {
      cap = cap ? cap * 2 : 4;
      cedar_expr **nv = cedar_arena_alloc(p->arena, cap * sizeof *nv);
      if (!nv) return oom(p), false;
      if (n) memcpy(nv, v, n * sizeof *v);
      v = nv;
    }
    v[n++] = e;
    if (peek(p)->kind == TK_COMMA) {
      next(p);
      continue;
    }
    if (peek(p)->kind != close)
      return fail_unexpected(p, peek(p), close == TK_RPAREN ? "`,` or `)`" : "`,` or `]`"), false;
  }
  next(p);
  *items = v;
  *count = n;
  return true;
}

static const struct {
  const char *name;
  cedar_expr_kind kind;
  unsigned arity; /* arguments besides the receiver */
} builtin_methods[] = {{"contains", CX_CONTAINS, 1},        {"containsAll", CX_CONTAINS_ALL, 1},
                       {"containsAny", CX_CONTAINS_ANY, 1}, {"isEmpty", CX_IS_EMPTY, 0},
                       {"getTag", CX_GET_TAG, 1},           {"hasTag", CX_HAS_TAG, 1}};

static cedar_expr *make_call(parser *p, const cedar_token *at, cedar_str name, cedar_expr *receiver,
                             cedar_expr **args, size_t count) {
  char cname[64];
  snprintf(cname, sizeof cname, "%.*s", (int)(name.len < 63 ? name.len : 63), name.ptr);
  if (receiver) {
    for (size_t i = 0; i < sizeof builtin_methods / sizeof *builtin_methods; i++) {
      if (!cedar_str_eq_c(name, builtin_methods[i].name)) continue;
      if (count != builtin_methods[i].arity)
        return fail(p, at, "call to `%s` requires exactly %u argument%s, but got %zu argument%s", cname,
                    builtin_methods[i].arity, builtin_methods[i].arity == 1 ? "" : "s", count,
                    count == 1 ? "" : "s");
      return mk(p, at, builtin_methods[i].kind, receiver, count ? args[0] : NULL, NULL);
    }
  }
  if (!receiver && cedar_str_eq_c(name, "unknown")) {
    /* unknown("name"): a value left for partial evaluation (upstream's partial-eval extension). Evaluating
     * it concretely is an error, as upstream; a non-literal name is kept as the unnamed unknown. */
    cedar_expr *u = mk(p, at, CX_UNKNOWN, NULL, NULL, NULL);
    if (!u) return NULL;
    u->u.s = count > 0 && args[0]->kind == CX_STRING ? args[0]->u.s : (cedar_str){"", 0};
    return u;
  }
  const cedar_extension_function *fn = name.len < 63 ? cedar_extension_function_find(cname) : NULL;
  if (!fn) return fail(p, at, "`%s` is not a valid %s", cname, receiver ? "method" : "function");
  if (fn->method_style && !receiver) return fail(p, at, "`%s` is a method, not a function", cname);
  if (!fn->method_style && receiver) return fail(p, at, "`%s` is a function, not a method", cname);
  size_t total = count + (receiver ? 1 : 0);
  cedar_expr **all = cedar_arena_alloc(p->arena, (total + 1) * sizeof *all);
  if (!all) return oom(p);
  size_t k = 0;
  if (receiver) all[k++] = receiver;
  for (size_t i = 0; i < count; i++) all[k++] = args[i];
  cedar_expr *e = mk(p, at, CX_CALL, NULL, NULL, NULL);
  if (!e) return NULL;
  e->u.list.items = all;
  e->u.list.count = total;
  e->u.list.name = name;
  e->u.list.function = fn;
  unsigned d = 0;
  for (size_t i = 0; i < total; i++)
    if (all[i]->depth > d) d = all[i]->depth;
  e->depth = (uint16_t)(d + 1);
  if (e->depth > CEDAR_MAX_DEPTH) {
    fail(p, at, "expression nested deeper than %d levels", CEDAR_MAX_DEPTH);
    p->error = -E2BIG;
    return NULL;
  }
  return e;
}

static cedar_expr *parse_record(parser *p, cedar_token *open) {
  size_t cap = 0, n = 0;
  cedar_expr **vals = NULL;
  cedar_str *keys = NULL;
  unsigned d = 0;
  while (peek(p)->kind != TK_RBRACE) {
    cedar_token *kt = next(p);
    cedar_str key;
    if (kt->kind == TK_STRING) {
      if (!cedar_parser_unescape(p, kt, false, &key, NULL)) return NULL;
    } else if (kt->kind == TK_IDENT) {
      if (!cedar_parser_check_ident(p, kt)) return NULL;
      key = tok_copy(p, kt);
    } else {
      return fail_unexpected(p, kt, "a record key (identifier or string)");
    }
    for (size_t i = 0; i < n; i++)
      if (cedar_str_eq(keys[i], key))
        return fail(p, kt, "duplicate key `%.*s` in record literal", (int)(key.len > 60 ? 60 : key.len),
                    key.ptr);
    if (!expect(p, TK_COLON, "`:`")) return NULL;
    cedar_expr *v = cedar_parser_expr(p);
    if (!v) return NULL;
    if (n == cap) {
      cap = cap ? cap * 2 : 4;
      cedar_expr **nv = cedar_arena_alloc(p->arena, cap * sizeof *nv);
      cedar_str *nk = cedar_arena_alloc(p->arena, cap * sizeof *nk);
      if (!nv || !nk) return oom(p);
      if (n) {
        memcpy(nv, vals, n * sizeof *vals);
        memcpy(nk, keys, n * sizeof *keys);
      }
      vals = nv;
      keys = nk;
    }
    vals[n] = v;
    keys[n++] = key;
    if (v->depth > d) d = v->depth;
    if (peek(p)->kind == TK_COMMA) {
      next(p);
      continue;
    }
    if (peek(p)->kind != TK_RBRACE) return fail_unexpected(p, peek(p), "`,` or `}`");
  }
  next(p);
  cedar_expr *e = mk(p, open, CX_RECORD, NULL, NULL, NULL);
  if (!e) return NULL;
  e->u.list.items = vals;
  e->u.list.keys = keys;
  e->u.list.count = n;
  e->depth = (uint16_t)(d + 1);
  return e;
}

static cedar_expr *parse_primary(parser *p) {
  cedar_token *t = peek(p);
  switch (t->kind) {
    case TK_INT: {
      next(p);
      uint64_t v = 0;
      for (size_t i = 0; i < t->length; i++) {
        unsigned dgt = (unsigned)(t->start[i] - '0');
        if (v > (UINT64_MAX - dgt) / 10 || v * 10 + dgt > (uint64_t)INT64_MAX)
          return fail(p, t, "integer literal `%.*s` is too large", (int)(t->length > 40 ? 40 : t->length),
                      t->start);
        v = v * 10 + dgt;
      }
      cedar_expr *e = mk(p, t, CX_LONG, NULL, NULL, NULL);
      if (e) e->u.number = (int64_t)v;
      return e;
    }
    case TK_STRING: {
      next(p);
      cedar_expr *e = mk(p, t, CX_STRING, NULL, NULL, NULL);
      if (e && !cedar_parser_unescape(p, t, false, &e->u.s, NULL)) return NULL;
      return e;
    }
    case TK_QUESTION: {
      cedar_token *n = peek_at(p, 1);
      if (is_kw(n, "principal") || is_kw(n, "resource"))
        return fail(p, t, "template slot ?%.*s is only allowed in the policy scope", (int)n->length,
                    n->start);
      return fail_unexpected(p, t, "an expression");
    }
    case TK_LPAREN: {
      next(p);
      cedar_expr *e = cedar_parser_expr(p);
      if (!e || !expect(p, TK_RPAREN, "`)`")) return NULL;
      return e;
    }
    case TK_LBRACKET: {
      next(p);
      cedar_expr **items;
      size_t count;
      if (!parse_list(p, TK_RBRACKET, &items, &count)) return NULL;
      cedar_expr *e = mk(p, t, CX_SET, NULL, NULL, NULL);
      if (!e) return NULL;
      e->u.list.items = items;
      e->u.list.count = count;
      unsigned d = 0;
      for (size_t i = 0; i < count; i++)
        if (items[i]->depth > d) d = items[i]->depth;
      e->depth = (uint16_t)(d + 1);
      return e;
    }
    case TK_LBRACE:
      next(p);
      return parse_record(p, t);
    case TK_IDENT: {
      if (is_kw(t, "true") || is_kw(t, "false")) {
        next(p);
        cedar_expr *e = mk(p, t, CX_BOOL, NULL, NULL, NULL);
        if (e) e->u.boolean = is_kw(t, "true");
        return e;
      }
      if (peek_at(p, 1)->kind != TK_COLONCOLON) {
        static const char *const vars[] = {"principal", "action", "resource", "context"};
        for (int i = 0; i < 4; i++) {
          if (is_kw(t, vars[i])) {
            next(p);
            cedar_expr *e = mk(p, t, CX_VAR, NULL, NULL, NULL);
            if (e) e->var = (uint8_t)i;
            return e;
          }
        }
      }
      cedar_str path;
      if (!cedar_parser_path(p, &path)) return NULL;
      if (peek(p)->kind == TK_COLONCOLON && peek_at(p, 1)->kind == TK_STRING) {
        next(p);
        cedar_token *idt = next(p);
        cedar_expr *e = mk(p, t, CX_ENTITY, NULL, NULL, NULL);
        if (!e) return NULL;
        e->u.uid.type = path;
        if (!cedar_parser_unescape(p, idt, false, &e->u.uid.id, NULL)) return NULL;
        return e;
      }
      if (peek(p)->kind == TK_LPAREN) {
        next(p);
        cedar_expr **args;
        size_t count;
        if (!parse_list(p, TK_RPAREN, &args, &count)) return NULL;
        return make_call(p, t, path, NULL, args, count);
      }
      return fail(p, t,
                  "unexpected identifier `%.*s`: expected a variable (principal, action, resource, "
                  "context), an entity `Type::\"id\"` or a function call",
                  (int)(path.len > 60 ? 60 : path.len), path.ptr);
    }
    default:
      return fail_unexpected(p, t, "an expression");
  }
}

static cedar_expr *parse_member(parser *p) {
  cedar_expr *e = parse_primary(p);
  while (e) {
    cedar_token *t = peek(p);
    if (t->kind == TK_DOT) {
      next(p);
      cedar_token *name = next(p);
      if (!cedar_parser_check_ident(p, name)) return NULL;
      if (peek(p)->kind == TK_LPAREN) {
        next(p);
        cedar_expr **args;
        size_t count;
        if (!parse_list(p, TK_RPAREN, &args, &count)) return NULL;
        e = make_call(p, name, tok_copy(p, name), e, args, count);
      } else {
        cedar_expr *g = mk(p, name, CX_GET_ATTR, e, NULL, NULL);
        if (!g) return NULL;
        g->u.op.name = tok_copy(p, name);
        e = g;
      }
    } else if (t->kind == TK_LBRACKET) {
      next(p);
      cedar_token *s = next(p);
      if (s->kind != TK_STRING) return fail_unexpected(p, s, "a string attribute name");
      cedar_expr *g = mk(p, s, CX_GET_ATTR, e, NULL, NULL);
      if (!g || !cedar_parser_unescape(p, s, false, &g->u.op.name, NULL)) return NULL;
      if (!expect(p, TK_RBRACKET, "`]`")) return NULL;
      e = g;
    } else {
      break;
    }
  }
  return e;
}

static cedar_expr *parse_unary(parser *p) {
  cedar_token *t = peek(p);
  if (t->kind != TK_BANG && t->kind != TK_MINUS) return parse_member(p);
  cedar_token_kind op = t->kind;
  unsigned count = 0;
  while (peek(p)->kind == op) {
    next(p);
    count++;
  }
  if (count > 4) return fail(p, t, "too many occurrences of `%c`", op == TK_BANG ? '!' : '-');
  if (peek(p)->kind == TK_BANG || peek(p)->kind == TK_MINUS)
    return fail_unexpected(p, peek(p), "an expression");
  cedar_expr *e;
  cedar_token *lit = peek(p);
  cedar_token_kind after = peek_at(p, 1)->kind;
  if (op == TK_MINUS && lit->kind == TK_INT && after != TK_DOT && after != TK_LBRACKET) {
    /* Negative literal: `-N` is the literal -N (so i64::MIN is writable); more dashes negate it. */
    next(p);
    uint64_t v = 0;
    for (size_t i = 0; i < lit->length; i++) {
      unsigned dgt = (unsigned)(lit->start[i] - '0');
      if (v > (UINT64_MAX - dgt) / 10 || v * 10 + dgt > (uint64_t)INT64_MAX + 1)
        return fail(p, lit, "integer literal `-%.*s` is too small",
                    (int)(lit->length > 40 ? 40 : lit->length), lit->start);
      v = v * 10 + dgt;
    }
    e = mk(p, t, CX_LONG, NULL, NULL, NULL);
    if (!e) return NULL;
    e->u.number = v == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)v;
    count--;
  } else {
    e = parse_member(p);
  }
  for (unsigned i = 0; i < count && e; i++) e = mk(p, t, op == TK_BANG ? CX_NOT : CX_NEG, e, NULL, NULL);
  return e;
}

static cedar_expr *parse_mul(parser *p) {
  cedar_expr *a = parse_unary(p);
  while (a) {
    cedar_token *t = peek(p);
    if (t->kind == TK_SLASH || t->kind == TK_PERCENT)
      return fail(p, t, "division and remainder (`%c`) are not supported in Cedar",
                  t->kind == TK_SLASH ? '/' : '%');
    if (t->kind != TK_STAR) break;
    next(p);
    cedar_expr *b = parse_unary(p);
    if (!b) return NULL;
    a = mk(p, t, CX_MUL, a, b, NULL);
  }
  return a;
}

static cedar_expr *parse_add(parser *p) {
  cedar_expr *a = parse_mul(p);
  while (a) {
    cedar_token *t = peek(p);
    if (t->kind != TK_PLUS && t->kind != TK_MINUS) break;
    next(p);
    cedar_expr *b = parse_mul(p);
    if (!b) return NULL;
    a = mk(p, t, t->kind == TK_PLUS ? CX_ADD : CX_SUB, a, b, NULL);
  }
  return a;
}

static bool is_relation_start(const cedar_token *t) {
  return t->kind == TK_EQ || t->kind == TK_NE || t->kind == TK_LT || t->kind == TK_LE || t->kind == TK_GT ||
         t->kind == TK_GE || is_kw(t, "in") || is_kw(t, "has") || is_kw(t, "like") || is_kw(t, "is");
}

static cedar_expr *parse_has(parser *p, cedar_token *op, cedar_expr *target) {
  cedar_token *t = peek(p);
  if (t->kind == TK_STRING) {
    next(p);
    cedar_expr *h = mk(p, op, CX_HAS_ATTR, target, NULL, NULL);
    if (!h || !cedar_parser_unescape(p, t, false, &h->u.op.name, NULL)) return NULL;
    return h;
  }
  /* `e has a.b.c` is `e has a && e.a has b && e.a.b has c`. */
  if (!cedar_parser_check_ident(p, t)) return NULL;
  next(p);
  cedar_expr *h = mk(p, op, CX_HAS_ATTR, target, NULL, NULL);
  if (!h) return NULL;
  h->u.op.name = tok_copy(p, t);
  cedar_expr *acc = h, *cur = target;
  cedar_str prev = tok_copy(p, t);
  while (peek(p)->kind == TK_DOT) {
    next(p);
    cedar_token *n = next(p);
    if (!cedar_parser_check_ident(p, n)) return NULL;
    cedar_expr *g = mk(p, n, CX_GET_ATTR, cur, NULL, NULL);
    if (!g) return NULL;
    g->u.op.name = prev;
    cur = g;
    cedar_expr *hn = mk(p, n, CX_HAS_ATTR, cur, NULL, NULL);
    if (!hn) return NULL;
    hn->u.op.name = tok_copy(p, n);
    acc = mk(p, op, CX_AND, acc, hn, NULL);
    if (!acc) return NULL;
    prev = tok_copy(p, n);
  }
  return acc;
}

static cedar_expr *parse_relation(parser *p) {
  cedar_expr *a = parse_add(p);
  if (!a) return NULL;
  cedar_token *t = peek(p);
  if (!is_relation_start(t)) {
    if (t->kind == TK_ASSIGN) return fail(p, t, "unexpected `=`: use `==` for equality");
    return a;
  }
  next(p);
  cedar_expr *r = NULL;
  if (is_kw(t, "has")) {
    r = parse_has(p, t, a);
  } else if (is_kw(t, "like")) {
    cedar_token *s = next(p);
    if (s->kind != TK_STRING) return fail_unexpected(p, s, "a string pattern after `like`");
    r = mk(p, t, CX_LIKE, a, NULL, NULL);
    if (r) {
      cedar_str text;
      if (!cedar_parser_unescape(p, s, true, &text, &r->u.op.pattern)) return NULL;
    }
  } else if (is_kw(t, "is")) {
    cedar_str type;
    if (!cedar_parser_path(p, &type)) return NULL;
    cedar_expr *in = NULL;
    cedar_token *it = peek(p);
    if (is_kw(it, "in")) {
      next(p);
      in = parse_add(p);
      if (!in) return NULL;
    }
    r = mk(p, t, CX_IS, a, in, NULL);
    if (r) r->u.op.name = type;
  } else {
    cedar_expr_kind kind = t->kind == TK_EQ   ? CX_EQ
                           : t->kind == TK_NE ? CX_NE
                           : t->kind == TK_LT ? CX_LT
                           : t->kind == TK_LE ? CX_LE
                           : t->kind == TK_GT ? CX_GT
                           : t->kind == TK_GE ? CX_GE
                                              : CX_IN;
    cedar_expr *b = parse_add(p);
    if (!b) return NULL;
    r = mk(p, t, kind, a, b, NULL);
  }
  if (r && is_relation_start(peek(p)))
    return fail(p, peek(p),
                "multiple relational operators (>, ==, in, etc.) must be used with parentheses to make "
                "ordering explicit");
  return r;
}

static cedar_expr *parse_and(parser *p) {
  cedar_expr *a = parse_relation(p);
  while (a && peek(p)->kind == TK_AND) {
    cedar_token *t = next(p);
    cedar_expr *b = parse_relation(p);
    if (!b) return NULL;
    a = mk(p, t, CX_AND, a, b, NULL);
  }
  return a;
}

static cedar_expr *parse_or(parser *p) {
  cedar_expr *a = parse_and(p);
  while (a && peek(p)->kind == TK_OR) {
    cedar_token *t = next(p);
    cedar_expr *b = parse_and(p);
    if (!b) return NULL;
    a = mk(p, t, CX_OR, a, b, NULL);
  }
  return a;
}

cedar_expr *cedar_parser_expr(parser *p) {
  cedar_token *t = peek(p);
  if (++p->depth > CEDAR_MAX_DEPTH) {
    fail(p, t, "expression nested deeper than %d levels", CEDAR_MAX_DEPTH);
    p->error = -E2BIG;
    return NULL;
  }
  cedar_expr *e;
  if (is_kw(t, "if")) {
    next(p);
    cedar_expr *c = cedar_parser_expr(p), *th = NULL, *el = NULL;
    if (c && (is_kw(peek(p), "then") ? (next(p), true) : (fail_unexpected(p, peek(p), "`then`"), false)))
      th = cedar_parser_expr(p);
    if (th && (is_kw(peek(p), "else") ? (next(p), true) : (fail_unexpected(p, peek(p), "`else`"), false)))
      el = cedar_parser_expr(p);
    e = el ? mk(p, t, CX_IF, c, th, el) : NULL;
  } else {
    e = parse_or(p);
  }
  p->depth--;
  return e;
}

int cedar_parser_lex(parser *p, const char *text, size_t length) {
  if (length > CEDAR_MAX_TEXT_BYTES) {
    cedar_diag_set(p->diag, p->file, 0, 0, NULL, "input of %zu bytes is over the limit of %u bytes", length,
                   CEDAR_MAX_TEXT_BYTES);
    return -E2BIG;
  }
  p->lx = (cedar_lexer){.arena = p->arena, .text = text, .length = length, .file = p->file, .diag = p->diag};
  return cedar_lex(&p->lx);
}

int cedar_parse_expression(cedar_arena *arena, const char *text, size_t length, const char *file,
                           cedar_expr **out, cedar_diagnostic *diag) {
  parser p = {.arena = arena, .file = file, .diag = diag};
  int r = cedar_parser_lex(&p, text, length);
  if (r < 0) return r;
  cedar_expr *e = cedar_parser_expr(&p);
  if (e && peek(&p)->kind != TK_EOF) fail_unexpected(&p, peek(&p), "end of input");
  if (p.error) return p.error;
  *out = e;
  return 0;
}
