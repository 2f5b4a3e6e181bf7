/* POST /index and POST /retrieve (both forms), headers, 4xx inputs, the status lines and
 * the watcher, over HTTP against the real longctx-svc binary. */
#include "testutil.h"
#if defined(__GNUC__) && !defined(__clang__)   /* gcc-only warning */
#pragma GCC diagnostic ignored "-Wformat-truncation"
#endif
#include <cjson/cJSON.h>
#include <ctype.h>
#include <stdbool.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static tu_svc g_svc;
static int g_port;
static char *g_proj;

static void wr(const char *dir, const char *rel, const char *text)
{
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s/%s", dir, rel);
    assert_int_equal(tu_write(p, text, strlen(text)), 0);
}

static void pct(const char *s, char *out, size_t cap)
{
    size_t k = 0;
    for (; *s && k + 4 < cap; s++) {
        unsigned char c = (unsigned char)*s;
        if (isalnum(c) || strchr("-._~/", c)) out[k++] = (char)c;
        else k += (size_t)snprintf(out + k, cap - k, "%%%02X", c);
    }
    out[k] = 0;
}

static long req(const char *method, const char *path, const char *body, const char *const *hdrs, tu_resp *r)
{
    char url[8192];
    snprintf(url, sizeof url, "http://127.0.0.1:%d%s", g_port, path);
    const char *def[] = {"Content-Type: application/json", NULL};
    tu_http(method, url, body, body ? strlen(body) : 0, hdrs ? hdrs : (body ? def : NULL), r);
    return r->status;
}

static long post_json(const char *path, const char *body, cJSON **j, tu_resp *keep)
{
    tu_resp r;
    long st = req("POST", path, body, NULL, &r);
    if (j) *j = cJSON_Parse(r.body);
    if (keep) *keep = r;
    else tu_resp_free(&r);
    return st;
}

static const char *jstr(const cJSON *o, const char *k)
{
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(x) ? x->valuestring : NULL;
}

static double jnum(const cJSON *o, const char *k)
{
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(x) ? x->valuedouble : -1;
}

static void expect_error(long st, long want, const char *body, const char *code)
{
    if (st != want) fail_msg("status %ld, want %ld (%s)", st, want, body ? body : "");
    cJSON *j = cJSON_Parse(body);
    assert_non_null(j);
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(j, "error");
    assert_non_null(e);
    if (code) assert_string_equal(jstr(e, "code"), code);
    cJSON_Delete(j);
}

static int setup(void **st)
{
    char *d0 = tu_tmpdir();
    g_proj = realpath(d0, NULL);
    free(d0);
    wr(g_proj, ".git/HEAD", "ref\n");
    wr(g_proj, "README.md", "# Demo\n\nHeaders are parsed by parse_header.\n");
    wr(g_proj, "src/http.c", "#include \"http.h\"\n\nint parse_header(const char *line)\n{\n    return line[0] == ':';\n}\n");
    wr(g_proj, "src/http.h", "int parse_header(const char *line);\n");
    wr(g_proj, "src/server.c", "int serve(void)\n{\n    return parse_header(\"a: b\");\n}\n");
    wr(g_proj, "config.yaml", "port: 8080\n");
    wr(g_proj, ".env", "TOKEN=hunter2_secret\n");
    wr(g_proj, "secrets/key.txt", "hunter2_secret\n");
    if (tu_svc_start(&g_svc) < 0) return -1;
    g_port = g_svc.port;
    return 0;
}

static int teardown(void **st)
{
    tu_svc_stop(&g_svc);
    tu_rmrf(g_proj);
    free(g_proj);
    return 0;
}

