/* Unit tests for the guards' bit-parallel prefilter (supervisor/guards/prefilter.c) and the vectorscan
 * triggers that replaced character-class patterns: every shape found at every offset of a 64-byte block,
 * both byte classifiers (AVX-512BW and the table) reporting the same candidates, and redaction of the forms
 * the shapes must not lose (long NAME= lines, expanded IPv6, grouped cards, E.164 with parentheses, ...). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "supervisor/guards/internal.h"

struct buffer {
  char *data;
  size_t length;
  size_t capacity;
};

static int buffer_emit(const char *data, size_t length, void *context) {
  struct buffer *b = context;
  if (b->length + length + 1 > b->capacity) {
    size_t capacity = b->capacity ? b->capacity * 2 : 256;
    while (capacity < b->length + length + 1) capacity *= 2;
    char *grown = realloc(b->data, capacity);
    if (grown == NULL) return -ENOMEM;
    b->data = grown;
    b->capacity = capacity;
  }
  memcpy(b->data + b->length, data, length);
  b->length += length;
  b->data[b->length] = '\0';
  return 0;
}

static struct guard *make_guard(void) {
  struct guard *guard = NULL;
  dome_error err = {0};
  assert_int_equal(guard_create(NULL, &guard, &err), 0);
  return guard;
}

/* Redact `text` as one field of `class_`, fed in chunks of `chunk` bytes (0 = one feed). */
static char *redact(const struct guard *guard, enum guard_class class_, const char *text, size_t chunk) {
  struct buffer out = {0};
  struct guard_stream *stream = NULL;
  dome_error err = {0};
  assert_int_equal(guard_stream_open_class(guard, "stdout", class_, &stream, &err), 0);
  struct guard_sink sink = {buffer_emit, NULL, &out};
  size_t length = strlen(text);
  for (size_t at = 0; at < length;) {
    size_t n = chunk && chunk < length - at ? chunk : length - at;
    assert_int_equal(guard_stream_feed(stream, text + at, n, &sink, &err), 0);
    at += n;
  }
  assert_int_equal(guard_stream_finish(stream, &sink, &err), 0);
  guard_stream_close(stream);
  buffer_emit("", 0, &out);
  return out.data;
}

struct sample {
  enum guard_class class_;
  const char *text;
  const char *expected; /* NULL = unchanged */
};

