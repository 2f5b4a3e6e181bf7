/* Worker pool for the forward pass — engine-internal.
 *
 *   eng_pool *p; eng_pool_init(2, &p);
 *   eng_pool_run(p, fn, arg);      // fn(arg, ith, nth) on every thread, caller is ith 0
 *   eng_pool_free(p);
 *
 * Why a custom pool: a decode step runs ~10 parallel sections per layer, so dispatch must
 * cost microseconds. Workers spin briefly on a generation counter (a new job usually
 * follows within microseconds), then sleep on a condition variable so an idle context
 * costs no CPU. eng_pool_run is not reentrant and must be called from one thread. */
#ifndef ENG_THREADS_H
#define ENG_THREADS_H

typedef void (*eng_task_fn)(void *arg, int ith, int nth);
typedef struct eng_pool eng_pool;

int  eng_pool_init(int n_threads, eng_pool **out);   /* LCX_ENOMEM / LCX_EINVAL */
void eng_pool_free(eng_pool *p);
int  eng_pool_size(const eng_pool *p);
void eng_pool_run(eng_pool *p, eng_task_fn fn, void *arg);

/* Splits [0, n) into nth nearly equal parts; part ith is [*a, *b). */
static inline void eng_split(long n, int ith, int nth, long *a, long *b)
{
    long q = n / nth, r = n % nth;
    *a = ith * q + (ith < r ? ith : r);
    *b = *a + q + (ith < r);
}
#endif
