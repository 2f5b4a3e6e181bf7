/* Persistent, crash-safe store: an append-only log (source of truth) plus an optional
 * snapshot (a cache of the built index that is mmap'd on open).
 *
 * ON-DISK FORMAT (directory DIR, created 0700; little-endian; see store_fmt.h for the
 * structs and docs/storage-format.md for the same text with rationale)
 *
 * DIR/chunks.log — written by lcx_store_append / lcx_store_delete_path:
 *  1. Header, 256 bytes: magic "LCXLOG01"; u32 version = 2 (1: logs written before TEXT
 *     records existed — still opened, and appended to with BATCH records only); u32 header size = 256;
 *     u32 dim; u32 vector format (2 = offset-binary u8 + f32 scale); u64 store uuid (random); u32
 *     fingerprint length; 200 bytes embedder fingerprint (NUL padded); 16 reserved bytes;
 *     u32 crc32c of bytes [0, 252). Written and fsync'd (file + directory) at creation.
 *  2. Then records, back to back, each: 24-byte header { u32 magic 0x5243584c; u8 type
 *     (1 = batch of chunks, 2 = tombstones, 3 = batch without rows, version ≥ 2 only); 3 zero bytes; u32 payload length (≤ 1 GiB);
 *     u32 item count; u32 crc32c over header bytes [0, 16) followed by the payload;
 *     u32 zero } and the payload.
 *  3. Batch payload: per chunk a 56-byte fixed part { i64 tok_start, i64 tok_end, i32
 *     layer, i32 round, f32 score, u32 line_start, u32 line_end, u32 text_len, u32
 *     path_len, u8 file_type, 3 zero bytes, f32 embedding scale, 4 zero bytes } then
 *     text_len bytes of text, path_len bytes of path, and the dim-byte embedding row
 *     (offset-binary u8, value = (u − 128)·scale; so reopening never re-embeds).
 *     Chunk ids are implicit: the i-th chunk ever written has id i.
 *     TEXT payload (type 3): the same without the embedding row (scale 0). Written for
 *     the hash embedder, whose row is a pure function of the text and of the fingerprint in
 *     the header: replay recomputes it (bit-identical; tested). 20% fewer log bytes, and
 *     the record no longer depends on the embedding, so a big append writes and fsyncs it
 *     on its own thread while the workers embed (see lcx_store_append).
 *  4. Tombstone payload: count × u32 chunk ids (each < chunks written before it).
 *  5. One lcx_store_append (or lcx_store_commit) = one record = one write() + one
 *     fdatasync() before it returns 0 (the next record is written only after that, so
 *     only the last record can be torn): an acknowledged batch is durable, and a batch is all-or-nothing (a big
 *     batch whose record became durable but whose embedding then failed, OOM, truncates the
 *     record back before returning the error).
 *  6. Recovery on open: records are checked in order. A record that runs past the end
 *     of the file, a header cut short, or a zero-filled tail is a torn write from a
 *     crash: the file is truncated back to the end of the last good record (and
 *     fsync'd). A bad magic or bad checksum on a record that is NOT the last one (more
 *     bytes follow it) is corruption: open fails with LCX_ECORRUPT and nothing is loaded.
 *     A bad checksum on the final record is treated as torn (an acknowledged record was
 *     fsync'd whole, so only an unacknowledged one can be cut by a crash).
 *
 * DIR/index.snap — written by lcx_store_snapshot (and by close when ≥ 1024 chunks or any
 * tombstone arrived since the last one), via DIR/index.snap.tmp + rename, so a crash leaves
 * either the old or the new snapshot. "Lazy" (no fsync of file or directory) when this
 * boot's id is known, else fsync'd before the rename and the directory after it (item 10
 * says why lazy is safe):
 *  7. Header, 1024 bytes: magic "LCXSNAP1"; u32 version = 3 (2: no boot id/flags; 1: texts
 *     copied into BLOB; both still loaded); u32 header size = 1024;
 *     u32 dim; u32 vector format (2); u64 uuid (= the log's); u64 log bytes covered; u64
 *     offset of the last covered log record; u32 its crc; u32 documents; u32 terms; u32
 *     term table capacity; u64 postings; u32 section count (10); u32 pad; 10 section
 *     entries { u64 offset, u64 length, u32 crc32c, u32 flags (1 = checked on open) };
 *     u32 fingerprint length; 200 bytes fingerprint; 16 bytes the writer's boot id; u32
 *     flags (1 = synced); 476 reserved; u32 crc32c of bytes [0, 1020).
 *  8. Sections (each at a 64-byte aligned offset): 0 DOCS n × 80-byte records (metadata,
 *     BM25 length, text/path offsets, crc32c of the text, deleted flag) — versions 2-3: the
 *     offsets are byte offsets in chunks.log, where each chunk's text and path already
 *     sit (item 3), inside the covered bytes; version 1: offsets into BLOB;
 *     1 BLOB texts and paths (version 1; empty since version 2); 2 VEC n × dim u8 embedding rows; 3 TTAB term hash table
 *     (capacity × {u64 hash, u32 id+1, u32 length}, linear probing); 4 TOFF (terms+1) ×
 *     u64 offsets into 5 TSTR term bytes; 6 POFF (terms+1) × u64 offsets into 7 PDOC u32
 *     doc ids and 8 PTF u8 term frequencies (saturated at 255); 9 VSC n × f32 row scales.
 *  9. Open maps the file read-only and verifies the header, the section bounds, the
 *     crc32c of DOCS, TTAB, TOFF and POFF, and that (uuid, last record offset + crc, log
 *     bytes) match the log; then replays only the log records after the covered bytes.
 *     Versions 2-3 also map the covered log bytes read-only (kept until close: the base
 *     texts point there; those bytes never change while the store is open) and checks
 *     every text/path reference lies inside them.
 *     BLOB, VEC, TSTR, PDOC, PTF and VSC are NOT checksummed on open (that would cost ~30 ms
 *     per 100k chunks): every offset and doc id read from them is bounds-checked at use,
 *     texts are checked against their per-document crc32c by lcx_store_get, and
 *     lcx_store_validate verifies every section (and, versions 2-3, every text against the
 *     log). A lazy snapshot (version 3, not synced) opened in another boot than its
 *     writer's has EVERY section checked first: only a crash (hence a reboot) can have
 *     lost its unwritten pages. Any snapshot problem makes open ignore
 *     the snapshot and replay the whole log (the log is the source of truth).
 * 10. Writing: each document's text is located in the log, index.snap.tmp is written
 *     through two 4 MiB buffers, header last, and renamed over index.snap. Lazy (no fsync)
 *     when this boot's id is known: within a boot every reader sees the page cache, and
 *     only a crash (a new boot id) can lose unwritten pages, which item 9 then checks for.
 *     Without a boot id: file fsync'd, renamed, directory fsync'd, synced flag set.
 * 11. Texts in memory: none are copied. Appended and replayed texts, and a version-2/3
 *     snapshot's, are read through read-only windows on chunks.log (lcx__lview_at);
 *     lcx_store_get checks each against its crc32c.
 *
 * One handle per store: two open handles (two processes, or two in one process) on the same
 * directory would not be coordinated and could corrupt it (interleaved appends; an open can
 * truncate what it takes for a torn tail while the other handle is mid-append), so open
 * takes an exclusive flock on the log and a second open fails with LCX_EEXIST (after
 * LOCK_WAIT_MS: see take_lock). The lock dies with the process, so a crash never leaves a
 * store locked.
 *
 * Locking: `wmu` serialises writers (log appends, tombstones, snapshots); `rw` guards the
 * in-memory index: writers hold it exclusively only to publish already-durable records,
 * so searches run during a writer's fsync; `trw` (taken after rw) guards the term table
 * alone, so ingest workers look term ids up while a publish appends postings (it writes
 * trw only while adding new terms). lcx_store_commit publishes after releasing wmu,
 * in ticket (= log) order (wseq/pseq/pcv); the other writers take wmu drained.
 * A big append (the overlapped path) returns once its record is durable and leaves the
 * publish to the next call on the store (`defer`, under dmu): every reader and writer that
 * looks at the index's documents publishes a pending batch first (flush_deferred), so a
 * caller always reads its own writes (count and mem_bytes account for it without
 * publishing), and the next big append publishes it on a thread of its own while its
 * workers embed: one caller's batches keep both cores busy. */
