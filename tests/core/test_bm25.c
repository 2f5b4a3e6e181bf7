/* BM25 index: scores against a naive reference implementation of the formula (written
 * independently here over the tokenizer's output), incremental appends equal a one-shot
 * build, and tombstones. */
#include "testutil.h"
#include "index/index.h"
#include "text/text.h"
#include "embed/embed.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ND 400
static char docs[ND][256];
static lcx_embedder *emb;

static uint64_t rs = 42;
static uint32_t rnd(void) { rs ^= rs << 13; rs ^= rs >> 7; rs ^= rs << 17; return (uint32_t)(rs >> 11); }

static const char *VOC[] = {"apple", "banana", "cherry", "delta", "echo", "quarterly", "review", "records",
                            "parseHeader", "MAX_LEN", "481729", "nova", "project", "access", "code", "the",
                            "of", "and", "src/a.c", "2024-01-15"};

typedef struct { char t[64][130]; int n; int tf[64]; int dl; } bag;

static int bag_tok(const char *t, size_t n, int kind, void *ud)
{
    bag *b = ud;
    if (kind == LCX_TOK_WORD && lcx__stopword(t, n)) return 0;
    b->dl++;
    for (int i = 0; i < b->n; i++)
        if (strlen(b->t[i]) == n && !memcmp(b->t[i], t, n)) { b->tf[i]++; return 0; }
    if (b->n < 64) { memcpy(b->t[b->n], t, n); b->t[b->n][n] = 0; b->tf[b->n++] = 1; }
    return 0;
}

static bag bags[ND];
static int deleted[ND];

static double ref_score(int d, const char *q, int n_docs)
{
    bag qb = {0};
    lcx_tokenize(q, strlen(q), bag_tok, &qb);
    double N = 0, sdl = 0;
    for (int i = 0; i < n_docs; i++) if (!deleted[i]) { N++; sdl += bags[i].dl; }
    double avgdl = sdl / N, s = 0;
    for (int k = 0; k < qb.n; k++) {
        int df = 0, tf = 0;
        for (int i = 0; i < n_docs; i++)
            for (int j = 0; j < bags[i].n; j++)
                if (!strcmp(bags[i].t[j], qb.t[k])) { df++; if (i == d) tf = bags[i].tf[j]; }
        if (!df || !tf) continue;
        double idf = log(1 + (N - df + 0.5) / (df + 0.5));
        s += idf * tf * 2.2 / (tf + 1.2 * (1 - 0.75 + 0.75 * bags[d].dl / avgdl));
    }
    return s;
}

static void build(void)
{
    for (int i = 0; i < ND; i++) {
        int len = 0, words = 3 + (int)(rnd() % 12);
        for (int w = 0; w < words; w++)
            len += snprintf(docs[i] + len, sizeof docs[i] - (size_t)len, "%s ", VOC[rnd() % 20]);
        memset(&bags[i], 0, sizeof bags[i]);
        lcx_tokenize(docs[i], strlen(docs[i]), bag_tok, &bags[i]);
    }
}

static void check_query(lcx_index *ix, const char *q, int n_docs)
{
    lcx_search_opts o = lcx_search_defaults();
    o.alpha = 0;
    o.use_rerank = false;
    o.prefilter = 4096;
    o.top_k = 64;
    lcx_hit h[64];
    int n = lcx_index_search(ix, q, strlen(q), &o, h, 64);
    assert_true(n > 0);
    double prev = 1e30;
    for (int i = 0; i < n; i++) {
        double r = ref_score((int)h[i].id, q, n_docs);
        assert_false(deleted[h[i].id]);
        if (fabs(r - h[i].bm25) > 1e-4 * (1 + r)) fail_msg("q=%s doc %u: bm25 %g, reference %g", q, h[i].id, h[i].bm25, r);
        assert_true(r <= prev + 1e-5);
        prev = r;
    }
    /* the best reference doc is the first hit */
    double best = -1;
    for (int d = 0; d < n_docs; d++)
        if (!deleted[d]) { double r = ref_score(d, q, n_docs); if (r > best + 1e-6) best = r; }
    assert_true(fabs(best - h[0].bm25) < 1e-4 * (1 + best));
}

