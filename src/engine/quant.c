/* Engine tensor types: type table, conversions, scalar dequantisation / quantisation, the
 * scalar integer dot products (the reference every SIMD kernel is tested against) and the
 * run-time dispatch of eng__matmul.
 *
 * Block formats and arithmetic follow ggml (llama.cpp c392e50, Feb 2025); see quant.h and
 * docs/engine-quant.md. The reference dot products sum each block's integer products
 * exactly, then scale once per block in float:
 *   Q4_0/Q5_0/Q8_0 . Q8_0:  sum_b (float)isum_b * (d_w * d_x)
 *   Q4_K/Q5_K      . Q8_K:  sum_B d_w*d_x*Σ_j sc_j*isum_j  -  dmin_w*d_x*Σ_j m_j*bsum_j
 *   Q6_K           . Q8_K:  sum_B d_w*d_x*Σ_j sc_j*isum_j           (quants centred at 32)
 * which is what llama.cpp's kernels compute up to float summation order. */
#include "engine/quant.h"

#include <assert.h>
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "util/util.h"

_Static_assert(sizeof(eng_block_q4_0) == 18, "q4_0 layout");
_Static_assert(sizeof(eng_block_q5_0) == 22, "q5_0 layout");
_Static_assert(sizeof(eng_block_q8_0) == 34, "q8_0 layout");
_Static_assert(sizeof(eng_block_q5_0x4) == 88, "q5_0x4 layout");
_Static_assert(sizeof(eng_block_q4_K) == 144, "q4_K layout");
_Static_assert(sizeof(eng_block_q5_K) == 176, "q5_K layout");
_Static_assert(sizeof(eng_block_q6_K) == 210, "q6_K layout");
_Static_assert(sizeof(eng_block_q8_K) == 292, "q8_K layout");

/* ------------------------------------------------------------------ type table */

typedef struct {
    int id;
    const char *name;
    int64_t blck;
    size_t bytes;
    eng_type vdt;
} type_info;

static const type_info k_types[] = {
    {ENG_T_F32, "f32", 1, 4, ENG_T_F32},
    {ENG_T_F16, "f16", 1, 2, ENG_T_F16},
    {ENG_T_Q4_0, "q4_0", ENG_QK4_0, sizeof(eng_block_q4_0), ENG_T_Q8_0},
    {ENG_T_Q5_0, "q5_0", ENG_QK5_0, sizeof(eng_block_q5_0), ENG_T_Q8_0},
    {ENG_T_Q8_0, "q8_0", ENG_QK8_0, sizeof(eng_block_q8_0), ENG_T_Q8_0},
    {ENG_T_Q4_K, "q4_K", ENG_QK_K, sizeof(eng_block_q4_K), ENG_T_Q8_K},
    {ENG_T_Q5_K, "q5_K", ENG_QK_K, sizeof(eng_block_q5_K), ENG_T_Q8_K},
    {ENG_T_Q6_K, "q6_K", ENG_QK_K, sizeof(eng_block_q6_K), ENG_T_Q8_K},
    {ENG_T_Q8_K, "q8_K", ENG_QK_K, sizeof(eng_block_q8_K), ENG_T_Q8_K},
    {ENG_T_BF16, "bf16", 1, 2, ENG_T_BF16},
    {ENG_T_Q5_0X4, "q5_0x4", 4 * ENG_QK5_0, sizeof(eng_block_q5_0x4), ENG_T_Q8_0},
};

static const type_info *tinfo(int t)
{
    for (size_t i = 0; i < LCX_ARRAY_LEN(k_types); i++)
        if (k_types[i].id == t) return &k_types[i];
    return NULL;
}

bool eng__type_supported(int t) { return tinfo(t) != NULL; }
bool eng__type_internal(int t) { return t == ENG_T_Q5_0X4; }

int64_t eng__type_block_elems(eng_type t)
{
    const type_info *ti = tinfo(t);
    return ti ? ti->blck : 0;
}

size_t eng__type_block_bytes(eng_type t)
{
    const type_info *ti = tinfo(t);
    return ti ? ti->bytes : 0;
}

const char *eng__type_name(eng_type t)
{
    const type_info *ti = tinfo(t);
    return ti ? ti->name : "?";
}

size_t eng__row_bytes(eng_type t, int64_t n)
{
    const type_info *ti = tinfo(t);
    if (!ti || n < 0) return 0;
    assert(n % ti->blck == 0);
    return (size_t)(n / ti->blck) * ti->bytes;
}

eng_type eng__vec_dot_type(eng_type w)
{
    const type_info *ti = tinfo(w);
    return ti ? ti->vdt : ENG_T_F32;
}

