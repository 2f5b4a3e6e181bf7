/* Plain RAG and MultiQ over a chat history (SPEC §4), on the retrieval core's hybrid index.
 *
 * Unit of retrieval: a turn = the request that preceded an assistant reply (its last line,
 * capped) + the reply. Indexing replies alone loses the one place where the user said what
 * the reply is ("write a poem about tapirs"); indexing the whole user message would drag a
 * few-shot preamble into the first turn.
 *
 * Plain: one search with the question, boilerplate removed (lcx_query_clean).
 * MultiQ: the question fanned out into variants — cleaned; keyword-only (content words,
 * instructions and ordinals dropped); structure-only (the request shape "write a F about T"
 * rebuilt from the parsed ordinal request); topic-only — each searched for a deeper list,
 * the union scored by agreement (Σ 1/(60 + rank) over variants, RRF) and reranked by an
 * exact structural check: a turn whose own request parses to the same format and topic as
 * the question gets +1, same topic +0.5, same format +0.25. The boost is what keeps
 * near-duplicates ("tapir conservation") below the real matches; ties keep RRF order.
 * With a neural channel that has a cross-encoder (lcx_recipe_multiq_nn), that final order's
 * best rerank_top turns (request line + reply, RR_DOC_CAP bytes) are reordered by it under
 * the channel's deadline (lcx_nnq_rerank: the store search's rules); they keep the scores
 * in order, so scores stay monotone. */
#define _GNU_SOURCE
#include "longctx/lcx_recipes.h"
#include "util/util.h"
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REQ_CAP 512          /* bytes of a request line kept in a turn document */
/* Bytes of the reply indexed with its request. Measured on generated MRCR (8 needles, n=10
 * per bin, default hybrid search): request + 512-byte head → recall@8 1.0 / 0.6 / 0.3 at
 * 8K / 64K / 1M; + 128-byte head → 1.0 / 0.9 / 0.8; request line alone → 1.0 / 1.0 / 1.0,
 * and 5 ms instead of 120 ms at 1M. The reply text repeats its topic and shares it with
 * every same-topic distractor, so it adds noise, not signal: what tells turns apart is the
 * request. So a turn is indexed as its request line; the reply's head is used only when an
 * assistant message has no request before it. The copy is always the full reply. */
#define REPLY_HEAD 0
#define REPLY_HEAD_ALONE 512
/* Bytes of a turn given to the cross-encoder: a model truncates at its max_seq_len (≤ 512
 * pieces, ~2-3 KB of text) and the tokenizer stops once it has enough, so more is not read */
#define RR_DOC_CAP 4096

size_t lcx_query_clean(const char *q, size_t qlen, char *out, size_t olen)
{
    if (!out || !olen) return 0;
    out[0] = 0;
    if (!q) return 0;
    size_t k = 0;
    size_t i = 0;
    /* drop "prepend X to " */
    for (size_t p = 0; p + 8 <= qlen; p++) {
        if (strncasecmp(q + p, "prepend ", 8)) continue;
        size_t e = p + 8;
        while (e < qlen && !isspace((unsigned char)q[e])) e++;
        while (e < qlen && isspace((unsigned char)q[e])) e++;
        if (e + 3 <= qlen && !strncasecmp(q + e, "to ", 3)) {
            if (p + 1 < olen) { memcpy(out, q, p); k = p; }
            i = e + 3;
        }
        break;
    }
    while (i < qlen && k + 1 < olen) {
        if (q[i] == '(') {                       /* "(1 indexed)" and other parentheticals */
            const char *c = memchr(q + i, ')', qlen - i);
            if (c && c - (q + i) < 40) { i = (size_t)(c - q) + 1; continue; }
        }
        if ((i == 0 || isspace((unsigned char)q[i - 1])) && qlen - i >= 15 &&
            !strncasecmp(q + i, "do not include ", 15)) {
            const char *d = memchr(q + i, '.', qlen - i);
            i = d ? (size_t)(d - q) + 1 : qlen;
            continue;
        }
        out[k++] = q[i++];
    }
    /* collapse whitespace */
    size_t w = 0;
    int sp = 1;
    for (size_t r = 0; r < k; r++) {
        if (isspace((unsigned char)out[r])) { if (!sp) out[w++] = ' '; sp = 1; }
        else { out[w++] = out[r]; sp = 0; }
    }
    while (w && out[w - 1] == ' ') w--;
    out[w] = 0;
    return w;
}

