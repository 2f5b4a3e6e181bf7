/* Scope path confinement (issue #24, docs/SECURITY.md "Scope confinement"):
 *   - the walker never follows a symlink out of the project root: file links, directory
 *     links, a hot start directory that is a link, a component swapped for a link after
 *     the listing (read_file on a path through a link), "..";
 *   - forbidden directories (secrets/, credentials/, .ssh/, .aws/, .gnupg/, .docker/,
 *     .kube/, .password-store/) and secret files (.env*, keys, .npmrc, …) are never read;
 *   - a scope root that resolves into a forbidden directory is refused;
 *   - end to end, nothing of those files reaches the index;
 *   - over HTTP, no error message names a path the caller did not send.
 * The open-beneath tests run twice: with openat2 and with the component-wise fallback. */
#define _GNU_SOURCE
#include "testutil.h"
#include <cjson/cJSON.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "longctx/lcx_scope.h"
#include "scope/scope_int.h"

#define OUT_TOKEN "OUTSIDETOKEN7731"
#define SECRET_TOKEN "SECRETFILETOKEN4417"

static char g_base[4096], g_proj[4200], g_out[4200];
static lcx_embedder *g_emb;

static const char *const secret_files[] = {
    ".env", ".env.local", "id_rsa", "id_ed25519.pub", "x.pem", "server.key", ".netrc", ".pgpass",
    ".git-credentials", ".npmrc", ".pypirc", ".htpasswd", "credentials", "credentials.json",
    "deploy.ppk", "store.jks", "app.keystore", "pw.kdbx", "cert.p12", "cert.pfx",
};
static const char *const forbidden[] = {"secrets", "credentials", ".ssh", ".aws", ".gnupg", ".docker", ".kube", ".password-store"};
/* the only files a walk of g_proj may yield */
static const char *const legit[] = {"inner/a.c", "main.c", "src/ok.c"};

static void wr(const char *dir, const char *rel, const char *text)
{
    char p[8400];
    snprintf(p, sizeof p, "%s/%s", dir, rel);
    assert_int_equal(tu_write(p, text, strlen(text)), 0);
}

static void link_to(const char *target, const char *rel)
{
    char p[8400];
    snprintf(p, sizeof p, "%s/%s", g_proj, rel);
    assert_int_equal(symlink(target, p), 0);
}

static int setup(void **st)
{
    (void)st;
    char *d = tu_tmpdir(), *r = realpath(d, NULL);
    snprintf(g_base, sizeof g_base, "%s", r);
    free(d);
    free(r);
    snprintf(g_proj, sizeof g_proj, "%s/proj", g_base);
    snprintf(g_out, sizeof g_out, "%s/outside", g_base);
    wr(g_out, "secret.c", "int outside_secret = 1; /* " OUT_TOKEN " */\n");
    wr(g_out, "lib/x.c", "int outside_lib = 2; /* " OUT_TOKEN " */\n");
    wr(g_out, "lib/sub/y.c", "int outside_sub = 3; /* " OUT_TOKEN " */\n");
    wr(g_base, "home/.ssh/config", "Host x " OUT_TOKEN "\n");
    wr(g_proj, ".git/HEAD", "ref: x\n");
    wr(g_proj, "main.c", "int main_ok(void) { return 0; }\n");
    wr(g_proj, ".env", "password=" SECRET_TOKEN "\n");
    wr(g_proj, "src/ok.c", "int src_ok(void) { return 1; }\n");
    wr(g_proj, "inner/a.c", "int inner_ok(void) { return 2; }\n");
    for (size_t i = 0; i < sizeof secret_files / sizeof *secret_files; i++) {
        char rel[256];
        snprintf(rel, sizeof rel, "conf/%s", secret_files[i]);   /* (a file "credentials" next to */
        wr(g_proj, rel, "password=" SECRET_TOKEN "\n");          /* the directory would clash) */
        snprintf(rel, sizeof rel, "src/%s", secret_files[i]);
        wr(g_proj, rel, "password=" SECRET_TOKEN "\n");
    }
    for (size_t i = 0; i < sizeof forbidden / sizeof *forbidden; i++) {
        char rel[256];
        snprintf(rel, sizeof rel, "%s/code.c", forbidden[i]);
        wr(g_proj, rel, "int leaked = 1; /* " SECRET_TOKEN " */\n");
        snprintf(rel, sizeof rel, "lib/%s/deep.c", forbidden[i]);
        wr(g_proj, rel, "int leaked = 1; /* " SECRET_TOKEN " */\n");
    }
    char t[8400];
    snprintf(t, sizeof t, "%s/secret.c", g_out);
    link_to(t, "leak.c");                       /* file link out of the root */
    snprintf(t, sizeof t, "%s/lib", g_out);
    link_to(t, "vendor");                       /* directory link out of the root */
    link_to("../outside/lib", "src/rel");       /* relative link out */
    link_to("main.c", "inroot.c");              /* even a link inside the root is not followed */
    snprintf(t, sizeof t, "%s/home/.ssh", g_base);
    link_to(t, "tossh");                        /* a root candidate resolving into .ssh */
    return lcx_embedder_hash_new(0, &g_emb) < 0 ? -1 : 0;
}

