/* Allocation failure in the core libraries: for a representative call sequence of each
 * (store open / append / replay / search / snapshot / reopen, and prepare / commit /
 * delete_path / reopen; index add / remove / search;
 * a scope build; the MRCR JSONL reader; a TriAttention round), the Nth allocation fails, for
 * every N until a run no longer reaches N, twice: once alone (the code must recover), once
 * with every later allocation failing too (real exhaustion). Each run must
 *   - return a negative error code, or succeed with exactly the reference result (a failure
 *     the code tolerates must not change what it returns: no partial result);
 *   - leave nothing half-done behind: a store still validates and reopens with all of a batch
 *     or none of it (all when the append was acknowledged); a failed index add leaves the
 *     index as it was; a failed scope build is rebuilt by the next index call;
 *   - leak nothing and never crash (the ASan tier runs this under ASan + LSan).
 * How: this test is linked with -Wl,--wrap for malloc, calloc, realloc, strdup, strndup,
 * aligned_alloc and posix_memalign, so every allocation of the libraries' code (and
 * cJSON's, through cJSON_InitHooks) passes the counter below. Allocations inside libc
 * (fopen, realpath) and page mappings (lcx__big_realloc's mmap) are not counted. The
 * sequences stay single-threaded (small batches, serial scope build) so N is deterministic. */
#define _GNU_SOURCE
#include "testutil.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <execinfo.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "eval/lcx_eval.h"
#include "longctx/lcx.h"
#include "longctx/lcx_scope.h"
#include "longctx/triatt.h"
#include "scope/scopes_int.h"

/* ---- the allocation counter ---------------------------------------------------------- */
static atomic_bool oom_armed;
static atomic_long oom_seen, oom_fired;
static long oom_at, oom_span;   /* the run fails allocations [oom_at, oom_at + oom_span) */

static bool oom_fail(void)
{
    if (!atomic_load(&oom_armed)) return false;
    long k = atomic_fetch_add(&oom_seen, 1) + 1;
    if (k < oom_at || k - oom_at >= oom_span) return false;
    atomic_fetch_add(&oom_fired, 1);
    if (getenv("LCX_OOM_TRACE") && atol(getenv("LCX_OOM_TRACE")) == k) {   /* debugging: who failed */
        void *bt[16];
        backtrace_symbols_fd(bt, backtrace(bt, 16), 2);
    }
    return true;
}

void *__real_malloc(size_t n);
void *__real_calloc(size_t a, size_t b);
void *__real_realloc(void *p, size_t n);
char *__real_strdup(const char *s);
char *__real_strndup(const char *s, size_t n);
void *__real_aligned_alloc(size_t a, size_t n);
int __real_posix_memalign(void **p, size_t a, size_t n);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t a, size_t b);
void *__wrap_realloc(void *p, size_t n);
char *__wrap_strdup(const char *s);
char *__wrap_strndup(const char *s, size_t n);
void *__wrap_aligned_alloc(size_t a, size_t n);
int __wrap_posix_memalign(void **p, size_t a, size_t n);

void *__wrap_malloc(size_t n) { return oom_fail() ? NULL : __real_malloc(n); }
void *__wrap_calloc(size_t a, size_t b) { return oom_fail() ? NULL : __real_calloc(a, b); }
void *__wrap_realloc(void *p, size_t n) { return oom_fail() ? NULL : __real_realloc(p, n); }
char *__wrap_strdup(const char *s) { return oom_fail() ? NULL : __real_strdup(s); }
char *__wrap_strndup(const char *s, size_t n) { return oom_fail() ? NULL : __real_strndup(s, n); }
void *__wrap_aligned_alloc(size_t a, size_t n) { return oom_fail() ? NULL : __real_aligned_alloc(a, n); }
int __wrap_posix_memalign(void **p, size_t a, size_t n) { return oom_fail() ? ENOMEM : __real_posix_memalign(p, a, n); }

static void *cj_malloc(size_t n) { return __wrap_malloc(n); }

/* ---- the sweep ------------------------------------------------------------------------ */
typedef struct {
    const char *name;
    void (*prep)(void *ctx);                           /* unarmed: fresh inputs */
    int (*run)(void *ctx, char *res, size_t cap);      /* armed: the sequence; res = summary */
    void (*verify)(void *ctx, int rc);                 /* unarmed: what a failure left behind */
    void (*cleanup)(void *ctx);
} oom_seq;

