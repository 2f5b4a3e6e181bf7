#include "svc_harness.h"
#include "longctx/lcx.h"
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

bool sh_try_start(sh_server *s, const char *data_dir, const char *const *extra, const char *const *env, int timeout_ms)
{
    memset(s, 0, sizeof *s);
    s->port = tu_free_port();
    s->data_dir = data_dir ? strdup(data_dir) : tu_tmpdir();
    snprintf(s->log, sizeof s->log, "%s.log", s->data_dir);
    snprintf(s->base, sizeof s->base, "http://127.0.0.1:%d", s->port);
    char port[16];
    snprintf(port, sizeof port, "%d", s->port);
    const char *argv[64] = {tu_bin("longctx-svc"), "serve", "--host", "127.0.0.1", "--port", port,
                            "--data-dir", s->data_dir, "--threads", "2"};
    int n = 10;
    for (int i = 0; extra && extra[i] && n < 62; i++) argv[n++] = extra[i];
    argv[n] = NULL;
    s->pid = tu_spawn((char *const *)argv, (char *const *)env, s->log);
    if (s->pid <= 0) return false;
    if (!tu_wait_http(s->port, "/healthz", timeout_ms)) {
        tu_kill_wait(s->pid, SIGKILL, 2000);
        s->pid = 0;
        char *out = NULL;
        char cmd[4300];
        snprintf(cmd, sizeof cmd, "cat '%s'", s->log);
        tu_run(cmd, &out);
        fprintf(stderr, "server did not start; log:\n%s\n", out ? out : "");
        free(out);
        return false;
    }
    return true;
}

int sh_start(sh_server *s, const char *data_dir, const char *const *extra, const char *const *env)
{
    assert_true(sh_try_start(s, data_dir, extra, env, 20000));
    return 0;
}

/* After a clean stop, the server's log must hold no sanitizer report (ASan/UBSan/LSan
 * builds print them there; a leak or UB in the server fails the calling test). */
static void check_log(const sh_server *s)
{
    char *out = NULL;
    char cmd[4300];
    snprintf(cmd, sizeof cmd, "cat '%s' 2>/dev/null", s->log);
    tu_run(cmd, &out);
    bool bad = out && (strstr(out, "Sanitizer") || strstr(out, "runtime error:"));
    if (bad) fprintf(stderr, "server log %s:\n%s\n", s->log, out);
    free(out);
    assert_false(bad);
}

int sh_stop(sh_server *s, int sig)
{
    int st = tu_kill_wait(s->pid, sig, 20000);
    s->pid = 0;
    if (sig != SIGKILL) check_log(s);
    return st;
}

void sh_cleanup(sh_server *s)
{
    if (s->pid > 0) sh_stop(s, SIGKILL);
    if (s->data_dir) {
        tu_rmrf(s->data_dir);
        unlink(s->log);
    }
    free(s->data_dir);
    s->data_dir = NULL;
}

long sh_req(sh_server *s, const char *method, const char *path, const char *body, size_t len, cJSON **json,
            tu_resp *rout)
{
    char url[8192];
    snprintf(url, sizeof url, "%s%s", s->base, path);
    tu_resp r;
    const char *hdr[] = {"Content-Type: application/json", NULL};
    tu_http(method, url, body, len, body ? hdr : NULL, &r);
    if (json) *json = cJSON_Parse(r.body);
    long st = r.status;
    if (rout) *rout = r;
    else tu_resp_free(&r);
    return st;
}

long sh_post(sh_server *s, const char *path, const char *body, cJSON **json)
{
    return sh_req(s, "POST", path, body, body ? strlen(body) : 0, json, NULL);
}

long sh_get(sh_server *s, const char *path, cJSON **json) { return sh_req(s, "GET", path, NULL, 0, json, NULL); }

void sh_assert_error(const cJSON *j, const char *code)
{
    assert_non_null(j);
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(j, "error");
    assert_true(cJSON_IsObject(e));
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(e, "code");
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(e, "message");
    assert_true(cJSON_IsString(c));
    assert_true(cJSON_IsString(m));
    assert_true(strlen(m->valuestring) > 0);
    if (code) assert_string_equal(c->valuestring, code);
}

int sh_count(const cJSON *j, const char *key)
{
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(j, key);
    return cJSON_IsArray(a) ? cJSON_GetArraySize(a) : -1;
}

/* Every session directory under data_dir/sessions validates (asserts). Returns how many. */
int sh_validate_sessions(const char *data_dir)
{
    char p[4300];
    snprintf(p, sizeof p, "%s/sessions", data_dir);
    DIR *d = opendir(p);
    assert_non_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char sd[4600], msg[512];
        snprintf(sd, sizeof sd, "%s/%s", p, e->d_name);
        int rc = lcx_store_validate(sd, msg, sizeof msg);
        if (rc < 0) fprintf(stderr, "validate %s: %s (%s)\n", sd, lcx_strerror(rc), msg);
        assert_true(rc >= 0);
        n++;
    }
    closedir(d);
    return n;
}
