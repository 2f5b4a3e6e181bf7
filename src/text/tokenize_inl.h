/* Lexical tokenizer shared by BM25, the hash embedder and the reranker.
 *
 * Idea: retrieval over evicted spans and code needs exact matches on things a word
 * tokenizer mangles: numbers ("481729", "90210-ALPHA", "2024-01-15"), identifiers
 * ("parseHTTPHeader", "MAX_TEXT_LEN", "src/index/bm25.c"). So a *raw token* is a run of
 * word characters (letters, digits, combining marks, '_') that may contain runs of the
 * joiners - . : / (and ',' between two digits) as long as a word character follows.
 * Every raw token is emitted whole (case-folded), and when it is a compound it is also
 * split into parts on joiners, underscores, lower→Upper and UPPER→Upperlower changes and
 * letter↔digit changes:
 *
 *   "parseHTTPHeader" → IDENT parsehttpheader, PART parse, PART http, PART header
 *   "90210-ALPHA"     → IDENT 90210-alpha, PART 90210, PART alpha
 *   "481729"          → NUMBER 481729          "3.14" → NUMBER 3.14 (no parts)
 *   "2024-01-15"      → NUMBER 2024-01-15, PART 2024, PART 01, PART 15
 *   "deployment."     → WORD deployment        (a trailing joiner is not part of a token)
 *
 * Unicode: classes come from utf8proc categories (L* letters, Lu/Lt upper case, N*
 * digits, M* marks continue a token); non-ASCII text is case-folded with utf8proc's full
 * case folding (ß → ss). Han ideographs and kana are emitted one character per token
 * (no word boundaries in those scripts; unigrams are the usual lexical fallback).
 * ASCII takes a table-driven fast path (this runs on every ingested byte: hot).
 *
 * Known limits: apostrophes split ("nova's" → nova, s); a token longer than LCX_TOK_MAX
 * folded bytes is cut into pieces; at most 32 parts per compound are emitted. */
#ifndef LCX_TEXT_TOKENIZE_INL_H
#define LCX_TEXT_TOKENIZE_INL_H
/* The tokenizer as an inline function (internal): lcx_tokenize (tokenize.c) is this with
 * the callback called through a pointer; the ingest path (src/index/index.c
 * lcx__prep_embed) instantiates it with its per-token work inlined, which saves an
 * indirect call, a prologue/epilogue and the spills around it per token (~15% of the
 * per-span instructions of an ingest worker). Same code, same tokens (test_embed checks
 * the instantiation against lcx_tokenize on real text and random strings). */
#include "longctx/lcx.h"
#include "text/text.h"
#include <immintrin.h>
#include <string.h>
#include <utf8proc.h>

enum { C_SEP = 0, C_LOWER, C_UPPER, C_DIGIT, C_UNDER, C_JOIN, C_COMMA, C_CJK };

#define MAX_CP 128          /* codepoints per raw token piece */
#define MAX_PARTS 32

/* ASCII class table: letters, digits, '_', joiners (GNU range designators). */
static const unsigned char lcx__k_ascii[128] = {
    ['a' ... 'z'] = C_LOWER, ['A' ... 'Z'] = C_UPPER, ['0' ... '9'] = C_DIGIT, ['_'] = C_UNDER,
    ['-'] = C_JOIN, ['.'] = C_JOIN, [':'] = C_JOIN, ['/'] = C_JOIN, [','] = C_COMMA,
};

/* The class of the byte after a fast-path word: ASCII classes, and C_JOIN for any byte
 * ≥ 0x80 (not a plain end: the general path decides). 256 entries, no range test. */
static const unsigned char lcx__k_next[256] = {
    ['a' ... 'z'] = C_LOWER, ['A' ... 'Z'] = C_UPPER, ['0' ... '9'] = C_DIGIT, ['_'] = C_UNDER,
    ['-'] = C_JOIN, ['.'] = C_JOIN, [':'] = C_JOIN, ['/'] = C_JOIN, [','] = C_COMMA, [0x80 ... 0xff] = C_JOIN,
};

static inline unsigned char ascii_class(unsigned char c) { return lcx__k_ascii[c & 0x7f]; }

static inline int is_cjk(int32_t cp)
{
    return (cp >= 0x3040 && cp <= 0x30FF) || (cp >= 0x3400 && cp <= 0x4DBF) ||
           (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0xF900 && cp <= 0xFAFF) ||
           (cp >= 0x20000 && cp <= 0x2FA1F);
}

