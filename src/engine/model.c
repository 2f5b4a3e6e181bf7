/* Model loading (GGUF -> validated weight views) for llama / qwen2 / qwen3.
 *
 * Weights are not copied: each matrix is a view into the mmap'd file with its ggml type.
 * 1-D tensors (norm weights, biases, rope frequency factors) are converted to F32 at load
 * time because they are tiny and read in hot loops. Every tensor's shape is checked against
 * the hyper-parameters before use, so the forward pass (forward.c) never re-checks. */
#include "engine/model.h"

#include <math.h>
#include <stdarg.h>
#include <sys/mman.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int eng__errf(char *err, size_t n, int rc, const char *fmt, ...)
{
    if (err && n) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, n, fmt, ap);
        va_end(ap);
    }
    return rc;
}

typedef struct {
    eng_model *m;
    char *err;
    size_t errlen;
    const char *arch;
} loader;

static int get_u32_key(loader *L, const char *suffix, uint32_t *out, bool required, uint32_t def)
{
    char key[128];
    snprintf(key, sizeof key, "%s.%s", L->arch, suffix);
    int rc = eng__gguf_get_u32(L->m->g, key, out);
    if (rc == LCX_ENOTFOUND && !required) { *out = def; return 0; }
    if (rc) return eng__errf(L->err, L->errlen, LCX_ECORRUPT, "model: metadata %s %s", key,
                        rc == LCX_ENOTFOUND ? "is missing" : "is not an unsigned integer");
    return 0;
}
static int get_f32_key(loader *L, const char *suffix, float *out, float def)
{
    char key[128];
    snprintf(key, sizeof key, "%s.%s", L->arch, suffix);
    int rc = eng__gguf_get_f32(L->m->g, key, out);
    if (rc == LCX_ENOTFOUND) { *out = def; return 0; }
    if (rc || !isfinite(*out)) return eng__errf(L->err, L->errlen, LCX_ECORRUPT, "model: metadata %s is not a number", key);
    return 0;
}

/* Looks up a 2-D weight matrix (ne = [n_in, n_out]). */
static int get_mat(loader *L, const char *name, int64_t n_in, int64_t n_out, bool required, eng_wmat *w)
{
    memset(w, 0, sizeof *w);
    const eng_tensor *t = eng__gguf_tensor(L->m->g, name);
    if (!t) {
        if (!required) return 0;
        return eng__errf(L->err, L->errlen, LCX_ECORRUPT, "model: tensor %s is missing", name);
    }
    if (!eng__type_supported(t->type) || eng__type_internal(t->type) || t->type == ENG_T_Q8_K)
        return eng__errf(L->err, L->errlen, LCX_ENOTSUP, "model: tensor %s has unsupported type %d (%s)", name,
                    t->type, eng__type_name((eng_type)t->type));
    if (t->ne[0] != n_in || t->ne[1] != n_out || t->ne[2] != 1 || t->ne[3] != 1)
        return eng__errf(L->err, L->errlen, LCX_ECORRUPT,
                    "model: tensor %s has shape [%lld, %lld, %lld, %lld], expected [%lld, %lld]", name,
                    (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2], (long long)t->ne[3],
                    (long long)n_in, (long long)n_out);
    if (n_in % eng__type_block_elems((eng_type)t->type))
        return eng__errf(L->err, L->errlen, LCX_ECORRUPT, "model: tensor %s row %lld not a multiple of its block", name,
                    (long long)n_in);
    w->data = t->data;
    w->type = (eng_type)t->type;
    w->n_in = n_in;
    w->n_out = n_out;
    w->row_bytes = eng__row_bytes(w->type, n_in);
    L->m->info.weight_bytes += t->nbytes;
    return 0;
}

/* Looks up a 1-D tensor of n elements and converts it to a fresh F32 array. */
static int get_vec(loader *L, const char *name, int64_t n, bool required, float **out)
{
    *out = NULL;
    const eng_tensor *t = eng__gguf_tensor(L->m->g, name);
    if (!t) {
        if (!required) return 0;
        return eng__errf(L->err, L->errlen, LCX_ECORRUPT, "model: tensor %s is missing", name);
    }
    if (!eng__type_supported(t->type) || eng__type_internal(t->type) || t->type == ENG_T_Q8_K)
        return eng__errf(L->err, L->errlen, LCX_ENOTSUP, "model: tensor %s has unsupported type %d", name, t->type);
    if (t->ne[0] != n || t->ne[1] != 1 || t->ne[2] != 1 || t->ne[3] != 1 ||
        n % eng__type_block_elems((eng_type)t->type))
        return eng__errf(L->err, L->errlen, LCX_ECORRUPT, "model: tensor %s has %lld x %lld elements, expected %lld",
                    name, (long long)t->ne[0], (long long)t->ne[1], (long long)n);
    float *v = malloc((size_t)n * sizeof(float));
    if (!v) return eng__errf(L->err, L->errlen, LCX_ENOMEM, "model: out of memory");
    eng__dequant_row((eng_type)t->type, t->data, v, n);
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(v[i])) {
            free(v);
            return eng__errf(L->err, L->errlen, LCX_ECORRUPT, "model: tensor %s holds a non-finite value", name);
        }
    L->m->info.weight_bytes += t->nbytes;
    *out = v;
    return 0;
}

