/* lcx_nn_embedder_new: a neural model as an lcx_embedder (include/longctx/lcx.h), the seam
 * through which the store and the service use it. lcx_embedder promises thread safety; a
 * model owns one worker pool and scratch arena, so calls are serialised by a mutex (the
 * pool already uses every thread the model was given). Must L2-normalise: a model whose
 * pipeline does not (no sentence-transformers Normalize module) is normalised here. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "longctx/lcx.h"
#include "neural/nn_internal.h"

typedef struct {
    lcx_nn_model *m;
    pthread_mutex_t mu;
} nn_emb;

static int nn_embed(void *self, const char *const *texts, const size_t *lens, int n, float *out)
{
    nn_emb *e = self;
    pthread_mutex_lock(&e->mu);
    int rc = lcx_nn_embed(e->m, texts, lens, n, out);
    pthread_mutex_unlock(&e->mu);
    if (rc < 0 || e->m->info.normalize) return rc;
    const int D = e->m->info.dim;
    for (int i = 0; i < n; i++) {
        double s = 0;
        for (int k = 0; k < D; k++) s += (double)out[(size_t)i * D + k] * out[(size_t)i * D + k];
        const float inv = s > 0 ? (float)(1.0 / sqrt(s)) : 0.0f;
        for (int k = 0; k < D; k++) out[(size_t)i * D + k] *= inv;
    }
    return 0;
}

static void nn_destroy(void *self)
{
    nn_emb *e = self;
    if (!e) return;
    lcx_nn_free(e->m);
    pthread_mutex_destroy(&e->mu);
    free(e);
}

int lcx_nn_fingerprint(lcx_nn_model *m, char *out, size_t cap)
{
    char h[65];
    int rc = lcx_nn_model_hash(m, h);
    if (rc < 0) return rc;
    const lcx_nn_info *inf = &m->info;
    /* everything that changes a vector: the bytes of the model files, and the choices made
     * at load (pooling, GELU form, truncation length, weight conversion) */
    int n = snprintf(out, cap, "bert:%s:d%d:p%d:g%d:s%d:w%d:n%d:%.16s", inf->format, inf->dim, inf->pool, inf->gelu,
                     inf->max_seq_len, inf->wtype, inf->normalize, h);
    return n < 0 || (size_t)n >= cap ? LCX_ELIMIT : 0;
}

int lcx_nn_embedder_new(lcx_nn_model *m, lcx_embedder **out)
{
    if (!m || !out) return LCX_EINVAL;
    *out = NULL;
    if (m->info.is_reranker) { lcx_nn_free(m); return LCX_EINVAL; }
    char fp[128];
    int rc = lcx_nn_fingerprint(m, fp, sizeof fp);
    nn_emb *e = rc == 0 ? calloc(1, sizeof *e) : NULL;
    if (!e) { lcx_nn_free(m); return rc < 0 ? rc : LCX_ENOMEM; }
    e->m = m;
    pthread_mutex_init(&e->mu, NULL);
    static const lcx_embedder_ops ops = {nn_embed, nn_destroy};
    return lcx_embedder_new(&ops, e, m->info.dim, fp, out);
}
