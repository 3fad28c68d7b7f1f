/* The shipped Dome schema (policy/schema/dome.cedarschema), embedded at build time. */
#include "policy/schema/schema.h"

#include <string.h>

#include "policy/schema/dome_schema_text.h"

int cedar_schema_load_dome(cedar_schema **out, cedar_schema_error *err) {
  return cedar_schema_parse(dome_schema_bytes, sizeof dome_schema_bytes - 1, CEDAR_SCHEMA_DOME_PATH, out,
                            err);
}

const char *cedar_schema_dome_text(void) {
  return dome_schema_bytes;
}
