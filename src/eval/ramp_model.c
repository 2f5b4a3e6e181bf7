/* Random-weight GGUF models WITH a working tokenizer and chat template, for the rescue ramp
 * (`longctx eval ramp-model`, tests, bench). Random weights cannot answer a question, but
 * they exercise everything the ramp measures mechanically: prefill and eviction cost, the
 * Tier-2 spans the evicted tokens decode to, and cache-level recall of the planted fact.
 *
 * Tokenizer: SentencePiece-style ("llama" model, score-driven merges) whose vocabulary is
 *   <unk> <s> </s>, the 256 byte tokens <0xNN>, <|im_start|> <|im_end|> (control), "▁",
 *   every printable ASCII character, and for every word of the ramp texts (SPEC §6 filler,
 *   fact, question, the turn-1 instruction, chat roles, the rescue header words) all its
 *   prefixes "▁w", "▁wo", ... with score = length.
 * Merging a pair whose concatenation is in the vocabulary, highest score first, walks each
 * known word left to right to its whole-word token, so the ramp texts tokenize at roughly
 * one token per word (like a real BPE vocabulary), digits one per character, and anything
 * else falls back to characters / bytes. The chat template text carries "<|im_start|>", so
 * the engine renders ChatML; <|im_end|> ends a turn (EOT). */
#include "eval/lcx_eval.h"
#include "engine/gguf.h"
#include "engine/quant.h"
#include "engine/tokenizer.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

/* Every word the ramp renders; spelled once here so the vocabulary covers them. */
static const char *const VOCAB_TEXTS[] = {
    LCX_RAMP_FILLER, LCX_RAMP_FACT, LCX_RAMP_QUESTION, LCX_RAMP_TURN1_ASK,
    ("system user assistant Recovered context from earlier in this session evicted KV cache "
     "restored via longctx tokens layer span OK The answer is"),
};

typedef struct {
    char **s;
    size_t *len;
    float *score;
    int32_t *type;
    int n, cap;
} vocab;

static int v_find(const vocab *v, const char *s, size_t n)
{
    for (int i = 0; i < v->n; i++)
        if (v->len[i] == n && !memcmp(v->s[i], s, n)) return i;
    return -1;
}

static int v_add(vocab *v, const char *s, size_t n, float score, int type)
{
    if (v_find(v, s, n) >= 0) return 0;
    if (v->n == v->cap) {
        int nc = v->cap ? v->cap * 2 : 1024;
        char **ns = realloc(v->s, nc * sizeof *ns);
        if (!ns) return LCX_ENOMEM;
        v->s = ns;
        size_t *nl = realloc(v->len, nc * sizeof *nl);
        if (!nl) return LCX_ENOMEM;
        v->len = nl;
        float *nsc = realloc(v->score, nc * sizeof *nsc);
        if (!nsc) return LCX_ENOMEM;
        v->score = nsc;
        int32_t *nt = realloc(v->type, nc * sizeof *nt);
        if (!nt) return LCX_ENOMEM;
        v->type = nt;
        v->cap = nc;
    }
    char *c = malloc(n + 1);
    if (!c) return LCX_ENOMEM;
    memcpy(c, s, n);
    c[n] = 0;
    v->s[v->n] = c;
    v->len[v->n] = n;
    v->score[v->n] = score;
    v->type[v->n] = type;
    v->n++;
    return 0;
}

static void v_free(vocab *v)
{
    for (int i = 0; i < v->n; i++) free(v->s[i]);
    free(v->s); free(v->len); free(v->score); free(v->type);
}

#define SPM_SPACE "\xE2\x96\x81"   /* U+2581, SentencePiece's escaped space */

