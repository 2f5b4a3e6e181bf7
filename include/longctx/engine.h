/* longctx-engine — compact CPU inference for GGUF models (llama, qwen2, qwen3).
 *
 *   eng_model *m; char err[256];
 *   if (eng_model_load("model.gguf", &m, err, sizeof err) < 0) { fputs(err, stderr); ... }
 *   eng_ctx_params cp = eng_ctx_default_params();   // n_ctx 4096 (or the model's), ubatch 512
 *   cp.n_threads = 2;
 *   eng_ctx *c;
 *   eng_ctx_init(m, &cp, &c);
 *   int32_t ids[] = {1, 15, 27};
 *   eng_decode(c, ids, NULL, 3, false);           // prefill at positions 0,1,2
 *   const float *logits = eng_logits(c, -1);       // last position, n_vocab floats
 *   eng_sampler *s = eng_sampler_init(&(eng_sampler_params){.temp = 0});   // greedy
 *   int32_t next = eng_sample(s, logits, eng_model_get_info(m)->n_vocab);
 *   eng_decode(c, &next, NULL, 1, false);          // position 3
 *   ...
 *   eng_sampler_free(s); eng_ctx_free(c); eng_model_free(m);
 *
 * Model: the weight matrices are copied once from the mmap'd GGUF into a read-only region
 * backed by transparent huge pages (fewer TLB misses when generation streams every weight;
 * skipped when THP is off or memory is short, and LCX_ENGINE_WEIGHTS=mmap keeps them in the
 * mapping; docs/engine.md "Weights in huge pages"); small 1-D tensors (norms, biases) are
 * converted to F32 at load. Supported tensor types: F32, F16, BF16, Q8_0, Q4_0, Q5_0, Q4_K,
 * Q5_K, Q6_K. Quantized matmuls quantize activations like llama.cpp (Q8_0 / Q8_K) and
 * accumulate in integers. A model may be shared by several contexts (read-only).
 *
 * KV cache: F32, n_ctx cells per layer. Every cell remembers the position it was written
 * at; attention masks by position (a token sees cells with pos <= its own), never by cell
 * index. So cells can be removed anywhere (eng_kv_remove_cells) and the survivors keep their
 * original positions and RoPE rotation — nothing is shifted. This is what TriAttention V3
 * needs: libtriatt scores cells through eng_kv_key() and removes the losers.
 *
 * Errors: every int function returns 0 (or a count) or a negative LCX_E* code
 * (longctx/lcx_err.h); nothing exits or aborts on bad input. Handles are freed with *_free
 * (NULL is a no-op). A context is single-threaded from the caller's point of view (it runs
 * its own worker threads inside eng_decode). */
#ifndef LONGCTX_ENGINE_H
#define LONGCTX_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "longctx/lcx_err.h"
#include "longctx/triatt.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct eng_model eng_model;
typedef struct eng_ctx eng_ctx;

typedef enum { ENG_ARCH_LLAMA = 0, ENG_ARCH_QWEN2 = 1, ENG_ARCH_QWEN3 = 2 } eng_arch;
typedef enum { ENG_ROPE_NORM = 0, ENG_ROPE_NEOX = 2 } eng_rope_type;   /* ggml numbering */

typedef struct {
    eng_arch arch;
    const char *arch_name;        /* "llama", "qwen2", "qwen3" */
    int n_vocab, n_embd, n_layer, n_head, n_head_kv, head_dim, n_ff, n_ctx_train;
    int n_rot;                    /* rotated dims per head (rope.dimension_count) */
    float rope_freq_base, rope_freq_scale, rms_eps;
    eng_rope_type rope_type;
    bool tied_output;             /* output = token_embd */
    int file_type;                /* general.file_type, -1 when absent */
    size_t weight_bytes;          /* bytes of all weights in the file */
} eng_model_info;

/* Loads and validates a GGUF model (mmap). Refuses unknown architectures (LCX_ENOTSUP,
 * err names the architecture), missing tensors / wrong shapes (LCX_ECORRUPT), unsupported
 * tensor types or rope scaling (LCX_ENOTSUP). err: a one-line explanation. */
int  eng_model_load(const char *path, eng_model **out, char *err, size_t errlen);
void eng_model_free(eng_model *m);
const eng_model_info *eng_model_get_info(const eng_model *m);
/* The open GGUF of the model (for the tokenizer and metadata); owned by the model. */
const struct eng_gguf *eng_model_gguf(const eng_model *m);

