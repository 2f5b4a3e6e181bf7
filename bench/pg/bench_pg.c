/* Several nodes over PostgreSQL vs the embedded store, in one run on one machine (A/B
 * alternated): /evict/write latency per turn and spans/s with 1 and 2 nodes, catch-up
 * time of a node that missed a session, retrieve latency on a caught-up node, and the
 * PostgreSQL share of a write (lcx_pgstore_write in-process: network + WAL fsync +
 * synchronous standby).
 *   ./bench/bench_pg --bin bin/longctx-svc [--turns 20] [--spans 500] [--words 128]
 *                    [--catchup 20000] [--queries 300] */
#include "pg_harness.h"
#include "testutil.h"
#include "longctx/lcx_pgstore.h"
#include "util/util.h"
#include "../svc/spangen.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char *bin = "bin/longctx-svc";
static int turns = 20, spans = 500, words = 128, catchup = 20000, queries = 300;

typedef struct { pid_t pid; int port; char dir[128]; } node;

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static void node_start(node *n, const char *store, const char *reads)
{
    n->port = tu_free_port();
    snprintf(n->dir, sizeof n->dir, "/tmp/lcxbpg.%d.%d", (int)getpid(), n->port);
    char port[16];
    snprintf(port, sizeof port, "%d", n->port);
    const char *argv[16] = {bin, "serve", "--host", "127.0.0.1", "--port", port, "--data-dir", n->dir, "--quiet", NULL};
    if (store) argv[9] = "--store", argv[10] = store, argv[11] = "--store-reads", argv[12] = reads ? reads : "strict";
    char log[300];
    snprintf(log, sizeof log, "%s.log", n->dir);
    n->pid = tu_spawn((char *const *)argv, NULL, log);
    if (!tu_wait_http(n->port, "/healthz", 30000)) { fprintf(stderr, "node did not start (%s)\n", log); exit(1); }
}

static void node_stop(node *n)
{
    tu_kill_wait(n->pid, SIGTERM, 20000);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' '%s.log'", n->dir, n->dir);
    tu_run(cmd, NULL);
}

static long post(node *n, const char *path, const char *body, size_t len, double *ms)
{
    char url[512];
    snprintf(url, sizeof url, "http://127.0.0.1:%d%s", n->port, path);
    const char *hdr[] = {"Content-Type: application/json", NULL};
    tu_resp r;
    double t0 = now_ms();
    tu_http("POST", url, body, len, hdr, &r);
    if (ms) *ms = now_ms() - t0;
    long st = r.status;
    if (st != 200) fprintf(stderr, "POST %s → %ld %.200s\n", path, st, r.body ? r.body : "");
    tu_resp_free(&r);
    return st;
}

/* One turn: spans spans of `words` words, consecutive token ranges from *pos. */
static pthread_mutex_t gen_mu = PTHREAD_MUTEX_INITIALIZER;   /* the generator and its buffer are shared */

static char *turn_body(const char *sid, long long *pos, size_t *len)
{
    lcx_buf b = {0};
    static char text[65536];
    pthread_mutex_lock(&gen_mu);
    lcx__buf_printf(&b, "{\"session_id\":\"%s\",\"chunks\":[", sid);
    for (int i = 0; i < spans; i++) {
        span_text(text, words);
        lcx__buf_printf(&b, "%s{\"text\":\"%s\",\"token_range\":[%lld,%lld],\"layer\":0,\"score\":0.5}", i ? "," : "", text,
                       *pos, *pos + 255);
        *pos += 256;
    }
    lcx__buf_puts(&b, "]}");
    pthread_mutex_unlock(&gen_mu);
    *len = b.len;
    return lcx__buf_steal(&b, len);
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}
static double pct(double *v, int n, double p)
{
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    int i = (int)(p * (n - 1) + 0.5);
    return v[i];
}

typedef struct { node *n; char sid[64]; int turns; double *ms; long long pos; double wall; } wjob;

