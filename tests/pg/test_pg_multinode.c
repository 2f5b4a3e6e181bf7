/* Several longctx-svc nodes sharing sessions through a real PostgreSQL cluster (primary +
 * two synchronous standbys on loopback, tests/pg/pgcluster.sh). Skips when PostgreSQL is
 * not installed. Each test names what would make it fail. */
#include "pg_harness.h"
#include "svc_harness.h"
#include "longctx/lcx_pgstore.h"

#include <libpq-fe.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static pgc_cluster C;
static bool have_cluster;
static sh_server A, B;

static void node_start(sh_server *s, const char *const *env)
{
    const char *extra[] = {"--store", C.conninfo, "--store-write-timeout-s", "3", "--quiet", NULL};
    sh_start(s, NULL, extra, env);
}

static int setup(void **st)
{
    (void)st;
    if (!pgc_available()) {
        fprintf(stderr, "PostgreSQL binaries missing (postgresql-15): pg tests skip\n");
        return 0;
    }
    have_cluster = pgc_start(&C);
    if (!have_cluster) return -1;
    node_start(&A, NULL);
    node_start(&B, NULL);
    return 0;
}

static int teardown(void **st)
{
    (void)st;
    if (A.pid > 0) sh_stop(&A, SIGTERM);
    if (B.pid > 0) sh_stop(&B, SIGTERM);
    sh_cleanup(&A);
    sh_cleanup(&B);
    pgc_stop(&C);
    return 0;
}

#define NEED_CLUSTER() do { if (!have_cluster) skip(); } while (0)

/* One span per call: token_range [pos, pos+9], text naming pos. */
static long write_span(sh_server *s, const char *sid, long long pos, const char *key, cJSON **j)
{
    char body[512];
    snprintf(body, sizeof body,
             "{\"session_id\":\"%s\",\"chunks\":[{\"text\":\"span at %lld holds marker m%lldz\",\"token_range\":[%lld,%lld],"
             "\"layer\":0,\"score\":0.5}]}",
             sid, pos, pos, pos, pos + 9);
    char hk[300];
    const char *hdr[] = {"Content-Type: application/json", hk, NULL};
    snprintf(hk, sizeof hk, "Idempotency-Key: %s", key ? key : "");
    if (!key) hdr[1] = NULL;
    char url[256];
    snprintf(url, sizeof url, "%s/evict/write", s->base);
    tu_resp r;
    tu_http("POST", url, body, strlen(body), hdr, &r);
    long st = r.status;
    if (j) *j = cJSON_Parse(r.body);
    tu_resp_free(&r);
    return st;
}

/* The session's token_range starts in local (= PostgreSQL seq) order, via node s. */
static int dump_starts(sh_server *s, const char *sid, long long *out, int max)
{
    char path[300];
    snprintf(path, sizeof path, "/evict/dump?session_id=%s", sid);
    cJSON *j = NULL;
    assert_int_equal(sh_get(s, path, &j), 200);
    const cJSON *tr = cJSON_GetObjectItemCaseSensitive(j, "token_ranges"), *x;
    int n = 0;
    cJSON_ArrayForEach(x, tr) {
        if (n < max) out[n] = (long long)cJSON_GetArrayItem(x, 0)->valuedouble;
        n++;
    }
    cJSON_Delete(j);
    return n;
}

static int64_t pg_count(const char *sid)
{
    lcx_pgstore_opts o = lcx_pgstore_defaults();
    o.conninfo = C.conninfo;
    lcx_pgstore *pg;
    char msg[256];
    assert_int_equal(lcx_pgstore_open(&o, &pg, msg, sizeof msg), 0);
    int64_t n = -1;
    assert_int_equal(lcx_pgstore_count(pg, sid, &n), 0);
    lcx_pgstore_close(pg);
    return n;
}

