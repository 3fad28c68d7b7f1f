/* Unit tests for supervisor/guards: classification syntax, detectors, streaming across chunk boundaries,
 * exact values and their encodings, findings, JSON redaction, bad input. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <sodium.h>

#include "supervisor/guards/guard.h"
#include "tests/unit/guards/capture.h"

/* ---- helpers ---- */

static struct guard *make_guard(const struct guard_options *options) {
  struct guard *guard = NULL;
  dome_error err = {0};
  int r = guard_create(options, &guard, &err);
  if (r < 0) fail_msg("guard_create: %s", err.message);
  return guard;
}

/* Redact `text` in class `class_` feeding chunks of `chunk` bytes (0 = one feed). */
static void redact_chunked(const struct guard *guard, enum guard_class class_, const char *text,
                           size_t length, size_t chunk, struct capture *out) {
  memset(out, 0, sizeof *out);
  struct guard_stream *stream = NULL;
  dome_error err = {0};
  assert_int_equal(guard_stream_open_class(guard, "stdout", class_, &stream, &err), 0);
  struct guard_sink sink = {capture_emit, capture_finding, out};
  size_t step = chunk ? chunk : (length ? length : 1);
  for (size_t at = 0; at < length; at += step) {
    size_t n = length - at < step ? length - at : step;
    assert_int_equal(guard_stream_feed(stream, text + at, n, &sink, &err), 0);
    size_t pending = (size_t)guard_stream_bytes_in(stream) - (size_t)(out->findings.count ? 0 : out->length);
    if (out->findings.count == 0 && pending > out->max_pending) out->max_pending = pending;
  }
  assert_int_equal(guard_stream_finish(stream, &sink, &err), 0);
  guard_stream_close(stream);
  if (out->data == NULL) {
    out->data = calloc(1, 1);
    assert_non_null(out->data);
  }
}

static char *redact_text(const struct guard *guard, enum guard_class class_, const char *text) {
  struct capture out;
  redact_chunked(guard, class_, text, strlen(text), 0, &out);
  char *result = out.data;
  out.data = NULL;
  capture_free(&out);
  return result;
}

/* ---- classification ---- */

static void classification_seed_syntax(void **state) {
  (void)state;
  struct guard_classification c;
  dome_error err = {0};
  assert_int_equal(
      guard_classification_parse("output_paths=SENSITIVE,env_vars=SENSITIVE,stderr=PII", &c, &err), 0);
  assert_int_equal(c.count, 3);
  assert_int_equal(guard_classification_lookup(&c, "output_paths"), GUARD_CLASS_SENSITIVE);
  assert_int_equal(guard_classification_lookup(&c, "env_vars"), GUARD_CLASS_SENSITIVE);
  assert_int_equal(guard_classification_lookup(&c, "stderr"), GUARD_CLASS_PII);
  assert_int_equal(guard_classification_lookup(&c, "stdout"), GUARD_CLASS_PUBLIC);
  guard_classification_free(&c);
  assert_int_equal(guard_classification_parse(" a = pii , b=public", &c, &err), 0);
  assert_int_equal(guard_classification_lookup(&c, "a"), GUARD_CLASS_PII);
  guard_classification_free(&c);
  assert_int_equal(guard_classification_parse("", &c, &err), 0);
  assert_int_equal(c.count, 0);
}

static void classification_errors_name_column(void **state) {
  (void)state;
  struct guard_classification c;
  dome_error err = {0};
  assert_int_equal(guard_classification_parse("stdout=SECRET", &c, &err), -EINVAL);
  assert_non_null(strstr(err.message, ":8:"));
  assert_non_null(strstr(err.message, "SECRET"));
  assert_int_equal(guard_classification_parse("stdout", &c, &err), -EINVAL);
  assert_int_equal(guard_classification_parse("a=PII,,b=PII", &c, &err), -EINVAL);
  assert_int_equal(guard_classification_parse("a=PII,a=PUBLIC", &c, &err), -EINVAL);
  assert_non_null(strstr(err.message, "twice"));
  assert_int_equal(guard_classification_parse("a=PII,", &c, &err), -EINVAL);
  assert_int_equal(guard_classification_parse("=PII", &c, &err), -EINVAL);
  assert_null(c.entries);
  struct guard *guard = NULL;
  struct guard_options options = {.classification = "stderr=NOPE"};
  assert_int_equal(guard_create(&options, &guard, &err), -EINVAL);
  assert_null(guard);
}

/* ---- detectors: one positive and one negative each ---- */

struct sample {
  enum guard_class class_;
  const char *text;
  const char *expected; /* NULL = unchanged */
};

