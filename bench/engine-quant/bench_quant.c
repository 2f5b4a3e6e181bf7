/* bench_engine_quant: single-thread eng__matmul throughput per weight type on the matrix
 * shapes of Qwen2.5-0.5B, for n_tok = 1 (generation, memory bound: GB/s of weights) and
 * n_tok = 512 (prompt processing: GFLOP/s, 2 flops per multiply-add), medians of --reps.
 * Then a per-model estimate: the matmul time of one Qwen2.5-0.5B token (tg) and of a
 * 512-token prompt (pp512, lm head on the last token only), as tok/s.
 *
 *   bench_engine_quant [--reps N] [--types q8_0,q4_0,...] [--isa scalar|avx2|avx512] [--no-vocab-pp]
 *                      [--cpu]   (thread CPU time instead of wall time)
 *                      [--shape I] (only shape I of the table below, 0-based)
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/quant.h"
#include "util/util.h"

static uint64_t g_rng = 0x9E3779B97F4A7C15ull;
static float nrand(void)
{
    /* sum of 4 uniforms, centred: cheap and normal enough for weights */
    float s = 0.f;
    for (int i = 0; i < 4; i++) {
        g_rng ^= g_rng << 13;
        g_rng ^= g_rng >> 7;
        g_rng ^= g_rng << 17;
        s += (float)(g_rng >> 40) * (1.0f / 16777216.0f);
    }
    return (s - 2.f) * 1.7320508f;
}

/* Thread CPU time: the build machine is shared, so wall time includes time spent
 * descheduled; --cpu reports this instead (cache contention still shows). */
