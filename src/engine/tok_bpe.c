/* Byte-level BPE (tokenizer.ggml.model = "gpt2"): GPT-2, MPT/NeoX, Falcon, Llama-3, Qwen2.
 *
 * 1. Pre-tokenize: the pre-tokenizer regexes of tokenizer.ggml.pre, run with PCRE2 in UTF +
 *    UCP mode (\p{L}, \p{N}, \s are Unicode-aware). Several regexes run in sequence as in
 *    llama.cpp / Hugging Face "Sequence" pre-tokenizers: each one splits every chunk the
 *    previous one produced, and the text between matches stays a chunk of its own.
 * 2. Each chunk's bytes become GPT-2's printable stand-ins (bytes_to_unicode); one symbol per
 *    byte, whose id is the vocabulary entry of that stand-in character.
 * 3. Merge: repeatedly apply the adjacent pair with the lowest merge rank (leftmost on ties).
 *    Pairs are looked up by (left id, right id) in a hash table built at load that also holds
 *    the merged token id, so merging never touches strings. A min-heap over candidate pairs
 *    plus a linked list of symbols makes a word of n bytes O(n log n) instead of the naive
 *    O(n^2) rescan; stale heap entries (a side already merged) are skipped by id checks. */
#include <stdlib.h>
#include <string.h>

#include "tok_internal.h"
#include "util/util.h"

/* ---- GPT-2 bytes_to_unicode ----------------------------------------------------------
 * Printable bytes ('!'..'~', 0xA1..0xAC, 0xAE..0xFF) stand for themselves; the other 68
 * bytes (0x00..0x20, 0x7F..0xA0, 0xAD) map in order to U+0100..U+0143. */
uint32_t eng__bpe_byte_to_cp(uint8_t b) {
    if (b <= 0x20) return 256u + b;
    if (b >= 0x7F && b <= 0xA0) return 256u + 33u + (b - 0x7Fu);
    if (b == 0xAD) return 256u + 67u;
    return b;
}

int eng__bpe_cp_to_byte(uint32_t cp) {
    if (cp < 256) {
        if (cp <= 0x20 || (cp >= 0x7F && cp <= 0xA0) || cp == 0xAD) return -1;
        return (int)cp;
    }
    if (cp <= 256 + 32) return (int)(cp - 256);
    if (cp <= 256 + 66) return (int)(cp - 256 - 33 + 0x7F);
    if (cp == 256 + 67) return 0xAD;
    return -1;
}

/* ---- pre-tokenizer regexes ---------------------------------------------------------- */

/* The Hugging Face originals (tokenizer.json) where llama.cpp rewrote them for std::regex:
 * PCRE2 handles (?i:...) and \p{..} natively. */
#define RE_GPT2 "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"
#define RE_LLAMA3 "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
/* Mistral's Tekken: case-aware words (camelCase splits), single digits */
#define RE_TEKKEN "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RE_QWEN2 "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"

