/* Bit-parallel candidate scan for the digit-structured detectors (payment cards, US SSNs, phone numbers,
 * IBANs, IP addresses) and a few single-character anchors (host paths, e-mail, home directories, NAME=
 * lines).
 *
 * Program output is about a third digits (CSV, timestamps, ids, hexdumps). Vectorscan has no literal to
 * anchor patterns such as [0-9]{13,19} on, so its automata run on every digit and a class database with
 * these detectors scans at a tenth of the credential database's speed. Here the bytes of each 64-byte block
 * are classified into bit masks (one bit per byte: digit, upper-case letter, '.', '-', ...; AVX-512BW or
 * AVX2 when the CPU has them, a table otherwise) and each detector's necessary shape is tested for the 64
 * positions of a block at once with shifts and ands on its masks and the next block's, cheapest part of the
 * shape first so most blocks stop after a few instructions. A position whose shape holds is a candidate:
 * the stream confirms it with the detector's PCRE2 pattern and validator exactly as a vectorscan report.
 * Shapes test the byte before the position and at most the 64 bytes after it (a 64-character NAME before
 * its '='), so a position is decided once GUARD_PREFILTER_LOOKAHEAD bytes follow it.
 *
 * Every shape is implied by the detector's PCRE2 pattern (see detectors.c), so no match is lost:
 * - payment-card: 13 digits in a row starting a digit run (a plain number; its run must be 13-19 digits
 *   and pass the Luhn/issuer check, tested here so the many long ids in CSV cost no PCRE2 call), or 4
 *   digits, a space or dash, 4 digits, then a separator, 4 digits, a separator and a group of 1-4 digits
 *   (4-4-4-4) or 2 digits, a separator and a group of 4-5 digits (4-6-5);
 * - us-ssn: 3 digits, dash, 2 digits, dash, 4 digits;
 * - phone-number: not after a letter or digit, '+', a digit and 9 more digits or " .-()" (E.164: 10 digits
 *   at least); '(' 3 digits ')' or 3 digits [.-] 3 digits [.-] 4 digits (NANP);
 * - iban: not after a letter or digit, 2 upper-case letters and 2 digits;
 * - ip-address, internal-ip: a digit, '.', digit chain with three dots within 4 bytes of each other (IPv4);
 *   "::" or four hex:hex links within 5 bytes of each other (IPv6);
 * - host-path: '/' not after a path character ([A-Za-z0-9_.~/-]) and followed by one of the guard's path
 *   literals (the directories its validator can accept), as a vectorscan literal set did, but vectorscan's
 *   literal matcher ran on every '/' of program output (0.24 ms/MB alone);
 * - email-address: '@' after a local-part character [A-Za-z0-9._%+-] and before a letter or digit, exactly
 *   the vectorscan trigger it replaced (which, in a database with the exact-value literals, slowed PII's);
 * - home-directory: '~' followed by a letter, digit, '_' or '/';
 * - env-assignment (the NAME=value form; `export NAME=` is a vectorscan literal): at a line start, a run of
 *   [A-Z0-9_] starting with a letter or '_' and followed by '=' (or running past the 128 bytes seen). */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/platform/x86.h>

#include "supervisor/guards/prefilter.h"

/* One mask per byte class; bit i = byte i of a 64-byte block. */
struct masks {
  uint64_t m[M_COUNT];
};

