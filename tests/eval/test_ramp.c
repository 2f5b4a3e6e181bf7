/* The rescue ramp against a REAL longctx-svc (started here through lcx_sidecar) with a tiny
 * random-weight model: V3 alone loses the planted fact from the cache, V3 + longctx keeps
 * it — cache-level recall 100 % over 10 seeds × 3 depths, for two-turn and single-turn
 * rescue. Plus the blob's shape (SPEC §6 texts, fact at its depth) and the JSON/SVG
 * outputs. */
#define _GNU_SOURCE
#include "testutil.h"
#include "eval/lcx_eval.h"
#include "longctx/lcx_sidecar.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *g_dir, g_model[4200];

static int setup(void **st)
{
    (void)st;
    g_dir = tu_tmpdir();
    snprintf(g_model, sizeof g_model, "%s/tiny.gguf", g_dir);
    lcx_ramp_shape sh;
    return lcx__ramp_model_shape("tiny", &sh) < 0 || lcx__ramp_write_model(g_model, &sh, 3) < 0 ? -1 : 0;
}

static int teardown(void **st)
{
    (void)st;
    tu_rmrf(g_dir);
    free(g_dir);
    return 0;
}

static void test_blob(void **st)
{
    (void)st;
    char *b = lcx__ramp_blob(100, 0.5, 1);
    assert_non_null(b);
    const char *f = strstr(b, LCX_RAMP_FACT);
    assert_non_null(f);
    assert_null(strstr(f + 1, LCX_RAMP_FACT));     /* planted once */
    /* 48..52 filler sentences before it (depth 0.5 ± 2) */
    int before = 0;
    for (const char *p = strstr(b, LCX_RAMP_FILLER); p && p < f; p = strstr(p + 1, LCX_RAMP_FILLER)) before++;
    assert_in_range(before, 48, 52);
    int total = 0;
    for (const char *p = strstr(b, LCX_RAMP_FILLER); p; p = strstr(p + 1, LCX_RAMP_FILLER)) total++;
    assert_int_equal(total, 100);
    free(b);
    b = lcx__ramp_blob(100, 0.0, 1);
    assert_true(strncmp(b, LCX_RAMP_FACT, 10) == 0 || strstr(b, LCX_RAMP_FACT) - b < 3 * (long)strlen(LCX_RAMP_FILLER));
    free(b);
}

/* prepopulate off: only the Tier-2 spans of evicted cells can bring the fact back */
static void run_ramp(int rescue)
{
    char data[4200], log[4300];
    snprintf(data, sizeof data, "%s/svc-%d", g_dir, rescue);
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
    o.arms[LCX_RAMP_BASELINE] = false;
    o.n_seeds = 10;
    o.rescue = rescue;
    o.endpoint = lcx_sidecar_url(sc);
    o.n_ubatch = 128;
    o.max_gen = 4;
    o.prepopulate = false;
    lcx_ramp_cell *c = NULL;
    int n = 0;
    int rc = lcx__ramp_run(&o, &c, &n, err, sizeof err);
    if (rc < 0) fail_msg("ramp: %s", err);
    assert_int_equal(n, 2 * 3 * 10);
    int kept[LCX_RAMP_NARMS] = {0}, cells[LCX_RAMP_NARMS] = {0};
    for (int i = 0; i < n; i++) {
        assert_int_equal(c[i].rescue, rescue);
        assert_true(c[i].rounds > 0);
        assert_true(c[i].evicted_pct > 0);
        cells[c[i].arm]++;
        kept[c[i].arm] += c[i].cache_recall;
        if (c[i].arm == LCX_RAMP_V3_LONGCTX && !c[i].cache_recall)
            print_message("v3+longctx lost the fact: depth %.1f seed %d\n", c[i].depth, c[i].seed);
    }
    print_message("%s: v3 kept %d/%d, v3+longctx kept %d/%d\n", lcx__ramp_rescue_name(rescue), kept[LCX_RAMP_V3],
                  cells[LCX_RAMP_V3], kept[LCX_RAMP_V3_LONGCTX], cells[LCX_RAMP_V3_LONGCTX]);
    /* V3 alone evicts ~10 % of the blob: a 25-token fact rarely survives whole */
    assert_true(kept[LCX_RAMP_V3] <= cells[LCX_RAMP_V3] / 5);
    assert_int_equal(kept[LCX_RAMP_V3_LONGCTX], cells[LCX_RAMP_V3_LONGCTX]);

    /* JSON: the shape */
    char *j = lcx__ramp_json("tiny.gguf", c, n);
    cJSON *d = cJSON_Parse(j);
    assert_non_null(d);
    assert_string_equal(cJSON_GetObjectItem(d, "model")->valuestring, "tiny.gguf");
    const cJSON *arr = cJSON_GetObjectItem(d, "cells");
    assert_int_equal(cJSON_GetArraySize(arr), n);
    static const char *const keys[] = {"size", "arm", "rescue", "depth", "seed", "t1_s", "t2_s", "evicted_pct",
                                       "rounds", "answer", "cache_recall", "total_s"};
    const cJSON *e0 = cJSON_GetArrayItem(arr, 0);
    for (size_t k = 0; k < sizeof keys / sizeof *keys; k++) assert_non_null(cJSON_GetObjectItem(e0, keys[k]));
    assert_int_equal(cJSON_GetArraySize(e0), (int)(sizeof keys / sizeof *keys));
    assert_string_equal(cJSON_GetObjectItem(e0, "rescue")->valuestring, lcx__ramp_rescue_name(rescue));
    cJSON_Delete(d);
    free(j);
    char *svg = lcx__ramp_svg("tiny.gguf", c, n);
    assert_non_null(svg);
    assert_non_null(strstr(svg, "<svg"));
    assert_non_null(strstr(svg, "v3+longctx"));
    free(svg);
    free(c);
    lcx_sidecar_stop(sc, 5000);
}

static void test_ramp_two_turn(void **st) { (void)st; run_ramp(LCX_RAMP_TWO_TURN); }
static void test_ramp_single_turn(void **st) { (void)st; run_ramp(LCX_RAMP_SINGLE_TURN); }

static void test_refusals(void **st)
{
    (void)st;
    lcx_ramp_opts o;
    lcx__ramp_defaults(&o);
    o.model_path = g_model;
    o.sizes[0] = 4096;
    o.n_sizes = 1;
    lcx_ramp_cell *c = NULL;
    int n = 0;
    char err[256];
    assert_int_equal(lcx__ramp_run(&o, &c, &n, err, sizeof err), LCX_EINVAL);   /* v3+longctx without endpoint */
    assert_non_null(strstr(err, "endpoint"));
    o.arms[LCX_RAMP_V3_LONGCTX] = false;
    o.sizes[0] = 300;
    assert_int_equal(lcx__ramp_run(&o, &c, &n, err, sizeof err), LCX_EINVAL);   /* too small for V3 */
    assert_non_null(strstr(err, "too small"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_blob),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_ramp_two_turn),
        cmocka_unit_test(test_ramp_single_turn),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
