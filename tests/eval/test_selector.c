/* Selector + det copy: parser tables (ordinals 1st..8th as digits and words, "last",
 * typos, 0-indexed, "the Nth time I asked about X", unparseable → fail closed), request
 * parsing (preamble ignored, strict topics), and selection on a small history. */
#include "testutil.h"
#include "longctx/lcx_recipes.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *q;
    int rc;             /* 0 or LCX_ENOTFOUND */
    int ord;
    const char *fmt;    /* NULL: no format */
    const char *topic;  /* NULL: no topic */
    const char *prefix;
} pcase;

static const pcase cases[] = {
    {"Prepend aB3dE5gH7j to the 1st (1 indexed) poem about tapirs. Do not include any other text in your response.", 0, 1, "poem", "tapirs", "aB3dE5gH7j"},
    {"Prepend x to the 2nd (1 indexed) poem about tapirs. Do not include any other text in your response.", 0, 2, "poem", "tapirs", "x"},
    {"Prepend x to the 3rd (1 indexed) short story about the deep ocean. Do not include any other text.", 0, 3, "short story", "the deep ocean", "x"},
    {"prepend Q1 to the 4th (1-indexed) haiku about owls.", 0, 4, "haiku", "owls", "Q1"},
    {"Prepend Q to the 5th (1 indexed) blog post about tapir conservation.", 0, 5, "blog post", "tapir conservation", "Q"},
    {"Prepend Q to the 6th (1 indexed) essay about coffee.", 0, 6, "essay", "coffee", "Q"},
    {"Prepend Q to the 7th (1 indexed) song about rain on a tin roof.", 0, 7, "song", "rain on a tin roof", "Q"},
    {"Prepend Q to the 8th (1 indexed) letter about bees. Do not include any other text in your response.", 0, 8, "letter", "bees", "Q"},
    {"the second poem about tapirs", 0, 2, "poem", "tapirs", ""},
    {"Give me the first sonnet about the moon.", 0, 1, "sonnet", "the moon", ""},
    {"the third limerick about chess", 0, 3, "limerick", "chess", ""},
    {"the fourth ode about honey", 0, 4, "ode", "honey", ""},
    {"the fifth riddle about owls", 0, 5, "riddle", "owls", ""},
    {"the sixth joke about trains", 0, 6, "joke", "trains", ""},
    {"the seventh fable about deserts", 0, 7, "fable", "deserts", ""},
    {"the eighth speech about jazz", 0, 8, "speech", "jazz", ""},
    {"the secnd poem about tapirs", 0, 2, "poem", "tapirs", ""},           /* deletion */
    {"the thrid poem about tapirs", 0, 3, "poem", "tapirs", ""},           /* transposition */
    {"the fouth poem about tapirs", 0, 4, "poem", "tapirs", ""},
    {"the frist poem about tapirs", 0, 1, "poem", "tapirs", ""},
    {"the seventhh poem about tapirs", 0, 7, "poem", "tapirs", ""},        /* insertion */
    {"the 2dn (1 indexed) poem about tapirs", 0, 2, "poem", "tapirs", ""},  /* suffix typo */
    {"the 3rd (0 indexed) poem about tapirs", 0, 4, "poem", "tapirs", ""},
    {"The 0th (0-indexed) POEM about Tapirs.", 0, 1, "poem", "tapirs", ""},
    {"the last poem about tapirs", 0, LCX_ORD_LAST, "poem", "tapirs", ""},
    {"Prepend zz to the last one.", 0, LCX_ORD_LAST, NULL, NULL, "zz"},
    {"the second to last poem about tapirs", 0, LCX_ORD_LAST - 1, "poem", "tapirs", ""},
    {"the penultimate essay about bees", 0, LCX_ORD_LAST - 1, "essay", "bees", ""},
    {"the third time I asked about tapirs", 0, 3, NULL, "tapirs", ""},
    {"the 2nd time I asked for a poem about tapirs", 0, 2, "poem", "tapirs", ""},
    {"the first time I asked you to write a haiku about owls?", 0, 1, "haiku", "owls", ""},
    /* fail closed */
    {"write a poem about tapirs", LCX_ENOTFOUND, 0, NULL, NULL, ""},
    {"what is the capital of France?", LCX_ENOTFOUND, 0, NULL, NULL, ""},
    {"the poem about tapirs", LCX_ENOTFOUND, 0, NULL, NULL, ""},
    {"the 0th poem about tapirs", LCX_ENOTFOUND, 0, NULL, NULL, ""},
    {"the first (0 indexed) poem about tapirs", LCX_ENOTFOUND, 0, NULL, NULL, ""},
    {"the second time", LCX_ENOTFOUND, 0, NULL, NULL, ""},
    {"", LCX_ENOTFOUND, 0, NULL, NULL, ""},
    {"the sevemth poem", LCX_ENOTFOUND, 0, NULL, NULL, ""},                 /* no "about" */
};

static void test_parser_table(void **st)
{
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const pcase *c = &cases[i];
        lcx_ordinal_req r;
        int rc = lcx_ordinal_parse(c->q, strlen(c->q), &r);
        if (rc != c->rc) fprintf(stderr, "case %zu: %s → rc %d\n", i, c->q, rc);
        assert_int_equal(rc, c->rc);
        if (rc) continue;
        if (r.ordinal != c->ord) fprintf(stderr, "case %zu: %s → ord %d\n", i, c->q, r.ordinal);
        assert_int_equal(r.ordinal, c->ord);
        assert_int_equal(r.has_format, c->fmt != NULL);
        if (c->fmt) assert_string_equal(r.format, c->fmt);
        assert_int_equal(r.has_topic, c->topic != NULL);
        if (c->topic) assert_string_equal(r.topic, c->topic);
        assert_string_equal(r.prefix, c->prefix);
    }
}

