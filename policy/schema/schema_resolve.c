/* Resolution of raw schema declarations into the model: qualified names, common type substitution,
 * entity type and action references, indexes and the transitive membership relations.
 *
 * Name resolution as cedar-policy 4.x (cedar-policy-validator, schema/raw_name.rs and
 * json_schema.rs "EntityOrCommon"): an unqualified name `T` written in namespace `N` is the common type
 * N::T, else the entity type N::T, else the common type T of the empty namespace, else the entity type
 * T, else the built-in __cedar::T; a qualified name is the common type, else the entity type, of that
 * name, or a `__cedar::` built-in. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/schema/schema_internal.h"

typedef struct resolver {
  cedar_schema *schema;
  raw_schema *raw;
  const char *file;
  cedar_schema_error *err;
  raw_common **commons; /* sorted by full name */
  const char **common_names;
  int status;
  int depth;
} resolver;

static int fail_at(resolver *r, unsigned line, unsigned column, const char *format, ...)
    __attribute__((format(printf, 4, 5)));

static int fail_at(resolver *r, unsigned line, unsigned column, const char *format, ...) {
  if (r->status) return r->status;
  char message[400];
  va_list ap;
  va_start(ap, format);
  vsnprintf(message, sizeof message, format, ap);
  va_end(ap);
  r->status = cedar_schema_set_error(r->err, r->file, line, column, "%s", message);
  return r->status;
}

static char *qualify(resolver *r, const char *name_space, const char *name) {
  if (!name_space || !name_space[0]) return (char *)name;
  return cedar_schema_arena_printf(&r->schema->arena, "%s::%s", name_space, name);
}

static raw_common *find_common(resolver *r, const char *full_name) {
  size_t low = 0, high = r->raw->common_count;
  while (low < high) {
    size_t mid = (low + high) / 2;
    int c = strcmp(r->common_names[mid], full_name);
    if (c == 0) return r->commons[mid];
    if (c < 0)
      low = mid + 1;
    else
      high = mid;
  }
  return NULL;
}

static const cedar_schema_type *new_type(resolver *r, cedar_schema_type_kind kind, const char *name) {
  cedar_schema_type *t = cedar_schema_arena_alloc(&r->schema->arena, sizeof *t);
  if (!t) {
    r->status = -ENOMEM;
    return NULL;
  }
  t->kind = kind;
  t->name = name;
  return t;
}

static const cedar_schema_type *builtin(resolver *r, const char *name) {
  if (strncmp(name, "__cedar::", 9) == 0) name += 9;
  if (strcmp(name, "Long") == 0) return new_type(r, CEDAR_SCHEMA_LONG, NULL);
  if (strcmp(name, "String") == 0) return new_type(r, CEDAR_SCHEMA_STRING, NULL);
  if (strcmp(name, "Bool") == 0)
    return new_type(r, CEDAR_SCHEMA_BOOL, NULL); /* JSON's "Boolean" is a keyword */
  if (cedar_schema_is_extension_type(name)) return new_type(r, CEDAR_SCHEMA_EXTENSION, name);
  return NULL;
}

/* Fully-qualified entity type named `name` from namespace `name_space`, or NULL. */
static const char *resolve_entity_name(resolver *r, const char *name_space, const char *name) {
  const cedar_schema_entity_type *e;
  if (!strstr(name, "::") && name_space[0]) {
    e = cedar_schema_entity_type_find(r->schema, qualify(r, name_space, name));
    if (e) return e->name;
  }
  e = cedar_schema_entity_type_find(r->schema, name);
  return e ? e->name : NULL;
}

static const cedar_schema_type *resolve_type(resolver *r, const char *name_space, const raw_type *raw);

/* Is `name` the action type of a namespace that declares actions? Such a type ("N::Action") may be used
 * as an entity type in attribute and context types (not in memberOfTypes or appliesTo), as upstream. */
