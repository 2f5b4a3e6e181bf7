/* Golden tests against ../shared/fixtures/triattention (scoring.json, selection.json):
 * reference vs collapsed forms (both pairings, all term modes), calibration statistics,
 * TheTom block-mean scores for every kernel, the fast path, and V1/V2/V3 eviction sets
 * (direct API and the replay JSON). */
#include "testutil.h"
#include "tjson.h"
#include "longctx/triatt.h"
#include "triatt/internal.h"
#include <stdio.h>
#include <string.h>

typedef struct {
    cJSON *j;
    int L, H, KV, D, fc, T, N, P;
    double theta;
    double *pos_d;
    int32_t *pos;
    float *q[2], *k[2];     /* [layout] (L,T,H,D), (L,KV,N,D) */
} scoring_fx;

static const char *LAY[2] = {"half", "adjacent"};

static void load_scoring(scoring_fx *s)
{
    memset(s, 0, sizeof *s);
    s->j = tj_load(tu_fixture("triattention/scoring.json"));
    assert_non_null(s->j);
    const cJSON *cfg = cJSON_GetObjectItem(s->j, "config");
    s->L = (int)tj_num(cfg, "n_layers"); s->H = (int)tj_num(cfg, "n_heads");
    s->KV = (int)tj_num(cfg, "n_kv_heads"); s->D = (int)tj_num(cfg, "head_dim");
    s->fc = (int)tj_num(cfg, "freq_count"); s->T = (int)tj_num(cfg, "n_calib_tokens");
    s->N = (int)tj_num(cfg, "n_keys"); s->P = (int)tj_num(cfg, "round_start_P");
    s->theta = tj_num(cfg, "rope_theta");
    long n;
    s->pos_d = tj_arr(s->j, "inputs.positions", &n);
    assert_int_equal(n, s->N);
    s->pos = malloc(n * sizeof(int32_t));
    for (long i = 0; i < n; i++) s->pos[i] = (int32_t)s->pos_d[i];
    for (int li = 0; li < 2; li++) {
        char p[64];
        snprintf(p, sizeof p, "inputs.q_pre_rope_%s", LAY[li]);
        double *d = tj_arr(s->j, p, &n);
        assert_int_equal(n, (long)s->L * s->T * s->H * s->D);
        s->q[li] = malloc(n * sizeof(float));
        for (long i = 0; i < n; i++) s->q[li][i] = (float)d[i];
        free(d);
        snprintf(p, sizeof p, "inputs.k_rot_%s", LAY[li]);
        d = tj_arr(s->j, p, &n);
        assert_int_equal(n, (long)s->L * s->KV * s->N * s->D);
        s->k[li] = malloc(n * sizeof(float));
        for (long i = 0; i < n; i++) s->k[li][i] = (float)d[i];
        free(d);
    }
}

static void free_scoring(scoring_fx *s)
{
    cJSON_Delete(s->j);
    free(s->pos_d); free(s->pos);
    for (int i = 0; i < 2; i++) { free(s->q[i]); free(s->k[i]); }
}

static triatt_geometry geom(const scoring_fx *s, int li)
{
    return (triatt_geometry){.n_layers = s->L, .n_heads = s->H, .n_kv_heads = s->KV, .head_dim = s->D,
                             .n_rot = s->D, .pairing = li ? TRIATT_PAIR_ADJACENT : TRIATT_PAIR_HALF,
                             .rope_theta = s->theta};
}

static triatt_calib *calibrate(const scoring_fx *s, int li)
{
    triatt_geometry g = geom(s, li);
    triatt_calib *c = NULL;
    triatt_calib_init(&g, s->T, 0, &c);
    assert_non_null(c);
    for (int l = 0; l < s->L; l++)
        assert_int_equal(triatt_calib_add(c, l, s->q[li] + (size_t)l * s->T * s->H * s->D, s->T, 0), 0);
    assert_int_equal(triatt_calib_end_pass(c), 1);
    assert_true(triatt_calib_ready(c));
    return c;
}

