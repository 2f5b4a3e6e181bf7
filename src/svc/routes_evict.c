/* longctx-svc: the rescue API (SPEC §2) — /evict/write, /evict/retrieve, /evict/dump and
 * /sessions/{id}/hibernate | resume | hibernation-status.
 *
 * Validation happens before anything is stored: a request is accepted whole or refused
 * whole (4xx, nothing written), and the store's append is atomic and durable (fsync'd)
 * before the 200 goes out, so an acknowledged chunk survives kill -9.
 *
 * Two request forms for /evict/write:
 *   A. JSON body {"session_id", "chunks":[{"text","token_range":[a,b],"layer","score"}]}
 *   B. ?session_id=ID, body {"chunks":[{"text","tokens":[ids],"round","layer"}]}
 * Form B carries token ids, not positions. When a chunk has no token_range, its range is
 * derived from a per-session position cursor: the span occupies the next len(tokens)
 * positions after the highest position the session holds so far (from either form), i.e.
 * [next, next+len(tokens)-1], in the order chunks are written. The cursor starts (once per
 * process and session) from a scan of the stored chunks, so it survives restarts. It is
 * a faithful "write order" position, not the engine's absolute KV position, which form B
 * does not transmit; engines that know positions should send token_range. */
#include "svc/svc.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_PREFILTER 1024
#define MAX_INT_JSON 9007199254740992.0  /* 2^53: larger JSON numbers are not exact integers */

/* ---------------------------------------------------------------- small JSON helpers */

/* Optional number field in [lo, hi] (integer: a whole number). 1 = present (value in *v),
 * 0 = absent/null, <0 = error set. */
static int opt_range(lcx_resp *resp, const cJSON *o, const char *name, double lo, double hi, bool integer, double *v)
{
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, name);
    if (!x || cJSON_IsNull(x)) return 0;
    if (!cJSON_IsNumber(x) || !isfinite(x->valuedouble) || (integer && x->valuedouble != floor(x->valuedouble))) {
        lcx__resp_error(resp, LCX_SVC_SCHEMA_STATUS, "invalid_type", "'%s' must be %s", name, integer ? "an integer" : "a number");
        return LCX_EINVAL;
    }
    if (x->valuedouble < lo || x->valuedouble > hi) {
        if (integer) lcx__resp_error(resp, LCX_SVC_SCHEMA_STATUS, "out_of_range", "'%s' must be in %.0f..%.0f (got %.17g)", name, lo, hi, x->valuedouble);
        else lcx__resp_error(resp, LCX_SVC_SCHEMA_STATUS, "out_of_range", "'%s' must be in %g..%g (got %.17g)", name, lo, hi, x->valuedouble);
        return LCX_EINVAL;
    }
    *v = x->valuedouble;
    return 1;
}

static int opt_int(lcx_resp *resp, const cJSON *o, const char *name, double lo, double hi, double *v)
{
    return opt_range(resp, o, name, lo, hi, true, v);
}

static int opt_num(lcx_resp *resp, const cJSON *o, const char *name, double lo, double hi, double *v)
{
    return opt_range(resp, o, name, lo, hi, false, v);
}

static int opt_bool(lcx_resp *resp, const cJSON *o, const char *name, bool *v)
{
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, name);
    if (!x || cJSON_IsNull(x)) return 0;
    if (!cJSON_IsBool(x)) {
        lcx__resp_error(resp, LCX_SVC_SCHEMA_STATUS, "invalid_type", "'%s' must be true or false", name);
        return LCX_EINVAL;
    }
    *v = cJSON_IsTrue(x);
    return 1;
}

/* session_id from the JSON body (when body != NULL) or the query string. */
static int get_session_id(lcx_req *req, lcx_resp *resp, const cJSON *body, const char **out)
{
    size_t ql = 0, idl = 0;
    const char *q = lcx__req_query_n(req, "session_id", &ql);
    const cJSON *x = body ? cJSON_GetObjectItemCaseSensitive(body, "session_id") : NULL;
    const char *id = NULL;
    if (q && !lcx__session_id_ok(q, ql)) {
        lcx__resp_error(resp, 400, "invalid_session_id", "session_id must be " LCX_SVC_SESSION_ID_RULE);
        return LCX_EINVAL;
    }
    if (x && !cJSON_IsNull(x)) {
        if (!cJSON_IsString(x)) {
            lcx__resp_error(resp, LCX_SVC_SCHEMA_STATUS, "invalid_type", "'session_id' must be a string");
            return LCX_EINVAL;
        }
        id = x->valuestring;   /* lcx__req_json refused \u0000: the C string is all of it */
        idl = strlen(id);
        if (q && (ql != idl || memcmp(q, id, idl))) {
            lcx__resp_error(resp, 400, "invalid_request", "session_id in the body and the query string differ");
            return LCX_EINVAL;
        }
    } else {
        id = q;
        idl = ql;
    }
    if (!id) {
        lcx__resp_error(resp, LCX_SVC_SCHEMA_STATUS, "missing_session_id", "session_id is required (JSON body or ?session_id=)");
        return LCX_EINVAL;
    }
    if (!lcx__session_id_ok(id, idl)) {
        lcx__resp_error(resp, 400, "invalid_session_id", "session_id must be " LCX_SVC_SESSION_ID_RULE);
        return LCX_EINVAL;
    }
    *out = id;
    return 0;
}

static void core_error(lcx_resp *resp, int rc, const char *what)
{
    const char *code;
    int st = lcx__svc_err_status(rc, &code);
    const char *d = rc == LCX_EMISMATCH ? lcx_store_open_detail() : "";   /* names both neural models */
    if (d[0]) lcx__resp_error(resp, st, code, "%s: %s", what, d);
    else lcx__resp_error(resp, st, code, "%s: %s", what, lcx_strerror(rc));
}

/* Acquires (creating when create) the session's store, enforcing --max-sessions on
 * creation. On failure the response is set. */
static int acquire(lcx_svc *svc, lcx_resp *resp, const char *id, bool create, lcx_store **st)
{
    int rc = lcx_sessions_acquire(svc->sessions, id, false, st);
    if (rc != LCX_ENOTFOUND || !create) {
        if (rc < 0 && rc != LCX_ENOTFOUND) core_error(resp, rc, "cannot open the session");
        return rc;
    }
    /* New session: creation is serialised so the --max-sessions check cannot race. */
    pthread_mutex_lock(&svc->mu);
    rc = lcx_sessions_acquire(svc->sessions, id, false, st);
    if (rc == LCX_ENOTFOUND) {
        if (svc->n_sessions_known >= svc->cfg.max_sessions) {
            pthread_mutex_unlock(&svc->mu);
            lcx__resp_error(resp, 429, "too_many_sessions", "the server holds %u sessions (--max-sessions)",
                           svc->cfg.max_sessions);
            return LCX_ELIMIT;
        }
        rc = lcx_sessions_acquire(svc->sessions, id, true, st);
        if (rc == 0) svc->n_sessions_known++;
    }
    pthread_mutex_unlock(&svc->mu);
    if (rc < 0) core_error(resp, rc, "cannot open the session");
    return rc;
}

