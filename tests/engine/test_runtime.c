/* Engine runtime: architectures without llama.cpp fixtures against an independent numpy
 * reference (qwen3 q/k norms + explicit head size, llama with linear rope scaling), model
 * refusal (unknown architecture, missing tensor, bad shape), KV cache cell removal without
 * RoPE shift, ubatch splitting, batch vs token-by-token, thread-count invariance, context
 * full, the sampler, and query-tiled attention against the untiled kernel. */
#include "testutil.h"
#include "rand_model.h"
#include "longctx/engine.h"
#include "engine/ctx.h"   /* att_qt: the attention query tile */
#include "engine/gguf.h"
#include "engine/quant.h"
#include "util/util.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *g_dir;

enum { E = TRM_E, NH = TRM_NH, NKV = TRM_NKV, FF = TRM_FF, NV = TRM_NV, NL = TRM_NL };

typedef struct {
    const char *arch;
    const char *name;        /* tensor to omit (NULL = none) */
    int hd;                  /* head size (key_length) */
    float rope_linear;       /* 0 = none */
    bool bad_shape;
    int n_layer;             /* 0 = NL */
    bool rope_freqs;         /* add rope_freqs.weight (Llama 3.1 style) */
} mspec;

static void write_model(const char *path, const mspec *s)
{
    const trm_spec t = {.arch = s->arch, .omit = s->name, .hd = s->hd, .n_layer = s->n_layer, .ctx_train = 256,
                        .rope_linear = s->rope_linear, .bad_shape = s->bad_shape, .rope_freqs = s->rope_freqs,
                        .seed = 88172645463325252ull};
    trm_write(path, &t);
}

static eng_model *load_ok(const char *path)
{
    eng_model *m;
    char err[256];
    int rc = eng_model_load(path, &m, err, sizeof err);
    if (rc) fail_msg("load %s: %s", path, err);
    return m;
}

static void compare_numpy(const mspec *s, const char *fname)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", g_dir, fname);
    write_model(path, s);
    eng_model *m = load_ok(path);
    eng_ctx *c;
    assert_int_equal(eng_ctx_init(m, NULL, &c), 0);
    int32_t toks[] = {1, 17, 99, 5, 64, 127, 3, 42, 42, 8, 77};
    const int n = (int)LCX_ARRAY_LEN(toks);
    assert_int_equal(eng_decode(c, toks, NULL, n, false), 0);
    const float *l = eng_logits(c, -1);
    const char *py = getenv("LCX_PY") ? getenv("LCX_PY") : "/usr/bin/python3";
    const char *src = getenv("LCX_SRC");
    if (!src) skip();
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s %s/tests/engine/ref_forward.py %s 1,17,99,5,64,127,3,42,42,8,77", py, src, path);
    char *out = NULL;
    int st = tu_run(cmd, &out);
    if (st != 0) { free(out); fail_msg("reference failed (%d): %s", st, cmd); }
    cJSON *j = cJSON_Parse(out);
    free(out);
    assert_non_null(j);
    const cJSON *v;
    int k = 0;
    double worst = 0;
    cJSON_ArrayForEach(v, cJSON_GetObjectItem(j, "logits"))
    {
        double d = fabs(l[k] - v->valuedouble);
        if (d > worst) worst = d;
        if (d > 1e-4) fail_msg("%s: logit %d = %.7g, numpy %.7g", s->arch, k, l[k], v->valuedouble);
        k++;
    }
    assert_int_equal(k, NV);
    print_message("%s: max |diff| vs numpy float64 = %.3g\n", fname, worst);
    cJSON_Delete(j);
    eng_ctx_free(c);
    eng_model_free(m);
}

static void test_qwen3_numpy(void **st) { compare_numpy(&(mspec){"qwen3", NULL, 32, 0, false, 0, false}, "qwen3.gguf"); }
static void test_qwen2_numpy(void **st) { compare_numpy(&(mspec){"qwen2", NULL, 0, 0, false, 0, false}, "qwen2.gguf"); }
static void test_llama_linear_rope_numpy(void **st)
{
    compare_numpy(&(mspec){"llama", NULL, 0, 4.0f, false, 0, false}, "llama-lin.gguf");
}

static void test_llama_rope_freqs_numpy(void **st)
{
    compare_numpy(&(mspec){"llama", NULL, 0, 0, false, 0, true}, "llama-ropefreqs.gguf");
}

