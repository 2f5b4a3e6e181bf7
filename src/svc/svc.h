/* longctx-svc internals: the HTTP server over liblongctx (SPEC §2).
 *
 * Adding a route (the only two steps):
 *
 *   // 1. write a handler (any .c file in src/svc)
 *   int my_handler(lcx_svc *svc, lcx_req *req, lcx_resp *resp)
 *   {
 *       const char *q = lcx__req_query(req, "scope");          // ?scope=... (decoded) or NULL
 *       cJSON *body;
 *       if (lcx__req_json(req, resp, &body) < 0) return 0;    // 400 already set
 *       ...
 *       lcx__resp_header(resp, "x-longctx-scope", "abc");
 *       lcx_buf *b = lcx__resp_json_buf(resp, 200);           // write JSON text into b
 *       lcx__buf_puts(b, "{\"ok\":true}");
 *       cJSON_Delete(body);
 *       return 0;
 *   }
 *   // 2. add a line to the table in routes.c:   {"POST", "/my/route", my_handler},
 *
 * Handler contract
 *   - Called on one of the server's pool threads once the whole request body has arrived
 *     (bodies are capped by --max-body-bytes before a handler ever runs). Handlers may
 *     block (disk, upstream); they run concurrently with other handlers, so shared state
 *     needs its own locking (lcx_sessions / lcx_store are thread-safe).
 *   - Fill *resp with exactly one of: lcx__resp_json_buf / lcx__resp_json_str /
 *     lcx__resp_text / lcx__resp_error / lcx__resp_mhd (streaming escape hatch). The return
 *     value is 0, or a negative LCX_E* code meaning "internal failure": the server then
 *     answers 500 {"error":{"code":"internal",...}} unless the handler already set a
 *     response. A handler that sets nothing gets 500 too.
 *   - Never exit/abort; bad input → lcx__resp_error(resp, 4xx, "code", "message").
 *
 * Streaming (the OpenAI proxy): build your own `struct MHD_Response *` (for example with
 * MHD_create_response_from_callback, MHD_SIZE_UNKNOWN → chunked transfer encoding) and
 * hand it to lcx__resp_mhd(resp, status, r); the server queues it and drops its reference.
 * The daemon runs with MHD_ALLOW_SUSPEND_RESUME, so a content-reader callback may return
 * 0 bytes while waiting (MHD polls it again) or the handler may use
 * MHD_suspend_connection(lcx__req_connection(req)) / MHD_resume_connection. Per-request
 * state that must outlive the handler (e.g. a curl easy handle feeding the reader) is
 * released in lcx__req_on_done's callback, which runs once the connection is done with
 * the request (completed, aborted by the client, or timed out).
 *
 * Errors: {"error":{"code":"<snake_case>","message":"<human text>"}} with a 4xx/5xx
 * status. Codes used by the core routes are listed in docs/http-api.md.
 *
 * Modules with state (code-aware retrieval, proxy): add an lcx_svc_module entry to
 * lcx__svc_modules[] in routes.c. Its init runs at server start (after the sessions are
 * open, before the listening socket accepts), fini at shutdown (after the HTTP daemon
 * has stopped, so no handler is running), and status adds lines / fields to
 * GET /longctx/status. Keep the module's state in svc->code / svc->proxy (or add a
 * pointer field below) — never in globals.
 */
#ifndef LCX_SVC_H
#define LCX_SVC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdint.h>
#include <pthread.h>
#include <stdio.h>
#include <cjson/cJSON.h>
#include "longctx/lcx.h"
#include "longctx/lcx_svc.h"
#include "longctx/lcx_scope.h"
#include "util/util.h"

struct MHD_Connection;
struct MHD_Response;
struct MHD_Daemon;

/* ---- configuration (config.c): lcx_svc_config and lcx_svc_config_defaults are public
 * (include/longctx/lcx_svc.h); the flag parser is the service's own. */
/* Parses `serve` flags (argv[0] is the subcommand name and is skipped) on top of *c.
 * Returns 0 ok, 1 when --help was printed (exit 0), LCX_EINVAL on a bad flag (message
 * printed to err). */
