/* engine-quant: block layouts, dequantisation, activation quantisation and dot-product
 * kernels. Three kinds of reference:
 *  - hand-built blocks whose values are written out here from the ggml format definitions;
 *  - an independent numpy implementation (ref_quant.py) run on tensors llama.cpp quantized
 *    (fixtures/gguf) and on rows our quantizers wrote;
 *  - the scalar reference (quant.c) for the AVX2 / AVX-512 kernels, on random data. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/quant.h"
#include "testutil.h"
#include "util/util.h"

static const eng_type k_wtypes[] = {ENG_T_F32, ENG_T_F16, ENG_T_BF16, ENG_T_Q4_0, ENG_T_Q5_0,
                                    ENG_T_Q8_0, ENG_T_Q4_K, ENG_T_Q5_K, ENG_T_Q6_K};

/* ------------------------------------------------------------------ helpers */

static uint64_t g_rng = 88172645463325252ull;
static uint64_t rnd(void)
{
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return g_rng;
}
static float urand(void) { return (float)((rnd() >> 11) * (1.0 / 9007199254740992.0)); }
static float nrand(void)
{
    float u = urand() + 1e-12f, v = urand();
    return sqrtf(-2.f * logf(u)) * cosf(6.2831853f * v);
}

static void fill_normal(float *x, int64_t n, float std)
{
    for (int64_t i = 0; i < n; i++) x[i] = nrand() * std;
    /* a few outliers so the per-block scales differ a lot */
    for (int64_t i = 0; i < n; i += 97) x[i] *= 4.f;
}

/* rows quantized random rows of n elements (std, with fill_normal's outliers) into dst
 * at the given stride; f: (n) scratch */
static void quant_random_rows(eng_type t, uint8_t *dst, size_t stride, int64_t n, int64_t rows, float std, float *f)
{
    for (int64_t r = 0; r < rows; r++) {
        fill_normal(f, n, std);
        eng__quantize_row(t, f, dst + r * stride, n);
    }
}

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    assert_non_null(p);
    return p;
}

/* ------------------------------------------------------------------ type table */

static void test_type_table(void **state)
{
    (void)state;
    struct { eng_type t; int64_t be; size_t bb; eng_type vdt; const char *name; } exp[] = {
        {ENG_T_F32, 1, 4, ENG_T_F32, "f32"},      {ENG_T_F16, 1, 2, ENG_T_F16, "f16"},
        {ENG_T_BF16, 1, 2, ENG_T_BF16, "bf16"},   {ENG_T_Q4_0, 32, 18, ENG_T_Q8_0, "q4_0"},
        {ENG_T_Q5_0, 32, 22, ENG_T_Q8_0, "q5_0"}, {ENG_T_Q8_0, 32, 34, ENG_T_Q8_0, "q8_0"},
        {ENG_T_Q4_K, 256, 144, ENG_T_Q8_K, "q4_K"}, {ENG_T_Q5_K, 256, 176, ENG_T_Q8_K, "q5_K"},
        {ENG_T_Q6_K, 256, 210, ENG_T_Q8_K, "q6_K"}, {ENG_T_Q8_K, 256, 292, ENG_T_Q8_K, "q8_K"},
    };
    for (size_t i = 0; i < LCX_ARRAY_LEN(exp); i++) {
        assert_true(eng__type_supported(exp[i].t));
        assert_int_equal(eng__type_block_elems(exp[i].t), exp[i].be);
        assert_int_equal(eng__type_block_bytes(exp[i].t), exp[i].bb);
        assert_int_equal(eng__vec_dot_type(exp[i].t), exp[i].vdt);
        assert_string_equal(eng__type_name(exp[i].t), exp[i].name);
        assert_int_equal(eng__row_bytes(exp[i].t, exp[i].be * 7), exp[i].bb * 7);
    }
    assert_int_equal(eng__row_bytes(ENG_T_Q4_0, 896), 28 * 18);
    for (int t = 3; t < 6; t++) assert_false(eng__type_supported(t));
    assert_false(eng__type_supported(7));
    assert_false(eng__type_supported(16));
    assert_false(eng__type_supported(-1));
    assert_int_equal(eng__type_block_bytes((eng_type)99), 0);
    assert_string_equal(eng__type_name((eng_type)99), "?");
}

static void test_conversions(void **state)
{
    (void)state;
    assert_int_equal(eng__fp32_to_fp16(1.0f), 0x3C00);
    assert_int_equal(eng__fp32_to_fp16(-2.0f), 0xC000);
    assert_int_equal(eng__fp32_to_fp16(0.5f), 0x3800);
    assert_int_equal(eng__fp32_to_fp16(65504.f), 0x7BFF);
    assert_int_equal(eng__fp32_to_fp16(1.0f + 1.0f / 2048), 0x3C00);          /* tie -> even */
    assert_int_equal(eng__fp32_to_fp16(1.0f + 3.0f / 2048), 0x3C02);          /* tie -> even */
    assert_true(eng__fp16_to_fp32(0x0001) == ldexpf(1.f, -24));               /* subnormal */
    assert_true(eng__fp16_to_fp32(0x3555) == 0.333251953125f);
    assert_int_equal(eng__fp32_to_bf16(1.0f), 0x3F80);
    assert_int_equal(eng__fp32_to_bf16(1.0f + 1.0f / 256), 0x3F80);           /* tie -> even */
    assert_int_equal(eng__fp32_to_bf16(1.0f + 3.0f / 256), 0x3F82);           /* tie -> even */
    assert_true(eng__bf16_to_fp32(0xC040) == -3.0f);
    assert_true(isnan(eng__bf16_to_fp32(eng__fp32_to_bf16(NAN))));
}

/* ------------------------------------------------------------------ hand-built blocks */

static void test_dequant_q4_0_q5_0_q8_0(void **state)
{
    (void)state;
    float y[32];
    eng_block_q4_0 b4;
    b4.d = 0x3800; /* 0.5 */
    for (int j = 0; j < 16; j++) b4.qs[j] = (uint8_t)(j | ((15 - j) << 4));
    eng__dequant_row(ENG_T_Q4_0, &b4, y, 32);
    for (int j = 0; j < 16; j++) {
        assert_true(y[j] == (j - 8) * 0.5f);
        assert_true(y[j + 16] == (7 - j) * 0.5f);
    }
    /* Q5_0: element j takes bit j of qh (LE uint32) as its 5th bit; elements 16.. use the
     * high nibbles and bits 16..31. qh = 0x8000FFFF -> elements 0..15 have the bit, and
     * element 31. d = 2. */
    eng_block_q5_0 b5;
    b5.d = 0x4000;
    const uint32_t qh = 0x8000FFFFu;
    memcpy(b5.qh, &qh, 4);
    for (int j = 0; j < 16; j++) b5.qs[j] = (uint8_t)(j | (j << 4));
    eng__dequant_row(ENG_T_Q5_0, &b5, y, 32);
    for (int j = 0; j < 16; j++) {
        assert_true(y[j] == (float)((j + 16) - 16) * 2.f);
        float e = (j == 15) ? (float)(15 + 16 - 16) * 2.f : (float)(j - 16) * 2.f;
        assert_true(y[j + 16] == e);
    }
    eng_block_q8_0 b8;
    b8.d = 0x3400; /* 0.25 */
    for (int j = 0; j < 32; j++) b8.qs[j] = (int8_t)(j * 8 - 128);
    eng__dequant_row(ENG_T_Q8_0, &b8, y, 32);
    for (int j = 0; j < 32; j++) assert_true(y[j] == (j * 8 - 128) * 0.25f);
}