static const struct sample samples[] = {
    {GUARD_CLASS_SENSITIVE, "lo ::1 and 0:0:0:0:0:0:0:1.",
     "lo [REDACTED:internal-ip] and [REDACTED:internal-ip]."},
    {GUARD_CLASS_SENSITIVE, "mapped ::ffff:10.0.0.1 link fe80::1%eth0",
     "mapped [REDACTED:internal-ip] link [REDACTED:internal-ip]%eth0"},
    {GUARD_CLASS_SENSITIVE, "imds [fd00:ec2::254] ok", "imds [[REDACTED:cloud-metadata-address]] ok"},
    {GUARD_CLASS_SENSITIVE, "ecs 169.254.170.2 nat 100.127.255.1 priv 172.31.0.9",
     "ecs [REDACTED:cloud-metadata-address] nat [REDACTED:internal-ip] priv [REDACTED:internal-ip]"},
    {GUARD_CLASS_SENSITIVE, "public 172.32.0.9 and 100.128.0.1 and 2001:db8::1", NULL},
    {GUARD_CLASS_SENSITIVE, "A_VERY_LONG_ENVIRONMENT_VARIABLE_NAME_THAT_RUNS_PAST_THIRTY_TWO=on\n",
     "A_VERY_LONG_ENVIRONMENT_VARIABLE_NAME_THAT_RUNS_PAST_THIRTY_TWO=[REDACTED:env-assignment]\n"},
    /* the longest name the pattern takes (64 characters), and one longer */
    {GUARD_CLASS_SENSITIVE, "x\n_A12345678901234567890123456789012345678901234567890123456789012=v\n",
     "x\n_A12345678901234567890123456789012345678901234567890123456789012=[REDACTED:env-assignment]\n"},
    {GUARD_CLASS_SENSITIVE, "x\n_A123456789012345678901234567890123456789012345678901234567890123=v\n", NULL},
    {GUARD_CLASS_SENSITIVE, "export DB_HOST=db1\nexport\tTOKEN_X=abc",
     "export DB_HOST=[REDACTED:env-assignment]\nexport\tTOKEN_X=[REDACTED:env-assignment]"},
    {GUARD_CLASS_SENSITIVE, "Result: a=b\nlower=x\n A=B\nA==B\n", NULL},
    {GUARD_CLASS_SENSITIVE, "see ~alice/notes.txt and ~/x",
     "see [REDACTED:home-directory] and [REDACTED:home-directory]"},
    {GUARD_CLASS_SENSITIVE, "approx ~5 and ~ /x", NULL},
    {GUARD_CLASS_SENSITIVE, "a /var/lib/dome/state and /srv/data and /usr/lib/x",
     "a [REDACTED:supervisor-path] and [REDACTED:host-path] and /usr/lib/x"},
    {GUARD_CLASS_SENSITIVE, "url /api/etc/x and /etcetera", NULL},
    {GUARD_CLASS_SENSITIVE, "cd /home/alice/x; ls /root",
     "cd [REDACTED:home-directory]; ls [REDACTED:home-directory]"},
    {GUARD_CLASS_SENSITIVE, "x=/etc/passwd:/proc/1/environ", "x=[REDACTED:host-path]:[REDACTED:host-path]"},
    {GUARD_CLASS_SENSITIVE, "http://host/etc/x and //etc/y and a/etc /e /", NULL},
    /* a match inside a rejected one (mixed-case top-level domain; /sbin is in the jail's view) is still found
     */
    {GUARD_CLASS_PII, "e@x.Coma.b+c@mail.co.uk", "e@[REDACTED:email-address]"},
    {GUARD_CLASS_SENSITIVE, "see /sbin/x@/etc:", "see /sbin/x@[REDACTED:host-path]:"},
    {GUARD_CLASS_PII, "bob@example.com and a.b+c@mail.co.uk x@@y.com @z.org",
     "[REDACTED:email-address] and [REDACTED:email-address] x@@y.com @z.org"},
    {GUARD_CLASS_PII, "amex 3782 822463 10005 visa 4111111111111111 mc 5555-5555-5555-4444",
     "amex [REDACTED:payment-card] visa [REDACTED:payment-card] mc [REDACTED:payment-card]"},
    {GUARD_CLASS_PII, "ids 4111111111111112 41111111111111110000 5555 5555 5555 44449", NULL},
    {GUARD_CLASS_PII, "uuid 2084-0182-1546-ed4f1459ea6e 3687 1593 2254 855903", NULL},
    {GUARD_CLASS_PII, "call +1 (415) 555-0132, +4915112345678 or 415.555.0132",
     "call [REDACTED:phone-number], [REDACTED:phone-number] or [REDACTED:phone-number]"},
    {GUARD_CLASS_PII, "diff +121,8 @@ and x+12345678901", NULL},
    {GUARD_CLASS_PII, "ssn 078-05-1120;iban DE89370400440532013000",
     "ssn [REDACTED:us-ssn];iban [REDACTED:iban]"},
    {GUARD_CLASS_PII, "full 2001:0db8:85a3:0000:0000:8a2e:0370:7334 v4 1.2.3.4",
     "full [REDACTED:ip-address] v4 [REDACTED:ip-address]"},
    {GUARD_CLASS_PII, "mac 00:1a:2b:3c:4d:5e ver 1.2.3 t 12:30:45", NULL},
    /* anchors whose lookbehind or closing ')' the prefilter tests byte by byte, also at the data's start */
    {GUARD_CLASS_PII, "+4915112345678;(415) 555-0132|DE89370400440532013000",
     "[REDACTED:phone-number];[REDACTED:phone-number]|[REDACTED:iban]"},
    {GUARD_CLASS_PII, "xDE89370400440532013000 9+12025550123 (415 555-0132", NULL},
    {GUARD_CLASS_SENSITIVE, "/etc/passwd;/proc/1/environ", "[REDACTED:host-path];[REDACTED:host-path]"},
};

