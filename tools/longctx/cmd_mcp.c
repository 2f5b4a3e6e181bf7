/* longctx mcp — MCP server over stdio (see src/svc/mcp.c). */
#include <stdio.h>
#include <string.h>
#include "cmds.h"
#include "longctx/lcx_scope.h"
#include "longctx/lcx_svc.h"

int cmd_mcp(int argc, char **argv)
{
    lcx_svc_config cfg;
    lcx_svc_config_defaults(&cfg);
    bool watch = true;
    if (lcx_svc_config_nn_env(&cfg, stderr)) return 2;
    for (int i = 1; i < argc; i++) {
        int nr = lcx_svc_config_nn_flag(&cfg, argc, argv, &i, stderr);
        if (nr < 0) return 2;
        if (nr) continue;
        if (!strcmp(argv[i], "--data-dir") && i + 1 < argc) {
            snprintf(cfg.data_dir, sizeof cfg.data_dir, "%s", argv[++i]);
        } else if (!strcmp(argv[i], "--no-watch")) {
            watch = false;
        } else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: longctx mcp [--data-dir DIR] [--no-watch]\n\n"
                   "Model Context Protocol server on stdin/stdout (newline-delimited JSON-RPC).\n"
                   "Tools: search_codebase, list_projects, index_status, find_related, add_project.\n"
                   "Indexes persist under DIR/scopes (default: the longctx-svc data dir).\n"
                   "Register it with an agent, e.g.: {\"command\": \"longctx\", \"args\": [\"mcp\"]}\n\n");
            lcx_svc_nn_usage(stdout);
            return 0;
        } else {
            fprintf(stderr, "longctx mcp: unknown argument '%s' (try --help)\n", argv[i]);
            return 2;
        }
    }
    cmd_scopes sc;
    if (cmd_scopes_open("mcp", &cfg, watch, &sc) < 0) return 1;
    lcx_mcp m = {.scopes = sc.scopes};
    lcx_mcp_serve(&m, stdin, stdout);
    cmd_scopes_close(&sc);
    return 0;
}
