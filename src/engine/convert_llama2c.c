/* llama2.c checkpoint + tokenizer.bin -> GGUF (arch llama, F32).
 *
 * Input layouts (karpathy/llama2.c run.c, "legacy" version 0 export):
 *   checkpoint: 7 int32 {dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len}
 *     (vocab_size < 0: the classifier is stored separately at the end), then float32:
 *     token_embedding (vocab, dim), rms_att (L, dim), wq (L, dim, dim), wk (L, kv_dim, dim),
 *     wv (L, kv_dim, dim), wo (L, dim, dim), rms_ffn (L, dim), w1 (L, hidden, dim),
 *     w2 (L, dim, hidden), w3 (L, hidden, dim), rms_final (dim),
 *     freq_cis_real/imag (seq_len, head_size/2) each (ignored), [wcls (vocab, dim)].
 *     Matrices are (out, in) row-major, which is GGUF's ne = [in, out]: copied as is. run.c
 *     rotates adjacent pairs, i.e. RoPE "NORM" as arch llama does, so q/k need no permutation.
 *   tokenizer.bin: int32 max_token_length, then per token: float32 score, int32 len, bytes.
 * Output metadata mirrors llama.cpp's convert-llama2c-to-ggml (tokens with ' ' -> U+2581,
 * "<s>"/"</s>" control tokens, <0xNN> byte tokens), except context_length, which is taken
 * from the checkpoint's seq_len rather than hard-coded to 128.
 * The checkpoint's size must equal exactly what its header implies. */
#include "longctx/engine.h"
#include "engine/gguf.h"
#include "engine/model.h"
#include "engine/quant.h"
#include "util/util.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_CKPT (4ull << 30)
#define MAX_TOKFILE (64u << 20)


/* The checkpoint's header and its weights as views into the file (in the file's order). */
typedef struct {
    int dim, hidden, nl, nh, nkv, vocab, seq;
    int64_t hs, kvd;
    const float *emb, *rms_att, *wq, *wk, *wv, *wo, *rms_ffn, *w1, *w2, *w3, *rms_final, *wcls;
} l2c_model;

/* The legacy llama2.c tokenizer.bin, as GGUF vocabulary arrays (SPM, ' ' as U+2581). */
typedef struct {
    char **toks;
    size_t *lens;
    float *scores;
    int32_t *types;
    int n;
} l2c_vocab;

static void vocab_free(l2c_vocab *v)
{
    for (int i = 0; v->toks && i < v->n; i++) free(v->toks[i]);
    free(v->toks);
    free(v->lens);
    free(v->scores);
    free(v->types);
}

/* Validates the 7-int32 header, checks the file size it implies, and points the views. */
static int read_checkpoint(const char *ck, size_t ckn, l2c_model *m, char *err, size_t errlen)
{
    int32_t h[7];
    if (ckn < sizeof h) return eng__errf(err, errlen, LCX_ETRUNC, "convert: checkpoint shorter than its header");
    memcpy(h, ck, sizeof h);
    int dim = h[0], hidden = h[1], nl = h[2], nh = h[3], nkv = h[4], vocab = h[5], seq = h[6];
    const bool shared = vocab > 0;
    if (vocab < 0) vocab = -vocab;
    if (dim <= 0 || dim > 65536 || hidden <= 0 || hidden > (1 << 20) || nl <= 0 || nl > 1024 || nh <= 0 ||
        dim % nh || nkv <= 0 || nh % nkv || vocab <= 0 || vocab > (1 << 22) || seq <= 0 || seq > (1 << 24) ||
        (dim / nh) % 2)
        return eng__errf(err, errlen, LCX_ECORRUPT, "convert: implausible llama2.c header (dim %d hidden %d layers %d heads %d kv %d vocab %d seq %d)",
                         dim, hidden, nl, nh, nkv, vocab, seq);
    const int64_t hs = dim / nh, kvd = (int64_t)nkv * hs;
    const int64_t n_emb = (int64_t)vocab * dim, n_rms = (int64_t)nl * dim, n_wq = (int64_t)nl * dim * dim,
                  n_wk = (int64_t)nl * kvd * dim, n_w1 = (int64_t)nl * hidden * dim, n_freq = (int64_t)seq * hs;
    const int64_t total = n_emb + n_rms + n_wq + 2 * n_wk + n_wq + n_rms + 3 * n_w1 + dim + n_freq + (shared ? 0 : n_emb);
    if ((uint64_t)ckn != sizeof h + (uint64_t)total * 4)
        return eng__errf(err, errlen, ckn < sizeof h + (uint64_t)total * 4 ? LCX_ETRUNC : LCX_ECORRUPT,
                         "convert: checkpoint is %zu bytes, its header implies %llu", ckn,
                         (unsigned long long)(sizeof h + (uint64_t)total * 4));
    *m = (l2c_model){dim, hidden, nl, nh, nkv, vocab, seq, hs, kvd, .wcls = NULL};
    /* float32 data may be unaligned after a 28-byte header in the read buffer: lcx__read_file
     * returns malloc'd memory, so +28 is 4-byte aligned, which is all F32 needs. */
    const float *p = (const float *)(ck + sizeof h);
    m->emb = p; p += n_emb;
    m->rms_att = p; p += n_rms;
    m->wq = p; p += n_wq;
    m->wk = p; p += n_wk;
    m->wv = p; p += n_wk;
    m->wo = p; p += n_wq;
    m->rms_ffn = p; p += n_rms;
    m->w1 = p; p += n_w1;
    m->w2 = p; p += n_w1;
    m->w3 = p; p += n_w1;
    m->rms_final = p; p += dim;
    p += n_freq;
    if (!shared) m->wcls = p;
    return 0;
}

