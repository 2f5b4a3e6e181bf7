/* Unit tests of longctx-svc's pure parts: rescue system-message format and cap, route
 * matching (params, 404 vs 405), flag/env parsing, session-id validation. */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "svc/svc.h"
#include "longctx/triatt.h"

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
    assert_int_equal(lcx__rescue_format(&b, cs, 2, 8000), 2);
    const char *want = "[Recovered context from earlier in this session (evicted from KV cache, restored via longctx)]:\n"
                       "\n--- evicted span (tokens 10..20, layer 3) ---\nalpha beta\n"
                       "\n--- evicted span (tokens 0..4, layer 0) ---\ngamma\n";
    assert_string_equal(b.data, want);
    lcx__buf_free(&b);
    assert_int_equal(lcx__rescue_format(&b, cs, 0, 8000), 0);   /* nothing → empty */
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
    assert_int_equal(lcx__rescue_format(&b, cs, 3, hdr + b1 + b2 - 1), 1);
    assert_int_equal(b.len, hdr + b1);
    lcx__buf_free(&b);
    assert_int_equal(lcx__rescue_format(&b, cs, 3, hdr + b1 + b2), 2);
    assert_int_equal(b.len, hdr + b1 + b2);
    lcx__buf_free(&b);
    /* not even one block → nothing at all */
    assert_int_equal(lcx__rescue_format(&b, cs, 3, hdr + 10), 0);
    assert_int_equal(b.len, 0);
    lcx__buf_free(&b);
    /* the cap counts characters, not bytes: 100 × "é" (200 bytes) counts 100 */
    char *u = malloc(201);
    for (int i = 0; i < 100; i++) u[2 * i] = (char)0xc3, u[2 * i + 1] = (char)0xa9;
    u[200] = 0;
    lcx_chunk cu = mk(u, 1, 2, 0);
    assert_int_equal(lcx__rescue_format(&b, &cu, 1, hdr + hl + 101), 1);
    assert_int_equal(b.len, hdr + hl + 201);
    lcx__buf_free(&b);
    assert_int_equal(lcx__rescue_format(&b, &cu, 1, hdr + hl + 100), 0);
    lcx__buf_free(&b);
    free(t1), free(t2), free(u);
    /* the production cap */
    lcx_chunk many[40];
    char *t4 = malloc(401);
    memset(t4, 'c', 400), t4[400] = 0;
    for (int i = 0; i < 40; i++) many[i] = mk(t4, i * 100, i * 100 + 99, 1);
    int n = lcx__rescue_format(&b, many, 40, LCX_RESCUE_MAX_CHARS);
    assert_true(n > 10 && n < 40);
    assert_true(b.len <= 8000);
    assert_true(b.len + 400 + hl > 8000 - 20);   /* the next block really would not fit */
    lcx__buf_free(&b);
    free(t4);
}

