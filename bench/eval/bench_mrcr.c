/* MRCR benchmark: generates records in memory (never written to git), runs recipes, prints
 * per-bin mean score, 95% CI, target recall@K and latency percentiles, plus the cost of one
 * record's stages (JSON parse, recipe, grade) for the largest bin.
 *   bench_mrcr [--needles 8] [--bins 8k,...,1m] [--n 100] [--seed 1] [--recipes selector,plain,multiq]
 *              [--haystack DIR] */
#include "eval/lcx_eval.h"
#include "longctx/lcx.h"
#include "longctx/lcx_recipes.h"
#include "util/util.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    int needles = 8, varied = 0;
    long n = 100;
    uint64_t seed = 1;
    const char *bins = "8k,16k,32k,64k,128k,256k,512k,1m", *recipes = "selector,plain,multiq";
    char hay[4096];
    const char *fx = getenv("LCX_FIXTURES");
    snprintf(hay, sizeof hay, "%s/haystack/paul_graham", fx ? fx : "../shared/fixtures");
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--needles")) needles = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--bins")) bins = argv[i + 1];
        else if (!strcmp(argv[i], "--n")) n = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--seed")) seed = strtoull(argv[i + 1], NULL, 0);
        else if (!strcmp(argv[i], "--recipes")) recipes = argv[i + 1];
        else if (!strcmp(argv[i], "--haystack")) snprintf(hay, sizeof hay, "%s", argv[i + 1]);
        else if (!strcmp(argv[i], "--varied")) varied = atoi(argv[i + 1]);
    }
    lcx_mrcr_gen *g;
    lcx_embedder *emb;
    if (lcx__mrcr_gen_open(hay, &g) || lcx_embedder_hash_new(0, &emb)) {
        fprintf(stderr, "bench_mrcr: cannot open haystack %s\n", hay);
        return 1;
    }
    lcx__mrcr_gen_set_varied(g, varied);
    int rl[3], nr = 0;
    if (strstr(recipes, "selector")) rl[nr++] = LCX_MRCR_RECIPE_SELECTOR;
    if (strstr(recipes, "plain")) rl[nr++] = LCX_MRCR_RECIPE_PLAIN;
    if (strstr(recipes, "multiq")) rl[nr++] = LCX_MRCR_RECIPE_MULTIQ;
    static const char *rn[] = {"selector", "plain", "multiq"};
    printf("needles=%d n=%ld seed=%llu questions=%s\n", needles, n, (unsigned long long)seed, varied ? "varied" : "exact");
    printf("%-9s %-6s %5s %8s %8s %9s %9s %9s %6s %9s %9s\n", "recipe", "bin", "n", "mean", "ci95",
           "recall@8", "p50_ms", "p95_ms", "failc", "parse_p50", "chars_avg");
    char tmp[256];
    snprintf(tmp, sizeof tmp, "%s", bins);
    double *sc = malloc((size_t)n * sizeof *sc), *ms = malloc((size_t)n * sizeof *ms);
    double *pm = malloc((size_t)n * sizeof *pm);
    for (char *s = NULL, *t = strtok_r(tmp, ",", &s); t; t = strtok_r(NULL, ",", &s)) {
        int bin = lcx__mrcr_bin_parse(t);
        if (bin < 0) continue;
        /* records are generated once per bin and shared by the recipes */
        lcx_mrcr_rec *recs = calloc((size_t)n, sizeof *recs);
        double chars = 0;
        for (long i = 0; i < n; i++) {
            if (lcx__mrcr_gen_record(g, seed, needles, bin, i, &recs[i])) { fprintf(stderr, "gen failed\n"); return 1; }
            chars += (double)recs[i].n_chars;
            /* JSONL round trip cost: what `longctx eval mrcr` pays per record */
            char *buf = NULL;
            size_t bl = 0;
            FILE *f = open_memstream(&buf, &bl);
            lcx__mrcr_write_line(f, &recs[i]);
            fclose(f);
            double t0 = lcx__now_ms();
            lcx_mrcr_rec p;
            char err[128];
            lcx__mrcr_parse_line(buf, bl - 1, &p, err, sizeof err);
            pm[i] = lcx__now_ms() - t0;
            lcx__mrcr_rec_free(&p);
            free(buf);
        }
        for (int r = 0; r < nr; r++) {
            lcx_mrcr_eval_opts o = {.recipe = rl[r], .top_k = 8, .emb = emb};
            double hits = 0;
            long failc = 0;
            for (long i = 0; i < n; i++) {
                lcx_mrcr_outcome oc;
                if (lcx__mrcr_eval_one(&recs[i], &o, &oc)) { fprintf(stderr, "eval failed\n"); return 1; }
                sc[i] = oc.score;
                ms[i] = oc.ms;
                hits += oc.target_hit;
                failc += oc.fail_closed;
                lcx__mrcr_outcome_free(&oc);
            }
            double mean, ci;
            lcx__eval_mean_ci(sc, (size_t)n, &mean, &ci);
            printf("%-9s %-6s %5ld %8.4f %8.4f %9.4f %9.2f %9.2f %6ld %9.2f %9.0f\n", rn[rl[r]], t, n, mean, ci,
                   hits / (double)n, lcx__eval_percentile(ms, (size_t)n, 0.5),
                   lcx__eval_percentile(ms, (size_t)n, 0.95), failc, lcx__eval_percentile(pm, (size_t)n, 0.5),
                   chars / (double)n);
            fflush(stdout);
        }
        for (long i = 0; i < n; i++) lcx__mrcr_rec_free(&recs[i]);
        free(recs);
    }
    free(sc); free(ms); free(pm);
    lcx_embedder_free(emb);
    lcx__mrcr_gen_close(g);
    return 0;
}