static const struct {
    const char *name;
    int pre;
} pre_names[] = {
    {"default", ENG_PRE_DEFAULT},
    {"gpt-2", ENG_PRE_GPT2}, {"mpt", ENG_PRE_GPT2}, {"olmo", ENG_PRE_GPT2}, {"jais", ENG_PRE_GPT2},
    {"phi-2", ENG_PRE_GPT2}, {"roberta-bpe", ENG_PRE_GPT2}, {"jina-es", ENG_PRE_GPT2},
    {"jina-de", ENG_PRE_GPT2}, {"jina-v1-en", ENG_PRE_GPT2}, {"jina-v2-es", ENG_PRE_GPT2},
    {"jina-v2-de", ENG_PRE_GPT2}, {"jina-v2-code", ENG_PRE_GPT2}, {"gigachat", ENG_PRE_GPT2},
    {"llama3", ENG_PRE_LLAMA3}, {"llama-v3", ENG_PRE_LLAMA3}, {"llama-bpe", ENG_PRE_LLAMA3},
    {"falcon3", ENG_PRE_LLAMA3}, {"dbrx", ENG_PRE_LLAMA3}, {"smaug-bpe", ENG_PRE_LLAMA3},
    {"qwen2", ENG_PRE_QWEN2}, {"stablelm2", ENG_PRE_QWEN2}, {"megrez", ENG_PRE_QWEN2},
    {"deepseek-r1-qwen", ENG_PRE_QWEN2},
    {"tekken", ENG_PRE_TEKKEN},
    {"falcon", ENG_PRE_FALCON},
    {"starcoder", ENG_PRE_STARCODER}, {"refact", ENG_PRE_STARCODER}, {"command-r", ENG_PRE_STARCODER},
    {"smollm", ENG_PRE_STARCODER}, {"codeshell", ENG_PRE_STARCODER}, {"exaone", ENG_PRE_STARCODER},
    {"minerva-7b", ENG_PRE_STARCODER},
};

int eng__bpe_pre_from_name(const char *name, size_t len) {
    for (size_t i = 0; i < LCX_ARRAY_LEN(pre_names); i++)
        if (strlen(pre_names[i].name) == len && memcmp(pre_names[i].name, name, len) == 0)
            return pre_names[i].pre;
    return -1;
}

static int compile_res(eng_tokenizer *t, char *err, size_t errlen) {
    const char *re[ENG_TOK_MAX_REGEX] = {0};
    int n = 0;
    switch (t->pre) {
    case ENG_PRE_GPT2: re[n++] = RE_GPT2; break;
    case ENG_PRE_LLAMA3: re[n++] = RE_LLAMA3; break;
    case ENG_PRE_QWEN2: re[n++] = RE_QWEN2; break;
    case ENG_PRE_TEKKEN: re[n++] = RE_TEKKEN; break;
    case ENG_PRE_FALCON:
        /* HF: Punctuation(contiguous) -> ByteLevel regex -> 3-digit groups */
        re[n++] = "[\\p{P}\\$\\+<=>\\^~\\|`]+";
        re[n++] = RE_GPT2;
        re[n++] = "[0-9][0-9][0-9]";
        break;
    case ENG_PRE_STARCODER:
        re[n++] = "\\p{N}";
        re[n++] = RE_GPT2;
        break;
    default:
        re[n++] = "[\\p{P}\\$\\+<=>\\^~\\|]+";
        re[n++] = RE_GPT2;
        re[n++] = "\\p{N}+";
        re[n++] = "[0-9][0-9][0-9]";
        break;
    }
    for (int i = 0; i < n; i++) {
        int ec;
        PCRE2_SIZE eo;
        t->re[i] = pcre2_compile((PCRE2_SPTR)re[i], PCRE2_ZERO_TERMINATED,
                                 PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &ec, &eo, NULL);
        if (!t->re[i]) {
            PCRE2_UCHAR msg[128];
            pcre2_get_error_message(ec, msg, sizeof msg);
            if (err && errlen) snprintf(err, errlen, "tokenizer: regex %d: %s at %zu", i, (char *)msg, (size_t)eo);
            return LCX_EINVAL;
        }
        t->n_re = i + 1;
        /* JIT is an optimisation only: the interpreter gives the same matches */
        (void)pcre2_jit_compile(t->re[i], PCRE2_JIT_COMPLETE);
    }
    return 0;
}

/* ---- merges ------------------------------------------------------------------------- */

static inline uint64_t merge_key(int32_t l, int32_t r) {
    return (((uint64_t)(uint32_t)l << 32) | (uint32_t)r) + 1;
}

static inline uint32_t merge_hash(uint64_t k) {
    k ^= k >> 33; k *= 0xff51afd7ed558ccdull; k ^= k >> 33; k *= 0xc4ceb9fe1a85ec53ull; k ^= k >> 33;
    return (uint32_t)k;
}

