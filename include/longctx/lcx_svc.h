/* longctx-svc as a library: what a program needs to run the HTTP service (SPEC §2)
 * in-process (tools/longctx-svc, `longctx serve`), the service's configuration (so a CLI
 * opens the same data dir with the same embedder as the service would), and the MCP server
 * behind `longctx mcp`. The service's internals (server state, routes, flag parser) stay in
 * src/svc/svc.h. */
#ifndef LONGCTX_LCX_SVC_H
#define LONGCTX_LCX_SVC_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include "longctx/lcx_scope.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- configuration (config.c): every flag has a LONGCTX_* environment equivalent;
 * precedence flag > env > default. Sizes in bytes unless the name says otherwise. */
typedef struct {
    char host[256];                 /* --host / LONGCTX_HOST (127.0.0.1) */
    int port;                       /* --port / LONGCTX_PORT (5054; 0 = any free port) */
    char data_dir[4096];            /* --data-dir / LONGCTX_DATA_DIR ($XDG_DATA_HOME/longctx or ~/.local/share/longctx) */
    int threads;                    /* --threads / LONGCTX_THREADS (HTTP worker pool, default 4) */
    int max_connections;            /* --max-connections / LONGCTX_MAX_CONNECTIONS (512) */
    uint64_t max_body_bytes;        /* --max-body-bytes / LONGCTX_MAX_BODY_BYTES (64 MiB) → 413 */
    uint32_t max_chunk_bytes;       /* --max-chunk-bytes / LONGCTX_MAX_CHUNK_BYTES (1 MiB) → 413 */
    uint32_t max_chunks_per_request;/* --max-chunks-per-request / LONGCTX_MAX_CHUNKS_PER_REQUEST (10000) → 413 */
    uint32_t max_chunks_per_session;/* --max-chunks-per-session / LONGCTX_MAX_CHUNKS_PER_SESSION (10,000,000) → 429 */
    uint32_t max_sessions;          /* --max-sessions / LONGCTX_MAX_SESSIONS (100000 known sessions) → 429 */
    uint32_t max_sessions_in_ram;   /* --max-sessions-in-ram / LONGCTX_MAX_SESSIONS_IN_RAM (1024, LRU hibernation) */
    uint64_t max_mem_bytes;         /* --max-mem-mb / LONGCTX_MAX_MEM_MB (4096 MiB, LRU hibernation) */
    uint64_t max_inflight_body_bytes;/* --max-inflight-body-mb / LONGCTX_MAX_INFLIGHT_BODY_MB (256 MiB): request bodies
                                       buffered at once over all connections → 429 server_busy */
    uint32_t client_max_connections;/* --client-max-connections / LONGCTX_CLIENT_MAX_CONNECTIONS (0 = 7/8 of max_connections):
                                       open connections from one client address → 429 too_many_connections */
    double client_rate;             /* --client-rate / LONGCTX_CLIENT_RATE (10000 requests/s per client address, 0 = off) → 429 */
    double client_burst;            /* --client-burst / LONGCTX_CLIENT_BURST (20000): requests one client may send at once */
    double idle_hibernate_s;        /* --idle-hibernate-s / LONGCTX_IDLE_HIBERNATE_S (1800) */
    double janitor_interval_s;      /* --janitor-interval-s / LONGCTX_JANITOR_INTERVAL_S (0 = derived: min(60, idle/4), ≥ 0.05) */
    int embed_dim;                  /* --embed-dim / LONGCTX_EMBED_DIM (0 = embedder default) */
    char upstream[2048];            /* --upstream / LONGCTX_UPSTREAM ("" = proxy disabled) */
    double upstream_timeout_s;      /* --upstream-timeout-s / LONGCTX_UPSTREAM_TIMEOUT_S (600): silent upstream → 504 */
    uint64_t compact_tokens;        /* --compact-tokens / LONGCTX_COMPACT_TOKENS (0 = off): long-history compaction budget */
    int parent_pid;                 /* --parent-pid / LONGCTX_PARENT_PID (0 = none): exit when that process dies */
    int idle_timeout_s;             /* --idle-timeout-s / LONGCTX_IDLE_TIMEOUT_S (30): keep-alive idle, request head */
    int body_timeout_s;             /* --body-timeout-s / LONGCTX_BODY_TIMEOUT_S (10): a request body that stalls */
    bool quiet;                     /* --quiet / LONGCTX_QUIET: no per-start banner */
    char log_format[8];             /* --log-format / LONGCTX_LOG_FORMAT: "text" (default) or "json" (one object per line + access log) */
    char log_file[4096];            /* --log-file / LONGCTX_LOG_FILE ("" = stderr); SIGHUP reopens it */
    char store[4096];               /* --store / LONGCTX_STORE ("" = embedded store): postgresql://… shared store */
    double store_write_timeout_s;   /* --store-write-timeout-s / LONGCTX_STORE_WRITE_TIMEOUT_S (10): unconfirmed write → 503 */
    char store_reads[16];           /* --store-reads / LONGCTX_STORE_READS: "strict" (default) or "notify" (docs/multinode.md) */
    char auth_token[512];           /* --auth-token / LONGCTX_AUTH_TOKEN ("" = none): bearer token on every route but /healthz */
    bool insecure_no_auth;          /* --insecure-no-auth / LONGCTX_INSECURE_NO_AUTH: allow a non-loopback --host without a token */
    double shutdown_grace_s;        /* --shutdown-grace-s / LONGCTX_SHUTDOWN_GRACE_S (10): SIGTERM waits this long for in-flight requests */
    /* neural models (docs/neural.md "In the product"); "" = the weight-free default only */
    char embed_model[4096];         /* --embed-model / LONGCTX_EMBED_MODEL: GGUF file or HF folder, background vectors */
    char rerank_model[4096];        /* --rerank-model / LONGCTX_RERANK_MODEL: cross-encoder for rescue/code/MultiQ */
    int nn_threads;                 /* --nn-threads / LONGCTX_NN_THREADS (1): threads of each neural model */
    int rerank_top;                 /* --rerank-top / LONGCTX_RERANK_TOP (16): fused candidates the cross-encoder reorders */
    double rerank_deadline_ms;      /* --rerank-deadline-ms / LONGCTX_RERANK_DEADLINE_MS (docs/neural.md): then fused order */
} lcx_svc_config;

