/* The MCP server behind `longctx mcp` and longctx-svc's POST /mcp (mcp.c): JSON-RPC 2.0
 * over newline-delimited stdio or Streamable HTTP, with the tools search_codebase,
 * list_projects, index_status, find_related, add_project. Its stdio entry point (lcx_mcp,
 * lcx_mcp_serve) is public, in include/longctx/lcx_svc.h; this adds the one-message step
 * the HTTP route and the tests drive. */
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
