/* Integration: every route of longctx-svc and every bad-input case, against the REAL
 * binary on a free loopback port. After the bad inputs the stored data must be intact. */
#include "svc_harness.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/socket.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define FACT "IMPORTANT: Project NOVA was provisioned with access code 481729. All technicians must memorize this code prior to deployment."
#define FILLER "the routine quarterly procedure required careful review of the documented operational records during the assessment cycle. "
#define QUESTION "What is the access code for Project NOVA? Answer with only the digits."

static sh_server S;   /* one server for the group (default limits) */

static int setup(void **st)
{
    sh_start(&S, NULL, NULL, NULL);
    return 0;
}

static int teardown(void **st)
{
    if (S.pid > 0) {
        int w = sh_stop(&S, SIGTERM);
        assert_true(WIFEXITED(w) && WEXITSTATUS(w) == 0);   /* clean shutdown on SIGTERM */
    }
    sh_cleanup(&S);
    return 0;
}

static const cJSON *get(const cJSON *o, const char *k) { return cJSON_GetObjectItemCaseSensitive(o, k); }
static double num(const cJSON *o, const char *k)
{
    const cJSON *x = get(o, k);
    assert_true(cJSON_IsNumber(x));
    return x->valuedouble;
}
static const char *str(const cJSON *o, const char *k)
{
    const cJSON *x = get(o, k);
    assert_true(cJSON_IsString(x));
    return x->valuestring;
}

/* Writes FILLER×n + FACT (form A) into session sid; the fact is at token_range [1000,1031]. */
static void seed(sh_server *s, const char *sid, int n_filler)
{
    char *body = malloc(64 + (size_t)(n_filler + 1) * 300);
    size_t o = (size_t)sprintf(body, "{\"session_id\":\"%s\",\"chunks\":[", sid);
    for (int i = 0; i < n_filler; i++)
        o += (size_t)sprintf(body + o, "{\"text\":\"%s%d\",\"token_range\":[%d,%d],\"layer\":2,\"score\":0.25},", FILLER, i,
                             i * 32, i * 32 + 31);
    o += (size_t)sprintf(body + o, "{\"text\":\"%s\",\"token_range\":[1000,1031],\"layer\":7,\"score\":0.75}]}", FACT);
    cJSON *j;
    assert_int_equal(sh_post(s, "/evict/write", body, &j), 200);
    assert_int_equal((int)num(j, "accepted"), n_filler + 1);
    cJSON_Delete(j);
    free(body);
}

static cJSON *retrieve(sh_server *s, const char *sid, const char *query, int top_k)
{
    char body[4096];
    snprintf(body, sizeof body, "{\"session_id\":\"%s\",\"query\":\"%s\",\"top_k\":%d}", sid, query, top_k);
    cJSON *j;
    assert_int_equal(sh_post(s, "/evict/retrieve", body, &j), 200);
    assert_non_null(j);
    return j;
}

static void test_healthz(void **st)
{
    cJSON *j;
    assert_int_equal(sh_get(&S, "/healthz", &j), 200);
    assert_string_equal(str(j, "status"), "ok");
    assert_string_equal(str(j, "version"), LCX_VERSION);
    cJSON_Delete(j);
}

static void test_write_retrieve_form_a(void **st)
{
    seed(&S, "alpha", 5);
    cJSON *j = retrieve(&S, "alpha", QUESTION, 3);
    assert_int_equal((int)num(j, "session_total"), 6);
    const cJSON *cs = get(j, "chunks");
    assert_true(cJSON_GetArraySize(cs) >= 1 && cJSON_GetArraySize(cs) <= 3);
    const cJSON *c0 = cJSON_GetArrayItem(cs, 0);
    assert_string_equal(str(c0, "text"), FACT);
    const cJSON *tr = get(c0, "token_range");
    assert_int_equal(cJSON_GetArraySize(tr), 2);
    assert_int_equal(cJSON_GetArrayItem(tr, 0)->valueint, 1000);
    assert_int_equal(cJSON_GetArrayItem(tr, 1)->valueint, 1031);
    assert_int_equal((int)num(c0, "layer"), 7);
    assert_float_equal(num(c0, "score"), 0.75, 1e-6);          /* the engine's write-time score */
    double sim0 = num(c0, "similarity");
    assert_true(sim0 > 0 && sim0 <= 1.0 + 1e-6);
    assert_int_equal((int)num(c0, "rank"), 1);
    for (int i = 1; i < cJSON_GetArraySize(cs); i++) {
        const cJSON *ci = cJSON_GetArrayItem(cs, i);
        assert_int_equal((int)num(ci, "rank"), i + 1);
        assert_true(num(ci, "similarity") <= sim0 + 1e-6);
    }
    /* system message: SPEC §2 rescue format */
    const char *sm = str(j, "system_message");
    const char *hdr = "[Recovered context from earlier in this session (evicted from KV cache, restored via longctx)]:\n";
    assert_memory_equal(sm, hdr, strlen(hdr));
    char blk[512];
    snprintf(blk, sizeof blk, "\n--- evicted span (tokens 1000..1031, layer 7) ---\n%s\n", FACT);
    assert_memory_equal(sm + strlen(hdr), blk, strlen(blk));
    assert_true(strlen(sm) <= 8000);
    cJSON_Delete(j);
}

/* Retrieval knobs reach the search: score_floor filters, the others are accepted and
 * still rank the fact first. */
