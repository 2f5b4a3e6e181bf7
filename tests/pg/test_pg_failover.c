/* Primary failover under a write stream: the primary is stopped with pg_ctl -m immediate,
 * the most advanced standby is promoted (what a failover manager does with quorum commit),
 * the other follows it. Every acknowledged span is then present, and writes resume
 * through the same multi-host connection string. Skips without PostgreSQL. */
#include "pg_harness.h"
#include "svc_harness.h"

#include <libpq-fe.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { N = 100000 };
static long long acked[N];
static volatile int n_acked, stop_writing, n_failed;

typedef struct { sh_server *s; } wctx;

static long write_span(sh_server *s, long long pos)
{
    char body[400];
    snprintf(body, sizeof body,
             "{\"session_id\":\"fo\",\"chunks\":[{\"text\":\"span at %lld holds marker m%lldz\",\"token_range\":[%lld,%lld],"
             "\"layer\":0,\"score\":0.5}]}", pos, pos, pos, pos + 9);
    return sh_post(s, "/evict/write", body, NULL);
}

static void *writer(void *p)
{
    wctx *w = p;
    for (long long i = 0; i < N && !stop_writing; i++) {
        if (write_span(w->s, i * 10) == 200) acked[n_acked++] = i * 10;
        else n_failed++;
    }
    return NULL;
}

/* WAL received by the standby on port (bytes), -1 when unreachable. */
static long long received_lsn(int port)
{
    char ci[128];
    snprintf(ci, sizeof ci, "host=127.0.0.1 port=%d user=lcx dbname=postgres connect_timeout=3", port);
    PGconn *c = PQconnectdb(ci);
    long long v = -1;
    if (PQstatus(c) == CONNECTION_OK) {
        PGresult *r = PQexec(c, "SELECT (pg_last_wal_receive_lsn() - '0/0')::bigint");
        if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1 && !PQgetisnull(r, 0, 0))
            v = atoll(PQgetvalue(r, 0, 0));
        PQclear(r);
    }
    PQfinish(c);
    return v;
}

static void t_failover(void **st)
{
    (void)st;
    if (!pgc_available()) {
        fprintf(stderr, "PostgreSQL binaries missing (postgresql-15): skipped\n");
        skip();
    }
    pgc_cluster C;
    assert_true(pgc_start(&C));
    sh_server A, F;
    const char *extra[] = {"--store", C.conninfo, "--store-write-timeout-s", "20", "--quiet", NULL};
    sh_start(&A, NULL, extra, NULL);
    wctx w = {&A};
    pthread_t t;
    pthread_create(&t, NULL, writer, &w);
    for (int i = 0; i < 3000 && n_acked < 30; i++) usleep(10000);
    assert_true(n_acked >= 30);

    assert_int_equal(pgc_node(&C, "p", "kill"), 0);
    int before = n_acked;
    long long l1 = received_lsn(C.port[1]), l2 = received_lsn(C.port[2]);
    assert_true(l1 > 0 && l2 > 0);
    const char *prom = l1 >= l2 ? "s1" : "s2", *other = l1 >= l2 ? "s2" : "s1";
    int prom_port = l1 >= l2 ? C.port[1] : C.port[2];
    fprintf(stderr, "acked before failover %d; promoting %s (lsn %lld vs %lld)\n", before, prom, l1, l2);
    assert_int_equal(pgc_node(&C, prom, "promote"), 0);
    assert_int_equal(pgc_follow(&C, other, prom_port), 0);

    /* writes resume: the stream acknowledges more spans after the promotion */
    int mark = n_acked;
    for (int i = 0; i < 3000 && n_acked < mark + 20; i++) usleep(10000);
    stop_writing = 1;
    pthread_join(t, NULL);
    fprintf(stderr, "acked %d in all, %d refused during the failover\n", n_acked, n_failed);
    assert_true(n_acked >= mark + 20);

    /* a fresh node rebuilds the session from the new primary: every acked span, in order */
    sh_start(&F, NULL, extra, NULL);
    cJSON *j = NULL;
    assert_int_equal(sh_get(&F, "/evict/dump?session_id=fo", &j), 200);
    const cJSON *tr = cJSON_GetObjectItemCaseSensitive(j, "token_ranges"), *x;
    int k = 0, n = 0;
    cJSON_ArrayForEach(x, tr) {
        long long s = (long long)cJSON_GetArrayItem(x, 0)->valuedouble;
        if (k < n_acked && s == acked[k]) k++;
        n++;
    }
    cJSON_Delete(j);
    fprintf(stderr, "new primary holds %d spans, %d acknowledged ones found in order\n", n, k);
    assert_int_equal(k, n_acked);
    /* and the node that wrote through the failover agrees */
    assert_int_equal(sh_get(&A, "/evict/dump?session_id=fo", &j), 200);
    assert_int_equal(sh_count(j, "token_ranges"), n);
    cJSON_Delete(j);
    sh_stop(&A, SIGTERM);
    sh_stop(&F, SIGTERM);
    sh_cleanup(&A);
    sh_cleanup(&F);
    pgc_stop(&C);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(t_failover)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