static void test_reference_and_incremental(void **st)
{
    (void)st;
    build();
    lcx_index *a, *b;
    assert_int_equal(lcx_index_new(emb, &a), 0);
    assert_int_equal(lcx_index_new(emb, &b), 0);
    for (int i = 0; i < ND; i++) {
        uint32_t id;
        assert_int_equal(lcx_index_add(a, docs[i], strlen(docs[i]), NULL, &id), 0);
        assert_int_equal(id, (uint32_t)i);
    }
    for (int i = 0; i < ND / 2; i++) assert_int_equal(lcx_index_add(b, docs[i], strlen(docs[i]), NULL, NULL), 0);
    check_query(b, "nova access code", ND / 2);           /* search mid-way, then keep appending */
    for (int i = ND / 2; i < ND; i++) assert_int_equal(lcx_index_add(b, docs[i], strlen(docs[i]), NULL, NULL), 0);
    const char *qs[] = {"nova access code", "parseHeader", "header", "481729 project", "quarterly review records",
                        "2024-01-15", "src/a.c cherry"};
    for (size_t k = 0; k < sizeof qs / sizeof *qs; k++) {
        check_query(a, qs[k], ND);
        lcx_search_opts o = lcx_search_defaults();
        lcx_hit ha[8], hb[8];
        int na = lcx_index_search(a, qs[k], strlen(qs[k]), &o, ha, 8);
        int nb = lcx_index_search(b, qs[k], strlen(qs[k]), &o, hb, 8);
        assert_int_equal(na, nb);
        for (int i = 0; i < na; i++) {
            assert_int_equal(ha[i].id, hb[i].id);
            assert_true(ha[i].score == hb[i].score);
        }
    }
    /* tombstones */
    for (int i = 0; i < ND; i += 3) {
        deleted[i] = 1;
        assert_int_equal(lcx_index_remove(a, (uint32_t)i), 0);
    }
    assert_int_equal(lcx_index_remove(a, 0), 0);            /* twice: no-op */
    assert_int_equal(lcx_index_remove(a, ND + 5), LCX_ENOTFOUND);
    assert_int_equal(lcx_index_count(a), ND - (ND + 2) / 3);
    for (size_t k = 0; k < sizeof qs / sizeof *qs; k++) check_query(a, qs[k], ND);
    memset(deleted, 0, sizeof deleted);
    lcx_index_free(a);
    lcx_index_free(b);
}

static void test_postings_and_options(void **st)
{
    (void)st;
    lcx_index *ix;
    assert_int_equal(lcx_index_new(emb, &ix), 0);
    lcx_search_opts o = lcx_search_defaults();
    lcx_hit h[4];
    assert_int_equal(lcx_index_search(ix, "x", 1, &o, h, 4), 0);   /* empty index */
    const char *d[] = {"alpha beta beta", "beta gamma", "alpha alpha alpha delta", "the of and"};
    for (int i = 0; i < 4; i++) assert_int_equal(lcx_index_add(ix, d[i], strlen(d[i]), NULL, NULL), 0);
    uint32_t docs_[8];
    uint8_t tf[8];
    uint32_t beta = UINT32_MAX;
    for (uint32_t t = 0; t < ix->n_terms; t++) {
        uint32_t len;
        const char *s = lcx__index_term(ix, t, &len);
        if (len == 4 && !memcmp(s, "beta", 4)) beta = t;
    }
    assert_true(beta != UINT32_MAX);
    assert_int_equal(lcx__index_postings(ix, beta, docs_, tf, 8), 2);
    assert_int_equal(docs_[0], 0);
    assert_int_equal(tf[0], 2);
    assert_int_equal(docs_[1], 1);
    assert_int_equal(tf[1], 1);
    assert_int_equal(ix->dl[3], 0);   /* stopwords only */
    /* top_k, max_out, floor */
    o.top_k = 2;
    assert_int_equal(lcx_index_search(ix, "alpha beta", 10, &o, h, 4), 2);
    o.top_k = 4;
    assert_int_equal(lcx_index_search(ix, "alpha beta", 10, &o, h, 1), 1);
    o.score_floor = 1.01f;
    assert_int_equal(lcx_index_search(ix, "alpha beta", 10, &o, h, 4), 0);
    o.top_k = 0;
    assert_int_equal(lcx_index_search(ix, "alpha", 5, &o, h, 4), LCX_EINVAL);
    o = lcx_search_defaults();
    int n = lcx_index_search(ix, "alpha", 5, &o, h, 4);
    assert_true(n >= 2);
    assert_int_equal(h[0].id, 2);     /* tf 3 */
    for (int i = 0; i < n; i++) assert_true(h[i].score >= 0 && h[i].score <= 1);
    lcx_index_free(ix);
}

