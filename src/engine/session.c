/* ChatSession: a conversation over one context (public contract and the Tier-3 rules in
 * include/longctx/engine.h, "ChatSession").
 *
 * State: the conversation (role/content pairs, owned), the LOGICAL token sequence L (token
 * i was prefilled or generated at position i) and the context whose cache holds whichever
 * of those cells survived eviction. A turn renders the whole conversation, tokenizes it and
 * prefills only the suffix after the longest common prefix with L; positions continue from
 * the logical length, so cells evicted from the middle never shift anything. A mismatch
 * inside L (a reply that re-tokenizes differently, an edited history) drops the cells at
 * positions >= the mismatch and prefills from there.
 *
 * Tier 3 lives here, not in eng_decode: only a chat front end knows where a user turn
 * starts and what its question is. The rescue client itself (queue, sender thread,
 * /evict/retrieve) is libtriatt's, owned by the context (eng_triatt_rescue). */
#define _GNU_SOURCE /* memmem, strndup */
#include "engine/model.h"
#include "engine/tokenizer.h"
#include "util/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define DEFAULT_MAX_TOKENS 256
#define DEFAULT_FLUSH_MS 2000      /* bounded wait for Tier-2 acks before a Tier-3 query */
#define QUESTION_TAIL 256          /* "ends with a question": the last '?' within these bytes */
#define MAX_MSGS (1 << 20)

typedef struct { char *role, *content; } smsg;

struct eng_session {
    const eng_model *m;
    eng_ctx *c;
    eng_tokenizer *tok;
    eng_sampler *smp;
    eng_session_params p;
    triatt_config tc;
    bool v3, rescue_on;
    bool prepopulated;            /* the conversation was posted once (first over-budget turn) */
    bool want_prepop;             /* this turn passes the budget: post its prompt */
    char sid[160];
    smsg *msgs;
    int n_msgs, cap_msgs;
    int32_t *L;                   /* logical sequence */
    int nL, capL;
    char *last_prompt, *last_rescue;
    char **rescues;               /* every rescue text inserted, in order */
    int n_rescues;
    eng_session_turn turn;
    eng_session_stats st;
};

eng_session_params eng_session_default_params(void)
{
    eng_session_params p;
    memset(&p, 0, sizeof p);
    p.ctx = eng_ctx_default_params();
    p.max_tokens = DEFAULT_MAX_TOKENS;
    p.rescue = ENG_RESCUE_SINGLE_TURN;
    p.flush_timeout_ms = DEFAULT_FLUSH_MS;
    p.prepopulate = true;
    return p;
}

static int errf(char *err, size_t n, int rc, const char *what, const char *detail)
{
    if (err && n) snprintf(err, n, "session: %s%s%s", what, detail && *detail ? ": " : "", detail ? detail : "");
    return rc;
}

void eng_session_free(eng_session *s)
{
    if (!s) return;
    eng_ctx_free(s->c);
    eng__tokenizer_free(s->tok);
    eng_sampler_free(s->smp);
    for (int i = 0; i < s->n_msgs; i++) { free(s->msgs[i].role); free(s->msgs[i].content); }
    free(s->msgs);
    free(s->L);
    free(s->last_prompt);
    for (int i = 0; i < s->n_rescues; i++) free(s->rescues[i]);
    free(s->rescues);
    free(s);
}

static int push_msg(eng_session *s, const char *role, const char *content)
{
    if (s->n_msgs >= MAX_MSGS) return LCX_ELIMIT;
    if (s->n_msgs == s->cap_msgs) {
        int nc = s->cap_msgs ? s->cap_msgs * 2 : 16;
        smsg *nm = realloc(s->msgs, (size_t)nc * sizeof *nm);
        if (!nm) return LCX_ENOMEM;
        s->msgs = nm;
        s->cap_msgs = nc;
    }
    char *r = strdup(role), *c = strdup(content);
    if (!r || !c) { free(r); free(c); return LCX_ENOMEM; }
    s->msgs[s->n_msgs].role = r;
    s->msgs[s->n_msgs].content = c;
    s->n_msgs++;
    return 0;
}

