/* Posting storage: per-term lists of (doc id, tf) in slab-allocated blocks by capacity
 * class (malloc'd past PS_MAXCAP), two allocators by term-id parity.
 * Locks: none of its own (index.h); callers hold the store's rw exclusively; the two threads of a
 * batch publish (commit.c post_run) each write only lists of their own parity. */
#include "index/index.h"
#include "embed/embed.h"
#include "util/util.h"
#include <stdlib.h>
#include <string.h>

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
        struct lcx__pschunk *ch = huge ? lcx__alloc_huge(size) : malloc(size);
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

void lcx__palloc_free(lcx__palloc *a)
{
    for (struct lcx__pschunk *c = a->chunks; c;) {
        struct lcx__pschunk *n = c->next;
        free(c);
        c = n;
    }
    memset(a, 0, sizeof *a);
}

/* Grows list p (term id tid) to hold at least need entries (doubling). */
int lcx__plist_reserve(lcx_index *ix, uint32_t tid, size_t *own_bytes, lcx__plist *p, uint32_t need)
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