static void test_request_parse(void **st)
{
    char f[128], t[256];
    assert_int_equal(lcx_request_parse("write a poem about tapirs", 25, f, sizeof f, t, sizeof t), 0);
    assert_string_equal(f, "poem");
    assert_string_equal(t, "tapirs");
    const char *s = "Here are examples:\nUser: write a poem about owls\n======END======\n\nWrite an Essay about Tapir Conservation.\n";
    assert_int_equal(lcx_request_parse(s, strlen(s), f, sizeof f, t, sizeof t), 0);
    assert_string_equal(f, "essay");
    assert_string_equal(t, "tapir conservation");
    s = "Please write a short story about the sea!";
    assert_int_equal(lcx_request_parse(s, strlen(s), f, sizeof f, t, sizeof t), 0);
    assert_string_equal(f, "short story");
    assert_string_equal(t, "the sea");
    s = "Examples:\nwrite a poem about owls\n\nthanks, that was lovely";
    assert_int_equal(lcx_request_parse(s, strlen(s), f, sizeof f, t, sizeof t), LCX_ENOTFOUND);
    s = "tell me about tapirs";
    assert_int_equal(lcx_request_parse(s, strlen(s), f, sizeof f, t, sizeof t), LCX_ENOTFOUND);
}

#define U(x) {"user", x, sizeof(x) - 1}
#define A(x) {"assistant", x, sizeof(x) - 1}

static void test_select(void **st)
{
    const lcx_msg h[] = {
        U("Examples:\nUser: write a poem about tapirs\nAssistant: EXAMPLE\n\nwrite a poem about tapirs"),
        A("P1"),
        U("write an essay about tapirs"), A("E1"),
        U("write a poem about tapir conservation"), A("C1"),
        U("write a poem about tapirs"), A("P2"),
        U("write a sonnet about tapirs"), A("S1"),
        U("write a poem about Tapirs."), A("P3"),
        U("write a poem about owls"), A("O1"),
    };
    size_t n = sizeof h / sizeof *h;
    struct { const char *q; int status; const char *resp; long reply; } c[] = {
        {"Prepend HH to the 1st (1 indexed) poem about tapirs. Do not include any other text.", LCX_SEL_OK, "HHP1", 1},
        {"Prepend HH to the 2nd (1 indexed) poem about tapirs. Do not include any other text.", LCX_SEL_OK, "HHP2", 7},
        {"Prepend HH to the 3rd (1 indexed) poem about tapirs.", LCX_SEL_OK, "HHP3", 11},
        {"Prepend HH to the 4th (1 indexed) poem about tapirs.", LCX_SEL_NO_MATCH, NULL, -1},
        {"Prepend HH to the last poem about tapirs.", LCX_SEL_OK, "HHP3", 11},
        {"Prepend HH to the 1st poem about tapir conservation.", LCX_SEL_OK, "HHC1", 5},
        {"the second time I asked about tapirs", LCX_SEL_OK, "E1", 3},
        {"the last one", LCX_SEL_OK, "O1", 13},
        {"the 1st poem about tapir", LCX_SEL_NO_MATCH, NULL, -1},            /* strict topic */
        {"tell me a joke", LCX_SEL_UNPARSED, NULL, -1},
        /* trailing clause after the topic: cut only because the full text matches nothing */
        {"prepend HH to the 2nd (1-indexed) poem about tapirs, and nothing else.", LCX_SEL_OK, "HHP2", 7},
        {"Prepend HH to the 1st poem about tapir conservation; thanks", LCX_SEL_OK, "HHC1", 5},
        {"Prepend HH to the 1st poem about tapir, and nothing else", LCX_SEL_NO_MATCH, NULL, -1},
    };
    for (size_t i = 0; i < sizeof c / sizeof *c; i++) {
        lcx_select_result r;
        assert_int_equal(lcx_select(h, n, c[i].q, strlen(c[i].q), &r), 0);
        if (r.status != c[i].status) fprintf(stderr, "select %zu: status %d (%s)\n", i, r.status, r.reason);
        assert_int_equal(r.status, c[i].status);
        if (c[i].resp) assert_string_equal(r.response, c[i].resp);
        else { assert_null(r.response); assert_true(r.reason[0] != 0); }
        assert_int_equal(r.reply_index, c[i].reply);
        lcx_select_result_free(&r);
    }
    /* the question as the last message is not counted; a request with no reply fails closed */
    const lcx_msg h2[] = {U("write a poem about owls"), A("O1"), U("write a poem about owls"),
                          U("the 2nd poem about owls")};
    lcx_select_result r;
    assert_int_equal(lcx_select(h2, 4, h2[3].content, h2[3].len, &r), 0);
    assert_int_equal(r.status, LCX_SEL_NO_REPLY);
    lcx_select_result_free(&r);
    assert_int_equal(lcx_select(h2, 4, "the 1st poem about owls", 23, &r), 0);
    assert_int_equal(r.status, LCX_SEL_OK);
    assert_string_equal(r.response, "O1");
    lcx_select_result_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parser_table),
        cmocka_unit_test(test_request_parse),
        cmocka_unit_test(test_select),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