static bool is_declared_action_type(resolver *r, const char *name) {
  for (size_t i = 0; i < r->raw->action_count; i++) {
    const char *ns = r->raw->actions[i].name_space;
    size_t n = strlen(ns);
    if (n ? (strncmp(name, ns, n) == 0 && strcmp(name + n, "::Action") == 0) : strcmp(name, "Action") == 0)
      return true;
  }
  return false;
}

static const cedar_schema_type *resolve_common(resolver *r, raw_common *c, unsigned line, unsigned column) {
  if (c->state == 2) return c->resolved;
  if (c->state == 1) {
    fail_at(r, line, column, "common type `%s` is defined in terms of itself",
            c->name_space[0] ? qualify(r, c->name_space, c->name) : c->name);
    return NULL;
  }
  c->state = 1;
  c->resolved = resolve_type(r, c->name_space, c->type);
  c->state = 2;
  return c->resolved;
}

static const cedar_schema_type *resolve_name(resolver *r, const char *name_space, const raw_type *raw,
                                             bool commons, bool entities) {
  const char *name = raw->name;
  bool qualified = strstr(name, "::") != NULL;
  const char *candidates[2] = {qualified ? name : qualify(r, name_space, name), qualified ? NULL : name};
  for (int i = 0; i < 2; i++) {
    if (!candidates[i] || (i == 1 && !name_space[0])) continue;
    raw_common *c = commons ? find_common(r, candidates[i]) : NULL;
    if (c) return resolve_common(r, c, raw->line, raw->column);
    const cedar_schema_entity_type *e =
        entities ? cedar_schema_entity_type_find(r->schema, candidates[i]) : NULL;
    if (e) return new_type(r, CEDAR_SCHEMA_ENTITY, e->name);
    if (entities && is_declared_action_type(r, candidates[i]))
      return new_type(r, CEDAR_SCHEMA_ENTITY, candidates[i]);
  }
  const cedar_schema_type *b = (!qualified || strncmp(name, "__cedar::", 9) == 0) ? builtin(r, name) : NULL;
  if (b) return b;
  fail_at(r, raw->line, raw->column,
          "unknown type `%s`%s%s: no common type, entity type or built-in type of that name", name,
          name_space[0] ? " in namespace " : "", name_space);
  return NULL;
}

static int compare_attributes(const void *a, const void *b) {
  return strcmp(((const cedar_schema_attribute *)a)->name, ((const cedar_schema_attribute *)b)->name);
}