/* ---------------------------------------------------------------- position cursors */

/* Finds (or creates by scanning the store) the session's cursor. Caller holds svc->mu. */
static struct svc_cursor *cursor_get(lcx_svc *svc, const char *id, lcx_store *st)
{
    size_t n = strlen(id);
    uint32_t b = (uint32_t)(lcx__hash64(id, n, 0x5eed) % svc->n_cursor_buckets);
    for (struct svc_cursor *c = svc->cursors[b]; c; c = c->next)
        if (!strcmp(c->id, id)) return c;
    struct svc_cursor *c = malloc(sizeof *c + n + 1);
    if (!c) return NULL;
    memcpy(c->id, id, n + 1);
    c->next_pos = 0;
    uint32_t cnt = lcx_store_count(st);
    for (uint32_t i = 0; i < cnt; i++) {
        lcx_chunk ch;
        if (lcx_store_get(st, i, &ch) == 0 && ch.tok_end + 1 > c->next_pos) c->next_pos = ch.tok_end + 1;
    }
    c->next = svc->cursors[b];
    svc->cursors[b] = c;
    return c;
}

/* ---------------------------------------------------------------- /evict/write fast path */

/* See svc.h. Every "return FJ_BAIL" means "let the cJSON path decide": it never decides
 * an answer itself, so the 4xx bodies stay exactly those of the general path. */
#define FJ_BAIL 1
#define FJ_MAX_DEPTH 64          /* skipped unknown members nested deeper → general path */
#define FJ_NUM_MAX 63            /* cJSON reads at most 63 number characters */

typedef struct {
    const char *p, *end;
    size_t body_len;
    lcx_svc_wbatch *w;
} fj;

static inline bool fj_digit(char c) { return c >= '0' && c <= '9'; }

static inline void fj_ws(fj *j)
{
    while (j->p < j->end && (*j->p == ' ' || *j->p == '\n' || *j->p == '\r' || *j->p == '\t')) j->p++;
}

static int fj_hex4(const char *p, const char *e, uint32_t *u)
{
    if (e - p < 4) return FJ_BAIL;
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) {
        char c = p[i];
        v <<= 4;
        if (c >= '0' && c <= '9') v |= (uint32_t)(c - '0');
        else if (c >= 'a' && c <= 'f') v |= (uint32_t)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') v |= (uint32_t)(c - 'A' + 10);
        else return FJ_BAIL;
    }
    *u = v;
    return 0;
}

/* Validates the maximal run of bytes >= 0x80 at p; returns its end or NULL. A valid UTF-8
 * sequence never contains an ASCII byte, so validating these runs one by one is the same
 * as validating the whole body (outside strings only ASCII is accepted at all). */
static const char *fj_utf8_run(const char *p, const char *e)
{
    const char *q = p;
    while (q < e && (unsigned char)*q >= 0x80) q++;
    return lcx__utf8_valid(p, (size_t)(q - p)) ? q : NULL;
}

/* String at j->p (the opening quote), hot: a 256-token span is ~1.6 KB of text. Without
 * escapes *s points into the body; with escapes the text is decoded into the arena (kept
 * there when keep, else overwritten by the next string). Decoded text is never longer than
 * its source, so an arena of body length + 1 never overflows. Raw control characters,
 * \u0000 (cJSON would cut the string there), lone surrogates and bad escapes → FJ_BAIL. */
static int fj_str(fj *j, bool keep, const char **s, size_t *n)
{
    const char *p = j->p + 1, *e = j->end, *start = p;
    for (;;) {   /* run of plain bytes */
        while (e - p >= 8 && !lcx__swar_json_special(lcx__swar_load(p), true)) p += 8;
        if (p >= e) return FJ_BAIL;
        unsigned char c = (unsigned char)*p;
        if (c == '"') {
            *s = start, *n = (size_t)(p - start);
            j->p = p + 1;
            return 0;
        }
        if (c == '\\') break;
        if (c < 0x20) return FJ_BAIL;
        if (c >= 0x80) {
            if (!(p = fj_utf8_run(p, e))) return FJ_BAIL;
            continue;
        }
        p++;
    }
    lcx_svc_wbatch *w = j->w;
    if (!w->arena && !(w->arena = malloc(j->body_len + 1))) return LCX_ENOMEM;
    char *o0 = w->arena + w->arena_len, *o = o0;
    memcpy(o, start, (size_t)(p - start));
    o += p - start;
    for (;;) {
        const char *r = p;
        while (e - p >= 8 && !lcx__swar_json_special(lcx__swar_load(p), true)) p += 8;
        if (p > r) {
            memcpy(o, r, (size_t)(p - r));
            o += p - r;
        }
        if (p >= e) return FJ_BAIL;
        unsigned char c = (unsigned char)*p;
        if (c == '"') break;
        if (c < 0x20) return FJ_BAIL;
        if (c >= 0x80) {
            const char *q = fj_utf8_run(p, e);
            if (!q) return FJ_BAIL;
            memcpy(o, p, (size_t)(q - p));
            o += q - p;
            p = q;
            continue;
        }
        if (c != '\\') { *o++ = (char)c; p++; continue; }
        if (e - p < 2) return FJ_BAIL;
        switch (p[1]) {
        case '"': *o++ = '"'; break;
        case '\\': *o++ = '\\'; break;
        case '/': *o++ = '/'; break;
        case 'b': *o++ = '\b'; break;
        case 'f': *o++ = '\f'; break;
        case 'n': *o++ = '\n'; break;
        case 'r': *o++ = '\r'; break;
        case 't': *o++ = '\t'; break;
        case 'u': {
            uint32_t u, lo;
            if (fj_hex4(p + 2, e, &u)) return FJ_BAIL;
            p += 6;
            if (u == 0 || (u >= 0xDC00 && u <= 0xDFFF)) return FJ_BAIL;
            if (u >= 0xD800 && u <= 0xDBFF) {   /* needs a low surrogate right after */
                if (e - p < 6 || p[0] != '\\' || p[1] != 'u' || fj_hex4(p + 2, e, &lo) || lo < 0xDC00 || lo > 0xDFFF)
                    return FJ_BAIL;
                p += 6;
                u = 0x10000 + ((u - 0xD800) << 10) + (lo - 0xDC00);
            }
            if (u < 0x80) {
                *o++ = (char)u;
            } else if (u < 0x800) {
                *o++ = (char)(0xC0 | (u >> 6));
                *o++ = (char)(0x80 | (u & 0x3F));
            } else if (u < 0x10000) {
                *o++ = (char)(0xE0 | (u >> 12));
                *o++ = (char)(0x80 | ((u >> 6) & 0x3F));
                *o++ = (char)(0x80 | (u & 0x3F));
            } else {
                *o++ = (char)(0xF0 | (u >> 18));
                *o++ = (char)(0x80 | ((u >> 12) & 0x3F));
                *o++ = (char)(0x80 | ((u >> 6) & 0x3F));
                *o++ = (char)(0x80 | (u & 0x3F));
            }
            continue;
        }
        default: return FJ_BAIL;
        }
        p += 2;
    }
    *s = o0, *n = (size_t)(o - o0);
    if (keep) w->arena_len += (size_t)(o - o0);
    j->p = p + 1;
    return 0;
}

