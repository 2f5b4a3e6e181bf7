/* lcx_eval — evaluation library (internal to longctx; used by `longctx eval`, tests, benches).
 *
 *   double r;
 *   lcx__seqmatch_ratio("abcd", 4, "bcde", 4, &r);          // r == 0.75, as Python's difflib
 *   lcx__mrcr_grade(response, answer, "aB3dE5gH7j", &r);     // openai/mrcr grade
 *
 *   lcx_mrcr_set set = {0};
 *   lcx__mrcr_read_jsonl("/tmp/mrcr.jsonl", &set);           // records, validated
 *   int bin = lcx__mrcr_bin_of(set.recs[0].n_chars);         // 0..7, or LCX_MRCR_BIN_OTHER
 *   lcx__mrcr_set_free(&set);
 *
 * Ownership: every out-pointer filled by an lcx_mrcr_* reader/generator belongs to the caller
 * and is released by the matching *_free. Strings are UTF-8, NUL-terminated.
 * Errors: negative LCX_E* codes (include/longctx/lcx_err.h); nothing here exits or aborts. */
#ifndef LCX_EVAL_H
#define LCX_EVAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "longctx/lcx_err.h"
#include "util/util.h"

/* ---------------------------------------------------------------- difflib (difflib.c) */

/* Python `difflib.SequenceMatcher(None, a, b).ratio()` over Unicode code points, bit-for-bit:
 * same b2j, the autojunk "popular" rule (len(b) >= 200: elements occurring more than
 * len(b)//100 + 1 times are dropped from b2j), find_longest_match with its extension loops,
 * get_matching_blocks' recursion, ratio = 2.0*M/T (1.0 when both are empty).
 * a and b are UTF-8; each byte of an ill-formed sequence becomes one code point U+DC80+byte
 * (like Python's surrogateescape), so invalid input still grades deterministically.
 * Returns 0 and *out in [0,1]; LCX_ENOMEM; LCX_EINVAL on NULL arguments. */
int lcx__seqmatch_ratio(const char *a, size_t na, const char *b, size_t nb, double *out);

/* The openai/mrcr grade: 0 unless `response` starts with `hash`; otherwise the hash is
 * removed from the front of both response and answer (answer only when it starts with it)
 * and the result is lcx__seqmatch_ratio(response', answer'). */
int lcx__mrcr_grade(const char *response, const char *answer, const char *hash, double *out);

/* ---------------------------------------------------------------- records (mrcr_io.c) */

/* Hard caps (file formats are validated before use). */
#define LCX_MRCR_MAX_LINE      ((size_t)64 << 20)  /* one JSONL record */
#define LCX_MRCR_MAX_MESSAGES  100000              /* messages in one prompt */
#define LCX_MRCR_MAX_RECORDS   1000000

typedef struct {
    char *role;        /* "user" | "assistant" | "system" (others are kept as given) */
    char *content;     /* UTF-8 text */
    size_t len;        /* strlen(content) */
} lcx_mrcr_msg;

typedef struct {
    lcx_mrcr_msg *msgs;         /* the decoded `prompt` list, in order */
    size_t n_msgs;
    char *answer;               /* includes the hash prefix, as in openai/mrcr */
    char *hash;                 /* random_string_to_prepend */
    int n_needles;              /* 2, 4 or 8 */
    long desired_msg_index;     /* index into msgs of the target's *user request* (openai/mrcr);
                                 * the target reply is msgs[desired_msg_index + 1] */
    long total_messages;
    long n_chars;               /* characters of the prompt, as the data set states it */
} lcx_mrcr_rec;

typedef struct {
    lcx_mrcr_rec *recs;
    size_t n;
    size_t alloc;
} lcx_mrcr_set;

/* Parses one JSONL line (`prompt` may be a JSON string holding the list, as in openai/mrcr,
 * or the list itself). Fills *rec (caller frees with lcx__mrcr_rec_free). LCX_EINVAL with a
 * reason in err (if err_len > 0) on any missing/mistyped field. */
int lcx__mrcr_parse_line(const char *line, size_t len, lcx_mrcr_rec *rec, char *err, size_t err_len);
/* Reads a whole JSONL file; blank lines are skipped; a bad line fails the whole read with
 * its line number in err. */
int lcx__mrcr_read_jsonl(const char *path, lcx_mrcr_set *set, char *err, size_t err_len);
/* Reads the next line of f into line (cap LCX_MRCR_MAX_LINE; newline stripped).
 * Returns 1 with a line, 0 at EOF, LCX_ELIMIT for an over-long line (consumed, so the caller
 * may report and stop), LCX_EIO / LCX_ENOMEM. */
