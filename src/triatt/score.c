/* The scorer: collapsed TriAttention scores for every cell, aggregated over (layer, KV head)
 * blocks, on a small private thread pool; plus the precomputed fast path.
 *
 * Threading: the (layer, KV head) blocks, in groups of up to 4 KV heads of one layer (scored
 * together as 4 memory streams, run_group), are dealt round-robin to the pool's threads (thread
 * t takes groups t, t+T, ...; the reference aggregation deals single blocks). Each thread adds
 * its blocks into its own accumulator (one float per cell), and the accumulators are merged
 * in thread order afterwards, so a given thread count always gives bit-identical scores and
 * no thread ever writes shared memory.
 *
 * Fast path: with frozen centres and block-mean aggregation, every block shares the same
 * ω and trig sums (cs, sn), and the score is linear in (A, B):
 *   score(c) = Σ_f cs_f·Ā_f(c) − sn_f·B̄_f(c) + Ē(c),   X̄ = mean over blocks.
 * So a cell collapses to 2·fc+1 floats computed once when it enters the cache, and a
 * round costs one dot product of length 2·fc per cell. */
#include "triatt/internal.h"
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define CHUNK 256          /* key rows fetched per accessor call (single stream) */
#define MS_CHUNK 128       /* rows per stream per accessor call in the multi-stream loop */
#define MS_MIN_CELLS 2048  /* fewer cells: one stream (the segments would be too short to matter) */
#define MAX_THREADS 64

#define SCRATCH_ROWS LCX_MAX(2 * CHUNK, MS_CHUNK * TRIATT_MAX_STREAMS)   /* fast_set: CHUNK + Q8_0 dequant */

typedef struct triatt_scorer triatt_scorer;

typedef struct {
    triatt_scorer *s;
    int tid;
    pthread_t th;
    float *acc;            /* (acc_cap) per-thread accumulator, one float per cell */
    size_t acc_cap;
    float *hbuf;           /* (G, acc_cap) per-head scores for reference aggregation */
    float *scratch;        /* (SCRATCH_ROWS, head_dim) key conversion space for the accessor:
                            * CHUNK rows, or MS_CHUNK rows per stream */
    float *w, *m, *m_il;   /* (TRIATT_MAX_STREAMS, n_rot), (.., fc), (.., n_rot) folded per-block
                            * coefficients, one slot per KV head scored at once */
    int rc;
} worker;

struct triatt_scorer {
    int L, H, KV, G, hd, n_rot, fc;
    triatt_pairing pairing;
    unsigned char *attn;
    double *omega;               /* (fc) */
    triatt_scorer_opts o;
    triatt_kernel_fn kernel;
    triatt_kernel_ms_fn kernel_ms;
    int n_streams;               /* 1..TRIATT_MAX_STREAMS concurrent segments per block */
    void (*fast_kernel)(const float *, size_t, int, const float *, int, float *);
    /* round state (read-only for the workers while a job runs) */
    int *blocks;                 /* (n_blocks) block ids l·KV + g in the round */
    int n_blocks;
    int *groups;                 /* (n_groups) index in blocks of each group's first head */
    int n_groups;
    double cs[TRIATT_MAX_HEAD_DIM / 2], sn[TRIATT_MAX_HEAD_DIM / 2];
    const triatt_calib *cal;
    const triatt_keys *keys;
    const int32_t *pos;
    int32_t win_thr;
    int n_cells;
    float *fast_v;               /* (2·fc) [cs | −sn] */
    float *out;
    /* pool */
    int nt;
    worker *wk;
    pthread_mutex_t mu;
    pthread_cond_t cv_start, cv_done;
    uint64_t job_gen;
    int n_done;
    bool stop, pool_up;
    void (*job)(triatt_scorer *, worker *);
    /* fast path: (n_slots, fstride) rows [a(fc) | b(fc) | e] */
    float *feat;
    uint64_t *feat_gen;          /* (n_slots) calibration generation the row was built with */
    int32_t *feat_pos;           /* (n_slots) position the row was built for */
    int n_slots;
    size_t fstride;
    int set_c0, set_c1;          /* cells of the fast_set_cells job in progress */
};

