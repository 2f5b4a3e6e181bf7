/* TriAttention scoring cost per round, Qwen2.5-7B-shaped geometry (28 layers, 28 heads,
 * 4 KV heads, head_dim 128, θ 1e6, half pairing) at 32K cells:
 *   full   — collapsed score from the cached post-RoPE keys (f32, and f16 read directly by
 *            the kernel as from an engine's F16 KV cache), 1 and 2 threads;
 *   fast   — precomputed 2·fc+1 features per cell (frozen centres, block mean), 1 and 2 threads;
 *   enter  — the one-time per-cell cost of the fast path (fast_set_cells).
 * The 112 (layer, KV head) key blocks map onto a pool of 8 distinct 16 MiB blocks (128 MiB,
 * well past the 32 MiB L3) so every round streams from DRAM like a real cache, without
 * allocating the full 1.9 GB. "compute-only" rounds score the same 32K cells through an
 * accessor that maps every chunk into one 320 KiB window (L2-resident), so they measure the
 * kernel without DRAM. Each full-path variant runs with the default 4 memory streams and
 * with 1 (in-process A/B, rounds interleaved so load changes hit both alike).
 * The f16 and Q8_0 pools exist twice, once in 4 KiB pages (MADV_NOHUGEPAGE) and once in
 * 2 MiB transparent huge pages (MADV_HUGEPAGE), and both are scored in the same rounds
 * (in-process A/B): at 4 KiB pages every 16 rows of a stream cross into a new page (a TLB
 * walk, and the hardware prefetcher stops at the page boundary). The line "THP backing"
 * says how much of the huge-page pools the kernel really backed with huge pages.
 *   usage: bench_triatt [cells] [reps]
 * env TRIATT_BENCH_QUICK=1: only the 1-thread full-path A/B (for comparing kernel builds). */
#include <immintrin.h>
#include <sys/mman.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "longctx/triatt.h"
#include "util/util.h"
#include "triatt/internal.h"

#define POOL 8
#define POOL_Q8 16          /* Q8_0 blocks are 4.25 MiB: 16 of them (68 MiB) to stay past L3 */
#define Q8_ROW 136          /* bytes per 128-dim Q8_0 row: 4 blocks of {half d, int8 q[32]} */
typedef struct { const float *f32; const uint16_t *f16; const unsigned char *q8; int n, hd; } keysrc;

static const float *get_f32(void *ud, int l, int kv, int c0, int n, float *scratch, size_t *stride)
{
    keysrc *k = ud;
    (void)scratch;
    *stride = k->hd;
    return k->f32 + ((size_t)((l * 4 + kv) % POOL) * k->n + c0) * k->hd;
}

static const uint16_t *get_f16(void *ud, int l, int kv, int c0, int n, float *scratch, size_t *stride)
{
    keysrc *k = ud;
    (void)scratch; (void)n;
    *stride = k->hd;
    return k->f16 + ((size_t)((l * 4 + kv) % POOL) * k->n + c0) * k->hd;
}

static const void *get_q8(void *ud, int l, int kv, int c0, int n, float *scratch, size_t *stride)
{
    keysrc *k = ud;
    (void)scratch; (void)n;
    *stride = Q8_ROW;
    return k->q8 + ((size_t)((l * 4 + kv) % POOL_Q8) * k->n + c0) * Q8_ROW;
}

static const void *get_q8_l2(void *ud, int l, int kv, int c0, int n, float *scratch, size_t *stride)
{
    keysrc *k = ud;
    (void)scratch; (void)n; (void)l; (void)kv;
    *stride = Q8_ROW;
    return k->q8 + (size_t)(c0 % 1024) * Q8_ROW;
}

/* compute-only: every chunk maps into the first L2_ROWS + 256 rows of block 0 */
#define L2_ROWS 1024
static const uint16_t *get_f16_l2(void *ud, int l, int kv, int c0, int n, float *scratch, size_t *stride)
{
    keysrc *k = ud;
    (void)scratch; (void)n; (void)l; (void)kv;
    *stride = k->hd;
    return k->f16 + (size_t)(c0 % L2_ROWS) * k->hd;
}