static void test_routes(void **st)
{
    lcx_route_params p = {0};
    bool known;
    char allow[64];
    const lcx_route *r = lcx__route_match("POST", "/sessions/abc-1/hibernate", &p, &known, allow, sizeof allow);
    assert_non_null(r);
    assert_ptr_equal(r->fn, lcx__svc_h_session_hibernate);
    assert_int_equal(p.n, 1);
    assert_string_equal(p.value[0], "abc-1");
    assert_int_equal(p.name_len[0], 2);
    assert_memory_equal(p.name[0], "id", 2);
    lcx__route_params_free(&p);
    r = lcx__route_match("GET", "/sessions/x/hibernation-status", &p, &known, allow, sizeof allow);
    assert_ptr_equal(r->fn, lcx__svc_h_session_status);
    lcx__route_params_free(&p);
    /* wrong method: 405 with Allow */
    r = lcx__route_match("GET", "/sessions/x/resume", &p, &known, allow, sizeof allow);
    assert_null(r);
    assert_true(known);
    assert_string_equal(allow, "POST");
    r = lcx__route_match("PUT", "/healthz", &p, &known, allow, sizeof allow);
    assert_null(r);
    assert_true(known);
    assert_string_equal(allow, "GET");
    /* unknown paths: 404 */
    const char *bad[] = {"/", "/healthzz", "/sessions//hibernate", "/sessions/a/b/hibernate", "/evict", "/evict/write/x",
                         "/v1/chat", ""};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        r = lcx__route_match("POST", bad[i], &p, &known, allow, sizeof allow);
        assert_null(r);
        assert_false(known);
    }
    /* trailing slash tolerated */
    r = lcx__route_match("GET", "/healthz/", &p, &known, allow, sizeof allow);
    assert_ptr_equal(r->fn, lcx__svc_h_healthz);
    /* every route in the table matches itself */
    for (const lcx_route *x = lcx__svc_routes; x->method; x++) {
        char path[256];
        snprintf(path, sizeof path, "%s", x->pattern);
        char *b = strchr(path, '{');
        if (b) {   /* substitute a value for the parameter */
            char *e = strchr(b, '}');
            char rest[256];
            snprintf(rest, sizeof rest, "%s", e + 1);
            snprintf(b, sizeof path - (size_t)(b - path), "S1%s", rest);
        }
        r = lcx__route_match(x->method, path, &p, &known, allow, sizeof allow);
        assert_ptr_equal(r, x);
        lcx__route_params_free(&p);
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
    assert_int_equal(lcx__svc_config_parse(&c, 9, a1, devnull), 0);
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
    assert_int_equal(lcx__svc_config_parse(&c, 1, a0, devnull), 0);
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
        assert_int_equal(lcx__svc_config_parse(&c, argc, bad[i], devnull), LCX_EINVAL);
    }
    setenv("LONGCTX_THREADS", "abc", 1);
    lcx_svc_config_defaults(&c);
    assert_int_equal(lcx__svc_config_parse(&c, 1, a0, devnull), LCX_EINVAL);
    unsetenv("LONGCTX_THREADS");
    char *h[] = {"serve", "--help", NULL};
    assert_int_equal(lcx__svc_config_parse(&c, 2, h, devnull), 1);
    fclose(devnull);
}

/* The janitor interval: 0 means "derived" (min(60, idle/4), >= 0.05) for the parser and for
 * a service started straight from lcx_svc_config_defaults (0 there made the janitor rescan
 * the session table without waiting). */
static void test_janitor_interval(void **st)
{
    (void)st;
    lcx_svc_config c;
    lcx_svc_config_defaults(&c);
    assert_true(lcx__svc_janitor_interval(&c) == 60);
    c.idle_hibernate_s = 2.5;
    assert_true(lcx__svc_janitor_interval(&c) == 0.625);
    c.idle_hibernate_s = 0.01;
    assert_true(lcx__svc_janitor_interval(&c) == 0.05);
    c.janitor_interval_s = 0.25;
    assert_true(lcx__svc_janitor_interval(&c) == 0.25);
    lcx_svc_config_defaults(&c);
    char *dir = tu_tmpdir();
    snprintf(c.data_dir, sizeof c.data_dir, "%s", dir);
    c.port = 0;
    c.quiet = true;
    lcx_svc *svc = NULL;
    char msg[256];
    assert_int_equal(lcx__svc_start(&c, &svc, msg, sizeof msg), 0);
    assert_true(svc->cfg.janitor_interval_s == 60);
    lcx__svc_stop(svc);
    tu_rmrf(dir);
    free(dir);
}

static void test_session_ids_and_errors(void **st)
{
    assert_true(lcx__session_id_ok("abc", strlen("abc")));
    assert_true(lcx__session_id_ok("séance-01", strlen("séance-01")));
    assert_false(lcx__session_id_ok("", strlen("")));
    assert_false(lcx__session_id_ok("a\nb", strlen("a\nb")));
    assert_false(lcx__session_id_ok("\xff", strlen("\xff")));
    char l[300];
    memset(l, 'x', 257), l[257] = 0;
    assert_false(lcx__session_id_ok(l, strlen(l)));
    l[256] = 0;
    assert_true(lcx__session_id_ok(l, strlen(l)));
    /* a NUL inside (from %00 or \u0000) is a control character: the length says so */
    assert_false(lcx__session_id_ok("victim\0x", 8));
    assert_true(lcx__session_id_ok("victim\0x", 6));
    const char *code;
    assert_int_equal(lcx__svc_err_status(LCX_EMISMATCH, &code), 409);
    assert_string_equal(code, "embedder_mismatch");
    assert_int_equal(lcx__svc_err_status(LCX_ENOTFOUND, &code), 404);
    assert_int_equal(lcx__svc_err_status(LCX_ELIMIT, &code), 429);
    assert_int_equal(lcx__svc_err_status(LCX_EIO, &code), 500);
}

