/* The rescue ramp against a REAL longctx-svc (started here through lcx_sidecar) with a tiny
 * random-weight model: V3 alone loses the planted fact from the cache, V3 + longctx keeps
 * it — cache-level recall 100 % over 10 seeds × 3 depths, for two-turn and single-turn
 * rescue. Plus the blob's shape (SPEC §6 texts, fact at its depth), the JSON/SVG
 * outputs, and the policy lists (--direction, --mode): every V3 cell once per
 * configuration, the baseline once, and each configuration reaching the eviction. Shards
 * (`longctx eval ramp --jobs`): they partition the plan, and the CLI's parallel run gives the
 * serial run's cells. */
#define _GNU_SOURCE
#include "testutil.h"
#include "eval/lcx_eval.h"
#include "util/util.h"
#include "longctx/lcx_sidecar.h"
#include "longctx/triatt.h"

#include <cjson/cJSON.h>
#include <math.h>
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
    /* 400 sentences: ±10, and 21 consecutive seeds give 21 distinct offsets */
    bool seen[21] = {false};
    for (int seed = 7; seed < 7 + 21; seed++) {
        b = lcx__ramp_blob(400, 0.5, seed);
        f = strstr(b, LCX_RAMP_FACT);
        before = 0;
        for (const char *p = strstr(b, LCX_RAMP_FILLER); p && p < f; p = strstr(p + 1, LCX_RAMP_FILLER)) before++;
        assert_in_range(before, 190, 210);
        assert_false(seen[before - 190]);
        seen[before - 190] = true;
        free(b);
    }
    b = lcx__ramp_blob(100, 0.0, 1);
    assert_true(strncmp(b, LCX_RAMP_FACT, 10) == 0 || strstr(b, LCX_RAMP_FACT) - b < 3 * (long)strlen(LCX_RAMP_FILLER));
    free(b);
}

/* A real longctx-svc with its data under g_dir/NAME. */
static lcx_sidecar *spawn_svc(const char *name)
{
    char data[4200], log[4300], err[512] = "";
    snprintf(data, sizeof data, "%s/%s", g_dir, name);
    snprintf(log, sizeof log, "%s.log", data);
    lcx_sidecar_opts so = lcx_sidecar_defaults();
    so.binary = tu_bin("longctx-svc");
    so.data_dir = data;
    so.log_path = log;
    lcx_sidecar *sc = NULL;
    if (lcx_sidecar_spawn(&so, &sc, err, sizeof err) < 0) fail_msg("longctx-svc: %s", err);
    return sc;
}

