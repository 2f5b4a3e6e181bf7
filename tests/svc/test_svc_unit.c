/* Unit tests of longctx-svc's pure parts: rescue system-message format and cap, route
 * matching (params, 404 vs 405), flag/env parsing, session-id validation. */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "svc/svc.h"

static lcx_chunk mk(const char *t, int64_t a, int64_t b, int layer)
{
    lcx_chunk c = lcx_chunk_init();
    c.text = t;
    c.text_len = (uint32_t)strlen(t);
    c.tok_start = a;
    c.tok_end = b;
    c.layer = layer;
    return c;
}

static void test_rescue_format_exact(void **st)
{
    lcx_chunk cs[2] = {mk("alpha beta", 10, 20, 3), mk("gamma", 0, 4, 0)};
    lcx_buf b = {0};
    assert_int_equal(lcx_rescue_format(&b, cs, 2, 8000), 2);
    const char *want = "[Recovered context from earlier in this session (evicted from KV cache, restored via longctx)]:\n"
                       "\n--- evicted span (tokens 10..20, layer 3) ---\nalpha beta\n"
                       "\n--- evicted span (tokens 0..4, layer 0) ---\ngamma\n";
    assert_string_equal(b.data, want);
    lcx_buf_free(&b);
    assert_int_equal(lcx_rescue_format(&b, cs, 0, 8000), 0);   /* nothing → empty */
    assert_int_equal(b.len, 0);
}

static void test_rescue_format_cap(void **st)
{
    size_t hdr = strlen(LCX_RESCUE_HEADER);
    /* block = "\n--- evicted span (tokens 1..2, layer 0) ---\n" (44) + text + "\n" */
    const char *head = "\n--- evicted span (tokens 1..2, layer 0) ---\n";
    size_t hl = strlen(head);
    char *t1 = malloc(101), *t2 = malloc(3001);
    memset(t1, 'a', 100), t1[100] = 0;
    memset(t2, 'b', 3000), t2[3000] = 0;
    lcx_chunk cs[3] = {mk(t1, 1, 2, 0), mk(t2, 1, 2, 0), mk(t1, 1, 2, 0)};
    size_t b1 = hl + 100 + 1, b2 = hl + 3000 + 1;
    lcx_buf b = {0};
    /* exactly header + block 1 fits; block 2 overflows → stop (block 3 would fit but is not used) */
    assert_int_equal(lcx_rescue_format(&b, cs, 3, hdr + b1 + b2 - 1), 1);
    assert_int_equal(b.len, hdr + b1);
    lcx_buf_free(&b);
    assert_int_equal(lcx_rescue_format(&b, cs, 3, hdr + b1 + b2), 2);
    assert_int_equal(b.len, hdr + b1 + b2);
    lcx_buf_free(&b);
    /* not even one block → nothing at all */
    assert_int_equal(lcx_rescue_format(&b, cs, 3, hdr + 10), 0);
    assert_int_equal(b.len, 0);
    lcx_buf_free(&b);
    /* the cap counts characters, not bytes: 100 × "é" (200 bytes) counts 100 */
    char *u = malloc(201);
    for (int i = 0; i < 100; i++) u[2 * i] = (char)0xc3, u[2 * i + 1] = (char)0xa9;
    u[200] = 0;
    lcx_chunk cu = mk(u, 1, 2, 0);
    assert_int_equal(lcx_rescue_format(&b, &cu, 1, hdr + hl + 101), 1);
    assert_int_equal(b.len, hdr + hl + 201);
    lcx_buf_free(&b);
    assert_int_equal(lcx_rescue_format(&b, &cu, 1, hdr + hl + 100), 0);
    lcx_buf_free(&b);
    free(t1), free(t2), free(u);
    /* the production cap */
    lcx_chunk many[40];
    char *t4 = malloc(401);
    memset(t4, 'c', 400), t4[400] = 0;
    for (int i = 0; i < 40; i++) many[i] = mk(t4, i * 100, i * 100 + 99, 1);
    int n = lcx_rescue_format(&b, many, 40, LCX_RESCUE_MAX_CHARS);
    assert_true(n > 10 && n < 40);
    assert_true(b.len <= 8000);
    assert_true(b.len + 400 + hl > 8000 - 20);   /* the next block really would not fit */
    lcx_buf_free(&b);
    free(t4);
}

static void test_routes(void **st)
{
    lcx_route_params p = {0};
    bool known;
    char allow[64];
    const lcx_route *r = lcx_route_match("POST", "/sessions/abc-1/hibernate", &p, &known, allow, sizeof allow);
    assert_non_null(r);
    assert_ptr_equal(r->fn, lcx_svc_h_session_hibernate);
    assert_int_equal(p.n, 1);
    assert_string_equal(p.value[0], "abc-1");
    assert_int_equal(p.name_len[0], 2);
    assert_memory_equal(p.name[0], "id", 2);
    lcx_route_params_free(&p);
    r = lcx_route_match("GET", "/sessions/x/hibernation-status", &p, &known, allow, sizeof allow);
    assert_ptr_equal(r->fn, lcx_svc_h_session_status);
    lcx_route_params_free(&p);
    /* wrong method: 405 with Allow */
    r = lcx_route_match("GET", "/sessions/x/resume", &p, &known, allow, sizeof allow);
    assert_null(r);
    assert_true(known);
    assert_string_equal(allow, "POST");
    r = lcx_route_match("PUT", "/healthz", &p, &known, allow, sizeof allow);
    assert_null(r);
    assert_true(known);
    assert_string_equal(allow, "GET");
    /* unknown paths: 404 */
    const char *bad[] = {"/", "/healthzz", "/sessions//hibernate", "/sessions/a/b/hibernate", "/evict", "/evict/write/x",
                         "/v1/chat", ""};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        r = lcx_route_match("POST", bad[i], &p, &known, allow, sizeof allow);
        assert_null(r);
        assert_false(known);
    }
    /* trailing slash tolerated */
    r = lcx_route_match("GET", "/healthz/", &p, &known, allow, sizeof allow);
    assert_ptr_equal(r->fn, lcx_svc_h_healthz);
    /* every route in the table matches itself */
    for (const lcx_route *x = lcx_svc_routes; x->method; x++) {
        char path[256];
        snprintf(path, sizeof path, "%s", x->pattern);
        char *b = strchr(path, '{');
        if (b) {   /* substitute a value for the parameter */
            char *e = strchr(b, '}');
            char rest[256];
            snprintf(rest, sizeof rest, "%s", e + 1);
            snprintf(b, sizeof path - (size_t)(b - path), "S1%s", rest);
        }
        r = lcx_route_match(x->method, path, &p, &known, allow, sizeof allow);
        assert_ptr_equal(r, x);
        lcx_route_params_free(&p);
    }
}