static void *wjob_main(void *p)
{
    wjob *j = p;
    double t0 = now_ms();
    for (int t = 0; t < j->turns; t++) {
        size_t len;
        char *b = turn_body(j->sid, &j->pos, &len);
        post(j->n, "/evict/write", b, len, &j->ms[t]);
        free(b);
    }
    j->wall = now_ms() - t0;
    return NULL;
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--bin") && i + 1 < argc) bin = argv[++i];
        else if (!strcmp(argv[i], "--turns") && i + 1 < argc) turns = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--spans") && i + 1 < argc) spans = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--words") && i + 1 < argc) words = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--catchup") && i + 1 < argc) catchup = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--queries") && i + 1 < argc) queries = atoi(argv[++i]);
        else { fprintf(stderr, "usage: %s --bin longctx-svc [--turns N --spans N --words N --catchup N --queries N]\n", argv[0]); return 2; }
    }
    if (!pgc_available()) { fprintf(stderr, "PostgreSQL binaries missing\n"); return 0; }
    make_vocab();
    pgc_cluster C;
    if (!pgc_start(&C)) return 1;
    node E, P, Q, R;
    node_start(&E, NULL, NULL);
    node_start(&P, C.conninfo, NULL);
    node_start(&Q, C.conninfo, NULL);
    node_start(&R, C.conninfo, "notify");
    printf("bench_pg: %d spans/turn of %d words, %d turns per arm, cluster = primary + 2 sync standbys (loopback)\n",
           spans, words, turns);

    /* 1 node: alternate embedded / PostgreSQL turn by turn */
    double *me = calloc((size_t)turns, sizeof(double)), *mp = calloc((size_t)turns, sizeof(double));
    long long pe = 0, pp = 0;
    for (int t = 0; t < turns; t++) {
        size_t len;
        char *b = turn_body("w1e", &pe, &len);
        post(&E, "/evict/write", b, len, &me[t]);
        free(b);
        b = turn_body("w1p", &pp, &len);
        post(&P, "/evict/write", b, len, &mp[t]);
        free(b);
    }
    double se = 0, sp = 0;
    for (int t = 0; t < turns; t++) se += me[t], sp += mp[t];
    double e50 = pct(me, turns, 0.5), e95 = pct(me, turns, 0.95), p50 = pct(mp, turns, 0.5), p95 = pct(mp, turns, 0.95);
    printf("write 1 node   embedded p50 %.1f ms p95 %.1f ms %.0f spans/s | postgresql p50 %.1f ms p95 %.1f ms %.0f spans/s | p50 ratio %.2f\n",
           e50, e95, spans * turns / (se / 1e3), p50, p95, spans * turns / (sp / 1e3), p50 / e50);

    /* 2 writers at once: two embedded sessions on one node vs two PostgreSQL nodes */
    for (int arm = 0; arm < 2; arm++) {
        double *m1 = calloc((size_t)turns, sizeof(double)), *m2 = calloc((size_t)turns, sizeof(double));
        wjob j1 = {arm ? &P : &E, "", turns, m1, 0, 0}, j2 = {arm ? &Q : &E, "", turns, m2, 0, 0};
        snprintf(j1.sid, sizeof j1.sid, "w2-%d-a", arm);
        snprintf(j2.sid, sizeof j2.sid, "w2-%d-b", arm);
        pthread_t t1, t2;
        double t0 = now_ms();
        pthread_create(&t1, NULL, wjob_main, &j1);
        pthread_create(&t2, NULL, wjob_main, &j2);
        pthread_join(t1, NULL);
        pthread_join(t2, NULL);
        double wall = now_ms() - t0;
        double all[2 * 1024];
        int k = 0;
        for (int t = 0; t < turns && k < 2048; t++) all[k++] = m1[t], all[k++] = m2[t];
        printf("write 2 %s p50 %.1f ms p95 %.1f ms, %.0f spans/s together\n",
               arm ? "nodes  postgresql (A and B)" : "writers embedded (one node)", pct(all, k, 0.5), pct(all, k, 0.95),
               2.0 * spans * turns / (wall / 1e3));
        free(m1);
        free(m2);
    }

    /* the PostgreSQL share of a write: lcx_pgstore_write in-process, same turn size, with
     * synchronous_commit on (WAL fsync + a synchronous standby), local (WAL fsync only) and
     * off (neither: SQL, index maintenance, loopback), alternated turn by turn */
    {
        static const char *mode[3] = {"on", "local", "off"};
        lcx_pgstore *pg[3] = {NULL, NULL, NULL};
        for (int k = 0; k < 3; k++) {
            char env[64];
            snprintf(env, sizeof env, "-c synchronous_commit=%s", mode[k]);
            setenv("PGOPTIONS", env, 1);   /* libpq reads it at connect */
            lcx_pgstore_opts o = lcx_pgstore_defaults();
            o.conninfo = C.conninfo;
            o.max_conns = 1;
            char msg[256];
            if (lcx_pgstore_open(&o, &pg[k], msg, sizeof msg) != 0) { fprintf(stderr, "%s\n", msg); return 1; }
        }
        unsetenv("PGOPTIONS");
        lcx_chunk *cs = calloc((size_t)spans, sizeof *cs);
        char **tx = calloc((size_t)spans, sizeof *tx);
        double *mw[3];
        for (int k = 0; k < 3; k++) mw[k] = calloc((size_t)turns, sizeof(double));
        for (int t = 0; t < turns; t++) {
            for (int k = 0; k < 3; k++) {
                for (int i = 0; i < spans; i++) {
                    static char text[65536];
                    size_t n = span_text(text, words);
                    tx[i] = strdup(text);
                    cs[i] = lcx_chunk_init();
                    cs[i].text = tx[i], cs[i].text_len = (uint32_t)n;
                    cs[i].tok_start = (int64_t)t * spans * 256 + i * 256, cs[i].tok_end = cs[i].tok_start + 255;
                    cs[i].layer = 0, cs[i].score = 0.5f;
                }
                lcx_pgstore_write_result w;
                char sid[32];
                snprintf(sid, sizeof sid, "direct-%s", mode[k]);
                double t0 = now_ms();
                lcx_pgstore_write(pg[k], sid, cs, spans, NULL, 0, &w);
                mw[k][t] = now_ms() - t0;
                for (int i = 0; i < spans; i++) free(tx[i]);
            }
        }
        double on = pct(mw[0], turns, 0.5), loc = pct(mw[1], turns, 0.5), off = pct(mw[2], turns, 0.5);
        printf("pgstore_write alone p50: synchronous_commit=on %.1f ms (p95 %.1f), local %.1f ms, off %.1f ms"
               " → per span: SQL+index+loopback %.0f us, WAL fsync %.0f us, synchronous standby %.0f us;"
               " rest of a node's write (HTTP, parse, local index + fsync, not overlapped) ~ %.1f ms\n",
               on, pct(mw[0], turns, 0.95), loc, off, off * 1e3 / spans, (loc - off) * 1e3 / spans, (on - loc) * 1e3 / spans,
               p50 - on);
        for (int k = 0; k < 3; k++) free(mw[k]), lcx_pgstore_close(pg[k]);
        free(tx);
        free(cs);
    }

    /* catch-up: P writes `catchup` spans to a session Q never saw; Q's first retrieve pays the fetch */
    int reps = 3;
    double cu[3];
    for (int r = 0; r < reps; r++) {
        char sid[32];
        snprintf(sid, sizeof sid, "cu%d", r);
        long long pos = 0;
        for (int done = 0; done < catchup; done += spans) {
            size_t len;
            char *b = turn_body(sid, &pos, &len);
            post(&P, "/evict/write", b, len, NULL);
            free(b);
        }
        char q[128];
        snprintf(q, sizeof q, "{\"session_id\":\"%s\",\"query\":\"%s %s\",\"top_k\":8}", sid, word(), word());
        post(&Q, "/evict/retrieve", q, strlen(q), &cu[r]);
    }
    printf("catch-up of %d missed spans (first retrieve on the node that missed them): median %.0f ms (%.0f, %.0f, %.0f), %.0f spans/s\n",
           catchup, pct(cu, reps, 0.5), cu[0], cu[1], cu[2], catchup / (pct(cu, reps, 0.5) / 1e3));

    /* resume on another node: cu1 (written through P) hibernated on P, resumed on R, which
     * has no copy: the snapshot is loaded instead of re-embedding the spans */
    {
        double mh, mr;
        post(&P, "/sessions/cu1/hibernate", "", 0, &mh);
        post(&R, "/sessions/cu1/resume", "", 0, &mr);
        printf("hibernate %d spans on P %.0f ms (snapshot shipped); resume on R (no copy) %.0f ms = %.1fx faster than the catch-up\n",
               catchup, mh, mr, pct(cu, reps, 0.5) / mr);
    }

    /* retrieve on a caught-up node vs the embedded store: sessions of the same size and
     * text distribution (cu0 on Q, a fresh one on E), the same queries alternated */
    {
        long long pos = 0;
        for (int done = 0; done < catchup; done += spans) {
            size_t len;
            char *b = turn_body("cu0", &pos, &len);
            post(&E, "/evict/write", b, len, NULL);
            free(b);
        }
        double *re = calloc((size_t)queries, sizeof(double)), *rq = calloc((size_t)queries, sizeof(double));
        double *rn = calloc((size_t)queries, sizeof(double)), warm;
        const char *w0 = "{\"session_id\":\"cu0\",\"query\":\"warm up\",\"top_k\":8}";
        post(&R, "/evict/retrieve", w0, strlen(w0), &warm);   /* R catches up once */
        for (int i = 0; i < queries; i++) {
            char q[160];
            snprintf(q, sizeof q, "{\"session_id\":\"cu0\",\"query\":\"what about %s %s?\",\"top_k\":8}", word(), word());
            post(&E, "/evict/retrieve", q, strlen(q), &re[i]);
            post(&Q, "/evict/retrieve", q, strlen(q), &rq[i]);
            post(&R, "/evict/retrieve", q, strlen(q), &rn[i]);
        }
        double a50 = pct(re, queries, 0.5), a95 = pct(re, queries, 0.95), b50 = pct(rq, queries, 0.5), b95 = pct(rq, queries, 0.95);
        double c50 = pct(rn, queries, 0.5), c95 = pct(rn, queries, 0.95);
        printf("retrieve on %d spans (E/strict/notify alternated): embedded p50 %.2f ms p95 %.2f ms | postgresql strict p50 %.2f ms"
               " p95 %.2f ms (p95 ratio %.2f) | postgresql notify p50 %.2f ms p95 %.2f ms (p95 ratio %.2f)\n",
               catchup, a50, a95, b50, b95, b95 / a95, c50, c95, c95 / a95);
        free(re);
        free(rq);
        free(rn);
    }
    free(me);
    free(mp);
    node_stop(&E);
    node_stop(&P);
    node_stop(&Q);
    node_stop(&R);
    pgc_stop(&C);
    return 0;
}
