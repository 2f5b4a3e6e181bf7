/* longctx-svc: the Tier-3 rescue system message (SPEC §2) and small shared helpers. */
#include "svc/svc.h"

#include <string.h>

/* The rule itself is util/rescue_rules.c's (shared with libtriatt). */
int lcx__rescue_format(lcx_buf *out, const lcx_chunk *chunks, int n, size_t max_chars)
{
    lcx__rescue_text t;
    lcx__rescue_text_begin(&t, out, max_chars);
    for (int i = 0; i < n; i++) {
        int rc = lcx__rescue_text_add(&t, chunks[i].text, chunks[i].text_len, chunks[i].tok_start, chunks[i].tok_end,
                                      chunks[i].layer);
        if (rc < 0) return rc;
        if (rc == 0) break;
    }
    return t.n;
}

int lcx__svc_err_status(int rc, const char **code)
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
    /* a full disk or quota: nothing of the request was stored; retry once space returns */
    case LCX_ENOSPC: *code = "insufficient_storage"; return 507;
    default: *code = "internal"; return 500;
    }
}
