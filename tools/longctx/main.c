/* longctx — command-line front end. Dispatches to tools/longctx/cmd_*.c. */
#include <stdio.h>
#include <string.h>
#include "cmds.h"

static const struct {
    const char *name;
    int (*fn)(int, char **);
    const char *help;
} cmds[] = {
    {"serve", cmd_serve, "run the HTTP service (same flags as longctx-svc serve)"},
    {"index", cmd_index, "index a project directory: longctx index PATH"},
    {"query", cmd_query, "retrieve code for a query: longctx query PATH TEXT"},
    {"mcp", cmd_mcp, "MCP server over stdio for coding agents"},
    {"eval", cmd_eval, "evaluations: eval mrcr FILE | eval mrcr-gen | eval ramp | eval ramp-model"},
    {"embed", cmd_embed, "neural embedder vectors: embed -m MODEL TEXT... [--json]"},
    {"rerank", cmd_rerank, "cross-encoder scores: rerank -m MODEL QUERY DOC... [--json]"},
    {"reembed", cmd_reembed, "rebuild a store's neural vectors: reembed STORE --embed-model PATH"},
    {"triatt", cmd_triatt, "TriAttention tools: triatt replay FILE.json | simulate"},
};

static void usage(FILE *f)
{
    fprintf(f, "usage: longctx COMMAND [ARGS]   (longctx COMMAND --help for details)\n\ncommands:\n");
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++)
        fprintf(f, "  %-8s %s\n", cmds[i].name, cmds[i].help);
}

int main(int argc, char **argv)
{
    if (argc < 2) { usage(stderr); return 2; }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "--version")) { printf("longctx %s\n", LCX_VERSION); return 0; }
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        if (strcmp(argv[1], cmds[i].name)) continue;
        return cmds[i].fn(argc - 1, argv + 1);
    }
    fprintf(stderr, "longctx: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
