/* longctx triatt replay FILE.json | simulate [--seeds N] [--tokens N] [--planted N] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "longctx/triatt.h"
#include "util/util.h"

int cmd_triatt(int argc, char **argv);

static void usage(FILE *f)
{
    fprintf(f, "usage: longctx triatt replay FILE.json\n"
               "       longctx triatt simulate [--seeds N] [--tokens N] [--planted N] [--noise X] [--align C] [--json]\n"
               "replay: selection.json-shaped → evicted positions per case (v1/v2/v3);\n"
               "        scoring.json-shaped → collapsed and block-mean scores.\n"
               "simulate: planted-key survival at 90%%/70%% budget for keep_high, evict_high,\n"
               "          random and recency.\n");
}

static int do_replay(const char *path)
{
    char *data = NULL, *out = NULL;
    size_t len = 0;
    int rc = lcx__read_file(path, 64u << 20, &data, &len);
    if (rc < 0) { fprintf(stderr, "longctx triatt: %s: %s\n", path, lcx_strerror(rc)); return 1; }
    rc = triatt_replay_json(data, len, &out);
    free(data);
    if (rc < 0) { fprintf(stderr, "longctx triatt: %s: %s\n", path, lcx_strerror(rc)); return 1; }
    fputs(out, stdout);
    free(out);
    return 0;
}

static int do_simulate(int argc, char **argv)
{
    triatt_sim_params p = {.n_seeds = 200, .seed0 = 1, .n_tokens = 4096, .n_planted = 32, .noise = 1.0, .align = 0.6};
    int json = 0;
    for (int i = 1; i < argc; i++) {
        char *end = NULL;
        if (!strcmp(argv[i], "--json")) { json = 1; continue; }
        if (i + 1 >= argc) { usage(stderr); return 2; }
        if (!strcmp(argv[i], "--seeds")) p.n_seeds = (int)strtol(argv[++i], &end, 10);
        else if (!strcmp(argv[i], "--tokens")) p.n_tokens = (int)strtol(argv[++i], &end, 10);
        else if (!strcmp(argv[i], "--planted")) p.n_planted = (int)strtol(argv[++i], &end, 10);
        else if (!strcmp(argv[i], "--noise")) p.noise = strtod(argv[++i], &end);
        else if (!strcmp(argv[i], "--align")) p.align = strtod(argv[++i], &end);
        else if (!strcmp(argv[i], "--seed")) p.seed0 = strtoull(argv[++i], &end, 10);
        else { usage(stderr); return 2; }
        if (!end || *end) { fprintf(stderr, "longctx triatt: bad value for %s\n", argv[i - 1]); return 2; }
    }
    triatt_sim_result r;
    int rc = triatt_simulate(&p, &r);
    if (rc < 0) { fprintf(stderr, "longctx triatt simulate: %s\n", lcx_strerror(rc)); return 1; }
    static const char *pol[4] = {"keep_high", "evict_high", "random", "recency"};
    static const char *bud[2] = {"90%", "70%"};
    if (json) {
        printf("{\"n_seeds\":%d,\"budgets\":{", r.n_seeds);
        for (int b = 0; b < 2; b++) {
            printf("%s\"%s\":{", b ? "," : "", bud[b]);
            for (int k = 0; k < 4; k++)
                printf("%s\"%s\":{\"survive\":%.4f,\"stderr\":%.4f}", k ? "," : "", pol[k], r.survive[b][k], r.stderr_[b][k]);
            printf("}");
        }
        printf("}}\n");
        return 0;
    }
    printf("planted-key survival over %d seeds (%d tokens, %d planted, noise %.2f, align %.2f; V3, 8 segments)\n",
           r.n_seeds, p.n_tokens, p.n_planted, p.noise, p.align);
    printf("%-8s %-12s %-12s %-12s %-12s\n", "budget", pol[0], pol[1], pol[2], pol[3]);
    for (int b = 0; b < 2; b++) {
        printf("%-8s", bud[b]);
        for (int k = 0; k < 4; k++) printf(" %.3f±%.3f ", r.survive[b][k], r.stderr_[b][k]);
        printf("\n");
    }
    for (int b = 0; b < 2; b++)
        printf("margin at %s: keep_high−random %+.3f, keep_high−evict_high %+.3f, keep_high−recency %+.3f\n",
               bud[b], r.survive[b][0] - r.survive[b][2], r.survive[b][0] - r.survive[b][1],
               r.survive[b][0] - r.survive[b][3]);
    return 0;
}

int cmd_triatt(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (!strcmp(argv[1], "replay")) {
        if (argc != 3) { usage(stderr); return 2; }
        return do_replay(argv[2]);
    }
    if (!strcmp(argv[1], "simulate")) return do_simulate(argc - 1, argv + 1);
    usage(stderr);
    return 2;
}
