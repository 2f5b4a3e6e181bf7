/* Small SIMD helpers shared by the AVX2 / AVX-512 kernels (embed, triatt, engine).
 * Header-only so they inline into the hot loops that end with them. */
#ifndef LCX_SIMD_H
#define LCX_SIMD_H

#include <immintrin.h>

/* Sum of the 8 float lanes of v. */
static inline float lcx_hsum8(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

#endif
