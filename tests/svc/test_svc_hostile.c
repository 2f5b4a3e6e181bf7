/* Integration: hostile HTTP against the REAL longctx-svc binary (issue #20). Raw sockets,
 * not curl, because each case is a request curl would not send: aborted uploads, NULs,
 * hundreds of parameters, unsupported codings, malformed framing. Every reply must be
 * exactly one HTTP response with a JSON error body, and nothing stored may change. */
#include "svc_harness.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static sh_server S;

static int setup(void **st)
{
    sh_start(&S, NULL, NULL, NULL);
    return 0;
}

static int teardown(void **st)
{
    if (S.pid > 0) {
        int w = sh_stop(&S, SIGTERM);
        assert_true(WIFEXITED(w) && WEXITSTATUS(w) == 0);
    }
    sh_cleanup(&S);
    return 0;
}

static int dial(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    return fd;
}

static void send_all(int fd, const char *d, size_t n)
{
    while (n) {
        ssize_t w = send(fd, d, n, MSG_NOSIGNAL);
        if (w <= 0) return;   /* the server may close early (that is what some cases test) */
        d += w, n -= (size_t)w;
    }
}

/* Reads until EOF, at most cap-1 bytes, waiting up to 5 s for each piece; returns the
 * length (-1: no EOF within the wait, i.e. the server left the connection hanging). */
static long read_reply(int fd, char *out, size_t cap)
{
    size_t n = 0;
    for (;;) {
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, 5000) <= 0) { out[n] = 0; return -1; }
        ssize_t r = recv(fd, out + n, cap - 1 - n, 0);
        if (r < 0 && errno == ECONNRESET) break;
        if (r <= 0) break;
        n += (size_t)r;
        if (n + 1 >= cap) break;
    }
    out[n] = 0;
    return (long)n;
}

/* One request on a fresh connection, the client half-closing after it: the reply. */
static long exchange(const char *req, size_t len, char *out, size_t cap)
{
    int fd = dial(S.port);
    send_all(fd, req, len);
    shutdown(fd, SHUT_WR);
    long n = read_reply(fd, out, cap);
    close(fd);
    return n;
}

static int count_substr(const char *s, const char *needle)
{
    int n = 0;
    for (const char *p = strstr(s, needle); p; p = strstr(p + 1, needle)) n++;
    return n;
}

/* Asserts out holds exactly one HTTP response with the given status and a JSON error body
 * {"error":{"code":code,...}} (code NULL: any). */
static void assert_json_error(const char *out, long n, int status, const char *code)
{
    assert_true(n > 0);
    assert_int_equal(count_substr(out, "HTTP/1.1 "), 1);
    int st = 0;
    assert_int_equal(sscanf(out, "HTTP/1.1 %d", &st), 1);
    if (st != status) fprintf(stderr, "reply: %s\n", out);
    assert_int_equal(st, status);
    assert_non_null(strstr(out, "Content-Type: application/json"));
    const char *b = strstr(out, "\r\n\r\n");
    assert_non_null(b);
    cJSON *j = cJSON_Parse(b + 4);
    assert_non_null(j);
    sh_assert_error(j, code ? code : cJSON_GetObjectItem(cJSON_GetObjectItem(j, "error"), "code")->valuestring);
    cJSON_Delete(j);
}

static long raw(const char *req, char *out, size_t cap) { return exchange(req, strlen(req), out, cap); }

