/* Conformance with the reference service (docs/compat.md), library level: the scope
 * resolution table (path extraction rules, de-dup by exact string, relative paths only
 * with default_scope, default_scope alone never pins), explicit-scope canonicalisation,
 * the path-cluster tracker across turns, and the splice's exact budget edge cases. */
#include "testutil.h"
#if defined(__GNUC__) && !defined(__clang__)   /* gcc-only warning */
#pragma GCC diagnostic ignored "-Wformat-truncation"
#endif
#include "longctx/lcx_scope.h"
#include "scope/scope_int.h"
#include "scope/scopes_int.h"
#include "util/util.h"
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char g_root[PATH_MAX];   /* canonical, under /tmp (one of the reference's prefixes) */

static void wr(const char *rel, const char *text)
{
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s/%s", g_root, rel);
    assert_int_equal(tu_write(p, text, strlen(text)), 0);
}

static int setup(void **st)
{
    (void)st;
    char tmpl[] = "/tmp/lcxcompat.XXXXXX";   /* not $TMPDIR: the prefix rule needs /tmp */
    if (!mkdtemp(tmpl) || !realpath(tmpl, g_root)) return -1;
    if (strncmp(g_root, "/tmp/", 5)) return -1;
    wr("a/.git/HEAD", "x\n");
    wr("a/src/one.c", "x\n");
    wr("a/src/two.c", "x\n");
    wr("b/.git/HEAD", "x\n");
    wr("b/x.py", "x\n");
    wr("b/y.py", "x\n");
    wr("b/lib/longname.extension", "x\n");
    return 0;
}

static int teardown(void **st)
{
    (void)st;
    tu_rmrf(g_root);
    return 0;
}

/* scope of text (relative to g_root; NULL = none) */
static void expect(const char *text, const char *def_rel, const char *want_rel)
{
    char def[PATH_MAX];
    if (def_rel) snprintf(def, sizeof def, "%s/%s", g_root, def_rel);
    lcx_scope_detection d;
    assert_int_equal(lcx_scope_detect(text, strlen(text), def_rel ? def : NULL, &d), 0);
    if (!want_rel) {
        if (d.scope_path) fail_msg("[%s]: expected no scope, got %s", text, d.scope_path);
    } else {
        char want[PATH_MAX];
        snprintf(want, sizeof want, "%s/%s", g_root, want_rel);
        if (!d.scope_path || strcmp(d.scope_path, want))
            fail_msg("[%s]: scope %s, want %s", text, d.scope_path ? d.scope_path : "(none)", want);
    }
    lcx_scope_detection_free(&d);
}

static void test_resolution_table(void **st)
{
    (void)st;
    const char *R = g_root;
    char t[8192];
#define T(...) (snprintf(t, sizeof t, __VA_ARGS__), t)
    /* boundaries: start, whitespace, quotes, backtick, '(' — nothing else */
    expect(T("%s/a/src/one.c", R), NULL, "a");
    expect(T("see '%s/a/src/one.c'", R), NULL, "a");
    expect(T("see \"%s/a/src/one.c\"", R), NULL, "a");
    expect(T("see `%s/a/src/one.c`", R), NULL, "a");
    expect(T("see (%s/a/src/one.c)", R), NULL, "a");
    expect(T("see [%s/a/src/one.c]", R), NULL, NULL);    /* '[' is not a boundary */
    expect(T("see x=%s/a/src/one.c", R), NULL, NULL);    /* nor '=' */
    expect(T("see dir%s/a/src/one.c", R), NULL, NULL);
    /* the path ends at ')' or ']'; trailing .,;:!? stripped */
    expect(T("(%s/a/src/one.c) and %s/a/src/two.c]", R, R), NULL, "a");
    expect(T("in %s/a/src/one.c?!.", R), NULL, "a");
    /* only the reference's top-level directories are looked for */
    expect("see /etc/hosts and /proc/self/maps", NULL, NULL);
    /* de-dup by exact string: one path said three times loses to two distinct paths */
    expect(T("%s/a/src/one.c %s/a/src/one.c %s/a/src/one.c %s/b/x.py %s/b/y.py", R, R, R, R, R), NULL, "b");
    /* ties → the first mentioned */
    expect(T("%s/b/x.py %s/a/src/one.c", R, R), NULL, "b");
    /* relative paths: only with default_scope, word(/seg)+.ext, extension ≤ 8, existing */
    expect("look at src/one.c", NULL, NULL);
    expect("look at src/one.c", "a", "a");
    expect("look at one.c", "a/src", NULL);                  /* no '/' */
    expect("look at lib/longname.extension", "b", NULL);     /* extension of 9 */
    expect("look at src/missing.c", "a", NULL);              /* must exist */
    /* default_scope alone never pins a scope */
    expect("what does this project do?", "a", NULL);
#undef T
    /* paths are reported distinct, in order; roots of every project mentioned */
    snprintf(t, sizeof t, "%s/a/src/one.c %s/b/x.py %s/a/src/one.c", R, R, R);
    lcx_scope_detection d;
    assert_int_equal(lcx_scope_detect(t, strlen(t), NULL, &d), 0);
    assert_int_equal(d.n_paths, 2);
    assert_int_equal(d.n_roots, 2);
    char w[PATH_MAX];
    snprintf(w, sizeof w, "%s/b", R);
    assert_string_equal(d.roots[1], w);
    lcx_scope_detection_free(&d);
}