/* ------------------------------------------------------------------ conversions */

float eng__fp16_to_fp32(uint16_t h) { return _cvtsh_ss(h); }
uint16_t eng__fp32_to_fp16(float f) { return _cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT); }

float eng__bf16_to_fp32(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

uint16_t eng__fp32_to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffff) > 0x7f800000) return (uint16_t)((u >> 16) | 64); /* quiet NaN */
    return (uint16_t)((u + (0x7fff + ((u >> 16) & 1))) >> 16);
}

#define FP16(h) eng__fp16_to_fp32(h)

/* ggml's nearest_int: round half to even through the float mantissa (|f| < 2^22). */
static inline int nearest_int(float f)
{
    float v = f + 12582912.f;
    int i;
    memcpy(&i, &v, 4);
    return (i & 0x007fffff) - 0x00400000;
}

/* ------------------------------------------------------------------ unpacking helpers */

/* Q4_K/Q5_K 6-bit scale and min of sub-block j (0..7) (ggml get_scale_min_k4). */
static inline void scale_min_k4(int j, const uint8_t *q, uint8_t *d, uint8_t *m)
{
    if (j < 4) {
        *d = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *d = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
        *m = (q[j + 4] >> 4) | ((q[j - 0] >> 6) << 4);
    }
}

/* Integer quants of one block in element order. */
static void q4_0_ints(const eng_block_q4_0 *b, int8_t *q)
{
    for (int j = 0; j < 16; j++) {
        q[j] = (int8_t)((b->qs[j] & 0xF) - 8);
        q[j + 16] = (int8_t)((b->qs[j] >> 4) - 8);
    }
}

static void q5_0_ints(const eng_block_q5_0 *b, int8_t *q)
{
    uint32_t qh;
    memcpy(&qh, b->qh, 4);
    for (int j = 0; j < 16; j++) {
        int h0 = ((qh >> (j + 0)) << 4) & 0x10;
        int h1 = (qh >> (j + 12)) & 0x10;
        q[j] = (int8_t)(((b->qs[j] & 0xF) | h0) - 16);
        q[j + 16] = (int8_t)(((b->qs[j] >> 4) | h1) - 16);
    }
}

/* Block k (0..3) of a Q5_0X4 group as a Q5_0 block (layout: quant.h). */
static void q5_0x4_block(const eng_block_q5_0x4 *g, int k, eng_block_q5_0 *b)
{
    uint32_t qh = 0;
    b->d = g->d[k];
    for (int j = 0; j < 16; j++) {
        const int lo = (g->qs[32 * (k / 2) + j] >> (4 * (k & 1))) & 0xF;
        const int hi = (g->qs[32 * (k / 2) + j + 16] >> (4 * (k & 1))) & 0xF;
        b->qs[j] = (uint8_t)(lo | hi << 4);
        qh |= (uint32_t)((g->qh[j] >> k) & 1) << j;
        qh |= (uint32_t)((g->qh[j] >> (4 + k)) & 1) << (j + 16);
    }
    memcpy(b->qh, &qh, 4);
}

void eng__q5_0x4_from_q5_0(const void *src, void *dst, int64_t n)
{
    assert(n % (4 * ENG_QK5_0) == 0);
    const eng_block_q5_0 *s = src;
    uint8_t *d = dst;
    for (int64_t i = 0; i < n / (4 * ENG_QK5_0); i++) {
        eng_block_q5_0 b[4];
        memcpy(b, s + 4 * i, sizeof b); /* src may be dst: read the group first */
        eng_block_q5_0x4 g;
        memset(&g, 0, sizeof g);
        for (int k = 0; k < 4; k++) {
            uint32_t qh;
            memcpy(&qh, b[k].qh, 4);
            g.d[k] = b[k].d;
            for (int j = 0; j < 16; j++) {
                const int e0 = b[k].qs[j] & 0xF, e1 = b[k].qs[j] >> 4; /* elements j, j+16 */
                g.qs[32 * (k / 2) + j] |= (uint8_t)(e0 << (4 * (k & 1)));
                g.qs[32 * (k / 2) + j + 16] |= (uint8_t)(e1 << (4 * (k & 1)));
                g.qh[j] |= (uint8_t)(((qh >> j) & 1) << k | ((qh >> (j + 16)) & 1) << (4 + k));
            }
        }
        memcpy(d + i * sizeof g, &g, sizeof g);
    }
}

