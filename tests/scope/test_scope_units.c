/* src/scope pure parts: wildmatch/.gitignore (tables + conformance against `git ls-files`
 * on generated trees), walker filters, scope detection tables, chunkers, symbols. */
#include "testutil.h"
#if defined(__GNUC__) && !defined(__clang__)   /* gcc-only warning */
#pragma GCC diagnostic ignored "-Wformat-truncation"
#endif
#include "scope/scope_int.h"
#include "util/util.h"
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void wr(const char *dir, const char *rel, const char *text)
{
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s/%s", dir, rel);
    assert_int_equal(tu_write(p, text, strlen(text)), 0);
}

static void mkd(const char *dir, const char *rel)
{
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s/%s/.keep", dir, rel);
    assert_int_equal(tu_write(p, "", 0), 0);
    unlink(p);
}

/* ---------------------------------------------------------------- wildmatch table */
static void test_wildmatch(void **st)
{
    static const struct { const char *pat, *text; bool m; } t[] = {
        {"foo", "foo", 1}, {"foo", "bar", 0}, {"*", "foo", 1}, {"*", "a/b", 0},
        {"f*", "foo", 1}, {"*o", "foo", 1}, {"?oo", "foo", 1}, {"?", "/", 0},
        {"a/*", "a/b", 1}, {"a/*", "a/b/c", 0}, {"a/**", "a/b/c", 1}, {"a/**", "a", 0},
        {"**/c", "c", 1}, {"**/c", "a/b/c", 1}, {"a/**/c", "a/c", 1}, {"a/**/c", "a/x/y/c", 1},
        {"a/**/c", "b/a/c", 0}, {"a**b", "axb", 1}, {"a**b", "a/b", 0},
        {"[ab]x", "ax", 1}, {"[ab]x", "cx", 0}, {"[!ab]x", "cx", 1}, {"[^ab]x", "ax", 0},
        {"[a-c]", "b", 1}, {"[a-c]", "d", 0}, {"[[:digit:]]x", "7x", 1}, {"[[:alpha:]]", "7", 0},
        {"\\*", "*", 1}, {"\\*", "a", 0}, {"\\#a", "#a", 1}, {"a\\ ", "a ", 1},
        {"*.c", "x.c", 1}, {"*.c", "d/x.c", 0}, {"[]]", "]", 1}, {"[a-]", "-", 1},
    };
    for (size_t i = 0; i < sizeof t / sizeof *t; i++) {
        if (lcx__wildmatch(t[i].pat, t[i].text) != t[i].m)
            fail_msg("wildmatch(%s, %s) != %d", t[i].pat, t[i].text, t[i].m);
    }
}

/* ---------------------------------------------------------------- gitignore table */
static void test_ignore_table(void **st)
{
    static const struct { const char *gi, *base, *path; bool dir; int want; } t[] = {
        {"*.o\n", "", "a/b.o", 0, 1},
        {"*.o\n!keep.o\n", "", "keep.o", 0, -1},
        {"/top\n", "", "top", 0, 1},
        {"/top\n", "", "a/top", 0, 0},
        {"build/\n", "", "x/build", 1, 1},
        {"build/\n", "", "x/build", 0, 0},          /* dir-only pattern vs a file */
        {"a/b\n", "", "a/b", 0, 1},
        {"a/b\n", "", "x/a/b", 0, 0},               /* middle slash anchors */
        {"**/logs\n", "", "x/y/logs", 1, 1},
        {"logs/**\n", "", "logs/a/b", 0, 1},
        {"# comment\n", "", "# comment", 0, 0},
        {"\\#hash\n", "", "#hash", 0, 1},
        {"\\!bang\n", "", "!bang", 0, 1},
        {"trail   \n", "", "trail", 0, 1},          /* trailing spaces dropped */
        {"sp\\ \n", "", "sp ", 0, 1},               /* escaped space kept */
        {"sp\\ \n", "", "sp", 0, 0},
        {"*.log\n", "sub", "sub/x.log", 0, 1},
        {"*.log\n", "sub", "other/x.log", 0, 0},    /* rules only below their directory */
        {"/x\n", "sub", "sub/x", 0, 1},
        {"/x\n", "sub", "sub/y/x", 0, 0},
        {"*.c\n!*.c\n*.c\n", "", "a.c", 0, 1},      /* last line wins */
        {"\n\n  \n", "", "a", 0, 0},
        {"a/**/b\n", "", "a/b", 0, 1},
        {"doc/*.txt\n", "", "doc/x/y.txt", 0, 0},
    };
    for (size_t i = 0; i < sizeof t / sizeof *t; i++) {
        lcx_ignore *ig;
        assert_int_equal(lcx__ignore_parse(t[i].gi, strlen(t[i].gi), t[i].base, &ig), 0);
        int r = lcx__ignore_match(ig, t[i].path, t[i].dir);
        lcx__ignore_free(ig);
        if (r != t[i].want) fail_msg("row %zu: '%s' on %s → %d want %d", i, t[i].gi, t[i].path, r, t[i].want);
    }
}

/* ---------------------------------------------------------------- conformance vs git */
typedef struct { char **v; int n, cap; } strv;
static void sv_add(strv *s, const char *x)
{
    if (s->n == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 64;
        s->v = realloc(s->v, s->cap * sizeof *s->v);
    }
    s->v[s->n++] = strdup(x);
}
static void sv_free(strv *s) { for (int i = 0; i < s->n; i++) free(s->v[i]); free(s->v); memset(s, 0, sizeof *s); }
static int cmps(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }
static int collect(const char *rel, const struct stat *st, void *ud) { sv_add(ud, rel); return 0; }

static uint64_t rng = 88172645463325252ull;
static uint32_t rnd(uint32_t n) { rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17; return (uint32_t)(rng % n); }

