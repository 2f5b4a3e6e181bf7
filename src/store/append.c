/* Writes: lcx_store_append (small batches through prepare + commit, big hash-embedder
 * batches through the overlapped path, whose publish is deferred to the next store call),
 * the two-phase lcx_store_prepare / lcx_store_commit, the publish of a durable batch, and
 * tombstones (lcx_store_delete_path). Record layout: log.c items 2-5.
 * Lock order: wmu → dmu → rw → trw (store.c). Writers take wmu (the overlapped path and
 * tombstones drained first, lcx__wlock_tickets / lcx__wlock_drained); lcx_store_commit
 * waits on pcv (with wmu) for its ticket and publishes without wmu; a publish takes rw
 * exclusive and, for the new terms only, trw exclusive; the deferred batch is published
 * under dmu. pmu alone guards the spare buffers (prepared_new / lcx_store_prepared_free). */
#include "store/store_impl.h"
#include "store/store_int.h"
#include "embed/embed.h"
#include "index/index.h"
#include "store/store_fmt.h"
#include "util/util.h"
#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define LCX_BATCH_MAX (1 << 24)  /* chunks per append (the posting sort key's doc field) */

/* Serialises a batch record into rec (sizeof(lcx_rec_hdr) + payload bytes). vec/vsc: the
 * rows of a BATCH record; NULL for a TEXT record (no rows, vscale 0). */
static void build_record(char *rec, const lcx_chunk *c, int n, uint64_t payload, const uint8_t *vec, const float *vsc,
                         uint32_t dim)
{
    char *p = rec + sizeof(lcx_rec_hdr);
    for (int i = 0; i < n; i++) {
        lcx_rec_chunk fx;
        memset(&fx, 0, sizeof fx);
        fx.tok_start = c[i].tok_start;
        fx.tok_end = c[i].tok_end;
        fx.layer = c[i].layer;
        fx.round = c[i].round;
        fx.score = c[i].score;
        fx.line_start = c[i].line_start;
        fx.line_end = c[i].line_end;
        fx.text_len = c[i].text_len;
        fx.path_len = c[i].path ? c[i].path_len : 0;
        fx.file_type = (uint8_t)c[i].file_type;
        fx.vscale = vec ? vsc[i] : 0.0f;
        memcpy(p, &fx, sizeof fx);
        p += sizeof fx;
        if (fx.text_len) memcpy(p, c[i].text, fx.text_len);
        p += fx.text_len;
        if (fx.path_len) memcpy(p, c[i].path, fx.path_len);
        p += fx.path_len;
        if (vec) {
            memcpy(p, vec + (size_t)i * dim, dim);
            p += dim;
        }
    }
    lcx_rec_hdr h = {LCX_REC_MAGIC, vec ? LCX_REC_BATCH : LCX_REC_TEXT, {0}, (uint32_t)payload, (uint32_t)n, 0, 0};
    h.crc = lcx__crc32c(lcx__crc32c(0, &h, 16), rec + sizeof h, payload);
    memcpy(rec, &h, sizeof h);
}

/* The log write of the overlapped path: record build + write + fdatasync on a thread of
 * its own while the workers embed (the record holds no embedding rows, so it is complete
 * before they finish). */
typedef struct {
    lcx_store *s;
    const lcx_chunk *c;
    int n;
    uint64_t payload, at;
    uint32_t crc;
    int rc;
} io_job;

static void *io_run(void *arg)
{
    io_job *j = arg;
    build_record(j->s->recbuf, j->c, j->n, j->payload, NULL, NULL, 0);
    memcpy(&j->crc, j->s->recbuf + offsetof(lcx_rec_hdr, crc), 4);
    j->rc = lcx__write_all(j->s->fd, j->s->recbuf, sizeof(lcx_rec_hdr) + j->payload, j->at);
    if (!j->rc && lcx__fdatasync(j->s->fd) < 0) j->rc = lcx__eio(errno);
    return NULL;
}

static void fill_meta(lcx_store *s, meta *m, const lcx_chunk *c, uint32_t text_crc)
{
    m->tok_start = c->tok_start;
    m->tok_end = c->tok_end;
    m->layer = c->layer;
    m->round = c->round;
    m->score = c->score;
    m->line_start = c->line_start;
    m->line_end = c->line_end;
    m->file_type = (uint8_t)c->file_type;
    m->text_crc = text_crc;
    m->path_len = c->path ? c->path_len : 0;
    m->path = lcx__path_store(s, c->path, m->path_len);
}

