/* Embedder interface and the weight-free default ("hash embedder").
 *
 * Idea: no model weights can be shipped, yet rescue queries ask for exact facts ("the
 * access code for Project NOVA") whose answers sit among thousands of similar filler
 * spans. A signed feature-hashing embedder (Weinberger et al. 2009) turns the lexical
 * features that matter into a fixed-size dense vector whose inner product approximates
 * the weighted count of shared features:
 *
 *   feature                                   weight   why
 *   word unigram (case-folded, not stopword)   1.0     topical overlap
 *   number ("481729", "2024-01-15")            2.0     exact facts: rare and decisive
 *   whole identifier ("parse_header")          1.5     exact symbol match
 *   identifier part ("parse", "header")        0.6     partial symbol match, camel/snake
 *   bigram of consecutive whole tokens          0.7     phrase / word order ("project nova")
 *   char 3-grams of words ≥ 4 bytes             0.5/√n  morphology ("codes" ~ "code"), typos
 *   (all token kinds share one hash space: the query word "parse" meets the part "parse")
 *     (with < > boundary marks, n = 3-grams in the word; numbers get none: 481728 ≠ 481729)
 *
 * Each feature hash h (64-bit) picks bucket ((h>>32)·dim)>>32 and sign ±1 from bit 0, so
 * collisions cancel in expectation instead of adding up. The vector is L2-normalised;
 * an empty text (or one of stopwords only) gives the zero vector (cosine 0 with all).
 *
 * Failure modes: in dim 256, two unrelated texts have cosine ~N(0, 1/256) from collisions,
 * so over 20k spans the best unrelated span reaches ~0.25; exact-fact spans sharing 3+
 * query features score well above that. Paraphrases with no shared words are not found
 * (that is what a real encoder plugged in through lcx_embedder_new is for).
 *
 * The fingerprint names every knob above plus the tokenizer/stopword versions; changing
 * any of them must change K_VERSION so that old stores are refused, not mis-searched. */
#include "embed/embed.h"
#include "embed/hfeat.h"
#include "text/text.h"
#include "util/util.h"
#include <immintrin.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


int lcx_embedder_new(const lcx_embedder_ops *ops, void *self, int dim, const char *fingerprint,
                     lcx_embedder **out)
{
    if (out) *out = NULL;
    if (!ops || !ops->embed || !out || dim < 1 || dim > LCX_DIM_MAX || !fingerprint || !*fingerprint ||
        strlen(fingerprint) > LCX_FP_MAX) {
        if (ops && ops->destroy) ops->destroy(self);
        return LCX_EINVAL;
    }
    lcx_embedder *e = calloc(1, sizeof *e);
    if (!e) {
        if (ops->destroy) ops->destroy(self);
        return LCX_ENOMEM;
    }
    e->ops = *ops;
    e->self = self;
    e->dim = dim;
    snprintf(e->fp, sizeof e->fp, "%s", fingerprint);
    *out = e;
    return LCX_OK;
}

void lcx_embedder_free(lcx_embedder *e)
{
    if (!e) return;
    if (e->ops.destroy) e->ops.destroy(e->self);
    free(e);
}

int lcx_embedder_dim(const lcx_embedder *e) { return e ? e->dim : 0; }
const char *lcx_embedder_fingerprint(const lcx_embedder *e) { return e ? e->fp : ""; }

int lcx_embed(const lcx_embedder *e, const char *const *texts, const size_t *lens, int n, float *out)
{
    if (!e || n < 0 || (n && (!texts || !lens || !out))) return LCX_EINVAL;
    if (n == 0) return 0;
    return e->ops.embed(e->self, texts, lens, n, out);
}

/* ---- the hash embedder */
typedef struct {
    int dim;
} hash_emb;

void lcx__l2_normalise_ref(float *v, uint32_t dim)
{
    double ss = 0;
    for (uint32_t k = 0; k < dim; k++) ss += (double)v[k] * v[k];
    if (ss > 0) {
        float inv = (float)(1.0 / sqrt(ss));
        for (uint32_t k = 0; k < dim; k++) v[k] *= inv;
    }
}

