/* AVX-512 matmul kernels, compiled with -mavx512f/bw/vl/dq/vnni (see CMakeLists.txt) and
 * reached only through eng_matmul_isa's run-time dispatch when lcx_cpu_has_avx512().
 *
 * What is here:
 *  - Q4_0/Q5_0/Q8_0 x Q8_0 with AVX512-VNNI: the AVX2 tile structure (quant_avx2.c) with
 *    the block product done by one vpdpbusd (u8 x s8 -> int32, no int16 saturation step).
 *    Prompt tiles feed the weight quants as unsigned bytes (Q4_0: q, Q5_0: q, Q8_0: w+128 —
 *    fine here because vpdpbusd accumulates in int32) and take the zero point (8/16/128) out
 *    exactly, in the integer domain, with the activation block sums (see load_dx). Generation tiles
 *    use the sign trick (abs/sign + dpbusd). 256-bit vectors (AVX512VL encoding): a Q8_0
 *    block is exactly 32 bytes, so wider vectors would mix two blocks' scales per register.
 *  - F32 / F16 / BF16 with 512-bit FMAs (16 lanes).
 * Everything else (K-quants; Q8_0 family when the CPU has AVX-512 without VNNI) returns
 * false and runs the AVX2 kernels, which are correct on these CPUs too. */
#include <immintrin.h>
#include "util/simd.h"
#include <string.h>

#include "engine/quant.h"
#include "util/util.h"

#define AI static inline __attribute__((always_inline))
#define SEG 512  /* blocks per column segment */
#define TT 8     /* token tile for prompts */

AI float ldh(const void *p)
{
    uint16_t h;
    memcpy(&h, p, 2);
    return _cvtsh_ss(h);
}

AI __m256i bits_to_bytes(const uint8_t *p)
{
    uint32_t x32;
    memcpy(&x32, p, 4);
    return _mm256_movm_epi8((__mmask32)x32); /* byte i = 0xFF where bit i is set */
}

AI __m256i q80fam_unpack(eng_type wt, const uint8_t *blk)
{
    if (wt == ENG_T_Q8_0) return _mm256_loadu_si256((const __m256i *)(blk + 2));
    const __m128i lo4 = _mm_set1_epi8(0xF);
    if (wt == ENG_T_Q4_0) {
        __m128i q = _mm_loadu_si128((const __m128i *)(blk + 2));
        __m256i v = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(q, 4), lo4), _mm_and_si128(q, lo4));
        return _mm256_sub_epi8(v, _mm256_set1_epi8(8));
    }
    __m128i q = _mm_loadu_si128((const __m128i *)(blk + 6));
    __m256i v = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(q, 4), lo4), _mm_and_si128(q, lo4));
    __m256i hb = _mm256_andnot_si256(bits_to_bytes(blk + 2), _mm256_set1_epi8((char)0xF0));
    return _mm256_or_si256(v, hb);
}

/* Unsigned quants: Q4_0 0..15, Q5_0 0..31, Q8_0 w+128 (0..255); zero points 8/16/128. */
AI __m256i q80fam_unpack_u(eng_type wt, const uint8_t *blk)
{
    if (wt == ENG_T_Q8_0)
        return _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(blk + 2)), _mm256_set1_epi8((char)0x80));
    const __m128i lo4 = _mm_set1_epi8(0xF);
    __m128i q = _mm_loadu_si128((const __m128i *)(blk + (wt == ENG_T_Q4_0 ? 2 : 6)));
    __m256i v = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(q, 4), lo4), _mm_and_si128(q, lo4));
    if (wt == ENG_T_Q4_0) return v;
    return _mm256_or_si256(v, _mm256_and_si256(bits_to_bytes(blk + 2), _mm256_set1_epi8(0x10)));
}

AI size_t q80fam_bytes(eng_type wt)
{
    return wt == ENG_T_Q4_0 ? sizeof(eng_block_q4_0) : wt == ENG_T_Q5_0 ? sizeof(eng_block_q5_0) : sizeof(eng_block_q8_0);
}

