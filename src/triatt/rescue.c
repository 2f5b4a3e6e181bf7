/* Rescue bridge (SPEC §2, §5): evicted token spans go to longctx-svc (Tier 2, asynchronous),
 * and come back as a system message before the next turn (Tier 3, synchronous).
 *
 * Tier 2 never stalls the engine: triatt_rescue_write_round builds the request body on the
 * caller's thread (decoding needs the caller's tokenizer) and hands it to a bounded queue;
 * one sender thread POSTs the bodies in order with libcurl. A full queue drops the round, a
 * failed POST (refused, timeout, non-2xx) drops its spans; both are counted. A hung service
 * costs at most timeout_ms per queued round on the sender thread, never on the caller.
 *
 * Span rule: drop out-of-range positions, sort, group contiguous runs, widen each by ±widen
 * tokens (clamped), merge runs that then overlap or touch (so no text is sent twice), decode
 * the ORIGINAL token ids, skip spans that decode to nothing but whitespace. A span's score
 * is the mean score of the evicted cells inside it. token_range is half-open [a, b). */
#include "triatt/internal.h"
#include "triatt/rescue_split.h"
#include <cjson/cJSON.h>
#include <ctype.h>
#include <curl/curl.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_BODY (8u << 20)          /* one /evict/write request */
#define MAX_RESPONSE (4u << 20)      /* one /evict/retrieve response */
#define MAX_SPAN_BYTES (1u << 20)    /* decoded text of one span */

/* ---------------------------------------------------------------- pure helpers */
static int cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return x < y ? -1 : x > y;
}

int triatt_rescue_spans(const int32_t *positions, int n, int n_tokens, int widen, triatt_span *spans, int max_spans)
{
    if (n < 0 || n_tokens < 0 || widen < 0 || max_spans < 0 || (n && !positions) || (max_spans && !spans))
        return LCX_EINVAL;
    int32_t *p = malloc((size_t)(n ? n : 1) * sizeof(int32_t));
    if (!p) return LCX_ENOMEM;
    int m = 0;
    for (int i = 0; i < n; i++)
        if (positions[i] >= 0 && positions[i] < n_tokens) p[m++] = positions[i];
    qsort(p, m, sizeof *p, cmp_i32);
    int ns = 0;
    for (int i = 0; i < m;) {
        int j = i;
        while (j + 1 < m && p[j + 1] <= p[j] + 1) j++;   /* contiguous run (duplicates fold in) */
        int64_t a = (int64_t)p[i] - widen, b = (int64_t)p[j] + 1 + widen;
        if (a < 0) a = 0;
        if (b > n_tokens) b = n_tokens;
        if (ns > 0 && a <= spans[ns - 1].b) {            /* overlaps or touches the previous */
            if (b > spans[ns - 1].b) spans[ns - 1].b = (int32_t)b;
        } else {
            if (ns == max_spans) break;
            spans[ns].a = (int32_t)a;
            spans[ns].b = (int32_t)b;
            ns++;
        }
        i = j + 1;
    }
    free(p);
    return ns;
}

/* The text rule is util/rescue_rules.c's, shared with longctx-svc's own rescue message. */
char *triatt_rescue_format(const triatt_rescue_chunk *chunks, int n, int max_chars, int *n_used)
{
    lcx_buf b = {0};
    lcx__rescue_text t;
    lcx__rescue_text_begin(&t, &b, max_chars > 0 ? (size_t)max_chars : 0);
    for (int i = 0; i < n; i++) {
        const char *s = chunks[i].text ? chunks[i].text : "";
        int rc = lcx__rescue_text_add(&t, s, strlen(s), chunks[i].a, chunks[i].b, chunks[i].layer);
        if (rc < 0) {
            lcx__buf_free(&b);
            return NULL;
        }
        if (rc == 0) break;
    }
    if (n_used) *n_used = t.n;
    if (!b.data && lcx__buf_append(&b, "", 0) < 0) return NULL;   /* an empty text is "", not NULL */
    return lcx__buf_steal(&b, NULL);
}

static bool all_space(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isspace((unsigned char)s[i])) return false;
    return true;
}

/* The rule is util/rescue_rules.c's, the same one longctx-svc applies to its own queries. */
char *triatt_rescue_query_signal(const char *text)
{
    if (!text) return NULL;
    size_t off, n;
    lcx__rescue_query(text, strlen(text), &off, &n);
    return strndup(text + off, n);
}

