/* Hostile HTTP against the REAL longctx-svc over loopback (issue #20): a mutation run over
 * every route (both /evict/write forms), then optionally many keep-alive clients, a
 * slowloris, and a kill -9 + restart, each checked against spans written before.
 *
 *   bench_svc_hostile [--bin build/bin/longctx-svc] [--seconds 60 | --requests N] [--seed S]
 *                     [--load-clients 256 --load-seconds 10 --load-interval-ms 100]
 *                     [--slowloris 400 --slowloris-seconds 10] [--kill9] [--server-log FILE]
 *                     [--serve-arg ARG]...   (extra `serve` flags, e.g. --serve-arg --client-rate --serve-arg 0)
 *
 * Mutations: byte flips (anywhere / body only), truncation, huge and invalid numbers, deep
 * nesting, invalid and overlong UTF-8, NUL bytes (raw, \u0000, %00), many headers, many
 * query parameters, bad Content-Length, Transfer-Encoding codings and broken chunking,
 * aborted bodies, garbage request lines, and a valid request pipelined before a mutated
 * one. Every request goes on a fresh connection and the client half-closes after it.
 * Verdicts: a reply is one or more well-formed HTTP responses (status line, headers,
 * Content-Length body); every 4xx/5xx body must be {"error":{"code":"…","message":"…"}}.
 * A hang is no EOF within 5 s. A close without reply counts only when the request was
 * complete as sent (an aborted or truncated request may be dropped). Afterwards: open
 * connections (the service's /longctx/status counter and its sockets in /proc), and every
 * span seeded before the run must still be in its session (dump token ranges).
 * Exit status 0 only when the goals hold: 0 hangs, 0 closes without reply, 0 malformed or
 * non-JSON error replies, 0 unexpected 5xx, 0 leaked connections, nothing lost (and, with
 * --load-clients, 0 load errors). */
#define _GNU_SOURCE   /* memmem, strcasestr */
#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <fcntl.h>
#include <stdarg.h>
#include "testutil.h"
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define REPLY_WAIT_MS 5000
#define N_SEED_SESSIONS 4
#define SEED_SPANS 40

static int port;
static pid_t server_pid;
static const char *serve_args[48];   /* --serve-arg */
static int n_serve_args;
static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(void)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return rng;
}
static size_t rn(size_t n) { return n ? (size_t)(rnd() % n) : 0; }

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* ------------------------------------------------------------------ buffers */
typedef struct { char *p; size_t n, cap; } buf;
static void bput(buf *b, const void *d, size_t n)
{
    if (b->n + n + 1 > b->cap) {
        size_t c = b->cap ? b->cap : 256;
        while (c < b->n + n + 1) c *= 2;
        char *p = realloc(b->p, c);
        if (!p) abort();   /* a benchmark tool: OOM ends the run */
        b->p = p, b->cap = c;
    }
    memcpy(b->p + b->n, d, n);
    b->n += n;
    b->p[b->n] = 0;
}
static void bputs(buf *b, const char *s) { bput(b, s, strlen(s)); }
static void bprintf(buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void bprintf(buf *b, const char *fmt, ...)
{
    char tmp[8192];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n > 0) bput(b, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

/* ------------------------------------------------------------------ sockets */
static int dial(void)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) < 0) { close(fd); return -1; }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

static void send_all(int fd, const char *d, size_t n)
{
    while (n) {
        ssize_t w = send(fd, d, n, MSG_NOSIGNAL);
        if (w <= 0) return;   /* the server may stop reading early: that is allowed */
        d += w, n -= (size_t)w;
    }
}

/* Reads to EOF. Returns bytes read, or -1 when nothing more came for REPLY_WAIT_MS. */
static long read_to_eof(int fd, buf *out)
{
    char tmp[16384];
    for (;;) {
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, REPLY_WAIT_MS) <= 0) return -1;
        ssize_t r = recv(fd, tmp, sizeof tmp, 0);
        if (r <= 0) break;   /* EOF or reset: what arrived is the reply */
        bput(out, tmp, (size_t)r);
    }
    return (long)out->n;
}

/* ------------------------------------------------------------------ reply parsing */
typedef struct {
    int n_resp;         /* well-formed responses found */
    int status[4];
    bool malformed;     /* bytes that are not a well-formed response */
    bool non_json;      /* a 4xx/5xx without the JSON error body (or a JSON reply that does not parse) */
    char code[4][48];
} verdict;

static const char *find_crlf2(const char *p, size_t n)
{
    for (size_t i = 0; i + 3 < n; i++)
        if (p[i] == '\r' && p[i + 1] == '\n' && p[i + 2] == '\r' && p[i + 3] == '\n') return p + i;
    return NULL;
}