static void samples_redact_at_every_offset(void **state) {
  (void)state;
  struct guard *guard = make_guard();
  for (size_t i = 0; i < sizeof samples / sizeof samples[0]; i++) {
    const char *expected = samples[i].expected ? samples[i].expected : samples[i].text;
    /* Shift the sample across two 64-byte blocks so every shape straddles every block boundary. */
    for (size_t pad = 0; pad < 130; pad += 1) {
      size_t n = strlen(samples[i].text);
      char *text = malloc(pad + n + 1), *want = malloc(pad + strlen(expected) + 1);
      assert_non_null(text);
      assert_non_null(want);
      memset(text, ';', pad);
      memcpy(text + pad, samples[i].text, n + 1);
      memset(want, ';', pad);
      memcpy(want + pad, expected, strlen(expected) + 1);
      if (pad > 0 && samples[i].text[0] != '\n') text[pad - 1] = want[pad - 1] = '\n';
      for (size_t chunk = 0; chunk < 3; chunk++) {
        char *out = redact(guard, samples[i].class_, text, chunk == 0 ? 0 : chunk == 1 ? 7 : 61);
        if (strcmp(out, want) != 0)
          fail_msg("sample %zu pad %zu chunk %zu: got `%s`, expected `%s`", i, pad, chunk, out, want);
        free(out);
      }
      free(text);
      free(want);
    }
  }
  guard_free(guard);
}

struct hits {
  size_t count;
  uint64_t hash;
};

static void count_hit(void *context, enum guard_trigger kind, size_t start, size_t end) {
  struct hits *h = context;
  h->count++;
  uint64_t x = ((uint64_t)kind << 56 ^ (uint64_t)start << 20 ^ end) * 0x9e3779b97f4a7c15ull;
  h->hash += x ^ x >> 29; /* order-independent: a split scan reports kinds in another order */
}

/* host-path's literals come from the guard's options: a supervisor path longer than the 64 bytes the
 * prefilter sees past a position, with every host directory inside the jail's view ("/"), redacted at every
 * offset and chunking; the host directories are then no trigger. */
static void path_literals_from_options(void **state) {
  (void)state;
  static const char long_path[] =
      "/srv/a-supervisor-state-directory-whose-name-runs-well-past-sixty-four-bytes/state";
  const char *supervisor[] = {long_path};
  const char *jail[] = {"/"};
  struct guard_options options = {
      .supervisor_paths = supervisor, .supervisor_path_count = 1, .jail_paths = jail, .jail_path_count = 1};
  struct guard *guard = NULL;
  dome_error err = {0};
  assert_int_equal(guard_create(&options, &guard, &err), 0);
  char text[512], want[512];
  for (size_t pad = 0; pad < 130; pad++) {
    snprintf(text, sizeof text, "%*s%s/db and /etc/passwd and %s", (int)pad, "", long_path, long_path);
    snprintf(want, sizeof want,
             "%*s[REDACTED:supervisor-path] and /etc/passwd and [REDACTED:supervisor-path]", (int)pad, "");
    for (size_t chunk = 0; chunk < 3; chunk++) {
      char *out = redact(guard, GUARD_CLASS_SENSITIVE, text, chunk == 0 ? 0 : chunk == 1 ? 5 : 63);
      if (strcmp(out, want) != 0) fail_msg("pad %zu chunk %zu: got `%s`", pad, chunk, out);
      free(out);
    }
  }
  guard_free(guard);
}

