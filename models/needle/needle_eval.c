/* needle-eval: answer accuracy of a model on planted-fact prompts, through the engine.
 *
 *   needle-eval MODEL.gguf CASES.jsonl [-t THREADS] [-n MAX_GEN] [-r 0|1]
 *
 * CASES.jsonl: one {"prompt": TEXT, "answer": DIGITS, ...} per line (needle_data.py eval).
 * Each prompt is tokenized with BOS, prefilled at positions 0.., then decoded greedily until an
 * end-of-generation token or MAX_GEN tokens. A case passes when the reply is exactly the
 * answer. Prints one JSON line per case and a summary line.
 *
 * -r 1 (default): a case that starts with the same tokens as the previous one keeps their
 * K/V (the previous case's later cells are removed) and prefills only the rest — the same
 * computation (a token's K/V depend only on the tokens before it), fewer FLOPs: the cases of
 * one size and depth share the filler before the fact. prefill_s then counts only the new
 * tokens (reused says how many were kept). -r 0: every case from an empty cache. */
#include "engine/tokenizer.h"
#include "longctx/engine.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int argmax(const float *v, int n)
{
    int b = 0;
    for (int i = 1; i < n; i++)
        if (v[i] > v[b]) b = i;
    return b;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: needle-eval MODEL.gguf CASES.jsonl [-t THREADS] [-n MAX_GEN] [-r 0|1]\n");
        return 2;
    }
    int threads = 1, max_gen = 12, reuse = 1;
    for (int i = 3; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "-t")) threads = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "-n")) max_gen = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "-r")) reuse = atoi(argv[i + 1]);
    }
    char err[256];
    eng_model *m = NULL;
    eng_tokenizer *tk = NULL;
    if (eng_model_load(argv[1], &m, err, sizeof err) < 0 ||
        eng__tokenizer_from_gguf(eng_model_gguf(m), &tk, err, sizeof err) < 0) {
        fprintf(stderr, "needle-eval: %s\n", err);
        return 1;
    }
    const int nv = eng_model_get_info(m)->n_vocab;
    FILE *f = fopen(argv[2], "r");
    if (!f) { perror(argv[2]); return 1; }
    char *line = NULL;
    size_t cap = 0;
    int n_ok = 0, n_all = 0;
    eng_ctx *c = NULL;          /* kept across cases when reuse */
    int32_t *prev = NULL;       /* the previous case's prompt ids (the cache holds a prefix) */
    int n_prev = 0;
    while (getline(&line, &cap, f) > 0) {
        cJSON *j = cJSON_Parse(line);
        const cJSON *jp = cJSON_GetObjectItem(j, "prompt"), *ja = cJSON_GetObjectItem(j, "answer");
        if (!cJSON_IsString(jp) || !cJSON_IsString(ja)) { cJSON_Delete(j); continue; }
        const char *p = jp->valuestring;
        size_t pl = strlen(p);
        int32_t *ids = malloc((pl + 16) * sizeof *ids);
        int n = ids ? eng__tokenize(tk, p, pl, true, false, ids, (int)pl + 16) : -1;
        int keep = 0;
        if (reuse && c && n > 0 && eng_kv_size(c) >= n + max_gen + 8) {
            while (keep < n - 1 && keep < n_prev && ids[keep] == prev[keep]) keep++;
            eng_kv_remove_pos(c, keep, -1);
        } else {
            eng_ctx_free(c);
            c = NULL;
            eng_ctx_params cp = eng_ctx_default_params();
            cp.n_ctx = n + max_gen + 8 + (reuse ? 1024 : 0);   /* slack: the next case may be a few tokens longer */
            cp.n_threads = threads;
            if (n <= 0 || eng_ctx_init(m, &cp, &c) < 0) { fprintf(stderr, "needle-eval: cannot set up a case\n"); return 1; }
        }
        double t0 = now_s();
        int rc = eng_decode(c, ids + keep, NULL, n - keep, false);
        double t1 = now_s();
        int32_t gen[64];
        int ng = 0;
        while (rc >= 0 && ng < max_gen && ng < 64) {
            int32_t t = argmax(eng_logits(c, -1), nv);
            if (eng__token_is_eog(tk, t)) break;
            gen[ng++] = t;
            rc = eng_decode(c, &t, NULL, 1, false);
        }
        char reply[512] = "";
        if (rc >= 0) eng__detokenize(tk, gen, ng, reply, sizeof reply);
        const bool ok = rc >= 0 && !strcmp(reply, ja->valuestring);
        n_ok += ok;
        n_all++;
        const cJSON *js = cJSON_GetObjectItem(j, "size"), *jd = cJSON_GetObjectItem(j, "depth");
        printf("{\"tokens\":%d,\"size\":%d,\"depth\":%g,\"answer\":\"%s\",\"reply\":\"", n,
               cJSON_IsNumber(js) ? js->valueint : 0, cJSON_IsNumber(jd) ? jd->valuedouble : 0, ja->valuestring);
        for (const char *q = reply; *q; q++)
            if (*q == '"' || *q == '\\') printf("\\%c", *q);
            else if ((unsigned char)*q >= 0x20) putchar(*q);
        printf("\",\"ok\":%s,\"prefill_s\":%.3f,\"reused\":%d}\n", ok ? "true" : "false", t1 - t0, keep);
        fflush(stdout);
        free(prev);
        prev = ids;
        n_prev = n;
        if (!reuse) { eng_ctx_free(c); c = NULL; }
        cJSON_Delete(j);
    }
    printf("{\"summary\":true,\"cases\":%d,\"correct\":%d,\"accuracy\":%.4f}\n", n_all, n_ok,
           n_all ? (double)n_ok / n_all : 0.0);
    eng_ctx_free(c);
    free(prev);
    free(line);
    fclose(f);
    eng__tokenizer_free(tk);
    eng_model_free(m);
    return 0;
}
