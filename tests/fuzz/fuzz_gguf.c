/* The GGUF reader (src/engine/gguf.c) over any bytes, then what is built on it: the
 * tokenizer from its metadata (encode / decode of a fixed text), and for a file that
 * opens, the engine's model loader and the BERT loader of src/neural on the same bytes
 * (written to a temp file: both take a path). Every accessor of an opened file is walked;
 * each must stay inside the buffer (ASan) and agree with the counts. */
#define _GNU_SOURCE
#include "fuzz.h"

#include <string.h>
#include <unistd.h>
#include "engine/gguf.h"
#include "engine/tokenizer.h"
#include "longctx/engine.h"
#include "longctx/lcx_err.h"
#include "longctx/lcx_neural.h"

static char *dir;
static char path[4200];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc; (void)argv;
    dir = fz_tmpdir("gguf");
    if (!dir) abort();
    snprintf(path, sizeof path, "%s/m.gguf", dir);
    atexit(fz_cleanup);   /* libFuzzer exits through exit(): no temp folders left */
    return 0;
}

void fz_cleanup(void)
{
    fz_rmrf(dir);
    free(dir);
    dir = NULL;
}

static void walk(const eng_gguf *g)
{
    int64_t nkv = eng__gguf_n_kv(g);
    FZ_CHECK(nkv >= 0);
    for (int64_t k = 0; k < nkv; k++) {
        const char *key = eng__gguf_key_at(g, k);
        FZ_CHECK(key != NULL);
        FZ_CHECK(eng__gguf_find_key(g, key) >= 0);
        int t = eng__gguf_key_type(g, k);
        FZ_CHECK(t >= 0);
        size_t l = 0;
        const char *s = eng__gguf_get_str(g, key, &l);
        if (s && l) { volatile char c = s[l - 1]; (void)c; }
        int et = 0;
        uint64_t n = 0;
        const void *d = NULL;
        if (eng__gguf_get_arr(g, key, &et, &n, &d) == 0) {
            if (d && n) {
                size_t es = eng__gguf_type_size(et);
                if (es) { volatile char c = ((const char *)d)[n * es - 1]; (void)c; }
            } else if (n) {
                const char *e = eng__gguf_get_arr_str(g, key, n - 1, &l);
                if (e && l) { volatile char c = e[l - 1]; (void)c; }
            }
        }
        uint32_t u; uint64_t u64; int32_t i; float f; bool b;
        (void)eng__gguf_get_u32(g, key, &u); (void)eng__gguf_get_u64(g, key, &u64);
        (void)eng__gguf_get_i32(g, key, &i); (void)eng__gguf_get_f32(g, key, &f);
        (void)eng__gguf_get_bool(g, key, &b);
    }
    int64_t nt = eng__gguf_n_tensors(g);
    FZ_CHECK(nt >= 0);
    for (int64_t i = 0; i < nt; i++) {
        const eng_tensor *t = eng__gguf_tensor_at(g, i);
        FZ_CHECK(t != NULL);
        FZ_CHECK(eng__gguf_tensor(g, t->name) == t);
    }
}

static void tokenizer(const eng_gguf *g)
{
    eng_tokenizer *t = NULL;
    char err[256];
    int rc = eng__tokenizer_from_gguf(g, &t, err, sizeof err);
    FZ_LOG("fuzz: tokenizer %d %s\n", rc, rc < 0 ? err : "");
    if (rc < 0) {
        FZ_CHECK(t == NULL);
        return;
    }
    static const char text[] = "Hello world, caf\xc3\xa9 <|im_start|>user\n\xff 12345 \xe4\xb8\xad";
    int32_t ids[256];
    int n = eng__tokenize(t, text, sizeof text - 1, true, true, ids, 256);
    if (n > 0) {
        int32_t nv = eng__tokenizer_n_vocab(t);
        for (int i = 0; i < n; i++) FZ_CHECK(ids[i] >= 0 && ids[i] < nv);
        char out[1024];
        (void)eng__detokenize(t, ids, n, out, sizeof out);
        for (int i = 0; i < n; i++) (void)eng__token_to_piece(t, ids[i], out, sizeof out);
    }
    eng__tokenizer_free(t);
}

static void loaders(const uint8_t *data, size_t size)
{
    FILE *f = fopen(path, "wb");
    if (!f) return;
    size_t w = fwrite(data, 1, size, f);
    fclose(f);
    if (w != size) return;
    char err[512];
    eng_model *m = NULL;
    int rc = eng_model_load(path, &m, err, sizeof err);
    FZ_LOG("fuzz: model %d %s\n", rc, rc < 0 ? err : "");
    if (rc == 0) eng_model_free(m);
    else FZ_CHECK(m == NULL);
    lcx_nn_model *nm = NULL;
    rc = lcx_nn_load(path, NULL, &nm, err, sizeof err);
    FZ_LOG("fuzz: bert %d %s\n", rc, rc < 0 ? err : "");
    if (rc == 0) lcx_nn_free(nm);
    else FZ_CHECK(nm == NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    eng_gguf *g = NULL;
    char err[256];
    int rc = eng__gguf_open_mem(data, size, &g, err, sizeof err);
    FZ_LOG("fuzz: gguf open %d %s\n", rc, rc < 0 ? err : "");
    if (rc < 0) {
        FZ_CHECK(g == NULL);
        return 0;
    }
    walk(g);
    tokenizer(g);
    eng__gguf_close(g);
    loaders(data, size);
    return 0;
}
