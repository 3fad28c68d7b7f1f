/* Cedar tokens and string escapes (Cedar "Policy grammar": tokens, string literals). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "policy/syntax/lexer.h"

static bool is_ident_start(unsigned char c) {
  return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}
static bool is_ident_char(unsigned char c) {
  return is_ident_start(c) || (c >= '0' && c <= '9');
}

static const struct {
  const char *text;
  size_t length;
} reserved_words[] = {{"true", 4}, {"false", 5}, {"if", 2},   {"then", 4}, {"else", 4},
                      {"in", 2},   {"is", 2},    {"like", 4}, {"has", 3},  {"__cedar", 7}};

bool cedar_is_reserved(cedar_str s) {
  if (s.len < 2 || s.len > 7) return false;
  for (size_t i = 0; i < sizeof reserved_words / sizeof *reserved_words; i++)
    if (s.len == reserved_words[i].length && memcmp(s.ptr, reserved_words[i].text, s.len) == 0) return true;
  return false;
}

bool cedar_is_identifier(cedar_str s) {
  if (s.len == 0 || !is_ident_start((unsigned char)s.ptr[0])) return false;
  for (size_t i = 1; i < s.len; i++)
    if (!is_ident_char((unsigned char)s.ptr[i])) return false;
  return !cedar_is_reserved(s);
}

bool cedar_is_name(cedar_str s) {
  size_t start = 0;
  for (size_t i = 0; i <= s.len; i++) {
    if (i == s.len || (s.ptr[i] == ':' && i + 1 < s.len && s.ptr[i + 1] == ':')) {
      cedar_str part = {s.ptr + start, i - start};
      if (!cedar_is_identifier(part)) return false;
      if (i == s.len) break;
      i++;
      start = i + 1;
    }
  }
  return true;
}

static void lex_error(cedar_lexer *lx, unsigned line, unsigned col, const char *msg, char c) {
  if (c)
    cedar_diag_set(lx->diag, lx->file, line, col, NULL, "%s `%c`", msg, c);
  else
    cedar_diag_set(lx->diag, lx->file, line, col, NULL, "%s", msg);
}

/* Two-character punctuation, longest first. */
static const struct {
  const char *text;
  cedar_token_kind kind;
} punct2[] = {{"::", TK_COLONCOLON}, {"==", TK_EQ},  {"!=", TK_NE}, {"<=", TK_LE},
              {">=", TK_GE},         {"&&", TK_AND}, {"||", TK_OR}};