static void conformance_tree(const char *d, bool fixed)
{
    static const char *dirs[] = {"a", "b", "a/b", "a/c", "b/a", "a/b/c", "doc", "doc/x", "c d", "logs", "a/logs"};
    static const char *files[] = {"x.c", "y.h", "z.txt", "keep.c", "README", "foo.o", "#hash", "!bang",
                                  "sp ", "ab", "ba", "notes.md", "t1", "t2"};
    static const char *pats[] = {
        "*.c", "!keep.c", "/a", "a/", "b/", "**/b", "a/**/c", "a/**", "*.o", "!*.o", "doc/*.txt",
        "/doc", "logs/", "**/logs/", "[ab]", "[!a]*.h", "t?", "\\#hash", "\\!bang", "sp\\ ", "z.txt  ",
        "!/a/b", "*", "!*/", "!a", "c/", "/c d", "README", "# comment", "", "x/", "!x.c", "a/b",
        "*/c", "**/*.md", "!notes.md", "/*.h", "b/**/z.txt", "**", "!doc/", "t[0-9]", "!ab", "ba/", "a[b]",
    };
    if (fixed) {
        for (size_t i = 0; i < sizeof dirs / sizeof *dirs; i++)
            for (size_t j = 0; j < sizeof files / sizeof *files; j++) {
                char p[512];
                snprintf(p, sizeof p, "%s/%s", dirs[i], files[j]);
                wr(d, p, "x\n");
            }
        for (size_t j = 0; j < sizeof files / sizeof *files; j++) wr(d, files[j], "x\n");
        wr(d, ".gitignore", "*.o\n!keep.o\n/a/c\nlogs/\n\\#hash\n*.md\n!notes.md\nb/**/t1\nsp\\ \n");
        wr(d, "a/.gitignore", "!*.o\n*.c\n!keep.c\n/b/c/\n[!x]*.h\nz.txt   \n");
        wr(d, "a/b/.gitignore", "!z.txt\n**/t2\n");
        wr(d, "doc/.gitignore", "*\n!x/\n!*.txt\n");
        return;
    }
    int nf = 20 + (int)rnd(30);
    for (int i = 0; i < nf; i++) {
        char p[512];
        const char *dd = dirs[rnd(sizeof dirs / sizeof *dirs)];
        snprintf(p, sizeof p, "%s%s%s", rnd(4) ? dd : "", rnd(4) ? "/" : "", files[rnd(sizeof files / sizeof *files)]);
        const char *q = p[0] == '/' ? p + 1 : p;
        wr(d, q, "x\n");
    }
    int ng = 1 + (int)rnd(4);
    for (int g = 0; g < ng; g++) {
        char gi[2048] = "";
        int np = 1 + (int)rnd(6);
        for (int k = 0; k < np; k++) {
            strcat(gi, pats[rnd(sizeof pats / sizeof *pats)]);
            strcat(gi, "\n");
        }
        char p[512];
        int which = (int)rnd(1 + sizeof dirs / sizeof *dirs);
        if (which == 0) snprintf(p, sizeof p, ".gitignore");
        else snprintf(p, sizeof p, "%s/.gitignore", dirs[which - 1]);
        wr(d, p, gi);
    }
}

static void git_compare(const char *d, int seed)
{
    char cmd[8192];
    char *out = NULL;
    snprintf(cmd, sizeof cmd,
             "cd '%s' && git -c init.defaultBranch=main init -q . && "
             "git -c core.excludesFile=/dev/null -c core.quotePath=false ls-files -z -o --exclude-standard | tr '\\0' '\\n'",
             d);
    assert_int_equal(tu_run(cmd, &out), 0);
    strv g = {0}, w = {0};
    for (char *s = out, *e; *s; s = e + 1) {
        e = strchr(s, '\n');
        if (!e) break;
        *e = 0;
        sv_add(&g, s);
    }
    free(out);
    lcx_walk_stats wst = {0};
    lcx_walk_opts o = {.max_file_bytes = 5u << 20, .recursive = true};
    assert_int_equal(lcx__walk(d, "", &o, collect, NULL, &w, &wst), 0);
    if (g.n > 1) qsort(g.v, g.n, sizeof *g.v, cmps);
    if (w.n > 1) qsort(w.v, w.n, sizeof *w.v, cmps);
    int i = 0, j = 0, bad = 0;
    while (i < g.n || j < w.n) {
        int c = i >= g.n ? 1 : j >= w.n ? -1 : strcmp(g.v[i], w.v[j]);
        if (c == 0) { i++; j++; continue; }
        if (bad++ < 5) fprintf(stderr, "seed %d: %s only in %s\n", seed, c < 0 ? g.v[i] : w.v[j], c < 0 ? "git" : "walker");
        if (c < 0) i++; else j++;
    }
    if (bad) {
        snprintf(cmd, sizeof cmd, "cd '%s' && for f in $(find . -name .gitignore); do echo \"== $f\"; cat \"$f\"; done >&2", d);
        tu_run(cmd, &out);
        free(out);
    }
    sv_free(&g);
    sv_free(&w);
    assert_int_equal(bad, 0);
}

static void test_ignore_vs_git(void **st)
{
    char *d = tu_tmpdir();
    conformance_tree(d, true);
    git_compare(d, -1);
    tu_rmrf(d);
    free(d);
    for (int seed = 0; seed < 40; seed++) {
        d = tu_tmpdir();
        conformance_tree(d, false);
        git_compare(d, seed);
        tu_rmrf(d);
        free(d);
    }
}