int lcx__svc_config_parse(lcx_svc_config *c, int argc, char **argv, FILE *err);
/* The janitor interval c asks for: janitor_interval_s when > 0, else min(60, idle/4) and at
 * least 0.05 s. The parser stores it; lcx__svc_start resolves it too, so a program starting
 * the service from lcx_svc_config_defaults gets the CLI's interval (0 would be a janitor
 * that never waits). */
double lcx__svc_janitor_interval(const lcx_svc_config *c);
/* lcx_svc_usage and lcx_svc_serve_main: include/longctx/lcx_svc.h */

/* ---- server state: one struct, passed to every handler. */
struct svc_cursor {                 /* next derived token position of a session (routes_evict.c) */
    struct svc_cursor *next;
    int64_t next_pos;
    char id[];
};
typedef struct lcx_svc lcx_svc;
typedef struct lcx_svc_module lcx_svc_module;

struct lcx_svc {
    lcx_svc_config cfg;
    lcx_embedder *emb;              /* the session embedder (owned) */
    lcx_sessions *sessions;         /* rescue sessions (owned) */
    struct MHD_Daemon *daemon;
    int listen_fd;
    int bound_port;                 /* actual port (useful with --port 0) */
    double started_ms;              /* lcx__now_ms() at start */

    pthread_mutex_t mu;             /* guards the fields below */
    uint32_t n_sessions_known;      /* sessions on disk or in RAM (for --max-sessions) */
    struct svc_cursor **cursors;    /* session → next token position (form-B writes), hashed */
    uint32_t n_cursor_buckets;
    uint64_t n_requests, n_errors;
    uint64_t body_inflight;         /* bytes of request bodies buffered now (atomic builtins) */
    uint64_t n_connections;         /* open HTTP connections (atomic builtins; /longctx/status) */
    char last_session[LCX_SESSION_ID_MAX + 1];   /* most recent /retrieve or proxy session ("" = none) */
    const char *last_session_via;   /* where it came from: "body", "x-session-affinity", "x-session-id" */
    uint64_t n_inflight;            /* requests between their head and their completion (atomic builtins; drain) */
    bool draining;                  /* SIGTERM drain: replies carry Connection: close (atomic builtins) */
    struct lcx_svc_metrics *metrics;/* GET /metrics counters (metrics.c), owned */
    struct lcx_svc_limits *limits;  /* per-client connection and rate limits (ratelimit.c), owned */
    struct lcx_svc_log *log;        /* --log-format / --log-file (log.c), owned */
    struct lcx_svc_recent *recent;  /* recent retrievals for /ui (ui.c), owned */
    uint64_t req_seq;               /* request ids (atomic builtins) */
    bool stop_line;                 /* lcx__svc_stop logs "stopped cleanly" (serve_main sets it) */

    /* janitor */
    pthread_t janitor;
    bool janitor_running;
    pthread_mutex_t jmu;
    pthread_cond_t jcv;
    bool stopping;

    /* module state (owned by the modules; see lcx__svc_modules) */
    void *code;                     /* code-aware retrieval (routes_code.c) */
    void *proxy;                    /* OpenAI proxy */
    void *pg;                       /* shared PostgreSQL store (store_pg.c), NULL when embedded */
    struct lcx_svc_nn *nn;          /* --embed-model / --rerank-model (nn_svc.c), NULL when neither */
};

struct lcx_svc_module {
    const char *name;
    int (*init)(lcx_svc *svc);                        /* may be NULL; < 0 aborts start-up */
    void (*fini)(lcx_svc *svc);                       /* may be NULL */
    /* Adds "[longctx] ...\n" lines to text (Accept: text/plain) or fields to json
     * (otherwise); exactly one of text/json is non-NULL. May be NULL. */
    void (*status)(lcx_svc *svc, lcx_buf *text, cJSON *json);
};
extern const lcx_svc_module lcx__svc_modules[];       /* routes.c, NULL-name terminated */

/* Life cycle (server.c). lcx__svc_start opens the embedder + sessions, binds the socket
 * (LCX_EEXIST: address in use; LCX_EIO other socket errors; msg gets a human sentence),
 * runs module inits, starts the HTTP daemon and the janitor. lcx__svc_stop stops accepting,
 * waits for running handlers, stops the janitor, runs module finis, closes every session
 * (durable state is already on disk; this snapshots/flushes) and frees svc. */
