/* longctx eval — MRCR v2 runs and data generation.
 *   longctx eval mrcr-gen --needles 2|4|8 --bins 8k,...,1m --n N --seed S --out FILE.jsonl [--haystack DIR]
 *   longctx eval mrcr FILE.jsonl [--recipe plain|multiq|selector] [--top-k K] [--upstream URL]
 *                    [--model M] [--budget TOKENS] [--json] [--responses OUT.jsonl]
 *                    [--rerank-model PATH …: MultiQ's cross-encoder, the service's nn flags]
 *   longctx eval ramp | ramp-model: see cmd_eval_ramp.c */
#include "cmds.h"
#include "eval/lcx_eval.h"
#include "longctx/lcx.h"
#include "longctx/lcx_recipes.h"
#include "longctx/lcx_svc.h"
#include "util/util.h"
#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define UPSTREAM_MAX_BODY ((size_t)64 << 20)

static void usage(FILE *f)
{
    fprintf(f,
            "usage: longctx eval mrcr-gen --needles 2|4|8 --bins 8k,16k,...,1m --n N --seed S --out FILE.jsonl\n"
            "                            [--haystack DIR]   (default $LCX_FIXTURES/haystack/paul_graham)\n"
            "                            [--question-style exact|varied]   (varied: ordinal words, typos, last, ...)\n"
            "       longctx eval mrcr FILE.jsonl [--recipe selector|plain|multiq] [--top-k 8] [--json]\n"
            "                            [--responses OUT.jsonl] [--upstream URL [--model M] [--budget TOKENS]]\n"
            "                            [--ordinal-offset N]   (test hook: deliberately wrong selector)\n"
            "                            [--rerank-model PATH [--rerank-top N] [--rerank-deadline-ms MS]]\n"
            "                            (multiq: the cross-encoder reorders the top turns; also LONGCTX_*)\n"
            "       longctx eval ramp -m MODEL.gguf --sizes 8k,16k,... (longctx eval ramp --help)\n");
}

/* ------------------------------------------------------------------ mrcr-gen */

static int cmd_gen(int argc, char **argv)
{
    int needles = 8, varied = 0;
    long n = 0;
    uint64_t seed = 0;
    const char *bins = "8k,16k,32k,64k,128k,256k,512k,1m", *out = NULL, *hay = NULL;
    char hay_def[4096];
    for (int i = 1; i < argc; i += 2) {   /* every flag takes a value */
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { usage(stdout); return 0; }
        if (!v) { fprintf(stderr, "longctx eval mrcr-gen: %s needs a value\n", a); return 2; }
        if (!strcmp(a, "--needles")) needles = atoi(v);
        else if (!strcmp(a, "--bins")) bins = v;
        else if (!strcmp(a, "--n")) n = atol(v);
        else if (!strcmp(a, "--seed")) seed = strtoull(v, NULL, 0);
        else if (!strcmp(a, "--out")) out = v;
        else if (!strcmp(a, "--haystack")) hay = v;
        else if (!strcmp(a, "--question-style")) {
            if (!strcmp(v, "varied")) varied = 1;
            else if (strcmp(v, "exact")) { fprintf(stderr, "longctx eval mrcr-gen: --question-style exact|varied\n"); return 2; }
        }
        else { fprintf(stderr, "longctx eval mrcr-gen: unknown flag %s\n", a); return 2; }
    }
    if ((needles != 2 && needles != 4 && needles != 8) || n < 1 || n > 100000 || !out) {
        usage(stderr);
        return 2;
    }
    if (!hay) {
        const char *fx = getenv("LCX_FIXTURES");
        if (!fx) { fprintf(stderr, "longctx eval mrcr-gen: set --haystack DIR or LCX_FIXTURES\n"); return 2; }
        snprintf(hay_def, sizeof hay_def, "%s/haystack/paul_graham", fx);
        hay = hay_def;
    }
    int bl[LCX_MRCR_NBINS], nb = 0;
    char tmp[256];
    snprintf(tmp, sizeof tmp, "%s", bins);
    for (char *s = NULL, *t = strtok_r(tmp, ",", &s); t; t = strtok_r(NULL, ",", &s)) {
        int b = lcx__mrcr_bin_parse(t);
        if (b < 0 || nb >= LCX_MRCR_NBINS) { fprintf(stderr, "longctx eval mrcr-gen: bad bin '%s'\n", t); return 2; }
        bl[nb++] = b;
    }
    lcx_mrcr_gen *g = NULL;
    int rc = lcx__mrcr_gen_open(hay, &g);
    if (rc) { fprintf(stderr, "longctx eval mrcr-gen: haystack %s: %s\n", hay, lcx_strerror(rc)); return 1; }
    lcx__mrcr_gen_set_varied(g, varied);
    FILE *f = fopen(out, "wb");
    if (!f) { fprintf(stderr, "longctx eval mrcr-gen: cannot write %s\n", out); lcx__mrcr_gen_close(g); return 1; }
    for (int b = 0; b < nb && !rc; b++)
        for (long i = 0; i < n && !rc; i++) {
            lcx_mrcr_rec r;
            rc = lcx__mrcr_gen_record(g, seed, needles, bl[b], i, &r);
            if (!rc) rc = lcx__mrcr_write_line(f, &r);
            lcx__mrcr_rec_free(&r);
        }
    if (fclose(f) && !rc) rc = LCX_EIO;
    lcx__mrcr_gen_close(g);
    if (rc) { fprintf(stderr, "longctx eval mrcr-gen: %s\n", lcx_strerror(rc)); return 1; }
    return 0;
}

