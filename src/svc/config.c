/* longctx-svc: flags, LONGCTX_* environment, --help, and the `serve` entry point shared by
 * `longctx-svc serve` and `longctx serve`. Precedence: flag > environment > default. */
#include "svc/svc.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stddef.h>
#include <strings.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef enum { K_STR, K_INT, K_U32, K_U64, K_MB, K_DBL, K_BOOL } kind;

typedef struct {
    const char *flag, *env;
    kind k;
    size_t off, size;   /* field in lcx_svc_config (size for strings) */
    double lo, hi;
    const char *help;
} opt;

#define F(field) offsetof(lcx_svc_config, field), sizeof(((lcx_svc_config *)0)->field)

/* The janitor's interval when none is set: a quarter of the idle-hibernation time (a
 * session idles at most 25 % past its limit), within these bounds; the lower one is also
 * the flag's. */
#define JANITOR_MIN_S 0.05
#define JANITOR_MAX_S 60.0

static const opt opts[] = {
    {"--host", "LONGCTX_HOST", K_STR, F(host), 0, 0, "address to listen on (default 127.0.0.1)"},
    {"--port", "LONGCTX_PORT", K_INT, F(port), 0, 65535, "TCP port (default 5054; 0 = any free port)"},
    {"--data-dir", "LONGCTX_DATA_DIR", K_STR, F(data_dir), 0, 0,
     "where sessions live (default $XDG_DATA_HOME/longctx or ~/.local/share/longctx)"},
    {"--threads", "LONGCTX_THREADS", K_INT, F(threads), 1, 256, "HTTP worker threads (default 4)"},
    {"--max-connections", "LONGCTX_MAX_CONNECTIONS", K_INT, F(max_connections), 1, 100000,
     "concurrent connections (default 512)"},
    {"--max-body-bytes", "LONGCTX_MAX_BODY_BYTES", K_U64, F(max_body_bytes), 1, 4294967296.0,
     "request body limit → 413 (default 67108864 = 64 MiB)"},
    {"--max-chunk-bytes", "LONGCTX_MAX_CHUNK_BYTES", K_U32, F(max_chunk_bytes), 1, 1073741824.0,
     "text of one chunk → 413 (default 1048576)"},
    {"--max-chunks-per-request", "LONGCTX_MAX_CHUNKS_PER_REQUEST", K_U32, F(max_chunks_per_request), 1, 100000000.0,
     "chunks in one /evict/write → 413 (default 10000)"},
    {"--max-chunks-per-session", "LONGCTX_MAX_CHUNKS_PER_SESSION", K_U32, F(max_chunks_per_session), 1, 4000000000.0,
     "chunks in one session → 429 (default 10000000)"},
    {"--max-sessions", "LONGCTX_MAX_SESSIONS", K_U32, F(max_sessions), 1, 4000000000.0,
     "sessions (in RAM or hibernated) before new ones get 429 (default 100000)"},
    {"--max-sessions-in-ram", "LONGCTX_MAX_SESSIONS_IN_RAM", K_U32, F(max_sessions_in_ram), 1, 4000000000.0,
     "sessions kept in RAM; least-recently-used ones are hibernated beyond (default 1024)"},
    {"--max-mem-mb", "LONGCTX_MAX_MEM_MB", K_MB, F(max_mem_bytes), 1, 16777216.0,
     "RAM for all sessions; LRU hibernation beyond (default 4096)"},
    {"--max-inflight-body-mb", "LONGCTX_MAX_INFLIGHT_BODY_MB", K_MB, F(max_inflight_body_bytes), 1, 16777216.0,
     "request bodies buffered at once, all connections together → 429 (default 256)"},
    {"--client-max-connections", "LONGCTX_CLIENT_MAX_CONNECTIONS", K_U32, F(client_max_connections), 0, 100000,
     "open connections from one client address → 429 (default 0 = 7/8 of --max-connections)"},
    {"--client-rate", "LONGCTX_CLIENT_RATE", K_DBL, F(client_rate), 0, 1e9,
     "requests per second from one client address, sustained → 429 (default 10000; 0 = no limit)"},
    {"--client-burst", "LONGCTX_CLIENT_BURST", K_DBL, F(client_burst), 1, 1e9,
     "bucket size: requests one client address may send in one burst (default 20000)"},
    {"--idle-hibernate-s", "LONGCTX_IDLE_HIBERNATE_S", K_DBL, F(idle_hibernate_s), 0.01, 1e9,
     "the janitor hibernates sessions idle this long (default 1800)"},
    {"--janitor-interval-s", "LONGCTX_JANITOR_INTERVAL_S", K_DBL, F(janitor_interval_s), JANITOR_MIN_S, 86400,
     "how often the janitor runs (default min(60, idle/4))"},
    {"--embed-dim", "LONGCTX_EMBED_DIM", K_INT, F(embed_dim), 0, 65536,
     "dimension of the weight-free embedder (default 0 = its default; changing it makes old sessions unresumable)"},
    {"--upstream", "LONGCTX_UPSTREAM", K_STR, F(upstream), 0, 0,
     "OpenAI-compatible engine for /v1/* (unset = proxy disabled, 503)"},
    {"--upstream-timeout-s", "LONGCTX_UPSTREAM_TIMEOUT_S", K_DBL, F(upstream_timeout_s), 0.1, 86400,
     "an upstream silent this long gets 504 (default 600)"},
    {"--compact-tokens", "LONGCTX_COMPACT_TOKENS", K_U64, F(compact_tokens), 0, 1e12,
     "proxy: compact chat histories larger than this many tokens (default 0 = off)"},
    {"--parent-pid", "LONGCTX_PARENT_PID", K_INT, F(parent_pid), 0, 2147483647.0,
     "exit cleanly when this process dies (sidecar mode; default 0 = none)"},
    {"--idle-timeout-s", "LONGCTX_IDLE_TIMEOUT_S", K_INT, F(idle_timeout_s), 1, 86400,
     "close a keep-alive connection (or one still sending its request line and headers) idle this long (default 30)"},
    {"--body-timeout-s", "LONGCTX_BODY_TIMEOUT_S", K_INT, F(body_timeout_s), 1, 86400,
     "close a connection whose request body stops arriving for this long (default 10)"},
    {"--quiet", "LONGCTX_QUIET", K_BOOL, F(quiet), 0, 0, "no start-up banner or janitor log lines"},
    {"--log-format", "LONGCTX_LOG_FORMAT", K_STR, F(log_format), 0, 0,
     "text (default) or json: one JSON object per line, with an access line per request"},
    {"--log-file", "LONGCTX_LOG_FILE", K_STR, F(log_file), 0, 0, "append the log here instead of stderr; SIGHUP reopens it"},
    {"--store", "LONGCTX_STORE", K_STR, F(store), 0, 0,
     "postgresql://HOST:PORT[,HOST:PORT…]/DB?target_session_attrs=read-write: sessions shared by every node (docs/multinode.md; unset = embedded)"},
    {"--store-write-timeout-s", "LONGCTX_STORE_WRITE_TIMEOUT_S", K_DBL, F(store_write_timeout_s), 0.1, 86400,
     "a write the shared store has not confirmed (replicated) this long answers 503 (default 10)"},
    {"--store-reads", "LONGCTX_STORE_READS", K_STR, F(store_reads), 0, 0,
     "strict (default: each read asks PostgreSQL whether this node is behind) or notify (LISTEN-driven, no query when not behind)"},
    {"--auth-token", "LONGCTX_AUTH_TOKEN", K_STR, F(auth_token), 0, 0,
     "bearer token required on every route but /healthz (unset = none; prefer the variable: argv is visible in ps)"},
    {"--insecure-no-auth", "LONGCTX_INSECURE_NO_AUTH", K_BOOL, F(insecure_no_auth), 0, 0,
     "allow a non-loopback --host without a token (refused otherwise)"},
    {"--shutdown-grace-s", "LONGCTX_SHUTDOWN_GRACE_S", K_DBL, F(shutdown_grace_s), 0, 86400,
     "on SIGTERM/SIGINT, wait this long for in-flight requests before closing (default 10)"},
    /* the neural flags: keep them last and together (NN_FIRST) */
    {"--embed-model", "LONGCTX_EMBED_MODEL", K_STR, F(embed_model), 0, 0,
     "BERT embedder (GGUF file or Hugging Face folder): neural vectors computed in the background, fused into retrieval"},
    {"--rerank-model", "LONGCTX_RERANK_MODEL", K_STR, F(rerank_model), 0, 0,
     "cross-encoder reranker (GGUF or HF folder): reorders the fused top candidates of every store search (rescue, code)"},
    {"--nn-threads", "LONGCTX_NN_THREADS", K_INT, F(nn_threads), 1, 64, "threads of each neural model (default 1)"},
    {"--rerank-top", "LONGCTX_RERANK_TOP", K_INT, F(rerank_top), 1, 256,
     "fused candidates the reranker reorders (default 16)"},
    {"--rerank-deadline-ms", "LONGCTX_RERANK_DEADLINE_MS", K_DBL, F(rerank_deadline_ms), 0, 600000,
     "per query; past it the fused order is kept, used_rerank false (default 250; 0 = never rerank)"},
};
#define NN_FIRST 5   /* the last NN_FIRST entries of opts[] are the neural flags */

