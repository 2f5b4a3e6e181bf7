/* The neural channel (lcx.h "Neural channel"; docs/neural.md "In the product"): a second
 * vector family per store, computed in the background by a slow embedder, persisted in the
 * store directory as neural.vec and fused into lcx_store_search.
 *
 * neural.vec is derived data (every row is a function of a chunk's text and the model):
 * it is never fsync'd, a torn or failing tail is cut at open, a row whose chunk is gone
 * or whose text checksum differs is dropped, and whatever is missing is re-derived by the
 * worker. Format (little-endian; docs/storage-format.md "neural.vec"):
 *
 *   header (256 bytes): "LCXNNV01", u32 version 1, u32 dim, char fp[224] (the embedder's
 *                        fingerprint, NUL padded), u32 reserved[3], u32 crc32c of bytes 0..251
 *   record:             u32 magic 0x4E4E5652 ("RVNN"), u32 n (1..4096), u32 dim,
 *                        u32 crc32c of the payload;
 *                        payload: n × (u32 chunk id, u32 crc32c of its text), n × dim f32
 *
 * Threads: one worker per lcx_nnq walks the attached stores (q->mu guards the list and
 * each channel's flags). The worker copies a batch's texts while it holds the channel
 * (busy), embeds the copies without it (embedding: a niced thread on a loaded host may take
 * seconds, and a store's close, e.g. an LRU hibernation inside a request, must not wait
 * for that), then holds it again to write and publish; a store closed meanwhile leaves
 * the channel to the worker, which drops the rows (they are re-derived on the next open)
 * and frees it. A channel's rows are guarded by its own rwlock, taken after the store's rw. */
#define _GNU_SOURCE 1   /* syscall */
#include "store/store_impl.h"
#include "util/util.h"
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define NNV_MAGIC "LCXNNV01"
#define NNV_VERSION 1u
#define NNV_HDR 256
#define NNV_FP 224
#define NNV_REC_MAGIC 0x4E4E5652u
#define NNV_REC_MAX 4096         /* rows per record (the replay's bound) */
#define NNV_BATCH_MAX 256        /* rows per embed call */
#define NNV_POLL_MS 50          /* the worker looks for new chunks this often when idle */
#define NNV_FAIL_BACKOFF_MS 1000 /* a store whose embed call failed waits this long */
#define NNV_WRITE_QUIET_MS 200   /* a store that grew this recently means writes are arriving */
#define NNV_WRITE_GRACE_MS 1000  /* a burst of writes after a quiet spell has the machine alone this long */
#define NNV_WRITE_DUTY 10        /* ... then the worker keeps to 1/10 of the wall time while they last */
#define NNV_PAUSE_MAX_MS 5000
#define RRF_K 60.0f             /* as LCX_FUSE_RRF */
#define RERANK_SLICE 4          /* documents per cross-encoder call (deadline checked between) */
#define RERANK_PROBE 16         /* a reranker estimated too slow for the deadline is skipped,
                                 * but every 16th search tries it again (the load may have gone) */

typedef struct {
    char magic[8];
    uint32_t version, dim;
    char fp[NNV_FP];
    uint32_t reserved[3];
    uint32_t crc;
} nnv_hdr;
_Static_assert(sizeof(nnv_hdr) == NNV_HDR, "neural.vec header is 256 bytes");

typedef struct {
    uint32_t magic, n, dim, crc;
} nnv_rec;

struct lcx__nnchan {
    lcx_nnq *q;
    lcx_store *s;
    struct lcx__nnchan *next, *prev;   /* q's list (q->mu) */
    int busy;                          /* the worker or a drain is using it (q->mu) */
    int embedding;                     /* the worker embeds copies of its texts: the store is not
                                        * touched, so a close does not wait (q->mu) */
    int closed;                        /* detached while embedding: the worker frees it (q->mu) */
    int draining;                      /* lcx_nnq_drain owns it: the worker skips it (q->mu) */
    double fail_until;                 /* ms: back off after a failed embed (q->mu) */
    pthread_rwlock_t rw;               /* vec, have, n_have, cap */
    float *vec;                        /* (cap, dim) */
    uint8_t *have;                     /* (cap) */
    uint32_t cap, n_have;
    uint32_t scanned;                  /* ids below were looked at by the worker (busy holder only) */
    uint32_t pending;                  /* chunks without a vector at the last look (q->mu) */
    uint32_t last_nd;                  /* ids at the last look (busy holder) */
    int fd;
    uint64_t end;                      /* neural.vec bytes written */
};

