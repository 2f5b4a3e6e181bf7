/* Opening a store's files (lcx__store_load, called by lcx_store_open): the exclusive
 * flock, a new log's header, the snapshot (snapshot.c lcx__snap_load), the replay of the
 * records after it (big batches tokenized and embedded on several threads) and the cut of
 * a torn tail (log.c item 6).
 *
 * One handle per store: two open handles (two processes, or two in one process) on the same
 * directory would not be coordinated and could corrupt it (interleaved appends; an open can
 * truncate what it takes for a torn tail while the other handle is mid-append), so open
 * takes an exclusive flock on the log and a second open fails with LCX_EEXIST (after
 * LOCK_WAIT_MS: see take_lock). The lock dies with the process, so a crash never leaves a
 * store locked.
 *
 * Locks: none. It runs inside lcx_store_open, before the handle is shared, and the
 * replay threads only read the index (lcx__index_resolve) while the opening thread waits.
 */
#include "store/store_impl.h"
#include "store/store_int.h"
#include "embed/embed.h"
#include "index/index.h"
#include "store/store_fmt.h"
#include "util/util.h"
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static uint64_t new_uuid(void)
{
    uint64_t u = 0;
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        if (read(fd, &u, sizeof u) != (ssize_t)sizeof u) u = 0;
        close(fd);
    }
    if (!u) {
        uint64_t t = lcx__now_ns() ^ ((uint64_t)getpid() << 32);
        u = lcx__hash64(&t, sizeof t, (uint64_t)time(NULL));
    }
    return u ? u : 1;
}

/* ------------------------------------------------------------------ replay */
typedef struct {
    lcx_store *s;
    lcx__prep prep;
    float *tmp;              /* (dim) embedding of a TEXT record's chunk */
    uint8_t *row;            /* (dim) its u8 row */
    int copy_text;           /* the log is mapped for this replay only: the index copies the texts */
} replay_ctx;

/* row/scale: the chunk's embedding (stored in a BATCH record, recomputed for TEXT) */
static int replay_commit(const replay_ctx *c, const lcx__rec_item *it, const lcx__doc_terms *dt, const uint8_t *row,
                         float scale)
{
    lcx_store *s = c->s;
    lcx_rec_chunk fx;
    memcpy(&fx, it->fx, sizeof fx);
    int rc = lcx__store_meta_reserve(s, s->ix->n_docs + 1);
    if (rc) return rc;
    uint32_t id;
    if ((rc = lcx__index_commit(s->ix, it->text, fx.text_len, c->copy_text, row, scale, dt, &id))) return rc;
    meta *m = &s->m[id];
    m->tok_start = fx.tok_start;
    m->tok_end = fx.tok_end;
    m->layer = fx.layer;
    m->round = fx.round;
    m->score = fx.score;
    m->line_start = fx.line_start;
    m->line_end = fx.line_end;
    m->file_type = fx.file_type;
    m->text_crc = lcx__crc32c(0, it->text, fx.text_len);   /* the record's crc covered it just now */
    m->path_len = fx.path_len;
    m->path = lcx__path_store(s, it->path, fx.path_len);
    if (fx.path_len && !m->path) return LCX_ENOMEM;
    return 0;
}

static int replay_item(void *ud, const lcx__rec_item *it)
{
    replay_ctx *c = ud;
    lcx_rec_chunk fx;
    memcpy(&fx, it->fx, sizeof fx);
    const uint8_t *row = it->vec;
    float scale = fx.vscale;
    int rc;
    if (row) {
        rc = lcx__prep_text(&c->prep, it->text, fx.text_len);
    } else {   /* TEXT record: the embedding is a pure function of the text (fingerprint-checked) */
        rc = lcx__prep_embed(&c->prep, c->s->emb, it->text, fx.text_len, c->tmp);
        if (rc >= 0) lcx__quant_row_u8(c->tmp, c->s->dim, c->row, &scale);
        row = c->row;
    }
    if (rc < 0) return rc;
    lcx__doc_terms dt = {c->prep.dl, c->prep.nt, c->prep.t, c->prep.pool};
    return replay_commit(c, it, &dt, row, scale);
}

/* Large batch records are tokenized on several threads (replay is otherwise one
 * tokenization per chunk on one core: ~45 µs each), then committed in order. */
typedef struct {
    lcx__rec_item *items;
    uint32_t n, cap;
} item_list;

static int collect_item(void *ud, const lcx__rec_item *it)
{
    item_list *l = ud;
    if (l->n == l->cap) return LCX_ENOMEM;   /* sized from the record header: cannot happen */
    l->items[l->n++] = *it;
    return 0;
}

typedef struct {
    const lcx_index *ix;
    const lcx_embedder *emb;
    const lcx__rec_item *items;
    lcx__doc_terms **dt;
    uint8_t *rows;           /* TEXT record: (n, dim) recomputed u8 rows, else NULL */
    float *sc;               /* (n) their scales */
    uint32_t dim;
    uint32_t a, b;
    int rc;
} rwork;

