/* The store handle's definition and the declarations shared by the files that implement
 * it: store.c (open/close, reads; the lock order), log.c (formats, parsing, validation),
 * replay.c (opening the files, replay), ingest.c (the parallel part of an append),
 * append.c (writes) and snapshot.c (the index snapshot). Not for other subsystems: they
 * use include/longctx/lcx.h and store_int.h. */
#ifndef LCX_STORE_IMPL_H
#define LCX_STORE_IMPL_H

#include "longctx/lcx.h"
#include "embed/embed.h"
#include "index/index.h"
#include "store/store_fmt.h"
#include <pthread.h>
#include <stdint.h>

#define PAR_MAX_THREADS 4
#define PAR_MIN 64           /* batches this large are embedded (and replayed) on several threads */

typedef struct {
    int64_t tok_start, tok_end;
    int32_t layer, round;
    float score;
    uint32_t line_start, line_end;
    uint8_t file_type;
    uint32_t text_crc;       /* crc32c of the text: lcx_store_get checks it (the text may be read
                              * back from disk through a log window or the snapshot's mapping) */
    const char *path;
    uint32_t path_len;
} meta;

struct pblock {
    struct pblock *next;
    size_t used, cap;
    char data[];
};

/* A read-only MAP_SHARED window on chunks.log: published texts point into these (log.c
 * lcx__lview_at). */
struct lview {
    struct lview *next;
    const char *base;        /* file bytes [off, off + len) */
    uint64_t off, len;
};

struct lcx_store {
    char *dir;
    const lcx_embedder *emb;
    uint32_t dim;
    lcx_store_opts opts;
    char fp[LCX_FP_MAX + 1];
    pthread_rwlock_t rw;     /* the index and meta: searches read, publishes write */
    pthread_rwlock_t trw;    /* the index's term table alone: ingest workers read it (term ids)
                              * while a publish, holding rw, appends postings; only the
                              * publish's term step writes it. Taken after rw. */
    pthread_mutex_t wmu;
    int fd;
    uint64_t uuid;
    uint32_t log_ver;        /* LCX_LOG_VERSION or LCX_LOG_VERSION_V1 */
    int text_recs;           /* batches are written as LCX_REC_TEXT (v2 log + hash embedder) */
    char *recbuf;            /* reusable record buffer of the overlapped append path (under wmu) */
    size_t recbuf_cap;
    uint64_t log_end;
    uint64_t last_rec_off;
    uint32_t last_rec_crc;
    lcx_index *ix;
    meta *m;
    uint32_t m_cap;
    struct pblock *paths;
    size_t path_bytes;
    void *map;               /* snapshot mapping in use (kept until close) */
    size_t map_len;
    struct lview *views;     /* log windows (lcx__lview_at), newest first: every text in the log is read
                              * through one (under wmu or at open; kept until close) */
    uint32_t snap_docs;      /* documents covered by the newest snapshot on disk */
    uint64_t snap_log_off;   /* log bytes it covers */
    uint32_t tombs_since_snap;
    int has_snap;
    int broken;              /* a durable record could not be published: refuse writes */
    pthread_cond_t pcv;      /* with wmu: a ticketed commit published (pseq moved) */
    uint64_t wseq, pseq;     /* under wmu: commit tickets handed out / published */
    uint32_t pend_docs;      /* under wmu: chunks written + fsync'd, not yet published */
    pthread_mutex_t dmu;     /* guards defer; taken after wmu, before rw */
    struct lcx_store_prepared *defer;   /* a big append's batch: durable and acknowledged, published
                              * by the next store call (every read and write path publishes it
                              * first; the next big append publishes it next to its own embedding) */
    pthread_mutex_t pmu;     /* guards the spare buffers below */
    struct dtblk *dtspare;   /* doc_terms blocks kept from earlier big appends (both paths) */
    lcx__post_keys pkeys[PAR_MAX_THREADS];   /* posting-key buffers kept from one of them */
    int pkeys_full;
    char *prec[2];           /* log record buffers kept from freed prepared batches */
    size_t prec_cap[2];
    pthread_mutex_t scmu;    /* guards the free list of search scratch buffers */
    lcx__scratch *scratch;
    struct lcx__nnchan *nn;  /* neural channel (nnvec.c), NULL when none */
};
/* Blocks that the workers carve a batch's doc_terms out of (one malloc per ~256 KiB
 * instead of one per chunk); ingest.c. */
