/* libtriatt unit and property tests: SIMD kernels vs the scalar reference, threads, partial
 * RoPE, hybrid layer masks, fast path vs full path, selection properties over many random
 * configurations, calibration passes / EMA / stats file, env config, the driver. */
#include "testutil.h"
#include "longctx/triatt.h"
#include "triatt/internal.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <immintrin.h>

static uint64_t rng = 12345;
static double urand(void) { return triatt__rng_unit(&rng); }
static double nrand(void)
{
    double u = urand() + 1e-12, v = urand();
    return sqrt(-2 * log(u)) * cos(2 * M_PI * v);
}

/* Q8_0-quantizes n rows (n_rot of each src row, src_stride floats apart) into dst rows
 * dst_stride bytes apart (ggml block_q8_0: half d = amax/127, q = round(x/d)) and writes the
 * dequantized values (what the kernels must see) to deq (same layout as src). */
static void make_q8(const float *src, int n, int src_stride, int n_rot, unsigned char *dst, size_t dst_stride,
                    float *deq)
{
    for (int r = 0; r < n; r++)
        for (int b = 0; b < n_rot / 32; b++) {
            const float *x = src + (size_t)r * src_stride + b * 32;
            unsigned char *blk = dst + (size_t)r * dst_stride + (size_t)b * 34;
            float amax = 0;
            for (int i = 0; i < 32; i++) amax = fmaxf(amax, fabsf(x[i]));
            uint16_t dh = (uint16_t)_cvtss_sh(amax / 127.f, 0);
            float d = _cvtsh_ss(dh), id = d ? 1.f / d : 0.f;
            blk[0] = (unsigned char)(dh & 0xff);
            blk[1] = (unsigned char)(dh >> 8);
            for (int i = 0; i < 32; i++) {
                int q = (int)lrintf(x[i] * id);
                q = q > 127 ? 127 : q < -127 ? -127 : q;
                blk[2 + i] = (unsigned char)(int8_t)q;
                deq[(size_t)r * src_stride + b * 32 + i] = d * (float)q;
            }
        }
}

/* ---- kernels ---- */
static void kernel_case(int n_rot, triatt_pairing pr, triatt_terms terms)
{
    int fc = n_rot / 2, n = 37, stride = n_rot + 8;
    float *w = malloc(n_rot * 4), *m = malloc(fc * 4), *mil = malloc(n_rot * 4);
    float *keys = malloc((size_t)n * stride * 4), o0[64], o1[64], o2[64];
    for (int d = 0; d < n_rot; d++) w[d] = (float)nrand();
    for (int f = 0; f < fc; f++) { m[f] = (float)nrand(); mil[2 * f] = mil[2 * f + 1] = m[f] * 0.5f; }
    for (int i = 0; i < n * stride; i++) keys[i] = (float)(nrand() * 3);
    triatt_kparams kp = {.w = w, .m = m, .m_il = mil, .n_rot = n_rot, .fc = fc, .pairing = pr,
                         .use_trig = terms != TRIATT_TERMS_EXTRA_ONLY,
                         .use_extra = terms != TRIATT_TERMS_TRIG_ONLY, .eps = 1e-8f};
    triatt__kernel_scalar(&kp, keys, stride, n, o0, false);
    triatt__kernel_avx2(&kp, keys, stride, n, o1, false);
    for (int c = 0; c < n; c++) {
        double tol = 1e-4 * (1 + fabs(o0[c]));
        if (fabs(o0[c] - o1[c]) > tol) fail_msg("avx2 n_rot=%d pair=%d terms=%d cell %d: %g vs %g", n_rot, pr, terms, c, o1[c], o0[c]);
    }
    /* F16 keys: AVX2 (in-register conversion) vs scalar (portable conversion) vs f32 on the
     * rounded values */
    uint16_t *k16 = malloc((size_t)n * stride * 2);
    float *kr = malloc((size_t)n * stride * 4), o3[64], o4[64];
    for (int i = 0; i < n * stride; i++) {
        k16[i] = (uint16_t)_cvtss_sh(keys[i], 0);
        kr[i] = triatt__h2f(k16[i]);
        assert_true(kr[i] == _cvtsh_ss(k16[i]));
    }
    triatt_kparams kh = kp;
    kh.f16 = true;
    triatt__kernel_scalar(&kh, k16, stride, n, o3, false);
    triatt__kernel_avx2(&kh, k16, stride, n, o4, false);
    triatt__kernel_scalar(&kp, kr, stride, n, o2, false);
    for (int c = 0; c < n; c++) {
        assert_true(fabs(o3[c] - o2[c]) <= 1e-5 * (1 + fabs(o2[c])));
        assert_true(fabs(o4[c] - o2[c]) <= 1e-4 * (1 + fabs(o2[c])));
    }
    if (lcx__cpu_has_avx512()) {
        triatt__kernel_avx512(&kh, k16, stride, n, o4, false);
        for (int c = 0; c < n; c++) assert_true(fabs(o4[c] - o2[c]) <= 1e-4 * (1 + fabs(o2[c])));
    }
    /* multi-stream kernels: ns streams of 9 rows (f32 and f16), each stream checked against the
     * scalar reference; the AVX2 multi-stream kernel gives bit-identical rows to the AVX2
     * single-stream kernel (the scorer relies on that: scores do not depend on the split) */
    for (int h = 0; h < 2; h++)
        for (int ns = 1; ns <= TRIATT_MAX_STREAMS; ns++)
            for (int acc = 0; acc < 2; acc++) {
                const triatt_kparams *pp = h ? &kh : &kp;
                const void *ks[TRIATT_MAX_STREAMS];
                size_t sts[TRIATT_MAX_STREAMS];
                float m0[TRIATT_MAX_STREAMS][9], m1[TRIATT_MAX_STREAMS][9], m2[TRIATT_MAX_STREAMS][9];
                float *p0[TRIATT_MAX_STREAMS], *p1[TRIATT_MAX_STREAMS], *p2[TRIATT_MAX_STREAMS];
                for (int j = 0; j < ns; j++) {
                    /* streams in reverse order so they are not one contiguous run */
                    size_t off = (size_t)(ns - 1 - j) * 9 * stride;
                    ks[j] = h ? (const void *)(k16 + off) : (const void *)(keys + off);
                    sts[j] = stride;
                    for (int c = 0; c < 9; c++) m0[j][c] = m1[j][c] = m2[j][c] = (float)(j + c);
                    p0[j] = m0[j]; p1[j] = m1[j]; p2[j] = m2[j];
                }
                const triatt_kparams *pa[TRIATT_MAX_STREAMS] = {pp, pp, pp, pp};
                triatt__kernel_ms_scalar(pa, ns, ks, sts, 9, p0, acc);
                triatt__kernel_ms_avx2(pa, ns, ks, sts, 9, p1, acc);
                for (int j = 0; j < ns; j++) {
                    if (acc) for (int c = 0; c < 9; c++) m2[j][c] = (float)(j + c);
                    triatt__kernel_avx2(pp, ks[j], stride, 9, m2[j], acc);
                    for (int c = 0; c < 9; c++) {
                        if (fabs(m0[j][c] - m1[j][c]) > 1e-4 * (1 + fabs(m0[j][c])))
                            fail_msg("ms avx2 n_rot=%d pair=%d terms=%d f16=%d ns=%d acc=%d stream %d row %d: %g vs %g",
                                     n_rot, pr, terms, h, ns, acc, j, c, m1[j][c], m0[j][c]);
                        assert_true(m1[j][c] == m2[j][c]);
                    }
                }
                if (lcx__cpu_has_avx512()) {
                    for (int j = 0; j < ns; j++)
                        for (int c = 0; c < 9; c++) m2[j][c] = (float)(j + c);
                    triatt__kernel_ms_avx512(pa, ns, ks, sts, 9, p2, acc);
                    for (int j = 0; j < ns; j++)
                        for (int c = 0; c < 9; c++) assert_true(fabs(m0[j][c] - m2[j][c]) <= 1e-4 * (1 + fabs(m0[j][c])));
                }
            }
    /* the scorer's KV-head streams: every stream has its own coefficients and all add into one
     * accumulator (aliasing outputs). The AVX2 multi-stream kernel must equal the AVX2
     * single-stream kernel run stream after stream bit for bit (row c of stream j added after
     * row c of the streams before it), and the scalar multi-stream reference within tolerance */
    {
        float *wj = malloc((size_t)TRIATT_MAX_STREAMS * n_rot * 4), *mj = malloc((size_t)TRIATT_MAX_STREAMS * fc * 4);
        float *milj = malloc((size_t)TRIATT_MAX_STREAMS * n_rot * 4);
        triatt_kparams kj[2][TRIATT_MAX_STREAMS];
        for (int j = 0; j < TRIATT_MAX_STREAMS; j++) {
            for (int d = 0; d < n_rot; d++) wj[j * n_rot + d] = (float)nrand();
            for (int f = 0; f < fc; f++) {
                mj[j * fc + f] = (float)nrand();
                milj[j * n_rot + 2 * f] = milj[j * n_rot + 2 * f + 1] = mj[j * fc + f] * 0.5f;
            }
            kj[0][j] = kp;
            kj[0][j].w = wj + j * n_rot; kj[0][j].m = mj + j * fc; kj[0][j].m_il = milj + j * n_rot;
            kj[1][j] = kj[0][j];
            kj[1][j].f16 = true;
        }
        for (int h = 0; h < 2; h++)
            for (int ns = 2; ns <= TRIATT_MAX_STREAMS; ns++) {
                const triatt_kparams *pa[TRIATT_MAX_STREAMS] = {&kj[h][0], &kj[h][1], &kj[h][2], &kj[h][3]};
                const void *ks[TRIATT_MAX_STREAMS];
                size_t sts[TRIATT_MAX_STREAMS];
                float a0[9], a1[9], a2[9], *outs[TRIATT_MAX_STREAMS];
                for (int j = 0; j < ns; j++) {
                    size_t off = (size_t)j * 9 * stride;
                    ks[j] = h ? (const void *)(k16 + off) : (const void *)(keys + off);
                    sts[j] = stride;
                    outs[j] = a0;
                }
                for (int c = 0; c < 9; c++) a0[c] = a1[c] = a2[c] = (float)c - 4;
                triatt__kernel_ms_avx2(pa, ns, ks, sts, 9, outs, true);
                for (int j = 0; j < ns; j++) triatt__kernel_avx2(pa[j], ks[j], stride, 9, a1, true);
                for (int j = 0; j < ns; j++) outs[j] = a2;
                triatt__kernel_ms_scalar(pa, ns, ks, sts, 9, outs, true);
                for (int c = 0; c < 9; c++) {
                    if (memcmp(&a0[c], &a1[c], 4))
                        fail_msg("head streams n_rot=%d pair=%d terms=%d f16=%d ns=%d row %d: ms %.9g seq %.9g",
                                 n_rot, pr, terms, h, ns, c, a0[c], a1[c]);
                    if (fabs(a0[c] - a2[c]) > 1e-4 * (1 + fabs(a2[c])))
                        fail_msg("head streams vs scalar n_rot=%d f16=%d ns=%d row %d: %g vs %g", n_rot, h, ns, c, a0[c], a2[c]);
                }
                if (lcx__cpu_has_avx512()) {
                    for (int c = 0; c < 9; c++) a1[c] = (float)c - 4;
                    for (int j = 0; j < ns; j++) outs[j] = a1;
                    triatt__kernel_ms_avx512(pa, ns, ks, sts, 9, outs, true);
                    for (int c = 0; c < 9; c++) assert_true(fabs(a1[c] - a2[c]) <= 1e-4 * (1 + fabs(a2[c])));
                }
            }
        free(wj); free(mj); free(milj);
    }
    /* Q8_0 keys (whole 32-blocks only; the scorer refuses other shapes): the scalar Q8_0
     * reference equals the scalar kernel on the dequantized floats; AVX2 single and
     * multi-stream kernels match it, and agree with each other bit for bit */
    if (n_rot % 32 == 0) {
        size_t qst = (size_t)n_rot / 32 * 34 + 6;   /* padded, odd-aligned rows */
        unsigned char *kq = malloc((size_t)n * qst);
        float *kd = malloc((size_t)n * stride * 4), q0[64], q1[64], q2[64];
        memcpy(kd, keys, (size_t)n * stride * 4);
        make_q8(keys, n, stride, n_rot, kq, qst, kd);
        triatt_kparams kq8 = kp;
        kq8.q8 = true;
        kq8.f16 = true;   /* q8 wins */
        triatt__kernel_scalar(&kq8, kq, qst, n, q0, false);
        triatt__kernel_scalar(&kp, kd, stride, n, q1, false);
        for (int c = 0; c < n; c++) assert_true(fabs(q0[c] - q1[c]) <= 1e-6 * (1 + fabs(q1[c])));
        triatt__kernel_avx2(&kq8, kq, qst, n, q1, false);
        for (int c = 0; c < n; c++)
            if (fabs(q0[c] - q1[c]) > 1e-4 * (1 + fabs(q0[c])))
                fail_msg("q8 avx2 n_rot=%d pair=%d terms=%d cell %d: %g vs %g", n_rot, pr, terms, c, q1[c], q0[c]);
        if (lcx__cpu_has_avx512()) {
            triatt__kernel_avx512(&kq8, kq, qst, n, q2, false);
            for (int c = 0; c < n; c++) assert_true(fabs(q0[c] - q2[c]) <= 1e-4 * (1 + fabs(q0[c])));
        }
        for (int ns = 2; ns <= TRIATT_MAX_STREAMS; ns++) {
            const void *ks[TRIATT_MAX_STREAMS];
            size_t sts[TRIATT_MAX_STREAMS];
            float *po[TRIATT_MAX_STREAMS], *ps[TRIATT_MAX_STREAMS];
            float mo[TRIATT_MAX_STREAMS][9], ms[TRIATT_MAX_STREAMS][9];
            for (int j = 0; j < ns; j++) {
                ks[j] = kq + (size_t)(ns - 1 - j) * 9 * qst;
                sts[j] = qst;
                po[j] = mo[j];
                ps[j] = ms[j];
            }
            const triatt_kparams *qa[TRIATT_MAX_STREAMS] = {&kq8, &kq8, &kq8, &kq8};
            triatt__kernel_ms_avx2(qa, ns, ks, sts, 9, po, false);
            triatt__kernel_ms_scalar(qa, ns, ks, sts, 9, ps, false);
            for (int j = 0; j < ns; j++) {
                triatt__kernel_avx2(&kq8, ks[j], qst, 9, q2, false);
                for (int c = 0; c < 9; c++) {
                    assert_true(mo[j][c] == q2[c]);
                    assert_true(fabs(mo[j][c] - ms[j][c]) <= 1e-4 * (1 + fabs(ms[j][c])));
                }
            }
        }
        free(kq); free(kd);
    }
    free(k16); free(kr);
    /* accumulate mode adds */
    memcpy(o2, o1, sizeof o1);
    triatt__kernel_avx2(&kp, keys, stride, n, o2, true);
    for (int c = 0; c < n; c++) assert_true(fabs(o2[c] - 2 * o1[c]) <= 1e-4 * (1 + fabs(o1[c])));
    if (lcx__cpu_has_avx512()) {
        triatt__kernel_avx512(&kp, keys, stride, n, o2, false);
        for (int c = 0; c < n; c++) assert_true(fabs(o0[c] - o2[c]) <= 1e-4 * (1 + fabs(o0[c])));
    }
    /* fast kernels: feat rows (2fc+1) against v */
    float *feat = malloc((size_t)n * (2 * fc + 8) * 4), *v = malloc(2 * fc * 4);
    for (int i = 0; i < n * (2 * fc + 8); i++) feat[i] = (float)nrand();
    for (int i = 0; i < 2 * fc; i++) v[i] = (float)nrand();
    triatt__fast_kernel_scalar(feat, 2 * fc + 8, fc, v, n, o0);
    triatt__fast_kernel_avx2(feat, 2 * fc + 8, fc, v, n, o1);
    for (int c = 0; c < n; c++) assert_true(fabs(o0[c] - o1[c]) <= 1e-4 * (1 + fabs(o0[c])));
    if (lcx__cpu_has_avx512()) {
        triatt__fast_kernel_avx512(feat, 2 * fc + 8, fc, v, n, o2);
        for (int c = 0; c < n; c++) assert_true(fabs(o0[c] - o2[c]) <= 1e-4 * (1 + fabs(o0[c])));
    }
    free(feat); free(v); free(w); free(m); free(mil); free(keys);
}

