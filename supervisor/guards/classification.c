/* Classes and the seed's field classification syntax `field=CLASS[,field=CLASS...]`. */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "supervisor/guards/guard.h"

/* The one place that lists the classes; the detector families each class adds are the detectors'
 * `class_` (detectors.c): PUBLIC detectors apply to every class. */
static const char *const class_names[GUARD_CLASS_COUNT] = {
    [GUARD_CLASS_PUBLIC] = "PUBLIC",
    [GUARD_CLASS_SENSITIVE] = "SENSITIVE",
    [GUARD_CLASS_PII] = "PII",
};

enum { FIELD_NAME_MAX = 128 };

const char *guard_class_name(enum guard_class class_) {
  if ((unsigned)class_ >= GUARD_CLASS_COUNT) return "?";
  return class_names[class_];
}

int guard_class_parse(const char *name, enum guard_class *out, dome_error *err) {
  for (unsigned i = 0; i < GUARD_CLASS_COUNT; i++) {
    if (strcasecmp(name, class_names[i]) == 0) {
      *out = (enum guard_class)i;
      return 0;
    }
  }
  return dome_error_set(err, 0, "unknown class `%s` (expected PUBLIC, SENSITIVE or PII)", name);
}

void guard_classification_free(struct guard_classification *classification) {
  if (classification == NULL) return;
  for (size_t i = 0; i < classification->count; i++) free(classification->entries[i].field);
  free(classification->entries);
  classification->entries = NULL;
  classification->count = 0;
}

static bool field_char(char c) {
  return isalnum((unsigned char)c) || c == '_' || c == '.' || c == '-';
}

int guard_classification_parse(const char *text, struct guard_classification *out, dome_error *err) {
  out->entries = NULL;
  out->count = 0;
  struct guard_classification result = {0};
  const char *p = text;
  while (*p) {
    while (*p == ' ' || *p == '\t') p++;
    const char *field = p;
    while (field_char(*p)) p++;
    size_t field_length = (size_t)(p - field);
    size_t column = (size_t)(field - text) + 1;
    if (field_length == 0 || field_length > FIELD_NAME_MAX) {
      guard_classification_free(&result);
      return dome_error_set(
          err, 0, "field classification:%zu: expected a field name of 1 to %d characters [A-Za-z0-9_.-]",
          column, FIELD_NAME_MAX);
    }
    while (*p == ' ' || *p == '\t') p++;
    if (*p != '=') {
      guard_classification_free(&result);
      return dome_error_set(err, 0, "field classification:%zu: expected `=` after field `%.*s`",
                            (size_t)(p - text) + 1, (int)field_length, field);
    }
    p++;
    while (*p == ' ' || *p == '\t') p++;
    const char *class_text = p;
    while (*p && *p != ',' && *p != ' ' && *p != '\t') p++;
    char class_name[32];
    size_t class_length = (size_t)(p - class_text);
    enum guard_class class_ = GUARD_CLASS_PUBLIC;
    if (class_length == 0 || class_length >= sizeof class_name) {
      guard_classification_free(&result);
      return dome_error_set(err, 0, "field classification:%zu: expected a class (PUBLIC, SENSITIVE or PII)",
                            (size_t)(class_text - text) + 1);
    }
    memcpy(class_name, class_text, class_length);
    class_name[class_length] = '\0';
    if (guard_class_parse(class_name, &class_, NULL) < 0) {
      guard_classification_free(&result);
      return dome_error_set(err, 0, "field classification:%zu: unknown class `%s`",
                            (size_t)(class_text - text) + 1, class_name);
    }
    for (size_t i = 0; i < result.count; i++) {
      if (strlen(result.entries[i].field) == field_length &&
          memcmp(result.entries[i].field, field, field_length) == 0) {
        guard_classification_free(&result);
        return dome_error_set(err, 0, "field classification:%zu: field `%.*s` classified twice", column,
                              (int)field_length, field);
      }
    }
    struct guard_field_class *grown = realloc(result.entries, (result.count + 1) * sizeof *grown);
    if (grown == NULL) {
      guard_classification_free(&result);
      return dome_error_set(err, ENOMEM, "field classification: out of memory");
    }
    result.entries = grown;
    char *copy = strndup(field, field_length);
    if (copy == NULL) {
      guard_classification_free(&result);
      return dome_error_set(err, ENOMEM, "field classification: out of memory");
    }
    result.entries[result.count].field = copy;
    result.entries[result.count].class_ = class_;
    result.count++;
    while (*p == ' ' || *p == '\t') p++;
    if (*p == ',') {
      p++;
      const char *rest = p;
      while (*rest == ' ' || *rest == '\t') rest++;
      if (*rest == '\0' || *rest == ',') {
        guard_classification_free(&result);
        return dome_error_set(err, 0, "field classification:%zu: empty item", (size_t)(rest - text) + 1);
      }
    } else if (*p != '\0') {
      guard_classification_free(&result);
      return dome_error_set(err, 0, "field classification:%zu: expected `,` between items",
                            (size_t)(p - text) + 1);
    }
  }
  *out = result;
  return 0;
}

enum guard_class guard_classification_lookup(const struct guard_classification *classification,
                                             const char *field) {
  if (classification == NULL || field == NULL) return GUARD_CLASS_PUBLIC;
  for (size_t i = 0; i < classification->count; i++)
    if (strcmp(classification->entries[i].field, field) == 0) return classification->entries[i].class_;
  return GUARD_CLASS_PUBLIC;
}
