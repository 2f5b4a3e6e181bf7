/* Retrieval-core benchmark: prints medians / percentiles, never asserts.
 *
 *   bench_core [N]            N spans (default 100000) of ~256 LLM tokens (~180 words,
 *                             ~1.1 KB) cut from the Paul Graham essays, each with a unique
 *                             number, ingested in batches of 1000 (one fsync per batch).
 *   Reports: in-process ingest spans/s; search p50/p95/p99 at 20k and N spans (defaults:
 *   top_k 8, hybrid linear α 0.5, rerank on); reopen time of the N-span store in a fresh
 *   process (exec of this binary) with and without the snapshot; RSS. */
#include "longctx/lcx.h"
#include "embed/embed.h"
#include "index/index.h"
#include "util/util.h"
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static long rss_kb(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long v = -1;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "VmRSS:", 6)) v = atol(line + 6);
    if (f) fclose(f);
    return v;
}

#include <sys/resource.h>
#include <time.h>
/* the process's system CPU time (all threads), ms */
static double sys_ms(void)
{
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return u.ru_stime.tv_sec * 1e3 + u.ru_stime.tv_usec / 1e3;
}

/* LCX_PERF_CTL=FIFO: writes "enable" / "disable" to perf's control FIFO around the ingest
 * loop, so `perf record -D -1 --control fifo:FIFO` profiles the ingest alone (no span set-up,
 * no close-time snapshot). */
static void perf_ctl(const char *cmd)
{
    const char *fifo = getenv("LCX_PERF_CTL");
    if (!fifo) return;
    FILE *f = fopen(fifo, "w");
    if (f) fprintf(f, "%s\n", cmd), fclose(f);
}

