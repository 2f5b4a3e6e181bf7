/* Why Tier-2 spans are cut: the span rule widens every evicted run by ±widen tokens and
 * merges runs that then touch. V3 evicts per position segment, so a round's evicted cells
 * are scattered (gaps of a few tokens at a 90 % budget) and the merge turns a whole round
 * into ONE span covering most of the context. Such a span is useless to Tier 3: retrieval
 * ranks one giant chunk, and the rescue message (≤ 8000 characters, whole blocks only)
 * cannot hold it, so nothing comes back. Windows of max_len tokens overlapping by `overlap`
 * keep every token retrievable in a block that fits, and keep any fact of up to overlap + 1
 * tokens whole in one block. */
#include "triatt/rescue_split.h"

#include <stdlib.h>

int triatt__rescue_split_spans(const triatt_span *in, int n, int max_len, int overlap, triatt_span **out)
{
    if (!out || n < 0 || (n && !in) || max_len < 1 || overlap < 0 || overlap >= max_len) return LCX_EINVAL;
    *out = NULL;
    const int stride = max_len - overlap;
    size_t total = 0;
    for (int i = 0; i < n; i++) {
        const int len = in[i].b - in[i].a;
        total += len <= max_len ? 1 : 1 + (size_t)((len - max_len + stride - 1) / stride);
    }
    triatt_span *o = malloc((total ? total : 1) * sizeof *o);
    if (!o) return LCX_ENOMEM;
    size_t k = 0;
    for (int i = 0; i < n; i++) {
        const int32_t a = in[i].a, b = in[i].b;
        if (b - a <= max_len) { o[k++] = in[i]; continue; }
        for (int32_t s = a;; s += stride) {
            if (s + max_len >= b) { o[k++] = (triatt_span){b - max_len, b}; break; }
            o[k++] = (triatt_span){s, s + max_len};
        }
    }
    *out = o;
    return (int)k;
}

int triatt__rescue_split_for_widen(const triatt_span *in, int n, int widen, triatt_span **out)
{
    if (widen < 0) return LCX_EINVAL;
    const int len = widen * 4 > 64 ? widen * 4 : 64, ov = widen > 16 ? widen : 16;
    return triatt__rescue_split_spans(in, n, len, ov, out);
}
