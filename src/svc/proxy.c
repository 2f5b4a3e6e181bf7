/* The OpenAI-compatible proxy (SPEC §1 Mode A): POST /v1/chat/completions,
 * POST /v1/completions and GET /v1/models are forwarded to the same path on --upstream.
 *
 * Chat requests are enriched first: the query is the last user message, the scope comes
 * from every message's text (lcx_code_retrieve), and the splice goes into the first system
 * message (string content: prefixed; list content: a text part prepended) or into a new
 * system message at index 0. `longctx_top_k` is honoured and removed before forwarding.
 * When the conversation is larger than --compact-tokens, its middle is replaced by what
 * retrieval (or the ordinal Selector) finds relevant (lcx_compact_messages).
 *
 * Streaming without buffering: each forwarded request runs its libcurl transfer on a
 * thread of its own. The handler waits only for the upstream's status line and headers,
 * then answers with a callback response (chunked) whose reader hands over whatever bytes
 * have arrived; when none have, it suspends the connection and the transfer thread
 * resumes it on the next write. So the first upstream chunk reaches the client as soon as
 * it arrives, SSE included, byte for byte. When the client goes away the request's
 * on_done hook flags the transfer and curl's progress callback aborts it (the upstream
 * sees its connection closed). While suspended, the transfer thread resumes the connection
 * every PROXY_HEARTBEAT_MS so that a vanished client is noticed even if the upstream is
 * silent.
 *
 * Errors, all JSON: no upstream → 503 proxy_disabled; cannot connect → 502
 * upstream_unreachable; no answer within --upstream-timeout-s → 504 upstream_timeout;
 * other transport failures before the headers → 502 upstream_error. After the headers
 * have been sent a failure can only end the chunked stream early. */
#include "svc/svc.h"
#include "svc/proxy.h"
#include "longctx/lcx_scope.h"
#include "longctx/lcx_recipes.h"

#include <curl/curl.h>
#include <microhttpd.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#define PROXY_HEARTBEAT_MS 200
#define PROXY_MAX_PENDING (8u << 20)   /* bytes buffered from upstream before curl is paused */

typedef struct {
    CURLM *unused;                     /* reserved */
    char base[2048];                   /* upstream base URL without trailing '/' */
} proxy_state;

/* ---- one forwarded request ------------------------------------------------------- */
typedef struct xfer {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t thread;
    bool thread_started;
    int refs;                          /* handler/reader side + transfer thread */

    CURL *curl;
    struct curl_slist *req_headers;
    char *body;                        /* request body sent upstream (owned) */
    size_t body_len;
    char url[4096];

    /* filled by the transfer thread */
    long status;
    char content_type[256];
    bool headers_done;                 /* status + headers known (first body byte or end) */
    bool done;                         /* transfer finished (ok or not) */
    CURLcode result;
    bool paused;                       /* curl write paused: too much pending data */

    /* bytes from upstream not yet handed to MHD */
    char *pend;
    size_t pend_len, pend_off, pend_cap;

    /* connection side */
    struct MHD_Connection *conn;
    bool suspended;
    bool client_gone;
    bool reader_attached;
} xfer;

static void xfer_unref(xfer *x)
{
    pthread_mutex_lock(&x->mu);
    int left = --x->refs;
    pthread_mutex_unlock(&x->mu);
    if (left) return;
    if (x->curl) curl_easy_cleanup(x->curl);
    curl_slist_free_all(x->req_headers);
    free(x->body);
    free(x->pend);
    pthread_mutex_destroy(&x->mu);
    pthread_cond_destroy(&x->cv);
    free(x);
}

/* Resume a suspended connection (x->mu held). */
static void wake_conn(xfer *x)
{
    if (x->suspended && x->conn) {
        x->suspended = false;
        MHD_resume_connection(x->conn);
    }
}

