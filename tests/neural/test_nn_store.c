/* The neural channel in the product (src/store/nnvec.c, src/svc/nn_svc.c, `longctx
 * reembed`): background embedding, neural.vec persistence and re-derivation, the
 * fingerprint refusal, RRF fusion, the cross-encoder's deadline. The first tests use a
 * deterministic "concept" embedder (no fixtures); the last ones the tiny BERT fixtures
 * (../shared/fixtures/bert; skipped without them) and the real binaries. */
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <cjson/cJSON.h>

#include "testutil.h"
#include "longctx/lcx.h"
#include "longctx/lcx_neural.h"
#include "longctx/lcx_recipes.h"
#include "longctx/lcx_scope.h"

/* ---- a fake neural embedder: one axis per concept, so the neural ranking finds what
 * the lexical one cannot ("striped horse" → the zebra chunk), and a gate that holds the
 * background worker so "not embedded yet" is a state the test controls. */
#define CD 8
typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool open;           /* gate: embed calls from other threads (the worker) wait while closed */
    int calls;
    pthread_t tester;    /* its calls (queries, drains) never wait */
    int waiting;         /* worker calls held at the gate now */
} concept;

static const char *const AXES[CD][3] = {
    {"zebra", "striped", NULL}, {"apple", "fruit", NULL}, {"engine", "motor", NULL}, {"ocean", "sea", NULL},
    {NULL, NULL, NULL},         {NULL, NULL, NULL},       {NULL, NULL, NULL},        {NULL, NULL, NULL},
};

static int concept_embed(void *self, const char *const *texts, const size_t *lens, int n, float *out)
{
    concept *c = self;
    pthread_mutex_lock(&c->mu);
    c->waiting++;
    pthread_cond_broadcast(&c->cv);
    while (!pthread_equal(pthread_self(), c->tester) && !c->open) pthread_cond_wait(&c->cv, &c->mu);
    c->waiting--;
    c->calls++;
    pthread_mutex_unlock(&c->mu);
    for (int i = 0; i < n; i++) {
        float *v = out + (size_t)i * CD;
        memset(v, 0, CD * sizeof *v);
        char buf[512];
        size_t l = lens[i] < sizeof buf - 1 ? lens[i] : sizeof buf - 1;
        memcpy(buf, texts[i], l);
        buf[l] = 0;
        bool any = false;
        for (int a = 0; a < CD; a++)
            for (int k = 0; AXES[a][k]; k++)
                if (strstr(buf, AXES[a][k])) v[a] = 1, any = true;
        if (!any) v[CD - 1] = 1;
        float s = 0;
        for (int a = 0; a < CD; a++) s += v[a] * v[a];
        for (int a = 0; a < CD; a++) v[a] /= sqrtf(s);
    }
    return 0;
}

static void concept_destroy(void *self) { (void)self; }

static lcx_embedder *concept_new(concept *c, const char *fp)
{
    static const lcx_embedder_ops ops = {concept_embed, concept_destroy};
    lcx_embedder *e;
    assert_int_equal(lcx_embedder_new(&ops, c, CD, fp, &e), 0);
    return e;
}