static void test_retrieve_options(void **st)
{
    const char *variants[] = {
        "\"score_floor\":0.5", "\"hybrid_alpha\":0", "\"hybrid_alpha\":1", "\"use_rerank\":false",
        "\"fusion\":\"rrf\"", "\"prefilter\":4", "\"raw_query\":true", "\"hybrid_alpha\":null",
    };
    for (size_t v = 0; v < sizeof variants / sizeof variants[0]; v++) {
        char body[1024];
        snprintf(body, sizeof body, "{\"session_id\":\"alpha\",\"query\":\"%s\",\"top_k\":6,%s}", QUESTION, variants[v]);
        cJSON *j;
        assert_int_equal(sh_post(&S, "/evict/retrieve", body, &j), 200);
        const cJSON *cs = get(j, "chunks");
        assert_true(cJSON_GetArraySize(cs) >= 1);
        if (strcmp(str(cJSON_GetArrayItem(cs, 0), "text"), FACT)) fprintf(stderr, "variant %s\n", variants[v]);
        assert_string_equal(str(cJSON_GetArrayItem(cs, 0), "text"), FACT);
        if (v == 0) {
            const cJSON *c;
            cJSON_ArrayForEach(c, cs) assert_true(num(c, "similarity") >= 0.5 - 1e-6);
        }
        cJSON_Delete(j);
    }
    /* a floor of 1 keeps at most the hits scoring exactly 1, and never errors */
    cJSON *j;
    char body[512];
    snprintf(body, sizeof body, "{\"session_id\":\"alpha\",\"query\":\"%s\",\"score_floor\":1}", QUESTION);
    assert_int_equal(sh_post(&S, "/evict/retrieve", body, &j), 200);
    const cJSON *c;
    cJSON_ArrayForEach(c, get(j, "chunks")) assert_true(num(c, "similarity") >= 1.0 - 1e-6);
    cJSON_Delete(j);
}

static void test_form_b_and_dump(void **st)
{
    cJSON *j;
    const char *b1 = "{\"chunks\":[{\"text\":\"zebra migration notes\",\"tokens\":[5,6,7],\"round\":1,\"layer\":4},"
                     "{\"text\":\"giraffe feeding schedule\",\"tokens\":[8,9,10,11,12],\"round\":1,\"layer\":4}]}";
    assert_int_equal(sh_post(&S, "/evict/write?session_id=beta", b1, &j), 200);
    assert_int_equal((int)num(j, "accepted"), 2);
    assert_int_equal((int)num(j, "session_total"), 2);
    cJSON_Delete(j);
    const char *b2 = "{\"chunks\":[{\"text\":\"okapi habitat survey\",\"tokens\":[1,2],\"round\":2,\"layer\":5}]}";
    assert_int_equal(sh_post(&S, "/evict/write?session_id=beta", b2, &j), 200);
    assert_int_equal((int)num(j, "session_total"), 3);
    cJSON_Delete(j);

    /* derived ranges: consecutive positions in write order */
    tu_resp r;
    assert_int_equal(sh_req(&S, "GET", "/evict/dump?session_id=beta", NULL, 0, &j, &r), 200);
    assert_null(strstr(r.body, "zebra"));                      /* no text in a dump */
    tu_resp_free(&r);
    assert_string_equal(str(j, "session_id"), "beta");
    assert_int_equal((int)num(j, "session_total"), 3);
    const cJSON *tr = get(j, "token_ranges");
    assert_int_equal(cJSON_GetArraySize(tr), 3);
    int want[3][2] = {{0, 2}, {3, 7}, {8, 9}};
    for (int i = 0; i < 3; i++) {
        const cJSON *p = cJSON_GetArrayItem(tr, i);
        assert_int_equal(cJSON_GetArrayItem(p, 0)->valueint, want[i][0]);
        assert_int_equal(cJSON_GetArrayItem(p, 1)->valueint, want[i][1]);
    }
    assert_int_equal(cJSON_GetArrayItem(get(j, "layers"), 2)->valueint, 5);
    assert_int_equal(sh_count(j, "scores"), 3);
    cJSON_Delete(j);

    /* session_id as a query parameter on retrieve */
    assert_int_equal(sh_post(&S, "/evict/retrieve?session_id=beta", "{\"query\":\"giraffe feeding\",\"top_k\":1}", &j), 200);
    assert_int_equal(sh_count(j, "chunks"), 1);
    assert_string_equal(str(cJSON_GetArrayItem(get(j, "chunks"), 0), "text"), "giraffe feeding schedule");
    cJSON_Delete(j);
}

static void test_rescue_query_signal(void **st)
{
    /* A long user turn with a "Question:" marker: only the tail is used as the query. */
    char q[4096];
    snprintf(q, sizeof q, "%s%s%sQuestion: %s", FILLER, FILLER, FILLER, QUESTION);
    cJSON *j = retrieve(&S, "alpha", q, 2);
    assert_string_equal(str(j, "query_used"), QUESTION);
    assert_string_equal(str(cJSON_GetArrayItem(get(j, "chunks"), 0), "text"), FACT);
    cJSON_Delete(j);
}

static void test_unknown_session_empty(void **st)
{
    cJSON *j = retrieve(&S, "never-written", "anything", 8);
    assert_int_equal(sh_count(j, "chunks"), 0);
    assert_int_equal((int)num(j, "session_total"), 0);
    assert_string_equal(str(j, "system_message"), "");
    cJSON_Delete(j);
    assert_int_equal(sh_get(&S, "/evict/dump?session_id=never-written", &j), 200);
    assert_int_equal((int)num(j, "session_total"), 0);
    cJSON_Delete(j);
    /* retrieving must not have created it */
    assert_int_equal(sh_get(&S, "/sessions/never-written/hibernation-status", &j), 200);
    assert_false(cJSON_IsTrue(get(j, "in_ram")));
    assert_false(cJSON_IsTrue(get(j, "on_disk")));
    assert_true(cJSON_IsNull(get(j, "embedder_fingerprint")));
    assert_true(cJSON_IsNull(get(j, "hibernated_at")));
    cJSON_Delete(j);
}

