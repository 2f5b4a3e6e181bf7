/* Internal text helpers of the retrieval core (not part of the public contract). */
#ifndef LCX_TEXT_INTERNAL_H
#define LCX_TEXT_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Longest token (folded bytes) the tokenizer emits; longer raw tokens (base64 blobs,
 * minified code) are cut into pieces of at most this many bytes on a character boundary. */
#define LCX_TOK_MAX 128

/* true for a short list of English function words ("the", "is", "of", ...). Both BM25 and
 * the hash embedder skip them: they occur in nearly every span, so they cost postings
 * and dot-product noise while carrying almost no signal for "which span holds the fact".
 * Only plain WORD tokens are checked (never identifiers or numbers). */
bool lcx__stopword(const char *tok, size_t len);
bool lcx__stopword_ref(const char *tok, size_t len);  /* linear reference (tests) */

#endif
