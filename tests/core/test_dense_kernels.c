/* Dense kernels: every SIMD kernel against the scalar reference; top-k against a sort. AVX-512 kernels are
 * compared only when the CPU has AVX-512 (else the comparison is skipped, with a note). */
#include "testutil.h"
#include "embed/embed.h"
#include "index/index.h"
#include "util/util.h"
#include <immintrin.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rs = 0x1234567;
static float frand(void)
{
    rs ^= rs << 13; rs ^= rs >> 7; rs ^= rs << 17;
    return (float)((double)(rs >> 11) / (double)(1ull << 53) * 2.0 - 1.0);
}

static void check_f32(float (*k)(const float *, const float *, size_t), const char *name)
{
    static float a[1100], b[1100];
    for (int i = 0; i < 1100; i++) { a[i] = frand(); b[i] = frand(); }
    size_t ns[] = {0, 1, 3, 7, 8, 9, 15, 16, 17, 31, 32, 33, 64, 255, 256, 257, 384, 1024, 1100};
    for (size_t t = 0; t < sizeof ns / sizeof *ns; t++) {
        float r = lcx__dot_f32_scalar(a + 1, b + 3, ns[t] > 1097 ? 1097 : ns[t]);  /* unaligned */
        float g = k(a + 1, b + 3, ns[t] > 1097 ? 1097 : ns[t]);
        if (fabsf(r - g) > 1e-4f * (1 + sqrtf((float)ns[t]))) fail_msg("%s n=%zu: %g vs %g", name, ns[t], g, r);
    }
}

static void check_u8(void (*k)(const int8_t *, const uint8_t *, size_t, size_t, int32_t *), const char *name)
{
    size_t dims[] = {32, 64, 256, 384, 100, 13, 768};
    size_t row_counts[] = {41, 1, 3, 4, 6, 64, 67, 130};   /* 4 streams of n/4 rows + a tail of 0..3 */
    for (size_t t = 0; t < sizeof dims / sizeof *dims * (sizeof row_counts / sizeof *row_counts); t++) {
        size_t dim = dims[t % (sizeof dims / sizeof *dims)], rows = row_counts[t / (sizeof dims / sizeof *dims)];
        int8_t *q = malloc(dim);
        uint8_t *v = malloc(rows * dim);
        int32_t *ref = malloc(rows * 4), *got = malloc(rows * 4);
        for (size_t i = 0; i < dim; i++) q[i] = (int8_t)(frand() * 63.99f);
        for (size_t i = 0; i < rows * dim; i++) v[i] = (uint8_t)(1 + (int)((frand() + 1) * 127));
        for (size_t i = 0; i < dim; i++) { v[i] = 255; q[i] = i & 1 ? 63 : -63; }  /* extremes in row 0 */
        lcx__dot_u8_rows_scalar(q, v, rows, dim, ref);
        k(q, v, rows, dim, got);
        for (size_t r = 0; r < rows; r++)
            if (ref[r] != got[r]) fail_msg("%s dim=%zu rows=%zu row %zu: %d vs %d", name, dim, rows, r, got[r], ref[r]);
        free(q); free(v); free(ref); free(got);
    }
}

/* 8-bit rows: the exact re-score (f32 query · stored row) matches the f32 cosine closely,
 * and the 8-bit scan (int8 query) approximates it (it only preselects candidates) */
