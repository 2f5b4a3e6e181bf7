/* Cost of the /metrics hooks on the request path (in-process): ns per
 * lcx__svc_metrics_request (two relaxed atomic adds + a status lookup) with 1 and 2
 * threads hammering the same route row (the worst case: one hot route, shared lines),
 * and per lcx__svc_ct_equal on a 32-byte token.
 *   bench_svc_metrics [--calls 20000000] */
#include "svc/svc.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static lcx_svc S;
static long calls = 20000000;

static void *worker(void *ud)
{
    int st = (int)(intptr_t)ud ? 200 : 400;
    for (long i = 0; i < calls; i++) lcx__svc_metrics_request(&S, 3, st, 0.3 + (double)(i & 7));
    return NULL;
}

static double run(int threads)
{
    pthread_t t[8];
    double t0 = lcx__now_ms();
    for (int i = 0; i < threads; i++) pthread_create(&t[i], NULL, worker, (void *)(intptr_t)(i == 0));
    for (int i = 0; i < threads; i++) pthread_join(t[i], NULL);
    return (lcx__now_ms() - t0) * 1e6 / (double)calls;   /* ns per call per thread */
}

int main(int argc, char **argv)
{
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], "--calls")) calls = atol(argv[i + 1]);
    if (lcx__svc_metrics_new(&S.metrics) < 0) return 1;
    double a[5], b[5];
    for (int r = 0; r < 5; r++) { a[r] = run(1); b[r] = run(2); }
    for (int r = 1; r < 5; r++)   /* insertion sort for the medians */
        for (int k = r; k > 0 && a[k] < a[k - 1]; k--) { double x = a[k]; a[k] = a[k - 1]; a[k - 1] = x; }
    for (int r = 1; r < 5; r++)
        for (int k = r; k > 0 && b[k] < b[k - 1]; k--) { double x = b[k]; b[k] = b[k - 1]; b[k - 1] = x; }
    const char tok[] = "0123456789abcdef0123456789abcdef";
    volatile int ok = 0;
    double t0 = lcx__now_ms();
    for (long i = 0; i < calls; i++) ok += lcx__svc_ct_equal(tok, 32, tok, 32);
    double ct = (lcx__now_ms() - t0) * 1e6 / (double)calls;
    printf("lcx__svc_metrics_request: median %.1f ns/call (1 thread), %.1f ns/call per thread (2 threads, same row); "
           "ct_equal(32 B) %.1f ns (5 runs x %ld calls)\n", a[2], b[2], ct, calls);
    lcx__svc_metrics_free(S.metrics);
    return ok == 0;
}
