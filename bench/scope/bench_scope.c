/* Code-scope benchmarks (docs/benchmarks/scope.md). Run from the build directory:
 *   ./bench/bench_scope [--bin bin/longctx-svc] [--tree DIR]... [--runs N] [--big-runs N]
 *                       [--throughput-only]
 *   1. cold: a fresh data dir, a generated 20-file project; lcx_scopes_open + the first
 *      lcx_code_retrieve (detect, walk, chunk, embed, store, search, splice).
 *   2. reload: a FRESH PROCESS (fork + exec of this binary) opens the persisted scope and
 *      answers the first retrieve; timed inside the child from main() (CPU time of the
 *      child so far, incl. exec + dynamic loading, is also shown).
 *   3. warm: in-process lcx_code_retrieve, and POST /retrieve over loopback HTTP against
 *      the real longctx-svc (keep-alive) — p50/p95/p99.
 *   4. throughput: cold `index` of large trees (default /usr/include and /usr/share/doc),
 *      MB/s of indexed bytes by wall clock and by CPU time: the default build (3 appends
 *      in flight), a serial one and one with 2 appends in flight alternate (--big-runs
 *      each, default 3); then the fresh-process reload.
 * Prints medians of --runs runs (default 11). Nothing here asserts. */
#include <curl/curl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "longctx/lcx_scope.h"
#include "scope/scope_int.h"
#include "scope/scopes_int.h"
#include "util/util.h"

static int cmpd(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}
static double pct(double *v, int n, double p)
{
    qsort(v, n, sizeof *v, cmpd);
    int i = (int)(p * (n - 1) + 0.5);
    return v[i];
}

static void wr(const char *dir, const char *rel, const char *text)
{
    char p[PATH_MAX * 2];
    snprintf(p, sizeof p, "%s/%s", dir, rel);
    char d[PATH_MAX * 2];
    snprintf(d, sizeof d, "%s", p);
    char *s = strrchr(d, '/');
    *s = 0;
    lcx__mkdirs(d);
    lcx__write_file_atomic(p, text, strlen(text));
}

static void rmrf(const char *p)
{
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", p);
    if (system(cmd)) {}
}

/* 20 files: 14 C (≈120 lines), 3 Python, README, JSON, Makefile */
static char *make_project(void)
{
    char tmpl[] = "/tmp/lcxbench.XXXXXX";
    char *d = realpath(mkdtemp(tmpl), NULL);
    wr(d, ".git/HEAD", "ref: x\n");
    lcx_buf b = {0};
    char name[64];
    for (int f = 0; f < 14; f++) {
        b.len = 0;
        lcx__buf_printf(&b, "/* module %d */\n#include <stdio.h>\n", f);
        for (int i = 0; i < 12; i++)
            lcx__buf_printf(&b, "int mod%d_func%d(int x)\n{\n    int y = x * %d;\n    if (y > %d) return y - 1;\n"
                               "    printf(\"value %%d\\n\", y);\n    return y + %d;\n}\n\n", f, i, i + f, i * 7, f);
        snprintf(name, sizeof name, "src/mod%02d.c", f);
        wr(d, name, b.data);
    }
    for (int f = 0; f < 3; f++) {
        b.len = 0;
        lcx__buf_printf(&b, "class Service%d:\n", f);
        for (int i = 0; i < 20; i++) lcx__buf_printf(&b, "    def handle_%d(self, req):\n        return req.get('k%d')\n\n", i, i);
        snprintf(name, sizeof name, "tools/svc%d.py", f);
        wr(d, name, b.data);
    }
    wr(d, "README.md", "# Bench project\n\nModules compute values.\n\nSee src/.\n");
    wr(d, "config.json", "{\"workers\": 4, \"port\": 8080}\n");
    wr(d, "Makefile", "all:\n\tcc -o app src/*.c\n");
    lcx__buf_free(&b);
    return d;
}