void eng_model_free(eng_model *m)
{
    if (!m) return;
    if (m->layers)
        for (int i = 0; i < m->info.n_layer; i++) {
            eng_layer *l = &m->layers[i];
            free(l->attn_norm); free(l->ffn_norm);
            free(l->bq); free(l->bk); free(l->bv);
            free(l->q_norm); free(l->k_norm);
        }
    free(m->layers);
    free(m->out_norm);
    free(m->rope_freqs);
    if (m->wcopy) munmap(m->wcopy, m->wcopy_len);
    eng__gguf_close(m->g);
    free(m);
}

const eng_model_info *eng_model_get_info(const eng_model *m) { return &m->info; }
const struct eng_gguf *eng_model_gguf(const eng_model *m) { return m->g; }

static int load(loader *L)
{
    eng_model *m = L->m;
    eng_model_info *I = &m->info;
    size_t alen;
    const char *a = eng__gguf_get_str(m->g, "general.architecture", &alen);
    if (!a) return eng__errf(L->err, L->errlen, LCX_ECORRUPT, "model: general.architecture is missing");
    if (alen >= sizeof m->arch_name) alen = sizeof m->arch_name - 1;
    memcpy(m->arch_name, a, alen);
    m->arch_name[alen] = 0;
    for (size_t i = 0; i < alen; i++)
        if ((unsigned char)m->arch_name[i] < 0x20 || (unsigned char)m->arch_name[i] > 0x7e) m->arch_name[i] = '?';
    L->arch = m->arch_name;
    I->arch_name = m->arch_name;
    if (!strcmp(m->arch_name, "llama")) {
        I->arch = ENG_ARCH_LLAMA;
        I->rope_type = ENG_ROPE_NORM;
    } else if (!strcmp(m->arch_name, "qwen2")) {
        I->arch = ENG_ARCH_QWEN2;
        I->rope_type = ENG_ROPE_NEOX;
    } else if (!strcmp(m->arch_name, "qwen3")) {
        I->arch = ENG_ARCH_QWEN3;
        I->rope_type = ENG_ROPE_NEOX;
    } else {
        return eng__errf(L->err, L->errlen, LCX_ENOTSUP,
                    "model: unsupported architecture '%s' (supported: llama, qwen2, qwen3)", m->arch_name);
    }
    uint32_t n_embd, n_layer, n_head, n_head_kv, n_ff, n_ctx, hd_k, hd_v, n_rot;
    int rc;
    if ((rc = get_u32_key(L, "embedding_length", &n_embd, true, 0))) return rc;
    if ((rc = get_u32_key(L, "block_count", &n_layer, true, 0))) return rc;
    if ((rc = get_u32_key(L, "attention.head_count", &n_head, true, 0))) return rc;
    if ((rc = get_u32_key(L, "attention.head_count_kv", &n_head_kv, false, n_head))) return rc;
    if ((rc = get_u32_key(L, "feed_forward_length", &n_ff, true, 0))) return rc;
    if ((rc = get_u32_key(L, "context_length", &n_ctx, false, 2048))) return rc;
    if (n_embd == 0 || n_embd > 65536 || n_layer == 0 || n_layer > 1024 || n_head == 0 || n_head > 1024 ||
        n_head_kv == 0 || n_head % n_head_kv || n_ff == 0 || n_ff > (1u << 20) || n_ctx == 0)
        return eng__errf(L->err, L->errlen, LCX_ECORRUPT,
                    "model: bad hyper-parameters (n_embd %u, n_layer %u, n_head %u, n_head_kv %u, n_ff %u, ctx %u)",
                    n_embd, n_layer, n_head, n_head_kv, n_ff, n_ctx);
    if (n_head / n_head_kv > 64)   /* attention keeps per-group state on the stack */
        return eng__errf(L->err, L->errlen, LCX_ENOTSUP, "model: %u query heads per KV head (max 64)", n_head / n_head_kv);
    uint32_t hd_def = n_embd / n_head;
    if ((rc = get_u32_key(L, "attention.key_length", &hd_k, false, hd_def))) return rc;
    if ((rc = get_u32_key(L, "attention.value_length", &hd_v, false, hd_k))) return rc;
    if (hd_k != hd_v || hd_k == 0 || hd_k > 1024 || hd_k % 2)
        return eng__errf(L->err, L->errlen, LCX_ENOTSUP, "model: head sizes k=%u v=%u not supported", hd_k, hd_v);
    if ((rc = get_u32_key(L, "rope.dimension_count", &n_rot, false, hd_k))) return rc;
    if (n_rot == 0 || n_rot > hd_k || n_rot % 2)
        return eng__errf(L->err, L->errlen, LCX_ECORRUPT, "model: rope.dimension_count %u bad for head size %u", n_rot, hd_k);
    I->n_embd = (int)n_embd; I->n_layer = (int)n_layer; I->n_head = (int)n_head;
    I->n_head_kv = (int)n_head_kv; I->n_ff = (int)n_ff; I->n_ctx_train = (int)LCX_MIN(n_ctx, 1u << 30);
    I->head_dim = (int)hd_k; I->n_rot = (int)n_rot;
    if ((rc = get_f32_key(L, "rope.freq_base", &I->rope_freq_base, 10000.0f))) return rc;
    if ((rc = get_f32_key(L, "attention.layer_norm_rms_epsilon", &I->rms_eps, 1e-5f))) return rc;
    if (I->rope_freq_base <= 0 || I->rms_eps < 0)
        return eng__errf(L->err, L->errlen, LCX_ECORRUPT, "model: bad rope.freq_base / rms epsilon");
    /* RoPE scaling: none or linear (positions divided by the factor). YaRN / LongRoPE change
     * the frequencies per dimension and attention magnitude; refused rather than run wrong. */
    I->rope_freq_scale = 1.0f;
    {
        char key[128];
        snprintf(key, sizeof key, "%s.rope.scaling.type", L->arch);
        size_t tl;
        const char *st = eng__gguf_get_str(m->g, key, &tl);
        float factor = 0;
        if ((rc = get_f32_key(L, "rope.scaling.factor", &factor, 0))) return rc;
        if (st && !(tl == 4 && !memcmp(st, "none", 4))) {
            if (tl == 6 && !memcmp(st, "linear", 6)) {
                if (factor > 0) I->rope_freq_scale = 1.0f / factor;
            } else {
                return eng__errf(L->err, L->errlen, LCX_ENOTSUP, "model: rope scaling '%.*s' is not supported (none, linear)",
                            (int)LCX_MIN(tl, 32), st);
            }
        }
        float lin = 0;
        if ((rc = get_f32_key(L, "rope.scale_linear", &lin, 0))) return rc;
        if (lin > 0) I->rope_freq_scale = 1.0f / lin;
    }
    int32_t ft = -1;
    if (eng__gguf_get_i32(m->g, "general.file_type", &ft) != 0) ft = -1;
    I->file_type = ft;

    const eng_tensor *te = eng__gguf_tensor(m->g, "token_embd.weight");
    if (!te) return eng__errf(L->err, L->errlen, LCX_ECORRUPT, "model: tensor token_embd.weight is missing");
    if (te->ne[1] < 1 || te->ne[1] > (1 << 24))
        return eng__errf(L->err, L->errlen, LCX_ECORRUPT, "model: vocabulary size %lld out of range", (long long)te->ne[1]);
    I->n_vocab = (int)te->ne[1];
    if ((rc = get_mat(L, "token_embd.weight", n_embd, I->n_vocab, true, &m->tok_embd))) return rc;
    if ((rc = get_mat(L, "output.weight", n_embd, I->n_vocab, false, &m->output))) return rc;
    if (!m->output.data) {
        m->output = m->tok_embd;
        I->tied_output = true;
    }
    if ((rc = get_vec(L, "output_norm.weight", n_embd, true, &m->out_norm))) return rc;
    if ((rc = get_vec(L, "rope_freqs.weight", n_rot / 2, false, &m->rope_freqs))) return rc;

    m->layers = calloc(n_layer, sizeof *m->layers);
    if (!m->layers) return eng__errf(L->err, L->errlen, LCX_ENOMEM, "model: out of memory");
    const int64_t qd = (int64_t)n_head * hd_k, kvd = (int64_t)n_head_kv * hd_k;
    bool bias = I->arch == ENG_ARCH_QWEN2;
    for (uint32_t il = 0; il < n_layer; il++) {
        eng_layer *l = &m->layers[il];
        char nm[96];
#define NM(s) (snprintf(nm, sizeof nm, "blk.%u." s, il), nm)
        if ((rc = get_vec(L, NM("attn_norm.weight"), n_embd, true, &l->attn_norm))) return rc;
        if ((rc = get_mat(L, NM("attn_q.weight"), n_embd, qd, true, &l->wq))) return rc;
        if ((rc = get_mat(L, NM("attn_k.weight"), n_embd, kvd, true, &l->wk))) return rc;
        if ((rc = get_mat(L, NM("attn_v.weight"), n_embd, kvd, true, &l->wv))) return rc;
        if ((rc = get_mat(L, NM("attn_output.weight"), qd, n_embd, true, &l->wo))) return rc;
        if ((rc = get_vec(L, NM("attn_q.bias"), qd, bias, &l->bq))) return rc;
        if ((rc = get_vec(L, NM("attn_k.bias"), kvd, bias, &l->bk))) return rc;
        if ((rc = get_vec(L, NM("attn_v.bias"), kvd, bias, &l->bv))) return rc;
        if (I->arch == ENG_ARCH_QWEN3) {
            if ((rc = get_vec(L, NM("attn_q_norm.weight"), hd_k, true, &l->q_norm))) return rc;
            if ((rc = get_vec(L, NM("attn_k_norm.weight"), hd_k, true, &l->k_norm))) return rc;
        }
        if ((rc = get_vec(L, NM("ffn_norm.weight"), n_embd, true, &l->ffn_norm))) return rc;
        if ((rc = get_mat(L, NM("ffn_gate.weight"), n_embd, n_ff, true, &l->wg))) return rc;
        if ((rc = get_mat(L, NM("ffn_up.weight"), n_embd, n_ff, true, &l->wu))) return rc;
        if ((rc = get_mat(L, NM("ffn_down.weight"), n_ff, n_embd, true, &l->wd))) return rc;
#undef NM
    }
    return 0;
}