/* dst[i] = src[i] (dst may be src) with text and path pointed at their bytes in rec, the
 * batch's log record (header included; layout: item 3). */
static void point_into(const lcx_store *s, lcx_chunk *dst, const lcx_chunk *src, int n, const char *rec)
{
    const uint64_t row = s->text_recs ? 0 : s->dim;
    const char *q = rec + sizeof(lcx_rec_hdr);
    for (int i = 0; i < n; i++) {
        lcx_chunk c = src[i];
        q += sizeof(lcx_rec_chunk);
        c.text = q;
        q += c.text_len;
        c.path_len = c.path ? c.path_len : 0;
        c.path = c.path ? q : NULL;
        q += c.path_len + row;
        dst[i] = c;
    }
}

/* Makes a durable record visible (caller holds wmu, the publish turn of a ticketed commit,
 * or dmu for the deferred batch; takes the write lock). in_log: the texts of c point into a
 * log window (the index keeps the pointers); else the index copies them. */
static int publish(lcx_store *s, const lcx_chunk *c, int n, const uint8_t *vec, const float *vsc,
                   const uint32_t *tcrc, lcx__doc_terms *const *dt, const lcx__post_keys *keys, int n_runs,
                   int in_log, uint32_t *first_id)
{
    const char **tx = malloc((size_t)n * sizeof *tx);   /* (n) */
    uint32_t *len = malloc((size_t)n * sizeof *len);     /* (n) */
    int rc = tx && len ? 0 : LCX_ENOMEM;
    for (int i = 0; i < n && !rc; i++) {
        tx[i] = c[i].text ? c[i].text : "";
        len[i] = c[i].text_len;
    }
    uint32_t first = 0;
    lock_w(s);
    /* the new terms first, excluding the ingest workers' lookups only that long: the
     * posting appends after it (most of a publish) run next to them */
    pthread_rwlock_wrlock(&s->trw);
    if (!rc) rc = lcx__index_commit_terms(s->ix, keys, n_runs);
    pthread_rwlock_unlock(&s->trw);
    if (!rc) rc = lcx__index_commit_keys(s->ix, (uint32_t)n, tx, len, !in_log, vec, vsc, dt, keys, n_runs, &first);
    for (int i = 0; i < n && !rc; i++) {
        fill_meta(s, &s->m[first + (uint32_t)i], &c[i], tcrc[i]);
        if (s->m[first + (uint32_t)i].path_len && !s->m[first + (uint32_t)i].path) rc = LCX_ENOMEM;
    }
    unlock_rw(s);
    free(tx);
    free(len);
    if (!rc && first_id) *first_id = first;
    return rc;   /* on failure the caller sets s->broken under wmu: durable, not fully in RAM */
}

/* Undoes an unacknowledged record at `at` (write or later step failed). */
static void log_undo(lcx_store *s, uint64_t at, int synced)
{
    if (ftruncate(s->fd, (off_t)at) < 0 || (synced && lcx__fdatasync(s->fd) < 0))
        s->broken = 1;   /* cannot even undo: stop writing */
}

/* Checks a batch's chunks; *payload: its record's payload bytes. */
static int check_batch(const lcx_store *s, const lcx_chunk *c, int n, uint64_t *payload)
{
    const uint64_t row_bytes = s->text_recs ? 0 : s->dim;
    uint64_t pl = 0;
    for (int i = 0; i < n; i++) {
        if ((!c[i].text && c[i].text_len) || (!c[i].path && c[i].path_len) || (unsigned)c[i].file_type > LCX_FT_CONFIG)
            return LCX_EINVAL;
        if (c[i].text_len > s->opts.max_text_len || c[i].path_len > LCX_PATH_MAX) return LCX_ELIMIT;
        pl += sizeof(lcx_rec_chunk) + c[i].text_len + (c[i].path ? c[i].path_len : 0) + row_bytes;
    }
    if (pl > LCX_REC_MAX) return LCX_ELIMIT;
    *payload = pl;
    return 0;
}

