/* The prefilter's shapes (prefilter.c) for eight 64-byte blocks at once, on CPUs with AVX-512 VBMI and VBMI2.
 *
 * Each byte class's masks of the 8 blocks of a 512-byte superblock are one vector (lane j = block j); the
 * masks of the block after each block are that vector moved one lane down, its last lane the next
 * superblock's first block; the block before, one lane up. AT(k, s) is then one funnel shift (vpshrdq) for
 * the 8 blocks, and each shape is tested for all of them at once (its rarer tails, the grouped card's groups,
 * E.164's digits, the IP links after the first two, only when some lane needs them). The byte-by-byte tests
 * scan_step leaves to its rare anchors (the letter-or-digit lookbehind of '+' and IBANs, the E.164 characters
 * after '+', the ')' of "(999)", the path character before '/', the byte after '~' and '@'), the card's
 * first digit and issued run lengths, and whether a path literal continues a '/' with the next byte (a
 * 128-entry table per guard, one permute per block) are vector tests here too, so that only the lanes with a
 * candidate left go on to the per-bit follow-ups (the card check, the path literals, the e-mail lookbehind,
 * the reports): on the benchmark's program output 1.3% of SENSITIVE's and 5.8% of PII's superblocks. The next
 * superblock is classified before the shapes of this one are tested, so its mask stores are done when they
 * are loaded as vectors. Candidates are exactly scan_step's (unit tests `superblock_lanes_agree`,
 * `class_sets_agree`, `classifiers_agree`). */
#include "supervisor/guards/prefilter.h"

#ifdef HAVE_AVX512BW
#define AVX512V __attribute__((target("avx512f,avx512bw,avx512vbmi,avx512vbmi2")))
enum { SUPER = 8 * 64 };

struct super {
  _Alignas(64) uint64_t m[M_COUNT][8];
};

/* The classes the vector shapes read: the block loop's, and those of the tests scan_step makes byte by byte.
 */
static inline __attribute__((always_inline)) uint32_t super_classes_needed(unsigned kinds) {
  uint32_t need = classes_needed(kinds);
  if (kinds & 1u << GUARD_TRIGGER_PHONE) need |= 1u << M_SPACE | 1u << M_RPAREN | 1u << M_ALNUM;
  if (kinds & (1u << GUARD_TRIGGER_IBAN | 1u << GUARD_TRIGGER_EMAIL)) need |= 1u << M_ALNUM;
  if (kinds & 1u << GUARD_TRIGGER_HOME) need |= 1u << M_ALNUM | 1u << M_UNDERSCORE | 1u << M_SLASH;
  if (kinds & 1u << GUARD_TRIGGER_CARD) need |= 1u << M_D26;
  if (kinds & 1u << GUARD_TRIGGER_PATHS)
    need |= 1u << M_ALNUM | 1u << M_UNDERSCORE | 1u << M_DOT | 1u << M_TILDE | 1u << M_SLASH | 1u << M_DASH |
            1u << M_PATHFIRST;
  return need;
}

/* Masks of the 8 blocks at data[at, at + 512) (bytes beyond `length` in no class), stored from the compares.
 */
