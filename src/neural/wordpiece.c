/* WordPiece with Hugging Face BertTokenizer semantics (BasicTokenizer + WordpieceTokenizer):
 *   1. special-token strings ([CLS] [SEP] [UNK] [PAD] [MASK], exact bytes) are split out of
 *      the text first and become their ids (HF's added-tokens trie; llama.cpp parse_special);
 *   2. clean: drop NUL, U+FFFD and every C* character except \t \n \r; whitespace -> ' ';
 *   3. CJK ideographs get spaces around them (tokenize_chinese_chars);
 *   4. per whitespace word: lower-case when the config says so; strip accents (NFD, drop Mn)
 *      when strip_accents says so (null: follows lower-casing); otherwise NFC (as HF's
 *      BasicTokenizer normalises before splitting);
 *   5. every punctuation character (Unicode P*, or ASCII 33-47, 58-64, 91-96, 123-126) is a
 *      word of its own;
 *   6. greedy longest match per word, continuation pieces as "##piece"; a word with any
 *      unmatched position, or over 100 characters, is one [UNK].
 * Why not the engine's tok_wpm.c: it is llama.cpp's tokenizer (always lower-cases, always
 * strips, looks words up in the U+2581 spelling); models here may be cased, and embedders
 * need truncation and pair encoding. The character classes are the same as there.
 * Complexity: linear in the text; a word costs O(L * longest entry) hash lookups; encoding
 * stops once enough pieces for the truncation length exist. */
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "neural/nn_internal.h"
#include "engine/tokenizer.h"
#include "util/util.h"

#define WP_MAX_WORD_CHARS 100      /* HF max_input_chars_per_word */
#define WP_MAX_INPUT (1u << 30)

/* ------------------------------------------------------------------------------ vocab */

static uint32_t vhash(const char *s, size_t n) { return (uint32_t)lcx__hash64(s, n, 0x5eed); }

int lcx__nn_vocab_build(lcx__nn_vocab *v, int32_t n, const char *const *tok, const size_t *len)
{
    memset(v, 0, sizeof *v);
    size_t total = 0;
    for (int32_t i = 0; i < n; i++) {
        if (len[i] > 4096) return LCX_ECORRUPT;
        total += len[i];
    }
    uint32_t cap = 16;
    while (cap < (uint32_t)n * 2u) cap <<= 1;
    v->blob = malloc(total + 1);
    v->off = malloc((size_t)n * sizeof *v->off);
    v->len = malloc((size_t)n * sizeof *v->len);
    v->slots = calloc(cap, sizeof *v->slots);
    if (!v->blob || !v->off || !v->len || !v->slots) { lcx__nn_vocab_free(v); return LCX_ENOMEM; }
    v->mask = cap - 1;
    v->n = n;
    size_t at = 0;
    for (int32_t i = 0; i < n; i++) {
        memcpy(v->blob + at, tok[i], len[i]);
        v->off[i] = (uint32_t)at;
        v->len[i] = (uint32_t)len[i];
        at += len[i];
        if (len[i] > v->max_len) v->max_len = (uint32_t)len[i];
        /* first occurrence wins (HF's vocab dict keeps the last, but duplicate lines only
         * occur in broken vocabularies; lookups stay deterministic either way) */
        if (lcx__nn_vocab_get(v, tok[i], len[i]) >= 0) continue;
        uint32_t h = vhash(tok[i], len[i]) & v->mask;
        while (v->slots[h]) h = (h + 1) & v->mask;
        v->slots[h] = (uint32_t)i + 1;
    }
    return 0;
}

void lcx__nn_vocab_free(lcx__nn_vocab *v)
{
    free(v->blob);
    free(v->off);
    free(v->len);
    free(v->slots);
    memset(v, 0, sizeof *v);
}

int32_t lcx__nn_vocab_get(const lcx__nn_vocab *v, const char *s, size_t n)
{
    if (!v->slots) return -1;
    uint32_t h = vhash(s, n) & v->mask;
    while (v->slots[h]) {
        uint32_t id = v->slots[h] - 1;
        if (v->len[id] == n && !memcmp(v->blob + v->off[id], s, n)) return (int32_t)id;
        h = (h + 1) & v->mask;
    }
    return -1;
}

/* Character classes: engine/tokenizer.h (eng__bert_is_*), shared with the engine's WPM tokenizer. */

/* ------------------------------------------------------------------------------ encoder */

typedef struct {
    int32_t *out;
    int max;
    int n;                      /* produced (may exceed max) */
    int limit;                  /* stop producing after this many (truncation) */
} wp_out;

static void push(wp_out *o, int32_t id)
{
    if (o->n < o->max) o->out[o->n] = id;
    o->n++;
}