/* keyword-only: alphanumeric words that are not instructions, articles or ordinals */
static size_t keywords_only(const char *q, char *out, size_t olen)
{
    static const char *stop[] = {"the", "a", "an", "to", "of", "about", "me", "give", "i", "you",
                                 "time", "asked", "for", "please", "one", "last", "first", "second",
                                 "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth",
                                 "tenth", "indexed", "and", "in", "your", "response", "text", "other",
                                 "any", "include", "not", "do", "write", "what", "was", "is", "that"};
    size_t k = 0;
    const char *p = q;
    while (*p) {
        while (*p && !isalnum((unsigned char)*p) && !((unsigned char)*p & 0x80)) p++;
        const char *b = p;
        while (*p && (isalnum((unsigned char)*p) || ((unsigned char)*p & 0x80) || *p == '-')) p++;
        size_t n = (size_t)(p - b);
        if (!n) continue;
        int skip = isdigit((unsigned char)b[0]);   /* "2nd" */
        for (size_t s = 0; !skip && s < sizeof stop / sizeof *stop; s++)
            skip = strlen(stop[s]) == n && !strncasecmp(b, stop[s], n);
        if (skip || k + n + 2 > olen) continue;
        if (k) out[k++] = ' ';
        memcpy(out + k, b, n);
        k += n;
    }
    out[k] = 0;
    return k;
}

/* ------------------------------------------------------------------ turn index */

typedef struct {
    lcx_index *ix;
    long *msg_of;        /* doc id → assistant message index */
    long *req_of;        /* doc id → preceding user message index (−1: none) */
    uint32_t n;
} turns_t;

static void turns_free(turns_t *t)
{
    lcx_index_free(t->ix);
    free(t->msg_of);
    free(t->req_of);
    memset(t, 0, sizeof *t);
}

/* last non-empty line of a user message (the request), capped */
static void req_line(const lcx_msg *m, const char **p, size_t *n)
{
    size_t e = m->len;
    while (e && isspace((unsigned char)m->content[e - 1])) e--;
    size_t b = e;
    while (b && m->content[b - 1] != '\n') b--;
    if (e - b > REQ_CAP) e = b + REQ_CAP;
    *p = m->content + b;
    *n = e - b;
}

static lcx_search_opts rag_opts(int k)
{
    lcx_search_opts o = lcx_search_defaults();
    o.top_k = k;
    if (o.prefilter < k) o.prefilter = k;
    return o;
}

static int build_turns(const lcx_embedder *emb, const lcx_msg *msgs, size_t n, turns_t *t)
{
    memset(t, 0, sizeof *t);
    int rc = lcx_index_new(emb, &t->ix);
    if (rc) return rc;
    t->msg_of = malloc((n ? n : 1) * sizeof *t->msg_of);
    t->req_of = malloc((n ? n : 1) * sizeof *t->req_of);
    if (!t->msg_of || !t->req_of) { turns_free(t); return LCX_ENOMEM; }
    char *doc = NULL;
    size_t cap = 0;
    long last_user = -1;
    for (size_t i = 0; i < n; i++) {
        const lcx_msg *m = &msgs[i];
        if (!m->role || !m->content) continue;
        if (!strcmp(m->role, "user")) { last_user = (long)i; continue; }
        if (strcmp(m->role, "assistant")) continue;
        const char *rp = "";
        size_t rn = 0;
        if (last_user >= 0) req_line(&msgs[last_user], &rp, &rn);
        size_t ml = lcx__utf8_cut(m->content, m->len, rn ? REPLY_HEAD : REPLY_HEAD_ALONE);
        size_t need = rn + 1 + ml + 1;
        if (need > cap) {
            char *nd = realloc(doc, need);
            if (!nd) { rc = LCX_ENOMEM; break; }
            doc = nd;
            cap = need;
        }
        memcpy(doc, rp, rn);
        doc[rn] = '\n';
        memcpy(doc + rn + 1, m->content, ml);
        uint32_t id = 0;
        rc = lcx_index_add(t->ix, doc, rn + 1 + ml, NULL, &id);
        if (rc < 0) break;
        rc = 0;
        if (id >= n) { rc = LCX_ESTATE; break; }      /* ids are dense from 0 */
        t->msg_of[id] = (long)i;
        t->req_of[id] = last_user;
        t->n = id + 1;
        last_user = -1;
    }
    free(doc);
    if (rc) turns_free(t);
    return rc;
}

