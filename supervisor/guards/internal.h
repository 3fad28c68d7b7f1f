/* Internals of the guards library shared by its files; not a public interface. */
#ifndef DOME_GUARDS_INTERNAL_H
#define DOME_GUARDS_INTERNAL_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include <hs/hs.h>
#include <pcre2.h>

#include "supervisor/guards/guard.h"

/* How a confirmed match is checked before it is redacted. */
enum guard_validator {
  VALIDATE_NONE = 0,
  VALIDATE_ENTROPY,      /* generic secret: Shannon entropy and character mix of the value */
  VALIDATE_URL_PASSWORD, /* not a placeholder (${X}, <x>, ***) */
  VALIDATE_LUHN,         /* payment card: Luhn check, issuer prefix, consistent separators */
  VALIDATE_SSN,          /* US SSN: area 001-899 except 666, group != 00, serial != 0000 */
  VALIDATE_IBAN,         /* ISO 13616: country letters, length 15-34, mod-97 == 1 */
  VALIDATE_EMAIL,        /* dot-atom local part, top-level domain in one case */
  VALIDATE_PHONE,        /* 10 to 15 digits; NANP area/exchange start with 2-9 */
  VALIDATE_HOST_PATH,    /* outside the jail's view / home directory / supervisor path */
  VALIDATE_INTERNAL_IP,  /* RFC 1918, loopback, link-local, CGNAT, ULA, cloud metadata */
  VALIDATE_ANY_IP,       /* any well-formed IPv4/IPv6 address */
};

/* What finds a detector's candidates: its vectorscan pattern, or a shape of the bit-parallel prefilter
 * (prefilter.c; host-path's with literals built per guard). */
enum guard_trigger {
  GUARD_TRIGGER_HS = 0, /* the detector's `hs` pattern */
  GUARD_TRIGGER_PATHS,  /* host-path: a path start beginning with one of the guard's path literals */
  GUARD_TRIGGER_CARD,
  GUARD_TRIGGER_SSN,
  GUARD_TRIGGER_PHONE,
  GUARD_TRIGGER_IBAN,
  GUARD_TRIGGER_IP,
  GUARD_TRIGGER_HOME,
  GUARD_TRIGGER_ENV,
  GUARD_TRIGGER_EMAIL,
  GUARD_TRIGGER_COUNT,
};

/* A test of the bytes after a vectorscan report, before the report becomes a pending candidate (stream.c). */
enum guard_precheck {
  GUARD_PRECHECK_NONE = 0,
  /* generic-secret: the report is its keyword's end; a match needs [A-Za-z0-9_.-]{0,24}, an assignment and 12
   * value characters after it (the rest of its PCRE2 pattern), checked here on the bytes at hand instead of
   * by vectorscan's automaton after every keyword ("token" alone occurs ~350 times per MB of program output)
   */
  GUARD_PRECHECK_ASSIGNMENT,
};

enum {
  GUARD_PREFILTER_LOOKAHEAD = 64, /* bytes after a position its shape may test (+1) */
  GUARD_PREFILTER_BACK = 40,      /* bytes before a shape a match may start (an IPv6 address before ::) */
  /* e-mail: bytes from the end of [A-Za-z0-9._%+-]@[A-Za-z0-9] back to where the match may start */
  GUARD_PREFILTER_EMAIL_BACK = 68,
};

/* host-path's trigger, built per guard (guard.c): the directories its validator can accept (supervisor paths,
 * home roots, the host top-level directories no jail path covers). `pairs` has bit (b1 << 8 | b2) set when
 * some literal continues its '/' with the bytes b1 b2 (any b2 for a literal "/x", every pair for "/"). */
struct guard_path_literals {
  uint64_t pairs[65536 / 64];
  /* first[b] = 1 when some literal continues its '/' with the byte b (b < 128), and first[0] = 1 (the data's
   * end); any_first when the literals' second bytes are not all ASCII or a literal is "/" */
  unsigned char first[128];
  bool any_first;
  const char **text; /* each starts with '/'; borrowed from the guard or static */
  size_t *length;
  size_t count;
};

/* A prefilter candidate of `kind`: a match may start in [start, end] (offsets in the scanned data). */
typedef void (*guard_prefilter_hit_fn)(void *context, enum guard_trigger kind, size_t start, size_t end);

/* Report the candidates at positions [from, limit) of data[0, length), in increasing order, for the kinds in
 * the bit set `kinds` (1 << GUARD_TRIGGER_...; GUARD_TRIGGER_PATHS only with `paths`, else it finds nothing).
 * Positions must have GUARD_PREFILTER_LOOKAHEAD bytes after them unless the data ends at `length` (bytes
 * beyond are then absent); data[from - 1] is read if from > 0.
 */
