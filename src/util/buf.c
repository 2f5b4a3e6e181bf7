/* Growable byte buffer with a hard cap: every buffer fed from the network uses one, so an
 * oversized body fails with LCX_ELIMIT instead of growing without bound. */
#include "util/util.h"
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int reserve(lcx_buf *b, size_t extra)
{
    if (extra > SIZE_MAX - b->len - 1) return LCX_ELIMIT;
    size_t need = b->len + extra + 1;
    if (b->cap && b->len + extra > b->cap) return LCX_ELIMIT;
    if (need <= b->alloc) return LCX_OK;
    size_t n = b->alloc ? b->alloc : 256;
    while (n < need) n = n > SIZE_MAX / 2 ? need : n * 2;
    char *p = realloc(b->data, n);
    if (!p) return LCX_ENOMEM;
    b->data = p;
    b->alloc = n;
    return LCX_OK;
}

int lcx_buf_append(lcx_buf *b, const void *p, size_t n)
{
    int rc = reserve(b, n);
    if (rc) return rc;
    if (n) memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = 0;
    return LCX_OK;
}

int lcx_buf_puts(lcx_buf *b, const char *s) { return lcx_buf_append(b, s, strlen(s)); }

int lcx_buf_printf(lcx_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) return LCX_EINVAL;
    int rc = reserve(b, (size_t)n);
    if (rc) return rc;
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
    return LCX_OK;
}

int lcx_buf_json_str(lcx_buf *b, const char *s, size_t n)
{
    int rc = reserve(b, n + 2);
    if (rc) return rc;
    b->data[b->len++] = '"';
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        const char *esc = NULL;
        char tmp[8];
        switch (c) {
        case '"': esc = "\\\""; break;
        case '\\': esc = "\\\\"; break;
        case '\n': esc = "\\n"; break;
        case '\r': esc = "\\r"; break;
        case '\t': esc = "\\t"; break;
        case '\b': esc = "\\b"; break;
        case '\f': esc = "\\f"; break;
        default:
            if (c < 0x20) { snprintf(tmp, sizeof tmp, "\\u%04x", c); esc = tmp; }
        }
        if (esc) {
            if ((rc = lcx_buf_append(b, esc, strlen(esc)))) return rc;
        } else {
            if ((rc = reserve(b, 1))) return rc;
            b->data[b->len++] = (char)c;
        }
    }
    if ((rc = reserve(b, 1))) return rc;
    b->data[b->len++] = '"';
    b->data[b->len] = 0;
    return LCX_OK;
}

/* The shortest %.Ng (N in lo..hi) that parses back to exactly v: JSON readers get 0.4,
 * not 0.400000006, and never a lossy value. */
static int json_shortest(lcx_buf *b, double v, int lo, int hi, bool single)
{
    if (!isfinite(v)) return lcx_buf_puts(b, "null");
    if (v == (double)(long long)v && fabs(v) < 1e15) return lcx_buf_printf(b, "%lld", (long long)v);
    char tmp[40];
    for (int n = lo; n < hi; n++) {
        if (snprintf(tmp, sizeof tmp, "%.*g", n, v) >= (int)sizeof tmp) continue; /* cannot happen for n <= 17 */
        if (single ? strtof(tmp, NULL) == (float)v : strtod(tmp, NULL) == v) return lcx_buf_puts(b, tmp);
    }
    return lcx_buf_printf(b, "%.*g", hi, v);
}

int lcx_buf_json_num(lcx_buf *b, double v) { return json_shortest(b, v, 15, 17, false); }

int lcx_buf_json_f32(lcx_buf *b, float v) { return json_shortest(b, v, 6, 9, true); }

void lcx_buf_free(lcx_buf *b)
{
    free(b->data);
    b->data = NULL;
    b->len = b->alloc = 0;
}

char *lcx_buf_steal(lcx_buf *b, size_t *len)
{
    char *p = b->data;
    if (len) *len = b->len;
    b->data = NULL;
    b->len = b->alloc = 0;
    return p;
}