static bool has_text(const cJSON *j, const char *needle)
{
    const cJSON *cs = cJSON_GetObjectItemCaseSensitive(j, "chunks"), *c;
    cJSON_ArrayForEach(c, cs) {
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(c, "text");
        if (cJSON_IsString(t) && strstr(t->valuestring, needle)) return true;
    }
    return false;
}

/* Schema: created once, reopened as is, a newer schema refused. Fails when the version
 * check or the migration lock is missing. */
static void t_schema(void **st)
{
    (void)st;
    NEED_CLUSTER();
    PGconn *c = PQconnectdb(C.conninfo);
    assert_int_equal(PQstatus(c), CONNECTION_OK);
    PGresult *r = PQexec(c, "SELECT version FROM lcx_schema");
    assert_int_equal(PQntuples(r), 1);
    assert_int_equal(atoi(PQgetvalue(r, 0, 0)), LCX_PGSTORE_SCHEMA_VERSION);
    PQclear(r);
    PQclear(PQexec(c, "UPDATE lcx_schema SET version = version + 1"));
    lcx_pgstore_opts o = lcx_pgstore_defaults();
    o.conninfo = C.conninfo;
    lcx_pgstore *pg = NULL;
    char msg[256];
    assert_int_equal(lcx_pgstore_open(&o, &pg, msg, sizeof msg), LCX_ENOTSUP);
    assert_null(pg);
    assert_non_null(strstr(msg, "newer"));
    PQclear(PQexec(c, "UPDATE lcx_schema SET version = version - 1"));
    assert_int_equal(lcx_pgstore_open(&o, &pg, msg, sizeof msg), 0);
    lcx_pgstore_close(pg);
    PQfinish(c);
}

/* Write through A, read through B at once (read-your-writes), and the other way round;
 * both nodes hold the spans in one order. Fails when B answers from its local copy
 * without asking PostgreSQL whether it is behind. */
static void t_write_a_read_b(void **st)
{
    (void)st;
    NEED_CLUSTER();
    cJSON *j = NULL;
    assert_int_equal(sh_post(&A, "/evict/write",
                             "{\"session_id\":\"ryw\",\"chunks\":[{\"text\":\"the access code is 481729\",\"token_range\":[0,31],"
                             "\"layer\":0,\"score\":0.4},{\"text\":\"weather: mild\",\"token_range\":[32,63],\"layer\":1,\"score\":0.2}]}",
                             &j),
                     200);
    assert_int_equal(cJSON_GetObjectItemCaseSensitive(j, "accepted")->valueint, 2);
    cJSON_Delete(j);
    assert_int_equal(sh_post(&B, "/evict/retrieve", "{\"session_id\":\"ryw\",\"query\":\"What is the access code?\",\"top_k\":4}", &j),
                     200);
    assert_int_equal(cJSON_GetObjectItemCaseSensitive(j, "session_total")->valueint, 2);
    assert_true(has_text(j, "481729"));
    cJSON_Delete(j);
    assert_int_equal(write_span(&B, "ryw", 64, NULL, NULL), 200);
    assert_int_equal(sh_post(&A, "/evict/retrieve", "{\"session_id\":\"ryw\",\"query\":\"marker m64z\",\"top_k\":4}", &j), 200);
    assert_true(has_text(j, "m64z"));
    cJSON_Delete(j);
    /* texts travel byte-exact (quotes, backslashes, braces, commas, non-ASCII) */
    assert_int_equal(sh_post(&A, "/evict/write",
                             "{\"session_id\":\"ryw2\",\"chunks\":[{\"text\":\"say \\\"hi\\\" \\\\ {a,b} caf\u00e9 \u65e5\u672c zebra\","
                             "\"token_range\":[0,9],\"layer\":0,\"score\":0.1}]}",
                             NULL),
                     200);
    assert_int_equal(sh_post(&B, "/evict/retrieve", "{\"session_id\":\"ryw2\",\"query\":\"zebra\",\"top_k\":1}", &j), 200);
    const cJSON *c0 = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j, "chunks"), 0);
    assert_non_null(c0);
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(c0, "text")->valuestring,
                        "say \"hi\" \\ {a,b} caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac zebra");
    cJSON_Delete(j);
    long long a[8], b[8];
    assert_int_equal(dump_starts(&A, "ryw", a, 8), 3);
    assert_int_equal(dump_starts(&B, "ryw", b, 8), 3);
    assert_memory_equal(a, b, sizeof(long long) * 3);
    assert_true(a[0] == 0 && a[1] == 32 && a[2] == 64);
}

