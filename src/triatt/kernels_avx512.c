/* AVX-512 scoring kernels (compiled with AVX-512 flags; reached only via run-time
 * dispatch in triatt__pick_kernel / the scorer). Same contract as kernels.c. */
#include "triatt/internal.h"
#include <immintrin.h>

static inline __m512 ld16(const void *base, size_t idx, bool f16)
{
    if (f16) return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)((const uint16_t *)base + idx)));
    return _mm512_loadu_ps((const float *)base + idx);
}

static inline __attribute__((always_inline)) void kernel_t(const triatt_kparams *p, const void *keys,
                                                           size_t stride, int n, float *out,
                                                           bool accumulate, const bool f16)
{
    const int n_rot = p->n_rot, fc = p->fc;
    const __m512 veps = _mm512_set1_ps(p->eps);
    for (int c = 0; c < n; c++) {          /* hot: one key row per iteration */
        const size_t o = (size_t)c * stride;
        __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
        if (p->use_trig)
            for (int d = 0; d < n_rot; d += 32) {
                acc0 = _mm512_fmadd_ps(ld16(keys, o + d, f16), _mm512_loadu_ps(p->w + d), acc0);
                acc1 = _mm512_fmadd_ps(ld16(keys, o + d + 16, f16), _mm512_loadu_ps(p->w + d + 16), acc1);
            }
        if (p->use_extra) {
            if (p->pairing == TRIATT_PAIR_HALF) {
                for (int f = 0; f < fc; f += 16) {
                    __m512 kr = ld16(keys, o + f, f16), ki = ld16(keys, o + fc + f, f16);
                    __m512 s = _mm512_fmadd_ps(kr, kr, _mm512_fmadd_ps(ki, ki, veps));
                    acc0 = _mm512_fmadd_ps(_mm512_sqrt_ps(s), _mm512_loadu_ps(p->m + f), acc0);
                }
            } else {
                for (int d = 0; d < n_rot; d += 16) {
                    __m512 x = ld16(keys, o + d, f16);
                    __m512 sq = _mm512_mul_ps(x, x);
                    __m512 s = _mm512_add_ps(_mm512_add_ps(sq, _mm512_permute_ps(sq, 0xB1)), veps);
                    acc1 = _mm512_fmadd_ps(_mm512_sqrt_ps(s), _mm512_loadu_ps(p->m_il + d), acc1);
                }
            }
        }
        float v = _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1));
        out[c] = accumulate ? out[c] + v : v;
    }
}

void triatt__kernel_avx512(const triatt_kparams *p, const void *keys, size_t row_stride, int n,
                           float *out, bool accumulate)
{
    if (p->n_rot % 32) { triatt__kernel_avx2(p, keys, row_stride, n, out, accumulate); return; }
    if (p->f16) kernel_t(p, keys, row_stride, n, out, accumulate, true);
    else kernel_t(p, keys, row_stride, n, out, accumulate, false);
}

void triatt__fast_kernel_avx512(const float *feat, size_t stride, int fc, const float *v, int n, float *out)
{
    int len = 2 * fc;
    if (len % 32) { triatt__fast_kernel_avx2(feat, stride, fc, v, n, out); return; }
    for (int c = 0; c < n; c++) {          /* hot */
        const float *r = feat + (size_t)c * stride;
        __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
        for (int d = 0; d < len; d += 32) {
            a0 = _mm512_fmadd_ps(_mm512_loadu_ps(r + d), _mm512_loadu_ps(v + d), a0);
            a1 = _mm512_fmadd_ps(_mm512_loadu_ps(r + d + 16), _mm512_loadu_ps(v + d + 16), a1);
        }
        out[c] = _mm512_reduce_add_ps(_mm512_add_ps(a0, a1)) + r[len];
    }
}
