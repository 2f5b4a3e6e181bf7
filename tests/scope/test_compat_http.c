/* Conformance with the reference service over HTTP (docs/compat.md): no-scope replies and
 * the headers on every 200, explicit scopes, scope_status values (empty, indexing via
 * x-longctx-async), path clusters across turns, workspace binding and merging, the status
 * route's fields. Against
 * the real longctx-svc binary. */
#include "testutil.h"
#if defined(__GNUC__) && !defined(__clang__)   /* gcc-only warning */
#pragma GCC diagnostic ignored "-Wformat-truncation"
#endif
#include <cjson/cJSON.h>
#include <limits.h>
#include <stdbool.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static tu_svc g_svc;
static int g_port;
static char g_root[PATH_MAX];   /* under /tmp: one of the reference's path prefixes */

static void wr(const char *rel, const char *text)
{
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s/%s", g_root, rel);
    assert_int_equal(tu_write(p, text, strlen(text)), 0);
}

static long post(const char *body, const char *const *extra, cJSON **j, tu_resp *keep)
{
    char url[256];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/retrieve", g_port);
    const char *h[8] = {"Content-Type: application/json"};
    int n = 1;
    for (int i = 0; extra && extra[i] && n < 7; i++) h[n++] = extra[i];
    h[n] = NULL;
    tu_resp r;
    tu_http("POST", url, body, strlen(body), h, &r);
    if (j) *j = cJSON_Parse(r.body);
    long st = r.status;
    if (keep) *keep = r;
    else tu_resp_free(&r);
    return st;
}

static const cJSON *get(const cJSON *o, const char *k) { return cJSON_GetObjectItemCaseSensitive(o, k); }
static const char *jstr(const cJSON *o, const char *k)
{
    const cJSON *x = get(o, k);
    return cJSON_IsString(x) ? x->valuestring : NULL;
}
static int nchunks(const cJSON *j) { return cJSON_GetArraySize(get(j, "chunks")); }

static void hdr(const tu_resp *r, const char *name, const char *want)
{
    char v[PATH_MAX];
    if (tu_resp_header(r, name, v, sizeof v) != 0) {
        if (want && !*want) return;   /* an empty value: the test client cannot tell it from absent */
        fail_msg("header %s missing", name);
    }
    if (want && strcmp(v, want)) fail_msg("header %s: [%s], want [%s]", name, v, want);
}

static int setup(void **st)
{
    (void)st;
    char tmpl[] = "/tmp/lcxcompat.XXXXXX";
    if (!mkdtemp(tmpl) || !realpath(tmpl, g_root)) return -1;
    wr("alpha/.git/HEAD", "ref\n");
    wr("alpha/src/http.c", "int parse_header(const char *line)\n{\n    return line[0] == ':';\n}\n");
    wr("alpha/src/util.c", "int util_alpha(void) { return 1; }\n");
    wr("beta/.git/HEAD", "ref\n");
    wr("beta/main.go", "package main\nfunc ServeWombat() {\n}\n");
    wr("empty/.git/HEAD", "ref\n");
    wr("empty/node_modules/dep.js", "module.exports = 1;\n");   /* skipped by the walk */
    wr("lazy/.git/HEAD", "ref\n");
    wr("lazy/src/lazy.c", "int lazy_loader_function(void) { return 42; }\n");
    for (int i = 0; i < 5; i++) {   /* no sentinel anywhere above: only a cluster names it */
        char rel[64], txt[128];
        snprintf(rel, sizeof rel, "loose/pkg/mod/f%d.py", i);
        snprintf(txt, sizeof txt, "def cluster_function_%d():\n    return %d\n", i, i);
        wr(rel, txt);
    }
    if (tu_svc_start(&g_svc) < 0) return -1;
    g_port = g_svc.port;
    return 0;
}

static int teardown(void **st)
{
    (void)st;
    tu_svc_stop(&g_svc);
    tu_rmrf(g_root);
    return 0;
}