/* ---------------------------------------------------------------- walker */
static void test_walker_filters(void **st)
{
    char *d = tu_tmpdir();
    wr(d, "src/main.c", "int main(void) { return 0; }\n");
    wr(d, "README.md", "# hi\n");
    wr(d, ".github/workflows/ci.yml", "on: push\n");
    wr(d, ".hidden/x.c", "x\n");
    wr(d, "node_modules/p/index.js", "x\n");
    wr(d, ".venv/lib.py", "x\n");
    wr(d, "venv/lib.py", "x\n");
    wr(d, "__pycache__/m.pyc", "x\n");
    wr(d, "dist/out.js", "x\n");
    wr(d, "build/out.o", "x\n");
    wr(d, "target/debug/x", "x\n");
    wr(d, ".git/config", "x\n");
    wr(d, ".env", "SECRET=1\n");
    wr(d, ".env.local", "SECRET=1\n");
    wr(d, "conf/server.key", "k\n");
    wr(d, "conf/cert.pem", "k\n");
    wr(d, "conf/id_rsa", "k\n");
    wr(d, "conf/id_rsa.pub", "k\n");
    wr(d, "conf/id_ed25519", "k\n");
    wr(d, "conf/store.p12", "k\n");
    wr(d, "conf/store.pfx", "k\n");
    wr(d, "deploy/secrets/token.txt", "k\n");
    wr(d, "deploy/credentials/aws.json", "k\n");
    wr(d, "package-lock.json", "{}\n");
    wr(d, "Cargo.lock", "x\n");
    wr(d, "yarn.lock", "x\n");
    wr(d, "ok/notes.txt", "fine\n");
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s/src/main.c", d);
    char l[PATH_MAX];
    snprintf(l, sizeof l, "%s/link.c", d);
    assert_int_equal(symlink(p, l), 0);
    snprintf(p, sizeof p, "%s/src", d);
    snprintf(l, sizeof l, "%s/linkdir", d);
    assert_int_equal(symlink(p, l), 0);
    /* > 5 MiB (sparse) */
    snprintf(p, sizeof p, "%s/big.c", d);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    assert_int_equal(ftruncate(fileno(f), (5 << 20) + 1), 0);
    fclose(f);
    wr(d, "exact.c", "");
    snprintf(p, sizeof p, "%s/exact.c", d);
    assert_int_equal(truncate(p, 5 << 20), 0);   /* exactly 5 MiB: allowed by the walker (NULs → binary) */
    strv w = {0};
    lcx_walk_stats ws = {0};
    lcx_walk_opts o = {.max_file_bytes = 5u << 20, .recursive = true};
    assert_int_equal(lcx__walk(d, "", &o, collect, NULL, &w, &ws), 0);
    if (w.n > 1) qsort(w.v, w.n, sizeof *w.v, cmps);
    const char *want[] = {".github/workflows/ci.yml", "README.md", "exact.c", "ok/notes.txt", "src/main.c"};
    for (int i = 0; i < w.n; i++) fprintf(stderr, "  walked %s\n", w.v[i]);
    assert_int_equal(w.n, 5);
    for (int i = 0; i < 5; i++) assert_string_equal(w.v[i], want[i]);
    assert_int_equal(ws.skipped_symlink, 2);
    assert_int_equal(ws.skipped_large, 1);
    assert_int_equal(ws.skipped_lock, 3);
    /* .env .env.local key pem id_rsa id_rsa.pub id_ed25519 p12 pfx + secrets/ credentials/ */
    assert_int_equal(ws.skipped_secret, 11);
    sv_free(&w);
    /* lcx_scope_count_files: the same filters, stopped at max */
    assert_int_equal(lcx_scope_count_files(d, 5u << 20, 1000), 5);
    assert_int_equal(lcx_scope_count_files(d, 5u << 20, 3), 3);
    assert_int_equal(lcx_scope_count_files(d, (5u << 20) - 1, 1000), 4);   /* exact.c is over that */
    assert_int_equal(lcx_scope_count_files(d, 5u << 20, 0), 0);
    /* walking a start dir below an ignored/skipped dir yields nothing */
    assert_int_equal(lcx__walk(d, "node_modules/p", &o, collect, NULL, &w, &ws), 0);
    assert_int_equal(w.n, 0);
    assert_int_equal(lcx__walk(d, "deploy/secrets", &o, collect, NULL, &w, &ws), 0);
    assert_int_equal(w.n, 0);
    assert_true(lcx_scope_is_secret("a/b/.env.prod"));
    assert_true(lcx_scope_is_secret("/home/u/.ssh/config"));
    assert_true(lcx_scope_is_secret("x/.gnupg/pubring.kbx"));
    assert_true(lcx_scope_is_secret("/x/.aws/config"));
    assert_false(lcx_scope_is_secret("src/keys.c"));
    assert_false(lcx_scope_is_secret("src/environment.c"));
    tu_rmrf(d);
    free(d);
}

