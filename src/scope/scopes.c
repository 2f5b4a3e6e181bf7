/* Scope manager: loaded scopes, their stores and manifests, Hot → Package promotion, the
 * session → scopes binding table. The inotify watcher lives in watch.c.
 *
 * On disk, per scope: data_dir/scopes/<scope_hash>/
 *   store/     an lcx_store (chunk texts, vectors, BM25; crash-safe, fingerprint-checked)
 *   manifest   what is indexed, written by manifest_write() below (atomic replace):
 *     1. "LCXSCOPE 1\n"
 *     2. "root <canonical root>\n", "fingerprint <embedder fingerprint>\n",
 *        "status hot|package\n"
 *     3. per Hot walk root: "H <0|1 recursive> <scope-relative dir>\n" (Hot scopes only)
 *     4. per file: "F <size> <mtime_ns> <content hash64 hex> <first chunk id> <n chunks>
 *        <file type> <n symbols> <scope-relative path>\n" followed by n symbol lines
 *        "S <line> <kind> <name> <owner or ->\n"
 *     5. "END <crc32c hex of every byte before this line>\n"
 *   A manifest that fails any check (magic, crc, root, fingerprint, bounds) or a store
 *   made by another embedder makes the scope be rebuilt from scratch (the scope store is
 *   a cache of the source tree; it is reported in the log, never half-used).
 *
 * Consistency with the store: a file's chunks are appended (durable) before the manifest
 * names them; a re-indexed file's old chunks are tombstoned by path first. After a crash
 * between the two, the manifest lacks the file, so the next refresh re-indexes it (and
 * tombstones the orphan chunks by path). Files are therefore never double-counted.
 *
 * Reload without re-indexing: a refresh walks the scope and stats every file; a file
 * whose size and mtime match the manifest is not opened; one whose bytes hash to the
 * manifest's hash only gets its mtime updated. */
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

#define BATCH_CHUNKS 4096
#define FIRST_BATCH_CHUNKS 512
#define BATCH_BYTES (16u << 20)
#define MANIFEST_MAX (512u << 20)

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

/* ---------------------------------------------------------------- file table */

static uint64_t str_hash(const char *s) { return lcx_hash64(s, strlen(s), 0x5c0be); }

static void fmap_rebuild(lcx_scope *s)
{
    uint32_t cap = 64;
    while (cap < s->n_files * 2 + 16) cap *= 2;
    uint32_t *m = calloc(cap, sizeof *m);
    if (!m) { s->fmap_cap = 0; free(s->fmap); s->fmap = NULL; return; }   /* linear fallback */
    for (uint32_t i = 0; i < s->n_files; i++) {
        if (!s->files[i].rel) continue;
        uint32_t h = (uint32_t)str_hash(s->files[i].rel) & (cap - 1);
        while (m[h]) h = (h + 1) & (cap - 1);
        m[h] = i + 1;
    }
    free(s->fmap);
    s->fmap = m;
    s->fmap_cap = cap;
}

int lcx_scope__find_file(const lcx_scope *s, const char *rel)
{
    if (!s->fmap) {
        for (uint32_t i = 0; i < s->n_files; i++)
            if (s->files[i].rel && !strcmp(s->files[i].rel, rel)) return (int)i;
        return -1;
    }
    uint32_t h = (uint32_t)str_hash(rel) & (s->fmap_cap - 1);
    while (s->fmap[h]) {
        uint32_t i = s->fmap[h] - 1;
        if (s->files[i].rel && !strcmp(s->files[i].rel, rel)) return (int)i;
        h = (h + 1) & (s->fmap_cap - 1);
    }
    return -1;
}

static void file_clear(lcx_file_ent *f)
{
    free(f->rel);
    free(f->syms);
    memset(f, 0, sizeof *f);
}

/* New or existing entry for rel (the map is rebuilt when it gets full). */
static lcx_file_ent *file_get(lcx_scope *s, const char *rel, bool create)
{
    int i = lcx_scope__find_file(s, rel);
    if (i >= 0) return &s->files[i];
    if (!create) return NULL;
    if (s->n_files == s->cap_files) {
        uint32_t nc = s->cap_files ? s->cap_files * 2 : 64;
        lcx_file_ent *nf = realloc(s->files, nc * sizeof *nf);
        if (!nf) return NULL;
        s->files = nf;
        s->cap_files = nc;
    }
    lcx_file_ent *f = &s->files[s->n_files];
    memset(f, 0, sizeof *f);
    if (!(f->rel = strdup(rel))) return NULL;
    s->n_files++;
    if (!s->fmap || s->n_files * 2 > s->fmap_cap) {
        fmap_rebuild(s);
    } else {
        uint32_t h = (uint32_t)str_hash(rel) & (s->fmap_cap - 1);
        while (s->fmap[h]) h = (h + 1) & (s->fmap_cap - 1);
        s->fmap[h] = s->n_files;
    }
    s->live_files++;
    s->sym_dirty = true;
    return f;
}

/* Removes rel from the table (tombstoning its chunks). The slot stays (rel NULL) until
 * the next compaction so indices held by the map stay valid. */
static int file_remove(lcx_scope *s, lcx_file_ent *f)
{
    if (f->n_chunks) {
        int rc = lcx_store_delete_path(s->store, f->rel, strlen(f->rel));
        if (rc < 0) return rc;
        s->store_changed = true;
    }
    s->bytes -= f->size;
    file_clear(f);
    s->live_files--;
    s->sym_dirty = true;
    s->manifest_dirty = true;
    return 0;
}

static void files_compact(lcx_scope *s)
{
    uint32_t k = 0;
    for (uint32_t i = 0; i < s->n_files; i++)
        if (s->files[i].rel) s->files[k++] = s->files[i];
    if (k != s->n_files) s->sym_dirty = true;   /* symbol refs hold file indices */
    s->n_files = k;
    fmap_rebuild(s);
}

/* ---------------------------------------------------------------- symbol index */

/* Chains definitions of one name together so that a name defined in thousands of files
 * (a macro in every header) costs one bucket, not a probe cluster: rebuilding and looking
 * up stay linear in the number of definitions. */
static void symidx_rebuild(lcx_scope *s)
{
    free(s->symidx);
    free(s->symrefs);
    s->symidx = NULL;
    s->symrefs = NULL;
    s->symidx_cap = 0;
    s->n_syms = 0;
    uint32_t n = 0;
    for (uint32_t i = 0; i < s->n_files; i++) n += s->files[i].rel ? (uint32_t)s->files[i].n_syms : 0;
    s->n_syms = n;
    s->sym_dirty = false;
    if (!n) return;
    uint32_t cap = 64;
    while (cap < n * 2) cap *= 2;
    uint32_t *t = calloc(cap, sizeof *t);
    lcx_symref *refs = malloc((size_t)n * sizeof *refs);
    if (!t || !refs) { free(t); free(refs); return; }   /* no boosting rather than failure */
    uint32_t k = 0;
    for (uint32_t i = 0; i < s->n_files; i++) {
        lcx_file_ent *f = &s->files[i];
        if (!f->rel) continue;
        for (int j = 0; j < f->n_syms; j++) {
            uint64_t h = str_hash(f->syms[j].name);
            uint32_t b = (uint32_t)h & (cap - 1);
            while (t[b]) {
                const lcx_symref *r = &refs[t[b] - 1];
                if (r->hash == h && !strcmp(s->files[r->file - 1].syms[r->sym].name, f->syms[j].name)) break;
                b = (b + 1) & (cap - 1);
            }
            refs[k] = (lcx_symref){.hash = h, .file = i + 1, .sym = (uint32_t)j, .next = t[b]};
            t[b] = ++k;
        }
    }
    s->symidx = t;
    s->symrefs = refs;
    s->symidx_cap = cap;
}

int lcx_scope__symbol_lookup(lcx_scope *s, const char *name, const lcx_symbol **syms,
                             const char **paths, int max)
{
    if (s->sym_dirty) symidx_rebuild(s);
    if (!s->symidx) return 0;
    uint64_t h = str_hash(name);
    uint32_t b = (uint32_t)h & (s->symidx_cap - 1);
    while (s->symidx[b]) {
        const lcx_symref *r = &s->symrefs[s->symidx[b] - 1];
        if (r->hash == h && !strcmp(s->files[r->file - 1].syms[r->sym].name, name)) break;
        b = (b + 1) & (s->symidx_cap - 1);
    }
    int n = 0;
    /* chain order is reverse insertion (file order); fine for "≤ max definitions" */
    for (uint32_t x = s->symidx[b]; x; x = s->symrefs[x - 1].next) {
        const lcx_symref *r = &s->symrefs[x - 1];
        const lcx_file_ent *f = &s->files[r->file - 1];
        if (!f->rel || r->sym >= (uint32_t)f->n_syms) continue;
        if (n >= max) return n + 1;   /* "more than max" */
        syms[n] = &f->syms[r->sym];
        paths[n] = f->rel;
        n++;
    }
    return n;
}

/* ---------------------------------------------------------------- manifest */

