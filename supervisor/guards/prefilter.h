/* Internals of the bit-parallel prefilter shared by prefilter.c (the block loops, the byte classifiers) and
 * prefilter_super.c (eight blocks at once); not a public interface. */
#ifndef DOME_GUARDS_PREFILTER_H
#define DOME_GUARDS_PREFILTER_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "supervisor/guards/internal.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define HAVE_AVX512BW 1
#endif

enum mask_index {
  M_DIGIT,
  M_UPPER,
  M_ALNUM,
  M_HEX,
  M_DOT,
  M_DASH,
  M_SPACE,
  M_COLON,
  M_PLUS,
  M_LPAREN,
  M_RPAREN,
  M_TILDE,
  M_SLASH,
  M_UNDERSCORE,
  M_NEWLINE,
  M_EQUALS,
  M_PHONE, /* digit or one of " .-()": guard_byte_classes only (tested byte by byte after a '+') */
  M_PATHC, /* a path character [A-Za-z0-9_.~/-] (host-path's lookbehind) */
  M_AT,
  M_LOCAL,     /* an e-mail local-part character [A-Za-z0-9._%+-]: guard_byte_classes only */
  M_D26,       /* a digit 2-6 (a card number's first digit) */
  M_PATHFIRST, /* prefilter_super.c only: the byte after '/' of one of the guard's path literals (or NUL) */
  M_COUNT,
};

/* The classes of exactly one byte, X(class, byte), for the vector classifiers (prefilter.c,
 * prefilter_super.c) and the byte table. */
// clang-format off
#define GUARD_SINGLE_BYTE_CLASSES(X)                                                        \
  X(M_DOT, '.') X(M_DASH, '-') X(M_SPACE, ' ') X(M_COLON, ':') X(M_PLUS, '+')               \
  X(M_LPAREN, '(') X(M_RPAREN, ')') X(M_TILDE, '~') X(M_SLASH, '/') X(M_UNDERSCORE, '_')    \
  X(M_NEWLINE, '\n') X(M_EQUALS, '=') X(M_AT, '@')
// clang-format on

/* Bit k set when a byte is in class k (guard_prefilter_init fills it). */
extern uint32_t guard_byte_classes[256];

/* A plain card number: the digit run at `at` is 13-19 digits and passes the card check. */
static inline bool plain_card(const char *data, size_t length, size_t at) {
  if (data[at] < '2' || data[at] > '6') return false; /* no issuer outside major industries 2-6 */
  size_t end = at;
  while (end < length && end - at < 20 && data[end] >= '0' && data[end] <= '9') end++;
  /* the lengths any scheme issues (guard_card_number_ok's last test, first here: most long digit runs in
   * program output are 18-digit ids) */
  const uint32_t issued = 1u << 13 | 1u << 14 | 1u << 15 | 1u << 16 | 1u << 19;
  return end - at <= 19 && (issued >> (end - at) & 1) && guard_card_number_ok(data + at, end - at);
}

/* host-path: one of the guard's literals begins at the '/' at `at` (only the bytes present are compared, so a
 * literal running past the data counts: a superset, the confirmer decides). */
static inline bool path_literal_at(const char *data, size_t length, size_t at,
                                   const struct guard_path_literals *paths) {
  size_t rest = length - at;
  if (rest >= 3) {
    unsigned pair = (unsigned)(unsigned char)data[at + 1] << 8 | (unsigned char)data[at + 2];
    if (!(paths->pairs[pair / 64] >> (pair % 64) & 1)) return false;
  }
  for (size_t k = 0; k < paths->count; k++) {
    size_t n = paths->length[k] < rest ? paths->length[k] : rest;
    if (memcmp(data + at, paths->text[k], n) == 0) return true;
  }
  return false;
}

/* Whether the byte before `at` is a letter or digit (at 0, the start of the data: no). The rare anchors'
 * lookbehind, tested byte by byte so that PII's blocks need no letter-or-digit mask. */
static inline bool alnum_before(const char *data, size_t at) {
  return at > 0 && guard_byte_classes[(unsigned char)data[at - 1]] >> M_ALNUM & 1;
}

/* Each set bit i of `bits`, lowest first. Candidates are rare (a few per KiB), so the body is marked
 * unlikely: the compiler then keeps the spills around its calls (`hit`, the card and path checks) out of the
 * shape tests (PII's scan 3-5% faster; see docs/guards.md). */