static void pop_msgs(eng_session *s, int to)
{
    while (s->n_msgs > to) {
        s->n_msgs--;
        free(s->msgs[s->n_msgs].role);
        free(s->msgs[s->n_msgs].content);
    }
}

int eng_session_init(const eng_model *m, const eng_session_params *p, eng_session **out, char *err, size_t errlen)
{
    if (!m || !out) return LCX_EINVAL;
    *out = NULL;
    eng_session *s = calloc(1, sizeof *s);
    if (!s) return LCX_ENOMEM;
    s->m = m;
    s->p = p ? *p : eng_session_default_params();
    if (s->p.max_tokens <= 0) s->p.max_tokens = DEFAULT_MAX_TOKENS;
    if (s->p.flush_timeout_ms <= 0) s->p.flush_timeout_ms = DEFAULT_FLUSH_MS;
    if (s->p.rescue != ENG_RESCUE_SINGLE_TURN && s->p.rescue != ENG_RESCUE_TWO_TURN) {
        eng_session_free(s);
        return errf(err, errlen, LCX_EINVAL, "rescue mode must be single-turn or two-turn", NULL);
    }
    s->p.triatt = NULL;            /* copied below; the caller's struct may go away */
    s->p.session_id = NULL;
    s->p.system_prompt = NULL;
    static unsigned long seq;
    const char *sid = p ? p->session_id : NULL;
    if (sid && (!*sid || strlen(sid) >= sizeof s->sid)) {
        eng_session_free(s);
        return errf(err, errlen, LCX_EINVAL, "session id must be 1..159 bytes", NULL);
    }
    if (sid) snprintf(s->sid, sizeof s->sid, "%s", sid);
    else snprintf(s->sid, sizeof s->sid, "sess-%ld-%lu", (long)getpid(), __atomic_add_fetch(&seq, 1, __ATOMIC_RELAXED));
    char terr[256] = "";
    int rc = eng__tokenizer_from_gguf(eng_model_gguf(m), &s->tok, terr, sizeof terr);
    if (rc < 0) { eng_session_free(s); return errf(err, errlen, rc, "tokenizer", terr); }
    if ((rc = eng_ctx_init(m, &s->p.ctx, &s->c)) < 0) {
        eng_session_free(s);
        return errf(err, errlen, rc, "context", lcx_strerror(rc));
    }
    if (!(s->smp = eng_sampler_init(&s->p.sampler))) { eng_session_free(s); return errf(err, errlen, LCX_ENOMEM, "sampler", NULL); }
    if (p && p->triatt && p->triatt->enabled) {
        s->tc = *p->triatt;
        if ((rc = eng_triatt_attach(s->c, &s->tc, s->sid, terr, sizeof terr)) < 0) {
            eng_session_free(s);
            return errf(err, errlen, rc, "TriAttention", terr);
        }
        s->v3 = true;
        s->rescue_on = s->tc.endpoint[0] != 0 && eng_triatt_rescue(s->c) != NULL;
    }
    if (p && p->system_prompt && (rc = push_msg(s, "system", p->system_prompt)) < 0) {
        eng_session_free(s);
        return errf(err, errlen, rc, "system prompt", NULL);
    }
    *out = s;
    return 0;
}

eng_ctx *eng_session_ctx(eng_session *s) { return s ? s->c : NULL; }
const char *eng_session_id(const eng_session *s) { return s ? s->sid : NULL; }
const int32_t *eng_session_tokens(const eng_session *s, int *n)
{
    if (n) *n = s ? s->nL : 0;
    return s ? s->L : NULL;
}
const char *eng_session_last_prompt(const eng_session *s) { return s ? s->last_prompt : NULL; }
const char *eng_session_last_rescue(const eng_session *s) { return s ? s->last_rescue : NULL; }
void eng_session_last_turn(const eng_session *s, eng_session_turn *out) { if (s && out) *out = s->turn; }
void eng_session_get_stats(const eng_session *s, eng_session_stats *out) { if (s && out) *out = s->st; }

/* ---- tokens ----------------------------------------------------------------------- */