/* Calls fn on every weight matrix view of the model (tied output counted once). */
static void each_wmat(eng_model *m, void (*fn)(eng_wmat *, void *), void *ud)
{
    fn(&m->tok_embd, ud);
    if (!m->info.tied_output) fn(&m->output, ud);
    for (int il = 0; il < m->info.n_layer; il++) {
        eng_layer *l = &m->layers[il];
        eng_wmat *w[7] = {&l->wq, &l->wk, &l->wv, &l->wo, &l->wg, &l->wu, &l->wd};
        for (int k = 0; k < 7; k++) fn(w[k], ud);
    }
}

typedef struct { uintptr_t lo, hi; const uint8_t *nb; } span;
static void span_add(eng_wmat *w, void *ud)
{
    span *s = ud;
    const uintptr_t a = (uintptr_t)w->data, b = a + w->row_bytes * (size_t)w->n_out;
    if (a < s->lo) s->lo = a;
    if (b > s->hi) s->hi = b;
}
static void span_rebase(eng_wmat *w, void *ud)
{
    span *s = ud;
    w->data = s->nb + ((uintptr_t)w->data - s->lo);
}

/* Q5_0 matrices in the huge-page copy are re-laid in place as Q5_0X4 (groups of 4 blocks,
 * same 22 bytes per block; layout in quant.h) when their rows are a multiple of 128
 * elements. Why: the generation kernel for that layout needs ~12 vector ops per block
 * instead of ~17 (the Q5_0 matvec was compute-bound at ~7 GB/s against ~10 GB/s for Q8_0
 * on the dev VM), with bit-identical results. Only in the copy (the file mapping stays as
 * it is); no extra memory. */
