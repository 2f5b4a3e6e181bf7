/* `longctx triatt simulate`: which eviction direction keeps the keys that matter?
 *
 * Synthetic stream (per seed): a 2-layer, 4-head / 2-KV-head, head_dim 32 model (θ 1e4,
 * half pairing). Each head has a fixed pre-RoPE query centre μ_h (N(0,1) per dim) and every
 * query is μ_h + noise·N(0,1) — the per-frequency query concentration TriAttention relies on.
 * Ordinary keys are N(0,1) pre-RoPE, rotated to their position. A planted set of keys is
 * aligned with the *future* query centre: the ideal key c_f·e^{i·T·ω_f} (c = the group's
 * centre, T = the position just past the stream's end, so a query from the centre at T gives
 * it its largest logit) mixed with an ordinary key (cosine `align`, default 0.6) and
 * rescaled to the ordinary key's norm (no norm give-away). Tokens arrive in passes of 64 (calibration per pass, warmup 256); after each
 * pass the production V3 driver (window 128, prefix 32, divide 128, 8 segments) runs with
 * budget = 90% or 70% of the stream. At the end we count the planted keys still cached, for
 * keep_high and evict_high (trig), and the random and recency controls. */
#include "triatt/internal.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define SL 2
#define SH 4
#define SKV 2
#define SD 32
#define SFC (SD / 2)
#define PASS 64

typedef struct {
    int n;                 /* stream length */
    float *keys;           /* (SL, SKV, n, SD) post-RoPE keys by position */
    int32_t *live;         /* (n) positions of live cells, slot order */
} simkeys;

/* One seed's world, shared by every policy and budget so they see identical streams. */
typedef struct {
    int n, n_q, n_pl;
    float *keys;           /* (SL, SKV, n, SD) */
    float *q;              /* (n_q, SL, SH, SD) queries of the calibration passes */
    unsigned char *planted;/* (n) */
} simworld;

static const float *sim_get(void *ud, int l, int g, int c0, int n, float *scratch, size_t *stride)
{
    simkeys *k = ud;
    for (int i = 0; i < n; i++)
        memcpy(scratch + (size_t)i * SD, k->keys + (((size_t)l * SKV + g) * k->n + k->live[c0 + i]) * SD,
               SD * sizeof(float));
    *stride = SD;
    return scratch;
}

static double gauss(uint64_t *s)
{
    double u = triatt__rng_unit(s) + 1e-300, v = triatt__rng_unit(s);
    return sqrt(-2 * log(u)) * cos(2 * M_PI * v);
}

static void world_free(simworld *w)
{
    free(w->keys); free(w->q); free(w->planted);
    memset(w, 0, sizeof *w);
}

