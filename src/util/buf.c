/* Growable byte buffer with a hard cap: every buffer fed from the network uses one, so an
 * oversized body fails with LCX_ELIMIT instead of growing without bound. */
#include "util/util.h"
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Allocation-failure hook (tests only): from the Nth buffer allocation on, `count` fail.
 * Off (armed false) it costs one relaxed load per allocation. */
static bool armed;
static long countdown, fail_left;
static pthread_mutex_t hook_mu = PTHREAD_MUTEX_INITIALIZER;

void lcx__buf_fail_nth(long n, long count)
{
    pthread_mutex_lock(&hook_mu);
    countdown = n > 0 ? n : 0;
    fail_left = n > 0 && count > 0 ? count : 0;
    __atomic_store_n(&armed, fail_left > 0, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&hook_mu);
}

long lcx__buf_fail_pending(void)
{
    pthread_mutex_lock(&hook_mu);
    long c = countdown;
    pthread_mutex_unlock(&hook_mu);
    return c;
}

static bool hook_fails(void)
{
    if (!__atomic_load_n(&armed, __ATOMIC_RELAXED)) return false;
    bool f = false;
    pthread_mutex_lock(&hook_mu);
    if (countdown > 1) countdown--;
    else if (fail_left > 0) {
        countdown = 0;
        fail_left--;
        f = true;
    }
    pthread_mutex_unlock(&hook_mu);
    return f;
}

static void *buf_realloc(void *p, size_t n) { return hook_fails() ? NULL : realloc(p, n); }

/* Every write goes through here, so this is where an error is remembered: a writer that
 * ignores return codes still leaves b->err set for the one check at the end. */
static int fail(lcx_buf *b, int rc)
{
    if (!b->err) b->err = rc;
    return rc;
}

static int reserve(lcx_buf *b, size_t extra)
{
    if (extra > SIZE_MAX - b->len - 1) return fail(b, LCX_ELIMIT);
    size_t need = b->len + extra + 1;
    if (b->cap && b->len + extra > b->cap) return fail(b, LCX_ELIMIT);
    if (need <= b->alloc) return LCX_OK;
    size_t n = b->alloc ? b->alloc : 256;
    while (n < need) n = n > SIZE_MAX / 2 ? need : n * 2;
    char *p = buf_realloc(b->data, n);
    if (!p) return fail(b, LCX_ENOMEM);
    if (!b->data) p[0] = 0;
    b->data = p;
    b->alloc = n;
    return LCX_OK;
}

void lcx__buf_grow(lcx_buf *b, size_t extra)
{
    if (b->cap && extra > b->cap - b->len) extra = b->cap - b->len;
    if (extra > SIZE_MAX - b->len - 1) return;
    size_t need = b->len + extra + 1;
    if (need <= b->alloc) return;
    char *p = buf_realloc(b->data, need);
    if (!p) return;
    if (!b->data) p[0] = 0;
    b->data = p;
    b->alloc = need;
}

void lcx__buf_truncate(lcx_buf *b, size_t len)
{
    if (len < b->len) {
        b->len = len;
        b->data[len] = 0;
    }
    b->err = 0;
}

int lcx__buf_append(lcx_buf *b, const void *p, size_t n)
{
    int rc = reserve(b, n);
    if (rc) return rc;
    if (n) memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = 0;
    return LCX_OK;
}

int lcx__buf_puts(lcx_buf *b, const char *s) { return lcx__buf_append(b, s, strlen(s)); }

int lcx__buf_printf(lcx_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) return fail(b, LCX_EINVAL);
    int rc = reserve(b, (size_t)n);
    if (rc) return rc;
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
    return LCX_OK;
}

/* Hot: a retrieve response escapes about twice its chunk text (the chunks and the system
 * message, up to ~100 KB). Runs of safe bytes are found 8 at a time (lcx__swar_json_special)
 * and copied with one append instead of byte by byte. */
