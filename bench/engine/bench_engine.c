/* Engine benchmark: prompt processing (pp) and generation (tg) tok/s on a random-weight
 * GGUF with the exact shape of Qwen2.5-0.5B-Instruct (qwen2, 24 layers, n_embd 896,
 * 14 heads / 2 KV heads, head_dim 64, n_ff 4864, vocab 151936, tied output, QKV biases).
 *
 *   bench_engine [--dir DIR] [--types q8_0,q4_k_m] [--threads 1,2] [--pp 512] [--tg 128] [--reps 3]
 *   bench_engine --prefill 8192,16384,32768 [--types q8_0] [--threads 1,2] [--reps 3] [--budget-frac 0.9] [--skip-off]
 *                [--layers N (24)]
 *
 * --prefill: long prefills (one eng_decode of N tokens, ubatch 512, cache of N cells) without
 * and with TriAttention V3 (production defaults: budget N·frac, window 128, prefix 32, warmup
 * 256, hybrid 2, fast path), alternated off/on per repetition; reports tok/s of both, their
 * ratio, and the V3 share of the V3 run's time measured inside the run (calibration copies +
 * fast-path feature writes + rounds, eng_triatt_stats) — the overhead figure that does not
 * depend on the other tenants of a shared machine.
 *
 * Files are written once to DIR (default /tmp/longctx-bench) and reused; they are never
 * committed. "q4_k_m" follows llama.cpp's Q4_K_M choices for this shape: rows of 896 are not
 * a multiple of 256, so K-quants fall back (Q4_K -> Q5_0, Q6_K -> Q8_0): token_embd (= tied
 * output) Q8_0; attn_q/k/output, ffn_gate/up Q5_0; attn_v Q8_0 on the "more bits" layers
 * (0-2, 5, 8, 11, 14, 17, 20-23) else Q5_0; ffn_down (rows of 4864 = 19*256) Q6_K on those
 * layers else Q4_K. pp: one eng_decode of N tokens from an empty cache (ubatch 512);
 * tg: N single-token decodes from an empty cache — llama-bench's definitions.
 * Prints every repetition and the median per (file, threads). */
#include "longctx/engine.h"
#include "engine/gguf.h"
#include "engine/quant.h"
#include "util/util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

enum { N_LAYER_FULL = 24, N_EMBD = 896, N_HEAD = 14, N_KV = 2, HD = 64, N_FF = 4864, N_VOCAB = 151936 };

/* --layers N writes the same shape with N blocks: every cost the V3 share compares (layer
 * matmuls, attention, per-layer features and scoring) scales with the block count, while
 * per-round selection does not, so a shallower file gives the same share or a larger one
 * (an upper bound) in a fraction of the CPU time. */
static int g_n_layer = N_LAYER_FULL;

typedef struct { int64_t n_in, n_out; int type; uint64_t seed; float std; } tspec;
typedef struct { tspec *t; int n; } genctx;

static uint64_t rng_next(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x >> 12; x ^= x << 25; x ^= x >> 27;
    *s = x;
    return x * 0x2545F4914F6CDD1Dull;
}
/* approximately normal: sum of 4 uniforms, centred and scaled (fast; shape is irrelevant here) */
static void fill_normal(float *x, int64_t n, uint64_t *s, float std)
{
    for (int64_t i = 0; i < n; i++) {
        uint64_t r = rng_next(s);
        float u = (float)(r & 0xffff) + (float)((r >> 16) & 0xffff) + (float)((r >> 32) & 0xffff) + (float)(r >> 48);
        x[i] = (u / 65536.0f - 2.0f) * 1.7320508f * std;
    }
}

static int fill(void *ctx, int64_t ti, void *dst, size_t nbytes)
{
    genctx *g = ctx;
    const tspec *t = &g->t[ti];
    float *row = malloc(t->n_in * sizeof(float));
    if (!row) return LCX_ENOMEM;
    uint64_t s = t->seed * 0x9E3779B97F4A7C15ull + 1;
    size_t rb = eng__row_bytes((eng_type)t->type, t->n_in);
    for (int64_t r = 0; r < t->n_out; r++) {
        if (t->std == 0) for (int64_t i = 0; i < t->n_in; i++) row[i] = 1.0f;
        else fill_normal(row, t->n_in, &s, t->std);
        eng__quantize_row((eng_type)t->type, row, (uint8_t *)dst + r * rb, t->n_in);
    }
    free(row);
    (void)nbytes;
    return 0;
}