AVX512V static inline __attribute__((always_inline)) void classify_super(
    const char *data, size_t length, size_t at, uint32_t need, const struct guard_path_literals *paths,
    struct super *s) {
  const __m512i c0 = _mm512_set1_epi8('0'), c9 = _mm512_set1_epi8(9), cA = _mm512_set1_epi8('A');
  const __m512i c25 = _mm512_set1_epi8(25), c5 = _mm512_set1_epi8(5), ca = _mm512_set1_epi8('a');
  const __m512i c20 = _mm512_set1_epi8(0x20), c2 = _mm512_set1_epi8('2'), c4 = _mm512_set1_epi8(4);
  /* the bytes that may follow a literal's '/': a 128-entry table, one permute per block */
  const bool any_first = paths == NULL || paths->any_first;
  const __m512i first_low = any_first ? c0 : _mm512_loadu_si512((const void *)paths->first);
  const __m512i first_high = any_first ? c0 : _mm512_loadu_si512((const void *)(paths->first + 64));
#pragma GCC unroll 8
  for (unsigned b = 0; b < 8; b++) {
    size_t o = at + 64 * b;
    __m512i x;
    if (__builtin_expect(o + 64 <= length, 1))
      x = _mm512_loadu_si512((const void *)(data + o));
    else if (o < length)
      x = _mm512_maskz_loadu_epi8(~(uint64_t)0 >> (64 - (length - o)), data + o);
    else
      x = _mm512_setzero_si512();
    uint64_t digit = _mm512_cmple_epu8_mask(_mm512_sub_epi8(x, c0), c9);
    s->m[M_DIGIT][b] = digit;
    __m512i lower = _mm512_sub_epi8(_mm512_or_si512(x, c20), ca);
    if (need & 1u << M_UPPER) s->m[M_UPPER][b] = _mm512_cmple_epu8_mask(_mm512_sub_epi8(x, cA), c25);
    if (need & 1u << M_ALNUM) s->m[M_ALNUM][b] = digit | _mm512_cmple_epu8_mask(lower, c25);
    if (need & 1u << M_HEX) s->m[M_HEX][b] = digit | _mm512_cmple_epu8_mask(lower, c5);
    if (need & 1u << M_D26) s->m[M_D26][b] = _mm512_cmple_epu8_mask(_mm512_sub_epi8(x, c2), c4);
    if (need & 1u << M_PATHFIRST) {
      __m512i first = _mm512_permutex2var_epi8(first_low, x, first_high);
      s->m[M_PATHFIRST][b] =
          any_first ? ~(uint64_t)0 : _mm512_test_epi8_mask(first, first) & ~_mm512_movepi8_mask(x);
    }
#define EQ(k, c) \
  if (need & 1u << k) s->m[k][b] = _mm512_cmpeq_epi8_mask(x, _mm512_set1_epi8(c));
    GUARD_SINGLE_BYTE_CLASSES(EQ)
#undef EQ
  }
}

/* Per-lane candidates of a superblock, for the follow-ups. `plain` still needs the card check, `slash` the
 * path literals, `at` the e-mail lookbehind; `env` is a line start whose 128 bytes hold a name's end. */
struct lanes {
  _Alignas(64) uint64_t plain[8], grouped[8], ssn[8], phone[8], iban[8], v4[8], pair[8], v6[8], slash[8],
      at[8], tilde[8], env[8], name_lo[8], name_hi[8], equals_lo[8], equals_hi[8];
};

/* The last bits of the previous superblock's masks that the lookbehinds read (lane 7 used). */
struct previous {
  __m512i digit, newline, alnum, pathc;
};

/* Lane j's reports (superblock at o), kind by kind as scan_step makes them. */
static inline __attribute__((always_inline)) void lane_follow_up(
    const char *data, size_t length, size_t o, const struct lanes *r, unsigned j, unsigned kinds,
    const struct guard_path_literals *paths, bool stream_start, guard_prefilter_hit_fn hit, void *context) {
  o += 64 * (size_t)j;
  if (kinds & 1u << GUARD_TRIGGER_CARD) {
    EACH_BIT(r->plain[j], i) {
      if (plain_card(data, length, o + i)) hit(context, GUARD_TRIGGER_CARD, o + i, o + i + 1);
    }
    EACH_BIT(r->grouped[j], i) hit(context, GUARD_TRIGGER_CARD, o + i, o + i + 1);
  }
  if (kinds & 1u << GUARD_TRIGGER_SSN)
    EACH_BIT(r->ssn[j], i) hit(context, GUARD_TRIGGER_SSN, o + i, o + i + 1);
  if (kinds & 1u << GUARD_TRIGGER_PHONE)
    EACH_BIT(r->phone[j], i) hit(context, GUARD_TRIGGER_PHONE, o + i, o + i + 1);
  if (kinds & 1u << GUARD_TRIGGER_IBAN)
    EACH_BIT(r->iban[j], i) hit(context, GUARD_TRIGGER_IBAN, o + i, o + i + 1);
  if (kinds & 1u << GUARD_TRIGGER_IP) {
    uint64_t pair = r->pair[j], v6 = r->v6[j];
    EACH_BIT(r->v4[j] | pair | v6, i) {
      size_t back = (pair >> i & 1) ? GUARD_PREFILTER_BACK : (v6 >> i & 1) ? 3 : 2;
      size_t p = o + i;
      hit(context, GUARD_TRIGGER_IP, p > back ? p - back : 0, p + 1);
    }
  }
  if (kinds & 1u << GUARD_TRIGGER_PATHS && paths) {
    EACH_BIT(r->slash[j], i) {
      if (path_literal_at(data, length, o + i, paths)) hit(context, GUARD_TRIGGER_PATHS, o + i, o + i + 1);
    }
  }
  if (kinds & 1u << GUARD_TRIGGER_EMAIL) {
    EACH_BIT(r->at[j], i) {
      size_t p = o + i;
      if (p > 0 ? (guard_byte_classes[(unsigned char)data[p - 1]] >> M_LOCAL & 1) : !stream_start) {
        size_t end = p + 2, back = GUARD_PREFILTER_EMAIL_BACK;
        hit(context, GUARD_TRIGGER_EMAIL, end > back ? end - back : 0, end);
      }
    }
  }
  if (kinds & 1u << GUARD_TRIGGER_HOME)
    EACH_BIT(r->tilde[j], i) hit(context, GUARD_TRIGGER_HOME, o + i, o + i + 1);
  if (kinds & 1u << GUARD_TRIGGER_ENV && r->env[j])
    env_name_ends(r->env[j], (u128)r->name_lo[j] | (u128)r->name_hi[j] << 64,
                  (u128)r->equals_lo[j] | (u128)r->equals_hi[j] << 64, o, hit, context);
}

