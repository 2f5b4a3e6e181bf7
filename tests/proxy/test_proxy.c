#define _GNU_SOURCE
/* The OpenAI proxy (Mode A) end to end: the real longctx-svc between a curl client and a
 * fake upstream started by this test (fake_upstream.c). Covers: the splice lands in the
 * system message with the project's code, longctx_top_k is honoured and removed,
 * Authorization is forwarded, x-longctx-* headers; SSE arrives incrementally (the fake
 * holds its second chunk until the client has seen the first); a client disconnect
 * cancels the upstream request; upstream errors map to 502/504, no upstream to 503; the
 * pure splice-placement helper. */
#include "testutil.h"
#include "fake_upstream.h"
#include "svc/proxy.h"
#include "util/util.h"

#include <curl/curl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    pid_t pid;
    int port;
    char *dir;
} svc_proc;

static svc_proc start_svc_args(const char *upstream, const char *flag, const char *value);

static svc_proc start_svc(const char *upstream, const char *extra)
{
    return start_svc_args(upstream, extra ? "--upstream-timeout-s" : NULL, extra);
}

static svc_proc start_svc_args(const char *upstream, const char *flag, const char *value)
{
    svc_proc s = {0};
    s.dir = tu_tmpdir();
    s.port = tu_free_port();
    char port[16], data[4200], log[4200];
    snprintf(port, sizeof port, "%d", s.port);
    snprintf(data, sizeof data, "%s/data", s.dir);
    snprintf(log, sizeof log, "%s/svc.log", s.dir);
    char *argv[16] = {(char *)tu_bin("longctx-svc"), "serve", "--host", "127.0.0.1", "--port", port,
                      "--data-dir", data, "--quiet"};
    int ac = 9;
    if (upstream) argv[ac++] = "--upstream", argv[ac++] = (char *)upstream;
    if (flag) argv[ac++] = (char *)flag, argv[ac++] = (char *)value;
    argv[ac] = NULL;
    s.pid = tu_spawn(argv, NULL, log);
    assert_true(tu_wait_http(s.port, "/healthz", 20000));
    return s;
}

static void stop_svc(svc_proc *s)
{
    int st = tu_kill_wait(s->pid, SIGTERM, 10000);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    tu_rmrf(s->dir);
    free(s->dir);
}

/* A tiny project the chat message mentions. */
static char *make_project(void)
{
    char *d = tu_tmpdir(), p[4300];
    snprintf(p, sizeof p, "%s/proj/.git/HEAD", d);
    tu_write(p, "ref: refs/heads/main\n", 21);
    snprintf(p, sizeof p, "%s/proj/src/parser.c", d);
    const char *code = "#include <stdio.h>\n\n/* Parses the frame header of a packet. */\n"
                       "int parse_frame_header(const unsigned char *buf, int len)\n{\n"
                       "    if (len < 4) return -1;\n    return buf[0] << 8 | buf[1];\n}\n";
    tu_write(p, code, strlen(code));
    snprintf(p, sizeof p, "%s/proj/src/util.c", d);
    tu_write(p, "int add(int a, int b) { return a + b; }\n", 40);
    return d;
}

