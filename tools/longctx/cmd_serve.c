/* `longctx serve`: the same server and flags as `longctx-svc serve` (src/svc/config.c). */
#include "cmds.h"
#include "longctx/lcx_svc.h"

int cmd_serve(int argc, char **argv) { return lcx_svc_serve_main(argc, argv); }