/* A lost commit reply (the test hook drops the first reply of each write after COMMIT)
 * is retried and stored once; a client repeating a write with the same Idempotency-Key
 * (on another node) is stored once, without the key twice. Fails when retries insert
 * again (no ON CONFLICT on span_uuid, or new uuids per attempt). */
static void t_retry_stored_once(void **st)
{
    (void)st;
    NEED_CLUSTER();
    sh_server L;
    const char *env[] = {"LCX_PGSTORE_TEST_LOSE_REPLY=1", NULL};
    node_start(&L, env);
    cJSON *j = NULL;
    assert_int_equal(write_span(&L, "retry", 0, NULL, &j), 200);
    assert_int_equal(cJSON_GetObjectItemCaseSensitive(j, "attempts")->valueint, 2);   /* the retry happened */
    cJSON_Delete(j);
    sh_stop(&L, SIGTERM);
    sh_cleanup(&L);
    assert_int_equal(pg_count("retry"), 1);
    long long s[8];
    assert_int_equal(dump_starts(&B, "retry", s, 8), 1);

    assert_int_equal(write_span(&A, "retry", 10, "client-key-1", NULL), 200);
    assert_int_equal(write_span(&B, "retry", 10, "client-key-1", NULL), 200);
    assert_int_equal(pg_count("retry"), 2);
    assert_int_equal(write_span(&A, "retry", 20, NULL, NULL), 200);
    assert_int_equal(write_span(&B, "retry", 20, NULL, NULL), 200);
    assert_int_equal(pg_count("retry"), 4);
    assert_int_equal(dump_starts(&A, "retry", s, 8), 4);
}

static double status_num(sh_server *s, const char *key)
{
    cJSON *j = NULL;
    assert_int_equal(sh_get(s, "/longctx/status", &j), 200);
    const cJSON *o = cJSON_GetObjectItemCaseSensitive(j, "store");
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    assert_true(cJSON_IsNumber(v));
    double d = v->valuedouble;
    cJSON_Delete(j);
    return d;
}

/* Hibernate on A, resume on B: A ships its hibernated copy as a snapshot, B loads it
 * (no re-embedding, nothing fetched) and fetches only what was written after. Fails when
 * the state is node-local (B would answer resumed:false or miss the spans) or when the
 * snapshot is not used. */
