/* Scoring kernels: scalar reference and AVX2 (baseline x86-64-v3). The AVX-512 versions
 * live in kernels_avx512.c and are only reached through triatt__pick_kernel's run-time
 * dispatch. All kernels compute, per key row K (post-RoPE, n_rot scored dims):
 *   score = Σ_d K[d]·w[d] + Σ_f m[f]·sqrt(kr_f² + ki_f² + eps)
 * which is the collapsed TriAttention score with the centre and trig sums folded into w.
 *
 * Speed notes (hot: 28 layers × 4 KV heads × 32K cells = 3.7M rows per round; the figures
 * behind each choice are in docs/benchmarks/triatt.md):
 *  - the round is memory-bound: F16 keys are 0.94 GB per 32K round and one sequential
 *    stream reads ~8-11 GB/s on one core, while 4 interleaved streams read ~12-14 GB/s. So
 *    the scorer reads TRIATT_MAX_STREAMS streams at once (the KV heads of a layer, or
 *    segments of one head's cells when a layer has fewer heads) and the multi-stream kernel
 *    (triatt__kernel_ms_*, per-stream coefficients) takes row c of every stream per step
 *    (cell order), prefetching 4 rows ahead (more streams than that thrash the prefetchers).
 *    Keys in 4 KiB pages cost more per round than in 2 MiB huge pages (TLB walk and
 *    prefetcher restart every 16 rows of a stream): callers should back the cache with
 *    MADV_HUGEPAGE;
 *  - compute is bounded by vsqrtps (8 per row, ~40 cycles/row), the FMA pipes (40 FMAs per
 *    row, plus the F16/Q8_0 conversions) and the length of each row's dependency chains: rows
 *    are processed four at a time (rows4_half) and 2 of 8 frequency groups use rsqrt+Newton
 *    on the FMA pipes (F16/F32);
 *  - F16 keys are converted in registers (vcvtph2ps), halving the bytes streamed; Q8_0 keys
 *    (int8 + half scale per 32) halve them again but make the kernel compute-bound. */
#include "triatt/internal.h"
#include <immintrin.h>
#include "util/simd.h"
#include <assert.h>
#include <math.h>

void triatt__kernel_scalar(const triatt_kparams *p, const void *keys, size_t row_stride, int n,
                           float *out, bool accumulate)
{
    const int fc = p->fc;
    float row[TRIATT_MAX_HEAD_DIM];
    for (int c = 0; c < n; c++) {          /* hot (reference kernel) */
        const float *k;
        if (p->q8) {
            triatt__q8_row_to_f32((const unsigned char *)keys + (size_t)c * row_stride, p->n_rot, row);
            k = row;
        } else if (p->f16) {
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

/* Key formats of the AVX2 templates: FMT_F32, FMT_F16 (IEEE half), FMT_Q8 (Q8_0 blocks). */
enum { FMT_F32 = 0, FMT_F16 = 1, FMT_Q8 = 2 };

/* 8 elements [idx, idx+8) of a row as float. Q8_0: idx lies in block idx/32 (idx % 8 == 0, so
 * the 8 never straddle a block): int8 → int32 → float, times the block's half scale. */
static inline __m256 ldk(const void *row, size_t idx, const int fmt)
{
    if (fmt == FMT_Q8) {
        const unsigned char *blk = (const unsigned char *)row + (idx / TRIATT_Q8_BLOCK) * TRIATT_Q8_BLOCK_BYTES;
        uint16_t d;
        memcpy(&d, blk, 2);
        __m128i q = _mm_loadl_epi64((const __m128i *)(blk + 2 + idx % TRIATT_Q8_BLOCK));
        return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)), _mm256_set1_ps(_cvtsh_ss(d)));
    }
    return ld8(row, idx, fmt == FMT_F16);
}

/* Q8_0: the 8 int8 of [idx, idx+8) as float, unscaled (the caller multiplies by the block
 * scale). Sign-extend + convert: building halves 0x6400|(b^0x80) with one unpack and
 * vcvtph2ps instead is slower (docs/benchmarks/triatt.md). */
static inline __m256 ldq8raw(const void *row, size_t idx)
{
    const unsigned char *blk = (const unsigned char *)row + (idx / TRIATT_Q8_BLOCK) * TRIATT_Q8_BLOCK_BYTES;
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(blk + 2 + idx % TRIATT_Q8_BLOCK))));
}

