/* The commit paths: one document (lcx__index_commit: replay and small appends) and a
 * batch from the workers' sorted posting-key runs (lcx__index_commit_keys, with its term
 * step lcx__index_commit_terms), plus the key runs themselves (lcx__post_keys_*, built
 * and sorted on the workers).
 * Locks: none of its own (index.h); commits run under the store's rw held exclusively (the term
 * step under trw exclusively too); the key runs are per-worker and need no lock. A batch's
 * posting appends may run on 2 threads split by term-id parity (post_run). */
#include "index/index.h"
#include "embed/embed.h"
#include "util/util.h"
#include <assert.h>
#include <immintrin.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int do_commit(lcx_index *ix, const char *text, uint32_t len, int copy_text, const uint8_t *row8,
                      float scale, const lcx__doc_terms *dt, uint32_t *id_out)
{
    int rc = lcx__index_reserve(ix, 1);
    if (rc) return rc;
    const char *tp = text;
    if (copy_text) {
        char *c = lcx__index_arena_alloc(ix, (size_t)len + 1);
        if (!c) return LCX_ENOMEM;
        if (len) memcpy(c, text, len);
        c[len] = 0;
        tp = c;
    }
    uint32_t id = ix->n_docs;
    /* postings first: if one fails we have not published the doc (a few postings may
     * point at id, which is harmless: id is only ever reused by the next commit).
     * hot (serial, under the write lock): each distinct term touches its list header and
     * the tail of its doc/tf arrays — three cache misses at 100k docs that dominated the
     * commit (perf: ~80% of it on those loads). Software-prefetch in two stages: the list
     * header PF_HDR terms ahead, then (header now cached) the list tails PF_TAIL ahead. */
    enum { PF_HDR = 32, PF_TAIL = 12 };
    for (uint32_t i = 0; i < dt->nt && i < PF_HDR; i++)
        if (dt->t[i].tid < ix->n_terms) _mm_prefetch((const char *)&ix->pl[dt->t[i].tid], _MM_HINT_T0);
    for (uint32_t i = 0; i < dt->nt && i < PF_TAIL; i++)
        if (dt->t[i].tid < ix->n_terms) {
            const lcx__plist *q = &ix->pl[dt->t[i].tid];
            if (q->n) _mm_prefetch((const char *)(q->doc + q->n - 1), _MM_HINT_T0);
            if (q->n < q->cap) _mm_prefetch((const char *)(q->tf + q->n), _MM_HINT_T0);
        }
    for (uint32_t i = 0; i < dt->nt; i++) {
        const lcx__pterm *t = &dt->t[i];
        if (i + PF_HDR < dt->nt && t[PF_HDR].tid < ix->n_terms)
            _mm_prefetch((const char *)&ix->pl[t[PF_HDR].tid], _MM_HINT_T0);
        if (i + PF_TAIL < dt->nt && t[PF_TAIL].tid < ix->n_terms) {
            const lcx__plist *q = &ix->pl[t[PF_TAIL].tid];
            if (q->n) _mm_prefetch((const char *)(q->doc + q->n - 1), _MM_HINT_T0);
            if (q->n < q->cap) _mm_prefetch((const char *)(q->tf + q->n), _MM_HINT_T0);
        }
        int64_t tid = t->tid < ix->n_terms ? (int64_t)t->tid : lcx__index_term_get(ix, dt->pool + t->off, t->len, t->hash);
        if (tid < 0) return (int)tid;
        lcx__plist *p = &ix->pl[tid];
        if (p->n && p->doc[p->n - 1] == id) continue;   /* retried commit */
        if ((rc = lcx__plist_push(ix, (uint32_t)tid, id, t->tf > 255 ? 255 : (uint8_t)t->tf))) return rc;
    }
    size_t row = (size_t)(id - ix->base.vn);
    memcpy(ix->vec8 + row * ix->dim, row8, ix->dim);
    ix->vsc[row] = scale;
    ix->dl[id] = dt->dl;
    ix->text[id] = tp;
    ix->text_len[id] = len;
    ix->n_docs++;
    ix->n_live++;
    ix->sum_dl += dt->dl;
    if (id_out) *id_out = id;
    return 0;
}

int lcx__index_commit(lcx_index *ix, const char *text, uint32_t len, int copy_text, const uint8_t *row8,
                      float scale, const lcx__doc_terms *dt, uint32_t *id_out)
{
    int rc = do_commit(ix, text, len, copy_text, row8, scale, dt, id_out);
    if (rc < 0) ix->post_failed = 1;   /* postings of unpublished ids may be left: see post_run */
    return rc;
}

