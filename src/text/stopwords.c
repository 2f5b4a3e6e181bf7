/* English function words skipped by BM25 and the hash embedder (see text.h for why).
 * The list is deliberately short: words that carry content in code or prose ("not",
 * "no", "new", "file", "code") are NOT here. Changing it changes the embedder
 * fingerprint (embed.c versions it) because it changes which features exist. */
#include "text/text.h"
#include <string.h>

static const char *const k_stop[] = {
    "a", "about", "after", "all", "also", "am", "an", "and", "any", "are", "as", "at", "be",
    "been", "before", "being", "but", "by", "can", "could", "did", "do", "does", "doing",
    "during", "each", "few", "for", "from", "had", "has", "have", "having", "he", "her",
    "here", "hers", "him", "his", "how", "i", "if", "in", "into", "is", "it", "its", "just",
    "me", "more", "most", "my", "of", "off", "on", "once", "only", "or", "other", "our",
    "ours", "out", "over", "own", "s", "same", "she", "should", "so", "some", "such", "t",
    "than", "that", "the", "their", "theirs", "them", "then", "there", "these", "they",
    "this", "those", "through", "to", "too", "under", "until", "up", "very", "was", "we",
    "were", "what", "when", "where", "which", "while", "who", "whom", "why", "will", "with",
    "would", "you", "your", "yours"};

/* Open-addressing table built on first use would need global mutable state; the list is
 * small and sorted, so a binary search over it is cheap (≤ 7 compares) and stateless. */
bool lcx__stopword(const char *tok, size_t len)
{
    if (len == 0 || len > 7) return false;
    size_t lo = 0, hi = sizeof k_stop / sizeof k_stop[0];
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        const char *w = k_stop[mid];
        size_t wl = strlen(w);
        int c = memcmp(tok, w, len < wl ? len : wl);
        if (c == 0) c = len < wl ? -1 : len > wl ? 1 : 0;
        if (c == 0) return true;
        if (c < 0) hi = mid;
        else lo = mid + 1;
    }
    return false;
}
