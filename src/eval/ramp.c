/* The rescue ramp (SPEC §6; contract in lcx_eval.h): per context size, baseline vs V3 vs
 * V3 + longctx over a planted fact, each cell a fresh ChatSession.
 *
 * Sizes are in TOKENS of the model's own tokenizer: the blob is planned so the whole
 * rendered prompt (template, blob, question) is size − max_gen − 16 tokens. Baseline gets a
 * context that holds it without eviction; the V3 arms get budget = size·frac with the
 * production knobs (window 128, prefix 32, warmup 256, V3), so ≈ (1 − frac) of the blob is
 * evicted. Seeds move the fact by up to ±2 sentences around its depth (and seed the
 * session id); generation is greedy.
 *
 * Cache-level recall (model-independent): the fact's tokens (its first occurrence in the
 * conversation, i.e. where it was planted) all survive in the KV cache, or the fact text
 * is inside a rescue message the session inserted. Answer recall is the strict NIAH grade
 * of the answering turn's reply. */
#include "eval/lcx_eval.h"
#include "engine/tokenizer.h"
#include "longctx/engine.h"
#include "util/util.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void lcx__ramp_defaults(lcx_ramp_opts *o)
{
    memset(o, 0, sizeof *o);
    o->arms[0] = o->arms[1] = o->arms[2] = true;
    o->depths[0] = 0.1; o->depths[1] = 0.5; o->depths[2] = 0.9;
    o->n_depths = 3;
    o->n_seeds = 1;
    o->first_seed = 1;
    o->rescue = LCX_RAMP_SINGLE_TURN;
    o->budget_frac = 0.9;
    o->n_threads = 1;
    o->n_ubatch = 512;
    o->max_gen = 16;
    o->window = 128;
    o->prefix = 32;
    o->warmup = 256;
    o->hybrid = 2;
    o->prepopulate = true;
    o->n_shards = 1;
    o->direction = TRIATT_KEEP_HIGH;
    o->mode = TRIATT_MODE_TRIG;
}

const char *lcx__ramp_arm_name(int arm)
{
    static const char *const n[] = {"baseline", "v3", "v3+longctx"};
    return arm >= 0 && arm < LCX_RAMP_NARMS ? n[arm] : "?";
}
const char *lcx__ramp_rescue_name(int r) { return r == LCX_RAMP_TWO_TURN ? "two-turn" : "single-turn"; }
const char *lcx__ramp_direction_name(int d) { return d == TRIATT_EVICT_HIGH ? "evict_high" : "keep_high"; }
const char *lcx__ramp_mode_name(int m)
{
    return m == TRIATT_MODE_RANDOM ? "random" : m == TRIATT_MODE_RECENCY ? "recency" : "trig";
}