/* eps = 0 with all-zero and tiny key pairs: the rsqrt+Newton groups of the AVX2 kernel must not
 * turn 0·rsqrt(0) into NaN, and the result matches the scalar reference. */
static void kernel_eps0_case(bool f16)
{
    enum { NR = 128, FC = 64, N = 6 };
    float w[NR], m[FC], mil[NR], keys[N * NR], o0[N], o1[N];
    uint16_t k16[N * NR];
    for (int d = 0; d < NR; d++) w[d] = (float)nrand();
    for (int f = 0; f < FC; f++) { m[f] = (float)fabs(nrand()); mil[2 * f] = mil[2 * f + 1] = m[f] * 0.5f; }
    for (int i = 0; i < N * NR; i++) {
        int r = i / NR;
        keys[i] = r < 2 ? 0.f : r < 4 ? (float)(nrand() * 1e-6) : (float)nrand();
        if (r == 5 && (i % 16) < 8) keys[i] = 0.f;   /* zero pairs inside an ordinary row */
        k16[i] = (uint16_t)_cvtss_sh(keys[i], 0);
        if (f16) keys[i] = _cvtsh_ss(k16[i]);
    }
    triatt_kparams kp = {.w = w, .m = m, .m_il = mil, .n_rot = NR, .fc = FC, .pairing = TRIATT_PAIR_HALF,
                         .use_trig = true, .use_extra = true, .f16 = f16, .eps = 0.f};
    const void *src = f16 ? (const void *)k16 : (const void *)keys;
    triatt__kernel_scalar(&kp, src, NR, N, o0, false);
    triatt__kernel_avx2(&kp, src, NR, N, o1, false);
    for (int c = 0; c < N; c++) {
        assert_true(isfinite(o1[c]));
        if (fabs(o0[c] - o1[c]) > 1e-4 * (1 + fabs(o0[c]))) fail_msg("eps0 f16=%d row %d: %g vs %g", f16, c, o1[c], o0[c]);
    }
    assert_true(o1[0] == 0.f && o1[1] == 0.f);   /* zero keys: exactly zero (not 1e-15-ish NaN) */
}

