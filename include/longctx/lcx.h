/* liblongctx — the retrieval core's contract.
 *
 * In-memory hybrid search:
 *
 *   lcx_embedder *emb;  lcx_embedder_hash_new(0, &emb);      // weight-free default
 *   lcx_index *ix;      lcx_index_new(emb, &ix);
 *   lcx_index_add(ix, "int parse_header(buf *b)", 24, NULL, NULL);
 *   lcx_search_opts o = lcx_search_defaults();  o.top_k = 8;
 *   lcx_hit hits[8];
 *   int n = lcx_index_search(ix, "parse header", 12, &o, hits, 8);   // n >= 0 hits, or LCX_E*
 *   lcx_index_free(ix);  lcx_embedder_free(emb);
 *
 * Persistent, crash-safe store (one per eviction session or per code scope):
 *
 *   lcx_store *s;
 *   int rc = lcx_store_open("/var/lib/longctx/sessions/ab12", emb, NULL, &s);
 *   lcx_chunk c = lcx_chunk_init();  c.text = "..."; c.text_len = 3; c.tok_start = 0; c.tok_end = 255;
 *   rc = lcx_store_append(s, &c, 1, NULL);      // durable (fsync'd) when it returns 0
 *   n  = lcx_store_search(s, "question", 8, &o, hits, 8);
 *   lcx_store_close(s);
 *
 * Sessions (the rescue API's state): lcx_sessions maps session ids to stores, hibernates
 * idle or least-recently-used ones to disk and resumes them on demand.
 *
 * Conventions: every fallible function returns 0 (or a count) on success and a negative
 * LCX_E* code on failure (lcx_strerror()); nothing here exits or aborts. Lengths are in
 * bytes unless stated. Text must be UTF-8 (callers validate untrusted input first).
 */
#ifndef LONGCTX_LCX_H
#define LONGCTX_LCX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "longctx/lcx_err.h"
#include "longctx/lcx_limits.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------------------
 * Lexical tokenizer (src/text). Unicode-aware: words are case-folded (utf8proc), numbers
 * are kept whole ("481729"; "90210-ALPHA" gives "90210", "alpha" and "90210-alpha"), and
 * code identifiers are emitted whole and split on camelCase / snake_case / digits
 * ("parseHTTPHeader" → "parsehttpheader", "parse", "http", "header").
 * The callback gets each token (case-folded bytes, valid only during the call) and its
 * kind; returning non-zero stops tokenization (lcx_tokenize then returns that value). */
enum lcx_token_kind {
    LCX_TOK_WORD = 0,    /* plain word */
    LCX_TOK_NUMBER = 1,  /* digits, possibly with internal . , - _ : joined parts */
    LCX_TOK_IDENT = 2,   /* a whole compound identifier or code token (snake_case, camelCase, a.b) */
    LCX_TOK_PART = 3     /* one part of a split identifier */
};
typedef int (*lcx_token_cb)(const char *tok, size_t len, int kind, void *ud);
int lcx_tokenize(const char *text, size_t len, lcx_token_cb cb, void *ud);

/* ------------------------------------------------------------------------------------
 * Embedders (src/embed). Output vectors are L2-normalised float32 of embedder dim.
 * An embedder is immutable after creation and safe to call from many threads. Its
 * fingerprint (name, version, dim, parameters) is stored with every store; a store made
 * with another fingerprint is refused (LCX_EMISMATCH) rather than searched wrongly. */
typedef struct lcx_embedder lcx_embedder;

typedef struct lcx_embedder_ops {
    /* Embed n texts into out (n × dim, row-major). Must L2-normalise. Thread-safe. */
    int (*embed)(void *self, const char *const *texts, const size_t *lens, int n, float *out);
    void (*destroy)(void *self);
} lcx_embedder_ops;

/* Wraps a user embedder (e.g. a BERT-family encoder). Takes ownership of self (destroy is
 * called by lcx_embedder_free, also when this function fails). fingerprint is copied. */
int lcx_embedder_new(const lcx_embedder_ops *ops, void *self, int dim, const char *fingerprint,
                     lcx_embedder **out);
/* The weight-free default: hashed word unigrams/bigrams + character n-grams + number and
 * identifier features, signed feature hashing into dim (0 = default 256), L2-normalised. */
int lcx_embedder_hash_new(int dim, lcx_embedder **out);
void lcx_embedder_free(lcx_embedder *e);
int lcx_embedder_dim(const lcx_embedder *e);
const char *lcx_embedder_fingerprint(const lcx_embedder *e);
int lcx_embed(const lcx_embedder *e, const char *const *texts, const size_t *lens, int n, float *out);

