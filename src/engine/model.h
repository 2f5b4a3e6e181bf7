/* Engine internals shared by model.c (loading), forward.c (decode, KV cache) and the CLI
 * helpers. Not a public contract: see include/longctx/engine.h. */
#ifndef ENG_MODEL_H
#define ENG_MODEL_H

#include "longctx/engine.h"
#include "engine/gguf.h"
#include "engine/quant.h"
#include "util/util.h"

/* A weight matrix view into the mapping: n_out rows of n_in elements of `type`. */
typedef struct {
    const void *data;
    eng_type type;
    int64_t n_in, n_out;
    size_t row_bytes;
} eng_wmat;

typedef struct {
    float *attn_norm, *ffn_norm;          /* (n_embd) */
    float *bq, *bk, *bv;                  /* (n_head*hd), (n_head_kv*hd) x2; NULL when absent */
    float *q_norm, *k_norm;               /* (hd), qwen3 only */
    eng_wmat wq, wk, wv, wo, wg, wu, wd;
} eng_layer;

struct eng_model {
    eng_gguf *g;
    eng_model_info info;
    char arch_name[16];
    eng_wmat tok_embd;                    /* (n_vocab rows, n_embd) */
    eng_wmat output;                      /* same as tok_embd when tied */
    float *out_norm;                      /* (n_embd) */
    float *rope_freqs;                    /* (n_rot/2) frequency divisors (llama3), or NULL */
    eng_layer *layers;
    void *wcopy;                          /* huge-page copy of the matrices, or NULL (model.c) */
    size_t wcopy_len;
};

/* Formats a message into err (when given) and returns rc: `return eng__errf(err, n,
 * LCX_EINVAL, "bad %s", what);` (model.c). */
int eng__errf(char *err, size_t n, int rc, const char *fmt, ...) __attribute__((format(printf, 4, 5)));

#endif