static uint32_t byte_class(unsigned char c) {
  uint32_t k = 0;
  if (c >= '0' && c <= '9') k |= 1u << M_DIGIT | 1u << M_ALNUM | 1u << M_HEX;
  if (c >= 'A' && c <= 'Z') k |= 1u << M_UPPER | 1u << M_ALNUM;
  if (c >= 'a' && c <= 'z') k |= 1u << M_ALNUM;
  if ((c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')) k |= 1u << M_HEX;
#define SINGLE(class, byte) \
  if (c == (unsigned char)(byte)) k |= 1u << (class);
  GUARD_SINGLE_BYTE_CLASSES(SINGLE)
#undef SINGLE
  if ((c >= '0' && c <= '9') || (c && strchr(" .-()", c))) k |= 1u << M_PHONE;
  if ((k & 1u << M_ALNUM) || (c && strchr("_.~/-", c))) k |= 1u << M_PATHC;
  if ((k & 1u << M_ALNUM) || (c && strchr("._%+-", c))) k |= 1u << M_LOCAL;
  if (c >= '2' && c <= '6') k |= 1u << M_D26;
  return k;
}

uint32_t guard_byte_classes[256];
static bool have_avx512, have_avx2, have_vbmi2;

static void init_once(void) {
  for (int c = 0; c < 256; c++) guard_byte_classes[c] = byte_class((unsigned char)c);
#ifdef HAVE_AVX512BW
  /* glibc's answer (<sys/platform/x86.h>, glibc 2.33): what its loader found at start-up and the kernel
   * enabled (XSAVE state), read from memory. Not GCC's __builtin_cpu_supports: that links libgcc's
   * constructor, which runs its CPUID probe in every dome process — a VM exit per CPUID instruction on a
   * virtual machine (~5 us each here), paid by `dome run` too, which never scans. */
  have_avx512 = CPU_FEATURE_ACTIVE(AVX512BW) && CPU_FEATURE_ACTIVE(AVX512F);
  have_avx2 = CPU_FEATURE_ACTIVE(AVX2);
  have_vbmi2 = have_avx512 && CPU_FEATURE_ACTIVE(AVX512_VBMI) && CPU_FEATURE_ACTIVE(AVX512_VBMI2);
#endif
}

void guard_prefilter_init(void) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, init_once);
}

static void classify_scalar(const unsigned char *p, uint32_t need, struct masks *out) {
  memset(out, 0, sizeof *out);
  for (unsigned i = 0; i < 64; i++) {
    uint32_t k = guard_byte_classes[p[i]] & need;
    while (k) {
      unsigned m = (unsigned)__builtin_ctz(k);
      k &= k - 1;
      out->m[m] |= (uint64_t)1 << i;
    }
  }
}

#ifdef HAVE_AVX512BW
AVX512 static inline __attribute__((always_inline)) void classify_avx512(const unsigned char *p,
                                                                         uint32_t need, struct masks *out) {
  __m512i x = _mm512_loadu_si512((const void *)p);
  __m512i lower = _mm512_sub_epi8(_mm512_or_si512(x, _mm512_set1_epi8(0x20)), _mm512_set1_epi8('a'));
  uint64_t *m = out->m;
  m[M_DIGIT] = _mm512_cmple_epu8_mask(_mm512_sub_epi8(x, _mm512_set1_epi8('0')), _mm512_set1_epi8(9));
  if (need & 1u << M_UPPER)
    m[M_UPPER] = _mm512_cmple_epu8_mask(_mm512_sub_epi8(x, _mm512_set1_epi8('A')), _mm512_set1_epi8(25));
  if (need & 1u << M_ALNUM) m[M_ALNUM] = m[M_DIGIT] | _mm512_cmple_epu8_mask(lower, _mm512_set1_epi8(25));
  if (need & 1u << M_HEX) m[M_HEX] = m[M_DIGIT] | _mm512_cmple_epu8_mask(lower, _mm512_set1_epi8(5));
#define EQ(k, c) \
  if (need & 1u << k) m[k] = _mm512_cmpeq_epi8_mask(x, _mm512_set1_epi8(c));
  GUARD_SINGLE_BYTE_CLASSES(EQ)
#undef EQ
  if (need & 1u << M_PATHC)
    m[M_PATHC] = m[M_ALNUM] | m[M_UNDERSCORE] | m[M_DOT] | m[M_TILDE] | m[M_SLASH] | m[M_DASH];
}

