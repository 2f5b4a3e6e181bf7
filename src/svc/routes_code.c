/* longctx-svc: code-aware retrieval routes (SPEC §2) and the "code" module.
 *
 *   POST /index?scope=PATH      (or JSON body {"scope": PATH})
 *     → {"scope_path","scope_hash","files","chunks","status", "symbols", "bytes",
 *        "skipped":{"binary","large","unreadable","secret","other"}, "build_ms"}
 *   POST /retrieve?scope=PATH&query=TEXT&top_k=K
 *     → text/plain: the SPEC §2 splice ("## Retrieved code context…"), "" when nothing
 *   POST /retrieve  JSON {"session_id"?, "prefill_text"?, "query", "top_k": 8 (1..LCX_TOP_K_MAX),
 *                         "explicit_scope"?, "default_scope"?}
 *     → {"chunks":[{"text","file_path","start_line","end_line","file_type","score"}],
 *        "scope_path","scope_hash","scope_status","scope_sentinel","session_id",
 *        "used_rerank","used_neural","paraphrases_count","confidence","system_message"}
 *   Both /retrieve forms set, on every 200, x-longctx-session (the id, "ephemeral" without
 *   one), x-longctx-scope (the root, "" when none, "ws:"; percent-encoded outside printable
 *   ASCII), x-longctx-chunks-used, x-longctx-scope-status (ready | empty | indexing | promoting | error |
 *   no-scope) and, when a search ran, x-longctx-confidence (first chunk's score, 3 decimals).
 *   Header x-longctx-async: 1|true|yes builds an unloaded scope in the background.
 * Session id: body session_id → header x-session-affinity → x-session-id; none →
 * session_id null (never bound). Scope resolution: docs/scope.md; differences from the
 * reference service: docs/compat.md.
 * Errors (4xx JSON): schema errors in well-formed JSON 422 (missing_field, invalid_type,
 * out_of_range); malformed JSON, an empty query, bad_scope (not a directory) 400, not_found 404, forbidden (secrets, /proc,
 * /sys, /dev, "/") 403, unreadable 403.
 *
 * The module's state is an lcx_scopes (include/longctx/lcx_scope.h) in svc->code; the
 * proxy and the MCP server call lcx_code_retrieve(svc->code, …) directly. */
#include "svc/svc.h"
#include "longctx/lcx_scope.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <dirent.h>
#include <limits.h>
#include <sys/stat.h>

int lcx__svc_h_index(lcx_svc *svc, lcx_req *req, lcx_resp *resp);
int lcx__svc_h_retrieve(lcx_svc *svc, lcx_req *req, lcx_resp *resp);
int lcx__svc_code_init(lcx_svc *svc);
void lcx__svc_code_fini(lcx_svc *svc);
void lcx__svc_code_status(lcx_svc *svc, lcx_buf *text, cJSON *json);

#define MAX_QUERY_BYTES (64u << 10)

int lcx__svc_code_init(lcx_svc *svc)
{
    lcx_scopes_opts o = lcx_scopes_defaults();
    o.data_dir = svc->cfg.data_dir;
    o.store.nn = lcx__svc_nn_queue(svc);
    const char *w = getenv("LONGCTX_WATCH");
    if (w && (!strcmp(w, "0") || !strcmp(w, "false") || !strcmp(w, "off"))) o.watch = false;
    lcx_scopes *m;
    int rc = lcx_scopes_open(&o, svc->emb, &m);
    if (rc < 0) {
        fprintf(stderr, "longctx-svc: code scopes: %s\n", lcx_strerror(rc));
        return rc;
    }
    svc->code = m;
    return 0;
}

void lcx__svc_code_fini(lcx_svc *svc)
{
    lcx_scopes_close(svc->code);
    svc->code = NULL;
}

/* Bytes of the regular files under dir (depth-limited; symlinks not followed). */
static uint64_t dir_bytes(const char *dir, int depth)
{
    DIR *d = opendir(dir);
    if (!d) return 0;
    uint64_t t = 0;
    struct dirent *e;
    char p[PATH_MAX];
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        if (snprintf(p, sizeof p, "%s/%s", dir, e->d_name) >= (int)sizeof p) continue;
        struct stat st;
        if (lstat(p, &st) != 0) continue;
        if (S_ISREG(st.st_mode)) t += (uint64_t)st.st_size;
        else if (S_ISDIR(st.st_mode) && depth > 0) t += dir_bytes(p, depth - 1);
    }
    closedir(d);
    return t;
}