static void relayout_q5_0(eng_wmat *w, void *ud)
{
    (void)ud;
    if (w->type != ENG_T_Q5_0 || w->n_in % (4 * ENG_QK5_0)) return;
    uint8_t *d = (uint8_t *)(uintptr_t)w->data;
    for (int64_t r = 0; r < w->n_out; r++) {
        uint8_t *row = d + (size_t)r * w->row_bytes;
        eng__q5_0x4_from_q5_0(row, row, w->n_in);
    }
    w->type = ENG_T_Q5_0X4;
}

/* Transparent huge pages can be had with madvise (the kernel's setting is "always" or
 * "madvise", not "never"); without them the copy would only cost memory. */
static bool thp_available(void)
{
    char buf[128] = "";
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    if (!f) return false;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    return strstr(buf, "[always]") || strstr(buf, "[madvise]");
}

/* MemAvailable from /proc/meminfo in bytes, or 0 when unknown. */
static uint64_t mem_available(void)
{
    char line[128];
    unsigned long long kb = 0;
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f) return 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1) break;
    fclose(f);
    return (uint64_t)kb * 1024;
}

/* Copies the weight matrices into anonymous memory backed by 2 MiB transparent huge pages.
 * Why: generation streams every weight once per token (400-500 MB for a 0.5B model). Over
 * the 4 KiB page-cache pages of the file mapping that is one dTLB miss and one page walk
 * per 4 KiB, and hardware prefetchers stop at each 4 KiB boundary; huge pages remove both.
 * Costs the copy at load (well under a second for 500 MB, lost in the noise of loading) and
 * the weights' size in anonymous memory instead of shared page cache. Best effort: any
 * failure keeps the mapping. */
