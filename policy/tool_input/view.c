/* The typed view of a call's arguments (what rules read as context.input.<tool>). */
#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "policy/extensions/extensions.h"
#include "policy/tool_input/tool_input.h"

static json_t *fail(char *error, size_t size, const char *path, const char *format, ...)
    __attribute__((format(printf, 4, 5)));
static json_t *fail(char *error, size_t size, const char *path, const char *format, ...) {
  if (size == 0) return NULL;
  int n = snprintf(error, size, "`%s`: ", path[0] ? path : "/");
  if (n > 0 && (size_t)n < size) {
    va_list args;
    va_start(args, format);
    vsnprintf(error + n, size - (size_t)n, format, args);
    va_end(args);
  }
  return NULL;
}

/* RFC 3339 date-time (the JSON Schema format) in the form cedar_datetime_parse takes: `T`/`Z`
 * uppercased, `+hh:mm` written `+hhmm`, a fraction of 1 to 3 digits padded to 3. Returns false when the
 * text is not a form Cedar can represent (more than 3 fraction digits, a leap second, ...). */
static bool cedar_datetime_text(const char *text, char out[40]) {
  size_t length = strlen(text);
  if (length < 20 || length > 35) return false;
  char buffer[40];
  memcpy(buffer, text, length + 1);
  if (buffer[10] == 't') buffer[10] = 'T';
  if (buffer[length - 1] == 'z') buffer[length - 1] = 'Z';
  /* date and time: YYYY-MM-DDThh:mm:ss */
  size_t o = 0;
  memcpy(out, buffer, 19);
  o = 19;
  size_t i = 19;
  if (buffer[i] == '.') {
    size_t digits = 0;
    i++;
    while (isdigit((unsigned char)buffer[i + digits])) digits++;
    if (digits == 0 || digits > 3) return false;
    out[o++] = '.';
    for (size_t d = 0; d < 3; d++) out[o++] = d < digits ? buffer[i + d] : '0';
    i += digits;
  }
  if (buffer[i] == 'Z' && buffer[i + 1] == '\0') {
    out[o++] = 'Z';
  } else if ((buffer[i] == '+' || buffer[i] == '-') && strlen(buffer + i) == 6 && buffer[i + 3] == ':') {
    out[o++] = buffer[i];
    out[o++] = buffer[i + 1];
    out[o++] = buffer[i + 2];
    out[o++] = buffer[i + 4];
    out[o++] = buffer[i + 5];
  } else {
    return false;
  }
  out[o] = '\0';
  int64_t ms;
  return cedar_datetime_parse(out, o, &ms) == 0;
}

static json_t *view(const json_t *type, const json_t *value, char *path, size_t path_length, char *error,
                    size_t size) {
  const char *kind = json_string_value(json_object_get(type, "type"));
  if (strcmp(kind, "String") == 0) {
    if (!json_is_string(value)) return fail(error, size, path, "expected a string");
    return json_incref((json_t *)value);
  }
  if (strcmp(kind, "Long") == 0) {
    if (json_is_integer(value)) return json_integer(json_integer_value(value));
    if (json_is_real(value)) {
      double number = json_real_value(value);
      if (number == floor(number) && number >= -9223372036854775808.0 && number < 9223372036854775808.0)
        return json_integer((json_int_t)number);
      return fail(error, size, path, "expected an integer (a Cedar Long)");
    }
    return fail(error, size, path, "expected an integer");
  }
  if (strcmp(kind, "Boolean") == 0) {
    if (!json_is_boolean(value)) return fail(error, size, path, "expected a boolean");
    return json_boolean(json_is_true(value));
  }
  if (strcmp(kind, "Extension") == 0) {
    const char *name = json_string_value(json_object_get(type, "name"));
    if (!json_is_string(value)) return fail(error, size, path, "expected a string (%s)", name);
    const char *text = json_string_value(value);
    if (strcmp(name, "ipaddr") == 0) {
      cedar_ipaddr ip;
      const char *family = json_string_value(json_object_get(type, "x-dome"));
      if (strchr(text, '/') || cedar_ipaddr_parse(text, strlen(text), &ip) < 0 ||
          (family && strcmp(family, "ipv4") == 0 && !cedar_ipaddr_is_ipv4(&ip)) ||
          (family && strcmp(family, "ipv6") == 0 && !cedar_ipaddr_is_ipv6(&ip)))
        return fail(error, size, path, "`%.64s` is not an %s address Cedar's ip() accepts", text,
                    family ? family : "IP");
      return json_pack("{s:{s:s,s:s}}", "__extn", "fn", "ip", "arg", text);
    }
    char cedar_text[40];
    if (!cedar_datetime_text(text, cedar_text))
      return fail(error, size, path, "`%.64s` is not an RFC 3339 date-time Cedar's datetime() represents",
                  text);
    return json_pack("{s:{s:s,s:s}}", "__extn", "fn", "datetime", "arg", cedar_text);
  }
  if (strcmp(kind, "Set") == 0) {
    if (json_is_string(json_object_get(type, "x-dome"))) { /* a map's keys */
      if (!json_is_object(value)) return fail(error, size, path, "expected an object");
      json_t *keys = json_array();
      const char *key;
      json_t *member;
      json_object_foreach((json_t *)value, key, member) json_array_append_new(keys, json_string(key));
      return keys;
    }
    if (!json_is_array(value)) return fail(error, size, path, "expected an array");
    json_t *set = json_array();
    size_t i;
    json_t *member;
    json_array_foreach(value, i, member) {
      int written = snprintf(path + path_length, 1024 - path_length, "/%zu", i);
      size_t length =
          written > 0 && (size_t)written < 1024 - path_length ? path_length + (size_t)written : 1023;
      json_t *element = view(json_object_get(type, "element"), member, path, length, error, size);
      path[path_length] = '\0';
      if (element == NULL) {
        json_decref(set);
        return NULL;
      }
      json_array_append_new(set, element);
    }
    return set;
  }
  /* Record */
  if (!json_is_object(value)) return fail(error, size, path, "expected an object");
  json_t *record = json_object();
  const char *name;
  json_t *attribute;
  json_object_foreach(json_object_get(type, "attributes"), name, attribute) {
    int written = snprintf(path + path_length, 1024 - path_length, "/%s", name);
    size_t length =
        written > 0 && (size_t)written < 1024 - path_length ? path_length + (size_t)written : 1023;
    json_t *member = json_object_get(value, name);
    json_t *typed = NULL;
    if (member == NULL) {
      if (json_is_true(json_object_get(attribute, "required"))) {
        fail(error, size, path, "required property missing");
        json_decref(record);
        return NULL;
      }
      path[path_length] = '\0';
      continue;
    }
    typed = view(attribute, member, path, length, error, size);
    path[path_length] = '\0';
    if (typed == NULL) {
      json_decref(record);
      return NULL;
    }
    json_object_set_new(record, name, typed);
  }
  return record;
}

json_t *cedar_tool_input_view(const json_t *type, const json_t *arguments, char *error, size_t size) {
  if (size) error[0] = '\0';
  char path[1024] = "";
  json_t *empty = NULL;
  if (arguments == NULL) arguments = empty = json_object();
  json_t *result = view(type, arguments, path, 0, error, size);
  json_decref(empty);
  if (result == NULL && size && error[0] == '\0') snprintf(error, size, "out of memory");
  return result;
}
