/* longctx index PATH — index a project directory (the whole package) into the persistent
 * scope store used by longctx-svc, the proxy and `longctx mcp`. A progress bar goes to
 * stderr when it is a terminal; one summary line goes to stdout at the end. Re-running it
 * only re-reads files whose size or mtime changed. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "cmds.h"
#include "longctx/lcx_scope.h"
#include "longctx/lcx_svc.h"
#include "util/util.h"

typedef struct {
    bool tty;
    uint64_t total;          /* files the counting walk found (0 = not known yet); atomic */
    const char *root;
    uint64_t max_file_bytes; /* the scope's limits, so the count walks what indexing walks */
    uint64_t max_files;
    double t0, last;
} progress;

/* The bar's denominator: a counting walk (no file is read) on its own thread, so the
 * 0.1 s it takes on /usr/include overlaps the indexing instead of delaying it. */
static void *count_run(void *arg)
{
    progress *p = arg;
    uint64_t n = lcx_scope_count_files(p->root, p->max_file_bytes, p->max_files);
    __atomic_store_n(&p->total, n ? n : 1, __ATOMIC_RELEASE);
    return NULL;
}

static int on_progress(uint64_t done, uint64_t found, uint64_t bytes, void *ud)
{
    progress *p = ud;
    if (!p->tty) return 0;
    double now = lcx__now_ms();
    uint64_t known = __atomic_load_n(&p->total, __ATOMIC_ACQUIRE);
    uint64_t total = known > found ? known : found;
    if (now - p->last < 100 && done < total) return 0;   /* the last call (done = found) always prints */
    p->last = now;
    double frac = total ? (double)done / (double)total : 0;
    if (frac > 1) frac = 1;
    char bar[31];
    int w = (int)(frac * 30);
    for (int i = 0; i < 30; i++) bar[i] = i < w ? '#' : '.';
    bar[30] = 0;
    double s = (now - p->t0) / 1000.0;
    fprintf(stderr, "\r[%s] %3.0f%%  %llu/%llu files  %.1f MB  %.1f MB/s ", bar, frac * 100,
            (unsigned long long)done, (unsigned long long)total, (double)bytes / 1e6,
            s > 0 ? (double)bytes / 1e6 / s : 0.0);
    return 0;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: longctx index PATH [--data-dir DIR] [--no-progress]\n\n"
               "Walks PATH (.gitignore honoured; secrets, binaries, lockfiles and files > 5 MiB\n"
               "skipped), chunks and embeds every file, and stores the index under\n"
               "DIR/scopes/<scope_hash>/ (default: $LONGCTX_DATA_DIR, else the longctx-svc data dir).\n"
               "With --embed-model it also computes every chunk's neural vector before it returns.\n\n");
    lcx_svc_nn_usage(f);
}

