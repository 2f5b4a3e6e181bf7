/* The MCP server's JSON-RPC layer on bad and edge-case input (the official SDK client
 * drives the happy paths in tests/js/mcp_client.mjs). */
#include "testutil.h"
#include "svc/mcp.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static lcx_scopes *scopes;
static lcx_embedder *emb;
static char *dir;

static int setup(void **st)
{
    dir = tu_tmpdir();
    assert_int_equal(lcx_embedder_hash_new(0, &emb), 0);
    lcx_scopes_opts so = lcx_scopes_defaults();
    so.data_dir = dir;
    so.watch = false;
    assert_int_equal(lcx_scopes_open(&so, emb, &scopes), 0);
    return 0;
}

static int teardown(void **st)
{
    lcx_scopes_close(scopes);
    lcx_embedder_free(emb);
    tu_rmrf(dir);
    free(dir);
    return 0;
}

static char *ask(const char *line)
{
    lcx_mcp m = {.scopes = scopes};
    return lcx__mcp_handle(&m, line, strlen(line));
}

static void test_protocol_errors(void **st)
{
    char *r = ask("{not json");
    assert_non_null(strstr(r, "\"code\":-32700"));
    assert_non_null(strstr(r, "\"id\":null"));
    free(r);
    r = ask("{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"no/such\"}");
    assert_non_null(strstr(r, "\"code\":-32601"));
    assert_non_null(strstr(r, "\"id\":3"));
    free(r);
    r = ask("[1,2]");
    assert_non_null(strstr(r, "\"code\":-32600"));
    free(r);
    r = ask("{\"jsonrpc\":\"2.0\",\"id\":\"x\",\"method\":\"tools/call\",\"params\":{\"arguments\":{}}}");
    assert_non_null(strstr(r, "\"code\":-32602"));
    assert_non_null(strstr(r, "\"id\":\"x\""));
    free(r);
    r = ask("{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tools/call\",\"params\":{\"name\":\"search_codebase\","
            "\"arguments\":[1]}}");
    assert_non_null(strstr(r, "\"code\":-32602"));
    free(r);
    /* notifications and client responses get no answer */
    assert_null(ask("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}"));
    assert_null(ask("{\"jsonrpc\":\"2.0\",\"id\":9,\"result\":{}}"));
}

static void test_initialize_and_tools(void **st)
{
    char *r = ask("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"protocolVersion\":"
                  "\"2024-11-05\",\"capabilities\":{},\"clientInfo\":{\"name\":\"t\",\"version\":\"1\"}}}");
    assert_non_null(strstr(r, "\"protocolVersion\":\"2024-11-05\""));
    assert_non_null(strstr(r, "\"tools\":{"));
    free(r);
    r = ask("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"protocolVersion\":\"1999-01-01\"}}");
    assert_non_null(strstr(r, "\"protocolVersion\":\"2025-11-25\""));
    free(r);
    r = ask("{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/list\"}");
    for (const char *t = "search_codebase\0list_projects\0index_status\0find_related\0add_project\0"; *t;
         t += strlen(t) + 1)
        assert_non_null(strstr(r, t));
    assert_non_null(strstr(r, "\"inputSchema\""));
    free(r);
    /* tool-level failures are results with isError, not protocol errors */
    r = ask("{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/call\",\"params\":{\"name\":\"search_codebase\","
            "\"arguments\":{\"query\":\"x\",\"max_results\":0}}}");
    assert_non_null(strstr(r, "\"isError\":true"));
    free(r);
    r = ask("{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"tools/call\",\"params\":{\"name\":\"add_project\","
            "\"arguments\":{\"path\":\"relative/path\"}}}");
    assert_non_null(strstr(r, "\"isError\":true"));
    free(r);
    r = ask("{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\",\"params\":{\"name\":\"index_status\","
            "\"arguments\":{}}}");
    assert_non_null(strstr(r, "\"isError\":true"));
    free(r);
}

static void test_serve_stream(void **st)
{
    /* several messages, a blank line, CRLF endings and an oversized line */
    size_t big = (16u << 20) + 10;
    char *in = malloc(big + 512);
    int n = sprintf(in, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\r\n\n");
    memset(in + n, 'a', big);
    n += (int)big;
    n += sprintf(in + n, "\n{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\"}\n");
    FILE *fi = fmemopen(in, (size_t)n, "r");
    char *out = NULL;
    size_t olen = 0;
    FILE *fo = open_memstream(&out, &olen);
    lcx_mcp m = {.scopes = scopes};
    assert_int_equal(lcx_mcp_serve(&m, fi, fo), 0);
    fclose(fi);
    fclose(fo);
    assert_string_equal(out, "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n"
                             "{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32600,\"message\":\"message too large\"}}\n"
                             "{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{}}\n");
    free(out);
    free(in);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_protocol_errors),
        cmocka_unit_test(test_initialize_and_tools),
        cmocka_unit_test(test_serve_stream),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
