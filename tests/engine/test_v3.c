/* TriAttention V3 inside the engine's forward pass (src/engine/v3.c):
 *  - budget never reached → logits bit-identical to V3 off (calibration and the fast-path
 *    feed must not touch the computation);
 *  - with eviction: logits of every token equal a float64 numpy forward pass in which each
 *    token attends to exactly the cells that survived when its ubatch ran (every layer),
 *    for llama (NORM pairing), qwen2 (NEOX + biases), qwen3 (q/k norms, partial RoPE), GQA;
 *  - rounds fire, each removes exactly n_used − budget cells, prefix / window survive,
 *    nothing goes before the warmup pass, survivors' keys in every layer are the ones
 *    computed before the round (moved by compaction with their positions);
 *  - Tier 2 posts the decoded ORIGINAL tokens (±32) of every round to a loopback listener,
 *    and with the listener dead or hanging decoding goes on and the drops are counted;
 *  - flag / environment resolution (flags beat env, invalid values refused). */
#define _GNU_SOURCE
#include "testutil.h"
#include "rand_model.h"
#include "longctx/engine.h"
#include "triatt/rescue_split.h"
#include "longctx/triatt.h"
#include "engine/gguf.h"
#include "engine/quant.h"
#include "engine/tokenizer.h"
#include "util/util.h"
#include "../triatt/minihttp.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *g_dir;

enum { E = TRM_E, NH = TRM_NH, NKV = TRM_NKV, FF = TRM_FF, NV = TRM_NV, NL = TRM_NL };

typedef struct {
    const char *arch;
    int hd;        /* 0 = E/NH */
    int n_rot;     /* 0 = hd (rope.dimension_count absent) */
    int ctx_train;
} mspec;

/* sharp attention (large q/k) so that which cells are visible shows in the logits */
static void write_model(const char *path, const mspec *s)
{
    const trm_spec t = {.arch = s->arch, .hd = s->hd, .n_rot = s->n_rot, .ctx_train = s->ctx_train ? s->ctx_train : 1024,
                        .qk_std = 0.6f, .v_std = 0.4f, .seed = 0x9E3779B97F4A7C15ull};
    trm_write(path, &t);
}

static eng_model *model_for(const mspec *s, const char *fname, char *path, size_t n)
{
    snprintf(path, n, "%s/%s", g_dir, fname);
    write_model(path, s);
    eng_model *m;
    char err[256];
    if (eng_model_load(path, &m, err, sizeof err)) fail_msg("load %s: %s", path, err);
    return m;
}

static eng_ctx *mk_ctx(const eng_model *m, int n_ctx, int ub, int th)
{
    eng_ctx_params p = {n_ctx, ub, th};
    eng_ctx *c;
    assert_int_equal(eng_ctx_init(m, &p, &c), 0);
    return c;
}

static void small_cfg(triatt_config *cfg, int budget)
{
    triatt_config_default(cfg);
    cfg->enabled = true;
    cfg->budget = budget;
    cfg->window = 16;
    cfg->prefix = 4;
    cfg->warmup = 16;
    cfg->divide_length = 8;
}

static void attach_ok(eng_ctx *c, const triatt_config *cfg, const char *sid)
{
    char err[256] = "";
    int rc = eng_triatt_attach(c, cfg, sid, err, sizeof err);
    if (rc) fail_msg("attach: %d %s", rc, err);
}

static void gen_tokens(int32_t *t, int n, uint64_t seed)
{
    uint64_t r = seed;
    for (int i = 0; i < n; i++) t[i] = (int32_t)((trm_rnd(&r) + 1.0f) * 0.5f * (NV - 1));
}

/* ---- the per-round log lines ------------------------------------------------------- */
typedef struct { int n; int x[256], y[256], budget[256], used[256], max_pos[256]; char mode[32]; } logcap;
static void cap_log(void *ud, const char *line)
{
    logcap *l = ud;
    int x, y, b, u, p;
    char mode[32];
    if (sscanf(line, "evict: evicted %d/%d tokens (budget=%d, used=%d, max_pos=%d, mode=%31[^)])", &x, &y, &b, &u, &p, mode) == 6 &&
        l->n < 256) {
        l->x[l->n] = x; l->y[l->n] = y; l->budget[l->n] = b; l->used[l->n] = u; l->max_pos[l->n] = p;
        snprintf(l->mode, sizeof l->mode, "%s", mode);
        l->n++;
    }
}

