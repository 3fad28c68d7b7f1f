/* guards — field classification and streaming redaction of a jailed program's output.
 *
 * Before anything a jail printed returns to the agent, each output field (stdout, stderr, output_paths,
 * env_vars, ...) is scanned for credentials, the jail's own environment values, internal addresses, host
 * paths and PII, according to the field's class. Every match is replaced by `[REDACTED:<detector-id>]`;
 * every other byte passes through unchanged. Every redaction yields a finding (field, detector id, offset
 * and length in the original bytes, HMAC-SHA-256 of the redacted value under a per-deployment key) that
 * the journal records as an exec.redaction event.
 *
 * Scanning: one vectorscan (Hyperscan) streaming database per class finds candidate match ends across
 * chunk boundaries for the literal-anchored detectors, and a bit-parallel prefilter (prefilter.c) finds
 * candidates for the digit-structured ones (cards, SSNs, phone numbers, IBANs, IP addresses); PCRE2 confirms
 * each candidate in the held-back window, finds its exact extent (hard partial matching tells "needs more
 * bytes" from "no match") and a validator checks checksums or ranges (Luhn, IBAN mod-97, SSN ranges, Shannon
 * entropy, path prefixes). Memory per stream and the hold-back are bounded by the longest detector pattern
 * (guard_hold_back_bytes()).
 *
 * Classes (one table in classification.c; extend it there):
 *   PUBLIC     credentials and exact secret values (the jail's environment, injected credentials),
 *              in every field whatever its class; a field with no classification is PUBLIC.
 *   SENSITIVE  PUBLIC + absolute paths outside the jail's view, home directories, the supervisor's own
 *              paths, internal network addresses (RFC 1918, loopback, link-local, CGNAT, ULA, cloud
 *              metadata), internal domain names, environment-variable assignments.
 *   PII        PUBLIC + e-mail addresses, phone numbers, payment card numbers (Luhn), US SSNs (valid
 *              ranges), IBANs (mod-97), IP addresses.
 *
 * Thread safety: a struct guard is immutable after guard_create() and may be shared by any number of
 * threads; each struct guard_stream belongs to one thread at a time. */
#ifndef DOME_GUARDS_GUARD_H
#define DOME_GUARDS_GUARD_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "supervisor/common/error.h"

/* ---- classes and classification ---- */

enum guard_class { GUARD_CLASS_PUBLIC = 0, GUARD_CLASS_SENSITIVE, GUARD_CLASS_PII, GUARD_CLASS_COUNT };

/* Upper-case name of a class ("PUBLIC", "SENSITIVE", "PII"); "?" for an out-of-range value. */
const char *guard_class_name(enum guard_class class_);

/* Parse a class name (case-insensitive). Returns 0, or -EINVAL with err naming the text. */
int guard_class_parse(const char *name, enum guard_class *out, dome_error *err);

/* One field → class pair of a classification. */
struct guard_field_class {
  char *field;
  enum guard_class class_;
};

/* A field classification, as the seed's `--field-classification` flag gives it. */
struct guard_classification {
  struct guard_field_class *entries;
  size_t count;
};

/* Parse the seed's syntax `field=CLASS[,field=CLASS...]`, e.g.
 * `output_paths=SENSITIVE,env_vars=SENSITIVE,stderr=PII`. Spaces around items are ignored; field names
 * are [A-Za-z0-9_.-]{1,128}; a field given twice, an empty item, a missing `=` or an unknown class is an
 * error naming the 1-based column ("field classification:12: unknown class `SECRET`"). An empty string
 * is an empty classification. On success *out owns its memory (guard_classification_free); on failure
 * *out is left empty. Returns 0, -EINVAL (bad text) or -ENOMEM. */
int guard_classification_parse(const char *text, struct guard_classification *out, dome_error *err);

/* Class of `field` under `classification` (exact, case-sensitive name); PUBLIC when not listed or when
 * classification is NULL. */
enum guard_class guard_classification_lookup(const struct guard_classification *classification,
                                             const char *field);

void guard_classification_free(struct guard_classification *classification);

/* ---- detectors ---- */

/* Description of one detector (static data). */
struct guard_detector_info {
  const char *id;          /* stable id used in `[REDACTED:<id>]`, e.g. "github-pat-classic" */
  enum guard_class class_; /* PUBLIC: applies to every field; SENSITIVE / PII: only to fields of that class */
  const char *description; /* one line */
  const char *source;      /* where the token format is documented (URL or standard) */
};

