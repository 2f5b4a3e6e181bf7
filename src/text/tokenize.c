/* Lexical tokenizer shared by BM25, the hash embedder and the reranker: the
 * implementation and its documentation are in tokenize_inl.h (inline, so that the ingest
 * path can instantiate it with its callback inlined). */
#include "text/tokenize_inl.h"

int lcx_tokenize(const char *text, size_t len, lcx_token_cb cb, void *ud)
{
    return lcx__tokenize_inl(text, len, cb, ud);
}