int triatt_msgs_insert_rescue(triatt_msg *msgs, int n, int cap, const char *text)
{
    if (!msgs || n < 0 || !text) return LCX_EINVAL;
    if (n >= cap) return LCX_ELIMIT;
    int at = n;
    for (int i = n - 1; i >= 0; i--)
        if (msgs[i].role && !strcmp(msgs[i].role, "user")) { at = i; break; }
    memmove(msgs + at + 1, msgs + at, (size_t)(n - at) * sizeof *msgs);
    msgs[at].role = "system";
    msgs[at].content = text;
    return n + 1;
}

/* ---------------------------------------------------------------- the client */
typedef struct qitem {
    char *body;
    size_t len;
    int n_spans;
    struct qitem *next;
} qitem;

struct triatt_rescue {
    char *endpoint, *session;
    triatt_rescue_config c;
    pthread_t th;
    bool th_up;
    pthread_mutex_t mu;
    pthread_cond_t cv, cv_idle;
    qitem *head, *tail;
    int qlen;
    bool in_flight, stop;
    triatt_rescue_stats st;
};

static size_t on_body(char *d, size_t sz, size_t nm, void *ud)
{
    lcx_buf *b = ud;
    if (lcx__buf_append(b, d, sz * nm) < 0) return 0;   /* over the cap: abort the transfer */
    return sz * nm;
}

/* libcurl progress callback: aborts the transfer once triatt_rescue_free asked to stop, so
 * freeing the client never waits out a hung request's timeout. */
static int on_progress(void *ud, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
    const triatt_rescue *r = ud;
    return __atomic_load_n(&r->stop, __ATOMIC_ACQUIRE) ? 1 : 0;
}

/* One POST; returns HTTP status (0 = transport failure). resp may be NULL. */
static long post_json(const triatt_rescue *r, const char *route, const char *body, size_t len, lcx_buf *resp)
{
    CURL *h = curl_easy_init();
    if (!h) return 0;
    char url[512];
    snprintf(url, sizeof url, "%s%s", r->endpoint, route);
    struct curl_slist *hd = curl_slist_append(NULL, "Content-Type: application/json");
    lcx_buf dummy = {.cap = 64 << 10};
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_POST, 1L);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hd);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)r->c.timeout_ms);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)LCX_MIN(r->c.timeout_ms, 3000));
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, resp ? resp : &dummy);
    curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(h, CURLOPT_XFERINFODATA, (void *)r);
    long status = 0;
    if (curl_easy_perform(h) == CURLE_OK) curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    curl_slist_free_all(hd);
    curl_easy_cleanup(h);
    lcx__buf_free(&dummy);
    return status;
}

static void *sender_main(void *arg)
{
    triatt_rescue *r = arg;
    pthread_mutex_lock(&r->mu);
    for (;;) {
        while (!r->stop && !r->head) pthread_cond_wait(&r->cv, &r->mu);
        if (r->stop) break;
        qitem *it = r->head;
        r->head = it->next;
        if (!r->head) r->tail = NULL;
        r->qlen--;
        r->in_flight = true;
        pthread_mutex_unlock(&r->mu);
        long status = post_json(r, "/evict/write", it->body, it->len, NULL);
        pthread_mutex_lock(&r->mu);
        r->in_flight = false;
        if (status >= 200 && status < 300) {
            r->st.rounds_sent++;
            r->st.spans_sent += it->n_spans;
        } else {
            r->st.rounds_failed++;
            r->st.spans_dropped += it->n_spans;
        }
        free(it->body);
        free(it);
        pthread_cond_broadcast(&r->cv_idle);
    }
    pthread_mutex_unlock(&r->mu);
    return NULL;
}

/* The service's own rule (util.h), so a client never sends an id the service refuses. */
static bool session_ok(const char *s) { return s && lcx__session_id_ok(s, strlen(s)); }

void triatt_rescue_config_default(triatt_rescue_config *c)
{
    memset(c, 0, sizeof *c);
    c->widen = 32;
    c->queue_cap = 16;
    c->timeout_ms = 10000;
    c->top_k = 8;
    c->score_floor = 0.20;
    c->max_chars = LCX_RESCUE_MAX_CHARS;
    c->prepopulate_span = 256;
}