#include "store/store_int.h"
#include "store/store_impl.h"
#include "embed/embed.h"
#include "index/index.h"
#include "store/store_fmt.h"
#include "util/util.h"
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define SNAP_AUTO_MIN 1024   /* close() snapshots when this many chunks arrived since */
#define PAR_MIN 64           /* batches this large are embedded on several threads */
#define LCX_BATCH_MAX (1 << 24)  /* chunks per append (the posting sort key's doc field) */


/* ------------------------------------------------------------------ helpers */
static int write_all(int fd, const void *p, size_t n, uint64_t off)
{
    const char *c = p;
    while (n) {
        ssize_t w = pwrite(fd, c, n, (off_t)off);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return LCX_EIO;
        c += w;
        n -= (size_t)w;
        off += (uint64_t)w;
    }
    return 0;
}

static int read_all(int fd, void *p, size_t n, uint64_t off)
{
    char *c = p;
    while (n) {
        ssize_t r = pread(fd, c, n, (off_t)off);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return LCX_EIO;
        c += r;
        n -= (size_t)r;
        off += (uint64_t)r;
    }
    return 0;
}

static uint64_t new_uuid(void)
{
    uint64_t u = 0;
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        if (read(fd, &u, sizeof u) != (ssize_t)sizeof u) u = 0;
        close(fd);
    }
    if (!u) {
        uint64_t t = lcx_now_ns() ^ ((uint64_t)getpid() << 32);
        u = lcx_hash64(&t, sizeof t, (uint64_t)time(NULL));
    }
    return u ? u : 1;
}

static const char *path_store(lcx_store *s, const char *p, uint32_t n)
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
    meta *m = lcx_big_realloc(s->m, (size_t)s->m_cap * sizeof *m, (size_t)nc * sizeof *m);
    if (!m) return LCX_ENOMEM;
    s->m = m;
    s->m_cap = nc;
    return 0;
}