static void test_refusals(void **st)
{
    char path[512], err[256];
    eng_model *m = NULL;
    snprintf(path, sizeof path, "%s/gptj.gguf", g_dir);
    write_model(path, &(mspec){"gptj", NULL, 0, 0, false, 0, false});
    assert_int_equal(eng_model_load(path, &m, err, sizeof err), LCX_ENOTSUP);
    assert_null(m);
    assert_non_null(strstr(err, "unsupported architecture 'gptj'"));
    snprintf(path, sizeof path, "%s/missing.gguf", g_dir);
    write_model(path, &(mspec){"llama", "blk.1.ffn_up.weight", 0, 0, false, 0, false});
    assert_int_equal(eng_model_load(path, &m, err, sizeof err), LCX_ECORRUPT);
    assert_non_null(strstr(err, "blk.1.ffn_up.weight"));
    snprintf(path, sizeof path, "%s/shape.gguf", g_dir);
    write_model(path, &(mspec){"llama", NULL, 0, 0, true, 0, false});
    assert_int_equal(eng_model_load(path, &m, err, sizeof err), LCX_ECORRUPT);
    assert_non_null(strstr(err, "blk.1.attn_q.weight"));
    snprintf(path, sizeof path, "%s/yarn.gguf", g_dir);
    {
        eng_gguf_writer *w = eng__gguf_writer_new(32);
        eng__gguf_w_str(w, "general.architecture", "qwen2");
        eng__gguf_w_u32(w, "qwen2.embedding_length", 64);
        eng__gguf_w_u32(w, "qwen2.block_count", 1);
        eng__gguf_w_u32(w, "qwen2.feed_forward_length", 64);
        eng__gguf_w_u32(w, "qwen2.attention.head_count", 4);
        eng__gguf_w_str(w, "qwen2.rope.scaling.type", "yarn");
        assert_int_equal(eng__gguf_writer_write(w, path, NULL, NULL), 0);
        eng__gguf_writer_free(w);
    }
    assert_int_equal(eng_model_load(path, &m, err, sizeof err), LCX_ENOTSUP);
    assert_non_null(strstr(err, "yarn"));
    /* a vocab-only GGUF is not a model */
    assert_true(eng_model_load(tu_fixture("tokenizers/ggml-vocab-gpt-2.gguf"), &m, err, sizeof err) < 0);
}

static eng_model *fixture_model(void) { return load_ok(tu_fixture("gguf/tiny-qwen2-f32.gguf")); }

/* One layer: every cell's K/V depends only on its token and position, so "remove cells
 * 6..11" must equal "never had them" exactly. (With more layers later tokens have seen the
 * removed ones, so no such reference exists; see the remove_pos cross-check below.) */
