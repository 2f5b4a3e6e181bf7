/* Integration: kill -9 longctx-svc in the middle of a stream of /evict/write requests,
 * restart it on the same data dir: every acknowledged (HTTP 200) chunk is present and
 * retrievable, and the store directory passes lcx_store_validate. Two crash rounds, two
 * concurrent writers, so the kill lands inside appends with high probability. */
#include "svc_harness.h"

#include <curl/curl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "longctx/lcx.h"

#define CHUNKS_PER_REQ 8
#define MAX_REQ 4000
#define KILL_AFTER_ACKS 60   /* acknowledged requests (all writers) before the kill */

typedef struct {
    sh_server *s;
    int writer;          /* 0/1: disjoint id spaces */
    int round;
    int acked_reqs;      /* requests that got 200; their chunks must survive */
    atomic_int *acks_total;
} wctx;

/* Chunk id → unique number in its text and its token_range start. */
static long item_id(int round, int writer, int req, int k)
{
    return 1000000L + (long)round * 100000 + (long)writer * 50000 + (long)req * CHUNKS_PER_REQ + k;
}

static void *writer_main(void *p)
{
    wctx *w = p;
    char url[128];
    snprintf(url, sizeof url, "%s/evict/write", w->s->base);
    for (int r = 0; r < MAX_REQ; r++) {
        char body[8192];
        size_t o = (size_t)snprintf(body, sizeof body, "{\"session_id\":\"crash\",\"chunks\":[");
        for (int k = 0; k < CHUNKS_PER_REQ; k++) {
            long id = item_id(w->round, w->writer, r, k);
            o += (size_t)snprintf(body + o, sizeof body - o,
                                  "%s{\"text\":\"evicted record %ld from writer %d: the checksum value is %ld\","
                                  "\"token_range\":[%ld,%ld],\"layer\":%d,\"score\":0.5}",
                                  k ? "," : "", id, w->writer, id * 7, id, id, k);
        }
        snprintf(body + o, sizeof body - o, "]}");
        tu_resp resp;
        tu_http("POST", url, body, strlen(body), NULL, &resp);
        long st = resp.status;
        tu_resp_free(&resp);
        if (st != 200) break;          /* the server died under us */
        w->acked_reqs = r + 1;
        atomic_fetch_add(w->acks_total, 1);
    }
    return NULL;
}


static void test_kill9_during_writes(void **st)
{
    sh_server s;
    sh_start(&s, NULL, NULL, NULL);
    char *dir = strdup(s.data_dir);
    int acked[2][2] = {{0, 0}, {0, 0}};
    srand((unsigned)time(NULL));
    for (int round = 0; round < 2; round++) {
        atomic_int total = 0;
        wctx w[2] = {{&s, 0, round, 0, &total}, {&s, 1, round, 0, &total}};
        pthread_t th[2];
        for (int i = 0; i < 2; i++) pthread_create(&th[i], NULL, writer_main, &w[i]);
        while (atomic_load(&total) < KILL_AFTER_ACKS) usleep(1000);
        usleep((useconds_t)(rand() % 3000));      /* land somewhere inside the next requests */
        kill(s.pid, SIGKILL);
        int wst = tu_kill_wait(s.pid, 0, 10000);
        assert_true(WIFSIGNALED(wst));
        s.pid = 0;
        for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
        acked[round][0] = w[0].acked_reqs;
        acked[round][1] = w[1].acked_reqs;
        fprintf(stderr, "round %d: killed after %d + %d acknowledged requests\n", round, w[0].acked_reqs, w[1].acked_reqs);
        assert_true(w[0].acked_reqs + w[1].acked_reqs >= KILL_AFTER_ACKS);

        /* restart on the same data dir */
        free(s.data_dir);
        s.data_dir = NULL;
        sh_start(&s, dir, NULL, NULL);

        /* every acknowledged chunk of every round so far is present ... */
        cJSON *j;
        long st = sh_get(&s, "/evict/dump?session_id=crash", &j);
        if (st != 200) {   /* say why: the reply and the server's log */
            char *e = j ? cJSON_PrintUnformatted(j) : NULL, *out = NULL, cmd[4400];
            snprintf(cmd, sizeof cmd, "cat '%s'", s.log);
            tu_run(cmd, &out);
            fprintf(stderr, "dump after restart: %ld %s\nserver log:\n%s\n", st, e ? e : "", out ? out : "");
            free(e);
            free(out);
        }
        assert_int_equal(st, 200);
        const cJSON *tr = cJSON_GetObjectItemCaseSensitive(j, "token_ranges");
        int n = cJSON_GetArraySize(tr);
        char *seen = calloc(200000, 1);
        const cJSON *x;
        cJSON_ArrayForEach(x, tr) {
            long a = (long)cJSON_GetArrayItem(x, 0)->valuedouble;
            if (a >= 1000000 && a < 1200000) seen[a - 1000000] = 1;
        }
        long need = 0, missing = 0;
        for (int rr = 0; rr <= round; rr++)
            for (int wi = 0; wi < 2; wi++)
                for (int q = 0; q < acked[rr][wi]; q++)
                    for (int k = 0; k < CHUNKS_PER_REQ; k++) {
                        need++;
                        if (!seen[item_id(rr, wi, q, k) - 1000000]) missing++;
                    }
        fprintf(stderr, "round %d: %d chunks stored, %ld acknowledged, %ld missing\n", round, n, need, missing);
        assert_int_equal(missing, 0);
        assert_true(n >= need);
        /* a request is all-or-nothing: the stored count is a whole number of requests */
        assert_int_equal(n % CHUNKS_PER_REQ, 0);
        free(seen);
        cJSON_Delete(j);

        /* ... and retrievable: the last acknowledged chunk of each writer + a sample */
        for (int wi = 0; wi < 2; wi++) {
            int last = acked[round][wi] - 1;
            for (int q = last; q >= 0; q -= (last / 5 + 1)) {
                long id = item_id(round, wi, q, 3);
                char body[512];
                snprintf(body, sizeof body, "{\"session_id\":\"crash\",\"query\":\"evicted record %ld\",\"top_k\":3}", id);
                assert_int_equal(sh_post(&s, "/evict/retrieve", body, &j), 200);
                const cJSON *c0 = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j, "chunks"), 0);
                assert_non_null(c0);
                char want[128];
                snprintf(want, sizeof want, "evicted record %ld from", id);
                const char *txt = cJSON_GetObjectItemCaseSensitive(c0, "text")->valuestring;
                if (!strstr(txt, want)) fprintf(stderr, "query %ld got: %s\n", id, txt);
                assert_non_null(strstr(txt, want));
                cJSON_Delete(j);
            }
        }
    }
    /* clean stop, then the on-disk store validates */
    int w = sh_stop(&s, SIGTERM);
    assert_true(WIFEXITED(w) && WEXITSTATUS(w) == 0);
    assert_int_equal(sh_validate_sessions(dir), 1);
    free(dir);
    sh_cleanup(&s);
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_ALL);
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_kill9_during_writes)};
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    curl_global_cleanup();
    return rc;
}
