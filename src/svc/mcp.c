/* `longctx mcp`: a Model Context Protocol server over stdio, so coding agents (Claude Code,
 * Cursor, the official MCP SDKs) can search a codebase through longctx.
 *
 * Transport: newline-delimited JSON-RPC 2.0 on stdin/stdout (MCP stdio transport); logs
 * go to stderr only. Lines are capped at MCP_MAX_LINE bytes; a longer line is answered
 * with a JSON-RPC error and skipped, never buffered without bound.
 *
 * Protocol: initialize (we answer with the client's protocolVersion when we know it, else
 * our newest), notifications/initialized, ping, tools/list, tools/call. Tool failures are
 * results with isError: true (the MCP convention), protocol errors are JSON-RPC errors.
 *
 * Budgets: every tool's text is cut to max_tokens (default MCP_DEFAULT_TOKENS, never more
 * than MCP_MAX_TOKENS) estimated at 4 bytes per token — a deliberate over-estimate for
 * code, so the hard budget holds for any tokenizer an agent's model uses within ~2×.
 *
 * The same handler also serves MCP Streamable HTTP on longctx-svc (POST /mcp, below). */
#include "svc/mcp.h"
#include "svc/svc.h"
#include "util/util.h"

#include <cjson/cJSON.h>
#include <pthread.h>
#include <sys/random.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MCP_MAX_LINE (16u << 20)
#define MCP_DEFAULT_TOKENS 2000
#define MCP_MAX_TOKENS 16000
#define MCP_BYTES_PER_TOKEN 4

static const char *const known_versions[] = {"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05", "2024-10-07"};

/* ---- tool schemas ------------------------------------------------------------------ */
static const char TOOLS_JSON[] =
    "["
    "{\"name\":\"search_codebase\","
    "\"description\":\"Search a project's code for what a question needs (hybrid lexical + dense retrieval with "
    "symbol-aware boosting). Returns the most relevant chunks as '// path:start-end' blocks.\","
    "\"inputSchema\":{\"type\":\"object\",\"properties\":{"
    "\"query\":{\"type\":\"string\",\"description\":\"What to look for: a question, identifiers, an error message.\"},"
    "\"cwd\":{\"type\":\"string\",\"description\":\"Absolute path inside the project (its root is found by sentinel "
    "files such as .git, package.json, Cargo.toml, Makefile).\"},"
    "\"project\":{\"type\":\"string\",\"description\":\"Absolute path of the project root (overrides cwd).\"},"
    "\"max_tokens\":{\"type\":\"integer\",\"minimum\":100,\"maximum\":16000,\"default\":2000},"
    "\"max_results\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":" LCX__XSTR(LCX_TOP_K_MAX) ",\"default\":8}},"
    "\"required\":[\"query\"]}},"
    "{\"name\":\"list_projects\","
    "\"description\":\"List the projects longctx has indexed and loaded, with file and chunk counts.\","
    "\"inputSchema\":{\"type\":\"object\",\"properties\":{}}},"
    "{\"name\":\"index_status\","
    "\"description\":\"Indexing status of one project: files, chunks, symbols, skipped files, scope kind.\","
    "\"inputSchema\":{\"type\":\"object\",\"properties\":{"
    "\"project\":{\"type\":\"string\",\"description\":\"Absolute path of the project root.\"}},"
    "\"required\":[\"project\"]}},"
    "{\"name\":\"find_related\","
    "\"description\":\"Find code related to a file: chunks elsewhere in its project that share its symbols and "
    "vocabulary.\","
    "\"inputSchema\":{\"type\":\"object\",\"properties\":{"
    "\"file\":{\"type\":\"string\",\"description\":\"Absolute path of a file inside a project.\"},"
    "\"max_tokens\":{\"type\":\"integer\",\"minimum\":100,\"maximum\":16000,\"default\":2000},"
    "\"max_results\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":" LCX__XSTR(LCX_TOP_K_MAX) ",\"default\":8}},"
    "\"required\":[\"file\"]}},"
    "{\"name\":\"add_project\","
    "\"description\":\"Index a project directory (whole package) so later searches are instant; re-running it "
    "refreshes changed files only.\","
    "\"inputSchema\":{\"type\":\"object\",\"properties\":{"
    "\"path\":{\"type\":\"string\",\"description\":\"Absolute path of the project root.\"}},"
    "\"required\":[\"path\"]}}"
    "]";

