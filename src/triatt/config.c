/* Configuration: defaults (SPEC §5 production values) and the environment knobs.
 * Each VLLM_TRIATT_<X> knob may also be given as TRIATT_<X> (the VLLM_ name wins when both
 * are set), so one environment drives vLLM-style and llama.cpp-style deployments alike.
 * An invalid value is an error that names the variable — never silently ignored, because a
 * typo in a budget would otherwise run the model without eviction or with a wrong cache. */
#include "triatt/internal.h"
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

void triatt_config_default(triatt_config *c)
{
    memset(c, 0, sizeof *c);
    c->enabled = false;
    c->budget = 0;
    c->window = 128;
    c->prefix = 32;
    c->warmup = 256;
    c->version = TRIATT_V3;
    c->n_segments = 8;
    c->adaptive = false;
    c->ema_alpha = 0.1;
    c->compression_log = false;
    c->divide_length = 128;
    c->mode = TRIATT_MODE_TRIG;
    c->direction = TRIATT_KEEP_HIGH;   /* see docs/triatt.md "Direction" for the evidence */
    c->aggregation = TRIATT_AGG_BLOCKMEAN;
    c->fast_path = false;
    c->n_threads = 1;
    c->seed = 0x7269617474ull;
}

static int fail(char *err, size_t n, const char *fmt, ...)
{
    if (err && n) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, n, fmt, ap);
        va_end(ap);
    }
    return LCX_EINVAL;
}

int triatt_config_check(const triatt_config *c, char *err, size_t n)
{
    if (!c) return fail(err, n, "triatt: no config");
    if (c->enabled && c->budget <= 0) return fail(err, n, "triatt: VLLM_TRIATT_BUDGET is required (> 0) when enabled");
    if (c->budget < 0) return fail(err, n, "triatt: budget must be >= 0");
    if (c->window < 0 || c->window > (1 << 24)) return fail(err, n, "triatt: window must be in [0, 16777216]");
    if (c->prefix < 0 || c->prefix > (1 << 24)) return fail(err, n, "triatt: prefix must be in [0, 16777216]");
    if (c->warmup < 1 || c->warmup > (1 << 24)) return fail(err, n, "triatt: warmup must be in [1, 16777216]");
    if ((unsigned)c->version > TRIATT_V3) return fail(err, n, "triatt: hybrid must be 0 (V1), 1 (V2) or 2 (V3)");
    if (c->n_segments < 0 || c->n_segments > 4096) return fail(err, n, "triatt: segments must be in [0, 4096]");
    if (!(c->ema_alpha > 0 && c->ema_alpha <= 1)) return fail(err, n, "triatt: ema_alpha must be in (0, 1]");
    if (c->divide_length < 0 || c->divide_length > (1 << 24)) return fail(err, n, "triatt: divide_length must be in [0, 16777216]");
    if ((unsigned)c->mode > TRIATT_MODE_RECENCY) return fail(err, n, "triatt: mode must be 0 (trig), 1 (random) or 2 (recency)");
    if ((unsigned)c->direction > TRIATT_KEEP_HIGH) return fail(err, n, "triatt: bad direction");
    if ((unsigned)c->aggregation > TRIATT_AGG_REFERENCE) return fail(err, n, "triatt: bad aggregation");
    if (c->n_threads < 1 || c->n_threads > 64) return fail(err, n, "triatt: threads must be in [1, 64]");
    if (c->fast_path && c->aggregation != TRIATT_AGG_BLOCKMEAN)
        return fail(err, n, "triatt: the fast path needs blockmean aggregation");
    if (c->endpoint[0] && strncmp(c->endpoint, "http://", 7) && strncmp(c->endpoint, "https://", 8))
        return fail(err, n, "triatt: LONGCTX_ENDPOINT must start with http:// or https://");
    return LCX_OK;
}

typedef struct {
    const char *(*get)(void *, const char *);
    void *ud;
    char *err;
    size_t n;
} envctx;

/* VLLM_TRIATT_<x> first, then TRIATT_<x>; *name gets the variable actually used. */
static const char *knob(envctx *e, const char *x, char *name, size_t cap)
{
    snprintf(name, cap, "VLLM_TRIATT_%s", x);
    const char *v = e->get(e->ud, name);
    if (v && *v) return v;
    snprintf(name, cap, "TRIATT_%s", x);
    v = e->get(e->ud, name);
    return v && *v ? v : NULL;
}

static int parse_long(const char *v, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    while (*end == ' ' || *end == '\t') end++;
    if (errno || end == v || *end || x < lo || x > hi) return -1;
    *out = x;
    return 0;
}

static int parse_bool(const char *v, bool *out)
{
    static const char *t[] = {"1", "true", "on", "yes"}, *f[] = {"0", "false", "off", "no"};
    for (int i = 0; i < 4; i++) {
        if (!strcasecmp(v, t[i])) { *out = true; return 0; }
        if (!strcasecmp(v, f[i])) { *out = false; return 0; }
    }
    return -1;
}

static int int_knob(envctx *e, const char *x, long lo, long hi, int *dst)
{
    char name[64];
    const char *v = knob(e, x, name, sizeof name);
    if (!v) return 0;
    long val;
    if (parse_long(v, lo, hi, &val)) return fail(e->err, e->n, "triatt: %s=\"%s\" is not an integer in [%ld, %ld]", name, v, lo, hi);
    *dst = (int)val;
    return 0;
}

