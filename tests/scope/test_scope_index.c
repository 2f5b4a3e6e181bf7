/* Scope manager + code retrieval: indexing, splice format and budget, symbol boosting,
 * Hot → Package promotion, persistence across processes (unchanged files not re-read),
 * fingerprint change, the inotify watcher (edit / delete / rename), ws: queries, secrets. */
#define _GNU_SOURCE 1   /* unshare */
#include "testutil.h"
#if defined(__GNUC__) && !defined(__clang__)   /* gcc-only warning */
#pragma GCC diagnostic ignored "-Wformat-truncation"
#endif
#include "longctx/lcx_scope.h"
#include "scope/scopes_int.h"   /* lcx__scopes_set_batch (multi-batch builds, checkpoints), promotion hooks */
#include "util/util.h"
#include <sched.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void wr(const char *dir, const char *rel, const char *text)
{
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s/%s", dir, rel);
    assert_int_equal(tu_write(p, text, strlen(text)), 0);
}

/* A small C/Python project: ~20 files, one definition buried deep in a long file, and a
 * file that calls it many times (so plain BM25 prefers the caller). */
static char *make_project(void)
{
    char *d0 = tu_tmpdir();
    char *d = realpath(d0, NULL);
    free(d0);
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s/.git/HEAD", d);
    assert_int_equal(tu_write(p, "ref: x\n", 7), 0);
    wr(d, "README.md", "# Demo project\n\nA tiny HTTP server used by the tests.\n\nIt parses headers.\n");
    wr(d, "config.json", "{\n  \"port\": 8080,\n  \"workers\": 4\n}\n");
    lcx_buf b = {0};
    for (int i = 0; i < 200; i++) lcx__buf_printf(&b, "static int filler_%d(int x) { return x * %d; }\n", i, i);
    lcx__buf_puts(&b, "int parse_header(const char *line, struct hdr *out)\n{\n    /* split name: value */\n"
                     "    const char *colon = strchr(line, ':');\n    if (!colon) return -1;\n    return 0;\n}\n");
    for (int i = 0; i < 100; i++) lcx__buf_printf(&b, "static int tail_%d(void) { return %d; }\n", i, i);
    wr(d, "src/http.c", b.data);
    lcx__buf_free(&b);
    for (int i = 0; i < 30; i++) lcx__buf_printf(&b, "    if (parse_header(lines[%d], &h) < 0) return -1; /* parse header line */\n", i);
    char *calls = lcx__buf_steal(&b, NULL);
    char txt[8192];
    snprintf(txt, sizeof txt, "#include \"http.h\"\nint handle_request(char **lines)\n{\n    struct hdr h;\n%s    return 0;\n}\n", calls);
    free(calls);
    wr(d, "src/server.c", txt);
    wr(d, "src/http.h", "struct hdr { char name[64]; char value[256]; };\nint parse_header(const char *line, struct hdr *out);\n");
    wr(d, "tools/cache.py", "class TokenCache:\n    def get_token(self, key):\n        return self.store.get(key)\n\n"
                            "    def refresh_tokens(self):\n        self.store.clear()\n\n\nclass Fetcher:\n    def fetch(self, url):\n        return url\n");
    for (int i = 0; i < 14; i++) {
        snprintf(p, sizeof p, "src/mod%02d.c", i);
        snprintf(txt, sizeof txt, "/* module %d */\nint module_%d_init(void)\n{\n    return %d;\n}\n", i, i, i * 7);
        wr(d, p, txt);
    }
    /* skipped and counted */
    wr(d, ".env", "API_KEY=SECRET_TOKEN_XYZ\n");
    wr(d, "secrets/prod.txt", "SECRET_TOKEN_XYZ\n");
    snprintf(p, sizeof p, "%s/blob.bin", d);
    assert_int_equal(tu_write(p, "SECRET\0binary", 13), 0);
    return d;
}

static lcx_embedder *g_emb;

static lcx_scopes *open_mgr(const char *data, bool watch)
{
    lcx_scopes_opts o = lcx_scopes_defaults();
    o.data_dir = data;
    o.watch = watch;
    o.debounce_ms = 50;
    lcx_scopes *m;
    assert_int_equal(lcx_scopes_open(&o, g_emb, &m), 0);
    return m;
}

static int retrieve(lcx_scopes *m, const char *prefill, const char *query, int k, const char *session,
                    lcx_code_result *r)
{
    lcx_code_request rq = lcx_code_request_init();
    rq.prefill = prefill;
    rq.prefill_len = prefill ? strlen(prefill) : 0;
    rq.query = query;
    rq.query_len = query ? strlen(query) : 0;
    rq.top_k = k;
    rq.session_id = session;
    return lcx_code_retrieve(m, &rq, r);
}

static bool any_hit_contains(const lcx_code_result *r, const char *needle)
{
    for (int i = 0; i < r->n_hits; i++)
        if (strstr(r->hits[i].text, needle)) return true;
    return false;
}

static bool any_hit_path(const lcx_code_result *r, const char *suffix)
{
    size_t n = strlen(suffix);
    for (int i = 0; i < r->n_hits; i++) {
        size_t l = strlen(r->hits[i].file_path);
        if (l >= n && !strcmp(r->hits[i].file_path + l - n, suffix)) return true;
    }
    return false;
}

