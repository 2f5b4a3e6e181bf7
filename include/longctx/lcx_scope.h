/* liblongctx — code scopes: which project a prompt is about, indexing it, and retrieving
 * code from it (SPEC §2 /retrieve, §3). Used by longctx-svc (/index, /retrieve, the
 * OpenAI proxy), the MCP server and the `longctx index|query` CLI.
 *
 *   lcx_embedder *emb;  lcx_embedder_hash_new(0, &emb);
 *   lcx_scopes_opts so = lcx_scopes_defaults();  so.data_dir = "/var/lib/longctx";
 *   lcx_scopes *m;      lcx_scopes_open(&so, emb, &m);          // starts the inotify watcher
 *
 *   lcx_code_request rq = lcx_code_request_init();
 *   rq.prefill = "look at /home/me/proj/src/parser.c: it crashes";  rq.prefill_len = strlen(rq.prefill);
 *   rq.query = "why does parse_header crash";  rq.query_len = strlen(rq.query);
 *   rq.session_id = "abc";                                       // optional (binds the scope)
 *   lcx_code_result res;
 *   int rc = lcx_code_retrieve(m, &rq, &res);   // detect → index (Hot first) → search → splice
 *   if (rc == 0) puts(res.splice);               // "## Retrieved code context\n\n// …"
 *   else fprintf(stderr, "%s: %s\n", res.err_code, res.err_msg);
 *   lcx_code_result_free(&res);
 *   lcx_scopes_close(m);  lcx_embedder_free(emb);
 *
 * Ownership: every pointer inside a result struct is owned by that struct and released by
 * its _free function. The embedder is borrowed by lcx_scopes and must outlive it.
 * Threads: every lcx_scopes_* / lcx_code_* function is thread-safe (one mutex per scope
 * for indexing/search, one for the manager's tables).
 * Failure: negative LCX_E* codes; functions that take a result struct also fill its
 * err_code ("bad_scope", "not_found", "forbidden", "unreadable", "bad_request",
 * "scope_busy", "internal") and err_msg so that HTTP front ends can map them to 4xx/5xx.
 * Secrets (SPEC §3: .env*, *.key, *.pem, id_rsa*, id_ed25519*, *.p12, *.pfx, and anything
 * under secrets/ credentials/ .aws/ .ssh/ .gnupg/) are never opened, whatever the caller
 * asks; a scope path inside such a directory is refused with "forbidden". */
#ifndef LONGCTX_LCX_SCOPE_H
#define LONGCTX_LCX_SCOPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "longctx/lcx.h"