static void gate(concept *c, bool open)
{
    pthread_mutex_lock(&c->mu);
    c->open = open;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Waits (up to 120 s: a loaded CI host) for the store to have want neural rows. */
static uint32_t wait_ready(lcx_store *s, uint32_t want)
{
    uint32_t r = 0;
    for (int i = 0; i < 12000 && (r = lcx_store_nn_ready(s)) < want; i++) sleep_ms(10);
    return r;
}

static void add(lcx_store *s, const char *text)
{
    lcx_chunk c = lcx_chunk_init();
    c.text = text;
    c.text_len = (uint32_t)strlen(text);
    assert_int_equal(lcx_store_append(s, &c, 1, NULL), 0);
}

static const char *FILLER[] = {
    "the quarterly report covers revenue and costs", "meeting notes about the roadmap and hiring",
    "an apple a day keeps the doctor away",          "the engine needs an oil change soon",
    "we sailed across the ocean for a week",          "the printer on floor two is out of toner",
    "lunch is served at noon in the cafeteria",       "please review the pull request by friday",
};
#define NFILL ((int)(sizeof FILLER / sizeof *FILLER))
static const char *ZEBRA = "a zebra grazed near the waterhole at dusk";

static int find(const lcx_hit *h, int n, uint32_t id)
{
    for (int i = 0; i < n; i++)
        if (h[i].id == id) return i;
    return -1;
}

static int64_t file_size(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 ? (int64_t)st.st_size : -1;
}

/* A write is searchable at once (lexical + hashed); its neural row arrives later, from
 * the worker; once there, the neural ranking finds what the lexical one cannot. */
static void test_background(void **state)
{
    (void)state;
    concept c = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false, 0, pthread_self(), 0};
    lcx_embedder *hash, *ne = concept_new(&c, "concept:v1");
    assert_int_equal(lcx_embedder_hash_new(0, &hash), 0);
    lcx_nnq_opts qo = {0};
    qo.batch = 4;
    lcx_nnq *q;
    assert_int_equal(lcx_nnq_new(ne, &qo, &q), 0);
    char *dir = tu_tmpdir();
    lcx_store_opts so = {0};
    so.nn = q;
    lcx_store *s;
    assert_int_equal(lcx_store_open(dir, hash, &so, &s), 0);
    for (int i = 0; i < NFILL; i++) add(s, FILLER[i]);
    add(s, ZEBRA);
    const uint32_t zid = (uint32_t)NFILL, n = (uint32_t)NFILL + 1;

    /* gate closed: nothing embedded, yet the write is retrievable by its words */
    lcx_hit h[8];
    lcx_search_info info;
    lcx_search_opts o = lcx_search_defaults();
    o.info = &info;
    int k = lcx_store_search(s, "zebra waterhole", 15, &o, h, 8);
    assert_true(k > 0);
    assert_int_equal(h[0].id, zid);
    assert_int_equal(lcx_store_nn_ready(s), 0);
    assert_false(info.used_neural);
    lcx_nnq_stats st;
    lcx_nnq_get_stats(q, &st);
    assert_int_equal(st.stores, 1);
    /* no lexical or character overlap: without neural rows the zebra chunk is not first */
    k = lcx_store_search(s, "striped horse", 13, &o, h, 3);
    assert_true(k < 1 || h[0].id != zid);

    gate(&c, true);
    assert_int_equal(wait_ready(s, n), n);
    lcx_nnq_get_stats(q, &st);
    assert_true(st.done >= n);
    assert_int_equal(st.backlog, 0);
    assert_true(st.rate_per_s > 0);
    k = lcx_store_search(s, "striped horse", 13, &o, h, 3);
    assert_true(k >= 1);
    assert_int_equal(h[0].id, zid);   /* fails when the neural ranking is not fused in */
    assert_true(info.used_neural);
    assert_int_equal(info.neural_ready, n);
    assert_true(h[0].score > 0 && h[0].score <= 1.0f);

    char p[4200];
    snprintf(p, sizeof p, "%s/neural.vec", dir);
    assert_true(file_size(p) > 256);   /* persisted */
    lcx_store_close(s);
    lcx_nnq_free(q);
    lcx_embedder_free(ne);
    lcx_embedder_free(hash);
    tu_rmrf(dir);
    free(dir);
}

/* Closing a store (an LRU hibernation inside a request) does not wait for the worker's
 * embed call, however slow: the worker embeds copies and drops rows of a closed store. */
static void test_close_while_embedding(void **state)
{
    (void)state;
    concept c = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false, 0, pthread_self(), 0};
    lcx_embedder *hash, *ne = concept_new(&c, "concept:v1");
    assert_int_equal(lcx_embedder_hash_new(0, &hash), 0);
    lcx_nnq *q;
    assert_int_equal(lcx_nnq_new(ne, NULL, &q), 0);
    char *dir = tu_tmpdir();
    lcx_store_opts so = {0};
    so.nn = q;
    lcx_store *s;
    assert_int_equal(lcx_store_open(dir, hash, &so, &s), 0);
    for (int i = 0; i < 3; i++) add(s, FILLER[i]);
    pthread_mutex_lock(&c.mu);
    while (!c.waiting) pthread_cond_wait(&c.cv, &c.mu);   /* the worker is inside embed */
    pthread_mutex_unlock(&c.mu);
    lcx_store_close(s);   /* hangs here (the test times out) if close waits for the worker */
    assert_int_equal(lcx_store_open(dir, hash, &so, &s), 0);   /* reopen while it still embeds */
    assert_int_equal(lcx_store_nn_ready(s), 0);
    gate(&c, true);
    assert_int_equal(wait_ready(s, 3), 3);   /* the reopened store gets its rows */
    lcx_store_close(s);
    lcx_nnq_free(q);
    lcx_embedder_free(ne);
    lcx_embedder_free(hash);
    tu_rmrf(dir);
    free(dir);
}

/* The backlog is derived on open: rows on disk are kept, missing ones (chunks written
 * after the last batch, a torn record, a deleted file, a store from before neural.vec)
 * are queued again. */