static void assert_close(double a, double b, double tol, const char *what, int i)
{
    if (!(fabs(a - b) <= tol)) fail_msg("%s[%d]: got %.12g want %.12g (tol %g)", what, i, a, b, tol);
}

static void test_omega_trig_sums(void **st)
{
    scoring_fx s;
    load_scoring(&s);
    triatt_geometry g = geom(&s, 0);
    double om[64], cs[64], sn[64];
    assert_int_equal(triatt_geometry_omega(&g, om), 0);
    double *w = tj_arr(s.j, "derived.omega", NULL), *c = tj_arr(s.j, "derived.cos_sum_at_P", NULL),
           *sv = tj_arr(s.j, "derived.sin_sum_at_P", NULL);
    triatt_trig_sums(om, s.fc, s.P, cs, sn);
    for (int f = 0; f < s.fc; f++) {
        assert_close(om[f], w[f], 1e-15, "omega", f);
        assert_close(cs[f], c[f], 1e-12, "cos_sum", f);
        assert_close(sn[f], sv[f], 1e-12, "sin_sum", f);
    }
    free(w); free(c); free(sv);
    free_scoring(&s);
}

static void test_calibration_stats(void **st)
{
    scoring_fx s;
    load_scoring(&s);
    double *mr = tj_arr(s.j, "derived.q_mean_real", NULL), *mi = tj_arr(s.j, "derived.q_mean_imag", NULL),
           *ma = tj_arr(s.j, "derived.q_abs_mean", NULL);
    for (int li = 0; li < 2; li++) {
        triatt_calib *c = calibrate(&s, li);
        for (int l = 0; l < s.L; l++)
            for (int h = 0; h < s.H; h++) {
                const double *r, *i, *a;
                assert_int_equal(triatt_calib_head(c, l, h, &r, &i, &a), 0);
                for (int f = 0; f < s.fc; f++) {
                    size_t x = ((size_t)l * s.H + h) * s.fc + f;
                    assert_close(r[f], mr[x], 1e-12, "q_mean_real", (int)x);
                    assert_close(i[f], mi[x], 1e-12, "q_mean_imag", (int)x);
                    assert_close(a[f], ma[x], 1e-7, "q_abs_mean", (int)x);   /* ours has eps 1e-8 */
                }
            }
        /* block centres vs TheTom f64 centres */
        static const char *nm[3] = {"tom_blockmean.centre_real_f64", "tom_blockmean.centre_imag_f64",
                                    "tom_blockmean.centre_abs_f64"};
        for (int k = 0; k < 3; k++) {
            double *e = tj_arr(s.j, nm[k], NULL);
            for (int l = 0; l < s.L; l++)
                for (int g = 0; g < s.KV; g++) {
                    const float *cr, *ci, *ca;
                    assert_int_equal(triatt_calib_block(c, l, g, &cr, &ci, &ca), 0);
                    const float *v = k == 0 ? cr : k == 1 ? ci : ca;
                    for (int f = 0; f < s.fc; f++)
                        assert_close(v[f], e[((size_t)l * s.KV + g) * s.fc + f], 1e-6, nm[k], f);
                }
            free(e);
        }
        triatt_calib_free(c);
    }
    free(mr); free(mi); free(ma);
    free_scoring(&s);
}

static const char *MODES[4] = {"mlr", "no_mlr", "trig_only", "extra_only"};

/* reference form (paper) vs the stored reference; collapsed form vs the stored collapsed;
 * and reference vs collapsed with the same eps on our side — both pairings */
