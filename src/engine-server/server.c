/* OpenAI-compatible server over ChatSession (see include/longctx/engine_server.h).
 *
 * Threading: libmicrohttpd with a thread per connection, so a handler may block. The model
 * runs one generation at a time: a request takes a ticket and waits its turn (FIFO); the
 * queue bound is checked when the ticket is taken (429 beyond). Sessions are only touched
 * by the ticket holder; it changes the session table under mu as well (for readers outside
 * the turn).
 * Streaming: a worker thread runs the turn and appends SSE events to a buffer the MHD
 * content reader drains; when the client goes away MHD frees the reader, which sets the
 * cancel flag the per-token hook checks, so generation stops at the next token. MHD only
 * notices when a write fails, which can be hundreds of tokens late on a busy host (the
 * worker outruns the connection thread), so the hook also polls the client's socket for
 * its FIN. The same check stops a non-streamed request whose client has left. A client that
 * half-closes after sending its request counts as gone (so does llama.cpp's server). */
#define _GNU_SOURCE
#include "longctx/engine_server.h"

#include <cjson/cJSON.h>
#include <microhttpd.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <arpa/inet.h>
#include <stdarg.h>

#include "util/util.h"

#define MAX_BODY (8u << 20)        /* request body limit (413 beyond) */
#define MAX_STOPS 4                /* OpenAI's limit on "stop" strings */
#define MAX_KEY 128

/* A keyed session and the conversation as its client sees it: one chained hash per message
 * (role and content, the reply as it was sent), so a request whose history is not this
 * conversation is recognised as another one, whatever its length. The session itself also
 * holds the rescue messages it inserted; the client never sends those back. */
typedef struct {
    char key[MAX_KEY];
    eng_session *s;
    double last_used;
    uint64_t *hist;
    int n_hist, cap_hist;
    unsigned gen;                  /* restarts: a new conversation gets a new rescue session */
    bool stale;                    /* hist lost a message (OOM): the next request restarts */
} slot;

struct eng_server {
    eng_server_opts o;
    char model_id[128];
    struct MHD_Daemon *d;
    int port;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    uint64_t next_ticket, serving;    /* FIFO turn */
    slot *slots;
    int n_slots;
    uint64_t served, rejected, rescue_lost, cancelled, generated, sessions_reset;
    int workers;                      /* stream workers alive (stop waits for them) */
    bool rescue;
};

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

static uint64_t msg_hash(uint64_t prev, const char *role, const char *content, size_t content_len)
{
    return lcx__hash64(content, content_len, lcx__hash64(role, strlen(role) + 1, prev));
}

static int hist_push(slot *sl, uint64_t h)
{
    if (sl->n_hist == sl->cap_hist) {
        const int nc = sl->cap_hist ? sl->cap_hist * 2 : 16;
        uint64_t *nh = realloc(sl->hist, (size_t)nc * sizeof *nh);
        if (!nh) return LCX_ENOMEM;
        sl->hist = nh;
        sl->cap_hist = nc;
    }
    sl->hist[sl->n_hist++] = h;
    return 0;
}

static void slot_free(slot *sl)
{
    eng_session_free(sl->s);
    free(sl->hist);
}

eng_server_opts eng_server_defaults(void)
{
    eng_server_opts o;
    memset(&o, 0, sizeof o);
    o.host = "127.0.0.1";
    o.model_id = "longctx-engine";
    o.session = eng_session_default_params();
    o.max_queue = 8;
    o.max_sessions = 16;
    o.idle_s = 600;
    return o;
}

/* ---- responses -------------------------------------------------------------------- */

static enum MHD_Result send_json(struct MHD_Connection *c, unsigned status, cJSON *j,
                                 const char *hname, const char *hval)
{
    char *txt = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    if (!txt) return MHD_NO;
    struct MHD_Response *r = MHD_create_response_from_buffer(strlen(txt), txt, MHD_RESPMEM_MUST_FREE);
    if (!r) { free(txt); return MHD_NO; }
    MHD_add_response_header(r, "Content-Type", "application/json");
    if (hname) MHD_add_response_header(r, hname, hval);
    enum MHD_Result ok = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ok;
}

