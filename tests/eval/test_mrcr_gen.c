/* MRCR records and generator: JSONL round trip, bin edges (every n_chars in exactly one bin,
 * out-of-range → "other"), malformed lines rejected, and the generator's determinism and
 * structure (same seed → same bytes; needles counted; answer = hash + target reply). */
#include "testutil.h"
#include "eval/lcx_eval.h"
#include "util/util.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *hay_dir(void)
{
    const char *fx = getenv("LCX_FIXTURES");
    if (!fx) return NULL;
    char *p = malloc(strlen(fx) + 64);
    sprintf(p, "%s/haystack/paul_graham", fx);
    return p;
}

static char *rec_bytes(const lcx_mrcr_rec *r, size_t *n)
{
    char *buf = NULL;
    FILE *f = open_memstream(&buf, n);
    assert_non_null(f);
    assert_int_equal(lcx__mrcr_write_line(f, r), 0);
    fclose(f);
    return buf;
}

static void test_bins(void **st)
{
    assert_int_equal(lcx__mrcr_bin_of(16383), LCX_MRCR_BIN_OTHER);
    assert_int_equal(lcx__mrcr_bin_of(16384), 0);
    assert_int_equal(lcx__mrcr_bin_of(32767), 0);
    assert_int_equal(lcx__mrcr_bin_of(32768), 1);
    assert_int_equal(lcx__mrcr_bin_of(2097151), 6);
    assert_int_equal(lcx__mrcr_bin_of(2097152), 7);
    assert_int_equal(lcx__mrcr_bin_of(5 * 1048576 - 1), 7);
    assert_int_equal(lcx__mrcr_bin_of(5 * 1048576), LCX_MRCR_BIN_OTHER);
    assert_int_equal(lcx__mrcr_bin_of(0), LCX_MRCR_BIN_OTHER);
    /* every value lands in exactly one bin: ranges tile [16K, 5M) */
    for (int b = 0; b + 1 < LCX_MRCR_NBINS; b++) {
        long lo, hi, lo2, hi2;
        lcx__mrcr_bin_range(b, &lo, &hi);
        lcx__mrcr_bin_range(b + 1, &lo2, &hi2);
        assert_true(hi == lo2 && lo < hi);
    }
    assert_int_equal(lcx__mrcr_bin_parse("8k"), 0);
    assert_int_equal(lcx__mrcr_bin_parse("1M"), 7);
    assert_int_equal(lcx__mrcr_bin_parse("2m"), LCX_EINVAL);
    assert_string_equal(lcx__mrcr_bin_name(LCX_MRCR_BIN_OTHER), "other");
}

static void test_parse_reject(void **st)
{
    lcx_mrcr_rec r;
    char err[256];
    const char *good =
        "{\"prompt\": \"[{\\\"role\\\": \\\"user\\\", \\\"content\\\": \\\"write a poem about x\\\"}, "
        "{\\\"role\\\": \\\"assistant\\\", \\\"content\\\": \\\"poem\\\"}, "
        "{\\\"role\\\": \\\"user\\\", \\\"content\\\": \\\"Prepend h1 to the 1st poem\\\"}]\", "
        "\"answer\": \"h1poem\", \"random_string_to_prepend\": \"h1\", \"n_needles\": 2, "
        "\"desired_msg_index\": 0, \"total_messages\": 3, \"n_chars\": 20}";
    assert_int_equal(lcx__mrcr_parse_line(good, strlen(good), &r, err, sizeof err), 0);
    assert_int_equal(r.n_msgs, 3);
    assert_string_equal(r.msgs[0].content, "write a poem about x");
    lcx__mrcr_rec_free(&r);
    const char *bad[] = {
        "{}", "[1]", "{\"prompt\": 3}", "not json",
        "{\"prompt\": \"[{\\\"role\\\": \\\"user\\\"}]\", \"answer\": \"a\", \"random_string_to_prepend\": \"h\", \"n_needles\": 2, \"desired_msg_index\": 1, \"total_messages\": 1, \"n_chars\": 1}",
        "{\"prompt\": [{\"role\": \"user\", \"content\": \"x\"}], \"answer\": 5, \"random_string_to_prepend\": \"h\", \"n_needles\": 2, \"desired_msg_index\": 1, \"total_messages\": 1, \"n_chars\": 1}",
        "{\"prompt\": [{\"role\": \"user\", \"content\": \"x\"}], \"answer\": \"a\", \"random_string_to_prepend\": \"h\", \"n_needles\": 2.5, \"desired_msg_index\": 1, \"total_messages\": 1, \"n_chars\": 1}",
        "{\"prompt\": [], \"answer\": \"a\", \"random_string_to_prepend\": \"h\", \"n_needles\": 2, \"desired_msg_index\": 1, \"total_messages\": 1, \"n_chars\": 1}",
        /* desired_msg_index must name a user request that has a reply after it */
        "{\"prompt\": [{\"role\": \"user\", \"content\": \"a\"}, {\"role\": \"assistant\", \"content\": \"b\"}, {\"role\": \"user\", \"content\": \"q\"}], \"answer\": \"hb\", \"random_string_to_prepend\": \"h\", \"n_needles\": 2, \"desired_msg_index\": 1, \"total_messages\": 3, \"n_chars\": 1}",
        "{\"prompt\": [{\"role\": \"user\", \"content\": \"a\"}, {\"role\": \"assistant\", \"content\": \"b\"}, {\"role\": \"user\", \"content\": \"q\"}], \"answer\": \"hb\", \"random_string_to_prepend\": \"h\", \"n_needles\": 2, \"desired_msg_index\": 2, \"total_messages\": 3, \"n_chars\": 1}",
    };
    for (size_t i = 0; i < LCX_ARRAY_LEN(bad); i++) {
        err[0] = 0;
        assert_int_not_equal(lcx__mrcr_parse_line(bad[i], strlen(bad[i]), &r, err, sizeof err), 0);
        assert_true(err[0] != 0);
    }
}

