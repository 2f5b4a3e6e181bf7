#define _GNU_SOURCE   /* strcasestr */
/* Integration (real longctx-svc binary): --auth-token, the non-loopback refusal,
 * GET /metrics (parsed as Prometheus text), graceful SIGTERM, --version. */
#include "svc_harness.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

static long req_h(sh_server *s, const char *method, const char *path, const char *auth, const char *body,
                  cJSON **json, tu_resp *keep)
{
    char url[512], hdr[600];
    snprintf(url, sizeof url, "%s%s", s->base, path);
    const char *h[3] = {"Content-Type: application/json", NULL, NULL};
    if (auth) { snprintf(hdr, sizeof hdr, "Authorization: %s", auth); h[1] = hdr; }
    tu_resp r;
    tu_http(method, url, body, body ? strlen(body) : 0, h, &r);
    long st = r.status;
    if (json) *json = r.body ? cJSON_Parse(r.body) : NULL;
    if (keep) *keep = r;
    else tu_resp_free(&r);
    return st;
}

static void assert_401(sh_server *s, const char *method, const char *path, const char *auth)
{
    cJSON *j = NULL;
    tu_resp r;
    assert_int_equal(req_h(s, method, path, auth, method[0] == 'P' ? "{}" : NULL, &j, &r), 401);
    sh_assert_error(j, "invalid_api_key");
    /* OpenAI clients read error.type */
    const cJSON *e = cJSON_GetObjectItem(j, "error");
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(e, "type")), "invalid_request_error");
    char v[128];
    assert_int_equal(tu_resp_header(&r, "WWW-Authenticate", v, sizeof v), 0);
    assert_non_null(strstr(v, "Bearer"));
    tu_resp_free(&r);
    cJSON_Delete(j);
}

static void test_auth_token(void **state)
{
    (void)state;
    const char *tok = "tok-3f9a1c7e5b2d";
    for (int via_env = 0; via_env < 2; via_env++) {
        sh_server S;
        const char *extra[] = {"--auth-token", tok, NULL};
        char envv[128];
        snprintf(envv, sizeof envv, "LONGCTX_AUTH_TOKEN=%s", tok);
        const char *env[] = {envv, NULL};
        sh_start(&S, NULL, via_env ? NULL : extra, via_env ? env : NULL);
        /* /healthz stays open (probes) */
        assert_int_equal(req_h(&S, "GET", "/healthz", NULL, NULL, NULL, NULL), 200);
        /* missing, wrong, truncated, longer, other scheme */
        assert_401(&S, "GET", "/longctx/status", NULL);
        assert_401(&S, "GET", "/longctx/status", "Bearer wrong");
        assert_401(&S, "GET", "/longctx/status", "Bearer tok-3f9a1c7e5b2");
        assert_401(&S, "GET", "/longctx/status", "Bearer tok-3f9a1c7e5b2dX");
        assert_401(&S, "GET", "/longctx/status", "Basic dG9rOnRvaw==");
        assert_401(&S, "GET", "/metrics", NULL);
        assert_401(&S, "POST", "/evict/retrieve", "Bearer nope");
        /* unknown routes do not reveal themselves without the token */
        assert_401(&S, "GET", "/no/such/route", NULL);
        char good[128];
        snprintf(good, sizeof good, "Bearer %s", tok);
        assert_int_equal(req_h(&S, "GET", "/longctx/status", good, NULL, NULL, NULL), 200);
        assert_int_equal(req_h(&S, "GET", "/metrics", good, NULL, NULL, NULL), 200);
        assert_int_equal(req_h(&S, "GET", "/no/such/route", good, NULL, NULL, NULL), 404);
        assert_int_equal(req_h(&S, "POST", "/evict/retrieve", good, "{\"session_id\":\"a\",\"query\":\"x\"}", NULL, NULL),
                         200);
        /* the scheme is case-insensitive (RFC 7235) */
        snprintf(good, sizeof good, "bearer %s", tok);
        assert_int_equal(req_h(&S, "GET", "/longctx/status", good, NULL, NULL, NULL), 200);
        assert_int_equal(sh_stop(&S, SIGTERM), 0);
        sh_cleanup(&S);
    }
}

/* Spawns serve --host host [extra] and returns the exit status when it exits within
 * 10 s, or -1 when it is still running (then killed). */
