/* Hostile and truncated model files: every one must be refused with a negative code and a
 * message, never read out of bounds (this test also runs under ASan + UBSan). Files are
 * derived from the fixtures in a private temp folder: truncated at every byte of the headers
 * (and every 997th byte of the data), and with single fields rewritten. */
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"
#include "longctx/lcx_neural.h"
#include "engine/gguf.h"
#include "util/util.h"

__attribute__((noinline)) static char *slurp(const char *path, size_t *n)
{
    char *s = NULL;
    assert_int_equal(lcx__read_file(path, 0, &s, n), 0);
    return s;
}

static int try_load(const char *path, char *err, size_t errlen)
{
    lcx_nn_model *m = NULL;
    err[0] = 0;
    int rc = lcx_nn_load(path, NULL, &m, err, errlen);
    if (rc == 0) {
        /* a loaded model must also compute */
        float v[64];
        const char *t = "hello";
        lcx_nn_info inf = *lcx_nn_info_of(m);
        if (!inf.is_reranker && inf.dim <= 64) assert_int_equal(lcx_nn_embed(m, &t, NULL, 1, v), 0);
        lcx_nn_free(m);
    } else {
        assert_null(m);
        if (!err[0]) fail_msg("rc %d without a message", rc);
    }
    return rc;
}

/* every length in [0, hdr_end] and every 997th up to the full size must be refused */
static void truncations(const char *path, size_t hdr_end, size_t size)
{
    char err[512];
    int fd = open(path, O_RDWR);
    assert_true(fd >= 0);
    int n = 0;
    for (size_t len = size - 1;; len = len > hdr_end ? (len >= hdr_end + 997 ? len - 997 : hdr_end) : len - 1) {
        assert_int_equal(ftruncate(fd, (off_t)len), 0);
        int rc = try_load(path, err, sizeof err);
        if (rc >= 0) fail_msg("%s truncated to %zu bytes of %zu loaded", path, len, size);
        n++;
        if (len == 0) break;
    }
    close(fd);
    print_message("%s: %d truncations refused (header end %zu, size %zu)\n", strrchr(path, '/') + 1, n, hdr_end, size);
}

static void test_gguf_truncated(void **st)
{
    (void)st;
    size_t n;
    char *buf = slurp(tu_fixture("bert/tiny-bert-rerank-f32.gguf"), &n);
    eng_gguf *g;
    assert_int_equal(eng__gguf_open_mem(buf, n, &g, NULL, 0), 0);
    size_t data0 = n, data_end = 0;
    for (int64_t i = 0; i < eng__gguf_n_tensors(g); i++) {
        const eng_tensor *t = eng__gguf_tensor_at(g, i);
        size_t o = (size_t)((const char *)t->data - buf);
        if (o < data0) data0 = o;
        if (o + t->nbytes > data_end) data_end = o + t->nbytes;
    }
    eng__gguf_close(g);
    char *dir = tu_tmpdir();
    char *p = lcx__path_join(dir, "m.gguf");
    assert_int_equal(tu_write(p, buf, n), 0);
    char err[512];
    assert_int_equal(try_load(p, err, sizeof err), 0);     /* the intact copy loads */
    truncations(p, data0, data_end);   /* bytes past the last tensor are alignment padding */
    free(p);
    free(buf);
    tu_rmrf(dir);
    free(dir);
}

/* rewrite the u32 value of a u32 KV in place */
static void set_u32_kv(char *buf, size_t n, const char *key, uint32_t v)
{
    size_t kl = strlen(key);
    char *at = memmem(buf, n, key, kl);
    assert_non_null(at);
    uint32_t type;
    memcpy(&type, at + kl, 4);
    assert_int_equal(type, 4);   /* ENG_GGUF_U32 */
    memcpy(at + kl + 4, &v, 4);
}

