/* longctx-svc: libmicrohttpd glue — request accumulation with a hard body cap, routing,
 * response helpers, the janitor thread, and start/stop.
 *
 * Threading: one MHD daemon in MHD_USE_POLL_INTERNAL_THREAD mode with a thread pool of
 * cfg.threads workers. Each worker runs its own poll loop and calls handlers inline, so
 * a slow handler (fsync on /evict/write) only delays the connections of its own worker;
 * --threads sizes that trade-off. MHD_ALLOW_SUSPEND_RESUME is on for streamed responses.
 * Not epoll: libmicrohttpd 0.9.75's edge-triggered epoll loop marks a socket "drained"
 * after any short read, so a client whose last bytes and FIN arrive in one wake-up (an
 * aborted upload, a half-close after a keep-alive reply) is never read again and holds
 * its connection slot until the timeout. poll() is level-triggered and sees the FIN.
 *
 * Hostile HTTP (docs/svc.md "Hostile HTTP"): every reply is one JSON response.
 *   - URI checks run in the URI log callback, before libmicrohttpd parses the query
 *     string: more than MAX_QUERY_PARAMS parameters → 414, a %00 anywhere → 400.
 *   - Transfer-Encoding other than chunked → 501 before any body is read.
 *   - Errors libmicrohttpd produces itself (malformed request line or headers, bad
 *     Content-Length, bad chunked framing, header too large, HTTP version) get their
 *     HTML body replaced by the JSON error (see mhd_error_json below).
 *   - Timeouts: --idle-timeout-s while a connection waits for a request (keep-alive,
 *     request line and headers), --body-timeout-s once a body is announced and until
 *     it has arrived.
 *
 * Body cap: the body is accumulated into an lcx_buf capped at max_body_bytes. When the
 * client announces a Content-Length far beyond the cap (more than 16 MiB over) the 413 is
 * queued at once and MHD closes the connection without reading the body; otherwise the
 * excess is read and discarded and the 413 is sent after the upload, which lets ordinary
 * clients (that do not read a response before finishing their upload) see the JSON error
 * instead of a connection reset. */
#define _GNU_SOURCE   /* memmem, RTLD_NEXT */
#include "svc/svc.h"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <dirent.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define RESP_MAX_HEADERS 32
#define RESP_JSON_CAP (256u << 20)
/* Content-Length this far over the cap is refused before reading (see header comment). */
#define EARLY_REJECT_SLACK (16u << 20)
/* Largest body buffer allocated up front from Content-Length (bigger bodies grow). */
#define PREALLOC_MAX (16u << 20)
/* Query-string parameters one request may carry; no route reads more than four. More
 * gets 414 before libmicrohttpd stores them: each costs it ~48 bytes of the connection's
 * memory pool, and an exhausted pool made it drop the connection without a reply. */
#define MAX_QUERY_PARAMS 64
/* Per-connection memory pool of libmicrohttpd (MHD_OPTION_CONNECTION_MEMORY_LIMIT): holds
 * the read buffer for the request line and headers (half of it to start with), the
 * parsed headers and the reply head. 64 KiB: 32 KiB request heads fit with room for the
 * reply; larger heads get 414/431 (JSON). */
#define CONN_POOL_BYTES (64u << 10)

/* Request heads the service accepts: no route needs more, and a head near the pool's size
 * leaves libmicrohttpd no memory for the reply head (it then closes without a reply).
 * Larger → 431/414, written directly (direct_reply). */
#define MAX_HEADERS 100
#define MAX_HEAD_BYTES (16 << 10)

enum early_error { EARLY_NONE, EARLY_TOO_MANY_PARAMS, EARLY_NUL_IN_URL, EARLY_HEAD_TOO_LARGE };
enum limited { LIMIT_NONE, LIMIT_RATE, LIMIT_CONNS };

/* Per connection (libmicrohttpd's socket context): the client's limits entry and its
 * address as text (access log). */
struct conn_ctx {
    struct lcx_svc_client *cl;      /* NULL: not tracked */
    bool over;                      /* opened beyond --client-max-connections */
    char addr[INET6_ADDRSTRLEN];
};

struct lcx_req {
    lcx_svc *svc;
    bool started;        /* on_access has seen the request head (method, path set) */
    double t0_ms;        /* lcx__now_ms() when the head arrived (latency metric) */
    enum early_error early;  /* found before any body is read: answered at once, directly */
    size_t uri_len;          /* bytes of the raw URI (counts toward MAX_HEAD_BYTES) */
    struct MHD_Connection *conn;
    char method[16];
    char *path;
    lcx_route_params params;
    lcx_buf body;
    bool too_big;        /* body exceeded the cap: excess discarded, 413 at the end */
    bool busy;           /* all connections together buffer too much: discarded, 429 at the end */
    uint64_t counted;    /* bytes this request added to svc->body_inflight */
    bool responded;      /* a response was queued early */
    const char *bad_coding;  /* Transfer-Encoding value that is not "chunked" (→ 501) */
    enum limited limited;    /* refused by a per-client limit: body discarded, 429 at the end */
    double retry_s;          /* LIMIT_RATE: seconds until the client has a token again */
    const char *client;      /* client address (the connection's), "" when unknown */
    char rid[72];            /* request id: the client's X-Request-Id when sane, else ours */
    void (*done_fn)(void *);
    void *done_ud;
};

struct lcx_resp {
    int status;
    lcx_buf buf;                 /* body */
    char content_type[64];
    int n_headers;
    char *hname[RESP_MAX_HEADERS], *hvalue[RESP_MAX_HEADERS];
    struct MHD_Response *mhd;    /* streaming escape hatch */
    bool set;
    bool buf_static;             /* body is REPLY_OOM (resp_check) */
};

/* ------------------------------------------------------------------ request accessors */

const char *lcx__req_method(const lcx_req *r) { return r->method; }
const char *lcx__req_path(const lcx_req *r) { return r->path; }
struct MHD_Connection *lcx__req_connection(const lcx_req *r) { return r->conn; }

const char *lcx__req_param(const lcx_req *r, const char *name)
{
    size_t nl = strlen(name);
    for (int i = 0; i < r->params.n; i++)
        if (r->params.name_len[i] == nl && !memcmp(r->params.name[i], name, nl)) return r->params.value[i];
    return NULL;
}

const char *lcx__req_query(const lcx_req *r, const char *name)
{
    return MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, name);
}

