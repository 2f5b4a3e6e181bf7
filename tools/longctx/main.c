/* longctx — command-line front end. Dispatches to tools/longctx/cmd_*.c. */
#include <stdio.h>
#include <string.h>
#include "cmds.h"

/* Weak references: a subcommand whose file is not built yet is reported as unavailable
 * instead of breaking the link of every other subcommand. */
#pragma weak cmd_serve
#pragma weak cmd_index
#pragma weak cmd_query
#pragma weak cmd_mcp
#pragma weak cmd_eval
#pragma weak cmd_triatt
#pragma weak cmd_bench

static const struct {
    const char *name;
    int (*fn)(int, char **);
    const char *help;
} cmds[] = {
    {"serve", cmd_serve, "run the HTTP service (same flags as longctx-svc serve)"},
    {"index", cmd_index, "index a project directory: longctx index PATH"},
    {"query", cmd_query, "retrieve code for a query: longctx query PATH TEXT"},
    {"mcp", cmd_mcp, "MCP server over stdio for coding agents"},
    {"eval", cmd_eval, "evaluations: eval mrcr | mrcr-gen | niah"},
    {"triatt", cmd_triatt, "TriAttention tools: triatt replay FILE.json | simulate"},
    {"bench", cmd_bench, "in-process benchmarks"},
};

static void usage(FILE *f)
{
    fprintf(f, "usage: longctx COMMAND [ARGS]   (longctx COMMAND --help for details)\n\ncommands:\n");
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++)
        if (cmds[i].fn) fprintf(f, "  %-8s %s\n", cmds[i].name, cmds[i].help);
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
        if (!cmds[i].fn) {
            fprintf(stderr, "longctx: '%s' is not built into this binary\n", argv[1]);
            return 2;
        }
        return cmds[i].fn(argc - 1, argv + 1);
    }
    fprintf(stderr, "longctx: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
