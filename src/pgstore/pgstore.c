/* Rescue sessions shared through PostgreSQL: connection pool, deadlines, schema and
 * migration, the write transaction, catch-up of the local stores. Design and guarantees:
 * docs/multinode.md. */
#include "longctx/lcx_pgstore.h"
#include "pgstore/pgstore_int.h"
#include "util/util.h"

#include <libpq-fe.h>
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>
#include <time.h>

#define FETCH_BATCH 4096        /* spans per catch-up query: bounds the memory of one fetch */
#define N_STRIPES 64            /* per-session apply locks (hashed) */
#define N_BUCKETS 4096          /* applied-seq table */
#define SPAN_PARTITIONS 8       /* hash partitions of spans (by sid) */
#define RETRY_PAUSE_MS 100      /* between write attempts after a connection failure */
#define ADVISORY_KEY "7103352"  /* 0x6c6378 ("lcx"): serialises migrations of concurrent nodes */
#define XSTR(x) STR_(x)
#define STR_(x) #x

typedef struct applied {
    struct applied *next;
    int64_t seq;                /* highest seq applied to the local store (atomic stores; written under the stripe lock) */
    int64_t known;              /* highest seq PostgreSQL announced (NOTIFY or a query) during listener epoch `epoch` */
    uint64_t epoch;
    char sid[];
} applied;

struct lcx_pgstore {
    char *conninfo;
    lcx_pgstore_opts o;
    pthread_mutex_t mu;         /* pool + applied table + stats */
    pthread_cond_t cv;
    PGconn **idle;
    int n_idle, n_open;
    applied **tab;
    uint32_t n_tracked;
    pthread_mutex_t stripe[N_STRIPES];
    lcx_pgstore_stats st;
    int lose_reply;             /* test hook (LCX_PGSTORE_TEST_LOSE_REPLY): drop the first reply of each write */
    /* LISTEN lcx_spans: while the listener is connected (epoch counts its connections),
     * a session's `known` is exact, so notify-mode reads skip the query when not behind */
    pthread_t lt;
    bool lt_running, lt_up;
    int lt_stop;                /* atomic */
    uint64_t lt_epoch;
};

/* ------------------------------------------------------------------ time, pool */

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static void notice_quiet(void *arg, const char *msg) { (void)arg; (void)msg; }

static PGconn *conn_new(lcx_pgstore *pg)
{
    char ct[32];
    snprintf(ct, sizeof ct, "%d", (int)(pg->o.connect_timeout_s + 0.999));
    /* defaults first: with expand_dbname the caller's string (dbname) overrides them */
    const char *kw[] = {"connect_timeout", "application_name", "dbname", NULL};
    const char *val[] = {ct, "longctx", pg->conninfo, NULL};
    PGconn *c = PQconnectdbParams(kw, val, 1);
    if (!c) return NULL;
    if (PQstatus(c) != CONNECTION_OK) {
        PQfinish(c);
        return NULL;
    }
    PQsetNoticeProcessor(c, notice_quiet, NULL);
    return c;
}

/* A connection from the pool (a fresh one when none is idle). NULL: cannot connect. */
static PGconn *conn_get(lcx_pgstore *pg)
{
    pthread_mutex_lock(&pg->mu);
    while (!pg->n_idle && pg->n_open >= pg->o.max_conns) pthread_cond_wait(&pg->cv, &pg->mu);
    if (pg->n_idle) {
        PGconn *c = pg->idle[--pg->n_idle];
        pthread_mutex_unlock(&pg->mu);
        return c;
    }
    pg->n_open++;
    pthread_mutex_unlock(&pg->mu);
    PGconn *c = conn_new(pg);
    if (!c) {
        pthread_mutex_lock(&pg->mu);
        pg->n_open--;
        pthread_cond_signal(&pg->cv);
        pthread_mutex_unlock(&pg->mu);
    }
    return c;
}

/* Returns c to the pool, or closes it when broken (bad) or in a transaction. */
static void conn_put(lcx_pgstore *pg, PGconn *c, bool bad)
{
    if (!c) return;
    if (!bad && (PQstatus(c) != CONNECTION_OK || PQtransactionStatus(c) != PQTRANS_IDLE)) bad = true;
    if (bad) PQfinish(c);
    pthread_mutex_lock(&pg->mu);
    if (bad) pg->n_open--;
    else pg->idle[pg->n_idle++] = c;
    pthread_cond_signal(&pg->cv);
    pthread_mutex_unlock(&pg->mu);
}

/* ------------------------------------------------------------------ queries with a deadline */

int lcx__pgstore_sqlstate_err(const char *ss)
{
    if (!ss || strlen(ss) != 5 || ss[0] != '5' || ss[1] != '3') return LCX_EIO;
    if (!strcmp(ss, "53200")) return LCX_ENOMEM;
    if (!strcmp(ss, "53000") || !strcmp(ss, "53100") || !strcmp(ss, "53400")) return LCX_ENOSPC;
    return LCX_EIO;   /* 53300 too_many_connections and future codes: not about storage */
}

/* An SQL error on a healthy connection (q_run_f's LCX_EIO / LCX_ENOSPC / LCX_ENOMEM): the
 * connection stays pooled and the error is final. */
static bool sql_error(int rc) { return rc == LCX_EIO || rc == LCX_ENOSPC || rc == LCX_ENOMEM; }

/* Runs one statement (text parameters) and waits for its result until deadline (ms on
 * the monotonic clock). 0: *res is the result (PGRES_COMMAND_OK / TUPLES_OK; caller
 * PQclear's); LCX_EIO: SQL error (the connection is fine; msg in err; LCX_ENOSPC /
 * LCX_ENOMEM by its SQLSTATE, lcx__pgstore_sqlstate_err); LCX_ENET: the
 * connection broke; LCX_ETIMEOUT: the deadline passed (the caller must drop the
 * connection: the statement may still run, its outcome is unknown). For the last two the
 * outcome of a write is unknown. */
static int q_run_f(PGconn *c, const char *sql, int np, const char *const *vals, const int *lens, const int *fmts,
                   int result_fmt, double deadline, PGresult **res, char *err, size_t el);

static int q_run(PGconn *c, const char *sql, int np, const char *const *vals, double deadline, PGresult **res,
                 char *err, size_t el)
{
    return q_run_f(c, sql, np, vals, NULL, NULL, 0, deadline, res, err, el);
}

