/* ChatSession: prefix reuse over the logical sequence (also after evictions in the middle),
 * automatic Tier 3 before the user turn against a REAL longctx-svc, the bare path that
 * never rescues, single-turn rescue, and a service killed mid-prefill (generation goes
 * on, the dropped spans are counted). The model is a tiny random-weight qwen2 with the
 * ramp vocabulary (src/eval/ramp_model.c), written to a temp dir. */
#define _GNU_SOURCE
#include "testutil.h"
#include "eval/lcx_eval.h"
#include "longctx/engine.h"
#include "longctx/lcx_sidecar.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static char *g_dir;
static eng_model *g_m;

static int setup(void **st)
{
    (void)st;
    g_dir = tu_tmpdir();
    char path[4200];
    snprintf(path, sizeof path, "%s/tiny.gguf", g_dir);
    lcx_ramp_shape sh;
    if (lcx__ramp_model_shape("tiny", &sh) < 0 || lcx__ramp_write_model(path, &sh, 7) < 0) return -1;
    char err[256];
    return eng_model_load(path, &g_m, err, sizeof err) < 0 ? -1 : 0;
}

static int teardown(void **st)
{
    (void)st;
    eng_model_free(g_m);
    tu_rmrf(g_dir);
    free(g_dir);
    return 0;
}

static lcx_sidecar *start_svc(char *data_dir, size_t n)
{
    snprintf(data_dir, n, "%s/svc-%d", g_dir, tu_free_port());
    lcx_sidecar_opts o = lcx_sidecar_defaults();
    o.binary = tu_bin("longctx-svc");
    o.data_dir = data_dir;
    char log[4300];
    snprintf(log, sizeof log, "%s.log", data_dir);
    o.log_path = log;
    lcx_sidecar *sc = NULL;
    char err[256];
    int rc = lcx_sidecar_spawn(&o, &sc, err, sizeof err);
    if (rc < 0) fail_msg("longctx-svc: %s", err);
    return sc;
}

/* A session with V3 at `budget` (0 = off), warmup/window small so a 2K blob evicts. */
static eng_session *new_session(int budget, const char *endpoint, eng_rescue_mode mode, int n_ctx)
{
    eng_session_params sp = eng_session_default_params();
    sp.ctx.n_ctx = n_ctx;
    sp.ctx.n_ubatch = 64;
    sp.max_tokens = 8;
    sp.rescue = mode;
    triatt_config tc;
    triatt_config_default(&tc);
    if (budget > 0) {
        tc.enabled = true;
        tc.budget = budget;
        tc.warmup = 128;
        tc.window = 64;
        tc.prefix = 16;
        if (endpoint) snprintf(tc.endpoint, sizeof tc.endpoint, "%s", endpoint);
        else tc.endpoint[0] = 0;
        sp.triatt = &tc;
    }
    eng_session *s = NULL;
    char err[256] = "";
    int rc = eng_session_init(g_m, &sp, &s, err, sizeof err);
    if (rc < 0) fail_msg("session: %s", err);
    return s;
}

static int n_tokens_of(const char *text)
{
    /* tokens of a rendered prompt, counted the way the session counts them */
    eng_session *s = new_session(0, NULL, ENG_RESCUE_TWO_TURN, 8192);
    char *out = NULL;
    int rc = eng_session_generate(s, text, 1, &out);
    free(out);
    assert_true(rc >= 0);
    int n;
    eng_session_tokens(s, &n);
    eng_session_free(s);
    return n - rc;   /* minus the generated token (if any) */
}

static void test_second_turn_prefills_only_new(void **st)
{
    (void)st;
    eng_session *s = new_session(0, NULL, ENG_RESCUE_TWO_TURN, 4096);
    eng_session_turn t1, t2;
    char *r1 = NULL, *first = lcx__ramp_blob(10, 0.5, 3);
    assert_true(eng_session_respond(s, first, &r1) >= 0);
    free(first);
    eng_session_last_turn(s, &t1);
    assert_int_equal(t1.n_reused, 0);
    assert_int_equal(t1.n_prefilled, t1.n_prompt);
    int n_after1;
    eng_session_tokens(s, &n_after1);
    assert_int_equal(n_after1, t1.n_prompt + t1.n_generated);
    assert_true(eng_session_respond(s, "What is the access code?", NULL) >= 0);
    eng_session_last_turn(s, &t2);
    /* the whole first turn (prompt, and the reply as far as it re-tokenizes the same) is
     * reused; only the new tail is prefilled */
    assert_true(t2.n_reused >= t1.n_prompt);
    assert_int_equal(t2.n_prefilled, t2.n_prompt - t2.n_reused);
    const int new_part = n_tokens_of("<|im_start|>user\nWhat is the access code?<|im_end|>\n<|im_start|>assistant\n");
    assert_true(t2.n_prefilled <= new_part + t1.n_generated + 4);
    assert_true(t2.n_prefilled < t2.n_prompt / 4);
    /* the cache holds every logical position exactly once */
    int n;
    eng_session_tokens(s, &n);
    eng_ctx *c = eng_session_ctx(s);
    assert_int_equal(eng_kv_n_used(c), n);
    assert_int_equal(eng_kv_max_pos(c), n - 1);
    free(r1);
    eng_session_free(s);
}