static void t_hibernate_a_resume_b(void **st)
{
    (void)st;
    NEED_CLUSTER();
    for (int i = 0; i < 5; i++) assert_int_equal(write_span(&A, "hib", i * 10, NULL, NULL), 200);
    cJSON *j = NULL;
    double saved = status_num(&A, "snapshots_saved"), loaded = status_num(&B, "snapshots_loaded");
    double fetched = status_num(&B, "spans_fetched");
    assert_int_equal(sh_post(&A, "/sessions/hib/hibernate", "", &j), 200);
    assert_true(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "hibernated")));
    assert_int_equal(cJSON_GetObjectItemCaseSensitive(j, "n_chunks")->valueint, 5);
    cJSON_Delete(j);
    assert_int_equal(sh_post(&B, "/sessions/hib/resume", "", &j), 200);
    assert_true(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "resumed")));
    assert_int_equal(cJSON_GetObjectItemCaseSensitive(j, "n_chunks")->valueint, 5);
    cJSON_Delete(j);
    assert_true(status_num(&A, "snapshots_saved") == saved + 1);
    assert_true(status_num(&B, "snapshots_loaded") == loaded + 1);
    assert_true(status_num(&B, "spans_fetched") == fetched);
    assert_int_equal(sh_post(&B, "/sessions/hib/resume", "", &j), 200);   /* active now: nothing to resume */
    assert_true(cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(j, "resumed")));
    cJSON_Delete(j);
    assert_int_equal(sh_post(&B, "/evict/retrieve", "{\"session_id\":\"hib\",\"query\":\"marker m30z\",\"top_k\":2}", &j), 200);
    assert_true(has_text(j, "m30z"));
    cJSON_Delete(j);
    /* hibernated again after one more write via A: a node that has a copy (B) takes only the new span */
    assert_int_equal(write_span(&A, "hib", 50, NULL, NULL), 200);
    assert_int_equal(sh_post(&A, "/sessions/hib/hibernate", "", &j), 200);
    assert_int_equal(cJSON_GetObjectItemCaseSensitive(j, "n_chunks")->valueint, 6);
    cJSON_Delete(j);
    fetched = status_num(&B, "spans_fetched");
    assert_int_equal(sh_post(&B, "/sessions/hib/resume", "", &j), 200);
    assert_int_equal(cJSON_GetObjectItemCaseSensitive(j, "n_chunks")->valueint, 6);
    cJSON_Delete(j);
    assert_true(status_num(&B, "spans_fetched") == fetched + 1);
}

typedef struct {
    sh_server *s;
    const char *sid;
    long long base;
    int n;
    int ok;
    volatile int *stop;
    long long *acked;   /* [n] positions acknowledged, in order */
} writer;

static void *writer_main(void *p)
{
    writer *w = p;
    for (int i = 0; i < w->n && !(w->stop && *w->stop); i++) {
        long long pos = w->base + (long long)i * 10;
        if (write_span(w->s, w->sid, pos, NULL, NULL) == 200) w->acked[w->ok++] = pos;
        else if (w->stop) break;
    }
    return NULL;
}

/* A and B write one session at the same time: every node (and a fresh one) holds the
 * spans in the same single order, each writer's spans in its own order. Fails when a
 * node appends its own batch before a concurrently committed earlier one. */
static void t_concurrent_one_order(void **st)
{
    (void)st;
    NEED_CLUSTER();
    enum { N = 40 };
    long long acked_a[N], acked_b[N];
    writer wa = {&A, "conc", 1000000, N, 0, NULL, acked_a}, wb = {&B, "conc", 2000000, N, 0, NULL, acked_b};
    pthread_t ta, tb;
    pthread_create(&ta, NULL, writer_main, &wa);
    pthread_create(&tb, NULL, writer_main, &wb);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    assert_int_equal(wa.ok, N);
    assert_int_equal(wb.ok, N);
    long long a[2 * N + 1], b[2 * N + 1], c[2 * N + 1];
    sh_server F;
    node_start(&F, NULL);
    assert_int_equal(dump_starts(&A, "conc", a, 2 * N + 1), 2 * N);
    assert_int_equal(dump_starts(&B, "conc", b, 2 * N + 1), 2 * N);
    assert_int_equal(dump_starts(&F, "conc", c, 2 * N + 1), 2 * N);
    sh_stop(&F, SIGTERM);
    sh_cleanup(&F);
    assert_memory_equal(a, b, sizeof a[0] * 2 * N);
    assert_memory_equal(a, c, sizeof a[0] * 2 * N);
    int ia = 0, ib = 0, switches = 0;
    for (int i = 0; i < 2 * N; i++) {
        if (a[i] < 2000000) assert_true(a[i] == acked_a[ia++]);
        else assert_true(a[i] == acked_b[ib++]);
        if (i && (a[i] < 2000000) != (a[i - 1] < 2000000)) switches++;
    }
    fprintf(stderr, "concurrent writers interleaved %d times\n", switches);
}

/* kill -9 a node in the middle of a write stream: every span it acknowledged is
 * retrievable through B. Fails when a write is acknowledged before its commit. */