void lcx_svc_config_defaults(lcx_svc_config *c)
{
    memset(c, 0, sizeof *c);
    snprintf(c->host, sizeof c->host, "127.0.0.1");
    c->port = 5054;
    const char *x = getenv("XDG_DATA_HOME"), *h = getenv("HOME");
    if (x && *x) snprintf(c->data_dir, sizeof c->data_dir, "%s/longctx", x);
    else snprintf(c->data_dir, sizeof c->data_dir, "%s/.local/share/longctx", h && *h ? h : ".");
    c->threads = 4;
    c->max_connections = 512;
    c->max_body_bytes = 64ull << 20;
    c->max_chunk_bytes = 1u << 20;
    c->max_chunks_per_request = 10000;
    c->max_chunks_per_session = 10000000;
    c->max_sessions = 100000;
    c->max_sessions_in_ram = 1024;
    c->max_mem_bytes = 4096ull << 20;
    c->max_inflight_body_bytes = 256ull << 20;
    c->idle_hibernate_s = 1800;
    c->janitor_interval_s = 0;   /* 0 = derived from idle_hibernate_s (lcx__svc_janitor_interval) */
    c->embed_dim = 0;
    c->upstream_timeout_s = 600;
    c->idle_timeout_s = 30;
    c->body_timeout_s = 10;
    c->store_write_timeout_s = 10;
    c->shutdown_grace_s = 10;
    c->client_rate = 10000;
    c->client_burst = 20000;
    snprintf(c->log_format, sizeof c->log_format, "text");
    c->nn_threads = 1;
    c->rerank_top = 16;
    c->rerank_deadline_ms = 250;
}

