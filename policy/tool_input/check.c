/* Checking a call's arguments against the tool's inputSchema (JSON Schema 2020-12, the keywords listed
 * in tool_input.h; JSON Schema Validation sections 6.1-6.5 and 7.3). */
#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "policy/tool_input/tool_input.h"

#define CHECK_MAX_DEPTH 64

struct checker {
  char *error;
  size_t size;
  char path[1024];
};

static int fail(struct checker *c, const char *format, ...) __attribute__((format(printf, 2, 3)));
static int fail(struct checker *c, const char *format, ...) {
  if (c->size == 0) return -EINVAL;
  int n = snprintf(c->error, c->size, "`%s`: ", c->path[0] ? c->path : "/");
  if (n > 0 && (size_t)n < c->size) {
    va_list args;
    va_start(args, format);
    vsnprintf(c->error + n, c->size - (size_t)n, format, args);
    va_end(args);
  }
  return -EINVAL;
}

static bool has_type(const json_t *value, const char *type) {
  if (strcmp(type, "string") == 0) return json_is_string(value);
  if (strcmp(type, "boolean") == 0) return json_is_boolean(value);
  if (strcmp(type, "null") == 0) return json_is_null(value);
  if (strcmp(type, "object") == 0) return json_is_object(value);
  if (strcmp(type, "array") == 0) return json_is_array(value);
  if (strcmp(type, "number") == 0) return json_is_number(value);
  if (strcmp(type, "integer") == 0)
    return json_is_integer(value) ||
           (json_is_real(value) && json_real_value(value) == floor(json_real_value(value)));
  return false;
}

/* JSON Schema equality: numbers by value (1 == 1.0). */
static bool equal(const json_t *a, const json_t *b) {
  if (json_is_number(a) && json_is_number(b)) return json_number_value(a) == json_number_value(b);
  return json_equal((json_t *)a, (json_t *)b);
}

static size_t code_points(const char *text, size_t length) {
  size_t count = 0;
  for (size_t i = 0; i < length; i++) count += ((unsigned char)text[i] & 0xC0) != 0x80;
  return count;
}

static bool rfc3339_date_time(const char *t) {
  /* full-date "T" full-time (RFC 3339 5.6) */
  size_t n = strlen(t);
  if (n < 20) return false;
  for (size_t i = 0; i < 19; i++) {
    bool digit = t[i] >= '0' && t[i] <= '9';
    if (i == 4 || i == 7) {
      if (t[i] != '-') return false;
    } else if (i == 10) {
      if (t[i] != 'T' && t[i] != 't') return false;
    } else if (i == 13 || i == 16) {
      if (t[i] != ':') return false;
    } else if (!digit) {
      return false;
    }
  }
  int month = (t[5] - '0') * 10 + (t[6] - '0'), day = (t[8] - '0') * 10 + (t[9] - '0');
  int hour = (t[11] - '0') * 10 + (t[12] - '0'), minute = (t[14] - '0') * 10 + (t[15] - '0');
  int second = (t[17] - '0') * 10 + (t[18] - '0');
  if (month < 1 || month > 12 || day < 1 || day > 31 || hour > 23 || minute > 59 || second > 60) return false;
  size_t i = 19;
  if (t[i] == '.') {
    i++;
    size_t start = i;
    while (t[i] >= '0' && t[i] <= '9') i++;
    if (i == start) return false;
  }
  if ((t[i] == 'Z' || t[i] == 'z') && t[i + 1] == '\0') return true;
  if ((t[i] == '+' || t[i] == '-') && strlen(t + i) == 6 && t[i + 3] == ':') {
    const char *o = t + i + 1;
    return o[0] >= '0' && o[0] <= '2' && o[1] >= '0' && o[1] <= '9' && o[3] >= '0' && o[3] <= '5' &&
           o[4] >= '0' && o[4] <= '9';
  }
  return false;
}

static int check(struct checker *c, const json_t *schema, const json_t *value, unsigned depth);