static void *rwork_run(void *p)
{
    rwork *w = p;
    lcx__prep pp = {0};
    float *tmp = w->rows ? malloc((size_t)w->dim * sizeof *tmp) : NULL;   /* (dim) */
    if (w->rows && !tmp) { w->rc = LCX_ENOMEM; return NULL; }
    for (uint32_t i = w->a; i < w->b; i++) {
        lcx_rec_chunk fx;
        memcpy(&fx, w->items[i].fx, sizeof fx);
        int rc;
        if (w->rows) {
            rc = lcx__prep_embed(&pp, w->emb, w->items[i].text, fx.text_len, tmp);
            if (rc >= 0) lcx__quant_row_u8(tmp, w->dim, w->rows + (size_t)i * w->dim, &w->sc[i]);
        } else {
            rc = lcx__prep_text(&pp, w->items[i].text, fx.text_len);
        }
        if (rc < 0 || (rc = lcx__prep_finish(&pp, &w->dt[i]))) {
            w->rc = rc < 0 ? rc : LCX_ENOMEM;
            break;
        }
        lcx__index_resolve(w->ix, w->dt[i]);   /* the committing thread waits meanwhile */
    }
    lcx__prep_free(&pp);
    free(tmp);
    return NULL;
}

static int replay_batch_parallel(replay_ctx *c, const char *payload, uint32_t len, uint32_t n, int text_rec)
{
    lcx_store *s = c->s;
    item_list l = {calloc(n, sizeof(lcx__rec_item)), 0, n};
    lcx__doc_terms **dt = calloc(n, sizeof *dt);
    uint8_t *rows = text_rec ? malloc((size_t)n * s->dim) : NULL;   /* (n, dim) */
    float *sc = text_rec ? malloc((size_t)n * sizeof *sc) : NULL;    /* (n) */
    int rc = LCX_ENOMEM;
    if (!l.items || !dt || (text_rec && (!rows || !sc))) goto out;
    if ((rc = lcx__parse_batch(payload, len, n, text_rec ? 0 : s->dim, collect_item, &l))) goto out;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    int nt = (int)(cpus < 1 ? 1 : cpus > PAR_MAX_THREADS ? PAR_MAX_THREADS : cpus);
    rwork w[PAR_MAX_THREADS];
    pthread_t th[PAR_MAX_THREADS];
    int started[PAR_MAX_THREADS] = {0};
    for (int t = 0; t < nt; t++)
        w[t] = (rwork){s->ix, s->emb, l.items, dt, rows, sc, s->dim, (uint32_t)((uint64_t)n * t / nt),
                       (uint32_t)((uint64_t)n * (t + 1) / nt), 0};
    for (int t = 1; t < nt; t++) started[t] = pthread_create(&th[t], NULL, rwork_run, &w[t]) == 0;
    rwork_run(&w[0]);
    rc = w[0].rc;
    for (int t = 1; t < nt; t++) {
        if (started[t]) pthread_join(th[t], NULL);
        else rwork_run(&w[t]);
        if (!rc) rc = w[t].rc;
    }
    for (uint32_t i = 0; i < n && !rc; i++) {
        lcx_rec_chunk fx;
        memcpy(&fx, l.items[i].fx, sizeof fx);
        rc = replay_commit(c, &l.items[i], dt[i], rows ? rows + (size_t)i * s->dim : l.items[i].vec,
                           rows ? sc[i] : fx.vscale);
    }
out:
    if (dt)
        for (uint32_t i = 0; i < n; i++) free(dt[i]);
    free(dt);
    free(l.items);
    free(rows);
    free(sc);
    return rc;
}

static int replay_rec(void *ud, const lcx_rec_hdr *h, const char *payload, uint64_t off)
{
    replay_ctx *c = ud;
    if (h->type != LCX_REC_TOMB) {
        int text_rec = h->type == LCX_REC_TEXT;
        if (h->n >= PAR_MIN) return replay_batch_parallel(c, payload, h->len, h->n, text_rec);
        return lcx__parse_batch(payload, h->len, h->n, text_rec ? 0 : c->s->dim, replay_item, c);
    }
    for (uint32_t i = 0; i < h->n; i++) {
        uint32_t id;
        memcpy(&id, payload + 4 * (size_t)i, 4);
        lcx_index_remove(c->s->ix, id);
        c->s->tombs_since_snap++;
    }
    return 0;
}

/* ------------------------------------------------------------------ open */
/* The exclusive flock that makes this the store's only handle: 0, 1 when another handle
 * holds it, -1 on other errors. A lock still held is retried for up to LOCK_WAIT_MS before
 * the store is called busy, because a process that was just killed can keep its lock a
 * little past its death: on the device machine's Linux 6.18, /proc/locks still listed a
 * kill -9'd server's flock right after waitpid had returned, and it was gone 10 ms later
 * (the kernel may finish closing a dead process's files from a work queue). A restart at
 * that moment (test_svc_crash, test_scope_index's crash reload) failed with "in use". */
