/* BERT encoder forward pass on the CPU (BertModel, then mean / CLS pooling or the
 * BertForSequenceClassification head).
 *
 * A padded batch is packed first: the T real tokens of all sequences sit back to back, so the
 * matmuls never compute padding and the padding mask needs no -inf additions (each sequence
 * attends over its own rows only, which is what the additive mask achieves in HF).
 *   embeddings: word[id] + position[p] + token_type[type], LayerNorm
 *   per layer:  q,k,v = x W^T + b;  per (sequence, head): softmax(q k^T / sqrt(d)) v
 *               x = LN(x + att W_o^T + b_o);  x = LN(x + GELU(x W_up^T + b_up) W_down^T + b_down)
 * Matmuls are the engine's kernels (eng__matmul_ws: AVX-512 / AVX2 dispatched, activations
 * converted to the weight's vec-dot type exactly as for the LLM path: F32 stays F32, F16
 * weights see F16 activations, Q8_0 weights Q8_0 activations), split into (row block x token
 * block) tiles over the engine's worker pool; bias and GELU are applied to each tile right
 * after it is computed, while it is in cache. Float weights go through the packed-panel
 * GEMM (gemm.h), and so do the attention products (K and V head slices packed per call). */
#include <immintrin.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "neural/nn_internal.h"
#include "util/simd.h"
#include "util/util.h"

#define TILE_ROWS 64
#define TILE_TOKS 64

/* ------------------------------------------------------------------ vector exp / GELU */

/* erf by Abramowitz & Stegun 7.1.26 (|error| <= 1.5e-7) */
static inline __m256 erf8(__m256 x)
{
    const __m256 sign = _mm256_and_ps(x, _mm256_set1_ps(-0.0f));
    const __m256 a = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), x);
    const __m256 t = _mm256_div_ps(_mm256_set1_ps(1.0f), _mm256_fmadd_ps(a, _mm256_set1_ps(0.3275911f), _mm256_set1_ps(1.0f)));
    __m256 p = _mm256_set1_ps(1.061405429f);
    p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(-1.453152027f));
    p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(1.421413741f));
    p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(-0.284496736f));
    p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(0.254829592f));
    p = _mm256_mul_ps(p, t);
    const __m256 e = lcx__exp8_ps(_mm256_mul_ps(_mm256_sub_ps(_mm256_setzero_ps(), a), a));
    const __m256 y = _mm256_fnmadd_ps(p, e, _mm256_set1_ps(1.0f));
    return _mm256_or_ps(y, sign);
}

static inline __m256 gelu8(lcx_nn_gelu g, __m256 x)
{
    const __m256 half = _mm256_set1_ps(0.5f);
    if (g == LCX_NN_GELU_ERF) {
        const __m256 e = erf8(_mm256_mul_ps(x, _mm256_set1_ps(0.70710678118654752f)));
        return _mm256_mul_ps(_mm256_mul_ps(half, x), _mm256_add_ps(_mm256_set1_ps(1.0f), e));
    }
    /* 0.5 x (1 + tanh(u)) = x (1 - 1 / (exp(2u) + 1)), u = sqrt(2/pi) (x + 0.044715 x^3) */
    const __m256 x3 = _mm256_mul_ps(_mm256_mul_ps(x, x), x);
    const __m256 u = _mm256_mul_ps(_mm256_set1_ps(0.79788456080286536f), _mm256_fmadd_ps(x3, _mm256_set1_ps(0.044715f), x));
    const __m256 e = lcx__exp8_ps(_mm256_add_ps(u, u));
    const __m256 s = _mm256_div_ps(_mm256_set1_ps(1.0f), _mm256_add_ps(e, _mm256_set1_ps(1.0f)));
    return _mm256_mul_ps(x, _mm256_sub_ps(_mm256_set1_ps(1.0f), s));
}