static void test_kernels_vs_scalar(void **st)
{
    kernel_eps0_case(false);
    kernel_eps0_case(true);
    int rots[] = {16, 32, 64, 96, 128, 24, 10};
    for (size_t i = 0; i < sizeof rots / sizeof rots[0]; i++)
        for (int pr = 0; pr < 2; pr++)
            for (int t = 0; t < 4; t++) kernel_case(rots[i], (triatt_pairing)pr, (triatt_terms)t);
    if (!lcx__cpu_has_avx512())
        fprintf(stderr, "note: CPU has no AVX-512: AVX-512 kernel comparison skipped (compiled and dispatched only)\n");
}

/* ---- scorer fixtures ---- */
typedef struct {
    triatt_geometry g;
    unsigned char mask[8];
    float *keys;           /* (L, KV, cap, hd) */
    float *q;              /* (L, T, H, hd) */
    int32_t *pos;
    int n, T;
} world;

static void make_world(world *w, int L, int H, int KV, int hd, int n_rot, triatt_pairing pr, int n, int T)
{
    memset(w, 0, sizeof *w);
    w->g = (triatt_geometry){.n_layers = L, .n_heads = H, .n_kv_heads = KV, .head_dim = hd, .n_rot = n_rot,
                             .pairing = pr, .rope_theta = 10000};
    w->n = n; w->T = T;
    w->keys = malloc((size_t)L * KV * n * hd * 4);
    w->q = malloc((size_t)L * T * H * hd * 4);
    w->pos = malloc(n * 4);
    for (size_t i = 0; i < (size_t)L * KV * n * hd; i++) w->keys[i] = (float)nrand();
    for (size_t i = 0; i < (size_t)L * T * H * hd; i++) w->q[i] = (float)(nrand() + 0.5);
    for (int c = 0; c < n; c++) w->pos[c] = c * 2;
}
static void free_world(world *w) { free(w->keys); free(w->q); free(w->pos); }

static triatt_calib *calib_world(world *w)
{
    triatt_calib *c = NULL;
    triatt_calib_init(&w->g, w->T, 0, &c);
    assert_non_null(c);
    for (int l = 0; l < w->g.n_layers; l++)
        if (!w->g.attn_layers || w->g.attn_layers[l])
            assert_int_equal(triatt_calib_add(c, l, w->q + (size_t)l * w->T * w->g.n_heads * w->g.head_dim, w->T, 0), 0);
    assert_int_equal(triatt_calib_end_pass(c), 1);
    return c;
}

/* accessor that refuses non-attention layers and converts through scratch */
static const float *strict_get(void *ud, int l, int kv, int c0, int n, float *scratch, size_t *stride)
{
    world *w = ud;
    if (w->g.attn_layers && !w->g.attn_layers[l]) return NULL;
    const float *src = w->keys + (((size_t)l * w->g.n_kv_heads + kv) * w->n + c0) * w->g.head_dim;
    memcpy(scratch, src, (size_t)n * w->g.head_dim * 4);
    *stride = w->g.head_dim;
    return scratch;
}

static void score_world(world *w, triatt_calib *cal, int nt, int kernel, float *out)
{
    triatt_scorer_opts o = {.n_threads = nt, .eps = 1e-8};
    triatt_scorer *s = NULL;
    triatt_scorer_init(&w->g, &o, &s);
    assert_non_null(s);
    if (kernel >= 0) triatt__scorer_force_kernel(s, kernel);
    triatt_keys k = {.get = strict_get, .ud = w};
    assert_int_equal(triatt_score(s, cal, &k, w->pos, w->n, w->pos[w->n - 1], w->pos[w->n - 1] - 7, out), 0);
    triatt_scorer_free(s);
}

/* The AVX2 single-stream kernel reads n rows as 4 lock-step parts (rows c, c+q, c+2q, c+3q,
 * q = n/4) plus a padded tail of 0-3 rows: for every n (including n < 4), key format and
 * accumulate mode, each row's score must be bit-identical to scoring that row alone (so a
 * score never depends on the chunk it was fetched in), and match the scalar reference. */
static void test_kernel_parts_and_tails(void **st)
{
    (void)st;
    enum { NR = 128, FC = 64, MAXN = 23, QROW = NR / 32 * 34 };
    float w[NR], m[FC], mil[NR], keys[MAXN * NR], deq[MAXN * NR];
    uint16_t k16[MAXN * NR];
    unsigned char kq[MAXN * QROW];
    for (int d = 0; d < NR; d++) w[d] = (float)nrand();
    for (int f = 0; f < FC; f++) { m[f] = (float)fabs(nrand()); mil[2 * f] = mil[2 * f + 1] = m[f] * 0.5f; }
    for (int i = 0; i < MAXN * NR; i++) {
        keys[i] = (float)(nrand() * 2);
        k16[i] = (uint16_t)_cvtss_sh(keys[i], 0);
    }
    make_q8(keys, MAXN, NR, NR, kq, QROW, deq);
    for (int fmt = 0; fmt < 3; fmt++) {
        triatt_kparams kp = {.w = w, .m = m, .m_il = mil, .n_rot = NR, .fc = FC, .pairing = TRIATT_PAIR_HALF,
                             .use_trig = true, .use_extra = true, .f16 = fmt == 1, .q8 = fmt == 2, .eps = 1e-8f};
        const void *base = fmt == 0 ? (const void *)keys : fmt == 1 ? (const void *)k16 : (const void *)kq;
        const size_t stride = fmt == 2 ? QROW : NR, ub = fmt == 0 ? 4 : fmt == 1 ? 2 : 1;
        float one[MAXN], ref[MAXN];
        for (int c = 0; c < MAXN; c++)
            triatt__kernel_avx2(&kp, (const char *)base + c * stride * ub, stride, 1, one + c, false);
        triatt__kernel_scalar(&kp, base, stride, MAXN, ref, false);
        for (int c = 0; c < MAXN; c++)
            if (fabs(one[c] - ref[c]) > 1e-4 * (1 + fabs(ref[c]))) fail_msg("fmt %d row %d: %g vs %g", fmt, c, one[c], ref[c]);
        for (int n = 1; n <= MAXN; n++)
            for (int acc = 0; acc < 2; acc++) {
                float o[MAXN];
                for (int c = 0; c < n; c++) o[c] = acc ? (float)c - 3.5f : -1.f;
                triatt__kernel_avx2(&kp, base, stride, n, o, acc);
                for (int c = 0; c < n; c++) {
                    float want = acc ? ((float)c - 3.5f) + one[c] : one[c];
                    if (o[c] != want) fail_msg("fmt %d n %d acc %d row %d: %.9g vs %.9g", fmt, n, acc, c, o[c], want);
                }
            }
    }
}

static void test_threads_mask_partial_rope(void **st)
{
    world w;
    make_world(&w, 4, 8, 2, 64, 32, TRIATT_PAIR_HALF, 700, 20);
    w.mask[0] = 1; w.mask[1] = 0; w.mask[2] = 1; w.mask[3] = 0;   /* hybrid: layers 1, 3 are not attention */
    w.g.attn_layers = w.mask;
    triatt_calib *cal = calib_world(&w);
    assert_int_equal(triatt_calib_add(cal, 1, w.q, 1, 0), LCX_EINVAL);   /* non-attention layer */
    float *a = malloc(w.n * 4), *b = malloc(w.n * 4), *c = malloc(w.n * 4);
    score_world(&w, cal, 1, 0, a);
    score_world(&w, cal, 3, -1, b);
    for (int i = 0; i < w.n; i++) {
        if (isnan(a[i])) { assert_true(isnan(b[i])); continue; }
        assert_true(fabs(a[i] - b[i]) <= 1e-4 * (1 + fabs(a[i])));
    }
    /* window cells are NaN */
    assert_true(isnan(a[w.n - 1]) && !isnan(a[w.n - 10]));
    /* dims beyond n_rot do not matter */
    for (int l = 0; l < 4; l++)
        for (int kv = 0; kv < 2; kv++)
            for (int i = 0; i < w.n; i++)
                for (int d = 32; d < 64; d++) w.keys[(((size_t)l * 2 + kv) * w.n + i) * 64 + d] = 99.f;
    score_world(&w, cal, 2, -1, c);
    for (int i = 0; i < w.n; i++)
        if (!isnan(a[i])) assert_true(fabs(a[i] - c[i]) <= 1e-4 * (1 + fabs(a[i])));
    /* changing a non-attention layer's keys changes nothing; an attention layer's does */
    w.keys[0] += 5.f;
    score_world(&w, cal, 1, 0, c);
    assert_true(fabs(c[0] - a[0]) > 1e-6);
    free(a); free(b); free(c);
    triatt_calib_free(cal);
    free_world(&w);
}