/* ---- 1. budget never reached: bit-identical ---------------------------------------- */
static void test_no_round_bit_identical(void **st)
{
    (void)st;
    char path[512];
    eng_model *m = model_for(&(mspec){"qwen2", 0, 0, 0}, "v3_q2.gguf", path, sizeof path);
    eng_ctx *a = mk_ctx(m, 512, 16, 2), *b = mk_ctx(m, 512, 16, 2);
    triatt_config cfg;
    small_cfg(&cfg, 300);
    attach_ok(b, &cfg, NULL);
    int32_t t[200];
    gen_tokens(t, 200, 7);
    assert_int_equal(eng_decode(a, t, NULL, 150, true), 0);
    assert_int_equal(eng_decode(b, t, NULL, 150, true), 0);
    assert_memory_equal(eng_logits(a, 0), eng_logits(b, 0), sizeof(float) * NV * 150);
    for (int i = 150; i < 200; i++) {
        assert_int_equal(eng_decode(a, t + i, NULL, 1, false), 0);
        assert_int_equal(eng_decode(b, t + i, NULL, 1, false), 0);
        assert_memory_equal(eng_logits(a, -1), eng_logits(b, -1), sizeof(float) * NV);
    }
    eng_triatt_stats s;
    assert_int_equal(eng_triatt_get_stats(b, &s), 0);
    assert_true(s.calibrated);          /* the hooks did run */
    assert_true(s.calib_tokens >= 16);
    assert_int_equal(s.rounds, 0);
    assert_int_equal(eng_kv_n_used(b), 200);
    assert_int_equal(eng_triatt_get_stats(a, &s), LCX_ESTATE);
    eng_ctx_free(a); eng_ctx_free(b);
    eng_model_free(m);
}

/* ---- 2. rounds against the float64 reference -------------------------------------- */
static bool has_pos(const int32_t *p, int n, int32_t x)
{
    for (int i = 0; i < n; i++)
        if (p[i] == x) return true;
    return false;
}