float lcx__nn_gelu_erf_ref(float x) { return (float)(0.5 * x * (1.0 + erf(x / sqrt(2.0)))); }
float lcx__nn_gelu_tanh_ref(float x)
{
    return (float)(0.5 * x * (1.0 + tanh(0.7978845608028654 * (x + 0.044715 * (double)x * x * x))));
}

void lcx__nn_gelu(lcx_nn_gelu g, float *x, int64_t n)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, gelu8(g, _mm256_loadu_ps(x + i)));
    if (i < n) {
        float t[8] = {0};
        memcpy(t, x + i, (size_t)(n - i) * sizeof(float));
        _mm256_storeu_ps(t, gelu8(g, _mm256_loadu_ps(t)));
        memcpy(x + i, t, (size_t)(n - i) * sizeof(float));
    }
}

void lcx__nn_exp(float *x, int64_t n)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, lcx__exp8_ps(_mm256_loadu_ps(x + i)));
    if (i < n) {
        float t[8] = {0};
        memcpy(t, x + i, (size_t)(n - i) * sizeof(float));
        _mm256_storeu_ps(t, lcx__exp8_ps(_mm256_loadu_ps(t)));
        memcpy(x + i, t, (size_t)(n - i) * sizeof(float));
    }
}

/* ------------------------------------------------------------------ pieces */

/* x = LN(x + r) (r may be NULL); two passes, 8-lane float partial sums (rows are <= 8192
 * wide, so float accumulation costs < 1e-6 relative) */
static void layer_norm(float *x, const float *r, const float *w, const float *b, int64_t n, float eps)
{
    __m256 s8 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(x + i);
        if (r) v = _mm256_add_ps(v, _mm256_loadu_ps(r + i)), _mm256_storeu_ps(x + i, v);
        s8 = _mm256_add_ps(s8, v);
    }
    float s = lcx_hsum8(s8);
    for (; i < n; i++) {
        if (r) x[i] += r[i];
        s += x[i];
    }
    const float mean = s / (float)n;
    const __m256 m8 = _mm256_set1_ps(mean);
    __m256 q8 = _mm256_setzero_ps();
    for (i = 0; i + 8 <= n; i += 8) {
        const __m256 d = _mm256_sub_ps(_mm256_loadu_ps(x + i), m8);
        q8 = _mm256_fmadd_ps(d, d, q8);
    }
    float q = lcx_hsum8(q8);
    for (; i < n; i++) q += (x[i] - mean) * (x[i] - mean);
    const float inv = 1.0f / sqrtf(q / (float)n + eps);
    const __m256 i8 = _mm256_set1_ps(inv);
    for (i = 0; i + 8 <= n; i += 8) {
        const __m256 d = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), m8), i8);
        _mm256_storeu_ps(x + i, _mm256_fmadd_ps(d, _mm256_loadu_ps(w + i), _mm256_loadu_ps(b + i)));
    }
    for (; i < n; i++) x[i] = (x[i] - mean) * inv * w[i] + b[i];
}

/* softmax of row[0..n) * scale, in place */
static void softmax(float *row, int n, float scale)
{
    const __m256 sc = _mm256_set1_ps(scale);
    __m256 m8 = _mm256_set1_ps(-INFINITY);
    int i = 0;
    for (; i + 8 <= n; i += 8) m8 = _mm256_max_ps(m8, _mm256_loadu_ps(row + i));
    float tmp[8], mx = -INFINITY;
    _mm256_storeu_ps(tmp, m8);
    for (int k = 0; k < 8; k++) mx = tmp[k] > mx ? tmp[k] : mx;
    for (; i < n; i++) mx = row[i] > mx ? row[i] : mx;
    const __m256 mm = _mm256_set1_ps(mx);
    for (i = 0; i + 8 <= n; i += 8) _mm256_storeu_ps(row + i, _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(row + i), mm), sc));
    for (; i < n; i++) row[i] = (row[i] - mx) * scale;
    lcx__nn_exp(row, n);
    __m256 s8 = _mm256_setzero_ps();
    for (i = 0; i + 8 <= n; i += 8) s8 = _mm256_add_ps(s8, _mm256_loadu_ps(row + i));
    float sum = lcx_hsum8(s8);
    for (; i < n; i++) sum += row[i];
    const float inv = 1.0f / sum;
    const __m256 iv = _mm256_set1_ps(inv);
    for (i = 0; i + 8 <= n; i += 8) _mm256_storeu_ps(row + i, _mm256_mul_ps(_mm256_loadu_ps(row + i), iv));
    for (; i < n; i++) row[i] *= inv;
}