static inline unsigned char uni_class(int32_t cp)
{
    if (cp < 0x80) return ascii_class((unsigned char)cp);
    if (is_cjk(cp)) return C_CJK;
    switch (utf8proc_category(cp)) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LT: return C_UPPER;
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO:
    case UTF8PROC_CATEGORY_MN:
    case UTF8PROC_CATEGORY_MC:
    case UTF8PROC_CATEGORY_ME: return C_LOWER;
    case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_NO: return C_DIGIT;
    case UTF8PROC_CATEGORY_PC: return C_UNDER;  /* connector punctuation (‿ etc.) */
    default: return C_SEP;
    }
}

static inline int is_word(unsigned char k) { return k == C_LOWER || k == C_UPPER || k == C_DIGIT || k == C_UNDER; }
static inline int is_alpha(unsigned char k) { return k == C_LOWER || k == C_UPPER; }

/* Length of the run of ASCII 'a'..'z' at p (n bytes available). hot: 32 bytes per step. */
static inline size_t lower_run(const unsigned char *p, size_t n)
{
    size_t j = 0;
    const __m256i a = _mm256_set1_epi8('a'), z = _mm256_set1_epi8(25);
    while (j + 32 <= n) {
        __m256i t = _mm256_sub_epi8(_mm256_loadu_si256((const __m256i *)(p + j)), a);
        uint32_t in = (uint32_t)_mm256_movemask_epi8(_mm256_cmpeq_epi8(_mm256_min_epu8(t, z), t));
        if (~in) return j + (size_t)__builtin_ctz(~in);
        j += 32;
    }
    while (j < n && p[j] >= 'a' && p[j] <= 'z') j++;
    return j;
}

/* Decodes one codepoint at p (n bytes left). Invalid bytes decode as a separator. */
static inline int next_cp(const unsigned char *p, size_t n, int32_t *cp)
{
    if (p[0] < 0x80) { *cp = p[0]; return 1; }
    utf8proc_int32_t c;
    utf8proc_ssize_t k = utf8proc_iterate(p, (utf8proc_ssize_t)(n < 4 ? n : 4), &c);
    if (k <= 0) { *cp = -1; return 1; }
    *cp = c;
    return (int)k;
}

typedef struct {
    char buf[LCX_TOK_MAX + 8];      /* folded bytes of the piece */
    int len;
    int ncp;
    unsigned char cls[MAX_CP];      /* class per codepoint */
    unsigned short off[MAX_CP + 1]; /* folded byte offset per codepoint */
    unsigned mask;                  /* 1 << class, over the codepoints pushed */
    int nupper;
} piece;

#define PIECE_RESET(pc) ((pc).len = (pc).ncp = 0, (pc).mask = 0, (pc).nupper = 0)

/* Appends codepoint cp (class k) folded; false when the piece is full. */
static inline int piece_push(piece *pc, int32_t cp, unsigned char k)
{
    if (pc->ncp >= MAX_CP) return 0;
    char tmp[64];
    int tl;
    if (cp < 0x80) {
        tmp[0] = (char)(k == C_UPPER ? cp | 0x20 : cp);
        tl = 1;
    } else {
        utf8proc_int32_t out[16];
        int last = 0;
        utf8proc_ssize_t m = utf8proc_decompose_char(cp, out, 16, UTF8PROC_CASEFOLD, &last);
        tl = 0;
        if (m <= 0 || m > 16) { out[0] = cp; m = 1; }
        for (utf8proc_ssize_t i = 0; i < m; i++)
            tl += (int)utf8proc_encode_char(out[i], (utf8proc_uint8_t *)tmp + tl);
    }
    if (pc->len + tl > LCX_TOK_MAX) return 0;
    pc->cls[pc->ncp] = k;
    pc->mask |= 1u << k;
    pc->nupper += k == C_UPPER;
    pc->off[pc->ncp] = (unsigned short)pc->len;
    memcpy(pc->buf + pc->len, tmp, (size_t)tl);
    pc->len += tl;
    pc->ncp++;
    pc->off[pc->ncp] = (unsigned short)pc->len;
    return 1;
}

