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
 * See index.h for the base (mapped snapshot) / own (appended) split.
 *
 * This file: the index's life (new, free, growth of the per-document arrays and the dense
 * rows), the own-text arena, the base attach of a mapped snapshot, and the public
 * lcx_index_* calls. Elsewhere: document-term preparation (prep.c), the term table and
 * term-id lookups (terms.c), posting storage (postings.c), the commit paths (commit.c),
 * search (search.c).
 * Locks: none of its own (index.h); writers (commit, reserve, remove) run under the store's rw held
 * exclusively, readers (row, postings, df) under rw shared. */
#include "index/index.h"
#include "embed/embed.h"
#include "util/util.h"
#include <stdlib.h>
#include <string.h>

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

char *lcx__index_arena_alloc(lcx_index *ix, size_t n)
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
            nb = lcx__alloc_huge(total);
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
    lcx__big_free(ix->vec8, (size_t)ix->vec_cap * ix->dim);
    free(ix->vsc);
    lcx__big_free(ix->tab, (size_t)ix->tab_cap * sizeof *ix->tab);
    free(ix->otstr);
    free(ix->otlen);
    if (ix->pl) {
        for (uint32_t i = 0; i < ix->n_terms; i++)
            if (ix->pl[i].cap > PS_MAXCAP) free(ix->pl[i].doc);   /* smaller: in the slabs */
        lcx__big_free(ix->pl, (size_t)ix->pl_cap * sizeof *ix->pl);
    }
    lcx__palloc_free(&ix->palloc[0]);
    lcx__palloc_free(&ix->palloc[1]);
    free(ix->pkey);
    for (struct lcx__ablock *b = ix->arena; b;) {
        struct lcx__ablock *n = b->next;
        free(b);
        b = n;
    }
    free(ix);
}

int lcx__index_grow(void **p, uint32_t *cap, uint32_t need, size_t elt, size_t *acct)
{
    if (need <= *cap) return 0;
    uint32_t nc = *cap ? *cap : 64;
    while (nc < need) {
        if (nc > UINT32_MAX / 2) return LCX_ELIMIT;
        nc *= 2;
    }
    void *np = lcx__big_realloc(*p, (size_t)*cap * elt, (size_t)nc * elt);   /* grown part zeroed */
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
        uint8_t *v8 = lcx__big_realloc(ix->vec8, (size_t)ix->vec_cap * ix->dim, (size_t)nc * ix->dim);
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

/* ---------------------------------------------------------------- base and public calls */
int lcx__index_attach_base(lcx_index *ix, const lcx__index_base *b, uint32_t n_docs)
{
    if (ix->n_docs || ix->n_terms || b->vn != n_docs) return LCX_ESTATE;
    ix->base = *b;
    ix->n_terms = b->nt;
    int rc = lcx__index_grow((void **)&ix->pl, &ix->pl_cap, b->nt + 1, sizeof *ix->pl, &ix->own_bytes);
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