static void lock_w(lcx_store *s) { pthread_rwlock_wrlock(&s->rw); }
static void lock_r(const lcx_store *s) { pthread_rwlock_rdlock((pthread_rwlock_t *)&s->rw); }
static void unlock_rw(const lcx_store *s) { pthread_rwlock_unlock((pthread_rwlock_t *)&s->rw); }

/* Takes wmu once no ticketed commit is still publishing (lcx_store_commit publishes outside
 * wmu, in ticket = log order). A deferred batch may still be pending. */
static void wlock_tickets(lcx_store *s)
{
    pthread_mutex_lock(&s->wmu);
    while (s->pseq != s->wseq) pthread_cond_wait(&s->pcv, &s->wmu);
}

static void flush_deferred(const lcx_store *cs);

/* Takes wmu once every record written so far is also published: tombstones and snapshots
 * need the index to match the log. */
static void wlock_drained(lcx_store *s)
{
    wlock_tickets(s);
    flush_deferred(s);
}

/* ------------------------------------------------------------------ log parsing */
int lcx__parse_batch(const char *p, uint32_t len, uint32_t n, uint32_t dim, lcx__item_fn fn, void *ud)
{
    uint64_t off = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (len - off < sizeof(lcx_rec_chunk)) return LCX_ECORRUPT;
        lcx_rec_chunk fx;
        memcpy(&fx, p + off, sizeof fx);
        if (fx.text_len > LCX_TEXT_HARD_MAX || fx.path_len > LCX_PATH_MAX || fx.file_type > LCX_FT_CONFIG)
            return LCX_ECORRUPT;
        uint64_t need = sizeof fx + (uint64_t)fx.text_len + fx.path_len + (uint64_t)dim;
        if (!(fx.vscale >= 0) || !(fx.vscale < 1e30f)) return LCX_ECORRUPT;
        if (len - off < need) return LCX_ECORRUPT;
        if (fn) {
            lcx__rec_item it = {(const lcx_rec_chunk *)(p + off), p + off + sizeof fx, p + off + sizeof fx + fx.text_len,
                           dim ? (const uint8_t *)(p + off + sizeof fx + fx.text_len + fx.path_len) : NULL};
            int rc = fn(ud, &it);
            if (rc) return rc;
        }
        off += need;
    }
    return off == len ? 0 : LCX_ECORRUPT;
}

typedef struct {
    uint64_t good_end;       /* end of the last good record */
    uint64_t last_off;       /* offset of the last good record (0 = none) */
    uint32_t last_crc;
    uint64_t torn_bytes;     /* bytes after good_end that are a torn tail */
    uint32_t n_chunks;       /* chunks in good records (from start) */
    uint32_t n_recs;
} scan_res;

typedef int (*rec_fn)(void *ud, const lcx_rec_hdr *h, const char *payload, uint64_t off);

/* Walks records in [start, size) of the mapped log. Returns 0 (torn tail reported in r),
 * or LCX_ECORRUPT with r->good_end at the bad record. */
static int scan_log(const char *base, uint64_t size, uint64_t start, uint32_t dim, uint32_t ver,
                    uint32_t chunks_before, rec_fn fn, void *ud, scan_res *r, char *msg, size_t msg_len)
{
    memset(r, 0, sizeof *r);
    r->good_end = start;
    r->n_chunks = chunks_before;
    uint64_t off = start;
    while (off < size) {
        uint64_t left = size - off;
        if (left < sizeof(lcx_rec_hdr)) { r->torn_bytes = left; return 0; }
        lcx_rec_hdr h;
        memcpy(&h, base + off, sizeof h);
        if (h.magic != LCX_REC_MAGIC) {
            int zero = 1;
            for (uint64_t i = 0; i < left && zero; i++) zero = base[off + i] == 0;
            if (zero) { r->torn_bytes = left; return 0; }
            if (msg) snprintf(msg, msg_len, "bad record magic at offset %llu", (unsigned long long)off);
            return LCX_ECORRUPT;
        }
        if (h.len > LCX_REC_MAX ||
            (h.type != LCX_REC_BATCH && h.type != LCX_REC_TOMB && (h.type != LCX_REC_TEXT || ver < 2))) {
            if (msg) snprintf(msg, msg_len, "bad record header at offset %llu", (unsigned long long)off);
            return LCX_ECORRUPT;
        }
        if ((uint64_t)h.len > left - sizeof h) { r->torn_bytes = left; return 0; }
        const char *payload = base + off + sizeof h;
        uint32_t crc = lcx_crc32c(lcx_crc32c(0, &h, 16), payload, h.len);
        uint64_t end = off + sizeof h + h.len;
        if (crc != h.crc) {
            if (end == size) { r->torn_bytes = left; return 0; }
            if (msg) snprintf(msg, msg_len, "checksum mismatch in record at offset %llu", (unsigned long long)off);
            return LCX_ECORRUPT;
        }
        /* checksummed record: its structure must be right */
        int rc = 0;
        if (h.type != LCX_REC_TOMB) {
            rc = lcx__parse_batch(payload, h.len, h.n, h.type == LCX_REC_TEXT ? 0 : dim, NULL, NULL);
            if (!rc && (uint64_t)r->n_chunks + h.n > UINT32_MAX - 1) rc = LCX_ECORRUPT;
        } else {
            if ((uint64_t)h.n * 4 != h.len) rc = LCX_ECORRUPT;
            for (uint32_t i = 0; !rc && i < h.n; i++) {
                uint32_t id;
                memcpy(&id, payload + 4 * (size_t)i, 4);
                if (id >= r->n_chunks) rc = LCX_ECORRUPT;
            }
        }
        if (rc) {
            if (msg) snprintf(msg, msg_len, "malformed record at offset %llu", (unsigned long long)off);
            return LCX_ECORRUPT;
        }
        if (fn && (rc = fn(ud, &h, payload, off))) return rc;
        if (h.type != LCX_REC_TOMB) r->n_chunks += h.n;
        r->last_off = off;
        r->last_crc = h.crc;
        r->good_end = end;
        r->n_recs++;
        off = end;
    }
    return 0;
}

