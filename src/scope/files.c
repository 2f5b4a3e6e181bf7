/* A scope's file table (open addressing by path over s->files) and its symbol index
 * (definitions by name, rebuilt lazily after changes), the chunk range of a file, and the
 * calls on a scope that src/retrieve makes (scopes_api.h).
 * Locks: every function here runs with s->mu held (scopes.c has the lock order), except
 * the scopes_api.h calls: lcx__scope_lock / __unlock take and release it, and
 * lcx__scope_file_query takes it itself; lcx__file_remove and file_query call the store,
 * which takes its own locks. */
#include "scope/scope_int.h"
#include "scope/scopes_int.h"
#include "util/util.h"
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- file table */

void lcx__fmap_rebuild(lcx_scope *s)
{
    uint32_t cap = 64;
    while (cap < s->n_files * 2 + 16) cap *= 2;
    uint32_t *m = calloc(cap, sizeof *m);
    if (!m) { s->fmap_cap = 0; free(s->fmap); s->fmap = NULL; return; }   /* linear fallback */
    for (uint32_t i = 0; i < s->n_files; i++) {
        if (!s->files[i].rel) continue;
        uint32_t h = (uint32_t)lcx__scope_str_hash(s->files[i].rel) & (cap - 1);
        while (m[h]) h = (h + 1) & (cap - 1);
        m[h] = i + 1;
    }
    free(s->fmap);
    s->fmap = m;
    s->fmap_cap = cap;
}

int lcx__scope_find_file(const lcx_scope *s, const char *rel)
{
    if (!s->fmap) {
        for (uint32_t i = 0; i < s->n_files; i++)
            if (s->files[i].rel && !strcmp(s->files[i].rel, rel)) return (int)i;
        return -1;
    }
    uint32_t h = (uint32_t)lcx__scope_str_hash(rel) & (s->fmap_cap - 1);
    while (s->fmap[h]) {
        uint32_t i = s->fmap[h] - 1;
        if (s->files[i].rel && !strcmp(s->files[i].rel, rel)) return (int)i;
        h = (h + 1) & (s->fmap_cap - 1);
    }
    return -1;
}

void lcx__file_clear(lcx_file_ent *f)
{
    free(f->rel);
    free(f->syms);
    memset(f, 0, sizeof *f);
}

/* New or existing entry for rel (the map is rebuilt when it gets full). */
lcx_file_ent *lcx__file_get(lcx_scope *s, const char *rel, bool create)
{
    int i = lcx__scope_find_file(s, rel);
    if (i >= 0) return &s->files[i];
    if (!create) return NULL;
    if (s->n_files == s->cap_files) {
        uint32_t nc = s->cap_files ? s->cap_files * 2 : 64;
        lcx_file_ent *nf = realloc(s->files, nc * sizeof *nf);
        if (!nf) return NULL;
        s->files = nf;
        s->cap_files = nc;
    }
    lcx_file_ent *f = &s->files[s->n_files];
    memset(f, 0, sizeof *f);
    if (!(f->rel = strdup(rel))) return NULL;
    s->n_files++;
    if (!s->fmap || s->n_files * 2 > s->fmap_cap) {
        lcx__fmap_rebuild(s);
    } else {
        uint32_t h = (uint32_t)lcx__scope_str_hash(rel) & (s->fmap_cap - 1);
        while (s->fmap[h]) h = (h + 1) & (s->fmap_cap - 1);
        s->fmap[h] = s->n_files;
    }
    s->live_files++;
    s->sym_dirty = true;
    return f;
}

/* Removes rel from the table (tombstoning its chunks). The slot stays (rel NULL) until
 * the next compaction so indices held by the map stay valid. */
int lcx__file_remove(lcx_scope *s, lcx_file_ent *f)
{
    if (f->n_chunks) {
        int rc = lcx_store_delete_path(s->store, f->rel, strlen(f->rel));
        if (rc < 0) return rc;
        s->store_changed = true;
    }
    s->bytes -= f->size;
    lcx__file_clear(f);
    s->live_files--;
    s->sym_dirty = true;
    s->manifest_dirty = true;
    return 0;
}

void lcx__files_compact(lcx_scope *s)
{
    uint32_t k = 0;
    for (uint32_t i = 0; i < s->n_files; i++)
        if (s->files[i].rel) s->files[k++] = s->files[i];
    if (k != s->n_files) s->sym_dirty = true;   /* symbol refs hold file indices */
    s->n_files = k;
    lcx__fmap_rebuild(s);
}

/* ---------------------------------------------------------------- symbol index */

/* Chains definitions of one name together so that a name defined in thousands of files
 * (a macro in every header) costs one bucket, not a probe cluster: rebuilding and looking
 * up stay linear in the number of definitions. */
