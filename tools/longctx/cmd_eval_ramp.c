/* longctx eval ramp — the planted-fact rescue ramp (SPEC §6; src/eval/ramp.c).
 *   longctx eval ramp -m MODEL.gguf --sizes 8k,16k,32k,64k [--arms baseline,v3,v3+longctx]
 *        [--depths 0.1,0.5,0.9] [--seeds N] [--rescue single-turn|two-turn[,...]] [--budget-frac 0.9]
 *        [--direction keep_high|evict_high[,...]] [--mode trig|random|recency[,...]]
 *        [--first-seed S] [--cells-out FILE (each cell appended as a one-line JSON on the way)]
 *        [--longctx-endpoint URL] [--json] [--svg FILE] [-t THREADS] [--ubatch N] [--max-gen N]
 *        [--window N --prefix N --warmup N --hybrid 0|1|2] [--svc-bin PATH] [--prepopulate 0|1]
 *        [--jobs N]
 *   longctx eval ramp --replay FILE.json[,FILE.json...] [--json] [--svg FILE]
 *   longctx eval ramp-model OUT.gguf [--shape tiny|qwen2.5-0.5b] [--blocks N] [--seed S]
 * Without --longctx-endpoint (and with the v3+longctx arm) a private longctx-svc is started
 * as a sidecar on a free port with a temporary data directory, and stopped at the end.
 * --jobs N runs N copies of this command (each with --shard i/N: every N-th cell of the plan,
 * its cells as JSON lines on stdout) against one sidecar; the cells are the serial run's,
 * since a cell depends only on its own (size, arm, configuration, depth, seed). */
#define _GNU_SOURCE
#include "cmds.h"
#include "eval/lcx_eval.h"
#include "longctx/lcx_sidecar.h"
#include "util/util.h"

#include <errno.h>
#include <ftw.h>
#include <libgen.h>
#include <poll.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

static void usage(FILE *f)
{
    fprintf(f,
            "usage: longctx eval ramp -m MODEL.gguf --sizes 8k,16k,32k,64k[,128k,256k]\n"
            "         [--arms baseline,v3,v3+longctx] [--depths 0.1,0.5,0.9] [--seeds N]\n"
            "         [--rescue single-turn|two-turn[,...]] [--direction keep_high|evict_high[,...]]\n"
            "         [--mode trig|random|recency[,...]] [--budget-frac F (0.9)] [--longctx-endpoint URL]\n"
            "         [--first-seed S (1)] [--cells-out FILE (append each cell as it ends, one JSON line)]\n"
            "         [--json] [--svg FILE] [-t THREADS] [--ubatch N (512)] [--max-gen N (16)]\n"
            "         [--window 128] [--prefix 32] [--warmup 256] [--hybrid 2] [--svc-bin PATH]\n"
            "         [--prepopulate 0|1 (1: the first over-budget prompt is also posted to longctx)]\n"
            "         [--jobs N (cells N at a time, each in its own process, one sidecar)]\n"
            "       longctx eval ramp --replay FILE.json[,FILE.json...] [--json] [--svg FILE]\n"
            "       longctx eval ramp-model OUT.gguf [--shape tiny|qwen2.5-0.5b] [--blocks N] [--seed S]\n"
            "  Without --longctx-endpoint a private longctx-svc sidecar serves the v3+longctx arm.\n"
            "  A list in --rescue/--direction/--mode runs every V3 cell once per value (the baseline once);\n"
            "  --replay prints the table (or JSON, SVG) of earlier --json outputs, merged.\n");
}

static int parse_size(const char *s, int *out)
{
    char *e;
    errno = 0;
    double v = strtod(s, &e);
    if (e == s || errno) return -1;
    if (*e == 'k' || *e == 'K') { v *= 1024; e++; }
    else if (*e == 'm' || *e == 'M') { v *= 1024 * 1024; e++; }
    if (*e || v < 1 || v > (1 << 24)) return -1;
    *out = (int)v;
    return 0;
}

