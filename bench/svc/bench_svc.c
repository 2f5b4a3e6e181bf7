/* longctx-svc over loopback HTTP: /evict/write ingest of 256-token spans (spans/s),
 * /evict/retrieve latency percentiles at 20k and 100k spans in one session (keep-alive
 * connection), and the server's RSS per 100k spans.
 *
 *   bench_svc [--bin build/bin/longctx-svc] [--spans 100000] [--batch 256] [--queries 1000]
 *             [--extra '"use_rerank":false']   (JSON members added to every retrieve body)
 *
 * Starts the REAL binary on a free port with a fresh data dir (removed at the end). Spans
 * are 256 pseudo-words drawn (seeded, Zipf-ish) from a 20k-word vocabulary plus numbers,
 * so BM25 postings and dense vectors look like real evicted text, not one repeated line. */
#include <arpa/inet.h>
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

#include "spangen.h"

typedef struct { char *p; size_t n; } acc;
static size_t on_data(char *d, size_t sz, size_t nm, void *ud)
{
    acc *a = ud;
    size_t n = sz * nm;
    char *p = realloc(a->p, a->n + n + 1);
    if (!p) return 0;
    memcpy(p + a->n, d, n);
    a->n += n;
    p[a->n] = 0;
    a->p = p;
    return n;
}

static CURL *H;
static const char *extra_opts = "";   /* --extra '"use_rerank":false' → appended to retrieve bodies */
static char base[64];

