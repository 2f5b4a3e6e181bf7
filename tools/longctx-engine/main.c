/* longctx-engine — CPU inference for GGUF models. Thin: parse flags, call lcx_engine.
 *
 *   longctx-engine run -m M.gguf -p PROMPT -n N [--temp T] [--top-k K] [--top-p P] [--seed S]
 *                      [-t THREADS] [-c CTX] [--ids] [--special]
 *   longctx-engine logits -m M.gguf --tokens 1,2,3 [--all] [-t THREADS]
 *   longctx-engine bench -m M.gguf [-p 512] [-n 128] [-r 3] [-t THREADS]
 *   longctx-engine perplexity -m M.gguf -f TEXT [-c CTX] [-b 512] [--chunks N] [--ppl-first N] [--json]
 * run, bench and perplexity take the TriAttention flags (--triatt-budget N turns eviction on;
 * eng_triatt_flags_help() lists them) and the SPEC §5 environment; flags beat the environment.
 *   longctx-engine tokenize -m M.gguf -p TEXT [--no-bos] [--special]
 *   longctx-engine convert-llama2c CHECKPOINT.bin TOKENIZER.bin OUT.gguf
 *   longctx-engine serve -m M.gguf [--port 8080] ... (OpenAI-compatible server; serve.c)
 *
 * run prints only the generated text to stdout (byte-exact; pieces are written as they come)
 * or, with --ids, the generated ids on one line. Diagnostics go to stderr. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "longctx/engine.h"
#include "engine/gguf.h"
#include "engine/tokenizer.h"
#include "util/util.h"

int cmd_serve(int argc, char **argv);   /* serve.c */

#define MAX_PROMPT_BYTES (64u << 20)

typedef struct {
    const char *model, *prompt, *tokens, *file;
    int n_predict, threads, n_ctx, top_k, reps, n_pp, n_batch, chunks, ppl_first;
    bool json;
    triatt_config tc;
    float temp, top_p;
    unsigned long long seed;
    bool ids, special, all, no_bos;
    const char *pos[4];
    int npos;
} opts;

static void usage(FILE *f)
{
    fprintf(f,
            "usage: longctx-engine COMMAND ...\n"
            "  run -m M.gguf -p PROMPT -n N [--temp T] [--top-k K] [--top-p P] [--seed S] [-t N] [-c CTX] [--ids] [--special]\n"
            "  logits -m M.gguf --tokens 1,2,3 [--all] [-t N]\n"
            "  bench -m M.gguf [-p 512] [-n 128] [-r 3] [-t N]\n"
            "  tokenize -m M.gguf -p TEXT [--no-bos] [--special]\n"
            "  perplexity -m M.gguf -f TEXT [-c CTX] [-b 512] [--chunks N] [--ppl-first N] [--json] [-t N]\n"
            "  convert-llama2c CHECKPOINT.bin TOKENIZER.bin OUT.gguf\n"
            "  serve -m M.gguf [--host H] [--port 8080] [-t N] [-c CTX] [-b UBATCH] [-n MAX_TOKENS] [--model-id NAME]\n"
            "        [--max-queue N] [--max-sessions N] [--idle-s S] [triatt flags] [--rescue single-turn|two-turn]\n"
            "        [--prepopulate 0|1] [--enable-longctx [--longctx-data-dir DIR] | --longctx-endpoint URL]\n"
            "TriAttention (run, bench, perplexity; env VLLM_TRIATT_*, TRIATT_*, LONGCTX_ENDPOINT):\n%s",
            eng_triatt_flags_help());
}

static int parse_int(const char *s, int lo, int hi, int *out)
{
    char *e;
    errno = 0;
    long v = strtol(s, &e, 10);
    if (errno || *e || e == s || v < lo || v > hi) return -1;
    *out = (int)v;
    return 0;
}
static int parse_float(const char *s, float *out)
{
    char *e;
    errno = 0;
    float v = strtof(s, &e);
    if (errno || *e || e == s) return -1;
    *out = v;
    return 0;
}

