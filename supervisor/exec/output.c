/* The program's output as exec.output records: each stream redacted as it streams (guard_stream), the
 * redacted bytes gathered per stream into records of up to event_bytes, valid UTF-8 whatever the jail's
 * reads cut, and the digest and size of each whole redacted stream for exec.end. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "supervisor/common/utf8.h"
#include "supervisor/exec/exec_internal.h"

/* Valid UTF-8 of carry + data[0..length) as a new JSON string; invalid bytes become U+FFFD, and an
 * incomplete sequence at the very end is kept in the carry for the next chunk. */
static json_t *utf8_chunk(char carry[4], size_t *carry_length, const char *data, size_t length) {
  size_t out_length = 0;
  char *clean = dome_utf8_sanitize_chunk(carry, carry_length, data, length, true, &out_length);
  if (clean == NULL) return NULL;
  json_t *text = json_stringn(clean, out_length);
  free(clean);
  return text;
}

static void append(struct exec_output *o, json_t *record) {
  dome_error err = {0};
  int rc = o->sink->append(o->sink->context, record, NULL, &err);
  if (rc < 0 && o->refused) o->refused(o->refused_context, rc, &err);
}

/* One redacted chunk: recorded as exec.output, handed to the sink's output (progress). */
static void record_output(struct exec_output *o, int stream, json_t *text, uint64_t offset_ms) {
  size_t length = json_string_length(text);
  if (length == 0) return;
  crypto_hash_sha256_update(&o->digest[stream], (const unsigned char *)json_string_value(text), length);
  o->bytes[stream] += length;
  json_t *record = exec_record(&o->request->identity, "exec.output");
  json_object_set_new(record, "stream", json_string(stream == 1 ? "stdout" : "stderr"));
  json_object_set_new(record, "offset_ms", json_integer((json_int_t)offset_ms));
  json_object_set_new(record, "bytes", json_integer((json_int_t)length));
  json_object_set(record, "data", text);
  append(o, record);
  json_decref(record);
  if (o->sink->output) o->sink->output(o->sink->context, stream, json_string_value(text), length);
}

static int flush_event(struct exec_output *o) {
  if (o->event_length == 0) return 0;
  int s = o->event_stream;
  json_t *text = utf8_chunk(o->carry[s], &o->carry_length[s], o->event, o->event_length);
  o->event_length = 0;
  if (text == NULL) return -ENOMEM;
  record_output(o, s, text, o->event_offset_ms);
  json_decref(text);
  return 0;
}

/* Redacted bytes of stream o->stream, gathered into records (see struct exec_output). */
static int emit_output(const char *data, size_t length, void *context) {
  struct exec_output *o = context;
  size_t most = o->event_bytes;
  if (o->event == NULL && (o->event = malloc(most)) == NULL) return -ENOMEM;
  while (length > 0) {
    if (o->event_length > 0 && o->event_stream != o->stream && flush_event(o) < 0) return -ENOMEM;
    if (o->event_length == 0) {
      o->event_stream = o->stream;
      o->event_offset_ms = o->offset_ms;
    }
    size_t n = most - o->event_length < length ? most - o->event_length : length;
    memcpy(o->event + o->event_length, data, n);
    o->event_length += n;
    data += n;
    length -= n;
    if (o->event_length == most && flush_event(o) < 0) return -ENOMEM;
  }
  return 0;
}

static void flush_event_if_old(struct exec_output *o, uint64_t offset_ms) {
  if (o->event_length && offset_ms >= o->event_offset_ms + o->event_ms) flush_event(o);
}

int exec_output_open(struct exec_output *o, struct guard *guard, dome_error *err) {
  if (o->event_bytes == 0) o->event_bytes = 64u << 10;
  if (o->event_ms == 0) o->event_ms = 20;
  if (o->quiet_ms == 0) o->quiet_ms = 50;
  for (int s = 1; s <= 2; s++) crypto_hash_sha256_init(&o->digest[s]);
  if (guard == NULL) { /* unredacted: the bytes as written */
    o->unredacted = true;
    return 0;
  }
  int rc;
  if ((rc = guard_stream_open(guard, "stdout", &o->streams[1], err)) < 0 ||
      (rc = guard_stream_open(guard, "stderr", &o->streams[2], err)) < 0)
    return dome_error_wrap(err, "guard");
  return 0;
}

