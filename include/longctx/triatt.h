/* libtriatt — TriAttention V1/V2/V3 KV-cache eviction and the longctx rescue bridge.
 * Engine-agnostic: an engine hands it pre-RoPE queries, a key accessor and cell positions;
 * it hands back the cells to evict (and, optionally, ships their text to longctx-svc).
 *
 *   triatt_geometry g = {.n_layers = 28, .n_heads = 28, .n_kv_heads = 4, .head_dim = 128,
 *                        .n_rot = 128, .pairing = TRIATT_PAIR_HALF, .rope_theta = 1e6};
 *   triatt_config cfg; triatt_config_default(&cfg);
 *   char err[256];
 *   if (triatt_config_from_env(&cfg, err, sizeof err) < 0) { fprintf(stderr, "%s\n", err); ... }
 *   triatt_ctx *tc; int rc = triatt_init(&g, &cfg, &tc);
 *   triatt_keys keys = {.get16 = my_f16_rows, .ud = my_cache};   // or .get for float rows
 *   // every forward pass:  for each attention layer l:  triatt_observe_queries(tc, l, q, n_tok, 0);
 *   //                      then, once the pass is complete: triatt_end_pass(tc);
 *   // before each decode:  n = triatt_maybe_evict(tc, &keys, positions, n_cells, out_cells);
 *   //                      remove out_cells[0..n) from every layer (keep the survivors' positions)
 *   triatt_free(tc);
 *
 * Conventions: every fallible function returns 0 (or a count) on success and a negative
 * LCX_E* code (longctx/lcx_err.h) on failure; nothing here exits or aborts. Objects are
 * opaque, created by `int x_init(inputs..., x **out)` (the object last, NULL on failure;
 * the convention of liblongctx too, see lcx_err.h) and released by x_free (free of NULL is
 * a no-op). There is no
 * process-global mutable state: one object is used by one thread at a time (the scorer
 * runs its own worker threads internally). Positions are token positions (int32), cells
 * are slot indices of the engine's KV cache (0..n_cells-1). Scores are float32.
 *
 * The score (SPEC §5): per (layer, KV head) block with calibrated query centre c_f and
 * post-RoPE key K_f (complex pair f), A+iB = c·conj(K),
 *     s = Σ_f (A cs_f − B sn_f) + Σ_f (c_abs_f − |c_f|)·|K_f|,  cs/sn = mean over the 17
 * offsets o ∈ {1,2,4,…,65536} of cos/sin((P+o)ω_f). It predicts the cell's future
 * attention logit, so high = important; `direction` decides what that means for eviction.
 */
#ifndef LONGCTX_TRIATT_H
#define LONGCTX_TRIATT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "longctx/lcx_err.h"
#include "longctx/lcx_limits.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TRIATT_N_OFFSETS 17      /* offsets 1, 2, 4, ..., 65536 */
#define TRIATT_MAX_LAYERS 1024
#define TRIATT_MAX_HEADS 1024
#define TRIATT_MAX_HEAD_DIM 1024

/* ------------------------------------------------------------------------------------
 * Geometry
 * ---------------------------------------------------------------------------------- */
typedef enum {
    TRIATT_PAIR_HALF = 0,      /* NEOX / Qwen: pair f = (x[f], x[f + n_rot/2]) */
    TRIATT_PAIR_ADJACENT = 1   /* NORM / Llama GGUF: pair f = (x[2f], x[2f + 1]) */
} triatt_pairing;

typedef enum {
    TRIATT_SCALE_NONE = 0,
    TRIATT_SCALE_LINEAR = 1,   /* ω_f / factor (positions interpolated) */
    TRIATT_SCALE_YARN = 2      /* YaRN ramp between ω/factor and ω (HF / llama.cpp formula) */
} triatt_rope_scaling;

