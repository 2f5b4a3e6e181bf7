#define _GNU_SOURCE   /* strcasestr */
/* Integration (real longctx-svc binary): per-client request-rate and connection limits
 * (429 in the OpenAI error shape with Retry-After), request ids, and the /metrics families
 * of issue #24's operations list (evict rounds, store fsync histogram, scopes, background
 * backlog, limit counters). */
#include "svc_harness.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

/* GET path with optional extra header; keeps the response in *r. */
static long get_h(sh_server *s, const char *path, const char *hdr, tu_resp *r)
{
    char url[512];
    snprintf(url, sizeof url, "%s%s", s->base, path);
    const char *h[2] = {hdr, NULL};
    tu_http("GET", url, NULL, 0, hdr ? h : NULL, r);
    return r->status;
}

/* Asserts a 429 in the OpenAI error shape with code, and returns its Retry-After. */
static long assert_429(const tu_resp *r, const char *code)
{
    assert_int_equal(r->status, 429);
    cJSON *j = cJSON_Parse(r->body);
    sh_assert_error(j, code);
    const cJSON *e = cJSON_GetObjectItem(j, "error");
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(e, "type")), "requests");
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(e, "param")));
    cJSON_Delete(j);
    char ra[32];
    assert_int_equal(tu_resp_header(r, "Retry-After", ra, sizeof ra), 0);
    long v = atol(ra);
    assert_true(v >= 1);
    return v;
}

/* Value of an exposition line "name{labels} v" / "name v" in /metrics text, -1 if absent. */
static double metric(const char *text, const char *series)
{
    size_t l = strlen(series);
    for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
        if (!strncmp(p, series, l) && p[l] == ' ') return atof(p + l + 1);
    return -1;
}

static char *metrics_text(sh_server *s)
{
    tu_resp r;
    assert_int_equal(get_h(s, "/metrics", NULL, &r), 200);
    char *t = strdup(r.body);
    tu_resp_free(&r);
    return t;
}

static void test_rate_limit(void **state)
{
    (void)state;
    sh_server S;
    /* 2 requests/s sustained, bursts of 3 */
    const char *extra[] = {"--client-rate", "2", "--client-burst", "3", NULL};
    sh_start(&S, NULL, extra, NULL);   /* the harness's /healthz polls are exempt */
    tu_resp r;
    int ok = 0;
    /* each call is a fresh connection: reconnecting does not refill the bucket */
    for (int i = 0; i < 3; i++) {
        get_h(&S, "/longctx/status", NULL, &r);
        ok += r.status == 200;
        tu_resp_free(&r);
    }
    assert_true(ok >= 2);   /* 3 unless the host stalled long enough to refill a token */
    int limited = 0;
    long retry = 0;
    for (int i = 0; i < 6 && !limited; i++) {
        get_h(&S, "/longctx/status", NULL, &r);
        if (r.status == 429) { retry = assert_429(&r, "rate_limit_exceeded"); limited = 1; }
        else assert_int_equal(r.status, 200);
        tu_resp_free(&r);
    }
    assert_true(limited);
    assert_true(retry >= 1 && retry <= 2);   /* one token at 2/s: ceil(<= 0.5 s) = 1 */
    /* POSTs with a body are refused the same way (the body is read and dropped) */
    char url[512];
    snprintf(url, sizeof url, "%s/evict/write", S.base);
    const char *json[] = {"Content-Type: application/json", NULL};
    static const char wbody[] = "{\"session_id\":\"rl\",\"chunks\":[{\"text\":\"kept out\",\"token_range\":[0,5]}]}";
    tu_http("POST", url, wbody, sizeof wbody - 1, json, &r);
    if (r.status == 429) assert_429(&r, "rate_limit_exceeded");
    tu_resp_free(&r);
    /* liveness probes are never limited */
    for (int i = 0; i < 10; i++) {
        get_h(&S, "/healthz", NULL, &r);
        assert_int_equal(r.status, 200);
        tu_resp_free(&r);
    }
    /* after Retry-After the client is served again */
    usleep((useconds_t)(retry * 1000000 + 200000));
    get_h(&S, "/longctx/status", NULL, &r);
    assert_int_equal(r.status, 200);
    tu_resp_free(&r);
    /* refusals are counted */
    usleep(1600000);   /* three tokens back */
    char *m = metrics_text(&S);
    assert_true(metric(m, "longctx_client_limited_total{limit=\"rate\"}") >= 1);
    assert_true(metric(m, "longctx_client_limited_total{limit=\"connections\"}") == 0);
    assert_true(metric(m, "longctx_clients_tracked") >= 1);
    free(m);
    assert_int_equal(sh_stop(&S, SIGTERM), 0);
    sh_cleanup(&S);
}