/* Strict JSON number (RFC 8259 grammar; cJSON's laxer forms go to the general path). The
 * value is what cJSON gets (strtod), computed directly for short integers (token ids). */
static int fj_num(fj *j, double *v)
{
    const char *p = j->p, *e = j->end, *s = p;
    bool neg = false, is_int = true;
    if (p < e && *p == '-') p++, neg = true;
    if (p >= e) return FJ_BAIL;
    if (*p == '0') p++;
    else if (*p >= '1' && *p <= '9') while (p < e && fj_digit(*p)) p++;
    else return FJ_BAIL;
    if (p < e && *p == '.') {
        p++;
        if (p >= e || !fj_digit(*p)) return FJ_BAIL;
        while (p < e && fj_digit(*p)) p++;
        is_int = false;
    }
    if (p < e && (*p == 'e' || *p == 'E')) {
        p++;
        if (p < e && (*p == '+' || *p == '-')) p++;
        if (p >= e || !fj_digit(*p)) return FJ_BAIL;
        while (p < e && fj_digit(*p)) p++;
        is_int = false;
    }
    size_t len = (size_t)(p - s);
    if (len > FJ_NUM_MAX) return FJ_BAIL;
    if (is_int && len - neg <= 15) {   /* < 2^53: exact, same double as strtod */
        uint64_t x = 0;
        for (const char *q = s + neg; q < p; q++) x = x * 10 + (uint64_t)(*q - '0');
        *v = neg ? -(double)x : (double)x;
    } else {
        char buf[FJ_NUM_MAX + 1];
        memcpy(buf, s, len);
        buf[len] = 0;
        *v = strtod(buf, NULL);
    }
    j->p = p;
    return 0;
}

static int fj_lit(fj *j, const char *lit)
{
    size_t l = strlen(lit);
    if ((size_t)(j->end - j->p) < l || memcmp(j->p, lit, l)) return FJ_BAIL;
    j->p += l;
    return 0;
}

/* Skips (but fully checks) any value: members the handler ignores. */
static int fj_skip(fj *j, int depth)
{
    if (j->p >= j->end) return FJ_BAIL;
    const char *s;
    size_t n;
    double v;
    int rc;
    char open = *j->p;
    switch (open) {
    case '"': return fj_str(j, false, &s, &n);
    case 't': return fj_lit(j, "true");
    case 'f': return fj_lit(j, "false");
    case 'n': return fj_lit(j, "null");
    case '{':
    case '[': {
        char close = open == '{' ? '}' : ']';
        if (depth >= FJ_MAX_DEPTH) return FJ_BAIL;
        j->p++;
        fj_ws(j);
        if (j->p < j->end && *j->p == close) { j->p++; return 0; }
        for (;;) {
            if (open == '{') {
                if (j->p >= j->end || *j->p != '"') return FJ_BAIL;
                if ((rc = fj_str(j, false, &s, &n))) return rc;
                fj_ws(j);
                if (j->p >= j->end || *j->p != ':') return FJ_BAIL;
                j->p++;
                fj_ws(j);
            }
            if ((rc = fj_skip(j, depth + 1))) return rc;
            fj_ws(j);
            if (j->p >= j->end) return FJ_BAIL;
            if (*j->p == ',') { j->p++; fj_ws(j); continue; }
            if (*j->p == close) { j->p++; return 0; }
            return FJ_BAIL;
        }
    }
    default: return fj_num(j, &v);
    }
}

/* Member loop helper, called just after '{' (first) or after a member's value: reads the
 * next key and its ':'. Returns 0 with *done = false at the start of the value, 0 with
 * *done = true when the object closed, or FJ_BAIL. */
static int fj_key(fj *j, bool first, const char **k, size_t *kl, bool *done)
{
    *done = false;
    fj_ws(j);
    if (j->p >= j->end) return FJ_BAIL;
    if (first) {
        if (*j->p == '}') { j->p++; *done = true; return 0; }
    } else {
        if (*j->p == '}') { j->p++; *done = true; return 0; }
        if (*j->p != ',') return FJ_BAIL;
        j->p++;
        fj_ws(j);
    }
    if (j->p >= j->end || *j->p != '"') return FJ_BAIL;
    int rc = fj_str(j, false, k, kl);
    if (rc) return rc;
    fj_ws(j);
    if (j->p >= j->end || *j->p != ':') return FJ_BAIL;
    j->p++;
    fj_ws(j);
    return j->p < j->end ? 0 : FJ_BAIL;
}

static inline bool fj_is(const char *k, size_t kl, const char *name)
{
    size_t n = strlen(name);
    return kl == n && !memcmp(k, name, n);
}

/* Optional number member: null → absent. */
static int fj_opt_num(fj *j, bool *seen, bool *has, double *v)
{
    if (*seen) return FJ_BAIL;   /* duplicate key: cJSON takes the first; not worth mirroring */
    *seen = true;
    if (*j->p == 'n') return fj_lit(j, "null");
    if (*j->p != '-' && !fj_digit(*j->p)) return FJ_BAIL;
    *has = true;
    return fj_num(j, v);
}

/* One element of "chunks", validated exactly as the general path does (any failure →
 * FJ_BAIL so the general path reports it). */