/* q_run with per-parameter lengths/formats (1 = binary) and the result format. */
static int q_run_f(PGconn *c, const char *sql, int np, const char *const *vals, const int *lens, const int *fmts,
                   int result_fmt, double deadline, PGresult **res, char *err, size_t el)
{
    *res = NULL;
    if (err && el) err[0] = 0;
    if (PQstatus(c) != CONNECTION_OK) return LCX_ENET;
    /* without parameters: the simple protocol, which takes several statements (migrations) */
    if (!(np || result_fmt ? PQsendQueryParams(c, sql, np, NULL, vals, lens, fmts, result_fmt) : PQsendQuery(c, sql)))
        return LCX_ENET;
    if (PQsetnonblocking(c, 1) != 0) return LCX_ENET;
    int sock = PQsocket(c);
    for (;;) {
        int f = PQflush(c);
        if (f < 0) return LCX_ENET;
        if (f == 0 && !PQisBusy(c)) break;
        double left = deadline - now_ms();
        if (left <= 0) return LCX_ETIMEOUT;
        struct pollfd p = {.fd = sock, .events = (short)(POLLIN | (f ? POLLOUT : 0))};
        int r = poll(&p, 1, left > 1e6 ? 1000000 : (int)left + 1);
        if (r < 0 && errno != EINTR) return LCX_ENET;
        if (r > 0 && (p.revents & (POLLIN | POLLERR | POLLHUP)) && !PQconsumeInput(c)) return LCX_ENET;
    }
    PQsetnonblocking(c, 0);
    PGresult *r, *keep = NULL;
    int rc = 0;
    while ((r = PQgetResult(c))) {
        ExecStatusType s = PQresultStatus(r);
        if (s != PGRES_COMMAND_OK && s != PGRES_TUPLES_OK && !rc) {
            rc = PQstatus(c) == CONNECTION_OK ? lcx__pgstore_sqlstate_err(PQresultErrorField(r, PG_DIAG_SQLSTATE))
                                              : LCX_ENET;
            if (err && el) snprintf(err, el, "%s", PQresultErrorMessage(r));
        }
        if (keep) PQclear(keep);
        keep = r;
    }
    if (rc == 0 && !keep) rc = LCX_ENET;
    if (rc) {
        if (keep) PQclear(keep);
        return rc;
    }
    *res = keep;
    return 0;
}

/* One statement on a pooled connection under the read or write deadline. The connection
 * goes back to the pool unless the failure was the connection's (an SQL error is not). */
static int q_once(lcx_pgstore *pg, bool write, const char *sql, int np, const char *const *vals, const int *lens,
                  const int *fmts, int result_fmt, PGresult **res)
{
    *res = NULL;
    PGconn *cn = conn_get(pg);
    if (!cn) return LCX_ENET;
    const double deadline = now_ms() + (write ? pg->o.write_timeout_s : pg->o.read_timeout_s) * 1e3;
    int rc = q_run_f(cn, sql, np, vals, lens, fmts, result_fmt, deadline, res, NULL, 0);
    conn_put(pg, cn, rc != 0 && !sql_error(rc));
    return rc;
}

/* A statement whose third parameter is a binary blob (NULL: SQL NULL) under the write deadline. */
static int q_blob(lcx_pgstore *pg, const char *sql, const char *p1, const char *p2, const lcx_buf *blob, PGresult **res)
{
    const char *vals[3] = {p1, p2, blob ? blob->data : NULL};
    const int lens[3] = {0, 0, blob ? (int)blob->len : 0}, fmts[3] = {0, 0, 1};
    return q_once(pg, true, sql, 3, vals, lens, fmts, 0, res);
}

/* ------------------------------------------------------------------ schema */

/* Migrations, in order: step i takes the schema from version i to i+1. A database at a
 * version above LCX_PGSTORE_SCHEMA_VERSION is refused (written by a newer longctx). */
static const char *const MIGRATIONS[LCX_PGSTORE_SCHEMA_VERSION] = {
    /* 0 → 1 */
    "CREATE TABLE lcx_sessions ("
    "  sid text PRIMARY KEY,"
    "  next_seq bigint NOT NULL DEFAULT 1,"
    "  state text NOT NULL DEFAULT 'active' CHECK (state IN ('active','hibernated')),"
    "  snapshot_seq bigint NOT NULL DEFAULT 0,"
    "  updated_at timestamptz NOT NULL DEFAULT now());"
    "CREATE TABLE lcx_spans ("
    "  sid text NOT NULL, seq bigint NOT NULL, span_uuid uuid NOT NULL, text text NOT NULL,"
    "  tok_start bigint NOT NULL, tok_end bigint NOT NULL, layer int NOT NULL, round int NOT NULL,"
    "  score real NOT NULL,"
    "  PRIMARY KEY (sid, seq), UNIQUE (sid, span_uuid)) PARTITION BY HASH (sid);"
    "DO $$ BEGIN FOR i IN 0..7 LOOP"
    "  EXECUTE format('CREATE TABLE lcx_spans_p%s PARTITION OF lcx_spans FOR VALUES WITH (MODULUS 8, REMAINDER %s)', i, i);"
    " END LOOP; END $$;"
    "CREATE TABLE lcx_snapshots (sid text NOT NULL, upto_seq bigint NOT NULL, blob bytea,"
    "  created_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (sid, upto_seq));"
    /* out of line, uncompressed: pglz over tens of MB of mostly vectors costs seconds of CPU for little */
    "ALTER TABLE lcx_snapshots ALTER COLUMN blob SET STORAGE EXTERNAL;"
    "CREATE TABLE lcx_scope_segments (scope text NOT NULL, version bigint NOT NULL, segment int NOT NULL,"
    "  blob bytea NOT NULL, PRIMARY KEY (scope, version, segment));"
    "CREATE TABLE lcx_scopes (scope text PRIMARY KEY, current_version bigint NOT NULL, hash text NOT NULL);"
    "ALTER TABLE lcx_scope_segments ALTER COLUMN blob SET STORAGE EXTERNAL;",
};
_Static_assert(SPAN_PARTITIONS == 8, "the 0 → 1 migration creates 8 partitions");

static int simple(PGconn *c, const char *sql, double deadline, char *err, size_t el)
{
    PGresult *r;
    int rc = q_run(c, sql, 0, NULL, deadline, &r, err, el);
    if (!rc) PQclear(r);
    return rc;
}