static int dial(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    return fd;
}

/* One GET on fd; returns the status, copies the head (status line + headers) to head. */
static int raw_get(int fd, const char *path, char *head, size_t cap)
{
    char req[256];
    int n = snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", path);
    assert_int_equal(send(fd, req, (size_t)n, MSG_NOSIGNAL), n);
    char buf[16384];
    size_t got = 0;
    for (;;) {
        struct pollfd p = {fd, POLLIN, 0};
        assert_true(poll(&p, 1, 10000) == 1);
        ssize_t r = recv(fd, buf + got, sizeof buf - 1 - got, 0);
        if (r <= 0) break;
        got += (size_t)r;
        buf[got] = 0;
        const char *he = strstr(buf, "\r\n\r\n");
        const char *cl = he ? strcasestr(buf, "Content-Length:") : NULL;
        if (he && cl && got >= (size_t)(he + 4 - buf) + (size_t)atol(cl + 15)) break;
    }
    buf[got] = 0;
    snprintf(head, cap, "%s", buf);
    int st = 0;
    sscanf(buf, "HTTP/1.1 %d", &st);
    return st;
}

/* A keep-alive connection served once. Retried: connections of earlier requests (the
 * harness's start-up probes) may still count until the server has seen them close. */
static int dial_served(int port)
{
    char head[16384];
    for (int i = 0; i < 100; i++) {
        int fd = dial(port);
        if (raw_get(fd, "/longctx/status", head, sizeof head) == 200) return fd;
        close(fd);
        usleep(50000);
    }
    fail_msg("no connection was served");
    return -1;
}

static void test_connection_limit(void **state)
{
    (void)state;
    sh_server S;
    const char *extra[] = {"--client-max-connections", "2", NULL};
    sh_start(&S, NULL, extra, NULL);
    char head[16384];
    /* two keep-alive connections, each served once (so both are open on the server) */
    int a = dial_served(S.port), b = dial_served(S.port);
    /* a third one is refused with a JSON 429 and closed */
    int c = dial(S.port);
    assert_int_equal(raw_get(c, "/longctx/status", head, sizeof head), 429);
    assert_non_null(strcasestr(head, "Retry-After: 1"));
    assert_non_null(strcasestr(head, "Connection: close"));
    assert_non_null(strstr(head, "\"too_many_connections\""));
    assert_non_null(strstr(head, "\"type\":\"requests\""));
    char one;
    struct pollfd p = {c, POLLIN, 0};
    assert_true(poll(&p, 1, 10000) == 1);
    assert_true(recv(c, &one, 1, 0) == 0);   /* closed by the server */
    close(c);
    /* the two are still served */
    assert_int_equal(raw_get(a, "/longctx/status", head, sizeof head), 200);
    /* closing one frees its slot (the server notices the close asynchronously) */
    close(b);
    int st = 0;
    for (int i = 0; i < 100 && st != 200; i++) {
        int d = dial(S.port);
        st = raw_get(d, "/longctx/status", head, sizeof head);
        close(d);
        if (st != 200) usleep(50000);
    }
    assert_int_equal(st, 200);
    close(a);
    tu_resp r;
    usleep(200000);
    char *m = metrics_text(&S);
    assert_true(metric(m, "longctx_client_limited_total{limit=\"connections\"}") >= 1);
    free(m);
    (void)r;
    assert_int_equal(sh_stop(&S, SIGTERM), 0);
    sh_cleanup(&S);
}

/* Defaults: generous enough for many concurrent keep-alive clients of one address. */
static void test_defaults_generous(void **state)
{
    (void)state;
    sh_server S;
    sh_start(&S, NULL, NULL, NULL);
    enum { N = 64 };
    int fd[N];
    char head[16384];
    for (int i = 0; i < N; i++) fd[i] = dial(S.port);
    for (int round = 0; round < 5; round++)
        for (int i = 0; i < N; i++) assert_int_equal(raw_get(fd[i], "/longctx/status", head, sizeof head), 200);
    for (int i = 0; i < N; i++) close(fd[i]);
    char *m = metrics_text(&S);
    assert_true(metric(m, "longctx_client_limited_total{limit=\"rate\"}") == 0);
    free(m);
    /* the limits are on by default and shown in --help */
    char *out = NULL, cmd[600];
    snprintf(cmd, sizeof cmd, "'%s' serve --help", tu_bin("longctx-svc"));
    assert_int_equal(tu_run(cmd, &out), 0);
    assert_non_null(strstr(out, "--client-rate"));
    assert_non_null(strstr(out, "--client-max-connections"));
    free(out);
    assert_int_equal(sh_stop(&S, SIGTERM), 0);
    sh_cleanup(&S);
}