static int tokenize(const eng_session *s, const char *text, bool add_special, int32_t **ids)
{
    size_t len = strlen(text);
    /* every byte is at most one token (byte fallback), plus BOS/EOS and the dummy prefix */
    if (len > ENG_TOK_MAX_INPUT || len + 16 > (size_t)INT32_MAX / sizeof(int32_t)) return LCX_ELIMIT;
    int cap = (int)len + 16;
    int32_t *v = malloc((size_t)cap * sizeof *v);
    if (!v) return LCX_ENOMEM;
    int n = eng__tokenize(s->tok, text, len, add_special, true, v, cap);
    if (n < 0) { free(v); return n; }
    *ids = v;
    return n;
}

static int L_reserve(eng_session *s, int n)
{
    if (n <= s->capL) return 0;
    int nc = LCX_MAX(n, s->capL ? s->capL * 2 : 1024);
    int32_t *nl = realloc(s->L, (size_t)nc * sizeof *nl);
    if (!nl) return LCX_ENOMEM;
    s->L = nl;
    s->capL = nc;
    return 0;
}

/* Makes the logical sequence equal ids[0..n): keeps the common prefix, drops cells past it,
 * prefills the rest at positions continuing from the prefix, in n_ubatch chunks (V3 runs
 * its rounds after each). The last prefilled token's logits are then current: when all of
 * ids is already in L, the last token is prefilled again for them. */
static int sync_prefill(eng_session *s, const int32_t *ids, int n)
{
    if (n <= 0) return LCX_EINVAL;
    int k = 0;
    while (k < n && k < s->nL && s->L[k] == ids[k]) k++;
    if (k == n) k = n - 1;                      /* need the last token's logits */
    if (k < s->nL) {
        eng_kv_remove_pos(s->c, k, -1);
        s->nL = k;
    }
    s->turn.n_prompt += n;
    s->turn.n_reused += k;
    /* without eviction every logical token needs a cell: refuse before computing any */
    if (!s->v3 && n > eng_kv_size(s->c)) return LCX_ELIMIT;
    int rc = L_reserve(s, n);
    if (rc < 0) return rc;
    const double t0 = lcx__now_ms();
    const int total = n - k, ub = s->p.ctx.n_ubatch > 0 ? s->p.ctx.n_ubatch : 512;
    int32_t *pos = malloc((size_t)LCX_MIN(total, ub) * sizeof *pos);
    if (!pos) return LCX_ENOMEM;
    for (int i0 = k; i0 < n; i0 += ub) {
        const int nb = LCX_MIN(ub, n - i0);
        for (int t = 0; t < nb; t++) pos[t] = i0 + t;
        rc = eng_decode(s->c, ids + i0, pos, nb, false);
        if (rc < 0) break;
        memcpy(s->L + i0, ids + i0, (size_t)nb * sizeof *ids);
        s->nL = i0 + nb;
        s->turn.n_prefilled += nb;
        if (s->p.on_prefill) s->p.on_prefill(s->p.on_prefill_ud, i0 + nb - k, total);
    }
    free(pos);
    s->turn.prefill_ms += lcx__now_ms() - t0;
    return rc;
}

/* Samples from the current logits, decodes each pick at the next logical position, stops
 * at end-of-generation (not decoded, not in L), max_tokens, or a full cache. */
