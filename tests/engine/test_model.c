/* Engine golden tests: stories260K converted with our llama2.c importer against karpathy's
 * run.c outputs (ids, exact text, first-step logits), and every tiny GGUF in fixtures/gguf
 * against llama.cpp (last-position logits of three sequences, all 64 positions of the long
 * one, greedy ids by teacher forcing where the margin allows, tokenizer cases). */
#include "testutil.h"
#include "longctx/engine.h"
#include "engine/gguf.h"
#include "engine/tokenizer.h"
#include "util/util.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *g_dir;

static cJSON *load_json(const char *path)
{
    char *s;
    size_t n;
    assert_int_equal(lcx__read_file(path, 64u << 20, &s, &n), 0);
    cJSON *j = cJSON_ParseWithLength(s, n);
    free(s);
    assert_non_null(j);
    return j;
}

static int ids_from(const cJSON *a, int32_t *out, int cap)
{
    int n = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, a)
    {
        assert_true(n < cap);
        out[n++] = (int32_t)e->valuedouble;
    }
    return n;
}

static int argmax(const float *l, int n)
{
    int b = 0;
    for (int i = 1; i < n; i++)
        if (l[i] > l[b]) b = i;
    return b;
}

/* ---------------------------------------------------------------- llama2.c */

static void test_stories260k_llama2c(void **st)
{
    const char *ck = tu_fixture("llama2c/stories260K.bin");
    const char *tk = tu_fixture("llama2c/tok512.bin");
    const char *ex = tu_fixture("llama2c/expected.json");
    char out[512], err[256];
    snprintf(out, sizeof out, "%s/stories260K.gguf", g_dir);
    int rc = eng_convert_llama2c(ck, tk, out, err, sizeof err);
    if (rc) fail_msg("convert: %s", err);
    eng_model *m;
    rc = eng_model_load(out, &m, err, sizeof err);
    if (rc) fail_msg("load: %s", err);
    const eng_model_info *I = eng_model_get_info(m);
    assert_int_equal(I->n_layer, 5);
    assert_int_equal(I->n_head_kv, 4);
    assert_int_equal(I->n_vocab, 512);
    assert_int_equal(I->n_ctx_train, 512);
    eng_tokenizer *tok;
    rc = eng__tokenizer_from_gguf(eng_model_gguf(m), &tok, err, sizeof err);
    if (rc) fail_msg("tokenizer: %s", err);
    eng_ctx *c;
    eng_ctx_params cp = eng_ctx_default_params();
    cp.n_ctx = 512;
    assert_int_equal(eng_ctx_init(m, &cp, &c), 0);
    cJSON *j = load_json(ex);

    /* first-step logits, 1e-4 relative to the vector's scale */
    const cJSON *fs = cJSON_GetObjectItem(j, "first_step_logits"), *e;
    int nfs = 0;
    cJSON_ArrayForEach(e, fs)
    {
        int32_t ids[64];
        int n = ids_from(cJSON_GetObjectItem(e, "input_ids"), ids, 64);
        eng_kv_clear(c);
        assert_int_equal(eng_decode(c, ids, NULL, n, false), 0);
        const float *l = eng_logits(c, -1);
        float ref[512];
        assert_int_equal(ids_from(cJSON_GetObjectItem(e, "logits"), (int32_t[512]){0}, 512), 512);
        int k = 0;
        const cJSON *v;
        double mx = 0;
        cJSON_ArrayForEach(v, cJSON_GetObjectItem(e, "logits")) { ref[k] = (float)v->valuedouble; mx = fmax(mx, fabs(ref[k])); k++; }
        for (int i = 0; i < 512; i++) {
            /* reference printed with 6 significant digits: allow that rounding too */
            double tol = 1e-4 * mx + 5e-6 * fabs(ref[i]);
            if (fabs(l[i] - ref[i]) > tol)
                fail_msg("%s: logit %d = %.7g, run.c %.7g", e->string, i, l[i], ref[i]);
        }
        assert_int_equal(argmax(l, 512), (int)cJSON_GetObjectItem(e, "argmax")->valuedouble);
        nfs++;
    }
    assert_int_equal(nfs, 5);

    /* every case: encoding, greedy ids until BOS or the step budget, and run.c's stdout */
    const cJSON *cases = cJSON_GetObjectItem(j, "cases");
    int ncases = 0;
    cJSON_ArrayForEach(e, cases)
    {
        const cJSON *pr = cJSON_GetObjectItem(e, "prompt");
        const char *prompt = cJSON_IsString(pr) ? pr->valuestring : "";
        int32_t want_p[64], want_g[600], got[600];
        int np = ids_from(cJSON_GetObjectItem(e, "prompt_ids"), want_p, 64);
        int ng = ids_from(cJSON_GetObjectItem(e, "generated_ids"), want_g, 600);
        int32_t p[64];
        int n = eng__tokenize(tok, prompt, strlen(prompt), true, false, p, 64);
        assert_int_equal(n, np);
        assert_memory_equal(p, want_p, n * sizeof(int32_t));
        eng_kv_clear(c);
        assert_int_equal(eng_decode(c, p, NULL, n, false), 0);
        int k = 0;
        for (; k < ng; k++) {
            int32_t t = argmax(eng_logits(c, -1), 512);
            got[k] = t;
            if (t != want_g[k]) fail_msg("%s: step %d: got %d, run.c %d", e->string ? e->string : "case", k, t, want_g[k]);
            if (t == 1) { k++; break; }     /* run.c stops on BOS */
            if (k + 1 < ng) assert_int_equal(eng_decode(c, &t, NULL, 1, false), 0);
        }
        assert_int_equal(k, ng);
        /* stdout = prompt pieces + generated pieces (space after BOS dropped) + "\n" */
        lcx_buf b = {0};
        int32_t prev = p[0];
        int32_t all[700];
        int na = 0;
        for (int i = 1; i < n; i++) all[na++] = p[i];
        for (int i = 0; i < ng && got[i] != 1; i++) all[na++] = got[i];
        for (int i = 0; i < na; i++) {
            char piece[64];
            int pl = eng__token_to_piece(tok, all[i], piece, sizeof piece);
            assert_true(pl >= 0 && pl <= (int)sizeof piece);
            const char *pp = piece;
            if (prev == 1 && pl > 0 && pp[0] == ' ') { pp++; pl--; }
            lcx__buf_append(&b, pp, (size_t)pl);
            prev = all[i];
        }
        lcx__buf_puts(&b, "\n");
        const char *want = cJSON_GetObjectItem(e, "stdout")->valuestring;
        if (strcmp(b.data, want)) fail_msg("stdout differs:\n--- ours\n%s--- run.c\n%s", b.data, want);
        lcx__buf_free(&b);
        ncases++;
    }
    assert_int_equal(ncases, 7);

    /* encode cases */
    cJSON_ArrayForEach(e, cJSON_GetObjectItem(j, "encode_cases"))
    {
        const char *text = cJSON_GetObjectItem(e, "text")->valuestring;
        int32_t want[256], p[256];
        int nw = ids_from(cJSON_GetObjectItem(e, "ids"), want, 256);
        int n = eng__tokenize(tok, text, strlen(text), true, false, p, 256);
        assert_int_equal(n, nw);
        assert_memory_equal(p, want, n * sizeof(int32_t));
    }
    cJSON_Delete(j);
    eng_ctx_free(c);
    eng__tokenizer_free(tok);
    eng_model_free(m);
}