static int parse_opts(int argc, char **argv, opts *o, bool pp_mode)
{
    memset(o, 0, sizeof *o);
    o->n_predict = pp_mode ? 128 : 64;
    o->n_pp = 512;
    o->threads = 1;
    o->reps = 3;
    o->top_p = 1.0f;
    o->n_batch = 512;
    o->chunks = -1;
    o->ppl_first = -1;
    char err[1024];
    if (eng_triatt_config_resolve(&o->tc, &argc, argv, err, sizeof err)) {
        fprintf(stderr, "longctx-engine: %s\n", err);
        return -1;
    }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
#define NEEDV() do { if (!v) { fprintf(stderr, "longctx-engine: %s needs a value\n", a); return -1; } i++; } while (0)
        if (!strcmp(a, "-m") || !strcmp(a, "--model")) { NEEDV(); o->model = v; }
        else if (!strcmp(a, "-p") || !strcmp(a, "--prompt")) {
            NEEDV();
            if (pp_mode) { if (parse_int(v, 1, 1 << 20, &o->n_pp)) goto bad; }
            else o->prompt = v;
        }
        else if (!strcmp(a, "-n") || !strcmp(a, "--n-predict")) { NEEDV(); if (parse_int(v, 0, 1 << 24, &o->n_predict)) goto bad; }
        else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) { NEEDV(); if (parse_int(v, 1, 64, &o->threads)) goto bad; }
        else if (!strcmp(a, "-c") || !strcmp(a, "--ctx-size")) { NEEDV(); if (parse_int(v, 1, 1 << 24, &o->n_ctx)) goto bad; }
        else if (!strcmp(a, "-r") || !strcmp(a, "--repetitions")) { NEEDV(); if (parse_int(v, 1, 1000, &o->reps)) goto bad; }
        else if (!strcmp(a, "--top-k")) { NEEDV(); if (parse_int(v, 0, 1 << 24, &o->top_k)) goto bad; }
        else if (!strcmp(a, "--temp")) { NEEDV(); if (parse_float(v, &o->temp)) goto bad; }
        else if (!strcmp(a, "--top-p")) { NEEDV(); if (parse_float(v, &o->top_p)) goto bad; }
        else if (!strcmp(a, "--seed") || !strcmp(a, "-s")) { NEEDV(); o->seed = strtoull(v, NULL, 10); }
        else if (!strcmp(a, "--tokens")) { NEEDV(); o->tokens = v; }
        else if (!strcmp(a, "-f") || !strcmp(a, "--file")) { NEEDV(); o->file = v; }
        else if (!strcmp(a, "-b") || !strcmp(a, "--batch-size")) { NEEDV(); if (parse_int(v, 1, 8192, &o->n_batch)) goto bad; }
        else if (!strcmp(a, "--chunks")) { NEEDV(); if (parse_int(v, 1, 1 << 24, &o->chunks)) goto bad; }
        else if (!strcmp(a, "--ppl-first")) { NEEDV(); if (parse_int(v, 0, 1 << 24, &o->ppl_first)) goto bad; }
        else if (!strcmp(a, "--json")) o->json = true;
        else if (!strcmp(a, "--ids")) o->ids = true;
        else if (!strcmp(a, "--special")) o->special = true;
        else if (!strcmp(a, "--all")) o->all = true;
        else if (!strcmp(a, "--no-bos")) o->no_bos = true;
        else if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout); exit(0); }
        else if (a[0] == '-' && a[1]) { fprintf(stderr, "longctx-engine: unknown option %s\n", a); return -1; }
        else if (o->npos < 4) o->pos[o->npos++] = a;
        else { fprintf(stderr, "longctx-engine: unexpected argument %s\n", a); return -1; }
        continue;
    bad:
        fprintf(stderr, "longctx-engine: bad value for %s: %s\n", a, v);
        return -1;
#undef NEEDV
    }
    return 0;
}

static int load_model(const opts *o, eng_model **m)
{
    if (!o->model) { fprintf(stderr, "longctx-engine: -m MODEL.gguf is required\n"); return -1; }
    char err[512];
    int rc = eng_model_load(o->model, m, err, sizeof err);
    if (rc) {
        fprintf(stderr, "longctx-engine: %s\n", err[0] ? err : lcx_strerror(rc));
        return -1;
    }
    return 0;
}

static int load_tok(const eng_model *m, eng_tokenizer **t)
{
    char err[512];
    int rc = eng__tokenizer_from_gguf(eng_model_gguf(m), t, err, sizeof err);
    if (rc) {
        fprintf(stderr, "longctx-engine: tokenizer: %s\n", err[0] ? err : lcx_strerror(rc));
        return -1;
    }
    return 0;
}

