/* Internal text helpers of the retrieval core (not part of the public contract). */
#ifndef LCX_TEXT_INTERNAL_H
#define LCX_TEXT_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <immintrin.h>

/* Longest token (folded bytes) the tokenizer emits; longer raw tokens (base64 blobs,
 * minified code) are cut into pieces of at most this many bytes on a character boundary. */
#define LCX_TOK_MAX 128

/* true for a short list of English function words ("the", "is", "of", ...). Both BM25 and
 * the hash embedder skip them: they occur in nearly every span, so they cost postings
 * and dot-product noise while carrying almost no signal for "which span holds the fact".
 * Only plain WORD tokens are checked (never identifiers or numbers). */
bool lcx__stopword(const char *tok, size_t len);
/* Query-side stop words (stopwords.c: words that refer to the prompt, "mentioned",
 * "provided", …); WORD tokens of queries only. */
bool lcx__query_stopword(const char *tok, size_t len);

/* Inline form (hot: every token). The table is a perfect hash of the packed words
 * (stopwords.c explains it). */
extern const uint64_t lcx__stop_tab[512];
#define LCX__STOP_MULT 0xcc386d6caa309951ull
/* The little-endian pack of a token of n < 8 bytes (the stopword table's key, and the
 * token hash's last word: lcx__hash64_tok reuses it), without a variable-length memcpy
 * and without a jump table (a length switch mispredicted on most tokens of code): two
 * overlapping 4-byte loads for n ≥ 4 (the overlap holds the same bytes in both), three
 * byte loads below (first, middle, last cover 1–3 bytes). Reads only tok[0..n-1]. */
static inline uint64_t lcx__pack_lt8(const char *tok, size_t len)
{
    const unsigned char *t = (const unsigned char *)tok;
    if (len >= 4) {
        uint32_t a, b;
        memcpy(&a, t, 4);
        memcpy(&b, t + len - 4, 4);
        return (uint64_t)a | (uint64_t)b << (8 * (len - 4));
    }
    if (!len) return 0;
    return (uint64_t)t[0] | (uint64_t)t[len / 2] << (8 * (len / 2)) | (uint64_t)t[len - 1] << (8 * (len - 1));
}

/* Stopword test on a packed key (1 ≤ len ≤ 7; key = lcx__pack_lt8(tok, len)). */
static inline bool lcx__stopword_key(uint64_t key, size_t len)
{
    return len - 1 < 7 && lcx__stop_tab[(key * LCX__STOP_MULT) >> 55] == key;
}

static inline bool lcx__stopword_inl(const char *tok, size_t len)
{
    if (len == 0 || len > 7) return false;
    return lcx__stopword_key(lcx__pack_lt8(tok, len), len);
}
bool lcx__stopword_ref(const char *tok, size_t len);  /* linear reference (tests) */

/* Copies n ≤ LCX_TOK_MAX bytes without a libc call and without reading or writing past
 * either end (overlapping 16/8/4-byte moves; tokens are short, a call costs more). */
static inline __attribute__((always_inline)) void lcx__copy_tok(void *dst, const void *src, size_t n)
{
    unsigned char *d = dst;
    const unsigned char *s = src;
    if (n >= 16) {
        __m128i last = _mm_loadu_si128((const __m128i *)(s + n - 16));
        for (size_t i = 0; i + 16 <= n; i += 16) _mm_storeu_si128((__m128i *)(d + i), _mm_loadu_si128((const __m128i *)(s + i)));
        _mm_storeu_si128((__m128i *)(d + n - 16), last);
    } else if (n >= 8) {
        uint64_t a, b;
        memcpy(&a, s, 8);
        memcpy(&b, s + n - 8, 8);
        memcpy(d, &a, 8);
        memcpy(d + n - 8, &b, 8);
    } else if (n >= 4) {
        uint32_t a, b;
        memcpy(&a, s, 4);
        memcpy(&b, s + n - 4, 4);
        memcpy(d, &a, 4);
        memcpy(d + n - 4, &b, 4);
    } else if (n) {
        d[0] = s[0];
        d[n / 2] = s[n / 2];
        d[n - 1] = s[n - 1];
    }
}


#endif
