/* Internal view of the hybrid index (src/index), shared with the store (src/store) which
 * persists it and maps it back. Not part of the public contract.
 *
 * Layout: every per-document and per-term structure is split into a *base* part that is
 * borrowed read-only (e.g. mmap'd from a snapshot file, so reopening costs no parsing)
 * and an *own* part that grows with appends. Appends never touch the base and never
 * rebuild anything: a new document adds one u8 row, one text, and one posting to the
 * tail list of each of its terms. */
#ifndef LCX_INDEX_INTERNAL_H
#define LCX_INDEX_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include "longctx/lcx.h"

#define LCX_BM25_K1 1.2f
#define LCX_BM25_B 0.75f

/* ---- a document's terms, prepared off-lock (pure function of the text) */
typedef struct {
    uint64_t hash;       /* lcx__hash64(term, len, 0) */
    uint32_t off;        /* into pool */
    uint16_t len;
    uint16_t tf;         /* saturates at 65535 (stored as ≤ 255 in postings) */
    uint32_t tid;        /* term id when already known (lcx__index_resolve), else UINT32_MAX */
    uint32_t pad;
} lcx__pterm;

typedef struct {
    uint32_t dl;         /* indexed tokens (BM25 document length) */
    uint32_t nt;         /* distinct terms */
    lcx__pterm *t;       /* (nt) */
    char *pool;          /* term bytes */
} lcx__doc_terms;

/* Per distinct term of the span being prepared by lcx__prep_embed (hash embedder): the
 * token's order-independent features, so that a repeated token replays them instead of
 * recomputing (same adds in the same order: bit-identical vectors). */
typedef struct {
    uint64_t fh;         /* whole-token feature hash (lcx__hfeat_fh) */
    uint32_t go;         /* char-3-gram lanes at gp + go (bk[end], then fw[end]); UINT32_MAX = none yet */
    uint32_t pad;
} lcx__pfeat;

/* Reusable scratch for preparing documents on one thread. */
typedef struct {
    lcx__pterm *t; uint32_t nt, cap;
    uint32_t *tab; uint32_t tab_cap;     /* open addressing: term index + 1 */
    char *pool; size_t pool_len, pool_cap;
    uint32_t dl;
    lcx__pfeat *pf;                      /* (cap) feature record per term (lcx__prep_embed only) */
    uint32_t *gp; size_t gp_len, gp_cap; /* 3-gram lanes of the span's distinct terms (u32 units) */
} lcx__prep;

void lcx__prep_free(lcx__prep *p);
/* Tokenizes text into p (BM25 view: stopwords dropped, whole tokens and parts kept). */
int lcx__prep_text(lcx__prep *p, const char *text, size_t len);
/* Both at once with one tokenization when emb is the hash embedder (else prep + embed):
 * vec receives the L2-normalised embedding (dim floats). */
int lcx__prep_embed(lcx__prep *p, const lcx_embedder *emb, const char *text, size_t len, float *vec);
/* Copies p's result into one malloc'd block (*out; free() it). */
int lcx__prep_finish(const lcx__prep *p, lcx__doc_terms **out);
/* The same into caller memory of lcx__prep_size(p) bytes (16-byte aligned), for callers
 * that carve many documents out of one block. */
size_t lcx__prep_size(const lcx__prep *p);
lcx__doc_terms *lcx__prep_finish_to(const lcx__prep *p, void *mem);

/* ---- term table slot (persisted as is in snapshots) */
typedef struct {
    uint64_t hash;
    uint32_t id1;        /* term id + 1; 0 = empty slot */
    uint32_t len;        /* term length in bytes */
} lcx__tslot;

typedef struct {
    uint32_t *doc;       /* (cap) doc ids, increasing; one block with tf (postings.c) */
    uint8_t *tf;         /* (cap) term frequency, saturated at 255; = (uint8_t *)(doc + cap) */
    uint32_t n, cap;
} lcx__plist;

/* slab allocator of posting blocks (postings.c); classes cap 4, 8, ..., 4096 */
typedef struct {
    char *bump; size_t left;         /* the current chunk's unused tail */
    char *free[11];                  /* per capacity class: free blocks, linked through their first bytes */
    struct lcx__pschunk *chunks;
    size_t total;                    /* chunk bytes */
} lcx__palloc;