static void t_kill9_mid_stream(void **st)
{
    (void)st;
    NEED_CLUSTER();
    enum { N = 400 };
    sh_server K;
    node_start(&K, NULL);
    static long long acked[N];
    volatile int stop = 0;
    writer w = {&K, "k9", 0, N, 0, &stop, acked};
    pthread_t t;
    pthread_create(&t, NULL, writer_main, &w);
    for (int i = 0; i < 3000 && w.ok < 25; i++) usleep(10000);
    kill(K.pid, SIGKILL);
    pthread_join(t, NULL);
    stop = 1;
    tu_kill_wait(K.pid, SIGKILL, 5000);
    K.pid = 0;
    sh_cleanup(&K);
    assert_true(w.ok >= 25 && w.ok < N);
    static long long got[N + 1];
    int n = dump_starts(&B, "k9", got, N + 1);
    assert_true(n >= w.ok);   /* one more may have committed without its answer */
    for (int i = 0; i < w.ok; i++) assert_true(got[i] == acked[i]);
    cJSON *j = NULL;
    char q[200];
    snprintf(q, sizeof q, "{\"session_id\":\"k9\",\"query\":\"marker m%lldz\",\"top_k\":3}", acked[w.ok - 1]);
    assert_int_equal(sh_post(&B, "/evict/retrieve", q, &j), 200);
    char needle[40];
    snprintf(needle, sizeof needle, "m%lldz", acked[w.ok - 1]);
    assert_true(has_text(j, needle));
    cJSON_Delete(j);
}

/* Both standbys down: a write answers 503 JSON after the bounded wait, reads are still
 * served; one standby back → writes go on. Fails when writes are acknowledged without a
 * synchronous standby, hang, or when reads depend on the write path. */
static void t_standbys_down(void **st)
{
    (void)st;
    NEED_CLUSTER();
    assert_int_equal(write_span(&A, "sb", 0, NULL, NULL), 200);
    assert_int_equal(pgc_node(&C, "s1", "stop"), 0);
    assert_int_equal(write_span(&A, "sb", 10, NULL, NULL), 200);   /* one standby down: writes go on */
    assert_int_equal(pgc_node(&C, "s2", "stop"), 0);
    cJSON *j = NULL;
    assert_int_equal(write_span(&A, "sb", 20, "k-sb-20", &j), 503);
    sh_assert_error(j, "store_unavailable");
    cJSON_Delete(j);
    assert_int_equal(sh_post(&B, "/evict/retrieve", "{\"session_id\":\"sb\",\"query\":\"marker m10z\",\"top_k\":2}", &j), 200);
    assert_true(has_text(j, "m10z"));
    cJSON_Delete(j);
    assert_int_equal(pgc_node(&C, "s2", "start"), 0);
    /* the unconfirmed write may complete once a standby is back; the retry with its key stores it once */
    int stv = 0;
    for (int i = 0; i < 20 && (stv = (int)write_span(&B, "sb", 20, "k-sb-20", NULL)) != 200; i++) usleep(250000);
    assert_int_equal(stv, 200);
    assert_int_equal(pg_count("sb"), 3);
    assert_int_equal(pgc_node(&C, "s1", "start"), 0);
}

/* --store-reads notify: the node learns of writes on other nodes from NOTIFY and answers
 * reads that are not behind without a query. Fails when notifications do not advance
 * the node (it never sees the second write) or when the no-query path never runs. */
