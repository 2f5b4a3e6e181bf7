/* Context: KV cache with per-cell positions, ubatched forward pass, threading.
 *
 * Arithmetic follows llama.cpp's CPU graph for these architectures so logits match its
 * reference outputs: RMSNorm sums squares in double; RoPE angles come from the same
 * iterated theta *= base^(-2/n_rot) recurrence (ggml_rope_cache_init); softmax subtracts the
 * max and sums in double; activations are converted to each weight's vec_dot type before a
 * matmul (quant.h). The KV cache is F32.
 *
 * Threading: each parallel section is one eng__pool_run. Matmuls split output rows on a
 * guided schedule (several matrices that share an input run in one section: q/k/v,
 * gate/up); attention splits (token, KV head) pairs; the per-token stages between matmuls
 * (residual + norm, bias/RoPE/KV store) split token blocks. Nothing is allocated per token: all scratch is sized at init by
 * n_ubatch and n_ctx (only all-logits output may grow its buffer, once per size). */
#include "engine/ctx.h"

#include <immintrin.h>
#include "util/simd.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

void eng_ctx_set_q_hook(eng_ctx *c, eng_q_hook fn, void *ud)
{
    c->q_hook = fn;
    c->q_hook_ud = ud;
}

eng_ctx_params eng_ctx_default_params(void)
{
    eng_ctx_params p = {0, 512, 1};
    return p;
}

/* The KV cache is streamed by attention at every token and by the TriAttention scorer at
 * every round: a big one goes in 2 MiB pages (no TLB walk and no hardware-prefetch stop
 * per 4 KiB; the scorer's full path ran 8–20% faster from huge pages in bench_triatt).
 * Small caches (tests, tiny models) stay in malloc: free() releases either. */
static float *kv_alloc(size_t n)
{
    size_t bytes = n * sizeof(float);
    return bytes >= LCX_HUGE_MIN ? lcx__alloc_huge(bytes) : malloc(bytes);
}

void eng_ctx_free(eng_ctx *c)
{
    if (!c) return;
    eng__v3_free(c);
    eng__pool_free(c->pool);
    free(c->kc); free(c->vc); free(c->cell_pos); free(c->cell_tok);
    free(c->x); free(c->xn); free(c->q); free(c->k); free(c->v); free(c->att);
    free(c->gate); free(c->up); free(c->act[0]); free(c->act[1]); free(c->mm_ws);
    free(c->scores); free(c->vis); free(c->att_tmp); free(c->rope_cs); free(c->ub_pos); free(c->ub_cell);
    free(c->logits);
    free(c);
}

int eng_ctx_n_threads(const eng_ctx *c) { return c->nth; }

static size_t max_act_row(const eng_model *m, int64_t n)
{
    /* bytes of an activation row of n elements in the largest vec-dot format we may need */
    size_t b = n * sizeof(float);
    if (n % ENG_QK_K == 0) b = LCX_MAX(b, eng__row_bytes(ENG_T_Q8_K, n));
    (void)m;
    return b;
}

int eng_ctx_init(const eng_model *m, const eng_ctx_params *p, eng_ctx **out)
{
    *out = NULL;
    eng_ctx_params d = eng_ctx_default_params();
    if (p) d = *p;
    const eng_model_info *I = &m->info;
    if (d.n_ctx <= 0) d.n_ctx = LCX_MIN(I->n_ctx_train, 4096);
    if (d.n_ubatch <= 0) d.n_ubatch = 512;
    if (d.n_threads <= 0) d.n_threads = 1;
    if (d.n_ctx > (1 << 24) || d.n_ubatch > 8192 || d.n_threads > MAX_TH) return LCX_EINVAL;
    eng_ctx *c = calloc(1, sizeof *c);
    if (!c) return LCX_ENOMEM;
    c->m = m;
    c->n_ctx = d.n_ctx;
    c->n_ub = d.n_ubatch;
    c->nth = d.n_threads;
    c->max_pos = -1;
    const size_t kvd = (size_t)I->n_head_kv * I->head_dim, qd = (size_t)I->n_head * I->head_dim;
    const size_t ub = (size_t)c->n_ub;
    size_t kvn = (size_t)I->n_layer * c->n_ctx * kvd;
    c->kc = kv_alloc(kvn);
    c->vc = kv_alloc(kvn);
    c->cell_pos = malloc((size_t)c->n_ctx * sizeof(int32_t));
    c->cell_tok = malloc((size_t)c->n_ctx * sizeof(int32_t));
    c->x = malloc(ub * I->n_embd * sizeof(float));
    c->xn = malloc(ub * LCX_MAX((size_t)I->n_embd, qd) * sizeof(float));
    c->q = malloc(ub * qd * sizeof(float));
    c->k = malloc(ub * kvd * sizeof(float));
    c->v = malloc(ub * kvd * sizeof(float));
    c->att = malloc(ub * qd * sizeof(float));
    c->gate = malloc(ub * I->n_ff * sizeof(float));
    c->up = malloc(ub * I->n_ff * sizeof(float));
    size_t ar = LCX_MAX(max_act_row(m, I->n_embd), LCX_MAX(max_act_row(m, I->n_ff), max_act_row(m, qd)));
    c->act_cap = ar * ub;
    c->act[0] = malloc(c->act_cap);
    c->act[1] = malloc(c->act_cap);
    /* only batches (n_ubatch > 1) use it: the weight-unpack buffer of the prompt kernels */
    if (c->n_ub > 1) c->mm_ws = malloc((size_t)c->nth * ENG_MATMUL_WS_BYTES);
    /* query tile: enough tokens that ~16 query heads share each K/V row load (a GQA group
     * alone is 2 for small models: attention streamed K and V from memory per token) */
    const int gqa = I->n_head / I->n_head_kv;
    c->att_qt = LCX_MAX(1, LCX_MIN(8, 16 / gqa));
    c->scores = malloc((size_t)c->nth * c->att_qt * gqa * c->n_ctx * sizeof(float));
    c->vis = malloc((size_t)c->nth * 2 * c->n_ctx * sizeof(int32_t));
    c->att_tmp = malloc((size_t)c->nth * c->att_qt * gqa * I->head_dim * sizeof(float));
    c->rope_cs = malloc(ub * I->n_rot * sizeof(float));
    c->ub_pos = malloc(ub * sizeof(int32_t));
    c->ub_cell = malloc(ub * sizeof(int32_t));
    c->logits_cap = 1;
    c->logits = malloc((size_t)I->n_vocab * sizeof(float));
    if (!c->kc || !c->vc || !c->cell_pos || !c->cell_tok || !c->x || !c->xn || !c->q || !c->k || !c->v || !c->att ||
        !c->gate || !c->up || !c->act[0] || !c->act[1] || (c->n_ub > 1 && !c->mm_ws) || !c->scores || !c->vis || !c->att_tmp || !c->rope_cs || !c->ub_pos ||
        !c->ub_cell || !c->logits) {
        eng_ctx_free(c);
        return LCX_ENOMEM;
    }
    for (int i = 0; i < c->n_ctx; i++) c->cell_pos[i] = c->cell_tok[i] = -1;
    int rc = eng__pool_init(c->nth, &c->pool);
    if (rc) { eng_ctx_free(c); return rc; }
    *out = c;
    return 0;
}

