/* The table of Cedar extension functions and their signatures (cedar-policy 4.x, Cedar language
 * reference "Extension functions"). Used by the validator for typing and by the evaluator to know
 * names, call styles and arities. */
#include "policy/extensions/extensions.h"

#include <string.h>

#define BOOL CEDAR_EXT_TYPE_BOOL
#define LONG CEDAR_EXT_TYPE_LONG
#define STR CEDAR_EXT_TYPE_STRING
#define IP CEDAR_EXT_TYPE_IPADDR
#define DEC CEDAR_EXT_TYPE_DECIMAL
#define DT CEDAR_EXT_TYPE_DATETIME
#define DUR CEDAR_EXT_TYPE_DURATION

static const cedar_extension_function functions[] = {
    {"ip", false, true, 1, {STR}, IP},
    {"isIpv4", true, false, 1, {IP}, BOOL},
    {"isIpv6", true, false, 1, {IP}, BOOL},
    {"isLoopback", true, false, 1, {IP}, BOOL},
    {"isMulticast", true, false, 1, {IP}, BOOL},
    {"isInRange", true, false, 2, {IP, IP}, BOOL},
    {"decimal", false, true, 1, {STR}, DEC},
    {"lessThan", true, false, 2, {DEC, DEC}, BOOL},
    {"lessThanOrEqual", true, false, 2, {DEC, DEC}, BOOL},
    {"greaterThan", true, false, 2, {DEC, DEC}, BOOL},
    {"greaterThanOrEqual", true, false, 2, {DEC, DEC}, BOOL},
    {"datetime", false, true, 1, {STR}, DT},
    {"duration", false, true, 1, {STR}, DUR},
    {"offset", true, false, 2, {DT, DUR}, DT},
    {"durationSince", true, false, 2, {DT, DT}, DUR},
    {"toDate", true, false, 1, {DT}, DT},
    {"toTime", true, false, 1, {DT}, DUR},
    {"toMilliseconds", true, false, 1, {DUR}, LONG},
    {"toSeconds", true, false, 1, {DUR}, LONG},
    {"toMinutes", true, false, 1, {DUR}, LONG},
    {"toHours", true, false, 1, {DUR}, LONG},
    {"toDays", true, false, 1, {DUR}, LONG},
};

const cedar_extension_function *cedar_extension_function_find(const char *name) {
  if (!name) return NULL;
  for (size_t i = 0; i < sizeof functions / sizeof functions[0]; i++)
    if (strcmp(functions[i].name, name) == 0) return &functions[i];
  return NULL;
}

const cedar_extension_function *cedar_extension_functions(size_t *count) {
  if (count) *count = sizeof functions / sizeof functions[0];
  return functions;
}

const char *cedar_extension_type_name(cedar_extension_type type) {
  switch (type) {
    case CEDAR_EXT_TYPE_BOOL:
      return "Bool";
    case CEDAR_EXT_TYPE_LONG:
      return "Long";
    case CEDAR_EXT_TYPE_STRING:
      return "String";
    case CEDAR_EXT_TYPE_IPADDR:
      return "ipaddr";
    case CEDAR_EXT_TYPE_DECIMAL:
      return "decimal";
    case CEDAR_EXT_TYPE_DATETIME:
      return "datetime";
    case CEDAR_EXT_TYPE_DURATION:
      return "duration";
  }
  return "?";
}