static int rm_cb(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb; (void)flag; (void)ftw;
    return remove(p);
}

typedef struct { FILE *cells_out; const char *model; } progress;

static void on_cell(void *ud, const lcx_ramp_cell *c, int i, int n)
{
    const progress *pg = ud;
    if (pg && pg->cells_out) {
        /* the --json shape with one cell, so --replay reads these lines like a whole run */
        char *j = lcx__ramp_json(pg->model, c, 1);
        if (j) { fprintf(pg->cells_out, "%s\n", j); fflush(pg->cells_out); free(j); }
    }
    char cfg[64] = "";
    if (c->arm != LCX_RAMP_BASELINE)
        snprintf(cfg, sizeof cfg, " %s %s %s", lcx__ramp_rescue_name(c->rescue), lcx__ramp_direction_name(c->direction),
                 lcx__ramp_mode_name(c->mode));
    fprintf(stderr,
            "[ramp %d/%d] %d tokens %s%s depth %.2f seed %d: %s (cache %s, rescue %s, %d chunks), answer %s, evicted %.1f%%, "
            "%d rounds, %.2f s\n",
            i, n, c->size, lcx__ramp_arm_name(c->arm), cfg, c->depth, c->seed, c->cache_recall ? "fact kept" : "fact LOST",
            c->fact_in_cache ? "yes" : "no", c->fact_in_rescue ? "yes" : "no", c->rescue_chunks,
            lcx__niah_grade_name(c->answer), c->evicted_pct, c->rounds, c->total_s);
}

/* a comma list of names -> indexes via name(i), i < n; at most cap; -1 on an unknown one */
static int parse_names(const char *v, const char *(*name)(int), int n, int *out, int cap, const char *flag)
{
    int k = 0;
    char *d = strdup(v), *sp = NULL;
    if (!d) return -1;
    for (char *t = strtok_r(d, ",", &sp); t; t = strtok_r(NULL, ",", &sp)) {
        int j = 0;
        while (j < n && strcmp(t, name(j))) j++;
        if (j == n || k == cap) {
            fprintf(stderr, "longctx eval ramp: bad %s value '%s' (", flag, t);
            for (int i = 0; i < n; i++) fprintf(stderr, "%s%s", i ? ", " : "", name(i));
            fprintf(stderr, "; at most %d)\n", cap);
            free(d);
            return -1;
        }
        out[k++] = j;
    }
    free(d);
    return k ? k : -1;
}

/* The cells as JSON (--json) or the table, and the chart with --svg; the exit status. */
static int report(const char *model, const lcx_ramp_cell *cells, int n, bool json, const char *svg)
{
    int status = 0;
    if (json) {
        char *j = lcx__ramp_json(model, cells, n);
        if (!j) status = 1;
        else { puts(j); free(j); }
    } else {
        lcx__ramp_print_table(stdout, cells, n);
    }
    if (svg) {
        char *s = lcx__ramp_svg(model, cells, n);
        if (!s || lcx__write_file_atomic(svg, s, strlen(s)) < 0) {
            fprintf(stderr, "longctx eval ramp: cannot write %s\n", svg);
            status = 1;
        }
        free(s);
    }
    return status;
}

static int cmd_replay(const char *files, bool json, const char *svg)
{
    lcx_ramp_cell *cells = NULL;
    int n = 0, status = 0;
    char *model = NULL, *d = strdup(files), *sp = NULL;
    for (char *f = d ? strtok_r(d, ",", &sp) : NULL; f; f = strtok_r(NULL, ",", &sp)) {
        char *txt = NULL;
        size_t len = 0;
        int rc = lcx__read_file(f, 1u << 30, &txt, &len);
        /* one JSON document per line: a --json output is one line, --cells-out one per cell */
        for (char *ln = rc >= 0 ? txt : NULL, *nl; ln && *ln; ln = nl ? nl + 1 : NULL) {
            if ((nl = strchr(ln, '\n'))) *nl = 0;
            if (*ln && (rc = lcx__ramp_json_read(ln, &cells, &n, &model)) < 0) break;
        }
        free(txt);
        if (rc < 0) { fprintf(stderr, "longctx eval ramp --replay: %s: %s\n", f, lcx_strerror(rc)); status = 1; break; }
    }
    free(d);
    if (!status) status = report(model, cells, n, json, svg);
    free(cells);
    free(model);
    return status;
}

