/* Loading a scope (lcx__scope_load): its store, its manifest (or a rebuild when either
 * fails a check), reconciliation of chunks the manifest does not name, and its Hot roots
 * (root files, src/, the directory of every mention); Hot → Package promotion.
 * Locks: callers hold s->mu (scopes.c has the lock order); store calls take the store's
 * own locks. The promotion's build lets go of s->mu at times (build.c). */
#define _GNU_SOURCE 1   /* nftw flags */
#include "scope/scope_int.h"
#include "scope/scopes_int.h"
#include "util/util.h"
#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Hot roots: root files, src/ recursive, the directory of every mention. */
static void hot_add(lcx_scope *s, const char *rel, bool recursive)
{
    for (int i = 0; i < s->n_hot; i++) {
        if (!strcmp(s->hot[i].rel, rel)) {
            s->hot[i].recursive |= recursive;
            return;
        }
        /* already covered by a recursive root above it */
        size_t l = strlen(s->hot[i].rel);
        if (s->hot[i].recursive && (!l || (!strncmp(rel, s->hot[i].rel, l) && rel[l] == '/'))) return;
    }
    if (s->n_hot >= LCX_MAX_HOT) return;
    snprintf(s->hot[s->n_hot].rel, sizeof s->hot[s->n_hot].rel, "%s", rel);
    s->hot[s->n_hot].recursive = recursive;
    s->n_hot++;
}

/* Scope-relative form of an absolute canonical path under the root; NULL when outside. */
static const char *rel_of(const lcx_scope *s, const char *abs)
{
    size_t rl = strlen(s->root);
    if (strncmp(abs, s->root, rl)) return NULL;
    if (abs[rl] == 0) return "";
    if (abs[rl] != '/') return NULL;
    return abs + rl + 1;
}

bool lcx__scope_in_hot(const lcx_scope *s, const char *rel_dir)
{
    for (int i = 0; i < s->n_hot; i++) {
        size_t l = strlen(s->hot[i].rel);
        if (!strcmp(s->hot[i].rel, rel_dir)) return true;
        if (s->hot[i].recursive && (!l || (!strncmp(rel_dir, s->hot[i].rel, l) && rel_dir[l] == '/'))) return true;
    }
    return false;
}

bool lcx__scope_covers(const lcx_scope *s, const char *rel)
{
    if (s->package) return true;
    char d[PATH_MAX];
    snprintf(d, sizeof d, "%s", rel);
    char *sl = strrchr(d, '/');
    if (sl) *sl = 0;
    else d[0] = 0;
    return lcx__scope_in_hot(s, d);
}

/* Mentions: directories of mentioned files (or mentioned dirs) as Hot roots. Returns
 * true when one of them was not covered yet (→ promotion for a built scope). */
bool lcx__hot_from_mentions(lcx_scope *s, const char *const *mentions, int n, bool add)
{
    bool outside = false;
    for (int i = 0; i < n; i++) {
        const char *r = rel_of(s, mentions[i]);
        if (!r || lcx_scope_is_secret(r)) continue;
        struct stat st;
        char d[PATH_MAX];
        snprintf(d, sizeof d, "%s", r);
        if (stat(mentions[i], &st) == 0 && S_ISDIR(st.st_mode)) {
            /* a directory mention */
        } else {
            char *sl = strrchr(d, '/');
            if (sl) *sl = 0;
            else d[0] = 0;
        }
        if (!lcx__scope_in_hot(s, d)) {
            outside = true;
            if (add) hot_add(s, d, false);
        }
    }
    return outside;
}

static int rmrf_cb(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb; (void)flag; (void)ftw;
    remove(p);
    return 0;
}