/* Test the shapes of the superblock at o (masks `cs`, the next superblock's `ns`). */
AVX512V static inline __attribute__((always_inline)) void super_step(
    const char *data, size_t length, size_t o, const struct super *cs, const struct super *ns,
    struct previous *prev, unsigned kinds, const struct guard_path_literals *paths, bool stream_start,
    guard_prefilter_hit_fn hit, void *context) {
#define CUR(k) _mm512_load_si512((const void *)cs->m[k])
/* the next superblock's first block by an 8-byte load (its masks were just stored: a vector load would wait)
 */
#define NEXT(k) _mm512_alignr_epi64(_mm512_set1_epi64((long long)ns->m[k][0]), CUR(k), 1)
#define VAT(c, n, s) ((s) ? _mm512_shrdi_epi64((c), (n), (s)) : (c))
/* class c at the byte before each position: the previous lane's (or superblock's) top bit into bit 0 */
#define BEFORE(c, p) _mm512_shldi_epi64((c), _mm512_alignr_epi64((c), (p), 7), 1)
#define AND(a, b) _mm512_and_si512((a), (b))
#define OR(a, b) _mm512_or_si512((a), (b))
#define ANDN(a, b) _mm512_andnot_si512((a), (b)) /* ~a & b */
  const __m512i zero = _mm512_setzero_si512(), ones = _mm512_set1_epi64(-1);
  const __m512i D = CUR(M_DIGIT), nD = NEXT(M_DIGIT);
#define VD(s) VAT(D, nD, s)
  const __m512i start = ANDN(BEFORE(D, prev->digit), ones); /* positions that begin a digit run or no digit */
  __m512i A = zero, nA = zero, no_alnum_before = ones;
  if (kinds & (1u << GUARD_TRIGGER_PHONE | 1u << GUARD_TRIGGER_IBAN | 1u << GUARD_TRIGGER_EMAIL |
               1u << GUARD_TRIGGER_HOME | 1u << GUARD_TRIGGER_PATHS)) {
    A = CUR(M_ALNUM);
    nA = NEXT(M_ALNUM);
    no_alnum_before = ANDN(BEFORE(A, prev->alnum), ones);
    prev->alnum = A;
  }
  __m512i any = zero;
  __m512i plain = zero, grouped = zero, ssn = zero, phone = zero, iban = zero, v4 = zero, pair = zero;
  __m512i v6 = zero, slash = zero, at = zero, tilde = zero, env = zero;
  __m512i name_lo = zero, name_hi = zero, equals_lo = zero, equals_hi = zero;
  if (kinds & (1u << GUARD_TRIGGER_CARD | 1u << GUARD_TRIGGER_SSN)) {
    const __m512i dash = CUR(M_DASH), ndash = NEXT(M_DASH);
    if (kinds & 1u << GUARD_TRIGGER_SSN) {
      ssn = AND(AND(AND(D, VD(1)), AND(VD(2), VAT(dash, ndash, 3))), AND(AND(VD(4), VD(5)), start));
      ssn = AND(ssn, AND(AND(VAT(dash, ndash, 6), VD(7)), AND(AND(VD(8), VD(9)), VD(10))));
      any = OR(any, ssn);
    }
    if (kinds & 1u << GUARD_TRIGGER_CARD) {
      const __m512i sep = OR(CUR(M_SPACE), dash), nsep = OR(NEXT(M_SPACE), ndash);
#define VSEP(s) VAT(sep, nsep, s)
      __m512i D4 = AND(AND(D, VD(1)), AND(AND(VD(2), VD(3)), start));
      plain = AND(AND(AND(D4, VD(4)), AND(VD(5), VD(6))), AND(AND(VD(7), VD(8)), VD(9)));
      plain = AND(plain, AND(AND(VD(10), VD(11)), VD(12)));
      /* a run of 13, 14, 15, 16 or 19 digits (the lengths plain_card accepts): not 17, 18 or 20 and more */
      plain = AND(plain, OR(ANDN(AND(AND(VD(13), VD(14)), AND(VD(15), VD(16))), ones),
                            ANDN(VD(19), AND(VD(17), VD(18)))));
      plain = AND(plain, CUR(M_D26)); /* an issuer's first digit */
      __m512i g = AND(AND(D4, VSEP(4)), AND(AND(VD(5), VD(6)), AND(VD(7), VD(8))));
      if (_mm512_test_epi64_mask(g, g)) { /* "9999 9999" is rare: the groups after it only then */
        __m512i four =
            AND(AND(AND(VSEP(9), VD(10)), AND(VD(11), VD(12))), AND(AND(VD(13), VSEP(14)), VD(15)));
        four = ANDN(AND(AND(VD(16), VD(17)), AND(VD(18), VD(19))), four);
        __m512i six = AND(AND(AND(VD(9), VD(10)), AND(VSEP(11), VD(12))), AND(AND(VD(13), VD(14)), VD(15)));
        six = ANDN(AND(VD(16), VD(17)), six);
        grouped = AND(g, OR(four, six));
      }
      any = OR(any, OR(plain, grouped));
#undef VSEP
    }
  }
  if (kinds & 1u << GUARD_TRIGGER_PHONE) {
    const __m512i dot = CUR(M_DOT), dash = CUR(M_DASH), lparen = CUR(M_LPAREN), rparen = CUR(M_RPAREN);
    const __m512i ndot = NEXT(M_DOT), ndash = NEXT(M_DASH);
    /* E.164: '+' after no letter or digit, a digit, then 9 digits or " .-()" (tested only where "+9" is) */
    __m512i plus = AND(AND(CUR(M_PLUS), VD(1)), no_alnum_before);
    if (_mm512_test_epi64_mask(plus, plus)) {
      const __m512i ph = OR(OR(OR(D, CUR(M_SPACE)), OR(dot, dash)), OR(lparen, rparen));
      const __m512i nph = OR(OR(OR(nD, NEXT(M_SPACE)), OR(ndot, ndash)), OR(NEXT(M_LPAREN), NEXT(M_RPAREN)));
#define VPH(s) VAT(ph, nph, s)
      plus = AND(AND(plus, AND(VPH(2), VPH(3))), AND(AND(VPH(4), VPH(5)), VPH(6)));
      plus = AND(plus, AND(AND(VPH(7), VPH(8)), AND(VPH(9), VPH(10))));
#undef VPH
    }
    /* (999) */
    __m512i paren = AND(AND(lparen, VD(1)), AND(AND(VD(2), VD(3)), VAT(rparen, NEXT(M_RPAREN), 4)));
    /* NANP 999-999-9999 or 999.999.9999 */
    const __m512i dd = OR(dot, dash), ndd = OR(ndot, ndash);
#define VDD(s) VAT(dd, ndd, s)
    __m512i nanp = AND(AND(AND(D, VDD(3)), AND(start, VD(1))), AND(AND(VD(2), VD(4)), AND(VD(5), VD(6))));
    nanp = AND(nanp, AND(AND(VDD(7), VD(8)), AND(AND(VD(9), VD(10)), VD(11))));
#undef VDD
    phone = OR(OR(plus, paren), nanp);
    any = OR(any, phone);
  }
  if (kinds & 1u << GUARD_TRIGGER_IBAN) {
    const __m512i U = CUR(M_UPPER), nU = NEXT(M_UPPER);
    iban = AND(AND(AND(U, VAT(U, nU, 1)), AND(VD(2), VD(3))), no_alnum_before);
    any = OR(any, iban);
  }
  if (kinds & 1u << GUARD_TRIGGER_IP) {
    /* IPv4, exactly as scan_step's 128-bit chain: links X at the 64 positions and at the 64 after them (those
     * from the next block's masks alone: the chain reads at most 10 bytes past a position). */
    const __m512i dot = CUR(M_DOT), ndot = NEXT(M_DOT);
    __m512i X = AND(AND(D, VAT(dot, ndot, 1)), VD(2));
    __m512i Xh = AND(AND(nD, _mm512_srli_epi64(ndot, 1)), _mm512_srli_epi64(nD, 2));
#define LINK3(L, H, a, b, c) OR(OR(VAT(L, H, a), VAT(L, H, b)), VAT(L, H, c))
#define LINK3H(H, a, b, c) OR(OR(_mm512_srli_epi64(H, a), _mm512_srli_epi64(H, b)), _mm512_srli_epi64(H, c))
    /* (each level only where the last left a link: "1.5", "3.11.4" are common, four-part chains rare) */
    __m512i Y = AND(X, LINK3(X, Xh, 2, 3, 4));
    if (_mm512_test_epi64_mask(Y, Y)) {
      __m512i Yh = AND(Xh, LINK3H(Xh, 2, 3, 4));
      v4 = AND(Y, LINK3(Y, Yh, 2, 3, 4));
    }
    /* IPv6: "::", or four hex:hex links 2-5 bytes apart */
    const __m512i colon = CUR(M_COLON), ncolon = NEXT(M_COLON), H = CUR(M_HEX), nH = NEXT(M_HEX);
    pair = AND(colon, VAT(colon, ncolon, 1));
    __m512i Q = AND(AND(H, VAT(colon, ncolon, 1)), VAT(H, nH, 2));
    __m512i Qh = AND(AND(nH, _mm512_srli_epi64(ncolon, 1)), _mm512_srli_epi64(nH, 2));
    for (int link = 1; link < 4 && _mm512_test_epi64_mask(Q, Q); link++) {
      __m512i q = AND(Q, OR(LINK3(Q, Qh, 2, 3, 4), VAT(Q, Qh, 5)));
      Qh = AND(Qh, OR(LINK3H(Qh, 2, 3, 4), _mm512_srli_epi64(Qh, 5)));
      Q = q;
    }
#undef LINK3
#undef LINK3H
    v6 = Q;
    any = OR(any, OR(OR(v4, pair), v6));
  }
  if (kinds & 1u << GUARD_TRIGGER_PATHS && paths) {
    /* a path start: '/' after no path character [A-Za-z0-9_.~/-], before a byte a literal continues with */
    const __m512i S = CUR(M_SLASH);
    const __m512i pathc = OR(OR(OR(A, CUR(M_UNDERSCORE)), OR(CUR(M_DOT), CUR(M_TILDE))), OR(S, CUR(M_DASH)));
    slash = AND(ANDN(BEFORE(pathc, prev->pathc), S), VAT(CUR(M_PATHFIRST), NEXT(M_PATHFIRST), 1));
    prev->pathc = pathc;
    any = OR(any, slash);
  }
  if (kinds & 1u << GUARD_TRIGGER_EMAIL) {
    at = AND(CUR(M_AT), VAT(A, nA, 1)); /* '@' before a letter or digit */
    any = OR(any, at);
  }
  if (kinds & 1u << GUARD_TRIGGER_HOME) {
    /* '~' before a letter, digit, '_' or '/' */
    const __m512i follow = OR(OR(A, CUR(M_UNDERSCORE)), CUR(M_SLASH));
    const __m512i nfollow = OR(OR(nA, NEXT(M_UNDERSCORE)), NEXT(M_SLASH));
    tilde = AND(CUR(M_TILDE), VAT(follow, nfollow, 1));
    any = OR(any, tilde);
  }
  if (kinds & 1u << GUARD_TRIGGER_ENV) {
    /* line starts with a name character; lanes where a name run ends on '=' or runs past the 128 bytes */
    const __m512i NL = CUR(M_NEWLINE), U = CUR(M_UPPER), US = CUR(M_UNDERSCORE);
    __m512i S = AND(BEFORE(NL, prev->newline), OR(U, US));
    name_lo = OR(OR(U, D), US);
    name_hi = OR(OR(NEXT(M_UPPER), nD), NEXT(M_UNDERSCORE));
    equals_lo = CUR(M_EQUALS);
    equals_hi = NEXT(M_EQUALS);
    __m512i sum_lo = _mm512_add_epi64(name_lo, S);
    __mmask8 carry = _mm512_cmplt_epu64_mask(sum_lo, name_lo);
    __m512i sum_hi = _mm512_mask_add_epi64(name_hi, carry, name_hi, _mm512_set1_epi64(1));
    __mmask8 wrapped = _mm512_cmplt_epu64_mask(sum_hi, name_hi);
    __m512i ends = OR(AND(ANDN(name_lo, sum_lo), equals_lo), AND(ANDN(name_hi, sum_hi), equals_hi));
    __mmask8 lanes = _mm512_test_epi64_mask(ends, ends) | wrapped;
    env = _mm512_maskz_mov_epi64(lanes, S);
    any = OR(any, env);
    prev->newline = NL;
  }
  prev->digit = D;
  __mmask8 lanes = _mm512_test_epi64_mask(any, any);
  if (__builtin_expect(lanes == 0, 1)) return;
  struct lanes r;
#define STORE(field) _mm512_store_si512((void *)r.field, field)
  if (kinds & 1u << GUARD_TRIGGER_CARD) {
    STORE(plain);
    STORE(grouped);
  }
  if (kinds & 1u << GUARD_TRIGGER_SSN) STORE(ssn);
  if (kinds & 1u << GUARD_TRIGGER_PHONE) STORE(phone);
  if (kinds & 1u << GUARD_TRIGGER_IBAN) STORE(iban);
  if (kinds & 1u << GUARD_TRIGGER_IP) {
    STORE(v4);
    STORE(pair);
    STORE(v6);
  }
  if (kinds & 1u << GUARD_TRIGGER_PATHS) STORE(slash);
  if (kinds & 1u << GUARD_TRIGGER_EMAIL) STORE(at);
  if (kinds & 1u << GUARD_TRIGGER_HOME) STORE(tilde);
  if (kinds & 1u << GUARD_TRIGGER_ENV) {
    STORE(env);
    STORE(name_lo);
    STORE(name_hi);
    STORE(equals_lo);
    STORE(equals_hi);
  }
#undef STORE
  for (unsigned rest = lanes; rest; rest &= rest - 1)
    lane_follow_up(data, length, o, &r, (unsigned)__builtin_ctz(rest), kinds, paths, stream_start, hit,
                   context);
#undef CUR
#undef NEXT
#undef VAT
#undef VD
#undef BEFORE
#undef AND
#undef OR
#undef ANDN
}