static int check_log_hdr(const lcx_log_hdr *h, char *msg, size_t msg_len)
{
    if (memcmp(h->magic, LCX_LOG_MAGIC, 8)) { snprintf(msg, msg_len, "not a longctx log (bad magic)"); return LCX_ECORRUPT; }
    if (lcx_crc32c(0, h, 252) != h->crc) { snprintf(msg, msg_len, "log header checksum mismatch"); return LCX_ECORRUPT; }
    if ((h->version != LCX_LOG_VERSION && h->version != LCX_LOG_VERSION_V1) || h->hdr_size != sizeof *h) {
        snprintf(msg, msg_len, "unsupported log version %u", h->version);
        return LCX_ENOTSUP;
    }
    if (h->vec_format != LCX_VEC_U8 || h->dim < 1 || h->dim > LCX_DIM_MAX || h->fp_len == 0 ||
        h->fp_len > LCX_FP_MAX) {
        snprintf(msg, msg_len, "bad log header fields");
        return LCX_ECORRUPT;
    }
    return 0;
}

/* Log windows. Once its record is durable, a batch's texts are published as pointers into
 * a read-only MAP_SHARED window of chunks.log rather than copied into the index's arena:
 * the bytes were just written, so they sit in the page cache already, and a second copy
 * only cost a memcpy, fresh-page faults and RSS (128 MB for /usr/include). A window spans
 * at least LVIEW_SPAN of address space (only touched pages cost memory), starts at the page
 * holding the record and is never moved or unmapped before close, so pointers handed out
 * stay valid. It may reach past the end of the file: only durable records are read through
 * it, and the log is append-only while the store is open (a failed record is cut back
 * before anything points into it). Open replays the log through one as well, so replayed
 * texts stay in place too, and a snapshot's texts are read through that same window.
 * Caller holds wmu (or is opening the store). NULL when mmap fails: the caller copies
 * instead. */
#define LVIEW_SPAN ((uint64_t)256 << 20)

