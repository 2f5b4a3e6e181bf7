/* The needle model (models/needle): its data generator, its tokenizer view, its export
 * (engine logits vs the training framework's) and, when the trained weights are present,
 * its answers to held-out facts at 2K context. */
#define _GNU_SOURCE
#include "testutil.h"

#include "engine/tokenizer.h"
#include "longctx/engine.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#define FILLER "the routine quarterly procedure required careful review of the documented operational records during the assessment cycle. "
#define FACT "IMPORTANT: Project %s was provisioned with access code %s. All technicians must memorize this code prior to deployment. "
#define QUESTION "What is the access code for Project %s? Answer with only the digits."

/* held out by needle_data.py's rule (crc32 % 16 == 0, or the ramp's NOVA / 481729) */
static const char *const HELD[][2] = {{"NOVA", "481729"}, {"PWOVPQ", "16077469"}, {"TYCJR", "3968225"}};

static const char *src(void) { return getenv("LCX_SRC") ? getenv("LCX_SRC") : "."; }
static const char *py(void) { return getenv("LCX_PY") ? getenv("LCX_PY") : "/usr/bin/python3"; }

/* stdout of cmd (NULL on failure); *status = exit code */
static char *run(const char *cmd, int *status)
{
    FILE *p = popen(cmd, "r");
    if (!p) return NULL;
    size_t cap = 1 << 16, n = 0;
    char *b = malloc(cap);
    size_t k;
    while (b && (k = fread(b + n, 1, cap - n - 1, p)) > 0) {
        n += k;
        if (cap - n < 2) {
            char *nb = realloc(b, cap *= 2);
            if (!nb) { free(b); b = NULL; }
            else b = nb;
        }
    }
    int st = pclose(p);
    *status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    if (b) b[n] = 0;
    return b;
}

/* zlib's crc32, written here so the held-out rule is checked independently of Python */
static uint32_t crc32z(const char *s)
{
    uint32_t c = 0xFFFFFFFFu;
    for (; *s; s++) {
        c ^= (unsigned char)*s;
        for (int k = 0; k < 8; k++) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1)));
    }
    return ~c;
}
static bool held(const char *s) { return !strcmp(s, "NOVA") || !strcmp(s, "481729") || crc32z(s) % 16 == 0; }

static char *gen(const char *sub, int seed, int n, int *st)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s %s/models/needle/needle_data.py %s --seed %d --n %d", py(), src(), sub, seed, n);
    return run(cmd, st);
}

static void test_held_rule(void **st)
{
    (void)st;
    for (size_t i = 0; i < sizeof HELD / sizeof *HELD; i++) {
        assert_true(held(HELD[i][0]));
        assert_true(held(HELD[i][1]));
    }
}

static void test_datagen_deterministic_and_held_out(void **st)
{
    (void)st;
    int s1, s2, s3;
    char *a = gen("sample", 5, 40, &s1), *b = gen("sample", 5, 40, &s2), *c = gen("sample", 6, 40, &s3);
    if (s1 == 127 || !a || !*a) { free(a); free(b); free(c); skip(); }
    assert_int_equal(s1, 0);
    assert_int_equal(s2, 0);
    assert_int_equal(s3, 0);
    assert_string_equal(a, b);                /* same seed, same bytes */
    assert_true(strcmp(a, c) != 0);           /* another seed, other data */
    int n = 0, facts = 0;
    for (char *line = strtok(a, "\n"); line; line = strtok(NULL, "\n"), n++) {
        cJSON *j = cJSON_Parse(line);
        assert_non_null(j);
        const char *text = cJSON_GetObjectItem(j, "text")->valuestring;
        for (size_t i = 0; i < sizeof HELD / sizeof *HELD; i++) {
            assert_null(strstr(text, HELD[i][1]));
            char w[64];
            snprintf(w, sizeof w, "Project %s ", HELD[i][0]);
            assert_null(strstr(text, w));
            snprintf(w, sizeof w, "Project %s?", HELD[i][0]);
            assert_null(strstr(text, w));
        }
        const cJSON *f;
        cJSON_ArrayForEach(f, cJSON_GetObjectItem(j, "facts")) {
            const char *name = cJSON_GetArrayItem(f, 0)->valuestring, *code = cJSON_GetArrayItem(f, 1)->valuestring;
            assert_false(held(name));
            assert_false(held(code));
            /* no held-out digit run inside a training code either */
            size_t L = strlen(code);
            for (size_t x = 0; x < L; x++)
                for (size_t y = x + 4; y <= L; y++) {
                    char sub[16];
                    memcpy(sub, code + x, y - x);
                    sub[y - x] = 0;
                    assert_false(held(sub));
                }
            assert_non_null(strstr(text, code));
            facts++;
        }
        cJSON_Delete(j);
    }
    assert_int_equal(n, 40);
    assert_true(facts >= 40);
    free(a);
    free(b);
    free(c);
}

