/* Segment files: names, the header skippable frame, the seek table (zstd seekable format), and the
 * fast scan of an event line's top-level members. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "supervisor/audit/journal_internal.h"
#include "supervisor/common/cleanup.h"

void journal_segment_name(uint64_t first_seq, char *buffer, size_t size) {
  snprintf(buffer, size, JOURNAL_SEGMENT_PREFIX "%020" PRIu64 JOURNAL_SEGMENT_SUFFIX, first_seq);
}

static int parse_segment_name(const char *name, uint64_t *first_seq) {
  size_t prefix = strlen(JOURNAL_SEGMENT_PREFIX), suffix = strlen(JOURNAL_SEGMENT_SUFFIX);
  if (strlen(name) != prefix + 20 + suffix || strncmp(name, JOURNAL_SEGMENT_PREFIX, prefix) != 0 ||
      strcmp(name + prefix + 20, JOURNAL_SEGMENT_SUFFIX) != 0)
    return -1;
  uint64_t value = 0;
  for (size_t i = prefix; i < prefix + 20; i++) {
    if (name[i] < '0' || name[i] > '9') return -1;
    uint64_t digit = (uint64_t)(name[i] - '0');
    if (value > (UINT64_MAX - digit) / 10) return -1;
    value = value * 10 + digit;
  }
  *first_seq = value;
  return 0;
}

static int compare_segments(const void *a, const void *b) {
  uint64_t x = ((const journal_segment *)a)->first_seq, y = ((const journal_segment *)b)->first_seq;
  return x < y ? -1 : x > y;
}

int journal_segments_list(const char *directory, journal_segment **out, dome_error *err) {
  DIR *dir = opendir(directory);
  if (!dir) return dome_error_set_errno(err, errno, "open journal directory `%s`", directory);
  journal_segment *list = NULL;
  size_t count = 0, capacity = 0;
  struct dirent *entry;
  while ((entry = readdir(dir))) {
    uint64_t first_seq;
    if (parse_segment_name(entry->d_name, &first_seq) < 0) continue;
    if (count == capacity) {
      capacity = capacity ? capacity * 2 : 16;
      journal_segment *grown = realloc(list, capacity * sizeof *list);
      if (!grown) {
        free(list);
        closedir(dir);
        return dome_error_set(err, ENOMEM, "list journal segments: out of memory");
      }
      list = grown;
    }
    list[count].first_seq = first_seq;
    journal_segment_name(first_seq, list[count].name, sizeof list[count].name); /* same spelling, checked */
    count++;
  }
  closedir(dir);
  if (count) qsort(list, count, sizeof *list, compare_segments);
  *out = list;
  return (int)count;
}

uint8_t *journal_header_encode(uint64_t first_seq, const merkle_frontier *f, size_t *length) {
  json_t *header =
      json_pack("{s:I, s:s, s:o, s:I}", "first_seq", (json_int_t)first_seq, "format", JOURNAL_FORMAT,
                "frontier", journal_merkle_frontier_to_json(f), "tree_size", (json_int_t)f->size);
  if (!header) return NULL;
  char *text = json_dumps(header, JSON_SORT_KEYS | JSON_COMPACT);
  json_decref(header);
  if (!text) return NULL;
  size_t n = strlen(text);
  uint8_t *frame = malloc(8 + n);
  if (frame) {
    journal_write_le32(frame, JOURNAL_HEADER_MAGIC);
    journal_write_le32(frame + 4, (uint32_t)n);
    memcpy(frame + 8, text, n);
    *length = 8 + n;
  }
  free(text);
  return frame;
}

int journal_header_decode(const uint8_t *content, size_t length, uint64_t *first_seq, merkle_frontier *f,
                          dome_error *err) {
  json_error_t jerr;
  json_t *header = json_loadb((const char *)content, length, 0, &jerr);
  if (!header) return dome_error_set(err, 0, "segment header: invalid JSON: %s", jerr.text);
  const char *format = json_string_value(json_object_get(header, "format"));
  json_t *seq = json_object_get(header, "first_seq"), *size = json_object_get(header, "tree_size");
  int r = 0;
  if (!format || strcmp(format, JOURNAL_FORMAT) != 0)
    r = dome_error_set(err, 0, "segment header: format is not `%s`", JOURNAL_FORMAT);
  else if (!json_is_integer(seq) || !json_is_integer(size) || json_integer_value(seq) < 1 ||
           json_integer_value(size) != json_integer_value(seq) - 1)
    r = dome_error_set(err, 0, "segment header: first_seq/tree_size missing or inconsistent");
  else
    r = journal_merkle_frontier_from_json(f, (uint64_t)json_integer_value(size),
                                          json_object_get(header, "frontier"), err);
  if (r == 0) *first_seq = (uint64_t)json_integer_value(seq);
  json_decref(header);
  return r;
}

