/* The log and snapshot formats, and the code that reads a log without a store handle:
 * record parsing, the scan with its recovery rule (item 6), log windows
 * (lcx__lview_at), lcx_store_validate and lcx__store_peek. Writers: append.c (records),
 * replay.c (a new log's header), snapshot.c (index.snap).
 * Locks: none of its own. lcx__lview_at runs under the caller's wmu (or during open,
 * before the handle is shared); the rest touches no handle.
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
 *     lcx_store_get checks each against its crc32c. */
#include "store/store_impl.h"
#include "store/store_int.h"
#include "embed/embed.h"
#include "index/index.h"
#include "store/store_fmt.h"
#include "util/util.h"
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* ------------------------------------------------------------------ file I/O */
int lcx__write_all(int fd, const void *p, size_t n, uint64_t off)
{
    const char *c = p;
    while (n) {
        ssize_t w = pwrite(fd, c, n, (off_t)off);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return lcx__eio(w < 0 ? errno : 0);   /* ENOSPC/EDQUOT: LCX_ENOSPC */
        c += w;
        n -= (size_t)w;
        off += (uint64_t)w;
    }
    return 0;
}

int lcx__read_all(int fd, void *p, size_t n, uint64_t off)
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

/* Walks records in [start, size) of the mapped log. Returns 0 (torn tail reported in r),
 * or LCX_ECORRUPT with r->good_end at the bad record. */
int lcx__scan_log(const char *base, uint64_t size, uint64_t start, uint32_t dim, uint32_t ver,
                    uint32_t chunks_before, lcx__rec_fn fn, void *ud, lcx__scan_res *r, char *msg, size_t msg_len)
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
        uint32_t crc = lcx__crc32c(lcx__crc32c(0, &h, 16), payload, h.len);
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

int lcx__check_log_hdr(const lcx_log_hdr *h, char *msg, size_t msg_len)
{
    if (memcmp(h->magic, LCX_LOG_MAGIC, 8)) { snprintf(msg, msg_len, "not a longctx log (bad magic)"); return LCX_ECORRUPT; }
    if (lcx__crc32c(0, h, 252) != h->crc) { snprintf(msg, msg_len, "log header checksum mismatch"); return LCX_ECORRUPT; }
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

/* ------------------------------------------------------------------ validation */
int lcx_store_validate(const char *dir, char *msg, size_t msg_len)
{
    char dummy[8];
    if (!msg || !msg_len) { msg = dummy; msg_len = sizeof dummy; }
    msg[0] = 0;
    if (!dir) return LCX_EINVAL;
    char *lp = lcx__path_join(dir, LCX_LOG_NAME);
    if (!lp) return LCX_ENOMEM;
    int fd = open(lp, O_RDONLY | O_CLOEXEC);
    free(lp);
    if (fd < 0) { snprintf(msg, msg_len, "no log in %s", dir); return LCX_ENOTFOUND; }
    struct stat st;
    int rc = 0;
    if (fstat(fd, &st) < 0) { close(fd); return LCX_EIO; }
    uint64_t size = (uint64_t)st.st_size;
    lcx_log_hdr h;
    if (size < sizeof h) {
        /* a crash between creating the log and its header's fsync: nothing was acknowledged
         * and the next open (lcx__store_load) writes a fresh header, so this is a valid empty
         * store — unless a snapshot claims records that such a log cannot hold */
        close(fd);
        char *sp = lcx__path_join(dir, LCX_SNAP_NAME);
        if (!sp) return LCX_ENOMEM;
        const bool snap = access(sp, F_OK) == 0;
        free(sp);
        if (snap) { snprintf(msg, msg_len, "log shorter than its header, but a snapshot exists"); return LCX_ECORRUPT; }
        snprintf(msg, msg_len, "ok: 0 records, 0 chunks, empty store (%llu-byte log without a header; "
                 "written on next open)", (unsigned long long)size);
        return 0;
    }
    if (lcx__read_all(fd, &h, sizeof h, 0)) { close(fd); return LCX_EIO; }
    if ((rc = lcx__check_log_hdr(&h, msg, msg_len))) { close(fd); return rc; }
    const char *lm = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (lm == MAP_FAILED) return LCX_EIO;
    lcx__scan_res r;
    char m2[160] = "";
    rc = lcx__scan_log(lm, size, sizeof h, h.dim, h.version, 0, NULL, NULL, &r, m2, sizeof m2);
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
    char *lp = lcx__path_join(dir, LCX_LOG_NAME);
    if (!lp) return LCX_ENOMEM;
    int fd = open(lp, O_RDONLY | O_CLOEXEC);
    free(lp);
    if (fd < 0) return errno == ENOENT ? LCX_ENOTFOUND : LCX_EIO;
    struct stat st;
    lcx_log_hdr h;
    char msg[80];
    int rc = LCX_EIO;
    if (fstat(fd, &st) < 0) goto out;
    rc = 0;
    if ((uint64_t)st.st_size < sizeof h) goto out;   /* cut before its header: an empty store, as open and validate say */
    rc = LCX_ECORRUPT;
    if (lcx__read_all(fd, &h, sizeof h, 0)) goto out;
    if ((rc = lcx__check_log_hdr(&h, msg, sizeof msg))) goto out;
    snprintf(fp, fp_len, "%.*s", (int)h.fp_len, h.fp);
    uint64_t off = sizeof h, size = (uint64_t)st.st_size;
    uint64_t live = 0;
    while (size - off >= sizeof(lcx_rec_hdr)) {
        lcx_rec_hdr r;
        if (lcx__read_all(fd, &r, sizeof r, off) || r.magic != LCX_REC_MAGIC) break;
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