static void expect_no_scope(const cJSON *j, const tu_resp *r, const char *path_or_null)
{
    assert_int_equal(nchunks(j), 0);
    if (path_or_null) assert_string_equal(jstr(j, "scope_path"), path_or_null);
    else assert_true(cJSON_IsNull(get(j, "scope_path")));
    assert_true(cJSON_IsNull(get(j, "scope_hash")));
    if (path_or_null) assert_string_equal(jstr(j, "scope_sentinel"), "workspace");
    else assert_true(cJSON_IsNull(get(j, "scope_sentinel")));
    assert_string_equal(jstr(j, "scope_status"), "no-scope");
    assert_true(cJSON_IsFalse(get(j, "used_rerank")));
    assert_int_equal(get(j, "paraphrases_count")->valueint, 0);
    hdr(r, "x-longctx-scope", path_or_null ? path_or_null : "");
    hdr(r, "x-longctx-chunks-used", "0");
    hdr(r, "x-longctx-scope-status", "no-scope");
    char v[64];
    assert_int_not_equal(tu_resp_header(r, "x-longctx-confidence", v, sizeof v), 0);   /* nothing ran */
}

static void test_no_scope_replies(void **st)
{
    (void)st;
    cJSON *j;
    tu_resp r;
    /* no path; a default_scope alone never pins a scope */
    char body[PATH_MAX * 2];
    snprintf(body, sizeof body, "{\"prefill_text\":\"hello\",\"query\":\"parse_header\",\"default_scope\":\"%s/alpha\"}", g_root);
    assert_int_equal(post(body, NULL, &j, &r), 200);
    expect_no_scope(j, &r, NULL);
    assert_true(cJSON_IsNull(get(j, "session_id")));
    hdr(&r, "x-longctx-session", "ephemeral");
    tu_resp_free(&r);
    cJSON_Delete(j);
    /* an empty explicit_scope counts as absent */
    assert_int_equal(post("{\"query\":\"x\",\"explicit_scope\":\"\",\"session_id\":\"n1\"}", NULL, &j, &r), 200);
    expect_no_scope(j, &r, NULL);
    assert_string_equal(jstr(j, "session_id"), "n1");
    hdr(&r, "x-longctx-session", "n1");
    tu_resp_free(&r);
    cJSON_Delete(j);
    /* ws: without a session, or with a session that bound nothing */
    assert_int_equal(post("{\"query\":\"x\",\"explicit_scope\":\"ws:\"}", NULL, &j, &r), 200);
    expect_no_scope(j, &r, "ws:");
    tu_resp_free(&r);
    cJSON_Delete(j);
    assert_int_equal(post("{\"query\":\"x\",\"explicit_scope\":\"ws:\",\"session_id\":\"never\"}", NULL, &j, &r), 200);
    expect_no_scope(j, &r, "ws:");
    tu_resp_free(&r);
    cJSON_Delete(j);
}

static void test_explicit_and_empty(void **st)
{
    (void)st;
    cJSON *j;
    tu_resp r;
    char body[PATH_MAX * 2], want[PATH_MAX];
    /* used as given: '..' and the trailing '/' resolved; sentinel "explicit" */
    snprintf(body, sizeof body, "{\"query\":\"parse_header\",\"explicit_scope\":\"%s/beta/../alpha/\"}", g_root);
    assert_int_equal(post(body, NULL, &j, &r), 200);
    snprintf(want, sizeof want, "%s/alpha", g_root);
    assert_string_equal(jstr(j, "scope_path"), want);
    assert_string_equal(jstr(j, "scope_sentinel"), "explicit");
    assert_string_equal(jstr(j, "scope_status"), "ready");
    assert_true(nchunks(j) >= 1);
    hdr(&r, "x-longctx-scope", want);
    hdr(&r, "x-longctx-scope-status", "ready");
    char v[64];
    assert_int_equal(tu_resp_header(&r, "x-longctx-confidence", v, sizeof v), 0);
    char first[64];   /* the first chunk's score, 3 decimals */
    snprintf(first, sizeof first, "%.3f", get(cJSON_GetArrayItem(get(j, "chunks"), 0), "score")->valuedouble);
    assert_string_equal(v, first);
    tu_resp_free(&r);
    cJSON_Delete(j);
    /* a project with nothing indexable: "empty", confidence 0.000 */
    snprintf(body, sizeof body, "{\"query\":\"dep\",\"prefill_text\":\"see %s/empty/node_modules/dep.js\"}", g_root);
    assert_int_equal(post(body, NULL, &j, &r), 200);
    assert_string_equal(jstr(j, "scope_status"), "empty");
    assert_string_equal(jstr(j, "scope_sentinel"), ".git");
    assert_int_equal(nchunks(j), 0);
    hdr(&r, "x-longctx-confidence", "0.000");
    tu_resp_free(&r);
    cJSON_Delete(j);
}

