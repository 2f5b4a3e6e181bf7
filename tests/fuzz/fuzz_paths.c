/* Path handling of code scopes (src/scope detect.c, ignore.c): byte 0 picks the parser,
 *   0  scope detection in free text (lcx__scope_detect) against a small real project tree
 *      made at start-up; "@P" in the input stands for its absolute path, so the fuzzer
 *      reaches existing files, sentinels and the monorepo rule
 *   1  .gitignore rules (first line: the directory base; up to a "\n--\n" line: the rules;
 *      after it: one path per line to match)
 *   2  wildmatch (pattern NUL text)
 *   3  canonicalisation, forbidden components, secret names and sentinel roots of one path
 * Results are checked for shape: detected roots are absolute and hold their mentions, match
 * decisions are -1/0/+1, canonical paths are absolute with no trailing '/'. */
#define _GNU_SOURCE
#include "fuzz.h"

#include <limits.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "longctx/lcx_err.h"
#include "scope/scope_int.h"

static char *root;        /* the temp folder */
static char proj[PATH_MAX];

static void put(const char *rel, const char *text) { fz_put(root, rel, text); }

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc; (void)argv;
    /* Patterns that backtrack to the budget (the regress inputs, and most of what the
     * fuzzer grows from them) cost 2^20 dowild calls each at the library's budget: 90 % of
     * this target's time. 2^14 still runs them into the cut-off, 64 times cheaper. */
    lcx__wild_steps = 1L << 14;
    char *t = fz_tmpdir("paths");
    if (!t) abort();
    root = realpath(t, NULL);
    free(t);
    if (!root) abort();
    static const char *const dirs[] = {"proj", "proj/.git", "proj/src", "proj/pkg", "proj/pkg/sub",
                                       "proj/.ssh", "other"};
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
        char p[PATH_MAX];
        snprintf(p, sizeof p, "%s/%s", root, dirs[i]);
        mkdir(p, 0700);
    }
    put("proj/src/main.c", "int main(void) { return 0; }\n");
    put("proj/.gitignore", "*.o\nbuild/\n!keep.o\n");
    put("proj/pkg/package.json", "{}\n");
    put("proj/pkg/sub/x.py", "def f(): pass\n");
    put("proj/.env", "SECRET=1\n");
    put("other/Cargo.toml", "[package]\n");
    snprintf(proj, sizeof proj, "%s/proj", root);
    atexit(fz_cleanup);   /* libFuzzer exits through exit(): no temp folders left */
    return 0;
}

void fz_cleanup(void)
{
    fz_rmrf(root);
    free(root);
    root = NULL;
}


static void detect(const char *s, size_t n, int flags)
{
    lcx_scope_detection d;
    memset(&d, 0, sizeof d);
    int rc = lcx__scope_detect(s, n, (flags & 1) ? proj : NULL, (flags & 2) != 0, &d);
    FZ_CHECK(rc == 0 || rc == LCX_ENOMEM);
    if (rc == 0 && d.scope_path) {
        size_t sl = strlen(d.scope_path);
        FZ_CHECK(d.scope_path[0] == '/');
        FZ_CHECK(strlen(d.scope_hash) == 16);
        for (int i = 0; i < d.n_mentions; i++)
            FZ_CHECK(!strncmp(d.mentions[i], d.scope_path, sl) && (sl == 1 || d.mentions[i][sl] == '/' || !d.mentions[i][sl]));
        for (int i = 0; i < d.n_roots; i++) FZ_CHECK(d.roots[i] && d.roots[i][0] == '/');
    }
    lcx_scope_detection_free(&d);
}

static void ignore(const char *s, size_t n)
{
    const char *nl = memchr(s, '\n', n);
    size_t bl = nl ? (size_t)(nl - s) : n;
    char base[256];
    if (bl >= sizeof base) bl = sizeof base - 1;
    memcpy(base, s, bl);
    base[bl] = 0;
    if (strlen(base) != bl) return;   /* a NUL inside the base: not a directory name */
    const char *rules = nl ? nl + 1 : s + n;
    const char *end = s + n;
    const char *sep = memmem(rules, (size_t)(end - rules), "\n--\n", 4);
    size_t rl = sep ? (size_t)(sep - rules) : (size_t)(end - rules);
    lcx_ignore *ig = NULL;
    int rc = lcx__ignore_parse(rules, rl, base, &ig);
    FZ_CHECK(rc == 0 || rc == LCX_ENOMEM);
    if (rc) return;
    for (const char *p = sep ? sep + 4 : end; p < end;) {
        const char *e = memchr(p, '\n', (size_t)(end - p));
        size_t l = e ? (size_t)(e - p) : (size_t)(end - p);
        char *path = strndup(p, l);
        if (path) {
            int m = lcx__ignore_match(ig, path, false);
            FZ_CHECK(m >= -1 && m <= 1);
            m = lcx__ignore_match(ig, path, true);
            FZ_CHECK(m >= -1 && m <= 1);
            (void)lcx__walk_path_ignored(proj, path, false);
            free(path);
        }
        p += l + 1;
    }
    lcx__ignore_free(ig);
}

static void canon(const char *s)
{
    char out[LCX_SCOPE_PATH_MAX];
    const char *why = NULL;
    if (lcx_scope_canonical(s, out, sizeof out, &why) == 0) {
        size_t l = strlen(out);
        FZ_CHECK(out[0] == '/' && (l == 1 || out[l - 1] != '/'));
        char r[LCX_SCOPE_PATH_MAX];
        if (lcx__scope_root_of(out, r)) FZ_CHECK(r[0] == '/' && lcx_scope_sentinel_at(r) != NULL);
    }
    if (lcx__scope_canon_loose(s, out, sizeof out) == 0) {
        size_t l = strlen(out);
        FZ_CHECK(out[0] == '/' && (l == 1 || out[l - 1] != '/'));
    }
    (void)lcx__scope_forbidden_component(s);
    (void)lcx_scope_is_secret(s);
    (void)lcx__walk_skip_dir(s);
    (void)lcx__walk_is_lockfile(s);
    (void)lcx__file_type_of(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || !root) return 0;
    size_t n = 0;
    char *s = fz_expand(data + 1, size - 1, root, &n);   /* "@P": the temp root */
    if (!s) return 0;
    switch (data[0] & 3) {
    case 0: detect(s, n, data[0] >> 2); break;
    case 1: ignore(s, n); break;
    case 2: {
        const char *text = memchr(s, 0, n);
        if (text && text + 1 <= s + n) (void)lcx__wildmatch(s, text + 1);
        else (void)lcx__wildmatch(s, "src/a/b.c");
        break;
    }
    case 3: canon(s); break;
    }
    free(s);
    return 0;
}