static int manifest_path(const lcx_scope *s, char *out, size_t cap)
{
    int n = snprintf(out, cap, "%s/manifest", s->dir);
    return n > 0 && (size_t)n < cap ? 0 : LCX_ELIMIT;
}

/* tmp + rename WITHOUT fsync: the manifest describes a cache. After a power loss it is
 * either the old or the new file (rename is atomic; ext4 flushes replace-via-rename data),
 * and a torn one fails its crc and the scope is rebuilt. The store's own appends stay
 * durable. Skipping the two fsyncs saves 10-30 ms per write on this kind of disk. */
static int write_replace(const char *path, const void *data, size_t len)
{
    char tmp[PATH_MAX + 16];
    int n = snprintf(tmp, sizeof tmp, "%s.tmp", path);
    if (n < 0 || (size_t)n >= sizeof tmp) return LCX_ELIMIT;
    FILE *f = fopen(tmp, "wb");
    if (!f) return LCX_EIO;
    size_t w = fwrite(data, 1, len, f);
    if (fclose(f) != 0 || w != len) { unlink(tmp); return LCX_EIO; }
    if (rename(tmp, path) != 0) { unlink(tmp); return LCX_EIO; }
    return 0;
}

/* Decimal of v at p; returns the end. */
static char *put_u64(char *p, uint64_t v)
{
    char t[20];
    int n = 0;
    do { t[n++] = (char)('0' + v % 10); v /= 10; } while (v);
    while (n) *p++ = t[--n];
    return p;
}

static char *put_str(char *p, const char *s)
{
    size_t l = strlen(s);
    memcpy(p, s, l);
    return p + l;
}

/* The F and S lines are formatted by hand: printf took 330 ms for the 479k symbol lines
 * of /usr/include (15.7 MB), a quarter second of serial time at the end of every build.
 * Files whose chunks are still in an append in flight (checkpoints) are left out. */
static int manifest_write(lcx_scope *s)
{
    lcx_buf b = {.cap = MANIFEST_MAX};
    int rc = lcx_buf_printf(&b, "LCXSCOPE 1\nroot %s\nfingerprint %s\nstatus %s\n", s->root,
                            lcx_store_fingerprint(s->store), s->package ? "package" : "hot");
    for (int i = 0; i < s->n_hot && !rc; i++)
        rc = lcx_buf_printf(&b, "H %d %s\n", s->hot[i].recursive ? 1 : 0, s->hot[i].rel);
    char line[4096 + 256];   /* one S line (two names < 64 bytes) or an F line's fields + path */
    for (uint32_t i = 0; i < s->n_files && !rc; i++) {
        const lcx_file_ent *f = &s->files[i];
        if (!f->rel || f->pending) continue;
        size_t rl = strlen(f->rel);
        char *q = line;
        *q++ = 'F';
        *q++ = ' ';
        q = put_u64(q, f->size);
        *q++ = ' ';
        if (f->mtime_ns < 0) { *q++ = '-'; q = put_u64(q, (uint64_t)0 - (uint64_t)f->mtime_ns); }
        else q = put_u64(q, (uint64_t)f->mtime_ns);
        *q++ = ' ';
        for (int k = 15; k >= 0; k--) *q++ = "0123456789abcdef"[(f->hash >> (k * 4)) & 15];
        *q++ = ' ';
        q = put_u64(q, f->first_id);
        *q++ = ' ';
        q = put_u64(q, f->n_chunks);
        *q++ = ' ';
        q = put_u64(q, f->ft);
        *q++ = ' ';
        q = put_u64(q, (uint64_t)(f->n_syms > 0 ? f->n_syms : 0));
        *q++ = ' ';
        if (rl < sizeof line - 256) {
            memcpy(q, f->rel, rl);
            q += rl;
            *q++ = '\n';
            rc = lcx_buf_append(&b, line, (size_t)(q - line));
        } else {   /* a very long path: in pieces */
            rc = lcx_buf_append(&b, line, (size_t)(q - line));
            if (!rc) rc = lcx_buf_append(&b, f->rel, rl);
            if (!rc) rc = lcx_buf_append(&b, "\n", 1);
        }
        for (int j = 0; j < f->n_syms && !rc; j++) {
            const lcx_symbol *y = &f->syms[j];
            q = line;
            *q++ = 'S';
            *q++ = ' ';
            q = put_u64(q, y->line);
            *q++ = ' ';
            q = put_u64(q, y->kind);
            *q++ = ' ';
            q = put_str(q, y->name);
            *q++ = ' ';
            q = put_str(q, y->owner[0] ? y->owner : "-");
            *q++ = '\n';
            rc = lcx_buf_append(&b, line, (size_t)(q - line));
        }
    }
    if (!rc) rc = lcx_buf_printf(&b, "END %08x\n", lcx_crc32c(0, b.data, b.len));
    char p[PATH_MAX];
    if (!rc) rc = manifest_path(s, p, sizeof p);
    if (!rc) rc = write_replace(p, b.data, b.len);
    lcx_buf_free(&b);
    if (!rc) s->manifest_dirty = false;
    return rc;
}

/* Parses the manifest into s (files, hot roots, status). LCX_ENOTFOUND when absent,
 * LCX_ECORRUPT / LCX_EMISMATCH when it cannot be trusted. */
static int manifest_read(lcx_scope *s)
{
    char p[PATH_MAX];
    int rc = manifest_path(s, p, sizeof p);
    if (rc) return rc;
    char *t;
    size_t n;
    lcx_symtmp *tmp = NULL;     /* one file's symbol lines before packing */
    rc = lcx_read_file(p, MANIFEST_MAX, &t, &n);
    if (rc < 0) return rc == LCX_ENOTFOUND ? rc : LCX_ECORRUPT;
    rc = LCX_ECORRUPT;
    /* END line */
    if (n < 14 || t[n - 1] != '\n') goto out;
    char *end = t + n - 1;
    while (end > t && end[-1] != '\n') end--;
    unsigned crc;
    if (sscanf(end, "END %8x", &crc) != 1 || crc != lcx_crc32c(0, t, (size_t)(end - t))) goto out;
    *end = 0;
    char *save = NULL;
    char *line = strtok_r(t, "\n", &save);
    if (!line || strcmp(line, "LCXSCOPE 1")) goto out;
    lcx_file_ent *cur = NULL;   /* file whose symbol lines are being read */
    int sym_i = 0, want_syms = 0, cap_tmp = 0;
    uint32_t store_n = lcx_store_count(s->store);
    (void)store_n;
    while ((line = strtok_r(NULL, "\n", &save))) {
        if (!strncmp(line, "root ", 5)) {
            if (strcmp(line + 5, s->root)) goto out;
        } else if (!strncmp(line, "fingerprint ", 12)) {
            if (strcmp(line + 12, lcx_store_fingerprint(s->store))) { rc = LCX_EMISMATCH; goto out; }
        } else if (!strncmp(line, "status ", 7)) {
            s->package = !strcmp(line + 7, "package");
        } else if (line[0] == 'H' && line[1] == ' ') {
            int r, off = 0;
            if (sscanf(line, "H %d %n", &r, &off) != 1 || !off || s->n_hot >= LCX_MAX_HOT) goto out;
            s->hot[s->n_hot].recursive = r != 0;
            snprintf(s->hot[s->n_hot].rel, sizeof s->hot[s->n_hot].rel, "%s", line + off);
            s->n_hot++;
        } else if (line[0] == 'F' && line[1] == ' ') {
            if (cur) goto out;   /* the previous file's symbol lines are missing */
            unsigned long long size, hash;
            long long mt;
            unsigned first, nch;
            int ft, ns, off = 0;
            if (sscanf(line, "F %llu %lld %llx %u %u %d %d %n", &size, &mt, &hash, &first, &nch, &ft, &ns, &off) != 7 ||
                !off || ns < 0 || ns > 1000000 || ft < 0 || ft > 3 || !line[off])
                goto out;
            cur = file_get(s, line + off, true);
            if (!cur) { rc = LCX_ENOMEM; goto out; }
            cur->size = size;
            cur->mtime_ns = mt;
            cur->hash = hash;
            cur->first_id = first;
            cur->n_chunks = nch;
            cur->ft = (uint8_t)ft;
            cur->n_syms = 0;
            sym_i = 0;
            want_syms = ns;
            if (ns > cap_tmp) {
                lcx_symtmp *nt = realloc(tmp, (size_t)ns * sizeof *nt);
                if (!nt) { rc = LCX_ENOMEM; goto out; }
                tmp = nt;
                cap_tmp = ns;
            }
            if (!ns) cur = NULL;   /* nothing to collect */
            s->bytes += size;
        } else if (line[0] == 'S' && line[1] == ' ') {
            if (!cur || sym_i >= want_syms) goto out;
            lcx_symtmp *y = &tmp[sym_i++];
            /* "S line kind name owner": hand-parsed (sscanf was a fifth of a reload) */
            char *q = line + 2, *e;
            unsigned long ln = strtoul(q, &e, 10);
            if (e == q || *e != ' ') goto out;
            q = e + 1;
            long kind = strtol(q, &e, 10);
            if (e == q || *e != ' ' || kind < 0 || kind > 255) goto out;
            q = e + 1;
            char *sp = strchr(q, ' ');
            if (!sp || sp == q || (size_t)(sp - q) >= sizeof y->name) goto out;
            memcpy(y->name, q, (size_t)(sp - q));
            y->name[sp - q] = 0;
            q = sp + 1;
            size_t ol = strlen(q);
            if (!ol || ol >= sizeof y->owner || strchr(q, ' ')) goto out;
            if (strcmp(q, "-")) memcpy(y->owner, q, ol + 1);
            else y->owner[0] = 0;
            y->line = (uint32_t)ln;
            y->kind = (uint8_t)kind;
            if (sym_i == want_syms) {
                if (lcx_symbols_pack(tmp, want_syms, &cur->syms) < 0) { rc = LCX_ENOMEM; goto out; }
                cur->n_syms = want_syms;
                cur = NULL;
            }
        } else {
            goto out;
        }
    }
    if (cur) goto out;
    rc = 0;
out:
    free(tmp);
    free(t);
    return rc;
}