/* ---- helpers ----------------------------------------------------------------------- */

/* Cuts text (in place) to the token budget on a UTF-8 boundary, with a marker. */
static void apply_budget(lcx_buf *b, int max_tokens)
{
    size_t cap = (size_t)max_tokens * MCP_BYTES_PER_TOKEN;
    static const char mark[] = "\n... [truncated to the token budget]";
    if (b->len <= cap) return;
    size_t keep = lcx__utf8_cut(b->data, b->len, cap > sizeof mark ? cap - (sizeof mark - 1) : 0);
    b->len = keep;
    b->data[keep] = 0;
    lcx__buf_puts(b, mark);
}

static int get_int(const cJSON *args, const char *name, int def, int lo, int hi, const char **err)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(args, name);
    if (!v || cJSON_IsNull(v)) return def;
    if (!cJSON_IsNumber(v) || v->valuedouble != (int)v->valuedouble || v->valuedouble < lo || v->valuedouble > hi) {
        *err = name;
        return def;
    }
    return (int)v->valuedouble;
}

static const char *get_str(const cJSON *args, const char *name)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(args, name);
    return cJSON_IsString(v) && v->valuestring[0] ? v->valuestring : NULL;
}

static void info_text(lcx_buf *b, const lcx_scope_info *in)
{
    lcx__buf_printf(b,
                   "%s\n  scope_hash: %s\n  sentinel: %s\n  status: %s\n  files: %u\n  chunks: %u\n  symbols: %u\n"
                   "  bytes: %llu\n  skipped: %u binary, %u large, %u unreadable, %u secret, %u other\n",
                   in->scope_path, in->scope_hash, in->sentinel[0] ? in->sentinel : "(none)", in->status, in->files,
                   in->chunks, in->symbols, (unsigned long long)in->bytes, in->skipped_binary, in->skipped_large,
                   in->skipped_unreadable, in->skipped_secret, in->skipped_other);
}

static void hits_text(lcx_buf *b, const lcx_code_result *res, const char *what)
{
    if (!res->n_hits) {
        lcx__buf_printf(b, "No %s found%s%s.\n", what, res->scope.scope_path[0] ? " in " : "",
                       res->scope.scope_path);
        return;
    }
    lcx__buf_printf(b, "Project: %s (%d chunks, confidence %.2f)\n\n", res->scope.scope_path, res->n_hits,
                   res->confidence);
    if (res->splice) lcx__buf_append(b, res->splice, res->splice_len);
}

/* Runs one tool. Returns 0 with the tool's text in *b and *is_error set; LCX_ENOTFOUND for
 * an unknown tool name (a protocol error). */
