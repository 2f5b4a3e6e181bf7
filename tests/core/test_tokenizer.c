/* Tokenizer table tests: each input's full token stream (text + kind) must match exactly. */
#include "testutil.h"
#include "longctx/lcx.h"
#include "text/text.h"
#include "util/util.h"
#include "tokenize_ref.h"
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    char buf[4096];
    size_t len;
    int n;
} sink;

static int collect(const char *t, size_t n, int kind, void *ud)
{
    sink *s = ud;
    static const char kc[] = "WNIP";
    s->len += (size_t)snprintf(s->buf + s->len, sizeof s->buf - s->len, "%s%c:%.*s", s->n ? " " : "", kc[kind],
                               (int)n, t);
    s->n++;
    return 0;
}

static const char *toks(const char *in)
{
    static sink s;
    memset(&s, 0, sizeof s);
    int rc = lcx_tokenize(in, strlen(in), collect, &s);
    assert_int_equal(rc, 0);
    return s.buf;
}

typedef struct {
    const char *in, *want;
} tcase;

static const tcase k_cases[] = {
    {"Hello World", "W:hello W:world"},
    {"access code 481729.", "W:access W:code N:481729"},
    {"90210-ALPHA", "I:90210-alpha P:90210 P:alpha"},
    {"parseHTTPHeader", "I:parsehttpheader P:parse P:http P:header"},
    {"MAX_TEXT_LEN", "I:max_text_len P:max P:text P:len"},
    {"snake_case_name()", "I:snake_case_name P:snake P:case P:name"},
    {"src/index/bm25.c", "I:src/index/bm25.c P:src P:index P:bm P:25 P:c"},
    {"pi is 3.14, e 2.718", "W:pi W:is N:3.14 W:e N:2.718"},
    {"1,000 and 1, 2", "N:1,000 W:and N:1 N:2"},
    {"on 2024-01-15 at 10:30", "W:on N:2024-01-15 P:2024 P:01 P:15 W:at N:10:30 P:10 P:30"},
    {"deployment. Next", "W:deployment W:next"},
    {"a.b", "I:a.b P:a P:b"},
    {"x -- y", "W:x W:y"},
    {"__init__", "I:__init__ P:init"},
    {"_", ""},
    {"iPhone XML", "I:iphone P:i P:phone W:xml"},
    {"Straße ÉCOLE", "W:strasse W:école"},
    {"ΑΒΓ δέλτα", "W:αβγ W:δέλτα"},
    {"東京 tower", "W:東 W:京 W:tower"},
    {"utf8proc_category", "I:utf8proc_category P:utf P:8 P:proc P:category"},
    {"  ", ""},
    {"NOVA's", "W:nova W:s"},
    {"end-", "W:end"},
    {"ABC Abc aBc", "W:abc W:abc I:abc P:a P:bc"},
    {"end. Next, x.y. 42, 7", "W:end W:next I:x.y P:x P:y N:42 N:7"},
    {"caf\xc3\xa9 na\xc3\xafve", "W:caf\xc3\xa9 W:na\xc3\xafve"},
};

static void test_table(void **st)
{
    (void)st;
    int bad = 0;
    for (size_t i = 0; i < sizeof k_cases / sizeof k_cases[0]; i++) {
        const char *got = toks(k_cases[i].in);
        if (strcmp(got, k_cases[i].want)) {
            fprintf(stderr, "case %zu %s\n  want: %s\n  got:  %s\n", i, k_cases[i].in, k_cases[i].want, got);
            bad++;
        }
    }
    assert_int_equal(bad, 0);
}

static int stop_after_two(const char *t, size_t n, int kind, void *ud)
{
    int *c = ud;
    return ++*c == 2 ? 7 : 0;
}

static void test_stop_and_errors(void **st)
{
    (void)st;
    int c = 0;
    assert_int_equal(lcx_tokenize("a b c d", 7, stop_after_two, &c), 7);
    assert_int_equal(c, 2);
    assert_int_equal(lcx_tokenize(NULL, 3, stop_after_two, &c), LCX_EINVAL);
    assert_int_equal(lcx_tokenize("", 0, stop_after_two, &c), 0);
    /* invalid UTF-8 bytes are separators, never a crash */
    assert_string_equal(toks("ab\xff\xfe" "cd\xc3"), "W:ab W:cd");
}

static void test_long_token_cut(void **st)
{
    (void)st;
    char in[400];
    memset(in, 'a', 300);
    in[300] = 0;
    sink s = {0};
    assert_int_equal(lcx_tokenize(in, 300, collect, &s), 0);
    assert_int_equal(s.n, 3);   /* 128 + 128 + 44 */
}