/* prepopulate off: only the Tier-2 spans of evicted cells can bring the fact back */
static void run_ramp(int rescue)
{
    lcx_sidecar *sc = spawn_svc(rescue == LCX_RAMP_TWO_TURN ? "svc-two" : "svc-single");
    char err[512] = "";
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
    static const char *const keys[] = {"size", "arm", "rescue", "direction", "mode", "depth", "seed", "t1_s", "t2_s",
                                       "evicted_pct", "rounds", "answer", "cache_recall", "total_s",
                                       /* beyond the shape: where the fact was found */
                                       "in_cache", "in_rescue", "rescue_chunks", "spans_sent", "spans_dropped",
                                       "n_tokens", "reply"};
    const cJSON *e0 = cJSON_GetArrayItem(arr, 0);
    for (size_t k = 0; k < sizeof keys / sizeof *keys; k++) assert_non_null(cJSON_GetObjectItem(e0, keys[k]));
    assert_int_equal(cJSON_GetArraySize(e0), (int)(sizeof keys / sizeof *keys));
    assert_string_equal(cJSON_GetObjectItem(e0, "rescue")->valuestring, lcx__ramp_rescue_name(rescue));
    assert_string_equal(cJSON_GetObjectItem(e0, "direction")->valuestring, "keep_high");
    assert_string_equal(cJSON_GetObjectItem(e0, "mode")->valuestring, "trig");
    cJSON_Delete(d);
    /* and back: --replay reads what --json wrote */
    lcx_ramp_cell *back = NULL;
    int nb = 0;
    char *mname = NULL;
    assert_int_equal(lcx__ramp_json_read(j, &back, &nb, &mname), 0);
    assert_int_equal(nb, n);
    assert_string_equal(mname, "tiny.gguf");
    for (int i = 0; i < n; i++) {
        assert_int_equal(back[i].arm, c[i].arm);
        assert_int_equal(back[i].rescue, c[i].rescue);
        assert_int_equal(back[i].direction, c[i].direction);
        assert_int_equal(back[i].seed, c[i].seed);
        assert_int_equal(back[i].cache_recall, c[i].cache_recall);
        assert_int_equal(back[i].answer, c[i].answer);
        assert_string_equal(back[i].reply, c[i].reply);
        assert_int_equal(back[i].rounds, c[i].rounds);
        assert_int_equal(back[i].fact_in_cache, c[i].fact_in_cache);
        assert_int_equal(back[i].fact_in_rescue, c[i].fact_in_rescue);
        assert_int_equal(back[i].rescue_chunks, c[i].rescue_chunks);
        assert_true(back[i].spans_sent == c[i].spans_sent);
        assert_int_equal(back[i].n_tokens, c[i].n_tokens);
    }
    free(back);
    free(mname);
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

/* --direction keep_high,evict_high --mode trig,recency: 4 V3 configurations per (depth,
 * seed), the baseline once. Trig keeps different cells for the two directions; the recency
 * control ignores the direction (libtriatt) but keeps other cells than trig. */
static void test_policy_lists(void **st)
{
    (void)st;
    lcx_ramp_opts o;
    lcx__ramp_defaults(&o);
    o.model_path = g_model;
    o.sizes[0] = 2048;
    o.n_sizes = 1;
    o.arms[LCX_RAMP_V3_LONGCTX] = false;
    o.depths[0] = 0.3;
    o.depths[1] = 0.7;
    o.n_depths = 2;
    o.n_seeds = 2;
    o.first_seed = 5;
    o.budget_frac = 0.8;
    o.n_ubatch = 128;
    o.max_gen = 4;
    o.directions[0] = TRIATT_KEEP_HIGH;
    o.directions[1] = TRIATT_EVICT_HIGH;
    o.n_directions = 2;
    o.modes[0] = TRIATT_MODE_TRIG;
    o.modes[1] = TRIATT_MODE_RECENCY;
    o.n_modes = 2;
    lcx_ramp_cell *c = NULL;
    int n = 0;
    char err[512] = "";
    if (lcx__ramp_run(&o, &c, &n, err, sizeof err) < 0) fail_msg("ramp: %s", err);
    assert_int_equal(n, 4 + 4 * 4);
    int nbase = 0, per[2][3] = {{0}};
    for (int i = 0; i < n; i++) {
        assert_in_range(c[i].seed, 5, 6);
        if (c[i].arm == LCX_RAMP_BASELINE) { nbase++; assert_int_equal(c[i].rounds, 0); continue; }
        assert_true(c[i].rounds > 0);
        per[c[i].direction][c[i].mode]++;
    }
    assert_int_equal(nbase, 4);
    assert_int_equal(per[TRIATT_KEEP_HIGH][TRIATT_MODE_TRIG], 4);
    assert_int_equal(per[TRIATT_EVICT_HIGH][TRIATT_MODE_TRIG], 4);
    assert_int_equal(per[TRIATT_KEEP_HIGH][TRIATT_MODE_RECENCY], 4);
    assert_int_equal(per[TRIATT_EVICT_HIGH][TRIATT_MODE_RECENCY], 4);
    /* the same (depth, seed) under each configuration */
    for (int i = 0; i < n; i++) {
        if (c[i].arm != LCX_RAMP_V3 || c[i].direction != TRIATT_KEEP_HIGH || c[i].mode != TRIATT_MODE_TRIG) continue;
        const lcx_ramp_cell *eh = NULL, *rk = NULL, *re = NULL;
        for (int k = 0; k < n; k++) {
            if (c[k].arm != LCX_RAMP_V3 || c[k].seed != c[i].seed || c[k].depth != c[i].depth) continue;
            if (c[k].mode == TRIATT_MODE_TRIG && c[k].direction == TRIATT_EVICT_HIGH) eh = &c[k];
            if (c[k].mode == TRIATT_MODE_RECENCY && c[k].direction == TRIATT_KEEP_HIGH) rk = &c[k];
            if (c[k].mode == TRIATT_MODE_RECENCY && c[k].direction == TRIATT_EVICT_HIGH) re = &c[k];
        }
        assert_non_null(eh); assert_non_null(rk); assert_non_null(re);
        assert_true(c[i].kept_sig != eh->kept_sig);     /* the direction reached the eviction */
        assert_true(c[i].kept_sig != rk->kept_sig);     /* so did the mode */
        assert_true(rk->kept_sig == re->kept_sig);      /* recency: direction-free */
    }
    /* table and chart: one row / series per configuration */
    char *svg = lcx__ramp_svg("tiny.gguf", c, n);
    assert_non_null(svg);
    assert_non_null(strstr(svg, "evict_high"));
    assert_non_null(strstr(svg, "recency"));
    assert_non_null(strstr(svg, "stroke-dasharray"));  /* evict_high lines are dashed */
    free(svg);
    char *j = lcx__ramp_json("tiny.gguf", c, n);
    cJSON *d = cJSON_Parse(j);
    const cJSON *e0 = cJSON_GetArrayItem(cJSON_GetObjectItem(d, "cells"), 0);
    assert_string_equal(cJSON_GetObjectItem(e0, "arm")->valuestring, "baseline");
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(e0, "direction")));   /* the baseline evicts nothing */
    cJSON_Delete(d);
    free(j);
    free(c);
}