/* The same with 32-byte AVX2 compares (CPUs without AVX-512BW): two halves per block. */
#define AVX2 __attribute__((target("avx2")))
AVX2 static inline __attribute__((always_inline)) void classify_avx2(const unsigned char *p, uint32_t need,
                                                                     struct masks *out) {
  uint64_t *m = out->m;
  memset(out, 0, sizeof *out);
  for (int h = 0; h < 2; h++) {
    __m256i x = _mm256_loadu_si256((const __m256i *)(const void *)(p + 32 * h));
    __m256i lower = _mm256_sub_epi8(_mm256_or_si256(x, _mm256_set1_epi8(0x20)), _mm256_set1_epi8('a'));
/* bits of the bytes whose (value - lo) is at most n, unsigned; of the bytes equal to c */
#define BITS(v) ((uint64_t)(uint32_t)_mm256_movemask_epi8(v) << (32 * h))
#define AT_MOST(v, n) BITS(_mm256_cmpeq_epi8(_mm256_min_epu8((v), _mm256_set1_epi8(n)), (v)))
#define EQ(k, c) \
  if (need & 1u << k) m[k] |= BITS(_mm256_cmpeq_epi8(x, _mm256_set1_epi8(c)));
    uint64_t digit = AT_MOST(_mm256_sub_epi8(x, _mm256_set1_epi8('0')), 9);
    m[M_DIGIT] |= digit;
    if (need & 1u << M_UPPER) m[M_UPPER] |= AT_MOST(_mm256_sub_epi8(x, _mm256_set1_epi8('A')), 25);
    if (need & 1u << M_ALNUM) m[M_ALNUM] |= digit | AT_MOST(lower, 25);
    if (need & 1u << M_HEX) m[M_HEX] |= digit | AT_MOST(lower, 5);
    GUARD_SINGLE_BYTE_CLASSES(EQ)
#undef EQ
#undef AT_MOST
#undef BITS
  }
  if (need & 1u << M_PATHC)
    m[M_PATHC] = m[M_ALNUM] | m[M_UNDERSCORE] | m[M_DOT] | m[M_TILDE] | m[M_SLASH] | m[M_DASH];
}
#endif

int guard_prefilter_force;

/* Masks of data[at, at + 64) by CLASSIFY; bytes at or beyond `length` are in no class. */
#define DEFINE_CLASSIFY_BLOCK(name, attributes, CLASSIFY)                                            \
  attributes void name(const char *data, size_t length, size_t at, uint32_t need, struct masks *m) { \
    unsigned char padded[64];                                                                        \
    if (at >= length) {                                                                              \
      memset(m, 0, sizeof *m);                                                                       \
      return;                                                                                        \
    }                                                                                                \
    const unsigned char *p = (const unsigned char *)data + at;                                       \
    if (length - at < 64) {                                                                          \
      memset(padded, 0, sizeof padded);                                                              \
      memcpy(padded, p, length - at);                                                                \
      p = padded;                                                                                    \
    }                                                                                                \
    CLASSIFY(p, need, m);                                                                            \
  }

DEFINE_CLASSIFY_BLOCK(classify_block_portable, static, classify_scalar)
#ifdef HAVE_AVX512BW
DEFINE_CLASSIFY_BLOCK(classify_block_avx512, AVX512 static inline __attribute__((always_inline)),
                      classify_avx512)
DEFINE_CLASSIFY_BLOCK(classify_block_avx2, AVX2 static inline __attribute__((always_inline)), classify_avx2)
#endif

/* Masks of the 64 positions of a step (`cur`) and of the 64 bytes after them (`next`). AT(k, s): class k at
 * position + s (0 <= s < 64), one funnel shift; WIDE(k): both as 128 bits, for the rarely reached chains. */