static void test_kv_remove_no_shift(void **st)
{
    char path[512];
    snprintf(path, sizeof path, "%s/one-layer.gguf", g_dir);
    write_model(path, &(mspec){"qwen2", NULL, 0, 0, false, 1, false});
    eng_model *m = load_ok(path);
    const int nv = eng_model_get_info(m)->n_vocab;
    eng_ctx *a, *b;
    eng_ctx_params p = eng_ctx_default_params();
    p.n_ctx = 64;
    assert_int_equal(eng_ctx_init(m, &p, &a), 0);
    assert_int_equal(eng_ctx_init(m, &p, &b), 0);
    int32_t toks[24];
    for (int i = 0; i < 24; i++) toks[i] = (i * 37 + 11) % NV;
    assert_int_equal(eng_decode(a, toks, NULL, 24, false), 0);
    assert_int_equal(eng_kv_n_used(a), 24);
    assert_int_equal(eng_kv_max_pos(a), 23);
    /* keys of survivors, before removal */
    const int kvd = eng_model_get_info(m)->n_head_kv * eng_model_get_info(m)->head_dim;
    float before[24][64];
    for (int i = 0; i < 24; i++) memcpy(before[i], eng_kv_key(a, 0, i), kvd * sizeof(float));
    /* remove positions 6..11 (and an already-free cell and a duplicate: ignored) */
    int32_t cells[8];
    int nc = 0;
    for (int i = 0; i < eng_kv_size(a); i++)
        if (eng_kv_cell_pos(a, i) >= 6 && eng_kv_cell_pos(a, i) < 12) cells[nc++] = i;
    assert_int_equal(nc, 6);
    cells[nc++] = 40;
    cells[nc++] = cells[0];
    assert_int_equal(eng_kv_remove_cells(a, cells, nc), 6);
    assert_int_equal(eng_kv_n_used(a), 18);
    assert_int_equal(eng_kv_remove_cells(a, (int32_t[]){64}, 1), LCX_EINVAL);
    for (int i = 0; i < 24; i++) {
        if (i >= 6 && i < 12) {
            assert_int_equal(eng_kv_cell_pos(a, i), -1);
            assert_null(eng_kv_key(a, 0, i));
            continue;
        }
        assert_int_equal(eng_kv_cell_pos(a, i), i);        /* original position kept */
        assert_memory_equal(eng_kv_key(a, 0, i), before[i], kvd * sizeof(float));   /* no re-rotation */
    }
    int32_t next = 100;
    assert_int_equal(eng_decode(a, &next, NULL, 1, false), 0);   /* position 24 (max + 1) */
    assert_int_equal(eng_kv_max_pos(a), 24);
    assert_int_equal(eng_kv_cell_pos(a, 6), 24);                 /* reuses the first free cell */
    /* reference: the same surviving tokens written directly at their original positions */
    int32_t rt[19], rp[19];
    int n = 0;
    for (int i = 0; i < 24; i++)
        if (i < 6 || i >= 12) { rt[n] = toks[i]; rp[n] = i; n++; }
    rt[n] = next;
    rp[n] = 24;
    n++;
    assert_int_equal(eng_decode(b, rt, rp, n, false), 0);
    const float *la = eng_logits(a, -1), *lb = eng_logits(b, -1);
    for (int i = 0; i < nv; i++)
        if (fabsf(la[i] - lb[i]) > 2e-5f) fail_msg("logit %d: %.7g vs %.7g", i, la[i], lb[i]);
    /* and it differs from keeping everything (the removal mattered) */
    eng_kv_clear(b);
    int32_t full[25];
    memcpy(full, toks, sizeof toks);
    full[24] = next;
    assert_int_equal(eng_decode(b, full, NULL, 25, false), 0);
    double diff = 0;
    for (int i = 0; i < nv; i++) diff = fmax(diff, fabs(eng_logits(b, -1)[i] - la[i]));
    assert_true(diff > 1e-3);
    /* remove by position range */
    assert_int_equal(eng_kv_remove_pos(a, 20, -1), 5);   /* 20..24 */
    assert_int_equal(eng_kv_max_pos(a), 19);
    eng_kv_clear(a);
    assert_int_equal(eng_kv_n_used(a), 0);
    assert_int_equal(eng_kv_max_pos(a), -1);
    eng_ctx_free(a);
    eng_ctx_free(b);
    eng_model_free(m);
}


/* Two layers (fixture): removing cells by index or by position range gives the same state. */
static void test_kv_remove_paths_agree(void **st)
{
    eng_model *m = fixture_model();
    eng_ctx_params p = eng_ctx_default_params();
    p.n_ctx = 64;
    eng_ctx *a, *b;
    assert_int_equal(eng_ctx_init(m, &p, &a), 0);
    assert_int_equal(eng_ctx_init(m, &p, &b), 0);
    int32_t toks[30];
    for (int i = 0; i < 30; i++) toks[i] = (i * 53 + 3) % 509;
    assert_int_equal(eng_decode(a, toks, NULL, 30, false), 0);
    assert_int_equal(eng_decode(b, toks, NULL, 30, false), 0);
    int32_t cells[10];
    for (int i = 0; i < 10; i++) cells[i] = 10 + i;
    assert_int_equal(eng_kv_remove_cells(a, cells, 10), 10);
    assert_int_equal(eng_kv_remove_pos(b, 10, 20), 10);
    int32_t nx[3] = {5, 6, 7};
    assert_int_equal(eng_decode(a, nx, NULL, 3, false), 0);
    assert_int_equal(eng_decode(b, nx, NULL, 3, false), 0);
    assert_memory_equal(eng_logits(a, -1), eng_logits(b, -1), 512 * sizeof(float));
    assert_int_equal(eng_kv_max_pos(a), 32);
    eng_ctx_free(a);
    eng_ctx_free(b);
    eng_model_free(m);
}

