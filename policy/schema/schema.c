/* Cedar schema: arena, entry points and lookups (see schema.h). */
#include "policy/schema/schema_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---------------- arena ---------------- */

struct schema_arena_chunk {
  schema_arena_chunk *next;
  size_t used, size;
  _Alignas(16) unsigned char data[];
};

void *cedar_schema_arena_alloc(schema_arena *arena, size_t size) {
  size = (size + 15) & ~(size_t)15;
  schema_arena_chunk *chunk = arena->chunks;
  if (!chunk || chunk->size - chunk->used < size) {
    size_t chunk_size = size > 65536 ? size : 65536;
    chunk = malloc(sizeof *chunk + chunk_size);
    if (!chunk) {
      arena->failed = true;
      return NULL;
    }
    chunk->size = chunk_size;
    chunk->used = 0;
    chunk->next = arena->chunks;
    arena->chunks = chunk;
  }
  void *p = chunk->data + chunk->used;
  chunk->used += size;
  memset(p, 0, size);
  return p;
}

char *cedar_schema_arena_strndup(schema_arena *arena, const char *text, size_t length) {
  char *p = cedar_schema_arena_alloc(arena, length + 1);
  if (p) memcpy(p, text, length);
  return p;
}

char *cedar_schema_arena_printf(schema_arena *arena, const char *format, ...) {
  va_list ap;
  va_start(ap, format);
  int n = vsnprintf(NULL, 0, format, ap);
  va_end(ap);
  if (n < 0) return NULL;
  char *p = cedar_schema_arena_alloc(arena, (size_t)n + 1);
  if (!p) return NULL;
  va_start(ap, format);
  vsnprintf(p, (size_t)n + 1, format, ap);
  va_end(ap);
  return p;
}

void *cedar_schema_arena_push(schema_arena *arena, void **items, size_t *count, size_t *capacity,
                              size_t size) {
  if (*count == *capacity) {
    size_t grown = *capacity ? *capacity * 2 : 4;
    void *bigger = cedar_schema_arena_alloc(arena, grown * size);
    if (!bigger) return NULL;
    if (*count) memcpy(bigger, *items, *count * size);
    *items = bigger;
    *capacity = grown;
  }
  void *slot = (char *)*items + (*count)++ * size;
  memset(slot, 0, size);
  return slot;
}

void cedar_schema_arena_release(schema_arena *arena) {
  while (arena->chunks) {
    schema_arena_chunk *next = arena->chunks->next;
    free(arena->chunks);
    arena->chunks = next;
  }
}

/* ---------------- errors ---------------- */

int cedar_schema_set_error(cedar_schema_error *err, const char *file, unsigned line, unsigned column,
                           const char *format, ...) {
  if (!err) return -EINVAL;
  snprintf(err->file, sizeof err->file, "%s", file ? file : "");
  err->line = line;
  err->column = column;
  va_list ap;
  va_start(ap, format);
  vsnprintf(err->message, sizeof err->message, format, ap);
  va_end(ap);
  return -EINVAL;
}

const char *cedar_schema_error_format(const cedar_schema_error *err, char *buf, size_t size) {
  if (!size) return buf;
  if (err->line)
    snprintf(buf, size, "%s%s%u:%u: %s", err->file, err->file[0] ? ":" : "", err->line, err->column,
             err->message);
  else if (err->file[0])
    snprintf(buf, size, "%s: %s", err->file, err->message);
  else
    snprintf(buf, size, "%s", err->message);
  return buf;
}

/* ---------------- entry points ---------------- */

typedef int (*raw_parser)(schema_arena *, const char *, size_t, const char *, raw_schema *,
                          cedar_schema_error *);

static int parse_with(raw_parser parser, const char *text, size_t length, const char *file,
                      cedar_schema **out, cedar_schema_error *err) {
  if (!text || !out) return cedar_schema_set_error(err, file, 0, 0, "no schema text");
  if (length > CEDAR_SCHEMA_MAX_BYTES) {
    cedar_schema_set_error(err, file, 0, 0, "schema is %zu bytes, over the limit of %u bytes", length,
                           CEDAR_SCHEMA_MAX_BYTES);
    return -E2BIG;
  }
  cedar_schema *schema = calloc(1, sizeof *schema);
  if (!schema) return -ENOMEM;
  raw_schema raw = {0};
  int r = parser(&schema->arena, text, length, file, &raw, err);
  if (r == 0) r = cedar_schema_resolve(schema, &raw, file, err);
  if (r == 0 && schema->arena.failed) r = -ENOMEM;
  if (r < 0) {
    if (r == -ENOMEM) cedar_schema_set_error(err, file, 0, 0, "out of memory");
    cedar_schema_free(schema);
    return r;
  }
  *out = schema;
  return 0;
}

int cedar_schema_parse(const char *text, size_t length, const char *file, cedar_schema **out,
                       cedar_schema_error *err) {
  return parse_with(cedar_schema_parse_human, text, length, file, out, err);
}

int cedar_schema_parse_json(const char *text, size_t length, const char *file, cedar_schema **out,
                            cedar_schema_error *err) {
  return parse_with(cedar_schema_parse_json_raw, text, length, file, out, err);
}