struct lcx_nnq {
    const lcx_embedder *emb;           /* the worker's (and drains') */
    const lcx_embedder *qemb;          /* queries' */
    int dim;
    char fp[NNV_FP];
    lcx_nnq_opts o;
    pthread_mutex_t mu;
    pthread_cond_t cv;                 /* wakes the worker (stop) */
    pthread_cond_t dcv;                /* a channel stopped being busy */
    struct lcx__nnchan *head, *tail;
    uint32_t n_chan;
    pthread_t th;
    bool running, stop;
    uint64_t done, errors, rerank_calls, rerank_overruns;
    double rr_ms_doc;                  /* cross-encoder ms per document, recent (EWMA) */
    uint32_t rr_skipped;               /* searches in a row that skipped it as too slow */
    double last_growth;                /* ms: when the worker last saw a store grow (q->mu) */
    double hold_until;                 /* ms: no batch starts before this while writes arrive (q->mu) */
    double rate;
    char last_error[160];
};

static _Thread_local char open_detail[1536];

const char *lcx_store_open_detail(void) { return open_detail; }
void lcx__store_open_detail_clear(void) { open_detail[0] = 0; }

/* ------------------------------------------------------------------ rows */

static int chan_reserve(struct lcx__nnchan *ch, uint32_t need)
{
    if (need <= ch->cap) return 0;
    uint32_t nc = ch->cap ? ch->cap : 256;
    while (nc < need) nc = nc > UINT32_MAX / 2 ? need : nc * 2;
    const size_t D = (size_t)ch->q->dim;
    float *v = realloc(ch->vec, (size_t)nc * D * sizeof *v);
    if (!v) return LCX_ENOMEM;
    ch->vec = v;
    uint8_t *h = realloc(ch->have, nc);
    if (!h) return LCX_ENOMEM;
    memset(h + ch->cap, 0, nc - ch->cap);
    ch->have = h;
    ch->cap = nc;
    return 0;
}

/* Publishes rows for ids (caller holds ch->rw exclusively). */
static int chan_put(struct lcx__nnchan *ch, const uint32_t *ids, const float *rows, uint32_t n)
{
    const size_t D = (size_t)ch->q->dim;
    for (uint32_t i = 0; i < n; i++) {
        int rc = chan_reserve(ch, ids[i] + 1);
        if (rc) return rc;
        memcpy(ch->vec + (size_t)ids[i] * D, rows + (size_t)i * D, D * sizeof *rows);
        if (!ch->have[ids[i]]) ch->have[ids[i]] = 1, ch->n_have++;
    }
    return 0;
}

/* ------------------------------------------------------------------ neural.vec */

static void hdr_fill(nnv_hdr *h, const lcx_nnq *q)
{
    memset(h, 0, sizeof *h);
    memcpy(h->magic, NNV_MAGIC, 8);
    h->version = NNV_VERSION;
    h->dim = (uint32_t)q->dim;
    snprintf(h->fp, sizeof h->fp, "%s", q->fp);
    h->crc = lcx__crc32c(0, h, offsetof(nnv_hdr, crc));
}

static int file_reset(struct lcx__nnchan *ch)
{
    nnv_hdr h;
    hdr_fill(&h, ch->q);
    if (ftruncate(ch->fd, 0) < 0) return LCX_EIO;
    int rc = lcx__write_all(ch->fd, &h, sizeof h, 0);
    if (rc) return rc;
    ch->end = sizeof h;
    return 0;
}

/* Reads the records after the header; cuts the file at the first one that fails. */
static int file_replay(struct lcx__nnchan *ch, uint64_t size)
{
    lcx_store *s = ch->s;
    const uint32_t D = (uint32_t)ch->q->dim;
    uint64_t off = NNV_HDR;
    char *buf = NULL;
    size_t bcap = 0;
    int rc = 0;
    while (off + sizeof(nnv_rec) <= size) {
        nnv_rec r;
        if (lcx__read_all(ch->fd, &r, sizeof r, off)) break;
        if (r.magic != NNV_REC_MAGIC || r.n == 0 || r.n > NNV_REC_MAX || r.dim != D) break;
        const size_t pl = (size_t)r.n * (8 + (size_t)D * 4);
        if (off + sizeof r + pl > size) break;
        if (pl > bcap) {
            char *nb = realloc(buf, pl);
            if (!nb) { rc = LCX_ENOMEM; break; }
            buf = nb, bcap = pl;
        }
        if (lcx__read_all(ch->fd, buf, pl, off + sizeof r)) break;
        if (lcx__crc32c(0, buf, pl) != r.crc) break;
        const float *rows = (const float *)(buf + (size_t)r.n * 8);
        for (uint32_t i = 0; i < r.n; i++) {
            uint32_t id, tc;
            memcpy(&id, buf + (size_t)i * 8, 4);
            memcpy(&tc, buf + (size_t)i * 8 + 4, 4);
            /* a row counts only for the chunk it was computed from */
            if (id >= s->ix->n_docs || lcx__index_is_deleted(s->ix, id) || s->m[id].text_crc != tc) continue;
            if ((rc = chan_put(ch, &id, rows + (size_t)i * D, 1))) break;
        }
        if (rc) break;
        off += sizeof r + pl;
    }
    free(buf);
    if (rc) return rc;
    if (off < size && ftruncate(ch->fd, (off_t)off) < 0) return LCX_EIO;
    ch->end = off;
    return 0;
}