static const struct sample samples[] = {
    {GUARD_CLASS_PUBLIC, "key AKIAQ3EGRZ7VX2MPL4TN end", "key [REDACTED:aws-access-key-id] end"},
    {GUARD_CLASS_PUBLIC, "xAKIAQ3EGRZ7VX2MPL4TN", NULL},
    {GUARD_CLASS_PUBLIC, "aws_secret_access_key = k9Vd2Lr+7PqWm1sXt8Yb4Nc6Hz0Jf3Ge5Ua1Ro7S\n",
     "aws_secret_access_key = [REDACTED:aws-secret-access-key]\n"},
    {GUARD_CLASS_PUBLIC, "ghp_R4nd0mT0k3nV4lu3F0rT3st1ngPurp0s3sX9", "[REDACTED:github-pat-classic]"},
    {GUARD_CLASS_PUBLIC, "ghp_short", NULL},
    {GUARD_CLASS_PUBLIC,
     "github_pat_11ABCDEFG0abcdefghijkl_mnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789abcdefghijklm",
     "[REDACTED:github-pat-fine-grained]"},
    {GUARD_CLASS_PUBLIC, "gho_16C7e42F292c6912E7710c838347Ae178B4a", "[REDACTED:github-oauth]"},
    {GUARD_CLASS_PUBLIC, "ghs_16C7e42F292c6912E7710c838347Ae178B4a;", "[REDACTED:github-app-token];"},
    {GUARD_CLASS_PUBLIC, "ghr_1B4a2e77838347a7E420ce178F2E7c6912E169246c34E1ccbF66C46812d16D5B1A9Dc86A1498",
     "[REDACTED:github-refresh-token]"},
    {GUARD_CLASS_PUBLIC, "glpat-xK9mP2vQ7rT4wY8zL3nB", "[REDACTED:gitlab-pat]"},
    {GUARD_CLASS_PUBLIC, "glrt-Zx8Wv7Ut6Sr5Qp4On3Ml", "[REDACTED:gitlab-token]"},
    {GUARD_CLASS_PUBLIC, "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
     "[REDACTED:slack-token]"},
    {GUARD_CLASS_PUBLIC, "https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX ok",
     "[REDACTED:slack-webhook] ok"},
    {GUARD_CLASS_PUBLIC, "sk_live_4eC39HqLyjWDarjtT1zdp7dc", "[REDACTED:stripe-secret-key]"},
    {GUARD_CLASS_PUBLIC, "pk_live_4eC39HqLyjWDarjtT1zdp7dc", NULL},
    {GUARD_CLASS_PUBLIC, "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "[REDACTED:stripe-webhook-secret]"},
    {GUARD_CLASS_PUBLIC, "AIzaSyDaGmWKa4JsXZ-HjGw7ISLn_3namBGewQe", "[REDACTED:google-api-key]"},
    {GUARD_CLASS_PUBLIC, "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", "[REDACTED:google-oauth-client-secret]"},
    {GUARD_CLASS_PUBLIC, "sk-proj-Zq8Vn3Wc6Lx1Tb9Rk2Hp5Md7Gf4Js0Ay3Ue8Io1Pw6Qe", "[REDACTED:openai-api-key]"},
    {GUARD_CLASS_PUBLIC,
     "sk-ant-api03-Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0Uv1Wx2Yz3Ab4Cd5Ef6Gh7Ij8Kl9Mn0Op1Qr2St3Uv4-AA",
     "[REDACTED:anthropic-api-key]"},
    {GUARD_CLASS_PUBLIC, "npm_Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0Uv1Wx2", "[REDACTED:npm-token]"},
    {GUARD_CLASS_PUBLIC,
     "pypi-"
     "AgEIcHlwaS5vcmcCJDU1ZjFhNTk2LTk5NjctNDJlYy1iZGUwLWU3NDk1MDdkZjdiYwACKlszLCJlNjU4YTRmZS02MWE2LTQ4MDQtOGY"
     "y",
     "[REDACTED:pypi-token]"},
    {GUARD_CLASS_PUBLIC,
     "AccountName=acct;AccountKey=Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/"
     "KBHBeksoGMGw==;",
     "AccountName=acct;AccountKey=[REDACTED:azure-storage-key];"},
    {GUARD_CLASS_PUBLIC, "SK2a4b6c8d0e2f4a6b8c0d2e4f6a8b0c2d", "[REDACTED:twilio-api-key]"},
    {GUARD_CLASS_PUBLIC, "TWILIO_AUTH_TOKEN=9f8e7d6c5b4a39281706f5e4d3c2b1a0",
     "TWILIO_AUTH_TOKEN=[REDACTED:twilio-auth-token]"},
    {GUARD_CLASS_PUBLIC, "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",
     "[REDACTED:sendgrid-api-key]"},
    {GUARD_CLASS_PUBLIC,
     "Bearer "
     "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_"
     "XgL0n3I9PlFUP0THsR8U",
     "Bearer [REDACTED:jwt]"},
    {GUARD_CLASS_PUBLIC, "-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY-----\nafter",
     "[REDACTED:private-key-pem]\nafter"},
    {GUARD_CLASS_PUBLIC, "-----BEGIN PUBLIC KEY-----\nMIIBIj\n-----END PUBLIC KEY-----", NULL},
    {GUARD_CLASS_PUBLIC, "-----BEGIN OPENSSH PRIVATE KEY-----\nb3Blbn\n-----END OPENSSH PRIVATE KEY-----",
     "[REDACTED:private-key-openssh]"},
    {GUARD_CLASS_PUBLIC,
     "-----BEGIN PGP PRIVATE KEY BLOCK-----\n\nlQOYBF\n-----END PGP PRIVATE KEY BLOCK-----",
     "[REDACTED:private-key-pgp]"},
    {GUARD_CLASS_PUBLIC, "postgres://svc:Tr0ub4dor-x92@db:5432/x",
     "postgres://svc:[REDACTED:url-credentials]@db:5432/x"},
    {GUARD_CLASS_PUBLIC, "postgres://svc:${DB_PASSWORD}@db:5432/x", NULL},
    {GUARD_CLASS_PUBLIC, "https://example.com:8443/path?q=1", NULL},
    {GUARD_CLASS_PUBLIC, "password = \"hX9#kL2$mQ7pR4vZ\"", "password = \"[REDACTED:generic-secret]\""},
    {GUARD_CLASS_PUBLIC, "token = self.next_token_value()", NULL},
    {GUARD_CLASS_PUBLIC, "max_tokens=2048", NULL},
    /* generic-secret's assignment forms after the keyword (the precheck in stream.c and the PCRE2 pattern) */
    {GUARD_CLASS_PUBLIC, "api_key := 'Zx9#Lm2$Qw7!Rt5%'", "api_key := '[REDACTED:generic-secret]'"},
    {GUARD_CLASS_PUBLIC, "secret=>\"hX9#kL2$mQ7pR4vZ\"", "secret=>\"[REDACTED:generic-secret]\""},
    {GUARD_CLASS_PUBLIC, "DB_PASSWORD\t:\t\"hX9#kL2$mQ7pR4vZ\"",
     "DB_PASSWORD\t:\t\"[REDACTED:generic-secret]\""},
    {GUARD_CLASS_PUBLIC, "password_for_the_service_x=hX9#kL2$mQ7pR4vZ",
     "password_for_the_service_x=[REDACTED:generic-secret]"},
    {GUARD_CLASS_PUBLIC, "token_of_the_nightly_build_job=hX9#kL2$mQ7pR4vZ", NULL}, /* 25 name characters */
    {GUARD_CLASS_PUBLIC, "password     = hX9#kL2$mQ7pR4vZ", NULL},                 /* 5 spaces */
    {GUARD_CLASS_PUBLIC, "password =     hX9#kL2$mQ7pR4vZ", NULL},
    {GUARD_CLASS_PUBLIC, "password = hX9#kL2$mQ7", NULL}, /* 11 value characters */
    {GUARD_CLASS_PUBLIC, "password ==hX9#kL2$mQ7pR4vZ",
     "password =[REDACTED:generic-secret]"}, /* value "=hX9..." */
    /* entropy exactly at the 3.5-bit threshold (counts 6,6,6,6 + eight 3s): redacted (red-team finding F1,
     * the build-time log2 table's sum came out 3.4999999999999996) */
    {GUARD_CLASS_PUBLIC, "password = 2dCCB4BCc123bBADDC4aD4b1DAdCcB3abAACc31DBdAA2aBD",
     "password = [REDACTED:generic-secret]"},
    {GUARD_CLASS_SENSITIVE, "open /etc/shadow failed", "open [REDACTED:host-path] failed"},
    {GUARD_CLASS_SENSITIVE, "File \"/usr/lib/python3.11/json/decoder.py\", line 3", NULL},
    {GUARD_CLASS_SENSITIVE, "wrote /workspace/out/report.csv and /tmp/x", NULL},
    {GUARD_CLASS_SENSITIVE, "see /home/alice/.bashrc", "see [REDACTED:home-directory]"},
    {GUARD_CLASS_SENSITIVE, "cat ~/.aws/credentials", "cat [REDACTED:home-directory]"},
    {GUARD_CLASS_SENSITIVE, "socket /run/dome/control.sock", "socket [REDACTED:supervisor-path]"},
    {GUARD_CLASS_SENSITIVE, "3 km/h and 10 req/s and/or", NULL},
    {GUARD_CLASS_SENSITIVE, "connect 192.168.1.20:5432", "connect [REDACTED:internal-ip]:5432"},
    {GUARD_CLASS_SENSITIVE, "connect 8.8.8.8", NULL},
    {GUARD_CLASS_SENSITIVE, "metadata 169.254.169.254", "metadata [REDACTED:cloud-metadata-address]"},
    {GUARD_CLASS_SENSITIVE, "cgnat 100.64.1.1 ula fd12:3456::1",
     "cgnat [REDACTED:internal-ip] ula [REDACTED:internal-ip]"},
    {GUARD_CLASS_SENSITIVE, "std::vector<int> at 12:30:45", NULL},
    {GUARD_CLASS_SENSITIVE, "host db.prod.internal:5432", "host [REDACTED:internal-hostname]:5432"},
    {GUARD_CLASS_SENSITIVE, "java x.internal.Foo", NULL},
    {GUARD_CLASS_SENSITIVE, "PATH=/usr/bin\n", "PATH=[REDACTED:env-assignment]\n"},
    {GUARD_CLASS_PUBLIC, "PATH=/usr/bin\n/etc/shadow 10.0.0.1", NULL},
    {GUARD_CLASS_PII, "mail jane.roe@example.com now", "mail [REDACTED:email-address] now"},
    {GUARD_CLASS_PII, "decorator @property and pkg@1.2.3", NULL},
    {GUARD_CLASS_PII, "call +44 20 7946 0958", "call [REDACTED:phone-number]"},
    {GUARD_CLASS_PII, "call (415) 555-0132", "call [REDACTED:phone-number]"},
    {GUARD_CLASS_PII, "date 2024-11-29 12:00", NULL},
    {GUARD_CLASS_PII, "card 4111 1111 1111 1111.", "card [REDACTED:payment-card]."},
    {GUARD_CLASS_PII, "card 4111 1111 1111 1112", NULL},
    {GUARD_CLASS_PII, "ts 1700000000000", NULL},
    {GUARD_CLASS_PII, "ssn 078-05-1120", "ssn [REDACTED:us-ssn]"},
    {GUARD_CLASS_PII, "ssn 666-05-1120 and 078-00-1120", NULL},
    {GUARD_CLASS_PII, "iban GB82 WEST 1234 5698 7654 32", "iban [REDACTED:iban]"},
    {GUARD_CLASS_PII, "iban GB82 WEST 1234 5698 7654 33", NULL},
    {GUARD_CLASS_PII, "from 203.0.113.9 and 2001:db8::1",
     "from [REDACTED:ip-address] and [REDACTED:ip-address]"},
    {GUARD_CLASS_PII, "/etc/shadow", NULL},
};

static void detectors_positive_and_negative(void **state) {
  (void)state;
  struct guard *guard = make_guard(NULL);
  for (size_t i = 0; i < sizeof samples / sizeof samples[0]; i++) {
    char *out = redact_text(guard, samples[i].class_, samples[i].text);
    const char *expected = samples[i].expected ? samples[i].expected : samples[i].text;
    if (strcmp(out, expected) != 0)
      fail_msg("sample %zu (%s): got `%s`, expected `%s`", i, samples[i].text, out, expected);
    free(out);
  }
  guard_free(guard);
}

static void every_detector_documented(void **state) {
  (void)state;
  assert_true(guard_detector_count() >= 40);
  for (size_t i = 0; i < guard_detector_count(); i++) {
    const struct guard_detector_info *d = guard_detector_at(i);
    assert_non_null(d);
    assert_true(strlen(d->id) > 2);
    assert_true(strlen(d->description) > 10);
    assert_true(strlen(d->source) > 3);
    for (size_t j = 0; j < i; j++) assert_string_not_equal(guard_detector_at(j)->id, d->id);
  }
  assert_null(guard_detector_at(guard_detector_count()));
}

/* ---- streaming ---- */

static const char mixed[] =
    "INFO start\ntoken = ghp_R4nd0mT0k3nV4lu3F0rT3st1ngPurp0s3sX9\n"
    "dsn = postgres://svc_reporting:Tr0ub4dor-x92@db.prod.internal:5432/ledger\n"
    "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7AAAA\n-----END PRIVATE "
    "KEY-----\n"
    "mail jane.roe@example.com card 4111-1111-1111-1111 ssn 078-05-1120 at 10.2.3.4 /etc/passwd\n"
    "secret AKIAQ3EGRZ7VX2MPL4TN and the env value s3cr3t-V4lue-from-env! end";

static void split_at_every_boundary(void **state) {
  (void)state;
  const char *value = "s3cr3t-V4lue-from-env!";
  struct guard_secret secret = {"X", value, strlen(value)};
  struct guard_options options = {.secrets = &secret, .secret_count = 1};
  struct guard *guard = make_guard(&options);
  size_t length = strlen(mixed);
  for (int c = 0; c < GUARD_CLASS_COUNT; c++) {
    struct capture whole;
    redact_chunked(guard, (enum guard_class)c, mixed, length, 0, &whole);
    assert_null(strstr(whole.data, "ghp_R4nd"));
    assert_null(strstr(whole.data, "Tr0ub4dor"));
    assert_null(strstr(whole.data, "MIIEvQ"));
    assert_null(strstr(whole.data, "AKIAQ3"));
    assert_null(strstr(whole.data, value));
    /* Two chunks split at every position. */
    for (size_t split = 1; split < length; split++) {
      struct capture parts;
      memset(&parts, 0, sizeof parts);
      struct guard_stream *stream = NULL;
      dome_error err = {0};
      assert_int_equal(guard_stream_open_class(guard, "stdout", (enum guard_class)c, &stream, &err), 0);
      struct guard_sink sink = {capture_emit, capture_finding, &parts};
      assert_int_equal(guard_stream_feed(stream, mixed, split, &sink, &err), 0);
      assert_int_equal(guard_stream_feed(stream, mixed + split, length - split, &sink, &err), 0);
      assert_int_equal(guard_stream_finish(stream, &sink, &err), 0);
      guard_stream_close(stream);
      if (strcmp(parts.data, whole.data) != 0) fail_msg("class %d split %zu: `%s`", c, split, parts.data);
      assert_int_equal(parts.findings.count, whole.findings.count);
      for (size_t k = 0; k < whole.findings.count; k++) {
        assert_int_equal(parts.findings.items[k].offset, whole.findings.items[k].offset);
        assert_int_equal(parts.findings.items[k].length, whole.findings.items[k].length);
        assert_string_equal(parts.findings.items[k].detector, whole.findings.items[k].detector);
      }
      capture_free(&parts);
    }
    /* Every chunk size from 1 to 64 bytes. */
    for (size_t chunk = 1; chunk <= 64; chunk++) {
      struct capture parts;
      redact_chunked(guard, (enum guard_class)c, mixed, length, chunk, &parts);
      if (strcmp(parts.data, whole.data) != 0) fail_msg("class %d chunk %zu: `%s`", c, chunk, parts.data);
      assert_int_equal(parts.findings.count, whole.findings.count);
      capture_free(&parts);
    }
    capture_free(&whole);
  }
  guard_free(guard);
}

static unsigned next_random(uint64_t *seed) {
  *seed = *seed * 6364136223846793005ull + 1442695040888963407ull;
  return (unsigned)(*seed >> 33);
}

/* Random mixtures of every sample with binary noise, fed in random chunk sizes, redact exactly as one
 * buffer does (same text, same findings). */
static void random_chunking_matches_one_buffer(void **state) {
  (void)state;
  const char *value = "s3cr3t-V4lue-from-env!";
  struct guard_secret secret = {"X", value, strlen(value)};
  struct guard_options options = {.secrets = &secret, .secret_count = 1};
  struct guard *guard = make_guard(&options);
  uint64_t seed = 0x9e3779b97f4a7c15ull;
#define NEXT() next_random(&seed)
  for (int round = 0; round < 6; round++) {
    size_t capacity = 1 << 16, length = 0;
    char *text = malloc(capacity);
    assert_non_null(text);
    while (length < capacity - 512) {
      const struct sample *sample = &samples[NEXT() % (sizeof samples / sizeof samples[0])];
      size_t n = strlen(sample->text);
      if (length + n + 300 > capacity) break;
      memcpy(text + length, sample->text, n);
      length += n;
      if (NEXT() % 4 == 0) {
        memcpy(text + length, value, strlen(value));
        length += strlen(value);
      }
      size_t noise = NEXT() % 64;
      for (size_t i = 0; i < noise; i++) {
        unsigned pick = NEXT();
        text[length++] = pick % 3 ? " \n,;:=\"/"[NEXT() % 9] : (char)(unsigned char)(NEXT() & 0xffu);
      }
    }
    for (int c = 0; c < GUARD_CLASS_COUNT; c++) {
      struct capture whole;
      redact_chunked(guard, (enum guard_class)c, text, length, 0, &whole);
      struct capture parts;
      memset(&parts, 0, sizeof parts);
      struct guard_stream *stream = NULL;
      dome_error err = {0};
      assert_int_equal(guard_stream_open_class(guard, "stdout", (enum guard_class)c, &stream, &err), 0);
      struct guard_sink sink = {capture_emit, capture_finding, &parts};
      for (size_t at = 0; at < length;) {
        size_t n = 1 + NEXT() % (NEXT() % 2 ? 8 : 700);
        if (n > length - at) n = length - at;
        assert_int_equal(guard_stream_feed(stream, text + at, n, &sink, &err), 0);
        at += n;
      }
      assert_int_equal(guard_stream_finish(stream, &sink, &err), 0);
      guard_stream_close(stream);
      assert_true(whole.findings.count > 10);
      assert_int_equal(parts.length, whole.length);
      assert_memory_equal(parts.data, whole.data, whole.length);
      assert_int_equal(parts.findings.count, whole.findings.count);
      for (size_t k = 0; k < whole.findings.count; k++) {
        assert_int_equal(parts.findings.items[k].offset, whole.findings.items[k].offset);
        assert_int_equal(parts.findings.items[k].length, whole.findings.items[k].length);
        assert_string_equal(parts.findings.items[k].hmac_hex, whole.findings.items[k].hmac_hex);
      }
      assert_null(memmem(whole.data, whole.length, value, strlen(value)));
      capture_free(&parts);
      capture_free(&whole);
    }
    free(text);
  }
#undef NEXT
  guard_free(guard);
}

/* Candidates reported out of order (a block's plain card numbers before its grouped ones) and more candidates
 * per piece than the former fixed bound of 32 per rule: the result is the same for every chunking. (Both made
 * a match be skipped or found depending on the read sizes.) */
static void dense_candidates_chunking_invariant(void **state) {
  (void)state;
  struct guard *guard = make_guard(NULL);
  const char *order =
      "3714 496353 98431'4111111111111111(4111111111111111\"001:db8::1:192.168.1.7654 32(/home/alice/x<NAMEp";
  char *whole = redact_text(guard, GUARD_CLASS_PII, order);
  assert_string_equal(whole,
                      "[REDACTED:payment-card]'[REDACTED:payment-card]([REDACTED:payment-card]\""
                      "[REDACTED:ip-address].168.1.7654 32(/home/alice/x<NAMEp");
  free(whole);
  static const char *const tokens[] = {"4111111111111111", "3714 496353 98431", "4111 1111 1111 1111",
                                       "078-05-1120",      "+44 20 7946 0958",  "(415) 555-0132",
                                       "10.2.3.4",         "fe80::1",           "a@b.co",
                                       "1700000000000"};
  static const char seps[] = " \n:='\"(,-+_~@.";
  size_t capacity = 200 * 1024, n = 0;
  char *text = malloc(capacity + 64);
  assert_non_null(text);
  uint64_t seed = 11;
  while (n < capacity) {
    const char *token = tokens[next_random(&seed) % (sizeof tokens / sizeof tokens[0])];
    memcpy(text + n, token, strlen(token));
    n += strlen(token);
    text[n++] = seps[next_random(&seed) % (sizeof seps - 1)];
  }
  for (int c = 0; c < GUARD_CLASS_COUNT; c++) {
    struct capture one, parts;
    redact_chunked(guard, (enum guard_class)c, text, n, 0, &one);
    const size_t chunks[] = {777, 4096, 100000};
    for (size_t k = 0; k < sizeof chunks / sizeof chunks[0]; k++) {
      redact_chunked(guard, (enum guard_class)c, text, n, chunks[k], &parts);
      if (strcmp(parts.data, one.data) != 0) fail_msg("class %d chunks of %zu: output differs", c, chunks[k]);
      assert_int_equal(parts.findings.count, one.findings.count);
      capture_free(&parts);
    }
    capture_free(&one);
  }
  /* more regions per piece than a detector keeps (an SSN every 12 bytes): merged, still every one redacted */
  n = 0;
  while (n + 12 <= capacity) {
    memcpy(text + n, "078-05-1120 ", 12);
    n += 12;
  }
  for (size_t chunk = 0; chunk <= 777; chunk += 777) {
    struct capture out;
    redact_chunked(guard, GUARD_CLASS_PII, text, n, chunk, &out);
    assert_int_equal(out.findings.count, n / 12);
    assert_null(strstr(out.data, "078-05"));
    capture_free(&out);
  }
  free(text);
  guard_free(guard);
}

static void hold_back_is_bounded(void **state) {
  (void)state;
  struct guard *guard = make_guard(NULL);
  size_t hold_back = guard_hold_back_bytes(guard);
  assert_true(hold_back > 0 && hold_back < 1024);
  /* Plain text fed in small chunks is emitted at most hold_back bytes behind. */
  const char *line = "progress: step 17 of 300 done, elapsed 0.25 s\n";
  struct guard_stream *stream = NULL;
  dome_error err = {0};
  struct capture out = {0};
  struct guard_sink sink = {capture_emit, capture_finding, &out};
  assert_int_equal(guard_stream_open(guard, "stderr", &stream, &err), 0);
  for (int i = 0; i < 200; i++) {
    assert_int_equal(guard_stream_feed(stream, line, strlen(line), &sink, &err), 0);
    assert_true(guard_stream_bytes_in(stream) - out.length <= hold_back);
  }
  assert_int_equal(guard_stream_finish(stream, &sink, &err), 0);
  assert_int_equal(out.length, 200 * strlen(line));
  guard_stream_close(stream);
  capture_free(&out);
  guard_free(guard);
}

/* ---- exact values ---- */

static void exact_values_and_encodings(void **state) {
  (void)state;
  const char *value = "k9Vd2Lr+7PqWm1sXt8Yb4Nc6Hz0Jf3Ge5Ua1Ro7S";
  const char *spaced = "open sesame 42/x";
  struct guard_secret secrets[] = {{"AWS_SECRET_ACCESS_KEY", value, strlen(value)},
                                   {"PHRASE", spaced, strlen(spaced)},
                                   {"REPORT_YEAR", "2024", 4}};
  struct guard_options options = {.secrets = secrets, .secret_count = 3};
  struct guard *guard = make_guard(&options);
  char *out = redact_text(guard, GUARD_CLASS_PUBLIC, "v=k9Vd2Lr+7PqWm1sXt8Yb4Nc6Hz0Jf3Ge5Ua1Ro7S year 2024");
  assert_string_equal(out, "v=[REDACTED:env-value] year 2024");
  free(out);
  /* base64 at each of the three alignments, standard and URL-safe alphabets. */
  for (int prefix = 0; prefix < 3; prefix++) {
    char plain[128];
    snprintf(plain, sizeof plain, "%.*s%s", prefix, "ab", value);
    char encoded[256];
    sodium_bin2base64(encoded, sizeof encoded, (const unsigned char *)plain, strlen(plain),
                      sodium_base64_VARIANT_ORIGINAL);
    char *r = redact_text(guard, GUARD_CLASS_PUBLIC, encoded);
    if (strstr(r, "[REDACTED:env-value-base64]") == NULL)
      fail_msg("alignment %d: %s -> %s", prefix, encoded, r);
    free(r);
    sodium_bin2base64(encoded, sizeof encoded, (const unsigned char *)plain, strlen(plain),
                      sodium_base64_VARIANT_URLSAFE);
    r = redact_text(guard, GUARD_CLASS_PUBLIC, encoded);
    if (strstr(r, "[REDACTED:env-value-base64]") == NULL)
      fail_msg("url-safe alignment %d: %s -> %s", prefix, encoded, r);
    free(r);
  }
  char hex[128];
  sodium_bin2hex(hex, sizeof hex, (const unsigned char *)value, strlen(value));
  out = redact_text(guard, GUARD_CLASS_PUBLIC, hex);
  assert_string_equal(out, "[REDACTED:env-value-hex]");
  free(out);
  for (char *p = hex; *p; p++)
    if (*p >= 'a' && *p <= 'f') *p = (char)(*p - 'a' + 'A');
  out = redact_text(guard, GUARD_CLASS_PUBLIC, hex);
  assert_string_equal(out, "[REDACTED:env-value-hex]");
  free(out);
  out = redact_text(guard, GUARD_CLASS_PUBLIC,
                    "q=k9Vd2Lr%2B7PqWm1sXt8Yb4Nc6Hz0Jf3Ge5Ua1Ro7S&x=open+sesame+42%2fx");
  assert_string_equal(out, "q=[REDACTED:env-value-url]&x=[REDACTED:env-value-url]");
  free(out);
  guard_free(guard);
}

/* ---- findings ---- */

static void findings_carry_offset_and_hmac(void **state) {
  (void)state;
  unsigned char key[32];
  memset(key, 7, sizeof key);
  struct guard_options options = {.hmac_key = key, .hmac_key_length = sizeof key};
  struct guard *guard = make_guard(&options);
  const char *text = "abc AKIAQ3EGRZ7VX2MPL4TN xyz AKIAQ3EGRZ7VX2MPL4TN";
  char *out = NULL;
  size_t out_length = 0;
  struct guard_findings findings = {0};
  dome_error err = {0};
  assert_int_equal(
      guard_redact_buffer(guard, "stdout", text, strlen(text), &out, &out_length, &findings, &err), 0);
  assert_string_equal(out, "abc [REDACTED:aws-access-key-id] xyz [REDACTED:aws-access-key-id]");
  assert_int_equal(out_length, strlen(out));
  assert_int_equal(findings.count, 2);
  assert_string_equal(findings.items[0].field, "stdout");
  assert_string_equal(findings.items[0].detector, "aws-access-key-id");
  assert_int_equal(findings.items[0].offset, 4);
  assert_int_equal(findings.items[0].length, 20);
  assert_int_equal(findings.items[1].offset, 29);
  unsigned char mac[crypto_auth_hmacsha256_BYTES];
  crypto_auth_hmacsha256_state st;
  crypto_auth_hmacsha256_init(&st, key, sizeof key);
  crypto_auth_hmacsha256_update(&st, (const unsigned char *)"AKIAQ3EGRZ7VX2MPL4TN", 20);
  crypto_auth_hmacsha256_final(&st, mac);
  char hex[65];
  sodium_bin2hex(hex, sizeof hex, mac, sizeof mac);
  assert_string_equal(findings.items[0].hmac_hex, hex);
  assert_string_equal(findings.items[1].hmac_hex, hex);
  free(out);
  guard_findings_free(&findings);
  guard_free(guard);
}

/* ---- JSON ---- */

static void json_by_field(void **state) {
  (void)state;
  struct guard_options options = {.classification = "output_paths=SENSITIVE,env_vars=SENSITIVE,stderr=PII"};
  struct guard *guard = make_guard(&options);
  json_error_t json_error;
  json_t *doc = json_loads(
      "{\"stdout\":\"mail a.b@example.com key AKIAQ3EGRZ7VX2MPL4TN\",\"stderr\":\"mail a.b@example.com\","
      "\"exit_code\":0,\"output_paths\":[\"/etc/shadow\",\"out.csv\"],\"env_vars\":{\"HOME\":\"/"
      "root\",\"lower\":\"kept\"},"
      "\"nested\":{\"stderr\":\"x@example.org\"}}",
      0, &json_error);
  assert_non_null(doc);
  struct guard_findings findings = {0};
  dome_error err = {0};
  assert_int_equal(guard_redact_json(guard, doc, &findings, &err), 0);
  assert_string_equal(json_string_value(json_object_get(doc, "stdout")),
                      "mail a.b@example.com key [REDACTED:aws-access-key-id]");
  assert_string_equal(json_string_value(json_object_get(doc, "stderr")), "mail [REDACTED:email-address]");
  assert_int_equal(json_integer_value(json_object_get(doc, "exit_code")), 0);
  json_t *paths = json_object_get(doc, "output_paths");
  assert_string_equal(json_string_value(json_array_get(paths, 0)), "[REDACTED:host-path]");
  assert_string_equal(json_string_value(json_array_get(paths, 1)), "out.csv");
  assert_string_equal(json_string_value(json_object_get(json_object_get(doc, "env_vars"), "HOME")),
                      "[REDACTED:env-assignment]");
  assert_string_equal(json_string_value(json_object_get(json_object_get(doc, "env_vars"), "lower")), "kept");
  assert_string_equal(json_string_value(json_object_get(json_object_get(doc, "nested"), "stderr")),
                      "[REDACTED:email-address]");
  assert_int_equal(findings.count, 5);
  assert_string_equal(findings.items[0].field, "stdout");
  guard_findings_free(&findings);
  json_decref(doc);
  /* Too deep: refused, nothing changed. */
  json_t *deep = json_string("AKIAQ3EGRZ7VX2MPL4TN");
  json_t *leaf = deep;
  for (int i = 0; i < 70; i++) deep = json_pack("[o]", deep);
  assert_int_equal(guard_redact_json(guard, deep, NULL, &err), -EINVAL);
  assert_string_equal(json_string_value(leaf), "AKIAQ3EGRZ7VX2MPL4TN");
  json_decref(deep);
  guard_free(guard);
}

/* ---- bad input ---- */

static void binary_and_invalid_utf8_pass_through(void **state) {
  (void)state;
  struct guard *guard = make_guard(NULL);
  char data[4096];
  for (size_t i = 0; i < sizeof data; i++) data[i] = (char)((i * 131 + 7) & 0xff);
  memcpy(data + 1000, "\0\xff\xfe AKIAQ3EGRZ7VX2MPL4TN \xc3\x28", 28);
  for (int c = 0; c < GUARD_CLASS_COUNT; c++) {
    struct capture out;
    redact_chunked(guard, (enum guard_class)c, data, sizeof data, 7, &out);
    const char *redacted = memmem(out.data, out.length, "[REDACTED:aws-access-key-id]", 28);
    assert_non_null(redacted);
    assert_null(memmem(out.data, out.length, "AKIAQ3EGRZ7VX2MPL4TN", 20));
    if (c == GUARD_CLASS_PUBLIC) {
      /* Everything else byte-identical. */
      assert_int_equal(out.length, sizeof data - 20 + 28);
      assert_memory_equal(out.data, data, 1004);
      assert_memory_equal(out.data + 1004 + 28, data + 1024, sizeof data - 1024);
    }
    capture_free(&out);
  }
  guard_free(guard);
}

static void long_line_bounded(void **state) {
  (void)state;
  struct guard *guard = make_guard(NULL);
  size_t length = 8u << 20;
  char *line = malloc(length);
  assert_non_null(line);
  for (size_t i = 0; i < length; i++) line[i] = "abcdefghij0123456789+/ABCDEFGHIJ"[i % 32];
  memcpy(line + length / 2, " ghp_R4nd0mT0k3nV4lu3F0rT3st1ngPurp0s3sX9 ", 42);
  memcpy(line + 100, "eyJ", 3); /* a JWT-looking start that never completes */
  struct capture out;
  redact_chunked(guard, GUARD_CLASS_PII, line, length, 100000, &out);
  assert_non_null(memmem(out.data, out.length, "[REDACTED:github-pat-classic]", 29));
  assert_int_equal(out.length, length - 40 + 29);
  capture_free(&out);
  free(line);
  guard_free(guard);
}

static void bad_options_rejected(void **state) {
  (void)state;
  struct guard *guard = NULL;
  dome_error err = {0};
  const char *relative[] = {"workspace"};
  struct guard_options options = {.jail_paths = relative, .jail_path_count = 1};
  assert_int_equal(guard_create(&options, &guard, &err), -EINVAL);
  assert_non_null(strstr(err.message, "workspace"));
  const char *bad_suffix[] = {"corp/x"};
  struct guard_options options2 = {.internal_domain_suffixes = bad_suffix, .internal_domain_suffix_count = 1};
  assert_int_equal(guard_create(&options2, &guard, &err), -EINVAL);
  assert_null(guard);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(classification_seed_syntax),
      cmocka_unit_test(classification_errors_name_column),
      cmocka_unit_test(detectors_positive_and_negative),
      cmocka_unit_test(every_detector_documented),
      cmocka_unit_test(split_at_every_boundary),
      cmocka_unit_test(random_chunking_matches_one_buffer),
      cmocka_unit_test(dense_candidates_chunking_invariant),
      cmocka_unit_test(hold_back_is_bounded),
      cmocka_unit_test(exact_values_and_encodings),
      cmocka_unit_test(findings_carry_offset_and_hmac),
      cmocka_unit_test(json_by_field),
      cmocka_unit_test(binary_and_invalid_utf8_pass_through),
      cmocka_unit_test(long_line_bounded),
      cmocka_unit_test(bad_options_rejected),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
