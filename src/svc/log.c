/* longctx-svc: the service log (--log-format, --log-file; docs/svc.md "Logs").
 *
 * text (default): the service's own events as "longctx-svc: ..." lines, no access log.
 * json: one JSON object per line, for events
 *   {"ts":"2026-12-02T03:40:01.123Z","level":"info","msg":"..."}
 * and for every answered request
 *   {"ts":…,"level":"info|warn|error","msg":"access","method":"POST","route":"/evict/write",
 *    "status":200,"ms":0.412,"bytes":37,"req_bytes":512,"client":"127.0.0.1","request_id":"…"}
 * (level warn for 4xx, error for 5xx; route is the route pattern, never the raw path, so
 * session ids in /sessions/{id}/… do not reach the log; bodies and query strings never do).
 *
 * Each line is one write(2) on an O_APPEND descriptor under one mutex, so lines from the
 * pool threads never interleave. lcx__svc_log_reopen (SIGHUP) opens the path again and
 * swaps the descriptor under that mutex: after logrotate renames the file, the next line
 * goes to a new file at the old path. A log file that cannot be written is not fatal to
 * requests (the line is dropped and counted); one that cannot be opened at start is. */
#define _GNU_SOURCE
#include "svc/svc.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct lcx_svc_log {
    pthread_mutex_t mu;
    int fd;                     /* 2 (stderr) or the opened file */
    bool json;
    char path[4096];            /* "" = stderr */
    uint64_t dropped;           /* lines not written (atomic builtins) */
};

static int open_path(const char *path)
{
    return open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
}

int lcx__svc_log_new(const lcx_svc_config *c, struct lcx_svc_log **out, char *msg, size_t ml)
{
    *out = NULL;
    struct lcx_svc_log *l = calloc(1, sizeof *l);
    if (!l) { snprintf(msg, ml, "out of memory"); return LCX_ENOMEM; }
    pthread_mutex_init(&l->mu, NULL);
    l->fd = 2;
    l->json = !strcmp(c->log_format, "json");
    if (c->log_file[0]) {
        snprintf(l->path, sizeof l->path, "%s", c->log_file);
        int fd = open_path(l->path);
        if (fd < 0) {
            snprintf(msg, ml, "cannot open --log-file %s: %s", l->path, strerror(errno));
            pthread_mutex_destroy(&l->mu);
            free(l);
            return LCX_EIO;
        }
        l->fd = fd;
    }
    *out = l;
    return 0;
}

void lcx__svc_log_free(struct lcx_svc_log *l)
{
    if (!l) return;
    if (l->fd > 2) close(l->fd);
    pthread_mutex_destroy(&l->mu);
    free(l);
}

int lcx__svc_log_reopen(struct lcx_svc_log *l)
{
    if (!l || !l->path[0]) return 0;
    int fd = open_path(l->path);
    if (fd < 0) return lcx__eio(errno);   /* keep writing to the old descriptor */
    pthread_mutex_lock(&l->mu);
    int old = l->fd;
    l->fd = fd;
    pthread_mutex_unlock(&l->mu);
    if (old > 2) close(old);
    return 0;
}

bool lcx__svc_log_json(const struct lcx_svc_log *l) { return l && l->json; }
uint64_t lcx__svc_log_dropped(struct lcx_svc_log *l) { return l ? __atomic_load_n(&l->dropped, __ATOMIC_RELAXED) : 0; }

static void emit(struct lcx_svc_log *l, lcx_buf *b)
{
    if (lcx__buf_puts(b, "\n") < 0 || b->err) { __atomic_add_fetch(&l->dropped, 1, __ATOMIC_RELAXED); return; }
    pthread_mutex_lock(&l->mu);
    ssize_t w = write(l->fd, b->data, b->len);
    pthread_mutex_unlock(&l->mu);
    if (w != (ssize_t)b->len) __atomic_add_fetch(&l->dropped, 1, __ATOMIC_RELAXED);
}

/* RFC 3339 UTC with milliseconds. */
static void put_ts(lcx_buf *b)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    lcx__buf_printf(b, "{\"ts\":\"%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ\"", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                   tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000L);
}

static void lcx__svc_logv(struct lcx_svc_log *l, const char *level, const char *fmt, va_list ap)
{
    char msg[2048];
    int n = vsnprintf(msg, sizeof msg, fmt, ap);
    size_t ml = n < 0 ? 0 : LCX_MIN((size_t)n, sizeof msg - 1);
    while (ml && msg[ml - 1] == '\n') ml--;   /* the line ends are ours */
    if (!l) { fprintf(stderr, "longctx-svc: %.*s\n", (int)ml, msg); return; }
    lcx_buf b = {0};
    b.cap = 64u << 10;
    if (l->json) {
        put_ts(&b);
        lcx__buf_puts(&b, ",\"level\":");
        lcx__buf_json_str(&b, level, strlen(level));
        lcx__buf_puts(&b, ",\"msg\":");
        /* libmicrohttpd and the OS may hand us non-UTF-8 bytes: json_str escapes controls;
         * invalid UTF-8 is replaced so the line stays valid JSON */
        if (lcx__utf8_valid(msg, ml)) lcx__buf_json_str(&b, msg, ml);
        else lcx__buf_puts(&b, "\"(message with invalid UTF-8)\"");
        lcx__buf_puts(&b, "}");
    } else {
        lcx__buf_puts(&b, "longctx-svc: ");
        lcx__buf_append(&b, msg, ml);
    }
    emit(l, &b);
    lcx__buf_free(&b);
}

void lcx__svc_logf(struct lcx_svc_log *l, const char *level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    lcx__svc_logv(l, level, fmt, ap);
    va_end(ap);
}

void lcx__svc_log_access(struct lcx_svc_log *l, const lcx_svc_access *a)
{
    if (!l || !l->json) return;
    lcx_buf b = {0};
    b.cap = 64u << 10;
    put_ts(&b);
    lcx__buf_printf(&b, ",\"level\":\"%s\",\"msg\":\"access\",\"method\":",
                   a->status >= 500 ? "error" : a->status >= 400 ? "warn" : "info");
    /* the method is what the client sent (any token libmicrohttpd accepted) */
    if (lcx__utf8_valid(a->method, strlen(a->method))) lcx__buf_json_str(&b, a->method, strlen(a->method));
    else lcx__buf_puts(&b, "\"?\"");
    lcx__buf_puts(&b, ",\"route\":");
    lcx__buf_json_str(&b, a->route, strlen(a->route));
    lcx__buf_printf(&b, ",\"status\":%d,\"ms\":%.3f,\"bytes\":%lld,\"req_bytes\":%llu,\"client\":", a->status, a->ms,
                   a->bytes, (unsigned long long)a->req_bytes);
    lcx__buf_json_str(&b, a->client, strlen(a->client));
    lcx__buf_puts(&b, ",\"request_id\":");
    lcx__buf_json_str(&b, a->request_id, strlen(a->request_id));
    if (a->error_code && a->error_code[0]) {
        lcx__buf_puts(&b, ",\"error\":");
        lcx__buf_json_str(&b, a->error_code, strlen(a->error_code));
    }
    lcx__buf_puts(&b, "}");
    emit(l, &b);
    lcx__buf_free(&b);
}
