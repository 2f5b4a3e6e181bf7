/* Model loading shared by both formats, and the GGUF `bert` loader (llama.cpp's layout:
 * see the tensor table in docs/neural.md).
 *
 * Validation order: the container first (eng__gguf_open checks header, counts, strings,
 * types, tensor bounds and overlaps against the file), then the hyper-parameters against
 * caps and each other, then every tensor's presence, type and shape against them, all before
 * any weight is read. A tensor GGUF stores with ne = [in, out] holds PyTorch's [out, in]
 * Linear weight bytes unchanged, so row r of a matrix is output r: exactly the row layout
 * eng__matmul takes, no transposition. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "neural/nn_internal.h"
#include "util/util.h"

void lcx__nn_err(char *err, size_t errlen, const char *fmt, ...)
{
    if (!err || !errlen) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

void *lcx__nn_own(lcx_nn_model *m, void *p)
{
    if (!p) return NULL;
    if (m->n_owned == m->cap_owned) {
        int nc = m->cap_owned ? m->cap_owned * 2 : 64;
        void **no = realloc(m->owned, (size_t)nc * sizeof *no);
        if (!no) { free(p); return NULL; }
        m->owned = no;
        m->cap_owned = nc;
    }
    m->owned[m->n_owned++] = p;
    return p;
}

static bool float_type(int t) { return t == ENG_T_F32 || t == ENG_T_F16 || t == ENG_T_BF16; }

float *lcx__nn_vec_f32(lcx_nn_model *m, int type, const void *data, int64_t n)
{
    float *v = lcx__nn_own(m, malloc((size_t)n * sizeof(float)));
    if (!v) return NULL;
    eng__dequant_row((eng_type)type, data, v, n);
    return v;
}

/* Converts a matrix to type t (owned); LCX_ENOTSUP when n_in does not fit the block size. */
static int lcx__nn_mat_convert(lcx_nn_model *m, lcx__nn_mat *w, int t, char *err, size_t errlen)
{
    if (w->type == t || !w->data) return 0;
    int64_t blk = eng__type_block_elems((eng_type)t);
    if (blk <= 0 || w->n_in % blk) {
        lcx__nn_err(err, errlen, "cannot store a %lld-wide matrix as %s (row length must be a multiple of %lld)",
                    (long long)w->n_in, eng__type_name((eng_type)t), (long long)blk);
        return LCX_ENOTSUP;
    }
    size_t rb = eng__row_bytes((eng_type)t, w->n_in);
    uint8_t *dst = lcx__nn_own(m, malloc(rb * (size_t)w->n_out));
    float *tmp = malloc((size_t)w->n_in * sizeof(float));
    if (!dst || !tmp) { free(tmp); return LCX_ENOMEM; }
    for (int64_t r = 0; r < w->n_out; r++) {
        eng__dequant_row((eng_type)w->type, (const uint8_t *)w->data + (size_t)r * w->row_bytes, tmp, w->n_in);
        eng__quantize_row((eng_type)t, tmp, dst + (size_t)r * rb, w->n_in);
    }
    free(tmp);
    w->type = t;
    w->data = dst;
    w->row_bytes = rb;
    return 0;
}

int lcx__nn_mat_pack(lcx_nn_model *m, lcx__nn_mat *w)
{
    const int f16 = w->type == ENG_T_F16;
    const int64_t np = (w->n_out + LCX_NN_PANEL - 1) / LCX_NN_PANEL, K = w->n_in;
    const size_t esz = f16 ? 2 : 4;
    uint8_t *d = lcx__nn_own(m, calloc((size_t)np * K * LCX_NN_PANEL, esz));
    float *row = malloc((size_t)K * sizeof(float));
    if (!d || !row) { free(row); return LCX_ENOMEM; }
    for (int64_t r = 0; r < w->n_out; r++) {
        const uint8_t *src = (const uint8_t *)w->data + (size_t)r * w->row_bytes;
        const int64_t p = r / LCX_NN_PANEL, j = r % LCX_NN_PANEL;
        if (!f16) eng__dequant_row((eng_type)w->type, src, row, K);
        for (int64_t k = 0; k < K; k++) {
            const size_t at = ((size_t)p * K + k) * LCX_NN_PANEL + j;
            if (f16) memcpy(d + at * 2, src + k * 2, 2);
            else memcpy(d + at * 4, &row[k], 4);
        }
    }
    free(row);
    w->pk = (lcx__nn_packed){f16, d, K, w->n_out, np};
    w->packed = true;
    return 0;
}