/* OpenAI's error shape: {"error":{"message","type","code","param"}} */
static enum MHD_Result send_err(struct MHD_Connection *c, unsigned status, const char *type,
                                const char *code, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static enum MHD_Result send_err(struct MHD_Connection *c, unsigned status, const char *type,
                                const char *code, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    cJSON *j = cJSON_CreateObject(), *e = cJSON_AddObjectToObject(j, "error");
    cJSON_AddStringToObject(e, "message", msg);
    cJSON_AddStringToObject(e, "type", type);
    cJSON_AddStringToObject(e, "code", code);
    cJSON_AddNullToObject(e, "param");
    return send_json(c, status, j, NULL, NULL);
}

/* ---- the turn (FIFO) -------------------------------------------------------------- */

/* Takes a ticket; false when max_queue requests already wait behind the running one. */
static bool turn_enter(eng_server *s, uint64_t *ticket, bool force)
{
    pthread_mutex_lock(&s->mu);
    const uint64_t waiting = s->next_ticket - s->serving;   /* running + queued */
    if (!force && waiting > (uint64_t)s->o.max_queue) {
        s->rejected++;
        pthread_mutex_unlock(&s->mu);
        return false;
    }
    *ticket = s->next_ticket++;
    while (s->serving != *ticket) pthread_cond_wait(&s->cv, &s->mu);
    pthread_mutex_unlock(&s->mu);
    return true;
}

static void turn_leave(eng_server *s)
{
    pthread_mutex_lock(&s->mu);
    s->serving++;
    s->served++;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

/* Under the turn: releases idle sessions. */
static void release_idle(eng_server *s)
{
    const double t = now_s();
    pthread_mutex_lock(&s->mu);   /* the table's writers hold mu too (eng_server_n_sessions) */
    for (int i = 0; i < s->n_slots;) {
        if (t - s->slots[i].last_used >= s->o.idle_s) {
            slot_free(&s->slots[i]);
            s->slots[i] = s->slots[--s->n_slots];
        } else i++;
    }
    pthread_mutex_unlock(&s->mu);
}

/* gen > 0: the key's rescue session is "KEY~GEN", so a restarted conversation never gets
 * the spans the previous one evicted. */
static int session_new(eng_server *s, const char *key, unsigned gen, eng_session **out, char *err, size_t errlen)
{
    eng_session_params sp = s->o.session;
    char id[MAX_KEY + 16];
    if (key && gen) snprintf(id, sizeof id, "%s~%u", key, gen);
    sp.session_id = key && gen ? id : key;
    return eng_session_init(s->o.model, &sp, out, err, errlen);
}

/* Under the turn: the session of key (created when absent; the least recently used one
 * goes when the table is full). *sl: its slot (NULL when unkeyed; stable until the turn
 * ends). *fresh: it was just created. */
static int session_get(eng_server *s, const char *key, eng_session **out, slot **slp, bool *fresh,
                       char *err, size_t errlen)
{
    *fresh = false;
    *slp = NULL;
    if (key) {
        for (int i = 0; i < s->n_slots; i++)
            if (!strcmp(s->slots[i].key, key)) {
                s->slots[i].last_used = now_s();
                *out = s->slots[i].s;
                *slp = &s->slots[i];
                return 0;
            }
    }
    eng_session *ns;
    int rc = session_new(s, key, 0, &ns, err, errlen);
    if (rc < 0) return rc;
    *fresh = true;
    *out = ns;
    if (!key) return 0;
    pthread_mutex_lock(&s->mu);
    if (s->n_slots == s->o.max_sessions) {
        int lru = 0;
        for (int i = 1; i < s->n_slots; i++)
            if (s->slots[i].last_used < s->slots[lru].last_used) lru = i;
        slot_free(&s->slots[lru]);
        s->slots[lru] = s->slots[--s->n_slots];
    }
    slot *sl = &s->slots[s->n_slots++];
    memset(sl, 0, sizeof *sl);
    snprintf(sl->key, sizeof sl->key, "%s", key);
    sl->s = ns;
    sl->last_used = now_s();
    *slp = sl;
    pthread_mutex_unlock(&s->mu);
    return 0;
}

/* Under the turn: how many of the request's earlier messages (msgs[0..n_prev)) the keyed
 * session already holds: all of its recorded conversation when that is a prefix of them
 * (compared by chained hash), else -1 (another conversation under the same key). */
static int held_prefix(const slot *sl, const cJSON *msgs, int n_prev)
{
    if (sl->stale || sl->n_hist > n_prev) return -1;
    uint64_t h = 0;
    for (int i = 0; i < sl->n_hist; i++) {
        const cJSON *m = cJSON_GetArrayItem(msgs, i);
        const char *c = cJSON_GetObjectItem(m, "content")->valuestring;
        h = msg_hash(h, cJSON_GetObjectItem(m, "role")->valuestring, c, strlen(c));
        if (h != sl->hist[i]) return -1;
    }
    return sl->n_hist;
}

/* Under the turn: the slot starts over with a new session (its KV and history dropped). */
static int slot_restart(eng_server *s, slot *sl, char *err, size_t errlen)
{
    eng_session *ns;
    int rc = session_new(s, sl->key, sl->gen + 1, &ns, err, errlen);
    if (rc < 0) return rc;
    pthread_mutex_lock(&s->mu);
    sl->gen++;
    eng_session_free(sl->s);
    sl->s = ns;
    sl->n_hist = 0;
    sl->stale = false;
    s->sessions_reset++;
    pthread_mutex_unlock(&s->mu);
    return 0;
}

/* ---- a chat request --------------------------------------------------------------- */

typedef struct gen_req gen_req;
struct gen_req {
    eng_server *srv;
    cJSON *body;
    char key[MAX_KEY];
    bool keyed, stream;
    bool legacy;                   /* POST /v1/completions (prompt, choices[].text) */
    int max_tokens;
    eng_sampler_params sp;
    bool have_sampler;
    char *stops[MAX_STOPS];
    int n_stops;
    size_t max_stop;
    char id[64];
    long created;
    const char *probe;             /* "longctx_probe": a text whose cache-level recall usage reports */
    /* generation */
    char *acc;                     /* generated text so far */
    size_t acc_len, acc_cap, emitted;
    bool stop_hit;
    size_t stop_at;                /* cut of acc when stop_hit */
    /* stream buffer (shared with the MHD reader) */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    char *out;
    size_t out_len, out_cap, out_off;
    bool done;
    atomic_bool cancelled;
    int fd;                        /* the client's socket (-1: unknown), polled per token */
    int refs;
};

static void req_unref(gen_req *g)
{
    pthread_mutex_lock(&g->mu);
    const int r = --g->refs;
    pthread_mutex_unlock(&g->mu);
    if (r) return;
    cJSON_Delete(g->body);
    for (int i = 0; i < g->n_stops; i++) free(g->stops[i]);
    free(g->acc);
    free(g->out);
    pthread_mutex_destroy(&g->mu);
    pthread_cond_destroy(&g->cv);
    free(g);
}

static void out_put(gen_req *g, const char *data, size_t n)
{
    pthread_mutex_lock(&g->mu);
    if (g->out_len + n > g->out_cap) {
        size_t nc = (g->out_len + n) * 2 + 256;
        char *nb = realloc(g->out, nc);
        if (!nb) { atomic_store(&g->cancelled, true); pthread_mutex_unlock(&g->mu); return; }
        g->out = nb;
        g->out_cap = nc;
    }
    memcpy(g->out + g->out_len, data, n);
    g->out_len += n;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
}

static void sse_json(gen_req *g, cJSON *j)
{
    char *t = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    if (!t) return;
    out_put(g, "data: ", 6);
    out_put(g, t, strlen(t));
    out_put(g, "\n\n", 2);
    free(t);
}

static cJSON *chunk(gen_req *g, const char *content, size_t n, const char *finish)
{
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "id", g->id);
    cJSON_AddStringToObject(j, "object", g->legacy ? "text_completion" : "chat.completion.chunk");
    cJSON_AddNumberToObject(j, "created", (double)g->created);
    cJSON_AddStringToObject(j, "model", g->srv->model_id);
    cJSON *ch = cJSON_AddArrayToObject(j, "choices"), *c0 = cJSON_CreateObject();
    cJSON_AddItemToArray(ch, c0);
    cJSON_AddNumberToObject(c0, "index", 0);
    char *t = content ? strndup(content, n) : NULL;
    if (g->legacy) cJSON_AddStringToObject(c0, "text", t ? t : "");
    else {
        cJSON *d = cJSON_AddObjectToObject(c0, "delta");
        if (content) {
            cJSON_AddStringToObject(d, "role", "assistant");
            cJSON_AddStringToObject(d, "content", t ? t : "");
        }
    }
    free(t);
    if (finish) cJSON_AddStringToObject(c0, "finish_reason", finish);
    else cJSON_AddNullToObject(c0, "finish_reason");
    return j;
}

/* The text that is safe to send: up to the stop cut, or all but the bytes that could still
 * start a stop string. */
static size_t emit_limit(const gen_req *g, bool final)
{
    if (g->stop_hit) return g->stop_at;
    if (final || !g->max_stop) return g->acc_len;
    return g->acc_len > g->max_stop - 1 ? g->acc_len - (g->max_stop - 1) : 0;
}

static void emit(gen_req *g, bool final)
{
    size_t lim = emit_limit(g, final);
    /* never split a UTF-8 character across events */
    if (!final && !g->stop_hit)
        while (lim > g->emitted && (g->acc[lim] & 0xC0) == 0x80 && lim < g->acc_len) lim--;
    if (lim > g->emitted) {
        sse_json(g, chunk(g, g->acc + g->emitted, lim - g->emitted, NULL));
        g->emitted = lim;
    }
}

/* The client closed its side (or the socket is gone). A stale fd can only be one MHD has
 * closed, i.e. our client left already, so a wrong answer there cancels nothing new. */
static bool client_left(int fd)
{
    if (fd < 0) return false;
    struct pollfd p = {.fd = fd, .events = POLLRDHUP};
    return poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL));
}