/* process CPU time: on a shared, oversubscribed machine wall time measures the neighbours */
static double cpu_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* How much anonymous memory of this process is in transparent huge pages (the huge-page
 * pools hold want_bytes; the other pools are MADV_NOHUGEPAGE). */
static void print_thp(size_t want_bytes)
{
    FILE *f = fopen("/proc/self/smaps_rollup", "r");
    char line[256];
    long kb = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "AnonHugePages: %ld kB", &kb) == 1) break;
    if (f) fclose(f);
    printf("THP backing: %ld of %zu MiB of the huge-page pools in 2 MiB pages\n", kb < 0 ? -1 : kb / 1024,
           want_bytes >> 20);
}

static int cmpd(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void report(const char *name, double *t, double *c, int n)
{
    qsort(t, n, sizeof *t, cmpd);
    qsort(c, n, sizeof *c, cmpd);
    printf("%-42s wall median %8.2f ms  min %8.2f  p90 %8.2f | cpu median %8.2f ms  min %8.2f  (n=%d)\n", name,
           t[n / 2], t[0], t[(int)(0.9 * (n - 1))], c[n / 2], c[0], n);
}

int main(int argc, char **argv)
{
    int N = argc > 1 ? atoi(argv[1]) : 32768, reps = argc > 2 ? atoi(argv[2]) : 7;
    const int L = 28, H = 28, KV = 4, hd = 128;
    triatt_geometry g = {.n_layers = L, .n_heads = H, .n_kv_heads = KV, .head_dim = hd, .n_rot = hd,
                         .pairing = TRIATT_PAIR_HALF, .rope_theta = 1e6};
    uint64_t s = 42;
    size_t nk = (size_t)POOL * N * hd;
    size_t b32 = (nk * sizeof(float) + (2u << 20) - 1) & ~(size_t)((2u << 20) - 1);
    size_t b16 = (nk * sizeof(uint16_t) + (2u << 20) - 1) & ~(size_t)((2u << 20) - 1);
    float *k32 = aligned_alloc(2u << 20, b32);
    uint16_t *k16 = aligned_alloc(2u << 20, b16), *k16h = aligned_alloc(2u << 20, b16);
    size_t bq8 = ((size_t)POOL_Q8 * N * Q8_ROW + (2u << 20) - 1) & ~(size_t)((2u << 20) - 1);
    unsigned char *kq8 = aligned_alloc(2u << 20, bq8), *kq8h = aligned_alloc(2u << 20, bq8);
    /* before the first touch: the kernel picks the page size when it faults the memory in */
    if (k32 && k16 && kq8 && k16h && kq8h) {
        madvise(k32, b32, MADV_NOHUGEPAGE);
        madvise(k16, b16, MADV_NOHUGEPAGE);
        madvise(kq8, bq8, MADV_NOHUGEPAGE);
        madvise(k16h, b16, MADV_HUGEPAGE);
        madvise(kq8h, bq8, MADV_HUGEPAGE);
    }
    int32_t *pos = malloc(N * sizeof(int32_t));
    float *sc = malloc(N * sizeof(float)), *sc2 = malloc(N * sizeof(float));
    float *q = malloc((size_t)64 * H * hd * sizeof(float));
    if (!k32 || !k16 || !kq8 || !k16h || !kq8h || !pos || !sc || !sc2 || !q) { fprintf(stderr, "OOM\n"); return 1; }
    for (size_t i = 0; i < nk; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        k32[i] = (float)((int)(s >> 40) % 2000) / 500.0f;
    }
    for (size_t i = 0; i < nk; i += 8)
        _mm_storeu_si128((__m128i *)(k16 + i), _mm256_cvtps_ph(_mm256_loadu_ps(k32 + i), 0));
    /* Q8_0 pool: block b = block b % POOL of the f32 keys, quantized as ggml does (d = amax/127) */
    for (size_t r = 0; r < (size_t)POOL_Q8 * N; r++) {
        const float *x = k32 + (r % ((size_t)POOL * N)) * hd;
        for (int b = 0; b < hd / 32; b++) {
            unsigned char *blk = kq8 + r * Q8_ROW + b * 34;
            float amax = 0;
            for (int i = 0; i < 32; i++) amax = fabsf(x[b * 32 + i]) > amax ? fabsf(x[b * 32 + i]) : amax;
            uint16_t dh = (uint16_t)_cvtss_sh(amax / 127.f, 0);
            float d = _cvtsh_ss(dh), id = d ? 1.f / d : 0.f;
            memcpy(blk, &dh, 2);
            for (int i = 0; i < 32; i++) blk[2 + i] = (unsigned char)(int8_t)lrintf(x[b * 32 + i] * id);
        }
    }
    memcpy(k16h, k16, nk * sizeof(uint16_t));
    memcpy(kq8h, kq8, (size_t)POOL_Q8 * N * Q8_ROW);
    for (size_t i = 0; i < (size_t)64 * H * hd; i++) q[i] = (float)((i * 2654435761u) % 1000) / 500.0f - 1.0f;
    for (int c = 0; c < N; c++) pos[c] = c;
    triatt_calib *cal = NULL;
    triatt_calib_init(&g, 64, 0, &cal);
    for (int l = 0; l < L; l++) triatt_calib_add(cal, l, q, 64, 0);
    triatt_calib_end_pass(cal);
    keysrc src = {k32, k16, kq8, N, hd}, srch = {NULL, k16h, kq8h, N, hd};
    triatt_keys kf32 = {.get = get_f32, .ud = &src}, kf16 = {.ud = &src, .get16 = get_f16},
                kf16h = {.ud = &srch, .get16 = get_f16}, kqh = {.ud = &srch, .get_q8 = get_q8};
    double *t = malloc(reps * sizeof(double)), *tc = malloc(reps * sizeof(double));
    printf("bench_triatt: %d cells, 28 layers x 4 KV heads x head_dim 128, AVX-512 %s\n", N,
           lcx__cpu_has_avx512() ? "yes" : "no");
    print_thp(b16 + bq8);
    triatt_keys kl2 = {.ud = &src, .get16 = get_f16_l2}, kq = {.ud = &src, .get_q8 = get_q8},
                kql2 = {.ud = &src, .get_q8 = get_q8_l2};
    if (N < L2_ROWS + 256) kl2 = kf16;
    const bool quick = getenv("TRIATT_BENCH_QUICK") && atoi(getenv("TRIATT_BENCH_QUICK"));
    for (int nt = 1; nt <= (quick ? 1 : 2); nt++) {
        triatt_scorer_opts o = {.n_threads = nt, .eps = 1e-8};
        triatt_scorer *sco = NULL;
        triatt_scorer_init(&g, &o, &sco);
        char name[96];
        /* variants: f32 / f16 (4 KiB pages) / f16 (huge pages) / f16 compute-only, each with 4
         * streams and 1 (A/B), Q8_0 included (it read 1 stream until the fourth session) */
        enum { NV = 14 };
        const triatt_keys *kv[NV / 2] = {&kf32, &kf16, &kf16h, &kl2, &kq, &kqh, &kql2};
        const char *kn[NV / 2] = {"f32 keys", "f16 keys", "f16 keys, huge pages", "f16 compute-only (L2)",
                                  "q8_0 keys", "q8_0 keys, huge pages", "q8_0 compute-only (L2)"};
        double *tv = malloc((size_t)NV * reps * sizeof(double)), *cv = malloc((size_t)NV * reps * sizeof(double));
        for (int r = 0; r < reps; r++)
            for (int v = 0; v < NV; v++) {
                triatt__scorer_set_streams(sco, v % 2 ? 1 : 4);
                double t0 = lcx__now_ms(), c0 = cpu_ms();
                triatt_score(sco, cal, kv[v / 2], pos, N, N - 1, N - 128, v == 0 ? sc : sc2);
                tv[v * reps + r] = lcx__now_ms() - t0;
                cv[v * reps + r] = cpu_ms() - c0;
            }
        triatt__scorer_set_streams(sco, 4);
        for (int v = 0; v < NV; v++) {
            snprintf(name, sizeof name, "full %s, %d thr, %d str", kn[v / 2], nt, v % 2 ? 1 : 4);
            report(name, tv + v * reps, cv + v * reps, reps);
        }
        free(tv); free(cv);
        /* Q8_0 vs f32 scores (quantization error, not a kernel check: the tests do that) */
        triatt_score(sco, cal, &kq, pos, N, N - 1, N - 128, sc2);
        double qd = 0;
        for (int c = 0; c < N - 128; c++) qd = fabs(sc[c] - sc2[c]) > qd ? fabs(sc[c] - sc2[c]) : qd;
        printf("  q8_0 vs f32 keys: max |diff| %.3g\n", qd);
        /* 4 streams and 1 stream give bit-identical scores (same per-row arithmetic) */
        triatt__scorer_set_streams(sco, 1);
        triatt_score(sco, cal, &kf16, pos, N, N - 1, N - 128, sc2);
        triatt__scorer_set_streams(sco, 4);
        float *sc3 = malloc(N * sizeof(float));
        int ndiff = 0;
        if (sc3) {
            triatt_score(sco, cal, &kf16, pos, N, N - 1, N - 128, sc3);
            for (int c = 0; c < N - 128; c++) ndiff += sc2[c] != sc3[c];
            printf("  f16 scores, 4 streams vs 1: %d of %d cells differ\n", ndiff, N - 128);
            free(sc3);
        }
        if (quick) { triatt_scorer_free(sco); break; }
        triatt_fast_reserve(sco, N);
        double t0 = lcx__now_ms(), ce = cpu_ms();
        triatt_fast_set_cells(sco, cal, &kf32, pos, 0, N);
        double enter = lcx__now_ms() - t0;
        ce = cpu_ms() - ce;
        int freps = reps * 5;
        double *tf = malloc(freps * sizeof(double)), *tfc = malloc(freps * sizeof(double));
        for (int r = 0; r < freps; r++) {
            t0 = lcx__now_ms();
            double c0 = cpu_ms();
            triatt_fast_score(sco, cal, pos, N, N - 1 + r, N - 128, sc2);
            tf[r] = lcx__now_ms() - t0;
            tfc[r] = cpu_ms() - c0;
        }
        snprintf(name, sizeof name, "fast path, %d thread%s", nt, nt > 1 ? "s" : "");
        report(name, tf, tfc, freps);
        free(tf); free(tfc);
        /* both paths agree on this round */
        triatt_fast_score(sco, cal, pos, N, N - 1, N - 128, sc2);
        double maxd = 0, maxv = 0;
        for (int c = 0; c < N - 128; c++) {
            double d = sc[c] - sc2[c];
            maxd = d < 0 ? (-d > maxd ? -d : maxd) : (d > maxd ? d : maxd);
            maxv = sc[c] > maxv ? sc[c] : maxv;
        }
        printf("  fast_set_cells (one-time, all %d cells): wall %.1f ms, cpu %.1f ms = %.2f us/cell; |full-fast| max %.2e (scores up to %.1f)\n",
               N, enter, ce, 1000 * ce / N, maxd, maxv);
        triatt_scorer_free(sco);
    }
    if (quick) return 0;
    /* selection cost on top of scoring (V3, keep_high, 90% budget) */
    triatt_select_params sp = {.budget = N * 9 / 10, .window = 128, .divide_length = 128, .prefix_protect = 32,
                               .n_segments = 8, .version = TRIATT_V3, .direction = TRIATT_KEEP_HIGH};
    int32_t *out = malloc(N * sizeof(int32_t));
    for (int r = 0; r < reps; r++) {
        double t0 = lcx__now_ms(), c0 = cpu_ms();
        triatt_select(&sp, pos, sc, N, N - sp.budget, out);
        t[r] = lcx__now_ms() - t0;
        tc[r] = cpu_ms() - c0;
    }
    report("select V3 (90% budget)", t, tc, reps);
    free(out); free(t); free(tc); free(k32); free(k16); free(kq8); free(k16h); free(kq8h); free(pos); free(sc); free(sc2); free(q);
    triatt_calib_free(cal);
    return 0;
}
