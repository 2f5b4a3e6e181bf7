/* longctx retrieval recipes over a chat history (src/retrieve): Selector + deterministic
 * copy, plain RAG, MultiQ, and long-history compaction.
 *
 *   lcx_msg h[] = {{"user", "write a poem about tapirs", 25}, {"assistant", "Tapirs...", 9}, ...};
 *   lcx_select_result sr;
 *   lcx_select(h, n, "Prepend ab12 to the 1st (1 indexed) poem about tapirs.", len, &sr);
 *   if (sr.status == LCX_SEL_OK) puts(sr.response);         // "ab12" + reply, verbatim
 *   else fprintf(stderr, "selector: %s\n", sr.reason);      // fail closed, never a guess
 *   lcx_select_result_free(&sr);
 *
 *   long idx[8]; float sc[8];
 *   int k = lcx_recipe_plain(emb, h, n, question, qlen, 8, idx, sc);   // message indices, best first
 *
 *   cJSON *msgs = ...;  // OpenAI "messages" array
 *   lcx_compact_opts co = lcx_compact_defaults(); co.budget_tokens = 8192;
 *   lcx_compact_report rep;
 *   lcx_compact_messages(msgs, emb, &co, &rep);              // rewrites msgs in place when over budget
 *
 * Conventions: 0 (or a count) on success, negative LCX_E* on failure (longctx/lcx_err.h);
 * nothing here exits or aborts. Strings are UTF-8; lengths in bytes. Message views (lcx_msg)
 * are borrowed: the recipes never keep pointers into them after returning. The recipes
 * do not know any particular data set's vocabulary: they work from the MRCR request shape
 * ("write a {format} about {topic}" / "the {Nth} {format} about {topic}") and from the
 * retrieval core (longctx/lcx.h). */
#ifndef LONGCTX_LCX_RECIPES_H
#define LONGCTX_LCX_RECIPES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "longctx/lcx.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A borrowed chat message. role: "user" | "assistant" | "system" | other. */
typedef struct {
    const char *role;
    const char *content;
    size_t len;
} lcx_msg;

/* ---------------------------------------------------------------- ordinal requests */

#define LCX_ORD_LAST (-1)          /* "the last" (-2: second to last, ...) */

typedef struct {
    int ordinal;            /* 1-based position; LCX_ORD_LAST - k for "k-th from the end" */
    bool has_format;        /* format given ("poem") */
    bool has_topic;         /* topic given ("tapirs") */
    char format[128];       /* normalised: lower-case ASCII, single spaces, no edge punctuation */
    char topic[256];
    char prefix[128];       /* text to prepend (e.g. the MRCR hash); "" when none asked */
} lcx_ordinal_req;

/* Parses an ordinal request such as
 *   "Prepend ab12 to the 2nd (1 indexed) poem about tapirs. Do not include any other text ..."
 *   "the third time I asked about tapirs" / "the second short story about the sea" /
 *   "give me the last one" / "the 3rd (0 indexed) haiku about owls" (→ ordinal 4)
 * Ordinals: 1st..99th as digits (any suffix), words first..twelfth, "last"/"final",
 * "second to last"/"penultimate"; a one-edit typo in an ordinal word of 5+ letters
 * ("secnd", "thrid") is accepted. Returns 0; LCX_ENOTFOUND when text is not an ordinal
 * request (fail closed: nothing is guessed); LCX_EINVAL on NULL arguments. */
int lcx_ordinal_parse(const char *text, size_t len, lcx_ordinal_req *out);

/* Parses a history request "write a {format} about {topic}" (also compose/create/draft/
 * give me/make, a/an/another; leading "please"/"now", trailing punctuation) found in the
 * LAST non-empty line of text (so a few-shot preamble before it is ignored).
 * Returns 0 and fills format/topic (normalised as above); LCX_ENOTFOUND otherwise. */
int lcx_request_parse(const char *text, size_t len, char *format, size_t flen, char *topic,
                      size_t tlen);

/* ---------------------------------------------------------------- Selector + det copy */

enum lcx_sel_status {
    LCX_SEL_OK = 0,
    LCX_SEL_UNPARSED = 1,   /* the question is not an ordinal request */
    LCX_SEL_NO_MATCH = 2,   /* fewer matching requests than the ordinal asks for */
    LCX_SEL_NO_REPLY = 3    /* the matched request has no assistant reply after it */
};

typedef struct {
    int status;             /* enum lcx_sel_status */
    long user_index;        /* index of the selected request (−1 when none) */
    long reply_index;       /* index of the assistant reply copied (−1 when none) */
    int n_matches;          /* matching requests found */
    char *response;         /* malloc'd prefix + reply verbatim (NULL unless LCX_SEL_OK) */
    char reason[192];       /* human-readable explanation when status != OK */
    lcx_ordinal_req req;
} lcx_select_result;

