/* difflib parity: our C SequenceMatcher.ratio() against /usr/bin/python3's difflib on
 * >= 10,000 deterministic random and adversarial pairs (Release; fewer/shorter under the
 * sanitizers, or LCX_DIFFLIB_PAIRS=N). Python computes all ratios in ONE process from a
 * batch file; results are compared as exact doubles (float.hex round trip), tolerance 1e-12. */
#include "testutil.h"
#include "eval/lcx_eval.h"
#include "util/util.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__SANITIZE_ADDRESS__)
#define DEFAULT_PAIRS 1500
#define MAX_LEN 6000
#else
#define DEFAULT_PAIRS 10400
#define MAX_LEN 20000
#endif

static uint64_t rng_state;
static uint64_t rnd(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static size_t rndn(size_t n) { return n ? (size_t)(rnd() % n) : 0; }

/* log-uniform length in [0, max] with extra mass at small sizes; 85 % of draws stop at
 * 4,000 so CPython's share of the test time stays small while long pairs still occur */
static size_t rnd_len(size_t max)
{
    if (rndn(10) == 0) return rndn(4);
    if (max > 4000 && rndn(100) < 85) max = 4000;
    double x = exp(log((double)max + 1) * ((double)rndn(1000000) / 1e6));
    return (size_t)x > max ? max : (size_t)x;
}

static void put_cp(lcx_buf *b, uint32_t c)
{
    char t[4];
    int n;
    if (c < 0x80) { t[0] = (char)c; n = 1; }
    else if (c < 0x800) { t[0] = (char)(0xc0 | c >> 6); t[1] = (char)(0x80 | (c & 63)); n = 2; }
    else if (c < 0x10000) {
        t[0] = (char)(0xe0 | c >> 12); t[1] = (char)(0x80 | ((c >> 6) & 63));
        t[2] = (char)(0x80 | (c & 63)); n = 3;
    } else {
        t[0] = (char)(0xf0 | c >> 18); t[1] = (char)(0x80 | ((c >> 12) & 63));
        t[2] = (char)(0x80 | ((c >> 6) & 63)); t[3] = (char)(0x80 | (c & 63)); n = 4;
    }
    lcx__buf_append(b, t, n);
}

static const uint32_t uni_pool[] = {'a', 'b', 'c', ' ', 'e', 0xe9, 0xfc, 0x3b1, 0x3b2, 0x416,
                                    0x4e2d, 0x6587, 0x65e5, 0x1f600, 0x1f680, 0x10348, '\n', '"',
                                    '\\', 0x7f, 0x2028, 0xfeff};

static char *hay;
static size_t hay_len;

/* one random string of `len` code points, style s */
static void gen_str(lcx_buf *b, int style, size_t len, size_t alpha)
{
    switch (style) {
    case 0: /* small alphabet: many popular elements */
        for (size_t i = 0; i < len; i++) put_cp(b, 'a' + (uint32_t)rndn(alpha));
        break;
    case 1: /* unicode mix */
        for (size_t i = 0; i < len; i++) put_cp(b, uni_pool[rndn(LCX_ARRAY_LEN(uni_pool))]);
        break;
    case 2: { /* periodic repeats with rare breaks */
        size_t per = 1 + rndn(7);
        char unit[8];
        for (size_t k = 0; k < per; k++) unit[k] = (char)('a' + rndn(3));
        for (size_t i = 0; i < len; i++) {
            if (rndn(200) == 0) put_cp(b, 'X' + (uint32_t)rndn(3));
            else put_cp(b, (uint32_t)unit[i % per]);
        }
        break;
    }
    default: /* English prose from the haystack (ASCII-ish), or random letters without it */
        if (hay_len > len + 1) {
            size_t off = rndn(hay_len - len);
            /* keep UTF-8 boundaries: step off continuation bytes */
            while (off < hay_len && ((unsigned char)hay[off] & 0xc0) == 0x80) off++;
            size_t end = LCX_MIN(off + len, hay_len);
            while (end < hay_len && ((unsigned char)hay[end] & 0xc0) == 0x80) end++;
            lcx__buf_append(b, hay + off, end - off);
        } else {
            for (size_t i = 0; i < len; i++) put_cp(b, 'a' + (uint32_t)rndn(26));
        }
    }
}

/* b = a with random edits (copy runs, insert/delete/replace), keeping valid UTF-8 */
static void mutate(lcx_buf *out, const char *a, size_t n, int style, double rate)
{
    size_t i = 0;
    while (i < n) {
        size_t cl = 1;
        unsigned char c = (unsigned char)a[i];
        if (c >= 0xf0) cl = 4; else if (c >= 0xe0) cl = 3; else if (c >= 0xc0) cl = 2;
        double u = (double)rndn(1000000) / 1e6;
        if (u < rate / 3) { i += cl; continue; }                          /* delete */
        if (u < 2 * rate / 3) { gen_str(out, style, 1 + rndn(3), 4); i += cl; continue; } /* replace */
        if (u < rate) gen_str(out, style, 1 + rndn(5), 4);                /* insert */
        lcx__buf_append(out, a + i, cl);
        i += cl;
    }
}

static int write_pair(FILE *f, const char *a, size_t na, const char *b, size_t nb)
{
    lcx_buf l = {0};
    lcx__buf_puts(&l, "{\"a\":");
    lcx__buf_json_str(&l, a, na);
    lcx__buf_puts(&l, ",\"b\":");
    lcx__buf_json_str(&l, b, nb);
    lcx__buf_puts(&l, "}\n");
    int ok = fwrite(l.data, 1, l.len, f) == l.len;
    lcx__buf_free(&l);
    return ok ? 0 : -1;
}

static void load_haystack(void)
{
    const char *fx = getenv("LCX_FIXTURES");
    if (!fx) return;
    const char *names[] = {"addiction.txt", "apple.txt", "avg.txt", "before.txt", "bias.txt"};
    lcx_buf b = {0};
    for (size_t i = 0; i < LCX_ARRAY_LEN(names); i++) {
        char p[4096], *d = NULL;
        size_t n = 0;
        snprintf(p, sizeof p, "%s/haystack/paul_graham/%s", fx, names[i]);
        if (lcx__read_file(p, 1 << 22, &d, &n) == 0) { lcx__buf_append(&b, d, n); free(d); }
    }
    hay = b.data;
    hay_len = b.len;
}

static void test_known_values(void **st)
{
    double r;
    assert_int_equal(lcx__seqmatch_ratio("abcd", 4, "bcde", 4, &r), 0);
    assert_true(r == 0.75);
    assert_int_equal(lcx__seqmatch_ratio("", 0, "", 0, &r), 0);
    assert_true(r == 1.0);
    assert_int_equal(lcx__seqmatch_ratio("a", 1, "", 0, &r), 0);
    assert_true(r == 0.0);
    /* difflib docs example: qabxcd vs abycdf -> 2*5/12 ... blocks ab, cd = 4 → 8/12 */
    assert_int_equal(lcx__seqmatch_ratio("qabxcd", 6, "abycdf", 6, &r), 0);
    assert_true(fabs(r - 8.0 / 12.0) < 1e-15);
    /* grade: hash required, stripped from both */
    assert_int_equal(lcx__mrcr_grade("HASHabc", "HASHabc", "HASH", &r), 0);
    assert_true(r == 1.0);
    assert_int_equal(lcx__mrcr_grade("abc", "HASHabc", "HASH", &r), 0);
    assert_true(r == 0.0);
    assert_int_equal(lcx__mrcr_grade("HASH", "HASHabcd", "HASH", &r), 0);
    assert_true(r == 0.0);
    assert_int_equal(lcx__mrcr_grade("HASHabcd", "HASHbcde", "HASH", &r), 0);
    assert_true(r == 0.75);
    /* code points, not bytes: é vs e differ as one element each */
    assert_int_equal(lcx__seqmatch_ratio("\xc3\xa9t\xc3\xa9", 5, "ete", 3, &r), 0);
    assert_true(fabs(r - 2.0 / 6.0) < 1e-15);
}

static void test_python_parity(void **st)
{
    const char *py = getenv("LCX_PY");
    if (!py) py = "/usr/bin/python3";
    size_t npairs = DEFAULT_PAIRS;
    const char *e = getenv("LCX_DIFFLIB_PAIRS");
    if (e && atol(e) > 0) npairs = (size_t)atol(e);
    load_haystack();
    char *dir = tu_tmpdir();
    char in_path[4096], out_path[4096], py_path[4096];
    snprintf(in_path, sizeof in_path, "%s/pairs.jsonl", dir);
    snprintf(out_path, sizeof out_path, "%s/ratios.txt", dir);
    snprintf(py_path, sizeof py_path, "%s/ref.py", dir);
    const char *script =
        "import sys, json, difflib\n"
        "with open(sys.argv[1], encoding='utf-8') as f, open(sys.argv[2], 'w') as o:\n"
        "    for line in f:\n"
        "        d = json.loads(line)\n"
        "        o.write(float.hex(difflib.SequenceMatcher(None, d['a'], d['b']).ratio()) + '\\n')\n";
    assert_int_equal(tu_write(py_path, script, strlen(script)), 0);

    rng_state = 0x5eed2024;
    FILE *f = fopen(in_path, "w");
    assert_non_null(f);
    char **as = calloc(npairs, sizeof *as), **bs = calloc(npairs, sizeof *bs);
    size_t *nas = calloc(npairs, sizeof *nas), *nbs = calloc(npairs, sizeof *nbs);
    assert_true(as && bs && nas && nbs);
    for (size_t p = 0; p < npairs; p++) {
        lcx_buf A = {0}, B = {0};
        int style = (int)rndn(4);
        size_t alpha = 2 + rndn(24);
        int kind = (int)rndn(10);
        size_t la = rnd_len(MAX_LEN);
        if (p < 64) {
            /* adversarial boundaries: len(b) around the autojunk threshold 200, and counts
             * right at n//100+1 */
            size_t lb = 196 + p % 8;
            gen_str(&A, (int)(p % 4), 150 + rndn(150), 2 + p % 5);
            gen_str(&B, (int)(p % 4), lb, 2 + p % 5);
        } else if (p < 80) {
            /* empty and tiny */
            gen_str(&A, style, p % 3, alpha);
            gen_str(&B, style, (p / 3) % 3, alpha);
        } else if (p < 96) {
            /* identical */
            gen_str(&A, style, la, alpha);
            lcx__buf_append(&B, A.data ? A.data : "", A.len);
        } else if (kind < 5) {
            /* b is an edited copy of a: the realistic grading case */
            gen_str(&A, style, la, alpha);
            double rate = (double)(1 + rndn(300)) / 1000.0;
            mutate(&B, A.data ? A.data : "", A.len, style, rate);
        } else if (kind < 7) {
            /* shared middle with different flanks */
            lcx_buf mid = {0};
            gen_str(&mid, style, la / 2, alpha);
            gen_str(&A, style, rndn(la / 2 + 1), alpha);
            lcx__buf_append(&A, mid.data ? mid.data : "", mid.len);
            gen_str(&B, (int)rndn(4), rndn(la / 2 + 1), alpha);
            lcx__buf_append(&B, mid.data ? mid.data : "", mid.len);
            gen_str(&B, style, rndn(la / 4 + 1), alpha);
            lcx__buf_free(&mid);
        } else {
            /* independent strings, possibly very different lengths */
            gen_str(&A, style, la, alpha);
            gen_str(&B, (int)rndn(4), rnd_len(MAX_LEN), alpha);
        }
        if (!A.data) lcx__buf_puts(&A, "");
        if (!B.data) lcx__buf_puts(&B, "");
        if (rndn(2)) { lcx_buf t = A; A = B; B = t; }
        assert_int_equal(write_pair(f, A.data, A.len, B.data, B.len), 0);
        as[p] = A.data; nas[p] = A.len;
        bs[p] = B.data; nbs[p] = B.len;
    }
    fclose(f);

    char cmd[16384 + 64];
    snprintf(cmd, sizeof cmd, "'%s' '%s' '%s' '%s'", py, py_path, in_path, out_path);
    char *pyout = NULL;
    int rc = tu_run(cmd, &pyout);
    free(pyout);
    assert_int_equal(rc, 0);
    char *ref = NULL;
    size_t ref_len = 0;
    assert_int_equal(lcx__read_file(out_path, 0, &ref, &ref_len), 0);

    char *save = NULL, *line = strtok_r(ref, "\n", &save);
    size_t n_exact = 0, n_bad = 0;
    for (size_t p = 0; p < npairs; p++) {
        assert_non_null(line);
        double want = strtod(line, NULL), got = -1;
        assert_int_equal(lcx__seqmatch_ratio(as[p], nas[p], bs[p], nbs[p], &got), 0);
        if (got == want) n_exact++;
        if (!(fabs(got - want) <= 1e-12)) {
            if (n_bad++ < 5)
                fprintf(stderr, "pair %zu: C %.17g python %.17g (len %zu/%zu bytes)\n", p, got,
                        want, nas[p], nbs[p]);
        }
        line = strtok_r(NULL, "\n", &save);
        free(as[p]);
        free(bs[p]);
    }
    fprintf(stderr, "difflib parity: %zu pairs, %zu bit-identical, %zu off\n", npairs, n_exact, n_bad);
    assert_int_equal(n_bad, 0);
    free(ref);
    free(as); free(bs); free(nas); free(nbs);
    free(hay);
    tu_rmrf(dir);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_known_values),
        cmocka_unit_test(test_python_parity),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
