/* Persistent, crash-safe store: an append-only log (source of truth) plus an optional
 * snapshot (a cache of the built index that is mmap'd on open).
 * This file owns the handle's life and the read path: open and close, count, get,
 * search, memory, snapshot requests. Where the rest lives: the on-disk format and what reads it without a handle (log.c),
 * opening a store's files and replaying its log (replay.c), writes (append.c) and their
 * parallel preparation (ingest.c), the snapshot file (snapshot.c); the handle's fields in
 * store_impl.h.
 *
 * Locking: `wmu` serialises writers (log appends, tombstones, snapshots); `rw` guards the
 * in-memory index: writers hold it exclusively only to publish already-durable records,
 * so searches run during a writer's fsync; `trw` (taken after rw) guards the term table
 * alone, so ingest workers look term ids up while a publish appends postings (it writes
 * trw only while adding new terms). lcx_store_commit publishes after releasing wmu,
 * in ticket (= log) order (wseq/pseq/pcv); the other writers take wmu drained.
 * A big append (the overlapped path) returns once its record is durable and leaves the
 * publish to the next call on the store (`defer`, under dmu): every reader and writer that
 * looks at the index's documents publishes a pending batch first (lcx__flush_deferred), so a
 * caller always reads its own writes (count and mem_bytes account for it without
 * publishing), and the next big append publishes it on a thread of its own while its
 * workers embed: one caller's batches keep both cores busy.
 *
 * Lock order (a lock is taken only while holding locks that come before it):
 *   wmu → dmu → rw → trw;   pmu and scmu are leaves (nothing is taken while holding one);
 *   pcv is waited on with wmu held.
 * This file: count takes dmu → rw (shared); mem_bytes dmu, then rw (shared); get and
 * search publish a deferred batch first (lcx__flush_deferred: dmu → rw → trw), then take rw
 * shared (search borrows a scratch under scmu alone); snapshot and close take wmu drained
 * (lcx__wlock_drained), then rw shared. */
#include "store/store_impl.h"
#include "store/store_int.h"
#include "embed/embed.h"
#include "index/index.h"
#include "store/store_fmt.h"
#include "util/util.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define SNAP_AUTO_MIN 1024   /* close() snapshots when this many chunks arrived since */

const char *lcx__path_store(lcx_store *s, const char *p, uint32_t n)
{
    if (!n) return NULL;
    struct pblock *b = s->paths;
    if (!b || b->cap - b->used < n) {
        size_t cap = n > 65536 ? n : 65536;
        struct pblock *nb = malloc(sizeof *nb + cap);
        if (!nb) return NULL;
        nb->cap = cap;
        nb->used = 0;
        nb->next = b;
        s->paths = nb;
        s->path_bytes += cap;
        b = nb;
    }
    char *d = b->data + b->used;
    memcpy(d, p, n);
    b->used += n;
    return d;
}

int lcx__store_meta_reserve(lcx_store *s, uint32_t need)
{
    if (need <= s->m_cap) return 0;
    uint32_t nc = s->m_cap ? s->m_cap : 64;
    while (nc < need) nc = nc > UINT32_MAX / 2 ? need : nc * 2;
    meta *m = lcx__big_realloc(s->m, (size_t)s->m_cap * sizeof *m, (size_t)nc * sizeof *m);
    if (!m) return LCX_ENOMEM;
    s->m = m;
    s->m_cap = nc;
    return 0;
}

/* Takes wmu once no ticketed commit is still publishing (lcx_store_commit publishes outside
 * wmu, in ticket = log order). A deferred batch may still be pending. */
void lcx__wlock_tickets(lcx_store *s)
{
    pthread_mutex_lock(&s->wmu);
    while (s->pseq != s->wseq) pthread_cond_wait(&s->pcv, &s->wmu);
}

/* Takes wmu once every record written so far is also published: tombstones and snapshots
 * need the index to match the log. */
void lcx__wlock_drained(lcx_store *s)
{
    lcx__wlock_tickets(s);
    lcx__flush_deferred(s);
}

