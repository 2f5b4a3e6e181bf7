/* Tokenizer core: vocabulary tables, special-token partitioning, dispatch to the model
 * passes (tok_spm.c, tok_bpe.c, tok_wpm.c), pieces and detokenization. */
#define _GNU_SOURCE /* memmem, qsort_r */
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tok_internal.h"
#include "util/util.h"

void eng__tok_err(char *err, size_t errlen, const char *fmt, ...) {
    if (!err || !errlen) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

/* ---- UTF-8 ------------------------------------------------------------------------ */

uint32_t eng__utf8_decode(const unsigned char *s, size_t n, int *adv) {
    unsigned char c = s[0];
    *adv = 1;
    if (c < 0x80) return c;
    int l = eng_utf8_len(c);
    if (l == 1 || (size_t)l > n) return 0xFFFD;
    uint32_t cp = c & (0x7F >> l);
    for (int i = 1; i < l; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0xFFFD;
        cp = (cp << 6) | (s[i] & 0x3F);
    }
    /* overlongs, surrogates, > U+10FFFF are invalid */
    static const uint32_t min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min_cp[l] || (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF) return 0xFFFD;
    *adv = l;
    return cp;
}

int eng__utf8_encode(uint32_t cp, char *o) {
    if (cp < 0x80) { o[0] = (char)cp; return 1; }
    if (cp < 0x800) { o[0] = (char)(0xC0 | (cp >> 6)); o[1] = (char)(0x80 | (cp & 0x3F)); return 2; }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | (cp >> 12)); o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (char)(0x80 | (cp & 0x3F)); return 3;
    }
    o[0] = (char)(0xF0 | (cp >> 18)); o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3F)); o[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* ---- vocabulary hash map ---------------------------------------------------------- */

#define MAP_SEED 0x746f6b656e697a65ull

int32_t eng__tok_map_get(const eng_tokenizer *t, const char *s, size_t n) {
    if (!t->map.slots) return -1;
    uint64_t h = lcx__hash64(s, n, MAP_SEED);
    for (uint32_t i = (uint32_t)h & t->map.mask;; i = (i + 1) & t->map.mask) {
        uint32_t v = t->map.slots[i];
        if (!v) return -1;
        int32_t id = (int32_t)(v - 1);
        if (t->len[id] == n && memcmp(t->blob + t->off[id], s, n) == 0) return id;
    }
}

/* Later duplicates replace earlier ones (as llama.cpp's token_to_id does). Empty tokens are
 * not indexed. */
static int map_build(eng_tokenizer *t) {
    uint32_t cap = 16;
    while (cap < (uint32_t)t->n * 2u) cap <<= 1;
    t->map.slots = calloc(cap, sizeof(uint32_t));
    if (!t->map.slots) return LCX_ENOMEM;
    t->map.mask = cap - 1;
    for (int32_t id = 0; id < t->n; id++) {
        const char *s = t->blob + t->off[id];
        size_t n = t->len[id];
        if (!n) continue;
        uint64_t h = lcx__hash64(s, n, MAP_SEED);
        for (uint32_t i = (uint32_t)h & t->map.mask;; i = (i + 1) & t->map.mask) {
            uint32_t v = t->map.slots[i];
            if (!v) { t->map.slots[i] = (uint32_t)id + 1; break; }
            int32_t o = (int32_t)(v - 1);
            if (t->len[o] == n && memcmp(t->blob + t->off[o], s, n) == 0) {
                t->map.slots[i] = (uint32_t)id + 1;
                break;
            }
        }
    }
    return 0;
}

/* ---- construction ----------------------------------------------------------------- */

void eng__tok_spec_init(eng_tok_spec *s) {
    memset(s, 0, sizeof *s);
    s->kind = ENG_TOK_SPM;
    s->bos = s->eos = s->unk = s->sep = s->pad = s->eot = s->eom = ENG_TOKEN_DEFAULT;
    s->add_bos = s->add_eos = s->add_space_prefix = -1;
}

static int resolve_id(int32_t given, int32_t dflt, int32_t n, int32_t *out, const char *what,
                      char *err, size_t errlen) {
    if (given == ENG_TOKEN_DEFAULT) {
        *out = (dflt >= 0 && dflt < n) ? dflt : ENG_TOKEN_NONE;
        return 0;
    }
    if (given == ENG_TOKEN_NONE) { *out = ENG_TOKEN_NONE; return 0; }
    if (given < 0 || given >= n) {
        eng__tok_err(err, errlen, "tokenizer: %s token id %d outside the vocabulary (%d tokens)",
                what, (int)given, (int)n);
        return LCX_ECORRUPT;
    }
    *out = given;
    return 0;
}

static int cmp_special(const void *a, const void *b, void *ctx) {
    const eng_tokenizer *t = ctx;
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    if (t->len[x] != t->len[y]) return t->len[x] > t->len[y] ? -1 : 1;
    return x < y ? -1 : x > y;
}

static bool icontains(const char *hay, const char *needle) {
    size_t n = strlen(needle);
    for (; *hay; hay++)
        if (strncasecmp(hay, needle, n) == 0) return true;
    return false;
}

/* Printable piece of one token (see eng__token_to_piece); appends to b. */
static int piece_build(const eng_tokenizer *t, int32_t id, lcx_buf *b) {
    const char *s = t->blob + t->off[id];
    size_t n = t->len[id];
    int ty = t->type[id];
    if (ty == ENG_TOKT_CONTROL || ty == ENG_TOKT_UNKNOWN) return 0;
    if (ty == ENG_TOKT_USER_DEFINED) return lcx__buf_append(b, s, n);
    if (t->kind == ENG_TOK_SPM && ty == ENG_TOKT_BYTE) {
        unsigned v;
        char tmp[8];
        if (n == 6 && memcmp(s, "<0x", 3) == 0 && s[5] == '>') {
            memcpy(tmp, s + 3, 2); tmp[2] = 0;
            char *end;
            v = (unsigned)strtoul(tmp, &end, 16);
            if (end == tmp + 2) { char c = (char)v; return lcx__buf_append(b, &c, 1); }
        }
        return lcx__buf_append(b, s, n);
    }
    if (t->kind == ENG_TOK_BPE) {
        for (size_t i = 0; i < n;) {
            int adv;
            uint32_t cp = eng__utf8_decode((const unsigned char *)s + i, n - i, &adv);
            int byte = eng__bpe_cp_to_byte(cp);
            int rc;
            if (byte >= 0) { char c = (char)byte; rc = lcx__buf_append(b, &c, 1); }
            else rc = lcx__buf_append(b, s + i, (size_t)adv);   /* not byte-mapped: keep */
            if (rc < 0) return rc;
            i += (size_t)adv;
        }
        return 0;
    }
    /* SPM / WPM normal: U+2581 -> ' ' */
    for (size_t i = 0; i < n;) {
        int rc;
        if (i + 3 <= n && memcmp(s + i, "\xE2\x96\x81", 3) == 0) { rc = lcx__buf_append(b, " ", 1); i += 3; }
        else { rc = lcx__buf_append(b, s + i, 1); i++; }
        if (rc < 0) return rc;
    }
    return 0;
}

/* The vocabulary's texts in one blob, with lengths, scores and types. */
static int copy_vocab(eng_tokenizer *t, const eng_tok_spec *s, char *err, size_t errlen) {
    const int32_t n = s->n_tokens;
    size_t total = 0;
    for (int32_t i = 0; i < n; i++) {
        if (s->token_lens[i] > ENG_TOK_MAX_TOKEN || (s->token_lens[i] && !s->tokens[i])) {
            eng__tok_err(err, errlen, "tokenizer: token %d is %zu bytes (cap %d)", (int)i,
                    s->token_lens[i], ENG_TOK_MAX_TOKEN);
            return LCX_ELIMIT;
        }
        total += s->token_lens[i];
    }
    if (total > (1u << 30)) {       /* all token texts together: 1 GiB cap */
        eng__tok_err(err, errlen, "tokenizer: vocabulary text of %zu bytes is too large", total);
        return LCX_ELIMIT;
    }
    t->blob = malloc(total ? total : 1);
    t->off = malloc(sizeof(uint32_t) * n);
    t->len = malloc(sizeof(uint32_t) * n);
    t->score = malloc(sizeof(float) * n);
    t->type = malloc((size_t)n);
    t->attr = calloc((size_t)n, 1);
    t->eog = calloc((size_t)n, 1);
    if (!t->blob || !t->off || !t->len || !t->score || !t->type || !t->attr || !t->eog) return LCX_ENOMEM;
    size_t o = 0;
    for (int32_t i = 0; i < n; i++) {
        t->off[i] = (uint32_t)o;
        t->len[i] = (uint32_t)s->token_lens[i];
        if (s->token_lens[i]) memcpy(t->blob + o, s->tokens[i], s->token_lens[i]);
        o += s->token_lens[i];
        if (t->len[i] > t->max_len) t->max_len = t->len[i];
        t->score[i] = s->scores ? s->scores[i] : 0.0f;
        int ty = s->token_types ? s->token_types[i] : ENG_TOKT_NORMAL;
        if (ty < 0 || ty > 6) ty = 0;       /* undefined: treated like normal text */
        t->type[i] = (uint8_t)ty;
    }
    return 0;
}

/* BOS/EOS/UNK/SEP/PAD/EOT/EOM and the add_* flags: the spec's, else the per-kind defaults
 * (llama.cpp's, so GGUF files without the keys behave the same). Picks the BPE
 * pre-tokenizer. */
static int resolve_specials(eng_tokenizer *t, const eng_tok_spec *s, char *err, size_t errlen) {
    const int32_t n = t->n;
    int32_t d_bos = -1, d_eos = -1, d_unk = -1, d_sep = -1, d_pad = -1;
    bool d_add_bos = false, d_space = false;
    int rc;
    if (t->kind == ENG_TOK_SPM) { d_bos = 1; d_eos = 2; d_unk = 0; d_add_bos = true; d_space = true; }
    else if (t->kind == ENG_TOK_WPM) { d_bos = 101; d_unk = 100; d_sep = 102; d_pad = 0; d_add_bos = true; }
    else {
        const char *pre = s->pre ? s->pre : "default";
        t->pre = eng__bpe_pre_from_name(pre, strlen(pre));
        if (t->pre < 0) {
            eng__tok_err(err, errlen, "tokenizer: unknown pre-tokenizer '%s'", pre);
            return LCX_ENOTSUP;
        }
        if (t->pre == ENG_PRE_LLAMA3 || t->pre == ENG_PRE_TEKKEN) { d_add_bos = true; t->ignore_merges = true; }
    }
    if ((rc = resolve_id(s->bos, d_bos, n, &t->bos, "BOS", err, errlen)) < 0) return rc;
    if ((rc = resolve_id(s->eos, d_eos, n, &t->eos, "EOS", err, errlen)) < 0) return rc;
    if ((rc = resolve_id(s->unk, d_unk, n, &t->unk, "UNK", err, errlen)) < 0) return rc;
    if ((rc = resolve_id(s->sep, d_sep, n, &t->sep, "SEP", err, errlen)) < 0) return rc;
    if ((rc = resolve_id(s->pad, d_pad, n, &t->pad, "PAD", err, errlen)) < 0) return rc;
    if ((rc = resolve_id(s->eot, -1, n, &t->eot, "EOT", err, errlen)) < 0) return rc;
    if ((rc = resolve_id(s->eom, -1, n, &t->eom, "EOM", err, errlen)) < 0) return rc;
    t->add_bos = s->add_bos >= 0 ? s->add_bos != 0 : d_add_bos;
    t->add_eos = s->add_eos >= 0 ? s->add_eos != 0 : false;
    t->add_space_prefix = s->add_space_prefix >= 0 ? s->add_space_prefix != 0 : d_space;
    return 0;
}

/* End-of-generation tokens found by text (models rarely declare EOT in metadata); like
 * llama.cpp they are forced to control type so they never print and parse as specials. */
static void mark_eog(eng_tokenizer *t) {
    static const char *const eog_text[] = {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>",
                                           "<|endoftext|>", "<|eom_id|>", "<EOT>"};
    for (size_t k = 0; k < LCX_ARRAY_LEN(eog_text); k++) {
        int32_t id = eng__tok_map_get(t, eog_text[k], strlen(eog_text[k]));
        if (id < 0) continue;
        t->eog[id] = 1;
        t->type[id] = ENG_TOKT_CONTROL;
        if (t->eot < 0 && k != 5) t->eot = id;
        if (t->eom < 0 && k == 5) t->eom = id;
    }
    if (t->eos >= 0) t->eog[t->eos] = 1;
    if (t->eot >= 0) t->eog[t->eot] = 1;
    if (t->eom >= 0) t->eog[t->eom] = 1;
}

/* SPM: whether spaces are stored as U+2581 (llama2.c's tokenizer.bin, and a GGUF converted
 * from it verbatim, store raw spaces: detect which so both encode the same), and the
 * <0xNN> byte-fallback tokens. */
static void spm_setup(eng_tokenizer *t) {
    for (int i = 0; i < 256; i++) t->byte_tok[i] = -1;
    if (t->kind != ENG_TOK_SPM) return;
    size_t n_esc = 0, n_raw = 0;
    for (int32_t i = 0; i < t->n; i++) {
        const char *p = t->blob + t->off[i];
        if (memmem(p, t->len[i], "\xE2\x96\x81", 3)) n_esc++;
        else if (memchr(p, ' ', t->len[i])) n_raw++;
    }
    t->escape_ws = n_esc > 0 || n_raw == 0;
    for (int b = 0; b < 256; b++) {
        char hex[8];
        snprintf(hex, sizeof hex, "<0x%02X>", b);
        t->byte_tok[b] = eng__tok_map_get(t, hex, 6);
    }
}

static bool is_special(const eng_tokenizer *t, int32_t i) {
    return (t->type[i] == ENG_TOKT_CONTROL || t->type[i] == ENG_TOKT_USER_DEFINED || t->type[i] == ENG_TOKT_UNKNOWN) &&
           t->len[i] > 0;
}

/* The special tokens, longest first so "<|im_start|>" wins over a shorter prefix token;
 * Phi-3's strip whitespace to their right. */
static int index_specials(eng_tokenizer *t, const eng_tok_spec *s) {
    int32_t ns = 0;
    for (int32_t i = 0; i < t->n; i++) ns += is_special(t, i);
    t->special = malloc(sizeof(int32_t) * (ns ? ns : 1));
    if (!t->special) return LCX_ENOMEM;
    for (int32_t i = 0; i < t->n; i++)
        if (is_special(t, i)) t->special[t->n_special++] = i;
    qsort_r(t->special, (size_t)t->n_special, sizeof(int32_t), cmp_special, t);
    /* Phi-3's HF added_tokens say rstrip; llama.cpp keys this on the model name, as GGUF
     * has no per-token attributes. */
    if (s->model_name && (icontains(s->model_name, "phi-3") || icontains(s->model_name, "phi3"))) {
        for (int32_t k = 0; k < t->n_special; k++) t->attr[t->special[k]] |= ENG_TOKA_RSTRIP;
        int32_t id = eng__tok_map_get(t, "</s>", 4);
        if (id >= 0) t->attr[id] |= ENG_TOKA_RSTRIP;
        static const char *const keep[] = {"<unk>", "<s>", "<|endoftext|>"};
        for (size_t k = 0; k < 3; k++) {
            id = eng__tok_map_get(t, keep[k], strlen(keep[k]));
            if (id >= 0) t->attr[id] &= (uint8_t)~ENG_TOKA_RSTRIP;
        }
    }
    return 0;
}

/* Every token's printable piece, in one blob. */
static int build_pieces(eng_tokenizer *t) {
    lcx_buf b = {0};
    int rc;
    t->poff = malloc(sizeof(uint32_t) * t->n);
    t->plen = malloc(sizeof(uint32_t) * t->n);
    if (!t->poff || !t->plen) return LCX_ENOMEM;
    for (int32_t i = 0; i < t->n; i++) {
        size_t before = b.len;
        if ((rc = piece_build(t, i, &b)) < 0) { lcx__buf_free(&b); return rc; }
        t->poff[i] = (uint32_t)before;
        t->plen[i] = (uint32_t)(b.len - before);
    }
    if (!b.data && (rc = lcx__buf_append(&b, "", 0)) < 0) return rc;
    t->pblob = b.data;
    if (!t->pblob && !(t->pblob = malloc(1))) return LCX_ENOMEM;
    return 0;
}

int eng__tokenizer_from_spec(const eng_tok_spec *s, eng_tokenizer **out, char *err, size_t errlen) {
    if (!out) return LCX_EINVAL;
    *out = NULL;
    if (!s || s->n_tokens <= 0 || !s->tokens || !s->token_lens) {
        eng__tok_err(err, errlen, "tokenizer: empty vocabulary");
        return LCX_EINVAL;
    }
    if (s->n_tokens > ENG_TOK_MAX_VOCAB) {
        eng__tok_err(err, errlen, "tokenizer: %d tokens exceed the cap of %d", (int)s->n_tokens, ENG_TOK_MAX_VOCAB);
        return LCX_ELIMIT;
    }
    if (s->kind != ENG_TOK_SPM && s->kind != ENG_TOK_BPE && s->kind != ENG_TOK_WPM) {
        eng__tok_err(err, errlen, "tokenizer: unknown kind %d", (int)s->kind);
        return LCX_EINVAL;
    }
    eng_tokenizer *t = calloc(1, sizeof *t);
    if (!t) return LCX_ENOMEM;
    t->kind = s->kind;
    t->n = s->n_tokens;
    int rc = copy_vocab(t, s, err, errlen);
    if (rc >= 0) rc = map_build(t);
    if (rc >= 0) rc = resolve_specials(t, s, err, errlen);
    if (rc >= 0) {
        mark_eog(t);
        spm_setup(t);
        rc = index_specials(t, s);
    }
    if (rc >= 0 && t->kind == ENG_TOK_BPE) rc = eng__bpe_init(t, s, err, errlen);
    if (rc >= 0) rc = build_pieces(t);
    if (rc < 0) {
        if (rc == LCX_ENOMEM) eng__tok_err(err, errlen, "tokenizer: out of memory");
        eng__tokenizer_free(t);
        return rc;
    }
    *out = t;
    return 0;
}

void eng__tokenizer_free(eng_tokenizer *t) {
    if (!t) return;
    if (t->kind == ENG_TOK_BPE) eng__bpe_free(t);
    free(t->blob); free(t->off); free(t->len); free(t->score); free(t->type); free(t->attr);
    free(t->eog); free(t->map.slots); free(t->pblob); free(t->poff); free(t->plen);
    free(t->special);
    free(t);
}

/* ---- BERT vocab.txt ----------------------------------------------------------------- */

/* Rewrites vocab.txt entries into the representation llama.cpp's converter stores in GGUF
 * (word-initial pieces "\u2581word", continuation pieces bare), so both paths share one
 * WordPiece implementation and give identical ids. */
int eng__tokenizer_from_vocab_txt(const char *path, eng_tokenizer **out, char *err, size_t errlen) {
    if (!out) return LCX_EINVAL;
    *out = NULL;
    char *data = NULL;
    size_t dlen = 0;
    int rc = lcx__read_file(path, 64u << 20, &data, &dlen);
    if (rc < 0) { eng__tok_err(err, errlen, "vocab.txt: cannot read %s (%s)", path, lcx_strerror(rc)); return rc; }
    int32_t n = 0;
    for (size_t i = 0; i < dlen; i++) if (data[i] == '\n') n++;
    if (dlen && data[dlen - 1] != '\n') n++;
    if (n <= 0 || n > ENG_TOK_MAX_VOCAB) { free(data); eng__tok_err(err, errlen, "vocab.txt: %d lines", (int)n); return n <= 0 ? LCX_ECORRUPT : LCX_ELIMIT; }
    char **toks = calloc((size_t)n, sizeof(char *));
    size_t *lens = calloc((size_t)n, sizeof(size_t));
    int32_t *types = calloc((size_t)n, sizeof(int32_t));
    rc = LCX_ENOMEM;
    if (!toks || !lens || !types) goto done;
    size_t p = 0;
    int32_t bos = ENG_TOKEN_NONE, unk = ENG_TOKEN_NONE, sep = ENG_TOKEN_NONE, pad = ENG_TOKEN_NONE;
    for (int32_t i = 0; i < n; i++) {
        size_t e = p;
        while (e < dlen && data[e] != '\n') e++;
        size_t l = e - p;
        if (l && data[p + l - 1] == '\r') l--;
        const char *w = data + p;
        p = e + 1;
        static const char *const ctl[] = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};
        int is_ctl = -1;
        for (int k = 0; k < 5; k++)
            if (l == strlen(ctl[k]) && memcmp(w, ctl[k], l) == 0) is_ctl = k;
        bool unused = l > 8 && memcmp(w, "[unused", 7) == 0 && w[l - 1] == ']';
        toks[i] = malloc(l + 4);
        if (!toks[i]) goto done;
        types[i] = is_ctl >= 0 ? ENG_TOKT_CONTROL : ENG_TOKT_NORMAL;
        if (is_ctl >= 0 || unused) { memcpy(toks[i], w, l); lens[i] = l; }
        else if (l >= 2 && w[0] == '#' && w[1] == '#') { memcpy(toks[i], w + 2, l - 2); lens[i] = l - 2; }
        else { memcpy(toks[i], "\xE2\x96\x81", 3); memcpy(toks[i] + 3, w, l); lens[i] = l + 3; }
        if (is_ctl == 0) pad = i;
        if (is_ctl == 1) unk = i;
        if (is_ctl == 2) bos = i;
        if (is_ctl == 3) sep = i;
    }
    eng_tok_spec s;
    eng__tok_spec_init(&s);
    s.kind = ENG_TOK_WPM;
    s.n_tokens = n;
    s.tokens = (const char *const *)toks;
    s.token_lens = lens;
    s.token_types = types;
    s.bos = bos; s.unk = unk; s.sep = sep; s.pad = pad;
    s.eos = ENG_TOKEN_NONE;
    rc = eng__tokenizer_from_spec(&s, out, err, errlen);
done:
    if (rc == LCX_ENOMEM) eng__tok_err(err, errlen, "vocab.txt: out of memory");
    if (toks) for (int32_t i = 0; i < n; i++) free(toks[i]);
    free(toks); free(lens); free(types); free(data);
    return rc;
}