/* Number of built-in detectors, and the i-th (0 <= i < count); NULL when out of range. The exact-value
 * detectors (env-value, env-value-base64, env-value-hex, env-value-url) and internal-hostname are
 * included. */
size_t guard_detector_count(void);
const struct guard_detector_info *guard_detector_at(size_t index);

/* ---- the compiled guard ---- */

/* A secret value to redact exactly: an environment value the jail was given, an injected credential.
 * It is also redacted when printed base64 (standard and URL-safe alphabets, any 3-byte alignment),
 * hex (lower and upper case) or URL-encoded (percent-encoding, `+` for space). */
struct guard_secret {
  const char *name; /* e.g. the environment variable's name; informational, may be NULL */
  const void *value;
  size_t length; /* bytes */
};

struct guard_options {
  /* Field classification in the seed's syntax (see guard_classification_parse); NULL or "" = all PUBLIC. */
  const char *classification;
  /* Exact values to redact in every field. Values shorter than min_secret_length are ignored (a 4-digit
   * year is no secret and would redact every date). Copied by guard_create. */
  const struct guard_secret *secrets;
  size_t secret_count;
  size_t min_secret_length; /* bytes; 0 = default 8 */
  /* Per-deployment HMAC-SHA-256 key for findings (any length, 32 bytes recommended). NULL = a random key
   * drawn at guard_create (hashes then correlate only within this guard's lifetime). Copied. */
  const void *hmac_key;
  size_t hmac_key_length;
  /* Internal domain suffixes (SENSITIVE), with or without the leading dot, e.g. "internal", ".corp".
   * NULL = the defaults: internal, corp, local, lan, intranet, localdomain, home.arpa. */
  const char *const *internal_domain_suffixes;
  size_t internal_domain_suffix_count;
  /* Absolute path prefixes the jail itself shows the program; paths beneath them are not sensitive.
   * NULL = the defaults: /workspace, /tmp, /usr, /bin, /sbin, /lib, /lib64, /lib32, /dev/null,
   * /dev/zero, /dev/urandom, /dev/random, /dev/std{in,out,err}, /dev/fd, /proc/self. */
  const char *const *jail_paths;
  size_t jail_path_count;
  /* The supervisor's own paths (always sensitive, even beneath a jail path), e.g. the state and journal
   * directories. NULL = the defaults: /run/dome, /var/lib/dome, /var/log/dome, /etc/dome. */
  const char *const *supervisor_paths;
  size_t supervisor_path_count;
};

struct guard;

/* Compile a guard: parse the classification, build one vectorscan streaming database per class from the
 * built-in detectors plus the exact secret values and their encodings, compile the PCRE2 confirmers.
 * options may be NULL (all defaults). The result is immutable and thread-shareable.
 * Returns 0 and *out, or -EINVAL (bad classification, path or suffix; err names it), -ENOMEM, -EIO
 * (vectorscan/PCRE2 compile failure, err carries the detector id and the engine's message). */
int guard_create(const struct guard_options *options, struct guard **out, dome_error *err);

/* Release a guard. Every stream opened on it must be closed first. NULL is ignored. */
void guard_free(struct guard *guard);

/* Class a field has under this guard's classification. */
enum guard_class guard_field_class(const struct guard *guard, const char *field);

/* Largest number of bytes a stream holds back when no candidate match is pending (bytes; 282 with the
 * built-in detectors, more when an exact secret's encoding is longer). While a candidate is pending (e.g. a
 * PEM block whose END line has not arrived) the hold-back grows up to that detector's maximum match length
 * (at most 64 KiB). */
size_t guard_hold_back_bytes(const struct guard *guard);

/* ---- findings ---- */

/* One redaction. offset/length are in bytes of the original (unredacted) field, counted from the start of
 * the stream (or buffer, or JSON string). hmac_hex: lower-case hex HMAC-SHA-256 of the redacted bytes
 * under the deployment key. field/detector stay valid for the duration of the callback (and for the
 * lifetime of a struct guard_findings array they are stored in). */
struct guard_finding {
  const char *field;
  const char *detector;
  uint64_t offset;
  uint64_t length;
  char hmac_hex[65];
};

/* Receives redacted output (bytes) and findings. Either callback may be NULL. A callback returning a
 * negative value aborts the feed, which returns that value (with err set to "output callback failed"). */
struct guard_sink {
  int (*emit)(const char *data, size_t length, void *context);
  int (*finding)(const struct guard_finding *finding, void *context);
  void *context;
};

