/* Engine-internal: the recursive-descent parser's state and token helpers, shared by parser.c
 * (expressions) and policy_parser.c (policies, scopes, annotations). */
#ifndef DOME_POLICY_SYNTAX_PARSER_H
#define DOME_POLICY_SYNTAX_PARSER_H

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/syntax/lexer.h"

typedef struct parser {
  cedar_lexer lx;
  cedar_arena *arena;
  size_t pos;
  const char *file;
  cedar_diagnostic *diag;
  int error;
  unsigned depth;
} parser;

static inline cedar_token *peek(parser *p) {
  return &p->lx.tokens[p->pos];
}
static inline cedar_token *peek_at(parser *p, size_t ahead) {
  size_t i = p->pos + ahead;
  return &p->lx.tokens[i < p->lx.count ? i : p->lx.count - 1];
}
static inline cedar_token *next(parser *p) {
  cedar_token *t = &p->lx.tokens[p->pos];
  if (t->kind != TK_EOF) p->pos++;
  return t;
}
static inline bool is_kw(const cedar_token *t, const char *word) {
  return t->kind == TK_IDENT && cedar_str_eq_c((cedar_str){t->start, t->length}, word);
}
static inline cedar_str tok_str(const cedar_token *t) {
  return (cedar_str){t->start, t->length};
}

/* The token's text copied into the arena (the source text does not outlive parsing). */
static inline cedar_str tok_copy(parser *p, const cedar_token *t) {
  char *s = cedar_arena_strndup(p->arena, t->start, t->length);
  if (!s) {
    p->error = -ENOMEM;
    return (cedar_str){"", 0};
  }
  return (cedar_str){s, t->length};
}

__attribute__((format(printf, 3, 4))) static inline void *fail(parser *p, const cedar_token *t,
                                                               const char *format, ...) {
  if (p->error) return NULL;
  p->error = -EINVAL;
  if (!p->diag) return NULL;
  char msg[sizeof p->diag->message];
  va_list ap;
  va_start(ap, format);
  vsnprintf(msg, sizeof msg, format, ap);
  va_end(ap);
  cedar_diag_set(p->diag, p->file, t->line, t->column, NULL, "%s", msg);
  return NULL;
}

static inline void *fail_unexpected(parser *p, const cedar_token *t, const char *expected) {
  if (t->kind == TK_EOF) return fail(p, t, "unexpected end of input, expected %s", expected);
  int n = t->length > 40 ? 40 : (int)t->length;
  return fail(p, t, "unexpected token `%.*s`, expected %s", n, t->start, expected);
}

static inline void *oom(parser *p) {
  if (!p->error) {
    p->error = -ENOMEM;
    cedar_diag_set(p->diag, p->file, 0, 0, NULL, "out of memory");
  }
  return NULL;
}

static inline bool expect(parser *p, cedar_token_kind kind, const char *what) {
  if (peek(p)->kind == kind) {
    next(p);
    return true;
  }
  fail_unexpected(p, peek(p), what);
  return false;
}

/* Shared by both halves (parser.c). */
bool cedar_parser_unescape(parser *p, const cedar_token *t, bool pattern, cedar_str *out, cedar_pattern *pat);
bool cedar_parser_check_ident(parser *p, const cedar_token *t);
bool cedar_parser_path(parser *p, cedar_str *out);
bool cedar_parser_entity(parser *p, cedar_euid *uid);
cedar_expr *cedar_parser_expr(parser *p);
int cedar_parser_lex(parser *p, const char *text, size_t length);

#endif