static size_t on_header(char *p, size_t sz, size_t nm, void *ud)
{
    xfer *x = ud;
    size_t n = sz * nm;
    pthread_mutex_lock(&x->mu);
    if (n >= 5 && !strncmp(p, "HTTP/", 5)) {
        /* a new status line (e.g. after "100 Continue"): reset */
        long st = 0;
        const char *sp = memchr(p, ' ', n);
        if (sp) st = strtol(sp + 1, NULL, 10);
        x->status = st;
        x->content_type[0] = 0;
    } else if (n > 13 && !strncasecmp(p, "content-type:", 13)) {
        const char *v = p + 13;
        size_t vl = n - 13;
        while (vl && (*v == ' ' || *v == '\t')) v++, vl--;
        while (vl && (v[vl - 1] == '\r' || v[vl - 1] == '\n' || v[vl - 1] == ' ')) vl--;
        snprintf(x->content_type, sizeof x->content_type, "%.*s", (int)vl, v);
    } else if (n <= 2 && x->status >= 200) {
        /* blank line ending a final (non-1xx) header block */
        x->headers_done = true;
        pthread_cond_broadcast(&x->cv);
    }
    pthread_mutex_unlock(&x->mu);
    return n;
}

static size_t on_body(char *p, size_t sz, size_t nm, void *ud)
{
    xfer *x = ud;
    size_t n = sz * nm;
    pthread_mutex_lock(&x->mu);
    if (x->client_gone) {
        pthread_mutex_unlock(&x->mu);
        return 0;   /* abort the transfer */
    }
    if (x->pend_len - x->pend_off + n > PROXY_MAX_PENDING) {
        /* The client reads slower than the upstream writes: pause curl until the reader
         * drains (it calls curl_easy_pause from the reader's side via the flag). */
        x->paused = true;
        pthread_mutex_unlock(&x->mu);
        return CURL_WRITEFUNC_PAUSE;
    }
    if (x->pend_off && x->pend_off == x->pend_len) x->pend_off = x->pend_len = 0;
    if (x->pend_len + n > x->pend_cap) {
        size_t cap = x->pend_cap ? x->pend_cap : 16384;
        while (cap < x->pend_len + n) cap *= 2;
        char *q = realloc(x->pend, cap);
        if (!q) {
            pthread_mutex_unlock(&x->mu);
            return 0;
        }
        x->pend = q;
        x->pend_cap = cap;
    }
    memcpy(x->pend + x->pend_len, p, n);
    x->pend_len += n;
    x->headers_done = true;
    pthread_cond_broadcast(&x->cv);
    wake_conn(x);
    pthread_mutex_unlock(&x->mu);
    return n;
}

/* Called by curl about once a second and on every transfer step: aborts when the client is
 * gone, un-pauses when the reader drained, and resumes a suspended connection now and then
 * so MHD notices a closed client socket even while the upstream is silent. */
static int on_progress(void *ud, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
    xfer *x = ud;
    pthread_mutex_lock(&x->mu);
    bool gone = x->client_gone;
    bool unpause = x->paused && x->pend_len - x->pend_off < PROXY_MAX_PENDING / 2;
    if (unpause) x->paused = false;
    if (x->suspended && x->conn && x->reader_attached) wake_conn(x);
    pthread_mutex_unlock(&x->mu);
    if (unpause) curl_easy_pause(x->curl, CURLPAUSE_CONT);
    return gone ? 1 : 0;
}

static void *xfer_main(void *ud)
{
    xfer *x = ud;
    CURLcode rc = curl_easy_perform(x->curl);
    pthread_mutex_lock(&x->mu);
    x->result = rc;
    x->done = true;
    if (rc == CURLE_OK && !x->status) curl_easy_getinfo(x->curl, CURLINFO_RESPONSE_CODE, &x->status);
    pthread_cond_broadcast(&x->cv);
    wake_conn(x);
    pthread_mutex_unlock(&x->mu);
    xfer_unref(x);
    return NULL;
}

static ssize_t reader(void *cls, uint64_t pos, char *buf, size_t max)
{
    xfer *x = cls;
    pthread_mutex_lock(&x->mu);
    size_t avail = x->pend_len - x->pend_off;
    if (avail) {
        size_t n = avail < max ? avail : max;
        memcpy(buf, x->pend + x->pend_off, n);
        x->pend_off += n;
        pthread_mutex_unlock(&x->mu);
        return (ssize_t)n;
    }
    if (x->done) {
        bool ok = x->result == CURLE_OK;
        pthread_mutex_unlock(&x->mu);
        return ok ? MHD_CONTENT_READER_END_OF_STREAM : MHD_CONTENT_READER_END_WITH_ERROR;
    }
    /* Nothing yet: park the connection until the transfer thread has bytes (or its
     * heartbeat). This is the suspend-and-return-0 pattern microhttpd.h prescribes. */
    if (!x->suspended) {
        x->suspended = true;
        MHD_suspend_connection(x->conn);
    }
    pthread_mutex_unlock(&x->mu);
    return 0;
}

