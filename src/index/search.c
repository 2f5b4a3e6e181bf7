/* Search: BM25 over the query's terms, the 8-bit dense scan (on up to 4 threads for big
 * indexes) and the exact re-score of its best rows, fusion (fusion.c) and the optional
 * rerank.
 * Locks: none of its own (index.h); searches read only; the store holds rw shared around them. */
#include "index/index.h"
#include "embed/embed.h"
#include "util/util.h"
#include "rerank/rerank.h"
#include "text/text.h"
#include <immintrin.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---------------------------------------------------------------- search */
lcx_search_opts lcx_search_defaults(void)
{
    lcx_search_opts o = {0};
    o.top_k = 8;
    o.alpha = 0.5f;
    o.fusion = LCX_FUSE_SCORE;
    o.prefilter = 32;
    o.score_floor = 0;
    o.use_rerank = true;
    return o;
}

typedef struct {
    uint32_t nq;
    uint32_t id[64];
    float w[64];   /* BM25 weight relative to the term's idf: 1, or LCX__QX_WEIGHT for an expansion */
} qterms;

typedef struct {
    const lcx_index *ix;
    qterms *q;
} qctx;

static int q_tok(const char *t, size_t n, int kind, void *ud)
{
    qctx *c = ud;
    if (kind == LCX_TOK_WORD && (lcx__stopword_inl(t, n) || lcx__query_stopword(t, n))) return 0;
    if (c->q->nq >= 64) return 0;
    uint32_t id = lcx__term_find(c->ix, t, (uint32_t)n, lcx__hash64(t, n, 0), NULL);
    if (id == UINT32_MAX) return 0;
    for (uint32_t i = 0; i < c->q->nq; i++)
        if (c->q->id[i] == id) return 0;
    c->q->w[c->q->nq] = 1;
    c->q->id[c->q->nq++] = id;
    return 0;
}

static void q_add(qterms *q, uint32_t id, float w)
{
    if (q->nq >= 64) return;
    for (uint32_t i = 0; i < q->nq; i++)
        if (q->id[i] == id) return;
    q->w[q->nq] = w;
    q->id[q->nq++] = id;
}

/* Query expansion (lcx_search_opts.expand_query; docs/core.md "Query expansion"): doc prose
 * names what code abbreviates.
 * A query word of ≥ LCX__QX_MIN_WORD letters also looks up every prefix of ≥ 3 bytes the
 * index knows (attribute → attr, listening → listen, creates → create), and the code words
 * that usually stand for it (obtain → get, lcx__code_synonyms), each at LCX__QX_WEIGHT of
 * its own BM25 weight: a bridge, never worth as much as the word itself. */
#define LCX__QX_MIN_WORD 5
#define LCX__QX_MIN_PREFIX 3
#define LCX__QX_WEIGHT 0.5f
static int q_exp(const char *t, size_t n, int kind, void *ud)
{
    qctx *c = ud;
    if (kind != LCX_TOK_WORD || lcx__stopword_inl(t, n) || lcx__query_stopword(t, n)) return 0;
    const char *sy[3];
    int ns = lcx__code_synonyms(t, n, sy);
    for (int i = 0; i < ns; i++) {
        size_t l = strlen(sy[i]);
        uint32_t id = lcx__term_find(c->ix, sy[i], (uint32_t)l, lcx__hash64(sy[i], l, 0), NULL);
        if (id != UINT32_MAX) q_add(c->q, id, LCX__QX_WEIGHT);
    }
    if (n < LCX__QX_MIN_WORD) return 0;
    for (size_t L = LCX__QX_MIN_PREFIX; L < n && L < LCX_TOK_MAX; L++) {
        uint32_t id = lcx__term_find(c->ix, t, (uint32_t)L, lcx__hash64(t, L, 0), NULL);
        if (id != UINT32_MAX) q_add(c->q, id, LCX__QX_WEIGHT);
    }
    return 0;
}

/* The reranker's term weight: the term's BM25 idf (as bm25_accumulate computes it); a
 * term the index does not know can match no document: weight of a term seen once. */
static float rr_idf(const char *t, size_t n, int kind, void *ud)
{
    (void)kind;
    const lcx_index *ix = ud;
    float N = (float)ix->n_live;
    uint32_t id = lcx__term_find(ix, t, (uint32_t)n, lcx__hash64(t, n, 0), NULL);
    float df = id == UINT32_MAX ? 1.0f : (float)lcx__index_df(ix, id);
    float idf = logf(1.0f + (N - df + 0.5f) / (df + 0.5f));
    return idf > 0 ? idf : 0;
}