int lcx__nn_check_info(const lcx_nn_info *inf, const char *src, char *err, size_t errlen)
{
    const char *bad = NULL;
    if (inf->n_layer < 1 || inf->n_layer > LCX_NN_MAX_LAYERS) bad = "layer count";
    else if (inf->dim < 1 || inf->dim > LCX_NN_MAX_DIM) bad = "hidden size";
    else if (inf->n_ff < 1 || inf->n_ff > 4 * LCX_NN_MAX_DIM) bad = "intermediate size";
    else if (inf->n_head < 1 || inf->dim % inf->n_head) bad = "head count (must divide the hidden size)";
    else if (inf->n_vocab < 5 || inf->n_vocab > LCX_NN_MAX_VOCAB) bad = "vocabulary size";
    else if (inf->n_pos < 3 || inf->n_pos > LCX_NN_MAX_CTX) bad = "max positions";
    else if (inf->n_type < 1 || inf->n_type > 16) bad = "token type count";
    else if (!(inf->eps > 0 && inf->eps < 1)) bad = "layer-norm epsilon";
    if (bad) {
        lcx__nn_err(err, errlen, "%s: bad %s (layers %d, hidden %d, heads %d, ff %d, vocab %d, positions %d, types %d)",
                    src, bad, inf->n_layer, inf->dim, inf->n_head, inf->n_ff, inf->n_vocab, inf->n_pos, inf->n_type);
        return LCX_ECORRUPT;
    }
    return 0;
}

static const char *const special_names[LCX_NN_N_SPECIAL] = {"[CLS]", "[SEP]", "[UNK]", "[PAD]", "[MASK]"};

/* Final steps shared by both loaders: weight conversion, special ids, pool. */
static int lcx__nn_finish(lcx_nn_model *m, char *err, size_t errlen)
{
    lcx_nn_info *inf = &m->info;
    int rc;
    int t = -1;
    switch (m->opts.wtype) {
    case LCX_NN_WT_F32: t = ENG_T_F32; break;
    case LCX_NN_WT_F16: t = ENG_T_F16; break;
    case LCX_NN_WT_BF16: t = ENG_T_BF16; break;
    case LCX_NN_WT_Q8_0: t = ENG_T_Q8_0; break;
    default: break;
    }
    for (int l = 0; l < inf->n_layer; l++) {
        lcx__nn_layer *L = &m->layers[l];
        lcx__nn_mat *ws[6] = {&L->q, &L->k, &L->v, &L->o, &L->up, &L->down};
        for (int i = 0; i < 6; i++) {
            /* kernels without a matmul (types the reader knows but quant.c cannot compute) */
            if (!eng__type_supported(ws[i]->type) || eng__type_internal(ws[i]->type)) {
                lcx__nn_err(err, errlen, "layer %d: weight type %d is not supported", l, ws[i]->type);
                return LCX_ENOTSUP;
            }
            if (t >= 0 && (rc = lcx__nn_mat_convert(m, ws[i], t, err, errlen)) < 0) return rc;
            if (!m->opts.engine_kernels && float_type(ws[i]->type) && (rc = lcx__nn_mat_pack(m, ws[i])) < 0) return rc;
        }
    }
    switch (m->layers[0].q.type) {
    case ENG_T_F32: inf->wtype = LCX_NN_WT_F32; break;
    case ENG_T_F16: inf->wtype = LCX_NN_WT_F16; break;
    case ENG_T_BF16: inf->wtype = LCX_NN_WT_BF16; break;
    case ENG_T_Q8_0: inf->wtype = LCX_NN_WT_Q8_0; break;
    default: inf->wtype = LCX_NN_WT_KEEP; break;
    }
    /* special strings matched in input text: HF splits every special token out of the text
     * before WordPiece (its added-tokens trie), llama.cpp does with parse_special */
    for (int i = 0; i < LCX_NN_N_SPECIAL; i++) {
        int32_t id = -1;
        switch (i) {
        case 0: id = inf->cls_id; break;
        case 1: id = inf->sep_id; break;
        case 2: id = inf->unk_id; break;
        case 3: id = inf->pad_id; break;
        default: id = lcx__nn_vocab_get(&m->vocab, special_names[i], strlen(special_names[i])); break;
        }
        m->special[i] = id;
        if (id >= 0 && id < m->vocab.n) {
            size_t n = m->vocab.len[id];
            char *s = lcx__nn_own(m, malloc(n + 1));
            if (!s) return LCX_ENOMEM;
            memcpy(s, m->vocab.blob + m->vocab.off[id], n);
            s[n] = 0;
            m->special_txt[i] = s;
        }
    }
    if (inf->cls_id < 0 || inf->sep_id < 0 || inf->unk_id < 0 || inf->cls_id >= inf->n_vocab ||
        inf->sep_id >= inf->n_vocab || inf->unk_id >= inf->n_vocab || inf->pad_id >= inf->n_vocab) {
        lcx__nn_err(err, errlen, "special tokens: [CLS] %d, [SEP] %d, [UNK] %d, [PAD] %d must all be vocabulary ids (< %d)",
                    inf->cls_id, inf->sep_id, inf->unk_id, inf->pad_id, inf->n_vocab);
        return LCX_ECORRUPT;
    }
    if (m->vocab.n != inf->n_vocab) {
        lcx__nn_err(err, errlen, "vocabulary has %d entries but the embedding table %d rows", m->vocab.n, inf->n_vocab);
        return LCX_ECORRUPT;
    }
    int msl = inf->max_seq_len > 0 ? inf->max_seq_len : inf->n_pos;
    if (msl > inf->n_pos) msl = inf->n_pos;
    if (m->opts.max_seq_len > 0 && m->opts.max_seq_len < msl) msl = m->opts.max_seq_len;
    if (msl < 3) msl = 3;
    inf->max_seq_len = msl;
    if (m->opts.gelu >= 0) inf->gelu = (lcx_nn_gelu)m->opts.gelu;
    return eng__pool_init(m->opts.n_threads > 0 ? m->opts.n_threads : 1, &m->pool);
}