static void rounds_vs_numpy(const mspec *s, const char *fname, int hybrid, triatt_direction dir, triatt_mode mode)
{
    enum { T = 240, U = 16, CTX = 128, BUDGET = 64 };
    char path[512];
    eng_model *m = model_for(s, fname, path, sizeof path);
    const eng_model_info *I = eng_model_get_info(m);
    int32_t tok[T];
    gen_tokens(tok, T, 1234);
    triatt_config cfg;
    small_cfg(&cfg, BUDGET);
    cfg.version = (triatt_version)hybrid;
    cfg.direction = dir;
    cfg.mode = mode;
    cfg.warmup = 100;  /* > budget + divide: no round may fire before the pass that reaches it */

    /* run B: one ubatch per call, to record the survivors after each ubatch */
    eng_ctx *b = mk_ctx(m, CTX, U, 1);
    attach_ok(b, &cfg, NULL);
    logcap lc = {0};
    eng_triatt_set_log(b, cap_log, &lc);
    float *lb = malloc(sizeof(float) * NV * T);
    int ev_after[T];
    for (int i = 0; i < T; i++) ev_after[i] = -1;
    int32_t prev[CTX], cur[CTX];
    int n_prev = 0;
    /* keys before any round (no-eviction context) to check survivors in every layer */
    eng_ctx *full = mk_ctx(m, 512, U, 1);
    assert_int_equal(eng_decode(full, tok, NULL, T, false), 0);
    int first_round_ub = -1;
    for (int u = 0; u < T / U; u++) {
        assert_int_equal(eng_decode(b, tok + u * U, NULL, U, true), 0);
        memcpy(lb + (size_t)u * U * NV, eng_logits(b, 0), sizeof(float) * NV * U);
        int n = eng_kv_survivors(b, cur, NULL, CTX);
        assert_int_equal(n, eng_kv_n_used(b));
        for (int p = 0; p < (u + 1) * U; p++) {
            bool was = p >= u * U || has_pos(prev, n_prev, p);
            if (was && !has_pos(cur, n, p)) {
                assert_true(ev_after[p] < 0);
                ev_after[p] = u;
                if (first_round_ub < 0) first_round_ub = u;
            }
        }
        memcpy(prev, cur, sizeof(int32_t) * n);
        n_prev = n;
        /* every occupied cell is dense, holds its original token, and (for cells written
         * before the first round) the keys computed then, in every layer */
        for (int i = 0; i < n; i++) {
            const int32_t p = eng_kv_cell_pos(b, i);
            assert_true(p >= 0);
            assert_int_equal(eng_kv_cell_token(b, i), tok[p]);
            int fi = -1;
            for (int j = 0; j < eng_kv_n_used(full); j++)
                if (eng_kv_cell_pos(full, j) == p) { fi = j; break; }
            assert_true(fi >= 0);
            const bool before_rounds = first_round_ub < 0 || p < (first_round_ub + 1) * U;
            for (int il = 0; il < I->n_layer; il++) {
                const size_t kb = sizeof(float) * I->n_head_kv * I->head_dim;
                if (before_rounds || il == 0) {   /* layer 0 keys never depend on the context */
                    assert_memory_equal(eng_kv_key(b, il, i), eng_kv_key(full, il, fi), kb);
                    if (before_rounds) assert_memory_equal(eng_kv_value(b, il, i), eng_kv_value(full, il, fi), kb);
                }
            }
        }
        for (int i = n; i < CTX; i++) {
            assert_int_equal(eng_kv_cell_pos(b, i), -1);
            for (int il = 0; il < I->n_layer; il++) assert_null(eng_kv_key(b, il, i));
        }
    }
    eng_triatt_stats st;
    assert_int_equal(eng_triatt_get_stats(b, &st), 0);
    assert_true(st.rounds > 0);
    assert_int_equal((int)st.rounds, lc.n);
    uint64_t sum = 0;
    for (int r = 0; r < lc.n; r++) {
        assert_int_equal(lc.x[r], lc.used[r] - BUDGET);   /* exactly n_used − budget */
        assert_int_equal(lc.y[r], lc.used[r] - BUDGET);
        assert_int_equal(lc.budget[r], BUDGET);
        assert_true(lc.used[r] > BUDGET + cfg.divide_length);
        sum += (uint64_t)lc.x[r];
    }
    assert_int_equal(st.cells_evicted, sum);
    assert_true(lc.used[0] >= cfg.warmup);    /* nothing before the warmup pass (else at 80) */
    int n_ev = 0;
    for (int p = 0; p < T; p++) {
        if (ev_after[p] < 0) continue;
        n_ev++;
        /* protected: the prefix (V3), and the last `window` positions at that round */
        if (hybrid == 2) assert_true(p >= cfg.prefix);
        assert_true(p < (ev_after[p] + 1) * U - cfg.window);
    }
    assert_int_equal(n_ev, (int)sum);
    assert_int_equal(eng_kv_n_used(b), T - n_ev);

    /* run A: the whole prompt in one call (ubatches inside eng_decode) must match B bitwise */
    eng_ctx *a = mk_ctx(m, CTX, U, 2);
    attach_ok(a, &cfg, NULL);
    assert_int_equal(eng_decode(a, tok, NULL, T, true), 0);
    for (int t = 0; t < T; t++)
        if (memcmp(eng_logits(a, t), lb + (size_t)t * NV, sizeof(float) * NV))
            fail_msg("one-call prefill differs from ubatch-by-ubatch at token %d", t);

    /* eviction must be visible: the no-eviction logits differ after the first round */
    eng_ctx *nf = mk_ctx(m, 512, U, 1);
    assert_int_equal(eng_decode(nf, tok, NULL, T, true), 0);
    double maxdiff = 0;
    for (int t = (first_round_ub + 1) * U; t < T; t++)
        for (int v = 0; v < NV; v++) maxdiff = fmax(maxdiff, fabs(eng_logits(nf, t)[v] - lb[(size_t)t * NV + v]));
    assert_true(maxdiff > 1e-2);

    /* float64 reference over exactly the surviving cells */
    const char *py = getenv("LCX_PY") ? getenv("LCX_PY") : "/usr/bin/python3";
    const char *src = getenv("LCX_SRC");
    if (src) {
        char jpath[600];
        snprintf(jpath, sizeof jpath, "%s.evict.json", path);
        FILE *f = fopen(jpath, "w");
        assert_non_null(f);
        fprintf(f, "{\"ubatch\":%d,\"tokens\":[", U);
        for (int i = 0; i < T; i++) fprintf(f, "%s%d", i ? "," : "", tok[i]);
        fprintf(f, "],\"evicted_after\":[");
        for (int i = 0; i < T; i++) fprintf(f, "%s%d", i ? "," : "", ev_after[i]);
        fprintf(f, "]}\n");
        fclose(f);
        char cmd[2048];
        snprintf(cmd, sizeof cmd, "%s %s/tests/engine/ref_forward.py %s --evict %s", py, src, path, jpath);
        char *out = NULL;
        int rc = tu_run(cmd, &out);
        if (rc != 0) { free(out); fail_msg("reference failed (%d): %s", rc, cmd); }
        cJSON *j = cJSON_Parse(out);
        free(out);
        assert_non_null(j);
        const cJSON *lg = cJSON_GetObjectItem(j, "logits");
        assert_int_equal(cJSON_GetArraySize(lg), T);
        double worst = 0;
        for (int t = 0; t < T; t++) {
            const cJSON *row = cJSON_GetArrayItem(lg, t);
            for (int v = 0; v < NV; v++) {
                double d = fabs(lb[(size_t)t * NV + v] - cJSON_GetArrayItem(row, v)->valuedouble);
                worst = fmax(worst, d);
                if (d > 2e-4) fail_msg("%s: token %d logit %d = %.7g, numpy %.7g", fname, t, v, lb[(size_t)t * NV + v],
                                       cJSON_GetArrayItem(row, v)->valuedouble);
            }
        }
        print_message("%s: %d rounds, %d evicted, max |diff| vs float64 = %.3g (no-eviction differs by %.3g)\n", fname,
                      lc.n, n_ev, worst, maxdiff);
        cJSON_Delete(j);
    }
    free(lb);
    eng_ctx_free(a); eng_ctx_free(b); eng_ctx_free(full); eng_ctx_free(nf);
    eng_model_free(m);
}

