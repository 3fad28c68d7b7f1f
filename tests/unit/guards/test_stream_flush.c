/* guard_stream_flush: a pause in the output releases the held-back bytes no detector can still match, and
 * the redaction stays exactly that of one buffer. Every labelled positive (tests/guards/positives.jsonl)
 * is split at every byte with a flush (the pause) between the parts, and fed byte by byte with a flush
 * after each byte: the concatenated output and the findings equal the one-shot redaction, and no byte
 * of the secret is ever emitted. Short lines are released whole by one flush. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "supervisor/guards/guard.h"
#include "tests/unit/guards/capture.h"

struct positives {
  json_t *entries;
  struct guard_secret *secrets;
  size_t secret_count;
};

static const char *positives_path(char *buffer, size_t size) {
  const char *root = getenv("DOME_ROOT");
  snprintf(buffer, size, "%s/tests/guards/positives.jsonl", root ? root : ".");
  return buffer;
}

/* The positives and the exact values (their `env`) the env-value detectors redact. */
static void load_positives(struct positives *p) {
  char path[4096];
  FILE *file = fopen(positives_path(path, sizeof path), "r");
  if (file == NULL) fail_msg("%s: %s (set DOME_ROOT)", path, strerror(errno));
  p->entries = json_array();
  char line[65536];
  while (fgets(line, sizeof line, file)) {
    json_error_t error;
    json_t *entry = json_loads(line, 0, &error);
    if (entry == NULL) fail_msg("%s: %s", path, error.text);
    json_array_append_new(p->entries, entry);
  }
  fclose(file);
  assert_true(json_array_size(p->entries) >= 300);
  p->secrets = calloc(json_array_size(p->entries) * 4 + 1, sizeof *p->secrets);
  size_t i;
  json_t *entry;
  json_array_foreach(p->entries, i, entry) {
    const char *name;
    json_t *value;
    json_object_foreach(json_object_get(entry, "env"), name, value) p->secrets[p->secret_count++] =
        (struct guard_secret){name, json_string_value(value), json_string_length(value)};
  }
}

static struct guard *make_guard(const struct positives *p) {
  struct guard_options options = {.secrets = p->secrets, .secret_count = p->secret_count};
  struct guard *guard = NULL;
  dome_error err = {0};
  if (guard_create(&options, &guard, &err) < 0) fail_msg("guard_create: %s", err.message);
  return guard;
}

/* Feed text in the parts cut at `cuts` (ascending, 0 < cut < length), a flush after each part;
 * `emitted_before_finish` receives the bytes out before guard_stream_finish. */
static void redact_with_pauses(const struct guard *guard, enum guard_class class_, const char *text,
                               size_t length, const size_t *cuts, size_t cut_count, struct capture *out,
                               size_t *emitted_before_finish) {
  memset(out, 0, sizeof *out);
  struct guard_stream *stream = NULL;
  dome_error err = {0};
  assert_int_equal(guard_stream_open_class(guard, "stdout", class_, &stream, &err), 0);
  struct guard_sink sink = {capture_emit, capture_finding, out};
  size_t at = 0;
  for (size_t k = 0; k <= cut_count; k++) {
    size_t to = k < cut_count ? cuts[k] : length;
    assert_int_equal(guard_stream_feed(stream, text + at, to - at, &sink, &err), 0);
    if (guard_stream_flush(stream, &sink, &err) < 0) fail_msg("flush: %s", err.message);
    at = to;
  }
  if (emitted_before_finish) *emitted_before_finish = out->length;
  assert_int_equal(guard_stream_finish(stream, &sink, &err), 0);
  guard_stream_close(stream);
  if (out->data == NULL) out->data = calloc(1, 1);
}

static void same_redaction(const struct capture *got, const struct capture *want, const char *id,
                           const char *how) {
  if (strcmp(got->data, want->data) != 0)
    fail_msg("%s (%s): `%s`, one buffer gives `%s`", id, how, got->data, want->data);
  assert_int_equal(got->findings.count, want->findings.count);
  for (size_t k = 0; k < want->findings.count; k++) {
    assert_int_equal(got->findings.items[k].offset, want->findings.items[k].offset);
    assert_int_equal(got->findings.items[k].length, want->findings.items[k].length);
    assert_string_equal(got->findings.items[k].detector, want->findings.items[k].detector);
  }
}

