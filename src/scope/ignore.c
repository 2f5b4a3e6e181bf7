/* .gitignore engine: git's wildmatch (WM_PATHNAME) and the per-directory rule files.
 *
 * Semantics follow gitignore(5) and git's dir.c, checked against `git check-ignore` by
 * tests/scope/test_ignore.c:
 *   - blank lines and "#" comments are skipped ("\#" is a literal '#');
 *   - trailing spaces are dropped unless escaped with '\';
 *   - "!" negates ("\!" is a literal '!'); the LAST matching line of a file wins, and a
 *     deeper directory's file wins over a shallower one (the caller walks deepest first);
 *   - a trailing "/" makes the rule match directories only;
 *   - a pattern without any other '/' matches the basename at any depth; one with a
 *     leading or middle '/' is anchored to the .gitignore's directory;
 *   - "**" as a whole path component matches zero or more directories.
 * A file below an ignored directory cannot be re-included: the walker never enters it. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include "scope/scope_int.h"

enum { WM_MATCH = 0, WM_NOMATCH = 1, WM_ABORT_ALL = -1, WM_ABORT_TO_STARSTAR = -2 };

static bool glob_special(unsigned char c)
{
    return c == '*' || c == '?' || c == '[' || c == '\\';
}

static bool cc_match(const unsigned char *s, int n, unsigned char c, int *ok)
{
#define CC(name, test) if (n == (int)sizeof(name) - 1 && !memcmp(s, name, n)) { *ok = 1; return (test); }
    CC("alnum", isalnum(c)) CC("alpha", isalpha(c)) CC("blank", c == ' ' || c == '\t')
    CC("cntrl", iscntrl(c)) CC("digit", isdigit(c)) CC("graph", isgraph(c))
    CC("lower", islower(c)) CC("print", isprint(c)) CC("punct", ispunct(c))
    CC("space", isspace(c)) CC("upper", isupper(c)) CC("xdigit", isxdigit(c))
#undef CC
    *ok = 0;
    return false;
}

/* git's dowild() with WM_PATHNAME always on. Recursion depth is bounded by the number of
 * '*' in the pattern (patterns come from .gitignore lines, capped at 4 KiB); the number of
 * calls is not (many "**" components backtrack exponentially: 276 bytes of "**" /"*" ran for
 * minutes), so one match gets WILD_STEPS calls (lcx__wild_steps) and then counts as no match. */
#define WILD_STEPS (1L << 20)
long lcx__wild_steps = WILD_STEPS;
static int dowild(const unsigned char *p, const unsigned char *text, const unsigned char *pat0, long *steps)
{
    if (++*steps > lcx__wild_steps) return WM_ABORT_ALL;
    unsigned char p_ch;
    for (; (p_ch = *p) != '\0'; text++, p++) {
        int matched, match_slash, negated;
        unsigned char t_ch, prev_ch;
        if ((t_ch = *text) == '\0' && p_ch != '*') return WM_ABORT_ALL;
        switch (p_ch) {
        case '\\':
            p_ch = *++p;
            /* fall through */
        default:
            if (t_ch != p_ch) return WM_NOMATCH;
            continue;
        case '?':
            if (t_ch == '/') return WM_NOMATCH;
            continue;
        case '*':
            if (*++p == '*') {
                const unsigned char *prev_p = p - 2;
                while (*++p == '*') {}
                if ((prev_p < pat0 || *prev_p == '/') &&
                    (*p == '\0' || *p == '/' || (p[0] == '\\' && p[1] == '/'))) {
                    /* "**" as a whole component: try "matches no directory" first. */
                    if (p[0] == '/' && dowild(p + 1, text, pat0, steps) == WM_MATCH) return WM_MATCH;
                    match_slash = 1;
                } else {
                    match_slash = 0;
                }
            } else {
                match_slash = 0;
            }
            if (*p == '\0') {
                if (!match_slash && strchr((const char *)text, '/')) return WM_NOMATCH;
                return WM_MATCH;
            } else if (!match_slash && *p == '/') {
                const char *slash = strchr((const char *)text, '/');
                if (!slash) return WM_NOMATCH;
                text = (const unsigned char *)slash;
                break;   /* the slash is consumed by the loop */
            }
            for (;;) {
                if (t_ch == '\0') break;
                if (!glob_special(*p)) {
                    p_ch = *p;
                    while ((t_ch = *text) != '\0' && (match_slash || t_ch != '/')) {
                        if (t_ch == p_ch) break;
                        text++;
                    }
                    if (t_ch != p_ch) return WM_NOMATCH;
                }
                if ((matched = dowild(p, text, pat0, steps)) != WM_NOMATCH) {
                    if (!match_slash || matched != WM_ABORT_TO_STARSTAR) return matched;
                } else if (!match_slash && t_ch == '/') {
                    return WM_ABORT_TO_STARSTAR;
                }
                t_ch = *++text;
            }
            return WM_ABORT_ALL;
        case '[':
            p_ch = *++p;
            if (p_ch == '^') p_ch = '!';
            negated = p_ch == '!';
            if (negated) p_ch = *++p;
            prev_ch = 0;
            matched = 0;
            do {
                if (!p_ch) return WM_ABORT_ALL;
                if (p_ch == '\\') {
                    p_ch = *++p;
                    if (!p_ch) return WM_ABORT_ALL;
                    if (t_ch == p_ch) matched = 1;
                } else if (p_ch == '-' && prev_ch && p[1] && p[1] != ']') {
                    p_ch = *++p;
                    if (p_ch == '\\') {
                        p_ch = *++p;
                        if (!p_ch) return WM_ABORT_ALL;
                    }
                    if (t_ch <= p_ch && t_ch >= prev_ch) matched = 1;
                    p_ch = 0;
                } else if (p_ch == '[' && p[1] == ':') {
                    const unsigned char *s;
                    int i, ok;
                    for (s = p += 2; (p_ch = *p) && p_ch != ']'; p++) {}
                    if (!p_ch) return WM_ABORT_ALL;
                    i = (int)(p - s) - 1;
                    if (i < 0 || p[-1] != ':') {
                        /* not "[:class:]": a plain '[' in the set */
                        p = s - 2;
                        p_ch = '[';
                        if (t_ch == p_ch) matched = 1;
                        continue;
                    }
                    if (cc_match(s, i, t_ch, &ok)) matched = 1;
                    if (!ok) return WM_ABORT_ALL;
                    p_ch = 0;
                } else if (t_ch == p_ch) {
                    matched = 1;
                }
            } while (prev_ch = p_ch, (p_ch = *++p) != ']');
            if (matched == negated || t_ch == '/') return WM_NOMATCH;
            continue;
        }
    }
    return *text ? WM_NOMATCH : WM_MATCH;
}

