/* A document's terms prepared off-lock (lcx__prep_*): one tokenization that yields the BM25
 * view (stopwords dropped, whole tokens and their parts kept) and, for the hash embedder,
 * the embedding too; the result is copied into one block (lcx__doc_terms).
 * Locks: none of its own (index.h); pure functions of the text on caller-owned scratch: any thread, no lock.
 */
#include "index/index.h"
#include "embed/embed.h"
#include "util/util.h"
#include "embed/hfeat.h"
#include "text/tokenize_inl.h"
#include "text/text.h"
#include <immintrin.h>
#include <stdlib.h>
#include <string.h>

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
        /* (hash, length) identifies a term, as in the index's term table (lcx__term_find):
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
    *out = lcx__prep_finish_to(p, d);
    return 0;
}

