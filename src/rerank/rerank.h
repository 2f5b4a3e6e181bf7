/* Weight-free reranker (internal API; lcx_index_search / lcx_store_search call it when
 * lcx_search_opts.use_rerank is set). See rerank.c for the heuristic. */
#ifndef LCX_RERANK_H
#define LCX_RERANK_H

#include <stddef.h>

typedef struct lcx_rerank_query lcx_rerank_query;

/* Prepares the query's features (tokens, numbers, identifiers, bigrams). *out is NULL
 * (and 0 returned) when the query has no usable features. */
int lcx__rerank_prepare(const char *q, size_t qlen, lcx_rerank_query **out);
/* The same with each distinct term's weight multiplied by idf(t, n, kind, ud) (≥ 0): the
 * index passes its BM25 idf, so common words ("get", "returns", "read") weigh little and a
 * rare exact term a lot in the coverage. */
typedef float (*lcx_rerank_idf_fn)(const char *t, size_t n, int kind, void *ud);
int lcx__rerank_prepare_idf(const char *q, size_t qlen, lcx_rerank_idf_fn idf, void *ud, lcx_rerank_query **out);
void lcx__rerank_free(lcx_rerank_query *rq);
/* Score in [0, 1]: how completely and how exactly the document covers the query; *prox (may
 * be NULL) = term proximity in BM25 units (BM25TP, Rasolofo & Savoy 2003): Σ over pairs of
 * query terms (the first 16) min(w_a, w_b)·(k1+1)·tp/(k1+tp), tp = Σ 1/d² over their
 * occurrences ≤ 5 tokens apart (w = the prepared term weights). */
float lcx__rerank_score_prox(const lcx_rerank_query *rq, const char *doc, size_t len, float *prox);

/* How much of the final score the reranker contributes:
 * final = (1 − LCX_RERANK_WEIGHT)·fused + LCX_RERANK_WEIGHT·rerank. */
#define LCX_RERANK_WEIGHT 0.3f
/* Only the best this-many fused candidates are re-scored (each costs one tokenization). */
#define LCX_RERANK_DEPTH 16

#endif
