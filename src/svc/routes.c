/* longctx-svc: THE route table (every route of the service is listed here) and the
 * module table (subsystems that keep state in the server). See svc.h for the handler
 * contract.
 *
 * Matching: exact segments, or "{name}" which matches one non-empty segment and is
 * captured (lcx__req_param(req, "name")). A path that matches some route with another
 * method gives 405 with an Allow header; no match at all gives 404. Paths arrive
 * percent-decoded by libmicrohttpd, so a session id containing '/' cannot be addressed by
 * /sessions/{id}/... (use ids without '/', or the /evict/... routes which take the id in
 * the body or query string). A trailing '/' is ignored ("/healthz/" = "/healthz"). */
#include "svc/svc.h"
#include "svc/proxy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* routes_code.c */
int lcx__svc_h_index(lcx_svc *svc, lcx_req *req, lcx_resp *resp);
int lcx__svc_h_retrieve(lcx_svc *svc, lcx_req *req, lcx_resp *resp);
int lcx__svc_code_init(lcx_svc *svc);
void lcx__svc_code_fini(lcx_svc *svc);
void lcx__svc_code_status(lcx_svc *svc, lcx_buf *text, cJSON *json);
/* mcp.c: MCP Streamable HTTP */
int lcx__svc_h_mcp_post(lcx_svc *svc, lcx_req *req, lcx_resp *resp);
int lcx__svc_h_mcp_delete(lcx_svc *svc, lcx_req *req, lcx_resp *resp);

const lcx_route lcx__svc_routes[] = {
    {"GET", "/healthz", lcx__svc_h_healthz},
    {"GET", "/longctx/status", lcx__svc_h_status},
    {"GET", "/metrics", lcx__svc_h_metrics},           /* Prometheus text (metrics.c) */
    /* the dashboard (ui.c): page and script without the token (static), data behind it */
    {"GET", "/ui", lcx__svc_h_ui},
    {"GET", "/ui/app.js", lcx__svc_h_ui_js},
    {"GET", "/longctx/recent", lcx__svc_h_recent},
    /* rescue API (SPEC §2, Tier 2/3) */
    {"POST", "/evict/write", lcx__svc_h_evict_write},
    {"POST", "/evict/retrieve", lcx__svc_h_evict_retrieve},
    {"GET", "/evict/dump", lcx__svc_h_evict_dump},
    {"POST", "/sessions/{id}/hibernate", lcx__svc_h_session_hibernate},
    {"POST", "/sessions/{id}/resume", lcx__svc_h_session_resume},
    {"GET", "/sessions/{id}/hibernation-status", lcx__svc_h_session_status},
    /* code-aware retrieval (routes_code.c) */
    {"POST", "/index", lcx__svc_h_index},
    {"POST", "/retrieve", lcx__svc_h_retrieve},
    /* MCP over Streamable HTTP (mcp.c), the same tools as `longctx mcp` */
    {"POST", "/mcp", lcx__svc_h_mcp_post},
    {"DELETE", "/mcp", lcx__svc_h_mcp_delete},
    /* OpenAI proxy (proxy.c): 503 proxy_disabled without --upstream */
    {"POST", "/v1/chat/completions", lcx__svc_h_proxy_chat},
    {"POST", "/v1/completions", lcx__svc_h_proxy_completions},
    {"GET", "/v1/models", lcx__svc_h_proxy_models},
    {NULL, NULL, NULL},
};

/* Modules with server-held state (init/fini/status hooks). */
const lcx_svc_module lcx__svc_modules[] = {
    {"proxy", lcx__proxy_init, lcx__proxy_fini, NULL},
    {"code", lcx__svc_code_init, lcx__svc_code_fini, lcx__svc_code_status},
    {"pgstore", lcx__svc_pg_init, lcx__svc_pg_fini, lcx__svc_pg_status},
    {"neural", NULL, NULL, lcx__svc_nn_status},   /* loaded before the sessions: server.c */
    {NULL, NULL, NULL, NULL},
};

/* Matches path against pattern; on success fills p (when non-NULL). */
static bool match(const char *pattern, const char *path, lcx_route_params *p)
{
    const char *a = pattern, *b = path;
    int n = 0;
    const char *names[LCX_ROUTE_MAX_PARAMS];
    size_t nlen[LCX_ROUTE_MAX_PARAMS];
    const char *vals[LCX_ROUTE_MAX_PARAMS];
    size_t vlen[LCX_ROUTE_MAX_PARAMS];
    while (*a && *b) {
        if (*a != '/' || *b != '/') return false;
        a++, b++;
        const char *ae = strchr(a, '/'), *be = strchr(b, '/');
        size_t al = ae ? (size_t)(ae - a) : strlen(a), bl = be ? (size_t)(be - b) : strlen(b);
        if (al >= 2 && a[0] == '{' && a[al - 1] == '}') {
            if (bl == 0 || n >= LCX_ROUTE_MAX_PARAMS) return false;
            names[n] = a + 1, nlen[n] = al - 2, vals[n] = b, vlen[n] = bl, n++;
        } else if (al != bl || memcmp(a, b, al)) {
            return false;
        }
        a += al, b += bl;
    }
    if (*a) return false;
    if (*b && strcmp(b, "/")) return false;   /* tolerate one trailing slash */
    if (p) {
        for (int i = 0; i < n; i++) {
            p->name[i] = names[i];
            p->name_len[i] = nlen[i];
            p->value[i] = strndup(vals[i], vlen[i]);
            if (!p->value[i]) { p->n = i; return false; }
        }
        p->n = n;
    }
    return true;
}

const lcx_route *lcx__route_match(const char *method, const char *path, lcx_route_params *p, bool *path_known,
                                 char *allow, size_t allow_len)
{
    *path_known = false;
    if (allow && allow_len) allow[0] = 0;
    size_t used = 0;
    for (const lcx_route *r = lcx__svc_routes; r->method; r++) {
        if (!match(r->pattern, path, NULL)) continue;
        if (!strcmp(r->method, method)) {
            lcx__route_params_free(p);
            return match(r->pattern, path, p) ? r : NULL;
        }
        *path_known = true;
        if (allow && used < allow_len && !strstr(allow, r->method)) {
            int w = snprintf(allow + used, allow_len - used, "%s%s", used ? ", " : "", r->method);
            if (w > 0) used += (size_t)w;
        }
    }
    return NULL;
}

void lcx__route_params_free(lcx_route_params *p)
{
    if (!p) return;
    for (int i = 0; i < p->n; i++) free(p->value[i]);
    p->n = 0;
}
