/* Selector + deterministic copy (SPEC §4): answer "the Nth {format} about {topic}" by
 * counting earlier matching requests in document order and copying the Nth reply verbatim.
 *
 * Why: a model asked to reproduce a 3,000-character reply from a 1M-token history paraphrases
 * or picks a neighbour; the request structure tells us exactly which reply is meant, and the
 * original text is right there. So we parse instead of retrieve, match strictly (format AND
 * topic equal after normalisation: "tapirs" never matches "tapir conservation"), and when
 * anything is unclear we fail closed with a reason — a caller can then fall back to retrieval
 * and a model, rather than receive a confident wrong copy.
 *
 * Nothing here knows any data set's vocabulary: only the request shape
 * "{verb} a {format} about {topic}" and ordinal phrases. */
#define _GNU_SOURCE
#include "longctx/lcx_recipes.h"
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ normalisation */

static int is_edge_punct(unsigned char c)
{
    return c == '.' || c == ',' || c == ';' || c == ':' || c == '!' || c == '?' || c == '"' ||
           c == '\'' || c == '`' || c == '*' || c == '(' || c == ')' || c == '[' || c == ']' ||
           c == '_' || c == '<' || c == '>';
}

/* lower-case ASCII, whitespace runs → one space, trimmed, edge punctuation removed */
static size_t norm(const char *s, size_t n, char *out, size_t olen)
{
    if (!olen) return 0;
    size_t k = 0;
    int sp = 0;
    for (size_t i = 0; i < n && k + 1 < olen; i++) {
        unsigned char c = (unsigned char)s[i];
        if (isspace(c)) { sp = k > 0; continue; }
        if (sp && k + 2 < olen) out[k++] = ' ';
        sp = 0;
        out[k++] = (char)tolower(c);
    }
    out[k] = 0;
    size_t b = 0;
    while (b < k && (is_edge_punct((unsigned char)out[b]) || out[b] == ' ')) b++;
    while (k > b && (is_edge_punct((unsigned char)out[k - 1]) || out[k - 1] == ' ')) k--;
    memmove(out, out + b, k - b);
    out[k - b] = 0;
    return k - b;
}

static int starts(const char *s, const char *p) { return strncmp(s, p, strlen(p)) == 0; }

/* ------------------------------------------------------------------ request parsing */

int lcx_request_parse(const char *text, size_t len, char *format, size_t flen, char *topic,
                      size_t tlen)
{
    if (!text || !format || !topic || flen < 2 || tlen < 2) return LCX_EINVAL;
    /* last non-empty line: a preamble (few-shot examples) may precede the request */
    size_t e = len;
    while (e && isspace((unsigned char)text[e - 1])) e--;
    size_t b = e;
    while (b && text[b - 1] != '\n') b--;
    if (e - b > 2048 || e == b) return LCX_ENOTFOUND;   /* requests are short lines */
    char line[2100];
    norm(text + b, e - b, line, sizeof line);
    const char *p = line;
    static const char *lead[] = {"please ", "now ", "ok ", "okay ", "and ", "also ", "next ",
                                 "can you ", "could you ", "would you ", "then "};
    for (int again = 1; again;) {
        again = 0;
        for (size_t i = 0; i < sizeof lead / sizeof *lead; i++)
            if (starts(p, lead[i])) { p += strlen(lead[i]); again = 1; }
    }
    static const char *verbs[] = {"write ", "compose ", "create ", "draft ", "give me ",
                                  "make ", "generate ", "produce ", "pen "};
    int v = -1;
    for (size_t i = 0; i < sizeof verbs / sizeof *verbs; i++)
        if (starts(p, verbs[i])) { v = (int)i; break; }
    if (v < 0) return LCX_ENOTFOUND;
    p += strlen(verbs[v]);
    static const char *arts[] = {"one more ", "another ", "an ", "a ", "me a ", "me an "};
    for (size_t i = 0; i < sizeof arts / sizeof *arts; i++)
        if (starts(p, arts[i])) { p += strlen(arts[i]); break; }
    const char *ab = strstr(p, " about ");
    if (!ab || ab == p) return LCX_ENOTFOUND;
    int words = 1;
    for (const char *q = p; q < ab; q++) words += *q == ' ';
    if (words > 6) return LCX_ENOTFOUND;
    size_t fl = norm(p, (size_t)(ab - p), format, flen);
    size_t tl = norm(ab + 7, strlen(ab + 7), topic, tlen);
    if (!fl || !tl) return LCX_ENOTFOUND;
    return LCX_OK;
}

