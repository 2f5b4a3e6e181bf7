/* AVX-512 matmul kernels, compiled with the AVX-512 flags (see CMakeLists.txt) and
 * reached only through eng__matmul_isa's run-time dispatch when lcx__cpu_has_avx512():
 * F32 / F16 / BF16 weights with 512-bit FMAs (16 lanes).
 *
 * Everything else returns false and runs the AVX2 kernels, which are correct on these CPUs
 * too. Quantized weights have no AVX-512 kernel on purpose: on an AVX-512 VNNI Xeon, VNNI
 * Q8_0/Q4_0/Q5_0 kernels (one row stream in generation, 1x8 prompt tiles) were slower than
 * the AVX2 ones (4 row streams, llama.cpp's summation order) and missed a golden's
 * tolerance, while the float kernels here were faster (docs/benchmarks/avx512.md). */
#include <immintrin.h>

#include "engine/quant.h"

#define AI static inline __attribute__((always_inline))

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
    if (wt == ENG_T_F16) return eng__fp16_to_fp32(((const uint16_t *)row)[j]);
    return eng__bf16_to_fp32(((const uint16_t *)row)[j]);
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

bool eng__matmul_avx512(eng_type wt, const void *W, size_t wrb, int64_t n_in, int64_t r0, int64_t r1,
                       const void *X, size_t xrb, int64_t n_tok, float *y, int64_t ldy)
{
    switch (wt) {
    case ENG_T_F32: fl_matmul(tile_f32, W, wrb, n_in, r0, r1, X, xrb, n_tok, y, ldy); return true;
    case ENG_T_F16: fl_matmul(tile_f16, W, wrb, n_in, r0, r1, X, xrb, n_tok, y, ldy); return true;
    case ENG_T_BF16: fl_matmul(tile_bf16, W, wrb, n_in, r0, r1, X, xrb, n_tok, y, ldy); return true;
    default: return false;
    }
}
