/* Engine-internal: the Cedar AST, the arena it lives in, the parser, the canonical printer and EST.
 *
 * Used by policy/eval, policy/entities and the validator (policy/schema); not a public API (see
 * policy/cedar.h). Every node of a policy set lives in the set's arena and is immutable after parsing. */
#ifndef DOME_POLICY_SYNTAX_SYNTAX_H
#define DOME_POLICY_SYNTAX_SYNTAX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "policy/cedar.h"
#include "policy/extensions/extensions.h"

/* ---------------- arena ---------------- */

typedef struct cedar_arena cedar_arena;

cedar_arena *cedar_arena_new(void);
/* An arena whose first block holds first_block bytes and whose blocks double up to max_block bytes
 * (scratch memory for a parse of known input size). NULL on ENOMEM. */
cedar_arena *cedar_arena_new_sized(size_t first_block, size_t max_block);
void cedar_arena_free(cedar_arena *arena);
/* Zeroed, 16-byte aligned memory living until cedar_arena_free; NULL on ENOMEM. */
void *cedar_arena_alloc(cedar_arena *arena, size_t size);
/* The same without zeroing. */
void *cedar_arena_alloc_uninit(cedar_arena *arena, size_t size);
/* Copy of s[0..length) plus a NUL. */
char *cedar_arena_strndup(cedar_arena *arena, const char *s, size_t length);
/* Bytes handed out so far (for reuse decisions). */
size_t cedar_arena_used(const cedar_arena *arena);
/* Forget every allocation but keep the first block (fast reuse between requests). */
void cedar_arena_reset(cedar_arena *arena);

/* ---------------- strings and uids ---------------- */

/* A byte string that may hold NUL bytes; ptr is NUL-terminated when built by the engine. */
typedef struct cedar_str {
  const char *ptr;
  size_t len;
} cedar_str;

static inline bool cedar_str_eq(cedar_str a, cedar_str b) {
  return a.len == b.len && (a.len == 0 || __builtin_memcmp(a.ptr, b.ptr, a.len) == 0);
}
static inline bool cedar_str_eq_c(cedar_str a, const char *c) {
  size_t n = __builtin_strlen(c);
  return a.len == n && __builtin_memcmp(a.ptr, c, n) == 0;
}
int cedar_str_cmp(cedar_str a, cedar_str b);

/* An entity uid: fully qualified type name ("A::B") and id. */
typedef struct cedar_euid {
  cedar_str type;
  cedar_str id;
} cedar_euid;

static inline bool cedar_euid_eq(const cedar_euid *a, const cedar_euid *b) {
  return cedar_str_eq(a->id, b->id) && cedar_str_eq(a->type, b->type);
}
int cedar_euid_cmp(const cedar_euid *a, const cedar_euid *b);
uint64_t cedar_euid_hash(const cedar_euid *uid);

/* ---------------- expressions ---------------- */

typedef enum cedar_var {
  CEDAR_VAR_PRINCIPAL,
  CEDAR_VAR_ACTION,
  CEDAR_VAR_RESOURCE,
  CEDAR_VAR_CONTEXT
} cedar_var;

typedef enum cedar_expr_kind {
  CX_BOOL,
  CX_LONG,
  CX_STRING,
  CX_ENTITY,
  CX_VAR,     /* u.var */
  CX_SLOT,    /* u.var: PRINCIPAL (?principal) or RESOURCE (?resource) */
  CX_UNKNOWN, /* u.s: name of an unknown (partial evaluation residuals) */
  CX_VALUE,   /* u.value: a literal value (residuals; entity attribute values) */
  CX_NOT,
  CX_NEG,
  CX_AND,
  CX_OR,
  CX_IF,
  CX_EQ,
  CX_NE,
  CX_LT,
  CX_LE,
  CX_GT,
  CX_GE,
  CX_ADD,
  CX_SUB,
  CX_MUL,
  CX_IN,
  CX_CONTAINS,
  CX_CONTAINS_ALL,
  CX_CONTAINS_ANY,
  CX_IS_EMPTY,
  CX_GET_TAG,
  CX_HAS_TAG,
  CX_GET_ATTR, /* a.attr */
  CX_HAS_ATTR, /* a has attr */
  CX_LIKE,     /* a like pattern */
  CX_IS,       /* a is type [in b] */
  CX_SET,
  CX_RECORD,
  CX_CALL, /* extension function or method: args[0] is the receiver of a method */
} cedar_expr_kind;

