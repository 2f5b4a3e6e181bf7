/* A short rescue-ramp cell with the trained needle model (models/needle/needle.gguf) and a
 * REAL longctx-svc started here through lcx_sidecar: 2K tokens, budget half the prompt so V3
 * runs several eviction rounds. Where the planted fact was evicted from the KV cache and came
 * back in the rescue message, v3+longctx must ANSWER it (greedy, strict NIAH grade), and the
 * baseline (no eviction) must answer too. Skips while the trained weights are not in the tree. */
#define _GNU_SOURCE
#include "testutil.h"
#include "eval/lcx_eval.h"
#include "longctx/lcx_sidecar.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char g_model[4200];

static void run_cell(int rescue)
{
    const char *src = getenv("LCX_SRC") ? getenv("LCX_SRC") : ".";
    snprintf(g_model, sizeof g_model, "%s/models/needle/needle.gguf", src);
    if (access(g_model, R_OK) != 0) skip();
    char *dir = tu_tmpdir();
    char data[4200], log[4300];
    snprintf(data, sizeof data, "%s/svc", dir);
    snprintf(log, sizeof log, "%s.log", data);
    lcx_sidecar_opts so = lcx_sidecar_defaults();
    so.binary = tu_bin("longctx-svc");
    so.data_dir = data;
    so.log_path = log;
    lcx_sidecar *sc = NULL;
    char err[512] = "";
    if (lcx_sidecar_spawn(&so, &sc, err, sizeof err) < 0) fail_msg("longctx-svc: %s", err);
    lcx_ramp_opts o;
    lcx__ramp_defaults(&o);
    o.model_path = g_model;
    o.sizes[0] = 2048;
    o.n_sizes = 1;
    o.arms[LCX_RAMP_V3] = false;
    o.n_seeds = 1;
    o.rescue = rescue;
    o.budget_frac = 0.5;     /* ~half the blob evicted, in several rounds */
    o.n_ubatch = 128;
    o.max_gen = 10;
    o.prepopulate = false;   /* only Tier-2 spans of evicted cells can bring the fact back */
    o.endpoint = lcx_sidecar_url(sc);
    lcx_ramp_cell *c = NULL;
    int n = 0;
    if (lcx__ramp_run(&o, &c, &n, err, sizeof err) < 0) fail_msg("ramp: %s", err);
    assert_int_equal(n, 2 * 3);   /* baseline and v3+longctx x 3 depths */
    int rescued = 0;
    for (int i = 0; i < n; i++) {
        print_message("%s %s depth %.1f: rounds %d, evicted %.1f%%, fact in cache %d, in rescue %d, answer %s\n",
                      lcx__ramp_arm_name(c[i].arm), lcx__ramp_rescue_name(rescue), c[i].depth, c[i].rounds,
                      c[i].evicted_pct, c[i].fact_in_cache, c[i].fact_in_rescue, lcx__niah_grade_name(c[i].answer));
        if (c[i].arm == LCX_RAMP_BASELINE) {
            assert_int_equal(c[i].answer, LCX_NIAH_PASS);   /* the model reads the fact at 2K */
            continue;
        }
        assert_true(c[i].rounds >= 3);
        if (!c[i].fact_in_cache && c[i].fact_in_rescue) {
            rescued++;
            assert_int_equal(c[i].answer, LCX_NIAH_PASS);
        }
    }
    assert_true(rescued >= 1);   /* the case under test happened at least once */
    free(c);
    lcx_sidecar_stop(sc, 5000);
    tu_rmrf(dir);
    free(dir);
}

/* single-turn rescue only: two-turn rescue misses with this model at 2K (measured in
 * models/needle/README.md), so a test of it would fail for the model's sake */
static void test_rescue_single_turn(void **st) { (void)st; run_cell(LCX_RAMP_SINGLE_TURN); }

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test(test_rescue_single_turn),
    };
    return cmocka_run_group_tests(t, NULL, NULL);
}