static void test_per_head_forms(void **st)
{
    scoring_fx s;
    load_scoring(&s);
    double *mr = tj_arr(s.j, "derived.q_mean_real", NULL), *mi = tj_arr(s.j, "derived.q_mean_imag", NULL),
           *ma = tj_arr(s.j, "derived.q_abs_mean", NULL);
    double om[64], cs[64], sn[64];
    triatt_geometry g0 = geom(&s, 0);
    triatt_geometry_omega(&g0, om);
    triatt_trig_sums(om, s.fc, s.P, cs, sn);
    int G = s.H / s.KV, checked = 0;
    for (int li = 0; li < 2; li++) {
        triatt_geometry g = geom(&s, li);
        for (int m = 0; m < 4; m++) {
            char p[128];
            snprintf(p, sizeof p, "scores_per_head.%s.%s.collapsed", LAY[li], MODES[m]);
            double *col = tj_arr(s.j, p, NULL);
            snprintf(p, sizeof p, "scores_per_head.%s.%s.reference", LAY[li], MODES[m]);
            double *ref = tj_arr(s.j, p, NULL);   /* stored for half only */
            for (int l = 0; l < s.L; l++)
                for (int h = 0; h < s.H; h++) {
                    size_t sx = ((size_t)l * s.H + h) * s.fc;
                    for (int c = 0; c < s.N; c++) {
                        const float *K = s.k[li] + (((size_t)l * s.KV + h / G) * s.N + c) * s.D;
                        size_t x = ((size_t)l * s.H + h) * s.N + c;
                        double rf = triatt_score_reference_form(&g, om, mr + sx, mi + sx, ma + sx, K, s.pos[c],
                                                                s.P, (triatt_terms)m, 0.0, false);
                        double cf = triatt_score_collapsed_form(&g, cs, sn, mr + sx, mi + sx, ma + sx, K,
                                                                (triatt_terms)m, 1e-8);
                        double cf0 = triatt_score_collapsed_form(&g, cs, sn, mr + sx, mi + sx, ma + sx, K,
                                                                 (triatt_terms)m, 0.0);
                        assert_close(cf, col[x], 1e-9, p, (int)x);
                        assert_close(rf, cf0, 1e-9, "reference vs collapsed (eps 0)", (int)x);
                        if (ref) assert_close(rf, ref[x], 1e-9, p, (int)x);
                        checked++;
                    }
                }
            free(col); free(ref);
        }
    }
    /* max aggregation over offsets (reference only) */
    double *mx = tj_arr(s.j, "scores_per_head.half.max_aggregation_reference", NULL);
    assert_non_null(mx);
    for (int l = 0; l < s.L; l++)
        for (int h = 0; h < s.H; h++)
            for (int c = 0; c < s.N; c++) {
                size_t sx = ((size_t)l * s.H + h) * s.fc, x = ((size_t)l * s.H + h) * s.N + c;
                const float *K = s.k[0] + (((size_t)l * s.KV + h / G) * s.N + c) * s.D;
                double v = triatt_score_reference_form(&g0, om, mr + sx, mi + sx, ma + sx, K, s.pos[c], s.P,
                                                       TRIATT_TERMS_MLR, 0.0, true);
                assert_close(v, mx[x], 1e-9, "max_aggregation_reference", (int)x);
            }
    assert_int_equal(checked, 2 * 4 * s.L * s.H * s.N);
    free(mx); free(mr); free(mi); free(ma);
    free_scoring(&s);
}