static void test_quantized_scores(void **st)
{
    (void)st;
    size_t dims[] = {256, 100, 13};
    for (size_t t = 0; t < sizeof dims / sizeof *dims; t++) {
        size_t dim = dims[t];
        float q[256], row[256];
        for (size_t i = 0; i < dim; i++) q[i] = frand();
        float qn = sqrtf(lcx__dot_f32_scalar(q, q, dim));
        for (size_t i = 0; i < dim; i++) q[i] /= qn;
        int8_t q8[256];
        float qs = lcx__quant_query_i8(q, dim, q8);
        double max_scan = 0, max_exact = 0;
        for (size_t r = 0; r < 300; r++) {
            for (size_t i = 0; i < dim; i++) row[i] = frand() + (r % 7 == 0 ? q[i] * 8 : 0);
            float rn = sqrtf(lcx__dot_f32_scalar(row, row, dim));
            for (size_t i = 0; i < dim; i++) row[i] /= rn;
            float exact = lcx__dot_f32_scalar(q, row, dim);
            uint8_t u[256];
            float sc;
            lcx__quant_row_u8(row, dim, u, &sc);
            int32_t s;
            lcx__dot_u8_rows(q8, u, 1, dim, &s);
            float e1 = lcx__dot_f32_u8_scalar(q, u, dim) * sc, e2 = lcx__dot_f32_u8(q, u, dim) * sc;
            assert_float_equal(e1, e2, 1e-4);   /* AVX2 vs scalar */
            if (fabs(e1 - exact) > max_exact) max_exact = fabs(e1 - exact);
            if (fabs((double)s * qs * sc - exact) > max_scan) max_scan = fabs((double)s * qs * sc - exact);
        }
        fprintf(stderr, "dim %zu: max |stored − f32| = %.4f, max |8-bit scan − f32| = %.4f\n", dim, max_exact, max_scan);
        assert_true(max_exact < 0.01);
        assert_true(max_scan < 0.03);
    }
    /* SIMD quantization = scalar lrintf reference, including exact .5 ties */
    for (int t = 0; t < 50; t++) {
        size_t dim = 1 + (size_t)(t * 7 % 300);
        float v[300];
        for (size_t i = 0; i < dim; i++) v[i] = t % 5 == 0 ? (float)((int)(frand() * 40) + 0.5f) / 40.0f : frand();
        uint8_t u[300];
        float sc;
        lcx__quant_row_u8(v, dim, u, &sc);
        float mx = 0;
        for (size_t i = 0; i < dim; i++) mx = fabsf(v[i]) > mx ? fabsf(v[i]) : mx;
        assert_float_equal(sc, mx / 127.0f, 1e-9);
        for (size_t i = 0; i < dim; i++)
            if (u[i] != (uint8_t)(lrintf(v[i] * (127.0f / mx)) + 128)) fail_msg("row quant dim %zu i %zu", dim, i);
        int8_t q8[300];
        float qs = lcx__quant_query_i8(v, dim, q8);
        assert_float_equal(qs, mx / 63.0f, 1e-9);
        for (size_t i = 0; i < dim; i++)
            if (q8[i] != (int8_t)lrintf(v[i] * (63.0f / mx))) fail_msg("query quant dim %zu i %zu", dim, i);
    }
    float zero[16] = {0};
    uint8_t u[16];
    float sc = 1;
    lcx__quant_row_u8(zero, 16, u, &sc);
    assert_true(sc == 0 && u[3] == 128);
}

static void test_avx2(void **st)
{
    (void)st;
    check_f32(lcx__dot_f32_avx2, "dot_f32_avx2");
    check_u8(lcx__dot_u8_rows_avx2, "dot_u8_rows_avx2");
    check_u8(lcx__dot_u8_rows, "dot_u8_rows (dispatched)");
    check_f32(lcx_dot_f32, "lcx_dot_f32 (dispatched)");
}

static void test_avx512(void **st)
{
    (void)st;
    if (!lcx__cpu_has_avx512()) {
        fprintf(stderr, "SKIPPED: AVX-512 kernels vs scalar (this CPU has no AVX-512)\n");
        skip();
    }
    check_f32(lcx__dot_f32_avx512, "dot_f32_avx512");
    check_u8(lcx__dot_u8_rows_avx512, "dot_u8_rows_avx512");
}

static int cmp_ref(const void *a, const void *b)
{
    const float *x = a, *y = b;   /* pairs (score, id) */
    if (x[0] != y[0]) return x[0] > y[0] ? -1 : 1;
    return x[1] < y[1] ? -1 : x[1] > y[1];
}

static void test_topk(void **st)
{
    (void)st;
    enum { N = 5000 };
    static float s[N], pairs[N][2];
    uint64_t skip[N / 64 + 1];
    memset(skip, 0, sizeof skip);
    for (int i = 0; i < N; i++) {
        s[i] = (float)((int)(frand() * 50)) / 10.0f;   /* many ties */
        if (i % 11 == 0) skip[i / 64] |= 1ull << (i % 64);
    }
    int m = 0;
    for (int i = 0; i < N; i++)
        if (!(skip[i / 64] >> (i % 64) & 1)) { pairs[m][0] = s[i]; pairs[m][1] = (float)i; m++; }
    qsort(pairs, (size_t)m, sizeof pairs[0], cmp_ref);
    int ks[] = {1, 2, 8, 32, 100};
    for (size_t t = 0; t < sizeof ks / sizeof *ks; t++) {
        uint32_t ids[100];
        float vals[100];
        int n = lcx__topk(s, N, skip, ks[t], ids, vals);
        assert_int_equal(n, ks[t]);
        for (int i = 0; i < n; i++) {
            assert_int_equal(ids[i], (uint32_t)pairs[i][1]);
            assert_true(vals[i] == pairs[i][0]);
        }
    }
    uint32_t ids[10];
    float vals[10];
    assert_int_equal(lcx__topk(s, 3, NULL, 10, ids, vals), 3);
    assert_int_equal(lcx__topk(s, 0, NULL, 10, ids, vals), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_avx2),
        cmocka_unit_test(test_quantized_scores),
        cmocka_unit_test(test_avx512),
        cmocka_unit_test(test_topk),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