static void test_restart_backlog(void **state)
{
    (void)state;
    concept c = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, true, 0, pthread_self(), 0};
    lcx_embedder *hash, *ne = concept_new(&c, "concept:v1");
    assert_int_equal(lcx_embedder_hash_new(0, &hash), 0);
    char *dir = tu_tmpdir();
    char p[4200];
    snprintf(p, sizeof p, "%s/neural.vec", dir);

    /* a store built without any neural model (as before this feature) */
    lcx_store *s;
    assert_int_equal(lcx_store_open(dir, hash, NULL, &s), 0);
    for (int i = 0; i < 6; i++) add(s, FILLER[i]);
    lcx_store_close(s);
    assert_int_equal(file_size(p), -1);

    lcx_nnq_opts qo = {0};
    qo.no_worker = true;
    qo.batch = 3;
    lcx_nnq *q;
    assert_int_equal(lcx_nnq_new(ne, &qo, &q), 0);
    lcx_store_opts so = {0};
    so.nn = q;
    assert_int_equal(lcx_store_open(dir, hash, &so, &s), 0);
    assert_int_equal(lcx_store_nn_ready(s), 0);
    lcx_nnq_stats st;
    lcx_nnq_get_stats(q, &st);
    assert_int_equal(st.backlog, 6);
    assert_int_equal(lcx_nnq_drain(q, s), 0);
    assert_int_equal(lcx_store_nn_ready(s), 6);
    add(s, FILLER[6]);
    add(s, ZEBRA);
    lcx_store_close(s);

    assert_int_equal(lcx_store_open(dir, hash, &so, &s), 0);
    assert_int_equal(lcx_store_nn_ready(s), 6);
    lcx_nnq_get_stats(q, &st);
    assert_int_equal(st.backlog, 2);
    assert_int_equal(lcx_nnq_drain(q, s), 0);
    assert_int_equal(lcx_store_nn_ready(s), 8);
    lcx_store_close(s);

    /* torn tail: the last record (ZEBRA and FILLER[6], one batch) loses a byte */
    int64_t sz = file_size(p);
    assert_int_equal(truncate(p, (off_t)(sz - 1)), 0);
    assert_int_equal(lcx_store_open(dir, hash, &so, &s), 0);
    assert_int_equal(lcx_store_nn_ready(s), 6);
    assert_int_equal(lcx_nnq_drain(q, s), 0);
    assert_int_equal(lcx_store_nn_ready(s), 8);
    lcx_store_close(s);
    assert_int_equal(file_size(p), sz);   /* the cut record was replaced by an identical one */

    /* the file gone: everything re-derived */
    assert_int_equal(unlink(p), 0);
    assert_int_equal(lcx_store_open(dir, hash, &so, &s), 0);
    assert_int_equal(lcx_store_nn_ready(s), 0);
    assert_int_equal(lcx_nnq_drain(q, s), 0);
    assert_int_equal(lcx_store_nn_ready(s), 8);
    lcx_store_close(s);

    lcx_nnq_free(q);
    lcx_embedder_free(ne);
    lcx_embedder_free(hash);
    tu_rmrf(dir);
    free(dir);
}

/* Another neural model's rows are refused, the message names both fingerprints; without
 * a neural model the store opens as before; nn_reset (reembed) drops them. */
static void test_fingerprint_refusal(void **state)
{
    (void)state;
    concept c = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, true, 0, pthread_self(), 0};
    lcx_embedder *hash, *a = concept_new(&c, "concept:model-A"), *b = concept_new(&c, "concept:model-B");
    assert_int_equal(lcx_embedder_hash_new(0, &hash), 0);
    lcx_nnq_opts qo = {0};
    qo.no_worker = true;
    lcx_nnq *qa, *qb;
    assert_int_equal(lcx_nnq_new(a, &qo, &qa), 0);
    assert_int_equal(lcx_nnq_new(b, &qo, &qb), 0);
    char *dir = tu_tmpdir();
    lcx_store_opts so = {0};
    so.nn = qa;
    lcx_store *s;
    assert_int_equal(lcx_store_open(dir, hash, &so, &s), 0);
    for (int i = 0; i < 4; i++) add(s, FILLER[i]);
    assert_int_equal(lcx_nnq_drain(qa, s), 0);
    lcx_store_close(s);

    so.nn = qb;
    assert_int_equal(lcx_store_open(dir, hash, &so, &s), LCX_EMISMATCH);
    assert_null(s);
    const char *d = lcx_store_open_detail();
    assert_non_null(strstr(d, "concept:model-A"));
    assert_non_null(strstr(d, "concept:model-B"));
    assert_non_null(strstr(d, "longctx reembed"));

    assert_int_equal(lcx_store_open(dir, hash, NULL, &s), 0);   /* no neural model: opens, nothing mixed */
    assert_int_equal(lcx_store_count(s), 4);
    assert_int_equal(lcx_store_open_detail()[0], 0);
    lcx_store_close(s);

    so.nn_reset = true;
    assert_int_equal(lcx_store_open(dir, hash, &so, &s), 0);
    assert_int_equal(lcx_store_nn_ready(s), 0);
    assert_int_equal(lcx_nnq_drain(qb, s), 0);
    assert_int_equal(lcx_store_nn_ready(s), 4);
    lcx_store_close(s);
    so.nn_reset = false;
    so.nn = qa;   /* now model A is the stranger */
    assert_int_equal(lcx_store_open(dir, hash, &so, &s), LCX_EMISMATCH);

    lcx_nnq_free(qa);
    lcx_nnq_free(qb);
    lcx_embedder_free(a);
    lcx_embedder_free(b);
    lcx_embedder_free(hash);
    tu_rmrf(dir);
    free(dir);
}

/* ---- rerank: a fake cross-encoder that prefers shorter documents, optionally slow */
typedef struct {
    int sleep_ms;
    int calls;
} fake_rr;

