/* The indexing pipeline of a scope (lcx__scope_build: cold index, refresh walk, Hot →
 * Package rebuild) and the watcher's apply hooks (lcx__scope_apply_path, lcx__scope_rescan),
 * which run the same prepare / apply steps for single paths.
 * Locks: the calling thread holds s->mu (it applies files and owns the file table);
 * appender threads take no scope lock: they call the store (its own locks) and wait their
 * commit turn on the build's commit_order mutex and condition variable, a leaf (nothing
 * else is taken while holding it). A Hot → Package promotion (s->promoting set) releases
 * s->mu while it reads and prepares a file and while it joins an append — work that
 * touches no scope state — so requests keep searching the Hot index meanwhile; nothing
 * else mutates the scope while s->promoting is set (scopes_int.h), so the table the
 * build resumes with is the one it left. */
#include "scope/scope_int.h"
#include "scope/scopes_int.h"
#include "util/util.h"
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define BATCH_CHUNKS 4096
#define FIRST_BATCH_CHUNKS 512
#define BATCH_BYTES (16u << 20)

/* ---------------------------------------------------------------- indexing
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
 * Crash safety of long builds: after a joined append, when m->checkpoint_ms passed since the
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
    int rc;                  /* PS_FAILED: lcx__scope_read_file's error */
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
    int rc = lcx__scope_read_file(root, rel, max_bytes, &p->text, &p->len);
    if (rc < 0) { p->state = PS_FAILED; p->rc = rc; return p; }
    p->hash = lcx__hash64(p->text, p->len, 0x11);
    p->size = p->len;
    if (pr->known && pr->hash == p->hash && pr->size == p->len) {   /* touched, not changed */
        p->state = PS_TOUCHED;
        free(p->text);
        p->text = NULL;
        return p;
    }
    p->state = PS_READ;
    p->ft = (uint8_t)lcx__file_type_of(rel);
    int ns = lcx__symbols_extract(rel, p->text, p->len, &p->syms);
    if (ns > 0) p->n_syms = ns;
    else { free(p->syms); p->syms = NULL; }   /* no symbols (or no memory for them): not fatal */
    rc = lcx__chunk_text(p->text, p->len, (lcx_file_type)p->ft, &p->sp, &p->n_sp);
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
        uint64_t h = lcx__scope_str_hash(f->rel);
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
    uint64_t h = lcx__scope_str_hash(rel);
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
 * large share of a batch (docs/benchmarks/scope.md). The knob (lcx__scopes_set_fly)
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
    double last_checkpoint;  /* lcx__now_ms of the last manifest write (0 = no checkpoints) */
    /* progress */
    lcx_scope_progress cb;
    void *ud;
    uint64_t done, read_bytes;
    uint64_t found;          /* files the walk found (the producer's count, at the end) */
    bool yield;              /* a promotion: s->mu is released around reads and joins */
} builder;

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
    lcx_scope *s = b->s;
    if (t->threaded) {
        if (b->yield) pthread_mutex_unlock(&s->mu);
        pthread_join(t->th, NULL);
        if (b->yield) pthread_mutex_lock(&s->mu);
    }
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
            lcx__file_clear(f);
            s->live_files--;
            s->sym_dirty = true;
        }
    }
    s->manifest_dirty = true;
    batch_free(t);
    /* checkpoint: the manifest names only files whose chunks are in the store (pending
     * ones are left out), so a crash from here on re-indexes only what came after */
    if (rc == 0 && b->last_checkpoint > 0 && lcx__now_ms() - b->last_checkpoint >= b->m->checkpoint_ms) {
        lcx__manifest_write(s);   /* best effort: the final write reports errors */
        b->last_checkpoint = lcx__now_ms();
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
    lcx_file_ent *f = lcx__file_get(s, p->rel, false);
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
        return f ? lcx__file_remove(s, f) : 0;
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
    /* Room in the batch first: once f below holds the new hash, a failure would leave it
     * claiming content that has no chunks (the next index call would skip the file). */
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
    if (f && f->n_chunks) {
        int rc = lcx_store_delete_path(s->store, p->rel, strlen(p->rel));
        if (rc < 0) { prep_free(p); return rc; }
        s->store_changed = true;
    }
    if (!f) {
        f = lcx__file_get(s, p->rel, true);
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
        lcx__scope_watch_dir(b->m, b->s, p->rel);
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
    bool yield = P->b->yield;
    if (yield) pthread_mutex_unlock(&P->b->s->mu);   /* pure work: it reads no scope state */
    prep *p = prep_file(P->root, rel, st, &pr, P->max_bytes, &err);
    if (yield) pthread_mutex_lock(&P->b->s->mu);
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
        rc = lcx__walk(P->root, P->roots[i].rel, &wo, prod_file_cb, prod_dir_cb, P, &P->ws);
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
int lcx__scope_build(lcx_scopes *m, lcx_scope *s, lcx_scope_progress cb, void *ud)
{
    double t0 = lcx__now_ms();
    memset(&s->stats, 0, sizeof s->stats);
    for (uint32_t i = 0; i < s->n_files; i++) s->files[i].seen = false;
    builder b;
    builder_init(&b, m, s);
    b.cb = cb;
    b.ud = ud;
    b.last_checkpoint = t0;
    b.yield = s->promoting;
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
            if (s->files[i].rel && !s->files[i].seen) rc = lcx__file_remove(s, &s->files[i]);
        lcx__files_compact(s);
    }
    if (rc == 0 && s->manifest_dirty) rc = lcx__manifest_write(s);
    if (cb) cb(b.done, b.found, b.read_bytes, ud);
    s->build_ms = lcx__now_ms() - t0;
    s->last_refresh_ms = lcx__now_ms();
    return rc;
}

/* ---------------------------------------------------------------- watcher apply hooks */

int lcx__scope_apply_path(lcx_scopes *m, lcx_scope *s, const char *rel)
{
    /* caller holds s->mu */
    char abs[PATH_MAX * 2];
    snprintf(abs, sizeof abs, "%s/%s", s->root, rel);
    struct stat st;
    bool exists = lstat(abs, &st) == 0;
    if (exists && S_ISDIR(st.st_mode)) {
        /* new (or moved-in) directory: walk it when the scope covers it */
        bool covered = s->package || lcx__scope_in_hot(s, rel);
        if (!covered || lcx__walk_path_ignored(s->root, rel, true)) return 0;
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
    lcx_file_ent *f = lcx__file_get(s, rel, false);
    if (!exists || !S_ISREG(st.st_mode) || !lcx__scope_covers(s, rel) ||
        lcx__walk_path_ignored(s->root, rel, false) || (uint64_t)st.st_size > m->o.max_file_bytes) {
        int rc = 0;
        if (f) rc = lcx__file_remove(s, f);
        if (!exists) {
            /* a directory that went away: drop everything below it */
            size_t l = strlen(rel);
            for (uint32_t i = 0; i < s->n_files && !rc; i++)
                if (s->files[i].rel && !strncmp(s->files[i].rel, rel, l) && s->files[i].rel[l] == '/')
                    rc = lcx__file_remove(s, &s->files[i]);
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

int lcx__scope_rescan(lcx_scopes *m, lcx_scope *s)
{
    return lcx__scope_build(m, s, NULL, NULL);
}