int cedar_schema_load_file(const char *path, cedar_schema **out, cedar_schema_error *err) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int e = errno;
    cedar_schema_set_error(err, path, 0, 0, "open: %s", strerror(e));
    return -e;
  }
  struct stat st;
  if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    cedar_schema_set_error(err, path, 0, 0, "not a regular file");
    return -EINVAL;
  }
  if ((uint64_t)st.st_size > CEDAR_SCHEMA_MAX_BYTES) {
    close(fd);
    cedar_schema_set_error(err, path, 0, 0, "schema is %lld bytes, over the limit of %u bytes",
                           (long long)st.st_size, CEDAR_SCHEMA_MAX_BYTES);
    return -E2BIG;
  }
  size_t size = (size_t)st.st_size;
  char *text = malloc(size + 1);
  if (!text) {
    close(fd);
    return -ENOMEM;
  }
  size_t done = 0;
  while (done < size) {
    ssize_t n = read(fd, text + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += (size_t)n;
  }
  close(fd);
  text[done] = '\0';
  size_t length = strlen(path);
  bool json_name = length >= 5 && strcmp(path + length - 5, ".json") == 0;
  int r;
  if (json_name) {
    r = cedar_schema_parse_json(text, done, path, out, err);
  } else {
    r = cedar_schema_parse(text, done, path, out, err);
    size_t i = 0;
    while (i < done && (text[i] == ' ' || text[i] == '\n' || text[i] == '\t' || text[i] == '\r')) i++;
    if (r == -EINVAL && i < done && text[i] == '{') {
      cedar_schema_error json_err;
      if (cedar_schema_parse_json(text, done, path, out, &json_err) == 0) r = 0;
    }
  }
  free(text);
  return r;
}

void cedar_schema_free(cedar_schema *schema) {
  if (!schema) return;
  cedar_schema_arena_release(&schema->arena);
  free(schema);
}

/* ---------------- lookups ---------------- */

size_t cedar_schema_entity_type_count(const cedar_schema *schema) {
  return schema->entity_type_count;
}

const cedar_schema_entity_type *cedar_schema_entity_type_at(const cedar_schema *schema, size_t index) {
  return index < schema->entity_type_count ? &schema->entity_types[index] : NULL;
}

/* Binary search of `order`, `count` indexes of the schema's items sorted by `compare` (an item's order
 * against `key`: negative, 0 or positive). Returns the index of the item equal to `key`, or -1. */
static ptrdiff_t sorted_position(const cedar_schema *schema, const size_t *order, size_t count,
                                 int (*compare)(const cedar_schema *schema, size_t index, const void *key),
                                 const void *key) {
  size_t low = 0, high = count;
  while (low < high) {
    size_t mid = (low + high) / 2;
    int c = compare(schema, order[mid], key);
    if (c == 0) return (ptrdiff_t)order[mid];
    if (c < 0)
      low = mid + 1;
    else
      high = mid;
  }
  return -1;
}

static int compare_entity_type(const cedar_schema *schema, size_t index, const void *name) {
  return strcmp(schema->entity_types[index].name, name);
}

static ptrdiff_t entity_position(const cedar_schema *schema, const char *name) {
  return sorted_position(schema, schema->entity_index, schema->entity_type_count, compare_entity_type, name);
}

const cedar_schema_entity_type *cedar_schema_entity_type_find(const cedar_schema *schema, const char *name) {
  if (!schema || !name) return NULL;
  ptrdiff_t i = entity_position(schema, name);
  return i < 0 ? NULL : &schema->entity_types[i];
}

size_t cedar_schema_action_count(const cedar_schema *schema) {
  return schema->action_count;
}

const cedar_schema_action *cedar_schema_action_at(const cedar_schema *schema, size_t index) {
  return index < schema->action_count ? &schema->actions[index] : NULL;
}

static int compare_action(const cedar_schema_action *a, const char *type, const char *id) {
  int c = strcmp(a->uid.type, type);
  return c ? c : strcmp(a->uid.id, id);
}

struct action_key {
  const char *type, *id;
};

static int compare_action_at(const cedar_schema *schema, size_t index, const void *key) {
  const struct action_key *k = key;
  return compare_action(&schema->actions[index], k->type, k->id);
}

static ptrdiff_t action_position(const cedar_schema *schema, const char *type, const char *id) {
  struct action_key key = {type, id};
  return sorted_position(schema, schema->action_index, schema->action_count, compare_action_at, &key);
}

const cedar_schema_action *cedar_schema_action_find(const cedar_schema *schema, const char *type,
                                                    const char *id) {
  if (!schema || !type || !id) return NULL;
  ptrdiff_t i = action_position(schema, type, id);
  return i < 0 ? NULL : &schema->actions[i];
}

bool cedar_schema_is_action_type(const cedar_schema *schema, const char *type) {
  if (!schema || !type) return false;
  for (size_t i = 0; i < schema->action_type_count; i++)
    if (strcmp(schema->action_types[i], type) == 0) return true;
  return false;
}