static int generate(eng_session *s, int max_tokens, const eng_turn_opts *o, char **out)
{
    const double t0 = lcx__now_ms();
    eng_sampler *smp = s->smp, *own = NULL;
    if (o && o->sampler) {
        if (!(own = eng_sampler_init(o->sampler))) return LCX_ENOMEM;
        smp = own;
    }
    const int nv = eng_model_get_info(s->m)->n_vocab;
    int32_t *gen = malloc((size_t)max_tokens * sizeof *gen);
    if (!gen) { eng_sampler_free(own); return LCX_ENOMEM; }
    int ng = 0, rc = 0;
    bool stop = false, lead = true;   /* lead: no piece with bytes was passed on yet */
    while (ng < max_tokens && !stop) {
        const float *lg = eng_logits(s->c, -1);
        if (!lg) { rc = LCX_ESTATE; break; }
        int32_t t = eng_sample(smp, lg, nv);
        if (t < 0) { rc = t; break; }
        if (eng__token_is_eog(s->tok, t)) break;
        gen[ng++] = t;
        if (o && o->on_token) {
            /* the piece of this token alone (a multi-byte character split over tokens
             * arrives in parts; the caller joins bytes). The pieces join to the reply's
             * text: only the reply's first piece loses the dummy-prefix space, as
             * eng__detokenize of the whole reply does. */
            char piece[256];
            int pl = lead ? eng__detokenize(s->tok, &t, 1, piece, sizeof piece)
                          : eng__token_to_piece(s->tok, t, piece, sizeof piece - 1);
            if (pl < 0 || pl >= (int)sizeof piece) pl = 0;
            piece[pl] = 0;
            if (pl) lead = false;
            stop = o->on_token(o->ud, piece, t) != 0;
        }
        if ((rc = L_reserve(s, s->nL + 1)) < 0) break;
        int32_t pos = s->nL;
        rc = eng_decode(s->c, &t, &pos, 1, false);
        if (rc == LCX_ELIMIT) { rc = 0; break; }   /* cache full: the reply ends here */
        if (rc < 0) break;
        s->L[s->nL++] = t;
    }
    s->turn.n_generated = ng;
    s->turn.gen_ms += lcx__now_ms() - t0;
    if (rc >= 0 && out) {
        int len = eng__detokenize(s->tok, gen, ng, NULL, 0);
        char *txt = len >= 0 ? malloc((size_t)len + 1) : NULL;
        if (!txt) rc = len < 0 ? len : LCX_ENOMEM;
        else {
            eng__detokenize(s->tok, gen, ng, txt, (size_t)len + 1);
            *out = txt;
        }
    }
    free(gen);
    eng_sampler_free(own);
    return rc < 0 ? rc : ng;
}

/* ---- Tier 3 ------------------------------------------------------------------------ */

int eng_session_rehydrate(eng_session *s, const char *question, char **text)
{
    if (!s || !question || !text) return LCX_EINVAL;
    *text = NULL;
    if (!s->rescue_on) return LCX_ESTATE;
    const double t0 = lcx__now_ms();
    /* writes still queued would race the query: wait for their acks, bounded */
    s->turn.flush_rc = eng_triatt_flush(s->c, s->p.flush_timeout_ms);
    int rc = triatt_rescue_rehydrate(eng_triatt_rescue(s->c), question, text);
    s->turn.rescue_ms += lcx__now_ms() - t0;
    s->turn.rescue_ran = true;
    s->turn.rescue_rc = rc;
    s->st.rescues_run++;
    if (rc < 0) s->st.rescues_failed++;
    return rc;
}

/* Runs Tier 3 for question; on success pushes the system message (kept in the
 * conversation) and records the text. Failures are counted and ignored. */
static int rescue_into_history(eng_session *s, const char *question)
{
    char *text = NULL;
    int rc = eng_session_rehydrate(s, question, &text);
    if (rc <= 0 || !text) { free(text); return 0; }
    const int chunks = rc;
    char **nr = realloc(s->rescues, (size_t)(s->n_rescues + 1) * sizeof *nr);
    if (!nr) { free(text); return LCX_ENOMEM; }
    s->rescues = nr;
    if ((rc = push_msg(s, "system", text)) < 0) { free(text); return rc; }
    s->rescues[s->n_rescues++] = text;
    s->last_rescue = text;
    int32_t *ids = NULL;
    int nt = tokenize(s, text, false, &ids);
    free(ids);
    s->turn.rescue_tokens = nt > 0 ? nt : 0;
    s->turn.rescue_chunks = chunks;
    s->st.rescues_inserted++;
    return 1;
}

/* The trailing question of a message: from the start of the sentence holding the last '?'
 * (which must lie within the final QUESTION_TAIL bytes) to the end. Returns its offset, or
 * -1 when the message does not end with a question. A sentence starts after '.', '!', '?'
 * or a newline. */
