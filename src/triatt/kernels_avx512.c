/* AVX-512 scoring kernels (compiled with AVX-512 flags; reached only via run-time
 * dispatch in triatt__pick_kernel / the scorer). Same contract as kernels.c. */
#include "triatt/internal.h"
#include <immintrin.h>

void triatt__kernel_avx512(const triatt_kparams *p, const float *keys, size_t row_stride, int n,
                           float *out, bool accumulate)
{
    if (p->n_rot % 32) { triatt__kernel_avx2(p, keys, row_stride, n, out, accumulate); return; }
    const int n_rot = p->n_rot, fc = p->fc;
    const __m512 veps = _mm512_set1_ps(p->eps);
    for (int c = 0; c < n; c++) {          /* hot: one key row per iteration */
        const float *k = keys + (size_t)c * row_stride;
        __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
        if (p->use_trig)
            for (int d = 0; d < n_rot; d += 32) {
                acc0 = _mm512_fmadd_ps(_mm512_loadu_ps(k + d), _mm512_loadu_ps(p->w + d), acc0);
                acc1 = _mm512_fmadd_ps(_mm512_loadu_ps(k + d + 16), _mm512_loadu_ps(p->w + d + 16), acc1);
            }
        if (p->use_extra) {
            if (p->pairing == TRIATT_PAIR_HALF) {
                for (int f = 0; f < fc; f += 16) {
                    __m512 kr = _mm512_loadu_ps(k + f), ki = _mm512_loadu_ps(k + fc + f);
                    __m512 s = _mm512_fmadd_ps(kr, kr, _mm512_fmadd_ps(ki, ki, veps));
                    acc0 = _mm512_fmadd_ps(_mm512_sqrt_ps(s), _mm512_loadu_ps(p->m + f), acc0);
                }
            } else {
                for (int d = 0; d < n_rot; d += 16) {
                    __m512 x = _mm512_loadu_ps(k + d);
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