typedef struct {
    const lcx_nn_model *m;
    char *wb;                   /* "##" + word bytes */
    size_t wl, nch;             /* word bytes (after the "##"), characters */
    char *pb;                   /* scratch for "##" + piece */
} wp_state;

static void flush_word(wp_state *s, wp_out *o)
{
    if (!s->wl) return;
    const lcx__nn_vocab *v = &s->m->vocab;
    int32_t unk = s->m->info.unk_id;
    const char *w = s->wb + 2;
    size_t wl = s->wl, nch = s->nch;
    s->wl = s->nch = 0;
    if (o->n >= o->limit) return;
    int32_t ids[WP_MAX_WORD_CHARS];
    int nid = 0;
    size_t start = 0;
    if (nch > WP_MAX_WORD_CHARS) goto unk;
    while (start < wl) {
        size_t end = wl;
        size_t lim = v->max_len;
        if (end - start > lim) {
            end = start + lim;
            while (end > start && (w[end] & 0xC0) == 0x80) end--;
        }
        int32_t found = -1;
        while (end > start) {
            if (start == 0) found = lcx__nn_vocab_get(v, w, end);
            else {
                memcpy(s->pb + 2, w + start, end - start);
                found = lcx__nn_vocab_get(v, s->pb, end - start + 2);
            }
            if (found >= 0) break;
            end--;
            while (end > start && (w[end] & 0xC0) == 0x80) end--;
        }
        if (found < 0 || nid == WP_MAX_WORD_CHARS) goto unk;
        ids[nid++] = found;
        start = end;
    }
    for (int i = 0; i < nid && o->n < o->limit; i++) push(o, ids[i]);
    return;
unk:
    push(o, unk);
}

static void add_char(wp_state *s, uint32_t c)
{
    s->wl += (size_t)utf8proc_encode_char((utf8proc_int32_t)c, (utf8proc_uint8_t *)s->wb + 2 + s->wl);
    s->nch++;
}

/* after normalisation: c is part of a word, a punctuation word, or a split */
static void emit_cp(wp_state *s, wp_out *o, uint32_t c)
{
    if (c == ' ') { flush_word(s, o); return; }
    if (eng__bert_is_punct(c)) {
        flush_word(s, o);
        add_char(s, c);
        s->nch = 1;
        flush_word(s, o);
        return;
    }
    add_char(s, c);
}

/* one case-folded / accent-handled code point into the word */
static void emit_norm(wp_state *s, wp_out *o, uint32_t c)
{
    const lcx_nn_info *inf = &s->m->info;
    if (inf->strip_accents) {
        utf8proc_int32_t dec[32];
        int last = 0;
        utf8proc_ssize_t nd = utf8proc_decompose_char((utf8proc_int32_t)c, dec, 32, UTF8PROC_DECOMPOSE, &last);
        if (nd < 0 || nd > 32) { dec[0] = (utf8proc_int32_t)c; nd = 1; }
        for (utf8proc_ssize_t k = 0; k < nd; k++) {
            if (utf8proc_category(dec[k]) == UTF8PROC_CATEGORY_MN) continue;
            uint32_t d = (uint32_t)dec[k];
            emit_cp(s, o, inf->lowercase ? (uint32_t)utf8proc_tolower((utf8proc_int32_t)d) : d);
        }
        return;
    }
    if (inf->lowercase) {
        if (c == 0x130) { emit_cp(s, o, 'i'); emit_cp(s, o, 0x307); return; }   /* Python's "İ".lower() */
        c = (uint32_t)utf8proc_tolower((utf8proc_int32_t)c);
    }
    emit_cp(s, o, c);
}

/* plain text (no specials) -> pieces */
static int encode_plain(const lcx_nn_model *m, const char *text, size_t len, wp_out *o)
{
    const lcx_nn_info *inf = &m->info;
    utf8proc_uint8_t *nfc = NULL;
    if (!inf->strip_accents && len) {
        /* HF normalises to NFC before splitting when it does not strip accents */
        utf8proc_ssize_t r = utf8proc_map((const utf8proc_uint8_t *)text, (utf8proc_ssize_t)len, &nfc,
                                          UTF8PROC_STABLE | UTF8PROC_COMPOSE);
        if (r >= 0) { text = (const char *)nfc; len = (size_t)r; }
        else nfc = NULL;   /* invalid UTF-8: decode byte-wise below (bad bytes dropped as U+FFFD) */
    }
    wp_state s = {m, malloc(len * 4 + 16), 0, 0, malloc(m->vocab.max_len + 8)};
    if (!s.wb || !s.pb) { free(s.wb); free(s.pb); free(nfc); return LCX_ENOMEM; }
    memcpy(s.wb, "##", 2);
    memcpy(s.pb, "##", 2);
    for (size_t i = 0; i < len && o->n < o->limit;) {
        utf8proc_int32_t c;
        utf8proc_ssize_t adv = utf8proc_iterate((const utf8proc_uint8_t *)text + i, (utf8proc_ssize_t)(len - i), &c);
        if (adv <= 0) { i++; continue; }              /* invalid byte: dropped like U+FFFD */
        i += (size_t)adv;
        uint32_t u = (uint32_t)c;
        if (u == 0 || u == 0xFFFD || eng__bert_is_control(u)) continue;
        if (eng__bert_is_ws(u)) { emit_cp(&s, o, ' '); continue; }
        /* CJK with the Python BertTokenizer's ranges (the Hugging Face semantics we follow) */
        if (inf->cjk_split && eng__bert_is_cjk(u, false)) { emit_cp(&s, o, ' '); emit_norm(&s, o, u); emit_cp(&s, o, ' '); continue; }
        emit_norm(&s, o, u);
    }
    flush_word(&s, o);
    free(s.wb);
    free(s.pb);
    free(nfc);
    return 0;
}