#ifdef __cplusplus
extern "C" {
#endif

#define LCX_SCOPE_PATH_MAX 4096
#define LCX_SPLICE_BUDGET 16384   /* SPEC §2: characters (code points), as the reference */

/* ------------------------------------------------------------------------------------
 * Scope detection (SPEC §3), stateless. Finds absolute paths in text (under the
 * reference's top-level directories, src/scope/detect.c; trailing .,;:!? stripped),
 * relative ones only when default_scope is given (kept iff the file exists there),
 * de-duplicates them by exact string, maps each to its project root by sentinel files,
 * picks the most-mentioned root, applies the monorepo rule and canonicalises with
 * realpath. default_scope alone never yields a scope. */
typedef struct {
    char *scope_path;        /* canonical root (malloc'd); NULL when nothing was detected */
    char scope_hash[17];     /* first 16 hex chars of sha256(scope_path) */
    const char *sentinel;    /* static: the sentinel file found at the root, "" when none */
    char **mentions;         /* canonical paths of the mentions under scope_path (malloc'd) */
    int n_mentions;
    int n_candidates;        /* path-like tokens seen in the text */
    char **paths;            /* distinct mentioned paths as written (relative ones joined to
                                default_scope), in order of first mention (malloc'd) */
    int n_paths;
    char **roots;            /* distinct sentinel roots of the mentions, first mention first */
    int n_roots;
} lcx_scope_detection;

/* text may be NULL (len 0). default_scope may be NULL. Returns 0 (also when nothing was
 * detected: scope_path == NULL) or LCX_ENOMEM. Never reads file contents. */
int lcx_scope_detect(const char *text, size_t len, const char *default_scope,
                     lcx_scope_detection *out);
void lcx_scope_detection_free(lcx_scope_detection *d);

/* Canonicalises a scope directory given by a caller (explicit scope, /index?scope=):
 * must be absolute, exist, be a readable directory, and not lie inside a forbidden
 * directory (secrets, /proc, /sys, /dev) nor be "/". canon receives the realpath.
 * Errors: LCX_EINVAL (relative, not a directory, forbidden; *why says which),
 * LCX_ENOTFOUND, LCX_EIO (unreadable). why (may be NULL) gets a static err_code. */
int lcx_scope_canonical(const char *path, char *canon, size_t canon_cap, const char **why);

/* The first sentinel (SPEC §3 order) present in directory dir, or NULL. */
const char *lcx_scope_sentinel_at(const char *dir);
/* scope_hash of a canonical path: 16 lowercase hex chars + NUL into out[17]. */
void lcx_scope_hash(const char *canon_path, char out[17]);
/* true when the path (absolute or scope-relative) names a secret file or lies in a
 * forbidden directory; such files are never opened. */
bool lcx_scope_is_secret(const char *path);

/* ------------------------------------------------------------------------------------
 * Scope manager: loaded scopes (each an lcx_store under data_dir/scopes/<scope_hash>/
 * plus a file manifest), the inotify watcher and the session → scopes binding table. */
typedef struct lcx_scopes lcx_scopes;

typedef struct {
    const char *data_dir;    /* required; scopes persist under data_dir/scopes/ */
    uint32_t hot_cap;        /* files in a Hot scope (default 1000) */
    uint32_t hot_min;        /* Hot smaller than this → index the whole Package (default 50) */
    uint32_t package_cap;    /* files in a Package scope (default 50,000) */
    uint32_t max_loaded;     /* scopes held in RAM; least recently used unloaded (default 32) */
    uint64_t max_file_bytes; /* larger files are skipped and counted (default 5 MiB) */
    bool watch;              /* inotify watcher (default true) */
    uint32_t debounce_ms;    /* quiet time before a burst of changes is applied (default 100) */
    float low_confidence;    /* confidence below this counts as a low turn (default 0.35) */
    lcx_store_opts store;    /* passed to lcx_store_open (zeros = defaults) */
} lcx_scopes_opts;

lcx_scopes_opts lcx_scopes_defaults(void);
int lcx_scopes_open(const lcx_scopes_opts *o, const lcx_embedder *emb, lcx_scopes **out);
void lcx_scopes_close(lcx_scopes *m);   /* NULL is a no-op; stops the watcher */

typedef struct {
    char scope_path[LCX_SCOPE_PATH_MAX];
    char scope_hash[17];
    char sentinel[24];
    char status[12];         /* "hot" | "package" | "none" */
    uint32_t files;          /* files indexed */
    uint32_t chunks;         /* live chunks */
    uint32_t symbols;        /* symbol definitions known */
    uint64_t bytes;          /* bytes of the indexed files */
    /* counts from the last walk (never fatal) */
    uint32_t skipped_binary, skipped_large, skipped_unreadable, skipped_secret, skipped_other;
    uint32_t files_read_last;   /* files (re)read by the last build/refresh (0 = all unchanged) */
    uint32_t watched_dirs;
    bool truncated;          /* the cap (hot_cap / package_cap) was hit */
    bool promote_failed;     /* the last Hot → Package rebuild failed; the old index serves */
    double build_ms;         /* duration of the last build/refresh */
} lcx_scope_info;

/* Progress of an indexing walk: files done so far, files found so far (grows while
 * walking), bytes read. Called from the indexing thread, every 256 files and at
 * the end; returning non-zero cancels (LCX_ESTATE). */
typedef int (*lcx_scope_progress)(uint64_t done, uint64_t found, uint64_t bytes, void *ud);

/* err_code for an indexing failure: "scope_busy" when the scope's store is held by
 * another longctx process sharing the data dir (LCX_EEXIST), "insufficient_storage" when
 * the data dir's disk or quota is full (LCX_ENOSPC), else "internal". */
const char *lcx_scope_err_code(int rc);

/* Indexes directory path explicitly (whole Package, not Hot) and keeps it loaded.
 * Reuses the persisted store: unchanged files (size, mtime, content hash) are not re-read
 * into the index. info may be NULL. err_code (may be NULL) gets a static code on error. */
int lcx_scopes_index(lcx_scopes *m, const char *path, lcx_scope_progress cb, void *ud,
                     lcx_scope_info *info, const char **err_code);
/* Files an index walk of root would consider (the walker's filters: skip list, secrets,
 * .gitignore, symlinks, files over max_file_bytes; nothing is read), counted up to max
 * (the walk stops there). For progress bars: a build's own count can differ (binary or
 * unreadable files, the scope's caps). */
uint64_t lcx_scope_count_files(const char *root, uint64_t max_file_bytes, uint64_t max);
/* Info of the loaded or persisted scope at path (canonicalised); LCX_ENOTFOUND if neither. */
int lcx_scopes_info(lcx_scopes *m, const char *path, lcx_scope_info *info);
/* Infos of the loaded scopes (most recent first), up to max; returns the count. */
int lcx_scopes_list(lcx_scopes *m, lcx_scope_info *out, int max);
uint32_t lcx_scopes_loaded(lcx_scopes *m);
/* Drops a scope from RAM (store closed, watches released); it stays on disk. */
int lcx_scopes_unload(lcx_scopes *m, const char *path);
/* Applies pending watcher events now (tests; normally the watcher thread does it). */
int lcx_scopes_sync(lcx_scopes *m);
/* Scope paths bound to a session (by earlier retrievals), newest first; returns count. */
int lcx_scopes_session(lcx_scopes *m, const char *session_id, char (*out)[LCX_SCOPE_PATH_MAX], int max);
/* Status text lines for GET /longctx/status (text/plain form) into *out
 * (malloc'd, NUL-terminated; caller frees):
 *   "[longctx] scope: PATH (HASH)\n[longctx] indexed: N files, M chunks, status S\n" per scope,
 *   or "[longctx] scope: none\n[longctx] indexed: 0 files, 0 chunks, status none\n".
 *   Returns bytes written or LCX_ENOMEM. */
int lcx_scopes_status_text(lcx_scopes *m, char **out);
/* The JSON array for the status route's "scopes" field (malloc'd text "[{…},…]"), least recently
 * used first; each entry also carries memory_mb (RAM of its tables and store). */
int lcx_scopes_status_json(lcx_scopes *m, char **out);
uint64_t lcx_scopes_mem_bytes(lcx_scopes *m);

/* ------------------------------------------------------------------------------------
 * Code retrieval (src/retrieve/code.c). */
typedef struct {
    const char *prefill; size_t prefill_len;   /* all message text scanned for paths */
    const char *query;   size_t query_len;     /* required, non-empty */
    int top_k;                                 /* 1..LCX_TOP_K_MAX (0 → 8) */
    const char *explicit_scope;                /* skips detection (may be NULL; "" = absent);
                                                  "ws:" = every loaded scope bound to the session */
    const char *default_scope;                 /* base for relative paths only (may be NULL) */
    const char *session_id;                    /* may be NULL: ephemeral, no binding */
    size_t budget;                             /* splice budget (0 → 16384) */
    bool async;                                /* a scope not built yet is built in the
                                                  background; the reply says "indexing" */
} lcx_code_request;

static inline lcx_code_request lcx_code_request_init(void)
{
    lcx_code_request r = {0};
    r.top_k = 8;
    return r;
}

typedef struct {
    char *text;              /* chunk text (malloc'd) */
    char *file_path;         /* absolute path (malloc'd) */
    uint32_t start_line, end_line;   /* 1-based inclusive */
    lcx_file_type file_type;
    float score;             /* 0..1 */
    bool symbol_hit;         /* pulled in because the query names a symbol it defines */
} lcx_code_hit;

typedef struct {
    lcx_code_hit *hits; int n_hits;
    lcx_scope_info scope;    /* the (first) scope searched; scope_path "" when none */
    int n_scopes;            /* scopes searched (more than 1 only for ws: queries) */
    char *splice;            /* SPEC §2 splice text, "" when no hits (malloc'd) */
    size_t splice_len;
    float confidence;        /* 0..1: top score, 1 when a named symbol was found */
    bool used_rerank;        /* the reranker ran: false when a cross-encoder passed its deadline */
    bool used_neural;        /* a neural ranking was fused in (--embed-model, rows present) */
    int paraphrases_count;
    const char *status;      /* static scope_status: "ready", "empty" (no chunks), "indexing"
                                (async build running, no hits), "error" (a failed Hot → Package
                                rebuild; the old index served), "no-scope" */
    bool retrieved;          /* a search ran (confidence is meaningful) */
    bool workspace;          /* explicit_scope "ws:" */
    const char *err_code;    /* static, NULL on success */
    char err_msg[256];
} lcx_code_result;

/* Resolve the scope (explicit_scope, else detection, else the session's active path
 * cluster; docs/scope.md "Scope resolution"), ensure indexed (Hot first, Package when Hot
 * is small or on promotion), search with symbol-aware boosting, build the splice. With a
 * session, binds the scope (and the other project roots the prefill names) to it.
 * Returns 0 (also when no scope was found: status "no-scope", n_scopes == 0, empty
 * splice), or a negative LCX_E* code with err_code/err_msg set. res is always
 * initialised; free it with lcx_code_result_free. */
int lcx_code_retrieve(lcx_scopes *m, const lcx_code_request *rq, lcx_code_result *res);
/* Chunks related to a file (MCP find_related): the file's symbols and first lines are
 * the query, the file itself excluded. file_path absolute; its scope is detected. */
int lcx_code_related(lcx_scopes *m, const char *file_path, int top_k, lcx_code_result *res);
void lcx_code_result_free(lcx_code_result *r);

/* SPEC §2 splice: "## Retrieved code context\n\n" then per hit
 * "// {file_path}:{start}-{end}\n```\n{text}\n```\n\n", with the reference's exact budget
 * (characters = code points): the heading counts as used; per hit remaining = budget −
 * used − (len("// path:a-b") + 12); remaining ≤ 200 stops; a longer text is cut to
 * remaining characters and ends with "\n... [truncated]"; used grows by the block's
 * length. No hits (or no room) → "". *out malloc'd. Returns 0 or LCX_ENOMEM. */
int lcx_code_splice(const lcx_code_hit *hits, int n, size_t budget, char **out, size_t *out_len);

#ifdef __cplusplus
}
#endif
#endif