static void parse_replies(const buf *b, verdict *v)
{
    memset(v, 0, sizeof *v);
    const char *p = b->p, *end = b->p + b->n;
    while (p < end) {
        size_t left = (size_t)(end - p);
        const char *he = find_crlf2(p, left);
        int st = 0;
        if (!he || left < 12 || memcmp(p, "HTTP/1.1 ", 9) || sscanf(p + 9, "%3d", &st) != 1) { v->malformed = true; return; }
        long cl = -1;
        bool json = false, chunked = false;
        for (const char *l = strstr(p, "\r\n") + 2; l < he; l = strstr(l, "\r\n") + 2) {
            if (!strncasecmp(l, "Content-Length:", 15)) cl = atol(l + 15);
            if (!strncasecmp(l, "Content-Type:", 13)) json = !!strstr(l, "application/json") && strstr(l, "application/json") < strstr(l, "\r\n");
            if (!strncasecmp(l, "Transfer-Encoding:", 18)) chunked = true;
        }
        const char *body = he + 4;
        if (chunked || cl < 0 || body + cl > end) { v->malformed = true; return; }
        if (v->n_resp < 4) {
            v->status[v->n_resp] = st;
            cJSON *j = json ? cJSON_ParseWithLength(body, (size_t)cl) : NULL;
            const cJSON *e = j ? cJSON_GetObjectItemCaseSensitive(j, "error") : NULL;
            const cJSON *c = e ? cJSON_GetObjectItemCaseSensitive(e, "code") : NULL;
            const cJSON *m = e ? cJSON_GetObjectItemCaseSensitive(e, "message") : NULL;
            if (st >= 400 && !(cJSON_IsString(c) && cJSON_IsString(m) && m->valuestring[0])) v->non_json = true;
            if (st < 400 && json && !j) v->non_json = true;
            if (cJSON_IsString(c)) snprintf(v->code[v->n_resp], sizeof v->code[0], "%s", c->valuestring);
            cJSON_Delete(j);
        }
        v->n_resp++;
        p = body + cl;
    }
}

/* Did the client send a complete request (so that a reply is owed)? Only the first
 * request of the bytes counts; a head without "\r\n\r\n", a Content-Length larger than
 * what follows, or a chunked body without its last chunk are incomplete. */
static bool request_complete(const char *r, size_t n)
{
    const char *he = find_crlf2(r, n);
    if (!he) return false;
    size_t body = n - (size_t)(he + 4 - r);
    bool chunked = false;
    long long cl = -1;
    int n_cl = 0;
    /* memmem, not strstr: a mutated head may hold NUL bytes */
    for (const char *l = r; l && l < he; l = memmem(l, (size_t)(he - l), "\r\n", 2), l = l ? l + 2 : NULL) {
        if (!strncasecmp(l, "Transfer-Encoding:", 18)) chunked = true;
        if (!strncasecmp(l, "Content-Length:", 15)) {
            char *e;
            long long v = strtoll(l + 15, &e, 10);
            n_cl++;
            if (e != l + 15 && v > cl) cl = v;
        }
    }
    if (chunked) return memmem(he + 4, body, "0\r\n\r\n", 5) != NULL;
    return cl <= (long long)body;
}

/* A first line with no space at all, or with an empty method, is not an HTTP request;
 * libmicrohttpd drops it without a reply and offers no hook before that (docs/svc.md).
 * Counted on its own. */
static bool request_line_not_http(const char *r, size_t n)
{
    const char *e = memchr(r, '\n', n);
    size_t l = e ? (size_t)(e - r) : n;
    return !memchr(r, ' ', l) || r[0] == ' ';   /* no space, or an empty method */
}

/* ------------------------------------------------------------------ stats */
enum { K_NONE, K_FLIP, K_FLIP_BODY, K_TRUNC, K_NUM, K_DEEP, K_UTF8, K_NUL, K_HEADERS, K_PARAMS, K_CL, K_TE, K_ABORT,
       K_LINE, K_PIPE, K_N };
static const char *const kind_name[K_N] = {"valid", "flip", "flip-body", "truncate", "numbers", "deep-nesting", "bad-utf8",
                                           "nul", "many-headers", "many-params", "content-length", "coding", "abort",
                                           "request-line", "pipelined"};
static struct {
    uint64_t requests, replies, responses, hangs, no_reply, no_reply_ok, not_http, malformed, non_json, unexpected_5xx,
        proxy_503, refusals_5xx;
    uint64_t by_status[600];
    uint64_t by_kind[K_N], bad_by_kind[K_N];
} ST;

/* ------------------------------------------------------------------ requests */
typedef struct { const char *method, *path; const char *body; } tmpl;
static const tmpl T[] = {
    {"GET", "/healthz", NULL},
    {"GET", "/longctx/status", NULL},
    {"POST", "/evict/write",
     "{\"session_id\":\"keep-0\",\"chunks\":[{\"text\":\"fuzz span alpha 1234\",\"token_range\":[90000,90009],\"layer\":3,"
     "\"score\":0.5},{\"text\":\"fuzz \\u00e9t\\u00e9 span\",\"token_range\":[90010,90019],\"layer\":1,\"score\":0.25}]}"},
    {"POST", "/evict/write?session_id=fz-b", "{\"chunks\":[{\"text\":\"form b span\",\"tokens\":[11,22,33],\"round\":2,\"layer\":0}]}"},
    {"POST", "/evict/retrieve", "{\"session_id\":\"keep-0\",\"query\":\"what is the needle code?\",\"top_k\":8,\"score_floor\":0.1}"},
    {"GET", "/evict/dump?session_id=keep-1", NULL},
    {"POST", "/sessions/keep-2/hibernate", NULL},
    {"POST", "/sessions/keep-2/resume", NULL},
    {"GET", "/sessions/keep-3/hibernation-status", NULL},
    {"POST", "/index?scope=/nonexistent/longctx-fuzz", NULL},
    {"POST", "/retrieve", "{\"query\":\"parse the config\",\"explicit_scope\":\"/nonexistent/longctx-fuzz\",\"top_k\":4}"},
    {"POST", "/retrieve?scope=/nonexistent/longctx-fuzz&query=config&top_k=3", NULL},
    {"POST", "/v1/chat/completions", "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}"},
    {"GET", "/v1/models", NULL},
};
#define N_T (sizeof T / sizeof *T)