/* One token's text as SPM stores it (' ' -> U+2581) and its type; llama2.c writes BOS/EOS
 * as "\n<s>\n" / "\n</s>\n". *o is malloc'd. */
static int convert_token(int i, const char *s, int l, char **o_out, size_t *n_out, int32_t *type)
{
    char *o = malloc((size_t)l * 3 + 8);
    if (!o) return LCX_ENOMEM;
    size_t n = 0;
    unsigned bv;
    char tail;
    if (i == 1 && l == 5 && !memcmp(s, "\n<s>\n", 5)) { memcpy(o, "<s>", 3); n = 3; *type = 3; }
    else if (i == 2 && l == 6 && !memcmp(s, "\n</s>\n", 6)) { memcpy(o, "</s>", 4); n = 4; *type = 3; }
    else {
        for (int j = 0; j < l; j++) {
            if (s[j] == ' ') { memcpy(o + n, "\xe2\x96\x81", 3); n += 3; }
            else o[n++] = s[j];
        }
        char tmp[16];
        if (l == 6 && (memcpy(tmp, s, 6), tmp[6] = 0, sscanf(tmp, "<0x%2X%c", &bv, &tail) == 2) && tail == '>')
            *type = 6;
        else if (i == 0 && l == 5 && !memcmp(s, "<unk>", 5))
            *type = 2;
        else
            *type = 1;
    }
    *o_out = o;
    *n_out = n;
    return 0;
}

/* tokenizer.bin: int32 max length, then per token float score, int32 length, bytes. */
static int read_vocab(const char *tk, size_t tkn, int vocab, l2c_vocab *v, char *err, size_t errlen)
{
    if (tkn < 4) return eng__errf(err, errlen, LCX_ETRUNC, "convert: tokenizer file too short");
    v->toks = calloc(vocab, sizeof *v->toks);
    v->lens = calloc(vocab, sizeof *v->lens);
    v->scores = calloc(vocab, sizeof *v->scores);
    v->types = calloc(vocab, sizeof *v->types);
    if (!v->toks || !v->lens || !v->scores || !v->types) return eng__errf(err, errlen, LCX_ENOMEM, "convert: out of memory");
    v->n = vocab;
    size_t off = 4;
    for (int i = 0; i < vocab; i++) {
        int32_t l;
        if (tkn - off < 8) return eng__errf(err, errlen, LCX_ETRUNC, "convert: tokenizer ends at token %d of %d", i, vocab);
        memcpy(&v->scores[i], tk + off, 4);
        memcpy(&l, tk + off + 4, 4);
        off += 8;
        if (l < 0 || l > 4096 || (size_t)l > tkn - off)
            return eng__errf(err, errlen, LCX_ECORRUPT, "convert: token %d has bad length %d", i, l);
        if (convert_token(i, tk + off, l, &v->toks[i], &v->lens[i], &v->types[i]) < 0)
            return eng__errf(err, errlen, LCX_ENOMEM, "convert: out of memory");
        off += (size_t)l;
    }
    return 0;
}