int triatt_rescue_init(const triatt_rescue_config *cfg, triatt_rescue **out)
{
    if (!out) return LCX_EINVAL;
    *out = NULL;
    if (!cfg || !cfg->endpoint || !cfg->detok || !session_ok(cfg->session_id)) return LCX_EINVAL;
    if (strncmp(cfg->endpoint, "http://", 7) && strncmp(cfg->endpoint, "https://", 8)) return LCX_EINVAL;
    if (strlen(cfg->endpoint) > 400) return LCX_EINVAL;
    triatt_rescue *r = calloc(1, sizeof *r);
    if (!r) return LCX_ENOMEM;
    r->c = *cfg;
    if (r->c.widen < 0) r->c.widen = 32;
    if (r->c.queue_cap <= 0) r->c.queue_cap = 16;
    if (r->c.timeout_ms <= 0) r->c.timeout_ms = 10000;
    if (r->c.top_k <= 0) r->c.top_k = 8;
    if (r->c.top_k > LCX_TOP_K_MAX) r->c.top_k = LCX_TOP_K_MAX;
    if (!(r->c.score_floor >= 0 && r->c.score_floor <= 1)) r->c.score_floor = 0.20;
    if (r->c.max_chars <= 0) r->c.max_chars = LCX_RESCUE_MAX_CHARS;
    if (r->c.prepopulate_span <= 0) r->c.prepopulate_span = 256;
    r->endpoint = strdup(cfg->endpoint);
    r->session = strdup(cfg->session_id);
    if (!r->endpoint || !r->session) goto fail;
    size_t el = strlen(r->endpoint);
    while (el && r->endpoint[el - 1] == '/') r->endpoint[--el] = 0;   /* no double slash */
    r->c.endpoint = r->endpoint;
    r->c.session_id = r->session;
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->cv, NULL);
    pthread_cond_init(&r->cv_idle, NULL);
    if (pthread_create(&r->th, NULL, sender_main, r) != 0) {
        pthread_mutex_destroy(&r->mu);
        pthread_cond_destroy(&r->cv);
        pthread_cond_destroy(&r->cv_idle);
        goto fail;
    }
    r->th_up = true;
    *out = r;
    return LCX_OK;
fail:   /* an allocation or the sender thread */
    free(r->endpoint); free(r->session); free(r);
    return LCX_ENOMEM;
}

void triatt_rescue_free(triatt_rescue *r)
{
    if (!r) return;
    pthread_mutex_lock(&r->mu);
    __atomic_store_n(&r->stop, true, __ATOMIC_RELEASE);
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
    pthread_join(r->th, NULL);
    while (r->head) {
        qitem *it = r->head;
        r->head = it->next;
        free(it->body);
        free(it);
    }
    pthread_mutex_destroy(&r->mu);
    pthread_cond_destroy(&r->cv);
    pthread_cond_destroy(&r->cv_idle);
    free(r->endpoint); free(r->session); free(r);
}

static int enqueue(triatt_rescue *r, char *body, size_t len, int n_spans)
{
    pthread_mutex_lock(&r->mu);
    if (r->qlen >= r->c.queue_cap) {
        r->st.rounds_dropped++;
        r->st.spans_dropped += n_spans;
        pthread_mutex_unlock(&r->mu);
        free(body);
        return 0;
    }
    qitem *it = malloc(sizeof *it);
    if (!it) {
        r->st.rounds_dropped++;
        r->st.spans_dropped += n_spans;
        pthread_mutex_unlock(&r->mu);
        free(body);
        return LCX_ENOMEM;
    }
    *it = (qitem){body, len, n_spans, NULL};
    if (r->tail) r->tail->next = it;
    else r->head = it;
    r->tail = it;
    r->qlen++;
    r->st.rounds_queued++;
    r->st.spans_queued += n_spans;
    pthread_cond_signal(&r->cv);
    pthread_mutex_unlock(&r->mu);
    return n_spans;
}

