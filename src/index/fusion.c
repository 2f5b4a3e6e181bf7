/* Fusion of the dense and BM25 candidate lists, and top-k selection.
 *
 * LINEAR: each component is min-max normalised over the union of the candidates, then
 *   fused = α·dense' + (1−α)·bm25'. Min-max over the *candidates* (not the whole store)
 *   makes the two scales comparable per query: raw BM25 is unbounded and grows with query
 *   length, cosine sits in a narrow band. When a component is constant over the
 *   candidates (e.g. no document matched lexically) it contributes 1 if that constant is
 *   > 0, else 0, so it neither helps nor hurts the ordering.
 * RRF: fused = Σ_lists 1/(60 + rank) (Cormack et al. 2009, k = 60), divided by its
 *   maximum 2/61 so that scores stay in [0, 1] and score_floor means the same for both.
 * SCORE (default): fused = α·max(0, dense) + (1−α)·bm25/max(bm25). The cosine is already
 *   on an absolute [−1, 1] scale, so it is used as is: hashed-vector noise (cosines of
 *   0.05–0.3 between unrelated texts) stays small next to a clear lexical lead, where
 *   min-max would stretch a 0.015..0.19 noise band to the full 0..1 and let it outvote a
 *   BM25 lead of 18 vs 10 (docs/core.md "Fusion", bench/quality). BM25 is divided by its
 *   best candidate (no minimum subtracted), so ratios between lexical scores are kept. */
#include "index/index.h"
#include <immintrin.h>
#include <stdlib.h>
#include <string.h>

#define RRF_K 60.0f

void lcx__fuse(lcx__cand *c, int n, lcx_fusion f, float alpha)
{
    if (n <= 0) return;
    if (f == LCX_FUSE_RRF) {
        for (int i = 0; i < n; i++) {
            float s = 0;
            if (c[i].rank_d > 0) s += 1.0f / (RRF_K + (float)c[i].rank_d);
            if (c[i].rank_b > 0) s += 1.0f / (RRF_K + (float)c[i].rank_b);
            c[i].fused = s / (2.0f / (RRF_K + 1.0f));
        }
        return;
    }
    if (!(alpha >= 0)) alpha = 0;
    if (alpha > 1) alpha = 1;
    if (f == LCX_FUSE_SCORE) {
        float bmax = 0;
        for (int i = 0; i < n; i++)
            if (c[i].bm25 > bmax) bmax = c[i].bm25;
        for (int i = 0; i < n; i++) {
            float d = c[i].dense > 0 ? c[i].dense : 0;
            float b = bmax > 0 ? c[i].bm25 / bmax : 0;
            c[i].fused = alpha * d + (1.0f - alpha) * b;
        }
        return;
    }
    float dmin = c[0].dense, dmax = c[0].dense, bmin = c[0].bm25, bmax = c[0].bm25;
    for (int i = 1; i < n; i++) {
        if (c[i].dense < dmin) dmin = c[i].dense;
        if (c[i].dense > dmax) dmax = c[i].dense;
        if (c[i].bm25 < bmin) bmin = c[i].bm25;
        if (c[i].bm25 > bmax) bmax = c[i].bm25;
    }
    float dr = dmax - dmin, br = bmax - bmin;
    for (int i = 0; i < n; i++) {
        float d = dr > 1e-9f ? (c[i].dense - dmin) / dr : (dmax > 0 ? 1.0f : 0.0f);
        float b = br > 1e-9f ? (c[i].bm25 - bmin) / br : (bmax > 0 ? 1.0f : 0.0f);
        c[i].fused = alpha * d + (1.0f - alpha) * b;
    }
}

static int cand_cmp(const void *a, const void *b)
{
    const lcx__cand *x = a, *y = b;
    if (x->fused != y->fused) return x->fused > y->fused ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

void lcx__cand_sort(lcx__cand *c, int n)
{
    if (n > 1) qsort(c, (size_t)n, sizeof *c, cand_cmp);
}

/* "a is worse than b": lower score, or equal score and higher id */
static inline int worse(float sa, uint32_t ia, float sb, uint32_t ib)
{
    return sa < sb || (sa == sb && ia > ib);
}

/* hot: one pass over every document's dense score per search. A size-k min-heap keyed
 * by (score, -id) keeps the best k; most elements fail the first compare with the root. */
int lcx__topk(const float *scores, uint32_t n, const uint64_t *skip, int k, uint32_t *ids, float *vals)
{
    if (k <= 0) return 0;
    int m = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (m == k) {
            /* heap full: skip blocks of 8 whose scores are all below the root (NaN
             * compares false and is skipped too). Almost every block is skipped. */
            __m256 thr = _mm256_set1_ps(vals[0]);
            while (i + 8 <= n && !_mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(scores + i), thr, _CMP_GE_OQ)))
                i += 8;
            if (i >= n) break;
        }
        float s = scores[i];
        if (m == k && !worse(vals[0], ids[0], s, i)) continue;
        if (skip && (skip[i >> 6] >> (i & 63) & 1)) continue;
        if (s != s) continue;   /* NaN never ranks */
        int j;
        if (m < k) {            /* sift up */
            j = m++;
            while (j > 0) {
                int p = (j - 1) / 2;
                if (!worse(s, i, vals[p], ids[p])) break;
                vals[j] = vals[p]; ids[j] = ids[p];
                j = p;
            }
        } else {                /* replace root, sift down */
            j = 0;
            for (;;) {
                int l = 2 * j + 1, r = l + 1, w = j;
                float ws = s; uint32_t wi = i;
                if (l < m && worse(vals[l], ids[l], ws, wi)) { w = l; ws = vals[l]; wi = ids[l]; }
                if (r < m && worse(vals[r], ids[r], ws, wi)) { w = r; }
                if (w == j) break;
                vals[j] = vals[w]; ids[j] = ids[w];
                j = w;
            }
        }
        vals[j] = s; ids[j] = i;
    }
    /* heap → sorted best first (simple in-place heap sort of the m elements) */
    for (int end = m - 1; end > 0; end--) {
        float ts = vals[0]; uint32_t ti = ids[0];
        vals[0] = vals[end]; ids[0] = ids[end];
        vals[end] = ts; ids[end] = ti;
        int j = 0;
        float s = vals[0]; uint32_t i0 = ids[0];
        for (;;) {
            int l = 2 * j + 1, r = l + 1, w = j;
            float ws = s; uint32_t wi = i0;
            if (l < end && worse(vals[l], ids[l], ws, wi)) { w = l; ws = vals[l]; wi = ids[l]; }
            if (r < end && worse(vals[r], ids[r], ws, wi)) { w = r; }
            if (w == j) break;
            vals[j] = vals[w]; ids[j] = ids[w];
            j = w;
        }
        vals[j] = s; ids[j] = i0;
    }
    return m;
}