static int cmd_ramp_model(int argc, char **argv)
{
    const char *out = NULL, *shape = "tiny";
    unsigned long long seed = 1;
    long blocks = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { usage(stdout); return 0; }
        if (!strcmp(a, "--shape") && v) { shape = v; i++; }
        else if (!strcmp(a, "--seed") && v) { seed = strtoull(v, NULL, 10); i++; }
        else if (!strcmp(a, "--blocks") && v) {
            char *e = NULL;
            blocks = strtol(v, &e, 10);
            if (*e || blocks < 1 || blocks > 256) { fprintf(stderr, "longctx eval ramp-model: --blocks 1..256\n"); return 2; }
            i++;
        }
        else if (a[0] != '-' && !out) out = a;
        else { fprintf(stderr, "longctx eval ramp-model: bad argument %s\n", a); usage(stderr); return 2; }
    }
    lcx_ramp_shape sh;
    if (!out || lcx__ramp_model_shape(shape, &sh) < 0) {
        fprintf(stderr, "longctx eval ramp-model: need OUT.gguf and --shape tiny|qwen2.5-0.5b\n");
        return 2;
    }
    /* fewer blocks, same width / heads / GQA / vocabulary: what a long ramp can afford on a
     * small CPU (prefill time is per block; the eviction and rescue path is the same) */
    char nm[64];
    if (blocks > 0 && blocks != sh.n_layer) {
        snprintf(nm, sizeof nm, "%s-%ldblk", sh.name, blocks);
        sh.name = nm;
        sh.n_layer = (int)blocks;
    }
    int rc = lcx__ramp_write_model(out, &sh, seed);
    if (rc < 0) { fprintf(stderr, "longctx eval ramp-model: %s: %s\n", out, lcx_strerror(rc)); return 1; }
    return 0;
}

/* This program's path (for the sidecar next to it and for --jobs' shards); 0 or -1. */
static int self_exe(char *b, size_t n)
{
    ssize_t k = readlink("/proc/self/exe", b, n - 1);
    if (k <= 0) return -1;
    b[k] = 0;
    return 0;
}

/* Cells in the serial run's order (sizes, arms, configurations, depths, seeds ascending). */
static int cell_cmp(const void *pa, const void *pb)
{
    const lcx_ramp_cell *a = pa, *b = pb;
    const double ka[] = {a->size, a->arm, a->rescue, a->direction, a->mode, a->depth, a->seed},
                 kb[] = {b->size, b->arm, b->rescue, b->direction, b->mode, b->depth, b->seed};
    for (size_t i = 0; i < sizeof ka / sizeof *ka; i++)
        if (ka[i] != kb[i]) return ka[i] < kb[i] ? -1 : 1;
    return 0;
}

/* One JSON line from a shard: onto --cells-out (the one writer) and into the cells. */
static int take_line(char *ln, const progress *pg, lcx_ramp_cell **cells, int *n)
{
    if (!*ln) return 0;
    char *model = NULL;
    int rc = lcx__ramp_json_read(ln, cells, n, &model);
    free(model);
    if (rc < 0) return rc;
    if (pg->cells_out) { fprintf(pg->cells_out, "%s\n", ln); fflush(pg->cells_out); }
    return 0;
}