static int run_bind(const char *host, const char *const *extra, char *log_out, size_t ll)
{
    char *dir = tu_tmpdir(), port[16], log[4200];
    snprintf(port, sizeof port, "%d", tu_free_port());
    snprintf(log, sizeof log, "%s.log", dir);
    const char *argv[16] = {tu_bin("longctx-svc"), "serve", "--host", host, "--port", port, "--data-dir", dir};
    int n = 8;
    for (int i = 0; extra && extra[i]; i++) argv[n++] = extra[i];
    argv[n] = NULL;
    pid_t pid = tu_spawn((char *const *)argv, NULL, log);
    assert_true(pid > 0);
    int rc = -1;
    for (int w = 0; w < 1000; w++) {
        int st;
        if (waitpid(pid, &st, WNOHANG) == pid) { rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128; break; }
        if (tu_wait_http(atoi(port), "/healthz", 0)) break;   /* it is serving */
        usleep(10000);
    }
    if (rc < 0) tu_kill_wait(pid, SIGTERM, 20000);
    char cmd[4300], *out = NULL;
    snprintf(cmd, sizeof cmd, "cat '%s'", log);
    tu_run(cmd, &out);
    snprintf(log_out, ll, "%s", out ? out : "");
    free(out);
    unlink(log);
    tu_rmrf(dir);
    free(dir);
    return rc;
}

static void test_refuse_public_bind(void **state)
{
    (void)state;
    char log[4096];
    assert_int_equal(run_bind("0.0.0.0", NULL, log, sizeof log), 1);
    assert_non_null(strstr(log, "refusing to listen on non-loopback address '0.0.0.0'"));
    assert_non_null(strstr(log, "--auth-token"));
    /* allowed with a token, or with the explicit opt-out */
    const char *tok[] = {"--auth-token", "t0k", NULL};
    assert_int_equal(run_bind("0.0.0.0", tok, log, sizeof log), -1);
    const char *insecure[] = {"--insecure-no-auth", NULL};
    assert_int_equal(run_bind("0.0.0.0", insecure, log, sizeof log), -1);
    /* loopback needs neither */
    assert_int_equal(run_bind("127.0.0.1", NULL, log, sizeof log), -1);
}

/* ---- /metrics */

typedef struct { char name[128], labels[256]; double v; } sample;

/* Parses Prometheus text: every line is a comment ("# HELP"/"# TYPE") or
 * name[{labels}] value; each sample's family was declared by a TYPE line before it. */
static int parse_prom(const char *text, sample *out, int cap)
{
    int n = 0;
    char types[64][128];
    int nt = 0;
    const char *p = text;
    while (*p) {
        const char *e = strchr(p, '\n');
        assert_non_null(e);   /* every line ends with \n */
        char line[1024];
        size_t l = (size_t)(e - p);
        assert_true(l < sizeof line);
        memcpy(line, p, l);
        line[l] = 0;
        p = e + 1;
        if (line[0] == '#') {
            char kw[8], nm[128], ty[32];
            assert_true(sscanf(line, "# %7s %127s %31s", kw, nm, ty) >= 2);
            assert_true(!strcmp(kw, "HELP") || !strcmp(kw, "TYPE"));
            if (!strcmp(kw, "TYPE")) {
                assert_true(!strcmp(ty, "counter") || !strcmp(ty, "gauge") || !strcmp(ty, "histogram"));
                assert_true(nt < 64);
                snprintf(types[nt++], sizeof types[0], "%s", nm);
            }
            continue;
        }
        assert_true(n < cap);
        sample *s = &out[n++];
        size_t k = strspn(line, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_:");
        assert_true(k > 0 && k < sizeof s->name);
        memcpy(s->name, line, k);
        s->name[k] = 0;
        const char *r = line + k;
        s->labels[0] = 0;
        if (*r == '{') {
            const char *c = strchr(r, '}');
            assert_non_null(c);
            assert_true((size_t)(c - r - 1) < sizeof s->labels);
            memcpy(s->labels, r + 1, (size_t)(c - r - 1));
            s->labels[c - r - 1] = 0;
            r = c + 1;
        }
        assert_true(*r == ' ');
        char *end;
        s->v = strtod(r + 1, &end);
        assert_true(end != r + 1 && *end == 0);
        bool declared = false;
        for (int t = 0; t < nt && !declared; t++) {
            size_t tl = strlen(types[t]);
            declared = !strncmp(s->name, types[t], tl) &&
                       (s->name[tl] == 0 || !strcmp(s->name + tl, "_bucket") || !strcmp(s->name + tl, "_sum") ||
                        !strcmp(s->name + tl, "_count"));
        }
        assert_true(declared);
    }
    return n;
}

static double get(const sample *s, int n, const char *name, const char *labels)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(s[i].name, name) && !strcmp(s[i].labels, labels ? labels : "")) return s[i].v;
    return -1;
}