int lcx__mrcr_next_line(FILE *f, lcx_buf *line);
/* Appends a record as one JSONL line (prompt written as a JSON string, as openai/mrcr). */
int lcx__mrcr_write_line(FILE *f, const lcx_mrcr_rec *rec);
void lcx__mrcr_rec_free(lcx_mrcr_rec *rec);
void lcx__mrcr_set_free(lcx_mrcr_set *set);

/* Bins by n_chars (characters), the reference harness's rule:
 * 8K=[16K,32K) 16K=[32K,64K) 32K=[64K,128K) 64K=[128K,256K) 128K=[256K,512K)
 * 256K=[512K,1M) 512K=[1M,2M) 1M=[2M,5M), K = 1024, M = 1024*1024 (as openai/mrcr's
 * bins: 2**14 .. 2**22 plus the 1M bin up to 5*2**20). Anything else: LCX_MRCR_BIN_OTHER. */
#define LCX_MRCR_NBINS 8
#define LCX_MRCR_BIN_OTHER 8
int lcx__mrcr_bin_of(long n_chars);
/* "8k" .. "1m", "other". */
const char *lcx__mrcr_bin_name(int bin);
/* Parses "8k" / "1m" / "128K" into a bin index; LCX_EINVAL otherwise. */
int lcx__mrcr_bin_parse(const char *s);
/* [lo, hi) characters of a bin. */
void lcx__mrcr_bin_range(int bin, long *lo, long *hi);

/* ---------------------------------------------------------------- generator (mrcr_gen.c) */

typedef struct {
    int n_needles;             /* 2, 4, 8 */
    int bin;                   /* target bin; n_chars lands inside it */
    uint64_t seed;
    const char *haystack_dir;  /* directory of *.txt essays used as prose */
} lcx_mrcr_gen_opts;

/* Opaque generator: loads the haystack once, then makes records. */
typedef struct lcx_mrcr_gen lcx_mrcr_gen;
int  lcx__mrcr_gen_open(const char *haystack_dir, lcx_mrcr_gen **out);
void lcx__mrcr_gen_close(lcx_mrcr_gen *g);
/* Final-question style: 0 (default) = exactly the SPEC §6 template; 1 = varied phrasings
 * (ordinal words, a one-swap typo in the word, "(1-indexed)", "last"/"second to last"/
 * "(0 indexed)", "the Nth time I asked for a F about T") — to stress the Selector's parser.
 * Deterministic either way. */
void lcx__mrcr_gen_set_varied(lcx_mrcr_gen *g, int varied);
/* Record `index` of the stream (seed, n_needles, bin): deterministic in all four.
 * Same arguments → identical record, independent of what was generated before. */
int  lcx__mrcr_gen_record(lcx_mrcr_gen *g, uint64_t seed, int n_needles, int bin, long index,
                         lcx_mrcr_rec *rec);

/* ---------------------------------------------------------------- stats (mrcr_stats.c) */

typedef struct {
    double mean, ci95;        /* ci95: half-width, 1.96 * sample sd / sqrt(n) (0 when n < 2) */
    double p50, p95;          /* nearest-rank percentiles of the latency array */
} lcx_eval_stats;
void lcx__eval_mean_ci(const double *x, size_t n, double *mean, double *ci95);
/* Nearest-rank percentile (q in [0,1]); x is copied, not modified. 0 when n == 0. */
double lcx__eval_percentile(const double *x, size_t n, double q);

/* ---------------------------------------------------------------- runner (mrcr_eval.c) */

struct lcx_embedder;

enum { LCX_MRCR_RECIPE_SELECTOR = 0, LCX_MRCR_RECIPE_PLAIN = 1, LCX_MRCR_RECIPE_MULTIQ = 2 };

typedef struct {
    int recipe;                       /* LCX_MRCR_RECIPE_* */
    int top_k;                        /* retrieved turns (default 8) */
    const struct lcx_embedder *emb;   /* borrowed; needed by plain/multiq (and the selector's
                                       * fallback); NULL: selector only, no fallback */
    int ordinal_offset;               /* test hook: a deliberately wrong selector adds this to
                                       * the requested ordinal (0 in real runs) */
    const char *upstream;             /* OpenAI-compatible base URL; NULL: det copy, no model */
    const char *model;                /* "model" field sent upstream (default "default") */
    size_t budget_tokens;             /* compaction budget for the upstream (default 8192) */
    long timeout_ms;                  /* per upstream request (default 600000) */
    struct lcx_nnq *nn;               /* borrowed neural channel: MultiQ's cross-encoder rerank
                                       * (lcx_recipe_multiq_nn); NULL: none */
} lcx_mrcr_eval_opts;