/* ---------------------------------------------------------------- small kernels */

/* RMSNorm like ggml_rms_norm + mul: sum of squares in double. */
static void rmsnorm(float *y, const float *x, const float *w, int n, float eps)
{
    double s = 0;
    for (int i = 0; i < n; i++) s += (double)(x[i] * x[i]);
    const float scale = 1.0f / sqrtf((float)(s / n) + eps);
    for (int i = 0; i < n; i++) y[i] = (x[i] * scale) * w[i];
}

/* hot: q.k over head_dim */
static inline float dot_f32(const float *a, const float *b, int n)
{
    int i = 0;
    float s = 0;
    if (n >= 8) {
        __m256 acc = _mm256_setzero_ps();
        for (; i + 8 <= n; i += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc);
        s = lcx_hsum8(acc);
    }
    for (; i < n; i++) s += a[i] * b[i];
    return s;
}

/* hot: y += a*x */
static inline void axpy_f32(float *y, float a, const float *x, int n)
{
    int i = 0;
    __m256 va = _mm256_set1_ps(a);
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
    for (; i < n; i++) y[i] += a * x[i];
}

/* Sums of 8 vectors at once: out[i] = hsum(v[i]) (one hadd tree instead of 8 reductions). */
static inline __m256 hsum8x8(const __m256 v[8])
{
    __m256 t0 = _mm256_hadd_ps(v[0], v[1]), t1 = _mm256_hadd_ps(v[2], v[3]);
    __m256 t2 = _mm256_hadd_ps(v[4], v[5]), t3 = _mm256_hadd_ps(v[6], v[7]);
    t0 = _mm256_hadd_ps(t0, t1);
    t2 = _mm256_hadd_ps(t2, t3);
    return _mm256_add_ps(_mm256_permute2f128_ps(t0, t2, 0x20), _mm256_permute2f128_ps(t0, t2, 0x31));
}

/* hot: scores of one query against 8 key rows (hd multiple of 8). */
static inline __m256 dot8_rows(const float *q, const float *const k[8], int hd)
{
    __m256 acc[8];
#pragma GCC unroll 8
    for (int r = 0; r < 8; r++) acc[r] = _mm256_setzero_ps();
    for (int i = 0; i < hd; i += 8) {
        const __m256 qv = _mm256_loadu_ps(q + i);
#pragma GCC unroll 8
        for (int r = 0; r < 8; r++) acc[r] = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k[r] + i), acc[r]);
    }
    return hsum8x8(acc);
}

/* hot: weighted sum of V rows for G query heads of one GQA group at once:
 * o[g*hd + d] = sum_j w[g*ldw + j] * V row vis[j] [d], in slices of S vectors (8*S floats).
 * Why grouped: done head by head, the group's V rows were streamed from L2 once per head (7x
 * for Qwen2.5's 14/2 heads, ~40% of attention time in pp512); here each V slice is loaded once
 * and feeds G*S independent accumulator chains (S is chosen so G*S ~ 8 hides the FMA latency).
 * Each output element is summed in j order with one FMA per term — the same arithmetic for
 * every (G, S), so the result never depends on the grouping. */
#define DEF_WSUMG(G, S)                                                                         \
    static void wsumg_##G##_##S(float *o, const float *w, size_t ldw, const int32_t *vis, int nvis, \
                                const float *V, size_t kvd, int hd, bool acc_in)                \
    {                                                                                           \
        for (int sl = 0; sl < hd; sl += 8 * S) {                                                \
            __m256 acc[G][S];                                                                   \
            _Pragma("GCC unroll 8")                                                             \
            for (int g = 0; g < G; g++)                                                         \
                _Pragma("GCC unroll 8")                                                         \
                for (int u = 0; u < S; u++)                                                     \
                    acc[g][u] = acc_in ? _mm256_loadu_ps(o + (size_t)g * hd + sl + 8 * u) : _mm256_setzero_ps(); \
            for (int j = 0; j < nvis; j++) {                                                    \
                const float *vr = V + (size_t)vis[j] * kvd + sl;                                \
                __m256 v[S];                                                                    \
                _Pragma("GCC unroll 8")                                                         \
                for (int u = 0; u < S; u++) v[u] = _mm256_loadu_ps(vr + 8 * u);                 \
                _Pragma("GCC unroll 8")                                                         \
                for (int g = 0; g < G; g++) {                                                   \
                    const __m256 wg = _mm256_broadcast_ss(w + g * ldw + j);                     \
                    _Pragma("GCC unroll 8")                                                     \
                    for (int u = 0; u < S; u++) acc[g][u] = _mm256_fmadd_ps(wg, v[u], acc[g][u]); \
                }                                                                               \
            }                                                                                   \
            _Pragma("GCC unroll 8")                                                             \
            for (int g = 0; g < G; g++)                                                         \
                _Pragma("GCC unroll 8")                                                         \
                for (int u = 0; u < S; u++) _mm256_storeu_ps(o + (size_t)g * hd + sl + 8 * u, acc[g][u]); \
        }                                                                                       \
    }