/* Growable array of findings (owns copies of the field names). Zero-initialise before use. */
struct guard_findings {
  struct guard_finding *items;
  char **fields; /* owned copies, parallel to items */
  size_t count;
  size_t capacity;
};

/* Append a copy of *finding. Returns 0 or -ENOMEM. */
int guard_findings_add(struct guard_findings *findings, const struct guard_finding *finding);
void guard_findings_free(struct guard_findings *findings);

/* ---- streaming redaction ---- */

struct guard_stream;

/* Open a streaming redactor for one output field (its class comes from the guard's classification;
 * field NULL = "stdout"). Returns 0 and *out, or -ENOMEM / -EIO (scratch allocation). */
int guard_stream_open(const struct guard *guard, const char *field, struct guard_stream **out,
                      dome_error *err);

/* As guard_stream_open with an explicit class, ignoring the classification. */
int guard_stream_open_class(const struct guard *guard, const char *field, enum guard_class class_,
                            struct guard_stream **out, dome_error *err);

/* Feed `length` bytes (any content: invalid UTF-8, NUL bytes, arbitrarily long lines). Redacted bytes
 * are passed to sink->emit as soon as no pending match can cover them (at most the hold-back behind);
 * findings to sink->finding as they become final. Matches spanning chunk boundaries are found exactly as
 * in one buffer. Returns 0, a sink callback's negative value, or -EIO (scan failure). After a failure the
 * stream only accepts guard_stream_close. */
int guard_stream_feed(struct guard_stream *stream, const void *data, size_t length,
                      const struct guard_sink *sink, dome_error *err);

/* A pause in the input (the program wrote nothing for a while): emit the held-back bytes that no
 * detector can still match whatever bytes follow, so that a short line reaches the reader before the
 * hold-back fills. Bytes from the earliest position where some detector's pattern matches partially
 * (the input ends inside it), or where a match is complete but not yet decided, stay held; a redaction
 * that would end beyond the flushed bytes is held whole. The output and the findings of the stream stay
 * exactly those of one guard_redact_buffer over the whole input, wherever the flushes fall. Cost: one
 * PCRE2 search per detector of the stream's class over the held-back bytes. Returns as
 * guard_stream_feed; the stream accepts further feeds. */
int guard_stream_flush(struct guard_stream *stream, const struct guard_sink *sink, dome_error *err);

/* Bytes fed but not yet emitted (held back by pending candidates and the hold-back). */
uint64_t guard_stream_held_bytes(const struct guard_stream *stream);

/* End of input: confirm the pending candidates, emit the held-back bytes and the last findings.
 * Returns as guard_stream_feed. The stream accepts no further feed. */
int guard_stream_finish(struct guard_stream *stream, const struct guard_sink *sink, dome_error *err);

/* Bytes fed so far, and findings reported so far. */
uint64_t guard_stream_bytes_in(const struct guard_stream *stream);
uint64_t guard_stream_finding_count(const struct guard_stream *stream);

/* Release a stream (finished or not; held-back bytes of an unfinished stream are discarded). NULL ok. */
void guard_stream_close(struct guard_stream *stream);

/* ---- one-shot ---- */

/* Redact a whole buffer of field `field` (NULL = "stdout"). *out receives a NUL-terminated malloc'd copy
 * (the NUL is not counted in *out_length); findings (may be NULL) receives the findings.
 * Returns 0, -ENOMEM or -EIO; on failure *out is NULL and findings holds what was found before. */
int guard_redact_buffer(const struct guard *guard, const char *field, const void *data, size_t length,
                        char **out, size_t *out_length, struct guard_findings *findings, dome_error *err);

/* Redact a JSON value in place (an MCP structuredContent object): every string value is redacted with
 * the class of the nearest enclosing object key that the classification names (PUBLIC when none; the
 * top-level key for a top-level string), and finding fields name the top-level key. Inside a SENSITIVE
 * field, a string member of an object whose key is an environment-variable name ([A-Z_][A-Z0-9_]*, e.g.
 * env_vars {"HOME": "/workspace"}) is an environment value and is replaced whole (env-assignment). Keys,
 * numbers, booleans and structure are unchanged. Nesting deeper than 64 levels is an error (-EINVAL, checked
 * before anything is changed). A redaction that would leave invalid UTF-8 replaces the whole string value
 * with
 * `[REDACTED:invalid-utf8]`. Returns 0, -EINVAL, -ENOMEM or -EIO. */
int guard_redact_json(const struct guard *guard, json_t *value, struct guard_findings *findings,
                      dome_error *err);

#endif
