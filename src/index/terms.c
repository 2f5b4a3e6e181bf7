/* The term table: ids by (hash, length) in the base table (a mapped snapshot's) and the
 * own one (linear probing), term strings, creation of new terms, and the batch lookups of
 * the ingest workers (lcx__index_resolve, with a term-id cache: lcx__index_resolve_cached).
 * Locks: none of its own (index.h); lookups only read the table (the store's workers hold trw shared);
 * lcx__index_term_get writes it (the store's publish holds rw and trw exclusively). */
#include "index/index.h"
#include "embed/embed.h"
#include "util/util.h"
#include <immintrin.h>
#include <stdlib.h>
#include <string.h>

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
    lcx__tslot *t = lcx__big_realloc(NULL, 0, (size_t)nc * sizeof *t);   /* zeroed */
    if (!t) return LCX_ENOMEM;
    for (uint32_t i = 0; i < ix->tab_cap; i++) {
        if (!ix->tab[i].id1) continue;
        uint32_t j = (uint32_t)ix->tab[i].hash & (nc - 1);
        while (t[j].id1) j = (j + 1) & (nc - 1);
        t[j] = ix->tab[i];
    }
    ix->own_bytes += (size_t)(nc - ix->tab_cap) * sizeof *t;
    lcx__big_free(ix->tab, (size_t)ix->tab_cap * sizeof *t);
    ix->tab = t;
    ix->tab_cap = nc;
    return 0;
}

/* Finds or creates the term; returns its id or a negative error (as int64). */
int64_t lcx__index_term_get(lcx_index *ix, const char *t, uint32_t len, uint64_t h)
{
    if ((ix->tab_used + 1) * 2 > ix->tab_cap) {
        int rc = tab_grow(ix);
        if (rc) return rc;
    }
    uint32_t slot = 0;
    uint32_t id = lcx__term_find(ix, t, len, h, &slot);
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
    if ((rc = lcx__index_grow((void **)&ix->pl, &ix->pl_cap, ix->n_terms + 1, sizeof *ix->pl, &ix->own_bytes))) return rc;
    char *s = lcx__index_arena_alloc(ix, len ? len : 1);
    if (!s) return LCX_ENOMEM;
    memcpy(s, t, len);
    ix->otstr[o] = s;
    ix->otlen[o] = len;
    id = ix->n_terms++;
    ix->tab[slot] = (lcx__tslot){h, id + 1, len};
    ix->tab_used++;
    return id;
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
        t->tid = lcx__term_find(ix, dt->pool + t->off, t->len, t->hash, NULL);
    }
}

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
            t->tid = lcx__term_find(ix, dt->pool + t->off, t->len, t->hash, NULL);
            if (t->tid != UINT32_MAX) tc[tc_slot(t->hash)] = (struct lcx__tcent){t->hash, t->len, t->tid + 1};
        }
    }
}