/* ------------------------------------------------------------------ upstream */

typedef struct { lcx_buf b; } sink_t;

static size_t on_body(char *p, size_t sz, size_t nm, void *ud)
{
    sink_t *s = ud;
    return lcx__buf_append(&s->b, p, sz * nm) ? 0 : sz * nm;
}

/* POST {model, messages, temperature 0} to base/v1/chat/completions; content of choice 0. */
static int chat_upstream(const char *base, const char *model, const cJSON *messages, long timeout_ms,
                         char **content, char *err, size_t el)
{
    char url[2048];
    size_t bl = strlen(base);
    while (bl && base[bl - 1] == '/') bl--;
    if (bl >= 20 && !strncmp(base + bl - 20, "/v1/chat/completions", 20))
        snprintf(url, sizeof url, "%.*s", (int)bl, base);
    else if (bl >= 3 && !strncmp(base + bl - 3, "/v1", 3))
        snprintf(url, sizeof url, "%.*s/chat/completions", (int)bl, base);
    else
        snprintf(url, sizeof url, "%.*s/v1/chat/completions", (int)bl, base);
    cJSON *req = cJSON_CreateObject();
    if (!req) return LCX_ENOMEM;
    cJSON_AddStringToObject(req, "model", model);
    cJSON_AddItemToObject(req, "messages", cJSON_Duplicate(messages, 1));
    cJSON_AddNumberToObject(req, "temperature", 0);
    cJSON_AddBoolToObject(req, "stream", 0);
    char *body = cJSON_PrintUnformatted(req);
    cJSON_Delete(req);
    if (!body) return LCX_ENOMEM;
    CURL *c = curl_easy_init();
    sink_t s = {.b = {.cap = UPSTREAM_MAX_BODY}};
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
    int rc = LCX_ENET;
    if (c && h) {
        curl_easy_setopt(c, CURLOPT_URL, url);
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
        curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
        curl_easy_setopt(c, CURLOPT_WRITEDATA, &s);
        curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, timeout_ms);
        curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
        CURLcode cc = curl_easy_perform(c);
        long status = 0;
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
        if (cc != CURLE_OK) snprintf(err, el, "%s", curl_easy_strerror(cc));
        else if (status != 200) snprintf(err, el, "HTTP %ld: %.200s", status, s.b.data ? s.b.data : "");
        else {
            cJSON *r = cJSON_ParseWithLength(s.b.data ? s.b.data : "", s.b.len);
            cJSON *ch = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(r, "choices"), 0);
            cJSON *ms = cJSON_GetObjectItemCaseSensitive(ch, "message");
            cJSON *ct = cJSON_GetObjectItemCaseSensitive(ms, "content");
            if (cJSON_IsString(ct)) {
                *content = strdup(ct->valuestring);
                rc = *content ? LCX_OK : LCX_ENOMEM;
            } else {
                snprintf(err, el, "no choices[0].message.content in the response");
                rc = LCX_EINVAL;
            }
            cJSON_Delete(r);
        }
    }
    curl_slist_free_all(h);
    if (c) curl_easy_cleanup(c);
    lcx__buf_free(&s.b);
    free(body);
    return rc;
}