/* Tokenizes text; *ids malloc'd. */
static int tokenize_all(const eng_tokenizer *t, const char *text, bool add_special, bool special, int32_t **ids)
{
    size_t len = strlen(text);
    if (len > MAX_PROMPT_BYTES) return LCX_ELIMIT;
    int cap = (int)len + 8;
    int32_t *buf = malloc((size_t)cap * sizeof *buf);
    if (!buf) return LCX_ENOMEM;
    int n = eng__tokenize(t, text, len, add_special, special, buf, cap);
    if (n < 0) { free(buf); return n; }
    *ids = buf;
    return n;
}

static int ctx_for(const eng_model *m, const opts *o, int need, eng_ctx **c)
{
    eng_ctx_params p = eng_ctx_default_params();
    p.n_threads = o->threads;
    p.n_ubatch = o->n_batch;
    p.n_ctx = o->n_ctx ? o->n_ctx : LCX_MAX(LCX_MIN(eng_model_get_info(m)->n_ctx_train, 4096), need);
    int rc = eng_ctx_init(m, &p, c);
    if (rc) {
        fprintf(stderr, "longctx-engine: cannot create context: %s\n", lcx_strerror(rc));
        return rc;
    }
    return 0;
}

static void log_stderr(void *ud, const char *line)
{
    (void)ud;
    fprintf(stderr, "%s\n", line);
}

/* Attaches V3 when the flags/environment turned it on. session: the rescue session id. */
static int v3_attach(eng_ctx *c, const opts *o, const char *session, bool log)
{
    if (!o->tc.enabled) return 0;
    char err[512];
    int rc = eng_triatt_attach(c, &o->tc, session, err, sizeof err);
    if (rc) {
        fprintf(stderr, "longctx-engine: %s\n", err);
        return rc;
    }
    if (log) eng_triatt_set_log(c, log_stderr, NULL);
    return 0;
}

static void v3_summary(eng_ctx *c)
{
    eng_triatt_stats st;
    if (eng_triatt_get_stats(c, &st)) return;
    fprintf(stderr, "triatt: rounds=%llu cells_evicted=%llu round_ms=%.1f feed_ms=%.1f spans_sent=%llu spans_dropped=%llu\n",
            (unsigned long long)st.rounds, (unsigned long long)st.cells_evicted, st.total_round_ms, st.total_feed_ms,
            (unsigned long long)st.spans_sent, (unsigned long long)st.spans_dropped);
}

static int cmd_run(int argc, char **argv)
{
    opts o;
    if (parse_opts(argc, argv, &o, false)) return 2;
    if (!o.prompt) o.prompt = "";
    eng_model *m = NULL;
    eng_tokenizer *tk = NULL;
    eng_ctx *c = NULL;
    eng_sampler *s = NULL;
    int32_t *ids = NULL;
    int ret = 1;
    if (load_model(&o, &m) || load_tok(m, &tk)) goto out;
    int n = tokenize_all(tk, o.prompt, !o.no_bos, o.special, &ids);
    if (n < 0) { fprintf(stderr, "longctx-engine: tokenize: %s\n", lcx_strerror(n)); goto out; }
    if (n == 0) {
        int32_t b = eng__token_bos(tk);
        if (b < 0) { fprintf(stderr, "longctx-engine: empty prompt and the model has no BOS token\n"); goto out; }
        ids[0] = b;
        n = 1;
    }
    if (ctx_for(m, &o, o.tc.enabled ? 0 : n + o.n_predict, &c)) goto out;
    if (v3_attach(c, &o, NULL, true)) goto out;
    if (!o.tc.enabled && n + o.n_predict > eng_kv_size(c)) {
        fprintf(stderr, "longctx-engine: prompt (%d) + -n (%d) exceeds the context (%d); use -c\n", n, o.n_predict,
                eng_kv_size(c));
        goto out;
    }
    s = eng_sampler_init(&(eng_sampler_params){.temp = o.temp, .top_k = o.top_k, .top_p = o.top_p, .seed = o.seed});
    if (!s) goto out;
    int rc = eng_decode(c, ids, NULL, n, false);
    if (rc) { fprintf(stderr, "longctx-engine: decode: %s\n", lcx_strerror(rc)); goto out; }
    const int nv = eng_model_get_info(m)->n_vocab;
    const int32_t bos = eng__token_bos(tk);
    int32_t prev = ids[n - 1];
    char piece[8192];
    for (int i = 0; i < o.n_predict; i++) {
        int32_t t = eng_sample(s, eng_logits(c, -1), nv);
        if (t < 0) { fprintf(stderr, "longctx-engine: sampler: %s\n", lcx_strerror(t)); goto out; }
        if (eng__token_is_eog(tk, t)) break;
        if (o.ids) {
            printf(i ? " %d" : "%d", t);
        } else {
            int pl = eng__token_to_piece(tk, t, piece, sizeof piece);
            if (pl > (int)sizeof piece) pl = sizeof piece;
            if (pl > 0) {
                const char *pp = piece;
                /* the dummy-prefix space of the first word after BOS is not text (llama2.c,
                 * llama.cpp do the same) */
                if (prev == bos && eng__tokenizer_adds_space_prefix(tk) && pp[0] == ' ') { pp++; pl--; }
                fwrite(pp, 1, (size_t)pl, stdout);
                fflush(stdout);
            }
        }
        prev = t;
        if (i + 1 == o.n_predict) break;
        rc = eng_decode(c, &t, NULL, 1, false);
        if (rc) { fprintf(stderr, "longctx-engine: decode: %s\n", lcx_strerror(rc)); goto out; }
    }
    if (o.ids) printf("\n");
    fflush(stdout);
    if (eng_triatt_attached(c)) {
        /* give queued Tier-2 writes a bounded chance to land before exit */
        if (eng_triatt_rescue(c)) eng_triatt_flush(c, 2000);
        v3_summary(c);
    }
    ret = 0;
out:
    free(ids);
    eng_sampler_free(s);
    eng_ctx_free(c);
    eng__tokenizer_free(tk);
    eng_model_free(m);
    return ret;
}