static void test_metrics(void **state)
{
    (void)state;
    sh_server S;
    sh_start(&S, NULL, NULL, NULL);
    enum { W = 5, R = 7, CH = 3 };
    for (int i = 0; i < W; i++) {
        char body[1024];
        snprintf(body, sizeof body,
                 "{\"session_id\":\"m%d\",\"chunks\":[{\"text\":\"alpha fact %d\",\"token_range\":[0,9]},"
                 "{\"text\":\"beta %d\",\"token_range\":[10,19]},{\"text\":\"gamma %d\",\"token_range\":[20,29]}]}",
                 i % 2, i, i, i);
        assert_int_equal(sh_post(&S, "/evict/write", body, NULL), 200);
    }
    for (int i = 0; i < R; i++)
        assert_int_equal(sh_post(&S, "/evict/retrieve", "{\"session_id\":\"m0\",\"query\":\"alpha fact\",\"top_k\":2}", NULL),
                         200);
    assert_int_equal(sh_get(&S, "/nope", NULL), 404);
    assert_int_equal(sh_post(&S, "/evict/write", "{bad", NULL), 400);
    assert_int_equal(sh_post(&S, "/evict/write", "{bad", NULL), 400);

    tu_resp r;
    assert_int_equal(req_h(&S, "GET", "/metrics", NULL, NULL, NULL, &r), 200);
    char ct[128];
    assert_int_equal(tu_resp_header(&r, "Content-Type", ct, sizeof ct), 0);
    assert_non_null(strstr(ct, "text/plain; version=0.0.4"));
    static sample s[2048];
    int n = parse_prom(r.body, s, 2048);
    tu_resp_free(&r);

    assert_true(get(s, n, "longctx_build_info", "version=\"" LCX_VERSION "\"") == 1);
    assert_true(get(s, n, "longctx_http_requests_total", "method=\"POST\",route=\"/evict/write\",status=\"200\"") == W);
    assert_true(get(s, n, "longctx_http_requests_total", "method=\"POST\",route=\"/evict/write\",status=\"400\"") == 2);
    assert_true(get(s, n, "longctx_http_requests_total", "method=\"POST\",route=\"/evict/retrieve\",status=\"200\"") == R);
    assert_true(get(s, n, "longctx_http_requests_total", "method=\"\",route=\"other\",status=\"404\"") == 1);
    assert_true(get(s, n, "longctx_http_errors_total", "method=\"POST\",route=\"/evict/write\",status=\"400\"") == 2);
    assert_true(get(s, n, "longctx_http_errors_total", "method=\"POST\",route=\"/evict/write\",status=\"200\"") == -1);
    /* histograms: cumulative, +Inf = _count = requests of the route */
    const char *lab = "method=\"POST\",route=\"/evict/retrieve\"";
    double prev = 0;
    int buckets = 0;
    for (int i = 0; i < n; i++) {
        if (strcmp(s[i].name, "longctx_http_request_duration_seconds_bucket") || strncmp(s[i].labels, lab, strlen(lab)))
            continue;
        assert_true(s[i].v >= prev);
        prev = s[i].v;
        buckets++;
        if (strstr(s[i].labels, "le=\"+Inf\"")) assert_true(s[i].v == R);
    }
    assert_true(buckets >= 2);
    assert_true(get(s, n, "longctx_http_request_duration_seconds_count", lab) == R);
    assert_true(get(s, n, "longctx_http_request_duration_seconds_sum", lab) > 0);
    assert_true(get(s, n, "longctx_spans_stored_total", NULL) == W * CH);
    assert_true(get(s, n, "longctx_rescue_retrievals_total", NULL) == R);
    assert_true(get(s, n, "longctx_rescue_hits_total", NULL) == R * 2);
    assert_true(get(s, n, "longctx_sessions_in_ram", NULL) == 2);
    assert_true(get(s, n, "longctx_sessions_on_disk", NULL) == 2);
    assert_true(get(s, n, "longctx_open_connections", NULL) >= 1);
    assert_int_equal(sh_stop(&S, SIGTERM), 0);
    sh_cleanup(&S);
}

