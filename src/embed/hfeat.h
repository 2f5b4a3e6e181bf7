/* The hash embedder's per-token feature code and token hash as inline functions (internal),
 * shared by the embedder (embed.c) and the ingest path that tokenizes once for BM25 and the
 * embedding (src/index/prep.c): they run for every token of every ingested span, and as calls across
 * translation units (no LTO) their prologues, the indirect token callback and libc's
 * variable-length memcpy in the hash cost ~8% of ingest instructions. The knobs below are
 * named by the fingerprint (embed.c): changing any output here must bump K_VERSION
 * (tests/core/test_embed.c test_hash_golden is the tripwire). */
#ifndef LCX_EMBED_HFEAT_H
#define LCX_EMBED_HFEAT_H

#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
#include "embed/embed.h"
#include "text/text.h"
#include "util/hash_inl.h"

#define K_VERSION 2
#define W_WORD 1.0f
#define W_NUMBER 2.0f
#define W_IDENT 1.5f
#define W_PART 0.6f
#define W_BIGRAM 0.7f
#define W_CHAR 0.5f
#define SEED_WORD 0x5157a11c0de5eedull
#define SEED_CHAR 0x9e3779b97f4a7c15ull

/* = lcx__hash64_inl(p, n, 0) for a token, with lo = lcx__pack_lt8(p, n) when n < 8 (the
 * caller has it already from the stopword test; ignored for n ≥ 8). */
static inline __attribute__((always_inline)) uint64_t lcx__hash64_tok(const void *p, size_t n, uint64_t lo)
{
    const unsigned char *s = p;
    size_t m = n;
    uint64_t h = lcx__hash_blocks(&s, &m, lcx__hash_mix(LCX__HK0, LCX__HK1) ^ n);
    uint64_t a = lo, b = 0;
    if (m >= 8) {
        memcpy(&a, s, 8);
        memcpy(&b, s + m - 8, 8);
    } else if (n >= 16) {
        a = lcx__pack_lt8((const char *)s, m);   /* the tail of a long token */
    }
    return lcx__hash_final(h, a, b, m);
}

/* ±w without a branch (the sign bit is random: a branch would mispredict half the time) */
static inline float hf_signed_w(float w, uint32_t neg)
{
    uint32_t b;
    memcpy(&b, &w, 4);
    b ^= neg << 31;
    memcpy(&w, &b, 4);
    return w;
}

static inline void hf_add_feat(lcx__hfeat *c, uint64_t h, float w)
{
    uint32_t b = (uint32_t)(((h >> 32) * (uint64_t)c->dim) >> 32);
    c->acc[b] += hf_signed_w(w, (uint32_t)(h & 1));
}

static inline uint64_t hf_mix64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return x;
}

/* Char 3-gram features of the token t (m bytes, 1 ≤ m ≤ LCX_TOK_MAX): the grams are the
 * little-endian 24-bit values of "<t>" at offsets 0..m-1; gram value v hashes to
 * g = (v + SEED_CHAR) · 0x9e3779b97f4a7c15 (mod 2^64), which adds ±wc (sign: bit 31 of
 * g) to bucket ((g >> 32) · dim) >> 32. Scalar reference (any dim; tests compare the
 * AVX2 form below against it bit for bit). */
static inline void lcx__hfeat_c3_ref(float *acc, uint64_t dim, const char *t, size_t m, float wc)
{
    unsigned char pad[LCX_TOK_MAX + 8];
    pad[0] = '<';
    memcpy(pad + 1, t, m);
    pad[m + 1] = '>';
    pad[m + 2] = 0;
    pad[m + 3] = 0;
    for (size_t i = 0; i < m; i++) {
        uint32_t v;
        memcpy(&v, pad + i, 4);
        uint64_t g = ((uint64_t)(v & 0xffffffu) + SEED_CHAR) * 0x9e3779b97f4a7c15ull;
        uint32_t bk = (uint32_t)(((g >> 32) * dim) >> 32);
        acc[bk] += hf_signed_w(wc, (uint32_t)(g >> 31 & 1));
    }
}

/* Number of (bucket, weight) lanes lcx__hfeat_c3_lanes writes for m grams: m rounded up
 * to 8, at least 8 (≤ LCX_TOK_MAX + 8). */
static inline size_t lcx__hfeat_c3_end(size_t m) { return m <= 8 ? 8 : (m + 7) & ~(size_t)7; }