static int chan_open_file(struct lcx__nnchan *ch, bool reset)
{
    lcx_store *s = ch->s;
    char path[4200];
    snprintf(path, sizeof path, "%s/neural.vec", s->dir);
    ch->fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (ch->fd < 0) return LCX_EIO;
    struct stat st;
    if (fstat(ch->fd, &st) < 0) return LCX_EIO;
    nnv_hdr h;
    if ((uint64_t)st.st_size < sizeof h || lcx__read_all(ch->fd, &h, sizeof h, 0) ||
        memcmp(h.magic, NNV_MAGIC, 8) || h.crc != lcx__crc32c(0, &h, offsetof(nnv_hdr, crc)) ||
        h.version != NNV_VERSION)
        return file_reset(ch);   /* absent, empty or unreadable: derived data, start over */
    h.fp[NNV_FP - 1] = 0;
    if (strcmp(h.fp, ch->q->fp) || h.dim != (uint32_t)ch->q->dim) {
        if (reset) return file_reset(ch);
        /* the directory is capped so the sentence always ends with the way out */
        snprintf(open_detail, sizeof open_detail,
                 "store %.400s was built with neural embedder %.223s, the configured one is %.223s: never mixed; "
                 "run `longctx reembed %.400s` (with the new --embed-model) to rebuild its neural vectors",
                 s->dir, h.fp, ch->q->fp, s->dir);
        return LCX_EMISMATCH;
    }
    return file_replay(ch, (uint64_t)st.st_size);
}

/* ------------------------------------------------------------------ attach / detach */

int lcx__nn_attach(lcx_store *s, lcx_nnq *q, bool reset)
{
    struct lcx__nnchan *ch = calloc(1, sizeof *ch);
    if (!ch) return LCX_ENOMEM;
    ch->q = q;
    ch->s = s;
    ch->fd = -1;
    pthread_rwlock_init(&ch->rw, NULL);
    int rc = q->emb ? chan_open_file(ch, reset) : 0;
    if (rc) {
        if (ch->fd >= 0) close(ch->fd);
        pthread_rwlock_destroy(&ch->rw);
        free(ch->vec);
        free(ch->have);
        free(ch);
        return rc;
    }
    uint32_t nd = s->ix->n_docs, nl = s->ix->n_live;
    ch->pending = nl > ch->n_have ? nl - ch->n_have : 0;
    (void)nd;
    pthread_mutex_lock(&q->mu);
    ch->prev = q->tail;
    if (q->tail) q->tail->next = ch;
    else q->head = ch;
    q->tail = ch;
    q->n_chan++;
    pthread_cond_signal(&q->cv);
    pthread_mutex_unlock(&q->mu);
    s->nn = ch;
    return 0;
}

static void unlink_chan(lcx_nnq *q, struct lcx__nnchan *ch)
{
    if (ch->prev) ch->prev->next = ch->next;
    else q->head = ch->next;
    if (ch->next) ch->next->prev = ch->prev;
    else q->tail = ch->prev;
    ch->next = ch->prev = NULL;
}

static void chan_free(struct lcx__nnchan *ch)
{
    if (ch->fd >= 0) close(ch->fd);
    pthread_rwlock_destroy(&ch->rw);
    free(ch->vec);
    free(ch->have);
    free(ch);
}

void lcx__nn_detach(lcx_store *s)
{
    struct lcx__nnchan *ch = s->nn;
    if (!ch) return;
    lcx_nnq *q = ch->q;
    pthread_mutex_lock(&q->mu);
    while (ch->busy) pthread_cond_wait(&q->dcv, &q->mu);
    unlink_chan(q, ch);
    q->n_chan--;
    const bool orphan = ch->embedding;
    if (orphan) ch->closed = 1, ch->s = NULL;
    pthread_mutex_unlock(&q->mu);
    s->nn = NULL;
    if (!orphan) chan_free(ch);
}

size_t lcx__nn_mem_bytes(lcx_store *s)
{
    if (!s || !s->nn) return 0;
    pthread_rwlock_rdlock(&s->nn->rw);
    size_t n = sizeof *s->nn + (size_t)s->nn->cap * ((size_t)s->nn->q->dim * sizeof(float) + 1);
    pthread_rwlock_unlock(&s->nn->rw);
    return n;
}

