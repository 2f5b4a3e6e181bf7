/* Weight-free reranker: exact-overlap features over the fused candidates.
 *
 * Idea: fusion ranks by two similarity signals that each blur exactness (BM25 rewards
 * repeated common words; the hashed vector has collision noise). A rescue question is
 * usually answered by the one span that contains *all* its rare terms, exactly, often as
 * a phrase. So each candidate is re-scored by:
 *
 *   coverage = Σ w(t) over distinct query terms t present in the doc / Σ w(t)
 *              with w = 3 for numbers, 2 for whole identifiers, 1 for words, 0.5 for
 *              identifier parts (numbers and identifiers are the exact facts that matter),
 *              times the term's BM25 idf when the index supplies it (lcx__rerank_prepare_idf):
 *              with flat weights a chunk holding the question's five common words
 *              ("get the hardware address on unix by running …") out-covered the one
 *              holding its one rare word ("lanscan")
 *   phrase   = fraction of the query's adjacent whole-token pairs (bigrams) that also
 *              occur adjacently in the doc (word order / phrases such as "project nova"),
 *              each pair weighted by its two terms' weights (so, with idf, the rare pair
 *              "cracked guitar" counts for more than "magic number")
 *   r        = 0.75·coverage + 0.25·phrase            (in [0, 1])
 *
 * and the final score is 0.7·fused + 0.3·r (rerank.h). Constants were picked so that r
 * breaks near-ties and lifts a fact span that matches every rare term, but cannot
 * override a large fusion gap on its own.
 *
 * Failure modes: a query made only of stopwords has no features (r is skipped); a
 * paraphrased answer that shares no terms gets r = 0 and keeps only its fused score. */
#include "rerank/rerank.h"
#include "longctx/lcx.h"
#include "text/text.h"
#include "util/util.h"
#include <stdlib.h>
#include <string.h>

#define MAX_QTERMS 64
#define MAX_QBI 64

#define QTAB 256   /* open-addressing sets over the ≤ 64 terms / bigrams (≤ 25% full) */

struct lcx_rerank_query {
    int nt, nb;
    uint64_t term[MAX_QTERMS];
    float w[MAX_QTERMS];
    float wsum;
    uint64_t bi[MAX_QBI];
    float bw[MAX_QBI];    /* bigram weight: its two terms' weights (1 without idf) */
    float bwsum;          /* over distinct bigrams */
    uint8_t ttab[QTAB];   /* term index + 1 */
    uint8_t btab[QTAB];   /* bigram index + 1 */
    /* prefilter: bit (len & 63) / bit (first byte) of every query term. A document token
     * whose length or first byte is not among them cannot be a query term, and no
     * query bigram can contain it (barring 64-bit hash collisions), so it is not hashed */
    uint64_t lenbits;
    uint64_t fbyte[4];
};

static void tab_put(uint8_t *tab, const uint64_t *keys, uint64_t k, int idx)
{
    uint32_t j = (uint32_t)(k >> 40) & (QTAB - 1);
    while (tab[j]) {
        if (keys[tab[j] - 1] == k) return;   /* duplicate key: the first index stays */
        j = (j + 1) & (QTAB - 1);
    }
    tab[j] = (uint8_t)(idx + 1);
}

static int tab_get(const uint8_t *tab, const uint64_t *keys, uint64_t k)
{
    uint32_t j = (uint32_t)(k >> 40) & (QTAB - 1);
    while (tab[j]) {
        if (keys[tab[j] - 1] == k) return tab[j] - 1;
        j = (j + 1) & (QTAB - 1);
    }
    return -1;
}

typedef struct {
    lcx_rerank_query *q;
    uint64_t prev;
    float prevw;
    lcx_rerank_idf_fn idf;
    void *ud;
} qctx;

static uint64_t tok_hash(const char *t, size_t n) { return lcx__hash64(t, n, 0x7e7a4b3c2d1e0f11ull); }
static uint64_t bi_hash(uint64_t a, uint64_t b) { return a * 0x9e3779b97f4a7c15ull ^ (b + (a >> 29)); }

static int on_qtok(const char *t, size_t n, int kind, void *ud)
{
    qctx *c = ud;
    lcx_rerank_query *q = c->q;
    if (kind == LCX_TOK_WORD && (lcx__stopword_inl(t, n) || lcx__query_stopword(t, n))) return 0;
    uint64_t h = tok_hash(t, n);
    q->lenbits |= 1ull << (n & 63);
    if (n) q->fbyte[(unsigned char)t[0] >> 6] |= 1ull << ((unsigned char)t[0] & 63);
    float w = kind == LCX_TOK_NUMBER ? 3.0f : kind == LCX_TOK_IDENT ? 2.0f : kind == LCX_TOK_WORD ? 1.0f : 0.5f;
    if (c->idf) {
        float f = c->idf(t, n, kind, c->ud);
        w *= f > 0 ? f : 0;
    }
    if (kind != LCX_TOK_PART) {
        if (c->prev && q->nb < MAX_QBI) {
            q->bw[q->nb] = c->idf ? c->prevw + w : 1.0f;
            q->bi[q->nb++] = bi_hash(c->prev, h);
        }
        c->prev = h;
        c->prevw = w;
    }
    for (int i = 0; i < q->nt; i++)
        if (q->term[i] == h) return 0;
    if (q->nt >= MAX_QTERMS) return 0;
    q->term[q->nt] = h;
    q->w[q->nt] = w;
    q->wsum += w;
    q->nt++;
    return 0;
}