/* lcx__index_commit_keys (per-worker sorted key runs merged with the new terms' keys)
 * builds exactly what one lcx_index_add per document builds: same term ids, same
 * postings in the same order, same lengths, rows and search results. Batches of 1, 7,
 * 300 (the threaded path), and the rest, with a vocabulary that keeps growing. */
static void test_commit_keys_equals_commit(void **st)
{
    (void)st;
    enum { N = 700 };
    static char tx[N][400];
    for (int i = 0; i < N; i++) {
        int len = snprintf(tx[i], sizeof tx[i], "%s ", docs[i % ND]);
        int words = 10 + (int)(rnd() % 40);
        for (int w = 0; w < words; w++)   /* Zipf-ish: many repeats, a long tail of new terms */
            len += snprintf(tx[i] + len, sizeof tx[i] - (size_t)len, "w%u ", rnd() % (1u + rnd() % 5000));
    }
    lcx_index *a, *ck;
    assert_int_equal(lcx_index_new(emb, &a), 0);
    assert_int_equal(lcx_index_new(emb, &ck), 0);
    for (int i = 0; i < N; i++) assert_int_equal(lcx_index_add(a, tx[i], strlen(tx[i]), NULL, NULL), 0);
    const int sizes[] = {1, 7, 300, N - 308};
    int at = 0;
    lcx__prep p = {0};
    for (int k = 0; k < 4; k++) {
        int n = sizes[k];
        const char **tp = calloc((size_t)n, sizeof *tp);
        uint32_t *tl = calloc((size_t)n, sizeof *tl);
        uint8_t *rows = malloc((size_t)n * 256);
        float *sc = malloc((size_t)n * sizeof *sc), v[256];
        for (int i = 0; i < n; i++) {
            tp[i] = tx[at + i];
            tl[i] = (uint32_t)strlen(tx[at + i]);
            assert_int_equal(lcx__prep_embed(&p, emb, tp[i], tl[i], v), 0);
            lcx__quant_row_u8(v, 256, rows + (size_t)i * 256, &sc[i]);
        }
        /* the documents as 3 "worker" runs of keys */
        lcx__doc_terms **dk = calloc((size_t)n, sizeof *dk);
        lcx__post_keys runs[3] = {{0}};
        for (int r = 0; r < 3; r++) {
            int lo = n * r / 3, hi = n * (r + 1) / 3;
            for (int i = lo; i < hi; i++) {
                assert_int_equal(lcx__prep_text(&p, tp[i], tl[i]), 0);
                assert_int_equal(lcx__prep_finish(&p, &dk[i]), 0);
                if (i % 3) lcx__index_resolve(ck, dk[i]);   /* known and unknown terms mixed */
                assert_int_equal(lcx__post_keys_add(&runs[r], dk[i], (uint32_t)i), 0);
            }
            lcx__post_keys_sort(&runs[r]);
        }
        uint32_t first = 99;
        assert_int_equal(lcx__index_commit_keys(ck, (uint32_t)n, tp, tl, 1, rows, sc, dk, runs, 3, &first), 0);
        assert_int_equal(first, (uint32_t)at);
        for (int r = 0; r < 3; r++) lcx__post_keys_free(&runs[r]);
        for (int i = 0; i < n; i++) free(dk[i]);
        free(dk);
        free(tp);
        free(tl);
        free(rows);
        free(sc);
        at += n;
    }
    lcx__prep_free(&p);
    assert_int_equal(at, N);
    assert_int_equal(a->n_docs, ck->n_docs);
    assert_int_equal(a->n_terms, ck->n_terms);
    assert_true(a->sum_dl == ck->sum_dl);
    static uint32_t da[N], db[N];
    static uint8_t fa[N], fb[N];
    assert_int_equal(ck->n_docs, (uint32_t)N);
    for (uint32_t id = 0; id < a->n_terms; id++) {
        uint32_t la, lb;
        const char *sa = lcx__index_term(a, id, &la), *sb = lcx__index_term(ck, id, &lb);
        assert_int_equal(la, lb);
        assert_memory_equal(sa, sb, la);
        size_t na = lcx__index_postings(a, id, da, fa, N), nb = lcx__index_postings(ck, id, db, fb, N);
        assert_int_equal(na, nb);
        assert_memory_equal(da, db, na * sizeof *da);
        assert_memory_equal(fa, fb, na);
    }
    for (uint32_t d = 0; d < (uint32_t)N; d++) {
        float s1, s2;
        const uint8_t *r1 = lcx__index_row(a, d, &s1), *r2 = lcx__index_row(ck, d, &s2);
        assert_memory_equal(r1, r2, 256);
        assert_true(s1 == s2);
        assert_int_equal(a->dl[d], ck->dl[d]);
        assert_int_equal(a->text_len[d], ck->text_len[d]);
        assert_memory_equal(a->text[d], ck->text[d], a->text_len[d] + 1);
    }
    lcx_search_opts o = lcx_search_defaults();
    for (int q = 0; q < 20; q++) {
        char qs[64];
        snprintf(qs, sizeof qs, "w%u w%u %s", rnd() % 300, rnd() % 3000, VOC[q]);
        lcx_hit h1[8], h2[8];
        int n1 = lcx_index_search(a, qs, strlen(qs), &o, h1, 8), n2 = lcx_index_search(ck, qs, strlen(qs), &o, h2, 8);
        assert_int_equal(n1, n2);
        assert_memory_equal(h1, h2, (size_t)n1 * sizeof *h1);
    }
    lcx_index_free(a);
    lcx_index_free(ck);
}


