/* Tokenizers (SentencePiece-style BPE, byte-level BPE, WordPiece) and chat templates —
 * engine-internal.
 *
 *   eng_tokenizer *t; char err[256];
 *   if (eng__tokenizer_from_gguf(g, &t, err, sizeof err) < 0) { fprintf(stderr, "%s\n", err); ... }
 *   int32_t ids[512];
 *   int n = eng__tokenize(t, "Hello", 5, true, false, ids, 512);      // BOS + "Hello"
 *   char text[4096];
 *   int len = eng__detokenize(t, ids, n, text, sizeof text);            // "Hello"
 *   eng__tokenizer_free(t);
 *
 * What is built from GGUF metadata (keys tokenizer.ggml.*):
 *   model "llama" -> SentencePiece-style BPE driven by token scores, dummy-prefix space, ' ' as
 *                    U+2581, byte fallback to <0xNN> tokens (tok_spm.c);
 *   model "gpt2"  -> byte-level BPE with merge ranks; pre-tokenizer regexes chosen by
 *                    tokenizer.ggml.pre (gpt-2, mpt, falcon, llama3, qwen2, ...) run with PCRE2
 *                    in UTF+UCP mode (tok_bpe.c);
 *   model "bert"  -> WordPiece with the BERT normaliser (clean text, CJK split, strip accents,
 *                    lowercase) and BERT pre-tokenizer (tok_wpm.c).
 * Special tokens (control / user-defined / unknown types) are split out of the text before
 * the model runs: user-defined ones always (as Hugging Face does), control and unknown ones
 * only with parse_special. BOS/EOS/CLS/SEP follow tokenizer.ggml.add_bos_token /
 * add_eos_token with the per-model defaults llama.cpp uses.
 *
 * Ownership: an eng_tokenizer copies everything it needs from the GGUF (the file may be closed
 * afterwards); free(NULL) is a no-op. Thread-safety: after construction a tokenizer is
 * read-only; every function below may be called from several threads at once (each call
 * allocates its own scratch space). Failure: functions return LCX_E* codes, never abort.
 * Complexity: encoding is O(n log n) in the input length (heap-driven merges over a linked
 * list of symbols, hash maps for vocabulary and merge lookups). */
#ifndef ENG_TOKENIZER_H
#define ENG_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "longctx/lcx_err.h"
#include "gguf.h"

typedef struct eng_tokenizer eng_tokenizer;

typedef enum { ENG_TOK_SPM = 1, ENG_TOK_BPE = 2, ENG_TOK_WPM = 3 } eng_tok_kind;

/* Token types, GGUF numbering (tokenizer.ggml.token_type). */
enum {
    ENG_TOKT_NORMAL = 1, ENG_TOKT_UNKNOWN = 2, ENG_TOKT_CONTROL = 3,
    ENG_TOKT_USER_DEFINED = 4, ENG_TOKT_UNUSED = 5, ENG_TOKT_BYTE = 6
};

#define ENG_TOKEN_NONE     (-1)          /* "no such token" in the special-id getters */
#define ENG_TOKEN_DEFAULT  (-2)          /* spec: use the model type's default */
#define ENG_TOK_MAX_VOCAB  (1 << 22)     /* hard cap on vocabulary entries */
#define ENG_TOK_MAX_TOKEN  4096          /* hard cap on one token's bytes */
#define ENG_TOK_MAX_INPUT  (1u << 30)    /* hard cap on one eng__tokenize input, bytes */

/* Builds a tokenizer from GGUF metadata. Errors: LCX_ENOTFOUND (no tokenizer.ggml.model /
 * tokens / merges for gpt2), LCX_ENOTSUP (unknown model or pre-tokenizer), LCX_ECORRUPT
 * (array lengths or types disagree, ids out of range), LCX_ELIMIT, LCX_ENOMEM. err gets a
 * sentence naming the key. */
int  eng__tokenizer_from_gguf(const eng_gguf *g, eng_tokenizer **out, char *err, size_t errlen);

/* Plain-array construction (llama2.c tokenizer import, vocab.txt, tests). All arrays are
 * copied. Start from eng__tok_spec_init() (all ids ENG_TOKEN_DEFAULT, flags -1 = default). */
