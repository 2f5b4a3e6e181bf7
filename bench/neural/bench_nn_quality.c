/* Retrieval quality with the weight-free default vs with a neural model, side by side:
 *
 *   bench_nn_quality --model M [--haystack DIR] [--trials 40] [--mrcr 24] [--bin 16k]
 *
 * 1. Rescue needle test: a store of haystack spans (256-word windows of the essays) with
 *    one fact sentence ("the vault code is 481729") at a random span; the rescue query
 *    asks for it in other words. Recall@8 of the fact's span: the store's own ranking
 *    (lexical + hashed) vs the same store with the neural channel (M, drained) fused in.
 * 2. MRCR plain-RAG recall@8: lcx_recipe_plain over generated MRCR records (2 needles),
 *    with the hash embedder vs M as the recipe's embedder.
 *
 * With the tiny fixture model (../shared/fixtures/bert, 2 layers, 64 wide, random-ish
 * weights) the neural numbers say nothing about neural retrieval: they only show the
 * plumbing runs end to end (a real MiniLM is what would move them). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>

#include "longctx/lcx.h"
#include "longctx/lcx_neural.h"
#include "eval/lcx_eval.h"

static uint64_t rng = 0x2545F4914F6CDD1Dull;
static uint32_t rnd(void)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (uint32_t)(rng >> 16);
}

static char *slurp_dir(const char *dir, size_t *len)
{
    DIR *d = opendir(dir);
    if (!d) return NULL;
    char *all = NULL;
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (l < 5 || strcmp(e->d_name + l - 4, ".txt")) continue;
        char p[8192];
        snprintf(p, sizeof p, "%.4000s/%.255s", dir, e->d_name);
        FILE *f = fopen(p, "rb");
        if (!f) continue;
        fseek(f, 0, SEEK_END);
        long sz = ftell(f);
        fseek(f, 0, SEEK_SET);
        all = realloc(all, n + (size_t)sz + 2);
        n += fread(all + n, 1, (size_t)sz, f);
        all[n++] = ' ';
        fclose(f);
    }
    closedir(d);
    if (all) all[n] = 0;
    *len = n;
    return all;
}

static const struct { const char *fact, *query; } NEEDLES[] = {
    {"The vault code is 481729.", "What number opens the safe?"},
    {"Marta keeps her spare key under the blue flowerpot.", "Where is the extra house key hidden?"},
    {"The launch was moved to the ninth of October.", "When is the rocket going up now?"},
    {"Our wifi password is lemon-otter-42.", "What do I type to get on the wireless network?"},
    {"The treasurer resigned after the audit in March.", "Who quit following the financial review?"},
};
#define NNEEDLE ((int)(sizeof NEEDLES / sizeof *NEEDLES))

static int rescue_trial(const char *hay, size_t hlen, lcx_embedder *hash, lcx_nnq *q, int t, int *hit_plain,
                        int *hit_nn)
{
    char dir[] = "/tmp/bench_nn_quality.XXXXXX";
    if (!mkdtemp(dir)) return -1;
    const int NS = 200;   /* spans of ~256 words (≈ 51k words of context) */
    const int at = (int)(rnd() % NS);
    const int nd = t % NNEEDLE;
    lcx_chunk *cs = calloc(NS, sizeof *cs);
    char **texts = calloc(NS, sizeof *texts);
    size_t off = rnd() % (hlen / 2);
    for (int i = 0; i < NS; i++) {
        size_t start = off, words = 0;
        while (off < hlen && words < 256) {
            if (hay[off] == ' ') words++;
            off++;
        }
        if (off >= hlen) off = 0;
        size_t l = off > start ? off - start : 0;
        texts[i] = malloc(l + 256);
        memcpy(texts[i], hay + start, l);
        if (i == at) {   /* the fact in the middle of the span */
            size_t mid = l / 2;
            int fl = snprintf(texts[i] + mid, 256, " %s ", NEEDLES[nd].fact);
            memcpy(texts[i] + mid + (size_t)fl, hay + start + mid, l - mid);
            l += (size_t)fl;
        }
        cs[i] = lcx_chunk_init();
        cs[i].text = texts[i];
        cs[i].text_len = (uint32_t)l;
        cs[i].tok_start = i * 256;
        cs[i].tok_end = i * 256 + 255;
    }
    lcx_store_opts so = {0};
    so.nn = q;
    lcx_store *s;
    int rc = lcx_store_open(dir, hash, NULL, &s);
    if (!rc) rc = lcx_store_append(s, cs, NS, NULL);
    lcx_search_opts o = lcx_search_defaults();
    lcx_hit h[8];
    int k = rc ? 0 : lcx_store_search(s, NEEDLES[nd].query, strlen(NEEDLES[nd].query), &o, h, 8);
    for (int i = 0; i < k; i++) *hit_plain += h[i].id == (uint32_t)at;
    lcx_store_close(s);
    /* the same store reopened with the neural channel, every row computed */
    if (!rc) rc = lcx_store_open(dir, hash, &so, &s);
    if (!rc) rc = lcx_nnq_drain(q, s);
    k = rc ? 0 : lcx_store_search(s, NEEDLES[nd].query, strlen(NEEDLES[nd].query), &o, h, 8);
    for (int i = 0; i < k; i++) *hit_nn += h[i].id == (uint32_t)at;
    lcx_store_close(s);
    for (int i = 0; i < NS; i++) free(texts[i]);
    free(texts);
    free(cs);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd)) {}
    return rc;
}