uint32_t lcx_store_nn_ready(lcx_store *s)
{
    if (!s || !s->nn) return 0;
    pthread_rwlock_rdlock(&s->nn->rw);
    uint32_t n = s->nn->n_have;
    pthread_rwlock_unlock(&s->nn->rw);
    return n;
}

/* ------------------------------------------------------------------ the work */

static void note_error(lcx_nnq *q, const char *fmt, int rc)
{
    pthread_mutex_lock(&q->mu);
    q->errors++;
    snprintf(q->last_error, sizeof q->last_error, fmt, lcx_strerror(rc));
    pthread_mutex_unlock(&q->mu);
}

/* Embeds up to one batch of the channel's chunks without a vector. Returns how many were
 * embedded (0: nothing pending) or a negative LCX_E*. Caller owns ch->busy. worker: let go
 * of the channel while embedding (see the top); *gone is then set when the store closed
 * meanwhile (the channel was freed: the caller must not touch it). */
static int chan_step(struct lcx__nnchan *ch, bool worker, bool *gone)
{
    lcx_nnq *q = ch->q;
    lcx_store *s = ch->s;
    const int B = q->o.batch;
    const size_t D = (size_t)q->dim;
    uint32_t ids[NNV_BATCH_MAX];
    uint32_t tcrc[NNV_BATCH_MAX];
    const char *texts[NNV_BATCH_MAX];
    size_t lens[NNV_BATCH_MAX];
    int n = 0;
    *gone = false;
    lock_r(s);
    const uint32_t nd = s->ix->n_docs, nl = s->ix->n_live;
    pthread_rwlock_rdlock(&ch->rw);
    uint32_t i = ch->scanned;
    size_t bytes = 0;
    for (; i < nd && n < B; i++) {
        if ((i < ch->cap && ch->have[i]) || lcx__index_is_deleted(s->ix, i)) continue;
        ids[n] = i;
        tcrc[n] = s->m[i].text_crc;
        texts[n] = s->ix->text[i];
        lens[n] = s->ix->text_len[i];
        bytes += lens[n];
        n++;
    }
    const uint32_t have = ch->n_have;
    pthread_rwlock_unlock(&ch->rw);
    char *copy = n ? malloc(bytes + 1) : NULL;
    if (copy) {   /* the copies are what the unlocked embed reads */
        size_t o = 0;
        for (int k = 0; k < n; k++) {
            memcpy(copy + o, texts[k], lens[k]);
            texts[k] = copy + o;
            o += lens[k];
        }
    }
    unlock_rw(s);
    if (!n) {
        ch->scanned = i;
        pthread_mutex_lock(&q->mu);
        ch->pending = 0;
        pthread_mutex_unlock(&q->mu);
        return 0;
    }
    float *rows = malloc((size_t)n * D * sizeof *rows);
    const size_t pl = (size_t)n * (8 + D * 4);
    char *rec = malloc(sizeof(nnv_rec) + pl);
    if (!rows || !rec || !copy) { free(rows); free(rec); free(copy); return LCX_ENOMEM; }
    if (worker) {
        pthread_mutex_lock(&q->mu);
        ch->busy = 0;
        ch->embedding = 1;
        pthread_cond_broadcast(&q->dcv);
        pthread_mutex_unlock(&q->mu);
    }
    double t0 = lcx__now_ms();
    int rc = lcx_embed(q->emb, texts, lens, n, rows);
    double dt = lcx__now_ms() - t0;
    free(copy);
    if (worker) {
        pthread_mutex_lock(&q->mu);
        ch->embedding = 0;
        if (ch->closed) {
            pthread_mutex_unlock(&q->mu);
            chan_free(ch);
            free(rows);
            free(rec);
            *gone = true;
            return rc < 0 ? rc : 0;
        }
        ch->busy = 1;
        pthread_mutex_unlock(&q->mu);
    }
    if (rc < 0) { free(rows); free(rec); return rc; }
    /* persist (best effort: a failed write only means re-deriving these rows later) */
    nnv_rec *r = (nnv_rec *)rec;
    r->magic = NNV_REC_MAGIC;
    r->n = (uint32_t)n;
    r->dim = (uint32_t)D;
    char *p = rec + sizeof *r;
    for (int k = 0; k < n; k++) {
        memcpy(p + (size_t)k * 8, &ids[k], 4);
        memcpy(p + (size_t)k * 8 + 4, &tcrc[k], 4);
    }
    memcpy(p + (size_t)n * 8, rows, (size_t)n * D * sizeof *rows);
    r->crc = lcx__crc32c(0, p, pl);
    if (lcx__write_all(ch->fd, rec, sizeof *r + pl, ch->end) == 0) ch->end += sizeof *r + pl;
    else note_error(q, "writing neural.vec: %s (the rows stay in memory)", LCX_EIO);
    free(rec);
    pthread_rwlock_wrlock(&ch->rw);
    rc = chan_put(ch, ids, rows, (uint32_t)n);
    pthread_rwlock_unlock(&ch->rw);
    free(rows);
    if (rc < 0) return rc;
    ch->scanned = ids[n - 1] + 1;
    pthread_mutex_lock(&q->mu);
    q->done += (uint64_t)n;
    const double rate = dt > 0 ? n * 1000.0 / dt : 0;
    if (rate > 0) q->rate = q->rate > 0 ? 0.8 * q->rate + 0.2 * rate : rate;
    const uint32_t got = have + (uint32_t)n;
    ch->pending = nl > got ? nl - got : 0;
    pthread_mutex_unlock(&q->mu);
    return n;
}

