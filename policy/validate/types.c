/* Validator types: construction from schema types, strict subtyping and least upper bounds
 * (cedar-policy validator types.rs in strict mode), and message helpers. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/validate/types.h"

const vtype cedar_validate_vt_true_type = {.kind = VT_TRUE};
const vtype cedar_validate_vt_false_type = {.kind = VT_FALSE};
const vtype cedar_validate_vt_bool_type = {.kind = VT_BOOL};
const vtype cedar_validate_vt_long_type = {.kind = VT_LONG};
const vtype cedar_validate_vt_string_type = {.kind = VT_STRING};
const vtype cedar_validate_vt_any_set_type = {.kind = VT_SET};
const vtype cedar_validate_vt_any_entity_type = {.kind = VT_ANY_ENTITY};
const vtype cedar_validate_vt_any_record_type = {.kind = VT_RECORD, .open = true};
const vtype cedar_validate_vt_empty_record_type = {.kind = VT_RECORD};

const vtype *cedar_validate_vt_new(schema_arena *arena, vt_kind kind, const char *name,
                                   const vtype *element) {
  vtype *t = cedar_schema_arena_alloc(arena, sizeof *t);
  if (!t) return NULL;
  t->kind = kind;
  t->name = name;
  t->element = element;
  return t;
}

const vtype *cedar_validate_vt_from_schema(schema_arena *arena, const cedar_schema_type *s, int depth) {
  if (!s || depth > 4 * CEDAR_SCHEMA_MAX_DEPTH) return NULL;
  switch (s->kind) {
    case CEDAR_SCHEMA_BOOL:
      return &cedar_validate_vt_bool_type;
    case CEDAR_SCHEMA_LONG:
      return &cedar_validate_vt_long_type;
    case CEDAR_SCHEMA_STRING:
      return &cedar_validate_vt_string_type;
    case CEDAR_SCHEMA_ENTITY:
      return cedar_validate_vt_new(arena, VT_ENTITY, s->name, NULL);
    case CEDAR_SCHEMA_EXTENSION:
      return cedar_validate_vt_new(arena, VT_EXTENSION, s->name, NULL);
    case CEDAR_SCHEMA_SET: {
      const vtype *element = cedar_validate_vt_from_schema(arena, s->element, depth + 1);
      return element ? cedar_validate_vt_new(arena, VT_SET, NULL, element) : NULL;
    }
    case CEDAR_SCHEMA_RECORD: {
      vtype *t = (vtype *)cedar_validate_vt_new(arena, VT_RECORD, NULL, NULL);
      vattr *attrs = cedar_schema_arena_alloc(arena, (s->attribute_count + 1) * sizeof *attrs);
      if (!t || !attrs) return NULL;
      for (size_t i = 0; i < s->attribute_count; i++) {
        attrs[i].name = s->attributes[i].name;
        attrs[i].required = s->attributes[i].required;
        attrs[i].type = cedar_validate_vt_from_schema(arena, s->attributes[i].type, depth + 1);
        if (!attrs[i].type) return NULL;
      }
      t->attributes = attrs;
      t->attribute_count = s->attribute_count;
      t->open = s->additional_attributes;
      return t;
    }
  }
  return NULL;
}

const vattr *cedar_validate_vt_record_attribute(const vtype *record, const char *name) {
  for (size_t i = 0; i < record->attribute_count; i++)
    if (strcmp(record->attributes[i].name, name) == 0) return &record->attributes[i];
  return NULL;
}

static bool same_keys(const vtype *a, const vtype *b) {
  if (a->attribute_count != b->attribute_count) return false;
  for (size_t i = 0; i < a->attribute_count; i++)
    if (!cedar_validate_vt_record_attribute(b, a->attributes[i].name)) return false;
  return true;
}

bool cedar_validate_vt_is_subtype(const vtype *a, const vtype *b, bool permissive) {
  if (a->kind == VT_NEVER) return true;
  switch (b->kind) {
    case VT_BOOL:
      return a->kind == VT_BOOL || a->kind == VT_TRUE || a->kind == VT_FALSE;
    case VT_TRUE:
    case VT_FALSE:
    case VT_LONG:
    case VT_STRING:
    case VT_ANY_ENTITY:
      if (b->kind == VT_ANY_ENTITY && permissive && a->kind == VT_ENTITY) return true;
      return a->kind == b->kind;
    case VT_NEVER:
      return false;
    case VT_EXTENSION:
      return a->kind == VT_EXTENSION && strcmp(a->name, b->name) == 0;
    case VT_ENTITY:
      return a->kind == VT_ENTITY && strcmp(a->name, b->name) == 0;
    case VT_SET:
      if (a->kind != VT_SET) return false;
      if (!b->element) return true;
      if (!a->element) return false;
      return cedar_validate_vt_is_subtype(a->element, b->element, permissive);
    case VT_RECORD: {
      if (a->kind != VT_RECORD) return false;
      if (a->open && !b->open) return false;
      bool width = b->open && permissive;
      if (!width && !same_keys(a, b)) return false;
      for (size_t i = 0; i < b->attribute_count; i++) {
        const vattr *mine = cedar_validate_vt_record_attribute(a, b->attributes[i].name);
        if (!mine) return false;
        if (!mine->required && b->attributes[i].required) return false;
        if (!cedar_validate_vt_is_subtype(mine->type, b->attributes[i].type, permissive)) return false;
      }
      return true;
    }
  }
  return false;
}

const vtype *cedar_validate_vt_lub(schema_arena *arena, const vtype *a, const vtype *b) {
  if (cedar_validate_vt_is_subtype(a, b, false)) return b;
  if (cedar_validate_vt_is_subtype(b, a, false)) return a;
  if ((a->kind == VT_TRUE || a->kind == VT_FALSE) && (b->kind == VT_TRUE || b->kind == VT_FALSE))
    return &cedar_validate_vt_bool_type;
  if (a->kind == VT_SET && b->kind == VT_SET) {
    if (!a->element || !b->element) return &cedar_validate_vt_any_set_type;
    const vtype *element = cedar_validate_vt_lub(arena, a->element, b->element);
    return element ? cedar_validate_vt_new(arena, VT_SET, NULL, element) : NULL;
  }
  if (a->kind == VT_RECORD && b->kind == VT_RECORD) {
    if (!same_keys(a, b)) return NULL;
    vtype *t = (vtype *)cedar_validate_vt_new(arena, VT_RECORD, NULL, NULL);
    vattr *attrs = cedar_schema_arena_alloc(arena, (a->attribute_count + 1) * sizeof *attrs);
    if (!t || !attrs) return NULL;
    for (size_t i = 0; i < a->attribute_count; i++) {
      const vattr *other = cedar_validate_vt_record_attribute(b, a->attributes[i].name);
      const vtype *lub = cedar_validate_vt_lub(arena, a->attributes[i].type, other->type);
      if (!lub) return NULL;
      attrs[i] = (vattr){a->attributes[i].name, lub, a->attributes[i].required && other->required};
    }
    t->attributes = attrs;
    t->attribute_count = a->attribute_count;
    t->open = a->open || b->open;
    return t;
  }
  return NULL;
}

/* ---------------- messages ---------------- */