/* Decodes spans and builds one /evict/write body. *n_out = chunks in the body. */
static int build_body(triatt_rescue *r, const triatt_span *sp, int ns, const int32_t *pos, const float *scores,
                      int n_pos, const int32_t *tokens, int layer, lcx_buf *b, int *n_out)
{
    int rc = lcx__buf_puts(b, "{\"session_id\":");
    if (rc >= 0) rc = lcx__buf_json_str(b, r->session, strlen(r->session));
    if (rc >= 0) rc = lcx__buf_puts(b, ",\"chunks\":[");
    int k = 0, empty = 0, over = 0;
    for (int i = 0; i < ns && rc >= 0; i++) {
        size_t cap = LCX_MIN((size_t)(sp[i].b - sp[i].a) * 48 + 256, (size_t)MAX_SPAN_BYTES);
        char *text = malloc(cap);
        if (!text) { rc = LCX_ENOMEM; break; }
        int tl = r->c.detok(r->c.detok_ud, tokens + sp[i].a, sp[i].b - sp[i].a, text, cap);
        if (tl >= 0 && (size_t)tl >= cap && (size_t)tl < MAX_SPAN_BYTES) {   /* snprintf-style: retry */
            char *t2 = realloc(text, (size_t)tl + 1);
            if (!t2) { free(text); rc = LCX_ENOMEM; break; }
            text = t2;
            cap = (size_t)tl + 1;
            tl = r->c.detok(r->c.detok_ud, tokens + sp[i].a, sp[i].b - sp[i].a, text, cap);
        }
        if (tl < 0 || (size_t)tl >= cap || all_space(text, tl)) { empty++; free(text); continue; }
        if (!lcx__utf8_valid(text, tl)) {   /* a span cut inside a multi-byte char: trim the edges */
            int s = 0;
            while (s < tl && ((unsigned char)text[s] & 0xC0) == 0x80) s++;
            int e = tl;
            while (e > s && !lcx__utf8_valid(text + s, e - s)) e--;
            memmove(text, text + s, e - s);
            tl = e - s;
            if (!tl) { empty++; free(text); continue; }
        }
        double ssum = 0;
        int sn = 0;
        for (int j = 0; scores && j < n_pos; j++)
            if (pos[j] >= sp[i].a && pos[j] < sp[i].b && isfinite(scores[j])) { ssum += scores[j]; sn++; }
        size_t mark = b->len;
        rc = lcx__buf_puts(b, k ? ",{\"text\":" : "{\"text\":");
        if (rc >= 0) rc = lcx__buf_json_str(b, text, tl);
        if (rc >= 0) rc = lcx__buf_printf(b, ",\"token_range\":[%d,%d],\"layer\":%d,\"score\":", sp[i].a, sp[i].b, layer);
        if (rc >= 0) rc = lcx__buf_json_num(b, sn ? ssum / sn : 0.0);
        if (rc >= 0) rc = lcx__buf_puts(b, "}");
        free(text);
        if (rc == LCX_ELIMIT) {          /* body cap: keep what fits, count the rest */
            lcx__buf_truncate(b, mark);
            over = ns - i;
            rc = 0;
            break;
        }
        k++;
    }
    if (rc >= 0) {
        b->cap = 0;                       /* the closing bytes always fit */
        rc = lcx__buf_puts(b, "]}");
    }
    pthread_mutex_lock(&r->mu);
    r->st.spans_empty += empty;
    r->st.spans_dropped += over;
    pthread_mutex_unlock(&r->mu);
    *n_out = k;
    return rc;
}

int triatt_rescue_write_round(triatt_rescue *r, const int32_t *positions, const float *scores, int n,
                              const int32_t *tokens, int n_tokens, int layer)
{
    if (!r || n < 0 || n_tokens < 0 || (n && !positions) || (n_tokens && !tokens)) return LCX_EINVAL;
    if (!n) return 0;
    triatt_span *sp = malloc((size_t)n * sizeof *sp);
    if (!sp) return LCX_ENOMEM;
    int ns = triatt_rescue_spans(positions, n, n_tokens, r->c.widen, sp, n);
    if (ns <= 0) { free(sp); return ns; }
    /* merged runs can cover a whole round: cut them into blocks Tier 3 can return
     * (rescue_split.c says why) */
    triatt_span *cut = NULL;
    int nc = triatt__rescue_split_for_widen(sp, ns, r->c.widen, &cut);
    free(sp);
    if (nc < 0) return nc;
    sp = cut;
    ns = nc;
    lcx_buf b = {.cap = MAX_BODY - 16};
    int k = 0;
    int rc = build_body(r, sp, ns, positions, scores, n, tokens, layer, &b, &k);
    free(sp);
    if (rc < 0 || k == 0) { lcx__buf_free(&b); return rc < 0 ? rc : 0; }
    size_t len;
    char *body = lcx__buf_steal(&b, &len);
    return enqueue(r, body, len, k);
}

int triatt_rescue_prepopulate(triatt_rescue *r, const int32_t *tokens, int n_tokens)
{
    if (!r || n_tokens < 0 || (n_tokens && !tokens)) return LCX_EINVAL;
    if (!n_tokens) return 0;
    int step = r->c.prepopulate_span, ns = (n_tokens + step - 1) / step;
    triatt_span *sp = malloc((size_t)ns * sizeof *sp);
    if (!sp) return LCX_ENOMEM;
    for (int i = 0; i < ns; i++) {
        sp[i].a = i * step;
        sp[i].b = LCX_MIN(n_tokens, (i + 1) * step);
    }
    lcx_buf b = {.cap = MAX_BODY - 16};
    int k = 0;
    int rc = build_body(r, sp, ns, NULL, NULL, 0, tokens, 0, &b, &k);
    free(sp);
    if (rc < 0 || k == 0) { lcx__buf_free(&b); return rc < 0 ? rc : 0; }
    size_t len;
    char *body = lcx__buf_steal(&b, &len);
    return enqueue(r, body, len, k);
}

