/* `longctx triatt replay`: runs recorded rounds through this library.
 *  - selection.json-shaped input ({"cases":[{id, positions, scores, budget, window,
 *    divide_length, prefix_protect, n_segments, direction, n_used?}]}) →
 *    {"cases":[{"id", "fires", "n_to_evict", "v1":[…], "v2":[…], "v3":[…]}]} with the sorted
 *    evicted positions of one full round (empty when the trigger does not fire);
 *  - scoring.json-shaped input ({"config", "inputs"}) → {"scores":{…}}: per-head collapsed
 *    scores (half and adjacent layouts, MLR, phase origin round_start_P) from centres
 *    calibrated on the input queries, and the block-mean scores at P = max position for
 *    skip 0 and 1 (null for window cells). */
#include "triatt/internal.h"
#include <cjson/cJSON.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REPLAY_MAX_BYTES (64u << 20)
#define REPLAY_MAX_CELLS (1 << 22)

/* Flattens a nested numeric array into out (cap); returns count or -1 (not numeric/too big). */
static long flatten(const cJSON *a, double *out, long cap, long n)
{
    if (cJSON_IsNumber(a)) {
        if (n >= cap) return -1;
        out[n] = a->valuedouble;
        return n + 1;
    }
    if (cJSON_IsNull(a)) {
        if (n >= cap) return -1;
        out[n] = NAN;
        return n + 1;
    }
    if (!cJSON_IsArray(a)) return -1;
    for (const cJSON *e = a->child; e; e = e->next) {
        n = flatten(e, out, cap, n);
        if (n < 0) return -1;
    }
    return n;
}

/* Narrows the parsed doubles to the float inputs the kernels take. A finite value beyond
 * float's range is malformed input (the conversion would be undefined), not an infinity. */
static bool narrow(const double *src, float *dst, long n)
{
    for (long i = 0; i < n; i++) {
        if (fabs(src[i]) > FLT_MAX && isfinite(src[i])) return false;
        dst[i] = (float)src[i];
    }
    return true;
}

static int get_int(const cJSON *o, const char *k, int def, int *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    if (!v) { *out = def; return 0; }
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || fabs(v->valuedouble) > 2e9) return -1;
    *out = (int)v->valuedouble;
    return 0;
}

static int put_positions(lcx_buf *b, const char *key, const int32_t *cells, int n, const int32_t *pos)
{
    int32_t *p = malloc((size_t)(n ? n : 1) * sizeof(int32_t));
    if (!p) return LCX_ENOMEM;
    for (int i = 0; i < n; i++) p[i] = pos[cells[i]];
    /* insertion sort is fine for replay sizes; keeps this file dependency-free */
    for (int i = 1; i < n; i++) {
        int32_t v = p[i];
        int j = i - 1;
        while (j >= 0 && p[j] > v) { p[j + 1] = p[j]; j--; }
        p[j + 1] = v;
    }
    int rc = lcx__buf_printf(b, ",\"%s\":[", key);
    for (int i = 0; i < n && rc >= 0; i++) rc = lcx__buf_printf(b, "%s%d", i ? "," : "", p[i]);
    if (rc >= 0) rc = lcx__buf_puts(b, "]");
    free(p);
    return rc;
}

