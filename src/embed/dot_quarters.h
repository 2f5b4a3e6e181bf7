/* The 4-stream row split shared by the 8-bit scan kernels (lcx__dot_u8_rows_avx2 in dot.c,
 * lcx__dot_u8_rows_avx512 in dot_avx512.c; internal). The rows are cut into 4 quarters and
 * each step takes row i of every quarter: 4 far-apart DRAM streams keep more reads in
 * flight than one. Each file passes its own 4-row kernel (always inlined here, so each is
 * compiled with its file's ISA flags). */
#ifndef LCX_EMBED_DOT_QUARTERS_H
#define LCX_EMBED_DOT_QUARTERS_H

#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>

/* The dot products of q with rows v0..v3 (dim a multiple of the kernel's step), as int32. */
typedef __m128i (*lcx__dot4_u8_fn)(const int8_t *q, const uint8_t *v0, const uint8_t *v1, const uint8_t *v2,
                                   const uint8_t *v3, size_t dim);

/* out[r] = Σ q·(u − 128) for the first 4·⌊n_rows/4⌋ rows (qsum = Σ q); returns how many. */
static inline __attribute__((always_inline)) size_t lcx__dot_u8_quarters(lcx__dot4_u8_fn dot4, const int8_t *q,
                                                                       const uint8_t *rows, size_t n_rows,
                                                                       size_t dim, int32_t qsum, int32_t *out)
{
    const __m128i bias = _mm_set1_epi32(128 * qsum);
    const size_t Q = n_rows / 4;
    for (size_t i = 0; i < Q; i++) {
        const uint8_t *v0 = rows + i * dim, *v1 = v0 + Q * dim, *v2 = v1 + Q * dim, *v3 = v2 + Q * dim;
        int32_t s[4];
        _mm_storeu_si128((__m128i *)s, _mm_sub_epi32(dot4(q, v0, v1, v2, v3, dim), bias));
        out[i] = s[0];
        out[i + Q] = s[1];
        out[i + 2 * Q] = s[2];
        out[i + 3 * Q] = s[3];
    }
    return 4 * Q;
}

#endif