static void symidx_rebuild(lcx_scope *s)
{
    free(s->symidx);
    free(s->symrefs);
    s->symidx = NULL;
    s->symrefs = NULL;
    s->symidx_cap = 0;
    s->n_syms = 0;
    uint32_t n = 0;
    for (uint32_t i = 0; i < s->n_files; i++) n += s->files[i].rel ? (uint32_t)s->files[i].n_syms : 0;
    s->n_syms = n;
    s->sym_dirty = false;
    if (!n) return;
    uint32_t cap = 64;
    while (cap < n * 2) cap *= 2;
    uint32_t *t = calloc(cap, sizeof *t);
    lcx_symref *refs = malloc((size_t)n * sizeof *refs);
    if (!t || !refs) { free(t); free(refs); return; }   /* no boosting rather than failure */
    uint32_t k = 0;
    for (uint32_t i = 0; i < s->n_files; i++) {
        lcx_file_ent *f = &s->files[i];
        if (!f->rel) continue;
        for (int j = 0; j < f->n_syms; j++) {
            uint64_t h = lcx__scope_str_hash(f->syms[j].name);
            uint32_t b = (uint32_t)h & (cap - 1);
            while (t[b]) {
                const lcx_symref *r = &refs[t[b] - 1];
                if (r->hash == h && !strcmp(s->files[r->file - 1].syms[r->sym].name, f->syms[j].name)) break;
                b = (b + 1) & (cap - 1);
            }
            refs[k] = (lcx_symref){.hash = h, .file = i + 1, .sym = (uint32_t)j, .next = t[b]};
            t[b] = ++k;
        }
    }
    s->symidx = t;
    s->symrefs = refs;
    s->symidx_cap = cap;
}

int lcx__scope_symbol_lookup(lcx_scope *s, const char *name, const lcx_symbol **syms,
                             const char **paths, int max)
{
    if (s->sym_dirty) symidx_rebuild(s);
    if (!s->symidx) return 0;
    uint64_t h = lcx__scope_str_hash(name);
    uint32_t b = (uint32_t)h & (s->symidx_cap - 1);
    while (s->symidx[b]) {
        const lcx_symref *r = &s->symrefs[s->symidx[b] - 1];
        if (r->hash == h && !strcmp(s->files[r->file - 1].syms[r->sym].name, name)) break;
        b = (b + 1) & (s->symidx_cap - 1);
    }
    int n = 0;
    /* chain order is reverse insertion (file order); fine for "≤ max definitions" */
    for (uint32_t x = s->symidx[b]; x; x = s->symrefs[x - 1].next) {
        const lcx_symref *r = &s->symrefs[x - 1];
        const lcx_file_ent *f = &s->files[r->file - 1];
        if (!f->rel || r->sym >= (uint32_t)f->n_syms) continue;
        if (n >= max) return n + 1;   /* "more than max" */
        syms[n] = &f->syms[r->sym];
        paths[n] = f->rel;
        n++;
    }
    return n;
}

int lcx__scope_chunk_range(lcx_scope *s, const char *rel, uint32_t *first, uint32_t *n)
{
    lcx_file_ent *f = lcx__file_get(s, rel, false);
    if (!f) return LCX_ENOTFOUND;
    *first = f->first_id;
    *n = f->n_chunks;
    return 0;
}


/* ---------------------------------------------------------------- calls for src/retrieve (scopes_api.h) */

const char *lcx__scope_root(const lcx_scope *s) { return s->root; }

lcx_store *lcx__scope_store(const lcx_scope *s) { return s->store; }

void lcx__scope_lock(lcx_scope *s) { pthread_mutex_lock(&s->mu); }

void lcx__scope_unlock(lcx_scope *s) { pthread_mutex_unlock(&s->mu); }

int lcx__scope_file_query(lcx_scope *s, const char *rel, int max_syms, size_t max_text, lcx_buf *out)
{
    pthread_mutex_lock(&s->mu);
    int fi = lcx__scope_find_file(s, rel);
    if (fi >= 0) {
        const lcx_file_ent *f = &s->files[fi];
        for (int i = 0; i < f->n_syms && i < max_syms; i++) lcx__buf_printf(out, "%s ", f->syms[i].name);
        if (f->n_chunks) {
            lcx_chunk c;
            if (lcx_store_get(s->store, f->first_id, &c) == 0)
                lcx__buf_append(out, c.text, LCX_MIN((size_t)c.text_len, max_text));
        }
    }
    pthread_mutex_unlock(&s->mu);
    return fi >= 0 ? 0 : LCX_ENOTFOUND;
}
