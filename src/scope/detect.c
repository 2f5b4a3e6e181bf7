/* Scope detection (SPEC §3): which project a prompt talks about.
 *
 * 1. Mentions (the reference service's rules, docs/compat.md). Absolute paths: a '/' at
 *    the start of the text or after whitespace, a quote, a backtick or '(', beginning with
 *    /Users /home /opt /var /usr /tmp /mnt /workspace /repo /repos /private /root /srv
 *    /data, running until whitespace, a quote, a backtick, ')' or ']'; trailing .,;:!?
 *    stripped, then a ":LINE[:COL]" suffix when the path without it exists. Relative
 *    paths (only with a default scope): word(/seg)+.ext (extension ≤ 8 characters),
 *    joined to default_scope, kept iff that file exists. Mentions are de-duplicated by
 *    exact string; secret paths are dropped. At most 256 mentions are considered.
 *    default_scope alone never pins a scope.
 * 2. Root of a mention: its deepest existing prefix is canonicalised (realpath); then for
 *    each sentinel in SPEC order (.git, pyproject.toml, package.json, pnpm-workspace.yaml,
 *    Cargo.toml, go.mod, WORKSPACE, BUILD.bazel, pom.xml, Gemfile, Makefile,
 *    CMakeLists.txt, configure.ac) the nearest ancestor holding it; the first sentinel
 *    found wins. So a repository's .git beats a Makefile in a sub-directory (recursive
 *    make) and a package.json beats a nested Makefile. Mentions with no sentinel ancestor
 *    are dropped (a prompt naming /usr/include/stdio.h must not index /usr).
 * 3. The root with most mentions wins (ties: the one mentioned first).
 * 4. Monorepo rule: walking up from the common directory prefix of that root's mentions,
 *    the first directory strictly below the root that holds a package sentinel (any but
 *    Makefile/CMakeLists.txt/configure.ac, which recur in every sub-directory of C
 *    projects) becomes the scope: mentions all inside packages/a of a monorepo → packages/a;
 *    mentions spread over packages/a and packages/b → the repository root.
 *    Known limit: a dotfiles repository at $HOME makes $HOME the root of a C project that
 *    has no .git of its own. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <dirent.h>
#include <unistd.h>
#include "scope/scope_int.h"
#include "util/util.h"

#define MAX_MENTIONS 256

static const char *const sentinels[] = {
    ".git", "pyproject.toml", "package.json", "pnpm-workspace.yaml", "Cargo.toml", "go.mod",
    "WORKSPACE", "BUILD.bazel", "pom.xml", "Gemfile", "Makefile", "CMakeLists.txt", "configure.ac",
};
#define N_PACKAGE_SENTINELS 10   /* the first 10 count for the monorepo rule */

void lcx_scope_hash(const char *canon_path, char out[17])
{
    lcx__sha256_hex(canon_path, strlen(canon_path), out, 8);
}

static bool exists_at(const char *dir, const char *name)
{
    char p[PATH_MAX + 64];
    int n = snprintf(p, sizeof p, "%s/%s", strcmp(dir, "/") ? dir : "", name);
    if (n < 0 || (size_t)n >= sizeof p) return false;
    struct stat st;
    return lstat(p, &st) == 0;
}

const char *lcx_scope_sentinel_at(const char *dir)
{
    for (size_t i = 0; i < LCX_ARRAY_LEN(sentinels); i++)
        if (exists_at(dir, sentinels[i])) return sentinels[i];
    return NULL;
}

static int package_sentinel_at(const char *dir)
{
    for (int i = 0; i < N_PACKAGE_SENTINELS; i++)
        if (exists_at(dir, sentinels[i])) return i;
    return -1;
}

/* Truncates p (absolute, canonical, no trailing '/') to its parent; false at "/". */
static bool parent(char *p)
{
    char *s = strrchr(p, '/');
    if (!s || (s == p && !p[1])) return false;
    if (s == p) p[1] = 0;
    else *s = 0;
    return true;
}