/* Packs 8 (6-bit scale, 6-bit min) pairs the way ggml's Q4_K/Q5_K quantizers do. */
static void pack_k4_scales(const int sc[8], const int mn[8], uint8_t out[12])
{
    memset(out, 0, 12);
    for (int j = 0; j < 8; j++) {
        if (j < 4) {
            out[j] = (uint8_t)sc[j];
            out[j + 4] = (uint8_t)mn[j];
        } else {
            out[j + 4] = (uint8_t)((sc[j] & 0xF) | ((mn[j] & 0xF) << 4));
            out[j - 4] |= (uint8_t)((sc[j] >> 4) << 6);
            out[j] |= (uint8_t)((mn[j] >> 4) << 6);
        }
    }
}

static void test_dequant_k(void **state)
{
    (void)state;
    const int sc[8] = {1, 2, 3, 63, 17, 33, 48, 63}, mn[8] = {0, 5, 63, 1, 16, 31, 47, 62};
    float y[256];
    /* Q4_K: element 64j + l (l < 32) is the low nibble of qs[32j + l] (sub-block 2j),
     * element 64j + 32 + l the high nibble (sub-block 2j+1). y = d*sc*q - dmin*m. */
    eng_block_q4_K b;
    b.d = 0x3C00;     /* 1 */
    b.dmin = 0x3800;  /* 0.5 */
    pack_k4_scales(sc, mn, b.scales);
    /* check the packing against the bytes written out by hand */
    const uint8_t exp_scales[12] = {1 | (1 << 6), 2 | (2 << 6), 3 | (3 << 6), 63 | (3 << 6),
                                    0 | (1 << 6), 5 | (1 << 6), 63 | (2 << 6), 1 | (3 << 6),
                                    0x01, 0xF1, 0xF0, 0xEF};
    assert_memory_equal(b.scales, exp_scales, 12);
    for (int i = 0; i < 128; i++) b.qs[i] = (uint8_t)((i % 16) | ((15 - i % 16) << 4));
    eng__dequant_row(ENG_T_Q4_K, &b, y, 256);
    for (int j = 0; j < 4; j++)
        for (int l = 0; l < 32; l++) {
            int lo = (32 * j + l) % 16, hi = 15 - lo;
            assert_true(y[64 * j + l] == 1.f * sc[2 * j] * lo - 0.5f * mn[2 * j]);
            assert_true(y[64 * j + 32 + l] == 1.f * sc[2 * j + 1] * hi - 0.5f * mn[2 * j + 1]);
        }
    /* Q5_K: as Q4_K plus bit (2j) of qh[l] for element 64j+l and bit (2j+1) for 64j+32+l */
    eng_block_q5_K b5;
    b5.d = 0x4000;    /* 2 */
    b5.dmin = 0x3C00; /* 1 */
    pack_k4_scales(sc, mn, b5.scales);
    for (int l = 0; l < 32; l++) b5.qh[l] = (uint8_t)(l * 37 + 11);
    for (int i = 0; i < 128; i++) b5.qs[i] = (uint8_t)(i * 7 + 3);
    eng__dequant_row(ENG_T_Q5_K, &b5, y, 256);
    for (int j = 0; j < 4; j++)
        for (int l = 0; l < 32; l++) {
            uint8_t qs = (uint8_t)((32 * j + l) * 7 + 3), qh = (uint8_t)(l * 37 + 11);
            int q0 = (qs & 0xF) + (((qh >> (2 * j)) & 1) ? 16 : 0);
            int q1 = (qs >> 4) + (((qh >> (2 * j + 1)) & 1) ? 16 : 0);
            assert_true(y[64 * j + l] == 2.f * sc[2 * j] * q0 - 1.f * mn[2 * j]);
            assert_true(y[64 * j + 32 + l] == 2.f * sc[2 * j + 1] * q1 - 1.f * mn[2 * j + 1]);
        }
    /* Q6_K: for half n and l < 32: elements 128n + l + {0,32,64,96} take the low nibble of
     * ql[64n+l], low of ql[64n+l+32], high of ql[64n+l], high of ql[64n+l+32], with bits
     * {0-1, 2-3, 4-5, 6-7} of qh[32n+l] on top; minus 32; scale index = element / 16. */
    eng_block_q6_K b6;
    for (int i = 0; i < 128; i++) b6.ql[i] = (uint8_t)(i * 13 + 5);
    for (int i = 0; i < 64; i++) b6.qh[i] = (uint8_t)(i * 29 + 1);
    for (int i = 0; i < 16; i++) b6.scales[i] = (int8_t)(i * 17 - 128);
    b6.d = 0x3400; /* 0.25 */
    eng__dequant_row(ENG_T_Q6_K, &b6, y, 256);
    for (int n = 0; n < 2; n++)
        for (int l = 0; l < 32; l++) {
            uint8_t a = (uint8_t)((64 * n + l) * 13 + 5), c = (uint8_t)((64 * n + l + 32) * 13 + 5);
            uint8_t h = (uint8_t)((32 * n + l) * 29 + 1);
            int q[4] = {(a & 0xF) | ((h & 3) << 4), (c & 0xF) | (((h >> 2) & 3) << 4),
                        (a >> 4) | (((h >> 4) & 3) << 4), (c >> 4) | (((h >> 6) & 3) << 4)};
            for (int k = 0; k < 4; k++) {
                int e = 128 * n + 32 * k + l;
                assert_true(y[e] == 0.25f * (float)((e / 16) * 17 - 128) * (float)(q[k] - 32));
            }
        }
}

/* ------------------------------------------------------------------ activation quantizers */

static void test_quantize_q8_0_exact(void **state)
{
    (void)state;
    /* amax = 127 -> id = 1: the quants are round-half-even of x itself */
    float x[32] = {127.f, 0.5f, 1.5f, 2.5f, -0.5f, -1.5f, -2.5f, 3.49f, -126.5f, 125.5f};
    eng_block_q8_0 b;
    eng__quantize_row(ENG_T_Q8_0, x, &b, 32);
    const int8_t exp[10] = {127, 0, 2, 2, 0, -2, -2, 3, -126, 126};
    for (int j = 0; j < 10; j++) assert_int_equal(b.qs[j], exp[j]);
    for (int j = 10; j < 32; j++) assert_int_equal(b.qs[j], 0);
    assert_int_equal(b.d, eng__fp32_to_fp16(1.0f));
    /* the inverse scale is 127/amax, not 1/fp16(d): amax = 3 -> d = fp16(3/127), q = x*42.33 */
    float z[32] = {0};
    z[0] = 3.f;
    z[1] = -1.f;
    eng__quantize_row(ENG_T_Q8_0, z, &b, 32);
    assert_int_equal(b.qs[0], 127);
    assert_int_equal(b.qs[1], -42);
    assert_int_equal(b.d, eng__fp32_to_fp16(3.f / 127.f));
    /* zero block */
    memset(z, 0, sizeof z);
    eng__quantize_row(ENG_T_Q8_0, z, &b, 32);
    assert_int_equal(b.d, 0);
    for (int j = 0; j < 32; j++) assert_int_equal(b.qs[j], 0);
    /* the AVX2 quantizer (used by eng__quantize_row) equals the scalar one bit for bit */
    enum { N = 32 * 257 };
    float *r = xmalloc(N * 4);
    fill_normal(r, N, 1.f);
    for (int i = 0; i < 64; i++) r[i * 100] = (float)((int)(rnd() % 255) - 127); /* ties */
    for (int i = 32 * 5; i < 32 * 6; i++) r[i] = 0.f;
    uint8_t *a = xmalloc(eng__row_bytes(ENG_T_Q8_0, N)), *c = xmalloc(eng__row_bytes(ENG_T_Q8_0, N));
    eng__quantize_row(ENG_T_Q8_0, r, a, N);
    eng__quantize_row_q8_0_ref(r, c, N);
    assert_memory_equal(a, c, eng__row_bytes(ENG_T_Q8_0, N));
    free(r);
    free(a);
    free(c);
}