/* ------------------------------------------------------------------------------ GGUF */

static int want_tensor(const eng_gguf *g, const char *name, int64_t ne0, int64_t ne1, bool mat_ok_any,
                       const eng_tensor **out, char *err, size_t errlen)
{
    const eng_tensor *t = eng__gguf_tensor(g, name);
    if (!t) {
        lcx__nn_err(err, errlen, "gguf: tensor %s is missing", name);
        return LCX_ENOTFOUND;
    }
    bool ok = t->ne[0] == ne0 && (ne1 ? t->n_dims <= 2 && t->ne[1] == ne1 : t->n_dims == 1);
    if (ne1 && t->n_dims == 1) ok = false;
    if (!ok) {
        lcx__nn_err(err, errlen, "gguf: tensor %s has shape [%lld, %lld], expected [%lld, %lld]", name,
                    (long long)t->ne[0], (long long)t->ne[1], (long long)ne0, (long long)(ne1 ? ne1 : 1));
        return LCX_ECORRUPT;
    }
    if (!(mat_ok_any ? eng__type_supported(t->type) && !eng__type_internal(t->type) : float_type(t->type))) {
        lcx__nn_err(err, errlen, "gguf: tensor %s has type %d (%s), which is not supported here", name, t->type,
                    eng__type_supported(t->type) ? eng__type_name((eng_type)t->type) : "unknown");
        return LCX_ENOTSUP;
    }
    *out = t;
    return 0;
}

static int g_mat(lcx_nn_model *m, const char *name, int64_t n_in, int64_t n_out, lcx__nn_mat *w, char *err, size_t errlen)
{
    const eng_tensor *t;
    int rc = want_tensor(m->gguf, name, n_in, n_out, true, &t, err, errlen);
    if (rc < 0) return rc;
    w->type = t->type;
    w->data = t->data;
    w->n_in = n_in;
    w->n_out = n_out;
    w->row_bytes = eng__row_bytes((eng_type)t->type, n_in);
    return 0;
}

static int g_vec(lcx_nn_model *m, const char *name, int64_t n, float **out, char *err, size_t errlen)
{
    const eng_tensor *t;
    int rc = want_tensor(m->gguf, name, n, 0, false, &t, err, errlen);
    if (rc < 0) return rc;
    if (!(*out = lcx__nn_vec_f32(m, t->type, t->data, n))) return LCX_ENOMEM;
    return 0;
}