static int set_value(lcx_svc_config *c, const opt *o, const char *v, const char *src, FILE *err)
{
    char *base = (char *)c + o->off;
    if (o->k == K_STR) {
        if (strlen(v) >= o->size) {
            fprintf(err, "longctx-svc: %s is too long (max %zu bytes)\n", src, o->size - 1);
            return LCX_EINVAL;
        }
        memcpy(base, v, strlen(v) + 1);
        return 0;
    }
    if (o->k == K_BOOL) {
        bool b;
        if (!strcmp(v, "1") || !strcasecmp(v, "true") || !strcasecmp(v, "yes") || !strcasecmp(v, "on")) b = true;
        else if (!*v || !strcmp(v, "0") || !strcasecmp(v, "false") || !strcasecmp(v, "no") || !strcasecmp(v, "off")) b = false;
        else {
            fprintf(err, "longctx-svc: %s: expected true/false, got '%s'\n", src, v);
            return LCX_EINVAL;
        }
        *(bool *)base = b;
        return 0;
    }
    char *e;
    errno = 0;
    double d = strtod(v, &e);
    if (errno || e == v || *e || d < o->lo || d > o->hi ||
        (o->k != K_DBL && d != (double)(long long)d)) {
        fprintf(err, "longctx-svc: %s: expected %s in %g..%g, got '%s'\n", src,
                o->k == K_DBL ? "a number" : "an integer", o->lo, o->hi, v);
        return LCX_EINVAL;
    }
    switch (o->k) {
    case K_INT: *(int *)base = (int)d; break;
    case K_U32: *(uint32_t *)base = (uint32_t)d; break;
    case K_U64: *(uint64_t *)base = (uint64_t)d; break;
    case K_MB: *(uint64_t *)base = (uint64_t)d << 20; break;
    case K_DBL: *(double *)base = d; break;
    default: break;
    }
    return 0;
}