static int migrate(lcx_pgstore *pg, PGconn *c, char *msg, size_t ml)
{
    double dl = now_ms() + 60e3;   /* first start: table creation waits for a synchronous standby */
    char err[512];
    PGresult *r;
    int rc = simple(c, "SELECT pg_advisory_lock(" ADVISORY_KEY ")", dl, err, sizeof err);
    if (rc) { snprintf(msg, ml, "advisory lock: %s", err); return rc; }
    rc = simple(c, "CREATE TABLE IF NOT EXISTS lcx_schema (version int NOT NULL)", dl, err, sizeof err);
    int have = 0;
    if (!rc && !(rc = q_run(c, "SELECT max(version) FROM lcx_schema", 0, NULL, dl, &r, err, sizeof err))) {
        if (PQntuples(r) == 1 && !PQgetisnull(r, 0, 0)) have = atoi(PQgetvalue(r, 0, 0));
        PQclear(r);
    }
    if (!rc && have > LCX_PGSTORE_SCHEMA_VERSION) {
        snprintf(msg, ml, "the database schema is version %d, newer than this longctx (%d): upgrade longctx", have,
                 LCX_PGSTORE_SCHEMA_VERSION);
        rc = LCX_ENOTSUP;
    }
    for (int v = have; !rc && v < LCX_PGSTORE_SCHEMA_VERSION; v++) {
        char up[96];
        snprintf(up, sizeof up, "DELETE FROM lcx_schema; INSERT INTO lcx_schema VALUES (%d)", v + 1);
        if ((rc = simple(c, "BEGIN", dl, err, sizeof err)) == 0 && (rc = simple(c, MIGRATIONS[v], dl, err, sizeof err)) == 0 &&
            (rc = simple(c, up, dl, err, sizeof err)) == 0)
            rc = simple(c, "COMMIT", dl, err, sizeof err);
        if (rc) {
            snprintf(msg, ml, "migration %d → %d failed: %s", v, v + 1, err);
            simple(c, "ROLLBACK", dl, NULL, 0);
        }
    }
    if (!rc && (rc = simple(c, "SELECT pg_advisory_unlock(" ADVISORY_KEY ")", dl, err, sizeof err)))
        snprintf(msg, ml, "advisory unlock: %s", err);
    (void)pg;
    return rc;
}

/* ------------------------------------------------------------------ LISTEN lcx_spans */

static applied *applied_get(lcx_pgstore *pg, const char *sid);

/* Payload "sid:last_seq" (the sid may hold ':', the seq never does). */
static void on_notify(lcx_pgstore *pg, const char *payload, uint64_t epoch)
{
    const char *c = strrchr(payload, ':');
    if (!c || c == payload) return;
    char sid[LCX_SESSION_ID_MAX + 1];
    size_t n = (size_t)(c - payload);
    if (n > LCX_SESSION_ID_MAX) return;
    memcpy(sid, payload, n);
    sid[n] = 0;
    int64_t last = strtoll(c + 1, NULL, 10);
    applied *a = applied_get(pg, sid);
    if (!a) return;
    pthread_mutex_lock(&pg->mu);
    /* the payload is the session's whole last seq, and notifications of one session come
     * in commit order (the row lock orders its writers): exact from the first one on */
    if (a->epoch != epoch) a->known = last, a->epoch = epoch;
    else if (last > a->known) a->known = last;
    pthread_mutex_unlock(&pg->mu);
}

static void *listener_main(void *p)
{
    lcx_pgstore *pg = p;
    while (!__atomic_load_n(&pg->lt_stop, __ATOMIC_ACQUIRE)) {
        PGconn *c = conn_new(pg);
        PGresult *r = c ? PQexec(c, "LISTEN lcx_spans") : NULL;
        if (!c || PQresultStatus(r) != PGRES_COMMAND_OK) {
            PQclear(r);
            PQfinish(c);
            struct timespec ts = {0, 500 * 1000000L};
            nanosleep(&ts, NULL);
            continue;
        }
        PQclear(r);
        pthread_mutex_lock(&pg->mu);
        uint64_t epoch = ++pg->lt_epoch;
        pg->lt_up = true;
        pthread_mutex_unlock(&pg->mu);
        while (!__atomic_load_n(&pg->lt_stop, __ATOMIC_ACQUIRE)) {
            struct pollfd pf = {.fd = PQsocket(c), .events = POLLIN};
            int k = poll(&pf, 1, 200);
            if (k < 0 && errno != EINTR) break;
            if (k > 0 && !PQconsumeInput(c)) break;
            PGnotify *nt;
            while ((nt = PQnotifies(c))) {
                on_notify(pg, nt->extra, epoch);
                PQfreemem(nt);
            }
            if (PQstatus(c) != CONNECTION_OK) break;
        }
        pthread_mutex_lock(&pg->mu);
        pg->lt_up = false;   /* notifications may be missed from now on: reads ask again */
        pthread_mutex_unlock(&pg->mu);
        PQfinish(c);
    }
    return NULL;
}

/* ------------------------------------------------------------------ open / close */

lcx_pgstore_opts lcx_pgstore_defaults(void)
{
    lcx_pgstore_opts o = {0};
    o.write_timeout_s = 10;
    o.read_timeout_s = 5;
    o.connect_timeout_s = 2;
    o.max_conns = 8;
    return o;
}

int lcx_pgstore_open(const lcx_pgstore_opts *o, lcx_pgstore **out, char *msg, size_t ml)
{
    char dummy[8];
    if (!msg || !ml) msg = dummy, ml = sizeof dummy;
    msg[0] = 0;
    if (!o || !o->conninfo || !*o->conninfo || !out) return LCX_EINVAL;
    *out = NULL;
    lcx_pgstore *pg = calloc(1, sizeof *pg);
    if (!pg) return LCX_ENOMEM;
    pg->o = *o;
    lcx_pgstore_opts d = lcx_pgstore_defaults();
    if (pg->o.write_timeout_s <= 0) pg->o.write_timeout_s = d.write_timeout_s;
    if (pg->o.read_timeout_s <= 0) pg->o.read_timeout_s = d.read_timeout_s;
    if (pg->o.connect_timeout_s <= 0) pg->o.connect_timeout_s = d.connect_timeout_s;
    if (pg->o.max_conns <= 0) pg->o.max_conns = d.max_conns;
    pg->conninfo = strdup(o->conninfo);
    pg->idle = calloc((size_t)pg->o.max_conns, sizeof *pg->idle);
    pg->tab = calloc(N_BUCKETS, sizeof *pg->tab);
    const char *lr = getenv("LCX_PGSTORE_TEST_LOSE_REPLY");
    pg->lose_reply = lr && *lr == '1';
    pthread_mutex_init(&pg->mu, NULL);
    pthread_cond_init(&pg->cv, NULL);
    for (int i = 0; i < N_STRIPES; i++) pthread_mutex_init(&pg->stripe[i], NULL);
    pg->o.conninfo = pg->conninfo;
    if (!pg->conninfo || !pg->idle || !pg->tab) {
        lcx_pgstore_close(pg);
        return LCX_ENOMEM;
    }
    char *e = NULL;
    PQconninfoOption *ci = PQconninfoParse(pg->conninfo, &e);
    if (!ci) {
        snprintf(msg, ml, "bad PostgreSQL connection string: %s", e ? e : "out of memory");
        PQfreemem(e);
        lcx_pgstore_close(pg);
        return LCX_EINVAL;
    }
    PQconninfoFree(ci);
    pg->n_open = 1;
    PGconn *c = conn_new(pg);
    if (!c) {
        PGconn *t = PQconnectdb(pg->conninfo);   /* for the message only */
        snprintf(msg, ml, "cannot connect to PostgreSQL: %s", t ? PQerrorMessage(t) : "out of memory");
        PQfinish(t);
        pg->n_open = 0;
        lcx_pgstore_close(pg);
        return LCX_ENET;
    }
    int rc = migrate(pg, c, msg, ml);
    conn_put(pg, c, rc != 0);
    if (rc) {
        lcx_pgstore_close(pg);
        return rc;
    }
    if (pg->o.notify_reads) {
        if (pthread_create(&pg->lt, NULL, listener_main, pg) != 0) {
            snprintf(msg, ml, "cannot start the LISTEN thread");
            lcx_pgstore_close(pg);
            return LCX_ENOMEM;
        }
        pg->lt_running = true;
    }
    *out = pg;
    return 0;
}