static void test_index(void **st)
{
    char path[8192], enc[4096];
    pct(g_proj, enc, sizeof enc);
    snprintf(path, sizeof path, "/index?scope=%s", enc);
    cJSON *j;
    tu_resp r;
    assert_int_equal(post_json(path, NULL, &j, &r), 200);
    assert_string_equal(jstr(j, "scope_path"), g_proj);
    const char *h = jstr(j, "scope_hash");
    assert_non_null(h);
    assert_int_equal(strlen(h), 16);
    assert_int_equal(jnum(j, "files"), 5);
    assert_true(jnum(j, "chunks") >= 5);
    assert_string_equal(jstr(j, "status"), "package");
    const cJSON *sk = cJSON_GetObjectItemCaseSensitive(j, "skipped");
    assert_true(jnum(sk, "secret") >= 2);
    cJSON_Delete(j);
    tu_resp_free(&r);
    /* bad inputs */
    assert_int_equal(post_json("/index", NULL, NULL, &r), 400);
    expect_error(r.status, 400, r.body, "bad_request");
    tu_resp_free(&r);
    post_json("/index?scope=relative/dir", NULL, NULL, &r);
    expect_error(r.status, 400, r.body, "bad_scope");
    tu_resp_free(&r);
    snprintf(path, sizeof path, "/index?scope=%s/missing", enc);
    post_json(path, NULL, NULL, &r);
    expect_error(r.status, 404, r.body, "not_found");
    tu_resp_free(&r);
    snprintf(path, sizeof path, "/index?scope=%s/secrets", enc);
    post_json(path, NULL, NULL, &r);
    expect_error(r.status, 403, r.body, "forbidden");
    tu_resp_free(&r);
    post_json("/index?scope=/proc", NULL, NULL, &r);
    expect_error(r.status, 403, r.body, "forbidden");
    tu_resp_free(&r);
    snprintf(path, sizeof path, "/index?scope=%s/README.md", enc);
    post_json(path, NULL, NULL, &r);
    expect_error(r.status, 400, r.body, "bad_scope");
    tu_resp_free(&r);
    /* JSON body form of /index */
    char body[PATH_MAX + 32];
    snprintf(body, sizeof body, "{\"scope\":\"%s\"}", g_proj);
    assert_int_equal(post_json("/index", body, &j, NULL), 200);
    assert_int_equal(jnum(j, "files_read"), 0);   /* already indexed, nothing changed */
    cJSON_Delete(j);
}

static void test_retrieve_text_form(void **st)
{
    char path[8192], enc[4096];
    pct(g_proj, enc, sizeof enc);
    snprintf(path, sizeof path, "/retrieve?scope=%s&query=parse_header&top_k=3", enc);
    tu_resp r;
    assert_int_equal(req("POST", path, NULL, NULL, &r), 200);
    char want[PATH_MAX + 64], v[PATH_MAX];
    snprintf(want, sizeof want, "## Retrieved code context\n\n// %s/src/http.c:1-6\n```\n#include", g_proj);
    if (strncmp(r.body, want, strlen(want))) fail_msg("splice starts with [%.200s]", r.body);
    assert_null(strstr(r.body, "hunter2_secret"));
    assert_int_equal(tu_resp_header(&r, "content-type", v, sizeof v), 0);
    assert_non_null(strstr(v, "text/plain"));
    assert_int_equal(tu_resp_header(&r, "x-longctx-scope", v, sizeof v), 0);
    assert_string_equal(v, g_proj);
    assert_int_equal(tu_resp_header(&r, "x-longctx-chunks-used", v, sizeof v), 0);
    assert_true(atoi(v) >= 1 && atoi(v) <= 3);
    assert_int_equal(tu_resp_header(&r, "x-longctx-scope-status", v, sizeof v), 0);
    assert_string_equal(v, "ready");
    assert_int_equal(tu_resp_header(&r, "x-longctx-confidence", v, sizeof v), 0);
    assert_true(atof(v) > 0 && atof(v) <= 1);   /* the first chunk's score */
    assert_int_equal(tu_resp_header(&r, "x-longctx-session", v, sizeof v), 0);
    assert_string_equal(v, "ephemeral");
    tu_resp_free(&r);
    const char *bad[] = {"top_k=0", "top_k=65", "top_k=abc", "top_k=3.5"};
    for (int i = 0; i < 4; i++) {
        snprintf(path, sizeof path, "/retrieve?scope=%s&query=x&%s", enc, bad[i]);
        req("POST", path, NULL, NULL, &r);
        expect_error(r.status, 400, r.body, "bad_request");
        tu_resp_free(&r);
    }
    snprintf(path, sizeof path, "/retrieve?scope=%s", enc);
    req("POST", path, NULL, NULL, &r);
    expect_error(r.status, 400, r.body, "bad_request");
    tu_resp_free(&r);
    req("POST", "/retrieve?scope=rel/x&query=y", NULL, NULL, &r);   /* relative: against the cwd */
    expect_error(r.status, 404, r.body, "not_found");
    tu_resp_free(&r);
    snprintf(path, sizeof path, "/retrieve?scope=%s/secrets&query=hunter2_secret", enc);
    req("POST", path, NULL, NULL, &r);
    expect_error(r.status, 403, r.body, "forbidden");
    tu_resp_free(&r);
}