static int run_tool(lcx_mcp *m, const char *name, const cJSON *args, lcx_buf *b, bool *is_error)
{
    *is_error = false;
    const char *bad = NULL;
    if (!strcmp(name, "search_codebase")) {
        const char *query = get_str(args, "query");
        const char *project = get_str(args, "project"), *cwd = get_str(args, "cwd");
        int max_tokens = get_int(args, "max_tokens", MCP_DEFAULT_TOKENS, 100, MCP_MAX_TOKENS, &bad);
        int k = get_int(args, "max_results", 8, 1, LCX_TOP_K_MAX, &bad);
        if (!query || bad) {
            *is_error = true;
            return lcx__buf_printf(b, "invalid arguments: %s", bad ? bad : "query is required"), 0;
        }
        lcx_code_request rq = lcx_code_request_init();
        rq.query = query;
        rq.query_len = strlen(query);
        rq.top_k = k;
        rq.budget = (size_t)max_tokens * MCP_BYTES_PER_TOKEN;
        if (project) rq.explicit_scope = project;
        else if (cwd) {
            /* the cwd is a mention: detection walks up to the project root */
            rq.prefill = cwd;
            rq.prefill_len = strlen(cwd);
        }
        lcx_code_result res;
        int rc = lcx_code_retrieve(m->scopes, &rq, &res);
        if (rc) {
            *is_error = true;
            lcx__buf_printf(b, "search failed (%s): %s", res.err_code ? res.err_code : "internal",
                           res.err_msg[0] ? res.err_msg : lcx_strerror(rc));
        } else if (!res.n_scopes) {
            *is_error = true;
            lcx__buf_puts(b, "no project found: pass 'project' (a project root) or 'cwd' (a path inside one)");
        } else {
            hits_text(b, &res, "matching code");
        }
        lcx_code_result_free(&res);
        apply_budget(b, max_tokens);
        return 0;
    }
    if (!strcmp(name, "find_related")) {
        const char *file = get_str(args, "file");
        int max_tokens = get_int(args, "max_tokens", MCP_DEFAULT_TOKENS, 100, MCP_MAX_TOKENS, &bad);
        int k = get_int(args, "max_results", 8, 1, LCX_TOP_K_MAX, &bad);
        if (!file || bad) {
            *is_error = true;
            return lcx__buf_printf(b, "invalid arguments: %s", bad ? bad : "file is required"), 0;
        }
        lcx_code_result res;
        int rc = lcx_code_related(m->scopes, file, k, &res);
        if (rc) {
            *is_error = true;
            lcx__buf_printf(b, "find_related failed (%s): %s", res.err_code ? res.err_code : "internal",
                           res.err_msg[0] ? res.err_msg : lcx_strerror(rc));
        } else {
            hits_text(b, &res, "related code");
        }
        lcx_code_result_free(&res);
        apply_budget(b, max_tokens);
        return 0;
    }
    if (!strcmp(name, "list_projects")) {
        lcx_scope_info infos[64];
        int n = lcx_scopes_list(m->scopes, infos, 64);
        if (n <= 0) lcx__buf_puts(b, "No projects loaded. Use add_project or search_codebase with a path.\n");
        for (int i = 0; i < n; i++)
            lcx__buf_printf(b, "%s  (%s, %u files, %u chunks)\n", infos[i].scope_path, infos[i].status,
                           infos[i].files, infos[i].chunks);
        apply_budget(b, MCP_DEFAULT_TOKENS);
        return 0;
    }
    if (!strcmp(name, "index_status")) {
        const char *project = get_str(args, "project");
        if (!project) {
            *is_error = true;
            return lcx__buf_puts(b, "invalid arguments: project is required"), 0;
        }
        lcx_scope_info in;
        int rc = lcx_scopes_info(m->scopes, project, &in);
        if (rc == LCX_ENOTFOUND) {
            lcx__buf_printf(b, "%s is not indexed yet (use add_project).\n", project);
        } else if (rc) {
            *is_error = true;
            lcx__buf_printf(b, "index_status failed: %s", lcx_strerror(rc));
        } else {
            info_text(b, &in);
        }
        apply_budget(b, MCP_DEFAULT_TOKENS);
        return 0;
    }
    if (!strcmp(name, "add_project")) {
        const char *path = get_str(args, "path");
        if (!path) {
            *is_error = true;
            return lcx__buf_puts(b, "invalid arguments: path is required"), 0;
        }
        lcx_scope_info in;
        const char *code = NULL;
        int rc = lcx_scopes_index(m->scopes, path, NULL, NULL, &in, &code);
        if (rc) {
            *is_error = true;
            lcx__buf_printf(b, "cannot index %s (%s): %s", path, code ? code : "internal", lcx_strerror(rc));
        } else {
            lcx__buf_puts(b, "Indexed ");
            info_text(b, &in);
        }
        apply_budget(b, MCP_DEFAULT_TOKENS);
        return 0;
    }
    return LCX_ENOTFOUND;
}

/* ---- JSON-RPC ---------------------------------------------------------------------- */
static char *rpc_error(const cJSON *id, int code, const char *msg)
{
    cJSON *r = cJSON_CreateObject();
    cJSON_AddStringToObject(r, "jsonrpc", "2.0");
    cJSON_AddItemToObject(r, "id", id ? cJSON_Duplicate(id, 1) : cJSON_CreateNull());
    cJSON *e = cJSON_AddObjectToObject(r, "error");
    cJSON_AddNumberToObject(e, "code", code);
    cJSON_AddStringToObject(e, "message", msg);
    char *s = cJSON_PrintUnformatted(r);
    cJSON_Delete(r);
    return s;
}