static void weights_to_hugepages(eng_model *m)
{
    span s = {UINTPTR_MAX, 0, NULL};
    each_wmat(m, span_add, &s);
    if (s.hi <= s.lo) return;
    /* A copy converts page cache (shared, reclaimable) into anonymous memory: only do it when
     * it takes at most half of what the system says is available. */
    const uint64_t avail = mem_available();
    if (avail && (uint64_t)(s.hi - s.lo) > avail / 2) return;
    const size_t HP = LCX_HUGE_PAGE, off = s.lo & 4095;
    const size_t len = (off + (s.hi - s.lo) + HP - 1) / HP * HP;
    uint8_t *raw = mmap(NULL, len + HP, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) return;
    /* align to 2 MiB, give back the slack on both sides */
    uint8_t *base = (uint8_t *)(((uintptr_t)raw + HP - 1) & ~(uintptr_t)(HP - 1));
    if (base > raw) munmap(raw, (size_t)(base - raw));
    if (base + len < raw + len + HP) munmap(base + len, (size_t)(raw + len + HP - (base + len)));
#ifdef MADV_HUGEPAGE
    (void)madvise(base, len, MADV_HUGEPAGE);
#endif
    /* Copy in 32 MiB pieces and drop each piece's file pages from this process right after
     * (they stay in the page cache; a later read through the gguf handle faults them back
     * in), so RSS holds the weights once, also at the peak. Only whole pages are dropped. */
    const uintptr_t pgm = (uintptr_t)sysconf(_SC_PAGESIZE) - 1;
    for (uintptr_t a = s.lo; a < s.hi;) {
        const uintptr_t b = LCX_MIN(s.hi, a + ((uintptr_t)32 << 20));
        memcpy(base + off + (a - s.lo), (const void *)a, b - a);
        const uintptr_t pg0 = (a + pgm) & ~pgm, pg1 = b & ~pgm;
        if (pg1 > pg0) (void)madvise((void *)pg0, pg1 - pg0, MADV_DONTNEED);
        a = b;
    }
    s.nb = base + off;
    each_wmat(m, span_rebase, &s);
    each_wmat(m, relayout_q5_0, NULL);
    /* the tied output matrix is tok_embd (each_wmat visits it once): point it at the copy
     * (as re-laid) too, or the lm_head matvec (a quarter to a third of a token's weight
     * bytes) keeps streaming the file's 4 KiB pages */
    if (m->info.tied_output) m->output = m->tok_embd;
    (void)mprotect(base, len, PROT_READ);
    m->wcopy = base;
    m->wcopy_len = len;
}

int eng_model_load(const char *path, eng_model **out, char *err, size_t errlen)
{
    *out = NULL;
    if (err && errlen) err[0] = 0;
    eng_model *m = calloc(1, sizeof *m);
    if (!m) return eng__errf(err, errlen, LCX_ENOMEM, "model: out of memory");
    int rc = eng__gguf_open(path, &m->g, err, errlen);
    if (rc) { free(m); return rc; }
    loader L = {m, err, errlen, NULL};
    rc = load(&L);
    if (rc) { eng_model_free(m); return rc; }
    /* LCX_ENGINE_WEIGHTS=mmap keeps the weights in the file mapping (no copy, no extra RSS) */
    const char *wm = getenv("LCX_ENGINE_WEIGHTS");
    if (!(wm && !strcmp(wm, "mmap")) && thp_available()) {
        weights_to_hugepages(m);
    } else {
        /* staying in the mapping: start reading the weights in now (a cold file would
         * otherwise be faulted in 4 KiB at a time by the first decode) */
        span s = {UINTPTR_MAX, 0, NULL};
        each_wmat(m, span_add, &s);
        const uintptr_t pgm = (uintptr_t)sysconf(_SC_PAGESIZE) - 1, a = s.lo & ~pgm;
        if (s.hi > a) (void)madvise((void *)a, s.hi - a, MADV_WILLNEED);
    }
    *out = m;
    return 0;
}
