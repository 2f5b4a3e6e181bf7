/* The PostgreSQL store path under a full disk, and its metrics:
 *   - unit: SQLSTATE class 53 maps to the error codes the service answers by
 *     (lcx__pgstore_sqlstate_err: 53100 disk_full → LCX_ENOSPC, …);
 *   - HTTP, real cluster (pgcluster.sh): a write the server refuses with SQLSTATE 53100 —
 *     raised by a trigger installed on the primary, because filling a real PostgreSQL disk
 *     in a test is not practical; the error reaches the service through the same libpq path
 *     as a real ENOSPC — answers 507 insufficient_storage and stores nothing; once the
 *     trigger is gone writes are accepted again and the session holds exactly the
 *     acknowledged spans;
 *   - /metrics counts spans and evict rounds on this path as on the embedded one.
 * The HTTP part skips without PostgreSQL. */
#include "pg_harness.h"
#include "svc_harness.h"
#include "longctx/lcx_err.h"
#include "pgstore/pgstore_int.h"

#include <libpq-fe.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void t_sqlstate_map(void **st)
{
    (void)st;
    assert_int_equal(lcx__pgstore_sqlstate_err("53100"), LCX_ENOSPC);   /* disk_full */
    assert_int_equal(lcx__pgstore_sqlstate_err("53000"), LCX_ENOSPC);   /* insufficient_resources */
    assert_int_equal(lcx__pgstore_sqlstate_err("53400"), LCX_ENOSPC);   /* configuration_limit_exceeded */
    assert_int_equal(lcx__pgstore_sqlstate_err("53200"), LCX_ENOMEM);   /* out_of_memory */
    assert_int_equal(lcx__pgstore_sqlstate_err("53300"), LCX_EIO);      /* too_many_connections */
    assert_int_equal(lcx__pgstore_sqlstate_err("23505"), LCX_EIO);
    assert_int_equal(lcx__pgstore_sqlstate_err("5310"), LCX_EIO);
    assert_int_equal(lcx__pgstore_sqlstate_err(""), LCX_EIO);
    assert_int_equal(lcx__pgstore_sqlstate_err(NULL), LCX_EIO);
}

static void sql(int port, const char *q)
{
    char ci[128];
    snprintf(ci, sizeof ci, "host=127.0.0.1 port=%d user=lcx dbname=postgres connect_timeout=5", port);
    PGconn *c = PQconnectdb(ci);
    assert_int_equal(PQstatus(c), CONNECTION_OK);
    PGresult *r = PQexec(c, q);
    if (PQresultStatus(r) != PGRES_COMMAND_OK) fail_msg("%s: %s", q, PQresultErrorMessage(r));
    PQclear(r);
    PQfinish(c);
}

static long write_round(sh_server *s, int round, cJSON **j)
{
    char body[600];
    snprintf(body, sizeof body,
             "{\"session_id\":\"df\",\"chunks\":["
             "{\"text\":\"round %d first span\",\"token_range\":[%d,%d],\"layer\":0,\"round\":%d,\"score\":0.5},"
             "{\"text\":\"round %d second span\",\"token_range\":[%d,%d],\"layer\":1,\"round\":%d,\"score\":0.5}]}",
             round, round * 100, round * 100 + 9, round, round, round * 100 + 10, round * 100 + 19, round);
    return sh_post(s, "/evict/write", body, j);
}

/* value of a counter line "name value" in the /metrics text */
static double metric(sh_server *s, const char *name)
{
    tu_resp r;
    assert_int_equal(sh_req(s, "GET", "/metrics", NULL, 0, NULL, &r), 200);
    char pat[128];
    snprintf(pat, sizeof pat, "\n%s ", name);
    const char *p = strstr(r.body, pat);
    if (!p) fail_msg("no %s in /metrics", name);
    double v = strtod(p + strlen(pat), NULL);
    tu_resp_free(&r);
    return v;
}

static void t_disk_full_507(void **st)
{
    (void)st;
    if (!pgc_available()) {
        fprintf(stderr, "PostgreSQL binaries missing (postgresql-15): skipped\n");
        skip();
    }
    pgc_cluster C;
    assert_true(pgc_start(&C));
    sh_server A;
    const char *extra[] = {"--store", C.conninfo, "--store-write-timeout-s", "20", "--quiet", NULL};
    sh_start(&A, NULL, extra, NULL);
    assert_int_equal(write_round(&A, 1, NULL), 200);
    assert_true(metric(&A, "longctx_spans_stored_total") == 2);
    assert_true(metric(&A, "longctx_evict_rounds_total") == 1);

    sql(C.port[0], "CREATE FUNCTION lcx_test_full() RETURNS trigger LANGUAGE plpgsql AS "
                   "$$BEGIN RAISE EXCEPTION 'could not extend file: No space left on device' "
                   "USING ERRCODE = 'disk_full'; END$$;"
                   "CREATE TRIGGER lcx_test_full BEFORE INSERT ON lcx_sessions "
                   "FOR EACH ROW EXECUTE FUNCTION lcx_test_full()");
    cJSON *j = NULL;
    assert_int_equal(write_round(&A, 2, &j), 507);
    sh_assert_error(j, "insufficient_storage");
    cJSON_Delete(j);
    assert_true(metric(&A, "longctx_spans_stored_total") == 2);   /* nothing stored, nothing counted */
    assert_true(metric(&A, "longctx_evict_rounds_total") == 1);

    sql(C.port[0], "DROP TRIGGER lcx_test_full ON lcx_sessions; DROP FUNCTION lcx_test_full()");
    assert_int_equal(write_round(&A, 3, NULL), 200);
    assert_true(metric(&A, "longctx_spans_stored_total") == 4);
    assert_true(metric(&A, "longctx_evict_rounds_total") == 2);

    /* a fresh node rebuilds the session from PostgreSQL: rounds 1 and 3, not 2 */
    sh_server F;
    sh_start(&F, NULL, extra, NULL);
    assert_int_equal(sh_get(&F, "/evict/dump?session_id=df", &j), 200);
    const cJSON *tr = cJSON_GetObjectItemCaseSensitive(j, "token_ranges"), *x;
    int n = 0;
    cJSON_ArrayForEach(x, tr) {
        int s0 = (int)cJSON_GetArrayItem(x, 0)->valuedouble;
        assert_true(s0 / 100 == 1 || s0 / 100 == 3);
        n++;
    }
    cJSON_Delete(j);
    assert_int_equal(n, 4);
    sh_stop(&A, SIGTERM);
    sh_stop(&F, SIGTERM);
    sh_cleanup(&A);
    sh_cleanup(&F);
    pgc_stop(&C);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(t_sqlstate_map), cmocka_unit_test(t_disk_full_507)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