/* ------------------------------------------------------------------ ordinal parsing */

static const char *ord_words[] = {"first", "second", "third", "fourth", "fifth", "sixth",
                                  "seventh", "eighth", "ninth", "tenth", "eleventh", "twelfth"};

/* Damerau (optimal string alignment) distance ≤ 1 */
static int within_one_edit(const char *a, size_t la, const char *b, size_t lb)
{
    if (la > lb + 1 || lb > la + 1) return 0;
    size_t i = 0;
    while (i < la && i < lb && a[i] == b[i]) i++;
    if (i == la && i == lb) return 1;
    if (la == lb) {
        if (!strncmp(a + i + 1, b + i + 1, la - i - 1)) return 1;           /* substitution */
        return i + 1 < la && a[i] == b[i + 1] && a[i + 1] == b[i] &&
               !strncmp(a + i + 2, b + i + 2, la - i - 2);                 /* transposition */
    }
    if (la + 1 == lb) return !strncmp(a + i, b + i + 1, la - i);            /* insertion */
    return !strncmp(a + i + 1, b + i, lb - i);                               /* deletion */
}

/* word → ordinal (1-based), 0 when not an ordinal word; *is_digit for "2nd"/"2" */
static int ordinal_of(const char *w, size_t n, int *is_digit)
{
    *is_digit = 0;
    if (n && isdigit((unsigned char)w[0])) {
        size_t d = 0;
        int v = 0;
        while (d < n && isdigit((unsigned char)w[d]) && d < 3) v = v * 10 + (w[d++] - '0');
        if (d < n && isdigit((unsigned char)w[d])) return 0;
        /* suffix: letters only (st/nd/rd/th and their typos), at most 3 */
        if (n - d > 3) return 0;
        for (size_t k = d; k < n; k++) if (!isalpha((unsigned char)w[k])) return 0;
        *is_digit = 1;
        return v;   /* may be 0: only valid with "(0 indexed)" */
    }
    for (int i = 0; i < 12; i++) {
        size_t l = strlen(ord_words[i]);
        if (n == l && !strncmp(w, ord_words[i], n)) return i + 1;
    }
    if (n >= 4)
        for (int i = 0; i < 12; i++) {
            size_t l = strlen(ord_words[i]);
            if (l >= 5 && within_one_edit(w, n, ord_words[i], l)) return i + 1;
        }
    return 0;
}

typedef struct { size_t off, len; } span_t;

/* words of the lower-cased text with edge punctuation removed (offsets into the text) */
static size_t split_words(const char *s, size_t n, span_t *w, size_t maxw)
{
    size_t k = 0, i = 0;
    while (i < n && k < maxw) {
        while (i < n && isspace((unsigned char)s[i])) i++;
        size_t b = i;
        while (i < n && !isspace((unsigned char)s[i])) i++;
        size_t e = i;
        while (b < e && is_edge_punct((unsigned char)s[b])) b++;
        while (e > b && is_edge_punct((unsigned char)s[e - 1])) e--;
        if (e > b) w[k++] = (span_t){b, e - b};
    }
    return k;
}

static int weq(const char *s, span_t w, const char *lit)
{
    return w.len == strlen(lit) && !strncmp(s + w.off, lit, w.len);
}

/* end of the sentence that starts at off: '.', '!', '?' followed by space/end, or newline */
static size_t sentence_end(const char *s, size_t n, size_t off)
{
    for (size_t i = off; i < n; i++) {
        if (s[i] == '\n') return i;
        if ((s[i] == '.' || s[i] == '!' || s[i] == '?') && (i + 1 == n || isspace((unsigned char)s[i + 1])))
            return i;
    }
    return n;
}

