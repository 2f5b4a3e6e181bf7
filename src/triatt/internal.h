/* libtriatt internals shared between the files of src/triatt (not installed). */
#ifndef TRIATT_INTERNAL_H
#define TRIATT_INTERNAL_H

#include "longctx/triatt.h"
#include "util/util.h"
#include <string.h>

/* Block kernel: the collapsed score of n keys against one centre, written to out[n]
 * (out = or += per `accumulate`). Per round the centre and trig sums are folded into
 *   wr[f] = cr·cs − ci·sn,  wi[f] = ci·cs + cr·sn,  m[f] = extra coefficient
 * so that score = Σ_f kr·wr + ki·wi + Σ_f m·sqrt(kr²+ki²+eps)  (a dot product plus norms).
 * w is laid out like the key (half: [wr | wi], adjacent: interleaved), n_rot floats. */
typedef struct {
    const float *w;      /* (n_rot) */
    const float *m;      /* (fc) extra coefficient per frequency */
    const float *m_il;   /* (n_rot) adjacent only: m[f]/2 in slots 2f and 2f+1 (SIMD form) */
    int n_rot, fc;
    triatt_pairing pairing;
    bool use_trig, use_extra;
    bool f16;            /* keys are IEEE half (uint16_t) instead of float */
    bool q8;             /* keys are Q8_0 rows (row_stride in bytes; n_rot % 32 == 0); wins over f16 */
    float eps;
} triatt_kparams;

/* IEEE half → float, portable (the scalar reference does not rely on F16C). */
static inline float triatt__h2f(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
    if (exp == 0) {
        if (!man) bits = sign;
        else {   /* subnormal: renormalise */
            exp = 127 - 15 + 1;
            while (!(man & 0x400)) { man <<= 1; exp--; }
            bits = sign | (exp << 23) | ((man & 0x3ff) << 13);
        }
    } else if (exp == 31) bits = sign | 0x7f800000u | (man << 13);
    else bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

/* Q8_0 row (n/32 blocks {half d; int8 q[32]}) → n floats d·q, portable (scalar reference). */
static inline void triatt__q8_row_to_f32(const unsigned char *row, int n, float *out)
{
    for (int b = 0; b < n / TRIATT_Q8_BLOCK; b++) {
        const unsigned char *blk = row + (size_t)b * TRIATT_Q8_BLOCK_BYTES;
        float d = triatt__h2f((uint16_t)(blk[0] | blk[1] << 8));
        for (int i = 0; i < TRIATT_Q8_BLOCK; i++) out[b * TRIATT_Q8_BLOCK + i] = d * (float)(int8_t)blk[2 + i];
    }
}

/* hot: keys (n, row_stride elements; float or half per p->f16; Q8_0 per p->q8 with row_stride
 * in bytes) → out (n). */
void triatt__kernel_scalar(const triatt_kparams *p, const void *keys, size_t row_stride, int n,
                           float *out, bool accumulate);
void triatt__kernel_avx2(const triatt_kparams *p, const void *keys, size_t row_stride, int n,
                         float *out, bool accumulate);
void triatt__kernel_avx512(const triatt_kparams *p, const void *keys, size_t row_stride, int n,
                           float *out, bool accumulate);
/* Multi-stream form: ns (1..TRIATT_MAX_STREAMS) independent (p[j], keys[j], row_stride[j],
 * out[j]) streams of n rows each, same contract per stream as above; p[j] may differ in w, m,
 * m_il only (terms, pairing, key format, n_rot, eps are those of p[0]). The SIMD versions take
 * rows of every stream per iteration so the hardware prefetcher keeps ns DRAM streams in
 * flight. out[j] may alias (several KV heads of a layer adding into one accumulator): row c
 * of stream j is added after row c of streams < j, as if the streams ran one after another. */
#define TRIATT_MAX_STREAMS 4
void triatt__kernel_ms_scalar(const triatt_kparams *const *p, int ns, const void *const *keys,
                              const size_t *row_stride, int n, float *const *out, bool accumulate);
void triatt__kernel_ms_avx2(const triatt_kparams *const *p, int ns, const void *const *keys,
                            const size_t *row_stride, int n, float *const *out, bool accumulate);
void triatt__kernel_ms_avx512(const triatt_kparams *const *p, int ns, const void *const *keys,
                              const size_t *row_stride, int n, float *const *out, bool accumulate);
/* Fast-path round: out[c] = e[c] + Σ_f a[c][f]·cs[f] − b[c][f]·sn[f] = e + feat·v with
 * v = [cs | −sn] (2·fc); feat (n, stride) rows [a_0..a_fc-1, b_0..b_fc-1, e]. */
void triatt__fast_kernel_scalar(const float *feat, size_t stride, int fc, const float *v, int n, float *out);
void triatt__fast_kernel_avx2(const float *feat, size_t stride, int fc, const float *v, int n, float *out);
void triatt__fast_kernel_avx512(const float *feat, size_t stride, int fc, const float *v, int n, float *out);

void triatt__fast_accum(const float *cr, const float *ci, const void *keys, size_t stride, int n, bool f16,
                        triatt_pairing pairing, int fc, float *feat, size_t fstride);

/* Kernel choice: 0 scalar, 1 AVX2, 2 AVX-512 (if the CPU has it); TRIATT_KERNEL env is
 * *not* read here (no globals) — the scorer picks the best unless told otherwise. */
typedef void (*triatt_kernel_fn)(const triatt_kparams *, const void *, size_t, int, float *, bool);
triatt_kernel_fn triatt__pick_kernel(int which);
typedef void (*triatt_kernel_ms_fn)(const triatt_kparams *const *, int, const void *const *, const size_t *, int,
                                    float *const *, bool);
triatt_kernel_ms_fn triatt__pick_kernel_ms(int which);
void triatt__scorer_force_kernel(triatt_scorer *s, int which);   /* tests */
void triatt__scorer_set_streams(triatt_scorer *s, int n_streams); /* tests, bench A/B (default 4) */

/* Small deterministic PRNG (splitmix64 / xoshiro-like) for random mode and the simulator. */
static inline uint64_t triatt__rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static inline double triatt__rng_unit(uint64_t *s) { return (triatt__rng_next(s) >> 11) * 0x1.0p-53; }

int triatt__calib_last_ignored(const triatt_calib *c);

#endif