/* Length of the valid UTF-8 prefix of s[0..n) (RFC 3629: no overlongs, surrogates or > U+10FFFF). */
size_t cedar_utf8_valid_prefix(const char *text, size_t n) {
  const unsigned char *s = (const unsigned char *)text;
  size_t i = 0;
  while (i < n) {
    unsigned char c = s[i];
    if (c < 0x80) {
      i++;
      continue;
    }
    size_t len;
    uint32_t cp, min;
    if ((c & 0xe0) == 0xc0) {
      len = 2, cp = c & 0x1f, min = 0x80;
    } else if ((c & 0xf0) == 0xe0) {
      len = 3, cp = c & 0x0f, min = 0x800;
    } else if ((c & 0xf8) == 0xf0) {
      len = 4, cp = c & 0x07, min = 0x10000;
    } else {
      return i;
    }
    if (i + len > n) return i;
    for (size_t k = 1; k < len; k++) {
      if ((s[i + k] & 0xc0) != 0x80) return i;
      cp = (cp << 6) | (s[i + k] & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return i;
    i += len;
  }
  return n;
}

int cedar_lex(cedar_lexer *lx) {
  const char *s = lx->text;
  size_t n = lx->length, i = 0;
  unsigned line = 1;
  size_t line_start = 0;
  size_t valid = cedar_utf8_valid_prefix(s, n);
  if (valid < n) {
    unsigned l = 1;
    size_t ls = 0;
    for (size_t k = 0; k < valid; k++)
      if (s[k] == '\n') l++, ls = k + 1;
    cedar_diag_set(lx->diag, lx->file, l, (unsigned)(valid - ls + 1), NULL, "invalid UTF-8 (byte 0x%02x)",
                   (unsigned char)s[valid]);
    return -EINVAL;
  }
  while (1) {
    while (i < n) {
      unsigned char c = (unsigned char)s[i];
      if (c == '\n') {
        line++;
        line_start = i + 1;
        i++;
      } else if (c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v') {
        i++;
      } else if (c == '/' && i + 1 < n && s[i + 1] == '/') {
        while (i < n && s[i] != '\n') i++;
      } else {
        break;
      }
    }
    if (lx->count == lx->capacity) {
      size_t cap = lx->capacity ? lx->capacity * 2 : 256;
      cedar_token *t = cedar_arena_alloc(lx->arena, cap * sizeof *t);
      if (!t) return -ENOMEM;
      if (lx->count) memcpy(t, lx->tokens, lx->count * sizeof *t);
      lx->tokens = t;
      lx->capacity = cap;
    }
    cedar_token *t = &lx->tokens[lx->count];
    t->start = s + i;
    t->line = line;
    t->column = (unsigned)(i - line_start + 1);
    if (i >= n) {
      t->kind = TK_EOF;
      t->length = 0;
      lx->count++;
      return 0;
    }
    unsigned char c = (unsigned char)s[i];
    size_t start = i;
    if (is_ident_start(c)) {
      while (i < n && is_ident_char((unsigned char)s[i])) i++;
      t->kind = TK_IDENT;
    } else if (c >= '0' && c <= '9') {
      while (i < n && s[i] >= '0' && s[i] <= '9') i++;
      t->kind = TK_INT;
    } else if (c == '"') {
      i++;
      while (i < n && s[i] != '"') {
        if (s[i] == '\\' && i + 1 < n) i++;
        if (s[i] == '\n') {
          line++;
          line_start = i + 1;
        }
        i++;
      }
      if (i >= n) {
        lex_error(lx, t->line, t->column, "unterminated string literal", 0);
        return -EINVAL;
      }
      i++;
      t->kind = TK_STRING;
    } else {
      t->kind = TK_EOF;
      for (size_t k = 0; k < sizeof punct2 / sizeof *punct2; k++) {
        if (i + 1 < n && s[i] == punct2[k].text[0] && s[i + 1] == punct2[k].text[1]) {
          t->kind = punct2[k].kind;
          i += 2;
          break;
        }
      }
      if (t->kind == TK_EOF) {
        const char *singles = "()[]{},;.:@?<>!+-*/%=|&";
        const char *p = c ? strchr(singles, c) : NULL;
        if (!p) {
          if (c >= 0x20 && c < 0x7f)
            lex_error(lx, t->line, t->column, "unexpected character", (char)c);
          else
            cedar_diag_set(lx->diag, lx->file, t->line, t->column, NULL, "unexpected byte 0x%02x", c);
          return -EINVAL;
        }
        t->kind = (cedar_token_kind)(TK_LPAREN + (p - singles));
        i++;
      }
    }
    t->length = i - start;
    lx->count++;
  }
}

static int hexval(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

static size_t utf8_encode(uint32_t cp, char *out) {
  if (cp < 0x80) {
    out[0] = (char)cp;
    return 1;
  }
  if (cp < 0x800) {
    out[0] = (char)(0xc0 | (cp >> 6));
    out[1] = (char)(0x80 | (cp & 0x3f));
    return 2;
  }
  if (cp < 0x10000) {
    out[0] = (char)(0xe0 | (cp >> 12));
    out[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
    out[2] = (char)(0x80 | (cp & 0x3f));
    return 3;
  }
  out[0] = (char)(0xf0 | (cp >> 18));
  out[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
  out[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
  out[3] = (char)(0x80 | (cp & 0x3f));
  return 4;
}

int cedar_unescape(cedar_arena *arena, const char *raw, size_t length, bool pattern, cedar_str *out,
                   cedar_pattern *pattern_out, char *err, size_t err_size, size_t *bad_offset) {
  char *text = cedar_arena_alloc(arena, length + 1);
  int16_t *elements = pattern ? cedar_arena_alloc(arena, (length + 1) * sizeof(int16_t)) : NULL;
  if (!text || (pattern && !elements)) return -ENOMEM;
  size_t n = 0, e = 0;
  for (size_t i = 0; i < length;) {
    char c = raw[i];
    if (c == '*' && pattern) {
      elements[e++] = CEDAR_PATTERN_STAR;
      text[n++] = '*';
      i++;
      continue;
    }
    if (c != '\\') {
      text[n++] = c;
      if (pattern) elements[e++] = (int16_t)(unsigned char)c;
      i++;
      continue;
    }
    size_t at = i;
    if (i + 1 >= length) {
      snprintf(err, err_size, "the string ends with a lone `\\`");
      *bad_offset = at;
      return -EINVAL;
    }
    char k = raw[i + 1];
    char enc[4];
    size_t enc_len = 1;
    i += 2;
    switch (k) {
      case 'n':
        enc[0] = '\n';
        break;
      case 'r':
        enc[0] = '\r';
        break;
      case 't':
        enc[0] = '\t';
        break;
      case '\\':
        enc[0] = '\\';
        break;
      case '0':
        enc[0] = '\0';
        break;
      case '\'':
        enc[0] = '\'';
        break;
      case '"':
        enc[0] = '"';
        break;
      case '*':
        if (!pattern) goto bad;
        enc[0] = '*';
        break;
      case 'x': {
        int h1 = i < length ? hexval(raw[i]) : -1, h2 = i + 1 < length ? hexval(raw[i + 1]) : -1;
        if (h1 < 0 || h2 < 0 || h1 > 7) {
          snprintf(err, err_size, "invalid escape `\\x`: expected two hex digits up to 7F");
          *bad_offset = at;
          return -EINVAL;
        }
        enc[0] = (char)(h1 * 16 + h2);
        i += 2;
        break;
      }
      case 'u': {
        if (i >= length || raw[i] != '{') goto bad_unicode;
        i++;
        uint32_t cp = 0;
        size_t digits = 0;
        while (i < length && raw[i] != '}') {
          int h = hexval(raw[i]);
          if (h < 0 || digits >= 6) goto bad_unicode;
          cp = cp * 16 + (uint32_t)h;
          digits++;
          i++;
        }
        if (i >= length || digits == 0) goto bad_unicode;
        i++;
        if (cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) {
          snprintf(err, err_size, "invalid unicode escape: U+%X is not a Unicode scalar value", cp);
          *bad_offset = at;
          return -EINVAL;
        }
        enc_len = utf8_encode(cp, enc);
        break;
      bad_unicode:
        snprintf(err, err_size, "invalid unicode escape: expected \\u{1 to 6 hex digits}");
        *bad_offset = at;
        return -EINVAL;
      }
      default:
      bad:
        snprintf(err, err_size, "invalid escape `\\%c`", k);
        *bad_offset = at;
        return -EINVAL;
    }
    for (size_t j = 0; j < enc_len; j++) {
      text[n++] = enc[j];
      if (pattern) elements[e++] = (int16_t)(unsigned char)enc[j];
    }
  }
  text[n] = 0;
  out->ptr = text;
  out->len = n;
  if (pattern) {
    pattern_out->elements = elements;
    pattern_out->length = e;
  }
  return 0;
}