/* A batch's postings sorted by term: key = tid << 32 | batch-relative doc << 8 | tf. */
typedef struct {
    lcx_index *ix;
    const uint64_t *key;
    size_t n;                /* keys */
    uint32_t mask, part;     /* this job takes the terms with tid & mask == part */
    uint32_t first;          /* doc id of batch doc 0 */
    int retry;               /* a publish failed before: lists may hold some of these postings */
    size_t bytes;            /* growth of own_bytes (summed by the caller: no shared counter) */
    int rc;
} post_job;

/* hot (the serial section of ingest, split over 2 threads): one list header and one list
 * tail per distinct term of the batch, headers visited in increasing term order */
static void *post_run(void *arg)
{
    post_job *j = arg;
    lcx__plist *pl = j->ix->pl;
    const uint64_t *k = j->key;
    const size_t nk = j->n;
    enum { PF = 16 };
    for (size_t i = 0; i < nk;) {
        uint32_t tid = (uint32_t)(k[i] >> 32);
        size_t e = i + 1;
        while (e < nk && (uint32_t)(k[e] >> 32) == tid) e++;
        if ((tid & j->mask) != j->part) {   /* the other thread's list */
            i = e;
            continue;
        }
        if (e + PF < nk) {   /* the list PF postings ahead: its header */
            const lcx__plist *q = &pl[k[e + PF] >> 32];
            _mm_prefetch((const char *)q, _MM_HINT_T0);
        }
        lcx__plist *p = &pl[tid];
        /* the retried-commit test reads the list's last doc id, a cache miss that stalled
         * this loop (~65% of its samples): only after a failed publish can a list already
         * hold postings of this batch, so only then is it read (the tail line is still
         * written below, but a store miss does not stall) */
        int have = j->retry && p->n > 0;
        uint32_t last = have ? p->doc[p->n - 1] : 0;
        if (lcx__plist_reserve(j->ix, tid, &j->bytes, p, p->n + (uint32_t)(e - i))) { j->rc = LCX_ENOMEM; return NULL; }
        uint32_t n = p->n;
        for (; i < e; i++) {
            uint32_t doc = j->first + (uint32_t)(k[i] >> 8 & 0xffffff);
            if (have && doc <= last) continue;   /* retried commit: already there */
            p->doc[n] = doc;
            p->tf[n] = (uint8_t)k[i];
            n++;
        }
        p->n = n;
    }
    return NULL;
}

/* Stable LSD radix sort of v (n keys) by the 32-bit field at bit `at` (values ≤ max) using
 * tmp (n); returns the array holding the result (v or tmp). hot (ingest workers: ~40k keys
 * per batch each, by term id). The counts of every digit are taken in ONE pass over the
 * keys (then each pass only scatters): at the usual 2 digits that is 3 passes instead of 4. */
static uint64_t *radix_field(uint64_t *v, uint64_t *tmp, size_t n, int at, uint32_t max)
{
    int bits = 1;
    while (bits < 32 && max >> bits) bits++;
    enum { R = 11, MAXD = 3 };   /* a 32-bit field: at most 3 digits of 11 bits */
    static_assert(MAXD * R >= 32, "digits cover the 32-bit field");
    const int nd = (bits + R - 1) / R;
    uint32_t cnt[MAXD][1 << R];
    memset(cnt, 0, sizeof cnt);
    for (size_t i = 0; i < n; i++) {
        uint32_t x = (uint32_t)(v[i] >> at);
        cnt[0][x & ((1u << R) - 1)]++;
        cnt[1][x >> R & ((1u << R) - 1)]++;
        cnt[2][x >> (2 * R)]++;   /* < 2^10 */
    }
    for (int d = 0; d < nd; d++) {
        const int sh = at + d * R;
        uint32_t *c = cnt[d], sum = 0;
        for (int b = 0; b < 1 << R; b++) {
            uint32_t k = c[b];
            c[b] = sum;
            sum += k;
        }
        for (size_t i = 0; i < n; i++) tmp[c[v[i] >> sh & ((1u << R) - 1)]++] = v[i];
        uint64_t *t = v;
        v = tmp;
        tmp = t;
    }
    return v;
}

/* By term id (bits 32..63, ids ≤ max_tid): (term, doc) order when v is in doc order. */
static uint64_t *radix_hi(uint64_t *v, uint64_t *tmp, size_t n, uint32_t max_tid)
{
    return radix_field(v, tmp, n, 32, max_tid);
}