static void arm(long at, long span)
{
    oom_at = at;
    oom_span = span;
    atomic_store(&oom_seen, 0);
    atomic_store(&oom_fired, 0);
    atomic_store(&oom_armed, true);
}
static void disarm(void) { atomic_store(&oom_armed, false); }

/* Returns the allocation points covered with one failure (the all-later pass covers the same). */
static long sweep(const oom_seq *q, void *ctx)
{
    char ref[4096], res[4096];
    q->prep(ctx);
    arm(LONG_MAX, 0);                                  /* counts, never fails */
    int rc = q->run(ctx, ref, sizeof ref);
    long total = atomic_load(&oom_seen);
    disarm();
    if (rc != 0) fail_msg("%s: reference run failed: %d", q->name, rc);
    if (q->verify) q->verify(ctx, rc);
    q->cleanup(ctx);
    long covered[2] = {0, 0}, errors[2] = {0, 0};
    for (int pass = 0; pass < 2; pass++) {
        for (long n = 1;; n++) {
            q->prep(ctx);
            arm(n, pass ? LONG_MAX : 1);
            res[0] = 0;
            rc = q->run(ctx, res, sizeof res);
            bool fired = atomic_load(&oom_fired) > 0;
            disarm();
            if (rc == 0) {
                if (strcmp(res, ref))
                    fail_msg("%s: allocation %ld failing (%s) changed the result:\n  got  %s\n  want %s", q->name, n,
                             pass ? "and all later" : "alone", res, ref);
            } else if (rc > 0) {
                fail_msg("%s: allocation %ld failing: positive return %d", q->name, n, rc);
            } else {
                errors[pass]++;
            }
            if (q->verify) q->verify(ctx, rc);
            q->cleanup(ctx);
            if (!fired) break;
            covered[pass]++;
            if (n > 100000) fail_msg("%s: more than 100000 allocation points", q->name);
        }
    }
    print_message("%s: %ld allocations in the sequence; %ld points covered failing alone (%ld errors returned), "
                  "%ld with all later failing (%ld errors)\n",
                  q->name, total, covered[0], errors[0], covered[1], errors[1]);
    assert_true(covered[0] > 0 && covered[0] == covered[1]);
    assert_true(errors[1] > 0);   /* exhaustion really is reported as an error */
    return covered[0];
}

static lcx_embedder *emb;

/* ---- store ---------------------------------------------------------------------------- */
typedef struct {
    char *dir;
    bool acked;   /* the append returned 0 */
} store_ctx;

static const char *const texts[] = {
    "the vault access code is 481729",
    "parse_header splits a line at the colon",
    "caf\xc3\xa9 na\xc3\xafve \xe4\xb8\xad\xe6\x96\x87 unicode text about the vault door",
    "open_vault(code) returns true when the code matches",
};
enum { NT = sizeof texts / sizeof texts[0] };

static void store_prep(void *c)
{
    store_ctx *s = c;
    s->dir = tu_tmpdir();
    s->acked = false;
}

static int hits_str(char *res, size_t cap, size_t at, const lcx_hit *h, int n)
{
    for (int i = 0; i < n; i++) at += (size_t)snprintf(res + at, at < cap ? cap - at : 0, "%u:%.5f,", h[i].id, h[i].score);
    return 0;
}

static int store_run(void *c, char *res, size_t cap)
{
    store_ctx *x = c;
    lcx_store *s = NULL;
    lcx_chunk cs[NT];
    for (int i = 0; i < NT; i++) {
        cs[i] = lcx_chunk_init();
        cs[i].text = texts[i];
        cs[i].text_len = (uint32_t)strlen(texts[i]);
        cs[i].tok_start = i * 10;
        cs[i].tok_end = i * 10 + 9;
        cs[i].layer = i % 2;
        cs[i].score = 0.25f * (float)i;
    }
    int rc = lcx_store_open(x->dir, emb, NULL, &s);
    if (rc) return rc;
    uint32_t first = 0;
    rc = lcx_store_append(s, cs, NT, &first);
    if (rc) goto out;
    x->acked = true;
    lcx_store_close(s);
    s = NULL;
    if ((rc = lcx_store_open(x->dir, emb, NULL, &s))) return rc;   /* replay of the log */
    lcx_hit h[4];
    lcx_search_opts o = lcx_search_defaults();
    o.top_k = 3;
    int n = lcx_store_search(s, "vault code", 10, &o, h, 4);
    if (n < 0) { rc = n; goto out; }
    size_t at = (size_t)snprintf(res, cap, "first=%u hits=", first);
    hits_str(res, cap, at, h, n);
    if ((rc = lcx_store_snapshot(s))) goto out;
    lcx_store_close(s);
    s = NULL;
    if ((rc = lcx_store_open(x->dir, emb, NULL, &s))) return rc;   /* from the snapshot */
    lcx_chunk got;
    if ((rc = lcx_store_get(s, first + 2, &got))) goto out;
    if (got.text_len != strlen(texts[2]) || memcmp(got.text, texts[2], got.text_len)) { rc = LCX_ECORRUPT; goto out; }
    n = lcx_store_search(s, "parse header colon", 18, &o, h, 4);
    if (n < 0) { rc = n; goto out; }
    at = strlen(res);
    at += (size_t)snprintf(res + at, cap - at, " count=%u reopened=", lcx_store_count(s));
    hits_str(res, cap, at, h, n);
out:
    lcx_store_close(s);
    return rc;
}