void lcx_pgstore_close(lcx_pgstore *pg)
{
    if (!pg) return;
    if (pg->lt_running) {
        __atomic_store_n(&pg->lt_stop, 1, __ATOMIC_RELEASE);
        pthread_join(pg->lt, NULL);
    }
    for (int i = 0; i < pg->n_idle; i++) PQfinish(pg->idle[i]);
    if (pg->tab)
        for (uint32_t b = 0; b < N_BUCKETS; b++)
            for (applied *a = pg->tab[b], *n; a; a = n) {
                n = a->next;
                free(a);
            }
    for (int i = 0; i < N_STRIPES; i++) pthread_mutex_destroy(&pg->stripe[i]);
    pthread_mutex_destroy(&pg->mu);
    pthread_cond_destroy(&pg->cv);
    free(pg->tab);
    free(pg->idle);
    free(pg->conninfo);
    free(pg);
}

/* ------------------------------------------------------------------ applied-seq table */

static uint64_t sid_hash(const char *sid) { return lcx__hash64(sid, strlen(sid), 0x9e3779b9); }

/* The session's entry (created at seq 0). Caller holds the session's stripe lock; the
 * table itself is guarded by pg->mu. NULL: out of memory. */
static applied *applied_lookup(lcx_pgstore *pg, const char *sid, bool create)
{
    uint32_t b = (uint32_t)(sid_hash(sid) % N_BUCKETS);
    pthread_mutex_lock(&pg->mu);
    applied *a = pg->tab[b];
    while (a && strcmp(a->sid, sid)) a = a->next;
    if (!a && create) {
        size_t n = strlen(sid);
        if ((a = malloc(sizeof *a + n + 1))) {
            a->seq = 0;
            a->known = 0;
            a->epoch = 0;
            memcpy(a->sid, sid, n + 1);
            a->next = pg->tab[b];
            pg->tab[b] = a;
            pg->n_tracked++;
        }
    }
    pthread_mutex_unlock(&pg->mu);
    return a;
}

static applied *applied_get(lcx_pgstore *pg, const char *sid) { return applied_lookup(pg, sid, true); }

static pthread_mutex_t *stripe_of(lcx_pgstore *pg, const char *sid) { return &pg->stripe[sid_hash(sid) % N_STRIPES]; }

/* ------------------------------------------------------------------ write */

#define TEXT_OID 25   /* pg_type.oid of text */

static int put_be32(lcx_buf *b, uint32_t v)
{
    uint8_t x[4] = {(uint8_t)(v >> 24), (uint8_t)(v >> 16), (uint8_t)(v >> 8), (uint8_t)v};
    return lcx__buf_append(b, x, 4);
}

/* The texts as a binary text[] parameter (array_recv's format: ndim, flags, element type,
 * dimension, lower bound, then per element a length and the bytes): no quoting here, no
 * character-by-character literal parsing in the server (docs/benchmarks/multinode.md). */
static int text_array_bin(lcx_buf *b, const lcx_chunk *c, int n)
{
    int rc = put_be32(b, 1) | put_be32(b, 0) | put_be32(b, TEXT_OID) | put_be32(b, (uint32_t)n) | put_be32(b, 1);
    for (int i = 0; i < n && !rc; i++) {
        rc = put_be32(b, c[i].text_len);
        if (!rc) rc = lcx__buf_append(b, c[i].text, c[i].text_len);
    }
    return rc;
}

static void uuid_fmt(const uint8_t u[16], char out[37])
{
    static const char hx[] = "0123456789abcdef";
    int o = 0;
    for (int i = 0; i < 16; i++) {
        if (i == 4 || i == 6 || i == 8 || i == 10) out[o++] = '-';
        out[o++] = hx[u[i] >> 4];
        out[o++] = hx[u[i] & 15];
    }
    out[o] = 0;
}

/* uuid i of the batch: from (sid, key, i) when a key is given, else random (one random
 * base per batch, the index mixed in). Version/variant bits set so PostgreSQL's uuid
 * type sees a well-formed v4/v5-like value. */
static void span_uuid(const char *sid, const char *key, size_t kl, const uint8_t base[16], int i, char out[37])
{
    uint8_t u[32];
    if (key) {
        lcx_buf b = {0};
        lcx__buf_append(&b, sid, strlen(sid) + 1);
        lcx__buf_append(&b, key, kl);
        lcx__buf_printf(&b, "%c%d", 0, i);
        lcx__sha256(b.data ? b.data : "", b.len, u);
        lcx__buf_free(&b);
    } else {
        memcpy(u, base, 16);
        uint32_t x = (uint32_t)i;
        for (int k = 0; k < 4; k++) u[12 + k] ^= (uint8_t)(x >> (8 * k));
    }
    u[6] = (uint8_t)((u[6] & 0x0f) | (key ? 0x50 : 0x40));
    u[8] = (uint8_t)((u[8] & 0x3f) | 0x80);
    uuid_fmt(u, out);
}

/* One statement = one implicit transaction: the upsert of lcx_sessions takes the row
 * lock and reserves n seqs, the spans go in after it, pg_notify is queued, and the commit
 * (waiting for a synchronous standby) ends the statement. */