/* A `like` pattern: bytes with wildcards; elements 0..255 are bytes, CEDAR_PATTERN_STAR a `*`. */
#define CEDAR_PATTERN_STAR (-1)
typedef struct cedar_pattern {
  const int16_t *elements;
  size_t length;
} cedar_pattern;

struct cedar_value;

typedef struct cedar_expr cedar_expr;
struct cedar_expr {
  uint8_t kind;   /* cedar_expr_kind */
  uint8_t var;    /* CX_VAR / CX_SLOT */
  uint16_t depth; /* 1 + deepest child */
  uint32_t line, column;
  union {
    bool boolean;
    int64_t number;
    cedar_str s;    /* CX_STRING, CX_UNKNOWN */
    cedar_euid uid; /* CX_ENTITY */
    const struct cedar_value *value;
    struct {
      cedar_expr *a, *b, *c; /* unary: a; binary: a b; if: a b c; CX_IS: a, optional b (in) */
      cedar_str name;        /* CX_GET_ATTR/CX_HAS_ATTR attribute; CX_IS type */
      cedar_pattern pattern; /* CX_LIKE */
    } op;
    struct {
      cedar_expr **items; /* CX_SET elements; CX_RECORD values; CX_CALL arguments */
      cedar_str *keys;    /* CX_RECORD keys, source order, unique */
      size_t count;
      cedar_str name;                           /* CX_CALL function name */
      const cedar_extension_function *function; /* CX_CALL */
    } list;
  } u;
};

/* ---------------- policies ---------------- */

typedef enum cedar_scope_op {
  CEDAR_SCOPE_ANY,
  CEDAR_SCOPE_EQ,      /* == uid */
  CEDAR_SCOPE_IN,      /* in uid */
  CEDAR_SCOPE_IS,      /* is type */
  CEDAR_SCOPE_IS_IN,   /* is type in uid */
  CEDAR_SCOPE_IN_LIST, /* action in [uids] */
} cedar_scope_op;

typedef struct cedar_scope {
  uint8_t op;       /* cedar_scope_op */
  bool slot;        /* uid is the template slot (?principal / ?resource), unfilled */
  cedar_euid uid;   /* EQ, IN, IS_IN */
  cedar_str type;   /* IS, IS_IN */
  cedar_euid *list; /* IN_LIST */
  size_t list_count;
} cedar_scope;

typedef struct cedar_condition {
  bool is_when; /* when (true) or unless (false) */
  cedar_expr *body;
} cedar_condition;

typedef struct cedar_annotation {
  cedar_str key;
  cedar_str value;
  bool has_value;
} cedar_annotation;

struct cedar_policy {
  const char *id;
  uint8_t effect; /* cedar_effect */
  bool is_template;
  const char *template_id; /* template-linked policies: the template; else NULL */
  cedar_annotation *annotations;
  size_t annotation_count;
  cedar_scope principal, action, resource;
  cedar_condition *conditions;
  size_t condition_count;
  const char *file;
  unsigned line, column;
};

struct cedar_policy_set {
  cedar_arena *arena;
  cedar_policy **policies;
  size_t count, capacity;
};

/* A parsed stand-alone expression (public type of cedar.h). */
struct cedar_expression {
  cedar_arena *arena;
  cedar_expr *root;
};

/* ---------------- parser ---------------- */

/* Parse policies into set (appending; ids assigned from set->count on). */
int cedar_parse_policies(cedar_policy_set *set, const char *text, size_t length, const char *file,
                         unsigned flags, cedar_diagnostic *diag);
/* Parse a single expression into arena. */
int cedar_parse_expression(cedar_arena *arena, const char *text, size_t length, const char *file,
                           cedar_expr **out, cedar_diagnostic *diag);
/* Unescape a Cedar string literal body (without quotes). pattern: `like` mode (\* allowed).
 * Returns 0 or -EINVAL with a message in err (size bytes) and the byte offset of the bad escape in
 * *bad_offset. */
int cedar_unescape(cedar_arena *arena, const char *raw, size_t length, bool pattern, cedar_str *out,
                   cedar_pattern *pattern_out, char *err, size_t err_size, size_t *bad_offset);
/* Is s a valid identifier (not reserved)? */
bool cedar_is_identifier(cedar_str s);
/* Parse a fully-qualified name "A::B" (each part an identifier). */
bool cedar_is_name(cedar_str s);