/* Posting storage (slab blocks by capacity class, malloc'd blocks past 4096 postings, huge
 * slab chunks past 4 MiB) against a reference built here, and the workers' cached term-id
 * resolve against the plain one. Terms are letter-only words ("zq" + base-26 digits: one
 * WORD token each, never a stopword), Zipf-ish so that list sizes span every class. */
static int zq_term(char *out, uint32_t k)
{
    int n = 0;
    out[n++] = 'z';
    out[n++] = 'q';
    do {
        out[n++] = (char)('a' + k % 26);
        k /= 26;
    } while (k);
    out[n++] = ' ';
    return n;
}

static void test_posting_blocks_and_resolve_cache(void **st)
{
    (void)st;
    enum { NDOC = 4200, PER = 300, NT = 60000 };
    uint32_t *tk = malloc((size_t)NDOC * PER * sizeof *tk);   /* (NDOC, PER) term numbers */
    char *tx = malloc((size_t)PER * 16 + 16);
    uint32_t *cnt = calloc(NT, sizeof *cnt);                  /* reference df */
    assert_non_null(tk);
    assert_non_null(tx);
    assert_non_null(cnt);
    lcx_index *ix;
    assert_int_equal(lcx_index_new(emb, &ix), 0);
    for (uint32_t d = 0; d < NDOC; d++) {
        int len = 0;
        for (int w = 0; w < PER; w++) {
            uint32_t k = w == 0 ? 0 : rnd() % (1u + rnd() % NT);   /* term 0 in every doc: > 4096 postings */
            tk[(size_t)d * PER + w] = k;
            len += zq_term(tx + len, k);
        }
        assert_int_equal(lcx_index_add(ix, tx, (size_t)len, NULL, NULL), 0);
    }
    /* reference: df and, per term, that docs come out increasing with the right tf */
    uint32_t *seen = malloc(NT * sizeof *seen);
    for (uint32_t k = 0; k < NT; k++) seen[k] = UINT32_MAX;
    for (uint32_t d = 0; d < NDOC; d++)
        for (int w = 0; w < PER; w++) {
            uint32_t k = tk[(size_t)d * PER + w];
            if (seen[k] != d) cnt[k]++;
            seen[k] = d;
        }
    static uint32_t pd[NDOC];
    static uint8_t pt[NDOC];
    uint32_t checked = 0, big = 0;
    for (uint32_t id = 0; id < ix->n_terms; id++) {
        uint32_t l;
        const char *t = lcx__index_term(ix, id, &l);
        assert_true(l >= 3 && t[0] == 'z' && t[1] == 'q');
        uint32_t k = 0, m = 1;
        for (uint32_t i = 2; i < l; i++, m *= 26) k += (uint32_t)(t[i] - 'a') * m;
        assert_true(k < NT);
        size_t n = lcx__index_postings(ix, id, pd, pt, NDOC);
        assert_int_equal(n, cnt[k]);
        assert_int_equal(lcx__index_df(ix, id), cnt[k]);
        for (size_t i = 0; i < n; i++) {
            uint32_t d = pd[i], tf = 0;
            assert_true(d < NDOC && (i == 0 || d > pd[i - 1]));
            if (id % 8 && k) continue;   /* tf by a scan of the doc: for every 8th term (time) */
            for (int w = 0; w < PER; w++) tf += tk[(size_t)d * PER + w] == k;
            assert_int_equal(pt[i], tf > 255 ? 255 : tf);
        }
        checked++;
        big += n > 4096;
    }
    assert_true(checked > 20000);
    assert_int_equal(big, 1);
    assert_true(ix->palloc[0].total + ix->palloc[1].total > (8u << 20));   /* huge chunks were used */

    /* cached resolve == plain resolve: new documents mixing known and unknown terms, one
     * cache warmed over many documents, and emptied by a reset part way */
    lcx__prep p = {0};
    lcx__post_keys k = {0};
    uint32_t hits_known = 0, unknown = 0;
    for (int d = 0; d < 300; d++) {
        int len = 0;
        for (int w = 0; w < 120; w++) len += zq_term(tx + len, rnd() % (1u + rnd() % (NT + 20000)));
        if (d == 150) lcx__post_keys_reset(&k);
        lcx__doc_terms *a, *b;
        assert_int_equal(lcx__prep_text(&p, tx, (size_t)len), 0);
        assert_int_equal(lcx__prep_finish(&p, &a), 0);
        assert_int_equal(lcx__prep_finish(&p, &b), 0);
        lcx__index_resolve(ix, a);
        lcx__index_resolve_cached(ix, b, &k);
        assert_int_equal(a->nt, b->nt);
        for (uint32_t i = 0; i < a->nt; i++) {
            assert_int_equal(a->t[i].tid, b->t[i].tid);
            if (a->t[i].tid == UINT32_MAX) unknown++;
            else hits_known++;
        }
        free(a);
        free(b);
    }
    assert_true(unknown > 100 && hits_known > 1000);
    lcx__post_keys_free(&k);
    lcx__prep_free(&p);
    lcx_index_free(ix);
    free(seen);
    free(cnt);
    free(tx);
    free(tk);
}