static const eng_tok_merge *merge_get(const eng_tokenizer *t, int32_t l, int32_t r) {
    if (!t->merges) return NULL;
    uint64_t k = merge_key(l, r);
    for (uint32_t i = merge_hash(k) & t->merge_mask;; i = (i + 1) & t->merge_mask) {
        const eng_tok_merge *m = &t->merges[i];
        if (m->key == k) return m;
        if (m->key == 0) return NULL;
    }
}

int eng__bpe_init(eng_tokenizer *t, const eng_tok_spec *s, char *err, size_t errlen) {
    int rc;
    for (int b = 0; b < 256; b++) {
        char u[4];
        int l = eng__utf8_encode(eng__bpe_byte_to_cp((uint8_t)b), u);
        t->byte_tok[b] = eng__tok_map_get(t, u, (size_t)l);
    }
    if (s->n_merges < 0 || (s->n_merges && (!s->merges || !s->merge_lens))) return LCX_EINVAL;
    uint32_t cap = 16;
    while (cap < (uint32_t)s->n_merges * 2u + 2u) cap <<= 1;
    t->merges = calloc(cap, sizeof(eng_tok_merge));
    if (!t->merges) return LCX_ENOMEM;
    t->merge_mask = cap - 1;
    char *tmp = malloc(2 * ENG_TOK_MAX_TOKEN + 2);
    if (!tmp) return LCX_ENOMEM;
    for (int32_t r = 0; r < s->n_merges; r++) {
        const char *m = s->merges[r];
        size_t ml = s->merge_lens[r];
        if (ml > 2 * ENG_TOK_MAX_TOKEN) continue;
        /* "left right": split at the first space after the first byte (a left side may
         * itself be a space in non-byte-mapped vocabularies) */
        const char *sp = ml > 1 ? memchr(m + 1, ' ', ml - 1) : NULL;
        if (!sp) continue;
        size_t ll = (size_t)(sp - m), rl = ml - ll - 1;
        int32_t li = eng__tok_map_get(t, m, ll), ri = eng__tok_map_get(t, sp + 1, rl);
        if (li < 0 || ri < 0) continue;
        memcpy(tmp, m, ll);
        memcpy(tmp + ll, sp + 1, rl);
        int32_t res = eng__tok_map_get(t, tmp, ll + rl);
        uint64_t k = merge_key(li, ri);
        for (uint32_t i = merge_hash(k) & t->merge_mask;; i = (i + 1) & t->merge_mask) {
            eng_tok_merge *e = &t->merges[i];
            if (e->key == k) break;                 /* duplicate: first rank wins */
            if (e->key == 0) { *e = (eng_tok_merge){k, r, res}; t->n_merges++; break; }
        }
    }
    free(tmp);
    if ((rc = compile_res(t, err, errlen)) < 0) return rc;
    return 0;
}

void eng__bpe_free(eng_tokenizer *t) {
    for (int i = 0; i < t->n_re; i++) pcre2_code_free(t->re[i]);
    t->n_re = 0;
    free(t->merges);
    t->merges = NULL;
}

/* ---- encode -------------------------------------------------------------------------- */

typedef struct { size_t off, len; } span;
typedef struct { span *v; size_t n, cap; } span_vec;

static int span_push(span_vec *s, size_t off, size_t len) {
    if (!len) return 0;
    if (s->n == s->cap) {
        size_t nc = s->cap ? s->cap * 2 : 64;
        span *nv = realloc(s->v, nc * sizeof(span));
        if (!nv) return LCX_ENOMEM;
        s->v = nv;
        s->cap = nc;
    }
    s->v[s->n++] = (span){off, len};
    return 0;
}