struct dtblk {
    struct dtblk *next;
    size_t used, cap, pad;   /* pad: data starts 16-byte aligned */
    char data[];
};

/* A batch between lcx_store_prepare and lcx_store_commit, or the deferred batch of an
 * overlapped append (append.c). */
struct lcx_store_prepared {
    lcx_store *s;
    int n;
    int committed;
    lcx_chunk *c;              /* (n) copies; text and path point into rec (a deferred batch: into
                                * the log window) */
    char *rec;                 /* (sizeof(lcx_rec_hdr) + payload) the log record; NULL for a
                                * deferred batch (its record is in s->recbuf, then in the log) */
    size_t rec_cap;
    uint64_t payload;
    uint8_t *vec;              /* (n, dim) u8 rows */
    float *vsc;                /* (n) their scales */
    uint32_t *tcrc;            /* (n) crc32c of the texts */
    lcx__doc_terms **dt;       /* (n), in blk */
    struct dtblk *blk;
    lcx__post_keys keys[PAR_MAX_THREADS];
    int n_runs;
};

/* The index lock (rw): readers share it, publishes take it exclusively. */
static inline void lock_w(lcx_store *s) { pthread_rwlock_wrlock(&s->rw); }
static inline void lock_r(lcx_store *s) { pthread_rwlock_rdlock(&s->rw); }
static inline void unlock_rw(lcx_store *s) { pthread_rwlock_unlock(&s->rw); }

/* nnvec.c: the neural channel (lcx.h "Neural channel"). attach: at the end of a
 * successful open (LCX_EMISMATCH: another model's vectors, lcx_store_open_detail says
 * which); detach: first thing in close (waits for the worker); search: lcx_store_search
 * when a channel is attached (fuses lcx__store_search_base with the neural ranking). */
struct lcx__nnchan;
int lcx__nn_attach(lcx_store *s, lcx_nnq *q, bool reset);
void lcx__nn_detach(lcx_store *s);
size_t lcx__nn_mem_bytes(lcx_store *s);   /* the channel's rows (0 without one) */
int lcx__nn_search(lcx_store *s, const char *q, size_t qlen, const lcx_search_opts *o, lcx_hit *out, int max_out);
int lcx__store_search_base(lcx_store *s, const char *q, size_t qlen, const lcx_search_opts *o, lcx_hit *out,
                           int max_out);
void lcx__store_open_detail_clear(void);

/* store.c */
int lcx__store_meta_reserve(lcx_store *s, uint32_t need);
/* A copy of path (n bytes) in the store's path blocks; NULL when n = 0 or out of memory. */
const char *lcx__path_store(lcx_store *s, const char *p, uint32_t n);
/* Takes wmu once no ticketed commit is still publishing; a deferred batch may still be
 * pending. */
void lcx__wlock_tickets(lcx_store *s);
/* Takes wmu once every record written so far is also published (tombstones, snapshots). */
void lcx__wlock_drained(lcx_store *s);

/* log.c */
/* pwrite / pread of exactly n bytes at off (EINTR retried); 0 or LCX_EIO. */
int lcx__write_all(int fd, const void *p, size_t n, uint64_t off);
int lcx__read_all(int fd, void *p, size_t n, uint64_t off);
/* Checks a log header (magic, crc, version, fields); msg receives why not. */
int lcx__check_log_hdr(const lcx_log_hdr *h, char *msg, size_t msg_len);
/* Log bytes [at, at + len) through a read-only window on chunks.log, kept until close;
 * NULL when it cannot be mapped. Caller holds wmu (or is opening the store). */