static void reader_free(void *cls)
{
    xfer_unref(cls);
}

/* Request finished (completed, client disconnect, timeout): cancel the upstream transfer. */
static void on_done(void *ud)
{
    xfer *x = ud;
    pthread_mutex_lock(&x->mu);
    x->client_gone = !x->done;
    x->conn = NULL;
    x->suspended = false;
    pthread_mutex_unlock(&x->mu);
    xfer_unref(x);
}

/* Copies a request header to the upstream request when present. */
static void fwd_header(xfer *x, lcx_req *req, const char *name)
{
    const char *v = lcx__req_header(req, name);
    if (!v) return;
    char line[8192];
    snprintf(line, sizeof line, "%s: %s", name, v);
    x->req_headers = curl_slist_append(x->req_headers, line);
}

static double upstream_timeout_s(const lcx_svc *svc)
{
    return svc->cfg.upstream_timeout_s > 0 ? svc->cfg.upstream_timeout_s : 600;
}

/* Starts the transfer and answers once the upstream's headers are in. body may be NULL
 * (GET); it is taken over. Extra x-longctx-* headers must already be on resp. */
static int forward(lcx_svc *svc, lcx_req *req, lcx_resp *resp, const char *method, char *body, size_t body_len)
{
    proxy_state *ps = svc->proxy;
    xfer *x = calloc(1, sizeof *x);
    if (!x) {
        free(body);
        return LCX_ENOMEM;
    }
    pthread_mutex_init(&x->mu, NULL);
    pthread_cond_init(&x->cv, NULL);
    x->refs = 1;
    x->body = body;
    x->body_len = body_len;
    x->conn = lcx__req_connection(req);
    snprintf(x->url, sizeof x->url, "%s%s", ps->base, lcx__req_path(req));
    x->curl = curl_easy_init();
    if (!x->curl) {
        xfer_unref(x);
        return LCX_ENOMEM;
    }
    /* only Content-Type and Authorization go upstream (as the reference): cookies,
     * x-session-* and the client's other headers stay here */
    fwd_header(x, req, "Authorization");
    if (body) x->req_headers = curl_slist_append(x->req_headers, "Content-Type: application/json");
    x->req_headers = curl_slist_append(x->req_headers, "Expect:");
    CURL *c = x->curl;
    curl_easy_setopt(c, CURLOPT_URL, x->url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, x->req_headers);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, x);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, x);
    curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(c, CURLOPT_XFERINFODATA, x);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
    /* The timeout bounds time-to-first-byte, not a long stream: abort only when fewer
     * than 1 byte/s flowed for the whole timeout. */
    long to = (long)upstream_timeout_s(svc);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, to < 1 ? 1L : to);
    curl_easy_setopt(c, CURLOPT_TCP_NODELAY, 1L);
    curl_easy_setopt(c, CURLOPT_BUFFERSIZE, 16384L);
    if (!strcmp(method, "POST")) {
        curl_easy_setopt(c, CURLOPT_POST, 1L);
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, x->body ? x->body : "");
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)x->body_len);
    } else {
        curl_easy_setopt(c, CURLOPT_HTTPGET, 1L);
    }

    x->refs = 2; /* handler side + thread */
    if (pthread_create(&x->thread, NULL, xfer_main, x) != 0) {
        x->refs = 1;
        xfer_unref(x);
        return LCX_ENOMEM;
    }
    pthread_detach(x->thread);

    /* Wait for the status line + headers (or failure). The low-speed limit above ends a
     * silent upstream; this deadline is a second guard a little later. */
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += (time_t)upstream_timeout_s(svc) + 5;
    pthread_mutex_lock(&x->mu);
    while (!x->headers_done && !x->done) {
        if (pthread_cond_timedwait(&x->cv, &x->mu, &dl) == ETIMEDOUT) break;
    }
    bool ok = x->headers_done && (!x->done || x->result == CURLE_OK || x->pend_len > 0);
    if (!ok) {
        CURLcode rc = x->done ? x->result : CURLE_OPERATION_TIMEDOUT;
        x->client_gone = true; /* stops the thread if it is still waiting */
        pthread_mutex_unlock(&x->mu);
        if (rc == CURLE_OPERATION_TIMEDOUT)
            lcx__resp_error(resp, 504, "upstream_timeout", "upstream %s did not answer within %.0f s",
                           ps->base, upstream_timeout_s(svc));
        else if (rc == CURLE_COULDNT_CONNECT || rc == CURLE_COULDNT_RESOLVE_HOST)
            lcx__resp_error(resp, 502, "upstream_unreachable", "cannot connect to upstream %s: %s", ps->base,
                           curl_easy_strerror(rc));
        else
            lcx__resp_error(resp, 502, "upstream_error", "upstream %s failed: %s", ps->base, curl_easy_strerror(rc));
        xfer_unref(x);
        return 0;
    }
    long status = x->status ? x->status : 502;
    char ctype[256];
    snprintf(ctype, sizeof ctype, "%s", x->content_type[0] ? x->content_type : "application/json");
    x->reader_attached = true;
    x->refs += 2; /* reader (freed by reader_free) + on_done */
    pthread_mutex_unlock(&x->mu);

    struct MHD_Response *mr = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, reader, x, reader_free);
    if (!mr) {
        pthread_mutex_lock(&x->mu);
        x->client_gone = true;
        x->refs -= 2;
        pthread_mutex_unlock(&x->mu);
        xfer_unref(x);
        return LCX_ENOMEM;
    }
    MHD_add_response_header(mr, "Content-Type", ctype);
    if (!strncasecmp(ctype, "text/event-stream", 17)) MHD_add_response_header(mr, "Cache-Control", "no-cache");
    lcx__req_on_done(req, on_done, x);
    lcx__resp_mhd(resp, (int)status, mr);
    xfer_unref(x); /* the handler's own reference */
    return 0;
}