static uint64_t mix(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

/* Where the fact goes: round(depth·n_fill) plus a seed's jitter of at most ±2.5 % of the
 * blob (±2 sentences at least). Seeds step through the 2s+1 offsets with a stride near
 * 0.618·(2s+1) coprime to it, so consecutive seeds spread over the window and any 2s+1
 * consecutive seeds give distinct prompts (a hash would collide: ten seeds once gave four
 * prompts per depth). */
static long seed_jitter(int n_fill, int seed)
{
    long s = n_fill / 40 > 2 ? n_fill / 40 : 2, w = 2 * s + 1, g = (long)(0.618 * (double)w);
    for (long a, b;; g++) {   /* the first stride from g up coprime to w (w + 1 is) */
        for (a = w, b = g; b; ) { long t = a % b; a = b; b = t; }
        if (a == 1) break;
    }
    long k = ((long)seed % w + w) % w;
    return k * g % w - s;
}

char *lcx__ramp_blob(int n_fill, double depth, int seed)
{
    if (n_fill < 0 || depth < 0 || depth > 1) return NULL;
    long at = lround(depth * n_fill) + seed_jitter(n_fill, seed);
    if (at < 0) at = 0;
    if (at > n_fill) at = n_fill;
    lcx_buf b = {0};
    for (long i = 0; i <= n_fill; i++) {
        if (i == at && (lcx__buf_puts(&b, LCX_RAMP_FACT) < 0 || lcx__buf_puts(&b, " ") < 0)) goto oom;
        if (i < n_fill && lcx__buf_puts(&b, LCX_RAMP_FILLER) < 0) goto oom;
    }
    if (lcx__buf_append(&b, "", 0) < 0) goto oom;
    return lcx__buf_steal(&b, NULL);
oom:
    lcx__buf_free(&b);
    return NULL;
}

static char *concat3(const char *a, const char *b, const char *c)
{
    size_t la = strlen(a), lb = strlen(b), lc = strlen(c);
    char *o = malloc(la + lb + lc + 1);
    if (!o) return NULL;
    memcpy(o, a, la);
    memcpy(o + la, b, lb);
    memcpy(o + la + lb, c, lc + 1);
    return o;
}

static int count_tokens(const eng_tokenizer *t, const char *s)
{
    size_t n = strlen(s);
    int32_t *ids = malloc((n + 16) * sizeof *ids);
    if (!ids) return LCX_ENOMEM;
    int r = eng__tokenize(t, s, n, false, true, ids, (int)n + 16);
    free(ids);
    return r;
}

/* Filler sentences so the rendered single-turn prompt is about `target` tokens. */
static int plan_fill(const eng_tokenizer *t, int target)
{
    char *ten = NULL;
    lcx_buf b = {0};
    for (int i = 0; i < 10; i++) lcx__buf_puts(&b, LCX_RAMP_FILLER);
    lcx__buf_append(&b, "", 0);
    ten = lcx__buf_steal(&b, NULL);
    if (!ten) return LCX_ENOMEM;
    int n10 = count_tokens(t, ten);
    free(ten);
    int nf = count_tokens(t, LCX_RAMP_FACT " ");
    int nq = count_tokens(t, "\n\n" LCX_RAMP_QUESTION);
    if (n10 <= 0 || nf < 0 || nq < 0) return LCX_EINVAL;
    const int overhead = 24;   /* BOS + ChatML markers and role lines (measured: ~12) */
    long room = (long)target - overhead - nf - nq;
    return room > 0 ? (int)(room * 10 / n10) : 0;
}

typedef struct {
    const lcx_ramp_opts *o;
    const eng_model *m;
} runner;

/* what varies between the V3 configurations of one (size, arm, depth, seed) */
typedef struct { int rescue, direction, mode; } cell_cfg;

/* The cell keeps the first LCX_RAMP_REPLY_MAX - 1 bytes of a reply, cut at a character
 * boundary so the JSON output stays UTF-8. */
static void set_reply(lcx_ramp_cell *c, const char *reply)
{
    size_t k = lcx__utf8_cut(reply, strlen(reply), sizeof c->reply - 1);
    memcpy(c->reply, reply, k);
    c->reply[k] = 0;
}

static int run_cell(const runner *R, int size, int n_fill, int arm, const cell_cfg *cf, double depth, int seed,
                    lcx_ramp_cell *out, char *err, size_t err_len)
{
    const lcx_ramp_opts *o = R->o;
    const double t_start = lcx__now_ms();
    memset(out, 0, sizeof *out);
    out->size = size;
    out->arm = arm;
    out->rescue = cf->rescue;
    out->direction = cf->direction;
    out->mode = cf->mode;
    out->depth = depth;
    out->seed = seed;
    eng_session_params sp = eng_session_default_params();
    sp.ctx.n_threads = o->n_threads;
    sp.ctx.n_ubatch = o->n_ubatch;
    sp.max_tokens = o->max_gen;
    sp.rescue = cf->rescue == LCX_RAMP_TWO_TURN ? ENG_RESCUE_TWO_TURN : ENG_RESCUE_SINGLE_TURN;
    char sid[160];
    snprintf(sid, sizeof sid, "ramp-%ld-%d-%d%d%d%d-%.3f-%d-%llx", (long)getpid(), size, arm, cf->rescue,
             cf->direction, cf->mode, depth, seed,
             (unsigned long long)(mix((uint64_t)lcx__now_ms()) & 0xffffff));
    sp.session_id = sid;
    sp.prepopulate = o->prepopulate;
    triatt_config tc;
    triatt_config_default(&tc);
    if (arm == LCX_RAMP_BASELINE) {
        sp.ctx.n_ctx = size + 64;
    } else {
        tc.enabled = true;
        tc.budget = (int)(size * o->budget_frac);
        tc.window = o->window;
        tc.prefix = o->prefix;
        tc.warmup = o->warmup;
        tc.version = (triatt_version)o->hybrid;
        tc.seed = (uint64_t)seed;
        tc.direction = (triatt_direction)cf->direction;
        tc.mode = (triatt_mode)cf->mode;
        if (arm == LCX_RAMP_V3_LONGCTX) snprintf(tc.endpoint, sizeof tc.endpoint, "%s", o->endpoint);
        else tc.endpoint[0] = 0;
        /* a round keeps budget cells; a ubatch and the trigger slack must fit on top */
        sp.ctx.n_ctx = LCX_MAX(size + 64, tc.budget + tc.divide_length + o->n_ubatch + 64);
        sp.triatt = &tc;
    }
    eng_session *s = NULL;
    int rc = eng_session_init(R->m, &sp, &s, err, err_len);
    if (rc < 0) return rc;
    char *blob = lcx__ramp_blob(n_fill, depth, seed), *msg = NULL, *reply = NULL;
    if (!blob) { rc = LCX_ENOMEM; goto out; }
    eng_session_turn tn;
    const bool two = arm != LCX_RAMP_BASELINE && cf->rescue == LCX_RAMP_TWO_TURN;
    if (two) {
        if (!(msg = concat3(blob, "\n\n", LCX_RAMP_TURN1_ASK))) { rc = LCX_ENOMEM; goto out; }
        double t0 = lcx__now_ms();
        rc = eng_session_respond(s, msg, NULL);
        out->t1_s = (lcx__now_ms() - t0) / 1e3;
        if (rc < 0) goto out;
        t0 = lcx__now_ms();
        rc = eng_session_respond(s, LCX_RAMP_QUESTION, &reply);
        out->t2_s = (lcx__now_ms() - t0) / 1e3;
    } else {
        if (!(msg = concat3(blob, "\n\n", LCX_RAMP_QUESTION))) { rc = LCX_ENOMEM; goto out; }
        double t0 = lcx__now_ms();
        rc = eng_session_respond(s, msg, &reply);
        out->t1_s = (lcx__now_ms() - t0) / 1e3;
    }
    if (rc < 0) goto out;
    eng_session_last_turn(s, &tn);
    out->rescue_chunks = tn.rescue_chunks;
    out->rescue_ms = tn.rescue_ms;
    /* the rescue tokens' share of the answering turn's prefill (same cost per token) */
    if (tn.n_prefilled > 0) out->extra_prefill_ms = tn.prefill_ms * tn.rescue_tokens / tn.n_prefilled;
    int g = lcx__niah_grade(reply ? reply : "", LCX_RAMP_QUESTION, LCX_RAMP_ANSWER);
    out->answer = g > 0 ? g : LCX_NIAH_FAIL;
    if (reply) set_reply(out, reply);
    int ch = eng_session_cache_holds(s, LCX_RAMP_FACT);
    int rh = eng_session_rescue_holds(s, LCX_RAMP_FACT);
    out->fact_in_cache = ch == 1;
    out->fact_in_rescue = rh == 1;
    out->cache_recall = eng_session_fact_recall(s, LCX_RAMP_FACT) == 1;
    eng_session_tokens(s, &out->n_tokens);
    {
        eng_ctx *cx = eng_session_ctx(s);
        uint64_t h = 1469598103934665603ull;
        for (int i = 0; i < eng_kv_size(cx); i++) {
            const int32_t p = eng_kv_cell_pos(cx, i);
            if (p < 0) continue;
            for (int b = 0; b < 4; b++) h = (h ^ (uint8_t)(p >> (8 * b))) * 1099511628211ull;
        }
        out->kept_sig = h;
    }
    eng_triatt_stats st;
    if (eng_triatt_get_stats(eng_session_ctx(s), &st) == 0) {
        out->rounds = (int)st.rounds;
        out->evicted_pct = out->n_tokens ? 100.0 * (double)st.cells_evicted / out->n_tokens : 0;
        out->spans_sent = st.spans_sent;
        out->spans_dropped = st.spans_dropped;
    }
    rc = 0;
out:
    if (rc < 0 && err && err_len && !*err) snprintf(err, err_len, "cell size %d %s: %s", size, lcx__ramp_arm_name(arm), lcx_strerror(rc));
    free(blob);
    free(msg);
    free(reply);
    eng_session_free(s);
    out->total_s = (lcx__now_ms() - t_start) / 1e3;
    return rc;
}

int lcx__ramp_run(const lcx_ramp_opts *o, lcx_ramp_cell **cells, int *n_cells, char *err, size_t err_len)
{
    if (err && err_len) *err = 0;
    if (!o || !o->model_path || !cells || !n_cells || o->n_sizes < 1 || o->n_sizes > LCX_RAMP_MAX_SIZES ||
        o->n_depths < 1 || o->n_depths > LCX_RAMP_MAX_DEPTHS || o->n_seeds < 1 || o->first_seed < 0 || o->budget_frac <= 0 ||
        o->budget_frac > 1 || o->max_gen < 1 || o->n_shards < 1 || o->shard < 0 || o->shard >= o->n_shards) {
        if (err && err_len) snprintf(err, err_len, "ramp: bad options (sizes, depths, seeds, budget fraction, max_gen, shard)");
        return LCX_EINVAL;
    }
    *cells = NULL;
    *n_cells = 0;
    bool bad = o->rescue < 0 || o->rescue > 1 || o->direction < 0 || o->direction > 1 || o->mode < 0 || o->mode > 2 ||
               o->n_rescues < 0 || o->n_rescues > 2 || o->n_directions < 0 || o->n_directions > 2 || o->n_modes < 0 ||
               o->n_modes > 3;
    for (int i = 0; !bad && i < o->n_rescues; i++) bad = o->rescues[i] < 0 || o->rescues[i] > 1;
    for (int i = 0; !bad && i < o->n_directions; i++) bad = o->directions[i] < 0 || o->directions[i] > 1;
    for (int i = 0; !bad && i < o->n_modes; i++) bad = o->modes[i] < 0 || o->modes[i] > 2;
    if (bad) {
        if (err && err_len) snprintf(err, err_len, "ramp: bad rescue, direction or mode");
        return LCX_EINVAL;
    }
    if (o->arms[LCX_RAMP_V3_LONGCTX] && (!o->endpoint || !*o->endpoint)) {
        if (err && err_len) snprintf(err, err_len, "ramp: the v3+longctx arm needs an endpoint");
        return LCX_EINVAL;
    }
    for (int i = 0; i < o->n_sizes; i++)
        if (o->sizes[i] < 2 * (o->warmup + o->window) || o->sizes[i] * o->budget_frac <= o->window + o->prefix + 1) {
            if (err && err_len)
                snprintf(err, err_len, "ramp: size %d is too small for V3 (warmup %d, window %d: need >= %d tokens)",
                         o->sizes[i], o->warmup, o->window, 2 * (o->warmup + o->window));
            return LCX_EINVAL;
        }
    eng_model *m = NULL;
    int rc = eng_model_load(o->model_path, &m, err, err_len);
    if (rc < 0) return rc;
    eng_tokenizer *tk = NULL;
    if ((rc = eng__tokenizer_from_gguf(eng_model_gguf(m), &tk, err, err_len)) < 0) { eng_model_free(m); return rc; }
    /* the V3 configurations: rescue × direction × mode (each list or its single value) */
    const int nr = o->n_rescues > 0 ? LCX_MIN(o->n_rescues, 2) : 1, nd = o->n_directions > 0 ? LCX_MIN(o->n_directions, 2) : 1,
              nm = o->n_modes > 0 ? LCX_MIN(o->n_modes, 3) : 1;
    cell_cfg cfgs[12];
    int n_cfg = 0;
    for (int r = 0; r < nr; r++)
        for (int d = 0; d < nd; d++)
            for (int mi = 0; mi < nm; mi++)
                cfgs[n_cfg++] = (cell_cfg){o->n_rescues > 0 ? o->rescues[r] : o->rescue,
                                           o->n_directions > 0 ? o->directions[d] : o->direction,
                                           o->n_modes > 0 ? o->modes[mi] : o->mode};
    const cell_cfg base_cfg = {cfgs[0].rescue, cfgs[0].direction, cfgs[0].mode};
    int n_runs = 0;
    for (int a = 0; a < LCX_RAMP_NARMS; a++) n_runs += o->arms[a] ? (a == LCX_RAMP_BASELINE ? 1 : n_cfg) : 0;
    const int n_plan = o->n_sizes * n_runs * o->n_depths * o->n_seeds;
    const int total = n_plan / o->n_shards + (o->shard < n_plan % o->n_shards);   /* this shard's */
    lcx_ramp_cell *cs = calloc((size_t)(total ? total : 1), sizeof *cs);
    if (!cs) { rc = LCX_ENOMEM; goto out; }
    runner R = {o, m};
    int k = 0, idx = 0;
    for (int si = 0; si < o->n_sizes; si++) {
        const int size = o->sizes[si];
        const int n_fill = plan_fill(tk, size - o->max_gen - 16);
        if (n_fill < 0) { rc = n_fill; goto out; }
        for (int a = 0; a < LCX_RAMP_NARMS; a++) {
            if (!o->arms[a]) continue;
            for (int ci = 0; ci < (a == LCX_RAMP_BASELINE ? 1 : n_cfg); ci++)
                for (int di = 0; di < o->n_depths; di++)
                    for (int seed = o->first_seed; seed < o->first_seed + o->n_seeds; seed++) {
                        if (idx++ % o->n_shards != o->shard) continue;
                        const cell_cfg *cf = a == LCX_RAMP_BASELINE ? &base_cfg : &cfgs[ci];
                        rc = run_cell(&R, size, n_fill, a, cf, o->depths[di], seed, &cs[k], err, err_len);
                        if (rc < 0) goto out;
                        k++;
                        if (o->on_cell) o->on_cell(o->ud, &cs[k - 1], k, total);
                    }
        }
    }
    rc = 0;
out:
    eng__tokenizer_free(tk);
    eng_model_free(m);
    if (rc < 0) { free(cs); return rc; }
    *cells = cs;
    *n_cells = k;
    return 0;
}

/* ---- output ------------------------------------------------------------------------ */

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    if (n <= 0) return 0;
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* A series = one line of the chart / one summary row per size: the arm, and for the V3
 * arms the configuration (rescue, direction, mode). The baseline is one series. */
static bool same_series(const lcx_ramp_cell *a, const lcx_ramp_cell *b)
{
    if (a->arm != b->arm) return false;
    return a->arm == LCX_RAMP_BASELINE ||
           (a->rescue == b->rescue && a->direction == b->direction && a->mode == b->mode);
}

typedef struct {
    lcx_ramp_cell key;            /* size + series fields */
    int n, recall, pass;
    double total_med, t1_med, t2_med, evicted_med, rounds_med;
} summary;

/* One row per (size, series) in first-seen order. Returns the count; *out malloc'd. */
static int summarize(const lcx_ramp_cell *c, int n, summary **out)
{
    summary *S = calloc((size_t)(n ? n : 1), sizeof *S);
    double *tmp = malloc((size_t)(n ? n : 1) * sizeof *tmp);
    if (!S || !tmp) { free(S); free(tmp); return LCX_ENOMEM; }
    int ns = 0;
    for (int i = 0; i < n; i++) {
        int j = 0;
        while (j < ns && !(S[j].key.size == c[i].size && same_series(&S[j].key, &c[i]))) j++;
        if (j < ns) continue;
        summary *s = &S[ns++];
        s->key = c[i];
        int m;
#define IN(k) (c[k].size == s->key.size && same_series(&c[k], &s->key))
#define MED(field, dst)                                                              \
        m = 0;                                                                       \
        for (int k = 0; k < n; k++)                                                  \
            if (IN(k)) tmp[m++] = (double)c[k].field;                                \
        s->dst = median(tmp, m);
        MED(total_s, total_med)
        MED(t1_s, t1_med)
        MED(t2_s, t2_med)
        MED(evicted_pct, evicted_med)
        MED(rounds, rounds_med)
#undef MED
        for (int k = 0; k < n; k++)
            if (IN(k)) {
                s->n++;
                s->recall += c[k].cache_recall;
                s->pass += c[k].answer == LCX_NIAH_PASS;
            }
#undef IN
    }
    free(tmp);
    *out = S;
    return ns;
}

static void size_name(int size, char *b, size_t n)
{
    if (size % 1024 == 0) snprintf(b, n, "%dK", size / 1024);
    else snprintf(b, n, "%d", size);
}

/* "-" for the baseline's configuration columns */
static const char *cfg_rescue(const lcx_ramp_cell *c) { return c->arm == LCX_RAMP_BASELINE ? "-" : lcx__ramp_rescue_name(c->rescue); }
static const char *cfg_dir(const lcx_ramp_cell *c) { return c->arm == LCX_RAMP_BASELINE ? "-" : lcx__ramp_direction_name(c->direction); }
static const char *cfg_mode(const lcx_ramp_cell *c) { return c->arm == LCX_RAMP_BASELINE ? "-" : lcx__ramp_mode_name(c->mode); }

void lcx__ramp_print_table(FILE *f, const lcx_ramp_cell *c, int n)
{
    fprintf(f, "%-6s %-11s %-11s %-10s %-7s %5s %4s %7s %7s %8s %6s %-14s %-6s %7s\n", "size", "arm", "rescue",
            "direction", "mode", "depth", "seed", "t1_s", "t2_s", "evicted", "rounds", "answer", "cache", "total_s");
    for (int i = 0; i < n; i++) {
        char sz[16];
        size_name(c[i].size, sz, sizeof sz);
        fprintf(f, "%-6s %-11s %-11s %-10s %-7s %5.2f %4d %7.2f %7.2f %7.1f%% %6d %-14s %-6s %7.2f\n", sz,
                lcx__ramp_arm_name(c[i].arm), cfg_rescue(&c[i]), cfg_dir(&c[i]), cfg_mode(&c[i]), c[i].depth, c[i].seed,
                c[i].t1_s, c[i].t2_s, c[i].evicted_pct, c[i].rounds, lcx__niah_grade_name(c[i].answer),
                c[i].cache_recall ? "HIT" : "miss", c[i].total_s);
    }
    summary *S = NULL;
    int ns = summarize(c, n, &S);
    if (ns < 0) return;
    fprintf(f, "\n%-6s %-11s %-11s %-10s %-7s %9s %11s %8s %6s %9s %9s %10s\n", "size", "arm", "rescue", "direction",
            "mode", "cache", "answer", "evicted", "rounds", "t_med_s", "vs_v3", "vs_base");
    for (int i = 0; i < ns; i++) {
        char sz[16], rec[32], ans[32], vv3[16] = "-", vb[16] = "-";
        const lcx_ramp_cell *k = &S[i].key;
        size_name(k->size, sz, sizeof sz);
        snprintf(rec, sizeof rec, "%d/%d", S[i].recall, S[i].n);
        snprintf(ans, sizeof ans, "%d/%d PASS", S[i].pass, S[i].n);
        for (int j = 0; j < ns; j++) {
            const lcx_ramp_cell *o = &S[j].key;
            if (o->size != k->size || S[j].total_med <= 0 || i == j) continue;
            /* vs_v3: the v3 row of the same configuration */
            if (o->arm == LCX_RAMP_V3 && k->arm != LCX_RAMP_BASELINE && o->rescue == k->rescue &&
                o->direction == k->direction && o->mode == k->mode)
                snprintf(vv3, sizeof vv3, "%+.1f%%", 100 * (S[i].total_med / S[j].total_med - 1));
            if (o->arm == LCX_RAMP_BASELINE) snprintf(vb, sizeof vb, "%+.1f%%", 100 * (S[i].total_med / S[j].total_med - 1));
        }
        fprintf(f, "%-6s %-11s %-11s %-10s %-7s %9s %11s %7.1f%% %6.1f %9.2f %9s %10s\n", sz, lcx__ramp_arm_name(k->arm),
                cfg_rescue(k), cfg_dir(k), cfg_mode(k), rec, ans, S[i].evicted_med, S[i].rounds_med, S[i].total_med, vv3,
                vb);
    }
    free(S);
}

char *lcx__ramp_json(const char *model, const lcx_ramp_cell *c, int n)
{
    cJSON *root = cJSON_CreateObject(), *arr = NULL;
    if (!root) return NULL;
    cJSON_AddStringToObject(root, "model", model ? model : "");
    arr = cJSON_AddArrayToObject(root, "cells");
    if (!arr) { cJSON_Delete(root); return NULL; }
    for (int i = 0; i < n; i++) {
        cJSON *o = cJSON_CreateObject();
        if (!o) { cJSON_Delete(root); return NULL; }
        cJSON_AddItemToArray(arr, o);
        const bool v3 = c[i].arm != LCX_RAMP_BASELINE;
        cJSON_AddNumberToObject(o, "size", c[i].size);
        cJSON_AddStringToObject(o, "arm", lcx__ramp_arm_name(c[i].arm));
        cJSON_AddStringToObject(o, "rescue", lcx__ramp_rescue_name(c[i].rescue));
        /* the eviction policy's knobs: null for the baseline, which evicts nothing */
        if (v3) cJSON_AddStringToObject(o, "direction", lcx__ramp_direction_name(c[i].direction));
        else cJSON_AddNullToObject(o, "direction");
        if (v3) cJSON_AddStringToObject(o, "mode", lcx__ramp_mode_name(c[i].mode));
        else cJSON_AddNullToObject(o, "mode");
        cJSON_AddNumberToObject(o, "depth", c[i].depth);
        cJSON_AddNumberToObject(o, "seed", c[i].seed);
        cJSON_AddNumberToObject(o, "t1_s", round(c[i].t1_s * 1e4) / 1e4);
        cJSON_AddNumberToObject(o, "t2_s", round(c[i].t2_s * 1e4) / 1e4);
        cJSON_AddNumberToObject(o, "evicted_pct", round(c[i].evicted_pct * 100) / 100);
        cJSON_AddNumberToObject(o, "rounds", c[i].rounds);
        cJSON_AddStringToObject(o, "answer", lcx__niah_grade_name(c[i].answer));
        cJSON_AddBoolToObject(o, "cache_recall", c[i].cache_recall);
        cJSON_AddNumberToObject(o, "total_s", round(c[i].total_s * 1e4) / 1e4);
        /* beyond the shape: why a cell kept or lost the fact (kept in the KV cache vs
         * brought back by a rescue message), so a miss can be told apart from --replay output */
        cJSON_AddBoolToObject(o, "in_cache", c[i].fact_in_cache);
        cJSON_AddBoolToObject(o, "in_rescue", c[i].fact_in_rescue);
        cJSON_AddNumberToObject(o, "rescue_chunks", c[i].rescue_chunks);
        cJSON_AddNumberToObject(o, "spans_sent", (double)c[i].spans_sent);
        cJSON_AddNumberToObject(o, "spans_dropped", (double)c[i].spans_dropped);
        cJSON_AddNumberToObject(o, "n_tokens", c[i].n_tokens);
        cJSON_AddStringToObject(o, "reply", c[i].reply);
    }
    char *s = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return s;
}

static int name_index(const char *s, const char *(*name)(int), int n)
{
    for (int i = 0; i < n && s; i++)
        if (!strcmp(s, name(i))) return i;
    return -1;
}

static const char *grade_name(int g) { return lcx__niah_grade_name(g); }

int lcx__ramp_json_read(const char *json, lcx_ramp_cell **cells, int *n, char **model)
{
    if (!json || !cells || !n) return LCX_EINVAL;
    cJSON *root = cJSON_Parse(json);
    const cJSON *arr = root ? cJSON_GetObjectItem(root, "cells") : NULL;
    if (!cJSON_IsArray(arr)) { cJSON_Delete(root); return LCX_ECORRUPT; }
    const int add = cJSON_GetArraySize(arr);
    lcx_ramp_cell *nc = realloc(*cells, (size_t)(*n + add + 1) * sizeof *nc);
    if (!nc) { cJSON_Delete(root); return LCX_ENOMEM; }
    *cells = nc;
    int rc = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, arr) {
        lcx_ramp_cell *c = &nc[*n];
        memset(c, 0, sizeof *c);
        const cJSON *v;
#define NUM(k) ((v = cJSON_GetObjectItem(e, k)) && cJSON_IsNumber(v) ? v->valuedouble : 0)
#define STR(k) ((v = cJSON_GetObjectItem(e, k)) && cJSON_IsString(v) ? v->valuestring : NULL)
        c->size = (int)NUM("size");
        c->arm = name_index(STR("arm"), lcx__ramp_arm_name, LCX_RAMP_NARMS);
        c->rescue = name_index(STR("rescue"), lcx__ramp_rescue_name, 2);
        c->direction = STR("direction") ? name_index(STR("direction"), lcx__ramp_direction_name, 2) : TRIATT_KEEP_HIGH;
        c->mode = STR("mode") ? name_index(STR("mode"), lcx__ramp_mode_name, 3) : TRIATT_MODE_TRIG;
        c->depth = NUM("depth");
        c->seed = (int)NUM("seed");
        c->t1_s = NUM("t1_s");
        c->t2_s = NUM("t2_s");
        c->evicted_pct = NUM("evicted_pct");
        c->rounds = (int)NUM("rounds");
        c->answer = name_index(STR("answer"), grade_name, 8);
        c->cache_recall = cJSON_IsTrue(cJSON_GetObjectItem(e, "cache_recall"));
        c->total_s = NUM("total_s");
        /* optional (older outputs lack them: false / 0) */
        c->fact_in_cache = cJSON_IsTrue(cJSON_GetObjectItem(e, "in_cache"));
        c->fact_in_rescue = cJSON_IsTrue(cJSON_GetObjectItem(e, "in_rescue"));
        c->rescue_chunks = (int)NUM("rescue_chunks");
        c->spans_sent = (uint64_t)NUM("spans_sent");
        c->spans_dropped = (uint64_t)NUM("spans_dropped");
        c->n_tokens = (int)NUM("n_tokens");
        if (STR("reply")) set_reply(c, STR("reply"));
#undef NUM
#undef STR
        if (c->size < 1 || c->arm < 0 || c->rescue < 0 || c->direction < 0 || c->mode < 0 || c->answer < 1) {
            rc = LCX_ECORRUPT;
            break;
        }
        (*n)++;
    }
    if (rc == 0 && model && !*model) {
        const cJSON *m = cJSON_GetObjectItem(root, "model");
        if (cJSON_IsString(m) && !(*model = strdup(m->valuestring))) rc = LCX_ENOMEM;
    }
    cJSON_Delete(root);
    return rc;
}

