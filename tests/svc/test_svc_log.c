/* Integration (real longctx-svc binary): --log-format json (one JSON object per line:
 * events and an access line per request), --log-file, SIGHUP reopening it after a rename
 * (logrotate), and the text default (no access lines). */
#include "svc_harness.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return strdup("");
    char *d = NULL;
    size_t n = 0, cap = 0;
    char tmp[8192];
    size_t r;
    while ((r = fread(tmp, 1, sizeof tmp, f)) > 0) {
        if (n + r + 1 > cap) { cap = (n + r + 1) * 2; d = realloc(d, cap); assert_non_null(d); }
        memcpy(d + n, tmp, r);
        n += r;
    }
    fclose(f);
    if (!d) return strdup("");
    d[n] = 0;
    return d;
}

/* Every line of text must be a JSON object with ts/level/msg; returns the line whose
 * request_id is rid (parsed; caller frees) or NULL; *lines gets the line count. */
static cJSON *find_access(const char *text, const char *rid, int *lines)
{
    cJSON *hit = NULL;
    int n = 0;
    for (const char *p = text; *p;) {
        const char *e = strchr(p, '\n');
        assert_non_null(e);   /* whole lines only */
        cJSON *j = cJSON_ParseWithLength(p, (size_t)(e - p));
        assert_non_null(j);
        assert_true(cJSON_IsObject(j));
        const char *ts = cJSON_GetStringValue(cJSON_GetObjectItem(j, "ts"));
        assert_non_null(ts);
        assert_int_equal(strlen(ts), 24);   /* 2026-12-02T03:40:01.123Z */
        assert_true(ts[10] == 'T' && ts[23] == 'Z');
        const char *lv = cJSON_GetStringValue(cJSON_GetObjectItem(j, "level"));
        assert_non_null(lv);
        assert_true(!strcmp(lv, "info") || !strcmp(lv, "warn") || !strcmp(lv, "error"));
        assert_non_null(cJSON_GetStringValue(cJSON_GetObjectItem(j, "msg")));
        const char *r = cJSON_GetStringValue(cJSON_GetObjectItem(j, "request_id"));
        if (rid && r && !strcmp(r, rid) && !hit) hit = j;
        else cJSON_Delete(j);
        n++;
        p = e + 1;
    }
    if (lines) *lines = n;
    return hit;
}

static long req_id(sh_server *s, const char *method, const char *path, const char *body, const char *rid)
{
    char url[512], h[128];
    snprintf(url, sizeof url, "%s%s", s->base, path);
    snprintf(h, sizeof h, "X-Request-Id: %s", rid);
    const char *hs[] = {h, "Content-Type: application/json", NULL};
    tu_resp r;
    tu_http(method, url, body, body ? strlen(body) : 0, hs, &r);
    long st = r.status;
    tu_resp_free(&r);
    return st;
}