static const cedar_schema_type *resolve_type(resolver *r, const char *name_space, const raw_type *raw) {
  if (r->status || !raw) return NULL;
  if (++r->depth > CEDAR_SCHEMA_MAX_DEPTH * 4) {
    fail_at(r, raw->line, raw->column, "types nested deeper than %d levels", CEDAR_SCHEMA_MAX_DEPTH * 4);
    return NULL;
  }
  const cedar_schema_type *result = NULL;
  switch (raw->kind) {
    case RAW_NAME:
      result = resolve_name(r, name_space, raw, true, true);
      break;
    case RAW_COMMON:
      result = resolve_name(r, name_space, raw, true, false);
      break;
    case RAW_ENTITY: {
      const char *e = resolve_entity_name(r, name_space, raw->name);
      if (!e && !strstr(raw->name, "::") && name_space[0] &&
          is_declared_action_type(r, qualify(r, name_space, raw->name)))
        e = qualify(r, name_space, raw->name);
      else if (!e && is_declared_action_type(r, raw->name))
        e = raw->name;
      if (!e)
        fail_at(r, raw->line, raw->column, "unknown entity type `%s`", raw->name);
      else
        result = new_type(r, CEDAR_SCHEMA_ENTITY, e);
      break;
    }
    case RAW_EXTENSION:
      if (!cedar_schema_is_extension_type(raw->name))
        fail_at(r, raw->line, raw->column,
                "unknown extension type `%s` (known: ipaddr, decimal, datetime, duration)", raw->name);
      else
        result = new_type(r, CEDAR_SCHEMA_EXTENSION, raw->name);
      break;
    case RAW_BOOL:
      result = new_type(r, CEDAR_SCHEMA_BOOL, NULL);
      break;
    case RAW_LONG:
      result = new_type(r, CEDAR_SCHEMA_LONG, NULL);
      break;
    case RAW_STRING:
      result = new_type(r, CEDAR_SCHEMA_STRING, NULL);
      break;
    case RAW_SET: {
      const cedar_schema_type *element = resolve_type(r, name_space, raw->element);
      if (element) {
        cedar_schema_type *t = (cedar_schema_type *)new_type(r, CEDAR_SCHEMA_SET, NULL);
        if (t) t->element = element;
        result = t;
      }
      break;
    }
    case RAW_RECORD: {
      cedar_schema_type *t = (cedar_schema_type *)new_type(r, CEDAR_SCHEMA_RECORD, NULL);
      if (!t) break;
      t->additional_attributes = raw->additional_attributes;
      cedar_schema_attribute *attributes =
          cedar_schema_arena_alloc(&r->schema->arena, (raw->attribute_count + 1) * sizeof *attributes);
      if (!attributes) {
        r->status = -ENOMEM;
        break;
      }
      for (size_t i = 0; i < raw->attribute_count && !r->status; i++) {
        attributes[i].name = raw->attributes[i].name;
        attributes[i].required = raw->attributes[i].required;
        attributes[i].type = resolve_type(r, name_space, raw->attributes[i].type);
      }
      if (r->status) break; /* attributes after the failing one are unset */
      qsort(attributes, raw->attribute_count, sizeof *attributes, compare_attributes);
      for (size_t i = 1; i < raw->attribute_count && !r->status; i++)
        if (strcmp(attributes[i - 1].name, attributes[i].name) == 0)
          fail_at(r, raw->line, raw->column, "duplicate attribute `%s` in record type", attributes[i].name);
      t->attributes = attributes;
      t->attribute_count = raw->attribute_count;
      result = t;
      break;
    }
  }
  r->depth--;
  return r->status ? NULL : result;
}

static const cedar_schema_type *empty_record(resolver *r) {
  return new_type(r, CEDAR_SCHEMA_RECORD, NULL);
}

/* ---- indexes ---- */

static const cedar_schema *sort_schema; /* qsort has no context argument: guarded by sort_lock */
static pthread_mutex_t sort_lock = PTHREAD_MUTEX_INITIALIZER;

static int compare_entity_index(const void *a, const void *b) {
  return strcmp(sort_schema->entity_types[*(const size_t *)a].name,
                sort_schema->entity_types[*(const size_t *)b].name);
}

static int compare_action_index(const void *a, const void *b) {
  const cedar_schema_action *x = &sort_schema->actions[*(const size_t *)a];
  const cedar_schema_action *y = &sort_schema->actions[*(const size_t *)b];
  int c = strcmp(x->uid.type, y->uid.type);
  return c ? c : strcmp(x->uid.id, y->uid.id);
}

