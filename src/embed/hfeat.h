/* The hash embedder's per-token feature code and token hash as inline functions (internal),
 * shared by the embedder (embed.c) and the ingest path that tokenizes once for BM25 and the
 * embedding (index.c): they run for every token of every ingested span, and as calls across
 * translation units (no LTO) their prologues, the indirect token callback and libc's
 * variable-length memcpy in the hash cost ~8% of ingest instructions. The knobs below are
 * named by the fingerprint (embed.c): changing any output here must bump K_VERSION
 * (tests/core/test_embed.c test_hash_golden is the tripwire). */
#ifndef LCX_EMBED_HFEAT_H
#define LCX_EMBED_HFEAT_H

#include <math.h>
#include <stdint.h>
#include <string.h>
#include "embed/embed.h"
#include "text/text.h"

#define K_VERSION 2
#define W_WORD 1.0f
#define W_NUMBER 2.0f
#define W_IDENT 1.5f
#define W_PART 0.6f
#define W_BIGRAM 0.7f
#define W_CHAR 0.5f
#define SEED_WORD 0x5157a11c0de5eedull
#define SEED_CHAR 0x9e3779b97f4a7c15ull

/* = lcx_hash64(p, n, seed) (src/util/hash.c, the same algorithm and output: BM25 term
 * hashes in snapshots and the embedding depend on it; test_embed checks every length
 * 0..200 against it), without the call and without a variable-length memcpy for n < 8. */
static inline uint64_t lcx__hash_mix(uint64_t a, uint64_t b)
{
    __uint128_t r = (__uint128_t)a * b;
    return (uint64_t)r ^ (uint64_t)(r >> 64);
}

static inline __attribute__((always_inline)) uint64_t lcx__hash64_inl(const void *p, size_t n, uint64_t seed)
{
    const unsigned char *s = p;
    const uint64_t k0 = 0xa0761d6478bd642full, k1 = 0xe7037ed1a0b428dbull, k2 = 0x8ebc6af09c88c6e3ull;
    uint64_t h = seed ^ lcx__hash_mix(seed ^ k0, k1) ^ n;
    size_t m = n;
    while (m >= 16) {
        uint64_t a, b;
        memcpy(&a, s, 8);
        memcpy(&b, s + 8, 8);
        h = lcx__hash_mix(a ^ k1 ^ h, b ^ k2);
        s += 16;
        m -= 16;
    }
    uint64_t a = 0, b = 0;
    if (m >= 8) {
        memcpy(&a, s, 8);
        memcpy(&b, s + m - 8, 8);
    } else {
        switch (m) {   /* little-endian pack of m < 8 bytes (no over-read) */
        case 7: a |= (uint64_t)s[6] << 48; /* fall through */
        case 6: a |= (uint64_t)s[5] << 40; /* fall through */
        case 5: a |= (uint64_t)s[4] << 32; /* fall through */
        case 4: a |= (uint64_t)s[3] << 24; /* fall through */
        case 3: a |= (uint64_t)s[2] << 16; /* fall through */
        case 2: a |= (uint64_t)s[1] << 8;  /* fall through */
        case 1: a |= s[0]; /* fall through */
        default: break;
        }
    }
    h = lcx__hash_mix(a ^ k1 ^ h, b ^ k2 ^ m);
    return lcx__hash_mix(h ^ k0, k2);
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

/* hot: called for every non-stopword token of every embedded text. The token hash h is
 * shared with BM25 (lcx_hash64(tok, n, 0)); words, numbers, identifiers and parts share
 * one feature space (so the query word "parse" meets the part "parse" of parseHeader),
 * only their weights differ. */
static inline __attribute__((always_inline)) void lcx__hfeat_token_inl(lcx__hfeat *c, const char *t, size_t n, int kind,
                                                                     uint64_t h)
{
    float w = kind == LCX_TOK_WORD ? W_WORD : kind == LCX_TOK_NUMBER ? W_NUMBER
            : kind == LCX_TOK_IDENT ? W_IDENT : W_PART;
    uint64_t fh = hf_mix64(h ^ SEED_WORD);
    hf_add_feat(c, fh, w);
    if (kind != LCX_TOK_PART) {
        if (c->prev) hf_add_feat(c, hf_mix64(c->prev * 31 + fh), W_BIGRAM);
        c->prev = fh;
    }
    if (kind != LCX_TOK_NUMBER && n >= 4) {
        /* char 3-grams over "<token>": n of them, one multiply each (the high bits of a
         * 64-bit odd-constant product are well mixed; bucket and sign come from them) */
        float wc = W_CHAR / sqrtf((float)n);
        /* the grams are the little-endian 24-bit values of "<token>" at offsets 0..n-1:
         * copy into a padded buffer once, then each gram is one unaligned 32-bit load
         * (no per-gram bounds test). Tokens are at most LCX_TOK_MAX bytes. */
        unsigned char pad[LCX_TOK_MAX + 8];
        size_t m = n < LCX_TOK_MAX ? n : LCX_TOK_MAX;
        pad[0] = '<';
        memcpy(pad + 1, t, m);
        pad[m + 1] = '>';
        pad[m + 2] = 0;
        pad[m + 3] = 0;
        const uint64_t dim = (uint64_t)c->dim;
        float *acc = c->acc;
        uint32_t wbits;
        memcpy(&wbits, &wc, 4);
        /* bucket = ((g >> 32) · dim) >> 32, which for dim = 2^k is g >> (64 − k); the sign
         * is bit 31 of g, moved onto the float's sign bit with one AND (same values) */
        if ((dim & (dim - 1)) == 0 && dim >= 2 && dim <= (1ull << 32)) {
            const int sh = 64 - __builtin_ctzll(dim);
            for (size_t i = 0; i < m; i++) {   /* hot: one multiply-hash + one add per gram */
                uint32_t v;
                memcpy(&v, pad + i, 4);
                uint64_t g = ((uint64_t)(v & 0xffffffu) + SEED_CHAR) * 0x9e3779b97f4a7c15ull;
                uint32_t fb = wbits ^ ((uint32_t)g & 0x80000000u);
                float f;
                memcpy(&f, &fb, 4);
                acc[g >> sh] += f;
            }
        } else {
            for (size_t i = 0; i < m; i++) {
                uint32_t v;
                memcpy(&v, pad + i, 4);
                uint64_t g = ((uint64_t)(v & 0xffffffu) + SEED_CHAR) * 0x9e3779b97f4a7c15ull;
                uint32_t bk = (uint32_t)(((g >> 32) * dim) >> 32);
                acc[bk] += hf_signed_w(wc, (uint32_t)(g >> 31 & 1));
            }
        }
    }
}

#endif