#define MAXW 512

int lcx_ordinal_parse(const char *text, size_t len, lcx_ordinal_req *out)
{
    if (!text || !out) return LCX_EINVAL;
    memset(out, 0, sizeof *out);
    if (len > 65536) len = 65536;   /* questions are short; never scan a whole history */
    char *lc = malloc(len + 1);
    span_t *w = malloc(MAXW * sizeof *w);
    if (!lc || !w) { free(lc); free(w); return LCX_ENOMEM; }
    for (size_t i = 0; i < len; i++) lc[i] = (char)tolower((unsigned char)text[i]);
    lc[len] = 0;
    size_t nw = split_words(lc, len, w, MAXW);
    int rc = LCX_ENOTFOUND;

    /* "prepend X to ..." — X kept verbatim from the original (case matters for a hash) */
    for (size_t i = 0; i + 1 < nw; i++) {
        if (!weq(lc, w[i], "prepend")) continue;
        size_t b = w[i].off + w[i].len;
        while (b < len && isspace((unsigned char)text[b])) b++;
        size_t e = b;
        while (e < len && !isspace((unsigned char)text[e])) e++;
        /* strip surrounding quotes/backticks only (a hash may contain other punctuation) */
        while (b < e && (text[b] == '"' || text[b] == '\'' || text[b] == '`')) b++;
        while (e > b && (text[e - 1] == '"' || text[e - 1] == '\'' || text[e - 1] == '`')) e--;
        if (e > b && e - b < sizeof out->prefix) {
            memcpy(out->prefix, text + b, e - b);
            out->prefix[e - b] = 0;
        }
        break;
    }

    /* find "the|to ORD" */
    size_t oi = 0;
    int ord = 0, is_digit = 0, found = 0;
    for (size_t i = 0; i + 1 < nw && !found; i++) {
        if (!weq(lc, w[i], "the") && !weq(lc, w[i], "to")) continue;
        size_t j = i + 1;
        if (weq(lc, w[j], "very") && j + 1 < nw) j++;          /* "the very first" */
        if (weq(lc, w[j], "last") || weq(lc, w[j], "final") || weq(lc, w[j], "latest") ||
            weq(lc, w[j], "lastest") || weq(lc, w[j], "penultimate")) {
            ord = weq(lc, w[j], "penultimate") ? LCX_ORD_LAST - 1 : LCX_ORD_LAST;
            oi = j; found = 1;
        } else if (weq(lc, w[j], "most") && j + 1 < nw && weq(lc, w[j + 1], "recent")) {
            ord = LCX_ORD_LAST; oi = j + 1; found = 1;
        } else {
            int o = ordinal_of(lc + w[j].off, w[j].len, &is_digit);
            if (o > 0 || (is_digit && o == 0)) {
                ord = o; oi = j; found = 1;
                /* "second to last" / "3rd from last" / "second last" */
                if (j + 2 < nw && (weq(lc, w[j + 1], "to") || weq(lc, w[j + 1], "from")) &&
                    weq(lc, w[j + 2], "last")) {
                    ord = LCX_ORD_LAST - (o - 1); oi = j + 2;
                } else if (j + 1 < nw && weq(lc, w[j + 1], "last")) {
                    ord = LCX_ORD_LAST - (o - 1); oi = j + 1;
                }
            }
        }
    }
    if (!found) goto done;
    size_t k = oi + 1;
    /* "(1 indexed)" / "(1-indexed)" / "(one indexed)" / "(0-indexed)" / "1-indexed" */
    for (size_t t = k; t < nw && t < k + 3; t++) {
        if (!memmem(lc + w[t].off, w[t].len, "index", 5)) continue;
        int zero = 0;
        for (size_t u = k; u <= t; u++)
            if (lc[w[u].off] == '0' || !strncmp(lc + w[u].off, "zero", 4)) zero = 1;
        k = t + 1;
        if (zero) {
            if (is_digit && ord >= 0) ord += 1;
            else if (ord > 0) goto done;    /* "first (0 indexed)": contradictory, fail closed */
        }
        break;
    }
    if (ord == 0) goto done;   /* "0th" without a 0-indexed note */
    out->ordinal = ord;
    if (k >= nw) { rc = LCX_OK; goto done; }     /* "the last" / "the 2nd" alone */
    if (weq(lc, w[k], "one") || weq(lc, w[k], "reply") || weq(lc, w[k], "response") ||
        weq(lc, w[k], "answer") || weq(lc, w[k], "message")) {
        /* "the last one": no format/topic, but not "the 2nd one about tapirs" */
        if (k + 1 < nw && weq(lc, w[k + 1], "about")) {
            size_t tb = w[k + 1].off + w[k + 1].len, te = sentence_end(lc, len, tb);
            out->has_topic = norm(lc + tb, te - tb, out->topic, sizeof out->topic) > 0;
        }
        rc = LCX_OK;
        goto done;
    }
    /* "time(s) I asked (you) (for|about|to write) X" */
    if (weq(lc, w[k], "time") || weq(lc, w[k], "request")) {
        size_t t = k + 1;
        while (t < nw && (weq(lc, w[t], "that") || weq(lc, w[t], "i") || weq(lc, w[t], "you") ||
                          weq(lc, w[t], "asked") || weq(lc, w[t], "requested") || weq(lc, w[t], "for") ||
                          weq(lc, w[t], "to") || weq(lc, w[t], "write") || weq(lc, w[t], "a") ||
                          weq(lc, w[t], "an")))
            t++;
        int about_only = 0;
        if (t < nw && weq(lc, w[t], "about")) { about_only = 1; }
        if (t >= nw) goto done;
        size_t xb = w[t].off + (about_only ? w[t].len : 0);
        size_t xe = sentence_end(lc, len, xb);
        char x[512];
        norm(lc + xb, xe - xb, x, sizeof x);
        const char *ab = strstr(x, " about ");
        if (!about_only && ab) {
            out->has_format = norm(x, (size_t)(ab - x), out->format, sizeof out->format) > 0;
            out->has_topic = norm(ab + 7, strlen(ab + 7), out->topic, sizeof out->topic) > 0;
        } else {
            out->has_topic = norm(x, strlen(x), out->topic, sizeof out->topic) > 0;
        }
        rc = out->has_topic ? LCX_OK : LCX_ENOTFOUND;
        goto done;
    }
    /* "{format} about {topic}" */
    {
        size_t ai = k;
        while (ai < nw && !weq(lc, w[ai], "about")) ai++;
        if (ai >= nw || ai == k || ai - k > 6) goto done;
        size_t fb = w[k].off, fe = w[ai - 1].off + w[ai - 1].len;
        size_t tb = w[ai].off + w[ai].len, te = sentence_end(lc, len, tb);
        if (te > fe && memchr(lc + fe, '.', (size_t)(w[ai].off - fe))) goto done;
        out->has_format = norm(lc + fb, fe - fb, out->format, sizeof out->format) > 0;
        out->has_topic = norm(lc + tb, te - tb, out->topic, sizeof out->topic) > 0;
        rc = out->has_format && out->has_topic ? LCX_OK : LCX_ENOTFOUND;
    }
done:
    if (rc) {
        char keep[sizeof out->prefix];
        memcpy(keep, out->prefix, sizeof keep);
        memset(out, 0, sizeof *out);
        memcpy(out->prefix, keep, sizeof keep);
    }
    free(lc);
    free(w);
    return rc;
}