static int g_u32(const eng_gguf *g, const char *key, bool required, uint32_t dflt, int *out, char *err, size_t errlen)
{
    uint32_t v;
    int rc = eng__gguf_get_u32(g, key, &v);
    if (rc == LCX_ENOTFOUND && !required) v = dflt;
    else if (rc < 0) {
        lcx__nn_err(err, errlen, "gguf: %s %s", key, rc == LCX_ENOTFOUND ? "is missing" : "is not an unsigned integer");
        return rc == LCX_ENOTFOUND ? LCX_ENOTFOUND : LCX_ECORRUPT;
    }
    if (v > (1u << 30)) {
        lcx__nn_err(err, errlen, "gguf: %s = %u is out of range", key, v);
        return LCX_ECORRUPT;
    }
    *out = (int)v;
    return 0;
}

/* special id: first key present, else the vocabulary entry, else -1 */
static int32_t g_special(const eng_gguf *g, const char *k1, const char *k2, const lcx__nn_vocab *v, const char *txt)
{
    const char *ks[2] = {k1, k2};
    for (int i = 0; i < 2; i++) {
        uint32_t id;
        if (ks[i] && eng__gguf_get_u32(g, ks[i], &id) == 0 && id < (uint32_t)v->n) return (int32_t)id;
    }
    return lcx__nn_vocab_get(v, txt, strlen(txt));
}