/* Q4_K: q in 0..15, sc/m per 32 elements. */
static void q4_K_ints(const eng_block_q4_K *b, uint8_t *q, uint8_t sc[8], uint8_t m[8])
{
    for (int j = 0; j < 4; j++)
        for (int l = 0; l < 32; l++) {
            q[64 * j + l] = b->qs[32 * j + l] & 0xF;
            q[64 * j + 32 + l] = b->qs[32 * j + l] >> 4;
        }
    for (int j = 0; j < 8; j++) scale_min_k4(j, b->scales, &sc[j], &m[j]);
}

/* Q5_K: q in 0..31. */
static void q5_K_ints(const eng_block_q5_K *b, uint8_t *q, uint8_t sc[8], uint8_t m[8])
{
    for (int j = 0; j < 4; j++)
        for (int l = 0; l < 32; l++) {
            int hb0 = (b->qh[l] >> (2 * j)) & 1, hb1 = (b->qh[l] >> (2 * j + 1)) & 1;
            q[64 * j + l] = (uint8_t)((b->qs[32 * j + l] & 0xF) | (hb0 << 4));
            q[64 * j + 32 + l] = (uint8_t)((b->qs[32 * j + l] >> 4) | (hb1 << 4));
        }
    for (int j = 0; j < 8; j++) scale_min_k4(j, b->scales, &sc[j], &m[j]);
}