int lcx__rerank_prepare(const char *q, size_t qlen, lcx_rerank_query **out)
{
    return lcx__rerank_prepare_idf(q, qlen, NULL, NULL, out);
}

int lcx__rerank_prepare_idf(const char *q, size_t qlen, lcx_rerank_idf_fn idf, void *ud, lcx_rerank_query **out)
{
    *out = NULL;
    lcx_rerank_query *rq = calloc(1, sizeof *rq);
    if (!rq) return LCX_ENOMEM;
    qctx c = {rq, 0, 0, idf, ud};
    int rc = lcx_tokenize(q, qlen, on_qtok, &c);
    if (rc < 0 || rq->nt == 0 || !(rq->wsum > 0)) {
        free(rq);
        return rc < 0 ? rc : 0;
    }
    for (int i = 0; i < rq->nt; i++) tab_put(rq->ttab, rq->term, rq->term[i], i);
    for (int i = 0; i < rq->nb; i++) tab_put(rq->btab, rq->bi, rq->bi[i], i);
    for (int i = 0; i < rq->nb; i++)
        if (tab_get(rq->btab, rq->bi, rq->bi[i]) == i) rq->bwsum += rq->bw[i];
    *out = rq;
    return 0;
}

void lcx__rerank_free(lcx_rerank_query *rq) { free(rq); }

#define PROX_TERMS 16   /* proximity pairs among the first 16 query terms */
#define PROX_DIST 5      /* pairs further apart than 5 tokens count nothing */

typedef struct {
    const lcx_rerank_query *q;
    uint64_t seen;        /* bit i: query term i present */
    uint64_t bseen;       /* bit i: query bigram i present */
    uint64_t prev;
    uint32_t pos;         /* position of the current whole token (stopwords not counted) */
    uint32_t last[PROX_TERMS];            /* position + 1 of term i's last occurrence */
    float tp[PROX_TERMS][PROX_TERMS];     /* Σ 1/d² over occurrences of pair (i < j) */
    int prox;             /* proximity wanted */
} dctx;

/* hot: one tokenization per re-scored candidate */
static int on_dtok(const char *t, size_t n, int kind, void *ud)
{
    dctx *c = ud;
    if (kind == LCX_TOK_WORD && lcx__stopword_inl(t, n)) return 0;
    const lcx_rerank_query *q = c->q;
    if (kind != LCX_TOK_PART) c->pos++;
    if (!(q->lenbits >> (n & 63) & 1) || !n || !(q->fbyte[(unsigned char)t[0] >> 6] >> ((unsigned char)t[0] & 63) & 1)) {
        if (kind != LCX_TOK_PART) c->prev = 0;   /* not a query term: no bigram can start here */
        return 0;
    }
    uint64_t h = tok_hash(t, n);
    int i = tab_get(q->ttab, q->term, h);
    if (i >= 0) c->seen |= 1ull << i;
    if (i >= 0 && i < PROX_TERMS && c->prox) {
        for (int j = 0; j < PROX_TERMS && j < q->nt; j++) {
            if (j == i || !c->last[j]) continue;
            uint32_t d = c->pos - (c->last[j] - 1);
            if (d < 1 || d > PROX_DIST) continue;   /* d 0: a part of the same token */
            int a = i < j ? i : j, b = i < j ? j : i;
            c->tp[a][b] += 1.0f / (float)(d * d);
        }
        c->last[i] = c->pos + 1;
    }
    if (kind != LCX_TOK_PART) {
        if (c->prev && q->nb) {
            int j = tab_get(q->btab, q->bi, bi_hash(c->prev, h));
            if (j >= 0) c->bseen |= 1ull << j;
        }
        c->prev = h;
    }
    return 0;
}

float lcx__rerank_score_prox(const lcx_rerank_query *rq, const char *doc, size_t len, float *prox)
{
    if (prox) *prox = 0;
    if (!rq || !doc) return 0;
    dctx c;
    memset(&c, 0, sizeof c);
    c.q = rq;
    c.prox = prox != NULL;
    lcx_tokenize(doc, len, on_dtok, &c);
    if (prox) {
        /* BM25TP (Rasolofo & Savoy 2003): per pair, min of the two weights times a
         * BM25-saturated sum of 1/d² over its occurrences */
        const float k1 = 1.2f;
        float p = 0;
        for (int a = 0; a < PROX_TERMS && a < rq->nt; a++)
            for (int b = a + 1; b < PROX_TERMS && b < rq->nt; b++)
                if (c.tp[a][b] > 0) {
                    float w = rq->w[a] < rq->w[b] ? rq->w[a] : rq->w[b];
                    p += w * (k1 + 1) * c.tp[a][b] / (k1 + c.tp[a][b]);
                }
        *prox = p;
    }
    float cov = 0;
    for (int i = 0; i < rq->nt; i++)
        if (c.seen >> i & 1) cov += rq->w[i];
    cov /= rq->wsum;
    float ph = 0;
    /* duplicate bigrams in the query count once (bseen has the first one's bit) */
    if (rq->nb && rq->bwsum > 0) {
        for (int i = 0; i < rq->nb; i++)
            if (c.bseen >> i & 1) ph += rq->bw[i];
        ph /= rq->bwsum;
    } else if (!rq->nb) ph = cov;   /* one-term query: phrase = coverage */
    return 0.75f * cov + 0.25f * ph;
}