/* Query-tiled attention (att_qt tokens per task) against one token per task: bit-identical
 * for a prefill (cells in position order); after removing cells from the middle, a batch
 * whose new tokens land in the freed cells (a tile's rows then mask cells that sit between
 * the ones they see, so the 8-wide blocks of a row's scores and softmax sum fall
 * differently) agrees to float rounding (~1e-6; a wrong mask moves logits by > 1e-2). Both the rand model (4/2 heads: 8 tokens per tile) and a
 * fixture with ragged tile ends (43 tokens). */
static void att_tiles_case(eng_model *m, int n0)
{
    const int nv = eng_model_get_info(m)->n_vocab;
    eng_ctx_params p = eng_ctx_default_params();
    p.n_ctx = 256;
    eng_ctx *a, *b;
    assert_int_equal(eng_ctx_init(m, &p, &a), 0);
    assert_int_equal(eng_ctx_init(m, &p, &b), 0);
    assert_true(a->att_qt > 1);
    b->att_qt = 1;                                   /* scratch is sized for the larger tile */
    int32_t toks[160];
    for (int i = 0; i < 160; i++) toks[i] = (i * 53 + 7) % nv;
    assert_int_equal(eng_decode(a, toks, NULL, n0, true), 0);
    assert_int_equal(eng_decode(b, toks, NULL, n0, true), 0);
    for (int t = 0; t < n0; t++)
        if (memcmp(eng_logits(a, t), eng_logits(b, t), nv * sizeof(float))) fail_msg("prefill: token %d differs", t);
    assert_int_equal(eng_kv_remove_pos(a, 5, 26), 21);
    assert_int_equal(eng_kv_remove_pos(b, 5, 26), 21);
    assert_int_equal(eng_decode(a, toks + n0, NULL, 37, true), 0);
    assert_int_equal(eng_decode(b, toks + n0, NULL, 37, true), 0);
    assert_int_equal(eng_kv_cell_pos(a, 5), n0);     /* interleaved: new positions in old cells */
    double worst = 0;
    for (int t = 0; t < 37; t++)
        for (int i = 0; i < nv; i++) worst = fmax(worst, fabs(eng_logits(a, t)[i] - eng_logits(b, t)[i]));
    if (worst > 1e-5) fail_msg("interleaved cells: max |diff| %.3g", worst);
    eng_ctx_free(a);
    eng_ctx_free(b);
}

static void test_att_tiles(void **st)
{
    (void)st;
    char path[512];
    snprintf(path, sizeof path, "%s/tiles.gguf", g_dir);
    write_model(path, &(mspec){"qwen2", NULL, 0, 0, false, 0, false});
    eng_model *m = load_ok(path);
    att_tiles_case(m, 100);
    eng_model_free(m);
    m = load_ok(tu_fixture("gguf/tiny-llama256-q4_k_m.gguf"));
    att_tiles_case(m, 43);
    eng_model_free(m);
}

static void test_ubatch_threads_sequential(void **st)
{
    eng_model *m = load_ok(tu_fixture("gguf/tiny-llama256-q4_k_m.gguf"));
    const int nv = eng_model_get_info(m)->n_vocab;
    int32_t toks[40];
    for (int i = 0; i < 40; i++) toks[i] = (i * 91 + 7) % 512;
    eng_ctx_params p = eng_ctx_default_params();
    p.n_ctx = 64;
    eng_ctx *ref, *ub, *th, *seq;
    assert_int_equal(eng_ctx_init(m, &p, &ref), 0);
    p.n_ubatch = 7;
    assert_int_equal(eng_ctx_init(m, &p, &ub), 0);
    p.n_ubatch = 512;
    p.n_threads = 3;
    assert_int_equal(eng_ctx_init(m, &p, &th), 0);
    assert_int_equal(eng_ctx_n_threads(th), 3);
    p.n_threads = 2;
    assert_int_equal(eng_ctx_init(m, &p, &seq), 0);
    assert_int_equal(eng_decode(ref, toks, NULL, 40, true), 0);
    assert_int_equal(eng_decode(ub, toks, NULL, 40, true), 0);
    assert_int_equal(eng_decode(th, toks, NULL, 40, true), 0);
    for (int t = 0; t < 40; t++) {
        /* splitting rows across threads does not change any row's arithmetic: bit-identical */
        assert_memory_equal(eng_logits(ref, t), eng_logits(th, t), nv * sizeof(float));
        for (int i = 0; i < nv; i++)
            if (fabsf(eng_logits(ref, t)[i] - eng_logits(ub, t)[i]) > 1e-4f)
                fail_msg("ubatch 7: pos %d logit %d differs", t, i);
    }
    for (int t = 0; t < 40; t++) {
        assert_int_equal(eng_decode(seq, &toks[t], NULL, 1, false), 0);
        const float *a = eng_logits(seq, -1), *b = eng_logits(ref, t);
        for (int i = 0; i < nv; i++)
            if (fabsf(a[i] - b[i]) > 1e-4f) fail_msg("token-by-token: pos %d logit %d %.7g vs %.7g", t, i, a[i], b[i]);
    }
    assert_null(eng_logits(seq, 0));     /* only the last is kept without all_logits */
    eng_ctx_free(ref);
    eng_ctx_free(ub);
    eng_ctx_free(th);
    eng_ctx_free(seq);
    eng_model_free(m);
}