static void build(buf *r, const char *method, const char *path, const char *extra_hdr, const char *body, size_t blen,
                  bool with_cl)
{
    bprintf(r, "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\n", method, path);
    if (body) bputs(r, "Content-Type: application/json\r\n");
    if (extra_hdr) bputs(r, extra_hdr);
    if (body && with_cl) bprintf(r, "Content-Length: %zu\r\n", blen);
    bputs(r, "\r\n");
    if (body) bput(r, body, blen);
}

/* Replaces the first occurrence of a number in s with rep (into out). */
static void mutate_number(const char *s, buf *out)
{
    static const char *const reps[] = {"1e999", "-1", "99999999999999999999999999", "-0", "1.5", "NaN", "0x10", "1e-999",
                                       "[]", "\"7\"", "null", "-9223372036854775809", "18446744073709551616", "1E+308",
                                       "00012", ".5", "+1", "Infinity"};
    size_t n = strlen(s), k = 0, hits[64];
    for (size_t i = 0; i < n && k < 64; i++)
        if ((s[i] >= '0' && s[i] <= '9') && i && !(s[i - 1] >= '0' && s[i - 1] <= '9') && s[i - 1] != '.' && s[i - 1] != '\\' &&
            s[i - 1] != 'u' && (s[i - 1] == ':' || s[i - 1] == '[' || s[i - 1] == ',' || s[i - 1] == ' '))
            hits[k++] = i;
    if (!k) { bputs(out, s); return; }
    size_t at = hits[rn(k)], e = at;
    while (e < n && ((s[e] >= '0' && s[e] <= '9') || s[e] == '.')) e++;
    bput(out, s, at);
    bputs(out, reps[rn(sizeof reps / sizeof *reps)]);
    bputs(out, s + e);
}

/* Inserts bytes into the first string value after a ':' */
static void insert_in_string(const char *s, const char *ins, size_t il, buf *out)
{
    const char *q = strstr(s, ":\"");
    if (!q) { bputs(out, s); bput(out, ins, il); return; }
    q += 2 + rn(3);
    if (q > s + strlen(s)) q = s + strlen(s);
    bput(out, s, (size_t)(q - s));
    bput(out, ins, il);
    bputs(out, q);
}