static void test_splice_format(void **st)
{
    lcx_code_hit h[2] = {{.text = "int a;", .file_path = "/p/a.c", .start_line = 1, .end_line = 1},
                         {.text = "x", .file_path = "/p/b.md", .start_line = 3, .end_line = 9}};
    char *s;
    size_t n;
    assert_int_equal(lcx_code_splice(h, 2, 0, &s, &n), 0);
    assert_string_equal(s, "## Retrieved code context\n\n// /p/a.c:1-1\n```\nint a;\n```\n\n// /p/b.md:3-9\n```\nx\n```\n\n");
    assert_int_equal(n, strlen(s));
    free(s);
    assert_int_equal(lcx_code_splice(h, 0, 0, &s, &n), 0);
    assert_string_equal(s, "");
    free(s);
    /* the budget's edge cases (the reference's exact accounting) are in test_compat_units.c;
     * here: a cut block keeps its fences, and UTF-8 is never cut inside a character */
    char *u = malloc(60001);   /* 20,000 characters: more than the budget */
    for (int i = 0; i < 20000; i++) memcpy(u + 3 * i, "\xe2\x82\xac", 3);
    u[60000] = 0;
    lcx_code_hit hu[2] = {{.text = u, .file_path = "/p/u.txt", .start_line = 1, .end_line = 1}, h[0]};
    assert_int_equal(lcx_code_splice(hu, 2, 0, &s, &n), 0);
    assert_true(lcx__utf8_valid(s, n));
    assert_string_equal(s + n - strlen("\n... [truncated]\n```\n\n"), "\n... [truncated]\n```\n\n");
    assert_null(strstr(s, "/p/a.c"));   /* nothing fits after the cut block */
    free(s);
    free(u);
}

static void test_retrieve_basic(void **st)
{
    char *proj = make_project();
    char *data = tu_tmpdir();
    lcx_scopes *m = open_mgr(data, false);
    char prefill[PATH_MAX + 100];
    snprintf(prefill, sizeof prefill, "I am looking at %s/src/server.c.", proj);
    lcx_code_result r;
    assert_int_equal(retrieve(m, prefill, "how does parse_header split the line", 4, "sess1", &r), 0);
    assert_string_equal(r.scope.scope_path, proj);
    assert_string_equal(r.scope.sentinel, ".git");
    assert_string_equal(r.scope.status, "package");   /* < 50 files: the whole package */
    assert_int_equal(r.scope.files, 20);
    assert_int_equal(r.scope.skipped_binary, 1);
    assert_true(r.scope.skipped_secret >= 2);
    assert_true(r.n_hits >= 1 && r.n_hits <= 4);
    /* symbol-aware boosting: the DEFINITION comes first (not the caller that repeats it) */
    assert_true(r.hits[0].symbol_hit);
    assert_true(any_hit_path(&r, "/src/http.c"));
    assert_non_null(strstr(r.hits[0].text, "int parse_header(const char *line, struct hdr *out)\n{"));
    assert_true(r.hits[0].start_line <= 201 && r.hits[0].end_line >= 201);
    char want[PATH_MAX];
    snprintf(want, sizeof want, "%s/src/http.c", proj);
    assert_string_equal(r.hits[0].file_path, want);
    assert_float_equal(r.confidence, 1.0, 1e-6);
    snprintf(want, sizeof want, "## Retrieved code context\n\n// %s/src/http.c:%u-%u\n```\n", proj, r.hits[0].start_line,
             r.hits[0].end_line);
    assert_int_equal(strncmp(r.splice, want, strlen(want)), 0);
    assert_false(any_hit_contains(&r, "SECRET_TOKEN_XYZ"));
    lcx_code_result_free(&r);
    /* X.y form and Python methods */
    assert_int_equal(retrieve(m, prefill, "what does TokenCache.refresh_tokens do", 3, NULL, &r), 0);
    assert_true(r.hits[0].symbol_hit);
    assert_non_null(strstr(r.hits[0].text, "def refresh_tokens"));
    lcx_code_result_free(&r);
    /* a Capitalized class name counts when it is defined in few places */
    assert_int_equal(retrieve(m, prefill, "How does the Fetcher work? And Python", 3, NULL, &r), 0);
    assert_true(r.hits[0].symbol_hit);
    assert_non_null(strstr(r.hits[0].text, "class Fetcher"));
    lcx_code_result_free(&r);
    /* secrets are never indexed, whatever is asked */
    assert_int_equal(retrieve(m, prefill, "SECRET_TOKEN_XYZ API_KEY", 8, NULL, &r), 0);
    assert_false(any_hit_contains(&r, "SECRET_TOKEN_XYZ"));
    lcx_code_result_free(&r);
    /* session binding */
    char roots[4][LCX_SCOPE_PATH_MAX];
    assert_int_equal(lcx_scopes_session(m, "sess1", roots, 4), 1);
    assert_string_equal(roots[0], proj);
    /* bad input */
    assert_int_equal(retrieve(m, prefill, "", 4, NULL, &r), LCX_EINVAL);
    assert_string_equal(r.err_code, "bad_request");
    lcx_code_result_free(&r);
    assert_int_equal(retrieve(m, prefill, "x", 65, NULL, &r), LCX_EINVAL);
    lcx_code_result_free(&r);
    assert_int_equal(retrieve(m, prefill, "x", -1, NULL, &r), LCX_EINVAL);
    lcx_code_result_free(&r);
    lcx_code_request rq = lcx_code_request_init();
    rq.query = "x";
    rq.query_len = 1;
    char ex[PATH_MAX];
    snprintf(ex, sizeof ex, "%s/secrets", proj);
    rq.explicit_scope = ex;
    assert_int_equal(lcx_code_retrieve(m, &rq, &r), LCX_EINVAL);
    assert_string_equal(r.err_code, "forbidden");
    lcx_code_result_free(&r);
    rq.explicit_scope = "relative/path/not/there";   /* resolved against the cwd */
    assert_int_equal(lcx_code_retrieve(m, &rq, &r), LCX_ENOTFOUND);
    assert_string_equal(r.err_code, "not_found");
    lcx_code_result_free(&r);
    snprintf(ex, sizeof ex, "%s/nope", proj);
    rq.explicit_scope = ex;
    assert_int_equal(lcx_code_retrieve(m, &rq, &r), LCX_ENOTFOUND);
    assert_string_equal(r.err_code, "not_found");
    lcx_code_result_free(&r);
    /* explicit scope works without any path in the prompt */
    rq.explicit_scope = proj;
    rq.query = "module_7_init";
    rq.query_len = strlen(rq.query);
    assert_int_equal(lcx_code_retrieve(m, &rq, &r), 0);
    assert_true(r.n_hits >= 1);
    assert_non_null(strstr(r.hits[0].text, "module_7_init"));
    lcx_code_result_free(&r);
    /* no scope at all: success, nothing */
    assert_int_equal(retrieve(m, "no paths here", "anything", 4, NULL, &r), 0);
    assert_int_equal(r.n_hits, 0);
    assert_int_equal(r.n_scopes, 0);
    assert_string_equal(r.splice, "");
    lcx_code_result_free(&r);
    /* related chunks of a file exclude the file itself */
    snprintf(ex, sizeof ex, "%s/src/server.c", proj);
    assert_int_equal(lcx_code_related(m, ex, 3, &r), 0);
    assert_true(r.n_hits >= 1);
    assert_false(any_hit_path(&r, "/src/server.c"));
    lcx_code_result_free(&r);
    /* status text */
    char *txt;
    assert_true(lcx_scopes_status_text(m, &txt) > 0);
    snprintf(want, sizeof want, "[longctx] scope: %s (", proj);
    assert_non_null(strstr(txt, want));
    assert_non_null(strstr(txt, "[longctx] indexed: 20 files, "));
    free(txt);
    lcx_scopes_close(m);
    tu_rmrf(data);
    tu_rmrf(proj);
    free(data);
    free(proj);
}