/* ------------------------------------------------------------------ two-phase append
 * lcx_store_prepare does everything lcx_store_append does before its writer lock (embed,
 * tokenize, resolve known term ids, sort posting keys, build the log record) without
 * holding wmu, so a pipeline prepares batch N+1 while
 * batch N is written, fsync'd and published. Why that is safe:
 *  - term ids resolved at prepare time stay valid: the index never renumbers or drops a
 *    term while the store is open; terms unknown then (tid = UINT32_MAX, kept in the keys'
 *    "unresolved" list) are looked up again — or created — by the commit, under the lock,
 *    exactly as for concurrent small appends;
 *  - the embedder and its fingerprint, dim and the record type are fixed for the store's
 *    lifetime, so the record built here is what an append under the lock would write;
 *  - the record's log offset is only fixed at commit (write at log_end under wmu), and
 *    durability is unchanged: commit = write + fdatasync, then publish.
 * The texts are not copied anywhere: the publish points the index at the written record
 * through a log window (lcx__lview_at). */

typedef struct {
    char *rec;
    const lcx_chunk *c;
    int n;
    uint64_t payload;
} rec_job;

static void *rec_run(void *arg)   /* the TEXT record, built next to the embedding workers */
{
    rec_job *j = arg;
    build_record(j->rec, j->c, j->n, j->payload, NULL, NULL, 0);
    return NULL;
}

void lcx_store_prepared_free(lcx_store_prepared *p)
{
    if (!p) return;
    lcx_store *s = p->s;
    /* keep some buffers for the next prepare */
    pthread_mutex_lock(&s->pmu);
    lcx__dtblk_keep(&p->blk, &s->dtspare);
    if (!s->pkeys_full) {
        for (int t = 0; t < PAR_MAX_THREADS; t++) {
            s->pkeys[t] = p->keys[t];
            memset(&p->keys[t], 0, sizeof p->keys[t]);
        }
        s->pkeys_full = 1;
    }
    if (p->rec) {   /* a ~10 MB record buffer: faulting it in again costs ~2.5k page faults */
        int k = !s->prec[0] ? 0 : !s->prec[1] ? 1 : s->prec_cap[0] < s->prec_cap[1] ? 0 : 1;
        if (!s->prec[k] || s->prec_cap[k] < p->rec_cap) {   /* keep the larger buffers */
            char *old = s->prec[k];
            s->prec[k] = p->rec;
            s->prec_cap[k] = p->rec_cap;
            p->rec = old;   /* freed below */
        }
    }
    pthread_mutex_unlock(&s->pmu);
    lcx__dtblk_free(p->blk);
    for (int t = 0; t < PAR_MAX_THREADS; t++) lcx__post_keys_free(&p->keys[t]);
    free(p->c);
    free(p->rec);
    free(p->vec);
    free(p->vsc);
    free(p->tcrc);
    free(p->dt);
    free(p);
}

/* A batch's buffers (the spare ones of earlier batches first); with_rec: also a buffer for
 * its log record. NULL: out of memory. */
static lcx_store_prepared *prepared_new(lcx_store *s, int n, uint64_t payload, int with_rec)
{
    lcx_store_prepared *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->s = s;
    p->n = n;
    p->payload = payload;
    if (n == 0) return p;
    pthread_mutex_lock(&s->pmu);
    p->blk = s->dtspare;
    s->dtspare = NULL;
    if (s->pkeys_full) {
        for (int t = 0; t < PAR_MAX_THREADS; t++) {
            p->keys[t] = s->pkeys[t];
            memset(&s->pkeys[t], 0, sizeof s->pkeys[t]);
        }
        s->pkeys_full = 0;
    }
    const size_t rec_need = sizeof(lcx_rec_hdr) + payload;
    for (int k = 0; with_rec && k < 2; k++)
        if (s->prec[k] && s->prec_cap[k] >= rec_need) {
            p->rec = s->prec[k];
            p->rec_cap = s->prec_cap[k];
            s->prec[k] = NULL;
            break;
        }
    pthread_mutex_unlock(&s->pmu);
    p->vec = malloc((size_t)n * s->dim);
    p->vsc = malloc((size_t)n * sizeof *p->vsc);
    p->tcrc = malloc((size_t)n * sizeof *p->tcrc);
    p->dt = calloc((size_t)n, sizeof *p->dt);
    p->c = malloc((size_t)n * sizeof *p->c);
    if (with_rec && !p->rec && (p->rec = malloc(rec_need))) p->rec_cap = rec_need;
    if (!p->vec || !p->vsc || !p->tcrc || !p->dt || !p->c || (with_rec && !p->rec)) {
        lcx_store_prepared_free(p);
        return NULL;
    }
    return p;
}

