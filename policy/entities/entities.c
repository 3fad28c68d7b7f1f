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
  if (!es) return;
  cedar_arena_free(es->arena);
  free(es->list);
  free(es->table);
  free(es);
}

int cedar_entities_empty(cedar_entities **out) {
  cedar_entities *es = calloc(1, sizeof *es);
  if (!es || !(es->arena = cedar_arena_new())) {
    free(es);
    return -ENOMEM;
  }
  *out = es;
  return 0;
}

/* Insert (or find) an entity; *found tells whether it existed. */
static int table_insert(cedar_entities *es, cedar_entity *e, size_t capacity_hint, cedar_entity **existing) {
  *existing = NULL;
  if (!es->table_size) {
    size_t size = 16;
    while (size < capacity_hint * 2) size *= 2;
    es->table = calloc(size, sizeof *es->table);
    es->list = malloc((capacity_hint ? capacity_hint : 1) * sizeof *es->list);
    if (!es->table || !es->list) return -ENOMEM;
    es->table_size = size;
  }
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

/* Ancestors of every entity: depth-first over parents, marking visits with a per-entity generation. */
static int close_parents(cedar_entities *es, const cedar_entity **cycle) {
  size_t n = es->count;
  uint32_t *mark = calloc(n ? n : 1, sizeof *mark);
  size_t *stack = malloc((n ? n : 1) * sizeof *stack);
  size_t acap = 16;
  cedar_euid *acc = malloc(acap * sizeof *acc);
  int rc = 0;
  if (!mark || !stack || !acc) {
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
          cedar_euid *nacc = realloc(acc, acap * sizeof *acc);
          if (!nacc) {
            rc = -ENOMEM;
            goto out;
          }
          acc = nacc;
        }
        acc[na++] = *p;
      }
    }
    /* sort + dedupe (entities that are not in the set may be reached twice) */
    for (size_t a = 1; a < na; a++) {
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
  free(mark);
  free(stack);
  free(acc);
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

static int parse_entity(cedar_json_reader *rd, json_t *ej, const cedar_schema *schema, cedar_entity *e) {
  if (!json_is_object(ej))
    return cedar_diag_set(rd->diag, rd->file, 0, 0, NULL, "%s: expected an object", cedar_json_where(rd)),
           -EINVAL;
  int r = cedar_json_to_euid(rd, json_object_get(ej, "uid"), "`uid`", &e->uid);
  if (r < 0) return r;
  rd->where_entity = &e->uid;
  /* Other fields are ignored, as upstream does; `attrs` and `parents` are required. */
  if (!json_object_get(ej, "attrs") || !json_object_get(ej, "parents"))
    return cedar_diag_set(rd->diag, rd->file, 0, 0, NULL, "%s: missing field `%s`", cedar_json_where(rd),
                          json_object_get(ej, "attrs") ? "parents" : "attrs"),
           -EINVAL;
  const cedar_schema_entity_type *et = NULL;
  bool is_action = false;
  if (schema) {
    char *type = cedar_arena_strndup(rd->arena, e->uid.type.ptr, e->uid.type.len);
    if (!type) return -ENOMEM;
    et = cedar_schema_entity_type_find(schema, type);
    is_action = cedar_schema_is_action_type(schema, type);
    if (!et && !is_action)
      return cedar_diag_set(rd->diag, rd->file, 0, 0, NULL,
                            "%s: entity type `%s` is not declared in the schema", cedar_json_where(rd), type),
             -EINVAL;
    if (et && et->is_enum) {
      bool ok = false;
      char *encoded = cedar_schema_name_encode(e->uid.id);
      if (!encoded) return -ENOMEM;
      for (size_t i = 0; i < et->enum_id_count && !ok; i++) ok = strcmp(encoded, et->enum_ids[i]) == 0;
      free(encoded);
      if (!ok)
        return cedar_diag_set(rd->diag, rd->file, 0, 0, NULL, "%s: id is not one of the enum values of `%s`",
                              cedar_json_where(rd), type),
               -EINVAL;
    }
  }
  json_t *attrs = json_object_get(ej, "attrs");
  if (attrs && !json_is_object(attrs))
    return cedar_diag_set(rd->diag, rd->file, 0, 0, NULL, "%s: `attrs` must be an object",
                          cedar_json_where(rd)),
           -EINVAL;
  json_t *empty = json_object();
  if (!empty) return -ENOMEM;
  r = cedar_json_to_value(rd, attrs ? attrs : empty, et ? et->shape : NULL, 0, &e->attrs);
  json_t *tags = json_object_get(ej, "tags");
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
  json_decref(empty);
  if (r < 0) return r;
  json_t *parents = json_object_get(ej, "parents");
  if (parents && !json_is_array(parents))
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

static int add_schema_actions(cedar_entities *es, const cedar_schema *schema, size_t capacity) {
  size_t n = cedar_schema_action_count(schema);
  for (size_t i = 0; i < n; i++) {
    const cedar_schema_action *a = cedar_schema_action_at(schema, i);
    cedar_entity *e = cedar_arena_alloc(es->arena, sizeof *e);
    cedar_euid *ps =
        a->member_of_count ? cedar_arena_alloc(es->arena, a->member_of_count * sizeof *ps) : NULL;
    if (!e || (a->member_of_count && !ps)) return -ENOMEM;
    e->uid.type = (cedar_str){a->uid.type, strlen(a->uid.type)};
    if (cedar_schema_name_decode(es->arena, a->uid.id, &e->uid.id) < 0) return -ENOMEM;
    for (size_t k = 0; k < a->member_of_count; k++) {
      ps[k].type = (cedar_str){a->member_of[k].type, strlen(a->member_of[k].type)};
      if (cedar_schema_name_decode(es->arena, a->member_of[k].id, &ps[k].id) < 0) return -ENOMEM;
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

int cedar_entities_parse_json(const char *text, size_t length, const char *file,
                              const struct cedar_schema *schema, cedar_entities **out,
                              cedar_diagnostic *diag) {
  if (length > CEDAR_MAX_TEXT_BYTES) {
    cedar_diag_set(diag, file, 0, 0, NULL, "entities input of %zu bytes is over the limit", length);
    return -E2BIG;
  }
  json_error_t jerr;
  json_t *root = cedar_json_loadb(text, length, &jerr);
  if (!root) {
    cedar_diag_set(diag, file, (unsigned)(jerr.line > 0 ? jerr.line : 0),
                   (unsigned)(jerr.column > 0 ? jerr.column : 0), NULL, "invalid JSON: %s", jerr.text);
    return -EINVAL;
  }
  if (!json_is_array(root)) {
    json_decref(root);
    cedar_diag_set(diag, file, 0, 0, NULL, "entities JSON must be an array of entities");
    return -EINVAL;
  }
  cedar_entities *es;
  int r = cedar_entities_empty(&es);
  if (r < 0) {
    json_decref(root);
    return r;
  }
  cedar_json_reader rd = {.arena = es->arena, .file = file, .diag = diag};
  size_t n = json_array_size(root);
  size_t capacity = n + (schema ? cedar_schema_action_count(schema) : 0) + 1;
  for (size_t i = 0; i < n && r >= 0; i++) {
    snprintf(rd.where, sizeof rd.where, "entity #%zu", i);
    rd.where_entity = NULL;
    cedar_entity *e = cedar_arena_alloc(es->arena, sizeof *e);
    if (!e) {
      r = -ENOMEM;
      break;
    }
    r = parse_entity(&rd, json_array_get(root, i), schema, e);
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
  if (r >= 0 && !es->table_size) {
    es->table = calloc(16, sizeof *es->table);
    es->list = malloc(capacity * sizeof *es->list);
    es->table_size = 16;
    if (!es->table || !es->list) r = -ENOMEM;
  }
  if (r >= 0 && schema) r = add_schema_actions(es, schema, capacity);
  const cedar_entity *cycle = NULL;
  if (r >= 0) r = close_parents(es, &cycle);
  if (r == -ELOOP) {
    char t[160];
    cedar_diag_set(diag, file, 0, 0, NULL, "the entity hierarchy has a cycle containing `%s`",
                   uid_text(&cycle->uid, t, sizeof t));
    r = -EINVAL;
  }
  json_decref(root);
  if (r < 0) {
    cedar_entities_free(es);
    return r;
  }
  *out = es;
  return 0;
}

int cedar_context_parse_json(const char *text, size_t length, const char *file,
                             const struct cedar_schema *schema, const cedar_uid_ref *action,
                             cedar_context **out, cedar_diagnostic *diag) {
  if (length > CEDAR_MAX_TEXT_BYTES) {
    cedar_diag_set(diag, file, 0, 0, NULL, "context input of %zu bytes is over the limit", length);
    return -E2BIG;
  }
  json_error_t jerr;
  json_t *root = cedar_json_loadb(text, length, &jerr);
  if (!root) {
    cedar_diag_set(diag, file, (unsigned)(jerr.line > 0 ? jerr.line : 0),
                   (unsigned)(jerr.column > 0 ? jerr.column : 0), NULL, "invalid JSON: %s", jerr.text);
    return -EINVAL;
  }
  int r = 0;
  const cedar_schema_type *type = NULL;
  if (!json_is_object(root)) {
    cedar_diag_set(diag, file, 0, 0, NULL, "context must be a JSON object");
    r = -EINVAL;
  } else if (schema && action) {
    const char *id = action->id ? action->id : "";
    char *encoded =
        cedar_schema_name_encode((cedar_str){id, action->id_length ? action->id_length : strlen(id)});
    type = encoded ? cedar_schema_action_context(schema, action->type, encoded) : NULL;
    free(encoded);
    if (!type) {
      cedar_diag_set(diag, file, 0, 0, NULL, "context: action `%s::\"%s\"` is not declared in the schema",
                     action->type, action->id ? action->id : "");
      r = -EINVAL;
    }
  }
  cedar_context *ctx = NULL;
  if (r >= 0) {
    ctx = calloc(1, sizeof *ctx);
    if (!ctx || !(ctx->arena = cedar_arena_new())) r = -ENOMEM;
  }
  if (r >= 0) {
    cedar_json_reader rd = {.arena = ctx->arena, .file = file, .diag = diag, .lenient = true};
    snprintf(rd.where, sizeof rd.where, "context");
    r = cedar_json_to_value(&rd, root, type, 0, &ctx->value);
    if (r >= 0 && ctx->value.kind != CV_RECORD) {
      cedar_diag_set(diag, file, 0, 0, NULL, "context must be a record");
      r = -EINVAL;
    }
  }
  json_decref(root);
  if (r < 0) {
    cedar_context_free(ctx);
    return r;
  }
  *out = ctx;
  return 0;
}

void cedar_context_free(cedar_context *context) {
  if (!context) return;
  cedar_arena_free(context->arena);
  free(context);
}

const char *cedar_json_where(cedar_json_reader *rd) {
  if (rd->where_entity) {
    char t[160];
    snprintf(rd->where, sizeof rd->where, "entity `%s`", uid_text(rd->where_entity, t, sizeof t));
    rd->where_entity = NULL;
  }
  return rd->where;
}