/* The huge-page weight copy (default; Q5_0 matrices re-laid as Q5_0X4 on AVX2 machines, the
 * tied output pointed at the copy) and the plain file mapping (LCX_ENGINE_WEIGHTS=mmap: the
 * file's Q5_0 blocks) give the same logits bit for bit, for a prompt and token by token.
 * tiny-qwen2-q4_k_m has Q5_0 matrices with 128-element rows (ffn_down) and a tied output. */
static void test_weights_copy_matches_mapping(void **st)
{
    (void)st;
    const char *path = tu_fixture("gguf/tiny-qwen2-q4_k_m.gguf");
    const char *old = getenv("LCX_ENGINE_WEIGHTS");
    char *saved = old ? strdup(old) : NULL;
    setenv("LCX_ENGINE_WEIGHTS", "mmap", 1);
    eng_model *mm = load_ok(path);
    unsetenv("LCX_ENGINE_WEIGHTS");
    eng_model *mc = load_ok(path);
    if (saved) {
        setenv("LCX_ENGINE_WEIGHTS", saved, 1);
        free(saved);
    }
    const int nv = eng_model_get_info(mm)->n_vocab;
    int32_t toks[24];
    for (int i = 0; i < 24; i++) toks[i] = (i * 37 + 5) % nv;
    eng_ctx_params p = eng_ctx_default_params();
    p.n_ctx = 64;
    eng_ctx *a, *b;
    assert_int_equal(eng_ctx_init(mm, &p, &a), 0);
    assert_int_equal(eng_ctx_init(mc, &p, &b), 0);
    assert_int_equal(eng_decode(a, toks, NULL, 20, true), 0);
    assert_int_equal(eng_decode(b, toks, NULL, 20, true), 0);
    for (int t = 0; t < 20; t++) assert_memory_equal(eng_logits(a, t), eng_logits(b, t), nv * sizeof(float));
    for (int t = 20; t < 24; t++) {
        assert_int_equal(eng_decode(a, &toks[t], NULL, 1, false), 0);
        assert_int_equal(eng_decode(b, &toks[t], NULL, 1, false), 0);
        assert_memory_equal(eng_logits(a, -1), eng_logits(b, -1), nv * sizeof(float));
    }
    eng_ctx_free(a);
    eng_ctx_free(b);
    eng_model_free(mm);
    eng_model_free(mc);
}

typedef struct { int calls, layer_calls[4]; int32_t max_pos; double sum0; } hook_st;
static void q_hook(void *ud, int il, int32_t pos, const float *q)
{
    hook_st *h = ud;
    h->calls++;
    if (il >= 0 && il < 4) h->layer_calls[il]++;
    if (pos > h->max_pos) h->max_pos = pos;
    if (il == 0 && pos == 3) h->sum0 = q[0];
}

/* The pre-RoPE query hook: once per (layer, token), pre-RoPE values (position-independent:
 * the same token at two positions gives the same layer-0 query). */
