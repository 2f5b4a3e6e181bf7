/* Python difflib.SequenceMatcher(None, a, b).ratio(), reimplemented exactly.
 *
 * Why exact: the MRCR score is this ratio, and published numbers were computed with CPython's
 * difflib. Any "better" matcher (true LCS, different tie-breaking) gives different scores,
 * so we reproduce the algorithm step by step (CPython 3.11 Lib/difflib.py):
 *   - b2j: element -> ascending positions in b;
 *   - isjunk is None, so bjunk is empty; autojunk: when len(b) >= 200, elements that occur
 *     more than len(b)//100 + 1 times are "popular" and removed from b2j (NOT added to bjunk,
 *     so the extension loops below still walk over them);
 *   - find_longest_match: dynamic programming over rows of a with j2len maps, ties → the
 *     earliest (i, j); then extend the block over equal non-junk neighbours on both sides
 *     (popular elements included); the junk-extension loops are no-ops without junk;
 *   - get_matching_blocks: recursion on the left and right remainders (the order of the
 *     queue does not change the set of blocks, so the sum of sizes is order-independent);
 *   - ratio = 2.0 * M / (len(a) + len(b)), or 1.0 when both are empty.
 *
 * Speed: b2j is an open-addressing hash (code point → slice of a positions array), the
 * j2len dicts become two row-parity arrays tagged with a global row stamp, so one row costs
 * O(|b2j[a[i]]|) like CPython but without hashing. Lookups of j < blo use a binary search
 * (CPython skips them one by one; same result). */
#include "eval/lcx_eval.h"
#include "util/util.h"
#include <stdlib.h>
#include <string.h>

/* Decodes UTF-8 into code points, an ill-formed byte b as U+DC80+b (lcx_eval.h). *out is
 * malloc'd (free it); *ncp its length. */
static int lcx__utf8_to_cp(const char *s, size_t n, uint32_t **out, size_t *ncp)
{
    if (!out || !ncp || (!s && n)) return LCX_EINVAL;
    uint32_t *v = malloc((n ? n : 1) * sizeof *v);
    if (!v) return LCX_ENOMEM;
    const unsigned char *p = (const unsigned char *)s, *e = p + n;
    size_t k = 0;
    while (p < e) {
        unsigned c = *p;
        if (c < 0x80) { v[k++] = c; p++; continue; }
        int len = 0;
        uint32_t cp = 0;
        if (c >= 0xc2 && c <= 0xdf) { len = 2; cp = c & 0x1f; }
        else if (c >= 0xe0 && c <= 0xef) { len = 3; cp = c & 0x0f; }
        else if (c >= 0xf0 && c <= 0xf4) { len = 4; cp = c & 0x07; }
        int ok = len && e - p >= len;
        for (int i = 1; ok && i < len; i++) {
            if ((p[i] & 0xc0) != 0x80) ok = 0;
            else cp = cp << 6 | (p[i] & 0x3f);
        }
        if (ok && ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
                   (cp >= 0xd800 && cp <= 0xdfff)))
            ok = 0;
        if (!ok) { v[k++] = 0xdc00 + c; p++; continue; }   /* surrogateescape */
        v[k++] = cp;
        p += len;
    }
    *out = v;
    *ncp = k;
    return LCX_OK;
}

/* b2j as a hash: keys[h] = code point + 1 (0 = empty), start/count into pos[]. */
typedef struct {
    uint32_t *keys;
    uint32_t *start, *count;
    size_t mask;
    uint32_t *pos;          /* [lb] positions grouped per element, ascending inside a group */
} b2j_t;

static inline size_t cp_hash(uint32_t c) { return (size_t)(c * 2654435761u) ^ (c >> 7); }

static inline size_t b2j_find(const b2j_t *t, uint32_t c)
{
    size_t h = cp_hash(c) & t->mask;
    while (t->keys[h] && t->keys[h] != c + 1) h = (h + 1) & t->mask;
    return h;
}