static void test_canon_loose(void **st)
{
    (void)st;
    char in[PATH_MAX * 2], out[PATH_MAX], want[PATH_MAX];
    snprintf(in, sizeof in, "%s/a/src/../../b/", g_root);
    assert_int_equal(lcx__scope_canon_loose(in, out, sizeof out), 0);
    snprintf(want, sizeof want, "%s/b", g_root);
    assert_string_equal(out, want);
    snprintf(in, sizeof in, "%s/a/not/there/", g_root);   /* need not exist */
    assert_int_equal(lcx__scope_canon_loose(in, out, sizeof out), 0);
    snprintf(want, sizeof want, "%s/a/not/there", g_root);
    assert_string_equal(out, want);
    char link[PATH_MAX], tgt[PATH_MAX];
    snprintf(link, sizeof link, "%s/lnk", g_root);
    snprintf(tgt, sizeof tgt, "%s/a", g_root);
    assert_int_equal(symlink(tgt, link), 0);
    snprintf(in, sizeof in, "%s/lnk/src", g_root);
    assert_int_equal(lcx__scope_canon_loose(in, out, sizeof out), 0);
    snprintf(want, sizeof want, "%s/a/src", g_root);
    assert_string_equal(out, want);
    char cwd[PATH_MAX];
    assert_non_null(getcwd(cwd, sizeof cwd));
    assert_int_equal(chdir(g_root), 0);
    assert_int_equal(lcx__scope_canon_loose("a/./src", out, sizeof out), 0);   /* relative: the cwd */
    assert_string_equal(out, want);
    assert_int_equal(chdir(cwd), 0);
    assert_int_equal(lcx__scope_canon_loose("", out, sizeof out), LCX_EINVAL);
}

static lcx_scopes *open_mgr(char *data, lcx_embedder **emb)
{
    assert_int_equal(lcx_embedder_hash_new(0, emb), 0);
    lcx_scopes_opts o = lcx_scopes_defaults();
    o.data_dir = data;
    o.watch = false;
    lcx_scopes *m;
    assert_int_equal(lcx_scopes_open(&o, *emb, &m), 0);
    return m;
}

static void turn(lcx_scopes *m, const char *session, const char *dir, int from, int to, char *active, int *n_spec,
                 char (*spec)[LCX_SCOPE_PATH_MAX])
{
    char *paths[16], buf[16][256];
    int n = 0;
    for (int i = from; i < to; i++) {
        snprintf(buf[n], sizeof buf[n], "%s/f%d.py", dir, i);
        paths[n] = buf[n];
        n++;
    }
    lcx__scopes_cluster_turn(m, session, paths, n, active, LCX_SCOPE_PATH_MAX, spec, n_spec);
}

static void test_clusters(void **st)
{
    (void)st;
    char *data = tu_tmpdir();
    lcx_embedder *emb;
    lcx_scopes *m = open_mgr(data, &emb);
    char active[LCX_SCOPE_PATH_MAX], spec[LCX_CLUSTER_SPECULATE][LCX_SCOPE_PATH_MAX];
    int ns;
    const char *D = "/data/proj/pkg/mod";
    /* 3 distinct files: a speculative candidate, not active */
    turn(m, "s", D, 0, 3, active, &ns, spec);
    assert_string_equal(active, "");
    assert_int_equal(ns, 1);
    assert_string_equal(spec[0], D);
    /* the same files again are no fresh mention */
    turn(m, "s", D, 0, 3, active, &ns, spec);
    assert_string_equal(active, "");
    assert_int_equal(ns, 0);
    /* a second turn with a fresh mention: active */
    turn(m, "s", D, 3, 4, active, &ns, spec);
    assert_string_equal(active, D);
    /* turns without a fresh mention: still active for 4, demoted at the 5th */
    for (int i = 0; i < 4; i++) {
        turn(m, "s", D, 0, 0, active, &ns, spec);
        assert_string_equal(active, D);
    }
    turn(m, "s", D, 0, 0, active, &ns, spec);
    assert_string_equal(active, "");
    /* 5 files in one turn: active at once; sessions are isolated */
    turn(m, "t", "/data/q/r/s", 0, 5, active, &ns, spec);
    assert_string_equal(active, "/data/q/r/s");
    turn(m, "u", "/data/q/r/s", 0, 0, active, &ns, spec);
    assert_string_equal(active, "");
    /* too shallow (depth 2) never pins a scope */
    turn(m, "v", "/data/q", 0, 6, active, &ns, spec);
    assert_string_equal(active, "");
    lcx_scopes_close(m);
    lcx_embedder_free(emb);
    tu_rmrf(data);
    free(data);
}