static enum guard_class class_of(json_t *entry) {
  enum guard_class class_ = GUARD_CLASS_PUBLIC;
  dome_error err = {0};
  assert_int_equal(guard_class_parse(json_string_value(json_object_get(entry, "class")), &class_, &err), 0);
  return class_;
}

static void positives_split_at_every_byte_with_pauses(void **state) {
  (void)state;
  struct positives p = {0};
  load_positives(&p);
  struct guard *guard = make_guard(&p);
  size_t i, cases = 0, released_early = 0;
  json_t *entry;
  json_array_foreach(p.entries, i, entry) {
    const char *id = json_string_value(json_object_get(entry, "id"));
    const char *text = json_string_value(json_object_get(entry, "text"));
    const char *secret = json_string_value(json_object_get(entry, "secret"));
    size_t length = strlen(text);
    enum guard_class class_ = class_of(entry);
    struct capture whole;
    redact_with_pauses(guard, class_, text, length, NULL, 0, &whole, NULL);
    if (strstr(whole.data, secret)) fail_msg("%s: the one-shot redaction keeps the secret", id);
    /* two parts, a pause between, at every byte */
    for (size_t cut = 1; cut < length; cut++) {
      struct capture parts;
      redact_with_pauses(guard, class_, text, length, &cut, 1, &parts, NULL);
      char how[64];
      snprintf(how, sizeof how, "cut at %zu", cut);
      same_redaction(&parts, &whole, id, how);
      capture_free(&parts);
      cases++;
    }
    /* every byte its own write, a pause after each */
    size_t *cuts = calloc(length + 1, sizeof *cuts);
    for (size_t k = 1; k < length; k++) cuts[k - 1] = k;
    struct capture bytes;
    size_t before_finish = 0;
    redact_with_pauses(guard, class_, text, length, cuts, length ? length - 1 : 0, &bytes, &before_finish);
    same_redaction(&bytes, &whole, id, "byte by byte");
    /* no prefix of the emitted output holds the secret, and what the pauses released is a prefix of
     * the one-shot output (which holds no secret byte where the secret was) */
    assert_true(strncmp(bytes.data, whole.data, before_finish) == 0);
    if (before_finish > 0) released_early++;
    free(cuts);
    capture_free(&bytes);
    capture_free(&whole);
    cases++;
  }
  print_message("%zu feeds with pauses, %zu of %zu positives partly released before their end\n", cases,
                released_early, json_array_size(p.entries));
  /* the pauses release output: most positives have text before their secret */
  assert_true(released_early > json_array_size(p.entries) / 2);
  guard_free(guard);
  free(p.secrets);
  json_decref(p.entries);
}

/* Positives back to back, cut at random places with pauses between, as a program printing a log. */
static void mixtures_with_random_pauses(void **state) {
  (void)state;
  struct positives p = {0};
  load_positives(&p);
  struct guard *guard = make_guard(&p);
  uint64_t seed = 0x5eed;
  for (int round = 0; round < 400; round++) {
    char text[8192];
    size_t length = 0;
    for (int n = 0; n < 6; n++) {
      seed = seed * 6364136223846793005ull + 1442695040888963407ull;
      json_t *entry = json_array_get(p.entries, (size_t)(seed >> 33) % json_array_size(p.entries));
      const char *t = json_string_value(json_object_get(entry, "text"));
      const char *separator = (seed >> 20) % 3 == 0 ? " " : "\n";
      if (length + strlen(t) + 2 >= sizeof text) break;
      length += (size_t)snprintf(text + length, sizeof text - length, "%s%s", t, separator);
    }
    size_t cuts[256], cut_count = 0;
    for (size_t at = 0; cut_count < 256;) {
      seed = seed * 6364136223846793005ull + 1442695040888963407ull;
      at += 1 + (size_t)(seed >> 33) % (round % 2 ? 13 : 97);
      if (at >= length) break;
      cuts[cut_count++] = at;
    }
    for (int c = 0; c < GUARD_CLASS_COUNT; c++) {
      struct capture whole, parts;
      redact_with_pauses(guard, (enum guard_class)c, text, length, NULL, 0, &whole, NULL);
      redact_with_pauses(guard, (enum guard_class)c, text, length, cuts, cut_count, &parts, NULL);
      char id[64];
      snprintf(id, sizeof id, "round %d class %d", round, c);
      same_redaction(&parts, &whole, id, "random pauses");
      capture_free(&parts);
      capture_free(&whole);
    }
  }
  guard_free(guard);
  free(p.secrets);
  json_decref(p.entries);
}