/* Exact inner product of two float vectors (AVX2, AVX-512 dispatched, scalar reference). */
float lcx_dot_f32(const float *a, const float *b, size_t n);

/* ------------------------------------------------------------------------------------
 * Search options and results (shared by lcx_index and lcx_store). */
typedef enum {
    LCX_FUSE_LINEAR = 0, /* alpha·dense + (1−alpha)·bm25, each min-max normalised over the candidates */
    LCX_FUSE_RRF = 1,    /* Σ 1/(60 + rank) over the two candidate lists */
    LCX_FUSE_SCORE = 2   /* alpha·max(0, dense) + (1−alpha)·bm25/max bm25: the cosine unnormalised, so
                          * near-zero dense noise cannot bury a strong lexical match (docs/core.md) */
} lcx_fusion;

typedef struct {
    int top_k;           /* hits wanted (≥ 1; LCX_EINVAL otherwise) */
    float alpha;         /* LINEAR, SCORE: weight of the dense score, 0..1 (default 0.5; clamped) */
    lcx_fusion fusion;   /* default LCX_FUSE_SCORE */
    int prefilter;       /* candidates taken from each component before fusion (default 32, raised to
                          * ≥ top_k, capped at 4096) */
    float score_floor;   /* hits whose final score is below are dropped (default 0) */
    bool use_rerank;     /* re-score the best 16 fused candidates with the weight-free reranker:
                          * final = 0.7·fused + 0.3·overlap (default true; docs/core.md); with a
                          * neural channel that has a cross-encoder, that reorders them too */
    bool expand_query;   /* BM25 also looks up each query word's prefixes the index knows and its code
                          * synonyms (attributes → attr, obtain → get) at half weight: doc prose asking
                          * for code (default false; the code retrieval sets it; docs/core.md) */
    struct lcx_search_info *info;   /* out (may be NULL): what a store search used (neural channel) */
} lcx_search_opts;

/* Filled by lcx_store_search when o->info is set (zeros otherwise). */
typedef struct lcx_search_info {
    bool used_neural;    /* a neural ranking was fused in (the store had neural vectors) */
    bool used_rerank;    /* the cross-encoder reordered the top candidates within the deadline */
    bool rerank_overrun; /* it was asked and ran past its deadline: the fused order was kept */
    uint32_t neural_ready;   /* chunks of the store with a neural vector when it searched */
    float base_dense;    /* with a neural channel: the best hashed-dense cosine among the store's own
                          * top top_k (before the neural ranking was fused in), an absolute measure
                          * the fused RRF scores (and neural-only hits, dense 0) no longer give */
} lcx_search_info;

lcx_search_opts lcx_search_defaults(void);

typedef struct {
    uint32_t id;   /* document / chunk id (dense, insertion order, stable) */
    float score;   /* final fused (and reranked) score, 0..1, higher is better; ties → lower id */
    float dense;   /* cosine of the query and the stored (8-bit) document vector */
    float bm25;    /* raw BM25 score of the document (0 when no query term occurs in it) */
} lcx_hit;

/* ------------------------------------------------------------------------------------
 * In-memory hybrid index (src/index): incremental BM25 inverted index + flat dense
 * vectors. Appends never rebuild anything. Not internally synchronised: one writer, or
 * many readers (lcx_store wraps it with a lock). The embedder is borrowed and must
 * outlive the index. */
typedef struct lcx_index lcx_index;

int lcx_index_new(const lcx_embedder *emb, lcx_index **out);
void lcx_index_free(lcx_index *ix);
/* Adds one document. vec: its embedding (dim floats, L2-normalised) or NULL to embed text.
 * *id_out (may be NULL) receives the new id. */
int lcx_index_add(lcx_index *ix, const char *text, size_t len, const float *vec, uint32_t *id_out);
/* Marks a document deleted; it is never returned again. */
int lcx_index_remove(lcx_index *ix, uint32_t id);
uint32_t lcx_index_count(const lcx_index *ix); /* live documents */
/* Best hits for the query, best first. Returns the number written (≤ max_out). */
int lcx_index_search(const lcx_index *ix, const char *q, size_t qlen, const lcx_search_opts *o,
                     lcx_hit *out, int max_out);   /* o may be NULL (defaults) */

/* ------------------------------------------------------------------------------------
 * Persistent store (src/store): append-only, crash-safe (an acknowledged append survives
 * kill -9 at any moment), fast reopen without re-embedding. All functions are thread-safe
 * (internal rwlock: appends exclusive, searches shared). */