static void test_quantize_q8_K_exact(void **state)
{
    (void)state;
    /* max (signed, largest |x|) = -127 -> iscale = -127/max = 1, q = nearest_int(x),
     * d = 1/iscale = 1 */
    float x[256] = {0};
    x[0] = -127.f;
    x[1] = 0.5f;
    x[2] = 1.5f;
    x[3] = 2.5f;
    x[4] = -3.5f;
    x[17] = 100.f;
    eng_block_q8_K b;
    eng__quantize_row(ENG_T_Q8_K, x, &b, 256);
    assert_true(b.d == 1.f);
    assert_int_equal(b.qs[0], -127);
    assert_int_equal(b.qs[1], 0);
    assert_int_equal(b.qs[2], 2);
    assert_int_equal(b.qs[3], 2);
    assert_int_equal(b.qs[4], -4);
    assert_int_equal(b.qs[17], 100);
    assert_int_equal(b.bsums[0], -127 + 0 + 2 + 2 - 4);
    assert_int_equal(b.bsums[1], 100);
    for (int j = 2; j < 16; j++) assert_int_equal(b.bsums[j], 0);
    /* positive max -> negative scale, quants negated */
    x[0] = 127.f;
    eng__quantize_row(ENG_T_Q8_K, x, &b, 256);
    assert_true(b.d == -1.f);
    assert_int_equal(b.qs[0], -127);
    assert_int_equal(b.qs[2], -2);
    assert_int_equal(b.qs[4], 4);
    assert_int_equal(b.qs[17], -100);
    /* the AVX2 quantizer (used by eng__quantize_row) equals the scalar one bit for bit,
     * incl. ties in |x| of opposite sign (the first one wins), exact .5 products, zero blocks */
    {
        enum { NB = 40 };
        float *r = xmalloc(NB * 256 * 4);
        fill_normal(r, NB * 256, 2.f);
        for (int i = 0; i < 256; i++) r[256 * 3 + i] = 0.f;
        r[256 * 4 + 10] = 5.f;
        r[256 * 4 + 3] = -5.f; /* first max|x| is negative */
        r[256 * 5 + 7] = 127.f;
        for (int i = 0; i < 256; i++) r[256 * 6 + i] = (float)(i % 21) * 0.5f - 5.f; /* ties at .5 */
        r[256 * 6 + 0] = -127.f;
        uint8_t *a = xmalloc(NB * sizeof(eng_block_q8_K)), *c = xmalloc(NB * sizeof(eng_block_q8_K));
        eng__quantize_row(ENG_T_Q8_K, r, a, NB * 256);
        eng__quantize_row_q8_K_ref(r, c, NB * 256);
        assert_memory_equal(a, c, NB * sizeof(eng_block_q8_K));
        free(r);
        free(a);
        free(c);
    }
    /* random rows: d*q reproduces x within d/2, bsums are the sums */
    float r[512];
    fill_normal(r, 512, 3.f);
    eng_block_q8_K bb[2];
    eng__quantize_row(ENG_T_Q8_K, r, bb, 512);
    for (int i = 0; i < 2; i++) {
        for (int j = 0; j < 16; j++) {
            int s = 0;
            for (int l = 0; l < 16; l++) s += bb[i].qs[16 * j + l];
            assert_int_equal(bb[i].bsums[j], s);
        }
        for (int e = 0; e < 256; e++)
            assert_true(fabsf(bb[i].d * bb[i].qs[e] - r[256 * i + e]) <= fabsf(bb[i].d) * 0.5001f);
    }
}

/* ------------------------------------------------------------------ round trips */

static void test_roundtrip_bounds(void **state)
{
    (void)state;
    enum { N = 4096 };
    float *x = xmalloc(N * 4), *y = xmalloc(N * 4);
    uint8_t *q = xmalloc(eng__row_bytes(ENG_T_F32, N) + 64);
    const eng_type types[] = {ENG_T_F32, ENG_T_F16, ENG_T_BF16, ENG_T_Q4_0, ENG_T_Q5_0, ENG_T_Q8_0,
                              ENG_T_Q4_K, ENG_T_Q5_K, ENG_T_Q6_K, ENG_T_Q8_K};
    /* max error relative to the block's max|x|, and RMS error relative to RMS(x) */
    /* Q4_0/Q5_0 (ggml reference): the signed max maps to -8/-16, so the opposite extreme
     * clips at +7/+15: up to amax/8 (amax/16). Q8_x: half a step, amax/254. K-quants: half a
     * step of the sub-block scale plus the 6/8-bit scale rounding. */
    const double max_rel[] = {0, 1.0 / 2048, 1.0 / 256, 1.0 / 7.99, 1.0 / 15.99, 1.0 / 220, /* q8_0: + fp16(d) rounding */
                              1.0 / 12, 1.0 / 24, 1.0 / 24, 1.0 / 253};
    const double rms_rel[] = {0, 3e-4, 3e-3, 0.13, 0.065, 0.012, 0.11, 0.055, 0.03, 0.015};
    for (size_t k = 0; k < LCX_ARRAY_LEN(types); k++) {
        eng_type t = types[k];
        fill_normal(x, N, 0.7f);
        eng__quantize_row(t, x, q, N);
        eng__dequant_row(t, q, y, N);
        const int64_t be = t == ENG_T_Q4_K || t == ENG_T_Q5_K || t == ENG_T_Q6_K || t == ENG_T_Q8_K ? 256 : 32;
        double se = 0, sx = 0, worst = 0;
        for (int64_t b0 = 0; b0 < N; b0 += be) {
            float amax = 0.f;
            for (int64_t i = b0; i < b0 + be; i++) amax = fmaxf(amax, fabsf(x[i]));
            for (int64_t i = b0; i < b0 + be; i++) {
                double e = fabs((double)y[i] - x[i]);
                if (t == ENG_T_F32) assert_true(e == 0);
                else if (t == ENG_T_F16 || t == ENG_T_BF16) assert_true(e <= fabs(x[i]) * max_rel[k] * 1.0001);
                if (amax > 0) worst = fmax(worst, e / amax);
                if (t != ENG_T_F32 && t != ENG_T_F16 && t != ENG_T_BF16 && e > amax * max_rel[k]) fail_msg("%s: |err| %g > %g at %ld", eng__type_name(t), e, amax * max_rel[k], (long)i);
                se += e * e;
                sx += (double)x[i] * x[i];
            }
        }
        double rr = sqrt(se / sx);
        printf("  round trip %-5s rms rel err %.5f, max err / block amax %.5f\n", eng__type_name(t), rr, worst);
        assert_true(rr <= rms_rel[k] + 1e-12);
    }
    free(x);
    free(y);
    free(q);
}