/* Q8_0: block b's half scale of a row, broadcast to 8 lanes in the vector domain
 * (vpbroadcastw + vcvtph2ps). The groups of one block share it (the compiler CSEs the
 * repeats in the unrolled loop). Converting in registers keeps a store-forward off every
 * row's path (a scalar conversion into a stack array, then a broadcast load per group,
 * would put one there). */
static inline __m256 q8scale(const void *row, int b)
{
    short h;
    memcpy(&h, (const unsigned char *)row + (size_t)b * TRIATT_Q8_BLOCK_BYTES, 2);
    return _mm256_cvtph_ps(_mm_set1_epi16(h));
}

/* Row at offset off of a key block: off in elements (f32, fmt) or bytes (Q8_0). */
static inline const void *row_at(const void *keys, size_t off, const int fmt)
{
    if (fmt == FMT_Q8) return (const unsigned char *)keys + off;
    return fmt == FMT_F16 ? (const void *)((const uint16_t *)keys + off) : (const void *)((const float *)keys + off);
}

/* Bytes of the first n_rot elements of a row, and bytes per stride unit. */
static inline int row_bytes_of(int n_rot, const int fmt)
{
    return fmt == FMT_Q8 ? n_rot / TRIATT_Q8_BLOCK * TRIATT_Q8_BLOCK_BYTES : n_rot * (fmt == FMT_F16 ? 2 : 4);
}
static inline size_t unit_bytes(const int fmt) { return fmt == FMT_Q8 ? 1 : fmt == FMT_F16 ? 2 : 4; }

/* Frequency groups (8 pairs each, bit (f/8) mod 8 of the mask) whose m·sqrt term is taken as
 * rsqrt + one Newton step on the FMA pipes instead of vsqrtps, per key format. vsqrtps ymm is
 * not pipelined (~5 cycles each on Zen 3, 8 per 128-dim row) while the FMA pipes have some
 * slack for F16/F32 keys: 2 of 8 groups balance the two. Q8_0 rows spend 2 more multiplies per
 * group on the block scales, so their FMA pipes have no slack: no Newton groups there. Other
 * splits (all, 4, 3 or 1 of 8) are no better than 2 of 8 for F16 (docs/benchmarks/triatt.md). */
#define NEWTON_GROUPS 0x88
#define NEWTON_GROUPS_Q8 0x00

/* hot: the default (MLR, half pairing) terms of 4 key rows r[0..3], row j with the
 * coefficients pp[j] (4 KV heads of one cell in the multi-stream kernel, or 4 consecutive
 * rows of one stream); returns the 4 scores in lanes 0..3 of an __m128.
 * One pass over each row: every element is loaded (and for F16 / Q8_0 converted) once for
 * both the dot product and the norm. Per row two 8-lane accumulators: D (dot product, kr·wr
 * and ki·wi) and N (m·sqrt(kr²+ki²+eps)); the four rows are reduced together by one hadd tree
 * (3 vhaddps + 1 add for 4 rows instead of 2 hadd + extract + add per 2 rows).
 * Why 4 rows per call: the calls are long dependency chains (load → convert → s → sqrt →
 * N; 8 or 16 chained FMAs per accumulator; reduction; the stores of aliasing outputs), and a
 * 2-row call has too little independent work to cover its own chain, while the out-of-order
 * window (256 entries on Zen 3) cannot hold the next call as well. 4 rows per call give the
 * core 4 independent chains of the same length, and the reduction and output handling are
 * paid once per 4 rows (figures: docs/benchmarks/triatt.md).
 * Every lane is computed by the same instruction sequence whatever the other lanes hold, so a
 * row's score does not depend on the path (4 streams, consecutive rows, padded tail) that
 * computed it: the scorer's 1-stream and 4-stream rounds stay bit-identical.
 * FC is a compile-time constant in the common instance (64 = head_dim 128) so the loop
 * unrolls fully and the Newton choice is static; 0 = use pp[0]->fc. */