/* the question, when passed as the last message, is not part of the history */
static size_t history_len(const lcx_msg *msgs, size_t n, const char *q, size_t qlen)
{
    if (n && msgs[n - 1].role && !strcmp(msgs[n - 1].role, "user") && msgs[n - 1].len == qlen &&
        msgs[n - 1].content && !memcmp(msgs[n - 1].content, q, qlen))
        return n - 1;
    return n;
}

int lcx_recipe_plain(const lcx_embedder *emb, const lcx_msg *msgs, size_t n, const char *q,
                     size_t qlen, int top_k, long *out_idx, float *out_score)
{
    if (!emb || (!msgs && n) || !q || top_k < 1 || !out_idx) return LCX_EINVAL;
    n = history_len(msgs, n, q, qlen);
    turns_t t;
    int rc = build_turns(emb, msgs, n, &t);
    if (rc) return rc;
    char cq[4096];
    size_t cl = lcx_query_clean(q, qlen, cq, sizeof cq);
    lcx_search_opts o = rag_opts(top_k);
    lcx_hit *h = malloc((size_t)top_k * sizeof *h);
    if (!h) { turns_free(&t); return LCX_ENOMEM; }
    int k = t.n ? lcx_index_search(t.ix, cq, cl, &o, h, top_k) : 0;
    if (k > 0)
        for (int i = 0; i < k; i++) {
            out_idx[i] = h[i].id < t.n ? t.msg_of[h[i].id] : -1;
            if (out_score) out_score[i] = h[i].score;
        }
    free(h);
    turns_free(&t);
    return k;
}

typedef struct { uint32_t id; double s; } cand_t;


