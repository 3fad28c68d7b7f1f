/* What an agent reads of an execution's output in the MCP result: each stream within the MCP output
 * limit (a model's context is small; the journal keeps the output as the jail kept it), with a marker
 * saying how much was left out, and the lines naming a limit that ended the program. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "supervisor/domed/domed.h"

/* "5,242,880" */
static void with_separators(uint64_t value, char *buffer, size_t size) {
  char digits[32];
  int n = snprintf(digits, sizeof digits, "%" PRIu64, value);
  size_t out = 0;
  for (int i = 0; i < n && out + 2 < size; i++) {
    if (i > 0 && (n - i) % 3 == 0) buffer[out++] = ',';
    buffer[out++] = digits[i];
  }
  buffer[out] = '\0';
}

/* "812 bytes", "63.5 KiB", "4.9 MiB", "1.2 GiB" */
static void human_size(uint64_t bytes, char *buffer, size_t size) {
  if (bytes < 1024)
    snprintf(buffer, size, "%" PRIu64 " bytes", bytes);
  else if (bytes < (1u << 20))
    snprintf(buffer, size, "%.1f KiB", (double)bytes / 1024.0);
  else if (bytes < (1ull << 30))
    snprintf(buffer, size, "%.1f MiB", (double)bytes / (1024.0 * 1024.0));
  else
    snprintf(buffer, size, "%.1f GiB", (double)bytes / (1024.0 * 1024.0 * 1024.0));
}

/* Where to cut `text` to keep at most `limit` bytes: not inside a UTF-8 sequence, not inside a
 * `[REDACTED:...]` marker (a cut one would look like text the program printed). */
static size_t cut_point(const char *text, size_t length, size_t limit) {
  if (length <= limit) return length;
  size_t cut = limit;
  while (cut > 0 && ((unsigned char)text[cut] & 0xC0) == 0x80) cut--;
  static const char marker[] = "[REDACTED:";
  size_t from = cut > 96 ? cut - 96 : 0; /* a marker is at most 96 bytes (guards/stream.c) */
  for (size_t p = from; p < cut; p++)
    if (strncmp(text + p, marker, sizeof marker - 1) == 0) {
      const char *close = memchr(text + p, ']', length - p);
      if (close == NULL || (size_t)(close - text) >= cut) return p;
    }
  return cut;
}

void domed_output_limit(json_t *result, const char *field, uint64_t limit, uint64_t written_bytes,
                        uint64_t kept_bytes) {
  json_t *value = json_object_get(result, field);
  if (!json_is_string(value)) return;
  const char *text = json_string_value(value);
  size_t length = json_string_length(value);
  if (length <= limit && written_bytes <= kept_bytes) return;
  size_t shown = cut_point(text, length, limit);
  uint64_t left_out = (length - shown) + (written_bytes > kept_bytes ? written_bytes - kept_bytes : 0);
  char amount[48], total[48];
  human_size(left_out, amount, sizeof amount);
  with_separators(written_bytes, total, sizeof total);
  char *limited = NULL;
  if (asprintf(&limited, "%.*s%s[... %s truncated: %s was %s bytes]\n", (int)shown, text,
               shown > 0 && text[shown - 1] != '\n' ? "\n" : "", amount, field, total) < 0)
    return;
  json_object_set_new(result, field, json_string(limited));
  json_object_set_new(result, "truncated", json_true());
  free(limited);
}

void domed_output_append_line(json_t *result, const char *field, const char *lines) {
  json_t *value = json_object_get(result, field);
  const char *text = json_is_string(value) ? json_string_value(value) : "";
  size_t length = strlen(text);
  char *joined = NULL;
  if (asprintf(&joined, "%s%s%s", text, length > 0 && text[length - 1] != '\n' ? "\n" : "", lines) < 0)
    return;
  json_object_set_new(result, field, json_string(joined));
  free(joined);
}