/* Emits the whole piece and, for compounds, its parts. Returns the callback's stop value. */
static inline int emit_piece(piece *pc, lcx_token_cb cb, void *ud)
{
    if (pc->ncp == 0) return 0;
    /* common cases first: a plain (or Capitalised) word, a plain number */
    if (pc->mask == 1u << C_LOWER || (pc->mask == (1u << C_LOWER | 1u << C_UPPER) && pc->nupper == 1 &&
                                      pc->cls[0] == C_UPPER) || (pc->mask == 1u << C_UPPER && pc->ncp == 1))
        return cb(pc->buf, (size_t)pc->len, LCX_TOK_WORD, ud);
    if (pc->mask == 1u << C_DIGIT) return cb(pc->buf, (size_t)pc->len, LCX_TOK_NUMBER, ud);
    /* the class mask answers most questions without a pass over the codepoints (it is
     * exact: every push sets its bit, and dropping trailing joiners recomputes it); only
     * joiners (which ones) and mixed case (where) need a scan */
    const unsigned m = pc->mask;
    int has_alpha = (m & (1u << C_LOWER | 1u << C_UPPER)) != 0, has_digit = (m >> C_DIGIT) & 1;
    int has_under = (m >> C_UNDER) & 1, has_join = (m & (1u << C_JOIN | 1u << C_COMMA)) != 0;
    int has_split_join = 0, has_case_break = 0;
    if (has_join)
        for (int i = 0; i < pc->ncp; i++) {
            unsigned char k = pc->cls[i];
            if (k == C_JOIN || k == C_COMMA) {
                char ch = pc->buf[pc->off[i]];
                if (ch == '-' || ch == '/' || ch == ':') has_split_join = 1;
            }
        }
    if ((m >> C_UPPER & 1) && (m >> C_LOWER & 1))
        for (int i = 1; i < pc->ncp && !has_case_break; i++) {
            unsigned char k = pc->cls[i];
            if (k != C_UPPER) continue;
            if (pc->cls[i - 1] == C_LOWER) has_case_break = 1;
            else if (i + 1 < pc->ncp && pc->cls[i - 1] == C_UPPER && pc->cls[i + 1] == C_LOWER) has_case_break = 1;
        }
    if (!has_alpha && !has_digit) return 0;   /* "_" or "__": nothing to match on */
    int kind;
    int want_parts;
    if (!has_alpha && !has_under && has_digit) {
        kind = LCX_TOK_NUMBER;
        want_parts = has_split_join; /* dates, times, phone numbers; not 3.14 or 1,000 */
    } else if (has_alpha && !has_digit && !has_join && !has_under && !has_case_break) {
        kind = LCX_TOK_WORD;
        want_parts = 0;
    } else {
        kind = LCX_TOK_IDENT;
        want_parts = 1;
    }
    int rc = cb(pc->buf, (size_t)pc->len, kind, ud);
    if (rc || !want_parts) return rc;

    /* Split into parts. A break falls before codepoint i when: i is a joiner/underscore
     * (dropped), or lower→Upper, or UPPER→Upper followed by lower, or letter↔digit. */
    int nparts = 0, start = -1;
    for (int i = 0; i <= pc->ncp && nparts < MAX_PARTS; i++) {
        unsigned char k = i < pc->ncp ? pc->cls[i] : C_SEP;
        int sep = !is_word(k) || k == C_UNDER;
        int brk = sep;
        if (!brk && start >= 0 && i > start) {
            unsigned char p = pc->cls[i - 1];
            if (k == C_UPPER && p == C_LOWER) brk = 1;
            else if (k == C_UPPER && p == C_UPPER && i + 1 < pc->ncp && pc->cls[i + 1] == C_LOWER) brk = 1;
            else if ((k == C_DIGIT) != (p == C_DIGIT)) brk = 1;
        }
        if (brk && start >= 0) {
            int a = pc->off[start], b = pc->off[i];
            if (!(a == 0 && b == pc->len)) {   /* a part equal to the whole adds nothing */
                rc = cb(pc->buf + a, (size_t)(b - a), LCX_TOK_PART, ud);
                if (rc) return rc;
                nparts++;
            }
            start = -1;
        }
        if (!sep && start < 0) start = i;
    }
    return 0;
}

/* Class bitmasks of 64 ASCII bytes at p (bit i = byte i): lower, upper, digit, '_'.
 * Bytes ≥ 0x80 are in none of them. */
static inline __attribute__((always_inline)) void ascii_masks64(const unsigned char *p, uint64_t *lo, uint64_t *up,
                                                               uint64_t *dg, uint64_t *us)
{
    const __m256i a = _mm256_set1_epi8('a'), A = _mm256_set1_epi8('A'), d0 = _mm256_set1_epi8('0');
    const __m256i z25 = _mm256_set1_epi8(25), n9 = _mm256_set1_epi8(9), u_ = _mm256_set1_epi8('_');
    uint64_t m[4][2];
    for (int h = 0; h < 2; h++) {
        __m256i x = _mm256_loadu_si256((const __m256i *)(p + 32 * h));
        __m256i t = _mm256_sub_epi8(x, a);     /* in range iff min(t, 25) == t (unsigned) */
        m[0][h] = (uint32_t)_mm256_movemask_epi8(_mm256_cmpeq_epi8(_mm256_min_epu8(t, z25), t));
        t = _mm256_sub_epi8(x, A);
        m[1][h] = (uint32_t)_mm256_movemask_epi8(_mm256_cmpeq_epi8(_mm256_min_epu8(t, z25), t));
        t = _mm256_sub_epi8(x, d0);
        m[2][h] = (uint32_t)_mm256_movemask_epi8(_mm256_cmpeq_epi8(_mm256_min_epu8(t, n9), t));
        m[3][h] = (uint32_t)_mm256_movemask_epi8(_mm256_cmpeq_epi8(x, u_));
    }
    *lo = m[0][0] | m[0][1] << 32;
    *up = m[1][0] | m[1][1] << 32;
    *dg = m[2][0] | m[2][1] << 32;
    *us = m[3][0] | m[3][1] << 32;
}

