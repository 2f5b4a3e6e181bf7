/* Sessions manager: session id → store, with hibernation.
 *
 * Layout: data_dir/sessions/<32 hex = first 16 bytes of sha256(id)>/ holds the store
 * (chunks.log, index.snap) plus `id` (the raw id, so a directory can be mapped back and a
 * hash collision detected) and `hibernated_at` (unix seconds, text). Ids are any UTF-8
 * string of 1..256 bytes; they never reach the file system except hashed.
 *
 * States per session: on disk only (hibernated or never loaded since start), or in RAM
 * (a loaded lcx_store). acquire() loads on demand; hibernate() = snapshot + close;
 * resume() = load (the store refuses another embedder's data: LCX_EMISMATCH).
 * Memory policy: after every acquire, while more than max_sessions stores are in RAM or
 * their lcx_store_mem_bytes sum exceeds max_mem_bytes, the least recently used idle one
 * (refcount 0, not the one just acquired) is hibernated. The janitor hibernates stores
 * idle longer than idle_hibernate_s. A store with a non-zero refcount is never closed:
 * hibernate() on a busy session is deferred until its last release().
 *
 * Locking: one mutex for the table; loading and hibernating run with the mutex released
 * (the entry is marked busy, others wait on the condition variable), so a slow load of one
 * session does not stall requests for the others. */
#include "longctx/lcx.h"
#include "store/store_fmt.h"
#include "store/store_int.h"
#include "util/util.h"
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define ID_MAX LCX_SESSION_ID_MAX
#define NBUCKETS 1024

typedef struct sess {
    struct sess *next;
    char *id;
    size_t id_len;
    char *dir;
    lcx_store *st;
    int refs;
    int busy;              /* loading or hibernating: others wait */
    int want_hib;
    double last_used;      /* monotonic seconds */
    double hibernated_at;  /* unix seconds, 0 = never */
} sess;

struct lcx_sessions {
    lcx_sessions_opts o;
    char *root;            /* data_dir/sessions */
    const lcx_embedder *emb;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    sess *b[NBUCKETS];
    uint32_t active;
};

static double mono_s(void) { return (double)lcx__now_ns() / 1e9; }
static double unix_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

int lcx_sessions_open(const lcx_sessions_opts *o, const lcx_embedder *emb, lcx_sessions **out)
{
    if (out) *out = NULL;
    if (!o || !o->data_dir || !*o->data_dir || !emb || !out) return LCX_EINVAL;
    lcx_sessions *ss = calloc(1, sizeof *ss);
    if (!ss) return LCX_ENOMEM;
    ss->o = *o;
    if (!ss->o.max_sessions) ss->o.max_sessions = 1024;
    if (!ss->o.max_mem_bytes) ss->o.max_mem_bytes = 4ull << 30;
    if (!(ss->o.idle_hibernate_s > 0)) ss->o.idle_hibernate_s = 1800;
    ss->emb = emb;
    ss->root = lcx__path_join(o->data_dir, "sessions");
    ss->o.data_dir = NULL;   /* not kept: the caller's string */
    if (!ss->root) { free(ss); return LCX_ENOMEM; }
    int rc = lcx__mkdirs(ss->root);
    if (rc) { free(ss->root); free(ss); return rc; }
    pthread_mutex_init(&ss->mu, NULL);
    pthread_cond_init(&ss->cv, NULL);
    *out = ss;
    return 0;
}

static double read_hib_time(const char *dir)
{
    char *p = lcx__path_join(dir, "hibernated_at"), *data = NULL;
    double t = 0;
    if (p && lcx__read_file(p, 64, &data, NULL) == 0) t = strtod(data, NULL);
    free(p);
    free(data);
    return isfinite(t) && t > 0 ? t : 0;
}

void lcx_sessions_close(lcx_sessions *ss)
{
    if (!ss) return;
    for (int i = 0; i < NBUCKETS; i++) {
        for (sess *e = ss->b[i]; e;) {
            sess *n = e->next;
            lcx_store_close(e->st);   /* snapshots large fresh tails itself */
            free(e->id);
            free(e->dir);
            free(e);
            e = n;
        }
    }
    pthread_mutex_destroy(&ss->mu);
    pthread_cond_destroy(&ss->cv);
    free(ss->root);
    free(ss);
}