DEF_WSUMG(1, 8) DEF_WSUMG(1, 4) DEF_WSUMG(1, 2) DEF_WSUMG(1, 1)
DEF_WSUMG(2, 4) DEF_WSUMG(2, 2) DEF_WSUMG(2, 1)
DEF_WSUMG(3, 2) DEF_WSUMG(3, 1)
DEF_WSUMG(4, 2) DEF_WSUMG(4, 1)
DEF_WSUMG(5, 1) DEF_WSUMG(6, 1) DEF_WSUMG(7, 1) DEF_WSUMG(8, 1)
typedef void (*wsumg_fn)(float *, const float *, size_t, const int32_t *, int, const float *, size_t, int, bool);
/* [G][log2 S] */
static const wsumg_fn wsumg_tab[9][4] = {
    {NULL, NULL, NULL, NULL},
    {wsumg_1_1, wsumg_1_2, wsumg_1_4, wsumg_1_8},
    {wsumg_2_1, wsumg_2_2, wsumg_2_4, NULL},
    {wsumg_3_1, wsumg_3_2, NULL, NULL},
    {wsumg_4_1, wsumg_4_2, NULL, NULL},
    {wsumg_5_1, NULL, NULL, NULL},
    {wsumg_6_1, NULL, NULL, NULL},
    {wsumg_7_1, NULL, NULL, NULL},
    {wsumg_8_1, NULL, NULL, NULL},
};

/* o (gqa heads of hd) = w (gqa rows, stride ldw) . V rows vis[0..nvis) (at column offset
 * already applied to V); acc_in: add to what o holds (a later block of the same rows).
 * Heads go in groups of at most 8 of near-equal size (7 -> 7, 12 -> 6+6); hd must be a
 * multiple of 8. */
static void wsum_group(float *o, const float *w, size_t ldw, int gqa, const int32_t *vis, int nvis, const float *V,
                       size_t kvd, int hd, bool acc_in)
{
    const int ng = (gqa + 7) / 8;
    for (int gi = 0, g0 = 0; gi < ng; gi++) {
        const int gn = (gqa - g0) / (ng - gi);
        int ls = gn == 1 ? 3 : gn == 2 ? 2 : gn <= 4 ? 1 : 0;      /* S = 8/G, a power of two */
        while ((hd / 8) % (1 << ls)) ls--;                          /* S must divide hd/8 */
        wsumg_tab[gn][ls](o + (size_t)g0 * hd, w + (size_t)g0 * ldw, ldw, vis, nvis, V, kvd, hd, acc_in);
        g0 += gn;
    }
}

/* ggml_rope_cache_init with ext_factor 0, attn_factor 1: angles for pairs i = 0..n_rot/2. */
static void rope_cache(float *cs, int32_t pos, int n_rot, float base, float freq_scale, const float *ff)
{
    const float theta_scale = powf(base, -2.0f / n_rot);
    float theta = (float)pos;
    for (int i0 = 0; i0 < n_rot; i0 += 2) {
        const float f = ff ? ff[i0 / 2] : 1.0f;
        const float th = freq_scale * (theta / f);
        cs[i0] = cosf(th);
        cs[i0 + 1] = sinf(th);
        theta *= theta_scale;
    }
}

static void rope_apply(float *x, const float *cs, int n_rot, eng_rope_type t)
{
    if (t == ENG_ROPE_NEOX) {
        const int h = n_rot / 2;
        for (int i = 0; i < h; i++) {
            const float c = cs[2 * i], s = cs[2 * i + 1];
            const float x0 = x[i], x1 = x[i + h];
            x[i] = x0 * c - x1 * s;
            x[i + h] = x0 * s + x1 * c;
        }
    } else {
        for (int i0 = 0; i0 < n_rot; i0 += 2) {
            const float c = cs[i0], s = cs[i0 + 1];
            const float x0 = x[i0], x1 = x[i0 + 1];
            x[i0] = x0 * c - x1 * s;
            x[i0 + 1] = x0 * s + x1 * c;
        }
    }
}

/* ---------------------------------------------------------------- matmul sections */

typedef struct {
    const eng_wmat *w;
    const void *X;
    size_t xrb;
    float *y;             /* (n_tok, n_out) row-major, ldy = ldy */
    int64_t ldy;
} mm_job;

#define MM_MAX_CHUNKS 512

typedef struct {
    mm_job j[3];
    int nj, n_tok, n_chunks;
    uint8_t *ws;          /* (nth, ENG_MATMUL_WS_BYTES) or NULL */
    struct { int32_t job, r0, r1; } ch[MM_MAX_CHUNKS];   /* claimed in order */
} mm_sec;

/* One chunk = a run of rows of one matrix. */
static void mm_task(void *arg, long chunk, int ith)
{
    mm_sec *s = arg;
    const mm_job *j = &s->j[s->ch[chunk].job];
    void *ws = s->ws ? s->ws + (size_t)ith * ENG_MATMUL_WS_BYTES : NULL;
    eng__matmul_ws(j->w->type, j->w->data, j->w->row_bytes, j->w->n_in, s->ch[chunk].r0, s->ch[chunk].r1, j->X, j->xrb,
                  s->n_tok, j->y, j->ldy, ws, ws ? ENG_MATMUL_WS_BYTES : 0);
}

/* Guided schedule: chunks are claimed in order and shrink as the section's remaining work
 * (weight bytes) shrinks: each is 1/(4*nth) of what is left, at least min_rows rows.
 * Why: the section ends when its last chunk ends, so the last chunks must be small (two
 * threads finish within a few microseconds of each other), while the first ones are big (few
 * atomic claims on a 145 MB lm_head). 1/(4*nth) rather than guided scheduling's usual
 * 1/nth: a worker descheduled while holding a chunk (shared machines) stalls the section by
 * at most 1/8 of its work at 2 threads. Row counts stay multiples of 16 (kernels tile rows)
 * except at a matrix's end. Single-threaded: one chunk per matrix. At most MM_MAX_CHUNKS
 * (a 145 MB lm_head at 2 threads takes ~60). */
