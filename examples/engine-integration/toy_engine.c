/* engine-integration: how an engine wires libtriatt into its KV cache, built against the
 * INSTALLED library (pkg-config triatt), not the source tree.
 *
 * The "engine" is a toy: 2 layers, 4 query heads over 2 KV heads, head_dim 32, a dense float
 * K cache [layer][kv][cell][dim] and one token id per cell. Each decode step it
 *   1. hands every layer's pre-RoPE query to the calibration (triatt_observe_queries,
 *      triatt_end_pass),
 *   2. writes the token's post-RoPE key into a free cell,
 *   3. asks for a round (triatt_maybe_evict): scoring + selection when the cache is over
 *      budget, the evicted cells come back and the cache is compacted (survivors keep their
 *      positions: the scorer works on positions, not on cell order),
 *   4. ships the evicted tokens' text to the rescue store (Tier 2, triatt_rescue_write_round)
 *      when LONGCTX_ENDPOINT names a running longctx-svc; at the end it asks for them back
 *      (Tier 3, triatt_rescue_rehydrate) with a question about an evicted word.
 * Without LONGCTX_ENDPOINT the rescue step runs the bridge's pure half instead
 * (triatt_rescue_spans + triatt_rescue_format: what would be sent).
 *
 * It checks what an engine relies on and exits 1 when any of it fails: rounds fire, the
 * cache stays within budget + divide_length after a round, the protected prefix and recent
 * window are never evicted, every evicted cell is a live one, and the rescue text of an
 * evicted word comes back. Usage: toy_engine [n_tokens]  (default 600). */
#include <longctx/triatt.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { N_LAYERS = 2, N_HEADS = 4, N_KV = 2, HEAD_DIM = 32 };
enum { BUDGET = 96, WINDOW = 16, PREFIX = 4, WARMUP = 32, DIVIDE = 16 };

#define FAIL(...) do { fprintf(stderr, "toy_engine: FAIL: " __VA_ARGS__); fputc('\n', stderr); return 1; } while (0)

typedef struct {
    int cap, n_cells;
    float *k;          /* [N_LAYERS][N_KV][cap][HEAD_DIM], post-RoPE */
    int32_t *pos;      /* [cap] token position of each cell */
} kv_cache;

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static float frand(void)   /* uniform in [-1, 1) (xorshift64*) */
{
    rng_state ^= rng_state >> 12; rng_state ^= rng_state << 25; rng_state ^= rng_state >> 27;
    return (float)((rng_state * 2685821657736338717ull) >> 40) / (float)(1u << 23) - 1.0f;
}

/* NEOX-style rotation (TRIATT_PAIR_HALF): pair f = (x[f], x[f + d/2]). */
static void rope(float *x, int32_t pos, double theta)
{
    for (int f = 0; f < HEAD_DIM / 2; f++) {
        double w = pow(theta, -2.0 * f / HEAD_DIM), a = pos * w;
        float c = (float)cos(a), s = (float)sin(a), x0 = x[f], x1 = x[f + HEAD_DIM / 2];
        x[f] = x0 * c - x1 * s;
        x[f + HEAD_DIM / 2] = x0 * s + x1 * c;
    }
}

static float *kcell(kv_cache *c, int l, int kv, int cell)
{
    return c->k + (((size_t)l * N_KV + kv) * c->cap + cell) * HEAD_DIM;
}

/* Removes the evicted cells, keeping the survivors' order and positions. */
static void compact(kv_cache *c, const int32_t *evicted, int n_ev)
{
    unsigned char *gone = calloc((size_t)c->cap, 1);
    for (int i = 0; i < n_ev; i++) gone[evicted[i]] = 1;
    int w = 0;
    for (int r = 0; r < c->n_cells; r++) {
        if (gone[r]) continue;
        if (w != r) {
            for (int l = 0; l < N_LAYERS; l++)
                for (int kv = 0; kv < N_KV; kv++)
                    memcpy(kcell(c, l, kv, w), kcell(c, l, kv, r), HEAD_DIM * sizeof(float));
            c->pos[w] = c->pos[r];
        }
        w++;
    }
    c->n_cells = w;
    free(gone);
}

/* The engine's detokenizer: token id t is the word "w<t>". */
static int detok(void *ud, const int32_t *tokens, int n, char *out, size_t cap)
{
    (void)ud;
    size_t len = 0;
    for (int i = 0; i < n; i++) {
        char word[24];
        int k = snprintf(word, sizeof word, "%sw%d", i ? " " : "", tokens[i]);
        if (len + (size_t)k < cap) memcpy(out + len, word, (size_t)k);
        len += (size_t)k;
    }
    if (len < cap) out[len] = '\0';
    else if (cap) out[cap - 1] = '\0';
    return (int)len;
}