static void test_fast_path_equals_full(void **st)
{
    for (int pr = 0; pr < 2; pr++)
        for (int terms = 0; terms < 4; terms++) {
            world w;
            make_world(&w, 3, 4, 2, 64, 64, (triatt_pairing)pr, 300, 16);
            triatt_calib *cal = calib_world(&w);
            triatt_scorer_opts o = {.terms = (triatt_terms)terms, .skip_layers = 1, .n_threads = 2, .eps = 1e-8};
            triatt_scorer *s = NULL;
            triatt_scorer_init(&w.g, &o, &s);
            triatt_keys k = {.get = strict_get, .ud = &w};
            float full[300], fast[300];
            int32_t P = w.pos[w.n - 1];
            assert_int_equal(triatt_score(s, cal, &k, w.pos, w.n, P, P - 15, full), 0);
            assert_int_equal(triatt_fast_score(s, cal, w.pos, w.n, P, P - 15, fast), LCX_ELIMIT);
            assert_int_equal(triatt_fast_reserve(s, 400), 0);
            assert_int_equal(triatt_fast_score(s, cal, w.pos, w.n, P, P - 15, fast), LCX_ESTATE);
            /* cells entered in two batches, as an engine would */
            assert_int_equal(triatt_fast_set_cells(s, cal, &k, w.pos, 0, 170), 0);
            assert_int_equal(triatt_fast_set_cells(s, cal, &k, w.pos, 170, 130), 0);
            assert_int_equal(triatt_fast_score(s, cal, w.pos, w.n, P, P - 15, fast), 0);
            for (int i = 0; i < w.n; i++) {
                if (isnan(full[i])) { assert_true(isnan(fast[i])); continue; }
                if (fabs(full[i] - fast[i]) > 1e-4 * (1 + fabs(full[i])))
                    fail_msg("pair %d terms %d cell %d: fast %g full %g", pr, terms, i, fast[i], full[i]);
            }
            /* a later phase origin still agrees (trig sums change per round, features do not) */
            assert_int_equal(triatt_score(s, cal, &k, w.pos, w.n, P + 1000, P - 15, full), 0);
            assert_int_equal(triatt_fast_score(s, cal, w.pos, w.n, P + 1000, P - 15, fast), 0);
            for (int i = 0; i < w.n; i++)
                if (!isnan(full[i])) assert_true(fabs(full[i] - fast[i]) <= 1e-4 * (1 + fabs(full[i])));
            /* the engine compacts: cells move to other slots → those rows are stale, and a
             * refresh recomputes exactly them, after which fast == full again */
            for (int i = 0; i < 150; i++) {
                int32_t tp = w.pos[i]; w.pos[i] = w.pos[299 - i]; w.pos[299 - i] = tp;
                for (int l = 0; l < 3; l++)
                    for (int kv = 0; kv < 2; kv++) {
                        float *a = w.keys + (((size_t)l * 2 + kv) * w.n + i) * 64;
                        float *b = w.keys + (((size_t)l * 2 + kv) * w.n + 299 - i) * 64;
                        for (int d = 0; d < 64; d++) { float x = a[d]; a[d] = b[d]; b[d] = x; }
                    }
            }
            assert_int_equal(triatt_fast_score(s, cal, w.pos, w.n, P, P - 15, fast), LCX_ESTATE);
            assert_int_equal(triatt_fast_refresh(s, cal, &k, w.pos, w.n), 300);
            assert_int_equal(triatt_fast_refresh(s, cal, &k, w.pos, w.n), 0);
            assert_int_equal(triatt_score(s, cal, &k, w.pos, w.n, P, P - 15, full), 0);
            assert_int_equal(triatt_fast_score(s, cal, w.pos, w.n, P, P - 15, fast), 0);
            for (int i = 0; i < w.n; i++)
                if (!isnan(full[i])) assert_true(fabs(full[i] - fast[i]) <= 1e-4 * (1 + fabs(full[i])));
            /* recalibration invalidates the features */
            const double *mr, *mi, *ma;
            triatt_calib_head(cal, 0, 0, &mr, &mi, &ma);
            double r2[64], i2[64], a2[64];
            memcpy(r2, mr, 32 * 8); memcpy(i2, mi, 32 * 8); memcpy(a2, ma, 32 * 8);
            r2[0] += 1;
            assert_int_equal(triatt_calib_set_head(cal, 0, 0, r2, i2, a2), 0);
            assert_int_equal(triatt_fast_score(s, cal, w.pos, w.n, P, P - 15, fast), LCX_ESTATE);
            triatt_scorer_free(s);
            triatt_calib_free(cal);
            free_world(&w);
        }
}

/* ---- selection properties ---- */
static void test_selection_properties(void **st)
{
    int32_t pos[600], out[600];
    float sc[600];
    uint64_t r = 777;
    int n_rounds_fired = 0;
    for (int iter = 0; iter < 4000; iter++) {
        int n = 1 + (int)(triatt__rng_unit(&r) * 599);
        /* unique positions with gaps, shuffled slot order */
        int32_t p = (int32_t)(triatt__rng_unit(&r) * 5);
        for (int i = 0; i < n; i++) { pos[i] = p; p += 1 + (int)(triatt__rng_unit(&r) * 3); }
        for (int i = n - 1; i > 0; i--) {
            int j = (int)(triatt__rng_unit(&r) * (i + 1));
            int32_t t = pos[i]; pos[i] = pos[j]; pos[j] = t;
        }
        bool ties = triatt__rng_unit(&r) < 0.3;
        for (int i = 0; i < n; i++)
            sc[i] = ties ? (float)(int)(triatt__rng_unit(&r) * 3) : (float)(triatt__rng_unit(&r) * 2 - 1);
        triatt_select_params sp = {.budget = (int)(triatt__rng_unit(&r) * n), .window = (int)(triatt__rng_unit(&r) * 80),
                                   .divide_length = (int)(triatt__rng_unit(&r) * 20),
                                   .prefix_protect = (int)(triatt__rng_unit(&r) * 100),
                                   .n_segments = (int)(triatt__rng_unit(&r) * 12),
                                   .version = (triatt_version)(iter % 3),
                                   .direction = (triatt_direction)((iter / 3) % 2)};
        if (!triatt_should_evict(n, sp.budget, sp.window, sp.divide_length)) continue;
        n_rounds_fired++;
        int n_ev = n - sp.budget;
        int k = triatt_select(&sp, pos, sc, n, n_ev, out);
        assert_true(k >= 0 && k <= n_ev);
        int32_t max_pos = 0;
        for (int i = 0; i < n; i++) max_pos = LCX_MAX(max_pos, pos[i]);
        int32_t win_thr = max_pos - sp.window + 1, lo = sp.version == TRIATT_V3 ? sp.prefix_protect : 0;
        int eligible = 0;
        for (int i = 0; i < n; i++) eligible += pos[i] < win_thr && pos[i] >= lo;
        /* exactly n_used − budget go, unless fewer cells are eligible */
        assert_int_equal(k, LCX_MIN(n_ev, eligible));
        unsigned char gone[600] = {0};
        for (int i = 0; i < k; i++) {
            assert_true(out[i] >= 0 && out[i] < n);
            assert_false(gone[out[i]]);                       /* no duplicates */
            gone[out[i]] = 1;
            assert_true(pos[out[i]] < win_thr);              /* window protected */
            assert_true(pos[out[i]] >= lo);                  /* prefix protected (V3) */
        }
        float sgn = sp.direction == TRIATT_KEEP_HIGH ? -1.f : 1.f;
        if (sp.version == TRIATT_V1) {
            /* global: every evicted adjusted score >= every kept eligible one */
            float min_ev = INFINITY, max_keep = -INFINITY;
            for (int i = 0; i < n; i++) {
                if (pos[i] >= win_thr) continue;
                if (gone[i]) min_ev = fminf(min_ev, sgn * sc[i]);
                else max_keep = fmaxf(max_keep, sgn * sc[i]);
            }
            if (k && max_keep > -INFINITY) assert_true(min_ev >= max_keep);
        } else if (eligible) {
            /* per-segment quotas: each bucket gives at least floor(size·n_ev/eligible) (float32) */
            int kseg = LCX_MAX(1, sp.n_segments);
            int32_t pos_hi = LCX_MAX(win_thr, lo + 1);
            float sw = (float)(pos_hi - lo) / (float)kseg, frac = (float)n_ev / (float)eligible;
            int size[16] = {0}, ev[16] = {0}, quota_sum = 0;
            for (int i = 0; i < n; i++) {
                if (pos[i] < lo || pos[i] >= win_thr) continue;
                int s = (int)((float)(pos[i] - lo) / sw);
                s = s < 0 ? 0 : s > kseg - 1 ? kseg - 1 : s;
                size[s]++;
                ev[s] += gone[i];
            }
            for (int s = 0; s < kseg; s++) quota_sum += LCX_MIN(size[s], (int)((float)size[s] * frac));
            if (quota_sum <= n_ev)
                for (int s = 0; s < kseg; s++) assert_true(ev[s] >= LCX_MIN(size[s], (int)((float)size[s] * frac)));
        }
    }
    assert_true(n_rounds_fired > 1000);
}

