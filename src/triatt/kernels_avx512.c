/* AVX-512 scoring kernels (compiled with AVX-512 flags; reached only via run-time
 * dispatch in triatt__pick_kernel / the scorer). Same contract as kernels.c.
 *
 * F32 keys only: F16 and Q8_0 keys go to the AVX2 kernels, because for them the AVX2 4-row
 * kernel beats this one-row-at-a-time kernel on an AVX-512 Xeon, while with F32 keys the two
 * are level (figures: docs/benchmarks/avx512.md). */
#include "triatt/internal.h"
#include <immintrin.h>

static inline __m512 ld16(const void *base, size_t idx)
{
    return _mm512_loadu_ps((const float *)base + idx);
}

/* hot: one key row, any terms / pairing */
static inline __attribute__((always_inline)) float row_t(const triatt_kparams *p, const void *keys, size_t o)
{
    const int n_rot = p->n_rot, fc = p->fc;
    const __m512 veps = _mm512_set1_ps(p->eps);
    __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
    if (p->use_trig)
        for (int d = 0; d < n_rot; d += 32) {
            acc0 = _mm512_fmadd_ps(ld16(keys, o + d), _mm512_loadu_ps(p->w + d), acc0);
            acc1 = _mm512_fmadd_ps(ld16(keys, o + d + 16), _mm512_loadu_ps(p->w + d + 16), acc1);
        }
    if (p->use_extra) {
        if (p->pairing == TRIATT_PAIR_HALF) {
            for (int f = 0; f < fc; f += 16) {
                __m512 kr = ld16(keys, o + f), ki = ld16(keys, o + fc + f);
                __m512 s = _mm512_fmadd_ps(kr, kr, _mm512_fmadd_ps(ki, ki, veps));
                acc0 = _mm512_fmadd_ps(_mm512_sqrt_ps(s), _mm512_loadu_ps(p->m + f), acc0);
            }
        } else {
            for (int d = 0; d < n_rot; d += 16) {
                __m512 x = ld16(keys, o + d);
                __m512 sq = _mm512_mul_ps(x, x);
                __m512 s = _mm512_add_ps(_mm512_add_ps(sq, _mm512_permute_ps(sq, 0xB1)), veps);
                acc1 = _mm512_fmadd_ps(_mm512_sqrt_ps(s), _mm512_loadu_ps(p->m_il + d), acc1);
            }
        }
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1));
}

static inline __attribute__((always_inline)) void kernel_t(const triatt_kparams *p, const void *keys,
                                                           size_t stride, int n, float *out,
                                                           bool accumulate)
{
    for (int c = 0; c < n; c++) {          /* hot: one key row per iteration */
        float v = row_t(p, keys, (size_t)c * stride);
        out[c] = accumulate ? out[c] + v : v;
    }
}

void triatt__kernel_avx512(const triatt_kparams *p, const void *keys, size_t row_stride, int n,
                           float *out, bool accumulate)
{
    /* F16 and Q8_0 keys: the AVX2 kernel (see the top of the file) */
    if (p->n_rot % 32 || p->q8 || p->f16) { triatt__kernel_avx2(p, keys, row_stride, n, out, accumulate); return; }
    kernel_t(p, keys, row_stride, n, out, accumulate);
}

/* ns streams, one row of each per iteration (see triatt__kernel_ms_avx2 for why). */
static inline __attribute__((always_inline)) void ms_t(const triatt_kparams *const *pp, int ns,
                                                       const void *const *keys, const size_t *stride, int n,
                                                       float *const *out, bool accumulate)
{
    const int row_bytes = pp[0]->n_rot * 4;
    for (int c = 0; c < n; c++)            /* hot */
        for (int j = 0; j < ns; j++) {
            /* prefetch 4 rows ahead in each stream, as the AVX2 kernel (never faults) */
            const char *ahead = (const char *)((const float *)keys[j] + (size_t)(c + 4) * stride[j]);
            for (int o = 0; o < row_bytes; o += 64) _mm_prefetch(ahead + o, _MM_HINT_T0);
            float v = row_t(pp[j], keys[j], (size_t)c * stride[j]);
            out[j][c] = accumulate ? out[j][c] + v : v;
        }
}

void triatt__kernel_ms_avx512(const triatt_kparams *const *pp, int ns, const void *const *keys,
                              const size_t *row_stride, int n, float *const *out, bool accumulate)
{
    const triatt_kparams *p = pp[0];
    if (p->n_rot % 32 || p->q8 || p->f16) { triatt__kernel_ms_avx2(pp, ns, keys, row_stride, n, out, accumulate); return; }
    ms_t(pp, ns, keys, row_stride, n, out, accumulate);
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