static void t_notify_reads(void **st)
{
    (void)st;
    NEED_CLUSTER();
    sh_server N;
    const char *extra[] = {"--store", C.conninfo, "--store-reads", "notify", "--quiet", NULL};
    sh_start(&N, NULL, extra, NULL);
    for (int round = 0; round < 2; round++) {
        assert_int_equal(write_span(&A, "nt", round * 10, NULL, NULL), 200);
        char q[160], needle[32];
        snprintf(q, sizeof q, "{\"session_id\":\"nt\",\"query\":\"marker m%dz\",\"top_k\":2}", round * 10);
        snprintf(needle, sizeof needle, "m%dz", round * 10);
        bool seen = false;
        for (int i = 0; i < 200 && !seen; i++) {
            cJSON *j = NULL;
            assert_int_equal(sh_post(&N, "/evict/retrieve", q, &j), 200);
            seen = has_text(j, needle);
            cJSON_Delete(j);
            if (!seen) usleep(10000);
        }
        assert_true(seen);
    }
    double before = status_num(&N, "reads_local");
    for (int i = 0; i < 5; i++) {
        cJSON *j = NULL;
        assert_int_equal(sh_post(&N, "/evict/retrieve", "{\"session_id\":\"nt\",\"query\":\"marker m10z\",\"top_k\":2}", &j), 200);
        assert_true(has_text(j, "m10z"));
        cJSON_Delete(j);
    }
    assert_true(status_num(&N, "reads_local") >= before + 5);
    sh_stop(&N, SIGTERM);
    sh_cleanup(&N);
}

static double index_scope(sh_server *s, const char *dir, const char *field)
{
    char path[4200];
    snprintf(path, sizeof path, "/index?scope=%s", dir);   /* tu_tmpdir paths need no escaping */
    cJSON *j = NULL;
    assert_int_equal(sh_post(s, path, "", &j), 200);
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, field);
    assert_true(cJSON_IsNumber(v));
    double d = v->valuedouble;
    cJSON_Delete(j);
    return d;
}

/* A scope indexed by A is published; B (same files) loads it instead of re-reading them,
 * and serves it; a re-index after a change publishes a new version that a fresh node
 * takes. Fails when B walks and re-reads the tree (files_read > 0) or the blob is unusable. */
static void t_scope_shared(void **st)
{
    (void)st;
    NEED_CLUSTER();
    char *proj = tu_tmpdir(), p[4300];
    for (int i = 0; i < 5; i++) {
        char src[256];
        snprintf(p, sizeof p, "%s/mod%d.c", proj, i);
        snprintf(src, sizeof src, "int shared_scope_fn_%d(int x)\n{\n    return x * %d + 7;\n}\n", i, i + 3);
        assert_int_equal(tu_write(p, src, strlen(src)), 0);
    }
    assert_true(index_scope(&A, proj, "files_read") == 5);
    assert_true(index_scope(&B, proj, "files_read") == 0);
    assert_true(index_scope(&B, proj, "files") == 5);
    assert_true(status_num(&B, "scopes_loaded") >= 1);
    char path[4400];
    snprintf(path, sizeof path, "/retrieve?scope=%s&query=shared_scope_fn_3&top_k=2", proj);
    tu_resp r;
    assert_int_equal(sh_req(&B, "POST", path, NULL, 0, NULL, &r), 200);
    assert_non_null(strstr(r.body, "shared_scope_fn_3"));
    tu_resp_free(&r);
    snprintf(p, sizeof p, "%s/mod5.c", proj);
    assert_int_equal(tu_write(p, "int shared_scope_fn_5(void) { return 5; }\n", 42), 0);
    assert_true(index_scope(&A, proj, "files_read") == 1);
    sh_server F;
    node_start(&F, NULL);
    assert_true(index_scope(&F, proj, "files_read") == 0);
    assert_true(index_scope(&F, proj, "files") == 6);
    sh_stop(&F, SIGTERM);
    sh_cleanup(&F);
    tu_rmrf(proj);
    free(proj);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(t_schema),
        cmocka_unit_test(t_write_a_read_b),
        cmocka_unit_test(t_retry_stored_once),
        cmocka_unit_test(t_hibernate_a_resume_b),
        cmocka_unit_test(t_notify_reads),
        cmocka_unit_test(t_scope_shared),
        cmocka_unit_test(t_concurrent_one_order),
        cmocka_unit_test(t_kill9_mid_stream),
        cmocka_unit_test(t_standbys_down),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
