/* TriAttention V3 inside the forward pass: libtriatt driven from eng_decode.
 *
 * Per ubatch (forward.c calls in): the pre-RoPE queries of each layer are copied while the
 * calibration still needs them (tok_task writes c->qpre, eng__v3_observe hands the layer's
 * rows to triatt_observe_queries once: each layer counts each token once), the pass ends after
 * the last layer (triatt_end_pass: a forward-pass boundary), the ubatch's new cells get their
 * fast-path features (triatt_cells_written), and the trigger is checked. A round removes the
 * chosen cells from every layer and compacts the cache (tail cells move into the holes) so
 * libtriatt's cell indices are always the dense range [0, n_used): positions never change,
 * attention masks by position. The evicted positions go to the Tier-2 bridge with the token
 * history by position (the ORIGINAL ids), decoded there with the model's tokenizer. */
#include "engine/ctx.h"
#include "engine/tokenizer.h"
#include "longctx/triatt.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct eng_v3 {
    triatt_ctx *tc;
    triatt_rescue *rs;
    eng_tokenizer *tok;
    triatt_keys keys;
    bool fast, adaptive;
    float *qbuf;               /* (n_ub, n_head*head_dim) */
    int32_t *out_cells, *ev_pos, *moved;   /* (n_ctx) each */
    float *ev_score;                       /* (n_ctx): the evicted cells' scores, as ev_pos */
    int32_t *hist;             /* token id by position, -1 = never written */
    int hist_n, hist_cap;
    int32_t *dscratch;         /* detok: the span's known ids */
    int dscratch_cap;
    eng_log_fn log;
    void *log_ud;
    eng_triatt_stats st;
};

/* ---- key accessor: rows straight from the cache (no copy) ---------------------------- */
static const float *v3_keys_get(void *ud, int layer, int kv_head, int cell0, int n, float *scratch, size_t *row_stride)
{
    const eng_ctx *c = ud;
    const eng_model_info *I = &c->m->info;
    const size_t kvd = (size_t)I->n_head_kv * I->head_dim;
    (void)n; (void)scratch;
    *row_stride = kvd;
    return c->kc + ((size_t)layer * c->n_ctx + cell0) * kvd + (size_t)kv_head * I->head_dim;
}

/* ---- Tier-2 detokenisation (the bridge's thread-safe contract: caller's thread only) --- */
static int v3_detok(void *ud, const int32_t *tokens, int n, char *out, size_t cap)
{
    eng_v3 *v = ud;
    if (n > v->dscratch_cap) {
        int32_t *d = realloc(v->dscratch, (size_t)n * sizeof *d);
        if (!d) return LCX_ENOMEM;
        v->dscratch = d;
        v->dscratch_cap = n;
    }
    int k = 0;   /* positions never written (explicit gaps) have no token */
    for (int i = 0; i < n; i++)
        if (tokens[i] >= 0) v->dscratch[k++] = tokens[i];
    if (!k) {
        if (cap) out[0] = 0;
        return 0;
    }
    return eng__detokenize(v->tok, v->dscratch, k, out, cap);
}

static void v3_log_tramp(void *ud, const char *line)
{
    eng_v3 *v = ud;
    if (v->log) v->log(v->log_ud, line);
}

void eng__v3_free(eng_ctx *c)
{
    eng_v3 *v = c->v3;
    if (!v) return;
    triatt_rescue_free(v->rs);
    triatt_free(v->tc);
    eng__tokenizer_free(v->tok);
    free(v->qbuf); free(v->out_cells); free(v->ev_pos); free(v->ev_score); free(v->moved); free(v->hist); free(v->dscratch);
    free(v);
    c->v3 = NULL;
    c->qpre = NULL;
}

void eng_triatt_detach(eng_ctx *c)
{
    if (c) eng__v3_free(c);
}

bool eng_triatt_attached(const eng_ctx *c) { return c && c->v3; }

void eng_triatt_set_log(eng_ctx *c, eng_log_fn fn, void *ud)
{
    if (!c || !c->v3) return;
    c->v3->log = fn;
    c->v3->log_ud = ud;
}

static int errf(char *err, size_t n, int rc, const char *fmt, const char *a)
{
    if (err && n) snprintf(err, n, fmt, a);
    return rc;
}

static int hist_put(eng_v3 *v, int32_t pos, int32_t tok)
{
    if (pos >= v->hist_cap) {
        int cap = LCX_MAX(pos + 1, v->hist_cap * 2);
        int32_t *h = realloc(v->hist, (size_t)cap * sizeof *h);
        if (!h) return LCX_ENOMEM;
        for (int i = v->hist_cap; i < cap; i++) h[i] = -1;
        v->hist = h;
        v->hist_cap = cap;
    }
    v->hist[pos] = tok;
    if (pos + 1 > v->hist_n) v->hist_n = pos + 1;
    return 0;
}