static int on_token(void *ud, const char *piece, int32_t tok)
{
    (void)tok;
    gen_req *g = ud;
    if (g->srv->o.on_token) g->srv->o.on_token(g->srv->o.on_token_ud);
    if (!atomic_load(&g->cancelled) && client_left(g->fd)) atomic_store(&g->cancelled, true);
    if (atomic_load(&g->cancelled)) return 1;
    size_t pl = strlen(piece);
    if (g->acc_len + pl + 1 > g->acc_cap) {
        size_t nc = (g->acc_len + pl + 1) * 2 + 64;
        char *nb = realloc(g->acc, nc);
        if (!nb) return 1;
        g->acc = nb;
        g->acc_cap = nc;
    }
    memcpy(g->acc + g->acc_len, piece, pl);
    /* a stop string can only complete inside the tail this piece touched */
    const size_t from = g->acc_len > g->max_stop ? g->acc_len - g->max_stop : 0;
    g->acc_len += pl;
    g->acc[g->acc_len] = 0;
    for (int i = 0; i < g->n_stops; i++) {
        char *hit = strstr(g->acc + from, g->stops[i]);
        if (hit && (!g->stop_hit || (size_t)(hit - g->acc) < g->stop_at)) {
            g->stop_hit = true;
            g->stop_at = (size_t)(hit - g->acc);
        }
    }
    if (g->stream) emit(g, false);
    return g->stop_hit;
}

typedef struct {
    int rc;                 /* of the turn */
    bool v3;                /* the session runs V3: rounds/evicted below are its totals */
    uint64_t rounds, evicted;
    char err[256];
    int ng, n_ctx;
    eng_session_turn turn;
    const char *finish;
    bool probed;
    int probe_cache, probe_rescue, probe_recall;   /* eng_session_cache_holds & co. */
} turn_result;

/* Under the turn: brings the session's conversation up to the request's earlier messages
 * (msgs[0..nm-1)): appends those past what it holds, or restarts it when the request's
 * history is another conversation. */
static int sync_history(eng_server *s, slot *sl, eng_session **ss, bool fresh, const cJSON *msgs, int nm,
                        char *err, size_t errlen)
{
    int from = 0, rc;
    if (sl && !fresh && (from = held_prefix(sl, msgs, nm - 1)) < 0) {
        if ((rc = slot_restart(s, sl, err, errlen)) < 0) return rc;
        *ss = sl->s;
        from = 0;
    }
    uint64_t h = from ? sl->hist[from - 1] : 0;
    for (int i = from; i < nm - 1; i++) {
        const cJSON *m = cJSON_GetArrayItem(msgs, i);
        const char *role = cJSON_GetObjectItem(m, "role")->valuestring;
        const char *content = cJSON_GetObjectItem(m, "content")->valuestring;
        if ((rc = eng_session_add_message(*ss, role, content)) < 0) return rc;
        h = msg_hash(h, role, content, strlen(content));
        if (sl && hist_push(sl, h) < 0) sl->stale = true;
    }
    return 0;
}

/* Records the turn's user message and the reply as the client got it. */
static void record_turn(slot *sl, const gen_req *g, const char *user)
{
    uint64_t h = sl->n_hist ? sl->hist[sl->n_hist - 1] : 0;
    h = msg_hash(h, "user", user, strlen(user));
    if (hist_push(sl, h) < 0) { sl->stale = true; return; }
    h = msg_hash(h, "assistant", g->acc ? g->acc : "", emit_limit(g, true));
    if (hist_push(sl, h) < 0) sl->stale = true;
}