static void test_json_log_and_sighup(void **state)
{
    (void)state;
    char *dir = tu_tmpdir(), logp[4200], rotated[4300];
    snprintf(logp, sizeof logp, "%s/svc.log", dir);
    snprintf(rotated, sizeof rotated, "%s/svc.log.1", dir);
    sh_server S;
    const char *extra[] = {"--log-format", "json", "--log-file", logp, NULL};
    sh_start(&S, NULL, extra, NULL);
    static const char wb[] = "{\"session_id\":\"lg\",\"chunks\":[{\"text\":\"the vault code is 7731\",\"token_range\":[0,9]}]}";
    assert_int_equal(req_id(&S, "POST", "/evict/write", wb, "w-1"), 200);
    assert_int_equal(req_id(&S, "GET", "/sessions/lg/hibernation-status", NULL, "st-1"), 200);
    assert_int_equal(req_id(&S, "GET", "/nope", NULL, "nf-1"), 404);
    assert_int_equal(req_id(&S, "POST", "/evict/write", "{bad", "bad-1"), 400);

    char *t = slurp(logp);
    int lines = 0;
    cJSON *a = find_access(t, "w-1", &lines);
    assert_non_null(a);
    assert_true(lines >= 5);   /* the start line and the four requests (plus the harness's probes) */
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(a, "level")), "info");
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(a, "msg")), "access");
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(a, "method")), "POST");
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(a, "route")), "/evict/write");
    assert_int_equal((int)cJSON_GetNumberValue(cJSON_GetObjectItem(a, "status")), 200);
    assert_true(cJSON_GetNumberValue(cJSON_GetObjectItem(a, "ms")) >= 0);
    assert_int_equal((int)cJSON_GetNumberValue(cJSON_GetObjectItem(a, "bytes")), (int)strlen("{\"accepted\":1,\"session_total\":1}"));
    assert_int_equal((int)cJSON_GetNumberValue(cJSON_GetObjectItem(a, "req_bytes")), (int)strlen(wb));
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(a, "client")), "127.0.0.1");
    cJSON_Delete(a);
    /* the route pattern, never the path: session ids stay out of the log */
    a = find_access(t, "st-1", NULL);
    assert_non_null(a);
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(a, "route")), "/sessions/{id}/hibernation-status");
    cJSON_Delete(a);
    assert_null(strstr(t, "vault code"));   /* bodies never */
    a = find_access(t, "nf-1", NULL);
    assert_non_null(a);
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(a, "level")), "warn");
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(a, "route")), "other");
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(a, "error")), "not_found");
    cJSON_Delete(a);
    a = find_access(t, "bad-1", NULL);
    assert_non_null(a);
    assert_int_equal((int)cJSON_GetNumberValue(cJSON_GetObjectItem(a, "status")), 400);
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(a, "error")), "bad_json");
    cJSON_Delete(a);
    assert_non_null(strstr(t, "listening on http://127.0.0.1:"));
    free(t);

    /* logrotate: rename, SIGHUP, new lines go to a new file at the old path */
    assert_int_equal(rename(logp, rotated), 0);
    assert_int_equal(req_id(&S, "GET", "/longctx/status", NULL, "before-hup"), 200);   /* still the renamed file */
    assert_int_equal(kill(S.pid, SIGHUP), 0);
    struct stat st;
    int i;
    for (i = 0; i < 200 && stat(logp, &st) != 0; i++) usleep(25000);
    assert_true(i < 200);
    assert_int_equal(req_id(&S, "GET", "/longctx/status", NULL, "after-hup"), 200);
    t = slurp(logp);
    char *old = slurp(rotated);
    a = find_access(t, "after-hup", NULL);
    assert_non_null(a);
    cJSON_Delete(a);
    assert_null(find_access(t, "before-hup", NULL));
    assert_non_null(strstr(t, "SIGHUP: log reopened"));
    a = find_access(old, "before-hup", NULL);
    assert_non_null(a);
    cJSON_Delete(a);
    assert_null(find_access(old, "after-hup", NULL));
    free(t);
    free(old);
    /* the service is still fine, and stops cleanly, saying so in the log */
    assert_int_equal(sh_stop(&S, SIGTERM), 0);
    t = slurp(logp);
    assert_non_null(strstr(t, "\"msg\":\"stopped cleanly\""));
    find_access(t, NULL, NULL);   /* every line still JSON */
    free(t);
    sh_cleanup(&S);
    tu_rmrf(dir);
    free(dir);
}

/* Text (default): today's stderr lines, no access log; a bad --log-format is refused. */
static void test_text_default_and_bad_flag(void **state)
{
    (void)state;
    sh_server S;
    sh_start(&S, NULL, NULL, NULL);
    assert_int_equal(req_id(&S, "GET", "/longctx/status", NULL, "text-1"), 200);
    assert_int_equal(sh_stop(&S, SIGTERM), 0);
    char *t = slurp(S.log);
    assert_non_null(strstr(t, "longctx-svc: version "));
    assert_null(strstr(t, "text-1"));
    assert_null(strstr(t, "{\"ts\""));
    free(t);
    sh_cleanup(&S);
    char *out = NULL, cmd[700];
    snprintf(cmd, sizeof cmd, "'%s' serve --port 0 --log-format xml 2>&1", tu_bin("longctx-svc"));
    assert_int_equal(tu_run(cmd, &out), 2);
    assert_non_null(strstr(out, "--log-format"));
    free(out);
    /* an unwritable log file is refused at start */
    snprintf(cmd, sizeof cmd, "'%s' serve --port 0 --log-file /nonexistent-dir/x.log 2>&1", tu_bin("longctx-svc"));
    assert_int_equal(tu_run(cmd, &out), 1);
    assert_non_null(strstr(out, "cannot open --log-file"));
    free(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_json_log_and_sighup),
        cmocka_unit_test(test_text_default_and_bad_flag),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