static void test_rounds_llama(void **st) { (void)st; rounds_vs_numpy(&(mspec){"llama", 0, 0, 0}, "v3_llama.gguf", 2, TRIATT_KEEP_HIGH, TRIATT_MODE_TRIG); }
static void test_rounds_qwen2(void **st) { (void)st; rounds_vs_numpy(&(mspec){"qwen2", 0, 0, 0}, "v3_qwen2.gguf", 2, TRIATT_EVICT_HIGH, TRIATT_MODE_TRIG); }
static void test_rounds_qwen3_partial(void **st) { (void)st; rounds_vs_numpy(&(mspec){"qwen3", 32, 16, 0}, "v3_qwen3.gguf", 2, TRIATT_KEEP_HIGH, TRIATT_MODE_TRIG); }
static void test_rounds_v1_random(void **st) { (void)st; rounds_vs_numpy(&(mspec){"llama", 0, 0, 0}, "v3_llama_v1.gguf", 0, TRIATT_KEEP_HIGH, TRIATT_MODE_RANDOM); }

/* ---- 3. the fast path (features fed as cells enter / move) = full rescoring ------- */
static void test_fast_path_matches_full(void **st)
{
    (void)st;
    char path[512];
    eng_model *m = model_for(&(mspec){"qwen2", 0, 0, 0}, "v3_fast.gguf", path, sizeof path);
    eng_ctx *a = mk_ctx(m, 128, 16, 1), *b = mk_ctx(m, 128, 16, 1);
    triatt_config cfg;
    small_cfg(&cfg, 64);
    cfg.fast_path = true;
    attach_ok(a, &cfg, NULL);
    cfg.fast_path = false;
    attach_ok(b, &cfg, NULL);
    int32_t tok[300];
    gen_tokens(tok, 300, 99);
    assert_int_equal(eng_decode(a, tok, NULL, 200, false), 0);
    assert_int_equal(eng_decode(b, tok, NULL, 200, false), 0);
    for (int i = 200; i < 300; i++) {
        assert_int_equal(eng_decode(a, tok + i, NULL, 1, false), 0);
        assert_int_equal(eng_decode(b, tok + i, NULL, 1, false), 0);
    }
    eng_triatt_stats sa, sb;
    eng_triatt_get_stats(a, &sa);
    eng_triatt_get_stats(b, &sb);
    assert_true(sa.rounds > 10 && sa.cells_moved > 0);
    assert_int_equal(sa.rounds, sb.rounds);
    int32_t pa[128], pb[128];
    int na = eng_kv_survivors(a, pa, NULL, 128), nb = eng_kv_survivors(b, pb, NULL, 128);
    assert_int_equal(na, nb);
    assert_memory_equal(pa, pb, sizeof(int32_t) * na);
    assert_memory_equal(eng_logits(a, -1), eng_logits(b, -1), sizeof(float) * NV);
    eng_ctx_free(a); eng_ctx_free(b);
    eng_model_free(m);
}

/* ---- 3b. calibration: pre-RoPE queries, each layer each token once, pass boundary ---- */
typedef struct { int hd, nh, nrot, nl; bool neox; double *sr, *si; long n[8]; } qacc;
static void acc_hook(void *ud, int il, int32_t pos, const float *q)
{
    qacc *a = ud;
    (void)pos;
    const int fc = a->nrot / 2;
    for (int h = 0; h < a->nh; h++)
        for (int f = 0; f < fc; f++) {
            const float *qh = q + h * a->hd;
            a->sr[(il * a->nh + h) * fc + f] += a->neox ? qh[f] : qh[2 * f];
            a->si[(il * a->nh + h) * fc + f] += a->neox ? qh[f + fc] : qh[2 * f + 1];
        }
    a->n[il]++;
}