/* ---------------------------------------------------------------- indexing
 *
 * A build keeps both cores busy by overlapping the scope's own work with the store:
 *
 *   prepare   walk → size/mtime check against a frozen copy of the file table → read +
 *             binary sniff → content hash → symbols → chunk spans (prep_file: pure work,
 *             it never touches the scope);
 *   apply     (s->mu held) each prepared file goes into the file table in walk order and
 *             its chunks into the current batch (thousands of chunks from many files);
 *   append    a full batch is appended by an appender thread (lcx_store_prepare: the
 *             store embeds it on every core, no store lock; then lcx_store_commit in
 *             submission order) while the calling thread prepares and applies the next
 *             files; two appends are in flight, so batch N+1 embeds while N commits.
 *
 * Prepare runs inline on the calling thread: the appends are the long part (~180 ms per
 * 4096-chunk batch against ~40 ms to prepare it; the commits' fdatasync is the serial
 * chain), so the appender threads are all the overlap there is to get, and small builds
 * and reloads pay no thread handoffs (a producer thread feeding a bounded queue measured
 * no faster on big trees and cost 3-5 ms of scheduler latency per reload under load).
 * Everything that mutates the scope (file table, symbols, tombstones, inotify watches,
 * stats) happens on the calling thread, in walk order, exactly as in the serial builder.
 *
 * Crash safety of long builds: after a joined append, when CHECKPOINT_MS passed since the
 * last manifest write, the manifest is rewritten (files whose append is still in flight
 * left out: every file it names is in the store). A crash then loses at most the files
 * appended since: on reload they are chunks the manifest does not name, found by
 * reconcile() and tombstoned, and the refresh walk re-indexes those files. */

#define CHECKPOINT_MS 3000.0

enum { PF_FILE, PF_DIR, PF_ODD };                          /* record kinds */
enum { PS_UNCHANGED, PS_FAILED, PS_TOUCHED, PS_READ };     /* PF_FILE outcomes */

/* One walked file (or directory), prepared off-lock by the producer. */
typedef struct prep {
    struct prep *next;
    uint8_t kind, state, ft;
    int rc;                  /* PS_FAILED: lcx_scope_read_file's error */
    uint64_t size, hash;     /* st_size before reading; the bytes read after */
    int64_t mtime_ns;
    char *text;              /* PS_READ: the file text (chunks point into it until the flush) */
    size_t len;
    lcx_symbol *syms;        /* PS_READ: one block, moved to the file entry */
    int n_syms;
    lcx_span *sp;            /* PS_READ: chunk spans */
    int n_sp;
    char rel[];
} prep;

static void prep_free(prep *p)
{
    if (!p) return;
    free(p->text);
    free(p->syms);
    free(p->sp);
    free(p);
}

/* What the file table said about a path when the walk started. */
typedef struct { uint64_t size, hash; int64_t mtime_ns; bool known; } prior;

/* Reads and prepares one file. NULL only on LCX_ENOMEM (or a chunker error) in *err.
 * Read failures are an outcome (PS_FAILED), not an error: they are counted and skipped. */
