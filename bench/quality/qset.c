/* Retrieval-quality sets: see qset.h. */
#define _GNU_SOURCE
#include "qset.h"
#include "longctx/lcx.h"
#include "longctx/lcx_scope.h"
#include "scope/scope_int.h"
#include <ctype.h>
#include <dirent.h>
#include <ftw.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ------------------------------------------------------------------ helpers */

static uint64_t sm64(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static uint32_t rnd(uint64_t *s, uint32_t n) { return n ? (uint32_t)(sm64(s) % n) : 0; }

void qs_score_add(qs_score *s, int rank, int at)
{
    s->n++;
    if (rank == 1) s->r1++;
    if (rank >= 1 && rank <= at) s->r10++;
    if (rank >= 1 && rank <= 10) s->mrr += 1.0 / rank;
}
void qs_score_done(qs_score *s)
{
    if (!s->n) return;
    s->r1 /= s->n;
    s->r10 /= s->n;
    s->mrr /= s->n;
}

static uint64_t fnv(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return h | 1;
}
int qs_half(const char *q) { return (int)((fnv(q, strlen(q)) >> 17) & 1); }

static char *slurp(const char *p, size_t *len)
{
    FILE *f = fopen(p, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (b && fread(b, 1, (size_t)n, f) != (size_t)n) { free(b); b = NULL; }
    fclose(f);
    if (b) { b[n] = 0; *len = (size_t)n; }
    return b;
}

static int mkdirs(const char *p)
{
    char t[PATH_MAX];
    snprintf(t, sizeof t, "%s", p);
    for (char *s = t + 1; *s; s++)
        if (*s == '/') { *s = 0; mkdir(t, 0755); *s = '/'; }
    return mkdir(t, 0755) && access(t, F_OK) ? -1 : 0;
}
static int rm_cb(const char *p, const struct stat *sb, int f, struct FTW *w) { (void)sb; (void)f; (void)w; return remove(p); }
static void rmtree(const char *p) { nftw(p, rm_cb, 16, FTW_DEPTH | FTW_PHYS); }

/* ------------------------------------------------------------------ plain BM25
 * The baseline a new user would write: lower-cased runs of ASCII letters/digits (every
 * other byte separates; non-ASCII bytes count as letters), no stopwords, no stemming, no
 * identifier splitting beyond what the separators do; Lucene's idf, k1 = 1.2, b = 0.75. */
typedef struct { uint64_t h; uint32_t id; } bslot;
typedef struct {
    uint32_t nd, nt, cap;
    bslot *tab;
    uint32_t **pd; uint16_t **ptf; uint32_t *pn, *pc;
    uint32_t *dl;
    double avgdl;
} bm25;

static int bm_word(unsigned char c) { return isalnum(c) || c >= 0x80; }

/* calls fn(hash) for every token of s */
static void bm_tokens(const char *s, size_t n, void (*fn)(uint64_t, void *), void *ud)
{
    char w[128];
    size_t i = 0;
    while (i < n) {
        while (i < n && !bm_word((unsigned char)s[i])) i++;
        size_t k = 0;
        while (i < n && bm_word((unsigned char)s[i])) {
            if (k < sizeof w) w[k++] = (char)tolower((unsigned char)s[i]);
            i++;
        }
        if (k) fn(fnv(w, k), ud);
    }
}

static uint32_t bm_term(bm25 *b, uint64_t h, int create)
{
    if (create && (b->nt + 1) * 2 > b->cap) {
        uint32_t nc = b->cap ? b->cap * 2 : 1024;
        bslot *nt = calloc(nc, sizeof *nt);
        for (uint32_t i = 0; i < b->cap; i++)
            if (b->tab[i].h) {
                uint32_t j = (uint32_t)b->tab[i].h & (nc - 1);
                while (nt[j].h) j = (j + 1) & (nc - 1);
                nt[j] = b->tab[i];
            }
        free(b->tab);
        b->tab = nt;
        b->cap = nc;
        b->pd = realloc(b->pd, nc * sizeof *b->pd);
        b->ptf = realloc(b->ptf, nc * sizeof *b->ptf);
        b->pn = realloc(b->pn, nc * sizeof *b->pn);
        b->pc = realloc(b->pc, nc * sizeof *b->pc);
    }
    if (!b->cap) return UINT32_MAX;
    uint32_t j = (uint32_t)h & (b->cap - 1);
    while (b->tab[j].h) {
        if (b->tab[j].h == h) return b->tab[j].id;
        j = (j + 1) & (b->cap - 1);
    }
    if (!create) return UINT32_MAX;
    uint32_t id = b->nt++;
    b->tab[j] = (bslot){h, id};
    b->pd[id] = NULL; b->ptf[id] = NULL; b->pn[id] = 0; b->pc[id] = 0;
    return id;
}

typedef struct { bm25 *b; uint32_t doc; } bm_add_ctx;
static void bm_add_tok(uint64_t h, void *ud)
{
    bm_add_ctx *c = ud;
    bm25 *b = c->b;
    uint32_t t = bm_term(b, h, 1);
    b->dl[c->doc]++;
    uint32_t n = b->pn[t];
    if (n && b->pd[t][n - 1] == c->doc) { b->ptf[t][n - 1]++; return; }
    if (n == b->pc[t]) {
        b->pc[t] = b->pc[t] ? b->pc[t] * 2 : 4;
        b->pd[t] = realloc(b->pd[t], b->pc[t] * sizeof **b->pd);
        b->ptf[t] = realloc(b->ptf[t], b->pc[t] * sizeof **b->ptf);
    }
    b->pd[t][n] = c->doc;
    b->ptf[t][n] = 1;
    b->pn[t]++;
}

static void bm_build(bm25 *b, char **texts, const uint32_t *lens, uint32_t n)
{
    memset(b, 0, sizeof *b);
    b->nd = n;
    b->dl = calloc(n ? n : 1, sizeof *b->dl);
    double sum = 0;
    for (uint32_t d = 0; d < n; d++) {
        bm_add_ctx c = {b, d};
        bm_tokens(texts[d], lens[d], bm_add_tok, &c);
        sum += b->dl[d];
    }
    b->avgdl = n ? sum / n : 1;
    if (b->avgdl <= 0) b->avgdl = 1;
}

static void bm_free(bm25 *b)
{
    for (uint32_t t = 0; t < b->nt; t++) { free(b->pd[t]); free(b->ptf[t]); }
    free(b->pd); free(b->ptf); free(b->pn); free(b->pc); free(b->tab); free(b->dl);
}

typedef struct { uint32_t id[256]; int n; bm25 *b; } bm_q;
static void bm_q_tok(uint64_t h, void *ud)
{
    bm_q *q = ud;
    uint32_t t = bm_term(q->b, h, 0);
    if (t == UINT32_MAX || q->n >= 256) return;
    for (int i = 0; i < q->n; i++) if (q->id[i] == t) return;   /* each query term once */
    q->id[q->n++] = t;
}

/* scores (nd) of the query; returns the rank (1-based, ties → lower id first) of the best
 * document for which ok(doc) holds, 0 if none scores > 0 */
static int bm_rank(bm25 *b, const char *q, size_t ql, float *acc, int (*ok)(uint32_t, void *), void *ud)
{
    bm_q qq = {.n = 0, .b = b};
    bm_tokens(q, ql, bm_q_tok, &qq);
    memset(acc, 0, b->nd * sizeof *acc);
    const double k1 = 1.2, bb = 0.75;
    for (int i = 0; i < qq.n; i++) {
        uint32_t t = qq.id[i];
        double df = b->pn[t];
        double idf = log(1 + (b->nd - df + 0.5) / (df + 0.5));
        for (uint32_t j = 0; j < b->pn[t]; j++) {
            uint32_t d = b->pd[t][j];
            double tf = b->ptf[t][j];
            acc[d] += (float)(idf * tf * (k1 + 1) / (tf + k1 * (1 - bb + bb * b->dl[d] / b->avgdl)));
        }
    }
    float best = 0;
    uint32_t bd = UINT32_MAX;
    for (uint32_t d = 0; d < b->nd; d++)
        if (acc[d] > 0 && ok(d, ud) && acc[d] > best) { best = acc[d]; bd = d; }
    if (bd == UINT32_MAX) return 0;
    int r = 1;
    for (uint32_t d = 0; d < b->nd; d++)
        if (acc[d] > best || (acc[d] == best && d < bd)) r++;
    return r;
}

/* ------------------------------------------------------------------ code set: extraction */

typedef struct { char *path; int lang; } srcfile;   /* lang 0 C, 1 JS, 2 Perl */
typedef struct { srcfile *v; int n, cap; } srclist;

static int lang_of(const char *p)
{
    const char *d = strrchr(p, '.');
    if (!d) return -1;
    if (!strcmp(d, ".h") || !strcmp(d, ".hpp")) return 0;
    if ((!strcmp(d, ".js") || !strcmp(d, ".cjs") || !strcmp(d, ".mjs")) && !strstr(p, ".min.")) return 1;
    if (!strcmp(d, ".pm")) return 2;
    return -1;
}

static srclist *g_list;
static size_t g_root_len;
/* A file below a directory the scope walker skips (dist/, build/, node_modules/, dot
 * directories: lcx__walk_skip_dir) would be copied but never indexed, so its questions
 * would have no right chunk: such files are not picked. */
static int under_skipped_dir(const char *p)
{
    char comp[256];
    const char *s = p + g_root_len;
    for (;;) {
        while (*s == '/') s++;
        const char *e = strchr(s, '/');
        if (!e) return 0;   /* the last component is the file itself */
        size_t n = (size_t)(e - s);
        if (n < sizeof comp) {
            memcpy(comp, s, n);
            comp[n] = 0;
            if (lcx__walk_skip_dir(comp)) return 1;
        }
        s = e;
    }
}
static int walk_cb(const char *p, const struct stat *sb, int f, struct FTW *w)
{
    (void)w;
    if (f != FTW_F || !S_ISREG(sb->st_mode) || sb->st_size > (1 << 20) || sb->st_size < 64) return 0;
    int l = lang_of(p);
    if (l < 0 || under_skipped_dir(p)) return 0;
    /* packages ship the same sources built twice (dist/esm + dist/commonjs): one right
     * chunk needs one copy, so the CommonJS twins are left out */
    if (strstr(p, "/dist/commonjs/") || strstr(p, "/dist/cjs/")) return 0;
    if (g_list->n == g_list->cap) {
        g_list->cap = g_list->cap ? g_list->cap * 2 : 256;
        g_list->v = realloc(g_list->v, g_list->cap * sizeof *g_list->v);
    }
    g_list->v[g_list->n++] = (srcfile){strdup(p), l};
    return 0;
}
/* "dpkg:PKG[/PREFIX]": the files Debian package PKG installed (its dpkg file list), those
 * under PREFIX when given. A set named by packages stays the same when other packages add
 * files to a shared directory (/usr/share/perl5 gained 266 modules from one apt-get of
 * another tool's dependencies). */
static void dpkg_files(const char *spec)
{
    char pkg[128], fn[256], line[PATH_MAX];
    const char *sl = strchr(spec, '/');
    size_t pl = sl ? (size_t)(sl - spec) : strlen(spec);
    if (pl >= sizeof pkg) return;
    memcpy(pkg, spec, pl);
    pkg[pl] = 0;
    const char *prefix = sl ? sl : "/";
    snprintf(fn, sizeof fn, "/var/lib/dpkg/info/%s.list", pkg);
    FILE *f = fopen(fn, "r");
    if (!f) {
        snprintf(fn, sizeof fn, "/var/lib/dpkg/info/%s:amd64.list", pkg);
        f = fopen(fn, "r");
    }
    if (!f) return;
    g_root_len = strlen(prefix);
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        if (strncmp(line, prefix, g_root_len)) continue;
        struct stat st;
        if (lstat(line, &st)) continue;
        walk_cb(line, &st, S_ISREG(st.st_mode) ? FTW_F : FTW_NS, NULL);
    }
    fclose(f);
}
static int src_cmp(const void *a, const void *b) { return strcmp(((const srcfile *)a)->path, ((const srcfile *)b)->path); }

typedef struct { char *q; int file; uint32_t line; } question;
typedef struct { question *v; int n, cap; } qlist;

static void q_push(qlist *l, char *q, int file, uint32_t line)
{
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 256;
        l->v = realloc(l->v, l->cap * sizeof *l->v);
    }
    l->v[l->n++] = (question){q, file, line};
}

