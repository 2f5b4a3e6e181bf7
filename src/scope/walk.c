/* Scope walker: which files of a project are indexed, and reading them safely.
 *
 * Filters, cheapest first (no file is opened before all name-level filters pass):
 *   1. skip list: .git node_modules .venv venv __pycache__ dist build target .next .cache
 *      .idea .vscode .tox and every other dot-directory except .github;
 *   2. secrets (SPEC §3), never opened: .env*, *.key, *.pem, id_rsa*, id_ed25519*, *.p12,
 *      *.pfx (+ id_dsa*, id_ecdsa*, .netrc, .pgpass) and anything below a directory named
 *      secrets, credentials, .aws, .ssh or .gnupg;
 *   3. lockfiles (package-lock.json, yarn.lock, Cargo.lock, go.sum, *.lock, …): large,
 *      machine-written, useless for retrieval;
 *   4. .gitignore files at every level plus .git/info/exclude (ignore.c);
 *   5. symlinks (never followed: a link can leave the scope or loop), special files;
 *   6. size > max_file_bytes (5 MiB);
 *   then, when read: binary sniff (NUL or invalid UTF-8 in the first 8 KB).
 * Entries are visited in byte order of their names so that capped walks (Hot scope) are
 * deterministic. Everything skipped is counted, nothing is fatal. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "scope/scope_int.h"
#include "util/util.h"

#define GITIGNORE_MAX (1u << 20)   /* a .gitignore larger than 1 MiB is not read */
#define SNIFF_BYTES 8192

static const char *const skip_dirs[] = {
    ".git", "node_modules", ".venv", "venv", "__pycache__", "dist", "build", "target",
    ".next", ".cache", ".idea", ".vscode", ".tox",
};
static const char *const forbidden_dirs[] = {"secrets", "credentials", ".aws", ".ssh", ".gnupg"};
static const char *const lockfiles[] = {
    "package-lock.json", "yarn.lock", "pnpm-lock.yaml", "Cargo.lock", "poetry.lock",
    "Pipfile.lock", "composer.lock", "Gemfile.lock", "go.sum", "bun.lockb", "uv.lock",
    "flake.lock", "npm-shrinkwrap.json", "packages.lock.json", "mix.lock", "pubspec.lock",
    "Podfile.lock", "shrinkwrap.yaml",
};

bool lcx__walk_skip_dir(const char *name)
{
    for (size_t i = 0; i < LCX_ARRAY_LEN(skip_dirs); i++)
        if (!strcmp(name, skip_dirs[i])) return true;
    return name[0] == '.' && strcmp(name, ".github") != 0;
}

static bool forbidden_dir(const char *name, size_t n)
{
    for (size_t i = 0; i < LCX_ARRAY_LEN(forbidden_dirs); i++)
        if (strlen(forbidden_dirs[i]) == n && !memcmp(name, forbidden_dirs[i], n)) return true;
    return false;
}

bool lcx__scope_forbidden_component(const char *p)
{
    while (*p) {
        while (*p == '/') p++;
        const char *s = p;
        while (*p && *p != '/') p++;
        if (p > s && forbidden_dir(s, (size_t)(p - s))) return true;
    }
    return false;
}

static bool ends_with(const char *s, const char *suf)
{
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && !memcmp(s + a - b, suf, b);
}

static bool secret_name(const char *b)
{
    return !strncmp(b, ".env", 4) || ends_with(b, ".key") || ends_with(b, ".pem") ||
           !strncmp(b, "id_rsa", 6) || !strncmp(b, "id_ed25519", 10) || ends_with(b, ".p12") ||
           ends_with(b, ".pfx") || !strncmp(b, "id_dsa", 6) || !strncmp(b, "id_ecdsa", 8) ||
           !strcmp(b, ".netrc") || !strcmp(b, ".pgpass");
}

bool lcx_scope_is_secret(const char *path)
{
    if (!path) return false;
    const char *slash = strrchr(path, '/');
    const char *b = slash ? slash + 1 : path;
    if (*b && secret_name(b)) return true;
    /* directory components only (the basename was checked as a file name) */
    size_t dl = slash ? (size_t)(slash - path) : 0;
    if (!dl) return false;
    char *d = strndup(path, dl);
    if (!d) return true;   /* fail closed */
    bool f = lcx__scope_forbidden_component(d);
    free(d);
    return f;
}

bool lcx__walk_is_lockfile(const char *name)
{
    for (size_t i = 0; i < LCX_ARRAY_LEN(lockfiles); i++)
        if (!strcmp(name, lockfiles[i])) return true;
    return ends_with(name, ".lock") || ends_with(name, ".lockb");
}