typedef struct {
    int n_layers;                       /* all layers, attention or not (1..1024) */
    const unsigned char *attn_layers;   /* n_layers flags, nonzero = attention layer; NULL =
                                         * every layer. Copied by triatt_init/x_init. */
    int n_heads;                        /* query heads */
    int n_kv_heads;                     /* KV heads; n_heads % n_kv_heads == 0 (GQA group) */
    int head_dim;                       /* floats per head */
    int n_rot;                          /* rotated dims (partial RoPE), even, <= head_dim;
                                         * 0 = head_dim. Only these dims are scored. */
    triatt_pairing pairing;
    double rope_theta;                  /* base, e.g. 10000 or 1e6 */
    triatt_rope_scaling scaling;
    double scale_factor;                /* linear / YaRN factor (> 0; 1 = none) */
    int yarn_orig_ctx;                  /* YaRN original context (e.g. 32768) */
    double yarn_beta_fast, yarn_beta_slow; /* YaRN ramp (0,0 → defaults 32 and 1) */
    const float *freq_divisors;         /* n_rot/2 per-frequency divisors, ω_f / d_f (llama3's
                                         * rope_freqs tensor), finite and > 0; NULL = none.
                                         * Read when ω is computed (triatt_init), not kept. */
} triatt_geometry;

/* Validates g; LCX_EINVAL with no side effects when a field is out of range. */
int triatt_geometry_check(const triatt_geometry *g);
/* ω per frequency into omega[n_rot/2], rope scaling applied. */
int triatt_geometry_omega(const triatt_geometry *g, double *omega);
/* cs[f] = mean_o cos((P+o)·ω_f), sn[f] likewise, computed in double (17·fc sin/cos). */
void triatt_trig_sums(const double *omega, int fc, double P, double *cs, double *sn);

/* ------------------------------------------------------------------------------------
 * Calibration: per (layer, head, f) means of the pre-RoPE query pairs, from which the
 * block centres (mean over the GQA group) are derived.
 * ---------------------------------------------------------------------------------- */
typedef struct triatt_calib triatt_calib;

/* warmup: tokens needed before the stats are finalised (>= 1). ema_alpha: 0 = frozen after
 * finalisation, else every later complete pass moves the stats by α (0 < α <= 1).
 * LCX_EINVAL on bad arguments, LCX_ENOMEM; *out is NULL on failure. */
int triatt_calib_init(const triatt_geometry *g, int warmup, double ema_alpha, triatt_calib **out);
void triatt_calib_free(triatt_calib *c);
/* Adds a layer's pre-RoPE queries for this forward pass. q: (n_tokens, n_heads, head_dim)
 * with token_stride floats between tokens (0 = n_heads·head_dim). A layer must be added at
 * most once per pass (a second call → LCX_ESTATE, the pass is then ignored at end_pass);
 * non-attention layers → LCX_EINVAL. */
int triatt_calib_add(triatt_calib *c, int layer, const float *q, int n_tokens, size_t token_stride);
/* Forward-pass boundary. The pass counts only if every attention layer added the same
 * number of tokens exactly once; otherwise (a pass cut short) it is ignored and 0 is
 * returned. Returns 1 when the pass finalised (or EMA-updated) the statistics, 0 otherwise. */
int triatt_calib_end_pass(triatt_calib *c);
/* Discards the current pass (e.g. the engine aborted the batch). */
void triatt_calib_abort_pass(triatt_calib *c);
bool triatt_calib_ready(const triatt_calib *c);
int64_t triatt_calib_tokens(const triatt_calib *c);      /* tokens in finalised stats */
uint64_t triatt_calib_generation(const triatt_calib *c); /* bumps whenever stats change */
/* Block centres of (layer, kv): pointers to fc floats each, valid until the next change.
 * LCX_ESTATE before finalisation, LCX_EINVAL for a bad index / non-attention layer. */
int triatt_calib_block(const triatt_calib *c, int layer, int kv, const float **cr,
                       const float **ci, const float **cabs);
/* Per-head stats of (layer, head) as doubles: q̄ real/imag and mean |q| (with eps 1e-8). */
int triatt_calib_head(const triatt_calib *c, int layer, int head, const double **mr,
                      const double **mi, const double **mabs);
/* Overrides the stats of one head (offline stats, tests). Marks the calibration ready
 * once every attention head was set or a pass finalised. */
int triatt_calib_set_head(triatt_calib *c, int layer, int head, const double *mr,
                          const double *mi, const double *mabs);
/* Saves finalised stats (format in docs/triatt.md and src/triatt/calib.c): crash-safe
 * replace. LCX_ESTATE when not ready, LCX_EIO on write failure. */
