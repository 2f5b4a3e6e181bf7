/* The quality benchmark's smoke set (bench/quality, docs/benchmarks/core.md "Quality"):
 * longctx's default ranking must beat plain BM25 on real code — C headers of the build
 * dependencies (scripts/deps.txt), their doc comments as questions — and find needles
 * among near-duplicate distractors in real essays through the rescue query signal.
 * Skips what is not installed / not in the fixtures. */
#include "testutil.h"
#include "qset.h"
#include "longctx/lcx.h"
#include <stdio.h>
#include <stdlib.h>

static void test_code_smoke(void **st)
{
    (void)st;
    static const char *const roots[] = {"/usr/include/microhttpd.h", "/usr/include/cmocka.h", "/usr/include/utf8proc.h",
                                        "/usr/include/pcre2.h", "/usr/include/x86_64-linux-gnu/curl", NULL};
    qs_code_cfg cfg = {"smoke", roots, 0, 150, 21, NULL};
    qs_code_result r;
    char *tmp = tu_tmpdir();
    int rc = qs_code_run(&cfg, tmp, 0, &r);
    tu_rmrf(tmp);
    free(tmp);
    if (rc == LCX_ENOTFOUND) skip();
    assert_int_equal(rc, 0);
    printf("code smoke: %d questions, %d chunks; MRR@10 default %.3f core %.3f plain BM25 %.3f lcx BM25 %.3f; R@10 %.3f vs %.3f\n",
           r.questions, r.chunks, r.deflt.mrr, r.core.mrr, r.bm25.mrr, r.bm25_lcx.mrr, r.deflt.r10, r.bm25.r10);
    assert_true(r.questions >= 50);
    assert_true(r.deflt.mrr >= 1.10 * r.bm25.mrr);
    assert_true(r.deflt.r10 > r.bm25.r10);
}

static void test_prose_smoke(void **st)
{
    (void)st;
    const char *hay = tu_fixture("haystack/paul_graham");
    if (!hay) skip();
    static const int toks[] = {8000, 64000, 0};
    qs_prose_cfg cfg = {hay, toks, 5, 3, 7};
    qs_prose_result r;
    int rc = qs_prose_run(&cfg, 0, &r);
    if (rc == LCX_ENOTFOUND) skip();
    assert_int_equal(rc, 0);
    printf("prose smoke: %d sessions; R@1 marker %.2f no marker %.2f plain %.2f, BM25 %.2f\n", r.sessions,
           r.deflt[QS_MARKER].r1, r.deflt[QS_NOMARKER].r1, r.deflt[QS_PLAIN].r1, r.bm25.r1);
    for (int s = 0; s < QS_NSHAPES; s++) {
        assert_true(r.deflt[s].r10 == 1.0);   /* recall@8 */
        assert_true(r.deflt[s].r1 >= 0.9);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_code_smoke),
        cmocka_unit_test(test_prose_smoke),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