/* First half of the AVX2 form, for dim = 2^(64 − sh): bk[i] = bucket of gram i, fw[i] =
 * the float bits of its signed weight, for i < lcx__hfeat_c3_end(m); lanes i ≥ m hold
 * -0.0f and bucket i mod 8 (mod dim) (a no-op add each; distinct buckets so that they form
 * no store-to-load chain through one slot). 8 grams per step in 32-bit lanes (hot: ~6–10
 * grams per word): v < 2^24, so y = lo32(SEED_CHAR) + v < 2^32 and, with K the multiplier,
 * g = y·lo(K) + ((y·hi(K) + hi(SEED_CHAR)·lo(K)) << 32) (mod 2^64); the bucket is
 * g >> sh = hi32(g) >> (sh − 32) with hi32(g) = hi32(y·lo(K)) + lo32(y·hi(K)) +
 * lo32(hi(SEED_CHAR)·lo(K)) (mod 2^32), and the sign is bit 31 of g = bit 31 of
 * lo32(y·lo(K)): two 32×32→64 multiplies (even/odd lanes) and one 32-bit multiply per 8
 * grams. The lanes depend only on the token bytes and wc, so the ingest path keeps them per
 * distinct term of a span and replays lcx__hfeat_c3_add on repeats (src/index/prep.c).
 * rd16: t has 16 readable bytes. */
/* The step's constants for dim = 2^(64 − sh), made once per text by the ingest path (the
 * per-term call below would otherwise rebuild them for every distinct term). */
typedef struct {
    __m256i sl, kl, kh, c0, sgn, lane, dead, gsh;
    __m128i shc;
} lcx__c3k;

static inline __attribute__((always_inline)) void lcx__hfeat_c3_consts(lcx__c3k *k, int sh)
{
    const uint64_t S = SEED_CHAR, K = 0x9e3779b97f4a7c15ull;
    k->sl = _mm256_set1_epi32((int)(uint32_t)(S & 0xffffffffu));
    k->kl = _mm256_set1_epi64x((long long)(K & 0xffffffffu));
    k->kh = _mm256_set1_epi32((int)(uint32_t)(K >> 32));
    k->c0 = _mm256_set1_epi32((int)(uint32_t)(((S >> 32) * (K & 0xffffffffu)) & 0xffffffffu));
    k->sgn = _mm256_set1_epi32((int)0x80000000u);
    k->shc = _mm_cvtsi32_si128(sh - 32);
    k->lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    k->dead = _mm256_and_si256(k->lane, _mm256_set1_epi32((int)((1u << (64 - sh < 3 ? 64 - sh : 3)) - 1)));
    /* bytes j..j+2 of a 16-byte load into dword j: grams 0..3 from the low copy, 4..7 from the high */
    k->gsh = _mm256_setr_epi8(0, 1, 2, -1, 1, 2, 3, -1, 2, 3, 4, -1, 3, 4, 5, -1,
                              4, 5, 6, -1, 5, 6, 7, -1, 6, 7, 8, -1, 7, 8, 9, -1);
}

static inline __attribute__((always_inline)) void lcx__hfeat_c3_lanes_k(uint32_t *bk, uint32_t *fw, const lcx__c3k *k,
                                                                      const char *t, size_t m, float wc, int rd16)
{
    unsigned char pad[LCX_TOK_MAX + 32];      /* "<t>" then zeros: 16-byte loads at any step */
    pad[0] = '<';
    if (rd16 && m <= 16)
        _mm_storeu_si128((__m128i *)(pad + 1), _mm_loadu_si128((const __m128i *)t));
    else
        lcx__copy_tok(pad + 1, t, m);
    pad[m + 1] = '>';
    _mm_storeu_si128((__m128i *)(pad + m + 2), _mm_setzero_si128());
    uint32_t wb;
    memcpy(&wb, &wc, 4);
    const __m256i wv = _mm256_set1_epi32((int)wb), mv = _mm256_set1_epi32((int)m);
    size_t end = lcx__hfeat_c3_end(m);
    for (size_t i = 0; i < end; i += 8) {
        __m256i x = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(pad + i)));
        __m256i y = _mm256_add_epi32(_mm256_shuffle_epi8(x, k->gsh), k->sl);      /* < 2^32: no carry */
        __m256i pe = _mm256_mul_epu32(y, k->kl);                                   /* y·lo(K), even lanes */
        __m256i po = _mm256_mul_epu32(_mm256_srli_epi64(y, 32), k->kl);            /* odd lanes */
        __m256i lo = _mm256_blend_epi32(pe, _mm256_slli_epi64(po, 32), 0xaa);      /* lo32(y·lo(K)) */
        __m256i hi = _mm256_blend_epi32(_mm256_srli_epi64(pe, 32), po, 0xaa);      /* hi32(y·lo(K)) */
        __m256i gh = _mm256_add_epi32(hi, _mm256_add_epi32(_mm256_mullo_epi32(y, k->kh), k->c0));   /* hi32(g) */
        /* live lanes: i + lane < m */
        __m256i live = _mm256_cmpgt_epi32(mv, _mm256_add_epi32(k->lane, _mm256_set1_epi32((int)i)));
        _mm256_storeu_si256((__m256i *)(bk + i), _mm256_blendv_epi8(k->dead, _mm256_srl_epi32(gh, k->shc), live));
        _mm256_storeu_si256((__m256i *)(fw + i),
                            _mm256_blendv_epi8(k->sgn, _mm256_xor_si256(wv, _mm256_and_si256(lo, k->sgn)), live));
    }
}