/* The persisted scope cache: DATA_DIR/scopes/<hash>/ per scope (loaded or not). */
static void disk_cache(lcx_svc *svc, char *dir, size_t cap, uint32_t *n, double *mb)
{
    *n = 0;
    *mb = 0;
    if (snprintf(dir, cap, "%s/scopes", svc->cfg.data_dir) >= (int)cap) return;
    uint64_t bytes = 0;
    DIR *d = opendir(dir);
    if (d) {
        struct dirent *e;
        char p[PATH_MAX];
        while ((e = readdir(d))) {
            if (e->d_name[0] == '.') continue;
            if (snprintf(p, sizeof p, "%s/%s", dir, e->d_name) >= (int)sizeof p) continue;
            struct stat st;
            if (lstat(p, &st) != 0 || !S_ISDIR(st.st_mode)) continue;
            (*n)++;
            bytes += dir_bytes(p, 4);
        }
        closedir(d);
    }
    *mb = (double)(long long)((double)bytes / (1024.0 * 1024.0) * 10) / 10;
}

void lcx__svc_code_status(lcx_svc *svc, lcx_buf *text, cJSON *json)
{
    lcx_scopes *m = svc->code;
    if (!m) return;
    char dir[PATH_MAX];
    uint32_t n_disk;
    double disk_mb;
    disk_cache(svc, dir, sizeof dir, &n_disk, &disk_mb);
    if (text) {
        char *t = NULL;
        if (lcx_scopes_status_text(m, &t) >= 0 && t) lcx__buf_puts(text, t);
        free(t);
        lcx__buf_printf(text, "[longctx] scopes: %u loaded, %.1f MB\n", lcx_scopes_loaded(m),
                       (double)lcx_scopes_mem_bytes(m) / (1024.0 * 1024.0));
        lcx__buf_printf(text, "[longctx] disk cache: %s, %u scopes, %.1f MB\n", dir, n_disk, disk_mb);
        return;
    }
    char *arr = NULL;
    if (lcx_scopes_status_json(m, &arr) >= 0 && arr) {
        cJSON *a = cJSON_Parse(arr);
        if (a) {
            cJSON *tot = cJSON_CreateNumber(cJSON_GetArraySize(a));
            if (tot) cJSON_ReplaceItemInObjectCaseSensitive(json, "scopes_total", tot);
            cJSON_ReplaceItemInObjectCaseSensitive(json, "scopes", a);
        }
    }
    free(arr);
    cJSON *dc = cJSON_AddObjectToObject(json, "disk_cache");
    if (dc) {
        cJSON_AddStringToObject(dc, "dir", dir);
        cJSON_AddNumberToObject(dc, "scopes", n_disk);
        cJSON_AddNumberToObject(dc, "mb", disk_mb);
    }
    cJSON *n = cJSON_CreateNumber(lcx_scopes_loaded(m));
    if (n) cJSON_ReplaceItemInObjectCaseSensitive(json, "scopes_loaded", n);
    cJSON_AddNumberToObject(json, "scopes_memory_mb",
                            (double)(long long)((double)lcx_scopes_mem_bytes(m) / (1024.0 * 1024.0) * 10) / 10);
}

static int err_status(const char *code)
{
    if (!code) return 500;
    if (!strcmp(code, "bad_request") || !strcmp(code, "bad_scope")) return 400;
    if (!strcmp(code, "not_found")) return 404;
    if (!strcmp(code, "forbidden") || !strcmp(code, "unreadable")) return 403;
    if (!strcmp(code, "scope_busy")) return 409;
    const char *c;
    if (!strcmp(code, "insufficient_storage")) return lcx__svc_err_status(LCX_ENOSPC, &c);
    return 500;
}

static const char *ft_name(lcx_file_type t)
{
    switch (t) {
    case LCX_FT_CODE: return "code";
    case LCX_FT_PROSE: return "prose";
    case LCX_FT_CONFIG: return "config";
    default: return "none";
    }
}

/* Header-safe copy: bytes outside printable ASCII (and '%') percent-encoded. */
static void header_safe(const char *s, char *out, size_t cap)
{
    size_t k = 0;
    for (; *s && k + 4 < cap; s++) {
        unsigned char c = (unsigned char)*s;
        if (c < 0x20 || c > 0x7e || c == '%') k += (size_t)snprintf(out + k, cap - k, "%%%02X", c);
        else out[k++] = (char)c;
    }
    out[k] = 0;
}

/* Headers on every 200 of /retrieve (the reference's set): x-longctx-confidence only
 * when a search ran. */