static void calib_check(const mspec *s, const char *fname)
{
    char path[512];
    eng_model *m = model_for(s, fname, path, sizeof path);
    const eng_model_info *I = eng_model_get_info(m);
    eng_ctx *c = mk_ctx(m, 128, 16, 2);
    triatt_config cfg;
    small_cfg(&cfg, 64);
    cfg.warmup = 20;
    attach_ok(c, &cfg, NULL);
    const int fc = I->n_rot / 2;
    qacc a = {I->head_dim, I->n_head, I->n_rot, I->n_layer, I->rope_type == ENG_ROPE_NEOX, NULL, NULL, {0}};
    a.sr = calloc((size_t)I->n_layer * I->n_head * fc, sizeof(double));
    a.si = calloc((size_t)I->n_layer * I->n_head * fc, sizeof(double));
    eng_ctx_set_q_hook(c, acc_hook, &a);
    int32_t tok[48];
    gen_tokens(tok, 48, 3);
    assert_int_equal(eng_decode(c, tok, NULL, 16, false), 0);
    eng_triatt_stats st;
    eng_triatt_get_stats(c, &st);
    assert_false(st.calibrated);            /* 16 < warmup: not before a pass reaches it */
    assert_int_equal(eng_decode(c, tok + 16, NULL, 16, false), 0);
    eng_triatt_get_stats(c, &st);
    assert_true(st.calibrated);
    assert_int_equal(st.calib_tokens, 32);  /* finalised at the boundary, whole pass counted */
    eng_ctx_set_q_hook(c, NULL, NULL);
    const triatt_calib *cal = triatt_ctx_calib(eng_triatt_ctx(c));
    for (int l = 0; l < I->n_layer; l++) {
        assert_int_equal(a.n[l], 32);
        for (int h = 0; h < I->n_head; h++) {
            const double *mr, *mi, *mabs;
            assert_int_equal(triatt_calib_head(cal, l, h, &mr, &mi, &mabs), 0);
            for (int f = 0; f < fc; f++) {
                assert_float_equal(mr[f], a.sr[(l * I->n_head + h) * fc + f] / 32, 1e-6);
                assert_float_equal(mi[f], a.si[(l * I->n_head + h) * fc + f] / 32, 1e-6);
            }
        }
    }
    /* frozen: later passes no longer change the stats */
    const uint64_t gen = triatt_calib_generation(cal);
    assert_int_equal(eng_decode(c, tok + 32, NULL, 16, false), 0);
    assert_int_equal(triatt_calib_generation(cal), gen);
    free(a.sr); free(a.si);
    eng_ctx_free(c);
    eng_model_free(m);
}
static void test_calib_llama(void **st) { (void)st; calib_check(&(mspec){"llama", 0, 0, 0}, "v3_cal_llama.gguf"); }
static void test_calib_qwen3_partial(void **st) { (void)st; calib_check(&(mspec){"qwen3", 32, 16, 0}, "v3_cal_qwen3.gguf"); }

/* ---- 4. long prefill, limits, detach ----------------------------------------------- */
static void test_prefill_longer_than_cache(void **st)
{
    (void)st;
    char path[512];
    eng_model *m = model_for(&(mspec){"llama", 0, 0, 0}, "v3_long.gguf", path, sizeof path);
    eng_ctx *c = mk_ctx(m, 128, 32, 2);
    triatt_config cfg;
    small_cfg(&cfg, 100);
    char err[256];
    /* 100 + 8 + 32 > 128: a full ubatch would not fit after a round */
    assert_int_equal(eng_triatt_attach(c, &cfg, NULL, err, sizeof err), LCX_EINVAL);
    assert_non_null(strstr(err, "exceeds"));
    cfg.enabled = false;
    assert_int_equal(eng_triatt_attach(c, &cfg, NULL, err, sizeof err), LCX_EINVAL);
    small_cfg(&cfg, 80);
    attach_ok(c, &cfg, NULL);
    int32_t tok[1000];
    gen_tokens(tok, 1000, 5);
    assert_int_equal(eng_decode(c, tok, NULL, 1000, false), 0);   /* 1000 tokens, 128 cells */
    assert_true(eng_kv_n_used(c) <= 80 + 8 + 32);
    assert_int_equal(eng_kv_max_pos(c), 999);
    eng_triatt_stats s;
    eng_triatt_get_stats(c, &s);
    assert_true(s.rounds >= 25);
    /* cells removed by the caller (e.g. a chat rollback) leave holes: the next decode
     * compacts before writing, and rounds keep working */
    assert_true(eng_kv_remove_pos(c, 950, -1) > 0);
    assert_int_equal(eng_decode(c, tok, NULL, 200, false), 0);
    int32_t pos[256];
    int n = eng_kv_survivors(c, pos, NULL, 256);
    for (int i = 1; i < n; i++) assert_true(pos[i] > pos[i - 1]);
    for (int i = 0; i < eng_kv_n_used(c); i++) assert_true(eng_kv_cell_pos(c, i) >= 0);
    eng_triatt_detach(c);
    assert_false(eng_triatt_attached(c));
    assert_int_equal(eng_decode(c, tok, NULL, 200, false), LCX_ELIMIT);   /* plain cache again */
    eng_ctx_free(c);
    eng_model_free(m);
}

