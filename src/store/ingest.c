/* The parallel part of an append: a batch's embedding rows, text checksums, doc_terms
 * and posting sort keys, computed by up to PAR_MAX_THREADS workers that take groups of
 * chunks from a shared cursor, next to up to two side jobs (the overlapped append's log
 * write and deferred publish, or the two-phase path's record build); and the doc_terms
 * blocks the workers carve out of.
 * Locks: the workers take trw shared (tryrdlock after each group, a blocking rdlock at the
 * end) to resolve term ids; nothing else. Callers may hold wmu (the overlapped append) or
 * nothing (lcx_store_prepare); a side job takes what its own function says. */
#include "store/store_impl.h"
#include "store/store_int.h"
#include "embed/embed.h"
#include "index/index.h"
#include "store/store_fmt.h"
#include "util/util.h"
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* doc_terms blocks (struct dtblk, store_impl.h): one malloc per ~256 KiB instead of one
 * per chunk; a batch's blocks are freed (or kept as spares) when it is done. */
#define DTBLK_SIZE (256u << 10)
#define DTBLK_KEEP 64        /* spare blocks a store keeps between big appends (16 MiB) */

/* spare: blocks to reuse before calling malloc (their pages are already faulted in) */
static void *dtblk_alloc(struct dtblk **head, struct dtblk **spare, size_t n)
{
    struct dtblk *b = *head;
    if (!b || b->cap - b->used < n) {
        size_t cap = n > DTBLK_SIZE ? n : DTBLK_SIZE;
        struct dtblk *nb = NULL;
        if (*spare && (*spare)->cap >= n) {
            nb = *spare;
            *spare = nb->next;
        } else {
            if (!(nb = malloc(sizeof *nb + cap))) return NULL;
            nb->cap = cap;
        }
        nb->next = b;
        nb->used = 0;
        *head = b = nb;
    }
    void *p = b->data + b->used;
    b->used += n;
    return p;
}

void lcx__dtblk_free(struct dtblk *b)
{
    while (b) {
        struct dtblk *n = b->next;
        free(b);
        b = n;
    }
}

/* Moves up to DTBLK_KEEP blocks of *blk onto *spare (the rest stays in *blk): fresh
 * 256 KiB blocks are mmap'd and page-faulted every time (measured: ~0.1 CPU-s of faults
 * per 100 MB indexed). Caller holds s->pmu for the store's spare list. */
void lcx__dtblk_keep(struct dtblk **blk, struct dtblk **spare)
{
    for (int k = 0; *blk && k < DTBLK_KEEP; k++) {
        struct dtblk *b = *blk;
        *blk = b->next;
        b->next = *spare;
        *spare = b;
    }
}

typedef struct {
    lcx_store *s;              /* its trw is taken shared (term-id lookups) */
    const lcx_chunk *c;
    uint8_t *vec;              /* (n, dim) u8 rows */
    float *vsc;                /* (n) their scales */
    uint32_t *tcrc;            /* (n) crc32c of each text (lcx_store_get checks it) */
    lcx__doc_terms **dt;       /* (n) */
    struct dtblk *blk;         /* this worker's doc_terms memory */
    struct dtblk *spare;       /* blocks to reuse first */
    lcx__post_keys *keys;      /* this worker's posting sort keys (its groups' docs) */
    int n;
    int *next;                 /* shared: first chunk of the next group to take (atomic) */
    int rc;
} work;

/* Workers take the chunks of a batch in groups of WORK_GROUP from a shared cursor, so a
 * worker slowed by the batch's side jobs (or by another process) takes fewer groups
 * instead of holding up the batch with its fixed share. */
#define WORK_GROUP 32

static int group_end(const work *w, int g) { return g < w->n - WORK_GROUP ? g + WORK_GROUP : w->n; }

/* Resolves the terms of the n_todo groups starting at todo[] (ascending) and adds their
 * posting keys, in document order. Called holding trw for reading; releases it. */
static void resolve_groups(work *w, const int *todo, int n_todo)
{
    for (int k = 0; k < n_todo; k++)
        for (int i = todo[k], e = group_end(w, i); i < e; i++) lcx__index_resolve_cached(w->s->ix, w->dt[i], w->keys);
    pthread_rwlock_unlock(&w->s->trw);
    for (int k = 0; k < n_todo; k++)
        for (int i = todo[k], e = group_end(w, i); i < e && !w->rc; i++)
            w->rc = lcx__post_keys_add(w->keys, w->dt[i], (uint32_t)i);
}