/* ---- request enrichment (pure functions, see proxy.h) ----------------------------- */

/* Appends the text of a message's content (string, or list of {type:"text", text}) to b. */
static int content_text(const cJSON *content, lcx_buf *b)
{
    if (cJSON_IsString(content)) return lcx__buf_puts(b, content->valuestring);
    if (!cJSON_IsArray(content)) return 0;
    const cJSON *part;
    cJSON_ArrayForEach(part, content)
    {
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(part, "text");
        if (cJSON_IsString(t)) {
            int rc = lcx__buf_puts(b, t->valuestring);
            if (!rc) rc = lcx__buf_puts(b, "\n");
            if (rc) return rc;
        }
    }
    return 0;
}

int lcx__proxy_query_and_prefill(const cJSON *messages, char **query, char **prefill)
{
    *query = *prefill = NULL;
    if (!cJSON_IsArray(messages)) return LCX_EINVAL;
    lcx_buf all = {0}, q = {0};
    const cJSON *m, *last_user = NULL;
    int rc = 0;
    cJSON_ArrayForEach(m, messages)
    {
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(m, "role");
        const cJSON *content = cJSON_GetObjectItemCaseSensitive(m, "content");
        if (cJSON_IsString(role) && !strcmp(role->valuestring, "user")) last_user = content;
        if ((rc = content_text(content, &all)) || (rc = lcx__buf_puts(&all, "\n"))) goto fail;
    }
    if (last_user && (rc = content_text(last_user, &q))) goto fail;
    if (!q.data && (rc = lcx__buf_puts(&q, ""))) goto fail;
    if (!all.data && (rc = lcx__buf_puts(&all, ""))) goto fail;
    *query = lcx__buf_steal(&q, NULL);
    *prefill = lcx__buf_steal(&all, NULL);
    return 0;
fail:
    lcx__buf_free(&all);
    lcx__buf_free(&q);
    return rc;
}

