/* In-memory hybrid index: incremental BM25 inverted index + flat 8-bit dense vectors.
 *
 * BM25 (Robertson/Spärck Jones, Lucene's non-negative idf):
 *   idf(t)   = ln(1 + (N − df + 0.5) / (df + 0.5))
 *   s(t, d)  = idf · tf·(k1+1) / (tf + k1·(1 − b + b·dl/avgdl)),  k1 = 1.2, b = 0.75
 * (the standard defaults; spans are similar in length, so length normalisation matters
 * little, and tf saturates quickly, which suits spans that repeat boilerplate). N and
 * avgdl count live documents; df counts every document that ever held the term
 * (tombstoned ones included) because postings are append-only: removal marks a bit and
 * never rewrites a list. With few removals the difference is negligible.
 *
 * Incremental: a new document appends one (doc, tf) posting to the tail list of each
 * of its distinct terms (amortised O(1)), one u8 row (embed.h), and its text. Nothing is rebuilt.
 * See index.h for the base (mapped snapshot) / own (appended) split. */
#include "index/index.h"
#include "embed/embed.h"
#include "embed/hfeat.h"
#include "text/tokenize_inl.h"
#include "rerank/rerank.h"
#include "text/text.h"
#include "util/util.h"
#include <assert.h>
#include <immintrin.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---------------------------------------------------------------- arena
 * Own texts and term strings, bump-allocated from blocks that are freed with the index.
 * Blocks grow with the arena (half of what it holds so far, 1–8 MiB), and blocks of
 * ≥ 4 MiB are 2 MiB aligned and advised MADV_HUGEPAGE: ingest copies ~1 KB of text per
 * span into fresh memory, and with 4 KiB pages that is one page fault (fault entry, memcg
 * charge, LRU insert, clear) per 4 spans, ~8% of ingest CPU in perf. With
 * transparent huge pages in "madvise" mode (Debian's default) one fault maps 2 MiB. Small
 * indexes (tests, sessions) never reach 4 MiB blocks, so they do not pay 2 MiB of RSS
 * for a few texts. Without THP, or if the advice fails, it is just a bigger block. */
#define ARENA_MIN (1u << 20)
#define ARENA_MAX (8u << 20)

struct lcx__ablock {
    struct lcx__ablock *next;
    size_t used, cap;
    char data[];
};

/* The index's big growing arrays (rows, term table, list headers) are lcx_big_realloc
 * blocks: from 4 MiB on 2 MiB aligned and huge-page advised, grown by moving pages
 * (mremap), not by copying. Each is released with lcx_big_free and its byte size. */

static char *arena_alloc(lcx_index *ix, size_t n)
{
    struct lcx__ablock *b = ix->arena;
    if (!b || b->cap - b->used < n) {
        size_t want = ix->arena_bytes / 2;
        want = want < ARENA_MIN ? ARENA_MIN : want > ARENA_MAX ? ARENA_MAX : want;
        if (n > SIZE_MAX / 2 - LCX_HUGE_PAGE) return NULL;
        size_t cap = n > want ? n : want, total = sizeof *b + cap;
        struct lcx__ablock *nb;
        if (cap >= LCX_HUGE_MIN) {
            total = (total + LCX_HUGE_PAGE - 1) & ~(size_t)(LCX_HUGE_PAGE - 1);
            nb = lcx_alloc_huge(total);
        } else {
            nb = malloc(total);
        }
        if (!nb) return NULL;
        nb->cap = total - sizeof *nb;
        nb->used = 0;
        /* the rest of the old block is abandoned (< n bytes: at most one request's worth) */
        nb->next = b;
        ix->arena = nb;
        ix->arena_bytes += total;
        ix->own_bytes += total;
        b = nb;
    }
    char *p = b->data + b->used;
    b->used += n;
    return p;
}

#define PS_MAXCAP 4096u   /* posting blocks up to this capacity come from the slabs (below) */
static void ps_free_all(lcx__palloc *a);

/* ---------------------------------------------------------------- prepare */
void lcx__prep_free(lcx__prep *p)
{
    if (!p) return;
    free(p->t);
    free(p->tab);
    free(p->pool);
    free(p->pf);
    free(p->gp);
    memset(p, 0, sizeof *p);
}

static int prep_grow_tab(lcx__prep *p, uint32_t cap)
{
    uint32_t *t = calloc(cap, sizeof *t);
    if (!t) return LCX_ENOMEM;
    for (uint32_t i = 0; i < p->nt; i++) {
        uint32_t j = (uint32_t)p->t[i].hash & (cap - 1);
        while (t[j]) j = (j + 1) & (cap - 1);
        t[j] = i + 1;
    }
    free(p->tab);
    p->tab = t;
    p->tab_cap = cap;
    return 0;
}

/* hot: one call per indexed token of every ingested span (inlined into the callbacks).
 * Returns 1 when the term is new in the span, 0 when seen before, < 0 on error; *ti = its
 * index in p->t. */
static inline __attribute__((always_inline)) int prep_add(lcx__prep *p, const char *tok, size_t n, uint64_t h, int rd16,
                                                          uint32_t *ti)
{
    p->dl++;
    uint32_t j = (uint32_t)h & (p->tab_cap - 1);
    for (;;) {
        uint32_t e = p->tab[j];
        if (!e) break;
        lcx__pterm *t = &p->t[e - 1];
        /* (hash, length) identifies a term, as in the index's term table (term_find):
         * no byte compare (a libc call per repeated token) */
        if (t->hash == h && t->len == n) {
            if (t->tf < 65535) t->tf++;
            *ti = e - 1;
            return 0;
        }
        j = (j + 1) & (p->tab_cap - 1);
    }
    if (p->nt == p->cap) {
        uint32_t nc = p->cap ? p->cap * 2 : 256;
        lcx__pterm *nt = realloc(p->t, nc * sizeof *nt);
        if (!nt) return LCX_ENOMEM;
        p->t = nt;
        lcx__pfeat *nf = realloc(p->pf, nc * sizeof *nf);
        if (!nf) return LCX_ENOMEM;   /* p->t grown, cap not: consistent */
        p->pf = nf;
        p->cap = nc;
    }
    if (p->pool_len + n + 16 > p->pool_cap) {   /* + 16: room for a 16-byte store */
        size_t nc = p->pool_cap ? p->pool_cap * 2 : 4096;
        while (nc < p->pool_len + n + 16) nc *= 2;
        char *np = realloc(p->pool, nc);
        if (!np) return LCX_ENOMEM;
        p->pool = np;
        p->pool_cap = nc;
    }
    if (rd16 && n <= 16)   /* tok has 16 readable bytes (rd16), the pool 16 writable */
        _mm_storeu_si128((__m128i *)(p->pool + p->pool_len), _mm_loadu_si128((const __m128i *)tok));
    else
        lcx__copy_tok(p->pool + p->pool_len, tok, n);   /* n ≤ LCX_TOK_MAX: no libc call */
    p->t[p->nt] = (lcx__pterm){h, (uint32_t)p->pool_len, (uint16_t)n, 1, UINT32_MAX, 0};
    p->pool_len += n;
    *ti = p->nt;
    p->tab[j] = ++p->nt;
    if (p->nt * 2 > p->tab_cap) {
        int rc = prep_grow_tab(p, p->tab_cap * 2);
        if (rc) return rc;
    }
    return 1;
}

static int prep_tok(const char *tok, size_t n, int kind, void *ud)
{
    if (kind == LCX_TOK_WORD && lcx__stopword_inl(tok, n)) return 0;
    uint32_t ti;
    int rc = prep_add(ud, tok, n, lcx__hash64_inl(tok, n, 0), 0, &ti);
    return rc < 0 ? rc : 0;
}

/* Room for one more token's 3-gram lanes (2 · lcx__hfeat_c3_end(LCX_TOK_MAX) u32) in gp;
 * offsets are u32 (a span would need 16 GB of lanes to overflow them). */
#define GP_TOK (2 * (LCX_TOK_MAX + 8))
static int prep_grow_gp(lcx__prep *p)
{
    size_t nc = p->gp_cap ? p->gp_cap * 2 : 8192;
    while (nc < p->gp_len + GP_TOK) nc *= 2;
    if (nc > UINT32_MAX) return LCX_ENOMEM;
    uint32_t *g = realloc(p->gp, nc * sizeof *g);
    if (!g) return LCX_ENOMEM;
    p->gp = g;
    p->gp_cap = nc;
    return 0;
}

typedef struct {
    lcx__prep *p;
    lcx__hfeat f;
    int sh;                 /* dim = 2^(64 − sh) (AVX2 3-grams, cached per term); 0: other dims */
    lcx__c3k k3;            /* their constants (when sh) */
    uintptr_t lo, span;     /* tokens starting in [lo, lo + span] can be read with one 8-byte load */
    uintptr_t lo16, span16; /* ... with one 16-byte load */
} pe_ctx;

/* hot: per token of every ingested span (inlined into the tokenizer). A token shorter than
 * 8 bytes is packed once (one load + bzhi when it lies in the text with 8 readable bytes,
 * else byte by byte: folded tokens and parts live in the tokenizer's buffers); the pack is
 * both the stopword key and the hash's last word. */
static inline __attribute__((always_inline)) int prep_embed_tok(const char *tok, size_t n, int kind, void *ud)
{
    pe_ctx *c = ud;
    uint64_t key = 0;
    if (n < 8) {
        if ((uintptr_t)tok - c->lo <= c->span) {
            uint64_t v;
            memcpy(&v, tok, 8);
            key = _bzhi_u64(v, (unsigned)(8 * n));
        } else {
            key = lcx__pack_lt8(tok, n);
        }
        if (kind == LCX_TOK_WORD && lcx__stopword_key(key, n)) return 0;
    }
    uint64_t h = lcx__hash64_tok(tok, n, key);
    /* 16 readable bytes from tok (almost always, in the text): one-load copies */
    int rd16 = (uintptr_t)tok - c->lo16 <= c->span16;
    lcx__prep *p = c->p;
    uint32_t ti;
    int rc = prep_add(p, tok, n, h, rd16, &ti);
    if (rc < 0) return rc;
    if (!c->sh) {   /* dim not a power of two: no per-term cache */
        lcx__hfeat_token_rd(&c->f, tok, n, kind, h, rd16);
        return 0;
    }
    /* The token's features in lcx__hfeat_token_rd's order (whole token, bigram, 3-grams).
     * Those that depend on the token alone (fh, the 3-gram lanes) are computed on its first
     * occurrence in the span and kept per term: repeats (~18% of prose tokens, ~64% of
     * code tokens) replay the same adds in the same order, so the vector is bit-identical.
     * A term is (hash, length) as in the term table: two different tokens of one span with
     * equal 64-bit hash and length would share features (as they already share a BM25 term). */
    lcx__pfeat *pf = &p->pf[ti];
    uint64_t fh;
    if (rc) {
        fh = lcx__hfeat_fh(h);
        pf->fh = fh;
        pf->go = UINT32_MAX;
    } else {
        fh = pf->fh;
    }
    lcx__hfeat *f = &c->f;
    /* hf_add_feat with the bucket as a shift: ((h >> 32) · 2^k) >> 32 = h >> (64 − k) */
    f->acc[fh >> c->sh] += hf_signed_w(lcx__hfeat_w(kind), (uint32_t)(fh & 1));
    if (kind != LCX_TOK_PART) {
        if (f->prev) {
            uint64_t bh = hf_mix64(f->prev * 31 + fh);
            f->acc[bh >> c->sh] += hf_signed_w(W_BIGRAM, (uint32_t)(bh & 1));
        }
        f->prev = fh;
    }
    if (kind != LCX_TOK_NUMBER && n >= 4) {
        size_t m = n < LCX_TOK_MAX ? n : LCX_TOK_MAX, end = lcx__hfeat_c3_end(m);
        uint32_t go = pf->go;
        if (go == UINT32_MAX) {   /* first occurrence with 3-grams (a NUMBER has none) */
            if (p->gp_len + GP_TOK > p->gp_cap && (rc = prep_grow_gp(p))) return rc;
            go = (uint32_t)p->gp_len;
            pf->go = go;
            p->gp_len += 2 * end;
            lcx__hfeat_c3_lanes_k(p->gp + go, p->gp + go + end, &c->k3, tok, m, lcx__hfeat_wc(n), rd16);
        }
        lcx__hfeat_c3_add(f->acc, p->gp + go, p->gp + go + end, end);
    }
    return 0;
}

static int prep_reset(lcx__prep *p)
{
    p->nt = 0;
    p->pool_len = 0;
    p->gp_len = 0;
    p->dl = 0;
    if (p->tab_cap < 512) return prep_grow_tab(p, 512);
    memset(p->tab, 0, p->tab_cap * sizeof *p->tab);
    return 0;
}

int lcx__prep_embed(lcx__prep *p, const lcx_embedder *emb, const char *text, size_t len, float *vec)
{
    if (!lcx__is_hash_embedder(emb)) {
        int rc = lcx__prep_text(p, text, len);
        if (rc < 0) return rc;
        const char *t = text ? text : "";
        rc = lcx_embed(emb, &t, &len, 1, vec);
        return rc < 0 ? rc : 0;
    }
    int rc = prep_reset(p);
    if (rc) return rc;
    uint32_t dim = (uint32_t)lcx_embedder_dim(emb);
    memset(vec, 0, dim * sizeof *vec);
    /* no token starts at or past text + len, so len < 8 leaves the load window empty
     * (lo = 0, span = 0: only a null token pointer would match) */
    int sh = (dim & (dim - 1)) == 0 && dim >= 2 ? 64 - __builtin_ctzll(dim) : 0;
    pe_ctx c = {.p = p, .f = {vec, dim, 0}, .sh = sh, .lo = len >= 8 ? (uintptr_t)text : 0,
                .span = len >= 8 ? len - 8 : 0, .lo16 = len >= 16 ? (uintptr_t)text : 0,
                .span16 = len >= 16 ? len - 16 : 0};
    if (sh) lcx__hfeat_c3_consts(&c.k3, sh);
    if (len && (rc = lcx__tokenize_inl(text, len, prep_embed_tok, &c)) < 0) return rc;   /* callback inlined */
    lcx__l2_normalise(vec, dim);
    return 0;
}

int lcx__prep_text(lcx__prep *p, const char *text, size_t len)
{
    int rc = prep_reset(p);
    if (rc) return rc;
    return len ? lcx_tokenize(text, len, prep_tok, p) : 0;
}

size_t lcx__prep_size(const lcx__prep *p)
{
    size_t need = sizeof(lcx__doc_terms) + (size_t)p->nt * sizeof(lcx__pterm) + p->pool_len;
    return (need + 15) & ~(size_t)15;
}

lcx__doc_terms *lcx__prep_finish_to(const lcx__prep *p, void *mem)
{
    lcx__doc_terms *d = mem;
    d->dl = p->dl;
    d->nt = p->nt;
    d->t = (lcx__pterm *)(d + 1);
    d->pool = (char *)(d->t + p->nt);
    if (p->nt) memcpy(d->t, p->t, p->nt * sizeof(lcx__pterm));
    if (p->pool_len) memcpy(d->pool, p->pool, p->pool_len);
    return d;
}

int lcx__prep_finish(const lcx__prep *p, lcx__doc_terms **out)
{
    size_t need = sizeof(lcx__doc_terms) + (size_t)p->nt * sizeof(lcx__pterm) + p->pool_len;
    lcx__doc_terms *d = malloc(need);
    if (!d) return LCX_ENOMEM;
    d->dl = p->dl;
    d->nt = p->nt;
    d->t = (lcx__pterm *)(d + 1);
    d->pool = (char *)(d->t + p->nt);
    if (p->nt) memcpy(d->t, p->t, p->nt * sizeof(lcx__pterm));
    if (p->pool_len) memcpy(d->pool, p->pool, p->pool_len);
    *out = d;
    return 0;
}

/* ---------------------------------------------------------------- index */
int lcx_index_new(const lcx_embedder *emb, lcx_index **out)
{
    if (out) *out = NULL;
    if (!emb || !out) return LCX_EINVAL;
    lcx_index *ix = calloc(1, sizeof *ix);
    if (!ix) return LCX_ENOMEM;
    ix->emb = emb;
    ix->dim = (uint32_t)lcx_embedder_dim(emb);
    *out = ix;
    return 0;
}

void lcx_index_free(lcx_index *ix)
{
    if (!ix) return;
    free(ix->dl);
    free(ix->text);
    free(ix->text_len);
    free(ix->del);
    lcx_big_free(ix->vec8, (size_t)ix->vec_cap * ix->dim);
    free(ix->vsc);
    lcx_big_free(ix->tab, (size_t)ix->tab_cap * sizeof *ix->tab);
    free(ix->otstr);
    free(ix->otlen);
    if (ix->pl) {
        for (uint32_t i = 0; i < ix->n_terms; i++)
            if (ix->pl[i].cap > PS_MAXCAP) free(ix->pl[i].doc);   /* smaller: in the slabs */
        lcx_big_free(ix->pl, (size_t)ix->pl_cap * sizeof *ix->pl);
    }
    ps_free_all(&ix->palloc[0]);
    ps_free_all(&ix->palloc[1]);
    free(ix->pkey);
    for (struct lcx__ablock *b = ix->arena; b;) {
        struct lcx__ablock *n = b->next;
        free(b);
        b = n;
    }
    free(ix);
}

static int grow(void **p, uint32_t *cap, uint32_t need, size_t elt, size_t *acct)
{
    if (need <= *cap) return 0;
    uint32_t nc = *cap ? *cap : 64;
    while (nc < need) {
        if (nc > UINT32_MAX / 2) return LCX_ELIMIT;
        nc *= 2;
    }
    void *np = lcx_big_realloc(*p, (size_t)*cap * elt, (size_t)nc * elt);   /* grown part zeroed */
    if (!np) return LCX_ENOMEM;
    if (acct) *acct += (size_t)(nc - *cap) * elt;
    *p = np;
    *cap = nc;
    return 0;
}

int lcx__index_reserve(lcx_index *ix, uint32_t n)
{
    if (n > UINT32_MAX - ix->n_docs - 64) return LCX_ELIMIT;
    uint32_t need = ix->n_docs + n;
    if (need > ix->docs_cap) {
        uint32_t cap = ix->docs_cap, nc = cap ? cap : 64;
        while (nc < need) nc = nc > UINT32_MAX / 2 ? need : nc * 2;
        nc = (nc + 63) & ~63u;
        uint32_t *dl = realloc(ix->dl, (size_t)nc * sizeof *dl);
        if (!dl) return LCX_ENOMEM;
        ix->dl = dl;
        const char **tx = realloc(ix->text, (size_t)nc * sizeof *tx);
        if (!tx) return LCX_ENOMEM;
        ix->text = tx;
        uint32_t *tl = realloc(ix->text_len, (size_t)nc * sizeof *tl);
        if (!tl) return LCX_ENOMEM;
        ix->text_len = tl;
        uint64_t *del = realloc(ix->del, (size_t)nc / 64 * sizeof *del);
        if (!del) return LCX_ENOMEM;
        memset(del + cap / 64, 0, (size_t)(nc - cap) / 64 * sizeof *del);
        ix->del = del;
        ix->own_bytes += (size_t)(nc - cap) * (4 + sizeof(char *) + 4) + (nc - cap) / 8;
        ix->docs_cap = nc;
    }
    uint32_t rows = need > ix->base.vn ? need - ix->base.vn : 0;
    if (rows > ix->vec_cap) {
        uint32_t nc = ix->vec_cap ? ix->vec_cap : 64;
        while (nc < rows) nc = nc > UINT32_MAX / 2 ? rows : nc * 2;
        /* rows are written once per ingested span: huge pages from 4 MiB on */
        uint8_t *v8 = lcx_big_realloc(ix->vec8, (size_t)ix->vec_cap * ix->dim, (size_t)nc * ix->dim);
        if (!v8) return LCX_ENOMEM;
        ix->vec8 = v8;
        float *sc = realloc(ix->vsc, (size_t)nc * sizeof *sc);
        if (!sc) return LCX_ENOMEM;
        ix->vsc = sc;
        ix->own_bytes += (size_t)(nc - ix->vec_cap) * (ix->dim + 4);
        ix->vec_cap = nc;
    }
    return 0;
}

const uint8_t *lcx__index_row(const lcx_index *ix, uint32_t id, float *scale)
{
    if (id < ix->base.vn) {
        *scale = ix->base.vsc[id];
        return ix->base.vec8 + (size_t)id * ix->dim;
    }
    *scale = ix->vsc[id - ix->base.vn];
    return ix->vec8 + (size_t)(id - ix->base.vn) * ix->dim;
}

int lcx__index_is_deleted(const lcx_index *ix, uint32_t id)
{
    return id >= ix->n_docs || (ix->del[id >> 6] >> (id & 63) & 1);
}

/* Term lookup: base table first, then own. Returns id or UINT32_MAX.
 * A term is identified by (64-bit hash, length) without comparing its bytes: that saves
 * two dependent cache misses per lookup (hot at ingest: ~120 lookups per span). Two
 * distinct terms of equal length collide with probability ~n²/2⁶⁵ (≈ 3e-8 for a million
 * terms); a collision would merge their postings (BM25 slightly off for those two terms),
 * never a crash. */
static inline __attribute__((always_inline)) uint32_t term_find(const lcx_index *ix, const char *t, uint32_t len, uint64_t h,
                                                                  uint32_t *own_slot)
{
    (void)t;
    if (ix->base.tab_cap) {
        uint32_t m = ix->base.tab_cap - 1, j = (uint32_t)h & m;
        for (uint32_t probes = 0; probes < ix->base.tab_cap; probes++, j = (j + 1) & m) {
            const lcx__tslot *s = &ix->base.tab[j];
            if (!s->id1) break;
            if (s->hash == h && s->len == len && s->id1 <= ix->base.nt) return s->id1 - 1;
        }
    }
    if (ix->tab_cap) {
        uint32_t m = ix->tab_cap - 1, j = (uint32_t)h & m;
        for (;; j = (j + 1) & m) {
            const lcx__tslot *s = &ix->tab[j];
            if (!s->id1) break;
            if (s->hash == h && s->len == len) return s->id1 - 1;
        }
        if (own_slot) *own_slot = j;
    }
    return UINT32_MAX;
}

const char *lcx__index_term(const lcx_index *ix, uint32_t id, uint32_t *len)
{
    if (id < ix->base.nt) {
        uint64_t a = ix->base.toff[id], b = ix->base.toff[id + 1];
        *len = (uint32_t)(b - a);
        return ix->base.tstr + a;
    }
    if (id >= ix->n_terms) { *len = 0; return NULL; }
    *len = ix->otlen[id - ix->base.nt];
    return ix->otstr[id - ix->base.nt];
}

static int tab_grow(lcx_index *ix)
{
    uint32_t nc = ix->tab_cap ? ix->tab_cap * 2 : 1024;
    lcx__tslot *t = lcx_big_realloc(NULL, 0, (size_t)nc * sizeof *t);   /* zeroed */
    if (!t) return LCX_ENOMEM;
    for (uint32_t i = 0; i < ix->tab_cap; i++) {
        if (!ix->tab[i].id1) continue;
        uint32_t j = (uint32_t)ix->tab[i].hash & (nc - 1);
        while (t[j].id1) j = (j + 1) & (nc - 1);
        t[j] = ix->tab[i];
    }
    ix->own_bytes += (size_t)(nc - ix->tab_cap) * sizeof *t;
    lcx_big_free(ix->tab, (size_t)ix->tab_cap * sizeof *t);
    ix->tab = t;
    ix->tab_cap = nc;
    return 0;
}

/* Finds or creates the term; returns its id or a negative error (as int64). */
static int64_t term_get(lcx_index *ix, const char *t, uint32_t len, uint64_t h)
{
    if ((ix->tab_used + 1) * 2 > ix->tab_cap) {
        int rc = tab_grow(ix);
        if (rc) return rc;
    }
    uint32_t slot = 0;
    uint32_t id = term_find(ix, t, len, h, &slot);
    if (id != UINT32_MAX) return id;
    if (ix->n_terms == UINT32_MAX - 1) return LCX_ELIMIT;
    uint32_t o = ix->n_terms - ix->base.nt;
    int rc;
    if (o + 1 > ix->ot_cap) {
        uint32_t nc = ix->ot_cap ? ix->ot_cap * 2 : 1024;
        while (nc < o + 1) nc *= 2;
        const char **a = realloc(ix->otstr, (size_t)nc * sizeof *a);
        if (!a) return LCX_ENOMEM;
        ix->otstr = a;
        uint32_t *b = realloc(ix->otlen, (size_t)nc * sizeof *b);
        if (!b) return LCX_ENOMEM;
        ix->otlen = b;
        ix->own_bytes += (size_t)(nc - ix->ot_cap) * (sizeof *a + sizeof *b);
        ix->ot_cap = nc;
    }
    if ((rc = grow((void **)&ix->pl, &ix->pl_cap, ix->n_terms + 1, sizeof *ix->pl, &ix->own_bytes))) return rc;
    char *s = arena_alloc(ix, len ? len : 1);
    if (!s) return LCX_ENOMEM;
    memcpy(s, t, len);
    ix->otstr[o] = s;
    ix->otlen[o] = len;
    id = ix->n_terms++;
    ix->tab[slot] = (lcx__tslot){h, id + 1, len};
    ix->tab_used++;
    return id;
}

/* ---------------------------------------------------------------- posting storage
 * A list's doc ids and tfs live in ONE block: (cap) u32 doc ids, then (cap) u8 tfs; cap is a
 * power of two ≥ 4. Blocks of cap ≤ PS_MAXCAP come from a per-index slab allocator with one
 * free list per capacity class: a list that doubles returns its old block to its class,
 * where the next list to reach that size takes it. Why not realloc: ingest grows ~100
 * lists per span, most of them tiny (the median list holds 1–3 postings); two reallocs
 * per growth (doc and tf) through malloc cost a lock, chunk headers (16 B each, more
 * than the postings of a rare term) and page faults in the heap (~8% of ingest CPU went to
 * malloc internals and heap faults in perf). Slab chunks grow from 16 KiB with the slabs
 * (half their total) and are 2 MiB (huge-page advised) once they hold ≥ 4 MiB of postings. Bigger lists
 * (common words) get malloc'd blocks, copied on doubling (amortised O(1)).
 * Two allocators, by term-id parity: the batch publish appends on 2 threads split by
 * parity (post_run), so each allocator has one writer. Callers hold the index's write
 * lock (or own the index). */
#define PS_MINCAP 4u
#define PS_SMALL_CHUNK (16u << 10)   /* the first chunk: small indexes (sessions) stay small */

struct lcx__pschunk {
    struct lcx__pschunk *next;
    size_t size;   /* bytes including this header */
};

static inline int ps_class(uint32_t cap) { return __builtin_ctz(cap) - __builtin_ctz(PS_MINCAP); }

/* A block for cap postings (5·cap bytes, 4-byte aligned); *bytes grows by new chunk bytes. */
static char *ps_get(lcx__palloc *a, uint32_t cap, size_t *bytes)
{
    int c = ps_class(cap);
    char *b = a->free[c];
    if (b) {
        memcpy(&a->free[c], b, sizeof(char *));   /* the link lives in the free block */
        return b;
    }
    size_t need = (size_t)cap * 5;
    if (a->left < need) {
        /* the rest of the old chunk (< need bytes) goes to the smaller classes it fits */
        for (int k = c - 1; k >= 0 && a->left; k--) {
            size_t sz = (size_t)(PS_MINCAP << k) * 5;
            while (a->left >= sz) {
                memcpy(a->bump, &a->free[k], sizeof(char *));
                a->free[k] = a->bump;
                a->bump += sz;
                a->left -= sz;
            }
        }
        /* chunks grow with the slabs (half their total, 16 KiB … 2 MiB); 2 MiB ones once
         * the slabs hold 4 MiB, aligned and huge-page advised */
        int huge = a->total >= LCX_HUGE_MIN;
        size_t size = PS_SMALL_CHUNK;
        while (size < a->total / 2 && size < LCX_HUGE_PAGE / 2) size *= 2;
        while (size < need + sizeof(struct lcx__pschunk)) size *= 2;   /* a 4096-posting block is 20 KiB */
        if (huge) size = LCX_HUGE_PAGE;
        struct lcx__pschunk *ch = huge ? lcx_alloc_huge(size) : malloc(size);
        if (!ch) return NULL;
        ch->next = a->chunks;
        ch->size = size;
        a->chunks = ch;
        a->total += size;
        *bytes += size;
        a->bump = (char *)(ch + 1);
        a->left = size - sizeof *ch;
    }
    b = a->bump;
    a->bump += need;
    a->left -= need;
    return b;
}

static void ps_put(lcx__palloc *a, char *b, uint32_t cap)
{
    int c = ps_class(cap);
    memcpy(b, &a->free[c], sizeof(char *));
    a->free[c] = b;
}

static void ps_free_all(lcx__palloc *a)
{
    for (struct lcx__pschunk *c = a->chunks; c;) {
        struct lcx__pschunk *n = c->next;
        free(c);
        c = n;
    }
    memset(a, 0, sizeof *a);
}

/* Grows list p (term id tid) to hold at least need entries (doubling). */
static int plist_reserve(lcx_index *ix, uint32_t tid, size_t *own_bytes, lcx__plist *p, uint32_t need)
{
    if (need <= p->cap) return 0;
    uint32_t nc = p->cap ? p->cap : PS_MINCAP;
    while (nc < need) {
        if (nc > UINT32_MAX / 2) return LCX_ELIMIT;
        nc *= 2;
    }
    lcx__palloc *a = &ix->palloc[tid & 1];
    char *b;
    if (nc <= PS_MAXCAP) {
        b = ps_get(a, nc, own_bytes);
    } else {
        b = malloc((size_t)nc * 5);
        *own_bytes += (size_t)nc * 5;
    }
    if (!b) return LCX_ENOMEM;
    if (p->n) {
        memcpy(b, p->doc, (size_t)p->n * sizeof *p->doc);
        memcpy(b + (size_t)nc * 4, p->tf, p->n);
    }
    if (p->cap > PS_MAXCAP) {
        free(p->doc);
        *own_bytes -= (size_t)p->cap * 5;   /* modular: a thread's counter is summed later */
    } else if (p->cap) {
        ps_put(a, (char *)p->doc, p->cap);
    }
    p->doc = (uint32_t *)(void *)b;
    p->tf = (uint8_t *)b + (size_t)nc * 4;
    p->cap = nc;
    return 0;
}

static int plist_push(lcx_index *ix, uint32_t tid, uint32_t doc, uint8_t tf)
{
    lcx__plist *p = &ix->pl[tid];
    if (p->n == p->cap) {
        int rc = plist_reserve(ix, tid, &ix->own_bytes, p, p->n + 1);
        if (rc) return rc;
    }
    p->doc[p->n] = doc;
    p->tf[p->n] = tf;
    p->n++;
    return 0;
}

/* hot (ingest, under the read lock): one table probe per distinct term, a cache miss each
 * once the table outgrows L2 — prefetch the home slots PF terms ahead. */
void lcx__index_resolve(const lcx_index *ix, lcx__doc_terms *dt)
{
    enum { PF = 8 };
    uint32_t bm = ix->base.tab_cap ? ix->base.tab_cap - 1 : 0, om = ix->tab_cap ? ix->tab_cap - 1 : 0;
    for (uint32_t i = 0; i < dt->nt && i < PF; i++) {
        if (bm) _mm_prefetch((const char *)&ix->base.tab[(uint32_t)dt->t[i].hash & bm], _MM_HINT_T0);
        if (om) _mm_prefetch((const char *)&ix->tab[(uint32_t)dt->t[i].hash & om], _MM_HINT_T0);
    }
    for (uint32_t i = 0; i < dt->nt; i++) {
        lcx__pterm *t = &dt->t[i];
        if (i + PF < dt->nt) {
            uint32_t hh = (uint32_t)t[PF].hash;
            if (bm) _mm_prefetch((const char *)&ix->base.tab[hh & bm], _MM_HINT_T0);
            if (om) _mm_prefetch((const char *)&ix->tab[hh & om], _MM_HINT_T0);
        }
        t->tid = term_find(ix, dt->pool + t->off, t->len, t->hash, NULL);
    }
}

/* Term-id cache of the ingest workers. Why: the index's term table outgrows L2 (16 B per
 * slot at ≤ 50% load: 8 MiB at ~250k terms) and every lookup is a cache miss, ~100 per span;
 * but prose repeats its common content words, and in measurements a 4096-entry
 * direct-mapped cache (64 KiB, L2-resident) answered ~65% of the lookups of a 500-span
 * batch. Misses are collected per group of 64 terms with their table slots prefetched,
 * then looked up (the misses of a group overlap in memory). Entries hold (hash, length),
 * the same identity as the table itself (term_find). */
#define LCX__TC_N 4096u
struct lcx__tcent {
    uint64_t hash;
    uint32_t len;
    uint32_t tid1;   /* term id + 1; 0 = empty */
};

static inline uint32_t tc_slot(uint64_t h) { return (uint32_t)(h >> 40) & (LCX__TC_N - 1); }

/* hot (ingest workers, under the read lock) */
void lcx__index_resolve_cached(const lcx_index *ix, lcx__doc_terms *dt, lcx__post_keys *k)
{
    if (!k->tc && !(k->tc = calloc(LCX__TC_N, sizeof *k->tc))) {
        lcx__index_resolve(ix, dt);
        return;
    }
    struct lcx__tcent *tc = k->tc;
    uint32_t bm = ix->base.tab_cap ? ix->base.tab_cap - 1 : 0, om = ix->tab_cap ? ix->tab_cap - 1 : 0;
    for (uint32_t g = 0; g < dt->nt; g += 64) {
        uint32_t e = dt->nt - g < 64 ? dt->nt : g + 64, m = 0;
        uint8_t miss[64];
        for (uint32_t i = g; i < e; i++)   /* the group's cache slots, L2 → L1, all in flight at once */
            _mm_prefetch((const char *)&tc[tc_slot(dt->t[i].hash)], _MM_HINT_T0);
        for (uint32_t i = g; i < e; i++) {
            lcx__pterm *t = &dt->t[i];
            const struct lcx__tcent *c = &tc[tc_slot(t->hash)];
            if (c->hash == t->hash && c->len == t->len && c->tid1) {
                t->tid = c->tid1 - 1;
                continue;
            }
            miss[m++] = (uint8_t)(i - g);
            uint32_t hh = (uint32_t)t->hash;
            if (bm) _mm_prefetch((const char *)&ix->base.tab[hh & bm], _MM_HINT_T0);
            if (om) _mm_prefetch((const char *)&ix->tab[hh & om], _MM_HINT_T0);
        }
        for (uint32_t q = 0; q < m; q++) {
            lcx__pterm *t = &dt->t[g + miss[q]];
            t->tid = term_find(ix, dt->pool + t->off, t->len, t->hash, NULL);
            if (t->tid != UINT32_MAX) tc[tc_slot(t->hash)] = (struct lcx__tcent){t->hash, t->len, t->tid + 1};
        }
    }
}

static int do_commit(lcx_index *ix, const char *text, uint32_t len, int copy_text, const uint8_t *row8,
                      float scale, const lcx__doc_terms *dt, uint32_t *id_out)
{
    int rc = lcx__index_reserve(ix, 1);
    if (rc) return rc;
    const char *tp = text;
    if (copy_text) {
        char *c = arena_alloc(ix, (size_t)len + 1);
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
        int64_t tid = t->tid < ix->n_terms ? (int64_t)t->tid : term_get(ix, dt->pool + t->off, t->len, t->hash);
        if (tid < 0) return (int)tid;
        lcx__plist *p = &ix->pl[tid];
        if (p->n && p->doc[p->n - 1] == id) continue;   /* retried commit */
        if ((rc = plist_push(ix, (uint32_t)tid, id, t->tf > 255 ? 255 : (uint8_t)t->tf))) return rc;
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
        if (plist_reserve(j->ix, tid, &j->bytes, p, p->n + (uint32_t)(e - i))) { j->rc = LCX_ENOMEM; return NULL; }
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
            char *c = arena_alloc(ix, (size_t)len[d] + 1);
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
                int64_t tid = term_get(ix, e->dt->pool + t->off, t->len, t->hash);
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

int lcx__index_attach_base(lcx_index *ix, const lcx__index_base *b, uint32_t n_docs)
{
    if (ix->n_docs || ix->n_terms || b->vn != n_docs) return LCX_ESTATE;
    ix->base = *b;
    ix->n_terms = b->nt;
    int rc = grow((void **)&ix->pl, &ix->pl_cap, b->nt + 1, sizeof *ix->pl, &ix->own_bytes);
    if (rc) return rc;
    if ((rc = lcx__index_reserve(ix, n_docs))) return rc;
    return 0;
}

void lcx__index_set_base_doc(lcx_index *ix, uint32_t id, const char *text, uint32_t len, uint32_t dl, int deleted)
{
    ix->text[id] = text;
    ix->text_len[id] = len;
    ix->dl[id] = dl;
    if (deleted) ix->del[id >> 6] |= 1ull << (id & 63);
    else {
        ix->n_live++;
        ix->sum_dl += dl;
    }
    if (id + 1 > ix->n_docs) ix->n_docs = id + 1;
}

int lcx_index_add(lcx_index *ix, const char *text, size_t len, const float *vec, uint32_t *id_out)
{
    if (!ix || (!text && len) || len > UINT32_MAX) return LCX_EINVAL;
    int rc;
    float *tmp = malloc((size_t)ix->dim * sizeof *tmp);   /* (dim) */
    uint8_t *row = malloc(ix->dim);                       /* (dim) */
    lcx__prep p = {0};
    lcx__doc_terms *dt = NULL;
    if (!tmp || !row) { rc = LCX_ENOMEM; goto out; }
    if (vec) {
        rc = lcx__prep_text(&p, text, len);
        memcpy(tmp, vec, (size_t)ix->dim * sizeof *tmp);
    } else {
        rc = lcx__prep_embed(&p, ix->emb, text ? text : "", len, tmp);
    }
    if (rc < 0) goto out;
    float scale;
    lcx__quant_row_u8(tmp, ix->dim, row, &scale);
    if ((rc = lcx__prep_finish(&p, &dt))) goto out;
    rc = lcx__index_commit(ix, text ? text : "", (uint32_t)len, 1, row, scale, dt, id_out);
out:
    lcx__prep_free(&p);
    free(dt);
    free(tmp);
    free(row);
    return rc < 0 ? rc : 0;
}

int lcx_index_remove(lcx_index *ix, uint32_t id)
{
    if (!ix) return LCX_EINVAL;
    if (id >= ix->n_docs) return LCX_ENOTFOUND;
    if (lcx__index_is_deleted(ix, id)) return 0;
    ix->del[id >> 6] |= 1ull << (id & 63);
    ix->n_live--;
    ix->sum_dl -= ix->dl[id];
    return 0;
}

uint32_t lcx_index_count(const lcx_index *ix) { return ix ? ix->n_live : 0; }

uint32_t lcx__index_df(const lcx_index *ix, uint32_t id)
{
    if (id >= ix->n_terms) return 0;
    uint64_t n = ix->pl[id].n;
    if (id < ix->base.nt) n += ix->base.poff[id + 1] - ix->base.poff[id];
    return n > UINT32_MAX ? UINT32_MAX : (uint32_t)n;
}

size_t lcx__index_postings(const lcx_index *ix, uint32_t id, uint32_t *doc, uint8_t *tf, size_t max)
{
    size_t k = 0;
    if (id >= ix->n_terms) return 0;
    if (id < ix->base.nt)
        for (uint64_t i = ix->base.poff[id]; i < ix->base.poff[id + 1] && k < max; i++, k++) {
            doc[k] = ix->base.pdoc[i];
            tf[k] = ix->base.ptf[i];
        }
    const lcx__plist *p = &ix->pl[id];
    for (uint32_t i = 0; i < p->n && k < max; i++, k++) {
        doc[k] = p->doc[i];
        tf[k] = p->tf[i];
    }
    return k;
}

size_t lcx__index_mem_bytes(const lcx_index *ix) { return ix ? sizeof *ix + ix->own_bytes : 0; }

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
    uint32_t id = term_find(c->ix, t, (uint32_t)n, lcx_hash64(t, n, 0), NULL);
    if (id == UINT32_MAX) return 0;
    for (uint32_t i = 0; i < c->q->nq; i++)
        if (c->q->id[i] == id) return 0;
    c->q->id[c->q->nq++] = id;
    return 0;
}

/* The reranker's term weight: the term's BM25 idf (as bm25_accumulate computes it); a
 * term the index does not know can match no document: weight of a term seen once. */
static float rr_idf(const char *t, size_t n, int kind, void *ud)
{
    (void)kind;
    const lcx_index *ix = ud;
    float N = (float)ix->n_live;
    uint32_t id = term_find(ix, t, (uint32_t)n, lcx_hash64(t, n, 0), NULL);
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
                float s = idf * tf * (k1 + 1) / (tf + kb0 + kb1 * (float)ix->dl[d]);
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
    if (q && qlen) lcx_tokenize(q, qlen, q_tok, &qc);
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
        if ((rc = lcx_rerank_prepare_idf(q ? q : "", q ? qlen : 0, rr_idf, (void *)ix, &rq)) < 0) goto out;
        if (rq) {
            /* one tokenization per re-scored candidate gives the overlap features and the
             * term proximity; with SCORE fusion the proximity joins the candidate's BM25
             * (BM25TP) and the fusion is redone before the overlap score is mixed in */
            float rr[LCX_RERANK_DEPTH], raw[LCX_RERANK_DEPTH];
            int depth = nc < LCX_RERANK_DEPTH ? nc : LCX_RERANK_DEPTH, any = 0;
            int tp = d.fusion == LCX_FUSE_SCORE;
            for (int i = 0; i < depth; i++) {
                float px = 0;
                rr[i] = lcx_rerank_score_prox(rq, ix->text[c[i].id], ix->text_len[c[i].id], tp ? &px : NULL);
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
    lcx_rerank_free(rq);
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