/* The GGUF `bert` loader (the Hugging Face one is hf.c). */
static int lcx__nn_load_gguf(lcx_nn_model *m, const char *path, char *err, size_t errlen)
{
    char gerr[256];
    int rc = eng__gguf_open(path, &m->gguf, gerr, sizeof gerr);
    if (rc < 0) {
        lcx__nn_err(err, errlen, "%s: %s", path, gerr);
        return rc;
    }
    eng_gguf *g = m->gguf;
    lcx_nn_info *inf = &m->info;
    snprintf(inf->format, sizeof inf->format, "gguf");
    size_t al;
    const char *arch = eng__gguf_get_str(g, "general.architecture", &al);
    if (!arch || al != 4 || memcmp(arch, "bert", 4)) {
        lcx__nn_err(err, errlen, "%s: general.architecture is '%.*s', only 'bert' is supported", path,
                    arch ? (int)LCX_MIN(al, 64) : 0, arch ? arch : "");
        return LCX_ENOTSUP;
    }
    size_t nl;
    const char *nm = eng__gguf_get_str(g, "general.name", &nl);
    if (nm) snprintf(inf->name, sizeof inf->name, "%.*s", (int)LCX_MIN(nl, sizeof inf->name - 1), nm);
    else {
        const char *b = strrchr(path, '/');
        snprintf(inf->name, sizeof inf->name, "%s", b ? b + 1 : path);
    }
    int pool = 0;
    if ((rc = g_u32(g, "bert.block_count", true, 0, &inf->n_layer, err, errlen)) < 0 ||
        (rc = g_u32(g, "bert.embedding_length", true, 0, &inf->dim, err, errlen)) < 0 ||
        (rc = g_u32(g, "bert.feed_forward_length", true, 0, &inf->n_ff, err, errlen)) < 0 ||
        (rc = g_u32(g, "bert.attention.head_count", true, 0, &inf->n_head, err, errlen)) < 0 ||
        (rc = g_u32(g, "bert.context_length", true, 0, &inf->n_pos, err, errlen)) < 0 ||
        (rc = g_u32(g, "tokenizer.ggml.token_type_count", false, 2, &inf->n_type, err, errlen)) < 0 ||
        (rc = g_u32(g, "bert.pooling_type", false, LCX_NN_POOL_MEAN, &pool, err, errlen)) < 0)
        return rc;
    uint32_t hkv;
    if (eng__gguf_get_u32(g, "bert.attention.head_count_kv", &hkv) == 0 && (int)hkv != inf->n_head) {
        lcx__nn_err(err, errlen, "%s: head_count_kv %u differs from head_count %d (not a BERT encoder)", path, hkv, inf->n_head);
        return LCX_ENOTSUP;
    }
    bool causal = false;
    if (eng__gguf_get_bool(g, "bert.attention.causal", &causal) == 0 && causal) {
        lcx__nn_err(err, errlen, "%s: bert.attention.causal is true; BERT encoders attend both ways", path);
        return LCX_ENOTSUP;
    }
    if (eng__gguf_get_f32(g, "bert.attention.layer_norm_epsilon", &inf->eps) < 0) inf->eps = 1e-12f;
    if (pool != LCX_NN_POOL_MEAN && pool != LCX_NN_POOL_CLS && pool != LCX_NN_POOL_RANK) {
        lcx__nn_err(err, errlen, "%s: bert.pooling_type %d is not supported (1 mean, 2 cls, 4 rank)", path, pool);
        return LCX_ENOTSUP;
    }
    inf->pool = (lcx_nn_pool)pool;
    inf->is_reranker = pool == LCX_NN_POOL_RANK;
    inf->normalize = !inf->is_reranker;     /* llama.cpp's embd_normalize default (L2) */
    inf->gelu = LCX_NN_GELU_ERF;            /* GGUF names no activation; BERT's "gelu" is erf */
    inf->lowercase = inf->strip_accents = inf->cjk_split = true;   /* llama.cpp's bert vocab: uncased */
    inf->max_seq_len = inf->n_pos;

    /* vocabulary: llama.cpp spells word-initial pieces "\u2581word" and continuations bare */
    int etype;
    uint64_t ntok;
    const void *dummy;
    if (eng__gguf_get_arr(g, "tokenizer.ggml.tokens", &etype, &ntok, &dummy) < 0 || etype != ENG_GGUF_STRING) {
        lcx__nn_err(err, errlen, "%s: tokenizer.ggml.tokens is missing or not a string array", path);
        return LCX_ECORRUPT;
    }
    if (ntok < 5 || ntok > LCX_NN_MAX_VOCAB) {
        lcx__nn_err(err, errlen, "%s: tokenizer.ggml.tokens has %llu entries", path, (unsigned long long)ntok);
        return LCX_ECORRUPT;
    }
    const uint8_t *ttype = NULL;
    uint64_t ntt = 0;
    int tte;
    const void *ttd;
    if (eng__gguf_get_arr(g, "tokenizer.ggml.token_type", &tte, &ntt, &ttd) == 0 && tte == ENG_GGUF_I32 && ntt == ntok)
        ttype = ttd;
    const char **toks = malloc(ntok * sizeof *toks);
    size_t *lens = malloc(ntok * sizeof *lens);
    char *hblob = NULL;
    size_t total = 0;
    rc = LCX_ENOMEM;
    if (!toks || !lens) goto vout;
    for (uint64_t i = 0; i < ntok; i++) {
        size_t l;
        if (!eng__gguf_get_arr_str(g, "tokenizer.ggml.tokens", i, &l)) { rc = LCX_ECORRUPT; goto vout; }
        total += l + 2;
    }
    if (!(hblob = malloc(total + 1))) goto vout;
    size_t at = 0;
    for (uint64_t i = 0; i < ntok; i++) {
        size_t l;
        const char *s = eng__gguf_get_arr_str(g, "tokenizer.ggml.tokens", i, &l);
        int32_t tt = 1;
        if (ttype) memcpy(&tt, ttype + i * 4, 4);
        toks[i] = hblob + at;
        if (l >= 3 && !memcmp(s, "\xE2\x96\x81", 3)) {          /* word-initial */
            memcpy(hblob + at, s + 3, l - 3);
            lens[i] = l - 3;
        } else if (tt == 3 || tt == 2 || tt == 4 || (l >= 2 && s[0] == '[' && s[l - 1] == ']')) {
            memcpy(hblob + at, s, l);                             /* special: as is */
            lens[i] = l;
        } else {                                                  /* continuation */
            memcpy(hblob + at, "##", 2);
            memcpy(hblob + at + 2, s, l);
            lens[i] = l + 2;
        }
        at += lens[i];
    }
    rc = lcx__nn_vocab_build(&m->vocab, (int32_t)ntok, toks, lens);
vout:
    free(toks);
    free(lens);
    free(hblob);
    if (rc < 0) {
        if (rc == LCX_ECORRUPT) lcx__nn_err(err, errlen, "%s: bad tokenizer.ggml.tokens entry", path);
        return rc;
    }
    inf->n_vocab = m->vocab.n;
    inf->cls_id = g_special(g, "tokenizer.ggml.cls_token_id", "tokenizer.ggml.bos_token_id", &m->vocab, "[CLS]");
    inf->sep_id = g_special(g, "tokenizer.ggml.seperator_token_id", "tokenizer.ggml.separator_token_id", &m->vocab, "[SEP]");
    inf->unk_id = g_special(g, "tokenizer.ggml.unknown_token_id", NULL, &m->vocab, "[UNK]");
    inf->pad_id = g_special(g, "tokenizer.ggml.padding_token_id", NULL, &m->vocab, "[PAD]");
    if (inf->pad_id < 0) inf->pad_id = 0;
    if ((rc = lcx__nn_check_info(inf, path, err, errlen)) < 0) return rc;

    /* tensors: every one checked before any is used */
    int64_t D = inf->dim, F = inf->n_ff;
    if ((rc = g_mat(m, "token_embd.weight", D, inf->n_vocab, &m->tok_emb, err, errlen)) < 0 ||
        (rc = g_mat(m, "position_embd.weight", D, inf->n_pos, &m->pos_emb, err, errlen)) < 0 ||
        (rc = g_mat(m, "token_types.weight", D, inf->n_type, &m->type_emb, err, errlen)) < 0 ||
        (rc = g_vec(m, "token_embd_norm.weight", D, &m->emb_ln_w, err, errlen)) < 0 ||
        (rc = g_vec(m, "token_embd_norm.bias", D, &m->emb_ln_b, err, errlen)) < 0)
        return rc;
    m->layers = lcx__nn_own(m, calloc((size_t)inf->n_layer, sizeof *m->layers));
    if (!m->layers) return LCX_ENOMEM;
    for (int l = 0; l < inf->n_layer; l++) {
        lcx__nn_layer *L = &m->layers[l];
        char n[96];
#define GM(suf, in, out, dst) (snprintf(n, sizeof n, "blk.%d." suf, l), g_mat(m, n, in, out, dst, err, errlen))
#define GV(suf, len, dst) (snprintf(n, sizeof n, "blk.%d." suf, l), g_vec(m, n, len, dst, err, errlen))
        if ((rc = GM("attn_q.weight", D, D, &L->q)) < 0 || (rc = GV("attn_q.bias", D, &L->bq)) < 0 ||
            (rc = GM("attn_k.weight", D, D, &L->k)) < 0 || (rc = GV("attn_k.bias", D, &L->bk)) < 0 ||
            (rc = GM("attn_v.weight", D, D, &L->v)) < 0 || (rc = GV("attn_v.bias", D, &L->bv)) < 0 ||
            (rc = GM("attn_output.weight", D, D, &L->o)) < 0 || (rc = GV("attn_output.bias", D, &L->bo)) < 0 ||
            (rc = GV("attn_output_norm.weight", D, &L->ln1_w)) < 0 ||
            (rc = GV("attn_output_norm.bias", D, &L->ln1_b)) < 0 ||
            (rc = GM("ffn_up.weight", D, F, &L->up)) < 0 || (rc = GV("ffn_up.bias", F, &L->bup)) < 0 ||
            (rc = GM("ffn_down.weight", F, D, &L->down)) < 0 || (rc = GV("ffn_down.bias", D, &L->bdown)) < 0 ||
            (rc = GV("layer_output_norm.weight", D, &L->ln2_w)) < 0 ||
            (rc = GV("layer_output_norm.bias", D, &L->ln2_b)) < 0)
            return rc;
#undef GM
#undef GV
    }
    if (inf->is_reranker) {
        const eng_tensor *co = eng__gguf_tensor(g, "cls.output.weight");
        int64_t nlab = co && co->n_dims <= 2 ? co->ne[1] : 1;
        if (nlab < 1 || nlab > 64) nlab = 1;
        if ((rc = g_mat(m, "cls.weight", D, D, &m->pool_w, err, errlen)) < 0 ||
            (rc = g_vec(m, "cls.bias", D, &m->pool_b, err, errlen)) < 0 ||
            (rc = g_mat(m, "cls.output.weight", D, nlab, &m->cls_w, err, errlen)) < 0 ||
            (rc = g_vec(m, "cls.output.bias", nlab, &m->cls_b, err, errlen)) < 0)
            return rc;
        inf->n_labels = (int)nlab;
    }
    m->files[m->n_files++] = lcx__nn_own(m, strdup(path));
    return 0;
}