static int fj_chunk(fj *j, uint32_t max_chunk_bytes)
{
    lcx_svc_wbatch *w = j->w;
    if (j->p >= j->end || *j->p != '{') return FJ_BAIL;
    j->p++;
    const char *text = NULL, *k;
    size_t tl = 0, kl;
    bool s_text = false, s_layer = false, s_round = false, s_score = false, s_tr = false, s_tk = false;
    bool h_layer = false, h_round = false, h_score = false, h_tr = false, h_tk = false, tk_ok = true;
    double layer = 0, round = 0, score = 0, tr[2] = {0, 0};
    int64_t tk_cnt = 0;
    int rc;
    bool done;
    for (bool first = true;; first = false) {
        if ((rc = fj_key(j, first, &k, &kl, &done))) return rc;
        if (done) break;
        if (fj_is(k, kl, "text")) {
            if (s_text || *j->p != '"') return FJ_BAIL;
            s_text = true;
            if ((rc = fj_str(j, true, &text, &tl))) return rc;
        } else if (fj_is(k, kl, "layer")) {
            if ((rc = fj_opt_num(j, &s_layer, &h_layer, &layer))) return rc;
        } else if (fj_is(k, kl, "round")) {
            if ((rc = fj_opt_num(j, &s_round, &h_round, &round))) return rc;
        } else if (fj_is(k, kl, "score")) {
            if ((rc = fj_opt_num(j, &s_score, &h_score, &score))) return rc;
        } else if (fj_is(k, kl, "token_range") || fj_is(k, kl, "tokens")) {
            bool is_tr = kl == 11;
            bool *seen = is_tr ? &s_tr : &s_tk;
            if (*seen) return FJ_BAIL;
            *seen = true;
            if (*j->p == 'n') { if ((rc = fj_lit(j, "null"))) return rc; continue; }
            if (*j->p != '[') return FJ_BAIL;
            j->p++;
            fj_ws(j);
            int64_t cnt = 0;
            if (j->p < j->end && *j->p == ']') {
                j->p++;
            } else {
                for (;;) {
                    double v;
                    if ((rc = fj_num(j, &v))) return rc;
                    if (is_tr) {
                        if (cnt >= 2) return FJ_BAIL;
                        tr[cnt] = v;
                    } else if (v != floor(v) || v < 0) {
                        tk_ok = false;
                    }
                    cnt++;
                    fj_ws(j);
                    if (j->p >= j->end) return FJ_BAIL;
                    if (*j->p == ',') { j->p++; fj_ws(j); continue; }
                    if (*j->p == ']') { j->p++; break; }
                    return FJ_BAIL;
                }
            }
            if (is_tr) {
                if (cnt != 2) return FJ_BAIL;
                h_tr = true;
            } else {
                h_tk = true;
                tk_cnt = cnt;
            }
        } else if ((rc = fj_skip(j, 2))) {
            return rc;
        }
    }
    /* the general path's checks, in its order */
    if (!s_text || tl > max_chunk_bytes) return FJ_BAIL;
    lcx_chunk ch = lcx_chunk_init();
    ch.text = text;
    ch.text_len = (uint32_t)tl;
    ch.layer = 0;
    ch.score = 0;
    if (h_layer) {
        if (layer != floor(layer) || !isfinite(layer) || layer < -1 || layer > 2147483647.0) return FJ_BAIL;
        ch.layer = (int32_t)layer;
    }
    if (h_round) {
        if (round != floor(round) || !isfinite(round) || round < -1 || round > 2147483647.0) return FJ_BAIL;
        ch.round = (int32_t)round;
    }
    if (h_score) {
        if (!isfinite(score) || score < -3.4e38 || score > 3.4e38) return FJ_BAIL;
        ch.score = (float)score;
    }
    int64_t derive = -1;
    if (h_tr) {
        if (tr[0] != floor(tr[0]) || tr[1] != floor(tr[1]) || tr[0] < 0 || tr[1] < tr[0] || tr[1] >= MAX_INT_JSON)
            return FJ_BAIL;
        ch.tok_start = (int64_t)tr[0];
        ch.tok_end = (int64_t)tr[1];
    } else if (h_tk) {
        if (!tk_ok) return FJ_BAIL;
        derive = tk_cnt ? tk_cnt : 1;
        w->n_derive++;
    } else {
        return FJ_BAIL;
    }
    if (tl == 0) return 0;   /* skipped, not counted (as in the general path) */
    if (w->m == w->cap) {
        int nc = w->cap ? w->cap * 2 : 64;
        lcx_chunk *cs = realloc(w->cs, (size_t)nc * sizeof *cs);
        if (!cs) return LCX_ENOMEM;
        w->cs = cs;
        int64_t *dl = realloc(w->derive_len, (size_t)nc * sizeof *dl);
        if (!dl) return LCX_ENOMEM;
        w->derive_len = dl;
        w->cap = nc;
    }
    w->cs[w->m] = ch;
    w->derive_len[w->m] = derive;
    w->m++;
    return 0;
}

void lcx__svc_wbatch_free(lcx_svc_wbatch *w)
{
    if (!w) return;
    free(w->cs);
    free(w->derive_len);
    free(w->arena);
    memset(w, 0, sizeof *w);
}

int lcx__svc_write_parse_fast(const char *body, size_t n, const char *query_id, uint32_t max_chunks,
                             uint32_t max_chunk_bytes, lcx_svc_wbatch *w)
{
    memset(w, 0, sizeof *w);
    fj j = {body, body + n, n, w};
    const char *k, *sid = NULL;
    size_t kl, sidl = 0;
    bool s_sid = false, s_chunks = false, done;
    uint32_t n_chunks = 0;
    int rc;
    fj_ws(&j);
    if (j.p >= j.end || *j.p != '{') return FJ_BAIL;
    j.p++;
    for (bool first = true;; first = false) {
        if ((rc = fj_key(&j, first, &k, &kl, &done))) return rc;
        if (done) break;
        if (fj_is(k, kl, "session_id")) {
            if (s_sid) return FJ_BAIL;
            s_sid = true;
            if (*j.p == 'n') {
                if ((rc = fj_lit(&j, "null"))) return rc;
                continue;
            }
            if (*j.p != '"') return FJ_BAIL;
            if ((rc = fj_str(&j, true, &sid, &sidl))) return rc;
            if (sidl >= sizeof w->id) return FJ_BAIL;
            memcpy(w->id, sid, sidl);
            w->id[sidl] = 0;
            w->has_id = true;
        } else if (fj_is(k, kl, "chunks")) {
            if (s_chunks || *j.p != '[') return FJ_BAIL;
            s_chunks = true;
            j.p++;
            fj_ws(&j);
            if (j.p < j.end && *j.p == ']') { j.p++; continue; }
            for (;;) {
                if (++n_chunks > max_chunks) return FJ_BAIL;
                if ((rc = fj_chunk(&j, max_chunk_bytes))) return rc;
                fj_ws(&j);
                if (j.p >= j.end) return FJ_BAIL;
                if (*j.p == ',') { j.p++; fj_ws(&j); continue; }
                if (*j.p == ']') { j.p++; break; }
                return FJ_BAIL;
            }
        } else if ((rc = fj_skip(&j, 1))) {
            return rc;
        }
    }
    fj_ws(&j);
    if (j.p != j.end || !s_chunks) return FJ_BAIL;
    /* session id rules of get_session_id() */
    const char *id = w->has_id ? w->id : query_id;
    if (!id || (w->has_id && query_id && strcmp(query_id, w->id)) || !lcx__session_id_ok(id, strlen(id))) return FJ_BAIL;
    return 0;
}

/* ---------------------------------------------------------------- POST /evict/write */

/* General path: cJSON tree + per-field checks, sets the 4xx answer on failure. Texts in
 * w point into *body (the caller frees it after the append). */
