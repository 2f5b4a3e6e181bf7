/* Scoring kernels: scalar reference and AVX2 (baseline x86-64-v3). The AVX-512 versions
 * live in kernels_avx512.c and are only reached through triatt__pick_kernel's run-time
 * dispatch. All kernels compute, per key row K (post-RoPE, n_rot scored dims):
 *   score = Σ_d K[d]·w[d] + Σ_f m[f]·sqrt(kr_f² + ki_f² + eps)
 * which is the collapsed TriAttention score with the centre and trig sums folded into w.
 *
 * Speed notes (hot: 28 layers × 4 KV heads × 32K cells = 3.7M rows per round):
 *  - one row per iteration with two accumulators; measured on the EPYC dev box, a 4-row
 *    variant (8 chains, one hadd tree) and rsqrt+Newton instead of vsqrtps were both slower
 *    (compute-only 106 → 112 ms per 32K round; streaming 300 → 390 ms), so they were dropped;
 *  - F16 keys are converted in registers (vcvtph2ps), halving the bytes streamed — the round
 *    is memory-bound for f32 keys at 32K cells (1.9 GB per round). */
#include "triatt/internal.h"
#include <immintrin.h>
#include "util/simd.h"
#include <math.h>

void triatt__kernel_scalar(const triatt_kparams *p, const void *keys, size_t row_stride, int n,
                           float *out, bool accumulate)
{
    const int fc = p->fc;
    float row[TRIATT_MAX_HEAD_DIM];
    for (int c = 0; c < n; c++) {          /* hot (reference kernel) */
        const float *k;
        if (p->f16) {
            const uint16_t *h = (const uint16_t *)keys + (size_t)c * row_stride;
            for (int d = 0; d < p->n_rot; d++) row[d] = triatt__h2f(h[d]);
            k = row;
        } else {
            k = (const float *)keys + (size_t)c * row_stride;
        }
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

static inline __m256 ld8(const void *base, size_t idx, bool f16)
{
    if (f16) return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)base + idx)));
    return _mm256_loadu_ps((const float *)base + idx);
}

static inline __attribute__((always_inline)) void kernel_avx2_t(const triatt_kparams *p, const void *keys,
                                                                size_t stride, int n, float *out,
                                                                bool accumulate, const bool f16)
{
    const int n_rot = p->n_rot, fc = p->fc;
    const __m256 veps = _mm256_set1_ps(p->eps);
    if (p->use_trig && p->use_extra) {
        /* the default (MLR) terms: one pass over the row, each element loaded (and for F16
         * converted) once for both the dot product and the norm — 25–35% faster than two
         * passes in an in-process A/B on the dev box */
        for (int c = 0; c < n; c++) {      /* hot: one key row per iteration */
            const size_t o = (size_t)c * stride;
            __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps(), acc2 = _mm256_setzero_ps();
            if (p->pairing == TRIATT_PAIR_HALF) {
                for (int f = 0; f < fc; f += 8) {
                    __m256 kr = ld8(keys, o + f, f16), ki = ld8(keys, o + fc + f, f16);
                    acc0 = _mm256_fmadd_ps(kr, _mm256_loadu_ps(p->w + f), acc0);
                    acc1 = _mm256_fmadd_ps(ki, _mm256_loadu_ps(p->w + fc + f), acc1);
                    __m256 s = _mm256_fmadd_ps(kr, kr, _mm256_fmadd_ps(ki, ki, veps));
                    acc2 = _mm256_fmadd_ps(_mm256_sqrt_ps(s), _mm256_loadu_ps(p->m + f), acc2);
                }
            } else {
                for (int d = 0; d < n_rot; d += 8) {
                    __m256 x = ld8(keys, o + d, f16);
                    acc0 = _mm256_fmadd_ps(x, _mm256_loadu_ps(p->w + d), acc0);
                    __m256 sq = _mm256_mul_ps(x, x);
                    __m256 s = _mm256_add_ps(_mm256_add_ps(sq, _mm256_permute_ps(sq, 0xB1)), veps);
                    acc2 = _mm256_fmadd_ps(_mm256_sqrt_ps(s), _mm256_loadu_ps(p->m_il + d), acc2);
                }
            }
            float v = lcx_hsum8(_mm256_add_ps(_mm256_add_ps(acc0, acc1), acc2));
            out[c] = accumulate ? out[c] + v : v;
        }
        return;
    }
    for (int c = 0; c < n; c++) {          /* hot: one key row per iteration */
        const size_t o = (size_t)c * stride;
        __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
        if (p->use_trig)
            for (int d = 0; d < n_rot; d += 16) {
                acc0 = _mm256_fmadd_ps(ld8(keys, o + d, f16), _mm256_loadu_ps(p->w + d), acc0);
                acc1 = _mm256_fmadd_ps(ld8(keys, o + d + 8, f16), _mm256_loadu_ps(p->w + d + 8), acc1);
            }
        if (p->use_extra) {
            if (p->pairing == TRIATT_PAIR_HALF) {
                for (int f = 0; f < fc; f += 8) {
                    __m256 kr = ld8(keys, o + f, f16), ki = ld8(keys, o + fc + f, f16);
                    __m256 s = _mm256_fmadd_ps(kr, kr, _mm256_fmadd_ps(ki, ki, veps));
                    acc0 = _mm256_fmadd_ps(_mm256_sqrt_ps(s), _mm256_loadu_ps(p->m + f), acc0);
                }
            } else {
                /* pairs are adjacent: square, add the swapped neighbour so both slots hold
                 * kr²+ki², and weight each slot by m[f]/2 (m_il) */
                for (int d = 0; d < n_rot; d += 8) {
                    __m256 x = ld8(keys, o + d, f16);
                    __m256 sq = _mm256_mul_ps(x, x);
                    __m256 s = _mm256_add_ps(_mm256_add_ps(sq, _mm256_permute_ps(sq, 0xB1)), veps);
                    acc1 = _mm256_fmadd_ps(_mm256_sqrt_ps(s), _mm256_loadu_ps(p->m_il + d), acc1);
                }
            }
        }
        float v = lcx_hsum8(_mm256_add_ps(acc0, acc1));
        out[c] = accumulate ? out[c] + v : v;
    }
}