/* ---------------------------------------------------------------- llama.cpp goldens */

static void check_model(const char *name, double tol)
{
    char rel[256], relg[256], err[256];
    snprintf(rel, sizeof rel, "gguf/%s.gguf", name);
    snprintf(relg, sizeof relg, "gguf/%s.gguf.golden.json", name);
    const char *mp = tu_fixture(rel);
    eng_model *m;
    int rc = eng_model_load(mp, &m, err, sizeof err);
    if (rc) fail_msg("%s: %s", name, err);
    cJSON *j = load_json(tu_fixture(relg));
    const int nv = eng_model_get_info(m)->n_vocab;
    eng_ctx *c;
    eng_ctx_params cp = eng_ctx_default_params();
    cp.n_ctx = 128;
    assert_int_equal(eng_ctx_init(m, &cp, &c), 0);
    const cJSON *e;
    double worst = 0;
    cJSON_ArrayForEach(e, cJSON_GetObjectItem(j, "sequences"))
    {
        int32_t ids[128];
        int n = ids_from(cJSON_GetObjectItem(e, "tokens"), ids, 128);
        const cJSON *all = cJSON_GetObjectItem(e, "logits_all");
        eng_kv_clear(c);
        assert_int_equal(eng_decode(c, ids, NULL, n, all != NULL), 0);
        int k = 0;
        const cJSON *v;
        const float *l = eng_logits(c, -1);
        cJSON_ArrayForEach(v, cJSON_GetObjectItem(e, "logits_last"))
        {
            double d = fabs(l[k] - v->valuedouble);
            if (d > worst) worst = d;
            if (d > tol) fail_msg("%s: seq of %d: logit %d = %.7g, llama.cpp %.7g", name, n, k, l[k], v->valuedouble);
            k++;
        }
        assert_int_equal(k, nv);
        if (all) {
            /* (n, n_vocab) nested rows */
            int row = 0;
            const cJSON *r;
            cJSON_ArrayForEach(r, all)
            {
                const float *la = eng_logits(c, row);
                assert_non_null(la);
                k = 0;
                cJSON_ArrayForEach(v, r)
                {
                    double d = fabs(la[k] - v->valuedouble);
                    if (d > tol) fail_msg("%s: all-logits pos %d id %d = %.7g, llama.cpp %.7g", name, row, k,
                                          la[k], v->valuedouble);
                    k++;
                }
                assert_int_equal(k, nv);
                row++;
            }
            k = row * nv;
            assert_int_equal(k, n * nv);
        }
    }
    /* greedy by teacher forcing: argmax must match where the margin is clearly larger than
     * the tolerance; the golden token is fed either way */
    int checked = 0;
    cJSON_ArrayForEach(e, cJSON_GetObjectItem(j, "greedy"))
    {
        int32_t p[64], gen[64];
        float margin[64];
        int np = ids_from(cJSON_GetObjectItem(e, "prompt_tokens"), p, 64);
        int ng = ids_from(cJSON_GetObjectItem(e, "generated_tokens"), gen, 64);
        int k = 0;
        const cJSON *v;
        cJSON_ArrayForEach(v, cJSON_GetObjectItem(e, "top1_top2_margin")) margin[k++] = (float)v->valuedouble;
        assert_int_equal(k, ng);
        eng_kv_clear(c);
        assert_int_equal(eng_decode(c, p, NULL, np, false), 0);
        for (int s = 0; s < ng; s++) {
            int a = argmax(eng_logits(c, -1), nv);
            if (margin[s] > 2 * tol) {
                if (a != gen[s]) fail_msg("%s: greedy step %d: %d, llama.cpp %d (margin %g)", name, s, a, gen[s], margin[s]);
                checked++;
            }
            assert_int_equal(eng_decode(c, &gen[s], NULL, 1, false), 0);
        }
    }
    assert_true(checked >= 32);
    /* tokenizer goldens */
    eng_tokenizer *tok;
    rc = eng__tokenizer_from_gguf(eng_model_gguf(m), &tok, err, sizeof err);
    if (rc) fail_msg("%s tokenizer: %s", name, err);
    cJSON_ArrayForEach(e, cJSON_GetObjectItem(j, "tokenize"))
    {
        const char *text = cJSON_GetObjectItem(e, "text")->valuestring;
        int32_t want[512], got[512];
        int nw = ids_from(cJSON_GetObjectItem(e, "tokens"), want, 512);
        int n = eng__tokenize(tok, text, strlen(text), cJSON_IsTrue(cJSON_GetObjectItem(e, "add_special")),
                             cJSON_IsTrue(cJSON_GetObjectItem(e, "parse_special")), got, 512);
        if (n != nw || memcmp(got, want, n * sizeof(int32_t))) fail_msg("%s: tokenize '%s' differs", name, text);
    }
    eng__tokenizer_free(tok);
    print_message("%s: max |logit diff| %.3g (tol %.0e), %d greedy steps checked\n", name, worst, tol, checked);
    cJSON_Delete(j);
    eng_ctx_free(c);
    eng_model_free(m);
}