typedef struct {
    const uint32_t *a, *b;
    size_t la, lb;
    b2j_t t;
    int32_t *aslot;         /* [la] hash slot of a[i] in b2j, -1 when absent or popular */
    uint32_t *val[2];       /* [lb] j2len values for the two live rows */
    uint64_t *stamp[2];     /* [lb] row id that wrote val[.][j] */
    uint64_t row;           /* global row counter (never reused) */
} sm_t;

typedef struct { size_t i, j, k; } match_t;

static match_t find_longest_match(sm_t *m, size_t alo, size_t ahi, size_t blo, size_t bhi)
{
    const uint32_t *a = m->a, *b = m->b;
    size_t besti = alo, bestj = blo, bestsize = 0;
    m->row++;                                   /* the first row must see an empty j2len */
    for (size_t i = alo; i < ahi; i++) {        /* hot */
        uint64_t cur = ++m->row;
        int32_t s = m->aslot[i];
        if (s < 0) continue;                    /* newj2len = {} : row stamp advances */
        const uint32_t *p = m->t.pos + m->t.start[s];
        size_t cnt = m->t.count[s];
        /* skip j < blo (binary search; CPython `continue`s over them) */
        size_t lo = 0, hi = cnt;
        while (lo < hi) {
            size_t mid = (lo + hi) / 2;
            if (p[mid] < blo) lo = mid + 1; else hi = mid;
        }
        int cpar = (int)(cur & 1), ppar = cpar ^ 1;
        uint32_t *cv = m->val[cpar], *pv = m->val[ppar];
        uint64_t *cs = m->stamp[cpar], *ps = m->stamp[ppar];
        for (size_t q = lo; q < cnt; q++) {
            size_t j = p[q];
            if (j >= bhi) break;
            size_t k = (j > 0 && ps[j - 1] == cur - 1) ? (size_t)pv[j - 1] + 1 : 1;
            cv[j] = (uint32_t)k;
            cs[j] = cur;
            if (k > bestsize) { besti = i - k + 1; bestj = j - k + 1; bestsize = k; }
        }
    }
    /* extend over equal neighbours (no junk: every element qualifies, popular ones too) */
    while (besti > alo && bestj > blo && a[besti - 1] == b[bestj - 1]) {
        besti--; bestj--; bestsize++;
    }
    while (besti + bestsize < ahi && bestj + bestsize < bhi &&
           a[besti + bestsize] == b[bestj + bestsize])
        bestsize++;
    return (match_t){besti, bestj, bestsize};
}