static int teardown(void **st)
{
    (void)st;
    lcx_embedder_free(g_emb);
    tu_rmrf(g_base);
    return 0;
}

typedef struct { char *rel[64]; int n; } seen;

static int file_cb(const char *rel, const struct stat *st, void *ud)
{
    (void)st;
    seen *s = ud;
    if (s->n < 64) s->rel[s->n++] = strdup(rel);
    return 0;
}

static void seen_free(seen *s)
{
    for (int i = 0; i < s->n; i++) free(s->rel[i]);
    s->n = 0;
}

static void walk_all(void)
{
    seen s = {.n = 0};
    lcx_walk_stats ws = {0};
    assert_int_equal(lcx__walk(g_proj, "", NULL, file_cb, NULL, &s, &ws), 0);
    for (int i = 0; i < s.n; i++) fprintf(stderr, "  walked %s\n", s.rel[i]);
    assert_int_equal(s.n, 3);
    for (int i = 0; i < 3; i++) assert_string_equal(s.rel[i], legit[i]);
    assert_true(ws.skipped_symlink >= 4);   /* leak.c, vendor, src/rel, inroot.c, tossh */
    assert_true(ws.skipped_secret >= 2 * (sizeof secret_files / sizeof *secret_files) + 8);
    seen_free(&s);
}

/* A hot start directory that is a link (or lies below one) is not walked. */
static void walk_starts(void)
{
    const char *starts[] = {"vendor", "src/rel", "tossh", "vendor/sub", "src/rel/sub"};
    for (size_t i = 0; i < sizeof starts / sizeof *starts; i++) {
        seen s = {.n = 0};
        lcx_walk_stats ws = {0};
        int rc = lcx__walk(g_proj, starts[i], NULL, file_cb, NULL, &s, &ws);
        if (s.n) fprintf(stderr, "start %s walked %s\n", starts[i], s.rel[0]);
        assert_true(rc >= 0);
        assert_int_equal(s.n, 0);
        seen_free(&s);
    }
}

/* Reading through a link anywhere in the path (what a directory swapped for a link after
 * the listing looks like) or through ".." is refused; the file is never read. */
static void read_paths(void)
{
    char *t = NULL;
    size_t n = 0;
    assert_int_equal(lcx__scope_read_file(g_proj, "inner/a.c", 1 << 20, &t, &n), 0);
    assert_non_null(strstr(t, "inner_ok"));
    free(t);
    const char *bad[] = {"leak.c", "vendor/x.c", "src/rel/x.c", "inroot.c", "../outside/secret.c",
                         "inner/../../outside/secret.c", "tossh/config"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        t = NULL;
        int rc = lcx__scope_read_file(g_proj, bad[i], 1 << 20, &t, &n);
        if (rc == 0) fprintf(stderr, "read %s: %.40s\n", bad[i], t);
        assert_true(rc < 0);
        assert_null(t);
    }
}

static void test_walk_confined(void **st) { (void)st; walk_all(); }
static void test_walk_start_links(void **st) { (void)st; walk_starts(); }
static void test_read_beneath(void **st) { (void)st; read_paths(); }

static void test_fallback_without_openat2(void **st)
{
    (void)st;
    lcx__walk_no_openat2 = true;
    walk_all();
    walk_starts();
    read_paths();
    lcx__walk_no_openat2 = false;
}

/* Rule files are read beneath the root too: a .gitignore that is a link to a file outside,
 * or a .git that is a link to an outside directory (its info/exclude), contributes no
 * rules. Both outside files say "ignore every .c": read, they would hide main.c. */
