/* Internals of lcx_neural (src/neural): the model struct shared by the loaders (load.c,
 * safetensors.c), the tokenizer (wordpiece.c) and the forward pass (forward.c). */
#ifndef LCX_NN_INTERNAL_H
#define LCX_NN_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "longctx/lcx_neural.h"
#include "engine/gguf.h"
#include "engine/quant.h"
#include "engine/threads.h"
#include "neural/gemm.h"

/* A weight matrix as the engine kernels take it: n_out rows of n_in elements of `type`,
 * row r at data + r * row_bytes. Also used for the embedding tables (rows = ids). */
typedef struct {
    int type;               /* eng_type */
    const void *data;
    size_t row_bytes;
    int64_t n_in, n_out;
    bool packed;            /* float weights: pk is what the forward pass multiplies with */
    lcx__nn_packed pk;
} lcx__nn_mat;

typedef struct {
    lcx__nn_mat q, k, v, o, up, down;
    float *bq, *bk, *bv, *bo, *bup, *bdown;
    float *ln1_w, *ln1_b, *ln2_w, *ln2_b;    /* attention-output LN, layer-output LN */
} lcx__nn_layer;

/* Vocabulary in Hugging Face spelling ("word", "##piece", "[CLS]"), open-addressing hash. */
typedef struct {
    int32_t n;
    char *blob;
    uint32_t *off, *len;
    uint32_t *slots;        /* id + 1, 0 = empty */
    uint32_t mask;
    uint32_t max_len;       /* longest entry in bytes */
} lcx__nn_vocab;

#define LCX_NN_N_SPECIAL 5  /* [CLS] [SEP] [UNK] [PAD] [MASK]: matched in input text */

struct lcx_nn_model {
    lcx_nn_info info;
    lcx_nn_opts opts;

    lcx__nn_mat tok_emb, pos_emb, type_emb;
    float *emb_ln_w, *emb_ln_b;
    lcx__nn_layer *layers;
    lcx__nn_mat pool_w, cls_w;              /* reranker head: pooler dense (tanh), classifier */
    float *pool_b, *cls_b;

    lcx__nn_vocab vocab;
    int32_t special[LCX_NN_N_SPECIAL];      /* ids of the special-token strings, -1 absent */
    char *special_txt[LCX_NN_N_SPECIAL];

    /* sources */
    eng_gguf *gguf;
    void *map;                              /* safetensors mapping */
    size_t map_len;
    char *files[8];                         /* every file read, for lcx_nn_model_hash */
    int n_files;
    char hash[65];

    void **owned;                           /* converted / dequantized buffers */
    int n_owned, cap_owned;

    /* time spent per part of the forward pass, ns, accumulated (benchmarks read and reset) */
    uint64_t prof_mm_ns, prof_att_ns, prof_total_ns;

    /* per handle: lcx_nn_share gives a second handle its own pool, scratch and timers and
     * copies the rest, which stays read-only and belongs to the loaded (base) handle */
    eng_pool *pool;
    void *ws;                               /* forward scratch */
    size_t ws_bytes;
    lcx_nn_model *base;                     /* the loaded handle (NULL: this is it) */
    atomic_int refs;                        /* base only: live handles on these weights */
};

/* err helper: formats into err when given */
void lcx__nn_err(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Tracks a buffer the model frees; returns p, or NULL (and frees p) on OOM. */
void *lcx__nn_own(lcx_nn_model *m, void *p);
/* A 1-D tensor (any float type) as an owned F32 array of n elements. */
float *lcx__nn_vec_f32(lcx_nn_model *m, int type, const void *data, int64_t n);
/* Checks hyper-parameters against caps and against each other. */
int lcx__nn_check_info(const lcx_nn_info *inf, const char *src, char *err, size_t errlen);
/* Re-lays a float matrix as GEMM panels (owned); F16 stays F16, F32 / BF16 become F32. */
int lcx__nn_mat_pack(lcx_nn_model *m, lcx__nn_mat *w);

/* vocabulary (wordpiece.c) */
int lcx__nn_vocab_build(lcx__nn_vocab *v, int32_t n, const char *const *tok, const size_t *len);
void lcx__nn_vocab_free(lcx__nn_vocab *v);
int32_t lcx__nn_vocab_get(const lcx__nn_vocab *v, const char *s, size_t n);

/* the Hugging Face safetensors loader (hf.c) */
int lcx__nn_load_hf(lcx_nn_model *m, const char *dir, char *err, size_t errlen);
void lcx__nn_unmap(void *p, size_t n);

/* GELU forms (forward.c), exposed for the kernel tests: scalar references and the vector
 * versions used by the forward pass, in place over n floats. */
float lcx__nn_gelu_erf_ref(float x);
float lcx__nn_gelu_tanh_ref(float x);
void  lcx__nn_gelu(lcx_nn_gelu g, float *x, int64_t n);
/* exp over n floats (vector; max rel. error ~2 ulp), in place. */
void  lcx__nn_exp(float *x, int64_t n);

#endif
