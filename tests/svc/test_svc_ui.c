/* Integration (real longctx-svc binary + headless Chromium): the /ui dashboard renders
 * what the service holds (sessions, scopes, per-route rates and latency percentiles, recent
 * retrievals with their scores) after its script ran, with the token passed in the URL
 * fragment; without it the page asks for the token and shows no data. Also
 * /longctx/recent's JSON and the auth split (static page open, data behind the token).
 * Skips when chromium (Debian's package, scripts/deps.txt) is not installed. */
#include "svc_harness.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define TOKEN "ui-tok-5b1d9e"

static char chromium[512];

static bool find_chromium(void)
{
    char *out = NULL;
    int rc = tu_run("command -v chromium || command -v chromium-browser", &out);
    bool ok = rc == 0 && out && out[0] == '/';
    if (ok) {
        out[strcspn(out, "\n")] = 0;
        snprintf(chromium, sizeof chromium, "%s", out);
    }
    free(out);
    return ok;
}

/* The DOM after the page's script ran for a few (virtual) seconds. */
static char *dump_dom(const char *url)
{
    char *prof = tu_tmpdir(), cmd[2048], *out = NULL;
    /* --no-sandbox: tests may run as root; the page is our own */
    snprintf(cmd, sizeof cmd,
             "timeout 120 '%s' --headless --no-sandbox --disable-gpu --no-first-run --user-data-dir='%s' "
             "--virtual-time-budget=5000 --dump-dom '%s' 2>/dev/null",
             chromium, prof, url);
    int rc = tu_run(cmd, &out);
    tu_rmrf(prof);
    free(prof);
    assert_int_equal(rc, 0);
    assert_non_null(out);
    return out;
}

static long req_tok(sh_server *s, const char *method, const char *path, const char *body, bool tok, tu_resp *r)
{
    char url[4500];
    snprintf(url, sizeof url, "%s%s", s->base, path);
    const char *h[] = {"Content-Type: application/json", tok ? "Authorization: Bearer " TOKEN : NULL, NULL};
    tu_http(method, url, body, body ? strlen(body) : 0, h, r);
    return r->status;
}

static void ok_req(sh_server *s, const char *method, const char *path, const char *body)
{
    tu_resp r;
    assert_int_equal(req_tok(s, method, path, body, true, &r), 200);
    tu_resp_free(&r);
}