/* ---- calibration ---- */
static void test_calibration_passes(void **st)
{
    world w;
    make_world(&w, 3, 4, 2, 16, 16, TRIATT_PAIR_HALF, 10, 10);
    triatt_calib *c = NULL;
    triatt_calib_init(&w.g, 25, 0, &c);
    size_t lstride = (size_t)w.T * 4 * 16;
    /* pass 1: complete, 10 tokens */
    for (int l = 0; l < 3; l++) assert_int_equal(triatt_calib_add(c, l, w.q + l * lstride, 10, 0), 0);
    assert_int_equal(triatt_calib_end_pass(c), 0);
    assert_int_equal(triatt_calib_tokens(c), 10);
    /* pass 2: cut short (layer 2 never ran): ignored */
    for (int l = 0; l < 2; l++) assert_int_equal(triatt_calib_add(c, l, w.q + l * lstride, 10, 0), 0);
    assert_int_equal(triatt_calib_end_pass(c), 0);
    assert_int_equal(triatt__calib_last_ignored(c), 1);
    assert_int_equal(triatt_calib_tokens(c), 10);
    /* pass 3: a layer added twice: ignored */
    for (int l = 0; l < 3; l++) assert_int_equal(triatt_calib_add(c, l, w.q + l * lstride, 10, 0), 0);
    assert_int_equal(triatt_calib_add(c, 1, w.q + lstride, 10, 0), LCX_ESTATE);
    assert_int_equal(triatt_calib_end_pass(c), 0);
    assert_int_equal(triatt_calib_tokens(c), 10);
    /* pass 4: layers disagree on the token count: ignored */
    for (int l = 0; l < 3; l++) assert_int_equal(triatt_calib_add(c, l, w.q + l * lstride, l ? 10 : 5, 0), 0);
    assert_int_equal(triatt_calib_end_pass(c), 0);
    assert_int_equal(triatt_calib_tokens(c), 10);
    /* pass 5: complete; warmup (25) is reached only at the end of pass 6 — never mid-pass */
    for (int l = 0; l < 3; l++) assert_int_equal(triatt_calib_add(c, l, w.q + l * lstride, 10, 0), 0);
    assert_int_equal(triatt_calib_end_pass(c), 0);
    assert_false(triatt_calib_ready(c));
    for (int l = 0; l < 3; l++) {
        assert_int_equal(triatt_calib_add(c, l, w.q + l * lstride, 10, 0), 0);
        assert_false(triatt_calib_ready(c));
    }
    assert_int_equal(triatt_calib_end_pass(c), 1);
    assert_true(triatt_calib_ready(c));
    assert_int_equal(triatt_calib_tokens(c), 30);
    /* stats = mean over the 3 counted passes of the same 10 tokens = mean of those tokens */
    for (int l = 0; l < 3; l++)
        for (int h = 0; h < 4; h++) {
            const double *mr, *mi, *ma;
            assert_int_equal(triatt_calib_head(c, l, h, &mr, &mi, &ma), 0);
            for (int f = 0; f < 8; f++) {
                double sr = 0, si = 0, sa = 0;
                for (int t = 0; t < 10; t++) {
                    const float *x = w.q + l * lstride + ((size_t)t * 4 + h) * 16;
                    sr += x[f]; si += x[f + 8]; sa += sqrt((double)x[f] * x[f] + (double)x[f + 8] * x[f + 8] + 1e-8);
                }
                assert_true(fabs(mr[f] - sr / 10) < 1e-9 && fabs(mi[f] - si / 10) < 1e-9 && fabs(ma[f] - sa / 10) < 1e-9);
            }
        }
    /* frozen (no EMA): later passes change nothing */
    uint64_t gen = triatt_calib_generation(c);
    for (int l = 0; l < 3; l++) triatt_calib_add(c, l, w.q + l * lstride, 1, 0);
    assert_int_equal(triatt_calib_end_pass(c), 0);
    assert_int_equal(triatt_calib_generation(c), gen);
    triatt_calib_free(c);

    /* EMA: a pass of constant queries x moves each mean by α toward x */
    triatt_calib_init(&w.g, 1, 0.1, &c);
    for (int l = 0; l < 3; l++) triatt_calib_add(c, l, w.q + l * lstride, 10, 0);
    assert_int_equal(triatt_calib_end_pass(c), 1);
    const double *mr;
    triatt_calib_head(c, 0, 0, &mr, NULL, NULL);
    double before = mr[0];
    float *cq = malloc(4 * 16 * 4);
    for (int i = 0; i < 64; i++) cq[i] = 3.0f;
    for (int l = 0; l < 3; l++) triatt_calib_add(c, l, cq, 1, 0);
    assert_int_equal(triatt_calib_end_pass(c), 1);
    triatt_calib_head(c, 0, 0, &mr, NULL, NULL);
    assert_true(fabs(mr[0] - (0.9 * before + 0.1 * 3.0)) < 1e-12);
    free(cq);
    triatt_calib_free(c);
    assert_true(triatt_calib_init(&w.g, 0, 0, &(triatt_calib *){NULL}) < 0);
    assert_true(triatt_calib_init(&w.g, 5, 1.5, &(triatt_calib *){NULL}) < 0);
    free_world(&w);
}

static void test_calibration_file(void **st)
{
    world w;
    make_world(&w, 2, 4, 2, 16, 16, TRIATT_PAIR_ADJACENT, 10, 8);
    triatt_calib *c = calib_world(&w);
    char *dir = tu_tmpdir(), path[512], bad[512];
    snprintf(path, sizeof path, "%s/cal.bin", dir);
    snprintf(bad, sizeof bad, "%s/bad.bin", dir);
    assert_int_equal(triatt_calib_save(c, path), 0);
    triatt_calib *d = NULL;
    triatt_calib_init(&w.g, 100, 0, &d);
    assert_int_equal(triatt_calib_save(d, path), LCX_ESTATE);   /* not ready */
    assert_int_equal(triatt_calib_load(d, path), 0);
    assert_true(triatt_calib_ready(d));
    assert_int_equal(triatt_calib_tokens(d), 8);
    for (int l = 0; l < 2; l++) {
        const float *a, *b;
        triatt_calib_block(c, l, 1, &a, NULL, NULL);
        triatt_calib_block(d, l, 1, &b, NULL, NULL);
        assert_memory_equal(a, b, 8 * sizeof(float));
    }
    char *data;
    size_t n;
    assert_int_equal(lcx__read_file(path, 0, &data, &n), 0);
    triatt_calib *e = NULL;
    triatt_calib_init(&w.g, 100, 0, &e);
    /* every single-byte flip is detected (magic, version, geometry, payload, checksum) */
    for (size_t i = 0; i < n; i += 7) {
        data[i] ^= 0x10;
        assert_int_equal(tu_write(bad, data, n), 0);
        int rc = triatt_calib_load(e, bad);
        assert_true(rc == LCX_ECORRUPT || rc == LCX_EMISMATCH);
        data[i] ^= 0x10;
    }
    assert_false(triatt_calib_ready(e));                          /* nothing half-loaded */
    assert_int_equal(tu_write(bad, data, n - 3), 0);
    assert_int_equal(triatt_calib_load(e, bad), LCX_ECORRUPT);  /* truncated */
    assert_int_equal(tu_write(bad, data, 0), 0);
    assert_int_equal(triatt_calib_load(e, bad), LCX_ECORRUPT);
    char *big = calloc(1, n + 100);
    memcpy(big, data, n);
    assert_int_equal(tu_write(bad, big, n + 100), 0);
    assert_int_equal(triatt_calib_load(e, bad), LCX_ECORRUPT);  /* over the size cap */
    free(big);
    assert_true(triatt_calib_load(e, "/nonexistent/x") < 0);
    /* another geometry */
    triatt_geometry g2 = w.g;
    g2.n_kv_heads = 4;
    triatt_calib *f = NULL;
    triatt_calib_init(&g2, 10, 0, &f);
    assert_int_equal(triatt_calib_load(f, path), LCX_EMISMATCH);
    g2 = w.g;
    g2.rope_theta = 500000;
    triatt_calib *h = NULL;
    triatt_calib_init(&g2, 10, 0, &h);
    assert_int_equal(triatt_calib_load(h, path), LCX_EMISMATCH);
    /* the driver loads an offline stats file at init (ready at once), and refuses a bad one */
    triatt_config cfg;
    triatt_config_default(&cfg);
    cfg.enabled = true; cfg.budget = 4;
    snprintf(cfg.calib_file, sizeof cfg.calib_file, "%s", path);
    triatt_ctx *t;
    assert_int_equal(triatt_init(&w.g, &cfg, &t), 0);
    assert_true(triatt_calib_ready(triatt_ctx_calib(t)));
    triatt_free(t);
    snprintf(cfg.calib_file, sizeof cfg.calib_file, "%s", bad);
    t = (triatt_ctx *)1;
    assert_int_equal(triatt_init(&w.g, &cfg, &t), LCX_ECORRUPT);
    assert_null(t);
    triatt_calib_free(c); triatt_calib_free(d); triatt_calib_free(e); triatt_calib_free(f); triatt_calib_free(h);
    free(data);
    tu_rmrf(dir);
    free(dir);
    free_world(&w);
}