/* Makes one (possibly mutated) request; *abort_early: close right after sending. */
static int make_request(buf *r, bool *abort_early)
{
    const tmpl *t = &T[rn(N_T)];
    int kind = (int)rn(K_N);
    *abort_early = false;
    const char *body = t->body;
    size_t blen = body ? strlen(body) : 0;
    buf b = {0}, tmp = {0};
    switch (kind) {
    case K_NONE: build(r, t->method, t->path, NULL, body, blen, true); break;
    case K_FLIP:
    case K_FLIP_BODY: {
        build(r, t->method, t->path, NULL, body ? body : "{}", body ? blen : 2, true);
        const char *he = find_crlf2(r->p, r->n);
        size_t from = kind == K_FLIP_BODY && he ? (size_t)(he + 4 - r->p) : 0;
        int flips = 1 + (int)rn(8);
        for (int i = 0; i < flips && from < r->n; i++) r->p[from + rn(r->n - from)] ^= (char)(1u << rn(8));
        break;
    }
    case K_TRUNC:
        build(r, t->method, t->path, NULL, body ? body : "{}", body ? blen : 2, true);
        r->n = rn(r->n);
        r->p[r->n] = 0;
        break;
    case K_NUM:
        mutate_number(body ? body : "{\"top_k\":8}", &b);
        build(r, t->method, t->path, NULL, b.p, b.n, true);
        break;
    case K_DEEP: {
        size_t depth = 100 + rn(200000);
        bputs(&b, "{\"session_id\":\"keep-0\",\"query\":\"q\",\"chunks\":");
        char open = rn(2) ? '[' : '{';
        for (size_t i = 0; i < depth; i++) {
            if (open == '[') bputs(&b, "[");
            else bputs(&b, "{\"a\":");
        }
        bputs(&b, "1");
        for (size_t i = 0; i < depth; i++) bputs(&b, open == '[' ? "]" : "}");
        bputs(&b, "}");
        build(r, t->method, t->path, NULL, b.p, b.n, true);
        break;
    }
    case K_UTF8: {
        static const char *const bad[] = {"\xc0\xaf", "\xe0\x80\xaf", "\xf0\x80\x80\xaf", "\xed\xa0\x80", "\xff", "\xfe\xff",
                                          "\xc3", "\xf8\x88\x80\x80\x80", "\xf4\x90\x80\x80", "\\ud800", "\\udc00x", "\x80"};
        const char *x = bad[rn(sizeof bad / sizeof *bad)];
        insert_in_string(body ? body : "{\"query\":\"x\"}", x, strlen(x), &b);
        build(r, t->method, t->path, NULL, b.p, b.n, true);
        break;
    }
    case K_NUL: {
        int sub = (int)rn(3);
        if (sub == 0) {
            insert_in_string(body ? body : "{\"query\":\"x\"}", "\0", 1, &b);
            build(r, t->method, t->path, NULL, b.p, b.n, true);
        } else if (sub == 1) {
            insert_in_string(body ? body : "{\"query\":\"x\"}", "\\u0000", 6, &b);
            build(r, t->method, t->path, NULL, b.p, b.n, true);
        } else {
            bprintf(&tmp, "%s%csession_id=keep-0%%00x", t->path, strchr(t->path, '?') ? '&' : '?');
            build(r, t->method, tmp.p, NULL, body, blen, true);
        }
        break;
    }
    case K_HEADERS: {
        size_t nh = 20 + rn(4000);
        for (size_t i = 0; i < nh; i++) bprintf(&b, "X-Fuzz-%zu: %s\r\n", i, rn(4) ? "v" : "a-rather-longer-header-value-0123456789");
        build(r, t->method, t->path, b.p, body, blen, true);
        break;
    }
    case K_PARAMS: {
        size_t np = 10 + rn(3000);
        bputs(&tmp, t->path);
        for (size_t i = 0; i < np; i++) bprintf(&tmp, "%cp%zu=%zu", (i == 0 && !strchr(t->path, '?')) ? '?' : '&', i, i);
        build(r, t->method, tmp.p, NULL, body, blen, true);
        break;
    }
    case K_CL: {
        static const char *const cls[] = {"abc", "-1", "99999999999999999999999", "18446744073709551615", "+5", " 5 x",
                                          "0x10", "1", "", "4294967296"};
        int sub = (int)rn(12);
        const char *bb = body ? body : "{}";
        size_t bl = body ? blen : 2;
        if (sub < 10) bprintf(&b, "Content-Length: %s\r\n", cls[sub]);
        else if (sub == 10) bprintf(&b, "Content-Length: %zu\r\nContent-Length: %zu\r\n", bl, bl + 7);
        else bprintf(&b, "Content-Length: %zu\r\n", bl + 1 + rn(100));   /* more than sent: incomplete */
        build(r, t->method, t->path, b.p, bb, bl, false);
        break;
    }
    case K_TE: {
        static const char *const tes[] = {"gzip", "deflate", "chunked, gzip", "identity", "br", "x-custom", "chunked"};
        int sub = (int)rn(9);
        const char *bb = body ? body : "{}";
        size_t bl = body ? blen : 2;
        if (sub < 6) {
            bprintf(&b, "Transfer-Encoding: %s\r\n", tes[sub]);
            build(r, t->method, t->path, b.p, bb, bl, false);
        } else {
            bprintf(&tmp, "%zx\r\n%s\r\n0\r\n\r\n", bl, bb);
            if (sub == 7) tmp.p[0] = 'z';                          /* bad chunk size */
            if (sub == 8) bprintf(&b, "Content-Length: %zu\r\n", bl); /* both codings */
            bputs(&b, "Transfer-Encoding: chunked\r\n");
            build(r, t->method, t->path, b.p, tmp.p, tmp.n, false);
        }
        break;
    }
    case K_ABORT: {
        const char *bb = body ? body : "{\"query\":\"x\"}";
        size_t bl = strlen(bb);
        bprintf(&b, "Content-Length: %zu\r\n", bl + 100);
        build(r, t->method, t->path, b.p, bb, rn(bl + 1), false);
        *abort_early = true;
        break;
    }
    case K_LINE: {
        static const char *const lines[] = {"GARBAGE\r\n\r\n", "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03 x\r\n\r\n",
                                            "GET /healthz\r\n\r\n", "FOO /healthz HTTP/1.1\r\nHost: x\r\n\r\n",
                                            "GET http://127.0.0.1/healthz HTTP/1.1\r\nHost: x\r\n\r\n",
                                            "get /healthz http/1.1\r\nHost: x\r\n\r\n", "GET /healthz HTTP/1.1\nHost: x\n\n",
                                            "GET  /healthz  HTTP/1.1\r\nHost: x\r\n\r\n", "GET /heal thz HTTP/1.1\r\nHost: x\r\n\r\n",
                                            "GET /healthz HTTP/1.0\r\n\r\n", "GET /healthz HTTP/1.1\r\n\r\n",
                                            "GET /%zz%00 HTTP/1.1\r\nHost: x\r\n\r\n", " \r\n\r\n",
                                            "GET /healthz HTTP/1.1\r\nHost: x\r\n folded: header\r\n\r\n",
                                            "\r\n\r\nGET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"};
        bputs(r, lines[rn(sizeof lines / sizeof *lines)]);
        break;
    }
    case K_PIPE: {
        build(r, "GET", "/healthz", NULL, NULL, 0, true);
        buf m = {0};
        bool ab;
        make_request(&m, &ab);
        bput(r, m.p, m.n);
        free(m.p);
        break;
    }
    }
    free(b.p);
    free(tmp.p);
    return kind;
}

