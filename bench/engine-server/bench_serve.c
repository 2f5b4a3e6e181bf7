/* Server overhead of longctx-engine serve: the same greedy turn (fresh session, N tokens)
 * run directly through ChatSession and through the in-process server (streamed SSE over
 * loopback via libcurl), alternated A/B. Prints medians of TTFT and ms/token and their
 * ratios. Model: argv[1] (GGUF) or a tiny random-weight ramp model written to /tmp.
 *   bench_serve [MODEL.gguf] [-n TOKENS (64)] [-r REPS (15)] [-t THREADS (1)] */
#define _GNU_SOURCE
#include "eval/lcx_eval.h"
#include "longctx/engine.h"
#include "longctx/engine_server.h"
#include "util/util.h"

#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static double g_t0, g_first;
static int on_tok(void *ud, const char *piece, int32_t t)
{
    (void)ud; (void)piece; (void)t;
    if (g_first < 0) g_first = lcx_now_ms() - g_t0;
    return 0;
}
static size_t on_data(char *d, size_t sz, size_t nm, void *ud)
{
    (void)ud;
    if (g_first < 0 && memmem(d, sz * nm, "\"content\"", 9)) g_first = lcx_now_ms() - g_t0;
    return sz * nm;
}
static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}
static double med(double *v, int n) { qsort(v, (size_t)n, sizeof *v, cmp); return v[n / 2]; }

int main(int argc, char **argv)
{
    const char *model = NULL;
    int n = 64, reps = 15, threads = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-n") && i + 1 < argc) n = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-r") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-t") && i + 1 < argc) threads = atoi(argv[++i]);
        else model = argv[i];
    }
    char tmp[64] = "";
    if (!model) {
        snprintf(tmp, sizeof tmp, "/tmp/bench_serve_%d.gguf", (int)getpid());
        lcx_ramp_shape sh;
        if (lcx_ramp_model_shape("tiny", &sh) < 0 || lcx_ramp_write_model(tmp, &sh, 7) < 0) return 1;
        model = tmp;
    }
    eng_model *m;
    char err[256];
    if (eng_model_load(model, &m, err, sizeof err) < 0) { fprintf(stderr, "%s\n", err); return 1; }
    eng_server_opts o = eng_server_defaults();
    o.model = m;
    o.model_id = "m";
    o.session.ctx.n_ctx = 1024;
    o.session.ctx.n_threads = threads;
    eng_server *srv;
    if (eng_server_start(&o, &srv, err, sizeof err) < 0) { fprintf(stderr, "%s\n", err); return 1; }
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const char *msg = "the cat sat on the mat and looked at the dog";
    char body[512], url[128];
    snprintf(body, sizeof body, "{\"stream\":true,\"max_tokens\":%d,\"temperature\":0,\"messages\":[{\"role\":\"user\",\"content\":\"%s\"}]}", n, msg);
    snprintf(url, sizeof url, "http://127.0.0.1:%d/v1/chat/completions", eng_server_port(srv));
    double *ta = calloc((size_t)reps, sizeof *ta), *tb = calloc((size_t)reps, sizeof *tb);
    double *fa = calloc((size_t)reps, sizeof *fa), *fb = calloc((size_t)reps, sizeof *fb);
    int ng = 0;
    for (int r = 0; r < reps; r++) {
        /* A: direct */
        eng_session *s;
        eng_session_params sp = o.session;
        if (eng_session_init(m, &sp, &s, err, sizeof err) < 0) return 1;
        eng_turn_opts to = {.max_tokens = n, .on_token = on_tok};
        g_first = -1;
        g_t0 = lcx_now_ms();
        ng = eng_session_respond_ex(s, msg, &to, NULL);
        ta[r] = (lcx_now_ms() - g_t0) / (ng > 0 ? ng : 1);
        fa[r] = g_first;
        eng_session_free(s);
        /* B: through the server */
        CURL *c = curl_easy_init();
        curl_easy_setopt(c, CURLOPT_URL, url);
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
        g_first = -1;
        g_t0 = lcx_now_ms();
        curl_easy_perform(c);
        tb[r] = (lcx_now_ms() - g_t0) / (ng > 0 ? ng : 1);
        fb[r] = g_first;
        curl_easy_cleanup(c);
    }
    const double a = med(ta, reps), b = med(tb, reps), a1 = med(fa, reps), b1 = med(fb, reps);
    printf("model %s, %d tokens/turn, %d reps (alternated), %d thread(s)\n", tmp[0] ? "tiny (random)" : model, ng, reps, threads);
    printf("per-token (whole turn / tokens) median: direct %.4f ms, server %.4f ms, ratio %.3f (+%.4f ms/token)\n", a, b, b / a, b - a);
    printf("TTFT median: direct %.3f ms, server %.3f ms (+%.3f ms)\n", a1, b1, b1 - a1);
    eng_server_stop(srv);
    eng_model_free(m);
    if (tmp[0]) unlink(tmp);
    curl_global_cleanup();
    return 0;
}