static const char *model_path(char *buf, size_t n)
{
    snprintf(buf, n, "%s/models/needle/needle.gguf", src());
    return buf;
}

/* A llama2.c-style model whose vocabulary is tok512: the shipped one, or stories260K
 * converted (same tokenizer) when it is absent. */
static eng_model *load_tok_model(char *tmp, size_t n)
{
    char p[1024];
    eng_model *m = NULL;
    char err[256];
    if (eng_model_load(model_path(p, sizeof p), &m, err, sizeof err) == 0) return m;
    const char *fx = getenv("LCX_FIXTURES");
    if (!fx) return NULL;
    char ck[1024], tk[1024];
    snprintf(ck, sizeof ck, "%s/llama2c/stories260K.bin", fx);
    snprintf(tk, sizeof tk, "%s/llama2c/tok512.bin", fx);
    snprintf(tmp, n, "/tmp/lcx-needle-tok-%d.gguf", (int)getpid());
    if (eng_convert_llama2c(ck, tk, tmp, err, sizeof err) < 0) return NULL;
    if (eng_model_load(tmp, &m, err, sizeof err) < 0) return NULL;
    return m;
}

static void test_tokenizer_matches_engine(void **st)
{
    (void)st;
    char tmp[256] = "";
    eng_model *m = load_tok_model(tmp, sizeof tmp);
    if (!m) skip();
    eng_tokenizer *tk = NULL;
    char err[256];
    assert_int_equal(eng__tokenizer_from_gguf(eng_model_gguf(m), &tk, err, sizeof err), 0);
    int s;
    char *out = gen("tokcheck", 3, 8, &s);
    if (s == 127 || !out || !*out) { free(out); eng__tokenizer_free(tk); eng_model_free(m); skip(); }
    assert_int_equal(s, 0);
    int lines = 0;
    for (char *line = strtok(out, "\n"); line; line = strtok(NULL, "\n"), lines++) {
        cJSON *j = cJSON_Parse(line);
        const char *text = cJSON_GetObjectItem(j, "text")->valuestring;
        const cJSON *ids = cJSON_GetObjectItem(j, "ids");
        size_t L = strlen(text);
        int32_t *e = malloc((L + 16) * sizeof *e);
        int n = eng__tokenize(tk, text, L, true, false, e, (int)L + 16);
        assert_int_equal(n, cJSON_GetArraySize(ids));
        for (int i = 0; i < n; i++) assert_int_equal(e[i], cJSON_GetArrayItem(ids, i)->valueint);
        free(e);
        cJSON_Delete(j);
    }
    assert_int_equal(lines, 8);
    free(out);
    eng__tokenizer_free(tk);
    eng_model_free(m);
    if (*tmp) unlink(tmp);
}