static void test_gguf_fields(void **st)
{
    (void)st;
    size_t n;
    const char *src = tu_fixture("bert/tiny-bert-f32.gguf");
    char *orig = slurp(src, &n);
    char *dir = tu_tmpdir();
    char *p = lcx__path_join(dir, "m.gguf");
    struct { const char *key; uint32_t v; const char *want; } cases[] = {
        {"bert.attention.head_count", 5, "head count"},
        {"bert.attention.head_count", 0, "head count"},
        {"bert.block_count", 0, "layer count"},
        {"bert.block_count", 3, "blk.2"},                        /* a layer the file lacks */
        {"bert.embedding_length", 128, "shape"},
        {"bert.feed_forward_length", 64, "shape"},
        {"bert.context_length", 1u << 31, "out of range"},
        {"bert.pooling_type", 3, "pooling_type"},
        {"tokenizer.ggml.token_type_count", 3, "shape"},
    };
    char err[512];
    for (size_t i = 0; i < LCX_ARRAY_LEN(cases); i++) {
        char *b = malloc(n);
        memcpy(b, orig, n);
        set_u32_kv(b, n, cases[i].key, cases[i].v);
        assert_int_equal(tu_write(p, b, n), 0);
        free(b);
        int rc = try_load(p, err, sizeof err);
        if (rc >= 0 || !strstr(err, cases[i].want))
            fail_msg("%s = %u: rc %d, message '%s' (expected it to mention '%s')", cases[i].key, cases[i].v, rc, err,
                     cases[i].want);
    }
    /* a wrong architecture */
    char *b = malloc(n);
    memcpy(b, orig, n);
    char *a = memmem(b, n, "general.architecture", 20);   /* key, u32 type 8, u64 length 4, "bert" */
    assert_non_null(a);
    {
        memcpy(a + 20 + 4 + 8, "bork", 4);
        assert_int_equal(tu_write(p, b, n), 0);
        assert_int_equal(try_load(p, err, sizeof err), LCX_ENOTSUP);
    }
    free(b);
    free(orig);
    free(p);
    tu_rmrf(dir);
    free(dir);
}

/* a copy of the HF folder in a temp dir; returns the dir */
static char *hf_copy(const char *rel)
{
    const char *src = tu_fixture(rel);   /* first: a missing fixture skips (longjmp) */
    char *dir = tu_tmpdir();
    const char *files[] = {"config.json", "vocab.txt", "model.safetensors", "tokenizer_config.json"};
    for (size_t i = 0; i < LCX_ARRAY_LEN(files); i++) {
        char a[600], b[600];
        snprintf(a, sizeof a, "%s/%s", src, files[i]);
        snprintf(b, sizeof b, "%s/%s", dir, files[i]);
        size_t n;
        char *s = slurp(a, &n);
        assert_int_equal(tu_write(b, s, n), 0);
        free(s);
    }
    return dir;
}

static void test_safetensors_truncated(void **st)
{
    (void)st;
    char *dir = hf_copy("bert/tiny-bert-hf");
    char *p = lcx__path_join(dir, "model.safetensors");
    size_t n;
    char *s = slurp(p, &n);
    uint64_t hl;
    memcpy(&hl, s, 8);
    free(s);
    char err[512];
    assert_int_equal(try_load(dir, err, sizeof err), 0);
    /* truncations(path) loads the folder: pass the folder through a symlink-free wrapper */
    int fd = open(p, O_RDWR);
    int k = 0;
    for (size_t len = n - 1;; len = len > 8 + hl ? (len >= 8 + hl + 997 ? len - 997 : 8 + hl) : len - 1) {
        assert_int_equal(ftruncate(fd, (off_t)len), 0);
        int rc = try_load(dir, err, sizeof err);
        if (rc >= 0) fail_msg("model.safetensors truncated to %zu of %zu loaded", len, n);
        k++;
        if (len == 0) break;
    }
    close(fd);
    print_message("model.safetensors: %d truncations refused (header end %llu)\n", k, (unsigned long long)(8 + hl));
    free(p);
    tu_rmrf(dir);
    free(dir);
}