static void test_read_file(void **st)
{
    char *d = tu_tmpdir();
    char p[PATH_MAX];
    char *t;
    size_t n;
    wr(d, "ok.c", "int x; // café\n");
    snprintf(p, sizeof p, "%s/ok.c", d);
    assert_int_equal(lcx__scope_read_file(d, p + strlen(d) + 1, 5 << 20, &t, &n), 0);
    assert_int_equal(n, strlen("int x; // café\n"));
    free(t);
    snprintf(p, sizeof p, "%s/nul.bin", d);
    assert_int_equal(tu_write(p, "ab\0cd", 5), 0);
    assert_int_equal(lcx__scope_read_file(d, p + strlen(d) + 1, 5 << 20, &t, &n), LCX_ENOTSUP);
    snprintf(p, sizeof p, "%s/latin1.txt", d);
    assert_int_equal(tu_write(p, "caf\xe9\n", 5), 0);
    assert_int_equal(lcx__scope_read_file(d, p + strlen(d) + 1, 5 << 20, &t, &n), LCX_ENOTSUP);
    /* invalid byte after the first 8 KB: kept, byte replaced by '?' */
    char *big = malloc(9001);
    memset(big, 'a', 9000);
    big[8500] = (char)0xff;
    snprintf(p, sizeof p, "%s/late.txt", d);
    assert_int_equal(tu_write(p, big, 9000), 0);
    assert_int_equal(lcx__scope_read_file(d, p + strlen(d) + 1, 5 << 20, &t, &n), 0);
    assert_int_equal(t[8500], '?');
    assert_true(lcx__utf8_valid(t, n));
    free(t);
    free(big);
    /* a multibyte char cut by the 8 KB boundary is not binary */
    big = malloc(8200);
    memset(big, 'a', 8200);
    memcpy(big + 8191, "\xc3\xa9", 2);
    assert_int_equal(tu_write(p, big, 8200), 0);
    assert_int_equal(lcx__scope_read_file(d, p + strlen(d) + 1, 5 << 20, &t, &n), 0);
    free(t);
    free(big);
    assert_int_equal(lcx__scope_read_file(d, p + strlen(d) + 1, 100, &t, &n), LCX_ELIMIT);
    snprintf(p, sizeof p, "%s/missing", d);
    assert_int_equal(lcx__scope_read_file(d, p + strlen(d) + 1, 100, &t, &n), LCX_ENOTFOUND);
    /* a symlink is never followed */
    char l[PATH_MAX];
    snprintf(p, sizeof p, "%s/ok.c", d);
    snprintf(l, sizeof l, "%s/l.c", d);
    assert_int_equal(symlink(p, l), 0);
    assert_int_equal(lcx__scope_read_file(d, l + strlen(d) + 1, 100, &t, &n), LCX_ESTATE);
    tu_rmrf(d);
    free(d);
}

/* ---------------------------------------------------------------- detection */
static char *g_root;   /* canonical tmp dir for detection tests */

static void detect_expect(const char *text, const char *def, const char *want_rel, const char *want_sent)
{
    lcx_scope_detection det;
    char defp[PATH_MAX];
    if (def) snprintf(defp, sizeof defp, "%s/%s", g_root, def);
    assert_int_equal(lcx_scope_detect(text, strlen(text), def ? defp : NULL, &det), 0);
    if (!want_rel) {
        if (det.scope_path) fail_msg("text [%s]: expected no scope, got %s", text, det.scope_path);
    } else {
        char want[PATH_MAX];
        snprintf(want, sizeof want, "%s%s%s", g_root, *want_rel ? "/" : "", want_rel);
        if (!det.scope_path || strcmp(det.scope_path, want))
            fail_msg("text [%s]: scope %s, want %s", text, det.scope_path ? det.scope_path : "(none)", want);
        if (want_sent) assert_string_equal(det.sentinel, want_sent);
        char h[17];
        lcx_scope_hash(want, h);
        assert_string_equal(det.scope_hash, h);
    }
    lcx_scope_detection_free(&det);
}