static void test_dashboard(void **state)
{
    (void)state;
    if (!find_chromium()) skip();
    sh_server S;
    const char *extra[] = {"--auth-token", TOKEN, NULL};
    sh_start(&S, NULL, extra, NULL);
    /* data: two rescue sessions, a retrieval, a code scope and a code retrieval */
    ok_req(&S, "POST", "/evict/write",
           "{\"session_id\":\"ui-engine-7\",\"chunks\":[{\"text\":\"the vault code is 7731\",\"token_range\":[0,9],\"round\":1},"
           "{\"text\":\"lunch is at noon\",\"token_range\":[10,19],\"round\":1}]}");
    ok_req(&S, "POST", "/evict/write",
           "{\"session_id\":\"ui-engine-8\",\"chunks\":[{\"text\":\"other tenant text\",\"token_range\":[0,9]}]}");
    ok_req(&S, "POST", "/evict/retrieve", "{\"session_id\":\"ui-engine-7\",\"query\":\"What is the vault code?\",\"top_k\":2}");
    char *dir = tu_tmpdir(), p[4200];
    snprintf(p, sizeof p, "%s/.git", dir);
    assert_int_equal(mkdir(p, 0700), 0);
    snprintf(p, sizeof p, "%s/frob.c", dir);
    static const char src[] = "/* frobnicate the widget counter */\nint frobnicate(int widget) { return widget * 3; }\n";
    assert_int_equal(tu_write(p, src, sizeof src - 1), 0);
    char path[4400], body[4600];
    snprintf(path, sizeof path, "/index?scope=%s", dir);
    ok_req(&S, "POST", path, "");
    snprintf(body, sizeof body, "{\"query\":\"frobnicate widget\",\"explicit_scope\":\"%s\",\"session_id\":\"ui-agent\"}", dir);
    ok_req(&S, "POST", "/retrieve", body);

    /* /longctx/recent: newest first, with scores; behind the token */
    tu_resp r;
    assert_int_equal(req_tok(&S, "GET", "/longctx/recent", NULL, false, &r), 401);
    tu_resp_free(&r);
    assert_int_equal(req_tok(&S, "GET", "/longctx/recent", NULL, true, &r), 200);
    cJSON *j = cJSON_Parse(r.body);
    tu_resp_free(&r);
    assert_int_equal((int)cJSON_GetNumberValue(cJSON_GetObjectItem(j, "total")), 2);
    cJSON *rec = cJSON_GetObjectItem(j, "recent");
    assert_int_equal(cJSON_GetArraySize(rec), 2);
    cJSON *e0 = cJSON_GetArrayItem(rec, 0), *e1 = cJSON_GetArrayItem(rec, 1);
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(e0, "kind")), "code");
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(e0, "session_id")), "ui-agent");
    assert_non_null(strstr(cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(e0, "top"), 0),
                                                                   "label")),
                           "frob.c"));
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(e1, "kind")), "rescue");
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(e1, "query")), "What is the vault code?");
    assert_int_equal((int)cJSON_GetNumberValue(cJSON_GetObjectItem(e1, "hits")), 2);
    double s0 = cJSON_GetNumberValue(cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(e1, "top"), 0), "score"));
    double s1 = cJSON_GetNumberValue(cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(e1, "top"), 1), "score"));
    assert_true(s0 > 0 && s0 >= s1);
    char s0txt[32];
    snprintf(s0txt, sizeof s0txt, ">%.3f <", s0);   /* how the page prints it */
    cJSON_Delete(j);

    /* the page and script are open (no data in them), with a strict CSP */
    assert_int_equal(req_tok(&S, "GET", "/ui", NULL, false, &r), 200);
    char v[512];
    assert_int_equal(tu_resp_header(&r, "Content-Security-Policy", v, sizeof v), 0);
    assert_non_null(strstr(v, "script-src 'self'"));
    assert_non_null(strstr(v, "frame-ancestors 'none'"));
    assert_null(strstr(r.body, "ui-engine-7"));
    tu_resp_free(&r);
    assert_int_equal(req_tok(&S, "GET", "/ui/app.js", NULL, false, &r), 200);
    assert_int_equal(tu_resp_header(&r, "Content-Type", v, sizeof v), 0);
    assert_non_null(strstr(v, "javascript"));
    tu_resp_free(&r);

    /* rendered with the token (fragment → sessionStorage) */
    char url[600];
    snprintf(url, sizeof url, "%s/ui#token=%s", S.base, TOKEN);
    char *dom = dump_dom(url);
    assert_non_null(strstr(dom, "data-state=\"ready\""));
    assert_non_null(strstr(dom, "ui-engine-7"));                  /* recent retrieval's session */
    assert_non_null(strstr(dom, "What is the vault code?"));      /* its query */
    assert_non_null(strstr(dom, s0txt));                          /* its top score */
    assert_non_null(strstr(dom, "frobnicate widget"));            /* the code retrieval */
    assert_non_null(strstr(dom, "frob.c"));                       /* its hit's file (score title) */
    assert_non_null(strstr(dom, dir));                            /* the scope row */
    assert_non_null(strstr(dom, "data-route=\"POST /evict/retrieve\""));   /* per-route latency row */
    assert_non_null(strstr(dom, "data-route=\"POST /evict/write\""));
    assert_non_null(strstr(dom, "<td>sessions on disk</td><td>2</td>"));
    assert_non_null(strstr(dom, "<td>eviction rounds seen</td><td>1</td>"));
    assert_non_null(strstr(dom, "<td>scopes in RAM / on disk</td><td>1 / 1</td>"));
    assert_non_null(strstr(dom, "v" LCX_VERSION));
    assert_null(strstr(dom, TOKEN));                              /* the token left the address bar and the DOM */
    /* percentiles rendered as numbers for the retrieve route */
    const char *row = strstr(dom, "data-route=\"POST /evict/retrieve\"");
    const char *end = strstr(row, "</tr>");
    assert_non_null(end);
    int nums = 0;
    for (const char *q = row; q < end && (q = strstr(q, "<td class=\"n\">")); q += 14)
        if (q < end && ((q[14] >= '0' && q[14] <= '9'))) nums++;
    assert_true(nums >= 5);   /* total, errors, p50, p95, p99 (and req/s after the 2nd poll) */
    free(dom);

    /* without the token: the login form, no data */
    snprintf(url, sizeof url, "%s/ui", S.base);
    dom = dump_dom(url);
    assert_non_null(strstr(dom, "data-state=\"login\""));
    assert_null(strstr(dom, "ui-engine-7"));
    free(dom);

    assert_int_equal(sh_stop(&S, SIGTERM), 0);
    sh_cleanup(&S);
    tu_rmrf(dir);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dashboard),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