int lcx__proxy_splice_messages(cJSON *messages, const char *splice)
{
    if (!cJSON_IsArray(messages)) return LCX_EINVAL;
    if (!splice || !*splice) return 0;
    cJSON *m;
    cJSON_ArrayForEach(m, messages)
    {
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(m, "role");
        if (!cJSON_IsString(role) || strcmp(role->valuestring, "system")) continue;
        cJSON *content = cJSON_GetObjectItemCaseSensitive(m, "content");
        if (cJSON_IsString(content)) {
            size_t a = strlen(splice), b = strlen(content->valuestring);
            char *s = malloc(a + b + 1);
            if (!s) return LCX_ENOMEM;
            memcpy(s, splice, a);
            memcpy(s + a, content->valuestring, b + 1);
            cJSON *ns = cJSON_CreateString(s);
            free(s);
            if (!ns) return LCX_ENOMEM;
            cJSON_ReplaceItemInObjectCaseSensitive(m, "content", ns);
            return 1;
        }
        if (cJSON_IsArray(content)) {
            cJSON *part = cJSON_CreateObject();
            if (!part || !cJSON_AddStringToObject(part, "type", "text") ||
                !cJSON_AddStringToObject(part, "text", splice)) {
                cJSON_Delete(part);
                return LCX_ENOMEM;
            }
            cJSON_InsertItemInArray(content, 0, part);
            return 1;
        }
        /* null/absent content: the splice becomes the content */
        cJSON *ns = cJSON_CreateString(splice);
        if (!ns) return LCX_ENOMEM;
        if (content) cJSON_ReplaceItemInObjectCaseSensitive(m, "content", ns);
        else cJSON_AddItemToObject(m, "content", ns);
        return 1;
    }
    cJSON *sys = cJSON_CreateObject();
    if (!sys || !cJSON_AddStringToObject(sys, "role", "system") || !cJSON_AddStringToObject(sys, "content", splice)) {
        cJSON_Delete(sys);
        return LCX_ENOMEM;
    }
    cJSON_InsertItemInArray(messages, 0, sys);
    return 1;
}

/* Session id for the proxy: body session_id → x-session-affinity → x-session-id. */
static const char *session_of(lcx_req *req, const cJSON *body, size_t *len, const char **via)
{
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(body, "session_id");
    *via = "body";
    if (cJSON_IsString(s) && s->valuestring[0]) { *len = strlen(s->valuestring); return s->valuestring; }
    *via = "x-session-affinity";
    const char *h = lcx__req_header_n(req, "x-session-affinity", len);
    if (h && *h) return h;
    *via = "x-session-id";
    h = lcx__req_header_n(req, "x-session-id", len);
    return h && *h ? h : NULL;
}

/* Retrieves code for the request (when a scope is found) and adds the x-longctx-*
 * headers. Returns the splice (malloc'd, may be "") or NULL on a 4xx already set. */