/* Scratch for 2 × cap sort keys (kept by the index: no page faults per batch). */
static uint64_t *pkey_reserve(lcx_index *ix, size_t total)
{
    if (total > ix->pkey_cap) {
        free(ix->pkey);
        ix->own_bytes -= ix->pkey_cap * 2 * sizeof *ix->pkey;
        ix->pkey_cap = 0;
        size_t cap = total + total / 4;
        if (!(ix->pkey = malloc(cap * 2 * sizeof *ix->pkey))) return NULL;   /* (cap) keys + (cap) tmp */
        ix->pkey_cap = cap;
        ix->own_bytes += cap * 2 * sizeof *ix->pkey;
    }
    return ix->pkey;
}

/* Postings from sort keys in document order (key = pkey, total of them): sorted by term
 * (stable, so doc order within a term), then appended term by term — each list is
 * touched once per batch, not once per document (at ~80 distinct terms per span the
 * per-document appends cost ~3 cache misses each). Big batches split the lists over 2
 * threads by term-id parity (each list has one writer). A failure leaves
 * postings for ids ≥ n_docs, which searches skip and a retried commit does not duplicate. */
static int post_keys(lcx_index *ix, uint32_t n, uint32_t first, size_t total)
{
    if (!total) return 0;
    const uint64_t *sorted = ix->pkey;
    /* 2 threads split the lists by term-id parity: each list has one writer, and odd and
     * even ids are alike in cost (a split of the sorted array at a position cannot be:
     * low ids are common words with long runs, high ids rare terms with one posting each,
     * and choosing a balanced position costs a serial pass over the keys). Only with a
     * core to spare: on 2 cores the store publishes next to its two embedding workers,
     * and a second thread only costs its start, a join that waits for a descheduled
     * thread, and a second scan of the keys (docs/benchmarks/core.md) */
    int two = n >= 64 && total >= 4096 &&
              (ix->post_threads ? ix->post_threads == 2 : sysconf(_SC_NPROCESSORS_ONLN) >= 3);
    uint32_t mask = two ? 1u : 0u;
    post_job pj[2] = {{ix, sorted, total, mask, 0, first, ix->post_failed, 0, 0},
                      {ix, sorted, total, mask, 1, first, ix->post_failed, 0, 0}};
    pthread_t th;
    int started = two && pthread_create(&th, NULL, post_run, &pj[1]) == 0;
    post_run(&pj[0]);
    if (started) pthread_join(th, NULL);
    else if (two) post_run(&pj[1]);
    int rc = 0;
    for (int t = 0; t < 2; t++) {
        ix->own_bytes += pj[t].bytes;
        if (pj[t].rc && !rc) rc = pj[t].rc;
    }
    return rc;
}

/* Texts, rows, lengths; then publishes ids first..first+n-1. */
static int commit_docs(lcx_index *ix, uint32_t n, const char *const *text, const uint32_t *len, int copy_text,
                       const uint8_t *rows, const float *scales, lcx__doc_terms *const *dt, uint32_t *first_id)
{
    const uint32_t first = ix->n_docs;
    for (uint32_t d = 0; d < n; d++) {
        uint32_t id = first + d;
        const char *tp = text[d];
        if (copy_text) {
            char *c = lcx__index_arena_alloc(ix, (size_t)len[d] + 1);
            if (!c) return LCX_ENOMEM;
            if (len[d]) memcpy(c, text[d], len[d]);
            c[len[d]] = 0;
            tp = c;
        }
        size_t row = (size_t)(id - ix->base.vn);
        memcpy(ix->vec8 + row * ix->dim, rows + (size_t)d * ix->dim, ix->dim);
        ix->vsc[row] = scales[d];
        ix->dl[id] = dt[d]->dl;
        ix->text[id] = tp;
        ix->text_len[id] = len[d];
    }
    for (uint32_t d = 0; d < n; d++) ix->sum_dl += dt[d]->dl;
    ix->n_docs += n;
    ix->n_live += n;
    if (first_id) *first_id = first;
    return 0;
}