static void test_chat_splice_and_headers(void **st)
{
    fake_upstream *f = fu_start();
    char up[64];
    snprintf(up, sizeof up, "http://127.0.0.1:%d", fu_port(f));
    svc_proc s = start_svc(up, NULL);
    char *proj = make_project();
    char body[8192], url[128];
    snprintf(body, sizeof body,
             "{\"model\":\"plain\",\"longctx_top_k\":3,\"messages\":["
             "{\"role\":\"system\",\"content\":\"You are helpful.\"},"
             "{\"role\":\"user\",\"content\":\"In %s/proj/src/parser.c, what does parse_frame_header return?\"}]}",
             proj);
    snprintf(url, sizeof url, "http://127.0.0.1:%d/v1/chat/completions", s.port);
    const char *hdr[] = {"Content-Type: application/json", "Authorization: Bearer sk-test-123",
                         "x-session-affinity: sess-7", NULL};
    tu_resp r;
    assert_int_equal(tu_http("POST", url, body, strlen(body), hdr, &r), 0);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "\"chat.completion\""));
    char v[256];
    assert_int_equal(tu_resp_header(&r, "x-longctx-session", v, sizeof v), 0);
    assert_string_equal(v, "sess-7");
    assert_int_equal(tu_resp_header(&r, "x-longctx-chunks-used", v, sizeof v), 0);
    assert_true(atoi(v) >= 1 && atoi(v) <= 3);
    assert_int_equal(tu_resp_header(&r, "x-longctx-scope", v, sizeof v), 0);
    assert_non_null(strstr(v, "/proj"));
    tu_resp_free(&r);

    char *head = fu_last_head(f), *ub = fu_last_body(f);
    assert_non_null(strcasestr(head, "authorization: Bearer sk-test-123"));
    assert_null(strstr(ub, "longctx_top_k"));
    /* the splice is a prefix of the existing system message */
    const char *sys = strstr(ub, "\"role\":\"system\",\"content\":\"## Retrieved code context");
    assert_non_null(sys);
    assert_non_null(strstr(ub, "parse_frame_header"));
    assert_non_null(strstr(ub, "You are helpful."));
    assert_non_null(strstr(ub, "src/parser.c:1-"));
    free(head);
    free(ub);

    /* models pass through; upstream 4xx passes through with its body */
    snprintf(url, sizeof url, "http://127.0.0.1:%d/v1/models", s.port);
    assert_int_equal(tu_http("GET", url, NULL, 0, NULL, &r), 0);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "fake-model"));
    tu_resp_free(&r);
    snprintf(url, sizeof url, "http://127.0.0.1:%d/v1/chat/completions", s.port);
    const char *bad = "{\"model\":\"error400\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}";
    assert_int_equal(tu_http("POST", url, bad, strlen(bad), hdr, &r), 0);
    assert_int_equal(r.status, 400);
    assert_non_null(strstr(r.body, "invalid_request_error"));
    tu_resp_free(&r);
    /* bad longctx_top_k → 400 from the proxy itself, nothing forwarded */
    int before = fu_requests(f);
    const char *badk = "{\"model\":\"plain\",\"longctx_top_k\":0,\"messages\":[]}";
    assert_int_equal(tu_http("POST", url, badk, strlen(badk), hdr, &r), 0);
    assert_int_equal(r.status, 400);
    assert_non_null(strstr(r.body, "\"code\""));
    tu_resp_free(&r);
    assert_int_equal(fu_requests(f), before);

    stop_svc(&s);
    tu_rmrf(proj);
    free(proj);
    fu_stop(f);
}

typedef struct {
    fake_upstream *f;
    char buf[8192];
    size_t n;
    bool released;
    bool abort_after_first;
} stream_ctx;

static size_t on_stream(char *p, size_t sz, size_t nm, void *ud)
{
    stream_ctx *c = ud;
    size_t n = sz * nm;
    if (c->n + n < sizeof c->buf) {
        memcpy(c->buf + c->n, p, n);
        c->n += n;
        c->buf[c->n] = 0;
    }
    if (c->abort_after_first && strstr(c->buf, "data:")) return 0; /* client hangs up */
    if (!c->released && strstr(c->buf, "\"Hel\"")) {
        c->released = true;
        fu_release(c->f); /* only now may the upstream send the rest */
    }
    return n;
}

static CURLcode stream_request(int port, const char *model, stream_ctx *c, long *status)
{
    char url[128], body[256];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/v1/chat/completions", port);
    snprintf(body, sizeof body,
             "{\"model\":\"%s\",\"stream\":true,\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}", model);
    CURL *h = curl_easy_init();
    struct curl_slist *hl = curl_slist_append(NULL, "Content-Type: application/json");
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hl);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_stream);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, c);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, 60L);
    CURLcode rc = curl_easy_perform(h);
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, status);
    curl_slist_free_all(hl);
    curl_easy_cleanup(h);
    return rc;
}

