/* Chunkers (SPEC §3).
 *   code   : 50-line windows with a 5-line overlap (step 45); a file of ≤ 50 lines is one
 *            chunk. The overlap keeps a definition that straddles a window edge whole in
 *            at least one chunk when it is ≤ 5 lines past the edge.
 *   prose  : (.md .markdown .txt .rst .adoc .asciidoc .org) paragraphs separated by blank
 *            lines, consecutive paragraphs grouped while the group spans ≤ 50 lines; a
 *            single paragraph longer than 50 lines is cut into code-style windows.
 *   config : (.json .yaml .yml .toml .ini .cfg .conf .properties .xml …) the whole file
 *            when ≤ 50 lines, else code-style windows.
 * Line numbers are 1-based and inclusive; chunk text excludes the last line's newline.
 * Chunks that are only whitespace are dropped. */
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include "scope/scope_int.h"

static const char *const prose_ext[] = {"md", "markdown", "txt", "rst", "adoc", "asciidoc", "org"};
static const char *const config_ext[] = {
    "json", "jsonc", "json5", "yaml", "yml", "toml", "ini", "cfg", "conf", "properties",
    "xml", "plist", "csv", "tsv", "editorconfig", "gitignore", "gitattributes", "dockerignore",
};
static const char *const code_names[] = {
    "CMakeLists.txt", "Makefile", "GNUmakefile", "Dockerfile", "Containerfile", "Jenkinsfile",
    "Rakefile", "Gemfile", "Vagrantfile", "BUILD", "WORKSPACE", "meson.build",
};

lcx_file_type lcx__file_type_of(const char *relpath)
{
    const char *slash = strrchr(relpath, '/');
    const char *b = slash ? slash + 1 : relpath;
    for (size_t i = 0; i < sizeof code_names / sizeof *code_names; i++)
        if (!strcmp(b, code_names[i])) return LCX_FT_CODE;
    const char *dot = strrchr(b, '.');
    if (!dot) return LCX_FT_CODE;
    const char *e = dot + 1;
    for (size_t i = 0; i < sizeof prose_ext / sizeof *prose_ext; i++)
        if (!strcasecmp(e, prose_ext[i])) return LCX_FT_PROSE;
    for (size_t i = 0; i < sizeof config_ext / sizeof *config_ext; i++)
        if (!strcasecmp(e, config_ext[i])) return LCX_FT_CONFIG;
    return LCX_FT_CODE;
}

typedef struct {
    lcx_span *v;
    int n, cap;
    const char *text;
    const size_t *ls;   /* line start offsets, ls[nl] = end sentinel */
    uint32_t nl;
} acc;

static bool blank_range(const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != ' ' && p[i] != '\t' && p[i] != '\n' && p[i] != '\r' && p[i] != '\f' && p[i] != '\v')
            return false;
    return true;
}

/* span of lines [a, b] (1-based inclusive) */
static int emit(acc *a, uint32_t l0, uint32_t l1)
{
    size_t off = a->ls[l0 - 1];
    size_t end = a->ls[l1];             /* start of line l1+1 (or text end) */
    if (end > off && a->text[end - 1] == '\n') end--;
    if (blank_range(a->text + off, end - off)) return 0;
    if (a->n == a->cap) {
        int nc = a->cap ? a->cap * 2 : 16;
        lcx_span *nv = realloc(a->v, (size_t)nc * sizeof *nv);
        if (!nv) return LCX_ENOMEM;
        a->v = nv;
        a->cap = nc;
    }
    a->v[a->n++] = (lcx_span){.line_start = l0, .line_end = l1, .off = off, .len = end - off};
    return 0;
}

static int windows(acc *a, uint32_t l0, uint32_t l1)
{
    const uint32_t W = LCX_CHUNK_LINES, step = LCX_CHUNK_LINES - LCX_CHUNK_OVERLAP;
    for (uint32_t s = l0;; s += step) {
        uint32_t e = s + W - 1 < l1 ? s + W - 1 : l1;
        int rc = emit(a, s, e);
        if (rc) return rc;
        if (e >= l1) return 0;
    }
}

static bool line_blank(const acc *a, uint32_t l)
{
    size_t s = a->ls[l - 1], e = a->ls[l];
    return blank_range(a->text + s, e - s);
}

static int prose(acc *a)
{
    uint32_t gs = 0, ge = 0;   /* current group [gs, ge], 0 = none */
    uint32_t l = 1;
    while (l <= a->nl) {
        if (line_blank(a, l)) { l++; continue; }
        uint32_t ps = l;
        while (l <= a->nl && !line_blank(a, l)) l++;
        uint32_t pe = l - 1;
        if (pe - ps + 1 > LCX_CHUNK_LINES) {
            int rc;
            if (gs && (rc = emit(a, gs, ge))) return rc;
            gs = 0;
            if ((rc = windows(a, ps, pe))) return rc;
            continue;
        }
        if (gs && pe - gs + 1 <= LCX_CHUNK_LINES) { ge = pe; continue; }
        if (gs) {
            int rc = emit(a, gs, ge);
            if (rc) return rc;
        }
        gs = ps;
        ge = pe;
    }
    return gs ? emit(a, gs, ge) : 0;
}

int lcx__chunk_text(const char *text, size_t len, lcx_file_type ft, lcx_span **out, int *n)
{
    *out = NULL;
    *n = 0;
    if (!len || blank_range(text, len)) return 0;
    /* line starts: nl lines, ls[nl] = len. memchr per line (vectorised in libc) instead
     * of two byte loops over the text: the chunker was 6 % of a /usr/include build. */
    size_t cap = len / 24 + 16;   /* grows for files of very short lines */
    size_t *ls = malloc(cap * sizeof *ls);
    if (!ls) return LCX_ENOMEM;
    size_t k = 0;
    ls[k++] = 0;
    const char *p = text, *e = text + len;
    for (const char *q; (q = memchr(p, '\n', (size_t)(e - p))) && q + 1 < e; p = q + 1) {
        if (k + 1 >= cap) {
            size_t *nls = realloc(ls, cap * 2 * sizeof *ls);
            if (!nls) { free(ls); return LCX_ENOMEM; }
            ls = nls;
            cap *= 2;
        }
        ls[k++] = (size_t)(q + 1 - text);
    }
    if (k > UINT32_MAX - 1) { free(ls); return LCX_ELIMIT; }
    uint32_t nl = (uint32_t)k;
    ls[nl] = len;
    acc a = {.text = text, .ls = ls, .nl = nl};
    int rc;
    if (ft == LCX_FT_PROSE) rc = prose(&a);
    else if (nl <= LCX_CHUNK_LINES) rc = emit(&a, 1, nl);
    else rc = windows(&a, 1, nl);
    free(ls);
    if (rc) { free(a.v); return rc; }
    *out = a.v;
    *n = a.n;
    return 0;
}
