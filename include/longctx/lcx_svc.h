/* longctx-svc as a library entry point: what a program needs to run the HTTP service
 * (SPEC §2) in-process, e.g. tools/longctx-svc and `longctx serve`. The service's internals
 * (configuration struct, server state, routes) stay in src/svc/svc.h. */
#ifndef LONGCTX_LCX_SVC_H
#define LONGCTX_LCX_SVC_H

#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* `serve` entry point shared by `longctx-svc serve` and `longctx serve`: parses flags
 * (argv[0] is the subcommand name and is skipped), starts, waits for SIGINT/SIGTERM, stops.
 * Returns the process exit status. */
int lcx_svc_serve_main(int argc, char **argv);
/* Prints the `serve` flags (prog names the program in the synopsis). */
void lcx_svc_usage(FILE *f, const char *prog);

#ifdef __cplusplus
}
#endif
#endif
