/* Dense kernels: scalar references, AVX2+FMA versions, and the dispatcher.
 * The build baseline is x86-64-v3, so AVX2 is always available here; AVX-512
 * versions live in dot_avx512.c and run only when lcx__cpu_has_avx512(). */
#include "embed/embed.h"
#include "embed/dot_quarters.h"
#include "util/util.h"
#include <immintrin.h>
#include "util/simd.h"
#include <math.h>
#include <string.h>

/* ---- f32 · f32 */
float lcx__dot_f32_scalar(const float *a, const float *b, size_t n)
{
    double s = 0;   /* reference: accumulate in double */
    for (size_t i = 0; i < n; i++) s += (double)a[i] * b[i];
    return (float)s;
}

float lcx__dot_f32_avx2(const float *a, const float *b, size_t n)
{
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
        s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), s1);
    }
    for (; i + 8 <= n; i += 8) s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
    float s = lcx_hsum8(_mm256_add_ps(s0, s1));
    for (; i < n; i++) s += a[i] * b[i];
    return s;
}

float lcx_dot_f32(const float *a, const float *b, size_t n)
{
    if (lcx__cpu_has_avx512()) return lcx__dot_f32_avx512(a, b, n);
    return lcx__dot_f32_avx2(a, b, n);
}

/* ---- 8-bit rows · 8-bit query */
static float max_abs(const float *v, size_t n)
{
    __m256 m = _mm256_setzero_ps();
    const __m256 mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    size_t i = 0;
    for (; i + 8 <= n; i += 8) m = _mm256_max_ps(m, _mm256_and_ps(_mm256_loadu_ps(v + i), mask));
    __m128 x = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    x = _mm_max_ps(x, _mm_movehl_ps(x, x));
    x = _mm_max_ss(x, _mm_movehdup_ps(x));
    float mx = _mm_cvtss_f32(x);
    for (; i < n; i++)
        if (fabsf(v[i]) > mx) mx = fabsf(v[i]);
    return mx;
}

/* Rounds v[i]·inv to the nearest integer (ties to even, like lrintf in the default mode)
 * and adds bias. Values are within ±127 (rows) or ±63 (queries) by construction. */
static void quantize(const float *v, size_t n, float inv, int bias, uint8_t *out)
{
    const __m256 s = _mm256_set1_ps(inv);
    const __m256i b = _mm256_set1_epi32(bias);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256i q = _mm256_add_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(v + i), s)), b);
        __m128i w = _mm_packs_epi32(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));  /* 8 × i16 */
        _mm_storel_epi64((__m128i *)(out + i), _mm_packus_epi16(w, w));   /* 0..255 after bias */
    }
    for (; i < n; i++) out[i] = (uint8_t)(lrintf(v[i] * inv) + bias);
}

void lcx__quant_row_u8(const float *row, size_t dim, uint8_t *out, float *scale)
{
    float mx = max_abs(row, dim);
    if (!(mx > 0) || !isfinite(mx)) {
        memset(out, 128, dim);
        *scale = 0;
        return;
    }
    quantize(row, dim, 127.0f / mx, 128, out);
    *scale = mx / 127.0f;
}

float lcx__quant_query_i8(const float *q, size_t dim, int8_t *out)
{
    float mx = max_abs(q, dim);
    if (!(mx > 0) || !isfinite(mx)) {
        memset(out, 0, dim);
        return 0;
    }
    /* quantize with bias 128 into u8 (0..255 range keeps packus exact), then remove it */
    uint8_t *u = (uint8_t *)out;
    quantize(q, dim, 63.0f / mx, 128, u);
    for (size_t i = 0; i < dim; i++) out[i] = (int8_t)((int)u[i] - 128);
    return mx / 63.0f;
}

void lcx__dot_u8_rows_scalar(const int8_t *q, const uint8_t *rows, size_t n_rows, size_t dim, int32_t *out)
{
    for (size_t r = 0; r < n_rows; r++) {
        const uint8_t *v = rows + r * dim;
        int64_t s = 0;
        for (size_t i = 0; i < dim; i++) s += (int32_t)q[i] * ((int32_t)v[i] - 128);
        out[r] = (int32_t)s;
    }
}

static inline int32_t hsum_epi32(__m256i v)
{
    __m128i a = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    a = _mm_add_epi32(a, _mm_shuffle_epi32(a, 0x4e));
    a = _mm_add_epi32(a, _mm_shuffle_epi32(a, 0xb1));
    return _mm_cvtsi128_si32(a);
}

/* The 4 rows' dot products with q (dim a multiple of 32). Per 32 dims: vpmaddubsw (u8 row
 * × s8 query → 16 int16 pair sums, never saturating, see embed.h), vpmaddwd with ones (→ 8
 * int32), add; the query loads are shared by the 4 rows and the four horizontal sums are
 * done together (3 hadds + 1 add instead of 4 reductions). */