static void test_hibernate_resume(void **st)
{
    cJSON *j;
    assert_int_equal(sh_post(&S, "/sessions/alpha/resume", NULL, &j), 200);   /* no snapshot */
    assert_false(cJSON_IsTrue(get(j, "resumed")));
    assert_int_equal((int)num(j, "n_chunks"), 0);
    assert_true(cJSON_IsNull(get(j, "error")));
    cJSON_Delete(j);
    assert_int_equal(sh_post(&S, "/sessions/alpha/hibernate", NULL, &j), 200);
    assert_true(cJSON_IsTrue(get(j, "hibernated")));
    assert_int_equal((int)num(j, "n_chunks"), 6);
    assert_string_equal(str(j, "session_id"), "alpha");
    cJSON_Delete(j);
    assert_int_equal(sh_get(&S, "/sessions/alpha/hibernation-status", &j), 200);
    assert_false(cJSON_IsTrue(get(j, "in_ram")));
    assert_true(cJSON_IsTrue(get(j, "on_disk")));
    assert_int_equal((int)num(j, "n_chunks_on_disk"), 6);
    assert_true(num(j, "hibernated_at") > 1.5e9);
    assert_true(strlen(str(j, "embedder_fingerprint")) > 0);
    cJSON_Delete(j);
    assert_int_equal(sh_get(&S, "/sessions/alpha/hibernation-status", &j), 200);
    assert_false(cJSON_IsTrue(get(j, "in_ram")));
    assert_int_equal((int)num(j, "n_chunks_in_ram"), 0);
    cJSON_Delete(j);
    assert_int_equal(sh_post(&S, "/sessions/alpha/resume", NULL, &j), 200);
    assert_true(cJSON_IsTrue(get(j, "resumed")));
    assert_int_equal((int)num(j, "n_chunks"), 6);
    assert_true(cJSON_IsNull(get(j, "error")));
    cJSON_Delete(j);
    j = retrieve(&S, "alpha", QUESTION, 1);
    assert_string_equal(str(cJSON_GetArrayItem(get(j, "chunks"), 0), "text"), FACT);
    cJSON_Delete(j);
    /* a hibernated session is resumed transparently by a retrieve */
    assert_int_equal(sh_post(&S, "/sessions/alpha/hibernate", NULL, NULL), 200);
    j = retrieve(&S, "alpha", QUESTION, 1);
    assert_string_equal(str(cJSON_GetArrayItem(get(j, "chunks"), 0), "text"), FACT);
    cJSON_Delete(j);
    /* unknown sessions */
    assert_int_equal(sh_post(&S, "/sessions/ghost/hibernate", NULL, &j), 200);
    assert_false(cJSON_IsTrue(get(j, "hibernated")));
    assert_int_equal((int)num(j, "n_chunks"), 0);
    cJSON_Delete(j);
    assert_int_equal(sh_post(&S, "/sessions/ghost/resume", NULL, &j), 200);
    assert_false(cJSON_IsTrue(get(j, "resumed")));
    assert_true(cJSON_IsNull(get(j, "error")));
    cJSON_Delete(j);
}

static void test_status_page(void **st)
{
    cJSON *j;
    assert_int_equal(sh_get(&S, "/longctx/status", &j), 200);
    assert_string_equal(str(j, "version"), LCX_VERSION);
    assert_true(num(j, "sessions_active") >= 1);
    assert_true(num(j, "scopes_loaded") >= 0);
    assert_true(cJSON_IsArray(get(j, "scopes")));
    assert_true(num(j, "memory_mb") >= 0);
    cJSON_Delete(j);
    char url[128];
    snprintf(url, sizeof url, "%s/longctx/status", S.base);
    const char *h[] = {"Accept: text/plain", NULL};
    tu_resp r;
    tu_http("GET", url, NULL, 0, h, &r);
    assert_int_equal(r.status, 200);
    char ct[128];
    assert_int_equal(tu_resp_header(&r, "Content-Type", ct, sizeof ct), 0);
    assert_non_null(strstr(ct, "text/plain"));
    assert_non_null(strstr(r.body, "[longctx] mode: "));
    assert_non_null(strstr(r.body, "[longctx] scope: "));   /* "indexed:" lines come with loaded scopes */
    assert_non_null(strstr(r.body, "[longctx] sessions: "));
    assert_non_null(strstr(r.body, "[longctx] memory: "));
    for (const char *l = r.body; *l;) {        /* every line is a [longctx] line */
        assert_memory_equal(l, "[longctx] ", 10);
        const char *e = strchr(l, '\n');
        assert_non_null(e);
        l = e + 1;
    }
    tu_resp_free(&r);
}

static void test_proxy_disabled(void **st)
{
    cJSON *j;
    assert_int_equal(sh_post(&S, "/v1/chat/completions", "{\"model\":\"x\",\"messages\":[]}", &j), 503);
    sh_assert_error(j, "proxy_disabled");
    cJSON_Delete(j);
    assert_int_equal(sh_get(&S, "/v1/models", &j), 503);
    sh_assert_error(j, "proxy_disabled");
    cJSON_Delete(j);
}

/* ---------------------------------------------------------------- bad input */

typedef struct {
    const char *method, *path, *body;
    long status;
    const char *code;
} bad_case;