#define AT(k, s) ((s) ? (cur->m[k] >> (s) | next->m[k] << (64 - (s))) : cur->m[k])
#define WIDE(k) ((u128)cur->m[k] | (u128)next->m[k] << 64)
#define TOP(n) (~(uint64_t)0 << (64 - (n))) /* the last n positions */

/* Test the shapes at positions o..o+63; `before` is the class of byte o-1 (line start: newline). Each shape
 * first tests its cheapest part, so most steps cost a few instructions per shape. */
static inline __attribute__((always_inline)) void scan_step(const char *data, size_t length, size_t o,
                                                            const struct masks *cur, const struct masks *next,
                                                            uint32_t before, uint64_t valid, unsigned kinds,
                                                            const struct guard_path_literals *paths,
                                                            bool stream_start, guard_prefilter_hit_fn hit,
                                                            void *context) {
  const uint64_t D = cur->m[M_DIGIT];
  const uint64_t Dp = D << 1 | (before >> M_DIGIT & 1); /* a digit before the position */
  const uint64_t start = ~Dp & valid;                   /* positions that begin a digit run or are no digit */
  if (kinds & 1u << GUARD_TRIGGER_CARD) {
    uint64_t D4 = D & AT(M_DIGIT, 1) & AT(M_DIGIT, 2) & AT(M_DIGIT, 3) & start;
    if (D4) {
      uint64_t plain = D4 & AT(M_DIGIT, 4) & AT(M_DIGIT, 5) & AT(M_DIGIT, 6) & AT(M_DIGIT, 7);
      if (plain)
        plain &= AT(M_DIGIT, 8) & AT(M_DIGIT, 9) & AT(M_DIGIT, 10) & AT(M_DIGIT, 11) & AT(M_DIGIT, 12);
      EACH_BIT(plain, i) {
        if (plain_card(data, length, o + i)) hit(context, GUARD_TRIGGER_CARD, o + i, o + i + 1);
      }
      uint64_t grouped = D4 & (AT(M_SPACE, 4) | AT(M_DASH, 4));
      if (grouped) grouped &= AT(M_DIGIT, 5) & AT(M_DIGIT, 6) & AT(M_DIGIT, 7) & AT(M_DIGIT, 8);
      if (grouped) {
        /* 4-4-4-(1 to 4 digits, then no digit), or 4-6-(4 or 5 digits, then no digit) */
        uint64_t four = (AT(M_SPACE, 9) | AT(M_DASH, 9)) & AT(M_DIGIT, 10) & AT(M_DIGIT, 11) &
                        AT(M_DIGIT, 12) & AT(M_DIGIT, 13) & (AT(M_SPACE, 14) | AT(M_DASH, 14)) &
                        AT(M_DIGIT, 15) &
                        ~(AT(M_DIGIT, 16) & AT(M_DIGIT, 17) & AT(M_DIGIT, 18) & AT(M_DIGIT, 19));
        uint64_t six = AT(M_DIGIT, 9) & AT(M_DIGIT, 10) & (AT(M_SPACE, 11) | AT(M_DASH, 11)) &
                       AT(M_DIGIT, 12) & AT(M_DIGIT, 13) & AT(M_DIGIT, 14) & AT(M_DIGIT, 15) &
                       ~(AT(M_DIGIT, 16) & AT(M_DIGIT, 17));
        grouped &= four | six;
      }
      EACH_BIT(grouped, i) hit(context, GUARD_TRIGGER_CARD, o + i, o + i + 1);
    }
  }
  if (kinds & 1u << GUARD_TRIGGER_SSN) {
    uint64_t ssn = D & AT(M_DASH, 3) & AT(M_DIGIT, 2) & start;
    if (ssn)
      ssn &= AT(M_DIGIT, 1) & AT(M_DIGIT, 4) & AT(M_DIGIT, 5) & AT(M_DASH, 6) & AT(M_DIGIT, 7) &
             AT(M_DIGIT, 8) & AT(M_DIGIT, 9) & AT(M_DIGIT, 10);
    EACH_BIT(ssn, i) hit(context, GUARD_TRIGGER_SSN, o + i, o + i + 1);
  }
  if (kinds & 1u << GUARD_TRIGGER_PHONE) {
    /* E.164: a match is '+' and at least 10 digits, every byte a digit or one of " .-()". */
    uint64_t phone = 0;
    EACH_BIT(cur->m[M_PLUS] & AT(M_DIGIT, 1) & valid, i) { /* rare: the rest tested here */
      if (alnum_before(data, o + i)) continue;
      size_t k = 2;
      while (k <= 10 && o + i + k < length &&
             guard_byte_classes[(unsigned char)data[o + i + k]] & 1u << M_PHONE)
        k++;
      if (k > 10) phone |= (uint64_t)1 << i;
    }
    uint64_t paren = cur->m[M_LPAREN] & AT(M_DIGIT, 1);
    if (paren) paren &= AT(M_DIGIT, 2) & AT(M_DIGIT, 3);
    EACH_BIT(paren, i) { /* rare: its ')' tested here */
      if (o + i + 4 < length && data[o + i + 4] == ')') phone |= (uint64_t)1 << i;
    }
    uint64_t nanp = D & (AT(M_DOT, 3) | AT(M_DASH, 3)) & start;
    if (nanp)
      phone |= nanp & AT(M_DIGIT, 1) & AT(M_DIGIT, 2) & AT(M_DIGIT, 4) & AT(M_DIGIT, 5) & AT(M_DIGIT, 6) &
               (AT(M_DOT, 7) | AT(M_DASH, 7)) & AT(M_DIGIT, 8) & AT(M_DIGIT, 9) & AT(M_DIGIT, 10) &
               AT(M_DIGIT, 11);
    phone &= valid;
    EACH_BIT(phone, i) hit(context, GUARD_TRIGGER_PHONE, o + i, o + i + 1);
  }
  if (kinds & 1u << GUARD_TRIGGER_IBAN) {
    uint64_t iban = cur->m[M_UPPER] & AT(M_UPPER, 1) & valid;
    if (iban) iban &= AT(M_DIGIT, 2) & AT(M_DIGIT, 3);
    EACH_BIT(iban, i) { /* rare: its lookbehind tested here */
      if (!alnum_before(data, o + i)) hit(context, GUARD_TRIGGER_IBAN, o + i, o + i + 1);
    }
  }
  if (kinds & 1u << GUARD_TRIGGER_IP) {
    uint64_t v4 = 0, v6 = 0;
    /* IPv4: X = digit '.' digit at the last digit of an octet; three links 2-4 bytes apart. */
    /* Each level is first tested on 64 bits (positions whose links may lie past the 64 seen count as
     * linked), and only what survives is computed exactly on 128 bits. */
    uint64_t X = D & AT(M_DOT, 1) & AT(M_DIGIT, 2); /* not yet `valid`: later links may lie past it */
    if (X & valid) X &= X >> 2 | X >> 3 | X >> 4 | TOP(4);
    if (X & valid) X &= X >> 2 | X >> 3 | X >> 4 | TOP(8);
    if (X & valid) {
      u128 WD = WIDE(M_DIGIT);
      u128 X = WD & WIDE(M_DOT) >> 1 & WD >> 2;
      u128 Y = X & (X >> 2 | X >> 3 | X >> 4);
      v4 = (uint64_t)(Y & (Y >> 2 | Y >> 3 | Y >> 4)) & valid;
    }
    /* IPv6: "::", or Q = hex ':' hex links, four of them 2-5 bytes apart. */
    uint64_t pair = cur->m[M_COLON] & AT(M_COLON, 1) & valid;
    uint64_t Q1 = cur->m[M_HEX] & AT(M_COLON, 1) & AT(M_HEX, 2);
    for (int link = 1; link < 4 && (Q1 & valid); link++)
      Q1 &= Q1 >> 2 | Q1 >> 3 | Q1 >> 4 | Q1 >> 5 | TOP(5 * link);
    if (Q1 & valid) {
      u128 C = WIDE(M_COLON), H = WIDE(M_HEX);
      u128 Q = H & C >> 1 & H >> 2;
      for (int link = 1; link < 4 && ((uint64_t)Q & valid); link++) Q &= Q >> 2 | Q >> 3 | Q >> 4 | Q >> 5;
      v6 = (uint64_t)Q & valid;
    }
    /* How far before the shape the address may start: 2 digits (IPv4), 3 hex digits (IPv6 link), or the
     * groups before "::". */
    EACH_BIT(v4 | pair | v6, i) {
      size_t back = (pair >> i & 1) ? GUARD_PREFILTER_BACK : (v6 >> i & 1) ? 3 : 2;
      size_t p = o + i;
      hit(context, GUARD_TRIGGER_IP, p > back ? p - back : 0, p + 1);
    }
  }
  if (kinds & 1u << GUARD_TRIGGER_PATHS && paths) {
    /* A path start: '/' after no path character; both tested byte by byte. */
    EACH_BIT(cur->m[M_SLASH] & valid, i) {
      size_t p = o + i;
      if (p > 0 && guard_byte_classes[(unsigned char)data[p - 1]] >> M_PATHC & 1)
        continue; /* at 0: none before */
      if (path_literal_at(data, length, p, paths)) hit(context, GUARD_TRIGGER_PATHS, p, p + 1);
    }
  }
  if (kinds & 1u << GUARD_TRIGGER_EMAIL) {
    /* '@' is rare: a local-part character before it and a letter or digit after it, tested here (before the
     * data, at a stream's start nothing; in a window that starts here, unknown: a candidate). A match starts
     * at most 64 + 2 bytes before the byte after the '@', as vectorscan's [A-Za-z0-9._%+-]@[A-Za-z0-9] end
     * reported it. */
    EACH_BIT(cur->m[M_AT] & valid, i) {
      size_t p = o + i;
      bool local = p > 0 ? (guard_byte_classes[(unsigned char)data[p - 1]] >> M_LOCAL & 1) : !stream_start;
      if (local && p + 1 < length && guard_byte_classes[(unsigned char)data[p + 1]] >> M_ALNUM & 1) {
        size_t end = p + 2, back = GUARD_PREFILTER_EMAIL_BACK;
        hit(context, GUARD_TRIGGER_EMAIL, end > back ? end - back : 0, end);
      }
    }
  }
  if (kinds & 1u << GUARD_TRIGGER_HOME) {
    EACH_BIT(cur->m[M_TILDE] & valid, i) { /* '~' is rare: its next byte is tested here */
      size_t p = o + i;
      if (p + 1 < length && guard_byte_classes[(unsigned char)data[p + 1]] &
                                (1u << M_ALNUM | 1u << M_UNDERSCORE | 1u << M_SLASH))
        hit(context, GUARD_TRIGGER_HOME, p, p + 1);
    }
  }
  if (kinds & 1u << GUARD_TRIGGER_ENV) {
    /* Line starts (after a newline) with a name character; adding them to the name-character mask carries
     * through each name and lands on the byte after it. */
    uint64_t S = (cur->m[M_NEWLINE] << 1 | (before >> M_NEWLINE & 1)) &
                 (cur->m[M_UPPER] | cur->m[M_UNDERSCORE]) & valid;
    if (S)
      env_name_ends(S, WIDE(M_UPPER) | WIDE(M_DIGIT) | WIDE(M_UNDERSCORE), WIDE(M_EQUALS), o, hit, context);
  }
}