/* Runs the request's turn (caller holds the turn). */
static void run_turn(gen_req *g, turn_result *tr)
{
    eng_server *s = g->srv;
    memset(tr, 0, sizeof *tr);
    release_idle(s);
    const cJSON *msgs = cJSON_GetObjectItemCaseSensitive(g->body, "messages");
    const int nm = cJSON_GetArraySize(msgs);
    eng_session *ss;
    slot *sl;
    bool fresh;
    tr->rc = session_get(s, g->keyed ? g->key : NULL, &ss, &sl, &fresh, tr->err, sizeof tr->err);
    if (tr->rc < 0) return;
    eng_turn_opts to = {.max_tokens = g->max_tokens, .sampler = g->have_sampler ? &g->sp : NULL,
                        .on_token = on_token, .ud = g};
    if (g->legacy) {
        /* raw text continuing the session's sequence: no chat template, no rescue */
        const cJSON *pr = cJSON_GetObjectItemCaseSensitive(g->body, "prompt");
        if (cJSON_IsArray(pr)) pr = cJSON_GetArrayItem(pr, 0);
        tr->rc = eng_session_generate_ex(ss, pr->valuestring, &to, NULL);
    } else {
        tr->rc = sync_history(s, sl, &ss, fresh, msgs, nm, tr->err, sizeof tr->err);
        const char *last = cJSON_GetObjectItem(cJSON_GetArrayItem(msgs, nm - 1), "content")->valuestring;
        if (tr->rc >= 0) tr->rc = eng_session_respond_ex(ss, last, &to, NULL);
        if (tr->rc >= 0 && sl) record_turn(sl, g, last);
    }
    tr->n_ctx = eng_kv_size(eng_session_ctx(ss));
    eng_session_last_turn(ss, &tr->turn);
    eng_triatt_stats ts;
    if (eng_triatt_get_stats(eng_session_ctx(ss), &ts) == 0) {
        tr->v3 = true;
        tr->rounds = ts.rounds;
        tr->evicted = ts.cells_evicted;
    }
    if (g->probe && tr->rc >= 0) {
        tr->probed = true;
        tr->probe_cache = eng_session_cache_holds(ss, g->probe);
        tr->probe_rescue = eng_session_rescue_holds(ss, g->probe);
        tr->probe_recall = eng_session_fact_recall(ss, g->probe);
    }
    pthread_mutex_lock(&s->mu);
    s->generated += (uint64_t)LCX_MAX(tr->turn.n_generated, 0);
    pthread_mutex_unlock(&s->mu);
    if (tr->rc >= 0) {
        tr->ng = tr->rc;
        const int lim = g->max_tokens > 0 ? g->max_tokens : s->o.session.max_tokens;
        tr->finish = !g->stop_hit && tr->ng >= lim ? "length" : "stop";
    }
    if (!g->keyed) eng_session_free(ss);
}

static cJSON *usage_json(const turn_result *tr)
{
    cJSON *u = cJSON_CreateObject();
    cJSON_AddNumberToObject(u, "prompt_tokens", tr->turn.n_prompt);
    cJSON_AddNumberToObject(u, "completion_tokens", tr->turn.n_generated);
    cJSON_AddNumberToObject(u, "total_tokens", tr->turn.n_prompt + tr->turn.n_generated);
    cJSON *d = cJSON_AddObjectToObject(u, "prompt_tokens_details");
    cJSON_AddNumberToObject(d, "cached_tokens", tr->turn.n_reused);
    /* not OpenAI's: what eviction and rescue did (session totals; this turn's rescue) */
    if (tr->v3) {
        cJSON *l = cJSON_AddObjectToObject(u, "longctx");
        cJSON_AddNumberToObject(l, "evict_rounds", (double)tr->rounds);
        cJSON_AddNumberToObject(l, "cells_evicted", (double)tr->evicted);
        cJSON_AddBoolToObject(l, "rescue_ran", tr->turn.rescue_ran);
        cJSON_AddNumberToObject(l, "rescue_chunks", tr->turn.rescue_chunks);
    }
    if (tr->probed) {
        /* where the probe text stands after the turn (found: it is in the conversation) */
        cJSON *l = cJSON_GetObjectItem(u, "longctx");
        if (!l) l = cJSON_AddObjectToObject(u, "longctx");
        cJSON *p = cJSON_AddObjectToObject(l, "probe");
        cJSON_AddBoolToObject(p, "found", tr->probe_cache != LCX_ENOTFOUND);
        cJSON_AddBoolToObject(p, "in_cache", tr->probe_cache == 1);
        cJSON_AddBoolToObject(p, "in_rescue", tr->probe_rescue == 1);
        cJSON_AddBoolToObject(p, "recall", tr->probe_recall == 1);
    }
    return u;
}

static void turn_error(const turn_result *tr, unsigned *status, const char **code, char *msg, size_t n)
{
    if (tr->rc == LCX_ELIMIT) {
        *status = 400;
        *code = "context_length_exceeded";
        const int over = tr->turn.n_prompt - tr->n_ctx;
        if (tr->turn.n_prompt == 0)
            snprintf(msg, n, "a message is too long to tokenize");
        else if (over > 0)
            snprintf(msg, n, "this model's maximum context length is %d tokens, but the messages resulted in "
                     "%d tokens: %d over; reduce the length of the messages", tr->n_ctx, tr->turn.n_prompt, over);
        else
            snprintf(msg, n, "the messages resulted in %d tokens, which the context of %d tokens cannot hold "
                     "together with its eviction reserve", tr->turn.n_prompt, tr->n_ctx);
    } else {
        *status = tr->rc == LCX_EINVAL ? 400 : 500;
        *code = tr->rc == LCX_EINVAL ? "invalid_request" : "internal_error";
        snprintf(msg, n, "generation failed: %s%s%s", lcx_strerror(tr->rc), tr->err[0] ? ": " : "", tr->err);
    }
}

/* ---- streaming -------------------------------------------------------------------- */

