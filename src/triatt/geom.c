/* Geometry: validation, ω per frequency (with linear / YaRN rope scaling and per-frequency
 * divisors), the per-round trig sums, and the two float64 reference forms of the score
 * (paper form and collapsed form) that the SIMD kernels and the golden tests are checked
 * against. */
#include "triatt/internal.h"
#include <math.h>

static int triatt__n_attn_layers(const triatt_geometry *g, const unsigned char *mask)
{
    int n = 0;
    for (int l = 0; l < g->n_layers; l++) n += mask ? (mask[l] != 0) : 1;
    return n;
}

int triatt_geometry_check(const triatt_geometry *g)
{
    if (!g) return LCX_EINVAL;
    if (g->n_layers < 1 || g->n_layers > TRIATT_MAX_LAYERS) return LCX_EINVAL;
    if (g->n_heads < 1 || g->n_heads > TRIATT_MAX_HEADS) return LCX_EINVAL;
    if (g->n_kv_heads < 1 || g->n_kv_heads > g->n_heads || g->n_heads % g->n_kv_heads) return LCX_EINVAL;
    if (g->head_dim < 2 || g->head_dim > TRIATT_MAX_HEAD_DIM) return LCX_EINVAL;
    int n_rot = g->n_rot ? g->n_rot : g->head_dim;
    if (n_rot < 2 || n_rot > g->head_dim || (n_rot & 1)) return LCX_EINVAL;
    if (g->pairing != TRIATT_PAIR_HALF && g->pairing != TRIATT_PAIR_ADJACENT) return LCX_EINVAL;
    if (!(g->rope_theta > 1.0) || !isfinite(g->rope_theta)) return LCX_EINVAL;
    if (g->scaling != TRIATT_SCALE_NONE) {
        if (g->scaling != TRIATT_SCALE_LINEAR && g->scaling != TRIATT_SCALE_YARN) return LCX_EINVAL;
        if (!(g->scale_factor > 0) || !isfinite(g->scale_factor)) return LCX_EINVAL;
        if (g->scaling == TRIATT_SCALE_YARN && g->yarn_orig_ctx < 1) return LCX_EINVAL;
    }
    if (g->attn_layers && triatt__n_attn_layers(g, g->attn_layers) == 0) return LCX_EINVAL;
    for (int f = 0; g->freq_divisors && f < n_rot / 2; f++)
        if (!(g->freq_divisors[f] > 0) || !isfinite(g->freq_divisors[f])) return LCX_EINVAL;
    return LCX_OK;
}

/* YaRN (Peng et al.; HF _compute_yarn_parameters == llama.cpp ggml_rope_yarn_corr_dims):
 * frequencies that rotate fewer than beta_slow times over the original context are fully
 * interpolated (ω/factor), those rotating more than beta_fast times are kept (ω), with a
 * linear ramp between. */
static double yarn_corr_dim(int n_rot, int orig_ctx, double n_rotations, double base)
{
    return n_rot * log(orig_ctx / (n_rotations * 2.0 * M_PI)) / (2.0 * log(base));
}

int triatt_geometry_omega(const triatt_geometry *g, double *omega)
{
    int rc = triatt_geometry_check(g);
    if (rc < 0) return rc;
    int n_rot = g->n_rot ? g->n_rot : g->head_dim, fc = n_rot / 2;
    double lo = 0, hi = 0;
    if (g->scaling == TRIATT_SCALE_YARN) {
        double bf = g->yarn_beta_fast > 0 ? g->yarn_beta_fast : 32.0;
        double bs = g->yarn_beta_slow > 0 ? g->yarn_beta_slow : 1.0;
        lo = floor(yarn_corr_dim(n_rot, g->yarn_orig_ctx, bf, g->rope_theta));
        hi = ceil(yarn_corr_dim(n_rot, g->yarn_orig_ctx, bs, g->rope_theta));
        if (lo < 0) lo = 0;
        if (hi > n_rot - 1) hi = n_rot - 1;
        if (hi == lo) hi += 0.001;
    }
    for (int f = 0; f < fc; f++) {
        double w = pow(g->rope_theta, -2.0 * f / n_rot);
        if (g->scaling == TRIATT_SCALE_LINEAR) {
            w /= g->scale_factor;
        } else if (g->scaling == TRIATT_SCALE_YARN) {
            double ramp = (f - lo) / (hi - lo);
            ramp = ramp < 0 ? 0 : ramp > 1 ? 1 : ramp;
            double extrap = 1.0 - ramp;   /* weight of the unscaled frequency */
            w = (w / g->scale_factor) * (1.0 - extrap) + w * extrap;
        }
        if (g->freq_divisors) w /= g->freq_divisors[f];
        omega[f] = w;
    }
    return LCX_OK;
}

