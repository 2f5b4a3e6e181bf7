/* Ingest with a neural model configured vs without (issue 18: ≥ 90 %), and the background
 * backlog's drain rate. In-process, the path /evict/write takes after parsing:
 * lcx_store_append of batches of 256-word spans into one store, durable per batch.
 *
 *   bench_nn_ingest --model M.gguf [--spans 20000] [--batch 256] [--rounds 5] [--threads 1] [--drain-rounds 1] [--drain-n 256]
 *
 * Rounds alternate A (no neural channel) and B (the channel attached, its worker running
 * at nice 19); each round is a fresh store. Reports per-round and median spans/s, the
 * B/A ratio, and for B the time the worker then needs to empty the backlog (vectors/s of
 * wall time once ingest stopped, and the worker's own rate). Model: e.g. the random
 * MiniLM-shaped one from `bench_neural --write-model M.gguf`. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "longctx/lcx.h"
#include "longctx/lcx_neural.h"

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint32_t rnd(void)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (uint32_t)(rng >> 16);
}

/* 256 pseudo-words from a 20k vocabulary, Zipf-ish (like bench/svc/spangen.h) */
static char *span(char *buf, size_t cap)
{
    size_t o = 0;
    for (int w = 0; w < 256 && o + 16 < cap; w++) {
        uint32_t r = rnd() % 20000;
        r = r * r / 20000;
        o += (size_t)snprintf(buf + o, cap - o, "%sw%u", w ? " " : "", r);
    }
    return buf;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int main(int argc, char **argv)
{
    const char *model = NULL;
    int spans = 20000, batch = 256, rounds = 5, threads = 1, drain_rounds = 1, drain_n = 256;
    for (int i = 1; i + 1 < argc; i++) {
        if (!strcmp(argv[i], "--model")) model = argv[++i];
        else if (!strcmp(argv[i], "--spans")) spans = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--batch")) batch = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--rounds")) rounds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--threads")) threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--drain-rounds")) drain_rounds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--drain-n")) drain_n = atoi(argv[++i]);   /* vectors timed after ingest */
    }
    if (!model || spans < batch || batch < 1 || rounds < 1 || rounds > 32) {
        fprintf(stderr, "usage: bench_nn_ingest --model M.gguf [--spans N] [--batch B] [--rounds R] [--threads T]\n");
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (system("uptime")) {}
    lcx_nn_opts no;
    lcx_nn_opts_init(&no);
    no.n_threads = threads;
    lcx_nn_model *m;
    char err[512];
    if (lcx_nn_load(model, &no, &m, err, sizeof err) < 0) { fprintf(stderr, "%s\n", err); return 1; }
    lcx_embedder *ne, *hash;
    if (lcx_nn_embedder_new(m, &ne) < 0 || lcx_embedder_hash_new(0, &hash) < 0) return 1;
    printf("model %s (%s), %d spans of 256 words, batches of %d, %d alternated rounds\n", model,
           lcx_embedder_fingerprint(ne), spans, batch, rounds);

    /* the spans, generated once (the same text in every round) */
    const size_t SP = 2400;
    char *text = malloc((size_t)spans * SP);
    lcx_chunk *cs = malloc((size_t)spans * sizeof *cs);
    for (int i = 0; i < spans; i++) {
        span(text + (size_t)i * SP, SP);
        cs[i] = lcx_chunk_init();
        cs[i].text = text + (size_t)i * SP;
        cs[i].text_len = (uint32_t)strlen(cs[i].text);
        cs[i].tok_start = (int64_t)i * 256;
        cs[i].tok_end = cs[i].tok_start + 255;
    }
    double a[32], b[32], drain[32], wrate[32];
    int na = 0, nb = 0;
    for (int r = 0; r < 2 * rounds; r++) {
        const bool nn = r % 2 == 1;
        char dir[] = "/tmp/bench_nn_ingest.XXXXXX";
        if (!mkdtemp(dir)) return 1;
        lcx_nnq *q = NULL;
        if (nn) {
            lcx_nnq_opts qo = {0};
            if (lcx_nnq_new(ne, &qo, &q) < 0) return 1;
        }
        lcx_store_opts so = {0};
        so.nn = q;
        lcx_store *s;
        if (lcx_store_open(dir, hash, &so, &s) < 0) { fprintf(stderr, "open failed\n"); return 1; }
        double t0 = now_ms();
        for (int i = 0; i < spans; i += batch) {
            int n = spans - i < batch ? spans - i : batch;
            if (lcx_store_append(s, cs + i, n, NULL) < 0) { fprintf(stderr, "append failed\n"); return 1; }
        }
        lcx_store_count(s);   /* publishes a deferred last batch, as the next request would */
        double ms = now_ms() - t0, rate = spans / (ms / 1000.0);
        if (!nn) {
            a[na++] = rate;
            printf("round %2d  A (no neural)   %9.0f spans/s\n", r / 2 + 1, rate);
        } else {
            b[nb] = rate;
            uint32_t at_end = lcx_store_nn_ready(s);
            if (nb >= drain_rounds) {   /* the drain takes minutes with a MiniLM-sized model: measured in the first rounds */
                printf("round %2d  B (neural)      %9.0f spans/s   (%u vectors ready at the end of ingest)\n", r / 2 + 1,
                       rate, at_end);
                nb++;
                goto next;
            }
            double t1 = now_ms();
            const uint32_t goal = at_end + (uint32_t)drain_n < (uint32_t)spans ? at_end + (uint32_t)drain_n : (uint32_t)spans;
            while (lcx_store_nn_ready(s) < goal) {
                struct timespec ts = {0, 20 * 1000000L};
                nanosleep(&ts, NULL);
            }
            double dms = now_ms() - t1;
            lcx_nnq_stats st;
            lcx_nnq_get_stats(q, &st);
            drain[nb] = (goal - at_end) / (dms / 1000.0);
            wrate[nb] = st.rate_per_s;
            printf("round %2d  B (neural)      %9.0f spans/s   (%u vectors ready at the end of ingest; the next %u "
                   "in %.1f s = %.1f vectors/s; worker rate %.1f/s)\n",
                   r / 2 + 1, rate, at_end, goal - at_end, dms / 1000.0, drain[nb], wrate[nb]);
            nb++;
        }
    next:
        lcx_store_close(s);
        lcx_nnq_free(q);
        char cmd[128];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
        if (system(cmd)) {}
    }
    double ma = median(a, na), mb = median(b, nb);
    printf("median ingest: A %.0f spans/s, B %.0f spans/s, B/A = %.3f (goal >= 0.90)\n", ma, mb, mb / ma);
    int nd = nb < drain_rounds ? nb : drain_rounds;
    if (nd > 0)
        printf("median drain after ingest: %.1f vectors/s (worker rate %.1f/s, %d rounds)\n", median(drain, nd),
               median(wrate, nd), nd);
    fflush(stdout);
    if (system("uptime")) {}
    lcx_embedder_free(ne);
    lcx_embedder_free(hash);
    free(cs);
    free(text);
    return 0;
}