static int world_make(const triatt_sim_params *p, uint64_t seed, simworld *w)
{
    const triatt_geometry g = {.n_layers = SL, .n_heads = SH, .n_kv_heads = SKV, .head_dim = SD, .n_rot = SD,
                               .pairing = TRIATT_PAIR_HALF, .rope_theta = 10000};
    const int n = p->n_tokens;
    double omega[SFC];
    triatt_geometry_omega(&g, omega);
    uint64_t rs = seed * 0x9E3779B97F4A7C15ull + 17;
    memset(w, 0, sizeof *w);
    w->n = n;
    w->n_q = LCX_MIN(n, 512);   /* calibration stops at warmup (256); no EMA */
    w->keys = malloc((size_t)SL * SKV * n * SD * sizeof(float));
    w->q = malloc((size_t)w->n_q * SL * SH * SD * sizeof(float));
    w->planted = calloc(n, 1);
    if (!w->keys || !w->q || !w->planted) { world_free(w); return LCX_ENOMEM; }
    float mu[SL][SH][SD];
    for (int l = 0; l < SL; l++)
        for (int h = 0; h < SH; h++)
            for (int d = 0; d < SD; d++) mu[l][h][d] = (float)gauss(&rs);
    for (int t = 0; t < w->n_q; t++)
        for (int l = 0; l < SL; l++)
            for (int h = 0; h < SH; h++)
                for (int d = 0; d < SD; d++)
                    w->q[(((size_t)t * SL + l) * SH + h) * SD + d] = (float)(mu[l][h][d] + p->noise * gauss(&rs));
    /* planted positions: uniform over the evictable range */
    int lo = 32, hi = n - 128;   /* [prefix, window): where eviction can reach */
    while (w->n_pl < p->n_planted && hi > lo) {
        int pos = lo + (int)(triatt__rng_unit(&rs) * (hi - lo));
        if (!w->planted[pos]) { w->planted[pos] = 1; w->n_pl++; }
    }
    const double T = n + 1;
    for (int l = 0; l < SL; l++)
        for (int kv = 0; kv < SKV; kv++)
            for (int pos = 0; pos < n; pos++) {
                float *K = w->keys + (((size_t)l * SKV + kv) * n + pos) * SD;
                double re[SFC], im[SFC], norm2 = 0, nr2 = 0;
                for (int f = 0; f < SFC; f++) {
                    /* ordinary key: N(0,1) pre-RoPE rotated to its position */
                    double a = gauss(&rs), b = gauss(&rs), ph = pos * omega[f];
                    re[f] = a * cos(ph) - b * sin(ph);
                    im[f] = a * sin(ph) + b * cos(ph);
                    nr2 += re[f] * re[f] + im[f] * im[f];
                }
                if (w->planted[pos]) {
                    /* aligned part: the group centre rotated to the future position T, mixed
                     * with the random key (weights 0.6 / 0.8 of unit vectors, so cosine ≈ 0.6
                     * with the ideal key) and rescaled to the random key's norm */
                    double ar[SFC], ai[SFC], na2 = 0;
                    for (int f = 0; f < SFC; f++) {
                        double a = 0, b = 0;
                        for (int h = kv * (SH / SKV); h < (kv + 1) * (SH / SKV); h++) {
                            a += mu[l][h][f] / (SH / SKV);
                            b += mu[l][h][f + SFC] / (SH / SKV);
                        }
                        double ph = T * omega[f];
                        ar[f] = a * cos(ph) - b * sin(ph);
                        ai[f] = a * sin(ph) + b * cos(ph);
                        na2 += ar[f] * ar[f] + ai[f] * ai[f];
                    }
                    double sa = p->align / sqrt(na2 + 1e-12), sr = sqrt(1 - p->align * p->align) / sqrt(nr2 + 1e-12);
                    for (int f = 0; f < SFC; f++) {
                        re[f] = sa * ar[f] + sr * re[f];
                        im[f] = sa * ai[f] + sr * im[f];
                        norm2 += re[f] * re[f] + im[f] * im[f];
                    }
                    double beta = sqrt(nr2 / (norm2 + 1e-12));
                    for (int f = 0; f < SFC; f++) { re[f] *= beta; im[f] *= beta; }
                }
                for (int f = 0; f < SFC; f++) { K[f] = (float)re[f]; K[f + SFC] = (float)im[f]; }
            }
    return LCX_OK;
}