static int fake_rerank(void *ud, const char *q, size_t qlen, const char *const *docs, const size_t *lens, int n,
                       float *scores)
{
    (void)q, (void)qlen, (void)docs;
    fake_rr *r = ud;
    r->calls++;
    if (r->sleep_ms) sleep_ms(r->sleep_ms);
    for (int i = 0; i < n; i++) scores[i] = -(float)lens[i];
    return 0;
}

static int rerank_search(lcx_store *s, lcx_nnq *q, lcx_hit *h, lcx_search_info *info)
{
    (void)q;
    lcx_search_opts o = lcx_search_defaults();
    o.info = info;
    return lcx_store_search(s, "the", 3, &o, h, 8);
}

static void test_rerank_deadline(void **state)
{
    (void)state;
    lcx_embedder *hash;
    assert_int_equal(lcx_embedder_hash_new(0, &hash), 0);
    char *dir = tu_tmpdir();
    lcx_store *s;
    assert_int_equal(lcx_store_open(dir, hash, NULL, &s), 0);
    for (int i = 0; i < NFILL; i++) add(s, FILLER[i]);
    lcx_hit plain[8];
    lcx_search_info info;
    lcx_search_opts o = lcx_search_defaults();
    o.info = &info;
    int np = lcx_store_search(s, "the", 3, &o, plain, 8);
    assert_true(np >= 5);
    assert_false(info.used_rerank);
    lcx_store_close(s);

    fake_rr rr = {0, 0};
    lcx_nnq_opts qo = {0};
    qo.rerank = fake_rerank;
    qo.rerank_ud = &rr;
    qo.rerank_deadline_ms = 60000;
    lcx_nnq *q;
    assert_int_equal(lcx_nnq_new(NULL, &qo, &q), 0);   /* rerank only */
    lcx_store_opts so = {0};
    so.nn = q;
    assert_int_equal(lcx_store_open(dir, hash, &so, &s), 0);
    lcx_hit h[8];
    int n = rerank_search(s, q, h, &info);
    assert_int_equal(n, np);
    assert_true(info.used_rerank);
    assert_false(info.rerank_overrun);
    assert_true(rr.calls > 0);
    for (int i = 1; i < n; i++) {   /* reordered by the fake: shorter first, scores still monotone */
        lcx_chunk a, b;
        assert_int_equal(lcx_store_get(s, h[i - 1].id, &a), 0);
        assert_int_equal(lcx_store_get(s, h[i].id, &b), 0);
        assert_true(a.text_len <= b.text_len);
        assert_true(h[i - 1].score >= h[i].score);
        assert_true(find(plain, np, h[i].id) >= 0);
    }
    lcx_store_close(s);
    lcx_nnq_free(q);

    /* a deadline of 0 and a reranker slower than its deadline: the fused order, used_rerank false */
    for (int pass = 0; pass < 2; pass++) {
        fake_rr slow = {pass ? 30 : 0, 0};
        qo.rerank_ud = &slow;
        qo.rerank_deadline_ms = pass ? 1 : 0;
        assert_int_equal(lcx_nnq_new(NULL, &qo, &q), 0);
        so.nn = q;
        assert_int_equal(lcx_store_open(dir, hash, &so, &s), 0);
        n = rerank_search(s, q, h, &info);
        assert_int_equal(n, np);
        assert_false(info.used_rerank);
        assert_true(info.rerank_overrun);
        for (int i = 0; i < n; i++) assert_int_equal(h[i].id, plain[i].id);
        lcx_nnq_stats st;
        lcx_nnq_get_stats(q, &st);
        assert_int_equal(st.rerank_calls, 1);
        assert_int_equal(st.rerank_overruns, 1);
        if (pass) {
            /* measured too slow (30 ms a call, 1 ms deadline): the next searches skip it without
             * calling it, but every 16th tries again */
            const int called = slow.calls;
            assert_true(called >= 1);
            for (int k = 0; k < 14; k++) {
                assert_int_equal(rerank_search(s, q, h, &info), np);
                assert_false(info.used_rerank);
            }
            assert_int_equal(slow.calls, called);
            assert_int_equal(rerank_search(s, q, h, &info), np);
            assert_int_equal(rerank_search(s, q, h, &info), np);
            assert_true(slow.calls > called);   /* the probe */
            lcx_nnq_get_stats(q, &st);
            assert_int_equal(st.rerank_overruns, 17);
        }
        lcx_store_close(s);
        lcx_nnq_free(q);
    }
    lcx_embedder_free(hash);
    tu_rmrf(dir);
    free(dir);
}