/* ------------------------------------------------------------------ selection */

void lcx_select_result_free(lcx_select_result *r)
{
    if (!r) return;
    free(r->response);
    r->response = NULL;
}

int lcx_select(const lcx_msg *msgs, size_t n, const char *question, size_t qlen,
               lcx_select_result *res)
{
    if (!res) return LCX_EINVAL;
    memset(res, 0, sizeof *res);
    res->user_index = res->reply_index = -1;
    if ((!msgs && n) || !question) return LCX_EINVAL;
    int rc = lcx_ordinal_parse(question, qlen, &res->req);
    if (rc == LCX_ENOMEM) return rc;
    if (rc) {
        res->status = LCX_SEL_UNPARSED;
        snprintf(res->reason, sizeof res->reason, "cannot parse an ordinal request (\"the Nth {format} about {topic}\")");
        return LCX_OK;
    }
    /* the question itself, when passed as the last message, is not a candidate */
    size_t hn = n;
    if (hn && msgs[hn - 1].role && !strcmp(msgs[hn - 1].role, "user") && msgs[hn - 1].len == qlen &&
        msgs[hn - 1].content && !memcmp(msgs[hn - 1].content, question, qlen))
        hn--;
    long *match = malloc((hn ? hn : 1) * sizeof *match);
    if (!match) return LCX_ENOMEM;
    int cnt = 0;
    lcx_ordinal_req *q = &res->req;
    /* Topic candidates: the topic as parsed, then shorter prefixes cut at clause punctuation
     * (", and nothing else" / "; thanks" / " - quickly"), tried only while the longer one
     * matches no request at all. The full topic always wins when it matches, so this never
     * turns an exact match into a looser one. */
    char cand[8][256];
    int nc = 0;
    if (q->has_topic) {
        snprintf(cand[nc++], sizeof cand[0], "%s", q->topic);
        for (size_t k = strlen(q->topic); k-- > 0 && nc < 8;) {
            char ch = q->topic[k];
            if (ch != ',' && ch != ';' && ch != ':' && ch != '(' && !(ch == '-' && k > 0 && q->topic[k - 1] == ' '))
                continue;
            char t[256];
            norm(q->topic, k, t, sizeof t);
            if (t[0] && strcmp(t, cand[nc - 1])) snprintf(cand[nc++], sizeof cand[0], "%s", t);
        }
    } else {
        cand[nc++][0] = 0;
    }
    for (int ci = 0; ci < nc && cnt == 0; ci++) {
        for (size_t i = 0; i < hn; i++) {
            if (!msgs[i].role || strcmp(msgs[i].role, "user") || !msgs[i].content) continue;
            char f[128], t[256];
            if (lcx_request_parse(msgs[i].content, msgs[i].len, f, sizeof f, t, sizeof t)) continue;
            if (q->has_format && strcmp(f, q->format)) continue;
            if (q->has_topic && strcmp(t, cand[ci])) continue;
            match[cnt++] = (long)i;
        }
        if (cnt && ci > 0) snprintf(q->topic, sizeof q->topic, "%s", cand[ci]);
    }
    res->n_matches = cnt;
    long pick = -1;
    if (q->ordinal > 0 && q->ordinal <= cnt) pick = match[q->ordinal - 1];
    else if (q->ordinal < 0 && cnt + (q->ordinal - LCX_ORD_LAST) - 1 >= 0)
        pick = match[cnt + (q->ordinal - LCX_ORD_LAST) - 1];
    free(match);
    if (pick < 0) {
        res->status = LCX_SEL_NO_MATCH;
        snprintf(res->reason, sizeof res->reason, "asked for #%d of \"%.60s\" about \"%.60s\", found %d matching request(s)",
                 q->ordinal, q->has_format ? q->format : "*", q->has_topic ? q->topic : "*", cnt);
        return LCX_OK;
    }
    res->user_index = pick;
    for (size_t j = (size_t)pick + 1; j < hn; j++) {
        if (!msgs[j].role) continue;
        if (!strcmp(msgs[j].role, "assistant")) { res->reply_index = (long)j; break; }
        if (!strcmp(msgs[j].role, "user")) break;
    }
    if (res->reply_index < 0) {
        res->status = LCX_SEL_NO_REPLY;
        snprintf(res->reason, sizeof res->reason, "request at message %ld has no assistant reply", pick);
        return LCX_OK;
    }
    const lcx_msg *m = &msgs[res->reply_index];
    size_t pl = strlen(q->prefix);
    res->response = malloc(pl + m->len + 1);
    if (!res->response) return LCX_ENOMEM;
    memcpy(res->response, q->prefix, pl);
    if (m->len) memcpy(res->response + pl, m->content, m->len);
    res->response[pl + m->len] = 0;
    res->status = LCX_SEL_OK;
    return LCX_OK;
}
