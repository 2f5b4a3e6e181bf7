/* src/neural's Hugging Face WordPiece (wordpiece.c: BERT normaliser, pre-tokenizer,
 * greedy longest-match pieces) on any text, through lcx_nn_tokenize, _pair and
 * _wordpiece: byte 0 picks the model (and the split point of a pair), the rest is the text.
 * Models: the fixture tiny-bert-hf when $LCX_FIXTURES has it, and always a synthetic one made
 * at start-up (a 16-token vocab.txt, zero weights) so the target runs without ../shared.
 * Checked: ids inside the vocabulary, [CLS] first and [SEP] last, the count within max and
 * the model's sequence length, pair token types 0 then 1. */
#define _GNU_SOURCE
#include "fuzz.h"

#include <string.h>
#include "longctx/lcx_neural.h"

static char *dir;
static lcx_nn_model *models[2];
static int n_models;

static const char config[] =
    "{\"architectures\":[\"BertModel\"],\"model_type\":\"bert\",\"vocab_size\":16,\"hidden_size\":4,"
    "\"num_hidden_layers\":1,\"num_attention_heads\":1,\"intermediate_size\":8,\"hidden_act\":\"gelu\","
    "\"max_position_embeddings\":32,\"type_vocab_size\":2,\"layer_norm_eps\":1e-12,\"pad_token_id\":0}";
static const char vocab[] =
    "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nhello\nworld\nthe\nvault\ncode\n##s\n##ing\na\nb\n,\n\xe4\xb8\xad\n";

static void put(const char *name, const void *data, size_t n)
{
    char p[4200];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "wb");
    if (!f || fwrite(data, 1, n, f) != n) abort();
    fclose(f);
}

/* model.safetensors of zeros for config (D 4, F 8, vocab 16, 32 positions, 2 types) */
static void write_model(void)
{
    static const struct { const char *name; int r, c; } t[] = {
        {"embeddings.word_embeddings.weight", 16, 4}, {"embeddings.position_embeddings.weight", 32, 4},
        {"embeddings.token_type_embeddings.weight", 2, 4}, {"embeddings.LayerNorm.weight", 4, 0},
        {"embeddings.LayerNorm.bias", 4, 0},
        {"encoder.layer.0.attention.self.query.weight", 4, 4}, {"encoder.layer.0.attention.self.query.bias", 4, 0},
        {"encoder.layer.0.attention.self.key.weight", 4, 4}, {"encoder.layer.0.attention.self.key.bias", 4, 0},
        {"encoder.layer.0.attention.self.value.weight", 4, 4}, {"encoder.layer.0.attention.self.value.bias", 4, 0},
        {"encoder.layer.0.attention.output.dense.weight", 4, 4}, {"encoder.layer.0.attention.output.dense.bias", 4, 0},
        {"encoder.layer.0.attention.output.LayerNorm.weight", 4, 0}, {"encoder.layer.0.attention.output.LayerNorm.bias", 4, 0},
        {"encoder.layer.0.intermediate.dense.weight", 8, 4}, {"encoder.layer.0.intermediate.dense.bias", 8, 0},
        {"encoder.layer.0.output.dense.weight", 4, 8}, {"encoder.layer.0.output.dense.bias", 4, 0},
        {"encoder.layer.0.output.LayerNorm.weight", 4, 0}, {"encoder.layer.0.output.LayerNorm.bias", 4, 0},
    };
    char hdr[8192];
    size_t hl = 0, off = 0;
    hl += (size_t)snprintf(hdr + hl, sizeof hdr - hl, "{");
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        size_t n = (size_t)t[i].r * (size_t)(t[i].c ? t[i].c : 1) * 4;
        if (t[i].c)
            hl += (size_t)snprintf(hdr + hl, sizeof hdr - hl, "%s\"%s\":{\"dtype\":\"F32\",\"shape\":[%d,%d],\"data_offsets\":[%zu,%zu]}",
                                   i ? "," : "", t[i].name, t[i].r, t[i].c, off, off + n);
        else
            hl += (size_t)snprintf(hdr + hl, sizeof hdr - hl, "%s\"%s\":{\"dtype\":\"F32\",\"shape\":[%d],\"data_offsets\":[%zu,%zu]}",
                                   i ? "," : "", t[i].name, t[i].r, off, off + n);
        off += n;
    }
    hl += (size_t)snprintf(hdr + hl, sizeof hdr - hl, "}");
    size_t total = 8 + hl + off;
    uint8_t *b = calloc(1, total);
    if (!b) abort();
    for (int i = 0; i < 8; i++) b[i] = (uint8_t)((uint64_t)hl >> (8 * i));
    memcpy(b + 8, hdr, hl);
    put("model.safetensors", b, total);
    free(b);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc; (void)argv;
    dir = fz_tmpdir("wp");
    if (!dir) abort();
    put("config.json", config, sizeof config - 1);
    put("vocab.txt", vocab, sizeof vocab - 1);
    write_model();
    char err[512];
    if (lcx_nn_load(dir, NULL, &models[n_models], err, sizeof err) < 0) {
        fprintf(stderr, "fuzz: synthetic model: %s\n", err);
        abort();
    }
    n_models++;
    const char *fx = fz_fixtures();
    if (fx) {
        char p[4096];
        snprintf(p, sizeof p, "%s/bert/tiny-bert-hf", fx);
        if (lcx_nn_load(p, NULL, &models[n_models], err, sizeof err) == 0) n_models++;
    }
    atexit(fz_cleanup);   /* libFuzzer exits through exit(): no temp folders left */
    return 0;
}

void fz_cleanup(void)
{
    for (int i = 0; i < n_models; i++) lcx_nn_free(models[i]);
    n_models = 0;
    fz_rmrf(dir);
    free(dir);
    dir = NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || !n_models) return 0;
    lcx_nn_model *m = models[(data[0] & 1) % n_models];
    const lcx_nn_info *inf = lcx_nn_info_of(m);
    const char *text = (const char *)data + 1;
    size_t len = size - 1;
    enum { MAX = 600 };
    int32_t ids[MAX], types[MAX];
    int n = lcx_nn_tokenize(m, text, len, ids, MAX);
    FZ_LOG("fuzz: %d ids\n", n);
    FZ_CHECK(n >= 2 || n < 0);
    if (n >= 2) {
        FZ_CHECK(n <= MAX && n <= inf->max_seq_len);
        for (int i = 0; i < n; i++) FZ_CHECK(ids[i] >= 0 && ids[i] < inf->n_vocab);
        FZ_CHECK(ids[0] == inf->cls_id && ids[n - 1] == inf->sep_id);
    }
    int w = lcx_nn_wordpiece(m, text, len, ids, MAX);
    FZ_CHECK(w >= 0 || w == LCX_ENOMEM);
    for (int i = 0; i < (w < MAX ? w : MAX); i++) FZ_CHECK(ids[i] >= 0 && ids[i] < inf->n_vocab);
    size_t cut = len ? (size_t)(data[0] >> 1) % (len + 1) : 0;
    int p = lcx_nn_tokenize_pair(m, text, cut, text + cut, len - cut, ids, types, MAX);
    if (p >= 3) {
        FZ_CHECK(p <= MAX && p <= inf->max_seq_len);
        FZ_CHECK(ids[0] == inf->cls_id && ids[p - 1] == inf->sep_id);
        for (int i = 0; i < p; i++) {
            FZ_CHECK(ids[i] >= 0 && ids[i] < inf->n_vocab);
            FZ_CHECK(types[i] == 0 || types[i] == 1);
            if (i) FZ_CHECK(types[i] >= types[i - 1]);
        }
    }
    return 0;
}