static prep *prep_file(const char *root, const char *rel, const struct stat *st, const prior *pr,
                       uint64_t max_bytes, int *err)
{
    size_t rl = strlen(rel);
    prep *p = calloc(1, sizeof *p + rl + 1);
    if (!p) { *err = LCX_ENOMEM; return NULL; }
    memcpy(p->rel, rel, rl + 1);
    if (memchr(rel, '\n', rl)) { p->kind = PF_ODD; return p; }   /* cannot be a manifest line */
    p->kind = PF_FILE;
    p->mtime_ns = (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec;
    p->size = (uint64_t)st->st_size;
    if (pr->known && pr->size == p->size && pr->mtime_ns == p->mtime_ns) { p->state = PS_UNCHANGED; return p; }
    char abs[PATH_MAX * 2];
    snprintf(abs, sizeof abs, "%s/%s", root, rel);
    int rc = lcx_scope_read_file(abs, max_bytes, &p->text, &p->len);
    if (rc < 0) { p->state = PS_FAILED; p->rc = rc; return p; }
    p->hash = lcx_hash64(p->text, p->len, 0x11);
    p->size = p->len;
    if (pr->known && pr->hash == p->hash && pr->size == p->len) {   /* touched, not changed */
        p->state = PS_TOUCHED;
        free(p->text);
        p->text = NULL;
        return p;
    }
    p->state = PS_READ;
    p->ft = (uint8_t)lcx_file_type_of(rel);
    int ns = lcx_symbols_extract(rel, p->text, p->len, &p->syms);
    if (ns > 0) p->n_syms = ns;
    else { free(p->syms); p->syms = NULL; }   /* no symbols (or no memory for them): not fatal */
    rc = lcx_chunk_text(p->text, p->len, (lcx_file_type)p->ft, &p->sp, &p->n_sp);
    if (rc < 0) { *err = rc; prep_free(p); return NULL; }
    return p;
}

/* ---- frozen copy of the file table for the producer: open addressing over
 * (hash of rel → entry); the names live in one arena. */
typedef struct {
    uint64_t h;
    uint32_t name;           /* offset into names; UINT32_MAX = empty slot */
    prior pr;
} ptab_ent;
typedef struct {
    ptab_ent *e;
    uint32_t cap;
    char *names;
} ptab;

static void ptab_free(ptab *t)
{
    free(t->e);
    free(t->names);
    memset(t, 0, sizeof *t);
}

static int ptab_build(ptab *t, const lcx_scope *s)
{
    memset(t, 0, sizeof *t);
    size_t bytes = 0;
    uint32_t n = 0;
    for (uint32_t i = 0; i < s->n_files; i++)
        if (s->files[i].rel) { bytes += strlen(s->files[i].rel) + 1; n++; }
    if (!n) return 0;
    if (bytes >= UINT32_MAX) return LCX_ELIMIT;
    uint32_t cap = 64;
    while (cap < n * 2) cap *= 2;
    t->e = malloc((size_t)cap * sizeof *t->e);
    t->names = malloc(bytes);
    if (!t->e || !t->names) { ptab_free(t); return LCX_ENOMEM; }
    for (uint32_t i = 0; i < cap; i++) t->e[i].name = UINT32_MAX;
    t->cap = cap;
    uint32_t off = 0;
    for (uint32_t i = 0; i < s->n_files; i++) {
        const lcx_file_ent *f = &s->files[i];
        if (!f->rel) continue;
        size_t l = strlen(f->rel) + 1;
        memcpy(t->names + off, f->rel, l);
        uint64_t h = str_hash(f->rel);
        uint32_t b = (uint32_t)h & (cap - 1);
        while (t->e[b].name != UINT32_MAX) b = (b + 1) & (cap - 1);
        t->e[b] = (ptab_ent){.h = h, .name = off, .pr = {f->size, f->hash, f->mtime_ns, true}};
        off += (uint32_t)l;
    }
    return 0;
}

static prior ptab_get(const ptab *t, const char *rel)
{
    prior none = {0};
    if (!t->cap) return none;
    uint64_t h = str_hash(rel);
    for (uint32_t b = (uint32_t)h & (t->cap - 1); t->e[b].name != UINT32_MAX; b = (b + 1) & (t->cap - 1))
        if (t->e[b].h == h && !strcmp(t->names + t->e[b].name, rel)) return t->e[b].pr;
    return none;
}

static prior prior_of(const lcx_file_ent *f)
{
    prior p = {0};
    if (f) p = (prior){f->size, f->hash, f->mtime_ns, true};
    return p;
}

/* ---- the consumer: file table + batches (calling thread, s->mu held) */

/* One store append: the chunks of many files. While it is in flight only its appender
 * thread touches it; the file entries it names are marked pending (n_chunks not known
 * yet) and only the consumer thread updates them, when the append has been joined. */
typedef struct batch {
    lcx_store *store;
    lcx_chunk *ch;           /* (n_ch) chunks pointing into the texts of held + file names */
    int n_ch, cap_ch;
    size_t bytes;
    prep *held;              /* records whose texts the chunks point into */
    struct pend { uint32_t file; uint32_t n; } *pend;   /* files in chunk order */
    int n_pend, cap_pend;
    int rc;                  /* the append's result */
    uint32_t first;          /* id of the first chunk */
    pthread_t th;
    bool threaded;
    struct commit_order *ord;
    uint64_t seq;            /* commit turn (submission order) */
} batch;

/* Appends run as lcx_store_prepare (embed + tokenize, no store lock: overlaps the commit
 * of the batch before) + lcx_store_commit in submission order, so chunk ids follow walk
 * order exactly as with one append at a time. */
struct commit_order {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    uint64_t next;           /* seq of the batch whose commit may run */
    uint64_t issued;         /* seqs handed out */
};

/* Appends in flight at once: 3. Each append prepares its batch (embedding and tokenizing
 * on every core, without the store's writer lock) and then commits it (log write +
 * fdatasync + the serial publish) after the batch before it; with several in flight batch
 * N+1 is embedded while batch N is written and published, and the calling thread fills the
 * next one meanwhile. With one in flight ~0.55 of a core sits idle during the serial part
 * of every append; 3 rather than 2 because the commit chain (fdatasync, publish) is a
 * large share of a batch (docs/benchmarks/scope.md). The knob (lcx_scopes__set_fly)
 * allows 1..FLY_CAP for A/B runs. */
#define MAX_FLY 3
#define FLY_CAP 3

typedef struct {
    lcx_scope *s;
    lcx_scopes *m;
    batch *cur;              /* being filled; NULL = none yet */
    batch *fly[FLY_CAP];     /* submitted, oldest first */
    int n_fly;
    struct commit_order ord;
    uint32_t batch_chunks;   /* chunks per append (BATCH_CHUNKS unless a test shrinks it) */
    uint32_t cur_chunks;     /* this append's threshold: ramps up to batch_chunks */
    size_t batch_bytes;
    double last_checkpoint;  /* lcx_now_ms of the last manifest write (0 = no checkpoints) */
    /* progress */
    lcx_scope_progress cb;
    void *ud;
    uint64_t done, read_bytes;
    uint64_t found;          /* files the walk found (the producer's count, at the end) */
} builder;

static int manifest_write(lcx_scope *s);

static void batch_free(batch *t)
{
    if (!t) return;
    while (t->held) {
        prep *n = t->held->next;
        prep_free(t->held);
        t->held = n;
    }
    free(t->ch);
    free(t->pend);
    free(t);
}

static void *batch_run(void *arg)
{
    batch *t = arg;
    lcx_store_prepared *p = NULL;
    int rc = lcx_store_prepare(t->store, t->ch, t->n_ch, &p);
    struct commit_order *o = t->ord;
    pthread_mutex_lock(&o->mu);
    while (o->next != t->seq) pthread_cond_wait(&o->cv, &o->mu);
    pthread_mutex_unlock(&o->mu);
    if (!rc) rc = lcx_store_commit(t->store, p, &t->first);
    t->rc = rc;
    pthread_mutex_lock(&o->mu);   /* the next batch's turn (also after a failed prepare) */
    o->next++;
    pthread_cond_broadcast(&o->cv);
    pthread_mutex_unlock(&o->mu);
    lcx_store_prepared_free(p);
    return NULL;
}

/* Waits for the oldest append and records where its files' chunks went. */
static int complete_oldest(builder *b)
{
    batch *t = b->fly[0];
    memmove(b->fly, b->fly + 1, (size_t)(b->n_fly - 1) * sizeof b->fly[0]);
    b->n_fly--;
    if (t->threaded) pthread_join(t->th, NULL);
    lcx_scope *s = b->s;
    int rc = t->rc;
    if (t->n_ch) s->store_changed = true;
    uint32_t id = t->first;
    for (int i = 0; i < t->n_pend; i++) {
        lcx_file_ent *f = &s->files[t->pend[i].file];
        f->pending = false;
        if (rc == 0) {
            f->first_id = t->pend[i].n ? id : 0;
            f->n_chunks = t->pend[i].n;
            id += t->pend[i].n;
        } else if (f->rel) {
            /* the batch is not in the store: forget these files so a refresh retries them */
            s->bytes -= f->size;
            file_clear(f);
            s->live_files--;
            s->sym_dirty = true;
        }
    }
    s->manifest_dirty = true;
    batch_free(t);
    /* checkpoint: the manifest names only files whose chunks are in the store (pending
     * ones are left out), so a crash from here on re-indexes only what came after */
    if (rc == 0 && b->last_checkpoint > 0 && lcx_now_ms() - b->last_checkpoint >= b->m->checkpoint_ms) {
        manifest_write(s);   /* best effort: the final write reports errors */
        b->last_checkpoint = lcx_now_ms();
    }
    return rc;
}

/* Hands the current batch to an appender thread (inline when wait is set and nothing
 * else is in flight, or when no thread can be started). Returns the first error of the
 * appends completed meanwhile. */
static int submit(builder *b, bool wait)
{
    batch *t = b->cur;
    int rc = 0;
    if (!t || !t->n_pend) return 0;
    b->cur = NULL;
    int max_fly = b->m->max_fly > 0 && b->m->max_fly <= FLY_CAP ? b->m->max_fly : MAX_FLY;
    while (b->n_fly >= max_fly) {
        int r = complete_oldest(b);
        if (!rc) rc = r;
    }
    t->store = b->s->store;
    t->ord = &b->ord;
    t->seq = b->ord.issued++;
    bool serial = b->m->serial_build;
    if (!serial && !(wait && b->n_fly == 0)) t->threaded = pthread_create(&t->th, NULL, batch_run, t) == 0;
    if (!t->threaded) batch_run(t);
    b->fly[b->n_fly++] = t;
    if (serial) {
        int r = complete_oldest(b);
        if (!rc) rc = r;
    }
    return rc;
}

/* Submits the current batch and waits for every append. */
static int flush(builder *b)
{
    int rc = submit(b, true);
    while (b->n_fly) {
        int r = complete_oldest(b);
        if (!rc) rc = r;
    }
    return rc;
}

static void builder_free(builder *b)
{
    flush(b);            /* nothing may stay in flight */
    batch_free(b->cur);
    b->cur = NULL;
    pthread_cond_destroy(&b->ord.cv);
    pthread_mutex_destroy(&b->ord.mu);
}

/* Applies one prepared file (takes p): unchanged files are marked seen, touched ones get
 * their mtime, read failures are counted (and drop the file), changed/new files replace
 * their old chunks and join the batch. */
static int apply_file(builder *b, prep *p)
{
    lcx_scope *s = b->s;
    lcx_file_ent *f = file_get(s, p->rel, false);
    if (p->state == PS_UNCHANGED) {
        if (f) f->seen = true;
        prep_free(p);
        return 0;
    }
    if (p->state == PS_FAILED) {
        int rc = p->rc;
        prep_free(p);
        if (rc == LCX_ENOMEM) return rc;
        if (rc == LCX_ENOTSUP) s->stats.skipped_binary++;
        else if (rc == LCX_ELIMIT) s->stats.skipped_large++;
        else if (rc != LCX_ENOTFOUND) s->stats.skipped_unreadable++;
        return f ? file_remove(s, f) : 0;
    }
    b->read_bytes += p->size;
    s->stats.files_read++;
    if (f && f->hash == p->hash && f->size == p->size) {   /* touched, not changed */
        f->mtime_ns = p->mtime_ns;
        f->seen = true;
        s->manifest_dirty = true;
        prep_free(p);
        return 0;
    }
    if (p->state != PS_READ) { prep_free(p); return LCX_ESTATE; }   /* cannot happen: s->mu is held */
    if (f && f->n_chunks) {
        int rc = lcx_store_delete_path(s->store, p->rel, strlen(p->rel));
        if (rc < 0) { prep_free(p); return rc; }
        s->store_changed = true;
    }
    if (!f) {
        f = file_get(s, p->rel, true);
        if (!f) { prep_free(p); return LCX_ENOMEM; }
    } else {
        s->bytes -= f->size;
        free(f->syms);
        f->syms = NULL;
        f->n_syms = 0;
    }
    f->size = p->size;
    f->mtime_ns = p->mtime_ns;
    f->hash = p->hash;
    f->n_chunks = 0;
    f->first_id = 0;
    f->seen = true;
    f->ft = p->ft;
    s->bytes += p->size;
    s->sym_dirty = true;
    s->manifest_dirty = true;
    f->syms = p->syms;
    f->n_syms = p->n_syms;
    p->syms = NULL;
    uint32_t fidx = (uint32_t)(f - s->files);
    batch *t = b->cur;
    if (!t && !(t = b->cur = calloc(1, sizeof *t))) { prep_free(p); return LCX_ENOMEM; }
    if (t->n_pend == t->cap_pend) {
        int np = t->cap_pend ? t->cap_pend * 2 : 64;
        struct pend *npd = realloc(t->pend, (size_t)np * sizeof *npd);
        if (!npd) { prep_free(p); return LCX_ENOMEM; }
        t->pend = npd;
        t->cap_pend = np;
    }
    if (t->n_ch + p->n_sp > t->cap_ch) {
        int nc = t->cap_ch ? t->cap_ch : 256;
        while (nc < t->n_ch + p->n_sp) nc *= 2;
        lcx_chunk *nch = realloc(t->ch, (size_t)nc * sizeof *nch);
        if (!nch) { prep_free(p); return LCX_ENOMEM; }
        t->ch = nch;
        t->cap_ch = nc;
    }
    t->pend[t->n_pend++] = (struct pend){fidx, (uint32_t)p->n_sp};
    f->pending = true;
    const char *prel = f->rel;   /* stable: f->rel is not freed while the batch is in flight */
    uint32_t plen = (uint32_t)strlen(prel);
    for (int i = 0; i < p->n_sp; i++) {
        lcx_chunk c = lcx_chunk_init();
        c.text = p->text + p->sp[i].off;
        c.text_len = (uint32_t)p->sp[i].len;
        c.path = prel;
        c.path_len = plen;
        c.line_start = p->sp[i].line_start;
        c.line_end = p->sp[i].line_end;
        c.file_type = (lcx_file_type)p->ft;
        t->ch[t->n_ch++] = c;
        t->bytes += p->sp[i].len;
    }
    free(p->sp);
    p->sp = NULL;
    p->next = t->held;
    t->held = p;
    if ((uint32_t)t->n_ch >= b->cur_chunks || t->bytes >= b->batch_bytes) {
        /* ramp-up: the first appends are small so the store starts embedding ~0.15 s
         * sooner on a big tree (the first 4096 chunks take that long to read) */
        if (b->cur_chunks < b->batch_chunks) b->cur_chunks = LCX_MIN(b->cur_chunks * 2, b->batch_chunks);
        return submit(b, false);
    }
    return 0;
}

/* One record from the producer (takes p). */
static int consume(builder *b, prep *p)
{
    if (p->kind == PF_DIR) {
        lcx_scope__watch_dir(b->m, b->s, p->rel);
        prep_free(p);
        return 0;
    }
    int rc = 0;
    if (p->kind == PF_ODD) {
        b->s->stats.skipped_other++;
        prep_free(p);
    } else {
        rc = apply_file(b, p);
    }
    if (rc < 0) return rc;
    b->done++;
    if (b->cb && (b->done & 255) == 0 && b->cb(b->done, b->found > b->done ? b->found : b->done, b->read_bytes, b->ud))
        return LCX_ESTATE;
    return 0;
}

/* ---- the walk (producer of prepared files, consumed in walk order) */
typedef struct {
    builder *b;              /* prepared files go straight to this builder */
    int consume_rc;          /* its first error */
    const char *root;
    lcx_hot_root roots[LCX_MAX_HOT];
    int n_roots;
    uint64_t max_bytes;
    uint64_t found, cap;     /* files found by the walk so far, and the cap */
    bool capped;
    ptab prior;
    lcx_walk_stats ws;
    int rc;                  /* the walk's result (< 0: error) */
} producer;

/* Hands p to the builder; returns 1 when it failed (the walk stops; p is consumed). */
static int emit(producer *P, prep *p)
{
    P->b->found = P->found;
    int rc = consume(P->b, p);
    if (rc) { P->consume_rc = rc; return 1; }
    return 0;
}

static int prod_file_cb(const char *rel, const struct stat *st, void *ud)
{
    producer *P = ud;
    if (P->found >= P->cap) { P->capped = true; return 1; }
    P->found++;
    prior pr = ptab_get(&P->prior, rel);
    int err = 0;
    prep *p = prep_file(P->root, rel, st, &pr, P->max_bytes, &err);
    if (!p) return err;
    return emit(P, p);
}

static int prod_dir_cb(const char *rel, void *ud)
{
    producer *P = ud;
    size_t rl = strlen(rel);
    prep *p = calloc(1, sizeof *p + rl + 1);
    if (!p) return LCX_ENOMEM;
    p->kind = PF_DIR;
    memcpy(p->rel, rel, rl + 1);
    return emit(P, p);
}

static void prod_run(producer *P)
{
    lcx_walk_opts wo = {.max_file_bytes = P->max_bytes};
    int rc = 0;
    for (int i = 0; i < P->n_roots && rc == 0; i++) {
        wo.recursive = P->roots[i].recursive;
        rc = lcx_walk(P->root, P->roots[i].rel, &wo, prod_file_cb, prod_dir_cb, P, &P->ws);
    }
    P->rc = rc < 0 ? rc : 0;   /* > 0: stopped by the cap or by the consumer */
}

/* Walks P's roots and indexes what they hold into b (s->mu held by the caller). Returns
 * the first error (the consumer's, else the walk's); P->found / P->capped / P->ws are
 * final. */
static int run_walk(builder *b, producer *P)
{
    int rc = 0;
    if (b->s->n_files) rc = ptab_build(&P->prior, b->s);
    if (rc == 0) {
        P->b = b;
        prod_run(P);
        rc = P->consume_rc;
    }
    if (!rc) rc = P->rc;
    b->found = P->found;
    ptab_free(&P->prior);
    return rc;
}

static void builder_init(builder *b, lcx_scopes *m, lcx_scope *s)
{
    memset(b, 0, sizeof *b);
    b->s = s;
    b->m = m;
    b->batch_chunks = m->batch_chunks ? m->batch_chunks : BATCH_CHUNKS;
    b->cur_chunks = LCX_MIN(b->batch_chunks, FIRST_BATCH_CHUNKS);
    b->batch_bytes = BATCH_BYTES;
    pthread_mutex_init(&b->ord.mu, NULL);
    pthread_cond_init(&b->ord.cv, NULL);
}

static void stats_from_walk(lcx_scope *s, const lcx_walk_stats *ws)
{
    s->stats.skipped_secret += ws->skipped_secret;
    s->stats.skipped_large += ws->skipped_large;
    s->stats.skipped_unreadable += ws->skipped_unreadable;
    s->stats.skipped_other += ws->skipped_special + ws->skipped_symlink + ws->skipped_lock;
}

/* Walks the Hot roots (or the whole package) and indexes/refreshes; files of the table
 * not seen by the walk are removed. Caller holds s->mu. */
static int build(lcx_scopes *m, lcx_scope *s, lcx_scope_progress cb, void *ud)
{
    double t0 = lcx_now_ms();
    memset(&s->stats, 0, sizeof s->stats);
    for (uint32_t i = 0; i < s->n_files; i++) s->files[i].seen = false;
    builder b;
    builder_init(&b, m, s);
    b.cb = cb;
    b.ud = ud;
    b.last_checkpoint = t0;
    producer *P = calloc(1, sizeof *P);
    if (!P) return LCX_ENOMEM;
    P->root = s->root;
    P->max_bytes = m->o.max_file_bytes;
    P->cap = s->package ? m->o.package_cap : m->o.hot_cap;
    if (s->package) {
        P->roots[0] = (lcx_hot_root){.rel = "", .recursive = true};
        P->n_roots = 1;
    } else {
        memcpy(P->roots, s->hot, (size_t)s->n_hot * sizeof s->hot[0]);
        P->n_roots = s->n_hot;
    }
    int rc = run_walk(&b, P);
    int frc = flush(&b);
    if (!rc) rc = frc;
    builder_free(&b);
    stats_from_walk(s, &P->ws);
    s->truncated = P->capped;
    free(P);
    if (rc == 0) {
        /* files that vanished (or became ignored) since the manifest was written */
        for (uint32_t i = 0; i < s->n_files && rc == 0; i++)
            if (s->files[i].rel && !s->files[i].seen) rc = file_remove(s, &s->files[i]);
        files_compact(s);
    }
    if (rc == 0 && s->manifest_dirty) rc = manifest_write(s);
    if (cb) cb(b.done, b.found, b.read_bytes, ud);
    s->build_ms = lcx_now_ms() - t0;
    s->last_refresh_ms = lcx_now_ms();
    return rc;
}

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

static bool in_hot(const lcx_scope *s, const char *rel_dir)
{
    for (int i = 0; i < s->n_hot; i++) {
        size_t l = strlen(s->hot[i].rel);
        if (!strcmp(s->hot[i].rel, rel_dir)) return true;
        if (s->hot[i].recursive && (!l || (!strncmp(rel_dir, s->hot[i].rel, l) && rel_dir[l] == '/'))) return true;
    }
    return false;
}

bool lcx_scope__covers(const lcx_scope *s, const char *rel)
{
    if (s->package) return true;
    char d[PATH_MAX];
    snprintf(d, sizeof d, "%s", rel);
    char *sl = strrchr(d, '/');
    if (sl) *sl = 0;
    else d[0] = 0;
    return in_hot(s, d);
}

/* Mentions: directories of mentioned files (or mentioned dirs) as Hot roots. Returns
 * true when one of them was not covered yet (→ promotion for a built scope). */
static bool hot_from_mentions(lcx_scope *s, const char *const *mentions, int n, bool add)
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
        if (!in_hot(s, d)) {
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
    int rc = lcx_mkdirs(s->dir);
    if (rc) return rc;
    lcx_store_opts so = m->o.store;
    rc = lcx_store_open(sd, m->emb, &so, &s->store);
    if (rc == LCX_EMISMATCH || rc == LCX_ECORRUPT) {
        fprintf(stderr, "longctx: scope %s: store %s (%s), rebuilding\n", s->root,
                rc == LCX_EMISMATCH ? "made by another embedder" : "failed validation", lcx_strerror(rc));
        nftw(s->dir, rmrf_cb, 16, FTW_DEPTH | FTW_PHYS);
        if ((rc = lcx_mkdirs(s->dir))) return rc;
        rc = lcx_store_open(sd, m->emb, &so, &s->store);
        s->rebuilt = true;
    }
    return rc;
}

static void scope_reset_tables(lcx_scope *s)
{
    for (uint32_t i = 0; i < s->n_files; i++) file_clear(&s->files[i]);
    s->n_files = s->live_files = 0;
    s->bytes = 0;
    s->n_hot = 0;
    fmap_rebuild(s);
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
    lcx_file_ent *f = file_get(s, rel, false);
    s->manifest_dirty = true;
    if (!f) return 0;
    f->n_chunks = 0;   /* already tombstoned above */
    return file_remove(s, f);
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
        int fi = lcx_scope__find_file(s, buf);
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
static int scope_load(lcx_scopes *m, lcx_scope *s, const char *const *mentions, int n_mentions,
                      bool want_package, lcx_scope_progress cb, void *ud)
{
    int rc = open_store(m, s);
    if (rc) return rc;
    rc = manifest_read(s);
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
        hot_from_mentions(s, mentions, n_mentions, true);
    }
    if (!s->package && fresh) {
        /* a counting walk of the Hot roots (no file is opened): when Hot would be small,
         * build the Package right away instead of building Hot and then promoting */
        uint64_t n = 0;
        lcx_walk_opts wo = {.max_file_bytes = m->o.max_file_bytes};
        for (int i = 0; i < s->n_hot && n < m->o.hot_min; i++) {
            lcx_walk_stats ws = {0};
            wo.recursive = s->hot[i].recursive;
            lcx_walk(s->root, s->hot[i].rel, &wo, count_cb, NULL, &n, &ws);
        }
        if (n < m->o.hot_min) {
            s->package = true;
            s->n_hot = 0;
        }
    }
    rc = build(m, s, cb, ud);
    if (rc) return rc;
    if (!s->package && (s->live_files < m->o.hot_min)) {
        /* Hot is small: the whole package costs little more and misses nothing */
        s->package = true;
        s->n_hot = 0;
        rc = build(m, s, cb, ud);
    }
    s->ready = rc == 0;
    return rc;
}

int lcx_scope__promote(lcx_scopes *m, lcx_scope *s)
{
    if (s->package) return 0;
    s->package = true;
    s->n_hot = 0;
    s->low_turns = 0;
    s->manifest_dirty = true;
    int rc = build(m, s, NULL, NULL);
    s->promote_failed = rc != 0;
    return rc;
}

/* ---------------------------------------------------------------- manager */

static void binding_clear(lcx_binding *b);

/* Releases everything a scope holds except the struct itself. */
static void scope_close(lcx_scopes *m, lcx_scope *s)
{
    lcx_scope__unwatch(m, s);
    if (s->store) {
        if (s->manifest_dirty) manifest_write(s);
        /* a snapshot makes the next process's open map the index instead of replaying
         * (re-tokenizing) the whole log: the difference between ~7 and ~1 ms for a small
         * project. The log stays the source of truth if this fails. */
        if (s->store_changed) lcx_store_snapshot(s->store);
        lcx_store_close(s->store);
        s->store = NULL;
    }
    for (uint32_t i = 0; i < s->n_files; i++) file_clear(&s->files[i]);
    free(s->files);
    free(s->fmap);
    free(s->symidx);
    free(s->symrefs);
    s->files = NULL;
    s->fmap = NULL;
    s->symidx = NULL;
    s->symrefs = NULL;
    s->n_files = 0;
    lcx_scope__pending_free(s);
}

static void scope_free(lcx_scopes *m, lcx_scope *s)
{
    scope_close(m, s);
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
    int rc = lcx_mkdirs(sd);
    if (rc == 0 && m->o.watch) rc = lcx_scope__watcher_start(m);
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
    while (m->n_jobs > 0) pthread_cond_wait(&m->cv, &m->mu);   /* they cancel at the next progress call */
    pthread_mutex_unlock(&m->mu);
    lcx_scope__watcher_stop(m);
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
    for (int i = 0; i < m->n_bind; i++) binding_clear(&m->bind[i]);
    free(m->bind);
    pthread_cond_destroy(&m->cv);
    pthread_mutex_destroy(&m->mu);
    free(m);
}

void lcx_scopes__set_batch(lcx_scopes *m, uint32_t batch_chunks, double checkpoint_ms)
{
    m->batch_chunks = batch_chunks;
    m->checkpoint_ms = checkpoint_ms;
}

void lcx_scopes__set_serial(lcx_scopes *m, bool serial)
{
    m->serial_build = serial;
}

void lcx_scopes__set_fly(lcx_scopes *m, int max_fly)
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

int lcx_scopes__acquire(lcx_scopes *m, const char *root, const char *const *mentions, int n_mentions,
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
    if (!s->ready) {
        rc = scope_load(m, s, mentions, n_mentions, package, cb, ud);
        lcx_scope__watcher_kick(m);
    } else if (package && !s->package) {
        rc = lcx_scope__promote(m, s);
    } else if (!s->package && hot_from_mentions(s, mentions, n_mentions, false)) {
        /* SPEC §3: a mentioned path outside Hot promotes to the whole Package; when that
         * fails the Hot index keeps serving (status "error", as the reference) */
        rc = lcx_scope__promote(m, s);
        if (rc) rc = 0;
    } else if (!m->o.watch && lcx_now_ms() - s->last_refresh_ms > 2000) {
        rc = build(m, s, NULL, NULL);   /* no watcher: poll the tree at most every 2 s */
    }
    pthread_mutex_unlock(&s->mu);
    if (rc) {
        bool ready = s->ready;   /* read before the release: s may be freed by it */
        lcx_scopes__release(m, s);
        if (!ready) lcx_scopes_unload(m, root);
        return rc;
    }
    *out = s;
    return 0;
}

void lcx_scopes__release(lcx_scopes *m, lcx_scope *s)
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
    lcx_scope__watcher_kick(m);   /* the watcher drops its reference promptly */
    if (free_now) lcx_scopes__release(m, s);
    return 0;
}

