/* Entity sets and contexts from JSON (Cedar "Entities & context JSON format"), with the transitive
 * closure of the parent relation (cycles allowed) and, given a schema, typed attributes and the
 * schema's action entities (as cedar-policy's Entities::from_json_value does). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/entities/entities.h"

struct cedar_entities {
  cedar_arena *arena;
  cedar_entity **list;
  size_t count;
  uint32_t *table; /* open addressing: index + 1, 0 = empty */
  size_t table_size;
};

struct cedar_context {
  cedar_arena *arena;
  cedar_value value;
};

static const cedar_value empty_record = {.kind = CV_RECORD};

const cedar_value *cedar_context_value(const cedar_context *context) {
  return context ? &context->value : &empty_record;
}

const cedar_entity *cedar_entities_find(const cedar_entities *es, const cedar_euid *uid) {
  if (!es->table_size) return NULL;
  size_t mask = es->table_size - 1;
  for (size_t h = (size_t)cedar_euid_hash(uid) & mask;; h = (h + 1) & mask) {
    uint32_t slot = es->table[h];
    if (!slot) return NULL;
    if (cedar_euid_eq(&es->list[slot - 1]->uid, uid)) return es->list[slot - 1];
  }
}

bool cedar_entity_has_ancestor(const cedar_entity *e, const cedar_euid *ancestor) {
  size_t lo = 0, hi = e->ancestor_count;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    int c = cedar_euid_cmp(&e->ancestors[mid], ancestor);
    if (c == 0) return true;
    if (c < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  return false;
}

size_t cedar_entities_count(const cedar_entities *entities) {
  return entities ? entities->count : 0;
}

void cedar_entities_free(cedar_entities *es) {
  if (es) cedar_arena_free(es->arena); /* the set itself is in its arena */
}

/* An empty set in a new arena whose first block holds first_block bytes (0: the default). */
static int entities_new(size_t first_block, cedar_entities **out) {
  cedar_arena *arena = first_block ? cedar_arena_new_sized(first_block, 16u << 10) : cedar_arena_new();
  cedar_entities *es = arena ? cedar_arena_alloc(arena, sizeof *es) : NULL;
  if (!es) {
    cedar_arena_free(arena);
    return -ENOMEM;
  }
  es->arena = arena;
  *out = es;
  return 0;
}

int cedar_entities_empty(cedar_entities **out) {
  return entities_new(0, out);
}

/* The hash table (at most half full) and list for capacity entities, in the set's arena. */
static int table_init(cedar_entities *es, size_t capacity) {
  size_t size = 16;
  while (size < capacity * 2) size *= 2;
  es->table = cedar_arena_alloc(es->arena, size * sizeof *es->table);
  es->list = cedar_arena_alloc(es->arena, (capacity ? capacity : 1) * sizeof *es->list);
  if (!es->table || !es->list) return -ENOMEM;
  es->table_size = size;
  return 0;
}

/* Insert (or find) an entity; *found tells whether it existed. */
static int table_insert(cedar_entities *es, cedar_entity *e, size_t capacity_hint, cedar_entity **existing) {
  *existing = NULL;
  if (!es->table_size && table_init(es, capacity_hint) < 0) return -ENOMEM;
  size_t mask = es->table_size - 1;
  size_t h = (size_t)cedar_euid_hash(&e->uid) & mask;
  for (;; h = (h + 1) & mask) {
    uint32_t slot = es->table[h];
    if (!slot) break;
    if (cedar_euid_eq(&es->list[slot - 1]->uid, &e->uid)) {
      *existing = es->list[slot - 1];
      return 0;
    }
  }
  es->list[es->count] = e;
  es->table[h] = (uint32_t)(++es->count);
  return 0;
}

static int euid_order(const void *a, const void *b) {
  return cedar_euid_cmp(a, b);
}

/* Ancestors of every entity: depth-first over parents, marking visits with a per-entity generation. */
static int close_parents(cedar_entities *es, const cedar_entity **cycle) {
  size_t n = es->count;
  bool any = false;
  for (size_t i = 0; i < n && !any; i++) any = es->list[i]->parent_count > 0;
  if (!any) return 0; /* no hierarchy: every ancestor set is empty */
  /* scratch: on the stack for small sets */
  enum { SMALL = 64 };
  uint32_t mark_small[SMALL] = {0};
  size_t stack_small[SMALL];
  cedar_euid acc_small[SMALL];
  uint32_t *mark = n <= SMALL ? mark_small : calloc(n, sizeof *mark);
  size_t *stack = n <= SMALL ? stack_small : malloc(n * sizeof *stack);
  size_t acap = SMALL;
  cedar_euid *acc = acc_small;
  int rc = 0;
  if (!mark || !stack) {
    rc = -ENOMEM;
    goto out;
  }
  for (size_t i = 0; i < n; i++) {
    uint32_t gen = (uint32_t)i + 1;
    size_t sp = 0, na = 0;
    bool cyclic = false;
    stack[sp++] = i;
    mark[i] = gen;
    while (sp) {
      cedar_entity *e = es->list[stack[--sp]];
      for (size_t k = 0; k < e->parent_count; k++) {
        const cedar_euid *p = &e->parents[k];
        /* index of the parent in the set, if it is there */
        size_t mask = es->table_size - 1;
        uint32_t slot = 0;
        for (size_t h = (size_t)cedar_euid_hash(p) & mask;; h = (h + 1) & mask) {
          slot = es->table[h];
          if (!slot || cedar_euid_eq(&es->list[slot - 1]->uid, p)) break;
        }
        if (slot) {
          size_t idx = slot - 1;
          if (mark[idx] == gen) {
            if (idx == i) cyclic = true;
            continue;
          }
          mark[idx] = gen;
          stack[sp++] = idx;
        }
        if (na == acap) {
          acap *= 2;
          cedar_euid *nacc = realloc(acc == acc_small ? NULL : acc, acap * sizeof *acc);
          if (!nacc) {
            rc = -ENOMEM;
            goto out;
          }
          if (acc == acc_small) memcpy(nacc, acc_small, sizeof acc_small);
          acc = nacc;
        }
        acc[na++] = *p;
      }
    }
    /* sort + dedupe (entities that are not in the set may be reached twice) */
    if (na > 32) qsort(acc, na, sizeof *acc, euid_order);
    for (size_t a = 1; a < na && na <= 32; a++) {
      cedar_euid v = acc[a];
      size_t b = a;
      while (b > 0 && cedar_euid_cmp(&acc[b - 1], &v) > 0) {
        acc[b] = acc[b - 1];
        b--;
      }
      acc[b] = v;
    }
    size_t m = 0;
    for (size_t a = 0; a < na; a++)
      if (m == 0 || !cedar_euid_eq(&acc[m - 1], &acc[a])) acc[m++] = acc[a];
    cedar_euid *anc = m ? cedar_arena_alloc(es->arena, m * sizeof *anc) : NULL;
    if (m && !anc) {
      rc = -ENOMEM;
      goto out;
    }
    if (m) memcpy(anc, acc, m * sizeof *anc);
    es->list[i]->ancestors = anc;
    es->list[i]->ancestor_count = m;
    if (cyclic) {
      /* upstream (cedar-policy 4.x) refuses a parent relation with a cycle */
      *cycle = es->list[i];
      rc = -ELOOP;
      goto out;
    }
  }
out:
  if (mark != mark_small) free(mark);
  if (stack != stack_small) free(stack);
  if (acc != acc_small) free(acc);
  return rc;
}

static bool same_parents(const cedar_entity *a, const cedar_entity *b) {
  for (int pass = 0; pass < 2; pass++) {
    const cedar_entity *x = pass ? b : a, *y = pass ? a : b;
    for (size_t i = 0; i < x->parent_count; i++) {
      bool found = false;
      for (size_t k = 0; k < y->parent_count && !found; k++)
        found = cedar_euid_eq(&x->parents[i], &y->parents[k]);
      if (!found) return false;
    }
  }
  return true;
}

static bool same_entity(const cedar_entity *a, const cedar_entity *b) {
  return cedar_value_eq(&a->attrs, &b->attrs) && cedar_value_eq(&a->tags, &b->tags) && same_parents(a, b);
}

static char *uid_text(const cedar_euid *uid, char *buf, size_t size) {
  cedar_buf b = {0};
  cedar_print_euid(&b, uid);
  char *t = cedar_buf_finish(&b);
  snprintf(buf, size, "%s", t ? t : "?");
  free(t);
  return buf;
}

/* The schema's declaration of an entity type (NULL for an action type); the last answer is kept, since
 * consecutive entities often share their type. -EINVAL when the schema declares neither. */
typedef struct type_cache {
  cedar_str name;
  const cedar_schema_entity_type *et;
} type_cache;

static int schema_entity_type(cedar_json_reader *rd, const cedar_schema *schema, cedar_str name,
                              type_cache *cache, const cedar_schema_entity_type **out) {
  if (cache->name.ptr && cedar_str_eq(cache->name, name)) {
    *out = cache->et;
    return 0;
  }
  char small[128];
  char *type = name.len < sizeof small ? small : cedar_arena_alloc(rd->arena, name.len + 1);
  if (!type) return -ENOMEM;
  memcpy(type, name.ptr, name.len);
  type[name.len] = 0;
  const cedar_schema_entity_type *et = cedar_schema_entity_type_find(schema, type);
  if (!et && !cedar_schema_is_action_type(schema, type))
    return cedar_diag_set(rd->diag, rd->file, 0, 0, NULL,
                          "%s: entity type `%s` is not declared in the schema", cedar_json_where(rd), type),
           -EINVAL;
  cache->name = name;
  cache->et = et;
  *out = et;
  return 0;
}

static int parse_entity(cedar_json_reader *rd, json_t *ej, const cedar_schema *schema, type_cache *cache,
                        cedar_entity *e) {
  if (!json_is_object(ej))
    return cedar_diag_set(rd->diag, rd->file, 0, 0, NULL, "%s: expected an object", cedar_json_where(rd)),
           -EINVAL;
  /* Other fields are ignored, as upstream does; `attrs` and `parents` are required. */
  json_t *uid = NULL, *attrs = NULL, *parents = NULL, *tags = NULL;
  for (void *it = json_object_iter(ej); it; it = json_object_iter_next(ej, it)) {
    const char *k = json_object_iter_key(it);
    json_t *v = json_object_iter_value(it);
    /* dispatch on the first byte: one comparison per member */
    if (k[0] == 'u' && strcmp(k, "uid") == 0)
      uid = v;
    else if (k[0] == 'a' && strcmp(k, "attrs") == 0)
      attrs = v;
    else if (k[0] == 'p' && strcmp(k, "parents") == 0)
      parents = v;
    else if (k[0] == 't' && strcmp(k, "tags") == 0)
      tags = v;
  }
  int r = cedar_json_to_euid(rd, uid, "`uid`", &e->uid);
  if (r < 0) return r;
  rd->where_entity = &e->uid;
  if (!attrs || !parents)
    return cedar_diag_set(rd->diag, rd->file, 0, 0, NULL, "%s: missing field `%s`", cedar_json_where(rd),
                          attrs ? "parents" : "attrs"),
           -EINVAL;
  const cedar_schema_entity_type *et = NULL;
  if (schema) {
    if ((r = schema_entity_type(rd, schema, e->uid.type, cache, &et)) < 0) return r;
    if (et && et->is_enum) {
      bool ok = false;
      char *encoded = cedar_schema_name_encode(e->uid.id);
      if (!encoded) return -ENOMEM;
      for (size_t i = 0; i < et->enum_id_count && !ok; i++) ok = strcmp(encoded, et->enum_ids[i]) == 0;
      free(encoded);
      if (!ok)
        return cedar_diag_set(rd->diag, rd->file, 0, 0, NULL, "%s: id is not one of the enum values of `%s`",
                              cedar_json_where(rd), et->name),
               -EINVAL;
    }
  }
  if (!json_is_object(attrs))
    return cedar_diag_set(rd->diag, rd->file, 0, 0, NULL, "%s: `attrs` must be an object",
                          cedar_json_where(rd)),
           -EINVAL;
  r = cedar_json_to_value(rd, attrs, et ? et->shape : NULL, 0, &e->attrs);
  if (r >= 0 && tags && !json_is_object(tags)) {
    cedar_diag_set(rd->diag, rd->file, 0, 0, NULL, "%s: `tags` must be an object", cedar_json_where(rd));
    r = -EINVAL;
  }
  if (r >= 0 && et && tags && json_object_size(tags) && !et->tags) {
    cedar_diag_set(rd->diag, rd->file, 0, 0, NULL, "%s: entity type `%s` has no tags", cedar_json_where(rd),
                   et->name);
    r = -EINVAL;
  }
  if (r >= 0) {
    /* tags: a record whose every value has the tag type */
    size_t n = tags ? json_object_size(tags) : 0;
    cedar_str *keys = n ? cedar_arena_alloc(rd->arena, n * sizeof *keys) : NULL;
    cedar_value *values = n ? cedar_arena_alloc(rd->arena, n * sizeof *values) : NULL;
    if (n && (!keys || !values)) r = -ENOMEM;
    size_t i = 0;
    for (void *it = tags ? json_object_iter(tags) : NULL; r >= 0 && it;
         it = json_object_iter_next(tags, it), i++) {
      r = cedar_json_copy_bytes(rd->arena, json_object_iter_key(it), json_object_iter_key_len(it), &keys[i]);
      if (r >= 0)
        r = cedar_json_to_value(rd, json_object_iter_value(it), et ? et->tags : NULL, 1, &values[i]);
    }
    if (r >= 0) {
      cedar_value_record_normalize(keys, values, n, NULL);
      e->tags.kind = CV_RECORD;
      e->tags.u.record.keys = keys;
      e->tags.u.record.values = values;
      e->tags.u.record.count = n;
    }
  }
  if (r < 0) return r;
  if (!json_is_array(parents))
    return cedar_diag_set(rd->diag, rd->file, 0, 0, NULL, "%s: `parents` must be an array",
                          cedar_json_where(rd)),
           -EINVAL;
  size_t n = parents ? json_array_size(parents) : 0;
  cedar_euid *ps = n ? cedar_arena_alloc(rd->arena, n * sizeof *ps) : NULL;
  if (n && !ps) return -ENOMEM;
  for (size_t i = 0; i < n; i++) {
    if ((r = cedar_json_to_euid(rd, json_array_get(parents, i), "parent", &ps[i])) < 0) return r;
    if (et) {
      bool ok = false;
      for (size_t k = 0; k < et->member_of_count && !ok; k++)
        ok = cedar_str_eq_c(ps[i].type, et->member_of[k]);
      if (!ok)
        return cedar_diag_set(rd->diag, rd->file, 0, 0, NULL, "%s: `%s` may not have a parent of type `%.*s`",
                              cedar_json_where(rd), et->name, (int)ps[i].type.len, ps[i].type.ptr),
               -EINVAL;
    }
  }
  e->parents = ps;
  e->parent_count = n;
  return 0;
}

/* A schema name as a cedar_str: the schema's own bytes unless it encodes a NUL (0xC0 0x80). The entity
 * set already refers to the schema's strings (action types), so it lives no longer than the schema. */
static int schema_name(cedar_arena *arena, const char *name, cedar_str *out) {
  size_t n = strlen(name);
  if (!memchr(name, 0xc0, n)) {
    *out = (cedar_str){name, n};
    return 0;
  }
  return cedar_schema_name_decode(arena, name, out);
}

static int add_schema_actions(cedar_entities *es, const cedar_schema *schema, size_t capacity) {
  size_t n = cedar_schema_action_count(schema);
  for (size_t i = 0; i < n; i++) {
    const cedar_schema_action *a = cedar_schema_action_at(schema, i);
    cedar_entity *e = cedar_arena_alloc(es->arena, sizeof *e);
    cedar_euid *ps =
        a->member_of_count ? cedar_arena_alloc(es->arena, a->member_of_count * sizeof *ps) : NULL;
    if (!e || (a->member_of_count && !ps)) return -ENOMEM;
    e->uid.type = (cedar_str){a->uid.type, strlen(a->uid.type)};
    if (schema_name(es->arena, a->uid.id, &e->uid.id) < 0) return -ENOMEM;
    for (size_t k = 0; k < a->member_of_count; k++) {
      ps[k].type = (cedar_str){a->member_of[k].type, strlen(a->member_of[k].type)};
      if (schema_name(es->arena, a->member_of[k].id, &ps[k].id) < 0) return -ENOMEM;
    }
    e->parents = ps;
    e->parent_count = a->member_of_count;
    e->attrs.kind = CV_RECORD;
    e->tags.kind = CV_RECORD;
    cedar_entity *existing;
    int r = table_insert(es, e, capacity, &existing);
    if (r < 0) return r;
    if (existing && !existing->parent_count) {
      existing->parents = ps;
      existing->parent_count = a->member_of_count;
    }
  }
  return 0;
}

static int entities_from_tree(json_t *root, size_t size_hint, const char *file, const cedar_schema *schema,
                              cedar_entities **out, cedar_diagnostic *diag);

/* Load `what` JSON text (entities or context) into a scratch tree: the root, or NULL with *diag set and
 * *rc = -E2BIG (over CEDAR_MAX_TEXT_BYTES) or -EINVAL (not JSON, with line:column). */
static json_t *load_text(cedar_json_scratch *scratch, const char *what, const char *text, size_t length,
                         const char *file, cedar_diagnostic *diag, int *rc) {
  if (length > CEDAR_MAX_TEXT_BYTES) {
    cedar_diag_set(diag, file, 0, 0, NULL, "%s input of %zu bytes is over the limit", what, length);
    *rc = -E2BIG;
    return NULL;
  }
  json_error_t jerr;
  json_t *root = cedar_json_scratch_load(scratch, text, length, &jerr);
  if (!root) {
    cedar_diag_set(diag, file, (unsigned)(jerr.line > 0 ? jerr.line : 0),
                   (unsigned)(jerr.column > 0 ? jerr.column : 0), NULL, "invalid JSON: %s", jerr.text);
    *rc = -EINVAL;
  }
  return root;
}

int cedar_entities_parse_json(const char *text, size_t length, const char *file,
                              const struct cedar_schema *schema, cedar_entities **out,
                              cedar_diagnostic *diag) {
  int r = 0;
  cedar_json_scratch scratch;
  json_t *root = load_text(&scratch, "entities", text, length, file, diag, &r);
  if (!root) return r;
  r = entities_from_tree(root, length, file, schema, out, diag);
  cedar_json_scratch_release(&scratch, root);
  return r;
}

int cedar_entities_from_json(const json_t *json, const char *file, const struct cedar_schema *schema,
                             cedar_entities **out, cedar_diagnostic *diag) {
  /* jansson's getters take non-const pointers; the tree is only read */
  return entities_from_tree((json_t *)json, 0, file, schema, out, diag);
}

/* The entity set of a parsed entities array; size_hint: bytes of its JSON text (0: unknown). */
static int entities_from_tree(json_t *root, size_t size_hint, const char *file, const cedar_schema *schema,
                              cedar_entities **out, cedar_diagnostic *diag) {
  if (!json_is_array(root)) {
    cedar_diag_set(diag, file, 0, 0, NULL, "entities JSON must be an array of entities");
    return -EINVAL;
  }
  cedar_entities *es;
  /* the converted set takes up to about twice its JSON text: one block for the common small sets (the
   * default first block, served from malloc's small-chunk cache, for the smallest) */
  int r = entities_new(size_hint < 400 ? 0 : size_hint < (8u << 10) ? 2 * size_hint : 16u << 10, &es);
  if (r < 0) return r;
  cedar_json_reader rd = {.arena = es->arena, .file = file, .diag = diag};
  size_t n = json_array_size(root);
  size_t capacity = n + (schema ? cedar_schema_action_count(schema) : 0) + 1;
  type_cache cache = {0};
  for (size_t i = 0; i < n && r >= 0; i++) {
    rd.where[0] = 0; /* "entity #i", formatted only for an error */
    rd.where_index = i;
    rd.where_entity = NULL;
    cedar_entity *e = cedar_arena_alloc(es->arena, sizeof *e);
    if (!e) {
      r = -ENOMEM;
      break;
    }
    r = parse_entity(&rd, json_array_get(root, i), schema, &cache, e);
    if (r < 0) break;
    cedar_entity *existing;
    r = table_insert(es, e, capacity, &existing);
    if (r >= 0 && existing && !same_entity(existing, e)) {
      /* upstream accepts an entity listed twice only when both entries are identical */
      cedar_diag_set(diag, file, 0, 0, NULL, "%s: duplicate entity entry with different data",
                     cedar_json_where(&rd));
      r = -EINVAL;
    }
  }
  if (r >= 0 && !es->table_size && table_init(es, capacity) < 0) r = -ENOMEM;
  if (r >= 0 && schema) r = add_schema_actions(es, schema, capacity);
  const cedar_entity *cycle = NULL;
  if (r >= 0) r = close_parents(es, &cycle);
  if (r == -ELOOP) {
    char t[160];
    cedar_diag_set(diag, file, 0, 0, NULL, "the entity hierarchy has a cycle containing `%s`",
                   uid_text(&cycle->uid, t, sizeof t));
    r = -EINVAL;
  }
  if (r < 0) {
    cedar_entities_free(es);
    return r;
  }
  *out = es;
  return 0;
}

/* The context of a parsed JSON value (an object). */
static int context_from_tree(json_t *root, const char *file, const cedar_schema *schema,
                             const cedar_uid_ref *action, cedar_context **out, cedar_diagnostic *diag) {
  const cedar_schema_type *type = NULL;
  if (!json_is_object(root)) {
    cedar_diag_set(diag, file, 0, 0, NULL, "context must be a JSON object");
    return -EINVAL;
  }
  if (schema && action) {
    const char *id = action->id ? action->id : "";
    cedar_str name = {id, action->id_length ? action->id_length : strlen(id)};
    char small[128];
    char *encoded = name.len < sizeof small / 2 ? small : cedar_schema_name_encode(name);
    if (encoded == small) cedar_schema_encode_name(name.ptr, name.len, small, sizeof small);
    type = encoded ? cedar_schema_action_context(schema, action->type, encoded) : NULL;
    if (encoded != small) free(encoded);
    if (!type) {
      cedar_diag_set(diag, file, 0, 0, NULL, "context: action `%s::\"%s\"` is not declared in the schema",
                     action->type, action->id ? action->id : "");
      return -EINVAL;
    }
  }
  /* the context lives in its own arena */
  cedar_arena *arena = cedar_arena_new();
  cedar_context *ctx = arena ? cedar_arena_alloc(arena, sizeof *ctx) : NULL;
  if (!ctx) {
    cedar_arena_free(arena);
    return -ENOMEM;
  }
  ctx->arena = arena;
  cedar_json_reader rd = {.arena = ctx->arena, .file = file, .diag = diag, .lenient = true};
  memcpy(rd.where, "context", sizeof "context");
  int r = cedar_json_to_value(&rd, root, type, 0, &ctx->value);
  if (r >= 0 && ctx->value.kind != CV_RECORD) {
    cedar_diag_set(diag, file, 0, 0, NULL, "context must be a record");
    r = -EINVAL;
  }
  if (r < 0) {
    cedar_context_free(ctx);
    return r;
  }
  *out = ctx;
  return 0;
}

int cedar_context_parse_json(const char *text, size_t length, const char *file,
                             const struct cedar_schema *schema, const cedar_uid_ref *action,
                             cedar_context **out, cedar_diagnostic *diag) {
  int r = 0;
  cedar_json_scratch scratch;
  json_t *root = load_text(&scratch, "context", text, length, file, diag, &r);
  if (!root) return r;
  r = context_from_tree(root, file, schema, action, out, diag);
  cedar_json_scratch_release(&scratch, root);
  return r;
}

int cedar_context_from_json(const json_t *json, const char *file, const struct cedar_schema *schema,
                            const cedar_uid_ref *action, cedar_context **out, cedar_diagnostic *diag) {
  return context_from_tree((json_t *)json, file, schema, action, out, diag); /* read only */
}

void cedar_context_free(cedar_context *context) {
  if (context) cedar_arena_free(context->arena); /* the context itself is in its arena */
}

const char *cedar_json_where(cedar_json_reader *rd) {
  if (!rd->where_entity && !rd->where[0])
    snprintf(rd->where, sizeof rd->where, "entity #%zu", rd->where_index);
  if (rd->where_entity) {
    char t[160];
    snprintf(rd->where, sizeof rd->where, "entity `%s`", uid_text(rd->where_entity, t, sizeof t));
    rd->where_entity = NULL;
  }
  return rd->where;
}