/* text with specials split out */
static int encode(const lcx_nn_model *m, const char *text, size_t len, wp_out *o)
{
    if (len > WP_MAX_INPUT) return LCX_ELIMIT;
    size_t seg = 0;
    for (size_t i = 0; i < len && o->n < o->limit;) {
        int hit = -1;
        size_t hl = 0;
        if (text[i] == '[')
            for (int k = 0; k < LCX_NN_N_SPECIAL; k++) {
                const char *sp = m->special_txt[k];
                if (!sp) continue;
                size_t sl = strlen(sp);
                if (sl && sl <= len - i && !memcmp(text + i, sp, sl) && sl > hl) { hit = k; hl = sl; }
            }
        if (hit < 0) { i++; continue; }
        int rc = encode_plain(m, text + seg, i - seg, o);
        if (rc < 0) return rc;
        if (o->n < o->limit) push(o, m->special[hit]);
        i += hl;
        seg = i;
    }
    if (seg < len && o->n < o->limit) return encode_plain(m, text + seg, len - seg, o);
    return 0;
}

int lcx_nn_wordpiece(const lcx_nn_model *m, const char *text, size_t len, int32_t *ids, int max)
{
    if (!m || (!text && len) || max < 0) return LCX_EINVAL;
    wp_out o = {ids, max, 0, 0x7fffffff};
    int rc = encode(m, text, len, &o);
    return rc < 0 ? rc : o.n;
}

int lcx_nn_tokenize(const lcx_nn_model *m, const char *text, size_t len, int32_t *ids, int max)
{
    if (!m || (!text && len) || !ids || max < 0) return LCX_EINVAL;
    int msl = m->info.max_seq_len;
    if (max < 2) return LCX_ELIMIT;
    /* truncation: [CLS] + the first max_seq_len - 2 pieces + [SEP] */
    wp_out o = {ids + 1, max - 2, 0, msl - 2};
    int rc = encode(m, text, len, &o);
    if (rc < 0) return rc;
    if (o.n > max - 2) return LCX_ELIMIT;
    ids[0] = m->info.cls_id;
    ids[o.n + 1] = m->info.sep_id;
    return o.n + 2;
}

int lcx_nn_tokenize_pair(const lcx_nn_model *m, const char *a, size_t alen, const char *b, size_t blen,
                         int32_t *ids, int32_t *types, int max)
{
    if (!m || (!a && alen) || (!b && blen) || !ids || !types) return LCX_EINVAL;
    int budget = m->info.max_seq_len - 3;
    if (budget < 0) budget = 0;
    /* HF "longest_first": drop the last piece of the longer side (ties: the second) until
     * both fit; each side never needs more than budget pieces to decide that */
    int32_t *pa = malloc(((size_t)budget + 1) * 2 * sizeof *pa);
    if (!pa) return LCX_ENOMEM;
    int32_t *pb = pa + budget + 1;
    wp_out oa = {pa, budget, 0, budget}, ob = {pb, budget, 0, budget};
    int rc = encode(m, a, alen, &oa);
    if (rc == 0) rc = encode(m, b, blen, &ob);
    if (rc < 0) { free(pa); return rc; }
    int na = oa.n, nb = ob.n;
    while (na + nb > budget) {
        if (na > nb) na--;
        else nb--;
    }
    int n = na + nb + 3;
    if (n > max) { free(pa); return LCX_ELIMIT; }
    int k = 0;
    bool zero = m->opts.pair_types_all_zero;
    ids[k] = m->info.cls_id, types[k++] = 0;
    for (int i = 0; i < na; i++) ids[k] = pa[i], types[k++] = 0;
    ids[k] = m->info.sep_id, types[k++] = 0;
    for (int i = 0; i < nb; i++) ids[k] = pb[i], types[k++] = zero ? 0 : 1;
    ids[k] = m->info.sep_id, types[k++] = zero ? 0 : 1;
    free(pa);
    return n;
}
