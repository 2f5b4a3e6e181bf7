/* Code retrieval pipeline (SPEC §2 /retrieve, §3): prompt → scope(s) → hits → splice.
 *
 *   1. Scopes (docs/scope.md "Scope resolution"): explicit_scope (canonicalised without
 *      requiring existence, then checked; secrets refused) skips detection; "ws:" searches
 *      every loaded scope bound to the session and merges by score; otherwise the scope is
 *      detected from the prefill (lcx_scope_detect), and when that finds nothing the
 *      session's active path cluster names it. No scope → an empty "no-scope" result.
 *   2. Each scope is made ready (Hot first, Package when Hot is small, promotion when a
 *      mention lies outside Hot) and searched with the hybrid store search (dense + BM25,
 *      fused with α CODE_ALPHA, reranked); its best NAME_POOL hits are re-scored by the
 *      definition-name match (see NAME_BOOST).
 *   3. Symbol-aware boosting: names in the query are looked up in the scope's symbol
 *      table and the chunk that contains each definition is pulled in with score
 *      own + boost·(top − own) (own = its search score, 0 when the search missed it; top =
 *      the best search score). Code-shaped names — snake_case, camelCase, X.y / X::y,
 *      `backticked`, name() — get boost 1: the definition of a name the user typed ties
 *      the best hit and goes first. A Capitalised word inside a sentence ("the Fetcher")
 *      may be a class: it pulls only when defined in ≤ 2 places, with boost 0.5, so it
 *      lands below a hit the search is sure of. The first word of a sentence ("Set the
 *      payload…", "Run until…") is English, never a name: as a name it pulled class Set
 *      to rank 1 (docs/core.md "Symbol pulls").
 *      A name defined in more than 5 places is
 *      ambiguous and skipped unless the owner (X in X.y) narrows it down; at most
 *      max(1, top_k/2) chunks come from symbols so the lexical/dense hits keep room.
 *   4. Confidence: 1 when a named symbol was found, else the cosine similarity of the best
 *      hit (an absolute measure; fused scores are normalised per query, so the top one is
 *      always near 1 and says nothing; with a neural channel, the best of the store's own
 *      top hits before the neural RRF: lcx_search_info.base_dense). Two low turns in a row promote Hot → Package.
 *   5. Splice: SPEC §2 format within the budget (lcx_code_splice). */
#include "scope/scope_int.h"
#include "scope/scopes_api.h"
#include "util/util.h"
#include "text/text.h"
#include "index/index.h"
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define MAX_IDENTS 8
#define MAX_DEFS 5
#define SYM_BOOST 1.0f        /* a code-shaped name: its definition ties the best hit, and wins the tie */
#define SYM_BOOST_WEAK 0.5f   /* a Capitalised word: half way to the best hit */
/* Definition-name match (docs/core.md "Definition names"): the best NAME_POOL search hits
 * are re-scored by (score + NAME_BOOST·top·f) / (1 + NAME_BOOST), f = the best F1 overlap between the words of
 * a name the chunk defines or calls (an identifier before "(", "= function", "= (…) =>";
 * in Perl files also "sub NAME"; an enum member, macro, struct field or JS binding:
 * decl_name) and the query's words (each with its prefixes and code synonyms). A doc-like question ("Determine whether the value is constant")
 * names its definition's parts (LLVMIsConstant) while the other windows of a header only
 * share its common words. */
#define NAME_POOL 32
/* Dense share of the code search's fusion (lcx_search_defaults has 0.5, kept for the
 * rescue path): on code the hashed vectors add little over BM25 and their noise costs
 * recall (bench_quality code set: α 0.5 / 0.4 / 0.3 / 0.2 → R@10 0.749 / 0.760 / 0.763 /
 * 0.766, MRR 0.512 / 0.516 / 0.518 / 0.516; docs/core.md "Definition names") */
#define CODE_ALPHA 0.3f
#define NAME_BOOST 0.8f
#define NAME_MIN_PREFIX 3   /* shortest prefix of a query word that a name word may be */
#define NAME_MAX_TERMS 32
#define SPLICE_HEADER "## Retrieved code context\n\n"
#define TRUNC_MARK "\n... [truncated]"
#define SPLICE_FENCE_CHARS 12     /* the reference's allowance for the fences around a text */
#define SPLICE_MIN_REMAINING 200  /* at most this much room left: stop */

/* ---------------------------------------------------------------- splice */

/* Bytes of the first k code points of s[0..n). */
static size_t cp_prefix(const char *s, size_t n, size_t k)
{
    size_t i = 0;
    while (i < n) {
        if (((unsigned char)s[i] & 0xc0) != 0x80) {
            if (k == 0) break;
            k--;
        }
        i++;
    }
    return i;
}

/* SPEC §2 with the reference's exact accounting: the heading counts as used; for each
 * chunk remaining = budget − used − (len("// path:a-b") + 12); remaining ≤ 200 stops
 * (this and later chunks dropped); a longer text is cut to remaining characters and
 * gets "\n... [truncated]"; used grows by the block's real length. So a cut block may
 * end the splice a few characters past the budget, as in the reference. */
