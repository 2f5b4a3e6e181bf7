/* The synthetic /evict/write workload shared by bench_svc and bench_svc_parse: a fixed-seed
 * xorshift, a 20k-word syllable vocabulary drawn Zipf-ish, and 256-word spans with an
 * occasional number. Same seed in both programs, so their bodies are byte-identical.
 * Header-only (static functions): each bench is a single translation unit. */
#ifndef LCX_BENCH_SPANGEN_H
#define LCX_BENCH_SPANGEN_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return rng;
}

#define VOCAB 20000
static char vocab[VOCAB][12];

static void make_vocab(void)
{
    static const char *syl[] = {"ka", "lo", "mi", "ne", "ru", "ta", "sho", "vel", "dra", "pin", "qua", "zor", "ex", "ul", "bri", "gon"};
    for (int i = 0; i < VOCAB; i++) {
        int n = 2 + (int)(rnd() % 3);
        vocab[i][0] = 0;
        for (int k = 0; k < n; k++) strcat(vocab[i], syl[rnd() % 16]);
    }
}

static const char *word(void)
{
    /* Zipf-ish: squares of uniforms favour low indices */
    double u = (double)(rnd() % 1000000) / 1e6;
    return vocab[(int)(u * u * (VOCAB - 1))];
}

static size_t span_text(char *out, int n_words)
{
    size_t o = 0;
    for (int i = 0; i < n_words; i++) {
        if (rnd() % 40 == 0) o += (size_t)sprintf(out + o, "%s%u", i ? " " : "", (unsigned)(rnd() % 1000000));
        else o += (size_t)sprintf(out + o, "%s%s", i ? " " : "", word());
    }
    out[o] = 0;
    return o;
}

#endif
