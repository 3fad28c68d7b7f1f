/* Policy sets: creation, lookup, template links, loading files. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "policy/syntax/syntax.h"

cedar_expr *cedar_expr_new(cedar_arena *arena, cedar_expr_kind kind, cedar_expr *a, cedar_expr *b,
                           cedar_expr *c) {
  cedar_expr *e = cedar_arena_alloc(arena, sizeof *e);
  if (!e) return NULL;
  e->kind = (uint8_t)kind;
  e->u.op.a = a;
  e->u.op.b = b;
  e->u.op.c = c;
  unsigned d = 0;
  if (a && a->depth > d) d = a->depth;
  if (b && b->depth > d) d = b->depth;
  if (c && c->depth > d) d = c->depth;
  e->depth = (uint16_t)(d + 1 > 0xffff ? 0xffff : d + 1);
  return e;
}

int cedar_policy_set_new(cedar_policy_set **out) {
  cedar_policy_set *set = calloc(1, sizeof *set);
  if (!set) return -ENOMEM;
  set->arena = cedar_arena_new();
  if (!set->arena) {
    free(set);
    return -ENOMEM;
  }
  *out = set;
  return 0;
}

int cedar_policy_set_append(cedar_policy_set *set, cedar_policy *policy) {
  if (set->count == set->capacity) {
    size_t cap = set->capacity ? set->capacity * 2 : 16;
    cedar_policy **p = realloc(set->policies, cap * sizeof *p);
    if (!p) return -ENOMEM;
    set->policies = p;
    set->capacity = cap;
  }
  set->policies[set->count++] = policy;
  return 0;
}

void cedar_policy_set_free(cedar_policy_set *set) {
  if (!set) return;
  cedar_arena_free(set->arena);
  free(set->policies);
  free(set);
}

size_t cedar_policy_set_count(const cedar_policy_set *set) {
  return set->count;
}
const cedar_policy *cedar_policy_set_at(const cedar_policy_set *set, size_t index) {
  return index < set->count ? set->policies[index] : NULL;
}
const cedar_policy *cedar_policy_set_find(const cedar_policy_set *set, const char *id) {
  for (size_t i = 0; i < set->count; i++)
    if (strcmp(set->policies[i]->id, id) == 0) return set->policies[i];
  return NULL;
}
const char *cedar_policy_id(const cedar_policy *policy) {
  return policy->id;
}
cedar_effect cedar_policy_effect(const cedar_policy *policy) {
  return (cedar_effect)policy->effect;
}
bool cedar_policy_is_template(const cedar_policy *policy) {
  return policy->is_template;
}
const char *cedar_policy_annotation(const cedar_policy *policy, const char *key) {
  for (size_t i = 0; i < policy->annotation_count; i++)
    if (cedar_str_eq_c(policy->annotations[i].key, key)) return policy->annotations[i].value.ptr;
  return NULL;
}
void cedar_policy_location(const cedar_policy *policy, const char **file, unsigned *line, unsigned *column) {
  if (file) *file = policy->file ? policy->file : "";
  if (line) *line = policy->line;
  if (column) *column = policy->column;
}

int cedar_policy_set_parse(const char *text, size_t length, const char *file, unsigned flags,
                           cedar_policy_set **out, cedar_diagnostic *diag) {
  cedar_policy_set *set;
  if (cedar_policy_set_new(&set) < 0) return -ENOMEM;
  int r = cedar_parse_policies(set, text, length, file, flags, diag);
  if (r < 0) {
    cedar_policy_set_free(set);
    return r;
  }
  *out = set;
  return 0;
}

static bool fill_uid(cedar_arena *arena, const cedar_uid_ref *ref, cedar_euid *uid) {
  size_t n = ref->id_length ? ref->id_length : (ref->id ? strlen(ref->id) : 0);
  uid->type.ptr = cedar_arena_strndup(arena, ref->type, strlen(ref->type));
  uid->type.len = strlen(ref->type);
  uid->id.ptr = cedar_arena_strndup(arena, ref->id ? ref->id : "", n);
  uid->id.len = n;
  return uid->type.ptr && uid->id.ptr;
}

int cedar_policy_set_link(cedar_policy_set *set, const char *template_id, const char *new_id,
                          const cedar_uid_ref *principal, const cedar_uid_ref *resource,
                          cedar_diagnostic *diag) {
  if (!template_id || !new_id) {
    cedar_diag_set(diag, NULL, 0, 0, NULL, "a template link needs a template id and a new policy id");
    return -EINVAL;
  }
  const cedar_policy *t = cedar_policy_set_find(set, template_id);
  if (!t || !t->is_template) {
    cedar_diag_set(diag, NULL, 0, 0, new_id, "no template with id `%s`", template_id);
    return -EINVAL;
  }
  if (cedar_policy_set_find(set, new_id)) {
    cedar_diag_set(diag, NULL, 0, 0, new_id, "duplicate policy id `%s`", new_id);
    return -EINVAL;
  }
  if (!!principal != t->principal.slot || !!resource != t->resource.slot) {
    cedar_diag_set(diag, NULL, 0, 0, new_id, "template `%s` has slots %s%s%s but was given %s%s%s",
                   template_id, t->principal.slot ? "?principal" : "",
                   t->principal.slot && t->resource.slot ? " and " : "", t->resource.slot ? "?resource" : "",
                   principal ? "?principal" : "", principal && resource ? " and " : "",
                   resource ? "?resource" : "");
    return -EINVAL;
  }
  if ((principal &&
       (!principal->type || !cedar_is_name((cedar_str){principal->type, strlen(principal->type)}))) ||
      (resource &&
       (!resource->type || !cedar_is_name((cedar_str){resource->type, strlen(resource->type)})))) {
    cedar_diag_set(diag, NULL, 0, 0, new_id, "invalid entity type in template link values");
    return -EINVAL;
  }
  cedar_policy *p = cedar_arena_alloc(set->arena, sizeof *p);
  if (!p) return -ENOMEM;
  *p = *t;
  p->is_template = false;
  p->template_id = t->id;
  p->id = cedar_arena_strndup(set->arena, new_id, strlen(new_id));
  if (!p->id) return -ENOMEM;
  if (principal) {
    p->principal.slot = false;
    if (!fill_uid(set->arena, principal, &p->principal.uid)) return -ENOMEM;
  }
  if (resource) {
    p->resource.slot = false;
    if (!fill_uid(set->arena, resource, &p->resource.uid)) return -ENOMEM;
  }
  return cedar_policy_set_append(set, p);
}

/* Read a whole file (bounded by CEDAR_MAX_TEXT_BYTES) into a malloc'd, NUL-terminated buffer. */
int cedar_read_file(const char *path, char **text, size_t *length, cedar_diagnostic *diag) {
  int fd = strcmp(path, "-") == 0 ? dup(0) : open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int e = errno;
    cedar_diag_set(diag, path, 0, 0, NULL, "open: %s", strerror(e));
    return -e;
  }
  size_t cap = 65536, n = 0;
  char *buf = malloc(cap);
  if (!buf) {
    close(fd);
    return -ENOMEM;
  }
  for (;;) {
    if (n + 1 >= cap) {
      if (cap > CEDAR_MAX_TEXT_BYTES) {
        free(buf);
        close(fd);
        cedar_diag_set(diag, path, 0, 0, NULL, "file is over the limit of %u bytes", CEDAR_MAX_TEXT_BYTES);
        return -E2BIG;
      }
      char *nb = realloc(buf, cap * 2);
      if (!nb) {
        free(buf);
        close(fd);
        return -ENOMEM;
      }
      buf = nb;
      cap *= 2;
    }
    ssize_t r = read(fd, buf + n, cap - n - 1);
    if (r < 0) {
      if (errno == EINTR) continue;
      int e = errno;
      free(buf);
      close(fd);
      cedar_diag_set(diag, path, 0, 0, NULL, "read: %s", strerror(e));
      return -e;
    }
    if (r == 0) break;
    n += (size_t)r;
  }
  close(fd);
  buf[n] = 0;
  *text = buf;
  *length = n;
  return 0;
}

int cedar_policy_set_load_file(const char *path, unsigned flags, cedar_policy_set **out,
                               cedar_diagnostic *diag) {
  char *text;
  size_t length;
  int r = cedar_read_file(path, &text, &length, diag);
  if (r < 0) return r;
  size_t i = 0;
  while (i < length && (text[i] == ' ' || text[i] == '\n' || text[i] == '\t' || text[i] == '\r')) i++;
  if (i < length && text[i] == '{')
    r = cedar_policy_set_parse_json(text, length, path, out, diag);
  else
    r = cedar_policy_set_parse(text, length, path, flags, out, diag);
  free(text);
  return r;
}