int eng_triatt_attach(eng_ctx *c, const triatt_config *cfg_in, const char *session_id, char *err, size_t errlen)
{
    if (!c || !cfg_in) return errf(err, errlen, LCX_EINVAL, "%s", "triatt: no context or config");
    if (!cfg_in->enabled) return errf(err, errlen, LCX_EINVAL, "%s", "triatt: config is not enabled (set a budget)");
    triatt_config cfg = *cfg_in;
    if (cfg.n_threads == 1) cfg.n_threads = c->nth;   /* the decode threads idle during a round */
    int rc = triatt_config_check(&cfg, err, errlen);
    if (rc < 0) return rc;
    const eng_model_info *I = &c->m->info;
    if (cfg.budget + cfg.divide_length + c->n_ub > c->n_ctx) {
        if (err && errlen)
            snprintf(err, errlen, "triatt: budget %d + divide %d + ubatch %d exceeds the %d-cell cache (a full ubatch "
                     "would not fit after a round)", cfg.budget, cfg.divide_length, c->n_ub, c->n_ctx);
        return LCX_EINVAL;
    }
    const int prot = cfg.window + (cfg.version == TRIATT_V3 ? cfg.prefix : 0);
    if (cfg.budget < prot) {
        /* the protected cells alone would exceed the budget: a round could not evict
         * n_used − budget cells and would fire again at every token */
        if (err && errlen)
            snprintf(err, errlen, "triatt: budget %d is smaller than the protected window %d%s (+ prefix %d)", cfg.budget,
                     cfg.window, cfg.version == TRIATT_V3 ? "" : " (V1/V2: no prefix)", cfg.version == TRIATT_V3 ? cfg.prefix : 0);
        return LCX_EINVAL;
    }
    triatt_geometry g = {.n_layers = I->n_layer, .n_heads = I->n_head, .n_kv_heads = I->n_head_kv,
                         .head_dim = I->head_dim, .n_rot = I->n_rot,
                         .pairing = I->rope_type == ENG_ROPE_NEOX ? TRIATT_PAIR_HALF : TRIATT_PAIR_ADJACENT,
                         .rope_theta = I->rope_freq_base, .scaling = TRIATT_SCALE_NONE, .scale_factor = 1,
                         .freq_divisors = c->m->rope_freqs};   /* the forward pass's divisors */
    if (I->rope_freq_scale != 1.0f) {
        g.scaling = TRIATT_SCALE_LINEAR;
        g.scale_factor = 1.0 / I->rope_freq_scale;
    }
    eng__v3_free(c);
    eng_v3 *v = calloc(1, sizeof *v);
    if (!v) return errf(err, errlen, LCX_ENOMEM, "%s", "triatt: out of memory");
    rc = triatt_init(&g, &cfg, &v->tc);
    if (rc < 0) {
        free(v);
        if (cfg.calib_file[0]) return errf(err, errlen, rc, "triatt: cannot use the calibration file %s (missing, corrupt or another model's geometry)", cfg.calib_file);
        return errf(err, errlen, rc, "%s", "triatt: cannot initialise (bad geometry or out of memory)");
    }
    triatt_set_log(v->tc, v3_log_tramp, v);
    v->fast = cfg.fast_path;
    v->adaptive = cfg.adaptive;
    v->keys = (triatt_keys){.get = v3_keys_get, .ud = c};
    const size_t qd = (size_t)I->n_head * I->head_dim;
    v->qbuf = malloc((size_t)c->n_ub * qd * sizeof(float));
    v->out_cells = malloc((size_t)c->n_ctx * sizeof(int32_t));
    v->ev_pos = malloc((size_t)c->n_ctx * sizeof(int32_t));
    v->ev_score = malloc((size_t)c->n_ctx * sizeof(float));
    v->moved = malloc((size_t)c->n_ctx * sizeof(int32_t));
    if (!v->qbuf || !v->out_cells || !v->ev_pos || !v->ev_score || !v->moved) {
        c->v3 = v;
        eng__v3_free(c);
        return errf(err, errlen, LCX_ENOMEM, "%s", "triatt: out of memory");
    }
    c->v3 = v;
    /* tokens already in the cache keep their ids for Tier 2 */
    for (int i = 0; i < c->hi; i++)
        if (c->cell_pos[i] >= 0 && hist_put(v, c->cell_pos[i], c->cell_tok[i]) < 0) {
            eng__v3_free(c);
            return errf(err, errlen, LCX_ENOMEM, "%s", "triatt: out of memory");
        }
    if (cfg.endpoint[0]) {
        char terr[256] = "";
        rc = eng__tokenizer_from_gguf(c->m->g, &v->tok, terr, sizeof terr);
        if (rc < 0) {
            eng__v3_free(c);
            return errf(err, errlen, rc, "triatt: the rescue bridge needs the model's tokenizer: %s", terr);
        }
        char sid[64];
        if (!session_id || !*session_id) {
            snprintf(sid, sizeof sid, "eng-%ld-%lx", (long)getpid(), (unsigned long)(uintptr_t)c);
            session_id = sid;
        }
        triatt_rescue_config rc_ = {0};
        triatt_rescue_config_default(&rc_);
        rc_.endpoint = cfg.endpoint;
        rc_.session_id = session_id;
        rc_.detok = v3_detok;
        rc_.detok_ud = v;
        int rrc = triatt_rescue_init(&rc_, &v->rs);
        if (rrc < 0) {
            eng__v3_free(c);
            return errf(err, errlen, rrc, "triatt: cannot start the rescue client (endpoint %s, session id " LCX_SESSION_ID_RANGE " bytes)", cfg.endpoint);
        }
    }
    c->qpre = triatt_calib_ready(triatt_ctx_calib(v->tc)) && !v->adaptive ? NULL : v->qbuf;
    return 0;
}