/* ---- MultiQ: the same cross-encoder, under the same deadline, over a request's turns */
static void test_multiq_rerank(void **state)
{
    (void)state;
    lcx_embedder *hash;
    assert_int_equal(lcx_embedder_hash_new(0, &hash), 0);
    /* every turn is about tapirs; replies of different lengths (the fake prefers short ones) */
    static const char *rep[] = {
        "Tapirs are large herbivorous mammals with a short prehensile snout found in the forests of South America and Asia.",
        "Tapirs swim.",
        "The tapir is an odd-toed ungulate related to horses and rhinoceroses, with four toes on the front feet.",
        "A tapir calf has stripes.",
        "Tapir populations decline as forests are cut and roads split their range.",
    };
    lcx_msg m[11];
    char req[5][64];
    for (int i = 0; i < 5; i++) {
        snprintf(req[i], sizeof req[i], "tell me fact %d about tapirs", i + 1);
        m[2 * i] = (lcx_msg){"user", req[i], strlen(req[i])};
        m[2 * i + 1] = (lcx_msg){"assistant", rep[i], strlen(rep[i])};
    }
    const char *q = "what do you know about tapirs";
    long plain[5], idx[5];
    float sc[5];
    int np = lcx_recipe_multiq(hash, m, 10, q, strlen(q), 5, plain, NULL);
    assert_int_equal(np, 5);

    fake_rr rr = {0, 0};
    lcx_nnq_opts qo = {0};
    qo.rerank = fake_rerank;
    qo.rerank_ud = &rr;
    qo.rerank_deadline_ms = 60000;
    lcx_nnq *nq;
    assert_int_equal(lcx_nnq_new(NULL, &qo, &nq), 0);
    lcx_search_info info;
    int n = lcx_recipe_multiq_nn(hash, nq, m, 10, q, strlen(q), 5, idx, sc, &info);
    assert_int_equal(n, 5);
    assert_true(info.used_rerank);
    assert_false(info.rerank_overrun);
    assert_true(rr.calls > 0);
    for (int i = 1; i < n; i++) {   /* shortest reply first; scores stay monotone */
        assert_true(m[idx[i - 1]].len <= m[idx[i]].len);
        assert_true(sc[i - 1] >= sc[i]);
    }
    assert_int_equal(idx[0], 3);    /* "Tapirs swim." (request lines are all as long) */
    lcx_nnq_stats st;
    lcx_nnq_get_stats(nq, &st);
    assert_int_equal(st.rerank_calls, 1);
    lcx_nnq_free(nq);

    /* deadline 0: MultiQ's own order exactly, used_rerank false, counted as an overrun */
    qo.rerank_deadline_ms = 0;
    assert_int_equal(lcx_nnq_new(NULL, &qo, &nq), 0);
    n = lcx_recipe_multiq_nn(hash, nq, m, 10, q, strlen(q), 5, idx, NULL, &info);
    assert_int_equal(n, np);
    assert_false(info.used_rerank);
    assert_true(info.rerank_overrun);
    for (int i = 0; i < n; i++) assert_int_equal(idx[i], plain[i]);
    lcx_nnq_get_stats(nq, &st);
    assert_int_equal(st.rerank_overruns, 1);
    lcx_nnq_free(nq);
    lcx_embedder_free(hash);
}

/* ---- the tiny BERT fixtures and the real binaries */

static lcx_embedder *bert(const char *rel)
{
    const char *p = tu_fixture(rel);   /* skips without ../shared */
    lcx_nn_opts o;
    lcx_nn_opts_init(&o);
    lcx_nn_model *m;
    char err[256];
    assert_int_equal(lcx_nn_load(p, &o, &m, err, sizeof err), 0);
    lcx_embedder *e;
    assert_int_equal(lcx_nn_embedder_new(m, &e), 0);
    return e;
}

/* The code recipe's confidence is an absolute cosine of the store's own ranking: with the
 * tiny model's rows fused in, "ocean week" puts a chunk the hashed vectors barely match
 * (cosine 0.001) first, so the hits' best cosine would read as a low turn (< 0.35) although
 * the store's own best is 0.66; the search reports that pre-RRF best (base_dense). */
static void test_fixture_base_dense(void **state)
{
    (void)state;
    lcx_embedder *f32 = bert("bert/tiny-bert-f32.gguf"), *hash;
    assert_int_equal(lcx_embedder_hash_new(0, &hash), 0);
    char *dir = tu_tmpdir();
    lcx_store *s;
    assert_int_equal(lcx_store_open(dir, hash, NULL, &s), 0);
    for (int i = 0; i < NFILL; i++) add(s, FILLER[i]);
    lcx_hit h[1];
    lcx_search_opts o = lcx_search_defaults();
    o.top_k = 1;
    const char *q = "ocean week";
    assert_int_equal(lcx_store_search(s, q, strlen(q), &o, h, 1), 1);
    const float d0 = h[0].dense;
    assert_true(d0 > 0.35f);
    lcx_store_close(s);

    lcx_nnq_opts qo = {0};
    qo.no_worker = true;
    lcx_nnq *nq;
    assert_int_equal(lcx_nnq_new(f32, &qo, &nq), 0);
    lcx_store_opts so = {0};
    so.nn = nq;
    assert_int_equal(lcx_store_open(dir, hash, &so, &s), 0);
    assert_int_equal(lcx_nnq_drain(nq, s), 0);
    lcx_search_info info;
    o.info = &info;
    assert_int_equal(lcx_store_search(s, q, strlen(q), &o, h, 1), 1);
    assert_true(info.used_neural);
    assert_true(h[0].dense < 0.35f);   /* the fused top alone would say "low" */
    assert_float_equal(info.base_dense, d0, 1e-6);
    lcx_store_close(s);
    lcx_nnq_free(nq);
    lcx_embedder_free(f32);
    lcx_embedder_free(hash);
    tu_rmrf(dir);
    free(dir);
}