/* ---- 5. Tier 2 against a loopback listener ----------------------------------------- */
static eng_model *stories(void)
{
    const char *p = tu_fixture("gguf/stories260K.gguf");
    eng_model *m;
    char err[256];
    if (eng_model_load(p, &m, err, sizeof err)) fail_msg("%s", err);
    return m;
}

static const char *k_story =
    "Once upon a time, there was a little girl named Lily. She loved to play outside in the sun. One day, she saw a big "
    "red ball in the park. She ran to the ball and kicked it very hard. The ball went up into the sky and came down on a "
    "tree. Lily was sad because she could not get her ball. Then a kind boy named Tom came to help her. He climbed the "
    "tree and got the ball for Lily. Lily said thank you and they played together all day. They became best friends and "
    "played in the park every day after that. The sun was warm and the birds sang happy songs.";

static void test_tier2_posts_decoded_text(void **st)
{
    (void)st;
    eng_model *m = stories();
    eng_tokenizer *tk;
    char err[256];
    assert_int_equal(eng__tokenizer_from_gguf(eng_model_gguf(m), &tk, err, sizeof err), 0);
    int32_t tok[512];
    int n = eng__tokenize(tk, k_story, strlen(k_story), true, false, tok, 512);
    assert_true(n > 100);
    minihttp h;
    assert_int_equal(mh_start(&h), 0);
    triatt_config cfg;
    small_cfg(&cfg, 48);
    snprintf(cfg.endpoint, sizeof cfg.endpoint, "http://127.0.0.1:%d", h.port);
    enum { U = 16 };
    eng_ctx *c = mk_ctx(m, 128, U, 1);
    attach_ok(c, &cfg, "v3-tier2");
    /* ubatch by ubatch, recording each round's evicted positions */
    int32_t prev[128], cur[128];
    int np = 0, n_rounds = 0;
    char *expect[64];
    for (int u = 0; u * U < n; u++) {
        const int nb = LCX_MIN(U, n - u * U);
        assert_int_equal(eng_decode(c, tok + u * U, NULL, nb, false), 0);
        int nc = eng_kv_survivors(c, cur, NULL, 128);
        int32_t ev[128];
        int ne = 0;
        for (int i = 0; i < np; i++)
            if (!has_pos(cur, nc, prev[i])) ev[ne++] = prev[i];
        for (int p = u * U; p < u * U + nb; p++)
            if (!has_pos(cur, nc, p)) ev[ne++] = p;
        if (ne) {
            /* the expected chunks: runs ±32 over the tokens seen so far, decoded from the input */
            triatt_span sp[64];
            int ns0 = triatt_rescue_spans(ev, ne, u * U + nb, 32, sp, 64);
            /* long merged runs are cut into windows (src/triatt/rescue_split.c) */
            triatt_span *cut = NULL;
            int ns = triatt__rescue_split_for_widen(sp, ns0, 32, &cut);
            assert_true(ns >= ns0 && ns <= 64);
            memcpy(sp, cut, (size_t)ns * sizeof *sp);
            free(cut);
            lcx_buf b = {0};
            for (int s = 0; s < ns; s++) {
                char txt[4096];
                int l = eng__detokenize(tk, tok + sp[s].a, sp[s].b - sp[s].a, txt, sizeof txt);
                assert_true(l > 0 && l < (int)sizeof txt);
                lcx__buf_printf(&b, "%d-%d:%s\n", sp[s].a, sp[s].b, txt);
            }
            assert_true(n_rounds < 64);
            expect[n_rounds++] = lcx__buf_steal(&b, NULL);
        }
        memcpy(prev, cur, sizeof(int32_t) * nc);
        np = nc;
    }
    assert_true(n_rounds >= 2);
    assert_int_equal(eng_triatt_flush(c, 10000), 0);
    eng_triatt_stats s;
    eng_triatt_get_stats(c, &s);
    assert_int_equal((int)s.rounds, n_rounds);
    assert_int_equal(s.spans_dropped, 0);
    assert_true(s.spans_sent > 0 && s.spans_sent == s.spans_queued);
    int n_chunks = 0, n_scored = 0;
    pthread_mutex_lock(&h.mu);
    assert_int_equal(h.n, n_rounds);   /* one POST per round */
    for (int r = 0; r < h.n; r++) {
        assert_string_equal(h.paths[r], "/evict/write");
        cJSON *j = cJSON_Parse(h.bodies[r]);
        assert_non_null(j);
        assert_string_equal(cJSON_GetObjectItem(j, "session_id")->valuestring, "v3-tier2");
        lcx_buf b = {0};
        const cJSON *ch;
        cJSON_ArrayForEach(ch, cJSON_GetObjectItem(j, "chunks"))
        {
            /* the round's V3 score of the span's evicted cells (their mean), not a placeholder */
            const cJSON *sc = cJSON_GetObjectItem(ch, "score");
            assert_true(cJSON_IsNumber(sc) && isfinite(sc->valuedouble));
            n_scored += sc->valuedouble != 0;
            n_chunks++;
            const cJSON *tr = cJSON_GetObjectItem(ch, "token_range");
            lcx__buf_printf(&b, "%d-%d:%s\n", cJSON_GetArrayItem(tr, 0)->valueint, cJSON_GetArrayItem(tr, 1)->valueint,
                           cJSON_GetObjectItem(ch, "text")->valuestring);
        }
        char *got = lcx__buf_steal(&b, NULL);
        if (strcmp(got, expect[r])) fail_msg("round %d posted\n%s\nexpected\n%s", r, got, expect[r]);
        free(got);
        cJSON_Delete(j);
    }
    pthread_mutex_unlock(&h.mu);
    assert_true(n_chunks > 0 && n_scored == n_chunks);
    for (int r = 0; r < n_rounds; r++) free(expect[r]);
    mh_stop(&h);
    eng_ctx_free(c);
    eng__tokenizer_free(tk);
    eng_model_free(m);
}

