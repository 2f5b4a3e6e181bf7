/* Neural retrieval models on the CPU: BERT-family sentence embedders and cross-encoder
 * rerankers, loaded from a GGUF file (llama.cpp's `bert` layout) or from a Hugging Face /
 * sentence-transformers folder (config.json, vocab.txt, model.safetensors, optional
 * tokenizer_config.json, sentence_bert_config.json, 1_Pooling/config.json).
 *
 *   lcx_nn_model *m; char err[256];
 *   if (lcx_nn_load("all-MiniLM-L6-v2/", NULL, &m, err, sizeof err) < 0) { puts(err); ... }
 *   const lcx_nn_info *inf = lcx_nn_info_of(m);
 *   float *v = malloc(n * inf->dim * sizeof *v);
 *   lcx_nn_embed(m, texts, NULL, n, v);           // n L2-normalised vectors of inf->dim
 *   lcx_nn_rerank(rm, query, qlen, docs, NULL, n_docs, scores);   // raw logits
 *   lcx_nn_free(m);
 *
 * Semantics follow Hugging Face (BertTokenizer, BertModel, BertForSequenceClassification,
 * sentence-transformers) for both formats: lower-casing (and accent stripping) as the
 * tokenizer / sentence-transformers config says (GGUF: always, as llama.cpp's bert vocab is
 * uncased); truncation keeps [CLS] + the first max_seq_len - 2 pieces + [SEP] (pairs: the
 * longer side loses pieces first, HF's "longest_first"); GELU as config.json names it
 * ("gelu" = erf form, "gelu_new"/"gelu_pytorch_tanh" = tanh form; GGUF: erf); pooling from
 * 1_Pooling/config.json (GGUF: bert.pooling_type); cross-encoder pairs are
 * [CLS] q [SEP] d [SEP] with token types 0 then 1; the rerank score is the raw logit (no
 * sigmoid). docs/neural.md lists where llama.cpp differs and the options that reproduce it.
 *
 * Ownership: the model owns its mapping(s) and weights; lcx_nn_free(NULL) is a no-op.
 * Thread-safety: a model is read-only after load, but each handle owns one worker pool and
 * scratch arena, so calls on one handle must not overlap: give each thread its own handle
 * with lcx_nn_share (the weights are not copied).
 * Failure: int functions return 0 (or a count) or a negative LCX_E* code, never abort;
 * loaders write a sentence naming the file, the field and the offset into err. */
#ifndef LONGCTX_LCX_NEURAL_H
#define LONGCTX_LCX_NEURAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "longctx/lcx_err.h"

typedef struct lcx_nn_model lcx_nn_model;

typedef enum { LCX_NN_POOL_MEAN = 1, LCX_NN_POOL_CLS = 2, LCX_NN_POOL_RANK = 4 } lcx_nn_pool;
typedef enum { LCX_NN_GELU_ERF = 0, LCX_NN_GELU_TANH = 1 } lcx_nn_gelu;
/* Weight storage the matmuls run on; KEEP = as stored in the file. */
typedef enum {
    LCX_NN_WT_KEEP = 0, LCX_NN_WT_F32 = 1, LCX_NN_WT_F16 = 2, LCX_NN_WT_BF16 = 3, LCX_NN_WT_Q8_0 = 4
} lcx_nn_wtype;

#define LCX_NN_MAX_LAYERS 128
#define LCX_NN_MAX_DIM    8192       /* hidden and FFN width caps (hostile configs) */
#define LCX_NN_MAX_CTX    8192       /* position embeddings */
#define LCX_NN_MAX_VOCAB  (1 << 21)
#define LCX_NN_MAX_BATCH  1024       /* sequences per forward call */

typedef struct {
    int n_threads;            /* 0 = 1 */
    lcx_nn_wtype wtype;       /* convert the matmul weights at load (KEEP: as stored) */
    int gelu;                 /* -1 = as the model says; else lcx_nn_gelu */
    /* llama.cpp compatibility (for its goldens): every token type 0 in pairs */
    bool pair_types_all_zero;
    int max_seq_len;          /* 0 = the model's; else min(this, the model's) */
    /* float weights: false = packed-panel GEMM (default, faster), true = the engine's
     * eng_matmul row kernels (benchmark A/B; quantized weights always use the engine's) */
    bool engine_kernels;
} lcx_nn_opts;
void lcx_nn_opts_init(lcx_nn_opts *o);

typedef struct {
    char name[128];           /* general.name / folder name */
    char format[16];          /* "gguf" or "safetensors" */
    int n_layer, dim, n_head, n_ff, n_vocab, n_pos, n_type;
    float eps;
    lcx_nn_pool pool;
    lcx_nn_gelu gelu;
    bool normalize;           /* embed L2-normalises (sentence-transformers Normalize / GGUF) */
    bool is_reranker;         /* has the classification head (RANK pooling) */
    int n_labels;             /* reranker outputs (score = label 0) */
    lcx_nn_wtype wtype;       /* matmul weight type in use (never KEEP; mixed files: the
                                 type of the first layer's Q weight) */
    int max_seq_len;          /* truncation length incl. [CLS]/[SEP] */
    bool lowercase, strip_accents, cjk_split;
    int32_t cls_id, sep_id, unk_id, pad_id;
} lcx_nn_info;

