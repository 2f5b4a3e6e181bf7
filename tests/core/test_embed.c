/* Embedders: the interface (ownership, errors), and the hash embedder's contract:
 * L2-normalised, deterministic, fingerprinted, and ranking exact facts/ids/numbers. */
#include "testutil.h"
#include "longctx/lcx.h"
#include "embed/embed.h"
#include "embed/hfeat.h"
#include "index/index.h"
#include "util/util.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static float cosv(const lcx_embedder *e, const char *a, const char *b)
{
    int dim = lcx_embedder_dim(e);
    float *x = malloc((size_t)dim * 8);
    const char *t[2] = {a, b};
    size_t l[2] = {strlen(a), strlen(b)};
    assert_int_equal(lcx_embed(e, t, l, 2, x), 0);
    float c = lcx_dot_f32(x, x + dim, (size_t)dim);
    free(x);
    return c;
}

static void test_hash_basics(void **st)
{
    (void)st;
    lcx_embedder *e, *e2;
    assert_int_equal(lcx_embedder_hash_new(0, &e), 0);
    assert_int_equal(lcx_embedder_dim(e), 256);
    assert_non_null(strstr(lcx_embedder_fingerprint(e), "dim=256"));
    assert_int_equal(lcx_embedder_hash_new(384, &e2), 0);
    assert_string_not_equal(lcx_embedder_fingerprint(e), lcx_embedder_fingerprint(e2));
    lcx_embedder_free(e2);
    assert_int_equal(lcx_embedder_hash_new(3, &e2), LCX_EINVAL);
    assert_int_equal(lcx_embedder_hash_new(100000, &e2), LCX_EINVAL);

    float v[3][256];
    const char *t[3] = {"parse the HTTP header of request 481729", "", "the of and"};
    size_t l[3] = {strlen(t[0]), 0, strlen(t[2])};
    assert_int_equal(lcx_embed(e, t, l, 3, &v[0][0]), 0);
    double ss = 0;
    for (int i = 0; i < 256; i++) ss += (double)v[0][i] * v[0][i];
    assert_float_equal(ss, 1.0, 1e-5);
    for (int i = 0; i < 256; i++) assert_true(v[1][i] == 0 && v[2][i] == 0);   /* nothing to hash */
    float w[256];
    assert_int_equal(lcx_embed(e, t, l, 1, w), 0);
    assert_memory_equal(w, v[0], sizeof w);   /* deterministic */
    assert_int_equal(lcx_embed(e, NULL, NULL, 0, NULL), 0);
    assert_int_equal(lcx_embed(NULL, t, l, 1, w), LCX_EINVAL);
    lcx_embedder_free(e);
    lcx_embedder_free(NULL);
}

static void test_hash_similarity(void **st)
{
    (void)st;
    lcx_embedder *e;
    assert_int_equal(lcx_embedder_hash_new(0, &e), 0);
    const char *q = "What is the access code for Project NOVA?";
    const char *fact = "IMPORTANT: Project NOVA was provisioned with access code 481729.";
    const char *filler = "the routine quarterly procedure required careful review of the documented operational records";
    assert_true(cosv(e, q, fact) > cosv(e, q, filler) + 0.2f);
    /* numbers: exact match beats an off-by-one number */
    float same = cosv(e, "code 481729", "the code is 481729"), off = cosv(e, "code 481729", "the code is 481728");
    assert_true(same > off + 0.2f);
    /* identifiers: camelCase query finds the snake_case/whole identifier, and parts match */
    assert_true(cosv(e, "parseHttpHeader", "int parse_http_header(buf *b)") >
                cosv(e, "parseHttpHeader", "int render_html_footer(buf *b)") + 0.2f);
    /* case and morphology */
    assert_true(cosv(e, "NOVA", "nova") > 0.99f);
    assert_true(cosv(e, "deployments", "deployment") > cosv(e, "deployments", "quarterly") + 0.1f);
    lcx_embedder_free(e);
}

typedef struct { int *destroyed; int dim; } my_emb;
static int my_embed(void *self, const char *const *t, const size_t *l, int n, float *out)
{
    my_emb *m = self;
    for (int i = 0; i < n; i++) {
        memset(out + (size_t)i * m->dim, 0, (size_t)m->dim * 4);
        out[(size_t)i * m->dim + (l[i] % m->dim)] = 1;
    }
    return 0;
}
static void my_destroy(void *self) { ++*((my_emb *)self)->destroyed; free(self); }