static bool more_bits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

static int write_model(const char *path, bool q4km)
{
    eng_gguf_writer *w = eng__gguf_writer_new(32);
    if (!w) return LCX_ENOMEM;
    tspec *ts = calloc(16 * g_n_layer + 8, sizeof *ts);
    int nt = 0;
    eng__gguf_w_str(w, "general.architecture", "qwen2");
    eng__gguf_w_str(w, "general.name", q4km ? "qwen2.5-0.5b-shape-random-q4_k_m" : "qwen2.5-0.5b-shape-random-q8_0");
    eng__gguf_w_u32(w, "general.file_type", q4km ? 15 : 7);
    eng__gguf_w_u32(w, "qwen2.context_length", 32768);
    eng__gguf_w_u32(w, "qwen2.embedding_length", N_EMBD);
    eng__gguf_w_u32(w, "qwen2.block_count", g_n_layer);
    eng__gguf_w_u32(w, "qwen2.feed_forward_length", N_FF);
    eng__gguf_w_u32(w, "qwen2.attention.head_count", N_HEAD);
    eng__gguf_w_u32(w, "qwen2.attention.head_count_kv", N_KV);
    eng__gguf_w_f32(w, "qwen2.rope.freq_base", 1000000.0f);
    eng__gguf_w_f32(w, "qwen2.attention.layer_norm_rms_epsilon", 1e-6f);
#define ADD(name, nin, nout, ty, sd)                                                                    \
    do {                                                                                                \
        ts[nt] = (tspec){nin, nout, ty, (uint64_t)nt + 1, sd};                                          \
        if ((nout) == 1) eng__gguf_w_tensor(w, name, ty, 1, (int64_t[]){nin}, NULL);                     \
        else eng__gguf_w_tensor(w, name, ty, 2, (int64_t[]){nin, nout}, NULL);                           \
        nt++;                                                                                           \
    } while (0)
    const int Q8 = ENG_T_Q8_0;
    ADD("token_embd.weight", N_EMBD, N_VOCAB, Q8, 0.02f);
    ADD("output_norm.weight", N_EMBD, 1, ENG_T_F32, 0);
    for (int il = 0; il < g_n_layer; il++) {
        char nm[64];
        bool mb = more_bits(il, g_n_layer);
        int base = q4km ? ENG_T_Q5_0 : Q8;
        int tv = q4km ? (mb ? Q8 : ENG_T_Q5_0) : Q8;
        int td = q4km ? (mb ? ENG_T_Q6_K : ENG_T_Q4_K) : Q8;
#define N(s) (snprintf(nm, sizeof nm, "blk.%d." s, il), nm)
        ADD(N("attn_norm.weight"), N_EMBD, 1, ENG_T_F32, 0);
        ADD(N("attn_q.weight"), N_EMBD, N_HEAD * HD, base, 0.03f);
        ADD(N("attn_k.weight"), N_EMBD, N_KV * HD, base, 0.03f);
        ADD(N("attn_v.weight"), N_EMBD, N_KV * HD, tv, 0.03f);
        ADD(N("attn_q.bias"), N_HEAD * HD, 1, ENG_T_F32, 0.1f);
        ADD(N("attn_k.bias"), N_KV * HD, 1, ENG_T_F32, 0.1f);
        ADD(N("attn_v.bias"), N_KV * HD, 1, ENG_T_F32, 0.1f);
        ADD(N("attn_output.weight"), N_HEAD * HD, N_EMBD, base, 0.03f);
        ADD(N("ffn_norm.weight"), N_EMBD, 1, ENG_T_F32, 0);
        ADD(N("ffn_gate.weight"), N_EMBD, N_FF, base, 0.03f);
        ADD(N("ffn_up.weight"), N_EMBD, N_FF, base, 0.03f);
        ADD(N("ffn_down.weight"), N_FF, N_EMBD, td, 0.015f);
#undef N
    }
#undef ADD
    genctx g = {ts, nt};
    int rc = eng__gguf_writer_write(w, path, fill, &g);
    eng__gguf_writer_free(w);
    free(ts);
    return rc;
}

