/* Internal state of the scope manager (scopes.c, files.c, manifest.c, load.c, build.c,
 * bindings.c) and the watcher (watch.c). Not a public contract; other libraries use
 * scopes_api.h (the calls on an opaque lcx_scope). */
#ifndef LCX_SCOPES_INT_H
#define LCX_SCOPES_INT_H

#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include "scope/scope_int.h"
#include "scope/scopes_api.h"
#include "util/util.h"

#define LCX_MAX_HOT 64        /* Hot walk roots per scope */
#define LCX_MAX_PENDING 8192  /* watcher paths queued per scope before falling back to a rescan */

typedef struct {
    char *rel;                /* scope-relative path (NULL = removed slot) */
    uint64_t size;
    int64_t mtime_ns;
    uint64_t hash;            /* lcx__hash64 of the bytes */
    uint32_t first_id, n_chunks;   /* chunk ids [first_id, first_id + n_chunks) in the store */
    uint8_t ft;
    bool seen;                /* marked by the current walk */
    bool pending;             /* its chunks are in an append in flight (not in the manifest yet) */
    lcx_symbol *syms;
    int n_syms;
} lcx_file_ent;

typedef struct {
    uint64_t hash;
    uint32_t file;            /* index + 1 into files */
    uint32_t sym;             /* index into that file's syms */
    uint32_t next;            /* ref index + 1 of the next definition of the same name, 0 = end */
} lcx_symref;

typedef struct { char rel[512]; bool recursive; } lcx_hot_root;

struct lcx_scope {
    lcx_scope *next;          /* manager list, most recently used first */
    int refs;                 /* users (requests, watcher); freed at 0 once dead */
    bool dead;                /* unlinked from the manager */
    char root[PATH_MAX];
    char hash[17];
    char sentinel[24];
    char dir[PATH_MAX + 64];  /* data_dir/scopes/<hash> */

    pthread_mutex_t mu;       /* guards everything below */
    bool ready, package, loaded_from_disk, rebuilt, truncated;
    bool promote_failed;      /* the last Hot → Package rebuild failed (the old index serves) */
    /* A Hot → Package rebuild is scheduled or running (lcx__scope_promote): its build lets
     * go of mu while it reads files and waits for appends, so requests keep searching the
     * Hot chunks meanwhile; everything else that would build or mutate the table (the
     * watcher, another promotion, an explicit index, the no-watch poll) backs off or waits
     * on pcv, which is broadcast when it ends. */
    bool promoting;
    pthread_cond_t pcv;
    lcx_store *store;
    lcx_file_ent *files;
    uint32_t n_files, cap_files, live_files;
    uint32_t *fmap, fmap_cap; /* open addressing: file index + 1 */
    lcx_symref *symrefs;      /* one per definition */
    uint32_t *symidx;         /* open addressing over distinct names: ref index + 1 of the chain head */
    uint32_t symidx_cap, n_syms;
    bool sym_dirty, manifest_dirty;
    bool store_changed;       /* chunks appended/tombstoned since the last snapshot */
    uint64_t bytes;
    lcx_hot_root hot[LCX_MAX_HOT];
    int n_hot;
    int low_turns;
    struct {
        uint32_t skipped_binary, skipped_large, skipped_unreadable, skipped_secret, skipped_other;
        uint32_t files_read;
    } stats;
    double build_ms, last_refresh_ms;

    /* watcher (watch.c); wd table guarded by mu */
    int inotify_fd;
    int *wd;                  /* watch descriptors */
    char **wd_rel;            /* their scope-relative directories */
    int n_wd, cap_wd;
    char **pending;           /* changed scope-relative paths waiting for the debounce */
    int n_pending;
    bool pending_rescan;
    double last_event_ms, first_event_ms;
};

/* Path clusters (code.c uses them when detection finds nothing): a directory whose files
 * a session keeps naming. See lcx__scopes_cluster_turn. */
#define LCX_MAX_CLUSTERS 32       /* directories tracked per session (least recent replaced) */
#define LCX_CLUSTER_FILES 64      /* distinct files remembered per directory */
#define LCX_CLUSTER_SPEC_FILES 3  /* distinct files for a speculative candidate */
#define LCX_CLUSTER_ACTIVE_FILES 5 /* distinct files for an active cluster at once */
#define LCX_CLUSTER_IDLE_TURNS 5  /* turns without a fresh mention before demotion */
#define LCX_CLUSTER_MIN_DEPTH 3   /* an active cluster pins a scope only this deep (/a/b/c) */
enum { LCX_CL_NONE = 0, LCX_CL_SPECULATIVE, LCX_CL_ACTIVE };
typedef struct {
    char *dir;                /* the mentions' directory as written (malloc'd) */
    uint64_t files[LCX_CLUSTER_FILES];   /* lcx__hash64 of each distinct file path */
    int n_files;
    int state;                /* LCX_CL_* */
    uint32_t last_turn;       /* last turn with a fresh mention */
} lcx_cluster;

typedef struct {
    char *session;
    uint64_t used;
    char roots[LCX_MAX_BOUND][LCX_SCOPE_PATH_MAX];
    int n;
    lcx_cluster cl[LCX_MAX_CLUSTERS];
    int n_cl;
    uint32_t turn;            /* turns fed to the cluster tracker */
} lcx_binding;

#define LCX_MAX_JOBS 8            /* background index builds at once (x-longctx-async, clusters) */