#define EACH_BIT(bits, i)          \
  for (uint64_t rest_ = (bits), i; \
       __builtin_expect(rest_ != 0, 0) && (i = (uint64_t)__builtin_ctzll(rest_), 1); rest_ &= rest_ - 1)

typedef unsigned __int128 u128;

/* The env shape's candidates in 64 bytes at offset o: S holds the line starts that begin a name, N the name
 * characters and `equals` the '=' bytes of those 64 and the next 64. Adding S to N carries through each
 * name and lands on the byte after it: every name that ends on an '=' reports its line start, and a name
 * that runs past the 128 bytes seen (its '=' may follow) reports the last start. */
static inline __attribute__((always_inline)) void env_name_ends(uint64_t S, u128 N, u128 equals, size_t o,
                                                                guard_prefilter_hit_fn hit, void *context) {
  u128 sum = N + S;
  u128 ends = sum & ~N & equals;
  for (u128 rest = ends; rest; rest &= rest - 1) {
    uint64_t low = (uint64_t)rest;
    unsigned q =
        low ? (unsigned)__builtin_ctzll(low) : 64 + (unsigned)__builtin_ctzll((uint64_t)(rest >> 64));
    uint64_t starts = q >= 64 ? S : S & (((uint64_t)1 << q) - 1);
    size_t p = o + 63 - (size_t)__builtin_clzll(starts);
    hit(context, GUARD_TRIGGER_ENV, p, p + 1);
  }
  if (sum < N) {
    size_t p = o + 63 - (size_t)__builtin_clzll(S);
    hit(context, GUARD_TRIGGER_ENV, p, p + 1);
  }
}

/* The byte classes each shape reads. */
static inline __attribute__((always_inline)) uint32_t classes_needed(unsigned kinds) {
  uint32_t need = 1u << M_DIGIT;
  if (kinds & 1u << GUARD_TRIGGER_PATHS) need |= 1u << M_SLASH;
  if (kinds & 1u << GUARD_TRIGGER_CARD) need |= 1u << M_SPACE | 1u << M_DASH;
  if (kinds & 1u << GUARD_TRIGGER_SSN) need |= 1u << M_DASH;
  if (kinds & 1u << GUARD_TRIGGER_PHONE) need |= 1u << M_PLUS | 1u << M_LPAREN | 1u << M_DOT | 1u << M_DASH;
  if (kinds & 1u << GUARD_TRIGGER_IBAN) need |= 1u << M_UPPER;
  if (kinds & 1u << GUARD_TRIGGER_IP) need |= 1u << M_DOT | 1u << M_COLON | 1u << M_HEX;
  if (kinds & 1u << GUARD_TRIGGER_HOME) need |= 1u << M_TILDE;
  if (kinds & 1u << GUARD_TRIGGER_EMAIL) need |= 1u << M_AT;
  if (kinds & 1u << GUARD_TRIGGER_ENV)
    need |= 1u << M_NEWLINE | 1u << M_UPPER | 1u << M_UNDERSCORE | 1u << M_EQUALS;
  return need;
}

#define KINDS_SENSITIVE \
  (1u << GUARD_TRIGGER_PATHS | 1u << GUARD_TRIGGER_IP | 1u << GUARD_TRIGGER_HOME | 1u << GUARD_TRIGGER_ENV)
#define KINDS_PII                                                                   \
  (1u << GUARD_TRIGGER_CARD | 1u << GUARD_TRIGGER_SSN | 1u << GUARD_TRIGGER_PHONE | \
   1u << GUARD_TRIGGER_IBAN | 1u << GUARD_TRIGGER_IP | 1u << GUARD_TRIGGER_EMAIL)
#ifdef HAVE_AVX512BW
#define AVX512 __attribute__((target("avx512f,avx512bw")))
/* The block loop with the AVX-512BW classifier (prefilter.c), and eight blocks at once (prefilter_super.c,
 * CPUs with AVX-512 VBMI2); both as guard_prefilter_scan. */
AVX512 void guard_prefilter_blocks_avx512(const char *data, size_t length, size_t from, size_t limit,
                                          unsigned kinds, const struct guard_path_literals *paths,
                                          bool stream_start, guard_prefilter_hit_fn hit, void *context);
void guard_prefilter_superblocks(const char *data, size_t length, size_t from, size_t limit, unsigned kinds,
                                 const struct guard_path_literals *paths, bool stream_start,
                                 guard_prefilter_hit_fn hit, void *context);
#endif

#endif