/* ------------------------------------------------------------------ numpy reference */

static int run_py(const char *args, char **out)
{
    const char *py = getenv("LCX_PY"), *src = getenv("LCX_SRC");
    if (!py) py = "/usr/bin/python3";
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "%s %s/tests/engine-quant/ref_quant.py %s", py, src ? src : ".", args);
    return tu_run(cmd, out);
}

static float *read_f32(const char *path, size_t *n)
{
    char *d = NULL;
    size_t len = 0;
    assert_int_equal(lcx__read_file(path, 0, &d, &len), 0);
    *n = len / 4;
    float *f = xmalloc(len);
    memcpy(f, d, len);
    free(d);
    return f;
}

/* Dequantize tensors quantized by llama.cpp with both our code and the numpy reference;
 * where an F32 master exists, requantize it with our ggml-reference quantizers and require
 * the exact bytes llama-quantize wrote. Also checks the kernels' dot products on them. */
static void check_fixture_tensor(const char *model, const char *tensor, const char *f32_model, bool exact_requant)
{
    /* fixtures first: a missing one skips (longjmps) before anything is allocated */
    const char *model_path = tu_fixture(model), *f32_path = f32_model ? tu_fixture(f32_model) : NULL;
    char *dir = tu_tmpdir(), args[2048], path[1024], *out = NULL;
    snprintf(args, sizeof args, "extract %s %s %s/t", model_path, tensor, dir);
    assert_int_equal(run_py(args, &out), 0);
    int type = -1;
    long ne0 = 0, ne1 = 0;
    assert_int_equal(sscanf(out, "%d %ld %ld", &type, &ne0, &ne1), 3);
    free(out);
    assert_true(eng__type_supported(type));
    snprintf(path, sizeof path, "%s/t.raw", dir);
    char *raw = NULL;
    size_t raw_len = 0;
    assert_int_equal(lcx__read_file(path, 0, &raw, &raw_len), 0);
    assert_int_equal(raw_len, eng__row_bytes((eng_type)type, ne0) * (size_t)ne1);
    snprintf(path, sizeof path, "%s/t.f32", dir);
    size_t nf = 0;
    float *ref = read_f32(path, &nf);
    assert_int_equal(nf, (size_t)(ne0 * ne1));
    float *ours = xmalloc(nf * 4);
    const size_t rb = eng__row_bytes((eng_type)type, ne0);
    for (long r = 0; r < ne1; r++) eng__dequant_row((eng_type)type, raw + r * rb, ours + r * ne0, ne0);
    for (size_t i = 0; i < nf; i++)
        if (ours[i] != ref[i]) fail_msg("%s %s: dequant[%zu] %g != numpy %g", model, tensor, i, ours[i], ref[i]);
    printf("  %s %s (%s %ldx%ld): dequant == numpy\n", model, tensor, eng__type_name((eng_type)type), ne0, ne1);

    if (f32_model) {
        snprintf(args, sizeof args, "extract %s %s %s/m", f32_path, tensor, dir);
        assert_int_equal(run_py(args, &out), 0);
        free(out);
        snprintf(path, sizeof path, "%s/m.f32", dir);
        size_t nm = 0;
        float *master = read_f32(path, &nm);
        assert_int_equal(nm, nf);
        uint8_t *rq = xmalloc(raw_len);
        for (long r = 0; r < ne1; r++) eng__quantize_row((eng_type)type, master + r * ne0, rq + r * rb, ne0);
        if (exact_requant) {
            assert_memory_equal(rq, raw, raw_len);
            printf("  requantized F32 master == llama-quantize bytes\n");
        }
        free(rq);
        free(master);
    }

    /* dot products on these real weights: kernels vs dequant-then-float-dot */
    const eng_type vt = eng__vec_dot_type((eng_type)type);
    float *x = xmalloc(ne0 * 4), *xd = xmalloc(ne0 * 4);
    uint8_t *xq = xmalloc(eng__row_bytes(vt, ne0));
    fill_normal(x, ne0, 1.f);
    eng__quantize_row(vt, x, xq, ne0);
    eng__dequant_row(vt, xq, xd, ne0);
    float *y = xmalloc(ne1 * 4);
    eng__matmul((eng_type)type, raw, rb, ne0, 0, ne1, xq, 0, 1, y, ne1);
    for (long r = 0; r < ne1; r++) {
        double s = 0, sa = 0;
        for (long i = 0; i < ne0; i++) {
            s += (double)ref[r * ne0 + i] * xd[i];
            sa += fabs((double)ref[r * ne0 + i] * xd[i]);
        }
        if (fabs(y[r] - s) > 1e-5 * sa + 1e-30) fail_msg("%s row %ld: %g vs %g", tensor, r, y[r], s);
    }
    free(x);
    free(xd);
    free(xq);
    free(y);
    free(ours);
    free(ref);
    free(raw);
    tu_rmrf(dir);
    free(dir);
}

static void test_fixture_q4_0(void **state)
{
    (void)state;
    check_fixture_tensor("gguf/tiny-llama-q4_0.gguf", "blk.0.ffn_down.weight", "gguf/tiny-llama-f32.gguf", true);
    check_fixture_tensor("gguf/tiny-qwen2-q4_0.gguf", "token_embd.weight", "gguf/tiny-qwen2-f32.gguf", true);
}

static void test_fixture_q8_0(void **state)
{
    (void)state;
    /* llama-quantize uses roundf and 1/fp16(d) for weights, our Q8_0 quantizer is the
     * activation one (round-half-even, 127/amax): the bytes may differ in rare ties, so
     * only dequant and dots are checked here. */
    check_fixture_tensor("gguf/tiny-llama-q8_0.gguf", "blk.1.attn_q.weight", "gguf/tiny-llama-f32.gguf", false);
}

static void test_fixture_q5_0_f16(void **state)
{
    (void)state;
    check_fixture_tensor("gguf/tiny-qwen2-q4_k_m.gguf", "blk.0.ffn_gate.weight", "gguf/tiny-qwen2-f32.gguf", true);
    check_fixture_tensor("gguf/tiny-qwen2-f16.gguf", "blk.0.attn_k.weight", "gguf/tiny-qwen2-f32.gguf", true);
}

static void test_fixture_k(void **state)
{
    (void)state;
    check_fixture_tensor("gguf/tiny-llama256-q4_k_m.gguf", "blk.0.attn_q.weight", NULL, false);
    check_fixture_tensor("gguf/tiny-llama256-q4_k_m.gguf", "output.weight", NULL, false);
    check_fixture_tensor("gguf/tiny-qwen2-256-q4_k_m.gguf", "blk.1.ffn_down.weight", NULL, false);
}

