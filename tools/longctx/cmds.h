/* Subcommands of the `longctx` CLI. Each is `int cmd_X(int argc, char **argv)` with
 * argv[0] = the subcommand name; it returns the process exit status (0 ok, 1 error,
 * 2 usage). One file per subcommand: tools/longctx/cmd_X.c. */
#ifndef LCX_CLI_CMDS_H
#define LCX_CLI_CMDS_H

#include <stdbool.h>
#include "longctx/lcx_neural.h"
#include "longctx/lcx_scope.h"
#include "longctx/lcx_svc.h"

int cmd_serve(int argc, char **argv);   /* = longctx-svc serve (cmd_serve.c) */
int cmd_index(int argc, char **argv);   /* index a scope with a progress bar (cmd_index.c) */
int cmd_query(int argc, char **argv);   /* retrieve from a scope (cmd_query.c) */
int cmd_mcp(int argc, char **argv);     /* MCP server over stdio (cmd_mcp.c) */
int cmd_eval(int argc, char **argv);    /* eval mrcr | mrcr-gen | ramp | ramp-model (cmd_eval.c) */
int cmd_eval_ramp(int argc, char **argv);   /* eval ramp | ramp-model (cmd_eval_ramp.c) */
int cmd_triatt(int argc, char **argv);  /* triatt replay | simulate (cmd_triatt.c) */

int cmd_embed(int argc, char **argv);   /* neural embedder vectors (cmd_embed.c) */
int cmd_rerank(int argc, char **argv);  /* cross-encoder scores (cmd_rerank.c) */
int cmd_reembed(int argc, char **argv); /* rebuild a store's neural vectors (cmd_reembed.c) */

/* loads --embed-model / --rerank-model of cfg (cmd_reembed.c); *out NULL when neither;
 * < 0 after printing "longctx CMD: <the loader's sentence>" */
int cmd_nn_open(const char *cmd, const lcx_svc_config *cfg, lcx_svc_nn **out);

/* The scope manager of index, query and mcp over cfg's data dir (cmd_reembed.c): cfg's
 * neural models, the hash embedder, lcx_scopes_open (watch: the inotify watcher). < 0
 * after printing "longctx CMD: …", with nothing left open; cmd_scopes_close frees all. */
typedef struct {
    lcx_embedder *emb;
    lcx_svc_nn *nn;
    lcx_scopes *scopes;
} cmd_scopes;
int cmd_scopes_open(const char *cmd, const lcx_svc_config *cfg, bool watch, cmd_scopes *out);
void cmd_scopes_close(cmd_scopes *s);

/* model flags shared by embed and rerank (cmd_embed.c): 1 consumed, 0 not a model flag,
 * -1 bad value (message printed) */
extern const char lcx__cli_nn_flags[];
int lcx__cli_nn_parse(int argc, char **argv, int *i, const char *cmd, lcx_nn_opts *o, const char **model, bool *json);

#endif