typedef struct {
    lcx_nn_model *m;
    /* matmul job */
    const lcx__nn_mat *w;
    const uint8_t *xq;
    size_t xrb;
    int64_t T;
    float *y;
    const float *bias;
    bool gelu;
    long n_rb;
    /* attention job */
    const float *q, *k, *v;
    float *att;
    const int *off, *len;
    int n_seq, L_max;
    float *sbuf, *vtbuf;     /* per thread */
    size_t sbuf_n, vt_n;
    uint8_t *mws;            /* per thread matmul workspaces */
} job;

static void mm_chunk(void *arg, long c, int ith)
{
    job *j = arg;
    const lcx__nn_mat *w = j->w;
    long rb = c % j->n_rb, tb = c / j->n_rb;
    int64_t r0 = rb * TILE_ROWS, r1 = LCX_MIN(r0 + TILE_ROWS, w->n_out);
    int64_t t0 = tb * TILE_TOKS, nt = LCX_MIN((int64_t)TILE_TOKS, j->T - t0);
    float *y = j->y + t0 * w->n_out;
    if (w->packed)
        lcx__nn_gemm(&w->pk, (const float *)(j->xq + (size_t)t0 * j->xrb), w->n_in, nt, r0 / LCX_NN_PANEL,
                     (r1 + LCX_NN_PANEL - 1) / LCX_NN_PANEL, y, w->n_out);
    else
    eng__matmul_ws((eng_type)w->type, w->data, w->row_bytes, w->n_in, r0, r1, j->xq + (size_t)t0 * j->xrb, j->xrb, nt,
                  y, w->n_out, j->mws + (size_t)ith * ENG_MATMUL_WS_BYTES, ENG_MATMUL_WS_BYTES);
    for (int64_t t = 0; t < nt; t++) {
        float *row = y + t * w->n_out;
        if (j->bias) {
            int64_t r = r0;
            for (; r + 8 <= r1; r += 8)
                _mm256_storeu_ps(row + r, _mm256_add_ps(_mm256_loadu_ps(row + r), _mm256_loadu_ps(j->bias + r)));
            for (; r < r1; r++) row[r] += j->bias[r];
        }
        if (j->gelu) lcx__nn_gelu(j->m->info.gelu, row + r0, r1 - r0);
    }
}

/* activations X (T rows of n_in floats) in the weight's vec-dot type; returns the row bytes */
static size_t prep_x(const lcx__nn_mat *w, const float *x, int64_t T, uint8_t *xq, const uint8_t **out)
{
    eng_type vt = eng__vec_dot_type((eng_type)w->type);
    if (vt == ENG_T_F32 || w->packed) { *out = (const uint8_t *)x; return (size_t)w->n_in * sizeof(float); }
    size_t xrb = eng__row_bytes(vt, w->n_in);
    for (int64_t t = 0; t < T; t++) eng__quantize_row(vt, x + t * w->n_in, xq + (size_t)t * xrb, w->n_in);
    *out = xq;
    return xrb;
}

