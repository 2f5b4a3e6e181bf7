/* longctx-engine CLI end to end: convert-llama2c + run reproduces llama2.c run.c's stdout
 * byte for byte (text and --ids), logits JSON vs the llama.cpp golden, tokenize, bench, and
 * clean failures; perplexity (against logits --all) with and without TriAttention eviction,
 * the void-run refusal and refused flag values. Skipped when the binary was not built. */
#include "testutil.h"
#include "util/util.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char *g_dir;
static char g_model[512];

static const char *bin(void)
{
    const char *b = tu_bin("longctx-engine");
    if (access(b, X_OK) != 0) {
        print_message("longctx-engine binary not built: skipped\n");
        skip();
    }
    return b;
}

static cJSON *expected(void)
{
    char *s;
    size_t n;
    assert_int_equal(lcx__read_file(tu_fixture("llama2c/expected.json"), 0, &s, &n), 0);
    cJSON *j = cJSON_Parse(s);
    free(s);
    assert_non_null(j);
    return j;
}

static void convert(void)
{
    if (g_model[0]) return;
    /* the fixtures first: a missing one skips this test before g_model claims a converted model */
    const char *ckpt = tu_fixture("llama2c/stories260K.bin"), *tok = tu_fixture("llama2c/tok512.bin");
    char cmd[2048], *out = NULL;
    snprintf(g_model, sizeof g_model, "%s/s.gguf", g_dir);
    snprintf(cmd, sizeof cmd, "'%s' convert-llama2c '%s' '%s' '%s' 2>&1", bin(), ckpt, tok, g_model);
    int st = tu_run(cmd, &out);
    if (st != 0) fail_msg("convert failed: %s", out);
    free(out);
}

static void test_run_matches_runc(void **st)
{
    convert();
    cJSON *j = expected();
    const cJSON *e;
    int n = 0;
    cJSON_ArrayForEach(e, cJSON_GetObjectItem(j, "cases"))
    {
        const cJSON *pr = cJSON_GetObjectItem(e, "prompt");
        const char *prompt = cJSON_IsString(pr) ? pr->valuestring : "";
        const char *want = cJSON_GetObjectItem(e, "stdout")->valuestring;
        const cJSON *gen = cJSON_GetObjectItem(e, "generated_ids");
        int ng = cJSON_GetArraySize(gen);
        /* run.c stops before printing a sampled BOS; our -n counts printed tokens */
        int last = (int)cJSON_GetArrayItem(gen, ng - 1)->valuedouble;
        int steps = last == 1 ? ng - 1 : ng;
        if (steps > 150 && n > 0) continue;   /* the long ones once is enough (time) */
        char cmd[4096], *out = NULL;
        snprintf(cmd, sizeof cmd, "'%s' run -m '%s' -p '%s' -n %d", bin(), g_model, prompt, steps);
        assert_int_equal(tu_run(cmd, &out), 0);
        size_t pl = strlen(prompt), wl = strlen(want);
        assert_true(wl >= pl + 1);
        assert_memory_equal(want, prompt, pl);
        if (strlen(out) != wl - pl - 1 || memcmp(out, want + pl, wl - pl - 1))
            fail_msg("run output differs for '%s':\n--- ours\n%s\n--- run.c\n%s", prompt, out, want);
        free(out);
        /* --ids */
        snprintf(cmd, sizeof cmd, "'%s' run -m '%s' -p '%s' -n %d --ids", bin(), g_model, prompt, steps);
        assert_int_equal(tu_run(cmd, &out), 0);
        lcx_buf b = {0};
        for (int i = 0; i < steps; i++)
            lcx__buf_printf(&b, i ? " %d" : "%d", (int)cJSON_GetArrayItem(gen, i)->valuedouble);
        lcx__buf_puts(&b, "\n");
        assert_string_equal(out, b.data);
        lcx__buf_free(&b);
        free(out);
        n++;
    }
    assert_true(n >= 5);
    cJSON_Delete(j);
}