static int build_vocab(vocab *v)
{
    int rc = 0;
    rc |= v_add(v, "<unk>", 5, 0, ENG_TOKT_UNKNOWN);
    rc |= v_add(v, "<s>", 3, 0, ENG_TOKT_CONTROL);
    rc |= v_add(v, "</s>", 4, 0, ENG_TOKT_CONTROL);
    for (int b = 0; b < 256; b++) {
        char t[8];
        snprintf(t, sizeof t, "<0x%02X>", b);
        rc |= v_add(v, t, 6, 0, ENG_TOKT_BYTE);
    }
    rc |= v_add(v, "<|im_start|>", 12, 0, ENG_TOKT_CONTROL);
    rc |= v_add(v, "<|im_end|>", 10, 0, ENG_TOKT_CONTROL);
    rc |= v_add(v, SPM_SPACE, 3, 1, ENG_TOKT_NORMAL);
    for (int ch = 0x21; ch < 0x7f; ch++) {
        char t = (char)ch;
        rc |= v_add(v, &t, 1, 1, ENG_TOKT_NORMAL);
    }
    if (rc) return LCX_ENOMEM;
    for (size_t k = 0; k < sizeof VOCAB_TEXTS / sizeof *VOCAB_TEXTS; k++) {
        const char *s = VOCAB_TEXTS[k];
        for (size_t i = 0; s[i];) {
            if (!isalpha((unsigned char)s[i])) { i++; continue; }
            size_t j = i;
            while (isalpha((unsigned char)s[j])) j++;
            char w[64];
            size_t wl = j - i < 60 ? j - i : 60;
            memcpy(w, SPM_SPACE, 3);
            memcpy(w + 3, s + i, wl);
            for (size_t p = 1; p <= wl; p++)
                if ((rc = v_add(v, w, 3 + p, (float)(1 + p), ENG_TOKT_NORMAL)) < 0) return rc;
            i = j;
        }
    }
    return 0;
}

/* ---- weights ------------------------------------------------------------------------ */
typedef struct { int64_t n_in, n_out; int type; uint64_t seed; float std, one; } tspec;

static uint64_t rng_next(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x >> 12; x ^= x << 25; x ^= x >> 27;
    *s = x;
    return x * 0x2545F4914F6CDD1Dull;
}

static int fill(void *ctx, int64_t ti, void *dst, size_t nbytes)
{
    const tspec *t = (const tspec *)ctx + ti;
    float *row = malloc((size_t)t->n_in * sizeof(float));
    if (!row) return LCX_ENOMEM;
    uint64_t s = t->seed * 0x9E3779B97F4A7C15ull + 1;
    size_t rb = eng__row_bytes((eng_type)t->type, t->n_in);
    for (int64_t r = 0; r < t->n_out; r++) {
        for (int64_t i = 0; i < t->n_in; i++) {
            uint64_t x = rng_next(&s);
            /* sum of 4 uniforms ~ normal (shape is irrelevant for random weights) */
            float u = (float)(x & 0xffff) + (float)((x >> 16) & 0xffff) + (float)((x >> 32) & 0xffff) +
                      (float)(x >> 48);
            row[i] = t->one + (u / 65536.0f - 2.0f) * 1.7320508f * t->std;
        }
        eng__quantize_row((eng_type)t->type, row, (uint8_t *)dst + r * rb, t->n_in);
    }
    free(row);
    (void)nbytes;
    return 0;
}

int lcx__ramp_model_shape(const char *name, lcx_ramp_shape *out)
{
    if (!name || !out) return LCX_EINVAL;
    if (!strcmp(name, "tiny")) {
        *out = (lcx_ramp_shape){"tiny", 2, 64, 4, 2, 16, 128, ENG_T_F32};
        return 0;
    }
    if (!strcmp(name, "qwen2.5-0.5b")) {
        /* Qwen2.5-0.5B-Instruct's transformer shape (vocabulary: the ramp's own) */
        *out = (lcx_ramp_shape){"qwen2.5-0.5b", 24, 896, 14, 2, 64, 4864, ENG_T_Q8_0};
        return 0;
    }
    return LCX_ENOTFOUND;
}