static void test_bad_inputs(void **st)
{
    static const bad_case cases[] = {
        {"POST", "/evict/write", "{\"session_id\":\"alpha\",\"chunks\":[", 400, "bad_json"},
        {"POST", "/evict/write", "{\"session_id\":\"alpha\"} trailing", 400, "bad_json"},
        {"POST", "/evict/write", "", 400, "empty_body"},
        {"POST", "/evict/write", "[1,2]", 400, "not_object"},
        {"POST", "/evict/write", "{\"session_id\":42,\"chunks\":[]}", 422, "invalid_type"},
        {"POST", "/evict/write", "{\"chunks\":[{\"text\":\"x\",\"token_range\":[1,2]}]}", 422, "missing_session_id"},
        {"POST", "/evict/write", "{\"session_id\":\"\",\"chunks\":[]}", 400, "invalid_session_id"},
        {"POST", "/evict/write", "{\"session_id\":\"alpha\"}", 422, "missing_field"},
        {"POST", "/evict/write", "{\"session_id\":\"alpha\",\"chunks\":{\"text\":\"x\"}}", 422, "invalid_type"},
        {"POST", "/evict/write", "{\"session_id\":\"alpha\",\"chunks\":\"nope\"}", 422, "invalid_type"},
        {"POST", "/evict/write", "{\"session_id\":\"alpha\",\"chunks\":[5]}", 422, "invalid_type"},
        {"POST", "/evict/write", "{\"session_id\":\"alpha\",\"chunks\":[{\"text\":7,\"token_range\":[1,2]}]}", 422, "invalid_type"},
        {"POST", "/evict/write", "{\"session_id\":\"alpha\",\"chunks\":[{\"token_range\":[1,2]}]}", 422, "missing_field"},
        {"POST", "/evict/write", "{\"session_id\":\"alpha\",\"chunks\":[{\"text\":\"x\"}]}", 422, "missing_field"},
        {"POST", "/evict/write", "{\"session_id\":\"alpha\",\"chunks\":[{\"text\":\"x\",\"token_range\":\"1-2\"}]}", 422, "invalid_type"},
        {"POST", "/evict/write", "{\"session_id\":\"alpha\",\"chunks\":[{\"text\":\"x\",\"token_range\":[1]}]}", 422, "invalid_type"},
        {"POST", "/evict/write", "{\"session_id\":\"alpha\",\"chunks\":[{\"text\":\"x\",\"token_range\":[9,2]}]}", 422, "out_of_range"},
        {"POST", "/evict/write", "{\"session_id\":\"alpha\",\"chunks\":[{\"text\":\"x\",\"token_range\":[1,2],\"layer\":\"3\"}]}", 422, "invalid_type"},
        {"POST", "/evict/write", "{\"session_id\":\"alpha\",\"chunks\":[{\"text\":\"x\",\"token_range\":[1,2],\"score\":\"hi\"}]}", 422, "invalid_type"},
        {"POST", "/evict/write?session_id=alpha", "{\"chunks\":[{\"text\":\"x\",\"tokens\":[1,\"a\"],\"round\":1}]}", 422, "invalid_type"},
        {"POST", "/evict/write?session_id=alpha", "{\"chunks\":[{\"text\":\"x\",\"tokens\":7}]}", 422, "invalid_type"},
        /* all-or-nothing: a valid chunk followed by an invalid one stores nothing */
        {"POST", "/evict/write", "{\"session_id\":\"alpha\",\"chunks\":[{\"text\":\"should not be stored\",\"token_range\":[1,2]},"
                                 "{\"text\":\"y\",\"token_range\":[3]}]}", 422, "invalid_type"},
        {"POST", "/evict/write?session_id=other", "{\"session_id\":\"alpha\",\"chunks\":[]}", 400, "invalid_request"},
        {"POST", "/evict/retrieve", "{\"query\":\"x\"}", 422, "missing_session_id"},
        {"POST", "/evict/retrieve", "{\"session_id\":\"alpha\"}", 422, "missing_field"},
        {"POST", "/evict/retrieve", "{\"session_id\":\"alpha\",\"query\":5}", 422, "invalid_type"},
        {"POST", "/evict/retrieve", "{\"session_id\":\"alpha\",\"query\":\"x\",\"top_k\":0}", 422, "out_of_range"},
        {"POST", "/evict/retrieve", "{\"session_id\":\"alpha\",\"query\":\"x\",\"top_k\":65}", 422, "out_of_range"},
        {"POST", "/evict/retrieve", "{\"session_id\":\"alpha\",\"query\":\"x\",\"top_k\":-3}", 422, "out_of_range"},
        {"POST", "/evict/retrieve", "{\"session_id\":\"alpha\",\"query\":\"x\",\"top_k\":2.5}", 422, "invalid_type"},
        {"POST", "/evict/retrieve", "{\"session_id\":\"alpha\",\"query\":\"x\",\"top_k\":\"8\"}", 422, "invalid_type"},
        {"POST", "/evict/retrieve", "{\"session_id\":\"alpha\",\"query\":\"x\",\"score_floor\":-0.1}", 422, "out_of_range"},
        {"POST", "/evict/retrieve", "{\"session_id\":\"alpha\",\"query\":\"x\",\"score_floor\":1.01}", 422, "out_of_range"},
        {"POST", "/evict/retrieve", "{\"session_id\":\"alpha\",\"query\":\"x\",\"score_floor\":\"0.2\"}", 422, "invalid_type"},
        {"POST", "/evict/retrieve", "{\"session_id\":\"alpha\",\"query\":\"x\",\"hybrid_alpha\":2}", 422, "out_of_range"},
        {"POST", "/evict/retrieve", "{\"session_id\":\"alpha\",\"query\":\"x\",\"use_rerank\":\"yes\"}", 422, "invalid_type"},
        {"POST", "/evict/retrieve", "{\"session_id\":\"alpha\",\"query\":\"x\",\"prefilter\":0}", 422, "out_of_range"},
        {"POST", "/evict/retrieve", "{\"session_id\":\"alpha\",\"query\":\"x\",\"fusion\":\"max\"}", 422, "invalid_type"},
        {"POST", "/evict/retrieve", "nonsense", 400, "bad_json"},
        {"GET", "/evict/dump", NULL, 422, "missing_session_id"},
        {"GET", "/nope", NULL, 404, "not_found"},
        {"POST", "/evict/unknown", "{}", 404, "not_found"},
        {"GET", "/sessions/alpha/explode", NULL, 404, "not_found"},
        {"GET", "/evict/write", NULL, 405, "method_not_allowed"},
        {"POST", "/healthz", "{}", 405, "method_not_allowed"},
        {"DELETE", "/evict/retrieve", NULL, 405, "method_not_allowed"},
        {"GET", "/sessions/alpha/hibernate", NULL, 405, "method_not_allowed"},
        {"POST", "/sessions/alpha/hibernation-status", NULL, 405, "method_not_allowed"},
    };
    cJSON *before;
    assert_int_equal(sh_get(&S, "/evict/dump?session_id=alpha", &before), 200);
    int total_before = (int)num(before, "session_total");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const bad_case *c = &cases[i];
        cJSON *j = NULL;
        long stt = sh_req(&S, c->method, c->path, c->body, c->body ? strlen(c->body) : 0, &j, NULL);
        if (stt != c->status) fprintf(stderr, "case %zu: %s %s %s → %ld\n", i, c->method, c->path, c->body ? c->body : "", stt);
        assert_int_equal(stt, c->status);
        sh_assert_error(j, c->code);
        cJSON_Delete(j);
    }
    /* non-UTF-8 bytes, in the body and inside a JSON string */
    const char bad1[] = "{\"session_id\":\"alpha\",\"chunks\":[{\"text\":\"caf\xe9\",\"token_range\":[1,2]}]}";
    cJSON *j;
    assert_int_equal(sh_req(&S, "POST", "/evict/write", bad1, sizeof bad1 - 1, &j, NULL), 400);
    sh_assert_error(j, "invalid_utf8");
    cJSON_Delete(j);
    const char bad2[] = "{\"session_id\":\"alpha\",\"query\":\"\xc3\x28\"}";
    assert_int_equal(sh_req(&S, "POST", "/evict/retrieve", bad2, sizeof bad2 - 1, &j, NULL), 400);
    sh_assert_error(j, "invalid_utf8");
    cJSON_Delete(j);
    const char bad3[] = "{\"session_id\":\"al\xffpha\",\"query\":\"x\"}";
    assert_int_equal(sh_req(&S, "POST", "/evict/retrieve", bad3, sizeof bad3 - 1, &j, NULL), 400);
    sh_assert_error(j, "invalid_utf8");
    cJSON_Delete(j);
    const char bad4[] = "{\"session_id\":\"alpha\",\"chunks\":[{\"text\":\"a\0b\",\"token_range\":[1,2]}]}";
    assert_int_equal(sh_req(&S, "POST", "/evict/write", bad4, sizeof bad4 - 1, &j, NULL), 400);
    sh_assert_error(j, "bad_json");
    cJSON_Delete(j);

    /* server still up, nothing lost, nothing half-written */
    assert_true(tu_wait_http(S.port, "/healthz", 1000));
    cJSON *after;
    assert_int_equal(sh_get(&S, "/evict/dump?session_id=alpha", &after), 200);
    assert_int_equal((int)num(after, "session_total"), total_before);
    cJSON_Delete(after);
    cJSON_Delete(before);
    j = retrieve(&S, "alpha", QUESTION, 8);
    assert_string_equal(str(cJSON_GetArrayItem(get(j, "chunks"), 0), "text"), FACT);
    for (int i = 0; i < sh_count(j, "chunks"); i++)
        assert_string_not_equal(str(cJSON_GetArrayItem(get(j, "chunks"), i), "text"), "should not be stored");
    cJSON_Delete(j);
}


