/* WordPiece (tokenizer.ggml.model = "bert"), matching Hugging Face's BertNormalizer +
 * BertPreTokenizer + WordPiece for uncased models (bge, bert-base-uncased):
 *   normalise: drop NUL, U+FFFD and control/format/unassigned/private-use characters (C*),
 *              other whitespace -> ' '; put spaces around CJK ideographs; NFD and drop
 *              non-spacing marks (accents); lowercase;
 *   pre-tokenise: split on whitespace; every punctuation character (Unicode P* or ASCII
 *              punctuation/symbols) is a word of its own;
 *   WordPiece: per word, greedy longest match from the left; the first piece is looked up as
 *              "\u2581piece" (how llama.cpp's converter stores word-initial pieces) and the
 *              rest bare (HF's "##piece"); a word with any unmatched position, or longer
 *              than 100 characters, becomes a single [UNK].
 * Complexity: linear in the text; a word costs O(L * max_token_len) lookups. */
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "tok_internal.h"

#define WPM_MAX_WORD_CHARS 100      /* HF max_input_chars_per_word */

bool eng__bert_is_ws(uint32_t c) {
    /* '\t' '\n' '\r' plus Unicode White_Space (Rust char::is_whitespace) */
    return c == ' ' || (c >= 0x09 && c <= 0x0D) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
           c == 0x205F || c == 0x3000;
}

bool eng__bert_is_control(uint32_t c) {
    /* HF checks this before whitespace: VT, FF, NEL are Cc and get dropped, not split on */
    if (c == '\t' || c == '\n' || c == '\r') return false;
    switch (utf8proc_category((utf8proc_int32_t)c)) {
    case UTF8PROC_CATEGORY_CC: case UTF8PROC_CATEGORY_CF: case UTF8PROC_CATEGORY_CS:
    case UTF8PROC_CATEGORY_CO: case UTF8PROC_CATEGORY_CN:
        return true;
    default:
        return false;
    }
}

