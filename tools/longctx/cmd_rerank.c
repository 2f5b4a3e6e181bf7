/* longctx rerank -m MODEL QUERY DOC... [--json] — each document's cross-encoder score (the
 * raw logit of [CLS] QUERY [SEP] DOC [SEP], Hugging Face token types; docs/neural.md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cmds.h"
#include "longctx/lcx_neural.h"
#include "util/util.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: longctx rerank -m MODEL QUERY DOC... [--json] [-t N] [--weights T] [--gelu F] [--llama-types]\n\n%s"
               "\nPrints one score per document (raw logit, no sigmoid), or with --json {\"scores\":[...]}.\n",
            lcx__cli_nn_flags);
}

int cmd_rerank(int argc, char **argv)
{
    lcx_nn_opts o;
    lcx_nn_opts_init(&o);
    const char *model = NULL, *query = NULL;
    bool json = false;
    const char **docs = calloc((size_t)argc + 1, sizeof *docs);
    if (!docs) return 1;
    int n = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) { usage(stdout); free(docs); return 0; }
        int r = lcx__cli_nn_parse(argc, argv, &i, "rerank", &o, &model, &json);
        if (r < 0) { free(docs); return 2; }
        if (r == 0) {
            if (!query) query = argv[i];
            else docs[n++] = argv[i];
        }
    }
    if (!model || !query || !n) { usage(stderr); free(docs); return 2; }
    lcx_nn_model *m = NULL;
    char err[512];
    int rc = lcx_nn_load(model, &o, &m, err, sizeof err);
    if (rc < 0) { fprintf(stderr, "longctx rerank: %s\n", err); free(docs); return 1; }
    if (!lcx_nn_info_of(m)->is_reranker) {
        fprintf(stderr, "longctx rerank: %s is an embedder, not a cross-encoder (no classification head)\n", model);
        lcx_nn_free(m);
        free(docs);
        return 1;
    }
    float *s = malloc(sizeof(float) * (size_t)n);
    rc = s ? lcx_nn_rerank(m, query, strlen(query), docs, NULL, n, s) : LCX_ENOMEM;
    if (rc < 0) {
        fprintf(stderr, "longctx rerank: %s\n", lcx_strerror(rc));
    } else {
        lcx_buf b = {0};
        if (json) lcx__buf_puts(&b, "{\"scores\":[");
        for (int i = 0; i < n; i++) {
            if (json && i) lcx__buf_puts(&b, ",");
            lcx__buf_json_f32(&b, s[i]);
            if (!json) lcx__buf_puts(&b, "\n");
        }
        if (json) lcx__buf_puts(&b, "]}\n");
        fwrite(b.data, 1, b.len, stdout);
        lcx__buf_free(&b);
    }
    free(s);
    free(docs);
    lcx_nn_free(m);
    return rc < 0 ? 1 : 0;
}
