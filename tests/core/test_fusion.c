/* Fusion: linear (min-max over the candidates) and RRF against hand-computed values. */
#include "testutil.h"
#include "index/index.h"
#include <math.h>

static void test_linear(void **st)
{
    (void)st;
    lcx__cand c[3] = {
        {.id = 1, .dense = 0.9f, .bm25 = 0.0f},
        {.id = 2, .dense = 0.5f, .bm25 = 10.0f},
        {.id = 3, .dense = 0.1f, .bm25 = 5.0f},
    };
    lcx__fuse(c, 3, LCX_FUSE_LINEAR, 0.5f);
    /* dense' = 1, .5, 0 ; bm25' = 0, 1, .5 */
    assert_float_equal(c[0].fused, 0.5f, 1e-6);
    assert_float_equal(c[1].fused, 0.75f, 1e-6);
    assert_float_equal(c[2].fused, 0.25f, 1e-6);
    lcx__fuse(c, 3, LCX_FUSE_LINEAR, 1.0f);   /* dense only */
    assert_float_equal(c[0].fused, 1.0f, 1e-6);
    assert_float_equal(c[2].fused, 0.0f, 1e-6);
    lcx__fuse(c, 3, LCX_FUSE_LINEAR, 0.2f);
    assert_float_equal(c[1].fused, 0.2f * 0.5f + 0.8f * 1.0f, 1e-6);
    lcx__cand_sort(c, 3);
    assert_int_equal(c[0].id, 2);
    assert_int_equal(c[1].id, 3);
    assert_int_equal(c[2].id, 1);
}

static void test_constant_component(void **st)
{
    (void)st;
    lcx__cand c[2] = {{.id = 7, .dense = 0.3f, .bm25 = 0}, {.id = 4, .dense = 0.3f, .bm25 = 0}};
    lcx__fuse(c, 2, LCX_FUSE_LINEAR, 0.5f);
    /* dense constant > 0 → 1 ; bm25 constant 0 → 0 */
    assert_float_equal(c[0].fused, 0.5f, 1e-6);
    assert_float_equal(c[1].fused, 0.5f, 1e-6);
    lcx__cand_sort(c, 2);           /* ties by lower id */
    assert_int_equal(c[0].id, 4);
    lcx__cand one = {.id = 9, .dense = -0.2f, .bm25 = 3};
    lcx__fuse(&one, 1, LCX_FUSE_LINEAR, 0.5f);
    assert_float_equal(one.fused, 0.5f, 1e-6);
    lcx__fuse(NULL, 0, LCX_FUSE_LINEAR, 0.5f);   /* no-op */
}

static void test_rrf(void **st)
{
    (void)st;
    lcx__cand c[3] = {
        {.id = 1, .rank_d = 1, .rank_b = 1},
        {.id = 2, .rank_d = 2, .rank_b = 0},
        {.id = 3, .rank_d = 0, .rank_b = 3},
    };
    lcx__fuse(c, 3, LCX_FUSE_RRF, 0.5f);
    float mx = 2.0f / 61.0f;
    assert_float_equal(c[0].fused, 1.0f, 1e-6);
    assert_float_equal(c[1].fused, (1.0f / 62.0f) / mx, 1e-6);
    assert_float_equal(c[2].fused, (1.0f / 63.0f) / mx, 1e-6);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_linear),
        cmocka_unit_test(test_constant_component),
        cmocka_unit_test(test_rrf),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