static void *worker(void *ud)
{
    lcx_nnq *q = ud;
    /* Writes stay fast: the worker thread runs at nice 19 (CFS weight 15 against 1024 for
     * a normal thread: ~1.5 % of a core that ingest also wants, all of an idle one).
     * SCHED_IDLE (weight 3) starved it on a shared host (docs/benchmarks/neural.md). Its
     * model's pool threads (--nn-threads > 1) keep the normal priority. Best effort. */
    if (setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), 19) != 0) {}
    pthread_mutex_lock(&q->mu);
    while (!q->stop) {
        bool any = false;
        const double now = lcx__now_ms();
        for (struct lcx__nnchan *ch = q->head; ch && !q->stop;) {
            if (ch->busy || ch->embedding || ch->draining || ch->fail_until > now) { ch = ch->next; continue; }
            ch->busy = 1;
            pthread_mutex_unlock(&q->mu);
            /* Writes stay fast: the niced thread yields the CPU, but not its SMT sibling's
             * execution units, the caches or the memory bus (measured: HTTP ingest 0.72-0.81×
             * with batches started whenever a core looked idle; docs/benchmarks/neural.md).
             * So while writes arrive (a store grew in the last 200 ms) a burst first gets the
             * machine alone for a second, then the worker keeps to a tenth of the wall time. */
            lock_r(ch->s);
            const uint32_t nd = ch->s->ix->n_docs;
            unlock_rw(ch->s);
            pthread_mutex_lock(&q->mu);
            const double t0 = lcx__now_ms();
            if (nd != ch->last_nd) {
                if (t0 - q->last_growth >= NNV_WRITE_QUIET_MS && q->hold_until < t0 + NNV_WRITE_GRACE_MS)
                    q->hold_until = t0 + NNV_WRITE_GRACE_MS;
                ch->last_nd = nd;
                q->last_growth = t0;
            }
            const bool writing = t0 - q->last_growth < NNV_WRITE_QUIET_MS;
            if (writing && t0 < q->hold_until) {
                ch->busy = 0;
                pthread_cond_broadcast(&q->dcv);
                ch = ch->next;
                continue;
            }
            pthread_mutex_unlock(&q->mu);
            bool gone;
            int rc = chan_step(ch, true, &gone);
            const double took = lcx__now_ms() - t0;
            if (rc < 0) note_error(q, "embedding chunks: %s", rc);
            pthread_mutex_lock(&q->mu);
            if (gone) { any = true; break; }   /* the list may have changed: start over */
            struct lcx__nnchan *nx = ch->next;
            if (rc < 0) ch->fail_until = lcx__now_ms() + NNV_FAIL_BACKOFF_MS;
            if (rc > 0 && nx) {     /* round robin: a busy store goes to the back */
                unlink_chan(q, ch);
                ch->prev = q->tail;
                q->tail->next = ch;
                q->tail = ch;
            }
            ch->busy = 0;
            pthread_cond_broadcast(&q->dcv);
            if (rc > 0) {
                any = true;
                double p = took * (NNV_WRITE_DUTY - 1);
                if (p > NNV_PAUSE_MAX_MS) p = NNV_PAUSE_MAX_MS;
                q->hold_until = lcx__now_ms() + p;   /* applies only while writes arrive */
                break;
            }
            ch = nx;
        }
        if (any || q->stop) continue;
        double wait = NNV_POLL_MS;
        const double left = q->hold_until - lcx__now_ms();
        if (left > 0 && left < wait) wait = left;
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        long ns = ts.tv_nsec + (long)(wait * 1e6);
        ts.tv_sec += ns / 1000000000L;
        ts.tv_nsec = ns % 1000000000L;
        pthread_cond_timedwait(&q->cv, &q->mu, &ts);
    }
    pthread_mutex_unlock(&q->mu);
    return NULL;
}