/* ---------------------------------------------------------------------------------- */

typedef struct {
    const char *root;
    const lcx_walk_opts *o;
    lcx_walk_file_cb fcb;
    lcx_walk_dir_cb dcb;
    void *ud;
    lcx_walk_stats *st;
    lcx_ignore **stack;      /* one per directory level that has a .gitignore, shallow→deep */
    int n_stack, cap_stack;
    lcx_ignore *exclude;     /* .git/info/exclude (lowest precedence) */
    char rel[PATH_MAX];      /* scope-relative path being visited */
    char abs[PATH_MAX * 2];
} walker;

static bool w_ignored(const walker *w, const char *rel, bool is_dir)
{
    for (int i = w->n_stack - 1; i >= 0; i--) {
        int r = lcx__ignore_match(w->stack[i], rel, is_dir);
        if (r) return r > 0;
    }
    if (w->exclude) return lcx__ignore_match(w->exclude, rel, is_dir) > 0;
    return false;
}

static int load_ignore(const char *root, const char *rel, const char *file, lcx_ignore **out)
{
    *out = NULL;
    char p[PATH_MAX * 2];
    int n = snprintf(p, sizeof p, "%s%s%s/%s", root, *rel ? "/" : "", rel, file);
    if (n < 0 || (size_t)n >= sizeof p) return 0;
    struct stat st;
    if (lstat(p, &st) < 0 || !S_ISREG(st.st_mode)) return 0;
    char *text = NULL;
    size_t len = 0;
    int rd = lcx__read_file(p, GITIGNORE_MAX, &text, &len);
    if (rd == LCX_ENOMEM) return rd;   /* rules we could not load would un-ignore their files */
    if (rd < 0) return 0;              /* unreadable: no rules */
    int rc = lcx__ignore_parse(text, len, rel, out);
    free(text);
    return rc;
}

static int push_ignore(walker *w, const char *rel)
{
    lcx_ignore *ig;
    int rc = load_ignore(w->root, rel, ".gitignore", &ig);
    if (rc < 0) return rc;
    if (!ig) return 0;
    if (w->n_stack == w->cap_stack) {
        int nc = w->cap_stack ? w->cap_stack * 2 : 8;
        lcx_ignore **ns = realloc(w->stack, nc * sizeof *ns);
        if (!ns) { lcx__ignore_free(ig); return LCX_ENOMEM; }
        w->stack = ns;
        w->cap_stack = nc;
    }
    w->stack[w->n_stack++] = ig;
    return 1;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Visits directory w->rel (already accepted). Hot: recursion depth = directory depth,
 * bounded by PATH_MAX. */
static int walk_dir(walker *w, bool recurse)
{
    size_t rl = strlen(w->rel);
    int pushed = push_ignore(w, w->rel);
    if (pushed < 0) return pushed;
    int rc = 0;
    w->st->dirs++;
    if (w->dcb && (rc = w->dcb(w->rel, w->ud)) != 0) goto out;
    snprintf(w->abs, sizeof w->abs, "%s%s%s", w->root, rl ? "/" : "", w->rel);
    DIR *d = opendir(w->abs);
    if (!d) { w->st->skipped_unreadable++; goto out; }
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
        if (n == cap) {
            size_t nc = cap ? cap * 2 : 64;
            char **nn = realloc(names, nc * sizeof *nn);
            if (!nn) { rc = LCX_ENOMEM; break; }
            names = nn;
            cap = nc;
        }
        /* the name with its d_type packed after the NUL, so sorting keeps them together */
        size_t L = strlen(de->d_name);
        char *s = malloc(L + 2);
        if (!s) { rc = LCX_ENOMEM; break; }
        memcpy(s, de->d_name, L + 1);
        s[L + 1] = (char)de->d_type;
        names[n++] = s;
    }
    closedir(d);
    if (rc == 0 && n > 1) qsort(names, n, sizeof *names, cmp_str);
    for (size_t i = 0; i < n && rc == 0; i++) {
        const char *name = names[i];
        size_t L = strlen(name);
        unsigned char dt = (unsigned char)name[L + 1];
        if (rl + 1 + L + 1 >= sizeof w->rel) { w->st->skipped_special++; continue; }
        char *relend = w->rel + rl;
        if (rl) { *relend = '/'; memcpy(relend + 1, name, L + 1); }
        else memcpy(relend, name, L + 1);
        snprintf(w->abs, sizeof w->abs, "%s/%s", w->root, w->rel);
        struct stat st;
        bool have_st = false;
        if (dt == DT_UNKNOWN) {
            if (lstat(w->abs, &st) < 0) { w->st->skipped_unreadable++; *relend = 0; continue; }
            have_st = true;
            dt = S_ISDIR(st.st_mode) ? DT_DIR : S_ISLNK(st.st_mode) ? DT_LNK
               : S_ISREG(st.st_mode) ? DT_REG : DT_UNKNOWN;
        }
        if (dt == DT_LNK) {
            w->st->skipped_symlink++;
        } else if (dt == DT_DIR) {
            if (forbidden_dir(name, L)) w->st->skipped_secret++;
            else if (lcx__walk_skip_dir(name)) w->st->skipped_skiplist++;
            else if (w_ignored(w, w->rel, true)) w->st->skipped_ignored++;
            else if (recurse) rc = walk_dir(w, true);
        } else if (dt != DT_REG) {
            w->st->skipped_special++;
        } else if (secret_name(name)) {
            w->st->skipped_secret++;
        } else if (lcx__walk_is_lockfile(name)) {
            w->st->skipped_lock++;
        } else if (w_ignored(w, w->rel, false)) {
            w->st->skipped_ignored++;
        } else if (!have_st && lstat(w->abs, &st) < 0) {
            w->st->skipped_unreadable++;
        } else if (!S_ISREG(st.st_mode)) {
            w->st->skipped_special++;
        } else if ((uint64_t)st.st_size > w->o->max_file_bytes) {
            w->st->skipped_large++;
        } else {
            w->st->files++;
            w->st->bytes += (uint64_t)st.st_size;
            rc = w->fcb(w->rel, &st, w->ud);
        }
        w->rel[rl] = 0;
    }
    for (size_t i = 0; i < n; i++) free(names[i]);
    free(names);
out:
    if (pushed > 0) lcx__ignore_free(w->stack[--w->n_stack]);
    w->rel[rl] = 0;
    return rc;
}

