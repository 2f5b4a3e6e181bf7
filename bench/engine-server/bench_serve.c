/* Server overhead of longctx-engine serve: the same greedy turn (fresh session, N tokens)
 * run four ways, alternated per repetition on the same machine:
 *   bench   the decode loop `longctx-engine bench` times: the prompt's tokens prefilled
 *           into a bare context, then one eng_decode per greedy token (no session, no
 *           sampler object, no text);
 *   direct  eng_session_respond_ex (chat template, tokenizer, sampler, pieces);
 *   server  the in-process server, streamed SSE over loopback via libcurl (a fresh
 *           connection per request);
 *   proxy   longctx-svc --upstream in front of the server (Mode A), when --proxy is given
 *           (binary: $LONGCTX_SVC or --svc PATH).
 * For each: TTFT (request start to the first token) and decode ms/token (first to last
 * token / (n-1)), medians, and the ratios to `bench`; and the CPU time per token of this
 * process (engine, server threads and the curl client together) and, for the proxy, of
 * longctx-svc (summed over the run: /proc ticks are 10 ms). On a shared machine the wall
 * figures mostly measure the other tenants; the CPU figures do not. Model: MODEL.gguf (argv) or a tiny
 * random-weight ramp model written to /tmp.
 *   bench_serve [MODEL.gguf] [-n TOKENS (64)] [-r REPS (15)] [-t THREADS (1)] [-c CTX (1024)]
 *               [--proxy] [--svc PATH] */
#define _GNU_SOURCE
#include "eval/lcx_eval.h"
#include "longctx/engine.h"
#include "longctx/engine_server.h"
#include "longctx/lcx_sidecar.h"
#include "util/util.h"

#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { A_BENCH, A_DIRECT, A_SERVER, A_PROXY, N_ARMS };
static const char *const ARM[N_ARMS] = {"bench", "direct", "server", "proxy"};

typedef struct { double t0, first, last; int n; } clock_marks;

static void mark(clock_marks *k)
{
    const double t = lcx__now_ms() - k->t0;
    if (k->n++ == 0) k->first = t;
    k->last = t;
}
static int on_tok(void *ud, const char *piece, int32_t t)
{
    (void)piece; (void)t;
    mark(ud);
    return 0;
}
/* one SSE event per token: count the chunks that carry content */
static size_t on_data(char *d, size_t sz, size_t nm, void *ud)
{
    const size_t n = sz * nm;
    for (const char *p = d, *e = d + n; (p = memmem(p, (size_t)(e - p), "\"content\"", 9)); p += 9) mark(ud);
    return n;
}
static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}
static double med(double *v, int n) { qsort(v, (size_t)n, sizeof *v, cmp); return v[n / 2]; }

static double cpu_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* user + system CPU of another process, ms (10 ms resolution) */
static double pid_cpu_ms(pid_t pid)
{
    char p[64], buf[1024];
    snprintf(p, sizeof p, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(p, "r");
    if (!f) return 0;
    size_t k = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[k] = 0;
    const char *rp = strrchr(buf, ')');
    unsigned long ut = 0, st = 0;
    if (!rp || sscanf(rp + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) != 2) return 0;
    return (double)(ut + st) * 1000.0 / (double)sysconf(_SC_CLK_TCK);
}

static double loadavg(void)
{
    double l = -1;
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) { if (fscanf(f, "%lf", &l) != 1) l = -1; fclose(f); }
    return l;
}

/* The bench arm: prefill prompt[0..np) into c, then n greedy single-token decodes. */
static int run_bench(eng_ctx *c, const int32_t *prompt, int np, int n, int n_vocab, clock_marks *k)
{
    eng_kv_clear(c);
    int rc = eng_decode(c, prompt, NULL, np, false);
    for (int i = 0; rc == 0 && i < n; i++) {
        const float *lg = eng_logits(c, -1);
        int32_t best = 0;
        for (int v = 1; v < n_vocab; v++) if (lg[v] > lg[best]) best = v;
        mark(k);
        int32_t pos = np + i;
        if (i + 1 < n) rc = eng_decode(c, &best, &pos, 1, false);
    }
    return rc;
}