/* One rule: libtriatt's rescue client and the service build the same bytes for the same
 * spans (non-ASCII text, the cap, the first overflow, nothing fits). */
static void test_rescue_format_same_as_triatt(void **st)
{
    const char *texts[4] = {"caf\xc3\xa9 \xe2\x82\xac 42", "plain ascii span", "\xf0\x9f\x9a\x80 rocket", "tail"};
    lcx_chunk cs[4];
    triatt_rescue_chunk tc[4];
    for (int i = 0; i < 4; i++) {
        cs[i] = mk(texts[i], 10 * i, 10 * i + 7, i);
        tc[i] = (triatt_rescue_chunk){texts[i], 10 * i, 10 * i + 7, i};
    }
    size_t caps[] = {8000, 0, 50, 97, 160, 170, 190, 230, 260};
    for (size_t c = 0; c < LCX_ARRAY_LEN(caps); c++) {
        lcx_buf b = {0};
        int used = -1, n = lcx__rescue_format(&b, cs, 4, caps[c]);
        char *t = triatt_rescue_format(tc, 4, (int)caps[c], &used);
        assert_non_null(t);
        assert_int_equal(n, used);
        assert_string_equal(t, b.data ? b.data : "");
        assert_true(lcx__utf8_chars(t, strlen(t)) <= caps[c]);
        free(t);
        lcx__buf_free(&b);
    }
}


/* ---- /evict/write fast parser vs an independent cJSON reading of the same body */

/* Reference: the fields the general path would store, read with cJSON. */
static void check_fast_matches_cjson(const char *body, const char *qid)
{
    lcx_svc_wbatch w;
    int rc = lcx__svc_write_parse_fast(body, strlen(body), qid, 1000, 1 << 20, &w);
    if (rc != 0) fprintf(stderr, "fast path refused: %s\n", body);
    assert_int_equal(rc, 0);
    cJSON *j = cJSON_Parse(body);
    assert_non_null(j);
    const cJSON *sid = cJSON_GetObjectItemCaseSensitive(j, "session_id");
    if (cJSON_IsString(sid)) {
        assert_true(w.has_id);
        assert_string_equal(w.id, sid->valuestring);
    } else {
        assert_false(w.has_id);
    }
    int m = 0, n_derive = 0;
    const cJSON *c;
    cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(j, "chunks")) {
        const char *t = cJSON_GetObjectItemCaseSensitive(c, "text")->valuestring;
        const cJSON *tr = cJSON_GetObjectItemCaseSensitive(c, "token_range");
        const cJSON *tk = cJSON_GetObjectItemCaseSensitive(c, "tokens");
        const cJSON *ly = cJSON_GetObjectItemCaseSensitive(c, "layer");
        const cJSON *rd = cJSON_GetObjectItemCaseSensitive(c, "round");
        const cJSON *sc = cJSON_GetObjectItemCaseSensitive(c, "score");
        bool derive = !(tr && !cJSON_IsNull(tr));
        n_derive += derive;
        if (!*t) continue;
        assert_true(m < w.m);
        const lcx_chunk *x = &w.cs[m];
        assert_int_equal(x->text_len, strlen(t));
        assert_memory_equal(x->text, t, x->text_len);
        assert_int_equal(x->layer, cJSON_IsNumber(ly) ? (int)ly->valuedouble : 0);
        assert_int_equal(x->round, cJSON_IsNumber(rd) ? (int)rd->valuedouble : -1);
        assert_true(x->score == (cJSON_IsNumber(sc) ? (float)sc->valuedouble : 0.0f));
        if (derive) {
            int cnt = cJSON_GetArraySize(tk);
            assert_int_equal(w.derive_len[m], cnt ? cnt : 1);
        } else {
            assert_int_equal(w.derive_len[m], -1);
            assert_int_equal(x->tok_start, (int64_t)cJSON_GetArrayItem(tr, 0)->valuedouble);
            assert_int_equal(x->tok_end, (int64_t)cJSON_GetArrayItem(tr, 1)->valuedouble);
        }
        m++;
    }
    assert_int_equal(w.m, m);
    assert_int_equal(w.n_derive, n_derive);
    cJSON_Delete(j);
    lcx__svc_wbatch_free(&w);
}

static void refused(const char *body, size_t n, const char *qid)
{
    lcx_svc_wbatch w;
    int rc = lcx__svc_write_parse_fast(body, n, qid, 3, 64, &w);
    if (rc != 1) fprintf(stderr, "fast path accepted: %.*s\n", (int)n, body);
    assert_int_equal(rc, 1);
    lcx__svc_wbatch_free(&w);
}
#define REFUSED(lit) refused(lit, sizeof(lit) - 1, NULL)