static void test_sampling_seeded(void **st)
{
    convert();
    char cmd[2048], *a = NULL, *b = NULL, *c = NULL;
    snprintf(cmd, sizeof cmd, "'%s' run -m '%s' -p 'Once' -n 40 --temp 0.9 --top-k 40 --top-p 0.95 --seed 7 -t 2 --ids", bin(), g_model);
    assert_int_equal(tu_run(cmd, &a), 0);
    assert_int_equal(tu_run(cmd, &b), 0);
    assert_string_equal(a, b);
    snprintf(cmd, sizeof cmd, "'%s' run -m '%s' -p 'Once' -n 40 --temp 0.9 --seed 8 --ids", bin(), g_model);
    assert_int_equal(tu_run(cmd, &c), 0);
    assert_string_not_equal(a, c);
    free(a);
    free(b);
    free(c);
}

static void test_logits_json(void **st)
{
    char cmd[2048], *out = NULL, *gs;
    size_t gn;
    snprintf(cmd, sizeof cmd, "'%s' logits -m '%s' --tokens 1,15,27,300,4 -t 2", bin(), tu_fixture("gguf/tiny-qwen2-q8_0.gguf"));
    assert_int_equal(tu_run(cmd, &out), 0);
    cJSON *j = cJSON_Parse(out);
    free(out);
    assert_non_null(j);
    assert_int_equal(lcx__read_file(tu_fixture("gguf/tiny-qwen2-q8_0.gguf.golden.json"), 0, &gs, &gn), 0);
    cJSON *g = cJSON_Parse(gs);
    free(gs);
    const cJSON *ref = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(g, "sequences"), 1), "logits_last");
    const cJSON *got = cJSON_GetObjectItem(j, "logits");
    assert_int_equal(cJSON_GetArraySize(got), 512);
    assert_int_equal(cJSON_GetArraySize(ref), 512);
    for (int i = 0; i < 512; i++) {
        double d = fabs(cJSON_GetArrayItem(got, i)->valuedouble - cJSON_GetArrayItem(ref, i)->valuedouble);
        if (d > 2e-3) fail_msg("logit %d differs by %g", i, d);
    }
    cJSON_Delete(j);
    cJSON_Delete(g);
}

static void test_tokenize_bench_errors(void **st)
{
    char cmd[2048], *out = NULL;
    snprintf(cmd, sizeof cmd, "'%s' tokenize -m '%s' -p 'Hello world' --no-bos", bin(), tu_fixture("tokenizers/ggml-vocab-gpt-2.gguf"));
    assert_int_equal(tu_run(cmd, &out), 0);
    assert_string_equal(out, "15496 995\n");
    free(out);
    snprintf(cmd, sizeof cmd, "'%s' bench -m '%s' -p 8 -n 4 -r 1 -t 2 2>/dev/null", bin(), tu_fixture("gguf/tiny-llama-q4_0.gguf"));
    assert_int_equal(tu_run(cmd, &out), 0);
    assert_non_null(strstr(out, "pp8: "));
    assert_non_null(strstr(out, "tg4: "));
    free(out);
    snprintf(cmd, sizeof cmd, "'%s' run -m /nonexistent.gguf -p x -n 1 2>&1", bin());
    assert_int_equal(tu_run(cmd, &out), 1);
    assert_non_null(strstr(out, "cannot open"));
    free(out);
    snprintf(cmd, sizeof cmd, "'%s' logits -m '%s' --tokens 1,999 2>&1", bin(), tu_fixture("gguf/tiny-llama-f32.gguf"));
    assert_int_equal(tu_run(cmd, &out), 1);
    assert_non_null(strstr(out, "out of range"));
    free(out);
    /* truncated checkpoint */
    char trunc[512];
    snprintf(trunc, sizeof trunc, "%s/trunc.bin", g_dir);
    snprintf(cmd, sizeof cmd, "head -c 100000 '%s' > '%s' && '%s' convert-llama2c '%s' '%s' '%s/x.gguf' 2>&1",
             tu_fixture("llama2c/stories260K.bin"), trunc, bin(), trunc, tu_fixture("llama2c/tok512.bin"), g_dir);
    assert_int_equal(tu_run(cmd, &out), 1);
    assert_non_null(strstr(out, "header implies"));
    free(out);
    snprintf(cmd, sizeof cmd, "'%s' frobnicate 2>&1", bin());
    assert_int_equal(tu_run(cmd, &out), 2);
    free(out);
}