/* The /evict/write fast path hands everything unusual to the general (cJSON) path: the
 * answers below are the general path's exact ones, and valid edge cases are stored as
 * cJSON reads them. */
static void expect_error(const char *body, long status, const char *code, const char *message)
{
    cJSON *j = NULL;
    long stt = sh_req(&S, "POST", "/evict/write", body, strlen(body), &j, NULL);
    if (stt != status) fprintf(stderr, "%s → %ld\n", body, stt);
    assert_int_equal(stt, status);
    sh_assert_error(j, code);
    if (message) assert_string_equal(str(get(j, "error"), "message"), message);
    cJSON_Delete(j);
}

static void test_write_json_edges(void **st)
{
    expect_error("{\"session_id\":\"edge\",\"chunks\":[{\"text\":\"x\",\"token_range\":[1,2],\"score\":1e999}]}", 422,
                 "invalid_type", "'score' must be a number");
    expect_error("{\"session_id\":\"edge\",\"chunks\":[{\"text\":\"x\",\"token_range\":[1,2],\"layer\":2147483648}]}", 422,
                 "out_of_range", "'layer' must be in -1..2147483647 (got 2147483648)");
    expect_error("{\"session_id\":\"edge\",\"chunks\":[{\"text\":\"x\",\"token_range\":[0,1e20]}]}", 422, "out_of_range",
                 "chunks[0].token_range needs 0 <= start <= end < 2^53");
    expect_error("{\"session_id\":\"edge\",\"chunks\":[{\"text\":\"ok\",\"token_range\":[0,1]},{\"text\":\"x\",\"tokens\":[1,-2]}]}",
                 422, "invalid_type", "chunks[1].tokens[1] must be a non-negative integer");
    expect_error("{\"session_id\":\"edge\",\"chunks\":[{\"text\":\"\\ud800 lone\",\"token_range\":[1,2]}]}", 400, "bad_json", NULL);
    expect_error("{\"session_id\":\"edge\",\"chunks\":[{\"text\":\"\\udc00 lone\",\"token_range\":[1,2]}]}", 400, "bad_json", NULL);
    expect_error("{\"session_id\":\"edge\",\"chunks\":[{\"text\":\"x\",\"token_range\":[1,2]}],\"k\":tru}", 400, "bad_json", NULL);
    /* nesting: 2000 levels is past cJSON's limit (bad_json); 100 levels is fine */
    char *deep = malloc(4200);
    size_t o = (size_t)sprintf(deep, "{\"session_id\":\"edge\",\"z\":");
    for (int i = 0; i < 2000; i++) deep[o++] = '[';
    for (int i = 0; i < 2000; i++) deep[o++] = ']';
    sprintf(deep + o, ",\"chunks\":[]}");
    expect_error(deep, 400, "bad_json", NULL);
    o = (size_t)sprintf(deep, "{\"session_id\":\"edge\",\"z\":");
    for (int i = 0; i < 100; i++) deep[o++] = '[';
    for (int i = 0; i < 100; i++) deep[o++] = ']';
    sprintf(deep + o, ",\"chunks\":[{\"text\":\"deep nesting ignored member\",\"token_range\":[0,3]}]}");
    assert_int_equal(sh_post(&S, "/evict/write", deep, NULL), 200);
    free(deep);
    /* escapes incl. a surrogate pair (fast path) and a duplicate key (general path: first wins) */
    assert_int_equal(sh_post(&S, "/evict/write",
                             "{\"session_id\":\"edge\",\"chunks\":[{\"text\":\"rocket \\ud83d\\ude80 caf\\u00e9 \\\"q\\\" quasar\","
                             "\"token_range\":[10,20],\"layer\":1e1}]}", NULL), 200);
    assert_int_equal(sh_post(&S, "/evict/write",
                             "{\"session_id\":\"edge\",\"chunks\":[{\"text\":\"first pulsar\",\"text\":\"second pulsar\","
                             "\"token_range\":[30,40]}]}", NULL), 200);
    cJSON *j = retrieve(&S, "edge", "quasar", 1);
    const cJSON *c0 = cJSON_GetArrayItem(get(j, "chunks"), 0);
    assert_string_equal(str(c0, "text"), "rocket \xf0\x9f\x9a\x80 caf\xc3\xa9 \"q\" quasar");
    assert_int_equal((int)num(c0, "layer"), 10);
    cJSON_Delete(j);
    j = retrieve(&S, "edge", "pulsar", 1);
    assert_string_equal(str(cJSON_GetArrayItem(get(j, "chunks"), 0), "text"), "first pulsar");
    cJSON_Delete(j);
}