/* ---- graceful SIGTERM */

static int tcp_connect(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) < 0) { close(fd); return -1; }
    return fd;
}

static void send_all(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        assert_true(w > 0);
        p += w, n -= (size_t)w;
    }
}

static void test_sigterm_graceful(void **state)
{
    (void)state;
    sh_server S;
    const char *extra[] = {"--shutdown-grace-s", "60", NULL};
    sh_start(&S, NULL, extra, NULL);
    char *dir = strdup(S.data_dir);
    /* an idle keep-alive connection must not hold the drain for the grace period */
    int idle = tcp_connect(S.port);
    assert_true(idle >= 0);
    const char *ping = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n";
    send_all(idle, ping, strlen(ping));
    char buf[4096];
    assert_true(recv(idle, buf, sizeof buf, 0) > 0);
    buf[0] = 0;

    const char *body = "{\"session_id\":\"graceful\",\"chunks\":[{\"text\":\"the in-flight fact\",\"token_range\":[0,9]}]}";
    size_t bl = strlen(body), half = bl / 2;
    char head[256];
    int hl = snprintf(head, sizeof head,
                      "POST /evict/write HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
                      "Expect: 100-continue\r\n\r\n",
                      bl);
    int fd = tcp_connect(S.port);
    assert_true(fd >= 0);
    send_all(fd, head, (size_t)hl);
    /* "100 Continue" means the server has taken the head: the request is in flight */
    size_t got = 0;
    while (!strstr(buf, "100 Continue\r\n\r\n")) {
        ssize_t r = recv(fd, buf + got, sizeof buf - 1 - got, 0);
        assert_true(r > 0);
        got += (size_t)r;
        buf[got] = 0;
    }
    got = 0;
    buf[0] = 0;
    send_all(fd, body, half);
    kill(S.pid, SIGTERM);
    /* the listening socket closes: new connections are refused */
    bool refused = false;
    for (int i = 0; i < 1000 && !refused; i++) {
        int c = tcp_connect(S.port);
        if (c < 0) refused = true;
        else { close(c); usleep(10000); }
    }
    assert_true(refused);
    /* the in-flight request still completes */
    send_all(fd, body + half, bl - half);
    for (;;) {
        ssize_t r = recv(fd, buf + got, sizeof buf - 1 - got, 0);
        if (r <= 0) break;
        got += (size_t)r;
        buf[got] = 0;
        if (strstr(buf, "\r\n\r\n") && strstr(buf, "}")) break;
    }
    buf[got] = 0;
    assert_non_null(strstr(buf, "HTTP/1.1 200"));
    assert_non_null(strstr(buf, "\"accepted\":1"));
    assert_non_null(strcasestr(buf, "Connection: close"));
    close(fd);
    int st = sh_stop(&S, SIGTERM);   /* waits (20 s at most) for the exit */
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    close(idle);
    /* flushed: the write is there after a restart */
    sh_server S2;
    sh_start(&S2, dir, NULL, NULL);
    cJSON *j = NULL;
    assert_int_equal(sh_post(&S2, "/evict/retrieve", "{\"session_id\":\"graceful\",\"query\":\"in-flight fact\"}", &j), 200);
    assert_int_equal(sh_count(j, "chunks"), 1);
    cJSON_Delete(j);
    assert_int_equal(sh_stop(&S2, SIGTERM), 0);
    sh_cleanup(&S2);
    sh_cleanup(&S);
    free(dir);
}

/* ---- --version: one version string (LCX_VERSION from CMake's project version) */
static void test_version(void **state)
{
    (void)state;
    const char *bins[] = {"longctx-svc", "longctx", "longctx-engine"};
    for (size_t i = 0; i < sizeof bins / sizeof bins[0]; i++) {
        char cmd[4200], want[128], *out = NULL;
        snprintf(cmd, sizeof cmd, "'%s' --version", tu_bin(bins[i]));
        assert_int_equal(tu_run(cmd, &out), 0);
        snprintf(want, sizeof want, "%s %s\n", bins[i], LCX_VERSION);
        assert_non_null(out);
        assert_string_equal(out, want);
        free(out);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_auth_token),
        cmocka_unit_test(test_refuse_public_bind),
        cmocka_unit_test(test_metrics),
        cmocka_unit_test(test_sigterm_graceful),
        cmocka_unit_test(test_version),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