/* Q6_K: q in -32..31; scale index of element e is e/16. */
static void q6_K_ints(const eng_block_q6_K *b, int8_t *q)
{
    const uint8_t *ql = b->ql, *qh = b->qh;
    for (int n = 0; n < ENG_QK_K; n += 128) {
        for (int l = 0; l < 32; l++) {
            q[n + l + 0] = (int8_t)(((ql[l + 0] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32);
            q[n + l + 32] = (int8_t)(((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32);
            q[n + l + 64] = (int8_t)(((ql[l + 0] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
            q[n + l + 96] = (int8_t)(((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
        }
        ql += 64;
        qh += 32;
    }
}

/* ------------------------------------------------------------------ dequantisation */

void eng__dequant_row(eng_type t, const void *src, float *dst, int64_t n)
{
    switch (t) {
    case ENG_T_F32:
        memcpy(dst, src, (size_t)n * 4);
        return;
    case ENG_T_F16: {
        const uint16_t *s = src;
        for (int64_t i = 0; i < n; i++) dst[i] = FP16(s[i]);
        return;
    }
    case ENG_T_BF16: {
        const uint16_t *s = src;
        for (int64_t i = 0; i < n; i++) dst[i] = eng__bf16_to_fp32(s[i]);
        return;
    }
    case ENG_T_Q4_0: {
        const eng_block_q4_0 *b = src;
        int8_t q[32];
        for (int64_t i = 0; i < n / 32; i++, dst += 32) {
            float d = FP16(b[i].d);
            q4_0_ints(&b[i], q);
            for (int j = 0; j < 32; j++) dst[j] = q[j] * d;
        }
        return;
    }
    case ENG_T_Q5_0: {
        const eng_block_q5_0 *b = src;
        int8_t q[32];
        for (int64_t i = 0; i < n / 32; i++, dst += 32) {
            float d = FP16(b[i].d);
            q5_0_ints(&b[i], q);
            for (int j = 0; j < 32; j++) dst[j] = q[j] * d;
        }
        return;
    }
    case ENG_T_Q5_0X4: {
        const eng_block_q5_0x4 *g = src;
        for (int64_t i = 0; i < n / 32; i++, dst += 32) {
            eng_block_q5_0 b;
            q5_0x4_block(&g[i / 4], (int)(i % 4), &b);
            eng__dequant_row(ENG_T_Q5_0, &b, dst, 32);
        }
        return;
    }
    case ENG_T_Q8_0: {
        const eng_block_q8_0 *b = src;
        for (int64_t i = 0; i < n / 32; i++, dst += 32) {
            float d = FP16(b[i].d);
            for (int j = 0; j < 32; j++) dst[j] = b[i].qs[j] * d;
        }
        return;
    }
    case ENG_T_Q4_K:
    case ENG_T_Q5_K: {
        uint8_t q[ENG_QK_K], sc[8], m[8];
        for (int64_t i = 0; i < n / ENG_QK_K; i++, dst += ENG_QK_K) {
            float d, dmin;
            if (t == ENG_T_Q4_K) {
                const eng_block_q4_K *b = (const eng_block_q4_K *)src + i;
                q4_K_ints(b, q, sc, m);
                d = FP16(b->d);
                dmin = FP16(b->dmin);
            } else {
                const eng_block_q5_K *b = (const eng_block_q5_K *)src + i;
                q5_K_ints(b, q, sc, m);
                d = FP16(b->d);
                dmin = FP16(b->dmin);
            }
            for (int j = 0; j < 8; j++) {
                const float d1 = d * sc[j], m1 = dmin * m[j];
                for (int l = 0; l < 32; l++) dst[32 * j + l] = d1 * q[32 * j + l] - m1;
            }
        }
        return;
    }
    case ENG_T_Q6_K: {
        int8_t q[ENG_QK_K];
        for (int64_t i = 0; i < n / ENG_QK_K; i++, dst += ENG_QK_K) {
            const eng_block_q6_K *b = (const eng_block_q6_K *)src + i;
            const float d = FP16(b->d);
            q6_K_ints(b, q);
            for (int e = 0; e < ENG_QK_K; e++) dst[e] = d * b->scales[e / 16] * q[e];
        }
        return;
    }
    case ENG_T_Q8_K: {
        for (int64_t i = 0; i < n / ENG_QK_K; i++, dst += ENG_QK_K) {
            const eng_block_q8_K *b = (const eng_block_q8_K *)src + i;
            for (int e = 0; e < ENG_QK_K; e++) dst[e] = b->d * b->qs[e];
        }
        return;
    }
    }
    assert(!"eng__dequant_row: unsupported type");
}

/* ------------------------------------------------------------------ quantisation */

/* Q8_0 activations exactly as ggml's AVX2 quantize_row_q8_0: d = amax/127 stored as fp16,
 * q = round_half_even(x * (127/amax)) with the unrounded inverse. */
static void quantize_q8_0(const float *x, eng_block_q8_0 *y, int64_t n)
{
    for (int64_t i = 0; i < n / 32; i++, x += 32) {
        float amax = 0.f;
        for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(x[j]));
        const float d = amax / 127.f;
        const float id = amax != 0.f ? 127.f / amax : 0.f;
        y[i].d = eng__fp32_to_fp16(d);
        for (int j = 0; j < 32; j++) y[i].qs[j] = (int8_t)nearbyintf(x[j] * id);
    }
}

/* Q8_K exactly as ggml's quantize_row_q8_K_ref (the x86 path at that commit). */
static void quantize_q8_K(const float *x, eng_block_q8_K *y, int64_t n)
{
    for (int64_t i = 0; i < n / ENG_QK_K; i++, x += ENG_QK_K) {
        float max = 0.f, amax = 0.f;
        for (int j = 0; j < ENG_QK_K; j++) {
            float ax = fabsf(x[j]);
            if (ax > amax) {
                amax = ax;
                max = x[j];
            }
        }
        if (amax == 0.f) {
            memset(&y[i], 0, sizeof y[i]);
            continue;
        }
        /* ggml uses -127/max (not -128) so the SIMD paths never see -128 * -128. */
        const float iscale = -127.f / max;
        for (int j = 0; j < ENG_QK_K; j++) {
            int v = nearest_int(iscale * x[j]);
            y[i].qs[j] = (int8_t)(v < 127 ? v : 127);
        }
        for (int j = 0; j < ENG_QK_K / 16; j++) {
            int s = 0;
            for (int l = 0; l < 16; l++) s += y[i].qs[16 * j + l];
            y[i].bsums[j] = (int16_t)s;
        }
        y[i].d = 1.f / iscale;
    }
}

/* Signed value with the largest magnitude (first one on ties), as ggml's reference
 * quantizers pick it: the sign makes that value land exactly on the most negative code. */
static float signed_absmax(const float *x, int n)
{
    float amax = 0.f, max = 0.f;
    for (int j = 0; j < n; j++)
        if (amax < fabsf(x[j])) {
            amax = fabsf(x[j]);
            max = x[j];
        }
    return max;
}

/* ggml quantize_row_q4_0_ref. */
static void quantize_q4_0(const float *x, eng_block_q4_0 *y, int64_t n)
{
    for (int64_t i = 0; i < n / 32; i++, x += 32) {
        const float d = signed_absmax(x, 32) / -8;
        const float id = d != 0.f ? 1.0f / d : 0.0f;
        y[i].d = eng__fp32_to_fp16(d);
        for (int j = 0; j < 16; j++) {
            int a = (int8_t)(x[j] * id + 8.5f), b = (int8_t)(x[16 + j] * id + 8.5f);
            a = a < 15 ? a : 15;
            b = b < 15 ? b : 15;
            y[i].qs[j] = (uint8_t)(a | (b << 4));
        }
    }
}

/* ggml quantize_row_q5_0_ref. */
static void quantize_q5_0(const float *x, eng_block_q5_0 *y, int64_t n)
{
    for (int64_t i = 0; i < n / 32; i++, x += 32) {
        const float d = signed_absmax(x, 32) / -16;
        const float id = d != 0.f ? 1.0f / d : 0.0f;
        y[i].d = eng__fp32_to_fp16(d);
        uint32_t qh = 0;
        for (int j = 0; j < 16; j++) {
            int a = (int8_t)(x[j] * id + 16.5f), b = (int8_t)(x[16 + j] * id + 16.5f);
            a = a < 31 ? a : 31;
            b = b < 31 ? b : 31;
            y[i].qs[j] = (uint8_t)((a & 0xF) | ((b & 0xF) << 4));
            qh |= (uint32_t)((a & 0x10) >> 4) << (j + 0);
            qh |= (uint32_t)((b & 0x10) >> 4) << (j + 16);
        }
        memcpy(y[i].qh, &qh, 4);
    }
}

/* Q4_K / Q5_K weights (nmax = 15 / 31): per 32-element sub-block an affine min-max fit
 * x ~ s*q - m with m >= 0 (the range always includes 0, like ggml's make_qkx2_quants before
 * its refinement search), then the 8 scales and 8 mins quantized to 6 bits against the
 * super-block maxima, then the quants recomputed with the rounded scales so rounding errors
 * do not compound. Output Ls[256] holds 0..nmax. */
static void quantize_k_affine(const float *x, int nmax, uint16_t *pd, uint16_t *pdmin,
                              uint8_t scales[12], uint8_t *L)
{
    float sc[8], mn[8], max_sc = 0.f, max_mn = 0.f;
    for (int j = 0; j < 8; j++) {
        float lo = 0.f, hi = 0.f;
        for (int l = 0; l < 32; l++) {
            lo = fminf(lo, x[32 * j + l]);
            hi = fmaxf(hi, x[32 * j + l]);
        }
        sc[j] = (hi - lo) / nmax;
        mn[j] = -lo;
        max_sc = fmaxf(max_sc, sc[j]);
        max_mn = fmaxf(max_mn, mn[j]);
    }
    const float inv_sc = max_sc > 0 ? 63.f / max_sc : 0.f;
    const float inv_mn = max_mn > 0 ? 63.f / max_mn : 0.f;
    memset(scales, 0, 12);
    for (int j = 0; j < 8; j++) {
        int ls = nearest_int(inv_sc * sc[j]), lm = nearest_int(inv_mn * mn[j]);
        ls = ls < 63 ? ls : 63;
        lm = lm < 63 ? lm : 63;
        if (j < 4) {
            scales[j] = (uint8_t)ls;
            scales[j + 4] = (uint8_t)lm;
        } else {
            scales[j + 4] = (uint8_t)((ls & 0xF) | ((lm & 0xF) << 4));
            scales[j - 4] |= (uint8_t)((ls >> 4) << 6);
            scales[j - 0] |= (uint8_t)((lm >> 4) << 6);
        }
    }
    *pd = eng__fp32_to_fp16(max_sc / 63.f);
    *pdmin = eng__fp32_to_fp16(max_mn / 63.f);
    const float d = FP16(*pd), dmin = FP16(*pdmin);
    for (int j = 0; j < 8; j++) {
        uint8_t s, m;
        scale_min_k4(j, scales, &s, &m);
        const float dj = d * s, mj = dmin * m;
        for (int l = 0; l < 32; l++) {
            int q = dj != 0.f ? nearest_int((x[32 * j + l] + mj) / dj) : 0;
            L[32 * j + l] = (uint8_t)(q < 0 ? 0 : q > nmax ? nmax : q);
        }
    }
}

static void quantize_q4_K(const float *x, eng_block_q4_K *y, int64_t n)
{
    uint8_t L[ENG_QK_K];
    for (int64_t i = 0; i < n / ENG_QK_K; i++, x += ENG_QK_K) {
        quantize_k_affine(x, 15, &y[i].d, &y[i].dmin, y[i].scales, L);
        for (int j = 0; j < 4; j++)
            for (int l = 0; l < 32; l++)
                y[i].qs[32 * j + l] = (uint8_t)(L[64 * j + l] | (L[64 * j + 32 + l] << 4));
    }
}

static void quantize_q5_K(const float *x, eng_block_q5_K *y, int64_t n)
{
    uint8_t L[ENG_QK_K];
    for (int64_t i = 0; i < n / ENG_QK_K; i++, x += ENG_QK_K) {
        quantize_k_affine(x, 31, &y[i].d, &y[i].dmin, y[i].scales, L);
        memset(y[i].qh, 0, sizeof y[i].qh);
        for (int j = 0; j < 4; j++)
            for (int l = 0; l < 32; l++) {
                int l1 = L[64 * j + l], l2 = L[64 * j + 32 + l];
                if (l1 > 15) { l1 -= 16; y[i].qh[l] |= (uint8_t)(1u << (2 * j)); }
                if (l2 > 15) { l2 -= 16; y[i].qh[l] |= (uint8_t)(2u << (2 * j)); }
                y[i].qs[32 * j + l] = (uint8_t)(l1 | (l2 << 4));
            }
    }
}

/* Q6_K weights: per 16-element sub-block the signed abs-max lands on -32 (as make_qx_quants
 * before its search), scales are int8 against the super-block maximum (-128/max as ggml),
 * quants recomputed with the rounded scales. */
static void quantize_q6_K(const float *x, eng_block_q6_K *y, int64_t n)
{
    uint8_t L[ENG_QK_K];
    for (int64_t i = 0; i < n / ENG_QK_K; i++, x += ENG_QK_K) {
        float sc[16], max_sc = 0.f, amax_sc = 0.f;
        for (int j = 0; j < 16; j++) {
            sc[j] = signed_absmax(x + 16 * j, 16) / -32.f;
            if (fabsf(sc[j]) > amax_sc) {
                amax_sc = fabsf(sc[j]);
                max_sc = sc[j];
            }
        }
        memset(&y[i], 0, sizeof y[i]);
        if (amax_sc == 0.f) continue;
        const float iscale = -128.f / max_sc;
        y[i].d = eng__fp32_to_fp16(1.f / iscale);
        for (int j = 0; j < 16; j++) {
            int s = nearest_int(iscale * sc[j]);
            y[i].scales[j] = (int8_t)(s < 127 ? s : 127);
        }
        const float d0 = FP16(y[i].d);
        for (int j = 0; j < 16; j++) {
            const float d = d0 * y[i].scales[j];
            for (int l = 0; l < 16; l++) {
                int q = d != 0.f ? nearest_int(x[16 * j + l] / d) : 0;
                q = q < -32 ? -32 : q > 31 ? 31 : q;
                L[16 * j + l] = (uint8_t)(q + 32);
            }
        }
        uint8_t *ql = y[i].ql, *qh = y[i].qh;
        for (int j = 0; j < ENG_QK_K; j += 128) {
            for (int l = 0; l < 32; l++) {
                const uint8_t *Lj = L + j;
                ql[l + 0] = (uint8_t)((Lj[l] & 0xF) | ((Lj[l + 64] & 0xF) << 4));
                ql[l + 32] = (uint8_t)((Lj[l + 32] & 0xF) | ((Lj[l + 96] & 0xF) << 4));
                qh[l] = (uint8_t)((Lj[l] >> 4) | ((Lj[l + 32] >> 4) << 2) | ((Lj[l + 64] >> 4) << 4) |
                                  ((Lj[l + 96] >> 4) << 6));
            }
            ql += 64;
            qh += 32;
        }
    }
}

void eng__quantize_row(eng_type vt, const float *x, void *dst, int64_t n)
{
    switch (vt) {
    case ENG_T_F32: memcpy(dst, x, (size_t)n * 4); return;
    case ENG_T_F16: {
        uint16_t *d = dst;
        int64_t i = 0;
        for (; i + 8 <= n; i += 8)
            _mm_storeu_si128((__m128i *)(d + i), _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
        for (; i < n; i++) d[i] = eng__fp32_to_fp16(x[i]);
        return;
    }
    case ENG_T_BF16: {
        uint16_t *d = dst;
        for (int64_t i = 0; i < n; i++) d[i] = eng__fp32_to_bf16(x[i]);
        return;
    }
    case ENG_T_Q8_0:
        if (lcx__cpu()->avx2) eng__quantize_row_q8_0_avx2(x, dst, n);
        else quantize_q8_0(x, dst, n);
        return;
    case ENG_T_Q8_K:
        if (lcx__cpu()->avx2) eng__quantize_row_q8_K_avx2(x, dst, n);
        else quantize_q8_K(x, dst, n);
        return;
    case ENG_T_Q4_0: quantize_q4_0(x, dst, n); return;
    case ENG_T_Q5_0: quantize_q5_0(x, dst, n); return;
    case ENG_T_Q5_0X4: quantize_q5_0(x, dst, n); eng__q5_0x4_from_q5_0(dst, dst, n); return;
    case ENG_T_Q4_K: quantize_q4_K(x, dst, n); return;
    case ENG_T_Q5_K: quantize_q5_K(x, dst, n); return;
    case ENG_T_Q6_K: quantize_q6_K(x, dst, n); return;
    }
    assert(!"eng__quantize_row: unsupported type");
}

/* Scalar activation quantizers, exported for the tests that check the AVX2 ones. */
void eng__quantize_row_q8_0_ref(const float *x, void *dst, int64_t n) { quantize_q8_0(x, dst, n); }
void eng__quantize_row_q8_K_ref(const float *x, void *dst, int64_t n) { quantize_q8_K(x, dst, n); }

/* ------------------------------------------------------------------ scalar dot products */

static int32_t idot(const int8_t *a, const int8_t *b, int n)
{
    int32_t s = 0;
    for (int i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

float eng__vec_dot_ref(eng_type wt, int64_t n, const void *w, const void *x)
{
    switch (wt) {
    case ENG_T_F32: {
        const float *a = w, *b = x;
        double s = 0;
        for (int64_t i = 0; i < n; i++) s += (double)a[i] * b[i];
        return (float)s;
    }
    case ENG_T_F16: {
        const uint16_t *a = w, *b = x;
        double s = 0;
        for (int64_t i = 0; i < n; i++) s += (double)FP16(a[i]) * FP16(b[i]);
        return (float)s;
    }
    case ENG_T_BF16: {
        const uint16_t *a = w, *b = x;
        double s = 0;
        for (int64_t i = 0; i < n; i++) s += (double)eng__bf16_to_fp32(a[i]) * eng__bf16_to_fp32(b[i]);
        return (float)s;
    }
    case ENG_T_Q4_0:
    case ENG_T_Q5_0:
    case ENG_T_Q5_0X4:
    case ENG_T_Q8_0: {
        const eng_block_q8_0 *xb = x;
        float s = 0.f;
        int8_t q[32];
        for (int64_t i = 0; i < n / 32; i++) {
            float dw;
            const int8_t *qw = q;
            if (wt == ENG_T_Q5_0X4) {
                eng_block_q5_0 b;
                q5_0x4_block((const eng_block_q5_0x4 *)w + i / 4, (int)(i % 4), &b);
                q5_0_ints(&b, q);
                dw = FP16(b.d);
            } else if (wt == ENG_T_Q4_0) {
                const eng_block_q4_0 *b = (const eng_block_q4_0 *)w + i;
                q4_0_ints(b, q);
                dw = FP16(b->d);
            } else if (wt == ENG_T_Q5_0) {
                const eng_block_q5_0 *b = (const eng_block_q5_0 *)w + i;
                q5_0_ints(b, q);
                dw = FP16(b->d);
            } else {
                const eng_block_q8_0 *b = (const eng_block_q8_0 *)w + i;
                qw = b->qs;
                dw = FP16(b->d);
            }
            s += (float)idot(qw, xb[i].qs, 32) * (dw * FP16(xb[i].d));
        }
        return s;
    }
    case ENG_T_Q4_K:
    case ENG_T_Q5_K: {
        const eng_block_q8_K *xb = x;
        float s = 0.f;
        uint8_t q[ENG_QK_K], sc[8], m[8];
        for (int64_t i = 0; i < n / ENG_QK_K; i++) {
            float d, dmin;
            if (wt == ENG_T_Q4_K) {
                const eng_block_q4_K *b = (const eng_block_q4_K *)w + i;
                q4_K_ints(b, q, sc, m);
                d = FP16(b->d);
                dmin = FP16(b->dmin);
            } else {
                const eng_block_q5_K *b = (const eng_block_q5_K *)w + i;
                q5_K_ints(b, q, sc, m);
                d = FP16(b->d);
                dmin = FP16(b->dmin);
            }
            int32_t isum = 0, msum = 0;
            for (int j = 0; j < 8; j++) {
                int32_t t = 0;
                for (int l = 0; l < 32; l++) t += q[32 * j + l] * xb[i].qs[32 * j + l];
                isum += sc[j] * t;
                msum += m[j] * (xb[i].bsums[2 * j] + xb[i].bsums[2 * j + 1]);
            }
            s += d * xb[i].d * (float)isum - dmin * xb[i].d * (float)msum;
        }
        return s;
    }
    case ENG_T_Q6_K: {
        const eng_block_q8_K *xb = x;
        float s = 0.f;
        int8_t q[ENG_QK_K];
        for (int64_t i = 0; i < n / ENG_QK_K; i++) {
            const eng_block_q6_K *b = (const eng_block_q6_K *)w + i;
            q6_K_ints(b, q);
            int32_t isum = 0;
            for (int j = 0; j < 16; j++) isum += b->scales[j] * idot(q + 16 * j, xb[i].qs + 16 * j, 16);
            s += FP16(b->d) * xb[i].d * (float)isum;
        }
        return s;
    }
    case ENG_T_Q8_K: break;
    }
    assert(!"eng__vec_dot_ref: unsupported weight type");
    return 0.f;
}

/* ------------------------------------------------------------------ dispatch */

bool eng__isa_available(eng_isa isa)
{
    switch (isa) {
    case ENG_ISA_SCALAR: return true;
    case ENG_ISA_AVX2: return lcx__cpu()->avx2 && lcx__cpu()->fma && lcx__cpu()->f16c;
    case ENG_ISA_AVX512: return lcx__cpu_has_avx512() && eng__isa_available(ENG_ISA_AVX2);
    }
    return false;
}

eng_isa eng__isa_best(void)
{
    if (eng__isa_available(ENG_ISA_AVX512)) return ENG_ISA_AVX512;
    if (eng__isa_available(ENG_ISA_AVX2)) return ENG_ISA_AVX2;
    return ENG_ISA_SCALAR;
}

const char *eng__isa_name(eng_isa isa)
{
    switch (isa) {
    case ENG_ISA_SCALAR: return "scalar";
    case ENG_ISA_AVX2: return "avx2";
    case ENG_ISA_AVX512: return "avx512 (floats; quantized: avx2)";
    }
    return "?";
}

static void matmul_ref(eng_type wt, const void *W, size_t wrb, int64_t n_in, int64_t r0, int64_t r1,
                       const void *X, size_t xrb, int64_t n_tok, float *y, int64_t ldy)
{
    for (int64_t t = 0; t < n_tok; t++)
        for (int64_t r = r0; r < r1; r++)
            y[t * ldy + r] = eng__vec_dot_ref(wt, n_in, (const char *)W + r * wrb, (const char *)X + t * xrb);
}

void eng__matmul_isa_ws(eng_isa isa, eng_type wt, const void *W, size_t wrb, int64_t n_in, int64_t r0,
                       int64_t r1, const void *X, size_t xrb, int64_t n_tok, float *y, int64_t ldy, void *ws,
                       size_t ws_bytes)
{
    if (r1 <= r0 || n_tok <= 0) return;
    if (isa >= ENG_ISA_AVX512 && eng__isa_available(ENG_ISA_AVX512) &&
        eng__matmul_avx512(wt, W, wrb, n_in, r0, r1, X, xrb, n_tok, y, ldy))
        return;
    if (isa >= ENG_ISA_AVX2 && eng__isa_available(ENG_ISA_AVX2) &&
        eng__matmul_avx2(wt, W, wrb, n_in, r0, r1, X, xrb, n_tok, y, ldy, ws, ws_bytes))
        return;
    matmul_ref(wt, W, wrb, n_in, r0, r1, X, xrb, n_tok, y, ldy);
}

void eng__matmul_isa(eng_isa isa, eng_type wt, const void *W, size_t wrb, int64_t n_in, int64_t r0,
                    int64_t r1, const void *X, size_t xrb, int64_t n_tok, float *y, int64_t ldy)
{
    eng__matmul_isa_ws(isa, wt, W, wrb, n_in, r0, r1, X, xrb, n_tok, y, ldy, NULL, 0);
}

void eng__matmul_ws(eng_type wt, const void *W, size_t wrb, int64_t n_in, int64_t r0, int64_t r1, const void *X,
                   size_t xrb, int64_t n_tok, float *y, int64_t ldy, void *ws, size_t ws_bytes)
{
    eng__matmul_isa_ws(eng__isa_best(), wt, W, wrb, n_in, r0, r1, X, xrb, n_tok, y, ldy, ws, ws_bytes);
}

void eng__matmul(eng_type wt, const void *W, size_t wrb, int64_t n_in, int64_t r0, int64_t r1,
                const void *X, size_t xrb, int64_t n_tok, float *y, int64_t ldy)
{
    eng__matmul_isa_ws(eng__isa_best(), wt, W, wrb, n_in, r0, r1, X, xrb, n_tok, y, ldy, NULL, 0);
}

float eng__vec_dot(eng_type wt, int64_t n, const void *w, const void *x)
{
    float y = 0.f;
    eng__matmul(wt, w, 0, n, 0, 1, x, 0, 1, &y, 1);
    return y;
}