/* rewrites model.safetensors with the header changed by edit() */
static void st_rewrite(const char *dir, const char *orig, size_t n, void (*edit)(cJSON *h, int arg), int arg,
                       uint64_t force_len)
{
    uint64_t hl;
    memcpy(&hl, orig, 8);
    char *js = strndup(orig + 8, hl);
    cJSON *h = cJSON_Parse(js);
    free(js);
    assert_non_null(h);
    if (edit) edit(h, arg);
    char *out = cJSON_PrintUnformatted(h);
    cJSON_Delete(h);
    size_t ol = strlen(out);
    uint64_t nl = force_len ? force_len : ol;
    lcx_buf b = {0};
    lcx__buf_append(&b, &nl, 8);
    lcx__buf_append(&b, out, ol);
    lcx__buf_append(&b, orig + 8 + hl, n - 8 - hl);
    free(out);
    char *p = lcx__path_join(dir, "model.safetensors");
    assert_int_equal(tu_write(p, b.data, b.len), 0);
    free(p);
    lcx__buf_free(&b);
}

static cJSON *entry(cJSON *h, const char *name) { return cJSON_GetObjectItem(h, name); }

static void e_dtype(cJSON *h, int a)
{
    cJSON_ReplaceItemInObject(entry(h, "encoder.layer.0.attention.self.query.weight"), "dtype",
                              cJSON_CreateString(a == 0 ? "F16" : a == 1 ? "Q9" : "I64"));
}
static void e_shape(cJSON *h, int a)
{
    cJSON *sh = cJSON_GetObjectItem(entry(h, "encoder.layer.1.intermediate.dense.weight"), "shape");
    cJSON_ReplaceItemInArray(sh, 0, cJSON_CreateNumber(a == 0 ? 64 : a == 1 ? -128 : 1e30));
}
static void e_offsets(cJSON *h, int a)
{
    cJSON *of = cJSON_GetObjectItem(entry(h, "embeddings.word_embeddings.weight"), "data_offsets");
    double b = cJSON_GetArrayItem(of, 0)->valuedouble, e = cJSON_GetArrayItem(of, 1)->valuedouble;
    if (a == 0) { cJSON_ReplaceItemInArray(of, 1, cJSON_CreateNumber(e + 1e9)); cJSON_ReplaceItemInArray(of, 0, cJSON_CreateNumber(b + 1e9)); }
    if (a == 1) cJSON_ReplaceItemInArray(of, 0, cJSON_CreateNumber(b + 0.5));
    if (a == 2) { cJSON_ReplaceItemInArray(of, 0, cJSON_CreateNumber(e)); cJSON_ReplaceItemInArray(of, 1, cJSON_CreateNumber(b)); }
    if (a == 3) {   /* overlap: the next tensor's range shifted into this one */
        cJSON *o2 = cJSON_GetObjectItem(entry(h, "embeddings.position_embeddings.weight"), "data_offsets");
        double b2 = cJSON_GetArrayItem(o2, 0)->valuedouble, e2 = cJSON_GetArrayItem(o2, 1)->valuedouble;
        (void)b2;
        cJSON_ReplaceItemInArray(o2, 0, cJSON_CreateNumber(e - 64));
        cJSON_ReplaceItemInArray(o2, 1, cJSON_CreateNumber(e - 64 + (e2 - b2)));
    }
}
static void e_remove(cJSON *h, int a)
{
    (void)a;
    cJSON_DeleteItemFromObject(h, "encoder.layer.1.output.LayerNorm.bias");
}
static void e_notobj(cJSON *h, int a)
{
    (void)a;
    cJSON_ReplaceItemInObject(h, "embeddings.LayerNorm.bias", cJSON_CreateNumber(3));
}