static void type_text_into(cedar_buf *b, const vtype *t, int depth) {
  if (depth > 8) {
    cedar_buf_puts(b, "...");
    return;
  }
  switch (t->kind) {
    case VT_NEVER:
      cedar_buf_puts(b, "Never");
      break;
    case VT_TRUE:
      cedar_buf_puts(b, "Bool (always true)");
      break;
    case VT_FALSE:
      cedar_buf_puts(b, "Bool (always false)");
      break;
    case VT_BOOL:
      cedar_buf_puts(b, "Bool");
      break;
    case VT_LONG:
      cedar_buf_puts(b, "Long");
      break;
    case VT_STRING:
      cedar_buf_puts(b, "String");
      break;
    case VT_ANY_ENTITY:
      cedar_buf_puts(b, "an entity");
      break;
    case VT_ENTITY:
    case VT_EXTENSION:
      cedar_buf_puts(b, t->name);
      break;
    case VT_SET:
      cedar_buf_puts(b, "Set<");
      if (t->element)
        type_text_into(b, t->element, depth + 1);
      else
        cedar_buf_puts(b, "_");
      cedar_buf_puts(b, ">");
      break;
    case VT_RECORD:
      cedar_buf_puts(b, "{");
      for (size_t i = 0; i < t->attribute_count; i++) {
        cedar_buf_printf(b, "%s%s%s: ", i ? ", " : " ", t->attributes[i].name,
                         t->attributes[i].required ? "" : "?");
        type_text_into(b, t->attributes[i].type, depth + 1);
      }
      cedar_buf_puts(b, t->attribute_count ? " }" : "}");
      break;
  }
}