static const char WRITE_SQL[] =
    "WITH s AS (INSERT INTO lcx_sessions AS x (sid, next_seq) VALUES ($1, 1 + $2::bigint)"
    "  ON CONFLICT (sid) DO UPDATE SET next_seq = x.next_seq + $2::bigint, state = 'active', updated_at = now()"
    "  RETURNING next_seq - $2::bigint AS first),"
    " ins AS (INSERT INTO lcx_spans (sid, seq, span_uuid, text, tok_start, tok_end, layer, round, score)"
    "  SELECT $1, s.first + t.ord - 1, t.u, t.txt, t.a, t.b, t.l, t.r, t.sc FROM s,"
    "   unnest($3::uuid[], $4::text[], $5::bigint[], $6::bigint[], $7::int[], $8::int[], $9::real[])"
    "   WITH ORDINALITY AS t(u, txt, a, b, l, r, sc, ord)"
    "  ON CONFLICT (sid, span_uuid) DO NOTHING RETURNING 1),"
    " n AS (SELECT pg_notify('lcx_spans', $1 || ':' || (s.first + $2::bigint - 1)) FROM s)"
    " SELECT s.first, (SELECT count(*) FROM ins), (SELECT count(*) FROM n) FROM s";

int lcx_pgstore_write(lcx_pgstore *pg, const char *sid, const lcx_chunk *c, int n, const char *key, size_t kl,
                      lcx_pgstore_write_result *res)
{
    if (!pg || !sid || !c || n <= 0 || !res) return LCX_EINVAL;
    memset(res, 0, sizeof *res);
    uint8_t base[16];
    if (!key && getrandom(base, sizeof base, 0) != (ssize_t)sizeof base) return LCX_EIO;
    lcx_buf a[7] = {{0}};
    char nb[24], u[37];
    int rc = 0;
    for (int k = 0; k < 7; k++)
        if (k != 1) rc |= lcx__buf_append(&a[k], "{", 1);
    rc |= text_array_bin(&a[1], c, n) < 0;
    for (int i = 0; i < n && !rc; i++) {
        const char *sep = i ? "," : "";
        span_uuid(sid, key, kl, base, i, u);
        rc |= lcx__buf_printf(&a[0], "%s%s", sep, u) < 0;
        rc |= lcx__buf_printf(&a[2], "%s%" PRId64, sep, c[i].tok_start) < 0;
        rc |= lcx__buf_printf(&a[3], "%s%" PRId64, sep, c[i].tok_end) < 0;
        rc |= lcx__buf_printf(&a[4], "%s%d", sep, (int)c[i].layer) < 0;
        rc |= lcx__buf_printf(&a[5], "%s%d", sep, (int)c[i].round) < 0;
        rc |= lcx__buf_printf(&a[6], "%s%.9g", sep, (double)c[i].score) < 0;
    }
    for (int k = 0; k < 7; k++)
        if (k != 1) rc |= lcx__buf_append(&a[k], "}", 1);
    if (rc || a[1].len > 0x7fffffff) {
        for (int k = 0; k < 7; k++) lcx__buf_free(&a[k]);
        return LCX_ENOMEM;
    }
    snprintf(nb, sizeof nb, "%d", n);
    const char *vals[9] = {sid, nb, a[0].data, a[1].data, a[2].data, a[3].data, a[4].data, a[5].data, a[6].data};
    int lens[9] = {0, 0, 0, (int)a[1].len, 0, 0, 0, 0, 0}, fmts[9] = {0, 0, 0, 1, 0, 0, 0, 0, 0};
    double deadline = now_ms() + pg->o.write_timeout_s * 1e3;
    rc = LCX_ETIMEOUT;
    for (;;) {
        PGconn *cn = conn_get(pg);
        if (cn) {
            PGresult *r;
            char err[512];
            res->attempts++;
            rc = q_run_f(cn, WRITE_SQL, 9, vals, lens, fmts, 0, deadline, &r, err, sizeof err);
            if (rc == 0 && pg->lose_reply && res->attempts == 1) {   /* test hook: the reply never arrived */
                PQclear(r);
                rc = LCX_ENET;
            }
            if (rc == 0) {
                res->first_seq = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
                res->inserted = atoi(PQgetvalue(r, 0, 1));
                res->last_seq = res->first_seq + n - 1;
                PQclear(r);
                conn_put(pg, cn, false);
                break;
            }
            /* an SQL error on a healthy connection is final (a read-only server after a
             * failover is not: 25006 read_only_sql_transaction → reconnect and retry) */
            bool ro = rc == LCX_EIO && strstr(err, "read-only");
            conn_put(pg, cn, !sql_error(rc) || ro);
            if (sql_error(rc) && !ro) break;
        } else {
            rc = LCX_ENET;
        }
        if (now_ms() + RETRY_PAUSE_MS >= deadline) {
            if (rc == LCX_ENET) rc = LCX_ETIMEOUT;
            break;
        }
        struct timespec ts = {0, RETRY_PAUSE_MS * 1000000L};
        nanosleep(&ts, NULL);
    }
    pthread_mutex_lock(&pg->mu);
    if (rc == 0) pg->st.writes++;
    if (res->attempts > 1) pg->st.write_retries += (uint64_t)(res->attempts - 1);
    if (rc == LCX_ETIMEOUT) pg->st.write_timeouts++;
    pthread_mutex_unlock(&pg->mu);
    for (int k = 0; k < 7; k++) lcx__buf_free(&a[k]);
    return rc;
}

/* ------------------------------------------------------------------ catch-up */

/* Appends the spans of sid with seq in (a->seq, upto] from PostgreSQL to st, in seq
 * order, batch by batch; a->seq advances with each appended batch (a gap left by a
 * deduplicated retry is skipped). Caller holds the session's stripe lock. */