/* Joiner masks of 64 ASCII bytes at p: jc the joiners - . / : and commas, cm the commas,
 * sj the splitting joiners - / :, hi the bytes ≥ 0x80. */
static inline __attribute__((always_inline)) void ascii_join_masks64(const unsigned char *p, uint64_t *jc,
                                                                    uint64_t *cm, uint64_t *sj, uint64_t *hi)
{
    const __m256i c2c = _mm256_set1_epi8(','), n3 = _mm256_set1_epi8(3), col = _mm256_set1_epi8(':');
    const __m256i dash = _mm256_set1_epi8('-'), sl = _mm256_set1_epi8('/');
    uint64_t m[4][2];
    for (int h = 0; h < 2; h++) {
        __m256i x = _mm256_loadu_si256((const __m256i *)(p + 32 * h));
        __m256i t = _mm256_sub_epi8(x, c2c);   /* , - . / are 0x2c..0x2f */
        __m256i c = _mm256_cmpeq_epi8(x, col);
        m[0][h] = (uint32_t)_mm256_movemask_epi8(_mm256_or_si256(_mm256_cmpeq_epi8(_mm256_min_epu8(t, n3), t), c));
        m[1][h] = (uint32_t)_mm256_movemask_epi8(_mm256_cmpeq_epi8(x, c2c));
        m[2][h] = (uint32_t)_mm256_movemask_epi8(
            _mm256_or_si256(c, _mm256_or_si256(_mm256_cmpeq_epi8(x, dash), _mm256_cmpeq_epi8(x, sl))));
        m[3][h] = (uint32_t)_mm256_movemask_epi8(x);
    }
    *jc = m[0][0] | m[0][1] << 32;
    *cm = m[1][0] | m[1][1] << 32;
    *sj = m[2][0] | m[2][1] << 32;
    *hi = m[3][0] | m[3][1] << 32;
}

/* emit_piece for a piece of n < 64 ASCII bytes at w: word characters [A-Za-z0-9_], and
 * joiner runs that stay inside the token (ascii_piece_end decides which). Class masks over
 * bits 0..n-1 (nothing above): lo/up/dg/us letters, digits, '_'; jn the joiners and
 * commas in the piece; sj != 0 when one of them is '-', '/' or ':' (a NUMBER is split on
 * those only). The same tokens, kinds and order as emit_piece, from bit operations instead
 * of passes over per-codepoint classes (hot for code: identifiers, numbers, a.b, a::b).
 * Tokens without upper-case letters are passed straight from the text, the others from
 * buf (the folded copy; ≥ 64 bytes). */