/* ------------------------------------------------------------------ mrcr */

typedef struct {
    double *score, *ms;
    int *hit;
    size_t n, cap;
    long fail_closed;
} binacc_t;

static int acc_push(binacc_t *a, double score, double ms, int hit)
{
    if (a->n == a->cap) {
        size_t nc = a->cap ? a->cap * 2 : 64;
        double *s = realloc(a->score, nc * sizeof *s);
        if (!s) return LCX_ENOMEM;
        a->score = s;
        double *m = realloc(a->ms, nc * sizeof *m);
        if (!m) return LCX_ENOMEM;
        a->ms = m;
        int *h = realloc(a->hit, nc * sizeof *h);
        if (!h) return LCX_ENOMEM;
        a->hit = h;
        a->cap = nc;
    }
    a->score[a->n] = score;
    a->ms[a->n] = ms;
    a->hit[a->n] = hit;
    a->n++;
    return 0;
}

typedef struct {
    const char *file, *responses, *upstream, *model;
    int recipe, json, top_k, offset;
    long budget;
    lcx_svc_config nn;   /* only the neural-model fields are used */
} mrcr_args;

/* Returns -1 to go on, else the exit status. */
static int parse_mrcr_args(int argc, char **argv, mrcr_args *o)
{
    *o = (mrcr_args){.model = "default", .recipe = LCX_MRCR_RECIPE_SELECTOR, .top_k = 8, .budget = 8192};
    lcx_svc_config_defaults(&o->nn);
    if (lcx_svc_config_nn_env(&o->nn, stderr)) return 2;
    for (int i = 1; i < argc; i++) {
        int nr = lcx_svc_config_nn_flag(&o->nn, argc, argv, &i, stderr);
        if (nr < 0) return 2;
        if (nr) continue;
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { usage(stdout); return 0; }
        if (!strcmp(a, "--json")) { o->json = 1; continue; }
        if (a[0] != '-') { o->file = a; continue; }
        if (!v) { fprintf(stderr, "longctx eval mrcr: %s needs a value\n", a); return 2; }
        if (!strcmp(a, "--recipe")) {
            if (!strcmp(v, "selector")) o->recipe = LCX_MRCR_RECIPE_SELECTOR;
            else if (!strcmp(v, "plain")) o->recipe = LCX_MRCR_RECIPE_PLAIN;
            else if (!strcmp(v, "multiq")) o->recipe = LCX_MRCR_RECIPE_MULTIQ;
            else { fprintf(stderr, "longctx eval mrcr: unknown recipe %s\n", v); return 2; }
        } else if (!strcmp(a, "--responses")) o->responses = v;
        else if (!strcmp(a, "--upstream")) o->upstream = v;
        else if (!strcmp(a, "--model")) o->model = v;
        else if (!strcmp(a, "--budget")) o->budget = atol(v);
        else if (!strcmp(a, "--top-k")) o->top_k = atoi(v);
        else if (!strcmp(a, "--ordinal-offset")) o->offset = atoi(v);
        else { fprintf(stderr, "longctx eval mrcr: unknown flag %s\n", a); return 2; }
        i++;
    }
    if (!o->file || o->top_k < 1 || o->top_k > LCX_TOP_K_MAX || o->budget < 256) { usage(stderr); return 2; }
    if (o->nn.embed_model[0]) {   /* the turns are embedded per record, in memory: no store to feed */
        fprintf(stderr, "longctx eval mrcr: note: the embed model is not used here (only --rerank-model)\n");
        o->nn.embed_model[0] = 0;
    }
    return -1;
}

/* The whole conversation, compacted to the budget, through the upstream model. A failure is
 * reported and graded as an empty reply (counted, never dropped). *ms: compaction + round
 * trip. */
