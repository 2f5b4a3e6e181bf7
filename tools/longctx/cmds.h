/* Subcommands of the `longctx` CLI. Each is `int cmd_X(int argc, char **argv)` with
 * argv[0] = the subcommand name; it returns the process exit status (0 ok, 1 error,
 * 2 usage). One file per subcommand: tools/longctx/cmd_X.c. */
#ifndef LCX_CLI_CMDS_H
#define LCX_CLI_CMDS_H

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
struct lcx_svc_nn;
#include "longctx/lcx_svc.h"
int cmd_nn_open(const char *cmd, const lcx_svc_config *cfg, struct lcx_svc_nn **out);
/* model flags shared by embed and rerank (cmd_embed.c): 1 consumed, 0 not a model flag,
 * -1 bad value (message printed) */
#include <stdbool.h>
#include "longctx/lcx_neural.h"
extern const char lcx__cli_nn_flags[];
int lcx__cli_nn_parse(int argc, char **argv, int *i, const char *cmd, lcx_nn_opts *o, const char **model, bool *json);

#endif