/* Our Q5_K / BF16 / Q8_K rows (no fixture has them) against the numpy dequantizer. */
static void test_numpy_dequant_own_rows(void **state)
{
    (void)state;
    const eng_type types[] = {ENG_T_Q5_K, ENG_T_Q4_K, ENG_T_Q6_K, ENG_T_BF16, ENG_T_Q8_K, ENG_T_Q5_0};
    enum { N = 2048 };
    float *x = xmalloc(N * 4), *ours = xmalloc(N * 4);
    uint8_t *q = xmalloc(N * 4);
    char *dir = tu_tmpdir();
    for (size_t k = 0; k < LCX_ARRAY_LEN(types); k++) {
        fill_normal(x, N, 0.3f);
        eng__quantize_row(types[k], x, q, N);
        eng__dequant_row(types[k], q, ours, N);
        char path[1024], args[2048], *out = NULL;
        snprintf(path, sizeof path, "%s/r.raw", dir);
        assert_int_equal(tu_write(path, (const char *)q, eng__row_bytes(types[k], N)), 0);
        snprintf(args, sizeof args, "dequant %d %s %s/r.f32", (int)types[k], path, dir);
        assert_int_equal(run_py(args, &out), 0);
        free(out);
        snprintf(path, sizeof path, "%s/r.f32", dir);
        size_t n = 0;
        float *ref = read_f32(path, &n);
        assert_int_equal(n, N);
        for (int i = 0; i < N; i++)
            if (ours[i] != ref[i]) fail_msg("%s[%d] %g != numpy %g", eng__type_name(types[k]), i, ours[i], ref[i]);
        free(ref);
    }
    tu_rmrf(dir);
    free(dir);
    free(x);
    free(ours);
    free(q);
}

/* ------------------------------------------------------------------ dot products */

/* Scalar reference dot == dequantized W . dequantized X (double), all types. */
static void test_ref_dot_vs_float(void **state)
{
    (void)state;
    enum { N = 1024 };
    float *w = xmalloc(N * 4), *x = xmalloc(N * 4), *wd = xmalloc(N * 4), *xd = xmalloc(N * 4);
    uint8_t *wq = xmalloc(N * 4), *xq = xmalloc(N * 4 + 64);
    for (size_t k = 0; k < LCX_ARRAY_LEN(k_wtypes); k++) {
        eng_type t = k_wtypes[k], vt = eng__vec_dot_type(t);
        for (int rep = 0; rep < 8; rep++) {
            fill_normal(w, N, 0.05f);
            fill_normal(x, N, 2.f);
            eng__quantize_row(t, w, wq, N);
            eng__quantize_row(vt, x, xq, N);
            eng__dequant_row(t, wq, wd, N);
            eng__dequant_row(vt, xq, xd, N);
            double s = 0, sa = 0;
            for (int i = 0; i < N; i++) {
                s += (double)wd[i] * xd[i];
                sa += fabs((double)wd[i] * xd[i]);
            }
            float r = eng__vec_dot_ref(t, N, wq, xq);
            if (fabs(r - s) > 2e-6 * sa) fail_msg("%s: ref %g vs float %g (sa %g)", eng__type_name(t), r, s, sa);
            float d = eng__vec_dot(t, N, wq, xq);
            if (fabs(d - s) > 1e-5 * sa) fail_msg("%s: dispatched %g vs float %g", eng__type_name(t), d, s);
        }
    }
    free(w);
    free(x);
    free(wd);
    free(xd);
    free(wq);
    free(xq);
}

/* eng__matmul_isa(isa) vs scalar over shapes that hit every tile size and remainder. */
static void check_isa(eng_isa isa)
{
    /* 19200 = 600 Q8_0 blocks: rows longer than one column segment (512 blocks);
     * 800 = 25 blocks: odd block count (the generation kernel steps 2 blocks at a time) */
    const int64_t n_ins[] = {256, 512, 768, 800, 19200};
    const int64_t rows = 13, ntoks[] = {1, 2, 3, 4, 5, 7, 9};
    for (size_t k = 0; k < LCX_ARRAY_LEN(k_wtypes); k++) {
        eng_type t = k_wtypes[k], vt = eng__vec_dot_type(t);
        for (size_t a = 0; a < LCX_ARRAY_LEN(n_ins); a++) {
            if (n_ins[a] > 1024 && t != ENG_T_Q8_0 && t != ENG_T_Q4_0 && t != ENG_T_Q5_0) continue;
            if (n_ins[a] % eng__type_block_elems(t)) continue; /* K-quants: 256-multiples only */
            int64_t n = n_ins[a] + ((t == ENG_T_F32 || t == ENG_T_F16 || t == ENG_T_BF16) ? 5 : 0);
            const size_t wrb = eng__row_bytes(t, n), xrb = eng__row_bytes(vt, n) + 16; /* padded stride */
            uint8_t *W = xmalloc(wrb * rows), *X = xmalloc(xrb * 9);
            float *f = xmalloc(n * 4);
            quant_random_rows(t, W, wrb, n, rows, 0.1f, f);
            quant_random_rows(vt, X, xrb, n, 9, 1.f, f);
            /* mag[r][t] = Σ|w_i x_i| (dequantized, double): float summation error scales with
             * it, not with the (possibly cancelled) result */
            double mag[13][9];
            {
                float *wd = xmalloc(n * 4), *xd = xmalloc(n * 4 * 9);
                for (int64_t i = 0; i < 9; i++) eng__dequant_row(vt, X + i * xrb, xd + i * n, n);
                for (int64_t r = 0; r < rows; r++) {
                    eng__dequant_row(t, W + r * wrb, wd, n);
                    for (int64_t i = 0; i < 9; i++) {
                        double m = 0;
                        for (int64_t j = 0; j < n; j++) m += fabs((double)wd[j] * xd[i * n + j]);
                        mag[r][i] = m;
                    }
                }
                free(wd);
                free(xd);
            }
            for (size_t b = 0; b < LCX_ARRAY_LEN(ntoks); b++) {
                const int64_t nt = ntoks[b], ldy = rows + 3, r0 = (b & 1) ? 1 : 0;
                float *ys = xmalloc(ldy * nt * 4), *yv = xmalloc(ldy * nt * 4);
                for (int64_t i = 0; i < ldy * nt; i++) ys[i] = yv[i] = -777.f;
                eng__matmul_isa(ENG_ISA_SCALAR, t, W, wrb, n, r0, rows, X, xrb, nt, ys, ldy);
                eng__matmul_isa(isa, t, W, wrb, n, r0, rows, X, xrb, nt, yv, ldy);
                {
                    /* with a workspace (bigger row chunks): the same floats as without */
                    float *yw = xmalloc(ldy * nt * 4);
                    void *ws = xmalloc(ENG_MATMUL_WS_BYTES + 5);
                    for (int64_t i = 0; i < ldy * nt; i++) yw[i] = -777.f;
                    eng__matmul_isa_ws(isa, t, W, wrb, n, r0, rows, X, xrb, nt, yw, ldy, (char *)ws + 5,
                                      ENG_MATMUL_WS_BYTES);
                    if (memcmp(yw, yv, ldy * nt * 4))
                        fail_msg("%s %s n=%ld nt=%ld: results with a workspace differ", eng__isa_name(isa),
                                 eng__type_name(t), (long)n, (long)nt);
                    free(ws);
                    free(yw);
                }
                for (int64_t tt = 0; tt < nt; tt++)
                    for (int64_t r = 0; r < ldy; r++) {
                        float s = ys[tt * ldy + r], v = yv[tt * ldy + r];
                        if (r < r0 || r >= rows) {
                            assert_true(s == -777.f && v == -777.f); /* outside [r0,r1): untouched */
                            continue;
                        }
                        /* a wrong block or lane is off by ~1e-3 of mag or more; summation-order
                         * differences stay below ~3e-8 of mag */
                        if (!(fabs((double)s - v) <= 1e-6 * mag[r][tt] + 1e-6 * fabs(s)))
                            fail_msg("%s %s n=%ld nt=%ld r=%ld t=%ld: %.9g vs scalar %.9g (sum|terms| %g)",
                                     eng__isa_name(isa), eng__type_name(t), (long)n, (long)nt, (long)r, (long)tt,
                                     v, s, mag[r][tt]);
                    }
                free(ys);
                free(yv);
            }
            free(W);
            free(X);
            free(f);
        }
    }
}