static void test_stopwords(void **st)
{
    (void)st;
    assert_true(lcx__stopword("the", 3));
    assert_true(lcx__stopword("a", 1));
    assert_true(lcx__stopword("yours", 5));
    assert_true(lcx__stopword("with", 4));
    assert_false(lcx__stopword("nova", 4));
    assert_false(lcx__stopword("code", 4));
    assert_false(lcx__stopword("th", 2));
    assert_false(lcx__stopword("", 0));
    /* every listed word is found (the binary search needs a sorted list) */
    const char *all = "a about after all also am an and any are as at be been before being but by can could did "
                      "do does doing during each few for from had has have having he her here hers him his how i "
                      "if in into is it its just me more most my of off on once only or other our ours out over "
                      "own s same she should so some such t than that the their theirs them then there these they "
                      "this those through to too under until up very was we were what when where which while who "
                      "whom why will with would you your yours";
    const char *p = all;
    while (*p) {
        const char *e = strchr(p, ' ');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        if (!lcx__stopword(p, n)) fail_msg("stopword not found: %.*s", (int)n, p);
        p += n + (e ? 1 : 0);
    }
    /* the hashed table agrees with the readable list on every string of ≤ 3 letters and
     * on near misses of the listed words */
    char w[8];
    for (int a = 'a'; a <= 'z'; a++)
        for (int b = 0; b <= 26; b++)
            for (int c = 0; c <= 26; c++) {
                int n = 1;
                w[0] = (char)a;
                if (b) { w[n++] = (char)('a' + b - 1); if (c) w[n++] = (char)('a' + c - 1); }
                if (lcx__stopword(w, (size_t)n) != lcx__stopword_ref(w, (size_t)n)) fail_msg("disagree on %.*s", n, w);
            }
    p = all;
    while (*p) {
        const char *e = strchr(p, ' ');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        memcpy(w, p, n);
        for (size_t i = 0; i < n; i++) {
            char keep = w[i];
            w[i] = (char)(keep == 'z' ? 'a' : keep + 1);
            if (lcx__stopword(w, n) != lcx__stopword_ref(w, n)) fail_msg("disagree on %.*s", (int)n, w);
            w[i] = keep;
        }
        w[n] = 'x';
        assert_false(lcx__stopword(w, n + 1) != lcx__stopword_ref(w, n + 1));
        p += n + (e ? 1 : 0);
    }
}

/* Differential: lcx_tokenize (with every speed change since) against the frozen reference
 * copy (tokenize_ref.h) — all essays in the fixtures, code-like text, and random strings of
 * word characters, joiners, case changes, digits, separators, UTF-8 and invalid bytes
 * (exact-size heap buffers: ASan catches over-reads). 0 mismatches allowed. */
typedef struct {
    char *buf;
    size_t len, cap;
} toklog;

static int log_tok(const char *t, size_t n, int kind, void *ud)
{
    toklog *l = ud;
    if (l->len + n + 8 > l->cap) {
        l->cap = (l->len + n + 8) * 2;
        l->buf = realloc(l->buf, l->cap);
        assert_non_null(l->buf);
    }
    l->buf[l->len++] = (char)('0' + kind);
    l->buf[l->len++] = (char)n;
    memcpy(l->buf + l->len, t, n);
    l->len += n;
    return 0;
}

static void diff_one(const char *t, size_t n, toklog *a, toklog *b)
{
    a->len = b->len = 0;
    char *c = malloc(n ? n : 1);
    memcpy(c, t, n);
    assert_int_equal(lcx_tokenize(c, n, log_tok, a), 0);
    assert_int_equal(tok_ref_tokenize(c, n, log_tok, b), 0);
    if (a->len != b->len || memcmp(a->buf, b->buf, a->len))
        fail_msg("tokenizer differs from the reference on %zu bytes: %.*s", n, (int)(n < 200 ? n : 200), t);
    free(c);
}