int triatt_calib_save(const triatt_calib *c, const char *path);
/* Loads stats saved for the same geometry. LCX_ECORRUPT (magic, version, size, checksum,
 * non-finite values), LCX_EMISMATCH (other geometry), lcx_read_file's I/O errors
 * (LCX_EIO / LCX_ENOTFOUND). On failure c is unchanged. */
int triatt_calib_load(triatt_calib *c, const char *path);

/* ------------------------------------------------------------------------------------
 * Scoring
 * ---------------------------------------------------------------------------------- */
/* Key accessor. get() returns a pointer to n rows of post-RoPE keys of (layer, kv_head) for
 * cells [cell0, cell0+n), row r at ptr + r·(*row_stride) floats, each row head_dim floats.
 * It may convert into scratch (n·head_dim floats, provided by the scorer) and return it.
 * An engine with an F16 cache sets get16 instead of get: the same contract with IEEE half
 * elements (row_stride in elements), read directly by the kernels (no conversion copy).
 * An engine with a Q8_0 K cache (llama.cpp `-ctk q8_0`) sets get_q8 instead: each row is
 * head_dim/32 blocks of 34 bytes {IEEE-half scale d; int8 q[32]}, element = d·q[i] (the ggml
 * block_q8_0 layout), *row_stride in BYTES; it needs head_dim and n_rot to be multiples of 32
 * (else triatt_score / triatt_fast_set_cells return LCX_ENOTSUP) and streams ~47% fewer bytes
 * than F16 (the kernel is compute-bound for it: see docs/benchmarks/triatt.md).
 * Precedence when several are set: get_q8, get16, get; zero-initialise the struct
 * (designated initialisers or = {0}) so unused members are NULL.
 * NULL = failure (the round is aborted with LCX_EIO). Called from scorer worker threads,
 * concurrently for different (layer, kv) blocks: it must be thread-safe for reads. Each
 * scorer thread keeps up to 4 returned row ranges in use at once (it reads up to 4 KV heads of
 * one layer, or segments of one head's cells, as concurrent memory streams), each fetched
 * with its own part of the scratch: a
 * returned pointer must stay valid until the scoring call (triatt_score, ...) returns, which
 * holds for pointers into the cache and for rows converted into the scratch given with that
 * accessor call (not for a buffer the accessor reuses between calls). */
typedef struct {
    const float *(*get)(void *ud, int layer, int kv_head, int cell0, int n, float *scratch,
                        size_t *row_stride);
    void *ud;
    const uint16_t *(*get16)(void *ud, int layer, int kv_head, int cell0, int n, float *scratch,
                             size_t *row_stride);
    const void *(*get_q8)(void *ud, int layer, int kv_head, int cell0, int n, float *scratch,
                          size_t *row_stride_bytes);
} triatt_keys;
#define TRIATT_Q8_BLOCK 32            /* elements per Q8_0 block */
#define TRIATT_Q8_BLOCK_BYTES 34      /* 2-byte half scale + 32 int8 */
/* Convenience accessor over one dense array keys (n_layers, n_kv_heads, n_cells_cap,
 * head_dim): fill *k, keep `d` alive while k is used. */
typedef struct { const float *data; int n_kv_heads, n_cells_cap, head_dim; } triatt_dense_keys;
void triatt_keys_dense(triatt_keys *k, const triatt_dense_keys *d);

typedef enum {
    TRIATT_AGG_BLOCKMEAN = 0,  /* published V3: mean over (layer >= skip, kv) of block scores */
    TRIATT_AGG_REFERENCE = 1   /* paper code: per-head scores, max over GQA group, mean over layers */
} triatt_aggregation;

typedef enum {
    TRIATT_TERMS_MLR = 0,        /* trig + (c_abs − |c|)·|k| (default) */
    TRIATT_TERMS_NO_MLR = 1,     /* trig + c_abs·|k| */
    TRIATT_TERMS_TRIG_ONLY = 2,
    TRIATT_TERMS_EXTRA_ONLY = 3
} triatt_terms;

typedef struct {
    triatt_aggregation aggregation;
    triatt_terms terms;
    int skip_layers;     /* blockmean: ignore attention layers < skip (clamped to 0 when it
                          * would skip all) */
    bool zscore;         /* reference: z-score each head's scores over the scored cells */
    int n_threads;       /* 1..64 (0 = 1): (layer, kv) blocks split over a private pool */
    double eps;          /* inside the sqrt of |c| and |k|; 1e-8 (report / TheTom form) */
} triatt_scorer_opts;