/* ---- SVG ---------------------------------------------------------------------------
 * Two panels sharing the x axis (context size, log2 spaced): top = cache-level recall per
 * series (share of cells, 0–100 %), bottom = median total time per series (seconds, log
 * scale when the range spans > 20×). Colour = arm, dash = direction (keep_high solid,
 * evict_high dashed), marker = rescue (circle single-turn, square two-turn); the legend
 * gives each series' cells kept and answers passed. Self-contained (generic sans-serif). */
static const char *const ARM_COLOR[LCX_RAMP_NARMS] = {"#6b7280", "#dc2626", "#2563eb"};
#define SVG_MAX_SERIES 32

static void series_name(const lcx_ramp_cell *k, bool show_rescue, bool show_dir, bool show_mode, char *b, size_t n)
{
    int o = snprintf(b, n, "%s", lcx__ramp_arm_name(k->arm));
    if (k->arm == LCX_RAMP_BASELINE) return;
    if (show_mode && o > 0 && (size_t)o < n) o += snprintf(b + o, n - (size_t)o, " %s", lcx__ramp_mode_name(k->mode));
    if (show_dir && o > 0 && (size_t)o < n) o += snprintf(b + o, n - (size_t)o, " %s", lcx__ramp_direction_name(k->direction));
    if (show_rescue && o > 0 && (size_t)o < n) snprintf(b + o, n - (size_t)o, ", %s", lcx__ramp_rescue_name(k->rescue));
}