static void *worker_main(void *arg)
{
    worker *w = arg;
    triatt_scorer *s = w->s;
    uint64_t seen = 0;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        while (!s->stop && s->job_gen == seen) pthread_cond_wait(&s->cv_start, &s->mu);
        if (s->stop) break;
        seen = s->job_gen;
        pthread_mutex_unlock(&s->mu);
        s->job(s, w);
        pthread_mutex_lock(&s->mu);
        if (++s->n_done == s->nt - 1) pthread_cond_signal(&s->cv_done);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

/* Runs job on every thread (the caller is thread 0) and waits for all. */
static void pool_run(triatt_scorer *s, void (*job)(triatt_scorer *, worker *))
{
    for (int t = 0; t < s->nt; t++) s->wk[t].rc = 0;
    if (s->nt == 1) { job(s, &s->wk[0]); return; }
    pthread_mutex_lock(&s->mu);
    s->job = job;
    s->n_done = 0;
    s->job_gen++;
    pthread_cond_broadcast(&s->cv_start);
    pthread_mutex_unlock(&s->mu);
    job(s, &s->wk[0]);
    pthread_mutex_lock(&s->mu);
    while (s->n_done < s->nt - 1) pthread_cond_wait(&s->cv_done, &s->mu);
    pthread_mutex_unlock(&s->mu);
}

void triatt_scorer_free(triatt_scorer *s)
{
    if (!s) return;
    if (s->pool_up) {
        pthread_mutex_lock(&s->mu);
        s->stop = true;
        pthread_cond_broadcast(&s->cv_start);
        pthread_mutex_unlock(&s->mu);
        for (int t = 1; t < s->nt; t++)
            if (s->wk[t].th) pthread_join(s->wk[t].th, NULL);
        pthread_mutex_destroy(&s->mu);
        pthread_cond_destroy(&s->cv_start);
        pthread_cond_destroy(&s->cv_done);
    }
    if (s->wk)
        for (int t = 0; t < s->nt; t++) {
            worker *w = &s->wk[t];
            free(w->acc); free(w->hbuf); free(w->scratch); free(w->w); free(w->m); free(w->m_il);
        }
    free(s->wk); free(s->attn); free(s->omega); free(s->blocks); free(s->groups); free(s->fast_v);
    free(s->feat); free(s->feat_gen); free(s->feat_pos);
    free(s);
}

void triatt__scorer_force_kernel(triatt_scorer *s, int which)
{
    s->kernel = triatt__pick_kernel(which);
    s->kernel_ms = triatt__pick_kernel_ms(which);
    if (which == 0) s->fast_kernel = triatt__fast_kernel_scalar;
    else if (which >= 2 && lcx__cpu_has_avx512()) s->fast_kernel = triatt__fast_kernel_avx512;
    else s->fast_kernel = triatt__fast_kernel_avx2;
}

int triatt_scorer_init(const triatt_geometry *g, const triatt_scorer_opts *opts, triatt_scorer **out)
{
    if (!out) return LCX_EINVAL;
    *out = NULL;
    if (triatt_geometry_check(g) < 0) return LCX_EINVAL;
    triatt_scorer_opts o = {.aggregation = TRIATT_AGG_BLOCKMEAN, .terms = TRIATT_TERMS_MLR,
                            .skip_layers = 0, .zscore = false, .n_threads = 1, .eps = 1e-8};
    if (opts) o = *opts;
    if (o.n_threads <= 0) o.n_threads = 1;
    if (o.n_threads > MAX_THREADS || o.skip_layers < 0 || !(o.eps >= 0) ||
        (unsigned)o.aggregation > TRIATT_AGG_REFERENCE || (unsigned)o.terms > TRIATT_TERMS_EXTRA_ONLY)
        return LCX_EINVAL;
    triatt_scorer *s = calloc(1, sizeof *s);
    if (!s) return LCX_ENOMEM;
    s->L = g->n_layers; s->H = g->n_heads; s->KV = g->n_kv_heads; s->G = s->H / s->KV;
    s->hd = g->head_dim; s->n_rot = g->n_rot ? g->n_rot : g->head_dim; s->fc = s->n_rot / 2;
    s->pairing = g->pairing;
    s->o = o;
    s->nt = o.n_threads;
    s->attn = malloc(s->L);
    s->omega = malloc(s->fc * sizeof(double));
    s->blocks = malloc((size_t)s->L * s->KV * sizeof(int));
    s->groups = malloc((size_t)s->L * s->KV * sizeof(int));
    s->fast_v = malloc(2 * s->fc * sizeof(float));
    s->wk = calloc(s->nt, sizeof(worker));
    if (!s->attn || !s->omega || !s->blocks || !s->groups || !s->fast_v || !s->wk) goto fail;
    for (int l = 0; l < s->L; l++) s->attn[l] = g->attn_layers ? (g->attn_layers[l] != 0) : 1;
    triatt_geometry_omega(g, s->omega);
    for (int t = 0; t < s->nt; t++) {
        worker *w = &s->wk[t];
        w->s = s; w->tid = t;
        w->scratch = malloc((size_t)SCRATCH_ROWS * s->hd * sizeof(float));
        w->w = malloc((size_t)TRIATT_MAX_STREAMS * s->n_rot * sizeof(float));
        w->m = malloc((size_t)TRIATT_MAX_STREAMS * s->fc * sizeof(float));
        w->m_il = malloc((size_t)TRIATT_MAX_STREAMS * s->n_rot * sizeof(float));
        if (!w->scratch || !w->w || !w->m || !w->m_il) goto fail;
    }
    triatt__scorer_force_kernel(s, 2);
    s->n_streams = TRIATT_MAX_STREAMS;
    if (s->nt > 1) {
        pthread_mutex_init(&s->mu, NULL);
        pthread_cond_init(&s->cv_start, NULL);
        pthread_cond_init(&s->cv_done, NULL);
        s->pool_up = true;
        for (int t = 1; t < s->nt; t++)
            if (pthread_create(&s->wk[t].th, NULL, worker_main, &s->wk[t]) != 0) {
                s->wk[t].th = 0;
                goto fail;
            }
    }
    *out = s;
    return LCX_OK;
fail:   /* an allocation or a pool thread */
    triatt_scorer_free(s);
    return LCX_ENOMEM;
}

/* Folds a centre and this round's trig sums into the kernel coefficients (the worker's
 * coefficient slot `slot`, 0..TRIATT_MAX_STREAMS-1). */
static void fold(const triatt_scorer *s, worker *w, int slot, const float *cr, const float *ci,
                 const float *cabs, triatt_kparams *kp)
{
    const int fc = s->fc;
    float *ww = w->w + (size_t)slot * s->n_rot, *wm = w->m + (size_t)slot * fc;
    float *wil = w->m_il + (size_t)slot * s->n_rot;
    for (int f = 0; f < fc; f++) {
        double wr = cr[f] * s->cs[f] - ci[f] * s->sn[f];
        double wi = ci[f] * s->cs[f] + cr[f] * s->sn[f];
        if (s->pairing == TRIATT_PAIR_HALF) { ww[f] = (float)wr; ww[fc + f] = (float)wi; }
        else { ww[2 * f] = (float)wr; ww[2 * f + 1] = (float)wi; }
        double m = s->o.terms == TRIATT_TERMS_NO_MLR
                       ? cabs[f]
                       : cabs[f] - sqrt((double)cr[f] * cr[f] + (double)ci[f] * ci[f] + s->o.eps);
        wm[f] = (float)m;
        wil[2 * f] = wil[2 * f + 1] = (float)(m * 0.5);
    }
    kp->w = ww; kp->m = wm; kp->m_il = wil;
    kp->n_rot = s->n_rot; kp->fc = fc; kp->pairing = s->pairing;
    kp->use_trig = s->o.terms != TRIATT_TERMS_EXTRA_ONLY;
    kp->use_extra = s->o.terms != TRIATT_TERMS_TRIG_ONLY;
    kp->eps = (float)s->o.eps;
}

/* Fetches n key rows of (l, g) from the accessor (float or half). */
/* Default row stride (elements; bytes for Q8_0) for an accessor that does not set it. */
static size_t default_stride(const triatt_scorer *s, const triatt_keys *keys)
{
    return keys->get_q8 ? (size_t)s->hd / TRIATT_Q8_BLOCK * TRIATT_Q8_BLOCK_BYTES : (size_t)s->hd;
}

/* LCX_EINVAL without any accessor, LCX_ENOTSUP for Q8_0 keys when head_dim or n_rot is not
 * a whole number of 32-element blocks. */
static int check_keys(const triatt_scorer *s, const triatt_keys *keys)
{
    if (!keys || (!keys->get && !keys->get16 && !keys->get_q8)) return LCX_EINVAL;
    if (keys->get_q8 && (s->hd % TRIATT_Q8_BLOCK || s->n_rot % TRIATT_Q8_BLOCK)) return LCX_ENOTSUP;
    return LCX_OK;
}

static const void *fetch(const triatt_keys *keys, int l, int g, int c0, int n, float *scratch, size_t *stride)
{
    if (keys->get_q8) return keys->get_q8(keys->ud, l, g, c0, n, scratch, stride);
    if (keys->get16) return keys->get16(keys->ud, l, g, c0, n, scratch, stride);
    return keys->get(keys->ud, l, g, c0, n, scratch, stride);
}

void triatt__scorer_set_streams(triatt_scorer *s, int n_streams)
{
    s->n_streams = LCX_MAX(1, LCX_MIN(TRIATT_MAX_STREAMS, n_streams));
}

/* Cells [c_lo, c_hi) of (layer l, KV head g) through the single-stream kernel, into dst. */
static int run_single(triatt_scorer *s, worker *w, int l, int g, const triatt_kparams *kp, float *dst,
                      int c_lo, int c_hi, bool accumulate)
{
    for (int c0 = c_lo; c0 < c_hi; c0 += CHUNK) {
        int k = LCX_MIN(CHUNK, c_hi - c0);
        size_t stride = default_stride(s, s->keys);
        const void *ptr = fetch(s->keys, l, g, c0, k, w->scratch, &stride);
        if (!ptr) return LCX_EIO;
        s->kernel(kp, ptr, stride, k, dst + c0, accumulate);
    }
    return LCX_OK;
}

/* The KV heads g0 .. g0+nh-1 (nh <= TRIATT_MAX_STREAMS) of layer l, with their coefficients
 * kp[0..nh), into dst (added when accumulate, else stored: then nh must be 1, as in the
 * reference aggregation's one block per call).
 * Memory-bound at scale (one pass over the keys per round), so several sequential DRAM
 * streams are kept in flight, read in lock-step by the multi-stream kernel. The streams are
 * KV heads first: up to TRIATT_MAX_STREAMS heads at once (each a sequential stream of its
 * own keys), and when there are fewer heads than streams each head is also cut into equal
 * segments (nh = 2: 2 heads × 2 segments; nh = 1: 4 segments). Streaming heads rather than
 * segments of one head is faster per round (docs/benchmarks/triatt.md), has no ragged tail, and reads an engine's cell-major cache
 * (KV heads interleaved in each cell's row) as one forward sweep. The segment length is
 * chosen ≡ 5 (mod 16) rows so the streams' concurrent rows sit at different offsets within
 * a 4 KiB page (different L1/L2 sets) for the usual power-of-two row sizes; the few cells
 * after the segments (< segs·16 + segs) go through the single-stream kernel. Every cell is
 * computed by the same arithmetic either way and gets its heads' scores added in head order
 * whatever the split (the multi-stream kernels add aliasing outputs in stream order,
 * streams are head-major), so the scores are bit-identical for any stream count. */
static int run_group(triatt_scorer *s, worker *w, int l, int g0, int nh, triatt_kparams *kp, float *dst,
                     bool accumulate)
{
    const bool q8 = s->keys->get_q8 != NULL, f16 = !q8 && s->keys->get16 != NULL;
    for (int h = 0; h < nh; h++) { kp[h].q8 = q8; kp[h].f16 = f16; }
    /* Q8_0 rows too: with the 4-row kernel 4 streams beat 1 for them as well
     * (docs/benchmarks/triatt.md) */
    const int n = s->n_cells, ns = n >= MS_MIN_CELLS ? s->n_streams : 1;
    if (ns == 1) {
        for (int h = 0; h < nh; h++) {
            int rc = run_single(s, w, l, g0 + h, &kp[h], dst, 0, n, accumulate);
            if (rc < 0) return rc;
        }
        return LCX_OK;
    }
    for (int h0 = 0; h0 < nh; ) {
        const int hc = LCX_MIN(ns, nh - h0), segs = ns / hc, nst = hc * segs;
        int seg = n;
        if (segs > 1) {
            seg = n / segs;
            seg -= (seg - 5) & 15;         /* largest seg <= n/segs with seg ≡ 5 (mod 16) */
        }
        const triatt_kparams *kpp[TRIATT_MAX_STREAMS];
        for (int j = 0; j < nst; j++) kpp[j] = &kp[h0 + j / segs];
        for (int off = 0; off < seg; off += MS_CHUNK) {
            int k = LCX_MIN(MS_CHUNK, seg - off);
            const void *ptr[TRIATT_MAX_STREAMS];
            size_t stride[TRIATT_MAX_STREAMS];
            float *out[TRIATT_MAX_STREAMS];
            for (int j = 0; j < nst; j++) {   /* stream j: head h0 + j / segs, segment j % segs */
                int c0 = (j % segs) * seg + off;
                stride[j] = default_stride(s, s->keys);
                ptr[j] = fetch(s->keys, l, g0 + h0 + j / segs, c0, k,
                               w->scratch + (size_t)j * MS_CHUNK * s->hd, &stride[j]);
                if (!ptr[j]) return LCX_EIO;
                out[j] = dst + c0;
            }
            s->kernel_ms(kpp, nst, ptr, stride, k, out, accumulate);
        }
        for (int h = h0; h < h0 + hc; h++) {  /* the cells after the segments, heads in order */
            int rc = run_single(s, w, l, g0 + h, &kp[h], dst, segs * seg, n, accumulate);
            if (rc < 0) return rc;
        }
        h0 += hc;
    }
    return LCX_OK;
}

/* Block-mean: the groups (up to TRIATT_MAX_STREAMS KV heads of one layer, see
 * collect_blocks) are dealt round-robin to the threads; a group's heads are scored together
 * (run_group). The grouping does not depend on the stream count, so neither do the sums. */
static void job_blockmean(triatt_scorer *s, worker *w)
{
    memset(w->acc, 0, (size_t)s->n_cells * sizeof(float));
    for (int q = w->tid; q < s->n_groups; q += s->nt) {
        const int i0 = s->groups[q], l = s->blocks[i0] / s->KV, g0 = s->blocks[i0] % s->KV;
        const int nh = LCX_MIN(TRIATT_MAX_STREAMS, s->KV - g0);
        triatt_kparams kp[TRIATT_MAX_STREAMS];
        for (int h = 0; h < nh; h++) {
            const float *cr, *ci, *cabs;
            if (triatt_calib_block(s->cal, l, g0 + h, &cr, &ci, &cabs) < 0) { w->rc = LCX_ESTATE; return; }
            fold(s, w, h, cr, ci, cabs, &kp[h]);
        }
        int rc = run_group(s, w, l, g0, nh, kp, w->acc, true);
        if (rc < 0) { w->rc = rc; return; }
    }
}

/* Reference-style: per-head scores (optionally z-scored over the scored cells), max over the
 * GQA group, summed here and divided by the number of blocks (mean over layers and KV heads). */
static void job_reference(triatt_scorer *s, worker *w)
{
    const int n = s->n_cells, fc = s->fc;
    memset(w->acc, 0, (size_t)n * sizeof(float));
    float cr[TRIATT_MAX_HEAD_DIM / 2], ci[TRIATT_MAX_HEAD_DIM / 2], ca[TRIATT_MAX_HEAD_DIM / 2];
    for (int i = w->tid; i < s->n_blocks; i += s->nt) {
        int l = s->blocks[i] / s->KV, g = s->blocks[i] % s->KV;
        for (int j = 0; j < s->G; j++) {
            const double *mr, *mi, *ma;
            if (triatt_calib_head(s->cal, l, g * s->G + j, &mr, &mi, &ma) < 0) { w->rc = LCX_ESTATE; return; }
            for (int f = 0; f < fc; f++) { cr[f] = (float)mr[f]; ci[f] = (float)mi[f]; ca[f] = (float)ma[f]; }
            triatt_kparams kp;
            fold(s, w, 0, cr, ci, ca, &kp);
            float *hb = w->hbuf + (size_t)j * w->acc_cap;
            int rc = run_group(s, w, l, g, 1, &kp, hb, false);
            if (rc < 0) { w->rc = rc; return; }
            if (s->o.zscore) {
                double sum = 0, sq = 0;
                int k = 0;
                for (int c = 0; c < n; c++)
                    if (s->pos[c] < s->win_thr) { sum += hb[c]; sq += (double)hb[c] * hb[c]; k++; }
                double mean = k ? sum / k : 0, var = k ? sq / k - mean * mean : 0;
                double inv = 1.0 / sqrt((var > 0 ? var : 0) + 1e-6);
                for (int c = 0; c < n; c++) hb[c] = (float)((hb[c] - mean) * inv);
            }
        }
        for (int c = 0; c < n; c++) {
            float m = w->hbuf[c];
            for (int j = 1; j < s->G; j++) m = fmaxf(m, w->hbuf[(size_t)j * w->acc_cap + c]);
            w->acc[c] += m;
        }
    }
}

static int ensure_acc(triatt_scorer *s, int n_cells, bool heads)
{
    for (int t = 0; t < s->nt; t++) {
        worker *w = &s->wk[t];
        if (w->acc_cap < (size_t)n_cells || (heads && !w->hbuf)) {
            size_t cap = LCX_MAX((size_t)n_cells, w->acc_cap);
            float *a = realloc(w->acc, cap * sizeof(float));
            if (!a) return LCX_ENOMEM;
            w->acc = a;
            if (heads || w->hbuf) {
                float *h = realloc(w->hbuf, cap * s->G * sizeof(float));
                if (!h) return LCX_ENOMEM;
                w->hbuf = h;
            }
            w->acc_cap = cap;
        }
    }
    return LCX_OK;
}

/* Attention-layer blocks with l >= skip; skip is clamped to 0 when it would leave none.
 * Groups: the index in blocks of every TRIATT_MAX_STREAMS-th KV head of a layer (a group is
 * that head and the next ones of the layer, up to TRIATT_MAX_STREAMS). */
static void collect_blocks(triatt_scorer *s, int skip)
{
    s->n_blocks = 0;
    s->n_groups = 0;
    for (int pass = 0; pass < 2 && !s->n_blocks; pass++) {
        for (int l = pass ? 0 : skip; l < s->L; l++)
            if (s->attn[l])
                for (int g = 0; g < s->KV; g++) {
                    if (g % TRIATT_MAX_STREAMS == 0) s->groups[s->n_groups++] = s->n_blocks;
                    s->blocks[s->n_blocks++] = l * s->KV + g;
                }
    }
}

int triatt_score(triatt_scorer *s, const triatt_calib *cal, const triatt_keys *keys,
                 const int32_t *positions, int n_cells, double P, int32_t win_thr, float *scores)
{
    if (!s || !cal || !keys || !positions || !scores || n_cells < 0) return LCX_EINVAL;
    int krc = check_keys(s, keys);
    if (krc < 0) return krc;
    if (!triatt_calib_ready(cal)) return LCX_ESTATE;
    if (n_cells == 0) return LCX_OK;
    bool ref = s->o.aggregation == TRIATT_AGG_REFERENCE;
    int rc = ensure_acc(s, n_cells, ref);
    if (rc < 0) return rc;
    triatt_trig_sums(s->omega, s->fc, P, s->cs, s->sn);
    collect_blocks(s, ref ? 0 : s->o.skip_layers);
    s->cal = cal; s->keys = keys; s->pos = positions; s->win_thr = win_thr; s->n_cells = n_cells;
    pool_run(s, ref ? job_reference : job_blockmean);
    for (int t = 0; t < s->nt; t++)
        if (s->wk[t].rc < 0) return s->wk[t].rc;
    /* merge per-thread accumulators in thread order (deterministic for a thread count) */
    const float inv = 1.0f / (float)s->n_blocks;
    for (int c = 0; c < n_cells; c++) {
        float v = s->wk[0].acc[c];
        for (int t = 1; t < s->nt; t++) v += s->wk[t].acc[c];
        scores[c] = positions[c] >= win_thr ? NAN : v * inv;
    }
    return LCX_OK;
}

/* ---- fast path ---- */
int triatt_fast_reserve(triatt_scorer *s, int n_slots)
{
    if (!s || n_slots < 0) return LCX_EINVAL;
    if (s->o.aggregation != TRIATT_AGG_BLOCKMEAN) return LCX_ENOTSUP;
    if (n_slots <= s->n_slots) return LCX_OK;
    size_t stride = ((size_t)2 * s->fc + 1 + 7) & ~(size_t)7;  /* 32-byte aligned rows */
    float *f = realloc(s->feat, (size_t)n_slots * stride * sizeof(float));
    if (!f) return LCX_ENOMEM;
    s->feat = f;
    uint64_t *g = realloc(s->feat_gen, (size_t)n_slots * sizeof(uint64_t));
    if (!g) return LCX_ENOMEM;
    s->feat_gen = g;
    int32_t *fp = realloc(s->feat_pos, (size_t)n_slots * sizeof(int32_t));
    if (!fp) return LCX_ENOMEM;
    s->feat_pos = fp;
    for (int i = s->n_slots; i < n_slots; i++) s->feat_gen[i] = UINT64_MAX;
    s->fstride = stride;
    s->n_slots = n_slots;
    return LCX_OK;
}

/* Fast-path entry for the cells [s->fc0, s->fc1) split over the threads by cell range, so
 * every thread owns its rows (no accumulators to merge). */
static void job_fast_set(triatt_scorer *s, worker *w)
{
    const int fc = s->fc;
    const bool use_trig = s->o.terms != TRIATT_TERMS_EXTRA_ONLY;
    const bool use_extra = s->o.terms != TRIATT_TERMS_TRIG_ONLY;
    const int total = s->set_c1 - s->set_c0, per = (total + s->nt - 1) / s->nt;
    const int c_lo = s->set_c0 + w->tid * per, c_hi = LCX_MIN(s->set_c1, c_lo + per);
    if (c_hi <= c_lo) return;
    for (int c = c_lo; c < c_hi; c++) memset(s->feat + (size_t)c * s->fstride, 0, s->fstride * sizeof(float));
    for (int i = 0; i < s->n_blocks; i++) {
        int l = s->blocks[i] / s->KV, g = s->blocks[i] % s->KV;
        const float *cr, *ci, *cabs;
        if (triatt_calib_block(s->cal, l, g, &cr, &ci, &cabs) < 0) { w->rc = LCX_ESTATE; return; }
        triatt_kparams kp = {.m = w->m, .m_il = w->m_il, .n_rot = s->n_rot, .fc = fc, .pairing = s->pairing,
                             .use_trig = false, .use_extra = use_extra,
                             .f16 = !s->keys->get_q8 && s->keys->get16 != NULL, .eps = (float)s->o.eps};
        for (int f = 0; f < fc; f++) {
            double m = s->o.terms == TRIATT_TERMS_NO_MLR
                           ? cabs[f]
                           : cabs[f] - sqrt((double)cr[f] * cr[f] + (double)ci[f] * ci[f] + s->o.eps);
            w->m[f] = (float)m;
            w->m_il[2 * f] = w->m_il[2 * f + 1] = (float)(m * 0.5);
        }
        for (int c0 = c_lo; c0 < c_hi; c0 += CHUNK) {
            int k = LCX_MIN(CHUNK, c_hi - c0);
            size_t stride = default_stride(s, s->keys);
            const void *kr0 = fetch(s->keys, l, g, c0, k, w->scratch, &stride);
            if (!kr0) { w->rc = LCX_EIO; return; }
            if (s->keys->get_q8) {
                /* one-time entry: dequantize the chunk (second half of the scratch, the
                 * accessor may use the first) and continue as float rows */
                float *deq = w->scratch + (size_t)CHUNK * s->hd;
                for (int r = 0; r < k; r++)
                    triatt__q8_row_to_f32((const unsigned char *)kr0 + (size_t)r * stride, s->n_rot,
                                          deq + (size_t)r * s->hd);
                kr0 = deq;
                stride = s->hd;
            }
            float *rows = s->feat + (size_t)c0 * s->fstride;
            if (use_trig) triatt__fast_accum(cr, ci, kr0, stride, k, kp.f16, s->pairing, fc, rows, s->fstride);
            if (use_extra) {
                /* e via the scoring kernel (trig off), then added into the rows' last slot */
                float ebuf[CHUNK];
                s->kernel(&kp, kr0, stride, k, ebuf, false);
                for (int r = 0; r < k; r++) rows[(size_t)r * s->fstride + 2 * fc] += ebuf[r];
            }
        }
    }
    const float inv = 1.0f / (float)s->n_blocks;
    for (int c = c_lo; c < c_hi; c++) {
        float *row = s->feat + (size_t)c * s->fstride;
        for (int j = 0; j <= 2 * fc; j++) row[j] *= inv;
    }
}

int triatt_fast_set_cells(triatt_scorer *s, const triatt_calib *cal, const triatt_keys *keys,
                          const int32_t *positions, int cell0, int n)
{
    if (!s || !cal || !keys || !positions || cell0 < 0 || n < 0) return LCX_EINVAL;
    int krc = check_keys(s, keys);
    if (krc < 0) return krc;
    if (s->o.aggregation != TRIATT_AGG_BLOCKMEAN) return LCX_ENOTSUP;
    if ((int64_t)cell0 + n > s->n_slots) return LCX_ELIMIT;
    if (!triatt_calib_ready(cal)) return LCX_ESTATE;
    if (!n) return LCX_OK;
    collect_blocks(s, s->o.skip_layers);
    s->cal = cal;
    s->keys = keys;
    s->set_c0 = cell0;
    s->set_c1 = cell0 + n;
    pool_run(s, job_fast_set);
    for (int t = 0; t < s->nt; t++)
        if (s->wk[t].rc < 0) {
            for (int c = cell0; c < cell0 + n; c++) s->feat_gen[c] = UINT64_MAX;
            return s->wk[t].rc;
        }
    uint64_t gen = triatt_calib_generation(cal);
    for (int c = cell0; c < cell0 + n; c++) {
        s->feat_gen[c] = gen;
        s->feat_pos[c] = positions[c];
    }
    return LCX_OK;
}

static bool row_stale(const triatt_scorer *s, uint64_t gen, const int32_t *positions, int c)
{
    return s->feat_gen[c] != gen || s->feat_pos[c] != positions[c];
}

int triatt_fast_refresh(triatt_scorer *s, const triatt_calib *cal, const triatt_keys *keys,
                        const int32_t *positions, int n_cells)
{
    if (!s || !cal || !positions || n_cells < 0) return LCX_EINVAL;
    if (n_cells > s->n_slots) return LCX_ELIMIT;
    uint64_t gen = triatt_calib_generation(cal);
    int done = 0;
    for (int c = 0; c < n_cells;) {
        if (!row_stale(s, gen, positions, c)) { c++; continue; }
        int e = c + 1;
        while (e < n_cells && row_stale(s, gen, positions, e)) e++;   /* contiguous stale run */
        int rc = triatt_fast_set_cells(s, cal, keys, positions, c, e - c);
        if (rc < 0) return rc;
        done += e - c;
        c = e;
    }
    return done;
}

static void job_fast(triatt_scorer *s, worker *w)
{
    int per = (s->n_cells + s->nt - 1) / s->nt;
    int c0 = w->tid * per, c1 = LCX_MIN(s->n_cells, c0 + per);
    if (c1 > c0)
        s->fast_kernel(s->feat + (size_t)c0 * s->fstride, s->fstride, s->fc, s->fast_v, c1 - c0, s->out + c0);
}

int triatt_fast_score(triatt_scorer *s, const triatt_calib *cal, const int32_t *positions,
                      int n_cells, double P, int32_t win_thr, float *scores)
{
    if (!s || !cal || !positions || !scores || n_cells < 0) return LCX_EINVAL;
    if (s->o.aggregation != TRIATT_AGG_BLOCKMEAN) return LCX_ENOTSUP;
    if (n_cells > s->n_slots) return LCX_ELIMIT;
    uint64_t gen = triatt_calib_generation(cal);
    for (int c = 0; c < n_cells; c++)
        if (row_stale(s, gen, positions, c)) return LCX_ESTATE;
    triatt_trig_sums(s->omega, s->fc, P, s->cs, s->sn);
    for (int f = 0; f < s->fc; f++) {
        s->fast_v[f] = (float)s->cs[f];
        s->fast_v[s->fc + f] = (float)-s->sn[f];
    }
    s->out = scores;
    s->n_cells = n_cells;
    pool_run(s, job_fast);
    for (int c = 0; c < n_cells; c++)
        if (positions[c] >= win_thr) scores[c] = NAN;
    return LCX_OK;
}

/* ---- dense accessor ---- */
static const float *dense_get(void *ud, int layer, int kv, int cell0, int n, float *scratch, size_t *stride)
{
    const triatt_dense_keys *d = ud;
    (void)scratch;
    if (cell0 < 0 || cell0 + n > d->n_cells_cap) return NULL;
    *stride = d->head_dim;
    return d->data + (((size_t)layer * d->n_kv_heads + kv) * d->n_cells_cap + cell0) * d->head_dim;
}

void triatt_keys_dense(triatt_keys *k, const triatt_dense_keys *d)
{
    k->get = dense_get;
    k->get16 = NULL;
    k->get_q8 = NULL;
    k->ud = (void *)d;
}