static void test_custom_embedder(void **st)
{
    (void)st;
    int destroyed = 0;
    lcx_embedder_ops ops = {my_embed, my_destroy};
    my_emb *m = malloc(sizeof *m);
    *m = (my_emb){&destroyed, 16};
    lcx_embedder *e;
    assert_int_equal(lcx_embedder_new(&ops, m, 16, "mine/v1 dim=16", &e), 0);
    assert_string_equal(lcx_embedder_fingerprint(e), "mine/v1 dim=16");
    float v[16];
    const char *t = "abc";
    size_t l = 3;
    assert_int_equal(lcx_embed(e, &t, &l, 1, v), 0);
    assert_true(v[3] == 1);
    lcx_embedder_free(e);
    assert_int_equal(destroyed, 1);
    /* failure still takes ownership */
    m = malloc(sizeof *m);
    *m = (my_emb){&destroyed, 16};
    assert_int_equal(lcx_embedder_new(&ops, m, 0, "x", &e), LCX_EINVAL);
    assert_int_equal(destroyed, 2);
    assert_null(e);
}

/* Golden tripwire: the hash embedder's vectors for fixed texts (three Paul Graham essays
 * cut into 1,000-byte spans, plus code/number/Unicode strings) hash to a constant. A
 * failure means the embedder's OUTPUT changed: bump K_VERSION in src/embed/embed.c (old
 * stores must be refused, not mis-searched) and update the constant. The ingest path
 * (lcx__prep_embed: one tokenization for BM25 + embedding) must give the same bits. */
#define GOLDEN_CRC 0x298a54dbu
static void test_hash_golden(void **st)
{
    (void)st;
    static const char *extra[] = {
        "parseHTTPHeader(req, MAX_TEXT_LEN) returned 481729 at 2024-01-15T10:22:33Z",
        "src/index/bm25.c:120: warning: unused variable 'kb0' [-Wunused-variable]",
        "Straße ÆØÅ naïve café 東京都 データベース ΑΒΓ δέλτα",
        "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa bb",
        "The access code for Project NOVA is 90210-ALPHA; call +1 (555) 010-4477 or 1,000,000.5",
    };
    const char *files[] = {"haystack/paul_graham/addiction.txt", "haystack/paul_graham/aord.txt",
                           "haystack/paul_graham/apple.txt"};
    for (int f = 0; f < 3; f++) (void)tu_fixture(files[f]);   /* a missing fixture skips before anything is allocated */
    lcx_embedder *e;
    assert_int_equal(lcx_embedder_hash_new(0, &e), 0);
    uint32_t crc = 0;
    int n = 0;
    float v[256], w[256];
    lcx__prep p = {0};
    for (int f = 0; f < 3 + 1; f++) {
        char *data = NULL;
        size_t len = 0;
        if (f < 3) {
            assert_int_equal(lcx__read_file(tu_fixture(files[f]), 0, &data, &len), 0);
        }
        size_t step = f < 3 ? 1000 : 0;
        int parts = f < 3 ? (int)((len + step - 1) / step) : (int)(sizeof extra / sizeof *extra);
        for (int i = 0; i < parts; i++) {
            const char *t = f < 3 ? data + (size_t)i * step : extra[i];
            size_t l = f < 3 ? (len - (size_t)i * step < step ? len - (size_t)i * step : step) : strlen(extra[i]);
            assert_int_equal(lcx_embed(e, &t, &l, 1, v), 0);
            assert_int_equal(lcx__prep_embed(&p, e, t, l, w), 0);
            assert_memory_equal(v, w, sizeof v);
            crc = lcx__crc32c(crc, v, sizeof v);
            n++;
        }
        free(data);
    }
    lcx__prep_free(&p);
    lcx_embedder_free(e);
    fprintf(stderr, "hash embedder golden: %d texts, crc32c %#x\n", n, crc);
    assert_int_equal(crc, GOLDEN_CRC);
}

/* The ingest path's token hash (lcx__hash64_tok: the short-token pack passed in) equals
 * lcx__hash64 for every length the tokenizer can produce and beyond, any bytes, any seed
 * (term hashes are persisted). lcx__hash64 is lcx__hash64_inl (util/hash_inl.h), whose
 * output tests/util pins with golden values. */
static void test_hash64_inline(void **st)
{
    (void)st;
    unsigned char buf[256];
    uint64_t r = 88172645463325252ull;
    for (int rep = 0; rep < 20; rep++) {
        for (size_t i = 0; i < sizeof buf; i++) {
            r ^= r << 13; r ^= r >> 7; r ^= r << 17;
            buf[i] = (unsigned char)r;
        }
        for (size_t n = 0; n <= 200; n++) {
            uint64_t seed = rep % 2 ? r : 0;
            size_t off = (size_t)rep % 7;   /* unaligned starts too */
            if (lcx__hash64_inl(buf + off, n, seed) != lcx__hash64(buf + off, n, seed))
                fail_msg("length %zu offset %zu: inline hash differs", n, off);
            /* the token form (seed 0, the short-token pack passed in) */
            uint64_t lo = n < 8 ? lcx__pack_lt8((const char *)buf + off, n) : 0;
            if (lcx__hash64_tok(buf + off, n, lo) != lcx__hash64(buf + off, n, 0))
                fail_msg("length %zu offset %zu: token hash differs", n, off);
        }
    }
}