static inline __attribute__((always_inline)) int emit_ascii_run(const unsigned char *w, size_t n, uint64_t lo,
                                                                uint64_t up, uint64_t dg, uint64_t us, uint64_t jn,
                                                                uint64_t sj, char *buf, lcx_token_cb cb, void *ud)
{
    /* the folded copy (only read when up != 0): 'A'..'Z' | 0x20 */
    if (up) {
        const __m256i A = _mm256_set1_epi8('A'), z25 = _mm256_set1_epi8(25), c20 = _mm256_set1_epi8(0x20);
        for (int h = 0; h < 2; h++) {
            __m256i x = _mm256_loadu_si256((const __m256i *)(w + 32 * h));
            __m256i t = _mm256_sub_epi8(x, A);
            __m256i isu = _mm256_cmpeq_epi8(_mm256_min_epu8(t, z25), t);
            _mm256_storeu_si256((__m256i *)(buf + 32 * h), _mm256_or_si256(x, _mm256_and_si256(isu, c20)));
        }
    }
    const char *whole = up ? buf : (const char *)w;
    const uint64_t al = lo | up;
    /* emit_piece's common cases: a lower-case or Capitalised word, one upper-case letter,
     * a plain number */
    if (!dg && !us && !jn && (up == 0 || (up == 1 && (lo || n == 1))))
        return cb(whole, n, LCX_TOK_WORD, ud);
    if (!al && !us && !jn) return cb(whole, n, LCX_TOK_NUMBER, ud);
    if (!al && !dg) return 0;   /* "_" or "__" (or "_._"): nothing to match on */
    int rc;
    if (!al && !us) {   /* digits and joiners: dates, times, versions */
        rc = cb(whole, n, LCX_TOK_NUMBER, ud);
        if (rc || !sj) return rc;   /* 3.14 and 1,000 stay whole */
    } else {
        /* case breaks before i: lower→Upper, or UPPER→Upper followed by lower */
        const uint64_t cbrk = up & ((lo << 1) | ((up << 1) & (lo >> 1)));
        if (!dg && !us && !jn && !cbrk) return cb(whole, n, LCX_TOK_WORD, ud);
        rc = cb(whole, n, LCX_TOK_IDENT, ud);
        if (rc) return rc;
    }
    /* parts: maximal runs of letters/digits (underscores and joiners drop out), cut before
     * a case break or a letter↔digit change between two of them */
    const uint64_t an = al | dg;
    const uint64_t cbrk = up & ((lo << 1) | ((up << 1) & (lo >> 1)));
    const uint64_t brk = an & (an << 1) & (cbrk | (dg ^ (dg << 1)));
    uint64_t starts = an & (~(an << 1) | brk);
    const uint64_t lasts = (an & ~(an >> 1)) | (brk >> 1);   /* last index of each part */
    int nparts = 0;
    while (starts && nparts < MAX_PARTS) {
        unsigned a = (unsigned)__builtin_ctzll(starts);
        unsigned b = (unsigned)__builtin_ctzll(lasts >> a) + a + 1;   /* end (exclusive) */
        starts &= starts - 1;
        if (a == 0 && b == n) continue;   /* a part equal to the whole adds nothing */
        uint64_t pm = (b - a == 64 ? ~0ull : ((1ull << (b - a)) - 1)) << a;
        rc = cb((up & pm) ? buf + a : (const char *)w + a, b - a, LCX_TOK_PART, ud);
        if (rc) return rc;
        nparts++;
    }
    return 0;
}

/* Where the token that starts at w ends, when its first word run (bits 0..e-1 of wd, the
 * word-character mask) is followed by the ASCII joiner or comma w[e]: the general path's
 * rule — a run of ≤ 3 joiners stays inside the token iff a word character follows, a
 * comma only alone between two digits — applied with the masks (jc joiners and commas,
 * cm commas, dg digits, hi bytes ≥ 0x80). Returns the token length, or 0 when the answer
 * needs bytes past 62 or a non-ASCII byte at a decision point (the general path decides). */
static inline size_t ascii_piece_end(uint64_t wd, uint64_t jc, uint64_t cm, uint64_t dg, uint64_t hi, size_t e)
{
    for (;;) {   /* w[e] is a joiner or comma */
        size_t r = (size_t)__builtin_ctzll(~(jc >> e));   /* the joiner run: e .. e+r-1 */
        size_t nb = e + r;
        if (nb >= 62 || (hi >> nb & 1)) return 0;
        int ok = r <= 3 && (wd >> nb & 1);
        if (ok && ((cm >> e) & ((1ull << r) - 1))) ok = r == 1 && (dg >> (e - 1) & 1) && (dg >> nb & 1);
        if (!ok) return e;                                 /* trailing joiners are not part of it */
        e = nb + (size_t)__builtin_ctzll(~(wd >> nb));      /* the next word run */
        if (e >= 62 || (hi >> e & 1)) return 0;
        if (!(jc >> e & 1)) return e;                      /* an ASCII separator ends it */
    }
}

/* A plain ASCII word of n < LCX_TOK_MAX bytes: all lower case (emitted in place) or
 * Capitalised (emitted from a copy with the first letter folded). */
static inline __attribute__((always_inline)) int emit_word(const unsigned char *w, size_t n, int lower,
                                                           lcx_token_cb cb, void *ud)
{
    if (lower) return cb((const char *)w, n, LCX_TOK_WORD, ud);
    char fold[LCX_TOK_MAX];
    lcx__copy_tok(fold, w, n);
    fold[0] = (char)(fold[0] | 0x20);
    return cb(fold, n, LCX_TOK_WORD, ud);
}

/* hot: runs over every byte of every ingested span and query. always_inline so that a
 * caller passing a constant callback gets it inlined (no indirect call per token). */
