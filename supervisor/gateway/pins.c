/* Pinned tool definitions (rug-pull defence): the digest of a backend tool's definition, the fields in
 * which two definitions differ, and the hidden-text findings of a definition's descriptions. */
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "supervisor/gateway/gateway.h"

static const char *const pinned_fields[] = {"name", "description", "inputSchema", "outputSchema",
                                            "annotations"};
#define PINNED_FIELDS (sizeof pinned_fields / sizeof pinned_fields[0])

json_t *gateway_tool_definition(json_t *tool) {
  json_t *definition = json_object();
  const char *original = json_string_value(json_object_get(tool, "x-dome-tool"));
  for (size_t i = 0; i < PINNED_FIELDS; i++) {
    json_t *value = json_object_get(tool, pinned_fields[i]);
    if (i == 0 && original)
      value = json_string(original);
    else if (value)
      json_incref(value);
    else
      value = json_null();
    json_object_set_new(definition, pinned_fields[i], value);
  }
  return definition;
}

int gateway_tool_digest(json_t *definition, char digest[GATEWAY_DIGEST_HEX + 1]) {
  char *text = json_dumps(definition, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
  if (text == NULL) return -1;
  unsigned char hash[crypto_hash_sha256_BYTES];
  crypto_hash_sha256(hash, (const unsigned char *)text, strlen(text));
  free(text);
  sodium_bin2hex(digest, GATEWAY_DIGEST_HEX + 1, hash, sizeof hash);
  return 0;
}

json_t *gateway_tool_diff(json_t *old, json_t *new) {
  json_t *fields = json_array();
  for (size_t i = 0; i < PINNED_FIELDS; i++) {
    json_t *a = json_object_get(old, pinned_fields[i]), *b = json_object_get(new, pinned_fields[i]);
    if (!json_equal(a ? a : json_null(), b ? b : json_null()))
      json_array_append_new(fields, json_string(pinned_fields[i]));
  }
  return fields;
}

/* The next code point of UTF-8 text at *p (advancing it); invalid bytes read as themselves. */
static unsigned next_code_point(const unsigned char **p) {
  const unsigned char *s = *p;
  unsigned c = s[0];
  size_t length = 1;
  if (c >= 0xF0 && (s[1] & 0xC0) == 0x80 && (s[2] & 0xC0) == 0x80 && (s[3] & 0xC0) == 0x80) {
    c = (c & 0x07) << 18 | (s[1] & 0x3Fu) << 12 | (s[2] & 0x3Fu) << 6 | (s[3] & 0x3Fu);
    length = 4;
  } else if (c >= 0xE0 && (s[1] & 0xC0) == 0x80 && (s[2] & 0xC0) == 0x80) {
    c = (c & 0x0F) << 12 | (s[1] & 0x3Fu) << 6 | (s[2] & 0x3Fu);
    length = 3;
  } else if (c >= 0xC0 && (s[1] & 0xC0) == 0x80) {
    c = (c & 0x1F) << 6 | (s[1] & 0x3Fu);
    length = 2;
  }
  *p = s + length;
  return c;
}

static bool zero_width(unsigned c) {
  return c == 0x200B || c == 0x200C || c == 0x200D || c == 0x2060 || c == 0xFEFF;
}

static void add_finding(json_t *findings, const char *field, const char *kind, size_t offset,
                        const char *detail) {
  json_array_append_new(findings, json_pack("{s:s,s:s,s:I,s:s}", "field", field, "kind", kind, "offset",
                                            (json_int_t)offset, "detail", detail));
}

/* Phrases addressed to the model rather than describing the tool (case-insensitive). */
static const char *const model_instructions[] = {"ignore previous instructions",
                                                 "ignore all previous",
                                                 "ignore the above",
                                                 "disregard previous",
                                                 "disregard all",
                                                 "do not tell the user",
                                                 "don't tell the user",
                                                 "without telling the user",
                                                 "do not mention",
                                                 "you must always",
                                                 "before using this tool",
                                                 "<important>",
                                                 "system prompt",
                                                 "you are now",
                                                 "secretly",
                                                 "override your instructions"};

static void scan_text(const char *field, const char *text, json_t *findings) {
  const unsigned char *p = (const unsigned char *)text;
  size_t run = 0, run_start = 0;
  bool tag_reported = false, bidi_reported = false;
  while (*p) {
    size_t offset = (size_t)(p - (const unsigned char *)text);
    unsigned c = next_code_point(&p);
    if (c >= 0xE0000 && c <= 0xE007F && !tag_reported) {
      add_finding(findings, field, "unicode-tag", offset, "Unicode tag characters (invisible text)");
      tag_reported = true;
    }
    if (((c >= 0x202A && c <= 0x202E) || (c >= 0x2066 && c <= 0x2069)) && !bidi_reported) {
      add_finding(findings, field, "bidi-override", offset, "a bidirectional override or isolate");
      bidi_reported = true;
    }
    if (zero_width(c)) {
      if (run++ == 0) run_start = offset;
      if (run == 2) add_finding(findings, field, "zero-width", run_start, "a run of zero-width characters");
    } else {
      run = 0;
    }
  }
  if (strstr(text, "<!--")) {
    add_finding(findings, field, "html-comment", (size_t)(strstr(text, "<!--") - text),
                "an HTML comment (hidden when rendered)");
  }
  for (size_t i = 0; i < sizeof model_instructions / sizeof model_instructions[0]; i++) {
    const char *hit = strcasestr(text, model_instructions[i]);
    if (hit) {
      char detail[128];
      snprintf(detail, sizeof detail, "an instruction addressed to the model: \"%s\"", model_instructions[i]);
      add_finding(findings, field, "model-instruction", (size_t)(hit - text), detail);
    }
  }
}

static void scan_schema(const char *path, json_t *schema, unsigned depth, json_t *findings) {
  if (!json_is_object(schema) || depth > 16) return;
  const char *description = json_string_value(json_object_get(schema, "description"));
  char field[512];
  if (description) {
    snprintf(field, sizeof field, "%s/description", path);
    scan_text(field, description, findings);
  }
  const char *key;
  json_t *property;
  json_object_foreach(json_object_get(schema, "properties"), key, property) {
    snprintf(field, sizeof field, "%s/properties/%s", path, key);
    scan_schema(field, property, depth + 1, findings);
  }
  json_t *items = json_object_get(schema, "items");
  if (items) {
    snprintf(field, sizeof field, "%s/items", path);
    scan_schema(field, items, depth + 1, findings);
  }
}

json_t *gateway_tool_findings(json_t *definition) {
  json_t *findings = json_array();
  const char *description = json_string_value(json_object_get(definition, "description"));
  if (description) scan_text("description", description, findings);
  const char *title = json_string_value(json_object_get(definition, "title"));
  if (title) scan_text("title", title, findings);
  scan_schema("inputSchema", json_object_get(definition, "inputSchema"), 0, findings);
  return findings;
}