/* How a child indexes: embedder dim, chunks per append batch (0 = default), manifest
 * checkpoint interval, and a crash (_exit from the progress callback, appends possibly in
 * flight) once this many files were applied (0 = none). */
typedef struct {
    int dim;
    uint32_t batch;
    double checkpoint_ms;
    uint64_t crash_after;
    int fly;
    uint32_t want_binary;
} child_opts;

static int crash_cb(uint64_t done, uint64_t found, uint64_t bytes, void *ud)
{
    (void)found; (void)bytes;
    if (done >= *(uint64_t *)ud) _exit(9);   /* a crash: nothing is closed or flushed */
    return 0;
}

/* Runs lcx_scopes_index in a child process; returns files_read_last (or -1; -9 when the
 * child crashed on purpose). */
static int index_child(const char *data, const char *proj, const child_opts *co, uint32_t *chunks, uint32_t *files)
{
    int fd[2];
    assert_int_equal(pipe(fd), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(fd[0]);
        lcx_embedder *e;
        if (lcx_embedder_hash_new(co->dim, &e) < 0) _exit(2);
        lcx_scopes_opts o = lcx_scopes_defaults();
        o.data_dir = data;
        o.watch = false;
        lcx_scopes *m;
        int rc = lcx_scopes_open(&o, e, &m);
        if (rc < 0) { fprintf(stderr, "child: lcx_scopes_open: %s\n", lcx_strerror(rc)); _exit(3); }
        if (co->batch) lcx__scopes_set_batch(m, co->batch, co->checkpoint_ms);
        if (co->fly) lcx__scopes_set_fly(m, co->fly);
        lcx_scope_info inf;
        uint64_t crash = co->crash_after;
        const char *why = NULL;
        if ((rc = lcx_scopes_index(m, proj, crash ? crash_cb : NULL, &crash, &inf, &why)) < 0) {
            fprintf(stderr, "child: lcx_scopes_index: %s (%s)\n", lcx_strerror(rc), why ? why : "");
            _exit(4);
        }
        uint32_t v[3] = {inf.files_read_last, inf.chunks, inf.files};
        if (co->batch && inf.skipped_binary != co->want_binary) _exit(6);   /* skip-and-count in batches */
        if (write(fd[1], v, sizeof v) != sizeof v) _exit(5);
        lcx_scopes_close(m);
        lcx_embedder_free(e);
        _exit(0);
    }
    close(fd[1]);
    uint32_t v[3] = {UINT32_MAX, 0, 0};
    ssize_t n = read(fd[0], v, sizeof v);
    close(fd[0]);
    int status;
    waitpid(pid, &status, 0);
    if (co->crash_after && WIFEXITED(status) && WEXITSTATUS(status) == 9) return -9;
    if (!WIFEXITED(status) || WEXITSTATUS(status))
        fprintf(stderr, "index child: %s %d\n", WIFEXITED(status) ? "exit" : "signal",
                WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    assert_int_equal(n, sizeof v);
    if (chunks) *chunks = v[1];
    if (files) *files = v[2];
    return (int)v[0];
}

static int index_in_child(const char *data, const char *proj, int dim, uint32_t *chunks)
{
    child_opts co = {.dim = dim};
    return index_child(data, proj, &co, chunks, NULL);
}

static void test_persistence(void **st)
{
    char *proj = make_project();
    char *data = tu_tmpdir();
    uint32_t c1, c2;
    assert_int_equal(index_in_child(data, proj, 0, &c1), 20);   /* cold: every file read */
    assert_int_equal(index_in_child(data, proj, 0, &c2), 0);    /* fresh process: nothing re-read */
    assert_int_equal(c1, c2);
    /* one changed file is re-read (and only it) */
    wr(proj, "src/mod03.c", "/* module 3 */\nint module_3_init(void) { return 42; } /* giraffe_marker */\n");
    assert_int_equal(index_in_child(data, proj, 0, &c2), 1);
    assert_int_equal(c2, c1);
    /* touched but identical: read once to compare hashes, chunks untouched */
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s/src/mod04.c", proj);
    struct timespec ts[2] = {{0, UTIME_NOW}, {time(NULL) + 5, 0}};
    assert_int_equal(utimensat(AT_FDCWD, p, ts, 0), 0);
    assert_int_equal(index_in_child(data, proj, 0, &c2), 1);
    assert_int_equal(index_in_child(data, proj, 0, &c2), 0);
    /* a new file and a deleted one */
    wr(proj, "src/new.c", "int brand_new_function(void) { return 1; }\n");
    snprintf(p, sizeof p, "%s/src/mod05.c", proj);
    assert_int_equal(unlink(p), 0);
    assert_int_equal(index_in_child(data, proj, 0, &c2), 1);
    /* the reloaded index has the new content and not the deleted file */
    lcx_scopes *m = open_mgr(data, false);
    lcx_code_result r;
    char prefill[PATH_MAX + 64];
    snprintf(prefill, sizeof prefill, "see %s/src/http.c", proj);
    assert_int_equal(retrieve(m, prefill, "giraffe_marker module 3", 3, NULL, &r), 0);
    assert_true(any_hit_contains(&r, "giraffe_marker"));
    lcx_code_result_free(&r);
    assert_int_equal(retrieve(m, prefill, "module_5_init", 8, NULL, &r), 0);
    assert_false(any_hit_contains(&r, "module_5_init"));
    lcx_code_result_free(&r);
    assert_int_equal(retrieve(m, prefill, "brand_new_function", 2, NULL, &r), 0);
    assert_true(any_hit_contains(&r, "brand_new_function"));
    lcx_code_result_free(&r);
    lcx_scopes_close(m);
    /* another embedder (dim 128): fingerprint mismatch → rebuilt from scratch, still correct */
    assert_int_equal(index_in_child(data, proj, 128, &c2), 20);
    assert_int_equal(index_in_child(data, proj, 128, &c2), 0);
    /* a corrupted manifest is detected (crc) and the scope rebuilt */
    char h[17], mp[PATH_MAX];
    lcx_scope_hash(proj, h);
    snprintf(mp, sizeof mp, "%s/scopes/%s/manifest", data, h);
    FILE *f = fopen(mp, "r+");
    assert_non_null(f);
    fseek(f, 20, SEEK_SET);
    fputc('#', f);
    fclose(f);
    assert_int_equal(index_in_child(data, proj, 128, &c2), 20);
    tu_rmrf(data);
    tu_rmrf(proj);
    free(data);
    free(proj);
}

/* A project of n C files of 60 lines (2 chunks each: 50-line windows, step 45), each
 * defining big_fn_<i> at line 30, plus a binary file and an empty one. */
static char *make_big_project(int n)
{
    char *d0 = tu_tmpdir();
    char *d = realpath(d0, NULL);
    free(d0);
    wr(d, "go.mod", "module big\n");
    for (int i = 0; i < n; i++) {
        lcx_buf b = {0};
        for (int l = 1; l <= 60; l++) {
            if (l == 30) lcx__buf_printf(&b, "int big_fn_%03d(int x) { return x + %d; }\n", i, i);
            else lcx__buf_printf(&b, "/* file %d line %d filler text */\n", i, l);
        }
        char rel[64];
        snprintf(rel, sizeof rel, "src/f%03d.c", i);
        wr(d, rel, b.data);
        lcx__buf_free(&b);
    }
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s/blob.bin", d);
    assert_int_equal(tu_write(p, "ab\0cd", 5), 0);
    wr(d, "empty.c", "");
    return d;
}

/* The symbol pull of big_fn_<i> must land on the chunk of src/f<i>.c that defines it:
 * it goes through the file's first_id/n_chunks, which batched appends fill in late. */
static void check_big_symbols(const char *data, const char *proj, int n)
{
    lcx_scopes *m = open_mgr(data, false);
    char prefill[PATH_MAX + 64];
    snprintf(prefill, sizeof prefill, "see %s/src/f000.c", proj);
    for (int i = 0; i < n; i += 7) {
        char q[64], want[64], path[64];
        snprintf(q, sizeof q, "where is big_fn_%03d defined", i);
        snprintf(want, sizeof want, "int big_fn_%03d(int x)", i);
        snprintf(path, sizeof path, "/src/f%03d.c", i);
        lcx_code_result r;
        assert_int_equal(retrieve(m, prefill, q, 2, NULL, &r), 0);
        assert_true(r.n_hits >= 1);
        assert_true(r.hits[0].symbol_hit);
        assert_non_null(strstr(r.hits[0].text, want));
        assert_non_null(strstr(r.hits[0].file_path, path));
        lcx_code_result_free(&r);
    }
    lcx_scopes_close(m);
}

/* Pipelined build with many small batches (one or two appends in flight, a manifest
 * checkpoint after every append) gives the same scope as
 * one big batch, reloads without re-reading, and refreshes only changed files. */
static void test_batched_build(void **st)
{
    const int n = 150;
    char *proj = make_big_project(n);
    char *d1 = tu_tmpdir(), *d2 = tu_tmpdir();
    uint32_t c1, c2, f1, f2;
    child_opts one = {0}, many = {.batch = 7, .checkpoint_ms = 0, .want_binary = 1},
               many2 = {.batch = 5, .checkpoint_ms = 0, .fly = 2, .want_binary = 1};   /* blob.bin: re-sniffed by every walk */
    assert_int_equal(index_child(d1, proj, &one, &c1, &f1), n + 2);   /* + go.mod, empty.c */
    assert_int_equal(index_child(d2, proj, &many2, &c2, &f2), n + 2);
    assert_int_equal(f1, n + 2);
    assert_int_equal(f2, f1);
    assert_int_equal(c1, 2 * n + 1);   /* 2 per C file + go.mod; the empty file has none */
    assert_int_equal(c2, c1);
    check_big_symbols(d2, proj, n);
    /* reload: nothing re-read, nothing duplicated */
    assert_int_equal(index_child(d2, proj, &many, &c2, NULL), 0);
    assert_int_equal(c2, c1);
    /* three files change: only they are re-read, in several batches */
    for (int i = 10; i < 13; i++) {
        char rel[64], txt[128];
        snprintf(rel, sizeof rel, "src/f%03d.c", i);
        snprintf(txt, sizeof txt, "int big_fn_%03d(int x) { return x - %d; }\n", i, i);
        wr(proj, rel, txt);
    }
    assert_int_equal(index_child(d2, proj, &many, &c2, NULL), 3);
    assert_int_equal(c2, c1 - 3);   /* each became one chunk */
    check_big_symbols(d2, proj, n);
    tu_rmrf(d1);
    tu_rmrf(d2);
    tu_rmrf(proj);
    free(d1);
    free(d2);
    free(proj);
}

/* A crash in the middle of a long build (appends in flight, checkpoints written) leaves
 * a scope that reloads: what the manifest names is kept, the rest is re-indexed, nothing
 * is duplicated. Then chunks the manifest does not name (appended after the last
 * checkpoint) are found and dropped on reload, and their files re-indexed. */
static void test_crash_reload(void **st)
{
    const int n = 300;
    char *proj = make_big_project(n);
    char *clean = tu_tmpdir(), *data = tu_tmpdir();
    uint32_t cc, c, f;
    child_opts plain = {0};
    assert_int_equal(index_child(clean, proj, &plain, &cc, NULL), n + 2);
    child_opts crash = {.batch = 8, .checkpoint_ms = 0, .crash_after = 256, .want_binary = 1};
    assert_int_equal(index_child(data, proj, &crash, NULL, NULL), -9);
    int reread = index_child(data, proj, &plain, &c, &f);
    assert_true(reread > 0 && reread < n + 2);   /* the checkpointed files were kept */
    assert_int_equal(f, n + 2);
    assert_int_equal(c, cc);
    assert_int_equal(index_child(data, proj, &plain, &c, NULL), 0);
    assert_int_equal(c, cc);
    check_big_symbols(data, proj, n);

    /* orphans: chunks of an indexed file and of a file that does not exist, appended
     * behind the manifest's back (as by a crash right after an append) */
    char h[17], sd[PATH_MAX];
    lcx_scope_hash(proj, h);
    snprintf(sd, sizeof sd, "%s/scopes/%s/store", data, h);
    lcx_store *s;
    assert_int_equal(lcx_store_open(sd, g_emb, NULL, &s), 0);
    lcx_chunk ch[2] = {lcx_chunk_init(), lcx_chunk_init()};
    ch[0].text = "int big_fn_001(int x) { return 0; } /* stale copy */";
    ch[0].path = "src/f001.c";
    ch[1].text = "int ghost_function(void) { return 1; }";
    ch[1].path = "src/ghost.c";
    for (int i = 0; i < 2; i++) {
        ch[i].text_len = (uint32_t)strlen(ch[i].text);
        ch[i].path_len = (uint32_t)strlen(ch[i].path);
        ch[i].line_start = ch[i].line_end = 1;
        ch[i].file_type = LCX_FT_CODE;
    }
    assert_int_equal(lcx_store_append(s, ch, 2, NULL), 0);
    lcx_store_close(s);
    assert_int_equal(index_child(data, proj, &plain, &c, NULL), 1);   /* f001.c only */
    assert_int_equal(c, cc);
    check_big_symbols(data, proj, n);
    lcx_scopes *m = open_mgr(data, false);
    char prefill[PATH_MAX + 64];
    snprintf(prefill, sizeof prefill, "see %s/src/f000.c", proj);
    lcx_code_result r;
    assert_int_equal(retrieve(m, prefill, "ghost_function stale copy", 8, NULL, &r), 0);
    assert_false(any_hit_contains(&r, "ghost_function"));
    assert_false(any_hit_contains(&r, "stale copy"));
    lcx_code_result_free(&r);
    lcx_scopes_close(m);
    tu_rmrf(clean);
    tu_rmrf(data);
    tu_rmrf(proj);
    free(clean);
    free(data);
    free(proj);
}

/* Polls retrieve until pred holds or 10 s pass (the watcher is asynchronous). */
typedef bool (*pred_fn)(const lcx_code_result *r, const void *arg);
static bool poll_until(lcx_scopes *m, const char *prefill, const char *query, pred_fn pred, const void *arg)
{
    double t0 = lcx__now_ms();
    while (lcx__now_ms() - t0 < 10000) {
        lcx_code_result r;
        int rc = retrieve(m, prefill, query, 8, NULL, &r);
        bool ok = rc == 0 && pred(&r, arg);
        lcx_code_result_free(&r);
        if (ok) return true;
        usleep(20000);
    }
    return false;
}
static bool has_text(const lcx_code_result *r, const void *a) { return any_hit_contains(r, a); }
static bool lacks_text(const lcx_code_result *r, const void *a) { return !any_hit_contains(r, a); }
static bool has_path(const lcx_code_result *r, const void *a) { return any_hit_path(r, a); }

static void test_watcher(void **st)
{
    char *proj = make_project();
    char *data = tu_tmpdir();
    lcx_scopes *m = open_mgr(data, true);
    char prefill[PATH_MAX + 64];
    snprintf(prefill, sizeof prefill, "see %s/src/http.c", proj);
    lcx_code_result r;
    assert_int_equal(retrieve(m, prefill, "module_2_init", 4, NULL, &r), 0);
    assert_true(r.scope.watched_dirs >= 3);
    lcx_code_result_free(&r);
    /* edit */
    wr(proj, "src/mod02.c", "int module_2_init(void) { return zebra_unicorn_value; }\n");
    assert_true(poll_until(m, prefill, "zebra_unicorn_value", has_text, "zebra_unicorn_value"));
    /* new file in a new directory */
    wr(proj, "src/sub/deep.c", "int okapi_function(void) { return 3; }\n");
    assert_true(poll_until(m, prefill, "okapi_function", has_text, "okapi_function"));
    /* delete */
    char p[PATH_MAX], q[PATH_MAX];
    snprintf(p, sizeof p, "%s/src/mod02.c", proj);
    assert_int_equal(unlink(p), 0);
    assert_true(poll_until(m, prefill, "zebra_unicorn_value", lacks_text, "zebra_unicorn_value"));
    /* rename */
    snprintf(p, sizeof p, "%s/src/mod09.c", proj);
    snprintf(q, sizeof q, "%s/src/renamed.c", proj);
    assert_int_equal(rename(p, q), 0);
    assert_true(poll_until(m, prefill, "module_9_init", has_path, "/src/renamed.c"));
    assert_int_equal(retrieve(m, prefill, "module_9_init", 8, NULL, &r), 0);
    assert_false(any_hit_path(&r, "/src/mod09.c"));
    lcx_code_result_free(&r);
    /* a directory renamed: its files move with it */
    snprintf(p, sizeof p, "%s/src/sub", proj);
    snprintf(q, sizeof q, "%s/src/moved", proj);
    assert_int_equal(rename(p, q), 0);
    assert_true(poll_until(m, prefill, "okapi_function", has_path, "/src/moved/deep.c"));
    assert_int_equal(retrieve(m, prefill, "okapi_function", 8, NULL, &r), 0);
    assert_false(any_hit_path(&r, "/src/sub/deep.c"));
    lcx_code_result_free(&r);
    /* a file that becomes ignored disappears */
    wr(proj, ".gitignore", "tools/\n");
    assert_true(poll_until(m, prefill, "refresh_tokens TokenCache", lacks_text, "def refresh_tokens"));
    /* unloading releases the watches; the scope reloads from disk on the next use */
    assert_int_equal(lcx_scopes_unload(m, proj), 0);
    assert_int_equal(lcx_scopes_loaded(m), 0);
    assert_int_equal(retrieve(m, prefill, "okapi_function", 4, NULL, &r), 0);
    assert_true(any_hit_contains(&r, "okapi_function"));
    assert_int_equal(r.scope.files_read_last, 0);   /* reloaded, nothing re-read */
    lcx_code_result_free(&r);
    lcx_scopes_close(m);
    tu_rmrf(data);
    tu_rmrf(proj);
    free(data);
    free(proj);
}

static void test_hot_promotion(void **st)
{
    char *d0 = tu_tmpdir();
    char *proj = realpath(d0, NULL);
    free(d0);
    wr(proj, "package.json", "{}\n");
    char p[256], t[256];
    for (int i = 0; i < 60; i++) {
        snprintf(p, sizeof p, "src/s%02d.js", i);
        snprintf(t, sizeof t, "export function srcFunc%d() { return %d; }\n", i, i);
        wr(proj, p, t);
    }
    for (int i = 0; i < 30; i++) {
        snprintf(p, sizeof p, "lib/l%02d.js", i);
        snprintf(t, sizeof t, "export function libFunc%d() { return 'capybara %d'; }\n", i, i);
        wr(proj, p, t);
    }
    char *data = tu_tmpdir();
    lcx_scopes *m = open_mgr(data, false);
    char prefill[PATH_MAX + 64];
    snprintf(prefill, sizeof prefill, "see %s/src/s01.js", proj);
    lcx_code_result r;
    assert_int_equal(retrieve(m, prefill, "srcFunc1", 4, "s", &r), 0);
    assert_string_equal(r.scope.status, "hot");
    assert_int_equal(r.scope.files, 61);   /* src/ + root files */
    lcx_code_result_free(&r);
    /* a mention outside Hot promotes to the whole package, in the background: while the
     * rebuild is held the Hot index answers and the scope reports promoting */
    lcx__scopes_hold_promotions(m, true);
    snprintf(prefill, sizeof prefill, "and %s/lib/l03.js", proj);
    assert_int_equal(retrieve(m, prefill, "libFunc3", 4, "s", &r), 0);
    assert_true(lcx__scopes_promoting(m, proj));
    assert_string_equal(r.scope.status, "hot");
    assert_int_equal(r.scope.files, 61);
    assert_true(r.n_hits > 0);               /* Hot chunks are still served */
    assert_false(any_hit_contains(&r, "capybara"));
    lcx_code_result_free(&r);
    char pre2[PATH_MAX + 64];
    snprintf(pre2, sizeof pre2, "see %s/src/s02.js", proj);
    assert_int_equal(retrieve(m, pre2, "srcFunc2", 4, "s", &r), 0);   /* a later turn: still Hot */
    assert_string_equal(r.scope.status, "hot");
    assert_true(lcx__scopes_promoting(m, proj));
    assert_true(any_hit_contains(&r, "srcFunc2"));
    lcx_code_result_free(&r);
    lcx__scopes_hold_promotions(m, false);
    lcx__scopes_wait_jobs(m);
    assert_false(lcx__scopes_promoting(m, proj));
    assert_int_equal(retrieve(m, prefill, "libFunc3", 4, "s", &r), 0);
    assert_string_equal(r.status, "ready");
    assert_string_equal(r.scope.status, "package");
    assert_int_equal(r.scope.files, 91);
    assert_true(any_hit_contains(&r, "capybara 3"));
    lcx_code_result_free(&r);
    lcx_scopes_close(m);
    tu_rmrf(data);
    free(data);
    /* low confidence twice in a row also promotes */
    data = tu_tmpdir();
    m = open_mgr(data, false);
    snprintf(prefill, sizeof prefill, "see %s/src/s01.js", proj);
    assert_int_equal(retrieve(m, prefill, "qqqq zzzz wwww", 4, NULL, &r), 0);
    assert_string_equal(r.scope.status, "hot");
    assert_true(r.confidence < 0.35f);
    lcx_code_result_free(&r);
    assert_int_equal(retrieve(m, prefill, "qqqq zzzz wwww", 4, NULL, &r), 0);
    lcx_code_result_free(&r);
    lcx__scopes_wait_jobs(m);   /* the second low turn started a background promotion */
    assert_int_equal(retrieve(m, prefill, "capybara", 4, NULL, &r), 0);
    assert_string_equal(r.scope.status, "package");
    assert_true(any_hit_contains(&r, "capybara"));
    lcx_code_result_free(&r);
    lcx_scopes_close(m);
    tu_rmrf(data);
    free(data);
    tu_rmrf(proj);
    free(proj);
}

static void test_ws_sessions(void **st)
{
    char *a = make_project();
    char *d0 = tu_tmpdir();
    char *b = realpath(d0, NULL);
    free(d0);
    wr(b, "go.mod", "module x\n");
    wr(b, "main.go", "package main\nfunc ServeWombat() {\n}\n");
    char *data = tu_tmpdir();
    lcx_scopes *m = open_mgr(data, false);
    char pa[PATH_MAX + 16], pb[PATH_MAX + 16];
    snprintf(pa, sizeof pa, "%s/src/http.c", a);
    snprintf(pb, sizeof pb, "%s/main.go", b);
    lcx_code_result r;
    assert_int_equal(retrieve(m, pa, "parse_header", 4, "ws-sess", &r), 0);
    lcx_code_result_free(&r);
    assert_int_equal(retrieve(m, pb, "ServeWombat", 4, "ws-sess", &r), 0);
    lcx_code_result_free(&r);
    lcx_code_request wq = lcx_code_request_init();
    wq.query = "ServeWombat parse_header";
    wq.query_len = strlen(wq.query);
    wq.top_k = 8;
    wq.explicit_scope = "ws:";
    wq.session_id = "ws-sess";
    assert_int_equal(lcx_code_retrieve(m, &wq, &r), 0);
    assert_int_equal(r.n_scopes, 2);
    assert_string_equal(r.status, "ready");
    assert_true(any_hit_path(&r, "/main.go"));
    assert_true(any_hit_path(&r, "/src/http.c"));
    for (int i = 1; i < r.n_hits; i++) assert_true(r.hits[i - 1].score >= r.hits[i].score);   /* merged by score */
    lcx_code_result_free(&r);
    /* another session sees nothing bound */
    wq.session_id = "other";
    assert_int_equal(lcx_code_retrieve(m, &wq, &r), 0);
    assert_int_equal(r.n_scopes, 0);
    assert_string_equal(r.status, "no-scope");
    assert_true(r.workspace);
    lcx_code_result_free(&r);
    lcx_scopes_close(m);
    tu_rmrf(data);
    tu_rmrf(a);
    tu_rmrf(b);
    free(data);
    free(a);
    free(b);
}


/* Permission-denied files and directories are skipped and counted, never fatal; an
 * unreadable scope directory is refused. The tests run as root, which reads everything, so
 * the check runs in a child that enters a new user namespace (there it is "nobody" and
 * mode-000 files owned by the real root are unreadable). Skipped where user namespaces
 * are not available. */
static void test_unreadable(void **st)
{
    char *d0 = tu_tmpdir();
    char *proj = realpath(d0, NULL);
    free(d0);
    char *data = tu_tmpdir();
    assert_int_equal(chmod(proj, 0755), 0);
    assert_int_equal(chmod(data, 0777), 0);
    wr(proj, "go.mod", "module x\n");
    wr(proj, "ok.go", "package x\nfunc Fine() {}\n");
    wr(proj, "locked.go", "package x\nfunc Hidden() {}\n");
    wr(proj, "closed/inner.go", "package x\nfunc Inner() {}\n");
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s/locked.go", proj);
    assert_int_equal(chmod(p, 0), 0);
    snprintf(p, sizeof p, "%s/closed", proj);
    assert_int_equal(chmod(p, 0), 0);
    fflush(stderr);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        if (unshare(CLONE_NEWUSER) != 0) _exit(77);
        char q[PATH_MAX];
        snprintf(q, sizeof q, "%s/locked.go", proj);
        if (access(q, R_OK) == 0) _exit(77);   /* still privileged: cannot test here */
        lcx_embedder *e;
        if (lcx_embedder_hash_new(0, &e) < 0) _exit(2);
        lcx_scopes_opts o = lcx_scopes_defaults();
        o.data_dir = data;
        o.watch = false;
        lcx_scopes *m;
        if (lcx_scopes_open(&o, e, &m) < 0) _exit(3);
        lcx_scope_info inf;
        const char *why = NULL;
        if (lcx_scopes_index(m, proj, NULL, NULL, &inf, &why) < 0) _exit(4);
        if (inf.files != 2 || inf.skipped_unreadable < 2) {
            fprintf(stderr, "files %u unreadable %u\n", inf.files, inf.skipped_unreadable);
            _exit(5);
        }
        char c[PATH_MAX];
        snprintf(q, sizeof q, "%s/closed", proj);
        if (lcx_scope_canonical(q, c, sizeof c, &why) != LCX_EIO || strcmp(why, "unreadable")) _exit(6);
        lcx_scopes_close(m);
        lcx_embedder_free(e);
        _exit(0);
    }
    int status;
    waitpid(pid, &status, 0);
    snprintf(p, sizeof p, "%s/closed", proj);
    chmod(p, 0755);
    tu_rmrf(data);
    tu_rmrf(proj);
    free(data);
    free(proj);
    assert_true(WIFEXITED(status));
    if (WEXITSTATUS(status) == 77) {
        fprintf(stderr, "test_unreadable: skipped (no unprivileged user namespace here)\n");
        skip();
    }
    assert_int_equal(WEXITSTATUS(status), 0);
}