/* n texts of 30 zq terms, term k skewed towards small k (< vocab): some terms in many
 * documents, most in few */
static void zq_texts(char (*tx)[300], int n, uint32_t vocab)
{
    for (int i = 0; i < n; i++) {
        int len = 0;
        for (int w = 0; w < 30; w++) len += zq_term(tx[i] + len, rnd() % (1u + rnd() % vocab));
    }
}

/* Batch document i from text t, as an ingest worker prepares it: its doc_terms (*dk, to
 * free), 8-bit row and scale. */
static void prep_doc(lcx__prep *p, const char *t, uint32_t tl, lcx__doc_terms **dk, uint8_t *rows, float *sc, int i)
{
    float v[256];
    assert_int_equal(lcx__prep_embed(p, emb, t, tl, v), 0);
    assert_int_equal(lcx__prep_finish(p, dk), 0);
    lcx__quant_row_u8(v, 256, rows + (size_t)i * 256, &sc[i]);
}

/* A publish that failed after appending postings (simulated: the batch's postings are in,
 * its documents rolled back) is retried: post_run must skip what is already there (it
 * reads list tails only after a failure, flagged by post_failed), so the lists equal a
 * single clean commit. Without the flag the retry would append every posting twice. */
static void test_retried_commit_keys(void **st)
{
    (void)st;
    enum { N = 200 };
    static char tx[N][300];
    zq_texts(tx, N, 3000);
    lcx_index *ref, *ix;
    assert_int_equal(lcx_index_new(emb, &ref), 0);
    assert_int_equal(lcx_index_new(emb, &ix), 0);
    ix->post_threads = 2;   /* the split appends (both halves skip what a failed commit left) */
    lcx__prep p = {0};
    const char *tp[N];
    uint32_t tl[N];
    static uint8_t rows[N * 256];
    float sc[N];
    for (int pass = 0; pass < 3; pass++) {   /* 0: reference, 1: commit then roll back, 2: retry */
        lcx_index *x = pass ? ix : ref;
        lcx__doc_terms *dk[N];
        lcx__post_keys run = {0};
        for (int i = 0; i < N; i++) {
            tp[i] = tx[i];
            tl[i] = (uint32_t)strlen(tx[i]);
            prep_doc(&p, tp[i], tl[i], &dk[i], rows, sc, i);
            if (i % 2) lcx__index_resolve(x, dk[i]);
            assert_int_equal(lcx__post_keys_add(&run, dk[i], (uint32_t)i), 0);
        }
        lcx__post_keys_sort(&run);
        uint32_t first = 99;
        assert_int_equal(lcx__index_commit_keys(x, N, tp, tl, 1, rows, sc, dk, &run, 1, &first), 0);
        assert_int_equal(first, 0);
        if (pass == 1) {   /* the documents were "not published": postings stay behind */
            x->n_docs = x->n_live = 0;
            x->sum_dl = 0;
            x->post_failed = 1;
        }
        lcx__post_keys_free(&run);
        for (int i = 0; i < N; i++) free(dk[i]);
    }
    lcx__prep_free(&p);
    assert_int_equal(ix->n_docs, N);
    assert_int_equal(ix->n_terms, ref->n_terms);
    assert_true(ix->sum_dl == ref->sum_dl);
    static uint32_t da[N], db[N];
    static uint8_t fa[N], fb[N];
    for (uint32_t id = 0; id < ref->n_terms; id++) {
        size_t na = lcx__index_postings(ref, id, da, fa, N), nb = lcx__index_postings(ix, id, db, fb, N);
        assert_int_equal(na, nb);
        assert_memory_equal(da, db, na * sizeof *da);
        assert_memory_equal(fa, fb, na);
    }
    lcx_index_free(ref);
    lcx_index_free(ix);
}