static int cmp_cand(const void *a, const void *b)
{
    const cand_t *x = a, *y = b;
    if (x->s != y->s) return x->s > y->s ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

/* the turn of candidate id as the cross-encoder reads it: request line, newline, reply */
static char *turn_text(const turns_t *t, const lcx_msg *msgs, uint32_t id, size_t *len)
{
    const char *rp = "";
    size_t rn = 0;
    if (t->req_of[id] >= 0) req_line(&msgs[t->req_of[id]], &rp, &rn);
    const lcx_msg *m = &msgs[t->msg_of[id]];
    size_t ml = lcx__utf8_cut(m->content, m->len, RR_DOC_CAP > rn + 1 ? RR_DOC_CAP - rn - 1 : 0);
    char *d = malloc(rn + 1 + ml + 1);
    if (!d) return NULL;
    memcpy(d, rp, rn);
    d[rn] = '\n';
    memcpy(d + rn + 1, m->content, ml);
    d[rn + 1 + ml] = 0;
    *len = rn + 1 + ml;
    return d;
}

/* the cross-encoder over the best candidates of c (in final order) */
static int rerank_cands(lcx_nnq *nn, const turns_t *t, const lcx_msg *msgs, const char *q, size_t qlen,
                        cand_t *c, size_t nc, lcx_search_info *info)
{
    int r = nc < 256 ? (int)nc : 256;
    char *docs[256];
    size_t lens[256];
    int order[256];
    int rc = 0, nd = 0;
    for (; nd < r; nd++)
        if (!(docs[nd] = turn_text(t, msgs, c[nd].id, &lens[nd]))) { rc = LCX_ENOMEM; break; }
    if (!rc) rc = lcx_nnq_rerank(nn, q, qlen, (const char *const *)docs, lens, r, order, info);
    if (rc > 0) {
        cand_t tmp[256];
        for (int i = 0; i < r; i++) tmp[i] = c[order[i]], tmp[i].s = c[i].s;
        memcpy(c, tmp, (size_t)r * sizeof *c);
    }
    for (int i = 0; i < nd; i++) free(docs[i]);
    return rc < 0 ? rc : 0;
}

int lcx_recipe_multiq(const lcx_embedder *emb, const lcx_msg *msgs, size_t n, const char *q,
                      size_t qlen, int top_k, long *out_idx, float *out_score)
{
    return lcx_recipe_multiq_nn(emb, NULL, msgs, n, q, qlen, top_k, out_idx, out_score, NULL);
}

int lcx_recipe_multiq_nn(const lcx_embedder *emb, lcx_nnq *nn, const lcx_msg *msgs, size_t n, const char *q,
                         size_t qlen, int top_k, long *out_idx, float *out_score, lcx_search_info *info)
{
    if (info) memset(info, 0, sizeof *info);
    if (!emb || (!msgs && n) || !q || top_k < 1 || !out_idx) return LCX_EINVAL;
    n = history_len(msgs, n, q, qlen);
    turns_t t;
    int rc = build_turns(emb, msgs, n, &t);
    if (rc) return rc;
    if (!t.n) { turns_free(&t); return 0; }

    /* variants */
    char v[4][1024];
    int nv = 0;
    size_t l0 = lcx_query_clean(q, qlen, v[0], sizeof v[0]);
    if (l0) nv++;
    if (keywords_only(v[0], v[nv], sizeof v[nv])) nv++;
    lcx_ordinal_req req;
    int have_req = lcx_ordinal_parse(q, qlen, &req) == 0;
    if (have_req && req.has_topic) {
        if (req.has_format)
            snprintf(v[nv++], sizeof v[0], "write a %s about %s", req.format, req.topic);
        snprintf(v[nv++], sizeof v[0], "%s", req.topic);
    }

    int depth = top_k * 4 < 64 ? 64 : top_k * 4;
    lcx_search_opts o = rag_opts(depth);
    lcx_hit *h = malloc((size_t)depth * sizeof *h);
    double *acc = calloc(t.n, sizeof *acc);
    char *seen = calloc(t.n, 1);
    cand_t *c = malloc((size_t)t.n * sizeof *c);
    if (!h || !acc || !seen || !c) { rc = LCX_ENOMEM; goto out; }
    for (int vi = 0; vi < nv; vi++) {
        int k = lcx_index_search(t.ix, v[vi], strlen(v[vi]), &o, h, depth);
        if (k < 0) { rc = k; goto out; }
        for (int r = 0; r < k; r++) {
            if (h[r].id >= t.n) continue;
            acc[h[r].id] += 1.0 / (60.0 + r + 1);
            seen[h[r].id] = 1;
        }
    }
    size_t nc = 0;
    for (uint32_t id = 0; id < t.n; id++) {
        if (!seen[id]) continue;
        double s = acc[id];
        if (have_req && t.req_of[id] >= 0) {
            /* structural rerank: the turn's own request against the question's */
            char f[128], tp[256];
            const lcx_msg *um = &msgs[t.req_of[id]];
            if (lcx_request_parse(um->content, um->len, f, sizeof f, tp, sizeof tp) == 0) {
                int fm = req.has_format && !strcmp(f, req.format);
                int tm = req.has_topic && !strcmp(tp, req.topic);
                s += fm && tm ? 1.0 : tm ? 0.5 : fm ? 0.25 : 0.0;
            }
        }
        c[nc++] = (cand_t){id, s};
    }
    qsort(c, nc, sizeof *c, cmp_cand);
    if (nn && (rc = rerank_cands(nn, &t, msgs, q, qlen, c, nc, info)) < 0) goto out;
    int k = (int)(nc < (size_t)top_k ? nc : (size_t)top_k);
    for (int i = 0; i < k; i++) {
        out_idx[i] = t.msg_of[c[i].id];
        if (out_score) out_score[i] = (float)c[i].s;
    }
    rc = k;
out:
    free(h); free(acc); free(seen); free(c);
    turns_free(&t);
    return rc;
}