/* one run: returns the fraction of planted keys that survive, or < 0 on error */
static double run_once(const simworld *wd, uint64_t seed, double budget_frac, int policy)
{
    const triatt_geometry g = {.n_layers = SL, .n_heads = SH, .n_kv_heads = SKV, .head_dim = SD, .n_rot = SD,
                               .pairing = TRIATT_PAIR_HALF, .rope_theta = 10000};
    const int n = wd->n;
    simkeys sk = {.n = n, .keys = wd->keys};
    sk.live = malloc((size_t)n * sizeof(int32_t));
    int32_t *out = malloc((size_t)n * sizeof(int32_t));
    int32_t *keep = malloc((size_t)n * sizeof(int32_t));
    unsigned char *gone = calloc(n, 1);
    float *q = malloc((size_t)PASS * SH * SD * sizeof(float));
    triatt_ctx *t = NULL;
    double result = -1;
    if (!sk.live || !out || !keep || !gone || !q) goto out;
    triatt_config cfg;
    triatt_config_default(&cfg);
    cfg.enabled = true;
    cfg.budget = (int)(n * budget_frac);
    cfg.warmup = 256;
    cfg.seed = seed * 31 + 7;
    cfg.mode = policy == 2 ? TRIATT_MODE_RANDOM : policy == 3 ? TRIATT_MODE_RECENCY : TRIATT_MODE_TRIG;
    cfg.direction = policy == 1 ? TRIATT_EVICT_HIGH : TRIATT_KEEP_HIGH;
    if (triatt_init(&g, &cfg, &t) < 0) goto out;
    triatt_keys keys = {.get = sim_get, .ud = &sk};
    int n_live = 0;
    for (int p0 = 0; p0 < n; p0 += PASS) {
        int m = LCX_MIN(PASS, n - p0);
        if (p0 + m <= wd->n_q) {
            for (int l = 0; l < SL; l++) {
                for (int i = 0; i < m; i++)
                    memcpy(q + (size_t)i * SH * SD, wd->q + (((size_t)(p0 + i) * SL + l) * SH) * SD,
                           SH * SD * sizeof(float));
                if (triatt_observe_queries(t, l, q, m, 0) < 0) goto out;
            }
            if (triatt_end_pass(t) < 0) goto out;
        }
        for (int i = 0; i < m; i++) sk.live[n_live++] = p0 + i;
        int k = triatt_maybe_evict(t, &keys, sk.live, n_live, out);
        if (k < 0) goto out;
        if (k > 0) {
            memset(gone, 0, n);
            for (int i = 0; i < k; i++) gone[out[i]] = 1;
            int w = 0;
            for (int c = 0; c < n_live; c++)
                if (!gone[c]) keep[w++] = sk.live[c];
            memcpy(sk.live, keep, (size_t)w * sizeof(int32_t));
            n_live = w;
        }
    }
    int surv = 0;
    for (int c = 0; c < n_live; c++) surv += wd->planted[sk.live[c]];
    result = wd->n_pl ? (double)surv / wd->n_pl : 0;
out:
    triatt_free(t);
    free(sk.live); free(out); free(keep); free(gone); free(q);
    return result;
}

int triatt_simulate(const triatt_sim_params *pin, triatt_sim_result *r)
{
    if (!pin || !r) return LCX_EINVAL;
    triatt_sim_params p = *pin;
    if (p.n_seeds <= 0) p.n_seeds = 200;
    if (p.n_tokens <= 0) p.n_tokens = 4096;
    if (p.n_planted <= 0) p.n_planted = 32;
    if (!(p.noise > 0)) p.noise = 1.0;
    if (!(p.align > 0)) p.align = 0.6;
    if (p.align > 1) return LCX_EINVAL;
    if (p.n_seeds > 100000 || p.n_tokens < 1024 || p.n_tokens > (1 << 20) || p.n_planted > p.n_tokens / 4)
        return LCX_EINVAL;
    memset(r, 0, sizeof *r);
    double sum[2][4] = {{0}}, sq[2][4] = {{0}};
    static const double budgets[2] = {0.9, 0.7};
    for (int s = 0; s < p.n_seeds; s++) {
        simworld w;
        uint64_t seed = p.seed0 + (uint64_t)s;
        if (world_make(&p, seed, &w) < 0) return LCX_ENOMEM;
        for (int b = 0; b < 2; b++)
            for (int k = 0; k < 4; k++) {
                double v = run_once(&w, seed, budgets[b], k);
                if (v < 0) { world_free(&w); return LCX_ENOMEM; }
                sum[b][k] += v;
                sq[b][k] += v * v;
            }
        world_free(&w);
    }
    for (int b = 0; b < 2; b++)
        for (int k = 0; k < 4; k++) {
            double m = sum[b][k] / p.n_seeds, var = sq[b][k] / p.n_seeds - m * m;
            r->survive[b][k] = m;
            r->stderr_[b][k] = p.n_seeds > 1 ? sqrt((var > 0 ? var : 0) / (p.n_seeds - 1)) : 0;
        }
    r->n_seeds = p.n_seeds;
    return LCX_OK;
}