int lcx_code_splice(const lcx_code_hit *hits, int n, size_t budget, char **out, size_t *out_len)
{
    *out = NULL;
    if (out_len) *out_len = 0;
    if (!budget) budget = LCX_SPLICE_BUDGET;
    lcx_buf b = {0};
    int rc = 0;
    if (n > 0) {
        size_t used = lcx__utf8_chars(SPLICE_HEADER, strlen(SPLICE_HEADER));
        lcx_buf hdr = {0};
        for (int i = 0; i < n && !rc; i++) {
            hdr.len = 0;
            if ((rc = lcx__buf_printf(&hdr, "// %s:%u-%u", hits[i].file_path, hits[i].start_line, hits[i].end_line))) break;
            size_t overhead = lcx__utf8_chars(hdr.data, hdr.len) + SPLICE_FENCE_CHARS;
            if (used + overhead >= budget || budget - used - overhead <= SPLICE_MIN_REMAINING) break;
            size_t remaining = budget - used - overhead;
            if (!b.len && (rc = lcx__buf_puts(&b, SPLICE_HEADER))) break;
            size_t start = b.len;
            const char *t = hits[i].text ? hits[i].text : "";
            size_t tl = strlen(t);
            bool cut = lcx__utf8_chars(t, tl) > remaining;
            if (cut) tl = cp_prefix(t, tl, remaining);
            rc = lcx__buf_append(&b, hdr.data, hdr.len);
            if (!rc) rc = lcx__buf_puts(&b, "\n```\n");
            if (!rc) rc = lcx__buf_append(&b, t, tl);
            if (!rc && cut) rc = lcx__buf_puts(&b, TRUNC_MARK);
            if (!rc) rc = lcx__buf_puts(&b, "\n```\n\n");
            used += lcx__utf8_chars(b.data + start, b.len - start);
        }
        lcx__buf_free(&hdr);
    }
    if (rc) { lcx__buf_free(&b); return rc; }
    if (!b.data && (rc = lcx__buf_puts(&b, ""))) return rc;
    size_t len;
    *out = lcx__buf_steal(&b, &len);
    if (out_len) *out_len = len;
    return 0;
}

/* ---------------------------------------------------------------- identifiers */

typedef struct { char name[64]; char owner[64]; bool weak; } ident;   /* weak: a Capitalised word */

static bool idc(char c) { return isalnum((unsigned char)c) || c == '_' || c == '$'; }

/* Identifiers the query names (see top). Returns the count. */
static int query_idents(const char *q, size_t n, ident *out, int max)
{
    int k = 0;
    size_t i = 0;
    while (i < n && k < max) {
        bool tick = q[i] == '`';
        if (tick) i++;
        if (i >= n || !(idc(q[i]))) { i++; continue; }
        size_t s = i;
        while (i < n && (idc(q[i]) || ((q[i] == '.' || q[i] == ':') && i + 1 < n && (idc(q[i + 1]) || q[i + 1] == ':'))))
            i++;
        size_t e = i;
        bool call = i + 1 < n && q[i] == '(' && q[i + 1] == ')';
        if (tick && i < n && q[i] == '`') i++;
        /* split owner.name / owner::name at the last separator */
        size_t sep = e, nb = s;
        for (size_t j = e; j > s; j--) {
            if (q[j - 1] == '.' || q[j - 1] == ':') {
                sep = j - 1;
                nb = j;
                while (sep > s && q[sep - 1] == ':') sep--;
                break;
            }
        }
        const char *name = q + nb;
        size_t nl = e - nb;
        if (!nl || nl >= 64 || !(isalpha((unsigned char)name[0]) || name[0] == '_')) continue;
        bool has_us = memchr(name, '_', nl) != NULL;
        bool has_lower = false, inner_upper = false;
        for (size_t j = 0; j < nl; j++) {
            if (islower((unsigned char)name[j])) has_lower = true;
            if (j && isupper((unsigned char)name[j])) inner_upper = true;
        }
        bool dotted = nb > s;
        bool camel = has_lower && inner_upper;
        bool alpha_us = has_us && nl > 1;
        /* "the Fetcher", "a Parser": a Capitalised word inside a sentence may be a class
         * name; it counts when the scope defines it in at most 2 places, and pulls with a
         * weaker boost. The first word of a sentence is English, never a name. */
        size_t b = s;
        while (b > 0 && (q[b - 1] == ' ' || q[b - 1] == '\t' || q[b - 1] == '`')) b--;
        bool initial = b == 0 || q[b - 1] == '.' || q[b - 1] == '!' || q[b - 1] == '?' || q[b - 1] == '\n' ||
                       q[b - 1] == ':' || q[b - 1] == '"';
        bool weak = !(tick || call || dotted || camel || alpha_us) && !initial && nl >= 3 &&
                    isupper((unsigned char)name[0]) && has_lower;
        if (!(tick || call || dotted || camel || alpha_us || weak)) continue;
        ident *d = &out[k];
        memset(d, 0, sizeof *d);
        d->weak = weak;
        memcpy(d->name, name, nl);
        if (dotted) {
            /* owner = the component right before the name */
            size_t oe = sep, os = oe;
            while (os > s && idc(q[os - 1])) os--;
            if (oe - os < 64) memcpy(d->owner, q + os, oe - os);
        }
        bool dup = false;
        for (int j = 0; j < k && !dup; j++) dup = !strcmp(out[j].name, d->name);
        if (!dup) k++;
    }
    return k;
}

/* ---------------------------------------------------------------- result building */

typedef struct {
    lcx_code_hit *v;
    int n, cap;
} hitvec;

static int hv_push(hitvec *h, const lcx_scope *s, const lcx_chunk *c, float score, bool sym)
{
    if (h->n == h->cap) {
        int nc = h->cap ? h->cap * 2 : 16;
        lcx_code_hit *nv = realloc(h->v, (size_t)nc * sizeof *nv);
        if (!nv) return LCX_ENOMEM;
        h->v = nv;
        h->cap = nc;
    }
    lcx_code_hit *x = &h->v[h->n];
    memset(x, 0, sizeof *x);
    x->text = strndup(c->text ? c->text : "", c->text_len);
    size_t pl = strlen(lcx__scope_root(s)) + 1 + c->path_len + 1;
    x->file_path = malloc(pl);
    if (!x->text || !x->file_path) {
        free(x->text);
        free(x->file_path);
        return LCX_ENOMEM;
    }
    snprintf(x->file_path, pl, "%s/%.*s", lcx__scope_root(s), (int)c->path_len, c->path ? c->path : "");
    x->start_line = c->line_start;
    x->end_line = c->line_end;
    x->file_type = c->file_type;
    x->score = score < 0 ? 0 : score > 1 ? 1 : score;
    x->symbol_hit = sym;
    h->n++;
    return 0;
}