int lcx__svc_start(const lcx_svc_config *cfg, lcx_svc **out, char *msg, size_t msg_len);
void lcx__svc_stop(lcx_svc *svc);

/* ---- requests (server.c) */
typedef struct lcx_req lcx_req;
typedef struct lcx_resp lcx_resp;
typedef int (*lcx_handler)(lcx_svc *svc, lcx_req *req, lcx_resp *resp);

const char *lcx__req_method(const lcx_req *r);               /* "GET", "POST", ... */
const char *lcx__req_path(const lcx_req *r);                 /* decoded path, no query string */
/* Path parameter captured by a {name} segment of the route pattern, or NULL. */
const char *lcx__req_param(const lcx_req *r, const char *name);
/* Query-string argument (decoded by libmicrohttpd), NULL when absent. */
const char *lcx__req_query(const lcx_req *r, const char *name);
/* Request header (case-insensitive name), NULL when absent. */
const char *lcx__req_header(const lcx_req *r, const char *name);
/* The same two with the value's length (a value may hold a decoded %00; compare lengths
 * before trusting a C string). */
const char *lcx__req_query_n(const lcx_req *r, const char *name, size_t *len);
const char *lcx__req_header_n(const lcx_req *r, const char *name, size_t *len);
/* Raw body (NUL-terminated for convenience; may contain NULs), len may be NULL. */
const char *lcx__req_body(const lcx_req *r, size_t *len);
/* Parses the body as a JSON object. On failure sets a 400 (empty_body, invalid_utf8,
 * bad_json, not_object) on resp and returns LCX_EINVAL. The caller owns *out (cJSON_Delete).
 * allow_empty: an empty body yields an empty object instead of an error. */
int lcx__req_json(const lcx_req *r, lcx_resp *resp, bool allow_empty, cJSON **out);
/* true when the client asked for text/plain (Accept header). */
bool lcx__req_wants_text(const lcx_req *r);
struct MHD_Connection *lcx__req_connection(const lcx_req *r);
/* Registers fn(ud) to run once the request is finished (see header comment). One per request. */
void lcx__req_on_done(lcx_req *r, void (*fn)(void *ud), void *ud);

