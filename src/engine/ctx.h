/* The context struct, shared by forward.c (decode, KV cache) and v3.c (TriAttention V3
 * inside the forward pass). Not a public contract. */
#ifndef ENG_CTX_H
#define ENG_CTX_H

#include "engine/model.h"
#include "engine/threads.h"

#define MAX_TH 64

typedef struct eng_v3 eng_v3;

struct eng_ctx {
    const eng_model *m;
    int n_ctx, n_ub, nth;
    eng_pool *pool;
    /* KV cache: (n_layer, n_ctx, kv_dim) each */
    float *kc, *vc;
    int32_t *cell_pos;        /* (n_ctx), -1 = free */
    int32_t *cell_tok;        /* (n_ctx) token id written into the cell, -1 = free */
    int n_used, hi;           /* occupied cells; 1 + highest occupied index */
    int32_t max_pos;
    /* scratch, (n_ub, dim) */
    float *x, *xn, *q, *k, *v, *att, *gate, *up;
    uint8_t *act[2];          /* quantized activations for up to two vec-dot types */
    uint8_t *mm_ws;           /* (nth, ENG_MATMUL_WS_BYTES): prompt-matmul workspace per thread */
    eng_type act_type[2];
    const float *act_src[2];  /* what act[i] currently holds (pointer + rows) */
    int act_rows[2];
    size_t act_cap;           /* bytes per buffer */
    int att_qt;               /* attention query tile: ubatch tokens per task (forward.c) */
    float *scores;            /* (nth, att_qt * gqa, n_ctx) */
    int32_t *vis;             /* (nth, 2 * n_ctx) visible cells of one tile, then its masked ones */
    float *att_tmp;           /* (nth, att_qt * gqa, head_dim) one tile's attention output */
    float *rope_cs;           /* (n_ub, n_rot) cos,sin pairs */
    int32_t *ub_pos, *ub_cell;
    float *logits;            /* (n_logits_cap, n_vocab) */
    int logits_cap, n_logits, logits_base_all;
    bool logits_all;
    eng_q_hook q_hook;
    void *q_hook_ud;
    /* TriAttention V3 (v3.c); NULL = off. qpre: (n_ub, n_head*head_dim) pre-RoPE queries of
     * the current layer, kept only while the calibration still needs them. */
    eng_v3 *v3;
    float *qpre;
};

/* v3.c: called by eng_decode around each ubatch. */
/* Before a ubatch of nb tokens: makes the occupied cells dense again if someone removed cells
 * (eng_kv_remove_*), so the ubatch's cells and libtriatt's cell indices are [0, n_used). */
void eng__v3_before_ubatch(eng_ctx *c);
/* The ubatch's pre-RoPE queries of layer il (c->qpre, n tokens). */
void eng__v3_observe(eng_ctx *c, int il, int n);
/* After a ubatch whose tokens were written into c->ub_cell[0..n): pass end, fast-path
 * features, trigger, round. Returns 0 or a negative error (a failed round). */
int  eng__v3_after_ubatch(eng_ctx *c, const int32_t *tok, int n);
void eng__v3_free(eng_ctx *c);
/* Moves the last occupied cells into the holes (every layer) so occupied = [0, n_used);
 * writes the destination cells into moved (capacity n_ctx) and returns their count. */
int  eng__kv_compact(eng_ctx *c, int32_t *moved);

#endif