static int fetch_into(lcx_pgstore *pg, lcx_store *st, const char *sid, applied *a, int64_t upto, uint32_t *fetched)
{
    double deadline = now_ms() + pg->o.read_timeout_s * 1e3;
    int rc = 0;
    while (a->seq < upto && !rc) {
        PGconn *cn = conn_get(pg);
        if (!cn) return LCX_ENET;
        char from[24], to[24];
        snprintf(from, sizeof from, "%" PRId64, a->seq);
        snprintf(to, sizeof to, "%" PRId64, upto);
        const char *vals[3] = {sid, from, to};
        PGresult *r;
        rc = q_run(cn, "SELECT seq, text, tok_start, tok_end, layer, round, score FROM lcx_spans"
                       " WHERE sid = $1 AND seq > $2::bigint AND seq <= $3::bigint ORDER BY seq LIMIT " XSTR(FETCH_BATCH),
                   3, vals, deadline, &r, NULL, 0);
        conn_put(pg, cn, rc != 0 && !sql_error(rc));
        if (rc) break;
        int m = PQntuples(r);
        lcx_chunk *cs = m ? calloc((size_t)m, sizeof *cs) : NULL;
        if (m && !cs) { PQclear(r); return LCX_ENOMEM; }
        for (int i = 0; i < m; i++) {
            lcx_chunk ch = lcx_chunk_init();
            ch.text = PQgetvalue(r, i, 1);
            ch.text_len = (uint32_t)PQgetlength(r, i, 1);
            ch.tok_start = strtoll(PQgetvalue(r, i, 2), NULL, 10);
            ch.tok_end = strtoll(PQgetvalue(r, i, 3), NULL, 10);
            ch.layer = (int32_t)strtol(PQgetvalue(r, i, 4), NULL, 10);
            ch.round = (int32_t)strtol(PQgetvalue(r, i, 5), NULL, 10);
            ch.score = strtof(PQgetvalue(r, i, 6), NULL);
            cs[i] = ch;
        }
        if (m) rc = lcx_store_append(st, cs, m, NULL);
        if (!rc) {
            __atomic_store_n(&a->seq, m == FETCH_BATCH ? strtoll(PQgetvalue(r, m - 1, 0), NULL, 10) : upto,
                             __ATOMIC_RELEASE);
            if (fetched) *fetched += (uint32_t)m;
            pthread_mutex_lock(&pg->mu);
            pg->st.spans_fetched += (uint64_t)m;
            pthread_mutex_unlock(&pg->mu);
        }
        free(cs);
        PQclear(r);
    }
    return rc;
}

int lcx_pgstore_apply(lcx_pgstore *pg, lcx_store *st, const char *sid, const lcx_chunk *c, int n,
                      lcx_store_prepared *prep, const lcx_pgstore_write_result *w)
{
    if (!pg || !st || !sid || !w) return LCX_EINVAL;
    pthread_mutex_t *m = stripe_of(pg, sid);
    pthread_mutex_lock(m);
    applied *a = applied_get(pg, sid);
    int rc = a ? 0 : LCX_ENOMEM;
    if (!rc && a->seq < w->last_seq) {
        if (a->seq == w->first_seq - 1 && w->inserted == n && c && n > 0) {
            rc = prep ? lcx_store_commit(st, prep, NULL) : lcx_store_append(st, c, n, NULL);
            if (!rc) __atomic_store_n(&a->seq, w->last_seq, __ATOMIC_RELEASE);
        } else {
            rc = fetch_into(pg, st, sid, a, w->last_seq, NULL);
        }
    }
    pthread_mutex_unlock(m);
    return rc;
}

/* The session's last seq and state in PostgreSQL. LCX_ENOTFOUND when absent. */
static int head(lcx_pgstore *pg, const char *sid, int64_t *last, char *state, size_t sl, const char *sql)
{
    const char *vals[1] = {sid};
    PGresult *r;
    int rc = q_once(pg, false, sql, 1, vals, NULL, NULL, 0, &r);
    if (rc) return rc;
    if (PQntuples(r) != 1) rc = LCX_ENOTFOUND;
    else {
        *last = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
        if (state) snprintf(state, sl, "%s", PQgetvalue(r, 0, 1));
    }
    PQclear(r);
    return rc;
}

static int sync_to(lcx_pgstore *pg, lcx_sessions *ss, const char *sid, int64_t last, uint32_t *fetched)
{
    pthread_mutex_t *m = stripe_of(pg, sid);
    pthread_mutex_lock(m);
    applied *a = applied_get(pg, sid);
    int rc = a ? 0 : LCX_ENOMEM;
    if (!rc && a->seq < last) {
        lcx_store *st;
        if ((rc = lcx_sessions_acquire(ss, sid, true, &st)) == 0) {
            rc = fetch_into(pg, st, sid, a, last, fetched);
            lcx_sessions_release(ss, st);
        }
    }
    pthread_mutex_unlock(m);
    return rc;
}

int lcx_pgstore_sync(lcx_pgstore *pg, lcx_sessions *ss, const char *sid, uint32_t *fetched)
{
    if (!pg || !ss || !sid) return LCX_EINVAL;
    if (fetched) *fetched = 0;
    int64_t last;
    uint64_t epoch = 0;
    applied *a = NULL;
    if (pg->o.notify_reads) {
        a = applied_lookup(pg, sid, false);   /* unknown ids (probes) must not accumulate entries */
        pthread_mutex_lock(&pg->mu);
        if (a && pg->lt_up && a->epoch == pg->lt_epoch) {
            last = a->known;
            bool fresh = __atomic_load_n(&a->seq, __ATOMIC_ACQUIRE) >= last;
            if (fresh) pg->st.reads_local++;
            pthread_mutex_unlock(&pg->mu);
            if (fresh) return last ? 0 : LCX_ENOTFOUND;
            return sync_to(pg, ss, sid, last, fetched);
        }
        epoch = pg->lt_up ? pg->lt_epoch : 0;
        pthread_mutex_unlock(&pg->mu);
    }
    int rc = head(pg, sid, &last, NULL, 0, "SELECT next_seq - 1, state FROM lcx_sessions WHERE sid = $1");
    if (!a && epoch && rc == 0) a = applied_get(pg, sid);
    if (a && epoch && (rc == 0 || rc == LCX_ENOTFOUND)) {   /* the answer is exact for this listener epoch */
        pthread_mutex_lock(&pg->mu);
        if (a->epoch != epoch) a->known = 0;
        if (rc == 0 && last > a->known) a->known = last;
        a->epoch = epoch;
        pthread_mutex_unlock(&pg->mu);
    }
    if (rc == 0) rc = sync_to(pg, ss, sid, last, fetched);
    pthread_mutex_lock(&pg->mu);
    pg->st.syncs++;
    if (rc < 0 && rc != LCX_ENOTFOUND) pg->st.reads_stale++;
    pthread_mutex_unlock(&pg->mu);
    return rc;
}

/* ------------------------------------------------------------------ snapshots */

#define SNAP_MAGIC "LCXSNAP1"
#define SNAP_MAX (512ull << 20)   /* a larger session is rebuilt from its spans instead */

static void put_le(lcx_buf *b, uint64_t v, int n)
{
    uint8_t x[8];
    for (int i = 0; i < n; i++) x[i] = (uint8_t)(v >> (8 * i));
    lcx__buf_append(b, x, (size_t)n);
}