static void test_avx2_vs_scalar(void **state)
{
    (void)state;
    if (!eng__isa_available(ENG_ISA_AVX2)) {
        printf("  SKIPPED: CPU has no AVX2/FMA/F16C\n");
        skip();
    }
    check_isa(ENG_ISA_AVX2);
}

static void test_avx512_vs_scalar(void **state)
{
    (void)state;
    if (!eng__isa_available(ENG_ISA_AVX512)) {
        printf("  SKIPPED: AVX-512 comparison (CPU/OS has no AVX-512F/BW/VL/DQ, or LCX_NO_AVX512 set)\n");
        return;
    }
    printf("  running AVX-512 kernels (%s)\n", eng__isa_name(ENG_ISA_AVX512));
    check_isa(ENG_ISA_AVX512);
}

/* Generation (n_tok = 1) and prompt (n_tok > 1) kernels take the same float steps per
 * token, so a token's outputs are bit-identical either way (the engine's token-by-token
 * vs batch logits check relies on it: a 1e-7 difference can flip a round-half case of the
 * next layer's activation quantization and move logits of a tiny model by 0.07). */
static void test_generation_matches_prompt(void **state)
{
    (void)state;
    /* AVX2 kernels (also on AVX-512 machines: the AVX-512 Q8_0-family kernels remove the
     * zero point differently for prompts and generation, so they are only close) */
    const eng_isa isa = eng__isa_available(ENG_ISA_AVX2) ? ENG_ISA_AVX2 : ENG_ISA_SCALAR;
    /* 800 / 5184 (25 / 162 blocks): the Q5_0 matvec's 4x unrolled block loop leaves a
     * remainder, and 5184 spans two column segments (the second one accumulates) */
    const int64_t n_ins[] = {256, 768, 800, 4864, 5184};
    enum { ROWS = 37, NT = 11 };
    for (size_t k = 0; k < LCX_ARRAY_LEN(k_wtypes); k++) {
        eng_type t = k_wtypes[k], vt = eng__vec_dot_type(t);
        for (size_t a = 0; a < LCX_ARRAY_LEN(n_ins); a++) {
            const int64_t n = n_ins[a];
            if (n % eng__type_block_elems(t)) continue;
            const size_t wrb = eng__row_bytes(t, n), xrb = eng__row_bytes(vt, n);
            uint8_t *W = xmalloc(wrb * ROWS), *X = xmalloc(xrb * NT);
            float *f = xmalloc(n * 4), *yb = xmalloc(ROWS * NT * 4), *y1 = xmalloc(ROWS * 4);
            quant_random_rows(t, W, wrb, n, ROWS, 0.1f, f);
            quant_random_rows(vt, X, xrb, n, NT, 1.f, f);
            eng__matmul_isa(isa, t, W, wrb, n, 0, ROWS, X, xrb, NT, yb, ROWS);
            for (int64_t i = 0; i < NT; i++) {
                eng__matmul_isa(isa, t, W, wrb, n, 0, ROWS, X + i * xrb, xrb, 1, y1, ROWS);
                for (int64_t r = 0; r < ROWS; r++)
                    if (memcmp(&y1[r], &yb[i * ROWS + r], sizeof(float)))
                        fail_msg("%s n=%ld token %ld row %ld: n_tok 1 gives %.9g, n_tok %d gives %.9g", eng__type_name(t),
                                 (long)n, (long)i, (long)r, y1[r], NT, yb[i * ROWS + r]);
            }
            free(W);
            free(X);
            free(f);
            free(yb);
            free(y1);
        }
    }
}

/* Generation kernels read several far-apart row streams at once (quant_avx2.c VEC_S: rows
 * [r0,r1) cut into 4 ranges, one row of each per step, the rows left over alone). Every row
 * must still get exactly the float it gets when it is computed alone (a one-row call runs
 * the single-stream path), whatever the row count and r0 (so a wrong stream offset, output
 * index or remainder row fails), and outputs outside [r0,r1) stay untouched. Rows of 5376
 * elements span two Q4_0/Q5_0 column segments (the second accumulates into y). */
static void test_generation_streams(void **state)
{
    (void)state;
    const eng_isa isa = eng__isa_available(ENG_ISA_AVX2) ? ENG_ISA_AVX2 : ENG_ISA_SCALAR;
    const eng_type ts[] = {ENG_T_Q8_0, ENG_T_Q4_0, ENG_T_Q5_0, ENG_T_Q5_0X4, ENG_T_Q4_K, ENG_T_Q5_K, ENG_T_Q6_K, ENG_T_F16};
    const int64_t n_ins[] = {896, 5376};
    const int64_t r1s[] = {1, 2, 3, 4, 5, 7, 8, 9, 13, 16, 37, 70};
    enum { ROWS = 72 };
    for (size_t k = 0; k < LCX_ARRAY_LEN(ts); k++)
        for (size_t a = 0; a < LCX_ARRAY_LEN(n_ins); a++) {
            const eng_type t = ts[k], vt = eng__vec_dot_type(t);
            int64_t n = n_ins[a];
            if (eng__type_block_elems(t) == ENG_QK_K) n = n == 896 ? 768 : 4864; /* 256-multiples */
            const size_t wrb = eng__row_bytes(t, n), xrb = eng__row_bytes(vt, n);
            uint8_t *W = xmalloc(wrb * ROWS), *X = xmalloc(xrb);
            float *f = xmalloc(n * 4), *y1 = xmalloc(ROWS * 4), *ys = xmalloc(ROWS * 4);
            if (t == ENG_T_Q5_0X4) {
                quant_random_rows(ENG_T_Q5_0, W, wrb, n, ROWS, 0.1f, f);
                for (int64_t r = 0; r < ROWS; r++) eng__q5_0x4_from_q5_0(W + r * wrb, W + r * wrb, n);
            } else quant_random_rows(t, W, wrb, n, ROWS, 0.1f, f);
            quant_random_rows(vt, X, xrb, n, 1, 1.f, f);
            for (int64_t r = 0; r < ROWS; r++) eng__matmul_isa(isa, t, W, wrb, n, r, r + 1, X, xrb, 1, y1, ROWS);
            for (size_t b = 0; b < LCX_ARRAY_LEN(r1s); b++)
                for (int64_t r0 = 0; r0 < 3; r0 += 2) {
                    const int64_t r1 = r0 + r1s[b];
                    for (int64_t r = 0; r < ROWS; r++) ys[r] = -777.f;
                    eng__matmul_isa(isa, t, W, wrb, n, r0, r1, X, xrb, 1, ys, ROWS);
                    for (int64_t r = 0; r < ROWS; r++) {
                        if (r < r0 || r >= r1) {
                            assert_true(ys[r] == -777.f);
                            continue;
                        }
                        if (memcmp(&ys[r], &y1[r], 4))
                            fail_msg("%s n=%ld rows [%ld,%ld) row %ld: %.9g, alone %.9g", eng__type_name(t), (long)n,
                                     (long)r0, (long)r1, (long)r, ys[r], y1[r]);
                    }
                }
            free(W);
            free(X);
            free(f);
            free(y1);
            free(ys);
        }
}