static void svg_marker(lcx_buf *b, const lcx_ramp_cell *k, double x, double y, const char *title)
{
    const char *col = ARM_COLOR[k->arm];
    if (k->arm != LCX_RAMP_BASELINE && k->rescue == LCX_RAMP_TWO_TURN)
        lcx__buf_printf(b, "<rect x=\"%.1f\" y=\"%.1f\" width=\"8\" height=\"8\" fill=\"%s\" stroke=\"white\">", x - 4, y - 4, col);
    else
        lcx__buf_printf(b, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4.5\" fill=\"%s\" stroke=\"white\">", x, y, col);
    if (title) lcx__buf_printf(b, "<title>%s</title>", title);
    lcx__buf_puts(b, k->arm != LCX_RAMP_BASELINE && k->rescue == LCX_RAMP_TWO_TURN ? "</rect>\n" : "</circle>\n");
}

char *lcx__ramp_svg(const char *model, const lcx_ramp_cell *c, int n)
{
    summary *S = NULL;
    int ns = summarize(c, n, &S);
    if (ns < 0) return NULL;
    int sizes[LCX_RAMP_MAX_SIZES * 4], nz = 0;
    lcx_ramp_cell ser[SVG_MAX_SERIES];
    int nser = 0;
    double tmin = INFINITY, tmax = 0;
    for (int i = 0; i < ns; i++) {
        int j = 0;
        while (j < nz && sizes[j] != S[i].key.size) j++;
        if (j == nz && nz < (int)(sizeof sizes / sizeof *sizes)) sizes[nz++] = S[i].key.size;
        j = 0;
        while (j < nser && !same_series(&ser[j], &S[i].key)) j++;
        if (j == nser && nser < SVG_MAX_SERIES) ser[nser++] = S[i].key;
        if (S[i].total_med > 0) { tmin = fmin(tmin, S[i].total_med); tmax = fmax(tmax, S[i].total_med); }
    }
    /* series in arm order (baseline, v3, v3+longctx), then first-seen */
    for (int i = 1; i < nser; i++)
        for (int j = i; j > 0 && ser[j - 1].arm > ser[j].arm; j--) { lcx_ramp_cell t = ser[j]; ser[j] = ser[j - 1]; ser[j - 1] = t; }
    bool show_rescue = false, show_dir = false, show_mode = false;
    for (int i = 0; i < nser; i++)
        for (int j = 0; j < nser; j++) {
            if (ser[i].arm == LCX_RAMP_BASELINE || ser[j].arm == LCX_RAMP_BASELINE) continue;
            show_rescue |= ser[i].rescue != ser[j].rescue;
            show_dir |= ser[i].direction != ser[j].direction;
            show_mode |= ser[i].mode != ser[j].mode;
        }
    for (int i = 1; i < nz; i++)
        for (int j = i; j > 0 && sizes[j - 1] > sizes[j]; j--) { int t = sizes[j]; sizes[j] = sizes[j - 1]; sizes[j - 1] = t; }
    if (!isfinite(tmin)) { tmin = 0.1; tmax = 1; }
    const bool logt = tmax / tmin > 20;
    /* linear time axis: a 1/2/5 step so the ticks read as round numbers */
    double step = 1;
    if (!logt) {
        const double raw = tmax * 1.05 / 4, mag = pow(10, floor(log10(raw)));
        step = raw <= mag ? mag : raw <= 2 * mag ? 2 * mag : raw <= 5 * mag ? 5 * mag : 10 * mag;
    }
    const int nt = logt ? 4 : (int)ceil(tmax * 1.05 / step);
    const double tspan = logt ? 1 : nt * step;
    const double LEG_H = 50, W = 860, T = 76, PH = 190, GAP = 64, PAD = 12, L = 84, R = 260;
    const double H = fmax(570, T + 16 + nser * LEG_H + 20);
    const double pw = W - L - R;
    lcx_buf b = {0};
#define X(i) (nz > 1 ? L + 20 + (pw - 40) * (double)(i) / (nz - 1) : L + pw / 2)
    lcx__buf_printf(&b,
                   "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" "
                   "font-family=\"Helvetica, Arial, sans-serif\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
                   W, H, W, H);
    lcx__buf_printf(&b, "<text x=\"%.0f\" y=\"30\" font-size=\"19\" font-weight=\"bold\" fill=\"#111\">Planted-fact ramp: "
                       "does the fact survive KV eviction?</text>\n", L);
    char mname[160];
    snprintf(mname, sizeof mname, "%s", model ? model : "");
    for (char *p = mname; *p; p++)
        if (*p == '<' || *p == '>' || *p == '&' || *p == '"') *p = '_';
    int ncells = 0;
    for (int i = 0; i < ns; i++) ncells += S[i].n;
    lcx__buf_printf(&b, "<text x=\"%.0f\" y=\"52\" font-size=\"12\" fill=\"#555\">%s · %d cells · kept = every fact token "
                       "still in the KV cache, or rescued into the prompt</text>\n",
                   L, mname, ncells);
    for (int panel = 0; panel < 2; panel++) {
        const double y0 = T + panel * (PH + GAP), y1 = y0 + PH;
        const double iy0 = y0 + PAD, iy1 = y1 - PAD, ih = iy1 - iy0;   /* data area inside the frame */
        lcx__buf_printf(&b, "<rect x=\"%.0f\" y=\"%.0f\" width=\"%.0f\" height=\"%.0f\" fill=\"#fafafa\" stroke=\"#ddd\"/>\n",
                       L, y0, pw, PH);
        const int ng = panel == 0 ? 4 : nt;
        for (int g = 0; g <= ng; g++) {
            double yy = iy1 - ih * g / (double)ng;
            char lab[32];
            if (panel == 0) snprintf(lab, sizeof lab, "%d%%", g * 25);
            else {
                double v = logt ? tmin * pow(tmax / tmin, g / 4.0) : step * g;
                snprintf(lab, sizeof lab, v >= 10 || v == 0 ? "%.0f s" : "%.2g s", v);
            }
            lcx__buf_printf(&b, "<line x1=\"%.0f\" y1=\"%.1f\" x2=\"%.0f\" y2=\"%.1f\" stroke=\"#e5e5e5\"/>"
                               "<text x=\"%.0f\" y=\"%.1f\" font-size=\"11\" fill=\"#666\" text-anchor=\"end\">%s</text>\n",
                           L, yy, L + pw, yy, L - 6, yy + 4, lab);
        }
        lcx__buf_printf(&b, "<text x=\"22\" y=\"%.0f\" font-size=\"13\" fill=\"#333\" transform=\"rotate(-90 22 %.0f)\" "
                           "text-anchor=\"middle\">%s</text>\n", (y0 + y1) / 2, (y0 + y1) / 2,
                       panel == 0 ? "fact kept (cache-level recall)" : "median time per cell");
        for (int si = 0; si < nser; si++) {
            const lcx_ramp_cell *k = &ser[si];
            lcx_buf pts = {0}, marks = {0};
            for (int zi = 0; zi < nz; zi++)
                for (int i = 0; i < ns; i++) {
                    if (S[i].key.size != sizes[zi] || !same_series(&S[i].key, k)) continue;
                    double yy;
                    if (panel == 0) {
                        const double v = S[i].n ? (double)S[i].recall / S[i].n : 0;
                        /* series on the same value are drawn 2.5 px apart so every line shows */
                        yy = iy1 - ih * v + (si - (nser - 1) / 2.0) * 2.5;
                    } else {
                        const double v = S[i].total_med;
                        const double fr = logt ? log(v / tmin) / log(tmax / tmin) : v / tspan;
                        yy = iy1 - ih * fmax(0, fmin(1, fr));
                    }
                    char nm[96], title[256];
                    series_name(k, true, true, true, nm, sizeof nm);
                    snprintf(title, sizeof title, "%s, %d tokens: %d/%d kept, %d/%d PASS, median %.2f s", nm, sizes[zi],
                             S[i].recall, S[i].n, S[i].pass, S[i].n, S[i].total_med);
                    lcx__buf_printf(&pts, "%s%.1f,%.1f", pts.len ? " " : "", X(zi), yy);
                    svg_marker(&marks, k, X(zi), yy, title);
                }
            if (pts.len)
                lcx__buf_printf(&b, "<polyline points=\"%s\" fill=\"none\" stroke=\"%s\" stroke-width=\"2.5\" "
                                   "stroke-linejoin=\"round\"%s/>\n", pts.data, ARM_COLOR[k->arm],
                               k->arm != LCX_RAMP_BASELINE && k->direction == TRIATT_EVICT_HIGH ? " stroke-dasharray=\"7 4\"" : "");
            if (marks.len) lcx__buf_append(&b, marks.data, marks.len);
            lcx__buf_free(&pts);
            lcx__buf_free(&marks);
        }
        for (int zi = 0; zi < nz; zi++) {
            char sz[16];
            size_name(sizes[zi], sz, sizeof sz);
            lcx__buf_printf(&b, "<text x=\"%.1f\" y=\"%.0f\" font-size=\"12\" fill=\"#333\" text-anchor=\"middle\">%s</text>\n",
                           X(zi), y1 + 17, sz);
        }
    }
    lcx__buf_printf(&b, "<text x=\"%.0f\" y=\"%.0f\" font-size=\"12\" fill=\"#333\" text-anchor=\"middle\">context size "
                       "(tokens)</text>\n", L + pw / 2, T + 2 * PH + GAP + 38);
    /* legend: per series, cells kept and answers passed over the whole run */
    for (int si = 0; si < nser; si++) {
        const lcx_ramp_cell *k = &ser[si];
        int cells = 0, pass = 0, kept = 0;
        for (int i = 0; i < ns; i++)
            if (same_series(&S[i].key, k)) { cells += S[i].n; pass += S[i].pass; kept += S[i].recall; }
        char nm[96];
        series_name(k, show_rescue, show_dir, show_mode, nm, sizeof nm);
        const double ly = T + 16 + si * LEG_H;
        lcx__buf_printf(&b, "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"%s\" stroke-width=\"3\"%s/>",
                       L + pw + 16, ly, L + pw + 42, ly, ARM_COLOR[k->arm],
                       k->arm != LCX_RAMP_BASELINE && k->direction == TRIATT_EVICT_HIGH ? " stroke-dasharray=\"7 4\"" : "");
        svg_marker(&b, k, L + pw + 29, ly, NULL);
        lcx__buf_printf(&b, "<text x=\"%.0f\" y=\"%.0f\" font-size=\"13\" font-weight=\"bold\" fill=\"#111\">%s</text>"
                           "<text x=\"%.0f\" y=\"%.0f\" font-size=\"11\" fill=\"#444\">fact kept %d/%d</text>"
                           "<text x=\"%.0f\" y=\"%.0f\" font-size=\"11\" fill=\"#777\">answer PASS %d/%d</text>\n",
                       L + pw + 50, ly + 5, nm, L + pw + 50, ly + 21, kept, cells, L + pw + 50, ly + 35, pass, cells);
    }
#undef X
    lcx__buf_puts(&b, "</svg>\n");
    free(S);
    if (lcx__buf_append(&b, "", 0) < 0) { lcx__buf_free(&b); return NULL; }
    return lcx__buf_steal(&b, NULL);
}