/* A query argument or header with its length (it may hold a decoded %00). */
static const char *lookup_n(const lcx_req *r, enum MHD_ValueKind kind, const char *name, size_t *len)
{
    const char *v = NULL;
    size_t n = 0;
    if (MHD_lookup_connection_value_n(r->conn, kind, name, strlen(name), &v, &n) != MHD_YES || !v) return NULL;
    if (len) *len = n;
    return v;
}

const char *lcx__req_query_n(const lcx_req *r, const char *name, size_t *len)
{
    return lookup_n(r, MHD_GET_ARGUMENT_KIND, name, len);
}

const char *lcx__req_header(const lcx_req *r, const char *name)
{
    return MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, name);
}

const char *lcx__req_header_n(const lcx_req *r, const char *name, size_t *len)
{
    return lookup_n(r, MHD_HEADER_KIND, name, len);
}

/* Offset of the first \u0000 escape inside a JSON string of b[0..n), or -1. cJSON
 * decodes it to a NUL byte and hands out C strings, so everything after it would be
 * silently dropped (a session id "victim\u0000x" would name "victim"). */
static long json_nul_escape(const char *b, size_t n)
{
    bool in = false;
    for (size_t i = 0; i < n; i++) {
        char c = b[i];
        if (!in) { in = c == '"'; continue; }
        if (c == '"') { in = false; continue; }
        if (c != '\\' || i + 1 >= n) continue;
        if (b[i + 1] == 'u' && i + 5 < n && !memcmp(b + i + 2, "0000", 4)) return (long)i;
        i++;   /* skip the escaped character (\\, \", \u's 'u') */
    }
    return -1;
}

const char *lcx__req_body(const lcx_req *r, size_t *len)
{
    if (len) *len = r->body.len;
    return r->body.data ? r->body.data : "";
}

bool lcx__req_wants_text(const lcx_req *r)
{
    const char *a = lcx__req_header(r, "Accept");
    if (a && strstr(a, "text/plain")) return true;
    const char *f = lcx__req_query(r, "format");
    return f && !strcmp(f, "text");
}

void lcx__req_on_done(lcx_req *r, void (*fn)(void *ud), void *ud)
{
    r->done_fn = fn;
    r->done_ud = ud;
}

int lcx__req_json(const lcx_req *r, lcx_resp *resp, bool allow_empty, cJSON **out)
{
    *out = NULL;
    size_t n;
    const char *b = lcx__req_body(r, &n);
    size_t i = 0;
    while (i < n && (b[i] == ' ' || b[i] == '\t' || b[i] == '\r' || b[i] == '\n')) i++;
    if (i == n) {
        if (allow_empty) {
            *out = cJSON_CreateObject();
            if (!*out) { lcx__resp_error(resp, 500, "internal", "out of memory"); return LCX_ENOMEM; }
            return 0;
        }
        lcx__resp_error(resp, 400, "empty_body", "request body must be a JSON object");
        return LCX_EINVAL;
    }
    /* Reject non-UTF-8 before parsing: cJSON passes raw bytes through into strings. */
    if (!lcx__utf8_valid(b, n)) {
        lcx__resp_error(resp, 400, "invalid_utf8", "request body is not valid UTF-8");
        return LCX_EINVAL;
    }
    /* A raw NUL is never valid JSON, and cJSON would silently cut a string at it. */
    if (memchr(b, 0, n)) {
        lcx__resp_error(resp, 400, "bad_json", "NUL byte in the request body");
        return LCX_EINVAL;
    }
    long nul = json_nul_escape(b, n);
    if (nul >= 0) {
        lcx__resp_error(resp, 400, "nul_in_string",
                       "a JSON string contains \\u0000 (byte %ld); NUL characters are not accepted in any field", nul);
        return LCX_EINVAL;
    }
    const char *end = NULL;
    cJSON *j = cJSON_ParseWithLengthOpts(b, n, &end, 0);
    if (!j) {
        size_t at = end && end >= b && end <= b + n ? (size_t)(end - b) : 0;
        lcx__resp_error(resp, 400, "bad_json", "malformed JSON near byte %zu", at);
        return LCX_EINVAL;
    }
    for (size_t k = (size_t)(end - b); k < n; k++) {
        if (b[k] == ' ' || b[k] == '\t' || b[k] == '\r' || b[k] == '\n' || b[k] == 0) continue;
        cJSON_Delete(j);
        lcx__resp_error(resp, 400, "bad_json", "trailing data after the JSON value at byte %zu", k);
        return LCX_EINVAL;
    }
    if (!cJSON_IsObject(j)) {
        cJSON_Delete(j);
        lcx__resp_error(resp, 400, "not_object", "request body must be a JSON object");
        return LCX_EINVAL;
    }
    *out = j;
    return 0;
}

/* ------------------------------------------------------------------ response helpers */

static void resp_reset_body(lcx_resp *r)
{
    lcx__buf_truncate(&r->buf, 0);
    r->buf_static = false;
    if (r->mhd) { MHD_destroy_response(r->mhd); r->mhd = NULL; }
}

lcx_buf *lcx__resp_json_buf(lcx_resp *r, int status)
{
    resp_reset_body(r);
    r->status = status;
    r->buf.cap = RESP_JSON_CAP;
    snprintf(r->content_type, sizeof r->content_type, "application/json");
    r->set = true;
    return &r->buf;
}

void lcx__resp_json_str(lcx_resp *r, int status, const char *json)
{
    lcx_buf *b = lcx__resp_json_buf(r, status);
    if (lcx__buf_puts(b, json) < 0) lcx__resp_error(r, 500, "internal", "out of memory");
}

void lcx__resp_text(lcx_resp *r, int status, const char *ct, const char *text, size_t len)
{
    resp_reset_body(r);
    r->status = status;
    r->buf.cap = 0;
    snprintf(r->content_type, sizeof r->content_type, "%s", ct ? ct : "text/plain; charset=utf-8");
    r->set = true;
    if (lcx__buf_append(&r->buf, text, len) < 0) lcx__resp_error(r, 500, "internal", "out of memory");
}

void lcx__resp_error(lcx_resp *r, int status, const char *code, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    resp_reset_body(r);
    r->status = status;
    r->buf.cap = 0;
    snprintf(r->content_type, sizeof r->content_type, "application/json");
    r->set = true;
    lcx__buf_puts(&r->buf, "{\"error\":{\"code\":");
    lcx__buf_json_str(&r->buf, code, strlen(code));
    lcx__buf_puts(&r->buf, ",\"message\":");
    lcx__buf_json_str(&r->buf, msg, strlen(msg));
    lcx__buf_puts(&r->buf, "}}");
}