static int write_parse_cjson(lcx_svc *svc, lcx_req *req, lcx_resp *resp, cJSON **bodyp, const char **idp,
                             lcx_svc_wbatch *w)
{
    cJSON *body = NULL;
    int rc = lcx__req_json(req, resp, false, &body);
    *bodyp = body;
    if (rc < 0) return rc;
    if (get_session_id(req, resp, body, idp) < 0) return LCX_EINVAL;
    const cJSON *chunks = cJSON_GetObjectItemCaseSensitive(body, "chunks");
    if (!chunks) { lcx__resp_error(resp, LCX_SVC_SCHEMA_STATUS, "missing_field", "'chunks' is required"); return LCX_EINVAL; }
    if (!cJSON_IsArray(chunks)) { lcx__resp_error(resp, LCX_SVC_SCHEMA_STATUS, "invalid_type", "'chunks' must be an array"); return LCX_EINVAL; }
    int n = cJSON_GetArraySize(chunks);
    if ((uint32_t)n > svc->cfg.max_chunks_per_request) {
        lcx__resp_error(resp, 413, "too_many_chunks", "%d chunks in one request; the limit is %u (--max-chunks-per-request)",
                       n, svc->cfg.max_chunks_per_request);
        return LCX_ELIMIT;
    }
    lcx_chunk *cs = w->cs = calloc((size_t)(n ? n : 1), sizeof *cs);
    int64_t *derive_len = w->derive_len = calloc((size_t)(n ? n : 1), sizeof *derive_len);
    if (!cs || !derive_len) { lcx__resp_error(resp, 503, "out_of_memory", "out of memory"); return LCX_ENOMEM; }
    int m = 0, n_derive = 0;
    int i = 0;
    const cJSON *c;
    cJSON_ArrayForEach(c, chunks) {
        if (!cJSON_IsObject(c)) {
            lcx__resp_error(resp, LCX_SVC_SCHEMA_STATUS, "invalid_type", "chunks[%d] must be an object", i);
            return LCX_EINVAL;
        }
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(c, "text");
        if (!t) { lcx__resp_error(resp, LCX_SVC_SCHEMA_STATUS, "missing_field", "chunks[%d].text is required", i); return LCX_EINVAL; }
        if (!cJSON_IsString(t)) { lcx__resp_error(resp, LCX_SVC_SCHEMA_STATUS, "invalid_type", "chunks[%d].text must be a string", i); return LCX_EINVAL; }
        size_t tl = strlen(t->valuestring);
        if (tl > svc->cfg.max_chunk_bytes) {
            lcx__resp_error(resp, 413, "chunk_too_large", "chunks[%d].text is %zu bytes; the limit is %u (--max-chunk-bytes)",
                           i, tl, svc->cfg.max_chunk_bytes);
            return LCX_ELIMIT;
        }
        if (!lcx__utf8_valid(t->valuestring, tl)) {
            lcx__resp_error(resp, 400, "invalid_utf8", "chunks[%d].text is not valid UTF-8", i);
            return LCX_EINVAL;
        }
        lcx_chunk ch = lcx_chunk_init();
        ch.text = t->valuestring;
        ch.text_len = (uint32_t)tl;
        ch.layer = 0;
        ch.score = 0;
        double v;
        if ((rc = opt_int(resp, c, "layer", -1, 2147483647.0, &v)) < 0) return rc;
        if (rc) ch.layer = (int32_t)v;
        if ((rc = opt_int(resp, c, "round", -1, 2147483647.0, &v)) < 0) return rc;
        if (rc) ch.round = (int32_t)v;
        if ((rc = opt_num(resp, c, "score", -3.4e38, 3.4e38, &v)) < 0) return rc;
        if (rc) ch.score = (float)v;
        const cJSON *tr = cJSON_GetObjectItemCaseSensitive(c, "token_range");
        const cJSON *tk = cJSON_GetObjectItemCaseSensitive(c, "tokens");
        derive_len[m] = -1;
        if (tr && !cJSON_IsNull(tr)) {
            const cJSON *a = cJSON_GetArrayItem(tr, 0), *b = cJSON_GetArrayItem(tr, 1);
            if (!cJSON_IsArray(tr) || cJSON_GetArraySize(tr) != 2 || !cJSON_IsNumber(a) || !cJSON_IsNumber(b) ||
                a->valuedouble != floor(a->valuedouble) || b->valuedouble != floor(b->valuedouble)) {
                lcx__resp_error(resp, LCX_SVC_SCHEMA_STATUS, "invalid_type", "chunks[%d].token_range must be [start, end] integers", i);
                return LCX_EINVAL;
            }
            if (a->valuedouble < 0 || b->valuedouble < a->valuedouble || b->valuedouble >= MAX_INT_JSON) {
                lcx__resp_error(resp, LCX_SVC_SCHEMA_STATUS, "out_of_range", "chunks[%d].token_range needs 0 <= start <= end < 2^53", i);
                return LCX_EINVAL;
            }
            ch.tok_start = (int64_t)a->valuedouble;
            ch.tok_end = (int64_t)b->valuedouble;
        } else if (tk && !cJSON_IsNull(tk)) {
            if (!cJSON_IsArray(tk)) {
                lcx__resp_error(resp, LCX_SVC_SCHEMA_STATUS, "invalid_type", "chunks[%d].tokens must be an array of token ids", i);
                return LCX_EINVAL;
            }
            const cJSON *x;
            int64_t cnt = 0;
            cJSON_ArrayForEach(x, tk) {
                if (!cJSON_IsNumber(x) || x->valuedouble != floor(x->valuedouble) || x->valuedouble < 0) {
                    lcx__resp_error(resp, LCX_SVC_SCHEMA_STATUS, "invalid_type", "chunks[%d].tokens[%lld] must be a non-negative integer",
                                   i, (long long)cnt);
                    return LCX_EINVAL;
                }
                cnt++;
            }
            derive_len[m] = cnt ? cnt : 1;
            n_derive++;
        } else {
            lcx__resp_error(resp, LCX_SVC_SCHEMA_STATUS, "missing_field", "chunks[%d] needs token_range [a,b] (or tokens [ids])", i);
            return LCX_EINVAL;
        }
        i++;
        if (tl == 0) continue;   /* an empty span carries nothing to rescue: skipped, not counted */
        cs[m++] = ch;
    }
    w->m = m;
    w->n_derive = n_derive;
    return 0;
}