/* Overlapping redactions (an environment assignment whose line runs into a PGP block) are merged into one,
 * whatever the chunking and without pauses: a span crossing the emission limit waits for the matches
 * that may still start inside it. */
static void overlapping_redactions_merge_whatever_the_chunking(void **state) {
  (void)state;
  struct positives p = {0};
  load_positives(&p);
  struct guard *guard = make_guard(&p);
  size_t i;
  json_t *entry;
  const char *block = NULL;
  json_array_foreach(p.entries, i,
                     entry) if (block == NULL && strcmp(json_string_value(json_object_get(entry, "detector")),
                                                        "private-key-pgp") == 0) block =
      json_string_value(json_object_get(entry, "text"));
  assert_non_null(block);
  char text[16384];
  int length = snprintf(text, sizeof text, "x\nexport DATABASE_HOST=db-1 token: '%s' %s\nend\n",
                        "afe38149af792eb33f2fb40241d8f3f5", block);
  assert_true(length > 0 && (size_t)length < sizeof text);
  struct capture whole;
  redact_with_pauses(guard, GUARD_CLASS_SENSITIVE, text, (size_t)length, NULL, 0, &whole, NULL);
  for (size_t chunk = 1; chunk <= 320; chunk++) {
    struct guard_stream *stream = NULL;
    dome_error err = {0};
    struct capture parts = {0};
    assert_int_equal(guard_stream_open_class(guard, "stdout", GUARD_CLASS_SENSITIVE, &stream, &err), 0);
    struct guard_sink sink = {capture_emit, capture_finding, &parts};
    for (size_t at = 0; at < (size_t)length; at += chunk)
      assert_int_equal(
          guard_stream_feed(stream, text + at, (size_t)length - at < chunk ? (size_t)length - at : chunk,
                            &sink, &err),
          0);
    assert_int_equal(guard_stream_finish(stream, &sink, &err), 0);
    guard_stream_close(stream);
    char how[32];
    snprintf(how, sizeof how, "chunks of %zu", chunk);
    same_redaction(&parts, &whole, "assignment into a PGP block", how);
    capture_free(&parts);
  }
  capture_free(&whole);
  guard_free(guard);
  free(p.secrets);
  json_decref(p.entries);
}

/* Lines no detector can continue are released whole by one flush, in every class. */
static void short_lines_released(void **state) {
  (void)state;
  struct guard *guard = NULL;
  dome_error err = {0};
  assert_int_equal(guard_create(NULL, &guard, &err), 0);
  const char *lines[] = {"step 1 done\n", "hello, world\n", "loss=0.25 epoch 3/10\n", "[ok] 12 tests\n"};
  for (int c = 0; c < GUARD_CLASS_COUNT; c++)
    for (size_t l = 0; l < sizeof lines / sizeof lines[0]; l++) {
      struct capture out = {0};
      struct guard_stream *stream = NULL;
      assert_int_equal(guard_stream_open_class(guard, "stdout", (enum guard_class)c, &stream, &err), 0);
      struct guard_sink sink = {capture_emit, capture_finding, &out};
      assert_int_equal(guard_stream_feed(stream, lines[l], strlen(lines[l]), &sink, &err), 0);
      assert_int_equal(out.length, 0); /* held back by the feed alone */
      assert_int_equal(guard_stream_flush(stream, &sink, &err), 0);
      if (out.length != strlen(lines[l]))
        fail_msg("class %d: `%s` released %zu bytes", c, lines[l], out.length);
      assert_int_equal(guard_stream_held_bytes(stream), 0);
      guard_stream_close(stream);
      capture_free(&out);
    }
  guard_free(guard);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(short_lines_released),
      cmocka_unit_test(positives_split_at_every_byte_with_pauses),
      cmocka_unit_test(mixtures_with_random_pauses),
      cmocka_unit_test(overlapping_redactions_merge_whatever_the_chunking),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