static void one_request(void)
{
    buf r = {0}, out = {0};
    bool abort_early;
    int kind = make_request(&r, &abort_early);
    int fd = dial();
    ST.requests++;
    ST.by_kind[kind]++;
    if (fd < 0) { ST.no_reply++; ST.bad_by_kind[kind]++; free(r.p); return; }
    send_all(fd, r.p, r.n);
    if (abort_early) {   /* the client gives up mid-body: no reply is owed */
        close(fd);
        ST.no_reply_ok++;
        free(r.p);
        return;
    }
    shutdown(fd, SHUT_WR);
    long n = read_to_eof(fd, &out);
    close(fd);
    bool bad = false;
    /* the pipelined case owes a reply to its first, valid request only */
    const char *first = r.p;
    size_t first_n = r.n;
    if (n < 0) {
        ST.hangs++;
        bad = true;
        fprintf(stderr, "HANG (%s): %.120s\n", kind_name[kind], r.p);
    } else if (n == 0) {
        if (request_line_not_http(first, first_n)) ST.not_http++;
        else if (request_complete(first, first_n)) {
            ST.no_reply++;
            bad = true;
            fprintf(stderr, "NO REPLY (%s):", kind_name[kind]);
            for (size_t i = 0; i < r.n && i < 400; i++)
                fprintf(stderr, r.p[i] >= 32 && r.p[i] < 127 ? "%c" : "\\x%02x", (unsigned char)r.p[i]);
            fprintf(stderr, "\n");
        } else ST.no_reply_ok++;
    } else {
        ST.replies++;
        verdict v;
        parse_replies(&out, &v);
        ST.responses += (uint64_t)v.n_resp;
        for (int i = 0; i < v.n_resp && i < 4; i++) {
            if (v.status[i] > 0 && v.status[i] < 600) ST.by_status[v.status[i]]++;
            if (v.status[i] >= 500) {
                if (v.status[i] == 503 && !strcmp(v.code[i], "proxy_disabled")) ST.proxy_503++;
                /* the statuses HTTP prescribes for a coding or version the server does not
                 * implement (RFC 9112 §6.1, RFC 9110 §15.6.6): refusals, not failures */
                else if ((v.status[i] == 501 && !strcmp(v.code[i], "unsupported_transfer_encoding")) ||
                         (v.status[i] == 505 && !strcmp(v.code[i], "http_version_not_supported")))
                    ST.refusals_5xx++;
                else { ST.unexpected_5xx++; bad = true; fprintf(stderr, "5xx %d %s (%s)\n", v.status[i], v.code[i], kind_name[kind]); }
            }
        }
        if (v.malformed) { ST.malformed++; bad = true; fprintf(stderr, "MALFORMED (%s): %.200s\n", kind_name[kind], out.p); }
        if (v.non_json) { ST.non_json++; bad = true; fprintf(stderr, "NON-JSON (%s): %.200s\n", kind_name[kind], out.p); }
    }
    if (bad) ST.bad_by_kind[kind]++;
    free(r.p);
    free(out.p);
}

/* ------------------------------------------------------------------ simple client calls */
static int http_call(const char *method, const char *path, const char *body, buf *resp_body)
{
    buf r = {0}, out = {0};
    build(&r, method, path, "Connection: close\r\n", body, body ? strlen(body) : 0, true);
    int fd = dial();
    if (fd < 0) { free(r.p); return -1; }
    send_all(fd, r.p, r.n);
    long n = read_to_eof(fd, &out);
    close(fd);
    free(r.p);
    int st = -1;
    if (n > 12) sscanf(out.p, "HTTP/1.1 %d", &st);
    const char *he = out.p ? find_crlf2(out.p, out.n) : NULL;
    if (resp_body && he) bputs(resp_body, he + 4);
    free(out.p);
    return st;
}

static void seed(void)
{
    for (int s = 0; s < N_SEED_SESSIONS; s++) {
        buf b = {0};
        bprintf(&b, "{\"session_id\":\"keep-%d\",\"chunks\":[", s);
        for (int i = 0; i < SEED_SPANS; i++)
            bprintf(&b, "%s{\"text\":\"seeded span %d of session %d, needle code %d%04d, routine operational notes\","
                        "\"token_range\":[%d,%d],\"layer\":%d,\"score\":0.5}",
                    i ? "," : "", i, s, s, i, i * 16, i * 16 + 15, i % 8);
        bputs(&b, "]}");
        if (http_call("POST", "/evict/write", b.p, NULL) != 200) { fprintf(stderr, "seed write failed\n"); exit(1); }
        free(b.p);
    }
    if (http_call("POST", "/evict/write?session_id=keep-b",
                  "{\"chunks\":[{\"text\":\"form b seeded one\",\"tokens\":[1,2,3,4],\"round\":1,\"layer\":0},"
                  "{\"text\":\"form b seeded two\",\"tokens\":[5,6],\"round\":1,\"layer\":1}]}", NULL) != 200) {
        fprintf(stderr, "seed form B failed\n");
        exit(1);
    }
}