static char *upstream_response(const mrcr_args *o, const lcx_mrcr_rec *rec, lcx_embedder *emb, long index, double *ms)
{
    const double t0 = lcx__now_ms();
    char *resp = NULL;
    cJSON *msgs = cJSON_CreateArray();
    for (size_t i = 0; msgs && i < rec->n_msgs; i++) {
        cJSON *m = cJSON_CreateObject();
        cJSON_AddStringToObject(m, "role", rec->msgs[i].role);
        cJSON_AddStringToObject(m, "content", rec->msgs[i].content);
        cJSON_AddItemToArray(msgs, m);
    }
    lcx_compact_opts co = lcx_compact_defaults();
    co.budget_tokens = (size_t)o->budget;
    co.top_k = o->top_k;
    co.use_selector = o->recipe == LCX_MRCR_RECIPE_SELECTOR;
    char uerr[512] = "";
    int rc = msgs ? lcx_compact_messages(msgs, emb, &co, NULL) : LCX_ENOMEM;
    if (!rc) rc = chat_upstream(o->upstream, o->model, msgs, 600000, &resp, uerr, sizeof uerr);
    cJSON_Delete(msgs);
    *ms = lcx__now_ms() - t0;
    if (rc) {
        fprintf(stderr, "longctx eval mrcr: record %ld: upstream: %s %s\n", index, lcx_strerror(rc), uerr);
        resp = strdup("");
    }
    return resp;
}

/* One line of --responses: index, response, score, retrieved message indices. */
static int write_response_line(FILE *ro, long index, const lcx_mrcr_outcome *oc)
{
    lcx_buf b = {0};
    lcx__buf_printf(&b, "{\"index\": %ld, \"response\": ", index);
    lcx__buf_json_str(&b, oc->response, strlen(oc->response));
    lcx__buf_puts(&b, ", \"score\": ");
    lcx__buf_printf(&b, "%.17g", oc->score);
    lcx__buf_puts(&b, ", \"retrieved_msg_indices\": [");
    for (int i = 0; i < oc->n_retrieved; i++) lcx__buf_printf(&b, i ? ", %ld" : "%ld", oc->retrieved[i]);
    lcx__buf_puts(&b, "]}\n");
    const int bad = !b.data || fwrite(b.data, 1, b.len, ro) != b.len;
    lcx__buf_free(&b);
    return bad;
}

/* One row per bin with records, "other" included so nothing is dropped; frees the bins. */
static void print_report(binacc_t *acc, int json)
{
    if (json) printf("[");
    else
        printf("%-6s %6s %8s %8s %10s %9s %9s %6s\n", "bin", "n", "mean", "ci95", "recall@k", "p50_ms",
               "p95_ms", "failc");
    int first = 1;
    for (int b = 0; b <= LCX_MRCR_BIN_OTHER; b++) {
        binacc_t *a = &acc[b];
        if (!a->n) continue;
        double mean, ci, hits = 0;
        lcx__eval_mean_ci(a->score, a->n, &mean, &ci);
        for (size_t i = 0; i < a->n; i++) hits += a->hit[i];
        double p50 = lcx__eval_percentile(a->ms, a->n, 0.5), p95 = lcx__eval_percentile(a->ms, a->n, 0.95);
        if (json)
            printf("%s{\"bin\": \"%s\", \"n\": %zu, \"mean\": %.6f, \"ci95\": %.6f, \"recall_at_k\": %.6f, "
                   "\"p50_ms\": %.3f, \"p95_ms\": %.3f, \"fail_closed\": %ld}",
                   first ? "" : ", ", lcx__mrcr_bin_name(b), a->n, mean, ci, hits / (double)a->n, p50, p95,
                   a->fail_closed);
        else
            printf("%-6s %6zu %8.4f %8.4f %10.4f %9.2f %9.2f %6ld\n", lcx__mrcr_bin_name(b), a->n, mean, ci,
                   hits / (double)a->n, p50, p95, a->fail_closed);
        first = 0;
        free(a->score); free(a->ms); free(a->hit);
    }
    if (json) printf("]\n");
}