/* Process CPU time in ms. On a shared, oversubscribed machine wall time mostly measures the
 * other tenants; tokens per (CPU seconds / threads) estimates what the same run takes on an
 * idle machine (it counts our spin-waits as work, so it errs low for threads > 1). */
static double cpu_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static double loadavg(void)
{
    double l = -1;
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) { if (fscanf(f, "%lf", &l) != 1) l = -1; fclose(f); }
    return l;
}

/* MiB of this process's anonymous memory in transparent huge pages (the engine copies the
 * weights there unless LCX_ENGINE_WEIGHTS=mmap; see docs/engine.md). */
static double anon_huge_mib(void)
{
    double kb = -1;
    char line[256];
    FILE *f = fopen("/proc/self/smaps_rollup", "r");
    if (!f) return -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "AnonHugePages: %lf", &kb) == 1) break;
    fclose(f);
    return kb / 1024;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int parse_list(const char *s, int *out, int max)
{
    int n = 0;
    while (*s && n < max) {
        out[n++] = atoi(s);
        const char *c = strchr(s, ',');
        if (!c) break;
        s = c + 1;
    }
    return n;
}

static int prefill_mode(eng_model *m, const char *ty, const int *sizes, int nsz, const int *threads, int nthr, int reps,
                        double frac, bool skip_off)
{
    printf("| file | threads | prefill | off tok/s (median) | V3 tok/s (median) | V3/off | off cpu-normalized | V3 cpu-normalized | V3/off cpu-normalized | V3 share of V3 run (median) | rounds | cells evicted | runs off | runs V3 |\n"
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (int si = 0; si < nsz; si++) {
        const int n = sizes[si];
        int32_t *toks = malloc(sizeof(int32_t) * n);
        if (!toks) return LCX_ENOMEM;
        uint32_t x = 11;
        for (int i = 0; i < n; i++) { x = x * 1103515245u + 12345u; toks[i] = (int32_t)((x >> 8) % N_VOCAB); }
        for (int ti = 0; ti < nthr; ti++) {
            eng_ctx_params cp = eng_ctx_default_params();
            cp.n_threads = threads[ti];
            cp.n_ctx = n;
            eng_ctx *c;
            if (eng_ctx_init(m, &cp, &c)) { fprintf(stderr, "ctx init failed\n"); free(toks); return 1; }
            triatt_config tc;
            triatt_config_default(&tc);
            tc.enabled = true;
            tc.budget = (int)(n * frac);
            tc.fast_path = true;
            double off[50], on[50], share[50], coff[50], con[50];
            unsigned long long rounds = 0, ev = 0;
            eng_decode(c, toks, NULL, 8, false);   /* warm-up */
            for (int r = 0; r < reps; r++) {
                eng_triatt_detach(c);
                eng_kv_clear(c);
                double t0 = lcx__now_ms(), c0 = cpu_ms();
                if (!skip_off) eng_decode(c, toks, NULL, n, false);
                off[r] = skip_off ? NAN : n * 1000.0 / (lcx__now_ms() - t0);
                coff[r] = skip_off ? NAN : n * 1000.0 / ((cpu_ms() - c0) / threads[ti]);
                eng_kv_clear(c);
                char err[256];
                if (eng_triatt_attach(c, &tc, NULL, err, sizeof err)) { fprintf(stderr, "%s\n", err); return 1; }
                t0 = lcx__now_ms();
                c0 = cpu_ms();
                eng_decode(c, toks, NULL, n, false);
                const double ms = lcx__now_ms() - t0;
                on[r] = n * 1000.0 / ms;
                con[r] = n * 1000.0 / ((cpu_ms() - c0) / threads[ti]);
                eng_triatt_stats st;
                eng_triatt_get_stats(c, &st);
                share[r] = (st.total_feed_ms + st.total_round_ms) / ms;
                rounds = st.rounds;
                ev = st.cells_evicted;
                fprintf(stderr, "%s %dt pp%d rep %d: off %.1f tok/s, V3 %.1f tok/s, V3 work %.1f ms (feed %.1f, %llu rounds %.1f) of %.0f ms\n",
                        ty, threads[ti], n, r + 1, off[r], on[r], st.total_feed_ms + st.total_round_ms, st.total_feed_ms,
                        (unsigned long long)st.rounds, st.total_round_ms, ms);
            }
            char so[512] = "", sv[512] = "";
            for (int r = 0; r < reps; r++) {
                snprintf(so + strlen(so), sizeof so - strlen(so), "%s%.1f", r ? " " : "", off[r]);
                snprintf(sv + strlen(sv), sizeof sv - strlen(sv), "%s%.1f", r ? " " : "", on[r]);
            }
            qsort(off, reps, sizeof(double), cmp_d);
            qsort(on, reps, sizeof(double), cmp_d);
            qsort(share, reps, sizeof(double), cmp_d);
            qsort(coff, reps, sizeof(double), cmp_d);
            qsort(con, reps, sizeof(double), cmp_d);
            printf("| %s | %d | %d | %.1f | %.1f | %.3f | %.1f | %.1f | %.3f | %.3f %% | %llu | %llu | %s | %s |\n", ty, threads[ti], n,
                   off[reps / 2], on[reps / 2], on[reps / 2] / off[reps / 2], coff[reps / 2], con[reps / 2],
                   con[reps / 2] / coff[reps / 2], 100 * share[reps / 2], rounds, ev, so, sv);
            fflush(stdout);
            eng_ctx_free(c);
        }
        free(toks);
    }
    return 0;
}

int main(int argc, char **argv)
{
    const char *dir = "/tmp/longctx-bench", *types = "q8_0,q4_k_m";
    int threads[8] = {1, 2}, nthr = 2, pp = 512, tg = 128, reps = 3, sizes[8], nsz = 0;
    double frac = 0.9;
    bool skip_off = false;
    for (int i = 1; i < argc; i++)   /* the one flag without a value */
        if (!strcmp(argv[i], "--skip-off")) {
            skip_off = true;
            memmove(argv + i, argv + i + 1, (size_t)(argc - i - 1) * sizeof *argv);
            argc--;
            i--;
        }
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--dir")) dir = argv[i + 1];
        else if (!strcmp(argv[i], "--types")) types = argv[i + 1];
        else if (!strcmp(argv[i], "--threads")) nthr = parse_list(argv[i + 1], threads, 8);
        else if (!strcmp(argv[i], "--pp")) pp = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--tg")) tg = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--reps")) reps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--prefill")) nsz = parse_list(argv[i + 1], sizes, 8);
        else if (!strcmp(argv[i], "--budget-frac")) frac = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--layers")) g_n_layer = atoi(argv[i + 1]);
        else { fprintf(stderr, "unknown option %s\n", argv[i]); return 2; }
    }
    if (reps < 1 || reps > 50 || pp < 1 || tg < 1 || g_n_layer < 1 || g_n_layer > N_LAYER_FULL) return 2;
    lcx__mkdirs(dir);
    const lcx_cpu_features *f = lcx__cpu();
    printf("# longctx-engine bench: Qwen2.5-0.5B-shaped random weights; cpu: avx2=%d fma=%d f16c=%d avx512f=%d avx512vnni=%d; kernels: %s\n",
           f->avx2, f->fma, f->f16c, f->avx512f, f->avx512vnni, eng__isa_name(eng__isa_best()));
    printf("# load average at start: %.2f; blocks: %d of %d\n", loadavg(), g_n_layer, N_LAYER_FULL);
    if (!nsz)
        printf("| file | threads | pp%d tok/s (median) | tg%d tok/s (median) | pp%d cpu-normalized | tg%d cpu-normalized | runs pp | runs tg |\n|---|---|---|---|---|---|---|---|\n", pp, tg, pp, tg);
    char tl[64];
    snprintf(tl, sizeof tl, "%s", types);
    for (char *ty = strtok(tl, ","); ty; ty = strtok(NULL, ",")) {
        bool q4km = !strcmp(ty, "q4_k_m");
        if (!q4km && strcmp(ty, "q8_0")) { fprintf(stderr, "unknown type %s\n", ty); return 2; }
        char path[512];
        if (g_n_layer == N_LAYER_FULL) snprintf(path, sizeof path, "%s/qwen2.5-0.5b-shape-%s.gguf", dir, ty);
        else snprintf(path, sizeof path, "%s/qwen2.5-0.5b-shape-%dl-%s.gguf", dir, g_n_layer, ty);
        struct stat st;
        if (stat(path, &st) != 0) {
            fprintf(stderr, "writing %s ...\n", path);
            int rc = write_model(path, q4km);
            if (rc) { fprintf(stderr, "write failed: %s\n", lcx_strerror(rc)); return 1; }
        }
        eng_model *m;
        char err[256];
        if (eng_model_load(path, &m, err, sizeof err)) { fprintf(stderr, "%s\n", err); return 1; }
        const char *wm = getenv("LCX_ENGINE_WEIGHTS");
        printf("# %s: weights %s, %.0f MiB in huge pages\n", ty, wm && !strcmp(wm, "mmap") ? "mmap'd" : "copied",
               anon_huge_mib());
        if (nsz) {
            int rc = prefill_mode(m, ty, sizes, nsz, threads, nthr, reps, frac, skip_off);
            eng_model_free(m);
            if (rc) return 1;
            continue;
        }
        int32_t *toks = malloc(sizeof(int32_t) * (pp > tg ? pp : tg));
        uint32_t x = 7;
        for (int i = 0; i < (pp > tg ? pp : tg); i++) { x = x * 1103515245u + 12345u; toks[i] = (int32_t)((x >> 8) % N_VOCAB); }
        for (int ti = 0; ti < nthr; ti++) {
            eng_ctx_params cp = eng_ctx_default_params();
            cp.n_threads = threads[ti];
            cp.n_ctx = pp + tg + 16;
            eng_ctx *c;
            if (eng_ctx_init(m, &cp, &c)) { fprintf(stderr, "ctx init failed\n"); return 1; }
            double rpp[50], rtg[50], cpp[50], ctg[50];
            eng_decode(c, toks, NULL, 8, false);   /* warm-up: page in, start threads */
            for (int r = 0; r < reps; r++) {
                eng_kv_clear(c);
                double t0 = lcx__now_ms(), c0 = cpu_ms();
                eng_decode(c, toks, NULL, pp, false);
                rpp[r] = pp * 1000.0 / (lcx__now_ms() - t0);
                cpp[r] = pp * 1000.0 / ((cpu_ms() - c0) / threads[ti]);
                eng_kv_clear(c);
                t0 = lcx__now_ms();
                c0 = cpu_ms();
                for (int i = 0; i < tg; i++) eng_decode(c, &toks[i], NULL, 1, false);
                rtg[r] = tg * 1000.0 / (lcx__now_ms() - t0);
                ctg[r] = tg * 1000.0 / ((cpu_ms() - c0) / threads[ti]);
            }
            char spp[512] = "", stg[512] = "";
            for (int r = 0; r < reps; r++) {
                snprintf(spp + strlen(spp), sizeof spp - strlen(spp), "%s%.1f", r ? " " : "", rpp[r]);
                snprintf(stg + strlen(stg), sizeof stg - strlen(stg), "%s%.1f", r ? " " : "", rtg[r]);
            }
            qsort(rpp, reps, sizeof(double), cmp_d);
            qsort(rtg, reps, sizeof(double), cmp_d);
            qsort(cpp, reps, sizeof(double), cmp_d);
            qsort(ctg, reps, sizeof(double), cmp_d);
            printf("| %s | %d | %.1f | %.1f | %.1f | %.1f | %s | %s |\n", ty, threads[ti], rpp[reps / 2], rtg[reps / 2],
                   cpp[reps / 2], ctg[reps / 2], spp, stg);
            fflush(stdout);
            eng_ctx_free(c);
        }
        free(toks);
        eng_model_free(m);
    }
    printf("# load average at end: %.2f\n", loadavg());
    return 0;
}
