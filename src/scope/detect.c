/* Scope detection (SPEC §3): which project a prompt talks about.
 *
 * 1. Mentions. Absolute paths: a token starting with '/' at a word boundary (start,
 *    whitespace, quotes, brackets, '=' …), not "//" (URLs), up to whitespace/quote/bracket;
 *    trailing .,;:!? stripped, then a ":LINE[:COL]" suffix when the path without it exists.
 *    Relative paths (only with a default scope): tokens made of path characters that hold
 *    a '/' or a file extension, kept iff default_scope/token exists. Secret paths are
 *    dropped. At most 256 mentions are considered.
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
    lcx_sha256_hex(canon_path, strlen(canon_path), out, 8);
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

static bool is_boundary(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '"' || c == '\'' ||
           c == '`' || c == '(' || c == '[' || c == '{' || c == '<' || c == '=' || c == ',' ||
           c == ';' || c == '|' || c == '>' || c == ':';
}

static bool is_stop(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '"' || c == '\'' ||
           c == '`' || c == '<' || c == '>' || c == '|' || c == '(' || c == ')' || c == '[' ||
           c == ']' || c == '{' || c == '}' || c == '\0' || c == '*';
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

static bool rel_token_ok(const char *t)
{
    if (!*t || strstr(t, "://")) return false;
    bool slash = strchr(t, '/') != NULL;
    const char *dot = strrchr(t, '.');
    bool ext = dot && dot != t && dot[1] && !strchr(dot, '/');
    if (!slash && !ext) return false;
    for (const char *c = t; *c; c++) {
        unsigned char u = (unsigned char)*c;
        if (!(u >= 0x80 || (u >= 'a' && u <= 'z') || (u >= 'A' && u <= 'Z') ||
              (u >= '0' && u <= '9') || strchr("._-/+@~", u)))
            return false;
    }
    return true;
}

typedef struct {
    char canon[PATH_MAX];   /* canonical existing prefix */
    char dir[PATH_MAX];
    char root[PATH_MAX];
} mention;

void lcx_scope_detection_free(lcx_scope_detection *d)
{
    if (!d) return;
    free(d->scope_path);
    for (int i = 0; i < d->n_mentions; i++) free(d->mentions[i]);
    free(d->mentions);
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

int lcx_scope_detect(const char *text, size_t len, const char *default_scope,
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
    int nm = 0, cap_m = 0;
    char tok[PATH_MAX], full[PATH_MAX * 2];
    size_t i = 0;
    while (text && i < len && nm < MAX_MENTIONS) {
        bool at_boundary = i == 0 || is_boundary(text[i - 1]);
        if (!at_boundary || is_stop(text[i])) { i++; continue; }
        size_t s = i;
        while (i < len && !is_stop(text[i])) i++;
        size_t tl = i - s;
        if (tl >= sizeof tok || tl == 0) continue;
        memcpy(tok, text + s, tl);
        tok[tl] = 0;
        if (tok[0] == '/') {
            if (tl < 2 || tok[1] == '/' || tok[1] == ' ') continue;
            out->n_candidates++;
            strip_trailing(tok);
            strip_line_suffix(tok);
            snprintf(full, sizeof full, "%s", tok);
        } else {
            /* relative: only against a default scope, only when the file exists */
            if (!defcanon[0]) {
                /* skip the rest of a token like "http://x/y" that contains '/' */
                continue;
            }
            strip_trailing(tok);
            if (!rel_token_ok(tok)) continue;
            out->n_candidates++;
            const char *t = tok;
            if (t[0] == '.' && t[1] == '/') t += 2;
            int n = snprintf(full, sizeof full, "%s/%s", defcanon, t);
            if (n < 0 || (size_t)n >= PATH_MAX) continue;
            struct stat st;
            if (stat(full, &st) != 0) continue;
        }
        if (nm == cap_m) {
            int nc = cap_m ? cap_m * 2 : 4;
            mention *nmv = realloc(ms, (size_t)nc * sizeof *nmv);
            if (!nmv) { free(ms); return LCX_ENOMEM; }
            ms = nmv;
            cap_m = nc;
        }
        mention *m = &ms[nm];
        if (!mention_dir(full, m->canon, m->dir)) continue;
        if (lcx_scope_is_secret(m->canon) || lcx_scope__forbidden_component(m->dir)) continue;
        /* a stack trace names many files of few directories: resolve each directory's
         * root once (13 sentinels × depth lstat calls otherwise) */
        int hit = -1;
        for (int c = 0; c < nm && hit < 0; c++)
            if (!strcmp(ms[c].dir, m->dir)) hit = c;
        if (hit >= 0) strcpy(m->root, ms[hit].root);
        else if (!root_of(m->dir, m->root)) continue;
        nm++;
    }
    int rc = 0;
    if (nm == 0) {
        if (defcanon[0] && strcmp(defcanon, "/") && !lcx_scope__forbidden_component(defcanon))
            rc = set_scope(out, defcanon);
        free(ms);
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

static bool under(const char *p, const char *dir)
{
    size_t n = strlen(dir);
    return !strncmp(p, dir, n) && (p[n] == 0 || p[n] == '/');
}

int lcx_scope_canonical(const char *path, char *canon, size_t canon_cap, const char **why)
{
    const char *w = NULL;
    int rc = 0;
    char tmp[PATH_MAX];
    if (!path || path[0] != '/') { w = "bad_scope"; rc = LCX_EINVAL; goto done; }
    if (strlen(path) >= PATH_MAX) { w = "bad_scope"; rc = LCX_EINVAL; goto done; }
    if (lcx_scope__forbidden_component(path)) { w = "forbidden"; rc = LCX_EINVAL; goto done; }
    if (!realpath(path, tmp)) {
        if (errno == EACCES) { w = "unreadable"; rc = LCX_EIO; }
        else { w = "not_found"; rc = LCX_ENOTFOUND; }
        goto done;
    }
    if (lcx_scope__forbidden_component(tmp) || !strcmp(tmp, "/") || under(tmp, "/proc") ||
        under(tmp, "/sys") || under(tmp, "/dev")) {
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