int lcx__svc_h_evict_write(lcx_svc *svc, lcx_req *req, lcx_resp *resp)
{
    cJSON *body = NULL;
    lcx_svc_wbatch w;
    lcx_store *st = NULL;
    const char *id = NULL;
    int rc;
    /* Fast path first (one strict pass, no tree, texts not copied); anything it does not
     * accept whole is re-parsed by the general path, which owns every error answer. */
    size_t blen;
    const char *bd = lcx__req_body(req, &blen);
    size_t qidl = 0;
    const char *qid = lcx__req_query_n(req, "session_id", &qidl);
    /* A query id with a NUL inside is not what its C string says: the general path refuses it. */
    rc = qid && strlen(qid) != qidl ? 1
         : lcx__svc_write_parse_fast(bd, blen, qid, svc->cfg.max_chunks_per_request, svc->cfg.max_chunk_bytes, &w);
    if (rc == 0) {
        id = w.has_id ? w.id : qid;
    } else {
        lcx__svc_wbatch_free(&w);
        if (write_parse_cjson(svc, req, resp, &body, &id, &w) < 0) goto out;
    }
    lcx_chunk *cs = w.cs;
    const int64_t *derive_len = w.derive_len;
    int m = w.m, n_derive = w.n_derive;

    if (m == 0) {           /* nothing to store: report the current total without creating the session */
        rc = lcx_sessions_acquire(svc->sessions, id, false, &st);
        if (rc != 0) st = NULL;
        uint32_t total = st ? lcx_store_count(st) : 0;
        lcx__buf_printf(lcx__resp_json_buf(resp, 200), "{\"accepted\":0,\"session_total\":%u}", total);
        goto out;
    }
    if (acquire(svc, resp, id, true, &st) < 0) { st = NULL; goto out; }

    /* Positions: derive missing ranges, advance the cursor past every range written. */
    pthread_mutex_lock(&svc->mu);
    struct svc_cursor *cur = NULL;
    if (n_derive) {
        cur = cursor_get(svc, id, st);
        if (!cur) {
            pthread_mutex_unlock(&svc->mu);
            lcx__resp_error(resp, 503, "out_of_memory", "out of memory");
            goto out;
        }
    }
    for (int k = 0; k < m; k++) {
        if (derive_len[k] >= 0) {
            cs[k].tok_start = cur->next_pos;
            cs[k].tok_end = cur->next_pos + derive_len[k] - 1;
        }
        if (cur && cs[k].tok_end + 1 > cur->next_pos) cur->next_pos = cs[k].tok_end + 1;
    }
    if (!cur) {   /* form A: keep an existing cursor ahead of explicit ranges */
        size_t idl = strlen(id);
        uint32_t b = (uint32_t)(lcx__hash64(id, idl, 0x5eed) % svc->n_cursor_buckets);
        for (struct svc_cursor *x = svc->cursors[b]; x; x = x->next)
            if (!strcmp(x->id, id)) {
                for (int k = 0; k < m; k++)
                    if (cs[k].tok_end + 1 > x->next_pos) x->next_pos = cs[k].tok_end + 1;
                break;
            }
    }
    pthread_mutex_unlock(&svc->mu);

    if (svc->pg) { lcx__svc_pg_write(svc, req, resp, id, st, cs, m); goto out; }
    /* the whole batch in one call: the store embeds it in parallel and fsyncs once */
    rc = lcx_store_append(st, cs, m, NULL);
    if (rc == LCX_ELIMIT) {
        lcx__resp_error(resp, 429, "session_full", "the session would exceed %u chunks (--max-chunks-per-session)",
                       svc->cfg.max_chunks_per_session);
        goto out;
    }
    if (rc < 0) { core_error(resp, rc, "append failed"); goto out; }
    lcx__svc_metrics_write(svc, cs, m);
    lcx__buf_printf(lcx__resp_json_buf(resp, 200), "{\"accepted\":%d,\"session_total\":%u}", m, lcx_store_count(st));
out:
    if (st) lcx_sessions_release(svc->sessions, st);
    lcx__svc_wbatch_free(&w);
    cJSON_Delete(body);
    return 0;
}

/* ---------------------------------------------------------------- POST /evict/retrieve */

static void write_chunk_json(lcx_buf *b, const lcx_chunk *c, const lcx_hit *h, int rank)
{
    lcx__buf_puts(b, "{\"text\":");
    lcx__buf_json_str(b, c->text, c->text_len);
    /* ints without printf (same bytes as %lld/%d): ~30% of the response-writing time was printf */
    lcx__buf_puts(b, ",\"token_range\":[");
    lcx__buf_int(b, (long long)c->tok_start);
    lcx__buf_puts(b, ",");
    lcx__buf_int(b, (long long)c->tok_end);
    lcx__buf_puts(b, "],\"layer\":");
    lcx__buf_int(b, (int)c->layer);
    lcx__buf_puts(b, ",\"round\":");
    lcx__buf_int(b, (int)c->round);
    lcx__buf_puts(b, ",\"score\":");
    lcx__buf_json_f32(b, c->score);
    lcx__buf_puts(b, ",\"similarity\":");
    lcx__buf_json_f32(b, h->score);
    lcx__buf_puts(b, ",\"dense\":");
    lcx__buf_json_f32(b, h->dense);
    lcx__buf_puts(b, ",\"bm25\":");
    lcx__buf_json_f32(b, h->bm25);
    lcx__buf_puts(b, ",\"rank\":");
    lcx__buf_int(b, rank);
    lcx__buf_puts(b, "}");
}