static inline __attribute__((always_inline)) void lcx__hfeat_c3_lanes(uint32_t *bk, uint32_t *fw, int sh,
                                                                    const char *t, size_t m, float wc, int rd16)
{
    lcx__c3k k;
    lcx__hfeat_c3_consts(&k, sh);
    lcx__hfeat_c3_lanes_k(bk, fw, &k, t, m, wc, rd16);
}

/* Second half: acc[bk[i]] += fw[i] for i < end, in order (as the reference). */
static inline __attribute__((always_inline)) void lcx__hfeat_c3_add(float *acc, const uint32_t *bk,
                                                                  const uint32_t *fw, size_t end)
{
    for (size_t i = 0; i < end; i += 8) {   /* hot: in order, as the reference */
        float f[8];
        memcpy(f, fw + i, sizeof f);
        acc[bk[i]] += f[0];
        acc[bk[i + 1]] += f[1];
        acc[bk[i + 2]] += f[2];
        acc[bk[i + 3]] += f[3];
        acc[bk[i + 4]] += f[4];
        acc[bk[i + 5]] += f[5];
        acc[bk[i + 6]] += f[6];
        acc[bk[i + 7]] += f[7];
    }
}

/* Both halves: the char-3-gram features of t into acc (dim = 2^(64 − sh), 8 ≤ dim ≤ 2^32),
 * bit-identical to lcx__hfeat_c3_ref. */
static inline __attribute__((always_inline)) void lcx__hfeat_c3_avx2(float *acc, int sh, const char *t, size_t m,
                                                                   float wc, int rd16)
{
    uint32_t bk[LCX_TOK_MAX + 8], fw[LCX_TOK_MAX + 8];   /* (lcx__hfeat_c3_end(m)) bucket, float bits */
    lcx__hfeat_c3_lanes(bk, fw, sh, t, m, wc, rd16);
    lcx__hfeat_c3_add(acc, bk, fw, lcx__hfeat_c3_end(m));
}

/* The char-3-gram weight W_CHAR / √n. _mm_sqrt_ss is IEEE sqrt (correctly rounded, as
 * sqrtf) without libm's errno path (a call per token without -fno-math-errno). */
static inline float lcx__hfeat_wc(size_t n)
{
    return W_CHAR / _mm_cvtss_f32(_mm_sqrt_ss(_mm_set_ss((float)n)));
}

/* The whole-token feature weight of a token kind. */
static inline float lcx__hfeat_w(int kind)
{
    return kind == LCX_TOK_WORD ? W_WORD : kind == LCX_TOK_NUMBER ? W_NUMBER : kind == LCX_TOK_IDENT ? W_IDENT : W_PART;
}

/* The first word of a token's features: its whole-token feature hash (bucket, sign, and
 * the bigram state all come from it). */
static inline uint64_t lcx__hfeat_fh(uint64_t h) { return hf_mix64(h ^ SEED_WORD); }

/* hot: called for every non-stopword token of every embedded text. The token hash h is
 * shared with BM25 (lcx__hash64(tok, n, 0)); words, numbers, identifiers and parts share
 * one feature space (so the query word "parse" meets the part "parse" of parseHeader),
 * only their weights differ. */
static inline __attribute__((always_inline)) void lcx__hfeat_token_rd(lcx__hfeat *c, const char *t, size_t n, int kind,
                                                                    uint64_t h, int rd16)
{
    float w = lcx__hfeat_w(kind);
    uint64_t fh = lcx__hfeat_fh(h);
    hf_add_feat(c, fh, w);
    if (kind != LCX_TOK_PART) {
        if (c->prev) hf_add_feat(c, hf_mix64(c->prev * 31 + fh), W_BIGRAM);
        c->prev = fh;
    }
    if (kind != LCX_TOK_NUMBER && n >= 4) {
        /* char 3-grams over "<token>": n of them, one multiply each (the high bits of a
         * 64-bit odd-constant product are well mixed; bucket and sign come from them) */
        float wc = lcx__hfeat_wc(n);
        size_t m = n < LCX_TOK_MAX ? n : LCX_TOK_MAX;
        const uint64_t dim = (uint64_t)c->dim;
        if ((dim & (dim - 1)) == 0 && dim >= 2 && dim <= (1ull << 32))
            lcx__hfeat_c3_avx2(c->acc, 64 - __builtin_ctzll(dim), t, m, wc, rd16);
        else
            lcx__hfeat_c3_ref(c->acc, dim, t, m, wc);
    }
}
 
/* The same for any token pointer (rd16 unknown). */
static inline __attribute__((always_inline)) void lcx__hfeat_token_inl(lcx__hfeat *c, const char *t, size_t n, int kind,
                                                                     uint64_t h)
{
    lcx__hfeat_token_rd(c, t, n, kind, h, 0);
}

#endif