static void test_llama_f32(void **st) { check_model("tiny-llama-f32", 1e-4); }
static void test_llama_f16(void **st) { check_model("tiny-llama-f16", 2e-2); }
static void test_llama_q8_0(void **st) { check_model("tiny-llama-q8_0", 2e-3); }
static void test_llama_q4_0(void **st) { check_model("tiny-llama-q4_0", 2e-3); }
static void test_llama256_q4_k_m(void **st) { check_model("tiny-llama256-q4_k_m", 2e-3); }
static void test_qwen2_f32(void **st) { check_model("tiny-qwen2-f32", 1e-4); }
static void test_qwen2_f16(void **st) { check_model("tiny-qwen2-f16", 2e-2); }
static void test_qwen2_q8_0(void **st) { check_model("tiny-qwen2-q8_0", 2e-3); }
static void test_qwen2_q4_0(void **st) { check_model("tiny-qwen2-q4_0", 2e-3); }
static void test_qwen2_q4_k_m(void **st) { check_model("tiny-qwen2-q4_k_m", 2e-3); }
static void test_qwen2_256_q4_k_m(void **st) { check_model("tiny-qwen2-256-q4_k_m", 2e-3); }
static void test_stories_gguf(void **st) { check_model("stories260K", 1e-4); }

int main(void)
{
    g_dir = tu_tmpdir();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stories260k_llama2c),
        cmocka_unit_test(test_stories_gguf),
        cmocka_unit_test(test_llama_f32),
        cmocka_unit_test(test_llama_f16),
        cmocka_unit_test(test_llama_q8_0),
        cmocka_unit_test(test_llama_q4_0),
        cmocka_unit_test(test_llama256_q4_k_m),
        cmocka_unit_test(test_qwen2_f32),
        cmocka_unit_test(test_qwen2_f16),
        cmocka_unit_test(test_qwen2_q8_0),
        cmocka_unit_test(test_qwen2_q4_0),
        cmocka_unit_test(test_qwen2_q4_k_m),
        cmocka_unit_test(test_qwen2_256_q4_k_m),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    tu_rmrf(g_dir);
    free(g_dir);
    return rc;
}