/* A reply longer than the cell keeps is cut before a character, never inside one. */
static void test_reply_cut(void **st)
{
    (void)st;
    char json[1024] = "{\"model\":\"m\",\"cells\":[{\"size\":2048,\"arm\":\"v3\",\"rescue\":\"single-turn\","
                      "\"answer\":\"FAIL\",\"reply\":\"";
    for (int i = 0; i < 100; i++) strcat(json, "\xc3\xa9");   /* 100 x U+00E9: 200 bytes */
    strcat(json, "\"}]}");
    lcx_ramp_cell *c = NULL;
    int n = 0;
    assert_int_equal(lcx__ramp_json_read(json, &c, &n, NULL), 0);
    assert_int_equal(n, 1);
    assert_int_equal(strlen(c[0].reply), 126);   /* 63 whole characters of 127 bytes */
    assert_true(lcx__utf8_valid(c[0].reply, strlen(c[0].reply)));
    char *j = lcx__ramp_json("m", c, n);
    assert_non_null(strstr(j, "\"reply\":\"\xc3\xa9"));
    free(j);
    free(c);
}

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
    o.sizes[0] = 4096;
    o.n_directions = 1;
    o.directions[0] = 7;
    assert_int_equal(lcx__ramp_run(&o, &c, &n, err, sizeof err), LCX_EINVAL);   /* no such direction */
}

/* The fields a cell's outcome is made of (not its timings, nor spans_sent: the bridge's
 * acknowledgements by the time the cell ends); evicted_pct as JSON carries it (2 decimals). */
static void assert_same_cell(const lcx_ramp_cell *a, const lcx_ramp_cell *b)
{
    assert_int_equal(a->size, b->size);
    assert_int_equal(a->arm, b->arm);
    assert_int_equal(a->rescue, b->rescue);
    assert_true(a->depth == b->depth);
    assert_int_equal(a->seed, b->seed);
    assert_int_equal(a->answer, b->answer);
    assert_int_equal(a->cache_recall, b->cache_recall);
    assert_int_equal(a->fact_in_cache, b->fact_in_cache);
    assert_int_equal(a->fact_in_rescue, b->fact_in_rescue);
    assert_int_equal(a->rounds, b->rounds);
    assert_int_equal(a->n_tokens, b->n_tokens);
    assert_true(fabs(a->evicted_pct - b->evicted_pct) < 0.006);
    assert_string_equal(a->reply, b->reply);
}

static void small_plan(lcx_ramp_opts *o)
{
    lcx__ramp_defaults(o);
    o->model_path = g_model;
    o->sizes[0] = 2048;
    o->n_sizes = 1;
    o->n_seeds = 2;
    o->rescues[0] = LCX_RAMP_SINGLE_TURN;
    o->rescues[1] = LCX_RAMP_TWO_TURN;
    o->n_rescues = 2;
    o->n_ubatch = 128;
    o->max_gen = 4;
    o->prepopulate = false;
}