static bool hv_has(const hitvec *h, const char *path, uint32_t ls, uint32_t le)
{
    for (int i = 0; i < h->n; i++)
        if (h->v[i].start_line == ls && h->v[i].end_line == le && !strcmp(h->v[i].file_path, path)) return true;
    return false;
}

/* The chunk of rel that contains line (prefer the one where it sits nearest the top, so
 * the body after a definition is included). */
static int chunk_for_line(lcx_scope *s, const char *rel, uint32_t line, uint32_t *id_out)
{
    uint32_t first, n;
    if (lcx__scope_chunk_range(s, rel, &first, &n) < 0 || !n) return LCX_ENOTFOUND;
    int best = -1;
    uint32_t best_off = UINT32_MAX;
    for (uint32_t i = 0; i < n; i++) {
        lcx_chunk c;
        if (lcx_store_get(lcx__scope_store(s), first + i, &c) < 0) continue;
        if (line < c.line_start || line > c.line_end) continue;
        if (line - c.line_start < best_off) { best_off = line - c.line_start; best = (int)i; }
    }
    if (best < 0) return LCX_ENOTFOUND;
    *id_out = first + (uint32_t)best;
    return 0;
}

/* ---------------------------------------------------------------- definition names */

typedef struct { uint64_t h[NAME_MAX_TERMS]; int n; } termset;

static bool ts_has(const termset *t, uint64_t h)
{
    for (int i = 0; i < t->n; i++)
        if (t->h[i] == h) return true;
    return false;
}

/* The query's words for the name match: each word is a group (c of the F1 counts groups)
 * holding the word itself and the forms a name may use for it */
#define QW_SLOTS 512
typedef struct { uint64_t h[QW_SLOTS]; uint8_t g[QW_SLOTS]; int ng; } qwords;

static int qw_find(const qwords *q, uint64_t h)
{
    h |= 1;
    for (uint32_t j = (uint32_t)h & (QW_SLOTS - 1);; j = (j + 1) & (QW_SLOTS - 1)) {
        if (!q->h[j]) return -1;
        if (q->h[j] == h) return q->g[j];
    }
}
static void qw_put(qwords *q, uint64_t h, int g, int *used)
{
    h |= 1;
    if (*used >= QW_SLOTS / 2) return;
    uint32_t j = (uint32_t)h & (QW_SLOTS - 1);
    while (q->h[j] && q->h[j] != h) j = (j + 1) & (QW_SLOTS - 1);
    if (q->h[j]) return;   /* the first group keeps a shared form */
    q->h[j] = h;
    q->g[j] = (uint8_t)g;
    (*used)++;
}

typedef struct { qwords *q; int used; } qw_ctx;
/* words, numbers and identifier parts (a whole compound identifier is its parts), stop
 * words left out: the vocabulary a name and a question share */
static int ts_tok(const char *t, size_t n, int kind, void *ud)
{
    qw_ctx *c = ud;
    qwords *q = c->q;
    if (kind == LCX_TOK_IDENT) return 0;
    if (kind == LCX_TOK_WORD && (lcx__stopword(t, n) || lcx__query_stopword(t, n))) return 0;
    uint64_t h = lcx__hash64(t, n, 0);
    if (qw_find(q, h) >= 0 || q->ng >= 64) return 0;
    int g = q->ng++;
    qw_put(q, h, g, &c->used);
    if (kind != LCX_TOK_WORD) return 0;
    /* the forms a name uses for a doc word: its prefixes (attribute → attr, listening →
     * listen) and its code synonyms (obtain → get), as the BM25 expansion (search.c) */
    for (size_t L = NAME_MIN_PREFIX; L < n; L++) qw_put(q, lcx__hash64(t, L, 0), g, &c->used);
    const char *sy[3];
    int ns = lcx__code_synonyms(t, n, sy);
    for (int i = 0; i < ns; i++) qw_put(q, lcx__hash64(sy[i], strlen(sy[i]), 0), g, &c->used);
    return 0;
}

static bool name_kw(const char *p, size_t n)
{
    static const char *const kw[] = {"if", "for", "while", "switch", "return", "sizeof", "typeof", "catch", "function", "new"};
    for (size_t i = 0; i < sizeof kw / sizeof *kw; i++)
        if (strlen(kw[i]) == n && !memcmp(kw[i], p, n)) return true;
    return false;
}

/* The words of an ASCII identifier as lcx_tokenize's parts (hot: every name of every
 * re-scored chunk, so no general tokenizer): split at '_' / '$', lower → upper, letter ↔
 * digit, and before the last capital of a capital run followed by a lower-case letter
 * ("HTTPServer" → http, server); case-folded; stop words left out. A name that is one
 * word is that word. */
static void name_words(const char *p, size_t n, termset *out)
{
    char w[LCX_TOK_MAX];
    size_t i = 0;
    while (i < n) {
        while (i < n && (p[i] == '_' || p[i] == '$')) i++;
        size_t s = i;
        if (i < n && isdigit((unsigned char)p[i])) {
            while (i < n && isdigit((unsigned char)p[i])) i++;
        } else if (i < n && isupper((unsigned char)p[i])) {
            while (i < n && isupper((unsigned char)p[i])) i++;
            if (i < n && islower((unsigned char)p[i])) {
                if (i - s > 1) i--;   /* "HTTPServer": the S starts the next word */
                else while (i < n && islower((unsigned char)p[i])) i++;
            }
        } else {
            while (i < n && islower((unsigned char)p[i])) i++;
        }
        if (i == s) { i++; continue; }
        size_t k = i - s < sizeof w ? i - s : sizeof w;
        for (size_t j = 0; j < k; j++) w[j] = (char)tolower((unsigned char)p[s + j]);
        if (lcx__stopword_inl(w, k) || lcx__query_stopword(w, k)) continue;
        uint64_t h = lcx__hash64(w, k, 0);
        if (out->n < NAME_MAX_TERMS && !ts_has(out, h)) out->h[out->n++] = h;
    }
}