/* hot (ingest workers, after lcx__index_resolve): the document's sort keys, in term order */
int lcx__post_keys_add(lcx__post_keys *k, lcx__doc_terms *dt, uint32_t d)
{
    if (d >= (1u << 24)) return LCX_ELIMIT;
    if (!dt->nt) return 0;   /* no terms (e.g. only stop-words): nothing to add, and key may be NULL */
    if (k->n + dt->nt > k->cap) {
        size_t nc = k->cap ? k->cap * 2 : 8192;
        while (nc < k->n + dt->nt) nc *= 2;
        uint64_t *nk = realloc(k->key, nc * sizeof *nk);
        if (!nk) return LCX_ENOMEM;
        k->key = nk;
        uint64_t *nt = realloc(k->tmp, nc * sizeof *nt);
        if (!nt) return LCX_ENOMEM;
        k->tmp = nt;
        k->cap = nc;
    }
    k->sorted = 0;
    uint64_t *out = k->key + k->n;
    size_t m = 0;
    uint32_t mx = k->max_tid;
    const lcx__pterm *t = dt->t;
    for (uint32_t i = 0; i < dt->nt; i++) {
        uint32_t lo = d << 8 | (t[i].tf > 255 ? 255u : t[i].tf);
        if (t[i].tid != UINT32_MAX) {
            out[m++] = (uint64_t)t[i].tid << 32 | lo;
            if (t[i].tid > mx) mx = t[i].tid;
            continue;
        }
        if (k->n_unres == k->ucap) {   /* unknown to the index: the commit assigns its id */
            size_t nc = k->ucap ? k->ucap * 2 : 1024;
            lcx__post_unres *nu = realloc(k->unres, nc * sizeof *nu);
            if (!nu) return LCX_ENOMEM;
            k->unres = nu;
            k->ucap = nc;
        }
        k->unres[k->n_unres++] = (lcx__post_unres){lo, i, dt};
    }
    k->n += m;
    k->max_tid = mx;
    return 0;
}

void lcx__post_keys_sort(lcx__post_keys *k)
{
    if (k->sorted) return;
    uint64_t *r = k->n ? radix_hi(k->key, k->tmp, k->n, k->max_tid) : k->key;
    if (r != k->key) {   /* the result landed in the scratch buffer: swap the roles */
        k->tmp = k->key;
        k->key = r;
    }
    k->sorted = 1;
}

void lcx__post_keys_reset(lcx__post_keys *k)
{
    if (k->tc) memset(k->tc, 0, LCX__TC_N * sizeof *k->tc);   /* never outlives its batch */
    k->n = k->n_unres = 0;
    k->max_tid = 0;
    k->sorted = 0;
}

void lcx__post_keys_free(lcx__post_keys *k)
{
    if (!k) return;
    free(k->key);
    free(k->tmp);
    free(k->unres);
    free(k->tc);
    memset(k, 0, sizeof *k);
}

/* Merges sorted arrays a[0..na) ... into out (ascending 64-bit keys; a term's postings come
 * out in doc order because the doc index is the next key field). */
static void merge_runs(const uint64_t *const *a, const size_t *na, int k, uint64_t *out)
{
    size_t pos[8] = {0};
    for (;;) {
        int best = -1;
        uint64_t bv = 0;
        for (int r = 0; r < k; r++)
            if (pos[r] < na[r] && (best < 0 || a[r][pos[r]] < bv)) {
                best = r;
                bv = a[r][pos[r]];
            }
        if (best < 0) return;
        /* hot: copy the whole stretch of the winning run that stays below the others */
        uint64_t lim = UINT64_MAX;
        for (int r = 0; r < k; r++)
            if (r != best && pos[r] < na[r] && a[r][pos[r]] < lim) lim = a[r][pos[r]];
        const uint64_t *s = a[best];
        size_t p = pos[best], e = p;
        while (e < na[best] && s[e] <= lim) e++;
        memcpy(out, s + p, (e - p) * sizeof *out);
        out += e - p;
        pos[best] = e;
    }
}

/* Ids for the terms resolve did not know — serial, they grow the term table (a term first
 * seen earlier in this batch is found). A second call finds every id assigned: it reads
 * the entries and fetches nothing from the table. */
int lcx__index_commit_terms(lcx_index *ix, const lcx__post_keys *runs, int n_runs)
{
    for (int r = 0; r < n_runs; r++)
        for (size_t u = 0; u < runs[r].n_unres; u++) {
            const lcx__post_unres *e = &runs[r].unres[u];
            lcx__pterm *t = &e->dt->t[e->i];
            if (u + 8 < runs[r].n_unres && ix->tab_cap) {   /* each new term misses in the table: prefetch */
                const lcx__post_unres *f = &runs[r].unres[u + 8];
                const lcx__pterm *ft = &f->dt->t[f->i];
                if (ft->tid >= ix->n_terms) _mm_prefetch((const char *)&ix->tab[(uint32_t)ft->hash & (ix->tab_cap - 1)], _MM_HINT_T0);
            }
            if (t->tid >= ix->n_terms) {
                int64_t tid = lcx__index_term_get(ix, e->dt->pool + t->off, t->len, t->hash);
                if (tid < 0) return (int)tid;
                t->tid = (uint32_t)tid;
            }
        }
    return 0;
}