/* ------------------------------------------------------------------ open / close */
int lcx_store_open(const char *dir, const lcx_embedder *emb, const lcx_store_opts *opts, lcx_store **out)
{
    if (out) *out = NULL;
    lcx__store_open_detail_clear();
    if (!dir || !*dir || !emb || !out) return LCX_EINVAL;
    const char *fp = lcx_embedder_fingerprint(emb);
    if (strlen(fp) > LCX_FMT_FP_MAX) return LCX_EINVAL;
    lcx_store *s = calloc(1, sizeof *s);
    if (!s) return LCX_ENOMEM;
    s->fd = -1;
    s->dir = strdup(dir);
    s->emb = emb;
    s->dim = (uint32_t)lcx_embedder_dim(emb);
    snprintf(s->fp, sizeof s->fp, "%s", fp);
    s->opts.max_text_len = opts && opts->max_text_len ? opts->max_text_len : (1u << 20);
    if (s->opts.max_text_len > LCX_TEXT_HARD_MAX) s->opts.max_text_len = LCX_TEXT_HARD_MAX;
    s->opts.max_chunks = opts && opts->max_chunks ? opts->max_chunks : 10000000u;
    pthread_rwlock_init(&s->rw, NULL);
    pthread_rwlock_init(&s->trw, NULL);
    pthread_mutex_init(&s->wmu, NULL);
    pthread_mutex_init(&s->pmu, NULL);
    pthread_mutex_init(&s->dmu, NULL);
    pthread_cond_init(&s->pcv, NULL);
    pthread_mutex_init(&s->scmu, NULL);
    int rc = s->dir ? 0 : LCX_ENOMEM;
    if (!rc) rc = lcx__mkdirs(dir);
    if (!rc) rc = lcx_index_new(emb, &s->ix);
    if (!rc) rc = lcx__store_load(s);
    /* the hash embedder's rows are a pure function of the text (its fingerprint, checked
     * against the log header, names every knob), so v2 logs store only the text for it and
     * replay recomputes the rows; any other embedder's rows are stored (never re-embedded) */
    s->text_recs = s->log_ver >= 2 && lcx__is_hash_embedder(emb);
    if (!rc && opts && opts->nn) rc = lcx__nn_attach(s, opts->nn, opts->nn_reset);
    if (rc) {
        s->has_snap = 0;   /* never write a snapshot of a half-loaded store */
        s->broken = 1;
        lcx_store_close(s);
        return rc;
    }
    *out = s;
    return 0;
}

void lcx__dtblk_free(struct dtblk *b);

void lcx_store_close(lcx_store *s)
{
    if (!s) return;
    lcx__nn_detach(s);
    lcx__flush_deferred(s);
    if (!s->broken && s->ix && s->fd >= 0) {
        uint32_t fresh = s->ix->n_docs - s->snap_docs;
        if (fresh >= SNAP_AUTO_MIN || s->tombs_since_snap) {
            lcx__wlock_drained(s);
            lcx__snap_write(s);   /* best effort: the log already holds everything */
            pthread_mutex_unlock(&s->wmu);
        }
    }
    if (s->fd >= 0) close(s->fd);
    lcx_index_free(s->ix);
    lcx__snap_release(s);
    for (struct lview *v = s->views; v;) {
        struct lview *n = v->next;
        munmap((void *)v->base, v->len);
        free(v);
        v = n;
    }
    for (struct pblock *b = s->paths; b;) {
        struct pblock *n = b->next;
        free(b);
        b = n;
    }
    lcx__big_free(s->m, (size_t)s->m_cap * sizeof *s->m);
    free(s->recbuf);
    lcx__dtblk_free(s->dtspare);
    free(s->prec[0]);
    free(s->prec[1]);
    for (int t = 0; t < PAR_MAX_THREADS; t++) lcx__post_keys_free(&s->pkeys[t]);
    pthread_mutex_destroy(&s->pmu);
    pthread_mutex_destroy(&s->dmu);
    pthread_cond_destroy(&s->pcv);
    for (lcx__scratch *sc = s->scratch; sc;) {
        lcx__scratch *nx = sc->next;
        lcx__scratch_free(sc);
        sc = nx;
    }
    pthread_mutex_destroy(&s->scmu);
    pthread_rwlock_destroy(&s->rw);
    pthread_rwlock_destroy(&s->trw);
    pthread_mutex_destroy(&s->wmu);
    free(s->dir);
    free(s);
}

/* ------------------------------------------------------------------ reads */
/* Counts a deferred batch without publishing it (svc answers every write with the session
 * total: publishing there would put the publish back between two writes). Its chunks are
 * live: acknowledged, and tombstones publish it first. dmu, held by a publishing flush,
 * keeps the sum consistent. */
uint32_t lcx_store_count(lcx_store *s)
{
    if (!s) return 0;
    pthread_mutex_lock(&s->dmu);
    lock_r(s);
    uint32_t n = s->ix->n_live + (s->defer ? (uint32_t)s->defer->n : 0);
    unlock_rw(s);
    pthread_mutex_unlock(&s->dmu);
    return n;
}