int lcx__ramp_write_model(const char *path, const lcx_ramp_shape *sh, uint64_t seed)
{
    if (!path || !sh || sh->n_layer < 1 || sh->n_embd < 1 || sh->n_head < 1 || sh->n_head_kv < 1 ||
        sh->n_head % sh->n_head_kv || sh->head_dim < 2 || sh->n_ff < 1)
        return LCX_EINVAL;
    vocab v = {0};
    int rc = build_vocab(&v);
    eng_gguf_writer *w = rc ? NULL : eng__gguf_writer_new(32);
    tspec *ts = calloc((size_t)12 * sh->n_layer + 4, sizeof *ts);
    if (rc || !w || !ts) { rc = rc ? rc : LCX_ENOMEM; goto out; }
    const int E = sh->n_embd, hd = sh->head_dim, NH = sh->n_head, NKV = sh->n_head_kv;
    eng__gguf_w_str(w, "general.architecture", "qwen2");
    char nm[96];
    snprintf(nm, sizeof nm, "ramp-%s-random", sh->name);
    eng__gguf_w_str(w, "general.name", nm);
    eng__gguf_w_u32(w, "qwen2.context_length", 1u << 20);
    eng__gguf_w_u32(w, "qwen2.embedding_length", (uint32_t)E);
    eng__gguf_w_u32(w, "qwen2.block_count", (uint32_t)sh->n_layer);
    eng__gguf_w_u32(w, "qwen2.feed_forward_length", (uint32_t)sh->n_ff);
    eng__gguf_w_u32(w, "qwen2.attention.head_count", (uint32_t)NH);
    eng__gguf_w_u32(w, "qwen2.attention.head_count_kv", (uint32_t)NKV);
    if (hd * NH != E) {
        eng__gguf_w_u32(w, "qwen2.attention.key_length", (uint32_t)hd);
        eng__gguf_w_u32(w, "qwen2.attention.value_length", (uint32_t)hd);
    }
    eng__gguf_w_f32(w, "qwen2.rope.freq_base", 1000000.0f);
    eng__gguf_w_f32(w, "qwen2.attention.layer_norm_rms_epsilon", 1e-6f);
    eng__gguf_w_str(w, "tokenizer.ggml.model", "llama");
    eng__gguf_w_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)v.s, v.len, (uint64_t)v.n);
    eng__gguf_w_arr(w, "tokenizer.ggml.scores", ENG_GGUF_F32, v.score, (uint64_t)v.n);
    eng__gguf_w_arr(w, "tokenizer.ggml.token_type", ENG_GGUF_I32, v.type, (uint64_t)v.n);
    eng__gguf_w_u32(w, "tokenizer.ggml.bos_token_id", 1);
    eng__gguf_w_u32(w, "tokenizer.ggml.eos_token_id", 2);
    eng__gguf_w_u32(w, "tokenizer.ggml.unknown_token_id", 0);
    eng__gguf_w_u32(w, "tokenizer.ggml.eot_token_id", (uint32_t)v_find(&v, "<|im_end|>", 10));
    eng__gguf_w_bool(w, "tokenizer.ggml.add_bos_token", true);
    eng__gguf_w_str(w, "tokenizer.chat_template",
                   "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
                   "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}");
    int nt = 0;
    const int NV = v.n;
    const int qt = sh->wtype;
#define ADD(name, nin, nout, ty, sd, one)                                                           \
    do {                                                                                            \
        ts[nt] = (tspec){nin, nout, ty, seed * 1000003u + (uint64_t)nt + 1, sd, one};              \
        if ((nout) == 1) eng__gguf_w_tensor(w, name, ty, 1, (int64_t[]){nin}, NULL);                \
        else eng__gguf_w_tensor(w, name, ty, 2, (int64_t[]){nin, nout}, NULL);                      \
        nt++;                                                                                       \
    } while (0)
    ADD("token_embd.weight", E, NV, qt, 0.5f, 0.0f);
    ADD("output_norm.weight", E, 1, ENG_T_F32, 0.0f, 1.0f);
    for (int il = 0; il < sh->n_layer; il++) {
        char tn[64];
#define N(s) (snprintf(tn, sizeof tn, "blk.%d." s, il), tn)
        ADD(N("attn_norm.weight"), E, 1, ENG_T_F32, 0.0f, 1.0f);
        ADD(N("attn_q.weight"), E, NH * hd, qt, 0.08f, 0.0f);
        ADD(N("attn_k.weight"), E, NKV * hd, qt, 0.08f, 0.0f);
        ADD(N("attn_v.weight"), E, NKV * hd, qt, 0.08f, 0.0f);
        ADD(N("attn_q.bias"), NH * hd, 1, ENG_T_F32, 0.1f, 0.0f);
        ADD(N("attn_k.bias"), NKV * hd, 1, ENG_T_F32, 0.1f, 0.0f);
        ADD(N("attn_v.bias"), NKV * hd, 1, ENG_T_F32, 0.1f, 0.0f);
        ADD(N("attn_output.weight"), NH * hd, E, qt, 0.05f, 0.0f);
        ADD(N("ffn_norm.weight"), E, 1, ENG_T_F32, 0.0f, 1.0f);
        ADD(N("ffn_gate.weight"), E, sh->n_ff, qt, 0.05f, 0.0f);
        ADD(N("ffn_up.weight"), E, sh->n_ff, qt, 0.05f, 0.0f);
        ADD(N("ffn_down.weight"), sh->n_ff, E, qt, 0.03f, 0.0f);
#undef N
    }
    ADD("output.weight", E, NV, qt, 0.1f, 0.0f);
#undef ADD
    rc = eng__gguf_writer_write(w, path, fill, ts);
out:
    eng__gguf_writer_free(w);
    free(ts);
    v_free(&v);
    return rc;
}