static void test_safetensors_fields(void **st)
{
    (void)st;
    char *dir = hf_copy("bert/tiny-bert-hf");
    char *p = lcx__path_join(dir, "model.safetensors");
    size_t n;
    char *orig = slurp(p, &n);
    char err[512];
    struct { void (*fn)(cJSON *, int); int arg; uint64_t force; const char *want; } cases[] = {
        {e_dtype, 0, 0, "dtype x shape"}, {e_dtype, 1, 0, "unknown dtype"}, {e_dtype, 2, 0, "dtype"},
        {e_shape, 0, 0, "dtype x shape"}, {e_shape, 1, 0, "bad dimension"}, {e_shape, 2, 0, "bad dimension"},
        {e_offsets, 0, 0, "outside"}, {e_offsets, 1, 0, "non-integer"}, {e_offsets, 2, 0, "outside"},
        {e_offsets, 3, 0, "overlap"}, {e_remove, 0, 0, "missing"}, {e_notobj, 0, 0, "not an object"},
        {NULL, 0, ~0ull, "cap"}, {NULL, 0, 1u << 20, "past the end"}, {NULL, 0, 100, "malformed"},
    };
    for (size_t i = 0; i < LCX_ARRAY_LEN(cases); i++) {
        st_rewrite(dir, orig, n, cases[i].fn, cases[i].arg, cases[i].force);
        int rc = try_load(dir, err, sizeof err);
        if (rc >= 0 || !strstr(err, cases[i].want))
            fail_msg("case %zu: rc %d, message '%s' (expected '%s')", i, rc, err, cases[i].want);
    }
    /* and the rewritten-but-unchanged header still loads (the rewriting itself is sound) */
    st_rewrite(dir, orig, n, NULL, 0, 0);
    assert_int_equal(try_load(dir, err, sizeof err), 0);
    free(orig);

    /* config.json fields */
    char *cp = lcx__path_join(dir, "config.json");
    char *cfg = slurp(cp, &n);
    struct { const char *from, *to, *want; } cc[] = {
        {"\"hidden_size\": 64", "\"hidden_size\": 65", "head count"},
        {"\"num_attention_heads\": 4", "\"num_attention_heads\": 0", "head count"},
        {"\"vocab_size\": 1024", "\"vocab_size\": 1000", "shape"},
        {"\"vocab_size\": 1024", "\"vocab_size\": 1e12", "vocabulary size"},
        {"\"model_type\": \"bert\"", "\"model_type\": \"roberta\"", "not supported"},
        {"\"hidden_act\": \"gelu\"", "\"hidden_act\": \"relu\"", "not supported"},
        {"\"num_hidden_layers\": 2", "\"num_hidden_layers\": 3", "encoder.layer.2"},
        {"\"layer_norm_eps\": 1e-12", "\"layer_norm_eps\": -1", "epsilon"},
        {"{", "[", "not a JSON object"},
    };
    for (size_t i = 0; i < LCX_ARRAY_LEN(cc); i++) {
        char *at = strstr(cfg, cc[i].from);
        if (!at) fail_msg("config.json lacks %s", cc[i].from);
        lcx_buf b = {0};
        lcx__buf_append(&b, cfg, (size_t)(at - cfg));
        lcx__buf_puts(&b, cc[i].to);
        lcx__buf_puts(&b, at + strlen(cc[i].from));
        assert_int_equal(tu_write(cp, b.data, b.len), 0);
        lcx__buf_free(&b);
        int rc = try_load(dir, err, sizeof err);
        if (rc >= 0 || !strstr(err, cc[i].want))
            fail_msg("config %s: rc %d, message '%s' (expected '%s')", cc[i].to, rc, err, cc[i].want);
    }
    assert_int_equal(tu_write(cp, cfg, n), 0);
    assert_int_equal(try_load(dir, err, sizeof err), 0);
    /* missing files */
    char *vp = lcx__path_join(dir, "vocab.txt");
    unlink(vp);
    assert_true(try_load(dir, err, sizeof err) < 0);
    assert_non_null(strstr(err, "vocab.txt"));
    assert_true(try_load("/nonexistent/model", err, sizeof err) == LCX_ENOTFOUND);
    free(vp);
    free(cfg);
    free(cp);
    free(p);
    tu_rmrf(dir);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gguf_fields),
        cmocka_unit_test(test_safetensors_fields),
        cmocka_unit_test(test_safetensors_truncated),
        cmocka_unit_test(test_gguf_truncated),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