int main(int argc, char **argv)
{
    const char *model = NULL, *hay = getenv("LCX_FIXTURES") ? NULL : "../shared/fixtures/haystack/paul_graham";
    char hbuf[4096];
    if (!hay) snprintf(hbuf, sizeof hbuf, "%s/haystack/paul_graham", getenv("LCX_FIXTURES")), hay = hbuf;
    int trials = 40, n_mrcr = 24;
    const char *bin_s = "16k";
    for (int i = 1; i + 1 < argc; i++) {
        if (!strcmp(argv[i], "--model")) model = argv[++i];
        else if (!strcmp(argv[i], "--haystack")) hay = argv[++i];
        else if (!strcmp(argv[i], "--trials")) trials = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--mrcr")) n_mrcr = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--bin")) bin_s = argv[++i];
    }
    if (!model) { fprintf(stderr, "usage: bench_nn_quality --model M [--haystack DIR] [--trials N] [--mrcr N] [--bin 16k]\n"); return 2; }
    setvbuf(stdout, NULL, _IOLBF, 0);
    lcx_nn_opts no;
    lcx_nn_opts_init(&no);
    lcx_nn_model *m;
    char err[512];
    if (lcx_nn_load(model, &no, &m, err, sizeof err) < 0) { fprintf(stderr, "%s\n", err); return 1; }
    lcx_embedder *ne, *hash;
    if (lcx_nn_embedder_new(m, &ne) < 0 || lcx_embedder_hash_new(0, &hash) < 0) return 1;
    lcx_nnq_opts qo = {0};
    qo.no_worker = true;
    qo.batch = 32;
    lcx_nnq *q;
    if (lcx_nnq_new(ne, &qo, &q) < 0) return 1;
    size_t hlen = 0;
    char *h = slurp_dir(hay, &hlen);
    if (!h || hlen < 100000) { fprintf(stderr, "haystack %s not found (--haystack)\n", hay); return 1; }
    printf("model %s (%s); haystack %s (%.1f MB)\n", model, lcx_embedder_fingerprint(ne), hay, hlen / 1e6);

    int hp = 0, hn = 0, done = 0;
    for (int t = 0; t < trials; t++)
        if (rescue_trial(h, hlen, hash, q, t, &hp, &hn) == 0) done++;
    printf("rescue needle (paraphrased query, 200 spans, recall@8, n=%d): weight-free %.3f, + neural channel %.3f\n", done,
           done ? (double)hp / done : 0, done ? (double)hn / done : 0);

    lcx_mrcr_gen *g;
    int bin = lcx__mrcr_bin_parse(bin_s);
    if (bin < 0 || lcx__mrcr_gen_open(hay, &g) < 0) { fprintf(stderr, "mrcr generator: bad bin or haystack\n"); return 1; }
    int rh = 0, rn = 0, nr = 0;
    for (int i = 0; i < n_mrcr; i++) {
        lcx_mrcr_rec rec;
        if (lcx__mrcr_gen_record(g, 7, 2, bin, i, &rec) < 0) continue;
        lcx_mrcr_eval_opts eo = {0};
        eo.recipe = LCX_MRCR_RECIPE_PLAIN;
        eo.top_k = 8;
        lcx_mrcr_outcome oc;
        eo.emb = hash;
        if (lcx__mrcr_eval_one(&rec, &eo, &oc) == 0) rh += oc.target_hit, lcx__mrcr_outcome_free(&oc);
        eo.emb = ne;
        if (lcx__mrcr_eval_one(&rec, &eo, &oc) == 0) rn += oc.target_hit, lcx__mrcr_outcome_free(&oc);
        nr++;
        lcx__mrcr_rec_free(&rec);
    }
    lcx__mrcr_gen_close(g);
    printf("MRCR plain-RAG recall@8 (2 needles, bin %s, n=%d): weight-free %.3f, neural embedder %.3f\n", bin_s, nr,
           nr ? (double)rh / nr : 0, nr ? (double)rn / nr : 0);
    lcx_nnq_free(q);
    lcx_embedder_free(ne);
    lcx_embedder_free(hash);
    free(h);
    return 0;
}
