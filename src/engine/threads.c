/* Worker pool with dynamically claimed chunks: see threads.h for why.
 *
 * Protocol (all atomics sequentially consistent):
 *   gen   even = a job is open, odd = closed. The caller opens a job (gen++ to even) after
 *         writing fn/arg/n_chunks, claims chunks itself, then closes it (gen++ to odd) and
 *         waits until busy == 0.
 *   busy  workers inside a job. A worker that sees an open gen g increments busy, then
 *         re-reads gen: if it is no longer g the job was closed meanwhile (the caller may
 *         already be writing the next job), so it backs out without touching the job.
 *         Otherwise the caller cannot return (busy > 0) and the job stays valid.
 * This is Dekker-style (store gen / load busy vs store busy / load gen), hence seq_cst. */
#include "engine/threads.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include "longctx/lcx_err.h"

#define SPIN_ITERS 4000    /* pause loops (~100 us) before a worker sleeps */

struct eng_pool {
    int n;
    pthread_t *th;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    atomic_uint gen;
    atomic_int busy;
    atomic_int sleepers;
    atomic_bool stop;
    atomic_long next;
    eng_chunk_fn fn;
    void *arg;
    long n_chunks;
};

typedef struct { eng_pool *p; int ith; } warg;

static inline void cpu_relax(void) { __builtin_ia32_pause(); }

static inline bool open_new(unsigned g, unsigned seen) { return g != seen && !(g & 1); }

static void claim_loop(eng_pool *p, int ith)
{
    for (;;) {
        long c = atomic_fetch_add(&p->next, 1);
        if (c >= p->n_chunks) break;
        p->fn(p->arg, c, ith);
    }
}

static void *worker(void *a)
{
    warg w = *(warg *)a;
    free(a);
    eng_pool *p = w.p;
    unsigned seen = 1;
    for (;;) {
        unsigned g;
        int spins = 0;
        while (!open_new(g = atomic_load(&p->gen), seen) && !atomic_load(&p->stop)) {
            if (++spins < SPIN_ITERS) { cpu_relax(); continue; }
            pthread_mutex_lock(&p->mu);
            atomic_fetch_add(&p->sleepers, 1);
            while (!open_new(atomic_load(&p->gen), seen) && !atomic_load(&p->stop))
                pthread_cond_wait(&p->cv, &p->mu);
            atomic_fetch_sub(&p->sleepers, 1);
            pthread_mutex_unlock(&p->mu);
            spins = 0;
        }
        if (atomic_load(&p->stop)) return NULL;
        atomic_fetch_add(&p->busy, 1);
        if (atomic_load(&p->gen) != g) {        /* closed before we got in */
            atomic_fetch_sub(&p->busy, 1);
            continue;
        }
        seen = g;
        claim_loop(p, w.ith);
        atomic_fetch_sub(&p->busy, 1);
    }
}

int eng__pool_init(int n, eng_pool **out)
{
    *out = NULL;
    if (n < 1 || n > 512) return LCX_EINVAL;
    eng_pool *p = calloc(1, sizeof *p);
    if (!p) return LCX_ENOMEM;
    p->n = n;
    atomic_store(&p->gen, 1);
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    p->th = calloc(n, sizeof *p->th);
    if (!p->th) { free(p); return LCX_ENOMEM; }
    for (int i = 1; i < n; i++) {
        warg *a = malloc(sizeof *a);
        if (!a) { p->n = i; eng__pool_free(p); return LCX_ENOMEM; }
        a->p = p;
        a->ith = i;
        if (pthread_create(&p->th[i], NULL, worker, a) != 0) {
            free(a);
            p->n = i;
            eng__pool_free(p);
            return LCX_ENOMEM;
        }
    }
    *out = p;
    return 0;
}

void eng__pool_free(eng_pool *p)
{
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    atomic_store(&p->stop, true);
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    for (int i = 1; i < p->n; i++) pthread_join(p->th[i], NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    free(p->th);
    free(p);
}

int eng__pool_size(const eng_pool *p) { return p ? p->n : 1; }

void eng__pool_run(eng_pool *p, eng_chunk_fn fn, void *arg, long n_chunks)
{
    if (n_chunks <= 0) return;
    if (!p || p->n == 1 || n_chunks == 1) {
        for (long c = 0; c < n_chunks; c++) fn(arg, c, 0);
        return;
    }
    /* gen is odd (closed) and busy == 0 here */
    p->fn = fn;
    p->arg = arg;
    p->n_chunks = n_chunks;
    atomic_store(&p->next, 0);
    atomic_fetch_add(&p->gen, 1);               /* open */
    if (atomic_load(&p->sleepers) > 0) {
        pthread_mutex_lock(&p->mu);
        pthread_cond_broadcast(&p->cv);
        pthread_mutex_unlock(&p->mu);
    }
    claim_loop(p, 0);
    atomic_fetch_add(&p->gen, 1);               /* close: late workers back out */
    int spins = 0;
    while (atomic_load(&p->busy) > 0) {
        if (++spins < SPIN_ITERS) cpu_relax();
        else sched_yield();
    }
}
