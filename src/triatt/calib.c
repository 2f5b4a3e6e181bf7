/* Online calibration of the query centres (SPEC §5).
 *
 * Per (layer, attention head, frequency f) we accumulate over pre-RoPE queries
 *   Σ q_r, Σ q_i, Σ sqrt(q_r² + q_i² + 1e-8)
 * and divide by the token count when finalising. The block centre of (layer, KV head) is the
 * mean of its GQA group's per-head means (the centre is linear in q, so this equals the
 * published "mean over tokens of the group mean").
 *
 * Why passes: the reference engines finalised in the middle of a forward pass — the layers
 * not yet reached kept zero centres — and Qwen2 counted some tokens twice. Here each pass is
 * staged: a layer adds its tokens at most once per pass, and the pass is merged only at
 * triatt_calib_end_pass when every attention layer added the same number of tokens. A pass
 * cut short (some layers missing, a layer added twice) is dropped whole.
 *
 * Stats file (triatt_calib_save / _load), little-endian, in this order:
 *   1. magic   8 bytes "TRIACAL1"
 *   2. version u32 = 1
 *   3. u32 n_layers, n_heads, n_kv_heads, head_dim, n_rot, pairing (0 half, 1 adjacent)
 *   4. u64 n_tokens (tokens behind the stats)
 *   5. f64 rope_theta (must match too: centres are pre-RoPE but ω must be the same model)
 *   6. n_layers bytes: attention-layer mask (0/1)
 *   7. f64 stats[n_layers][n_heads][3][fc]: mean real, mean imag, mean |q| (0 for
 *      non-attention layers); fc = n_rot/2
 *   8. u32 crc32c (Castagnoli) of every byte of 1..7
 * The loader checks size, magic, version, checksum, geometry and that every value is finite
 * (|x| < 1e30), and changes nothing unless all checks pass. */
#include "triatt/internal.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define CAL_MAGIC "TRIACAL1"
#define CAL_VERSION 1u
#define QEPS 1e-8

struct triatt_calib {
    int L, H, KV, G, hd, n_rot, fc;
    triatt_pairing pairing;
    double theta;
    unsigned char *attn;          /* (L) */
    int warmup;
    double alpha;
    double *pend;                 /* (L, H, 3, fc) sums of the pass in progress */
    int *pend_n;                  /* (L) tokens added this pass, -1 = added twice */
    double *tot;                  /* (L, H, 3, fc) sums of counted passes before finalisation */
    int64_t tot_n;
    double *head;                 /* (L, H, 3, fc) finalised per-head means */
    float *block;                 /* (L, KV, 3, fc) finalised block centres */
    unsigned char *head_set;      /* (L, H) set by triatt_calib_set_head */
    bool ready;
    int last_ignored;
    uint64_t gen;
};

static size_t hidx(const triatt_calib *c, int l, int h) { return ((size_t)l * c->H + h) * 3 * c->fc; }
static size_t bidx(const triatt_calib *c, int l, int g) { return ((size_t)l * c->KV + g) * 3 * c->fc; }