/* Q8_0-family prompt kernels over many rows: several row chunks (with and without a
 * workspace: different chunk sizes), several K steps (4864 = 152 blocks), a partial last
 * token tile, r0 > 0. Every token's outputs must equal its generation (n_tok = 1) outputs
 * bit for bit, with and without the workspace. */
static void test_prompt_chunks(void **state)
{
    (void)state;
    const eng_isa isa = eng__isa_available(ENG_ISA_AVX2) ? ENG_ISA_AVX2 : ENG_ISA_SCALAR;
    const eng_type ts[] = {ENG_T_Q8_0, ENG_T_Q5_0, ENG_T_Q4_0, ENG_T_Q5_0X4};
    const int64_t n_ins[] = {896, 4864};
    enum { ROWS = 300, NT = 13, R0 = 5 };
    void *ws = xmalloc(ENG_MATMUL_WS_BYTES);
    for (size_t k = 0; k < LCX_ARRAY_LEN(ts); k++)
        for (size_t a = 0; a < LCX_ARRAY_LEN(n_ins); a++) {
            const eng_type t = ts[k];
            const int64_t n = n_ins[a];
            const size_t wrb = eng__row_bytes(t, n), xrb = eng__row_bytes(ENG_T_Q8_0, n);
            uint8_t *W = xmalloc(wrb * ROWS), *X = xmalloc(xrb * NT);
            float *f = xmalloc(n * 4), *yb = xmalloc(ROWS * NT * 4), *yw = xmalloc(ROWS * NT * 4), *y1 = xmalloc(ROWS * 4);
            quant_random_rows(t, W, wrb, n, ROWS, 0.1f, f);
            quant_random_rows(ENG_T_Q8_0, X, xrb, n, NT, 1.f, f);
            eng__matmul_isa(isa, t, W, wrb, n, R0, ROWS, X, xrb, NT, yb, ROWS);
            eng__matmul_isa_ws(isa, t, W, wrb, n, R0, ROWS, X, xrb, NT, yw, ROWS, ws, ENG_MATMUL_WS_BYTES);
            for (int64_t i = 0; i < NT; i++) {
                eng__matmul_isa(isa, t, W, wrb, n, R0, ROWS, X + i * xrb, xrb, 1, y1, ROWS);
                for (int64_t r = R0; r < ROWS; r++)
                    if (memcmp(&y1[r], &yb[i * ROWS + r], 4) || memcmp(&y1[r], &yw[i * ROWS + r], 4))
                        fail_msg("%s n=%ld token %ld row %ld: generation %.9g, prompt %.9g, prompt+ws %.9g",
                                 eng__type_name(t), (long)n, (long)i, (long)r, y1[r], yb[i * ROWS + r], yw[i * ROWS + r]);
            }
            free(W);
            free(X);
            free(f);
            free(yb);
            free(yw);
            free(y1);
        }
    free(ws);
}

/* Q5_0X4 (Q5_0 re-laid by groups of 4 blocks at model load): the same values as the Q5_0
 * row it came from (dequantised bit for bit; in-place and copying re-layout agree), a
 * hand-checked group, and every kernel gives the Q5_0 kernel's floats bit for bit: scalar
 * reference, AVX2 generation (n_tok 1) and prompt tiles (n_tok 7 and 13, with and without a
 * workspace), rows of 128/896/4864 elements, r0 > 0. */
static void test_q5_0x4(void **state)
{
    (void)state;
    /* hand-built: block k has d = k+1, element e quant (e + 3k) % 32 */
    {
        eng_block_q5_0 b[4];
        memset(b, 0, sizeof b);
        for (int k = 0; k < 4; k++) {
            uint32_t qh = 0;
            b[k].d = eng__fp32_to_fp16((float)(k + 1));
            for (int e = 0; e < 32; e++) {
                const int q = (e + 3 * k) % 32;
                if (e < 16) b[k].qs[e] |= (uint8_t)(q & 0xF);
                else b[k].qs[e - 16] |= (uint8_t)((q & 0xF) << 4);
                qh |= (uint32_t)(q >> 4) << e;
            }
            memcpy(b[k].qh, &qh, 4);
        }
        eng_block_q5_0x4 g;
        eng__q5_0x4_from_q5_0(b, &g, 128);
        float y[128];
        eng__dequant_row(ENG_T_Q5_0X4, &g, y, 128);
        for (int k = 0; k < 4; k++)
            for (int e = 0; e < 32; e++) assert_true(y[32 * k + e] == (float)(((e + 3 * k) % 32 - 16) * (k + 1)));
        /* layout as documented in quant.h: element 17 of block 1 (q = 20: nibble 4, 5th bit 1) */
        assert_int_equal(g.qs[17] >> 4, 4);
        assert_int_equal((g.qh[1] >> (4 + 1)) & 1, 1);
        assert_int_equal(g.d[2], eng__fp32_to_fp16(3.f));
    }
    assert_false(eng__type_supported(ENG_T_Q5_0X4) && !eng__type_internal(ENG_T_Q5_0X4));
    assert_false(eng__type_internal(ENG_T_Q5_0));
    assert_int_equal(eng__row_bytes(ENG_T_Q5_0X4, 896), eng__row_bytes(ENG_T_Q5_0, 896));
    const eng_isa isa = eng__isa_available(ENG_ISA_AVX2) ? ENG_ISA_AVX2 : ENG_ISA_SCALAR;
    const int64_t n_ins[] = {128, 896, 4864};
    enum { ROWS = 70, R0 = 3 };
    void *ws = xmalloc(ENG_MATMUL_WS_BYTES);
    for (size_t a = 0; a < LCX_ARRAY_LEN(n_ins); a++) {
        const int64_t n = n_ins[a];
        const size_t wrb = eng__row_bytes(ENG_T_Q5_0, n), xrb = eng__row_bytes(ENG_T_Q8_0, n);
        uint8_t *W = xmalloc(wrb * ROWS), *W4 = xmalloc(wrb * ROWS), *X = xmalloc(xrb * 13);
        float *f = xmalloc(n * 4), *d0 = xmalloc(n * 4), *d1 = xmalloc(n * 4);
        float *y0 = xmalloc(ROWS * 13 * 4), *y1 = xmalloc(ROWS * 13 * 4);
        for (int64_t r = 0; r < ROWS; r++) {
            fill_normal(f, n, 0.1f);
            eng__quantize_row(ENG_T_Q5_0, f, W + r * wrb, n);
            eng__q5_0x4_from_q5_0(W + r * wrb, W4 + r * wrb, n);
            eng__dequant_row(ENG_T_Q5_0, W + r * wrb, d0, n);
            eng__dequant_row(ENG_T_Q5_0X4, W4 + r * wrb, d1, n);
            assert_memory_equal(d0, d1, n * 4);
        }
        /* in place == copy; and eng__quantize_row(Q5_0X4) is quantize + re-layout */
        uint8_t *Wi = xmalloc(wrb);
        memcpy(Wi, W + 2 * wrb, wrb);
        eng__q5_0x4_from_q5_0(Wi, Wi, n);
        assert_memory_equal(Wi, W4 + 2 * wrb, wrb);
        free(Wi);
        quant_random_rows(ENG_T_Q8_0, X, xrb, n, 13, 1.f, f);
        const int64_t nts[] = {1, 7, 13};
        for (int s = 0; s < 2; s++) {
            const eng_isa is = s ? isa : ENG_ISA_SCALAR;
            for (size_t k = 0; k < LCX_ARRAY_LEN(nts) - (s == 0); k++)
                for (int w = 0; w < 1 + s; w++) { /* the scalar kernels have no workspace path */
                    const int64_t nt = nts[k];
                    memset(y0, 0, ROWS * 13 * 4);
                    memset(y1, 0, ROWS * 13 * 4);
                    eng__matmul_isa_ws(is, ENG_T_Q5_0, W, wrb, n, R0, ROWS, X, xrb, nt, y0, ROWS, w ? ws : NULL,
                                      w ? ENG_MATMUL_WS_BYTES : 0);
                    eng__matmul_isa_ws(is, ENG_T_Q5_0X4, W4, wrb, n, R0, ROWS, X, xrb, nt, y1, ROWS, w ? ws : NULL,
                                      w ? ENG_MATMUL_WS_BYTES : 0);
                    for (int64_t i = 0; i < ROWS * nt; i++)
                        if (memcmp(&y0[i], &y1[i], 4))
                            fail_msg("%s n=%ld n_tok=%ld ws=%d out %ld: q5_0 %.9g, q5_0x4 %.9g", eng__isa_name(is), (long)n,
                                     (long)nt, w, (long)i, y0[i], y1[i]);
                }
        }
        free(W);
        free(W4);
        free(X);
        free(f);
        free(d0);
        free(d1);
        free(y0);
        free(y1);
    }
    free(ws);
}