/* Unicode text round-trips byte for byte; the system message counts characters. */
static void test_unicode_roundtrip(void **st)
{
    const char *t = "Ünïcödé spän — 日本語のテキスト 🚀 code 90210-ALPHA";
    char body[1024];
    snprintf(body, sizeof body, "{\"session_id\":\"uni\",\"chunks\":[{\"text\":\"%s\",\"token_range\":[5,9],\"layer\":1,\"score\":1}]}", t);
    assert_int_equal(sh_post(&S, "/evict/write", body, NULL), 200);
    cJSON *j = retrieve(&S, "uni", "90210-ALPHA", 1);
    assert_string_equal(str(cJSON_GetArrayItem(get(j, "chunks"), 0), "text"), t);
    assert_non_null(strstr(str(j, "system_message"), t));
    cJSON_Delete(j);
    /* characters JSON must escape survive the round trip (request → store → response) */
    const char *esc_body = "{\"session_id\":\"uni\",\"chunks\":[{\"text\":\"say \\\"quoted\\\" back\\\\slash\\nnew\\tline \\u0001 "
                           "zanzibar\",\"token_range\":[10,11]}]}";
    assert_int_equal(sh_post(&S, "/evict/write", esc_body, NULL), 200);
    j = retrieve(&S, "uni", "zanzibar quoted", 1);
    assert_string_equal(str(cJSON_GetArrayItem(get(j, "chunks"), 0), "text"), "say \"quoted\" back\\slash\nnew\tline \x01 zanzibar");
    assert_non_null(strstr(str(j, "system_message"), "say \"quoted\" back\\slash\nnew\tline \x01 zanzibar\n"));
    cJSON_Delete(j);
}

/* Concurrent writers on shared and private sessions: every acknowledged chunk counted. */
typedef struct { int id; int ok; } wargs;
static void *writer(void *p)
{
    wargs *a = p;
    for (int i = 0; i < 20; i++) {
        char body[512];
        snprintf(body, sizeof body, "{\"session_id\":\"%s\",\"chunks\":[{\"text\":\"writer %d item %d\",\"token_range\":[%d,%d]},"
                 "{\"text\":\"writer %d second %d\",\"token_range\":[%d,%d]}]}",
                 (i & 1) ? "shared" : (a->id == 0 ? "w0" : a->id == 1 ? "w1" : a->id == 2 ? "w2" : "w3"), a->id, i, i, i,
                 a->id, i, i, i);
        char url[128];
        snprintf(url, sizeof url, "%s/evict/write", S.base);
        tu_resp r;
        tu_http("POST", url, body, strlen(body), NULL, &r);
        if (r.status == 200) a->ok++;
        tu_resp_free(&r);
    }
    return NULL;
}

static void test_concurrent_writes(void **st)
{
    pthread_t th[4];
    wargs a[4] = {{0, 0}, {1, 0}, {2, 0}, {3, 0}};
    for (int i = 0; i < 4; i++) pthread_create(&th[i], NULL, writer, &a[i]);
    for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
    for (int i = 0; i < 4; i++) assert_int_equal(a[i].ok, 20);
    cJSON *j;
    assert_int_equal(sh_get(&S, "/evict/dump?session_id=shared", &j), 200);
    assert_int_equal((int)num(j, "session_total"), 4 * 10 * 2);
    cJSON_Delete(j);
    assert_int_equal(sh_get(&S, "/evict/dump?session_id=w2", &j), 200);
    assert_int_equal((int)num(j, "session_total"), 10 * 2);
    cJSON_Delete(j);
}

