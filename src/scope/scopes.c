/* Scope manager: the loaded scopes (most recently used first, evicted past max_loaded),
 * acquire / release / unload of a scope, the public info / list / index calls, the
 * low-confidence turn counter and the status text and JSON.
 * Elsewhere in src/scope: the file table and symbol index (files.c), the manifest
 * (manifest.c), loading a scope and its Hot roots (load.c), the indexing pipeline and the
 * watcher's apply hooks (build.c), session bindings, path clusters and background builds
 * (bindings.c), the inotify watcher (watch.c).
 *
 * Locks: s->mu (a scope's own: its file table, symbols, hot roots, stats, store handle)
 * and m->mu (the manager's list, counts, bindings and jobs; m->cv with it) are never held
 * together: m->mu is released before a scope's mu is taken. Store calls (lcx_store_*) are
 * made with s->mu held (or, for lcx_store_mem_bytes, m->mu) and take the store's own locks
 * (src/store/store.c has their order). The watcher (watch.c) takes s->mu alone.
 * A promotion's build releases and retakes s->mu (build.c); waiting for one is a wait on
 * s->pcv with s->mu. lcx__scopes_promoting reads s->promoting atomically under m->mu alone.
 * This file: acquire takes m->mu (waiting on m->cv for a dying scope), releases it, then
 * takes s->mu to load or refresh the scope (starting a background promotion after
 * releasing it); info, list and status take m->mu to pick
 * scopes, release it, then take each scope's mu. */
#include "scope/scope_int.h"
#include "scope/scopes_int.h"
#include "util/util.h"
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CHECKPOINT_MS 3000.0   /* default m->checkpoint_ms (build.c: crash safety of long builds) */

lcx_scopes_opts lcx_scopes_defaults(void)
{
    lcx_scopes_opts o = {0};
    o.hot_cap = 1000;
    o.hot_min = 50;
    o.package_cap = 50000;
    o.max_loaded = 32;
    o.max_file_bytes = 5u << 20;
    o.watch = true;
    o.debounce_ms = 100;
    o.low_confidence = 0.35f;
    return o;
}

/* ---------------------------------------------------------------- manager */

/* Releases everything a scope holds except the struct itself. */
static void scope_close(lcx_scopes *m, lcx_scope *s)
{
    lcx__scope_unwatch(m, s);
    if (s->store) {
        if (s->manifest_dirty) lcx__manifest_write(s);
        /* a snapshot makes the next process's open map the index instead of replaying
         * (re-tokenizing) the whole log: the difference between ~7 and ~1 ms for a small
         * project. The log stays the source of truth if this fails. */
        if (s->store_changed) lcx_store_snapshot(s->store);
        lcx_store_close(s->store);
        s->store = NULL;
    }
    for (uint32_t i = 0; i < s->n_files; i++) lcx__file_clear(&s->files[i]);
    free(s->files);
    free(s->fmap);
    free(s->symidx);
    free(s->symrefs);
    s->files = NULL;
    s->fmap = NULL;
    s->symidx = NULL;
    s->symrefs = NULL;
    s->n_files = 0;
    lcx__scope_pending_free(s);
}