static void ignore_files_beneath(void)
{
    char proj[4400], t[8400];
    snprintf(proj, sizeof proj, "%s/ign", g_base);
    wr(proj, "main.c", "int main_ok(void) { return 0; }\n");
    wr(proj, "sub/b.c", "int sub_ok(void) { return 1; }\n");
    wr(g_out, "rules/gitignore", "*.c\n");
    wr(g_out, "fakegit/info/exclude", "*.c\n");
    snprintf(t, sizeof t, "%s/rules/gitignore", g_out);
    char p[8800];
    snprintf(p, sizeof p, "%s/.gitignore", proj);
    assert_int_equal(symlink(t, p), 0);
    snprintf(p, sizeof p, "%s/sub/.gitignore", proj);
    assert_int_equal(symlink(t, p), 0);
    snprintf(t, sizeof t, "%s/fakegit", g_out);
    snprintf(p, sizeof p, "%s/.git", proj);
    assert_int_equal(symlink(t, p), 0);
    for (int pass = 0; pass < 2; pass++) {
        lcx__walk_no_openat2 = pass == 1;
        seen s = {.n = 0};
        lcx_walk_stats ws = {0};
        assert_int_equal(lcx__walk(proj, "", NULL, file_cb, NULL, &s, &ws), 0);
        assert_int_equal(s.n, 2);
        assert_string_equal(s.rel[0], "main.c");
        assert_string_equal(s.rel[1], "sub/b.c");
        seen_free(&s);
        /* a hot start below the root loads its ancestors' rule files the same way */
        assert_int_equal(lcx__walk(proj, "sub", NULL, file_cb, NULL, &s, &ws), 0);
        assert_int_equal(s.n, 1);
        seen_free(&s);
    }
    lcx__walk_no_openat2 = false;
    /* control: the same rules as a real file in the root do hide the .c files */
    snprintf(p, sizeof p, "%s/.gitignore", proj);
    assert_int_equal(unlink(p), 0);
    wr(proj, ".gitignore", "*.c\n");
    seen s = {.n = 0};
    lcx_walk_stats ws = {0};
    assert_int_equal(lcx__walk(proj, "", NULL, file_cb, NULL, &s, &ws), 0);
    for (int i = 0; i < s.n; i++) fprintf(stderr, "  control walked %s\n", s.rel[i]);
    assert_int_equal(s.n, 1);   /* the rule file itself */
    assert_string_equal(s.rel[0], ".gitignore");
    seen_free(&s);
}

static void test_ignore_files_beneath(void **st) { (void)st; ignore_files_beneath(); }

static void test_secret_names(void **st)
{
    (void)st;
    for (size_t i = 0; i < sizeof secret_files / sizeof *secret_files; i++) {
        char p[512];
        snprintf(p, sizeof p, "/p/src/%s", secret_files[i]);
        if (!lcx_scope_is_secret(p)) fail_msg("%s is not a secret", p);
    }
    for (size_t i = 0; i < sizeof forbidden / sizeof *forbidden; i++) {
        char p[512];
        snprintf(p, sizeof p, "/p/%s/x.c", forbidden[i]);
        if (!lcx_scope_is_secret(p)) fail_msg("%s is not forbidden", p);
    }
    /* ordinary source files with similar names stay indexable */
    const char *ok[] = {"/p/src/credentials.py", "/p/src/env.c", "/p/src/keys.go", "/p/src/pem.rs",
                        "/p/src/npmrc.md", "/p/kube/deploy.yaml", "/p/docs/secrets.md"};
    for (size_t i = 0; i < sizeof ok / sizeof *ok; i++)
        if (lcx_scope_is_secret(ok[i])) fail_msg("%s is wrongly a secret", ok[i]);
}

static void test_root_into_forbidden(void **st)
{
    (void)st;
    char p[8400], canon[4096];
    const char *why = NULL;
    snprintf(p, sizeof p, "%s/tossh", g_proj);
    assert_int_equal(lcx_scope_canonical(p, canon, sizeof canon, &why), LCX_EINVAL);
    assert_string_equal(why, "forbidden");
}

/* End to end: index the project, then nothing of the outside or secret files is in it. */
static void test_index_end_to_end(void **st)
{
    (void)st;
    char *data = tu_tmpdir();
    lcx_scopes_opts o = lcx_scopes_defaults();
    o.data_dir = data;
    o.watch = false;
    lcx_scopes *m;
    assert_int_equal(lcx_scopes_open(&o, g_emb, &m), 0);
    lcx_scope_info inf;
    const char *why = NULL;
    assert_int_equal(lcx_scopes_index(m, g_proj, NULL, NULL, &inf, &why), 0);
    assert_int_equal(inf.files, 3);
    lcx_code_request rq = lcx_code_request_init();
    rq.query = OUT_TOKEN " " SECRET_TOKEN " password leaked outside_secret outside_lib";
    rq.query_len = strlen(rq.query);
    rq.explicit_scope = g_proj;
    rq.top_k = 20;
    lcx_code_result res;
    assert_int_equal(lcx_code_retrieve(m, &rq, &res), 0);
    for (int i = 0; i < res.n_hits; i++) {
        assert_null(strstr(res.hits[i].text, OUT_TOKEN));
        assert_null(strstr(res.hits[i].text, SECRET_TOKEN));
    }
    lcx_code_result_free(&res);
    char p[8400];
    snprintf(p, sizeof p, "%s/tossh", g_proj);
    assert_true(lcx_scopes_index(m, p, NULL, NULL, &inf, &why) < 0);
    assert_string_equal(why, "forbidden");
    lcx_scopes_close(m);
    tu_rmrf(data);
    free(data);
}