static void test_async_indexing(void **st)
{
    (void)st;
    cJSON *j;
    tu_resp r;
    char body[PATH_MAX * 2];
    snprintf(body, sizeof body, "{\"query\":\"lazy_loader_function\",\"prefill_text\":\"open %s/lazy/src/lazy.c\"}", g_root);
    const char *async[] = {"x-longctx-async: yes", NULL};
    assert_int_equal(post(body, async, &j, &r), 200);
    assert_string_equal(jstr(j, "scope_status"), "indexing");
    assert_int_equal(nchunks(j), 0);
    assert_int_equal(strlen(jstr(j, "scope_hash")), 16);
    hdr(&r, "x-longctx-scope-status", "indexing");
    tu_resp_free(&r);
    cJSON_Delete(j);
    /* the build finishes in the background (bounded polling, no timing assertion) */
    bool ready = false;
    for (int i = 0; i < 400 && !ready; i++) {
        assert_int_equal(post(body, async, &j, NULL), 200);
        ready = !strcmp(jstr(j, "scope_status"), "ready");
        if (ready) assert_true(nchunks(j) >= 1);
        else assert_string_equal(jstr(j, "scope_status"), "indexing");
        cJSON_Delete(j);
        if (!ready) usleep(25000);
    }
    assert_true(ready);
}

static void test_clusters_across_turns(void **st)
{
    (void)st;
    cJSON *j;
    tu_resp r;
    char body[PATH_MAX * 4], want[PATH_MAX];
    const char *R = g_root;
    snprintf(want, sizeof want, "%s/loose/pkg/mod", R);
    /* turn 1: three files of a directory with no sentinel: no scope yet (a candidate) */
    snprintf(body, sizeof body, "{\"session_id\":\"cl\",\"query\":\"cluster_function_1\",\"prefill_text\":"
             "\"%s/loose/pkg/mod/f0.py %s/loose/pkg/mod/f1.py %s/loose/pkg/mod/f2.py\"}", R, R, R);
    assert_int_equal(post(body, NULL, &j, NULL), 200);
    assert_string_equal(jstr(j, "scope_status"), "no-scope");
    cJSON_Delete(j);
    /* turn 2: a fresh mention makes it active: the directory is the scope */
    snprintf(body, sizeof body, "{\"session_id\":\"cl\",\"query\":\"cluster_function_3\",\"prefill_text\":"
             "\"and %s/loose/pkg/mod/f3.py\"}", R);
    assert_int_equal(post(body, NULL, &j, NULL), 200);
    assert_string_equal(jstr(j, "scope_path"), want);
    assert_string_equal(jstr(j, "scope_sentinel"), "cluster");
    assert_true(nchunks(j) >= 1);
    cJSON_Delete(j);
    /* turn 3 names no path: still the conversation's project */
    assert_int_equal(post("{\"session_id\":\"cl\",\"query\":\"cluster_function_4\",\"prefill_text\":\"what else?\"}",
                          NULL, &j, &r), 200);
    assert_string_equal(jstr(j, "scope_path"), want);
    assert_true(nchunks(j) >= 1);
    assert_non_null(strstr(jstr(cJSON_GetArrayItem(get(j, "chunks"), 0), "file_path"), "/loose/pkg/mod/"));
    hdr(&r, "x-longctx-scope", want);
    tu_resp_free(&r);
    cJSON_Delete(j);
    /* another session has no cluster */
    assert_int_equal(post("{\"session_id\":\"other\",\"query\":\"cluster_function_4\",\"prefill_text\":\"what else?\"}",
                          NULL, &j, NULL), 200);
    assert_string_equal(jstr(j, "scope_status"), "no-scope");
    cJSON_Delete(j);
}