/* Stop (SIGTERM, clean) and restart on the same data dir: everything is still there. */
static void test_restart_persistence(void **st)
{
    int w = sh_stop(&S, SIGTERM);
    assert_true(WIFEXITED(w));
    assert_int_equal(WEXITSTATUS(w), 0);
    char *dir = strdup(S.data_dir);
    free(S.data_dir);
    S.data_dir = NULL;
    sh_start(&S, dir, NULL, NULL);
    free(dir);
    cJSON *j = retrieve(&S, "alpha", QUESTION, 1);
    assert_int_equal((int)num(j, "session_total"), 6);
    assert_string_equal(str(cJSON_GetArrayItem(get(j, "chunks"), 0), "text"), FACT);
    cJSON_Delete(j);
    /* the form-B position cursor continues after a restart */
    assert_int_equal(sh_post(&S, "/evict/write?session_id=beta", "{\"chunks\":[{\"text\":\"tapir\",\"tokens\":[1,2,3,4]}]}", NULL), 200);
    assert_int_equal(sh_get(&S, "/evict/dump?session_id=beta", &j), 200);
    const cJSON *last = cJSON_GetArrayItem(get(j, "token_ranges"), 3);
    assert_int_equal(cJSON_GetArrayItem(last, 0)->valueint, 10);
    assert_int_equal(cJSON_GetArrayItem(last, 1)->valueint, 13);
    cJSON_Delete(j);
}

/* ---------------------------------------------------------------- limits (own server) */

static void test_limits(void **st)
{
    sh_server L;
    const char *extra[] = {"--max-body-bytes", "4096", "--max-chunk-bytes", "100", "--max-sessions", "2",
                           "--max-chunks-per-session", "6", NULL};
    const char *env[] = {"LONGCTX_MAX_CHUNKS_PER_REQUEST=4", NULL};   /* env equivalent of a flag */
    sh_start(&L, NULL, extra, env);
    cJSON *j;
    assert_int_equal(sh_post(&L, "/evict/write", "{\"session_id\":\"a\",\"chunks\":[{\"text\":\"keep me\",\"token_range\":[0,1]}]}", &j), 200);
    cJSON_Delete(j);
    /* body over the cap */
    size_t n = 5000;
    char *big = malloc(n + 1);
    memset(big, ' ', n);
    memcpy(big, "{\"session_id\":\"a\",\"chunks\":[]", 29);
    big[n - 1] = '}';
    big[n] = 0;
    assert_int_equal(sh_req(&L, "POST", "/evict/write", big, n, &j, NULL), 413);
    sh_assert_error(j, "payload_too_large");
    cJSON_Delete(j);
    free(big);
    /* chunk text over the cap */
    char body[2048];
    char t[201];
    memset(t, 'x', 200);
    t[200] = 0;
    snprintf(body, sizeof body, "{\"session_id\":\"a\",\"chunks\":[{\"text\":\"%s\",\"token_range\":[0,1]}]}", t);
    assert_int_equal(sh_post(&L, "/evict/write", body, &j), 413);
    sh_assert_error(j, "chunk_too_large");
    cJSON_Delete(j);
    /* too many chunks in one request (LONGCTX_MAX_CHUNKS_PER_REQUEST=4) */
    const char *five = "{\"session_id\":\"a\",\"chunks\":[{\"text\":\"1\",\"token_range\":[0,1]},{\"text\":\"2\",\"token_range\":[0,1]},"
                       "{\"text\":\"3\",\"token_range\":[0,1]},{\"text\":\"4\",\"token_range\":[0,1]},{\"text\":\"5\",\"token_range\":[0,1]}]}";
    assert_int_equal(sh_post(&L, "/evict/write", five, &j), 413);
    sh_assert_error(j, "too_many_chunks");
    cJSON_Delete(j);
    /* sessions: a exists, b is the second, c is refused */
    assert_int_equal(sh_post(&L, "/evict/write", "{\"session_id\":\"b\",\"chunks\":[{\"text\":\"bee\",\"token_range\":[0,1]}]}", NULL), 200);
    assert_int_equal(sh_post(&L, "/evict/write", "{\"session_id\":\"c\",\"chunks\":[{\"text\":\"sea\",\"token_range\":[0,1]}]}", &j), 429);
    sh_assert_error(j, "too_many_sessions");
    cJSON_Delete(j);
    /* chunks per session (6): a has 1, +4 ok, +2 refused */
    const char *four = "{\"session_id\":\"a\",\"chunks\":[{\"text\":\"1\",\"token_range\":[0,1]},{\"text\":\"2\",\"token_range\":[0,1]},"
                       "{\"text\":\"3\",\"token_range\":[0,1]},{\"text\":\"4\",\"token_range\":[0,1]}]}";
    assert_int_equal(sh_post(&L, "/evict/write", four, NULL), 200);
    const char *two = "{\"session_id\":\"a\",\"chunks\":[{\"text\":\"6\",\"token_range\":[0,1]},{\"text\":\"7\",\"token_range\":[0,1]}]}";
    assert_int_equal(sh_post(&L, "/evict/write", two, &j), 429);
    sh_assert_error(j, "session_full");
    cJSON_Delete(j);
    /* still healthy, data intact */
    assert_int_equal(sh_get(&L, "/evict/dump?session_id=a", &j), 200);
    assert_int_equal((int)num(j, "session_total"), 5);
    cJSON_Delete(j);
    assert_int_equal(sh_post(&L, "/evict/retrieve", "{\"session_id\":\"a\",\"query\":\"keep me\",\"top_k\":1}", &j), 200);
    assert_string_equal(str(cJSON_GetArrayItem(get(j, "chunks"), 0), "text"), "keep me");
    cJSON_Delete(j);
    sh_stop(&L, SIGTERM);
    sh_cleanup(&L);
}

/* --max-inflight-body-mb: a slow upload holding 900 KB + a 300 KB request > 1 MiB → 429
 * server_busy; once the slow client goes away the same request is accepted. */