static double cpu_ms(clockid_t c)
{
    struct timespec t;
    clock_gettime(c, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static int cmpd(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}
static double pct(double *v, int n, double p)
{
    qsort(v, (size_t)n, sizeof *v, cmpd);
    int i = (int)(p * (n - 1) + 0.5);
    return v[i];
}

static int cmps(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static char *load_corpus(size_t *len)
{
    const char *fx = getenv("LCX_FIXTURES");
    char root[4096];
    snprintf(root, sizeof root, "%s/haystack/paul_graham", fx ? fx : "../shared/fixtures");
    DIR *d = opendir(root);
    if (!d) {
        fprintf(stderr, "cannot open %s (set LCX_FIXTURES)\n", root);
        exit(2);
    }
    char *names[256];
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < 256)
        if (strstr(e->d_name, ".txt")) names[n++] = strdup(e->d_name);
    closedir(d);
    qsort(names, (size_t)n, sizeof *names, cmps);
    lcx_buf b = {0};
    for (int i = 0; i < n; i++) {
        char p[8192], *data;
        size_t l;
        snprintf(p, sizeof p, "%s/%s", root, names[i]);
        if (lcx__read_file(p, 0, &data, &l) == 0) {
            for (size_t k = 0; k < l; k++)
                if (data[k] == '\n') data[k] = ' ';
            lcx__buf_append(&b, data, l);
            lcx__buf_append(&b, " ", 1);
            free(data);
        }
        free(names[i]);
    }
    *len = b.len;
    return b.data;
}

/* span i: 180 words starting at a pseudo-random word boundary, plus a unique number */
static size_t make_span(const char *c, size_t clen, uint32_t i, char *out, size_t cap)
{
    size_t s = (size_t)(((uint64_t)i * 2654435761u) % (clen - 4000));
    while (s < clen && c[s] != ' ') s++;
    size_t e = s + 1, w = 0;
    while (e < clen && w < 180) {
        if (c[e] == ' ') w++;
        e++;
    }
    int h = snprintf(out, cap, "[span %u ref %u] ", i, i * 7919u + 13u);
    size_t n = e - s - 1;
    if (n > cap - (size_t)h - 1) n = cap - (size_t)h - 1;
    memcpy(out + h, c + s + 1, n);
    out[h + n] = 0;
    return (size_t)h + n;
}

static int reopen_child(const char *dir)
{
    lcx_embedder *emb;
    lcx_embedder_hash_new(0, &emb);
    double t0 = lcx__now_ms(), c0 = cpu_ms(CLOCK_PROCESS_CPUTIME_ID);
    lcx_store *s;
    int rc = lcx_store_open(dir, emb, NULL, &s);
    double t1 = lcx__now_ms(), c1 = cpu_ms(CLOCK_PROCESS_CPUTIME_ID);
    if (rc) {
        fprintf(stderr, "open: %s\n", lcx_strerror(rc));
        return 1;
    }
    lcx_search_opts o = lcx_search_defaults();
    lcx_hit h[8];
    const char *q = "what did the founders learn about startups and investors";
    double t2 = lcx__now_ms();
    lcx_store_search(s, q, strlen(q), &o, h, 8);
    double t3 = lcx__now_ms();
    printf("%.3f %.3f %ld %u %.3f\n", t1 - t0, t3 - t2, rss_kb(), lcx_store_count(s), c1 - c0);
    fflush(stdout);
    if (getenv("LCX_BENCH_NOSNAP")) _exit(0);   /* keep the directory as it is (no close-time snapshot) */
    lcx_store_close(s);
    lcx_embedder_free(emb);
    return 0;
}

static void reopen_bench(const char *self, const char *dir, const char *label, int runs, int nosnap)
{
    double ms[8], cms[8], first_q[8];
    long rss = 0;
    unsigned cnt = 0;
    for (int r = 0; r < runs; r++) {
        char cmd[8192];
        snprintf(cmd, sizeof cmd, "%s%s --reopen %s", nosnap ? "LCX_BENCH_NOSNAP=1 " : "", self, dir);
        FILE *p = popen(cmd, "r");
        if (!p || fscanf(p, "%lf %lf %ld %u %lf", &ms[r], &first_q[r], &rss, &cnt, &cms[r]) != 5) {
            fprintf(stderr, "reopen child failed\n");
            if (p) pclose(p);
            return;
        }
        pclose(p);
    }
    printf("reopen %-18s %u spans: open median %.2f ms wall (min %.2f, max %.2f), %.2f ms CPU; first search %.2f ms; "
           "child RSS %.1f MiB\n",
           label, cnt, pct(ms, runs, 0.5), pct(ms, runs, 0), pct(ms, runs, 1), pct(cms, runs, 0.5),
           pct(first_q, runs, 0.5), rss / 1024.0);
}

static void search_bench(lcx_store *s, const char *c, size_t clen, uint32_t n_spans, int nq)
{
    lcx_search_opts o = lcx_search_defaults();
    lcx_hit h[8];
    double *lat = malloc(sizeof(double) * (size_t)nq), *clat = malloc(sizeof(double) * (size_t)nq);
    char q[512];
    int hits_ok = 0;
    for (int i = 0; i < nq; i++) {
        /* a question made of 6 words of a random span plus its unique number */
        uint32_t id = (uint32_t)((uint64_t)i * 40503u % n_spans);
        char span[4096];
        make_span(c, clen, id, span, sizeof span);
        const char *p = span;
        for (int k = 0; k < 20 && *p; k++) { p = strchr(p + 1, ' '); if (!p) { p = span; break; } }
        int ql = snprintf(q, sizeof q, "what about ref %u and %.60s", id * 7919u + 13u, p);
        double t0 = lcx__now_ms(), c0 = cpu_ms(CLOCK_PROCESS_CPUTIME_ID);   /* includes scan helper threads */
        int n = lcx_store_search(s, q, (size_t)ql, &o, h, 8);
        lat[i] = lcx__now_ms() - t0;
        clat[i] = cpu_ms(CLOCK_PROCESS_CPUTIME_ID) - c0;
        if (n > 0 && h[0].id == id) hits_ok++;
    }
    double p50 = pct(lat, nq, 0.5), p95 = pct(lat, nq, 0.95), p99 = pct(lat, nq, 0.99);
    printf("search %6u spans: wall p50 %.3f ms  p95 %.3f ms  p99 %.3f ms | CPU p50 %.3f p95 %.3f p99 %.3f ms  (%d "
           "queries, top-1 correct %d%%)\n",
           n_spans, p50, p95, p99, pct(clat, nq, 0.5), pct(clat, nq, 0.95), pct(clat, nq, 0.99), nq,
           hits_ok * 100 / nq);
    free(lat);
    free(clat);
}

/* The ingest path's per-text preparation alone (lcx__prep_embed + doc_terms copy: the
 * tokenizer, hash features and BM25 term table of store.c's workers) over n texts, as one
 * noinline function so that callgrind --toggle-collect='prep_loop*' counts just this. */
static __attribute__((noinline)) uint32_t prep_loop(const lcx_embedder *emb, const char *const *tx, const size_t *ln,
                                                    size_t n, unsigned char *mem, float *v)
{
    lcx__prep p = {0};
    uint32_t sum = 0;
    for (size_t i = 0; i < n; i++) {
        if (lcx__prep_embed(&p, emb, tx[i], ln[i], v) < 0) abort();
        lcx__doc_terms *dt = lcx__prep_finish_to(&p, mem);
        uint32_t b;
        memcpy(&b, &v[i & 255], 4);
        sum += dt->nt + b;
    }
    lcx__prep_free(&p);
    return sum;
}

/* prep_loop over the texts PASSES times: thread CPU per text, min and median of the passes
 * (other processes on a shared machine inflate some passes), and a checksum of the terms
 * and vector bits (equal between builds iff their output is). */
static void prep_passes(const char *label, const lcx_embedder *emb, const char *const *tx, const size_t *ln, size_t n,
                        size_t bytes)
{
    enum { PASSES = 7 };
    size_t cap = 0;
    for (size_t i = 0; i < n; i++) cap = ln[i] > cap ? ln[i] : cap;
    unsigned char *mem = aligned_alloc(16, (cap * 80 + 4096 + 15) & ~(size_t)15);   /* ≥ prep_size: ≤ 2 terms/byte */
    float *v = malloc(256 * sizeof *v);
    double us[PASSES];
    uint32_t sum = 0;
    for (int r = 0; r < PASSES; r++) {
        double c0 = cpu_ms(CLOCK_THREAD_CPUTIME_ID);
        sum = prep_loop(emb, tx, ln, n, mem, v);
        us[r] = (cpu_ms(CLOCK_THREAD_CPUTIME_ID) - c0) * 1000 / (double)n;
        for (int k = r; k > 0 && us[k] < us[k - 1]; k--) { double x = us[k]; us[k] = us[k - 1]; us[k - 1] = x; }
    }
    printf("%s prep (tokenize+embed+BM25 terms, 1 thread, %zu texts, %d passes): thread CPU per text min %.2f us, "
           "median %.2f us; %.1f MB per CPU-s (median) (check %u)\n", label, n, PASSES, us[0], us[PASSES / 2],
           (double)bytes / n / us[PASSES / 2], sum);
    free(mem);
    free(v);
}

/* --code DIR [MB [GLOB]]: code ingest throughput. Reads files named GLOB (default *.h) under DIR (sorted walk via
 * `find`, up to MB megabytes, default 24), cuts them at line ends into ~1.75 KB chunks (the
 * mean chunk of the scope layer on /usr/include), then measures (1) tokenize + embed + BM25
 * prep on one thread and (2) lcx_store_append in batches of 500 (fsync each). MB/s are
 * over chunk text bytes; CPU = process CPU time (all threads). */
static int code_bench(const char *root, double max_mb, const char *glob)
{
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "find '%s' -type f -name '%s' | LC_ALL=C sort", root, glob);
    FILE *f = popen(cmd, "r");
    if (!f) return 1;
    size_t cap = (size_t)(max_mb * 1e6) + 65536, used = 0;
    char *all = malloc(cap), line[4096];
    while (fgets(line, sizeof line, f) && used < (size_t)(max_mb * 1e6)) {
        line[strcspn(line, "\n")] = 0;
        char *d;
        size_t l;
        if (lcx__read_file(line, 1 << 20, &d, &l)) continue;
        if (used + l > cap) l = cap - used;
        memcpy(all + used, d, l);
        used += l;
        free(d);
    }
    pclose(f);
    /* chunks: cut at the first newline after 1,750 bytes (or at 4,000) */
    size_t nch = 0, chcap = used / 1000 + 16;
    size_t *off = malloc(chcap * sizeof *off), *len = malloc(chcap * sizeof *len);
    for (size_t a = 0; a < used && nch < chcap;) {
        size_t b = a + 1750 < used ? a + 1750 : used;
        while (b < used && b - a < 4000 && all[b - 1] != '\n') b++;
        off[nch] = a;
        len[nch++] = b - a;
        a = b;
    }
    lcx_embedder *emb;
    lcx_embedder_hash_new(0, &emb);
    printf("code: %zu chunks, %.1f MB from %s\n", nch, used / 1e6, root);
    {
        const char **tx = malloc(nch * sizeof *tx);
        for (size_t i = 0; i < nch; i++) tx[i] = all + off[i];
        prep_passes("code", emb, tx, len, nch, used);
        free(tx);
        if (getenv("LCX_BENCH_PREP_ONLY")) return 0;
    }
    char tmpl[] = "/tmp/lcxbench.XXXXXX";
    char *dir = mkdtemp(tmpl);
    lcx_store *s;
    if (!dir || lcx_store_open(dir, emb, NULL, &s)) return 1;
    enum { CB = 500 };
    lcx_chunk *c = malloc(sizeof *c * CB);
    double c0 = cpu_ms(CLOCK_PROCESS_CPUTIME_ID), t0 = lcx__now_ms();
    for (size_t base = 0; base < nch; base += CB) {
        size_t m = nch - base < CB ? nch - base : CB;
        for (size_t j = 0; j < m; j++) {
            c[j] = lcx_chunk_init();
            c[j].text = all + off[base + j];
            c[j].text_len = (uint32_t)len[base + j];
            c[j].file_type = LCX_FT_CODE;
        }
        if (lcx_store_append(s, c, (int)m, NULL)) { fprintf(stderr, "append failed\n"); return 1; }
    }
    double c1 = cpu_ms(CLOCK_PROCESS_CPUTIME_ID), t1 = lcx__now_ms();
    printf("code ingest (lcx_store_append, batches of %d): %.1f MB/s wall, %.1f MB per CPU-s, %.1f us/chunk CPU\n", CB,
           used / 1e6 / ((t1 - t0) / 1e3), used / 1e6 / ((c1 - c0) / 1e3), (c1 - c0) * 1e3 / nch);
    lcx_store_close(s);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) fprintf(stderr, "cleanup failed\n");
    lcx_embedder_free(emb);
    free(c); free(off); free(len); free(all);
    return 0;
}
static const lcx_embedder *g_emb;
static int g_notc;