/* Superblocks while 512 positions remain; o is left at the first position not scanned. */
#define SCAN_SUPERS(KINDS)                                                                                \
  do {                                                                                                    \
    const uint32_t need = super_classes_needed(KINDS);                                                    \
    struct super supers[2];                                                                               \
    struct super *cs = &supers[0], *ns = &supers[1], *swap;                                               \
    uint32_t before = from > 0       ? guard_byte_classes[(unsigned char)data[from - 1]]                  \
                      : stream_start ? 1u << M_NEWLINE                                                    \
                                     : 0;                                                                 \
    struct previous prev;                                                                                 \
    prev.digit = _mm512_maskz_set1_epi64(0x80, (long long)((uint64_t)(before >> M_DIGIT & 1) << 63));     \
    prev.newline = _mm512_maskz_set1_epi64(0x80, (long long)((uint64_t)(before >> M_NEWLINE & 1) << 63)); \
    prev.alnum = _mm512_maskz_set1_epi64(0x80, (long long)((uint64_t)(before >> M_ALNUM & 1) << 63));     \
    prev.pathc = _mm512_maskz_set1_epi64(0x80, (long long)((uint64_t)(before >> M_PATHC & 1) << 63));     \
    classify_super(data, length, o, need, paths, cs);                                                     \
    for (; limit - o >= SUPER; o += SUPER) {                                                              \
      classify_super(data, length, o + SUPER, need, paths, ns);                                           \
      super_step(data, length, o, cs, ns, &prev, KINDS, paths, stream_start, hit, context);               \
      swap = cs;                                                                                          \
      cs = ns;                                                                                            \
      ns = swap;                                                                                          \
    }                                                                                                     \
  } while (0)

AVX512V void guard_prefilter_superblocks(const char *data, size_t length, size_t from, size_t limit,
                                         unsigned kinds, const struct guard_path_literals *paths,
                                         bool stream_start, guard_prefilter_hit_fn hit, void *context) {
  size_t o = from;
  if (limit - from >= SUPER) {
    if (kinds == KINDS_SENSITIVE)
      SCAN_SUPERS(KINDS_SENSITIVE);
    else if (kinds == KINDS_PII)
      SCAN_SUPERS(KINDS_PII);
    else
      SCAN_SUPERS(kinds);
  }
  if (o < limit)
    guard_prefilter_blocks_avx512(data, length, o, limit, kinds, paths, stream_start, hit, context);
}
#endif