/* ---- geometry ---- */
static void test_geometry_scaling(void **st)
{
    triatt_geometry g = {.n_layers = 1, .n_heads = 4, .n_kv_heads = 2, .head_dim = 128, .n_rot = 0,
                         .pairing = TRIATT_PAIR_HALF, .rope_theta = 1e6};
    double base[64], lin[64], yarn[64];
    assert_int_equal(triatt_geometry_omega(&g, base), 0);
    assert_true(fabs(base[1] - pow(1e6, -2.0 / 128)) < 1e-15);
    g.scaling = TRIATT_SCALE_LINEAR; g.scale_factor = 4;
    assert_int_equal(triatt_geometry_omega(&g, lin), 0);
    for (int f = 0; f < 64; f++) assert_true(fabs(lin[f] - base[f] / 4) < 1e-15);
    g.scaling = TRIATT_SCALE_YARN; g.yarn_orig_ctx = 32768;
    assert_int_equal(triatt_geometry_omega(&g, yarn), 0);
    /* HF/llama.cpp YaRN for Qwen2.5 (θ=1e6, n_rot 128, 32K, β 32/1): corr dims low=floor(…)=?,
     * checked against the closed form here; high frequencies untouched, low ones divided */
    double lo = floor(128 * log(32768 / (32 * 2 * M_PI)) / (2 * log(1e6)));
    double hi = ceil(128 * log(32768 / (1 * 2 * M_PI)) / (2 * log(1e6)));
    for (int f = 0; f < 64; f++) {
        double ramp = fmin(1, fmax(0, (f - lo) / (hi - lo)));
        double want = base[f] / 4 * ramp + base[f] * (1 - ramp);
        assert_true(fabs(yarn[f] - want) < 1e-15);
    }
    assert_true(yarn[0] == base[0] && fabs(yarn[63] - base[63] / 4) < 1e-18);
    /* llama3's per-frequency divisors (rope_freqs), on top of the linear factor */
    float div[64];
    for (int f = 0; f < 64; f++) div[f] = f < 20 ? 1.0f : f < 40 ? 1.0f + (f - 20) * 0.35f : 8.0f;
    double withdiv[64];
    g.scaling = TRIATT_SCALE_LINEAR;
    g.freq_divisors = div;
    assert_int_equal(triatt_geometry_omega(&g, withdiv), 0);
    for (int f = 0; f < 64; f++) assert_true(fabs(withdiv[f] - pow(1e6, -2.0 * f / 128) / 4 / div[f]) < 1e-15);
    div[7] = 0;
    assert_int_equal(triatt_geometry_check(&g), LCX_EINVAL);
    g.freq_divisors = NULL;
    g.scaling = TRIATT_SCALE_YARN;
    g.scale_factor = 0;
    assert_int_equal(triatt_geometry_check(&g), LCX_EINVAL);
    triatt_geometry bad = {.n_layers = 2, .n_heads = 6, .n_kv_heads = 4, .head_dim = 64, .rope_theta = 1e4};
    assert_int_equal(triatt_geometry_check(&bad), LCX_EINVAL);       /* 6 % 4 */
    bad.n_kv_heads = 2; bad.n_rot = 65;
    assert_int_equal(triatt_geometry_check(&bad), LCX_EINVAL);       /* odd n_rot */
    bad.n_rot = 128;
    assert_int_equal(triatt_geometry_check(&bad), LCX_EINVAL);       /* > head_dim */
    bad.n_rot = 32;
    unsigned char none[2] = {0, 0};
    bad.attn_layers = none;
    assert_int_equal(triatt_geometry_check(&bad), LCX_EINVAL);       /* no attention layer */
}

/* ---- config ---- */
typedef struct { const char *kv[16]; } fakeenv;
static const char *fake_get(void *ud, const char *name)
{
    fakeenv *e = ud;
    size_t n = strlen(name);
    for (int i = 0; e->kv[i]; i++)
        if (!strncmp(e->kv[i], name, n) && e->kv[i][n] == '=') return e->kv[i] + n + 1;
    return NULL;
}

static void test_config_env(void **st)
{
    triatt_config c;
    char err[256];
    triatt_config_default(&c);
    assert_false(c.enabled);
    assert_int_equal(c.window, 128); assert_int_equal(c.prefix, 32); assert_int_equal(c.warmup, 256);
    assert_int_equal(c.version, TRIATT_V3); assert_int_equal(c.n_segments, 8);
    assert_int_equal(c.divide_length, 128);
    fakeenv ok = {{"VLLM_TRIATT_ENABLED=1", "VLLM_TRIATT_BUDGET=29491", "VLLM_TRIATT_WINDOW=64",
                   "TRIATT_PREFIX=128", "VLLM_TRIATT_WARMUP=1024", "VLLM_TRIATT_HYBRID=1",
                   "VLLM_TRIATT_SEGMENTS=4", "VLLM_TRIATT_ADAPTIVE=true", "TRIATT_MODE=recency",
                   "TRIATT_DIRECTION=evict_high", "LONGCTX_ENDPOINT=http://127.0.0.1:5054",
                   "VLLM_TRIATT_COMPRESSION_LOG=1", "TRIATT_THREADS=2", NULL}};
    assert_int_equal(triatt_config_from_getenv(&c, fake_get, &ok, err, sizeof err), 0);
    assert_true(c.enabled && c.adaptive && c.compression_log);
    assert_int_equal(c.budget, 29491); assert_int_equal(c.window, 64); assert_int_equal(c.prefix, 128);
    assert_int_equal(c.warmup, 1024); assert_int_equal(c.version, TRIATT_V2); assert_int_equal(c.n_segments, 4);
    assert_int_equal(c.mode, TRIATT_MODE_RECENCY); assert_int_equal(c.direction, TRIATT_EVICT_HIGH);
    assert_int_equal(c.n_threads, 2);
    assert_string_equal(c.endpoint, "http://127.0.0.1:5054");
    /* VLLM_ name wins over TRIATT_ */
    fakeenv both = {{"VLLM_TRIATT_WINDOW=10", "TRIATT_WINDOW=20", NULL}};
    assert_int_equal(triatt_config_from_getenv(&c, fake_get, &both, err, sizeof err), 0);
    assert_int_equal(c.window, 10);
    /* invalid values are rejected with the variable named, and cfg is unchanged */
    const char *bads[][2] = {{"VLLM_TRIATT_BUDGET=abc", "VLLM_TRIATT_BUDGET"},
                             {"VLLM_TRIATT_WINDOW=-1", "VLLM_TRIATT_WINDOW"},
                             {"VLLM_TRIATT_HYBRID=3", "VLLM_TRIATT_HYBRID"},
                             {"VLLM_TRIATT_ENABLED=maybe", "VLLM_TRIATT_ENABLED"},
                             {"TRIATT_MODE=7", "TRIATT_MODE"},
                             {"TRIATT_DIRECTION=up", "TRIATT_DIRECTION"},
                             {"VLLM_TRIATT_SEGMENTS=12x", "VLLM_TRIATT_SEGMENTS"},
                             {"TRIATT_EMA_ALPHA=0", "TRIATT_EMA_ALPHA"},
                             {"LONGCTX_ENDPOINT=ftp://x", "LONGCTX_ENDPOINT"}};
    for (size_t i = 0; i < sizeof bads / sizeof bads[0]; i++) {
        triatt_config before = c;
        fakeenv b = {{bads[i][0], NULL}};
        err[0] = 0;
        assert_int_equal(triatt_config_from_getenv(&c, fake_get, &b, err, sizeof err), LCX_EINVAL);
        if (!strstr(err, bads[i][1])) fail_msg("error for %s does not name it: %s", bads[i][0], err);
        assert_memory_equal(&before, &c, sizeof c);
    }
    /* enabled without a budget */
    triatt_config_default(&c);
    fakeenv nob = {{"VLLM_TRIATT_ENABLED=1", NULL}};
    assert_int_equal(triatt_config_from_getenv(&c, fake_get, &nob, err, sizeof err), LCX_EINVAL);
    assert_non_null(strstr(err, "BUDGET"));
}

/* ---- driver ---- */
typedef struct { char lines[16][256]; int n; } logcap;
static void cap_log(void *ud, const char *line)
{
    logcap *l = ud;
    if (l->n < 16) snprintf(l->lines[l->n++], 256, "%s", line);
}

