/* libFuzzer target: both schema syntaxes (policy/schema). Accepted schemas are walked through the lookup
 * API and used to type an entities document. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "policy/cedar.h"
#include "policy/schema/schema.h"

static const char entities[] = "[{\"uid\":{\"type\":\"A\",\"id\":\"a\"},\"attrs\":{\"x\":1},\"parents\":[]}]";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  for (int json = 0; json < 2; json++) {
    cedar_schema *schema;
    cedar_schema_error err;
    int r = json ? cedar_schema_parse_json((const char *)data, size, "fuzz", &schema, &err)
                 : cedar_schema_parse((const char *)data, size, "fuzz", &schema, &err);
    if (r < 0) continue;
    char buf[256];
    for (size_t i = 0; i < cedar_schema_entity_type_count(schema); i++) {
      const cedar_schema_entity_type *t = cedar_schema_entity_type_at(schema, i);
      cedar_schema_type_format(t->shape, buf, sizeof buf);
    }
    for (size_t i = 0; i < cedar_schema_action_count(schema); i++) {
      const cedar_schema_action *a = cedar_schema_action_at(schema, i);
      if (a->context) cedar_schema_type_format(a->context, buf, sizeof buf);
    }
    cedar_entities *es;
    cedar_diagnostic diag;
    if (cedar_entities_parse_json(entities, sizeof entities - 1, "e", schema, &es, &diag) == 0)
      cedar_entities_free(es);
    cedar_schema_free(schema);
  }
  return 0;
}