static void test_detect(void **st)
{
    char *d0 = tu_tmpdir();
    char rp[PATH_MAX];
    assert_non_null(realpath(d0, rp));
    g_root = rp;
    const char *R = rp;
    mkd(R, "repo/.git");
    wr(R, "repo/src/a.c", "x\n");
    wr(R, "repo/src/b.c", "x\n");
    wr(R, "repo/lib/Makefile", "x\n");      /* nested Makefile must not win over .git */
    wr(R, "repo/lib/c.c", "x\n");
    mkd(R, "other/.git");
    wr(R, "other/x.py", "x\n");
    mkd(R, "mono/.git");
    wr(R, "mono/packages/a/package.json", "{}\n");
    wr(R, "mono/packages/a/src/i.js", "x\n");
    wr(R, "mono/packages/a/src/j.js", "x\n");
    wr(R, "mono/packages/b/package.json", "{}\n");
    wr(R, "mono/packages/b/k.js", "x\n");
    wr(R, "cproj/Makefile", "x\n");
    wr(R, "cproj/src/m.c", "x\n");
    wr(R, "acproj/configure.ac", "x\n");
    wr(R, "acproj/src/m.c", "x\n");
    wr(R, "cm/CMakeLists.txt", "x\n");
    wr(R, "cm/Makefile", "x\n");            /* order: Makefile before CMakeLists.txt */
    wr(R, "cm/m.c", "x\n");
    wr(R, "py/pyproject.toml", "x\n");
    wr(R, "py/sub/Makefile", "x\n");
    wr(R, "py/sub/q.py", "x\n");
    wr(R, "nosent/z.c", "x\n");
    char buf[8192];
#define T(fmt, ...) (snprintf(buf, sizeof buf, fmt, __VA_ARGS__), buf)
    detect_expect(T("see %s/repo/src/a.c", R), NULL, "repo", ".git");
    /* trailing punctuation and line suffixes */
    detect_expect(T("crash in %s/repo/src/a.c: line 3.", R), NULL, "repo", ".git");
    detect_expect(T("(%s/repo/src/a.c), ok?", R), NULL, "repo", ".git");
    detect_expect(T("at `%s/repo/src/a.c:42:7`!", R), NULL, "repo", ".git");
    detect_expect(T("file=\"%s/repo/src/new_file.c\"", R), NULL, "repo", ".git");   /* not existing yet */
    /* nested Makefile under a .git root → repo (sentinel order), not repo/lib */
    detect_expect(T("%s/repo/lib/c.c", R), NULL, "repo", ".git");
    /* several roots: most mentioned wins; tie → first */
    detect_expect(T("%s/other/x.py and %s/repo/src/a.c and %s/repo/src/b.c", R, R, R), NULL, "repo", NULL);
    detect_expect(T("%s/other/x.py and %s/repo/src/a.c", R, R), NULL, "other", NULL);
    /* monorepo */
    detect_expect(T("%s/mono/packages/a/src/i.js %s/mono/packages/a/src/j.js", R, R), NULL, "mono/packages/a", "package.json");
    detect_expect(T("%s/mono/packages/a/src/i.js %s/mono/packages/b/k.js", R, R), NULL, "mono", ".git");
    /* C sentinels */
    detect_expect(T("%s/cproj/src/m.c", R), NULL, "cproj", "Makefile");
    detect_expect(T("%s/acproj/src/m.c", R), NULL, "acproj", "configure.ac");
    detect_expect(T("%s/cm/m.c", R), NULL, "cm", "Makefile");
    /* pyproject.toml outranks a nearer Makefile */
    detect_expect(T("%s/py/sub/q.py", R), NULL, "py", "pyproject.toml");
    /* no sentinel anywhere, no paths, URLs */
    detect_expect(T("%s/nosent/z.c", R), NULL, NULL, NULL);
    detect_expect("just a question about life", NULL, NULL, NULL);
    detect_expect("see https://example.com/repo/src/a.c and //x/y", NULL, NULL, NULL);
    /* relative paths: only with a default scope, only when they exist */
    detect_expect("look at src/a.c please", NULL, NULL, NULL);
    detect_expect("look at src/a.c please", "repo", "repo", ".git");
    detect_expect("look at missing/zz.c please", "other", NULL, NULL);  /* default_scope alone never pins */
    detect_expect("look at packages/a/src/i.js", "mono", "mono/packages/a", "package.json");
    /* symlinks canonicalise to the real root */
    char l[PATH_MAX], t[PATH_MAX];
    snprintf(t, sizeof t, "%s/repo", R);
    snprintf(l, sizeof l, "%s/linkrepo", R);
    assert_int_equal(symlink(t, l), 0);
    detect_expect(T("%s/linkrepo/src/a.c", R), NULL, "repo", ".git");
    /* mentions list holds canonical paths under the scope */
    lcx_scope_detection det;
    T("%s/repo/src/a.c %s/repo/src/a.c %s/linkrepo/src/b.c", R, R, R);
    assert_int_equal(lcx_scope_detect(buf, strlen(buf), NULL, &det), 0);
    assert_int_equal(det.n_mentions, 2);
    assert_int_equal(det.n_candidates, 3);
    snprintf(t, sizeof t, "%s/repo/src/b.c", R);
    assert_string_equal(det.mentions[1], t);
    lcx_scope_detection_free(&det);
    /* scope_hash = first 16 hex of sha256(path), against Python's hashlib */
    char cmd[PATH_MAX + 200], *out = NULL;
    snprintf(cmd, sizeof cmd, "%s -c 'import hashlib,sys;print(hashlib.sha256(sys.argv[1].encode()).hexdigest()[:16])' '%s/repo'",
             getenv("LCX_PY") ? getenv("LCX_PY") : "/usr/bin/python3", R);
    assert_int_equal(tu_run(cmd, &out), 0);
    snprintf(t, sizeof t, "%s/repo", R);
    char h[17];
    lcx_scope_hash(t, h);
    assert_int_equal(strncmp(out, h, 16), 0);
    free(out);
    /* canonical scope checks */
    char c[PATH_MAX];
    const char *why;
    assert_int_equal(lcx_scope_canonical("relative/dir", c, sizeof c, &why), LCX_EINVAL);
    assert_string_equal(why, "bad_scope");
    snprintf(t, sizeof t, "%s/nope", R);
    assert_int_equal(lcx_scope_canonical(t, c, sizeof c, &why), LCX_ENOTFOUND);
    assert_string_equal(why, "not_found");
    snprintf(t, sizeof t, "%s/repo/src/a.c", R);
    assert_int_equal(lcx_scope_canonical(t, c, sizeof c, &why), LCX_EINVAL);
    assert_string_equal(why, "bad_scope");
    mkd(R, "x/secrets/inner");
    snprintf(t, sizeof t, "%s/x/secrets/inner", R);
    assert_int_equal(lcx_scope_canonical(t, c, sizeof c, &why), LCX_EINVAL);
    assert_string_equal(why, "forbidden");
    mkd(R, "h/.ssh");
    snprintf(t, sizeof t, "%s/h/.ssh", R);
    assert_int_equal(lcx_scope_canonical(t, c, sizeof c, &why), LCX_EINVAL);
    assert_string_equal(why, "forbidden");
    /* a symlink INTO a forbidden dir is caught after realpath */
    snprintf(l, sizeof l, "%s/innocent", R);
    assert_int_equal(symlink(t, l), 0);
    assert_int_equal(lcx_scope_canonical(l, c, sizeof c, &why), LCX_EINVAL);
    assert_string_equal(why, "forbidden");
    assert_int_equal(lcx_scope_canonical("/", c, sizeof c, &why), LCX_EINVAL);
    assert_int_equal(lcx_scope_canonical("/proc/self", c, sizeof c, &why), LCX_EINVAL);
    /* whole system folders are refused, a project folder below them is not */
    static const char *const sysdirs[] = {"/usr", "/usr/", "/home", "/etc", "/etc/ssl", "/tmp", "/var/lib", "/usr/share"};
    for (size_t i = 0; i < sizeof sysdirs / sizeof *sysdirs; i++) {
        if (access(sysdirs[i], X_OK) != 0) continue;
        assert_int_equal(lcx_scope_canonical(sysdirs[i], c, sizeof c, &why), LCX_EINVAL);
        assert_string_equal(why, "forbidden");
    }
    if (access("/usr/include", X_OK) == 0) assert_int_equal(lcx_scope_canonical("/usr/include", c, sizeof c, &why), 0);
    snprintf(t, sizeof t, "%s/linkrepo/", R);
    assert_int_equal(lcx_scope_canonical(t, c, sizeof c, &why), 0);
    snprintf(t, sizeof t, "%s/repo", R);
    assert_string_equal(c, t);
    /* mentions of secret files never pick a scope through them */
    wr(R, "repo/.env", "X=1\n");
    detect_expect(T("%s/repo/.env", R), NULL, NULL, NULL);
#undef T
    tu_rmrf(d0);
    free(d0);
}