static int run_http(const char *url, const char *body, clock_marks *k)
{
    CURL *c = curl_easy_init();
    if (!c) return -1;
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, k);
    CURLcode rc = curl_easy_perform(c);
    curl_easy_cleanup(c);
    return rc == CURLE_OK ? 0 : -1;
}

int main(int argc, char **argv)
{
    const char *model = NULL, *svc = getenv("LONGCTX_SVC");
    int n = 64, reps = 15, threads = 1, n_ctx = 1024;
    bool proxy = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-n") && i + 1 < argc) n = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-r") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-t") && i + 1 < argc) threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-c") && i + 1 < argc) n_ctx = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--svc") && i + 1 < argc) svc = argv[++i];
        else if (!strcmp(argv[i], "--proxy")) proxy = true;
        else model = argv[i];
    }
    if (n < 2 || reps < 1 || reps > 1000) return 2;
    char tmp[64] = "";
    if (!model) {
        snprintf(tmp, sizeof tmp, "/tmp/bench_serve_%d.gguf", (int)getpid());
        lcx_ramp_shape sh;
        if (lcx__ramp_model_shape("tiny", &sh) < 0 || lcx__ramp_write_model(tmp, &sh, 7) < 0) return 1;
        model = tmp;
    }
    eng_model *m;
    char err[256];
    if (eng_model_load(model, &m, err, sizeof err) < 0) { fprintf(stderr, "%s\n", err); return 1; }
    eng_server_opts o = eng_server_defaults();
    o.model = m;
    o.model_id = "m";
    o.session.ctx.n_ctx = n_ctx;
    o.session.ctx.n_threads = threads;
    o.session.max_tokens = n;
    eng_server *srv;
    if (eng_server_start(&o, &srv, err, sizeof err) < 0) { fprintf(stderr, "%s\n", err); return 1; }
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const char *msg = "Once upon a time, the cat sat on the mat and looked at the dog.";
    char body[512], url[N_ARMS][160];
    snprintf(body, sizeof body, "{\"stream\":true,\"max_tokens\":%d,\"temperature\":0,\"messages\":[{\"role\":\"user\",\"content\":\"%s\"}]}", n, msg);
    snprintf(url[A_SERVER], sizeof url[A_SERVER], "http://127.0.0.1:%d/v1/chat/completions", eng_server_port(srv));
    lcx_sidecar *sc = NULL;
    if (proxy) {
        char up[64];
        snprintf(up, sizeof up, "http://127.0.0.1:%d", eng_server_port(srv));
        char data[64];
        snprintf(data, sizeof data, "/tmp/bench_serve_svc_%d", (int)getpid());
        lcx_sidecar_opts so = lcx_sidecar_defaults();
        so.binary = svc;
        so.upstream = up;
        so.data_dir = data;
        so.log_path = "/dev/null";
        if (lcx_sidecar_spawn(&so, &sc, err, sizeof err) < 0) { fprintf(stderr, "proxy: %s\n", err); return 1; }
        snprintf(url[A_PROXY], sizeof url[A_PROXY], "%s/v1/chat/completions", lcx_sidecar_url(sc));
    }
    /* the bench arm's prompt: the tokens the session prefills for msg */
    eng_session *s0;
    if (eng_session_init(m, &o.session, &s0, err, sizeof err) < 0) { fprintf(stderr, "%s\n", err); return 1; }
    const eng_turn_opts one = {.max_tokens = 1};
    eng_session_respond_ex(s0, msg, &one, NULL);
    eng_session_turn t0;
    eng_session_last_turn(s0, &t0);
    int nl;
    const int32_t *lt = eng_session_tokens(s0, &nl);
    const int np = t0.n_prompt;
    int32_t *prompt = malloc((size_t)np * sizeof *prompt);
    memcpy(prompt, lt, (size_t)np * sizeof *prompt);
    eng_session_free(s0);
    eng_ctx *bc;
    eng_ctx_params cp = o.session.ctx;
    if (eng_ctx_init(m, &cp, &bc) < 0) return 1;
    const int nv = eng_model_get_info(m)->n_vocab;

    eng_sampler_params greedy = o.session.sampler;   /* what "temperature":0 gives the server */
    greedy.temp = 0;
    const int n_arms = proxy ? N_ARMS : A_PROXY;
    double *ttft[N_ARMS], *dec[N_ARMS], *cpu[N_ARMS], svc_cpu = 0;
    int got[N_ARMS] = {0}, svc_tokens = 0;
    for (int a = 0; a < N_ARMS; a++) {
        ttft[a] = calloc((size_t)reps, sizeof(double));
        dec[a] = calloc((size_t)reps, sizeof(double));
        cpu[a] = calloc((size_t)reps, sizeof(double));
    }
    const double load0 = loadavg();
    for (int r = 0; r < reps; r++)
        for (int a = 0; a < n_arms; a++) {
            const double c0 = cpu_ms(), s0 = a == A_PROXY ? pid_cpu_ms(lcx_sidecar_pid(sc)) : 0;
            clock_marks k = {lcx__now_ms(), 0, 0, 0};
            int rc = 0;
            if (a == A_BENCH) rc = run_bench(bc, prompt, np, n, nv, &k);
            else if (a == A_DIRECT) {
                /* a fresh session as the server makes for an unkeyed request, created
                 * inside the timed span as there */
                eng_session *s;
                if (eng_session_init(m, &o.session, &s, err, sizeof err) < 0) return 1;
                eng_turn_opts to = {.max_tokens = n, .sampler = &greedy, .on_token = on_tok, .ud = &k};
                rc = eng_session_respond_ex(s, msg, &to, NULL) < 0;
                eng_session_free(s);
            } else rc = run_http(url[a], body, &k);
            if (rc || k.n < 2) { fprintf(stderr, "%s: run %d failed (%d tokens)\n", ARM[a], r, k.n); continue; }
            ttft[a][got[a]] = k.first;
            dec[a][got[a]] = (k.last - k.first) / (k.n - 1);
            cpu[a][got[a]] = (cpu_ms() - c0) / k.n;
            if (a == A_PROXY) {
                svc_cpu += pid_cpu_ms(lcx_sidecar_pid(sc)) - s0;
                svc_tokens += k.n;
            }
            got[a]++;
        }
    printf("model %s, %d tokens/turn, prompt %d tokens, %d reps (arms alternated), %d thread(s), load %.2f -> %.2f\n",
           tmp[0] ? "tiny (random)" : model, n, np, reps, threads, load0, loadavg());
    printf("| arm | runs | TTFT median (ms) | decode ms/token median | decode tok/s | decode vs bench | TTFT vs bench (ms) | CPU ms/token (turn) median | CPU vs bench | CPU vs direct |\n"
           "|---|---|---|---|---|---|---|---|---|---|\n");
    double tb = 0, db = 0, cb = 0, cd = 0;
    for (int a = 0; a < n_arms; a++) {
        if (!got[a]) continue;
        const double t = med(ttft[a], got[a]), d = med(dec[a], got[a]), c = med(cpu[a], got[a]);
        if (a == A_BENCH) { tb = t; db = d; cb = c; }
        if (a == A_DIRECT) cd = c;
        printf("| %s | %d | %.3f | %.4f | %.0f | %.3f | %+.3f | %.4f | %.3f | %.3f |\n", ARM[a], got[a], t, d, 1000 / d, d / db,
               t - tb, c, c / cb, cd > 0 ? c / cd : 1.0);
    }
    if (svc_tokens) printf("longctx-svc (proxy) CPU: %.4f ms/token over the run (%.0f ms / %d tokens)\n", svc_cpu / svc_tokens, svc_cpu, svc_tokens);
    for (int a = 0; a < N_ARMS; a++) { free(ttft[a]); free(dec[a]); free(cpu[a]); }
    free(prompt);
    eng_ctx_free(bc);
    if (sc) lcx_sidecar_stop(sc, 5000);
    eng_server_stop(srv);
    eng_model_free(m);
    if (tmp[0]) unlink(tmp);
    curl_global_cleanup();
    return 0;
}