static void test_inflight_body_cap(void **st)
{
    sh_server B;
    const char *extra[] = {"--max-inflight-body-mb", "1", "--max-body-bytes", "2000000", NULL};
    sh_start(&B, NULL, extra, NULL);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)B.port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    const char *hdr = "POST /evict/write HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1500000\r\n\r\n";
    assert_true(write(fd, hdr, strlen(hdr)) == (ssize_t)strlen(hdr));
    char *part = malloc(900000);
    memset(part, ' ', 900000);
    size_t sent = 0;
    while (sent < 900000) {
        ssize_t w = write(fd, part + sent, 900000 - sent);
        assert_true(w > 0);
        sent += (size_t)w;
    }
    free(part);
    usleep(500000);                                   /* let the server buffer it */
    size_t tl = 300000;
    char *body = malloc(tl + 200);
    int o = sprintf(body, "{\"session_id\":\"busy\",\"chunks\":[{\"text\":\"");
    memset(body + o, 'q', tl);
    sprintf(body + o + tl, "\",\"token_range\":[0,1]}]}");
    cJSON *j;
    tu_resp r;
    assert_int_equal(sh_req(&B, "POST", "/evict/write", body, strlen(body), &j, &r), 429);
    sh_assert_error(j, "server_busy");
    char ra[16];
    assert_int_equal(tu_resp_header(&r, "Retry-After", ra, sizeof ra), 0);
    tu_resp_free(&r);
    cJSON_Delete(j);
    close(fd);                                        /* the slow client gives up */
    long stt = 0;
    for (int i = 0; i < 100 && stt != 200; i++) {     /* its bytes are released */
        usleep(50000);
        stt = sh_req(&B, "POST", "/evict/write", body, strlen(body), NULL, NULL);
    }
    assert_int_equal(stt, 200);
    free(body);
    sh_stop(&B, SIGTERM);
    sh_cleanup(&B);
}

static void test_port_in_use(void **st)
{
    char port[16], log[4200];
    snprintf(port, sizeof port, "%d", S.port);
    char *dir = tu_tmpdir();
    snprintf(log, sizeof log, "%s.log", dir);
    const char *argv[] = {tu_bin("longctx-svc"), "serve", "--host", "127.0.0.1", "--port", port, "--data-dir", dir, NULL};
    pid_t pid = tu_spawn((char *const *)argv, NULL, log);
    int w = tu_kill_wait(pid, 0, 10000);
    assert_true(WIFEXITED(w));
    assert_int_equal(WEXITSTATUS(w), 1);
    char *out = NULL;
    char cmd[4300];
    snprintf(cmd, sizeof cmd, "cat '%s'", log);
    tu_run(cmd, &out);
    assert_non_null(strstr(out, "already in use"));
    free(out);
    unlink(log);
    tu_rmrf(dir);
    free(dir);
    assert_true(tu_wait_http(S.port, "/healthz", 1000));   /* the first server is unaffected */
}

static void test_cli(void **st)
{
    char cmd[4300], *out = NULL;
    snprintf(cmd, sizeof cmd, "'%s' serve --help", tu_bin("longctx-svc"));
    assert_int_equal(tu_run(cmd, &out), 0);
    assert_non_null(strstr(out, "--host"));
    assert_non_null(strstr(out, "--port"));
    assert_non_null(strstr(out, "--data-dir"));
    assert_non_null(strstr(out, "LONGCTX_DATA_DIR"));
    assert_non_null(strstr(out, "--idle-hibernate-s"));
    free(out);
    snprintf(cmd, sizeof cmd, "'%s' --version", tu_bin("longctx-svc"));
    assert_int_equal(tu_run(cmd, &out), 0);
    assert_non_null(strstr(out, LCX_VERSION));
    free(out);
    snprintf(cmd, sizeof cmd, "'%s' serve --no-such-flag 2>&1", tu_bin("longctx-svc"));
    assert_int_equal(tu_run(cmd, &out), 2);
    assert_non_null(strstr(out, "unknown flag"));
    free(out);
    snprintf(cmd, sizeof cmd, "'%s' serve --port 99999 2>&1", tu_bin("longctx-svc"));
    assert_int_equal(tu_run(cmd, &out), 2);
    free(out);
    if (access(tu_bin("longctx"), X_OK) == 0) {   /* `longctx serve` is the same code */
        snprintf(cmd, sizeof cmd, "'%s' serve --help", tu_bin("longctx"));
        assert_int_equal(tu_run(cmd, &out), 0);
        assert_non_null(strstr(out, "--data-dir"));
        free(out);
    } else {
        fprintf(stderr, "note: longctx CLI not built; `longctx serve --help` not checked\n");
    }
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_ALL);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_healthz),
        cmocka_unit_test(test_write_retrieve_form_a),
        cmocka_unit_test(test_retrieve_options),
        cmocka_unit_test(test_form_b_and_dump),
        cmocka_unit_test(test_rescue_query_signal),
        cmocka_unit_test(test_unknown_session_empty),
        cmocka_unit_test(test_hibernate_resume),
        cmocka_unit_test(test_status_page),
        cmocka_unit_test(test_proxy_disabled),
        cmocka_unit_test(test_bad_inputs),
        cmocka_unit_test(test_unicode_roundtrip),
        cmocka_unit_test(test_concurrent_writes),
        cmocka_unit_test(test_restart_persistence),
        cmocka_unit_test(test_limits),
        cmocka_unit_test(test_inflight_body_cap),
        cmocka_unit_test(test_write_json_edges),
        cmocka_unit_test(test_port_in_use),
        cmocka_unit_test(test_cli),
    };
    int rc = cmocka_run_group_tests(tests, setup, teardown);
    curl_global_cleanup();
    return rc;
}