/* Computed in double: the fp32 phase (P+65536)·ω loses ~1e-3 rad (fixture README), and the
 * cost is 17·fc sin/cos per round. */
void triatt_trig_sums(const double *omega, int fc, double P, double *cs, double *sn)
{
    for (int f = 0; f < fc; f++) {
        double c = 0, s = 0;
        for (int o = 0; o < TRIATT_N_OFFSETS; o++) {
            double ph = (P + (double)(1 << o)) * omega[f];
            c += cos(ph);
            s += sin(ph);
        }
        cs[f] = c / TRIATT_N_OFFSETS;
        sn[f] = s / TRIATT_N_OFFSETS;
    }
}

static inline void pair_of(const triatt_geometry *g, int fc, const float *k, int f, double *re, double *im)
{
    if (g->pairing == TRIATT_PAIR_HALF) { *re = k[f]; *im = k[f + fc]; }
    else { *re = k[2 * f]; *im = k[2 * f + 1]; }
}

double triatt_score_reference_form(const triatt_geometry *g, const double *omega,
                                   const double *mr, const double *mi, const double *mabs,
                                   const float *k_rot, int32_t pos, double P,
                                   triatt_terms terms, double eps, bool agg_max)
{
    int n_rot = g->n_rot ? g->n_rot : g->head_dim, fc = n_rot / 2;
    double extra = 0, amp[TRIATT_MAX_HEAD_DIM / 2], phi[TRIATT_MAX_HEAD_DIM / 2];
    for (int f = 0; f < fc; f++) {
        double kr, ki;
        pair_of(g, fc, k_rot, f, &kr, &ki);
        /* invert RoPE: k = K·e^{−i·pos·ω} */
        double c = cos(pos * omega[f]), s = sin(pos * omega[f]);
        double pr = kr * c + ki * s, pi = ki * c - kr * s;
        /* q̄·conj(k) */
        double zr = mr[f] * pr + mi[f] * pi, zi = mi[f] * pr - mr[f] * pi;
        double qabs = sqrt(mr[f] * mr[f] + mi[f] * mi[f]), kabs = sqrt(pr * pr + pi * pi);
        amp[f] = qabs * kabs;
        phi[f] = atan2(zi, zr);
        double qabs_e = sqrt(mr[f] * mr[f] + mi[f] * mi[f] + eps), kabs_e = sqrt(pr * pr + pi * pi + eps);
        if (terms == TRIATT_TERMS_NO_MLR) extra += mabs[f] * kabs_e;
        else extra += (mabs[f] - qabs_e) * kabs_e;
    }
    if (terms == TRIATT_TERMS_TRIG_ONLY) extra = 0;
    if (terms == TRIATT_TERMS_EXTRA_ONLY) return extra;
    double acc = agg_max ? -INFINITY : 0;
    for (int o = 0; o < TRIATT_N_OFFSETS; o++) {
        double d = P - pos + (double)(1 << o), b = 0;
        for (int f = 0; f < fc; f++) b += amp[f] * cos(d * omega[f] + phi[f]);
        if (agg_max) { if (b + extra > acc) acc = b + extra; }
        else acc += b;
    }
    return agg_max ? acc : acc / TRIATT_N_OFFSETS + extra;
}

double triatt_score_collapsed_form(const triatt_geometry *g, const double *cs, const double *sn,
                                   const double *cr, const double *ci, const double *cabs,
                                   const float *k_rot, triatt_terms terms, double eps)
{
    int n_rot = g->n_rot ? g->n_rot : g->head_dim, fc = n_rot / 2;
    double trig = 0, extra = 0;
    for (int f = 0; f < fc; f++) {
        double kr, ki;
        pair_of(g, fc, k_rot, f, &kr, &ki);
        double A = cr[f] * kr + ci[f] * ki, B = ci[f] * kr - cr[f] * ki;
        trig += A * cs[f] - B * sn[f];
        double kabs = sqrt(kr * kr + ki * ki + eps);
        if (terms == TRIATT_TERMS_NO_MLR) extra += cabs[f] * kabs;
        else extra += (cabs[f] - sqrt(cr[f] * cr[f] + ci[f] * ci[f] + eps)) * kabs;
    }
    switch (terms) {
    case TRIATT_TERMS_TRIG_ONLY: return trig;
    case TRIATT_TERMS_EXTRA_ONLY: return extra;
    default: return trig + extra;
    }
}