static int check_children(struct checker *c, const json_t *schema, const json_t *value, unsigned depth) {
  size_t path_length = strlen(c->path);
  if (json_is_object(value)) {
    const json_t *required = json_object_get(schema, "required");
    size_t i;
    const json_t *name;
    json_array_foreach(required, i, name) {
      if (json_is_string(name) && json_object_get(value, json_string_value(name)) == NULL)
        return fail(c, "required property `%s` missing", json_string_value(name));
    }
    const json_t *properties = json_object_get(schema, "properties");
    const json_t *additional = json_object_get(schema, "additionalProperties");
    const char *key;
    json_t *member;
    json_object_foreach((json_t *)value, key, member) {
      const json_t *property = json_object_get(properties, key);
      if (property == NULL && json_is_false(additional)) return fail(c, "unknown property `%s`", key);
      const json_t *rule = property ? property : json_is_object(additional) ? additional : NULL;
      if (rule == NULL) continue;
      snprintf(c->path + path_length, sizeof c->path - path_length, "/%s", key);
      int rc = check(c, rule, member, depth + 1);
      c->path[path_length] = '\0';
      if (rc < 0) return rc;
    }
  }
  if (json_is_array(value)) {
    const json_t *min = json_object_get(schema, "minItems"), *max = json_object_get(schema, "maxItems");
    if (json_is_integer(min) && json_array_size(value) < (size_t)json_integer_value(min))
      return fail(c, "fewer than %lld items (minItems)", (long long)json_integer_value(min));
    if (json_is_integer(max) && json_array_size(value) > (size_t)json_integer_value(max))
      return fail(c, "more than %lld items (maxItems)", (long long)json_integer_value(max));
    if (json_is_true(json_object_get(schema, "uniqueItems")))
      for (size_t i = 0; i < json_array_size(value); i++)
        for (size_t j = i + 1; j < json_array_size(value); j++)
          if (equal(json_array_get(value, i), json_array_get(value, j)))
            return fail(c, "items %zu and %zu are equal (uniqueItems)", i, j);
    const json_t *items = json_object_get(schema, "items");
    if (json_is_object(items) || json_is_boolean(items)) {
      size_t i;
      json_t *member;
      json_array_foreach(value, i, member) {
        snprintf(c->path + path_length, sizeof c->path - path_length, "/%zu", i);
        int rc = check(c, items, member, depth + 1);
        c->path[path_length] = '\0';
        if (rc < 0) return rc;
      }
    }
  }
  return 0;
}