static uint64_t get_le(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = 0; i < n; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

/* Every regular file of dir (and of its subdirectories, one level: a scope's store/) in
 * one blob: magic, then (u16 name length, name, u64 size, bytes) per file, little-endian;
 * names are relative ("store/chunks.log"). 0, or LCX_ELIMIT when over SNAP_MAX, LCX_EIO. */
static int pack_dir(const char *dir, const char *prefix, int depth, lcx_buf *out)
{
    DIR *d = opendir(dir);
    if (!d) return LCX_EIO;
    int rc = 0;
    struct dirent *e;
    while (!rc && (e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char *path = lcx__path_join(dir, e->d_name);
        struct stat sb;
        if (!path) { rc = LCX_ENOMEM; break; }
        char rel[512];
        snprintf(rel, sizeof rel, "%s%s%s", prefix, *prefix ? "/" : "", e->d_name);
        if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode) && depth > 0) {
            rc = pack_dir(path, rel, depth - 1, out);
        } else if (stat(path, &sb) == 0 && S_ISREG(sb.st_mode) && strlen(rel) < 256) {
            char *data = NULL;
            size_t len = 0;
            if (out->len + (uint64_t)sb.st_size > SNAP_MAX) rc = LCX_ELIMIT;
            else if ((rc = lcx__read_file(path, SNAP_MAX, &data, &len)) == 0) {
                size_t nl = strlen(rel);
                put_le(out, nl, 2);
                lcx__buf_append(out, rel, nl);
                put_le(out, len, 8);
                rc = lcx__buf_append(out, data, len);
            }
            free(data);
        }
        free(path);
    }
    closedir(d);
    return rc;
}

static int snap_pack(const char *dir, lcx_buf *out)
{
    int rc = lcx__buf_append(out, SNAP_MAGIC, 8);
    return rc ? rc : pack_dir(dir, "", 1, out);
}

/* Writes the blob's files into dir (created). Names are relative, at most one directory
 * deep, without "." or ".." components. */
static int snap_unpack(const char *dir, const uint8_t *p, size_t n)
{
    if (n < 8 || memcmp(p, SNAP_MAGIC, 8)) return LCX_ECORRUPT;
    int rc = lcx__mkdirs(dir);
    size_t o = 8;
    while (!rc && o < n) {
        if (n - o < 2) return LCX_ECORRUPT;
        size_t nl = (size_t)get_le(p + o, 2);
        o += 2;
        if (nl == 0 || nl > 255 || n - o < nl + 8) return LCX_ECORRUPT;
        char name[256];
        memcpy(name, p + o, nl);
        name[nl] = 0;
        o += nl;
        uint64_t len = get_le(p + o, 8);
        o += 8;
        char *sl = strchr(name, '/');
        if (name[0] == '.' || (sl && (sl[1] == '.' || !sl[1] || strchr(sl + 1, '/'))) || len > n - o)
            return LCX_ECORRUPT;
        char *path = lcx__path_join(dir, name);
        if (!path) return LCX_ENOMEM;
        if (sl) {   /* the subdirectory first */
            char *sub = lcx__path_join(dir, name);
            sub[strlen(dir) + 1 + (size_t)(sl - name)] = 0;
            rc = lcx__mkdirs(sub);
            free(sub);
        }
        if (!rc) rc = lcx__write_file_atomic(path, p + o, (size_t)len);
        free(path);
        o += (size_t)len;
    }
    return rc;
}

static void snap_remove(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d)))
        if (e->d_name[0] != '.') {
            char *path = lcx__path_join(dir, e->d_name);
            if (path) unlink(path);
            free(path);
        }
    closedir(d);
    rmdir(dir);
}

int lcx_pgstore_hibernate(lcx_pgstore *pg, lcx_sessions *ss, const char *sid, const char *dir, uint32_t *n_chunks)
{
    if (!pg || !ss || !sid || !dir) return LCX_EINVAL;
    if (n_chunks) *n_chunks = 0;
    int rc = lcx_pgstore_sync(pg, ss, sid, NULL);
    if (rc < 0) return rc;
    /* under the stripe lock nothing appends to the local copy: its files and `upto` agree */
    pthread_mutex_t *m = stripe_of(pg, sid);
    pthread_mutex_lock(m);
    applied *a = applied_get(pg, sid);
    lcx_buf blob = {0};
    int64_t upto = a ? a->seq : 0;
    bool have_blob = false;
    lcx_session_status stt;
    if (!a) rc = LCX_ENOMEM;
    else if (lcx_sessions_status(ss, sid, &stt) == 0) {
        if (n_chunks) *n_chunks = stt.in_ram ? stt.n_chunks_in_ram : stt.n_chunks_on_disk;
        int hr = lcx_sessions_hibernate(ss, sid);
        if (hr == 0 && lcx_sessions_status(ss, sid, &stt) == 0 && !stt.in_ram && stt.on_disk)
            have_blob = snap_pack(dir, &blob) == 0;   /* busy (deferred) or too big: no snapshot */
    }
    pthread_mutex_unlock(m);
    if (rc < 0) { lcx__buf_free(&blob); return rc; }
    char up[24];
    snprintf(up, sizeof up, "%" PRId64, upto);
    PGresult *r;
    rc = q_blob(pg,
                "WITH u AS (UPDATE lcx_sessions SET state = 'hibernated', snapshot_seq = $2::bigint, updated_at = now()"
                "  WHERE sid = $1 RETURNING 1),"
                " ins AS (INSERT INTO lcx_snapshots (sid, upto_seq, blob) SELECT $1, $2::bigint, $3::bytea FROM u"
                "  WHERE $3::bytea IS NOT NULL ON CONFLICT (sid, upto_seq) DO UPDATE SET blob = EXCLUDED.blob,"
                "  created_at = now() RETURNING 1),"
                " del AS (DELETE FROM lcx_snapshots WHERE sid = $1 AND upto_seq < $2::bigint AND $3::bytea IS NOT NULL)"
                " SELECT (SELECT count(*) FROM u), (SELECT count(*) FROM ins)",
                sid, up, have_blob ? &blob : NULL, &r);
    lcx__buf_free(&blob);
    if (rc) return rc == LCX_ENET ? LCX_ETIMEOUT : rc;
    bool found = atoi(PQgetvalue(r, 0, 0)) == 1;
    if (atoi(PQgetvalue(r, 0, 1)) == 1) {
        pthread_mutex_lock(&pg->mu);
        pg->st.snapshots_saved++;
        pthread_mutex_unlock(&pg->mu);
    }
    PQclear(r);
    return found ? 0 : LCX_ENOTFOUND;
}

/* A node without a copy of sid loads the latest snapshot into dir; its seq is then the
 * snapshot's. Any failure leaves nothing behind (the caller rebuilds from the spans).
 * Caller holds the stripe lock. */
