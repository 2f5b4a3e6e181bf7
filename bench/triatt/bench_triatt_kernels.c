/* Compute cost of the TriAttention scoring kernels alone (no scorer, no DRAM): the AVX2
 * multi-stream kernel as the scorer calls it (4 KV heads of a layer, own coefficients each,
 * all adding into one accumulator, 128 rows per call) and the single-stream kernel (256 rows
 * per call), for f16, f32 and Q8_0 keys, on a 1024-row key window that stays in L2.
 * Why a separate harness: on the shared dev box one bench_triatt round (7 per run) swings
 * ±15% with the neighbours; here a round is cut into short reps (2 layers each) that are
 * interleaved across the variants, and the 10th percentile of 60 reps (scaled to a 28-layer,
 * 32K-cell round) is stable to a few percent, so kernel changes can be compared in minutes.
 * It times the kernels linked into this binary; compare builds by alternating runs, and
 * distrust differences under ~10% between *binaries* (code layout alone moved untouched
 * functions by that much in the fourth session's harness).
 *   usage: bench_triatt_kernels [reps]   (default 60) */
#include <immintrin.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "triatt/internal.h"

#define WIN 1024          /* rows in the window (f16: 256 KiB, Q8_0: 136 KiB; f32 uses half) */
#define HD 128
#define Q8ROW (HD / 32 * 34)
#define CELLS 32768
#define LAYERS_PER_REP 2  /* a rep = 2 layers × 4 KV heads × 32K cells; ×14 = one round */

static double cpu_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int cmpd(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

enum { V_MS_F16, V_MS_F32, V_MS_Q8, V_1_F16, V_1_Q8, NV };
static const char *vname[NV] = {"f16, 4 streams (KV heads)", "f32, 4 streams (KV heads)", "q8_0, 4 streams (KV heads)",
                                "f16, 1 stream", "q8_0, 1 stream"};

int main(int argc, char **argv)
{
    const int reps = argc > 1 && atoi(argv[1]) > 0 ? atoi(argv[1]) : 60;
    float *k32 = aligned_alloc(64, (size_t)(WIN + 256) * HD * 4), *acc = aligned_alloc(64, CELLS * 4);
    uint16_t *k16 = aligned_alloc(64, (size_t)(WIN + 256) * HD * 2);
    unsigned char *kq = aligned_alloc(64, (size_t)(WIN + 256) * Q8ROW + 64);
    double *t = malloc((size_t)NV * reps * sizeof(double));
    if (!k32 || !acc || !k16 || !kq || !t) { fprintf(stderr, "OOM\n"); return 1; }
    uint64_t s = 42;
    for (int r = 0; r < WIN + 256; r++) {
        float *row = k32 + (size_t)r * HD;
        for (int i = 0; i < HD; i++) row[i] = (float)(triatt__rng_unit(&s) * 4 - 2);
        for (int i = 0; i < HD; i += 8)
            _mm_storeu_si128((__m128i *)(k16 + (size_t)r * HD + i), _mm256_cvtps_ph(_mm256_loadu_ps(row + i), 0));
        for (int b = 0; b < HD / 32; b++) {   /* ggml Q8_0: d = amax/127 (half), q = round(x/d) */
            unsigned char *blk = kq + (size_t)r * Q8ROW + b * 34;
            float amax = 0;
            for (int i = 0; i < 32; i++) amax = fmaxf(amax, fabsf(row[b * 32 + i]));
            uint16_t dh = (uint16_t)_cvtss_sh(amax / 127.f, 0);
            float d = _cvtsh_ss(dh), id = d ? 1.f / d : 0.f;
            memcpy(blk, &dh, 2);
            for (int i = 0; i < 32; i++) blk[2 + i] = (unsigned char)(int8_t)lrintf(row[b * 32 + i] * id);
        }
    }
    static float w[4][HD], m[4][HD / 2], mil[4][HD];
    triatt_kparams kp[3][4];   /* [format f32, f16, q8][head] */
    for (int j = 0; j < 4; j++) {
        for (int i = 0; i < HD; i++) w[j][i] = (float)sin(i * 0.37 + j);
        for (int i = 0; i < HD / 2; i++) { m[j][i] = (float)fabs(cos(i * 0.11 + j * 2)) * 0.5f; mil[j][2 * i] = mil[j][2 * i + 1] = m[j][i] / 2; }
        for (int f = 0; f < 3; f++)
            kp[f][j] = (triatt_kparams){.w = w[j], .m = m[j], .m_il = mil[j], .n_rot = HD, .fc = HD / 2,
                                        .pairing = TRIATT_PAIR_HALF, .use_trig = true, .use_extra = true,
                                        .f16 = f == 1, .q8 = f == 2, .eps = 1e-8f};
    }
    memset(acc, 0, CELLS * 4);
    printf("bench_triatt_kernels: AVX2 kernels, L2-resident %d-row window, %d reps of %d layers, per 28-layer "
           "32K-cell round (x%d)\n", WIN, reps, LAYERS_PER_REP, 28 / LAYERS_PER_REP);
    for (int r = 0; r < reps; r++)
        for (int v = 0; v < NV; v++) {
            const int fmt = v == V_MS_F32 ? 0 : v == V_MS_Q8 || v == V_1_Q8 ? 2 : 1;
            const size_t rb = fmt == 2 ? Q8ROW : (size_t)HD * (fmt == 1 ? 2 : 4), st = fmt == 2 ? Q8ROW : HD;
            const char *base = fmt == 0 ? (const char *)k32 : fmt == 1 ? (const char *)k16 : (const char *)kq;
            const int win = fmt == 0 ? WIN / 2 : WIN;   /* f32: 256 KiB, so it also stays in L2 */
            const triatt_kparams *pp[4] = {&kp[fmt][0], &kp[fmt][1], &kp[fmt][2], &kp[fmt][3]};
            double t0 = cpu_ms();
            for (int l = 0; l < LAYERS_PER_REP; l++) {
                if (v <= V_MS_Q8) {
                    for (int off = 0; off < CELLS; off += 128) {   /* hot: as run_group with 4 heads */
                        const void *ptr[4];
                        size_t sts[4] = {st, st, st, st};
                        float *o[4];
                        for (int j = 0; j < 4; j++) { ptr[j] = base + (size_t)(off % win) * rb; o[j] = acc + off; }
                        triatt__kernel_ms_avx2(pp, 4, ptr, sts, 128, o, true);
                    }
                } else {
                    for (int h = 0; h < 4; h++)
                        for (int off = 0; off < CELLS; off += 256)  /* hot: as run_single */
                            triatt__kernel_avx2(pp[h], base + (size_t)(off % win) * rb, st, 256, acc + off, true);
                }
            }
            t[(size_t)v * reps + r] = (cpu_ms() - t0) * (28.0 / LAYERS_PER_REP);
        }
    for (int v = 0; v < NV; v++) {
        double *x = t + (size_t)v * reps;
        qsort(x, reps, sizeof *x, cmpd);
        printf("%-28s p10 %7.2f ms  median %7.2f ms  min %7.2f ms per round\n", vname[v], x[reps / 10], x[reps / 2], x[0]);
    }
    double chk = 0;
    for (int c = 0; c < CELLS; c++) chk += acc[c];
    printf("(checksum %.6g)\n", chk);
    free(k32); free(acc); free(k16); free(kq); free(t);
    return 0;
}