static int check_id(const char *id, size_t *len)
{
    if (!id) return LCX_EINVAL;
    size_t n = strnlen(id, ID_MAX + 1);
    if (n == 0 || n > ID_MAX || !lcx__utf8_valid(id, n)) return LCX_EINVAL;
    *len = n;
    return 0;
}

static sess *find(lcx_sessions *ss, const char *id, size_t n, uint32_t *bucket)
{
    uint32_t h = (uint32_t)lcx__hash64(id, n, 0x5e55) & (NBUCKETS - 1);
    if (bucket) *bucket = h;
    for (sess *e = ss->b[h]; e; e = e->next)
        if (e->id_len == n && !memcmp(e->id, id, n)) return e;
    return NULL;
}

static sess *find_or_add(lcx_sessions *ss, const char *id, size_t n)
{
    uint32_t h;
    sess *e = find(ss, id, n, &h);
    if (e) return e;
    e = calloc(1, sizeof *e);
    if (!e) return NULL;
    e->id = malloc(n + 1);
    char hex[65];
    lcx__sha256_hex(id, n, hex, 16);
    e->dir = lcx__path_join(ss->root, hex);
    if (!e->id || !e->dir) {
        free(e->id);
        free(e->dir);
        free(e);
        return NULL;
    }
    memcpy(e->id, id, n);
    e->id[n] = 0;
    e->id_len = n;
    e->hibernated_at = read_hib_time(e->dir);
    e->next = ss->b[h];
    ss->b[h] = e;
    return e;
}

/* Unlinks and frees e (mutex held). Only for entries nobody uses or waits on: not loaded,
 * not busy, no references (waiters only ever wait on busy entries). */
static void drop_entry(lcx_sessions *ss, sess *e)
{
    uint32_t h = (uint32_t)lcx__hash64(e->id, e->id_len, 0x5e55) & (NBUCKETS - 1);
    for (sess **pp = &ss->b[h]; *pp; pp = &(*pp)->next)
        if (*pp == e) {
            *pp = e->next;
            free(e->id);
            free(e->dir);
            free(e);
            return;
        }
}

static int dir_has_store(const sess *e)
{
    char *p = lcx__path_join(e->dir, "chunks.log");
    struct stat st;
    int ok = p && stat(p, &st) == 0;
    free(p);
    return ok;
}

/* A session whose creation failed (a full disk: LCX_ENOSPC) acknowledged nothing: its
 * directory goes, so no half-made store (a log shorter than its header) is left to fail
 * validation or to count as a session. Best effort. */
static void remove_new(const char *dir)
{
    static const char *const names[] = {LCX_LOG_NAME, "id", "id.tmp", LCX_SNAP_NAME, LCX_SNAP_NAME ".tmp"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char *p = lcx__path_join(dir, names[i]);
        if (p) unlink(p);
        free(p);
    }
    rmdir(dir);
}

/* Loads e's store (mutex held on entry and exit; released meanwhile). */
static int load(lcx_sessions *ss, sess *e, bool create)
{
    int exists = dir_has_store(e);
    if (!exists && !create) return LCX_ENOTFOUND;
    e->busy = 1;
    pthread_mutex_unlock(&ss->mu);
    int rc = 0;
    char *idp = lcx__path_join(e->dir, "id");
    if (!idp) rc = LCX_ENOMEM;
    if (!rc && exists) {
        char *data = NULL;
        size_t dl = 0;
        if (lcx__read_file(idp, ID_MAX + 1, &data, &dl) == 0 && (dl != e->id_len || memcmp(data, e->id, dl)))
            rc = LCX_EEXIST;   /* another id hashed to this directory */
        free(data);
    }
    lcx_store *st = NULL;
    if (!rc) rc = lcx_store_open(e->dir, ss->emb, &ss->o.store, &st);
    if (!rc && !exists) rc = lcx__write_file_atomic(idp, e->id, e->id_len);
    if (rc && st) {
        lcx_store_close(st);
        st = NULL;
    }
    if (rc && !exists && rc != LCX_EEXIST) remove_new(e->dir);
    free(idp);
    pthread_mutex_lock(&ss->mu);
    e->busy = 0;
    if (!rc) {
        e->st = st;
        ss->active++;
    }
    pthread_cond_broadcast(&ss->cv);
    return rc;
}