uint8_t *journal_seek_table_encode(const seek_entry *entries, size_t count, size_t *length) {
  size_t content = 12 * count + 9;
  uint8_t *frame = malloc(8 + content);
  if (!frame) return NULL;
  journal_write_le32(frame, JOURNAL_SEEK_TABLE_MAGIC);
  journal_write_le32(frame + 4, (uint32_t)content);
  uint8_t *p = frame + 8;
  for (size_t i = 0; i < count; i++, p += 12) {
    journal_write_le32(p, entries[i].compressed_size);
    journal_write_le32(p + 4, entries[i].decompressed_size);
    journal_write_le32(p + 8, entries[i].checksum);
  }
  journal_write_le32(p, (uint32_t)count);
  p[4] = 0x80;
  journal_write_le32(p + 5, JOURNAL_SEEKABLE_FOOTER_MAGIC);
  *length = 8 + content;
  return frame;
}

int journal_seek_table_decode(const uint8_t *content, size_t length, seek_entry **entries) {
  if (length < 9) return -1;
  const uint8_t *footer = content + length - 9;
  uint32_t count = journal_read_le32(footer);
  if (footer[4] != 0x80 || journal_read_le32(footer + 5) != JOURNAL_SEEKABLE_FOOTER_MAGIC ||
      (size_t)count * 12 + 9 != length)
    return -1;
  seek_entry *list = calloc(count ? count : 1, sizeof *list);
  if (!list) return -1;
  for (uint32_t i = 0; i < count; i++) {
    list[i].compressed_size = journal_read_le32(content + 12 * i);
    list[i].decompressed_size = journal_read_le32(content + 12 * i + 4);
    list[i].checksum = journal_read_le32(content + 12 * i + 8);
  }
  *entries = list;
  return (int)count;
}

/* The closing quote of the string whose contents start at `start` (searching from p), or NULL: memchr
 * for the quote, then an even run of backslashes before it means it is not escaped. */
static const char *string_end(const char *start, const char *p, const char *end) {
  for (;;) {
    const char *quote = memchr(p, '"', (size_t)(end - p));
    if (!quote) return NULL;
    const char *b = quote;
    while (b > start && b[-1] == '\\') b--;
    if (((quote - b) & 1) == 0) return quote;
    p = quote + 1;
  }
}

/* Where the top-level value starting at p ends: the first ',' or '}' outside strings and nesting (or
 * NULL when the line ends first). Nesting is counted, not matched. */
static const char *value_end(const char *p, const char *end) {
  int depth = 0;
  while (p < end) {
    char c = *p;
    if (c == '"') {
      p = string_end(p + 1, p + 1, end);
      if (!p) return NULL;
    } else if (c == '{' || c == '[') {
      depth++;
    } else if (c == '}' || c == ']') {
      if (depth == 0) return p;
      depth--;
    } else if (c == ',' && depth == 0) {
      return p;
    }
    p++;
  }
  return NULL;
}

/* A structural scan, not a validation: walks the top level of a compact object, skipping strings with
 * memchr and tracking nesting, and picks up `seq`, `time` and `type`. Enough for verification's
 * seq/time checks at memory speed; the Merkle hash covers every byte anyway. */
int journal_scan_line(const char *line, size_t length, line_fields *out) {
  memset(out, 0, sizeof *out);
  if (length < 2 || line[0] != '{' || line[length - 1] != '}') return -1;
  const char *end = line + length, *p = line + 1;
  while (p < end - 1) {
    if (*p != '"') return -1;
    const char *key = p + 1, *key_end = string_end(key, key, end);
    if (!key_end || key_end + 1 >= end || key_end[1] != ':') return -1;
    size_t key_length = (size_t)(key_end - key);
    const char *value = key_end + 2, *stop = value_end(value, end);
    if (!stop) return -1;
    size_t value_length = (size_t)(stop - value);
    if (key_length == 3 && memcmp(key, "seq", 3) == 0) {
      if (value_length == 0 || value_length > 20) return -1;
      uint64_t seq = 0;
      for (const char *d = value; d < stop; d++) {
        if (*d < '0' || *d > '9') return -1;
        seq = seq * 10 + (uint64_t)(*d - '0');
      }
      out->seq = seq;
      out->has_seq = true;
    } else if (key_length == 4 && value_length >= 2 && *value == '"' && memcmp(key, "time", 4) == 0) {
      out->time = value + 1;
      out->time_length = value_length - 2;
    } else if (key_length == 4 && value_length >= 2 && *value == '"' && memcmp(key, "type", 4) == 0) {
      out->type = value + 1;
      out->type_length = value_length - 2;
    }
    p = *stop == ',' ? stop + 1 : stop;
  }
  return out->has_seq ? 0 : -1;
}

int journal_fsync_directory(const char *directory, dome_error *err) {
  _cleanup_close_ int fd = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return dome_error_set_errno(err, errno, "open `%s`", directory);
  if (fsync(fd) < 0) return dome_error_set_errno(err, errno, "fsync `%s`", directory);
  return 0;
}
