/* The store handle's definition, shared by the files that implement it: store.c (log,
 * appends, search, open/close) and snapshot.c (the index snapshot). Not for other
 * subsystems: they use include/longctx/lcx.h and store_int.h. */
#ifndef LCX_STORE_IMPL_H
#define LCX_STORE_IMPL_H

#include "longctx/lcx.h"
#include "embed/embed.h"
#include "index/index.h"
#include "store/store_fmt.h"
#include <pthread.h>
#include <stdint.h>

#define PAR_MAX_THREADS 4

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

/* A read-only MAP_SHARED window on chunks.log: published texts point into these (store.c
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
};
/* store.c */
int lcx__store_meta_reserve(lcx_store *s, uint32_t need);
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