int lcx_nnq_drain(lcx_nnq *q, lcx_store *s)
{
    if (!q || !s || !s->nn || s->nn->q != q) return LCX_EINVAL;
    if (!q->emb) return 0;
    struct lcx__nnchan *ch = s->nn;
    pthread_mutex_lock(&q->mu);
    while (ch->busy || ch->embedding) pthread_cond_wait(&q->dcv, &q->mu);
    ch->busy = 1;
    ch->draining = 1;
    pthread_mutex_unlock(&q->mu);
    ch->scanned = 0;
    int rc;
    bool gone;
    while ((rc = chan_step(ch, false, &gone)) > 0) {}
    pthread_mutex_lock(&q->mu);
    ch->busy = 0;
    ch->draining = 0;
    pthread_cond_broadcast(&q->dcv);
    pthread_mutex_unlock(&q->mu);
    return rc;
}

/* ------------------------------------------------------------------ the queue */

int lcx_nnq_new(const lcx_embedder *emb, const lcx_nnq_opts *o, lcx_nnq **out)
{
    if (out) *out = NULL;
    if ((!emb && !(o && o->rerank)) || !out) return LCX_EINVAL;
    const char *fp = emb ? lcx_embedder_fingerprint(emb) : "";
    if (strlen(fp) >= NNV_FP) return LCX_EINVAL;
    lcx_nnq *q = calloc(1, sizeof *q);
    if (!q) return LCX_ENOMEM;
    q->emb = emb;
    q->qemb = o && o->query_emb ? o->query_emb : emb;
    if (emb && q->qemb != emb &&
        (strcmp(lcx_embedder_fingerprint(q->qemb), fp) || lcx_embedder_dim(q->qemb) != lcx_embedder_dim(emb))) {
        free(q);
        return LCX_EINVAL;
    }
    q->dim = emb ? lcx_embedder_dim(emb) : 0;
    snprintf(q->fp, sizeof q->fp, "%s", fp);
    if (o) q->o = *o;
    if (!emb) q->o.no_worker = true;   /* rerank only: no rows, no neural.vec */
    if (q->o.batch <= 0) q->o.batch = 8;
    if (q->o.batch > NNV_BATCH_MAX) q->o.batch = NNV_BATCH_MAX;
    if (q->o.rerank_top <= 0) q->o.rerank_top = 16;
    if (q->o.rerank_top > 256) q->o.rerank_top = 256;
    if (!o) q->o.rerank_deadline_ms = 250;
    pthread_mutex_init(&q->mu, NULL);
    pthread_cond_init(&q->cv, NULL);
    pthread_cond_init(&q->dcv, NULL);
    if (!q->o.no_worker) {
        if (pthread_create(&q->th, NULL, worker, q) != 0) {
            lcx_nnq_free(q);
            return LCX_ENOMEM;
        }
        q->running = true;
    }
    *out = q;
    return 0;
}

void lcx_nnq_free(lcx_nnq *q)
{
    if (!q) return;
    if (q->running) {
        pthread_mutex_lock(&q->mu);
        q->stop = true;
        pthread_cond_broadcast(&q->cv);
        pthread_mutex_unlock(&q->mu);
        pthread_join(q->th, NULL);
    }
    pthread_mutex_destroy(&q->mu);
    pthread_cond_destroy(&q->cv);
    pthread_cond_destroy(&q->dcv);
    free(q);
}

void lcx_nnq_get_stats(lcx_nnq *q, lcx_nnq_stats *st)
{
    memset(st, 0, sizeof *st);
    if (!q) return;
    pthread_mutex_lock(&q->mu);
    if (q->emb)
        for (struct lcx__nnchan *ch = q->head; ch; ch = ch->next) st->backlog += ch->pending;
    st->done = q->done;
    st->errors = q->errors;
    st->stores = q->n_chan;
    st->rate_per_s = q->rate;
    st->rerank_calls = q->rerank_calls;
    st->rerank_overruns = q->rerank_overruns;
    snprintf(st->last_error, sizeof st->last_error, "%s", q->last_error);
    pthread_mutex_unlock(&q->mu);
}

/* ------------------------------------------------------------------ search */

typedef struct {
    uint32_t id;
    float rrf, dense, bm25, nn;
    int in_base;
} fused;

static int by_id(const void *a, const void *b)
{
    uint32_t x = ((const fused *)a)->id, y = ((const fused *)b)->id;
    return x < y ? -1 : x > y;
}