static double json_num(const char *out, const char *key)
{
    cJSON *j = cJSON_Parse(out);
    if (!j) fail_msg("not JSON: %s", out);
    const cJSON *v = cJSON_GetObjectItem(j, key);
    if (!v) fail_msg("no %s in %s", key, out);
    double x = cJSON_IsBool(v) ? cJSON_IsTrue(v) : v->valuedouble;
    cJSON_Delete(j);
    return x;
}

static void test_perplexity_v3(void **st)
{
    (void)st;
    char m[512];   /* tu_fixture / tu_bin return rotating buffers: keep a copy */
    snprintf(m, sizeof m, "%s", tu_fixture("gguf/stories260K.gguf"));
    char txt[512], cmd[4096], *out = NULL;
    snprintf(txt, sizeof txt, "%s/ppl.txt", g_dir);
    lcx_buf b = {0};
    static const char *w[] = {"Lily", "saw", "a", "big", "red", "ball", "in", "the", "park.", "Tom", "was", "happy", "and",
                              "they", "played", "all", "day.", "The", "sun", "was", "warm."};
    uint32_t x = 7;
    for (int i = 0; i < 4000; i++) {
        x = x * 1103515245u + 12345u;
        lcx__buf_printf(&b, "%s ", w[(x >> 16) % LCX_ARRAY_LEN(w)]);
    }
    assert_int_equal(tu_write(txt, b.data, b.len), 0);
    /* the off run against an independent computation from `logits --all` (chunk 1, ctx 128) */
    snprintf(cmd, sizeof cmd, "'%s' perplexity -m '%s' -f '%s' -c 128 -b 32 --chunks 1 --json", bin(), m, txt);
    assert_int_equal(tu_run(cmd, &out), 0);
    const double p1 = json_num(out, "ppl");
    assert_int_equal((int)json_num(out, "rounds"), 0);
    assert_int_equal((int)json_num(out, "scored"), 63);
    free(out);
    char *toks = NULL;
    char *text = b.data;
    snprintf(cmd, sizeof cmd, "'%s' tokenize -m '%s' -p \"$(cat '%s')\"", bin(), m, txt);
    assert_int_equal(tu_run(cmd, &toks), 0);
    int32_t ids[128];
    char *p = toks;
    for (int i = 0; i < 128; i++) ids[i] = (int32_t)strtol(p, &p, 10);
    free(toks);
    ids[0] = 1;   /* BOS replaces the chunk's first token */
    lcx_buf tl = {0};
    for (int i = 0; i < 128; i++) lcx__buf_printf(&tl, i ? ",%d" : "%d", ids[i]);
    snprintf(cmd, sizeof cmd, "'%s' logits -m '%s' --tokens %s --all", bin(), m, tl.data);
    lcx__buf_free(&tl);
    assert_int_equal(tu_run(cmd, &out), 0);
    cJSON *j = cJSON_Parse(out);
    free(out);
    assert_non_null(j);
    double nll = 0;
    const cJSON *all = cJSON_GetObjectItem(j, "logits_all");
    for (int t = 64; t < 127; t++) {
        const cJSON *row = cJSON_GetArrayItem(all, t);
        const int nv = cJSON_GetArraySize(row);
        double mx = -1e300, se = 0;
        for (int v = 0; v < nv; v++) mx = fmax(mx, cJSON_GetArrayItem(row, v)->valuedouble);
        for (int v = 0; v < nv; v++) se += exp(cJSON_GetArrayItem(row, v)->valuedouble - mx);
        nll += mx + log(se) - cJSON_GetArrayItem(row, ids[t + 1])->valuedouble;
    }
    cJSON_Delete(j);
    assert_float_equal(p1, exp(nll / 63), 1e-4 * p1);
    /* eviction firing: rounds, cells, and a different perplexity */
    snprintf(cmd, sizeof cmd, "'%s' perplexity -m '%s' -f '%s' -c 512 -b 32 --chunks 3 --json", bin(), m, txt);
    assert_int_equal(tu_run(cmd, &out), 0);
    const double poff = json_num(out, "ppl");
    free(out);
    snprintf(cmd, sizeof cmd, "'%s' perplexity -m '%s' -f '%s' -c 512 -b 32 --chunks 3 --json --triatt-budget 192 --triatt-divide 16 --triatt-window 64",
             bin(), m, txt);
    assert_int_equal(tu_run(cmd, &out), 0);
    assert_true(json_num(out, "triatt") == 1);
    const int rounds = (int)json_num(out, "rounds");
    assert_true(rounds >= 3 * 5);   /* warmup 256, then a round per 32-token batch */
    assert_true(json_num(out, "cells_evicted") >= rounds * 16);
    const double pon = json_num(out, "ppl");
    assert_true(pon != poff);
    free(out);
    /* a V3 run where no round fires before the last batch measured nothing: refused */
    snprintf(cmd, sizeof cmd, "'%s' perplexity -m '%s' -f '%s' -c 512 -b 16 --chunks 1 --triatt-budget 480 --triatt-divide 16 2>&1",
             bin(), m, txt);
    assert_int_equal(tu_run(cmd, &out), 1);
    assert_non_null(strstr(out, "void run"));
    free(out);
    /* refused values, flags over environment */
    snprintf(cmd, sizeof cmd, "'%s' perplexity -m '%s' -f '%s' --triatt-mode fancy 2>&1", bin(), m, txt);
    assert_int_equal(tu_run(cmd, &out), 2);
    assert_non_null(strstr(out, "trig, random or recency"));
    free(out);
    snprintf(cmd, sizeof cmd, "VLLM_TRIATT_ENABLED=1 VLLM_TRIATT_BUDGET=lots '%s' perplexity -m '%s' -f '%s' 2>&1", bin(), m, txt);
    assert_int_equal(tu_run(cmd, &out), 2);
    assert_non_null(strstr(out, "VLLM_TRIATT_BUDGET"));
    free(out);
    snprintf(cmd, sizeof cmd, "VLLM_TRIATT_ENABLED=1 VLLM_TRIATT_BUDGET=100000 '%s' perplexity -m '%s' -f '%s' -c 512 -b 32 --chunks 1 --json "
             "--triatt-budget 192 --triatt-divide 16 --triatt-window 64 2>&1", bin(), m, txt);
    if (tu_run(cmd, &out) != 0) fail_msg("%s\n%s", cmd, out);
    assert_int_equal((int)json_num(out, "budget"), 192);
    free(out);
    /* run: a prompt longer than the cache, the per-round line on stderr */
    snprintf(cmd, sizeof cmd, "'%s' run -m '%s' -p \"$(head -c 3000 '%s')\" -n 20 -c 256 -b 32 --triatt-budget 160 --triatt-divide 16 "
             "--triatt-window 64 2>&1 >/dev/null", bin(), m, txt);
    assert_int_equal(tu_run(cmd, &out), 0);
    assert_non_null(strstr(out, "evict: evicted "));
    assert_non_null(strstr(out, "budget=160, used="));
    assert_non_null(strstr(out, "mode=v3)"));
    assert_non_null(strstr(out, "triatt: rounds="));
    free(out);
    (void)text;
    lcx__buf_free(&b);
}

int main(void)
{
    g_dir = tu_tmpdir();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_run_matches_runc),
        cmocka_unit_test(test_sampling_seeded),
        cmocka_unit_test(test_logits_json),
        cmocka_unit_test(test_tokenize_bench_errors),
        cmocka_unit_test(test_perplexity_v3),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    tu_rmrf(g_dir);
    free(g_dir);
    return rc;
}
