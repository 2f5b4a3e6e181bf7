/* Packed-panel GEMM: scalar reference, AVX2 kernel, dispatch (see gemm.h). */
#include <immintrin.h>
#include <string.h>

#include "neural/gemm.h"
#include "util/util.h"

#define P LCX_NN_PANEL
#define AI static inline __attribute__((always_inline))

static void gemm_scalar(const lcx__nn_packed *w, const float *X, int64_t ldx, int64_t n_tok, int64_t p0, int64_t p1, float *Y,
                        int64_t ldy)
{
    const int64_t K = w->n_in;
    for (int64_t p = p0; p < p1; p++) {
        const int64_t nr = LCX_MIN((int64_t)P, w->n_out - p * P);
        for (int64_t t = 0; t < n_tok; t++)
            for (int64_t j = 0; j < nr; j++) {
                float s = 0;
                for (int64_t k = 0; k < K; k++) {
                    const size_t at = ((size_t)p * K + k) * P + j;
                    float wv;
                    if (w->f16) wv = _cvtsh_ss(((const uint16_t *)w->data)[at]);
                    else wv = ((const float *)w->data)[at];
                    s += X[t * ldx + k] * wv;
                }
                Y[t * ldy + p * P + j] = s;
            }
    }
}

/* hot: MR tokens x 16 outputs (half a panel at column h) */
AI void kern_avx2(const int MR, const int f16, const void *panel, int h, int64_t K, const float *X, int64_t ldx, float *Y,
                  int64_t ldy, int nr)
{
    __m256 acc[6][2];
#pragma GCC unroll 6
    for (int t = 0; t < MR; t++) acc[t][0] = acc[t][1] = _mm256_setzero_ps();
    for (int64_t k = 0; k < K; k++) {
        __m256 w0, w1;
        if (f16) {
            const uint16_t *wp = (const uint16_t *)panel + k * P + h;
            w0 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)wp));
            w1 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(wp + 8)));
        } else {
            const float *wp = (const float *)panel + k * P + h;
            w0 = _mm256_loadu_ps(wp);
            w1 = _mm256_loadu_ps(wp + 8);
        }
#pragma GCC unroll 6
        for (int t = 0; t < MR; t++) {
            const __m256 b = _mm256_broadcast_ss(X + t * ldx + k);
            acc[t][0] = _mm256_fmadd_ps(w0, b, acc[t][0]);
            acc[t][1] = _mm256_fmadd_ps(w1, b, acc[t][1]);
        }
    }
#pragma GCC unroll 6
    for (int t = 0; t < MR; t++) {
        float *y = Y + t * ldy + h;
        if (nr >= h + 16) {
            _mm256_storeu_ps(y, acc[t][0]);
            _mm256_storeu_ps(y + 8, acc[t][1]);
        } else {
            float tmp[16];
            _mm256_storeu_ps(tmp, acc[t][0]);
            _mm256_storeu_ps(tmp + 8, acc[t][1]);
            for (int j = 0; j < nr - h; j++) y[j] = tmp[j];
        }
    }
}

#define KCASES(F16)                                                                          \
    switch (mr) {                                                                           \
    case 6: kern_avx2(6, F16, panel, h, K, X + t * ldx, ldx, Y + t * ldy + p * P, ldy, nr); break; \
    case 5: kern_avx2(5, F16, panel, h, K, X + t * ldx, ldx, Y + t * ldy + p * P, ldy, nr); break; \
    case 4: kern_avx2(4, F16, panel, h, K, X + t * ldx, ldx, Y + t * ldy + p * P, ldy, nr); break; \
    case 3: kern_avx2(3, F16, panel, h, K, X + t * ldx, ldx, Y + t * ldy + p * P, ldy, nr); break; \
    case 2: kern_avx2(2, F16, panel, h, K, X + t * ldx, ldx, Y + t * ldy + p * P, ldy, nr); break; \
    default: kern_avx2(1, F16, panel, h, K, X + t * ldx, ldx, Y + t * ldy + p * P, ldy, nr); break; \
    }

static void gemm_avx2(const lcx__nn_packed *w, const float *X, int64_t ldx, int64_t n_tok, int64_t p0, int64_t p1, float *Y,
                      int64_t ldy)
{
    const int64_t K = w->n_in;
    const size_t esz = w->f16 ? 2 : 4;
    for (int64_t p = p0; p < p1; p++) {
        const void *panel = (const uint8_t *)w->data + (size_t)p * K * P * esz;
        const int nr = (int)LCX_MIN((int64_t)P, w->n_out - p * P);
        for (int64_t t = 0; t < n_tok; t += 6) {
            const int mr = (int)LCX_MIN((int64_t)6, n_tok - t);
            for (int h = 0; h < nr; h += 16) {
                if (w->f16) { KCASES(1) } else { KCASES(0) }
            }
        }
    }
}

void lcx__nn_gemm_isa(int isa, const lcx__nn_packed *w, const float *X, int64_t ldx, int64_t n_tok, int64_t p0, int64_t p1,
                      float *Y, int64_t ldy)
{
    if (isa >= 2 && lcx__cpu_has_avx512()) lcx__nn_gemm_avx512(w, X, ldx, n_tok, p0, p1, Y, ldy);
    else if (isa >= 1) gemm_avx2(w, X, ldx, n_tok, p0, p1, Y, ldy);
    else gemm_scalar(w, X, ldx, n_tok, p0, p1, Y, ldy);
}

void lcx__nn_gemm(const lcx__nn_packed *w, const float *X, int64_t ldx, int64_t n_tok, int64_t p0, int64_t p1, float *Y,
                  int64_t ldy)
{
    lcx__nn_gemm_isa(2, w, X, ldx, n_tok, p0, p1, Y, ldy);
}