static size_t back_ws(const char *t, size_t j)
{
    while (j > 0 && (t[j - 1] == ' ' || t[j - 1] == '\t')) j--;
    return j;
}
static size_t back_ident(const char *t, size_t j)
{
    while (j > 0 && idc(t[j - 1])) j--;
    return j;
}

/* F1 between the words of the name text[s, e) and the query's (q); 0 when none. */
static float name_f1(const qwords *q, const char *text, size_t s, size_t e)
{
    if (s == e || isdigit((unsigned char)text[s]) || name_kw(text + s, e - s)) return 0;
    termset nt;
    nt.n = 0;
    name_words(text + s, e - s, &nt);
    int m = 0;
    uint64_t gm = 0;
    for (int t = 0; t < nt.n; t++) {
        int g = qw_find(q, nt.h[t]);
        if (g >= 0) { m++; gm |= 1ull << g; }
    }
    if (!m) return 0;
    float a = (float)m / (float)nt.n, c = (float)__builtin_popcountll(gm) / (float)q->ng;
    return 2 * a * c / (a + c);
}

/* The name a line [ls, le) of text declares without a '(' — an enum member ("NAME = 4,",
 * "NAME,", "NAME" alone), a macro ("#define NAME"), a struct field ("uint32_t lc;",
 * "char name[8];"), a JS binding ("const NAME =", "exports.NAME =", "this.NAME =") — as
 * [*s, *e); false when it declares none. Why: a doc sentence documents an enum member or
 * a field as often as a function in C headers, and such names are the question's words
 * (MHD_USE_DEBUG for "Run in debug mode."). */
static bool decl_name(const char *text, size_t ls, size_t le, size_t *s, size_t *e)
{
    size_t x = ls;
    while (x < le && (text[x] == ' ' || text[x] == '\t')) x++;
    if (x < le && text[x] == '#') {
        x++;
        while (x < le && (text[x] == ' ' || text[x] == '\t')) x++;
        if (le - x < 8 || memcmp(text + x, "define", 6)) return false;
        x += 6;
        while (x < le && (text[x] == ' ' || text[x] == '\t')) x++;
        *s = x;
        while (x < le && idc(text[x])) x++;
        *e = x;
        return *e > *s;
    }
    size_t a = x;
    while (x < le && idc(text[x])) x++;
    if (x == a) return false;
    /* JS: past "const" / "let" / "var" / "export" / "static" and "obj." to the last name */
    for (;;) {
        size_t wl = x - a, z = x;
        const char *w = text + a;
        bool kw = (wl == 5 && !memcmp(w, "const", 5)) || (wl == 3 && (!memcmp(w, "let", 3) || !memcmp(w, "var", 3))) ||
                  (wl == 6 && (!memcmp(w, "export", 6) || !memcmp(w, "static", 6)));
        if (kw) while (z < le && (text[z] == ' ' || text[z] == '\t')) z++;
        else if (z < le && text[z] == '.') z++;
        if (z == x || z >= le || !idc(text[z])) break;
        a = x = z;
        while (x < le && idc(text[x])) x++;
    }
    size_t y = x;
    while (y < le && (text[y] == ' ' || text[y] == '\t')) y++;
    if (y == le || text[y] == ',' || (text[y] == '=' && (y + 1 == le || (text[y + 1] != '=' && text[y + 1] != '>')))) {
        *s = a;
        *e = x;
        return true;
    }
    /* a field: the last name before ';' on a line without '(' and of at least two words */
    const char *sc = memchr(text + a, ';', le - a);
    if (!sc || memchr(text + a, '(', le - a)) return false;
    size_t j = back_ws(text, (size_t)(sc - text));
    while (j > a && text[j - 1] == ']') {   /* "name[4];" */
        while (j > a && text[j - 1] != '[') j--;
        if (j > a) j--;
        j = back_ws(text, j);
    }
    *e = j;
    *s = back_ident(text, j);
    return *s > a && *e > *s;
}

/* The best F1 between the words of a name in text and the query's (q); 0 when none.
 * hot: every re-scored chunk. Names are found from the '(' bytes (memchr) backwards, so
 * the cost is per '(' rather than per byte: the identifier right before it ("f (",
 * "f("), or before "= (" / "= function (" ("x = (a) =>", "x = function (a)"). */
static float name_match(const qwords *q, const char *text, size_t len, bool perl)
{
    float best = 0;
    for (const char *p = text, *end = text + len, *k; p < end && (k = memchr(p, '(', (size_t)(end - p))); p = k + 1) {
        size_t e = back_ws(text, (size_t)(k - text)), s = back_ident(text, e);
        if (s == e || (e - s == 8 && !memcmp(text + s, "function", 8))) {
            /* "= (" or "= function (": the name is before the '=' (not "==", "<=" …) */
            size_t j = s == e ? e : back_ws(text, s);
            if (!j || text[j - 1] != '=') continue;
            e = back_ws(text, j - 1);
            s = back_ident(text, e);
        }
        float f = name_f1(q, text, s, e);
        if (f > best) best = f;
    }
    /* declarations without '(' (decl_name), line by line */
    for (const char *p = text, *end = text + len; p < end;) {
        const char *nl = memchr(p, '\n', (size_t)(end - p)), *le = nl ? nl : end;
        size_t s, e;
        if (decl_name(text, (size_t)(p - text), (size_t)(le - text), &s, &e)) {
            float f = name_f1(q, text, s, e);
            if (f > best) best = f;
        }
        p = nl ? nl + 1 : end;
    }
    /* Perl's "sub NAME {" has no '(' */
    for (const char *p = text, *end = text + len, *k; perl && p < end && (k = memchr(p, 's', (size_t)(end - p))); p = k + 1) {
        if (end - k < 5 || memcmp(k, "sub ", 4) || (k > text && idc(k[-1]))) continue;
        size_t s = (size_t)(k - text) + 4, e;
        while (s < len && (text[s] == ' ' || text[s] == '\t')) s++;
        for (e = s; e < len && idc(text[e]); e++) {}
        float f = name_f1(q, text, s, e);
        if (f > best) best = f;
    }
    return best;
}