/* TheTom block mean through the real scorer, every kernel, both pairings, skip 0/1 */
static void test_blockmean_kernels(void **st)
{
    scoring_fx s;
    load_scoring(&s);
    const cJSON *tb = cJSON_GetObjectItem(s.j, "tom_blockmean");
    int Pm = (int)tj_num(tb, "P_max_pos"), win = (int)tj_num(tb, "window");
    int n_kernels = lcx__cpu_has_avx512() ? 3 : 2;
    if (n_kernels == 2) fprintf(stderr, "note: CPU has no AVX-512: AVX-512 block-mean comparison skipped\n");
    float sc[256];
    for (int li = 0; li < 2; li++) {
        triatt_geometry g = geom(&s, li);
        triatt_calib *cal = calibrate(&s, li);
        triatt_dense_keys dk = {.data = s.k[li], .n_kv_heads = s.KV, .n_cells_cap = s.N, .head_dim = s.D};
        triatt_keys keys;
        triatt_keys_dense(&keys, &dk);
        for (int skip = 0; skip < 3; skip++) {
            char p[128];
            /* skip 2 exceeds the last attention layer (1): clamped to 0 */
            snprintf(p, sizeof p, "tom_blockmean.score_f64_skip%d", skip == 2 ? 0 : skip);
            double *e = tj_arr(s.j, p, NULL);
            for (int kern = 0; kern < n_kernels; kern++)
                for (int nt = 1; nt <= 2; nt++) {
                    triatt_scorer_opts o = {.skip_layers = skip, .n_threads = nt, .eps = 1e-8};
                    triatt_scorer *sco = NULL;
                    triatt_scorer_init(&g, &o, &sco);
                    assert_non_null(sco);
                    triatt__scorer_force_kernel(sco, kern);
                    assert_int_equal(triatt_score(sco, cal, &keys, s.pos, s.N, Pm, Pm - win + 1, sc), 0);
                    for (int c = 0; c < s.N; c++) {
                        if (isnan(e[c])) { assert_true(isnan(sc[c])); continue; }
                        assert_close(sc[c], e[c], 1e-5, p, c);
                    }
                    /* fast path gives the same scores */
                    if (kern == 1) {
                        float fs[256];
                        assert_int_equal(triatt_fast_reserve(sco, s.N), 0);
                        assert_int_equal(triatt_fast_set_cells(sco, cal, &keys, s.pos, 0, s.N), 0);
                        assert_int_equal(triatt_fast_score(sco, cal, s.pos, s.N, Pm, Pm - win + 1, fs), 0);
                        for (int c = 0; c < s.N; c++)
                            if (!isnan(e[c])) assert_close(fs[c], sc[c], 1e-5, "fast vs full", c);
                    }
                    triatt_scorer_free(sco);
                }
            free(e);
        }
        triatt_calib_free(cal);
    }
    free_scoring(&s);
}

/* Reference-style aggregation = mean over (layer, kv) of max over the group of per-head
 * collapsed scores (checked against the float64 collapsed form) */