static void *work_run(void *arg)
{
    work *w = arg;
    uint32_t dim = w->s->dim;
    float *tmp = malloc((size_t)dim * sizeof *tmp);   /* (dim) */
    int *todo = malloc(((size_t)w->n / WORK_GROUP + 1) * sizeof *todo);   /* groups taken, terms not resolved */
    int n_todo = 0;
    lcx__prep p = {0};
    if (!tmp || !todo) {
        free(tmp);
        free(todo);
        w->rc = LCX_ENOMEM;
        return NULL;
    }
    for (;;) {
        const int g = __atomic_fetch_add(w->next, WORK_GROUP, __ATOMIC_RELAXED);
        if (g >= w->n) break;
        for (int i = g, e = group_end(w, g); i < e && !w->rc; i++) {
            const char *tx = w->c[i].text ? w->c[i].text : "";
            int rc = lcx__prep_embed(&p, w->s->emb, tx, w->c[i].text_len, tmp);
            void *mem = rc < 0 ? NULL : dtblk_alloc(&w->blk, &w->spare, lcx__prep_size(&p));
            if (!mem) { w->rc = rc < 0 ? rc : LCX_ENOMEM; break; }
            w->dt[i] = lcx__prep_finish_to(&p, mem);
            lcx__quant_row_u8(tmp, dim, w->vec + (size_t)i * dim, &w->vsc[i]);
            w->tcrc[i] = lcx__crc32c(0, tx, w->c[i].text_len);
        }
        if (w->rc) break;
        todo[n_todo++] = g;
        /* resolve known term ids now, a group at a time, so the exclusive commit only
         * appends postings; while a publish adds its new terms keep embedding and resolve
         * later (the rest of a publish, its postings, does not stop this) */
        if (pthread_rwlock_tryrdlock(&w->s->trw)) continue;
        resolve_groups(w, todo, n_todo);
        n_todo = 0;
    }
    if (n_todo && !w->rc) {
        pthread_rwlock_rdlock(&w->s->trw);
        resolve_groups(w, todo, n_todo);
    }
    if (!w->rc) lcx__post_keys_sort(w->keys);   /* here, in parallel: the publish only merges */
    lcx__prep_free(&p);
    free(tmp);
    free(todo);
    return NULL;
}

/* A side job's thread. Side jobs are fixed pieces of work next to the workers' divisible
 * one, and the batch waits for them: the log write, whose fdatasync wakes the thread
 * several times, and the publish (~2–3 ms of CPU, but 6–10 ms wall among four threads on 2
 * cores when the workers kept the cores). With a short slice the thread runs whenever it
 * is runnable (lcx__thread_short_slice; same CPU share) and the workers take up the rest
 * (docs/benchmarks/core.md). */
static void *side_main(void *arg)
{
    const lcx__side_job *j = arg;
    lcx__thread_short_slice();
    return j->fn(j->ud);
}

/* Runs the n_side side jobs (≤ 2) next to the embedding workers.
 * keys: PAR_MAX_THREADS runs (emptied here, buffers reused); *n_runs receives how many
 * were filled (each in document order; the runs interleave groups of WORK_GROUP).
 * *blk: spare blocks in (may be NULL), every block the workers hold out (dt[] lives in
 * them). */
int lcx__prepare_batch(lcx_store *s, const lcx_chunk *c, int n, uint8_t *vec, float *vsc, uint32_t *tcrc,
                         lcx__doc_terms **dt, struct dtblk **blk, lcx__post_keys *keys, int *n_runs,
                         const lcx__side_job *side, int n_side)
{
    int nt = 1;
    if (n >= PAR_MIN) {
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        nt = (int)(cpus < 1 ? 1 : cpus > PAR_MAX_THREADS ? PAR_MAX_THREADS : cpus);
        if (nt > n / WORK_GROUP) nt = n / WORK_GROUP ? n / WORK_GROUP : 1;   /* a group each at least */
    }
    work w[PAR_MAX_THREADS];
    pthread_t th[PAR_MAX_THREADS], xth[2];
    int started[PAR_MAX_THREADS] = {0}, xstarted[2] = {0}, next = 0;
    for (int k = 0; k < n_side; k++) xstarted[k] = pthread_create(&xth[k], NULL, side_main, (void *)&side[k]) == 0;
    for (int t = 0; t < nt; t++) {
        lcx__post_keys_reset(&keys[t]);
        w[t] = (work){s, c, vec, vsc, tcrc, dt, NULL, NULL, &keys[t], n, &next, 0};
    }
    for (int t = 0; *blk; t = (t + 1) % nt) {   /* spare blocks in: dealt out to the workers */
        struct dtblk *b = *blk;
        *blk = b->next;
        b->next = w[t].spare;
        w[t].spare = b;
    }
    *n_runs = nt;
    for (int t = 1; t < nt; t++)
        started[t] = pthread_create(&th[t], NULL, work_run, &w[t]) == 0;
    work_run(&w[0]);
    int rc = w[0].rc;
    for (int t = 1; t < nt; t++) {
        if (started[t]) pthread_join(th[t], NULL);
        else work_run(&w[t]);               /* could not start a thread: do it here */
        if (!rc) rc = w[t].rc;
    }
    for (int k = 0; k < n_side; k++) {
        if (xstarted[k]) pthread_join(xth[k], NULL);
        else side[k].fn(side[k].ud);
    }
    for (int t = 0; t < nt; t++) {   /* hand every worker's blocks (used and spare) to the caller */
        for (int k = 0; k < 2; k++) {
            struct dtblk *b = k ? w[t].spare : w[t].blk;
            while (b) {
                struct dtblk *nx = b->next;
                b->next = *blk;
                *blk = b;
                b = nx;
            }
        }
    }
    return rc;
}