static void test_retrieve_json_form(void **st)
{
    char body[PATH_MAX * 2];
    snprintf(body, sizeof body,
             "{\"prefill_text\":\"look at %s/src/server.c please\",\"query\":\"where is parse_header defined\","
             "\"top_k\":2,\"session_id\":\"abc\"}", g_proj);
    cJSON *j;
    tu_resp r;
    assert_int_equal(post_json("/retrieve", body, &j, &r), 200);
    const cJSON *ch = cJSON_GetObjectItemCaseSensitive(j, "chunks");
    assert_true(cJSON_IsArray(ch));
    assert_true(cJSON_GetArraySize(ch) >= 1 && cJSON_GetArraySize(ch) <= 2);
    const cJSON *c0 = cJSON_GetArrayItem(ch, 0);
    char want[PATH_MAX + 16];
    snprintf(want, sizeof want, "%s/src/http.c", g_proj);
    assert_string_equal(jstr(c0, "file_path"), want);
    assert_non_null(strstr(jstr(c0, "text"), "int parse_header(const char *line)\n{"));
    assert_int_equal(jnum(c0, "start_line"), 1);
    assert_int_equal(jnum(c0, "end_line"), 6);
    assert_string_equal(jstr(c0, "file_type"), "code");
    double sc = jnum(c0, "score");
    assert_true(sc >= 0 && sc <= 1);
    assert_string_equal(jstr(j, "scope_path"), g_proj);
    assert_int_equal(strlen(jstr(j, "scope_hash")), 16);
    assert_string_equal(jstr(j, "scope_status"), "ready");
    assert_string_equal(jstr(j, "scope_tier"), "package");
    assert_string_equal(jstr(j, "scope_sentinel"), ".git");
    assert_string_equal(jstr(j, "session_id"), "abc");
    assert_true(cJSON_IsBool(cJSON_GetObjectItemCaseSensitive(j, "used_rerank")));
    assert_int_equal(jnum(j, "paraphrases_count"), 0);
    char v[PATH_MAX];
    assert_int_equal(tu_resp_header(&r, "x-longctx-session", v, sizeof v), 0);
    assert_string_equal(v, "abc");
    tu_resp_free(&r);
    cJSON_Delete(j);
    /* session id precedence: body → x-session-affinity → x-session-id */
    snprintf(body, sizeof body, "{\"prefill_text\":\"%s/src/http.c\",\"query\":\"serve\"}", g_proj);
    const char *h1[] = {"Content-Type: application/json", "x-session-affinity: aff1", "x-session-id: sid1", NULL};
    assert_int_equal(req("POST", "/retrieve", body, h1, &r), 200);
    tu_resp_header(&r, "x-longctx-session", v, sizeof v);
    assert_string_equal(v, "aff1");
    tu_resp_free(&r);
    const char *h2[] = {"Content-Type: application/json", "x-session-id: sid1", NULL};
    assert_int_equal(req("POST", "/retrieve", body, h2, &r), 200);
    tu_resp_header(&r, "x-longctx-session", v, sizeof v);
    assert_string_equal(v, "sid1");
    tu_resp_free(&r);
    /* ws: searches the session's bound scopes, without any path in the prompt */
    assert_int_equal(post_json("/retrieve", "{\"query\":\"parse_header\",\"explicit_scope\":\"ws:\",\"session_id\":\"abc\"}", &j, NULL), 200);
    assert_string_equal(jstr(j, "scope_path"), "ws:");
    assert_string_equal(jstr(j, "scope_sentinel"), "workspace");
    assert_true(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(j, "chunks")) >= 1);
    cJSON_Delete(j);
    /* no path, no scope: 200 with nothing */
    assert_int_equal(post_json("/retrieve", "{\"prefill_text\":\"hello\",\"query\":\"x\"}", &j, &r), 200);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(j, "chunks")), 0);
    assert_string_equal(jstr(j, "scope_status"), "no-scope");
    tu_resp_header(&r, "x-longctx-chunks-used", v, sizeof v);
    assert_string_equal(v, "0");
    tu_resp_free(&r);
    cJSON_Delete(j);
    /* bad input */
    /* malformed JSON → 400; schema errors in well-formed JSON → 422 (as the reference) */
    const char *bad[] = {"{\"query\":\"\"}", "not json", "{\"query\":\"x\",}"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        post_json("/retrieve", bad[i], NULL, &r);
        if (r.status != 400) fail_msg("%s → %ld %s", bad[i], r.status, r.body);
        expect_error(r.status, 400, r.body, NULL);
        tu_resp_free(&r);
    }
    const char *bad422[] = {
        "{\"prefill_text\":\"x\"}", "{\"query\":\"x\",\"top_k\":0}", "{\"query\":\"x\",\"top_k\":65}",
        "{\"query\":\"x\",\"top_k\":2.5}", "{\"query\":\"x\",\"top_k\":\"3\"}", "{\"query\":7}",
        "{\"query\":\"x\",\"session_id\":[1]}",
    };
    for (size_t i = 0; i < sizeof bad422 / sizeof *bad422; i++) {
        post_json("/retrieve", bad422[i], NULL, &r);
        if (r.status != 422) fail_msg("%s → %ld %s", bad422[i], r.status, r.body);
        expect_error(r.status, 422, r.body, NULL);
        tu_resp_free(&r);
    }
    post_json("/retrieve", "{\"query\":\"x\",\"explicit_scope\":\"rel/dir/not/there\"}", NULL, &r);
    expect_error(r.status, 404, r.body, "not_found");
    tu_resp_free(&r);
    snprintf(body, sizeof body, "{\"query\":\"x\",\"explicit_scope\":\"%s/secrets\"}", g_proj);
    post_json("/retrieve", body, NULL, &r);
    expect_error(r.status, 403, r.body, "forbidden");
    tu_resp_free(&r);
    snprintf(body, sizeof body, "{\"query\":\"x\",\"explicit_scope\":\"%s/nope\"}", g_proj);
    post_json("/retrieve", body, NULL, &r);
    expect_error(r.status, 404, r.body, "not_found");
    tu_resp_free(&r);
}