static int replay_selection(const cJSON *cases, lcx_buf *b)
{
    int rc = lcx__buf_puts(b, "{\"cases\":[");
    int idx = 0;
    for (const cJSON *c = cases->child; c && rc >= 0; c = c->next, idx++) {
        const cJSON *pj = cJSON_GetObjectItemCaseSensitive(c, "positions");
        const cJSON *sj = cJSON_GetObjectItemCaseSensitive(c, "scores");
        int n = cJSON_GetArraySize(pj);
        if (!cJSON_IsArray(pj) || !cJSON_IsArray(sj) || cJSON_GetArraySize(sj) != n || n > REPLAY_MAX_CELLS)
            return LCX_EINVAL;
        triatt_select_params sp = {0};
        int n_used;
        if (get_int(c, "budget", -1, &sp.budget) || get_int(c, "window", 128, &sp.window) ||
            get_int(c, "divide_length", 128, &sp.divide_length) ||
            get_int(c, "prefix_protect", 32, &sp.prefix_protect) ||
            get_int(c, "n_segments", 8, &sp.n_segments) || get_int(c, "n_used", n, &n_used) ||
            sp.budget < 0 || sp.window < 0 || sp.prefix_protect < 0)
            return LCX_EINVAL;
        const cJSON *dj = cJSON_GetObjectItemCaseSensitive(c, "direction");
        if (dj && (!cJSON_IsString(dj) || (strcmp(dj->valuestring, "evict_high") && strcmp(dj->valuestring, "keep_high"))))
            return LCX_EINVAL;
        sp.direction = dj && !strcmp(dj->valuestring, "keep_high") ? TRIATT_KEEP_HIGH : TRIATT_EVICT_HIGH;
        double *tmp = malloc((size_t)(n ? n : 1) * sizeof(double));
        int32_t *pos = malloc((size_t)(n ? n : 1) * sizeof(int32_t));
        float *sc = malloc((size_t)(n ? n : 1) * sizeof(float));
        int32_t *out = malloc((size_t)(n ? n : 1) * sizeof(int32_t));
        if (!tmp || !pos || !sc || !out) { free(tmp); free(pos); free(sc); free(out); return LCX_ENOMEM; }
        bool ok = flatten(pj, tmp, n, 0) == n;
        for (int i = 0; ok && i < n; i++) {
            if (!(tmp[i] >= 0 && tmp[i] < 2e9) || tmp[i] != floor(tmp[i])) ok = false;
            else pos[i] = (int32_t)tmp[i];
        }
        ok = ok && flatten(sj, tmp, n, 0) == n && narrow(tmp, sc, n);
        free(tmp);
        if (!ok) { free(pos); free(sc); free(out); return LCX_EINVAL; }
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(c, "id");
        bool fires = triatt_should_evict(n_used, sp.budget, sp.window, sp.divide_length);
        int n_evict = fires ? n_used - sp.budget : 0;
        rc = lcx__buf_puts(b, idx ? ",{\"id\":" : "{\"id\":");
        if (rc >= 0 && cJSON_IsString(id)) rc = lcx__buf_json_str(b, id->valuestring, strlen(id->valuestring));
        else if (rc >= 0) rc = lcx__buf_printf(b, "%d", idx);
        if (rc >= 0) rc = lcx__buf_printf(b, ",\"fires\":%s,\"n_to_evict\":%d", fires ? "true" : "false", n_evict);
        static const char *names[3] = {"v1", "v2", "v3"};
        for (int v = 0; v < 3 && rc >= 0; v++) {
            sp.version = (triatt_version)v;
            int k = triatt_select(&sp, pos, sc, n, n_evict, out);
            rc = k < 0 ? k : put_positions(b, names[v], out, k, pos);
        }
        if (rc >= 0) rc = lcx__buf_puts(b, "}");
        free(pos); free(sc); free(out);
    }
    if (rc >= 0) rc = lcx__buf_puts(b, "]}\n");
    return rc;
}

static int put_array(lcx_buf *b, const double *v, long n, int inner)
{
    int rc = lcx__buf_puts(b, "[");
    for (long i = 0; i < n && rc >= 0; i++) {
        if (inner && i && i % inner == 0) rc = lcx__buf_puts(b, "],[");
        else if (i) rc = lcx__buf_puts(b, ",");
        /* JSON has no NaN or infinity: both are null (an input of 1e309 parses as inf) */
        if (rc >= 0) rc = !isfinite(v[i]) ? lcx__buf_puts(b, "null") : lcx__buf_printf(b, "%.17g", v[i]);
    }
    return rc < 0 ? rc : lcx__buf_puts(b, "]");
}