typedef struct {
    int n_ctx;        /* KV cells per layer; 0 = min(model's context_length, 4096) */
    int n_ubatch;     /* max tokens per forward pass (prefill is split); 0 = 512 */
    int n_threads;    /* worker threads incl. the caller; 0 = 1 */
} eng_ctx_params;
eng_ctx_params eng_ctx_default_params(void);

/* Allocates every buffer a decode needs (sized by n_ubatch and n_ctx): decoding allocates
 * nothing per token. LCX_ENOMEM, LCX_EINVAL (bad params). */
int  eng_ctx_init(const eng_model *m, const eng_ctx_params *p, eng_ctx **out);
void eng_ctx_free(eng_ctx *c);
int  eng_ctx_n_threads(const eng_ctx *c);

/* Runs the model over tokens[0..n) at positions pos[0..n) (NULL = consecutive positions
 * starting after the largest position in the cache, or 0 when empty), in ubatches of
 * n_ubatch, writing their K/V into free cells. Positions must be >= 0 and < 2^30; a token
 * attends to every cached cell whose position is <= its own (its own batch included).
 * all_logits: keep logits of every token (eng_logits(c, i) for i in [0,n)); otherwise only
 * the last token's. Errors: LCX_ELIMIT when the cache has fewer than n free cells (nothing
 * is written then), LCX_EINVAL on a token id out of range. */
int  eng_decode(eng_ctx *c, const int32_t *tokens, const int32_t *pos, int n, bool all_logits);
/* Logits (n_vocab floats) of token i of the last eng_decode (-1 = last token); NULL when
 * not kept. Valid until the next eng_decode. */
const float *eng_logits(const eng_ctx *c, int i);

/* ---- KV cache ---------------------------------------------------------------------- */
int  eng_kv_size(const eng_ctx *c);                     /* cells per layer (n_ctx) */
int  eng_kv_n_used(const eng_ctx *c);                   /* occupied cells */
/* Position held by cell i, -1 when the cell is free (or i out of range). */
int32_t eng_kv_cell_pos(const eng_ctx *c, int i);
/* Largest position in the cache, -1 when empty. */
int32_t eng_kv_max_pos(const eng_ctx *c);
/* Post-RoPE key of cell i in layer il: n_head_kv*head_dim floats, laid out head-major
 * (head h at [h*head_dim, (h+1)*head_dim)). NULL for a free cell / bad index. */
const float *eng_kv_key(const eng_ctx *c, int il, int i);
const float *eng_kv_value(const eng_ctx *c, int il, int i);
/* Frees the given cells in every layer (duplicates and already-free cells are ignored).
 * Survivors keep their positions. Returns the number of cells freed, LCX_EINVAL for an
 * index out of range (then nothing is freed). */
int  eng_kv_remove_cells(eng_ctx *c, const int32_t *cells, int n);
/* Frees every cell with position in [p0, p1) (p1 < 0 = no upper bound). Returns the count. */
int  eng_kv_remove_pos(eng_ctx *c, int32_t p0, int32_t p1);
void eng_kv_clear(eng_ctx *c);

/* Query observer (TriAttention calibration): called from eng_decode on the caller's thread,
 * once per (layer il, token): for each ubatch, layers 0..n_layer-1 in order and, within a
 * layer, the ubatch's tokens in order; with the token's position and its pre-RoPE
 * query q (n_head*head_dim floats, head-major; after bias / q-norm). q is only valid during
 * the call. fn = NULL removes the hook. The hook must not call back into this context. */
typedef void (*eng_q_hook)(void *ud, int il, int32_t pos, const float *q);
void eng_ctx_set_q_hook(eng_ctx *c, eng_q_hook fn, void *ud);