static const char *finish_text(schema_arena *arena, cedar_buf *b, size_t limit) {
  char *text = cedar_buf_finish(b);
  if (!text) return "?";
  size_t n = strlen(text);
  const char *out;
  if (n > limit)
    out = cedar_schema_arena_printf(arena, "%.*s...", (int)limit, text);
  else
    out = cedar_schema_arena_strndup(arena, text, n);
  free(text);
  return out ? out : "?";
}

const char *cedar_validate_type_text(schema_arena *arena, const vtype *t) {
  cedar_buf b = {0};
  type_text_into(&b, t, 0);
  return finish_text(arena, &b, 120);
}

const char *cedar_validate_expr_text(schema_arena *arena, const cedar_expr *e) {
  cedar_buf b = {0};
  cedar_print_expr(&b, e);
  return finish_text(arena, &b, 100);
}

const char *cedar_validate_encode_str(schema_arena *arena, cedar_str s) {
  char *out = cedar_schema_arena_alloc(arena, 2 * s.len + 1);
  if (!out) return "";
  cedar_schema_encode_name(s.ptr ? s.ptr : "", s.len, out, 2 * s.len + 1);
  return out;
}

bool cedar_validate_is_action_type_name(const char *type) {
  size_t n = strlen(type);
  return strcmp(type, "Action") == 0 || (n > 8 && strcmp(type + n - 8, "::Action") == 0);
}

static size_t edit_distance(const char *a, const char *b) {
  size_t n = strlen(a), m = strlen(b);
  if (n > 64 || m > 64) return (size_t)-1;
  size_t row[65];
  for (size_t j = 0; j <= m; j++) row[j] = j;
  for (size_t i = 1; i <= n; i++) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= m; j++) {
      size_t above = row[j];
      size_t cost = diagonal + (a[i - 1] != b[j - 1]);
      size_t best = above + 1 < row[j - 1] + 1 ? above + 1 : row[j - 1] + 1;
      row[j] = cost < best ? cost : best;
      diagonal = above;
    }
  }
  return row[m];
}

const char *cedar_validate_closest_name(const char *name, const char *const *candidates, size_t count) {
  const char *best = NULL;
  size_t best_distance = (size_t)-1;
  size_t limit = strlen(name) / 3 + 1;
  if (limit < 2) limit = 2;
  for (size_t i = 0; i < count; i++) {
    size_t d = edit_distance(name, candidates[i]);
    if (d < best_distance) best_distance = d, best = candidates[i];
  }
  return best_distance <= limit ? best : NULL;
}

void cedar_validate_add_finding(findings *list, unsigned line, unsigned column, const char *format, ...) {
  char message[sizeof list->items[0].message];
  va_list ap;
  va_start(ap, format);
  vsnprintf(message, sizeof message, format, ap);
  va_end(ap);
  for (size_t i = 0; i < list->count; i++)
    if (list->items[i].line == line && list->items[i].column == column &&
        strcmp(list->items[i].message, message) == 0)
      return;
  if (list->count == list->capacity) {
    size_t grown = list->capacity ? list->capacity * 2 : 8;
    finding *bigger = realloc(list->items, grown * sizeof *bigger);
    if (!bigger) return;
    list->items = bigger;
    list->capacity = grown;
  }
  finding *f = &list->items[list->count++];
  f->line = line;
  f->column = column;
  memcpy(f->message, message, sizeof message);
}