/* Snapshot + close (mutex held on entry and exit; e->refs == 0, e->st != NULL). The entry
 * stays busy until the store is closed and the time recorded, so nobody can load a second
 * instance of the same directory meanwhile. */
static int hibernate_entry(lcx_sessions *ss, sess *e)
{
    e->busy = 1;
    lcx_store *st = e->st;
    pthread_mutex_unlock(&ss->mu);
    int rc = lcx_store_snapshot(st);
    double t = unix_s();
    if (rc == 0) {
        lcx_store_close(st);
        char *p = lcx__path_join(e->dir, "hibernated_at"), buf[64];   /* e->dir is immutable */
        if (p) {
            int n = snprintf(buf, sizeof buf, "%.3f\n", t);
            lcx__write_file_atomic(p, buf, (size_t)n);
            free(p);
        }
    }
    pthread_mutex_lock(&ss->mu);
    if (rc == 0) {
        e->st = NULL;
        ss->active--;
        e->hibernated_at = t;
        e->want_hib = 0;
    }
    e->busy = 0;
    pthread_cond_broadcast(&ss->cv);
    return rc;
}

static uint64_t mem_locked(lcx_sessions *ss)
{
    uint64_t m = 0;
    for (int i = 0; i < NBUCKETS; i++)
        for (sess *e = ss->b[i]; e; e = e->next)
            if (e->st && !e->busy) m += lcx_store_mem_bytes(e->st);   /* busy: being closed */
    return m;
}

/* LRU hibernation while over the limits (mutex held). keep: never chosen. */
static void enforce_limits(lcx_sessions *ss, const sess *keep)
{
    for (int guard = 0; guard < 1 << 20; guard++) {
        int over_n = ss->active > ss->o.max_sessions;
        int over_m = !over_n && mem_locked(ss) > ss->o.max_mem_bytes;
        if (!over_n && !over_m) return;
        sess *lru = NULL;
        for (int i = 0; i < NBUCKETS; i++)
            for (sess *e = ss->b[i]; e; e = e->next)
                if (e->st && !e->refs && !e->busy && e != keep && (!lru || e->last_used < lru->last_used)) lru = e;
        if (!lru || hibernate_entry(ss, lru)) return;
    }
}

int lcx_sessions_acquire(lcx_sessions *ss, const char *id, bool create, lcx_store **out)
{
    if (out) *out = NULL;
    size_t n;
    if (!ss || !out) return LCX_EINVAL;
    int rc = check_id(id, &n);
    if (rc) return rc;
    pthread_mutex_lock(&ss->mu);
    sess *e = find_or_add(ss, id, n);
    if (!e) { pthread_mutex_unlock(&ss->mu); return LCX_ENOMEM; }
    while (e->busy) pthread_cond_wait(&ss->cv, &ss->mu);
    if (!e->st && (rc = load(ss, e, create))) {
        /* unknown ids must not accumulate entries (status/retrieve probes with random ids) */
        if (!e->st && !e->busy && !e->refs && !dir_has_store(e)) drop_entry(ss, e);
        pthread_mutex_unlock(&ss->mu);
        return rc;
    }
    e->refs++;
    e->last_used = mono_s();
    *out = e->st;
    enforce_limits(ss, e);
    pthread_mutex_unlock(&ss->mu);
    return 0;
}

void lcx_sessions_release(lcx_sessions *ss, lcx_store *s)
{
    if (!ss || !s) return;
    pthread_mutex_lock(&ss->mu);
    for (int i = 0; i < NBUCKETS; i++)
        for (sess *e = ss->b[i]; e; e = e->next)
            if (e->st == s && e->refs > 0) {
                e->refs--;
                e->last_used = mono_s();
                if (!e->refs && e->want_hib && !e->busy) hibernate_entry(ss, e);
                pthread_mutex_unlock(&ss->mu);
                return;
            }
    pthread_mutex_unlock(&ss->mu);
}