void exec_output_feed(struct exec_output *o, int stream, const char *data, size_t length,
                      uint64_t offset_ms) {
  if (stream < 1 || stream > 2 || o->streams[stream] == NULL) return;
  struct guard_sink sink = {.emit = emit_output, .context = o};
  o->stream = stream;
  o->offset_ms = offset_ms;
  o->last_output_ms[stream] = offset_ms;
  o->quiet_flushed[stream] = false;
  dome_error err;
  if (guard_stream_feed(o->streams[stream], data, length, &sink, &err) < 0) {
    guard_stream_close(o->streams[stream]);
    o->streams[stream] = NULL;
  }
  flush_event_if_old(o, offset_ms);
}

/* A stream the program has not written to for quiet_ms releases its held-back bytes that no detector can
 * still match (guard_stream_flush keeps the redaction exact), and the gathered record goes out at once,
 * so a short line reaches the reader as it is written. */
void exec_output_tick(struct exec_output *o, uint64_t offset_ms) {
  o->offset_ms = offset_ms;
  bool released = false;
  for (int s = 1; s <= 2; s++) {
    if (o->streams[s] == NULL || o->quiet_flushed[s] || offset_ms < o->last_output_ms[s] + o->quiet_ms)
      continue;
    o->quiet_flushed[s] = true;
    if (guard_stream_held_bytes(o->streams[s]) == 0) continue;
    struct guard_sink sink = {.emit = emit_output, .context = o};
    o->stream = s;
    dome_error err;
    if (guard_stream_flush(o->streams[s], &sink, &err) < 0) {
      guard_stream_close(o->streams[s]);
      o->streams[s] = NULL;
    }
    released = true;
  }
  if (released)
    flush_event(o);
  else
    flush_event_if_old(o, offset_ms);
}

/* End of the program: the held-back bytes of each stream, then a lone incomplete sequence as U+FFFD. */
void exec_output_finish(struct exec_output *o, uint64_t offset_ms) {
  o->offset_ms = offset_ms;
  for (int s = 1; s <= 2; s++) {
    if (o->streams[s] == NULL) continue;
    struct guard_sink sink = {.emit = emit_output, .context = o};
    o->stream = s;
    dome_error ignored;
    guard_stream_finish(o->streams[s], &sink, &ignored);
  }
  flush_event(o);
  for (int s = 1; s <= 2; s++) {
    if ((o->streams[s] == NULL && !o->unredacted) || o->carry_length[s] == 0) continue;
    o->carry_length[s] = 0;
    json_t *replacement = json_string("\xEF\xBF\xBD");
    record_output(o, s, replacement, offset_ms);
    json_decref(replacement);
  }
}

void exec_output_digests(struct exec_output *o, json_t *end) {
  for (int s = 1; s <= 2; s++) {
    unsigned char digest[crypto_hash_sha256_BYTES];
    char hex[crypto_hash_sha256_BYTES * 2 + 1];
    crypto_hash_sha256_final(&o->digest[s], digest);
    sodium_bin2hex(hex, sizeof hex, digest, sizeof digest);
    json_object_set_new(end, s == 1 ? "stdout_sha256" : "stderr_sha256", json_string(hex));
    json_object_set_new(end, s == 1 ? "stdout_bytes" : "stderr_bytes", json_integer((json_int_t)o->bytes[s]));
  }
}

void exec_output_close(struct exec_output *o) {
  for (int s = 1; s <= 2; s++) {
    guard_stream_close(o->streams[s]);
    o->streams[s] = NULL;
  }
  free(o->event);
  o->event = NULL;
}