static void test_stream_incremental_and_cancel(void **st)
{
    fake_upstream *f = fu_start();
    char up[64];
    snprintf(up, sizeof up, "http://127.0.0.1:%d", fu_port(f));
    svc_proc s = start_svc(up, NULL);

    stream_ctx c = {.f = f};
    long status = 0;
    assert_int_equal(stream_request(s.port, "stream", &c, &status), CURLE_OK);
    assert_int_equal(status, 200);
    /* the upstream was released by our client seeing chunk 1: nothing was buffered */
    assert_true(fu_stream_released(f));
    /* byte for byte: both events and the terminator, in order */
    const char *e1 = strstr(c.buf, "data: {\"id\":\"c1\""), *e2 = strstr(c.buf, "\"lo\""),
               *done = strstr(c.buf, "data: [DONE]\n\n");
    assert_non_null(e1);
    assert_non_null(e2);
    assert_non_null(done);
    assert_true(e1 < e2 && e2 < done);

    /* a client that hangs up mid-stream cancels the upstream request */
    stream_ctx c2 = {.f = f, .abort_after_first = true};
    assert_int_equal(stream_request(s.port, "endless", &c2, &status), CURLE_WRITE_ERROR);
    assert_true(fu_wait_peer_gone(f, 15000));

    stop_svc(&s);
    fu_stop(f);
}

static void test_error_mapping(void **st)
{
    /* nothing listens on this port: 502 */
    int dead = tu_free_port();
    char up[64], url[128];
    snprintf(up, sizeof up, "http://127.0.0.1:%d", dead);
    svc_proc s = start_svc(up, NULL);
    const char *body = "{\"model\":\"plain\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}";
    snprintf(url, sizeof url, "http://127.0.0.1:%d/v1/chat/completions", s.port);
    tu_resp r;
    assert_int_equal(tu_http("POST", url, body, strlen(body), NULL, &r), 0);
    assert_int_equal(r.status, 502);
    assert_non_null(strstr(r.body, "\"upstream_unreachable\""));
    tu_resp_free(&r);
    stop_svc(&s);

    /* an upstream that never answers: 504 after --upstream-timeout-s */
    fake_upstream *f = fu_start();
    snprintf(up, sizeof up, "http://127.0.0.1:%d", fu_port(f));
    s = start_svc(up, "1");
    snprintf(url, sizeof url, "http://127.0.0.1:%d/v1/chat/completions", s.port);
    const char *hang = "{\"model\":\"hang\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}";
    assert_int_equal(tu_http("POST", url, hang, strlen(hang), NULL, &r), 0);
    assert_int_equal(r.status, 504);
    assert_non_null(strstr(r.body, "\"upstream_timeout\""));
    tu_resp_free(&r);
    /* the service is still healthy afterwards */
    assert_true(tu_wait_http(s.port, "/healthz", 5000));
    stop_svc(&s);
    fu_stop(f);

    /* no upstream: 503 proxy_disabled on every proxy route */
    s = start_svc(NULL, NULL);
    snprintf(url, sizeof url, "http://127.0.0.1:%d/v1/chat/completions", s.port);
    assert_int_equal(tu_http("POST", url, body, strlen(body), NULL, &r), 0);
    assert_int_equal(r.status, 503);
    assert_non_null(strstr(r.body, "\"proxy_disabled\""));
    tu_resp_free(&r);
    snprintf(url, sizeof url, "http://127.0.0.1:%d/v1/models", s.port);
    assert_int_equal(tu_http("GET", url, NULL, 0, NULL, &r), 0);
    assert_int_equal(r.status, 503);
    tu_resp_free(&r);
    stop_svc(&s);
}

/* --compact-tokens: a long history reaches the upstream compacted, with the ordinal
 * request's target turn kept verbatim, and the response says so. */