static void store_verify(void *c, int rc)
{
    store_ctx *x = c;
    char msg[512];
    char log[4200];
    snprintf(log, sizeof log, "%s", x->dir);
    int v = lcx_store_validate(x->dir, msg, sizeof msg);
    if (v != 0 && v != LCX_ENOTFOUND) fail_msg("store: after failure %d the store fails validation: %s", rc, msg);
    lcx_store *s = NULL;
    int o = lcx_store_open(x->dir, emb, NULL, &s);
    if (o) fail_msg("store: after failure %d the store does not reopen: %d", rc, o);
    uint32_t n = lcx_store_count(s);
    if (x->acked) assert_int_equal(n, NT);             /* acknowledged: all of it */
    else if (n != 0 && n != NT) fail_msg("store: a failed append left %u of %d chunks", n, NT);
    lcx_store_close(s);
}

static void store_cleanup(void *c)
{
    store_ctx *x = c;
    tu_rmrf(x->dir);
    free(x->dir);
    x->dir = NULL;
}

static void test_store(void **st)
{
    store_ctx c = {0};
    oom_seq q = {"store open/append/replay/search/snapshot/reopen", store_prep, store_run, store_verify, store_cleanup};
    assert_true(sweep(&q, &c) > 20);
}

/* Two-phase append and a path delete: prepare / commit a batch of code chunks, tombstone one
 * file's chunks, reopen. A failed commit adds all or nothing (store_verify); a failed delete
 * leaves every chunk of the path or none. */
static int store2_run(void *c, char *res, size_t cap)
{
    store_ctx *x = c;
    lcx_store *s = NULL;
    lcx_chunk cs[NT];
    for (int i = 0; i < NT; i++) {
        cs[i] = lcx_chunk_init();
        cs[i].text = texts[i];
        cs[i].text_len = (uint32_t)strlen(texts[i]);
        cs[i].path = i < 2 ? "src/a.c" : "src/b.py";
        cs[i].path_len = (uint32_t)strlen(cs[i].path);
        cs[i].line_start = (uint32_t)i * 10 + 1;
        cs[i].line_end = (uint32_t)i * 10 + 9;
        cs[i].file_type = LCX_FT_CODE;
    }
    int rc = lcx_store_open(x->dir, emb, NULL, &s);
    if (rc) return rc;
    lcx_store_prepared *p = NULL;
    uint32_t first = 0;
    if ((rc = lcx_store_prepare(s, cs, NT, &p))) goto out;
    rc = lcx_store_commit(s, p, &first);
    lcx_store_prepared_free(p);
    if (rc) goto out;
    x->acked = true;
    int d = lcx_store_delete_path(s, "src/a.c", 7);
    if (d < 0) {
        rc = d;
        uint32_t n = lcx_store_count(s);
        if (n != NT && n != NT - 2) fail_msg("store: a failed path delete left %u of %d chunks", n, NT);
        goto out;
    }
    lcx_store_close(s);
    s = NULL;
    if ((rc = lcx_store_open(x->dir, emb, NULL, &s))) return rc;
    lcx_hit h[4];
    lcx_search_opts o = lcx_search_defaults();
    o.top_k = 3;
    int n = lcx_store_search(s, "vault code", 10, &o, h, 4);
    if (n < 0) { rc = n; goto out; }
    size_t at = (size_t)snprintf(res, cap, "first=%u deleted=%d count=%u hits=", first, d, lcx_store_count(s));
    hits_str(res, cap, at, h, n);
out:
    lcx_store_close(s);
    return rc;
}