/* --jobs: `exe eval ramp ARGS --shard i/N --cells-out /dev/stdout --longctx-endpoint URL` N
 * times (without this run's --jobs, --cells-out, --json, --svg), their stdout read as it
 * comes. 0, or 1 when a shard failed or sent a line that is not a cell (the cells that came
 * are kept). */
static int run_jobs(int argc, char **argv, int jobs, const char *endpoint, const progress *pg, lcx_ramp_cell **cells,
                    int *n)
{
    char exe[4096];
    if (self_exe(exe, sizeof exe) < 0) { fprintf(stderr, "longctx eval ramp --jobs: cannot find this program: %s\n", strerror(errno)); return 1; }
    char **av = calloc((size_t)argc + 12, sizeof *av), shard[32];
    pid_t *pid = calloc((size_t)jobs, sizeof *pid);
    struct pollfd *pf = calloc((size_t)jobs, sizeof *pf);
    lcx_buf *in = calloc((size_t)jobs, sizeof *in);
    if (!av || !pid || !pf || !in) { free(av); free(pid); free(pf); free(in); return 1; }
    int k = 0, status = 0, open_fds = 0;
    for (int j = 0; j < jobs; j++) pf[j].fd = -1;   /* poll skips them; nothing to close */
    av[k++] = exe;
    av[k++] = "eval";
    av[k++] = "ramp";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--json")) continue;
        if (!strcmp(a, "--jobs") || !strcmp(a, "--cells-out") || !strcmp(a, "--svg")) { i++; continue; }
        av[k++] = argv[i];
    }
    av[k++] = "--shard";
    av[k++] = shard;
    av[k++] = "--cells-out";
    av[k++] = "/dev/stdout";
    if (endpoint) { av[k++] = "--longctx-endpoint"; av[k++] = (char *)endpoint; }
    for (int j = 0; j < jobs; j++) {
        int fd[2];
        if (pipe(fd) < 0) { status = 1; break; }
        snprintf(shard, sizeof shard, "%d/%d", j, jobs);
        posix_spawn_file_actions_t fa;
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_adddup2(&fa, fd[1], 1);
        posix_spawn_file_actions_addclose(&fa, fd[0]);
        for (int i = 0; i < j; i++) if (pf[i].fd >= 0) posix_spawn_file_actions_addclose(&fa, pf[i].fd);
        int e = posix_spawn(&pid[j], exe, &fa, NULL, av, environ);
        posix_spawn_file_actions_destroy(&fa);
        close(fd[1]);
        if (e) { close(fd[0]); pid[j] = 0; fprintf(stderr, "longctx eval ramp --jobs: %s\n", strerror(e)); status = 1; break; }
        pf[j] = (struct pollfd){.fd = fd[0], .events = POLLIN};
        open_fds++;
    }
    while (open_fds > 0) {
        if (poll(pf, (nfds_t)jobs, -1) < 0) {
            if (errno == EINTR) continue;
            status = 1;
            break;
        }
        for (int j = 0; j < jobs; j++) {
            if (pf[j].fd < 0 || !pf[j].revents) continue;
            char b[65536];
            ssize_t r = read(pf[j].fd, b, sizeof b);
            if (r < 0 && errno == EINTR) continue;
            if (r <= 0) { close(pf[j].fd); pf[j].fd = -1; open_fds--; }
            else lcx__buf_append(&in[j], b, (size_t)r);
            /* whole lines; at the end, what is left (a last line without its newline: the
             * buffer is NUL-terminated) */
            char *ln = in[j].data;
            for (char *nl; ln && (nl = memchr(ln, '\n', in[j].len - (size_t)(ln - in[j].data))); ln = nl + 1) {
                *nl = 0;
                if (take_line(ln, pg, cells, n) < 0) status = 1;
            }
            if (ln && pf[j].fd < 0) {
                if (in[j].err || take_line(ln, pg, cells, n) < 0) status = 1;
                ln = in[j].data + in[j].len;
            }
            if (ln) {
                const size_t used = (size_t)(ln - in[j].data);
                memmove(in[j].data, ln, in[j].len - used);
                lcx__buf_truncate(&in[j], in[j].len - used);
            }
        }
    }
    for (int j = 0; j < jobs; j++) {
        int ws = 0;
        if (pid[j] > 0 && waitpid(pid[j], &ws, 0) == pid[j] && !(WIFEXITED(ws) && WEXITSTATUS(ws) == 0)) {
            fprintf(stderr, "longctx eval ramp --jobs: shard %d/%d failed (%s %d)\n", j, jobs,
                    WIFEXITED(ws) ? "exit status" : "signal", WIFEXITED(ws) ? WEXITSTATUS(ws) : WTERMSIG(ws));
            status = 1;
        }
        if (pf[j].fd >= 0) close(pf[j].fd);
        lcx__buf_free(&in[j]);
    }
    free(av); free(pid); free(pf); free(in);
    if (*n > 1) qsort(*cells, (size_t)*n, sizeof **cells, cell_cmp);
    return status;
}