/* path: a .gguf file, or a folder with config.json + model.safetensors + vocab.txt.
 * o may be NULL (defaults). LCX_EIO, LCX_ETRUNC, LCX_ECORRUPT, LCX_ENOTFOUND (missing file
 * or tensor), LCX_ENOTSUP (architecture, dtype, activation), LCX_ELIMIT, LCX_ENOMEM. */
int  lcx_nn_load(const char *path, const lcx_nn_opts *o, lcx_nn_model **out, char *err, size_t errlen);
/* Frees a handle; the weights go with the last handle on them (lcx_nn_share), in any order. */
void lcx_nn_free(lcx_nn_model *m);
/* A second handle on m's weights, with its own worker pool (m's n_threads) and scratch, so
 * two threads can run forwards at once without a second copy of the model in memory. */
int  lcx_nn_share(lcx_nn_model *m, lcx_nn_model **out);
const lcx_nn_info *lcx_nn_info_of(const lcx_nn_model *m);
/* sha256 (hex, 64 chars + NUL) over the bytes of every file the model was loaded from, in a
 * fixed order: the identity of a model for store fingerprints. Computed at the first call. */
int  lcx_nn_model_hash(lcx_nn_model *m, char out[65]);

/* Tokenizer. lens may be NULL (NUL-terminated texts). Writes [CLS] pieces [SEP], truncated
 * to max_seq_len; returns the number of ids (<= max) or LCX_ELIMIT when max is too small. */
int lcx_nn_tokenize(const lcx_nn_model *m, const char *text, size_t len, int32_t *ids, int max);
/* Pair: [CLS] a [SEP] b [SEP] with types (0 for [CLS] a [SEP], 1 for b [SEP]). */
int lcx_nn_tokenize_pair(const lcx_nn_model *m, const char *a, size_t alen, const char *b,
                         size_t blen, int32_t *ids, int32_t *types, int max);
/* Raw WordPiece pieces of text (no specials, no truncation); returns the full count even
 * when it exceeds max (only max are stored). */
int lcx_nn_wordpiece(const lcx_nn_model *m, const char *text, size_t len, int32_t *ids, int max);

/* A padded batch: n_seq rows of seq_len ids; mask[i*seq_len+j] = 1 for real tokens (which
 * must form a prefix of the row), 0 for padding. types may be NULL (all 0). */
typedef struct {
    int n_seq, seq_len;
    const int32_t *ids, *types;
    const uint8_t *mask;
} lcx_nn_batch;

/* Encoder forward. pooled (n_seq x dim, may be NULL): pooled per the model (mean over the
 * masked tokens, or [CLS]), L2-normalised when info.normalize. hidden (n_seq x seq_len x dim,
 * may be NULL): final hidden state of every position (padding rows zero). scores (n_seq, may
 * be NULL; rerankers only): classification logit 0. */
int lcx_nn_forward(lcx_nn_model *m, const lcx_nn_batch *b, float *pooled, float *hidden, float *scores);

/* Tokenize + batch + forward: n texts -> n vectors of dim floats (out, n*dim). */
int lcx_nn_embed(lcx_nn_model *m, const char *const *texts, const size_t *lens, int n, float *out);
/* n documents against one query -> n scores (raw logits). LCX_ENOTSUP for an embedder. */
int lcx_nn_rerank(lcx_nn_model *m, const char *query, size_t qlen, const char *const *docs,
                  const size_t *dlens, int n, float *scores);

/* The store's embedder fingerprint of a model: "bert:FORMAT:dD:pPOOL:gGELU:sMAXSEQ:wWTYPE:nNORM:"
 * + the first 16 hex digits of lcx_nn_model_hash. LCX_ELIMIT when cap is too small (128 is
 * enough). */
int lcx_nn_fingerprint(lcx_nn_model *m, char *out, size_t cap);
/* Wraps m as an lcx_embedder (include/longctx/lcx.h) for the store and the service: calls are
 * serialised (thread-safe as lcx_embedder requires), vectors always L2-normalised, the
 * fingerprint is lcx_nn_fingerprint. Takes ownership of m (freed also on failure). LCX_EINVAL
 * for a cross-encoder. */
struct lcx_embedder;
int lcx_nn_embedder_new(lcx_nn_model *m, struct lcx_embedder **out);

/* FLOPs of the matmuls (2 x multiply-adds, attention products included) of one forward over
 * sequences of these lengths: what benchmarks divide by. */
double lcx_nn_flops(const lcx_nn_info *inf, const int *seq_lens, int n_seq);

#endif