static int replay_scoring(const cJSON *root, lcx_buf *b)
{
    const cJSON *cfg = cJSON_GetObjectItemCaseSensitive(root, "config");
    const cJSON *in = cJSON_GetObjectItemCaseSensitive(root, "inputs");
    const cJSON *tb = cJSON_GetObjectItemCaseSensitive(root, "tom_blockmean");
    int L, H, KV, D, nrot, P, win;
    double theta = 10000;
    const cJSON *th = cJSON_GetObjectItemCaseSensitive(cfg, "rope_theta");
    if (cJSON_IsNumber(th)) theta = th->valuedouble;
    if (!cfg || !in || get_int(cfg, "n_layers", -1, &L) || get_int(cfg, "n_heads", -1, &H) ||
        get_int(cfg, "n_kv_heads", -1, &KV) || get_int(cfg, "head_dim", -1, &D) ||
        get_int(cfg, "n_rot", D, &nrot) || get_int(cfg, "round_start_P", -1, &P) ||
        get_int(tb ? tb : cfg, "window", 0, &win))
        return LCX_EINVAL;
    triatt_geometry g = {.n_layers = L, .n_heads = H, .n_kv_heads = KV, .head_dim = D, .n_rot = nrot,
                         .pairing = TRIATT_PAIR_HALF, .rope_theta = theta};
    if (triatt_geometry_check(&g) < 0) return LCX_EINVAL;
    const cJSON *pj = cJSON_GetObjectItemCaseSensitive(in, "positions");
    int N = cJSON_GetArraySize(pj);
    if (N <= 0 || N > REPLAY_MAX_CELLS || (long)L * KV * N * D > (64l << 20)) return LCX_EINVAL;
    const cJSON *q1 = cJSON_GetObjectItemCaseSensitive(in, "q_pre_rope_half");
    int T = cJSON_GetArraySize(cJSON_GetArrayItem(q1, 0));
    if (T <= 0 || (long)L * T * H * D > (64l << 20)) return LCX_EINVAL;
    int fc = (nrot ? nrot : D) / 2, rc = LCX_OK;
    long nq = (long)L * T * H * D, nk = (long)L * KV * N * D;
    double *tmp = malloc((size_t)LCX_MAX(nq, nk) * sizeof(double));
    float *q = malloc((size_t)nq * sizeof(float)), *k = malloc((size_t)nk * sizeof(float));
    int32_t *pos = malloc((size_t)N * sizeof(int32_t));
    double *outv = malloc((size_t)L * H * N * sizeof(double));
    float *sc = malloc((size_t)N * sizeof(float));
    double *cs = malloc(fc * sizeof(double)), *sn = malloc(fc * sizeof(double)), *om = malloc(fc * sizeof(double));
    triatt_calib *cal = NULL;
    triatt_scorer *s = NULL;
    if (!tmp || !q || !k || !pos || !outv || !sc || !cs || !sn || !om) { rc = LCX_ENOMEM; goto out; }
    if (flatten(pj, tmp, N, 0) != N) { rc = LCX_EINVAL; goto out; }
    int32_t maxp = 0;
    for (int i = 0; i < N; i++) {
        /* a null (NaN), fractional or out-of-range position is malformed, not a cast */
        if (!(tmp[i] >= 0 && tmp[i] <= INT32_MAX) || tmp[i] != (double)(int32_t)tmp[i]) { rc = LCX_EINVAL; goto out; }
        pos[i] = (int32_t)tmp[i];
        maxp = LCX_MAX(maxp, pos[i]);
    }
    triatt_geometry_omega(&g, om);
    triatt_trig_sums(om, fc, P, cs, sn);
    rc = lcx__buf_puts(b, "{\"scores\":{");
    static const char *lay[2] = {"half", "adjacent"};
    for (int li = 0; li < 2 && rc >= 0; li++) {
        char key[64];
        snprintf(key, sizeof key, "q_pre_rope_%s", lay[li]);
        if (flatten(cJSON_GetObjectItemCaseSensitive(in, key), tmp, nq, 0) != nq || !narrow(tmp, q, nq)) {
            rc = LCX_EINVAL;
            goto out;
        }
        snprintf(key, sizeof key, "k_rot_%s", lay[li]);
        if (flatten(cJSON_GetObjectItemCaseSensitive(in, key), tmp, nk, 0) != nk || !narrow(tmp, k, nk)) {
            rc = LCX_EINVAL;
            goto out;
        }
        g.pairing = li ? TRIATT_PAIR_ADJACENT : TRIATT_PAIR_HALF;
        triatt_calib_free(cal);
        triatt_calib_init(&g, T, 0, &cal);
        if (!cal) { rc = LCX_ENOMEM; goto out; }
        for (int l = 0; l < L; l++) triatt_calib_add(cal, l, q + (size_t)l * T * H * D, T, 0);
        if (triatt_calib_end_pass(cal) != 1) { rc = LCX_EINVAL; goto out; }
        for (int l = 0; l < L; l++)
            for (int h = 0; h < H; h++) {
                const double *mr, *mi, *ma;
                triatt_calib_head(cal, l, h, &mr, &mi, &ma);
                for (int c = 0; c < N; c++)
                    outv[((size_t)l * H + h) * N + c] = triatt_score_collapsed_form(
                        &g, cs, sn, mr, mi, ma, k + (((size_t)l * KV + h / (H / KV)) * N + c) * D,
                        TRIATT_TERMS_MLR, 1e-8);
            }
        rc = lcx__buf_printf(b, "%s\"collapsed_%s_mlr\":[", li ? "," : "", lay[li]);
        for (int l = 0; l < L && rc >= 0; l++) {
            if (l) rc = lcx__buf_puts(b, ",");
            rc = rc < 0 ? rc : lcx__buf_puts(b, "[");
            rc = rc < 0 ? rc : put_array(b, outv + (size_t)l * H * N, (long)H * N, N);
            rc = rc < 0 ? rc : lcx__buf_puts(b, "]");
        }
        rc = rc < 0 ? rc : lcx__buf_puts(b, "]");
        for (int skip = 0; skip < 2 && rc >= 0; skip++) {
            triatt_scorer_opts so = {.aggregation = TRIATT_AGG_BLOCKMEAN, .skip_layers = skip, .n_threads = 1, .eps = 1e-8};
            triatt_scorer_free(s);
            triatt_scorer_init(&g, &so, &s);
            if (!s) { rc = LCX_ENOMEM; goto out; }
            triatt_dense_keys dk = {.data = k, .n_kv_heads = KV, .n_cells_cap = N, .head_dim = D};
            triatt_keys keys;
            triatt_keys_dense(&keys, &dk);
            rc = triatt_score(s, cal, &keys, pos, N, maxp, maxp - win + 1, sc);
            if (rc < 0) goto out;
            for (int c = 0; c < N; c++) outv[c] = sc[c];
            rc = lcx__buf_printf(b, ",\"blockmean_%s_skip%d\":", lay[li], skip);
            rc = rc < 0 ? rc : put_array(b, outv, N, 0);
        }
    }
    if (rc >= 0) rc = lcx__buf_printf(b, "},\"P\":%d,\"P_max_pos\":%d,\"window\":%d}\n", P, maxp, win);
out:
    free(tmp); free(q); free(k); free(pos); free(outv); free(sc); free(cs); free(sn); free(om);
    triatt_calib_free(cal);
    triatt_scorer_free(s);
    return rc;
}

int triatt_replay_json(const char *json, size_t len, char **out)
{
    if (!json || !out) return LCX_EINVAL;
    *out = NULL;
    if (len > REPLAY_MAX_BYTES) return LCX_ELIMIT;
    cJSON *root = cJSON_ParseWithLength(json, len);
    if (!root) return LCX_EINVAL;
    lcx_buf b = {.cap = 256u << 20};
    int rc;
    const cJSON *cases = cJSON_GetObjectItemCaseSensitive(root, "cases");
    if (cJSON_IsArray(cases)) rc = replay_selection(cases, &b);
    else if (cJSON_GetObjectItemCaseSensitive(root, "inputs")) rc = replay_scoring(root, &b);
    else rc = LCX_EINVAL;
    cJSON_Delete(root);
    if (rc < 0) { lcx__buf_free(&b); return rc; }
    *out = lcx__buf_steal(&b, NULL);
    return LCX_OK;
}