/* y (T x n_out) = x W^T + bias, then GELU when asked */
static void matmul(job *j, const lcx__nn_mat *w, const float *x, int64_t T, uint8_t *xq_buf, float *y,
                   const float *bias, bool gelu, bool x_ready)
{
    const uint64_t t0 = lcx__now_ns();
    if (!x_ready) j->xrb = prep_x(w, x, T, xq_buf, &j->xq);
    j->w = w;
    j->T = T;
    j->y = y;
    j->bias = bias;
    j->gelu = gelu;
    j->n_rb = (long)((w->n_out + TILE_ROWS - 1) / TILE_ROWS);
    long n_tb = (long)((T + TILE_TOKS - 1) / TILE_TOKS);
    eng__pool_run(j->m->pool, mm_chunk, j, j->n_rb * n_tb);
    j->m->prof_mm_ns += lcx__now_ns() - t0;
}

/* One (sequence, head): both products on the packed GEMM. K's head slice is re-laid as
 * panels of 32 keys (QK^T: keys are the "outputs"), V's as panels of 32 head dims (PV:
 * keys are the reduction); S holds the probabilities. */
static void att_chunk(void *arg, long c, int ith)
{
    job *j = arg;
    const lcx_nn_info *inf = &j->m->info;
    const int H = inf->n_head, D = inf->dim, d = D / H;
    const int s = (int)(c / H), h = (int)(c % H);
    const int L = j->len[s];
    const int64_t base = j->off[s];
    float *S = j->sbuf + (size_t)ith * j->sbuf_n;
    float *Pk = j->vtbuf + (size_t)ith * j->vt_n;
    const int P = LCX_NN_PANEL;
    const int npk = (L + P - 1) / P, npv = (d + P - 1) / P;
    memset(Pk, 0, sizeof(float) * (size_t)npk * P * d);
    for (int k = 0; k < L; k++) {
        const float *kr = j->k + (base + k) * D + h * d;
        float *dst = Pk + (size_t)(k / P) * d * P + k % P;
        for (int e = 0; e < d; e++) dst[(size_t)e * P] = kr[e];
    }
    lcx__nn_packed pk = {0, Pk, d, L, npk};
    lcx__nn_gemm(&pk, j->q + base * D + h * d, D, L, 0, npk, S, L);
    const float scale = 1.0f / sqrtf((float)d);
    for (int i = 0; i < L; i++) softmax(S + (size_t)i * L, L, scale);
    float *Pv = Pk;   /* K's panels are done with */
    if (d % P) memset(Pv, 0, sizeof(float) * (size_t)npv * P * L);
    for (int k = 0; k < L; k++) {
        const float *vr = j->v + (base + k) * D + h * d;
        for (int p = 0; p < npv; p++)
            memcpy(Pv + ((size_t)p * L + k) * P, vr + p * P, sizeof(float) * (size_t)LCX_MIN(P, d - p * P));
    }
    lcx__nn_packed pv = {0, Pv, L, d, npv};
    lcx__nn_gemm(&pv, S, L, L, 0, npv, j->att + base * D + h * d, D);
}

static float dot_row(const lcx__nn_mat *w, int64_t r, const float *x, uint8_t *xq)
{
    eng_type vt = eng__vec_dot_type((eng_type)w->type);
    const void *xp = x;
    if (vt != ENG_T_F32) { eng__quantize_row(vt, x, xq, w->n_in); xp = xq; }
    return eng__vec_dot((eng_type)w->type, w->n_in, (const uint8_t *)w->data + (size_t)r * w->row_bytes, xp);
}

/* ------------------------------------------------------------------ forward */

static void *ws_get(lcx_nn_model *m, size_t bytes)
{
    if (bytes > m->ws_bytes) {
        free(m->ws);
        m->ws = aligned_alloc(64, (bytes + 63) & ~(size_t)63);
        m->ws_bytes = m->ws ? bytes : 0;
    }
    return m->ws;
}