/* Concurrency: readers retrieving while a writer edits files (watcher applying) and the
 * scope is unloaded/reloaded underneath them. Must not crash (run under ASan in CI) and
 * every retrieve must succeed. */
typedef struct { lcx_scopes *m; const char *prefill; int fails; } stress_arg;
static void *stress_reader(void *a)
{
    stress_arg *s = a;
    for (int i = 0; i < 150; i++) {
        lcx_code_result r;
        if (retrieve(s->m, s->prefill, i % 2 ? "parse_header" : "module init value", 4, i % 3 ? "sx" : NULL, &r) != 0)
            __atomic_add_fetch(&s->fails, 1, __ATOMIC_RELAXED);
        lcx_code_result_free(&r);
    }
    return NULL;
}

static void test_concurrency(void **st)
{
    char *proj = make_project();
    char *data = tu_tmpdir();
    lcx_scopes *m = open_mgr(data, true);
    char prefill[PATH_MAX + 64];
    snprintf(prefill, sizeof prefill, "see %s/src/http.c", proj);
    stress_arg a = {m, prefill, 0};
    pthread_t th[4];
    for (int i = 0; i < 4; i++) assert_int_equal(pthread_create(&th[i], NULL, stress_reader, &a), 0);
    char txt[256], name[64];
    for (int i = 0; i < 40; i++) {
        snprintf(name, sizeof name, "src/mod%02d.c", i % 14);
        snprintf(txt, sizeof txt, "int module_%d_init(void) { return %d; } /* edit %d */\n", i % 14, i, i);
        wr(proj, name, txt);
        if (i % 10 == 9) lcx_scopes_unload(m, proj);
        if (i % 7 == 3) lcx_scopes_sync(m);
        usleep(5000);
    }
    for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
    assert_int_equal(a.fails, 0);
    lcx_code_result r;
    assert_int_equal(retrieve(m, prefill, "module_5_init", 4, NULL, &r), 0);
    assert_true(r.n_hits >= 1);
    lcx_code_result_free(&r);
    lcx_scopes_close(m);
    tu_rmrf(data);
    tu_rmrf(proj);
    free(data);
    free(proj);
}