typedef struct {
    eng_tok_kind kind;
    const char *pre;                /* BPE pre-tokenizer name as in tokenizer.ggml.pre; NULL = "default" */
    const char *model_name;         /* general.name (a few per-model token attributes); may be NULL */
    int32_t n_tokens;
    const char *const *tokens;      /* tokens[i], token_lens[i] bytes (not NUL-terminated) */
    const size_t *token_lens;
    const float *scores;            /* NULL = all 0 */
    const int32_t *token_types;     /* ENG_TOKT_*; NULL = all normal */
    int32_t n_merges;               /* BPE only: "left right" strings, rank = index */
    const char *const *merges;
    const size_t *merge_lens;
    int32_t bos, eos, unk, sep, pad, eot, eom;   /* ENG_TOKEN_DEFAULT / ENG_TOKEN_NONE / id */
    int add_bos, add_eos, add_space_prefix;     /* -1 = model default, 0/1 */
} eng_tok_spec;
void eng__tok_spec_init(eng_tok_spec *s);
int  eng__tokenizer_from_spec(const eng_tok_spec *s, eng_tokenizer **out, char *err, size_t errlen);

/* BERT vocab.txt (one token per line, "##" continuation pieces) -> the same WordPiece
 * tokenizer the GGUF "bert" model gives. File capped at 64 MiB. */
int  eng__tokenizer_from_vocab_txt(const char *path, eng_tokenizer **out, char *err, size_t errlen);

void eng__tokenizer_free(eng_tokenizer *t);

int32_t      eng__tokenizer_n_vocab(const eng_tokenizer *t);
eng_tok_kind eng__tokenizer_kind(const eng_tokenizer *t);
/* Whether encoding prepends a dummy space (SPM): a decoder printing token by token should
 * drop the first space after BOS / at the start, as eng__detokenize does. */
bool         eng__tokenizer_adds_space_prefix(const eng_tokenizer *t);

/* Encodes text[0..len). Returns the number of ids written (<= max), or LCX_ELIMIT when max
 * is too small (out then holds the first max ids), LCX_EINVAL on bad arguments, LCX_ENOMEM.
 * add_special adds BOS/EOS (SPM, BPE: per add_bos/add_eos) or CLS ... SEP (WordPiece).
 * parse_special maps the text of control tokens (e.g. "<|im_start|>") to their ids;
 * user-defined tokens are always matched. Invalid UTF-8 is tolerated (bytes fall back). */
int  eng__tokenize(const eng_tokenizer *t, const char *text, size_t len, bool add_special,
                  bool parse_special, int32_t *out, int max);

/* Bytes of one token as printed: SPM U+2581 -> ' ', <0xNN> -> that byte; byte-level BPE
 * unmapped to raw bytes; WordPiece word-initial pieces get a leading ' '; control and unknown
 * tokens print as nothing; user-defined tokens as their text. Writes min(len, n) bytes (no
 * NUL) and returns the full length, so a return > n means "buffer too small". LCX_EINVAL
 * for an id out of range. */
int  eng__token_to_piece(const eng_tokenizer *t, int32_t id, char *buf, size_t n);
/* The vocabulary entry of id as stored (not unescaped), *len bytes; NULL when out of range. */
const char *eng__token_text(const eng_tokenizer *t, int32_t id, size_t *len);
int  eng__token_type(const eng_tokenizer *t, int32_t id);          /* ENG_TOKT_*, LCX_EINVAL */
/* Looks up the exact vocabulary entry; ENG_TOKEN_NONE when absent. */
int32_t eng__token_lookup(const eng_tokenizer *t, const char *text, size_t len);

/* Concatenated pieces of ids (SPM: the dummy-prefix space of the first piece is dropped).
 * Writes at most cap-1 bytes plus a NUL when cap > 0; returns the full length (a return
 * >= cap means truncated), or LCX_EINVAL for an id out of range. No space clean-up is
 * applied, so byte-level and SPM text round-trips exactly. */
int  eng__detokenize(const eng_tokenizer *t, const int32_t *ids, int n, char *buf, size_t cap);

/* Streaming helper: pieces of byte-fallback / byte-level tokens can split a UTF-8 character.
 * Returns how many leading bytes of buf[0..n) are safe to emit now: all of them, except a
 * trailing incomplete (but so far well-formed) UTF-8 sequence of up to 3 bytes, which the
 * caller keeps and prepends to the next piece. Malformed bytes are never held back. */
size_t eng__utf8_stream_cut(const char *buf, size_t n);