/* Every absolute path in msg must appear in what the caller sent. */
static void assert_paths_sent(const char *msg, const char *sent, const char *data_dir)
{
    assert_null(strstr(msg, data_dir));
    for (const char *c = msg; *c; c++) {
        if (*c != '/' || (c > msg && c[-1] != ' ' && c[-1] != '\'' && c[-1] != '"' && c[-1] != '(')) continue;
        size_t L = strcspn(c, " '\":,()");
        char tok[4096];
        snprintf(tok, sizeof tok, "%.*s", (int)(L < sizeof tok ? L : sizeof tok - 1), c);
        if (!strstr(sent, tok)) fail_msg("message names a path the caller did not send: %s (message: %s)", tok, msg);
        c += L ? L - 1 : 0;
    }
}

static long http_err(int port, const char *method, const char *path, const char *body, const char *data_dir)
{
    char url[8800];
    snprintf(url, sizeof url, "http://127.0.0.1:%d%s", port, path);
    tu_resp r;
    const char *hdr[] = {"Content-Type: application/json", NULL};
    tu_http(method, url, body, body ? strlen(body) : 0, body ? hdr : NULL, &r);
    long st = r.status;
    cJSON *j = cJSON_Parse(r.body);
    if (st >= 400) {
        const cJSON *e = cJSON_GetObjectItemCaseSensitive(j, "error");
        const cJSON *msg = cJSON_GetObjectItemCaseSensitive(e, "message");
        if (!cJSON_IsString(msg)) fail_msg("%s %s: %ld without a JSON error: %s", method, path, st, r.body);
        char sent[16384];
        snprintf(sent, sizeof sent, "%s %s", path, body ? body : "");
        assert_paths_sent(msg->valuestring, sent, data_dir);
        assert_null(strstr(msg->valuestring, g_out));
        assert_null(strstr(msg->valuestring, "/home/.ssh"));
    }
    cJSON_Delete(j);
    tu_resp_free(&r);
    return st;
}

static void test_http_messages(void **st)
{
    (void)st;
    char *data = tu_tmpdir();
    int port = tu_free_port();
    char ps[16], log[4200];
    snprintf(ps, sizeof ps, "%d", port);
    snprintf(log, sizeof log, "%s.log", data);
    char *argv[] = {(char *)tu_bin("longctx-svc"), "serve", "--host", "127.0.0.1", "--port", ps,
                    "--data-dir", data, "--quiet", NULL};
    pid_t pid = tu_spawn(argv, NULL, log);
    assert_true(pid > 0);
    assert_true(tu_wait_http(port, "/healthz", 20000));
    char path[8800], body[9000];
    snprintf(path, sizeof path, "/index?scope=%s/tossh", g_proj);
    assert_int_equal(http_err(port, "POST", path, NULL, data), 403);
    snprintf(path, sizeof path, "/index?scope=%s/vendor", g_proj);   /* a link out: its target is not named */
    long s1 = http_err(port, "POST", path, NULL, data);
    assert_true(s1 == 200 || s1 >= 400);
    snprintf(path, sizeof path, "/index?scope=%s/missing/dir", g_proj);
    assert_int_equal(http_err(port, "POST", path, NULL, data), 404);
    snprintf(path, sizeof path, "/index?scope=%s/main.c", g_proj);
    assert_true(http_err(port, "POST", path, NULL, data) >= 400);
    assert_true(http_err(port, "POST", "/index?scope=relative/dir", NULL, data) >= 400);
    snprintf(path, sizeof path, "/retrieve?scope=%s/tossh&query=Host", g_proj);
    assert_true(http_err(port, "POST", path, NULL, data) >= 400);
    snprintf(body, sizeof body, "{\"scope\":\"%s/secrets\"}", g_proj);
    assert_true(http_err(port, "POST", "/index", body, data) >= 400);
    snprintf(path, sizeof path, "/index?scope=%s", g_proj);
    assert_int_equal(http_err(port, "POST", path, NULL, data), 200);
    assert_int_equal(tu_kill_wait(pid, SIGTERM, 20000) & 0x7f, 0);
    unlink(log);
    tu_rmrf(data);
    free(data);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_walk_confined),
        cmocka_unit_test(test_walk_start_links),
        cmocka_unit_test(test_read_beneath),
        cmocka_unit_test(test_fallback_without_openat2),
        cmocka_unit_test(test_ignore_files_beneath),
        cmocka_unit_test(test_secret_names),
        cmocka_unit_test(test_root_into_forbidden),
        cmocka_unit_test(test_index_end_to_end),
        cmocka_unit_test(test_http_messages),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