static inline __attribute__((always_inline)) __m128 rows4_half(const triatt_kparams *const *pp,
                                                               const void *const *r, const int fmt,
                                                               const int FC)
{
    const int fc = FC ? FC : pp[0]->fc;
    const int newton = fmt == FMT_Q8 ? NEWTON_GROUPS_Q8 : NEWTON_GROUPS;
    const __m256 veps = _mm256_set1_ps(pp[0]->eps);
    __m256 D[4], N[4];
    for (int j = 0; j < 4; j++) D[j] = N[j] = _mm256_setzero_ps();
#pragma GCC unroll 8
    for (int f = 0; f < fc; f += 8) {
        const bool nt = (newton >> ((f >> 3) & 7)) & 1;
#pragma GCC unroll 4
        for (int j = 0; j < 4; j++) {
            __m256 kr, ki;
            if (fmt == FMT_Q8) {
                kr = _mm256_mul_ps(ldq8raw(r[j], f), q8scale(r[j], f / TRIATT_Q8_BLOCK));
                ki = _mm256_mul_ps(ldq8raw(r[j], fc + f), q8scale(r[j], (fc + f) / TRIATT_Q8_BLOCK));
            } else {
                kr = ldk(r[j], f, fmt);
                ki = ldk(r[j], fc + f, fmt);
            }
            D[j] = _mm256_fmadd_ps(kr, _mm256_loadu_ps(pp[j]->w + f), D[j]);
            D[j] = _mm256_fmadd_ps(ki, _mm256_loadu_ps(pp[j]->w + fc + f), D[j]);
            const __m256 s = _mm256_fmadd_ps(kr, kr, _mm256_fmadd_ps(ki, ki, veps));
            const __m256 m = _mm256_loadu_ps(pp[j]->m + f);
            if (!nt) {
                N[j] = _mm256_fmadd_ps(_mm256_sqrt_ps(s), m, N[j]);
            } else {
                /* m·sqrt(s) = (m/2)·y·(3 − r·y), y = s·r, r = rsqrt(s) (one Newton step: ~1e-7
                 * relative). r is taken of max(s, 1e-30) so it stays finite when eps = 0 and a
                 * key pair is 0 (then y = 0·r = 0 exactly, as sqrt gives) */
                const __m256 rs = _mm256_rsqrt_ps(_mm256_max_ps(s, _mm256_set1_ps(1e-30f)));
                const __m256 y = _mm256_mul_ps(s, rs);
                const __m256 mh = _mm256_mul_ps(m, _mm256_set1_ps(0.5f));
                N[j] = _mm256_fmadd_ps(_mm256_mul_ps(mh, y), _mm256_fnmadd_ps(y, rs, _mm256_set1_ps(3.0f)), N[j]);
            }
        }
    }
    const __m256 x0 = _mm256_add_ps(D[0], N[0]), x1 = _mm256_add_ps(D[1], N[1]);
    const __m256 x2 = _mm256_add_ps(D[2], N[2]), x3 = _mm256_add_ps(D[3], N[3]);
    /* lane j of h (and of h's upper half): row j's 8 lanes summed pairwise in the same order */
    const __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(x0, x1), _mm256_hadd_ps(x2, x3));
    return _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
}

static inline float lane(__m128 v, const int j)
{
    return j == 0 ? _mm_cvtss_f32(v) : j == 1 ? _mm_cvtss_f32(_mm_movehdup_ps(v))
                  : j == 2 ? _mm_cvtss_f32(_mm_movehl_ps(v, v)) : _mm_cvtss_f32(_mm_shuffle_ps(v, v, 3));
}

/* Software prefetch of one row MS_PREFETCH_ROWS ahead in each stream of the multi-stream
 * kernel: the hardware prefetcher alone falls behind on 4 concurrent streams (distances of
 * 2-16 rows do alike; prefetching to L2 only does not help). Prefetches past the end of a
 * chunk are harmless (they never fault). */
#define MS_PREFETCH_ROWS 4
static inline void prefetch_row(const void *r, int bytes)
{
    const char *p = r;
    for (int o = 0; o < bytes; o += 64) _mm_prefetch(p + o, _MM_HINT_T0);
}

static inline void put(float *out, bool accumulate, float v) { *out = accumulate ? *out + v : v; }

