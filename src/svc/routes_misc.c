/* longctx-svc: /healthz, /longctx/status and the proxy placeholder. */
#include "svc/svc.h"

#include <stdio.h>
#include <string.h>

int lcx__svc_h_healthz(lcx_svc *svc, lcx_req *req, lcx_resp *resp)
{
    lcx__resp_json_str(resp, 200, "{\"status\":\"ok\",\"version\":\"" LCX_VERSION "\"}");
    return 0;
}

void lcx__svc_note_session(lcx_svc *svc, const char *id, size_t len, const char *via)
{
    if (len > LCX_SESSION_ID_MAX) len = LCX_SESSION_ID_MAX;
    pthread_mutex_lock(&svc->mu);
    memcpy(svc->last_session, id, len);
    svc->last_session[len] = 0;
    svc->last_session_via = via;
    pthread_mutex_unlock(&svc->mu);
}

/* GET /longctx/status: text lines for humans and engines' log scrapers (Accept:
 * text/plain), JSON otherwise. Modules (code scopes, proxy) add their own lines. */
int lcx__svc_h_status(lcx_svc *svc, lcx_req *req, lcx_resp *resp)
{
    uint32_t active = lcx_sessions_active(svc->sessions);
    double mem_mb = (double)lcx_sessions_mem_bytes(svc->sessions) / (1024.0 * 1024.0);
    double rss_mb = (double)lcx__svc_rss_bytes() / (1024.0 * 1024.0);
    double uptime_s = (lcx__now_ms() - svc->started_ms) / 1000.0;
    pthread_mutex_lock(&svc->mu);
    uint32_t known = svc->n_sessions_known;
    uint64_t nreq = svc->n_requests, nerr = svc->n_errors;
    char last[LCX_SESSION_ID_MAX + 1];
    memcpy(last, svc->last_session, sizeof last);
    const char *via = svc->last_session_via;
    pthread_mutex_unlock(&svc->mu);
    /* the reference's storage mode: "local-only" = the embedded store; whether the
     * OpenAI proxy is on is proxy_enabled */
    const char *mode = svc->pg ? "postgresql" : "local-only";

    if (lcx__req_wants_text(req)) {
        lcx_buf t = {0};
        lcx__buf_printf(&t, "[longctx] version: %s\n", LCX_VERSION);
        if (svc->cfg.upstream[0]) lcx__buf_printf(&t, "[longctx] mode: %s (upstream %s)\n", mode, svc->cfg.upstream);
        else lcx__buf_printf(&t, "[longctx] mode: %s (proxy disabled)\n", mode);
        bool any = false;
        for (int i = 0; lcx__svc_modules[i].name; i++)
            if (lcx__svc_modules[i].status) { lcx__svc_modules[i].status(svc, &t, NULL); any = true; }
        if (!any) {   /* no code-retrieval module loaded: the SPEC's lines, empty */
            lcx__buf_puts(&t, "[longctx] scope: none\n");
            lcx__buf_puts(&t, "[longctx] indexed: 0 files, 0 chunks, status none\n");
        }
        if (last[0]) lcx__buf_printf(&t, "[longctx] session: %s (via: %s)\n", last, via);
        lcx__buf_printf(&t, "[longctx] sessions: %u in RAM, %u known (data dir %s)\n", active, known, svc->cfg.data_dir);
        lcx__buf_printf(&t, "[longctx] embedder: %s\n", lcx_embedder_fingerprint(svc->emb));
        lcx__buf_printf(&t, "[longctx] memory: %.1f MB in sessions, %.1f MB RSS (limit %llu MB)\n", mem_mb, rss_mb,
                       (unsigned long long)(svc->cfg.max_mem_bytes >> 20));
        lcx__buf_printf(&t, "[longctx] requests: %llu served, %llu errors, uptime %.0f s\n", (unsigned long long)nreq,
                       (unsigned long long)nerr, uptime_s);
        lcx__buf_printf(&t, "[longctx] connections: %llu open\n",
                       (unsigned long long)__atomic_load_n(&svc->n_connections, __ATOMIC_RELAXED));
        lcx__resp_text(resp, 200, "text/plain; charset=utf-8", t.data ? t.data : "", t.len);
        lcx__buf_free(&t);
        return 0;
    }
    cJSON *j = cJSON_CreateObject();
    if (!j) return LCX_ENOMEM;
    cJSON_AddStringToObject(j, "version", LCX_VERSION);
    cJSON_AddStringToObject(j, "mode", mode);
    cJSON_AddNumberToObject(j, "sessions_active", active);
    cJSON_AddNumberToObject(j, "sessions_known", known);
    /* defaults; the code-retrieval module overwrites these in its status hook */
    cJSON_AddNumberToObject(j, "scopes_loaded", 0);
    cJSON_AddNumberToObject(j, "scopes_total", 0);
    cJSON_AddItemToObject(j, "scopes", cJSON_CreateArray());
    cJSON_AddNumberToObject(j, "memory_mb", (double)(long long)(mem_mb * 10) / 10);
    cJSON_AddNumberToObject(j, "rss_mb", (double)(long long)(rss_mb * 10) / 10);
    cJSON_AddNumberToObject(j, "uptime_s", (double)(long long)uptime_s);
    cJSON_AddNumberToObject(j, "requests", (double)nreq);
    cJSON_AddNumberToObject(j, "errors", (double)nerr);
    /* includes the connection asking */
    cJSON_AddNumberToObject(j, "open_connections", (double)__atomic_load_n(&svc->n_connections, __ATOMIC_RELAXED));
    cJSON_AddStringToObject(j, "embedder_fingerprint", lcx_embedder_fingerprint(svc->emb));
    cJSON_AddBoolToObject(j, "proxy_enabled", svc->cfg.upstream[0] != 0);
    if (last[0]) {
        cJSON_AddStringToObject(j, "last_session_id", last);
        cJSON_AddStringToObject(j, "last_session_via", via);
    } else {
        cJSON_AddNullToObject(j, "last_session_id");
        cJSON_AddNullToObject(j, "last_session_via");
    }
    for (int i = 0; lcx__svc_modules[i].name; i++)
        if (lcx__svc_modules[i].status) lcx__svc_modules[i].status(svc, NULL, j);
    char *s = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    if (!s) return LCX_ENOMEM;
    lcx__resp_json_str(resp, 200, s);
    cJSON_free(s);
    return 0;
}
