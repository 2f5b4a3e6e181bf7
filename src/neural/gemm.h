/* Packed-panel GEMM for the encoder's float weights (F32 / F16 / BF16 files): at load each
 * weight matrix W (n_out rows of n_in) is re-laid as panels of LCX_NN_PANEL output rows,
 * panel p holding, for every k, the LCX_NN_PANEL values W[p*P + j][k] (j fastest; the last
 * panel zero-padded), as F32, or as F16 for F16 weights (half the memory; converted in the
 * kernel). The kernel then computes an (MR tokens x P outputs) block as outer products:
 * per k, P/16 vector loads of W and MR broadcasts of X feed MR*P/16 FMAs, with every
 * accumulator in a register (AVX-512: 8 x 32; AVX2: 6 x 16, twice per panel).
 * Why not the engine's eng__matmul: its float kernels are dot-product tiles reduced at the
 * end, ~30 GFLOP per CPU-second here; this layout reaches far more (docs/benchmarks/neural.md).
 * Activations stay F32 (Hugging Face semantics; llama.cpp rounds them to F16 for F16
 * weights, inside the fixture's F16 tolerance either way). */
#ifndef LCX_NN_GEMM_H
#define LCX_NN_GEMM_H

#include <stdint.h>
#include <stddef.h>

#define LCX_NN_PANEL 32

typedef struct {
    int f16;                /* 1: panels hold F16 bits, 0: F32 */
    const void *data;       /* n_panels * n_in * LCX_NN_PANEL elements */
    int64_t n_in, n_out, n_panels;
} lcx__nn_packed;

/* Y[t * ldy + r] = sum_k X[t * ldx + k] W[r][k] for tokens [0, n_tok) and the output rows of
 * panels [p0, p1) (rows >= n_out are not written). */
void lcx__nn_gemm(const lcx__nn_packed *w, const float *X, int64_t ldx, int64_t n_tok, int64_t p0, int64_t p1, float *Y,
                  int64_t ldy);
/* The same with a given kernel set (tests): 0 scalar, 1 AVX2, 2 AVX-512 (falls back when the
 * CPU lacks it). */
void lcx__nn_gemm_isa(int isa, const lcx__nn_packed *w, const float *X, int64_t ldx, int64_t n_tok, int64_t p0, int64_t p1,
                      float *Y, int64_t ldy);
/* AVX-512 kernels (gemm_avx512.c); only when lcx__cpu_has_avx512(). */
void lcx__nn_gemm_avx512(const lcx__nn_packed *w, const float *X, int64_t ldx, int64_t n_tok, int64_t p0, int64_t p1,
                         float *Y, int64_t ldy);

#endif