int32_t eng__token_bos(const eng_tokenizer *t);      /* ENG_TOKEN_NONE when the model has none */
int32_t eng__token_eos(const eng_tokenizer *t);
int32_t eng__token_unk(const eng_tokenizer *t);
int32_t eng__token_sep(const eng_tokenizer *t);
int32_t eng__token_eot(const eng_tokenizer *t);
bool    eng__tokenizer_add_bos(const eng_tokenizer *t);
bool    eng__tokenizer_add_eos(const eng_tokenizer *t);
/* End of generation: EOS, EOT (<|eot_id|>, <|im_end|>, <|end|>, ...), EOM. */
bool    eng__token_is_eog(const eng_tokenizer *t, int32_t id);

/* ---- chat templates (chat.c) ---------------------------------------------------------
 * The template is chosen from tokenizer.chat_template by its markers: "<|im_start|>" ->
 * ChatML, "<|start_header_id|>" -> Llama-3, "[INST]" -> Mistral. Anything else (or no
 * template) -> ChatML with *fell_back = true so the caller can warn; library code prints
 * nothing. The produced text never contains the BOS token: tokenize it with
 * add_special = true (BOS per model) and parse_special = true (so the markers become ids).
 *
 *   ChatML   <|im_start|>{role}\n{content}<|im_end|>\n ...  [+ <|im_start|>assistant\n]
 *   Llama-3  <|start_header_id|>{role}<|end_header_id|>\n\n{content trimmed}<|eot_id|> ...
 *            [+ <|start_header_id|>assistant<|end_header_id|>\n\n]
 *   Mistral  [INST] {user} [/INST]{assistant}{eos} ... ; a system message is put in front of
 *            the next user message followed by "\n\n" (Mistral templates have no system role).
 */
typedef struct { const char *role, *content; } eng_chat_msg;
typedef enum { ENG_CHAT_CHATML = 0, ENG_CHAT_LLAMA3 = 1, ENG_CHAT_MISTRAL = 2 } eng_chat_tmpl;

#define ENG_CHAT_MAX_OUT (256u << 20)   /* hard cap on a rendered conversation, bytes */

/* Classifies a Jinja template text (may be NULL). *fell_back (optional) is set to true when
 * no known marker was found (result ENG_CHAT_CHATML). */
eng_chat_tmpl eng__chat_detect(const char *tmpl, size_t len, bool *fell_back);
const char   *eng__chat_tmpl_name(eng_chat_tmpl k);
/* "chatml", "llama3", "mistral" (e.g. a --chat-template flag) -> template; LCX_ENOTFOUND. */
int           eng__chat_tmpl_from_name(const char *name);
/* Renders m[0..n) with template k. eos_text is used by Mistral after assistant turns (NULL
 * = "</s>"). *out is malloc'd, NUL-terminated, owned by the caller. Returns the length or
 * LCX_EINVAL (NULL role/content, unknown k), LCX_ELIMIT (over ENG_CHAT_MAX_OUT), LCX_ENOMEM. */
int eng__chat_format(eng_chat_tmpl k, const char *eos_text, const eng_chat_msg *m, int n,
                    bool add_assistant_prompt, char **out);
/* Detect from g's tokenizer.chat_template (eos text from the token list) and render. */
int eng__chat_apply(const eng_gguf *g, const eng_chat_msg *m, int n, bool add_assistant_prompt,
                   char **out, bool *fell_back);

/* BERT BasicTokenizer character classes (Hugging Face), the one home for the engine's WPM
 * tokenizer and src/neural's WordPiece (tok_wpm.c). is_ws: Unicode White_Space; is_control:
 * Cc/Cf/Cs/Co/Cn except tab, newline, CR (checked before is_ws: VT, FF, NEL are dropped, not
 * split on); is_punct: ASCII symbols plus Unicode P*. is_cjk: the CJK ideograph blocks; HF's
 * Python BertTokenizer starts Extension E at 0x2B820 (the Unicode block), the Rust tokenizers
 * (and so llama.cpp) at 0x2B920 — rust_ranges picks the latter. */
bool eng__bert_is_ws(uint32_t c);
bool eng__bert_is_control(uint32_t c);
bool eng__bert_is_punct(uint32_t c);
bool eng__bert_is_cjk(uint32_t c, bool rust_ranges);

#endif