static void test_vs_reference(void **st)
{
    (void)st;
    toklog a = {0}, b = {0};
    size_t bytes = 0;
    int texts = 0;
    DIR *d = opendir(tu_fixture("haystack/paul_graham"));
    assert_non_null(d);
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", tu_fixture("haystack/paul_graham"), e->d_name);
        char *data = NULL;
        size_t len = 0;
        if (lcx__read_file(path, 0, &data, &len)) continue;
        for (size_t o = 0; o < len; o += 997) {   /* spans at odd offsets: cuts inside words */
            size_t l = len - o < 1100 ? len - o : 1100;
            diff_one(data + o, l, &a, &b);
            bytes += l;
            texts++;
        }
        free(data);
    }
    closedir(d);
    static const char *alpha[] = {"a", "e", "z", "Q", "X", "0", "7", "_", "-", ".", ":", "/", ",", " ", " ", " ",
                                  "\n", "\t", "'", "(", "ß", "é", "Ä", "東", "データ", "\xff", "\xc3", "\x80",
                                  "the ", "Of ", "parseHTTPHeader", "MAX_LEN", "2024-01-15", "v1.2.3", "a,b",
                                  "1,000", "--", "...", "x::y", "http://a.b/c"};
    uint64_t r = 0x2545f4914f6cdd1dull;
    char buf[2048];
    for (int rep = 0; rep < 60000; rep++) {
        size_t l = 0;
        r ^= r << 13; r ^= r >> 7; r ^= r << 17;
        size_t target = r % (rep % 10 ? 80 : 1200);
        int nal = (int)(sizeof alpha / sizeof *alpha);
        while (l < target) {
            r ^= r << 13; r ^= r >> 7; r ^= r << 17;
            const char *s = (r >> 20) % 10 < 5 ? alpha[(r >> 8) % 5] : alpha[(r >> 8) % (uint64_t)nal];
            size_t sl = strlen(s);
            if (l + sl > sizeof buf) break;
            memcpy(buf + l, s, sl);
            l += sl;
        }
        diff_one(buf, l, &a, &b);
        bytes += l;
        texts++;
    }
    /* code-shaped: long texts (the 64-byte bitmask path needs 64 bytes left) of ASCII word
     * runs of 1–70 characters (across the 64-byte window: runs ≥ 64 take the loop) drawn
     * from skewed alphabets (snake_case, camelCase, UPPER, digits, lone '_'), then one of
     * the ends the path must tell apart: separators, a joiner before a separator or before
     * more word characters, a comma between digits, non-ASCII or invalid bytes */
    static const char *word_al[] = {"abcxyz", "ABCXYZ", "0123456789", "_", "aA0_", "aaaaaaaaaB", "AAAAAAAb",
                                    "a1", "Z9_", "qQ"};
    static const char *ends[] = {" ", " ", " ", "\n", "(", ");", "->", "-", ".", ". ", ",", ", ", ":", "::", "/",
                                 "/*", "'", "é", "\xff", "\xc3", "東", "-x", ".y", ",5", "__", "\t"};
    for (int rep = 0; rep < 6000; rep++) {
        size_t l = 0;
        r ^= r << 13; r ^= r >> 7; r ^= r << 17;
        size_t target = 64 + r % 700;
        while (l + 80 < sizeof buf && l < target) {
            r ^= r << 13; r ^= r >> 7; r ^= r << 17;
            const char *al = word_al[(r >> 4) % (sizeof word_al / sizeof *word_al)];
            size_t al_n = strlen(al), run = 1 + (r >> 12) % ((r >> 40) % 4 ? 16 : 70);
            uint64_t q = r;
            for (size_t k = 0; k < run; k++) {
                q = q * 6364136223846793005ull + 1442695040888963407ull;
                buf[l++] = al[(q >> 33) % al_n];
            }
            const char *en = ends[(r >> 24) % (sizeof ends / sizeof *ends)];
            size_t el = strlen(en);
            memcpy(buf + l, en, el);
            l += el;
        }
        diff_one(buf, l, &a, &b);
        bytes += l;
        texts++;
    }
    /* prose-shaped: long texts of plain words (lower case or Capitalised, 0–20 letters,
     * now and then up to 70: across the 64-byte window of the plain-word path) and what may
     * follow a word there: separators, a joiner or comma before a separator or before more
     * word characters, digits, '_', a case change, non-ASCII and invalid bytes */
    static const char *pends[] = {" ", " ", " ", " ", ", ", ". ", ".\n", "\n", "; ", "(", ") ", "'s ", "-", "--",
                                  "...", ".", ",", ":", "/", "-a", ".b", ",c", "1", "_", "X", "\xe2\x80\x99s ",
                                  "\xc3\xa9 ", "\xff", "\" ", "?\n"};
    for (int rep = 0; rep < 6000; rep++) {
        size_t l = 0;
        r ^= r << 13; r ^= r >> 7; r ^= r << 17;
        size_t target = 64 + r % 1000;
        while (l + 80 < sizeof buf && l < target) {
            r ^= r << 13; r ^= r >> 7; r ^= r << 17;
            size_t run = (r >> 12) % ((r >> 40) % 8 ? 21 : 71);
            uint64_t q = r;
            for (size_t k = 0; k < run; k++) {
                q = q * 6364136223846793005ull + 1442695040888963407ull;
                buf[l++] = (char)((k == 0 && (q >> 60) < 4 ? 'A' : 'a') + (q >> 33) % 26);
            }
            const char *en = pends[(r >> 24) % (sizeof pends / sizeof *pends)];
            size_t el = strlen(en);
            memcpy(buf + l, en, el);
            l += el;
        }
        diff_one(buf, l, &a, &b);
        bytes += l;
        texts++;
    }
    fprintf(stderr, "tokenizer vs frozen reference: %d texts, %zu bytes, 0 mismatches\n", texts, bytes);
    free(a.buf);
    free(b.buf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table),
        cmocka_unit_test(test_vs_reference),
        cmocka_unit_test(test_stop_and_errors),
        cmocka_unit_test(test_long_token_cut),
        cmocka_unit_test(test_stopwords),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