/* Spans seeded before the run that are missing now (dump token ranges). */
static int count_lost(void)
{
    int lost = 0;
    for (int s = 0; s <= N_SEED_SESSIONS; s++) {
        char path[96];
        bool formb = s == N_SEED_SESSIONS;
        snprintf(path, sizeof path, formb ? "/evict/dump?session_id=keep-b" : "/evict/dump?session_id=keep-%d", s);
        buf b = {0};
        int st = http_call("GET", path, NULL, &b);
        cJSON *j = st == 200 ? cJSON_Parse(b.p) : NULL;
        const cJSON *tr = j ? cJSON_GetObjectItem(j, "token_ranges") : NULL;
        int want = formb ? 2 : SEED_SPANS;
        for (int i = 0; i < want; i++) {
            long a = formb ? (i ? 4 : 0) : i * 16, e = formb ? (i ? 5 : 3) : i * 16 + 15;
            bool found = false;
            const cJSON *x;
            cJSON_ArrayForEach(x, tr) {
                if (cJSON_GetArraySize(x) == 2 && (long)cJSON_GetArrayItem(x, 0)->valuedouble == a &&
                    (long)cJSON_GetArrayItem(x, 1)->valuedouble == e) found = true;
            }
            lost += !found;
        }
        cJSON_Delete(j);
        free(b.p);
    }
    return lost;
}

static int open_connections(void)
{
    buf b = {0};
    int st = http_call("GET", "/longctx/status", NULL, &b);
    cJSON *j = st == 200 ? cJSON_Parse(b.p) : NULL;
    const cJSON *x = j ? cJSON_GetObjectItem(j, "open_connections") : NULL;
    int n = cJSON_IsNumber(x) ? (int)x->valuedouble - 1 : -1;   /* minus the one asking */
    cJSON_Delete(j);
    free(b.p);
    return n;
}

static int proc_sockets(void) { return tu_proc_sockets(server_pid); }

/* ------------------------------------------------------------------ server */
static const char *bin = "bin/longctx-svc";
static const char *server_log;   /* --server-log FILE: the server's stderr (default: discarded) */
static char data_dir[] = "/tmp/lcxhostile.XXXXXX";

static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t l = sizeof a;
    if (bind(fd, (struct sockaddr *)&a, sizeof a) < 0 || getsockname(fd, (struct sockaddr *)&a, &l) < 0) return -1;
    close(fd);
    return ntohs(a.sin_port);
}

static bool start_server(void)
{
    char ps[16];
    snprintf(ps, sizeof ps, "%d", port);
    pid_t pid = fork();
    if (pid == 0) {
        int dn = server_log ? open(server_log, O_WRONLY | O_CREAT | O_APPEND, 0644) : open("/dev/null", O_WRONLY);
        if (dn >= 0) dup2(dn, 2);   /* libmicrohttpd logs every refused request */
        const char *av[64] = {bin, "serve", "--host", "127.0.0.1", "--port", ps, "--data-dir", data_dir, "--quiet"};
        int n = 9;
        for (int i = 0; i < n_serve_args && n < 63; i++) av[n++] = serve_args[i];
        av[n] = NULL;
        execv(bin, (char *const *)av);
        _exit(127);
    }
    server_pid = pid;
    for (int i = 0; i < 500; i++) {
        if (http_call("GET", "/healthz", NULL, NULL) == 200) return true;
        usleep(20000);
    }
    return false;
}

/* ------------------------------------------------------------------ load: keep-alive clients */
static volatile int load_stop;
static double load_interval_ms = 100;   /* each client sends one request per interval (0: back to back) */
typedef struct { double *lat; size_t n, cap; uint64_t errors; } load_res;

/* Reads one response (Content-Length framed) from a keep-alive connection; status or -1. */
static int read_one(int fd, buf *in)
{
    for (;;) {
        const char *he = in->n ? find_crlf2(in->p, in->n) : NULL;
        if (he) {
            int st = 0;
            sscanf(in->p, "HTTP/1.1 %d", &st);
            const char *c = strcasestr(in->p, "Content-Length:");
            long cl = c && c < he ? atol(c + 15) : 0;
            size_t tot = (size_t)(he + 4 - in->p) + (size_t)cl;
            if (in->n >= tot) {
                memmove(in->p, in->p + tot, in->n - tot);
                in->n -= tot;
                return st;
            }
        }
        char tmp[16384];
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, REPLY_WAIT_MS) <= 0) return -1;
        ssize_t r = recv(fd, tmp, sizeof tmp, 0);
        if (r <= 0) return -1;
        bput(in, tmp, (size_t)r);
    }
}

