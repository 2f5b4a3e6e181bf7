/* lcx__buf_json_f32's printf-free path against the printf/strtof reference
 * (lcx__buf_json_f32_ref): byte-identical output for edge cases, every "short binary
 * fraction" (where decimal ties happen), and millions of random floats; lcx__buf_int
 * against "%lld". */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include "util/util.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t next_u64(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static long n_fail;
static void check(float f)
{
    lcx_buf a = {0}, r = {0};
    assert_int_equal(lcx__buf_json_f32(&a, f), 0);
    assert_int_equal(lcx__buf_json_f32_ref(&r, f), 0);
    if (a.len != r.len || memcmp(a.data, r.data, a.len)) {
        if (n_fail++ < 10) print_error("mismatch for %a: fast '%s' ref '%s'\n", (double)f, a.data, r.data);
    }
    lcx__buf_free(&a);
    lcx__buf_free(&r);
}

static float from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static void test_f32_edges(void **st)
{
    (void)st;
    n_fail = 0;
    const float e[] = {0.0f, -0.0f, 1.0f, -1.0f, 0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 1.0f / 3, 2.0f / 3,
                       FLT_MAX, -FLT_MAX, FLT_MIN, -FLT_MIN, FLT_TRUE_MIN, FLT_EPSILON, 1e-5f, 1e-4f,
                       9.9999e-5f, 1e-6f, 7.62939453125e-06f, 123456.7f, 999999.5f, 9999999.0f, 16777215.0f,
                       16777216.0f, 1e15f, 1e16f, 3.4e38f, 1024.0625f, 0.999999f, 0.9999999f, 0.99999994f,
                       99999.99f, 1e7f, 12345678.0f, 0.000123456789f, INFINITY, -INFINITY, NAN};
    for (size_t i = 0; i < sizeof e / sizeof e[0]; i++) check(e[i]);
    for (uint32_t u = 0; u < 4096; u++) {              /* denormals and around 1.0 / powers of two */
        check(from_bits(u));
        check(from_bits(0x3f800000u - 2048 + u));
        check(from_bits(0x00800000u - 2048 + u));
        check(from_bits(0x34000000u + (u << 12)));
    }
    for (int e2 = -45; e2 <= 30; e2++)                  /* every power of two and its neighbours */
        for (int dlt = -3; dlt <= 3; dlt++) {
            uint32_t u;
            float p = ldexpf(1.0f, e2);
            memcpy(&u, &p, sizeof u);
            check(from_bits(u + (uint32_t)dlt));
            check(-from_bits(u + (uint32_t)dlt));
        }
    assert_int_equal(n_fail, 0);
}

/* i/2^j with few bits: short exact decimals ending in 5, where %.Pg rounds a tie */
static void test_f32_ties(void **st)
{
    (void)st;
    n_fail = 0;
    for (int j = 1; j <= 40; j++)
        for (uint32_t i = 1; i < 20000; i += (j > 20 ? 7 : 1)) {
            float f = ldexpf((float)i, -j);
            check(f);
            check(ldexpf((float)(i * 2 + 1) * 1000003.0f, -j - 20));
        }
    for (uint32_t i = 1; i < 200000; i++) check((float)i + 0.5f), check((float)i * 0.125f + 1e6f);
    assert_int_equal(n_fail, 0);
}

static void test_f32_random(void **st)
{
    (void)st;
    n_fail = 0;
    long n = 1500000;
    for (long i = 0; i < n; i++) {
        uint64_t x = next_u64();
        check(from_bits((uint32_t)x));                          /* any bit pattern */
        check((float)((double)(x >> 40) / (double)(1ull << 24))); /* a score in [0, 1) */
    }
    assert_int_equal(n_fail, 0);
}

static void test_buf_int(void **st)
{
    (void)st;
    const long long e[] = {0, 1, -1, 9, 10, -10, 99, 100, 123456789, LLONG_MAX, LLONG_MIN, LLONG_MIN + 1,
                           INT_MAX, INT_MIN, 1000000000000000000ll};
    char ref[32];
    for (size_t i = 0; i < sizeof e / sizeof e[0] + 200000; i++) {
        long long v = i < sizeof e / sizeof e[0] ? e[i] : (long long)next_u64() >> (next_u64() % 64);
        lcx_buf b = {0};
        assert_int_equal(lcx__buf_int(&b, v), 0);
        snprintf(ref, sizeof ref, "%lld", v);
        assert_string_equal(b.data, ref);
        lcx__buf_free(&b);
    }
    lcx_buf c = {.cap = 3};                                   /* the cap still applies */
    assert_int_equal(lcx__buf_int(&c, 123), 0);
    assert_int_equal(lcx__buf_int(&c, 4), LCX_ELIMIT);
    lcx__buf_free(&c);
}

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test(test_f32_edges),
        cmocka_unit_test(test_f32_ties),
        cmocka_unit_test(test_f32_random),
        cmocka_unit_test(test_buf_int),
    };
    return cmocka_run_group_tests(t, NULL, NULL);
}