static void snap_load(lcx_pgstore *pg, lcx_sessions *ss, const char *sid, const char *dir, applied *a)
{
    lcx_session_status stt;
    if (a->seq != 0 || lcx_sessions_status(ss, sid, &stt) != LCX_ENOTFOUND) return;
    const char *vals[1] = {sid};
    PGresult *r;
    if (q_once(pg, false, "SELECT upto_seq::text, blob FROM lcx_snapshots WHERE sid = $1 ORDER BY upto_seq DESC LIMIT 1",
               1, vals, NULL, NULL, 1, &r))
        return;
    if (PQntuples(r) == 1 && !PQgetisnull(r, 0, 1)) {
        char up[32];
        int ul = PQgetlength(r, 0, 0);
        snprintf(up, sizeof up, "%.*s", ul < 31 ? ul : 31, PQgetvalue(r, 0, 0));
        lcx_store *st;
        if (snap_unpack(dir, (const uint8_t *)PQgetvalue(r, 0, 1), (size_t)PQgetlength(r, 0, 1)) == 0 &&
            lcx_sessions_acquire(ss, sid, false, &st) == 0) {
            lcx_sessions_release(ss, st);
            __atomic_store_n(&a->seq, strtoll(up, NULL, 10), __ATOMIC_RELEASE);
            pthread_mutex_lock(&pg->mu);
            pg->st.snapshots_loaded++;
            pthread_mutex_unlock(&pg->mu);
        } else {
            snap_remove(dir);
        }
    }
    PQclear(r);
}

int lcx_pgstore_resume(lcx_pgstore *pg, lcx_sessions *ss, const char *sid, const char *dir)
{
    if (!pg || !ss || !sid) return LCX_EINVAL;
    int64_t last;
    char state[32];
    int rc = head(pg, sid, &last, state, sizeof state,
                  "WITH o AS (SELECT state FROM lcx_sessions WHERE sid = $1 FOR UPDATE)"
                  " UPDATE lcx_sessions x SET state = 'active', updated_at = now() FROM o WHERE x.sid = $1"
                  " RETURNING x.next_seq - 1, o.state");
    if (rc < 0) return rc;
    bool was = !strcmp(state, "hibernated");
    if (was && dir) {
        pthread_mutex_t *m = stripe_of(pg, sid);
        pthread_mutex_lock(m);
        applied *a = applied_get(pg, sid);
        if (a) snap_load(pg, ss, sid, dir, a);
        pthread_mutex_unlock(m);
    }
    if ((rc = sync_to(pg, ss, sid, last, NULL)) < 0) return rc;
    return was ? 1 : 0;
}

/* ------------------------------------------------------------------ scopes */

int lcx_pgstore_scope_publish(lcx_pgstore *pg, const char *scope, const char *hash, const char *dir)
{
    if (!pg || !scope || !hash || !dir) return LCX_EINVAL;
    lcx_buf blob = {0};
    int rc = snap_pack(dir, &blob);
    if (rc) { lcx__buf_free(&blob); return rc; }
    PGresult *r;
    rc = q_blob(pg,
                "WITH v AS (INSERT INTO lcx_scopes AS x (scope, current_version, hash) VALUES ($1, 1, $2)"
                "  ON CONFLICT (scope) DO UPDATE SET current_version = x.current_version + 1, hash = $2"
                "  RETURNING current_version),"
                " ins AS (INSERT INTO lcx_scope_segments (scope, version, segment, blob) SELECT $1, v.current_version, 0, $3"
                "  FROM v RETURNING 1),"
                " del AS (DELETE FROM lcx_scope_segments s USING v WHERE s.scope = $1 AND s.version < v.current_version)"
                " SELECT current_version FROM v",
                scope, hash, &blob, &r);
    lcx__buf_free(&blob);
    if (rc) return rc;
    int64_t v = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
    PQclear(r);
    pthread_mutex_lock(&pg->mu);
    pg->st.scopes_published++;
    pthread_mutex_unlock(&pg->mu);
    return (int)(v > 0x7fffffff ? 0x7fffffff : v);
}

int lcx_pgstore_scope_fetch(lcx_pgstore *pg, const char *scope, const char *scopes_dir)
{
    if (!pg || !scope || !scopes_dir) return LCX_EINVAL;
    const char *vals[1] = {scope};
    PGresult *r;
    int rc = q_once(pg, false,
                    "SELECT x.hash, s.blob FROM lcx_scopes x JOIN lcx_scope_segments s"
                    " ON s.scope = x.scope AND s.version = x.current_version AND s.segment = 0 WHERE x.scope = $1",
                    1, vals, NULL, NULL, 1, &r);
    if (rc) return rc;
    if (PQntuples(r) != 1) { PQclear(r); return 0; }
    char hash[64];
    int hl = PQgetlength(r, 0, 0);
    snprintf(hash, sizeof hash, "%.*s", hl < 63 ? hl : 63, PQgetvalue(r, 0, 0));
    for (const char *h = hash; *h; h++)
        if (!((*h >= '0' && *h <= '9') || (*h >= 'a' && *h <= 'f'))) { PQclear(r); return LCX_ECORRUPT; }
    char *dir = lcx__path_join(scopes_dir, hash);
    struct stat sb;
    if (!dir) rc = LCX_ENOMEM;
    else if (stat(dir, &sb) == 0) rc = 0;   /* this node has its own copy: keep it */
    else if ((rc = snap_unpack(dir, (const uint8_t *)PQgetvalue(r, 0, 1), (size_t)PQgetlength(r, 0, 1))) == 0) {
        rc = 1;
        pthread_mutex_lock(&pg->mu);
        pg->st.scopes_loaded++;
        pthread_mutex_unlock(&pg->mu);
    } else {
        char *st = lcx__path_join(dir, "store");
        if (st) snap_remove(st);
        free(st);
        snap_remove(dir);
    }
    free(dir);
    PQclear(r);
    return rc;
}

int lcx_pgstore_count(lcx_pgstore *pg, const char *sid, int64_t *n)
{
    if (!pg || !sid || !n) return LCX_EINVAL;
    return head(pg, sid, n, NULL, 0, "SELECT count(*), '' FROM lcx_spans WHERE sid = $1");
}

void lcx_pgstore_stats_get(lcx_pgstore *pg, lcx_pgstore_stats *s)
{
    memset(s, 0, sizeof *s);
    if (!pg) return;
    pthread_mutex_lock(&pg->mu);
    *s = pg->st;
    s->sessions_tracked = pg->n_tracked;
    s->connected = pg->n_open > 0;
    pthread_mutex_unlock(&pg->mu);
}