int lcx__buf_json_str(lcx_buf *b, const char *s, size_t n)
{
    int rc = lcx__buf_append(b, "\"", 1);
    size_t run = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        while (n - i >= 8 && !lcx__swar_json_special(lcx__swar_load(s + i), false)) i += 8;
        if (i >= n) break;
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c != '"' && c != '\\') continue;
        if (i > run) rc = lcx__buf_append(b, s + run, i - run);
        char esc[8];
        switch (c) {
        case '"': memcpy(esc, "\\\"", 3); break;
        case '\\': memcpy(esc, "\\\\", 3); break;
        case '\n': memcpy(esc, "\\n", 3); break;
        case '\r': memcpy(esc, "\\r", 3); break;
        case '\t': memcpy(esc, "\\t", 3); break;
        case '\b': memcpy(esc, "\\b", 3); break;
        case '\f': memcpy(esc, "\\f", 3); break;
        default: snprintf(esc, sizeof esc, "\\u%04x", c);
        }
        if (rc == 0) rc = lcx__buf_append(b, esc, strlen(esc));
        run = i + 1;
    }
    if (rc == 0 && n > run) rc = lcx__buf_append(b, s + run, n - run);
    if (rc == 0) rc = lcx__buf_append(b, "\"", 1);
    return rc;
}

/* v is an integer JSON writes as digits. The range test comes first: converting a double
 * beyond long long's range is undefined (a score of -1.5e35 reached it, fuzz_routes). */
static bool small_int(double v) { return fabs(v) < 1e15 && v == (double)(long long)v; }

/* The shortest %.Ng (N in lo..hi) that parses back to exactly v: JSON readers get 0.4,
 * not 0.400000006, and never a lossy value. */
static int json_shortest(lcx_buf *b, double v, int lo, int hi, bool single)
{
    if (!isfinite(v)) return lcx__buf_puts(b, "null");
    if (small_int(v)) return lcx__buf_printf(b, "%lld", (long long)v);
    char tmp[40];
    for (int n = lo; n < hi; n++) {
        if (snprintf(tmp, sizeof tmp, "%.*g", n, v) >= (int)sizeof tmp) continue; /* cannot happen for n <= 17 */
        if (single ? strtof(tmp, NULL) == (float)v : strtod(tmp, NULL) == v) return lcx__buf_puts(b, tmp);
    }
    return lcx__buf_printf(b, "%.*g", hi, v);
}

int lcx__buf_json_num(lcx_buf *b, double v) { return json_shortest(b, v, 15, 17, false); }

/* Decimal digits of u (no sign) into the END of buf; returns the first digit. */
static char *u64_digits(uint64_t u, char *end)
{
    char *p = end;
    do *--p = (char)('0' + u % 10); while (u /= 10);
    return p;
}

int lcx__buf_int(lcx_buf *b, long long v)
{
    char tmp[24], *e = tmp + sizeof tmp;
    uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;   /* LLONG_MIN safe */
    char *p = u64_digits(u, e);
    if (v < 0) *--p = '-';
    return lcx__buf_append(b, p, (size_t)(e - p));
}

/* Fast exact path of lcx__buf_json_f32: the same bytes as json_shortest(v, 6, 9, true)
 * (the shortest of %.6g/%.7g/%.8g that strtof maps back to v, else %.9g) without printf
 * or strtof. Idea: a normal float is m·2^-k (m 24-bit); for 0 < k <= 40, N = m·5^k
 * (< 2^117) is the exact value in units of 10^-k, so its decimal digits are the exact
 * decimal expansion. Rounding them to P digits (half to even, as glibc printf does in
 * the default rounding mode) gives %.Pg's digits; the candidate parses back to v iff it
 * lies within v's rounding interval (half a gap each side, a quarter below a power of
 * two; ties go to the even mantissa, as strtof does). Returns 1 when it handled v,
 * 0 when v is outside the fast range (caller uses the printf loop). */