/* Integer paths are exact: with weights and activations whose block scales are powers of
 * two, every kernel must give the exact same float as the scalar reference. */
static void test_exact_integer_sums(void **state)
{
    (void)state;
    const eng_type ts[] = {ENG_T_Q4_0, ENG_T_Q5_0, ENG_T_Q8_0, ENG_T_Q4_K, ENG_T_Q5_K, ENG_T_Q6_K};
    enum { N = 512, ROWS = 6, NT = 5 };
    for (size_t k = 0; k < LCX_ARRAY_LEN(ts); k++) {
        eng_type t = ts[k], vt = eng__vec_dot_type(t);
        const size_t wrb = eng__row_bytes(t, N), xrb = eng__row_bytes(vt, N);
        uint8_t *W = xmalloc(wrb * ROWS), *X = xmalloc(xrb * NT);
        for (size_t i = 0; i < wrb * ROWS; i++) W[i] = (uint8_t)rnd();
        for (size_t i = 0; i < xrb * NT; i++) X[i] = (uint8_t)rnd();
        /* fix the scales: fp16 1.0 / 0.5, f32 0.25, keep quants random; Q8 quants in -127..127 */
        for (int r = 0; r < ROWS; r++)
            for (int64_t b = 0; b < N / eng__type_block_elems(t); b++) {
                uint8_t *blk = W + r * wrb + b * eng__type_block_bytes(t);
                uint16_t one = 0x3C00, half = 0x3800;
                if (t == ENG_T_Q6_K) memcpy(blk + 208, &one, 2);
                else memcpy(blk, &one, 2);
                if (t == ENG_T_Q4_K || t == ENG_T_Q5_K) memcpy(blk + 2, &half, 2);
            }
        for (int i = 0; i < NT; i++)
            for (int64_t b = 0; b < N / eng__type_block_elems(vt); b++) {
                uint8_t *blk = X + i * xrb + b * eng__type_block_bytes(vt);
                if (vt == ENG_T_Q8_0) {
                    uint16_t h = 0x3400;
                    memcpy(blk, &h, 2);
                    for (int j = 0; j < 32; j++)
                        if ((int8_t)blk[2 + j] == -128) blk[2 + j] = 0x81;
                } else {
                    eng_block_q8_K *q = (eng_block_q8_K *)blk;
                    q->d = 0.25f;
                    for (int j = 0; j < 256; j++)
                        if (q->qs[j] == -128) q->qs[j] = -127;
                    for (int j = 0; j < 16; j++) {
                        int s = 0;
                        for (int l = 0; l < 16; l++) s += q->qs[16 * j + l];
                        q->bsums[j] = (int16_t)s;
                    }
                }
            }
        /* nt 1: the generation (matvec) kernels; NT: the prompt tiles */
        for (int nt = 1; nt <= NT; nt += NT - 1) {
            float ys[ROWS * NT], yv[ROWS * NT];
            eng__matmul_isa(ENG_ISA_SCALAR, t, W, wrb, N, 0, ROWS, X, xrb, nt, ys, ROWS);
            eng__matmul_isa(eng__isa_best(), t, W, wrb, N, 0, ROWS, X, xrb, nt, yv, ROWS);
            for (int i = 0; i < ROWS * nt; i++)
                if (ys[i] != yv[i])
                    fail_msg("%s nt=%d: %s %.9g != scalar %.9g", eng__type_name(t), nt, eng__isa_name(eng__isa_best()), yv[i],
                             ys[i]);
        }
        free(W);
        free(X);
    }
}

int main(void)
{
    printf("engine-quant: best kernels %s\n", eng__isa_name(eng__isa_best()));
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_type_table),
        cmocka_unit_test(test_conversions),
        cmocka_unit_test(test_dequant_q4_0_q5_0_q8_0),
        cmocka_unit_test(test_dequant_k),
        cmocka_unit_test(test_quantize_q8_0_exact),
        cmocka_unit_test(test_quantize_q8_K_exact),
        cmocka_unit_test(test_roundtrip_bounds),
        cmocka_unit_test(test_fixture_q4_0),
        cmocka_unit_test(test_fixture_q8_0),
        cmocka_unit_test(test_fixture_q5_0_f16),
        cmocka_unit_test(test_fixture_k),
        cmocka_unit_test(test_numpy_dequant_own_rows),
        cmocka_unit_test(test_ref_dot_vs_float),
        cmocka_unit_test(test_avx2_vs_scalar),
        cmocka_unit_test(test_avx512_vs_scalar),
        cmocka_unit_test(test_exact_integer_sums),
        cmocka_unit_test(test_generation_matches_prompt),
        cmocka_unit_test(test_prompt_chunks),
        cmocka_unit_test(test_generation_streams),
        cmocka_unit_test(test_q5_0x4),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