static void test_reference_aggregation(void **st)
{
    scoring_fx s;
    load_scoring(&s);
    triatt_geometry g = geom(&s, 0);
    triatt_calib *cal = calibrate(&s, 0);
    triatt_dense_keys dk = {.data = s.k[0], .n_kv_heads = s.KV, .n_cells_cap = s.N, .head_dim = s.D};
    triatt_keys keys;
    triatt_keys_dense(&keys, &dk);
    double om[64], cs[64], sn[64];
    triatt_geometry_omega(&g, om);
    triatt_trig_sums(om, s.fc, s.P, cs, sn);
    triatt_scorer_opts o = {.aggregation = TRIATT_AGG_REFERENCE, .n_threads = 2, .eps = 1e-8};
    triatt_scorer *sco = NULL;
    triatt_scorer_init(&g, &o, &sco);
    float sc[256];
    assert_int_equal(triatt_score(sco, cal, &keys, s.pos, s.N, s.P, 1 << 30, sc), 0);
    int G = s.H / s.KV;
    for (int c = 0; c < s.N; c++) {
        double tot = 0;
        for (int l = 0; l < s.L; l++)
            for (int kv = 0; kv < s.KV; kv++) {
                double m = -INFINITY;
                for (int j = 0; j < G; j++) {
                    const double *mr, *mi, *ma;
                    triatt_calib_head(cal, l, kv * G + j, &mr, &mi, &ma);
                    double v = triatt_score_collapsed_form(&g, cs, sn, mr, mi, ma,
                                                           s.k[0] + (((size_t)l * s.KV + kv) * s.N + c) * s.D,
                                                           TRIATT_TERMS_MLR, 1e-8);
                    m = fmax(m, v);
                }
                tot += m;
            }
        assert_close(sc[c], tot / (s.L * s.KV), 1e-5, "reference aggregation", c);
    }
    /* z-score per head (over the scored cells) before the max over the group */
    triatt_scorer_opts oz = {.aggregation = TRIATT_AGG_REFERENCE, .zscore = true, .n_threads = 1, .eps = 1e-8};
    triatt_scorer *sz = NULL;
    triatt_scorer_init(&g, &oz, &sz);
    float zs[256];
    int32_t wthr = 110;   /* positions >= 110 are window cells: excluded from the statistics */
    assert_int_equal(triatt_score(sz, cal, &keys, s.pos, s.N, s.P, wthr, zs), 0);
    double tot[256] = {0};
    for (int l = 0; l < s.L; l++)
        for (int kv = 0; kv < s.KV; kv++) {
            double hs[8][256], best[256];
            for (int j = 0; j < G; j++) {
                const double *mr, *mi, *ma;
                triatt_calib_head(cal, l, kv * G + j, &mr, &mi, &ma);
                double sum = 0, sq = 0;
                int k = 0;
                for (int c = 0; c < s.N; c++) {
                    hs[j][c] = triatt_score_collapsed_form(&g, cs, sn, mr, mi, ma,
                                                           s.k[0] + (((size_t)l * s.KV + kv) * s.N + c) * s.D,
                                                           TRIATT_TERMS_MLR, 1e-8);
                    if (s.pos[c] < wthr) { sum += hs[j][c]; sq += hs[j][c] * hs[j][c]; k++; }
                }
                double mean = sum / k, sd = sqrt(sq / k - mean * mean + 1e-6);
                for (int c = 0; c < s.N; c++) hs[j][c] = (hs[j][c] - mean) / sd;
            }
            for (int c = 0; c < s.N; c++) {
                best[c] = hs[0][c];
                for (int j = 1; j < G; j++) best[c] = fmax(best[c], hs[j][c]);
                tot[c] += best[c];
            }
        }
    for (int c = 0; c < s.N; c++) {
        if (s.pos[c] >= wthr) { assert_true(isnan(zs[c])); continue; }
        assert_close(zs[c], tot[c] / (s.L * s.KV), 1e-4, "reference aggregation + zscore", c);
    }
    triatt_scorer_free(sz);
    /* the fast path refuses reference aggregation */
    assert_int_equal(triatt_fast_reserve(sco, 8), LCX_ENOTSUP);
    triatt_scorer_free(sco);
    triatt_calib_free(cal);
    free_scoring(&s);
}

/* ---- selection.json ---- */
static void sorted_positions(const int32_t *cells, int n, const int32_t *pos, double *out)
{
    for (int i = 0; i < n; i++) out[i] = pos[cells[i]];
    for (int i = 1; i < n; i++) {
        double v = out[i];
        int j = i - 1;
        while (j >= 0 && out[j] > v) { out[j + 1] = out[j]; j--; }
        out[j + 1] = v;
    }
}

static void expect_set(const char *id, const char *v, const double *got, int n, const double *want, long nw)
{
    if (n != nw) fail_msg("%s %s: evicted %d, want %ld", id, v, n, nw);
    for (int i = 0; i < n; i++)
        if (got[i] != want[i]) fail_msg("%s %s: position #%d is %g, want %g", id, v, i, got[i], want[i]);
}