/* Selects the Nth earlier request whose format AND topic equal the question's (strict,
 * after normalisation; topic only for "the Nth time I asked about X"), in document order,
 * and copies the assistant reply that follows it. msgs[0..n) is the history; the question
 * is usually the last user message and is never itself counted (pass n excluding it or
 * including it: a trailing message equal to the question is skipped). Returns 0 with
 * res->status set (res is always filled; free it), or LCX_ENOMEM/LCX_EINVAL. */
int lcx_select(const lcx_msg *msgs, size_t n, const char *question, size_t qlen,
               lcx_select_result *res);
void lcx_select_result_free(lcx_select_result *res);

/* ---------------------------------------------------------------- plain RAG / MultiQ */

/* Both index every earlier assistant message as one document made of the request that
 * preceded it plus the reply (a turn), search with the question, and return assistant
 * message indices best first (out_idx[0..k)), with scores (out_score may be NULL).
 * emb: borrowed embedder for the dense half of the hybrid index.
 * Plain: one query (the question with its boilerplate removed — see lcx_query_clean).
 * MultiQ: variants of the question (cleaned; keyword-only; structure-only "write a F about
 * T"; the ordinal phrase removed), each searched for top_k, the union reranked by
 * agreement (sum of reciprocal ranks) plus exact request match. */
int lcx_recipe_plain(const lcx_embedder *emb, const lcx_msg *msgs, size_t n, const char *q,
                     size_t qlen, int top_k, long *out_idx, float *out_score);
int lcx_recipe_multiq(const lcx_embedder *emb, const lcx_msg *msgs, size_t n, const char *q,
                      size_t qlen, int top_k, long *out_idx, float *out_score);
/* MultiQ with a neural channel's cross-encoder (nn may be NULL: lcx_recipe_multiq): the final
 * order's best rerank_top turns are reordered under its deadline (lcx_nnq_rerank); info (may
 * be NULL) says used_rerank / rerank_overrun. The question (q) is what the model reads. */
int lcx_recipe_multiq_nn(const lcx_embedder *emb, lcx_nnq *nn, const lcx_msg *msgs, size_t n, const char *q,
                         size_t qlen, int top_k, long *out_idx, float *out_score, lcx_search_info *info);

/* Removes instruction boilerplate from a question for searching: a "prepend X to"
 * clause, "(1 indexed)", "Do not include any other text..." sentences. Writes at most
 * out_len-1 bytes; returns the length written. */
size_t lcx_query_clean(const char *q, size_t qlen, char *out, size_t out_len);

/* ---------------------------------------------------------------- compaction */

typedef struct {
    size_t budget_tokens;   /* upstream window to fit in (default 8192) */
    size_t keep_first;      /* leading messages always kept (default 1; system messages are always kept) */
    size_t keep_recent;     /* trailing messages always kept (default 4; includes the question) */
    int top_k;              /* retrieved turns spliced in place of the middle (default 8) */
    double chars_per_token; /* token estimate when no tokenizer is given (default 4.0) */
    bool use_selector;      /* try the Selector before retrieval (default true) */
    lcx_nnq *nn;            /* neural channel whose cross-encoder reranks MultiQ's turns (NULL: none) */
} lcx_compact_opts;

lcx_compact_opts lcx_compact_defaults(void);

typedef struct {
    bool compacted;         /* false: already within budget, untouched */
    bool used_selector;     /* the last user message was an ordinal request the Selector resolved */
    size_t tokens_before, tokens_after;   /* estimates */
    size_t msgs_before, msgs_after;
    int n_retrieved;        /* turns spliced in */
    bool used_rerank;       /* the cross-encoder reordered MultiQ's turns within its deadline */
} lcx_compact_report;

/* Compacts an OpenAI "messages" array (cJSON array, modified in place) when its estimated
 * size exceeds budget_tokens: keeps every system message, the first keep_first and the
 * last keep_recent messages, and replaces the middle with (a) the Selector's pick when the
 * last user message is an ordinal request it resolves, else (b) the top_k turns retrieval
 * finds relevant to that message, in document order, each as its original user/assistant
 * pair — then trims retrieved turns (least relevant first) until the estimate fits.
 * Message content may be a string or a list of {"type":"text","text":...} parts.
 * msgs is a cJSON * (void * here so this header does not need cJSON). rep may be NULL.
 * Returns 0; LCX_EINVAL when msgs is not an array of messages; LCX_ENOMEM. On error msgs
 * is left unchanged. */
int lcx_compact_messages(void *msgs, const lcx_embedder *emb, const lcx_compact_opts *o,
                         lcx_compact_report *rep);

#ifdef __cplusplus
}
#endif
#endif