typedef enum { LCX_FT_NONE = 0, LCX_FT_CODE = 1, LCX_FT_PROSE = 2, LCX_FT_CONFIG = 3 } lcx_file_type;

typedef struct {
    const char *text;   uint32_t text_len;
    /* eviction spans (rescue); -1 when unused */
    int64_t tok_start, tok_end;  /* token_range [tok_start, tok_end] as the engine sent it */
    int32_t layer;
    int32_t round;
    float score;                 /* the engine's write-time score */
    /* code chunks (scopes); NULL / 0 when unused */
    const char *path;   uint32_t path_len;   /* file path relative to the scope root */
    uint32_t line_start, line_end;           /* 1-based, inclusive */
    lcx_file_type file_type;
} lcx_chunk;

static inline lcx_chunk lcx_chunk_init(void)
{
    lcx_chunk c = {0};
    c.tok_start = c.tok_end = -1;
    c.layer = c.round = -1;
    return c;
}

typedef struct lcx_nnq lcx_nnq;
typedef struct {
    uint32_t max_text_len;   /* per chunk (default 1 MiB); longer → LCX_ELIMIT */
    uint32_t max_chunks;     /* per store (default 10,000,000) */
    lcx_nnq *nn;             /* neural channel (below), borrowed; NULL = none */
    bool nn_reset;           /* with nn: drop neural vectors made by another model instead of
                              * refusing the store (`longctx reembed`) */
} lcx_store_opts;

typedef struct lcx_store lcx_store;

/* Opens or creates the store in directory dir (created 0700). opts may be NULL (defaults).
 * The embedder is borrowed and must outlive the store. Uses the snapshot when it matches
 * the log (fast: mmap), and replays the log after it. *out is NULL on failure.
 * LCX_EMISMATCH: made by another embedder; LCX_ECORRUPT: failed validation (reported,
 * never half-loaded; a torn tail from a crash is not corruption: it is truncated away);
 * LCX_EIO: file system errors. Format: docs/storage-format.md.
 * At most one open handle per directory, process-wide and across processes: open takes an
 * exclusive lock on the log, and a second open fails with LCX_EEXIST (the lock dies with
 * its process, so a crash never leaves a store locked). */
int lcx_store_open(const char *dir, const lcx_embedder *emb, const lcx_store_opts *opts, lcx_store **out);
/* Writes a snapshot first when ≥ 1024 chunks or any tombstone arrived since the last one.
 * NULL is a no-op. No other thread may use s during or after the call. */
void lcx_store_close(lcx_store *s);
/* Appends n chunks atomically: all or none; durable on disk (written + fdatasync'd) when
 * it returns 0. Text and path are copied. *first_id (may be NULL) receives the id of the
 * first new chunk. LCX_ELIMIT: a text over max_text_len, a path over 4096 bytes, the
 * store over max_chunks, or a batch over 1 GiB or 16M chunks; LCX_EIO: write/fsync failed (nothing
 * was added); LCX_ESTATE: an earlier durable batch could not be published (OOM): reopen. */
int lcx_store_append(lcx_store *s, const lcx_chunk *c, int n, uint32_t *first_id);
/* Two-phase append, for pipelines that keep several batches in flight:
 *
 *   lcx_store_prepared *p;
 *   rc = lcx_store_prepare(s, c, n, &p);     // embed + tokenize + record; no writer lock
 *   ...                                      // (c may be freed now; prepare batch N+1 here)
 *   if (!rc) rc = lcx_store_commit(s, p, &first_id);   // log write + fdatasync + publish
 *   lcx_store_prepared_free(p);
 *
 * lcx_store_prepare does all the per-chunk work (validation, embedding, tokenization, the
 * log record) without the store's writer lock, on the calling thread plus worker threads
 * for large batches, so it runs while another batch commits. It copies everything it needs
 * from c (the caller may free c when it returns). Same argument checks and errors as
 * lcx_store_append (LCX_EINVAL, LCX_ELIMIT, LCX_ENOMEM); *out is NULL on failure.
 * lcx_store_commit makes the batch durable and visible exactly like lcx_store_append (all
 * or none; durable when it returns 0; commits are ordered as called; LCX_ELIMIT when the
 * store would exceed max_chunks; LCX_EIO, LCX_ESTATE as for append). A prepared batch can
 * be committed once (LCX_ESTATE afterwards), only to the store that prepared it
 * (LCX_EINVAL), and must be freed before that store is closed; freeing it without
 * committing discards it. lcx_store_prepared_free(NULL) is a no-op. */