static void test_q_hook(void **st)
{
    eng_model *m = fixture_model();
    eng_ctx *c;
    assert_int_equal(eng_ctx_init(m, NULL, &c), 0);
    hook_st h = {0};
    h.max_pos = -1;
    eng_ctx_set_q_hook(c, q_hook, &h);
    int32_t t[6] = {7, 8, 9, 10, 11, 12};
    assert_int_equal(eng_decode(c, t, NULL, 6, false), 0);
    assert_int_equal(h.calls, 12);
    assert_int_equal(h.layer_calls[0], 6);
    assert_int_equal(h.layer_calls[1], 6);
    assert_int_equal(h.max_pos, 5);
    double q_at3 = h.sum0;
    eng_kv_clear(c);
    int32_t t3[4] = {3, 3, 3, 10};   /* token 10 again at position 3 */
    h.sum0 = 0;
    assert_int_equal(eng_decode(c, t3, NULL, 4, false), 0);
    assert_true(h.sum0 == q_at3);     /* layer 0, same token, pre-RoPE: identical */
    eng_ctx_set_q_hook(c, NULL, NULL);
    assert_int_equal(eng_decode(c, t, NULL, 1, false), 0);
    assert_int_equal(h.calls, 12 + 8);
    eng_ctx_free(c);
    eng_model_free(m);
}


/* Allocation counter: the test binary is linked with -Wl,--wrap=malloc,... (CMakeLists), so
 * every allocation made by the statically linked engine goes through these. */
static int g_count_allocs;
static long g_allocs;
void *__real_malloc(size_t n);
void *__real_calloc(size_t a, size_t b);
void *__real_realloc(void *p, size_t n);
void *__wrap_malloc(size_t n)
{
    if (g_count_allocs) g_allocs++;
    return __real_malloc(n);
}
void *__wrap_calloc(size_t a, size_t b)
{
    if (g_count_allocs) g_allocs++;
    return __real_calloc(a, b);
}
void *__wrap_realloc(void *p, size_t n)
{
    if (g_count_allocs) g_allocs++;
    return __real_realloc(p, n);
}

/* The decode loop (decode one token, read logits, sample) allocates nothing, with threads. */
static void test_no_alloc_in_decode(void **st)
{
    eng_model *m = load_ok(tu_fixture("gguf/tiny-qwen2-256-q4_k_m.gguf"));
    eng_ctx_params p = eng_ctx_default_params();
    p.n_ctx = 128;
    p.n_threads = 2;
    eng_ctx *c;
    assert_int_equal(eng_ctx_init(m, &p, &c), 0);
    eng_sampler *s = eng_sampler_init(&(eng_sampler_params){.temp = 0.8f, .top_k = 20, .top_p = 0.9f, .seed = 1});
    int32_t prompt[5] = {1, 15, 27, 300, 4};
    assert_int_equal(eng_decode(c, prompt, NULL, 5, false), 0);
    int32_t t = eng_sample(s, eng_logits(c, -1), 512);   /* sizes the sampler's scratch */
    g_allocs = 0;
    g_count_allocs = 1;
    for (int i = 0; i < 40; i++) {
        if (eng_decode(c, &t, NULL, 1, false) != 0) break;
        t = eng_sample(s, eng_logits(c, -1), 512);
    }
    g_count_allocs = 0;
    assert_int_equal(g_allocs, 0);
    assert_int_equal(eng_kv_n_used(c), 45);
    /* the counter works: creating a context allocates */
    g_count_allocs = 1;
    eng_ctx *c2;
    assert_int_equal(eng_ctx_init(m, &p, &c2), 0);
    g_count_allocs = 0;
    assert_true(g_allocs > 0);
    eng_ctx_free(c2);
    eng_sampler_free(s);
    eng_ctx_free(c);
    eng_model_free(m);
}