/* hot: any terms / pairing, one row (the general path; the default terms use rows4_half). */
static inline __attribute__((always_inline)) float row_general(const triatt_kparams *p, const void *r,
                                                               const int fmt)
{
    const int n_rot = p->n_rot, fc = p->fc;
    const __m256 veps = _mm256_set1_ps(p->eps);
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps(), acc2 = _mm256_setzero_ps();
    if (p->use_trig)
        for (int d = 0; d < n_rot; d += 16) {
            acc0 = _mm256_fmadd_ps(ldk(r, d, fmt), _mm256_loadu_ps(p->w + d), acc0);
            acc1 = _mm256_fmadd_ps(ldk(r, d + 8, fmt), _mm256_loadu_ps(p->w + d + 8), acc1);
        }
    if (p->use_extra) {
        if (p->pairing == TRIATT_PAIR_HALF) {
            for (int f = 0; f < fc; f += 8) {
                __m256 kr = ldk(r, f, fmt), ki = ldk(r, fc + f, fmt);
                __m256 s = _mm256_fmadd_ps(kr, kr, _mm256_fmadd_ps(ki, ki, veps));
                acc2 = _mm256_fmadd_ps(_mm256_sqrt_ps(s), _mm256_loadu_ps(p->m + f), acc2);
            }
        } else {
            /* pairs are adjacent: square, add the swapped neighbour so both slots hold
             * kr²+ki², and weight each slot by m[f]/2 (m_il) */
            for (int d = 0; d < n_rot; d += 8) {
                __m256 x = ldk(r, d, fmt);
                __m256 sq = _mm256_mul_ps(x, x);
                __m256 s = _mm256_add_ps(_mm256_add_ps(sq, _mm256_permute_ps(sq, 0xB1)), veps);
                acc2 = _mm256_fmadd_ps(_mm256_sqrt_ps(s), _mm256_loadu_ps(p->m_il + d), acc2);
            }
        }
    }
    return lcx_hsum8(_mm256_add_ps(_mm256_add_ps(acc0, acc1), acc2));
}

static inline bool fast_terms(const triatt_kparams *p)
{
    return p->use_trig && p->use_extra && p->pairing == TRIATT_PAIR_HALF;
}

/* ns streams (ns <= TRIATT_MAX_STREAMS) of n rows each, row c of every stream per iteration:
 * the hardware prefetcher then runs ns concurrent sequential streams, which read DRAM faster
 * than one stream (docs/benchmarks/triatt.md). Stream j
 * has its own coefficients pp[j]; outputs may alias, so every row is added in stream order.
 * The software prefetch takes row c+4 of each stream by its stride, so it also covers
 * strided rows (an engine's cell-major cache, KV heads interleaved). */