void triatt__kernel_avx2(const triatt_kparams *p, const void *keys, size_t row_stride, int n,
                         float *out, bool accumulate)
{
    if (p->n_rot % 16) { triatt__kernel_scalar(p, keys, row_stride, n, out, accumulate); return; }
    if (p->f16) kernel_avx2_t(p, keys, row_stride, n, out, accumulate, true);
    else kernel_avx2_t(p, keys, row_stride, n, out, accumulate, false);
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
        out[c] = lcx_hsum8(_mm256_add_ps(a0, a1)) + r[len];
    }
}

triatt_kernel_fn triatt__pick_kernel(int which)
{
    if (which == 0) return triatt__kernel_scalar;
    if (which >= 2 && lcx_cpu_has_avx512()) return triatt__kernel_avx512;
    return triatt__kernel_avx2;
}

/* Fast-path feature accumulation for one block: feat rows [a | b | e] += (A_f, B_f) of each key
 * against the block centre (e is done by the scoring kernel with use_trig off). */
void triatt__fast_accum(const float *cr, const float *ci, const void *keys, size_t stride, int n, bool f16,
                        triatt_pairing pairing, int fc, float *feat, size_t fstride)
{
    float row[TRIATT_MAX_HEAD_DIM];
    for (int c = 0; c < n; c++) {
        float *dst = feat + (size_t)c * fstride;
        const size_t o = (size_t)c * stride;
        if (pairing == TRIATT_PAIR_HALF && fc % 8 == 0) {
            for (int f = 0; f < fc; f += 8) {
                __m256 kr = ld8(keys, o + f, f16), ki = ld8(keys, o + fc + f, f16);
                __m256 r = _mm256_loadu_ps(cr + f), i = _mm256_loadu_ps(ci + f);
                __m256 A = _mm256_fmadd_ps(r, kr, _mm256_mul_ps(i, ki));
                __m256 B = _mm256_fmsub_ps(i, kr, _mm256_mul_ps(r, ki));
                _mm256_storeu_ps(dst + f, _mm256_add_ps(_mm256_loadu_ps(dst + f), A));
                _mm256_storeu_ps(dst + fc + f, _mm256_add_ps(_mm256_loadu_ps(dst + fc + f), B));
            }
            continue;
        }
        const float *k;
        if (f16) {
            for (int d = 0; d < 2 * fc; d++) row[d] = triatt__h2f(((const uint16_t *)keys)[o + d]);
            k = row;
        } else {
            k = (const float *)keys + o;
        }
        for (int f = 0; f < fc; f++) {
            float kr, ki;
            if (pairing == TRIATT_PAIR_HALF) { kr = k[f]; ki = k[f + fc]; }
            else { kr = k[2 * f]; ki = k[2 * f + 1]; }
            dst[f] += cr[f] * kr + ci[f] * ki;
            dst[fc + f] += ci[f] * kr - cr[f] * ki;
        }
    }
}