typedef struct triatt_scorer triatt_scorer;
/* opts NULL = defaults (blockmean, MLR, skip 0, 1 thread, eps 1e-8). LCX_EINVAL on bad
 * geometry/opts, LCX_ENOMEM (memory or a pool thread); *out is NULL on failure. */
int triatt_scorer_init(const triatt_geometry *g, const triatt_scorer_opts *opts, triatt_scorer **out);
void triatt_scorer_free(triatt_scorer *s);
/* Scores cells [0, n_cells) at phase origin P into scores[n_cells]. Cells whose position is
 * >= win_thr (the protected window) get NaN. Cost O(layers·kv·cells·n_rot). */
int triatt_score(triatt_scorer *s, const triatt_calib *cal, const triatt_keys *keys,
                 const int32_t *positions, int n_cells, double P, int32_t win_thr, float *scores);
/* Fast path (blockmean only, frozen centres): each cell collapses to 2·fc+1 numbers
 * (mean_b A_f, mean_b B_f, mean_b extra) computed once when the cell enters the cache.
 * fast_reserve sizes the slot table (cells >= n_slots are an error); fast_set_cells
 * (re)computes slots [cell0, cell0+n) from keys and records positions[c] for each (positions
 * is indexed by cell, like triatt_score's). fast_score then costs O(cells·fc); it returns
 * LCX_ESTATE when a row is stale: computed under another calibration, never computed, or
 * computed for another position (the engine moved cells, e.g. compaction after eviction).
 * fast_refresh recomputes exactly the stale rows of [0, n_cells) and returns how many. */
int triatt_fast_reserve(triatt_scorer *s, int n_slots);
int triatt_fast_set_cells(triatt_scorer *s, const triatt_calib *cal, const triatt_keys *keys,
                          const int32_t *positions, int cell0, int n);
int triatt_fast_refresh(triatt_scorer *s, const triatt_calib *cal, const triatt_keys *keys,
                        const int32_t *positions, int n_cells);
int triatt_fast_score(triatt_scorer *s, const triatt_calib *cal, const int32_t *positions,
                      int n_cells, double P, int32_t win_thr, float *scores);

/* Reference form (paper code, pruning_utils.score_keys_for_round), one key, float64:
 * un-rotates K at pos, then amp·cos(Δ_o ω + φ) per offset, Δ_o = P − pos + o; agg_max=false:
 * mean over offsets, true: max. terms as above; eps applies to |q̄| and |k| (0 = paper). */
double triatt_score_reference_form(const triatt_geometry *g, const double *omega,
                                   const double *mr, const double *mi, const double *mabs,
                                   const float *k_rot, int32_t pos, double P,
                                   triatt_terms terms, double eps, bool agg_max);
/* Collapsed form for one key and one centre, float64 (the scalar reference kernel). */
double triatt_score_collapsed_form(const triatt_geometry *g, const double *cs, const double *sn,
                                   const double *cr, const double *ci, const double *cabs,
                                   const float *k_rot, triatt_terms terms, double eps);

/* ------------------------------------------------------------------------------------
 * Selection (SPEC §5; golden: fixtures/triattention/selection.json)
 * ---------------------------------------------------------------------------------- */
typedef enum { TRIATT_V1 = 0, TRIATT_V2 = 1, TRIATT_V3 = 2 } triatt_version;
typedef enum {
    TRIATT_EVICT_HIGH = 0,   /* published engines: evict the highest scores */
    TRIATT_KEEP_HIGH = 1     /* the paper: keep the highest (evict the lowest) */
} triatt_direction;

typedef struct {
    int budget, window, divide_length, prefix_protect, n_segments;
    triatt_version version;
    triatt_direction direction;
} triatt_select_params;

/* n_used > max(budget, window+1) + divide_length */
bool triatt_should_evict(int n_used, int budget, int window, int divide_length);
/* Runs one selection with n_to_evict (ignores the trigger). Writes evicted cell indices into
 * out_cells (capacity n_cells) and returns their count. Ties: among equal
 * direction-adjusted scores the larger position goes first. Cells with NaN scores are
 * treated as the lowest adjusted score. */