/* The same through the code recipe: its confidence with the model's rows equals the one
 * without (the pre-RRF hashed cosine), not the fused top's. */
static float code_conf(const char *dir, const char *data, lcx_nnq *nq, const lcx_embedder *hash)
{
    lcx_scopes_opts so = lcx_scopes_defaults();
    so.data_dir = data;
    so.watch = false;
    so.store.nn = nq;
    lcx_scopes *m;
    assert_int_equal(lcx_scopes_open(&so, hash, &m), 0);
    lcx_code_request rq = {0};
    rq.query = "ocean week";
    rq.query_len = strlen(rq.query);
    rq.top_k = 1;
    rq.explicit_scope = dir;
    lcx_code_result res;
    assert_int_equal(lcx_code_retrieve(m, &rq, &res), 0);
    lcx_code_result_free(&res);
    if (nq)   /* wait for the scope's rows, then ask again */
        for (int i = 0; i < 6000; i++) {
            lcx_nnq_stats st;
            lcx_nnq_get_stats(nq, &st);
            if (st.done >= (uint64_t)NFILL && !st.backlog) break;
            sleep_ms(10);
        }
    assert_int_equal(lcx_code_retrieve(m, &rq, &res), 0);
    assert_true(res.retrieved);
    assert_true(res.used_neural == (nq != NULL));
    float c = res.confidence;
    print_message("code confidence %s model: %.4f\n", nq ? "with" : "without", c);
    lcx_code_result_free(&res);
    lcx_scopes_close(m);
    return c;
}

static void test_fixture_code_confidence(void **state)
{
    (void)state;
    lcx_embedder *f32 = bert("bert/tiny-bert-f32.gguf"), *hash;
    assert_int_equal(lcx_embedder_hash_new(0, &hash), 0);
    char *dir = tu_tmpdir(), *d1 = tu_tmpdir(), *d2 = tu_tmpdir();
    char cmd[8192];
    for (int i = 0; i < NFILL; i++) {
        snprintf(cmd, sizeof cmd, "printf '%%s\\n' '%s' > '%s/note%d.txt'", FILLER[i], dir, i);
        assert_int_equal(tu_run(cmd, NULL), 0);
    }
    float c0 = code_conf(dir, d1, NULL, hash);
    lcx_nnq_opts qo = {0};
    lcx_nnq *nq;
    assert_int_equal(lcx_nnq_new(f32, &qo, &nq), 0);
    float c1 = code_conf(dir, d2, nq, hash);
    assert_float_equal(c1, c0, 1e-6);
    lcx_nnq_free(nq);
    lcx_embedder_free(f32);
    lcx_embedder_free(hash);
    tu_rmrf(dir); tu_rmrf(d1); tu_rmrf(d2);
    free(dir); free(d1); free(d2);
}

static void test_fixture_refusal_and_reembed(void **state)
{
    (void)state;
    lcx_embedder *f32 = bert("bert/tiny-bert-f32.gguf"), *f16 = bert("bert/tiny-bert-f16.gguf");
    lcx_embedder *hf = bert("bert/tiny-bert-hf");
    assert_string_not_equal(lcx_embedder_fingerprint(f32), lcx_embedder_fingerprint(f16));
    lcx_embedder *hash;
    assert_int_equal(lcx_embedder_hash_new(0, &hash), 0);
    lcx_nnq_opts qo = {0};
    qo.no_worker = true;
    lcx_nnq *q32, *q16, *qhf;
    assert_int_equal(lcx_nnq_new(f32, &qo, &q32), 0);
    assert_int_equal(lcx_nnq_new(f16, &qo, &q16), 0);
    assert_int_equal(lcx_nnq_new(hf, &qo, &qhf), 0);
    char *dir = tu_tmpdir();
    lcx_store_opts so = {0};
    so.nn = q32;
    lcx_store *s;
    assert_int_equal(lcx_store_open(dir, hash, &so, &s), 0);
    for (int i = 0; i < NFILL; i++) add(s, FILLER[i]);
    add(s, ZEBRA);
    assert_int_equal(lcx_nnq_drain(q32, s), 0);
    assert_int_equal(lcx_store_nn_ready(s), NFILL + 1);
    lcx_store_close(s);

    so.nn = q16;
    assert_int_equal(lcx_store_open(dir, hash, &so, &s), LCX_EMISMATCH);
    const char *d = lcx_store_open_detail();
    assert_non_null(strstr(d, lcx_embedder_fingerprint(f32)));
    assert_non_null(strstr(d, lcx_embedder_fingerprint(f16)));
    so.nn = qhf;   /* the same weights as a HF folder: another file, another fingerprint */
    assert_int_equal(lcx_store_open(dir, hash, &so, &s), LCX_EMISMATCH);

    /* longctx reembed with the f16 model, then the f16 model opens it with every row */
    char cmd[8600], *out = NULL;
    snprintf(cmd, sizeof cmd, "'%s' reembed '%s' --embed-model '%s' 2>&1", tu_bin("longctx"), dir,
             tu_fixture("bert/tiny-bert-f16.gguf"));
    int rc = tu_run(cmd, &out);
    assert_int_equal(rc, 0);
    assert_non_null(strstr(out, "9 of 9 chunks"));
    free(out);
    so.nn = q16;
    assert_int_equal(lcx_store_open(dir, hash, &so, &s), 0);
    assert_int_equal(lcx_store_nn_ready(s), NFILL + 1);
    lcx_store_close(s);
    so.nn = q32;
    assert_int_equal(lcx_store_open(dir, hash, &so, &s), LCX_EMISMATCH);

    lcx_nnq_free(q32);
    lcx_nnq_free(q16);
    lcx_nnq_free(qhf);
    lcx_embedder_free(f32);
    lcx_embedder_free(f16);
    lcx_embedder_free(hf);
    lcx_embedder_free(hash);
    tu_rmrf(dir);
    free(dir);
}