/* Sockets the server process holds open now (listening socket included). */
static int server_sockets(void)
{
    int n = tu_proc_sockets(S.pid);
    assert_true(n >= 0);
    return n;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Waits (up to 5 s, far below --body-timeout-s 10 and the idle timeout 30) for the
 * server's sockets to drop to at most want; returns the last count. */
static int wait_sockets(int want)
{
    int n = server_sockets();
    for (int i = 0; i < 50 && n > want; i++) {
        sleep_ms(100);
        n = server_sockets();
    }
    return n;
}

/* ---- 1. aborted uploads release their connection at once */
static void test_aborted_uploads_release_connections(void **st)
{
    int base = server_sockets();
    static const char req[] = "POST /evict/write HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                              "Content-Length: 102\r\n\r\n{}";
    for (int i = 0; i < 64; i++) {
        int fd = dial(S.port);
        send_all(fd, req, sizeof req - 1);   /* headers and the short body in one segment */
        shutdown(fd, SHUT_WR);               /* ...then the FIN, as an aborting client does */
        close(fd);
    }
    int left = wait_sockets(base);
    if (left > base) fprintf(stderr, "%d connections of aborted uploads still open\n", left - base);
    assert_true(left <= base);
    cJSON *j;
    assert_int_equal(sh_get(&S, "/healthz", &j), 200);
    cJSON_Delete(j);
}

/* A keep-alive client that half-closes after its reply is released too. */
static void test_half_close_after_reply_releases(void **st)
{
    int base = server_sockets();
    char out[4096];
    for (int i = 0; i < 32; i++) {
        long n = raw("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", out, sizeof out);
        assert_true(n > 0);   /* the reply, then EOF (not a 5 s wait) */
    }
    assert_true(wait_sockets(base) <= base);
}

/* A body that stops arriving costs its connection after --body-timeout-s. */
static void test_stalled_body_times_out(void **st)
{
    sh_server s2;
    const char *extra[] = {"--body-timeout-s", "1", NULL};
    sh_start(&s2, NULL, extra, NULL);
    int fd = dial(s2.port);
    static const char req[] = "POST /evict/write HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"ses";
    send_all(fd, req, sizeof req - 1);
    char out[1024];
    long n = read_reply(fd, out, sizeof out);   /* EOF within the 5 s wait, not a hang */
    assert_true(n >= 0);
    close(fd);
    sh_stop(&s2, SIGTERM);
    sh_cleanup(&s2);
}

/* ---- 2. a NUL inside a session id never selects another session */
static void seed_victim(void)
{
    cJSON *j;
    assert_int_equal(sh_post(&S, "/evict/write",
                             "{\"session_id\":\"victim\",\"chunks\":[{\"text\":\"the vault code is 7731\","
                             "\"token_range\":[0,9],\"layer\":1,\"score\":0.5}]}", &j), 200);
    cJSON_Delete(j);
}

static int victim_total(void)
{
    cJSON *j;
    assert_int_equal(sh_get(&S, "/evict/dump?session_id=victim", &j), 200);
    int n = (int)cJSON_GetObjectItem(j, "session_total")->valuedouble;
    cJSON_Delete(j);
    return n;
}

static void test_nul_in_session_id(void **st)
{
    seed_victim();
    int before = victim_total();
    cJSON *j;
    /* JSON \u0000, every route that takes a body id */
    assert_int_equal(sh_post(&S, "/evict/retrieve", "{\"session_id\":\"victim\\u0000x\",\"query\":\"vault code\"}", &j), 400);
    sh_assert_error(j, NULL);
    cJSON_Delete(j);
    assert_int_equal(sh_post(&S, "/evict/write",
                             "{\"session_id\":\"victim\\u0000x\",\"chunks\":[{\"text\":\"planted\",\"token_range\":[50,51],"
                             "\"layer\":1,\"score\":0.5}]}", &j), 400);
    cJSON_Delete(j);
    assert_int_equal(sh_post(&S, "/retrieve", "{\"session_id\":\"victim\\u0000x\",\"query\":\"vault\"}", &j), 400);
    cJSON_Delete(j);
    /* %00 in the query string (dump, form-B write, retrieve) and in the path */
    assert_int_equal(sh_get(&S, "/evict/dump?session_id=victim%00x", &j), 400);
    sh_assert_error(j, NULL);
    cJSON_Delete(j);
    assert_int_equal(sh_post(&S, "/evict/write?session_id=victim%00x",
                             "{\"chunks\":[{\"text\":\"planted\",\"tokens\":[1,2,3],\"round\":1,\"layer\":0}]}", &j), 400);
    cJSON_Delete(j);
    assert_int_equal(sh_post(&S, "/evict/retrieve?session_id=victim%00x", "{\"query\":\"vault code\"}", &j), 400);
    cJSON_Delete(j);
    assert_int_equal(sh_post(&S, "/sessions/victim%00x/hibernate", "", &j), 400);
    cJSON_Delete(j);
    assert_int_equal(victim_total(), before);   /* nothing was written to victim */
}

/* ---- 3. a NUL inside span text is refused, never stored cut */
static void test_nul_in_text(void **st)
{
    cJSON *j;
    assert_int_equal(sh_post(&S, "/evict/write",
                             "{\"session_id\":\"nultext\",\"chunks\":[{\"text\":\"keep\\u0000tail\",\"token_range\":[0,3],"
                             "\"layer\":0,\"score\":0.5}]}", &j), 400);
    sh_assert_error(j, "nul_in_string");
    cJSON_Delete(j);
    assert_int_equal(sh_post(&S, "/evict/write?session_id=nultext",
                             "{\"chunks\":[{\"text\":\"keep\\u0000tail\",\"tokens\":[1,2],\"round\":1,\"layer\":0}]}", &j), 400);
    cJSON_Delete(j);
    assert_int_equal(sh_get(&S, "/evict/dump?session_id=nultext", &j), 200);
    assert_int_equal((int)cJSON_GetObjectItem(j, "session_total")->valuedouble, 0);
    cJSON_Delete(j);
    /* an escaped backslash before u0000 is ordinary text and is kept whole */
    assert_int_equal(sh_post(&S, "/evict/write",
                             "{\"session_id\":\"nultext\",\"chunks\":[{\"text\":\"keep\\\\u0000tail\",\"token_range\":[0,3],"
                             "\"layer\":0,\"score\":0.5}]}", &j), 200);
    cJSON_Delete(j);
}

/* ---- 4. hundreds of query parameters get 414 JSON, not silence */
static void test_many_query_params(void **st)
{
    int counts[] = {65, 500, 3000};
    for (size_t c = 0; c < sizeof counts / sizeof *counts; c++) {
        size_t cap = 64 + (size_t)counts[c] * 12;
        char *req = malloc(cap), out[4096];
        size_t o = (size_t)sprintf(req, "GET /evict/dump?session_id=victim");
        for (int i = 1; i < counts[c]; i++) o += (size_t)sprintf(req + o, "&p%d=1", i);
        o += (size_t)sprintf(req + o, " HTTP/1.1\r\nHost: x\r\n\r\n");
        long n = exchange(req, o, out, sizeof out);
        assert_json_error(out, n, 414, "too_many_parameters");
        free(req);
    }
    /* 64 still work */
    char req[2048], out[8192];
    size_t o = (size_t)sprintf(req, "GET /healthz?a=1");
    for (int i = 1; i < 64; i++) o += (size_t)sprintf(req + o, "&p%d=1", i);
    o += (size_t)sprintf(req + o, " HTTP/1.1\r\nHost: x\r\n\r\n");
    long n = exchange(req, o, out, sizeof out);
    assert_true(n > 0 && !strncmp(out, "HTTP/1.1 200", 12));
}

/* ---- 5. unsupported Transfer-Encoding is answered */
static void test_unsupported_coding(void **st)
{
    char out[4096];
    long n = raw("POST /evict/write HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n{}", out, sizeof out);
    assert_json_error(out, n, 501, "unsupported_transfer_encoding");
    n = raw("POST /evict/retrieve HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n", out, sizeof out);
    assert_json_error(out, n, 501, "unsupported_transfer_encoding");
}

/* ---- 6. errors the HTTP library produces are JSON, written once */
static void test_http_layer_errors_are_json(void **st)
{
    char out[8192];
    long n = raw("POST /evict/write HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n{}", out, sizeof out);
    assert_json_error(out, n, 400, "bad_request");
    n = raw("POST /evict/write HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999999999999999\r\n\r\n{}", out, sizeof out);
    assert_json_error(out, n, 413, "payload_too_large");
    n = raw("POST /evict/write HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n", out, sizeof out);
    assert_json_error(out, n, 400, "bad_request");
    n = raw("GET /healthz HTTP/2.0\r\nHost: x\r\n\r\n", out, sizeof out);
    assert_json_error(out, n, 505, NULL);
    n = raw("GET /healthz HTTP/1.1\r\nHost: x\r\nno colon here\r\n\r\n", out, sizeof out);
    assert_json_error(out, n, 400, "bad_request");
    /* request heads larger than the connection pool: 414 (URI) and 431 (headers) */
    size_t big = 100000;
    char *req = malloc(big + 256);
    size_t o = (size_t)sprintf(req, "GET /healthz?q=");
    memset(req + o, 'a', big), o += big;
    o += (size_t)sprintf(req + o, " HTTP/1.1\r\nHost: x\r\n\r\n");
    n = exchange(req, o, out, sizeof out);
    assert_json_error(out, n, 414, "request_head_too_large");
    o = (size_t)sprintf(req, "GET /healthz HTTP/1.1\r\nHost: x\r\n");
    for (int i = 0; o + 32 < big; i++) o += (size_t)sprintf(req + o, "X-H%d: v\r\n", i);
    o += (size_t)sprintf(req + o, "\r\n");
    n = exchange(req, o, out, sizeof out);
    assert_json_error(out, n, 431, "request_head_too_large");
    /* heads that fit the pool but leave it no room for a reply: refused by the service
     * (more than 100 headers; over 16 KiB of URI) — these used to be closed unanswered */
    o = (size_t)sprintf(req, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n");
    for (int i = 0; i < 738; i++) o += (size_t)sprintf(req + o, "X-Fuzz-%d: %s\r\n", i, i % 4 ? "v" : "a-longer-value-0123456789");
    o += (size_t)sprintf(req + o, "\r\n{}");
    n = exchange(req, o, out, sizeof out);
    assert_json_error(out, n, 431, "request_head_too_large");
    o = (size_t)sprintf(req, "GET /healthz?q=");
    memset(req + o, 'b', 20000), o += 20000;
    o += (size_t)sprintf(req + o, " HTTP/1.1\r\nHost: x\r\n\r\n");
    n = exchange(req, o, out, sizeof out);
    assert_json_error(out, n, 414, "request_head_too_large");
    free(req);
    /* the server is fine afterwards */
    cJSON *j;
    assert_int_equal(sh_get(&S, "/healthz", &j), 200);
    cJSON_Delete(j);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_aborted_uploads_release_connections),
        cmocka_unit_test(test_half_close_after_reply_releases),
        cmocka_unit_test(test_stalled_body_times_out),
        cmocka_unit_test(test_nul_in_session_id),
        cmocka_unit_test(test_nul_in_text),
        cmocka_unit_test(test_many_query_params),
        cmocka_unit_test(test_unsupported_coding),
        cmocka_unit_test(test_http_layer_errors_are_json),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