static void test_selection_cases(void **st)
{
    cJSON *j = tj_load(tu_fixture("triattention/selection.json"));
    assert_non_null(j);
    const cJSON *cases = cJSON_GetObjectItem(j, "cases");
    int n_cases = 0, n_checked = 0;
    for (const cJSON *c = cases->child; c; c = c->next, n_cases++) {
        const char *id = cJSON_GetObjectItem(c, "id")->valuestring;
        long n, ns;
        double *pd = tj_arr(c, "positions", &n), *sd = tj_arr(c, "scores", &ns);
        assert_int_equal(n, ns);
        int32_t *pos = malloc(n * sizeof(int32_t)), *out = malloc(n * sizeof(int32_t));
        float *sc = malloc(n * sizeof(float));
        double *got = malloc(n * sizeof(double));
        for (long i = 0; i < n; i++) { pos[i] = (int32_t)pd[i]; sc[i] = (float)sd[i]; }
        triatt_select_params p = {.budget = (int)tj_num(c, "budget"), .window = (int)tj_num(c, "window"),
                                  .divide_length = (int)tj_num(c, "divide_length"),
                                  .prefix_protect = (int)tj_num(c, "prefix_protect"),
                                  .n_segments = (int)tj_num(c, "n_segments")};
        p.direction = !strcmp(cJSON_GetObjectItem(c, "direction")->valuestring, "keep_high") ? TRIATT_KEEP_HIGH
                                                                                          : TRIATT_EVICT_HIGH;
        int n_used = (int)tj_num(c, "n_used"), n_ev = (int)tj_num(c, "n_to_evict");
        bool fires = cJSON_IsTrue(cJSON_GetObjectItem(c, "trigger_fires"));
        assert_int_equal(n_used, n);
        assert_int_equal(triatt_should_evict(n_used, p.budget, p.window, p.divide_length), fires);
        static const char *vn[3] = {"v1", "v2", "v3"};
        for (int v = 0; v < 3; v++) {
            p.version = (triatt_version)v;
            char path[64];
            snprintf(path, sizeof path, "expected.%s", vn[v]);
            long nw;
            double *want = tj_arr(c, path, &nw);
            assert_non_null(want);
            int k = fires ? triatt_select(&p, pos, sc, n, n_ev, out) : 0;
            assert_true(k >= 0);
            sorted_positions(out, k, pos, got);
            expect_set(id, vn[v], got, k, want, nw);
            free(want);
            snprintf(path, sizeof path, "expected_selection_forced.%s", vn[v]);
            want = tj_arr(c, path, &nw);
            if (want) {   /* trigger did not fire: the selection stage run anyway */
                k = triatt_select(&p, pos, sc, n, n_ev, out);
                assert_true(k >= 0);
                sorted_positions(out, k, pos, got);
                expect_set(id, "forced", got, k, want, nw);
                free(want);
            }
            n_checked++;
        }
        free(pd); free(sd); free(pos); free(out); free(sc); free(got);
    }
    assert_int_equal(n_cases, 26);
    assert_int_equal(n_checked, 78);
    /* trigger cases */
    int nt = 0;
    for (const cJSON *c = cJSON_GetObjectItem(j, "trigger_cases")->child; c; c = c->next, nt++) {
        int u = (int)tj_num(c, "n_used"), b = (int)tj_num(c, "budget");
        bool f = triatt_should_evict(u, b, (int)tj_num(c, "window"), (int)tj_num(c, "divide_length"));
        assert_int_equal(f, cJSON_IsTrue(cJSON_GetObjectItem(c, "fires")));
        if (f) assert_int_equal(u - b, (int)tj_num(c, "n_to_evict"));
    }
    assert_int_equal(nt, 11);
    cJSON_Delete(j);
}

