/* Engine-internal: Cedar tokens (used by parser.c only). */
#ifndef DOME_POLICY_SYNTAX_LEXER_H
#define DOME_POLICY_SYNTAX_LEXER_H

#include "policy/syntax/syntax.h"

typedef enum cedar_token_kind {
  TK_EOF,
  TK_IDENT,
  TK_INT,
  TK_STRING,
  TK_COLONCOLON,
  TK_EQ,
  TK_NE,
  TK_LE,
  TK_GE,
  TK_AND,
  TK_OR,
  /* single characters, in the order of "()[]{},;.:@?<>!+-*%/=|&" in lexer.c */
  TK_LPAREN,
  TK_RPAREN,
  TK_LBRACKET,
  TK_RBRACKET,
  TK_LBRACE,
  TK_RBRACE,
  TK_COMMA,
  TK_SEMI,
  TK_DOT,
  TK_COLON,
  TK_AT,
  TK_QUESTION,
  TK_LT,
  TK_GT,
  TK_BANG,
  TK_PLUS,
  TK_MINUS,
  TK_STAR,
  TK_SLASH,
  TK_PERCENT,
  TK_ASSIGN,
  TK_PIPE,
  TK_AMP,
} cedar_token_kind;

typedef struct cedar_token {
  cedar_token_kind kind;
  const char *start;
  size_t length;
  unsigned line, column;
} cedar_token;

typedef struct cedar_lexer {
  cedar_arena *arena;
  const char *text;
  size_t length;
  const char *file;
  cedar_diagnostic *diag;
  cedar_token *tokens;
  size_t count, capacity;
} cedar_lexer;

/* Tokenize the whole text (ends with TK_EOF). 0, -EINVAL (diag set), -ENOMEM. */
int cedar_lex(cedar_lexer *lexer);
bool cedar_is_reserved(cedar_str s);
size_t cedar_utf8_valid_prefix(const char *text, size_t length);

#endif