static void tier2_unreachable(bool hang)
{
    eng_model *m = stories();
    minihttp h;
    assert_int_equal(mh_start(&h), 0);
    const int port = h.port;
    if (!hang) mh_stop(&h);   /* nothing listens there any more */
    else h.hang = 1;
    triatt_config cfg;
    small_cfg(&cfg, 48);
    snprintf(cfg.endpoint, sizeof cfg.endpoint, "http://127.0.0.1:%d", port);
    eng_ctx *c = mk_ctx(m, 128, 16, 1);
    attach_ok(c, &cfg, "v3-dead");
    int32_t tok[1200];
    for (int i = 0; i < 1200; i++) tok[i] = 1 + (i * 37) % 500;
    /* prefill and generation both go on */
    assert_int_equal(eng_decode(c, tok, NULL, 600, false), 0);
    for (int i = 600; i < 1200; i++) assert_int_equal(eng_decode(c, tok + i, NULL, 1, false), 0);
    eng_triatt_stats s;
    eng_triatt_get_stats(c, &s);
    assert_true(s.rounds > 20);
    if (!hang) {
        assert_int_equal(eng_triatt_flush(c, 20000), 0);
        eng_triatt_get_stats(c, &s);
        assert_int_equal(s.spans_sent, 0);
        assert_true(s.spans_dropped > 0);
        assert_true(s.rounds_failed > 0);
        /* every queued span failed; on a busy host the sender also falls behind and the
         * full queue refuses whole rounds (dropped without being queued) */
        if (s.rounds_dropped == 0) assert_int_equal(s.spans_dropped, s.spans_queued);
        else assert_true(s.spans_dropped > s.spans_queued);
    } else {
        /* the one in-flight request hangs; the queue (16 rounds) fills and later rounds drop */
        assert_true(s.rounds_dropped > 0);
        assert_true(s.spans_dropped > 0);
    }
    eng_ctx_free(c);   /* must not wait for the hanging request */
    if (hang) mh_stop(&h);
    eng_model_free(m);
}
static void test_tier2_dead_listener(void **st) { (void)st; tier2_unreachable(false); }
static void test_tier2_hanging_listener(void **st) { (void)st; tier2_unreachable(true); }

