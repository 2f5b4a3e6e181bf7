/* The rescue wire rules (SPEC §2): the Tier-3 system message, the query signal and the
 * session-id rule.
 *
 * Both the service (src/svc, src/retrieve) and libtriatt's rescue client build them, and
 * they must agree byte for byte, so they live once, here. They sit in lcx_util because it
 * is the lowest library both link: libtriatt is engine-agnostic and links only lcx_util and
 * libcurl; linking the retrieval library would drag the scope, store, index and embedder
 * libraries (and libutf8proc) into every engine that embeds libtriatt. All of them are
 * pure (no I/O, no allocation besides the caller's buffer). */
#include "util/util.h"
#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* ---------------------------------------------------------------- rescue text */
/* The cap counts Unicode characters (what a Python reference's len(str) counts), not
 * bytes, so non-ASCII spans are not cut short. Blocks are all-or-nothing: a partial span
 * could cut a number or identifier in half, which is worse than leaving the span out. The
 * header is written with the first block that fits, so a text with no block is empty. */
void lcx__rescue_text_begin(lcx__rescue_text *t, lcx_buf *out, size_t max_chars)
{
    *t = (lcx__rescue_text){.out = out, .start = out->len, .max_chars = max_chars,
                            .chars = lcx__utf8_chars(LCX_RESCUE_HEADER, strlen(LCX_RESCUE_HEADER))};
}

static void rollback(lcx__rescue_text *t)
{
    lcx__buf_truncate(t->out, t->start);
    t->n = 0;
}

int lcx__rescue_text_add(lcx__rescue_text *t, const char *text, size_t len, int64_t tok_start, int64_t tok_end,
                         int32_t layer)
{
    if (t->full) return 0;
    char head[160];
    int hl = snprintf(head, sizeof head, "\n--- evicted span (tokens %" PRId64 "..%" PRId64 ", layer %" PRId32 ") ---\n",
                      tok_start, tok_end, layer);
    size_t blk = (size_t)hl + lcx__utf8_chars(text, len) + 1;
    if (t->chars + blk > t->max_chars) {   /* stop at the first overflow, even if a later block fits */
        t->full = true;
        return 0;
    }
    int rc = 0;
    if (!t->n) rc = lcx__buf_puts(t->out, LCX_RESCUE_HEADER);
    if (rc >= 0) rc = lcx__buf_append(t->out, head, (size_t)hl);
    if (rc >= 0 && len) rc = lcx__buf_append(t->out, text, len);
    if (rc >= 0) rc = lcx__buf_append(t->out, "\n", 1);
    if (rc < 0) {
        rollback(t);
        t->full = true;
        return rc;
    }
    t->chars += blk;
    t->n++;
    return 1;
}

/* ---------------------------------------------------------------- session ids */
bool lcx__session_id_ok(const char *id, size_t n)
{
    if (!id || n < 1 || n > LCX_SESSION_ID_MAX || !lcx__utf8_valid(id, n)) return false;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)id[i] < 0x20 || id[i] == 0x7f) return false;
    return true;
}

/* ---------------------------------------------------------------- query signal */
/* Rescue messages are long (a whole turn, often with pasted context) and the actual
 * question sits at the end. Searching with the full message ranked filler above the fact
 * in the reference system, so: the text after the last case-insensitive "question:"
 * marker, trimmed; else the last sentence ending in '?' when that '?' lies in the last
 * QMARK_WINDOW bytes (a user turn is often pasted context, the question, then a line of
 * chat: the last 512 bytes are then mostly context and chat, and the question's rare
 * terms drown — bench/quality, prose without a marker); else the last TAIL_BYTES bytes,
 * moved forward to a UTF-8 character boundary so the query never starts mid-character. */
#define TAIL_BYTES 512
#define QMARK_WINDOW 1024   /* a '?' further from the end belongs to pasted context */
#define QSENT_MAX 512       /* a question sentence is cut to its last this many bytes */
#define QSENT_MIN 8         /* shorter "sentences" ("Why?", "ok?") fall back to the tail */

static int is_ws(unsigned char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

void lcx__rescue_query(const char *msg, size_t len, size_t *off, size_t *qlen)
{
    size_t o = 0, n = 0;
    if (!msg) len = 0;
    static const char mk[] = "question:";
    const size_t ml = sizeof mk - 1;
    size_t found = (size_t)-1;
    for (size_t i = len >= ml ? len - ml + 1 : 0; i-- > 0;) {
        size_t j = 0;
        while (j < ml && tolower((unsigned char)msg[i + j]) == mk[j]) j++;
        if (j == ml) { found = i; break; }
    }
    if (found != (size_t)-1) {
        size_t a = found + ml, b = len;
        while (a < b && is_ws((unsigned char)msg[a])) a++;
        while (b > a && is_ws((unsigned char)msg[b - 1])) b--;
        if (b > a) {
            o = a;
            n = b - a;
            goto done;
        }
    }
    /* the last sentence ending in '?': back from it to the previous sentence end (". ",
     * "! ", "? ") or line break */
    for (size_t i = len; i-- > 0 && len - i <= QMARK_WINDOW;) {
        if (msg[i] != '?') continue;
        size_t b = i + 1, a = i;
        while (a > 0 && b - a < QSENT_MAX) {
            unsigned char p = (unsigned char)msg[a - 1];
            if (p == '\n' || p == '\r') break;
            if (is_ws(p) && a >= 2 && (msg[a - 2] == '.' || msg[a - 2] == '!' || msg[a - 2] == '?')) break;
            a--;
        }
        while (a < b && (is_ws((unsigned char)msg[a]) || ((unsigned char)msg[a] & 0xC0) == 0x80)) a++;
        if (b - a >= QSENT_MIN) {
            o = a;
            n = b - a;
            goto done;
        }
        break;
    }
    o = len > TAIL_BYTES ? len - TAIL_BYTES : 0;
    while (o < len && ((unsigned char)msg[o] & 0xC0) == 0x80) o++;   /* skip continuation bytes */
    n = len - o;
done:
    if (off) *off = o;
    if (qlen) *qlen = n;
}