void lcx_svc_usage(FILE *f, const char *prog)
{
    fprintf(f, "usage: %s serve [FLAGS]\n\n"
               "Runs the longctx HTTP service (rescue API, status page, code retrieval, OpenAI proxy).\n"
               "Every flag has an environment equivalent; flags win over the environment.\n\n",
            prog);
    for (size_t i = 0; i < LCX_ARRAY_LEN(opts); i++)
        fprintf(f, "  %-26s %-32s %s\n", opts[i].k == K_BOOL ? opts[i].flag : opts[i].flag, opts[i].env, opts[i].help);
    fprintf(f, "\n  %-26s %-32s %s\n", "--help", "", "this text");
    fprintf(f, "\nSIGINT/SIGTERM stop the server cleanly: new connections are refused, in-flight requests\n"
               "finish (up to --shutdown-grace-s), stores are flushed and closed, exit status 0.\n"
               "SIGHUP reopens --log-file (after logrotate moved it).\n");
}

static int apply_env(lcx_svc_config *c, FILE *err)
{
    for (size_t i = 0; i < LCX_ARRAY_LEN(opts); i++) {
        const char *v = getenv(opts[i].env);
        if (!v || !*v) continue;   /* an empty variable counts as unset */
        int rc = set_value(c, &opts[i], v, opts[i].env, err);
        if (rc) return rc;
    }
    return 0;
}

int lcx_svc_config_nn_env(lcx_svc_config *c, FILE *err)
{
    for (size_t i = LCX_ARRAY_LEN(opts) - NN_FIRST; i < LCX_ARRAY_LEN(opts); i++) {
        const char *v = getenv(opts[i].env);
        if (!v || !*v) continue;
        int rc = set_value(c, &opts[i], v, opts[i].env, err);
        if (rc) return rc;
    }
    return 0;
}

int lcx_svc_config_nn_flag(lcx_svc_config *c, int argc, char **argv, int *i, FILE *err)
{
    const char *a = argv[*i];
    for (size_t k = LCX_ARRAY_LEN(opts) - NN_FIRST; k < LCX_ARRAY_LEN(opts); k++) {
        size_t fl = strlen(opts[k].flag);
        if (strncmp(a, opts[k].flag, fl) || (a[fl] != 0 && a[fl] != '=')) continue;
        const char *val = a[fl] == '=' ? a + fl + 1 : NULL;
        if (!val) {
            if (*i + 1 >= argc) {
                fprintf(err, "longctx: %s needs a value\n", opts[k].flag);
                return LCX_EINVAL;
            }
            val = argv[++*i];
        }
        int rc = set_value(c, &opts[k], val, opts[k].flag, err);
        return rc ? rc : 1;
    }
    return 0;
}

void lcx_svc_nn_usage(FILE *f)
{
    for (size_t i = LCX_ARRAY_LEN(opts) - NN_FIRST; i < LCX_ARRAY_LEN(opts); i++)
        fprintf(f, "  %-26s %-32s %s\n", opts[i].flag, opts[i].env, opts[i].help);
}

int lcx__svc_config_parse(lcx_svc_config *c, int argc, char **argv, FILE *err)
{
    int rc = apply_env(c, err);
    if (rc) return rc;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) return 1;
        const opt *o = NULL;
        const char *val = NULL;
        for (size_t k = 0; k < LCX_ARRAY_LEN(opts) && !o; k++) {
            size_t fl = strlen(opts[k].flag);
            if (!strncmp(a, opts[k].flag, fl) && (a[fl] == 0 || a[fl] == '=')) {
                o = &opts[k];
                if (a[fl] == '=') val = a + fl + 1;
            }
        }
        if (!o) {
            fprintf(err, "longctx-svc: unknown flag '%s' (see --help)\n", a);
            return LCX_EINVAL;
        }
        if (!val && o->k == K_BOOL) val = "true";
        if (!val) {
            if (i + 1 >= argc) {
                fprintf(err, "longctx-svc: %s needs a value\n", o->flag);
                return LCX_EINVAL;
            }
            val = argv[++i];
        }
        if ((rc = set_value(c, o, val, o->flag, err))) return rc;
    }
    if (!c->data_dir[0]) {
        fprintf(err, "longctx-svc: --data-dir must not be empty\n");
        return LCX_EINVAL;
    }
    if (strcmp(c->log_format, "text") && strcmp(c->log_format, "json")) {
        fprintf(err, "longctx-svc: --log-format: expected text or json, got '%s'\n", c->log_format);
        return LCX_EINVAL;
    }
    c->janitor_interval_s = lcx__svc_janitor_interval(c);
    return 0;
}

