/* Rescue bridge without longctx-svc: span grouping/widening, rescue text format, query
 * signal, message insertion, the Tier 2 request body (against a loopback stub), the
 * non-blocking queue with a hung service, and the dead-service failure counting. */
#define _GNU_SOURCE
#include "testutil.h"
#include "minihttp.h"
#include "longctx/triatt.h"
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* token t decodes to "w<t> "; token 0 decodes to nothing, 1 to a blank, 2 to 200 bytes
 * (more than the client's first buffer guess: exercises the snprintf-style retry) */
static int detok(void *ud, const int32_t *tok, int n, char *out, size_t cap)
{
    size_t len = 0;
    out[0] = 0;
    for (int i = 0; i < n; i++) {
        char w[256];
        int k;
        if (tok[i] == 2) { memset(w, 'L', 200); k = 200; }
        else k = tok[i] == 0 ? 0 : tok[i] == 1 ? snprintf(w, sizeof w, " ") : snprintf(w, sizeof w, "w%d ", tok[i]);
        if (len + k + 1 <= cap) {
            memcpy(out + len, w, k);
            out[len + k] = 0;
        }
        len += k;
    }
    return (int)len;
}

static void test_spans(void **st)
{
    triatt_span sp[16];
    /* unsorted, duplicates, out of range (-1, 1000), two runs far apart */
    int32_t pos[] = {505, 100, 101, -1, 102, 1000, 503, 504, 101};
    int n = triatt_rescue_spans(pos, 9, 1000, 32, sp, 16);
    assert_int_equal(n, 2);
    assert_int_equal(sp[0].a, 68);  assert_int_equal(sp[0].b, 135);   /* [100,103) ± 32 */
    assert_int_equal(sp[1].a, 471); assert_int_equal(sp[1].b, 538);   /* [503,506) ± 32 */
    /* widening clamps at both ends */
    int32_t edge[] = {0, 999};
    n = triatt_rescue_spans(edge, 2, 1000, 32, sp, 16);
    assert_int_equal(n, 2);
    assert_int_equal(sp[0].a, 0);   assert_int_equal(sp[0].b, 33);
    assert_int_equal(sp[1].a, 967); assert_int_equal(sp[1].b, 1000);
    /* runs whose widened ranges overlap are merged (no text sent twice) */
    int32_t near[] = {100, 150};
    n = triatt_rescue_spans(near, 2, 1000, 32, sp, 16);
    assert_int_equal(n, 1);
    assert_int_equal(sp[0].a, 68); assert_int_equal(sp[0].b, 183);
    /* widen 0: pure contiguous grouping */
    int32_t runs[] = {5, 6, 7, 9, 11, 12};
    n = triatt_rescue_spans(runs, 6, 100, 0, sp, 16);
    assert_int_equal(n, 3);
    assert_int_equal(sp[0].a, 5); assert_int_equal(sp[0].b, 8);
    assert_int_equal(sp[1].a, 9); assert_int_equal(sp[1].b, 10);
    assert_int_equal(sp[2].a, 11); assert_int_equal(sp[2].b, 13);
    assert_int_equal(triatt_rescue_spans(runs, 6, 100, 0, sp, 2), 2);   /* max_spans */
    assert_int_equal(triatt_rescue_spans(runs, 6, 0, 0, sp, 16), 0);    /* nothing in range */
    assert_int_equal(triatt_rescue_spans(runs, 6, 100, -1, sp, 16), LCX_EINVAL);
}

static void test_format(void **st)
{
    triatt_rescue_chunk ch[3] = {{"alpha", 10, 20, 3}, {"beta", 30, 40, 0}, {"gamma", 50, 60, 1}};
    int used = -1;
    char *t = triatt_rescue_format(ch, 2, 8000, &used);
    assert_int_equal(used, 2);
    assert_string_equal(t, "[Recovered context from earlier in this session (evicted from KV cache, restored via longctx)]:\n"
                           "\n--- evicted span (tokens 10..20, layer 3) ---\nalpha\n"
                           "\n--- evicted span (tokens 30..40, layer 0) ---\nbeta\n");
    free(t);
    /* cap: stop at the first block that would overflow, even if a later one would fit */
    char big[9000];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = 0;
    big[7850] = 0;   /* header 97 + small block ~45 + block header ~40 + 7850 + 1 > 8000 */
    triatt_rescue_chunk c2[3] = {{"small", 1, 2, 0}, {big, 3, 4, 0}, {"tiny", 5, 6, 0}};
    t = triatt_rescue_format(c2, 3, 8000, &used);
    assert_int_equal(used, 1);
    assert_non_null(strstr(t, "small"));
    assert_null(strstr(t, "tiny"));
    assert_true(strlen(t) <= 8000);
    free(t);
    big[7850] = 'x';
    big[7000] = 0;   /* fits */
    t = triatt_rescue_format(c2, 3, 8000, &used);
    assert_int_equal(used, 3);
    assert_true(strlen(t) <= 8000);
    free(t);
}

static void test_query_signal(void **st)
{
    char *q = triatt_rescue_query_signal("blah Question: first?\nmore QUESTION:  What is the access code?  \n");
    assert_string_equal(q, "What is the access code?");
    free(q);
    q = triatt_rescue_query_signal("no marker here");
    assert_string_equal(q, "no marker here");
    free(q);
    /* fallback: the last 512 bytes, never starting inside a UTF-8 character */
    char long_[2000];
    size_t n = 0;
    while (n + 2 < 1200) { long_[n++] = (char)0xC3; long_[n++] = (char)0xA9; }   /* é x 600 */
    long_[n++] = 'Z';
    long_[n] = 0;
    q = triatt_rescue_query_signal(long_);
    assert_true(strlen(q) <= 512 && strlen(q) >= 510);
    assert_true(((unsigned char)q[0] & 0xC0) != 0x80);
    assert_int_equal(q[strlen(q) - 1], 'Z');
    free(q);
    q = triatt_rescue_query_signal("trailing question:   ");   /* empty after the marker */
    assert_string_equal(q, "trailing question:   ");
    free(q);
    /* no marker: the last question sentence near the end, not the chat line after it */
    q = triatt_rescue_query_signal("Some pasted context. What is the vault code for Oslo? thanks a lot");
    assert_string_equal(q, "What is the vault code for Oslo?");
    free(q);
}

/* The cap counts characters (SPEC §2), and a text with no block that fits is empty. */
static void test_format_counts_chars(void **st)
{
    static const char head[] =
        "[Recovered context from earlier in this session (evicted from KV cache, restored via longctx)]:\n";
    static const char blk[] = "\n--- evicted span (tokens 1..2, layer 0) ---\n";
    char u[201];
    for (int i = 0; i < 100; i++) u[2 * i] = (char)0xc3, u[2 * i + 1] = (char)0xa9;   /* é x 100 */
    u[200] = 0;
    triatt_rescue_chunk c = {u, 1, 2, 0};
    int cap = (int)(strlen(head) + strlen(blk) + 100 + 1), used = -1;
    char *t = triatt_rescue_format(&c, 1, cap, &used);   /* 200 bytes, 100 characters: fits */
    assert_int_equal(used, 1);
    assert_int_equal(strlen(t), strlen(head) + strlen(blk) + 201);
    free(t);
    t = triatt_rescue_format(&c, 1, cap - 1, &used);
    assert_int_equal(used, 0);
    assert_string_equal(t, "");   /* no header without a block */
    free(t);
}

static void test_insert(void **st)
{
    triatt_msg m[6] = {{"system", "sys"}, {"user", "u1"}, {"assistant", "a1"}, {"user", "u2"}};
    int n = triatt_msgs_insert_rescue(m, 4, 6, "RESCUE");
    assert_int_equal(n, 5);
    assert_string_equal(m[3].role, "system");
    assert_string_equal(m[3].content, "RESCUE");
    assert_string_equal(m[4].content, "u2");
    assert_string_equal(m[2].content, "a1");
    triatt_msg k[2] = {{"assistant", "x"}};
    assert_int_equal(triatt_msgs_insert_rescue(k, 1, 2, "R"), 2);   /* no user turn: appended */
    assert_string_equal(k[1].content, "R");
    assert_int_equal(triatt_msgs_insert_rescue(k, 2, 2, "R"), LCX_ELIMIT);
}

static triatt_rescue *client(int port, int queue_cap, int timeout_ms)
{
    char ep[64];
    snprintf(ep, sizeof ep, "http://127.0.0.1:%d/", port);
    triatt_rescue_config c;
    triatt_rescue_config_default(&c);
    c.endpoint = ep; c.session_id = "sess-1"; c.widen = 2; c.queue_cap = queue_cap;
    c.timeout_ms = timeout_ms; c.detok = detok;
    triatt_rescue *r = NULL;
    triatt_rescue_init(&c, &r);
    assert_non_null(r);
    return r;
}

static void test_write_body(void **st)
{
    minihttp m;
    assert_int_equal(mh_start(&m), 0);
    triatt_rescue *r = client(m.port, 4, 5000);
    int32_t tokens[100];
    for (int i = 0; i < 100; i++) tokens[i] = 1000 + i;
    tokens[60] = tokens[61] = tokens[62] = tokens[63] = tokens[64] = 0;   /* decodes to nothing */
    int32_t pos[] = {20, 21, 62, 95, 99, 500};
    float sc[] = {1.0f, 3.0f, 7.0f, 2.0f, 4.0f, 9.0f};
    int k = triatt_rescue_write_round(r, pos, sc, 6, tokens, 100, 5);
    assert_int_equal(k, 2);   /* [18,24), [60,65) empty → skipped, [93,100) */
    assert_int_equal(triatt_rescue_flush(r, 5000), 0);
    triatt_rescue_stats s;
    triatt_rescue_get_stats(r, &s);
    assert_int_equal(s.rounds_sent, 1);
    assert_int_equal(s.spans_sent, 2);
    assert_int_equal(s.spans_empty, 1);
    assert_int_equal(m.n, 1);
    assert_string_equal(m.paths[0], "/evict/write");
    cJSON *j = cJSON_Parse(m.bodies[0]);
    assert_non_null(j);
    assert_string_equal(cJSON_GetObjectItem(j, "session_id")->valuestring, "sess-1");
    cJSON *ch = cJSON_GetObjectItem(j, "chunks");
    assert_int_equal(cJSON_GetArraySize(ch), 2);
    cJSON *c0 = cJSON_GetArrayItem(ch, 0), *c1 = cJSON_GetArrayItem(ch, 1);
    assert_string_equal(cJSON_GetObjectItem(c0, "text")->valuestring, "w1018 w1019 w1020 w1021 w1022 w1023 ");
    assert_int_equal(cJSON_GetArrayItem(cJSON_GetObjectItem(c0, "token_range"), 0)->valueint, 18);
    assert_int_equal(cJSON_GetArrayItem(cJSON_GetObjectItem(c0, "token_range"), 1)->valueint, 24);
    assert_int_equal(cJSON_GetObjectItem(c0, "layer")->valueint, 5);
    assert_true(fabs(cJSON_GetObjectItem(c0, "score")->valuedouble - 2.0) < 1e-6);   /* mean(1, 3) */
    assert_int_equal(cJSON_GetArrayItem(cJSON_GetObjectItem(c1, "token_range"), 0)->valueint, 93);
    assert_int_equal(cJSON_GetArrayItem(cJSON_GetObjectItem(c1, "token_range"), 1)->valueint, 100);
    assert_true(fabs(cJSON_GetObjectItem(c1, "score")->valuedouble - 3.0) < 1e-6);   /* mean(2, 4) */
    cJSON_Delete(j);
    /* a span whose text is longer than the first buffer guess is decoded in full */
    int32_t longtok[40];
    for (int i = 0; i < 40; i++) longtok[i] = 2;
    int32_t lp[] = {20};
    assert_int_equal(triatt_rescue_write_round(r, lp, NULL, 1, longtok, 40, 0), 1);
    assert_int_equal(triatt_rescue_flush(r, 5000), 0);
    j = cJSON_Parse(m.bodies[1]);
    assert_int_equal(strlen(cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "chunks"), 0), "text")->valuestring), 5 * 200);
    cJSON_Delete(j);
    /* prepopulate: the whole prompt in fixed spans, one request */
    triatt_rescue_free(r);
    char ep[64];
    snprintf(ep, sizeof ep, "http://127.0.0.1:%d", m.port);
    triatt_rescue_config c;
    triatt_rescue_config_default(&c);
    c.endpoint = ep; c.session_id = "s2"; c.prepopulate_span = 40; c.detok = detok;
    triatt_rescue_init(&c, &r);
    for (int i = 0; i < 100; i++) tokens[i] = 2000 + i;
    assert_int_equal(triatt_rescue_prepopulate(r, tokens, 100), 3);
    assert_int_equal(triatt_rescue_flush(r, 5000), 0);
    j = cJSON_Parse(m.bodies[2]);
    ch = cJSON_GetObjectItem(j, "chunks");
    assert_int_equal(cJSON_GetArraySize(ch), 3);
    assert_int_equal(cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetArrayItem(ch, 2), "token_range"), 0)->valueint, 80);
    assert_int_equal(cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetArrayItem(ch, 2), "token_range"), 1)->valueint, 100);
    cJSON_Delete(j);
    triatt_rescue_free(r);
    mh_stop(&m);
}