void lcx__resp_header(lcx_resp *r, const char *name, const char *value)
{
    if (r->n_headers >= RESP_MAX_HEADERS) return;
    char *n = strdup(name), *v = strdup(value);
    if (!n || !v) { free(n); free(v); return; }
    r->hname[r->n_headers] = n;
    r->hvalue[r->n_headers] = v;
    r->n_headers++;
}

void lcx__resp_mhd(lcx_resp *r, int status, struct MHD_Response *mr)
{
    resp_reset_body(r);
    r->status = status;
    r->mhd = mr;
    r->set = mr != NULL;
}

static void resp_free(lcx_resp *r)
{
    lcx__buf_free(&r->buf);
    for (int i = 0; i < r->n_headers; i++) { free(r->hname[i]); free(r->hvalue[i]); }
    if (r->mhd) MHD_destroy_response(r->mhd);
}

/* Handlers write JSON in many pieces and may ignore each piece's return code (lcx_buf
 * errors are sticky, util.h): a body with a failed write is never sent (it would be a 200
 * with broken JSON); the client gets a JSON error instead. The error reply fits the
 * buffer's existing allocation; when even that fails, a static body goes out. */
static const char REPLY_OOM[] = "{\"error\":{\"code\":\"out_of_memory\",\"message\":\"out of memory\"}}";

static void resp_check(lcx_resp *r)
{
    if (r->mhd || !r->buf.err) return;
    if (r->buf.err == LCX_ENOMEM) lcx__resp_error(r, 503, "out_of_memory", "out of memory while writing the reply");
    else lcx__resp_error(r, 500, "internal", "reply not written: %s", lcx_strerror(r->buf.err));
    if (r->buf.err) {
        lcx__buf_free(&r->buf);
        r->status = 503;
        r->buf_static = true;
    }
}

