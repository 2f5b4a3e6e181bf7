/* Cost of the /metrics hooks on the request path (in-process): ns per
 * lcx__svc_metrics_request (two relaxed atomic adds + a status lookup) with 1 and 2
 * threads hammering the same route row (the worst case: one hot route, shared lines),
 * per lcx__svc_ct_equal on a 32-byte token, and per lcx__svc_client_take (the per-client
 * rate limit: one striped mutex + bucket arithmetic) with 1 and 2 threads of one address.
 *   bench_svc_metrics [--calls 20000000] */
#include "svc/svc.h"

#include <arpa/inet.h>
#include <netinet/in.h>
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

static struct lcx_svc_limits *L;
static struct lcx_svc_client *C;

static void *taker(void *ud)
{
    (void)ud;
    volatile double w = 0;
    for (long i = 0; i < calls; i++) w += lcx__svc_client_take(L, C);
    return NULL;
}

static double run_take(int threads)
{
    pthread_t t[8];
    double t0 = lcx__now_ms();
    for (int i = 0; i < threads; i++) pthread_create(&t[i], NULL, taker, NULL);
    for (int i = 0; i < threads; i++) pthread_join(t[i], NULL);
    return (lcx__now_ms() - t0) * 1e6 / (double)calls;
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
    /* rate limit: a bucket that never runs dry (huge rate) so every call takes the same path */
    lcx_svc_config c;
    lcx_svc_config_defaults(&c);
    c.client_rate = 1e9;
    c.client_burst = 1e9;
    if (lcx__svc_limits_new(&c, &L) < 0) return 1;
    struct sockaddr_in sa = {.sin_family = AF_INET};
    sa.sin_addr.s_addr = htonl(0x7f000001);
    bool over;
    C = lcx__svc_client_open(L, (struct sockaddr *)&sa, &over);
    double la[5], lb[5];
    for (int r = 0; r < 5; r++) { la[r] = run_take(1); lb[r] = run_take(2); }
    for (int r = 1; r < 5; r++)
        for (int k = r; k > 0 && la[k] < la[k - 1]; k--) { double x = la[k]; la[k] = la[k - 1]; la[k - 1] = x; }
    for (int r = 1; r < 5; r++)
        for (int k = r; k > 0 && lb[k] < lb[k - 1]; k--) { double x = lb[k]; lb[k] = lb[k - 1]; lb[k - 1] = x; }
    printf("lcx__svc_client_take: median %.1f ns/call (1 thread), %.1f ns/call per thread (2 threads, one address)\n",
           la[2], lb[2]);
    lcx__svc_client_close(L, C);
    lcx__svc_limits_free(L);
    lcx__svc_metrics_free(S.metrics);
    return ok == 0;
}