int main(int argc, char **argv)
{
    int n_tokens = argc > 1 ? atoi(argv[1]) : 600;
    if (n_tokens < 2 * BUDGET) FAIL("n_tokens must be >= %d", 2 * BUDGET);
    const char *endpoint = getenv("LONGCTX_ENDPOINT");

    triatt_geometry g = {.n_layers = N_LAYERS, .n_heads = N_HEADS, .n_kv_heads = N_KV,
                         .head_dim = HEAD_DIM, .n_rot = HEAD_DIM, .pairing = TRIATT_PAIR_HALF,
                         .rope_theta = 10000.0, .scale_factor = 1.0};
    triatt_config cfg;
    triatt_config_default(&cfg);
    cfg.enabled = true;
    cfg.budget = BUDGET; cfg.window = WINDOW; cfg.prefix = PREFIX;
    cfg.warmup = WARMUP; cfg.divide_length = DIVIDE; cfg.version = TRIATT_V3;
    char err[256];
    if (triatt_config_check(&cfg, err, sizeof err) < 0) FAIL("config: %s", err);
    triatt_ctx *tc;
    int rc = triatt_init(&g, &cfg, &tc);
    if (rc < 0) FAIL("triatt_init: %s", lcx_strerror(rc));

    triatt_rescue *resc = NULL;
    if (endpoint && *endpoint) {
        triatt_rescue_config rcfg;
        triatt_rescue_config_default(&rcfg);
        rcfg.endpoint = endpoint;
        rcfg.session_id = "toy-engine";
        rcfg.detok = detok;
        rcfg.widen = 0;
        /* the toy decodes far faster than a real model, so a round comes every few
         * microseconds: room for all of them (a full queue drops rounds, never blocks) */
        rcfg.queue_cap = 256;
        if ((rc = triatt_rescue_init(&rcfg, &resc)) < 0) FAIL("triatt_rescue_init: %s", lcx_strerror(rc));
    }

    kv_cache c = {.cap = BUDGET + DIVIDE + 2};
    c.k = calloc((size_t)N_LAYERS * N_KV * c.cap * HEAD_DIM, sizeof(float));
    c.pos = calloc((size_t)c.cap, sizeof(int32_t));
    int32_t *tokens = calloc((size_t)n_tokens, sizeof(int32_t));   /* id of each position */
    int32_t *out = calloc((size_t)c.cap, sizeof(int32_t));
    int32_t *ev_pos = calloc((size_t)c.cap, sizeof(int32_t));
    float *ev_score = calloc((size_t)c.cap, sizeof(float));
    unsigned char *evicted = calloc((size_t)n_tokens, 1);
    float centre[N_HEADS * HEAD_DIM], q[N_HEADS * HEAD_DIM];
    for (int i = 0; i < N_HEADS * HEAD_DIM; i++) centre[i] = frand();
    if (!c.k || !c.pos || !tokens || !out || !ev_pos || !ev_score || !evicted) FAIL("out of memory");

    triatt_dense_keys dk = {.data = c.k, .n_kv_heads = N_KV, .n_cells_cap = c.cap, .head_dim = HEAD_DIM};
    triatt_keys keys = {0};
    triatt_keys_dense(&keys, &dk);

    int rounds = 0, n_evicted = 0, spans_formatted = 0, max_after = 0;
    for (int t = 0; t < n_tokens; t++) {
        tokens[t] = 1000 + t;
        /* 1. the forward pass: each layer's pre-RoPE queries (a shared centre + noise) */
        for (int l = 0; l < N_LAYERS; l++) {
            for (int i = 0; i < N_HEADS * HEAD_DIM; i++) q[i] = centre[i] + 0.5f * frand();
            if ((rc = triatt_observe_queries(tc, l, q, 1, 0)) < 0) FAIL("observe_queries: %s", lcx_strerror(rc));
        }
        if ((rc = triatt_end_pass(tc)) < 0) FAIL("end_pass: %s", lcx_strerror(rc));
        /* 2. the new token's key goes into the next free cell */
        if (c.n_cells == c.cap) FAIL("cache full at t=%d: eviction did not keep up", t);
        for (int l = 0; l < N_LAYERS; l++)
            for (int kv = 0; kv < N_KV; kv++) {
                float *k = kcell(&c, l, kv, c.n_cells);
                for (int d = 0; d < HEAD_DIM; d++) k[d] = frand();
                rope(k, t, g.rope_theta);
            }
        c.pos[c.n_cells++] = t;
        /* 3. the round */
        int n = triatt_maybe_evict(tc, &keys, c.pos, c.n_cells, out);
        if (n < 0) FAIL("maybe_evict: %s", lcx_strerror(n));
        if (n == 0) continue;
        const float *scores = triatt_last_scores(tc);
        for (int i = 0; i < n; i++) {
            if (out[i] < 0 || out[i] >= c.n_cells) FAIL("evicted cell %d is not live (%d cells)", out[i], c.n_cells);
            int32_t p = c.pos[out[i]];
            if (p < PREFIX) FAIL("position %d of the protected prefix was evicted", p);
            if (p > t - WINDOW) FAIL("position %d of the recent window (t=%d) was evicted", p, t);
            if (evicted[p]++) FAIL("position %d evicted twice", p);
            ev_pos[i] = p;
            ev_score[i] = scores ? scores[out[i]] : 0.0f;
        }
        compact(&c, out, n);
        rounds++;
        n_evicted += n;
        if (c.n_cells > max_after) max_after = c.n_cells;
        /* 4. the evicted text goes to the rescue store (or is only formatted) */
        if (resc) {
            if ((rc = triatt_rescue_write_round(resc, ev_pos, ev_score, n, tokens, t + 1, 0)) < 0)
                FAIL("rescue_write_round: %s", lcx_strerror(rc));
        } else {
            triatt_span spans[64];
            int ns = triatt_rescue_spans(ev_pos, n, t + 1, 0, spans, 64);
            if (ns <= 0) FAIL("rescue_spans gave %d spans for %d positions", ns, n);
            triatt_rescue_chunk ch[64];
            char *texts[64];
            for (int s = 0; s < ns; s++) {
                int len = detok(NULL, tokens + spans[s].a, spans[s].b - spans[s].a, NULL, 0);
                texts[s] = malloc((size_t)len + 1);
                if (!texts[s]) FAIL("out of memory");
                detok(NULL, tokens + spans[s].a, spans[s].b - spans[s].a, texts[s], (size_t)len + 1);
                ch[s] = (triatt_rescue_chunk){texts[s], spans[s].a, spans[s].b, 0};
            }
            int used = 0;
            char *txt = triatt_rescue_format(ch, ns, 8000, &used);
            if (!txt || used < 1 || !strstr(txt, texts[0])) FAIL("rescue_format lost the evicted text");
            spans_formatted += used;
            free(txt);
            for (int s = 0; s < ns; s++) free(texts[s]);
        }
    }
    triatt_counters ct;
    triatt_get_counters(tc, &ct);
    printf("toy_engine: %d tokens, %d rounds, %d cells evicted, %d cells live (max after a round %d), "
           "calibration passes %llu\n", n_tokens, rounds, n_evicted, c.n_cells, max_after,
           (unsigned long long)ct.calib_passes);
    if (rounds == 0 || ct.rounds != (uint64_t)rounds) FAIL("rounds: %d seen, %llu counted", rounds, (unsigned long long)ct.rounds);
    if (max_after > BUDGET + DIVIDE) FAIL("%d cells after a round, budget %d + divide %d", max_after, BUDGET, DIVIDE);
    if (n_evicted != n_tokens - c.n_cells) FAIL("cells lost: %d evicted, %d live of %d", n_evicted, c.n_cells, n_tokens);

    if (resc) {
        if ((rc = triatt_rescue_flush(resc, 10000)) < 0) FAIL("rescue_flush: %s", lcx_strerror(rc));
        int p = -1;   /* an evicted position to ask about */
        for (int i = PREFIX; i < n_tokens && p < 0; i++) if (evicted[i]) p = i;
        char question[64], word[24];
        snprintf(word, sizeof word, "w%d", tokens[p]);
        snprintf(question, sizeof question, "question: what came with %s?", word);
        char *text = NULL;
        int used = triatt_rescue_rehydrate(resc, question, &text);
        triatt_rescue_stats st;
        triatt_rescue_get_stats(resc, &st);
        printf("toy_engine: rescue: %llu rounds sent, %llu spans, rehydrate %d chunks\n",
               (unsigned long long)st.rounds_sent, (unsigned long long)st.spans_sent, used);
        if (st.rounds_sent != (uint64_t)rounds || st.rounds_failed || st.rounds_dropped)
            FAIL("rescue rounds: %llu sent, %llu failed, %llu dropped of %d", (unsigned long long)st.rounds_sent,
                 (unsigned long long)st.rounds_failed, (unsigned long long)st.rounds_dropped, rounds);
        if (used < 1 || !text || !strstr(text, word)) FAIL("rehydrate did not bring back %s (%d chunks)", word, used);
        free(text);
        triatt_rescue_free(resc);
    } else {
        printf("toy_engine: rescue (offline): %d chunks formatted\n", spans_formatted);
    }
    triatt_free(tc);
    free(c.k); free(c.pos); free(tokens); free(out); free(ev_pos); free(ev_score); free(evicted);
    puts("toy_engine: ok");
    return 0;
}
