/* Embedders: the interface (ownership, errors), and the hash embedder's contract:
 * L2-normalised, deterministic, fingerprinted, and ranking exact facts/ids/numbers. */
#include "testutil.h"
#include "longctx/lcx.h"
#include <math.h>
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hash_basics),
        cmocka_unit_test(test_hash_similarity),
        cmocka_unit_test(test_custom_embedder),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