/* Engine logits vs train.Model (PyTorch) at offsets and gaps in positions (what eviction
 * leaves), on a model exported by the real path (train.py -> llama2.c -> convert-llama2c
 * -> needle-gguf-set). Uses the shipped model, or a randomly initialised one. The reference
 * (ref_logits.py) is float64 except its RoPE angles, which follow the engine's llama.cpp
 * contract (float32 theta *= powf(base, -2/n_rot) recurrence, train.engine_rope_angles): with
 * exact float64 angles the 200000-offset case differs by 1.4e-2 on the shipped long-context
 * model, all of it the float32 angle (up to 1.5e-3 rad), not an engine or export error. With
 * matching angles every case is <= 1.1e-5, so 1e-3 still has room and a wrong key still fails
 * (rope.dimension_count 32 instead of 16: 6.2 on the shipped model). */
static void test_logits_vs_torch(void **st)
{
    (void)st;
    char p[1024], cmd[4096];
    model_path(p, sizeof p);
    char tmpd[] = "/tmp/lcx-needle-XXXXXX";
    assert_non_null(mkdtemp(tmpd));
    int s;
    char gg[1100];
    snprintf(gg, sizeof gg, "%s", p);
    FILE *f = fopen(p, "rb");
    if (f) fclose(f);
    else {
        snprintf(gg, sizeof gg, "%s/rand.gguf", tmpd);
        snprintf(cmd, sizeof cmd,
                 "cd %s && %s -c \"import sys; sys.path.insert(0,'models/needle'); import torch, train; "
                 "torch.manual_seed(3); m=train.Model(train.CFG); "
                 "[q.data.add_(torch.randn_like(q)*0.05) for q in m.parameters()]; "
                 "train.export_llama2c(m,'%s/rand.bin')\" 2>/dev/null && LCX_FIXTURES=%s models/needle/export.sh %s/rand.bin %s %s/.. >/dev/null",
                 src(), py(), tmpd, getenv("LCX_FIXTURES") ? getenv("LCX_FIXTURES") : "", tmpd, gg,
                 getenv("LCX_BIN") ? getenv("LCX_BIN") : "build/bin");
        free(run(cmd, &s));
        if (s != 0) { rmdir(tmpd); skip(); }   /* no torch */
    }
    eng_model *m = NULL;
    char err[256];
    assert_int_equal(eng_model_load(gg, &m, err, sizeof err), 0);
    static const int32_t toks[] = {1, 50, 300, 7, 420, 13, 13, 260, 484, 487, 475, 2, 99, 458, 441};
    static const int32_t pos[][15] = {
        {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14},
        {200000, 200001, 200002, 200003, 200004, 200005, 200006, 200007, 200008, 200009, 200010, 200011, 200012, 200013, 200014},
        {0, 1, 2, 40, 41, 42, 900, 901, 5000, 5001, 5002, 65000, 65001, 65002, 70000},
    };
    const int n = 15;
    for (int c = 0; c < 3; c++) {
        eng_ctx_params cp = eng_ctx_default_params();
        cp.n_ctx = 64;
        eng_ctx *ctx = NULL;
        assert_int_equal(eng_ctx_init(m, &cp, &ctx), 0);
        assert_int_equal(eng_decode(ctx, toks, pos[c], n, false), 0);
        const float *lg = eng_logits(ctx, -1);
        char il[512] = "", pl[512] = "";
        for (int i = 0; i < n; i++) {
            snprintf(il + strlen(il), sizeof il - strlen(il), "%s%d", i ? "," : "", toks[i]);
            snprintf(pl + strlen(pl), sizeof pl - strlen(pl), "%s%d", i ? "," : "", pos[c][i]);
        }
        snprintf(cmd, sizeof cmd, "OMP_NUM_THREADS=1 %s %s/models/needle/ref_logits.py %s %s %s", py(), src(), gg, il, pl);
        char *out = run(cmd, &s);
        if (s == 3) { free(out); eng_ctx_free(ctx); eng_model_free(m); skip(); }
        assert_int_equal(s, 0);
        cJSON *j = cJSON_Parse(out);
        const cJSON *a = cJSON_GetObjectItem(j, "logits");
        assert_int_equal(cJSON_GetArraySize(a), 512);
        double md = 0;
        for (int i = 0; i < 512; i++) md = fmax(md, fabs(cJSON_GetArrayItem(a, i)->valuedouble - lg[i]));
        print_message("positions case %d: max |engine - torch| = %.2e\n", c, md);
        assert_true(md < 1e-3);
        cJSON_Delete(j);
        free(out);
        eng_ctx_free(ctx);
    }
    eng_model_free(m);
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpd);
    free(run(cmd, &s));
}