/* One regex over every chunk of in -> out (matches and the gaps between them). */
static int split_re(const pcre2_code *re, pcre2_match_data *md, const char *text,
                    const span_vec *in, span_vec *out) {
    int rc;
    out->n = 0;
    for (size_t c = 0; c < in->n; c++) {
        const char *sub = text + in->v[c].off;
        size_t sl = in->v[c].len, pos = 0, last = 0;
        while (pos < sl) {
            int m = pcre2_match(re, (PCRE2_SPTR)sub, sl, pos, 0, md, NULL);
            if (m < 0 && m != PCRE2_ERROR_NOMATCH)   /* e.g. JIT stack exhausted: interpreter */
                m = pcre2_match(re, (PCRE2_SPTR)sub, sl, pos, PCRE2_NO_JIT, md, NULL);
            if (m == PCRE2_ERROR_NOMATCH) break;       /* rest of the chunk is a gap */
            if (m < 0) return LCX_ELIMIT;              /* match/heap limit: refuse, never guess */
            PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
            size_t s0 = ov[0], s1 = ov[1];
            if (s1 <= s0) {             /* empty match: step one character */
                pos = s0 + (size_t)eng_utf8_len((unsigned char)sub[s0]);
                continue;
            }
            if ((rc = span_push(out, in->v[c].off + last, s0 - last)) < 0) return rc;
            if ((rc = span_push(out, in->v[c].off + s0, s1 - s0)) < 0) return rc;
            last = pos = s1;
        }
        if ((rc = span_push(out, in->v[c].off + last, sl - last)) < 0) return rc;
    }
    return 0;
}

typedef struct {
    int prev, next;
    int32_t id;             /* current token id; -1 = not in vocabulary (falls back to bytes) */
    uint32_t start, n;      /* bytes of the word */
} bsym;

typedef struct {
    int32_t rank;
    int left, right;
    int32_t lid, rid, res;
} bpair;

static inline bool bp_before(const bpair *a, const bpair *b) {
    return a->rank < b->rank || (a->rank == b->rank && a->left < b->left);
}

typedef struct { bpair *v; size_t n, cap; } bheap;

static int bheap_push(bheap *h, bpair b) {
    if (h->n == h->cap) {
        size_t nc = h->cap ? h->cap * 2 : 64;
        bpair *nv = realloc(h->v, nc * sizeof(bpair));
        if (!nv) return LCX_ENOMEM;
        h->v = nv;
        h->cap = nc;
    }
    size_t i = h->n++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!bp_before(&b, &h->v[p])) break;
        h->v[i] = h->v[p];
        i = p;
    }
    h->v[i] = b;
    return 0;
}

static bpair bheap_pop(bheap *h) {
    bpair top = h->v[0], last = h->v[--h->n];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        const bpair *best = &last;
        if (l < h->n && bp_before(&h->v[l], best)) { m = l; best = &h->v[l]; }
        if (r < h->n && bp_before(&h->v[r], best)) m = r;
        if (m == i) break;
        h->v[i] = h->v[m];
        i = m;
    }
    if (h->n) h->v[i] = last;
    return top;
}

static int add_pair(const eng_tokenizer *t, const bsym *s, int l, int r, bheap *h) {
    if (l < 0 || r < 0 || s[l].id < 0 || s[r].id < 0) return 0;
    const eng_tok_merge *m = merge_get(t, s[l].id, s[r].id);
    if (!m) return 0;
    return bheap_push(h, (bpair){m->rank, l, r, s[l].id, s[r].id, m->result});
}

static void emit_bytes(const eng_tokenizer *t, const unsigned char *w, size_t n, eng_tok_out *o) {
    for (size_t i = 0; i < n; i++)
        if (t->byte_tok[w[i]] >= 0) eng_tok_push(o, t->byte_tok[w[i]]);
}