static int publish_prepared(lcx_store *s, const lcx_store_prepared *p, int in_log, uint32_t *first_id)
{
    return publish(s, p->c, p->n, p->vec, p->vsc, p->tcrc, p->dt, p->keys, p->n_runs, in_log, first_id);
}

/* Publishes the deferred batch, if any (see `defer`). Readers call it too, so they take a
 * non-const handle. */
void lcx__flush_deferred(lcx_store *s)
{
    if (!__atomic_load_n(&s->defer, __ATOMIC_ACQUIRE)) return;   /* hot: every search */
    pthread_mutex_lock(&s->dmu);
    lcx_store_prepared *p = s->defer;
    if (p && publish_prepared(s, p, 1, NULL)) s->broken = 1;   /* durable, not in RAM: reopen recovers it */
    __atomic_store_n(&s->defer, NULL, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&s->dmu);
    lcx_store_prepared_free(p);
}

/* The id the next appended chunk gets (an empty batch's first_id). */
static uint32_t next_id(lcx_store *s)
{
    lcx__flush_deferred(s);
    lock_r(s);
    uint32_t id = s->ix->n_docs;
    unlock_rw(s);
    return id;
}

static void *flush_run(void *arg)   /* side job of the overlapped append */
{
    lcx__flush_deferred(arg);
    return NULL;
}

int lcx_store_prepare(lcx_store *s, const lcx_chunk *c, int n, lcx_store_prepared **out)
{
    if (out) *out = NULL;
    if (!s || !out || n < 0 || (n && !c)) return LCX_EINVAL;
    if (n >= LCX_BATCH_MAX) return LCX_ELIMIT;
    uint64_t payload = 0;
    int rc = check_batch(s, c, n, &payload);
    if (rc) return rc;
    lcx_store_prepared *p = prepared_new(s, n, payload, 1);
    if (!p) return LCX_ENOMEM;
    if (n == 0) {
        *out = p;
        return 0;
    }
    const int text_rec = s->text_recs;
    rec_job j = {p->rec, c, n, payload};
    lcx__side_job sj = {rec_run, &j};
    rc = lcx__prepare_batch(s, c, n, p->vec, p->vsc, p->tcrc, p->dt, &p->blk, p->keys, &p->n_runs, &sj, text_rec);
    if (rc) {
        lcx_store_prepared_free(p);
        return rc;
    }
    if (!text_rec) build_record(p->rec, c, n, payload, p->vec, p->vsc, s->dim);
    point_into(s, p->c, c, n, p->rec);   /* the caller may free c and its texts now */
    *out = p;
    return 0;
}

int lcx_store_commit(lcx_store *s, lcx_store_prepared *p, uint32_t *first_id)
{
    if (!s || !p || p->s != s) return LCX_EINVAL;
    if (p->committed) return LCX_ESTATE;
    p->committed = 1;
    const int n = p->n;
    if (n == 0) {
        if (first_id) *first_id = next_id(s);
        return 0;
    }
    lcx_rec_hdr h;
    memcpy(&h, p->rec, sizeof h);
    int rc;
    pthread_mutex_lock(&s->wmu);
    lcx__flush_deferred(s);   /* it was written before this record: its ids come first */
    if (s->broken) { rc = LCX_ESTATE; goto unlock; }
    /* reserve before writing so publishing cannot fail on these allocations; records
     * written but not yet published (pend_docs) come first (a commit whose publish is
     * finishing may be counted twice here: conservative) */
    lock_w(s);
    rc = (uint64_t)s->ix->n_docs + s->pend_docs + (uint64_t)n > s->opts.max_chunks ? LCX_ELIMIT : 0;
    if (!rc) rc = lcx__index_reserve(s->ix, s->pend_docs + (uint32_t)n);
    if (!rc) rc = lcx__store_meta_reserve(s, s->ix->n_docs + s->pend_docs + (uint32_t)n);
    unlock_rw(s);
    if (rc) goto unlock;
    /* durable first: write + fdatasync (searches keep running meanwhile) */
    uint64_t at = s->log_end;
    rc = lcx__write_all(s->fd, p->rec, sizeof h + p->payload, at);
    if (!rc && lcx__fdatasync(s->fd) < 0) rc = lcx__eio(errno);
    if (rc) {
        log_undo(s, at, 0);
        goto unlock;
    }
    s->log_end = at + sizeof h + p->payload;
    s->last_rec_off = at;
    s->last_rec_crc = h.crc;
    const char *view = lcx__lview_at(s, at, sizeof h + p->payload);
    if (view) point_into(s, p->c, p->c, n, view);   /* the index keeps pointers into the log */
    /* Publish outside wmu, so the next commit writes + fsyncs its record meanwhile (the
     * fdatasync is most of a commit: ~80-180 ms per 10 MB record on the shared disk).
     * Tickets are taken in log order and publishes run in ticket order, so chunk ids are
     * the log's order; the next record is written only after this one is durable, so a
     * crash can tear only the last record (the recovery rule). */
    const uint64_t my = s->wseq++;
    s->pend_docs += (uint32_t)n;
    while (s->pseq != my) pthread_cond_wait(&s->pcv, &s->wmu);
    pthread_mutex_unlock(&s->wmu);
    rc = publish_prepared(s, p, view != NULL, first_id);
    pthread_mutex_lock(&s->wmu);
    if (rc) s->broken = 1;   /* durable but not fully in RAM: reopen recovers it */
    s->pend_docs -= (uint32_t)n;
    s->pseq++;
    pthread_cond_broadcast(&s->pcv);
unlock:
    pthread_mutex_unlock(&s->wmu);
    return rc;
}

