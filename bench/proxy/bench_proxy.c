/* bench_proxy BIN_DIR [N]: time to first byte of a streamed chat completion, straight to
 * a fake upstream vs through longctx-svc's proxy (no scope in the prompt, so this is the
 * proxy's own overhead: parse, rewrite, upstream connect, stream hand-over). Prints p50,
 * p95 and the added p50/p95. Each request opens a fresh connection on both paths. */
#define _GNU_SOURCE
#include "fake_upstream.h"

#include <curl/curl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static size_t sink(char *p, size_t s, size_t n, void *u) { return s * n; }

static double ttfb_ms(const char *url)
{
    static const char body[] = "{\"model\":\"sse\",\"stream\":true,\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}";
    CURL *h = curl_easy_init();
    struct curl_slist *hl = curl_slist_append(NULL, "Content-Type: application/json");
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hl);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, sink);
    curl_easy_setopt(h, CURLOPT_FORBID_REUSE, 1L);
    double t = -1;
    if (curl_easy_perform(h) == CURLE_OK) curl_easy_getinfo(h, CURLINFO_STARTTRANSFER_TIME, &t);
    curl_slist_free_all(hl);
    curl_easy_cleanup(h);
    return t * 1000;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double pct(double *v, int n, double p) { return v[(int)(p * (n - 1) + 0.5)]; }

int main(int argc, char **argv)
{
    const char *bindir = argc > 1 ? argv[1] : "build/bin";
    int n = argc > 2 ? atoi(argv[2]) : 300;
    signal(SIGPIPE, SIG_IGN);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    fake_upstream *f = fu_start();
    char up[64], svc_bin[4096], port_s[16], dir[] = "/tmp/lcxbench.XXXXXX";
    snprintf(up, sizeof up, "http://127.0.0.1:%d", fu_port(f));
    snprintf(svc_bin, sizeof svc_bin, "%s/longctx-svc", bindir);
    if (!mkdtemp(dir)) return 1;
    int port = 20000 + getpid() % 20000;
    snprintf(port_s, sizeof port_s, "%d", port);
    pid_t pid = fork();
    if (pid == 0) {
        execl(svc_bin, svc_bin, "serve", "--port", port_s, "--data-dir", dir, "--upstream", up, "--quiet", (char *)0);
        _exit(127);
    }
    char direct[128], proxied[128];
    snprintf(direct, sizeof direct, "%s/v1/chat/completions", up);
    snprintf(proxied, sizeof proxied, "http://127.0.0.1:%d/v1/chat/completions", port);
    for (int i = 0; i < 200 && ttfb_ms(proxied) < 0; i++) usleep(50000);
    double *a = calloc((size_t)n, sizeof *a), *b = calloc((size_t)n, sizeof *b);
    for (int i = 0; i < 20; i++) ttfb_ms(direct), ttfb_ms(proxied); /* warm-up */
    for (int i = 0; i < n; i++) {
        a[i] = ttfb_ms(direct);
        b[i] = ttfb_ms(proxied);
    }
    qsort(a, (size_t)n, sizeof *a, cmp);
    qsort(b, (size_t)n, sizeof *b, cmp);
    printf("proxy TTFB, streamed completion, n=%d each\n", n);
    printf("  direct to upstream : p50 %.3f ms  p95 %.3f ms\n", pct(a, n, .5), pct(a, n, .95));
    printf("  through the proxy  : p50 %.3f ms  p95 %.3f ms  (p75 %.3f, p90 %.3f, p99 %.3f)\n", pct(b, n, .5),
           pct(b, n, .95), pct(b, n, .75), pct(b, n, .9), pct(b, n, .99));
    printf("  added by the proxy : p50 %.3f ms  p95 %.3f ms\n", pct(b, n, .5) - pct(a, n, .5),
           pct(b, n, .95) - pct(a, n, .95));
    kill(pid, SIGTERM);
    waitpid(pid, NULL, 0);
    fu_stop(f);
    char cmd[64];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    return system(cmd) == 0 ? 0 : 1;
}