static int compare_common(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int build_common_index(resolver *r) {
  size_t n = r->raw->common_count;
  r->common_names = cedar_schema_arena_alloc(&r->schema->arena, (n + 1) * sizeof *r->common_names);
  r->commons = cedar_schema_arena_alloc(&r->schema->arena, (n + 1) * sizeof *r->commons);
  if (!r->common_names || !r->commons) return -ENOMEM;
  /* sort (name, pointer) pairs by name through an array of indices encoded next to the names */
  const char **pairs = cedar_schema_arena_alloc(&r->schema->arena, (2 * n + 1) * sizeof *pairs);
  if (!pairs) return -ENOMEM;
  for (size_t i = 0; i < n; i++) {
    raw_common *c = &r->raw->commons[i];
    const char *full = qualify(r, c->name_space, c->name);
    static const char *const reserved[] = {"Bool",   "Boolean", "Entity", "Extension", "Long",
                                           "Record", "Set",     "String", "__cedar",   NULL};
    bool is_reserved = false;
    for (const char *const *w = reserved; *w; w++)
      if (strcmp(*w, c->name) == 0) is_reserved = true;
    if (is_reserved) return fail_at(r, c->line, c->column, "common type name `%s` is reserved", c->name);
    pairs[2 * i] = full;
    pairs[2 * i + 1] = (const char *)c;
  }
  qsort(pairs, n, 2 * sizeof *pairs, compare_common);
  for (size_t i = 0; i < n; i++) {
    r->common_names[i] = pairs[2 * i];
    r->commons[i] = (raw_common *)pairs[2 * i + 1];
    if (i && strcmp(r->common_names[i - 1], r->common_names[i]) == 0)
      return fail_at(r, r->commons[i]->line, r->commons[i]->column, "common type `%s` is declared twice",
                     r->common_names[i]);
  }
  return 0;
}

static void set_bit(uint64_t *bits, size_t words, size_t row, size_t column) {
  bits[row * words + column / 64] |= (uint64_t)1 << (column % 64);
}

/* Transitive closure of `direct` (rows OR-ed until stable); n x words bitset. */
static void close_transitively(uint64_t *bits, size_t n, size_t words) {
  bool changed = true;
  while (changed) {
    changed = false;
    for (size_t i = 0; i < n; i++)
      for (size_t j = 0; j < n; j++) {
        if (!((bits[i * words + j / 64] >> (j % 64)) & 1)) continue;
        for (size_t w = 0; w < words; w++) {
          uint64_t merged = bits[i * words + w] | bits[j * words + w];
          if (merged != bits[i * words + w]) {
            bits[i * words + w] = merged;
            changed = true;
          }
        }
      }
  }
}

int cedar_schema_resolve(cedar_schema *schema, raw_schema *raw, const char *file, cedar_schema_error *err) {
  resolver r = {.schema = schema, .raw = raw, .file = file, .err = err};
  schema_arena *arena = &schema->arena;

  /* entity type names */
  size_t ne = raw->entity_count;
  schema->entity_types = cedar_schema_arena_alloc(arena, (ne + 1) * sizeof *schema->entity_types);
  schema->entity_index = cedar_schema_arena_alloc(arena, (ne + 1) * sizeof *schema->entity_index);
  if (!schema->entity_types || !schema->entity_index) return -ENOMEM;
  for (size_t i = 0; i < ne; i++) {
    if (strcmp(raw->entities[i].name, "Action") == 0)
      return fail_at(
          &r, raw->entities[i].line, raw->entities[i].column,
          "entity type `Action` cannot be declared: `Action` is the type of the namespace's actions");
    schema->entity_types[i].name = qualify(&r, raw->entities[i].name_space, raw->entities[i].name);
    schema->entity_types[i].line = raw->entities[i].line;
    schema->entity_types[i].column = raw->entities[i].column;
    schema->entity_index[i] = i;
  }
  schema->entity_type_count = ne;
  pthread_mutex_lock(&sort_lock);
  sort_schema = schema;
  qsort(schema->entity_index, ne, sizeof *schema->entity_index, compare_entity_index);
  pthread_mutex_unlock(&sort_lock);
  for (size_t i = 1; i < ne; i++) {
    const cedar_schema_entity_type *e = &schema->entity_types[schema->entity_index[i]];
    if (strcmp(schema->entity_types[schema->entity_index[i - 1]].name, e->name) == 0)
      return fail_at(&r, e->line, e->column, "entity type `%s` is declared twice", e->name);
  }
  if (build_common_index(&r)) return r.status ? r.status : -ENOMEM;

  /* common types (all, so that errors in unused ones are reported too) */
  for (size_t i = 0; i < raw->common_count && !r.status; i++) resolve_common(&r, &raw->commons[i], 0, 0);
  if (r.status) return r.status;

  /* entity types */
  for (size_t i = 0; i < ne && !r.status; i++) {
    raw_entity *re = &raw->entities[i];
    cedar_schema_entity_type *e = &schema->entity_types[i];
    e->shape = re->shape ? resolve_type(&r, re->name_space, re->shape) : empty_record(&r);
    if (r.status) break;
    if (e->shape->kind != CEDAR_SCHEMA_RECORD)
      return fail_at(&r, re->line, re->column, "the attributes of entity type `%s` must be a record type",
                     e->name);
    if (re->tags) e->tags = resolve_type(&r, re->name_space, re->tags);
    const char **parents = cedar_schema_arena_alloc(arena, (re->member_of_count + 1) * sizeof *parents);
    if (!parents) return -ENOMEM;
    for (size_t k = 0; k < re->member_of_count; k++) {
      parents[k] = resolve_entity_name(&r, re->name_space, re->member_of[k]);
      if (!parents[k])
        return fail_at(&r, re->line, re->column, "entity type `%s` is declared `in` unknown entity type `%s`",
                       e->name, re->member_of[k]);
    }
    e->member_of = parents;
    e->member_of_count = re->member_of_count;
    e->is_enum = re->is_enum;
    e->enum_ids = re->enum_ids;
    e->enum_id_count = re->enum_id_count;
  }
  if (r.status) return r.status;

  /* actions: identities first, then references */
  size_t na = raw->action_count;
  schema->actions = cedar_schema_arena_alloc(arena, (na + 1) * sizeof *schema->actions);
  schema->action_index = cedar_schema_arena_alloc(arena, (na + 1) * sizeof *schema->action_index);
  schema->action_types = cedar_schema_arena_alloc(arena, (na + 1) * sizeof *schema->action_types);
  if (!schema->actions || !schema->action_index || !schema->action_types) return -ENOMEM;
  for (size_t i = 0; i < na; i++) {
    schema->actions[i].uid.type = qualify(&r, raw->actions[i].name_space, "Action");
    schema->actions[i].uid.id = raw->actions[i].id;
    schema->actions[i].line = raw->actions[i].line;
    schema->actions[i].column = raw->actions[i].column;
    schema->action_index[i] = i;
    bool known = false;
    for (size_t k = 0; k < schema->action_type_count; k++)
      if (strcmp(schema->action_types[k], schema->actions[i].uid.type) == 0) known = true;
    if (!known) schema->action_types[schema->action_type_count++] = schema->actions[i].uid.type;
  }
  schema->action_count = na;
  pthread_mutex_lock(&sort_lock);
  sort_schema = schema;
  qsort(schema->action_index, na, sizeof *schema->action_index, compare_action_index);
  pthread_mutex_unlock(&sort_lock);
  for (size_t i = 1; i < na; i++) {
    const cedar_schema_action *a = &schema->actions[schema->action_index[i]];
    const cedar_schema_action *b = &schema->actions[schema->action_index[i - 1]];
    if (strcmp(a->uid.type, b->uid.type) == 0 && strcmp(a->uid.id, b->uid.id) == 0)
      return fail_at(&r, a->line, a->column, "action `%s::\"%s\"` is declared twice", a->uid.type, a->uid.id);
  }
  for (size_t i = 0; i < na && !r.status; i++) {
    raw_action *ra = &raw->actions[i];
    cedar_schema_action *a = &schema->actions[i];
    cedar_schema_action_ref *groups =
        cedar_schema_arena_alloc(arena, (ra->member_of_count + 1) * sizeof *groups);
    if (!groups) return -ENOMEM;
    for (size_t k = 0; k < ra->member_of_count; k++) {
      const raw_action_ref *ref = &ra->member_of[k];
      const cedar_schema_action *group = NULL;
      if (!ref->type) {
        group = cedar_schema_action_find(schema, a->uid.type, ref->id);
      } else {
        group = cedar_schema_action_find(schema, ref->type, ref->id);
        if (!group && ra->name_space[0])
          group = cedar_schema_action_find(schema, qualify(&r, ra->name_space, ref->type), ref->id);
      }
      if (!group)
        return fail_at(&r, ra->line, ra->column,
                       "action `%s` is declared in unknown action group `%s%s\"%s\"`", ra->id,
                       ref->type ? ref->type : "", ref->type ? "::" : "", ref->id);
      groups[k] = group->uid;
    }
    a->member_of = groups;
    a->member_of_count = ra->member_of_count;
    a->has_applies_to = ra->has_applies_to;
    const char **principals = cedar_schema_arena_alloc(arena, (ra->principal_count + 1) * sizeof *principals);
    const char **resources = cedar_schema_arena_alloc(arena, (ra->resource_count + 1) * sizeof *resources);
    if (!principals || !resources) return -ENOMEM;
    for (size_t k = 0; k < ra->principal_count; k++)
      if (!(principals[k] = resolve_entity_name(&r, ra->name_space, ra->principals[k])))
        return fail_at(&r, ra->line, ra->column, "action `%s` applies to unknown principal type `%s`", ra->id,
                       ra->principals[k]);
    for (size_t k = 0; k < ra->resource_count; k++)
      if (!(resources[k] = resolve_entity_name(&r, ra->name_space, ra->resources[k])))
        return fail_at(&r, ra->line, ra->column, "action `%s` applies to unknown resource type `%s`", ra->id,
                       ra->resources[k]);
    a->principal_types = principals;
    a->principal_type_count = ra->principal_count;
    a->resource_types = resources;
    a->resource_type_count = ra->resource_count;
    a->context = ra->context ? resolve_type(&r, ra->name_space, ra->context) : empty_record(&r);
    if (!r.status && a->context->kind != CEDAR_SCHEMA_RECORD)
      return fail_at(&r, ra->line, ra->column, "the context of action `%s` must be a record type", ra->id);
  }
  if (r.status) return r.status;

  /* transitive membership */
  schema->entity_words = (ne + 63) / 64 ? (ne + 63) / 64 : 1;
  schema->action_words = (na + 63) / 64 ? (na + 63) / 64 : 1;
  schema->entity_ancestors =
      cedar_schema_arena_alloc(arena, (ne + 1) * schema->entity_words * sizeof(uint64_t));
  schema->action_ancestors =
      cedar_schema_arena_alloc(arena, (na + 1) * schema->action_words * sizeof(uint64_t));
  if (!schema->entity_ancestors || !schema->action_ancestors) return -ENOMEM;
  for (size_t i = 0; i < ne; i++) {
    const cedar_schema_entity_type *e = &schema->entity_types[i];
    for (size_t k = 0; k < e->member_of_count; k++) {
      const cedar_schema_entity_type *parent = cedar_schema_entity_type_find(schema, e->member_of[k]);
      set_bit(schema->entity_ancestors, schema->entity_words, i, (size_t)(parent - schema->entity_types));
    }
  }
  close_transitively(schema->entity_ancestors, ne, schema->entity_words);
  for (size_t i = 0; i < na; i++) {
    const cedar_schema_action *a = &schema->actions[i];
    for (size_t k = 0; k < a->member_of_count; k++) {
      const cedar_schema_action *group =
          cedar_schema_action_find(schema, a->member_of[k].type, a->member_of[k].id);
      set_bit(schema->action_ancestors, schema->action_words, i, (size_t)(group - schema->actions));
    }
  }
  close_transitively(schema->action_ancestors, na, schema->action_words);
  for (size_t i = 0; i < na; i++)
    if ((schema->action_ancestors[i * schema->action_words + i / 64] >> (i % 64)) & 1)
      return fail_at(&r, schema->actions[i].line, schema->actions[i].column,
                     "action `%s` is (transitively) a member of itself: action groups form a cycle",
                     schema->actions[i].uid.id);
  return 0;
}