static void set_headers(lcx_resp *resp, const lcx_code_result *r, const char *session)
{
    char v[LCX_SCOPE_PATH_MAX * 3 + 8];
    header_safe(session ? session : "ephemeral", v, sizeof v);
    lcx__resp_header(resp, "x-longctx-session", v);
    header_safe(r->scope.scope_path, v, sizeof v);
    lcx__resp_header(resp, "x-longctx-scope", v);
    snprintf(v, sizeof v, "%d", r->n_hits);
    lcx__resp_header(resp, "x-longctx-chunks-used", v);
    lcx__resp_header(resp, "x-longctx-scope-status", r->status);
    if (r->retrieved) {
        snprintf(v, sizeof v, "%.3f", r->n_hits ? (double)r->hits[0].score : 0.0);
        lcx__resp_header(resp, "x-longctx-confidence", v);
    }
}

static bool truthy(const char *h)
{
    return h && (!strcasecmp(h, "1") || !strcasecmp(h, "true") || !strcasecmp(h, "yes"));
}

int lcx__svc_h_index(lcx_svc *svc, lcx_req *req, lcx_resp *resp)
{
    lcx_scopes *m = svc->code;
    if (!m) { lcx__resp_error(resp, 503, "unavailable", "code scopes are not initialised"); return 0; }
    const char *scope = lcx__req_query(req, "scope");
    cJSON *body = NULL;
    if (!scope) {
        if (lcx__req_json(req, resp, true, &body) < 0) return 0;
        const cJSON *s = cJSON_GetObjectItemCaseSensitive(body, "scope");
        if (!s) s = cJSON_GetObjectItemCaseSensitive(body, "scope_path");
        if (s && !cJSON_IsString(s)) {
            cJSON_Delete(body);
            lcx__resp_error(resp, LCX_SVC_SCHEMA_STATUS, "invalid_type", "'scope' must be a string");
            return 0;
        }
        scope = s ? s->valuestring : NULL;
    }
    if (!scope || !*scope) {
        cJSON_Delete(body);
        lcx__resp_error(resp, 400, "bad_request", "missing scope: POST /index?scope=/absolute/project/path");
        return 0;
    }
    lcx_scope_info inf;
    const char *why = NULL;
    if (svc->pg) lcx__svc_pg_scope_fetch(svc, scope);
    int rc = lcx_scopes_index(m, scope, NULL, NULL, &inf, &why);
    if (svc->pg && rc >= 0 && inf.files_read_last > 0) lcx__svc_pg_scope_publish(svc, inf.scope_path, inf.scope_hash);
    if (rc < 0) {
        int st = err_status(why);
        lcx__resp_error(resp, st, why ? why : "internal", "cannot index %s: %s", scope,
                       why && !strcmp(why, "forbidden") ? "secrets and system directories are never indexed"
                                                        : lcx_strerror(rc));
        cJSON_Delete(body);
        return 0;
    }
    cJSON_Delete(body);
    lcx_buf *b = lcx__resp_json_buf(resp, 200);
    lcx__buf_puts(b, "{\"scope_path\":");
    lcx__buf_json_str(b, inf.scope_path, strlen(inf.scope_path));
    lcx__buf_printf(b, ",\"scope_hash\":\"%s\",\"scope_sentinel\":\"%s\",\"files\":%u,\"chunks\":%u,\"status\":\"%s\","
                      "\"symbols\":%u,\"bytes\":%llu,\"files_read\":%u,\"truncated\":%s,"
                      "\"skipped\":{\"binary\":%u,\"large\":%u,\"unreadable\":%u,\"secret\":%u,\"other\":%u},"
                      "\"build_ms\":",
                   inf.scope_hash, inf.sentinel, inf.files, inf.chunks, inf.status, inf.symbols,
                   (unsigned long long)inf.bytes, inf.files_read_last, inf.truncated ? "true" : "false",
                   inf.skipped_binary, inf.skipped_large, inf.skipped_unreadable, inf.skipped_secret,
                   inf.skipped_other);
    lcx__buf_json_num(b, (double)(long long)(inf.build_ms * 1000) / 1000);
    lcx__buf_puts(b, "}");
    return 0;
}

/* strict base-10 integer */
static bool parse_int(const char *s, long *v)
{
    if (!s || !*s) return false;
    char *e;
    long x = strtol(s, &e, 10);
    if (*e) return false;
    *v = x;
    return true;
}