int lcx__svc_h_evict_retrieve(lcx_svc *svc, lcx_req *req, lcx_resp *resp)
{
    cJSON *body = NULL;
    lcx_store *st = NULL;
    lcx_chunk *cs = NULL;
    const char *id;
    if (lcx__req_json(req, resp, true, &body) < 0) return 0;
    if (get_session_id(req, resp, body, &id) < 0) goto out;

    const char *q = lcx__req_query(req, "query");
    const cJSON *qj = cJSON_GetObjectItemCaseSensitive(body, "query");
    if (qj && !cJSON_IsNull(qj)) {
        if (!cJSON_IsString(qj)) { lcx__resp_error(resp, LCX_SVC_SCHEMA_STATUS, "invalid_type", "'query' must be a string"); goto out; }
        q = qj->valuestring;
    }
    if (!q) { lcx__resp_error(resp, LCX_SVC_SCHEMA_STATUS, "missing_field", "'query' is required"); goto out; }
    if (!lcx__utf8_valid(q, strlen(q))) { lcx__resp_error(resp, 400, "invalid_utf8", "'query' is not valid UTF-8"); goto out; }

    lcx_search_opts o = lcx_search_defaults();
    double v;
    int rc;
    o.top_k = 8;
    o.score_floor = 0;
    if ((rc = opt_int(resp, body, "top_k", 1, LCX_TOP_K_MAX, &v)) < 0) goto out;
    if (rc) o.top_k = (int)v;
    if ((rc = opt_num(resp, body, "score_floor", 0, 1, &v)) < 0) goto out;
    if (rc) o.score_floor = (float)v;
    if ((rc = opt_num(resp, body, "hybrid_alpha", 0, 1, &v)) < 0) goto out;
    if (rc) o.alpha = (float)v;
    if ((rc = opt_int(resp, body, "prefilter", 1, MAX_PREFILTER, &v)) < 0) goto out;
    if (rc) o.prefilter = (int)v;
    if ((rc = opt_bool(resp, body, "use_rerank", &o.use_rerank)) < 0) goto out;
    bool raw = false;
    if ((rc = opt_bool(resp, body, "raw_query", &raw)) < 0) goto out;
    const cJSON *fu = cJSON_GetObjectItemCaseSensitive(body, "fusion");
    if (fu && !cJSON_IsNull(fu)) {
        if (cJSON_IsString(fu) && !strcmp(fu->valuestring, "linear")) o.fusion = LCX_FUSE_LINEAR;
        else if (cJSON_IsString(fu) && !strcmp(fu->valuestring, "rrf")) o.fusion = LCX_FUSE_RRF;
        else if (cJSON_IsString(fu) && !strcmp(fu->valuestring, "score")) o.fusion = LCX_FUSE_SCORE;
        else { lcx__resp_error(resp, LCX_SVC_SCHEMA_STATUS, "invalid_type", "'fusion' must be \"score\", \"linear\" or \"rrf\""); goto out; }
    }
    if (o.prefilter < o.top_k) o.prefilter = o.top_k;

    /* Rescue query signal (SPEC §4): the text after the last "question:" marker, else the
     * last 512 bytes. Engines send the whole user turn; matching the full turn ranks
     * filler above the fact. A short plain question passes through unchanged. */
    size_t qoff = 0, qlen = strlen(q);
    if (!raw) {
        size_t off, len;
        lcx_rescue_query(q, qlen, &off, &len);
        while (len && (q[off] == ' ' || q[off] == '\n' || q[off] == '\t' || q[off] == '\r')) off++, len--;
        if (len) qoff = off, qlen = len;   /* an empty tail ("... Question:") falls back to the whole query */
    }

    lcx_buf *b;
    if (svc->pg) lcx__svc_pg_sync(svc, id);
    rc = lcx_sessions_acquire(svc->sessions, id, false, &st);
    if (rc == LCX_ENOTFOUND) {   /* unknown session: an empty result, not an error */
        st = NULL;
        b = lcx__resp_json_buf(resp, 200);
        lcx__buf_puts(b, "{\"chunks\":[],\"session_total\":0,\"system_message\":\"\",\"query_used\":");
        lcx__buf_json_str(b, q + qoff, qlen);
        lcx__buf_puts(b, "}");
        goto out;
    }
    if (rc < 0) { st = NULL; core_error(resp, rc, "cannot open the session"); goto out; }

    lcx_hit hits[LCX_TOP_K_MAX];
    lcx_search_info info;
    o.info = &info;
    int n = lcx_store_search(st, q + qoff, qlen, &o, hits, o.top_k);
    if (n < 0) { core_error(resp, n, "search failed"); goto out; }
    cs = calloc((size_t)(n ? n : 1), sizeof *cs);
    if (!cs) { lcx__resp_error(resp, 503, "out_of_memory", "out of memory"); goto out; }
    int m = 0;
    for (int k = 0; k < n; k++) {
        if (lcx_store_get(st, hits[k].id, &cs[m]) < 0) continue;
        hits[m++] = hits[k];
    }
    lcx__svc_metrics_rescue(svc, m);
    lcx__svc_recent_rescue(svc, id, q + qoff, qlen, hits, m);
    b = lcx__resp_json_buf(resp, 200);
    /* One allocation for the whole answer (texts twice, escaped: mostly 1:1 for prose;
     * the rescue message is capped at 8000 characters) instead of ~8 doublings + copies. */
    size_t want = 1024 + qlen + 2 * (size_t)LCX_RESCUE_MAX_CHARS * 2;
    for (int k = 0; k < m; k++) want += (size_t)cs[k].text_len + (cs[k].text_len >> 3) + 256;
    lcx__buf_grow(b, want);
    lcx__buf_puts(b, "{\"chunks\":[");
    for (int k = 0; k < m; k++) {
        if (k) lcx__buf_puts(b, ",");
        write_chunk_json(b, &cs[k], &hits[k], k + 1);
    }
    lcx__buf_puts(b, "],\"session_total\":");
    lcx__buf_int(b, (long long)lcx_store_count(st));
    lcx__buf_puts(b, ",\"system_message\":");
    lcx_buf sm = {0};
    if (lcx__rescue_format(&sm, cs, m, LCX_RESCUE_MAX_CHARS) < 0) {
        lcx__buf_free(&sm);
        lcx__resp_error(resp, 503, "out_of_memory", "out of memory");
        goto out;
    }
    lcx__buf_json_str(b, sm.data ? sm.data : "", sm.len);
    lcx__buf_free(&sm);
    lcx__buf_puts(b, ",\"query_used\":");
    lcx__buf_json_str(b, q + qoff, qlen);
    if (svc->nn)   /* docs/neural.md: what the neural channel contributed */
        lcx__buf_printf(b, ",\"used_neural\":%s,\"used_rerank\":%s", info.used_neural ? "true" : "false",
                        info.used_rerank ? "true" : "false");
    if (lcx__buf_puts(b, "}") < 0) lcx__resp_error(resp, 500, "internal", "response too large");
out:
    if (st) lcx_sessions_release(svc->sessions, st);
    free(cs);
    cJSON_Delete(body);
    return 0;
}

/* ---------------------------------------------------------------- GET /evict/dump */

int lcx__svc_h_evict_dump(lcx_svc *svc, lcx_req *req, lcx_resp *resp)
{
    const char *id;
    lcx_store *st = NULL;
    if (get_session_id(req, resp, NULL, &id) < 0) return 0;
    if (svc->pg) lcx__svc_pg_sync(svc, id);
    int rc = lcx_sessions_acquire(svc->sessions, id, false, &st);
    lcx_buf *b = lcx__resp_json_buf(resp, 200);
    if (rc == LCX_ENOTFOUND) {
        lcx__buf_puts(b, "{\"session_id\":");
        lcx__buf_json_str(b, id, strlen(id));
        lcx__buf_puts(b, ",\"session_total\":0,\"token_ranges\":[],\"layers\":[],\"scores\":[]}");
        return 0;
    }
    if (rc < 0) { core_error(resp, rc, "cannot open the session"); return 0; }
    uint32_t n = lcx_store_count(st);
    lcx_buf tr = {0}, ly = {0}, sc = {0};
    uint32_t got = 0;
    for (uint32_t i = 0; i < n; i++) {
        lcx_chunk c;
        if (lcx_store_get(st, i, &c) < 0) continue;
        const char *sep = got ? "," : "";
        lcx__buf_printf(&tr, "%s[%lld,%lld]", sep, (long long)c.tok_start, (long long)c.tok_end);
        lcx__buf_printf(&ly, "%s%d", sep, (int)c.layer);
        lcx__buf_puts(&sc, sep);
        lcx__buf_json_f32(&sc, c.score);
        got++;
    }
    lcx_sessions_release(svc->sessions, st);
    if (tr.err || ly.err || sc.err) {   /* a piece is missing: never a 200 with it */
        lcx__resp_error(resp, 503, "out_of_memory", "out of memory while writing the reply");
        goto done;
    }
    lcx__buf_puts(b, "{\"session_id\":");
    lcx__buf_json_str(b, id, strlen(id));
    lcx__buf_printf(b, ",\"session_total\":%u,\"token_ranges\":[", n);
    if (tr.len) lcx__buf_append(b, tr.data, tr.len);
    lcx__buf_puts(b, "],\"layers\":[");
    if (ly.len) lcx__buf_append(b, ly.data, ly.len);
    lcx__buf_puts(b, "],\"scores\":[");
    if (sc.len) lcx__buf_append(b, sc.data, sc.len);
    if (lcx__buf_puts(b, "]}") < 0) lcx__resp_error(resp, 500, "internal", "response too large");
done:
    lcx__buf_free(&tr);
    lcx__buf_free(&ly);
    lcx__buf_free(&sc);
    return 0;
}