/* ---- the service: flags, load errors, 409 naming both models, backlog in the status */

typedef struct {
    pid_t pid;
    int port;
    char log[4300];
} svc;

/* model goes in LONGCTX_EMBED_MODEL; flag_model (may be NULL) in --embed-model (it wins) */
static bool svc_start2(svc *v, const char *data_dir, const char *model, const char *flag_model, const char *rerank)
{
    v->port = tu_free_port();
    char port[16];
    snprintf(port, sizeof port, "%d", v->port);
    snprintf(v->log, sizeof v->log, "%s.log", data_dir);
    char *argv[16];
    int a = 0;
    argv[a++] = (char *)tu_bin("longctx-svc");
    argv[a++] = "serve";
    argv[a++] = "--host";
    argv[a++] = "127.0.0.1";
    argv[a++] = "--port";
    argv[a++] = port;
    argv[a++] = "--data-dir";
    argv[a++] = (char *)data_dir;
    argv[a++] = "--quiet";
    if (rerank) argv[a++] = "--rerank-model", argv[a++] = (char *)rerank;
    if (flag_model) argv[a++] = "--embed-model", argv[a++] = (char *)flag_model;
    argv[a] = NULL;
    char envv[4200];
    snprintf(envv, sizeof envv, "LONGCTX_EMBED_MODEL=%s", model);   /* the variable, not the flag */
    char *env[] = {envv, NULL};
    v->pid = tu_spawn(argv, env, v->log);
    return tu_wait_http(v->port, "/healthz", 20000);
}

static bool svc_start(svc *v, const char *data_dir, const char *model, const char *rerank)
{
    return svc_start2(v, data_dir, model, NULL, rerank);
}

static void svc_stop(svc *v) { tu_kill_wait(v->pid, SIGTERM, 20000); }

static long call(svc *v, const char *method, const char *path, const char *body, cJSON **j)
{
    char url[256];
    snprintf(url, sizeof url, "http://127.0.0.1:%d%s", v->port, path);
    tu_resp r;
    const char *hdr[] = {"Content-Type: application/json", NULL};
    tu_http(method, url, body, body ? strlen(body) : 0, hdr, &r);
    if (j) *j = cJSON_Parse(r.body ? r.body : "");
    long st = r.status;
    tu_resp_free(&r);
    return st;
}

static double status_num(svc *v, const char *obj, const char *key)
{
    cJSON *j;
    assert_int_equal(call(v, "GET", "/longctx/status", NULL, &j), 200);
    const cJSON *o = cJSON_GetObjectItem(j, obj);
    const cJSON *x = o ? cJSON_GetObjectItem(o, key) : NULL;
    double d = cJSON_IsNumber(x) ? x->valuedouble : -1;
    cJSON_Delete(j);
    return d;
}