/* The first sentence of comment text t (already stripped of comment syntax): whitespace
 * collapsed, inline markup {@link X} → X; NULL when it is not question-like (fewer than
 * 3 words of letters, over 40 words, licence text, directives). */
static char *first_sentence(const char *t)
{
    size_t n = strlen(t);
    char *o = malloc(n + 1);
    size_t k = 0;
    int sp = 1;
    for (size_t i = 0; i < n; i++) {
        char c = t[i];
        if (c == '{' && !strncmp(t + i, "{@link", 6)) { i += 5; while (i + 1 < n && t[i + 1] == ' ') i++; continue; }
        if (c == '}' ) continue;
        if (isspace((unsigned char)c)) { if (!sp && k) o[k++] = ' '; sp = 1; continue; }
        sp = 0;
        o[k++] = c;
        if ((c == '.' || c == '!' || c == '?') && (i + 1 == n || isspace((unsigned char)t[i + 1]))) {
            /* "e.g. " and "i.e. " do not end a sentence */
            if (k >= 4 && (!strncasecmp(o + k - 4, "e.g.", 4) || !strncasecmp(o + k - 4, "i.e.", 4))) continue;
            break;
        }
    }
    while (k && o[k - 1] == ' ') k--;
    o[k] = 0;
    int words = 0, alpha = 0;
    for (size_t i = 0; i < k; i++) {
        if ((i == 0 || o[i - 1] == ' ') && o[i] != ' ') words++;
        if (isalpha((unsigned char)o[i]) && (i == 0 || o[i - 1] == ' ')) alpha++;
    }
    static const char *const bad[] = {"copyright", "license", "licence", "spdx", "eslint", "istanbul", "jshint",
                                      "@file", "@module", "@fileoverview", "deprecated", "todo", "xxx", "fixme",
                                      "@type", "@typedef", "@private", "@internal", "prettier-ignore", "@ts-"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        if (strcasestr(o, bad[i])) alpha = 0;
    if (alpha < 3 || words > 40 || k < 12) { free(o); return NULL; }
    return o;
}

/* Strips doc comments from a C/JS file; records questions for comments followed by code.
 * out receives the stripped copy; line numbers of the copy. */
static void strip_cjs(const char *src, size_t len, int fi, qlist *ql, char **out, size_t *olen)
{
    char *o = malloc(len + 1);
    size_t k = 0;
    uint32_t oline = 1;
    size_t i = 0;
    char *pending = NULL;   /* question of the comment just removed, waiting for its code line */
    while (i < len) {
        size_t e = i;
        while (e < len && src[e] != '\n') e++;
        size_t a = i;
        while (a < e && (src[a] == ' ' || src[a] == '\t')) a++;
        if (e - a >= 3 && !memcmp(src + a, "/**", 3) && (e - a == 3 || src[a + 3] != '*')) {
            /* a doc comment: up to and including the line holding its end */
            const char *end = memmem(src + a + 3, len - a - 3, "*/", 2);
            size_t ce = end ? (size_t)(end - src) : len;
            size_t le = ce;
            while (le < len && src[le] != '\n') le++;
            /* text: strip leading '*' per line, stop at the first tag line */
            size_t tn = ce - (a + 3);
            char *t = malloc(tn + 1);
            size_t tk = 0;
            size_t p = a + 3;
            int started = 0;
            while (p < ce) {
                size_t pe = p;
                while (pe < ce && src[pe] != '\n') pe++;
                size_t ps = p;
                while (ps < pe && (src[ps] == ' ' || src[ps] == '\t')) ps++;
                while (ps < pe && src[ps] == '*') ps++;
                while (ps < pe && (src[ps] == ' ' || src[ps] == '\t')) ps++;
                if (ps < pe && (src[ps] == '@' || src[ps] == '\\')) {
                    if (!strncmp(src + ps + 1, "brief", 5)) ps += 6;
                    else if (!strncmp(src + ps + 1, "description", 11)) ps += 12;
                    else if (!strncmp(src + ps + 1, "summary", 7)) ps += 8;
                    else break;
                }
                if (ps == pe && started) break;   /* end of the first paragraph */
                if (ps < pe) started = 1;
                memcpy(t + tk, src + ps, pe - ps);
                tk += pe - ps;
                t[tk++] = ' ';
                p = pe + 1;
            }
            t[tk] = 0;
            free(pending);
            pending = first_sentence(t);
            free(t);
            i = le < len ? le + 1 : len;
            continue;
        }
        if (pending) {
            if (a < e) {
                int code = !(src[a] == '/' || src[a] == '*' || src[a] == '#' || src[a] == '}');
                if (code) q_push(ql, pending, fi, oline);
                else free(pending);
                pending = NULL;
            }
        }
        memcpy(o + k, src + i, e - i);
        k += e - i;
        if (e < len) o[k++] = '\n';
        oline++;
        i = e < len ? e + 1 : len;
    }
    free(pending);
    o[k] = 0;
    *out = o;
    *olen = k;
}

/* Perl: all POD removed; a block of # lines right before `sub NAME` is the question's
 * comment (and removed). */
static void strip_perl(const char *src, size_t len, int fi, qlist *ql, char **out, size_t *olen)
{
    char *o = malloc(len + 1);
    size_t k = 0;
    uint32_t oline = 1;
    size_t i = 0;
    int in_pod = 0;
    size_t cstart = (size_t)-1;   /* offset in o of a pending # block */
    uint32_t cline = 0;
    char *ctext = NULL;
    size_t ctn = 0;
    while (i < len) {
        size_t e = i;
        while (e < len && src[e] != '\n') e++;
        size_t a = i;
        while (a < e && (src[a] == ' ' || src[a] == '\t')) a++;
        size_t next = e < len ? e + 1 : len;
        if (in_pod || (i == a && a < e && src[a] == '=' && isalpha((unsigned char)src[a + 1]))) {
            in_pod = !(e - a >= 4 && !memcmp(src + a, "=cut", 4));
            i = next;
            continue;
        }
        if (a < e && src[a] == '#' && !(a + 1 < e && src[a + 1] == '!')) {
            if (cstart == (size_t)-1) { cstart = k; cline = oline; ctn = 0; free(ctext); ctext = malloc(len + 1); }
            size_t ps = a;
            while (ps < e && src[ps] == '#') ps++;
            memcpy(ctext + ctn, src + ps, e - ps);
            ctn += e - ps;
            ctext[ctn++] = ' ';
            memcpy(o + k, src + i, e - i);
            k += e - i;
            o[k++] = '\n';
            oline++;
            i = next;
            continue;
        }
        if (cstart != (size_t)-1) {
            if (e - a > 4 && !memcmp(src + a, "sub ", 4)) {
                ctext[ctn] = 0;
                char *q = first_sentence(ctext);
                /* drop the block from the copy */
                k = cstart;
                oline = cline;
                if (q) q_push(ql, q, fi, oline);
            }
            cstart = (size_t)-1;
        }
        memcpy(o + k, src + i, e - i);
        k += e - i;
        if (e < len) o[k++] = '\n';
        oline++;
        i = next;
    }
    free(ctext);
    o[k] = 0;
    *out = o;
    *olen = k;
}

/* ------------------------------------------------------------------ code set: run */

typedef struct { char **text; uint32_t *len; char **path; uint32_t *ls, *le; uint32_t n; } chunks;
typedef struct { const chunks *c; const char *rel; uint32_t line; } target;
static int target_ok(uint32_t d, void *ud)
{
    const target *t = ud;
    return t->line >= t->c->ls[d] && t->line <= t->c->le[d] && !strcmp(t->c->path[d], t->rel);
}

static int qcmp(const void *a, const void *b)
{
    const question *x = a, *y = b;
    return x->file != y->file ? x->file - y->file : (int)x->line - (int)y->line;
}

int qs_code_run(const qs_code_cfg *cfg, const char *tmp, int verbose, qs_code_result *out)
{
    memset(out, 0, sizeof *out);
    srclist L = {0};
    g_list = &L;
    for (int r = 0; cfg->roots[r]; r++) {
        if (!strncmp(cfg->roots[r], "dpkg:", 5)) { dpkg_files(cfg->roots[r] + 5); continue; }
        struct stat st;
        if (stat(cfg->roots[r], &st)) continue;
        g_root_len = strlen(cfg->roots[r]);
        nftw(cfg->roots[r], walk_cb, 32, FTW_PHYS);
    }
    if (!L.n) return LCX_ENOTFOUND;
    qsort(L.v, L.n, sizeof *L.v, src_cmp);
    uint64_t seed = cfg->seed;
    if (cfg->max_files > 0 && L.n > cfg->max_files) {
        for (int i = L.n - 1; i > 0; i--) {
            int j = (int)rnd(&seed, (uint32_t)i + 1);
            srcfile t = L.v[i]; L.v[i] = L.v[j]; L.v[j] = t;
        }
        for (int i = cfg->max_files; i < L.n; i++) free(L.v[i].path);
        L.n = cfg->max_files;
        qsort(L.v, L.n, sizeof *L.v, src_cmp);
    }
    /* common prefix of the paths → relative names in the tree */
    size_t pre = strlen(L.v[0].path);
    for (int i = 1; i < L.n; i++) {
        size_t j = 0;
        while (j < pre && L.v[i].path[j] == L.v[0].path[j]) j++;
        pre = j;
    }
    while (pre && L.v[0].path[pre - 1] != '/') pre--;

    char root[PATH_MAX - 64], tree[PATH_MAX], data[PATH_MAX];
    snprintf(root, sizeof root, "%s/lcxq.XXXXXX", tmp);
    if (!mkdtemp(root)) return LCX_EIO;
    snprintf(tree, sizeof tree, "%s/tree", root);
    snprintf(data, sizeof data, "%s/data", root);
    mkdirs(tree);
    mkdirs(data);
    /* a sentinel so the scope is this tree */
    char gp[PATH_MAX + 16];
    snprintf(gp, sizeof gp, "%s/.git", tree);
    mkdir(gp, 0755);

    qlist Q = {0};
    char **rels = calloc(L.n, sizeof *rels);
    for (int i = 0; i < L.n; i++) {
        size_t n;
        char *src = slurp(L.v[i].path, &n);
        if (!src) continue;
        if (memchr(src, 0, n)) { free(src); continue; }
        char *cp;
        size_t cn;
        if (L.v[i].lang == 2) strip_perl(src, n, i, &Q, &cp, &cn);
        else strip_cjs(src, n, i, &Q, &cp, &cn);
        free(src);
        rels[i] = strdup(L.v[i].path + pre);
        char fp[PATH_MAX * 2];
        snprintf(fp, sizeof fp, "%s/%s", tree, rels[i]);
        char *sl = strrchr(fp, '/');
        *sl = 0;
        mkdirs(fp);
        *sl = '/';
        FILE *f = fopen(fp, "wb");
        if (f) { fwrite(cp, 1, cn, f); fclose(f); }
        free(cp);
        out->files++;
    }
    /* a question text that occurs twice has no one right answer: drop all copies */
    for (int i = 0; i < Q.n; i++)
        for (int j = i + 1; j < Q.n && Q.v[i].q; j++)
            if (Q.v[j].q && !strcasecmp(Q.v[i].q, Q.v[j].q)) { free(Q.v[j].q); Q.v[j].q = NULL; Q.v[i].file = -1; }
    int m = 0;
    for (int i = 0; i < Q.n; i++) {
        if (!Q.v[i].q) continue;
        if (Q.v[i].file < 0) { free(Q.v[i].q); continue; }
        Q.v[m++] = Q.v[i];
    }
    Q.n = m;
    int rc = 0;
    lcx_embedder *emb = NULL;
    lcx_scopes *M = NULL;
    lcx_index *ix = NULL;
    chunks C = {0};
    bm25 B = {0};
    float *acc = NULL;
    if (!Q.n) { rc = LCX_ENOTFOUND; goto done; }

    if ((rc = lcx_embedder_hash_new(0, &emb)) < 0) goto done;
    lcx_scopes_opts so = lcx_scopes_defaults();
    so.data_dir = data;
    so.watch = false;
    if ((rc = lcx_scopes_open(&so, emb, &M)) < 0) goto done;
    lcx_scope_info info;
    const char *ec = NULL;
    if ((rc = lcx_scopes_index(M, tree, NULL, NULL, &info, &ec)) < 0) goto done;
    char ctree[PATH_MAX];
    if (!realpath(tree, ctree)) snprintf(ctree, sizeof ctree, "%s", tree);
    /* the chunks, read back from the scope's own store */
    lcx_scopes_unload(M, ctree);
    {
        char sd[PATH_MAX * 2];
        snprintf(sd, sizeof sd, "%s/scopes/%s/store", data, info.scope_hash);
        lcx_store *st;
        if ((rc = lcx_store_open(sd, emb, NULL, &st)) < 0) goto done;
        uint32_t n = lcx_store_count(st);
        C.text = calloc(n, sizeof *C.text); C.len = calloc(n, sizeof *C.len); C.path = calloc(n, sizeof *C.path);
        C.ls = calloc(n, sizeof *C.ls); C.le = calloc(n, sizeof *C.le);
        for (uint32_t id = 0; C.n < n && id < n * 4 + 16; id++) {
            lcx_chunk c;
            if (lcx_store_get(st, id, &c) < 0) continue;
            C.text[C.n] = strndup(c.text, c.text_len);
            C.len[C.n] = c.text_len;
            C.path[C.n] = strndup(c.path, c.path_len);
            C.ls[C.n] = c.line_start;
            C.le[C.n] = c.line_end;
            C.n++;
        }
        lcx_store_close(st);
    }
    out->chunks = (int)C.n;
    /* A question whose definition the scope does not index has no right chunk for either
     * ranking: the walker skips build output and vendored trees (dist/, build/,
     * node_modules/ …, src/scope/walk.c), which npm's packages are full of. Such
     * questions are dropped before the pick, not counted as misses. */
    m = 0;
    for (int i = 0; i < Q.n; i++) {
        target T = {&C, rels[Q.v[i].file], Q.v[i].line};
        int ok = 0;
        for (uint32_t d = 0; d < C.n && !ok; d++) ok = target_ok(d, &T);
        if (ok) Q.v[m++] = Q.v[i];
        else { free(Q.v[i].q); out->unindexed++; }
    }
    Q.n = m;
    if (cfg->max_q > 0 && Q.n > cfg->max_q) {
        for (int i = Q.n - 1; i > 0; i--) {
            int j = (int)rnd(&seed, (uint32_t)i + 1);
            question t = Q.v[i]; Q.v[i] = Q.v[j]; Q.v[j] = t;
        }
        for (int i = cfg->max_q; i < Q.n; i++) free(Q.v[i].q);
        Q.n = cfg->max_q;
        qsort(Q.v, Q.n, sizeof *Q.v, qcmp);
    }
    if (!Q.n) { rc = LCX_ENOTFOUND; goto done; }
    out->questions = Q.n;
    bm_build(&B, C.text, C.len, C.n);
    acc = malloc((C.n ? C.n : 1) * sizeof *acc);
    if ((rc = lcx_index_new(emb, &ix)) < 0) goto done;
    for (uint32_t d = 0; d < C.n; d++)
        if ((rc = lcx_index_add(ix, C.text[d], C.len[d], NULL, NULL)) < 0) goto done;

    FILE *fq = NULL;
    if (cfg->dump_dir) {
        char fn[PATH_MAX];
        snprintf(fn, sizeof fn, "%s/%s.chunks", cfg->dump_dir, cfg->name);
        FILE *fc = fopen(fn, "w");
        for (uint32_t d = 0; fc && d < C.n; d++) {
            fprintf(fc, "%u\t%s\t", d, C.path[d]);
            for (uint32_t z = 0; z < C.len[d]; z++) {
                char ch = C.text[d][z];
                fputc(ch == '\n' || ch == '\t' || ch == '\r' ? ' ' : ch, fc);
            }
            fputc('\n', fc);
        }
        if (fc) fclose(fc);
        snprintf(fn, sizeof fn, "%s/%s.q", cfg->dump_dir, cfg->name);
        fq = fopen(fn, "w");
    }
    for (int qi = 0; qi < Q.n; qi++) {
        const char *q = Q.v[qi].q;
        target T = {&C, rels[Q.v[qi].file], Q.v[qi].line};
        int rb = bm_rank(&B, q, strlen(q), acc, target_ok, &T);
        if (rb > 10) rb = 0;
        qs_score_add(&out->bm25, rb, 10);
        qs_score_add(&out->half_b[qs_half(q)], rb, 10);
        /* core: the hybrid index alone */
        lcx_search_opts o = lcx_search_defaults();
        o.top_k = 10;
        lcx_hit h[10];
        int nh = lcx_index_search(ix, q, strlen(q), &o, h, 10);
        int rcore = 0;
        for (int i = 0; i < nh && !rcore; i++)
            if (target_ok(h[i].id, &T)) rcore = i + 1;
        qs_score_add(&out->core, rcore, 10);
        /* the core search's deeper candidate lists: the ceiling of any reranker */
        static const int depth[3] = QS_POOL_DEPTHS;
        lcx_hit hp[128];
        int np = 0;
        for (int z = 0; z < 3; z++) {
            lcx_search_opts op = lcx_search_defaults();
            op.top_k = op.prefilter = depth[z];
            np = lcx_index_search(ix, q, strlen(q), &op, hp, depth[z]);
            for (int i = 0; i < np; i++)
                if (target_ok(hp[i].id, &T)) { out->pool_r[z] += 1.0 / Q.n; break; }
        }
        if (fq) {
            fprintf(fq, "%s\t", q);
            for (uint32_t d = 0, f = 0; d < C.n; d++)
                if (target_ok(d, &T)) fprintf(fq, "%s%u", f++ ? "," : "", d);
            fputc('\t', fq);
            for (int i = 0; i < np; i++) fprintf(fq, "%s%u:%.5f", i ? "," : "", hp[i].id, hp[i].score);
            fputc('\n', fq);
        }
        /* longctx's own BM25 channel alone (its tokenizer: identifiers split, stopwords) */
        o.alpha = 0;
        o.use_rerank = false;
        nh = lcx_index_search(ix, q, strlen(q), &o, h, 10);
        int rlb = 0;
        for (int i = 0; i < nh && !rlb; i++)
            if (target_ok(h[i].id, &T) && h[i].bm25 > 0) rlb = i + 1;
        qs_score_add(&out->bm25_lcx, rlb, 10);
        /* default: the code retrieval pipeline */
        lcx_code_request rq = lcx_code_request_init();
        rq.query = q;
        rq.query_len = strlen(q);
        rq.top_k = verbose >= 3 ? 40 : 10;   /* -v -v -v: ranks 11-40 for failure analysis */
        rq.explicit_scope = ctree;
        lcx_code_result res;
        int rd = 0, sym = 0;
        char want[PATH_MAX * 2];
        snprintf(want, sizeof want, "%s/%s", ctree, T.rel);
        if (lcx_code_retrieve(M, &rq, &res) == 0) {
            for (int i = 0; i < res.n_hits; i++) {
                if (res.hits[i].symbol_hit) sym = 1;
                if (!rd && !strcmp(res.hits[i].file_path, want) && T.line >= res.hits[i].start_line &&
                    T.line <= res.hits[i].end_line)
                    rd = i + 1;
            }
            if (verbose >= 3)
                fprintf(stderr, "  q: default %d bm25 %d  %s:%u  \"%s\"  top1 %s:%u\n", rd, rb, T.rel, T.line, q,
                        res.n_hits ? res.hits[0].file_path + strlen(ctree) + 1 : "-", res.n_hits ? res.hits[0].start_line : 0);
            else if (verbose >= 2 && (rd == 0 || (rb && rd > rb)))
                fprintf(stderr, "  lose: default %d bm25 %d core %d sym %d  %s:%u  \"%s\"  top1 %s:%u%s\n", rd, rb, rcore, sym,
                        T.rel, T.line, q, res.n_hits ? res.hits[0].file_path + strlen(ctree) + 1 : "-",
                        res.n_hits ? res.hits[0].start_line : 0, res.n_hits && res.hits[0].symbol_hit ? " (sym)" : "");
            lcx_code_result_free(&res);
        }
        out->sym_pulls += sym;
        qs_score_add(&out->deflt, rd, 10);
        qs_score_add(&out->half_d[qs_half(q)], rd, 10);
    }
    for (int z = 0; z < 2; z++) { qs_score_done(&out->half_d[z]); qs_score_done(&out->half_b[z]); }
    if (fq) fclose(fq);
    qs_score_done(&out->deflt);
    qs_score_done(&out->core);
    qs_score_done(&out->bm25);
    qs_score_done(&out->bm25_lcx);
done:
    (void)verbose;
    lcx_index_free(ix);
    lcx_scopes_close(M);
    lcx_embedder_free(emb);
    bm_free(&B);
    free(acc);
    for (uint32_t d = 0; d < C.n; d++) { free(C.text[d]); free(C.path[d]); }
    free(C.text); free(C.len); free(C.path); free(C.ls); free(C.le);
    for (int i = 0; i < Q.n; i++) free(Q.v[i].q);
    free(Q.v);
    for (int i = 0; i < L.n; i++) { free(L.v[i].path); free(rels[i]); }
    free(L.v);
    free(rels);
    if (getenv("QS_KEEP")) fprintf(stderr, "kept %s\n", root); else rmtree(root);
    return rc;
}

/* ------------------------------------------------------------------ prose set */

static const char *const ADJ[] = {"cracked", "small", "tiny", "silver", "quiet", "rusty", "golden", "hollow",
                                  "bitter", "frozen", "crooked", "gentle", "narrow", "purple", "ancient", "brave"};
static const char *const NOUN[] = {"guitar", "harbor", "flute", "lantern", "meadow", "compass", "violin", "bridge",
                                   "orchard", "kettle", "tower", "river", "canyon", "saddle", "mirror", "falcon"};
#define NADJ (int)(sizeof ADJ / sizeof *ADJ)
#define NNOUN (int)(sizeof NOUN / sizeof *NOUN)

static const char *const CHAT[] = {
    "Thanks a lot for the help with the earlier summary, it was really useful for the team meeting.",
    "Please keep the answer short; I only need the value itself and nothing else.",
    "I pasted the part of the document I was reading above so you know the context I mean.",
    "By the way, the formatting of your last reply was great, keep it like that.",
};

typedef struct { char *s; size_t n, cap; } sbuf;
static void sb_add(sbuf *b, const char *s, size_t n)
{
    if (b->n + n + 1 > b->cap) {
        b->cap = (b->n + n + 1) * 2;
        b->s = realloc(b->s, b->cap);
    }
    memcpy(b->s + b->n, s, n);
    b->n += n;
    b->s[b->n] = 0;
}
static void sb_str(sbuf *b, const char *s) { sb_add(b, s, strlen(s)); }

typedef struct { char **t; uint32_t *l; uint32_t n; } spans;
static int span_is(uint32_t d, void *ud) { return d == *(uint32_t *)ud; }

int qs_prose_run(const qs_prose_cfg *cfg, int verbose, qs_prose_result *out)
{
    memset(out, 0, sizeof *out);
    DIR *dir = opendir(cfg->haystack);
    if (!dir) return LCX_ENOTFOUND;
    char *names[512];
    int ne = 0;
    struct dirent *de;
    while ((de = readdir(dir)) && ne < 512)
        if (strstr(de->d_name, ".txt")) names[ne++] = strdup(de->d_name);
    closedir(dir);
    if (!ne) return LCX_ENOTFOUND;
    for (int i = 1; i < ne; i++)
        for (int j = i; j > 0 && strcmp(names[j - 1], names[j]) > 0; j--) { char *t = names[j]; names[j] = names[j - 1]; names[j - 1] = t; }
    char *ess[512];
    size_t esl[512];
    for (int i = 0; i < ne; i++) {
        char p[PATH_MAX];
        snprintf(p, sizeof p, "%s/%s", cfg->haystack, names[i]);
        ess[i] = slurp(p, &esl[i]);
        if (!ess[i]) { ess[i] = strdup(""); esl[i] = 0; }
        free(names[i]);
    }
    lcx_embedder *emb = NULL;
    int rc = lcx_embedder_hash_new(0, &emb);
    if (rc < 0) return rc;
    uint64_t seed = cfg->seed;
    for (int li = 0; cfg->tokens[li]; li++) {
        size_t want = (size_t)cfg->tokens[li] * 4;
        for (int tr = 0; tr < cfg->trials; tr++) {
            /* haystack: essays in a seeded order, repeated as needed */
            sbuf H = {0};
            while (H.n < want) {
                int e = (int)rnd(&seed, (uint32_t)ne);
                size_t take = esl[e] < want - H.n ? esl[e] : want - H.n;
                sb_add(&H, ess[e], take);
                sb_str(&H, "\n\n");
            }
            /* needles: target key (a, n); distractors share the adjective or the noun */
            int nn = 1 + cfg->distractors;
            int ka[16], kn[16];
            uint32_t val[16];
            ka[0] = (int)rnd(&seed, NADJ);
            kn[0] = (int)rnd(&seed, NNOUN);
            for (int i = 1; i < nn; i++) {
                for (;;) {
                    if (i & 1) { ka[i] = ka[0]; kn[i] = (int)rnd(&seed, NNOUN); }
                    else { kn[i] = kn[0]; ka[i] = (int)rnd(&seed, NADJ); }
                    int dup = 0;
                    for (int j = 0; j < i; j++) dup |= ka[j] == ka[i] && kn[j] == kn[i];
                    if (!dup) break;
                }
            }
            for (int i = 0; i < nn; i++) val[i] = 1000000 + rnd(&seed, 9000000);
            /* insertion points: after a ". " at distinct positions, in increasing order */
            size_t pos[16];
            for (int i = 0; i < nn; i++) {
                size_t p = rnd(&seed, (uint32_t)H.n);
                const char *d = strstr(H.s + p, ". ");
                pos[i] = d ? (size_t)(d - H.s) + 2 : H.n;
            }
            int ord[16];
            for (int i = 0; i < nn; i++) ord[i] = i;
            for (int i = 1; i < nn; i++)
                for (int j = i; j > 0 && pos[ord[j - 1]] > pos[ord[j]]; j--) { int t = ord[j]; ord[j] = ord[j - 1]; ord[j - 1] = t; }
            sbuf S = {0};
            size_t at = 0;
            size_t noff[16];
            for (int k = 0; k < nn; k++) {
                int i = ord[k];
                sb_add(&S, H.s + at, pos[i] - at);
                at = pos[i];
                char nd[160];
                snprintf(nd, sizeof nd, "One of the special magic numbers for %s %s is: %u. ", ADJ[ka[i]], NOUN[kn[i]], val[i]);
                noff[i] = S.n;
                sb_str(&S, nd);
            }
            sb_add(&S, H.s + at, H.n - at);
            /* spans of ~1 KB cut at whitespace (an engine evicts token ranges); the target's span */
            spans P = {0};
            uint32_t cap = (uint32_t)(S.n / 900 + 8);
            P.t = malloc(cap * sizeof *P.t);
            P.l = malloc(cap * sizeof *P.l);
            uint32_t tgt = UINT32_MAX;
            size_t o = 0;
            while (o < S.n && P.n < cap) {
                size_t e = o + 1024 < S.n ? o + 1024 : S.n;
                while (e < S.n && e > o + 700 && S.s[e] != ' ') e--;
                /* a needle is never cut: move the cut after it */
                for (int i = 0; i < nn; i++)
                    if (noff[i] < e && noff[i] + 80 > e) {
                        const char *d = strstr(S.s + noff[i], ". ");
                        if (d && (size_t)(d - S.s) + 2 > e) e = (size_t)(d - S.s) + 2;
                    }
                if (e > S.n) e = S.n;
                if (noff[0] >= o && noff[0] < e) tgt = P.n;
                P.t[P.n] = S.s + o;
                P.l[P.n] = (uint32_t)(e - o);
                P.n++;
                o = e;
            }
            lcx_index *ix = NULL;
            if ((rc = lcx_index_new(emb, &ix)) < 0) goto fail;
            for (uint32_t d = 0; d < P.n; d++)
                if ((rc = lcx_index_add(ix, P.t[d], P.l[d], NULL, NULL)) < 0) { lcx_index_free(ix); goto fail; }
            out->sessions++;
            char qs[256];
            snprintf(qs, sizeof qs, "What is the special magic number for %s %s mentioned in the provided text?",
                     ADJ[ka[0]], NOUN[kn[0]]);
            /* a user turn: pasted context (a window of the session) then the question */
            size_t wo = rnd(&seed, (uint32_t)(S.n > 3000 ? S.n - 3000 : 1));
            for (int shape = 0; shape < QS_NSHAPES; shape++) {
                sbuf U = {0};
                if (shape != QS_PLAIN) {
                    sb_str(&U, "Here is the part I am asking about:\n\n");
                    sb_add(&U, S.s + wo, S.n - wo < 2400 ? S.n - wo : 2400);
                    sb_str(&U, "\n\n");
                    sb_str(&U, CHAT[rnd(&seed, 4)]);
                    sb_str(&U, "\n\n");
                }
                if (shape == QS_MARKER) sb_str(&U, "Question: ");
                sb_str(&U, qs);
                if (shape == QS_NOMARKER) { sb_str(&U, " "); sb_str(&U, CHAT[rnd(&seed, 4)]); }
                /* the rescue route: query signal, then the default search (top_k 8) */
                size_t qo, ql;
                lcx_rescue_query(U.s, U.n, &qo, &ql);
                while (ql && isspace((unsigned char)U.s[qo])) qo++, ql--;
                if (!ql) { qo = 0; ql = U.n; }
                lcx_search_opts so = lcx_search_defaults();
                so.top_k = 8;
                lcx_hit h[8];
                int nh = lcx_index_search(ix, U.s + qo, ql, &so, h, 8);
                int r = 0;
                for (int i = 0; i < nh && !r; i++)
                    if (h[i].id == tgt) r = i + 1;
                qs_score_add(&out->deflt[shape], r, 8);
                if (verbose >= 2 && r != 1) {
                    fprintf(stderr, "  prose lose: shape %d len %d rank %d query \"%.*s\"\n", shape, cfg->tokens[li], r,
                            (int)(ql < 200 ? ql : 200), U.s + qo);
                    for (int i = 0; verbose >= 3 && i < nh && i < r; i++) {
                        const char *t = P.t[h[i].id], *mg = memmem(t, P.l[h[i].id], "magic numbers", 13);
                        fprintf(stderr, "    #%d len %u score %.3f dense %.3f bm25 %.2f%s: %.160s\n", i + 1, P.l[h[i].id], h[i].score, h[i].dense, h[i].bm25,
                                h[i].id == tgt ? " (target)" : "", mg ? mg - 40 : t);
                        static const char *const qw[] = {"special", "magic", "number", "mentioned", "provided", "text", NULL};
                        fprintf(stderr, "      words:");
                        for (int w = 0; qw[w]; w++) {
                            int cnt = 0;
                            for (const char *x = t; (x = strcasestr(x, qw[w])) && x < t + P.l[h[i].id]; x++) cnt++;
                            fprintf(stderr, " %s:%d", qw[w], cnt);
                        }
                        fprintf(stderr, "\n");
                    }
                }
                free(U.s);
            }
            float *acc = malloc(P.n * sizeof *acc);
            bm25 B;
            bm_build(&B, P.t, P.l, P.n);
            int rb = bm_rank(&B, qs, strlen(qs), acc, span_is, &tgt);
            qs_score_add(&out->bm25, rb > 8 ? 0 : rb, 8);
            bm_free(&B);
            free(acc);
            lcx_index_free(ix);
            free(P.t);
            free(P.l);
            free(S.s);
            free(H.s);
        }
    }
    for (int s = 0; s < QS_NSHAPES; s++) qs_score_done(&out->deflt[s]);
    qs_score_done(&out->bm25);
    rc = 0;
fail:
    for (int i = 0; i < ne; i++) free(ess[i]);
    lcx_embedder_free(emb);
    return rc;
}