/* hot: BM25 accumulation over the postings of the query's terms */
static void bm25_accumulate(const lcx_index *ix, const qterms *q, float *acc, uint32_t *touched, uint32_t *nt)
{
    float N = (float)ix->n_live;
    float avgdl = ix->n_live ? (float)((double)ix->sum_dl / ix->n_live) : 1.0f;
    if (avgdl <= 0) avgdl = 1;
    const float k1 = LCX_BM25_K1, b = LCX_BM25_B;
    float kb0 = k1 * (1 - b), kb1 = k1 * b / avgdl;
    uint32_t n_docs = ix->n_docs;
    /* no tombstones (the common case): skip the per-posting bitmap load */
    const int any_del = ix->n_live != n_docs;
    for (uint32_t qi = 0; qi < q->nq; qi++) {
        uint32_t id = q->id[qi];
        float df = (float)lcx__index_df(ix, id);
        float idf = logf(1.0f + (N - df + 0.5f) / (df + 0.5f));
        if (!(idf > 0)) continue;
        float wq = idf * q->w[qi];
        for (int part = 0; part < 2; part++) {
            const uint32_t *pd;
            const uint8_t *pt;
            uint64_t n;
            if (part == 0) {
                if (id >= ix->base.nt) continue;
                uint64_t a = ix->base.poff[id];
                pd = ix->base.pdoc + a;
                pt = ix->base.ptf + a;
                n = ix->base.poff[id + 1] - a;
            } else {
                pd = ix->pl[id].doc;
                pt = ix->pl[id].tf;
                n = ix->pl[id].n;
            }
            for (uint64_t i = 0; i < n; i++) {
                uint32_t d = pd[i];
                if (d >= n_docs) continue;                    /* bounds: never trust mapped data */
                if (any_del && (ix->del[d >> 6] >> (d & 63) & 1)) continue;
                float tf = pt[i];
                float s = wq * tf * (k1 + 1) / (tf + kb0 + kb1 * (float)ix->dl[d]);
                if (acc[d] == 0) touched[(*nt)++] = d;
                acc[d] += s;
            }
        }
    }
}

/* The 8-bit scan over docs [a, b) (base rows, then own rows). */
typedef struct {
    const lcx_index *ix;
    const int8_t *q8;
    int32_t *out;
    uint32_t a, b;
} scan_job;

static void *scan_run(void *p)
{
    scan_job *j = p;
    const lcx_index *ix = j->ix;
    uint32_t bv = ix->base.vn, a = j->a, b = j->b;
    if (a < bv) {
        uint32_t e = b < bv ? b : bv;
        lcx__dot_u8_rows(j->q8, ix->base.vec8 + (size_t)a * ix->dim, e - a, ix->dim, j->out + a);
        a = e;
    }
    if (a < b)
        lcx__dot_u8_rows(j->q8, ix->vec8 + (size_t)(a - bv) * ix->dim, b - a, ix->dim, j->out + a);
    return NULL;
}

/* Large stores are memory-bound in the scan: split it over up to 4 threads (one per
 * 32768 rows, at most the online CPUs), so a 100k-row search uses the machine's memory
 * bandwidth from several cores. Threads are created per search (~20 µs each, small next
 * to a multi-millisecond scan); if creation fails the work is done on this thread. */
#define SCAN_ROWS_PER_THREAD 32768
static void scan_all(const lcx_index *ix, const int8_t *q8, int32_t *out, uint32_t n)
{
    int nt = (int)(n / SCAN_ROWS_PER_THREAD);
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    if (nt > cpus) nt = (int)cpus;
    if (nt > 4) nt = 4;
    if (nt < 2) {
        scan_job j = {ix, q8, out, 0, n};
        scan_run(&j);
        return;
    }
    scan_job jobs[4];
    pthread_t th[4];
    int started[4] = {0};
    for (int t = 0; t < nt; t++)
        jobs[t] = (scan_job){ix, q8, out, (uint32_t)((uint64_t)n * t / nt), (uint32_t)((uint64_t)n * (t + 1) / nt)};
    for (int t = 1; t < nt; t++) started[t] = pthread_create(&th[t], NULL, scan_run, &jobs[t]) == 0;
    scan_run(&jobs[0]);
    for (int t = 1; t < nt; t++) {
        if (started[t]) pthread_join(th[t], NULL);
        else scan_run(&jobs[t]);
    }
}

/* out[i] = s32[i]·sc[i]·qs; out may alias s32 (same slot read before written).
 * hot: once per document per search. */