/* the replay JSON reproduces every case */
static void test_replay_selection(void **st)
{
    const char *path = tu_fixture("triattention/selection.json");
    char *d, *out;
    size_t n;
    assert_int_equal(lcx__read_file(path, 0, &d, &n), 0);
    assert_int_equal(triatt_replay_json(d, n, &out), 0);
    cJSON *got = cJSON_Parse(out), *want = cJSON_ParseWithLength(d, n);
    assert_non_null(got);
    const cJSON *gc = cJSON_GetObjectItem(got, "cases")->child;
    int k = 0;
    for (const cJSON *wc = cJSON_GetObjectItem(want, "cases")->child; wc; wc = wc->next, gc = gc->next, k++) {
        assert_non_null(gc);
        assert_string_equal(cJSON_GetObjectItem(gc, "id")->valuestring, cJSON_GetObjectItem(wc, "id")->valuestring);
        static const char *vn[3] = {"v1", "v2", "v3"};
        for (int v = 0; v < 3; v++) {
            char p[32];
            snprintf(p, sizeof p, "expected.%s", vn[v]);
            long a, b;
            double *x = tj_arr(gc, vn[v], &a), *y = tj_arr(wc, p, &b);
            expect_set(cJSON_GetObjectItem(wc, "id")->valuestring, vn[v], x, (int)a, y, b);
            free(x); free(y);
        }
    }
    assert_int_equal(k, 26);
    cJSON_Delete(got); cJSON_Delete(want);
    free(out); free(d);
    /* malformed documents are rejected, not crashed on */
    const char *bad[] = {"{", "{\"cases\":[{\"positions\":[1,2],\"scores\":[1]}]}", "[]",
                         "{\"cases\":[{\"positions\":[-1],\"scores\":[1],\"budget\":0}]}",
                         "{\"cases\":[{\"positions\":[1],\"scores\":[\"x\"],\"budget\":0}]}",
                         /* beyond float's range: refused, not narrowed (undefined in C) */
                         "{\"cases\":[{\"positions\":[1],\"scores\":[1e300],\"budget\":0}]}"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        out = NULL;
        assert_true(triatt_replay_json(bad[i], strlen(bad[i]), &out) < 0);
        assert_null(out);
    }
}

static void test_replay_scoring(void **st)
{
    scoring_fx s;
    load_scoring(&s);
    char *d, *out;
    size_t n;
    assert_int_equal(lcx__read_file(tu_fixture("triattention/scoring.json"), 0, &d, &n), 0);
    assert_int_equal(triatt_replay_json(d, n, &out), 0);
    cJSON *r = cJSON_Parse(out);
    assert_non_null(r);
    for (int li = 0; li < 2; li++) {
        char p[128], q[128];
        snprintf(p, sizeof p, "scores.collapsed_%s_mlr", LAY[li]);
        snprintf(q, sizeof q, "scores_per_head.%s.mlr.collapsed", LAY[li]);
        long a, b;
        double *x = tj_arr(r, p, &a), *y = tj_arr(s.j, q, &b);
        assert_int_equal(a, b);
        for (long i = 0; i < a; i++) assert_close(x[i], y[i], 1e-6, p, (int)i);
        free(x); free(y);
        for (int skip = 0; skip < 2; skip++) {
            snprintf(p, sizeof p, "scores.blockmean_%s_skip%d", LAY[li], skip);
            snprintf(q, sizeof q, "tom_blockmean.score_f64_skip%d", skip);
            x = tj_arr(r, p, &a); y = tj_arr(s.j, q, &b);
            assert_int_equal(a, b);
            for (long i = 0; i < a; i++) {
                if (isnan(y[i])) assert_true(isnan(x[i]));
                else assert_close(x[i], y[i], 1e-5, p, (int)i);
            }
            free(x); free(y);
        }
    }
    cJSON_Delete(r);
    free(out); free(d);
    free_scoring(&s);
}

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test(test_omega_trig_sums),
        cmocka_unit_test(test_calibration_stats),
        cmocka_unit_test(test_per_head_forms),
        cmocka_unit_test(test_blockmean_kernels),
        cmocka_unit_test(test_reference_aggregation),
        cmocka_unit_test(test_selection_cases),
        cmocka_unit_test(test_replay_selection),
        cmocka_unit_test(test_replay_scoring),
    };
    return cmocka_run_group_tests(t, NULL, NULL);
}