const char *lcx__lview_at(lcx_store *s, uint64_t at, uint64_t len);
/* One chunk of a log batch payload (pointers into the payload). */
typedef struct {
    const lcx_rec_chunk *fx;
    const char *text, *path;
    const uint8_t *vec;      /* (dim) u8 row; NULL in TEXT records (dim = 0) */
} lcx__rec_item;
typedef int (*lcx__item_fn)(void *ud, const lcx__rec_item *it);
/* Checks a batch payload's internal sizes (dim = 0 for TEXT records); calls fn for each
 * chunk when fn != NULL and stops at its first nonzero return. */
int lcx__parse_batch(const char *p, uint32_t len, uint32_t n, uint32_t dim, lcx__item_fn fn, void *ud);
typedef struct {
    uint64_t good_end;       /* end of the last good record */
    uint64_t last_off;       /* offset of the last good record (0 = none) */
    uint32_t last_crc;
    uint64_t torn_bytes;     /* bytes after good_end that are a torn tail */
    uint32_t n_chunks;       /* chunks in good records (from start) */
    uint32_t n_recs;
} lcx__scan_res;
typedef int (*lcx__rec_fn)(void *ud, const lcx_rec_hdr *h, const char *payload, uint64_t off);
/* Walks records in [start, size) of the mapped log (the recovery rule, item 6), calling fn
 * for each good one. Returns 0 (torn tail reported in r), or LCX_ECORRUPT with r->good_end
 * at the bad record (msg says which). */
int lcx__scan_log(const char *base, uint64_t size, uint64_t start, uint32_t dim, uint32_t ver,
                  uint32_t chunks_before, lcx__rec_fn fn, void *ud, lcx__scan_res *r, char *msg, size_t msg_len);

/* replay.c */
/* Opens (or creates) DIR/chunks.log under an exclusive flock, attaches a valid snapshot
 * and replays the log after it; truncates a torn tail. LCX_EEXIST: the store is open
 * elsewhere. */
int lcx__store_load(lcx_store *s);

/* ingest.c */
void lcx__dtblk_free(struct dtblk *b);
/* Moves up to DTBLK_KEEP blocks of *blk onto *spare. Caller holds s->pmu. */
void lcx__dtblk_keep(struct dtblk **blk, struct dtblk **spare);
/* A job that runs on a thread of its own next to the embedding workers. */
typedef struct {
    void *(*fn)(void *);
    void *ud;
} lcx__side_job;
/* Embeds, checksums and tokenizes the n chunks of c on the workers (rows into vec/vsc,
 * crc32c into tcrc, doc_terms into dt, carved from *blk) while the n_side (≤ 2) side jobs
 * run; keys: PAR_MAX_THREADS posting-key runs (emptied, buffers reused), *n_runs of them
 * filled. *blk: spare blocks in, every block the workers used out. */
int lcx__prepare_batch(lcx_store *s, const lcx_chunk *c, int n, uint8_t *vec, float *vsc, uint32_t *tcrc,
                       lcx__doc_terms **dt, struct dtblk **blk, lcx__post_keys *keys, int *n_runs,
                       const lcx__side_job *side, int n_side);

/* append.c */
/* Publishes the deferred batch, if any (see `defer`): dmu → rw → trw. */
void lcx__flush_deferred(lcx_store *s);

/* snapshot.c */
/* Maps DIR/index.snap and attaches it as the index base when it is valid and matches the
 * log (log_size bytes mapped at logmap); *replay_from = log bytes it covers. A version-2/3
 * snapshot's texts live in the log: they are read through a log window (lcx__lview_at).
 * Any problem: a negative LCX_E* and nothing attached (the caller replays the whole log). */
int lcx__snap_load(lcx_store *s, uint64_t log_size, const char *logmap, uint64_t *replay_from);
/* Unmaps the snapshot lcx__snap_load mapped (close). */
void lcx__snap_release(lcx_store *s);
/* Writes DIR/index.snap (tmp + fsync + rename + fsync dir). Caller holds wmu, drained. */
int lcx__snap_write(lcx_store *s);
/* lcx_store_validate's snapshot part: 0 when DIR has no snapshot or every section of it
 * checks out against the log (uuid, covered bytes ≤ log_good_end), else LCX_ECORRUPT;
 * *note = a short static description either way. */
int lcx__snap_check(const char *dir, uint64_t uuid, uint64_t log_good_end, const char **note);

#endif