/* ---- TriAttention V3 inside the forward pass --------------------------------------
 *
 *   triatt_config tc; char err[256];
 *   eng_triatt_config_resolve(&tc, &argc, argv, err, sizeof err);   // env, then --triatt-* flags
 *   if (tc.enabled) eng_triatt_attach(c, &tc, "session-1", err, sizeof err);
 *   eng_decode(c, ...);                                                // evicts as it goes
 *   eng_triatt_stats st; eng_triatt_get_stats(c, &st);                 // rounds, cells, spans
 *
 * Once attached, eng_decode on c:
 *  - copies each layer's pre-RoPE queries of a ubatch to libtriatt (each layer counts each
 *    token once) and ends the calibration pass after the ubatch's last layer (a forward-pass
 *    boundary), until the calibration is ready (frozen; with EMA: every pass);
 *  - once centres are frozen, hands each new cell's keys to libtriatt's fast path when the
 *    cell enters the cache (triatt_cells_written: a round then costs O(cells·fc));
 *  - after every ubatch of a prefill and after every decoded token checks the trigger and
 *    runs a round: the chosen cells are removed from every layer, survivors keep their
 *    positions (no RoPE shift); the cache is then compacted (the last occupied cells move
 *    into the holes, every layer, keys/values/positions/token ids together) so occupied
 *    cells are always [0, eng_kv_n_used) — cell INDICES change at a round, positions never;
 *  - with an endpoint (cfg->endpoint, LONGCTX_ENDPOINT) and a session id: posts the evicted
 *    runs ±32 tokens, decoded from each cell's ORIGINAL token id with the model's own
 *    tokenizer, to longctx-svc /evict/write (libtriatt's bridge: a sender thread; the
 *    engine never waits on the network; a full queue / dead service drops and counts);
 *  - a prefill may then be longer than the cache: eng_decode checks free cells per ubatch
 *    (LCX_ELIMIT only when a ubatch does not fit after the round; keep
 *    budget + divide_length (128) + n_ubatch <= n_ctx).
 * The per-round line `evict: evicted X/Y tokens (budget=B, used=U, max_pos=P, mode=v3)`
 * goes to the log callback (eng_triatt_set_log; the CLI writes it to stderr).
 * Bare decoding never rehydrates: before a new user turn call
 *   triatt_rescue_rehydrate(eng_triatt_rescue(c), question, &text)
 * (after eng_triatt_flush) and put `text` into the prompt (triatt_msgs_insert_rescue). */
/* cfg: a resolved config with cfg->enabled (others refused: LCX_EINVAL). The geometry comes
 * from the model (pairing NORM → adjacent for llama, NEOX → half for qwen2/qwen3; GQA;
 * n_rot for partial RoPE). cfg->fast_path as given (eng_triatt_config_resolve turns it on:
 * the engine feeds each cell's features as it enters the cache). session_id:
 * the rescue session (NULL = "eng-<pid>-<ctx address>"); the rescue client starts only when
 * cfg->endpoint is set. A second attach replaces the first. err explains a refusal
 * (bad config, calib file mismatch, OOM). */
int  eng_triatt_attach(eng_ctx *c, const triatt_config *cfg, const char *session_id,
                       char *err, size_t errlen);
void eng_triatt_detach(eng_ctx *c);                 /* stops the rescue client (no flush) */
bool eng_triatt_attached(const eng_ctx *c);
typedef void (*eng_log_fn)(void *ud, const char *line);
void eng_triatt_set_log(eng_ctx *c, eng_log_fn fn, void *ud);   /* NULL = silent (default) */

typedef struct {
    uint64_t rounds;             /* eviction rounds that fired */
    uint64_t cells_evicted;      /* total over rounds */
    uint64_t cells_scored;
    uint64_t cells_moved;        /* compaction moves */
    int last_round_evicted;
    double last_round_ms;        /* trigger → cells removed and compacted (incl. scoring) */
    double total_round_ms;       /* sum over rounds (scoring + selection + removal) */
    double total_feed_ms;        /* calibration copies + fast-path feature writes */
    bool calibrated;
    int64_t calib_tokens;
    /* Tier 2 (zeros without an endpoint): spans queued for /evict/write, sent (acknowledged
     * 2xx), dropped (queue full, request failed, service down), rounds dropped */
    uint64_t spans_queued, spans_sent, spans_dropped, rounds_dropped, rounds_failed;
} eng_triatt_stats;
int  eng_triatt_get_stats(const eng_ctx *c, eng_triatt_stats *out);   /* LCX_ESTATE unattached */
/* The libtriatt objects (NULL when not attached / no endpoint), e.g. for
 * triatt_rescue_rehydrate / triatt_rescue_prepopulate / triatt_get_counters. Owned by c. */
triatt_ctx *eng_triatt_ctx(eng_ctx *c);
triatt_rescue *eng_triatt_rescue(eng_ctx *c);
/* Waits (at most timeout_ms) until every queued Tier-2 write was answered. 0, LCX_ETIMEOUT,
 * LCX_ESTATE (no rescue client). */
int  eng_triatt_flush(eng_ctx *c, int timeout_ms);