/* dxf[b*TT + t] = d of token t's block b; when zoff != 0, cxf[b*TT + t] = zoff * Σ x / 8 of
 * that block, subtracted from each of the 8 int32 lanes of the block product before scaling
 * so that Σ (u - zoff)·x is exact, as in llama.cpp (a float correction after scaling cancels
 * a large sum and moves logits; see quant_avx2.c load_dx_q8_0). Unused token lanes are zeroed. */
static void load_dx(const uint8_t *X, size_t xrb, int T, int64_t nb, float *dxf, int zoff, float *cxf)
{
    for (int t = 0; t < TT; t++)
        for (int64_t b = 0; b < nb; b++) {
            const uint8_t *blk = t < T ? X + t * xrb + b * sizeof(eng_block_q8_0) : NULL;
            const float d = blk ? ldh(blk) : 0.f;
            dxf[b * TT + t] = d;
            if (!zoff) continue;
            int32_t sum = 0;
            if (blk) {
                __m256i s = _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_set1_epi8(1),
                                                _mm256_loadu_si256((const __m256i *)(blk + 2)));
                __m128i h = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
                h = _mm_hadd_epi32(h, h);
                h = _mm_hadd_epi32(h, h);
                sum = _mm_cvtsi128_si32(h);
            }
            cxf[b * TT + t] = (float)zoff * (float)sum * 0.125f;
        }
}

/* hot: R rows x T tokens, VNNI block products. */
AI void q80_tile_vnni(eng_type wt, const int R, const int T, const uint8_t *W, size_t wrb, const uint8_t *X,
                      size_t xrb, int64_t nb, const float *dxf, const float *cxf, bool add, float *y, int64_t ldy)
{
    const size_t bs = q80fam_bytes(wt);
    const bool uns = R == 1 && T > 1;
    __m256 acc[4][TT];
#pragma GCC unroll 8
    for (int r = 0; r < R; r++)
#pragma GCC unroll 8
        for (int t = 0; t < T; t++) acc[r][t] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        __m256i aw[4], sw[4];
        __m256 dw[4];
        float sc[TT];
#pragma GCC unroll 8
        for (int r = 0; r < R; r++) {
            const uint8_t *blk = W + r * wrb + b * bs;
            if (T == 1) _mm_prefetch((const char *)blk + 4096, _MM_HINT_T0);
            if (uns) {
                aw[r] = q80fam_unpack_u(wt, blk);
                sw[r] = aw[r];
            } else {
                sw[r] = q80fam_unpack(wt, blk);
                aw[r] = _mm256_abs_epi8(sw[r]);
            }
            uint16_t h;
            memcpy(&h, blk, 2);
            dw[r] = _mm256_cvtph_ps(_mm_set1_epi16((short)h));
        }
        if (R == 1 && T > 1) _mm256_storeu_ps(sc, _mm256_mul_ps(dw[0], _mm256_loadu_ps(dxf + b * TT)));
#pragma GCC unroll 8
        for (int t = 0; t < T; t++) {
            const uint8_t *xb = X + t * xrb + b * sizeof(eng_block_q8_0);
            const __m256i x = _mm256_loadu_si256((const __m256i *)(xb + 2));
            const __m256 dx = _mm256_broadcast_ss(dxf + b * TT + t);
            const __m256 c8 = uns ? _mm256_broadcast_ss(cxf + b * TT + t) : _mm256_setzero_ps();
#pragma GCC unroll 8
            for (int r = 0; r < R; r++) {
                __m256i p = _mm256_dpbusd_epi32(_mm256_setzero_si256(), aw[r], uns ? x : _mm256_sign_epi8(x, sw[r]));
                __m256 pf = _mm256_cvtepi32_ps(p);
                if (uns) pf = _mm256_sub_ps(pf, c8);
                const __m256 d = (R == 1 && T > 1) ? _mm256_broadcast_ss(sc + t) : _mm256_mul_ps(dw[r], dx);
                acc[r][t] = _mm256_fmadd_ps(pf, d, acc[r][t]);
            }
        }
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; r++)
#pragma GCC unroll 8
        for (int t = 0; t < T; t++) {
            float v = lcx_hsum8(acc[r][t]);
            if (add) y[t * ldy + r] += v;
            else y[t * ldy + r] = v;
        }
}

