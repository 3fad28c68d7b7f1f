/* Parser of the human-readable Cedar schema syntax (.cedarschema) into raw declarations.
 *
 * Grammar (Cedar language reference, "Schema format" grammar):
 *   Schema    := {Namespace}
 *   Namespace := 'namespace' Path '{' {Decl} '}' | Decl
 *   Decl      := Entity | Action | TypeDecl            (each may carry annotations @id or @id("..."))
 *   Entity    := 'entity' Idents ['in' EntOrTyps] [['='] RecType] ['tags' Type] ';'
 *              | 'entity' Idents 'enum' '[' STR {',' STR} [','] ']' ';'
 *   Action    := 'action' Names ['in' RefOrRefs] [AppliesTo] ';'
 *   TypeDecl  := 'type' IDENT '=' Type ';'
 *   Type      := Path | 'Set' '<' Type '>' | RecType
 *   RecType   := '{' [Name ['?'] ':' Type {',' Name ['?'] ':' Type} [',']] '}'
 *   AppliesTo := 'appliesTo' '{' {('principal'|'resource') ':' EntOrTyps | 'context' ':' (RecType|Path)}
 *                separated by ',' with an optional trailing ',' '}'
 *   Ref       := Path '::' STR | Name          RefOrRefs := Ref | '[' [Ref {',' Ref} [',']] ']'
 *   EntOrTyps := Path | '[' [Path {',' Path} [',']] ']'
 * Comments are `//` to the end of the line. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "policy/schema/schema_internal.h"

typedef enum token_kind {
  TOKEN_END,
  TOKEN_IDENT,
  TOKEN_STRING,
  TOKEN_PUNCT, /* text[0] holds the character; "::" is TOKEN_PATHSEP */
  TOKEN_PATHSEP,
} token_kind;

typedef struct token {
  token_kind kind;
  const char *start;
  size_t length;
  char *value; /* unescaped string / identifier (arena) */
  unsigned line, column;
} token;

typedef struct parser {
  schema_arena *arena;
  const char *text, *end, *cursor;
  unsigned line;
  const char *line_start;
  const char *file;
  cedar_schema_error *err;
  token current;
  raw_schema *raw;
  const char *name_space;
  int depth;
  int status; /* first error */
} parser;

static int fail(parser *p, unsigned line, unsigned column, const char *format, ...)
    __attribute__((format(printf, 4, 5)));

static int fail(parser *p, unsigned line, unsigned column, const char *format, ...) {
  if (p->status) return p->status;
  char message[400];
  va_list ap;
  va_start(ap, format);
  vsnprintf(message, sizeof message, format, ap);
  va_end(ap);
  p->status = cedar_schema_set_error(p->err, p->file, line, column, "%s", message);
  return p->status;
}

static unsigned column_of(parser *p, const char *at) {
  return (unsigned)(at - p->line_start) + 1;
}

static void describe(const token *t, char *buf, size_t size) {
  if (t->kind == TOKEN_END)
    snprintf(buf, size, "end of input");
  else
    snprintf(buf, size, "`%.*s`", (int)(t->length > 40 ? 40 : t->length), t->start);
}