static enum MHD_Result resp_send(struct MHD_Connection *c, lcx_resp *r)
{
    struct MHD_Response *mr = r->mhd;
    r->mhd = NULL;
    if (!mr && r->buf_static) {
        mr = MHD_create_response_from_buffer(sizeof REPLY_OOM - 1, (void *)REPLY_OOM, MHD_RESPMEM_PERSISTENT);
        if (!mr) return MHD_NO;
        MHD_add_response_header(mr, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
    } else if (!mr) {
        size_t len;
        char *data = lcx__buf_steal(&r->buf, &len);
        if (!data) { data = strdup(""); len = 0; }
        if (!data) return MHD_NO;
        mr = MHD_create_response_from_buffer(len, data, MHD_RESPMEM_MUST_FREE);
        if (!mr) { free(data); return MHD_NO; }
        MHD_add_response_header(mr, MHD_HTTP_HEADER_CONTENT_TYPE, r->content_type);
    }
    for (int i = 0; i < r->n_headers; i++) MHD_add_response_header(mr, r->hname[i], r->hvalue[i]);
    enum MHD_Result ok = MHD_queue_response(c, (unsigned)r->status, mr);
    MHD_destroy_response(mr);
    return ok;
}

/* ------------------------------------------------------------------ dispatch */

/* Writes a whole JSON error reply (with Connection: close) straight to the socket; the
 * caller then makes libmicrohttpd close the connection. Used where the library's own
 * reply path could fail or misbehave: its error pages (see MHD_queue_response below) and
 * refusals of request heads so big that the connection's pool may have no room left
 * for a reply head. The socket is fresh or idle between requests (the library reads no
 * request before the previous reply is out), so a few hundred bytes fit its send buffer. */
static void direct_reply(int fd, unsigned status, const char *json, size_t jl)
{
    const char *reason = MHD_get_reason_phrase_for(status);
    char head[256];
    int hl = snprintf(head, sizeof head,
                      "HTTP/1.1 %u %s\r\nConnection: close\r\nContent-Type: application/json\r\n"
                      "Content-Length: %zu\r\n\r\n", status, reason && *reason ? reason : "Error", jl);
    struct iovec iov[2] = {{head, (size_t)hl}, {(void *)json, jl}};
    struct msghdr mh = {.msg_iov = iov, .msg_iovlen = 2};
    ssize_t w = sendmsg(fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w != hl + (ssize_t)jl) lcx__svc_logf(NULL, "warn", "http: error reply cut short (%zd bytes)", w);
}

struct head_size { int n; size_t bytes; };
static enum MHD_Result head_iter(void *cls, enum MHD_ValueKind kind, const char *k, size_t kl, const char *v, size_t vl)
{
    struct head_size *h = cls;
    h->n++;
    h->bytes += kl + vl + 4;
    return MHD_YES;
}

static void count(lcx_svc *svc, int status)
{
    pthread_mutex_lock(&svc->mu);
    svc->n_requests++;
    if (status >= 400) svc->n_errors++;
    pthread_mutex_unlock(&svc->mu);
}

/* The code of a {"error":{"code":"…"}} body (every error reply of the service). */
static void error_code_of(const lcx_resp *r, char *out, size_t cap)
{
    static const char pre[] = "{\"error\":{\"code\":\"";
    out[0] = 0;
    if (r->status < 400 || r->mhd || !r->buf.data || r->buf.len < sizeof pre || memcmp(r->buf.data, pre, sizeof pre - 1))
        return;
    const char *c = r->buf.data + sizeof pre - 1, *e = memchr(c, '"', r->buf.len - (sizeof pre - 1));
    if (e && (size_t)(e - c) < cap) { memcpy(out, c, (size_t)(e - c)); out[e - c] = 0; }
}

static void access_log(lcx_svc *svc, const lcx_req *req, const lcx_resp *resp, int route, double ms)
{
    char code[64];
    error_code_of(resp, code, sizeof code);
    if (!code[0] && resp->buf_static) snprintf(code, sizeof code, "out_of_memory");
    lcx_svc_access a = {
        .method = req->method, .route = route >= 0 ? lcx__svc_routes[route].pattern : "other",
        .client = req->client ? req->client : "", .request_id = req->rid, .error_code = code,
        .status = resp->status, .ms = ms,
        .bytes = resp->mhd ? -1 : resp->buf_static ? (long long)(sizeof REPLY_OOM - 1) : (long long)resp->buf.len,
        .req_bytes = req->body.len ? req->body.len : req->counted,
    };
    lcx__svc_log_access(svc->log, &a);
}

/* A client's X-Request-Id is kept when it is 1..64 characters of [A-Za-z0-9._:-] (it is
 * echoed in a header and written to the log); otherwise the service makes one. */
static void set_request_id(lcx_svc *svc, lcx_req *req)
{
    size_t n = 0;
    const char *h = lookup_n(req, MHD_HEADER_KIND, "X-Request-Id", &n);
    bool ok = h && n >= 1 && n <= 64;
    for (size_t i = 0; ok && i < n; i++) {
        char c = h[i];
        ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
             c == ':' || c == '-';
    }
    if (ok) {
        memcpy(req->rid, h, n);
        req->rid[n] = 0;
    } else {
        unsigned long long v = __atomic_add_fetch(&svc->req_seq, 1, __ATOMIC_RELAXED);
        snprintf(req->rid, sizeof req->rid, "%016llx", v);
    }
}

static struct conn_ctx *conn_ctx_of(struct MHD_Connection *conn)
{
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci ? (struct conn_ctx *)ci->socket_context : NULL;
}

/* Per-client limits at the request head; /healthz is exempt (probes must not be throttled
 * into restarts, and it reveals nothing). */
static void check_limits(lcx_svc *svc, lcx_req *req)
{
    struct conn_ctx *cc = conn_ctx_of(req->conn);
    req->client = cc ? cc->addr : "";
    if (!cc || !cc->cl || !strcmp(req->path, "/healthz") || !strcmp(req->path, "/healthz/")) return;
    if (cc->over) {
        req->limited = LIMIT_CONNS;
    } else {
        double w = lcx__svc_client_take(svc->limits, cc->cl);
        if (w > 0) req->limited = LIMIT_RATE, req->retry_s = w;
    }
}

static enum MHD_Result dispatch(lcx_svc *svc, lcx_req *req)
{
    lcx_resp resp;
    memset(&resp, 0, sizeof resp);
    int route = -1;
    /* The request has been received (or is refused): back to the keep-alive timeout. */
    MHD_set_connection_option(req->conn, MHD_CONNECTION_OPTION_TIMEOUT, (unsigned)svc->cfg.idle_timeout_s);
    if (req->early == EARLY_TOO_MANY_PARAMS) {
        lcx__resp_error(&resp, 414, "too_many_parameters", "more than %d query-string parameters", MAX_QUERY_PARAMS);
    } else if (req->early == EARLY_NUL_IN_URL) {
        lcx__resp_error(&resp, 400, "nul_in_url", "the URL contains %%00; NUL characters are not accepted");
    } else if (req->early == EARLY_HEAD_TOO_LARGE) {
        lcx__resp_error(&resp, req->uri_len > MAX_HEAD_BYTES ? 414 : 431, "request_head_too_large",
                       "request head over the limits (%d headers, %d bytes of request line and headers)",
                       MAX_HEADERS, MAX_HEAD_BYTES);
    } else if (req->bad_coding) {
        lcx__resp_error(&resp, 501, "unsupported_transfer_encoding",
                       "Transfer-Encoding '%s' is not supported (only chunked; send the body as it is)", req->bad_coding);
    } else if (req->limited) {
        lcx__svc_limited_reply(&resp, req->limited == LIMIT_CONNS, req->retry_s, &svc->cfg);
    } else if (req->busy) {
        lcx__resp_error(&resp, 429, "server_busy",
                       "the server is buffering too many request bodies (--max-inflight-body-mb); retry shortly");
        lcx__resp_header(&resp, "Retry-After", "1");
    } else if (req->too_big) {
        lcx__resp_error(&resp, 413, "payload_too_large", "request body exceeds the limit of %llu bytes (--max-body-bytes)",
                       (unsigned long long)svc->cfg.max_body_bytes);
    } else {
        bool known = false;
        char allow[128] = "";
        const lcx_route *rt = NULL;
        if (!lcx__svc_auth_ok(svc, req, &resp)) {
            /* 401 set; checked before routing so that unknown paths say nothing either */
        } else if (!(rt = lcx__route_match(req->method, req->path, &req->params, &known, allow, sizeof allow))) {
            if (known) {
                lcx__resp_error(&resp, 405, "method_not_allowed", "method %s is not allowed on %s", req->method, req->path);
                lcx__resp_header(&resp, "Allow", allow);
            } else {
                lcx__resp_error(&resp, 404, "not_found", "no route for %s %s", req->method, req->path);
            }
        } else {
            route = (int)(rt - lcx__svc_routes);
            int rc = rt->fn(svc, req, &resp);
            if (!resp.set)
                lcx__resp_error(&resp, 500, "internal", "handler failed: %s", lcx_strerror(rc < 0 ? rc : LCX_ESTATE));
        }
    }
    resp_check(&resp);
    count(svc, resp.status);
    double ms = lcx__now_ms() - req->t0_ms;
    lcx__svc_metrics_request(svc, route, resp.status, ms);
    if (req->rid[0]) lcx__resp_header(&resp, "X-Request-Id", req->rid);
    if (lcx__svc_log_json(svc->log)) access_log(svc, req, &resp, route, ms);
    if (__atomic_load_n(&svc->draining, __ATOMIC_RELAXED)) lcx__resp_header(&resp, "Connection", "close");
    if (req->early != EARLY_NONE) {   /* see direct_reply */
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(req->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        if (ci) {
            if (resp.buf_static) direct_reply(ci->connect_fd, (unsigned)resp.status, REPLY_OOM, sizeof REPLY_OOM - 1);
            else direct_reply(ci->connect_fd, (unsigned)resp.status, resp.buf.data ? resp.buf.data : "", resp.buf.len);
            resp_free(&resp);
            return MHD_NO;   /* the library closes the connection */
        }
    }
    enum MHD_Result ok = resp_send(req->conn, &resp);
    resp_free(&resp);
    return ok;
}

static enum MHD_Result on_access(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                                 const char *version, const char *upload_data, size_t *upload_data_size,
                                 void **con_cls)
{
    lcx_svc *svc = cls;
    lcx_req *req = *con_cls;
    if (!req || !req->started) {
        if (!req) {   /* the URI log callback could not allocate */
            req = calloc(1, sizeof *req);
            if (!req) return MHD_NO;
            req->svc = svc;
            req->conn = conn;
            *con_cls = req;
        }
        req->started = true;
        req->t0_ms = lcx__now_ms();
        __atomic_add_fetch(&svc->n_inflight, 1, __ATOMIC_RELAXED);
        snprintf(req->method, sizeof req->method, "%s", method);
        req->path = strdup(url ? url : "/");
        if (!req->path) return MHD_NO;   /* on_completed frees req */
        req->body.cap = (size_t)svc->cfg.max_body_bytes;
        set_request_id(svc, req);
        check_limits(svc, req);
        const char *te = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_TRANSFER_ENCODING);
        if (te && strcasecmp(te, "chunked")) req->bad_coding = te;
        struct head_size hs = {0, req->uri_len};
        MHD_get_connection_values_n(conn, MHD_HEADER_KIND, head_iter, &hs);
        if (req->early == EARLY_NONE && (hs.n > MAX_HEADERS || hs.bytes > MAX_HEAD_BYTES)) req->early = EARLY_HEAD_TOO_LARGE;
        if (req->early != EARLY_NONE || req->bad_coding) {
            /* Answered before any body is read; libmicrohttpd then closes the connection
             * (an unread body cannot be skipped reliably). */
            req->responded = true;
            return dispatch(svc, req);
        }
        const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        /* A body is coming: a client that stops sending it loses the connection after
         * --body-timeout-s instead of holding a slot for the keep-alive timeout. */
        if (te || (cl && strcmp(cl, "0")))
            MHD_set_connection_option(conn, MHD_CONNECTION_OPTION_TIMEOUT, (unsigned)svc->cfg.body_timeout_s);
        if (cl) {
            char *e;
            errno = 0;
            unsigned long long n = strtoull(cl, &e, 10);
            if (errno || *e || n > svc->cfg.max_body_bytes) req->too_big = true;
            if (req->too_big && (errno || n - svc->cfg.max_body_bytes > EARLY_REJECT_SLACK)) {
                req->responded = true;
                return dispatch(svc, req);   /* MHD closes the connection without reading the body */
            }
            /* Size the body buffer once from Content-Length (a 256-span write is ~430 KB:
             * otherwise ~11 doublings, each copying what arrived so far). Only address
             * space is reserved: pages are touched as bytes arrive, and those bytes are
             * what --max-inflight-body-mb counts, so a client that announces a big body
             * and sends nothing pins no memory. Capped so a lie costs little. */
            if (!req->too_big && n > 0) {
                size_t want = (size_t)LCX_MIN(n, (unsigned long long)PREALLOC_MAX) + 1;
                req->body.data = malloc(want);
                if (req->body.data) {
                    req->body.data[0] = 0;
                    req->body.alloc = want;
                }
            }
        }
        return MHD_YES;
    }
    if (req->responded) { *upload_data_size = 0; return MHD_YES; }
    if (*upload_data_size) {
        size_t n = *upload_data_size;
        *upload_data_size = 0;
        if (req->too_big || req->busy || req->limited) return MHD_YES;   /* discarding */
        /* Global cap: every connection may buffer up to max_body_bytes, so without this a
         * few hundred slow uploads could pin max_connections × 64 MiB. */
        uint64_t now = __atomic_add_fetch(&svc->body_inflight, n, __ATOMIC_RELAXED);
        req->counted += n;
        if (now > svc->cfg.max_inflight_body_bytes) {
            req->busy = true;
        } else if (lcx__buf_append(&req->body, upload_data, n) < 0) {
            req->too_big = true;         /* over the cap (or OOM): drop what we have */
        }
        if (req->busy || req->too_big) {
            lcx__buf_free(&req->body);
            __atomic_sub_fetch(&svc->body_inflight, req->counted, __ATOMIC_RELAXED);
            req->counted = 0;
        }
        return MHD_YES;
    }
    req->responded = true;
    return dispatch(svc, req);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls, enum MHD_RequestTerminationCode toe)
{
    lcx_req *req = *con_cls;
    if (!req) return;
    if (req->done_fn) req->done_fn(req->done_ud);
    if (req->started) __atomic_sub_fetch(&req->svc->n_inflight, 1, __ATOMIC_RELAXED);
    if (req->counted) __atomic_sub_fetch(&req->svc->body_inflight, req->counted, __ATOMIC_RELAXED);
    lcx__route_params_free(&req->params);
    lcx__buf_free(&req->body);
    free(req->path);
    free(req);
    *con_cls = NULL;
}

/* Runs when libmicrohttpd has split the request line, before it parses the query string
 * or any header; what it returns becomes the request's *con_cls. The URI is still raw
 * (not percent-decoded). */
static void *on_uri(void *cls, const char *uri, struct MHD_Connection *conn)
{
    lcx_svc *svc = cls;
    lcx_req *req = calloc(1, sizeof *req);
    if (!req) return NULL;
    req->svc = svc;
    req->conn = conn;
    if (!uri) return req;
    req->uri_len = strlen(uri);
    const char *q = strchr(uri, '?');
    if (q) {
        int n = 1;
        for (const char *p = q + 1; *p; p++) n += *p == '&';
        if (n > MAX_QUERY_PARAMS) {
            req->early = EARLY_TOO_MANY_PARAMS;
            /* libmicrohttpd parses the query string from the byte after '?' once this
             * callback returns, in its own buffer (the request line it just split):
             * ending the string there leaves it nothing to store, so the pool cannot
             * run out and the 414 above is sent. The request never reaches a handler. */
            ((char *)q)[1] = 0;
            return req;
        }
    }
    for (const char *p = strchr(uri, '%'); p; p = strchr(p + 1, '%'))
        if (p[1] == '0' && p[2] == '0') { req->early = EARLY_NUL_IN_URL; break; }
    return req;
}

static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                          enum MHD_ConnectionNotificationCode toe)
{
    lcx_svc *svc = cls;
    if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
        __atomic_add_fetch(&svc->n_connections, 1, __ATOMIC_RELAXED);
        struct conn_ctx *cc = calloc(1, sizeof *cc);   /* NULL: served unlimited, logged without address */
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
        if (cc && ci && ci->client_addr) {
            const struct sockaddr *sa = ci->client_addr;
            if (sa->sa_family == AF_INET)
                inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, cc->addr, sizeof cc->addr);
            else if (sa->sa_family == AF_INET6)
                inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, cc->addr, sizeof cc->addr);
            cc->cl = lcx__svc_client_open(svc->limits, sa, &cc->over);
        }
        *socket_context = cc;
    } else {
        __atomic_sub_fetch(&svc->n_connections, 1, __ATOMIC_RELAXED);
        struct conn_ctx *cc = *socket_context;
        if (cc) lcx__svc_client_close(svc->limits, cc->cl);
        free(cc);
        *socket_context = NULL;
    }
}