static void *load_main(void *ud)
{
    load_res *res = ud;
    buf req = {0}, in = {0};
    static const char body[] = "{\"session_id\":\"keep-1\",\"query\":\"what is the needle code of span 7?\",\"top_k\":8}";
    build(&req, "POST", "/evict/retrieve", NULL, body, sizeof body - 1, true);
    int fd = dial();
    double next = now_ms() + load_interval_ms * (double)rn(1000) / 1000.0;   /* spread the clients */
    while (!load_stop) {
        if (fd < 0) { res->errors++; usleep(10000); fd = dial(); continue; }
        double w = next - now_ms();
        if (w > 0) usleep((useconds_t)(w * 1e3));
        next += load_interval_ms;
        double t0 = now_ms();
        send_all(fd, req.p, req.n);
        int st = read_one(fd, &in);
        double dt = now_ms() - t0;
        if (st != 200) { res->errors++; close(fd); in.n = 0; fd = dial(); continue; }
        if (res->n == res->cap) {
            res->cap = res->cap ? res->cap * 2 : 1024;
            res->lat = realloc(res->lat, res->cap * sizeof *res->lat);
        }
        res->lat[res->n++] = dt;
    }
    if (fd >= 0) close(fd);
    free(req.p);
    free(in.p);
    return NULL;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}
static double pct(double *v, size_t n, double p) { return n ? v[(size_t)fmin((double)n - 1, p * (double)n)] : NAN; }

/* CPU seconds (user + system) the server has used so far: on a shared host the stable
 * number (wall percentiles include run-queue waits). */