typedef unsigned __int128 u128;
static int json_f32_fast(lcx_buf *b, float f, int *rc)
{
    double v = f;
    int e2;
    double fr = frexp(fabs(v), &e2);               /* |v| = fr·2^e2, fr in [0.5, 1) */
    uint32_t m = (uint32_t)ldexp(fr, 24);          /* exact: 24-bit mantissa */
    int k = 24 - e2;
    if (k <= 0 || k > 40 || m < (1u << 23)) return 0;
    u128 p5 = 1;
    for (int i = 0; i < k; i++) p5 *= 5;           /* 5^k = one ulp in units of 10^-k */
    u128 N = (u128)m * p5;
    /* digits of N (<= 36): split once by 10^18 so the rest is 64-bit arithmetic */
    char dig[48], *end = dig + sizeof dig, *d;
    const uint64_t E18 = 1000000000000000000ull;
    uint64_t hi = (uint64_t)(N / E18), lo = (uint64_t)(N % E18);
    if (hi) {
        d = end - 18;
        char *q = u64_digits(lo, end);
        memset(d, '0', (size_t)(q - d));
        d = u64_digits(hi, d);
    } else {
        d = u64_digits(lo, end);
    }
    int L = (int)(end - d);
    int X = L - 1 - k;                             /* decimal exponent of v */
    bool pow2 = m == (1u << 23);
    int P;
    char r[12];                                    /* rounded digits (P of them) */
    int Xr = X;
    for (P = 6; P <= 9; P++) {
        if (P >= L) {                              /* exact: no rounding, round-trips */
            memcpy(r, d, (size_t)L);
            memset(r + L, '0', (size_t)(P - L));
            Xr = X;
            break;
        }
        /* tail = digits after the first P, as a number; half = 5·10^(L-P-1) */
        u128 tail = 0, unit = 1;
        for (int i = P; i < L; i++) tail = tail * 10 + (unsigned)(d[i] - '0'), unit *= 10;
        u128 half = unit / 2;
        bool up = tail > half || (tail == half && ((d[P - 1] - '0') & 1));
        memcpy(r, d, (size_t)P);
        Xr = X;
        u128 diff = up ? unit - tail : tail;       /* |candidate - v| in units of 10^-k */
        if (up) {
            int i = P - 1;
            while (i >= 0 && r[i] == '9') r[i--] = '0';
            if (i >= 0) r[i]++;
            else { r[0] = '1'; Xr = X + 1; }       /* 99..9 → 100..0: one more digit left */
        }
        if (P == 9) break;                         /* %.9g: printed without a check */
        /* within the rounding interval of v? below a power of two the gap is half. */
        u128 lim = (!up && pow2) ? p5 : 2 * p5;    /* 4·|diff| vs 2·gap_half... */
        u128 d4 = 4 * diff;
        if (d4 < lim || (d4 == lim && !(m & 1))) break;
    }
    /* %.{P}g layout of r[0..P) ·10^Xr, trailing zeros (and a bare '.') dropped */
    int nd = P;
    while (nd > 1 && r[nd - 1] == '0') nd--;
    char out[48], *o = out;
    if (v < 0) *o++ = '-';
    if (Xr < P && Xr >= -4) {
        if (Xr >= 0) {
            for (int i = 0; i <= Xr; i++) *o++ = i < nd ? r[i] : '0';
            if (nd > Xr + 1) {
                *o++ = '.';
                for (int i = Xr + 1; i < nd; i++) *o++ = r[i];
            }
        } else {
            *o++ = '0';
            *o++ = '.';
            for (int i = 0; i < -Xr - 1; i++) *o++ = '0';
            for (int i = 0; i < nd; i++) *o++ = r[i];
        }
    } else {
        *o++ = r[0];
        if (nd > 1) {
            *o++ = '.';
            for (int i = 1; i < nd; i++) *o++ = r[i];
        }
        *o++ = 'e';
        int x = Xr;
        *o++ = x < 0 ? '-' : '+';
        if (x < 0) x = -x;
        if (x < 10) *o++ = '0';
        char tmp[8], *te = tmp + sizeof tmp, *tp = u64_digits((uint64_t)x, te);
        memcpy(o, tp, (size_t)(te - tp));
        o += te - tp;
    }
    *rc = lcx__buf_append(b, out, (size_t)(o - out));
    return 1;
}

/* hot: 4 per retrieved chunk. Integers and the fast range avoid printf/strtof; the
 * printf loop (json_shortest) stays the reference and covers everything else. */
int lcx__buf_json_f32(lcx_buf *b, float v)
{
    double dv = v;
    if (!isfinite(dv)) return lcx__buf_puts(b, "null");
    if (small_int(dv)) return lcx__buf_int(b, (long long)dv);
    int rc;
    if (json_f32_fast(b, v, &rc)) return rc;
    return json_shortest(b, v, 6, 9, true);
}

/* The reference (printf + strtof loop) kept for tests: same bytes as lcx__buf_json_f32. */
int lcx__buf_json_f32_ref(lcx_buf *b, float v) { return json_shortest(b, v, 6, 9, true); }

void lcx__buf_free(lcx_buf *b)
{
    free(b->data);
    b->data = NULL;
    b->len = b->alloc = 0;
    b->err = 0;
}

char *lcx__buf_steal(lcx_buf *b, size_t *len)
{
    char *p = b->data;
    if (len) *len = b->len;
    b->data = NULL;
    b->len = b->alloc = 0;
    b->err = 0;
    return p;
}