static void store2_verify(void *c, int rc)
{
    store_ctx *x = c;
    char msg[512];
    int v = lcx_store_validate(x->dir, msg, sizeof msg);
    if (v != 0 && v != LCX_ENOTFOUND) fail_msg("store: after failure %d the store fails validation: %s", rc, msg);
    lcx_store *s = NULL;
    int o = lcx_store_open(x->dir, emb, NULL, &s);
    if (o) fail_msg("store: after failure %d the store does not reopen: %d", rc, o);
    uint32_t n = lcx_store_count(s);
    if (x->acked) {
        if (n != NT && n != NT - 2) fail_msg("store: after failure %d, %u chunks (want %d, or %d after the delete)", rc, n, NT, NT - 2);
    } else if (n != 0 && n != NT) {
        fail_msg("store: a failed commit left %u of %d chunks", n, NT);
    }
    lcx_store_close(s);
}

static void test_store_two_phase(void **st)
{
    store_ctx c = {0};
    oom_seq q = {"store prepare/commit/delete_path/reopen", store_prep, store2_run, store2_verify, store_cleanup};
    assert_true(sweep(&q, &c) > 20);
}

/* ---- index ---------------------------------------------------------------------------- */
static void nop(void *c) { (void)c; }

static int index_run(void *c, char *res, size_t cap)
{
    (void)c;
    lcx_index *ix = NULL;
    int rc = lcx_index_new(emb, &ix);
    if (rc) return rc;
    for (int i = 0; i < NT; i++) {
        uint32_t id;
        rc = lcx_index_add(ix, texts[i], strlen(texts[i]), NULL, &id);
        if (rc) {
            /* no partial document: the index holds exactly the ones added before */
            bool was = atomic_load(&oom_armed);
            disarm();
            if (lcx_index_count(ix) != (uint32_t)i) fail_msg("index: failed add %d left count %u", i, lcx_index_count(ix));
            lcx_hit h[8];
            int n = lcx_index_search(ix, "vault code colon", 16, NULL, h, 8);
            for (int k = 0; k < n; k++)
                if (h[k].id >= (uint32_t)i) fail_msg("index: failed add %d is searchable (hit %u)", i, h[k].id);
            atomic_store(&oom_armed, was);
            goto out;
        }
    }
    if ((rc = lcx_index_remove(ix, 1))) goto out;
    lcx_hit h[4];
    lcx_search_opts o = lcx_search_defaults();
    o.top_k = 4;
    int n = lcx_index_search(ix, "vault code", 10, &o, h, 4);
    if (n < 0) { rc = n; goto out; }
    size_t at = (size_t)snprintf(res, cap, "count=%u hits=", lcx_index_count(ix));
    hits_str(res, cap, at, h, n);
out:
    lcx_index_free(ix);
    return rc;
}

static void test_index(void **st)
{
    oom_seq q = {"index add/remove/search", nop, index_run, NULL, nop};
    assert_true(sweep(&q, NULL) > 10);
}

/* ---- scope build ---------------------------------------------------------------------- */
typedef struct {
    char *dir;
    char proj[4200], data[4200];
    char ref[256];
} scope_ctx;

static void put(const char *dir, const char *rel, const char *text)
{
    char p[4400];
    snprintf(p, sizeof p, "%s/%s", dir, rel);
    assert_int_equal(tu_write(p, text, strlen(text)), 0);
}

static void scope_prep(void *c)
{
    scope_ctx *x = c;
    x->dir = tu_tmpdir();
    snprintf(x->proj, sizeof x->proj, "%s/proj", x->dir);
    snprintf(x->data, sizeof x->data, "%s/data", x->dir);
    mkdir(x->proj, 0700);
    mkdir(x->data, 0700);
    char p[4400];
    snprintf(p, sizeof p, "%s/.git", x->proj);
    mkdir(p, 0700);
    snprintf(p, sizeof p, "%s/src", x->proj);
    mkdir(p, 0700);
    put(x->proj, ".gitignore", "*.o\n");
    put(x->proj, "src/vault.c", "#include <stdio.h>\n/* the vault */\nint open_vault(int code)\n{\n    return code == 481729;\n}\n");
    put(x->proj, "src/util.py", "class Parser:\n    def parse_header(self, line):\n        return line.split(':')\n");
    put(x->proj, "README.md", "# proj\n\nThe vault opens with the access code.\n\n## Usage\n\nRun it.\n");
    put(x->proj, "skip.o", "binary");
}

