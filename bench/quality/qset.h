/* Retrieval-quality sets (bench/quality; docs/benchmarks/core.md "Quality").
 *
 * Code set (CodeSearchNet-style): real source files that Debian packages install (C
 * headers, the JavaScript of npm's own dependencies, Perl modules). Every doc comment
 * (C/JS: a line starting with slash-star-star; Perl: a # block before `sub`, and all POD) is
 * removed from the indexed copy; the first sentence of a doc comment that documents a
 * definition becomes a question whose one right answer is the chunk holding that
 * definition's line. Scored for longctx's default code retrieval (lcx_code_retrieve: the
 * scope chunker, hybrid search, rerank, symbol pulls) and for a plain BM25 over the very
 * same chunks, side by side.
 *
 * Prose set (RULER-style): real essays (fixtures/haystack) cut into ~1 KB evicted spans,
 * with needles "One of the special magic numbers for {key} is: {value}." — one target
 * and distractors whose keys share a word with it — queried as a client of the rescue
 * path does (lcx_rescue_query on a long user message, then the store search with the
 * route's defaults), with and without a "Question:" marker; the baseline is plain BM25
 * given only the question sentence.
 *
 * Everything is deterministic (sorted file lists, a seeded splitmix64). */
#ifndef LCX_BENCH_QSET_H
#define LCX_BENCH_QSET_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    double r1, r10, mrr;   /* recall@1, recall@10 (prose: recall@8), MRR@10 */
    int n;
} qs_score;

/* one ranking's per-question ranks (1-based; 0 = not in the top 10) summarised */
void qs_score_add(qs_score *s, int rank, int at);
void qs_score_done(qs_score *s);

typedef struct {
    const char *name;       /* printed */
    const char *const *roots;   /* files or directories (recursed), NULL-terminated */
    int max_files;          /* files indexed (0 = all), picked by seeded shuffle */
    int max_q;              /* questions (0 = all), picked by seeded shuffle */
    uint64_t seed;
    const char *dump_dir;   /* non-NULL: write <name>.chunks and <name>.q there for offline probes
                             * (bench/quality/probe_semantic.py): one chunk per line "id\tpath\ttext"
                             * (newlines and tabs as spaces); one question per line
                             * "question\tright ids\tid:score,…" (core search top 128) */
} qs_code_cfg;

typedef struct {
    qs_score deflt;         /* lcx_code_retrieve, top_k 10 */
    qs_score core;          /* lcx_index_search defaults over the same chunks (no symbol pulls) */
    qs_score bm25;          /* plain BM25 over the same chunks */
    qs_score bm25_lcx;      /* longctx's BM25 channel alone (alpha 0, no rerank): identifier-aware BM25 */
    /* recall of lcx_index_search defaults at depth 32 / 64 / 128 (top_k = prefilter = depth):
     * the ceiling of anything that only re-orders the core search's candidates */
    double pool_r[3];
    /* the default and plain BM25 on two halves of the questions, split by a hash of the
     * question text: [0] the tuning half, [1] the held-out half (docs/core.md) */
    qs_score half_d[2], half_b[2];
    int files, chunks, questions;
    int unindexed;          /* questions dropped: their file is not indexed by the scope (walk.c skips it) */
    int sym_pulls;          /* questions whose result had a symbol pull */
} qs_code_result;

/* the half (0 tuning, 1 held out) a question belongs to */
int qs_half(const char *q);

/* Builds the set in a temporary directory under tmp (removed afterwards), runs all
 * rankings. verbose ≥ 2 prints each question where the default loses to BM25.
 * 0, or LCX_ENOTFOUND when no root exists / no question was found, or a negative LCX_E*. */
#define QS_POOL_DEPTHS {32, 64, 128}
int qs_code_run(const qs_code_cfg *cfg, const char *tmp, int verbose, qs_code_result *out);

typedef struct {
    const char *haystack;   /* directory of .txt essays */
    const int *tokens;      /* session lengths in tokens (≈ 4 bytes each), 0-terminated */
    int trials;             /* per length */
    int distractors;        /* needles besides the target (keys sharing one word with it) */
    uint64_t seed;
} qs_prose_cfg;

enum { QS_MARKER, QS_NOMARKER, QS_PLAIN, QS_NSHAPES };
typedef struct {
    qs_score deflt[QS_NSHAPES];   /* rescue path, per query shape */
    qs_score bm25;                /* plain BM25 with the question sentence */
    int sessions;
} qs_prose_result;

int qs_prose_run(const qs_prose_cfg *cfg, int verbose, qs_prose_result *out);

#endif