/* ------------------------------------------------------------------------------ API */

void lcx_nn_opts_init(lcx_nn_opts *o)
{
    memset(o, 0, sizeof *o);
    o->n_threads = 1;
    o->wtype = LCX_NN_WT_KEEP;
    o->gelu = -1;
}

void lcx_nn_free(lcx_nn_model *m)
{
    if (!m) return;
    eng__pool_free(m->pool);
    free(m->ws);
    m->pool = NULL;
    m->ws = NULL;
    lcx_nn_model *b = m->base ? m->base : m;
    if (m != b) free(m);
    if (atomic_fetch_sub(&b->refs, 1) > 1) return;   /* another handle still uses the weights */
    for (int i = 0; i < b->n_owned; i++) free(b->owned[i]);
    free(b->owned);
    lcx__nn_vocab_free(&b->vocab);
    eng__gguf_close(b->gguf);
    if (b->map) lcx__nn_unmap(b->map, b->map_len);
    free(b);
}

int lcx_nn_share(lcx_nn_model *m, lcx_nn_model **out)
{
    if (!m || !out) return LCX_EINVAL;
    *out = NULL;
    char h[65];
    int rc = lcx_nn_model_hash(m, h);   /* computed now: no handle writes the shared copy later */
    if (rc < 0) return rc;
    lcx_nn_model *b = m->base ? m->base : m;
    lcx_nn_model *c = malloc(sizeof *c);
    if (!c) return LCX_ENOMEM;
    memcpy(c, b, sizeof *c);
    memcpy(c->hash, h, sizeof c->hash);
    c->base = b;
    c->ws = NULL;
    c->ws_bytes = 0;
    c->prof_mm_ns = c->prof_att_ns = c->prof_total_ns = 0;
    if ((rc = eng__pool_init(b->opts.n_threads > 0 ? b->opts.n_threads : 1, &c->pool)) < 0) {
        free(c);
        return rc;
    }
    atomic_fetch_add(&b->refs, 1);
    *out = c;
    return 0;
}

