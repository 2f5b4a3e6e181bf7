/* NIAH strict grader table: exact phrase only for PASS, partial word/number, boundaries,
 * echoed prompt ignored. */
#include "testutil.h"
#include "eval/lcx_eval.h"
#include <string.h>

static void test_niah(void **st)
{
    const char *ans = "PURPLE ELEPHANT 7742.";
    struct { const char *gen, *prompt; int want; } c[] = {
        {"The secret code word is PURPLE ELEPHANT 7742.", NULL, LCX_NIAH_PASS},
        {"PURPLE ELEPHANT 7742", NULL, LCX_NIAH_PASS},
        {"purple elephant 7742", NULL, LCX_NIAH_PARTIAL_NUMBER},      /* case-sensitive words */
        {"It is PURPLE ELEPHANT.", NULL, LCX_NIAH_PARTIAL_WORD},
        {"PURPLE ELEPHANT 7743", NULL, LCX_NIAH_PARTIAL_WORD},
        {"ELEPHANT PURPLE 7742", NULL, LCX_NIAH_PARTIAL_WORD},        /* all words, wrong order */
        {"the code is 7742", NULL, LCX_NIAH_PARTIAL_NUMBER},
        {"the code is 77421", NULL, LCX_NIAH_FAIL},                   /* token boundary */
        {"PURPLE ELEPHANTS 77742", NULL, LCX_NIAH_FAIL},
        {"PURPLE ELEPHANT 77420", NULL, LCX_NIAH_PARTIAL_WORD},
        {"I don't know.", NULL, LCX_NIAH_FAIL},
        {"", NULL, LCX_NIAH_FAIL},
        /* echoed prompt containing the needle is not credit */
        {"Context: The secret code word is PURPLE ELEPHANT 7742. Question? I don't know",
         "Context: The secret code word is PURPLE ELEPHANT 7742. Question?", LCX_NIAH_FAIL},
        {"Context: PURPLE ELEPHANT 7742. Q? PURPLE ELEPHANT 7742", "Context: PURPLE ELEPHANT 7742. Q?", LCX_NIAH_PASS},
    };
    for (size_t i = 0; i < sizeof c / sizeof *c; i++) {
        int g = lcx__niah_grade(c[i].gen, c[i].prompt, ans);
        if (g != c[i].want) fprintf(stderr, "case %zu: %s (want %s)\n", i, lcx__niah_grade_name(g), lcx__niah_grade_name(c[i].want));
        assert_int_equal(g, c[i].want);
    }
    assert_int_equal(lcx__niah_grade(NULL, NULL, ans), LCX_EINVAL);
    assert_int_equal(lcx__niah_grade("x", NULL, ""), LCX_EINVAL);
    assert_string_equal(lcx__niah_grade_name(LCX_NIAH_PASS), "PASS");
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_niah)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