bool eng__bert_is_cjk(uint32_t c, bool rust_ranges) {
    return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) ||
           (c >= 0x20000 && c <= 0x2A6DF) || (c >= 0x2A700 && c <= 0x2B73F) ||
           (c >= 0x2B740 && c <= 0x2B81F) || (c >= (rust_ranges ? 0x2B920u : 0x2B820u) && c <= 0x2CEAF) ||
           (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

bool eng__bert_is_punct(uint32_t c) {
    if (c < 0x80)
        return (c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) || (c >= 123 && c <= 126);
    switch (utf8proc_category((utf8proc_int32_t)c)) {
    case UTF8PROC_CATEGORY_PC: case UTF8PROC_CATEGORY_PD: case UTF8PROC_CATEGORY_PS:
    case UTF8PROC_CATEGORY_PE: case UTF8PROC_CATEGORY_PI: case UTF8PROC_CATEGORY_PF:
    case UTF8PROC_CATEGORY_PO:
        return true;
    default:
        return false;
    }
}

typedef struct { uint32_t *v; size_t n, cap; } cpvec;

static int cp_push(cpvec *c, uint32_t cp) {
    if (c->n == c->cap) {
        size_t nc = c->cap ? c->cap * 2 : 256;
        uint32_t *nv = realloc(c->v, nc * sizeof(uint32_t));
        if (!nv) return LCX_ENOMEM;
        c->v = nv;
        c->cap = nc;
    }
    c->v[c->n++] = cp;
    return 0;
}

/* WordPiece over one normalised word given as UTF-8 in w[3..3+wl) with w[0..3) = U+2581. */
static void wordpiece(const eng_tokenizer *t, const char *w, size_t wl, size_t nchars, eng_tok_out *o) {
    if (nchars > WPM_MAX_WORD_CHARS) { if (t->unk >= 0) eng_tok_push(o, t->unk); return; }
    int32_t ids[WPM_MAX_WORD_CHARS];
    int nid = 0;
    const char *word = w + 3;
    size_t start = 0;
    while (start < wl) {
        size_t end = wl;
        size_t lim = t->max_len;                    /* no token is longer than this */
        if (end - start > lim) {
            end = start + lim;
            while (end > start && (word[end] & 0xC0) == 0x80) end--;   /* char boundary */
        }
        int32_t found = -1;
        while (end > start) {
            found = start == 0 ? eng__tok_map_get(t, w, end + 3) : eng__tok_map_get(t, word + start, end - start);
            if (found >= 0) break;
            end--;
            while (end > start && (word[end] & 0xC0) == 0x80) end--;
        }
        if (found < 0) { nid = -1; break; }
        ids[nid++] = found;
        start = end;
    }
    if (nid < 0 || nid == 0) { if (t->unk >= 0) eng_tok_push(o, t->unk); return; }
    for (int i = 0; i < nid; i++) eng_tok_push(o, ids[i]);
}

int eng__wpm_encode(const eng_tokenizer *t, const char *text, size_t len, eng_tok_out *o) {
    cpvec cps = {0};
    int rc = LCX_ENOMEM;
    char *wbuf = NULL;
    /* normalise into code points; ' ' separates words, 0x1 marks a forced split */
    for (size_t i = 0; i < len;) {
        int adv;
        uint32_t c = eng__utf8_decode((const unsigned char *)text + i, len - i, &adv);
        i += (size_t)adv;
        if (c == 0 || c == 0xFFFD || eng__bert_is_control(c)) continue;
        if (eng__bert_is_ws(c)) { if ((rc = cp_push(&cps, ' ')) < 0) goto out; continue; }
        if (eng__bert_is_cjk(c, true)) {   /* the Rust tokenizers' ranges, as llama.cpp */
            if ((rc = cp_push(&cps, ' ')) < 0 || (rc = cp_push(&cps, c)) < 0 || (rc = cp_push(&cps, ' ')) < 0) goto out;
            continue;
        }
        utf8proc_int32_t dec[32];
        int last = 0;
        utf8proc_ssize_t nd = utf8proc_decompose_char((utf8proc_int32_t)c, dec, 32, UTF8PROC_DECOMPOSE, &last);
        if (nd < 0 || nd > 32) { dec[0] = (utf8proc_int32_t)c; nd = 1; }
        for (utf8proc_ssize_t k = 0; k < nd; k++) {
            uint32_t d = (uint32_t)dec[k];
            if (utf8proc_category(dec[k]) == UTF8PROC_CATEGORY_MN) continue;   /* accents */
            if (d == 0x130) {                   /* full lowercase of U+0130: "i\u0307" */
                if ((rc = cp_push(&cps, 'i')) < 0 || (rc = cp_push(&cps, 0x307)) < 0) goto out;
                continue;
            }
            if ((rc = cp_push(&cps, (uint32_t)utf8proc_tolower((utf8proc_int32_t)d))) < 0) goto out;
        }
    }
    rc = LCX_ENOMEM;
    wbuf = malloc(3 + cps.n * 4 + 4);
    if (!wbuf) goto out;
    memcpy(wbuf, "\xE2\x96\x81", 3);
    size_t wl = 0, nch = 0;
    for (size_t i = 0; i <= cps.n; i++) {
        uint32_t c = i < cps.n ? cps.v[i] : ' ';
        bool p = c != ' ' && eng__bert_is_punct(c);
        if (c == ' ' || p) {
            if (wl) wordpiece(t, wbuf, wl, nch, o);
            wl = nch = 0;
            if (!p) continue;
            wl = (size_t)eng__utf8_encode(c, wbuf + 3);
            wordpiece(t, wbuf, wl, 1, o);
            wl = 0;
            continue;
        }
        wl += (size_t)eng__utf8_encode(c, wbuf + 3 + wl);
        nch++;
    }
    rc = 0;
out:
    free(cps.v);
    free(wbuf);
    return rc;
}