/* Redact `text` fed in pseudo-random chunks of 1..`most` bytes. */
static char *redact_random_chunks(const struct guard *guard, enum guard_class class_, const char *text,
                                  size_t most, uint64_t seed) {
  struct buffer out = {0};
  struct guard_stream *stream = NULL;
  dome_error err = {0};
  assert_int_equal(guard_stream_open_class(guard, "stdout", class_, &stream, &err), 0);
  struct guard_sink sink = {buffer_emit, NULL, &out};
  size_t length = strlen(text);
  for (size_t at = 0; at < length;) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    size_t n = 1 + (size_t)(seed >> 33) % most;
    if (n > length - at) n = length - at;
    assert_int_equal(guard_stream_feed(stream, text + at, n, &sink, &err), 0);
    at += n;
  }
  assert_int_equal(guard_stream_finish(stream, &sink, &err), 0);
  guard_stream_close(stream);
  buffer_emit("", 0, &out);
  return out.data;
}

/* Address and path soup, where candidates overlap and validators reject some (mixed-case top-level domains,
 * paths in the jail's view, addresses glued together): the output is the same for any chunking. */
static void overlapping_candidates_chunking_invariant(void **state) {
  (void)state;
  static const char *const tokens[] = {"bob@example.com",
                                       "a.b+c@mail.co.uk",
                                       "@x.com",
                                       "x@",
                                       "x@@y.com",
                                       "e@x.Com",
                                       "q@z.museum",
                                       "me@10.0.0.1",
                                       "first.last@sub.domain.example",
                                       "u@host.internal",
                                       "/etc/passwd",
                                       "/sbin/x",
                                       "/usr/lib",
                                       "/run/dome/x",
                                       "/home/bob",
                                       "~/x",
                                       "http://h/etc/x",
                                       "/proc/1/x",
                                       "a/b/c",
                                       "/etcetera",
                                       "1.2.3.4",
                                       "A=1"};
  static const char seps[] = " \n:='\"(,\t<>/@.+";
  struct guard *guard = make_guard();
  size_t capacity = 48 * 1024;
  char *text = malloc(capacity + 64);
  assert_non_null(text);
  uint64_t seed = 99;
  size_t n = 0;
  while (n < capacity) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    const char *token = tokens[(seed >> 33) % (sizeof tokens / sizeof tokens[0])];
    size_t length = strlen(token);
    memcpy(text + n, token, length);
    n += length;
    text[n++] = seps[(seed >> 20) % (sizeof seps - 1)];
  }
  text[n] = '\0';
  for (enum guard_class class_ = GUARD_CLASS_SENSITIVE; class_ <= GUARD_CLASS_PII; class_++) {
    char *whole = redact(guard, class_, text, 0);
    assert_non_null(strstr(whole, "[REDACTED:"));
    for (uint64_t run = 1; run <= 4; run++) {
      char *chunked = redact_random_chunks(guard, class_, text, run == 1 ? 9 : 5000, run);
      if (strcmp(whole, chunked) != 0)
        fail_msg("class %d run %u: output depends on the chunking", class_, (unsigned)run);
      free(chunked);
    }
    free(whole);
  }
  free(text);
  guard_free(guard);
}

/* The AVX-512BW and AVX2 classifiers (when the CPU has them) and the portable table give the same candidates,
 * on random text rich in the characters the shapes look for, for every kind and any scan window. */
static void classifiers_agree(void **state) {
  (void)state;
  guard_prefilter_init();
  static const char alphabet[] = "0123456789012345678901234567890123456789 .-:+()~/_\n=ABCDEFZaf@";
  size_t length = 1 << 16;
  char *text = malloc(length);
  assert_non_null(text);
  uint64_t seed = 42;
  for (size_t i = 0; i < length; i++) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    text[i] = alphabet[(seed >> 33) % (sizeof alphabet - 1)];
  }
  size_t total = 0;
  for (unsigned kind = GUARD_TRIGGER_CARD; kind < GUARD_TRIGGER_COUNT; kind++) {
    for (size_t from = 0; from < 3; from++) {
      struct hits fast = {0}, avx2 = {0}, portable = {0};
      guard_prefilter_force = 0;
      guard_prefilter_scan(text, length, from, length - from * 17, 1u << kind, NULL, true, count_hit, &fast);
      guard_prefilter_force = 1;
      guard_prefilter_scan(text, length, from, length - from * 17, 1u << kind, NULL, true, count_hit, &avx2);
      guard_prefilter_force = 2;
      guard_prefilter_scan(text, length, from, length - from * 17, 1u << kind, NULL, true, count_hit,
                           &portable);
      guard_prefilter_force = 0;
      assert_int_equal(fast.count, portable.count);
      assert_true(fast.hash == portable.hash);
      assert_int_equal(avx2.count, portable.count);
      assert_true(avx2.hash == portable.hash);
      total += fast.count;
    }
  }
  assert_true(total > 100); /* the text does wake the shapes */
  free(text);
}