static int cmd_mrcr(int argc, char **argv)
{
    mrcr_args o;
    int rc = parse_mrcr_args(argc, argv, &o);
    if (rc >= 0) return rc;
    const char *file = o.file;
    FILE *in = fopen(file, "rb");
    if (!in) { fprintf(stderr, "longctx eval mrcr: cannot open %s\n", file); return 1; }
    FILE *ro = NULL;
    if (o.responses && !(ro = fopen(o.responses, "wb"))) {
        fprintf(stderr, "longctx eval mrcr: cannot write %s\n", o.responses);
        fclose(in);
        return 1;
    }
    lcx_embedder *emb = NULL;
    lcx_svc_nn *nn = NULL;
    rc = lcx_embedder_hash_new(0, &emb);
    if (rc) fprintf(stderr, "longctx eval mrcr: embedder: %s\n", lcx_strerror(rc));
    else if (cmd_nn_open("eval mrcr", &o.nn, &nn) < 0) rc = 1;
    if (rc) { lcx_embedder_free(emb); fclose(in); if (ro) fclose(ro); return 1; }
    if (o.upstream) curl_global_init(CURL_GLOBAL_DEFAULT);
    lcx_mrcr_eval_opts eo = {.recipe = o.recipe, .top_k = o.top_k, .emb = emb, .ordinal_offset = o.offset,
                             .nn = lcx_svc_nn_queue(nn)};
    long reranked = 0;
    binacc_t acc[LCX_MRCR_BIN_OTHER + 1] = {0};
    lcx_buf lb = {0};
    long lineno = 0, index = 0;
    int status = 0, got;
    while ((got = lcx__mrcr_next_line(in, &lb)) > 0) {
        lineno++;
        if (!lb.len) continue;
        lcx_mrcr_rec rec;
        char err[256] = "";
        rc = lcx__mrcr_parse_line(lb.data, lb.len, &rec, err, sizeof err);
        if (rc) { fprintf(stderr, "longctx eval mrcr: %s:%ld: %s\n", file, lineno, err); status = 1; break; }
        lcx_mrcr_outcome oc;
        double up_ms = 0;
        char *up_resp = o.upstream ? upstream_response(&o, &rec, emb, index, &up_ms) : NULL;
        rc = up_resp ? lcx__mrcr_eval_with_response(&rec, &eo, up_resp, &oc) : lcx__mrcr_eval_one(&rec, &eo, &oc);
        free(up_resp);
        if (rc) {
            fprintf(stderr, "longctx eval mrcr: record %ld: %s\n", index, lcx_strerror(rc));
            lcx__mrcr_rec_free(&rec);
            status = 1;
            break;
        }
        oc.ms += up_ms;   /* compaction + model round trip count in latency */
        int bin = lcx__mrcr_bin_of(rec.n_chars);
        acc_push(&acc[bin], oc.score, oc.ms, oc.target_hit);
        acc[bin].fail_closed += oc.fail_closed;
        reranked += oc.used_rerank;
        if (ro && write_response_line(ro, index, &oc)) status = 1;
        lcx__mrcr_outcome_free(&oc);
        lcx__mrcr_rec_free(&rec);
        index++;
    }
    if (got < 0) {
        fprintf(stderr, "longctx eval mrcr: %s:%ld: %s\n", file, lineno + 1,
                got == LCX_ELIMIT ? "record longer than the 64 MiB cap" : lcx_strerror(got));
        status = 1;
    }
    lcx__buf_free(&lb);
    fclose(in);
    if (ro && fclose(ro)) status = 1;
    print_report(acc, o.json);
    if (nn) fprintf(stderr, "longctx eval mrcr: the cross-encoder reordered MultiQ's top turns in %ld of %ld records\n",
                    reranked, index);
    lcx_svc_nn_close(nn);
    lcx_embedder_free(emb);
    if (o.upstream) curl_global_cleanup();
    return status;
}

int cmd_eval(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (!strcmp(argv[1], "mrcr-gen")) return cmd_gen(argc - 1, argv + 1);
    if (!strcmp(argv[1], "mrcr")) return cmd_mrcr(argc - 1, argv + 1);
    if (!strcmp(argv[1], "ramp") || !strcmp(argv[1], "ramp-model")) return cmd_eval_ramp(argc - 1, argv + 1);
    fprintf(stderr, "longctx eval: unknown subcommand '%s' (mrcr, mrcr-gen, ramp, ramp-model)\n", argv[1]);
    usage(stderr);
    return 2;
}