triatt_ctx *eng_triatt_ctx(eng_ctx *c) { return c && c->v3 ? c->v3->tc : NULL; }
triatt_rescue *eng_triatt_rescue(eng_ctx *c) { return c && c->v3 ? c->v3->rs : NULL; }

int eng_triatt_flush(eng_ctx *c, int timeout_ms)
{
    if (!c || !c->v3 || !c->v3->rs) return LCX_ESTATE;
    return triatt_rescue_flush(c->v3->rs, timeout_ms);
}

int eng_triatt_get_stats(const eng_ctx *c, eng_triatt_stats *out)
{
    if (!c || !c->v3 || !out) return LCX_ESTATE;
    eng_v3 *v = c->v3;
    *out = v->st;
    triatt_calib *cal = triatt_ctx_calib(v->tc);
    out->calibrated = triatt_calib_ready(cal);
    out->calib_tokens = triatt_calib_tokens(cal);
    triatt_counters tcn;
    triatt_get_counters(v->tc, &tcn);
    out->cells_scored = tcn.cells_scored;
    if (v->rs) {
        triatt_rescue_stats rs;
        triatt_rescue_get_stats(v->rs, &rs);
        out->spans_queued = rs.spans_queued;
        out->spans_sent = rs.spans_sent;
        out->spans_dropped = rs.spans_dropped;
        out->rounds_dropped = rs.rounds_dropped;
        out->rounds_failed = rs.rounds_failed;
    }
    return 0;
}

/* ---- the per-ubatch steps ------------------------------------------------------------ */

/* features of the given cells (ascending), in runs of consecutive cells */
static int feed_cells(eng_ctx *c, const int32_t *cells, int n)
{
    eng_v3 *v = c->v3;
    for (int i = 0; i < n;) {
        int j = i + 1;
        while (j < n && cells[j] == cells[j - 1] + 1) j++;
        int rc = triatt_cells_written(v->tc, &v->keys, c->cell_pos, cells[i], j - i);
        if (rc < 0) return rc;
        i = j;
    }
    return 0;
}

void eng__v3_before_ubatch(eng_ctx *c)
{
    if (c->hi == c->n_used) return;
    /* someone removed cells (eng_kv_remove_*): the moved cells' features go stale by
     * position and are refreshed by the next round */
    c->v3->st.cells_moved += (uint64_t)eng__kv_compact(c, c->v3->moved);
}

void eng__v3_observe(eng_ctx *c, int il, int n)
{
    /* a rejected pass (e.g. an error mid-pass) is counted by libtriatt, not fatal */
    (void)triatt_observe_queries(c->v3->tc, il, c->qpre, n, 0);
}