/* --worker N: the per-span work of an ingest worker (store.c work_run: tokenize + embed +
 * BM25 term table, doc_terms copy, 8-bit quantisation, term-id resolve, posting keys) on
 * one thread, against an index already holding the first 20k spans; reports thread CPU
 * per span (the number the ≥ 100k spans/s goal needs ≤ 13 µs of). For callgrind:
 * --toggle-collect=worker_loop counts only the timed loop. */
static __attribute__((noinline)) void worker_loop(lcx_index *ix, const char *texts, const uint32_t *lens, uint32_t a,
                                                  uint32_t b, unsigned char *mem, uint8_t *row8, float *tmp,
                                                  lcx__post_keys *keys, uint32_t *sum)
{
    lcx__prep p = {0};
    for (uint32_t i = a; i < b; i++) {
        const char *tx = texts + (size_t)i * 1400;
        if (lcx__prep_embed(&p, g_emb, tx, lens[i], tmp) < 0) abort();
        lcx__doc_terms *dt = lcx__prep_finish_to(&p, mem);
        float sc;
        lcx__quant_row_u8(tmp, 256, row8, &sc);
        if ((i - a) % 1000 == 0) lcx__post_keys_reset(keys);
        if (g_notc) lcx__index_resolve(ix, dt);   /* A/B (env LCX_BENCH_NOTC): the uncached lookup */
        else lcx__index_resolve_cached(ix, dt, keys);
        if (lcx__post_keys_add(keys, dt, (i - a) % 1000)) abort();
        *sum += dt->nt + row8[0];
    }
    lcx__prep_free(&p);
}

