/* lcx_nn_embed / lcx_nn_rerank: tokenize, build padded batches, run the forward pass.
 * Batches hold up to NN_BATCH_SEQ sequences (the forward packs tokens, so padding costs
 * only the id/mask arrays, never compute). */
#include <stdlib.h>
#include <string.h>

#include "neural/nn_internal.h"

#define NN_BATCH_SEQ 32

typedef struct {
    int32_t *ids, *types;
    uint8_t *mask;
    int *lens;
    int n, S;
} padded;

static int run_batch(lcx_nn_model *m, padded *p, int32_t *const *seqs, int32_t *const *tys, const int *lens, int n,
                     float *pooled, float *scores)
{
    int S = 1;
    for (int i = 0; i < n; i++) S = lens[i] > S ? lens[i] : S;
    p->ids = calloc((size_t)n * S, sizeof *p->ids);
    p->types = calloc((size_t)n * S, sizeof *p->types);
    p->mask = calloc((size_t)n * S, 1);
    int rc = LCX_ENOMEM;
    if (p->ids && p->types && p->mask) {
        for (int i = 0; i < n; i++) {
            for (int k = 0; k < S; k++) p->ids[(size_t)i * S + k] = m->info.pad_id;
            memcpy(p->ids + (size_t)i * S, seqs[i], (size_t)lens[i] * sizeof(int32_t));
            if (tys) memcpy(p->types + (size_t)i * S, tys[i], (size_t)lens[i] * sizeof(int32_t));
            memset(p->mask + (size_t)i * S, 1, (size_t)lens[i]);
        }
        lcx_nn_batch b = {n, S, p->ids, p->types, p->mask};
        rc = lcx_nn_forward(m, &b, pooled, NULL, scores);
    }
    free(p->ids);
    free(p->types);
    free(p->mask);
    return rc;
}

int lcx_nn_embed(lcx_nn_model *m, const char *const *texts, const size_t *lens, int n, float *out)
{
    if (!m || n < 0 || (n && (!texts || !out))) return LCX_EINVAL;
    const int msl = m->info.max_seq_len, D = m->info.dim;
    int32_t *buf = malloc((size_t)NN_BATCH_SEQ * msl * sizeof *buf);
    if (!buf) return LCX_ENOMEM;
    int rc = 0;
    for (int b0 = 0; b0 < n && rc == 0; b0 += NN_BATCH_SEQ) {
        int nb = n - b0 < NN_BATCH_SEQ ? n - b0 : NN_BATCH_SEQ;
        int32_t *seqs[NN_BATCH_SEQ];
        int sl[NN_BATCH_SEQ];
        for (int i = 0; i < nb && rc == 0; i++) {
            const char *t = texts[b0 + i];
            size_t l = lens ? lens[b0 + i] : (t ? strlen(t) : 0);
            seqs[i] = buf + (size_t)i * msl;
            int r = lcx_nn_tokenize(m, t ? t : "", t ? l : 0, seqs[i], msl);
            if (r < 0) rc = r;
            else sl[i] = r;
        }
        if (rc == 0) {
            padded p;
            rc = run_batch(m, &p, seqs, NULL, sl, nb, out + (size_t)b0 * D, NULL);
        }
    }
    free(buf);
    return rc;
}

int lcx_nn_rerank(lcx_nn_model *m, const char *query, size_t qlen, const char *const *docs, const size_t *dlens, int n,
                  float *scores)
{
    if (!m || n < 0 || (n && (!docs || !scores)) || (!query && qlen)) return LCX_EINVAL;
    if (!m->info.is_reranker) return LCX_ENOTSUP;
    const int msl = m->info.max_seq_len;
    int32_t *buf = malloc((size_t)NN_BATCH_SEQ * msl * 2 * sizeof *buf);
    if (!buf) return LCX_ENOMEM;
    int rc = 0;
    for (int b0 = 0; b0 < n && rc == 0; b0 += NN_BATCH_SEQ) {
        int nb = n - b0 < NN_BATCH_SEQ ? n - b0 : NN_BATCH_SEQ;
        int32_t *seqs[NN_BATCH_SEQ], *tys[NN_BATCH_SEQ];
        int sl[NN_BATCH_SEQ];
        for (int i = 0; i < nb && rc == 0; i++) {
            const char *d = docs[b0 + i];
            size_t l = dlens ? dlens[b0 + i] : (d ? strlen(d) : 0);
            seqs[i] = buf + (size_t)i * 2 * msl;
            tys[i] = seqs[i] + msl;
            int r = lcx_nn_tokenize_pair(m, query ? query : "", query ? qlen : 0, d ? d : "", d ? l : 0, seqs[i],
                                         tys[i], msl);
            if (r < 0) rc = r;
            else sl[i] = r;
        }
        if (rc == 0) {
            padded p;
            rc = run_batch(m, &p, seqs, tys, sl, nb, NULL, scores + b0);
        }
    }
    free(buf);
    return rc;
}