/* ---- getters ------------------------------------------------------------------------ */

int32_t eng__tokenizer_n_vocab(const eng_tokenizer *t) { return t ? t->n : 0; }
eng_tok_kind eng__tokenizer_kind(const eng_tokenizer *t) { return t->kind; }
bool eng__tokenizer_adds_space_prefix(const eng_tokenizer *t) { return t->add_space_prefix; }
int32_t eng__token_bos(const eng_tokenizer *t) { return t->bos; }
int32_t eng__token_eos(const eng_tokenizer *t) { return t->eos; }
int32_t eng__token_unk(const eng_tokenizer *t) { return t->unk; }
int32_t eng__token_sep(const eng_tokenizer *t) { return t->sep; }
int32_t eng__token_eot(const eng_tokenizer *t) { return t->eot; }
bool eng__tokenizer_add_bos(const eng_tokenizer *t) { return t->add_bos; }
bool eng__tokenizer_add_eos(const eng_tokenizer *t) { return t->add_eos; }
bool eng__token_is_eog(const eng_tokenizer *t, int32_t id) {
    return t && id >= 0 && id < t->n && t->eog[id];
}

const char *eng__token_text(const eng_tokenizer *t, int32_t id, size_t *len) {
    if (!t || id < 0 || id >= t->n) return NULL;
    if (len) *len = t->len[id];
    return t->blob + t->off[id];
}