/* The GGUF: llama metadata as llama.cpp's converter writes it, the vocabulary, the tensors. */
static int write_gguf(const l2c_model *m, const l2c_vocab *v, const char *out_path, char *err, size_t errlen)
{
    eng_gguf_writer *w = eng__gguf_writer_new(32);
    if (!w) return eng__errf(err, errlen, LCX_ENOMEM, "convert: out of memory");
    const int dim = m->dim, hidden = m->hidden, vocab = m->vocab;
    const int64_t kvd = m->kvd;
    eng__gguf_w_str(w, "general.architecture", "llama");
    eng__gguf_w_str(w, "general.name", "llama");
    eng__gguf_w_u32(w, "general.file_type", 0);
    eng__gguf_w_u32(w, "llama.context_length", (uint32_t)m->seq);
    eng__gguf_w_u32(w, "llama.embedding_length", (uint32_t)dim);
    eng__gguf_w_u32(w, "llama.feed_forward_length", (uint32_t)hidden);
    eng__gguf_w_u32(w, "llama.attention.head_count", (uint32_t)m->nh);
    eng__gguf_w_u32(w, "llama.attention.head_count_kv", (uint32_t)m->nkv);
    eng__gguf_w_u32(w, "llama.block_count", (uint32_t)m->nl);
    eng__gguf_w_u32(w, "llama.rope.dimension_count", (uint32_t)m->hs);
    eng__gguf_w_f32(w, "llama.rope.freq_base", 10000.0f);
    eng__gguf_w_f32(w, "llama.attention.layer_norm_rms_epsilon", 1e-5f);
    eng__gguf_w_u32(w, "llama.vocab_size", (uint32_t)vocab);
    eng__gguf_w_str(w, "tokenizer.ggml.model", "llama");
    eng__gguf_w_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)v->toks, v->lens, (uint64_t)vocab);
    eng__gguf_w_arr(w, "tokenizer.ggml.scores", ENG_GGUF_F32, v->scores, (uint64_t)vocab);
    eng__gguf_w_arr(w, "tokenizer.ggml.token_type", ENG_GGUF_I32, v->types, (uint64_t)vocab);
    eng__gguf_w_u32(w, "tokenizer.ggml.unknown_token_id", 0);
    eng__gguf_w_u32(w, "tokenizer.ggml.bos_token_id", 1);
    eng__gguf_w_u32(w, "tokenizer.ggml.eos_token_id", 2);
    eng__gguf_w_tensor(w, "token_embd.weight", ENG_T_F32, 2, (int64_t[]){dim, vocab}, m->emb);
    eng__gguf_w_tensor(w, "output_norm.weight", ENG_T_F32, 1, (int64_t[]){dim}, m->rms_final);
    if (m->wcls) eng__gguf_w_tensor(w, "output.weight", ENG_T_F32, 2, (int64_t[]){dim, vocab}, m->wcls);
    for (int l = 0; l < m->nl; l++) {
        char nm[64];
#define T(name, nd, ne, ptr) (snprintf(nm, sizeof nm, "blk.%d." name, l), eng__gguf_w_tensor(w, nm, ENG_T_F32, nd, ne, ptr))
        T("attn_norm.weight", 1, ((int64_t[]){dim}), m->rms_att + (size_t)l * dim);
        T("attn_q.weight", 2, ((int64_t[]){dim, dim}), m->wq + (size_t)l * dim * dim);
        T("attn_k.weight", 2, ((int64_t[]){dim, kvd}), m->wk + (size_t)l * kvd * dim);
        T("attn_v.weight", 2, ((int64_t[]){dim, kvd}), m->wv + (size_t)l * kvd * dim);
        T("attn_output.weight", 2, ((int64_t[]){dim, dim}), m->wo + (size_t)l * dim * dim);
        T("ffn_norm.weight", 1, ((int64_t[]){dim}), m->rms_ffn + (size_t)l * dim);
        T("ffn_gate.weight", 2, ((int64_t[]){dim, hidden}), m->w1 + (size_t)l * hidden * dim);
        T("ffn_down.weight", 2, ((int64_t[]){hidden, dim}), m->w2 + (size_t)l * hidden * dim);
        T("ffn_up.weight", 2, ((int64_t[]){dim, hidden}), m->w3 + (size_t)l * hidden * dim);
#undef T
    }
    int rc = eng__gguf_writer_write(w, out_path, NULL, NULL);
    if (rc) eng__errf(err, errlen, rc, "convert: writing %s failed: %s", out_path, lcx_strerror(rc));
    eng__gguf_writer_free(w);
    return rc;
}

int eng_convert_llama2c(const char *ckpt_path, const char *tok_path, const char *out_path, char *err,
                        size_t errlen)
{
    char *ck = NULL, *tk = NULL;
    size_t ckn = 0, tkn = 0;
    int rc = lcx__read_file(ckpt_path, MAX_CKPT, &ck, &ckn);
    if (rc) return eng__errf(err, errlen, rc, "convert: cannot read %s: %s", ckpt_path, lcx_strerror(rc));
    rc = lcx__read_file(tok_path, MAX_TOKFILE, &tk, &tkn);
    if (rc) {
        free(ck);
        return eng__errf(err, errlen, rc, "convert: cannot read %s: %s", tok_path, lcx_strerror(rc));
    }
    l2c_model m = {0};
    l2c_vocab v = {0};
    rc = read_checkpoint(ck, ckn, &m, err, errlen);
    if (!rc) rc = read_vocab(tk, tkn, m.vocab, &v, err, errlen);
    if (!rc) rc = write_gguf(&m, &v, out_path, err, errlen);
    vocab_free(&v);
    free(ck);
    free(tk);
    return rc;
}