int cmd_index(int argc, char **argv)
{
    lcx_svc_config cfg;
    lcx_svc_config_defaults(&cfg);
    const char *path = NULL;
    bool want_progress = true;
    if (lcx_svc_config_nn_env(&cfg, stderr)) return 2;
    for (int i = 1; i < argc; i++) {
        int nr = lcx_svc_config_nn_flag(&cfg, argc, argv, &i, stderr);
        if (nr < 0) return 2;
        if (nr) continue;
        if (!strcmp(argv[i], "--data-dir") && i + 1 < argc) snprintf(cfg.data_dir, sizeof cfg.data_dir, "%s", argv[++i]);
        else if (!strcmp(argv[i], "--no-progress")) want_progress = false;
        else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) { usage(stdout); return 0; }
        else if (argv[i][0] == '-' && argv[i][1]) { fprintf(stderr, "longctx index: unknown flag %s\n", argv[i]); return 2; }
        else if (!path) path = argv[i];
        else { usage(stderr); return 2; }
    }
    if (!path) { usage(stderr); return 2; }
    double t_cmd = lcx__now_ms();
    char abs[LCX_SCOPE_PATH_MAX * 2];
    if (path[0] != '/') {
        char cwd[LCX_SCOPE_PATH_MAX];
        if (!getcwd(cwd, sizeof cwd)) { perror("getcwd"); return 1; }
        snprintf(abs, sizeof abs, "%s/%s", cwd, path);
    } else {
        snprintf(abs, sizeof abs, "%s", path);
    }
    char canon[LCX_SCOPE_PATH_MAX];
    const char *why = NULL;
    int rc = lcx_scope_canonical(abs, canon, sizeof canon, &why);
    if (rc) {
        fprintf(stderr, "longctx index: %s: %s (%s)\n", path, why ? why : "error", lcx_strerror(rc));
        return 1;
    }
    const lcx_scopes_opts so = lcx_scopes_defaults();   /* cmd_scopes_open's limits, for the count */
    progress pr = {.tty = want_progress && isatty(2), .t0 = lcx__now_ms(), .root = canon,
                   .max_file_bytes = so.max_file_bytes, .max_files = so.package_cap};
    pthread_t cth;
    bool counting = pr.tty && pthread_create(&cth, NULL, count_run, &pr) == 0;
    cmd_scopes sc;
    if (cmd_scopes_open("index", &cfg, false, &sc) < 0) {
        if (counting) pthread_join(cth, NULL);
        return 1;
    }
    lcx_scope_info inf;
    double t0 = lcx__now_ms();
    rc = lcx_scopes_index(sc.scopes, canon, on_progress, &pr, &inf, &why);
    double ms = lcx__now_ms() - t0;
    if (counting) pthread_join(cth, NULL);
    if (pr.tty) fprintf(stderr, "\n");
    if (rc) {
        fprintf(stderr, "longctx index: %s: %s (%s)\n", canon, why ? why : "error", lcx_strerror(rc));
    } else {
        printf("indexed %s: %u files, %u chunks, %u symbols, %.1f MB (%u files read) in %.2f s (%.1f MB/s); "
               "skipped %u binary, %u large, %u unreadable, %u secret, %u other; status %s%s; scope %s; store %s/scopes/%s\n",
               inf.scope_path, inf.files, inf.chunks, inf.symbols, (double)inf.bytes / 1e6, inf.files_read_last,
               ms / 1000.0, ms > 0 ? (double)inf.bytes / 1e6 / (ms / 1000.0) : 0.0, inf.skipped_binary,
               inf.skipped_large, inf.skipped_unreadable, inf.skipped_secret, inf.skipped_other, inf.status,
               inf.truncated ? " (file cap reached)" : "", inf.scope_hash, cfg.data_dir, inf.scope_hash);
    }
    /* close saves the store's index snapshot (what makes the next open fast): part of the
     * command's time, so it is reported too */
    if (!rc && lcx_svc_nn_queue(sc.nn)) {
        /* the neural vectors come from the background worker: wait for it to catch up */
        double tn = lcx__now_ms();
        lcx_nnq_stats st;
        for (;;) {
            lcx_nnq_get_stats(lcx_svc_nn_queue(sc.nn), &st);
            if (!st.backlog || (st.errors && st.rate_per_s <= 0)) break;
            if (pr.tty) fprintf(stderr, "\rneural vectors: %llu to go ", (unsigned long long)st.backlog);
            struct timespec ts = {0, 100 * 1000000L};
            nanosleep(&ts, NULL);
        }
        if (pr.tty) fprintf(stderr, "\r\033[K");
        printf("neural vectors: %llu computed in %.2f s (%.1f/s)%s%s\n", (unsigned long long)st.done,
               (lcx__now_ms() - tn) / 1000.0, st.rate_per_s, st.last_error[0] ? "; last error: " : "", st.last_error);
    }
    if (!rc && pr.tty) fprintf(stderr, "saving the index...");
    double t_close = lcx__now_ms();
    cmd_scopes_close(&sc);
    double now = lcx__now_ms();
    if (!rc && pr.tty) fprintf(stderr, "\r\033[K");
    if (!rc) {
        double all = (now - t_cmd) / 1000.0;
        printf("saved in %.2f s; whole command %.2f s (%.1f MB/s)\n", (now - t_close) / 1000.0, all,
               all > 0 ? (double)inf.bytes / 1e6 / all : 0.0);
    }
    return rc ? 1 : 0;
}
