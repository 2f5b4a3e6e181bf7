/* longctx-svc — the HTTP service (SPEC §2). Thin: everything lives in src/svc.
 *   longctx-svc serve [--host H] [--port P] [--data-dir D] ...   (longctx-svc serve --help)
 *   longctx-svc --version | --help */
#include <stdio.h>
#include <string.h>
#include "longctx/lcx_svc.h"

int main(int argc, char **argv)
{
    if (argc >= 2 && !strcmp(argv[1], "serve")) return lcx_svc_serve_main(argc - 1, argv + 1);
    if (argc >= 2 && (!strcmp(argv[1], "--version") || !strcmp(argv[1], "-V"))) {
        printf("longctx-svc %s\n", LCX_VERSION);
        return 0;
    }
    if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help"))) {
        lcx_svc_usage(stdout, "longctx-svc");
        return 0;
    }
    /* No subcommand but flags: treat as `serve` for convenience (longctx-svc --port 5055). */
    if (argc == 1 || (argc >= 2 && argv[1][0] == '-')) {
        argv[0] = "serve";
        return lcx_svc_serve_main(argc, argv);
    }
    fprintf(stderr, "longctx-svc: unknown command '%s'\n", argv[1]);
    lcx_svc_usage(stderr, "longctx-svc");
    return 2;
}