/* Re-scores hits[0..nh) by the definition-name match and re-sorts them (best first). */
static void name_rescore(lcx_scope *s, const char *q, size_t qlen, lcx_hit *hits, int nh)
{
    qwords *qt = calloc(1, sizeof *qt);
    if (!qt) return;   /* OOM: the search's order stands */
    qw_ctx qc = {qt, 0};
    lcx_tokenize(q, qlen, ts_tok, &qc);
    if (!qt->ng || nh < 1) { free(qt); return; }
    float top = hits[0].score;
    for (int i = 0; i < nh; i++) {
        lcx_chunk c;
        if (lcx_store_get(lcx__scope_store(s), hits[i].id, &c) < 0 || !c.text) continue;
        size_t pl = c.path_len;
        bool perl = c.path && ((pl > 3 && (!memcmp(c.path + pl - 3, ".pm", 3) || !memcmp(c.path + pl - 3, ".pl", 3))) ||
                               (pl > 2 && !memcmp(c.path + pl - 2, ".t", 2)));
        hits[i].score += NAME_BOOST * top * name_match(qt, c.text, c.text_len, perl);
    }
    /* back into the search's [0, 1] (the order is kept): a hit's score stays comparable
     * with another scope's (ws: merges by score) and is not clipped at 1 */
    free(qt);
    for (int i = 0; i < nh; i++) hits[i].score /= 1 + NAME_BOOST;
    for (int i = 1; i < nh; i++) {   /* insertion sort: stable, ties keep the search's order */
        lcx_hit t = hits[i];
        int j = i - 1;
        while (j >= 0 && hits[j].score < t.score) { hits[j + 1] = hits[j]; j--; }
        hits[j + 1] = t;
    }
}

/* Searches one scope; appends hits (symbol pulls first) to h. *conf receives the scope's
 * confidence. Holds the scope's lock for the symbol table; the store is thread-safe. */
static int search_scope(lcx_scope *s, const char *q, size_t qlen, int top_k, const char *skip_rel,
                        hitvec *h, float *conf, bool *any_sym, lcx_code_result *res)
{
    lcx_search_opts o = lcx_search_defaults();
    lcx_search_info si;
    o.info = &si;
    o.top_k = top_k + (skip_rel ? 16 : 0);
    o.alpha = CODE_ALPHA;
    o.expand_query = true;   /* a question in doc prose, answered by code (docs/core.md "Query expansion") */
    int want = o.top_k;
    if (o.top_k < NAME_POOL) o.top_k = NAME_POOL;
    lcx_hit hits[96];
    int nh = lcx_store_search(lcx__scope_store(s), q, qlen, &o, hits, o.top_k < 96 ? o.top_k : 96);
    if (nh < 0) return nh;
    name_rescore(s, q, qlen, hits, nh);
    if (nh > want) nh = want;
    float top = nh ? hits[0].score : 0.5f;
    float best_dense = 0;
    for (int i = 0; i < nh; i++) if (hits[i].dense > best_dense) best_dense = hits[i].dense;
    /* with neural rows fused in, the top hits may be neural-only (no hashed cosine): the
     * confidence stays the store's own ranking's (the threshold was set on it) */
    if (si.base_dense > best_dense) best_dense = si.base_dense;
    res->used_neural |= si.used_neural;
    if (si.rerank_overrun) res->used_rerank = false;   /* the cross-encoder's deadline passed */
    *conf = best_dense < 0 ? 0 : best_dense > 1 ? 1 : best_dense;
    int base = h->n, rc = 0;
    lcx__scope_lock(s);
    ident ids[MAX_IDENTS];
    int ni = query_idents(q, qlen, ids, MAX_IDENTS);
    int max_sym = top_k / 2 > 1 ? top_k / 2 : 1, nsym = 0;
    for (int i = 0; i < ni && nsym < max_sym && !rc; i++) {
        const lcx_symbol *sy[MAX_DEFS + 1];
        const char *paths[MAX_DEFS + 1];
        int nd = lcx__scope_symbol_lookup(s, ids[i].name, sy, paths, MAX_DEFS);
        bool ambiguous = nd > MAX_DEFS;
        if (nd > MAX_DEFS) nd = MAX_DEFS;
        if (ids[i].owner[0]) {
            /* X.y: keep definitions whose owner is X (or in a file that defines X) */
            int k = 0;
            for (int j = 0; j < nd; j++) {
                bool ok = !strcmp(sy[j]->owner, ids[i].owner);
                if (!ok) {
                    const lcx_symbol *oy[2];
                    const char *op[2];
                    int no = lcx__scope_symbol_lookup(s, ids[i].owner, oy, op, 1);
                    for (int t = 0; t < no && t < 1; t++) ok = !strcmp(op[t], paths[j]);
                }
                if (ok) { sy[k] = sy[j]; paths[k] = paths[j]; k++; }
            }
            if (k) { nd = k; ambiguous = false; }
        }
        if (ambiguous || (ids[i].weak && nd > 2)) continue;
        for (int j = 0; j < nd && nsym < max_sym && !rc; j++) {
            if (skip_rel && !strcmp(paths[j], skip_rel)) continue;
            uint32_t cid;
            if (chunk_for_line(s, paths[j], sy[j]->line, &cid) < 0) continue;
            lcx_chunk c;
            if (lcx_store_get(lcx__scope_store(s), cid, &c) < 0) continue;
            char full[LCX_SCOPE_PATH_MAX * 2];
            snprintf(full, sizeof full, "%s/%s", lcx__scope_root(s), paths[j]);
            if (hv_has(h, full, c.line_start, c.line_end)) continue;
            float own = 0;
            for (int t = 0; t < nh; t++)
                if (hits[t].id == cid) own = hits[t].score;
            rc = hv_push(h, s, &c, own + (ids[i].weak ? SYM_BOOST_WEAK : SYM_BOOST) * (top - own), true);
            nsym++;
            *any_sym = true;
        }
    }
    lcx__scope_unlock(s);
    if (rc) return rc;
    if (nsym) *conf = 1.0f;
    for (int i = 0; i < nh && !rc; i++) {
        lcx_chunk c;
        if (lcx_store_get(lcx__scope_store(s), hits[i].id, &c) < 0) continue;
        if (skip_rel && c.path_len == strlen(skip_rel) && !memcmp(c.path, skip_rel, c.path_len)) continue;
        char full[LCX_SCOPE_PATH_MAX * 2];
        snprintf(full, sizeof full, "%s/%.*s", lcx__scope_root(s), (int)c.path_len, c.path);
        if (hv_has(h, full, c.line_start, c.line_end)) continue;
        rc = hv_push(h, s, &c, hits[i].score, false);
    }
    (void)base;
    return rc;
}