/* The block loop, once per classifier so that the AVX-512 one is inlined with its constants hoisted, and once
 * per class's set of shapes (the sets below) so that only the masks those shapes read are computed and no
 * per-block test of which shapes to run remains; any other set runs the generic loop (same candidates). */
#define SCAN_BLOCKS(CLASSIFY, KINDS)                                                                  \
  do {                                                                                                \
    const uint32_t need = classes_needed(KINDS);                                                      \
    struct masks blocks[2];                                                                           \
    struct masks *cur = &blocks[0], *next = &blocks[1], *swap;                                        \
    CLASSIFY(data, length, from, need, cur);                                                          \
    uint32_t before = from > 0       ? guard_byte_classes[(unsigned char)data[from - 1]] & need       \
                      : stream_start ? 1u << M_NEWLINE                                                \
                                     : 0;                                                             \
    for (size_t o = from; o < limit; o += 64) {                                                       \
      CLASSIFY(data, length, o + 64, need, next);                                                     \
      uint64_t valid = limit - o >= 64 ? ~(uint64_t)0 : ((uint64_t)1 << (limit - o)) - 1;             \
      scan_step(data, length, o, cur, next, before, valid, KINDS, paths, stream_start, hit, context); \
      before = (uint32_t)(cur->m[M_DIGIT] >> 63) << M_DIGIT;                                          \
      if (need & 1u << M_ALNUM) before |= (uint32_t)(cur->m[M_ALNUM] >> 63) << M_ALNUM;               \
      if (need & 1u << M_NEWLINE) before |= (uint32_t)(cur->m[M_NEWLINE] >> 63) << M_NEWLINE;         \
      if (need & 1u << M_PATHC) before |= (uint32_t)(cur->m[M_PATHC] >> 63) << M_PATHC;               \
      swap = cur; /* no struct copy: stores of 8-byte masks reloaded as vectors stall */              \
      cur = next;                                                                                     \
      next = swap;                                                                                    \
    }                                                                                                 \
  } while (0)