static void mm_plan(mm_sec *s, int nth)
{
    /* smallest chunk: 16 rows for a matvec (~15 KB of weights: a few microseconds); 64 for
     * a batch, where each kernel call also re-prepares the activation tiles */
    const int32_t min_rows = s->n_tok > 1 ? 64 : 16;
    double left = 0;
    for (int k = 0; k < s->nj; k++) left += (double)s->j[k].w->row_bytes * s->j[k].w->n_out;
    int n = 0;
    for (int k = 0; k < s->nj; k++) {
        const int32_t nrow = (int32_t)s->j[k].w->n_out;
        const double rb = (double)s->j[k].w->row_bytes;
        int32_t r = 0;
        while (r < nrow) {
            int32_t take = nrow - r;
            if (nth > 1 && n < MM_MAX_CHUNKS - 3 * 2) {   /* room left for the other matrices' last chunks */
                const double want = left / (4.0 * nth) / rb;
                take = want < min_rows ? min_rows : (int32_t)LCX_MIN(want, (double)nrow);
                take = (take + 15) / 16 * 16;
                if (nrow - (r + take) < min_rows) take = nrow - r;
            }
            s->ch[n].job = k;
            s->ch[n].r0 = r;
            s->ch[n].r1 = r + take;
            n++;
            r += take;
            left -= rb * take;
        }
    }
    s->n_chunks = n;
}

typedef struct { eng_ctx *c; const float *x; int n_in, n_tok, slot; } qz_task_arg;
#define QZ_ROWS 8
static void qz_task(void *arg, long chunk, int ith)
{
    qz_task_arg *q = arg;
    eng_type vt = q->c->act_type[q->slot];
    size_t rb = eng__row_bytes(vt, q->n_in);
    const long a = chunk * QZ_ROWS, b = LCX_MIN(a + QZ_ROWS, (long)q->n_tok);
    for (long t = a; t < b; t++)
        eng__quantize_row(vt, q->x + (size_t)t * q->n_in, q->c->act[q->slot] + rb * t, q->n_in);
    (void)ith;
}

/* Makes sure x (n_tok rows of n_in) is available in format vt; returns the buffer. Reuses
 * the conversion when the same input was already converted (q/k/v share one input). */
static const void *act_for(eng_ctx *c, const float *x, int n_in, int n_tok, eng_type vt, size_t *xrb)
{
    *xrb = eng__row_bytes(vt, n_in);
    if (vt == ENG_T_F32) return x;
    for (int i = 0; i < 2; i++)
        if (c->act_src[i] == x && c->act_type[i] == vt && c->act_rows[i] == n_tok) return c->act[i];
    /* evict the slot not holding this input (or slot 0) */
    int slot = (c->act_src[0] == x) ? 1 : 0;
    c->act_type[slot] = vt;
    c->act_src[slot] = x;
    c->act_rows[slot] = n_tok;
    qz_task_arg a = {c, x, n_in, n_tok, slot};
    eng__pool_run(c->pool, qz_task, &a, (n_tok + QZ_ROWS - 1) / QZ_ROWS);
    return c->act[slot];
}

static void act_invalidate(eng_ctx *c) { c->act_src[0] = c->act_src[1] = NULL; }

/* y_k = W_k x for up to three matrices sharing input x (n_tok rows of n_in). */
static void matmul_multi(eng_ctx *c, const float *x, int n_in, int n_tok, const eng_wmat **w, float **y, int nj)
{
    mm_sec s;
    s.nj = nj;
    s.n_tok = n_tok;
    s.ws = n_tok > 1 ? c->mm_ws : NULL;
    for (int k = 0; k < nj; k++) {
        size_t xrb;
        const void *X = act_for(c, x, n_in, n_tok, eng__vec_dot_type(w[k]->type), &xrb);
        s.j[k] = (mm_job){w[k], X, xrb, y[k], w[k]->n_out};
    }
    mm_plan(&s, c->nth);
    eng__pool_run(c->pool, mm_task, &s, s.n_chunks);
}

/* ---------------------------------------------------------------- attention section */

typedef struct {
    eng_ctx *c;
    int il, n_tok;
} att_sec;

/* hot: for each (tile of att_qt ubatch tokens, KV head): the tile's query heads of that GQA
 * group together (nq = tokens × gqa rows), so each K and V row is loaded once for all of
 * them. The tile's cells are those at positions <= its highest; row r uses the first len[r]
 * of them (up to its last visible one) and masks any in there above its own position
 * (weight exactly 0; none when the cells are in position order, as in a plain prefill).
 * Per row the arithmetic is the untiled kernel's over its own visible cells: scores by
 * dot8_rows in blocks of 8 and dot_f32 for the tail, softmax over len[r], then . V in
 * blocks of keys (zero weights past len[r] add exact zeros; the block's V rows stay in
 * cache across the row groups). Per-thread scratch: visible + masked lists (2 n_ctx ints),
 * scores (nq, n_ctx), the tile's output (nq, hd). */