/* Config resolution for every front end (longctx-engine run|perplexity|serve, longctx eval):
 * cfg = defaults, then the SPEC §5 environment (VLLM_TRIATT_*, TRIATT_*, LONGCTX_ENDPOINT),
 * then the flags below (fast path on unless TRIATT_FAST / TRIATT_AGGREGATION say otherwise),
 * which are REMOVED from argv (argc updated; other arguments keep their
 * order), so the caller parses the rest. Flags beat the environment:
 *   --triatt-budget N (turns V3 on)  --triatt-window N  --triatt-prefix N  --triatt-warmup N
 *   --triatt-hybrid 0|1|2  --triatt-segments N  --triatt-mode trig|random|recency
 *   --triatt-direction keep_high|evict_high  --triatt-calib FILE  --triatt-divide N
 *   --triatt-seed N  --triatt-log (the per-round stats line)  --longctx-endpoint URL
 * Invalid values → LCX_EINVAL with err naming the flag or variable and the accepted values
 * (argv is then partly rearranged: stop). cfg->enabled is true when a budget was given by
 * --triatt-budget or by VLLM_TRIATT_ENABLED=1 + VLLM_TRIATT_BUDGET. */
int  eng_triatt_config_resolve(triatt_config *cfg, int *argc, char **argv, char *err, size_t errlen);
/* One line per flag for a --help text. */
const char *eng_triatt_flags_help(void);

/* ---- per-cell token ids (cache-level recall) ----------------------------------------- */
/* Token id written into cell i (the original id, kept across compaction); -1 when free. */
int32_t eng_kv_cell_token(const eng_ctx *c, int i);
/* Positions and token ids of the occupied cells, sorted by position, into pos/tok (either
 * may be NULL) of capacity cap. Returns the number of occupied cells (may exceed cap: only
 * cap are written). */
int  eng_kv_survivors(const eng_ctx *c, int32_t *pos, int32_t *tok, int cap);

/* ---- sampler ----------------------------------------------------------------------- */
typedef struct {
    float temp;        /* <= 0: greedy (argmax, lowest id on ties) */
    int top_k;         /* <= 0: off */
    float top_p;       /* >= 1 or <= 0: off */
    uint64_t seed;     /* RNG seed (xorshift64*); same seed + same logits = same picks */
} eng_sampler_params;
typedef struct eng_sampler eng_sampler;
/* p may be NULL (greedy). Scratch for non-greedy sampling grows to the largest vocabulary
 * seen, once; later calls do not allocate. NULL on OOM. */
eng_sampler *eng_sampler_init(const eng_sampler_params *p);
void eng_sampler_free(eng_sampler *s);
/* Picks a token from logits[0..n_vocab): top-k, then temperature, then top-p (nucleus),
 * then a draw. Returns the id, or LCX_EINVAL / LCX_ENOMEM. */
int32_t eng_sample(eng_sampler *s, const float *logits, int n_vocab);