static void test_request_id(void **state)
{
    (void)state;
    sh_server S;
    sh_start(&S, NULL, NULL, NULL);
    tu_resp r;
    char v[128], w[128];
    get_h(&S, "/longctx/status", "X-Request-Id: trace-42.a_b:c", &r);
    assert_int_equal(tu_resp_header(&r, "X-Request-Id", v, sizeof v), 0);
    assert_string_equal(v, "trace-42.a_b:c");
    tu_resp_free(&r);
    /* an id with characters outside the set is replaced by the service's own */
    get_h(&S, "/longctx/status", "X-Request-Id: bad id\"x", &r);
    assert_int_equal(tu_resp_header(&r, "X-Request-Id", v, sizeof v), 0);
    assert_int_equal(strlen(v), 16);
    tu_resp_free(&r);
    get_h(&S, "/nope", NULL, &r);
    assert_int_equal(r.status, 404);
    assert_int_equal(tu_resp_header(&r, "X-Request-Id", w, sizeof w), 0);
    assert_int_equal(strlen(w), 16);
    assert_string_not_equal(v, w);
    tu_resp_free(&r);
    assert_int_equal(sh_stop(&S, SIGTERM), 0);
    sh_cleanup(&S);
}

static void test_ops_metrics(void **state)
{
    (void)state;
    sh_server S;
    sh_start(&S, NULL, NULL, NULL);
    /* rounds: batch 1 carries rounds 4,4,5 (2 runs), batch 2 round 6, batch 3 no round */
    assert_int_equal(sh_post(&S, "/evict/write",
                             "{\"session_id\":\"om\",\"chunks\":[{\"text\":\"a one\",\"token_range\":[0,4],\"round\":4},"
                             "{\"text\":\"a two\",\"token_range\":[5,9],\"round\":4},{\"text\":\"a three\",\"token_range\":[10,14],\"round\":5}]}",
                             NULL),
                     200);
    assert_int_equal(sh_post(&S, "/evict/write",
                             "{\"session_id\":\"om\",\"chunks\":[{\"text\":\"b one\",\"token_range\":[15,19],\"round\":6}]}", NULL),
                     200);
    assert_int_equal(sh_post(&S, "/evict/write", "{\"session_id\":\"om\",\"chunks\":[{\"text\":\"c one\",\"token_range\":[20,24]}]}",
                             NULL),
                     200);
    char *m = metrics_text(&S);
    assert_true(metric(m, "longctx_evict_rounds_total") == 3);
    /* every acknowledged write made at least one fdatasync, all counted, buckets cumulative */
    double cnt = metric(m, "longctx_store_fsync_duration_seconds_count");
    assert_true(cnt >= 3);
    assert_true(metric(m, "longctx_store_fsync_duration_seconds_bucket{le=\"+Inf\"}") == cnt);
    assert_true(metric(m, "longctx_store_fsync_duration_seconds_bucket{le=\"0.0001\"}") <=
                metric(m, "longctx_store_fsync_duration_seconds_bucket{le=\"2.5\"}"));
    assert_true(metric(m, "longctx_store_fsync_duration_seconds_sum") > 0);
    assert_true(metric(m, "longctx_scopes_in_ram") == 0);
    assert_true(metric(m, "longctx_scopes_on_disk") == 0);
    assert_true(metric(m, "longctx_neural_backlog") == 0);
    assert_non_null(strstr(m, "# TYPE longctx_store_fsync_duration_seconds histogram"));
    free(m);
    /* a code scope: indexed → in RAM and on disk */
    char *dir = tu_tmpdir(), p[4200];
    snprintf(p, sizeof p, "%s/.git", dir);
    assert_int_equal(mkdir(p, 0700), 0);
    snprintf(p, sizeof p, "%s/lib.c", dir);
    static const char src[] = "int frobnicate(int x) { return x * 3; }\n";
    assert_int_equal(tu_write(p, src, sizeof src - 1), 0);
    char path[4400];
    snprintf(path, sizeof path, "/index?scope=%s", dir);
    assert_int_equal(sh_post(&S, path, "", NULL), 200);
    m = metrics_text(&S);
    assert_true(metric(m, "longctx_scopes_in_ram") == 1);
    assert_true(metric(m, "longctx_scopes_on_disk") == 1);
    assert_true(metric(m, "longctx_scope_memory_bytes") > 0);
    free(m);
    assert_int_equal(sh_stop(&S, SIGTERM), 0);
    sh_cleanup(&S);
    tu_rmrf(dir);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rate_limit),
        cmocka_unit_test(test_connection_limit),
        cmocka_unit_test(test_defaults_generous),
        cmocka_unit_test(test_request_id),
        cmocka_unit_test(test_ops_metrics),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
