/* The Hugging Face loader of src/neural (hf.c: config.json + vocab.txt + model.safetensors)
 * on any safetensors bytes, and optionally any config.json: the input is
 *   [u16 LE n][n bytes of config.json][model.safetensors]   when n fits in the input,
 *   [model.safetensors] with a built-in tiny BERT config      otherwise (n = 0xFFFF).
 * The files are written into a private folder with a fixed 16-token vocab.txt; the load
 * either fails with a negative code, no model and a message, or gives a model that embeds. */
#define _GNU_SOURCE
#include "fuzz.h"

#include <string.h>
#include "longctx/lcx_neural.h"

static char *dir;

/* tests/fuzz/gen_seeds.py writes the matching seed (hidden 4, one layer, 16 tokens) */
static const char default_config[] =
    "{\"architectures\":[\"BertModel\"],\"model_type\":\"bert\",\"vocab_size\":16,\"hidden_size\":4,"
    "\"num_hidden_layers\":1,\"num_attention_heads\":1,\"intermediate_size\":8,\"hidden_act\":\"gelu\","
    "\"max_position_embeddings\":8,\"type_vocab_size\":2,\"layer_norm_eps\":1e-12,\"pad_token_id\":0}";
static const char vocab[] =
    "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nhello\nworld\nthe\nvault\ncode\n##s\n##ing\na\nb\n,\n.\n";

static int put(const char *name, const void *data, size_t n)
{
    char p[4200];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "wb");
    if (!f) return -1;
    size_t w = fwrite(data, 1, n, f);
    return fclose(f) == 0 && w == n ? 0 : -1;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc; (void)argv;
    dir = fz_tmpdir("st");
    if (!dir || put("vocab.txt", vocab, sizeof vocab - 1) < 0) abort();
    atexit(fz_cleanup);   /* libFuzzer exits through exit(): no temp folders left */
    return 0;
}

void fz_cleanup(void)
{
    fz_rmrf(dir);
    free(dir);
    dir = NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2) return 0;
    size_t n = (size_t)data[0] | (size_t)data[1] << 8;
    const void *cfg = default_config, *st = data + 2;
    size_t cl = sizeof default_config - 1, sl = size - 2;
    if (n != 0xFFFF && n <= size - 2) {
        cfg = data + 2;
        cl = n;
        st = data + 2 + n;
        sl = size - 2 - n;
    }
    if (put("config.json", cfg, cl) < 0 || put("model.safetensors", st, sl) < 0) return 0;
    lcx_nn_model *m = NULL;
    char err[512] = "";
    int rc = lcx_nn_load(dir, NULL, &m, err, sizeof err);
    FZ_LOG("fuzz: load %d %s\n", rc, err);
    if (rc < 0) {
        FZ_CHECK(m == NULL);
        FZ_CHECK(err[0] != 0);   /* a refusal says why */
        return 0;
    }
    const lcx_nn_info *inf = lcx_nn_info_of(m);
    if (!inf->is_reranker && inf->dim <= 64) {
        float v[64];
        const char *t = "hello vaults, the code";
        FZ_CHECK(lcx_nn_embed(m, &t, NULL, 1, v) == 0);
    } else if (inf->is_reranker) {
        const char *d = "the vault code";
        float s;
        FZ_CHECK(lcx_nn_rerank(m, "hello", 5, &d, NULL, 1, &s) == 0);
    }
    lcx_nn_free(m);
    return 0;
}