static int cmp_hits(const void *a, const void *b)
{
    const lcx_code_hit *x = a, *y = b;
    if (x->score != y->score) return x->score > y->score ? -1 : 1;
    if (x->symbol_hit != y->symbol_hit) return x->symbol_hit ? -1 : 1;
    return 0;
}

static void hits_free(lcx_code_hit *v, int n)
{
    for (int i = 0; i < n; i++) {
        free(v[i].text);
        free(v[i].file_path);
    }
    free(v);
}

void lcx_code_result_free(lcx_code_result *r)
{
    if (!r) return;
    hits_free(r->hits, r->n_hits);
    free(r->splice);
    memset(r, 0, sizeof *r);
}

static int fail(lcx_code_result *res, int rc, const char *code, const char *fmt, const char *arg)
{
    res->err_code = code;
    snprintf(res->err_msg, sizeof res->err_msg, fmt, arg ? arg : "");
    return rc;
}

/* Sorts and cuts the hits, builds the splice. Stable (insertion order breaks the last
 * ties): by descending score, a symbol pull first on a tie; by_score (workspace merges
 * across scopes): by score alone. */
static int finish(lcx_code_result *res, hitvec *h, int top_k, size_t budget, bool by_score)
{
    for (int i = 1; i < h->n; i++) {
        lcx_code_hit t = h->v[i];
        int j = i - 1;
        while (j >= 0 && (by_score ? h->v[j].score < t.score : cmp_hits(&h->v[j], &t) > 0)) { h->v[j + 1] = h->v[j]; j--; }
        h->v[j + 1] = t;
    }
    if (h->n > top_k) {
        for (int i = top_k; i < h->n; i++) { free(h->v[i].text); free(h->v[i].file_path); }
        h->n = top_k;
    }
    res->hits = h->v;
    res->n_hits = h->n;
    free(res->splice);
    res->splice = NULL;
    return lcx_code_splice(res->hits, res->n_hits, budget, &res->splice, &res->splice_len);
}

/* A directory the resolution may use as a scope root: its project root by sentinel when
 * there is one above it (sentinel from the root), else the directory itself with
 * fallback_sentinel. false when it is unusable (missing, forbidden, "/"). */
static bool cluster_root(const char *dir, char *root, char *sentinel, size_t scap, const char *fallback_sentinel)
{
    char canon[LCX_SCOPE_PATH_MAX], r[LCX_SCOPE_PATH_MAX];
    if (lcx_scope_canonical(dir, canon, sizeof canon, NULL) != 0) return false;
    if (lcx__scope_root_of(canon, r) && lcx_scope_canonical(r, root, LCX_SCOPE_PATH_MAX, NULL) == 0) {
        const char *sn = lcx_scope_sentinel_at(root);
        snprintf(sentinel, scap, "%s", sn ? sn : "");
        return true;
    }
    strcpy(root, canon);
    snprintf(sentinel, scap, "%s", fallback_sentinel);
    return true;
}

static bool is_ancestor_or_same(const char *a, const char *p)
{
    size_t n = strlen(a);
    return !strncmp(a, p, n) && (p[n] == 0 || p[n] == '/');
}

/* Fills scope path/hash/sentinel for a scope that was not searched (indexing). */
static void scope_named(lcx_code_result *res, const char *root, const char *sentinel)
{
    snprintf(res->scope.scope_path, sizeof res->scope.scope_path, "%s", root);
    lcx_scope_hash(root, res->scope.scope_hash);
    snprintf(res->scope.sentinel, sizeof res->scope.sentinel, "%s", sentinel);
    snprintf(res->scope.status, sizeof res->scope.status, "none");
}