/* Set a diagnostic. */
void cedar_diag_set(cedar_diagnostic *diag, const char *file, unsigned line, unsigned column,
                    const char *policy_id, const char *format, ...) __attribute__((format(printf, 6, 7)));

/* Read a whole file ("-": stdin), at most CEDAR_MAX_TEXT_BYTES, into a malloc'd NUL-terminated buffer. */
int cedar_read_file(const char *path, char **text, size_t *length, cedar_diagnostic *diag);

/* Policy set helpers. */
int cedar_policy_set_new(cedar_policy_set **out);
int cedar_policy_set_append(cedar_policy_set *set, cedar_policy *policy);

/* Helpers for building nodes (arena-allocated, depth computed). NULL on ENOMEM. */
cedar_expr *cedar_expr_new(cedar_arena *arena, cedar_expr_kind kind, cedar_expr *a, cedar_expr *b,
                           cedar_expr *c);

/* ---------------- printing ---------------- */

/* A growable malloc'd string buffer. */
typedef struct cedar_buf {
  char *data;
  size_t length, capacity;
  bool failed; /* an allocation failed; data is unusable */
} cedar_buf;
void cedar_buf_append(cedar_buf *buf, const char *s, size_t n);
void cedar_buf_puts(cedar_buf *buf, const char *s);
void cedar_buf_printf(cedar_buf *buf, const char *format, ...) __attribute__((format(printf, 2, 3)));
/* Hand out the NUL-terminated text (NULL when an allocation failed) and reset buf. */
char *cedar_buf_finish(cedar_buf *buf);

/* Cedar string literal with quotes and escapes. */
void cedar_print_string(cedar_buf *buf, cedar_str s);
void cedar_print_euid(cedar_buf *buf, const cedar_euid *uid);
void cedar_print_expr(cedar_buf *buf, const cedar_expr *expr);
void cedar_print_policy(cedar_buf *buf, const cedar_policy *policy);
/* EST JSON of an expression / policy (jansson object, new reference; NULL on ENOMEM). */
struct json_t;
struct json_t *cedar_expr_to_est(const cedar_expr *expr);
struct json_t *cedar_policy_to_est(const cedar_policy *policy);
/* Parse an EST policy object into a policy in set->arena. */
int cedar_policy_from_est(cedar_policy_set *set, struct json_t *est, const char *id, const char *file,
                          cedar_policy **out, cedar_diagnostic *diag);

/* ---------------- JSON (jansson) ---------------- */

/* jansson rejects NUL bytes in object keys, which Cedar allows. cedar_json_loadb therefore loads JSON text
 * with every "\u0000" escape turned into the private-use character U+F0000 (4 bytes F3 B0 80 80);
 * cedar_json_copy_string / cedar_json_copy_key turn those bytes back into NUL. (A literal U+F0000 in
 * the input therefore also reads as NUL.) */
struct json_t *cedar_json_loadb(const char *text, size_t length, void *json_error);
/* A tree loaded for reading only (entities and context JSON): jansson's nodes live in scratch blocks
 * (policy/syntax/json_scratch.c) released all at once. Never json_decref such a tree, nor keep a node of
 * it (or a jansson value that refers to it) past cedar_json_scratch_release. */
typedef struct cedar_json_scratch {
  struct cedar_json_block *head; /* blocks of this load */
  bool hooked; /* false: an ordinary tree (jansson's allocation functions are not the library's) */
} cedar_json_scratch;
/* As cedar_json_loadb; NULL on error (json_error set, nothing to release). Thread-safe. */
struct json_t *cedar_json_scratch_load(cedar_json_scratch *scratch, const char *text, size_t length,
                                       void *json_error);
/* Release a tree from cedar_json_scratch_load (root may be NULL). */
void cedar_json_scratch_release(cedar_json_scratch *scratch, struct json_t *root);
/* Copy a string value / object key into the arena, NUL sentinel decoded. 0 or -ENOMEM. */
int cedar_json_copy_bytes(cedar_arena *arena, const char *s, size_t length, cedar_str *out);

/* Schema names keep NUL bytes as 0xC0 0x80 (schema.h): decode a schema name into the arena / encode a
 * name for a schema lookup (malloc'd, NUL-terminated; NULL on ENOMEM). */
int cedar_schema_name_decode(cedar_arena *arena, const char *name, cedar_str *out);
char *cedar_schema_name_encode(cedar_str name);

#endif