int lcx_store_get(lcx_store *s, uint32_t id, lcx_chunk *out)
{
    if (!s || !out) return LCX_EINVAL;
    lcx__flush_deferred(s);
    lock_r(s);
    int rc = 0;
    if (id >= s->ix->n_docs || lcx__index_is_deleted(s->ix, id)) {
        rc = LCX_ENOTFOUND;
    } else {
        const meta *m = &s->m[id];
        lcx_chunk c = lcx_chunk_init();
        c.text = s->ix->text[id];
        c.text_len = s->ix->text_len[id];
        if (lcx__crc32c(0, c.text, c.text_len) != m->text_crc) {
            rc = LCX_ECORRUPT;
        } else {
            c.tok_start = m->tok_start;
            c.tok_end = m->tok_end;
            c.layer = m->layer;
            c.round = m->round;
            c.score = m->score;
            c.path = m->path;
            c.path_len = m->path_len;
            c.line_start = m->line_start;
            c.line_end = m->line_end;
            c.file_type = (lcx_file_type)m->file_type;
            *out = c;
        }
    }
    unlock_rw(s);
    return rc;
}

int lcx_store_search(lcx_store *s, const char *q, size_t qlen, const lcx_search_opts *o, lcx_hit *out,
                     int max_out)
{
    if (s && s->nn) return lcx__nn_search(s, q, qlen, o, out, max_out);
    if (o && o->info) memset(o->info, 0, sizeof *o->info);
    return lcx__store_search_base(s, q, qlen, o, out, max_out);
}

int lcx__store_search_base(lcx_store *s, const char *q, size_t qlen, const lcx_search_opts *o, lcx_hit *out,
                           int max_out)
{
    if (!s || (!q && qlen)) return LCX_EINVAL;
    float *qv = malloc((size_t)s->dim * sizeof *qv);   /* (dim) */
    if (!qv) return LCX_ENOMEM;
    const char *t = q ? q : "";
    int rc = lcx_embed(s->emb, &t, &qlen, 1, qv);      /* off-lock */
    if (rc >= 0) {
        /* borrow a scratch (one per concurrent search; kept until close) */
        pthread_mutex_lock(&s->scmu);
        lcx__scratch *sc = s->scratch;
        if (sc) s->scratch = sc->next;
        pthread_mutex_unlock(&s->scmu);
        if (!sc) sc = calloc(1, sizeof *sc);
        lcx__flush_deferred(s);
        lock_r(s);
        rc = lcx__index_search_vec(s->ix, q, qlen, qv, o, out, max_out, sc);
        unlock_rw(s);
        if (sc) {
            pthread_mutex_lock(&s->scmu);
            sc->next = s->scratch;
            s->scratch = sc;
            pthread_mutex_unlock(&s->scmu);
        }
    }
    free(qv);
    return rc;
}

const char *lcx_store_fingerprint(const lcx_store *s) { return s ? s->fp : ""; }

/* Bytes a prepared batch holds (its rows, chunk copies, doc_terms blocks, key runs). */
static size_t prepared_bytes(const lcx_store_prepared *p)
{
    size_t n = (size_t)p->n * (p->s->dim + sizeof *p->vsc + sizeof *p->tcrc + sizeof *p->dt + sizeof *p->c) + p->rec_cap;
    for (const struct dtblk *b = p->blk; b; b = b->next) n += sizeof *b + b->cap;
    for (int t = 0; t < PAR_MAX_THREADS; t++)
        n += p->keys[t].cap * 2 * sizeof *p->keys[t].key + p->keys[t].ucap * sizeof *p->keys[t].unres;
    return n;
}

/* A deferred batch is counted by the buffers it holds, not published (the sessions layer
 * sums this over every session under its mutex). */
size_t lcx_store_mem_bytes(lcx_store *s)
{
    if (!s) return 0;
    pthread_mutex_lock(&s->dmu);
    size_t d = s->defer ? prepared_bytes(s->defer) : 0;
    pthread_mutex_unlock(&s->dmu);
    lock_r(s);
    size_t n = sizeof *s + lcx__index_mem_bytes(s->ix) + (size_t)s->m_cap * sizeof(meta) + s->path_bytes + s->map_len + d;
    unlock_rw(s);
    return n + lcx__nn_mem_bytes(s);
}

int lcx_store_snapshot(lcx_store *s)
{
    if (!s) return LCX_EINVAL;
    lcx__wlock_drained(s);
    lock_r(s);     /* index is stable under wmu; the read lock documents that readers may share */
    int rc = lcx__snap_write(s);
    unlock_rw(s);
    pthread_mutex_unlock(&s->wmu);
    return rc;
}