void guard_prefilter_scan(const char *data, size_t length, size_t from, size_t limit, unsigned kinds,
                          const struct guard_path_literals *paths, bool stream_start,
                          guard_prefilter_hit_fn hit, void *context);
/* tests: 0 the best loop (eight blocks at once with AVX-512 VBMI2, else the block loop with the best
 * classifier), 1 no AVX-512, 2 the portable table, 3 the block loop with the best classifier and without the
 * per-class specialised loops */
extern int guard_prefilter_force;
/* Fill the prefilter's byte class table (guard_create; idempotent). */
void guard_prefilter_init(void); /* tests: use the portable classifier */

/* Payment card check of a digit string (Luhn, issuer prefix and length, printed groupings). */
bool guard_card_number_ok(const char *text, size_t length);

/* A built-in detector. Every detector has a vectorscan pattern (`hs`) that reports candidate match
 * ends; the match starts at most `back` bytes before a reported end (0: the hs pattern's max width).
 * `pcre` (with an optional named group `secret`, the part replaced) confirms and finds the extent. */
struct guard_detector {
  struct guard_detector_info info;
  const char *hs;
  unsigned hs_flags;
  unsigned back;
  const char *pcre;
  uint32_t pcre_flags;
  enum guard_validator validator;
  bool dynamic; /* built per guard (exact values, internal hostnames): hs/pcre are NULL here */
  enum guard_trigger trigger;
  enum guard_precheck precheck; /* applied to the hs pattern's reports */
};

extern const struct guard_detector guard_detectors[];
extern const size_t guard_detectors_count;
/* Index of a detector by id, or -1. */
int guard_detector_index(const char *id);

/* A rule: one pattern of a compiled guard's vectorscan databases (the hs id is the rule index). */
struct guard_rule {
  int detector;           /* index into guard_detectors */
  pcre2_code *code;       /* NULL for literal rules (exact values): the hs match is the span */
  int secret_group;       /* capture group replaced, 0 = whole match */
  unsigned back;          /* bytes from a reported end back to the earliest possible match start */
  unsigned length;        /* literal rules: the literal's length */
  unsigned char *literal; /* literal rules: its bytes (owned), compared case-insensitively if caseless */
  bool caseless;
  enum guard_trigger trigger; /* GUARD_TRIGGER_HS: in the vectorscan database; else the prefilter */
  enum guard_precheck precheck;
};

struct guard {
  struct guard_classification classification;
  struct guard_rule *rules;
  size_t rule_count;
  hs_database_t *database[GUARD_CLASS_COUNT];
  hs_scratch_t *scratch_prototype;
  size_t hold_back[GUARD_CLASS_COUNT];
  unsigned prefilter_kinds[GUARD_CLASS_COUNT];                /* prefilter shapes scanned in each class */
  int prefilter_rule[GUARD_CLASS_COUNT][GUARD_TRIGGER_COUNT]; /* rule of each shape per class, or -1 */
  struct guard_path_literals paths;                           /* host-path's trigger */
  unsigned char *hmac_key;
  size_t hmac_key_length;
  char **jail_paths;
  size_t jail_path_count;
  char **supervisor_paths;
  size_t supervisor_path_count;
};

/* Validate a confirmed match (value = the secret group's bytes; whole = the entire match). Returns the
 * detector index to report (usually `detector`), or -1 to drop the candidate. */
int guard_validate(const struct guard *guard, int detector, const char *whole, size_t whole_length,
                   const char *value, size_t value_length);

/* Whether `path` (length bytes) equals `prefix` or lies beneath it, component-wise. */
bool guard_path_under(const char *path, size_t length, const char *prefix);
/* The host's top-level directories (host-path) and the home directory roots (home-directory). */
extern const char *const guard_host_roots[];
extern const size_t guard_host_root_count;
extern const char *const guard_home_roots[];
extern const size_t guard_home_root_count;

/* GUARD_PRECHECK_ASSIGNMENT on data[at, length) (`at` = a keyword's end): 0 when no generic-secret match can
 * continue the keyword there, 1 when one may, -1 when the bytes up to `length` do not decide it. */
int guard_precheck_assignment(const char *data, size_t length, size_t at);

/* HMAC-SHA-256 of data under the guard's key, as 64 lower-case hex digits + NUL. */
void guard_hmac_hex(const struct guard *guard, const void *data, size_t length, char out[65]);

#endif