/* ------------------------------------------------------------------ libmicrohttpd's own errors
 *
 * libmicrohttpd answers some malformed requests itself (bad request line or header line,
 * missing Host on HTTP/1.1, bad or overflowing Content-Length, malformed chunked body,
 * request head larger than the pool, unsupported HTTP version) with a fixed HTML page and
 * offers no option to replace it; for Content-Length errors 0.9.75 also writes the status
 * line and headers twice (its reply state machine runs again after the error). It builds
 * every such reply with MHD_create_response_from_buffer(len, page, PERSISTENT) and
 * MHD_queue_response, both called through its PLT, so the definitions below (in this
 * executable) are the ones it calls:
 *   - a buffer that is one of its HTML pages yields a response carrying the JSON error
 *     {"error":{"code","message"}} (message = the page's text) in MARK_HEADER;
 *   - queueing such a response writes the whole reply (status line, Connection: close,
 *     JSON body) to the socket in one send and returns MHD_NO, on which the library
 *     closes the connection without writing anything of its own.
 * Every other call goes straight to the library's function. A first request line without
 * any space (not HTTP at all) is the one case the library drops without building a reply. */
#define MARK_HEADER "X-Longctx-Mhd-Error"

static void *real_fn(void **slot, const char *name)
{
    void *f = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
    if (!f) {
        f = dlsym(RTLD_NEXT, name);
        __atomic_store_n(slot, f, __ATOMIC_RELEASE);
    }
    return f;
}

