/* Long Tier-2 spans cut into retrievable pieces (rescue_split.c). Internal to libtriatt. */
#ifndef TRIATT_RESCUE_SPLIT_H
#define TRIATT_RESCUE_SPLIT_H

#include "longctx/triatt.h"

/* Cuts every span longer than max_len tokens into windows of max_len tokens that overlap by
 * `overlap` tokens (the last window ends at the span's end), so any run of at most
 * overlap + 1 tokens inside a span lies whole inside at least one window. Spans no longer
 * than max_len pass unchanged. *out is malloc'd (free()); returns the window count, or
 * LCX_EINVAL (max_len < 1, overlap < 0 or >= max_len), LCX_ENOMEM. */
int triatt__rescue_split_spans(const triatt_span *in, int n, int max_len, int overlap, triatt_span **out);
/* The bridge's rule (the one home of its constants): windows of max(4·widen, 64) tokens
 * overlapping by max(widen, 16) — a fact of up to widen + 1 tokens stays whole in a block
 * of ~128 tokens (≈ 500–800 characters: 8 of them fit one rescue message). */
int triatt__rescue_split_for_widen(const triatt_span *in, int n, int widen, triatt_span **out);

#endif