static int bool_knob(envctx *e, const char *x, bool *dst)
{
    char name[64];
    const char *v = knob(e, x, name, sizeof name);
    if (!v) return 0;
    if (parse_bool(v, dst)) return fail(e->err, e->n, "triatt: %s=\"%s\" is not a boolean (0/1/true/false)", name, v);
    return 0;
}

static const char *real_getenv(void *ud, const char *name)
{
    (void)ud;
    return getenv(name);
}

int triatt_config_from_getenv(triatt_config *cfg, const char *(*getenv_fn)(void *, const char *), void *ud,
                            char *err, size_t err_len)
{
    if (!cfg) return LCX_EINVAL;
    envctx e = {getenv_fn ? getenv_fn : real_getenv, ud, err, err_len};
    triatt_config c = *cfg;
    char name[64];
    const char *v;
    int hybrid = c.version;
    if (bool_knob(&e, "ENABLED", &c.enabled) || int_knob(&e, "BUDGET", 1, 1 << 30, &c.budget) ||
        int_knob(&e, "WINDOW", 0, 1 << 24, &c.window) || int_knob(&e, "PREFIX", 0, 1 << 24, &c.prefix) ||
        int_knob(&e, "WARMUP", 1, 1 << 24, &c.warmup) || int_knob(&e, "HYBRID", 0, 2, &hybrid) ||
        int_knob(&e, "SEGMENTS", 0, 4096, &c.n_segments) || bool_knob(&e, "ADAPTIVE", &c.adaptive) ||
        bool_knob(&e, "COMPRESSION_LOG", &c.compression_log) ||
        int_knob(&e, "DIVIDE", 0, 1 << 24, &c.divide_length) || int_knob(&e, "THREADS", 1, 64, &c.n_threads) ||
        bool_knob(&e, "FAST", &c.fast_path))
        return LCX_EINVAL;
    c.version = (triatt_version)hybrid;
    if ((v = knob(&e, "MODE", name, sizeof name))) {
        long m;
        if (!strcasecmp(v, "trig")) c.mode = TRIATT_MODE_TRIG;
        else if (!strcasecmp(v, "random")) c.mode = TRIATT_MODE_RANDOM;
        else if (!strcasecmp(v, "recency")) c.mode = TRIATT_MODE_RECENCY;
        else if (!parse_long(v, 0, 2, &m)) c.mode = (triatt_mode)m;
        else return fail(err, err_len, "triatt: %s=\"%s\" must be 0 (trig), 1 (random) or 2 (recency)", name, v);
    }
    if ((v = knob(&e, "DIRECTION", name, sizeof name))) {
        if (!strcasecmp(v, "keep_high")) c.direction = TRIATT_KEEP_HIGH;
        else if (!strcasecmp(v, "evict_high")) c.direction = TRIATT_EVICT_HIGH;
        else return fail(err, err_len, "triatt: %s=\"%s\" must be keep_high or evict_high", name, v);
    }
    if ((v = knob(&e, "AGGREGATION", name, sizeof name))) {
        if (!strcasecmp(v, "blockmean")) c.aggregation = TRIATT_AGG_BLOCKMEAN;
        else if (!strcasecmp(v, "reference")) c.aggregation = TRIATT_AGG_REFERENCE;
        else return fail(err, err_len, "triatt: %s=\"%s\" must be blockmean or reference", name, v);
    }
    if ((v = knob(&e, "EMA_ALPHA", name, sizeof name))) {
        char *end;
        errno = 0;
        double a = strtod(v, &end);
        if (errno || end == v || *end || !(a > 0 && a <= 1))
            return fail(err, err_len, "triatt: %s=\"%s\" must be a number in (0, 1]", name, v);
        c.ema_alpha = a;
    }
    if ((v = knob(&e, "SEED", name, sizeof name))) {
        char *end;
        errno = 0;
        unsigned long long s = strtoull(v, &end, 10);
        if (errno || end == v || *end || *v == '-') return fail(err, err_len, "triatt: %s=\"%s\" is not an unsigned integer", name, v);
        c.seed = s;
    }
    if ((v = knob(&e, "CALIB_FILE", name, sizeof name))) {
        if (strlen(v) >= sizeof c.calib_file) return fail(err, err_len, "triatt: %s is longer than %zu bytes", name, sizeof c.calib_file - 1);
        strcpy(c.calib_file, v);
    }
    v = e.get(e.ud, "LONGCTX_ENDPOINT");
    if (v && *v) {
        if (strlen(v) >= sizeof c.endpoint) return fail(err, err_len, "triatt: LONGCTX_ENDPOINT is longer than %zu bytes", sizeof c.endpoint - 1);
        strcpy(c.endpoint, v);
    }
    int rc = triatt_config_check(&c, err, err_len);
    if (rc < 0) return rc;
    *cfg = c;
    return LCX_OK;
}

int triatt_config_from_env(triatt_config *cfg, char *err, size_t err_len)
{
    return triatt_config_from_getenv(cfg, NULL, NULL, err, err_len);
}