typedef struct lcx_store_prepared lcx_store_prepared;
int lcx_store_prepare(lcx_store *s, const lcx_chunk *c, int n, lcx_store_prepared **out);
int lcx_store_commit(lcx_store *s, lcx_store_prepared *p, uint32_t *first_id);
void lcx_store_prepared_free(lcx_store_prepared *p);
/* Tombstones every live chunk whose path equals path (used when a file changes or goes);
 * durable when it returns. Returns how many were removed (0 when none). */
int lcx_store_delete_path(lcx_store *s, const char *path, size_t path_len);
/* The reads below take a non-const handle: they first publish a batch that an earlier big
 * append left deferred (acknowledged and durable, not yet searchable), and take locks. */
uint32_t lcx_store_count(lcx_store *s);                /* live chunks */
/* Copies chunk id into *out; its pointers stay valid until lcx_store_close.
 * LCX_ENOTFOUND: no such id or tombstoned; LCX_ECORRUPT: the text failed its checksum. */
int lcx_store_get(lcx_store *s, uint32_t id, lcx_chunk *out);
int lcx_store_search(lcx_store *s, const char *q, size_t qlen, const lcx_search_opts *o,
                     lcx_hit *out, int max_out);
/* Writes a compact snapshot (index + vectors) so the next open is fast; the log stays the
 * source of truth. A no-op when nothing changed since the last snapshot. Appends wait
 * meanwhile; searches do not. */
int lcx_store_snapshot(lcx_store *s);
const char *lcx_store_fingerprint(const lcx_store *s);
/* Approximate bytes of RAM the store holds (index, metadata, snapshot mapping). */
size_t lcx_store_mem_bytes(lcx_store *s);
/* Offline validation of a store directory (every log record and snapshot section is
 * checksummed); msg receives a human-readable verdict. 0 when valid (a torn log tail is
 * reported in msg but is not an error: open truncates it), LCX_ECORRUPT otherwise. */
int lcx_store_validate(const char *dir, char *msg, size_t msg_len);

/* ------------------------------------------------------------------------------------
 * Neural channel (src/store/nnvec.c, docs/neural.md "In the product"): a second, optional
 * vector family computed in the background by a slow embedder (a BERT model). Appends stay
 * as fast as without it (lexical + hashed vectors, durable, acknowledged); one worker
 * thread embeds the chunks of every attached store in batches, persists the rows in the
 * store directory (neural.vec: derived data, re-derived on open when missing or torn) and
 * publishes them; lcx_store_search fuses the neural ranking with the store's own by RRF
 * (chunks without a neural vector yet simply lack that rank) and, with a reranker, lets it
 * reorder the fused top candidates under a deadline. A store whose neural vectors came
 * from another embedder (fingerprint) is refused (LCX_EMISMATCH; lcx_store_open_detail
 * names both) unless opened with nn_reset. Attach with lcx_store_opts.nn. */
typedef int (*lcx_rerank_fn)(void *ud, const char *q, size_t qlen, const char *const *docs,
                             const size_t *lens, int n, float *scores);   /* higher = better */
typedef struct {
    int batch;               /* chunks per embed call (default 8) */
    const lcx_embedder *query_emb;   /* embeds queries (NULL: emb). A second handle on the same
                              * model (same fingerprint, else LCX_EINVAL; lcx_nn_share makes
                              * one without a second copy of the weights) keeps a query from
                              * waiting behind the (niced) worker's batch on a shared model */
    bool no_worker;          /* no background thread (lcx_nnq_drain does the work) */
    lcx_rerank_fn rerank;    /* cross-encoder, NULL = none; called from search threads */
    void *rerank_ud;
    int rerank_top;          /* candidates it reorders (default 16) */
    double rerank_deadline_ms;   /* per search (default 250; ≤ 0: every rerank overruns) */
} lcx_nnq_opts;
typedef struct {
    uint64_t backlog;        /* chunks of the attached stores without a neural vector */
    uint64_t done;           /* neural vectors computed since lcx_nnq_new */
    uint64_t errors;         /* failed embed calls */
    uint32_t stores;         /* stores attached now */
    double rate_per_s;       /* vectors per second of embedding time (recent batches) */
    uint64_t rerank_calls, rerank_overruns;
    char last_error[160];
} lcx_nnq_stats;
/* emb is borrowed (must outlive the queue); its fingerprint is the neural fingerprint.
 * emb may be NULL with o->rerank: a rerank-only channel (no rows, no neural.vec).
 * Starts the worker thread unless o->no_worker. Free it after every attached store closed. */
