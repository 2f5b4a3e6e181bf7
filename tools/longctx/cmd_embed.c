/* longctx embed -m MODEL TEXT... [--json] — each text's vector from a neural embedder (a
 * GGUF `bert` file or a Hugging Face sentence-transformers folder; docs/neural.md), so a
 * model can be checked against another implementation. Also holds the model flags that
 * `longctx rerank` shares (lcx__cli_nn_parse). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cmds.h"
#include "longctx/lcx_neural.h"
#include "util/util.h"

const char lcx__cli_nn_flags[] =
    "  -m MODEL        a .gguf file (llama.cpp bert layout) or a Hugging Face folder\n"
    "  -t N            threads (default 1)\n"
    "  --weights T     convert the matmul weights at load: f32 | f16 | bf16 | q8_0 (default: as stored)\n"
    "  --gelu F        erf | tanh (default: as config.json says; GGUF: erf)\n"
    "  --llama-types   token type 0 for the whole pair (llama.cpp's rerank behaviour)\n"
    "  --json          JSON output\n";

int lcx__cli_nn_parse(int argc, char **argv, int *i, const char *cmd, lcx_nn_opts *o, const char **model, bool *json)
{
    const char *a = argv[*i];
    if (!strcmp(a, "-m") && *i + 1 < argc) { *model = argv[++*i]; return 1; }
    if (!strcmp(a, "--json")) { *json = true; return 1; }
    if (!strcmp(a, "--llama-types")) { o->pair_types_all_zero = true; return 1; }
    if (!strcmp(a, "-t") && *i + 1 < argc) {
        char *e;
        long v = strtol(argv[++*i], &e, 10);
        if (*e || v < 1 || v > 256) { fprintf(stderr, "longctx %s: -t must be 1..256\n", cmd); return -1; }
        o->n_threads = (int)v;
        return 1;
    }
    if (!strcmp(a, "--weights") && *i + 1 < argc) {
        const char *w = argv[++*i];
        if (!strcmp(w, "f32")) o->wtype = LCX_NN_WT_F32;
        else if (!strcmp(w, "f16")) o->wtype = LCX_NN_WT_F16;
        else if (!strcmp(w, "bf16")) o->wtype = LCX_NN_WT_BF16;
        else if (!strcmp(w, "q8_0")) o->wtype = LCX_NN_WT_Q8_0;
        else { fprintf(stderr, "longctx %s: --weights is f32, f16, bf16 or q8_0\n", cmd); return -1; }
        return 1;
    }
    if (!strcmp(a, "--gelu") && *i + 1 < argc) {
        const char *g = argv[++*i];
        if (!strcmp(g, "erf")) o->gelu = LCX_NN_GELU_ERF;
        else if (!strcmp(g, "tanh")) o->gelu = LCX_NN_GELU_TANH;
        else { fprintf(stderr, "longctx %s: --gelu is erf or tanh\n", cmd); return -1; }
        return 1;
    }
    return 0;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: longctx embed -m MODEL TEXT... [--json] [-t N] [--weights T] [--gelu F]\n\n%s"
               "\nPrints one vector per text (space-separated), or with --json\n"
               "{\"model\":NAME,\"dim\":D,\"vectors\":[[...],...]}.\n", lcx__cli_nn_flags);
}

int cmd_embed(int argc, char **argv)
{
    lcx_nn_opts o;
    lcx_nn_opts_init(&o);
    const char *model = NULL;
    bool json = false;
    const char **texts = calloc((size_t)argc + 1, sizeof *texts);
    if (!texts) return 1;
    int n = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) { usage(stdout); free(texts); return 0; }
        int r = lcx__cli_nn_parse(argc, argv, &i, "embed", &o, &model, &json);
        if (r < 0) { free(texts); return 2; }
        if (r == 0) texts[n++] = argv[i];
    }
    if (!model || !n) { usage(stderr); free(texts); return 2; }
    lcx_nn_model *m = NULL;
    char err[512];
    int rc = lcx_nn_load(model, &o, &m, err, sizeof err);
    if (rc < 0) { fprintf(stderr, "longctx embed: %s\n", err); free(texts); return 1; }
    const lcx_nn_info *inf = lcx_nn_info_of(m);
    if (inf->is_reranker) {
        fprintf(stderr, "longctx embed: %s is a cross-encoder; use longctx rerank\n", model);
        lcx_nn_free(m);
        free(texts);
        return 1;
    }
    float *v = malloc(sizeof(float) * (size_t)n * inf->dim);
    rc = v ? lcx_nn_embed(m, texts, NULL, n, v) : LCX_ENOMEM;
    if (rc < 0) {
        fprintf(stderr, "longctx embed: %s\n", lcx_strerror(rc));
    } else {
        lcx_buf b = {0};
        if (json) {
            lcx__buf_puts(&b, "{\"model\":");
            lcx__buf_json_str(&b, inf->name, strlen(inf->name));
            lcx__buf_printf(&b, ",\"dim\":%d,\"vectors\":[", inf->dim);
        }
        for (int t = 0; t < n; t++) {
            if (json) lcx__buf_puts(&b, t ? ",[" : "[");
            for (int e = 0; e < inf->dim; e++) {
                if (e) lcx__buf_puts(&b, json ? "," : " ");
                lcx__buf_json_f32(&b, v[(size_t)t * inf->dim + e]);
            }
            lcx__buf_puts(&b, json ? "]" : "\n");
        }
        if (json) lcx__buf_puts(&b, "]}\n");
        fwrite(b.data, 1, b.len, stdout);
        lcx__buf_free(&b);
    }
    free(v);
    free(texts);
    lcx_nn_free(m);
    return rc < 0 ? 1 : 0;
}