int triatt_rescue_flush(triatt_rescue *r, int timeout_ms)
{
    if (!r) return LCX_EINVAL;
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += timeout_ms / 1000;
    dl.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (dl.tv_nsec >= 1000000000L) { dl.tv_sec++; dl.tv_nsec -= 1000000000L; }
    int rc = LCX_OK;
    pthread_mutex_lock(&r->mu);
    while (r->head || r->in_flight) {
        if (pthread_cond_timedwait(&r->cv_idle, &r->mu, &dl) == ETIMEDOUT) { rc = LCX_ETIMEOUT; break; }
    }
    pthread_mutex_unlock(&r->mu);
    return rc;
}

static void count_retrieve(triatt_rescue *r, bool ok)
{
    pthread_mutex_lock(&r->mu);
    if (ok) r->st.retrieve_ok++;
    else r->st.retrieve_failed++;
    pthread_mutex_unlock(&r->mu);
}

int triatt_rescue_rehydrate(triatt_rescue *r, const char *question, char **text_out)
{
    if (!r || !question || !text_out) return LCX_EINVAL;
    *text_out = NULL;
    char *q = triatt_rescue_query_signal(question);
    if (!q) return LCX_ENOMEM;
    lcx_buf req = {.cap = 1 << 20}, resp = {.cap = MAX_RESPONSE};
    int rc = lcx__buf_puts(&req, "{\"session_id\":");
    if (rc >= 0) rc = lcx__buf_json_str(&req, r->session, strlen(r->session));
    if (rc >= 0) rc = lcx__buf_puts(&req, ",\"query\":");
    if (rc >= 0) rc = lcx__buf_json_str(&req, q, strlen(q));
    if (rc >= 0) rc = lcx__buf_printf(&req, ",\"top_k\":%d,\"score_floor\":%.4f}", r->c.top_k, r->c.score_floor);
    free(q);
    if (rc < 0) { lcx__buf_free(&req); return rc; }
    long status = post_json(r, "/evict/retrieve", req.data, req.len, &resp);
    lcx__buf_free(&req);
    if (status < 200 || status >= 300) {
        lcx__buf_free(&resp);
        count_retrieve(r, false);
        return LCX_ENET;
    }
    cJSON *j = cJSON_ParseWithLength(resp.data ? resp.data : "", resp.len);
    lcx__buf_free(&resp);
    const cJSON *chunks = cJSON_GetObjectItemCaseSensitive(j, "chunks");
    if (!cJSON_IsArray(chunks)) {
        cJSON_Delete(j);
        count_retrieve(r, false);
        return LCX_ECORRUPT;
    }
    int n = cJSON_GetArraySize(chunks), k = 0;
    triatt_rescue_chunk *ch = calloc(n ? n : 1, sizeof *ch);
    if (!ch) { cJSON_Delete(j); return LCX_ENOMEM; }
    for (const cJSON *c = chunks->child; c; c = c->next) {
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(c, "text");
        const cJSON *tr = cJSON_GetObjectItemCaseSensitive(c, "token_range");
        const cJSON *ly = cJSON_GetObjectItemCaseSensitive(c, "layer");
        if (!cJSON_IsString(t)) continue;
        ch[k].text = t->valuestring;
        if (cJSON_IsArray(tr) && cJSON_GetArraySize(tr) == 2) {
            ch[k].a = (int32_t)cJSON_GetArrayItem(tr, 0)->valuedouble;
            ch[k].b = (int32_t)cJSON_GetArrayItem(tr, 1)->valuedouble;
        }
        ch[k].layer = cJSON_IsNumber(ly) ? (int)ly->valuedouble : 0;
        k++;
    }
    int used = 0;
    if (k > 0) {
        *text_out = triatt_rescue_format(ch, k, r->c.max_chars, &used);
        if (!*text_out) rc = LCX_ENOMEM;
        else if (!used) { free(*text_out); *text_out = NULL; }
    }
    free(ch);
    cJSON_Delete(j);
    count_retrieve(r, rc >= 0);
    return rc < 0 ? rc : used;
}

void triatt_rescue_get_stats(triatt_rescue *r, triatt_rescue_stats *out)
{
    if (!r || !out) return;
    pthread_mutex_lock(&r->mu);
    *out = r->st;
    pthread_mutex_unlock(&r->mu);
}