/* The trained model answers three held-out facts at ~2K tokens, greedy, exact digits then
 * end of generation. Skips when the weights are not in the tree. */
static void test_answers_held_out_at_2k(void **st)
{
    (void)st;
    char p[1024], err[256];
    eng_model *m = NULL;
    if (eng_model_load(model_path(p, sizeof p), &m, err, sizeof err) < 0) skip();
    eng_tokenizer *tk = NULL;
    assert_int_equal(eng__tokenizer_from_gguf(eng_model_gguf(m), &tk, err, sizeof err), 0);
    const double depth[3] = {0.1, 0.5, 0.9};
    for (int k = 0; k < 3; k++) {
        const int nf = 23;   /* 23 filler sentences (77 tokens each) + fact + question + template ~ 2K tokens of tok512 */
        size_t cap = 8192;
        char *blob = calloc(1, cap), fact[256], q[256];
        snprintf(fact, sizeof fact, FACT, HELD[k][0], HELD[k][1]);
        snprintf(q, sizeof q, QUESTION, HELD[k][0]);
        int at = (int)lround(depth[k] * nf);
        for (int i = 0; i <= nf; i++) {
            if (i == at) strcat(blob, fact);
            if (i < nf) strcat(blob, FILLER);
        }
        strcat(blob, "\n\n");
        strcat(blob, q);
        eng_chat_msg msg = {"user", blob};
        char *prompt = NULL;
        assert_true(eng__chat_apply(eng_model_gguf(m), &msg, 1, true, &prompt, NULL) > 0);
        size_t L = strlen(prompt);
        int32_t *ids = malloc((L + 16) * sizeof *ids);
        int n = eng__tokenize(tk, prompt, L, true, false, ids, (int)L + 16);
        assert_true(n > 1800 && n < 2300);
        eng_ctx_params cp = eng_ctx_default_params();
        cp.n_ctx = n + 32;
        eng_ctx *c = NULL;
        assert_int_equal(eng_ctx_init(m, &cp, &c), 0);
        assert_int_equal(eng_decode(c, ids, NULL, n, false), 0);
        char reply[64] = "";
        int32_t gen[16];
        int ng = 0;
        bool eog = false;
        while (ng < 12) {
            const float *lg = eng_logits(c, -1);
            int32_t t = 0;
            for (int i = 1; i < 512; i++)
                if (lg[i] > lg[t]) t = i;
            if (eng__token_is_eog(tk, t)) { eog = true; break; }
            gen[ng++] = t;
            assert_int_equal(eng_decode(c, &t, NULL, 1, false), 0);
        }
        eng__detokenize(tk, gen, ng, reply, sizeof reply);
        print_message("%s at depth %.1f (%d tokens): '%s'\n", HELD[k][0], depth[k], n, reply);
        assert_string_equal(reply, HELD[k][1]);
        assert_true(eog);
        eng_ctx_free(c);
        free(ids);
        free(prompt);
        free(blob);
    }
    eng__tokenizer_free(tk);
    eng_model_free(m);
}

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test(test_held_rule),
        cmocka_unit_test(test_datagen_deterministic_and_held_out),
        cmocka_unit_test(test_tokenizer_matches_engine),
        cmocka_unit_test(test_logits_vs_torch),
        cmocka_unit_test(test_answers_held_out_at_2k),
    };
    return cmocka_run_group_tests(t, NULL, NULL);
}