/* The shapes of each class of a default guard, scanned together in the loop specialised for that set (the
 * default), in the generic loop (force 3) and by the portable classifier, report exactly the union of the
 * shapes scanned one by one. */
static void class_sets_agree(void **state) {
  (void)state;
  struct guard *guard = NULL;
  dome_error err = {0};
  assert_int_equal(guard_create(NULL, &guard, &err), 0);
  static const char alphabet[] = "0123456789012345678901234567890123456789 .-:+()~/_\n=ABCDEFZaf@";
  size_t length = 1 << 16;
  char *text = malloc(length);
  assert_non_null(text);
  uint64_t seed = 7;
  for (size_t i = 0; i < length; i++) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    text[i] = alphabet[(seed >> 33) % (sizeof alphabet - 1)];
  }
  size_t sets = 0;
  for (int c = 0; c < GUARD_CLASS_COUNT; c++) {
    unsigned kinds = guard->prefilter_kinds[c];
    if (kinds == 0) continue;
    sets++;
    for (size_t from = 0; from < 3; from++) {
      size_t limit = length - from * 17;
      struct hits singles = {0};
      for (unsigned kind = 0; kind < GUARD_TRIGGER_COUNT; kind++)
        if (kinds >> kind & 1)
          guard_prefilter_scan(text, length, from, limit, 1u << kind, &guard->paths, from == 0, count_hit,
                               &singles);
      for (int force = 0; force <= 3; force++) {
        struct hits together = {0};
        guard_prefilter_force = force;
        guard_prefilter_scan(text, length, from, limit, kinds, &guard->paths, from == 0, count_hit,
                             &together);
        guard_prefilter_force = 0;
        assert_int_equal(together.count, singles.count);
        assert_true(together.hash == singles.hash);
      }
      assert_true(singles.count > 10);
    }
  }
  assert_int_equal(sets, 2); /* SENSITIVE and PII */
  free(text);
  guard_free(guard);
}

/* A scan split anywhere reports what one scan reports, as the stream splits it (positions decided once
 * GUARD_PREFILTER_LOOKAHEAD bytes follow). */
static void split_scans_agree(void **state) {
  (void)state;
  guard_prefilter_init();
  const char *text =
      "x\nNAME_A=1 call +44 20 7946 0958 card 4111 1111 1111 1111 ssn 078-05-1120 at 10.2.3.4 and "
      "fe80::1 iban GB82 WEST 1234 5698 7654 32 see ~/x\nB=2\n(415) 555-0132 4111111111111111 end";
  size_t length = strlen(text);
  unsigned all = 0;
  for (unsigned kind = GUARD_TRIGGER_CARD; kind < GUARD_TRIGGER_COUNT; kind++) all |= 1u << kind;
  struct hits whole = {0};
  guard_prefilter_scan(text, length, 0, length, all, NULL, true, count_hit, &whole);
  assert_true(whole.count >= 12);
  for (size_t split = 1; split < length; split++) {
    struct hits parts = {0};
    size_t limit = split > GUARD_PREFILTER_LOOKAHEAD ? split - GUARD_PREFILTER_LOOKAHEAD : 0;
    guard_prefilter_scan(text, split, 0, limit, all, NULL, true, count_hit, &parts);
    guard_prefilter_scan(text, length, limit, length, all, NULL, true, count_hit, &parts);
    assert_int_equal(parts.count, whole.count);
    assert_true(parts.hash == whole.hash);
  }
}