/* ---- ChatSession -------------------------------------------------------------------
 * A conversation over one context: chat template, session id, sampler, and (with V3 and
 * an endpoint) automatic Tier-3 rescue.
 *
 *   eng_session_params sp = eng_session_default_params();
 *   sp.ctx.n_ctx = 32768;
 *   sp.triatt = &tc;              // NULL = no eviction; tc.endpoint set = rescue on
 *   eng_session *s; char err[256];
 *   if (eng_session_init(m, &sp, &s, err, sizeof err) < 0) { fputs(err, stderr); ... }
 *   char *reply;
 *   eng_session_respond(s, "Here is a long report ...", &reply); free(reply);
 *   eng_session_respond(s, "What is the access code?", &reply);   // Tier 3 runs first
 *   eng_session_free(s);
 *
 * respond(): appends the user message to the conversation, renders the whole conversation
 * with the model's chat template, and prefills only the tokens after the longest common
 * prefix with what the context already holds. The session keeps the LOGICAL token
 * sequence (token i sits at position i) apart from the cells that survive in the cache:
 * when eviction rounds removed cells from the middle, the reused prefix is not
 * re-prefilled — new tokens continue at position = logical length, never at the number of
 * surviving cells.
 * Tier 3 (when the context runs V3 with an endpoint): before the turn's prefill the
 * session waits (bounded: flush_timeout_ms) until the service acknowledged the queued
 * Tier-2 writes, asks /evict/retrieve with the query signal of the user message (SPEC §4:
 * after the last "question:", else its last 512 bytes) and, when anything comes back,
 * inserts the rescue text as a system message just before the user turn (SPEC §2). The
 * message stays in the conversation (it is what the model saw; keeping it keeps the prefix
 * reusable next turn).
 * Prepopulate (params.prepopulate, on by default): the first turn that passes the V3
 * budget (cells in use + the message's tokens > budget) also posts its whole prompt to
 * longctx (triatt_rescue_prepopulate, 256-token spans, queued before the prefill: it
 * overlaps the compute and never blocks). Why: a round that fires AFTER the turn's Tier-3
 * query (while the rescue text, the question or the reply are prefilled) evicts cells
 * whose Tier-2 spans no query of that turn can see; with the prompt already in the store,
 * whatever the question needs is retrievable no matter when its cells go.
 * Single-turn rescue (ENG_RESCUE_SINGLE_TURN, the default): when the user message ends
 * with a question (its last '?' within the final 256 bytes, with a body before its
 * sentence) and the turn passes the V3 budget (as above), the message is split: the body is prefilled first (rounds fire and
 * their spans go to longctx), then after the bounded flush the question rehydrates, and
 * the recovered text (system message) plus the question (a user message) are prefilled
 * and answered — one turn, no second request needed. ENG_RESCUE_TWO_TURN keeps the
 * reference behaviour (rescue only at the start of the next turn).
 *
 * Bare path: eng_session_generate(s, text, ...) continues the sequence with raw text (no
 * template) and NEVER rescues — the reference's "bare generate skips rescue" trap. To
 * rehydrate manually before it, the one call is
 *   eng_session_rehydrate(s, question, &text);   // flush + /evict/retrieve; text or NULL
 * and the caller puts `text` into its prompt. */
typedef struct eng_session eng_session;
typedef enum { ENG_RESCUE_SINGLE_TURN = 0, ENG_RESCUE_TWO_TURN = 1 } eng_rescue_mode;

typedef struct {
    eng_ctx_params ctx;                   /* the context the session creates */
    const triatt_config *triatt;         /* V3 (copied at init); NULL / !enabled = off.
                                           * Its endpoint ("" = none) turns rescue on. */
    const char *session_id;               /* rescue session; NULL = "sess-<pid>-<n>" */
    const char *system_prompt;            /* first message when non-NULL */
    eng_sampler_params sampler;           /* temp 0 = greedy */
    int max_tokens;                       /* per reply (256) */
    eng_rescue_mode rescue;               /* ENG_RESCUE_SINGLE_TURN */
    int flush_timeout_ms;                 /* wait for Tier-2 acks before Tier 3 (2000) */
    bool prepopulate;                     /* post the first over-budget prompt (true) */
    /* called after every prefill chunk of n_ubatch tokens (done/total of this prefill);
     * may be NULL. Tests use it to kill the service mid-prefill. */
    void (*on_prefill)(void *ud, int done, int total);
    void *on_prefill_ud;
} eng_session_params;
eng_session_params eng_session_default_params(void);

/* Loads the tokenizer, creates the context (and attaches V3 when p->triatt is enabled).
 * err explains a refusal (tokenizer, V3 config, OOM). m must outlive the session. */
int  eng_session_init(const eng_model *m, const eng_session_params *p, eng_session **out,
                      char *err, size_t errlen);
void eng_session_free(eng_session *s);

/* One chat turn (see above). *reply (optional): malloc'd UTF-8 text of the generated tokens
 * (end-of-turn token excluded). Returns the number of generated tokens, or LCX_EINVAL,
 * LCX_ELIMIT (the conversation does not fit a context without eviction), LCX_ENOMEM. A
 * failed Tier 3 (service down, timeout) never fails the turn: it is counted. */
int  eng_session_respond(eng_session *s, const char *user_message, char **reply);
/* One turn with per-request options (a server's request): max_tokens (<= 0 = params),
 * sampler (NULL = the session's; a fresh sampler for this turn only), on_token called with
 * each generated token's text piece before it is decoded; returning nonzero ends the reply
 * after that token (stop sequences, a client that went away). */
typedef struct {
    int max_tokens;
    const eng_sampler_params *sampler;
    int (*on_token)(void *ud, const char *piece, int32_t tok);
    void *ud;
} eng_turn_opts;
int  eng_session_respond_ex(eng_session *s, const char *user_message, const eng_turn_opts *o,
                            char **reply);
/* Appends a message (role "system" | "user" | "assistant") to the conversation without
 * generating: a client's earlier turns. Number of messages in the conversation. */
