/* The MCP server behind `longctx mcp` (mcp.c): JSON-RPC 2.0 over newline-delimited stdio
 * (and longctx-svc's POST /mcp, Streamable HTTP)
 * with the tools search_codebase, list_projects, index_status, find_related, add_project. */
#ifndef LCX_SVC_MCP_H
#define LCX_SVC_MCP_H

#include <stddef.h>
#include <stdio.h>
#include "longctx/lcx_scope.h"

typedef struct {
    lcx_scopes *scopes;   /* borrowed: the projects the tools search */
} lcx_mcp;

/* Answers one JSON-RPC message: the response line (malloc'd, no newline), or NULL when the
 * message needs no answer (a notification or a client response). Never fails on bad
 * input: malformed messages get JSON-RPC errors. */
char *lcx__mcp_handle(lcx_mcp *m, const char *line, size_t len);
/* Reads messages from in until EOF, writes answers to out (flushed per line). */
int lcx__mcp_serve(lcx_mcp *m, FILE *in, FILE *out);

#endif