static char *blob_msg(int n_fill, double depth, const char *tail)
{
    char *b = lcx__ramp_blob(n_fill, depth, 1);
    assert_non_null(b);
    char *m = NULL;
    assert_true(asprintf(&m, "%s\n\n%s", b, tail) > 0);
    free(b);
    return m;
}

/* After rounds evicted cells from the middle, the next turn still prefills only its new
 * tokens and its positions continue from the logical length, not from the cell count. */
static void test_prefix_reuse_after_eviction(void **st)
{
    (void)st;
    eng_session *s = new_session(700, NULL, ENG_RESCUE_TWO_TURN, 1200);
    char *m = blob_msg(60, 0.5, LCX_RAMP_TURN1_ASK);
    assert_true(eng_session_respond(s, m, NULL) >= 0);
    free(m);
    eng_triatt_stats st3;
    assert_int_equal(eng_triatt_get_stats(eng_session_ctx(s), &st3), 0);
    assert_true(st3.rounds > 0);
    int n1;
    eng_session_tokens(s, &n1);
    assert_true(eng_kv_n_used(eng_session_ctx(s)) < n1);   /* cells are gone */
    assert_true(eng_session_respond(s, "Is it done?", NULL) >= 0);
    eng_session_turn t2;
    eng_session_last_turn(s, &t2);
    assert_true(t2.n_reused >= n1 - 8);
    assert_true(t2.n_prefilled < 40);
    int n2;
    eng_session_tokens(s, &n2);
    assert_int_equal(eng_kv_max_pos(eng_session_ctx(s)), n2 - 1);
    eng_session_free(s);
}

/* Two-turn Tier 3 with a real service: the rescue system message comes right before the
 * user turn; the bare path with the same question does not rescue. */
static void test_auto_tier3_and_bare_path(void **st)
{
    (void)st;
    char data[4200];
    lcx_sidecar *sc = start_svc(data, sizeof data);
    eng_session *s = new_session(700, lcx_sidecar_url(sc), ENG_RESCUE_TWO_TURN, 1200);
    char *m = blob_msg(80, 0.5, LCX_RAMP_TURN1_ASK);
    assert_true(eng_session_respond(s, m, NULL) >= 0);
    free(m);
    eng_session_turn t;
    eng_session_last_turn(s, &t);
    assert_true(t.prepopulated > 0);
    assert_null(eng_session_last_rescue(s));        /* nothing stored before turn 1 */

    /* bare path first: the question as raw text never reaches /evict/retrieve */
    triatt_rescue_stats rs0, rs1;
    triatt_rescue_get_stats(eng_triatt_rescue(eng_session_ctx(s)), &rs0);
    eng_session_stats ss0, ss1;
    eng_session_get_stats(s, &ss0);
    eng_session *bare = s;
    char *out = NULL;
    assert_true(eng_session_generate(bare, "<|im_start|>user\n" LCX_RAMP_QUESTION "<|im_end|>\n<|im_start|>assistant\n", 4,
                                     &out) >= 0);
    free(out);
    eng_session_last_turn(s, &t);
    assert_false(t.rescue_ran);
    assert_null(eng_session_last_rescue(s));
    triatt_rescue_get_stats(eng_triatt_rescue(eng_session_ctx(s)), &rs1);
    assert_int_equal(rs1.retrieve_ok + rs1.retrieve_failed, rs0.retrieve_ok + rs0.retrieve_failed);
    eng_session_get_stats(s, &ss1);
    assert_int_equal(ss1.rescues_run, ss0.rescues_run);
    /* the one manual call does rescue */
    char *txt = NULL;
    assert_true(eng_session_rehydrate(s, LCX_RAMP_QUESTION, &txt) > 0);
    assert_non_null(txt);
    assert_non_null(strstr(txt, "Project NOVA"));
    free(txt);

    /* respond: Tier 3 runs first and the rescue system message sits just before the user turn */
    assert_true(eng_session_respond(s, LCX_RAMP_QUESTION, NULL) >= 0);
    eng_session_last_turn(s, &t);
    assert_true(t.rescue_ran);
    assert_true(t.rescue_chunks > 0);
    const char *p = eng_session_last_prompt(s), *r = eng_session_last_rescue(s);
    assert_non_null(r);
    char *want = NULL;
    assert_true(asprintf(&want, "<|im_start|>system\n%s<|im_end|>\n<|im_start|>user\n" LCX_RAMP_QUESTION "<|im_end|>\n"
                                "<|im_start|>assistant\n", r) > 0);
    const size_t pl = strlen(p), wl = strlen(want);
    assert_true(pl > wl);
    assert_string_equal(p + pl - wl, want);      /* ... system(rescue), user(question), assistant */
    free(want);
    assert_int_equal(eng_session_fact_recall(s, LCX_RAMP_FACT), 1);
    eng_session_free(s);
    lcx_sidecar_stop(sc, 5000);
}

