/* longctx-svc: the Tier-3 rescue system message (SPEC §2) and small shared helpers. */
#include "svc/svc.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

size_t lcx_utf8_chars(const char *s, size_t n)
{
    size_t c = 0;
    for (size_t i = 0; i < n; i++) c += ((unsigned char)s[i] & 0xC0) != 0x80;
    return c;
}

/* The cap counts Unicode characters (what a Python reference's len(str) counts), not
 * bytes, so non-ASCII spans are not cut short. Blocks are all-or-nothing: a partial span
 * could cut a number or identifier in half, which is worse than leaving the span out. */
int lcx_rescue_format(lcx_buf *out, const lcx_chunk *chunks, int n, size_t max_chars)
{
    if (n <= 0) return 0;
    size_t start_len = out->len;
    size_t total = lcx_utf8_chars(LCX_RESCUE_HEADER, strlen(LCX_RESCUE_HEADER));
    if (total > max_chars) return 0;
    int rc = lcx_buf_puts(out, LCX_RESCUE_HEADER);
    if (rc < 0) return rc;
    int written = 0;
    for (int i = 0; i < n; i++) {
        char head[160];
        int hl = snprintf(head, sizeof head, "\n--- evicted span (tokens %" PRId64 "..%" PRId64 ", layer %" PRId32 ") ---\n",
                          chunks[i].tok_start, chunks[i].tok_end, chunks[i].layer);
        size_t blk = (size_t)hl + lcx_utf8_chars(chunks[i].text, chunks[i].text_len) + 1;
        if (total + blk > max_chars) break;
        if ((rc = lcx_buf_append(out, head, (size_t)hl)) < 0 ||
            (rc = lcx_buf_append(out, chunks[i].text, chunks[i].text_len)) < 0 ||
            (rc = lcx_buf_append(out, "\n", 1)) < 0) {
            out->len = start_len;
            if (out->data) out->data[start_len] = 0;
            return rc;
        }
        total += blk;
        written++;
    }
    if (!written) {
        out->len = start_len;
        if (out->data) out->data[start_len] = 0;
    }
    return written;
}

bool lcx_svc_session_id_ok(const char *id, size_t n)
{
    if (!id || n < 1 || n > LCX_SESSION_ID_MAX || !lcx_utf8_valid(id, n)) return false;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)id[i] < 0x20 || id[i] == 0x7f) return false;
    return true;
}

int lcx_svc_err_status(int rc, const char **code)
{
    switch (rc) {
    case LCX_EINVAL: *code = "invalid_request"; return 400;
    case LCX_ENOTFOUND: *code = "session_not_found"; return 404;
    case LCX_ELIMIT: *code = "limit_exceeded"; return 429;
    case LCX_EMISMATCH: *code = "embedder_mismatch"; return 409;
    case LCX_EEXIST: *code = "conflict"; return 409;
    case LCX_ESTATE: *code = "conflict"; return 409;
    case LCX_ECORRUPT: *code = "store_corrupt"; return 500;
    case LCX_ENOMEM: *code = "out_of_memory"; return 503;
    case LCX_ETIMEOUT: *code = "timeout"; return 504;
    default: *code = "internal"; return 500;
    }
}
