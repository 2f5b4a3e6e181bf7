/* The lexical tokenizer (src/text, lcx_tokenize): any bytes, every token inside bounds,
 * non-empty, of a known kind; stopping from the callback returns the callback's value. */
#include "fuzz.h"

#include <string.h>
#include "longctx/lcx.h"

typedef struct { size_t n, stop_at; } lex_st;

static int cb(const char *tok, size_t len, int kind, void *ud)
{
    lex_st *s = ud;
    FZ_CHECK(tok != NULL && len > 0);
    FZ_CHECK(kind >= LCX_TOK_WORD && kind <= LCX_TOK_PART);
    volatile char sink = tok[0] ^ tok[len - 1];   /* touch both ends (ASan) */
    (void)sink;
    return ++s->n == s->stop_at ? 7 : 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    lex_st s = {0, 0};
    int rc = lcx_tokenize((const char *)data, size, cb, &s);
    FZ_CHECK(rc == 0 || rc < 0);
    if (s.n > 1) {
        lex_st t = {0, s.n / 2};
        FZ_CHECK(lcx_tokenize((const char *)data, size, cb, &t) == 7);
    }
    return 0;
}
