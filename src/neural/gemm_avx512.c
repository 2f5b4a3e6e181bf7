/* Packed-panel GEMM, AVX-512 kernel: 8 tokens x 32 outputs (16 zmm accumulators), per k two
 * panel loads (F16: two vcvtph2ps) and eight broadcasts. Compiled with the AVX-512 flags
 * (lcx_library) and reached only through lcx__nn_gemm_isa's dispatch. */
#include <immintrin.h>

#include "neural/gemm.h"
#include "util/util.h"

#define P LCX_NN_PANEL
#define AI static inline __attribute__((always_inline))

/* hot */
AI void kern(const int MR, const int f16, const void *panel, int64_t K, const float *X, int64_t ldx, float *Y, int64_t ldy,
             int nr)
{
    __m512 acc[8][2];
#pragma GCC unroll 8
    for (int t = 0; t < MR; t++) acc[t][0] = acc[t][1] = _mm512_setzero_ps();
    for (int64_t k = 0; k < K; k++) {
        __m512 w0, w1;
        if (f16) {
            const uint16_t *wp = (const uint16_t *)panel + k * P;
            w0 = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)wp));
            w1 = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(wp + 16)));
        } else {
            const float *wp = (const float *)panel + k * P;
            w0 = _mm512_loadu_ps(wp);
            w1 = _mm512_loadu_ps(wp + 16);
        }
#pragma GCC unroll 8
        for (int t = 0; t < MR; t++) {
            const __m512 b = _mm512_set1_ps(X[t * ldx + k]);
            acc[t][0] = _mm512_fmadd_ps(w0, b, acc[t][0]);
            acc[t][1] = _mm512_fmadd_ps(w1, b, acc[t][1]);
        }
    }
    const __mmask16 m0 = nr >= 16 ? 0xFFFF : (__mmask16)((1u << nr) - 1);
    const __mmask16 m1 = nr >= 32 ? 0xFFFF : nr <= 16 ? 0 : (__mmask16)((1u << (nr - 16)) - 1);
#pragma GCC unroll 8
    for (int t = 0; t < MR; t++) {
        _mm512_mask_storeu_ps(Y + t * ldy, m0, acc[t][0]);
        _mm512_mask_storeu_ps(Y + t * ldy + 16, m1, acc[t][1]);
    }
}

#define KCASES(F16)                                                                          \
    switch (mr) {                                                                           \
    case 8: kern(8, F16, panel, K, X + t * ldx, ldx, Y + t * ldy + p * P, ldy, nr); break;   \
    case 7: kern(7, F16, panel, K, X + t * ldx, ldx, Y + t * ldy + p * P, ldy, nr); break;   \
    case 6: kern(6, F16, panel, K, X + t * ldx, ldx, Y + t * ldy + p * P, ldy, nr); break;   \
    case 5: kern(5, F16, panel, K, X + t * ldx, ldx, Y + t * ldy + p * P, ldy, nr); break;   \
    case 4: kern(4, F16, panel, K, X + t * ldx, ldx, Y + t * ldy + p * P, ldy, nr); break;   \
    case 3: kern(3, F16, panel, K, X + t * ldx, ldx, Y + t * ldy + p * P, ldy, nr); break;   \
    case 2: kern(2, F16, panel, K, X + t * ldx, ldx, Y + t * ldy + p * P, ldy, nr); break;   \
    default: kern(1, F16, panel, K, X + t * ldx, ldx, Y + t * ldy + p * P, ldy, nr); break;  \
    }

void lcx__nn_gemm_avx512(const lcx__nn_packed *w, const float *X, int64_t ldx, int64_t n_tok, int64_t p0, int64_t p1,
                         float *Y, int64_t ldy)
{
    const int64_t K = w->n_in;
    const size_t esz = w->f16 ? 2 : 4;
    for (int64_t p = p0; p < p1; p++) {
        const void *panel = (const uint8_t *)w->data + (size_t)p * K * P * esz;
        const int nr = (int)LCX_MIN((int64_t)P, w->n_out - p * P);
        for (int64_t t = 0; t < n_tok; t += 8) {
            const int mr = (int)LCX_MIN((int64_t)8, n_tok - t);
            if (w->f16) { KCASES(1) } else { KCASES(0) }
        }
    }
}