static void test_config(void **st)
{
    FILE *devnull = fopen("/dev/null", "w");
    lcx_svc_config c;
    setenv("LONGCTX_PORT", "6000", 1);
    setenv("LONGCTX_MAX_MEM_MB", "100", 1);
    setenv("LONGCTX_DATA_DIR", "/tmp/from-env", 1);
    lcx_svc_config_defaults(&c);
    char *a1[] = {"serve", "--port", "7000", "--host=0.0.0.0", "--max-body-bytes", "1024", "--idle-hibernate-s", "2.5",
                  "--quiet", NULL};
    assert_int_equal(lcx_svc_config_parse(&c, 9, a1, devnull), 0);
    assert_int_equal(c.port, 7000);                       /* flag beats env */
    assert_string_equal(c.host, "0.0.0.0");
    assert_string_equal(c.data_dir, "/tmp/from-env");     /* env beats default */
    assert_int_equal(c.max_mem_bytes, 100ull << 20);
    assert_int_equal(c.max_body_bytes, 1024);
    assert_true(c.idle_hibernate_s == 2.5);
    assert_true(c.janitor_interval_s > 0.6 && c.janitor_interval_s < 0.7);   /* idle/4 */
    assert_true(c.quiet);
    unsetenv("LONGCTX_PORT");
    unsetenv("LONGCTX_MAX_MEM_MB");
    unsetenv("LONGCTX_DATA_DIR");
    /* defaults */
    setenv("XDG_DATA_HOME", "/xdg", 1);
    lcx_svc_config_defaults(&c);
    char *a0[] = {"serve", NULL};
    assert_int_equal(lcx_svc_config_parse(&c, 1, a0, devnull), 0);
    assert_string_equal(c.host, "127.0.0.1");
    assert_int_equal(c.port, 5054);
    assert_string_equal(c.data_dir, "/xdg/longctx");
    assert_int_equal(c.max_body_bytes, 64ull << 20);
    assert_true(c.idle_hibernate_s == 1800);
    assert_true(c.janitor_interval_s == 60);
    unsetenv("XDG_DATA_HOME");
    setenv("HOME", "/home/u", 1);
    lcx_svc_config_defaults(&c);
    assert_string_equal(c.data_dir, "/home/u/.local/share/longctx");
    /* errors */
    char *bad[][4] = {{"serve", "--port", "70000", NULL}, {"serve", "--port", "12x", NULL}, {"serve", "--bogus", NULL, NULL},
                      {"serve", "--port", NULL, NULL},   {"serve", "--threads", "0", NULL},  {"serve", "--max-mem-mb", "1.5", NULL}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        lcx_svc_config_defaults(&c);
        int argc = 0;
        while (bad[i][argc]) argc++;
        assert_int_equal(lcx_svc_config_parse(&c, argc, bad[i], devnull), LCX_EINVAL);
    }
    setenv("LONGCTX_THREADS", "abc", 1);
    lcx_svc_config_defaults(&c);
    assert_int_equal(lcx_svc_config_parse(&c, 1, a0, devnull), LCX_EINVAL);
    unsetenv("LONGCTX_THREADS");
    char *h[] = {"serve", "--help", NULL};
    assert_int_equal(lcx_svc_config_parse(&c, 2, h, devnull), 1);
    fclose(devnull);
}

static void test_session_ids_and_errors(void **st)
{
    assert_true(lcx_svc_session_id_ok("abc"));
    assert_true(lcx_svc_session_id_ok("séance-01"));
    assert_false(lcx_svc_session_id_ok(""));
    assert_false(lcx_svc_session_id_ok("a\nb"));
    assert_false(lcx_svc_session_id_ok("\xff"));
    char l[300];
    memset(l, 'x', 257), l[257] = 0;
    assert_false(lcx_svc_session_id_ok(l));
    l[256] = 0;
    assert_true(lcx_svc_session_id_ok(l));
    const char *code;
    assert_int_equal(lcx_svc_err_status(LCX_EMISMATCH, &code), 409);
    assert_string_equal(code, "embedder_mismatch");
    assert_int_equal(lcx_svc_err_status(LCX_ENOTFOUND, &code), 404);
    assert_int_equal(lcx_svc_err_status(LCX_ELIMIT, &code), 429);
    assert_int_equal(lcx_svc_err_status(LCX_EIO, &code), 500);
    assert_int_equal(lcx_utf8_chars("h\xc3\xa9llo \xf0\x9f\x9a\x80", 11), 7);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rescue_format_exact),
        cmocka_unit_test(test_rescue_format_cap),
        cmocka_unit_test(test_routes),
        cmocka_unit_test(test_config),
        cmocka_unit_test(test_session_ids_and_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