static inline __attribute__((always_inline)) void ms_avx2_t(const triatt_kparams *const *pp, int ns,
                                                            const void *const *keys, const size_t *stride,
                                                            int n, float *const *out, bool accumulate,
                                                            const int fmt, const int FC)
{
    const triatt_kparams *p = pp[0];   /* terms, pairing, format, n_rot: the same in every stream */
    const int row_bytes = row_bytes_of(FC ? 2 * FC : p->n_rot, fmt);   /* scored part of a row */
    if (fast_terms(p) && ns == 4) {
        /* the default split, specialised so it unrolls: row c of all 4 streams per step (one
         * rows4_half call), pointers advancing by their strides. Cell order rather than two
         * consecutive rows of each stream per step: it keeps each stream's reads sequential
         * for the prefetchers, for contiguous and cell-major keys alike */
        const size_t es = unit_bytes(fmt);
        const size_t st0 = stride[0] * es, st1 = stride[1] * es, st2 = stride[2] * es, st3 = stride[3] * es;
        const char *q0 = keys[0], *q1 = keys[1], *q2 = keys[2], *q3 = keys[3];
        float *o0 = out[0], *o1 = out[1], *o2 = out[2], *o3 = out[3];
        /* the 4 KV heads of a layer adding into one accumulator (the scorer's default): the
         * row's 4 scores are added to it in a register, in stream order — the same float
         * additions as 4 read-modify-writes, without 3 store-to-load round trips per cell */
        const bool one_out = accumulate && o1 == o0 && o2 == o0 && o3 == o0;
        for (int c = 0; c < n; c++) {      /* hot: row c of each of the 4 streams per step */
            prefetch_row(q0 + MS_PREFETCH_ROWS * st0, row_bytes);
            prefetch_row(q1 + MS_PREFETCH_ROWS * st1, row_bytes);
            prefetch_row(q2 + MS_PREFETCH_ROWS * st2, row_bytes);
            prefetch_row(q3 + MS_PREFETCH_ROWS * st3, row_bytes);
            const void *const r4[4] = {q0, q1, q2, q3};
            const __m128 v = rows4_half(pp, r4, fmt, FC);
            if (one_out) {
                float a = o0[c];
                a += lane(v, 0);
                a += lane(v, 1);
                a += lane(v, 2);
                a += lane(v, 3);
                o0[c] = a;
            } else {
                put(o0 + c, accumulate, lane(v, 0));
                put(o1 + c, accumulate, lane(v, 1));
                put(o2 + c, accumulate, lane(v, 2));
                put(o3 + c, accumulate, lane(v, 3));
            }
            q0 += st0; q1 += st1; q2 += st2; q3 += st3;
        }
        return;
    }
    if (fast_terms(p)) {
        /* 2 or 3 streams (a layer's last KV heads when KV % 4 != 0, or a forced stream
         * count): row c of every stream per step, the 4-row kernel padded with the last
         * stream (its extra lanes are discarded); rare, so the waste does not matter */
        for (int c = 0; c < n; c++) {      /* hot */
            const triatt_kparams *q4[4];
            const void *r4[4];
            for (int j = 0; j < 4; j++) {
                const int jj = j < ns ? j : ns - 1;
                q4[j] = pp[jj];
                r4[j] = row_at(keys[jj], (size_t)c * stride[jj], fmt);
                if (j < ns) prefetch_row(row_at(keys[j], (size_t)(c + MS_PREFETCH_ROWS) * stride[j], fmt), row_bytes);
            }
            float t[4];
            _mm_storeu_ps(t, rows4_half(q4, r4, fmt, FC));
            for (int j = 0; j < ns; j++) put(out[j] + c, accumulate, t[j]);
        }
        return;
    }
    for (int c = 0; c < n; c++)            /* hot */
        for (int j = 0; j < ns; j++) {
            prefetch_row(row_at(keys[j], (size_t)(c + MS_PREFETCH_ROWS) * stride[j], fmt), row_bytes);
            put(out[j] + c, accumulate, row_general(pp[j], row_at(keys[j], (size_t)c * stride[j], fmt), fmt));
        }
}

/* Single stream: the n rows are cut into 4 equal parts read in lock-step (rows c, c+q, c+2q,
 * c+3q per rows4_half call, q = n/4, each part prefetched MS_PREFETCH_ROWS ahead); the 0-3
 * rows after them go through one call padded with the last row. Same per-row arithmetic as
 * the multi-stream kernel. Why parts rather than 4 consecutive rows per call: from DRAM the
 * consecutive form is much slower (the interleaved line order of 4 adjacent rows seems to
 * defeat the hardware prefetchers; software prefetch does not help), while 4 parts 16 KiB
 * apart in a 256-row chunk are 4 sequential streams (docs/benchmarks/triatt.md). */
static inline __attribute__((always_inline)) void kernel_avx2_t(const triatt_kparams *p, const void *keys,
                                                                size_t stride, int n, float *out,
                                                                bool accumulate, const int fmt, const int FC)
{
    if (fast_terms(p)) {
        const triatt_kparams *const p4[4] = {p, p, p, p};
        int c = 0;
        const int row_bytes = row_bytes_of(FC ? 2 * FC : p->n_rot, fmt);
        const int q = n / 4;
        const size_t sq = (size_t)q * stride;
        for (; c < q; c++) {               /* hot: rows c, c+q, c+2q, c+3q per iteration */
            const void *r0 = row_at(keys, (size_t)c * stride, fmt);
            const void *const r4[4] = {r0, row_at(r0, sq, fmt), row_at(r0, 2 * sq, fmt), row_at(r0, 3 * sq, fmt)};
            for (int j = 0; j < 4; j++)
                prefetch_row(row_at(r4[j], (size_t)MS_PREFETCH_ROWS * stride, fmt), row_bytes);
            const __m128 v = rows4_half(p4, r4, fmt, FC);
            put(out + c, accumulate, lane(v, 0));
            put(out + c + q, accumulate, lane(v, 1));
            put(out + c + 2 * q, accumulate, lane(v, 2));
            put(out + c + 3 * q, accumulate, lane(v, 3));
        }
        c = 4 * q;
        if (c < n) {
            const void *r4[4];
            for (int j = 0; j < 4; j++) r4[j] = row_at(keys, (size_t)LCX_MIN(c + j, n - 1) * stride, fmt);
            float t[4];
            _mm_storeu_ps(t, rows4_half(p4, r4, fmt, FC));
            for (int j = 0; j < n - c; j++) put(out + c + j, accumulate, t[j]);
        }
        return;
    }
    for (int c = 0; c < n; c++)            /* hot: one key row per iteration */
        put(out + c, accumulate, row_general(p, row_at(keys, (size_t)c * stride, fmt), fmt));
}

