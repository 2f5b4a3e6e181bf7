/* Sampler: greedy, or top-k -> temperature -> top-p -> draw, with a seeded xorshift64* RNG.
 *
 * Order (as llama.cpp's common default chain minus penalties): top-k keeps the k largest
 * logits, the softmax is taken at temperature T over what is left, top-p keeps the smallest
 * prefix (sorted by probability) whose mass reaches p, then one uniform draw in [0,1) picks
 * by cumulative probability. Greedy (temp <= 0) is a plain argmax with the lowest id on ties,
 * which is what llama.cpp's goldens and llama2.c use. Scratch grows to the largest vocabulary
 * seen, once; sampling afterwards does not allocate. */
#include "longctx/engine.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct { float v; int32_t id; } cand;

struct eng_sampler {
    eng_sampler_params p;
    uint64_t rng;
    cand *c;
    int cap;
};

eng_sampler *eng_sampler_init(const eng_sampler_params *p)
{
    eng_sampler *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    if (p) s->p = *p;
    s->rng = s->p.seed ? s->p.seed : 0x9E3779B97F4A7C15ull;
    return s;
}

void eng_sampler_free(eng_sampler *s)
{
    if (!s) return;
    free(s->c);
    free(s);
}

static double next_unit(eng_sampler *s)
{
    uint64_t x = s->rng;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    s->rng = x;
    return (double)((x * 0x2545F4914F6CDD1Dull) >> 11) * (1.0 / 9007199254740992.0);
}

static int cmp_desc(const void *a, const void *b)
{
    const cand *x = a, *y = b;
    if (x->v != y->v) return x->v < y->v ? 1 : -1;
    return x->id - y->id;
}

int32_t eng_sample(eng_sampler *s, const float *logits, int n)
{
    if (!s || !logits || n <= 0) return LCX_EINVAL;
    if (s->p.temp <= 0) {
        int32_t best = 0;
        for (int i = 1; i < n; i++)
            if (logits[i] > logits[best]) best = i;
        return best;
    }
    if (n > s->cap) {
        cand *c = realloc(s->c, (size_t)n * sizeof *c);
        if (!c) return LCX_ENOMEM;
        s->c = c;
        s->cap = n;
    }
    cand *c = s->c;
    for (int i = 0; i < n; i++) c[i] = (cand){logits[i], i};
    int k = n;
    if (s->p.top_k > 0 && s->p.top_k < n) k = s->p.top_k;
    /* partial selection is enough for top-k, a full sort is needed for top-p */
    qsort(c, n, sizeof *c, cmp_desc);
    const float mx = c[0].v;
    double sum = 0;
    for (int i = 0; i < k; i++) {
        c[i].v = expf((c[i].v - mx) / s->p.temp);
        sum += c[i].v;
    }
    for (int i = 0; i < k; i++) c[i].v = (float)(c[i].v / sum);
    if (s->p.top_p > 0 && s->p.top_p < 1) {
        double cum = 0;
        int keep = k;
        for (int i = 0; i < k; i++) {
            cum += c[i].v;
            if (cum >= s->p.top_p) { keep = i + 1; break; }
        }
        k = keep;
        double z = 0;
        for (int i = 0; i < k; i++) z += c[i].v;
        for (int i = 0; i < k; i++) c[i].v = (float)(c[i].v / z);
    }
    double r = next_unit(s), cum = 0;
    for (int i = 0; i < k; i++) {
        cum += c[i].v;
        if (r < cum) return c[i].id;
    }
    return c[k - 1].id;
}