static void att_task(void *arg, long chunk, int ith)
{
    att_sec *s = arg;
    eng_ctx *c = s->c;
    const eng_model_info *I = &c->m->info;
    const int hd = I->head_dim, nh = I->n_head, nkv = I->n_head_kv, gqa = nh / nkv, QT = c->att_qt;
    const size_t kvd = (size_t)nkv * hd, ldw = (size_t)c->n_ctx;
    const float *K = c->kc + (size_t)s->il * c->n_ctx * kvd;
    const float *V = c->vc + (size_t)s->il * c->n_ctx * kvd;
    const float scale = 1.0f / sqrtf((float)hd);
    float *sc = c->scores + (size_t)ith * QT * gqa * ldw;     /* (nq, n_ctx) */
    int32_t *vis = c->vis + (size_t)ith * 2 * c->n_ctx, *late = vis + c->n_ctx;
    float *ot = c->att_tmp + (size_t)ith * QT * gqa * hd;
    const int tile = (int)(chunk / nkv), kh = (int)(chunk % nkv);
    const int t0 = tile * QT, nt = LCX_MIN(QT, s->n_tok - t0), nq = nt * gqa;
    int32_t pmin = c->ub_pos[t0], pmax = pmin;
    for (int u = 1; u < nt; u++) {
        pmin = LCX_MIN(pmin, c->ub_pos[t0 + u]);
        pmax = LCX_MAX(pmax, c->ub_pos[t0 + u]);
    }
    int nvis = 0, nlate = 0, len_all = 0;     /* len_all: 1 + last cell every row sees */
    for (int i = 0; i < c->hi; i++) {
        const int32_t cp = c->cell_pos[i];
        if (cp < 0 || cp > pmax) continue;
        if (cp > pmin) late[nlate++] = nvis;  /* hidden from some row of the tile */
        else len_all = nvis + 1;
        vis[nvis++] = i;
    }
    const float *qr[64];                      /* row r = token t0 + r / gqa, head kh*gqa + r % gqa */
    int len[64];
    bool masked[64];
    for (int r = 0; r < nq; r++) {
        qr[r] = c->q + ((size_t)(t0 + r / gqa) * nh + (size_t)kh * gqa + r % gqa) * hd;
        const int32_t p = c->ub_pos[t0 + r / gqa];
        int l = len_all;
        for (int k = 0; k < nlate; k++)
            if (c->cell_pos[vis[late[k]]] <= p) l = LCX_MAX(l, late[k] + 1);
        len[r] = l;
        masked[r] = false;
        for (int k = 0; k < nlate && late[k] < l; k++) masked[r] |= c->cell_pos[vis[late[k]]] > p;
    }
    for (int j = 0; j < nvis; j += 8) {
        const int nb = LCX_MIN(8, nvis - j);
        const float *kr[8];
        for (int r = 0; r < nb; r++) kr[r] = K + (size_t)vis[j + r] * kvd + (size_t)kh * hd;
        for (int r = 0; r < nq; r++) {
            float *sr = sc + (size_t)r * ldw;
            if (hd % 8 == 0 && len[r] >= j + 8)
                _mm256_storeu_ps(sr + j, _mm256_mul_ps(dot8_rows(qr[r], kr, hd), _mm256_set1_ps(scale)));
            else
                for (int jj = j; jj < LCX_MIN(len[r], j + nb); jj++) sr[jj] = dot_f32(qr[r], kr[jj - j], hd) * scale;
        }
    }
    /* interleaved cells above a row's position: -inf here, exactly 0 after the softmax */
    for (int r = 0; r < nq; r++)
        if (masked[r]) {
            const int32_t p = c->ub_pos[t0 + r / gqa];
            for (int k = 0; k < nlate && late[k] < len[r]; k++)
                if (c->cell_pos[vis[late[k]]] > p) sc[(size_t)r * ldw + late[k]] = -INFINITY;
        }
    for (int r = 0; r < nq; r++) {
        float *sg = sc + (size_t)r * ldw;
        const int nv = len[r];
        float mx = -INFINITY;
        int jj = 0;
        if (nv >= 8) {
            __m256 vm = _mm256_loadu_ps(sg);
            for (jj = 8; jj + 8 <= nv; jj += 8) vm = _mm256_max_ps(vm, _mm256_loadu_ps(sg + jj));
            __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(vm), _mm256_extractf128_ps(vm, 1));
            m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
            m4 = _mm_max_ss(m4, _mm_shuffle_ps(m4, m4, 1));
            mx = _mm_cvtss_f32(m4);
        }
        for (; jj < nv; jj++)
            if (sg[jj] > mx) mx = sg[jj];
        double sum = 0;
        jj = 0;
        const __m256 vm = _mm256_set1_ps(mx);
        for (; jj + 8 <= nv; jj += 8) {
            /* a masked -inf comes out as e^-87 (the clamp): below any sum's rounding, and
             * zeroed after the normalisation */
            const __m256 e = lcx__exp8_ps(_mm256_sub_ps(_mm256_loadu_ps(sg + jj), vm));
            _mm256_storeu_ps(sg + jj, e);
            /* sum in double like ggml's softmax */
            const __m256d lo = _mm256_cvtps_pd(_mm256_castps256_ps128(e)), hi = _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1));
            const __m256d s4 = _mm256_add_pd(lo, hi);
            const __m128d s2 = _mm_add_pd(_mm256_castpd256_pd128(s4), _mm256_extractf128_pd(s4, 1));
            sum += _mm_cvtsd_f64(_mm_add_sd(s2, _mm_unpackhi_pd(s2, s2)));
        }
        for (; jj < nv; jj++) {
            const float e = expf(sg[jj] - mx);
            sg[jj] = e;
            sum += (double)e;
        }
        const float inv = sum > 0 ? (float)(1.0 / sum) : 0.0f;
        /* vectorised by hand: GCC -O2 left this a scalar loop (~20% of att_task in perf) */
        const __m256 vinv = _mm256_set1_ps(inv);
        jj = 0;
        for (; jj + 8 <= nv; jj += 8) _mm256_storeu_ps(sg + jj, _mm256_mul_ps(_mm256_loadu_ps(sg + jj), vinv));
        for (; jj < nv; jj++) sg[jj] *= inv;
        if (masked[r]) {
            const int32_t p = c->ub_pos[t0 + r / gqa];
            for (int k = 0; k < nlate && late[k] < nv; k++)
                if (c->cell_pos[vis[late[k]]] > p) sg[late[k]] = 0.0f;
        }
        for (jj = nv; jj < nvis; jj++) sg[jj] = 0.0f;    /* past the row's last visible cell */
    }
    if (hd % 8 == 0) {
        /* keys in blocks of ~32 KB of V rows */
        const int JB = LCX_MAX(64, 8192 / hd);
        for (int j0 = 0; j0 < nvis || j0 == 0; j0 += JB)
            wsum_group(ot, sc + j0, ldw, nq, vis + j0, LCX_MIN(JB, nvis - j0), V + (size_t)kh * hd, kvd, hd, j0 > 0);
    } else
        for (int r = 0; r < nq; r++) {
            float *o = ot + (size_t)r * hd;
            const float *w = sc + (size_t)r * ldw;
            memset(o, 0, hd * sizeof(float));
            for (int jj = 0; jj < nvis; jj++) axpy_f32(o, w[jj], V + (size_t)vis[jj] * kvd + (size_t)kh * hd, hd);
        }
    for (int u = 0; u < nt; u++)
        memcpy(c->att + ((size_t)(t0 + u) * nh + (size_t)kh * gqa) * hd, ot + (size_t)u * gqa * hd,
               (size_t)gqa * hd * sizeof(float));
}