static void test_write_fast_parser(void **st)
{
    /* escapes of every kind, \u BMP + surrogate pair, raw UTF-8, long runs for the SWAR scan */
    check_fast_matches_cjson("{\"session_id\":\"s\\u00e9ance\",\"chunks\":[{\"text\":\"say \\\"q\\\" \\\\ \\/ \\b\\f\\n\\r\\t "
                             "\\u0001 \\u00e9 \\u20AC \\ud83d\\ude80 raw \xc3\xa9\xe6\x97\xa5\xf0\x9f\x9a\x80 "
                             "0123456789abcdefghijklmnopqrstuvwxyz0123456789\",\"token_range\":[0,255],\"layer\":3,"
                             "\"score\":-0.5e-3}]}", NULL);
    /* form B (query id, tokens, round), empty text skipped but counted for derivation,
     * nulls, unknown members of every type (nested), whitespace everywhere */
    check_fast_matches_cjson(" \r\n{ \"chunks\" : [ {\"text\":\"alpha beta\",\"tokens\":[1, 2 ,3],\"round\":7,\"layer\":null},"
                             "{\"text\":\"\",\"tokens\":[]},{\"x\":{\"a\":[1,{\"b\":[true,false,null,\"\\u00e9\"]}],\"c\":-1.5E+3},"
                             "\"text\":\"gamma\",\"tokens\":[0],\"score\":null,\"token_range\":null} ] , \"extra\": [] }\t\n", "sq");
    /* exact integers up to 2^53-1, exponent forms that are integers */
    check_fast_matches_cjson("{\"session_id\":\"n\",\"chunks\":[{\"text\":\"a\",\"token_range\":[9007199254740990,9007199254740991],"
                             "\"layer\":1e2,\"round\":-1,\"score\":3.4e38},{\"text\":\"b\",\"token_range\":[0,0],\"layer\":-0}]}", NULL);
    check_fast_matches_cjson("{\"session_id\":\"q\",\"chunks\":[]}", "q");   /* same id in both places */
    /* deep but allowed nesting in an ignored member */
    char deep[600];
    size_t o = (size_t)sprintf(deep, "{\"session_id\":\"d\",\"z\":");
    for (int i = 0; i < 60; i++) deep[o++] = '[';
    for (int i = 0; i < 60; i++) deep[o++] = ']';
    sprintf(deep + o, ",\"chunks\":[{\"text\":\"t\",\"token_range\":[1,2]}]}");
    check_fast_matches_cjson(deep, NULL);

    /* everything else goes to the general path (which answers the exact 4xx) */
    REFUSED("");
    REFUSED("[]");
    REFUSED("{\"session_id\":\"a\"}");                                        /* no chunks */
    REFUSED("{\"chunks\":[]}");                                               /* no session id */
    REFUSED("{\"session_id\":\"\",\"chunks\":[]}");
    REFUSED("{\"session_id\":5,\"chunks\":[]}");
    REFUSED("{\"session_id\":\"a\",\"chunks\":{}}");
    REFUSED("{\"session_id\":\"a\",\"chunks\":[]} x");                       /* trailing data */
    REFUSED("{\"session_id\":\"a\",\"chunks\":[],}");
    REFUSED("{\"session_id\":\"a\",\"chunks\":[5]}");
    REFUSED("{\"session_id\":\"a\",\"chunks\":[{\"text\":5,\"token_range\":[1,2]}]}");
    REFUSED("{\"session_id\":\"a\",\"chunks\":[{\"text\":\"x\"}]}");          /* no range */
    REFUSED("{\"session_id\":\"a\",\"chunks\":[{\"text\":\"x\",\"token_range\":[1]}]}");
    REFUSED("{\"session_id\":\"a\",\"chunks\":[{\"text\":\"x\",\"token_range\":[2,1]}]}");
    REFUSED("{\"session_id\":\"a\",\"chunks\":[{\"text\":\"x\",\"token_range\":[1.5,2]}]}");
    REFUSED("{\"session_id\":\"a\",\"chunks\":[{\"text\":\"x\",\"token_range\":[0,9007199254740992]}]}");
    REFUSED("{\"session_id\":\"a\",\"chunks\":[{\"text\":\"x\",\"tokens\":[-1]}]}");
    REFUSED("{\"session_id\":\"a\",\"chunks\":[{\"text\":\"x\",\"tokens\":[\"a\"]}]}");
    REFUSED("{\"session_id\":\"a\",\"chunks\":[{\"text\":\"x\",\"token_range\":[1,2],\"layer\":\"1\"}]}");
    REFUSED("{\"session_id\":\"a\",\"chunks\":[{\"text\":\"x\",\"token_range\":[1,2],\"layer\":-2}]}");
    REFUSED("{\"session_id\":\"a\",\"chunks\":[{\"text\":\"x\",\"token_range\":[1,2],\"layer\":2147483648}]}");
    REFUSED("{\"session_id\":\"a\",\"chunks\":[{\"text\":\"x\",\"token_range\":[1,2],\"score\":1e999}]}");   /* huge → inf */
    REFUSED("{\"session_id\":\"a\",\"chunks\":[{\"text\":\"x\",\"token_range\":[1,2],\"score\":3.5e38}]}");
    REFUSED("{\"session_id\":\"a\",\"chunks\":[{\"text\":\"x\",\"token_range\":[1,2],\"score\":"
            "1234567890123456789012345678901234567890123456789012345678901234}]}");                       /* > 63 chars */
    REFUSED("{\"session_id\":\"a\",\"chunks\":[{\"text\":\"x\",\"token_range\":[01,2]}]}");      /* lax numbers */
    REFUSED("{\"session_id\":\"a\",\"chunks\":[{\"text\":\"x\",\"token_range\":[+1,2]}]}");
    REFUSED("{\"session_id\":\"a\",\"chunks\":[{\"text\":\"x\",\"token_range\":[1.,2]}]}");
    REFUSED("{\"session_id\":\"a\",\"chunks\":[{\"text\":\"x\",\"text\":\"y\",\"token_range\":[1,2]}]}");   /* duplicate */
    REFUSED("{\"session_id\":\"a\",\"chunks\":[{\"text\":\"\\ud800\",\"token_range\":[1,2]}]}");        /* lone high */
    REFUSED("{\"session_id\":\"a\",\"chunks\":[{\"text\":\"\\ud800\\u0041\",\"token_range\":[1,2]}]}");
    REFUSED("{\"session_id\":\"a\",\"chunks\":[{\"text\":\"\\udc00\",\"token_range\":[1,2]}]}");        /* lone low */
    REFUSED("{\"session_id\":\"a\",\"chunks\":[{\"text\":\"a\\u0000b\",\"token_range\":[1,2]}]}");
    REFUSED("{\"session_id\":\"a\",\"chunks\":[{\"text\":\"\\x41\",\"token_range\":[1,2]}]}");
    REFUSED("{\"session_id\":\"a\",\"chunks\":[{\"text\":\"\\u12\",\"token_range\":[1,2]}]}");
    REFUSED("{\"session_id\":\"a\",\"chunks\":[{\"text\":\"tab\there\",\"token_range\":[1,2]}]}");     /* raw control */
    REFUSED("{\"session_id\":\"a\",\"chunks\":[{\"text\":\"caf\xe9\",\"token_range\":[1,2]}]}");          /* bad UTF-8 */
    REFUSED("{\"session_id\":\"a\",\"chunks\":[{\"text\":\"over\xc0\xaflong\",\"token_range\":[1,2]}]}");
    REFUSED("{\"session_id\":\"a\",\"chunks\":[{\"text\":\"a\0b\",\"token_range\":[1,2]}]}");
    REFUSED("{\"session_id\":\"a\",\"chunks\":[{\"text\":\"unterminated");
    REFUSED("{\"session_id\":\"a\",\"chunks\":[{\"text\":\"x\",\"token_range\":[1,2],\"k\":tru}]}");
    REFUSED("{\"session_id\":\"a\",\x01\"chunks\":[]}");                      /* cJSON-only whitespace */
    /* limits: 3 chunks max, 64 bytes of text max in refused() */
    REFUSED("{\"session_id\":\"a\",\"chunks\":[{\"text\":\"x\",\"tokens\":[]},{\"text\":\"x\",\"tokens\":[]},"
            "{\"text\":\"x\",\"tokens\":[]},{\"text\":\"x\",\"tokens\":[]}]}");
    REFUSED("{\"session_id\":\"a\",\"chunks\":[{\"text\":\"0123456789012345678901234567890123456789012345678901234567890123456789\","
            "\"tokens\":[]}]}");
    refused("{\"session_id\":\"a\",\"chunks\":[]}", 30, "b");                 /* body and query ids differ */
    char deeper[400];
    o = (size_t)sprintf(deeper, "{\"session_id\":\"d\",\"z\":");
    for (int i = 0; i < 100; i++) deeper[o++] = '[';
    for (int i = 0; i < 100; i++) deeper[o++] = ']';
    o += (size_t)sprintf(deeper + o, ",\"chunks\":[]}");
    refused(deeper, o, NULL);                                                /* deep: cJSON decides */
}

