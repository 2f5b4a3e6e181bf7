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

/* e^x for 8 floats: Cephes expf polynomial after a 2^n · e^r range reduction (r = x − n·ln2,
 * ln2 split in two for accuracy; exponent built in integer). Max relative error ~2 ulp vs
 * libm expf on [-87, 88]; inputs are clamped to that range (e^-87 ~ 1.6e-38 stands in for 0).
 * Used by softmax, SiLU, GELU and erf in the engine and src/neural (AVX2 + FMA). */
static inline __m256 lcx__exp8_ps(__m256 x)
{
    x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.0f)), _mm256_set1_ps(88.0f));
    __m256 fx = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    x = _mm256_fnmadd_ps(fx, _mm256_set1_ps(0.693359375f), x);
    x = _mm256_fnmadd_ps(fx, _mm256_set1_ps(-2.12194440e-4f), x);
    __m256 p = _mm256_set1_ps(1.9875691500E-4f);
    p = _mm256_fmadd_ps(p, x, _mm256_set1_ps(1.3981999507E-3f));
    p = _mm256_fmadd_ps(p, x, _mm256_set1_ps(8.3334519073E-3f));
    p = _mm256_fmadd_ps(p, x, _mm256_set1_ps(4.1665795894E-2f));
    p = _mm256_fmadd_ps(p, x, _mm256_set1_ps(1.6666665459E-1f));
    p = _mm256_fmadd_ps(p, x, _mm256_set1_ps(5.0000001201E-1f));
    p = _mm256_fmadd_ps(p, _mm256_mul_ps(x, x), _mm256_add_ps(x, _mm256_set1_ps(1.0f)));
    const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(fx), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

#endif
