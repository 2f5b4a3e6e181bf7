/* The service's neural models (docs/neural.md "In the product"): --embed-model feeds the
 * stores' background neural channel (lcx_nnq, src/store/nnvec.c), --rerank-model is the
 * cross-encoder the channel calls on the fused top candidates. Loaded once at start (a
 * load error stops the start with the loader's sentence); shared by the rescue sessions
 * and the code scopes of a service, or by one CLI command. Status and metrics lines. */
#include "svc/svc.h"
#include "longctx/lcx_neural.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct lcx_svc_nn {
    lcx_embedder *emb;         /* the embed model as an embedder (owns the model): the worker's */
    lcx_embedder *qemb;        /* a second handle on the same weights, for queries (lcx_nn_share) */
    lcx_nnq *q;
    lcx_nn_model *rr;          /* the reranker */
    pthread_mutex_t rmu;       /* one reranker call at a time (the model owns one pool) */
    char emb_name[160], rr_name[160];
    double rr_ms_sum;          /* reranker time, for the status line (rmu) */
    uint64_t rr_n;
};

static int rerank_cb(void *ud, const char *q, size_t qlen, const char *const *docs, const size_t *lens, int n,
                     float *scores)
{
    lcx_svc_nn *x = ud;
    pthread_mutex_lock(&x->rmu);
    double t0 = lcx__now_ms();
    int rc = lcx_nn_rerank(x->rr, q, qlen, docs, lens, n, scores);
    x->rr_ms_sum += lcx__now_ms() - t0;
    x->rr_n += (uint64_t)n;
    pthread_mutex_unlock(&x->rmu);
    return rc;
}

static int load(const char *path, int threads, bool want_reranker, lcx_nn_model **out, char *msg, size_t ml)
{
    lcx_nn_opts o;
    lcx_nn_opts_init(&o);
    o.n_threads = threads > 0 ? threads : 1;
    char err[512] = "";
    int rc = lcx_nn_load(path, &o, out, err, sizeof err);
    if (rc < 0) {
        snprintf(msg, ml, "%s %s: %s", want_reranker ? "--rerank-model" : "--embed-model", path,
                 err[0] ? err : lcx_strerror(rc));
        return rc;
    }
    if (lcx_nn_info_of(*out)->is_reranker != want_reranker) {
        snprintf(msg, ml, "%s %s: the model is %s, not %s", want_reranker ? "--rerank-model" : "--embed-model", path,
                 want_reranker ? "an embedder" : "a cross-encoder (reranker)",
                 want_reranker ? "a cross-encoder (reranker)" : "an embedder");
        lcx_nn_free(*out);
        *out = NULL;
        return LCX_EINVAL;
    }
    return 0;
}

int lcx_svc_nn_open(const lcx_svc_config *c, lcx_svc_nn **out, char *msg, size_t ml)
{
    *out = NULL;
    if (!c->embed_model[0] && !c->rerank_model[0]) return 0;
    lcx_svc_nn *x = calloc(1, sizeof *x);
    if (!x) { snprintf(msg, ml, "out of memory"); return LCX_ENOMEM; }
    pthread_mutex_init(&x->rmu, NULL);
    int rc = 0;
    lcx_nn_model *em = NULL;
    if (c->rerank_model[0]) {
        rc = load(c->rerank_model, c->nn_threads, true, &x->rr, msg, ml);
        if (!rc) snprintf(x->rr_name, sizeof x->rr_name, "%s", lcx_nn_info_of(x->rr)->name);
    }
    if (!rc && c->embed_model[0]) {
        rc = load(c->embed_model, c->nn_threads, false, &em, msg, ml);
        lcx_nn_model *qm = NULL;
        if (!rc) {
            snprintf(x->emb_name, sizeof x->emb_name, "%s", lcx_nn_info_of(em)->name);
            if ((rc = lcx_nn_share(em, &qm)) < 0) lcx_nn_free(em);
            else if ((rc = lcx_nn_embedder_new(em, &x->emb)) < 0) lcx_nn_free(qm);   /* owns em, also on failure */
            else rc = lcx_nn_embedder_new(qm, &x->qemb);
            if (rc < 0) snprintf(msg, ml, "--embed-model %s: %s", c->embed_model, lcx_strerror(rc));
        }
    }
    /* a reranker without an embed model still runs in the channel (rerank-only: no rows) */
    if (!rc) {
        lcx_nnq_opts qo = {0};
        qo.rerank = x->rr ? rerank_cb : NULL;
        qo.rerank_ud = x;
        qo.query_emb = x->qemb;
        qo.rerank_top = c->rerank_top;
        qo.rerank_deadline_ms = c->rerank_deadline_ms;
        qo.no_worker = !c->embed_model[0];
        if ((rc = lcx_nnq_new(x->emb, &qo, &x->q)) < 0) snprintf(msg, ml, "neural channel: %s", lcx_strerror(rc));
    }
    if (rc) { lcx_svc_nn_close(x); return rc; }
    *out = x;
    return 0;
}

lcx_nnq *lcx_svc_nn_queue(lcx_svc_nn *n) { return n ? n->q : NULL; }

void lcx_svc_nn_close(lcx_svc_nn *x)
{
    if (!x) return;
    lcx_nnq_free(x->q);
    lcx_embedder_free(x->emb);
    lcx_embedder_free(x->qemb);
    lcx_nn_free(x->rr);
    pthread_mutex_destroy(&x->rmu);
    free(x);
}

/* ---- the service's hooks (svc.h) */