typedef struct {
    /* borrowed term dictionary + postings of the first base_nt terms */
    uint32_t nt;
    const lcx__tslot *tab; uint32_t tab_cap;     /* power of two */
    const uint64_t *toff;  const char *tstr; uint64_t tstr_len;   /* toff: (nt+1) */
    const uint64_t *poff;  const uint32_t *pdoc; const uint8_t *ptf; uint64_t np; /* poff: (nt+1) */
    /* borrowed vectors of the first vn documents */
    uint32_t vn;
    const uint8_t *vec8;                         /* (vn, dim) offset-binary u8 rows (embed.h) */
    const float *vsc;                            /* (vn) row scales */
} lcx__index_base;

struct lcx_index {
    const lcx_embedder *emb;
    uint32_t dim;
    /* documents: ids 0..n_docs-1 */
    uint32_t n_docs, n_live, docs_cap;
    uint64_t sum_dl;                 /* over live documents */
    uint32_t *dl;                    /* (docs_cap) */
    const char **text;               /* (docs_cap) borrowed (base) or in the arena */
    uint32_t *text_len;              /* (docs_cap) */
    uint64_t *del;                   /* (docs_cap/64) deleted bitmap */
    /* vectors: rows of docs < base.vn are borrowed; the rest are own */
    uint8_t *vec8;                   /* (vec_cap, dim) u8 rows (embed.h), row r = doc base.vn + r */
    float *vsc;                      /* (vec_cap) per-row scales */
    uint32_t vec_cap;
    /* terms */
    lcx__index_base base;
    uint32_t n_terms;
    lcx__tslot *tab; uint32_t tab_cap, tab_used;   /* own terms (id ≥ base.nt) */
    const char **otstr; uint32_t *otlen; uint32_t ot_cap;  /* own term strings (id − base.nt) */
    lcx__plist *pl; uint32_t pl_cap;               /* tail postings per term id (all terms) */
    lcx__palloc palloc[2];                         /* their blocks, by term-id parity */
    int post_failed;                               /* a commit failed: lists may hold postings of ids ≥ n_docs */
    int post_threads;                              /* batch posting appends: 0 = by cores (2 from 3 cores on), 1, 2 (tests) */
    uint64_t *pkey; size_t pkey_cap;               /* (2·pkey_cap) posting sort scratch of commit_keys */
    /* arena for own texts and term strings */
    struct lcx__ablock *arena;
    size_t arena_bytes;              /* bytes of arena blocks (sizes the next block) */
    size_t own_bytes;                /* bytes malloc'd (for lcx_store_mem_bytes) */
};

/* Looks up the ids of dt's terms that the index already knows (read-only: callable under
 * a shared lock, off the writer's critical path). */
void lcx__index_resolve(const lcx_index *ix, lcx__doc_terms *dt);
/* Makes room for n more documents (arrays and vector rows) so that committing them cannot
 * fail on those allocations. */
int lcx__index_reserve(lcx_index *ix, uint32_t n);
/* Adds a document. text is copied into the arena (copy_text) or borrowed. row: (dim) u8
 * embedding with its scale (embed.h). dt: its prepared terms. */
int lcx__index_commit(lcx_index *ix, const char *text, uint32_t len, int copy_text, const uint8_t *row,
                      float scale, const lcx__doc_terms *dt, uint32_t *id_out);
/* A batch's postings as sort keys, built by the caller's workers (each for a contiguous
 * range of the batch, in document order) right after lcx__index_resolve, so that the
 * serial commit neither re-reads every document's terms nor sorts them:
 * key = tid << 32 | batch doc index << 8 | min(tf, 255). Keys of terms the index knew are
 * in key[], sorted by lcx__post_keys_sort (on the worker); a term the index did not know
 * goes to unres (its key's low 32 bits, its doc_terms and term index) and the commit
 * assigns its id (dt must outlive the commit). */
