/* AVX-512 dense kernels. Compiled with AVX-512 flags (file name *_avx512.c) and called only
 * through the dispatch in dot.c when lcx__cpu_has_avx512(); never call them directly. */
#include "embed/embed.h"
#include "embed/dot_quarters.h"
#include <immintrin.h>

float lcx__dot_f32_avx512(const float *a, const float *b, size_t n)
{
    __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), s0);
        s1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 16), _mm512_loadu_ps(b + i + 16), s1);
    }
    for (; i + 16 <= n; i += 16) s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), s0);
    if (i < n) {
        __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
        s1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a + i), _mm512_maskz_loadu_ps(m, b + i), s1);
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(s0, s1));
}

/* The 4 rows' dot products with q (dim a multiple of 64): as dot4_u8 in dot.c, 64 dims per
 * step (vpmaddubsw never saturates here, see embed.h); each 512-bit sum is folded to 256
 * bits, then the four are reduced together. */
static inline __attribute__((always_inline)) __m128i dot4_u8(const int8_t *q, const uint8_t *v0,
                                                             const uint8_t *v1, const uint8_t *v2,
                                                             const uint8_t *v3, size_t dim)
{
    const __m512i ones = _mm512_set1_epi16(1);
    __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;
    for (size_t i = 0; i < dim; i += 64) {
        __m512i qv = _mm512_loadu_si512((const void *)(q + i));
        a0 = _mm512_add_epi32(a0, _mm512_madd_epi16(_mm512_maddubs_epi16(_mm512_loadu_si512((const void *)(v0 + i)), qv), ones));
        a1 = _mm512_add_epi32(a1, _mm512_madd_epi16(_mm512_maddubs_epi16(_mm512_loadu_si512((const void *)(v1 + i)), qv), ones));
        a2 = _mm512_add_epi32(a2, _mm512_madd_epi16(_mm512_maddubs_epi16(_mm512_loadu_si512((const void *)(v2 + i)), qv), ones));
        a3 = _mm512_add_epi32(a3, _mm512_madd_epi16(_mm512_maddubs_epi16(_mm512_loadu_si512((const void *)(v3 + i)), qv), ones));
    }
#define FOLD(a) _mm256_add_epi32(_mm512_castsi512_si256(a), _mm512_extracti64x4_epi64(a, 1))
    __m256i t = _mm256_hadd_epi32(_mm256_hadd_epi32(FOLD(a0), FOLD(a1)), _mm256_hadd_epi32(FOLD(a2), FOLD(a3)));
#undef FOLD
    return _mm_add_epi32(_mm256_castsi256_si128(t), _mm256_extracti128_si256(t, 1));
}

/* hot: see lcx__dot_u8_rows_avx2 (4 far-apart row streams, the same split into quarters);
 * 64 dims per step. Rows left over (< 4, or dims not a multiple of 64): one at a time with
 * a masked tail. One stream is not enough: a one-stream version of this kernel loses to
 * the AVX2 4-stream one (docs/benchmarks/avx512.md). */
void lcx__dot_u8_rows_avx512(const int8_t *q, const uint8_t *rows, size_t n_rows, size_t dim, int32_t *out)
{
    size_t d64 = dim & ~(size_t)63;
    int32_t qsum = 0;
    for (size_t i = 0; i < dim; i++) qsum += q[i];
    size_t r = 0;
    if (d64 == dim) r = lcx__dot_u8_quarters(dot4_u8, q, rows, n_rows, dim, qsum, out);
    const __m512i ones = _mm512_set1_epi16(1);
    __mmask64 tm = dim - d64 ? (__mmask64)((1ull << (dim - d64)) - 1) : 0;
    for (; r < n_rows; r++) {
        const uint8_t *v = rows + r * dim;
        __m512i acc = _mm512_setzero_si512();
        size_t i = 0;
        for (; i < d64; i += 64) {
            __m512i p = _mm512_maddubs_epi16(_mm512_loadu_si512((const void *)(v + i)),
                                             _mm512_loadu_si512((const void *)(q + i)));
            acc = _mm512_add_epi32(acc, _mm512_madd_epi16(p, ones));
        }
        if (tm) {   /* masked-off lanes load 0 from both: product 0 */
            __m512i p = _mm512_maddubs_epi16(_mm512_maskz_loadu_epi8(tm, v + i), _mm512_maskz_loadu_epi8(tm, q + i));
            acc = _mm512_add_epi32(acc, _mm512_madd_epi16(p, ones));
        }
        out[r] = _mm512_reduce_add_epi32(acc) - 128 * qsum;
    }
}