static int parse_tokens(const char *s, int32_t **out)
{
    size_t cap = 16, n = 0;
    int32_t *v = malloc(cap * sizeof *v);
    if (!v) return -1;
    const char *p = s;
    while (*p) {
        char *e;
        errno = 0;
        long x = strtol(p, &e, 10);
        if (e == p || errno || x < 0 || x > INT32_MAX) { free(v); return -1; }
        if (n == cap) {
            if (cap > (1u << 24)) { free(v); return -1; }
            int32_t *nv = realloc(v, (cap *= 2) * sizeof *v);
            if (!nv) { free(v); return -1; }
            v = nv;
        }
        v[n++] = (int32_t)x;
        p = e;
        while (*p == ',' || *p == ' ') p++;
    }
    if (!n) { free(v); return -1; }
    *out = v;
    return (int)n;
}

static void print_row(const float *l, int nv)
{
    lcx_buf b = {0};
    lcx__buf_puts(&b, "[");
    for (int i = 0; i < nv; i++) {
        if (i) lcx__buf_puts(&b, ",");
        lcx__buf_json_num(&b, l[i]);
    }
    lcx__buf_puts(&b, "]");
    fwrite(b.data, 1, b.len, stdout);
    lcx__buf_free(&b);
}

static int cmd_logits(int argc, char **argv)
{
    opts o;
    if (parse_opts(argc, argv, &o, false)) return 2;
    if (!o.tokens) { fprintf(stderr, "longctx-engine: --tokens 1,2,3 is required\n"); return 2; }
    int32_t *ids = NULL;
    int n = parse_tokens(o.tokens, &ids);
    if (n <= 0) { fprintf(stderr, "longctx-engine: bad --tokens list\n"); return 2; }
    eng_model *m = NULL;
    eng_ctx *c = NULL;
    int ret = 1;
    if (load_model(&o, &m)) goto out;
    const int nv = eng_model_get_info(m)->n_vocab;
    for (int i = 0; i < n; i++)
        if (ids[i] >= nv) { fprintf(stderr, "longctx-engine: token %d out of range (n_vocab %d)\n", ids[i], nv); goto out; }
    if (ctx_for(m, &o, n, &c)) goto out;
    int rc = eng_decode(c, ids, NULL, n, o.all);
    if (rc) { fprintf(stderr, "longctx-engine: decode: %s\n", lcx_strerror(rc)); goto out; }
    printf("{\"n_vocab\":%d,\"n_tokens\":%d,\"position\":%d,\"logits\":", nv, n, n - 1);
    print_row(eng_logits(c, -1), nv);
    if (o.all) {
        printf(",\"logits_all\":[");
        for (int i = 0; i < n; i++) {
            if (i) printf(",");
            print_row(eng_logits(c, i), nv);
        }
        printf("]");
    }
    printf("}\n");
    ret = 0;
out:
    free(ids);
    eng_ctx_free(c);
    eng_model_free(m);
    return ret;
}