static int worker_bench(const char *texts, const uint32_t *lens, uint32_t N, lcx_embedder *emb)
{
    lcx_index *ix;
    if (lcx_index_new(emb, &ix)) return 1;
    uint32_t warm = N < 20000 ? N : 20000;
    float *v = malloc(256 * sizeof *v);
    for (uint32_t i = 0; i < warm; i++) {
        const char *tx = texts + (size_t)i * 1400;
        size_t l = lens[i];
        lcx_embed(emb, &tx, &l, 1, v);
        if (lcx_index_add(ix, tx, l, v, NULL) < 0) return 1;
    }
    unsigned char *mem = aligned_alloc(16, 1 << 20);
    uint8_t row8[256];
    lcx__post_keys keys = {0};
    uint32_t sum = 0;
    g_emb = emb;
    g_notc = getenv("LCX_BENCH_NOTC") != NULL;
    /* passes over the spans (timed separately): min and median, since other processes on
     * a shared machine inflate the CPU time of some passes (SMT sibling, caches) */
    enum { PASSES = 7 };
    double us[PASSES];
    for (int r = 0; r < PASSES; r++) {
        double c0 = cpu_ms(CLOCK_THREAD_CPUTIME_ID);
        worker_loop(ix, texts, lens, 0, N, mem, row8, v, &keys, &sum);
        us[r] = (cpu_ms(CLOCK_THREAD_CPUTIME_ID) - c0) * 1000 / N;
        for (int k = r; k > 0 && us[k] < us[k - 1]; k--) { double x = us[k]; us[k] = us[k - 1]; us[k - 1] = x; }
    }
    printf("worker path (1 thread, %u spans vs a %u-span index, %d passes): thread CPU per span min %.2f us, "
           "median %.2f us (check %u)\n", N, warm, PASSES, us[0], us[PASSES / 2], sum);
    lcx__post_keys_free(&keys);
    free(mem);
    free(v);
    lcx_index_free(ix);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 3 && !strcmp(argv[1], "--reopen")) return reopen_child(argv[2]);
    if (argc >= 3 && !strcmp(argv[1], "--code")) return code_bench(argv[2], argc > 3 ? atof(argv[3]) : 24, argc > 4 ? argv[4] : "*.h");
    /* --ingest N: only the ingest part (for perf/callgrind runs; no search, no reopen) */
    int ingest_only = argc > 2 && !strcmp(argv[1], "--ingest");
    int worker_only = argc > 2 && !strcmp(argv[1], "--worker");
    /* --prep N: lcx__prep_embed alone over N prose spans (prep_passes) */
    int prep_only = argc > 2 && !strcmp(argv[1], "--prep");
    if (ingest_only || worker_only || prep_only) argv++, argc--;
    uint32_t N = argc > 1 ? (uint32_t)atol(argv[1]) : 100000;
    if (N < 20000 && !ingest_only && !worker_only && !prep_only) N = 20000;
    if (N < 1000) N = 1000;
    char self[4096];
    ssize_t sl = readlink("/proc/self/exe", self, sizeof self - 1);
    if (sl <= 0) return 1;
    self[sl] = 0;
    size_t clen;
    char *corpus = load_corpus(&clen);
    lcx_embedder *emb;
    lcx_embedder_hash_new(0, &emb);
    printf("machine: %ld CPUs online, AVX-512 %s\n", sysconf(_SC_NPROCESSORS_ONLN), lcx__cpu_has_avx512() ? "yes" : "no");

    /* prepare all span texts first (not timed) */
    enum { B = 1000 };
    char *texts = malloc((size_t)N * 1400);
    uint32_t *lens = malloc((size_t)N * 4);
    uint64_t bytes = 0;
    for (uint32_t i = 0; i < N; i++) {
        lens[i] = (uint32_t)make_span(corpus, clen, i, texts + (size_t)i * 1400, 1400);
        bytes += lens[i];
    }
    printf("spans: %u, mean %.0f bytes\n", N, (double)bytes / N);
    if (worker_only) return worker_bench(texts, lens, N, emb);
    if (prep_only) {
        const char **tx = malloc((size_t)N * sizeof *tx);
        size_t *ln = malloc((size_t)N * sizeof *ln);
        for (uint32_t i = 0; i < N; i++) tx[i] = texts + (size_t)i * 1400, ln[i] = lens[i];
        prep_passes("prose", emb, tx, ln, N, bytes);
        free(tx);
        free(ln);
        return 0;
    }

    /* component throughput: tokenize+embed only */
    if (!ingest_only) {
        float *v = malloc(256 * 4 * 64);
        double t0 = lcx__now_ms();
        uint32_t m = N < 20000 ? N / 64 * 64 : 19968;   /* whole batches of 64 within N */
        for (uint32_t i = 0; i < m; i += 64) {
            const char *tx[64];
            size_t ln[64];
            for (int j = 0; j < 64; j++) { tx[j] = texts + (size_t)(i + j) * 1400; ln[j] = lens[i + j]; }
            lcx_embed(emb, tx, ln, 64, v);
        }
        double dt = lcx__now_ms() - t0;
        printf("hash embed (1 thread): %.0f spans/s, %.1f MB/s\n", m / (dt / 1000), bytes / (double)N * m / (dt / 1000) / 1e6);
        free(v);
    }

    char tmpl[] = "/tmp/lcxbench.XXXXXX";
    char *dir = mkdtemp(tmpl);
    long rss0 = rss_kb();
    lcx_store *s;
    if (lcx_store_open(dir, emb, NULL, &s)) return 1;
    lcx_chunk *c = malloc(sizeof *c * B);
    double t_ingest = 0, t20 = 0, c_ingest0 = cpu_ms(CLOCK_PROCESS_CPUTIME_ID), c_search = 0;
    double s_ingest0 = sys_ms(), s_search = 0;
    perf_ctl("enable");
    for (uint32_t base = 0; base < N; base += B) {
        uint32_t m = N - base < B ? N - base : B;
        for (uint32_t j = 0; j < m; j++) {
            c[j] = lcx_chunk_init();
            c[j].text = texts + (size_t)(base + j) * 1400;
            c[j].text_len = lens[base + j];
            c[j].tok_start = (int64_t)(base + j) * 256;
            c[j].tok_end = c[j].tok_start + 255;
            c[j].layer = 0;
        }
        double t0 = lcx__now_ms();
        if (lcx_store_append(s, c, (int)m, NULL)) { fprintf(stderr, "append failed\n"); return 1; }
        t_ingest += lcx__now_ms() - t0;
        if (base + m == 20000 && !ingest_only) {
            t20 = t_ingest;
            double cs = cpu_ms(CLOCK_PROCESS_CPUTIME_ID), ss = sys_ms();
            search_bench(s, corpus, clen, 20000, 400);
            c_search += cpu_ms(CLOCK_PROCESS_CPUTIME_ID) - cs;
            s_search += sys_ms() - ss;
        }
    }
    perf_ctl("disable");
    long rss1 = rss_kb();
    double c_ingest = cpu_ms(CLOCK_PROCESS_CPUTIME_ID) - c_ingest0 - c_search, s_ingest = sys_ms() - s_ingest0 - s_search;
    printf("ingest %u spans (batches of %d, fsync each): %.0f spans/s wall (%.1f MB/s); first 20k: %.0f spans/s; "
           "CPU: %.1f us/span over all threads (%.1f of it in the kernel)\n",
           N, B, N / (t_ingest / 1000), bytes / (t_ingest / 1000) / 1e6, 20000 / (t20 / 1000), c_ingest * 1000 / N,
           s_ingest * 1000 / N);
    printf("RSS growth for %u spans: %.1f MiB (%.1f MiB per 100k); store mem_bytes %.1f MiB\n", N,
           (rss1 - rss0) / 1024.0, (rss1 - rss0) / 1024.0 * 100000.0 / N, lcx_store_mem_bytes(s) / 1048576.0);
    if (ingest_only) {
        lcx_store_close(s);
        char cmd[8192];
        snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
        if (system(cmd) != 0) fprintf(stderr, "cleanup failed\n");
        return 0;
    }
    search_bench(s, corpus, clen, N, 400);
    lcx_store_close(s);   /* writes the snapshot */
    reopen_bench(self, dir, "(snapshot)", 5, 0);
    {
        char cmd[8192];
        snprintf(cmd, sizeof cmd, "du -sh %s/chunks.log %s/index.snap | tr '\\n' ' '", dir, dir);
        printf("on disk: ");
        fflush(stdout);
        if (system(cmd) != 0) printf("?");
        printf("\n");
        snprintf(cmd, sizeof cmd, "%s/index.snap", dir);
        rename(cmd, (snprintf(self + 2048, 2048, "%s/index.snap.off", dir), self + 2048));
    }
    self[sl] = 0;
    reopen_bench(self, dir, "(log replay only)", 2, 1);
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (getenv("LCX_BENCH_KEEP")) printf("kept %s\n", dir);
    else if (system(cmd) != 0) fprintf(stderr, "cleanup failed\n");
    free(c);
    free(texts);
    free(lens);
    free(corpus);
    lcx_embedder_free(emb);
    return 0;
}
