/* Scoring kernels: scalar reference and AVX2 (baseline x86-64-v3). The AVX-512 versions
 * live in kernels_avx512.c and are only reached through triatt__pick_kernel's run-time
 * dispatch. All kernels compute, per key row K (post-RoPE, n_rot scored dims):
 *   score = Σ_d K[d]·w[d] + Σ_f m[f]·sqrt(kr_f² + ki_f² + eps)
 * which is the collapsed TriAttention score with the centre and trig sums folded into w. */
#include "triatt/internal.h"
#include <immintrin.h>
#include <math.h>

void triatt__kernel_scalar(const triatt_kparams *p, const float *keys, size_t row_stride, int n,
                           float *out, bool accumulate)
{
    int fc = p->fc;
    for (int c = 0; c < n; c++) {          /* hot (reference kernel) */
        const float *k = keys + (size_t)c * row_stride;
        double acc = 0;
        if (p->use_trig)
            for (int d = 0; d < p->n_rot; d++) acc += (double)k[d] * p->w[d];
        if (p->use_extra) {
            for (int f = 0; f < fc; f++) {
                double kr, ki;
                if (p->pairing == TRIATT_PAIR_HALF) { kr = k[f]; ki = k[f + fc]; }
                else { kr = k[2 * f]; ki = k[2 * f + 1]; }
                acc += p->m[f] * sqrt(kr * kr + ki * ki + p->eps);
            }
        }
        out[c] = accumulate ? out[c] + (float)acc : (float)acc;
    }
}

static inline float hsum256(__m256 v)
{
    __m128 lo = _mm256_castps256_ps128(v), hi = _mm256_extractf128_ps(v, 1);
    lo = _mm_add_ps(lo, hi);
    lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
    lo = _mm_add_ss(lo, _mm_movehdup_ps(lo));
    return _mm_cvtss_f32(lo);
}

void triatt__kernel_avx2(const triatt_kparams *p, const float *keys, size_t row_stride, int n,
                         float *out, bool accumulate)
{
    if (p->n_rot % 16) { triatt__kernel_scalar(p, keys, row_stride, n, out, accumulate); return; }
    const int n_rot = p->n_rot, fc = p->fc;
    const __m256 veps = _mm256_set1_ps(p->eps);
    for (int c = 0; c < n; c++) {          /* hot: one key row per iteration */
        const float *k = keys + (size_t)c * row_stride;
        __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
        if (p->use_trig)
            for (int d = 0; d < n_rot; d += 16) {
                acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(k + d), _mm256_loadu_ps(p->w + d), acc0);
                acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(k + d + 8), _mm256_loadu_ps(p->w + d + 8), acc1);
            }
        if (p->use_extra) {
            if (p->pairing == TRIATT_PAIR_HALF) {
                for (int f = 0; f < fc; f += 8) {
                    __m256 kr = _mm256_loadu_ps(k + f), ki = _mm256_loadu_ps(k + fc + f);
                    __m256 s = _mm256_fmadd_ps(kr, kr, _mm256_fmadd_ps(ki, ki, veps));
                    acc0 = _mm256_fmadd_ps(_mm256_sqrt_ps(s), _mm256_loadu_ps(p->m + f), acc0);
                }
            } else {
                /* pairs are adjacent: square, add the swapped neighbour so both slots hold
                 * kr²+ki², and weight each slot by m[f]/2 (m_il) */
                for (int d = 0; d < n_rot; d += 8) {
                    __m256 x = _mm256_loadu_ps(k + d);
                    __m256 sq = _mm256_mul_ps(x, x);
                    __m256 s = _mm256_add_ps(_mm256_add_ps(sq, _mm256_permute_ps(sq, 0xB1)), veps);
                    acc1 = _mm256_fmadd_ps(_mm256_sqrt_ps(s), _mm256_loadu_ps(p->m_il + d), acc1);
                }
            }
        }
        float v = hsum256(_mm256_add_ps(acc0, acc1));
        out[c] = accumulate ? out[c] + v : v;
    }
}

void triatt__fast_kernel_scalar(const float *feat, size_t stride, int fc, const float *v, int n, float *out)
{
    for (int c = 0; c < n; c++) {
        const float *r = feat + (size_t)c * stride;
        double acc = r[2 * fc];
        for (int d = 0; d < 2 * fc; d++) acc += (double)r[d] * v[d];
        out[c] = (float)acc;
    }
}

/* v = [cs | −sn] (2·fc floats, see score.c), so the round is a plain dot product per cell. */
void triatt__fast_kernel_avx2(const float *feat, size_t stride, int fc, const float *v, int n, float *out)
{
    int len = 2 * fc;
    if (len % 16) {
        for (int c = 0; c < n; c++) {
            const float *r = feat + (size_t)c * stride;
            float acc = r[len];
            for (int d = 0; d < len; d++) acc += r[d] * v[d];
            out[c] = acc;
        }
        return;
    }
    for (int c = 0; c < n; c++) {          /* hot: O(cells·fc) per round */
        const float *r = feat + (size_t)c * stride;
        __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
        for (int d = 0; d < len; d += 16) {
            a0 = _mm256_fmadd_ps(_mm256_loadu_ps(r + d), _mm256_loadu_ps(v + d), a0);
            a1 = _mm256_fmadd_ps(_mm256_loadu_ps(r + d + 8), _mm256_loadu_ps(v + d + 8), a1);
        }
        out[c] = hsum256(_mm256_add_ps(a0, a1)) + r[len];
    }
}

triatt_kernel_fn triatt__pick_kernel(int which)
{
    if (which == 0) return triatt__kernel_scalar;
    if (which >= 2 && lcx_cpu_has_avx512()) return triatt__kernel_avx512;
    return triatt__kernel_avx2;
}