static void test_status_and_watch(void **st)
{
    tu_resp r;
    const char *acc[] = {"Accept: text/plain", NULL};
    assert_int_equal(req("GET", "/longctx/status", NULL, acc, &r), 200);
    char want[PATH_MAX + 64];
    snprintf(want, sizeof want, "[longctx] scope: %s (", g_proj);
    assert_non_null(strstr(r.body, want));
    assert_non_null(strstr(r.body, "[longctx] indexed: 5 files, "));
    tu_resp_free(&r);
    cJSON *j;
    assert_int_equal(req("GET", "/longctx/status", NULL, NULL, &r), 200);
    j = cJSON_Parse(r.body);
    assert_true(jnum(j, "scopes_loaded") >= 1);
    const cJSON *sc = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j, "scopes"), 0);
    assert_string_equal(jstr(sc, "scope_path"), g_proj);
    cJSON_Delete(j);
    tu_resp_free(&r);
    /* an edit shows up in the next retrievals (watcher; generous deadline) */
    wr(g_proj, "src/server.c", "int serve(void)\n{\n    return pangolin_factor * 2;\n}\n");
    char body[PATH_MAX * 2];
    snprintf(body, sizeof body, "{\"query\":\"pangolin_factor\",\"explicit_scope\":\"%s\"}", g_proj);
    bool seen = false;
    for (int i = 0; i < 500 && !seen; i++) {
        assert_int_equal(post_json("/retrieve", body, NULL, &r), 200);
        seen = strstr(r.body, "pangolin_factor * 2") != NULL;
        tu_resp_free(&r);
        if (!seen) usleep(20000);
    }
    assert_true(seen);
}