static void scale_scores(const int32_t *s32, const float *sc, float qs, uint32_t n, float *out)
{
    __m256 q = _mm256_set1_ps(qs);
    uint32_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_cvtepi32_ps(_mm256_loadu_si256((const __m256i *)(s32 + i)));
        _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_mul_ps(v, _mm256_loadu_ps(sc + i)), q));
    }
    for (; i < n; i++) out[i] = (float)s32[i] * sc[i] * qs;
}

void lcx__scratch_free(lcx__scratch *sc)
{
    if (!sc) return;
    free(sc->dense);
    free(sc->acc);
    free(sc->touched);
    free(sc);
}

static int scratch_reserve(lcx__scratch *sc, uint32_t n)
{
    if (n <= sc->cap) return 0;
    uint32_t nc = sc->cap ? sc->cap : 1024;
    while (nc < n) nc = nc > UINT32_MAX / 2 ? n : nc * 2;
    float *d = realloc(sc->dense, (size_t)nc * sizeof *d);
    if (!d) return LCX_ENOMEM;
    sc->dense = d;
    float *a = realloc(sc->acc, (size_t)nc * sizeof *a);
    if (!a) return LCX_ENOMEM;
    memset(a + sc->cap, 0, (size_t)(nc - sc->cap) * sizeof *a);
    sc->acc = a;
    uint32_t *t = realloc(sc->touched, (size_t)nc * sizeof *t);
    if (!t) return LCX_ENOMEM;
    sc->touched = t;
    sc->cap = nc;
    return 0;
}