bool lcx__wildmatch(const char *pat, const char *text)
{
    const unsigned char *p = (const unsigned char *)pat;
    long steps = 0;
    return dowild(p, (const unsigned char *)text, p, &steps) == WM_MATCH;
}

/* ---------------------------------------------------------------------------------- */

typedef struct {
    char *pat;        /* pattern, leading '/' and trailing '/' removed */
    bool negate;
    bool dir_only;
    bool basename;    /* no '/' in the pattern: match the last component at any depth */
} rule;

struct lcx_ignore {
    char *base;       /* scope-relative directory of the .gitignore, "" = root */
    size_t base_len;
    rule *rules;
    int n;
};

#define MAX_RULES 10000      /* per file: a bigger .gitignore is truncated */
#define MAX_LINE 4096

int lcx__ignore_parse(const char *text, size_t len, const char *base, lcx_ignore **out)
{
    *out = NULL;
    lcx_ignore *ig = calloc(1, sizeof *ig);
    if (!ig) return LCX_ENOMEM;
    ig->base = strdup(base ? base : "");
    if (!ig->base) { free(ig); return LCX_ENOMEM; }
    ig->base_len = strlen(ig->base);
    int cap = 0;
    size_t i = 0;
    while (i < len && ig->n < MAX_RULES) {
        size_t s = i;
        while (i < len && text[i] != '\n') i++;
        size_t e = i;
        i++;
        if (e > s && text[e - 1] == '\r') e--;
        if (e - s == 0 || e - s > MAX_LINE) continue;
        if (text[s] == '#') continue;
        /* trailing spaces: dropped unless escaped ("\ " keeps one literal space) */
        while (e > s && text[e - 1] == ' ') {
            size_t bs = 0;
            for (size_t k = e - 1; k > s && text[k - 1] == '\\'; k--) bs++;
            if (bs % 2 == 1) break;
            e--;
        }
        if (e == s) continue;
        bool neg = false;
        if (text[s] == '!') { neg = true; s++; }
        if (e == s) continue;
        bool dir_only = false;
        if (text[e - 1] == '/') {
            dir_only = true;
            e--;
        }
        if (e == s) continue;
        /* a '/' other than a trailing one anchors the pattern */
        bool has_slash = memchr(text + s, '/', e - s) != NULL;
        if (text[s] == '/') s++;
        if (e == s) continue;
        if (ig->n == cap) {
            int nc = cap ? cap * 2 : 16;
            rule *nr = realloc(ig->rules, nc * sizeof *nr);
            if (!nr) { lcx__ignore_free(ig); return LCX_ENOMEM; }
            ig->rules = nr;
            cap = nc;
        }
        rule *r = &ig->rules[ig->n];
        r->pat = strndup(text + s, e - s);
        if (!r->pat) { lcx__ignore_free(ig); return LCX_ENOMEM; }
        r->negate = neg;
        r->dir_only = dir_only;
        r->basename = !has_slash;
        ig->n++;
    }
    *out = ig;
    return 0;
}

void lcx__ignore_free(lcx_ignore *ig)
{
    if (!ig) return;
    for (int i = 0; i < ig->n; i++) free(ig->rules[i].pat);
    free(ig->rules);
    free(ig->base);
    free(ig);
}

int lcx__ignore_match(const lcx_ignore *ig, const char *relpath, bool is_dir)
{
    /* path relative to the .gitignore's directory */
    const char *name = relpath;
    if (ig->base_len) {
        if (strncmp(relpath, ig->base, ig->base_len) || relpath[ig->base_len] != '/') return 0;
        name = relpath + ig->base_len + 1;
    }
    const char *slash = strrchr(name, '/');
    const char *bname = slash ? slash + 1 : name;
    for (int i = ig->n - 1; i >= 0; i--) {
        const rule *r = &ig->rules[i];
        if (r->dir_only && !is_dir) continue;
        bool m = r->basename ? lcx__wildmatch(r->pat, bname) : lcx__wildmatch(r->pat, name);
        if (m) return r->negate ? -1 : 1;
    }
    return 0;
}