const char *lcx_scope_err_code(int rc)
{
    /* the store is held by another longctx process sharing the data dir */
    return rc == LCX_EEXIST ? "scope_busy" : "internal";
}

void lcx_scope__fill_info(lcx_scope *s, lcx_scope_info *info)
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

int lcx_scopes_index(lcx_scopes *m, const char *path, lcx_scope_progress cb, void *ud,
                     lcx_scope_info *info, const char **err_code)
{
    char canon[PATH_MAX];
    const char *why = NULL;
    int rc = lcx_scope_canonical(path, canon, sizeof canon, &why);
    if (err_code) *err_code = why;
    if (rc) return rc;
    lcx_scope *s;
    double t0 = lcx_now_ms();
    rc = lcx_scopes__acquire(m, canon, NULL, 0, true, cb, ud, &s);
    if (rc) {
        if (err_code) *err_code = lcx_scope_err_code(rc);
        return rc;
    }
    /* an explicit index request always leaves the scope fresh: when it was already loaded
     * (nothing walked by acquire), refresh now — only changed files are read */
    pthread_mutex_lock(&s->mu);
    if (s->last_refresh_ms < t0) rc = build(m, s, cb, ud);
    pthread_mutex_unlock(&s->mu);
    if (info) {
        pthread_mutex_lock(&s->mu);
        lcx_scope__fill_info(s, info);
        pthread_mutex_unlock(&s->mu);
    }
    lcx_scopes__release(m, s);
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
        lcx_scope__fill_info(s, info);
        pthread_mutex_unlock(&s->mu);
        lcx_scopes__release(m, s);
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
        lcx_scope__fill_info(v[i], &out[i]);
        pthread_mutex_unlock(&v[i]->mu);
        lcx_scopes__release(m, v[i]);
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

uint64_t lcx_scopes_mem_bytes(lcx_scopes *m)
{
    uint64_t t = 0;
    pthread_mutex_lock(&m->mu);
    for (lcx_scope *s = m->head; s; s = s->next) {
        t += sizeof *s + (uint64_t)s->cap_files * sizeof(lcx_file_ent) + (uint64_t)s->fmap_cap * 4 +
             (uint64_t)s->symidx_cap * 4 + (uint64_t)s->n_syms * sizeof(lcx_symref);
        if (s->store) t += lcx_store_mem_bytes(s->store);
    }
    pthread_mutex_unlock(&m->mu);
    return t;
}

/* ---------------------------------------------------------------- sessions */

#define MAX_BINDINGS 4096

static void binding_clear(lcx_binding *b)
{
    free(b->session);
    for (int i = 0; i < b->n_cl; i++) free(b->cl[i].dir);
    b->session = NULL;
    b->n_cl = 0;
}

/* The session's binding, created when absent (m->mu held); NULL on OOM. */
static lcx_binding *binding_get_locked(lcx_scopes *m, const char *session)
{
    m->tick++;
    lcx_binding *b = NULL;
    for (int i = 0; i < m->n_bind; i++)
        if (!strcmp(m->bind[i].session, session)) { b = &m->bind[i]; break; }
    if (!b) {
        if (m->n_bind == m->cap_bind && m->cap_bind < MAX_BINDINGS) {
            int nc = m->cap_bind ? m->cap_bind * 2 : 16;
            lcx_binding *nb = realloc(m->bind, (size_t)nc * sizeof *nb);
            if (nb) { m->bind = nb; m->cap_bind = nc; }
        }
        if (m->n_bind < m->cap_bind) {
            b = &m->bind[m->n_bind++];
        } else {   /* full: reuse the least recently used binding */
            b = &m->bind[0];
            for (int i = 1; i < m->n_bind; i++)
                if (m->bind[i].used < b->used) b = &m->bind[i];
            binding_clear(b);
        }
        memset(b, 0, sizeof *b);
        b->session = strdup(session);
        if (!b->session) {   /* drop the slot: move the last binding into it */
            m->n_bind--;
            if (b != &m->bind[m->n_bind]) memcpy(b, &m->bind[m->n_bind], sizeof *b);
            return NULL;
        }
    }
    b->used = m->tick;
    return b;
}

void lcx_scopes__bind(lcx_scopes *m, const char *session, const char *root)
{
    if (!session || !*session) return;
    pthread_mutex_lock(&m->mu);
    lcx_binding *b = binding_get_locked(m, session);
    if (!b) { pthread_mutex_unlock(&m->mu); return; }
    int k;
    for (k = 0; k < b->n; k++)
        if (!strcmp(b->roots[k], root)) break;
    if (k == b->n) {
        if (b->n < LCX_MAX_BOUND) b->n++;
        k = b->n - 1;   /* the oldest binding falls off when full */
    }
    /* move to front */
    for (int j = k; j > 0; j--) memcpy(b->roots[j], b->roots[j - 1], sizeof b->roots[0]);
    snprintf(b->roots[0], sizeof b->roots[0], "%s", root);
    pthread_mutex_unlock(&m->mu);
}

static int path_depth(const char *p)
{
    int d = 0;
    for (const char *c = p; *c; c++)
        if (*c == '/' && c[1] && c[1] != '/') d++;
    return d;
}

void lcx_scopes__cluster_turn(lcx_scopes *m, const char *session, char *const *paths, int n_paths,
                              char *active, size_t cap, char (*spec)[LCX_SCOPE_PATH_MAX], int *n_spec)
{
    if (active && cap) active[0] = 0;
    *n_spec = 0;
    if (!session || !*session) return;
    pthread_mutex_lock(&m->mu);
    lcx_binding *b = binding_get_locked(m, session);
    if (!b) { pthread_mutex_unlock(&m->mu); return; }
    uint32_t turn = ++b->turn;
    int before[LCX_MAX_CLUSTERS];
    for (int i = 0; i < b->n_cl; i++) before[i] = b->cl[i].state;
    for (int p = 0; p < n_paths; p++) {
        const char *path = paths[p];
        const char *sl = strrchr(path, '/');
        if (!sl || sl == path || path[0] != '/') continue;
        size_t dl = (size_t)(sl - path);
        lcx_cluster *c = NULL;
        for (int i = 0; i < b->n_cl && !c; i++)
            if (strlen(b->cl[i].dir) == dl && !strncmp(b->cl[i].dir, path, dl)) c = &b->cl[i];
        if (!c) {
            char *d = strndup(path, dl);
            if (!d) continue;
            if (b->n_cl < LCX_MAX_CLUSTERS) {
                before[b->n_cl] = LCX_CL_NONE;
                c = &b->cl[b->n_cl++];
            } else {   /* full: the least recently fed directory makes room */
                int v = 0;
                for (int i = 1; i < b->n_cl; i++)
                    if (b->cl[i].last_turn < b->cl[v].last_turn) v = i;
                c = &b->cl[v];
                free(c->dir);
                before[v] = LCX_CL_NONE;
            }
            memset(c, 0, sizeof *c);
            c->dir = d;
        }
        uint64_t h = lcx_hash64(path, strlen(path), 0xc1u);
        bool seen = false;
        for (int i = 0; i < c->n_files && !seen; i++) seen = c->files[i] == h;
        if (seen) continue;
        if (c->n_files < LCX_CLUSTER_FILES) c->files[c->n_files++] = h;
        c->last_turn = turn;   /* a fresh mention */
    }
    int best = -1;
    for (int i = 0; i < b->n_cl; i++) {
        lcx_cluster *c = &b->cl[i];
        bool fresh = c->last_turn == turn;
        if (!fresh && turn - c->last_turn >= LCX_CLUSTER_IDLE_TURNS) {   /* demoted: forgotten */
            free(c->dir);
            b->cl[i] = b->cl[b->n_cl - 1];
            before[i] = before[b->n_cl - 1];
            b->n_cl--;
            i--;
            continue;
        }
        if (fresh) {
            if (c->n_files >= LCX_CLUSTER_ACTIVE_FILES || (before[i] == LCX_CL_SPECULATIVE && c->n_files >= LCX_CLUSTER_SPEC_FILES))
                c->state = LCX_CL_ACTIVE;
            else if (c->n_files >= LCX_CLUSTER_SPEC_FILES && c->state == LCX_CL_NONE)
                c->state = LCX_CL_SPECULATIVE;
            if (c->state == LCX_CL_SPECULATIVE && before[i] == LCX_CL_NONE && *n_spec < LCX_CLUSTER_SPECULATE)
                snprintf(spec[(*n_spec)++], LCX_SCOPE_PATH_MAX, "%s", c->dir);
        }
        if (c->state == LCX_CL_ACTIVE && path_depth(c->dir) >= LCX_CLUSTER_MIN_DEPTH &&
            (best < 0 || c->n_files > b->cl[best].n_files ||
             (c->n_files == b->cl[best].n_files && c->last_turn > b->cl[best].last_turn)))
            best = i;
    }
    if (best >= 0 && active && strlen(b->cl[best].dir) < cap) strcpy(active, b->cl[best].dir);
    pthread_mutex_unlock(&m->mu);
}

bool lcx_scopes__ready(lcx_scopes *m, const char *root)
{
    pthread_mutex_lock(&m->mu);
    lcx_scope *s = m->head;
    while (s && strcmp(s->root, root)) s = s->next;
    bool ready = s && __atomic_load_n(&s->ready, __ATOMIC_ACQUIRE);
    pthread_mutex_unlock(&m->mu);
    return ready;
}

bool lcx_scopes__building(lcx_scopes *m, const char *root)
{
    pthread_mutex_lock(&m->mu);
    bool b = false;
    for (int i = 0; i < LCX_MAX_JOBS && !b; i++) b = m->jobs[i] && !strcmp(m->jobs[i], root);
    pthread_mutex_unlock(&m->mu);
    return b;
}

typedef struct {
    lcx_scopes *m;
    int slot;
    char **mentions;
    int n_mentions;
    char tag[24];
} index_job;

static int job_progress(uint64_t done, uint64_t found, uint64_t bytes, void *ud)
{
    (void)done, (void)found, (void)bytes;
    return __atomic_load_n(&((lcx_scopes *)ud)->closing, __ATOMIC_ACQUIRE) ? 1 : 0;
}

static void *job_main(void *arg)
{
    index_job *j = arg;
    lcx_scopes *m = j->m;
    lcx_scope *s = NULL;
    int rc = lcx_scopes__acquire(m, m->jobs[j->slot], (const char *const *)j->mentions, j->n_mentions, false,
                                 job_progress, m, &s);
    if (rc == 0) {
        pthread_mutex_lock(&s->mu);
        if (j->tag[0] && !s->sentinel[0]) snprintf(s->sentinel, sizeof s->sentinel, "%s", j->tag);
        pthread_mutex_unlock(&s->mu);
        lcx_scopes__release(m, s);
    }
    for (int i = 0; i < j->n_mentions; i++) free(j->mentions[i]);
    free(j->mentions);
    pthread_mutex_lock(&m->mu);
    free(m->jobs[j->slot]);
    m->jobs[j->slot] = NULL;
    m->n_jobs--;
    pthread_cond_broadcast(&m->cv);
    pthread_mutex_unlock(&m->mu);
    free(j);
    return NULL;
}

int lcx_scopes__index_async(lcx_scopes *m, const char *root, const char *const *mentions, int n_mentions,
                            const char *sentinel_tag)
{
    index_job *j = calloc(1, sizeof *j);
    if (!j) return LCX_ENOMEM;
    j->m = m;
    if (sentinel_tag) snprintf(j->tag, sizeof j->tag, "%s", sentinel_tag);
    if (n_mentions > 0 && !(j->mentions = calloc((size_t)n_mentions, sizeof *j->mentions))) { free(j); return LCX_ENOMEM; }
    for (int i = 0; i < n_mentions; i++)
        if ((j->mentions[j->n_mentions] = strdup(mentions[i]))) j->n_mentions++;
    int rc = 0;
    pthread_mutex_lock(&m->mu);
    int slot = -1;
    bool running = false;
    for (int i = 0; i < LCX_MAX_JOBS; i++) {
        if (m->jobs[i] && !strcmp(m->jobs[i], root)) running = true;
        if (!m->jobs[i] && slot < 0) slot = i;
    }
    if (running || m->closing) rc = 1;
    else if (slot < 0) rc = LCX_ELIMIT;
    else if (!(m->jobs[slot] = strdup(root))) rc = LCX_ENOMEM;
    if (rc == 0) {
        j->slot = slot;
        pthread_attr_t a;
        pthread_attr_init(&a);
        pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
        pthread_t t;
        if (pthread_create(&t, &a, job_main, j) != 0) {
            free(m->jobs[slot]);
            m->jobs[slot] = NULL;
            rc = LCX_ELIMIT;
        } else {
            m->n_jobs++;
        }
        pthread_attr_destroy(&a);
    }
    pthread_mutex_unlock(&m->mu);
    if (rc == 0) return 0;
    for (int i = 0; i < j->n_mentions; i++) free(j->mentions[i]);
    free(j->mentions);
    free(j);
    return rc == 1 ? 0 : rc;
}

int lcx_scopes__bound_loaded(lcx_scopes *m, const char *session, char (*out)[LCX_SCOPE_PATH_MAX], int max)
{
    if (!session || !*session) return 0;
    int n = 0;
    pthread_mutex_lock(&m->mu);
    for (int i = 0; i < m->n_bind; i++) {
        if (strcmp(m->bind[i].session, session)) continue;
        for (int k = 0; k < m->bind[i].n && n < max; k++) {
            lcx_scope *s = m->head;
            while (s && strcmp(s->root, m->bind[i].roots[k])) s = s->next;
            if (s && __atomic_load_n(&s->ready, __ATOMIC_ACQUIRE)) snprintf(out[n++], LCX_SCOPE_PATH_MAX, "%s", s->root);
        }
        break;
    }
    pthread_mutex_unlock(&m->mu);
    return n;
}

int lcx_scopes_session(lcx_scopes *m, const char *session_id, char (*out)[LCX_SCOPE_PATH_MAX], int max)
{
    if (!session_id) return 0;
    int n = 0;
    pthread_mutex_lock(&m->mu);
    for (int i = 0; i < m->n_bind; i++) {
        if (strcmp(m->bind[i].session, session_id)) continue;
        for (int k = 0; k < m->bind[i].n && n < max; k++) snprintf(out[n++], LCX_SCOPE_PATH_MAX, "%s", m->bind[i].roots[k]);
        break;
    }
    pthread_mutex_unlock(&m->mu);
    return n;
}

/* ---------------------------------------------------------------- low-confidence turns */

void lcx_scopes__note_turn(lcx_scopes *m, lcx_scope *s, float confidence)
{
    pthread_mutex_lock(&s->mu);
    if (confidence < m->o.low_confidence) s->low_turns++;
    else s->low_turns = 0;
    if (!s->package && s->low_turns >= 2) lcx_scope__promote(m, s);   /* SPEC §3: 2 low turns */
    pthread_mutex_unlock(&s->mu);
}

/* ---------------------------------------------------------------- status */

int lcx_scopes_status_text(lcx_scopes *m, char **out)
{
    lcx_scope_info inf[32];
    int n = lcx_scopes_list(m, inf, 32);
    lcx_buf b = {0};
    int rc = 0;
    if (!n) rc = lcx_buf_puts(&b, "[longctx] scope: none\n[longctx] indexed: 0 files, 0 chunks, status none\n");
    for (int i = 0; i < n && !rc; i++)
        rc = lcx_buf_printf(&b, "[longctx] scope: %s (%s)\n[longctx] indexed: %u files, %u chunks, status %s\n",
                            inf[i].scope_path, inf[i].scope_hash, inf[i].files, inf[i].chunks, inf[i].status);
    if (rc) { lcx_buf_free(&b); return rc; }
    if (!b.data) lcx_buf_puts(&b, "");
    size_t len;
    *out = lcx_buf_steal(&b, &len);
    return (int)len;
}

int lcx_scopes_status_json(lcx_scopes *m, char **out)
{
    lcx_scope_info inf[32];
    int n = lcx_scopes_list(m, inf, 32);
    lcx_buf b = {0};
    int rc = lcx_buf_puts(&b, "[");
    for (int i = 0; i < n && !rc; i++) {
        rc = lcx_buf_puts(&b, i ? ",{\"scope_path\":" : "{\"scope_path\":");
        if (!rc) rc = lcx_buf_json_str(&b, inf[i].scope_path, strlen(inf[i].scope_path));
        if (!rc)
            rc = lcx_buf_printf(&b, ",\"scope_hash\":\"%s\",\"sentinel\":\"%s\",\"status\":\"%s\",\"files\":%u,"
                                    "\"chunks\":%u,\"symbols\":%u,\"bytes\":%llu,\"watched_dirs\":%u}",
                                inf[i].scope_hash, inf[i].sentinel, inf[i].status, inf[i].files, inf[i].chunks,
                                inf[i].symbols, (unsigned long long)inf[i].bytes, inf[i].watched_dirs);
    }
    if (!rc) rc = lcx_buf_puts(&b, "]");
    if (rc) { lcx_buf_free(&b); return rc; }
    size_t len;
    *out = lcx_buf_steal(&b, &len);
    return (int)len;
}

/* ---------------------------------------------------------------- watcher apply hooks */

int lcx_scope__apply_path(lcx_scopes *m, lcx_scope *s, const char *rel)
{
    /* caller holds s->mu */
    char abs[PATH_MAX * 2];
    snprintf(abs, sizeof abs, "%s/%s", s->root, rel);
    struct stat st;
    bool exists = lstat(abs, &st) == 0;
    if (exists && S_ISDIR(st.st_mode)) {
        /* new (or moved-in) directory: walk it when the scope covers it */
        bool covered = s->package || in_hot(s, rel);
        if (!covered || lcx_walk_path_ignored(s->root, rel, true)) return 0;
        builder b;
        builder_init(&b, m, s);
        producer *P = calloc(1, sizeof *P);
        if (!P) return LCX_ENOMEM;
        P->root = s->root;
        P->max_bytes = m->o.max_file_bytes;
        P->cap = s->package ? m->o.package_cap : m->o.hot_cap;
        P->found = s->live_files;
        snprintf(P->roots[0].rel, sizeof P->roots[0].rel, "%s", rel);
        P->roots[0].recursive = true;
        P->n_roots = 1;
        int rc = run_walk(&b, P);
        free(P);
        int frc = flush(&b);
        builder_free(&b);
        return rc ? rc : frc;
    }
    lcx_file_ent *f = file_get(s, rel, false);
    if (!exists || !S_ISREG(st.st_mode) || !lcx_scope__covers(s, rel) ||
        lcx_walk_path_ignored(s->root, rel, false) || (uint64_t)st.st_size > m->o.max_file_bytes) {
        int rc = 0;
        if (f) rc = file_remove(s, f);
        if (!exists) {
            /* a directory that went away: drop everything below it */
            size_t l = strlen(rel);
            for (uint32_t i = 0; i < s->n_files && !rc; i++)
                if (s->files[i].rel && !strncmp(s->files[i].rel, rel, l) && s->files[i].rel[l] == '/')
                    rc = file_remove(s, &s->files[i]);
        }
        return rc;
    }
    builder b;
    builder_init(&b, m, s);
    prior pr = prior_of(f);
    int rc = 0;
    prep *p = prep_file(s->root, rel, &st, &pr, m->o.max_file_bytes, &rc);
    if (p) rc = consume(&b, p);
    int frc = flush(&b);
    builder_free(&b);
    return rc ? rc : frc;
}

int lcx_scope__rescan(lcx_scopes *m, lcx_scope *s)
{
    return build(m, s, NULL, NULL);
}

int lcx_scope__save(lcx_scope *s)
{
    return s->manifest_dirty ? manifest_write(s) : 0;
}

int lcx_scope__chunk_range(lcx_scope *s, const char *rel, uint32_t *first, uint32_t *n)
{
    lcx_file_ent *f = file_get(s, rel, false);
    if (!f) return LCX_ENOTFOUND;
    *first = f->first_id;
    *n = f->n_chunks;
    return 0;
}