/* ---------------------------------------------------------------- chunkers */
static char *lines(int n, const char *fmt)
{
    lcx_buf b = {0};
    for (int i = 1; i <= n; i++) lcx__buf_printf(&b, fmt, i);
    return lcx__buf_steal(&b, NULL);
}

static void test_chunk_code(void **st)
{
    lcx_span *s;
    int n;
    struct { int lines; int n; uint32_t r[4][2]; } t[] = {
        {1, 1, {{1, 1}}}, {50, 1, {{1, 50}}}, {51, 2, {{1, 50}, {46, 51}}},
        {95, 2, {{1, 50}, {46, 95}}}, {120, 3, {{1, 50}, {46, 95}, {91, 120}}},
    };
    for (size_t k = 0; k < sizeof t / sizeof *t; k++) {
        char *txt = lines(t[k].lines, "line %d\n");
        assert_int_equal(lcx__chunk_text(txt, strlen(txt), LCX_FT_CODE, &s, &n), 0);
        assert_int_equal(n, t[k].n);
        for (int i = 0; i < n; i++) {
            assert_int_equal(s[i].line_start, t[k].r[i][0]);
            assert_int_equal(s[i].line_end, t[k].r[i][1]);
            char first[32], last[32];
            snprintf(first, sizeof first, "line %u\n", s[i].line_start);
            snprintf(last, sizeof last, "line %u", s[i].line_end);
            assert_memory_equal(txt + s[i].off, first, strlen(first) - (s[i].line_start == s[i].line_end));
            assert_memory_equal(txt + s[i].off + s[i].len - strlen(last), last, strlen(last));
            assert_int_not_equal(txt[s[i].off + s[i].len - 1], '\n');
        }
        free(s);
        free(txt);
    }
    /* no trailing newline; blank text */
    assert_int_equal(lcx__chunk_text("a\nb", 3, LCX_FT_CODE, &s, &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(s[0].len, 3);
    assert_int_equal(s[0].line_end, 2);
    free(s);
    assert_int_equal(lcx__chunk_text(" \n\n\t\n", 5, LCX_FT_CODE, &s, &n), 0);
    assert_int_equal(n, 0);
    free(s);
    /* config: whole file ≤ 50 lines, windows beyond */
    char *cfg = lines(50, "k%d: v\n");
    assert_int_equal(lcx__chunk_text(cfg, strlen(cfg), LCX_FT_CONFIG, &s, &n), 0);
    assert_int_equal(n, 1);
    free(s);
    free(cfg);
    cfg = lines(80, "k%d: v\n");
    assert_int_equal(lcx__chunk_text(cfg, strlen(cfg), LCX_FT_CONFIG, &s, &n), 0);
    assert_int_equal(n, 2);
    assert_int_equal(s[1].line_start, 46);
    free(s);
    free(cfg);
    assert_int_equal(lcx__file_type_of("a/b.md"), LCX_FT_PROSE);
    assert_int_equal(lcx__file_type_of("a/b.RST"), LCX_FT_PROSE);
    assert_int_equal(lcx__file_type_of("notes.org"), LCX_FT_PROSE);
    assert_int_equal(lcx__file_type_of("a.yaml"), LCX_FT_CONFIG);
    assert_int_equal(lcx__file_type_of("a.toml"), LCX_FT_CONFIG);
    assert_int_equal(lcx__file_type_of("x/CMakeLists.txt"), LCX_FT_CODE);
    assert_int_equal(lcx__file_type_of("x/Makefile"), LCX_FT_CODE);
    assert_int_equal(lcx__file_type_of("main.rs"), LCX_FT_CODE);
}

/* The line index (memchr based) against a byte-by-byte reference on random texts: many
 * very short lines (the index must grow), blank runs, with and without a final newline.
 * Code windows: 50 lines, step 45, blank windows dropped, the last newline excluded. */
static void test_chunk_random(void **st)
{
    uint64_t r = 0x9e3779b97f4a7c15ull;
    for (int it = 0; it < 300; it++) {
        r = r * 6364136223846793005ull + 1442695040888963407ull;
        size_t len = (size_t)(r >> 33) % 6000;
        char *t = malloc(len + 1);
        for (size_t i = 0; i < len; i++) {
            r = r * 6364136223846793005ull + 1442695040888963407ull;
            unsigned v = (unsigned)(r >> 40) % 100;
            t[i] = v < (it % 3 == 0 ? 60u : 8u) ? '\n' : v < 70 ? ' ' : (char)('a' + v % 26);
        }
        t[len] = 0;
        /* reference line starts */
        size_t *ls = malloc((len + 2) * sizeof *ls);
        uint32_t nl = 0;
        ls[nl++] = 0;
        for (size_t i = 0; i + 1 < len; i++)
            if (t[i] == '\n') ls[nl++] = i + 1;
        if (!len) nl = 0;
        ls[nl] = len;
        lcx_span *sp;
        int n;
        assert_int_equal(lcx__chunk_text(t, len, LCX_FT_CODE, &sp, &n), 0);
        int k = 0;
        for (uint32_t a = 1; nl && a <= nl; a += 45) {
            uint32_t b = a + 49 < nl ? a + 49 : nl;
            size_t off = ls[a - 1], end = ls[b];
            if (end > off && t[end - 1] == '\n') end--;
            bool blank = true;
            for (size_t i = off; i < end; i++) blank &= t[i] == ' ' || t[i] == '\n';
            if (!blank) {
                assert_true(k < n);
                assert_int_equal(sp[k].line_start, a);
                assert_int_equal(sp[k].line_end, b);
                assert_int_equal(sp[k].off, off);
                assert_int_equal(sp[k].len, end - off);
                k++;
            }
            if (b >= nl) break;
        }
        assert_int_equal(n, k);
        free(sp);
        free(ls);
        free(t);
    }
}

static void test_chunk_prose(void **st)
{
    /* paragraphs of 20, 20, 20 lines separated by blank lines: 1-20 + 22-41 fit in 41
     * lines; the third (43-62) starts a new group. A 60-line paragraph is windowed. */
    lcx_buf b = {0};
    int ln = 0;
    for (int p = 0; p < 3; p++) {
        for (int i = 0; i < 20; i++) lcx__buf_printf(&b, "para %d line %d\n", p, ++ln);
        lcx__buf_puts(&b, "\n");
        ln++;
    }
    for (int i = 0; i < 60; i++) lcx__buf_printf(&b, "long line %d\n", ++ln);
    lcx__buf_puts(&b, "\n\n");
    ln += 2;
    lcx__buf_printf(&b, "tail\n");
    ln++;
    lcx_span *s;
    int n;
    assert_int_equal(lcx__chunk_text(b.data, b.len, LCX_FT_PROSE, &s, &n), 0);
    uint32_t want[][2] = {{1, 41}, {43, 62}, {64, 113}, {109, 123}, {126, 126}};
    for (int i = 0; i < n; i++) fprintf(stderr, "  prose %u-%u\n", s[i].line_start, s[i].line_end);
    assert_int_equal(n, 5);
    for (int i = 0; i < n; i++) {
        assert_int_equal(s[i].line_start, want[i][0]);
        assert_int_equal(s[i].line_end, want[i][1]);
    }
    assert_memory_equal(b.data + s[4].off, "tail", 4);
    assert_int_equal(s[4].len, 4);
    free(s);
    lcx__buf_free(&b);
}

/* ---------------------------------------------------------------- symbols */
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
typedef struct { const char *name; uint32_t line; int kind; const char *owner; } sym_want;

static void sym_check(const char *path, const char *src, const sym_want *w, int nw)
{
    lcx_symbol *s;
    int n = lcx__symbols_extract(path, src, strlen(src), &s);
    assert_true(n >= 0);
    for (int i = 0; i < nw; i++) {
        bool found = false;
        for (int j = 0; j < n && !found; j++)
            found = !strcmp(s[j].name, w[i].name) && s[j].line == w[i].line && s[j].kind == w[i].kind &&
                    (!w[i].owner || !strcmp(s[j].owner, w[i].owner));
        if (!found) {
            for (int j = 0; j < n; j++)
                fprintf(stderr, "  %s: %s:%u %s owner=%s\n", path, s[j].name, s[j].line, lcx__symbol_kind_name(s[j].kind), s[j].owner);
            fail_msg("%s: missing %s (line %u, kind %d)", path, w[i].name, w[i].line, w[i].kind);
        }
    }
    free(s);
}

static void sym_absent(const char *path, const char *src, const char *name)
{
    lcx_symbol *s;
    int n = lcx__symbols_extract(path, src, strlen(src), &s);
    for (int j = 0; j < n; j++)
        if (!strcmp(s[j].name, name)) fail_msg("%s: %s should not be a definition", path, name);
    free(s);
}

static void test_symbols(void **st)
{
    const char *c =
        "#include <stdio.h>\n"                       /* 1 */
        "#define MAX_ITEMS 32\n"                     /* 2 */
        "typedef struct http_header {\n"             /* 3 */
        "    int n;\n"                               /* 4 */
        "} http_header_t;\n"                         /* 5 */
        "static int parse_header(const char *p)\n"   /* 6 */
        "{\n"                                        /* 7 */
        "    if (p) return helper(p);\n"             /* 8 */
        "    return 0;\n"                            /* 9 */
        "}\n"                                        /* 10 */
        "int\n"                                      /* 11 */
        "gnu_style (void)\n"                         /* 12 */
        "{ return 1; }\n"                            /* 13 */
        "int declared_only(int x);\n"                /* 14 */
        "enum color { RED };\n"                      /* 15 */
        "typedef int (*cb_fn)(void *);\n"            /* 16 */
        "void Server::start(int port) {\n"           /* 17 */
        "struct node *make_node(int v)\n"            /* 18 */
        "class Widget : public Base {\n"             /* 19 */
        "/* int commented_out(void)\n"               /* 20 */
        "int still_comment(void) */\n"               /* 21 */
        "int x = compute(3);\n";                     /* 22 */
    sym_want cw[] = {{"MAX_ITEMS", 2, LCX_SYM_MACRO}, {"http_header", 3, LCX_SYM_STRUCT},
                     {"http_header_t", 5, LCX_SYM_TYPE}, {"parse_header", 6, LCX_SYM_FUNC},
                     {"gnu_style", 12, LCX_SYM_FUNC}, {"color", 15, LCX_SYM_ENUM},
                     {"cb_fn", 16, LCX_SYM_TYPE}, {"start", 17, LCX_SYM_METHOD, "Server"},
                     {"make_node", 18, LCX_SYM_FUNC}, {"Widget", 19, LCX_SYM_CLASS}};
    sym_check("src/x.c", c, cw, sizeof cw / sizeof *cw);
    sym_absent("src/x.c", c, "declared_only");
    sym_absent("src/x.c", c, "helper");
    sym_absent("src/x.c", c, "commented_out");
    sym_absent("src/x.c", c, "still_comment");
    sym_absent("src/x.c", c, "compute");
    const char *py =
        "import os\n"
        "class TokenCache(Base):\n"
        "    def get_token(self, k):\n"
        "        return k\n"
        "    async def refresh(self):\n"
        "        pass\n"
        "def top_level(x):\n"
        "    def inner():\n"
        "        pass\n";
    sym_want pw[] = {{"TokenCache", 2, LCX_SYM_CLASS}, {"get_token", 3, LCX_SYM_METHOD, "TokenCache"},
                     {"refresh", 5, LCX_SYM_METHOD, "TokenCache"}, {"top_level", 7, LCX_SYM_FUNC},
                     {"inner", 8, LCX_SYM_FUNC}};
    sym_check("pkg/m.py", py, pw, sizeof pw / sizeof *pw);
    const char *js =
        "export default class HttpServer extends Base {\n"
        "  constructor(port) { this.port = port; }\n"
        "  async start(opts) {\n"
        "    if (x) {\n"
        "    }\n"
        "  }\n"
        "}\n"
        "export function handleRequest(req, res) {\n"
        "const makeRouter = (routes) => {\n"
        "export const loadConfig = async function() {\n"
        "interface RouteSpec {\n"
        "export type Handler = (r: Req) => void;\n"
        "let count = 0;\n"
        "export enum Mode { A }\n";
    sym_want jw[] = {{"HttpServer", 1, LCX_SYM_CLASS}, {"start", 3, LCX_SYM_METHOD, "HttpServer"},
                     {"handleRequest", 8, LCX_SYM_FUNC}, {"makeRouter", 9, LCX_SYM_FUNC},
                     {"loadConfig", 10, LCX_SYM_FUNC}, {"RouteSpec", 11, LCX_SYM_TYPE},
                     {"Handler", 12, LCX_SYM_TYPE}, {"Mode", 14, LCX_SYM_ENUM}};
    sym_check("web/server.ts", js, jw, sizeof jw / sizeof *jw);
    sym_absent("web/server.ts", js, "count");
    sym_absent("web/server.ts", js, "if");
    const char *go =
        "package main\n"
        "type Server struct {\n"
        "type ID int\n"
        "func (s *Server) Serve(l net.Listener) error {\n"
        "func NewServer() *Server {\n";
    sym_want gw[] = {{"Server", 2, LCX_SYM_STRUCT}, {"ID", 3, LCX_SYM_TYPE},
                     {"Serve", 4, LCX_SYM_METHOD, "Server"}, {"NewServer", 5, LCX_SYM_FUNC}};
    sym_check("cmd/main.go", go, gw, sizeof gw / sizeof *gw);
    const char *rs =
        "pub struct Parser<'a> {\n"
        "pub(crate) enum Token {\n"
        "impl<'a> Parser<'a> {\n"
        "    pub fn parse_expr(&mut self) -> Expr {\n"
        "    }\n"
        "}\n"
        "impl fmt::Display for Token {\n"
        "    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {\n"
        "}\n"
        "pub async fn run_server() {\n"
        "macro_rules! my_macro {\n"
        "pub trait Visitor {\n";
    sym_want rw[] = {{"Parser", 1, LCX_SYM_STRUCT}, {"Token", 2, LCX_SYM_ENUM},
                     {"parse_expr", 4, LCX_SYM_METHOD, "Parser"}, {"fmt", 8, LCX_SYM_METHOD, "Token"},
                     {"run_server", 10, LCX_SYM_FUNC}, {"my_macro", 11, LCX_SYM_MACRO},
                     {"Visitor", 12, LCX_SYM_TYPE}};
    sym_check("src/lib.rs", rs, rw, sizeof rw / sizeof *rw);
    const char *java =
        "package a;\n"
        "public final class OrderService {\n"
        "    private final Map<String, List<Order>> cache;\n"
        "    public List<Order> findOrders(String id) throws IOException {\n"
        "        if (id == null) {\n"
        "        return repo.load(id);\n"
        "    }\n"
        "    OrderService(Repo r) {\n"
        "}\n"
        "interface Repo {\n";
    sym_want jvw[] = {{"OrderService", 2, LCX_SYM_CLASS}, {"findOrders", 4, LCX_SYM_METHOD, "OrderService"},
                      {"Repo", 10, LCX_SYM_CLASS}};
    sym_check("src/OrderService.java", java, jvw, sizeof jvw / sizeof *jvw);
    sym_absent("src/OrderService.java", java, "load");
    sym_absent("src/OrderService.java", java, "if");
    const char *sw =
        "import Foundation\n"
        "public final class ImageLoader {\n"
        "    @MainActor func load(url: URL) async throws -> Image {\n"
        "    }\n"
        "}\n"
        "struct Point {\n"
        "protocol Drawable {\n"
        "func globalHelper() {\n"
        "extension Point {\n"
        "    static func origin() -> Point {\n";
    sym_want sww[] = {{"ImageLoader", 2, LCX_SYM_CLASS}, {"load", 3, LCX_SYM_METHOD, "ImageLoader"},
                      {"Point", 6, LCX_SYM_STRUCT}, {"Drawable", 7, LCX_SYM_TYPE},
                      {"globalHelper", 8, LCX_SYM_FUNC}, {"origin", 10, LCX_SYM_METHOD, "Point"}};
    sym_check("App/ImageLoader.swift", sw, sww, sizeof sww / sizeof *sww);
    /* unknown language → nothing */
    lcx_symbol *s;
    assert_int_equal(lcx__symbols_extract("notes.md", "def x():\n", 9, &s), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_wildmatch),     cmocka_unit_test(test_ignore_table),
        cmocka_unit_test(test_ignore_vs_git), cmocka_unit_test(test_walker_filters),
        cmocka_unit_test(test_read_file),     cmocka_unit_test(test_detect),
        cmocka_unit_test(test_chunk_code),    cmocka_unit_test(test_chunk_prose), cmocka_unit_test(test_chunk_random),
        cmocka_unit_test(test_symbols),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