static int open_store(lcx_scopes *m, lcx_scope *s)
{
    char sd[PATH_MAX + 128];
    snprintf(sd, sizeof sd, "%s/store", s->dir);
    int rc = lcx__mkdirs(s->dir);
    if (rc) return rc;
    lcx_store_opts so = m->o.store;
    rc = lcx_store_open(sd, m->emb, &so, &s->store);
    if (rc == LCX_EMISMATCH || rc == LCX_ECORRUPT) {
        fprintf(stderr, "longctx: scope %s: store %s (%s), rebuilding\n", s->root,
                rc == LCX_EMISMATCH ? "made by another embedder" : "failed validation", lcx_strerror(rc));
        nftw(s->dir, rmrf_cb, 16, FTW_DEPTH | FTW_PHYS);
        if ((rc = lcx__mkdirs(s->dir))) return rc;
        rc = lcx_store_open(sd, m->emb, &so, &s->store);
        s->rebuilt = true;
    }
    return rc;
}

static void scope_reset_tables(lcx_scope *s)
{
    for (uint32_t i = 0; i < s->n_files; i++) lcx__file_clear(&s->files[i]);
    s->n_files = s->live_files = 0;
    s->bytes = 0;
    s->n_hot = 0;
    lcx__fmap_rebuild(s);
    s->sym_dirty = true;
}

static int count_cb(const char *rel, const struct stat *st, void *ud)
{
    (void)rel; (void)st;
    (*(uint64_t *)ud)++;
    return 0;
}

/* Tombstones every chunk of rel and drops it from the table, so the refresh walk
 * re-indexes it as a new file. */