#define Q80_CASES(WT)                                                                           \
    switch (R * 16 + T) {                                                                       \
    case 4 * 16 + 1: q80_tile_vnni(WT, 4, 1, W, wrb, X, xrb, nb, dxf, cxf, add, y, ldy); break;      \
    case 1 * 16 + 8: q80_tile_vnni(WT, 1, 8, W, wrb, X, xrb, nb, dxf, cxf, add, y, ldy); break;      \
    case 1 * 16 + 7: q80_tile_vnni(WT, 1, 7, W, wrb, X, xrb, nb, dxf, cxf, add, y, ldy); break;      \
    case 1 * 16 + 6: q80_tile_vnni(WT, 1, 6, W, wrb, X, xrb, nb, dxf, cxf, add, y, ldy); break;      \
    case 1 * 16 + 5: q80_tile_vnni(WT, 1, 5, W, wrb, X, xrb, nb, dxf, cxf, add, y, ldy); break;      \
    case 1 * 16 + 4: q80_tile_vnni(WT, 1, 4, W, wrb, X, xrb, nb, dxf, cxf, add, y, ldy); break;      \
    case 1 * 16 + 3: q80_tile_vnni(WT, 1, 3, W, wrb, X, xrb, nb, dxf, cxf, add, y, ldy); break;      \
    case 1 * 16 + 2: q80_tile_vnni(WT, 1, 2, W, wrb, X, xrb, nb, dxf, cxf, add, y, ldy); break;      \
    default: q80_tile_vnni(WT, 1, 1, W, wrb, X, xrb, nb, dxf, cxf, add, y, ldy); break;              \
    }
#define DEF_Q80_TILE(NAME, WT)                                                                          \
    static void NAME(int R, int T, const uint8_t *W, size_t wrb, const uint8_t *X, size_t xrb, int64_t nb, \
                     const float *dxf, const float *cxf, bool add, float *y, int64_t ldy)               \
    {                                                                                                   \
        Q80_CASES(WT)                                                                                   \
    }
DEF_Q80_TILE(tile_q8_0, ENG_T_Q8_0)
DEF_Q80_TILE(tile_q4_0, ENG_T_Q4_0)
DEF_Q80_TILE(tile_q5_0, ENG_T_Q5_0)

typedef void (*q80_fn)(int R, int T, const uint8_t *W, size_t wrb, const uint8_t *X, size_t xrb, int64_t nb,
                       const float *dxf, const float *cxf, bool add, float *y, int64_t ldy);

/* Same traversal as the AVX2 driver: column segments, L2 row chunks, token tiles. */
static void q80_matmul(q80_fn fn, size_t bs, const uint8_t *W, size_t wrb, int64_t n_in, int64_t r0, int64_t r1,
                       const uint8_t *X, size_t xrb, int64_t n_tok, float *y, int64_t ldy)
{
    float dxf[TT * SEG], cxf[TT * SEG];
    const int zoff = bs == sizeof(eng_block_q4_0) ? 8 : bs == sizeof(eng_block_q5_0) ? 16 : 128;
    const int64_t nb_all = n_in / 32;
    int64_t chunk = (int64_t)((96 * 1024) / (wrb ? wrb : 1));
    chunk = chunk < 4 ? 4 : chunk;
    for (int64_t s0 = 0; s0 < nb_all; s0 += SEG) {
        const int64_t nb = nb_all - s0 < SEG ? nb_all - s0 : SEG;
        const bool add = s0 > 0;
        const uint8_t *Ws = W + s0 * bs, *Xs = X + s0 * sizeof(eng_block_q8_0);
        if (n_tok == 1) {
            load_dx(Xs, xrb, 1, nb, dxf, 0, cxf);
            /* one row per pass: a single sequential weight stream (on the AVX2 machine, 4
             * interleaved row streams read DRAM at 6.6 GB/s, one at 10.4; not measured on
             * AVX-512 hardware) */
            for (int64_t r = r0; r < r1; r++) fn(1, 1, Ws + r * wrb, wrb, Xs, xrb, nb, dxf, cxf, add, y + r, ldy);
            continue;
        }
        for (int64_t c0 = r0; c0 < r1; c0 += chunk) {
            const int64_t c1 = c0 + chunk < r1 ? c0 + chunk : r1;
            for (int64_t t = 0; t < n_tok; t += TT) {
                const int T = n_tok - t < TT ? (int)(n_tok - t) : TT;
                load_dx(Xs + t * xrb, xrb, T, nb, dxf, T > 1 ? zoff : 0, cxf);
                for (int64_t r = c0; r < c1; r++)
                    fn(1, T, Ws + r * wrb, wrb, Xs + t * xrb, xrb, nb, dxf, cxf, add, y + t * ldy + r, ldy);
            }
        }
    }
}

