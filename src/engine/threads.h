/* Worker pool for the forward pass — engine-internal.
 *
 *   eng_pool *p; eng__pool_init(2, &p);
 *   eng__pool_run(p, fn, arg, n_chunks);   // fn(arg, chunk, ith) once per chunk in [0, n_chunks)
 *   eng__pool_free(p);
 *
 * Why dynamic chunks instead of a fixed split per thread: these machines are shared and
 * often oversubscribed. With a static split, a descheduled worker stalls the whole step for
 * a scheduler time slice; here the caller keeps claiming chunks itself, and a worker that
 * wakes up late finds the job closed and goes back to waiting — the caller never waits for a
 * thread that has not started. Results do not depend on which thread ran a chunk (each
 * chunk writes its own outputs), so decoding is deterministic for any thread count.
 * Workers spin briefly (a decode step issues ~6 jobs per layer, microseconds apart), then
 * sleep on a condition variable, so an idle context costs no CPU.
 * ith (0 = caller, 1..n-1 = workers) indexes per-thread scratch. eng__pool_run must be called
 * from one thread at a time. */
#ifndef ENG_THREADS_H
#define ENG_THREADS_H

typedef void (*eng_chunk_fn)(void *arg, long chunk, int ith);
typedef struct eng_pool eng_pool;

int  eng__pool_init(int n_threads, eng_pool **out);   /* LCX_ENOMEM / LCX_EINVAL */
void eng__pool_free(eng_pool *p);
int  eng__pool_size(const eng_pool *p);
void eng__pool_run(eng_pool *p, eng_chunk_fn fn, void *arg, long n_chunks);
#endif