/* Same over code-point arrays. */
static int lcx__seqmatch_ratio_cp(const uint32_t *a, size_t la, const uint32_t *b, size_t lb, double *out)
{
    if (!out || (!a && la) || (!b && lb)) return LCX_EINVAL;
    if (la + lb == 0) { *out = 1.0; return LCX_OK; }
    if (la == 0 || lb == 0) { *out = 0.0; return LCX_OK; }
    if (la > UINT32_MAX / 2 || lb > UINT32_MAX / 2) return LCX_ELIMIT;
    sm_t m = {.a = a, .b = b, .la = la, .lb = lb};
    int rc = LCX_ENOMEM;
    size_t cap = 16;
    while (cap < 2 * lb) cap <<= 1;
    m.t.mask = cap - 1;
    m.t.keys = calloc(cap, sizeof *m.t.keys);
    m.t.start = calloc(cap, sizeof *m.t.start);
    m.t.count = calloc(cap, sizeof *m.t.count);
    m.t.pos = malloc(lb * sizeof *m.t.pos);
    m.aslot = malloc(la * sizeof *m.aslot);
    size_t *queue = NULL;
    for (int r = 0; r < 2; r++) {
        m.val[r] = malloc(lb * sizeof *m.val[r]);
        m.stamp[r] = calloc(lb, sizeof *m.stamp[r]);
    }
    if (!m.t.keys || !m.t.start || !m.t.count || !m.t.pos || !m.aslot || !m.val[0] ||
        !m.val[1] || !m.stamp[0] || !m.stamp[1])
        goto done;

    /* __chain_b: count, then lay out positions per element in ascending order */
    for (size_t j = 0; j < lb; j++) {
        size_t h = b2j_find(&m.t, b[j]);
        if (!m.t.keys[h]) m.t.keys[h] = b[j] + 1;
        m.t.count[h]++;
    }
    size_t acc = 0;
    for (size_t h = 0; h < cap; h++) {
        if (!m.t.keys[h]) continue;
        m.t.start[h] = (uint32_t)acc;
        acc += m.t.count[h];
        m.t.count[h] = 0;           /* refilled below */
    }
    for (size_t j = 0; j < lb; j++) {
        size_t h = b2j_find(&m.t, b[j]);
        m.t.pos[m.t.start[h] + m.t.count[h]++] = (uint32_t)j;
    }
    /* autojunk: popular = occurs more than n//100 + 1 times, only when n >= 200 */
    size_t ntest = lb >= 200 ? lb / 100 + 1 : (size_t)-1;
    for (size_t i = 0; i < la; i++) {
        size_t h = b2j_find(&m.t, a[i]);
        m.aslot[i] = (m.t.keys[h] && m.t.count[h] <= ntest) ? (int32_t)h : -1;
    }

    /* get_matching_blocks: explicit stack of (alo, ahi, blo, bhi); at most one entry per
     * matched block plus one, so la + 1 quadruples bound it. */
    size_t qcap = 4 * (LCX_MIN(la, lb) + 2), qn = 0;
    queue = malloc(qcap * sizeof *queue);
    if (!queue) goto done;
    queue[qn++] = 0; queue[qn++] = la; queue[qn++] = 0; queue[qn++] = lb;
    size_t matches = 0;
    while (qn) {
        size_t bhi = queue[--qn], blo = queue[--qn], ahi = queue[--qn], alo = queue[--qn];
        match_t x = find_longest_match(&m, alo, ahi, blo, bhi);
        if (!x.k) continue;
        matches += x.k;
        if (qn + 8 > qcap) {        /* cannot happen (bound above); stay safe anyway */
            size_t nc = qcap * 2;
            size_t *nq = realloc(queue, nc * sizeof *nq);
            if (!nq) goto done;
            queue = nq; qcap = nc;
        }
        if (alo < x.i && blo < x.j) {
            queue[qn++] = alo; queue[qn++] = x.i; queue[qn++] = blo; queue[qn++] = x.j;
        }
        if (x.i + x.k < ahi && x.j + x.k < bhi) {
            queue[qn++] = x.i + x.k; queue[qn++] = ahi; queue[qn++] = x.j + x.k; queue[qn++] = bhi;
        }
    }
    *out = 2.0 * (double)matches / (double)(la + lb);
    rc = LCX_OK;
done:
    free(queue);
    free(m.t.keys); free(m.t.start); free(m.t.count); free(m.t.pos); free(m.aslot);
    for (int r = 0; r < 2; r++) { free(m.val[r]); free(m.stamp[r]); }
    return rc;
}

int lcx__seqmatch_ratio(const char *a, size_t na, const char *b, size_t nb, double *out)
{
    if (!out || (!a && na) || (!b && nb)) return LCX_EINVAL;
    uint32_t *ca = NULL, *cb = NULL;
    size_t la = 0, lb = 0;
    int rc = lcx__utf8_to_cp(a, na, &ca, &la);
    if (rc == 0) rc = lcx__utf8_to_cp(b, nb, &cb, &lb);
    if (rc == 0) rc = lcx__seqmatch_ratio_cp(ca, la, cb, lb, out);
    free(ca);
    free(cb);
    return rc;
}

int lcx__mrcr_grade(const char *response, const char *answer, const char *hash, double *out)
{
    if (!response || !answer || !hash || !out) return LCX_EINVAL;
    size_t hl = strlen(hash);
    if (strncmp(response, hash, hl) != 0) { *out = 0.0; return LCX_OK; }
    const char *r = response + hl;
    const char *a = strncmp(answer, hash, hl) == 0 ? answer + hl : answer;
    return lcx__seqmatch_ratio(r, strlen(r), a, strlen(a), out);
}
