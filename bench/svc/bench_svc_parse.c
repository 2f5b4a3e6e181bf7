/* In-process A/B of the /evict/write body parse (the server's per-span HTTP/JSON cost
 * without the store): the general path (whole-body UTF-8 check, NUL scan, cJSON tree,
 * per-chunk field lookups, strlen + UTF-8 check of each text, cJSON_Delete) against the
 * fast path lcx_svc_write_parse_fast, on the bench_svc body (256 spans of 256 words).
 * CPU time of this thread, median of 15 rounds.
 *
 *   bench_svc_parse [--batch 256] [--rounds 15]
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "svc/svc.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return rng;
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
    if (!lcx_utf8_valid(b, n) || memchr(b, 0, n)) return -1;
    const char *end = NULL;
    cJSON *j = cJSON_ParseWithLengthOpts(b, n, &end, 0);
    if (!j) return -1;
    const cJSON *c, *chunks = cJSON_GetObjectItemCaseSensitive(j, "chunks");
    lcx_chunk *cs = calloc((size_t)cJSON_GetArraySize(chunks) + 1, sizeof *cs);
    int m = 0;
    cJSON_ArrayForEach(c, chunks) {
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(c, "text");
        size_t tl = strlen(t->valuestring);
        if (!lcx_utf8_valid(t->valuestring, tl)) return -1;
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
    int batch = 256, rounds = 15;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--batch")) batch = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--rounds")) rounds = atoi(argv[i + 1]);
    }
    static const char *syl[] = {"ka", "lo", "mi", "ne", "ru", "ta", "sho", "vel", "dra", "pin", "qua", "zor", "ex", "ul", "bri", "gon"};
    size_t cap = (size_t)batch * 3000 + 256, o = 0;
    char *body = malloc(cap);
    o += (size_t)sprintf(body, "{\"session_id\":\"bench\",\"chunks\":[");
    for (int k = 0; k < batch; k++) {
        o += (size_t)sprintf(body + o, "%s{\"text\":\"", k ? "," : "");
        for (int w = 0; w < 256; w++) {
            if (w) body[o++] = ' ';
            if (rnd() % 40 == 0) { o += (size_t)sprintf(body + o, "%u", (unsigned)(rnd() % 1000000)); continue; }
            int ns = 2 + (int)(rnd() % 3);
            for (int s = 0; s < ns; s++) o += (size_t)sprintf(body + o, "%s", syl[rnd() % 16]);
        }
        o += (size_t)sprintf(body + o, "\",\"token_range\":[%d,%d],\"layer\":0,\"score\":0.5}", k * 256, k * 256 + 255);
    }
    o += (size_t)sprintf(body + o, "]}");
    double *ta = malloc(sizeof(double) * (size_t)rounds), *tb = malloc(sizeof(double) * (size_t)rounds), sink = 0;
    for (int r = 0; r < rounds; r++) {
        double t0 = cpu_us();
        int m = parse_cjson(body, o, &sink);
        double t1 = cpu_us();
        lcx_svc_wbatch w;
        int rc = lcx_svc_write_parse_fast(body, o, NULL, 100000, 1u << 20, &w);
        double t2 = cpu_us();
        if (m != batch || rc != 0 || w.m != batch) { fprintf(stderr, "parse failed (%d, %d)\n", m, rc); return 1; }
        sink += w.cs[batch - 1].tok_end;
        lcx_svc_wbatch_free(&w);
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
    free(body);
    free(ta);
    free(tb);
    return 0;
}