#define DEFINE_SCAN(name, attributes, CLASSIFY)                                                    \
  attributes void name(const char *data, size_t length, size_t from, size_t limit, unsigned kinds, \
                       const struct guard_path_literals *paths, bool stream_start,                 \
                       guard_prefilter_hit_fn hit, void *context) {                                \
    if (kinds == KINDS_SENSITIVE && guard_prefilter_force < 3)                                     \
      SCAN_BLOCKS(CLASSIFY, KINDS_SENSITIVE);                                                      \
    else if (kinds == KINDS_PII && guard_prefilter_force < 3)                                      \
      SCAN_BLOCKS(CLASSIFY, KINDS_PII);                                                            \
    else                                                                                           \
      SCAN_BLOCKS(CLASSIFY, kinds);                                                                \
  }

DEFINE_SCAN(scan_portable, static, classify_block_portable)
#ifdef HAVE_AVX512BW
DEFINE_SCAN(guard_prefilter_blocks_avx512, AVX512, classify_block_avx512)
DEFINE_SCAN(scan_avx2, AVX2 static, classify_block_avx2)
#endif

void guard_prefilter_scan(const char *data, size_t length, size_t from, size_t limit, unsigned kinds,
                          const struct guard_path_literals *paths, bool stream_start,
                          guard_prefilter_hit_fn hit, void *context) {
  if (from >= limit || kinds == 0) return;
#ifdef HAVE_AVX512BW
  if (have_vbmi2 && guard_prefilter_force == 0) {
    guard_prefilter_superblocks(data, length, from, limit, kinds, paths, stream_start, hit, context);
    return;
  }
  if (have_avx512 && (guard_prefilter_force < 1 || guard_prefilter_force == 3)) {
    guard_prefilter_blocks_avx512(data, length, from, limit, kinds, paths, stream_start, hit, context);
    return;
  }
  if (have_avx2 && guard_prefilter_force < 2) {
    scan_avx2(data, length, from, limit, kinds, paths, stream_start, hit, context);
    return;
  }
#endif
  scan_portable(data, length, from, limit, kinds, paths, stream_start, hit, context);
}