int lcx__index_search_vec(const lcx_index *ix, const char *q, size_t qlen, const float *qv,
                          const lcx_search_opts *o, lcx_hit *out, int max_out, lcx__scratch *scr)
{
    lcx_search_opts d = o ? *o : lcx_search_defaults();
    if (d.top_k < 1 || max_out < 0 || (max_out && !out)) return LCX_EINVAL;
    int k = d.top_k < max_out ? d.top_k : max_out;
    if (k == 0 || ix->n_live == 0) return 0;
    int pf = d.prefilter > 0 ? d.prefilter : 32;
    if (pf < k) pf = k;
    if (pf > 4096) pf = 4096;
    uint32_t n = ix->n_docs;

    int rc = LCX_ENOMEM, nout = 0;
    lcx__scratch tmp_sc = {0}, *sc = scr ? scr : &tmp_sc;
    uint32_t ntouch = 0;
    float *dense = NULL, *acc = NULL;          /* (n_docs) each, from the scratch */
    uint32_t *touched = NULL;
    uint32_t *ids = malloc((size_t)pf * 2 * sizeof *ids);
    float *vals = malloc((size_t)pf * 2 * sizeof *vals);
    lcx__cand *c = malloc((size_t)pf * 2 * sizeof *c);
    lcx_rerank_query *rq = NULL;
    if (!ids || !vals || !c || scratch_reserve(sc, n)) goto out;
    dense = sc->dense;
    acc = sc->acc;
    touched = sc->touched;

    /* dense, stage 1: 8-bit scan of every row (approximate scores, embed.h) */
    int8_t q8[LCX_DIM_MAX];                                   /* (dim) */
    float qs = lcx__quant_query_i8(qv, ix->dim, q8);
    int32_t *s32 = (int32_t *)dense;                          /* same buffer, converted in place */
    uint32_t bv = ix->base.vn;
    scan_all(ix, q8, s32, n);
    scale_scores(s32, ix->base.vsc, qs, bv, dense);
    scale_scores(s32 + bv, ix->vsc, qs, n - bv, dense + bv);
    int nd = lcx__topk(dense, n, ix->del, pf, ids, vals);
    /* stage 2: exact cosine (f32 query · stored row) for the candidates, ranked by it */
    int nc = 0;
    for (int i = 0; i < nd; i++) {
        float sc;
        const uint8_t *r8 = lcx__index_row(ix, ids[i], &sc);
        float e = lcx__dot_f32_u8(qv, r8, ix->dim) * sc;
        c[nc++] = (lcx__cand){ids[i], e, 0, 0, 0, e};
    }
    lcx__cand_sort(c, nc);
    for (int i = 0; i < nc; i++) c[i].rank_d = i + 1;

    /* lexical */
    qterms qt = {0};
    qctx qc = {ix, &qt};
    if (q && qlen) {
        lcx_tokenize(q, qlen, q_tok, &qc);
        if (d.expand_query) lcx_tokenize(q, qlen, q_exp, &qc);   /* after every exact term: those keep weight 1 */
    }
    uint64_t tot = 0;
    for (uint32_t i = 0; i < qt.nq; i++) tot += lcx__index_df(ix, qt.id[i]);
    if (tot) {
        bm25_accumulate(ix, &qt, acc, touched, &ntouch);
        /* top-pf over the touched docs only */
        float *tv = malloc((size_t)(ntouch ? ntouch : 1) * sizeof *tv);   /* (ntouch) */
        if (!tv) goto out;
        for (uint32_t t = 0; t < ntouch; t++) tv[t] = acc[touched[t]];
        int nb = lcx__topk(tv, ntouch, NULL, pf, ids + pf, vals + pf);
        for (int i = 0; i < nb; i++) ids[pf + i] = touched[ids[pf + i]];
        free(tv);
        /* rank the BM25 list */
        lcx__cand *bc = malloc((size_t)(nb > 0 ? nb : 1) * sizeof *bc);
        if (!bc) goto out;
        for (int i = 0; i < nb; i++) bc[i] = (lcx__cand){ids[pf + i], 0, vals[pf + i], 0, 0, vals[pf + i]};
        lcx__cand_sort(bc, nb);
        for (int i = 0; i < nb; i++) {
            int j = 0;
            while (j < nc && c[j].id != bc[i].id) j++;
            if (j == nc) {
                float sc;
                const uint8_t *r8 = lcx__index_row(ix, bc[i].id, &sc);
                c[nc++] = (lcx__cand){bc[i].id, lcx__dot_f32_u8(qv, r8, ix->dim) * sc, 0, 0, 0, 0};
            }
            c[j].rank_b = i + 1;
        }
        free(bc);
    }
    for (int i = 0; i < nc; i++) c[i].bm25 = acc[c[i].id];

    lcx__fuse(c, nc, d.fusion, d.alpha);
    lcx__cand_sort(c, nc);
    if (d.use_rerank) {
        if ((rc = lcx__rerank_prepare_idf(q ? q : "", q ? qlen : 0, rr_idf, (void *)ix, &rq)) < 0) goto out;
        if (rq) {
            /* one tokenization per re-scored candidate gives the overlap features and the
             * term proximity; with SCORE fusion the proximity joins the candidate's BM25
             * (BM25TP) and the fusion is redone before the overlap score is mixed in */
            float rr[LCX_RERANK_DEPTH], raw[LCX_RERANK_DEPTH];
            int depth = nc < LCX_RERANK_DEPTH ? nc : LCX_RERANK_DEPTH, any = 0;
            int tp = d.fusion == LCX_FUSE_SCORE;
            for (int i = 0; i < depth; i++) {
                float px = 0;
                rr[i] = lcx__rerank_score_prox(rq, ix->text[c[i].id], ix->text_len[c[i].id], tp ? &px : NULL);
                raw[i] = c[i].bm25;
                if (px > 0 && c[i].bm25 > 0) { c[i].bm25 += px; any = 1; }
            }
            if (any) {
                lcx__fuse(c, nc, d.fusion, d.alpha);
                for (int i = 0; i < depth; i++) c[i].bm25 = raw[i];   /* hits report the raw BM25 */
            }
            for (int i = 0; i < nc; i++)
                c[i].fused = (1 - LCX_RERANK_WEIGHT) * c[i].fused + LCX_RERANK_WEIGHT * (i < depth ? rr[i] : 0);
            lcx__cand_sort(c, nc);
        }
    }
    for (int i = 0; i < nc && nout < k; i++) {
        if (c[i].fused < d.score_floor) break;
        out[nout++] = (lcx_hit){c[i].id, c[i].fused, c[i].dense, c[i].bm25};
    }
    rc = nout;
out:
    lcx__rerank_free(rq);
    if (acc)
        for (uint32_t t = 0; t < ntouch; t++) acc[touched[t]] = 0;   /* keep the invariant */
    if (!scr) {
        free(tmp_sc.dense);
        free(tmp_sc.acc);
        free(tmp_sc.touched);
    }
    free(ids);
    free(vals);
    free(c);
    return rc;
}

int lcx_index_search(const lcx_index *ix, const char *q, size_t qlen, const lcx_search_opts *o,
                     lcx_hit *out, int max_out)
{
    if (!ix || (!q && qlen)) return LCX_EINVAL;
    float *qv = malloc((size_t)ix->dim * sizeof *qv);
    if (!qv) return LCX_ENOMEM;
    const char *t = q ? q : "";
    int rc = lcx_embed(ix->emb, &t, &qlen, 1, qv);
    if (rc >= 0) rc = lcx__index_search_vec(ix, q, qlen, qv, o, out, max_out, NULL);
    free(qv);
    return rc;
}