typedef struct {
    double score;                     /* MRCR grade of response */
    char *response;                   /* malloc'd */
    long retrieved[64];               /* assistant message indices, best first */
    int n_retrieved;
    int target_hit;                   /* the target reply (desired_msg_index + 1) among retrieved (recall@K) */
    int fail_closed;                  /* selector could not parse/match (fallback used) */
    int used_rerank;                  /* MultiQ's top turns were reordered by the cross-encoder */
    double ms;                        /* recipe + grading wall time */
} lcx_mrcr_outcome;

/* Runs one record through the recipe (and the upstream when set) and grades it.
 * Without an upstream the response is a deterministic copy: the Selector's pick, or the
 * top-1 retrieved reply for plain/multiq, prefixed with the record's hash. */
int  lcx__mrcr_eval_one(const lcx_mrcr_rec *rec, const lcx_mrcr_eval_opts *o, lcx_mrcr_outcome *out);
void lcx__mrcr_outcome_free(lcx_mrcr_outcome *out);

/* Same, when the caller has already obtained the response (e.g. from an upstream model):
 * grades `response` and fills out (retrieved/recall from the recipe as above). response is
 * copied. */
int  lcx__mrcr_eval_with_response(const lcx_mrcr_rec *rec, const lcx_mrcr_eval_opts *o,
                                 const char *response, lcx_mrcr_outcome *out);

/* ---------------------------------------------------------------- NIAH strict (niah.c) */

enum { LCX_NIAH_PASS = 1, LCX_NIAH_PARTIAL_WORD = 2, LCX_NIAH_PARTIAL_NUMBER = 3, LCX_NIAH_FAIL = 4 };
/* Grades generated text against the needle's answer phrase (e.g. "PURPLE ELEPHANT 7742"):
 * PASS = the exact phrase, case-sensitive, on token boundaries (trailing '.' of the answer
 * ignored); PARTIAL_WORD = every word token present but not the phrase; PARTIAL_NUMBER =
 * every number token present but not all words; FAIL otherwise. When generated starts with
 * prompt (an echo), that prefix is ignored. Returns the grade, or LCX_EINVAL/LCX_ELIMIT
 * (answer ≥ 512 bytes). */
int lcx__niah_grade(const char *generated, const char *prompt, const char *answer);
const char *lcx__niah_grade_name(int grade);

/* ---------------------------------------------------------------- rescue ramp (ramp.c)
 * SPEC §6: per context size, three arms — baseline (one turn, no eviction), v3 (V3 with
 * production defaults, no endpoint) and v3+longctx (the same + the rescue endpoint) —
 * over a blob of FILLER sentences with FACT planted at a depth, then QUESTION. Two-turn:
 * turn 1 = blob + TURN1_ASK, turn 2 = QUESTION (the reference protocol); single-turn: one
 * message blob + QUESTION (the session's single-turn rescue). The texts are the SPEC's,
 * byte for byte. */
#define LCX_RAMP_FILLER "the routine quarterly procedure required careful review of the documented operational records during the assessment cycle. "
#define LCX_RAMP_FACT "IMPORTANT: Project NOVA was provisioned with access code 481729. All technicians must memorize this code prior to deployment."
#define LCX_RAMP_QUESTION "What is the access code for Project NOVA? Answer with only the digits."
#define LCX_RAMP_TURN1_ASK "Please respond with just 'OK'"
#define LCX_RAMP_ANSWER "481729"

/* A random-weight qwen2 model with the ramp vocabulary (ramp_model.c). */
typedef struct {
    const char *name;
    int n_layer, n_embd, n_head, n_head_kv, head_dim, n_ff;
    int wtype;                 /* matrices: eng_type (F32 = 0, Q8_0 = 8) */
} lcx_ramp_shape;
/* "tiny" (2 layers, 64 wide, F32) or "qwen2.5-0.5b" (24 layers, 896, 14/2 heads, Q8_0). */
int lcx__ramp_model_shape(const char *name, lcx_ramp_shape *out);
int lcx__ramp_write_model(const char *path, const lcx_ramp_shape *sh, uint64_t seed);

enum { LCX_RAMP_BASELINE = 0, LCX_RAMP_V3 = 1, LCX_RAMP_V3_LONGCTX = 2, LCX_RAMP_NARMS = 3 };
enum { LCX_RAMP_SINGLE_TURN = 0, LCX_RAMP_TWO_TURN = 1 };
#define LCX_RAMP_MAX_SIZES 16
#define LCX_RAMP_MAX_DEPTHS 16
#define LCX_RAMP_REPLY_MAX 128    /* bytes of a cell's reply kept (a reply is max_gen tokens) */