static int check(struct checker *c, const json_t *schema, const json_t *value, unsigned depth) {
  if (depth > CHECK_MAX_DEPTH) {
    fail(c, "nested deeper than %d", CHECK_MAX_DEPTH);
    return -E2BIG;
  }
  if (json_is_true(schema) || !json_is_object(schema)) return 0;
  if (json_is_false(schema)) return fail(c, "no value is allowed here");
  const json_t *type = json_object_get(schema, "type");
  if (json_is_string(type) && !has_type(value, json_string_value(type)))
    return fail(c, "expected %s %s",
                strcmp(json_string_value(type), "integer") == 0 ||
                        strcmp(json_string_value(type), "array") == 0 ||
                        strcmp(json_string_value(type), "object") == 0
                    ? "an"
                    : "a",
                json_string_value(type));
  if (json_is_array(type)) {
    bool any = false;
    size_t i;
    const json_t *name;
    json_array_foreach(type, i, name) any |= json_is_string(name) && has_type(value, json_string_value(name));
    if (!any) return fail(c, "not of any type the schema lists");
  }
  const json_t *enumeration = json_object_get(schema, "enum");
  if (json_is_array(enumeration)) {
    bool found = false;
    size_t i;
    const json_t *option;
    json_array_foreach(enumeration, i, option) found |= equal(option, value);
    if (!found) {
      char options[256] = "";
      json_array_foreach(enumeration, i, option) {
        if (!json_is_string(option) || strlen(options) > 200) continue;
        snprintf(options + strlen(options), sizeof options - strlen(options), "%s%s", options[0] ? ", " : "",
                 json_string_value(option));
      }
      return fail(c, "must be one of %s (enum)", options[0] ? options : "the enum's values");
    }
  }
  const json_t *constant = json_object_get(schema, "const");
  if (constant && !equal(constant, value)) return fail(c, "must equal the schema's const");
  if (json_is_string(value)) {
    size_t length = code_points(json_string_value(value), json_string_length(value));
    const json_t *min = json_object_get(schema, "minLength"), *max = json_object_get(schema, "maxLength");
    if (json_is_integer(min) && length < (size_t)json_integer_value(min))
      return fail(c, "shorter than %lld characters (minLength)", (long long)json_integer_value(min));
    if (json_is_integer(max) && length > (size_t)json_integer_value(max))
      return fail(c, "longer than %lld characters (maxLength)", (long long)json_integer_value(max));
    const char *format = json_string_value(json_object_get(schema, "format"));
    unsigned char address[16];
    const char *text = json_string_value(value);
    if (format && strcmp(format, "ipv4") == 0 && inet_pton(AF_INET, text, address) != 1)
      return fail(c, "not an IPv4 address (format ipv4)");
    if (format && strcmp(format, "ipv6") == 0 &&
        (strchr(text, '%') || inet_pton(AF_INET6, text, address) != 1))
      return fail(c, "not an IPv6 address (format ipv6)");
    if (format && strcmp(format, "date-time") == 0 && !rfc3339_date_time(text))
      return fail(c, "not an RFC 3339 date-time (format date-time)");
  }
  if (json_is_number(value)) {
    double number = json_number_value(value);
    const json_t *bound;
    if (json_is_number(bound = json_object_get(schema, "minimum")) && number < json_number_value(bound))
      return fail(c, "must be >= %g (minimum)", json_number_value(bound));
    if (json_is_number(bound = json_object_get(schema, "maximum")) && number > json_number_value(bound))
      return fail(c, "must be <= %g (maximum)", json_number_value(bound));
    if (json_is_number(bound = json_object_get(schema, "exclusiveMinimum")) &&
        number <= json_number_value(bound))
      return fail(c, "must be > %g (exclusiveMinimum)", json_number_value(bound));
    if (json_is_number(bound = json_object_get(schema, "exclusiveMaximum")) &&
        number >= json_number_value(bound))
      return fail(c, "must be < %g (exclusiveMaximum)", json_number_value(bound));
  }
  int rc = check_children(c, schema, value, depth);
  if (rc < 0) return rc;
  const json_t *all = json_object_get(schema, "allOf");
  size_t i;
  const json_t *part;
  json_array_foreach(all, i, part) if ((rc = check(c, part, value, depth + 1)) < 0) return rc;
  const char *which[2] = {"anyOf", "oneOf"};
  for (int w = 0; w < 2; w++) {
    const json_t *options = json_object_get(schema, which[w]);
    if (!json_is_array(options)) continue;
    size_t matched = 0;
    char saved[sizeof c->path];
    memcpy(saved, c->path, sizeof saved);
    json_array_foreach(options, i, part) {
      char ignored[8];
      struct checker inner = {ignored, sizeof ignored, ""};
      memcpy(inner.path, c->path, sizeof inner.path);
      if (check(&inner, part, value, depth + 1) == 0) matched++;
    }
    if (matched == 0) return fail(c, "matches none of the %s schemas", which[w]);
    if (w == 1 && matched > 1)
      return fail(c, "matches %zu of the oneOf schemas (exactly one expected)", matched);
  }
  const json_t *not = json_object_get(schema, "not");
  if (not ) {
    char ignored[8];
    struct checker inner = {ignored, sizeof ignored, ""};
    if (check(&inner, not, value, depth + 1) == 0) return fail(c, "matches the schema of `not`");
  }
  return 0;
}

int cedar_tool_input_check(const json_t *input_schema, const json_t *arguments, char *error, size_t size) {
  struct checker c = {error, size, ""};
  if (size) error[0] = '\0';
  json_t *empty = NULL;
  if (arguments == NULL) arguments = empty = json_object();
  int rc = check(&c, input_schema, arguments, 0);
  json_decref(empty);
  return rc;
}