static int scope_index(scope_ctx *x, char *res, size_t cap)
{
    lcx_scopes_opts so = lcx_scopes_defaults();
    so.data_dir = x->data;
    so.watch = false;
    lcx_scopes *m = NULL;
    int rc = lcx_scopes_open(&so, emb, &m);
    if (rc) return rc;
    lcx__scopes_set_serial(m, true);
    lcx_scope_info in;
    const char *code = NULL;
    rc = lcx_scopes_index(m, x->proj, NULL, NULL, &in, &code);
    if (rc == 0) {
        lcx_scope_info in2;
        rc = lcx_scopes_info(m, x->proj, &in2);
        if (rc == 0) snprintf(res, cap, "files=%u chunks=%u status=%s / %u %u", in.files, in.chunks, in.status, in2.files, in2.chunks);
    }
    lcx_scopes_close(m);
    return rc;
}

static int scope_run(void *c, char *res, size_t cap) { return scope_index(c, res, cap); }

static void scope_verify(void *c, int rc)
{
    scope_ctx *x = c;
    char res[256];
    int again = scope_index(x, res, sizeof res);
    if (again) fail_msg("scope: after failure %d the next index call fails too: %d", rc, again);
    if (!x->ref[0]) snprintf(x->ref, sizeof x->ref, "%s", res);
    else if (strcmp(res, x->ref)) fail_msg("scope: after failure %d (allocation %ld, span %ld) the rebuilt scope differs: %s vs %s", rc,
                 oom_at, oom_span, res, x->ref);
}

static void scope_cleanup(void *c)
{
    scope_ctx *x = c;
    tu_rmrf(x->dir);
    free(x->dir);
    x->dir = NULL;
}

static void test_scope_build(void **st)
{
    scope_ctx c = {0};
    oom_seq q = {"scope build (index a project, info)", scope_prep, scope_run, scope_verify, scope_cleanup};
    assert_true(sweep(&q, &c) > 20);
}

/* ---- MRCR reader ---------------------------------------------------------------------- */
typedef struct { char *dir; char path[4200]; } mrcr_ctx;

static void mrcr_prep(void *c)
{
    mrcr_ctx *x = c;
    x->dir = tu_tmpdir();
    snprintf(x->path, sizeof x->path, "%s/m.jsonl", x->dir);
    const char *rec =
        "{\"prompt\":\"[{\\\"role\\\":\\\"user\\\",\\\"content\\\":\\\"write a poem about tapirs\\\"},"
        "{\\\"role\\\":\\\"assistant\\\",\\\"content\\\":\\\"Tapirs roam.\\\"},"
        "{\\\"role\\\":\\\"user\\\",\\\"content\\\":\\\"Prepend ab12 to the 1st poem about tapirs\\\"}]\","
        "\"answer\":\"ab12Tapirs roam.\",\"random_string_to_prepend\":\"ab12\",\"n_needles\":2,"
        "\"desired_msg_index\":0,\"total_messages\":3,\"n_chars\":120}\n"
        "\n"
        "{\"prompt\":[{\"role\":\"user\",\"content\":\"caf\\u00e9 poem\"},{\"role\":\"assistant\",\"content\":\"x\"},"
        "{\"role\":\"user\",\"content\":\"again\"}],\"answer\":\"zz99x\",\"random_string_to_prepend\":\"zz99\","
        "\"n_needles\":4,\"desired_msg_index\":0,\"total_messages\":3,\"n_chars\":20000}\n";
    assert_int_equal(tu_write(x->path, rec, strlen(rec)), 0);
}

static int mrcr_run(void *c, char *res, size_t cap)
{
    mrcr_ctx *x = c;
    lcx_mrcr_set set;
    memset(&set, 0, sizeof set);
    char err[256];
    int rc = lcx__mrcr_read_jsonl(x->path, &set, err, sizeof err);
    if (rc == 0) {
        size_t at = (size_t)snprintf(res, cap, "n=%zu", set.n);
        for (size_t i = 0; i < set.n; i++)
            at += (size_t)snprintf(res + at, cap - at, " [%zu msgs, %s, %s, %d]", set.recs[i].n_msgs, set.recs[i].answer,
                                   set.recs[i].msgs[0].content, set.recs[i].n_needles);
    } else {
        assert_int_equal(set.n, 0);   /* a failed read hands back no records */
    }
    lcx__mrcr_set_free(&set);
    return rc;
}

