/* Worker pool: see threads.h for why it spins then sleeps. */
#include "engine/threads.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include "longctx/lcx_err.h"

#define SPIN_ITERS 20000   /* ~tens of microseconds before a worker goes to sleep */

struct eng_pool {
    int n;
    pthread_t *th;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    atomic_uint gen;         /* bumped once per job */
    atomic_int done;         /* workers finished with the current job */
    atomic_int sleepers;
    atomic_bool stop;
    eng_task_fn fn;
    void *arg;
};

typedef struct { eng_pool *p; int ith; } warg;

static inline void cpu_relax(void) { __builtin_ia32_pause(); }

static void *worker(void *a)
{
    warg w = *(warg *)a;
    free(a);
    eng_pool *p = w.p;
    unsigned seen = 0;
    for (;;) {
        unsigned g;
        int spins = 0;
        while ((g = atomic_load_explicit(&p->gen, memory_order_acquire)) == seen &&
               !atomic_load(&p->stop)) {
            if (++spins < SPIN_ITERS) { cpu_relax(); continue; }
            pthread_mutex_lock(&p->mu);
            atomic_fetch_add(&p->sleepers, 1);
            while (atomic_load(&p->gen) == seen && !atomic_load(&p->stop))
                pthread_cond_wait(&p->cv, &p->mu);
            atomic_fetch_sub(&p->sleepers, 1);
            pthread_mutex_unlock(&p->mu);
            spins = 0;
        }
        if (atomic_load(&p->stop)) return NULL;
        seen = g;
        p->fn(p->arg, w.ith, p->n);
        atomic_fetch_add_explicit(&p->done, 1, memory_order_acq_rel);
    }
}

int eng_pool_init(int n, eng_pool **out)
{
    *out = NULL;
    if (n < 1 || n > 512) return LCX_EINVAL;
    eng_pool *p = calloc(1, sizeof *p);
    if (!p) return LCX_ENOMEM;
    p->n = n;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    p->th = calloc(n, sizeof *p->th);
    if (!p->th) { free(p); return LCX_ENOMEM; }
    for (int i = 1; i < n; i++) {
        warg *a = malloc(sizeof *a);
        if (!a) { p->n = i; eng_pool_free(p); return LCX_ENOMEM; }
        a->p = p;
        a->ith = i;
        if (pthread_create(&p->th[i], NULL, worker, a) != 0) {
            free(a);
            p->n = i;
            eng_pool_free(p);
            return LCX_ENOMEM;
        }
    }
    *out = p;
    return 0;
}

void eng_pool_free(eng_pool *p)
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

int eng_pool_size(const eng_pool *p) { return p ? p->n : 1; }

void eng_pool_run(eng_pool *p, eng_task_fn fn, void *arg)
{
    if (!p || p->n == 1) { fn(arg, 0, 1); return; }
    p->fn = fn;
    p->arg = arg;
    atomic_store(&p->done, 0);
    atomic_fetch_add(&p->gen, 1);   /* seq_cst: ordered before the sleepers load */
    if (atomic_load(&p->sleepers) > 0) {
        pthread_mutex_lock(&p->mu);
        pthread_cond_broadcast(&p->cv);
        pthread_mutex_unlock(&p->mu);
    }
    fn(arg, 0, p->n);
    int spins = 0;
    while (atomic_load_explicit(&p->done, memory_order_acquire) < p->n - 1) {
        if (++spins < SPIN_ITERS) cpu_relax();
        else sched_yield();
    }
}