/* the CLI: longctx index (summary line) and longctx query (splice / --json, bad -k) */
static void test_cli(void **st)
{
    char *data = tu_tmpdir();
    char cmd[PATH_MAX * 3], *out = NULL;
    snprintf(cmd, sizeof cmd, "'%s' index '%s' --data-dir '%s' 2>&1", tu_bin("longctx"), g_proj, data);
    assert_int_equal(tu_run(cmd, &out), 0);
    char want[PATH_MAX + 64];
    snprintf(want, sizeof want, "indexed %s: 5 files, ", g_proj);
    if (!strstr(out, want)) fail_msg("index output: %s", out);
    assert_non_null(strstr(out, "(5 files read)"));
    free(out);
    assert_int_equal(tu_run(cmd, &out), 0);      /* second run: nothing re-read */
    assert_non_null(strstr(out, "(0 files read)"));
    free(out);
    snprintf(cmd, sizeof cmd, "'%s' query '%s' parse_header -k 2 --json --data-dir '%s'", tu_bin("longctx"), g_proj, data);
    assert_int_equal(tu_run(cmd, &out), 0);
    cJSON *j = cJSON_Parse(out);
    assert_non_null(j);
    const cJSON *ch = cJSON_GetObjectItemCaseSensitive(j, "chunks");
    assert_true(cJSON_GetArraySize(ch) >= 1 && cJSON_GetArraySize(ch) <= 2);
    snprintf(want, sizeof want, "%s/src/http.c", g_proj);
    assert_string_equal(jstr(cJSON_GetArrayItem(ch, 0), "file_path"), want);
    cJSON_Delete(j);
    free(out);
    snprintf(cmd, sizeof cmd, "'%s' query '%s' parse_header -k 1 --data-dir '%s'", tu_bin("longctx"), g_proj, data);
    assert_int_equal(tu_run(cmd, &out), 0);
    const char *hdr = "## Retrieved code context\n\n// ";
    assert_int_equal(strncmp(out, hdr, strlen(hdr)), 0);
    free(out);
    snprintf(cmd, sizeof cmd, "'%s' query '%s' x -k 0 --data-dir '%s' 2>/dev/null", tu_bin("longctx"), g_proj, data);
    assert_int_equal(tu_run(cmd, &out), 2);
    free(out);
    snprintf(cmd, sizeof cmd, "'%s' index '%s/secrets' --data-dir '%s' 2>&1", tu_bin("longctx"), g_proj, data);
    assert_int_equal(tu_run(cmd, &out), 1);
    assert_non_null(strstr(out, "forbidden"));
    free(out);
    tu_rmrf(data);
    free(data);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_index), cmocka_unit_test(test_retrieve_text_form),
        cmocka_unit_test(test_retrieve_json_form), cmocka_unit_test(test_status_and_watch),
        cmocka_unit_test(test_cli),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
