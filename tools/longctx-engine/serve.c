/* longctx-engine serve: the OpenAI-compatible server (lcx_engine_server), with
 * --enable-longctx starting longctx-svc beside it (lcx_sidecar) for Tier 2/3.
 *
 *   longctx-engine serve -m M.gguf [--host 127.0.0.1] [--port 8080] [-t N] [-c CTX] [-b UBATCH]
 *       [-n MAX_TOKENS] [--model-id NAME] [--max-queue N] [--max-sessions N] [--idle-s S]
 *       [triatt flags] [--rescue single-turn|two-turn] [--prepopulate 0|1]
 *       [--enable-longctx [--longctx-data-dir DIR] | --longctx-endpoint URL]
 *
 * Prints "listening on http://HOST:PORT" on stderr once it serves; SIGTERM/SIGINT stop the
 * server and the sidecar. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "longctx/engine.h"
#include "longctx/engine_server.h"
#include "longctx/lcx_sidecar.h"

int cmd_serve(int argc, char **argv);

static int int_arg(const char *flag, const char *v, int lo, int hi, int *out)
{
    char *e;
    errno = 0;
    long x = v ? strtol(v, &e, 10) : 0;
    if (!v || errno || *e || e == v || x < lo || x > hi) {
        fprintf(stderr, "longctx-engine serve: %s needs an integer in [%d, %d]\n", flag, lo, hi);
        return -1;
    }
    *out = (int)x;
    return 0;
}

int cmd_serve(int argc, char **argv)
{
    triatt_config tc;
    char err[1024];
    if (eng_triatt_config_resolve(&tc, &argc, argv, err, sizeof err)) {
        fprintf(stderr, "longctx-engine serve: %s\n", err);
        return 2;
    }
    eng_server_opts o = eng_server_defaults();
    o.port = 8080;
    const char *model = NULL;
    int threads = 1, n_ctx = 0, n_ubatch = 0, max_tokens = 256, prepop = 1;
    bool longctx = false;
    const char *data_dir = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-m") || !strcmp(a, "--model")) { if (!v) goto needv; model = v; i++; }
        else if (!strcmp(a, "--host")) { if (!v) goto needv; o.host = v; i++; }
        else if (!strcmp(a, "--model-id")) { if (!v) goto needv; o.model_id = v; i++; }
        else if (!strcmp(a, "--port")) { if (int_arg(a, v, 0, 65535, &o.port)) return 2; i++; }
        else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) { if (int_arg(a, v, 1, 64, &threads)) return 2; i++; }
        else if (!strcmp(a, "-c") || !strcmp(a, "--ctx") || !strcmp(a, "--ctx-size")) { if (int_arg(a, v, 16, 1 << 24, &n_ctx)) return 2; i++; }
        else if (!strcmp(a, "-n") || !strcmp(a, "--max-tokens")) { if (int_arg(a, v, 1, 1 << 20, &max_tokens)) return 2; i++; }
        else if (!strcmp(a, "--max-queue")) { if (int_arg(a, v, 0, 4096, &o.max_queue)) return 2; i++; }
        else if (!strcmp(a, "--max-sessions")) { if (int_arg(a, v, 1, 4096, &o.max_sessions)) return 2; i++; }
        else if (!strcmp(a, "--idle-s")) { if (int_arg(a, v, 1, 1 << 30, &o.idle_s)) return 2; i++; }
        else if (!strcmp(a, "-b") || !strcmp(a, "--batch-size")) { if (int_arg(a, v, 1, 8192, &n_ubatch)) return 2; i++; }
        else if (!strcmp(a, "--prepopulate")) { if (int_arg(a, v, 0, 1, &prepop)) return 2; i++; }
        else if (!strcmp(a, "--rescue")) {
            if (v && !strcmp(v, "single-turn")) o.session.rescue = ENG_RESCUE_SINGLE_TURN;
            else if (v && !strcmp(v, "two-turn")) o.session.rescue = ENG_RESCUE_TWO_TURN;
            else { fprintf(stderr, "longctx-engine serve: --rescue single-turn|two-turn\n"); return 2; }
            i++;
        }
        else if (!strcmp(a, "--longctx-data-dir")) { if (!v) goto needv; data_dir = v; i++; }
        else if (!strcmp(a, "--enable-longctx")) longctx = true;
        else { fprintf(stderr, "longctx-engine serve: unknown argument %s\n", a); return 2; }
        continue;
    needv:
        fprintf(stderr, "longctx-engine serve: %s needs a value\n", a);
        return 2;
    }
    if (!model) { fprintf(stderr, "longctx-engine serve: -m MODEL.gguf is required\n"); return 2; }
    if (data_dir && !longctx) {
        fprintf(stderr, "longctx-engine serve: --longctx-data-dir needs --enable-longctx\n");
        return 2;
    }
    if (longctx && tc.endpoint[0]) {
        fprintf(stderr, "longctx-engine serve: --enable-longctx and --longctx-endpoint exclude each other\n");
        return 2;
    }
    /* signals are taken by sigwait below; block them before any thread starts */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, NULL);

    eng_model *m;
    int rc = eng_model_load(model, &m, err, sizeof err);
    if (rc) { fprintf(stderr, "longctx-engine serve: %s\n", err[0] ? err : lcx_strerror(rc)); return 1; }
    lcx_sidecar *sc = NULL;
    if (longctx) {
        lcx_sidecar_opts so = lcx_sidecar_defaults();
        so.data_dir = data_dir;
        if ((rc = lcx_sidecar_spawn(&so, &sc, err, sizeof err)) < 0) {
            fprintf(stderr, "longctx-engine serve: --enable-longctx: %s\n", err);
            eng_model_free(m);
            return 1;
        }
        snprintf(tc.endpoint, sizeof tc.endpoint, "%s", lcx_sidecar_url(sc));
        fprintf(stderr, "longctx-svc started at %s (pid %d)\n", lcx_sidecar_url(sc), (int)lcx_sidecar_pid(sc));
    }
    o.model = m;
    o.session.ctx.n_threads = threads;
    if (n_ctx) o.session.ctx.n_ctx = n_ctx;
    if (n_ubatch) o.session.ctx.n_ubatch = n_ubatch;
    o.session.prepopulate = prepop;
    o.session.max_tokens = max_tokens;
    o.session.triatt = tc.enabled ? &tc : NULL;
    o.rescue = tc.enabled && tc.endpoint[0];
    eng_server *srv;
    if ((rc = eng_server_start(&o, &srv, err, sizeof err)) < 0) {
        fprintf(stderr, "longctx-engine serve: %s\n", err);
        lcx_sidecar_stop(sc, 5000);
        eng_model_free(m);
        return 1;
    }
    fprintf(stderr, "listening on http://%s:%d\n", o.host, eng_server_port(srv));
    /* wait for a signal; once a second, check the sidecar (a dead one turns rescue off in
     * /healthz; the sessions' Tier-2/3 calls then fail and are counted, serving goes on) */
    int sig = 0;
    bool sc_alive = sc != NULL;
    const struct timespec tick = {1, 0};
    while ((sig = sigtimedwait(&set, NULL, &tick)) < 0) {
        if (sc_alive && !lcx_sidecar_alive(sc)) {
            sc_alive = false;
            eng_server_set_rescue(srv, false);
            fprintf(stderr, "longctx-engine serve: longctx-svc (pid %d) died; serving without rescue\n",
                    (int)lcx_sidecar_pid(sc));
        }
    }
    fprintf(stderr, "longctx-engine serve: signal %d, stopping\n", sig);
    eng_server_stop(srv);
    if (sc) lcx_sidecar_stop(sc, 5000);
    eng_model_free(m);
    return 0;
}