static void test_compaction(void **st)
{
    fake_upstream *f = fu_start();
    char up[64], url[128];
    snprintf(up, sizeof up, "http://127.0.0.1:%d", fu_port(f));
    svc_proc s = start_svc_args(up, "--compact-tokens", "2000");
    lcx_buf b = {0};
    lcx__buf_puts(&b, "{\"model\":\"plain\",\"messages\":[{\"role\":\"system\",\"content\":\"You are helpful.\"}");
    const char *topics[] = {"tapirs", "glaciers", "lighthouses", "tapirs", "violins"};
    for (int i = 0; i < 60; i++) {
        lcx__buf_printf(&b, ",{\"role\":\"user\",\"content\":\"write a poem about %s\"}", topics[i % 5]);
        lcx__buf_printf(&b, ",{\"role\":\"assistant\",\"content\":\"Poem %d about %s. ", i, topics[i % 5]);
        for (int k = 0; k < 40; k++) lcx__buf_printf(&b, "line %d of verse %d with words and more words. ", k, i);
        lcx__buf_puts(&b, "\"}");
    }
    lcx__buf_puts(&b, ",{\"role\":\"user\",\"content\":\"Prepend ab12cd34ef to the 2nd (1 indexed) poem about "
                     "glaciers. Do not include any other text in your response.\"}]}");
    snprintf(url, sizeof url, "http://127.0.0.1:%d/v1/chat/completions", s.port);
    tu_resp r;
    const char *hdr[] = {"Content-Type: application/json", NULL};
    assert_int_equal(tu_http("POST", url, b.data, b.len, hdr, &r), 0);
    assert_int_equal(r.status, 200);
    char v[128];
    assert_int_equal(tu_resp_header(&r, "x-longctx-compacted", v, sizeof v), 0);
    assert_non_null(strstr(v, "->"));
    tu_resp_free(&r);
    char *ub = fu_last_body(f);
    assert_true(strlen(ub) < b.len / 4);                   /* the middle is gone */
    assert_non_null(strstr(ub, "Poem 6 about glaciers."));  /* the 2nd glaciers poem (i = 1, 6, ...) */
    assert_non_null(strstr(ub, "Prepend ab12cd34ef"));      /* the question itself */
    assert_non_null(strstr(ub, "You are helpful."));        /* system messages stay */
    free(ub);
    lcx__buf_free(&b);
    stop_svc(&s);
    fu_stop(f);
}

static void test_splice_placement(void **st)
{
    const char *sp = "## Retrieved code context\n\nX\n";
    /* string system message: prefixed */
    cJSON *m = cJSON_Parse("[{\"role\":\"system\",\"content\":\"Be brief.\"},{\"role\":\"user\",\"content\":\"q\"}]");
    assert_int_equal(lcx__proxy_splice_messages(m, sp), 1);
    char *s = cJSON_PrintUnformatted(m);
    assert_string_equal(s, "[{\"role\":\"system\",\"content\":\"## Retrieved code context\\n\\nX\\nBe brief.\"},"
                           "{\"role\":\"user\",\"content\":\"q\"}]");
    free(s);
    cJSON_Delete(m);
    /* list content: a text part prepended */
    m = cJSON_Parse("[{\"role\":\"user\",\"content\":\"q\"},{\"role\":\"system\",\"content\":[{\"type\":\"text\","
                    "\"text\":\"Be brief.\"}]}]");
    assert_int_equal(lcx__proxy_splice_messages(m, sp), 1);
    s = cJSON_PrintUnformatted(m);
    assert_non_null(strstr(s, "\"content\":[{\"type\":\"text\",\"text\":\"## Retrieved code context\\n\\nX\\n\"},"
                              "{\"type\":\"text\",\"text\":\"Be brief.\"}]"));
    free(s);
    cJSON_Delete(m);
    /* no system message: one inserted at index 0 */
    m = cJSON_Parse("[{\"role\":\"user\",\"content\":\"q\"}]");
    assert_int_equal(lcx__proxy_splice_messages(m, sp), 1);
    s = cJSON_PrintUnformatted(m);
    assert_string_equal(s, "[{\"role\":\"system\",\"content\":\"## Retrieved code context\\n\\nX\\n\"},"
                           "{\"role\":\"user\",\"content\":\"q\"}]");
    free(s);
    /* empty splice: untouched */
    assert_int_equal(lcx__proxy_splice_messages(m, ""), 0);
    cJSON_Delete(m);
    /* query = last user message (string or parts), prefill = all text */
    m = cJSON_Parse("[{\"role\":\"user\",\"content\":\"first /a/b.c\"},{\"role\":\"assistant\",\"content\":\"ok\"},"
                    "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"second\"},{\"type\":\"image_url\"}]}]");
    char *q, *pre;
    assert_int_equal(lcx__proxy_query_and_prefill(m, &q, &pre), 0);
    assert_string_equal(q, "second\n");
    assert_non_null(strstr(pre, "first /a/b.c"));
    assert_non_null(strstr(pre, "ok"));
    free(q);
    free(pre);
    cJSON_Delete(m);
    assert_int_equal(lcx__proxy_query_and_prefill(NULL, &q, &pre), LCX_EINVAL);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_splice_placement),
        cmocka_unit_test(test_chat_splice_and_headers),
        cmocka_unit_test(test_stream_incremental_and_cancel),
        cmocka_unit_test(test_error_mapping),
        cmocka_unit_test(test_compaction),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