const char *lcx__lview_at(lcx_store *s, uint64_t at, uint64_t len)
{
    for (struct lview *v = s->views; v; v = v->next)   /* newest first: nearly always the first */
        if (at >= v->off && at + len <= v->off + v->len) return v->base + (at - v->off);
    const uint64_t pg = (uint64_t)sysconf(_SC_PAGESIZE);
    uint64_t off = at & ~(pg - 1), span = (at + len - off + pg - 1) & ~(pg - 1);
    if (span < LVIEW_SPAN) span = LVIEW_SPAN;
    struct lview *v = malloc(sizeof *v);
    void *m = v ? mmap(NULL, span, PROT_READ, MAP_SHARED, s->fd, (off_t)off) : MAP_FAILED;
    if (m == MAP_FAILED) {
        free(v);
        return NULL;
    }
    *v = (struct lview){s->views, m, off, span};
    s->views = v;
    return v->base + (at - off);
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
    m->text_crc = lcx_crc32c(0, it->text, fx.text_len);   /* the record's crc covered it just now */
    m->path_len = fx.path_len;
    m->path = path_store(s, it->path, fx.path_len);
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

/* ------------------------------------------------------------------ open / close */
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

static int store_load(lcx_store *s)
{
    char msg[160];
    char *lp = lcx_path_join(s->dir, LCX_LOG_NAME);
    if (!lp) return LCX_ENOMEM;
    int fd = open(lp, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    free(lp);
    if (fd < 0) return LCX_EIO;
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
        h.crc = lcx_crc32c(0, &h, 252);
        if (ftruncate(fd, 0) < 0 || write_all(fd, &h, sizeof h, 0) || fsync(fd) < 0 || lcx_fsync_dir(s->dir))
            return LCX_EIO;
        s->uuid = h.uuid;
        s->log_end = sizeof h;
        return 0;
    }
    lcx_log_hdr h;
    if (read_all(fd, &h, sizeof h, 0)) return LCX_EIO;
    int rc = check_log_hdr(&h, msg, sizeof msg);
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
    scan_res r;
    if (!rc_.tmp || !rc_.row) rc = LCX_ENOMEM;
    else rc = scan_log(lm, size, from, s->dim, s->log_ver, s->ix->n_docs, replay_rec, &rc_, &r, msg, sizeof msg);
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

int lcx_store_open(const char *dir, const lcx_embedder *emb, const lcx_store_opts *opts, lcx_store **out)
{
    if (out) *out = NULL;
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
    if (!rc) rc = lcx_mkdirs(dir);
    if (!rc) rc = lcx_index_new(emb, &s->ix);
    if (!rc) rc = store_load(s);
    /* the hash embedder's rows are a pure function of the text (its fingerprint, checked
     * against the log header, names every knob), so v2 logs store only the text for it and
     * replay recomputes the rows; any other embedder's rows are stored (never re-embedded) */
    s->text_recs = s->log_ver >= 2 && lcx__is_hash_embedder(emb);
    if (rc) {
        s->has_snap = 0;   /* never write a snapshot of a half-loaded store */
        s->broken = 1;
        lcx_store_close(s);
        return rc;
    }
    *out = s;
    return 0;
}

static void dtblk_free(struct dtblk *b);

void lcx_store_close(lcx_store *s)
{
    if (!s) return;
    flush_deferred(s);
    if (!s->broken && s->ix && s->fd >= 0) {
        uint32_t fresh = s->ix->n_docs - s->snap_docs;
        if (fresh >= SNAP_AUTO_MIN || s->tombs_since_snap) {
            wlock_drained(s);
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
    lcx_big_free(s->m, (size_t)s->m_cap * sizeof *s->m);
    free(s->recbuf);
    dtblk_free(s->dtspare);
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

/* ------------------------------------------------------------------ append */
/* Blocks that the workers carve a batch's doc_terms out of (one malloc per ~256 KiB
 * instead of one per chunk); freed when the append returns. */
struct dtblk {
    struct dtblk *next;
    size_t used, cap, pad;   /* pad: data starts 16-byte aligned */
    char data[];
};

#define DTBLK_SIZE (256u << 10)
#define DTBLK_KEEP 64        /* spare blocks a store keeps between big appends (16 MiB) */

/* spare: blocks to reuse before calling malloc (their pages are already faulted in) */
static void *dtblk_alloc(struct dtblk **head, struct dtblk **spare, size_t n)
{
    struct dtblk *b = *head;
    if (!b || b->cap - b->used < n) {
        size_t cap = n > DTBLK_SIZE ? n : DTBLK_SIZE;
        struct dtblk *nb = NULL;
        if (*spare && (*spare)->cap >= n) {
            nb = *spare;
            *spare = nb->next;
        } else {
            if (!(nb = malloc(sizeof *nb + cap))) return NULL;
            nb->cap = cap;
        }
        nb->next = b;
        nb->used = 0;
        *head = b = nb;
    }
    void *p = b->data + b->used;
    b->used += n;
    return p;
}

static void dtblk_free(struct dtblk *b)
{
    while (b) {
        struct dtblk *n = b->next;
        free(b);
        b = n;
    }
}

/* Moves up to DTBLK_KEEP blocks of *blk onto *spare (the rest stays in *blk): fresh
 * 256 KiB blocks are mmap'd and page-faulted every time (measured: ~0.1 CPU-s of faults
 * per 100 MB indexed). Caller holds s->pmu for the store's spare list. */
static void dtblk_keep(struct dtblk **blk, struct dtblk **spare)
{
    for (int k = 0; *blk && k < DTBLK_KEEP; k++) {
        struct dtblk *b = *blk;
        *blk = b->next;
        b->next = *spare;
        *spare = b;
    }
}

typedef struct {
    const lcx_store *s;
    const lcx_chunk *c;
    uint8_t *vec;              /* (n, dim) u8 rows */
    float *vsc;                /* (n) their scales */
    uint32_t *tcrc;            /* (n) crc32c of each text (lcx_store_get checks it) */
    lcx__doc_terms **dt;       /* (n) */
    struct dtblk *blk;         /* this worker's doc_terms memory */
    struct dtblk *spare;       /* blocks to reuse first */
    lcx__post_keys *keys;      /* this worker's posting sort keys (its groups' docs) */
    int n;
    int *next;                 /* shared: first chunk of the next group to take (atomic) */
    int rc;
} work;

/* Workers take the chunks of a batch in groups of WORK_GROUP from a shared cursor, so a
 * worker slowed by the batch's side jobs (or by another process) takes fewer groups
 * instead of holding up the batch with its fixed share. */
#define WORK_GROUP 32

static int group_end(const work *w, int g) { return g < w->n - WORK_GROUP ? g + WORK_GROUP : w->n; }

/* Resolves the terms of the n_todo groups starting at todo[] (ascending) and adds their
 * posting keys, in document order. Called holding trw for reading; releases it. */
static void resolve_groups(work *w, const int *todo, int n_todo)
{
    for (int k = 0; k < n_todo; k++)
        for (int i = todo[k], e = group_end(w, i); i < e; i++) lcx__index_resolve_cached(w->s->ix, w->dt[i], w->keys);
    pthread_rwlock_unlock((pthread_rwlock_t *)&w->s->trw);
    for (int k = 0; k < n_todo; k++)
        for (int i = todo[k], e = group_end(w, i); i < e && !w->rc; i++)
            w->rc = lcx__post_keys_add(w->keys, w->dt[i], (uint32_t)i);
}

static void *work_run(void *arg)
{
    work *w = arg;
    uint32_t dim = w->s->dim;
    float *tmp = malloc((size_t)dim * sizeof *tmp);   /* (dim) */
    int *todo = malloc(((size_t)w->n / WORK_GROUP + 1) * sizeof *todo);   /* groups taken, terms not resolved */
    int n_todo = 0;
    lcx__prep p = {0};
    if (!tmp || !todo) {
        free(tmp);
        free(todo);
        w->rc = LCX_ENOMEM;
        return NULL;
    }
    for (;;) {
        const int g = __atomic_fetch_add(w->next, WORK_GROUP, __ATOMIC_RELAXED);
        if (g >= w->n) break;
        for (int i = g, e = group_end(w, g); i < e && !w->rc; i++) {
            const char *tx = w->c[i].text ? w->c[i].text : "";
            int rc = lcx__prep_embed(&p, w->s->emb, tx, w->c[i].text_len, tmp);
            void *mem = rc < 0 ? NULL : dtblk_alloc(&w->blk, &w->spare, lcx__prep_size(&p));
            if (!mem) { w->rc = rc < 0 ? rc : LCX_ENOMEM; break; }
            w->dt[i] = lcx__prep_finish_to(&p, mem);
            lcx__quant_row_u8(tmp, dim, w->vec + (size_t)i * dim, &w->vsc[i]);
            w->tcrc[i] = lcx_crc32c(0, tx, w->c[i].text_len);
        }
        if (w->rc) break;
        todo[n_todo++] = g;
        /* resolve known term ids now, a group at a time, so the exclusive commit only
         * appends postings; while a publish adds its new terms keep embedding and resolve
         * later (the rest of a publish, its postings, does not stop this) */
        if (pthread_rwlock_tryrdlock((pthread_rwlock_t *)&w->s->trw)) continue;
        resolve_groups(w, todo, n_todo);
        n_todo = 0;
    }
    if (n_todo && !w->rc) {
        pthread_rwlock_rdlock((pthread_rwlock_t *)&w->s->trw);
        resolve_groups(w, todo, n_todo);
    }
    if (!w->rc) lcx__post_keys_sort(w->keys);   /* here, in parallel: the publish only merges */
    lcx__prep_free(&p);
    free(tmp);
    free(todo);
    return NULL;
}

/* A job that runs on a thread of its own next to the embedding workers. */
typedef struct {
    void *(*fn)(void *);
    void *ud;
} side_job;

/* A side job's thread. Side jobs are fixed pieces of work next to the workers' divisible
 * one, and the batch waits for them: the log write, whose fdatasync wakes the thread
 * several times, and the publish (~2–3 ms of CPU, but 6–10 ms wall among four threads on 2
 * cores when the workers kept the cores). With a short slice the thread runs whenever it
 * is runnable (lcx_thread_short_slice; same CPU share) and the workers take up the rest
 * (docs/benchmarks/core.md). */
static void *side_main(void *arg)
{
    const side_job *j = arg;
    lcx_thread_short_slice();
    return j->fn(j->ud);
}

/* Runs the n_side side jobs (≤ 2) next to the embedding workers.
 * keys: PAR_MAX_THREADS runs (emptied here, buffers reused); *n_runs receives how many
 * were filled (each in document order; the runs interleave groups of WORK_GROUP).
 * *blk: spare blocks in (may be NULL), every block the workers hold out (dt[] lives in
 * them). */
static int prepare_batch(const lcx_store *s, const lcx_chunk *c, int n, uint8_t *vec, float *vsc, uint32_t *tcrc,
                         lcx__doc_terms **dt, struct dtblk **blk, lcx__post_keys *keys, int *n_runs,
                         const side_job *side, int n_side)
{
    int nt = 1;
    if (n >= PAR_MIN) {
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        nt = (int)(cpus < 1 ? 1 : cpus > PAR_MAX_THREADS ? PAR_MAX_THREADS : cpus);
        if (nt > n / WORK_GROUP) nt = n / WORK_GROUP ? n / WORK_GROUP : 1;   /* a group each at least */
    }
    work w[PAR_MAX_THREADS];
    pthread_t th[PAR_MAX_THREADS], xth[2];
    int started[PAR_MAX_THREADS] = {0}, xstarted[2] = {0}, next = 0;
    for (int k = 0; k < n_side; k++) xstarted[k] = pthread_create(&xth[k], NULL, side_main, (void *)&side[k]) == 0;
    for (int t = 0; t < nt; t++) {
        lcx__post_keys_reset(&keys[t]);
        w[t] = (work){s, c, vec, vsc, tcrc, dt, NULL, NULL, &keys[t], n, &next, 0};
    }
    for (int t = 0; *blk; t = (t + 1) % nt) {   /* spare blocks in: dealt out to the workers */
        struct dtblk *b = *blk;
        *blk = b->next;
        b->next = w[t].spare;
        w[t].spare = b;
    }
    *n_runs = nt;
    for (int t = 1; t < nt; t++)
        started[t] = pthread_create(&th[t], NULL, work_run, &w[t]) == 0;
    work_run(&w[0]);
    int rc = w[0].rc;
    for (int t = 1; t < nt; t++) {
        if (started[t]) pthread_join(th[t], NULL);
        else work_run(&w[t]);               /* could not start a thread: do it here */
        if (!rc) rc = w[t].rc;
    }
    for (int k = 0; k < n_side; k++) {
        if (xstarted[k]) pthread_join(xth[k], NULL);
        else side[k].fn(side[k].ud);
    }
    for (int t = 0; t < nt; t++) {   /* hand every worker's blocks (used and spare) to the caller */
        for (int k = 0; k < 2; k++) {
            struct dtblk *b = k ? w[t].spare : w[t].blk;
            while (b) {
                struct dtblk *nx = b->next;
                b->next = *blk;
                *blk = b;
                b = nx;
            }
        }
    }
    return rc;
}

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
    h.crc = lcx_crc32c(lcx_crc32c(0, &h, 16), rec + sizeof h, payload);
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
    j->rc = write_all(j->s->fd, j->s->recbuf, sizeof(lcx_rec_hdr) + j->payload, j->at);
    if (!j->rc && fdatasync(j->s->fd) < 0) j->rc = LCX_EIO;
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
    m->path = path_store(s, c->path, m->path_len);
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
    if (ftruncate(s->fd, (off_t)at) < 0 || (synced && fdatasync(s->fd) < 0))
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
    dtblk_keep(&p->blk, &s->dtspare);
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
    dtblk_free(p->blk);
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

/* Publishes the deferred batch, if any (see `defer`). Readers call it too: the store is
 * logically unchanged by it (the batch was acknowledged), hence the const. */
static void flush_deferred(const lcx_store *cs)
{
    lcx_store *s = (lcx_store *)cs;
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
    flush_deferred(s);
    lock_r(s);
    uint32_t id = s->ix->n_docs;
    unlock_rw(s);
    return id;
}

static void *flush_run(void *arg)   /* side job of the overlapped append */
{
    flush_deferred(arg);
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
    side_job sj = {rec_run, &j};
    rc = prepare_batch(s, c, n, p->vec, p->vsc, p->tcrc, p->dt, &p->blk, p->keys, &p->n_runs, &sj, text_rec);
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
    flush_deferred(s);   /* it was written before this record: its ids come first */
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
    rc = write_all(s->fd, p->rec, sizeof h + p->payload, at);
    if (!rc && fdatasync(s->fd) < 0) rc = LCX_EIO;
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
    wlock_tickets(s);
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
    side_job side[2] = {{io_run, &j}, {flush_run, s}};
    rc = prepare_batch(s, c, n, p->vec, p->vsc, p->tcrc, p->dt, &p->blk, p->keys, &p->n_runs, side, pend ? 2 : 1);
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
    wlock_drained(s);
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
    h.crc = lcx_crc32c(lcx_crc32c(0, &h, 16), ids, (size_t)k * 4);
    char *rec = malloc(sizeof h + (size_t)k * 4);
    if (!rec) { free(ids); rc = LCX_ENOMEM; goto unlock; }
    memcpy(rec, &h, sizeof h);
    memcpy(rec + sizeof h, ids, (size_t)k * 4);
    uint64_t at = s->log_end;
    rc = write_all(s->fd, rec, sizeof h + (size_t)k * 4, at);
    if (!rc && fdatasync(s->fd) < 0) rc = LCX_EIO;
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

/* ------------------------------------------------------------------ reads */
/* Counts a deferred batch without publishing it (svc answers every write with the session
 * total: publishing there would put the publish back between two writes). Its chunks are
 * live: acknowledged, and tombstones publish it first. dmu, held by a publishing flush,
 * keeps the sum consistent. */
uint32_t lcx_store_count(const lcx_store *s)
{
    if (!s) return 0;
    lcx_store *ms = (lcx_store *)s;
    pthread_mutex_lock(&ms->dmu);
    lock_r(s);
    uint32_t n = s->ix->n_live + (s->defer ? (uint32_t)s->defer->n : 0);
    unlock_rw(s);
    pthread_mutex_unlock(&ms->dmu);
    return n;
}

int lcx_store_get(const lcx_store *s, uint32_t id, lcx_chunk *out)
{
    if (!s || !out) return LCX_EINVAL;
    flush_deferred(s);
    lock_r(s);
    int rc = 0;
    if (id >= s->ix->n_docs || lcx__index_is_deleted(s->ix, id)) {
        rc = LCX_ENOTFOUND;
    } else {
        const meta *m = &s->m[id];
        lcx_chunk c = lcx_chunk_init();
        c.text = s->ix->text[id];
        c.text_len = s->ix->text_len[id];
        if (lcx_crc32c(0, c.text, c.text_len) != m->text_crc) {
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

int lcx_store_search(const lcx_store *s, const char *q, size_t qlen, const lcx_search_opts *o, lcx_hit *out,
                     int max_out)
{
    if (!s || (!q && qlen)) return LCX_EINVAL;
    float *qv = malloc((size_t)s->dim * sizeof *qv);   /* (dim) */
    if (!qv) return LCX_ENOMEM;
    const char *t = q ? q : "";
    int rc = lcx_embed(s->emb, &t, &qlen, 1, qv);      /* off-lock */
    if (rc >= 0) {
        /* borrow a scratch (one per concurrent search; kept until close) */
        lcx_store *ms = (lcx_store *)s;
        pthread_mutex_lock(&ms->scmu);
        lcx__scratch *sc = ms->scratch;
        if (sc) ms->scratch = sc->next;
        pthread_mutex_unlock(&ms->scmu);
        if (!sc) sc = calloc(1, sizeof *sc);
        flush_deferred(s);
        lock_r(s);
        rc = lcx__index_search_vec(s->ix, q, qlen, qv, o, out, max_out, sc);
        unlock_rw(s);
        if (sc) {
            pthread_mutex_lock(&ms->scmu);
            sc->next = ms->scratch;
            ms->scratch = sc;
            pthread_mutex_unlock(&ms->scmu);
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
size_t lcx_store_mem_bytes(const lcx_store *s)
{
    if (!s) return 0;
    lcx_store *ms = (lcx_store *)s;
    pthread_mutex_lock(&ms->dmu);
    size_t d = s->defer ? prepared_bytes(s->defer) : 0;
    pthread_mutex_unlock(&ms->dmu);
    lock_r(s);
    size_t n = sizeof *s + lcx__index_mem_bytes(s->ix) + (size_t)s->m_cap * sizeof(meta) + s->path_bytes + s->map_len + d;
    unlock_rw(s);
    return n;
}

int lcx_store_snapshot(lcx_store *s)
{
    if (!s) return LCX_EINVAL;
    wlock_drained(s);
    lock_r(s);     /* index is stable under wmu; the read lock documents that readers may share */
    int rc = lcx__snap_write(s);
    unlock_rw(s);
    pthread_mutex_unlock(&s->wmu);
    return rc;
}

/* ------------------------------------------------------------------ validation */
int lcx_store_validate(const char *dir, char *msg, size_t msg_len)
{
    char dummy[8];
    if (!msg || !msg_len) { msg = dummy; msg_len = sizeof dummy; }
    msg[0] = 0;
    if (!dir) return LCX_EINVAL;
    char *lp = lcx_path_join(dir, LCX_LOG_NAME);
    if (!lp) return LCX_ENOMEM;
    int fd = open(lp, O_RDONLY | O_CLOEXEC);
    free(lp);
    if (fd < 0) { snprintf(msg, msg_len, "no log in %s", dir); return LCX_ENOTFOUND; }
    struct stat st;
    int rc = 0;
    if (fstat(fd, &st) < 0) { close(fd); return LCX_EIO; }
    uint64_t size = (uint64_t)st.st_size;
    lcx_log_hdr h;
    if (size < sizeof h || read_all(fd, &h, sizeof h, 0)) {
        close(fd);
        snprintf(msg, msg_len, "log shorter than its header");
        return LCX_ECORRUPT;
    }
    if ((rc = check_log_hdr(&h, msg, msg_len))) { close(fd); return rc; }
    const char *lm = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (lm == MAP_FAILED) return LCX_EIO;
    scan_res r;
    char m2[160] = "";
    rc = scan_log(lm, size, sizeof h, h.dim, h.version, 0, NULL, NULL, &r, m2, sizeof m2);
    if (rc) {
        snprintf(msg, msg_len, "log: %s", m2);
        munmap((void *)lm, size);
        return rc;
    }
    /* snapshot, when present: every section's checksum and its tie to the log */
    const char *snap_note;
    rc = lcx__snap_check(dir, h.uuid, r.good_end, &snap_note);
    snprintf(msg, msg_len, "%s: %u records, %u chunks, %llu log bytes%s%s; %s", rc ? "corrupt" : "ok", r.n_recs,
             r.n_chunks, (unsigned long long)r.good_end, r.torn_bytes ? ", torn tail of " : "",
             r.torn_bytes ? "bytes (truncated on next open)" : "", snap_note);
    munmap((void *)lm, size);
    return rc;
}

int lcx__store_peek(const char *dir, char *fp, size_t fp_len, uint32_t *n_live)
{
    *n_live = 0;
    if (fp_len) fp[0] = 0;
    char *lp = lcx_path_join(dir, LCX_LOG_NAME);
    if (!lp) return LCX_ENOMEM;
    int fd = open(lp, O_RDONLY | O_CLOEXEC);
    free(lp);
    if (fd < 0) return errno == ENOENT ? LCX_ENOTFOUND : LCX_EIO;
    struct stat st;
    lcx_log_hdr h;
    char msg[80];
    int rc = LCX_EIO;
    if (fstat(fd, &st) < 0) goto out;
    rc = LCX_ECORRUPT;
    if ((uint64_t)st.st_size < sizeof h || read_all(fd, &h, sizeof h, 0)) goto out;
    if ((rc = check_log_hdr(&h, msg, sizeof msg))) goto out;
    snprintf(fp, fp_len, "%.*s", (int)h.fp_len, h.fp);
    uint64_t off = sizeof h, size = (uint64_t)st.st_size;
    uint64_t live = 0;
    while (size - off >= sizeof(lcx_rec_hdr)) {
        lcx_rec_hdr r;
        if (read_all(fd, &r, sizeof r, off) || r.magic != LCX_REC_MAGIC) break;
        if ((uint64_t)r.len > size - off - sizeof r) break;
        if (r.type == LCX_REC_BATCH || r.type == LCX_REC_TEXT) live += r.n;
        else if (r.type == LCX_REC_TOMB) live = live >= r.n ? live - r.n : 0;
        off += sizeof r + r.len;
    }
    *n_live = live > UINT32_MAX ? UINT32_MAX : (uint32_t)live;
    rc = 0;
out:
    close(fd);
    return rc;
}