/* Descends from the root to start, loading every level's .gitignore and checking that no
 * component of start is skipped, secret or ignored. Returns 1 when start is walkable. */
static int descend_to(walker *w, const char *start)
{
    w->rel[0] = 0;
    const char *p = start;
    while (*p) {
        while (*p == '/') p++;
        const char *s = p;
        while (*p && *p != '/') p++;
        size_t L = (size_t)(p - s);
        if (!L) break;
        int pushed = push_ignore(w, w->rel);
        if (pushed < 0) return pushed;
        size_t rl = strlen(w->rel);
        if (rl + L + 2 >= sizeof w->rel) return 0;
        if (rl) w->rel[rl++] = '/';
        memcpy(w->rel + rl, s, L);
        w->rel[rl + L] = 0;
        char name[NAME_MAX + 1];
        if (L > NAME_MAX) return 0;
        memcpy(name, s, L);
        name[L] = 0;
        if (forbidden_dir(name, L) || lcx__walk_skip_dir(name)) return 0;
        if (w_ignored(w, w->rel, true)) return 0;
    }
    return 1;
}

static void walker_free(walker *w)
{
    while (w->n_stack) lcx__ignore_free(w->stack[--w->n_stack]);
    free(w->stack);
    lcx__ignore_free(w->exclude);
}

int lcx__walk(const char *root, const char *start, const lcx_walk_opts *o,
             lcx_walk_file_cb fcb, lcx_walk_dir_cb dcb, void *ud, lcx_walk_stats *st)
{
    lcx_walk_opts def = {.max_file_bytes = 5u << 20, .recursive = true};
    if (!o) o = &def;
    walker w = {.root = root, .o = o, .fcb = fcb, .dcb = dcb, .ud = ud, .st = st};
    int rc = load_ignore(root, "", ".git/info/exclude", &w.exclude);
    if (rc < 0) return rc;
    rc = descend_to(&w, start ? start : "");
    if (rc > 0) {
        /* descend_to pushed the ancestors' files; walk_dir pushes start's own */
        rc = walk_dir(&w, o->recursive);
    }
    walker_free(&w);
    return rc;
}