static long question_start(const char *msg)
{
    size_t n = strlen(msg);
    const char *q = NULL;
    for (size_t i = n; i-- > 0 && n - i <= QUESTION_TAIL;)
        if (msg[i] == '?') { q = msg + i; break; }
    if (!q) return -1;
    const char *b = q;
    while (b > msg && !(b[-1] == '.' || b[-1] == '!' || b[-1] == '?' || b[-1] == '\n')) b--;
    while (*b == ' ' || *b == '\t') b++;
    return b > msg ? (long)(b - msg) : -1;      /* a bare question has no body to split off */
}

/* Renders msgs with the model's template (+ the assistant prompt when asked) and keeps it
 * as the last prompt text when keep. */
static int render(eng_session *s, bool add_assistant, char **out)
{
    eng_chat_msg *cm = malloc((size_t)(s->n_msgs ? s->n_msgs : 1) * sizeof *cm);
    if (!cm) return LCX_ENOMEM;
    for (int i = 0; i < s->n_msgs; i++) cm[i] = (eng_chat_msg){s->msgs[i].role, s->msgs[i].content};
    int rc = eng__chat_apply(eng_model_gguf(s->m), cm, s->n_msgs, add_assistant, out, NULL);
    free(cm);
    return rc;
}

static int render_prefill(eng_session *s, bool add_assistant)
{
    char *text = NULL;
    int rc = render(s, add_assistant, &text);
    if (rc < 0) return rc;
    int32_t *ids = NULL;
    int n = tokenize(s, text, true, &ids);
    if (n < 0) { free(text); return n; }
    free(s->last_prompt);
    s->last_prompt = text;
    if (s->want_prepop && !s->prepopulated && s->p.prepopulate) {
        /* queued before the prefill, so the POST overlaps the compute; never blocks */
        rc = triatt_rescue_prepopulate(eng_triatt_rescue(s->c), ids, n);
        s->prepopulated = rc >= 0;
        s->turn.prepopulated = rc > 0 ? rc : 0;
    }
    rc = sync_prefill(s, ids, n);
    free(ids);
    return rc;
}

static void turn_reset(eng_session *s)
{
    memset(&s->turn, 0, sizeof s->turn);
    s->turn.flush_rc = 1;
    s->last_rescue = NULL;
}

int eng_session_respond(eng_session *s, const char *user_message, char **reply)
{
    return eng_session_respond_ex(s, user_message, NULL, reply);
}

int eng_session_add_message(eng_session *s, const char *role, const char *content)
{
    if (!s || !role || !content) return LCX_EINVAL;
    return push_msg(s, role, content);
}

int eng_session_n_messages(const eng_session *s) { return s ? s->n_msgs : 0; }