/* The AVX2 char-3-gram kernel of the ingest/embed path equals the scalar reference bit
 * for bit (same buckets, signs, and float add order), for every token length, random
 * bytes (incl. non-ASCII), and several power-of-two dims; lcx__copy_tok copies exactly. */
static void test_c3_avx2_vs_ref(void **st)
{
    (void)st;
    uint64_t r = 0x243f6a8885a308d3ull;
    static const uint32_t dims[] = {8, 256, 512, 4096};
    for (int di = 0; di < 4; di++) {
        uint32_t dim = dims[di];
        float *a = calloc(dim, 4), *b = calloc(dim, 4);
        char tok[LCX_TOK_MAX + 16];
        for (int rep = 0; rep < 3000; rep++) {
            size_t m = 1 + (size_t)(rep % LCX_TOK_MAX);
            for (size_t i = 0; i < sizeof tok; i++) {
                r ^= r << 13; r ^= r >> 7; r ^= r << 17;
                tok[i] = (char)(rep % 3 ? 'a' + (int)(r % 26) : (int)(r & 0xff));
            }
            float wc = W_CHAR / sqrtf((float)m);
            lcx__hfeat_c3_ref(a, dim, tok + rep % 5, m, wc);
            lcx__hfeat_c3_avx2(b, 64 - __builtin_ctzll(dim), tok + rep % 5, m, wc, rep & 1);
        }
        assert_memory_equal(a, b, dim * 4);
        free(a);
        free(b);
    }
    /* the vectorised L2 normalisation equals its scalar reference bit for bit: every dim
     * to 300, then 300k vectors of 256 dims (the hash embedder's) with mixed magnitudes
     * (hash-feature sums, and spreads of 10^6 that make the two sums' last bits differ) */
    for (uint32_t rep = 0; rep < 300000 + 300; rep++) {
        float x[300], y[300];
        uint32_t dim = rep < 300 ? rep + 1 : 256;
        for (uint32_t k = 0; k < dim; k++) {
            r ^= r << 13; r ^= r >> 7; r ^= r << 17;
            float sc = rep % 4 == 0 ? 0.5f : rep % 4 == 1 ? (k % 3 ? 1e-3f : 7.5e-6f) : (float)(1 + (r >> 40) % 1000000) * 1e-3f;
            x[k] = y[k] = (float)((int64_t)(r % 2000001) - 1000000) * sc;
        }
        lcx__l2_normalise(x, dim);
        lcx__l2_normalise_ref(y, dim);
        if (memcmp(x, y, dim * 4)) fail_msg("l2 normalise differs from the reference (rep %u, dim %u)", rep, dim);
    }
    unsigned char src[LCX_TOK_MAX + 8], dst[LCX_TOK_MAX + 40];
    for (size_t i = 0; i < sizeof src; i++) src[i] = (unsigned char)(i * 37 + 1);
    for (size_t n = 0; n <= LCX_TOK_MAX; n++) {
        memset(dst, 0xee, sizeof dst);
        lcx__copy_tok(dst + 16, src + n % 7, n);
        assert_memory_equal(dst + 16, src + n % 7, n);
        for (size_t i = 0; i < 16; i++) assert_int_equal(dst[i], 0xee);
        for (size_t i = 16 + n; i < sizeof dst; i++) assert_int_equal(dst[i], 0xee);
    }
}

/* Differential: the ingest path's tokenizer instantiation with its callback inlined
 * (lcx__prep_embed) gives the same BM25 terms as lcx__prep_text (lcx_tokenize through a
 * callback pointer) and the same vector bits as lcx_embed, on essays and on random
 * strings of word characters, joiners, case changes, digits and UTF-8 (0 mismatches). */
static void cmp_prep(const lcx__prep *x, const lcx__prep *y)
{
    assert_int_equal(x->dl, y->dl);
    assert_int_equal(x->nt, y->nt);
    for (uint32_t i = 0; i < x->nt; i++) {
        assert_true(x->t[i].hash == y->t[i].hash);
        assert_int_equal(x->t[i].len, y->t[i].len);
        assert_int_equal(x->t[i].tf, y->t[i].tf);
        assert_memory_equal(x->pool + x->t[i].off, y->pool + y->t[i].off, x->t[i].len);
    }
}

