/* lcx__hash64's algorithm as inline functions (internal): util/hash.c's lcx__hash64 is this,
 * and the ingest hot path (embed/hfeat.h) inlines it per token, where a call across
 * translation units (no LTO) and libc's variable-length memcpy cost ~8% of ingest
 * instructions. BM25 term hashes in snapshots and the embedding depend on the output:
 * tests/util test_hash64_golden pins it. */
#ifndef LCX_UTIL_HASH_INL_H
#define LCX_UTIL_HASH_INL_H

#include <stdint.h>
#include <string.h>

#define LCX__HK0 0xa0761d6478bd642full
#define LCX__HK1 0xe7037ed1a0b428dbull
#define LCX__HK2 0x8ebc6af09c88c6e3ull

static inline uint64_t lcx__hash_mix(uint64_t a, uint64_t b)
{
    __uint128_t r = (__uint128_t)a * b;
    return (uint64_t)r ^ (uint64_t)(r >> 64);
}

/* The 16-byte rounds: consumes whole 16-byte blocks of *s, leaves the tail (< 16 bytes)
 * at *s with its length in *m. */
static inline __attribute__((always_inline)) uint64_t lcx__hash_blocks(const unsigned char **s, size_t *m,
                                                                        uint64_t h)
{
    while (*m >= 16) {
        uint64_t a, b;
        memcpy(&a, *s, 8);
        memcpy(&b, *s + 8, 8);
        h = lcx__hash_mix(a ^ LCX__HK1 ^ h, b ^ LCX__HK2);
        *s += 16;
        *m -= 16;
    }
    return h;
}

/* The last round over the tail words a, b (m = tail length) and the finaliser. */
static inline uint64_t lcx__hash_final(uint64_t h, uint64_t a, uint64_t b, size_t m)
{
    h = lcx__hash_mix(a ^ LCX__HK1 ^ h, b ^ LCX__HK2 ^ m);
    return lcx__hash_mix(h ^ LCX__HK0, LCX__HK2);
}

static inline __attribute__((always_inline)) uint64_t lcx__hash64_inl(const void *p, size_t n, uint64_t seed)
{
    const unsigned char *s = p;
    size_t m = n;
    uint64_t h = lcx__hash_blocks(&s, &m, seed ^ lcx__hash_mix(seed ^ LCX__HK0, LCX__HK1) ^ n);
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
    return lcx__hash_final(h, a, b, m);
}

#endif