/* Runs that interleave documents (ingest workers take groups of a batch from a shared
 * cursor): commit_keys must give the same lists as one run in document order — including
 * the keys of terms unknown to the index, which each run lists in its own document order.
 * R = 2 takes the two-run merge (merge_two_plus), R = 3 the general one. */
static void commit_keys_interleaved(int R, int post_threads)
{
    enum { N = 300, G = 7, RMAX = 3 };
    static char tx[N][300];
    zq_texts(tx, N, 2000);
    lcx_index *ref, *ix;
    assert_int_equal(lcx_index_new(emb, &ref), 0);
    assert_int_equal(lcx_index_new(emb, &ix), 0);
    ix->post_threads = post_threads;
    lcx__prep p = {0};
    const char *tp[N];
    uint32_t tl[N];
    static uint8_t rows[N * 256];
    float sc[N];
    for (int pass = 0; pass < 2; pass++) {   /* 0: one run, 1: R runs taking groups of G in turn */
        lcx_index *x = pass ? ix : ref;
        for (int half = 0; half < 2; half++) {   /* the second commit finds half its terms known */
            lcx__doc_terms *dk[N];
            lcx__post_keys run[RMAX];
            memset(run, 0, sizeof run);
            for (int i = 0; i < N; i++) {
                tp[i] = tx[(i + half * 37) % N];
                tl[i] = (uint32_t)strlen(tp[i]);
                prep_doc(&p, tp[i], tl[i], &dk[i], rows, sc, i);
                if (half) lcx__index_resolve(x, dk[i]);
                int r = pass ? (i / G) % R : 0;
                assert_int_equal(lcx__post_keys_add(&run[r], dk[i], (uint32_t)i), 0);
            }
            for (int r = 0; r < R; r++) lcx__post_keys_sort(&run[r]);
            uint32_t first = 99;
            assert_int_equal(lcx__index_commit_keys(x, N, tp, tl, 1, rows, sc, dk, run, pass ? R : 1, &first), 0);
            assert_int_equal(first, (uint32_t)(half * N));
            for (int r = 0; r < R; r++) lcx__post_keys_free(&run[r]);
            for (int i = 0; i < N; i++) free(dk[i]);
        }
    }
    lcx__prep_free(&p);
    assert_int_equal(ix->n_terms, ref->n_terms);
    static uint32_t da[2 * N], db[2 * N];
    static uint8_t fa[2 * N], fb[2 * N];
    for (uint32_t id = 0; id < ref->n_terms; id++) {
        uint32_t len;
        const char *t = lcx__index_term(ref, id, &len);
        int64_t j = -1;   /* the same term in ix (ids may differ: new terms are numbered run by run) */
        for (uint32_t k = 0; k < ix->n_terms && j < 0; k++) {
            uint32_t l2;
            const char *t2 = lcx__index_term(ix, k, &l2);
            if (l2 == len && !memcmp(t, t2, len)) j = k;
        }
        assert_true(j >= 0);
        size_t na = lcx__index_postings(ref, id, da, fa, 2 * N), nb = lcx__index_postings(ix, (uint32_t)j, db, fb, 2 * N);
        assert_int_equal(na, nb);
        assert_memory_equal(da, db, na * sizeof *da);
        assert_memory_equal(fa, fb, na);
    }
    lcx_index_free(ref);
    lcx_index_free(ix);
}

static void test_commit_keys_interleaved_runs(void **st)
{
    (void)st;
    for (int pt = 1; pt <= 2; pt++) {   /* posting appends on 1 and 2 threads, whatever the cores */
        commit_keys_interleaved(2, pt);
        commit_keys_interleaved(3, pt);
    }
}

int main(void)
{
    assert_int_equal(lcx_embedder_hash_new(0, &emb), 0);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reference_and_incremental),
        cmocka_unit_test(test_postings_and_options),
        cmocka_unit_test(test_commit_keys_equals_commit),
        cmocka_unit_test(test_posting_blocks_and_resolve_cache),
        cmocka_unit_test(test_retried_commit_keys),
        cmocka_unit_test(test_commit_keys_interleaved_runs),
    };
    int r = cmocka_run_group_tests(tests, NULL, NULL);
    lcx_embedder_free(emb);
    return r;
}