static int cmp_dbl(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int cmd_bench(int argc, char **argv)
{
    opts o;
    if (parse_opts(argc, argv, &o, true)) return 2;
    eng_model *m = NULL;
    eng_ctx *c = NULL;
    int32_t *toks = NULL;
    int ret = 1;
    if (load_model(&o, &m)) goto out;
    const eng_model_info *I = eng_model_get_info(m);
    if (ctx_for(m, &o, o.n_pp + o.n_predict + 1, &c)) goto out;
    if (!o.tc.enabled && o.n_pp + o.n_predict > eng_kv_size(c)) { fprintf(stderr, "longctx-engine: context too small\n"); goto out; }
    int nt = LCX_MAX(o.n_pp, o.n_predict);
    toks = malloc((size_t)nt * sizeof *toks);
    if (!toks) goto out;
    uint32_t x = 12345;
    for (int i = 0; i < nt; i++) {
        x = x * 1103515245u + 12345u;
        toks[i] = (int32_t)((x >> 8) % (uint32_t)I->n_vocab);
    }
    double pp[1000], tg[1000];
    /* warm-up: pages the weights in and settles the thread pool */
    eng_decode(c, toks, NULL, LCX_MIN(o.n_pp, 16), false);
    eng_kv_clear(c);
    for (int r = 0; r < o.reps; r++) {
        eng_kv_clear(c);
        if (v3_attach(c, &o, NULL, false)) goto out;   /* fresh calibration per repetition */
        double t0 = lcx__now_ms();
        int rc = eng_decode(c, toks, NULL, o.n_pp, false);
        double t1 = lcx__now_ms();
        if (rc) { fprintf(stderr, "longctx-engine: decode: %s\n", lcx_strerror(rc)); goto out; }
        pp[r] = o.n_pp / ((t1 - t0) / 1000.0);
        eng_kv_clear(c);
        t0 = lcx__now_ms();
        for (int i = 0; i < o.n_predict; i++) {
            rc = eng_decode(c, &toks[i], NULL, 1, false);
            if (rc) { fprintf(stderr, "longctx-engine: decode: %s\n", lcx_strerror(rc)); goto out; }
        }
        t1 = lcx__now_ms();
        tg[r] = o.n_predict / ((t1 - t0) / 1000.0);
        fprintf(stderr, "rep %d: pp%d %.2f tok/s, tg%d %.2f tok/s\n", r + 1, o.n_pp, pp[r], o.n_predict, tg[r]);
        if (eng_triatt_attached(c)) v3_summary(c);
    }
    qsort(pp, o.reps, sizeof(double), cmp_dbl);
    qsort(tg, o.reps, sizeof(double), cmp_dbl);
    printf("model: %s (%s, %d layers, n_embd %d, vocab %d, %.1f MiB of weights)\n", o.model, I->arch_name,
           I->n_layer, I->n_embd, I->n_vocab, I->weight_bytes / 1048576.0);
    printf("threads: %d, reps: %d (median; min..max)\n", o.threads, o.reps);
    printf("pp%d: %.2f tok/s (%.2f..%.2f)\n", o.n_pp, pp[o.reps / 2], pp[0], pp[o.reps - 1]);
    printf("tg%d: %.2f tok/s (%.2f..%.2f)\n", o.n_predict, tg[o.reps / 2], tg[0], tg[o.reps - 1]);
    ret = 0;
out:
    free(toks);
    eng_ctx_free(c);
    eng_model_free(m);
    return ret;
}

/* Perplexity like llama.cpp's: the text in chunks of CTX tokens, each in a fresh cache
 * (the first token replaced by BOS when the model has one), decoded in batches of -b, and
 * tokens from --ppl-first (default CTX/2) on scored by the next token's log-probability. With
 * V3 on, each chunk gets a fresh attachment (calibrated on its own first tokens) and rounds
 * fire between batches, so the later batches of a chunk see only the surviving cells; a V3
 * run in which no round fired measured nothing and is refused. */
static int cmd_perplexity(int argc, char **argv)
{
    opts o;
    if (parse_opts(argc, argv, &o, false)) return 2;
    if (!o.file) { fprintf(stderr, "longctx-engine: -f TEXT is required\n"); return 2; }
    eng_model *m = NULL;
    eng_tokenizer *tk = NULL;
    eng_ctx *c = NULL;
    int32_t *ids = NULL;
    char *text = NULL;
    int ret = 1;
    size_t tlen = 0;
    int rc = lcx__read_file(o.file, MAX_PROMPT_BYTES, &text, &tlen);
    if (rc < 0) { fprintf(stderr, "longctx-engine: cannot read %s: %s\n", o.file, lcx_strerror(rc)); return 1; }
    if (load_model(&o, &m) || load_tok(m, &tk)) goto out;
    int n = tokenize_all(tk, text, true, false, &ids);
    if (n < 0) { fprintf(stderr, "longctx-engine: tokenize: %s\n", lcx_strerror(n)); goto out; }
    const eng_model_info *I = eng_model_get_info(m);
    const int ctx = o.n_ctx ? o.n_ctx : LCX_MIN(I->n_ctx_train, 4096);
    const int first = o.ppl_first >= 0 ? o.ppl_first : ctx / 2;
    if (first >= ctx - 1) { fprintf(stderr, "longctx-engine: --ppl-first %d leaves nothing to score in %d-token chunks\n", first, ctx); goto out; }
    int n_chunks = n / ctx;
    if (o.chunks > 0) n_chunks = LCX_MIN(n_chunks, o.chunks);
    if (n_chunks < 1) { fprintf(stderr, "longctx-engine: %s has %d tokens, fewer than one %d-token chunk\n", o.file, n, ctx); goto out; }
    opts oc = o;
    oc.n_ctx = ctx;
    if (ctx_for(m, &oc, ctx, &c)) goto out;
    const int nv = I->n_vocab;
    const int32_t bos = eng__token_bos(tk);
    double nll = 0;
    long scored = 0;
    unsigned long long rounds = 0, evicted = 0;
    double round_ms = 0, t_start = lcx__now_ms();
    int32_t *chunk = malloc((size_t)ctx * sizeof *chunk);
    if (!chunk) goto out;
    for (int k = 0; k < n_chunks; k++) {
        memcpy(chunk, ids + (size_t)k * ctx, (size_t)ctx * sizeof *chunk);
        if (bos >= 0) chunk[0] = bos;
        eng_kv_clear(c);
        if (v3_attach(c, &o, NULL, false)) { free(chunk); goto out; }
        double cn = 0;
        int cs = 0;
        eng_triatt_stats st = {0};
        for (int b0 = 0; b0 < ctx; b0 += o.n_batch) {
            const int nb = LCX_MIN(o.n_batch, ctx - b0);
            /* only rounds before the last batch changed what a scored token saw */
            if (b0 + nb == ctx && eng_triatt_get_stats(c, &st)) memset(&st, 0, sizeof st);
            rc = eng_decode(c, chunk + b0, NULL, nb, true);
            if (rc) { fprintf(stderr, "longctx-engine: decode: %s\n", lcx_strerror(rc)); free(chunk); goto out; }
            for (int j = LCX_MAX(first, b0); j < b0 + nb && j + 1 < ctx; j++) {
                const float *l = eng_logits(c, j - b0);
                double mx = l[0];
                for (int v = 1; v < nv; v++) mx = fmax(mx, l[v]);
                double se = 0;
                for (int v = 0; v < nv; v++) se += exp((double)l[v] - mx);
                cn += mx + log(se) - l[chunk[j + 1]];
                cs++;
            }
        }
        nll += cn;
        scored += cs;
        rounds += st.rounds;
        evicted += st.cells_evicted;
        round_ms += st.total_round_ms;
        if (!o.json) fprintf(stderr, "[%d] chunk ppl %.4f, running ppl %.4f\n", k + 1, exp(cn / cs), exp(nll / scored));
    }
    free(chunk);
    const double ppl = exp(nll / scored), secs = (lcx__now_ms() - t_start) / 1000.0;
    if (o.tc.enabled && rounds == 0) {
        fprintf(stderr, "longctx-engine: void run: TriAttention was on but no eviction round fired (budget %d, ctx %d, "
                "batch %d, divide %d): nothing was measured; lower --triatt-budget or -b\n",
                o.tc.budget, ctx, o.n_batch, o.tc.divide_length);
        goto out;
    }
    static const char *modes[] = {"trig", "random", "recency"};
    if (o.json)
        printf("{\"ppl\":%.6f,\"nll\":%.6f,\"scored\":%ld,\"chunks\":%d,\"ctx\":%d,\"batch\":%d,\"first\":%d,"
               "\"triatt\":%s,\"budget\":%d,\"hybrid\":%d,\"mode\":\"%s\",\"direction\":\"%s\",\"rounds\":%llu,"
               "\"cells_evicted\":%llu,\"round_ms\":%.3f,\"seconds\":%.3f}\n",
               ppl, nll / scored, scored, n_chunks, ctx, o.n_batch, first, o.tc.enabled ? "true" : "false", o.tc.budget,
               (int)o.tc.version, modes[o.tc.mode], o.tc.direction == TRIATT_KEEP_HIGH ? "keep_high" : "evict_high",
               rounds, evicted, round_ms, secs);
    else
        printf("perplexity: %.4f over %ld tokens (%d chunks of %d, batch %d, scored from %d)%s rounds=%llu cells_evicted=%llu\n",
               ppl, scored, n_chunks, ctx, o.n_batch, first, o.tc.enabled ? "; triatt on:" : "; triatt off:", rounds, evicted);
    ret = 0;
out:
    free(text);
    free(ids);
    eng_ctx_free(c);
    eng__tokenizer_free(tk);
    eng_model_free(m);
    return ret;
}

static int cmd_tokenize(int argc, char **argv)
{
    opts o;
    if (parse_opts(argc, argv, &o, false)) return 2;
    if (!o.prompt) { fprintf(stderr, "longctx-engine: -p TEXT is required\n"); return 2; }
    eng_gguf *g = NULL;
    eng_tokenizer *tk = NULL;
    int32_t *ids = NULL;
    int ret = 1;
    char err[512];
    if (!o.model) { fprintf(stderr, "longctx-engine: -m MODEL.gguf is required\n"); return 2; }
    /* only the metadata is needed: vocab-only GGUFs work too */
    int rc = eng__gguf_open(o.model, &g, err, sizeof err);
    if (rc) { fprintf(stderr, "longctx-engine: %s\n", err); goto out; }
    rc = eng__tokenizer_from_gguf(g, &tk, err, sizeof err);
    if (rc) { fprintf(stderr, "longctx-engine: tokenizer: %s\n", err); goto out; }
    int n = tokenize_all(tk, o.prompt, !o.no_bos, o.special, &ids);
    if (n < 0) { fprintf(stderr, "longctx-engine: tokenize: %s\n", lcx_strerror(n)); goto out; }
    for (int i = 0; i < n; i++) printf(i ? " %d" : "%d", ids[i]);
    printf("\n");
    ret = 0;
out:
    free(ids);
    eng__tokenizer_free(tk);
    eng__gguf_close(g);
    return ret;
}

static int cmd_convert(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: longctx-engine convert-llama2c CHECKPOINT.bin TOKENIZER.bin OUT.gguf\n");
        return 2;
    }
    char err[512];
    int rc = eng_convert_llama2c(argv[1], argv[2], argv[3], err, sizeof err);
    if (rc) {
        fprintf(stderr, "longctx-engine: %s\n", err[0] ? err : lcx_strerror(rc));
        return 1;
    }
    fprintf(stderr, "wrote %s\n", argv[3]);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) { usage(stderr); return 2; }
    const char *c = argv[1];
    if (!strcmp(c, "-h") || !strcmp(c, "--help") || !strcmp(c, "help")) { usage(stdout); return 0; }
    if (!strcmp(c, "--version")) { printf("longctx-engine %s\n", LCX_VERSION); return 0; }
    if (!strcmp(c, "run")) return cmd_run(argc - 1, argv + 1);
    if (!strcmp(c, "logits")) return cmd_logits(argc - 1, argv + 1);
    if (!strcmp(c, "bench")) return cmd_bench(argc - 1, argv + 1);
    if (!strcmp(c, "perplexity")) return cmd_perplexity(argc - 1, argv + 1);
    if (!strcmp(c, "tokenize")) return cmd_tokenize(argc - 1, argv + 1);
    if (!strcmp(c, "serve")) return cmd_serve(argc - 1, argv + 1);
    if (!strcmp(c, "convert-llama2c")) return cmd_convert(argc - 1, argv + 1);
    fprintf(stderr, "longctx-engine: unknown command '%s'\n", c);
    usage(stderr);
    return 2;
}