int triatt_select(const triatt_select_params *p, const int32_t *positions, const float *scores,
                  int n_cells, int n_to_evict, int32_t *out_cells);

/* ------------------------------------------------------------------------------------
 * Configuration and the per-round driver
 * ---------------------------------------------------------------------------------- */
typedef enum { TRIATT_MODE_TRIG = 0, TRIATT_MODE_RANDOM = 1, TRIATT_MODE_RECENCY = 2 } triatt_mode;

typedef struct {
    bool enabled;              /* VLLM_TRIATT_ENABLED (0) */
    int budget;                /* VLLM_TRIATT_BUDGET, cells (required when enabled) */
    int window;                /* _WINDOW 128 */
    int prefix;                /* _PREFIX 32 */
    int warmup;                /* _WARMUP 256: calibration tokens; no eviction before */
    triatt_version version;    /* _HYBRID 2 (0 V1, 1 V2, 2 V3) */
    int n_segments;            /* _SEGMENTS 8 */
    bool adaptive;             /* _ADAPTIVE 0: EMA re-calibration, α = ema_alpha */
    double ema_alpha;          /* TRIATT_EMA_ALPHA 0.1 */
    bool compression_log;      /* _COMPRESSION_LOG 0: log a line per round */
    int divide_length;         /* TRIATT_DIVIDE 128 */
    triatt_mode mode;          /* TRIATT_MODE 0 trig / 1 random / 2 recency */
    triatt_direction direction;/* TRIATT_DIRECTION keep_high|evict_high (default keep_high) */
    triatt_aggregation aggregation; /* TRIATT_AGGREGATION blockmean|reference */
    bool fast_path;            /* TRIATT_FAST 0: precomputed per-cell features */
    int n_threads;             /* TRIATT_THREADS 1 */
    uint64_t seed;             /* TRIATT_SEED (random mode) */
    char endpoint[256];        /* LONGCTX_ENDPOINT, "" = rescue off */
    char calib_file[512];      /* TRIATT_CALIB_FILE: stats loaded at init (offline calibration) */
} triatt_config;

void triatt_config_default(triatt_config *cfg);
/* Applies the environment over cfg: triatt_config_from_env reads the process environment,
 * triatt_config_from_getenv reads variables through getenv_fn(ud, name) (NULL = getenv;
 * engines with their own settings table, tests). Invalid values → LCX_EINVAL with a
 * message naming the variable in err; cfg is unchanged on failure. */
int triatt_config_from_getenv(triatt_config *cfg, const char *(*getenv_fn)(void *ud, const char *name),
                              void *ud, char *err, size_t err_len);
int triatt_config_from_env(triatt_config *cfg, char *err, size_t err_len);
/* Checks ranges (budget > 0 when enabled, window >= 0, ...). */
int triatt_config_check(const triatt_config *cfg, char *err, size_t err_len);

typedef struct {
    uint64_t rounds;           /* rounds that fired */
    uint64_t cells_scored;
    uint64_t cells_evicted;
    double last_round_ms;      /* scoring + selection of the last round */
    uint64_t calib_passes;     /* complete passes counted */
    uint64_t calib_passes_ignored;
} triatt_counters;

typedef void (*triatt_log_fn)(void *ud, const char *line);
typedef struct triatt_ctx triatt_ctx;

/* Creates the driver (copies g, its layer mask and cfg). When cfg->calib_file is set the
 * stats are loaded from it (the calibration is then ready at once); its load errors
 * (LCX_ECORRUPT, LCX_EMISMATCH, I/O) are returned and nothing is created. LCX_EINVAL for a
 * bad geometry/config, LCX_ENOMEM. */
int triatt_init(const triatt_geometry *g, const triatt_config *cfg, triatt_ctx **out);
void triatt_free(triatt_ctx *t);
/* Log callback for the per-round line (and config/calibration notes); NULL = silent. */
void triatt_set_log(triatt_ctx *t, triatt_log_fn fn, void *ud);
/* Forwards to triatt_calib_add / _end_pass (no-ops when disabled, and once the frozen
 * calibration is ready). Errors as there; a rejected pass is counted, not fatal. */
