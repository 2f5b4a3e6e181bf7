/* A random-weight F32 GGUF for the engine's tests (llama / qwen2 / qwen3 shapes, 64 wide,
 * 4 query and 2 KV heads, vocabulary 128), written with the engine's own GGUF writer. The
 * reference forward passes (ref_forward.py) read the same files, so what is random here
 * only has to be reproducible (a fixed xorshift stream per seed). Header-only: each test
 * that includes it gets its own copy. */
#ifndef LCX_TESTS_ENGINE_RAND_MODEL_H
#define LCX_TESTS_ENGINE_RAND_MODEL_H

#include "testutil.h"
#include "engine/gguf.h"
#include "engine/quant.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { TRM_E = 64, TRM_NH = 4, TRM_NKV = 2, TRM_FF = 96, TRM_NV = 128, TRM_NL = 2 };

typedef struct {
    const char *arch;        /* "llama", "qwen2" (QKV biases), "qwen3" (q/k norms), ... */
    const char *omit;        /* tensor left out (NULL = none) */
    int hd;                  /* head size (key_length); 0 = E / NH, key not written */
    int n_rot;               /* rope.dimension_count; 0 = not written (= hd) */
    int n_layer;             /* 0 = TRM_NL */
    int ctx_train;           /* context_length */
    float rope_linear;       /* linear rope scaling factor; 0 = none */
    bool bad_shape;          /* attn_q of layer 1 one row too long */
    bool rope_freqs;         /* rope_freqs.weight (Llama 3.1 style divisors in (0.1, 1.9)) */
    float qk_std, v_std;     /* attn_q/k and attn_v scales (0 = 0.25) */
    uint64_t seed;
} trm_spec;

static inline float trm_rnd(uint64_t *r)
{
    *r ^= *r >> 12; *r ^= *r << 25; *r ^= *r >> 27;
    return (float)((*r * 0x2545F4914F6CDD1Dull) >> 40) / (float)(1 << 24) * 2.0f - 1.0f;
}

/* Writes the model to path (cmocka-fails on a write error); buffers live until the write. */
static inline void trm_write(const char *path, const trm_spec *s)
{
    uint64_t rng = s->seed;
    float *pool[128];
    int np = 0;
    eng_gguf_writer *w = eng__gguf_writer_new(32);
    assert_non_null(w);
    char k[128];
#define KEY(x) (snprintf(k, sizeof k, "%s." x, s->arch), k)
    eng__gguf_w_str(w, "general.architecture", s->arch);
    eng__gguf_w_u32(w, KEY("embedding_length"), TRM_E);
    const int nl = s->n_layer ? s->n_layer : TRM_NL;
    eng__gguf_w_u32(w, KEY("block_count"), (uint32_t)nl);
    eng__gguf_w_u32(w, KEY("feed_forward_length"), TRM_FF);
    eng__gguf_w_u32(w, KEY("attention.head_count"), TRM_NH);
    eng__gguf_w_u32(w, KEY("attention.head_count_kv"), TRM_NKV);
    eng__gguf_w_u32(w, KEY("context_length"), (uint32_t)s->ctx_train);
    eng__gguf_w_f32(w, KEY("rope.freq_base"), 10000.0f);
    eng__gguf_w_f32(w, KEY("attention.layer_norm_rms_epsilon"), 1e-6f);
    const int hd = s->hd ? s->hd : TRM_E / TRM_NH;
    if (s->hd) {
        eng__gguf_w_u32(w, KEY("attention.key_length"), (uint32_t)hd);
        eng__gguf_w_u32(w, KEY("attention.value_length"), (uint32_t)hd);
    }
    if (s->n_rot) eng__gguf_w_u32(w, KEY("rope.dimension_count"), (uint32_t)s->n_rot);
    if (s->rope_linear > 0) {
        eng__gguf_w_str(w, KEY("rope.scaling.type"), "linear");
        eng__gguf_w_f32(w, KEY("rope.scaling.factor"), s->rope_linear);
    }
#undef KEY
    const float qk = s->qk_std > 0 ? s->qk_std : 0.25f, vs = s->v_std > 0 ? s->v_std : 0.25f;
#define T(nm, n0, n1, sc, one)                                                                \
    do {                                                                                      \
        if (s->omit && !strcmp(s->omit, nm)) break;                                           \
        float *b = malloc(sizeof(float) * (size_t)(n0) * (size_t)(n1));                       \
        assert_non_null(b);                                                                   \
        for (int i = 0; i < (n0) * (n1); i++) b[i] = ((one) ? 1.0f : 0.0f) + trm_rnd(&rng) * (sc); \
        assert_true(np < 128);                                                                \
        pool[np++] = b;                                                                       \
        if ((n1) == 1) eng__gguf_w_tensor(w, nm, ENG_T_F32, 1, (int64_t[]){n0}, b);            \
        else eng__gguf_w_tensor(w, nm, ENG_T_F32, 2, (int64_t[]){n0, n1}, b);                  \
    } while (0)
    T("token_embd.weight", TRM_E, TRM_NV, 1.0f, 0);
    T("output_norm.weight", TRM_E, 1, 0.2f, 1);
    if (s->rope_freqs) T("rope_freqs.weight", hd / 2, 1, 0.9f, 1);
    for (int l = 0; l < nl; l++) {
        char nm[64];
#define N(x) (snprintf(nm, sizeof nm, "blk.%d." x, l), nm)
        T(N("attn_norm.weight"), TRM_E, 1, 0.2f, 1);
        T(N("attn_q.weight"), TRM_E, TRM_NH * hd + (s->bad_shape && l == 1), qk, 0);
        T(N("attn_k.weight"), TRM_E, TRM_NKV * hd, qk, 0);
        T(N("attn_v.weight"), TRM_E, TRM_NKV * hd, vs, 0);
        if (!strcmp(s->arch, "qwen2")) {
            T(N("attn_q.bias"), TRM_NH * hd, 1, 0.3f, 0);
            T(N("attn_k.bias"), TRM_NKV * hd, 1, 0.3f, 0);
            T(N("attn_v.bias"), TRM_NKV * hd, 1, 0.3f, 0);
        }
        if (!strcmp(s->arch, "qwen3")) {
            T(N("attn_q_norm.weight"), hd, 1, 0.3f, 1);
            T(N("attn_k_norm.weight"), hd, 1, 0.3f, 1);
        }
        T(N("attn_output.weight"), TRM_NH * hd, TRM_E, 0.25f, 0);
        T(N("ffn_norm.weight"), TRM_E, 1, 0.2f, 1);
        T(N("ffn_gate.weight"), TRM_E, TRM_FF, 0.2f, 0);
        T(N("ffn_up.weight"), TRM_E, TRM_FF, 0.2f, 0);
        T(N("ffn_down.weight"), TRM_FF, TRM_E, 0.2f, 0);
#undef N
    }
    T("output.weight", TRM_E, TRM_NV, 0.3f, 0);
#undef T
    assert_int_equal(eng__gguf_writer_write(w, path, NULL, NULL), 0);
    eng__gguf_writer_free(w);
    for (int i = 0; i < np; i++) free(pool[i]);
}

#endif