struct lcx_scopes {
    lcx_scopes_opts o;
    char data_dir[PATH_MAX];
    const lcx_embedder *emb;
    pthread_mutex_t mu;       /* list, counts, bindings */
    lcx_scope *head;
    lcx_scope *dying;         /* unloaded, waiting for their last user (store still open) */
    pthread_cond_t cv;        /* broadcast when a dying scope is freed */
    uint32_t n_loaded;
    uint64_t gen;             /* bumped when the list changes (the watcher re-polls) */
    lcx_binding *bind;
    int n_bind, cap_bind;
    uint64_t tick;
    /* watcher thread */
    pthread_t wth;
    bool wth_running, stopping;
    int wake[2];              /* pipe: wakes the watcher when scopes come and go */
    /* indexing knobs (tests shrink them to exercise multi-batch builds and checkpoints) */
    uint32_t batch_chunks;    /* chunks per store append (0 = default 4096) */
    double checkpoint_ms;     /* manifest rewritten after a flush this long after the last */
    bool serial_build;        /* benchmarks: one append at a time, on the calling thread */
    int max_fly;              /* benchmarks: appends in flight (0 = default) */
    /* background builds (lcx__scopes_index_async); guarded by mu, cv broadcast on exit */
    char *jobs[LCX_MAX_JOBS]; /* roots being built (NULL = free slot) */
    int n_jobs;
    bool closing;             /* lcx_scopes_close: jobs cancel at their next progress call */
    bool promote_hold;        /* test hook: background promotions wait before building */
};

/* scopes.c and the files above */
/* Test hook: chunks per append batch (0 = default) and the checkpoint interval (ms; 0 =
 * after every flush). Call before any scope is loaded. */
void lcx__scopes_set_batch(lcx_scopes *m, uint32_t batch_chunks, double checkpoint_ms);
/* Benchmark hook: build serially (walk, read, chunk and append on the calling thread, one
 * append at a time) — the A/B reference for the pipeline. */
void lcx__scopes_set_serial(lcx_scopes *m, bool serial);
/* Benchmark hook: appends in flight at once (1..3; 0 = default 2). */
void lcx__scopes_set_fly(lcx_scopes *m, int max_fly);
int lcx__scope_find_file(const lcx_scope *s, const char *rel);
bool lcx__scope_covers(const lcx_scope *s, const char *rel);
/* The Hot → Package rebuild (s->mu held, s->promoting set by the caller, which the call
 * clears, broadcasting s->pcv). The build releases s->mu while it reads files and waits
 * for appends (see promoting). */
int lcx__scope_promote(lcx_scopes *m, lcx_scope *s, lcx_scope_progress cb, void *ud);
/* bindings.c: runs lcx__scope_promote of s (s->promoting already set) on a background job
 * that holds its own reference; falls back to promoting on the calling thread when no job
 * can start. No lock held. */
void lcx__scopes_promote_async(lcx_scopes *m, lcx_scope *s);
/* Test hooks: hold (or let go) background promotions before they build; wait until no
 * background job runs. */
void lcx__scopes_hold_promotions(lcx_scopes *m, bool hold);
void lcx__scopes_wait_jobs(lcx_scopes *m);
int lcx__scope_apply_path(lcx_scopes *m, lcx_scope *s, const char *rel);  /* s->mu held */
int lcx__scope_rescan(lcx_scopes *m, lcx_scope *s);                        /* s->mu held */
int lcx__scope_save(lcx_scope *s);                                         /* s->mu held */

/* ---- shared by the manager's own files (scopes.c, files.c, manifest.c, load.c,
 * build.c, bindings.c); s->mu held unless said otherwise */
static inline uint64_t lcx__scope_str_hash(const char *s) { return lcx__hash64(s, strlen(s), 0x5c0be); }
/* files.c: the file table */
void lcx__fmap_rebuild(lcx_scope *s);
void lcx__file_clear(lcx_file_ent *f);
/* The entry of rel (created when create and absent); NULL when absent or out of memory. */
lcx_file_ent *lcx__file_get(lcx_scope *s, const char *rel, bool create);
/* Tombstones f's chunks (by path) and drops it from the table. */
int lcx__file_remove(lcx_scope *s, lcx_file_ent *f);
void lcx__files_compact(lcx_scope *s);
/* manifest.c */
int lcx__manifest_write(lcx_scope *s);
int lcx__manifest_read(lcx_scope *s);
/* load.c */
/* Opens the scope's store and manifest (rebuilding when either fails a check), then
 * builds or refreshes it. */
int lcx__scope_load(lcx_scopes *m, lcx_scope *s, const char *const *mentions, int n_mentions, bool package,
                    lcx_scope_progress cb, void *ud);
/* rel_dir lies under one of the scope's Hot roots. */
bool lcx__scope_in_hot(const lcx_scope *s, const char *rel_dir);
/* Adds (add) or only checks for mentions outside the Hot roots; true when one was. */
bool lcx__hot_from_mentions(lcx_scope *s, const char *const *mentions, int n, bool add);
/* build.c: walks the scope (Package: everything; Hot: its roots) and indexes what changed. */
int lcx__scope_build(lcx_scopes *m, lcx_scope *s, lcx_scope_progress cb, void *ud);
/* bindings.c (m->mu held) */
void lcx__binding_clear(lcx_binding *b);

/* watch.c */
int lcx__scope_watcher_start(lcx_scopes *m);
void lcx__scope_watcher_stop(lcx_scopes *m);
void lcx__scope_watcher_kick(lcx_scopes *m);
void lcx__scope_watch_dir(lcx_scopes *m, lcx_scope *s, const char *rel);  /* s->mu held */
void lcx__scope_unwatch(lcx_scopes *m, lcx_scope *s);
void lcx__scope_pending_free(lcx_scope *s);

#endif