bool lcx__walk_path_ignored(const char *root, const char *rel, bool is_dir)
{
    walker w = {.root = root};
    if (lcx_scope_is_secret(rel)) return true;
    load_ignore(root, "", ".git/info/exclude", &w.exclude);
    /* every directory component must be walkable, then the leaf itself */
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", rel);
    char *slash = strrchr(dir, '/');
    const char *leaf = rel;
    bool ign = false;
    if (slash) {
        *slash = 0;
        leaf = slash + 1;
        if (descend_to(&w, dir) <= 0) ign = true;
        else if (push_ignore(&w, w.rel) < 0) ign = true;
    } else if (push_ignore(&w, "") < 0) {
        ign = true;
    }
    if (!ign) {
        if (is_dir) ign = lcx__walk_skip_dir(leaf) || forbidden_dir(leaf, strlen(leaf));
        else ign = secret_name(leaf) || lcx__walk_is_lockfile(leaf);
        if (!ign) ign = w_ignored(&w, rel, is_dir);
    }
    walker_free(&w);
    return ign;
}

/* ---------------------------------------------------------------------------------- */

/* Length of the valid UTF-8 sequence at p (1..4), 0 when invalid or cut by e. */
static int utf8_seq(const unsigned char *p, const unsigned char *e)
{
    unsigned c = *p;
    if (c < 0x80) return 1;
    int len;
    unsigned cp;
    if (c >= 0xc2 && c <= 0xdf) { len = 2; cp = c & 0x1f; }
    else if (c >= 0xe0 && c <= 0xef) { len = 3; cp = c & 0x0f; }
    else if (c >= 0xf0 && c <= 0xf4) { len = 4; cp = c & 0x07; }
    else return 0;
    if (e - p < len) return 0;
    for (int i = 1; i < len; i++) {
        if ((p[i] & 0xc0) != 0x80) return 0;
        cp = cp << 6 | (p[i] & 0x3f);
    }
    if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
        (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return len;
}

int lcx__scope_read_file(const char *abs, uint64_t max, char **out, size_t *out_len)
{
    *out = NULL;
    *out_len = 0;
    int fd = open(abs, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0) return errno == ENOENT ? LCX_ENOTFOUND : LCX_EIO;
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) { close(fd); return LCX_EIO; }
    if ((uint64_t)st.st_size > max) { close(fd); return LCX_ELIMIT; }
    size_t n = (size_t)st.st_size;
    char *p = malloc(n + 1);
    if (!p) { close(fd); return LCX_ENOMEM; }
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, p + got, n - got);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) { free(p); close(fd); return LCX_EIO; }
        if (r == 0) break;   /* shrank while reading: index what is there */
        got += (size_t)r;
    }
    close(fd);
    n = got;
    p[n] = 0;
    /* binary sniff: NUL or invalid UTF-8 in the first 8 KB (a sequence cut by the 8 KB
     * boundary is fine) */
    size_t sn = LCX_MIN(n, (size_t)SNIFF_BYTES);
    if (memchr(p, 0, sn)) { free(p); return LCX_ENOTSUP; }
    const unsigned char *u = (const unsigned char *)p, *e = u + n;
    size_t i = 0;
    if (lcx__utf8_valid(p, sn)) {
        i = sn;   /* fast path (ASCII 32 bytes at a time): sn is a sequence boundary */
    } else {
        while (i < sn) {   /* invalid, or a sequence cut by the 8 KB boundary (fine) */
            int l = utf8_seq(u + i, e);
            if (!l) { free(p); return LCX_ENOTSUP; }
            i += (size_t)l;
        }
    }
    /* hot: the rest must be valid UTF-8 for the store; stray bytes become '?' */
    if (!lcx__utf8_valid(p + i, n - i)) {
        while (i < n) {
            int l = utf8_seq(u + i, e);
            if (!l) { p[i] = '?'; l = 1; }
            else if (l == 1 && p[i] == 0) p[i] = ' ';
            i += (size_t)l;
        }
    } else if (n > sn && memchr(p + sn, 0, n - sn)) {
        for (size_t k = sn; k < n; k++) if (!p[k]) p[k] = ' ';
    }
    *out = p;
    *out_len = n;
    return 0;
}

typedef struct {
    uint64_t n, max;
} count_ctx;

static int count_cb(const char *rel, const struct stat *st, void *ud)
{
    (void)rel;
    (void)st;
    count_ctx *c = ud;
    return ++c->n >= c->max;   /* non-zero stops the walk */
}

uint64_t lcx_scope_count_files(const char *root, uint64_t max_file_bytes, uint64_t max)
{
    if (!root || !max) return 0;
    count_ctx c = {0, max};
    lcx_walk_stats ws = {0};
    lcx_walk_opts wo = {.max_file_bytes = max_file_bytes, .recursive = true};
    lcx__walk(root, "", &wo, count_cb, NULL, &c, &ws);
    return c.n;
}