static char *rpc_result(const cJSON *id, cJSON *result)
{
    cJSON *r = cJSON_CreateObject();
    cJSON_AddStringToObject(r, "jsonrpc", "2.0");
    cJSON_AddItemToObject(r, "id", cJSON_Duplicate(id, 1));
    cJSON_AddItemToObject(r, "result", result);
    char *s = cJSON_PrintUnformatted(r);
    cJSON_Delete(r);
    return s;
}

char *lcx__mcp_handle(lcx_mcp *m, const char *line, size_t len)
{
    cJSON *msg = cJSON_ParseWithLength(line, len);
    if (!msg) return rpc_error(NULL, -32700, "parse error: not valid JSON");
    char *out = NULL;
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(msg, "id");
    const cJSON *method = cJSON_GetObjectItemCaseSensitive(msg, "method");
    const cJSON *params = cJSON_GetObjectItemCaseSensitive(msg, "params");
    bool is_request = id && (cJSON_IsNumber(id) || cJSON_IsString(id));
    if (!cJSON_IsObject(msg) || !cJSON_IsString(method)) {
        /* a response from the client (we send no requests) or garbage */
        if (cJSON_IsObject(msg) && (cJSON_GetObjectItem(msg, "result") || cJSON_GetObjectItem(msg, "error")))
            goto done;
        out = rpc_error(is_request ? id : NULL, -32600, "invalid request");
        goto done;
    }
    const char *meth = method->valuestring;
    if (!is_request) goto done; /* notifications (initialized, cancelled, ...) need no answer */

    if (!strcmp(meth, "initialize")) {
        const cJSON *pv = cJSON_GetObjectItemCaseSensitive(params, "protocolVersion");
        const char *version = known_versions[0];
        for (size_t i = 0; cJSON_IsString(pv) && i < LCX_ARRAY_LEN(known_versions); i++)
            if (!strcmp(pv->valuestring, known_versions[i])) version = known_versions[i];
        cJSON *r = cJSON_CreateObject();
        cJSON_AddStringToObject(r, "protocolVersion", version);
        cJSON *caps = cJSON_AddObjectToObject(r, "capabilities");
        cJSON *tools = cJSON_AddObjectToObject(caps, "tools");
        cJSON_AddBoolToObject(tools, "listChanged", false);
        cJSON *si = cJSON_AddObjectToObject(r, "serverInfo");
        cJSON_AddStringToObject(si, "name", "longctx");
        cJSON_AddStringToObject(si, "version", LCX_VERSION);
        cJSON_AddStringToObject(r, "instructions",
                                "Use search_codebase with an absolute project path (or a cwd inside it) to find "
                                "the code a task needs; add_project indexes a project ahead of time.");
        out = rpc_result(id, r);
    } else if (!strcmp(meth, "ping")) {
        out = rpc_result(id, cJSON_CreateObject());
    } else if (!strcmp(meth, "tools/list")) {
        cJSON *r = cJSON_CreateObject();
        cJSON_AddItemToObject(r, "tools", cJSON_Parse(TOOLS_JSON));
        out = rpc_result(id, r);
    } else if (!strcmp(meth, "tools/call")) {
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(params, "name");
        const cJSON *args = cJSON_GetObjectItemCaseSensitive(params, "arguments");
        if (!cJSON_IsString(name)) {
            out = rpc_error(id, -32602, "invalid params: tools/call needs a tool name");
            goto done;
        }
        if (args && !cJSON_IsObject(args)) {
            out = rpc_error(id, -32602, "invalid params: arguments must be an object");
            goto done;
        }
        lcx_buf b = {0};
        bool is_error;
        int rc = run_tool(m, name->valuestring, args, &b, &is_error);
        if (rc == LCX_ENOTFOUND) {
            char e[256];
            snprintf(e, sizeof e, "unknown tool: %.200s", name->valuestring);
            out = rpc_error(id, -32602, e);
        } else {
            cJSON *r = cJSON_CreateObject();
            cJSON *content = cJSON_AddArrayToObject(r, "content");
            cJSON *part = cJSON_CreateObject();
            cJSON_AddStringToObject(part, "type", "text");
            cJSON_AddStringToObject(part, "text", b.data ? b.data : "");
            cJSON_AddItemToArray(content, part);
            cJSON_AddBoolToObject(r, "isError", is_error);
            out = rpc_result(id, r);
        }
        lcx__buf_free(&b);
    } else {
        char e[256];
        snprintf(e, sizeof e, "method not found: %.200s", meth);
        out = rpc_error(id, -32601, e);
    }
done:
    cJSON_Delete(msg);
    return out;
}