static void mrcr_cleanup(void *c)
{
    mrcr_ctx *x = c;
    tu_rmrf(x->dir);
    free(x->dir);
}

static void test_mrcr_reader(void **st)
{
    mrcr_ctx c = {0};
    oom_seq q = {"eval MRCR reader", mrcr_prep, mrcr_run, NULL, mrcr_cleanup};
    assert_true(sweep(&q, &c) > 5);
}

/* ---- TriAttention round --------------------------------------------------------------- */
enum { TL = 2, TH = 4, TKV = 2, THD = 32, TN = 300, TT = 16 };
static float tkeys[TL * TKV * TN * THD], tq[TL * TT * TH * THD];
static int32_t tpos[TN];

static const float *tget(void *ud, int l, int kv, int c0, int n, float *scratch, size_t *stride)
{
    (void)ud;
    memcpy(scratch, tkeys + (((size_t)l * TKV + kv) * TN + c0) * THD, (size_t)n * THD * 4);
    *stride = THD;
    return scratch;
}

static void triatt_prep_once(void)
{
    uint64_t s = 0x9E3779B97F4A7C15ull;
    for (size_t i = 0; i < sizeof tkeys / 4; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        tkeys[i] = (float)((double)(s >> 11) / 9007199254740992.0 - 0.5);
    }
    for (size_t i = 0; i < sizeof tq / 4; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        tq[i] = (float)((double)(s >> 11) / 9007199254740992.0);
    }
    for (int i = 0; i < TN; i++) tpos[i] = i;
}

static int triatt_run(void *c, char *res, size_t cap)
{
    (void)c;
    triatt_geometry g = {.n_layers = TL, .n_heads = TH, .n_kv_heads = TKV, .head_dim = THD, .n_rot = THD,
                         .pairing = TRIATT_PAIR_HALF, .rope_theta = 10000};
    triatt_config cfg;
    triatt_config_default(&cfg);
    cfg.enabled = true; cfg.budget = 200; cfg.window = 16; cfg.prefix = 4; cfg.warmup = 16; cfg.divide_length = 8;
    cfg.n_threads = 1;
    triatt_ctx *t = NULL;
    int rc = triatt_init(&g, &cfg, &t);
    if (rc) return rc;
    for (int pass = 0; pass < 2 && !rc; pass++) {
        for (int l = 0; l < TL && !rc; l++) rc = triatt_observe_queries(t, l, tq + (size_t)l * TT * TH * THD, TT, 0);
        if (!rc) {
            int e = triatt_end_pass(t);
            if (e < 0) rc = e;
        }
    }
    if (!rc) {
        triatt_keys k = {.get = tget};
        int32_t out[TN];
        int n = triatt_maybe_evict(t, &k, tpos, TN, out);
        if (n < 0) rc = n;
        else if (n == 0) rc = LCX_ESTATE;   /* the reference evicts: a silent no-round is a partial result */
        else {
            size_t at = (size_t)snprintf(res, cap, "n=%d:", n);
            for (int i = 0; i < n && at < cap; i++) at += (size_t)snprintf(res + at, cap - at, "%d,", out[i]);
        }
    }
    triatt_free(t);
    return rc;
}

static void test_triatt_round(void **st)
{
    triatt_prep_once();
    oom_seq q = {"triatt round (init, calibration passes, scoring, selection)", nop, triatt_run, NULL, nop};
    assert_true(sweep(&q, NULL) > 3);
}

static int setup(void **st)
{
    cJSON_Hooks h = {cj_malloc, free};
    cJSON_InitHooks(&h);
    return lcx_embedder_hash_new(0, &emb);
}

static int teardown(void **st)
{
    lcx_embedder_free(emb);
    cJSON_InitHooks(NULL);
    return 0;
}

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test(test_index),
        cmocka_unit_test(test_store),
        cmocka_unit_test(test_store_two_phase),
        cmocka_unit_test(test_scope_build),
        cmocka_unit_test(test_mrcr_reader),
        cmocka_unit_test(test_triatt_round),
    };
    return cmocka_run_group_tests(t, setup, teardown);
}