#define LOCK_WAIT_MS 500
static int take_lock(int fd)
{
    for (int waited = 0, step = 1;; waited += step, step = step < 32 ? step * 2 : step) {
        if (flock(fd, LOCK_EX | LOCK_NB) == 0) return 0;
        if (errno != EWOULDBLOCK && errno != EINTR) return -1;
        if (waited >= LOCK_WAIT_MS) return 1;
        nanosleep(&(struct timespec){0, step * 1000000L}, NULL);
    }
}

int lcx__store_load(lcx_store *s)
{
    char msg[160];
    char *lp = lcx__path_join(s->dir, LCX_LOG_NAME);
    if (!lp) return LCX_ENOMEM;
    int fd = open(lp, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    free(lp);
    if (fd < 0) return lcx__eio(errno);
    /* one handle per store, across processes too (longctx-svc and `longctx mcp` share the
     * default data dir): a second open is refused instead of corrupting the log */
    int busy = take_lock(fd);
    if (busy) {
        close(fd);
        return busy > 0 ? LCX_EEXIST : LCX_EIO;
    }
    s->fd = fd;
    struct stat st;
    if (fstat(fd, &st) < 0) return LCX_EIO;
    if ((uint64_t)st.st_size < sizeof(lcx_log_hdr)) {
        /* new store (or a crash while creating it, before anything was acknowledged) */
        lcx_log_hdr h;
        memset(&h, 0, sizeof h);
        memcpy(h.magic, LCX_LOG_MAGIC, 8);
        h.version = LCX_LOG_VERSION;
        s->log_ver = h.version;
        h.hdr_size = sizeof h;
        h.dim = s->dim;
        h.vec_format = LCX_VEC_U8;
        h.uuid = new_uuid();
        h.fp_len = (uint32_t)strlen(s->fp);
        memcpy(h.fp, s->fp, h.fp_len);
        h.crc = lcx__crc32c(0, &h, 252);
        int wrc = ftruncate(fd, 0) < 0 ? lcx__eio(errno) : lcx__write_all(fd, &h, sizeof h, 0);
        if (!wrc && fsync(fd) < 0) wrc = lcx__eio(errno);
        if (!wrc) wrc = lcx__fsync_dir(s->dir);
        if (wrc) return wrc;   /* LCX_ENOSPC on a full disk: the caller removes the new store */
        s->uuid = h.uuid;
        s->log_end = sizeof h;
        return 0;
    }
    lcx_log_hdr h;
    if (lcx__read_all(fd, &h, sizeof h, 0)) return LCX_EIO;
    int rc = lcx__check_log_hdr(&h, msg, sizeof msg);
    if (rc) return rc;
    if (h.dim != s->dim || h.fp_len != strlen(s->fp) || memcmp(h.fp, s->fp, h.fp_len)) return LCX_EMISMATCH;
    s->uuid = h.uuid;
    s->log_ver = h.version;
    uint64_t size = (uint64_t)st.st_size;
    /* replayed texts stay where they are: the replay reads the log through a log window
     * (lcx__lview_at), which the index then points into; a private mapping (and copies) only
     * when that fails */
    const char *lm = lcx__lview_at(s, 0, size);
    const int own_map = !lm;
    if (own_map && (lm = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0)) == MAP_FAILED) return LCX_EIO;
    uint64_t from = sizeof h;
    if (lcx__snap_load(s, size, lm, &from) != 0) {
        /* no usable snapshot: a fresh index, replay everything */
        from = sizeof h;
        lcx_index_free(s->ix);
        s->ix = NULL;
        if ((rc = lcx_index_new(s->emb, &s->ix))) goto out;
    }
    replay_ctx rc_ = {s, {0}, malloc((size_t)s->dim * sizeof(float)), malloc(s->dim), own_map};
    lcx__scan_res r;
    if (!rc_.tmp || !rc_.row) rc = LCX_ENOMEM;
    else rc = lcx__scan_log(lm, size, from, s->dim, s->log_ver, s->ix->n_docs, replay_rec, &rc_, &r, msg, sizeof msg);
    lcx__prep_free(&rc_.prep);
    free(rc_.tmp);
    free(rc_.row);
    if (rc) goto out;
    s->log_end = r.good_end;
    if (r.n_recs) {
        s->last_rec_off = r.last_off;
        s->last_rec_crc = r.last_crc;
    } else if (from > sizeof h) {
        lcx_snap_hdr sh;
        memcpy(&sh, s->map, sizeof sh);
        s->last_rec_off = sh.last_rec_off;
        s->last_rec_crc = sh.last_rec_crc;
    }
    if (r.torn_bytes) {
        /* torn tail from a crash: cut it off so the next append starts on a boundary */
        if (ftruncate(fd, (off_t)r.good_end) < 0 || fsync(fd) < 0) rc = LCX_EIO;
    }
out:
    if (own_map) munmap((void *)lm, size);
    return rc;
}