int lcx_mcp_serve(lcx_mcp *m, FILE *in, FILE *out)
{
    lcx_buf line = {.cap = MCP_MAX_LINE};
    bool overflow = false, eof = false;
    char chunk[65536];
    while (!eof) {
        /* read one line in pieces; past the cap the rest of the line is discarded */
        bool eol = false;
        while (!eol) {
            if (!fgets(chunk, sizeof chunk, in)) {
                eof = true;
                break;
            }
            size_t n = strlen(chunk);
            if (n && chunk[n - 1] == '\n') eol = true, n--;
            if (!overflow && lcx__buf_append(&line, chunk, n) == LCX_ELIMIT) overflow = true;
        }
        char *resp = NULL;
        if (overflow) {
            resp = rpc_error(NULL, -32600, "message too large");
        } else if (line.len) {
            size_t n = line.len;
            while (n && (line.data[n - 1] == '\r' || line.data[n - 1] == ' ')) n--;
            if (n) resp = lcx__mcp_handle(m, line.data, n);
        }
        if (resp) {
            fputs(resp, out);
            fputc('\n', out);
            fflush(out);
            free(resp);
        }
        lcx__buf_truncate(&line, 0);
        overflow = false;
    }
    lcx__buf_free(&line);
    return 0;
}

/* ---- Streamable HTTP transport (POST /mcp on longctx-svc) ---------------------------
 * The MCP Streamable HTTP transport over the same lcx__mcp_handle: one JSON-RPC message
 * per POST. A request is answered with application/json, or with a one-event
 * text/event-stream when the client's Accept lists only that; notifications and client
 * responses get 202 and no body. initialize creates a session: its id comes back in
 * Mcp-Session-Id, every later POST must carry it (400 without, 404 unknown or ended), and
 * DELETE /mcp ends it. The server opens no stream of its own, so GET /mcp is 405 (the
 * transport allows that). Origin, when sent, must be a loopback host (DNS rebinding). */
#define MCP_HTTP_SESSIONS 256   /* live ids kept; the oldest is forgotten past this */
#define MCP_SID_LEN 32          /* hex digits of 128 random bits */

static pthread_mutex_t g_sid_mu = PTHREAD_MUTEX_INITIALIZER;
static char g_sid[MCP_HTTP_SESSIONS][MCP_SID_LEN + 1];
static unsigned g_sid_next;

static int sid_new(char out[MCP_SID_LEN + 1])
{
    unsigned char r[MCP_SID_LEN / 2];
    if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r) return LCX_EIO;
    for (size_t i = 0; i < sizeof r; i++) snprintf(out + 2 * i, 3, "%02x", r[i]);
    pthread_mutex_lock(&g_sid_mu);
    memcpy(g_sid[g_sid_next], out, MCP_SID_LEN + 1);
    g_sid_next = (g_sid_next + 1) % MCP_HTTP_SESSIONS;
    pthread_mutex_unlock(&g_sid_mu);
    return 0;
}

/* Slot of a live session id, or -1. g_sid_mu held. */
static int sid_find_locked(const char *id)
{
    if (!id || strlen(id) != MCP_SID_LEN) return -1;
    for (int i = 0; i < MCP_HTTP_SESSIONS; i++)
        if (g_sid[i][0] && !strcmp(g_sid[i], id)) return i;
    return -1;
}

static bool sid_live(const char *id)
{
    pthread_mutex_lock(&g_sid_mu);
    bool ok = sid_find_locked(id) >= 0;
    pthread_mutex_unlock(&g_sid_mu);
    return ok;
}

static bool origin_ok(const lcx_req *req)
{
    const char *o = lcx__req_header(req, "Origin");
    if (!o) return true;   /* not a browser: nothing to rebind */
    const char *h = strstr(o, "://");
    h = h ? h + 3 : o;
    static const char *const loop[] = {"localhost", "127.0.0.1", "[::1]"};
    for (size_t i = 0; i < LCX_ARRAY_LEN(loop); i++) {
        size_t n = strlen(loop[i]);
        if (!strncmp(h, loop[i], n) && (h[n] == 0 || h[n] == ':' || h[n] == '/')) return true;
    }
    return false;
}