int lcx_nnq_new(const lcx_embedder *emb, const lcx_nnq_opts *o, lcx_nnq **out);
void lcx_nnq_free(lcx_nnq *q);
void lcx_nnq_get_stats(lcx_nnq *q, lcx_nnq_stats *st);
/* Computes every missing neural vector of s (attached to q) on the calling thread. */
int lcx_nnq_drain(lcx_nnq *q, lcx_store *s);
/* The channel's cross-encoder over candidates that are not in a store (MultiQ's turns): reorders
 * the best min(n, rerank_top) of docs[0..n) (given best first) under the deadline, with the
 * store search's rules (slices, skip-when-too-slow and probe, counters). order[0..n) receives
 * the order to use (indices into docs; past rerank_top they keep their place). info (may be
 * NULL) gets used_rerank / rerank_overrun. Returns 1 reordered, 0 the given order kept (no
 * reranker, n 0, deadline, overrun), LCX_EINVAL. */
int lcx_nnq_rerank(lcx_nnq *q, const char *query, size_t qlen, const char *const *docs, const size_t *lens, int n,
                   int *order, lcx_search_info *info);
/* Chunks of s with a neural vector (0 when s has no channel). */
uint32_t lcx_store_nn_ready(lcx_store *s);
/* Why the last lcx_store_open on this thread failed, in words ("" when it gave no detail). */
const char *lcx_store_open_detail(void);

/* ------------------------------------------------------------------------------------
 * Sessions (src/store): id → store, with hibernation. Thread-safe. Session ids are any
 * UTF-8 string of 1..LCX_SESSION_ID_MAX bytes (lcx_limits.h); directory names are derived
 * from them safely. */
typedef struct lcx_sessions lcx_sessions;

typedef struct {
    const char *data_dir;       /* sessions live under data_dir/sessions/ */
    uint32_t max_sessions;      /* sessions in RAM before LRU hibernation (default 1024) */
    uint64_t max_mem_bytes;     /* RAM for all sessions before LRU hibernation (default 4 GiB) */
    double idle_hibernate_s;    /* janitor hibernates sessions idle this long (default 1800) */
    lcx_store_opts store;
} lcx_sessions_opts;

typedef struct {
    bool in_ram, on_disk;
    uint32_t n_chunks_in_ram, n_chunks_on_disk;
    char embedder_fingerprint[128];
    double hibernated_at;       /* unix seconds, 0 when never */
} lcx_session_status;

int lcx_sessions_open(const lcx_sessions_opts *o, const lcx_embedder *emb, lcx_sessions **out);
void lcx_sessions_close(lcx_sessions *ss);
/* Borrows the session's store (loading it from disk if hibernated; creating it when
 * create is true). LCX_ENOTFOUND when absent and !create; LCX_EINVAL for a bad id;
 * LCX_EMISMATCH when it was made with another embedder. Pair with lcx_sessions_release;
 * a borrowed store is never hibernated or closed under the caller. */
int lcx_sessions_acquire(lcx_sessions *ss, const char *id, bool create, lcx_store **out);
void lcx_sessions_release(lcx_sessions *ss, lcx_store *s);
/* Snapshot + drop from RAM (deferred to the last release when in use; 0 when already on
 * disk only); LCX_ENOTFOUND for an unknown session. */
int lcx_sessions_hibernate(lcx_sessions *ss, const char *id);
int lcx_sessions_resume(lcx_sessions *ss, const char *id);      /* LCX_EMISMATCH: other embedder */
/* LCX_ENOTFOUND for an unknown session (neither in RAM nor on disk). */
int lcx_sessions_status(lcx_sessions *ss, const char *id, lcx_session_status *st);
/* Hibernates sessions idle for longer than idle_hibernate_s; returns how many. */
int lcx_sessions_janitor(lcx_sessions *ss);
uint32_t lcx_sessions_active(lcx_sessions *ss);                 /* sessions in RAM */
uint64_t lcx_sessions_mem_bytes(lcx_sessions *ss);

/* ------------------------------------------------------------------------------------
 * Rescue helpers (src/retrieve), SPEC §2/§4. */
/* The rescue query signal: the text after the last case-insensitive "question:" marker,
 * else the last sentence ending in '?' when it ends within the last 1024 bytes, else the
 * last 512 bytes (on a UTF-8 boundary). Sets *off and *qlen (byte offset and length within msg). */
void lcx_rescue_query(const char *msg, size_t len, size_t *off, size_t *qlen);

#ifdef __cplusplus
}
#endif
#endif