static int by_rrf(const void *a, const void *b)
{
    const fused *x = a, *y = b;
    if (x->rrf != y->rrf) return x->rrf > y->rrf ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

typedef struct { uint32_t id; float s; } cand;

/* Keeps the best k (score desc, id asc) of the neural rows: a sorted insertion list (k is
 * the prefilter, small). Caller holds the store's rw and ch->rw shared. */
static int nn_topk(lcx_store *s, struct lcx__nnchan *ch, const float *qv, cand *top, int k)
{
    const size_t D = (size_t)ch->q->dim;
    int n = 0;
    const uint32_t lim = ch->cap < s->ix->n_docs ? ch->cap : s->ix->n_docs;
    for (uint32_t i = 0; i < lim; i++) {
        if (!ch->have[i] || lcx__index_is_deleted(s->ix, i)) continue;
        float sc = lcx_dot_f32(qv, ch->vec + (size_t)i * D, D);
        if (n == k && sc <= top[n - 1].s) continue;
        int j = n < k ? n++ : k - 1;
        while (j > 0 && top[j - 1].s < sc) top[j] = top[j - 1], j--;
        top[j].id = i;
        top[j].s = sc;
    }
    return n;
}

static int cand_by_score(const void *a, const void *b)
{
    const cand *x = a, *y = b;
    if (x->s != y->s) return x->s > y->s ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

/* The cross-encoder over the best r of docs, in slices so the deadline is checked between
 * calls. true when it finished in time (order[0..r) = the new order). */
static bool rerank_run(lcx_nnq *q, const char *qt, size_t qlen, const char *const *docs, const size_t *lens,
                       int r, int *order)
{
    const double t0 = lcx__now_ms(), dl = q->o.rerank_deadline_ms;
    if (dl <= 0) return false;
    /* a run that would overrun anyway is not started: it would only add the deadline to
     * the search's latency */
    pthread_mutex_lock(&q->mu);
    const bool skip = q->rr_ms_doc * r > dl && ++q->rr_skipped % RERANK_PROBE != 0;
    pthread_mutex_unlock(&q->mu);
    if (skip) return false;
    cand sc[256];
    float out[RERANK_SLICE];
    for (int i = 0; i < r; i += RERANK_SLICE) {
        if (lcx__now_ms() - t0 > dl) return false;
        int m = r - i < RERANK_SLICE ? r - i : RERANK_SLICE;
        const double ts = lcx__now_ms();
        if (q->o.rerank(q->o.rerank_ud, qt, qlen, docs + i, lens + i, m, out) < 0) return false;
        const double per = (lcx__now_ms() - ts) / m;
        pthread_mutex_lock(&q->mu);
        q->rr_ms_doc = q->rr_ms_doc > 0 ? 0.7 * q->rr_ms_doc + 0.3 * per : per;
        q->rr_skipped = 0;
        pthread_mutex_unlock(&q->mu);
        for (int k = 0; k < m; k++) sc[i + k].id = (uint32_t)(i + k), sc[i + k].s = out[k];
    }
    if (lcx__now_ms() - t0 > dl) return false;
    qsort(sc, (size_t)r, sizeof *sc, cand_by_score);
    for (int i = 0; i < r; i++) order[i] = (int)sc[i].id;
    return true;
}

int lcx_nnq_rerank(lcx_nnq *q, const char *query, size_t qlen, const char *const *docs, const size_t *lens, int n,
                   int *order, lcx_search_info *info)
{
    if (info) info->used_rerank = info->rerank_overrun = false;
    if (!q || n < 0 || (n && (!docs || !lens || !order)) || (!query && qlen)) return LCX_EINVAL;
    for (int i = 0; i < n; i++) order[i] = i;
    if (!q->o.rerank || !n) return 0;
    const int r = n < q->o.rerank_top ? n : q->o.rerank_top;   /* ≤ 256 (lcx_nnq_new) */
    const bool ok = rerank_run(q, query ? query : "", qlen, docs, lens, r, order);
    if (!ok)
        for (int i = 0; i < r; i++) order[i] = i;
    pthread_mutex_lock(&q->mu);
    q->rerank_calls++;
    if (!ok) q->rerank_overruns++;
    pthread_mutex_unlock(&q->mu);
    if (info) info->used_rerank = ok, info->rerank_overrun = !ok;
    return ok;
}

/* The cross-encoder over f (already in fused order): the reordered hits take the fused
 * scores in order, so scores stay monotone. */
static int rerank_fused(lcx_store *s, lcx_nnq *q, const char *qt, size_t qlen, fused *f, int nf,
                        lcx_search_info *info)
{
    const int r = nf < q->o.rerank_top ? nf : q->o.rerank_top;
    const char *docs[256];
    size_t lens[256];
    int order[256];
    for (int i = 0; i < r; i++) {
        lcx_chunk c;
        if (lcx_store_get(s, f[i].id, &c) < 0) c.text = "", c.text_len = 0;
        docs[i] = c.text;
        lens[i] = c.text_len;
    }
    lcx_search_info ri;
    int rc = lcx_nnq_rerank(q, qt, qlen, docs, lens, r, order, &ri);
    if (info) info->used_rerank = ri.used_rerank, info->rerank_overrun = ri.rerank_overrun;
    if (rc <= 0) return rc;
    fused tmp[256];
    float scores[256];
    for (int i = 0; i < r; i++) tmp[i] = f[order[i]], scores[i] = f[i].rrf;
    for (int i = 0; i < r; i++) f[i] = tmp[i], f[i].rrf = scores[i];
    return rc;
}

int lcx__nn_search(lcx_store *s, const char *q, size_t qlen, const lcx_search_opts *o, lcx_hit *out, int max_out)
{
    struct lcx__nnchan *ch = s->nn;
    lcx_nnq *nq = ch->q;
    lcx_search_opts d = o ? *o : lcx_search_defaults();
    lcx_search_info *info = d.info;
    d.info = NULL;
    if (info) memset(info, 0, sizeof *info);
    if (d.top_k < 1 || max_out < 0 || (max_out && !out) || (!q && qlen)) return LCX_EINVAL;
    const int want = d.top_k < max_out ? d.top_k : max_out;
    const uint32_t ready = lcx_store_nn_ready(s);
    if (info) info->neural_ready = ready;
    const bool rr = nq->o.rerank && d.use_rerank;
    if (!ready && !rr) return lcx__store_search_base(s, q, qlen, &d, out, max_out);
    int P = d.prefilter > want ? d.prefilter : want;
    if (rr && P < nq->o.rerank_top) P = nq->o.rerank_top;
    if (P > 4096) P = 4096;
    if (P < 1) P = 1;
    fused *f = calloc((size_t)P * 2, sizeof *f);
    lcx_hit *base = calloc((size_t)P, sizeof *base);
    cand *top = calloc((size_t)P, sizeof *top);
    float *qv = calloc((size_t)nq->dim, sizeof *qv);
    int rc = f && base && top && qv ? 0 : LCX_ENOMEM;
    int nb = 0, nn = 0, nf = 0;
    if (!rc) {
        lcx_search_opts b = d;
        b.top_k = P;
        nb = lcx__store_search_base(s, q, qlen, &b, base, P);
        if (nb < 0) rc = nb;
        for (int i = 0; info && i < nb && i < want; i++)
            if (base[i].dense > info->base_dense) info->base_dense = base[i].dense;
    }
    if (!rc && ready) {
        const char *t = q ? q : "";
        rc = lcx_embed(nq->qemb, &t, &qlen, 1, qv);
        if (rc >= 0) {
            rc = 0;
            lock_r(s);
            pthread_rwlock_rdlock(&ch->rw);
            nn = nn_topk(s, ch, qv, top, P);
            pthread_rwlock_unlock(&ch->rw);
            unlock_rw(s);
        }
    }
    if (!rc) {
        /* without a neural ranking the store's own order and scores stand (rerank only) */
        const bool fuse = nn > 0;
        for (int i = 0; i < nb; i++) {
            fused *x = &f[nf++];
            x->id = base[i].id;
            x->rrf = fuse ? 1.0f / (RRF_K + (float)(i + 1)) : base[i].score;
            x->dense = base[i].dense;
            x->bm25 = base[i].bm25;
            x->in_base = 1;
        }
        int m0 = nf;
        qsort(f, (size_t)m0, sizeof *f, by_id);
        for (int r = 0; r < nn; r++) {
            if (top[r].s <= 0) break;   /* orthogonal or opposite: no neural evidence, no rank */
            fused key = {.id = top[r].id};
            fused *x = bsearch(&key, f, (size_t)m0, sizeof *f, by_id);
            const float add = 1.0f / (RRF_K + (float)(r + 1));
            if (x) { x->rrf += add; continue; }
            if (top[r].s < d.score_floor) continue;   /* a neural-only hit meets the floor by its cosine */
            x = &f[nf++];
            x->id = top[r].id;
            x->rrf = add;
            x->nn = top[r].s;
        }
        qsort(f, (size_t)nf, sizeof *f, by_rrf);
        if (info) info->used_neural = nn > 0;
        if (rr && nf > 0) rerank_fused(s, nq, q ? q : "", qlen, f, nf, info);
        const float norm = fuse ? 2.0f / (RRF_K + 1.0f) : 1.0f;   /* RRF: rank 1 in both lists */
        int k = nf < want ? nf : want;
        for (int i = 0; i < k; i++) {
            out[i].id = f[i].id;
            out[i].score = f[i].rrf / norm;
            out[i].dense = f[i].dense;
            out[i].bm25 = f[i].bm25;
        }
        rc = k;
    }
    free(f);
    free(base);
    free(top);
    free(qv);
    return rc;
}