/* Page title → error code. */
static const char *mhd_error_code(const char *title)
{
    static const char *const map[][2] = {
        {"Request too big", "request_head_too_large"},
        {"Request content too large", "payload_too_large"},
        {"Request malformed", "bad_request"},
        {"\"Host:\" header required", "missing_host"},
        {"Requested HTTP version is not supported", "http_version_not_supported"},
        {"Internal server error", "internal"},
    };
    for (size_t i = 0; i < LCX_ARRAY_LEN(map); i++)
        if (!strcmp(title, map[i][0])) return map[i][1];
    return "bad_request";
}

/* Text of an HTML fragment: tags dropped, &quot; &amp; &lt; &gt; decoded. */
static size_t html_text(const char *h, size_t n, char *out, size_t cap)
{
    static const char *const ent[][2] = {{"&quot;", "\""}, {"&amp;", "&"}, {"&lt;", "<"}, {"&gt;", ">"}};
    size_t o = 0;
    for (size_t i = 0; i < n && o + 1 < cap; i++) {
        if (h[i] == '<') {
            const char *e = memchr(h + i, '>', n - i);
            if (!e) break;
            i = (size_t)(e - h);
            continue;
        }
        bool done = false;
        for (size_t k = 0; h[i] == '&' && k < LCX_ARRAY_LEN(ent) && !done; k++) {
            size_t l = strlen(ent[k][0]);
            if (i + l <= n && !memcmp(h + i, ent[k][0], l)) { out[o++] = ent[k][1][0]; i += l - 1; done = true; }
        }
        if (!done) out[o++] = h[i];
    }
    out[o] = 0;
    return o;
}

typedef struct MHD_Response *(*mhd_from_buffer_fn)(size_t, void *, enum MHD_ResponseMemoryMode);
typedef enum MHD_Result (*mhd_queue_fn)(struct MHD_Connection *, unsigned int, struct MHD_Response *);

struct MHD_Response *MHD_create_response_from_buffer(size_t size, void *buffer, enum MHD_ResponseMemoryMode mode)
{
    static void *slot;
    mhd_from_buffer_fn real = (mhd_from_buffer_fn)real_fn(&slot, "MHD_create_response_from_buffer");
    if (!real) return NULL;
    static const char head[] = "<html><head><title>";
    const char *h = buffer;
    if (mode != MHD_RESPMEM_PERSISTENT || !h || size < sizeof head || size > 4096 || memcmp(h, head, sizeof head - 1))
        return real(size, buffer, mode);
    const char *t = h + sizeof head - 1, *te = memchr(t, '<', size - (size_t)(t - h));
    const char *body = memmem(h, size, "<body>", 6), *be = memmem(h, size, "</body>", 7);
    if (!te || !body || !be || be < body) return real(size, buffer, mode);
    char title[256], msg[1024];
    html_text(t, (size_t)(te - t), title, sizeof title);
    size_t ml = html_text(body + 6, (size_t)(be - body - 6), msg, sizeof msg);
    lcx_buf j = {0};
    const char *code = mhd_error_code(title);
    lcx__buf_puts(&j, "{\"error\":{\"code\":");
    lcx__buf_json_str(&j, code, strlen(code));
    lcx__buf_puts(&j, ",\"message\":");
    lcx__buf_json_str(&j, msg, ml);
    struct MHD_Response *r = NULL;
    if (lcx__buf_puts(&j, "}}") == 0) {
        r = real(j.len, j.data, MHD_RESPMEM_MUST_COPY);
        /* JSON escapes every control character, so it is a valid header value. */
        if (r && MHD_add_response_header(r, MARK_HEADER, j.data) != MHD_YES) {
            MHD_destroy_response(r);
            r = NULL;
        }
    }
    lcx__buf_free(&j);
    return r ? r : real(size, buffer, mode);
}

enum MHD_Result MHD_queue_response(struct MHD_Connection *c, unsigned int status, struct MHD_Response *r)
{
    static void *slot;
    mhd_queue_fn real = (mhd_queue_fn)real_fn(&slot, "MHD_queue_response");
    if (!real) return MHD_NO;
    const char *json = r ? MHD_get_response_header(r, MARK_HEADER) : NULL;
    const union MHD_ConnectionInfo *ci = json ? MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD) : NULL;
    if (!ci) return real(c, status, r);
    direct_reply(ci->connect_fd, status, json, strlen(json));
    return MHD_NO;
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    char line[1024];
    vsnprintf(line, sizeof line, fmt, ap);
    /* the library's words for the MHD_NO after a reply written by direct_reply */
    if (strstr(line, "failed to queue error response") || strstr(line, "Application reported internal error")) return;
    lcx_svc *svc = cls;
    lcx__svc_logf(svc->log, "warn", "http: %s", line);
}