static inline __attribute__((always_inline)) int lcx__tokenize_inl(const char *text, size_t len, lcx_token_cb cb,
                                                                   void *ud)
{
    if (!text || !cb) return len ? LCX_EINVAL : 0;
    const unsigned char *p = (const unsigned char *)text;
    size_t i = 0;
    piece pc;
    PIECE_RESET(pc);
    unsigned char prev = C_SEP;  /* class of the last codepoint pushed into the piece */
    while (i < len) {
        if (pc.ncp == 0 && len - i >= 64) {
            /* hot (prose): between tokens, the plain words of the next 64 bytes from one set
             * of class bitmasks. A plain word is what the per-token fast path below emits
             * at once: [a-z]+ or [A-Z][a-z]* followed by an ASCII separator, or by one
             * joiner or comma and then a separator. Its start is the next set bit of the
             * word/non-ASCII mask (the bytes between tokens — separators, joiners, commas —
             * are skipped, as below), its end the first bit of the lower-case run that is
             * clear. The first token that is not plain (a digit, '_', non-ASCII, a case
             * change, a joiner inside it) or whose end needs bytes past the window goes to
             * the per-token code below, which comes back here after it. Same tokens as that
             * code; one classification per 64 bytes instead of two 32-byte scans and their
             * mispredicted branches per word. */
            uint64_t lo, up, dg, us, jc, cm, sj, hi;
            ascii_masks64(p + i, &lo, &up, &dg, &us);
            ascii_join_masks64(p + i, &jc, &cm, &sj, &hi);
            /* a start that is not a letter (digit, '_', non-ASCII) fails the end test below:
             * its lower-case run is empty and the byte at its end is not a separator */
            const uint64_t cand = lo | up | dg | us | hi, sep = ~(cand | jc);
            /* the bytes a plain word may end at: a separator, or a joiner or comma before
             * one (byte 63 only if a separator: what follows it is outside the window).
             * lo63: the lower-case runs cut at byte 63, so that a word's end is ≤ 63 (one
             * that runs on is not plain here: byte 63 is then a letter, not an end) */
            const uint64_t okend = sep | (jc & sep >> 1), lo63 = lo & ~(1ull << 63);
            size_t q = 0, st0;
            for (;;) {
                const uint64_t c = cand >> q;
                if (!c) { st0 = 64; break; }
                st0 = q + (size_t)__builtin_ctzll(c);
                const size_t st = st0 + (up >> st0 & 1);   /* a Capital: the lower-case run after it */
                if (st > 62) break;
                const size_t e = st + (size_t)__builtin_ctzll(~(lo63 >> st));
                if (!(okend >> e & 1)) break;
                int rc = emit_word(p + i + st0, e - st0, st == st0, cb, ud);
                if (rc) return rc;
                q = e;
            }
            i += st0;
            if (i >= len || st0 == 64) continue;
        }
        unsigned char b0 = p[i];
        if (b0 < 0x80) {                         /* ASCII fast path */
            unsigned char k0 = lcx__k_ascii[b0];
            if (pc.ncp == 0 && !is_word(k0)) {
                /* hot (code: indentation, operators, punctuation): between tokens every
                 * ASCII byte that is not a word character is skipped (a joiner or comma
                 * only joins inside a token; the general path would skip it too), so the
                 * gap up to the next word character or non-ASCII byte goes in one 32-byte
                 * step instead of a (mispredicted) loop pass per byte */
                if (len - i >= 32) {
                    const __m256i a = _mm256_set1_epi8('a'), d0 = _mm256_set1_epi8('0'), c20 = _mm256_set1_epi8(0x20);
                    const __m256i z25 = _mm256_set1_epi8(25), n9 = _mm256_set1_epi8(9), u_ = _mm256_set1_epi8('_');
                    __m256i x = _mm256_loadu_si256((const __m256i *)(p + i));
                    __m256i t = _mm256_sub_epi8(_mm256_or_si256(x, c20), a);   /* letters: (x | 0x20) − 'a' ≤ 25 */
                    __m256i wd = _mm256_cmpeq_epi8(_mm256_min_epu8(t, z25), t);
                    t = _mm256_sub_epi8(x, d0);
                    wd = _mm256_or_si256(wd, _mm256_cmpeq_epi8(_mm256_min_epu8(t, n9), t));
                    wd = _mm256_or_si256(wd, _mm256_cmpeq_epi8(x, u_));
                    /* stop at a word character or a byte ≥ 0x80 (its sign bit) */
                    uint32_t stop = (uint32_t)_mm256_movemask_epi8(_mm256_or_si256(wd, x));
                    i += stop ? (size_t)__builtin_ctz(stop) : 32;   /* bit 0 clear: p[i] skips */
                } else {
                    i++;
                }
                continue;
            }
            if (pc.ncp == 0 && (k0 == C_LOWER || k0 == C_UPPER)) {
                /* the most common token of all: a lower-case (or Capitalised) ASCII word
                 * followed by a separator — found with a SIMD run scan, passed to the
                 * callback straight from the text when no folding is needed */
                size_t st = i + (k0 == C_UPPER);
                if (len - st >= 32) {
                    /* hot: the usual case of the same test, with 32 bytes left — the word
                     * ends inside one 32-byte step, so j < len and no run loop, limit
                     * or end-of-text tests are needed (same tokens as below) */
                    const __m256i a = _mm256_set1_epi8('a'), z = _mm256_set1_epi8(25);
                    __m256i t = _mm256_sub_epi8(_mm256_loadu_si256((const __m256i *)(p + st)), a);
                    uint32_t out = ~(uint32_t)_mm256_movemask_epi8(_mm256_cmpeq_epi8(_mm256_min_epu8(t, z), t));
                    if (out) {
                        size_t j = st + (size_t)__builtin_ctz(out);
                        unsigned char kn = lcx__k_next[p[j]];
                        if (kn == C_SEP || ((kn == C_JOIN || kn == C_COMMA) &&
                                            (j + 1 >= len || lcx__k_next[p[j + 1]] == C_SEP))) {
                            int rc = emit_word(p + i, j - i, k0 == C_LOWER, cb, ud);
                            if (rc) return rc;
                            i = j + (p[j] == ' ');
                            continue;
                        }
                    }
                }
                size_t lim = len - st < LCX_TOK_MAX ? len - st : LCX_TOK_MAX;
                size_t j = st + lower_run(p + st, lim);
                if (j - i < LCX_TOK_MAX) {
                    unsigned char kn = j < len ? (p[j] < 0x80 ? lcx__k_ascii[p[j]] : C_JOIN) : C_SEP;
                    if (kn == C_SEP || ((kn == C_JOIN || kn == C_COMMA) &&
                                        (j + 1 >= len || (p[j + 1] < 0x80 && lcx__k_ascii[p[j + 1]] == C_SEP)))) {
                        int rc = emit_word(p + i, j - i, k0 == C_LOWER, cb, ud);
                        if (rc) return rc;
                        /* the separator that ended it, when a plain space, needs no pass
                         * of its own through the loop (one per word of prose) */
                        i = j + (j < len && p[j] == ' ');
                        continue;
                    }
                }
            }
            if (pc.ncp == 0 && (k0 == C_LOWER || k0 == C_UPPER || k0 == C_DIGIT || k0 == C_UNDER)) {
                if (len - i >= 64) {
                    /* hot (code): a run of < 64 ASCII word characters that ends the token
                     * (the test below) is classified with 64-byte bitmasks and emitted
                     * without the per-byte loop and piece (emit_ascii_run) */
                    uint64_t lo, up, dg, us;
                    ascii_masks64(p + i, &lo, &up, &dg, &us);
                    uint64_t wd = lo | up | dg | us;
                    if (~wd) {
                        size_t n = (size_t)__builtin_ctzll(~wd), e = i + n;   /* n ≥ 1: k0 is a word class */
                        unsigned char kn = lcx__k_next[p[e]];
                        if (kn == C_SEP || ((kn == C_JOIN || kn == C_COMMA) &&
                                            (e + 1 >= len || lcx__k_next[p[e + 1]] == C_SEP))) {
                            uint64_t nm = (1ull << n) - 1;
                            int rc = emit_ascii_run(p + i, n, lo & nm, up & nm, dg & nm, us & nm, 0, 0, pc.buf,
                                                    cb, ud);
                            if (rc) return rc;
                            i = e + (p[e] == ' ');
                            continue;
                        }
                        if ((kn == C_JOIN || kn == C_COMMA) && p[e] < 0x80) {
                            /* a joiner followed by more: a.b, a::b, 2024-01-15, 1,000, a/b/c */
                            uint64_t jc, cm, sj, hi;
                            ascii_join_masks64(p + i, &jc, &cm, &sj, &hi);
                            size_t end = ascii_piece_end(wd, jc, cm, dg, hi, n);
                            if (end) {
                                uint64_t nm = (1ull << end) - 1;
                                int rc = emit_ascii_run(p + i, end, lo & nm, up & nm, dg & nm, us & nm, jc & nm,
                                                        sj & nm, pc.buf, cb, ud);
                                if (rc) return rc;
                                i += end;   /* the joiner or separator after it: skipped between tokens */
                                continue;
                            }
                        }
                    }
                }
                /* hot (code: identifiers, numbers): the whole run of ASCII word characters
                 * [A-Za-z0-9_] in one tight loop, pushed into the piece exactly as the
                 * per-codepoint path below would push them. When the next byte ends the
                 * token (an ASCII separator, or one joiner followed by a separator — the
                 * same test as above), the piece is emitted at once; otherwise (a joiner
                 * followed by more word characters, non-ASCII, a full piece) the general
                 * path continues from the end of the run with the piece as it is. */
                size_t lim = len - i < MAX_CP ? len - i : MAX_CP;   /* MAX_CP == LCX_TOK_MAX */
                size_t j = 0;
                unsigned mask = 0;
                int nup = 0;
                for (; j < lim; j++) {
                    unsigned char b = p[i + j];
                    unsigned char k = b < 0x80 ? lcx__k_ascii[b] : C_SEP;
                    if (!is_word(k)) break;
                    mask |= 1u << k;
                    nup += k == C_UPPER;
                    pc.cls[j] = k;
                    pc.off[j] = (unsigned short)j;
                    pc.buf[j] = (char)(k == C_UPPER ? b | 0x20 : b);
                }
                pc.off[j] = (unsigned short)j;
                pc.ncp = pc.len = (int)j;
                pc.mask = mask;
                pc.nupper = nup;
                size_t e = i + j;
                prev = pc.cls[j - 1];
                i = e;
                if (j < MAX_CP) {
                    unsigned char kn = e < len ? (p[e] < 0x80 ? lcx__k_ascii[p[e]] : C_JOIN) : C_SEP;
                    if (kn == C_SEP || ((kn == C_JOIN || kn == C_COMMA) &&
                                        (e + 1 >= len || (p[e + 1] < 0x80 && lcx__k_ascii[p[e + 1]] == C_SEP)))) {
                        int rc = emit_piece(&pc, cb, ud);
                        if (rc) return rc;
                        PIECE_RESET(pc);
                        prev = C_SEP;
                        i += i < len && p[i] == ' ';   /* the ending space: as above */
                    }
                }
                continue;
            }
            if ((k0 == C_LOWER || k0 == C_UPPER || k0 == C_DIGIT || k0 == C_UNDER) && pc.ncp < MAX_CP &&
                pc.len < LCX_TOK_MAX) {
                pc.cls[pc.ncp] = k0;
                pc.mask |= 1u << k0;
                pc.nupper += k0 == C_UPPER;
                pc.off[pc.ncp] = (unsigned short)pc.len;
                pc.buf[pc.len++] = (char)(k0 == C_UPPER ? b0 | 0x20 : b0);
                pc.off[++pc.ncp] = (unsigned short)pc.len;
                prev = k0;
                i++;
                continue;
            }
        }
        int32_t cp;
        int adv = next_cp(p + i, len - i, &cp);
        unsigned char k = cp < 0 ? C_SEP : uni_class(cp);
        if (is_word(k)) {
            if (!piece_push(&pc, cp, k)) {          /* piece full: emit and start a new one */
                int rc = emit_piece(&pc, cb, ud);
                if (rc) return rc;
                PIECE_RESET(pc);
                piece_push(&pc, cp, k);
            }
            prev = k;
            i += (size_t)adv;
            continue;
        }
        if ((k == C_JOIN || k == C_COMMA) && pc.ncp > 0 && is_word(prev)) {
            /* a run of joiners (≤ 3) stays inside the token iff a word char follows;
             * ',' only as a single digit,digit separator (1,000) */
            size_t j = i;
            int run = 0, commas = 0;
            int32_t c2 = -1;
            unsigned char k2 = C_SEP;
            while (j < len && run < 4) {
                int a2 = next_cp(p + j, len - j, &c2);
                k2 = c2 < 0 ? C_SEP : uni_class(c2);
                if (k2 != C_JOIN && k2 != C_COMMA) break;
                commas += k2 == C_COMMA;
                run++;
                j += (size_t)a2;
            }
            int ok = run <= 3 && j < len && is_word(k2);
            if (ok && commas) ok = run == 1 && prev == C_DIGIT && k2 == C_DIGIT;
            if (ok) {
                size_t q = i;
                int full = 0;
                while (q < j) {
                    int32_t c3;
                    int a3 = next_cp(p + q, len - q, &c3);
                    if (!piece_push(&pc, c3, uni_class(c3))) { full = 1; break; }
                    q += (size_t)a3;
                }
                if (!full) {
                    prev = k;
                    i = j;
                    continue;
                }
                /* no room: drop the trailing joiners from the piece and end the token here */
                while (pc.ncp > 0 && !is_word(pc.cls[pc.ncp - 1])) pc.len = pc.off[--pc.ncp];
                pc.mask = 0;   /* keep the class mask exact (emit_piece relies on it) */
                for (int q2 = 0; q2 < pc.ncp; q2++) pc.mask |= 1u << pc.cls[q2];
            }
        }
        /* separator: finish the current token */
        if (pc.ncp) {
            int rc = emit_piece(&pc, cb, ud);
            if (rc) return rc;
            PIECE_RESET(pc);
        }
        prev = C_SEP;
        if (k == C_CJK) {
            piece_push(&pc, cp, C_LOWER);
            int rc = cb(pc.buf, (size_t)pc.len, LCX_TOK_WORD, ud);
            if (rc) return rc;
            PIECE_RESET(pc);
        }
        i += (size_t)adv;
    }
    if (pc.ncp) return emit_piece(&pc, cb, ud);
    return 0;
}

#endif
