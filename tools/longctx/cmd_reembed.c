/* longctx reembed STORE --embed-model PATH: rebuilds a store's neural vectors with the
 * given model (docs/neural.md "Fingerprint"). The store is opened exclusively (a running
 * service holding it makes this fail with "in use"), its neural.vec from another model is
 * dropped (lcx_store_opts.nn_reset) and every chunk is embedded on this thread before the
 * command returns. Also: the neural-model and scope-manager openers of `index`, `query` and
 * `mcp`. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cmds.h"
#include "longctx/lcx.h"
#include "longctx/lcx_svc.h"
#include "util/util.h"

int cmd_nn_open(const char *cmd, const lcx_svc_config *cfg, lcx_svc_nn **out)
{
    char msg[1024] = "";
    int rc = lcx_svc_nn_open(cfg, out, msg, sizeof msg);
    if (rc < 0) fprintf(stderr, "longctx %s: %s\n", cmd, msg[0] ? msg : lcx_strerror(rc));
    return rc;
}

int cmd_scopes_open(const char *cmd, const lcx_svc_config *cfg, bool watch, cmd_scopes *out)
{
    *out = (cmd_scopes){0};
    if (cmd_nn_open(cmd, cfg, &out->nn) < 0) return -1;
    lcx_scopes_opts so = lcx_scopes_defaults();
    so.data_dir = cfg->data_dir;
    so.watch = watch;
    so.store.nn = lcx_svc_nn_queue(out->nn);
    int rc = lcx_embedder_hash_new(cfg->embed_dim, &out->emb);
    if (!rc) rc = lcx_scopes_open(&so, out->emb, &out->scopes);
    if (rc) {
        fprintf(stderr, "longctx %s: cannot open the index under %s: %s\n", cmd, cfg->data_dir, lcx_strerror(rc));
        cmd_scopes_close(out);
        return rc < 0 ? rc : -1;
    }
    return 0;
}

void cmd_scopes_close(cmd_scopes *s)
{
    lcx_scopes_close(s->scopes);
    lcx_embedder_free(s->emb);
    lcx_svc_nn_close(s->nn);
    *s = (cmd_scopes){0};
}

static void usage(FILE *f)
{
    fprintf(f, "usage: longctx reembed STORE --embed-model PATH [--nn-threads N] [--embed-dim D]\n\n"
               "Rebuilds the neural vectors of the store directory STORE (a session's directory under\n"
               "DATA_DIR/sessions/, or a scope's DATA_DIR/scopes/<hash>/store) with the model PATH,\n"
               "dropping those another model made. Stop the service that holds the store first.\n\n");
    lcx_svc_nn_usage(f);
}

int cmd_reembed(int argc, char **argv)
{
    lcx_svc_config cfg;
    lcx_svc_config_defaults(&cfg);
    if (lcx_svc_config_nn_env(&cfg, stderr)) return 2;
    const char *dir = NULL;
    for (int i = 1; i < argc; i++) {
        int nr = lcx_svc_config_nn_flag(&cfg, argc, argv, &i, stderr);
        if (nr < 0) return 2;
        if (nr) continue;
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) { usage(stdout); return 0; }
        if (!strcmp(argv[i], "--embed-dim") && i + 1 < argc) { cfg.embed_dim = atoi(argv[++i]); continue; }
        if (argv[i][0] == '-' || dir) { usage(stderr); return 2; }
        dir = argv[i];
    }
    if (!dir || !cfg.embed_model[0]) { usage(stderr); return 2; }
    cfg.rerank_model[0] = 0;   /* not used here */
    lcx_svc_nn *nn = NULL;
    if (cmd_nn_open("reembed", &cfg, &nn) < 0) return 1;
    lcx_embedder *emb = NULL;
    lcx_store *s = NULL;
    int rc = lcx_embedder_hash_new(cfg.embed_dim, &emb);
    lcx_store_opts so = {0};
    so.nn = lcx_svc_nn_queue(nn);
    so.nn_reset = true;
    if (!rc) rc = lcx_store_open(dir, emb, &so, &s);
    if (rc) {
        const char *d = lcx_store_open_detail();
        fprintf(stderr, "longctx reembed: cannot open %s: %s\n", dir, d[0] ? d : lcx_strerror(rc));
    } else {
        double t0 = lcx__now_ms();
        rc = lcx_nnq_drain(so.nn, s);
        double ms = lcx__now_ms() - t0;
        uint32_t ready = lcx_store_nn_ready(s), live = lcx_store_count(s);
        if (rc < 0) fprintf(stderr, "longctx reembed: %s: %s\n", dir, lcx_strerror(rc));
        else
            printf("reembedded %s: %u of %u chunks have neural vectors from %s in %.2f s\n", dir, ready, live,
                   cfg.embed_model, ms / 1000.0);
    }
    lcx_store_close(s);
    lcx_embedder_free(emb);
    lcx_svc_nn_close(nn);
    return rc < 0 ? 1 : 0;
}