int eng__token_type(const eng_tokenizer *t, int32_t id) {
    if (!t || id < 0 || id >= t->n) return LCX_EINVAL;
    return t->type[id];
}

int32_t eng__token_lookup(const eng_tokenizer *t, const char *text, size_t len) {
    if (!t || (!text && len)) return ENG_TOKEN_NONE;
    return eng__tok_map_get(t, text, len);
}

/* ---- special-token partition ------------------------------------------------------- */

typedef struct {
    int32_t tok;        /* -1 = raw text */
    size_t off, len;
} frag;

typedef struct {
    frag *v;
    size_t n, cap;
} frag_vec;

static int frag_push(frag_vec *f, int32_t tok, size_t off, size_t len) {
    if (f->n == f->cap) {
        size_t nc = f->cap ? f->cap * 2 : 16;
        frag *nv = realloc(f->v, nc * sizeof(frag));
        if (!nv) return LCX_ENOMEM;
        f->v = nv;
        f->cap = nc;
    }
    f->v[f->n++] = (frag){tok, off, len};
    return 0;
}

/* Splits the text at every occurrence of each special token, longest tokens first (the
 * order llama.cpp uses, which decides overlaps between special tokens). Cost is one
 * memmem pass over the remaining raw text per special token. */
static int partition(const eng_tokenizer *t, const char *text, size_t len, bool parse_special,
                     frag_vec *cur) {
    frag_vec nxt = {0};
    int rc = 0;
    if ((rc = frag_push(cur, -1, 0, len)) < 0) return rc;
    for (int32_t k = 0; k < t->n_special; k++) {
        int32_t id = t->special[k];
        int ty = t->type[id];
        if (!parse_special && (ty == ENG_TOKT_CONTROL || ty == ENG_TOKT_UNKNOWN)) continue;
        const char *st = t->blob + t->off[id];
        size_t sl = t->len[id];
        bool any = false;
        nxt.n = 0;
        for (size_t f = 0; f < cur->n; f++) {
            frag fr = cur->v[f];
            if (fr.tok >= 0 || fr.len < sl) {
                if ((rc = frag_push(&nxt, fr.tok, fr.off, fr.len)) < 0) goto out;
                continue;
            }
            size_t pos = fr.off, end = fr.off + fr.len;
            while (pos < end) {
                const char *m = memmem(text + pos, end - pos, st, sl);
                if (!m) break;
                any = true;
                size_t mo = (size_t)(m - text);
                size_t ll = mo - pos;
                if (t->attr[id] & ENG_TOKA_LSTRIP)
                    while (ll > 0 && isspace((unsigned char)text[pos + ll - 1])) ll--;
                if (ll && (rc = frag_push(&nxt, -1, pos, ll)) < 0) goto out;
                if ((rc = frag_push(&nxt, id, mo, sl)) < 0) goto out;
                pos = mo + sl;
                if (t->attr[id] & ENG_TOKA_RSTRIP)
                    while (pos < end && isspace((unsigned char)text[pos])) pos++;
            }
            if (pos < end && (rc = frag_push(&nxt, -1, pos, end - pos)) < 0) goto out;
        }
        if (any) { frag_vec tmp = *cur; *cur = nxt; nxt = tmp; }
    }
out:
    free(nxt.v);
    return rc;
}