static long post(const char *path, const char *body, size_t len, acc *out)
{
    char url[256];
    snprintf(url, sizeof url, "%s%s", base, path);
    acc a = {0};
    curl_easy_setopt(H, CURLOPT_URL, url);
    curl_easy_setopt(H, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(H, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
    curl_easy_setopt(H, CURLOPT_WRITEDATA, &a);
    long st = 0;
    if (curl_easy_perform(H) == CURLE_OK) curl_easy_getinfo(H, CURLINFO_RESPONSE_CODE, &st);
    if (out) *out = a;
    else free(a.p);
    return st;
}

static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t l = sizeof a;
    bind(fd, (struct sockaddr *)&a, sizeof a);
    getsockname(fd, (struct sockaddr *)&a, &l);
    close(fd);
    return ntohs(a.sin_port);
}

static double rss_mb(pid_t pid)
{
    char p[64];
    snprintf(p, sizeof p, "/proc/%d/statm", (int)pid);
    FILE *f = fopen(p, "r");
    if (!f) return -1;
    unsigned long long sz, res;
    int n = fscanf(f, "%llu %llu", &sz, &res);
    fclose(f);
    return n == 2 ? (double)res * (double)sysconf(_SC_PAGESIZE) / (1024.0 * 1024.0) : -1;
}

/* RssAnon and RssFile of pid in MB: texts are read through mappings of the store's log
 * (page cache, reclaimable), so the anonymous part is what the spans really cost. */
static void rss_split(pid_t pid, double *anon, double *file)
{
    char p[64], line[256];
    snprintf(p, sizeof p, "/proc/%d/status", (int)pid);
    *anon = *file = -1;
    FILE *f = fopen(p, "r");
    if (!f) return;
    unsigned long long kb;
    while (fgets(line, sizeof line, f)) {
        if (sscanf(line, "RssAnon: %llu", &kb) == 1) *anon = (double)kb / 1024.0;
        else if (sscanf(line, "RssFile: %llu", &kb) == 1) *file = (double)kb / 1024.0;
    }
    fclose(f);
}

/* Server CPU seconds (user + system) so far: on a shared, overloaded machine the wall-clock
 * percentiles include run-queue waits; CPU per request is the stable number. */
static pid_t server_pid;
static double cpu_s(pid_t pid)
{
    char p[64], buf[1024];
    snprintf(p, sizeof p, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(p, "r");
    if (!f) return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    char *q = strrchr(buf, ')');
    if (!q) return -1;
    unsigned long long ut = 0, st = 0;
    /* fields after ") ": state(3) ... utime(14) stime(15) */
    if (sscanf(q + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2) return -1;
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double pct(double *v, int n, double p)
{
    int i = (int)ceil(p / 100.0 * n) - 1;
    return v[i < 0 ? 0 : i >= n ? n - 1 : i];
}

/* Ingests spans [from, to) in batches; returns spans/s. */
static double ingest(int from, int to, int batch)
{
    size_t cap = (size_t)batch * 2600 + 256;
    char *body = malloc(cap), *t = malloc(4096);
    double t0 = now_ms(), c0 = cpu_s(server_pid);
    for (int s = from; s < to;) {
        size_t o = (size_t)sprintf(body, "{\"session_id\":\"bench\",\"chunks\":[");
        for (int k = 0; k < batch && s < to; k++, s++) {
            span_text(t, 256);
            o += (size_t)sprintf(body + o, "%s{\"text\":\"%s\",\"token_range\":[%lld,%lld],\"layer\":0,\"score\":0.5}", k ? "," : "", t,
                                 (long long)s * 256, (long long)s * 256 + 255);
        }
        o += (size_t)sprintf(body + o, "]}");
        long st = post("/evict/write", body, o, NULL);
        if (st != 200) { fprintf(stderr, "write failed: HTTP %ld\n", st); exit(1); }
    }
    double dt = now_ms() - t0;
    double cpu = cpu_s(server_pid) - c0;
    printf("  (server CPU %.1f s for %d spans = %.0f spans per CPU-second)\n", cpu, to - from, cpu > 0 ? (to - from) / cpu : 0);
    free(body);
    free(t);
    return (to - from) / (dt / 1000.0);
}

static void latency(const char *label, int nq, int top_k, int long_query)
{
    double *lat = malloc(sizeof(double) * (size_t)nq);
    char q[4096], body[8192];
    double c0 = 0;
    for (int i = 0; i < 10 + nq; i++) {
        if (long_query) {   /* a rescue-style user turn: long filler then "Question:" */
            size_t o = span_text(q, 150);
            o += (size_t)sprintf(q + o, " Question: what is %s %s %s", word(), word(), word());
        } else {
            size_t o = 0;
            for (int k = 0; k < 6; k++) o += (size_t)sprintf(q + o, "%s%s", k ? " " : "", word());
        }
        int n = snprintf(body, sizeof body, "{\"session_id\":\"bench\",\"query\":\"%s\",\"top_k\":%d%s%s}", q, top_k,
                         *extra_opts ? "," : "", extra_opts);
        double t0 = now_ms();
        acc a;
        long st = post("/evict/retrieve", body, (size_t)n, &a);
        double dt = now_ms() - t0;
        if (st != 200) { fprintf(stderr, "retrieve failed: HTTP %ld %s\n", st, a.p ? a.p : ""); exit(1); }
        free(a.p);
        if (i >= 10) lat[i - 10] = dt;    /* 10 warm-up queries */
        if (i == 9) c0 = cpu_s(server_pid);
    }
    double cpu_ms = (cpu_s(server_pid) - c0) * 1000.0 / nq;
    qsort(lat, (size_t)nq, sizeof *lat, cmp_d);
    printf("%-44s p50 %7.3f ms   p95 %7.3f ms   p99 %7.3f ms   server CPU %.3f ms/req (n=%d)\n", label, pct(lat, nq, 50),
           pct(lat, nq, 95), pct(lat, nq, 99), cpu_ms, nq);
    free(lat);
}

int main(int argc, char **argv)
{
    const char *bin = "bin/longctx-svc";
    int spans = 100000, batch = 256, nq = 1000;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--bin")) bin = argv[i + 1];
        else if (!strcmp(argv[i], "--spans")) spans = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--batch")) batch = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--queries")) nq = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--extra")) extra_opts = argv[i + 1];
    }
    if (access(bin, X_OK) != 0) {
        static char alt[4096];
        snprintf(alt, sizeof alt, "%s/../bin/longctx-svc", getenv("PWD") ? getenv("PWD") : ".");
        bin = access(alt, X_OK) == 0 ? alt : bin;
    }
    if (access(bin, X_OK) != 0) { fprintf(stderr, "longctx-svc not found (use --bin)\n"); return 1; }
    make_vocab();
    char dir[] = "/tmp/lcxbench.XXXXXX";
    if (!mkdtemp(dir)) return 1;
    int port = free_port();
    char ps[16];
    snprintf(ps, sizeof ps, "%d", port);
    snprintf(base, sizeof base, "http://127.0.0.1:%d", port);
    pid_t pid = fork();
    if (pid == 0) {
        execl(bin, bin, "serve", "--host", "127.0.0.1", "--port", ps, "--data-dir", dir, "--threads", "2", "--quiet",
              "--max-chunks-per-request", "100000", (char *)NULL);
        _exit(127);
    }
    server_pid = pid;
    curl_global_init(CURL_GLOBAL_ALL);
    H = curl_easy_init();   /* one handle = one keep-alive connection for the whole run */
    curl_easy_setopt(H, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(H, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(H, CURLOPT_TCP_NODELAY, 1L);
    struct curl_slist *hl = curl_slist_append(NULL, "Expect:");
    hl = curl_slist_append(hl, "Content-Type: application/json");
    curl_easy_setopt(H, CURLOPT_HTTPHEADER, hl);
    int up = 0;
    for (int i = 0; i < 500 && !up; i++) {
        char url[128];
        snprintf(url, sizeof url, "%s/healthz", base);
        curl_easy_setopt(H, CURLOPT_URL, url);
        curl_easy_setopt(H, CURLOPT_HTTPGET, 1L);
        acc a = {0};
        curl_easy_setopt(H, CURLOPT_WRITEDATA, &a);
        long st = 0;
        if (curl_easy_perform(H) == CURLE_OK) curl_easy_getinfo(H, CURLINFO_RESPONSE_CODE, &st);
        free(a.p);
        up = st == 200;
        if (!up) usleep(20000);
    }
    if (!up) { fprintf(stderr, "server did not start\n"); kill(pid, SIGKILL); return 1; }
    double rss0 = rss_mb(pid);
    printf("longctx-svc loopback benchmark: %d spans of 256 words, batch %d, %d queries per point\n", spans, batch, nq);
    {   /* the HTTP floor: GET /healthz on the same keep-alive connection */
        char url[128];
        snprintf(url, sizeof url, "%s/healthz", base);
        double *lat = malloc(sizeof(double) * (size_t)nq);
        for (int i = 0; i < nq; i++) {
            acc a = {0};
            curl_easy_setopt(H, CURLOPT_URL, url);
            curl_easy_setopt(H, CURLOPT_HTTPGET, 1L);
            curl_easy_setopt(H, CURLOPT_WRITEDATA, &a);
            double t0 = now_ms();
            curl_easy_perform(H);
            lat[i] = now_ms() - t0;
            free(a.p);
        }
        qsort(lat, (size_t)nq, sizeof *lat, cmp_d);
        printf("%-44s p50 %7.3f ms   p95 %7.3f ms   p99 %7.3f ms   (n=%d)\n", "GET /healthz (HTTP floor)", pct(lat, nq, 50),
               pct(lat, nq, 95), pct(lat, nq, 99), nq);
        free(lat);
    }
    printf("server RSS empty: %.1f MB\n", rss0);

    int first = spans < 20000 ? spans : 20000;
    double r1 = ingest(0, first, batch);
    printf("/evict/write ingest (0 → %d spans)           %9.0f spans/s\n", first, r1);
    double rss20 = rss_mb(pid);
    char label[96];
    snprintf(label, sizeof label, "/evict/retrieve @%dk, top_k 8, 6-word query", first / 1000);
    latency(label, nq, 8, 0);
    snprintf(label, sizeof label, "/evict/retrieve @%dk, top_k 8, rescue turn", first / 1000);
    latency(label, nq, 8, 1);
    if (spans > first) {
        double r2 = ingest(first, spans, batch);
        printf("/evict/write ingest (%d → %d spans)     %9.0f spans/s\n", first, spans, r2);
        snprintf(label, sizeof label, "/evict/retrieve @%dk, top_k 8, 6-word query", spans / 1000);
        latency(label, nq, 8, 0);
        snprintf(label, sizeof label, "/evict/retrieve @%dk, top_k 8, rescue turn", spans / 1000);
        latency(label, nq, 8, 1);
    }
    double rssN = rss_mb(pid), anon, file;
    rss_split(pid, &anon, &file);
    printf("server RSS: empty %.1f MB, @%dk %.1f MB, @%dk %.1f MB → %.1f MB per 100k spans (@%dk: anonymous %.1f MB, "
           "file-backed %.1f MB)\n", rss0, first / 1000, rss20, spans / 1000, rssN, (rssN - rss0) / spans * 100000.0,
           spans / 1000, anon, file);
    /* hibernate + resume of the big session, as a client sees it */
    double t0 = now_ms();
    post("/sessions/bench/hibernate", "", 0, NULL);
    double t1 = now_ms();
    post("/sessions/bench/resume", "", 0, NULL);
    double t2 = now_ms();
    printf("hibernate %.1f ms, resume %.1f ms (%d spans); RSS after hibernate+resume %.1f MB\n", t1 - t0, t2 - t1, spans,
           rss_mb(pid));
    curl_slist_free_all(hl);
    curl_easy_cleanup(H);
    kill(pid, SIGTERM);
    int st;
    waitpid(pid, &st, 0);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    return 0;
}