/* ---------------------------------------------------------------- ffn activation */

typedef struct { float *g; const float *u; size_t n; } swiglu_arg;
#define SWIGLU_CHUNK 8192
static void swiglu_task(void *arg, long chunk, int ith)
{
    swiglu_arg *s = arg;
    const long a = chunk * SWIGLU_CHUNK, b = LCX_MIN(a + SWIGLU_CHUNK, (long)s->n);
    (void)ith;
    long i = a;
    const __m256 one = _mm256_set1_ps(1.0f);
    for (; i + 8 <= b; i += 8) {   /* hot: silu(g) * u */
        const __m256 g = _mm256_loadu_ps(s->g + i);
        const __m256 sg = _mm256_div_ps(g, _mm256_add_ps(one, lcx__exp8_ps(_mm256_sub_ps(_mm256_setzero_ps(), g))));
        _mm256_storeu_ps(s->g + i, _mm256_mul_ps(sg, _mm256_loadu_ps(s->u + i)));
    }
    for (; i < b; i++) {
        const float g = s->g[i];
        s->g[i] = (g / (1.0f + expf(-g))) * s->u[i];
    }
}

/* ---------------------------------------------------------------- per-token sections */

/* The per-token work between matmuls (residual adds, RMSNorms, biases, RoPE, K/V stores) is
 * split by token blocks like everything else, so a second thread is not left spinning
 * through it during prompt processing. For one token it is a single chunk, which
 * eng__pool_run runs inline (no hand-off). */
typedef enum { TOK_ATTN_IN, TOK_QKV_POST, TOK_FFN_IN } tok_stage;
typedef struct {
    eng_ctx *c;
    const eng_layer *L;
    int il, n;
    tok_stage stage;
    bool residual;            /* TOK_ATTN_IN: add the previous layer's FFN output first */
} tok_sec;
#define TOK_CHUNK 8

/* Tokens [chunk*TOK_CHUNK, +TOK_CHUNK): TOK_ATTN_IN / TOK_FFN_IN: x += xn (when residual),
 * then xn = rmsnorm(x) * norm weight; TOK_QKV_POST: biases, q/k norms, the q hook, RoPE,
 * then K and V into the token's cache cell. */
static void tok_task(void *arg, long chunk, int ith)
{
    tok_sec *s = arg;
    eng_ctx *c = s->c;
    const eng_layer *L = s->L;
    const eng_model_info *I = &c->m->info;
    const int E = I->n_embd, hd = I->head_dim, nh = I->n_head, nkv = I->n_head_kv;
    const size_t qd = (size_t)nh * hd, kvd = (size_t)nkv * hd;
    const int t0 = (int)chunk * TOK_CHUNK, t1 = LCX_MIN(t0 + TOK_CHUNK, s->n);
    (void)ith;
    for (int t = t0; t < t1; t++) {
        if (s->stage != TOK_QKV_POST) {
            float *x = c->x + (size_t)t * E, *xn = c->xn + (size_t)t * E;
            if (s->residual)
                for (int i = 0; i < E; i++) x[i] += xn[i];
            rmsnorm(xn, x, s->stage == TOK_ATTN_IN ? L->attn_norm : L->ffn_norm, E, I->rms_eps);
            continue;
        }
        float *q = c->q + t * qd, *k = c->k + t * kvd, *v = c->v + t * kvd;
        if (L->bq) for (size_t i = 0; i < qd; i++) q[i] += L->bq[i];
        if (L->bk) for (size_t i = 0; i < kvd; i++) k[i] += L->bk[i];
        if (L->bv) for (size_t i = 0; i < kvd; i++) v[i] += L->bv[i];
        const float *cs = c->rope_cs + (size_t)t * I->n_rot;
        if (L->q_norm)
            for (int h = 0; h < nh; h++) rmsnorm(q + h * hd, q + h * hd, L->q_norm, hd, I->rms_eps);
        /* pre-RoPE queries for TriAttention calibration (this stage runs on the caller's
         * thread, in token order, when a hook is set) */
        if (c->q_hook) c->q_hook(c->q_hook_ud, s->il, c->ub_pos[t], q);
        if (c->qpre) memcpy(c->qpre + t * qd, q, qd * sizeof(float));
        for (int h = 0; h < nh; h++) rope_apply(q + h * hd, cs, I->n_rot, I->rope_type);
        for (int h = 0; h < nkv; h++) {
            if (L->k_norm) rmsnorm(k + h * hd, k + h * hd, L->k_norm, hd, I->rms_eps);
            rope_apply(k + h * hd, cs, I->n_rot, I->rope_type);
        }
        const size_t off = ((size_t)s->il * c->n_ctx + c->ub_cell[t]) * kvd;
        memcpy(c->kc + off, k, kvd * sizeof(float));
        memcpy(c->vc + off, v, kvd * sizeof(float));
    }
}

static void tok_run(eng_ctx *c, const eng_layer *L, int il, int n, tok_stage st, bool residual)
{
    tok_sec s = {c, L, il, n, st, residual};
    const long nch = (n + TOK_CHUNK - 1) / TOK_CHUNK;
    if (st == TOK_QKV_POST && c->q_hook)      /* the hook is called from one thread, in order */
        for (long ch = 0; ch < nch; ch++) tok_task(&s, ch, 0);
    else
        eng__pool_run(c->pool, tok_task, &s, nch);
}

/* ---------------------------------------------------------------- one ubatch */

static int find_free_cells(eng_ctx *c, int n)
{
    int got = 0;
    for (int i = 0; i < c->n_ctx && got < n; i++)
        if (c->cell_pos[i] < 0) c->ub_cell[got++] = i;
    return got == n ? 0 : LCX_ELIMIT;
}

