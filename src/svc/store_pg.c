/* longctx-svc: the shared PostgreSQL store (--store), as hooks of the rescue routes.
 * The local sessions become a cache of PostgreSQL (data_dir/pg-cache); src/pgstore does
 * the SQL and the catch-up. Guarantees and failure behaviour: docs/multinode.md. */
#define _GNU_SOURCE 1   /* nftw */
#include "svc/svc.h"
#include "longctx/lcx_pgstore.h"

#include <ftw.h>
#include <limits.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define IDEM_KEY_MAX 256   /* bytes of an Idempotency-Key header */

static int rm_entry(const char *p, const struct stat *sb, int flag, struct FTW *f)
{
    (void)sb, (void)flag, (void)f;
    remove(p);
    return 0;
}

static void cache_path(const lcx_svc_config *c, char *out, size_t n)
{
    snprintf(out, n, "%s/pg-cache", c->data_dir);
}

void lcx__svc_pg_cache_dir(const lcx_svc_config *c, char *out, size_t n)
{
    cache_path(c, out, n);
    /* a copy from an earlier run may be behind or ahead of what this node will track:
     * start empty and rebuild from PostgreSQL on demand */
    nftw(out, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

int lcx__svc_pg_init(lcx_svc *svc)
{
    if (!svc->cfg.store[0]) return 0;
    lcx_pgstore_opts o = lcx_pgstore_defaults();
    o.conninfo = svc->cfg.store;
    o.write_timeout_s = svc->cfg.store_write_timeout_s;
    o.max_conns = svc->cfg.threads + 2;
    const char *rd = svc->cfg.store_reads;
    if (rd[0] && strcmp(rd, "strict") && strcmp(rd, "notify")) {
        fprintf(stderr, "longctx-svc: --store-reads must be strict or notify (got '%s')\n", rd);
        return LCX_EINVAL;
    }
    o.notify_reads = !strcmp(rd, "notify");
    char msg[512];
    lcx_pgstore *pg;
    int rc = lcx_pgstore_open(&o, &pg, msg, sizeof msg);
    if (rc < 0) {
        fprintf(stderr, "longctx-svc: --store: %s\n", msg[0] ? msg : lcx_strerror(rc));
        return rc;
    }
    svc->pg = pg;
    return 0;
}

void lcx__svc_pg_fini(lcx_svc *svc)
{
    lcx_pgstore_close(svc->pg);
    svc->pg = NULL;
}

void lcx__svc_pg_status(lcx_svc *svc, lcx_buf *text, cJSON *json)
{
    if (!svc->pg) return;
    lcx_pgstore_stats s;
    lcx_pgstore_stats_get(svc->pg, &s);
    if (text) {
        lcx__buf_printf(text,
                       "[longctx] store: postgresql (schema %d), %llu writes, %llu retried, %llu timed out, %llu syncs, "
                       "%llu spans fetched, %llu reads served stale, %llu reads without a query, %u sessions tracked\n",
                       LCX_PGSTORE_SCHEMA_VERSION, (unsigned long long)s.writes, (unsigned long long)s.write_retries,
                       (unsigned long long)s.write_timeouts, (unsigned long long)s.syncs,
                       (unsigned long long)s.spans_fetched, (unsigned long long)s.reads_stale,
                       (unsigned long long)s.reads_local, s.sessions_tracked);
        return;
    }
    cJSON *o = cJSON_AddObjectToObject(json, "store");
    if (!o) return;
    cJSON_AddStringToObject(o, "kind", "postgresql");
    cJSON_AddNumberToObject(o, "schema_version", LCX_PGSTORE_SCHEMA_VERSION);
    cJSON_AddNumberToObject(o, "writes", (double)s.writes);
    cJSON_AddNumberToObject(o, "write_retries", (double)s.write_retries);
    cJSON_AddNumberToObject(o, "write_timeouts", (double)s.write_timeouts);
    cJSON_AddNumberToObject(o, "syncs", (double)s.syncs);
    cJSON_AddNumberToObject(o, "spans_fetched", (double)s.spans_fetched);
    cJSON_AddNumberToObject(o, "reads_stale", (double)s.reads_stale);
    cJSON_AddNumberToObject(o, "reads_local", (double)s.reads_local);
    cJSON_AddNumberToObject(o, "snapshots_saved", (double)s.snapshots_saved);
    cJSON_AddNumberToObject(o, "snapshots_loaded", (double)s.snapshots_loaded);
    cJSON_AddNumberToObject(o, "scopes_published", (double)s.scopes_published);
    cJSON_AddNumberToObject(o, "scopes_loaded", (double)s.scopes_loaded);
    cJSON_AddStringToObject(o, "reads", svc->cfg.store_reads[0] ? svc->cfg.store_reads : "strict");
    cJSON_AddNumberToObject(o, "sessions_tracked", s.sessions_tracked);
}

typedef struct {
    lcx_store *st;
    const lcx_chunk *cs;
    int m;
    lcx_store_prepared *p;
    int rc;
} prep_job;

static void *prep_main(void *arg)
{
    prep_job *j = arg;
    j->rc = lcx_store_prepare(j->st, j->cs, j->m, &j->p);
    return NULL;
}

void lcx__svc_pg_write(lcx_svc *svc, lcx_req *req, lcx_resp *resp, const char *id, lcx_store *st, lcx_chunk *cs, int m)
{
    size_t kl = 0;
    const char *key = lcx__req_header_n(req, "Idempotency-Key", &kl);
    if (key && (kl == 0 || kl > IDEM_KEY_MAX)) {
        lcx__resp_error(resp, 400, "invalid_idempotency_key", "Idempotency-Key must be 1..%d bytes", IDEM_KEY_MAX);
        return;
    }
    if ((uint64_t)lcx_store_count(st) + (uint64_t)m > svc->cfg.max_chunks_per_session) {
        lcx__resp_error(resp, 429, "session_full", "the session would exceed %u chunks (--max-chunks-per-session)",
                       svc->cfg.max_chunks_per_session);
        return;
    }
    /* the local embedding + tokenization runs while PostgreSQL commits (they are the two
     * big costs of a write; docs/multinode.md) */
    prep_job pj = {st, cs, m, NULL, 0};
    pthread_t pt;
    bool threaded = pthread_create(&pt, NULL, prep_main, &pj) == 0;
    lcx_pgstore_write_result w;
    int rc = lcx_pgstore_write(svc->pg, id, cs, m, key, kl, &w);
    if (threaded) pthread_join(pt, NULL);
    if (rc < 0) lcx_store_prepared_free(pj.p), pj.p = NULL;
    if (rc == LCX_ETIMEOUT || rc == LCX_ENET) {
        lcx__resp_header(resp, "Retry-After", "1");
        lcx__resp_error(resp, 503, "store_unavailable",
                       "the shared store did not confirm the write within %g s (no synchronous standby, or no "
                       "reachable primary); nothing was acknowledged: retry (with the same Idempotency-Key to "
                       "store it once)",
                       svc->cfg.store_write_timeout_s);
        return;
    }
    if (rc < 0) {   /* a full disk on the server (SQLSTATE class 53) is LCX_ENOSPC: 507, as locally */
        const char *code;
        int hs = lcx__svc_err_status(rc, &code);
        lcx__resp_error(resp, hs, hs == 500 ? "store_error" : code, "the shared store refused the write: %s",
                       lcx_strerror(rc));
        return;
    }
    /* counted as the embedded path counts them; a retry under the same Idempotency-Key
     * that stored nothing new counts nothing */
    if (w.inserted == m) lcx__svc_metrics_write(svc, cs, m);
    else lcx__svc_metrics_spans(svc, w.inserted);
    /* durable in PostgreSQL now; a failed local apply only delays this node's copy (the
     * next read fetches what is missing) */
    int arc = lcx_pgstore_apply(svc->pg, st, id, cs, m, pj.rc == 0 ? pj.p : NULL, &w);
    lcx_store_prepared_free(pj.p);
    if (arc < 0) fprintf(stderr, "longctx-svc: store: local copy of a session lags: %s\n", lcx_strerror(arc));
    lcx__buf_printf(lcx__resp_json_buf(resp, 200),
                   "{\"accepted\":%d,\"session_total\":%u,\"seq\":[%lld,%lld],\"attempts\":%d}", m,
                   lcx_store_count(st), (long long)w.first_seq, (long long)w.last_seq, w.attempts);
}

void lcx__svc_pg_sync(lcx_svc *svc, const char *id)
{
    int rc = lcx_pgstore_sync(svc->pg, svc->sessions, id, NULL);
    if (rc < 0 && rc != LCX_ENOTFOUND && !svc->cfg.quiet)
        fprintf(stderr, "longctx-svc: store: serving session from the local copy (%s)\n", lcx_strerror(rc));
}

/* The session's directory in the local copy: the store's layout (src/store/sessions.c:
 * DATA_DIR/sessions/<first 16 bytes of sha256(id) in hex>) under the cache dir. */
static void session_dir(lcx_svc *svc, const char *id, char *out, size_t n)
{
    char cache[4200], hex[33];
    cache_path(&svc->cfg, cache, sizeof cache);
    lcx__sha256_hex(id, strlen(id), hex, 16);
    snprintf(out, n, "%s/sessions/%s", cache, hex);
}

void lcx__svc_pg_scope_fetch(lcx_svc *svc, const char *scope)
{
    char real[PATH_MAX], dir[4200];
    if (!realpath(scope, real)) return;   /* the indexer answers the error */
    snprintf(dir, sizeof dir, "%s/scopes", svc->cfg.data_dir);
    int rc = lcx_pgstore_scope_fetch(svc->pg, real, dir);
    if (rc < 0 && !svc->cfg.quiet)
        fprintf(stderr, "longctx-svc: store: scope %s not fetched (%s): indexing it here\n", real, lcx_strerror(rc));
}

void lcx__svc_pg_scope_publish(lcx_svc *svc, const char *scope_path, const char *scope_hash)
{
    char dir[4400];
    snprintf(dir, sizeof dir, "%s/scopes/%s", svc->cfg.data_dir, scope_hash);
    int rc = lcx_pgstore_scope_publish(svc->pg, scope_path, scope_hash, dir);
    if (rc < 0) fprintf(stderr, "longctx-svc: store: scope %s not published: %s\n", scope_path, lcx_strerror(rc));
}

static uint32_t local_count(lcx_svc *svc, const char *id)
{
    lcx_store *st;
    if (lcx_sessions_acquire(svc->sessions, id, false, &st) < 0) return 0;
    uint32_t n = lcx_store_count(st);
    lcx_sessions_release(svc->sessions, st);
    return n;
}

bool lcx__svc_pg_session_op(lcx_svc *svc, lcx_resp *resp, const char *id, int op)
{
    if (op == 0) {   /* hibernation-status: the local view, caught up first */
        lcx__svc_pg_sync(svc, id);
        return false;
    }
    bool did = false;
    uint32_t n = 0;
    int rc;
    char dir[4400];
    session_dir(svc, id, dir, sizeof dir);
    if (op == 1) {
        rc = lcx_pgstore_hibernate(svc->pg, svc->sessions, id, dir, &n);
        did = rc == 0;
        if (rc < 0 && rc != LCX_ENOTFOUND) {
            lcx__resp_error(resp, 503, "store_unavailable", "hibernate: the shared store: %s", lcx_strerror(rc));
            return true;
        }
        lcx_buf *b = lcx__resp_json_buf(resp, 200);
        lcx__buf_puts(b, "{\"session_id\":");
        lcx__buf_json_str(b, id, strlen(id));
        lcx__buf_printf(b, ",\"hibernated\":%s,\"n_chunks\":%u}", did ? "true" : "false", did ? n : 0);
        return true;
    }
    rc = lcx_pgstore_resume(svc->pg, svc->sessions, id, dir);
    if (rc < 0 && rc != LCX_ENOTFOUND) {
        lcx__resp_error(resp, 503, "store_unavailable", "resume: the shared store: %s", lcx_strerror(rc));
        return true;
    }
    did = rc == 1;
    if (did) n = local_count(svc, id);
    lcx_buf *b = lcx__resp_json_buf(resp, 200);
    lcx__buf_puts(b, "{\"session_id\":");
    lcx__buf_json_str(b, id, strlen(id));
    lcx__buf_printf(b, ",\"resumed\":%s,\"n_chunks\":%u,\"error\":null}", did ? "true" : "false", n);
    return true;
}