static void test_driver_round(void **st)
{
    world w;
    make_world(&w, 2, 4, 2, 32, 32, TRIATT_PAIR_HALF, 500, 16);
    for (int i = 0; i < w.n; i++) w.pos[i] = i;
    triatt_config cfg;
    triatt_config_default(&cfg);
    cfg.enabled = true; cfg.budget = 300; cfg.window = 32; cfg.prefix = 8; cfg.warmup = 20; cfg.divide_length = 16;
    for (int mode = 0; mode < 4; mode++) {
        cfg.mode = mode == 3 ? TRIATT_MODE_TRIG : (triatt_mode)mode;
        cfg.fast_path = mode == 3;
        cfg.n_threads = mode == 3 ? 2 : 1;
        triatt_ctx *t;
        assert_int_equal(triatt_init(&w.g, &cfg, &t), 0);
        logcap lc = {0};
        triatt_set_log(t, cap_log, &lc);
        triatt_keys k = {.get = strict_get, .ud = &w};
        int32_t out[500];
        /* no eviction before warmup */
        assert_int_equal(triatt_maybe_evict(t, &k, w.pos, w.n, out), 0);
        for (int pass = 0; pass < 2; pass++) {
            for (int l = 0; l < 2; l++)
                assert_int_equal(triatt_observe_queries(t, l, w.q + (size_t)l * w.T * 4 * 32, 16, 0), 0);
            triatt_end_pass(t);
        }
        assert_true(triatt_calib_ready(triatt_ctx_calib(t)));
        /* trigger: 500 > max(300, 33) + 16 */
        int n = triatt_maybe_evict(t, &k, w.pos, w.n, out);
        assert_int_equal(n, 200);
        for (int i = 0; i < n; i++) assert_true(w.pos[out[i]] >= 8 && w.pos[out[i]] < 500 - 32 + 1 - 1 + 1);
        if (mode == 2) {
            /* recency with V3: the oldest cells of each segment go first */
            unsigned char gone[500] = {0};
            for (int i = 0; i < n; i++) gone[out[i]] = 1;
            /* within a segment nothing newer goes while something older stays: check
             * pairs 1 apart inside the first segment [8, 65) */
            for (int i = 9; i < 65; i++) if (gone[i]) assert_true(gone[i - 1]);
            assert_true(gone[8]);
        }
        /* below the trigger nothing happens */
        assert_int_equal(triatt_maybe_evict(t, &k, w.pos, 316, out), 0);
        triatt_counters ctr;
        triatt_get_counters(t, &ctr);
        assert_int_equal(ctr.rounds, 1);
        assert_int_equal(ctr.cells_evicted, 200);
        assert_int_equal(ctr.cells_scored, 500 - 32);
        assert_int_equal(ctr.calib_passes, 2);
        assert_true(ctr.last_round_ms >= 0);
        int found = 0;
        const char *want = mode == 1 ? "evict: evicted 200/200 tokens (budget=300, used=500, max_pos=499, mode=v3,random)"
                         : mode == 2 ? "evict: evicted 200/200 tokens (budget=300, used=500, max_pos=499, mode=v3,recency)"
                                     : "evict: evicted 200/200 tokens (budget=300, used=500, max_pos=499, mode=v3)";
        for (int i = 0; i < lc.n; i++) found += !strcmp(lc.lines[i], want);
        if (found != 1) fail_msg("log line missing: %s (got %d lines, first '%s')", want, lc.n, lc.lines[0]);
        triatt_free(t);
    }
    /* the fast-path driver and the full driver evict the same cells */
    int32_t a[500], b[500];
    int na = 0, nb = 0;
    for (int fast = 0; fast < 2; fast++) {
        cfg.mode = TRIATT_MODE_TRIG; cfg.fast_path = fast; cfg.n_threads = 1;
        triatt_ctx *t;
        assert_int_equal(triatt_init(&w.g, &cfg, &t), 0);
        for (int l = 0; l < 2; l++) triatt_observe_queries(t, l, w.q + (size_t)l * w.T * 4 * 32, 16, 0);
        triatt_end_pass(t);
        for (int l = 0; l < 2; l++) triatt_observe_queries(t, l, w.q + (size_t)l * w.T * 4 * 32, 16, 0);
        triatt_end_pass(t);
        triatt_keys k = {.get = strict_get, .ud = &w};
        if (fast) assert_int_equal(triatt_cells_written(t, &k, w.pos, 0, w.n), 0);
        int n = triatt_maybe_evict(t, &k, w.pos, w.n, fast ? b : a);
        if (fast) nb = n; else na = n;
        triatt_free(t);
    }
    assert_int_equal(na, nb);
    int same = 0;
    for (int i = 0; i < na; i++)
        for (int j = 0; j < nb; j++) same += a[i] == b[j];
    assert_true(same >= na - 2);   /* float rounding may swap a near-tie at the boundary */
    /* disabled: no-op */
    triatt_config off;
    triatt_config_default(&off);
    triatt_ctx *t;
    assert_int_equal(triatt_init(&w.g, &off, &t), 0);
    assert_int_equal(triatt_maybe_evict(t, NULL, w.pos, w.n, a), 0);
    triatt_free(t);
    cfg.budget = 0;
    assert_int_equal(triatt_init(&w.g, &cfg, &t), LCX_EINVAL);
    triatt_free(NULL);
    triatt_scorer_free(NULL);
    triatt_calib_free(NULL);
    free_world(&w);
}

/* ---- F16 key accessor (get16): same scores as f32 keys holding the same values ---- */
typedef struct { world *w; uint16_t *h; } f16world;
static const uint16_t *get16_world(void *ud, int l, int kv, int c0, int n, float *scratch, size_t *stride)
{
    f16world *f = ud;
    *stride = f->w->g.head_dim;
    return f->h + (((size_t)l * f->w->g.n_kv_heads + kv) * f->w->n + c0) * f->w->g.head_dim;
}

static void test_f16_accessor(void **st)
{
    for (int pr = 0; pr < 2; pr++) {
        world w;
        make_world(&w, 2, 4, 2, 64, 64, (triatt_pairing)pr, 400, 16);
        size_t nk = (size_t)2 * 2 * 400 * 64;
        f16world fw = {&w, malloc(nk * 2)};
        for (size_t i = 0; i < nk; i++) {
            fw.h[i] = (uint16_t)_cvtss_sh(w.keys[i], 0);
            w.keys[i] = _cvtsh_ss(fw.h[i]);   /* f32 copy of the same values */
        }
        triatt_calib *cal = calib_world(&w);
        triatt_keys k32 = {.get = strict_get, .ud = &w}, k16 = {.ud = &fw, .get16 = get16_world};
        float a[400], b[400], c[400];
        for (int fast = 0; fast < 2; fast++) {
            triatt_scorer_opts o = {.n_threads = 2, .eps = 1e-8};
            triatt_scorer *s = NULL;
            triatt_scorer_init(&w.g, &o, &s);
            if (!fast) {
                assert_int_equal(triatt_score(s, cal, &k32, w.pos, w.n, 900, 780, a), 0);
                assert_int_equal(triatt_score(s, cal, &k16, w.pos, w.n, 900, 780, b), 0);
            } else {
                assert_int_equal(triatt_fast_reserve(s, w.n), 0);
                assert_int_equal(triatt_fast_refresh(s, cal, &k16, w.pos, w.n), w.n);
                assert_int_equal(triatt_fast_score(s, cal, w.pos, w.n, 900, 780, c), 0);
            }
            triatt_scorer_free(s);
        }
        for (int i = 0; i < w.n; i++) {
            if (isnan(a[i])) { assert_true(isnan(b[i]) && isnan(c[i])); continue; }
            assert_true(fabs(a[i] - b[i]) <= 1e-4 * (1 + fabs(a[i])));
            assert_true(fabs(a[i] - c[i]) <= 1e-4 * (1 + fabs(a[i])));
        }
        /* the driver accepts a get16-only accessor */
        triatt_config cfg;
        triatt_config_default(&cfg);
        cfg.enabled = true; cfg.budget = 200; cfg.window = 16; cfg.warmup = 16; cfg.divide_length = 8;
        triatt_ctx *t;
        assert_int_equal(triatt_init(&w.g, &cfg, &t), 0);
        for (int l = 0; l < 2; l++) triatt_observe_queries(t, l, w.q + (size_t)l * w.T * 4 * 64, 16, 0);
        triatt_end_pass(t);
        int32_t out[400];
        assert_int_equal(triatt_maybe_evict(t, &k16, w.pos, w.n, out), 200);
        triatt_free(t);
        triatt_calib_free(cal);
        free(fw.h);
        free_world(&w);
    }
}

/* ---- driver over several rounds with engine-style compaction: fast == full ---- */
typedef struct { world *w; int32_t live[600]; } livekeys;
static const float *live_get(void *ud, int l, int kv, int c0, int n, float *scratch, size_t *stride)
{
    livekeys *lk = ud;
    world *w = lk->w;
    for (int i = 0; i < n; i++)
        memcpy(scratch + (size_t)i * w->g.head_dim,
               w->keys + (((size_t)l * w->g.n_kv_heads + kv) * w->n + lk->live[c0 + i]) * w->g.head_dim,
               w->g.head_dim * 4);
    *stride = w->g.head_dim;
    return scratch;
}

static void test_driver_compaction(void **st)
{
    world w;
    make_world(&w, 2, 4, 2, 32, 32, TRIATT_PAIR_ADJACENT, 600, 16);
    triatt_config cfg;
    triatt_config_default(&cfg);
    cfg.enabled = true; cfg.budget = 200; cfg.window = 16; cfg.warmup = 16; cfg.divide_length = 8; cfg.prefix = 4;
    livekeys lk[2];
    triatt_ctx *t[2];
    int n_live[2] = {0, 0};
    for (int f = 0; f < 2; f++) {
        cfg.fast_path = f;
        cfg.n_threads = f ? 2 : 1;
        assert_int_equal(triatt_init(&w.g, &cfg, &t[f]), 0);
        lk[f].w = &w;
        for (int l = 0; l < 2; l++) triatt_observe_queries(t[f], l, w.q + (size_t)l * w.T * 4 * 32, 16, 0);
        assert_int_equal(triatt_end_pass(t[f]), 1);
    }
    int rounds = 0, agree = 0, total = 0;
    for (int p0 = 0; p0 < 600; p0 += 40) {
        for (int f = 0; f < 2; f++) {
            for (int i = 0; i < 40; i++) lk[f].live[n_live[f]++] = p0 + i;
            triatt_keys k = {.get = live_get, .ud = &lk[f]};
            int32_t out[600];
            int n = triatt_maybe_evict(t[f], &k, lk[f].live, n_live[f], out);
            assert_true(n >= 0);
            if (n) {
                unsigned char gone[600] = {0};
                for (int i = 0; i < n; i++) gone[out[i]] = 1;
                int m = 0;
                for (int c = 0; c < n_live[f]; c++)
                    if (!gone[c]) lk[f].live[m++] = lk[f].live[c];
                n_live[f] = m;
                rounds += f == 0;
            }
        }
        assert_int_equal(n_live[0], n_live[1]);
        /* the two caches hold (nearly) the same positions: only float near-ties may differ */
        for (int i = 0; i < n_live[0]; i++)
            for (int j = 0; j < n_live[1]; j++) agree += lk[0].live[i] == lk[1].live[j];
        total += n_live[0];
    }
    fprintf(stderr, "compaction: %d rounds, %d/%d live positions agree (fast vs full)\n", rounds, agree, total);
    assert_true(rounds >= 5);
    assert_true(agree >= total - total / 50);
    triatt_counters c0, c1;
    triatt_get_counters(t[0], &c0);
    triatt_get_counters(t[1], &c1);
    assert_int_equal(c0.rounds, c1.rounds);
    assert_int_equal(c0.cells_evicted, c1.cells_evicted);
    triatt_free(t[0]);
    triatt_free(t[1]);
    free_world(&w);
}

