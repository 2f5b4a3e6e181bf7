/* In-process A/B of the /evict/write body parse (the server's per-span HTTP/JSON cost
 * without the store): the general path (whole-body UTF-8 check, NUL scan, cJSON tree,
 * per-chunk field lookups, strlen + UTF-8 check of each text, cJSON_Delete) against the
 * fast path lcx__svc_write_parse_fast, on the bench_svc body (256 spans of 256 words).
 * CPU time of this thread, median of 15 rounds.
 *
 * Then the core alone on that workload (fast parse + lcx_store_append, --store spans).
 *
 *   bench_svc_parse [--batch 256] [--rounds 15] [--store 20000]
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "svc/svc.h"

#include "spangen.h"

static size_t make_body(char *body, int s, int batch)
{
    char t[4096];
    size_t o = (size_t)sprintf(body, "{\"session_id\":\"bench\",\"chunks\":[");
    for (int k = 0; k < batch; k++, s++) {
        span_text(t, 256);
        o += (size_t)sprintf(body + o, "%s{\"text\":\"%s\",\"token_range\":[%lld,%lld],\"layer\":0,\"score\":0.5}", k ? "," : "", t,
                             (long long)s * 256, (long long)s * 256 + 255);
    }
    o += (size_t)sprintf(body + o, "]}");
    return o;
}

static double cpu_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* the general path's work, as in write_parse_cjson (errors impossible here) */
static int parse_cjson(const char *b, size_t n, double *sink)
{
    if (!lcx__utf8_valid(b, n) || memchr(b, 0, n)) return -1;
    const char *end = NULL;
    cJSON *j = cJSON_ParseWithLengthOpts(b, n, &end, 0);
    if (!j) return -1;
    const cJSON *c, *chunks = cJSON_GetObjectItemCaseSensitive(j, "chunks");
    lcx_chunk *cs = calloc((size_t)cJSON_GetArraySize(chunks) + 1, sizeof *cs);
    int m = 0;
    cJSON_ArrayForEach(c, chunks) {
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(c, "text");
        size_t tl = strlen(t->valuestring);
        if (!lcx__utf8_valid(t->valuestring, tl)) return -1;
        const cJSON *l = cJSON_GetObjectItemCaseSensitive(c, "layer"), *s = cJSON_GetObjectItemCaseSensitive(c, "score");
        const cJSON *r = cJSON_GetObjectItemCaseSensitive(c, "round"), *tr = cJSON_GetObjectItemCaseSensitive(c, "token_range");
        const cJSON *tk = cJSON_GetObjectItemCaseSensitive(c, "tokens");
        cs[m].text = t->valuestring;
        cs[m].text_len = (uint32_t)tl;
        cs[m].layer = l ? (int)l->valuedouble : 0;
        cs[m].round = r ? (int)r->valuedouble : -1;
        cs[m].score = s ? (float)s->valuedouble : 0;
        cs[m].tok_start = (int64_t)cJSON_GetArrayItem(tr, 0)->valuedouble;
        cs[m].tok_end = (int64_t)cJSON_GetArrayItem(tr, 1)->valuedouble;
        *sink += floor(cs[m].tok_end) + (tk != NULL);
        m++;
    }
    free(cs);
    cJSON_Delete(j);
    return m;
}

int main(int argc, char **argv)
{
    int batch = 256, rounds = 15, n_store = 20000;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--batch")) batch = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--rounds")) rounds = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--store")) n_store = atoi(argv[i + 1]);
    }
    make_vocab();
    char *body = malloc((size_t)batch * 2600 + 256);
    size_t o = make_body(body, 0, batch);
    double *ta = malloc(sizeof(double) * (size_t)rounds), *tb = malloc(sizeof(double) * (size_t)rounds), sink = 0;
    for (int r = 0; r < rounds; r++) {
        double t0 = cpu_us();
        int m = parse_cjson(body, o, &sink);
        double t1 = cpu_us();
        lcx_svc_wbatch w;
        int rc = lcx__svc_write_parse_fast(body, o, NULL, 100000, 1u << 20, &w);
        double t2 = cpu_us();
        if (m != batch || rc != 0 || w.m != batch) { fprintf(stderr, "parse failed (%d, %d)\n", m, rc); return 1; }
        sink += w.cs[batch - 1].tok_end;
        lcx__svc_wbatch_free(&w);
        ta[r] = t1 - t0;
        tb[r] = t2 - t1;
    }
    qsort(ta, (size_t)rounds, sizeof *ta, cmp_d);
    qsort(tb, (size_t)rounds, sizeof *tb, cmp_d);
    double a = ta[rounds / 2], b = tb[rounds / 2];
    printf("/evict/write body parse, %d spans (%.0f KB), median of %d, thread CPU:\n", batch, o / 1024.0, rounds);
    printf("  general path (cJSON)   %8.1f us  = %6.3f us/span\n", a, a / batch);
    printf("  fast path              %8.1f us  = %6.3f us/span   (%.1fx less)\n", b, b / batch, a / b);
    if (sink < 0) printf("%f\n", sink);
    /* The core alone on the same workload: fast parse + lcx_store_append of n_store spans
     * in batches of `batch` (process CPU, embedding helper threads included). The server's
     * CPU per span minus this is the HTTP/JSON layer. */
    if (n_store > 0) {
        char tmpl[] = "/tmp/lcxparse.XXXXXX";
        char *dir = mkdtemp(tmpl);
        lcx_embedder *emb = NULL;
        lcx_store *st = NULL;
        if (!dir || lcx_embedder_hash_new(0, &emb) || lcx_store_open(dir, emb, NULL, &st)) { fprintf(stderr, "store\n"); return 1; }
        double c_parse = 0, c_app = 0;
        for (int s0 = 0; s0 < n_store; s0 += batch) {
            o = make_body(body, s0, batch);
            struct timespec t;
            clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
            double c0 = t.tv_sec * 1e6 + t.tv_nsec / 1e3;
            lcx_svc_wbatch w;
            if (lcx__svc_write_parse_fast(body, o, NULL, 100000, 1u << 20, &w)) return 1;
            clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
            double c1 = t.tv_sec * 1e6 + t.tv_nsec / 1e3;
            if (lcx_store_append(st, w.cs, w.m, NULL)) { fprintf(stderr, "append failed\n"); return 1; }
            clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
            c_parse += c1 - c0;
            c_app += t.tv_sec * 1e6 + t.tv_nsec / 1e3 - c1;
            lcx__svc_wbatch_free(&w);
        }
        printf("in-process, same workload, %d spans in batches of %d (process CPU):\n", n_store, batch);
        printf("  fast parse %.2f us/span + lcx_store_append %.2f us/span = %.2f us/span\n", c_parse / n_store,
               c_app / n_store, (c_parse + c_app) / n_store);
        lcx_store_close(st);
        lcx_embedder_free(emb);
        char cmd[128];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
        if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    }
    free(body);
    free(ta);
    free(tb);
    return 0;
}