int lcx_nn_forward(lcx_nn_model *m, const lcx_nn_batch *b, float *pooled, float *hidden, float *scores)
{
    if (!m || !b || !b->ids || !b->mask) return LCX_EINVAL;
    const lcx_nn_info *inf = &m->info;
    const int B = b->n_seq, S = b->seq_len, D = inf->dim, F = inf->n_ff;
    if (B < 1 || B > LCX_NN_MAX_BATCH || S < 1 || S > inf->n_pos) return LCX_EINVAL;
    if (scores && !inf->is_reranker) return LCX_ENOTSUP;
    int *off = malloc((size_t)B * 2 * sizeof(int));
    if (!off) return LCX_ENOMEM;
    int *len = off + B;
    int64_t T = 0;
    int L_max = 0;
    for (int s = 0; s < B; s++) {
        int l = 0;
        for (int i = 0; i < S; i++) {
            const size_t at = (size_t)s * S + i;
            if (!b->mask[at]) continue;
            if (l != i) { free(off); return LCX_EINVAL; }          /* mask must be a prefix */
            if (b->ids[at] < 0 || b->ids[at] >= inf->n_vocab) { free(off); return LCX_EINVAL; }
            if (b->types && (b->types[at] < 0 || b->types[at] >= inf->n_type)) { free(off); return LCX_EINVAL; }
            l++;
        }
        if (l < 1) { free(off); return LCX_EINVAL; }
        off[s] = (int)T;
        len[s] = l;
        T += l;
        if (l > L_max) L_max = l;
    }
    const int nth = eng__pool_size(m->pool);
    const int d = D / inf->n_head;
    const size_t xqb = (size_t)T * (size_t)LCX_MAX(D, F) * sizeof(float) + 64;   /* >= any vec-dot row type */
    const size_t P = LCX_NN_PANEL, Lp = ((size_t)L_max + P - 1) / P * P, dp = ((size_t)d + P - 1) / P * P;
    const size_t sbuf_n = (size_t)L_max * L_max, vt_n = LCX_MAX(Lp * d, dp * L_max);
    const size_t nfl = (size_t)T * (6 * (size_t)D + F) + nth * (sbuf_n + vt_n) + 2 * (size_t)D + 16;
    const size_t bytes = nfl * sizeof(float) + xqb + (size_t)nth * ENG_MATMUL_WS_BYTES + 256;
    uint8_t *ws = ws_get(m, bytes);
    if (!ws) { free(off); return LCX_ENOMEM; }
    float *x = (float *)ws, *q = x + T * D, *k = q + T * D, *v = k + T * D, *att = v + T * D, *tmp = att + T * D;
    float *ff = tmp + T * D;
    float *sbuf = ff + T * F, *vtbuf = sbuf + nth * sbuf_n, *hbuf = vtbuf + nth * vt_n;
    uint8_t *xq = (uint8_t *)(((uintptr_t)(hbuf + 2 * D + 16) + 63) & ~(uintptr_t)63);
    uint8_t *mws = xq + xqb;

    const uint64_t t_start = lcx__now_ns();
    /* embeddings */
    for (int s = 0; s < B; s++)
        for (int i = 0; i < len[s]; i++) {
            const size_t at = (size_t)s * S + i;
            float *row = x + (int64_t)(off[s] + i) * D;
            const int32_t id = b->ids[at], ty = b->types ? b->types[at] : 0;
            eng__dequant_row((eng_type)m->tok_emb.type, (const uint8_t *)m->tok_emb.data + (size_t)id * m->tok_emb.row_bytes, row, D);
            eng__dequant_row((eng_type)m->pos_emb.type, (const uint8_t *)m->pos_emb.data + (size_t)i * m->pos_emb.row_bytes, tmp, D);
            eng__dequant_row((eng_type)m->type_emb.type, (const uint8_t *)m->type_emb.data + (size_t)ty * m->type_emb.row_bytes, tmp + D, D);
            for (int e = 0; e < D; e++) row[e] += tmp[e] + tmp[D + e];
            layer_norm(row, NULL, m->emb_ln_w, m->emb_ln_b, D, inf->eps);
        }

    job j = {.m = m, .q = q, .k = k, .v = v, .att = att, .off = off, .len = len, .n_seq = B, .L_max = L_max,
             .sbuf = sbuf, .vtbuf = vtbuf, .sbuf_n = sbuf_n, .vt_n = vt_n, .mws = mws};
    for (int l = 0; l < inf->n_layer; l++) {
        const lcx__nn_layer *Ly = &m->layers[l];
        const bool same = Ly->q.type == Ly->k.type && Ly->q.type == Ly->v.type && Ly->q.packed == Ly->k.packed &&
                          Ly->q.packed == Ly->v.packed;
        matmul(&j, &Ly->q, x, T, xq, q, Ly->bq, false, false);
        matmul(&j, &Ly->k, x, T, xq, k, Ly->bk, false, same);
        matmul(&j, &Ly->v, x, T, xq, v, Ly->bv, false, same);
        const uint64_t ta = lcx__now_ns();
        eng__pool_run(m->pool, att_chunk, &j, (long)B * inf->n_head);
        m->prof_att_ns += lcx__now_ns() - ta;
        matmul(&j, &Ly->o, att, T, xq, tmp, Ly->bo, false, false);
        for (int64_t t = 0; t < T; t++) layer_norm(x + t * D, tmp + t * D, Ly->ln1_w, Ly->ln1_b, D, inf->eps);
        matmul(&j, &Ly->up, x, T, xq, ff, Ly->bup, true, false);
        matmul(&j, &Ly->down, ff, T, xq, tmp, Ly->bdown, false, false);
        for (int64_t t = 0; t < T; t++) layer_norm(x + t * D, tmp + t * D, Ly->ln2_w, Ly->ln2_b, D, inf->eps);
    }

    if (hidden) {
        memset(hidden, 0, (size_t)B * S * D * sizeof(float));
        for (int s = 0; s < B; s++)
            memcpy(hidden + (size_t)s * S * D, x + (int64_t)off[s] * D, (size_t)len[s] * D * sizeof(float));
    }
    for (int s = 0; s < B; s++) {
        const float *h0 = x + (int64_t)off[s] * D;
        if (pooled) {
            float *p = pooled + (size_t)s * D;
            if (inf->pool == LCX_NN_POOL_MEAN) {
                for (int e = 0; e < D; e++) {
                    double acc = 0;
                    for (int i = 0; i < len[s]; i++) acc += h0[(int64_t)i * D + e];
                    p[e] = (float)(acc / len[s]);
                }
            } else {
                memcpy(p, h0, (size_t)D * sizeof(float));
            }
            if (inf->normalize) {
                double n2 = 0;
                for (int e = 0; e < D; e++) n2 += (double)p[e] * p[e];
                const double inv = n2 > 0 ? 1.0 / sqrt(n2) : 0.0;
                for (int e = 0; e < D; e++) p[e] = (float)(p[e] * inv);
            }
        }
        if (scores) {
            /* BertPooler (tanh dense on [CLS]) then the classifier's label 0 */
            for (int r = 0; r < D; r++) hbuf[r] = tanhf(dot_row(&m->pool_w, r, h0, xq) + m->pool_b[r]);
            scores[s] = dot_row(&m->cls_w, 0, hbuf, xq) + m->cls_b[0];
        }
    }
    free(off);
    m->prof_total_ns += lcx__now_ns() - t_start;
    return 0;
}

double lcx_nn_flops(const lcx_nn_info *inf, const int *seq_lens, int n_seq)
{
    double T = 0, att = 0;
    for (int s = 0; s < n_seq; s++) {
        T += seq_lens[s];
        att += 2.0 * 2.0 * (double)seq_lens[s] * seq_lens[s] * inf->dim;   /* QK^T and PV */
    }
    const double per_tok = 2.0 * (4.0 * inf->dim * inf->dim + 2.0 * inf->dim * inf->n_ff);
    return inf->n_layer * (T * per_tok + att);
}