/* The overlapped path of lcx_store_append (big batches of the hash embedder): the TEXT
 * record does not depend on the embeddings, so its write + fdatasync runs on a thread of
 * its own while the workers embed and tokenize, and the previous big append's deferred
 * batch is published on another; this batch is then left deferred. wmu is held from the
 * start (the record's log offset must be fixed before writing). Best for one caller
 * appending alone; a pipeline that keeps batches in flight uses lcx_store_prepare +
 * lcx_store_commit, which embed outside the lock (the log write then follows the
 * embedding). */
static int append_overlapped(lcx_store *s, const lcx_chunk *c, int n, uint64_t payload, uint32_t *first_id)
{
    lcx_store_prepared *p = NULL;
    int rc = 0;
    lcx__wlock_tickets(s);
    pthread_mutex_lock(&s->dmu);
    const uint32_t pend = s->defer ? (uint32_t)s->defer->n : 0;   /* published next to this batch */
    pthread_mutex_unlock(&s->dmu);
    if (s->broken) { rc = LCX_ESTATE; goto unlock; }
    size_t need = sizeof(lcx_rec_hdr) + payload;
    if (s->recbuf_cap < need) {
        free(s->recbuf);
        s->recbuf_cap = 0;
        /* headroom: batch payloads vary a little, and a fresh ~1 MB buffer is
         * ~256 page faults (it is mmap'd: freeing it unmaps it) */
        size_t cap = need + need / 8;
        if (!(s->recbuf = malloc(cap))) { rc = LCX_ENOMEM; goto unlock; }
        s->recbuf_cap = cap;
    }
    if (!(p = prepared_new(s, n, payload, 0))) { rc = LCX_ENOMEM; goto unlock; }
    lock_w(s);   /* reserve before writing so publishing cannot fail on these allocations */
    rc = (uint64_t)s->ix->n_docs + pend + (uint64_t)n > s->opts.max_chunks ? LCX_ELIMIT : 0;
    if (!rc) rc = lcx__index_reserve(s->ix, pend + (uint32_t)n);
    if (!rc) rc = lcx__store_meta_reserve(s, s->ix->n_docs + pend + (uint32_t)n);
    unlock_rw(s);
    if (rc) goto unlock;
    io_job j = {s, c, n, payload, s->log_end, 0, 0};
    lcx__side_job side[2] = {{io_run, &j}, {flush_run, s}};
    rc = lcx__prepare_batch(s, c, n, p->vec, p->vsc, p->tcrc, p->dt, &p->blk, p->keys, &p->n_runs, side, pend ? 2 : 1);
    if (j.rc) {
        log_undo(s, j.at, 0);
        rc = j.rc;
        goto unlock;
    }
    if (!rc && s->broken) rc = LCX_ESTATE;   /* the deferred batch could not be published */
    if (rc) {   /* durable, but it cannot be indexed: take it back before acknowledging nothing */
        log_undo(s, j.at, 1);
        goto unlock;
    }
    s->log_end = j.at + sizeof(lcx_rec_hdr) + payload;
    s->last_rec_off = j.at;
    s->last_rec_crc = j.crc;
    const char *view = lcx__lview_at(s, j.at, sizeof(lcx_rec_hdr) + payload);
    if (!view) {   /* no window on the log: publish now, the index copies the texts from c */
        memcpy(p->c, c, (size_t)n * sizeof *c);
        if ((rc = publish_prepared(s, p, 0, first_id))) s->broken = 1;   /* durable, not in RAM */
        goto unlock;
    }
    point_into(s, p->c, c, n, view);
    if (first_id) *first_id = s->ix->n_docs;   /* stable: only writers, holding wmu drained, publish */
    pthread_mutex_lock(&s->dmu);
    __atomic_store_n(&s->defer, p, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&s->dmu);
    p = NULL;
unlock:
    pthread_mutex_unlock(&s->wmu);
    lcx_store_prepared_free(p);
    return rc;
}