static void *stream_worker(void *arg)
{
    gen_req *g = arg;
    eng_server *s = g->srv;
    uint64_t ticket;
    turn_enter(s, &ticket, true);    /* the bound was checked when the request was accepted */
    turn_result tr;
    run_turn(g, &tr);
    turn_leave(s);
    if (atomic_load(&g->cancelled)) {     /* the client went away before the end */
        pthread_mutex_lock(&s->mu);
        s->cancelled++;
        pthread_mutex_unlock(&s->mu);
    }
    if (tr.rc < 0) {
        unsigned st;
        const char *code;
        char msg[512];
        turn_error(&tr, &st, &code, msg, sizeof msg);
        cJSON *j = cJSON_CreateObject(), *e = cJSON_AddObjectToObject(j, "error");
        cJSON_AddStringToObject(e, "message", msg);
        cJSON_AddStringToObject(e, "type", st < 500 ? "invalid_request_error" : "server_error");
        cJSON_AddStringToObject(e, "code", code);
        sse_json(g, j);
    } else {
        emit(g, true);
        cJSON *j = chunk(g, NULL, 0, tr.finish);
        cJSON_AddItemToObject(j, "usage", usage_json(&tr));
        sse_json(g, j);
    }
    out_put(g, "data: [DONE]\n\n", 14);
    pthread_mutex_lock(&g->mu);
    g->done = true;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
    req_unref(g);
    pthread_mutex_lock(&s->mu);
    s->workers--;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

static ssize_t stream_reader(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    gen_req *g = cls;
    pthread_mutex_lock(&g->mu);
    while (g->out_off == g->out_len && !g->done) pthread_cond_wait(&g->cv, &g->mu);
    ssize_t n;
    if (g->out_off == g->out_len) n = MHD_CONTENT_READER_END_OF_STREAM;
    else {
        n = (ssize_t)LCX_MIN(max, g->out_len - g->out_off);
        memcpy(buf, g->out + g->out_off, (size_t)n);
        g->out_off += (size_t)n;
    }
    pthread_mutex_unlock(&g->mu);
    return n;
}

static void stream_free(void *cls)
{
    gen_req *g = cls;
    atomic_store(&g->cancelled, true);     /* the client went away (or the stream ended) */
    req_unref(g);
}

/* ---- request parsing -------------------------------------------------------------- */

typedef struct {
    char *body;
    size_t len;
    bool too_big;
} conn_state;

static const char *session_key(struct MHD_Connection *c, const cJSON *body)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(body, "session_id");
    if (cJSON_IsString(v) && v->valuestring[0]) return v->valuestring;
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "x-session-affinity");
    if (h && *h) return h;
    h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "x-session-id");
    if (h && *h) return h;
    v = cJSON_GetObjectItemCaseSensitive(body, "user");
    if (cJSON_IsString(v) && v->valuestring[0]) return v->valuestring;
    return NULL;
}

#define BAD(...) return send_err(c, 400, "invalid_request_error", __VA_ARGS__)

/* A message's content as one string: a string as it is, or an array of text parts
 * ({"type":"text","text":...}) joined with newlines, as OpenAI-compatible servers do.
 * The body's item is replaced by the joined string. Returns NULL after writing why. */
static const char *content_text(cJSON *m, int i, char *why, size_t n)
{
    cJSON *content = cJSON_GetObjectItemCaseSensitive(m, "content");
    if (cJSON_IsString(content)) return content->valuestring;
    if (!cJSON_IsArray(content) || !cJSON_GetArraySize(content)) {
        snprintf(why, n, "messages[%d].content must be a string or a non-empty array of text parts", i);
        return NULL;
    }
    lcx_buf b = {0};
    int k = 0;
    const cJSON *part;
    cJSON_ArrayForEach(part, content) {
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(part, "type");
        const cJSON *text = cJSON_GetObjectItemCaseSensitive(part, "text");
        if (!cJSON_IsString(type)) {
            snprintf(why, n, "messages[%d].content[%d] needs a string 'type'", i, k);
            goto bad;
        }
        if (strcmp(type->valuestring, "text")) {
            snprintf(why, n, "messages[%d].content[%d] has type '%.64s': this server takes text parts only", i, k,
                     type->valuestring);
            goto bad;
        }
        if (!cJSON_IsString(text)) {
            snprintf(why, n, "messages[%d].content[%d].text must be a string", i, k);
            goto bad;
        }
        if ((k && lcx__buf_append(&b, "\n", 1) < 0) || lcx__buf_append(&b, text->valuestring, strlen(text->valuestring)) < 0)
            goto oom;
        k++;
    }
    cJSON *joined = cJSON_CreateString(b.data ? b.data : "");
    lcx__buf_free(&b);
    if (!joined || !cJSON_ReplaceItemInObjectCaseSensitive(m, "content", joined)) {
        cJSON_Delete(joined);
        snprintf(why, n, "out of memory");
        return NULL;
    }
    return joined->valuestring;
oom:
    snprintf(why, n, "out of memory");
bad:
    lcx__buf_free(&b);
    return NULL;
}

/* A refusal found while parsing: the OpenAI code and message (400), or oom. */
typedef struct {
    const char *code;
    char msg[512];
    bool oom;
} bad_req;

