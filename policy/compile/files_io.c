/* dome_compile_files: the file-reading front of the compiler (CLI and `dome run`). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/compile/compile.h"
#include "policy/schema/schema.h"
#include "supervisor/common/cleanup.h"

static int read_file(const char *path, char **text_out, size_t *length_out, dome_error *err) {
  _cleanup_fclose_ FILE *f = fopen(path, "rb");
  if (!f) return dome_error_set_errno(err, errno, "open `%s`", path);
  size_t capacity = 65536, length = 0;
  char *text = malloc(capacity + 1);
  if (!text) return dome_error_set(err, ENOMEM, "out of memory");
  for (;;) {
    if (length == capacity) {
      if (capacity >= CEDAR_MAX_TEXT_BYTES) {
        free(text);
        return dome_error_set(err, E2BIG, "`%s`: larger than %u bytes", path, CEDAR_MAX_TEXT_BYTES);
      }
      capacity *= 2;
      char *grown = realloc(text, capacity + 1);
      if (!grown) {
        free(text);
        return dome_error_set(err, ENOMEM, "out of memory");
      }
      text = grown;
    }
    size_t n = fread(text + length, 1, capacity - length, f);
    length += n;
    if (n == 0) break;
  }
  if (ferror(f)) {
    free(text);
    return dome_error_set_errno(err, EIO, "read `%s`", path);
  }
  text[length] = 0;
  *text_out = text;
  *length_out = length;
  return 0;
}

int dome_compile_files(const char *rules_path, const char *entities_path,
                       const struct dome_compile_options *options, struct dome_rule_tables *tables,
                       dome_error *err) {
  dome_rule_tables_init(tables);
  _cleanup_free_ char *rules = NULL, *entity_text = NULL;
  size_t rules_length = 0, entity_length = 0;
  int rc = 0;
  if (rules_path && (rc = read_file(rules_path, &rules, &rules_length, err)) < 0) return rc;
  if (entities_path && (rc = read_file(entities_path, &entity_text, &entity_length, err)) < 0) return rc;
  cedar_schema *schema = NULL;
  cedar_schema_error schema_err;
  if (cedar_schema_load_dome(&schema, &schema_err) < 0) {
    char text[900];
    return dome_error_set(err, EINVAL, "schema: %s",
                          cedar_schema_error_format(&schema_err, text, sizeof text));
  }
  cedar_entities *entities = NULL;
  cedar_policy_set *set = NULL;
  rc = dome_compile_load_entities(entity_text, entity_length, entities_path, schema, &entities, err);
  if (rc == 0) rc = dome_compile_load_policies(rules, rules_length, rules_path, &set, err);
  if (rc == 0) rc = dome_compile_tables(set, entities, options, tables, err);
  cedar_policy_set_free(set);
  cedar_entities_free(entities);
  cedar_schema_free(schema);
  return rc;
}
