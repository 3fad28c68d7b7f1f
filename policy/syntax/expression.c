/* Stand-alone expressions and entity uids in Cedar syntax. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "policy/syntax/syntax.h"

int cedar_expression_parse(const char *text, size_t length, const char *file, cedar_expression **out,
                           cedar_diagnostic *diag) {
  cedar_expression *x = calloc(1, sizeof *x);
  if (!x || !(x->arena = cedar_arena_new())) {
    free(x);
    return -ENOMEM;
  }
  int r = cedar_parse_expression(x->arena, text, length, file, &x->root, diag);
  if (r < 0) {
    cedar_expression_free(x);
    return r;
  }
  *out = x;
  return 0;
}

void cedar_expression_free(cedar_expression *expression) {
  if (!expression) return;
  cedar_arena_free(expression->arena);
  free(expression);
}

int cedar_uid_parse(const char *text, size_t length, char **type, char **id, size_t *id_length,
                    cedar_diagnostic *diag) {
  cedar_expression *x;
  int r = cedar_expression_parse(text, length, NULL, &x, diag);
  if (r < 0) return r;
  if (x->root->kind != CX_ENTITY) {
    cedar_diag_set(diag, NULL, 0, 0, NULL, "expected an entity uid like Type::\"id\", got `%.*s`",
                   (int)(length > 80 ? 80 : length), text);
    cedar_expression_free(x);
    return -EINVAL;
  }
  const cedar_euid *uid = &x->root->u.uid;
  *type = strndup(uid->type.ptr, uid->type.len);
  *id = malloc(uid->id.len + 1);
  if (!*type || !*id) {
    free(*type);
    free(*id);
    cedar_expression_free(x);
    return -ENOMEM;
  }
  memcpy(*id, uid->id.ptr, uid->id.len);
  (*id)[uid->id.len] = 0;
  *id_length = uid->id.len;
  cedar_expression_free(x);
  return 0;
}