static bool refuse(bad_req *e, const char *code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static bool refuse(bad_req *e, const char *code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
    e->code = code;
    return false;
}

/* The prompt (/v1/completions) or the messages: roles, content (text parts joined), the
 * last one from the user; "developer" is taken as "system". */
static bool parse_input(gen_req *g, bad_req *e)
{
    if (g->legacy) {
        const cJSON *pr = cJSON_GetObjectItemCaseSensitive(g->body, "prompt");
        if (cJSON_IsArray(pr) && cJSON_GetArraySize(pr) == 1) pr = cJSON_GetArrayItem(pr, 0);
        if (!cJSON_IsString(pr) || !pr->valuestring[0])
            return refuse(e, "invalid_prompt", "'prompt' must be a non-empty string (or an array of one)");
        return true;
    }
    const cJSON *msgs = cJSON_GetObjectItemCaseSensitive(g->body, "messages");
    if (!cJSON_IsArray(msgs) || cJSON_GetArraySize(msgs) == 0)
        return refuse(e, "invalid_messages", "'messages' must be a non-empty array");
    int i = 0;
    cJSON *m;
    cJSON_ArrayForEach(m, msgs) {
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(m, "role");
        if (!cJSON_IsString(role) || (strcmp(role->valuestring, "system") && strcmp(role->valuestring, "user") &&
                                      strcmp(role->valuestring, "assistant") && strcmp(role->valuestring, "developer")))
            return refuse(e, "invalid_messages", "messages[%d].role must be system, developer, user or assistant", i);
        char why[256];
        if (!content_text(m, i, why, sizeof why)) return refuse(e, "invalid_messages", "%s", why);
        if (!strcmp(role->valuestring, "developer")) cJSON_SetValuestring((cJSON *)role, "system");
        i++;
    }
    if (strcmp(cJSON_GetObjectItem(cJSON_GetArrayItem(msgs, i - 1), "role")->valuestring, "user"))
        return refuse(e, "invalid_messages", "the last message must have role 'user'");
    return true;
}

static bool parse_stop(gen_req *g, const cJSON *v, bad_req *e)
{
    if (cJSON_IsString(v)) {
        if (!v->valuestring[0]) return refuse(e, "invalid_value", "'stop' strings must not be empty");
        g->stops[g->n_stops++] = strdup(v->valuestring);
    } else if (cJSON_IsArray(v) && cJSON_GetArraySize(v) <= MAX_STOPS) {
        const cJSON *x;
        cJSON_ArrayForEach(x, v) {
            if (!cJSON_IsString(x) || !x->valuestring[0]) return refuse(e, "invalid_value", "'stop' must hold non-empty strings");
            g->stops[g->n_stops++] = strdup(x->valuestring);
        }
    } else return refuse(e, "invalid_value", "'stop' must be a string or an array of at most %d strings", MAX_STOPS);
    for (int k = 0; k < g->n_stops; k++) {
        if (!g->stops[k]) { e->oom = true; return false; }
        g->max_stop = LCX_MAX(g->max_stop, strlen(g->stops[k]));
    }
    return true;
}

/* max_tokens, sampling (temperature, top_p, seed, n), stop, longctx_probe, stream. */
static bool parse_options(eng_server *s, gen_req *g, bad_req *e)
{
    const cJSON *body = g->body, *v;
    if ((v = cJSON_GetObjectItemCaseSensitive(body, "max_tokens")) || (v = cJSON_GetObjectItemCaseSensitive(body, "max_completion_tokens"))) {
        if (!cJSON_IsNull(v)) {
            if (!cJSON_IsNumber(v) || v->valuedouble != (double)(int)v->valuedouble || v->valuedouble < 1 || v->valuedouble > 1 << 20)
                return refuse(e, "invalid_value", "'max_tokens' must be an integer >= 1 (got %.200s)",
                              cJSON_IsNumber(v) ? "a number out of range" : "a non-number");
            g->max_tokens = (int)v->valuedouble;
        }
    }
    g->sp = s->o.session.sampler;
    if ((v = cJSON_GetObjectItemCaseSensitive(body, "temperature")) && !cJSON_IsNull(v)) {
        if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble > 2)
            return refuse(e, "invalid_value", "'temperature' must be a number in [0, 2]");
        g->sp.temp = (float)v->valuedouble;
        g->have_sampler = true;
    }
    if ((v = cJSON_GetObjectItemCaseSensitive(body, "top_p")) && !cJSON_IsNull(v)) {
        if (!cJSON_IsNumber(v) || v->valuedouble <= 0 || v->valuedouble > 1)
            return refuse(e, "invalid_value", "'top_p' must be a number in (0, 1]");
        g->sp.top_p = (float)v->valuedouble;
        g->have_sampler = true;
    }
    if ((v = cJSON_GetObjectItemCaseSensitive(body, "seed")) && !cJSON_IsNull(v)) {
        if (!cJSON_IsNumber(v) || v->valuedouble != (double)(int64_t)v->valuedouble)
            return refuse(e, "invalid_value", "'seed' must be an integer");
        g->sp.seed = (uint64_t)(int64_t)v->valuedouble;
        g->have_sampler = true;
    }
    if ((v = cJSON_GetObjectItemCaseSensitive(body, "n")) && !cJSON_IsNull(v) && (!cJSON_IsNumber(v) || v->valuedouble != 1))
        return refuse(e, "invalid_value", "only 'n' = 1 is supported");
    if ((v = cJSON_GetObjectItemCaseSensitive(body, "stop")) && !cJSON_IsNull(v) && !parse_stop(g, v, e)) return false;
    if ((v = cJSON_GetObjectItemCaseSensitive(body, "longctx_probe")) && !cJSON_IsNull(v)) {
        if (!cJSON_IsString(v) || !v->valuestring[0]) return refuse(e, "invalid_type", "'longctx_probe' must be a non-empty string");
        g->probe = v->valuestring;
    }
    if ((v = cJSON_GetObjectItemCaseSensitive(body, "stream")) && !cJSON_IsNull(v)) {
        if (!cJSON_IsBool(v)) return refuse(e, "invalid_type", "'stream' must be a boolean");
        g->stream = cJSON_IsTrue(v);
    }
    return true;
}

static enum MHD_Result queue_full(eng_server *s, struct MHD_Connection *c)
{
    return send_err(c, 429, "rate_limit_exceeded", "queue_full", "the request queue is full (%d waiting)", s->o.max_queue);
}