int lcx_code_retrieve(lcx_scopes *m, const lcx_code_request *rq, lcx_code_result *res)
{
    memset(res, 0, sizeof *res);
    res->used_rerank = true;
    res->status = "no-scope";
    if (!(res->splice = strdup(""))) return LCX_ENOMEM;
    if (!m || !rq) return fail(res, LCX_EINVAL, "bad_request", "no request%s", NULL);
    const char *q = rq->query;
    size_t qlen = rq->query_len;
    while (q && qlen && isspace((unsigned char)*q)) q++, qlen--;
    if (!q || !qlen) return fail(res, LCX_EINVAL, "bad_request", "missing query%s", NULL);
    if (!lcx__utf8_valid(q, qlen)) return fail(res, LCX_EINVAL, "bad_request", "query is not valid UTF-8%s", NULL);
    if (rq->prefill && !lcx__utf8_valid(rq->prefill, rq->prefill_len))
        return fail(res, LCX_EINVAL, "bad_request", "prefill_text is not valid UTF-8%s", NULL);
    int top_k = rq->top_k ? rq->top_k : 8;
    if (top_k < 1 || top_k > LCX_TOP_K_MAX) return fail(res, LCX_EINVAL, "bad_request", "top_k must be " LCX_TOP_K_RANGE "%s", NULL);
    const char *session = rq->session_id && *rq->session_id ? rq->session_id : NULL;
    const char *explicit_scope = rq->explicit_scope && *rq->explicit_scope ? rq->explicit_scope : NULL;
    bool ws = explicit_scope && !strcmp(explicit_scope, "ws:");

    /* which scopes */
    char (*roots)[LCX_SCOPE_PATH_MAX] = malloc(LCX_MAX_BOUND * sizeof *roots);
    if (!roots) return LCX_ENOMEM;
    int nr = 0, rc = 0;
    char sentinel[24] = "";
    lcx_scope_detection det = {0};
    det.sentinel = "";
    bool have_det = false;
    if (ws) {
        /* workspace: prefill and default_scope are ignored */
        res->workspace = true;
        snprintf(res->scope.scope_path, sizeof res->scope.scope_path, "ws:");
        snprintf(res->scope.sentinel, sizeof res->scope.sentinel, "workspace");
        snprintf(res->scope.status, sizeof res->scope.status, "none");
        nr = session ? lcx__scopes_bound_loaded(m, session, roots, LCX_MAX_BOUND) : 0;
        if (!nr) { free(roots); return 0; }   /* no session, unknown session, nothing bound */
    } else if (explicit_scope) {
        char loose[LCX_SCOPE_PATH_MAX];
        const char *why = NULL;
        rc = lcx__scope_canon_loose(explicit_scope, loose, sizeof loose);
        if (!rc) rc = lcx_scope_canonical(loose, roots[0], LCX_SCOPE_PATH_MAX, &why);
        if (rc) {
            free(roots);
            return fail(res, rc, why ? why : "bad_scope", "explicit_scope %s is not a usable directory", explicit_scope);
        }
        nr = 1;
        snprintf(sentinel, sizeof sentinel, "explicit");
        /* mentions still steer the Hot set when they lie inside the explicit scope */
        if (lcx__scope_detect(rq->prefill, rq->prefill ? rq->prefill_len : 0, roots[0], true, &det) == 0) have_det = true;
        if (session) lcx__scopes_bind(m, session, roots[0]);   /* binds only itself */
    } else {
        rc = lcx_scope_detect(rq->prefill, rq->prefill ? rq->prefill_len : 0, rq->default_scope, &det);
        if (rc) { free(roots); return fail(res, rc, "internal", "scope detection failed%s", NULL); }
        have_det = true;
        char active[LCX_SCOPE_PATH_MAX] = "";
        char (*spec)[LCX_SCOPE_PATH_MAX] = NULL;
        int n_spec = 0;
        if (session && (spec = malloc(LCX_CLUSTER_SPECULATE * sizeof *spec)))
            lcx__scopes_cluster_turn(m, session, det.paths, det.n_paths, active, sizeof active, spec, &n_spec);
        if (det.scope_path) {
            snprintf(roots[nr++], LCX_SCOPE_PATH_MAX, "%s", det.scope_path);
            snprintf(sentinel, sizeof sentinel, "%s", det.sentinel);
        } else if (active[0] && cluster_root(active, roots[0], sentinel, sizeof sentinel, "cluster")) {
            nr = 1;   /* the conversation's project, though this turn names no path */
        }
        for (int i = 0; i < n_spec; i++) {   /* candidates: built ahead, never bound */
            char r[LCX_SCOPE_PATH_MAX], sn[24];
            if (!cluster_root(spec[i], r, sn, sizeof sn, "cluster-speculative")) continue;
            if ((nr && !strcmp(r, roots[0])) || lcx__scopes_ready(m, r)) continue;
            lcx__scopes_index_async(m, r, NULL, 0, "cluster-speculative");
        }
        free(spec);
        if (nr && session) {
            /* workspace binding: the other project roots named in this prefill, then the scope */
            for (int i = det.n_roots - 1; i >= 0; i--)
                if (!is_ancestor_or_same(det.roots[i], roots[0])) lcx__scopes_bind(m, session, det.roots[i]);
            lcx__scopes_bind(m, session, roots[0]);
        }
    }
    if (!nr) {   /* nothing to search: an empty, successful answer */
        lcx_scope_detection_free(&det);
        free(roots);
        snprintf(res->scope.status, sizeof res->scope.status, "none");
        return 0;
    }
    const char *const *ments0 = NULL;
    int nm0 = 0;
    if (have_det && !ws) {
        ments0 = (const char *const *)det.mentions;
        nm0 = det.n_mentions;
    }
    if (rq->async && !ws && !lcx__scopes_ready(m, roots[0])) {
        /* x-longctx-async: build in the background, answer at once */
        rc = lcx__scopes_index_async(m, roots[0], ments0, nm0, NULL);
        if (rc == 0) {
            scope_named(res, roots[0], sentinel);
            res->status = "indexing";
            res->n_scopes = 1;
            lcx_scope_detection_free(&det);
            free(roots);
            return 0;
        }
        rc = 0;   /* too many background builds: build now */
    }

    hitvec h = {0};
    float conf0 = 0;
    bool any_sym = false, promote_failed = false;
    uint32_t chunks = 0;
    lcx_scope *primary = NULL;
    for (int i = 0; i < nr && !rc; i++) {
        lcx_scope *s;
        rc = lcx__scopes_acquire(m, roots[i], i == 0 ? ments0 : NULL, i == 0 ? nm0 : 0, false, NULL, NULL, &s);
        if (rc) {
            if (ws && rc != LCX_ENOMEM) { rc = 0; continue; }   /* unloaded meanwhile: skip it */
            fail(res, rc, lcx_scope_err_code(rc), "indexing the scope failed: %s", lcx_strerror(rc));
            break;
        }
        float conf = 0;
        rc = search_scope(s, q, qlen, top_k, NULL, &h, &conf, &any_sym, res);
        if (rc) fail(res, rc, "internal", "search failed: %s", lcx_strerror(rc));
        uint32_t n_chunks = 0;
        bool pf = false;
        lcx__scope_info(s, primary ? NULL : &res->scope, &n_chunks, &pf);
        chunks += n_chunks;
        promote_failed |= pf;
        if (conf > conf0) conf0 = conf;
        if (!primary && !ws) primary = s;
        else lcx__scopes_release(m, s);
    }
    res->n_scopes = nr;
    lcx_scope_detection_free(&det);
    if (rc) {
        hits_free(h.v, h.n);
        if (primary) lcx__scopes_release(m, primary);
        free(roots);
        return rc;
    }
    res->retrieved = true;
    res->confidence = any_sym ? 1.0f : conf0;
    if (ws) {
        snprintf(res->scope.scope_path, sizeof res->scope.scope_path, "ws:");
        res->scope.scope_hash[0] = 0;
        snprintf(res->scope.sentinel, sizeof res->scope.sentinel, "workspace");
        res->status = "ready";   /* also with 0 chunks */
    } else {
        snprintf(res->scope.sentinel, sizeof res->scope.sentinel, "%s", sentinel);
        res->status = promote_failed ? "error" : chunks == 0 ? "empty" : "ready";
    }
    if (primary) {
        lcx__scopes_note_turn(m, primary, res->confidence);   /* may start a Hot → Package rebuild */
        lcx__scopes_release(m, primary);
        /* the rebuild runs in the background and the Hot index answered (reference: "promoting") */
        if (strcmp(res->status, "error") && lcx__scopes_promoting(m, res->scope.scope_path))
            res->status = "promoting";
    }
    free(roots);
    return finish(res, &h, top_k, rq->budget, ws);
}

