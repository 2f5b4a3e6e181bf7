/* A short rescue ramp with the trained needle model (models/needle/needle.gguf) and a REAL
 * longctx-svc started here through lcx_sidecar: 2K tokens, 5 seeds x 3 depths, budget half
 * the prompt so V3 runs several eviction rounds and the fact leaves the KV cache. The baseline
 * (no eviction) must answer every cell; v3+longctx must answer at least half the cells whose
 * fact came back only in the rescue message, and clearly more cells than V3 alone (greedy,
 * strict NIAH grade). Rates, not every cell: the model reads the rescue message in about 3 of 4 such
 * cells at this harsh budget (10 seeds: 18/24; models/needle/README.md), so a per-cell
 * assertion would test which seeds were picked. Skips while the weights are not in the tree. */
#define _GNU_SOURCE
#include "testutil.h"
#include "eval/lcx_eval.h"
#include "longctx/lcx_sidecar.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { N_SEEDS = 5 };
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
    o.n_seeds = N_SEEDS;
    o.rescue = rescue;
    o.budget_frac = 0.5;     /* ~half the blob evicted, in several rounds */
    o.n_ubatch = 128;
    o.max_gen = 10;
    o.prepopulate = false;   /* only Tier-2 spans of evicted cells can bring the fact back */
    o.endpoint = lcx_sidecar_url(sc);
    lcx_ramp_cell *c = NULL;
    int n = 0;
    if (lcx__ramp_run(&o, &c, &n, err, sizeof err) < 0) fail_msg("ramp: %s", err);
    assert_int_equal(n, 3 * 3 * N_SEEDS);   /* baseline, v3, v3+longctx x 3 depths x seeds */
    int rescued = 0, rescued_pass = 0, pass[LCX_RAMP_NARMS] = {0};
    for (int i = 0; i < n; i++) {
        print_message("%s %s depth %.1f: rounds %d, evicted %.1f%%, fact in cache %d, in rescue %d, answer %s\n",
                      lcx__ramp_arm_name(c[i].arm), lcx__ramp_rescue_name(rescue), c[i].depth, c[i].rounds,
                      c[i].evicted_pct, c[i].fact_in_cache, c[i].fact_in_rescue, lcx__niah_grade_name(c[i].answer));
        pass[c[i].arm] += c[i].answer == LCX_NIAH_PASS;
        if (c[i].arm == LCX_RAMP_BASELINE) {
            assert_int_equal(c[i].answer, LCX_NIAH_PASS);   /* the model reads the fact at 2K */
            continue;
        }
        assert_true(c[i].rounds >= 3);
        if (c[i].arm == LCX_RAMP_V3_LONGCTX && !c[i].fact_in_cache && c[i].fact_in_rescue) {
            rescued++;
            rescued_pass += c[i].answer == LCX_NIAH_PASS;
        }
    }
    print_message("answers: baseline %d, v3 %d, v3+longctx %d of %d; rescued %d, answered %d\n",
                  pass[LCX_RAMP_BASELINE], pass[LCX_RAMP_V3], pass[LCX_RAMP_V3_LONGCTX], 3 * N_SEEDS,
                  rescued, rescued_pass);
    /* measured with the committed model: v3 2/15, v3+longctx 11/15, rescued 12, answered 9 */
    assert_true(rescued >= 3);                       /* the case under test happened */
    assert_true(2 * rescued_pass >= rescued);        /* at least half the rescued facts answered */
    assert_true(pass[LCX_RAMP_V3_LONGCTX] >= pass[LCX_RAMP_V3] + 5);   /* rescue is what answers */
    free(c);
    lcx_sidecar_stop(sc, 5000);
    tu_rmrf(dir);
    free(dir);
}

/* single-turn rescue (two-turn reads the same rescue message after an extra turn; the ramp
 * measures both) */
static void test_rescue_single_turn(void **st) { (void)st; run_cell(LCX_RAMP_SINGLE_TURN); }

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test(test_rescue_single_turn),
    };
    return cmocka_run_group_tests(t, NULL, NULL);
}