/* Single-turn: one long message ending with a question is split, and the rescue message
 * is inserted between the body and the question within the same turn. */
static void test_single_turn_split(void **st)
{
    (void)st;
    char data[4200];
    lcx_sidecar *sc = start_svc(data, sizeof data);
    eng_session *s = new_session(700, lcx_sidecar_url(sc), ENG_RESCUE_SINGLE_TURN, 1200);
    char *m = blob_msg(80, 0.1, LCX_RAMP_QUESTION);
    assert_true(eng_session_respond(s, m, NULL) >= 0);
    eng_session_turn t;
    eng_session_last_turn(s, &t);
    assert_true(t.single_turn);
    assert_true(t.rescue_ran);
    assert_true(t.rescue_chunks > 0);
    const char *p = eng_session_last_prompt(s);
    const char *sys = strstr(p, "<|im_start|>system\n[Recovered context");
    const char *q = strstr(p, "<|im_start|>user\n" LCX_RAMP_QUESTION);
    const char *body = strstr(p, "<|im_start|>user\n");
    assert_non_null(sys);
    assert_non_null(q);
    assert_true(body < sys && sys < q);
    assert_int_equal(eng_session_fact_recall(s, LCX_RAMP_FACT), 1);
    free(m);
    eng_session_free(s);
    /* the same message with the two-turn setting is not split */
    s = new_session(700, lcx_sidecar_url(sc), ENG_RESCUE_TWO_TURN, 1200);
    m = blob_msg(80, 0.1, LCX_RAMP_QUESTION);
    assert_true(eng_session_respond(s, m, NULL) >= 0);
    eng_session_last_turn(s, &t);
    assert_false(t.single_turn);
    free(m);
    eng_session_free(s);
    lcx_sidecar_stop(sc, 5000);
}

typedef struct { pid_t pid; bool killed; } killer;
static void kill_mid(void *ud, int done, int total)
{
    killer *k = ud;
    if (!k->killed && done >= total / 4) {
        kill(k->pid, SIGKILL);
        k->killed = true;
    }
}

static void test_service_killed_mid_prefill(void **st)
{
    (void)st;
    char data[4200];
    lcx_sidecar *sc = start_svc(data, sizeof data);
    killer k = {lcx_sidecar_pid(sc), false};
    eng_session_params sp = eng_session_default_params();
    sp.ctx.n_ctx = 1200;
    sp.ctx.n_ubatch = 64;
    sp.max_tokens = 8;
    sp.rescue = ENG_RESCUE_TWO_TURN;
    sp.on_prefill = kill_mid;
    sp.on_prefill_ud = &k;
    triatt_config tc;
    triatt_config_default(&tc);
    tc.enabled = true;
    tc.budget = 700;
    tc.warmup = 128;
    tc.window = 64;
    tc.prefix = 16;
    snprintf(tc.endpoint, sizeof tc.endpoint, "%s", lcx_sidecar_url(sc));
    sp.triatt = &tc;
    eng_session *s = NULL;
    char err[256];
    assert_int_equal(eng_session_init(g_m, &sp, &s, err, sizeof err), 0);
    char *m = blob_msg(80, 0.5, LCX_RAMP_TURN1_ASK);
    int ng = eng_session_respond(s, m, NULL);
    free(m);
    assert_true(k.killed);
    assert_true(ng > 0);                       /* generation ran */
    assert_true(eng_session_respond(s, LCX_RAMP_QUESTION, NULL) > 0);
    eng_session_turn t;
    eng_session_last_turn(s, &t);
    assert_true(t.rescue_ran && t.rescue_rc < 0);   /* Tier 3 failed, the turn did not */
    eng_triatt_stats st3;
    assert_int_equal(eng_triatt_get_stats(eng_session_ctx(s), &st3), 0);
    assert_true(st3.rounds > 0);
    assert_true(st3.spans_dropped + st3.rounds_dropped > 0);
    eng_session_stats ss;
    eng_session_get_stats(s, &ss);
    assert_true(ss.rescues_failed >= 1);
    eng_session_free(s);
    lcx_sidecar_stop(sc, 2000);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_second_turn_prefills_only_new),
        cmocka_unit_test(test_prefix_reuse_after_eviction),
        cmocka_unit_test(test_auto_tier3_and_bare_path),
        cmocka_unit_test(test_single_turn_split),
        cmocka_unit_test(test_service_killed_mid_prefill),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