static void test_workspace(void **st)
{
    (void)st;
    cJSON *j;
    tu_resp r;
    char body[PATH_MAX * 4], a[PATH_MAX], b[PATH_MAX];
    const char *R = g_root;
    snprintf(a, sizeof a, "%s/alpha", R);
    snprintf(b, sizeof b, "%s/beta", R);
    /* beta loaded (explicit index), then one turn naming both projects (alpha twice) */
    char url[PATH_MAX + 64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/index?scope=%s", g_port, b);
    tu_resp ri;
    tu_http("POST", url, NULL, 0, NULL, &ri);
    assert_int_equal(ri.status, 200);
    tu_resp_free(&ri);
    snprintf(body, sizeof body, "{\"session_id\":\"ws1\",\"query\":\"parse_header\",\"prefill_text\":"
             "\"%s/src/http.c %s/src/util.c and %s/main.go\"}", a, a, b);
    assert_int_equal(post(body, NULL, &j, NULL), 200);
    assert_string_equal(jstr(j, "scope_path"), a);
    cJSON_Delete(j);
    /* ws: ignores prefill and default_scope, searches both, merges by score, cuts to top_k */
    snprintf(body, sizeof body, "{\"session_id\":\"ws1\",\"query\":\"parse_header ServeWombat\",\"explicit_scope\":\"ws:\","
             "\"top_k\":3,\"prefill_text\":\"%s/src/http.c\",\"default_scope\":\"%s\"}", R, R);
    assert_int_equal(post(body, NULL, &j, &r), 200);
    assert_string_equal(jstr(j, "scope_path"), "ws:");
    assert_true(cJSON_IsNull(get(j, "scope_hash")));
    assert_string_equal(jstr(j, "scope_sentinel"), "workspace");
    assert_string_equal(jstr(j, "scope_status"), "ready");
    hdr(&r, "x-longctx-scope", "ws:");
    tu_resp_free(&r);
    int n = nchunks(j);
    assert_true(n >= 2 && n <= 3);
    bool in_a = false, in_b = false;
    double prev = 2;
    for (int i = 0; i < n; i++) {
        const cJSON *c = cJSON_GetArrayItem(get(j, "chunks"), i);
        const char *fp = jstr(c, "file_path");
        in_a |= !strncmp(fp, a, strlen(a));
        in_b |= !strncmp(fp, b, strlen(b));
        double sc = get(c, "score")->valuedouble;
        assert_true(sc <= prev);
        prev = sc;
    }
    assert_true(in_a && in_b);
    cJSON_Delete(j);
    /* a non-ws explicit scope binds only itself */
    snprintf(body, sizeof body, "{\"session_id\":\"ws2\",\"query\":\"x\",\"explicit_scope\":\"%s\",\"prefill_text\":\"%s/main.go\"}",
             a, b);
    assert_int_equal(post(body, NULL, NULL, NULL), 200);
    assert_int_equal(post("{\"session_id\":\"ws2\",\"query\":\"ServeWombat parse_header\",\"explicit_scope\":\"ws:\"}",
                          NULL, &j, NULL), 200);
    for (int i = 0; i < nchunks(j); i++)
        assert_int_equal(strncmp(jstr(cJSON_GetArrayItem(get(j, "chunks"), i), "file_path"), a, strlen(a)), 0);
    assert_true(nchunks(j) >= 1);
    cJSON_Delete(j);
}

static void status_get(bool text, tu_resp *r)
{
    char url[256];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/longctx/status", g_port);
    const char *h[] = {text ? "Accept: text/plain" : "Accept: application/json", NULL};
    tu_http("GET", url, NULL, 0, h, r);
    assert_int_equal(r->status, 200);
}

/* /longctx/status as the reference has it: mode, scopes_total, per-scope memory_mb,
 * least recently used first; the text form's session and disk-cache lines. */
static void test_status_fields(void **st)
{
    (void)st;
    char body[PATH_MAX * 2], a[PATH_MAX], b[PATH_MAX];
    snprintf(a, sizeof a, "%s/alpha", g_root);
    snprintf(b, sizeof b, "%s/beta", g_root);
    /* beta used, then alpha: alpha is the most recent, so it comes after beta */
    snprintf(body, sizeof body, "{\"query\":\"ServeWombat\",\"explicit_scope\":\"%s\"}", b);
    assert_int_equal(post(body, NULL, NULL, NULL), 200);
    const char *aff[] = {"x-session-affinity: stat-aff", NULL};
    snprintf(body, sizeof body, "{\"query\":\"parse_header\",\"explicit_scope\":\"%s\"}", a);
    assert_int_equal(post(body, aff, NULL, NULL), 200);

    tu_resp r;
    status_get(false, &r);
    cJSON *j = cJSON_Parse(r.body);
    tu_resp_free(&r);
    assert_non_null(j);
    assert_string_equal(jstr(j, "mode"), "local-only");
    const cJSON *sc = get(j, "scopes");
    int n = cJSON_GetArraySize(sc);
    assert_true(n >= 2);
    assert_true(cJSON_IsNumber(get(j, "scopes_total")));
    assert_int_equal((int)get(j, "scopes_total")->valuedouble, n);
    int ia = -1, ib = -1;
    for (int i = 0; i < n; i++) {
        const cJSON *e = cJSON_GetArrayItem(sc, i);
        const char *p = jstr(e, "scope_path");
        assert_non_null(p);
        assert_non_null(jstr(e, "scope_hash"));
        assert_non_null(jstr(e, "sentinel"));
        assert_non_null(jstr(e, "status"));
        assert_true(cJSON_IsNumber(get(e, "chunks")) && cJSON_IsNumber(get(e, "files")));
        const cJSON *mb = get(e, "memory_mb");
        assert_true(cJSON_IsNumber(mb));
        assert_true(mb->valuedouble > 0);   /* a loaded scope holds its tables */
        if (!strcmp(p, a)) ia = i;
        if (!strcmp(p, b)) ib = i;
    }
    assert_true(ib >= 0 && ia >= 0);
    assert_true(ib < ia);
    assert_int_equal(ia, n - 1);   /* the most recent is last */
    assert_string_equal(jstr(j, "last_session_id"), "stat-aff");
    assert_string_equal(jstr(j, "last_session_via"), "x-session-affinity");
    const cJSON *dc = get(j, "disk_cache");
    assert_true(cJSON_IsNumber(get(dc, "scopes")) && get(dc, "scopes")->valuedouble >= 2);
    assert_true(cJSON_IsNumber(get(dc, "mb")));
    cJSON_Delete(j);

    status_get(true, &r);
    assert_non_null(strstr(r.body, "[longctx] session: stat-aff (via: x-session-affinity)\n"));
    char want[PATH_MAX + 64];
    snprintf(want, sizeof want, "[longctx] disk cache: %s/scopes, ", g_svc.data_dir);
    const char *dl = strstr(r.body, want);
    if (!dl) fail_msg("no disk cache line in:\n%s", r.body);
    unsigned nd = 0;
    double mbd = -1;
    assert_int_equal(sscanf(dl + strlen(want), "%u scopes, %lf MB", &nd, &mbd), 2);
    assert_true(nd >= 2 && mbd >= 0);
    assert_non_null(strstr(r.body, "[longctx] mode: local-only"));
    tu_resp_free(&r);

    /* the body's session_id wins over the headers, and says so */
    const char *both[] = {"x-session-id: stat-hdr", NULL};
    assert_int_equal(post("{\"session_id\":\"stat-body\",\"query\":\"x\"}", both, NULL, NULL), 200);
    status_get(true, &r);
    assert_non_null(strstr(r.body, "[longctx] session: stat-body (via: body)\n"));
    tu_resp_free(&r);
    assert_int_equal(post("{\"query\":\"x\"}", both, NULL, NULL), 200);
    status_get(true, &r);
    assert_non_null(strstr(r.body, "[longctx] session: stat-hdr (via: x-session-id)\n"));
    tu_resp_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_no_scope_replies),
        cmocka_unit_test(test_explicit_and_empty),
        cmocka_unit_test(test_async_indexing),
        cmocka_unit_test(test_clusters_across_turns),
        cmocka_unit_test(test_workspace),
        cmocka_unit_test(test_status_fields),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