/* ---------------------------------------------------------------- /sessions/{id}/... */

static void write_status(lcx_buf *b, const char *id, const lcx_session_status *s, const char *extra)
{
    lcx__buf_puts(b, "{\"session_id\":");
    lcx__buf_json_str(b, id, strlen(id));
    if (extra) lcx__buf_puts(b, extra);
    lcx__buf_printf(b, ",\"in_ram\":%s,\"on_disk\":%s,\"n_chunks_in_ram\":%u,\"n_chunks_on_disk\":%u,"
                      "\"embedder_fingerprint\":",
                   s->in_ram ? "true" : "false", s->on_disk ? "true" : "false", s->n_chunks_in_ram, s->n_chunks_on_disk);
    lcx__buf_json_str(b, s->embedder_fingerprint, strnlen(s->embedder_fingerprint, sizeof s->embedder_fingerprint));
    lcx__buf_puts(b, ",\"hibernated_at\":");
    if (s->hibernated_at > 0) lcx__buf_json_num(b, s->hibernated_at);
    else lcx__buf_puts(b, "null");
    lcx__buf_puts(b, "}");
}

static int path_session(lcx_req *req, lcx_resp *resp, const char **id)
{
    *id = lcx__req_param(req, "id");
    /* %00 in the path never gets here (server.c refuses it), so the C string is the segment. */
    if (!*id || !lcx__session_id_ok(*id, strlen(*id))) {
        lcx__resp_error(resp, 400, "invalid_session_id", "session id must be " LCX_SVC_SESSION_ID_RULE);
        return LCX_EINVAL;
    }
    return 0;
}

/* The reference service's replies, always 200 for a valid id (SPEC §2):
 *   hibernate → {session_id, hibernated, n_chunks}: n_chunks counted before hibernating;
 *     a never-written or already hibernated session → false, 0.
 *   resume → {session_id, resumed, n_chunks, error}: no snapshot (or already in RAM) →
 *     false, 0, null; success → true, n, null; another embedder → false, 0,
 *     "EmbedderMismatch: …"; an unreadable snapshot format → "SnapshotSchemaMismatch: …".
 *   hibernation-status → {session_id, in_ram, on_disk, n_chunks_in_ram, n_chunks_on_disk,
 *     embedder_fingerprint, hibernated_at}, the last two null without a snapshot. */
static int session_op(lcx_svc *svc, lcx_req *req, lcx_resp *resp, int op)
{
    const char *id;
    if (path_session(req, resp, &id) < 0) return 0;
    if (svc->pg && lcx__svc_pg_session_op(svc, resp, id, op)) return 0;
    lcx_session_status s;
    memset(&s, 0, sizeof s);
    int rc = lcx_sessions_status(svc->sessions, id, &s);
    if (rc < 0 && rc != LCX_ENOTFOUND) { core_error(resp, rc, "status failed"); return 0; }
    bool known = rc == 0;
    if (op == 0) {
        if (!known) memset(&s, 0, sizeof s);
        lcx_buf *b = lcx__resp_json_buf(resp, 200);
        if (known && s.on_disk) { write_status(b, id, &s, NULL); return 0; }
        lcx__buf_puts(b, "{\"session_id\":");
        lcx__buf_json_str(b, id, strlen(id));
        lcx__buf_printf(b, ",\"in_ram\":%s,\"on_disk\":false,\"n_chunks_in_ram\":%u,\"n_chunks_on_disk\":0,"
                          "\"embedder_fingerprint\":null,\"hibernated_at\":null}",
                       s.in_ram ? "true" : "false", s.n_chunks_in_ram);
        return 0;
    }
    if (op == 1) {
        bool did = false;
        uint32_t n = 0;
        if (known && s.in_ram) {
            n = s.n_chunks_in_ram;
            rc = lcx_sessions_hibernate(svc->sessions, id);
            if (rc < 0 && rc != LCX_ENOTFOUND) { core_error(resp, rc, "hibernate failed"); return 0; }
            did = rc == 0;
            if (!did) n = 0;
        }
        lcx_buf *b = lcx__resp_json_buf(resp, 200);
        lcx__buf_puts(b, "{\"session_id\":");
        lcx__buf_json_str(b, id, strlen(id));
        lcx__buf_printf(b, ",\"hibernated\":%s,\"n_chunks\":%u}", did ? "true" : "false", n);
        return 0;
    }
    char err[512] = "";
    bool did = false;
    uint32_t n = 0;
    if (known && s.on_disk && !s.in_ram) {
        rc = lcx_sessions_resume(svc->sessions, id);
        if (rc == 0) {
            lcx_session_status t;
            memset(&t, 0, sizeof t);
            did = true;
            n = lcx_sessions_status(svc->sessions, id, &t) == 0 ? t.n_chunks_in_ram : s.n_chunks_on_disk;
        } else if (rc == LCX_EMISMATCH) {
            snprintf(err, sizeof err, "EmbedderMismatch: session '%s' was written with embedder %.*s, this server runs %s",
                     id, (int)strnlen(s.embedder_fingerprint, sizeof s.embedder_fingerprint), s.embedder_fingerprint,
                     lcx_embedder_fingerprint(svc->emb));
        } else if (rc == LCX_ECORRUPT || rc == LCX_ENOTSUP || rc == LCX_ETRUNC) {
            snprintf(err, sizeof err, "SnapshotSchemaMismatch: the snapshot of session '%s' cannot be read (%s)", id,
                     lcx_strerror(rc));
        } else if (rc != LCX_ENOTFOUND) {
            core_error(resp, rc, "resume failed");
            return 0;
        }
    }
    lcx_buf *b = lcx__resp_json_buf(resp, 200);
    lcx__buf_puts(b, "{\"session_id\":");
    lcx__buf_json_str(b, id, strlen(id));
    lcx__buf_printf(b, ",\"resumed\":%s,\"n_chunks\":%u,\"error\":", did ? "true" : "false", n);
    if (err[0]) lcx__buf_json_str(b, err, strlen(err));
    else lcx__buf_puts(b, "null");
    lcx__buf_puts(b, "}");
    return 0;
}

int lcx__svc_h_session_hibernate(lcx_svc *svc, lcx_req *req, lcx_resp *resp) { return session_op(svc, req, resp, 1); }
int lcx__svc_h_session_resume(lcx_svc *svc, lcx_req *req, lcx_resp *resp) { return session_op(svc, req, resp, 2); }
int lcx__svc_h_session_status(lcx_svc *svc, lcx_req *req, lcx_resp *resp) { return session_op(svc, req, resp, 0); }