static bool g_cpu_time = false;
static double now_ms(void)
{
    if (!g_cpu_time) return lcx__now_ms();
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* prompt-kernel workspace, as the engine passes one per thread */
static void *g_ws;

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

typedef struct { const char *name; int64_t n_in, n_out; int per_layer; } shape;

/* Qwen2.5-0.5B: 24 layers, n_embd 896, 14 heads (q: 896), 2 KV heads x 64 (k, v: 128), ff 4864 */
static const shape k_shapes[] = {
    {"attn_q/o 896x896", 896, 896, 2},
    {"attn_k/v 896x128", 896, 128, 2},
    {"ffn_gate/up 896x4864", 896, 4864, 2},
    {"ffn_down 4864x896", 4864, 896, 1},
    {"lm_head 896x151936", 896, 151936, 0},
};

static double bench_one(eng_isa isa, eng_type wt, const shape *s, int64_t n_tok, int reps, double *gflops,
                        double *gbs)
{
    const eng_type vt = eng__vec_dot_type(wt);
    const size_t wrb = eng__row_bytes(wt, s->n_in), xrb = eng__row_bytes(vt, s->n_in);
    uint8_t *W = malloc(wrb * s->n_out), *X = malloc(xrb * n_tok);
    float *f = malloc(sizeof(float) * s->n_in), *y = malloc(sizeof(float) * s->n_out * n_tok);
    if (!W || !X || !f || !y) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    for (int64_t r = 0; r < s->n_out; r++) {
        if (r < 64) for (int64_t i = 0; i < s->n_in; i++) f[i] = nrand() * 0.03f;
        else for (int64_t i = 0; i < s->n_in; i++) f[i] = f[(i * 7 + r) % s->n_in]; /* cheap variety */
        eng__quantize_row(wt, f, W + r * wrb, s->n_in);
    }
    for (int64_t t = 0; t < n_tok; t++) {
        for (int64_t i = 0; i < s->n_in; i++) f[i] = nrand();
        eng__quantize_row(vt, f, X + t * xrb, s->n_in);
    }
    double *ms = malloc(sizeof(double) * reps);
    for (int k = -1; k < reps; k++) {
        double t0 = now_ms();
        eng__matmul_isa_ws(isa, wt, W, wrb, s->n_in, 0, s->n_out, X, xrb, n_tok, y, s->n_out, g_ws, ENG_MATMUL_WS_BYTES);
        double dt = now_ms() - t0;
        if (k >= 0) ms[k] = dt;
    }
    qsort(ms, reps, sizeof(double), cmp_d);
    const double med = ms[reps / 2];
    *gflops = 2.0 * s->n_in * s->n_out * n_tok / (med * 1e6);
    *gbs = (double)wrb * s->n_out / (med * 1e6);
    free(ms);
    free(W);
    free(X);
    free(f);
    free(y);
    return med;
}

static double bench_quantize(eng_type vt, int64_t n, int64_t n_tok)
{
    float *x = malloc(sizeof(float) * n * n_tok);
    uint8_t *q = malloc(eng__row_bytes(vt, n) * n_tok);
    for (int64_t i = 0; i < n * n_tok; i++) x[i] = nrand();
    double best = 1e30;
    for (int k = 0; k < 5; k++) {
        double t0 = now_ms();
        for (int64_t t = 0; t < n_tok; t++) eng__quantize_row(vt, x + t * n, q + t * eng__row_bytes(vt, n), n);
        double dt = now_ms() - t0;
        if (dt < best) best = dt;
    }
    free(x);
    free(q);
    return best;
}

int main(int argc, char **argv)
{
    int reps = 5;
    bool vocab_pp = true;
    int only_shape = -1;
    eng_isa isa = eng__isa_best();
    const char *types = "q8_0,q4_0,q5_0,q4_K,q5_K,q6_K,f16,bf16,f32";
    g_ws = malloc(ENG_MATMUL_WS_BYTES);
    if (!g_ws) {
        fprintf(stderr, "out of memory\n");
        return 1;
    }
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--types") && i + 1 < argc) types = argv[++i];
        else if (!strcmp(argv[i], "--no-vocab-pp")) vocab_pp = false;
        else if (!strcmp(argv[i], "--cpu")) g_cpu_time = true;
        else if (!strcmp(argv[i], "--shape") && i + 1 < argc) only_shape = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--isa") && i + 1 < argc) {
            const char *v = argv[++i];
            isa = !strcmp(v, "scalar") ? ENG_ISA_SCALAR : !strcmp(v, "avx2") ? ENG_ISA_AVX2 : ENG_ISA_AVX512;
        } else {
            fprintf(stderr, "usage: %s [--reps N] [--types a,b] [--isa scalar|avx2|avx512] [--no-vocab-pp] [--cpu] [--shape INDEX]\n", argv[0]);
            return 2;
        }
    }
    if (reps < 1) reps = 1;
    const lcx_cpu_features *c = lcx__cpu();
    printf("engine-quant bench: 1 thread, kernels %s (cpu: avx2=%d fma=%d f16c=%d avx512f=%d avx512vnni=%d), median of %d, %s time\n",
           eng__isa_name(isa), c->avx2, c->fma, c->f16c, c->avx512f, c->avx512vnni, reps,
           g_cpu_time ? "thread cpu" : "wall");
    printf("quantize activations: q8_0 896x512 %.2f ms, q8_K 4864x512 %.2f ms, f16 896x512 %.2f ms\n",
           bench_quantize(ENG_T_Q8_0, 896, 512), bench_quantize(ENG_T_Q8_K, 4864, 512),
           bench_quantize(ENG_T_F16, 896, 512));
    printf("%-6s %-22s %10s %9s %9s %12s %9s\n", "type", "shape (in x out)", "tg ms", "tg GB/s", "tg GF/s",
           "pp512 ms", "pp GF/s");
    char buf[256];
    snprintf(buf, sizeof buf, "%s", types);
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        eng_type wt = ENG_T_F32;
        bool found = false;
        for (int t = 0; t < 40; t++)
            if (eng__type_supported(t) && !strcmp(eng__type_name((eng_type)t), tok)) {
                wt = (eng_type)t;
                found = true;
            }
        if (!found) {
            fprintf(stderr, "unknown type %s\n", tok);
            continue;
        }
        double tg_total = 0, pp_total = 0;
        bool complete = true;
        for (size_t k = 0; k < LCX_ARRAY_LEN(k_shapes); k++) {
            const shape *s = &k_shapes[k];
            if (only_shape >= 0 && (size_t)only_shape != k) {
                complete = false;
                continue;
            }
            if (s->n_in % eng__type_block_elems(wt)) {
                printf("%-6s %-22s %10s\n", tok, s->name, "n/a (row not a multiple of the block)");
                complete = false;
                continue;
            }
            double gf1, gb1, gf2, gb2;
            double t1 = bench_one(isa, wt, s, 1, reps, &gf1, &gb1);
            double t2 = -1;
            if (s->per_layer || vocab_pp) t2 = bench_one(isa, wt, s, 512, reps < 3 ? reps : 3, &gf2, &gb2);
            if (t2 >= 0) printf("%-6s %-22s %10.3f %9.2f %9.2f %12.2f %9.2f\n", tok, s->name, t1, gb1, gf1, t2, gf2);
            else printf("%-6s %-22s %10.3f %9.2f %9.2f %12s %9s\n", tok, s->name, t1, gb1, gf1, "-", "-");
            const int mult = s->per_layer ? 24 * s->per_layer : 1;
            tg_total += mult * t1;
            pp_total += s->per_layer ? mult * t2 : t1; /* lm head: last token only */
        }
        if (complete)
            printf("%-6s Qwen2.5-0.5B matmuls only: tg %.1f tok/s (%.1f ms/token), pp512 %.1f tok/s (%.0f ms)\n",
                   tok, 1000.0 / tg_total, tg_total, 512 * 1000.0 / pp_total, pp_total);
        fflush(stdout);
    }
    return 0;
}
