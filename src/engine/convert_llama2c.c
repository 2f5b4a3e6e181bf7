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


int eng_convert_llama2c(const char *ckpt_path, const char *tok_path, const char *out_path, char *err,
                        size_t errlen)
{
    char *ck = NULL, *tk = NULL;
    size_t ckn = 0, tkn = 0;
    int rc = lcx_read_file(ckpt_path, MAX_CKPT, &ck, &ckn);
    if (rc) return eng__errf(err, errlen, rc, "convert: cannot read %s: %s", ckpt_path, lcx_strerror(rc));
    rc = lcx_read_file(tok_path, MAX_TOKFILE, &tk, &tkn);
    if (rc) {
        free(ck);
        return eng__errf(err, errlen, rc, "convert: cannot read %s: %s", tok_path, lcx_strerror(rc));
    }
    eng_gguf_writer *w = NULL;
    char **toks = NULL;
    size_t *lens = NULL;
    float *scores = NULL;
    int32_t *types = NULL;
    int32_t h[7];
    int nalloc = 0;
    if (ckn < sizeof h) { rc = eng__errf(err, errlen, LCX_ETRUNC, "convert: checkpoint shorter than its header"); goto out; }
    memcpy(h, ck, sizeof h);
    int dim = h[0], hidden = h[1], nl = h[2], nh = h[3], nkv = h[4], vocab = h[5], seq = h[6];
    bool shared = vocab > 0;
    if (vocab < 0) vocab = -vocab;
    if (dim <= 0 || dim > 65536 || hidden <= 0 || hidden > (1 << 20) || nl <= 0 || nl > 1024 || nh <= 0 ||
        dim % nh || nkv <= 0 || nh % nkv || vocab <= 0 || vocab > (1 << 22) || seq <= 0 || seq > (1 << 24) ||
        (dim / nh) % 2) {
        rc = eng__errf(err, errlen, LCX_ECORRUPT, "convert: implausible llama2.c header (dim %d hidden %d layers %d heads %d kv %d vocab %d seq %d)",
                  dim, hidden, nl, nh, nkv, vocab, seq);
        goto out;
    }
    const int64_t hs = dim / nh, kvd = (int64_t)nkv * hs;
    const int64_t n_emb = (int64_t)vocab * dim, n_rms = (int64_t)nl * dim, n_wq = (int64_t)nl * dim * dim,
                  n_wk = (int64_t)nl * kvd * dim, n_w1 = (int64_t)nl * hidden * dim, n_freq = (int64_t)seq * hs;
    const int64_t total = n_emb + n_rms + n_wq + 2 * n_wk + n_wq + n_rms + 3 * n_w1 + dim + n_freq + (shared ? 0 : n_emb);
    if ((uint64_t)ckn != sizeof h + (uint64_t)total * 4) {
        rc = eng__errf(err, errlen, ckn < sizeof h + (uint64_t)total * 4 ? LCX_ETRUNC : LCX_ECORRUPT,
                  "convert: checkpoint is %zu bytes, its header implies %llu", ckn,
                  (unsigned long long)(sizeof h + (uint64_t)total * 4));
        goto out;
    }
    /* float32 data may be unaligned after a 28-byte header in the read buffer: lcx_read_file
     * returns malloc'd memory, so +28 is 4-byte aligned, which is all F32 needs. */
    const float *p = (const float *)(ck + sizeof h);
    const float *emb = p; p += n_emb;
    const float *rms_att = p; p += n_rms;
    const float *wq = p; p += n_wq;
    const float *wk = p; p += n_wk;
    const float *wv = p; p += n_wk;
    const float *wo = p; p += n_wq;
    const float *rms_ffn = p; p += n_rms;
    const float *w1 = p; p += n_w1;
    const float *w2 = p; p += n_w1;
    const float *w3 = p; p += n_w1;
    const float *rms_final = p; p += dim;
    p += n_freq;
    const float *wcls = shared ? NULL : p;

    /* tokenizer */
    if (tkn < 4) { rc = eng__errf(err, errlen, LCX_ETRUNC, "convert: tokenizer file too short"); goto out; }
    toks = calloc(vocab, sizeof *toks);
    lens = calloc(vocab, sizeof *lens);
    scores = calloc(vocab, sizeof *scores);
    types = calloc(vocab, sizeof *types);
    if (!toks || !lens || !scores || !types) { rc = eng__errf(err, errlen, LCX_ENOMEM, "convert: out of memory"); goto out; }
    nalloc = vocab;
    size_t off = 4;
    for (int i = 0; i < vocab; i++) {
        int32_t l;
        if (tkn - off < 8) { rc = eng__errf(err, errlen, LCX_ETRUNC, "convert: tokenizer ends at token %d of %d", i, vocab); goto out; }
        memcpy(&scores[i], tk + off, 4);
        memcpy(&l, tk + off + 4, 4);
        off += 8;
        if (l < 0 || l > 4096 || (size_t)l > tkn - off) {
            rc = eng__errf(err, errlen, LCX_ECORRUPT, "convert: token %d has bad length %d", i, l);
            goto out;
        }
        const char *s = tk + off;
        off += (size_t)l;
        /* ' ' -> U+2581 (3 bytes) */
        char *o = malloc((size_t)l * 3 + 8);
        if (!o) { rc = eng__errf(err, errlen, LCX_ENOMEM, "convert: out of memory"); goto out; }
        size_t n = 0;
        unsigned bv;
        char tail;
        if (i == 1 && l == 5 && !memcmp(s, "\n<s>\n", 5)) { memcpy(o, "<s>", 3); n = 3; types[i] = 3; }
        else if (i == 2 && l == 6 && !memcmp(s, "\n</s>\n", 6)) { memcpy(o, "</s>", 4); n = 4; types[i] = 3; }
        else {
            for (int j = 0; j < l; j++) {
                if (s[j] == ' ') { memcpy(o + n, "\xe2\x96\x81", 3); n += 3; }
                else o[n++] = s[j];
            }
            char tmp[16];
            if (l == 6 && (memcpy(tmp, s, 6), tmp[6] = 0, sscanf(tmp, "<0x%2X%c", &bv, &tail) == 2) && tail == '>')
                types[i] = 6;
            else if (i == 0 && l == 5 && !memcmp(s, "<unk>", 5))
                types[i] = 2;
            else
                types[i] = 1;
        }
        toks[i] = o;
        lens[i] = n;
    }

    w = eng_gguf_writer_new(32);
    if (!w) { rc = eng__errf(err, errlen, LCX_ENOMEM, "convert: out of memory"); goto out; }
    eng_gguf_w_str(w, "general.architecture", "llama");
    eng_gguf_w_str(w, "general.name", "llama");
    eng_gguf_w_u32(w, "general.file_type", 0);
    eng_gguf_w_u32(w, "llama.context_length", (uint32_t)seq);
    eng_gguf_w_u32(w, "llama.embedding_length", (uint32_t)dim);
    eng_gguf_w_u32(w, "llama.feed_forward_length", (uint32_t)hidden);
    eng_gguf_w_u32(w, "llama.attention.head_count", (uint32_t)nh);
    eng_gguf_w_u32(w, "llama.attention.head_count_kv", (uint32_t)nkv);
    eng_gguf_w_u32(w, "llama.block_count", (uint32_t)nl);
    eng_gguf_w_u32(w, "llama.rope.dimension_count", (uint32_t)hs);
    eng_gguf_w_f32(w, "llama.rope.freq_base", 10000.0f);
    eng_gguf_w_f32(w, "llama.attention.layer_norm_rms_epsilon", 1e-5f);
    eng_gguf_w_u32(w, "llama.vocab_size", (uint32_t)vocab);
    eng_gguf_w_str(w, "tokenizer.ggml.model", "llama");
    eng_gguf_w_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)toks, lens, (uint64_t)vocab);
    eng_gguf_w_arr(w, "tokenizer.ggml.scores", ENG_GGUF_F32, scores, (uint64_t)vocab);
    eng_gguf_w_arr(w, "tokenizer.ggml.token_type", ENG_GGUF_I32, types, (uint64_t)vocab);
    eng_gguf_w_u32(w, "tokenizer.ggml.unknown_token_id", 0);
    eng_gguf_w_u32(w, "tokenizer.ggml.bos_token_id", 1);
    eng_gguf_w_u32(w, "tokenizer.ggml.eos_token_id", 2);
    eng_gguf_w_tensor(w, "token_embd.weight", ENG_T_F32, 2, (int64_t[]){dim, vocab}, emb);
    eng_gguf_w_tensor(w, "output_norm.weight", ENG_T_F32, 1, (int64_t[]){dim}, rms_final);
    if (wcls) eng_gguf_w_tensor(w, "output.weight", ENG_T_F32, 2, (int64_t[]){dim, vocab}, wcls);
    for (int l = 0; l < nl; l++) {
        char nm[64];
#define T(name, nd, ne, ptr) (snprintf(nm, sizeof nm, "blk.%d." name, l), eng_gguf_w_tensor(w, nm, ENG_T_F32, nd, ne, ptr))
        T("attn_norm.weight", 1, ((int64_t[]){dim}), rms_att + (size_t)l * dim);
        T("attn_q.weight", 2, ((int64_t[]){dim, dim}), wq + (size_t)l * dim * dim);
        T("attn_k.weight", 2, ((int64_t[]){dim, kvd}), wk + (size_t)l * kvd * dim);
        T("attn_v.weight", 2, ((int64_t[]){dim, kvd}), wv + (size_t)l * kvd * dim);
        T("attn_output.weight", 2, ((int64_t[]){dim, dim}), wo + (size_t)l * dim * dim);
        T("ffn_norm.weight", 1, ((int64_t[]){dim}), rms_ffn + (size_t)l * dim);
        T("ffn_gate.weight", 2, ((int64_t[]){dim, hidden}), w1 + (size_t)l * hidden * dim);
        T("ffn_down.weight", 2, ((int64_t[]){hidden, dim}), w2 + (size_t)l * hidden * dim);
        T("ffn_up.weight", 2, ((int64_t[]){dim, hidden}), w3 + (size_t)l * hidden * dim);
#undef T
    }
    rc = eng_gguf_writer_write(w, out_path, NULL, NULL);
    if (rc) eng__errf(err, errlen, rc, "convert: writing %s failed: %s", out_path, lcx_strerror(rc));
out:
    if (toks)
        for (int i = 0; i < nalloc; i++) free(toks[i]);
    free(toks);
    free(lens);
    free(scores);
    free(types);
    eng_gguf_writer_free(w);
    free(ck);
    free(tk);
    return rc;
}