int triatt_calib_init(const triatt_geometry *g, int warmup, double ema_alpha, triatt_calib **out)
{
    if (!out) return LCX_EINVAL;
    *out = NULL;
    if (triatt_geometry_check(g) < 0 || warmup < 1 || !(ema_alpha >= 0 && ema_alpha <= 1)) return LCX_EINVAL;
    triatt_calib *c = calloc(1, sizeof *c);
    if (!c) return LCX_ENOMEM;
    c->L = g->n_layers; c->H = g->n_heads; c->KV = g->n_kv_heads; c->G = c->H / c->KV;
    c->hd = g->head_dim; c->n_rot = g->n_rot ? g->n_rot : g->head_dim; c->fc = c->n_rot / 2;
    c->pairing = g->pairing; c->theta = g->rope_theta;
    c->warmup = warmup; c->alpha = ema_alpha;
    size_t nh = (size_t)c->L * c->H * 3 * c->fc, nb = (size_t)c->L * c->KV * 3 * c->fc;
    c->attn = malloc(c->L);
    c->pend = calloc(nh, sizeof(double));
    c->tot = calloc(nh, sizeof(double));
    c->head = calloc(nh, sizeof(double));
    c->block = calloc(nb, sizeof(float));
    c->pend_n = calloc(c->L, sizeof(int));
    c->head_set = calloc((size_t)c->L * c->H, 1);
    if (!c->attn || !c->pend || !c->tot || !c->head || !c->block || !c->pend_n || !c->head_set) {
        triatt_calib_free(c);
        return LCX_ENOMEM;
    }
    for (int l = 0; l < c->L; l++) c->attn[l] = g->attn_layers ? (g->attn_layers[l] != 0) : 1;
    *out = c;
    return LCX_OK;
}

void triatt_calib_free(triatt_calib *c)
{
    if (!c) return;
    free(c->attn); free(c->pend); free(c->tot); free(c->head); free(c->block);
    free(c->pend_n); free(c->head_set);
    free(c);
}

int triatt_calib_add(triatt_calib *c, int layer, const float *q, int n_tokens, size_t stride)
{
    if (!c || !q || layer < 0 || layer >= c->L || !c->attn[layer] || n_tokens < 0) return LCX_EINVAL;
    if (c->pend_n[layer] != 0) {   /* second add of the same layer: the pass is void */
        c->pend_n[layer] = -1;
        return LCX_ESTATE;
    }
    if (n_tokens == 0) return LCX_OK;
    if (!stride) stride = (size_t)c->H * c->hd;
    const int fc = c->fc;
    for (int t = 0; t < n_tokens; t++) {
        const float *qt = q + (size_t)t * stride;
        for (int h = 0; h < c->H; h++) {
            const float *x = qt + (size_t)h * c->hd;
            double *s = c->pend + hidx(c, layer, h);
            for (int f = 0; f < fc; f++) {
                double qr, qi;
                if (c->pairing == TRIATT_PAIR_HALF) { qr = x[f]; qi = x[f + fc]; }
                else { qr = x[2 * f]; qi = x[2 * f + 1]; }
                s[f] += qr;
                s[fc + f] += qi;
                s[2 * fc + f] += sqrt(qr * qr + qi * qi + QEPS);
            }
        }
    }
    c->pend_n[layer] = n_tokens;
    return LCX_OK;
}

static void reset_pass(triatt_calib *c)
{
    memset(c->pend, 0, (size_t)c->L * c->H * 3 * c->fc * sizeof(double));
    memset(c->pend_n, 0, (size_t)c->L * sizeof(int));
}

void triatt_calib_abort_pass(triatt_calib *c)
{
    if (c) reset_pass(c);
}

/* Block centres = mean over the GQA group of the per-head means. */
static void derive_blocks(triatt_calib *c)
{
    const int fc = c->fc;
    for (int l = 0; l < c->L; l++)
        for (int g = 0; g < c->KV; g++) {
            float *b = c->block + bidx(c, l, g);
            for (int j = 0; j < 3 * fc; j++) {
                double s = 0;
                for (int h = g * c->G; h < (g + 1) * c->G; h++) s += c->head[hidx(c, l, h) + j];
                b[j] = (float)(s / c->G);
            }
        }
    c->gen++;
}