/* ---- simulator: the evidence behind the default direction ---- */
static void test_simulator_direction(void **st)
{
    triatt_sim_params p = {.n_seeds = 12, .seed0 = 100, .n_tokens = 2048, .n_planted = 24, .noise = 1.0, .align = 0.6};
    triatt_sim_result r;
    assert_int_equal(triatt_simulate(&p, &r), 0);
    assert_int_equal(r.n_seeds, 12);
    for (int b = 0; b < 2; b++) {
        fprintf(stderr, "budget %s: keep_high %.3f evict_high %.3f random %.3f recency %.3f\n", b ? "70%" : "90%",
                r.survive[b][0], r.survive[b][1], r.survive[b][2], r.survive[b][3]);
        /* planted keys aligned with the future query centre: keeping high scores keeps them */
        assert_true(r.survive[b][0] > r.survive[b][2] + 0.04);
        assert_true(r.survive[b][1] < r.survive[b][2] - 0.3);
        /* the random control keeps about the budget share of the evictable range */
        assert_true(r.survive[b][2] > (b ? 0.55 : 0.8) && r.survive[b][2] < (b ? 0.9 : 1.0));
    }
    p.align = 1.5;
    assert_int_equal(triatt_simulate(&p, &r), LCX_EINVAL);
}

/* Scorer rounds large enough for the multi-stream split (>= 2048 cells, with a tail that does
 * not fill the segments): 4 streams == 1 stream bit for bit, and both match the scalar
 * kernel; f32 through scratch (each stream converts into its own part of the scratch) and f16
 * read in place; half and adjacent pairing, 1 and 2 threads. */
static void test_multistream_scorer(void **st)
{
    for (int pr = 0; pr < 2; pr++) {
        world w;
        make_world(&w, 2, 4, 2, 128, 128, (triatt_pairing)pr, 2500, 8);
        size_t nk = (size_t)2 * 2 * w.n * 128;
        f16world fw = {&w, malloc(nk * 2)};
        for (size_t i = 0; i < nk; i++) fw.h[i] = (uint16_t)_cvtss_sh(w.keys[i], 0);
        triatt_calib *cal = calib_world(&w);
        triatt_keys k32 = {.get = strict_get, .ud = &w}, k16 = {.ud = &fw, .get16 = get16_world};
        float *a = malloc(w.n * 4), *b = malloc(w.n * 4), *c = malloc(w.n * 4);
        int32_t P = w.pos[w.n - 1];
        for (int h = 0; h < 2; h++)
            for (int nt = 1; nt <= 2; nt++) {
                const triatt_keys *k = h ? &k16 : &k32;
                triatt_scorer_opts o = {.n_threads = nt, .eps = 1e-8};
                triatt_scorer *s = NULL;
                triatt_scorer_init(&w.g, &o, &s);
                assert_non_null(s);
                assert_int_equal(triatt_score(s, cal, k, w.pos, w.n, P, P - 31, a), 0);   /* default: 4 */
                triatt__scorer_set_streams(s, 1);
                assert_int_equal(triatt_score(s, cal, k, w.pos, w.n, P, P - 31, b), 0);
                triatt__scorer_set_streams(s, 3);
                triatt__scorer_force_kernel(s, 0);
                assert_int_equal(triatt_score(s, cal, k, w.pos, w.n, P, P - 31, c), 0);
                for (int i = 0; i < w.n; i++) {
                    if (isnan(a[i])) { assert_true(isnan(b[i]) && isnan(c[i]) && i >= w.n - 16); continue; }
                    if (memcmp(&a[i], &b[i], 4)) fail_msg("pair %d f16 %d nt %d cell %d: 4 streams %.9g, 1 stream %.9g",
                                                          pr, h, nt, i, a[i], b[i]);
                    if (fabs(a[i] - c[i]) > 1e-4 * (1 + fabs(c[i])))
                        fail_msg("pair %d f16 %d nt %d cell %d: avx2 %g scalar %g", pr, h, nt, i, a[i], c[i]);
                }
                triatt_scorer_free(s);
            }
        free(a); free(b); free(c);
        triatt_calib_free(cal);
        free(fw.h);
        free_world(&w);
    }
}

typedef struct { world *w; unsigned char *q; size_t qst; } q8world;
static const void *get_q8_world(void *ud, int l, int kv, int c0, int n, float *scratch, size_t *stride)
{
    q8world *f = ud;
    *stride = f->qst;
    return f->q + (((size_t)l * f->w->g.n_kv_heads + kv) * f->w->n + c0) * f->qst;
}

/* Q8_0 accessor through the scorer: full rounds (multi-stream: 2500 cells) equal the f32
 * accessor over the dequantized keys, 4 streams == 1 stream bit for bit, the fast path agrees,
 * and a geometry whose n_rot is not a whole number of blocks is refused. */
static void test_q8_accessor(void **st)
{
    for (int pr = 0; pr < 2; pr++) {
        world w;
        make_world(&w, 2, 4, 2, 128, 128, (triatt_pairing)pr, 2500, 8);
        size_t rows = (size_t)2 * 2 * w.n, qst = 4 * 34;
        q8world fq = {&w, malloc(rows * qst), qst};
        make_q8(w.keys, (int)rows, 128, 128, fq.q, qst, w.keys);   /* w.keys := dequantized */
        triatt_calib *cal = calib_world(&w);
        triatt_keys k32 = {.get = strict_get, .ud = &w}, kq = {.ud = &fq, .get_q8 = get_q8_world};
        float *a = malloc(w.n * 4), *b = malloc(w.n * 4), *c = malloc(w.n * 4);
        int32_t P = w.pos[w.n - 1];
        for (int nt = 1; nt <= 2; nt++) {
            triatt_scorer_opts o = {.n_threads = nt, .eps = 1e-8};
            triatt_scorer *s = NULL;
            triatt_scorer_init(&w.g, &o, &s);
            assert_int_equal(triatt_score(s, cal, &k32, w.pos, w.n, P, P - 31, a), 0);
            assert_int_equal(triatt_score(s, cal, &kq, w.pos, w.n, P, P - 31, b), 0);
            triatt__scorer_set_streams(s, 1);
            assert_int_equal(triatt_score(s, cal, &kq, w.pos, w.n, P, P - 31, c), 0);
            for (int i = 0; i < w.n; i++) {
                if (isnan(a[i])) { assert_true(isnan(b[i]) && isnan(c[i])); continue; }
                if (fabs(a[i] - b[i]) > 1e-4 * (1 + fabs(a[i])))
                    fail_msg("q8 pair %d nt %d cell %d: q8 %g f32 %g", pr, nt, i, b[i], a[i]);
                assert_true(memcmp(&b[i], &c[i], 4) == 0);
            }
            assert_int_equal(triatt_fast_reserve(s, w.n), 0);
            assert_int_equal(triatt_fast_refresh(s, cal, &kq, w.pos, w.n), w.n);
            assert_int_equal(triatt_fast_score(s, cal, w.pos, w.n, P, P - 31, c), 0);
            for (int i = 0; i < w.n; i++)
                if (!isnan(a[i])) assert_true(fabs(a[i] - c[i]) <= 1e-4 * (1 + fabs(a[i])));
            triatt_scorer_free(s);
        }
        free(a); free(b); free(c);
        triatt_calib_free(cal);
        free(fq.q);
        free_world(&w);
    }
    /* n_rot 48 is not whole 32-blocks: Q8_0 refused, the same keys as f32 are fine */
    world w;
    make_world(&w, 1, 2, 1, 64, 48, TRIATT_PAIR_HALF, 40, 4);
    triatt_calib *cal = calib_world(&w);
    q8world fq = {&w, calloc((size_t)w.n, 2 * 34), 2 * 34};
    triatt_keys kq = {.ud = &fq, .get_q8 = get_q8_world}, k32 = {.get = strict_get, .ud = &w};
    triatt_scorer *s = NULL;
    triatt_scorer_init(&w.g, NULL, &s);
    float sc[40];
    assert_int_equal(triatt_score(s, cal, &kq, w.pos, w.n, 100, 90, sc), LCX_ENOTSUP);
    assert_int_equal(triatt_fast_reserve(s, w.n), 0);
    assert_int_equal(triatt_fast_set_cells(s, cal, &kq, w.pos, 0, w.n), LCX_ENOTSUP);
    assert_int_equal(triatt_score(s, cal, &k32, w.pos, w.n, 100, 90, sc), 0);
    triatt_keys none = {.ud = &w};
    assert_int_equal(triatt_score(s, cal, &none, w.pos, w.n, 100, 90, sc), LCX_EINVAL);
    triatt_scorer_free(s);
    triatt_calib_free(cal);
    free(fq.q);
    free_world(&w);
}

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test(test_kernels_vs_scalar),
        cmocka_unit_test(test_kernel_parts_and_tails),
        cmocka_unit_test(test_threads_mask_partial_rope),
        cmocka_unit_test(test_fast_path_equals_full),
        cmocka_unit_test(test_selection_properties),
        cmocka_unit_test(test_calibration_passes),
        cmocka_unit_test(test_calibration_file),
        cmocka_unit_test(test_geometry_scaling),
        cmocka_unit_test(test_config_env),
        cmocka_unit_test(test_driver_round),
        cmocka_unit_test(test_f16_accessor),
        cmocka_unit_test(test_multistream_scorer),
        cmocka_unit_test(test_q8_accessor),
        cmocka_unit_test(test_driver_compaction),
        cmocka_unit_test(test_simulator_direction),
    };
    return cmocka_run_group_tests(t, NULL, NULL);
}