static lcx_scopes *open_mgr(lcx_embedder *e, const char *data, bool watch)
{
    lcx_scopes_opts o = lcx_scopes_defaults();
    o.data_dir = data;
    o.watch = watch;
    lcx_scopes *m = NULL;
    if (lcx_scopes_open(&o, e, &m) < 0) { fprintf(stderr, "open failed\n"); exit(1); }
    if (getenv("LCX_BENCH_SERIAL")) lcx__scopes_set_serial(m, true);   /* A/B of the small cases */
    return m;
}

static int first_retrieve(lcx_scopes *m, const char *prefill, const char *q)
{
    lcx_code_request rq = lcx_code_request_init();
    rq.prefill = prefill;
    rq.prefill_len = strlen(prefill);
    rq.query = q;
    rq.query_len = strlen(q);
    lcx_code_result r;
    int rc = lcx_code_retrieve(m, &rq, &r);
    int n = r.n_hits;
    lcx_code_result_free(&r);
    return rc < 0 ? rc : n;
}

static double loadavg(void)
{
    double l = -1;
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) {
        if (fscanf(f, "%lf", &l) != 1) l = -1;
        fclose(f);
    }
    return l;
}

static double cpu_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
}

/* the scope layer alone: walk + read + binary sniff + chunk + symbols (no embedding, no
 * store), to show where indexing time goes */
typedef struct { const char *root; uint64_t bytes, chunks, syms; } sideacc;
static int side_cb(const char *rel, const struct stat *st, void *ud)
{
    (void)st;
    sideacc *a = ud;
    char *t;
    size_t n;
    if (lcx__scope_read_file(a->root, rel, 5u << 20, &t, &n) < 0) return 0;
    lcx_span *sp;
    int ns;
    if (lcx__chunk_text(t, n, lcx__file_type_of(rel), &sp, &ns) == 0) { a->chunks += (uint64_t)ns; free(sp); }
    lcx_symbol *sy;
    int k = lcx__symbols_extract(rel, t, n, &sy);
    if (k > 0) { a->syms += (uint64_t)k; free(sy); }
    a->bytes += n;
    free(t);
    return 0;
}

static size_t sink(char *p, size_t s, size_t n, void *u) { (void)p; (void)u; return s * n; }

/* --child-reload DATA PREFILL QUERY FD: timed from main() (after exec and dynamic loading) */
static int child_reload(char **argv)
{
    double t0 = lcx__now_ms(), c0 = cpu_s();
    lcx_embedder *e;
    lcx_embedder_hash_new(0, &e);
    lcx_scopes *m = open_mgr(e, argv[2], false);
    int n = first_retrieve(m, argv[3], argv[4]);
    double ms[2] = {lcx__now_ms() - t0, (cpu_s() - c0) * 1000};
    if (n <= 0) ms[0] = -1;
    int fd = atoi(argv[5]);
    if (write(fd, ms, sizeof ms) != sizeof ms) return 1;
    return 0;   /* no close: the process exits (its teardown is not timed) */
}