/* The eight-block loop (the default on CPUs with AVX-512 VBMI2; elsewhere the block loop again) reports
 * exactly the block loop's candidates (force 3) and the portable table's (force 2), for each class's set and
 * every shape at once: each sample at every offset of a 512-byte superblock and across the boundary to the
 * next, with the default path literals and with a supervisor path "/" (every byte may follow a '/'). */
static void superblock_lanes_agree(void **state) {
  (void)state;
  static const char *const samples[] = {"4111111111111111",
                                        "4111 1111 1111 1111",
                                        "3714 496353 98431",
                                        "1700000000000",
                                        "41111111111111111111",
                                        "078-05-1120",
                                        "+44 20 7946 0958",
                                        "(415) 555-0132",
                                        "415.555.0132",
                                        "GB82WEST12345698765432",
                                        "x GB82 WEST",
                                        "10.2.3.4",
                                        "fe80::1:2:3:4",
                                        "a:b:c:d:e",
                                        "/etc/passwd",
                                        "x/etc/passwd",
                                        "/run/dome/x",
                                        "~/x",
                                        "~root",
                                        "jane@example.com",
                                        "@4x",
                                        "\nNAME_A=1",
                                        "\nA_VERY_LONG_NAME_OF_AN_ENVIRONMENT_VARIABLE_THAT_RUNS_PAST=1"};
  static const char filler[] = "x = 12.5 / 3; t=12:30:45 (ok) v1.2 + 7 -- \n";
  const char *supervisor[] = {"/"};
  struct guard_options slash = {.supervisor_paths = supervisor, .supervisor_path_count = 1};
  struct guard *guards[2] = {make_guard(), NULL};
  dome_error err = {0};
  assert_int_equal(guard_create(&slash, &guards[1], &err), 0);
  assert_true(guards[1]->paths.any_first && !guards[0]->paths.any_first);
  enum { LENGTH = 2048 };
  char *text = malloc(LENGTH);
  assert_non_null(text);
  size_t total = 0;
  for (size_t g = 0; g < 2; g++) {
    const struct guard *guard = guards[g];
    unsigned sets[3] = {guard->prefilter_kinds[GUARD_CLASS_SENSITIVE],
                        guard->prefilter_kinds[GUARD_CLASS_PII], 0};
    for (unsigned kind = 0; kind < GUARD_TRIGGER_COUNT; kind++) sets[2] |= 1u << kind;
    for (size_t k = 0; k < sizeof samples / sizeof samples[0]; k++) {
      size_t sample = strlen(samples[k]);
      for (size_t at = 0; at + sample < 1100; at += 3) {
        for (size_t i = 0; i < LENGTH; i++) text[i] = filler[i % (sizeof filler - 1)];
        memcpy(text + at, samples[k], sample);
        for (size_t set = 0; set < 3; set++) {
          struct hits hits[3] = {{0}};
          const int forces[3] = {0, 3, 2};
          for (int f = 0; f < 3; f++) {
            guard_prefilter_force = forces[f];
            guard_prefilter_scan(text, LENGTH, at % 2, LENGTH - 70, sets[set], &guard->paths, at % 2 == 0,
                                 count_hit, &hits[f]);
          }
          guard_prefilter_force = 0;
          if (hits[0].count != hits[1].count || hits[0].hash != hits[1].hash || hits[2].hash != hits[1].hash)
            fail_msg("guard %zu sample `%s` at %zu, set %zu: %zu candidates, block loop %zu", g, samples[k],
                     at, set, hits[0].count, hits[1].count);
          total += hits[0].count;
        }
      }
    }
  }
  assert_true(total > 10000);
  free(text);
  guard_free(guards[0]);
  guard_free(guards[1]);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(samples_redact_at_every_offset),
      cmocka_unit_test(path_literals_from_options),
      cmocka_unit_test(overlapping_candidates_chunking_invariant),
      cmocka_unit_test(classifiers_agree),
      cmocka_unit_test(class_sets_agree),
      cmocka_unit_test(split_scans_agree),
      cmocka_unit_test(superblock_lanes_agree),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