int cmd_eval_ramp(int argc, char **argv)
{
    if (argc >= 1 && !strcmp(argv[0], "ramp-model")) return cmd_ramp_model(argc, argv);
    lcx_ramp_opts o;
    lcx__ramp_defaults(&o);
    const char *svg = NULL, *svc_bin = NULL, *endpoint = NULL, *replay = NULL, *cells_out = NULL;
    bool json = false, sharded = false;
    int jobs = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { usage(stdout); return 0; }
        if (!strcmp(a, "--json")) { json = true; continue; }
        if (!v) { fprintf(stderr, "longctx eval ramp: %s needs a value\n", a); return 2; }
        i++;
        char *e = NULL;
        if (!strcmp(a, "-m") || !strcmp(a, "--model")) o.model_path = v;
        else if (!strcmp(a, "--sizes")) {
            o.n_sizes = 0;
            char *d = strdup(v), *sp = NULL;
            for (char *t = strtok_r(d, ",", &sp); t; t = strtok_r(NULL, ",", &sp)) {
                if (o.n_sizes == LCX_RAMP_MAX_SIZES || parse_size(t, &o.sizes[o.n_sizes]) < 0) {
                    fprintf(stderr, "longctx eval ramp: bad size '%s' (e.g. 8k, 16384; at most %d)\n", t, LCX_RAMP_MAX_SIZES);
                    free(d);
                    return 2;
                }
                o.n_sizes++;
            }
            free(d);
        } else if (!strcmp(a, "--arms")) {
            o.arms[0] = o.arms[1] = o.arms[2] = false;
            char *d = strdup(v), *sp = NULL;
            for (char *t = strtok_r(d, ",", &sp); t; t = strtok_r(NULL, ",", &sp)) {
                int k = -1;
                for (int j = 0; j < LCX_RAMP_NARMS; j++)
                    if (!strcmp(t, lcx__ramp_arm_name(j))) k = j;
                if (k < 0) { fprintf(stderr, "longctx eval ramp: unknown arm '%s' (baseline, v3, v3+longctx)\n", t); free(d); return 2; }
                o.arms[k] = true;
            }
            free(d);
        } else if (!strcmp(a, "--depths")) {
            o.n_depths = 0;
            char *d = strdup(v), *sp = NULL;
            for (char *t = strtok_r(d, ",", &sp); t; t = strtok_r(NULL, ",", &sp)) {
                double x = strtod(t, &e);
                if (*e || x < 0 || x > 1 || o.n_depths == LCX_RAMP_MAX_DEPTHS) {
                    fprintf(stderr, "longctx eval ramp: bad depth '%s' (0..1)\n", t);
                    free(d);
                    return 2;
                }
                o.depths[o.n_depths++] = x;
            }
            free(d);
        } else if (!strcmp(a, "--seeds")) { o.n_seeds = (int)strtol(v, &e, 10); if (*e || o.n_seeds < 1 || o.n_seeds > 1000) { fprintf(stderr, "longctx eval ramp: --seeds 1..1000\n"); return 2; } }
        else if (!strcmp(a, "--rescue")) {
            if ((o.n_rescues = parse_names(v, lcx__ramp_rescue_name, 2, o.rescues, 2, a)) < 0) return 2;
        } else if (!strcmp(a, "--direction")) {
            if ((o.n_directions = parse_names(v, lcx__ramp_direction_name, 2, o.directions, 2, a)) < 0) return 2;
        } else if (!strcmp(a, "--mode")) {
            if ((o.n_modes = parse_names(v, lcx__ramp_mode_name, 3, o.modes, 3, a)) < 0) return 2;
        } else if (!strcmp(a, "--replay")) replay = v;
        else if (!strcmp(a, "--cells-out")) cells_out = v;
        else if (!strcmp(a, "--first-seed")) { o.first_seed = (int)strtol(v, &e, 10); if (*e || o.first_seed < 0 || o.first_seed > 1000000) { fprintf(stderr, "longctx eval ramp: --first-seed 0..1000000\n"); return 2; } } else if (!strcmp(a, "--budget-frac")) { o.budget_frac = strtod(v, &e); if (*e || o.budget_frac <= 0 || o.budget_frac > 1) { fprintf(stderr, "longctx eval ramp: --budget-frac in (0, 1]\n"); return 2; } }
        else if (!strcmp(a, "--longctx-endpoint")) endpoint = v;
        else if (!strcmp(a, "--svg")) svg = v;
        else if (!strcmp(a, "--svc-bin")) svc_bin = v;
        else if (!strcmp(a, "--prepopulate")) {
            if (strcmp(v, "0") && strcmp(v, "1")) { fprintf(stderr, "longctx eval ramp: --prepopulate 0|1\n"); return 2; }
            o.prepopulate = v[0] == '1';
        }
        else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) { o.n_threads = (int)strtol(v, &e, 10); if (*e || o.n_threads < 1 || o.n_threads > 64) { fprintf(stderr, "longctx eval ramp: -t 1..64\n"); return 2; } }
        else if (!strcmp(a, "--ubatch")) { o.n_ubatch = (int)strtol(v, &e, 10); if (*e || o.n_ubatch < 1 || o.n_ubatch > 8192) { fprintf(stderr, "longctx eval ramp: --ubatch 1..8192\n"); return 2; } }
        else if (!strcmp(a, "--max-gen")) { o.max_gen = (int)strtol(v, &e, 10); if (*e || o.max_gen < 1 || o.max_gen > 4096) { fprintf(stderr, "longctx eval ramp: --max-gen 1..4096\n"); return 2; } }
        else if (!strcmp(a, "--window")) { o.window = (int)strtol(v, &e, 10); if (*e || o.window < 0) { fprintf(stderr, "longctx eval ramp: --window >= 0\n"); return 2; } }
        else if (!strcmp(a, "--prefix")) { o.prefix = (int)strtol(v, &e, 10); if (*e || o.prefix < 0) { fprintf(stderr, "longctx eval ramp: --prefix >= 0\n"); return 2; } }
        else if (!strcmp(a, "--warmup")) { o.warmup = (int)strtol(v, &e, 10); if (*e || o.warmup < 1) { fprintf(stderr, "longctx eval ramp: --warmup >= 1\n"); return 2; } }
        else if (!strcmp(a, "--hybrid")) { o.hybrid = (int)strtol(v, &e, 10); if (*e || o.hybrid < 0 || o.hybrid > 2) { fprintf(stderr, "longctx eval ramp: --hybrid 0|1|2\n"); return 2; } }
        else if (!strcmp(a, "--jobs")) { jobs = (int)strtol(v, &e, 10); if (*e || jobs < 1 || jobs > 256) { fprintf(stderr, "longctx eval ramp: --jobs 1..256\n"); return 2; } }
        else if (!strcmp(a, "--shard")) {
            if (sscanf(v, "%d/%d", &o.shard, &o.n_shards) != 2 || o.n_shards < 1 || o.shard < 0 || o.shard >= o.n_shards) {
                fprintf(stderr, "longctx eval ramp: --shard I/N with 0 <= I < N\n");
                return 2;
            }
            sharded = true;
        }
        else { fprintf(stderr, "longctx eval ramp: unknown flag %s\n", a); usage(stderr); return 2; }
    }
    if (replay) return cmd_replay(replay, json, svg);
    if (sharded && jobs > 1) { fprintf(stderr, "longctx eval ramp: --jobs or --shard, not both\n"); return 2; }
    if (!o.model_path || o.n_sizes == 0) { usage(stderr); return 2; }
    lcx_sidecar *sc = NULL;
    char tmpd[] = "/tmp/longctx-ramp-XXXXXX";
    bool made_tmp = false;
    if (o.arms[LCX_RAMP_V3_LONGCTX] && !endpoint) {
        /* the longctx-svc next to this binary, else $LONGCTX_SVC / PATH */
        static char self_svc[4200];
        char exe[4096];
        if (!svc_bin && self_exe(exe, sizeof exe) == 0) {
            snprintf(self_svc, sizeof self_svc, "%s/longctx-svc", dirname(exe));
            if (access(self_svc, X_OK) == 0) svc_bin = self_svc;
        }
        if (!mkdtemp(tmpd)) { fprintf(stderr, "longctx eval ramp: cannot create a temp dir: %s\n", strerror(errno)); return 1; }
        made_tmp = true;
        char log[4200];
        snprintf(log, sizeof log, "%s/svc.log", tmpd);
        lcx_sidecar_opts so = lcx_sidecar_defaults();
        so.binary = svc_bin;
        so.data_dir = tmpd;
        so.log_path = log;
        char err[512];
        int rc = lcx_sidecar_spawn(&so, &sc, err, sizeof err);
        if (rc < 0) {
            fprintf(stderr, "longctx eval ramp: sidecar: %s\n", err);
            nftw(tmpd, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
            return 1;
        }
        endpoint = lcx_sidecar_url(sc);
        fprintf(stderr, "longctx eval ramp: longctx-svc sidecar at %s (pid %ld)\n", endpoint, (long)lcx_sidecar_pid(sc));
    }
    o.endpoint = endpoint;
    o.on_cell = on_cell;
    const char *mbase = strrchr(o.model_path, '/');
    progress pg = {NULL, mbase ? mbase + 1 : o.model_path};
    if (cells_out && !(pg.cells_out = fopen(cells_out, "a"))) {
        fprintf(stderr, "longctx eval ramp: cannot open %s: %s\n", cells_out, strerror(errno));
        if (sc) lcx_sidecar_stop(sc, 5000);
        if (made_tmp) nftw(tmpd, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
        return 1;
    }
    o.ud = &pg;
    lcx_ramp_cell *cells = NULL;
    int n = 0;
    char err[512] = "";
    int rc, status = 0;
    if (jobs > 1) {
        /* the shards get this run's sidecar; a --longctx-endpoint given is among the arguments */
        status = run_jobs(argc, argv, jobs, sc ? endpoint : NULL, &pg, &cells, &n);
    } else if ((rc = lcx__ramp_run(&o, &cells, &n, err, sizeof err)) < 0) {
        fprintf(stderr, "longctx eval ramp: %s\n", err[0] ? err : lcx_strerror(rc));
        status = 1;
    }
    /* a failed shard still leaves the others' cells to report */
    if (!sharded && (!status || n > 0)) status |= report(pg.model, cells, n, json, svg);
    free(cells);
    if (pg.cells_out) fclose(pg.cells_out);
    if (sc) lcx_sidecar_stop(sc, 5000);
    if (made_tmp) nftw(tmpd, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
    return status;
}