static void test_ctx_limits(void **st)
{
    eng_model *m = fixture_model();
    eng_ctx_params p = eng_ctx_default_params();
    p.n_ctx = 8;
    eng_ctx *c;
    assert_int_equal(eng_ctx_init(m, &p, &c), 0);
    int32_t t[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    assert_int_equal(eng_decode(c, t, NULL, 9, false), LCX_ELIMIT);
    assert_int_equal(eng_kv_n_used(c), 0);
    assert_int_equal(eng_decode(c, t, NULL, 8, false), 0);
    assert_int_equal(eng_decode(c, t, NULL, 1, false), LCX_ELIMIT);
    assert_int_equal(eng_kv_remove_cells(c, (int32_t[]){3}, 1), 1);
    assert_int_equal(eng_decode(c, t, NULL, 1, false), 0);
    assert_int_equal(eng_decode(c, (int32_t[]){512}, NULL, 1, false), LCX_EINVAL);
    assert_int_equal(eng_decode(c, (int32_t[]){-1}, NULL, 1, false), LCX_EINVAL);
    assert_int_equal(eng_decode(c, t, (int32_t[]){-5}, 1, false), LCX_EINVAL);
    assert_int_equal(eng_decode(c, t, NULL, 0, false), LCX_EINVAL);
    eng_ctx_free(c);
    eng_ctx_free(NULL);
    eng_model_free(m);
    eng_model_free(NULL);
}

static void test_sampler(void **st)
{
    float l[6] = {0.5f, 2.0f, 2.0f, -1.0f, 1.9f, 0.0f};
    eng_sampler *g = eng_sampler_init(&(eng_sampler_params){.temp = 0});
    assert_int_equal(eng_sample(g, l, 6), 1);          /* lowest id on ties */
    eng_sampler_free(g);
    eng_sampler *k1 = eng_sampler_init(&(eng_sampler_params){.temp = 1.5f, .top_k = 1, .seed = 3});
    for (int i = 0; i < 50; i++) assert_int_equal(eng_sample(k1, l, 6), 1);
    eng_sampler_free(k1);
    /* top-p tiny keeps only the single most likely (ties broken by id) */
    eng_sampler *p = eng_sampler_init(&(eng_sampler_params){.temp = 1.0f, .top_p = 0.01f, .seed = 5});
    for (int i = 0; i < 50; i++) assert_int_equal(eng_sample(p, l, 6), 1);
    eng_sampler_free(p);
    /* top-k 3 never picks outside {1,2,4} */
    eng_sampler *k3 = eng_sampler_init(&(eng_sampler_params){.temp = 1.0f, .top_k = 3, .seed = 9});
    for (int i = 0; i < 500; i++) {
        int t = eng_sample(k3, l, 6);
        assert_true(t == 1 || t == 2 || t == 4);
    }
    eng_sampler_free(k3);
    /* distribution: logits [0, ln 3] at T=1 -> P(1) = 0.75 */
    float two[2] = {0.0f, logf(3.0f)};
    eng_sampler *s = eng_sampler_init(&(eng_sampler_params){.temp = 1.0f, .seed = 42});
    int c1 = 0;
    for (int i = 0; i < 20000; i++) c1 += eng_sample(s, two, 2) == 1;
    assert_true(c1 > 14700 && c1 < 15300);
    eng_sampler_free(s);
    /* temperature 0.25 sharpens: P(1) = 3^4/(1+3^4) = 0.9878 */
    s = eng_sampler_init(&(eng_sampler_params){.temp = 0.25f, .seed = 43});
    c1 = 0;
    for (int i = 0; i < 20000; i++) c1 += eng_sample(s, two, 2) == 1;
    assert_true(c1 > 19600 && c1 < 19900);
    eng_sampler_free(s);
    /* same seed, same sequence; different seed, different sequence */
    eng_sampler *a = eng_sampler_init(&(eng_sampler_params){.temp = 1.0f, .seed = 7});
    eng_sampler *b = eng_sampler_init(&(eng_sampler_params){.temp = 1.0f, .seed = 7});
    eng_sampler *d = eng_sampler_init(&(eng_sampler_params){.temp = 1.0f, .seed = 8});
    int same = 1, diff = 0;
    for (int i = 0; i < 200; i++) {
        int x = eng_sample(a, l, 6), y = eng_sample(b, l, 6), z = eng_sample(d, l, 6);
        same &= x == y;
        diff += x != z;
    }
    assert_true(same);
    assert_true(diff > 0);
    assert_int_equal(eng_sample(a, l, 0), LCX_EINVAL);
    eng_sampler_free(a);
    eng_sampler_free(b);
    eng_sampler_free(d);
    eng_sampler_free(NULL);
}

int main(void)
{
    g_dir = tu_tmpdir();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_qwen3_numpy),
        cmocka_unit_test(test_qwen2_numpy),
        cmocka_unit_test(test_llama_linear_rope_numpy),
        cmocka_unit_test(test_llama_rope_freqs_numpy),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_kv_remove_no_shift),
        cmocka_unit_test(test_kv_remove_paths_agree),
        cmocka_unit_test(test_att_tiles),
        cmocka_unit_test(test_ubatch_threads_sequential),
        cmocka_unit_test(test_weights_copy_matches_mapping),
        cmocka_unit_test(test_q_hook),
        cmocka_unit_test(test_no_alloc_in_decode),
        cmocka_unit_test(test_ctx_limits),
        cmocka_unit_test(test_sampler),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    tu_rmrf(g_dir);
    free(g_dir);
    return rc;
}
