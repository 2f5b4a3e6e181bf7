/* Tier-2 span cutting (src/triatt/rescue_split.c): windows of max_len tokens overlapping by
 * `overlap`, checked against a brute-force property: every window is inside its span and at
 * most max_len long, the windows cover the span, and every run of overlap + 1 tokens lies
 * whole inside one window. */
#include "testutil.h"
#include "triatt/rescue_split.h"

#include <stdlib.h>

static void test_split_properties(void **st)
{
    (void)st;
    for (int len = 1; len <= 700; len += 7)
        for (int ml = 16; ml <= 160; ml += 48) {
            const int ov = ml / 4;
            triatt_span in = {1000, 1000 + len}, *out = NULL;
            int n = triatt__rescue_split_spans(&in, 1, ml, ov, &out);
            assert_true(n >= 1);
            if (len <= ml) { assert_int_equal(n, 1); assert_int_equal(out[0].a, in.a); assert_int_equal(out[0].b, in.b); }
            for (int i = 0; i < n; i++) {
                assert_true(out[i].a >= in.a && out[i].b <= in.b && out[i].b - out[i].a <= ml && out[i].b > out[i].a);
                if (i) assert_true(out[i].a > out[i - 1].a);
            }
            assert_int_equal(out[0].a, in.a);
            assert_int_equal(out[n - 1].b, in.b);
            for (int r0 = in.a; r0 + ov + 1 <= in.b; r0++) {
                int whole = 0;
                for (int i = 0; i < n && !whole; i++) whole = out[i].a <= r0 && r0 + ov + 1 <= out[i].b;
                assert_true(whole);
            }
            free(out);
        }
}

static void test_split_refusals(void **st)
{
    (void)st;
    triatt_span in = {0, 10}, *out = NULL;
    assert_int_equal(triatt__rescue_split_spans(&in, 1, 0, 0, &out), LCX_EINVAL);
    assert_int_equal(triatt__rescue_split_spans(&in, 1, 8, 8, &out), LCX_EINVAL);
    assert_int_equal(triatt__rescue_split_spans(&in, -1, 8, 2, &out), LCX_EINVAL);
    assert_int_equal(triatt__rescue_split_spans(NULL, 0, 8, 2, &out), 0);
    free(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_split_properties),
        cmocka_unit_test(test_split_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
