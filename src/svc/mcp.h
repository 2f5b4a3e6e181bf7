/* The MCP server behind `longctx mcp` (mcp.c). Its entry point (lcx_mcp, lcx_mcp_serve) is
 * public, in include/longctx/lcx_svc.h; this adds the one-message step the tests drive. */
#ifndef LCX_SVC_MCP_H
#define LCX_SVC_MCP_H

#include <stddef.h>
#include <stdio.h>
#include "longctx/lcx_svc.h"

/* Answers one JSON-RPC message: the response line (malloc'd, no newline), or NULL when the
 * message needs no answer (a notification or a client response). Never fails on bad
 * input: malformed messages get JSON-RPC errors. */
char *lcx__mcp_handle(lcx_mcp *m, const char *line, size_t len);

#endif
