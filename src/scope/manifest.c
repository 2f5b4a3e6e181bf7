/* A scope's manifest: what is indexed, written atomically after builds (and as a
 * checkpoint during long ones) and read back on load so that a reload re-indexes nothing.
 *
 * On disk, per scope: data_dir/scopes/<scope_hash>/
 *   store/     an lcx_store (chunk texts, vectors, BM25; crash-safe, fingerprint-checked)
 *   manifest   what is indexed, written by lcx__manifest_write() below (atomic replace):
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
 * manifest's hash only gets its mtime updated.
 *
 * Locks: callers hold s->mu; the store is read for its fingerprint and count only. */
#include "scope/scope_int.h"
#include "scope/scopes_int.h"
#include "util/util.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MANIFEST_MAX (512u << 20)

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
    if (!f) return lcx__eio(errno);
    errno = 0;
    size_t w = fwrite(data, 1, len, f);
    int e = w != len ? errno : 0;   /* a full disk: ENOSPC, LCX_ENOSPC */
    if (fclose(f) != 0 && !e) e = errno ? errno : EIO;
    if (!e && w != len) e = EIO;
    if (!e && rename(tmp, path) != 0) e = errno;
    if (e) { unlink(tmp); return lcx__eio(e); }
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
int lcx__manifest_write(lcx_scope *s)
{
    lcx_buf b = {.cap = MANIFEST_MAX};
    int rc = lcx__buf_printf(&b, "LCXSCOPE 1\nroot %s\nfingerprint %s\nstatus %s\n", s->root,
                            lcx_store_fingerprint(s->store), s->package ? "package" : "hot");
    for (int i = 0; i < s->n_hot && !rc; i++)
        rc = lcx__buf_printf(&b, "H %d %s\n", s->hot[i].recursive ? 1 : 0, s->hot[i].rel);
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
            rc = lcx__buf_append(&b, line, (size_t)(q - line));
        } else {   /* a very long path: in pieces */
            rc = lcx__buf_append(&b, line, (size_t)(q - line));
            if (!rc) rc = lcx__buf_append(&b, f->rel, rl);
            if (!rc) rc = lcx__buf_append(&b, "\n", 1);
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
            rc = lcx__buf_append(&b, line, (size_t)(q - line));
        }
    }
    if (!rc) rc = lcx__buf_printf(&b, "END %08x\n", lcx__crc32c(0, b.data, b.len));
    char p[PATH_MAX];
    if (!rc) rc = manifest_path(s, p, sizeof p);
    if (!rc) rc = write_replace(p, b.data, b.len);
    lcx__buf_free(&b);
    if (!rc) s->manifest_dirty = false;
    return rc;
}

/* Parses the manifest into s (files, hot roots, status). LCX_ENOTFOUND when absent,
 * LCX_ECORRUPT / LCX_EMISMATCH when it cannot be trusted. */
int lcx__manifest_read(lcx_scope *s)
{
    char p[PATH_MAX];
    int rc = manifest_path(s, p, sizeof p);
    if (rc) return rc;
    char *t;
    size_t n;
    lcx_symtmp *tmp = NULL;     /* one file's symbol lines before packing */
    rc = lcx__read_file(p, MANIFEST_MAX, &t, &n);
    if (rc < 0) return rc == LCX_ENOTFOUND ? rc : LCX_ECORRUPT;
    rc = LCX_ECORRUPT;
    /* END line */
    if (n < 14 || t[n - 1] != '\n') goto out;
    char *end = t + n - 1;
    while (end > t && end[-1] != '\n') end--;
    unsigned crc;
    if (sscanf(end, "END %8x", &crc) != 1 || crc != lcx__crc32c(0, t, (size_t)(end - t))) goto out;
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
            cur = lcx__file_get(s, line + off, true);
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
                if (lcx__symbols_pack(tmp, want_syms, &cur->syms) < 0) { rc = LCX_ENOMEM; goto out; }
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

int lcx__scope_save(lcx_scope *s)
{
    return s->manifest_dirty ? lcx__manifest_write(s) : 0;
}