int lcx_sessions_hibernate(lcx_sessions *ss, const char *id)
{
    size_t n;
    if (!ss) return LCX_EINVAL;
    int rc = check_id(id, &n);
    if (rc) return rc;
    pthread_mutex_lock(&ss->mu);
    sess *e = find_or_add(ss, id, n);
    if (!e) { pthread_mutex_unlock(&ss->mu); return LCX_ENOMEM; }
    while (e->busy) pthread_cond_wait(&ss->cv, &ss->mu);
    if (!e->st) {
        rc = dir_has_store(e) ? 0 : LCX_ENOTFOUND;   /* already on disk only */
        if (rc) drop_entry(ss, e);
    }
    else if (e->refs) e->want_hib = 1;                         /* on last release */
    else rc = hibernate_entry(ss, e);
    pthread_mutex_unlock(&ss->mu);
    return rc;
}

int lcx_sessions_resume(lcx_sessions *ss, const char *id)
{
    lcx_store *st;
    int rc = lcx_sessions_acquire(ss, id, false, &st);
    if (rc) return rc;
    lcx_sessions_release(ss, st);
    return 0;
}

int lcx_sessions_status(lcx_sessions *ss, const char *id, lcx_session_status *stt)
{
    size_t n;
    if (!ss || !stt) return LCX_EINVAL;
    int rc = check_id(id, &n);
    if (rc) return rc;
    memset(stt, 0, sizeof *stt);
    pthread_mutex_lock(&ss->mu);
    sess *e = find_or_add(ss, id, n);
    if (!e) { pthread_mutex_unlock(&ss->mu); return LCX_ENOMEM; }
    while (e->busy) pthread_cond_wait(&ss->cv, &ss->mu);
    stt->hibernated_at = e->hibernated_at;
    if (e->st) {
        /* every acknowledged chunk is on disk (fsync'd), so both counts are the same */
        stt->in_ram = stt->on_disk = true;
        stt->n_chunks_in_ram = stt->n_chunks_on_disk = lcx_store_count(e->st);
        snprintf(stt->embedder_fingerprint, sizeof stt->embedder_fingerprint, "%s", lcx_store_fingerprint(e->st));
        pthread_mutex_unlock(&ss->mu);
        return 0;
    }
    char *dir = strdup(e->dir);
    if (!dir_has_store(e)) {
        drop_entry(ss, e);
        pthread_mutex_unlock(&ss->mu);
        free(dir);
        return LCX_ENOTFOUND;
    }
    pthread_mutex_unlock(&ss->mu);
    if (!dir) return LCX_ENOMEM;
    uint32_t live = 0;
    rc = lcx__store_peek(dir, stt->embedder_fingerprint, sizeof stt->embedder_fingerprint, &live);
    free(dir);
    if (rc == LCX_ENOTFOUND) return rc;
    if (rc) return rc;
    stt->on_disk = true;
    stt->n_chunks_on_disk = live;
    return 0;
}

int lcx_sessions_janitor(lcx_sessions *ss)
{
    if (!ss) return LCX_EINVAL;
    int count = 0;
    pthread_mutex_lock(&ss->mu);
    double now = mono_s();
    for (int again = 1; again;) {
        again = 0;
        for (int i = 0; i < NBUCKETS && !again; i++)
            for (sess *e = ss->b[i]; e; e = e->next)
                if (e->st && !e->refs && !e->busy && now - e->last_used > ss->o.idle_hibernate_s) {
                    if (hibernate_entry(ss, e) == 0) count++;
                    else e->last_used = now;   /* failed (e.g. disk full): retry next round */
                    again = 1;                 /* the table may have changed while unlocked */
                    break;
                }
    }
    pthread_mutex_unlock(&ss->mu);
    return count;
}

uint32_t lcx_sessions_active(lcx_sessions *ss)
{
    if (!ss) return 0;
    pthread_mutex_lock(&ss->mu);
    uint32_t n = ss->active;
    pthread_mutex_unlock(&ss->mu);
    return n;
}

uint64_t lcx_sessions_mem_bytes(lcx_sessions *ss)
{
    if (!ss) return 0;
    pthread_mutex_lock(&ss->mu);
    uint64_t m = mem_locked(ss);
    pthread_mutex_unlock(&ss->mu);
    return m;
}