int lcx__svc_nn_start(lcx_svc *svc, char *msg, size_t ml)
{
    lcx_svc_nn *x;
    int rc = lcx_svc_nn_open(&svc->cfg, &x, msg, ml);
    if (rc == 0) svc->nn = x;
    return rc;
}

void lcx__svc_nn_stop(lcx_svc *svc)
{
    lcx_svc_nn_close(svc->nn);
    svc->nn = NULL;
}

lcx_nnq *lcx__svc_nn_queue(lcx_svc *svc) { return lcx_svc_nn_queue(svc->nn); }

void lcx__svc_nn_status(lcx_svc *svc, lcx_buf *text, cJSON *json)
{
    lcx_svc_nn *x = svc->nn;
    lcx_nnq_stats st;
    lcx_nnq_get_stats(x ? x->q : NULL, &st);
    const bool has_emb = x && svc->cfg.embed_model[0];
    double rr_ms = 0;
    if (x && x->rr) {
        pthread_mutex_lock(&x->rmu);
        rr_ms = x->rr_n ? x->rr_ms_sum / (double)x->rr_n : 0;
        pthread_mutex_unlock(&x->rmu);
    }
    if (text) {
        if (!has_emb) lcx__buf_puts(text, "[longctx] neural: off (weight-free embedder only)\n");
        else
            lcx__buf_printf(text,
                            "[longctx] neural: %s (%s), backlog %llu, done %llu, %.1f vectors/s, %u stores, %llu errors%s%s\n",
                            x->emb_name, lcx_embedder_fingerprint(x->emb), (unsigned long long)st.backlog,
                            (unsigned long long)st.done, st.rate_per_s, st.stores, (unsigned long long)st.errors,
                            st.last_error[0] ? ", last: " : "", st.last_error);
        if (x && x->rr)
            lcx__buf_printf(text, "[longctx] rerank: %s, top %d, deadline %.0f ms, %llu calls, %llu overruns, %.2f ms/doc\n",
                            x->rr_name, svc->cfg.rerank_top, svc->cfg.rerank_deadline_ms,
                            (unsigned long long)st.rerank_calls, (unsigned long long)st.rerank_overruns, rr_ms);
        return;
    }
    cJSON *n = cJSON_AddObjectToObject(json, "neural");
    if (!n) return;
    cJSON_AddBoolToObject(n, "enabled", has_emb);
    if (has_emb) {
        cJSON_AddStringToObject(n, "model", x->emb_name);
        cJSON_AddStringToObject(n, "fingerprint", lcx_embedder_fingerprint(x->emb));
    }
    cJSON_AddNumberToObject(n, "backlog", (double)st.backlog);
    cJSON_AddNumberToObject(n, "done", (double)st.done);
    cJSON_AddNumberToObject(n, "rate_per_s", st.rate_per_s);
    cJSON_AddNumberToObject(n, "stores", st.stores);
    cJSON_AddNumberToObject(n, "errors", (double)st.errors);
    cJSON_AddStringToObject(n, "last_error", st.last_error);
    cJSON *r = cJSON_AddObjectToObject(json, "rerank");
    if (!r) return;
    cJSON_AddBoolToObject(r, "enabled", x && x->rr);
    if (x && x->rr) {
        cJSON_AddStringToObject(r, "model", x->rr_name);
        cJSON_AddNumberToObject(r, "top", svc->cfg.rerank_top);
        cJSON_AddNumberToObject(r, "deadline_ms", svc->cfg.rerank_deadline_ms);
        cJSON_AddNumberToObject(r, "ms_per_doc", rr_ms);
    }
    cJSON_AddNumberToObject(r, "calls", (double)st.rerank_calls);
    cJSON_AddNumberToObject(r, "overruns", (double)st.rerank_overruns);
}

void lcx__svc_nn_metrics(lcx_svc *svc, lcx_buf *t)
{
    lcx_nnq_stats st;
    lcx_nnq_get_stats(svc->nn ? lcx_svc_nn_queue(svc->nn) : NULL, &st);
    lcx__svc_metric_head(t, "longctx_neural_backlog", "gauge", "Chunks of the stores in RAM still without a neural vector.");
    lcx__buf_printf(t, "longctx_neural_backlog %llu\n", (unsigned long long)st.backlog);
    lcx__svc_metric_head(t, "longctx_neural_vectors_total", "counter", "Neural vectors computed by the background worker.");
    lcx__buf_printf(t, "longctx_neural_vectors_total %llu\n", (unsigned long long)st.done);
    lcx__svc_metric_head(t, "longctx_neural_rate_per_second", "gauge", "Neural vectors per second of embedding time (recent).");
    lcx__buf_printf(t, "longctx_neural_rate_per_second %.3f\n", st.rate_per_s);
    lcx__svc_metric_head(t, "longctx_neural_errors_total", "counter", "Failed background embed calls.");
    lcx__buf_printf(t, "longctx_neural_errors_total %llu\n", (unsigned long long)st.errors);
    lcx__svc_metric_head(t, "longctx_rerank_total", "counter", "Cross-encoder reranks asked for.");
    lcx__buf_printf(t, "longctx_rerank_total %llu\n", (unsigned long long)st.rerank_calls);
    lcx__svc_metric_head(t, "longctx_rerank_overruns_total", "counter", "Reranks past their deadline (fused order kept).");
    lcx__buf_printf(t, "longctx_rerank_overruns_total %llu\n", (unsigned long long)st.rerank_overruns);
}
