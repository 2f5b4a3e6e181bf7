/* Rescue query signal (SPEC §2/§4): which part of the user's message to search with.
 *
 * Idea: rescue messages are long (a whole turn, often with pasted context) and the actual
 * question sits at the end. Searching with the full message ranked filler above the fact
 * in the reference system, so: the text after the last case-insensitive "question:"
 * marker, trimmed; if there is none (or nothing follows it), the last 512 bytes, moved
 * forward to a UTF-8 character boundary so the query never starts mid-character. */
#include "longctx/lcx.h"
#include <ctype.h>
#include <string.h>

#define TAIL_BYTES 512

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
    o = len > TAIL_BYTES ? len - TAIL_BYTES : 0;
    while (o < len && ((unsigned char)msg[o] & 0xC0) == 0x80) o++;   /* skip continuation bytes */
    n = len - o;
done:
    if (off) *off = o;
    if (qlen) *qlen = n;
}