double lcx__svc_janitor_interval(const lcx_svc_config *c)
{
    if (c->janitor_interval_s > 0) return c->janitor_interval_s;
    double iv = c->idle_hibernate_s / 4;
    if (!(iv >= JANITOR_MIN_S)) return JANITOR_MIN_S;   /* (also a NaN or negative idle time) */
    return iv > JANITOR_MAX_S ? JANITOR_MAX_S : iv;
}

/* --parent-pid: polls the parent every 250 ms; when it is gone (or we were re-parented)
 * it sends SIGTERM to this process, which the sigwait() below turns into a clean stop. */
static void *parent_watch(void *ud)
{
    pid_t ppid = (pid_t)(intptr_t)ud;
    bool was_parent = getppid() == ppid;
    for (;;) {
        struct timespec ts = {0, 250 * 1000000L};
        nanosleep(&ts, NULL);
        bool gone = (kill(ppid, 0) < 0 && errno == ESRCH) || (was_parent && getppid() != ppid);
        if (gone) {
            fprintf(stderr, "longctx-svc: parent process %d exited, shutting down\n", (int)ppid);
            kill(getpid(), SIGTERM);
            return NULL;
        }
    }
}

int lcx_svc_serve_main(int argc, char **argv)
{
    lcx_svc_config cfg;
    lcx_svc_config_defaults(&cfg);
    int rc = lcx__svc_config_parse(&cfg, argc, argv, stderr);
    if (rc == 1) { lcx_svc_usage(stdout, "longctx-svc"); return 0; }
    if (rc) return 2;

    /* Block the stop signals in every thread (MHD's and the janitor inherit this mask) and
     * take them synchronously here, so shutdown runs in a normal context, not a handler. */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGHUP);   /* reopens --log-file (logrotate) */
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);

    lcx_svc *svc;
    char msg[512];
    rc = lcx__svc_start(&cfg, &svc, msg, sizeof msg);
    if (rc < 0) {
        fprintf(stderr, "longctx-svc: %s\n", msg[0] ? msg : lcx_strerror(rc));
        return 1;
    }
    if (!cfg.quiet)
        lcx__svc_logf(svc->log, "info", "version %s, listening on http://%s:%d (data dir %s, %d threads, embedder %s)",
                LCX_VERSION, cfg.host, svc->bound_port, cfg.data_dir, cfg.threads, lcx_embedder_fingerprint(svc->emb));
    if (cfg.parent_pid > 0) {
        pthread_t t;
        if (pthread_create(&t, NULL, parent_watch, (void *)(intptr_t)cfg.parent_pid) == 0) pthread_detach(t);
    }
    int sig = 0;
    while (sigwait(&set, &sig) != 0 || sig == SIGHUP)
        if (sig == SIGHUP) lcx__svc_on_sighup(svc), sig = 0;
    if (!cfg.quiet) lcx__svc_logf(svc->log, "info", "%s received, shutting down", sig == SIGINT ? "SIGINT" : "SIGTERM");
    /* graceful: no new connections, in-flight requests finish, then the stores flush */
    uint64_t left = lcx__svc_drain(svc, cfg.shutdown_grace_s);
    if (left && !cfg.quiet)
        lcx__svc_logf(svc->log, "warn", "%llu request(s) still running after %.1f s, closing them",
                (unsigned long long)left, cfg.shutdown_grace_s);
    svc->stop_line = !cfg.quiet;   /* "stopped cleanly", written by lcx__svc_stop last */
    lcx__svc_stop(svc);
    return 0;
}