int lcx_nn_load(const char *path, const lcx_nn_opts *o, lcx_nn_model **out, char *err, size_t errlen)
{
    if (!path || !out) return LCX_EINVAL;
    *out = NULL;
    if (err && errlen) err[0] = 0;
    lcx_nn_model *m = calloc(1, sizeof *m);
    if (!m) return LCX_ENOMEM;
    atomic_init(&m->refs, 1);
    if (o) m->opts = *o;
    else lcx_nn_opts_init(&m->opts);
    if (m->opts.n_threads < 1) m->opts.n_threads = 1;
    if (m->opts.n_threads > 256) m->opts.n_threads = 256;
    struct stat st;
    int rc;
    if (stat(path, &st) < 0) {
        lcx__nn_err(err, errlen, "%s: no such file or folder", path);
        rc = LCX_ENOTFOUND;
    } else if (S_ISDIR(st.st_mode)) {
        rc = lcx__nn_load_hf(m, path, err, errlen);
    } else {
        rc = lcx__nn_load_gguf(m, path, err, errlen);
    }
    if (rc == 0) rc = lcx__nn_finish(m, err, errlen);
    if (rc < 0) {
        if (err && errlen && !err[0]) lcx__nn_err(err, errlen, "%s: %s", path, lcx_strerror(rc));
        lcx_nn_free(m);
        return rc;
    }
    *out = m;
    return 0;
}

const lcx_nn_info *lcx_nn_info_of(const lcx_nn_model *m) { return m ? &m->info : NULL; }

int lcx_nn_model_hash(lcx_nn_model *m, char out[65])
{
    if (!m) return LCX_EINVAL;
    if (!m->hash[0]) {
        /* sha256 over (name length, name, file sha256) of every file: cheap to extend and
         * independent of where the folder lives (only the base names enter) */
        lcx_buf b = {0};
        int rc = 0;
        for (int i = 0; i < m->n_files && rc == 0; i++) {
            char *data = NULL;
            size_t len = 0;
            if ((rc = lcx__read_file(m->files[i], 0, &data, &len)) < 0) break;
            char h[65];
            lcx__sha256_hex(data, len, h, 32);
            free(data);
            const char *base = strrchr(m->files[i], '/');
            rc = lcx__buf_printf(&b, "%s %s\n", base ? base + 1 : m->files[i], h);
        }
        if (rc == 0) lcx__sha256_hex(b.data ? b.data : "", b.len, m->hash, 32);
        lcx__buf_free(&b);
        if (rc < 0) return rc;
    }
    memcpy(out, m->hash, 65);
    return 0;
}