typedef struct {
    uint32_t lo;         /* batch doc index << 8 | tf */
    uint32_t i;          /* term index in dt */
    lcx__doc_terms *dt;
} lcx__post_unres;
typedef struct {
    uint64_t *key; size_t n, cap;              /* (n) keys of known terms (+ cap scratch) */
    uint64_t *tmp;                             /* (cap) sort scratch */
    uint32_t max_tid;
    int sorted;                                /* key[] sorted (lcx__post_keys_sort ran) */
    lcx__post_unres *unres; size_t n_unres, ucap;
    struct lcx__tcent *tc;                     /* (LCX__TC_N) term-id cache of lcx__index_resolve_cached */
} lcx__post_keys;
/* Appends the keys of dt as batch document d (< 2^24). 0 or LCX_ENOMEM / LCX_ELIMIT. */
int lcx__post_keys_add(lcx__post_keys *k, lcx__doc_terms *dt, uint32_t d);
/* lcx__index_resolve through a small direct-mapped (hash, length) → term id cache kept in
 * k (allocated on first use; without memory it falls back to the plain lookup). Ids never
 * change while an index lives, so a cached id stays right; lcx__post_keys_reset empties the
 * cache, so a cache never outlives the batch (and the index) it was filled from. Same
 * result as lcx__index_resolve. */
void lcx__index_resolve_cached(const lcx_index *ix, lcx__doc_terms *dt, lcx__post_keys *k);
/* Sorts key[] (stable radix by term id: (term, doc) order). */
void lcx__post_keys_sort(lcx__post_keys *k);
void lcx__post_keys_reset(lcx__post_keys *k);   /* empties, keeps the buffers */
void lcx__post_keys_free(lcx__post_keys *k);    /* of NULL: no-op */
/* The term ids of the runs' unresolved keys (their dt's tid fields): the only part of
 * lcx__index_commit_keys that changes the term table, so a caller can let lookups
 * (lcx__index_resolve*) run again after it, during the rest of the commit. Ids stay
 * assigned if a later step fails. 0 or a negative LCX_E*. */
int lcx__index_commit_terms(lcx_index *ix, const lcx__post_keys *runs, int n_runs);
/* Adds n documents at once (ids first..first+n-1, *first_id), as n commits would, with
 * the postings given as sorted key runs (each run filled in
 * document order — runs may interleave documents — and together covering docs 0..n-1
 * exactly); dt supplies the document lengths. The runs are merged (and the new terms' keys
 * merged in), not re-sorted. Calls lcx__index_commit_terms first (a no-op when the caller
 * did). */
int lcx__index_commit_keys(lcx_index *ix, uint32_t n, const char *const *text, const uint32_t *len, int copy_text,
                           const uint8_t *rows, const float *scales, lcx__doc_terms *const *dt,
                           const lcx__post_keys *runs, int n_runs, uint32_t *first_id);
/* Attaches a base (before any document is added). The caller then sets dl/text/del of the
 * first n_docs documents with lcx__index_set_base_doc. */
int lcx__index_attach_base(lcx_index *ix, const lcx__index_base *b, uint32_t n_docs);
void lcx__index_set_base_doc(lcx_index *ix, uint32_t id, const char *text, uint32_t len, uint32_t dl, int deleted);
/* Row of document id (dim bytes) and its scale. */
const uint8_t *lcx__index_row(const lcx_index *ix, uint32_t id, float *scale);
int lcx__index_is_deleted(const lcx_index *ix, uint32_t id);
/* Term string of term id. */
const char *lcx__index_term(const lcx_index *ix, uint32_t id, uint32_t *len);
/* Calls fn for every posting of term id in doc order. */
size_t lcx__index_postings(const lcx_index *ix, uint32_t id, uint32_t *doc, uint8_t *tf, size_t max);
uint32_t lcx__index_df(const lcx_index *ix, uint32_t id);
/* Per-search working memory, reusable across searches (one search at a time per scratch):
 * avoids allocating, faulting in and zeroing ~8 bytes per document on every query. The
 * acc array is kept all-zero between searches (only touched entries are reset). */
typedef struct lcx__scratch {
    float *dense;        /* (cap) dense scores */
    float *acc;          /* (cap) BM25 accumulators, all zero between searches */
    uint32_t *touched;   /* (cap) docs with a non-zero accumulator */
    uint32_t cap;
    struct lcx__scratch *next;   /* free-list link for the owner */
} lcx__scratch;
void lcx__scratch_free(lcx__scratch *sc);
/* Search with an already-embedded query (qv: dim floats). sc may be NULL (allocates). */
int lcx__index_search_vec(const lcx_index *ix, const char *q, size_t qlen, const float *qv,
                          const lcx_search_opts *o, lcx_hit *out, int max_out, lcx__scratch *sc);
size_t lcx__index_mem_bytes(const lcx_index *ix);