int  eng_session_add_message(eng_session *s, const char *role, const char *content);
int  eng_session_n_messages(const eng_session *s);
/* Bare path: tokenizes text as is (parse_special: control-token text becomes ids; no BOS
 * unless the sequence is empty), appends it, generates up to max_tokens (<= 0 = params).
 * No chat template, no Tier 3. */
int  eng_session_generate(eng_session *s, const char *text, int max_tokens, char **out);
/* The same with per-request options (eng_turn_opts above). */
int  eng_session_generate_ex(eng_session *s, const char *text, const eng_turn_opts *o, char **out);
/* Manual Tier 3: bounded flush, then /evict/retrieve with the query signal of question.
 * *text = rescue text (malloc'd) or NULL when nothing came back. Returns chunks used (>= 0),
 * LCX_ESTATE (no V3 endpoint), or the bridge's LCX_ENET / LCX_ETIMEOUT / LCX_ECORRUPT. */
int  eng_session_rehydrate(eng_session *s, const char *question, char **text);

/* What the last respond/generate did. */
typedef struct {
    int n_prompt;          /* tokens of the rendered prompt (all parts of a split turn) */
    int n_reused;          /* of those, found in the logical sequence (not prefilled) */
    int n_prefilled;       /* prefilled (n_prompt - n_reused, + 1 when all were reused) */
    int n_generated;
    bool rescue_ran;       /* Tier 3 asked the service */
    bool single_turn;      /* the message was split for single-turn rescue */
    int rescue_chunks;     /* chunks in the inserted rescue message (0 = none inserted) */
    int rescue_tokens;     /* its tokens (the extra prefill Tier 3 costs) */
    int rescue_rc;         /* last Tier-3 result (< 0: failed, counted) */
    int flush_rc;          /* 0, LCX_ETIMEOUT, or 1 when no flush was needed */
    int prepopulated;      /* spans of this turn's prompt posted to longctx (0 = none) */
    double prefill_ms, rescue_ms, gen_ms;  /* rescue_ms: flush + retrieve round trip */
} eng_session_turn;
void eng_session_last_turn(const eng_session *s, eng_session_turn *out);

typedef struct {
    uint64_t turns, rescues_run, rescues_inserted, rescues_failed, single_turn_splits;
} eng_session_stats;
void eng_session_get_stats(const eng_session *s, eng_session_stats *out);

eng_ctx *eng_session_ctx(eng_session *s);
const char *eng_session_id(const eng_session *s);
/* The logical token sequence (token i at position i), *n tokens; valid until the next call. */
const int32_t *eng_session_tokens(const eng_session *s, int *n);
/* The text of the rendered prompt of the last respond (all parts), and the rescue text it
 * inserted (NULL when none). Owned by the session, valid until the next call. */
const char *eng_session_last_prompt(const eng_session *s);
const char *eng_session_last_rescue(const eng_session *s);
/* Cache-level recall: where does `text` stand in this conversation? Finds its FIRST
 * occurrence in the detokenized logical sequence and returns 1 when every token covering it
 * survives in the KV cache, 0 when at least one was evicted, LCX_ENOTFOUND when the text
 * is not in the conversation. */
int  eng_session_cache_holds(const eng_session *s, const char *text);
/* Same question for a text inserted as rescue: 1 when `text` occurs in any rescue message
 * of this conversation, else 0. */
int  eng_session_rescue_holds(const eng_session *s, const char *text);
/* Cache-level recall of the ramp: 1 when every token covering the FIRST occurrence of text
 * is either in a surviving cell or inside the token range of a block of a rescue message
 * the session inserted (the "--- evicted span (tokens a..b, ...)" headers, half-open), or
 * text occurs whole in a rescue message; 0 otherwise; LCX_ENOTFOUND when text is not in
 * the conversation. */
int  eng_session_fact_recall(const eng_session *s, const char *text);

/* ---- llama2.c import ---------------------------------------------------------------- */
/* Converts a llama2.c checkpoint (legacy format: 7 int32 header + float32 weights; negative
 * vocab_size = separate classifier) and its tokenizer.bin into a GGUF (F32, arch llama,
 * SentencePiece tokenizer keys as llama.cpp's converter writes them). Files are validated
 * against their header sizes. LCX_ECORRUPT / LCX_EIO / LCX_ENOMEM; err explains. */
int eng_convert_llama2c(const char *ckpt_path, const char *tok_path, const char *out_path,
                        char *err, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif
