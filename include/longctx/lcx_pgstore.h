/* lcx_pgstore — rescue sessions shared through PostgreSQL (src/pgstore, docs/multinode.md).
 *
 * PostgreSQL is the source of truth; every longctx node keeps a local lcx_store per
 * session as a cache (its BM25 + dense index) and the sequence number it has applied.
 *
 *   lcx_pgstore_opts o = lcx_pgstore_defaults();
 *   o.conninfo = "postgresql://h1:5432,h2:5432/db?target_session_attrs=read-write";
 *   lcx_pgstore *pg;  rc = lcx_pgstore_open(&o, &pg, msg, sizeof msg);   // connects + migrates
 *   lcx_pgstore_write_result w;
 *   rc = lcx_pgstore_write(pg, sid, chunks, n, NULL, 0, &w);   // durable (sync standby) at 0
 *   rc = lcx_pgstore_apply(pg, st, sid, chunks, n, &w);        // local store follows PG's order
 *   rc = lcx_pgstore_sync(pg, ss, sid, &n_fetched);            // before a read: catch up if behind
 *
 * Thread-safe: a pool of connections, one per concurrent call. Errors: LCX_ETIMEOUT when
 * the write deadline passed (no synchronous standby, lock wait, unreachable primary: the
 * outcome may be unknown; a retry with the same idempotency key is stored once),
 * LCX_ENET when PostgreSQL cannot be reached, LCX_EIO for an SQL error, LCX_ENOTSUP for a
 * database whose schema is newer than this build. */
#ifndef LONGCTX_LCX_PGSTORE_H
#define LONGCTX_LCX_PGSTORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "longctx/lcx.h"

#ifdef __cplusplus
extern "C" {
#endif

#define LCX_PGSTORE_SCHEMA_VERSION 1   /* the schema this build writes (migrated at open) */

typedef struct {
    const char *conninfo;      /* libpq URI or key=value string (multi-host for failover) */
    double write_timeout_s;    /* one /evict/write, retries included (default 10) */
    double read_timeout_s;     /* the "am I behind?" check and catch-up (default 5) */
    double connect_timeout_s;  /* one connection attempt per host (default 2) */
    int max_conns;             /* pool size (default 8) */
    bool notify_reads;         /* false (default): every sync asks PostgreSQL (read-your-writes across
                                * nodes); true: a LISTEN thread tracks each session's last seq and a
                                * sync that is not behind asks nothing (a write acknowledged elsewhere
                                * is seen once its NOTIFY arrives, typically < 1 ms later) */
} lcx_pgstore_opts;

typedef struct lcx_pgstore lcx_pgstore;

typedef struct {
    int64_t first_seq;         /* seq of the first span of the batch */
    int64_t last_seq;          /* first_seq + n - 1 */
    int inserted;              /* spans new in PostgreSQL (< n when a retry found them stored) */
    int attempts;              /* transactions tried (> 1 after a lost connection or reply) */
} lcx_pgstore_write_result;

typedef struct {
    uint64_t writes, write_retries, write_timeouts, syncs, spans_fetched, reads_stale;
    uint64_t reads_local;      /* notify mode: syncs answered without a query */
    uint64_t snapshots_saved, snapshots_loaded, scopes_published, scopes_loaded;
    uint32_t sessions_tracked;
    bool connected;            /* a pooled connection is open now */
} lcx_pgstore_stats;

lcx_pgstore_opts lcx_pgstore_defaults(void);
/* Connects (to a read-write server), creates or migrates the schema under an advisory
 * lock (LCX_ENOTSUP for a newer schema). msg gets a human sentence on failure. */
int lcx_pgstore_open(const lcx_pgstore_opts *o, lcx_pgstore **out, char *msg, size_t msg_len);
void lcx_pgstore_close(lcx_pgstore *pg);
/* One transaction: bumps the session's next_seq (row lock: writers of a session are
 * ordered), inserts the n spans (span_uuid unique per session; ON CONFLICT DO NOTHING),
 * NOTIFY lcx_spans, COMMIT. Returns 0 once committed (with synchronous_commit=on and
 * synchronous standbys: replicated). Retried on connection loss until write_timeout_s.
 * idem_key (may be NULL → random uuids): the span uuids are derived from (sid, key, index),
 * so a client repeating a write whose answer it lost stores it once. */
int lcx_pgstore_write(lcx_pgstore *pg, const char *sid, const lcx_chunk *c, int n, const char *idem_key,
                      size_t key_len, lcx_pgstore_write_result *res);
/* Brings the local store st of sid up to w->last_seq in seq order: appends the batch
 * directly when nothing else came between (prep: the same n chunks already prepared with
 * lcx_store_prepare, committed then; may be NULL), else fetches the missing spans from
 * PostgreSQL. prep stays the caller's to free. */
int lcx_pgstore_apply(lcx_pgstore *pg, lcx_store *st, const char *sid, const lcx_chunk *c, int n,
                      lcx_store_prepared *prep, const lcx_pgstore_write_result *w);
/* Read-your-writes before a read: asks PostgreSQL for the session's last seq and, when
 * the local copy is behind (or absent), creates it in ss and fetches what is missing.
 * LCX_ENOTFOUND: PostgreSQL has no such session. *fetched (may be NULL): spans applied. */
int lcx_pgstore_sync(lcx_pgstore *pg, lcx_sessions *ss, const char *sid, uint32_t *fetched);
/* Hibernate: catches the local copy up, hibernates it and, when its files are complete on
 * disk (dir: the session's directory in ss), stores them as a snapshot (lcx_snapshots,
 * with the seq they hold; older ones are dropped); marks the session hibernated.
 * *n_chunks: spans of the copy. LCX_ENOTFOUND: PostgreSQL has no such session.
 * Resume: marks it active; a node without a copy first loads the latest snapshot into
 * dir (no re-embedding), then fetches what follows. Returns 1 when the session was
 * hibernated, 0 when it was not, LCX_ENOTFOUND when unknown. */
int lcx_pgstore_hibernate(lcx_pgstore *pg, lcx_sessions *ss, const char *sid, const char *dir, uint32_t *n_chunks);
int lcx_pgstore_resume(lcx_pgstore *pg, lcx_sessions *ss, const char *sid, const char *dir);
/* Code scopes: publish packs a scope's directory (manifest + store/) as a new version of
 * scope (its canonical path; hash: its directory name) and returns the version; fetch
 * unpacks the current version into scopes_dir/<hash>/ when this node has no directory
 * for it yet (1 = unpacked, 0 = nothing to do or none published). A node that sees the
 * same files then loads the scope instead of re-reading them. */
int lcx_pgstore_scope_publish(lcx_pgstore *pg, const char *scope, const char *hash, const char *dir);
int lcx_pgstore_scope_fetch(lcx_pgstore *pg, const char *scope, const char *scopes_dir);
/* Spans PostgreSQL holds for sid (count), for checks and status. */
int lcx_pgstore_count(lcx_pgstore *pg, const char *sid, int64_t *n);
void lcx_pgstore_stats_get(lcx_pgstore *pg, lcx_pgstore_stats *s);

#ifdef __cplusplus
}
#endif
#endif