int eng_session_respond_ex(eng_session *s, const char *user_message, const eng_turn_opts *o,
                           char **reply)
{
    if (!s || !user_message) return LCX_EINVAL;
    if (reply) *reply = NULL;
    turn_reset(s);
    s->st.turns++;
    const int n_msgs0 = s->n_msgs;
    int rc = 0;
    long qs = -1;
    s->want_prepop = false;
    if (s->rescue_on) {
        /* does this turn pass the budget? (the message's own tokens on top of the cache) */
        int32_t *ids = NULL;
        int n = tokenize(s, user_message, false, &ids);
        free(ids);
        if (n < 0) return n;
        s->want_prepop = eng_kv_n_used(s->c) + n > s->tc.budget;
        if (s->want_prepop && s->p.rescue == ENG_RESCUE_SINGLE_TURN) qs = question_start(user_message);
    }
    if (qs > 0) {
        /* single-turn rescue: body first (rounds fire, spans go out), then rescue + question */
        char *body = strndup(user_message, (size_t)qs);
        if (!body) return LCX_ENOMEM;
        size_t bl = strlen(body);
        while (bl && (body[bl - 1] == ' ' || body[bl - 1] == '\n')) body[--bl] = 0;
        rc = push_msg(s, "user", body);
        free(body);
        if (rc < 0) return rc;
        s->turn.single_turn = true;
        s->st.single_turn_splits++;
        if ((rc = render_prefill(s, false)) < 0) goto fail;
        char *prompt1 = s->last_prompt;
        s->last_prompt = NULL;
        if ((rc = rescue_into_history(s, user_message + qs)) < 0) { free(prompt1); goto fail; }
        if ((rc = push_msg(s, "user", user_message + qs)) < 0) { free(prompt1); goto fail; }
        rc = render_prefill(s, true);
        /* the last prompt is the full rendering (the second part extends the first) */
        free(prompt1);
        if (rc < 0) goto fail;
    } else {
        if (s->rescue_on && (rc = rescue_into_history(s, user_message)) < 0) goto fail;
        if ((rc = push_msg(s, "user", user_message)) < 0) goto fail;
        if ((rc = render_prefill(s, true)) < 0) goto fail;
    }
    char *txt = NULL;
    int ng = generate(s, o && o->max_tokens > 0 ? o->max_tokens : s->p.max_tokens, o, &txt);
    if (ng < 0) { rc = ng; goto fail; }
    if ((rc = push_msg(s, "assistant", txt)) < 0) { free(txt); goto fail; }
    if (reply) *reply = txt;
    else free(txt);
    return ng;
fail:
    /* the conversation stays as it was before the turn; L keeps what was prefilled (the
     * next turn's common-prefix check drops what no longer matches) */
    pop_msgs(s, n_msgs0);
    return rc;
}

int eng_session_generate(eng_session *s, const char *text, int max_tokens, char **out)
{
    const eng_turn_opts o = {.max_tokens = max_tokens};
    return eng_session_generate_ex(s, text, &o, out);
}

int eng_session_generate_ex(eng_session *s, const char *text, const eng_turn_opts *o, char **out)
{
    if (!s || !text) return LCX_EINVAL;
    if (out) *out = NULL;
    turn_reset(s);
    const int max_tokens = o && o->max_tokens > 0 ? o->max_tokens : s->p.max_tokens;
    int32_t *ids = NULL;
    int n = tokenize(s, text, s->nL == 0, &ids);
    if (n < 0) return n;
    int rc = L_reserve(s, s->nL + n);
    int32_t *all = rc < 0 ? NULL : malloc((size_t)(s->nL + n) * sizeof *all);
    if (!all) { free(ids); return LCX_ENOMEM; }
    memcpy(all, s->L, (size_t)s->nL * sizeof *all);
    memcpy(all + s->nL, ids, (size_t)n * sizeof *all);
    free(ids);
    rc = n > 0 || s->nL > 0 ? sync_prefill(s, all, s->nL + n) : LCX_EINVAL;
    free(all);
    if (rc < 0) return rc;
    return generate(s, max_tokens, o, out);
}

/* ---- cache-level recall ------------------------------------------------------------- */

static int find_tokens(const eng_session *s, const char *text, int *a_out, int *b_out);

/* Byte offset of every logical token's piece in the concatenated pieces (off[nL] = total);
 * *txt = the concatenation. */
static int pieces(const eng_session *s, char **txt, size_t **off)
{
    lcx_buf b = {0};
    size_t *o = malloc((size_t)(s->nL + 1) * sizeof *o);
    if (!o) return LCX_ENOMEM;
    char tmp[512];
    for (int i = 0; i < s->nL; i++) {
        o[i] = b.len;
        int l = eng__token_to_piece(s->tok, s->L[i], tmp, sizeof tmp);
        if (l < 0 || (size_t)l > sizeof tmp || lcx__buf_append(&b, tmp, (size_t)l) < 0) {
            lcx__buf_free(&b);
            free(o);
            return l < 0 ? l : LCX_ENOMEM;
        }
    }
    o[s->nL] = b.len;
    if (lcx__buf_append(&b, "", 0) < 0) { free(o); return LCX_ENOMEM; }
    *txt = lcx__buf_steal(&b, NULL);
    *off = o;
    return *txt ? 0 : LCX_ENOMEM;
}