/* = lcx__l2_normalise_ref bit for bit. The reference sums the squares in order, one
 * dependent double add after another (~3 cycles each: ~800 cycles at 256 dims, hot: once
 * per ingested span). Here 4 lanes sum them; the result can differ from the ordered sum
 * only in the last bits, and the scale the reference keeps is (float)(1/sqrt(ss)): that
 * float is the same unless 1/sqrt(ss) lies within the error bound of a float rounding
 * midpoint — then the ordered sum is done as well. Bound: both sums of n non-negative terms
 * are within (n−1)·u·S of the exact S (u = 2^-53), so they differ by ≤ 2(n−1)·u·S, and
 * 1/sqrt moves by half that relatively, plus one rounding each for sqrt and the division:
 * |r − r_ref| ≤ (n + 3)·u·r; (4n + 16)·u·r is used. A float square is exact in double, so
 * the squares themselves are the reference's. */
void lcx__l2_normalise(float *v, uint32_t dim)
{
    __m256d acc = _mm256_setzero_pd();
    uint32_t k = 0;
    for (; k + 4 <= dim; k += 4) {
        __m256d d = _mm256_cvtps_pd(_mm_loadu_ps(v + k));
        acc = _mm256_add_pd(acc, _mm256_mul_pd(d, d));
    }
    __m128d h = _mm_add_pd(_mm256_castpd256_pd128(acc), _mm256_extractf128_pd(acc, 1));
    double ss = _mm_cvtsd_f64(_mm_add_sd(h, _mm_unpackhi_pd(h, h)));
    for (; k < dim; k++) ss += (double)v[k] * v[k];
    if (!(ss > 0)) return;   /* all zero: so is the ordered sum */
    double r = 1.0 / sqrt(ss), m = (4.0 * dim + 16.0) * 0x1p-53 * r;
    float inv = (float)r, dn = inv, up = inv;   /* its neighbours (positive finite: bits ± 1) */
    uint32_t b;
    memcpy(&b, &inv, 4);
    b--;
    memcpy(&dn, &b, 4);
    b += 2;
    memcpy(&up, &b, 4);
    double lo = ((double)inv + dn) / 2, hi = ((double)inv + up) / 2;   /* the rounding midpoints: exact */
    if (!(inv > 0 && inv < 0x1.fffffep127f && r - m > lo && r + m < hi)) {   /* near one: the ordered sum decides */
        ss = 0;
        for (k = 0; k < dim; k++) ss += (double)v[k] * v[k];
        inv = (float)(1.0 / sqrt(ss));
    }
    const __m256 iv = _mm256_set1_ps(inv);
    k = 0;
    for (; k + 8 <= dim; k += 8) _mm256_storeu_ps(v + k, _mm256_mul_ps(_mm256_loadu_ps(v + k), iv));
    for (; k < dim; k++) v[k] *= inv;
}

static int on_token(const char *t, size_t n, int kind, void *ud)
{
    if (kind == LCX_TOK_WORD && lcx__stopword_inl(t, n)) return 0;
    lcx__hfeat_token_inl(ud, t, n, kind, lcx__hash64_inl(t, n, 0));
    return 0;
}

static int hash_embed(void *self, const char *const *texts, const size_t *lens, int n, float *out)
{
    hash_emb *he = self;
    uint32_t dim = (uint32_t)he->dim;
    for (int i = 0; i < n; i++) {
        float *v = out + (size_t)i * dim;   /* (dim) */
        memset(v, 0, dim * sizeof *v);
        if (!texts[i] && lens[i]) return LCX_EINVAL;
        lcx__hfeat c = {v, dim, 0};
        if (lens[i]) {
            int rc = lcx_tokenize(texts[i], lens[i], on_token, &c);
            if (rc < 0) return rc;
        }
        lcx__l2_normalise(v, dim);
    }
    return 0;
}

static void hash_destroy(void *self) { free(self); }

int lcx__is_hash_embedder(const lcx_embedder *e) { return e && e->ops.embed == hash_embed; }

int lcx_embedder_hash_new(int dim, lcx_embedder **out)
{
    if (out) *out = NULL;
    if (!out) return LCX_EINVAL;
    if (dim == 0) dim = 256;
    if (dim < 8 || dim > LCX_DIM_MAX) return LCX_EINVAL;
    hash_emb *he = calloc(1, sizeof *he);
    if (!he) return LCX_ENOMEM;
    he->dim = dim;
    static const lcx_embedder_ops ops = {hash_embed, hash_destroy};
    char fp[LCX_FP_MAX + 1];
    snprintf(fp, sizeof fp, "lcx-hash/v%d dim=%d w=1,2,1.5,0.6 bi=0.7 c3=0.5 tok=v1 stop=v1", K_VERSION, dim);
    return lcx_embedder_new(&ops, he, dim, fp, out);
}
