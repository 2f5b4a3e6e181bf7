/* Shared internals of the tokenizers (tok_*.c). Not a public header. */
#ifndef ENG_TOK_INTERNAL_H
#define ENG_TOK_INTERNAL_H

#include <stdint.h>
#include <stddef.h>
#include <stdbool.h>
#include "tokenizer.h"

/* Formats a message into err when err/errlen allow (tok_common.c). */
void eng__tok_err(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

/* Pre-tokenizer families for byte-level BPE (tokenizer.ggml.pre). */
enum {
    ENG_PRE_DEFAULT = 0, ENG_PRE_GPT2, ENG_PRE_LLAMA3, ENG_PRE_QWEN2, ENG_PRE_FALCON,
    ENG_PRE_STARCODER, ENG_PRE_TEKKEN
};

/* Per-token attribute bits (besides the GGUF type). */
enum { ENG_TOKA_LSTRIP = 1, ENG_TOKA_RSTRIP = 2 };

#define ENG_TOK_MAX_REGEX 4

/* Open-addressing hash map: byte string -> token id. Slots hold id+1 (0 = empty); the
 * strings live in the tokenizer's blob so the table stores only ints. */
typedef struct {
    uint32_t *slots;
    uint32_t mask;
} eng_tok_map;

/* Merge table for byte-level BPE: (left id, right id) -> rank and the merged token id. */
typedef struct {
    uint64_t key;       /* (left << 32 | right) + 1; 0 = empty */
    int32_t rank;
    int32_t result;     /* id of left+right text, -1 when the vocabulary lacks it */
} eng_tok_merge;

struct eng_tokenizer {
    eng_tok_kind kind;
    int pre;
    int32_t n;                  /* vocabulary size */
    char *blob;                 /* all token texts back to back */
    uint32_t *off, *len;        /* [n] */
    float *score;               /* [n] */
    uint8_t *type;              /* [n] ENG_TOKT_* */
    uint8_t *attr;              /* [n] ENG_TOKA_* */
    uint8_t *eog;               /* [n] 1 = end of generation */
    eng_tok_map map;
    uint32_t max_len;           /* longest token, bytes */

    /* printable pieces, precomputed (token_to_piece is on the decode path) */
    char *pblob;
    uint32_t *poff, *plen;

    int32_t bos, eos, unk, sep, pad, eot, eom;
    bool add_bos, add_eos, add_space_prefix;
    bool ignore_merges;
    bool escape_ws;             /* SPM: ' ' is stored as U+2581 (false: raw ' ', llama2.c style) */

    int32_t byte_tok[256];      /* SPM: <0xNN> ids; BPE: id of the byte-mapped char; -1 */

    /* special tokens (control / user-defined / unknown), longest text first */
    int32_t *special;
    int32_t n_special;

    /* BPE */
    eng_tok_merge *merges;
    uint32_t merge_mask;
    int32_t n_merges;
    pcre2_code *re[ENG_TOK_MAX_REGEX];
    int n_re;
};

/* Growable id output with the caller's max: ids beyond max are counted but not stored. */
typedef struct {
    int32_t *out;
    int max;
    int n;          /* ids produced so far (may exceed max) */
} eng_tok_out;

static inline void eng_tok_push(eng_tok_out *o, int32_t id) {
    if (o->n < o->max) o->out[o->n] = id;
    o->n++;
}

int32_t eng__tok_map_get(const eng_tokenizer *t, const char *s, size_t n);

/* Unicode helpers (tok_common.c). */
/* Decodes one code point at s[0..n) (n >= 1); invalid sequences give 0xFFFD and *adv = 1. */
uint32_t eng__utf8_decode(const unsigned char *s, size_t n, int *adv);
int      eng__utf8_encode(uint32_t cp, char *out);     /* 1..4 bytes */
/* Byte length of the UTF-8 sequence started by lead byte c (1 for invalid leads). */
static inline int eng_utf8_len(unsigned char c) {
    return c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
}

/* Model passes: encode one raw-text fragment. Return 0 or LCX_ENOMEM. */
int eng__spm_encode(const eng_tokenizer *t, const char *text, size_t len, bool prefix_space,
                   eng_tok_out *o);
int eng__bpe_encode(const eng_tokenizer *t, const char *text, size_t len, eng_tok_out *o);
int eng__wpm_encode(const eng_tokenizer *t, const char *text, size_t len, eng_tok_out *o);

/* BPE setup (tok_bpe.c): regexes for t->pre, merges, byte map. */
int  eng__bpe_init(eng_tokenizer *t, const eng_tok_spec *s, char *err, size_t errlen);
void eng__bpe_free(eng_tokenizer *t);
int  eng__bpe_pre_from_name(const char *name, size_t len);   /* -1 unknown */
/* Test hook: pre-tokenizer chunks of text as (offset, length) pairs in *spans (malloc'd,
 * 2 * *n entries). LCX_EINVAL for a non-BPE tokenizer. */
int  eng__bpe_split(const eng_tokenizer *t, const char *text, size_t len, size_t **spans, size_t *n);
/* GPT-2 byte <-> unicode map. */
uint32_t eng__bpe_byte_to_cp(uint8_t b);
int      eng__bpe_cp_to_byte(uint32_t cp);                   /* -1 when not a mapped char */

#endif