static void test_rehydrate_stub(void **st)
{
    minihttp m;
    assert_int_equal(mh_start(&m), 0);
    m.reply = "{\"chunks\":[{\"text\":\"the code is 481729\",\"token_range\":[40,72],\"layer\":0,\"score\":1.5,"
              "\"similarity\":0.9,\"rank\":1}],\"session_total\":3,\"system_message\":\"x\"}";
    triatt_rescue *r = client(m.port, 4, 5000);
    char *text = NULL;
    int k = triatt_rescue_rehydrate(r, "long blob ... Question: What is the access code?", &text);
    assert_int_equal(k, 1);
    assert_non_null(strstr(text, "\n--- evicted span (tokens 40..72, layer 0) ---\nthe code is 481729\n"));
    cJSON *j = cJSON_Parse(m.bodies[0]);
    assert_string_equal(m.paths[0], "/evict/retrieve");
    assert_string_equal(cJSON_GetObjectItem(j, "query")->valuestring, "What is the access code?");
    assert_int_equal(cJSON_GetObjectItem(j, "top_k")->valueint, 8);
    assert_true(fabs(cJSON_GetObjectItem(j, "score_floor")->valuedouble - 0.2) < 1e-9);
    assert_string_equal(cJSON_GetObjectItem(j, "session_id")->valuestring, "sess-1");
    cJSON_Delete(j);
    free(text);
    /* a malformed answer is an error, not a crash */
    m.reply = "{\"nochunks\":1}";
    assert_int_equal(triatt_rescue_rehydrate(r, "q", &text), LCX_ECORRUPT);
    assert_null(text);
    m.reply = "{\"chunks\":[]}";
    assert_int_equal(triatt_rescue_rehydrate(r, "q", &text), 0);
    assert_null(text);
    triatt_rescue_stats s;
    triatt_rescue_get_stats(r, &s);
    assert_int_equal(s.retrieve_ok, 2);
    assert_int_equal(s.retrieve_failed, 1);
    triatt_rescue_free(r);
    mh_stop(&m);
}