/* ------------------------------------------------------------------ floats, 16 lanes */

AI __m512 fl_load16(eng_type wt, const uint8_t *row, int64_t k)
{
    if (wt == ENG_T_F32) return _mm512_loadu_ps((const float *)row + k);
    const __m256i h = _mm256_loadu_si256((const __m256i *)((const uint16_t *)row + k));
    if (wt == ENG_T_F16) return _mm512_cvtph_ps(h);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

AI float fl_elem(eng_type wt, const uint8_t *row, int64_t j)
{
    if (wt == ENG_T_F32) return ((const float *)row)[j];
    if (wt == ENG_T_F16) return eng_fp16_to_fp32(((const uint16_t *)row)[j]);
    return eng_bf16_to_fp32(((const uint16_t *)row)[j]);
}

/* hot: R rows x T tokens of F32/F16/BF16 (activations in the same type). */
AI void fl_tile(eng_type wt, const int R, const int T, const uint8_t *W, size_t wrb, const uint8_t *X, size_t xrb,
                int64_t n, float *y, int64_t ldy)
{
    __m512 acc[4][4];
#pragma GCC unroll 8
    for (int r = 0; r < R; r++)
#pragma GCC unroll 8
        for (int t = 0; t < T; t++) acc[r][t] = _mm512_setzero_ps();
    int64_t k = 0;
    for (; k + 16 <= n; k += 16) {
        __m512 w[4];
#pragma GCC unroll 8
        for (int r = 0; r < R; r++) w[r] = fl_load16(wt, W + r * wrb, k);
#pragma GCC unroll 8
        for (int t = 0; t < T; t++) {
            const __m512 x = fl_load16(wt, X + t * xrb, k);
#pragma GCC unroll 8
            for (int r = 0; r < R; r++) acc[r][t] = _mm512_fmadd_ps(w[r], x, acc[r][t]);
        }
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; r++)
#pragma GCC unroll 8
        for (int t = 0; t < T; t++) {
            float s = _mm512_reduce_add_ps(acc[r][t]);
            for (int64_t j = k; j < n; j++) s += fl_elem(wt, W + r * wrb, j) * fl_elem(wt, X + t * xrb, j);
            y[t * ldy + r] = s;
        }
}

#define FL_CASES(WT)                                                             \
    switch (R * 16 + T) {                                                        \
    case 4 * 16 + 1: fl_tile(WT, 4, 1, W, wrb, X, xrb, n, y, ldy); break;        \
    case 2 * 16 + 4: fl_tile(WT, 2, 4, W, wrb, X, xrb, n, y, ldy); break;        \
    case 2 * 16 + 3: fl_tile(WT, 2, 3, W, wrb, X, xrb, n, y, ldy); break;        \
    case 2 * 16 + 2: fl_tile(WT, 2, 2, W, wrb, X, xrb, n, y, ldy); break;        \
    case 2 * 16 + 1: fl_tile(WT, 2, 1, W, wrb, X, xrb, n, y, ldy); break;        \
    case 1 * 16 + 4: fl_tile(WT, 1, 4, W, wrb, X, xrb, n, y, ldy); break;        \
    case 1 * 16 + 3: fl_tile(WT, 1, 3, W, wrb, X, xrb, n, y, ldy); break;        \
    case 1 * 16 + 2: fl_tile(WT, 1, 2, W, wrb, X, xrb, n, y, ldy); break;        \
    default: fl_tile(WT, 1, 1, W, wrb, X, xrb, n, y, ldy); break;                \
    }
#define DEF_FL_TILE(NAME, WT)                                                                              \
    static void NAME(int R, int T, const uint8_t *W, size_t wrb, const uint8_t *X, size_t xrb, int64_t n, \
                     float *y, int64_t ldy)                                                               \
    {                                                                                                      \
        FL_CASES(WT)                                                                                       \
    }
DEF_FL_TILE(tile_f32, ENG_T_F32)
DEF_FL_TILE(tile_f16, ENG_T_F16)
DEF_FL_TILE(tile_bf16, ENG_T_BF16)

typedef void (*fl_fn)(int R, int T, const uint8_t *W, size_t wrb, const uint8_t *X, size_t xrb, int64_t n, float *y,
                      int64_t ldy);

static void fl_matmul(fl_fn fn, const uint8_t *W, size_t wrb, int64_t n_in, int64_t r0, int64_t r1, const uint8_t *X,
                      size_t xrb, int64_t n_tok, float *y, int64_t ldy)
{
    if (n_tok == 1) {
        int64_t r = r0;
        for (; r + 4 <= r1; r += 4) fn(4, 1, W + r * wrb, wrb, X, xrb, n_in, y + r, ldy);
        for (; r < r1; r++) fn(1, 1, W + r * wrb, wrb, X, xrb, n_in, y + r, ldy);
        return;
    }
    int64_t chunk = (int64_t)((128 * 1024) / (wrb ? wrb : 1));
    chunk = chunk < 4 ? 4 : chunk & ~(int64_t)1;
    for (int64_t c0 = r0; c0 < r1; c0 += chunk) {
        const int64_t c1 = c0 + chunk < r1 ? c0 + chunk : r1;
        for (int64_t t = 0; t < n_tok; t += 4) {
            const int T = n_tok - t < 4 ? (int)(n_tok - t) : 4;
            int64_t r = c0;
            for (; r + 2 <= c1; r += 2) fn(2, T, W + r * wrb, wrb, X + t * xrb, xrb, n_in, y + t * ldy + r, ldy);
            for (; r < c1; r++) fn(1, T, W + r * wrb, wrb, X + t * xrb, xrb, n_in, y + t * ldy + r, ldy);
        }
    }
}

bool eng_matmul_avx512(eng_type wt, const void *W, size_t wrb, int64_t n_in, int64_t r0, int64_t r1,
                       const void *X, size_t xrb, int64_t n_tok, float *y, int64_t ldy)
{
    const bool vnni = lcx_cpu()->avx512vnni;
    switch (wt) {
    case ENG_T_Q8_0:
        if (!vnni) return false;
        q80_matmul(tile_q8_0, sizeof(eng_block_q8_0), W, wrb, n_in, r0, r1, X, xrb, n_tok, y, ldy);
        return true;
    case ENG_T_Q4_0:
        if (!vnni) return false;
        q80_matmul(tile_q4_0, sizeof(eng_block_q4_0), W, wrb, n_in, r0, r1, X, xrb, n_tok, y, ldy);
        return true;
    case ENG_T_Q5_0:
        if (!vnni) return false;
        q80_matmul(tile_q5_0, sizeof(eng_block_q5_0), W, wrb, n_in, r0, r1, X, xrb, n_tok, y, ldy);
        return true;
    case ENG_T_F32: fl_matmul(tile_f32, W, wrb, n_in, r0, r1, X, xrb, n_tok, y, ldy); return true;
    case ENG_T_F16: fl_matmul(tile_f16, W, wrb, n_in, r0, r1, X, xrb, n_tok, y, ldy); return true;
    case ENG_T_BF16: fl_matmul(tile_bf16, W, wrb, n_in, r0, r1, X, xrb, n_tok, y, ldy); return true;
    default: return false;
    }
}