static void scope_free(lcx_scopes *m, lcx_scope *s)
{
    scope_close(m, s);
    pthread_cond_destroy(&s->pcv);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

int lcx_scopes_open(const lcx_scopes_opts *o, const lcx_embedder *emb, lcx_scopes **out)
{
    *out = NULL;
    if (!o || !o->data_dir || !*o->data_dir || !emb) return LCX_EINVAL;
    lcx_scopes *m = calloc(1, sizeof *m);
    if (!m) return LCX_ENOMEM;
    m->o = *o;
    lcx_scopes_opts d = lcx_scopes_defaults();
    if (!m->o.hot_cap) m->o.hot_cap = d.hot_cap;
    if (!m->o.package_cap) m->o.package_cap = d.package_cap;
    if (!m->o.max_loaded) m->o.max_loaded = d.max_loaded;
    if (!m->o.max_file_bytes) m->o.max_file_bytes = d.max_file_bytes;
    if (m->o.low_confidence <= 0) m->o.low_confidence = d.low_confidence;
    snprintf(m->data_dir, sizeof m->data_dir, "%s", o->data_dir);
    m->o.data_dir = m->data_dir;
    m->emb = emb;
    m->checkpoint_ms = CHECKPOINT_MS;
    pthread_mutex_init(&m->mu, NULL);
    pthread_cond_init(&m->cv, NULL);
    char sd[PATH_MAX + 16];
    snprintf(sd, sizeof sd, "%s/scopes", m->data_dir);
    int rc = lcx__mkdirs(sd);
    if (rc == 0 && m->o.watch) rc = lcx__scope_watcher_start(m);
    if (rc) {
        pthread_mutex_destroy(&m->mu);
        free(m);
        return rc;
    }
    *out = m;
    return 0;
}

void lcx_scopes_close(lcx_scopes *m)
{
    if (!m) return;
    pthread_mutex_lock(&m->mu);
    __atomic_store_n(&m->closing, true, __ATOMIC_RELEASE);
    pthread_cond_broadcast(&m->cv);   /* held promotions (test hook) go on and cancel */
    while (m->n_jobs > 0) pthread_cond_wait(&m->cv, &m->mu);   /* they cancel at the next progress call */
    pthread_mutex_unlock(&m->mu);
    lcx__scope_watcher_stop(m);
    lcx_scope *s = m->head;
    while (s) {
        lcx_scope *n = s->next;
        scope_free(m, s);
        s = n;
    }
    s = m->dying;   /* nobody uses them any more: the watcher is stopped */
    while (s) {
        lcx_scope *n = s->next;
        scope_free(m, s);
        s = n;
    }
    for (int i = 0; i < m->n_bind; i++) lcx__binding_clear(&m->bind[i]);
    free(m->bind);
    pthread_cond_destroy(&m->cv);
    pthread_mutex_destroy(&m->mu);
    free(m);
}

void lcx__scopes_set_batch(lcx_scopes *m, uint32_t batch_chunks, double checkpoint_ms)
{
    m->batch_chunks = batch_chunks;
    m->checkpoint_ms = checkpoint_ms;
}

void lcx__scopes_set_serial(lcx_scopes *m, bool serial)
{
    m->serial_build = serial;
}

void lcx__scopes_set_fly(lcx_scopes *m, int max_fly)
{
    m->max_fly = max_fly;
}

/* Unlinks s from the dying list (m->mu held). */
static void dying_unlink(lcx_scopes *m, lcx_scope *s)
{
    for (lcx_scope **pp = &m->dying; *pp; pp = &(*pp)->next)
        if (*pp == s) { *pp = s->next; return; }
}

/* Unlinks and frees unused scopes beyond max_loaded (LRU = list tail). m->mu held. */
static void evict_locked(lcx_scopes *m)
{
    while (m->n_loaded > m->o.max_loaded) {
        lcx_scope *victim = NULL, **pv = NULL;
        for (lcx_scope **pp = &m->head; *pp; pp = &(*pp)->next)
            if ((*pp)->refs == 0) { victim = *pp; pv = pp; }
        if (!victim) return;
        *pv = victim->next;
        m->n_loaded--;
        m->gen++;
        scope_free(m, victim);
    }
}

int lcx__scopes_acquire(lcx_scopes *m, const char *root, const char *const *mentions, int n_mentions,
                        bool package, lcx_scope_progress cb, void *ud, lcx_scope **out)
{
    *out = NULL;
    pthread_mutex_lock(&m->mu);
    lcx_scope *s, **pp;
    for (;;) {
        s = NULL;
        for (pp = &m->head; *pp; pp = &(*pp)->next)
            if (!strcmp((*pp)->root, root)) { s = *pp; break; }
        if (s) break;
        /* an unloaded instance of this root may still hold its store open (a request or
         * the watcher is finishing with it): wait until it is freed, then look again —
         * another waiter may have opened the root meanwhile, and a store must never be
         * open twice */
        bool busy = false;
        for (lcx_scope *d = m->dying; d && !busy; d = d->next) busy = !strcmp(d->root, root);
        if (!busy) break;
        pthread_cond_wait(&m->cv, &m->mu);
    }
    if (s) {
        *pp = s->next;   /* move to front (most recent) */
    } else {
        s = calloc(1, sizeof *s);
        if (!s) { pthread_mutex_unlock(&m->mu); return LCX_ENOMEM; }
        snprintf(s->root, sizeof s->root, "%s", root);
        lcx_scope_hash(root, s->hash);
        const char *sen = lcx_scope_sentinel_at(root);
        snprintf(s->sentinel, sizeof s->sentinel, "%s", sen ? sen : "");
        snprintf(s->dir, sizeof s->dir, "%s/scopes/%s", m->data_dir, s->hash);
        s->inotify_fd = -1;
        pthread_mutex_init(&s->mu, NULL);
        pthread_cond_init(&s->pcv, NULL);
        m->n_loaded++;
        m->gen++;
    }
    s->next = m->head;
    m->head = s;
    s->refs++;
    evict_locked(m);
    pthread_mutex_unlock(&m->mu);

    pthread_mutex_lock(&s->mu);
    int rc = 0;
    bool promote_bg = false;
    if (package) {
        /* a Package is wanted now (an explicit index): wait for a running promotion */
        while (s->promoting) pthread_cond_wait(&s->pcv, &s->mu);
    }
    if (!s->ready) {
        rc = lcx__scope_load(m, s, mentions, n_mentions, package, cb, ud);
        lcx__scope_watcher_kick(m);
    } else if (package && !s->package) {
        s->promoting = true;
        rc = lcx__scope_promote(m, s, NULL, NULL);
    } else if (s->promoting) {
        /* a background promotion runs: the Hot index answers meanwhile */
    } else if (!s->package && lcx__hot_from_mentions(s, mentions, n_mentions, false)) {
        /* SPEC §3: a mentioned path outside Hot promotes to the whole Package, in the
         * background (scope_status "promoting"); when that fails the Hot index keeps
         * serving (status "error", as the reference) */
        s->promoting = promote_bg = true;
    } else if (!m->o.watch && lcx__now_ms() - s->last_refresh_ms > 2000) {
        rc = lcx__scope_build(m, s, NULL, NULL);   /* no watcher: poll the tree at most every 2 s */
    }
    pthread_mutex_unlock(&s->mu);
    if (promote_bg) lcx__scopes_promote_async(m, s);   /* we hold a reference: s stays */
    if (rc) {
        bool ready = s->ready;   /* read before the release: s may be freed by it */
        lcx__scopes_release(m, s);
        if (!ready) lcx_scopes_unload(m, root);
        return rc;
    }
    *out = s;
    return 0;
}

void lcx__scopes_release(lcx_scopes *m, lcx_scope *s)
{
    if (!s) return;
    pthread_mutex_lock(&m->mu);
    s->refs--;
    bool free_it = s->refs == 0 && s->dead;
    pthread_mutex_unlock(&m->mu);
    if (!free_it) return;
    scope_close(m, s);   /* outside the lock: it writes the manifest and snapshots */
    pthread_mutex_lock(&m->mu);
    dying_unlink(m, s);  /* only now may the root be opened again */
    pthread_cond_broadcast(&m->cv);
    pthread_mutex_unlock(&m->mu);
    pthread_cond_destroy(&s->pcv);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

int lcx_scopes_unload(lcx_scopes *m, const char *path)
{
    char canon[PATH_MAX];
    if (!realpath(path, canon)) snprintf(canon, sizeof canon, "%s", path);
    pthread_mutex_lock(&m->mu);
    lcx_scope *s = NULL, **pp;
    for (pp = &m->head; *pp; pp = &(*pp)->next)
        if (!strcmp((*pp)->root, canon)) { s = *pp; break; }
    if (!s) { pthread_mutex_unlock(&m->mu); return LCX_ENOTFOUND; }
    *pp = s->next;
    m->n_loaded--;
    m->gen++;
    s->dead = true;
    s->next = m->dying;
    m->dying = s;
    bool free_now = s->refs == 0;
    if (free_now) s->refs = 1;   /* ours: freed below, outside the lock */
    pthread_mutex_unlock(&m->mu);
    lcx__scope_watcher_kick(m);   /* the watcher drops its reference promptly */
    if (free_now) lcx__scopes_release(m, s);
    return 0;
}

const char *lcx_scope_err_code(int rc)
{
    /* the store is held by another longctx process sharing the data dir; a full disk */
    return rc == LCX_EEXIST ? "scope_busy" : rc == LCX_ENOSPC ? "insufficient_storage" : "internal";
}

/* s->mu held */
static void lcx__scope_fill_info(lcx_scope *s, lcx_scope_info *info)
{
    memset(info, 0, sizeof *info);
    snprintf(info->scope_path, sizeof info->scope_path, "%s", s->root);
    memcpy(info->scope_hash, s->hash, 17);
    snprintf(info->sentinel, sizeof info->sentinel, "%s", s->sentinel);
    snprintf(info->status, sizeof info->status, "%s", !s->ready ? "none" : s->package ? "package" : "hot");
    info->files = s->live_files;
    info->chunks = s->store ? lcx_store_count(s->store) : 0;
    uint32_t nsym = 0;   /* counted, not indexed: the index is built lazily for lookups */
    for (uint32_t i = 0; i < s->n_files; i++) nsym += s->files[i].rel ? (uint32_t)s->files[i].n_syms : 0;
    info->symbols = nsym;
    info->bytes = s->bytes;
    info->skipped_binary = s->stats.skipped_binary;
    info->skipped_large = s->stats.skipped_large;
    info->skipped_unreadable = s->stats.skipped_unreadable;
    info->skipped_secret = s->stats.skipped_secret;
    info->skipped_other = s->stats.skipped_other;
    info->files_read_last = s->stats.files_read;
    info->watched_dirs = (uint32_t)s->n_wd;
    info->truncated = s->truncated;
    info->promote_failed = s->promote_failed;
    info->build_ms = s->build_ms;
}

void lcx__scope_info(lcx_scope *s, lcx_scope_info *info, uint32_t *chunks, bool *promote_failed)
{
    pthread_mutex_lock(&s->mu);
    if (info) lcx__scope_fill_info(s, info);
    if (chunks) *chunks = s->store ? lcx_store_count(s->store) : 0;
    if (promote_failed) *promote_failed = s->promote_failed;
    pthread_mutex_unlock(&s->mu);
}

int lcx_scopes_index(lcx_scopes *m, const char *path, lcx_scope_progress cb, void *ud,
                     lcx_scope_info *info, const char **err_code)
{
    char canon[PATH_MAX];
    const char *why = NULL;
    int rc = lcx_scope_canonical(path, canon, sizeof canon, &why);
    if (err_code) *err_code = why;
    if (rc) return rc;
    lcx_scope *s;
    double t0 = lcx__now_ms();
    rc = lcx__scopes_acquire(m, canon, NULL, 0, true, cb, ud, &s);
    if (rc) {
        if (err_code) *err_code = lcx_scope_err_code(rc);
        return rc;
    }
    /* an explicit index request always leaves the scope fresh: when it was already loaded
     * (nothing walked by acquire), refresh now — only changed files are read */
    pthread_mutex_lock(&s->mu);
    while (s->promoting) pthread_cond_wait(&s->pcv, &s->mu);
    if (s->last_refresh_ms < t0) rc = lcx__scope_build(m, s, cb, ud);
    pthread_mutex_unlock(&s->mu);
    if (info) {
        pthread_mutex_lock(&s->mu);
        lcx__scope_fill_info(s, info);
        pthread_mutex_unlock(&s->mu);
    }
    lcx__scopes_release(m, s);
    if (rc && err_code) *err_code = lcx_scope_err_code(rc);
    return rc;
}

int lcx_scopes_info(lcx_scopes *m, const char *path, lcx_scope_info *info)
{
    char canon[PATH_MAX];
    if (!realpath(path, canon)) return LCX_ENOTFOUND;
    pthread_mutex_lock(&m->mu);
    lcx_scope *s = m->head;
    while (s && strcmp(s->root, canon)) s = s->next;
    if (s) s->refs++;
    pthread_mutex_unlock(&m->mu);
    if (s) {
        pthread_mutex_lock(&s->mu);
        lcx__scope_fill_info(s, info);
        pthread_mutex_unlock(&s->mu);
        lcx__scopes_release(m, s);
        return 0;
    }
    /* persisted but not loaded: report from the manifest header */
    char h[17], p[PATH_MAX + 64];
    lcx_scope_hash(canon, h);
    snprintf(p, sizeof p, "%s/scopes/%s/manifest", m->data_dir, h);
    struct stat st;
    if (stat(p, &st) != 0) return LCX_ENOTFOUND;
    memset(info, 0, sizeof *info);
    snprintf(info->scope_path, sizeof info->scope_path, "%s", canon);
    memcpy(info->scope_hash, h, 17);
    snprintf(info->status, sizeof info->status, "none");   /* on disk, not loaded */
    const char *sen = lcx_scope_sentinel_at(canon);
    snprintf(info->sentinel, sizeof info->sentinel, "%s", sen ? sen : "");
    return 0;
}

int lcx_scopes_list(lcx_scopes *m, lcx_scope_info *out, int max)
{
    lcx_scope *v[256];
    int n = 0;
    pthread_mutex_lock(&m->mu);
    for (lcx_scope *s = m->head; s && n < max && n < 256; s = s->next) {
        s->refs++;
        v[n++] = s;
    }
    pthread_mutex_unlock(&m->mu);
    for (int i = 0; i < n; i++) {
        pthread_mutex_lock(&v[i]->mu);
        lcx__scope_fill_info(v[i], &out[i]);
        pthread_mutex_unlock(&v[i]->mu);
        lcx__scopes_release(m, v[i]);
    }
    return n;
}

uint32_t lcx_scopes_loaded(lcx_scopes *m)
{
    pthread_mutex_lock(&m->mu);
    uint32_t n = m->n_loaded;
    pthread_mutex_unlock(&m->mu);
    return n;
}

/* RAM held by one loaded scope: its tables and its store. */
static uint64_t scope_mem_bytes(const lcx_scope *s)
{
    uint64_t t = sizeof *s + (uint64_t)s->cap_files * sizeof(lcx_file_ent) + (uint64_t)s->fmap_cap * 4 +
                 (uint64_t)s->symidx_cap * 4 + (uint64_t)s->n_syms * sizeof(lcx_symref);
    if (s->store) t += lcx_store_mem_bytes(s->store);
    return t;
}

uint64_t lcx_scopes_mem_bytes(lcx_scopes *m)
{
    uint64_t t = 0;
    pthread_mutex_lock(&m->mu);
    for (lcx_scope *s = m->head; s; s = s->next) t += scope_mem_bytes(s);
    pthread_mutex_unlock(&m->mu);
    return t;
}

/* ---------------------------------------------------------------- low-confidence turns */

void lcx__scopes_note_turn(lcx_scopes *m, lcx_scope *s, float confidence)
{
    pthread_mutex_lock(&s->mu);
    if (confidence < m->o.low_confidence) s->low_turns++;
    else s->low_turns = 0;
    bool promote = !s->package && !s->promoting && s->low_turns >= 2;   /* SPEC §3: 2 low turns */
    if (promote) s->promoting = true;
    pthread_mutex_unlock(&s->mu);
    if (promote) lcx__scopes_promote_async(m, s);   /* the caller holds a reference */
}

bool lcx__scopes_promoting(lcx_scopes *m, const char *root)
{
    pthread_mutex_lock(&m->mu);
    lcx_scope *s = m->head;
    while (s && strcmp(s->root, root)) s = s->next;
    bool p = s && __atomic_load_n(&s->promoting, __ATOMIC_ACQUIRE);
    pthread_mutex_unlock(&m->mu);
    return p;
}

/* ---------------------------------------------------------------- status */

int lcx_scopes_status_text(lcx_scopes *m, char **out)
{
    lcx_scope_info inf[32];
    int n = lcx_scopes_list(m, inf, 32);
    lcx_buf b = {0};
    int rc = 0;
    if (!n) rc = lcx__buf_puts(&b, "[longctx] scope: none\n[longctx] indexed: 0 files, 0 chunks, status none\n");
    for (int i = 0; i < n && !rc; i++)
        rc = lcx__buf_printf(&b, "[longctx] scope: %s (%s)\n[longctx] indexed: %u files, %u chunks, status %s\n",
                            inf[i].scope_path, inf[i].scope_hash, inf[i].files, inf[i].chunks, inf[i].status);
    if (rc) { lcx__buf_free(&b); return rc; }
    if (!b.data) lcx__buf_puts(&b, "");
    size_t len;
    *out = lcx__buf_steal(&b, &len);
    return (int)len;
}

int lcx_scopes_status_json(lcx_scopes *m, char **out)
{
    enum { MAX = 32 };
    lcx_scope *v[MAX];
    lcx_scope_info inf[MAX];
    uint64_t mem[MAX];
    int n = 0;
    pthread_mutex_lock(&m->mu);
    for (lcx_scope *s = m->head; s && n < MAX; s = s->next) {
        s->refs++;
        v[n++] = s;
    }
    pthread_mutex_unlock(&m->mu);
    for (int i = 0; i < n; i++) {
        pthread_mutex_lock(&v[i]->mu);
        lcx__scope_fill_info(v[i], &inf[i]);
        mem[i] = scope_mem_bytes(v[i]);
        pthread_mutex_unlock(&v[i]->mu);
        lcx__scopes_release(m, v[i]);
    }
    lcx_buf b = {0};
    int rc = lcx__buf_puts(&b, "[");
    /* the list is most recent first; the reference reports least recently used first */
    for (int k = 0; k < n && !rc; k++) {
        int i = n - 1 - k;
        rc = lcx__buf_puts(&b, k ? ",{\"scope_path\":" : "{\"scope_path\":");
        if (!rc) rc = lcx__buf_json_str(&b, inf[i].scope_path, strlen(inf[i].scope_path));
        if (!rc)
            rc = lcx__buf_printf(&b, ",\"scope_hash\":\"%s\",\"sentinel\":\"%s\",\"status\":\"%s\",\"files\":%u,"
                                    "\"chunks\":%u,\"symbols\":%u,\"bytes\":%llu,\"watched_dirs\":%u,"
                                    "\"memory_mb\":%.3f}",
                                inf[i].scope_hash, inf[i].sentinel, inf[i].status, inf[i].files, inf[i].chunks,
                                inf[i].symbols, (unsigned long long)inf[i].bytes, inf[i].watched_dirs,
                                (double)mem[i] / (1024.0 * 1024.0));
    }
    if (!rc) rc = lcx__buf_puts(&b, "]");
    if (rc) { lcx__buf_free(&b); return rc; }
    size_t len;
    *out = lcx__buf_steal(&b, &len);
    return (int)len;
}