int triatt_calib_end_pass(triatt_calib *c)
{
    if (!c) return LCX_EINVAL;
    int n = 0;
    bool any = false, ok = true;
    for (int l = 0; l < c->L; l++) {
        if (!c->attn[l]) continue;
        int k = c->pend_n[l];
        if (k != 0) any = true;
        if (k <= 0 || (n && k != n)) ok = false;
        if (k > 0 && !n) n = k;
    }
    c->last_ignored = 0;
    if (!any) { reset_pass(c); return 0; }
    if (!ok) { c->last_ignored = 1; reset_pass(c); return 0; }  /* cut short / double-counted */
    size_t nh = (size_t)c->L * c->H * 3 * c->fc;
    int rc = 0;
    if (!c->ready) {
        for (size_t i = 0; i < nh; i++) c->tot[i] += c->pend[i];
        c->tot_n += n;
        if (c->tot_n >= c->warmup) {
            for (size_t i = 0; i < nh; i++) c->head[i] = c->tot[i] / (double)c->tot_n;
            derive_blocks(c);
            c->ready = true;
            rc = 1;
        }
    } else if (c->alpha > 0) {
        /* EMA re-calibration: stats ← (1−α)·stats + α·(this pass's mean) */
        for (size_t i = 0; i < nh; i++)
            c->head[i] = (1.0 - c->alpha) * c->head[i] + c->alpha * (c->pend[i] / n);
        c->tot_n += n;
        derive_blocks(c);
        rc = 1;
    }
    reset_pass(c);
    return rc;
}

/* 1 when the last end_pass dropped a pass (for the driver's counters). */
int triatt__calib_last_ignored(const triatt_calib *c) { return c ? c->last_ignored : 0; }

bool triatt_calib_ready(const triatt_calib *c) { return c && c->ready; }
int64_t triatt_calib_tokens(const triatt_calib *c) { return c ? c->tot_n : 0; }
uint64_t triatt_calib_generation(const triatt_calib *c) { return c ? c->gen : 0; }

int triatt_calib_block(const triatt_calib *c, int layer, int kv, const float **cr,
                       const float **ci, const float **cabs)
{
    if (!c || layer < 0 || layer >= c->L || kv < 0 || kv >= c->KV || !c->attn[layer]) return LCX_EINVAL;
    if (!c->ready) return LCX_ESTATE;
    const float *b = c->block + bidx(c, layer, kv);
    if (cr) *cr = b;
    if (ci) *ci = b + c->fc;
    if (cabs) *cabs = b + 2 * c->fc;
    return LCX_OK;
}

int triatt_calib_head(const triatt_calib *c, int layer, int head, const double **mr,
                      const double **mi, const double **mabs)
{
    if (!c || layer < 0 || layer >= c->L || head < 0 || head >= c->H || !c->attn[layer]) return LCX_EINVAL;
    if (!c->ready) return LCX_ESTATE;
    const double *b = c->head + hidx(c, layer, head);
    if (mr) *mr = b;
    if (mi) *mi = b + c->fc;
    if (mabs) *mabs = b + 2 * c->fc;
    return LCX_OK;
}

int triatt_calib_set_head(triatt_calib *c, int layer, int head, const double *mr,
                          const double *mi, const double *mabs)
{
    if (!c || !mr || !mi || !mabs || layer < 0 || layer >= c->L || head < 0 || head >= c->H ||
        !c->attn[layer])
        return LCX_EINVAL;
    double *b = c->head + hidx(c, layer, head);
    memcpy(b, mr, c->fc * sizeof(double));
    memcpy(b + c->fc, mi, c->fc * sizeof(double));
    memcpy(b + 2 * c->fc, mabs, c->fc * sizeof(double));
    c->head_set[(size_t)layer * c->H + head] = 1;
    bool all = true;
    for (int l = 0; l < c->L && all; l++)
        for (int h = 0; h < c->H; h++)
            if (c->attn[l] && !c->head_set[(size_t)l * c->H + h]) { all = false; break; }
    if (all || c->ready) {
        c->ready = true;
        derive_blocks(c);
    }
    return LCX_OK;
}

/* ---- stats file ---- */
static size_t file_size(const triatt_calib *c)
{
    return 8 + 4 + 6 * 4 + 8 + 8 + (size_t)c->L + (size_t)c->L * c->H * 3 * c->fc * 8 + 4;
}