static int hex(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* Unescape a Cedar string body [start, end) into the arena. */
static char *unescape(parser *p, const char *start, const char *end, unsigned line, unsigned column) {
  char *out = cedar_schema_arena_alloc(p->arena, (size_t)(end - start) * 2 + 1);
  if (!out) return NULL;
  size_t n = 0;
  for (const char *s = start; s < end; s++) {
    if (*s != '\\') {
      out[n++] = *s;
      continue;
    }
    s++;
    if (s >= end) break;
    switch (*s) {
      case 'n':
        out[n++] = '\n';
        break;
      case 'r':
        out[n++] = '\r';
        break;
      case 't':
        out[n++] = '\t';
        break;
      case '0':
        out[n++] = (char)0xC0, out[n++] = (char)0x80;
        break; /* NUL, encoded (see schema.h) */
      case '\\':
        out[n++] = '\\';
        break;
      case '\'':
        out[n++] = '\'';
        break;
      case '"':
        out[n++] = '"';
        break;
      case '*':
        out[n++] = '*';
        break;
      case 'x': {
        int h1 = s + 1 < end ? hex(s[1]) : -1, h2 = s + 2 < end ? hex(s[2]) : -1;
        if (h1 < 0 || h2 < 0 || h1 > 7) {
          fail(p, line, column, "invalid \\x escape in string (two hex digits up to 7F)");
          return NULL;
        }
        if (h1 == 0 && h2 == 0)
          out[n++] = (char)0xC0, out[n++] = (char)0x80;
        else
          out[n++] = (char)(h1 * 16 + h2);
        s += 2;
        break;
      }
      case 'u': {
        if (s + 1 >= end || s[1] != '{') {
          fail(p, line, column, "invalid \\u escape in string (expected \\u{...})");
          return NULL;
        }
        s += 2;
        unsigned long cp = 0;
        int digits = 0;
        while (s < end && *s != '}' && digits < 7) {
          int h = hex(*s);
          if (h < 0) break;
          cp = cp * 16 + (unsigned)h;
          digits++;
          s++;
        }
        if (s >= end || *s != '}' || digits == 0 || digits > 6 || cp > 0x10FFFF ||
            (cp >= 0xD800 && cp <= 0xDFFF)) {
          fail(p, line, column, "invalid \\u{...} escape in string");
          return NULL;
        }
        if (cp == 0) {
          out[n++] = (char)0xC0, out[n++] = (char)0x80;
        } else if (cp < 0x80) {
          out[n++] = (char)cp;
        } else if (cp < 0x800) {
          out[n++] = (char)(0xC0 | (cp >> 6));
          out[n++] = (char)(0x80 | (cp & 0x3F));
        } else if (cp < 0x10000) {
          out[n++] = (char)(0xE0 | (cp >> 12));
          out[n++] = (char)(0x80 | ((cp >> 6) & 0x3F));
          out[n++] = (char)(0x80 | (cp & 0x3F));
        } else {
          out[n++] = (char)(0xF0 | (cp >> 18));
          out[n++] = (char)(0x80 | ((cp >> 12) & 0x3F));
          out[n++] = (char)(0x80 | ((cp >> 6) & 0x3F));
          out[n++] = (char)(0x80 | (cp & 0x3F));
        }
        break;
      }
      default:
        fail(p, line, column, "invalid escape `\\%c` in string", *s);
        return NULL;
    }
  }
  out[n] = '\0';
  return out;
}

static bool is_ident_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
static bool is_ident_char(char c) {
  return is_ident_start(c) || (c >= '0' && c <= '9');
}

static void advance(parser *p) {
  if (p->status) {
    p->current.kind = TOKEN_END;
    return;
  }
  for (;;) {
    while (p->cursor < p->end && (*p->cursor == ' ' || *p->cursor == '\t' || *p->cursor == '\r' ||
                                  *p->cursor == '\n' || *p->cursor == '\f' || *p->cursor == '\v')) {
      if (*p->cursor == '\n') {
        p->line++;
        p->line_start = p->cursor + 1;
      }
      p->cursor++;
    }
    if (p->cursor + 1 < p->end && p->cursor[0] == '/' && p->cursor[1] == '/') {
      while (p->cursor < p->end && *p->cursor != '\n') p->cursor++;
      continue;
    }
    break;
  }
  token *t = &p->current;
  t->start = p->cursor;
  t->line = p->line;
  t->column = column_of(p, p->cursor);
  t->value = NULL;
  if (p->cursor >= p->end) {
    t->kind = TOKEN_END;
    t->length = 0;
    return;
  }
  char c = *p->cursor;
  if (is_ident_start(c)) {
    const char *s = p->cursor;
    while (p->cursor < p->end && is_ident_char(*p->cursor)) p->cursor++;
    t->kind = TOKEN_IDENT;
    t->length = (size_t)(p->cursor - s);
    t->value = cedar_schema_arena_strndup(p->arena, s, t->length);
    if (!t->value) {
      p->status = -ENOMEM;
      t->kind = TOKEN_END;
    }
    return;
  }
  if (c == '"') {
    const char *s = ++p->cursor;
    while (p->cursor < p->end && *p->cursor != '"') {
      if (*p->cursor == '\\' && p->cursor + 1 < p->end) p->cursor++;
      if (*p->cursor == '\n') {
        p->line++;
        p->line_start = p->cursor + 1;
      }
      p->cursor++;
    }
    if (p->cursor >= p->end) {
      fail(p, t->line, t->column, "unterminated string");
      t->kind = TOKEN_END;
      return;
    }
    t->kind = TOKEN_STRING;
    t->value = unescape(p, s, p->cursor, t->line, t->column);
    p->cursor++;
    t->length = (size_t)(p->cursor - t->start);
    if (!t->value) { /* bad escape (status set) or out of memory */
      if (!p->status) p->status = -ENOMEM;
      t->kind = TOKEN_END;
    }
    return;
  }
  if (c == ':' && p->cursor + 1 < p->end && p->cursor[1] == ':') {
    t->kind = TOKEN_PATHSEP;
    t->length = 2;
    p->cursor += 2;
    return;
  }
  if (strchr("{}[]<>(),;:=?@", c)) {
    t->kind = TOKEN_PUNCT;
    t->length = 1;
    p->cursor++;
    return;
  }
  fail(p, t->line, t->column, "unexpected character `%c`", c);
  t->kind = TOKEN_END;
  t->length = 1;
}

static bool is_punct(parser *p, char c) {
  return p->current.kind == TOKEN_PUNCT && p->current.start[0] == c;
}
static bool is_keyword(parser *p, const char *word) {
  return p->current.kind == TOKEN_IDENT && strcmp(p->current.value, word) == 0;
}

/* Identifiers Cedar reserves (they cannot name anything in a schema). */
static bool is_reserved(const char *word) {
  static const char *const reserved[] = {"true", "false", "if",  "then", "else",
                                         "in",   "like",  "has", "is",   NULL};
  for (const char *const *r = reserved; *r; r++)
    if (strcmp(*r, word) == 0) return true;
  return false;
}

/* Fail when the current identifier is reserved; returns p->status. */
static int check_name(parser *p) {
  if (p->current.kind == TOKEN_IDENT && is_reserved(p->current.value))
    return fail(p, p->current.line, p->current.column, "`%s` is a reserved identifier", p->current.value);
  return p->status;
}

static int expected(parser *p, const char *what) {
  char got[64];
  describe(&p->current, got, sizeof got);
  return fail(p, p->current.line, p->current.column, "expected %s, found %s", what, got);
}

static int expect_punct(parser *p, char c) {
  if (!is_punct(p, c)) {
    char what[8] = {'`', c, '`', 0};
    return expected(p, what);
  }
  advance(p);
  return p->status;
}

/* Path := IDENT {'::' IDENT}; stops before '::' STRING (an action reference). */
static char *parse_path(parser *p, bool *followed_by_string) {
  if (followed_by_string) *followed_by_string = false;
  if (p->current.kind != TOKEN_IDENT) {
    expected(p, "a name");
    return NULL;
  }
  if (check_name(p)) return NULL;
  char *path = p->current.value;
  advance(p);
  while (p->current.kind == TOKEN_PATHSEP) {
    advance(p);
    if (p->current.kind == TOKEN_STRING && followed_by_string) {
      *followed_by_string = true;
      return path;
    }
    if (p->current.kind != TOKEN_IDENT) {
      expected(p, "a name after `::`");
      return NULL;
    }
    if (check_name(p)) return NULL;
    path = cedar_schema_arena_printf(p->arena, "%s::%s", path, p->current.value);
    advance(p);
  }
  return path;
}

/* Annotations: '@' IDENT ['(' STRING ')'] — accepted and ignored. */
static void skip_annotations(parser *p) {
  const char *keys[64]; /* annotations of this declaration (duplicates are an error, as upstream) */
  size_t key_count = 0;
  while (!p->status && is_punct(p, '@')) {
    advance(p);
    if (p->current.kind != TOKEN_IDENT) {
      expected(p, "an annotation name after `@`");
      return;
    }
    for (size_t i = 0; i < key_count; i++)
      if (strcmp(keys[i], p->current.value) == 0) {
        fail(p, p->current.line, p->current.column, "duplicate annotation `@%s`", p->current.value);
        return;
      }
    if (key_count < sizeof keys / sizeof keys[0]) keys[key_count++] = p->current.value;
    advance(p);
    if (is_punct(p, '(')) {
      advance(p);
      if (p->current.kind != TOKEN_STRING) {
        expected(p, "a string annotation value");
        return;
      }
      advance(p);
      expect_punct(p, ')');
    }
  }
}

static raw_type *new_type(parser *p, raw_type_kind kind, unsigned line, unsigned column) {
  raw_type *t = cedar_schema_arena_alloc(p->arena, sizeof *t);
  if (!t) {
    p->status = -ENOMEM;
    return NULL;
  }
  t->kind = kind;
  t->line = line;
  t->column = column;
  return t;
}

static raw_type *parse_type(parser *p);

static raw_type *parse_record(parser *p) {
  raw_type *record = new_type(p, RAW_RECORD, p->current.line, p->current.column);
  if (!record || expect_punct(p, '{')) return NULL;
  while (!p->status && !is_punct(p, '}')) {
    skip_annotations(p);
    if (p->current.kind != TOKEN_IDENT && p->current.kind != TOKEN_STRING) {
      expected(p, "an attribute name or `}`");
      return NULL;
    }
    unsigned line = p->current.line, column = p->current.column;
    if (check_name(p)) return NULL;
    const char *name = p->current.value;
    advance(p);
    bool required = true;
    if (is_punct(p, '?')) {
      required = false;
      advance(p);
    }
    if (expect_punct(p, ':')) return NULL;
    raw_type *type = parse_type(p);
    if (!type) return NULL;
    /* a repeated attribute name replaces the earlier declaration, as cedar-policy's parser does */
    raw_attribute *a = NULL;
    for (size_t i = 0; i < record->attribute_count && !a; i++)
      if (strcmp(record->attributes[i].name, name) == 0) a = &record->attributes[i];
    if (!a)
      a = cedar_schema_arena_push(p->arena, (void **)&record->attributes, &record->attribute_count,
                                  &record->attribute_capacity, sizeof *a);
    if (!a) {
      p->status = -ENOMEM;
      return NULL;
    }
    *a = (raw_attribute){name, type, required, line, column};
    if (!is_punct(p, ',')) break;
    advance(p);
  }
  if (expect_punct(p, '}')) return NULL;
  return record;
}

static raw_type *parse_type(parser *p) {
  if (++p->depth > CEDAR_SCHEMA_MAX_DEPTH) {
    fail(p, p->current.line, p->current.column, "types nested deeper than %d levels", CEDAR_SCHEMA_MAX_DEPTH);
    return NULL;
  }
  raw_type *result = NULL;
  unsigned line = p->current.line, column = p->current.column;
  if (is_punct(p, '{')) {
    result = parse_record(p);
  } else if (is_keyword(p, "Set") && p->cursor < p->end) {
    /* `Set<T>`; a path that merely starts with Set (Set::X) is a name. */
    advance(p);
    if (is_punct(p, '<')) {
      advance(p);
      raw_type *element = parse_type(p);
      if (element && !expect_punct(p, '>')) {
        result = new_type(p, RAW_SET, line, column);
        if (result) result->element = element;
      }
    } else {
      char *path = "Set";
      while (!p->status && p->current.kind == TOKEN_PATHSEP) {
        advance(p);
        if (p->current.kind != TOKEN_IDENT) {
          expected(p, "a name after `::`");
          break;
        }
        path = cedar_schema_arena_printf(p->arena, "%s::%s", path, p->current.value);
        advance(p);
      }
      if (!p->status) {
        result = new_type(p, RAW_NAME, line, column);
        if (result) result->name = path;
      }
    }
  } else if (p->current.kind == TOKEN_IDENT) {
    char *path = parse_path(p, NULL);
    if (path) {
      result = new_type(p, RAW_NAME, line, column);
      if (result) result->name = path;
    }
  } else {
    expected(p, "a type");
  }
  p->depth--;
  return p->status ? NULL : result;
}

/* EntOrTyps := Path | '[' [Path {',' Path} [',']] ']' — appended to *list. what: names the list in
 * errors when an empty `[]` is not allowed (NULL: allowed). */
static int parse_type_list(parser *p, const char ***list, size_t *count, size_t *capacity, const char *what) {
  bool bracketed = is_punct(p, '[');
  unsigned line = p->current.line, column = p->current.column;
  if (bracketed) advance(p);
  if (bracketed && what && is_punct(p, ']'))
    return fail(p, line, column, "`%s` is `[]`, which is invalid: list at least one entity type", what);
  while (!p->status) {
    if (bracketed && is_punct(p, ']')) break;
    char *path = parse_path(p, NULL);
    if (!path) return p->status;
    const char **slot = cedar_schema_arena_push(p->arena, (void **)list, count, capacity, sizeof *slot);
    if (!slot) return p->status = -ENOMEM;
    *slot = path;
    if (!bracketed) return p->status;
    if (!is_punct(p, ',')) break;
    advance(p);
    if (is_punct(p, ']')) return expected(p, "an entity type after `,`");
  }
  return expect_punct(p, ']');
}

static int parse_entity(parser *p) {
  size_t first = p->raw->entity_count;
  do {
    advance(p); /* `entity` or `,` */
    if (p->current.kind != TOKEN_IDENT) return expected(p, "an entity type name");
    if (check_name(p)) return p->status;
    if (strcmp(p->current.value, "__cedar") == 0)
      return fail(p, p->current.line, p->current.column, "`__cedar` is reserved");
    raw_entity *e = cedar_schema_arena_push(p->arena, (void **)&p->raw->entities, &p->raw->entity_count,
                                            &p->raw->entity_capacity, sizeof *e);
    if (!e) return p->status = -ENOMEM;
    e->name_space = p->name_space;
    e->name = p->current.value;
    e->line = p->current.line;
    e->column = p->current.column;
    advance(p);
  } while (!p->status && is_punct(p, ','));
  raw_entity model = {0};
  if (is_keyword(p, "enum")) {
    advance(p);
    model.is_enum = true;
    if (expect_punct(p, '[')) return p->status;
    while (!p->status && !is_punct(p, ']')) {
      if (p->current.kind != TOKEN_STRING) return expected(p, "a string (enum entity id)");
      const char **slot = cedar_schema_arena_push(p->arena, (void **)&model.enum_ids, &model.enum_id_count,
                                                  &model.enum_id_capacity, sizeof *slot);
      if (!slot) return p->status = -ENOMEM;
      *slot = p->current.value;
      advance(p);
      if (!is_punct(p, ',')) break;
      advance(p);
      if (is_punct(p, ']')) return expected(p, "an enum id after `,`");
    }
    if (expect_punct(p, ']')) return p->status;
    if (model.enum_id_count == 0)
      return fail(p, p->current.line, p->current.column, "an enum entity type needs at least one id");
  } else {
    if (is_keyword(p, "in")) {
      advance(p);
      if (parse_type_list(p, &model.member_of, &model.member_of_count, &model.member_of_capacity, NULL))
        return p->status;
    }
    if (is_punct(p, '=')) {
      advance(p);
      if (!is_punct(p, '{')) return expected(p, "a record type `{ ... }` after `=`");
    }
    if (is_punct(p, '{')) {
      model.shape = parse_record(p);
      if (!model.shape) return p->status;
    }
    if (is_keyword(p, "tags")) {
      advance(p);
      model.tags = parse_type(p);
      if (!model.tags) return p->status;
    }
  }
  if (expect_punct(p, ';')) return p->status;
  for (size_t i = first; i < p->raw->entity_count; i++) {
    raw_entity *e = &p->raw->entities[i];
    e->shape = model.shape;
    e->tags = model.tags;
    e->member_of = model.member_of;
    e->member_of_count = model.member_of_count;
    e->is_enum = model.is_enum;
    e->enum_ids = model.enum_ids;
    e->enum_id_count = model.enum_id_count;
  }
  return 0;
}

/* Ref := Path '::' STR | Name */
static int parse_action_ref(parser *p, raw_action_ref *ref) {
  if (p->current.kind == TOKEN_STRING) {
    ref->type = NULL;
    ref->id = p->current.value;
    advance(p);
    return p->status;
  }
  bool qualified = false;
  char *path = parse_path(p, &qualified);
  if (!path) return p->status;
  if (qualified) {
    ref->type = path;
    ref->id = p->current.value;
    advance(p);
  } else if (strstr(path, "::")) {
    return fail(p, p->current.line, p->current.column,
                "expected an action reference `Type::\"id\"`, found `%s`", path);
  } else {
    ref->type = NULL;
    ref->id = path;
  }
  return p->status;
}

static int parse_action(parser *p) {
  size_t first = p->raw->action_count;
  do {
    advance(p); /* `action` or `,` */
    if (p->current.kind != TOKEN_IDENT && p->current.kind != TOKEN_STRING)
      return expected(p, "an action name");
    if (check_name(p)) return p->status;
    raw_action *a = cedar_schema_arena_push(p->arena, (void **)&p->raw->actions, &p->raw->action_count,
                                            &p->raw->action_capacity, sizeof *a);
    if (!a) return p->status = -ENOMEM;
    a->name_space = p->name_space;
    a->id = p->current.value;
    a->line = p->current.line;
    a->column = p->current.column;
    advance(p);
  } while (!p->status && is_punct(p, ','));
  raw_action model = {0};
  if (is_keyword(p, "in")) {
    advance(p);
    bool bracketed = is_punct(p, '[');
    if (bracketed) advance(p);
    if (bracketed && is_punct(p, ']')) return expected(p, "an action group");
    while (!p->status) {
      raw_action_ref *ref =
          cedar_schema_arena_push(p->arena, (void **)&model.member_of, &model.member_of_count,
                                  &model.member_of_capacity, sizeof *ref);
      if (!ref) return p->status = -ENOMEM;
      if (parse_action_ref(p, ref)) return p->status;
      if (!bracketed || !is_punct(p, ',')) break;
      advance(p);
      if (is_punct(p, ']')) return expected(p, "an action after `,`");
    }
    if (bracketed && expect_punct(p, ']')) return p->status;
  }
  if (is_keyword(p, "appliesTo")) {
    advance(p);
    model.has_applies_to = true;
    if (expect_punct(p, '{')) return p->status;
    bool seen_principal = false, seen_resource = false, seen_context = false;
    while (!p->status && !is_punct(p, '}')) {
      unsigned line = p->current.line, column = p->current.column;
      if (is_keyword(p, "principal") || is_keyword(p, "resource")) {
        bool principal = is_keyword(p, "principal");
        bool *seen = principal ? &seen_principal : &seen_resource;
        if (*seen)
          return fail(p, line, column, "`%s` given twice in appliesTo", principal ? "principal" : "resource");
        *seen = true;
        advance(p);
        if (expect_punct(p, ':')) return p->status;
        if (principal ? parse_type_list(p, &model.principals, &model.principal_count,
                                        &model.principal_capacity, "principal")
                      : parse_type_list(p, &model.resources, &model.resource_count, &model.resource_capacity,
                                        "resource"))
          return p->status;
      } else if (is_keyword(p, "context")) {
        if (seen_context) return fail(p, line, column, "`context` given twice in appliesTo");
        seen_context = true;
        advance(p);
        if (expect_punct(p, ':')) return p->status;
        model.context = parse_type(p);
        if (!model.context) return p->status;
      } else {
        return expected(p, "`principal`, `resource` or `context` in appliesTo");
      }
      if (!is_punct(p, ',')) break;
      advance(p);
    }
    unsigned line = p->current.line, column = p->current.column;
    if (expect_punct(p, '}')) return p->status;
    if (!seen_principal || !seen_resource)
      return fail(p, line, column, "appliesTo of action `%s` needs both `principal` and `resource`",
                  p->raw->actions[first].id);
  }
  if (is_keyword(p, "attributes"))
    return fail(p, p->current.line, p->current.column, "action attributes are not supported");
  if (expect_punct(p, ';')) return p->status;
  for (size_t i = first; i < p->raw->action_count; i++) {
    raw_action *a = &p->raw->actions[i];
    a->member_of = model.member_of;
    a->member_of_count = model.member_of_count;
    a->has_applies_to = model.has_applies_to;
    a->principals = model.principals;
    a->principal_count = model.principal_count;
    a->resources = model.resources;
    a->resource_count = model.resource_count;
    a->context = model.context;
  }
  return 0;
}

static int parse_common(parser *p) {
  advance(p); /* `type` */
  if (p->current.kind != TOKEN_IDENT) return expected(p, "a common type name");
  if (check_name(p)) return p->status;
  raw_common *c = cedar_schema_arena_push(p->arena, (void **)&p->raw->commons, &p->raw->common_count,
                                          &p->raw->common_capacity, sizeof *c);
  if (!c) return p->status = -ENOMEM;
  c->name_space = p->name_space;
  c->name = p->current.value;
  c->line = p->current.line;
  c->column = p->current.column;
  advance(p);
  if (expect_punct(p, '=')) return p->status;
  c->type = parse_type(p);
  if (!c->type) return p->status;
  return expect_punct(p, ';');
}

static int parse_declaration(parser *p) {
  skip_annotations(p);
  if (p->status) return p->status;
  if (is_keyword(p, "entity")) return parse_entity(p);
  if (is_keyword(p, "action")) return parse_action(p);
  if (is_keyword(p, "type")) return parse_common(p);
  return expected(p, "`entity`, `action` or `type`");
}

int cedar_schema_parse_human(schema_arena *arena, const char *text, size_t length, const char *file,
                             raw_schema *raw, cedar_schema_error *err) {
  parser p = {.arena = arena,
              .text = text,
              .end = text + length,
              .cursor = text,
              .line = 1,
              .line_start = text,
              .file = file,
              .err = err,
              .raw = raw,
              .name_space = ""};
  if (length && memchr(text, '\0', length))
    return cedar_schema_set_error(err, file, 0, 0, "schema text contains a NUL byte");
  const char *namespaces[1024]; /* declared so far (a schema with more blocks is not checked beyond) */
  size_t namespace_count = 0;
  advance(&p);
  while (!p.status && p.current.kind != TOKEN_END) {
    skip_annotations(&p);
    if (p.status) break;
    if (is_keyword(&p, "namespace")) {
      unsigned line = p.current.line, column = p.current.column;
      advance(&p);
      char *name = parse_path(&p, NULL);
      if (!name) break;
      if (strcmp(name, "__cedar") == 0 || strncmp(name, "__cedar::", 9) == 0 || strstr(name, "::__cedar")) {
        fail(&p, line, column, "the namespace `__cedar` is reserved");
        break;
      }
      bool repeated = false;
      for (size_t i = 0; i < namespace_count; i++)
        if (strcmp(namespaces[i], name) == 0) repeated = true;
      if (repeated) {
        fail(&p, line, column, "namespace `%s` is declared twice: declare each namespace in one block", name);
        break;
      }
      if (namespace_count < sizeof namespaces / sizeof namespaces[0]) namespaces[namespace_count++] = name;
      if (expect_punct(&p, '{')) break;
      p.name_space = name;
      while (!p.status && !is_punct(&p, '}')) {
        if (p.current.kind == TOKEN_END) {
          expected(&p, "`}` closing the namespace");
          break;
        }
        if (is_keyword(&p, "namespace")) {
          fail(&p, p.current.line, p.current.column, "namespaces cannot be nested");
          break;
        }
        parse_declaration(&p);
      }
      if (!p.status) expect_punct(&p, '}');
      p.name_space = "";
    } else {
      parse_declaration(&p);
    }
  }
  if (arena->failed) return -ENOMEM;
  return p.status;
}
