#include "util/util.h"
#include <immintrin.h>

/* Hot: every request body and chunk is checked. Runs of ASCII (the common case) are
 * skipped 32 bytes at a time; only multi-byte sequences take the slow path. */
bool lcx__utf8_valid(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s, *e = p + n;
    while (p < e) {
        while (e - p >= 32 && !_mm256_movemask_epi8(_mm256_loadu_si256((const __m256i *)p))) p += 32;
        if (p >= e) break;
        unsigned c = *p;
        if (c < 0x80) { p++; continue; }
        int len;
        unsigned cp;
        if (c >= 0xc2 && c <= 0xdf) { len = 2; cp = c & 0x1f; }
        else if (c >= 0xe0 && c <= 0xef) { len = 3; cp = c & 0x0f; }
        else if (c >= 0xf0 && c <= 0xf4) { len = 4; cp = c & 0x07; }
        else return false;
        if (e - p < len) return false;
        for (int i = 1; i < len; i++) {
            if ((p[i] & 0xc0) != 0x80) return false;
            cp = cp << 6 | (p[i] & 0x3f);
        }
        if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
            (cp >= 0xd800 && cp <= 0xdfff))
            return false;
        p += len;
    }
    return true;
}

/* Counts lead bytes: valid UTF-8 has exactly one per code point. */
size_t lcx__utf8_chars(const char *s, size_t n)
{
    size_t c = 0;
    for (size_t i = 0; i < n; i++) c += ((unsigned char)s[i] & 0xC0) != 0x80;
    return c;
}

/* Backs off over continuation bytes: s[k] starting a character means s[0..k) ends on one. */
size_t lcx__utf8_cut(const char *s, size_t n, size_t cap)
{
    if (n <= cap) return n;
    size_t k = cap;
    while (k > 0 && ((unsigned char)s[k] & 0xC0) == 0x80) k--;
    return k;
}