int lcx_store_append(lcx_store *s, const lcx_chunk *c, int n, uint32_t *first_id)
{
    if (!s || n < 0 || (n && !c)) return LCX_EINVAL;
    if (n >= LCX_BATCH_MAX) return LCX_ELIMIT;
    if (n == 0) {
        if (first_id) *first_id = next_id(s);
        return 0;
    }
    uint64_t payload = 0;
    int rc = check_batch(s, c, n, &payload);
    if (rc) return rc;
    if (s->text_recs && n >= PAR_MIN) return append_overlapped(s, c, n, payload, first_id);
    /* small batches (and other embedders' records, which hold the rows): prepare off-lock,
     * so concurrent appends embed in parallel, then commit */
    lcx_store_prepared *p = NULL;
    if (!(rc = lcx_store_prepare(s, c, n, &p))) rc = lcx_store_commit(s, p, first_id);
    lcx_store_prepared_free(p);
    return rc;
}

int lcx_store_delete_path(lcx_store *s, const char *path, size_t path_len)
{
    if (!s || (!path && path_len)) return LCX_EINVAL;
    lcx__wlock_drained(s);
    int rc = 0;
    if (s->broken) { rc = LCX_ESTATE; goto unlock; }
    /* meta only changes under wmu, which we hold: read it without the rwlock */
    uint32_t n = s->ix->n_docs, k = 0, cap = 0;
    uint32_t *ids = NULL;
    for (uint32_t i = 0; i < n; i++) {
        const meta *m = &s->m[i];
        if (m->path_len != path_len || lcx__index_is_deleted(s->ix, i)) continue;
        if (path_len && memcmp(m->path, path, path_len)) continue;
        if (k == cap) {
            cap = cap ? cap * 2 : 64;
            uint32_t *ni = realloc(ids, cap * sizeof *ni);
            if (!ni) { free(ids); rc = LCX_ENOMEM; goto unlock; }
            ids = ni;
        }
        ids[k++] = i;
    }
    if (!k) goto unlock;
    if ((uint64_t)k * 4 > LCX_REC_MAX) { free(ids); rc = LCX_ELIMIT; goto unlock; }
    lcx_rec_hdr h = {LCX_REC_MAGIC, LCX_REC_TOMB, {0}, k * 4, k, 0, 0};
    h.crc = lcx__crc32c(lcx__crc32c(0, &h, 16), ids, (size_t)k * 4);
    char *rec = malloc(sizeof h + (size_t)k * 4);
    if (!rec) { free(ids); rc = LCX_ENOMEM; goto unlock; }
    memcpy(rec, &h, sizeof h);
    memcpy(rec + sizeof h, ids, (size_t)k * 4);
    uint64_t at = s->log_end;
    rc = lcx__write_all(s->fd, rec, sizeof h + (size_t)k * 4, at);
    if (!rc && lcx__fdatasync(s->fd) < 0) rc = lcx__eio(errno);
    free(rec);
    if (rc) {
        if (ftruncate(s->fd, (off_t)at) < 0) s->broken = 1;
        free(ids);
        goto unlock;
    }
    s->log_end = at + sizeof h + (size_t)k * 4;
    s->last_rec_off = at;
    s->last_rec_crc = h.crc;
    lock_w(s);
    for (uint32_t i = 0; i < k; i++) lcx_index_remove(s->ix, ids[i]);
    unlock_rw(s);
    s->tombs_since_snap += k;
    free(ids);
    rc = (int)(k > INT32_MAX ? INT32_MAX : k);
unlock:
    pthread_mutex_unlock(&s->wmu);
    return rc;
}