int triatt_observe_queries(triatt_ctx *t, int layer, const float *q, int n_tokens, size_t stride);
int triatt_end_pass(triatt_ctx *t);
/* The round: checks the trigger, scores, selects; writes evicted cell indices into out_cells
 * (capacity n_cells) and returns their count (0 = no round). Before the calibration is ready
 * (warmup) nothing is evicted. Logs
 *   evict: evicted X/Y tokens (budget=B, used=U, max_pos=P, mode=v3)
 * (mode = v1|v2|v3, suffixed ",random"/",recency" for the controls). */
int triatt_maybe_evict(triatt_ctx *t, const triatt_keys *keys, const int32_t *positions,
                       int n_cells, int32_t *out_cells);
/* The last round's scores, indexed by cell as its positions were (the evicted cells' are
 * what Tier 2 posts); valid until the next round. NULL before the first scored round. */
const float *triatt_last_scores(const triatt_ctx *t);
/* Fast path hook: call when cells [cell0, cell0+n) were written (no-op unless fast_path).
 * Optional: a round refreshes any stale row itself; calling this spreads that cost over the
 * decode steps instead of the eviction round. positions is indexed by cell. */
int triatt_cells_written(triatt_ctx *t, const triatt_keys *keys, const int32_t *positions, int cell0, int n);
void triatt_get_counters(const triatt_ctx *t, triatt_counters *out);
triatt_calib *triatt_ctx_calib(triatt_ctx *t);
const triatt_config *triatt_ctx_config(const triatt_ctx *t);

/* ------------------------------------------------------------------------------------
 * Replay and simulation (used by `longctx triatt replay|simulate`)
 * ---------------------------------------------------------------------------------- */
/* Reads a selection.json-shaped or scoring.json-shaped document (≤ 64 MiB) and returns
 * malloc'd JSON: {"cases":[{"id","v1","v2","v3"}]} (sorted evicted positions; the trigger
 * is honoured) or {"scores":{...}}. LCX_EINVAL on a malformed document. */
int triatt_replay_json(const char *json, size_t len, char **out);

typedef struct {
    int n_seeds;         /* default 200 */
    uint64_t seed0;
    int n_tokens;        /* stream length (default 4096) */
    int n_planted;       /* planted keys (default 32) */
    double noise;        /* query noise relative to the centre (default 1.0) */
    double align;        /* cosine of a planted key with the ideal aligned key (default 0.6) */
} triatt_sim_params;

typedef struct {
    /* [budget 90%, 70%][keep_high, evict_high, random, recency]: mean fraction of planted
     * keys that survive, and its standard error over seeds */
    double survive[2][4], stderr_[2][4];
    int n_seeds;
} triatt_sim_result;
int triatt_simulate(const triatt_sim_params *p, triatt_sim_result *r);

/* ------------------------------------------------------------------------------------
 * Rescue bridge (Tier 2 write, Tier 3 rehydrate; SPEC §2 / §5)
 * ---------------------------------------------------------------------------------- */
/* Decodes tokens to UTF-8 text into out (cap bytes incl. NUL). Returns the text length
 * (excluding NUL) or < 0 on failure; like snprintf, a length >= cap means "did not fit" and
 * the call is repeated once with a buffer of that size (spans are capped at 1 MiB of text).
 * Called from the caller's thread only (decoding happens in triatt_rescue_write_round,
 * before queueing). */
typedef int (*triatt_detok_fn)(void *ud, const int32_t *tokens, int n, char *out, size_t cap);

typedef struct {
    const char *endpoint;   /* "http://127.0.0.1:5054" (copied) */
    const char *session_id; /* copied; required, 1..LCX_SESSION_ID_MAX bytes of UTF-8, no control chars */
    int widen;              /* ±tokens around each evicted run (32) */
    int queue_cap;          /* pending rounds (16); a full queue drops the round */
    int timeout_ms;         /* per request (10000) */
    int top_k;              /* retrieve (8, 1..LCX_TOP_K_MAX) */
    double score_floor;     /* retrieve (0.20) */
    int max_chars;          /* rescue text cap (8000) */
    int prepopulate_span;   /* tokens per prepopulate span (256) */
    triatt_detok_fn detok;
    void *detok_ud;
} triatt_rescue_config;