/* hot (publish, 2-core machines): the two workers' runs merged into out without a branch
 * per key (their tids interleave key by key: the stretch loop above mispredicts on almost
 * every one), then the new terms' keys (nu, sorted; mostly above every old key: new ids)
 * merged in from the back, moving only the keys above each of them. Same result as
 * merge_runs: keys are distinct (each names its document). */
static void merge_two_plus(const uint64_t *a, size_t na, const uint64_t *b, size_t nb, const uint64_t *u, size_t nu,
                           uint64_t *out)
{
    size_t ia = 0, ib = 0, o = 0;
    while (ia < na && ib < nb) {
        const uint64_t x = a[ia], y = b[ib];
        const int t = y < x;
        out[o++] = t ? y : x;
        ib += (size_t)t;
        ia += (size_t)!t;
    }
    if (ia < na) memcpy(out + o, a + ia, (na - ia) * sizeof *out), o += na - ia;
    if (ib < nb) memcpy(out + o, b + ib, (nb - ib) * sizeof *out), o += nb - ib;
    for (; nu; nu--) {   /* out[0..o) and u[0..nu) into out[0..o + nu), from the top */
        const uint64_t v = u[nu - 1];
        size_t lo = o;
        while (lo > 0 && out[lo - 1] > v) lo--;
        memmove(out + lo + nu, out + lo, (o - lo) * sizeof *out);
        out[lo + nu - 1] = v;
        o = lo;
    }
}

static int do_commit_keys(lcx_index *ix, uint32_t n, const char *const *text, const uint32_t *len, int copy_text,
                           const uint8_t *rows, const float *scales, lcx__doc_terms *const *dt,
                           const lcx__post_keys *runs, int n_runs, uint32_t *first_id)
{
    if (n >= (1u << 24) || n_runs < 0 || n_runs > 6) return LCX_ELIMIT;
    int rc = lcx__index_reserve(ix, n);
    if (rc) return rc;
    const uint32_t first = ix->n_docs;
    size_t total = 0, nu = 0;
    for (int r = 0; r < n_runs; r++) {
        total += runs[r].n + runs[r].n_unres;
        nu += runs[r].n_unres;
    }
    uint64_t *key = NULL;
    if (total && !(key = pkey_reserve(ix, total))) return LCX_ENOMEM;
    if ((rc = lcx__index_commit_terms(ix, runs, n_runs))) return rc;
    /* the new terms' keys go to the scratch half and are sorted there (few: new
     * vocabulary), by document first: each run lists its own in document order, but runs
     * may interleave documents (workers take groups of a batch) */
    uint64_t *nk = key ? key + ix->pkey_cap : NULL, *sk = nk;
    size_t m = 0;
    for (int r = 0; r < n_runs; r++)
        for (size_t u = 0; u < runs[r].n_unres; u++) {
            const lcx__post_unres *e = &runs[r].unres[u];
            nk[m++] = (uint64_t)e->dt->t[e->i].tid << 32 | e->lo;
        }
    if (nu) {   /* key[] is free until the merge below */
        uint64_t *bydoc = n_runs > 1 ? radix_field(nk, key, nu, 0, n << 8) : nk;   /* by lo = doc << 8 | tf */
        sk = radix_hi(bydoc, bydoc == nk ? key : nk, nu, ix->n_terms - 1);
        if (sk == key) {                    /* keep the merge input out of its output */
            memcpy(nk, key, nu * sizeof *nk);
            sk = nk;
        }
    }
    /* the workers' sorted runs and the new terms' keys, merged into key[0..total) */
    const uint64_t *in[8];
    size_t na[8];
    int k = 0;
    for (int r = 0; r < n_runs; r++) {
        if (!runs[r].sorted) return LCX_EINVAL;   /* caller bug */
        in[k] = runs[r].key;
        na[k++] = runs[r].n;
    }
    in[k] = sk;
    na[k++] = nu;
    if (total && n_runs == 2) merge_two_plus(in[0], na[0], in[1], na[1], in[2], na[2], key);
    else if (total) merge_runs(in, na, k, key);
    if ((rc = post_keys(ix, n, first, total))) return rc;
    return commit_docs(ix, n, text, len, copy_text, rows, scales, dt, first_id);
}

int lcx__index_commit_keys(lcx_index *ix, uint32_t n, const char *const *text, const uint32_t *len, int copy_text,
                           const uint8_t *rows, const float *scales, lcx__doc_terms *const *dt,
                           const lcx__post_keys *runs, int n_runs, uint32_t *first_id)
{
    int rc = do_commit_keys(ix, n, text, len, copy_text, rows, scales, dt, runs, n_runs, first_id);
    if (rc < 0) ix->post_failed = 1;   /* postings of unpublished ids may be left: see post_run */
    return rc;
}

