/* Reply writers under allocation failure: with the Nth buffer allocation failing (for
 * every N until a request runs without reaching it; once alone, once with every later one
 * failing too), /evict/retrieve, /evict/dump and
 * /healthz never answer a 200 whose body is not the complete JSON reply; a failed reply
 * is a JSON error (5xx) or, when even the request could not be read, no reply at all. The
 * service runs in this process (the hook is a process-wide counter in lcx_util); ASan
 * (the sanitizer tier) checks that no failure path leaks. */
#include "testutil.h"

#include <cjson/cJSON.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "svc/svc.h"

static lcx_svc *svc;
static char *dir;
static char base[64];

static int setup(void **st)
{
    lcx_svc_config c;
    lcx_svc_config_defaults(&c);
    dir = tu_tmpdir();
    snprintf(c.data_dir, sizeof c.data_dir, "%s", dir);
    snprintf(c.host, sizeof c.host, "127.0.0.1");
    c.port = 0;
    c.quiet = true;
    char msg[256];
    if (lcx__svc_start(&c, &svc, msg, sizeof msg) < 0) {
        fprintf(stderr, "start: %s\n", msg);
        return -1;
    }
    snprintf(base, sizeof base, "http://127.0.0.1:%d", svc->bound_port);
    return 0;
}

static int teardown(void **st)
{
    lcx__buf_fail_nth(0, 0);
    lcx__svc_stop(svc);
    tu_rmrf(dir);
    free(dir);
    return 0;
}

static long req(const char *method, const char *path, const char *body, tu_resp *r)
{
    char url[256];
    snprintf(url, sizeof url, "%s%s", base, path);
    memset(r, 0, sizeof *r);
    tu_http(method, url, body, body ? strlen(body) : 0, NULL, r);
    return r->status;
}

/* The reply with no failure injected, then the same request with the 1st, 2nd, ... buffer
 * allocation failing until one runs without reaching the failure. Returns how many
 * failures were injected (the test asserts some were). */
static int sweep1(const char *method, const char *path, const char *body, long count)
{
    tu_resp r;
    assert_int_equal(req(method, path, body, &r), 200);
    char *want = strdup(r.body);
    tu_resp_free(&r);
    int injected = 0;
    for (long n = 1; n < 10000; n++) {
        lcx__buf_fail_nth(n, count);
        long status = req(method, path, body, &r);
        bool fired = lcx__buf_fail_pending() == 0;
        lcx__buf_fail_nth(0, 0);
        if (status == 200) {
            /* a 200 is the whole reply, byte for byte */
            assert_string_equal(r.body, want);
        } else if (status != 0) {
            assert_true(status >= 500);
            cJSON *j = cJSON_Parse(r.body);
            assert_non_null(j);   /* an error is JSON too: {"error":{"code","message"}} */
            assert_true(cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(j, "error")));
            cJSON_Delete(j);
        }
        tu_resp_free(&r);
        if (!fired) break;   /* this request did not reach the Nth allocation: all covered */
        injected += status != 200;
    }
    free(want);
    return injected;
}

/* Each point once with one failure (recovery), once with every allocation after it failing
 * (real memory exhaustion: the error reply itself may not get memory). */
static int sweep(const char *method, const char *path, const char *body)
{
    return sweep1(method, path, body, 1) + sweep1(method, path, body, LONG_MAX);
}

static void test_retrieve_never_sends_broken_200(void **st)
{
    /* spans with escapes, non-ASCII and enough text that the reply takes several growths */
    lcx_buf b = {0};
    lcx__buf_puts(&b, "{\"session_id\":\"oom\",\"chunks\":[");
    for (int i = 0; i < 24; i++) {
        if (i) lcx__buf_puts(&b, ",");
        lcx__buf_printf(&b, "{\"text\":\"span %d: the vault code \\\"%d\\\" caf\\u00e9 \\\\ tab\\tline\\n", i, 4000 + i);
        for (int k = 0; k < 30; k++) lcx__buf_puts(&b, "filler words about the vault ");
        lcx__buf_printf(&b, "\",\"token_range\":[%d,%d],\"layer\":%d,\"score\":0.5}", i * 100, i * 100 + 99, i % 4);
    }
    lcx__buf_puts(&b, "]}");
    assert_int_equal(b.err, 0);
    tu_resp r;
    assert_int_equal(req("POST", "/evict/write", b.data, &r), 200);
    tu_resp_free(&r);
    lcx__buf_free(&b);
    int n = sweep("POST", "/evict/retrieve",
                  "{\"session_id\":\"oom\",\"query\":\"What is the vault code?\",\"top_k\":16}");
    assert_true(n > 3);   /* failures really were injected into the reply */
    n = sweep("GET", "/evict/dump?session_id=oom", NULL);
    assert_true(n > 0);
    sweep("GET", "/healthz", NULL);
}

/* The buffer itself: the first error sticks through later successful writes. */
static void test_buf_error_sticky(void **st)
{
    lcx_buf b = {.cap = 8};
    assert_int_equal(lcx__buf_puts(&b, "abcd"), 0);
    assert_int_equal(lcx__buf_puts(&b, "efghijk"), LCX_ELIMIT);
    assert_int_equal(lcx__buf_puts(&b, "ef"), 0);
    assert_int_equal(b.err, LCX_ELIMIT);   /* "abcdef" is missing a piece */
    lcx__buf_truncate(&b, 4);
    assert_int_equal(b.err, 0);
    assert_string_equal(b.data, "abcd");
    lcx__buf_free(&b);
    lcx__buf_fail_nth(1, 1);
    assert_int_equal(lcx__buf_puts(&b, "x"), LCX_ENOMEM);
    assert_int_equal(lcx__buf_fail_pending(), 0);
    assert_int_equal(lcx__buf_puts(&b, "y"), 0);
    assert_int_equal(b.err, LCX_ENOMEM);
    lcx__buf_free(&b);
    assert_int_equal(b.err, 0);
}

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test(test_buf_error_sticky),
        cmocka_unit_test(test_retrieve_never_sends_broken_200),
    };
    return cmocka_run_group_tests(t, setup, teardown);
}