/* Runs the pre-tokenizer regexes; *a gets the chunks in order. */
static int pretokenize(const eng_tokenizer *t, const char *text, size_t len, span_vec *a) {
    span_vec b = {0};
    int rc;
    if ((rc = span_push(a, 0, len)) < 0) return rc;
    pcre2_match_data *md = pcre2_match_data_create(4, NULL);
    if (!md) return LCX_ENOMEM;
    for (int i = 0; i < t->n_re; i++) {
        if ((rc = split_re(t->re[i], md, text, a, &b)) < 0) break;
        span_vec tmp = *a; *a = b; b = tmp;
    }
    pcre2_match_data_free(md);
    free(b.v);
    return rc;
}

int eng__bpe_split(const eng_tokenizer *t, const char *text, size_t len, size_t **spans, size_t *n) {
    span_vec a = {0};
    *spans = NULL;
    *n = 0;
    if (t->kind != ENG_TOK_BPE) return LCX_EINVAL;
    int rc = pretokenize(t, text, len, &a);
    if (rc < 0) { free(a.v); return rc; }
    size_t *o = malloc(sizeof(size_t) * 2 * (a.n ? a.n : 1));
    if (!o) { free(a.v); return LCX_ENOMEM; }
    for (size_t i = 0; i < a.n; i++) { o[2 * i] = a.v[i].off; o[2 * i + 1] = a.v[i].len; }
    free(a.v);
    *spans = o;
    *n = a.n;
    return 0;
}

int eng__bpe_encode(const eng_tokenizer *t, const char *text, size_t len, eng_tok_out *o) {
    span_vec a = {0};
    bsym *s = NULL;
    char *mapped = NULL;
    bheap h = {0};
    int rc;
    if ((rc = pretokenize(t, text, len, &a)) < 0) goto out;
    size_t maxw = 0;
    for (size_t w = 0; w < a.n; w++) if (a.v[w].len > maxw) maxw = a.v[w].len;
    rc = LCX_ENOMEM;
    s = malloc(sizeof(bsym) * (maxw ? maxw : 1));
    mapped = malloc(maxw * 2 + 1);
    if (!s || !mapped) goto out;

    for (size_t w = 0; w < a.n; w++) {
        const unsigned char *word = (const unsigned char *)text + a.v[w].off;
        size_t wl = a.v[w].len;
        if (t->ignore_merges) {
            /* Llama-3: a pre-token that is itself a vocabulary entry is taken whole */
            size_t ml = 0;
            for (size_t i = 0; i < wl; i++) ml += (size_t)eng__utf8_encode(eng__bpe_byte_to_cp(word[i]), mapped + ml);
            int32_t id = eng__tok_map_get(t, mapped, ml);
            if (id >= 0) { eng_tok_push(o, id); continue; }
        }
        int ns = (int)wl;
        for (int i = 0; i < ns; i++)
            s[i] = (bsym){i - 1, i + 1 < ns ? i + 1 : -1, t->byte_tok[word[i]], (uint32_t)i, 1};
        h.n = 0;
        for (int i = 1; i < ns; i++)
            if ((rc = add_pair(t, s, i - 1, i, &h)) < 0) goto out;
        /* hot loop: lowest rank first */
        while (h.n) {
            bpair p = bheap_pop(&h);
            bsym *L = &s[p.left], *R = &s[p.right];
            if (L->n == 0 || R->n == 0 || L->next != p.right || L->id != p.lid || R->id != p.rid)
                continue;
            L->n += R->n;
            L->id = p.res;
            R->n = 0;
            L->next = R->next;
            if (R->next >= 0) s[R->next].prev = p.left;
            if ((rc = add_pair(t, s, L->prev, p.left, &h)) < 0) goto out;
            if ((rc = add_pair(t, s, p.left, L->next, &h)) < 0) goto out;
        }
        for (int i = 0; i != -1 && ns > 0; i = s[i].next) {
            if (s[i].id >= 0) eng_tok_push(o, s[i].id);
            else emit_bytes(t, word + s[i].start, s[i].n, o);
        }
    }
    rc = 0;
out:
    free(a.v); free(s); free(mapped); free(h.v);
    return rc;
}