int main(int argc, char **argv)
{
    if (argc == 6 && !strcmp(argv[1], "--child-reload")) return child_reload(argv);
    const char *bin = "bin/longctx-svc";
    const char *trees[8];
    int ntrees = 0, runs = 11, big_runs = 3;
    bool only_big = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--bin") && i + 1 < argc) bin = argv[++i];
        else if (!strcmp(argv[i], "--tree") && i + 1 < argc && ntrees < 8) trees[ntrees++] = argv[++i];
        else if (!strcmp(argv[i], "--runs") && i + 1 < argc) runs = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--big-runs") && i + 1 < argc) big_runs = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--throughput-only")) only_big = true;
    }
    if (runs < 3) runs = 3;
    if (big_runs < 1) big_runs = 1;
    if (!ntrees) { trees[0] = "/usr/include"; trees[1] = "/usr/share/doc"; ntrees = 2; }
    char *proj = make_project();
    char prefill[PATH_MAX + 64];
    snprintf(prefill, sizeof prefill, "crash in %s/src/mod03.c: see the stack", proj);
    const char *query = "where is mod3_func7 computed";
    double *t = calloc((size_t)runs, sizeof *t);
    char *data = NULL;
    if (!only_big) {
    /* 1. cold */
    double *tc = calloc((size_t)runs, sizeof *tc);
    for (int r = 0; r < runs; r++) {
        char tmpl[] = "/tmp/lcxbenchdata.XXXXXX";
        char *data = mkdtemp(tmpl);
        double t0 = lcx__now_ms(), c0 = cpu_s();
        lcx_embedder *e;
        lcx_embedder_hash_new(0, &e);
        lcx_scopes *m = open_mgr(e, data, false);
        int n = first_retrieve(m, prefill, query);
        t[r] = lcx__now_ms() - t0;
        tc[r] = (cpu_s() - c0) * 1000;
        if (n <= 0) fprintf(stderr, "cold: no hits (%d)\n", n);
        lcx_scopes_close(m);
        lcx_embedder_free(e);
        rmrf(data);
    }
    printf("cold scope build + first retrieve (20 files): median %.2f ms, min %.2f ms, CPU median %.2f ms  (goal <= 30 ms)\n",
           pct(t, runs, 0.5), pct(t, runs, 0.0), pct(tc, runs, 0.5));
    free(tc);

    /* 2. reload in a fresh process */
    char tmpl[] = "/tmp/lcxbenchdata.XXXXXX";
    data = strdup(mkdtemp(tmpl));
    {
        lcx_embedder *e;
        lcx_embedder_hash_new(0, &e);
        lcx_scopes *m = open_mgr(e, data, false);
        first_retrieve(m, prefill, query);
        lcx_scopes_close(m);
        lcx_embedder_free(e);
    }
    double *tcr = calloc((size_t)runs, sizeof *tcr);
    for (int r = 0; r < runs; r++) {
        int fd[2];
        if (pipe(fd)) return 1;
        fflush(stdout);
        pid_t pid = fork();
        if (pid == 0) {
            /* a really fresh process: exec this binary in its child mode */
            close(fd[0]);
            char fds[16];
            snprintf(fds, sizeof fds, "%d", fd[1]);
            execl("/proc/self/exe", argv[0], "--child-reload", data, prefill, query, fds, (char *)NULL);
            _exit(127);
        }
        close(fd[1]);
        double ms[2] = {-1, -1};
        if (read(fd[0], ms, sizeof ms) != sizeof ms) ms[0] = -1;
        close(fd[0]);
        waitpid(pid, NULL, 0);
        t[r] = ms[0];
        tcr[r] = ms[1];
    }
    printf("fresh process: reload + first retrieve (20 files): median %.2f ms, min %.2f ms, CPU median %.2f ms  (goal <= 10 ms)\n",
           pct(t, runs, 0.5), pct(t, runs, 0.0), pct(tcr, runs, 0.5));
    free(tcr);

    /* 3. warm, in process */
    {
        lcx_embedder *e;
        lcx_embedder_hash_new(0, &e);
        lcx_scopes *m = open_mgr(e, data, true);
        first_retrieve(m, prefill, query);
        int n = 2000;
        double *w = calloc((size_t)n, sizeof *w);
        const char *qs[] = {"where is mod3_func7 computed", "printf value", "Service1.handle_4", "workers port config",
                            "return y minus one"};
        for (int i = 0; i < n; i++) {
            double t0 = lcx__now_ms();
            first_retrieve(m, prefill, qs[i % 5]);
            w[i] = lcx__now_ms() - t0;
        }
        double p50 = pct(w, n, 0.5), p95 = pct(w, n, 0.95), p99 = pct(w, n, 0.99);
        printf("warm lcx_code_retrieve in process: p50 %.3f ms, p95 %.3f ms, p99 %.3f ms\n", p50, p95, p99);
        free(w);
        lcx_scopes_close(m);
        lcx_embedder_free(e);
    }

    /* 3b. warm POST /retrieve over HTTP */
    if (access(bin, X_OK) == 0) {
        char sdata[] = "/tmp/lcxbenchsvc.XXXXXX";
        mkdtemp(sdata);
        int port = 20000 + (int)(getpid() % 20000);
        char ports[16];
        snprintf(ports, sizeof ports, "%d", port);
        fflush(stdout);
        pid_t pid = fork();
        if (pid == 0) {
            freopen("/dev/null", "w", stderr);
            execl(bin, bin, "serve", "--host", "127.0.0.1", "--port", ports, "--data-dir", sdata, "--threads", "2",
                  "--quiet", (char *)NULL);
            _exit(127);
        }
        CURL *c = curl_easy_init();
        char url[128];
        snprintf(url, sizeof url, "http://127.0.0.1:%d/healthz", port);
        curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, sink);
        bool up = false;
        for (int i = 0; i < 200 && !up; i++) {
            curl_easy_setopt(c, CURLOPT_URL, url);
            long code = 0;
            if (curl_easy_perform(c) == CURLE_OK) curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
            up = code == 200;
            if (!up) usleep(50000);
        }
        if (up) {
            snprintf(url, sizeof url, "http://127.0.0.1:%d/retrieve", port);
            char body[PATH_MAX + 256];
            snprintf(body, sizeof body, "{\"prefill_text\":\"crash in %s/src/mod03.c\",\"query\":\"where is mod3_func7 computed\",\"top_k\":8,\"session_id\":\"bench\"}", proj);
            struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
            curl_easy_setopt(c, CURLOPT_URL, url);
            curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
            curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
            curl_easy_perform(c);   /* first: builds the scope */
            int n = 1000;
            double *w = calloc((size_t)n, sizeof *w);
            for (int i = 0; i < n; i++) {
                double t0 = lcx__now_ms();
                curl_easy_perform(c);
                w[i] = lcx__now_ms() - t0;
            }
            printf("warm POST /retrieve over loopback HTTP (keep-alive, JSON form, top_k 8): p50 %.3f ms, p95 %.3f ms, "
                   "p99 %.3f ms  (goal p95 <= 2 ms)\n", pct(w, n, 0.5), pct(w, n, 0.95), pct(w, n, 0.99));
            free(w);
            curl_slist_free_all(h);
        } else {
            printf("warm POST /retrieve: server did not start (%s)\n", bin);
        }
        curl_easy_cleanup(c);
        kill(pid, SIGTERM);
        waitpid(pid, NULL, 0);
        rmrf(sdata);
    } else {
        printf("warm POST /retrieve: skipped (no %s; pass --bin)\n", bin);
    }

    }   /* !only_big */

    /* 4. throughput on large trees: pipelined (the default) and serial builds alternate in
     * this process (same load, same page cache), --big-runs each; medians. "build" is
     * lcx_scopes_index (walk .. last append + manifest); "close" is lcx_scopes_close (the
     * store snapshot that makes the next open fast) — `longctx index` waits for both. */
    for (int i = 0; i < ntrees; i++) {
        struct stat st;
        if (stat(trees[i], &st) != 0) { printf("throughput: %s missing, skipped\n", trees[i]); continue; }
        {
            sideacc a = {.root = trees[i]};
            lcx_walk_opts wo = {.max_file_bytes = 5u << 20, .recursive = true};
            lcx_walk_stats ws = {0};
            double c0 = cpu_s(), t0 = lcx__now_ms();
            lcx__walk(trees[i], "", &wo, side_cb, NULL, &a, &ws);
            double ms = lcx__now_ms() - t0, cs = cpu_s() - c0;
            printf("scope layer only (walk+read+chunk+symbols) %s: %.1f MB in %.2f s = %.1f MB/s (%.1f MB per CPU-second)\n",
                   trees[i], a.bytes / 1e6, ms / 1000, a.bytes / 1e6 / (ms / 1000), a.bytes / 1e6 / cs);
        }
        double bw[3][32], bc[3][32], cw[3][32], cc[3][32];
        int nr = big_runs < 32 ? big_runs : 32;
        lcx_scope_info inf = {0};
        char keep[32] = "";
        double load0 = loadavg();
        for (int r = 0; r < nr; r++) {
            for (int k = 0; k < 3; k++) {
                int v = (k + r) % 3;   /* rotate which goes first */
                char td[] = "/tmp/lcxbenchbig.XXXXXX";
                if (!mkdtemp(td)) continue;
                lcx_embedder *e;
                lcx_embedder_hash_new(0, &e);
                lcx_scopes *m = open_mgr(e, td, false);
                lcx__scopes_set_serial(m, v == 1);
                lcx__scopes_set_fly(m, v == 2 ? 2 : 0);   /* 0 = the default (3 in flight) */
                if (getenv("LCX_BENCH_BATCH")) lcx__scopes_set_batch(m, (uint32_t)atoi(getenv("LCX_BENCH_BATCH")), 3000);
                double c0 = cpu_s(), t0 = lcx__now_ms();
                int rc = lcx_scopes_index(m, trees[i], NULL, NULL, &inf, NULL);
                double c1 = cpu_s(), t1 = lcx__now_ms();
                lcx_scopes_close(m);
                cw[v][r] = lcx__now_ms() - t1;
                cc[v][r] = cpu_s() - c1;
                bw[v][r] = t1 - t0;
                bc[v][r] = c1 - c0;
                lcx_embedder_free(e);
                if (rc < 0) { printf("throughput %s: %s\n", trees[i], lcx_strerror(rc)); rmrf(td); nr = 0; break; }
                if (r == nr - 1 && v == 0) snprintf(keep, sizeof keep, "%s", td);   /* for the reload below */
                else rmrf(td);
            }
        }
        if (!nr) continue;
        double mb = inf.bytes / 1e6, load1 = loadavg();
        printf("index %s: %u files, %.1f MB, %u chunks; %d runs each, load average %.1f -> %.1f  (goal >= 50 MB/s)\n",
               trees[i], inf.files, mb, inf.chunks, nr, load0, load1);
        static const char *const mode[3] = {"default (3 appends in flight)", "serial (1 append at a time)", "2 appends in flight"};
        for (int v = 0; v < 3; v++) {
            double w = pct(bw[v], nr, 0.5), c = pct(bc[v], nr, 0.5), w2 = pct(cw[v], nr, 0.5), c2 = pct(cc[v], nr, 0.5);
            double tot[32];
            for (int r = 0; r < nr; r++) tot[r] = bw[v][r] + cw[v][r];
            double t = pct(tot, nr, 0.5);
            printf("  %s: build %.2f s wall = %.1f MB/s, %.2f CPU-s = %.1f MB per CPU-s (%.2f cores busy); "
                   "close (snapshot) %.2f s, %.2f CPU-s; build+close %.2f s = %.1f MB/s\n",
                   mode[v], w / 1000, mb / (w / 1000), c, mb / c, c / (w / 1000), w2 / 1000, c2, t / 1000,
                   mb / (t / 1000));
        }
        if (!keep[0]) continue;
        /* fresh-process reload of the big tree + a refresh walk (no file re-read) */
        fflush(stdout);
        pid_t pid = fork();
        if (pid == 0) {
            double r0 = lcx__now_ms();
            lcx_embedder *e2;
            lcx_embedder_hash_new(0, &e2);
            lcx_scopes *m2 = open_mgr(e2, keep, false);
            lcx_scope_info i2;
            lcx_scopes_index(m2, trees[i], NULL, NULL, &i2, NULL);
            printf("  reload %s in a fresh process + refresh: %.0f ms (%u files re-read)\n", trees[i],
                   lcx__now_ms() - r0, i2.files_read_last);
            fflush(stdout);
            _exit(0);
        }
        waitpid(pid, NULL, 0);
        rmrf(keep);
    }
    if (data) rmrf(data);
    rmrf(proj);
    free(data);
    free(proj);
    free(t);
    return 0;
}