static char *enrich(lcx_svc *svc, lcx_req *req, lcx_resp *resp, const char *prefill, const char *query, int top_k,
                    const cJSON *body)
{
    size_t session_len = 0;
    const char *via = NULL;
    const char *session = session_of(req, body, &session_len, &via);
    if (session && !lcx__session_id_ok(session, session_len)) {
        lcx__resp_error(resp, 400, "invalid_session_id", "session id must be " LCX_SVC_SESSION_ID_RULE);
        return NULL;
    }
    if (session) lcx__svc_note_session(svc, session, session_len, via);
    lcx_scopes *scopes = svc->code; /* routes_code.c module; NULL when not loaded */
    char *splice = strdup("");
    if (!splice) return NULL;
    lcx__resp_header(resp, "x-longctx-session", session ? session : "ephemeral");
    if (!scopes || !query || !*query) {
        lcx__resp_header(resp, "x-longctx-scope", "");
        lcx__resp_header(resp, "x-longctx-chunks-used", "0");
        lcx__resp_header(resp, "x-longctx-scope-status", "no-scope");
        return splice;
    }
    lcx_code_request rq = lcx_code_request_init();
    rq.prefill = prefill;
    rq.prefill_len = strlen(prefill);
    rq.query = query;
    rq.query_len = strlen(query);
    rq.top_k = top_k;
    rq.session_id = session;
    lcx_code_result res;
    int rc = lcx_code_retrieve(scopes, &rq, &res);
    char num[32];
    if (rc == 0 && res.n_scopes > 0) {
        lcx__resp_header(resp, "x-longctx-scope", res.scope.scope_path);
        lcx__resp_header(resp, "x-longctx-scope-status", res.status);
        snprintf(num, sizeof num, "%d", res.n_hits);
        lcx__resp_header(resp, "x-longctx-chunks-used", num);
        if (res.retrieved) {   /* the first chunk's score, as /retrieve */
            snprintf(num, sizeof num, "%.3f", res.n_hits ? (double)res.hits[0].score : 0.0);
            lcx__resp_header(resp, "x-longctx-confidence", num);
        }
        if (res.splice && res.splice_len) {
            /* SPEC §2: the splice is a prefix of the system message, separated by a
             * blank line from what the client wrote. */
            char *s = malloc(res.splice_len + 2);
            if (s) {
                memcpy(s, res.splice, res.splice_len);
                s[res.splice_len] = '\n';
                s[res.splice_len + 1] = 0;
                free(splice);
                splice = s;
            }
        }
    } else {
        /* Retrieval trouble never blocks the completion: forward unenriched. */
        lcx__resp_header(resp, "x-longctx-scope", "");
        lcx__resp_header(resp, "x-longctx-chunks-used", "0");
        lcx__resp_header(resp, "x-longctx-scope-status", rc == 0 ? "no-scope" : "error");
    }
    lcx_code_result_free(&res);
    return splice;
}

/* Long-history compaction (--compact-tokens): a conversation larger than the upstream's
 * window keeps its first and recent messages and gets the relevant middle back. */
static int compact(lcx_svc *svc, lcx_resp *resp, cJSON *messages)
{
    if (!svc->cfg.compact_tokens) return 0;
    lcx_compact_opts co = lcx_compact_defaults();
    co.budget_tokens = svc->cfg.compact_tokens;
    co.nn = lcx__svc_nn_queue(svc);
    lcx_compact_report rep;
    int rc = lcx_compact_messages(messages, svc->emb, &co, &rep);
    if (rc == LCX_EINVAL) return 0; /* not a list of messages we understand: forward as is */
    if (rc) return rc;
    if (rep.compacted) {
        char v[112];
        snprintf(v, sizeof v, "%zu->%zu messages%s%s", rep.msgs_before, rep.msgs_after,
                 rep.used_selector ? ", selector" : "", rep.used_rerank ? ", rerank" : "");
        lcx__resp_header(resp, "x-longctx-compacted", v);
    }
    return 0;
}

static bool proxy_enabled(lcx_svc *svc, lcx_resp *resp)
{
    if (svc->proxy) return true;
    lcx__resp_error(resp, 503, "proxy_disabled",
                   "proxy disabled: start longctx-svc with --upstream URL (or LONGCTX_UPSTREAM)");
    return false;
}

/* Reads and removes longctx_top_k (1..LCX_TOP_K_MAX, default 8). Returns -1 after setting a 400. */
static int take_top_k(cJSON *body, lcx_resp *resp)
{
    cJSON *k = cJSON_DetachItemFromObjectCaseSensitive(body, "longctx_top_k");
    if (!k) return 8;
    double v = cJSON_IsNumber(k) ? k->valuedouble : -1;
    cJSON_Delete(k);
    if (v < 1 || v > LCX_TOP_K_MAX || v != (int)v) {
        lcx__resp_error(resp, 400, "bad_top_k", "longctx_top_k must be an integer in " LCX_TOP_K_RANGE);
        return -1;
    }
    return (int)v;
}

/* POSTs the (rewritten) body to the same path on the upstream. */
static int forward_json(lcx_svc *svc, lcx_req *req, lcx_resp *resp, const cJSON *body)
{
    char *out = cJSON_PrintUnformatted(body);
    if (!out) return LCX_ENOMEM;
    return forward(svc, req, resp, "POST", out, strlen(out));
}