/* ---- building blocks (fusion.c), pure and unit-tested */
typedef struct {
    uint32_t id;
    float dense, bm25;
    int rank_d, rank_b;  /* 1-based rank in each component's candidate list; 0 = absent */
    float fused;
} lcx__cand;
/* Fills c[i].fused for n candidates (see lcx_fusion). */
void lcx__fuse(lcx__cand *c, int n, lcx_fusion f, float alpha);
/* Top-k of scores (n) skipping ids whose bit is set in skip (may be NULL), best first, ties
 * by lower id. Writes ≤ k ids/scores; returns the count. */
int lcx__topk(const float *scores, uint32_t n, const uint64_t *skip, int k, uint32_t *ids, float *vals);
/* Sorts candidates by fused desc, id asc. */
void lcx__cand_sort(lcx__cand *c, int n);

/* ---- shared by the index's own files (index.c, prep.c, terms.c, postings.c, commit.c,
 * search.c); the store uses only what is above. The index has no locks of its own: the
 * store's rw (and trw for the term table) serialise a writer against readers. */
/* The index's big growing arrays (rows, term table, list headers) are lcx__big_realloc
 * blocks: from 4 MiB on 2 MiB aligned and huge-page advised, grown by moving pages
 * (mremap), not by copying. Each is released with lcx__big_free and its byte size. */
/* Own texts and term strings: n bytes from the index's arena (kept until free); NULL on OOM. */
char *lcx__index_arena_alloc(lcx_index *ix, size_t n);
/* Grows the lcx__big_realloc array *p of *cap elements of elt bytes to ≥ need (doubling,
 * grown part zeroed); *acct (when not NULL) grows by the new bytes. */
int lcx__index_grow(void **p, uint32_t *cap, uint32_t need, size_t elt, size_t *acct);

/* terms.c */
/* Term lookup: base table first, then own. Returns id or UINT32_MAX.
 * A term is identified by (64-bit hash, length) without comparing its bytes: that saves
 * two dependent cache misses per lookup (hot at ingest: ~120 lookups per span). Two
 * distinct terms of equal length collide with probability ~n²/2⁶⁵ (≈ 3e-8 for a million
 * terms); a collision would merge their postings (BM25 slightly off for those two terms),
 * never a crash. */
static inline __attribute__((always_inline)) uint32_t lcx__term_find(const lcx_index *ix, const char *t, uint32_t len,
                                                                     uint64_t h, uint32_t *own_slot)
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

/* Finds or creates the term; returns its id or a negative error (as int64). Writer only. */
int64_t lcx__index_term_get(lcx_index *ix, const char *t, uint32_t len, uint64_t h);
/* Term-id cache of the ingest workers. Why: the index's term table outgrows L2 (16 B per
 * slot at ≤ 50% load: 8 MiB at ~250k terms) and every lookup is a cache miss, ~100 per span;
 * but prose repeats its common content words, and in measurements a 4096-entry
 * direct-mapped cache (64 KiB, L2-resident) answered ~65% of the lookups of a 500-span
 * batch. Misses are collected per group of 64 terms with their table slots prefetched,
 * then looked up (the misses of a group overlap in memory). Entries hold (hash, length),
 * the same identity as the table itself (lcx__term_find). */
#define LCX__TC_N 4096u
struct lcx__tcent {
    uint64_t hash;
    uint32_t len;
    uint32_t tid1;   /* term id + 1; 0 = empty */
};

/* expand.c */
/* The code words that usually stand for doc-prose word w[0..n) (case-folded), e.g.
 * obtain → get: their count (≤ 3), 0 when none. */
int lcx__code_synonyms(const char *w, size_t n, const char *out[3]);

/* postings.c */
#define PS_MAXCAP 4096u   /* posting blocks up to this capacity come from the slabs (postings.c) */
/* Grows list p (term id tid) to hold at least need entries (doubling). */
int lcx__plist_reserve(lcx_index *ix, uint32_t tid, size_t *own_bytes, lcx__plist *p, uint32_t need);
void lcx__palloc_free(lcx__palloc *a);
static inline int lcx__plist_push(lcx_index *ix, uint32_t tid, uint32_t doc, uint8_t tf)
{
    lcx__plist *p = &ix->pl[tid];
    if (p->n == p->cap) {
        int rc = lcx__plist_reserve(ix, tid, &ix->own_bytes, p, p->n + 1);
        if (rc) return rc;
    }
    p->doc[p->n] = doc;
    p->tf[p->n] = tf;
    p->n++;
    return 0;
}

#endif