int lcx_code_related(lcx_scopes *m, const char *file_path, int top_k, lcx_code_result *res)
{
    memset(res, 0, sizeof *res);
    res->used_rerank = true;
    if (!(res->splice = strdup(""))) return LCX_ENOMEM;
    if (!top_k) top_k = 8;
    if (top_k < 1 || top_k > LCX_TOP_K_MAX) return fail(res, LCX_EINVAL, "bad_request", "top_k must be " LCX_TOP_K_RANGE "%s", NULL);
    if (!file_path || file_path[0] != '/') return fail(res, LCX_EINVAL, "bad_request", "file path must be absolute%s", NULL);
    if (lcx_scope_is_secret(file_path)) return fail(res, LCX_EINVAL, "forbidden", "%s is a secret file", file_path);
    lcx_scope_detection det;
    int rc = lcx__scope_detect(file_path, strlen(file_path), NULL, true, &det);
    if (rc) return fail(res, rc, "internal", "scope detection failed%s", NULL);
    if (!det.scope_path || !det.n_mentions) {
        lcx_scope_detection_free(&det);
        return fail(res, LCX_ENOTFOUND, "not_found", "no project found for %s", file_path);
    }
    lcx_scope *s;
    rc = lcx__scopes_acquire(m, det.scope_path, (const char *const *)det.mentions, det.n_mentions, false, NULL, NULL, &s);
    if (rc) {
        lcx_scope_detection_free(&det);
        return fail(res, rc, lcx_scope_err_code(rc), "indexing failed: %s", lcx_strerror(rc));
    }
    const char *rel = det.mentions[0] + strlen(lcx__scope_root(s));
    if (*rel == '/') rel++;
    /* query = the file's symbol names + its first chunk */
    lcx_buf qb = {.cap = 8192};
    lcx__scope_file_query(s, rel, 64, 4096, &qb);
    if (!qb.len) {
        lcx__buf_free(&qb);
        lcx__scopes_release(m, s);
        lcx_scope_detection_free(&det);
        return fail(res, LCX_ENOTFOUND, "not_found", "%s is not indexed", file_path);
    }
    /* the query text came from a file: keep it valid UTF-8 after the byte cap */
    size_t ql = qb.len;
    while (ql && !lcx__utf8_valid(qb.data, ql)) ql--;
    hitvec h = {0};
    float conf = 0;
    bool any_sym = false;
    char *relcopy = strdup(rel);
    rc = relcopy ? search_scope(s, qb.data, ql, top_k, relcopy, &h, &conf, &any_sym, res) : LCX_ENOMEM;
    free(relcopy);
    lcx__buf_free(&qb);
    lcx__scope_info(s, &res->scope, NULL, NULL);
    lcx__scopes_release(m, s);
    lcx_scope_detection_free(&det);
    if (rc) { hits_free(h.v, h.n); return fail(res, rc, "internal", "search failed: %s", lcx_strerror(rc)); }
    res->n_scopes = 1;
    res->confidence = conf;
    /* related = by similarity: symbol pulls of the file's own names are not "related" */
    for (int i = 0; i < h.n; i++) h.v[i].symbol_hit = false;
    return finish(res, &h, top_k, 0, false);
}