int lcx__svc_h_retrieve(lcx_svc *svc, lcx_req *req, lcx_resp *resp)
{
    lcx_scopes *m = svc->code;
    if (!m) { lcx__resp_error(resp, 503, "unavailable", "code scopes are not initialised"); return 0; }
    lcx_code_request rq = lcx_code_request_init();
    const char *qs_query = lcx__req_query(req, "query");
    const char *qs_scope = lcx__req_query(req, "scope");
    bool text_form = qs_query || qs_scope;
    cJSON *body = NULL;
    char session[300];
    session[0] = 0;
    if (text_form) {
        if (!qs_query || !*qs_query) { lcx__resp_error(resp, 400, "bad_request", "missing query"); return 0; }
        if (!qs_scope || !*qs_scope) { lcx__resp_error(resp, 400, "bad_request", "missing scope"); return 0; }
        const char *tk = lcx__req_query(req, "top_k");
        long k = 8;
        if (tk && (!parse_int(tk, &k) || k < 1 || k > LCX_TOP_K_MAX)) {
            lcx__resp_error(resp, 400, "bad_request", "top_k must be an integer in " LCX_TOP_K_RANGE);
            return 0;
        }
        rq.top_k = (int)k;
        rq.query = qs_query;
        rq.query_len = strlen(qs_query);
        rq.explicit_scope = qs_scope;
    } else {
        if (lcx__req_json(req, resp, false, &body) < 0) return 0;
        /* schema errors in well-formed JSON answer 422 (the reference's status for them) */
        const cJSON *q = cJSON_GetObjectItemCaseSensitive(body, "query");
        if (!q || cJSON_IsNull(q)) {
            lcx__resp_error(resp, LCX_SVC_SCHEMA_STATUS, "missing_field", "'query' is required");
            goto out;
        }
        static const char *const strs[] = {"query", "prefill_text", "explicit_scope", "default_scope", "session_id"};
        for (size_t i = 0; i < sizeof strs / sizeof *strs; i++) {
            const cJSON *x = cJSON_GetObjectItemCaseSensitive(body, strs[i]);
            if (x && !cJSON_IsNull(x) && !cJSON_IsString(x)) {
                lcx__resp_error(resp, LCX_SVC_SCHEMA_STATUS, "invalid_type", "'%s' must be a string", strs[i]);
                goto out;
            }
        }
        if (!q->valuestring[0]) {
            lcx__resp_error(resp, 400, "bad_request", "missing query");
            goto out;
        }
        const cJSON *tk = cJSON_GetObjectItemCaseSensitive(body, "top_k");
        if (tk && !cJSON_IsNull(tk)) {
            if (!cJSON_IsNumber(tk) || !isfinite(tk->valuedouble) || tk->valuedouble != floor(tk->valuedouble)) {
                lcx__resp_error(resp, LCX_SVC_SCHEMA_STATUS, "invalid_type", "top_k must be an integer in " LCX_TOP_K_RANGE);
                goto out;
            }
            if (tk->valuedouble < 1 || tk->valuedouble > LCX_TOP_K_MAX) {
                lcx__resp_error(resp, LCX_SVC_SCHEMA_STATUS, "out_of_range", "top_k must be an integer in " LCX_TOP_K_RANGE);
                goto out;
            }
            rq.top_k = (int)tk->valuedouble;
        }
        rq.query = q->valuestring;
        rq.query_len = strlen(q->valuestring);
        const cJSON *x = cJSON_GetObjectItemCaseSensitive(body, "prefill_text");
        if (cJSON_IsString(x)) { rq.prefill = x->valuestring; rq.prefill_len = strlen(x->valuestring); }
        x = cJSON_GetObjectItemCaseSensitive(body, "explicit_scope");
        if (cJSON_IsString(x) && x->valuestring[0]) rq.explicit_scope = x->valuestring;
        x = cJSON_GetObjectItemCaseSensitive(body, "default_scope");
        if (cJSON_IsString(x) && x->valuestring[0]) rq.default_scope = x->valuestring;
        x = cJSON_GetObjectItemCaseSensitive(body, "session_id");
        if (cJSON_IsString(x) && x->valuestring[0]) snprintf(session, sizeof session, "%s", x->valuestring);
    }
    if (rq.query_len > MAX_QUERY_BYTES) {
        lcx__resp_error(resp, 400, "bad_request", "query longer than %u bytes", MAX_QUERY_BYTES);
        goto out;
    }
    size_t session_len = strlen(session);
    const char *via = "body";
    if (!session[0]) {
        via = "x-session-affinity";
        const char *h = lcx__req_header_n(req, "x-session-affinity", &session_len);
        if (!h || !*h) { via = "x-session-id"; h = lcx__req_header_n(req, "x-session-id", &session_len); }
        if (h && *h) {
            size_t c = LCX_MIN(session_len, sizeof session - 1);
            memcpy(session, h, c);
            session[c] = 0;
        } else {
            session_len = 0;
        }
    }
    bool ephemeral = !session[0];
    /* session_len is what the client sent (a header may hold more than its C string). */
    if (!ephemeral && !lcx__session_id_ok(session, LCX_MIN(session_len, sizeof session))) {
        lcx__resp_error(resp, 400, "bad_request", "invalid session id");
        goto out;
    }
    if (!ephemeral) {
        rq.session_id = session;
        lcx__svc_note_session(svc, session, strlen(session), via);
    }
    rq.async = truthy(lcx__req_header(req, "x-longctx-async"));
    lcx_code_result res;
    int rc = lcx_code_retrieve(m, &rq, &res);
    if (rc < 0) {
        lcx__resp_error(resp, err_status(res.err_code), res.err_code ? res.err_code : "internal", "%s",
                       res.err_msg[0] ? res.err_msg : lcx_strerror(rc));
        lcx_code_result_free(&res);
        goto out;
    }
    set_headers(resp, &res, ephemeral ? NULL : session);
    lcx__svc_recent_code(svc, ephemeral ? NULL : session, rq.query, rq.query_len, &res);
    if (text_form) {
        lcx__resp_text(resp, 200, "text/plain; charset=utf-8", res.splice, res.splice_len);
        lcx_code_result_free(&res);
        goto out;
    }
    lcx_buf *b = lcx__resp_json_buf(resp, 200);
    lcx__buf_puts(b, "{\"chunks\":[");
    for (int i = 0; i < res.n_hits; i++) {
        const lcx_code_hit *h = &res.hits[i];
        lcx__buf_puts(b, i ? ",{\"text\":" : "{\"text\":");
        lcx__buf_json_str(b, h->text, strlen(h->text));
        lcx__buf_puts(b, ",\"file_path\":");
        lcx__buf_json_str(b, h->file_path, strlen(h->file_path));
        lcx__buf_printf(b, ",\"start_line\":%u,\"end_line\":%u,\"file_type\":\"%s\",\"score\":", h->start_line,
                       h->end_line, ft_name(h->file_type));
        lcx__buf_json_f32(b, h->score);
        lcx__buf_printf(b, ",\"symbol_hit\":%s}", h->symbol_hit ? "true" : "false");
    }
    /* the reference's fields: scope_path "ws:" for workspace replies, null with no scope;
     * scope_hash null for both; scope_sentinel the sentinel file, "explicit", "cluster" or
     * "workspace". scope_tier, scopes_searched, confidence, system_message are ours. */
    bool named = res.scope.scope_path[0] != 0;
    lcx__buf_puts(b, "],\"scope_path\":");
    if (named) lcx__buf_json_str(b, res.scope.scope_path, strlen(res.scope.scope_path));
    else lcx__buf_puts(b, "null");
    if (named && !res.workspace) lcx__buf_printf(b, ",\"scope_hash\":\"%s\"", res.scope.scope_hash);
    else lcx__buf_puts(b, ",\"scope_hash\":null");
    lcx__buf_printf(b, ",\"scope_status\":\"%s\",\"scope_sentinel\":", res.status);
    if (named) lcx__buf_json_str(b, res.scope.sentinel, strlen(res.scope.sentinel));
    else lcx__buf_puts(b, "null");
    lcx__buf_puts(b, ",\"session_id\":");
    if (ephemeral) lcx__buf_puts(b, "null");
    else lcx__buf_json_str(b, session, strlen(session));
    lcx__buf_printf(b, ",\"used_rerank\":%s,\"used_neural\":%s,\"paraphrases_count\":%d,\"scope_tier\":\"%s\",\"scopes_searched\":%d,\"confidence\":",
                   res.retrieved && res.used_rerank ? "true" : "false", res.used_neural ? "true" : "false",
                   res.retrieved ? res.paraphrases_count : 0,
                   res.scope.status[0] ? res.scope.status : "none", res.retrieved ? res.n_scopes : 0);
    lcx__buf_json_num(b, (double)(long long)(res.confidence * 1000 + 0.5) / 1000);
    lcx__buf_puts(b, ",\"system_message\":");
    lcx__buf_json_str(b, res.splice, res.splice_len);
    lcx__buf_puts(b, "}");
    lcx_code_result_free(&res);
out:
    cJSON_Delete(body);
    return 0;
}