static void test_service(void **state)
{
    (void)state;
    const char *f32 = tu_fixture("bert/tiny-bert-f32.gguf"), *f16 = tu_fixture("bert/tiny-bert-f16.gguf");
    const char *rr = tu_fixture("bert/tiny-bert-rerank-f32.gguf");
    char *dir = tu_tmpdir();

    /* a load error stops the start: exit 1 with the loader's sentence */
    char cmd[9000], *out = NULL;
    snprintf(cmd, sizeof cmd, "'%s' serve --port 0 --data-dir '%s' --embed-model '%s/nope.gguf' 2>&1; echo rc=$?",
             tu_bin("longctx-svc"), dir, dir);
    tu_run(cmd, &out);
    assert_non_null(strstr(out, "--embed-model"));
    assert_non_null(strstr(out, "nope.gguf"));
    assert_non_null(strstr(out, "rc=1"));
    free(out);

    svc v;
    assert_true(svc_start(&v, dir, f32, rr));
    const char *w = "{\"session_id\":\"n1\",\"chunks\":[{\"text\":\"the vault code is 481729\",\"token_range\":[0,5]},"
                    "{\"text\":\"lunch is served at noon\",\"token_range\":[6,10]},"
                    "{\"text\":\"the printer is out of toner\",\"token_range\":[11,16]}]}";
    assert_int_equal(call(&v, "POST", "/evict/write", w, NULL), 200);
    cJSON *j;
    assert_int_equal(call(&v, "POST", "/evict/retrieve", "{\"session_id\":\"n1\",\"query\":\"vault code\"}", &j), 200);
    const cJSON *ch = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "chunks"), 0);
    assert_non_null(ch);
    assert_non_null(strstr(cJSON_GetObjectItem(ch, "text")->valuestring, "481729"));   /* at once */
    assert_true(cJSON_IsBool(cJSON_GetObjectItem(j, "used_rerank")));
    cJSON_Delete(j);
    double done = 0;
    for (int i = 0; i < 12000 && (done = status_num(&v, "neural", "done")) < 3; i++) sleep_ms(10);
    assert_true(done >= 3);
    assert_int_equal((int)status_num(&v, "neural", "backlog"), 0);
    assert_true(status_num(&v, "rerank", "calls") >= 1);
    tu_resp r;
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/metrics", v.port);
    tu_http("GET", url, NULL, 0, NULL, &r);
    assert_non_null(strstr(r.body, "longctx_neural_backlog 0"));
    assert_non_null(strstr(r.body, "longctx_neural_vectors_total 3"));
    tu_resp_free(&r);
    /* the code route reports the neural channel: used_neural once the scope's rows arrived */
    snprintf(cmd, sizeof cmd, "mkdir -p '%s/code' && printf 'int vault_open(int code)\\n{\\n    return code * 2;\\n}\\n' > '%s/code/vault.c'"
             " && printf 'void lunch_serve(void)\\n{\\n}\\n' > '%s/code/lunch.c'", dir, dir, dir);
    assert_int_equal(tu_run(cmd, NULL), 0);
    char rq[4400];
    snprintf(rq, sizeof rq, "{\"query\":\"open the vault\",\"explicit_scope\":\"%s/code\"}", dir);
    bool neural = false;
    for (int i = 0; i < 600 && !neural; i++) {
        assert_int_equal(call(&v, "POST", "/retrieve", rq, &j), 200);
        assert_true(cJSON_IsBool(cJSON_GetObjectItem(j, "used_rerank")));
        assert_true(cJSON_IsBool(cJSON_GetObjectItem(j, "used_neural")));
        neural = cJSON_IsTrue(cJSON_GetObjectItem(j, "used_neural"));
        cJSON_Delete(j);
        if (!neural) sleep_ms(20);
    }
    assert_true(neural);
    svc_stop(&v);

    /* another model: 409 naming both fingerprints, nothing mixed */
    assert_true(svc_start(&v, dir, f16, NULL));
    assert_int_equal(call(&v, "POST", "/evict/retrieve", "{\"session_id\":\"n1\",\"query\":\"vault code\"}", &j), 409);
    const char *msg = cJSON_GetObjectItem(cJSON_GetObjectItem(j, "error"), "message")->valuestring;
    assert_non_null(strstr(msg, "bert:gguf"));
    assert_non_null(strstr(msg, "w1"));   /* f32 */
    assert_non_null(strstr(msg, "w2"));   /* f16 */
    assert_non_null(strstr(msg, "reembed"));
    cJSON_Delete(j);
    assert_int_equal(call(&v, "POST", "/evict/write", w, NULL), 409);
    svc_stop(&v);

    /* restart with the right model after losing neural.vec: the backlog is re-derived; the
     * model comes from the flag, which wins over a variable naming a file that is not there */
    snprintf(cmd, sizeof cmd, "rm -f '%s'/sessions/*/neural.vec", dir);
    assert_int_equal(tu_run(cmd, NULL), 0);
    char bogus[4300];
    snprintf(bogus, sizeof bogus, "%s/not-there.gguf", dir);
    assert_true(svc_start2(&v, dir, bogus, f32, NULL));
    assert_int_equal(call(&v, "POST", "/evict/retrieve", "{\"session_id\":\"n1\",\"query\":\"toner\"}", NULL), 200);
    for (int i = 0; i < 12000 && (done = status_num(&v, "neural", "done")) < 3; i++) sleep_ms(10);
    assert_int_equal((int)done, 3);
    svc_stop(&v);
    unlink(v.log);
    tu_rmrf(dir);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test(test_background),
        cmocka_unit_test(test_close_while_embedding),
        cmocka_unit_test(test_restart_backlog),
        cmocka_unit_test(test_fingerprint_refusal),
        cmocka_unit_test(test_rerank_deadline),
        cmocka_unit_test(test_multiq_rerank),
        cmocka_unit_test(test_fixture_refusal_and_reembed),
        cmocka_unit_test(test_fixture_base_dense),
        cmocka_unit_test(test_fixture_code_confidence),
        cmocka_unit_test(test_service),
    };
    return cmocka_run_group_tests(t, NULL, NULL);
}