static int drop_path(lcx_scope *s, const char *rel)
{
    int rc = lcx_store_delete_path(s->store, rel, strlen(rel));
    if (rc < 0) return rc;
    if (rc > 0) s->store_changed = true;
    lcx_file_ent *f = lcx__file_get(s, rel, false);
    s->manifest_dirty = true;
    if (!f) return 0;
    f->n_chunks = 0;   /* already tombstoned above */
    return lcx__file_remove(s, f);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Store ↔ manifest consistency after a reload. A crash mid-build leaves chunks appended
 * after the last manifest write (the manifest does not name them), and a file being
 * re-indexed may have lost its old chunks (tombstoned) before its new ones were named.
 * Cheap check on every reload: the first chunk of every file is live and carries its
 * path, and the store's live count equals the manifest's total. Only when that fails is
 * the whole store scanned: chunks outside their file's range are tombstoned by path and
 * their files dropped from the table, so the refresh walk re-indexes exactly those. */
static int reconcile(lcx_scope *s)
{
    uint64_t covered = 0;
    int rc = 0;
    for (uint32_t i = 0; i < s->n_files && rc == 0; i++) {
        lcx_file_ent *f = &s->files[i];
        if (!f->rel || !f->n_chunks) continue;
        lcx_chunk c;
        size_t l = strlen(f->rel);
        if (lcx_store_get(s->store, f->first_id, &c) == 0 && c.path_len == l && !memcmp(c.path, f->rel, l)) {
            covered += f->n_chunks;
            continue;
        }
        rc = drop_path(s, f->rel);
    }
    uint32_t live = lcx_store_count(s->store);
    if (rc || live == covered) return rc;
    fprintf(stderr, "longctx: scope %s: %u chunks in the store, %llu named by the manifest (interrupted build): "
                    "re-indexing the files concerned\n", s->root, live, (unsigned long long)covered);
    char **v = NULL, buf[PATH_MAX];
    int n = 0, cap = 0;
    uint32_t seen = 0;
    for (uint32_t id = 0; seen < live && id < UINT32_MAX && rc == 0; id++) {
        lcx_chunk c;
        int g = lcx_store_get(s->store, id, &c);
        if (g == LCX_ENOTFOUND) continue;
        seen++;
        if (g != 0 || !c.path_len || c.path_len >= sizeof buf) continue;
        memcpy(buf, c.path, c.path_len);
        buf[c.path_len] = 0;
        int fi = lcx__scope_find_file(s, buf);
        const lcx_file_ent *f = fi >= 0 ? &s->files[fi] : NULL;
        if (f && id >= f->first_id && id - f->first_id < f->n_chunks) continue;
        if (n && !strcmp(v[n - 1], buf)) continue;   /* a file's chunks are consecutive */
        if (n == cap) {
            int nc = cap ? cap * 2 : 64;
            char **nv = realloc(v, (size_t)nc * sizeof *nv);
            if (!nv) { rc = LCX_ENOMEM; break; }
            v = nv;
            cap = nc;
        }
        if (!(v[n] = strdup(buf))) { rc = LCX_ENOMEM; break; }
        n++;
    }
    if (n) qsort(v, (size_t)n, sizeof *v, cmp_str);
    for (int i = 0; i < n; i++) {
        if (!rc && (i == 0 || strcmp(v[i], v[i - 1]))) rc = drop_path(s, v[i]);
    }
    for (int i = 0; i < n; i++) free(v[i]);
    free(v);
    return rc;
}

/* First use of a scope in this process: reload (store + manifest, then a refresh that
 * only re-reads changed files) or build Hot (→ Package when Hot is small). */
int lcx__scope_load(lcx_scopes *m, lcx_scope *s, const char *const *mentions, int n_mentions,
                      bool want_package, lcx_scope_progress cb, void *ud)
{
    int rc = open_store(m, s);
    if (rc) return rc;
    rc = lcx__manifest_read(s);
    if (rc == LCX_ECORRUPT || rc == LCX_EMISMATCH) {
        fprintf(stderr, "longctx: scope %s: manifest unusable (%s), rebuilding\n", s->root, lcx_strerror(rc));
        lcx_store_close(s->store);
        s->store = NULL;
        scope_reset_tables(s);
        nftw(s->dir, rmrf_cb, 16, FTW_DEPTH | FTW_PHYS);
        if ((rc = open_store(m, s))) return rc;
        rc = LCX_ENOTFOUND;
    }
    bool fresh = rc == LCX_ENOTFOUND;
    if (rc && !fresh) return rc;
    if (fresh && lcx_store_count(s->store)) {
        /* chunks without a manifest (crash before the first manifest write): start over */
        lcx_store_close(s->store);
        s->store = NULL;
        nftw(s->dir, rmrf_cb, 16, FTW_DEPTH | FTW_PHYS);
        if ((rc = open_store(m, s))) return rc;
    }
    if (!fresh && (rc = reconcile(s))) return rc;
    s->loaded_from_disk = !fresh;
    if (want_package) s->package = true;
    if (!s->package) {
        hot_add(s, "", false);
        char src[PATH_MAX * 2];
        snprintf(src, sizeof src, "%s/src", s->root);
        struct stat st;
        if (lstat(src, &st) == 0 && S_ISDIR(st.st_mode)) hot_add(s, "src", true);
        lcx__hot_from_mentions(s, mentions, n_mentions, true);
    }
    if (!s->package && fresh) {
        /* a counting walk of the Hot roots (no file is opened): when Hot would be small,
         * build the Package right away instead of building Hot and then promoting */
        uint64_t n = 0;
        lcx_walk_opts wo = {.max_file_bytes = m->o.max_file_bytes};
        for (int i = 0; i < s->n_hot && n < m->o.hot_min; i++) {
            lcx_walk_stats ws = {0};
            wo.recursive = s->hot[i].recursive;
            lcx__walk(s->root, s->hot[i].rel, &wo, count_cb, NULL, &n, &ws);
        }
        if (n < m->o.hot_min) {
            s->package = true;
            s->n_hot = 0;
        }
    }
    rc = lcx__scope_build(m, s, cb, ud);
    if (rc) return rc;
    if (!s->package && (s->live_files < m->o.hot_min)) {
        /* Hot is small: the whole package costs little more and misses nothing */
        s->package = true;
        s->n_hot = 0;
        rc = lcx__scope_build(m, s, cb, ud);
    }
    s->ready = rc == 0;
    return rc;
}

int lcx__scope_promote(lcx_scopes *m, lcx_scope *s, lcx_scope_progress cb, void *ud)
{
    int rc = 0;
    if (!s->package) {
        s->package = true;
        s->n_hot = 0;
        s->low_turns = 0;
        s->manifest_dirty = true;
        rc = lcx__scope_build(m, s, cb, ud);   /* yields s->mu: s->promoting is set */
        s->promote_failed = rc != 0;
    }
    s->promoting = false;
    pthread_cond_broadcast(&s->pcv);
    return rc;
}