static size_t count_needles(const lcx_mrcr_rec *r)
{
    /* the final question names format/topic: "... to the Nth (1 indexed) F about T. Do ..." */
    const char *q = r->msgs[r->n_msgs - 1].content;
    const char *p = strstr(q, "(1 indexed) ");
    assert_non_null(p);
    p += 12;
    const char *e = strstr(p, ". Do not include");
    assert_non_null(e);
    char want[512];
    int n = snprintf(want, sizeof want, "%.*s", (int)(e - p), p);
    assert_true(n > 0 && n < (int)sizeof want);
    size_t cnt = 0;
    for (size_t i = 0; i + 1 < r->n_msgs; i++) {
        if (strcmp(r->msgs[i].role, "user")) continue;
        const char *last = strrchr(r->msgs[i].content, '\n');
        last = last ? last + 1 : r->msgs[i].content;
        const char *w = strstr(last, "write a");
        if (!w) continue;
        const char *sp = strchr(w + 6, ' ');
        if (sp && !strcmp(sp + 1, want)) cnt++;
    }
    return cnt;
}

static void test_generator(void **st)
{
    char *dir = hay_dir();
    if (!dir) skip();
    lcx_mrcr_gen *g = NULL;
    int rc = lcx__mrcr_gen_open(dir, &g);
    if (rc == LCX_ENOTFOUND) { free(dir); skip(); }
    assert_int_equal(rc, 0);
    const int needles[] = {2, 4, 8};
    for (int bin = 0; bin < 4; bin++) {
        for (size_t k = 0; k < 3; k++) {
            for (long idx = 0; idx < 3; idx++) {
                lcx_mrcr_rec a, b, c;
                assert_int_equal(lcx__mrcr_gen_record(g, 42, needles[k], bin, idx, &a), 0);
                assert_int_equal(lcx__mrcr_gen_record(g, 42, needles[k], bin, idx, &b), 0);
                assert_int_equal(lcx__mrcr_gen_record(g, 43, needles[k], bin, idx, &c), 0);
                size_t na, nb, nc;
                char *ba = rec_bytes(&a, &na), *bb = rec_bytes(&b, &nb), *bc = rec_bytes(&c, &nc);
                assert_true(na == nb && !memcmp(ba, bb, na));        /* same seed → same bytes */
                assert_false(na == nc && !memcmp(ba, bc, na));       /* other seed → other data */
                assert_int_equal(lcx__mrcr_bin_of(a.n_chars), bin);
                assert_int_equal(a.n_needles, needles[k]);
                assert_int_equal(a.total_messages, (long)a.n_msgs);
                assert_int_equal(count_needles(&a), (size_t)needles[k]);
                /* desired_msg_index = the user request; answer = hash + the reply after it */
                assert_true(a.desired_msg_index >= 0 && (size_t)a.desired_msg_index + 1 < a.n_msgs);
                assert_string_equal(a.msgs[a.desired_msg_index].role, "user");
                const lcx_mrcr_msg *t = &a.msgs[a.desired_msg_index + 1];
                assert_string_equal(t->role, "assistant");
                assert_int_equal(strncmp(a.answer, a.hash, 10), 0);
                assert_string_equal(a.answer + 10, t->content);
                assert_int_equal(strlen(a.hash), 10);
                assert_non_null(strstr(a.msgs[a.n_msgs - 1].content, a.hash));
                /* few-shot preamble leads the first user turn */
                assert_non_null(strstr(a.msgs[0].content, "======EXAMPLE======"));
                /* round trip through JSONL */
                lcx_mrcr_rec p;
                char err[256];
                assert_int_equal(lcx__mrcr_parse_line(ba, na - 1, &p, err, sizeof err), 0);
                size_t np;
                char *bp = rec_bytes(&p, &np);
                assert_true(np == na && !memcmp(ba, bp, na));
                free(ba); free(bb); free(bc); free(bp);
                lcx__mrcr_rec_free(&a); lcx__mrcr_rec_free(&b); lcx__mrcr_rec_free(&c);
                lcx__mrcr_rec_free(&p);
            }
        }
    }
    lcx__mrcr_gen_close(g);
    free(dir);
}