/* Fills *c with the defaults, then the LONGCTX_* environment (argv is not consulted). */
void lcx_svc_config_defaults(lcx_svc_config *c);

/* The neural flags (--embed-model, --rerank-model, --nn-threads, --rerank-top,
 * --rerank-deadline-ms) for commands with parsers of their own (`longctx index|query|mcp|
 * reembed`): the same table and rules as `serve`. First call applies their LONGCTX_*
 * variables (flags parsed later win). Returns 1 when argv[*i] was one (consumed, *i moved
 * past its value), 0 when not, LCX_EINVAL on a bad value (message on err). */
int lcx_svc_config_nn_env(lcx_svc_config *c, FILE *err);
int lcx_svc_config_nn_flag(lcx_svc_config *c, int argc, char **argv, int *i, FILE *err);
/* The neural models of a configuration, loaded (src/svc/nn_svc.c): the embedder's
 * background channel (lcx_nnq, for lcx_store_opts.nn / lcx_scopes_opts.store.nn) and the
 * reranker. *out is NULL (and 0 returned) when neither model is configured. A load error
 * puts the loader's sentence in msg. */
typedef struct lcx_svc_nn lcx_svc_nn;
int lcx_svc_nn_open(const lcx_svc_config *c, lcx_svc_nn **out, char *msg, size_t msg_len);
struct lcx_nnq *lcx_svc_nn_queue(lcx_svc_nn *n);    /* NULL without an embed model */
void lcx_svc_nn_close(lcx_svc_nn *n);               /* after every store using it closed */
/* Usage lines of the neural flags (for those commands' --help). */
void lcx_svc_nn_usage(FILE *f);

/* `serve` entry point shared by `longctx-svc serve` and `longctx serve`: parses flags
 * (argv[0] is the subcommand name and is skipped), starts, waits for SIGINT/SIGTERM, stops.
 * Returns the process exit status. */
int lcx_svc_serve_main(int argc, char **argv);
/* Prints the `serve` flags (prog names the program in the synopsis). */
void lcx_svc_usage(FILE *f, const char *prog);

/* ---- MCP server (`longctx mcp`): JSON-RPC 2.0 over newline-delimited stdio with the tools
 * search_codebase, list_projects, index_status, find_related, add_project. */
typedef struct {
    lcx_scopes *scopes;   /* borrowed: the projects the tools search */
} lcx_mcp;
/* Reads messages from in until EOF and writes one answer line per request to out (flushed
 * per line). Malformed messages get JSON-RPC errors, never a failure. Returns 0. */
int lcx_mcp_serve(lcx_mcp *m, FILE *in, FILE *out);

#ifdef __cplusplus
}
#endif
#endif