int eng__v3_after_ubatch(eng_ctx *c, const int32_t *tok, int n)
{
    eng_v3 *v = c->v3;
    const double t0 = lcx__now_ms();
    for (int t = 0; t < n; t++)
        if (hist_put(v, c->ub_pos[t], tok[t]) < 0) return LCX_ENOMEM;
    triatt_calib *cal = triatt_ctx_calib(v->tc);
    int rc;
    if (c->qpre) {
        const bool was = triatt_calib_ready(cal);
        rc = triatt_end_pass(v->tc);
        if (rc < 0) return rc;
        const bool now = triatt_calib_ready(cal);
        if (now && !v->adaptive) c->qpre = NULL;     /* frozen: no more query copies */
        if (now && !was && v->fast) {
            /* centres just froze: every cell already cached gets its features */
            rc = triatt_cells_written(v->tc, &v->keys, c->cell_pos, 0, c->n_used);
            if (rc < 0) return rc;
        } else if (now && v->fast) {
            rc = feed_cells(c, c->ub_cell, n);
            if (rc < 0) return rc;
        }
    } else if (v->fast) {
        rc = feed_cells(c, c->ub_cell, n);
        if (rc < 0) return rc;
    }
    const double t1 = lcx__now_ms();
    v->st.total_feed_ms += t1 - t0;
    if (c->hi != c->n_used) v->st.cells_moved += (uint64_t)eng__kv_compact(c, v->moved);
    int ne = triatt_maybe_evict(v->tc, &v->keys, c->cell_pos, c->n_used, v->out_cells);
    if (ne < 0) return ne;
    if (ne == 0) return 0;
    const float *sc = triatt_last_scores(v->tc);
    for (int i = 0; i < ne; i++) {
        v->ev_pos[i] = c->cell_pos[v->out_cells[i]];
        v->ev_score[i] = sc ? sc[v->out_cells[i]] : NAN;
        c->cell_pos[v->out_cells[i]] = c->cell_tok[v->out_cells[i]] = -1;
    }
    const int nm = eng__kv_compact(c, v->moved);
    /* moved cells now hold another position: their features are recomputed now, not in
     * the next round */
    if (v->fast) {
        rc = feed_cells(c, v->moved, nm);
        if (rc < 0) return rc;
    }
    /* spans never reach past the live end (after eng_kv_clear the history beyond it is stale) */
    if (v->rs) (void)triatt_rescue_write_round(v->rs, v->ev_pos, v->ev_score, ne, v->hist, LCX_MIN(v->hist_n, c->max_pos + 1), 0);
    v->st.rounds++;
    v->st.cells_evicted += (uint64_t)ne;
    v->st.cells_moved += (uint64_t)nm;
    v->st.last_round_evicted = ne;
    v->st.last_round_ms = lcx__now_ms() - t1;
    v->st.total_round_ms += v->st.last_round_ms;
    return 0;
}

/* ---- configuration from flags + environment ------------------------------------------ */

static const char k_help[] =
    "  --triatt-budget N          turn TriAttention eviction on, keep N cells (VLLM_TRIATT_BUDGET)\n"
    "  --triatt-window N          never evict the last N positions (128)\n"
    "  --triatt-prefix N          V3: never evict positions < N (32)\n"
    "  --triatt-warmup N          calibration tokens before the first round (256)\n"
    "  --triatt-hybrid 0|1|2      V1 global / V2 segments / V3 segments + prefix (2)\n"
    "  --triatt-segments N        V2/V3 position buckets (8)\n"
    "  --triatt-mode trig|random|recency   scoring, or a control (trig)\n"
    "  --triatt-direction keep_high|evict_high   which scores survive (keep_high)\n"
    "  --triatt-calib FILE        offline calibration stats\n"
    "  --triatt-divide N          trigger slack: evict when used > budget + N (128)\n"
    "  --triatt-seed N            random-mode seed\n"
    "  --triatt-log               also log the cumulative stats line per round\n"
    "  --longctx-endpoint URL     Tier 2: post evicted spans to longctx-svc (LONGCTX_ENDPOINT)\n";

const char *eng_triatt_flags_help(void) { return k_help; }

static int flag_int(const char *flag, const char *v, long lo, long hi, int *dst, char *err, size_t n)
{
    char *end;
    long x = v ? strtol(v, &end, 10) : 0;
    if (!v || !*v || *end || x < lo || x > hi) {
        if (err && n) snprintf(err, n, "%s: \"%s\" is not an integer in [%ld, %ld]", flag, v ? v : "", lo, hi);
        return LCX_EINVAL;
    }
    *dst = (int)x;
    return 0;
}