/* ---- responses (server.c) */
/* Returns a buffer (capped at 256 MiB) to write the JSON body into; status is the HTTP status. */
lcx_buf *lcx__resp_json_buf(lcx_resp *r, int status);
void lcx__resp_json_str(lcx_resp *r, int status, const char *json);     /* copies */
void lcx__resp_text(lcx_resp *r, int status, const char *content_type, const char *text, size_t len);
/* Sets {"error":{"code":code,"message":fmt...}} with status. Replaces any earlier body. */
void lcx__resp_error(lcx_resp *r, int status, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Adds a response header (copied). Up to 32 per response. */
void lcx__resp_header(lcx_resp *r, const char *name, const char *value);
/* Streaming escape hatch: the server queues mr with status (and the extra headers above)
 * and then destroys its reference. */
void lcx__resp_mhd(lcx_resp *r, int status, struct MHD_Response *mr);

/* ---- routing (routes.c) */
typedef struct {
    const char *method;     /* "GET", "POST", ... */
    const char *pattern;    /* "/sessions/{id}/hibernate": {name} matches one non-empty segment */
    lcx_handler fn;
} lcx_route;
extern const lcx_route lcx__svc_routes[];                /* NULL-method terminated */
#define LCX_ROUTE_MAX_PARAMS 4
typedef struct {
    int n;
    const char *name[LCX_ROUTE_MAX_PARAMS];             /* points into the pattern (not NUL-terminated at '}') */
    size_t name_len[LCX_ROUTE_MAX_PARAMS];
    char *value[LCX_ROUTE_MAX_PARAMS];                  /* malloc'd copies */
} lcx_route_params;
/* Finds the route for method+path. Returns the route, or NULL with *path_known set when
 * some route matched the path with another method (→ 405; allow receives "GET, POST"). */
const lcx_route *lcx__route_match(const char *method, const char *path, lcx_route_params *p,
                                 bool *path_known, char *allow, size_t allow_len);
void lcx__route_params_free(lcx_route_params *p);

/* ---- handlers of the core routes (routes_evict.c, routes_misc.c) */
int lcx__svc_h_healthz(lcx_svc *svc, lcx_req *req, lcx_resp *resp);
int lcx__svc_h_status(lcx_svc *svc, lcx_req *req, lcx_resp *resp);
int lcx__svc_h_evict_write(lcx_svc *svc, lcx_req *req, lcx_resp *resp);
int lcx__svc_h_evict_retrieve(lcx_svc *svc, lcx_req *req, lcx_resp *resp);
int lcx__svc_h_evict_dump(lcx_svc *svc, lcx_req *req, lcx_resp *resp);
int lcx__svc_h_session_hibernate(lcx_svc *svc, lcx_req *req, lcx_resp *resp);
int lcx__svc_h_session_resume(lcx_svc *svc, lcx_req *req, lcx_resp *resp);
int lcx__svc_h_session_status(lcx_svc *svc, lcx_req *req, lcx_resp *resp);

/* ---- /evict/write fast path (routes_evict.c), unit-tested against cJSON.
 * A strict single-pass parser for the write body that fills chunks directly: strings
 * without escapes point into the body (no copy), escaped ones are decoded once into one
 * arena, UTF-8 is validated in the same scan. It accepts only well-formed, fully valid
 * requests; anything else (malformed JSON, wrong types, out-of-range values, limits,
 * duplicate keys, \u0000, nesting > 64, numbers > 63 chars, bytes cJSON tolerates but
 * JSON does not) returns 1 and the handler re-parses with cJSON, which produces the
 * exact 4xx answer. So errors cost two parses; valid writes one. */
typedef struct {
    char id[LCX_SESSION_ID_MAX + 1];   /* session id from the body (has_id) */
    bool has_id;
    lcx_chunk *cs;           /* [m] chunks to append (texts point into the body or arena) */
    int64_t *derive_len;     /* [m] tokens to derive a range for, or -1 */
    int m, n_derive, cap;
    char *arena;             /* decoded escaped strings (capacity = body length + 1) */
    size_t arena_len;
} lcx_svc_wbatch;
/* 0: parsed and valid (w filled); 1: not handled, use the general path; LCX_ENOMEM.
 * query_id: ?session_id= or NULL. The body must outlive w. */
int lcx__svc_write_parse_fast(const char *body, size_t n, const char *query_id, uint32_t max_chunks,
                             uint32_t max_chunk_bytes, lcx_svc_wbatch *w);
void lcx__svc_wbatch_free(lcx_svc_wbatch *w);

/* ---- rescue helpers (rescue.c), pure functions, unit-tested */
/* Appends the SPEC §2 rescue system message for n chunks to out (the rule and
 * LCX_RESCUE_HEADER / LCX_RESCUE_MAX_CHARS: util.h, "Tier-3 rescue rules"). Writes nothing
 * when no block fits (or n <= 0). Returns the number of blocks written or a negative
 * LCX_E* code. */
int lcx__rescue_format(lcx_buf *out, const lcx_chunk *chunks, int n, size_t max_chars);

/* THE session-id rule of every route is lcx__session_id_ok (util.h), shared with
 * libtriatt's rescue client. */
/* Status of a schema error in a well-formed JSON body (missing or mistyped field, value
 * out of range): the reference's (FastAPI) 422. Malformed JSON stays 400. */
#define LCX_SVC_SCHEMA_STATUS 422
#define LCX_SVC_SESSION_ID_RULE LCX_SESSION_ID_RANGE " bytes of UTF-8 without control characters (no NUL)"
/* Records the session id of a /retrieve or proxy request (valid, len bytes) and where it
 * came from (a static string) for the status route's "session:" line. */
void lcx__svc_note_session(lcx_svc *svc, const char *id, size_t len, const char *via);
/* Maps an LCX_E* code from the core to an HTTP status + error code string. */
int lcx__svc_err_status(int rc, const char **code);

/* ---- neural models (nn_svc.c, docs/neural.md): start loads them (before the sessions
 * open: every store attaches to the channel), stop frees them (after every store closed);
 * queue is the lcx_store_opts.nn of the sessions and scopes; status/metrics add lines. */
int lcx__svc_nn_start(lcx_svc *svc, char *msg, size_t msg_len);
void lcx__svc_nn_stop(lcx_svc *svc);
struct lcx_nnq *lcx__svc_nn_queue(lcx_svc *svc);
void lcx__svc_nn_status(lcx_svc *svc, lcx_buf *text, cJSON *json);
void lcx__svc_nn_metrics(lcx_svc *svc, lcx_buf *t);

/* ---- shared store (store_pg.c, docs/multinode.md): hooks, no-ops unless --store is set.
 * cache_dir: where the local session copies live (data_dir/pg-cache, emptied at start:
 * PostgreSQL is the truth). write: replaces the local append + answer of /evict/write.
 * sync: before a read, catch the local copy up (read-your-writes across nodes).
 * session_op: hibernate (op 1) / resume (op 2) through PostgreSQL; true when answered. */
int lcx__svc_pg_init(lcx_svc *svc);
void lcx__svc_pg_fini(lcx_svc *svc);
void lcx__svc_pg_status(lcx_svc *svc, lcx_buf *text, cJSON *json);
void lcx__svc_pg_cache_dir(const lcx_svc_config *c, char *out, size_t n);
void lcx__svc_pg_write(lcx_svc *svc, lcx_req *req, lcx_resp *resp, const char *id, lcx_store *st, lcx_chunk *cs, int m);
void lcx__svc_pg_sync(lcx_svc *svc, const char *id);
bool lcx__svc_pg_session_op(lcx_svc *svc, lcx_resp *resp, const char *id, int op);
/* POST /index: fetch a scope another node published (before indexing), publish one this
 * node (re)read files for (after). */
void lcx__svc_pg_scope_fetch(lcx_svc *svc, const char *scope);
void lcx__svc_pg_scope_publish(lcx_svc *svc, const char *scope_path, const char *scope_hash);

/* ---- auth (auth.c): --auth-token. */
/* true when every address host resolves to is loopback (127.0.0.0/8, ::1). */
bool lcx__svc_host_is_loopback(const char *host);
/* Start-up rule: a non-loopback host needs a token or --insecure-no-auth. 0 or
 * LCX_EINVAL with msg set. */
int lcx__svc_auth_config_check(const lcx_svc_config *c, char *msg, size_t ml);
/* true when the request may pass (no token configured, /healthz, or the right
 * "Authorization: Bearer TOKEN"); false: resp holds the 401. */
bool lcx__svc_auth_ok(lcx_svc *svc, lcx_req *req, lcx_resp *resp);
/* Constant-time equality of two byte strings (time depends on the lengths only). */
bool lcx__svc_ct_equal(const char *a, size_t al, const char *b, size_t bl);

/* ---- metrics (metrics.c): relaxed atomics only on the request path. route: index in
 * lcx__svc_routes or -1 (no route matched / refused before routing). */
int lcx__svc_metrics_new(struct lcx_svc_metrics **out);
void lcx__svc_metrics_free(struct lcx_svc_metrics *m);
void lcx__svc_metrics_request(lcx_svc *svc, int route, int status, double ms);
void lcx__svc_metrics_spans(lcx_svc *svc, int n);      /* spans appended by /evict/write */
void lcx__svc_metrics_rescue(lcx_svc *svc, int hits);  /* one /evict/retrieve with hits chunks */
int lcx__svc_h_metrics(lcx_svc *svc, lcx_req *req, lcx_resp *resp);
/* "# HELP name help" + "# TYPE name type": the one writer of a metric's Prometheus head */
void lcx__svc_metric_head(lcx_buf *b, const char *name, const char *type, const char *help);

/* One acknowledged /evict/write batch (routes_evict.c): its spans, and the eviction rounds
 * it reports (runs of equal "round" values >= 0 in the batch). */
void lcx__svc_metrics_write(lcx_svc *svc, const lcx_chunk *cs, int n);

/* ---- per-client limits (ratelimit.c; docs/SECURITY.md). A client is its IP address. */
struct sockaddr;
struct lcx_svc_limits;
struct lcx_svc_client;
typedef struct {
    uint32_t clients, max_conns;
    uint64_t refused_conns, refused_rate, untracked;
    double rate, burst;
} lcx_svc_limits_stats;
/* The effective --client-max-connections (0 = derived from --max-connections). */
uint32_t lcx__svc_client_max_connections(const lcx_svc_config *c);
int lcx__svc_limits_new(const lcx_svc_config *c, struct lcx_svc_limits **out);
void lcx__svc_limits_free(struct lcx_svc_limits *l);
/* A connection opened from sa: its client entry (NULL: not tracked, never limited); *over
 * when the client now has more connections open than allowed. Pair with _close. */
struct lcx_svc_client *lcx__svc_client_open(struct lcx_svc_limits *l, const struct sockaddr *sa, bool *over);
void lcx__svc_client_close(struct lcx_svc_limits *l, struct lcx_svc_client *c);
/* Takes one request token: 0 = allowed, else the seconds until one is available. */
double lcx__svc_client_take(struct lcx_svc_limits *l, struct lcx_svc_client *c);
void lcx__svc_limits_stats(struct lcx_svc_limits *l, lcx_svc_limits_stats *st);
/* The 429 reply (OpenAI error shape, Retry-After; Connection: close for conns). */
void lcx__svc_limited_reply(lcx_resp *resp, bool conns, double wait_s, const lcx_svc_config *cfg);

/* ---- the service log (log.c): --log-format text|json, --log-file, SIGHUP reopen. */
struct lcx_svc_log;
typedef struct {
    const char *method, *route, *client, *request_id, *error_code;   /* error_code may be NULL */
    int status;
    double ms;
    long long bytes;          /* reply body bytes, -1 when streamed */
    uint64_t req_bytes;       /* request body bytes received */
} lcx_svc_access;
int lcx__svc_log_new(const lcx_svc_config *c, struct lcx_svc_log **out, char *msg, size_t ml);
void lcx__svc_log_free(struct lcx_svc_log *l);
/* Reopens --log-file (SIGHUP); 0 or LCX_EIO (the old file stays in use). */
int lcx__svc_log_reopen(struct lcx_svc_log *l);
bool lcx__svc_log_json(const struct lcx_svc_log *l);
uint64_t lcx__svc_log_dropped(struct lcx_svc_log *l);
/* An event line (level "info", "warn", "error"); l NULL → stderr. */
void lcx__svc_logf(struct lcx_svc_log *l, const char *level, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void lcx__svc_log_access(struct lcx_svc_log *l, const lcx_svc_access *a);   /* json only */
/* SIGHUP from lcx_svc_serve_main: reopens the log and says so in it. */
void lcx__svc_on_sighup(lcx_svc *svc);

/* ---- the dashboard (ui.c): GET /ui, /ui/app.js, /longctx/recent; the ring of recent
 * retrievals it shows (RAM only, lost at restart). */
struct lcx_svc_recent;
int lcx__svc_recent_new(struct lcx_svc_recent **out);
void lcx__svc_recent_free(struct lcx_svc_recent *r);
/* The two retrievals' shorthands (routes_evict.c, routes_code.c). */
void lcx__svc_recent_rescue(lcx_svc *svc, const char *session, const char *query, size_t qlen, const lcx_hit *hits,
                            int n);
void lcx__svc_recent_code(lcx_svc *svc, const char *session, const char *query, size_t qlen, const lcx_code_result *res);
int lcx__svc_h_ui(lcx_svc *svc, lcx_req *req, lcx_resp *resp);
int lcx__svc_h_ui_js(lcx_svc *svc, lcx_req *req, lcx_resp *resp);
int lcx__svc_h_recent(lcx_svc *svc, lcx_req *req, lcx_resp *resp);

/* SIGTERM drain (server.c): stops accepting (listening socket closed), then waits up to
 * grace_s for in-flight requests to finish; replies meanwhile carry Connection: close.
 * lcx__svc_stop follows. Returns the requests still running at the deadline. */
uint64_t lcx__svc_drain(lcx_svc *svc, double grace_s);

/* Resident set size of this process in bytes (0 when unknown). */
uint64_t lcx__svc_rss_bytes(void);

#endif