/* A record written by hand in openai/mrcr's convention (desired_msg_index = the user request
 * of the target; the answer is the reply after it): the selector copies that reply and
 * recall@K counts it as found. */
static void test_openai_index_convention(void **st)
{
    const char *line =
        "{\"prompt\": [{\"role\": \"user\", \"content\": \"write a poem about tapirs\"}, "
        "{\"role\": \"assistant\", \"content\": \"Tapirs wander slowly.\"}, "
        "{\"role\": \"user\", \"content\": \"write a poem about tapirs\"}, "
        "{\"role\": \"assistant\", \"content\": \"The second tapir poem.\"}, "
        "{\"role\": \"user\", \"content\": \"write a story about otters\"}, "
        "{\"role\": \"assistant\", \"content\": \"Otters hold hands.\"}, "
        "{\"role\": \"user\", \"content\": \"Prepend aB3xY9qZ0w to the 2nd (1 indexed) poem about tapirs. "
        "Do not include any other text in your response.\"}], "
        "\"answer\": \"aB3xY9qZ0wThe second tapir poem.\", \"random_string_to_prepend\": \"aB3xY9qZ0w\", "
        "\"n_needles\": 2, \"desired_msg_index\": 2, \"total_messages\": 7, \"n_chars\": 300}";
    lcx_mrcr_rec r;
    char err[256];
    assert_int_equal(lcx__mrcr_parse_line(line, strlen(line), &r, err, sizeof err), 0);
    lcx_mrcr_eval_opts o = {.recipe = LCX_MRCR_RECIPE_SELECTOR, .top_k = 8};
    lcx_mrcr_outcome out;
    assert_int_equal(lcx__mrcr_eval_one(&r, &o, &out), 0);
    assert_true(out.n_retrieved >= 1);
    assert_int_equal(out.retrieved[0], 3);          /* assistant indices are reported */
    assert_int_equal(out.target_hit, 1);
    assert_true(out.score > 0.999);
    lcx__mrcr_outcome_free(&out);
    lcx__mrcr_rec_free(&r);
}

static void test_read_file(void **st)
{
    char *dir = tu_tmpdir();
    char path[4096];
    snprintf(path, sizeof path, "%s/x.jsonl", dir);
    const char *txt =
        "{\"prompt\": [{\"role\": \"user\", \"content\": \"a\"}, {\"role\": \"assistant\", \"content\": \"a\"}, {\"role\": \"user\", \"content\": \"q\"}], \"answer\": \"ha\", \"random_string_to_prepend\": \"h\", \"n_needles\": 2, \"desired_msg_index\": 0, \"total_messages\": 3, \"n_chars\": 20000}\n"
        "\n"
        "{\"prompt\": [{\"role\": \"user\", \"content\": \"b\"}, {\"role\": \"assistant\", \"content\": \"b\"}, {\"role\": \"user\", \"content\": \"q\"}], \"answer\": \"hb\", \"random_string_to_prepend\": \"h\", \"n_needles\": 2, \"desired_msg_index\": 0, \"total_messages\": 3, \"n_chars\": 99}\n";
    assert_int_equal(tu_write(path, txt, strlen(txt)), 0);
    lcx_mrcr_set s = {0};
    char err[256];
    assert_int_equal(lcx__mrcr_read_jsonl(path, &s, err, sizeof err), 0);
    assert_int_equal(s.n, 2);
    assert_int_equal(lcx__mrcr_bin_of(s.recs[1].n_chars), LCX_MRCR_BIN_OTHER);
    lcx__mrcr_set_free(&s);
    const char *bad = "{\"prompt\": 1}\n";
    assert_int_equal(tu_write(path, bad, strlen(bad)), 0);
    assert_int_not_equal(lcx__mrcr_read_jsonl(path, &s, err, sizeof err), 0);
    assert_non_null(strstr(err, ":1:"));
    lcx__mrcr_set_free(&s);
    tu_rmrf(dir);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bins),
        cmocka_unit_test(test_parse_reject),
        cmocka_unit_test(test_read_file),
        cmocka_unit_test(test_openai_index_convention),
        cmocka_unit_test(test_generator),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