static bool is_dir(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

/* Canonical directory standing for a mention: realpath of the deepest existing prefix,
 * its parent when that is a file. false when nothing usable. */
static bool mention_dir(const char *path, char *canon, char *dir)
{
    char tmp[PATH_MAX];
    if (strlen(path) >= sizeof tmp) return false;
    strcpy(tmp, path);
    for (;;) {
        if (realpath(tmp, canon)) break;
        if (!parent(tmp) || !strcmp(tmp, "/")) return false;
    }
    if (!strcmp(canon, "/")) return false;
    strcpy(dir, canon);
    if (!is_dir(dir) && !parent(dir)) return false;
    return true;
}

/* Root of a directory by sentinel order (see top). Writes root; false when none. */
static bool root_of(const char *dir, char *root)
{
    char a[PATH_MAX];
    for (size_t s = 0; s < LCX_ARRAY_LEN(sentinels); s++) {
        strcpy(a, dir);
        for (;;) {
            if (strcmp(a, "/") && exists_at(a, sentinels[s])) {
                strcpy(root, a);
                return true;
            }
            if (!parent(a) || !strcmp(a, "/")) break;
        }
    }
    return false;
}

/* Absolute mentions (the reference service's rule): a '/' at the start of the text or
 * after whitespace, a quote, a backtick or '(', followed by one of these top-level
 * directories. Paths elsewhere (/etc, /proc, a project under /work) are not looked for:
 * prompts name /usr/include or /etc/hosts far more often than a project outside these. */
static const char *const abs_prefixes[] = {
    "/Users", "/home", "/opt", "/var", "/usr", "/tmp", "/mnt", "/workspace", "/repo", "/repos",
    "/private", "/root", "/srv", "/data",
};

static bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
static bool abs_boundary(char c) { return is_ws(c) || c == '"' || c == '\'' || c == '`' || c == '('; }
static bool abs_stop(char c) { return is_ws(c) || c == '"' || c == '\'' || c == '`' || c == ')' || c == ']' || c == 0; }
/* characters of a relative path token: [A-Za-z0-9_.-/] (and UTF-8 letters) */
static bool rel_char(unsigned char c)
{
    return c >= 0x80 || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '_' || c == '.' || c == '-' || c == '/';
}
static bool word_char(unsigned char c)
{
    return c >= 0x80 || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

static bool abs_prefix_ok(const char *t, size_t n)
{
    for (size_t i = 0; i < LCX_ARRAY_LEN(abs_prefixes); i++) {
        size_t l = strlen(abs_prefixes[i]);
        if (n >= l && !memcmp(t, abs_prefixes[i], l) && (n == l || t[l] == '/')) return true;
    }
    return false;
}

static void strip_trailing(char *t)
{
    size_t n = strlen(t);
    while (n > 1 && strchr(".,;:!?", t[n - 1])) t[--n] = 0;
}

/* "/a/b.c:12" or "/a/b.c:12:5" → "/a/b.c" when the stripped path exists. */
static void strip_line_suffix(char *t)
{
    struct stat st;
    if (lstat(t, &st) == 0) return;
    for (int k = 0; k < 2; k++) {
        char *c = strrchr(t, ':');
        if (!c || !c[1]) return;
        for (char *d = c + 1; *d; d++)
            if (*d < '0' || *d > '9') return;
        *c = 0;
        if (lstat(t, &st) == 0) return;
    }
}

/* word(/seg)+.ext: starts with a word character, holds a '/', no empty segment, and the
 * last segment ends in an extension of 1..8 word characters. */
static bool rel_token_ok(const char *t)
{
    if (!word_char((unsigned char)t[0]) || !strchr(t, '/') || strstr(t, "//")) return false;
    const char *last = strrchr(t, '/') + 1;
    const char *dot = strrchr(last, '.');
    if (!dot || dot == last || !dot[1]) return false;
    size_t el = strlen(dot + 1);
    if (el > 8) return false;
    for (const char *c = dot + 1; *c; c++)
        if (!word_char((unsigned char)*c)) return false;
    return true;
}

typedef struct {
    char canon[PATH_MAX];   /* canonical existing prefix */
    char dir[PATH_MAX];
    char root[PATH_MAX];
} mention;

static void strv_free(char **v, int n)
{
    for (int i = 0; i < n; i++) free(v[i]);
    free(v);
}

void lcx_scope_detection_free(lcx_scope_detection *d)
{
    if (!d) return;
    free(d->scope_path);
    strv_free(d->mentions, d->n_mentions);
    strv_free(d->paths, d->n_paths);
    strv_free(d->roots, d->n_roots);
    memset(d, 0, sizeof *d);
    d->sentinel = "";
}

static int set_scope(lcx_scope_detection *out, const char *root)
{
    out->scope_path = strdup(root);
    if (!out->scope_path) return LCX_ENOMEM;
    lcx_scope_hash(root, out->scope_hash);
    const char *s = lcx_scope_sentinel_at(root);
    out->sentinel = s ? s : "";
    return 0;
}

/* Appends a copy of s to *v unless present (exact string); 1 = added, 0 = present. */
static int strv_add(char ***v, int *n, const char *s)
{
    for (int i = 0; i < *n; i++)
        if (!strcmp((*v)[i], s)) return 0;
    if (*n == 0 || (*n >= 4 && (*n & (*n - 1)) == 0)) {   /* capacity 4, 8, 16, … */
        char **nv = realloc(*v, (size_t)(*n ? *n * 2 : 4) * sizeof *nv);
        if (!nv) return LCX_ENOMEM;
        *v = nv;
    }
    if (!((*v)[*n] = strdup(s))) return LCX_ENOMEM;
    (*n)++;
    return 1;
}

/* Next path mention in text[*i..len): the absolute or (with defcanon) relative path
 * string into full; false at the end. any_abs: every absolute path counts (a caller's
 * own file path), not only those under the reference's top-level directories. */
static bool next_mention(const char *text, size_t len, size_t *pi, const char *defcanon, bool any_abs,
                         char *full, size_t cap, int *n_candidates)
{
    char tok[PATH_MAX];
    size_t i = *pi;
    while (i < len) {
        char c = text[i];
        if (c == '/' && (i == 0 || abs_boundary(text[i - 1]))) {
            size_t s = i;
            while (i < len && !abs_stop(text[i])) i++;
            size_t tl = i - s;
            if (tl < 2 || tl >= sizeof tok || text[s + 1] == '/') continue;
            if (!any_abs && !abs_prefix_ok(text + s, tl)) continue;
            memcpy(tok, text + s, tl);
            tok[tl] = 0;
            (*n_candidates)++;
            strip_trailing(tok);
            strip_line_suffix(tok);
            snprintf(full, cap, "%s", tok);
            *pi = i;
            return true;
        }
        if (defcanon[0] && word_char((unsigned char)c) && (i == 0 || !rel_char((unsigned char)text[i - 1]))) {
            size_t s = i;
            while (i < len && rel_char((unsigned char)text[i])) i++;
            size_t tl = i - s;
            if (tl >= sizeof tok) continue;
            memcpy(tok, text + s, tl);
            tok[tl] = 0;
            strip_trailing(tok);
            if (!rel_token_ok(tok)) continue;
            (*n_candidates)++;
            int n = snprintf(full, cap, "%s/%s", defcanon, tok);
            if (n < 0 || (size_t)n >= PATH_MAX) continue;
            struct stat st;
            if (stat(full, &st) != 0) continue;   /* relative mentions are kept iff they exist */
            *pi = i;
            return true;
        }
        i++;
    }
    *pi = i;
    return false;
}

int lcx__scope_detect(const char *text, size_t len, const char *default_scope, bool any_abs,
                      lcx_scope_detection *out)
{
    memset(out, 0, sizeof *out);
    out->sentinel = "";
    char defcanon[PATH_MAX] = "";
    if (default_scope && *default_scope == '/' &&
        (!realpath(default_scope, defcanon) || !is_dir(defcanon)))
        defcanon[0] = 0;
    /* mentions are 12 KiB each: grow on demand (a calloc of all 256 cost more than the
     * whole warm retrieval) */
    mention *ms = NULL;
    int nm = 0, cap_m = 0, rc = 0;
    char full[PATH_MAX * 2];
    size_t i = 0;
    while (text && nm < MAX_MENTIONS &&
           next_mention(text, len, &i, defcanon, any_abs, full, sizeof full, &out->n_candidates)) {
        /* a path named twice counts once: "most mentioned" = most distinct paths */
        int added = strv_add(&out->paths, &out->n_paths, full);
        if (added < 0) { rc = added; break; }
        if (!added) continue;
        if (nm == cap_m) {
            int nc = cap_m ? cap_m * 2 : 4;
            mention *nmv = realloc(ms, (size_t)nc * sizeof *nmv);
            if (!nmv) { rc = LCX_ENOMEM; break; }
            ms = nmv;
            cap_m = nc;
        }
        mention *m = &ms[nm];
        if (!mention_dir(full, m->canon, m->dir)) continue;
        if (lcx_scope_is_secret(m->canon) || lcx__scope_forbidden_component(m->dir)) continue;
        /* a stack trace names many files of few directories: resolve each directory's
         * root once (13 sentinels × depth lstat calls otherwise) */
        int hit = -1;
        for (int c = 0; c < nm && hit < 0; c++)
            if (!strcmp(ms[c].dir, m->dir)) hit = c;
        if (hit >= 0) strcpy(m->root, ms[hit].root);
        else if (!root_of(m->dir, m->root)) continue;
        if ((rc = strv_add(&out->roots, &out->n_roots, m->root)) < 0) break;
        rc = 0;
        nm++;
    }
    if (rc < 0 || nm == 0) {
        /* default_scope alone never pins a scope: it only resolves relative mentions */
        free(ms);
        if (rc < 0) lcx_scope_detection_free(out);
        return rc;
    }
    /* most-mentioned root; ties → first mentioned */
    int best = 0, best_n = 0;
    for (int a = 0; a < nm; a++) {
        bool seen = false;
        for (int b = 0; b < a && !seen; b++) seen = !strcmp(ms[a].root, ms[b].root);
        if (seen) continue;
        int c = 0;
        for (int b = a; b < nm; b++) c += !strcmp(ms[a].root, ms[b].root);
        if (c > best_n) { best_n = c; best = a; }
    }
    const char *root = ms[best].root;
    /* common directory prefix of the winning root's mentions */
    char common[PATH_MAX];
    strcpy(common, ms[best].dir);
    for (int b = 0; b < nm; b++) {
        if (strcmp(ms[b].root, root)) continue;
        const char *d = ms[b].dir;
        size_t k = 0;
        while (common[k] && common[k] == d[k]) k++;
        if (common[k] == 0 && (d[k] == 0 || d[k] == '/')) continue;
        /* cut back to the last full component */
        while (k > 0 && common[k] != '/') k--;
        common[k ? k : 1] = 0;
    }
    /* monorepo rule: nearest package sentinel strictly below the root */
    char scope[PATH_MAX];
    strcpy(scope, root);
    size_t rl = strlen(root);
    if (strlen(common) > rl && !strncmp(common, root, rl) && common[rl] == '/') {
        char a[PATH_MAX];
        strcpy(a, common);
        while (strlen(a) > rl) {
            if (package_sentinel_at(a) >= 0) { strcpy(scope, a); break; }
            if (!parent(a)) break;
        }
    }
    rc = set_scope(out, scope);
    if (rc == 0) {
        out->mentions = calloc((size_t)nm, sizeof *out->mentions);
        if (!out->mentions) rc = LCX_ENOMEM;
        size_t sl = strlen(scope);
        for (int b = 0; b < nm && rc == 0; b++) {
            if (strncmp(ms[b].canon, scope, sl) || (ms[b].canon[sl] != '/' && ms[b].canon[sl]))
                continue;
            bool dup = false;
            for (int c = 0; c < out->n_mentions && !dup; c++)
                dup = !strcmp(out->mentions[c], ms[b].canon);
            if (dup) continue;
            if (!(out->mentions[out->n_mentions] = strdup(ms[b].canon))) rc = LCX_ENOMEM;
            else out->n_mentions++;
        }
    }
    free(ms);
    if (rc) lcx_scope_detection_free(out);
    return rc;
}

bool lcx__scope_root_of(const char *dir, char *root)
{
    return root_of(dir, root);
}

int lcx__scope_canon_loose(const char *path, char *out, size_t cap)
{
    char abs[PATH_MAX * 2];
    if (!path || !*path) return LCX_EINVAL;
    if (path[0] == '/') {
        snprintf(abs, sizeof abs, "%s", path);
    } else {
        char cwd[PATH_MAX];
        if (!getcwd(cwd, sizeof cwd)) return LCX_EIO;
        snprintf(abs, sizeof abs, "%s/%s", cwd, path);
    }
    if (strlen(abs) >= PATH_MAX) return LCX_ELIMIT;
    /* normalise lexically first ('.', '..', '//'), then resolve the deepest existing
     * prefix with realpath (symlinks) and append the rest */
    char norm[PATH_MAX] = "";
    size_t nl = 0;
    for (char *save = NULL, *c = strtok_r(abs, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
        if (!strcmp(c, ".")) continue;
        if (!strcmp(c, "..")) {
            while (nl > 0 && norm[nl - 1] != '/') nl--;
            if (nl > 0) nl--;
            norm[nl] = 0;
            continue;
        }
        nl += (size_t)snprintf(norm + nl, sizeof norm - nl, "/%s", c);
        if (nl >= sizeof norm) return LCX_ELIMIT;
    }
    if (!nl) snprintf(norm, sizeof norm, "/");
    char head[PATH_MAX], res[PATH_MAX];
    snprintf(head, sizeof head, "%s", norm);
    size_t hl = strlen(head);
    while (!realpath(head, res)) {
        char *sl = strrchr(head, '/');
        if (!sl || sl == head) { snprintf(res, sizeof res, "/"); hl = 0; break; }
        *sl = 0;
        hl = (size_t)(sl - head);
    }
    const char *rest = norm + hl;   /* "" or "/missing/parts" */
    if (!strcmp(res, "/") && *rest) res[0] = 0;
    int n = snprintf(out, cap, "%s%s", res, rest);
    if (n < 0 || (size_t)n >= cap) return LCX_ELIMIT;
    return 0;
}

int lcx_scope_detect(const char *text, size_t len, const char *default_scope,
                     lcx_scope_detection *out)
{
    return lcx__scope_detect(text, len, default_scope, false, out);
}

static bool under(const char *p, const char *dir)
{
    size_t n = strlen(dir);
    return !strncmp(p, dir, n) && (p[n] == 0 || p[n] == '/');
}

/* A scope root that is (or resolves to) a system directory is refused: the kernel's pseudo
 * file systems and the host's configuration at any depth, and a top-level directory itself
 * (indexing all of /usr or /home is never one project; /usr/include/curl still may be). */
static bool system_dir(const char *p)
{
    static const char *const subtree[] = {"/proc", "/sys", "/dev", "/etc", "/boot", "/run"};
    static const char *const top[] = {"/", "/usr", "/var", "/home", "/root", "/opt", "/srv", "/tmp",
                                      "/mnt", "/media", "/bin", "/sbin", "/lib", "/lib32", "/lib64",
                                      "/libx32", "/usr/lib", "/usr/share", "/usr/local", "/var/lib"};
    for (size_t i = 0; i < sizeof subtree / sizeof *subtree; i++)
        if (under(p, subtree[i])) return true;
    for (size_t i = 0; i < sizeof top / sizeof *top; i++)
        if (!strcmp(p, top[i])) return true;
    return false;
}

int lcx_scope_canonical(const char *path, char *canon, size_t canon_cap, const char **why)
{
    const char *w = NULL;
    int rc = 0;
    char tmp[PATH_MAX];
    if (!path || path[0] != '/') { w = "bad_scope"; rc = LCX_EINVAL; goto done; }
    if (strlen(path) >= PATH_MAX) { w = "bad_scope"; rc = LCX_EINVAL; goto done; }
    if (lcx__scope_forbidden_component(path)) { w = "forbidden"; rc = LCX_EINVAL; goto done; }
    if (!realpath(path, tmp)) {
        if (errno == EACCES) { w = "unreadable"; rc = LCX_EIO; }
        else { w = "not_found"; rc = LCX_ENOTFOUND; }
        goto done;
    }
    if (lcx__scope_forbidden_component(tmp) || system_dir(tmp)) {
        w = "forbidden";
        rc = LCX_EINVAL;
        goto done;
    }
    if (!is_dir(tmp)) { w = "bad_scope"; rc = LCX_EINVAL; goto done; }
    {
        DIR *d = opendir(tmp);
        if (!d) { w = "unreadable"; rc = LCX_EIO; goto done; }
        closedir(d);
        if (access(tmp, R_OK | X_OK) != 0) { w = "unreadable"; rc = LCX_EIO; goto done; }
    }
    if (strlen(tmp) >= canon_cap) { w = "bad_scope"; rc = LCX_EINVAL; goto done; }
    strcpy(canon, tmp);
done:
    if (why) *why = w;
    return rc;
}