/* Fills the defaults above (endpoint, session and detok NULL). triatt_rescue_init takes the
 * values as given, except: widen < 0, queue_cap/timeout/top_k/max_chars/prepopulate_span <= 0
 * and score_floor outside [0, 1] fall back to the defaults; top_k is clamped to LCX_TOP_K_MAX. */
void triatt_rescue_config_default(triatt_rescue_config *cfg);

typedef struct { int32_t a, b; } triatt_span;   /* token range [a, b) (half-open) */

typedef struct {
    uint64_t rounds_queued, rounds_sent, rounds_failed, rounds_dropped;
    uint64_t spans_queued, spans_sent, spans_dropped, spans_empty;
    uint64_t retrieve_ok, retrieve_failed;
} triatt_rescue_stats;

/* Pure: drops positions outside [0, n_tokens), sorts, groups contiguous runs, widens by
 * ±widen clamped to [0, n_tokens), merges runs that then overlap or touch. Writes at most
 * max_spans spans and returns the count. positions is not modified. */
int triatt_rescue_spans(const int32_t *positions, int n, int n_tokens, int widen,
                        triatt_span *spans, int max_spans);
/* Pure: the SPEC §2 rescue text for chunks (text, a, b, layer): the header, then one block
 * per chunk while the total stays <= max_chars Unicode characters, stopping at the first
 * block that would overflow; "" when no block fits. The same rule and bytes as
 * longctx-svc's system_message. Returns malloc'd text or NULL (OOM). n_used: blocks kept. */
typedef struct { const char *text; int32_t a, b; int layer; } triatt_rescue_chunk;
char *triatt_rescue_format(const triatt_rescue_chunk *chunks, int n, int max_chars, int *n_used);
/* Pure: the rescue query signal, the same rule as longctx-svc's (lcx_rescue_query in
 * lcx.h): the text after the last case-insensitive "question:", trimmed, else the last
 * sentence ending in '?' when it ends within the last 1024 bytes, else the last 512 bytes
 * (UTF-8 safe). Returns malloc'd text (NULL on OOM or NULL text). */
char *triatt_rescue_query_signal(const char *user_text);

typedef struct { const char *role; const char *content; } triatt_msg;
/* Inserts {"system", text} just before the last "user" message (at the end when there is
 * none). Pointers are stored, not copied. Returns the new count, LCX_ELIMIT when n == cap. */
int triatt_msgs_insert_rescue(triatt_msg *msgs, int n, int cap, const char *text);

typedef struct triatt_rescue triatt_rescue;
/* Starts the sender thread. LCX_EINVAL on a bad config (no endpoint/session/detok, a
 * session id the service would refuse), LCX_ENOMEM (memory or the thread); *out is NULL
 * on failure. */
int triatt_rescue_init(const triatt_rescue_config *cfg, triatt_rescue **out);
/* Stops the sender (aborts a request in flight; queued rounds are discarded) and frees. */
void triatt_rescue_free(triatt_rescue *r);
/* Tier 2: one round's evicted positions + the original token ids (n_tokens, index = position)
 * → spans → decoded text → one queued POST /evict/write. scores (may be NULL) are the
 * evicted cells' scores, aligned with positions; a span's score is their mean. Never blocks on
 * the network: a full queue drops the round (counted). Returns spans queued (>= 0). */
int triatt_rescue_write_round(triatt_rescue *r, const int32_t *positions, const float *scores,
                              int n, const int32_t *tokens, int n_tokens, int layer);
/* Turn-1 prepopulate: the whole prompt in prepopulate_span-token spans, one queued POST. */
int triatt_rescue_prepopulate(triatt_rescue *r, const int32_t *tokens, int n_tokens);
/* Waits until the queue is empty and nothing is in flight, at most timeout_ms. 0 or
 * LCX_ETIMEOUT. */
int triatt_rescue_flush(triatt_rescue *r, int timeout_ms);
/* Tier 3: POST /evict/retrieve with the query signal of question; *text_out = rescue text
 * (malloc'd; NULL when nothing was retrieved). Returns the number of chunks used, or
 * LCX_ENET / LCX_ETIMEOUT / LCX_ECORRUPT (bad response); failures are counted. */
int triatt_rescue_rehydrate(triatt_rescue *r, const char *question, char **text_out);
void triatt_rescue_get_stats(triatt_rescue *r, triatt_rescue_stats *out);

#ifdef __cplusplus
}
#endif
#endif