int eng_triatt_config_resolve(triatt_config *cfg, int *argc, char **argv, char *err, size_t errlen)
{
    if (!cfg || !argc || (*argc && !argv)) return LCX_EINVAL;
    triatt_config c;
    triatt_config_default(&c);
    /* the engine writes each cell's features when it enters the cache, so rounds cost
     * O(cells·fc): on unless TRIATT_FAST=0 or reference aggregation */
    c.fast_path = true;
    const char *fe = getenv("VLLM_TRIATT_FAST") ? getenv("VLLM_TRIATT_FAST") : getenv("TRIATT_FAST");
    const char *ag = getenv("VLLM_TRIATT_AGGREGATION") ? getenv("VLLM_TRIATT_AGGREGATION") : getenv("TRIATT_AGGREGATION");
    if ((fe && *fe) || (ag && *ag)) c.fast_path = false;   /* then the environment decides */
    int rc = triatt_config_from_env(&c, err, errlen);
    if (rc < 0) return rc;
    int w = 0;
    for (int i = 0; i < *argc; i++) {
        const char *a = argv[i];
        if (strncmp(a, "--triatt-", 9) && strcmp(a, "--longctx-endpoint")) {
            argv[w++] = argv[i];
            continue;
        }
        if (!strcmp(a, "--triatt-log")) { c.compression_log = true; continue; }
        const char *v = i + 1 < *argc ? argv[i + 1] : NULL;
        if (!v) {
            if (err && errlen) snprintf(err, errlen, "%s needs a value", a);
            return LCX_EINVAL;
        }
        i++;
        int hy = c.version;
        if (!strcmp(a, "--triatt-budget")) { rc = flag_int(a, v, 1, 1 << 30, &c.budget, err, errlen); c.enabled = true; }
        else if (!strcmp(a, "--triatt-window")) rc = flag_int(a, v, 0, 1 << 24, &c.window, err, errlen);
        else if (!strcmp(a, "--triatt-prefix")) rc = flag_int(a, v, 0, 1 << 24, &c.prefix, err, errlen);
        else if (!strcmp(a, "--triatt-warmup")) rc = flag_int(a, v, 1, 1 << 24, &c.warmup, err, errlen);
        else if (!strcmp(a, "--triatt-segments")) rc = flag_int(a, v, 0, 4096, &c.n_segments, err, errlen);
        else if (!strcmp(a, "--triatt-divide")) rc = flag_int(a, v, 0, 1 << 24, &c.divide_length, err, errlen);
        else if (!strcmp(a, "--triatt-hybrid")) { rc = flag_int(a, v, 0, 2, &hy, err, errlen); c.version = (triatt_version)hy; }
        else if (!strcmp(a, "--triatt-seed")) {
            char *end;
            unsigned long long s = strtoull(v, &end, 10);
            if (!*v || *end || *v == '-') {
                if (err && errlen) snprintf(err, errlen, "%s: \"%s\" is not an unsigned integer", a, v);
                return LCX_EINVAL;
            }
            c.seed = s;
        } else if (!strcmp(a, "--triatt-mode")) {
            if (!strcmp(v, "trig")) c.mode = TRIATT_MODE_TRIG;
            else if (!strcmp(v, "random")) c.mode = TRIATT_MODE_RANDOM;
            else if (!strcmp(v, "recency")) c.mode = TRIATT_MODE_RECENCY;
            else {
                if (err && errlen) snprintf(err, errlen, "%s: \"%s\" must be trig, random or recency", a, v);
                return LCX_EINVAL;
            }
        } else if (!strcmp(a, "--triatt-direction")) {
            if (!strcmp(v, "keep_high")) c.direction = TRIATT_KEEP_HIGH;
            else if (!strcmp(v, "evict_high")) c.direction = TRIATT_EVICT_HIGH;
            else {
                if (err && errlen) snprintf(err, errlen, "%s: \"%s\" must be keep_high or evict_high", a, v);
                return LCX_EINVAL;
            }
        } else if (!strcmp(a, "--triatt-calib")) {
            if (strlen(v) >= sizeof c.calib_file) {
                if (err && errlen) snprintf(err, errlen, "%s: path longer than %zu bytes", a, sizeof c.calib_file - 1);
                return LCX_EINVAL;
            }
            strcpy(c.calib_file, v);
        } else if (!strcmp(a, "--longctx-endpoint")) {
            if (strlen(v) >= sizeof c.endpoint) {
                if (err && errlen) snprintf(err, errlen, "%s: URL longer than %zu bytes", a, sizeof c.endpoint - 1);
                return LCX_EINVAL;
            }
            strcpy(c.endpoint, v);
        } else {
            if (err && errlen) snprintf(err, errlen, "unknown flag %s (TriAttention flags:\n%s)", a, k_help);
            return LCX_EINVAL;
        }
        if (rc < 0) return rc;
    }
    rc = triatt_config_check(&c, err, errlen);
    if (rc < 0) return rc;
    if (w < *argc) argv[w] = NULL;
    *argc = w;
    *cfg = c;
    return 0;
}