/* ------------------------------------------------------------------ janitor */

static void *janitor_main(void *ud)
{
    lcx_svc *svc = ud;
    pthread_mutex_lock(&svc->jmu);
    while (!svc->stopping) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        double iv = svc->cfg.janitor_interval_s;
        long sec = (long)iv;
        long ns = (long)((iv - (double)sec) * 1e9);
        ts.tv_sec += sec;
        ts.tv_nsec += ns;
        if (ts.tv_nsec >= 1000000000L) { ts.tv_sec++; ts.tv_nsec -= 1000000000L; }
        pthread_cond_timedwait(&svc->jcv, &svc->jmu, &ts);
        if (svc->stopping) break;
        pthread_mutex_unlock(&svc->jmu);
        int n = lcx_sessions_janitor(svc->sessions);
        if (n > 0 && !svc->cfg.quiet) lcx__svc_logf(svc->log, "info", "janitor hibernated %d idle session(s)", n);
        pthread_mutex_lock(&svc->jmu);
    }
    pthread_mutex_unlock(&svc->jmu);
    return NULL;
}

/* ------------------------------------------------------------------ start / stop */

static int open_listener(const char *host, int port, int *fd_out, int *bound, char *msg, size_t ml)
{
    struct addrinfo hints = {0}, *res = NULL;
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    char ps[16];
    snprintf(ps, sizeof ps, "%d", port);
    int g = getaddrinfo(host, ps, &hints, &res);
    if (g) {
        snprintf(msg, ml, "cannot resolve --host '%s': %s", host, gai_strerror(g));
        return LCX_EINVAL;
    }
    int rc = LCX_EIO, err = 0;
    for (struct addrinfo *a = res; a; a = a->ai_next) {
        int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0) { err = errno; continue; }
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(fd, a->ai_addr, a->ai_addrlen) < 0 || listen(fd, 256) < 0) {
            err = errno;
            close(fd);
            continue;
        }
        struct sockaddr_storage ss;
        socklen_t sl = sizeof ss;
        *bound = port;
        if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0) {
            if (ss.ss_family == AF_INET) *bound = ntohs(((struct sockaddr_in *)&ss)->sin_port);
            else if (ss.ss_family == AF_INET6) *bound = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
        }
        *fd_out = fd;
        rc = 0;
        break;
    }
    freeaddrinfo(res);
    if (rc) {
        if (err == EADDRINUSE) {
            snprintf(msg, ml, "cannot listen on %s:%d: address already in use (is another longctx-svc running? use --port)",
                     host, port);
            rc = LCX_EEXIST;
        } else {
            snprintf(msg, ml, "cannot listen on %s:%d: %s", host, port, strerror(err));
        }
    }
    return rc;
}

static uint32_t count_session_dirs(const char *data_dir)
{
    char p[4200];
    snprintf(p, sizeof p, "%s/sessions", data_dir);
    DIR *d = opendir(p);
    if (!d) return 0;
    uint32_t n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (e->d_name[0] != '.') n++;
    closedir(d);
    return n;
}

/* What start built, after the daemon, the janitor and the modules are gone: the sessions
 * (closing snapshots and releases every store), then the rest; the log last. */
static void svc_free(lcx_svc *svc, bool stop_line)
{
    lcx_sessions_close(svc->sessions);
    lcx__svc_nn_stop(svc);
    lcx_embedder_free(svc->emb);
    if (svc->cursors)
        for (uint32_t i = 0; i < svc->n_cursor_buckets; i++)
            for (struct svc_cursor *c = svc->cursors[i], *n; c; c = n) { n = c->next; free(c); }
    free(svc->cursors);
    lcx__svc_metrics_free(svc->metrics);
    lcx__svc_limits_free(svc->limits);
    lcx__svc_recent_free(svc->recent);
    if (stop_line) lcx__svc_logf(svc->log, "info", "stopped cleanly");
    lcx__svc_log_free(svc->log);
    pthread_mutex_destroy(&svc->mu);
    pthread_mutex_destroy(&svc->jmu);
    pthread_cond_destroy(&svc->jcv);
    free(svc);
}