static void test_prep_embed_diff(void **st)
{
    (void)st;
    const char *files[] = {"haystack/paul_graham/addiction.txt", "haystack/paul_graham/apple.txt"};
    for (int f = 0; f < 2; f++) (void)tu_fixture(files[f]);   /* a missing fixture skips before anything is allocated */
    lcx_embedder *e;
    assert_int_equal(lcx_embedder_hash_new(0, &e), 0);
    lcx__prep p = {0}, q = {0};
    float v[256], w[256];
    int n = 0;
    for (int f = 0; f < 2; f++) {
        char *data = NULL;
        size_t len = 0;
        assert_int_equal(lcx__read_file(tu_fixture(files[f]), 0, &data, &len), 0);
        for (size_t o = 0; o < len; o += 700) {
            size_t l = len - o < 1000 ? len - o : 1000;
            assert_int_equal(lcx__prep_embed(&p, e, data + o, l, v), 0);
            assert_int_equal(lcx__prep_text(&q, data + o, l), 0);
            cmp_prep(&p, &q);
            const char *t = data + o;
            assert_int_equal(lcx_embed(e, &t, &l, 1, w), 0);
            assert_memory_equal(v, w, sizeof v);
            n++;
        }
        free(data);
    }
    static const char *alpha[] = {"a", "e", "z", "Q", "X", "0", "7", "_", "-", ".", ":", "/", ",", " ", " ", " ",
                                  "\n", "'", "(", "ß", "é", "Ä", "東", "データ", "\xff", "\xc3", "the ", "of ", "Is "};
    uint64_t r = 0x9e3779b97f4a7c15ull;
    char *buf = malloc(4096);
    for (int rep = 0; rep < 4000; rep++) {
        size_t l = 0;
        r ^= r << 13; r ^= r >> 7; r ^= r << 17;
        size_t target = 1 + r % 600;
        while (l < target) {
            r ^= r << 13; r ^= r >> 7; r ^= r << 17;
            /* runs of letters are common (words): pick a letter 60% of the time */
            const char *a = (r >> 20) % 10 < 6 ? alpha[(r >> 8) % 5] : alpha[(r >> 8) % (sizeof alpha / sizeof *alpha)];
            size_t al = strlen(a);
            if (l + al > 4000) break;
            memcpy(buf + l, a, al);
            l += al;
        }
        /* exact-size heap copy: ASan catches any read past the end */
        char *t = malloc(l);
        memcpy(t, buf, l);
        assert_int_equal(lcx__prep_embed(&p, e, t, l, v), 0);
        assert_int_equal(lcx__prep_text(&q, t, l), 0);
        cmp_prep(&p, &q);
        const char *tc = t;
        assert_int_equal(lcx_embed(e, &tc, &l, 1, w), 0);
        assert_memory_equal(v, w, sizeof v);
        free(t);
        n++;
    }
    free(buf);
    fprintf(stderr, "prep_embed vs prep_text + lcx_embed: %d texts, 0 mismatches\n", n);
    lcx__prep_free(&p);
    lcx__prep_free(&q);
    lcx_embedder_free(e);
}

/* One lcx__prep across embedders of different dims, including one that is not a power of
 * two (no per-term 3-gram replay, the scalar reference path): every vector equals
 * lcx_embed's bits, also when the dim changes back. */
static void test_prep_embed_dims(void **st)
{
    (void)st;
    const char *file = "haystack/paul_graham/addiction.txt";
    (void)tu_fixture(file);
    char *data = NULL;
    size_t len = 0;
    assert_int_equal(lcx__read_file(tu_fixture(file), 0, &data, &len), 0);
    static const int dims[] = {256, 512, 256, 200, 128, 256};
    float *v = malloc(512 * sizeof *v), *w = malloc(512 * sizeof *w);
    lcx__prep p = {0};
    int n = 0;
    for (size_t d = 0; d < sizeof dims / sizeof *dims; d++) {
        lcx_embedder *e;
        assert_int_equal(lcx_embedder_hash_new(dims[d], &e), 0);
        for (size_t o = 0; o + 1 < len && o < 12000; o += 1500) {
            size_t l = len - o < 1000 ? len - o : 1000;
            assert_int_equal(lcx__prep_embed(&p, e, data + o, l, v), 0);
            const char *t = data + o;
            assert_int_equal(lcx_embed(e, &t, &l, 1, w), 0);
            assert_memory_equal(v, w, (size_t)dims[d] * sizeof *v);
            n++;
        }
        lcx_embedder_free(e);
    }
    fprintf(stderr, "prep_embed across dims: %d texts, 0 mismatches\n", n);
    lcx__prep_free(&p);
    free(v);
    free(w);
    free(data);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hash_basics),
        cmocka_unit_test(test_hash_golden),
        cmocka_unit_test(test_hash64_inline),
        cmocka_unit_test(test_c3_avx2_vs_ref),
        cmocka_unit_test(test_prep_embed_diff),
        cmocka_unit_test(test_prep_embed_dims),
        cmocka_unit_test(test_hash_similarity),
        cmocka_unit_test(test_custom_embedder),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