static char *rep(char c, size_t n)
{
    char *s = malloc(n + 1);
    memset(s, c, n);
    s[n] = 0;
    return s;
}

#define HEAD "## Retrieved code context\n\n"   /* 27 characters */

static void test_splice_budget(void **st)
{
    (void)st;
    /* one oversize chunk: cut to budget − 27 − (len("// /p/a.c:1-2") + 12) = 16332 */
    lcx_code_hit h[5];
    memset(h, 0, sizeof h);
    char *big = rep('a', 20000);
    h[0].text = big;
    h[0].file_path = "/p/a.c";
    h[0].start_line = 1;
    h[0].end_line = 2;
    char *out;
    size_t n;
    assert_int_equal(lcx_code_splice(h, 1, 0, &out, &n), 0);
    assert_int_equal(n, 27 + 13 + 5 + 16332 + 16 + 6);
    assert_int_equal(strncmp(out, HEAD "// /p/a.c:1-2\n```\naaaa", 27 + 13 + 5 + 4), 0);
    assert_string_equal(out + 27 + 13 + 5 + 16332, "\n... [truncated]\n```\n\n");
    assert_int_equal(out[27 + 13 + 5 + 16331], 'a');
    free(out);
    /* budget exhausted mid-list: 3 whole blocks of 5000 (5024 each), the 4th cut to
     * 16384 − 15099 − 25 = 1260, the 5th dropped */
    char *t5 = rep('b', 5000);
    for (int i = 0; i < 5; i++) { h[i].text = t5; h[i].file_path = "/p/a.c"; h[i].start_line = 1; h[i].end_line = 2; }
    assert_int_equal(lcx_code_splice(h, 5, 0, &out, &n), 0);
    assert_int_equal(n, 15099 + 13 + 5 + 1260 + 16 + 6);
    int blocks = 0;
    for (const char *p = out; (p = strstr(p, "// /p/a.c:1-2\n")); p++) blocks++;
    assert_int_equal(blocks, 4);
    assert_non_null(strstr(out, "\n... [truncated]"));
    assert_null(strstr(strstr(out, "\n... [truncated]") + 1, "\n... [truncated]"));
    free(out);
    /* the ≤ 200 rule: exactly 200 left stops, 201 is used */
    h[0].text = big;
    assert_int_equal(lcx_code_splice(h, 1, 27 + 25 + 200, &out, &n), 0);
    assert_int_equal(n, 0);
    free(out);
    assert_int_equal(lcx_code_splice(h, 1, 27 + 25 + 201, &out, &n), 0);
    assert_int_equal(n, 27 + 13 + 5 + 201 + 16 + 6);
    free(out);
    /* a text that fits exactly is not marked */
    char *fit = rep('c', 201);
    h[0].text = fit;
    assert_int_equal(lcx_code_splice(h, 1, 27 + 25 + 201, &out, &n), 0);
    assert_null(strstr(out, "[truncated]"));
    free(out);
    /* characters, not bytes: 250 'é' (500 bytes) cut at 250 characters */
    char *u = malloc(2 * 300 + 1);
    for (int i = 0; i < 300; i++) { u[2 * i] = (char)0xc3; u[2 * i + 1] = (char)0xa9; }
    u[600] = 0;
    h[0].text = u;
    assert_int_equal(lcx_code_splice(h, 1, 27 + 25 + 250, &out, &n), 0);
    assert_int_equal(n, 27 + 13 + 5 + 500 + 16 + 6);
    assert_true(lcx__utf8_valid(out, n));
    free(out);
    free(u);
    free(fit);
    free(t5);
    free(big);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_resolution_table),
        cmocka_unit_test(test_canon_loose),
        cmocka_unit_test(test_clusters),
        cmocka_unit_test(test_splice_budget),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