int lcx__svc_h_proxy_chat(lcx_svc *svc, lcx_req *req, lcx_resp *resp)
{
    if (!proxy_enabled(svc, resp)) return 0;
    cJSON *body;
    if (lcx__req_json(req, resp, false, &body) < 0) return 0;
    int rc = 0;
    char *query = NULL, *prefill = NULL, *splice = NULL;
    int top_k = take_top_k(body, resp);
    if (top_k < 0) goto out;
    cJSON *messages = cJSON_GetObjectItemCaseSensitive(body, "messages");
    if (!cJSON_IsArray(messages)) {
        lcx__resp_error(resp, 400, "bad_messages", "'messages' must be an array of chat messages");
        goto out;
    }
    if ((rc = lcx__proxy_query_and_prefill(messages, &query, &prefill))) goto out;
    splice = enrich(svc, req, resp, prefill, query, top_k, body);
    if (!splice) {
        rc = LCX_ENOMEM;
        goto out;
    }
    if ((rc = compact(svc, resp, messages))) goto out;
    if ((rc = lcx__proxy_splice_messages(messages, splice)) < 0) goto out;
    rc = forward_json(svc, req, resp, body);
out:
    free(query);
    free(prefill);
    free(splice);
    cJSON_Delete(body);
    return rc;
}

int lcx__svc_h_proxy_completions(lcx_svc *svc, lcx_req *req, lcx_resp *resp)
{
    if (!proxy_enabled(svc, resp)) return 0;
    cJSON *body;
    if (lcx__req_json(req, resp, false, &body) < 0) return 0;
    int rc = 0;
    char *splice = NULL;
    int top_k = take_top_k(body, resp);
    if (top_k < 0) goto out;
    /* Legacy completions have no messages: the prompt is both the scope text and the
     * query, and the splice is prepended to it. Array prompts are forwarded untouched. */
    cJSON *prompt = cJSON_GetObjectItemCaseSensitive(body, "prompt");
    if (cJSON_IsString(prompt)) {
        splice = enrich(svc, req, resp, prompt->valuestring, prompt->valuestring, top_k, body);
        if (!splice) {
            rc = LCX_ENOMEM;
            goto out;
        }
        if (*splice) {
            size_t a = strlen(splice), b = strlen(prompt->valuestring);
            char *s = malloc(a + b + 2);
            if (!s) {
                rc = LCX_ENOMEM;
                goto out;
            }
            memcpy(s, splice, a);
            s[a] = '\n';
            memcpy(s + a + 1, prompt->valuestring, b + 1);
            cJSON_ReplaceItemInObjectCaseSensitive(body, "prompt", cJSON_CreateString(s));
            free(s);
        }
    }
    rc = forward_json(svc, req, resp, body);
out:
    free(splice);
    cJSON_Delete(body);
    return rc;
}

int lcx__svc_h_proxy_models(lcx_svc *svc, lcx_req *req, lcx_resp *resp)
{
    if (!proxy_enabled(svc, resp)) return 0;
    return forward(svc, req, resp, "GET", NULL, 0);
}

/* ---- module hooks ------------------------------------------------------------------ */
int lcx__proxy_init(lcx_svc *svc)
{
    if (!svc->cfg.upstream[0]) return 0;
    const char *u = svc->cfg.upstream;
    if (strncmp(u, "http://", 7) && strncmp(u, "https://", 8)) {
        fprintf(stderr, "longctx-svc: --upstream must be an http:// or https:// URL, got '%s'\n", u);
        return LCX_EINVAL;
    }
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) return LCX_ENOMEM;
    proxy_state *ps = calloc(1, sizeof *ps);
    if (!ps) return LCX_ENOMEM;
    snprintf(ps->base, sizeof ps->base, "%s", u);
    size_t n = strlen(ps->base);
    while (n && ps->base[n - 1] == '/') ps->base[--n] = 0;
    /* Accept both "http://h:p" and "http://h:p/v1" as the upstream. */
    if (n >= 3 && !strcmp(ps->base + n - 3, "/v1")) ps->base[n - 3] = 0;
    svc->proxy = ps;
    return 0;
}

void lcx__proxy_fini(lcx_svc *svc)
{
    free(svc->proxy);
    svc->proxy = NULL;
}
