/* Rescue query signal (SPEC §2/§4): which part of the user's message to search with.
 *
 * Idea: rescue messages are long (a whole turn, often with pasted context) and the actual
 * question sits at the end. Searching with the full message ranked filler above the fact
 * in the reference system, so: the text after the last case-insensitive "question:"
 * marker, trimmed; else the last sentence ending in '?' when that '?' lies in the last
 * QMARK_WINDOW bytes (a user turn is often pasted context, the question, then a line of
 * chat: the last 512 bytes were then mostly context and chat, and the question's rare
 * terms were drowned — bench/quality prose, no marker: recall@1 0.03); else the last
 * 512 bytes, moved forward to a UTF-8 character boundary so the query never starts
 * mid-character. */
#include "longctx/lcx.h"
#include <ctype.h>
#include <string.h>

#define TAIL_BYTES 512
#define QMARK_WINDOW 1024   /* a '?' further from the end belongs to pasted context */
#define QSENT_MAX 512       /* a question sentence is cut to its last this many bytes */
#define QSENT_MIN 8         /* shorter "sentences" ("Why?", "ok?") fall back to the tail */

static int is_ws(unsigned char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

void lcx_rescue_query(const char *msg, size_t len, size_t *off, size_t *qlen)
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