static inline __attribute__((always_inline)) __m128i dot4_u8(const int8_t *q, const uint8_t *v0,
                                                             const uint8_t *v1, const uint8_t *v2,
                                                             const uint8_t *v3, size_t dim)
{
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
    for (size_t i = 0; i < dim; i += 32) {
        __m256i qv = _mm256_loadu_si256((const __m256i *)(q + i));
        a0 = _mm256_add_epi32(a0, _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_loadu_si256((const __m256i *)(v0 + i)), qv), ones));
        a1 = _mm256_add_epi32(a1, _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_loadu_si256((const __m256i *)(v1 + i)), qv), ones));
        a2 = _mm256_add_epi32(a2, _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_loadu_si256((const __m256i *)(v2 + i)), qv), ones));
        a3 = _mm256_add_epi32(a3, _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_loadu_si256((const __m256i *)(v3 + i)), qv), ones));
    }
    __m256i t = _mm256_hadd_epi32(_mm256_hadd_epi32(a0, a1), _mm256_hadd_epi32(a2, a3));
    return _mm_add_epi32(_mm256_castsi256_si128(t), _mm256_extracti128_si256(t, 1));
}

/* hot: the first stage of every dense search (one pass over all rows);
 * Σ q·u − 128·Σ q = Σ q·(u − 128). The rows are cut into 4 quarters and each step takes
 * one row of each: 4 far-apart streams keep more DRAM reads in flight than one
 * (docs/benchmarks/core.md). Integer sums: the order of the
 * rows does not change any result. Tails (< 4 rows, or dims not a multiple of 32): two
 * rows at a time, then scalar. */
void lcx__dot_u8_rows_avx2(const int8_t *q, const uint8_t *rows, size_t n_rows, size_t dim, int32_t *out)
{
    size_t d32 = dim & ~(size_t)31;
    int32_t qsum = 0;
    for (size_t i = 0; i < dim; i++) qsum += q[i];
    const __m256i ones = _mm256_set1_epi16(1);
    size_t r = 0;
    if (d32 == dim) r = lcx__dot_u8_quarters(dot4_u8, q, rows, n_rows, dim, qsum, out);
    for (; r + 2 <= n_rows; r += 2) {
        const uint8_t *v0 = rows + r * dim, *v1 = v0 + dim;
        __m256i a0 = _mm256_setzero_si256(), a1 = _mm256_setzero_si256();
        size_t i = 0;
        for (; i < d32; i += 32) {
            __m256i qv = _mm256_loadu_si256((const __m256i *)(q + i));
            __m256i p0 = _mm256_maddubs_epi16(_mm256_loadu_si256((const __m256i *)(v0 + i)), qv);
            __m256i p1 = _mm256_maddubs_epi16(_mm256_loadu_si256((const __m256i *)(v1 + i)), qv);
            a0 = _mm256_add_epi32(a0, _mm256_madd_epi16(p0, ones));
            a1 = _mm256_add_epi32(a1, _mm256_madd_epi16(p1, ones));
        }
        int32_t s0 = hsum_epi32(a0), s1 = hsum_epi32(a1);
        for (; i < dim; i++) {
            s0 += (int32_t)q[i] * v0[i];
            s1 += (int32_t)q[i] * v1[i];
        }
        out[r] = s0 - 128 * qsum;
        out[r + 1] = s1 - 128 * qsum;
    }
    for (; r < n_rows; r++) lcx__dot_u8_rows_scalar(q, rows + r * dim, 1, dim, out + r);
}

float lcx__dot_f32_u8_scalar(const float *q, const uint8_t *row, size_t dim)
{
    double s = 0;
    for (size_t i = 0; i < dim; i++) s += (double)q[i] * ((int)row[i] - 128);
    return (float)s;
}

/* per re-scored candidate (≤ 2·prefilter per search) */
float lcx__dot_f32_u8_avx2(const float *q, const uint8_t *row, size_t dim)
{
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
    const __m256i off = _mm256_set1_epi32(128);
    size_t i = 0;
    for (; i + 16 <= dim; i += 16) {
        __m128i u = _mm_loadu_si128((const __m128i *)(row + i));
        __m256i lo = _mm256_sub_epi32(_mm256_cvtepu8_epi32(u), off);
        __m256i hi = _mm256_sub_epi32(_mm256_cvtepu8_epi32(_mm_srli_si128(u, 8)), off);
        a0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), _mm256_cvtepi32_ps(lo), a0);
        a1 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i + 8), _mm256_cvtepi32_ps(hi), a1);
    }
    float s = lcx_hsum8(_mm256_add_ps(a0, a1));
    for (; i < dim; i++) s += q[i] * (float)((int)row[i] - 128);
    return s;
}

float lcx__dot_f32_u8(const float *q, const uint8_t *row, size_t dim) { return lcx__dot_f32_u8_avx2(q, row, dim); }

void lcx__dot_u8_rows(const int8_t *q, const uint8_t *rows, size_t n_rows, size_t dim, int32_t *out)
{
    if (lcx__cpu_has_avx512()) lcx__dot_u8_rows_avx512(q, rows, n_rows, dim, out);
    else lcx__dot_u8_rows_avx2(q, rows, n_rows, dim, out);
}
