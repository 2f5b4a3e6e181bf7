/* Rescue cost per turn: for every v3+longctx cell of a ramp run, the Tier-3 cost of the
 * answering turn = flush + /evict/retrieve round trip (measured) + the extra prefill of the
 * inserted rescue tokens (their share of the turn's prefill time), printed as p50/p95 per
 * (size, rescue mode), with the v3-only and baseline medians beside them.
 *
 *   bench_rescue [--shape tiny|qwen2.5-0.5b | --model M.gguf] [--sizes 2048,4096] [--seeds N]
 *                [--rescue two-turn|single-turn|both] [-t THREADS] [--svc PATH]
 *
 * A private longctx-svc is started (sidecar, temp data dir). Models made with --shape go to
 * /tmp/longctx-bench and are reused. */
#include "eval/lcx_eval.h"
#include "longctx/lcx_sidecar.h"
#include "util/util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}
/* nearest-rank percentile */
static double pct(double *v, int n, double p)
{
    if (n <= 0) return NAN;
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    int k = (int)ceil(p / 100.0 * n) - 1;
    return v[k < 0 ? 0 : k >= n ? n - 1 : k];
}

int main(int argc, char **argv)
{
    const char *shape = "tiny", *model = NULL, *svc = getenv("LONGCTX_SVC"), *modes = "both";
    int sizes[8] = {2048, 4096}, nsz = 2, seeds = 5, threads = 1;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--shape")) shape = argv[i + 1];
        else if (!strcmp(argv[i], "--model")) model = argv[i + 1];
        else if (!strcmp(argv[i], "--seeds")) seeds = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--rescue")) modes = argv[i + 1];
        else if (!strcmp(argv[i], "-t")) threads = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--svc")) svc = argv[i + 1];
        else if (!strcmp(argv[i], "--sizes")) {
            nsz = 0;
            for (const char *s = argv[i + 1]; *s && nsz < 8;) {
                sizes[nsz++] = atoi(s);
                const char *c = strchr(s, ',');
                if (!c) break;
                s = c + 1;
            }
        } else { fprintf(stderr, "unknown option %s\n", argv[i]); return 2; }
    }
    char path[512];
    if (!model) {
        lcx_ramp_shape sh;
        if (lcx__ramp_model_shape(shape, &sh) < 0) { fprintf(stderr, "unknown shape %s\n", shape); return 2; }
        mkdir("/tmp/longctx-bench", 0700);
        snprintf(path, sizeof path, "/tmp/longctx-bench/ramp-%s.gguf", shape);
        struct stat stt;
        if (stat(path, &stt) != 0 && lcx__ramp_write_model(path, &sh, 1) < 0) { fprintf(stderr, "cannot write %s\n", path); return 1; }
        model = path;
    }
    char tmpd[] = "/tmp/longctx-bench-svc-XXXXXX";
    if (!mkdtemp(tmpd)) return 1;
    lcx_sidecar_opts so = lcx_sidecar_defaults();
    so.binary = svc;
    so.data_dir = tmpd;
    lcx_sidecar *sc = NULL;
    char err[512];
    if (lcx_sidecar_spawn(&so, &sc, err, sizeof err) < 0) { fprintf(stderr, "sidecar: %s (set --svc)\n", err); return 1; }
    double la = -1;
    FILE *lf = fopen("/proc/loadavg", "r");
    if (lf) { if (fscanf(lf, "%lf", &la) != 1) la = -1; fclose(lf); }
    printf("# bench_rescue: model %s, %d seeds x 3 depths per size, %d thread(s), loadavg %.2f\n", model, seeds, threads, la);
    printf("%-7s %-11s %5s %10s %10s %12s %12s %10s %10s %9s %9s %9s\n", "size", "rescue", "cells", "rt_p50_ms",
           "rt_p95_ms", "xpref_p50_ms", "xpref_p95_ms", "sum_p50", "sum_p95", "v3_t_med", "lc_t_med", "recall");
    for (int mi = 0; mi < 2; mi++) {
        const int mode = mi == 0 ? LCX_RAMP_TWO_TURN : LCX_RAMP_SINGLE_TURN;
        if (strcmp(modes, "both") && strcmp(modes, lcx__ramp_rescue_name(mode))) continue;
        for (int si = 0; si < nsz; si++) {
            lcx_ramp_opts o;
            lcx__ramp_defaults(&o);
            o.model_path = model;
            o.sizes[0] = sizes[si];
            o.n_sizes = 1;
            o.arms[LCX_RAMP_BASELINE] = false;
            o.n_seeds = seeds;
            o.rescue = mode;
            o.endpoint = lcx_sidecar_url(sc);
            o.n_threads = threads;
            lcx_ramp_cell *c = NULL;
            int n = 0;
            if (lcx__ramp_run(&o, &c, &n, err, sizeof err) < 0) { fprintf(stderr, "ramp: %s\n", err); continue; }
            double rt[4096], xp[4096], sum[4096], tv3[4096], tlc[4096];
            int k = 0, nv3 = 0, rec = 0;
            for (int i = 0; i < n && k < 4096; i++) {
                if (c[i].arm == LCX_RAMP_V3) { tv3[nv3++] = c[i].total_s; continue; }
                rt[k] = c[i].rescue_ms;
                xp[k] = c[i].extra_prefill_ms;
                sum[k] = rt[k] + xp[k];
                tlc[k] = c[i].total_s;
                rec += c[i].cache_recall;
                k++;
            }
            printf("%-7d %-11s %5d %10.2f %10.2f %12.1f %12.1f %10.1f %10.1f %9.3f %9.3f %6d/%d\n", sizes[si],
                   lcx__ramp_rescue_name(mode), k, pct(rt, k, 50), pct(rt, k, 95), pct(xp, k, 50), pct(xp, k, 95),
                   pct(sum, k, 50), pct(sum, k, 95), pct(tv3, nv3, 50), pct(tlc, k, 50), rec, k);
            fflush(stdout);
            free(c);
        }
    }
    lcx_sidecar_stop(sc, 5000);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpd);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmpd);
    return 0;
}