/* Rows out_first .. out_first+n_out-1 of the ubatch get logits, written consecutively to
 * logits_dst (n_vocab floats each).
 * Residual stream: x (n, n_embd); each block's output lands in xn and is added to x by the
 * next per-token stage (TOK_FFN_IN after attention, the next layer's TOK_ATTN_IN after the
 * FFN, and the loop before the output norm after the last layer). */
static void forward_ubatch(eng_ctx *c, const int32_t *tok, int n, int out_first, int n_out, float *logits_dst)
{
    const eng_model *m = c->m;
    const eng_model_info *I = &m->info;
    const int E = I->n_embd, hd = I->head_dim, nh = I->n_head, nkv = I->n_head_kv, F = I->n_ff;
    const size_t qd = (size_t)nh * hd;

    for (int t = 0; t < n; t++) {
        const uint8_t *row = (const uint8_t *)m->tok_embd.data + (size_t)tok[t] * m->tok_embd.row_bytes;
        eng__dequant_row(m->tok_embd.type, row, c->x + (size_t)t * E, E);
        rope_cache(c->rope_cs + (size_t)t * I->n_rot, c->ub_pos[t], I->n_rot, I->rope_freq_base,
                   I->rope_freq_scale, m->rope_freqs);
    }
    /* occupy the cells now so attention sees this ubatch's own keys (masked by position) */
    for (int t = 0; t < n; t++) {
        const int cell = c->ub_cell[t];
        c->cell_pos[cell] = c->ub_pos[t];
        c->cell_tok[cell] = tok[t];
        if (cell + 1 > c->hi) c->hi = cell + 1;
        if (c->ub_pos[t] > c->max_pos) c->max_pos = c->ub_pos[t];
    }
    c->n_used += n;

    for (int il = 0; il < I->n_layer; il++) {
        const eng_layer *L = &m->layers[il];
        tok_run(c, L, il, n, TOK_ATTN_IN, il > 0);
        act_invalidate(c);
        {
            const eng_wmat *w[3] = {&L->wq, &L->wk, &L->wv};
            float *y[3] = {c->q, c->k, c->v};
            matmul_multi(c, c->xn, E, n, w, y, 3);
        }
        tok_run(c, L, il, n, TOK_QKV_POST, false);
        if (c->qpre) eng__v3_observe(c, il, n);
        att_sec as = {c, il, n};
        eng__pool_run(c->pool, att_task, &as, (long)((n + c->att_qt - 1) / c->att_qt) * nkv);
        act_invalidate(c);
        {
            const eng_wmat *w[1] = {&L->wo};
            float *y[1] = {c->xn};
            matmul_multi(c, c->att, (int)qd, n, w, y, 1);
        }
        tok_run(c, L, il, n, TOK_FFN_IN, true);
        act_invalidate(c);
        {
            const eng_wmat *w[2] = {&L->wg, &L->wu};
            float *y[2] = {c->gate, c->up};
            matmul_multi(c, c->xn, E, n, w, y, 2);
        }
        swiglu_arg sa = {c->gate, c->up, (size_t)n * F};
        eng__pool_run(c->pool, swiglu_task, &sa, ((long)n * F + SWIGLU_CHUNK - 1) / SWIGLU_CHUNK);
        act_invalidate(c);
        {
            const eng_wmat *w[1] = {&L->wd};
            float *y[1] = {c->xn};
            matmul_multi(c, c->gate, F, n, w, y, 1);
        }
    }
    if (n_out <= 0) return;
    /* last layer's residual, for the output rows only (the other rows' x is not read again) */
    for (int t = out_first; t < out_first + n_out; t++) {
        float *x = c->x + (size_t)t * E;
        const float *d = c->xn + (size_t)t * E;
        for (int i = 0; i < E; i++) x[i] += d[i];
    }
    for (int t = 0; t < n_out; t++)
        rmsnorm(c->xn + (size_t)t * E, c->x + (size_t)(out_first + t) * E, m->out_norm, E, I->rms_eps);
    act_invalidate(c);
    const eng_wmat *w[1] = {&m->output};
    float *y[1] = {logits_dst};
    matmul_multi(c, c->xn, E, n_out, w, y, 1);
}

int eng_decode(eng_ctx *c, const int32_t *tokens, const int32_t *pos, int n, bool all_logits)
{
    const eng_model_info *I = &c->m->info;
    if (n <= 0 || !tokens) return LCX_EINVAL;
    for (int i = 0; i < n; i++) {
        if (tokens[i] < 0 || tokens[i] >= I->n_vocab) return LCX_EINVAL;
        if (pos && (pos[i] < 0 || pos[i] >= (1 << 30))) return LCX_EINVAL;
    }
    /* with V3 attached, rounds free cells between ubatches: the check is per ubatch */
    if (!c->v3 && c->n_ctx - c->n_used < n) return LCX_ELIMIT;
    int32_t next = c->max_pos + 1;
    if (!pos && next + n > (1 << 30)) return LCX_EINVAL;
    if (all_logits && n > c->logits_cap) {
        float *nl = realloc(c->logits, (size_t)n * I->n_vocab * sizeof(float));
        if (!nl) return LCX_ENOMEM;
        c->logits = nl;
        c->logits_cap = n;
    }
    c->logits_all = all_logits;
    c->n_logits = all_logits ? n : 1;
    for (int i0 = 0; i0 < n; i0 += c->n_ub) {
        const int nb = LCX_MIN(c->n_ub, n - i0);
        for (int t = 0; t < nb; t++) c->ub_pos[t] = pos ? pos[i0 + t] : next + i0 + t;
        if (c->v3) eng__v3_before_ubatch(c);
        int rc = find_free_cells(c, nb);
        if (rc) return rc;   /* without V3 cannot happen: free count checked above */
        const bool last = i0 + nb == n;
        if (all_logits)
            forward_ubatch(c, tokens + i0, nb, 0, nb, c->logits + (size_t)i0 * I->n_vocab);
        else
            forward_ubatch(c, tokens + i0, nb, nb - 1, last ? 1 : 0, c->logits);
        if (c->v3) {
            rc = eng__v3_after_ubatch(c, tokens + i0, nb);
            if (rc < 0) return rc;
        }
    }
    return 0;
}