/* Streamed: a worker thread runs the turn and the MHD reader sends what it writes. */
static enum MHD_Result start_stream(eng_server *s, struct MHD_Connection *c, gen_req *g)
{
    /* bound check now (the worker takes its ticket later; a momentary overshoot of one is
     * possible, never an unbounded queue) */
    pthread_mutex_lock(&s->mu);
    const bool full = s->next_ticket - s->serving > (uint64_t)s->o.max_queue;
    if (full) s->rejected++;
    pthread_mutex_unlock(&s->mu);
    if (full) return queue_full(s, c);
    g->refs = 3;               /* the caller, the worker, the MHD reader */
    pthread_t th;
    pthread_mutex_lock(&s->mu);
    s->workers++;
    pthread_mutex_unlock(&s->mu);
    if (pthread_create(&th, NULL, stream_worker, g)) {
        pthread_mutex_lock(&s->mu);
        s->workers--;
        pthread_mutex_unlock(&s->mu);
        g->refs = 1;
        return MHD_NO;
    }
    pthread_detach(th);
    struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, stream_reader, g, stream_free);
    if (!r) { stream_free(g); return MHD_NO; }
    MHD_add_response_header(r, "Content-Type", "text/event-stream");
    MHD_add_response_header(r, "Cache-Control", "no-cache");
    enum MHD_Result ret = MHD_queue_response(c, 200, r);
    MHD_destroy_response(r);
    return ret;
}

/* Not streamed: waits for the turn, runs it, answers with the whole completion. */
static enum MHD_Result reply_plain(eng_server *s, struct MHD_Connection *c, gen_req *g)
{
    uint64_t ticket;
    if (!turn_enter(s, &ticket, false)) return queue_full(s, c);
    turn_result tr;
    run_turn(g, &tr);
    turn_leave(s);
    if (atomic_load(&g->cancelled)) {     /* the client left: nobody to answer */
        pthread_mutex_lock(&s->mu);
        s->cancelled++;
        pthread_mutex_unlock(&s->mu);
        return MHD_NO;
    }
    if (tr.rc < 0) {
        unsigned st;
        const char *code;
        char msg[512];
        turn_error(&tr, &st, &code, msg, sizeof msg);
        return send_err(c, st, st < 500 ? "invalid_request_error" : "server_error", code, "%s", msg);
    }
    size_t lim = emit_limit(g, true);
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "id", g->id);
    cJSON_AddStringToObject(j, "object", g->legacy ? "text_completion" : "chat.completion");
    cJSON_AddNumberToObject(j, "created", (double)g->created);
    cJSON_AddStringToObject(j, "model", s->model_id);
    cJSON *ch = cJSON_AddArrayToObject(j, "choices"), *c0 = cJSON_CreateObject();
    cJSON_AddItemToArray(ch, c0);
    cJSON_AddNumberToObject(c0, "index", 0);
    char *txt = strndup(g->acc ? g->acc : "", lim);
    if (g->legacy) cJSON_AddStringToObject(c0, "text", txt ? txt : "");
    else {
        cJSON *msg = cJSON_AddObjectToObject(c0, "message");
        cJSON_AddStringToObject(msg, "role", "assistant");
        cJSON_AddStringToObject(msg, "content", txt ? txt : "");
    }
    free(txt);
    cJSON_AddStringToObject(c0, "finish_reason", tr.finish);
    cJSON_AddItemToObject(j, "usage", usage_json(&tr));
    char hv[32];
    snprintf(hv, sizeof hv, "%d", tr.turn.n_prefilled);
    return send_json(c, 200, j, "x-longctx-prefilled", hv);
}

static enum MHD_Result chat(eng_server *s, struct MHD_Connection *c, conn_state *cs, bool legacy)
{
    const char *end = NULL;
    cJSON *body = cJSON_ParseWithLengthOpts(cs->body ? cs->body : "", cs->len, &end, false);
    if (!body) BAD("invalid_json", "malformed JSON in the request body near byte %zu",
                   end && cs->body ? (size_t)(end - cs->body) : (size_t)0);
    if (!cJSON_IsObject(body)) { cJSON_Delete(body); BAD("invalid_json", "the request body must be a JSON object"); }
    gen_req *g = calloc(1, sizeof *g);
    if (!g) { cJSON_Delete(body); return MHD_NO; }
    pthread_mutex_init(&g->mu, NULL);
    pthread_cond_init(&g->cv, NULL);
    g->refs = 1;
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    g->fd = ci ? ci->connect_fd : -1;
    g->body = body;
    g->srv = s;
    g->legacy = legacy;
    enum MHD_Result ret;
    bad_req e = {0};
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(body, "model");
    const char *key = session_key(c, body);
    if (model && !cJSON_IsNull(model) && cJSON_IsString(model) && strcmp(model->valuestring, s->model_id)) {
        ret = send_err(c, 404, "invalid_request_error", "model_not_found",
                       "the model '%.200s' does not exist (this server serves '%s')", model->valuestring, s->model_id);
        goto done;
    }
    if (model && !cJSON_IsNull(model) && !cJSON_IsString(model)) refuse(&e, "invalid_type", "'model' must be a string");
    else if (parse_input(g, &e) && parse_options(s, g, &e) && key && strlen(key) >= MAX_KEY)
        refuse(&e, "invalid_value", "the session key is longer than %d bytes", MAX_KEY - 1);
    if (e.oom) { ret = MHD_NO; goto done; }
    if (e.code) { ret = send_err(c, 400, "invalid_request_error", e.code, "%s", e.msg); goto done; }
    if (key) {
        snprintf(g->key, sizeof g->key, "%s", key);
        g->keyed = true;
    }
    snprintf(g->id, sizeof g->id, legacy ? "cmpl-%llx%04x" : "chatcmpl-%llx%04x", (unsigned long long)time(NULL), (unsigned)(rand() & 0xffff));
    g->created = (long)time(NULL);
    ret = g->stream ? start_stream(s, c, g) : reply_plain(s, c, g);
done:
    req_unref(g);
    return ret;
}