/* Two managers on one data dir (e.g. longctx-svc and `longctx mcp`): the second cannot
 * open a scope store the first holds — "scope_busy", nothing corrupted — and can once the
 * first lets go. */
static void test_shared_data_dir(void **st)
{
    char *proj = make_project();
    char *data = tu_tmpdir();
    lcx_scopes *m1 = open_mgr(data, false), *m2 = open_mgr(data, false);
    lcx_scope_info inf;
    const char *why = NULL;
    assert_int_equal(lcx_scopes_index(m1, proj, NULL, NULL, &inf, &why), 0);
    uint32_t chunks = inf.chunks;
    assert_true(chunks > 0);
    why = NULL;
    assert_int_equal(lcx_scopes_index(m2, proj, NULL, NULL, &inf, &why), LCX_EEXIST);
    assert_non_null(why);
    assert_string_equal(why, "scope_busy");
    assert_int_equal(lcx_scopes_info(m1, proj, &inf), 0);
    assert_int_equal(inf.chunks, chunks);
    lcx_scopes_close(m1);
    assert_int_equal(lcx_scopes_index(m2, proj, NULL, NULL, &inf, &why), 0);
    assert_int_equal(inf.chunks, chunks);
    lcx_scopes_close(m2);
    tu_rmrf(data);
    tu_rmrf(proj);
    free(data);
    free(proj);
}

static int setup(void **st)
{
    return lcx_embedder_hash_new(0, &g_emb) < 0 ? -1 : 0;
}
static int teardown(void **st)
{
    lcx_embedder_free(g_emb);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_splice_format), cmocka_unit_test(test_retrieve_basic),
        cmocka_unit_test(test_persistence),   cmocka_unit_test(test_watcher),
        cmocka_unit_test(test_hot_promotion), cmocka_unit_test(test_ws_sessions),
        cmocka_unit_test(test_unreadable),   cmocka_unit_test(test_concurrency),
        cmocka_unit_test(test_shared_data_dir), cmocka_unit_test(test_batched_build),
        cmocka_unit_test(test_crash_reload),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