const float *eng_logits(const eng_ctx *c, int i)
{
    if (c->n_logits == 0) return NULL;
    if (i < 0) i = c->n_logits - 1;
    else if (!c->logits_all) return NULL;
    if (i >= c->n_logits) return NULL;
    return c->logits + (size_t)i * c->m->info.n_vocab;
}

/* ---------------------------------------------------------------- KV cache API */

int eng_kv_size(const eng_ctx *c) { return c->n_ctx; }
int eng_kv_n_used(const eng_ctx *c) { return c->n_used; }
int32_t eng_kv_cell_pos(const eng_ctx *c, int i) { return (i >= 0 && i < c->n_ctx) ? c->cell_pos[i] : -1; }
int32_t eng_kv_max_pos(const eng_ctx *c) { return c->max_pos; }

const float *eng_kv_key(const eng_ctx *c, int il, int i)
{
    if (il < 0 || il >= c->m->info.n_layer || i < 0 || i >= c->n_ctx || c->cell_pos[i] < 0) return NULL;
    const size_t kvd = (size_t)c->m->info.n_head_kv * c->m->info.head_dim;
    return c->kc + ((size_t)il * c->n_ctx + i) * kvd;
}
const float *eng_kv_value(const eng_ctx *c, int il, int i)
{
    if (il < 0 || il >= c->m->info.n_layer || i < 0 || i >= c->n_ctx || c->cell_pos[i] < 0) return NULL;
    const size_t kvd = (size_t)c->m->info.n_head_kv * c->m->info.head_dim;
    return c->vc + ((size_t)il * c->n_ctx + i) * kvd;
}

static void kv_recount(eng_ctx *c)
{
    int hi = 0, used = 0;
    int32_t mp = -1;
    for (int i = 0; i < c->n_ctx; i++)
        if (c->cell_pos[i] >= 0) {
            hi = i + 1;
            used++;
            if (c->cell_pos[i] > mp) mp = c->cell_pos[i];
        }
    c->hi = hi;
    c->n_used = used;
    c->max_pos = mp;
}

int eng_kv_remove_cells(eng_ctx *c, const int32_t *cells, int n)
{
    if (n < 0 || (n && !cells)) return LCX_EINVAL;
    for (int i = 0; i < n; i++)
        if (cells[i] < 0 || cells[i] >= c->n_ctx) return LCX_EINVAL;
    int freed = 0;
    for (int i = 0; i < n; i++)
        if (c->cell_pos[cells[i]] >= 0) {
            c->cell_pos[cells[i]] = c->cell_tok[cells[i]] = -1;
            freed++;
        }
    kv_recount(c);
    return freed;
}

int eng_kv_remove_pos(eng_ctx *c, int32_t p0, int32_t p1)
{
    int freed = 0;
    for (int i = 0; i < c->n_ctx; i++) {
        const int32_t p = c->cell_pos[i];
        if (p >= 0 && p >= p0 && (p1 < 0 || p < p1)) {
            c->cell_pos[i] = c->cell_tok[i] = -1;
            freed++;
        }
    }
    kv_recount(c);
    return freed;
}

void eng_kv_clear(eng_ctx *c)
{
    for (int i = 0; i < c->n_ctx; i++) c->cell_pos[i] = c->cell_tok[i] = -1;
    c->hi = c->n_used = 0;
    c->max_pos = -1;
}

int32_t eng_kv_cell_token(const eng_ctx *c, int i)
{
    return (i >= 0 && i < c->n_ctx && c->cell_pos[i] >= 0) ? c->cell_tok[i] : -1;
}

typedef struct { int32_t pos, tok; } pos_tok;
static int cmp_pos_tok(const void *a, const void *b)
{
    const pos_tok *x = a, *y = b;
    return (x->pos > y->pos) - (x->pos < y->pos);
}

int eng_kv_survivors(const eng_ctx *c, int32_t *pos, int32_t *tok, int cap)
{
    if (cap < 0 || (cap && !pos && !tok)) return LCX_EINVAL;
    pos_tok *v = malloc((size_t)LCX_MAX(c->n_used, 1) * sizeof *v);
    if (!v) return LCX_ENOMEM;
    int n = 0;
    for (int i = 0; i < c->hi; i++)
        if (c->cell_pos[i] >= 0) v[n++] = (pos_tok){c->cell_pos[i], c->cell_tok[i]};
    qsort(v, n, sizeof *v, cmp_pos_tok);
    for (int i = 0; i < LCX_MIN(n, cap); i++) {
        if (pos) pos[i] = v[i].pos;
        if (tok) tok[i] = v[i].tok;
    }
    free(v);
    return n;
}

/* Moving the tail into the holes touches at most as many cells per layer as were removed
 * (a stable shift would move every cell after the first hole: the whole cache per round). */
int eng__kv_compact(eng_ctx *c, int32_t *moved)
{
    const eng_model_info *I = &c->m->info;
    const size_t kvd = (size_t)I->n_head_kv * I->head_dim;
    int nm = 0, lo = 0, hi = c->hi - 1;
    for (;;) {
        while (lo < hi && c->cell_pos[lo] >= 0) lo++;
        while (hi > lo && c->cell_pos[hi] < 0) hi--;
        if (lo >= hi) break;
        for (int il = 0; il < I->n_layer; il++) {
            const size_t dst = ((size_t)il * c->n_ctx + lo) * kvd, src = ((size_t)il * c->n_ctx + hi) * kvd;
            memcpy(c->kc + dst, c->kc + src, kvd * sizeof(float));
            memcpy(c->vc + dst, c->vc + src, kvd * sizeof(float));
        }
        c->cell_pos[lo] = c->cell_pos[hi];
        c->cell_tok[lo] = c->cell_tok[hi];
        c->cell_pos[hi] = c->cell_tok[hi] = -1;
        if (moved) moved[nm] = lo;
        nm++;
    }
    kv_recount(c);
    return nm;
}