/* ---- 6. flags and environment ---------------------------------------------------- */
static void test_config_resolve(void **st)
{
    (void)st;
    triatt_config c;
    char err[512];
    unsetenv("VLLM_TRIATT_ENABLED"); unsetenv("VLLM_TRIATT_BUDGET"); unsetenv("TRIATT_MODE"); unsetenv("LONGCTX_ENDPOINT");
    {
        char *av[] = {"run", "-m", "x.gguf", NULL};
        int ac = 3;
        assert_int_equal(eng_triatt_config_resolve(&c, &ac, av, err, sizeof err), 0);
        assert_false(c.enabled);
        assert_int_equal(ac, 3);
    }
    setenv("VLLM_TRIATT_ENABLED", "1", 1);
    setenv("VLLM_TRIATT_BUDGET", "1000", 1);
    setenv("VLLM_TRIATT_WINDOW", "64", 1);
    setenv("TRIATT_MODE", "recency", 1);
    {
        char *av[] = {"-m", "x", "--triatt-budget", "500", "-p", "hi", "--triatt-mode", "random", "--triatt-direction",
                      "evict_high", "--triatt-hybrid", "1", "--triatt-log", "--longctx-endpoint", "http://127.0.0.1:9", NULL};
        int ac = 15;
        assert_int_equal(eng_triatt_config_resolve(&c, &ac, av, err, sizeof err), 0);
        assert_true(c.enabled);
        assert_int_equal(c.budget, 500);           /* flag beats env */
        assert_int_equal(c.window, 64);            /* env beats default */
        assert_int_equal(c.mode, TRIATT_MODE_RANDOM);
        assert_int_equal(c.direction, TRIATT_EVICT_HIGH);
        assert_int_equal(c.version, TRIATT_V2);
        assert_true(c.compression_log);
        assert_string_equal(c.endpoint, "http://127.0.0.1:9");
        assert_int_equal(ac, 4);
        assert_string_equal(av[0], "-m"); assert_string_equal(av[1], "x");
        assert_string_equal(av[2], "-p"); assert_string_equal(av[3], "hi");
        assert_null(av[4]);
    }
    {
        int ac = 0;
        assert_int_equal(eng_triatt_config_resolve(&c, &ac, NULL, err, sizeof err), 0);
        assert_true(c.enabled && c.budget == 1000 && c.mode == TRIATT_MODE_RECENCY);
    }
    static const char *bad[][2] = {{"--triatt-mode", "fancy"}, {"--triatt-hybrid", "3"}, {"--triatt-budget", "12x"},
                                   {"--triatt-budget", "0"}, {"--triatt-direction", "up"}, {"--triatt-window", "-1"},
                                   {"--triatt-nope", "1"}, {"--longctx-endpoint", "ftp://x"}, {"--triatt-budget", NULL}};
    for (size_t i = 0; i < LCX_ARRAY_LEN(bad); i++) {
        char *av[3] = {(char *)bad[i][0], (char *)bad[i][1], NULL};
        int ac = bad[i][1] ? 2 : 1;
        err[0] = 0;
        assert_int_equal(eng_triatt_config_resolve(&c, &ac, av, err, sizeof err), LCX_EINVAL);
        assert_true(strlen(err) > 5);
    }
    setenv("VLLM_TRIATT_BUDGET", "lots", 1);
    {
        int ac = 0;
        assert_int_equal(eng_triatt_config_resolve(&c, &ac, NULL, err, sizeof err), LCX_EINVAL);
        assert_non_null(strstr(err, "VLLM_TRIATT_BUDGET"));
    }
    unsetenv("VLLM_TRIATT_ENABLED"); unsetenv("VLLM_TRIATT_BUDGET"); unsetenv("VLLM_TRIATT_WINDOW"); unsetenv("TRIATT_MODE");
}

int main(void)
{
    g_dir = tu_tmpdir();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_no_round_bit_identical),
        cmocka_unit_test(test_rounds_llama),
        cmocka_unit_test(test_rounds_qwen2),
        cmocka_unit_test(test_rounds_qwen3_partial),
        cmocka_unit_test(test_rounds_v1_random),
        cmocka_unit_test(test_fast_path_matches_full),
        cmocka_unit_test(test_calib_llama),
        cmocka_unit_test(test_calib_qwen3_partial),
        cmocka_unit_test(test_prefill_longer_than_cache),
        cmocka_unit_test(test_tier2_posts_decoded_text),
        cmocka_unit_test(test_tier2_dead_listener),
        cmocka_unit_test(test_tier2_hanging_listener),
        cmocka_unit_test(test_config_resolve),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    tu_rmrf(g_dir);
    free(g_dir);
    return rc;
}