int eng__tokenize(const eng_tokenizer *t, const char *text, size_t len, bool add_special,
                 bool parse_special, int32_t *out, int max) {
    if (!t || (!text && len) || max < 0 || (!out && max > 0)) return LCX_EINVAL;
    if (len > ENG_TOK_MAX_INPUT) return LCX_ELIMIT;
    eng_tok_out o = {out, max, 0};
    frag_vec fr = {0};
    int rc = 0;
    if (len && (rc = partition(t, text, len, parse_special, &fr)) < 0) goto done;

    if (t->kind == ENG_TOK_WPM) {
        if (add_special && t->bos >= 0) eng_tok_push(&o, t->bos);
    } else if (add_special && t->add_bos && t->bos >= 0) {
        eng_tok_push(&o, t->bos);
    }
    bool prev_special = true;   /* SPM: dummy prefix at the start and after each special */
    for (size_t i = 0; i < fr.n; i++) {
        const frag *f = &fr.v[i];
        if (f->tok >= 0) { eng_tok_push(&o, f->tok); prev_special = true; continue; }
        switch (t->kind) {
        case ENG_TOK_SPM:
            rc = eng__spm_encode(t, text + f->off, f->len, t->add_space_prefix && prev_special, &o);
            break;
        case ENG_TOK_BPE: rc = eng__bpe_encode(t, text + f->off, f->len, &o); break;
        case ENG_TOK_WPM: rc = eng__wpm_encode(t, text + f->off, f->len, &o); break;
        }
        if (rc < 0) goto done;
        prev_special = false;
    }
    if (t->kind == ENG_TOK_WPM) {
        if (add_special && t->sep >= 0) eng_tok_push(&o, t->sep);
    } else if (add_special && t->add_eos && t->eos >= 0) {
        eng_tok_push(&o, t->eos);
    }
    rc = o.n > max ? LCX_ELIMIT : o.n;
done:
    free(fr.v);
    return rc;
}