/* Mutation fuzzing: valid bodies damaged at random (deterministic seed). Each mutant sits in
 * an exact-size heap buffer (no terminator, so ASan catches any read past the body). The
 * fast parser must never crash, and whenever it accepts a mutant, the accepted body must be
 * valid JSON whose fields cJSON reads exactly as the fast path did. */
static uint64_t fz_state = 0x9E3779B97F4A7C15ull;
static uint32_t fz_next(void)
{
    fz_state ^= fz_state << 13;
    fz_state ^= fz_state >> 7;
    fz_state ^= fz_state << 17;
    return (uint32_t)(fz_state >> 16);
}

static void test_write_fast_parser_fuzz(void **st)
{
    (void)st;
    static const char *seeds[] = {
        "{\"session_id\":\"s1\",\"chunks\":[{\"text\":\"alpha \\\"beta\\\" \\u00e9\\ud83d\\ude80 gamma\","
        "\"token_range\":[10,42],\"layer\":3,\"score\":0.25},{\"text\":\"delta\",\"token_range\":[43,50]}]}",
        "{\"chunks\":[{\"text\":\"caf\xc3\xa9 \xe6\x97\xa5\",\"tokens\":[1,2,3],\"round\":2,\"layer\":null},"
        "{\"text\":\"\",\"tokens\":[]}],\"x\":{\"a\":[true,false,null,-1.5e+3]}}",
    };
    static const char alphabet[] = "{}[]\",:\\ \t0123456789-+.eEnultrfasu\xc3\xa9\xff\x01";
    const size_t alen = sizeof alphabet - 1;
    int accepted = 0;
    for (int it = 0; it < 20000; it++) {
        const char *seed = seeds[fz_next() % 2];
        size_t n = strlen(seed);
        char work[1024];
        memcpy(work, seed, n);
        for (int m = 1 + (int)(fz_next() % 3); m > 0 && n > 0; m--) {
            size_t at = fz_next() % n;
            switch (fz_next() % 4) {
            case 0: work[at] = alphabet[fz_next() % alen]; break;                /* replace */
            case 1: memmove(work + at, work + at + 1, n - at - 1); n--; break; /* delete */
            case 2:                                                              /* insert */
                if (n < sizeof work - 1) {
                    memmove(work + at + 1, work + at, n - at);
                    work[at] = alphabet[fz_next() % alen];
                    n++;
                }
                break;
            default: n = at; break;                                              /* truncate */
            }
        }
        char *body = malloc(n ? n : 1);
        assert_non_null(body);
        memcpy(body, work, n);
        lcx_svc_wbatch w;
        int rc = lcx__svc_write_parse_fast(body, n, (it & 1) ? "s1" : NULL, 1000, 1 << 20, &w);
        assert_true(rc == 0 || rc == 1);
        lcx__svc_wbatch_free(&w);
        if (rc == 0) {
            accepted++;
            assert_null(memchr(body, 0, n)); /* an accepted body holds no NUL byte */
            char *z = malloc(n + 1);
            assert_non_null(z);
            memcpy(z, body, n);
            z[n] = 0;
            check_fast_matches_cjson(z, (it & 1) ? "s1" : NULL);
            free(z);
        }
        free(body);
    }
    assert_true(accepted > 0); /* some mutants stay valid: the comparison really ran */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rescue_format_exact),
        cmocka_unit_test(test_rescue_format_cap),
        cmocka_unit_test(test_rescue_format_same_as_triatt),
        cmocka_unit_test(test_routes),
        cmocka_unit_test(test_config),
        cmocka_unit_test(test_janitor_interval),
        cmocka_unit_test(test_session_ids_and_errors),
        cmocka_unit_test(test_write_fast_parser),
        cmocka_unit_test(test_write_fast_parser_fuzz),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