/* have[p − a] = 1 for each position p in [a, b) that a surviving KV cell holds (malloc'd;
 * NULL when out of memory). */
static unsigned char *cached_positions(const eng_session *s, int a, int b)
{
    unsigned char *have = calloc((size_t)(b - a) + 1, 1);
    if (!have) return NULL;
    const int cap = eng_kv_size(s->c);
    for (int i = 0; i < cap; i++) {
        int32_t p = eng_kv_cell_pos(s->c, i);
        if (p >= a && p < b) have[p - a] = 1;
    }
    return have;
}

int eng_session_cache_holds(const eng_session *s, const char *text)
{
    if (!s || !text || !*text) return LCX_EINVAL;
    int a, b, rc = find_tokens(s, text, &a, &b);
    if (rc < 0) return rc;
    unsigned char *have = cached_positions(s, a, b);
    if (!have) return LCX_ENOMEM;
    rc = 1;
    for (int p = a; p < b; p++)
        if (!have[p - a]) { rc = 0; break; }
    free(have);
    return rc;
}

/* Token ranges [a, b) of the blocks of every inserted rescue message (SPEC §2 headers). */
static int rescued_ranges(const eng_session *s, int32_t (**out)[2])
{
    static const char tag[] = "--- evicted span (tokens ";
    int n = 0, cap = 0;
    int32_t (*v)[2] = NULL;
    for (int i = 0; i < s->n_rescues; i++)
        for (const char *p = strstr(s->rescues[i], tag); p; p = strstr(p + 1, tag)) {
            long a, b;
            if (sscanf(p + sizeof tag - 1, "%ld..%ld", &a, &b) != 2 || a < 0 || b <= a || b > INT32_MAX) continue;
            if (n == cap) {
                cap = cap ? cap * 2 : 16;
                int32_t (*nv)[2] = realloc(v, (size_t)cap * sizeof *nv);
                if (!nv) { free(v); return LCX_ENOMEM; }
                v = nv;
            }
            v[n][0] = (int32_t)a;
            v[n][1] = (int32_t)b;
            n++;
        }
    *out = v;
    return n;
}

/* Token range [*a, *b) of the first occurrence of text in the logical sequence. */
static int find_tokens(const eng_session *s, const char *text, int *a_out, int *b_out)
{
    char *all = NULL;
    size_t *off = NULL;
    int rc = pieces(s, &all, &off);
    if (rc < 0) return rc;
    const char *hit = memmem(all, off[s->nL], text, strlen(text));
    if (!hit) { free(all); free(off); return LCX_ENOTFOUND; }
    const size_t b0 = (size_t)(hit - all), b1 = b0 + strlen(text);
    int a = 0;
    while (a < s->nL && off[a + 1] <= b0) a++;
    int b = a;
    while (b < s->nL && off[b] < b1) b++;
    free(all);
    free(off);
    *a_out = a;
    *b_out = b;
    return 0;
}

int eng_session_fact_recall(const eng_session *s, const char *text)
{
    if (!s || !text || !*text) return LCX_EINVAL;
    int a, b, rc = find_tokens(s, text, &a, &b);
    if (rc < 0) return rc;
    if (eng_session_rescue_holds(s, text) == 1) return 1;
    unsigned char *have = cached_positions(s, a, b);
    if (!have) return LCX_ENOMEM;
    int32_t (*r)[2] = NULL;
    int nr = rescued_ranges(s, &r);
    if (nr < 0) { free(have); return nr; }
    for (int k = 0; k < nr; k++)
        for (int32_t p = LCX_MAX(r[k][0], a); p < LCX_MIN(r[k][1], b); p++) have[p - a] = 1;
    free(r);
    rc = 1;
    for (int p = a; p < b; p++)
        if (!have[p - a]) { rc = 0; break; }
    free(have);
    return rc;
}

int eng_session_rescue_holds(const eng_session *s, const char *text)
{
    if (!s || !text || !*text) return LCX_EINVAL;
    for (int i = 0; i < s->n_rescues; i++)
        if (strstr(s->rescues[i], text)) return 1;
    return 0;
}
