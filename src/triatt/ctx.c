/* The per-round driver: calibration passes in, trigger → score → select → log out. */
#include "triatt/internal.h"
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct triatt_ctx {
    triatt_geometry g;
    unsigned char *attn;          /* own copy of the mask */
    triatt_config cfg;
    triatt_calib *cal;
    triatt_scorer *sc;
    float *scores;                /* (scores_cap) */
    int scores_cap;
    triatt_counters ctr;
    triatt_log_fn log;
    void *log_ud;
    uint64_t rng;
    bool announced;
};

static void logf_(triatt_ctx *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void logf_(triatt_ctx *t, const char *fmt, ...)
{
    if (!t->log) return;
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    t->log(t->log_ud, line);
}

int triatt_init(const triatt_geometry *g, const triatt_config *cfg, triatt_ctx **out)
{
    if (!out) return LCX_EINVAL;
    *out = NULL;
    if (triatt_geometry_check(g) < 0 || !cfg || triatt_config_check(cfg, NULL, 0) < 0) return LCX_EINVAL;
    triatt_ctx *t = calloc(1, sizeof *t);
    if (!t) return LCX_ENOMEM;
    t->g = *g;
    t->cfg = *cfg;
    t->rng = cfg->seed;
    if (g->attn_layers) {
        t->attn = malloc(g->n_layers);
        if (!t->attn) { free(t); return LCX_ENOMEM; }
        memcpy(t->attn, g->attn_layers, g->n_layers);
        t->g.attn_layers = t->attn;
    }
    triatt_scorer_opts so = {.aggregation = cfg->aggregation, .terms = TRIATT_TERMS_MLR,
                             .n_threads = cfg->n_threads, .eps = 1e-8};
    int rc = triatt_calib_init(&t->g, cfg->warmup, cfg->adaptive ? cfg->ema_alpha : 0, &t->cal);
    if (rc == 0) rc = triatt_scorer_init(&t->g, &so, &t->sc);
    if (rc < 0) { triatt_free(t); return rc; }
    if (cfg->calib_file[0]) {
        rc = triatt_calib_load(t->cal, cfg->calib_file);
        if (rc < 0) { triatt_free(t); return rc; }
    }
    *out = t;
    return LCX_OK;
}

void triatt_free(triatt_ctx *t)
{
    if (!t) return;
    triatt_calib_free(t->cal);
    triatt_scorer_free(t->sc);
    free(t->scores);
    free(t->attn);
    free(t);
}

void triatt_set_log(triatt_ctx *t, triatt_log_fn fn, void *ud)
{
    if (!t) return;
    t->log = fn;
    t->log_ud = ud;
}

int triatt_observe_queries(triatt_ctx *t, int layer, const float *q, int n_tokens, size_t stride)
{
    if (!t) return LCX_EINVAL;
    if (!t->cfg.enabled) return LCX_OK;
    if (triatt_calib_ready(t->cal) && !t->cfg.adaptive) return LCX_OK;  /* frozen: skip the work */
    return triatt_calib_add(t->cal, layer, q, n_tokens, stride);
}

int triatt_end_pass(triatt_ctx *t)
{
    if (!t) return LCX_EINVAL;
    if (!t->cfg.enabled) return 0;
    bool was = triatt_calib_ready(t->cal);
    int rc = triatt_calib_end_pass(t->cal);
    if (rc < 0) return rc;
    if (triatt__calib_last_ignored(t->cal)) t->ctr.calib_passes_ignored++;
    else if (rc == 1 || !was) t->ctr.calib_passes++;
    if (!was && triatt_calib_ready(t->cal))
        logf_(t, "triatt: calibration finalised after %lld tokens", (long long)triatt_calib_tokens(t->cal));
    return rc;
}

int triatt_cells_written(triatt_ctx *t, const triatt_keys *keys, const int32_t *positions, int cell0, int n)
{
    if (!t || !keys || !positions || cell0 < 0 || n < 0) return LCX_EINVAL;
    if (!t->cfg.enabled || !t->cfg.fast_path || !triatt_calib_ready(t->cal)) return LCX_OK;
    int rc = triatt_fast_reserve(t->sc, cell0 + n);
    return rc < 0 ? rc : triatt_fast_set_cells(t->sc, t->cal, keys, positions, cell0, n);
}

static const char *mode_name(const triatt_ctx *t, char *buf, size_t n)
{
    static const char *v[3] = {"v1", "v2", "v3"};
    snprintf(buf, n, "%s%s", v[t->cfg.version],
             t->cfg.mode == TRIATT_MODE_RANDOM ? ",random" : t->cfg.mode == TRIATT_MODE_RECENCY ? ",recency" : "");
    return buf;
}

int triatt_maybe_evict(triatt_ctx *t, const triatt_keys *keys, const int32_t *positions, int n_cells,
                       int32_t *out_cells)
{
    if (!t || n_cells < 0 || (n_cells && (!positions || !out_cells))) return LCX_EINVAL;
    const triatt_config *c = &t->cfg;
    if (!c->enabled || !triatt_should_evict(n_cells, c->budget, c->window, c->divide_length)) return 0;
    /* no eviction before warmup: the centres would be empty (the reference engines evicted
     * with zero centres on the layers a mid-pass finalisation had not reached) */
    if (!triatt_calib_ready(t->cal)) return 0;
    double t0 = lcx__now_ms();
    if (n_cells > t->scores_cap) {
        float *s = realloc(t->scores, (size_t)n_cells * sizeof(float));
        if (!s) return LCX_ENOMEM;
        t->scores = s;
        t->scores_cap = n_cells;
    }
    int32_t max_pos = 0;
    for (int i = 0; i < n_cells; i++) max_pos = LCX_MAX(max_pos, positions[i]);
    int32_t win_thr = max_pos - c->window + 1;
    int rc = LCX_OK;
    uint64_t scored = 0;
    for (int i = 0; i < n_cells; i++) scored += positions[i] < win_thr;
    if (c->mode == TRIATT_MODE_TRIG) {
        if (!keys || (!keys->get && !keys->get16 && !keys->get_q8)) return LCX_EINVAL;
        if (c->fast_path) {
            /* rows never computed, computed before a (re)calibration, or for a cell the engine
             * has since moved are recomputed here; the rest cost O(fc) each */
            rc = triatt_fast_reserve(t->sc, n_cells);
            if (rc >= 0) rc = triatt_fast_refresh(t->sc, t->cal, keys, positions, n_cells);
            if (rc >= 0) rc = triatt_fast_score(t->sc, t->cal, positions, n_cells, max_pos, win_thr, t->scores);
        } else {
            rc = triatt_score(t->sc, t->cal, keys, positions, n_cells, max_pos, win_thr, t->scores);
        }
        if (rc < 0) return rc;
    } else if (c->mode == TRIATT_MODE_RANDOM) {
        for (int i = 0; i < n_cells; i++) t->scores[i] = (float)triatt__rng_unit(&t->rng);
    } else {
        /* recency control: the oldest eligible cells go first, whatever the direction */
        for (int i = 0; i < n_cells; i++)
            t->scores[i] = c->direction == TRIATT_EVICT_HIGH ? -(float)positions[i] : (float)positions[i];
    }
    triatt_select_params sp = {.budget = c->budget, .window = c->window, .divide_length = c->divide_length,
                               .prefix_protect = c->prefix, .n_segments = c->n_segments,
                               .version = c->version, .direction = c->direction};
    int n_to_evict = n_cells - c->budget;
    int n = triatt_select(&sp, positions, t->scores, n_cells, n_to_evict, out_cells);
    if (n < 0) return n;
    t->ctr.rounds++;
    t->ctr.cells_scored += scored;
    t->ctr.cells_evicted += (uint64_t)n;
    t->ctr.last_round_ms = lcx__now_ms() - t0;
    char mn[32];
    logf_(t, "evict: evicted %d/%d tokens (budget=%d, used=%d, max_pos=%d, mode=%s)", n, n_to_evict,
          c->budget, n_cells, max_pos, mode_name(t, mn, sizeof mn));
    if (c->compression_log)
        logf_(t, "evict: stats rounds=%llu cells_scored=%llu cells_evicted=%llu round_ms=%.3f",
              (unsigned long long)t->ctr.rounds, (unsigned long long)t->ctr.cells_scored,
              (unsigned long long)t->ctr.cells_evicted, t->ctr.last_round_ms);
    return n;
}

void triatt_get_counters(const triatt_ctx *t, triatt_counters *out)
{
    if (t && out) *out = t->ctr;
}

const float *triatt_last_scores(const triatt_ctx *t) { return t && t->ctr.rounds ? t->scores : NULL; }

triatt_calib *triatt_ctx_calib(triatt_ctx *t) { return t ? t->cal : NULL; }
const triatt_config *triatt_ctx_config(const triatt_ctx *t) { return t ? &t->cfg : NULL; }