static void test_jobs(void **st)
{
    (void)st;
    char cells_out[4200], cmd[16384], err[512] = "";
    snprintf(cells_out, sizeof cells_out, "%s/jobs.jsonl", g_dir);
    lcx_sidecar *sc = spawn_svc("svc-jobs");
    lcx_ramp_opts o;
    small_plan(&o);
    o.endpoint = lcx_sidecar_url(sc);
    lcx_ramp_cell *all = NULL, *part = NULL;
    int n_all = 0, n_part = 0;
    if (lcx__ramp_run(&o, &all, &n_all, err, sizeof err) < 0) fail_msg("ramp: %s", err);
    assert_int_equal(n_all, 3 * 2 + 2 * 2 * 3 * 2);   /* baseline + two V3 arms × two rescues; 3 depths × 2 seeds */

    /* three shards: every cell once, each the serial run's (in plan order within a shard) */
    int seen = 0;
    o.n_shards = 3;
    for (o.shard = 0; o.shard < 3; o.shard++) {
        if (lcx__ramp_run(&o, &part, &n_part, err, sizeof err) < 0) fail_msg("shard %d: %s", o.shard, err);
        assert_int_equal(n_part, n_all / 3);
        for (int i = 0; i < n_part; i++) assert_same_cell(&part[i], &all[o.shard + 3 * i]);
        seen += n_part;
        free(part);
    }
    assert_int_equal(seen, n_all);
    o.shard = 3;
    assert_int_equal(lcx__ramp_run(&o, &part, &n_part, err, sizeof err), LCX_EINVAL);

    /* the CLI: --jobs 4 (its own sidecar), the cells in the serial order, each also on --cells-out */
    snprintf(cmd, sizeof cmd,
             "'%s' eval ramp -m '%s' --sizes 2k --seeds 2 --rescue single-turn,two-turn --ubatch 128 --max-gen 4 "
             "--prepopulate 0 --jobs 4 --json --cells-out '%s' --svc-bin '%s' 2>/dev/null",
             tu_bin("longctx"), g_model, cells_out, tu_bin("longctx-svc"));
    char *out = NULL;
    assert_int_equal(tu_run(cmd, &out), 0);
    lcx_ramp_cell *cli = NULL;
    int n_cli = 0;
    assert_int_equal(lcx__ramp_json_read(out, &cli, &n_cli, NULL), 0);
    assert_int_equal(n_cli, n_all);
    for (int i = 0; i < n_all; i++) assert_same_cell(&cli[i], &all[i]);
    free(cli);
    cli = NULL;
    n_cli = 0;
    char *txt = NULL;
    size_t len = 0;
    assert_int_equal(lcx__read_file(cells_out, 1 << 20, &txt, &len), 0);
    int lines = 0;
    for (char *ln = txt, *nl; ln && *ln; ln = nl ? nl + 1 : NULL, lines++) {
        if ((nl = strchr(ln, '\n'))) *nl = 0;
        assert_int_equal(lcx__ramp_json_read(ln, &cli, &n_cli, NULL), 0);
    }
    assert_int_equal(lines, n_all);
    assert_int_equal(n_cli, n_all);
    free(txt);
    free(cli);
    free(out);
    free(all);
    lcx_sidecar_stop(sc, 5000);

    /* refusals: --jobs with --shard, a shard outside 0..N-1, --jobs 0 (usage, status 2); a
     * model that does not open: every shard fails, status 1 and no table */
    const char *bad[] = {"--jobs 2 --shard 0/2", "--shard 2/2", "--jobs 0"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        snprintf(cmd, sizeof cmd, "'%s' eval ramp -m '%s' --sizes 2k --arms v3 %s 2>/dev/null", tu_bin("longctx"), g_model,
                 bad[i]);
        assert_int_equal(tu_run(cmd, &out), 2);
        free(out);
    }
    snprintf(cmd, sizeof cmd, "'%s' eval ramp -m '%s/none.gguf' --sizes 2k --arms v3 --jobs 2 2>/dev/null",
             tu_bin("longctx"), g_dir);
    assert_int_equal(tu_run(cmd, &out), 1);
    assert_string_equal(out, "");
    free(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_blob),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_reply_cut),
        cmocka_unit_test(test_policy_lists),
        cmocka_unit_test(test_jobs),
        cmocka_unit_test(test_ramp_two_turn),
        cmocka_unit_test(test_ramp_single_turn),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