static enum MHD_Result on_access(void *cls, struct MHD_Connection *c, const char *url,
                                 const char *method, const char *version, const char *upload,
                                 size_t *upload_size, void **con_cls)
{
    (void)version;
    eng_server *s = cls;
    if (!*con_cls) {
        conn_state *cs = calloc(1, sizeof *cs);
        if (!cs) return MHD_NO;
        *con_cls = cs;
        return MHD_YES;
    }
    conn_state *cs = *con_cls;
    if (*upload_size) {
        if (cs->len + *upload_size > MAX_BODY) cs->too_big = true;
        else {
            char *nb = realloc(cs->body, cs->len + *upload_size + 1);
            if (!nb) return MHD_NO;
            memcpy(nb + cs->len, upload, *upload_size);
            cs->body = nb;
            cs->len += *upload_size;
        }
        *upload_size = 0;
        return MHD_YES;
    }
    if (cs->too_big) return send_err(c, 413, "invalid_request_error", "body_too_large", "the request body exceeds %u bytes", MAX_BODY);
    const bool get = !strcmp(method, "GET"), post = !strcmp(method, "POST");
    if (!strcmp(url, "/healthz")) {
        if (!get) return send_err(c, 405, "invalid_request_error", "method_not_allowed", "use GET");
        cJSON *j = cJSON_CreateObject();
        pthread_mutex_lock(&s->mu);
        cJSON_AddStringToObject(j, "status", "ok");
        cJSON_AddStringToObject(j, "model", s->model_id);
        cJSON_AddBoolToObject(j, "rescue", s->rescue);
        cJSON_AddNumberToObject(j, "rescue_lost", (double)s->rescue_lost);
        cJSON_AddNumberToObject(j, "queue", (double)(s->next_ticket - s->serving));
        cJSON_AddNumberToObject(j, "served", (double)s->served);
        cJSON_AddNumberToObject(j, "rejected", (double)s->rejected);
        cJSON_AddNumberToObject(j, "cancelled", (double)s->cancelled);
        cJSON_AddNumberToObject(j, "generated_tokens", (double)s->generated);
        cJSON_AddNumberToObject(j, "sessions_reset", (double)s->sessions_reset);
        pthread_mutex_unlock(&s->mu);
        return send_json(c, 200, j, NULL, NULL);
    }
    if (!strcmp(url, "/v1/models")) {
        if (!get) return send_err(c, 405, "invalid_request_error", "method_not_allowed", "use GET");
        cJSON *j = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "object", "list");
        cJSON *d = cJSON_AddArrayToObject(j, "data"), *m = cJSON_CreateObject();
        cJSON_AddItemToArray(d, m);
        cJSON_AddStringToObject(m, "id", s->model_id);
        cJSON_AddStringToObject(m, "object", "model");
        cJSON_AddNumberToObject(m, "created", 0);
        cJSON_AddStringToObject(m, "owned_by", "longctx");
        return send_json(c, 200, j, NULL, NULL);
    }
    if (!strcmp(url, "/v1/chat/completions")) {
        if (!post) return send_err(c, 405, "invalid_request_error", "method_not_allowed", "use POST");
        return chat(s, c, cs, false);
    }
    if (!strcmp(url, "/v1/completions")) {
        if (!post) return send_err(c, 405, "invalid_request_error", "method_not_allowed", "use POST");
        return chat(s, c, cs, true);
    }
    return send_err(c, 404, "invalid_request_error", "not_found", "no route %s %.200s", method, url);
}

static void on_done(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode t)
{
    (void)cls; (void)c; (void)t;
    conn_state *cs = *con_cls;
    if (cs) { free(cs->body); free(cs); }
    *con_cls = NULL;
}

int eng_server_start(const eng_server_opts *o, eng_server **out, char *err, size_t errlen)
{
    if (!o || !o->model || !out || o->max_queue < 0 || o->max_sessions < 1) {
        snprintf(err, errlen, "server options: model, max_queue >= 0 and max_sessions >= 1 are required");
        return LCX_EINVAL;
    }
    eng_server *s = calloc(1, sizeof *s);
    if (!s) return LCX_ENOMEM;
    s->o = *o;
    snprintf(s->model_id, sizeof s->model_id, "%s", o->model_id ? o->model_id : "longctx-engine");
    s->o.model_id = s->model_id;
    s->rescue = o->rescue;
    s->slots = calloc((size_t)o->max_sessions, sizeof *s->slots);
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)o->port)};
    if (!s->slots || inet_pton(AF_INET, o->host ? o->host : "127.0.0.1", &sa.sin_addr) != 1) {
        snprintf(err, errlen, "bad host address '%s' (an IPv4 address)", o->host ? o->host : "");
        eng_server_stop(s);
        return LCX_EINVAL;
    }
    s->d = MHD_start_daemon(MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD, (uint16_t)o->port,
                            NULL, NULL, on_access, s, MHD_OPTION_SOCK_ADDR, &sa,
                            MHD_OPTION_NOTIFY_COMPLETED, on_done, s,
                            MHD_OPTION_CONNECTION_TIMEOUT, 0u, MHD_OPTION_END);
    if (!s->d) {
        snprintf(err, errlen, "cannot listen on %s:%d (in use?)", o->host ? o->host : "127.0.0.1", o->port);
        eng_server_stop(s);
        return LCX_EEXIST;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
    s->port = di ? di->port : o->port;
    *out = s;
    return 0;
}

int eng_server_port(const eng_server *s) { return s ? s->port : -1; }

void eng_server_set_rescue(eng_server *s, bool on)
{
    pthread_mutex_lock(&s->mu);
    if (s->rescue && !on) s->rescue_lost++;
    s->rescue = on;
    pthread_mutex_unlock(&s->mu);
}

int eng_server_n_sessions(eng_server *s)
{
    pthread_mutex_lock(&s->mu);
    int n = s->n_slots;
    pthread_mutex_unlock(&s->mu);
    return n;
}

void eng_server_stop(eng_server *s)
{
    if (!s) return;
    if (s->d) MHD_stop_daemon(s->d);   /* closes the streams: their workers see cancel */
    pthread_mutex_lock(&s->mu);
    while (s->workers) pthread_cond_wait(&s->cv, &s->mu);
    pthread_mutex_unlock(&s->mu);
    for (int i = 0; i < s->n_slots; i++) slot_free(&s->slots[i]);
    free(s->slots);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    free(s);
}