const cedar_schema_attribute *cedar_schema_record_attribute(const cedar_schema_type *record,
                                                            const char *name) {
  if (!record || record->kind != CEDAR_SCHEMA_RECORD || !name) return NULL;
  size_t low = 0, high = record->attribute_count;
  while (low < high) {
    size_t mid = (low + high) / 2;
    int c = strcmp(record->attributes[mid].name, name);
    if (c == 0) return &record->attributes[mid];
    if (c < 0)
      low = mid + 1;
    else
      high = mid;
  }
  return NULL;
}

const cedar_schema_type *cedar_schema_entity_attribute(const cedar_schema *schema, const char *entity_type,
                                                       const char *attribute, bool *required) {
  const cedar_schema_entity_type *type = cedar_schema_entity_type_find(schema, entity_type);
  if (!type) return NULL;
  const cedar_schema_attribute *a = cedar_schema_record_attribute(type->shape, attribute);
  if (!a) return NULL;
  if (required) *required = a->required;
  return a->type;
}

const cedar_schema_type *cedar_schema_action_context(const cedar_schema *schema, const char *action_type,
                                                     const char *action_id) {
  const cedar_schema_action *a = cedar_schema_action_find(schema, action_type, action_id);
  return a ? a->context : NULL;
}

static bool bit_test(const uint64_t *bits, size_t words, size_t row, size_t column) {
  return (bits[row * words + column / 64] >> (column % 64)) & 1;
}

bool cedar_schema_entity_type_may_be_in(const cedar_schema *schema, const char *descendant,
                                        const char *ancestor) {
  if (!descendant || !ancestor) return false;
  if (strcmp(descendant, ancestor) == 0) return true;
  ptrdiff_t d = entity_position(schema, descendant), a = entity_position(schema, ancestor);
  if (d < 0 || a < 0) return false;
  return bit_test(schema->entity_ancestors, schema->entity_words, (size_t)d, (size_t)a);
}

bool cedar_schema_action_is_in(const cedar_schema *schema, const cedar_schema_action_ref *descendant,
                               const cedar_schema_action_ref *ancestor) {
  if (strcmp(descendant->type, ancestor->type) == 0 && strcmp(descendant->id, ancestor->id) == 0) return true;
  ptrdiff_t d = action_position(schema, descendant->type, descendant->id);
  ptrdiff_t a = action_position(schema, ancestor->type, ancestor->id);
  if (d < 0 || a < 0) return false;
  return bit_test(schema->action_ancestors, schema->action_words, (size_t)d, (size_t)a);
}

bool cedar_schema_is_extension_type(const char *name) {
  return name && (strcmp(name, "ipaddr") == 0 || strcmp(name, "decimal") == 0 ||
                  strcmp(name, "datetime") == 0 || strcmp(name, "duration") == 0);
}

/* ---------------- formatting ---------------- */

typedef struct text_buffer {
  char *buf;
  size_t size, length;
} text_buffer;

static void append(text_buffer *b, const char *text) {
  size_t n = strlen(text);
  if (b->length < b->size) {
    size_t room = b->size - b->length - 1;
    memcpy(b->buf + b->length, text, n < room ? n : room);
    b->buf[b->length + (n < room ? n : room)] = '\0';
  }
  b->length += n;
}

static void format_type(text_buffer *b, const cedar_schema_type *type, int depth) {
  if (depth > CEDAR_SCHEMA_MAX_DEPTH) {
    append(b, "...");
    return;
  }
  switch (type->kind) {
    case CEDAR_SCHEMA_BOOL:
      append(b, "Bool");
      break;
    case CEDAR_SCHEMA_LONG:
      append(b, "Long");
      break;
    case CEDAR_SCHEMA_STRING:
      append(b, "String");
      break;
    case CEDAR_SCHEMA_ENTITY:
    case CEDAR_SCHEMA_EXTENSION:
      append(b, type->name);
      break;
    case CEDAR_SCHEMA_SET:
      append(b, "Set<");
      format_type(b, type->element, depth + 1);
      append(b, ">");
      break;
    case CEDAR_SCHEMA_RECORD:
      append(b, "{");
      for (size_t i = 0; i < type->attribute_count; i++) {
        append(b, i ? ", " : " ");
        append(b, type->attributes[i].name);
        append(b, type->attributes[i].required ? ": " : "?: ");
        format_type(b, type->attributes[i].type, depth + 1);
      }
      append(b, type->attribute_count ? " }" : "}");
      break;
  }
}

size_t cedar_schema_type_format(const cedar_schema_type *type, char *buf, size_t size) {
  text_buffer b = {buf, size, 0};
  if (size) buf[0] = '\0';
  format_type(&b, type, 0);
  return b.length;
}

size_t cedar_schema_encode_name(const char *text, size_t length, char *buf, size_t size) {
  size_t n = 0;
  for (size_t i = 0; i < length; i++) {
    if (text[i] == '\0') {
      if (n + 2 < size) buf[n] = (char)0xC0, buf[n + 1] = (char)0x80;
      n += 2;
    } else {
      if (n + 1 < size) buf[n] = text[i];
      n++;
    }
  }
  if (size) buf[n < size ? n : size - 1] = '\0';
  return n;
}