/* A stuck service (reads, never answers): the caller never waits; the bounded queue fills
 * and further rounds are dropped and counted. */
static void test_hung_service_never_blocks(void **st)
{
    minihttp m;
    assert_int_equal(mh_start(&m), 0);
    m.hang = 1;
    triatt_rescue *r = client(m.port, 2, 60000);
    int32_t tokens[64];
    for (int i = 0; i < 64; i++) tokens[i] = 100 + i;
    int32_t pos[] = {30};
    for (int i = 0; i < 8; i++) assert_true(triatt_rescue_write_round(r, pos, NULL, 1, tokens, 64, 0) >= 0);
    triatt_rescue_stats s;
    triatt_rescue_get_stats(r, &s);
    /* 1 in flight (or about to be) + 2 queued; the rest dropped */
    assert_true(s.rounds_dropped >= 5 && s.rounds_dropped <= 6);
    assert_int_equal(s.rounds_queued + s.rounds_dropped, 8);
    assert_int_equal(triatt_rescue_flush(r, 50), LCX_ETIMEOUT);
    /* free() aborts the hung request instead of waiting out its 60 s timeout (the test
     * would hit its ctest timeout otherwise) */
    triatt_rescue_free(r);
    mh_stop(&m);
}

/* Nothing listening: every call returns, and failures are counted. */
static void test_dead_service(void **st)
{
    int port = tu_free_port();
    triatt_rescue *r = client(port, 8, 10000);
    int32_t tokens[64];
    for (int i = 0; i < 64; i++) tokens[i] = 100 + i;
    int32_t pos[] = {10, 40};
    for (int i = 0; i < 3; i++) assert_int_equal(triatt_rescue_write_round(r, pos, NULL, 2, tokens, 64, 0), 2);
    assert_int_equal(triatt_rescue_flush(r, 20000), 0);
    char *text = (char *)1;
    assert_int_equal(triatt_rescue_rehydrate(r, "question: x", &text), LCX_ENET);
    assert_null(text);
    triatt_rescue_stats s;
    triatt_rescue_get_stats(r, &s);
    assert_int_equal(s.rounds_failed, 3);
    assert_int_equal(s.rounds_sent, 0);
    assert_int_equal(s.spans_dropped, 6);
    assert_int_equal(s.retrieve_failed, 1);
    triatt_rescue_free(r);
    /* bad configs are refused */
    triatt_rescue_config c;
    triatt_rescue_config_default(&c);
    assert_int_equal(c.widen, 32); assert_int_equal(c.top_k, 8); assert_int_equal(c.timeout_ms, 10000);
    assert_int_equal(c.max_chars, 8000); assert_int_equal(c.prepopulate_span, 256);
    c.endpoint = "ftp://x"; c.session_id = "s"; c.detok = detok;
    assert_true(triatt_rescue_init(&c, &(triatt_rescue *){NULL}) < 0);
    c.endpoint = "http://127.0.0.1:1";
    c.session_id = "";
    assert_true(triatt_rescue_init(&c, &(triatt_rescue *){NULL}) < 0);
    /* the service's session-id rule: 1..LCX_SESSION_ID_MAX bytes of UTF-8, no controls */
    char id[LCX_SESSION_ID_MAX + 2];
    memset(id, 'a', LCX_SESSION_ID_MAX);
    id[LCX_SESSION_ID_MAX] = 0;
    c.session_id = id;
    triatt_rescue *ok = NULL;
    triatt_rescue_init(&c, &ok);
    assert_non_null(ok);
    triatt_rescue_free(ok);
    id[LCX_SESSION_ID_MAX] = 'a', id[LCX_SESSION_ID_MAX + 1] = 0;
    assert_true(triatt_rescue_init(&c, &(triatt_rescue *){NULL}) < 0);
    c.session_id = "bad\xff";
    assert_true(triatt_rescue_init(&c, &(triatt_rescue *){NULL}) < 0);
    c.session_id = "tab\there";
    assert_true(triatt_rescue_init(&c, &(triatt_rescue *){NULL}) < 0);
    c.session_id = "s";
    c.detok = NULL;
    assert_true(triatt_rescue_init(&c, &(triatt_rescue *){NULL}) < 0);
    triatt_rescue_free(NULL);
}

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test(test_spans),
        cmocka_unit_test(test_format),
        cmocka_unit_test(test_query_signal),
        cmocka_unit_test(test_format_counts_chars),
        cmocka_unit_test(test_insert),
        cmocka_unit_test(test_write_body),
        cmocka_unit_test(test_rehydrate_stub),
        cmocka_unit_test(test_hung_service_never_blocks),
        cmocka_unit_test(test_dead_service),
    };
    return cmocka_run_group_tests(t, NULL, NULL);
}
