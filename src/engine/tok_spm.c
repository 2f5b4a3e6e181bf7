/* SentencePiece-style BPE (tokenizer.ggml.model = "llama", llama2.c tokenizers).
 *
 * Idea: start from one symbol per UTF-8 character (spaces escaped to U+2581, a dummy space in
 * front), then repeatedly merge the adjacent pair whose concatenation is the vocabulary entry
 * with the highest score; ties go to the leftmost pair. This is exactly llama2.c's encode()
 * (which rescans all pairs per merge, O(n^2)) and llama.cpp's SPM tokenizer. Here the symbols
 * form a doubly linked list and candidate pairs sit in a max-heap keyed (score, -left), so a
 * merge costs O(log n): stale heap entries (a side already merged away) are detected by
 * comparing the recorded byte size and skipped. Symbols whose text is not a token fall back
 * to <0xNN> byte tokens (or UNK when the vocabulary has none). */
#include <stdlib.h>
#include <string.h>

#include "tok_internal.h"

typedef struct {
    int prev, next;
    uint32_t start, n;      /* bytes in the escaped buffer; n = 0 once merged away */
} sym;

/* Candidate merge. key orders the max-heap in one integer compare: the score's bits made
 * monotonic (IEEE-754 trick) in the high half, the inverted left index in the low half, so
 * higher score first and, on equal scores, the leftmost pair. */
typedef struct {
    uint64_t key;
    int right;
    uint32_t size;
} bigram;

static inline uint64_t bg_key(float score, int left) {
    uint32_t u;
    memcpy(&u, &score, 4);
    u = (u & 0x80000000u) ? ~u : (u | 0x80000000u);
    return ((uint64_t)u << 32) | (uint32_t)(INT32_MAX - left);
}
static inline int bg_left(uint64_t key) { return INT32_MAX - (int)(uint32_t)key; }

typedef struct {
    bigram *v;
    size_t n, cap;
} heap;

static int heap_push(heap *h, bigram b) {
    if (h->n == h->cap) {
        size_t nc = h->cap ? h->cap * 2 : 64;
        bigram *nv = realloc(h->v, nc * sizeof(bigram));
        if (!nv) return LCX_ENOMEM;
        h->v = nv;
        h->cap = nc;
    }
    size_t i = h->n++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (b.key <= h->v[p].key) break;
        h->v[i] = h->v[p];
        i = p;
    }
    h->v[i] = b;
    return 0;
}

static bigram heap_pop(heap *h) {
    bigram top = h->v[0], last = h->v[--h->n];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        uint64_t best = last.key;
        if (l < h->n && h->v[l].key > best) { m = l; best = h->v[l].key; }
        if (r < h->n && h->v[r].key > best) m = r;
        if (m == i) break;
        h->v[i] = h->v[m];
        i = m;
    }
    if (h->n) h->v[i] = last;
    return top;
}

static int try_pair(const eng_tokenizer *t, const char *buf, const sym *s, int l, int r, heap *h) {
    if (l < 0 || r < 0) return 0;
    uint32_t size = s[l].n + s[r].n;
    int32_t id = eng__tok_map_get(t, buf + s[l].start, size);
    if (id < 0) return 0;
    return heap_push(h, (bigram){bg_key(t->score[id], l), r, size});
}

int eng__spm_encode(const eng_tokenizer *t, const char *text, size_t len, bool prefix_space,
                   eng_tok_out *o) {
    /* escaped copy: ' ' -> U+2581 (3 bytes) unless the vocabulary keeps raw spaces */
    size_t cap = (len + 1) * 3;
    char *buf = malloc(cap);
    sym *s = NULL;
    heap h = {0};
    int rc = LCX_ENOMEM;
    if (!buf) return rc;
    size_t bl = 0;
    if (t->escape_ws) {
        if (prefix_space) { memcpy(buf, "\xE2\x96\x81", 3); bl = 3; }
        for (size_t i = 0; i < len; i++) {
            if (text[i] == ' ') { memcpy(buf + bl, "\xE2\x96\x81", 3); bl += 3; }
            else buf[bl++] = text[i];
        }
    } else {
        if (prefix_space) buf[bl++] = ' ';
        memcpy(buf + bl, text, len);
        bl += len;
    }
    if (bl == 0) { free(buf); return 0; }
    s = malloc(sizeof(sym) * bl);
    if (!s) goto out;
    int ns = 0;
    for (size_t off = 0; off < bl;) {
        /* one symbol per character; a malformed sequence is split into single bytes so
         * an escaped space is never swallowed into a byte-fallback run */
        size_t cl = (size_t)eng_utf8_len((unsigned char)buf[off]);
        if (cl > bl - off) cl = 1;
        for (size_t k = 1; k < cl; k++)
            if (((unsigned char)buf[off + k] & 0xC0) != 0x80) { cl = 1; break; }
        s[ns] = (sym){ns - 1, -1, (uint32_t)off, (uint32_t)cl};
        if (ns > 0) s[ns - 1].next = ns;
        ns++;
        off += cl;
    }
    for (int i = 1; i < ns; i++)
        if ((rc = try_pair(t, buf, s, i - 1, i, &h)) < 0) goto out;
    /* hot loop: one heap pop per candidate merge */
    while (h.n) {
        bigram b = heap_pop(&h);
        int left = bg_left(b.key);
        sym *L = &s[left], *R = &s[b.right];
        if (L->n == 0 || R->n == 0 || L->next != b.right || L->n + R->n != b.size) continue;
        L->n += R->n;
        R->n = 0;
        L->next = R->next;
        if (R->next >= 0) s[R->next].prev = left;
        if ((rc = try_pair(t, buf, s, L->prev, left, &h)) < 0) goto out;
        if ((rc = try_pair(t, buf, s, left, L->next, &h)) < 0) goto out;
    }
    for (int i = 0; i != -1; i = s[i].next) {
        int32_t id = eng__tok_map_get(t, buf + s[i].start, s[i].n);
        if (id >= 0) { eng_tok_push(o, id); continue; }
        for (uint32_t j = 0; j < s[i].n; j++) {
            int32_t bid = t->byte_tok[(unsigned char)buf[s[i].start + j]];
            if (bid >= 0) eng_tok_push(o, bid);
            else if (t->unk >= 0) { eng_tok_push(o, t->unk); break; }
        }
    }
    rc = 0;
out:
    free(buf);
    free(s);
    free(h.v);
    return rc;
}