/* Instantiates the template for the key format and the common fc. */
#define DISPATCH(CALL)                                                               \
    do {                                                                             \
        if (p->q8) { if (p->fc == 64) CALL(FMT_Q8, 64); else CALL(FMT_Q8, 0); }      \
        else if (p->f16) { if (p->fc == 64) CALL(FMT_F16, 64); else CALL(FMT_F16, 0); } \
        else { if (p->fc == 64) CALL(FMT_F32, 64); else CALL(FMT_F32, 0); }          \
    } while (0)

/* SIMD needs n_rot % 16 == 0 (and whole blocks for Q8_0); other shapes use the scalar kernel */
static inline bool avx2_shape_ok(const triatt_kparams *p)
{
    return p->n_rot % 16 == 0 && (!p->q8 || p->n_rot % TRIATT_Q8_BLOCK == 0);
}

void triatt__kernel_avx2(const triatt_kparams *p, const void *keys, size_t row_stride, int n,
                         float *out, bool accumulate)
{
    if (!avx2_shape_ok(p)) { triatt__kernel_scalar(p, keys, row_stride, n, out, accumulate); return; }
#define K1(F, FCV) kernel_avx2_t(p, keys, row_stride, n, out, accumulate, F, FCV)
    DISPATCH(K1);
#undef K1
}

/* Row by row in stream order, so streams whose outputs alias (several KV heads adding into
 * one accumulator) see the same sequence of additions as in the SIMD kernels. */
void triatt__kernel_ms_scalar(const triatt_kparams *const *pp, int ns, const void *const *keys,
                              const size_t *row_stride, int n, float *const *out, bool accumulate)
{
    for (int c = 0; c < n; c++)
        for (int j = 0; j < ns; j++) {
            const triatt_kparams *p = pp[j];
            size_t off = (size_t)c * row_stride[j] * (p->q8 ? 1 : p->f16 ? 2 : 4);
            triatt__kernel_scalar(p, (const char *)keys[j] + off, row_stride[j], 1, out[j] + c, accumulate);
        }
}

void triatt__kernel_ms_avx2(const triatt_kparams *const *pp, int ns, const void *const *keys,
                            const size_t *row_stride, int n, float *const *out, bool accumulate)
{
    assert(ns >= 1 && ns <= TRIATT_MAX_STREAMS);
    const triatt_kparams *p = pp[0];
    if (ns == 1) { triatt__kernel_avx2(p, keys[0], row_stride[0], n, out[0], accumulate); return; }
    if (!avx2_shape_ok(p)) { triatt__kernel_ms_scalar(pp, ns, keys, row_stride, n, out, accumulate); return; }
#define KM(F, FCV) ms_avx2_t(pp, ns, keys, row_stride, n, out, accumulate, F, FCV)
    DISPATCH(KM);
#undef KM
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
    if (which >= 2 && lcx__cpu_has_avx512()) return triatt__kernel_avx512;
    return triatt__kernel_avx2;
}

triatt_kernel_ms_fn triatt__pick_kernel_ms(int which)
{
    if (which == 0) return triatt__kernel_ms_scalar;
    if (which >= 2 && lcx__cpu_has_avx512()) return triatt__kernel_ms_avx512;
    return triatt__kernel_ms_avx2;
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