/* Checks Origin and the session header; 0 = go on, else the error is set. */
static int check_session(lcx_req *req, lcx_resp *resp)
{
    if (!origin_ok(req)) {
        lcx__resp_error(resp, 403, "forbidden", "Origin %s is not a loopback origin", lcx__req_header(req, "Origin"));
        return -1;
    }
    const char *sid = lcx__req_header(req, "Mcp-Session-Id");
    if (!sid || !*sid) {
        lcx__resp_error(resp, 400, "missing_session_id", "Mcp-Session-Id is required (from the initialize reply)");
        return -1;
    }
    if (!sid_live(sid)) {
        lcx__resp_error(resp, 404, "session_not_found", "unknown or ended MCP session");
        return -1;
    }
    return 0;
}

int lcx__svc_h_mcp_post(lcx_svc *svc, lcx_req *req, lcx_resp *resp)
{
    if (!svc->code) {
        lcx__resp_error(resp, 503, "unavailable", "code retrieval is not loaded");
        return 0;
    }
    const char *accept = lcx__req_header(req, "Accept");
    bool json_ok = accept && (strstr(accept, "application/json") || strstr(accept, "*/*"));
    bool sse_ok = accept && strstr(accept, "text/event-stream");
    if (!json_ok && !sse_ok) {
        lcx__resp_error(resp, 406, "not_acceptable", "Accept must list application/json or text/event-stream");
        return 0;
    }
    size_t len = 0;
    const char *body = lcx__req_body(req, &len);
    cJSON *msg = body && len ? cJSON_ParseWithLength(body, len) : NULL;
    const cJSON *method = cJSON_GetObjectItemCaseSensitive(msg, "method");
    bool init = cJSON_IsString(method) && !strcmp(method->valuestring, "initialize");
    cJSON_Delete(msg);
    char sid[MCP_SID_LEN + 1] = "";
    if (init) {
        if (!origin_ok(req)) {
            lcx__resp_error(resp, 403, "forbidden", "Origin %s is not a loopback origin", lcx__req_header(req, "Origin"));
            return 0;
        }
    } else if (check_session(req, resp) < 0) {
        return 0;
    }
    lcx_mcp m = {.scopes = svc->code};
    char *out = lcx__mcp_handle(&m, body ? body : "", len);
    if (!out) {   /* a notification or a client response */
        lcx__resp_text(resp, 202, "application/json", "", 0);
        return 0;
    }
    if (init) {
        /* only a successful initialize opens a session */
        cJSON *o = cJSON_Parse(out);
        bool ok = o && cJSON_GetObjectItemCaseSensitive(o, "result");
        cJSON_Delete(o);
        if (ok && sid_new(sid) < 0) {
            free(out);
            lcx__resp_error(resp, 500, "internal", "no random bytes for a session id");
            return 0;
        }
        if (ok) lcx__resp_header(resp, "Mcp-Session-Id", sid);
    }
    if (json_ok) {
        lcx__resp_text(resp, 200, "application/json", out, strlen(out));
    } else {
        lcx_buf b = {0};
        if (lcx__buf_printf(&b, "event: message\ndata: %s\n\n", out) < 0) {
            lcx__buf_free(&b);
            free(out);
            lcx__resp_error(resp, 503, "out_of_memory", "out of memory");
            return 0;
        }
        lcx__resp_text(resp, 200, "text/event-stream", b.data, b.len);
        lcx__resp_header(resp, "Cache-Control", "no-cache");
        lcx__buf_free(&b);
    }
    free(out);
    return 0;
}

int lcx__svc_h_mcp_delete(lcx_svc *svc, lcx_req *req, lcx_resp *resp)
{
    (void)svc;
    if (check_session(req, resp) < 0) return 0;
    const char *sid = lcx__req_header(req, "Mcp-Session-Id");
    pthread_mutex_lock(&g_sid_mu);
    int i = sid_find_locked(sid);
    if (i >= 0) g_sid[i][0] = 0;
    pthread_mutex_unlock(&g_sid_mu);
    lcx__resp_json_str(resp, 200, "{\"terminated\":true}");
    return 0;
}