int triatt_calib_save(const triatt_calib *c, const char *path)
{
    if (!c || !path) return LCX_EINVAL;
    if (!c->ready) return LCX_ESTATE;
    size_t n = file_size(c);
    unsigned char *buf = malloc(n), *p = buf;
    if (!buf) return LCX_ENOMEM;
    uint32_t u[7] = {CAL_VERSION, (uint32_t)c->L, (uint32_t)c->H, (uint32_t)c->KV, (uint32_t)c->hd,
                     (uint32_t)c->n_rot, (uint32_t)c->pairing};
    uint64_t nt = (uint64_t)c->tot_n;
    memcpy(p, CAL_MAGIC, 8); p += 8;
    memcpy(p, u, sizeof u); p += sizeof u;
    memcpy(p, &nt, 8); p += 8;
    memcpy(p, &c->theta, 8); p += 8;
    memcpy(p, c->attn, c->L); p += c->L;
    size_t nh = (size_t)c->L * c->H * 3 * c->fc;
    for (int l = 0; l < c->L; l++)
        for (size_t i = 0; i < (size_t)c->H * 3 * c->fc; i++) {
            double v = c->attn[l] ? c->head[(size_t)l * c->H * 3 * c->fc + i] : 0.0;
            memcpy(p, &v, 8); p += 8;
        }
    (void)nh;
    uint32_t crc = lcx__crc32c(0, buf, (size_t)(p - buf));
    memcpy(p, &crc, 4); p += 4;
    int rc = lcx__write_file_atomic(path, buf, n);
    free(buf);
    return rc < 0 ? rc : LCX_OK;
}

int triatt_calib_load(triatt_calib *c, const char *path)
{
    if (!c || !path) return LCX_EINVAL;
    size_t want = file_size(c), len = 0;
    char *data = NULL;
    /* hard cap: one byte more than the exact size this geometry needs */
    int rc = lcx__read_file(path, want + 1, &data, &len);
    if (rc == LCX_ELIMIT) return LCX_ECORRUPT;
    if (rc < 0) return rc;
    const unsigned char *p = (const unsigned char *)data;
    rc = LCX_OK;
    uint32_t u[7], crc;
    uint64_t nt;
    double theta;
    if (len < 8 + sizeof u || memcmp(p, CAL_MAGIC, 8)) { rc = LCX_ECORRUPT; goto out; }
    memcpy(u, p + 8, sizeof u);
    if (u[0] != CAL_VERSION) { rc = LCX_ECORRUPT; goto out; }
    if (u[1] != (uint32_t)c->L || u[2] != (uint32_t)c->H || u[3] != (uint32_t)c->KV ||
        u[4] != (uint32_t)c->hd || u[5] != (uint32_t)c->n_rot || u[6] != (uint32_t)c->pairing) {
        rc = LCX_EMISMATCH;
        goto out;
    }
    if (len != want) { rc = LCX_ECORRUPT; goto out; }
    memcpy(&crc, p + len - 4, 4);
    if (crc != lcx__crc32c(0, p, len - 4)) { rc = LCX_ECORRUPT; goto out; }
    p += 8 + sizeof u;
    memcpy(&nt, p, 8); p += 8;
    memcpy(&theta, p, 8); p += 8;
    if (theta != c->theta) { rc = LCX_EMISMATCH; goto out; }
    if (memcmp(p, c->attn, c->L)) { rc = LCX_EMISMATCH; goto out; }
    p += c->L;
    size_t nh = (size_t)c->L * c->H * 3 * c->fc;
    for (size_t i = 0; i < nh; i++) {
        double v;
        memcpy(&v, p + i * 8, 8);
        if (!isfinite(v) || fabs(v) > 1e30) { rc = LCX_ECORRUPT; goto out; }
    }
    for (size_t i = 0; i < nh; i++) memcpy(&c->head[i], p + i * 8, 8);
    c->tot_n = (int64_t)nt;
    c->ready = true;
    derive_blocks(c);
out:
    free(data);
    return rc;
}