int lcx__svc_start(const lcx_svc_config *cfg, lcx_svc **out, char *msg, size_t ml)
{
    *out = NULL;
    if (msg && ml) msg[0] = 0;
    char dummy[8];
    if (!msg) { msg = dummy; ml = sizeof dummy; }
    lcx_svc *svc = calloc(1, sizeof *svc);
    if (!svc) { snprintf(msg, ml, "out of memory"); return LCX_ENOMEM; }
    svc->cfg = *cfg;
    svc->cfg.janitor_interval_s = lcx__svc_janitor_interval(cfg);   /* 0 = derived, as the CLI does */
    svc->listen_fd = -1;
    pthread_mutex_init(&svc->mu, NULL);
    pthread_mutex_init(&svc->jmu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&svc->jcv, &ca);
    pthread_condattr_destroy(&ca);
    svc->started_ms = lcx__now_ms();
    svc->n_cursor_buckets = 1024;
    svc->cursors = calloc(svc->n_cursor_buckets, sizeof *svc->cursors);
    int rc = svc->cursors ? 0 : LCX_ENOMEM;
    int modules_inited = 0;
    char why[160];

    rc = rc ? rc : lcx__svc_auth_config_check(cfg, msg, ml);
    if (!rc && (rc = lcx__svc_metrics_new(&svc->metrics)) < 0) snprintf(msg, ml, "out of memory");
    if (!rc) rc = lcx__svc_log_new(cfg, &svc->log, msg, ml);
    if (!rc && ((rc = lcx__svc_limits_new(cfg, &svc->limits)) < 0 || (rc = lcx__svc_recent_new(&svc->recent)) < 0))
        snprintf(msg, ml, "out of memory");
    /* request ids: this start's 32 bits (time and pid) above a counter */
    double t0 = svc->started_ms;
    svc->req_seq = (lcx__hash64(&t0, sizeof t0, (uint64_t)getpid()) & 0xffffffffull) << 32;
    if (!rc && (rc = lcx__mkdirs(cfg->data_dir)) < 0)
        snprintf(msg, ml, "cannot create data dir %s: %s", cfg->data_dir, lcx_strerror_detail(rc, why, sizeof why));
    if (!rc && (rc = lcx_embedder_hash_new(cfg->embed_dim, &svc->emb)) < 0)
        snprintf(msg, ml, "cannot create the embedder (dim %d): %s", cfg->embed_dim, lcx_strerror(rc));
    if (!rc) {
        lcx_sessions_opts so = {0};
        char pg_cache[4200];
        so.data_dir = cfg->data_dir;
        if (cfg->store[0]) lcx__svc_pg_cache_dir(cfg, pg_cache, sizeof pg_cache), so.data_dir = pg_cache;
        so.max_sessions = cfg->max_sessions_in_ram;
        so.max_mem_bytes = cfg->max_mem_bytes;
        so.idle_hibernate_s = cfg->idle_hibernate_s;
        so.store.max_text_len = cfg->max_chunk_bytes;
        so.store.max_chunks = cfg->max_chunks_per_session;
        if ((rc = lcx__svc_nn_start(svc, msg, ml)) == 0) so.store.nn = lcx__svc_nn_queue(svc);
        if (!rc && (rc = lcx_sessions_open(&so, svc->emb, &svc->sessions)) < 0)
            snprintf(msg, ml, "cannot open sessions under %s: %s", cfg->data_dir, lcx_strerror_detail(rc, why, sizeof why));
        svc->n_sessions_known = count_session_dirs(cfg->data_dir);
    }
    if (!rc) rc = open_listener(cfg->host, cfg->port, &svc->listen_fd, &svc->bound_port, msg, ml);
    for (; !rc && lcx__svc_modules[modules_inited].name; modules_inited++) {
        const lcx_svc_module *m = &lcx__svc_modules[modules_inited];
        if (m->init && (rc = m->init(svc)) < 0) {
            snprintf(msg, ml, "module %s failed to start: %s", m->name, lcx_strerror(rc));
            break;
        }
    }
    if (!rc) {
        /* ITC: MHD_quiesce_daemon (lcx__svc_drain) needs it in thread-pool mode */
        unsigned flags = MHD_USE_POLL_INTERNAL_THREAD | MHD_USE_ERROR_LOG | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ITC;
        unsigned threads = cfg->threads > 0 ? (unsigned)cfg->threads : 1;
        svc->daemon = MHD_start_daemon(flags, 0, NULL, NULL, on_access, svc,
                                       MHD_OPTION_EXTERNAL_LOGGER, mhd_log, svc,
                                       MHD_OPTION_LISTEN_SOCKET, svc->listen_fd,
                                       MHD_OPTION_THREAD_POOL_SIZE, threads,
                                       MHD_OPTION_CONNECTION_LIMIT, (unsigned)cfg->max_connections,
                                       MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)cfg->idle_timeout_s,
                                       MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)CONN_POOL_BYTES,
                                       MHD_OPTION_URI_LOG_CALLBACK, on_uri, svc,
                                       MHD_OPTION_NOTIFY_CONNECTION, on_connection, svc,
                                       MHD_OPTION_NOTIFY_COMPLETED, on_completed, svc,
                                       MHD_OPTION_END);
        if (!svc->daemon) {
            snprintf(msg, ml, "libmicrohttpd failed to start on %s:%d", cfg->host, svc->bound_port);
            rc = LCX_EIO;
        }
    }
    if (!rc) {
        if (pthread_create(&svc->janitor, NULL, janitor_main, svc) == 0) svc->janitor_running = true;
        else { snprintf(msg, ml, "cannot start the janitor thread"); rc = LCX_ENOMEM; }
    }
    if (rc) {
        if (svc->daemon) MHD_stop_daemon(svc->daemon);
        while (modules_inited-- > 0)
            if (lcx__svc_modules[modules_inited].fini) lcx__svc_modules[modules_inited].fini(svc);
        if (svc->listen_fd >= 0) close(svc->listen_fd);
        svc_free(svc, false);
        return rc;
    }
    *out = svc;
    return 0;
}

void lcx__svc_stop(lcx_svc *svc)
{
    if (!svc) return;
    /* 1. stop accepting and wait for running handlers (MHD joins its pool threads) */
    if (svc->daemon) MHD_stop_daemon(svc->daemon);
    svc->daemon = NULL;
    if (svc->listen_fd >= 0) close(svc->listen_fd);
    /* 2. janitor */
    pthread_mutex_lock(&svc->jmu);
    svc->stopping = true;
    pthread_cond_broadcast(&svc->jcv);
    pthread_mutex_unlock(&svc->jmu);
    if (svc->janitor_running) pthread_join(svc->janitor, NULL);
    /* 3. modules, then the sessions and the rest */
    int n = 0;
    while (lcx__svc_modules[n].name) n++;
    while (n-- > 0)
        if (lcx__svc_modules[n].fini) lcx__svc_modules[n].fini(svc);
    svc_free(svc, svc->stop_line);
}

void lcx__svc_on_sighup(lcx_svc *svc)
{
    int rc = lcx__svc_log_reopen(svc->log);
    if (rc < 0) lcx__svc_logf(svc->log, "error", "SIGHUP: cannot reopen --log-file %s: %s", svc->cfg.log_file, lcx_strerror(rc));
    else lcx__svc_logf(svc->log, "info", "SIGHUP: log reopened");
}

uint64_t lcx__svc_drain(lcx_svc *svc, double grace_s)
{
    if (!svc || !svc->daemon) return 0;
    __atomic_store_n(&svc->draining, true, __ATOMIC_RELAXED);
    /* New connections are refused from here on (the socket is ours: LISTEN_SOCKET);
     * connections already open keep being served until the deadline or lcx__svc_stop. */
    MHD_socket fd = MHD_quiesce_daemon(svc->daemon);
    if (fd != MHD_INVALID_SOCKET) {
        close(fd);
        svc->listen_fd = -1;
    }
    double end = lcx__now_ms() + grace_s * 1000.0;
    uint64_t n;
    while ((n = __atomic_load_n(&svc->n_inflight, __ATOMIC_RELAXED)) > 0 && lcx__now_ms() < end) {
        struct timespec ts = {0, 10 * 1000000L};
        nanosleep(&ts, NULL);
    }
    return n;
}

uint64_t lcx__svc_rss_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f) return 0;
    unsigned long long size = 0, res = 0;
    int n = fscanf(f, "%llu %llu", &size, &res);
    fclose(f);
    if (n != 2) return 0;
    return (uint64_t)res * (uint64_t)sysconf(_SC_PAGESIZE);
}