/* ---- pieces and detokenization ---------------------------------------------------- */

size_t eng__utf8_stream_cut(const char *buf, size_t n) {
    if (!buf || !n) return 0;
    /* look back at most 3 bytes for the lead byte of the last sequence */
    size_t i = n, back = 0;
    while (i > 0 && back < 3 && ((unsigned char)buf[i - 1] & 0xC0) == 0x80) { i--; back++; }
    if (i == 0) return n;                                   /* only continuation bytes */
    unsigned char lead = (unsigned char)buf[i - 1];
    int need = eng_utf8_len(lead);
    if (lead < 0xC2 || lead > 0xF4 || need == 1) return n;  /* ASCII or malformed: emit */
    size_t have = back + 1;
    if (have >= (size_t)need) return n;                     /* complete */
    /* incomplete: hold it back only if the bytes so far could still form a valid sequence */
    if (have >= 2) {
        unsigned char c1 = (unsigned char)buf[i];
        if ((lead == 0xE0 && c1 < 0xA0) || (lead == 0xED && c1 > 0x9F) ||
            (lead == 0xF0 && c1 < 0x90) || (lead == 0xF4 && c1 > 0x8F)) return n;
    }
    return i - 1;
}

int eng__token_to_piece(const eng_tokenizer *t, int32_t id, char *buf, size_t n) {
    if (!t || id < 0 || id >= t->n || (!buf && n)) return LCX_EINVAL;
    size_t l = t->plen[id];
    if (n) memcpy(buf, t->pblob + t->poff[id], l < n ? l : n);
    return (int)l;
}

int eng__detokenize(const eng_tokenizer *t, const int32_t *ids, int n, char *buf, size_t cap) {
    if (!t || n < 0 || (!ids && n) || (!buf && cap)) return LCX_EINVAL;
    size_t total = 0;
    /* SPM's dummy prefix (and WordPiece's word-initial marker) puts a space in front of the
     * first piece that was not in the text: drop it, as llama2.c's decode does after BOS. */
    bool strip = t->add_space_prefix || t->kind == ENG_TOK_WPM;
    for (int i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= t->n) return LCX_EINVAL;
        const char *p = t->pblob + t->poff[ids[i]];
        size_t l = t->plen[ids[i]];
        if (!l) continue;
        if (strip && p[0] == ' ') { p++; l--; }
        strip = false;
        if (total < cap) {
            size_t room = cap - 1 - total;
            memcpy(buf + total, p, l < room ? l : room);
        }
        total += l;
        if (total > (size_t)INT32_MAX) return LCX_ELIMIT;
    }
    if (cap) buf[total < cap ? total : cap - 1] = 0;
    return (int)total;
}