static double server_cpu_s(void)
{
    char p[64], line[2048];
    snprintf(p, sizeof p, "/proc/%d/stat", (int)server_pid);
    FILE *f = fopen(p, "r");
    if (!f) return NAN;
    size_t n = fread(line, 1, sizeof line - 1, f);
    fclose(f);
    line[n] = 0;
    const char *c = strrchr(line, ')');   /* fields after the command name */
    unsigned long long ut = 0, st = 0;
    if (!c || sscanf(c + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2) return NAN;
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

static int run_load(int clients, double seconds)
{
    pthread_t *th = calloc((size_t)clients, sizeof *th);
    load_res *res = calloc((size_t)clients, sizeof *res);
    double cpu0 = server_cpu_s();
    load_stop = 0;
    for (int i = 0; i < clients; i++) pthread_create(&th[i], NULL, load_main, &res[i]);
    usleep((useconds_t)(seconds * 1e6));
    load_stop = 1;
    size_t tot = 0;
    uint64_t err = 0;
    for (int i = 0; i < clients; i++) { pthread_join(th[i], NULL); tot += res[i].n; err += res[i].errors; }
    double *all = malloc((tot + 1) * sizeof *all);
    size_t k = 0;
    for (int i = 0; i < clients; i++) { memcpy(all + k, res[i].lat, res[i].n * sizeof *all); k += res[i].n; free(res[i].lat); }
    qsort(all, tot, sizeof *all, cmp_d);
    double cpu = server_cpu_s() - cpu0;
    printf("load: server CPU %.2f s, %.1f us per request\n", cpu, tot ? cpu * 1e6 / (double)tot : NAN);
    printf("load: %d keep-alive clients, one request per %.0f ms each, %.0f s: %zu retrieves (%.0f/s), %llu errors, latency p50 %.2f ms, p99 %.2f ms, "
           "max %.2f ms\n", clients, load_interval_ms, seconds, tot, (double)tot / seconds, (unsigned long long)err, pct(all, tot, 0.5),
           pct(all, tot, 0.99), tot ? all[tot - 1] : NAN);
    free(all);
    free(th);
    free(res);
    return err ? 1 : 0;
}

/* ------------------------------------------------------------------ slowloris */
static int run_slowloris(int n, double seconds)
{
    int *fds = malloc((size_t)n * sizeof *fds);
    int opened = 0;
    for (int i = 0; i < n; i++) {
        fds[i] = dial();
        if (fds[i] >= 0) { send_all(fds[i], "POST /evict/write HTTP/1.1\r\nHost: x\r\n", 37); opened++; }
    }
    double t_end = now_ms() + seconds * 1e3, next_drip = now_ms() + 1000;
    double lat[100000];
    size_t nl = 0;
    int fail = 0;
    while (now_ms() < t_end) {
        if (now_ms() >= next_drip) {   /* one header byte per connection per second */
            for (int i = 0; i < n; i++)
                if (fds[i] >= 0) send(fds[i], "X", 1, MSG_NOSIGNAL | MSG_DONTWAIT);
            next_drip += 1000;
        }
        double t0 = now_ms();
        int st = http_call("GET", "/healthz", NULL, NULL);
        if (st != 200) fail++;
        else if (nl < sizeof lat / sizeof *lat) lat[nl++] = now_ms() - t0;
        usleep(50000);
    }
    for (int i = 0; i < n; i++)
        if (fds[i] >= 0) close(fds[i]);
    free(fds);
    qsort(lat, nl, sizeof *lat, cmp_d);
    printf("slowloris: %d slow connections held %.0f s (one byte/s each): /healthz on fresh connections %zu ok, %d failed, "
           "p50 %.2f ms, p99 %.2f ms, max %.2f ms\n", opened, seconds, nl, fail, pct(lat, nl, 0.5), pct(lat, nl, 0.99),
           nl ? lat[nl - 1] : NAN);
    return fail ? 1 : 0;
}

/* ------------------------------------------------------------------ main */
int main(int argc, char **argv)
{
    double seconds = 0;
    long max_req = 0;
    int load_clients = 0, slow_n = 0;
    double load_s = 10, slow_s = 10;
    bool kill9 = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : "";
        if (!strcmp(a, "--bin")) bin = v, i++;
        else if (!strcmp(a, "--seconds")) seconds = atof(v), i++;
        else if (!strcmp(a, "--requests")) max_req = atol(v), i++;
        else if (!strcmp(a, "--seed")) rng = strtoull(v, NULL, 10) * 0x9e3779b97f4a7c15ull + 1, i++;
        else if (!strcmp(a, "--load-clients")) load_clients = atoi(v), i++;
        else if (!strcmp(a, "--load-seconds")) load_s = atof(v), i++;
        else if (!strcmp(a, "--load-interval-ms")) load_interval_ms = atof(v), i++;
        else if (!strcmp(a, "--slowloris")) slow_n = atoi(v), i++;
        else if (!strcmp(a, "--slowloris-seconds")) slow_s = atof(v), i++;
        else if (!strcmp(a, "--kill9")) kill9 = true;
        else if (!strcmp(a, "--server-log")) server_log = v, i++;
        else if (!strcmp(a, "--serve-arg") && n_serve_args < 48) serve_args[n_serve_args++] = v, i++;
        else { fprintf(stderr, "unknown argument %s (see the header of bench_svc_hostile.c)\n", a); return 2; }
    }
    if (!seconds && !max_req) seconds = 30;
    if (access(bin, X_OK) != 0) { fprintf(stderr, "longctx-svc not found at %s (use --bin)\n", bin); return 2; }
    signal(SIGPIPE, SIG_IGN);
    if (!mkdtemp(data_dir)) return 2;
    port = free_port();
    if (!start_server()) { fprintf(stderr, "server did not start\n"); return 2; }
    seed();
    int base_sockets = proc_sockets();
    double t0 = now_ms();
    while ((max_req && (long)ST.requests < max_req) || (!max_req && now_ms() - t0 < seconds * 1e3)) one_request();
    double el = (now_ms() - t0) / 1e3;
    /* connections: give the server a moment to finish closing what the run opened */
    int open = -1, socks = -1;
    for (int i = 0; i < 30; i++) {
        usleep(100000);
        open = open_connections();
        socks = proc_sockets();
        if (open == 0 && socks <= base_sockets) break;
    }
    int leaked = (open > 0 ? open : 0) + (socks > base_sockets ? socks - base_sockets : 0) > 0;
    int lost = count_lost();
    printf("mutation run: %llu requests in %.1f s (%.0f/s), %llu replies carrying %llu responses\n",
           (unsigned long long)ST.requests, el, (double)ST.requests / el, (unsigned long long)ST.replies,
           (unsigned long long)ST.responses);
    printf("  by status:");
    for (int s = 100; s < 600; s++)
        if (ST.by_status[s]) printf(" %d×%llu", s, (unsigned long long)ST.by_status[s]);
    printf("\n  by mutation (requests / bad):");
    for (int k = 0; k < K_N; k++) printf(" %s %llu/%llu", kind_name[k], (unsigned long long)ST.by_kind[k], (unsigned long long)ST.bad_by_kind[k]);
    printf("\n  hangs (no reply in 5 s): %llu\n  closed without reply (complete request): %llu\n"
           "  dropped without reply, first line not HTTP (no space or no method; libmicrohttpd has no hook): %llu\n"
           "  no reply owed (aborted or incomplete request): %llu\n  malformed replies: %llu\n"
           "  error replies that are not JSON: %llu\n"
           "  5xx other than 501 unsupported coding / 505 HTTP version (×%llu) and 503 proxy_disabled (×%llu): %llu\n"
           "  connections left open afterwards: %d by the service's counter, %d sockets over the %d before the run\n"
           "  seeded spans lost: %d of %d\n",
           (unsigned long long)ST.hangs, (unsigned long long)ST.no_reply, (unsigned long long)ST.not_http,
           (unsigned long long)ST.no_reply_ok, (unsigned long long)ST.malformed, (unsigned long long)ST.non_json,
           (unsigned long long)ST.refusals_5xx, (unsigned long long)ST.proxy_503, (unsigned long long)ST.unexpected_5xx, open, socks - base_sockets, base_sockets,
           lost, N_SEED_SESSIONS * SEED_SPANS + 2);
    int rc = ST.hangs || ST.no_reply || ST.malformed || ST.non_json || ST.unexpected_5xx || leaked || lost;
    if (load_clients > 0) rc |= run_load(load_clients, load_s);
    if (slow_n > 0) rc |= run_slowloris(slow_n, slow_s);
    if (kill9) {
        kill(server_pid, SIGKILL);
        waitpid(server_pid, NULL, 0);
        if (!start_server()) { fprintf(stderr, "restart after kill -9 failed\n"); return 1; }
        int lost9 = count_lost();
        printf("kill -9 and restart: seeded spans lost %d of %d\n", lost9, N_SEED_SESSIONS * SEED_SPANS + 2);
        rc |= lost9 != 0;
    }
    kill(server_pid, SIGTERM);
    waitpid(server_pid, NULL, 0);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", data_dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", data_dir);
    printf("verdict: %s\n", rc ? "GOALS NOT MET" : "all goals met");
    return rc;
}