typedef struct {
    int size, arm, rescue, seed;
    int direction, mode;          /* V3 arms: triatt_direction / triatt_mode (baseline: unused) */
    double depth;
    double t1_s, t2_s, total_s;   /* turn times (t2 = 0 for one turn); total incl. setup */
    double evicted_pct;           /* cells evicted / tokens of the conversation, % */
    int rounds;
    int answer;                   /* lcx__niah_grade of the answering turn's reply */
    char reply[LCX_RAMP_REPLY_MAX];   /* that reply (truncated): why a cell missed */
    bool cache_recall;            /* the fact's tokens all survive, or it was rescued */
    bool fact_in_cache, fact_in_rescue;
    int n_tokens;                 /* logical tokens at the end */
    int rescue_chunks;
    double rescue_ms;             /* flush + Tier-3 round trip of the answering turn */
    double extra_prefill_ms;      /* prefill of the rescue message's tokens: their share of the
                                   * answering turn's prefill time (an estimate) */
    uint64_t spans_sent, spans_dropped;
    uint64_t kept_sig;            /* FNV-1a of the surviving cells' positions in cell order (which
                                   * cells a policy kept: tests compare configurations) */
} lcx_ramp_cell;

typedef struct {
    const char *model_path;
    int sizes[LCX_RAMP_MAX_SIZES], n_sizes;   /* tokens */
    bool arms[LCX_RAMP_NARMS];
    double depths[LCX_RAMP_MAX_DEPTHS];
    int n_depths;
    int n_seeds;                  /* seeds first_seed.. first_seed+n_seeds-1 per (size, arm, depth) */
    int first_seed;               /* 1 (a later run can extend an earlier one's seeds) */
    int rescue;                   /* LCX_RAMP_SINGLE_TURN / _TWO_TURN */
    int direction;                /* triatt_direction of the V3 arms (TRIATT_KEEP_HIGH) */
    int mode;                     /* triatt_mode of the V3 arms (TRIATT_MODE_TRIG) */
    /* Optional lists: when n_X > 0 every V3 cell runs once per listed value (rescue ×
     * direction × mode), and rescue/direction/mode above are ignored; the baseline arm runs
     * once per (size, depth, seed) whatever the lists say (no eviction, no rescue). */
    int rescues[2], n_rescues;
    int directions[2], n_directions;
    int modes[3], n_modes;
    double budget_frac;           /* budget = size · frac (0.9) */
    const char *endpoint;         /* required for v3+longctx */
    int n_threads, n_ubatch;      /* 1, 512 */
    int max_gen;                  /* tokens per reply (16) */
    int window, prefix, warmup, hybrid;   /* V3: 128, 32, 256, 2 */
    bool prepopulate;             /* v3+longctx: also post the prompt itself (true) */
    int shard, n_shards;          /* run only the cells whose index in the plan is shard mod
                                   * n_shards (0, 1: all); `longctx eval ramp --jobs` */
    void (*on_cell)(void *ud, const lcx_ramp_cell *c, int i, int n);   /* progress */
    void *ud;
} lcx_ramp_opts;
void lcx__ramp_defaults(lcx_ramp_opts *o);
/* Runs every (size, arm, depth, seed) cell; *cells malloc'd (free()). err explains a
 * refusal (model, sizes too small for the budget, missing endpoint). */
int lcx__ramp_run(const lcx_ramp_opts *o, lcx_ramp_cell **cells, int *n_cells, char *err, size_t err_len);
/* The blob + question of one cell (the user message of a single-turn run), malloc'd;
 * exposed for tests. n_fill: filler sentences, fact after round(depth·n_fill) ± a seed's
 * jitter (±max(2, n_fill/40) sentences; 2s+1 consecutive seeds, distinct offsets). */
char *lcx__ramp_blob(int n_fill, double depth, int seed);
const char *lcx__ramp_arm_name(int arm);
const char *lcx__ramp_rescue_name(int rescue);
const char *lcx__ramp_direction_name(int direction);   /* "keep_high" / "evict_high" */
const char *lcx__ramp_mode_name(int mode);             /* "trig" / "random" / "recency" */
/* Cells back from lcx__ramp_json output (the fields it writes; the rest zero). Appends to
 * *cells (realloc'd), *n updated; *model set to the file's model name when NULL. */
int lcx__ramp_json_read(const char *json, lcx_ramp_cell **cells, int *n, char **model);
/* Output: the per-cell table + per-(size, arm, rescue, direction, mode) summary; the issue's JSON; an SVG chart. */
void  lcx__ramp_print_table(FILE *f, const lcx_ramp_cell *c, int n);
char *lcx__ramp_json(const char *model, const lcx_ramp_cell *c, int n);
char *lcx__ramp_svg(const char *model, const lcx_ramp_cell *c, int n);

#endif
