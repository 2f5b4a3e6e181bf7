/* Store tests: persistence, snapshots, tombstones, corruption handling and a kill -9
 * crash test (a child appends in a loop and reports every acknowledged id over a pipe). */
#include "testutil.h"
#include "longctx/lcx.h"
#include "store/store_fmt.h"
#include "embed/embed.h"
#include "util/util.h"
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static lcx_embedder *g_emb;

static int setup(void **st)
{
    (void)st;
    return lcx_embedder_hash_new(0, &g_emb);
}
static int teardown(void **st)
{
    (void)st;
    lcx_embedder_free(g_emb);
    return 0;
}

static void mk_text(char *buf, size_t cap, uint32_t i)
{
    if (cap < 128) { buf[0] = 0; return; }
    static const char *w[] = {"alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india",
                              "juliet", "kilo", "lima", "mike", "november", "oscar", "papa"};
    snprintf(buf, cap, "span %u token %s %s marker%u tail %s", i, w[i % 16], w[(i / 16) % 16], i * 7919u,
             w[(i * 7) % 16]);
}

/* n chunks from..from+n-1 (mk_text texts in *tbuf, caller frees both) */
static lcx_chunk *mk_chunks(uint32_t from, uint32_t n, const char *path, char **tbuf)
{
    lcx_chunk *c = calloc(n, sizeof *c);
    char (*t)[128] = malloc((size_t)n * 128);
    assert_non_null(c);
    assert_non_null(t);
    for (uint32_t i = 0; i < n; i++) {
        mk_text(t[i], 128, from + i);
        c[i] = lcx_chunk_init();
        c[i].text = t[i];
        c[i].text_len = (uint32_t)strlen(t[i]);
        c[i].tok_start = (int64_t)(from + i) * 100;
        c[i].tok_end = c[i].tok_start + 99;
        c[i].layer = (int32_t)((from + i) % 3);
        c[i].score = 0.5f;
        if (path) {
            c[i].path = path;
            c[i].path_len = (uint32_t)strlen(path);
            c[i].line_start = 1;
            c[i].line_end = 50;
            c[i].file_type = LCX_FT_CODE;
        }
    }
    *tbuf = (char *)t;
    return c;
}

static int append_n(lcx_store *s, uint32_t from, uint32_t n, const char *path)
{
    char *t;
    lcx_chunk *c = mk_chunks(from, n, path, &t);
    int rc = lcx_store_append(s, c, (int)n, NULL);
    free(c);
    free(t);
    return rc;
}

/* lcx_store_prepare of chunks from..from+n-1; the chunk buffers are freed (scribbled
 * over first) before returning, so the prepared batch must hold its own copies. */
static lcx_store_prepared *prep_n(lcx_store *s, uint32_t from, uint32_t n, const char *path)
{
    char *t;
    lcx_chunk *c = mk_chunks(from, n, path, &t);
    lcx_store_prepared *p = NULL;
    assert_int_equal(lcx_store_prepare(s, c, (int)n, &p), 0);
    assert_non_null(p);
    memset(t, 'x', (size_t)n * 128);
    memset(c, 0xA5, (size_t)n * sizeof *c);
    free(c);
    free(t);
    return p;
}

/* The chunk with marker<i*7919> must be the top hit for that marker. */
static void expect_found(lcx_store *s, uint32_t i)
{
    char q[64];
    snprintf(q, sizeof q, "marker%u", i * 7919u);
    lcx_search_opts o = lcx_search_defaults();
    lcx_hit h[4];
    int n = lcx_store_search(s, q, strlen(q), &o, h, 4);
    assert_true(n >= 1);
    if (h[0].id != i) fail_msg("query %s: top hit %u, want %u", q, h[0].id, i);
    lcx_chunk c;
    assert_int_equal(lcx_store_get(s, i, &c), 0);
    char want[128];
    mk_text(want, sizeof want, i);
    assert_int_equal(c.text_len, strlen(want));
    assert_memory_equal(c.text, want, c.text_len);
    assert_int_equal(c.tok_start, (int64_t)i * 100);
}

static void test_basic_persist(void **st)
{
    (void)st;
    char *dir = tu_tmpdir();
    lcx_store *s;
    assert_int_equal(lcx_store_open(dir, g_emb, NULL, &s), 0);
    assert_int_equal(lcx_store_count(s), 0);
    assert_int_equal(append_n(s, 0, 300, NULL), 0);
    uint32_t first = 0;
    lcx_chunk one = lcx_chunk_init();
    char t[128];
    mk_text(t, sizeof t, 300);
    one.text = t;
    one.text_len = (uint32_t)strlen(t);
    one.tok_start = 30000;
    one.tok_end = 30099;
    assert_int_equal(lcx_store_append(s, &one, 1, &first), 0);
    assert_int_equal(first, 300);
    assert_int_equal(lcx_store_count(s), 301);
    expect_found(s, 17);
    expect_found(s, 300);
    assert_string_equal(lcx_store_fingerprint(s), lcx_embedder_fingerprint(g_emb));
    assert_true(lcx_store_mem_bytes(s) > 301 * 512);
    /* limits and bad input */
    lcx_chunk bad = lcx_chunk_init();
    bad.text = NULL;
    bad.text_len = 3;
    assert_int_equal(lcx_store_append(s, &bad, 1, NULL), LCX_EINVAL);
    lcx_chunk c;
    assert_int_equal(lcx_store_get(s, 5000, &c), LCX_ENOTFOUND);
    lcx_store_close(s);   /* < 1024 fresh: no snapshot, reopen replays the log */

    assert_int_equal(lcx_store_open(dir, g_emb, NULL, &s), 0);
    assert_int_equal(lcx_store_count(s), 301);
    expect_found(s, 17);
    expect_found(s, 300);
    char msg[256];
    assert_int_equal(lcx_store_validate(dir, msg, sizeof msg), 0);
    lcx_store_close(s);
    tu_rmrf(dir);
    free(dir);
}

static void test_snapshot_and_tail(void **st)
{
    (void)st;
    char *dir = tu_tmpdir();
    lcx_store *s;
    assert_int_equal(lcx_store_open(dir, g_emb, NULL, &s), 0);
    assert_int_equal(append_n(s, 0, 2000, "src/a.c"), 0);
    assert_int_equal(append_n(s, 2000, 500, "src/b.c"), 0);
    lcx_search_opts o = lcx_search_defaults();
    lcx_hit before[8], after[8];
    const char *q = "bravo foxtrot november marker1234";
    int nb = lcx_store_search(s, q, strlen(q), &o, before, 8);
    assert_true(nb > 0);
    assert_int_equal(lcx_store_snapshot(s), 0);
    /* tail after the snapshot: more appends and a tombstone */
    assert_int_equal(append_n(s, 2500, 100, "src/c.c"), 0);
    assert_int_equal(lcx_store_delete_path(s, "src/b.c", 7), 500);
    assert_int_equal(lcx_store_delete_path(s, "src/none.c", 10), 0);
    assert_int_equal(lcx_store_count(s), 2100);
    lcx_chunk c;
    assert_int_equal(lcx_store_get(s, 2100, &c), LCX_ENOTFOUND);
    /* deleted chunks are never returned */
    char q2[64];
    snprintf(q2, sizeof q2, "marker%u", 2100u * 7919u);
    lcx_hit h[8];
    int n = lcx_store_search(s, q2, strlen(q2), &o, h, 8);
    for (int i = 0; i < n; i++) assert_true(h[i].id < 2000 || h[i].id >= 2500);
    n = lcx_store_search(s, q, strlen(q), &o, before, 8);
    assert_true(n > 0);
    /* simulate a crash: copy the directory state without closing (close would snapshot) */
    char cmd[4096 + 64];
    char *dir2 = tu_tmpdir();
    snprintf(cmd, sizeof cmd, "cp -a %s/. %s/", dir, dir2);
    assert_int_equal(system(cmd), 0);
    lcx_store *s2;
    assert_int_equal(lcx_store_open(dir2, g_emb, NULL, &s2), 0);   /* snapshot + tail replay */
    assert_int_equal(lcx_store_count(s2), 2100);
    int n2 = lcx_store_search(s2, q, strlen(q), &o, after, 8);
    assert_int_equal(n2, n);
    for (int i = 0; i < n; i++) {
        assert_int_equal(after[i].id, before[i].id);
        assert_float_equal(after[i].score, before[i].score, 1e-5);
        assert_float_equal(after[i].dense, before[i].dense, 1e-5);
        assert_float_equal(after[i].bm25, before[i].bm25, 1e-4);
    }
    expect_found(s2, 2550);
    expect_found(s2, 1999);
    assert_int_equal(lcx_store_get(s2, 2100, &c), LCX_ENOTFOUND);
    assert_int_equal(lcx_store_get(s2, 10, &c), 0);
    assert_int_equal(c.path_len, 7);
    assert_memory_equal(c.path, "src/a.c", 7);
    assert_int_equal(c.file_type, LCX_FT_CODE);
    lcx_store_close(s2);
    lcx_store_close(s);   /* writes a fresh snapshot (tombstones arrived) */
    assert_int_equal(lcx_store_open(dir, g_emb, NULL, &s), 0);
    assert_int_equal(lcx_store_count(s), 2100);
    n2 = lcx_store_search(s, q, strlen(q), &o, after, 8);
    assert_int_equal(n2, n);
    for (int i = 0; i < n; i++) assert_int_equal(after[i].id, before[i].id);
    /* appends on top of a mapped snapshot, then reopen again */
    assert_int_equal(append_n(s, 2600, 10, NULL), 0);
    expect_found(s, 2605);
    lcx_store_close(s);
    assert_int_equal(lcx_store_open(dir, g_emb, NULL, &s), 0);
    expect_found(s, 2605);
    assert_int_equal(lcx_store_count(s), 2110);
    lcx_store_close(s);
    char msg[256];
    assert_int_equal(lcx_store_validate(dir, msg, sizeof msg), 0);
    assert_non_null(strstr(msg, "snapshot ok"));
    tu_rmrf(dir);
    tu_rmrf(dir2);
    free(dir);
    free(dir2);
}

static void test_fingerprint_mismatch(void **st)
{
    (void)st;
    char *dir = tu_tmpdir();
    lcx_store *s;
    assert_int_equal(lcx_store_open(dir, g_emb, NULL, &s), 0);
    assert_int_equal(append_n(s, 0, 5, NULL), 0);
    lcx_store_close(s);
    lcx_embedder *e2;
    assert_int_equal(lcx_embedder_hash_new(128, &e2), 0);
    assert_int_equal(lcx_store_open(dir, e2, NULL, &s), LCX_EMISMATCH);
    assert_null(s);
    lcx_embedder_free(e2);
    tu_rmrf(dir);
    free(dir);
}

static long file_size(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 ? (long)st.st_size : -1;
}

static void test_corruption(void **st)
{
    (void)st;
    char *dir = tu_tmpdir();
    char log[4200];
    snprintf(log, sizeof log, "%s/chunks.log", dir);
    lcx_store *s;
    assert_int_equal(lcx_store_open(dir, g_emb, NULL, &s), 0);
    for (uint32_t i = 0; i < 10; i++) assert_int_equal(append_n(s, i * 10, 10, NULL), 0);
    lcx_store_close(s);
    long sz = file_size(log);
    assert_true(sz > 1000);

    /* truncated tail (a torn write): recovered, the last batch is gone, the rest intact */
    char *dir2 = tu_tmpdir();
    char cmd[9000];
    snprintf(cmd, sizeof cmd, "cp -a %s/. %s/ && truncate -s %ld %s/chunks.log", dir, dir2, sz - 100, dir2);
    assert_int_equal(system(cmd), 0);
    char msg[256];
    assert_int_equal(lcx_store_validate(dir2, msg, sizeof msg), 0);
    assert_non_null(strstr(msg, "torn"));
    assert_int_equal(lcx_store_open(dir2, g_emb, NULL, &s), 0);
    assert_int_equal(lcx_store_count(s), 90);
    expect_found(s, 89);
    assert_int_equal(append_n(s, 90, 10, NULL), 0);   /* appends continue on a clean boundary */
    lcx_store_close(s);
    assert_int_equal(lcx_store_open(dir2, g_emb, NULL, &s), 0);
    assert_int_equal(lcx_store_count(s), 100);
    expect_found(s, 95);
    lcx_store_close(s);
    assert_int_equal(lcx_store_validate(dir2, msg, sizeof msg), 0);

    /* zero-filled tail (power loss after the size grew): recovered too */
    snprintf(cmd, sizeof cmd, "head -c 4096 /dev/zero >> %s/chunks.log", dir2);
    assert_int_equal(system(cmd), 0);
    assert_int_equal(lcx_store_open(dir2, g_emb, NULL, &s), 0);
    assert_int_equal(lcx_store_count(s), 100);
    lcx_store_close(s);

    /* one flipped byte in the middle of the log: reported, never half-loaded */
    FILE *f = fopen(log, "r+b");
    assert_non_null(f);
    fseek(f, sz / 2, SEEK_SET);
    int ch = fgetc(f);
    fseek(f, sz / 2, SEEK_SET);
    fputc(ch ^ 0x20, f);
    fclose(f);
    s = (lcx_store *)1;
    assert_int_equal(lcx_store_open(dir, g_emb, NULL, &s), LCX_ECORRUPT);
    assert_null(s);
    assert_int_equal(lcx_store_validate(dir, msg, sizeof msg), LCX_ECORRUPT);
    assert_int_equal(file_size(log), sz);   /* nothing was truncated */

    /* a corrupt header */
    snprintf(cmd, sizeof cmd, "printf 'XXXX' | dd of=%s/chunks.log bs=1 seek=0 conv=notrunc 2>/dev/null", dir2);
    assert_int_equal(system(cmd), 0);
    assert_int_equal(lcx_store_open(dir2, g_emb, NULL, &s), LCX_ECORRUPT);
    tu_rmrf(dir);
    tu_rmrf(dir2);
    free(dir);
    free(dir2);
}

static void test_corrupt_snapshot_falls_back(void **st)
{
    (void)st;
    char *dir = tu_tmpdir();
    lcx_store *s;
    assert_int_equal(lcx_store_open(dir, g_emb, NULL, &s), 0);
    assert_int_equal(append_n(s, 0, 1500, NULL), 0);
    lcx_store_close(s);   /* ≥ 1024 fresh: writes index.snap */
    char sp[4200];
    snprintf(sp, sizeof sp, "%s/index.snap", dir);
    long sz = file_size(sp);
    assert_true(sz > 0);
    /* damage the DOCS section (verified on open) */
    FILE *f = fopen(sp, "r+b");
    fseek(f, 600, SEEK_SET);
    fputc(0x5a, f);
    fputc(0xa5, f);
    fclose(f);
    char msg[256];
    assert_int_equal(lcx_store_validate(dir, msg, sizeof msg), LCX_ECORRUPT);
    assert_int_equal(lcx_store_open(dir, g_emb, NULL, &s), 0);   /* ignores it: replays the log */
    assert_int_equal(lcx_store_count(s), 1500);
    expect_found(s, 1234);
    assert_int_equal(lcx_store_snapshot(s), 0);                   /* rewrites a good one */
    lcx_store_close(s);
    assert_int_equal(lcx_store_validate(dir, msg, sizeof msg), 0);
    /* damage a text where the snapshot finds it (not checksummed on open): since snapshot
     * version 2 that is the log (DOCS[0].text_off), in version 1 the BLOB section. Open
     * still maps it, but get() detects the text by its per-document crc and validate
     * reports it */
    lcx_snap_hdr h;
    lcx_snap_doc d0;
    f = fopen(sp, "rb");
    assert_int_equal(fread(&h, sizeof h, 1, f), 1);
    fseek(f, (long)h.sec[SEC_DOCS].off, SEEK_SET);
    assert_int_equal(fread(&d0, sizeof d0, 1, f), 1);
    fclose(f);
    char lp[4200];
    snprintf(lp, sizeof lp, "%s/chunks.log", dir);
    long at = h.version >= 2 ? (long)d0.text_off + 3 : (long)h.sec[SEC_BLOB].off + 3;
    f = fopen(h.version >= 2 ? lp : sp, "r+b");
    fseek(f, at, SEEK_SET);
    int ch = fgetc(f);
    fseek(f, at, SEEK_SET);
    fputc(ch ^ 1, f);
    fclose(f);
    assert_int_equal(lcx_store_validate(dir, msg, sizeof msg), LCX_ECORRUPT);
    assert_int_equal(lcx_store_open(dir, g_emb, NULL, &s), 0);
    lcx_chunk c;
    assert_int_equal(lcx_store_get(s, 0, &c), LCX_ECORRUPT);
    assert_int_equal(lcx_store_get(s, 1, &c), 0);
    lcx_store_close(s);
    tu_rmrf(dir);
    free(dir);
}

/* ---- crash test */
static void child_loop(const char *dir, int wfd, uint32_t seed)
{
    lcx_embedder *e;
    lcx_store *s;
    if (lcx_embedder_hash_new(0, &e) || lcx_store_open(dir, e, NULL, &s)) _exit(3);
    uint32_t next = 0;
    lcx_store_get(s, 0, &(lcx_chunk){0});
    next = lcx_store_count(s);
    srand(seed);
    for (uint32_t iter = 0;; iter++) {
        /* small batches (prepared off-lock, then written) and every third one ≥ 64 (its
         * record written and fsync'd on a thread of its own while the workers embed) */
        uint32_t n = iter % 3 == 2 ? 64 + (uint32_t)(rand() % 100) : 1 + (uint32_t)(rand() % 40);
        if (append_n(s, next, n, NULL)) _exit(4);
        uint32_t last = next + n - 1;
        if (write(wfd, &last, 4) != 4) _exit(5);   /* acknowledged up to `last` */
        next += n;
        if (iter % 37 == 36 && lcx_store_snapshot(s)) _exit(6);
    }
}

static void *close_later(void *s)
{
    usleep(50000);
    lcx_store_close(s);
    return NULL;
}

/* One handle per store: a second open — in this process or another — is refused with
 * LCX_EEXIST and leaves the first handle's data intact; closing releases the lock. */
static void test_single_handle(void **st)
{
    (void)st;
    char *dir = tu_tmpdir();
    lcx_store *s, *s2 = NULL;
    assert_int_equal(lcx_store_open(dir, g_emb, NULL, &s), 0);
    lcx_chunk c = lcx_chunk_init();
    c.text = "the lock keeps this safe";
    c.text_len = (uint32_t)strlen(c.text);
    assert_int_equal(lcx_store_append(s, &c, 1, NULL), 0);
    assert_int_equal(lcx_store_open(dir, g_emb, NULL, &s2), LCX_EEXIST);
    assert_null(s2);
    pid_t pid = fork();
    if (pid == 0) {
        lcx_store *o = NULL;
        _exit(lcx_store_open(dir, g_emb, NULL, &o) == LCX_EEXIST ? 0 : 1);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    assert_int_equal(lcx_store_count(s), 1);
    lcx_store_close(s);
    assert_int_equal(lcx_store_open(dir, g_emb, NULL, &s), 0);
    assert_int_equal(lcx_store_count(s), 1);
    /* a lock let go shortly after the open began (as by a process that was just killed:
     * store.c take_lock) is waited for, not reported as in use */
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, close_later, s), 0);
    assert_int_equal(lcx_store_open(dir, g_emb, NULL, &s2), 0);
    pthread_join(th, NULL);
    assert_int_equal(lcx_store_count(s2), 1);
    lcx_store_close(s2);
    tu_rmrf(dir);
    free(dir);
}

static void test_crash_kill9(void **st)
{
    (void)st;
    char *dir = tu_tmpdir();
    uint32_t acked = 0;
    int have = 0;
    for (int round = 0; round < 6; round++) {
        int p[2];
        assert_int_equal(pipe(p), 0);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            close(p[0]);
            child_loop(dir, p[1], (uint32_t)round * 7919u + 1);
        }
        close(p[1]);
        /* let it run a random while, reading acks, then kill -9 */
        int fl = fcntl(p[0], F_GETFL);
        fcntl(p[0], F_SETFL, fl | O_NONBLOCK);
        uint64_t until = (uint64_t)(50 + rand() % 250);
        for (uint64_t waited = 0; waited < until; waited += 5) {
            uint32_t v;
            while (read(p[0], &v, 4) == 4) { acked = v; have = 1; }
            usleep(5000);
        }
        kill(pid, SIGKILL);
        int wst;
        waitpid(pid, &wst, 0);
        assert_true(WIFSIGNALED(wst));   /* it was killed, not failing by itself */
        uint32_t v;
        fcntl(p[0], F_SETFL, fl);
        while (read(p[0], &v, 4) == 4) { acked = v; have = 1; }
        close(p[0]);
        /* reopen: every acknowledged chunk present and retrievable */
        lcx_store *s;
        assert_int_equal(lcx_store_open(dir, g_emb, NULL, &s), 0);
        if (have) {
            assert_true(lcx_store_count(s) >= acked + 1);
            lcx_chunk c;
            for (uint32_t i = 0; i <= acked; i++) {
                assert_int_equal(lcx_store_get(s, i, &c), 0);
                char want[128];
                mk_text(want, sizeof want, i);
                if (c.text_len != strlen(want) || memcmp(c.text, want, c.text_len))
                    fail_msg("round %d chunk %u text differs", round, i);
            }
            expect_found(s, acked);
            expect_found(s, acked / 2);
        }
        lcx_store_close(s);
        char msg[256];
        int vr = lcx_store_validate(dir, msg, sizeof msg);
        if (vr) fail_msg("validate: %s", msg);
    }
    assert_true(have);
    fprintf(stderr, "crash test: %u chunks acknowledged over 6 kills\n", acked + 1);
    tu_rmrf(dir);
    free(dir);
}

/* Record types in a log, in order (up to max); returns the header's version. */
static uint32_t log_types(const char *dir, uint8_t *types, int max, int *n)
{
    char p[4200];
    snprintf(p, sizeof p, "%s/chunks.log", dir);
    FILE *f = fopen(p, "rb");
    assert_non_null(f);
    lcx_log_hdr h;
    assert_int_equal(fread(&h, sizeof h, 1, f), 1);
    *n = 0;
    lcx_rec_hdr r;
    while (fread(&r, sizeof r, 1, f) == 1 && *n < max) {
        types[(*n)++] = r.type;
        fseek(f, (long)r.len, SEEK_CUR);
    }
    fclose(f);
    return h.version;
}

/* A log written before TEXT records existed (version 1: every batch record carries its
 * u8 rows) — built here byte by byte as docs/storage-format.md describes it. */
static void write_v1_log(const char *dir, uint32_t n_batches, uint32_t per)
{
    char p[4200];
    snprintf(p, sizeof p, "%s/chunks.log", dir);
    FILE *f = fopen(p, "wb");
    assert_non_null(f);
    lcx_log_hdr h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, LCX_LOG_MAGIC, 8);
    h.version = 1;
    h.hdr_size = sizeof h;
    h.dim = 256;
    h.vec_format = LCX_VEC_U8;
    h.uuid = 0x1234567890abcdefull;
    const char *fp = lcx_embedder_fingerprint(g_emb);
    h.fp_len = (uint32_t)strlen(fp);
    memcpy(h.fp, fp, h.fp_len);
    h.crc = lcx__crc32c(0, &h, 252);
    assert_int_equal(fwrite(&h, sizeof h, 1, f), 1);
    for (uint32_t b = 0; b < n_batches; b++) {
        char *pay = malloc((size_t)per * (sizeof(lcx_rec_chunk) + 128 + 256)), *q = pay;
        for (uint32_t k = 0; k < per; k++) {
            uint32_t i = b * per + k;
            char t[128];
            mk_text(t, sizeof t, i);
            size_t tl = strlen(t);
            const char *tp = t;
            float v[256];
            assert_int_equal(lcx_embed(g_emb, &tp, &tl, 1, v), 0);
            lcx_rec_chunk fx;
            memset(&fx, 0, sizeof fx);
            fx.tok_start = (int64_t)i * 100;
            fx.tok_end = fx.tok_start + 99;
            fx.layer = (int32_t)(i % 3);
            fx.score = 0.5f;
            fx.text_len = (uint32_t)tl;
            uint8_t row[256];
            lcx__quant_row_u8(v, 256, row, &fx.vscale);
            memcpy(q, &fx, sizeof fx);
            q += sizeof fx;
            memcpy(q, t, tl);
            q += tl;
            memcpy(q, row, 256);
            q += 256;
        }
        lcx_rec_hdr r = {LCX_REC_MAGIC, LCX_REC_BATCH, {0}, (uint32_t)(q - pay), per, 0, 0};
        r.crc = lcx__crc32c(lcx__crc32c(0, &r, 16), pay, r.len);
        assert_int_equal(fwrite(&r, sizeof r, 1, f), 1);
        assert_int_equal(fwrite(pay, r.len, 1, f), 1);
        free(pay);
    }
    fclose(f);
}

static void test_v1_log_compat(void **st)
{
    (void)st;
    char *dir = tu_tmpdir();
    write_v1_log(dir, 3, 70);   /* 70 ≥ PAR_MIN: the parallel replay path */
    char msg[256];
    assert_int_equal(lcx_store_validate(dir, msg, sizeof msg), 0);
    lcx_store *s;
    assert_int_equal(lcx_store_open(dir, g_emb, NULL, &s), 0);
    assert_int_equal(lcx_store_count(s), 210);
    expect_found(s, 0);
    expect_found(s, 150);
    expect_found(s, 209);
    /* appends to a v1 log stay readable by older binaries: BATCH records with rows */
    assert_int_equal(append_n(s, 210, 100, NULL), 0);
    assert_int_equal(append_n(s, 310, 5, NULL), 0);
    expect_found(s, 250);
    lcx_store_close(s);
    uint8_t ty[16];
    int nr;
    assert_int_equal(log_types(dir, ty, 16, &nr), 1);
    assert_int_equal(nr, 5);
    for (int i = 0; i < nr; i++) assert_int_equal(ty[i], LCX_REC_BATCH);
    assert_int_equal(lcx_store_validate(dir, msg, sizeof msg), 0);
    assert_int_equal(lcx_store_open(dir, g_emb, NULL, &s), 0);
    assert_int_equal(lcx_store_count(s), 315);
    expect_found(s, 5);
    expect_found(s, 300);
    expect_found(s, 312);
    lcx_store_close(s);
    tu_rmrf(dir);
    free(dir);
}

/* New logs (version 2) store the hash embedder's batches as TEXT records; replay
 * recomputes the rows, which must be exactly the ones the writer had in RAM. */
static void test_text_records_replay(void **st)
{
    (void)st;
    char *dir = tu_tmpdir();
    lcx_store *s;
    assert_int_equal(lcx_store_open(dir, g_emb, NULL, &s), 0);
    assert_int_equal(append_n(s, 0, 300, NULL), 0);   /* overlapped path (≥ PAR_MIN) */
    assert_int_equal(append_n(s, 300, 7, NULL), 0);   /* small-batch path */
    assert_int_equal(append_n(s, 307, 64, NULL), 0);
    enum { NQ = 12 };
    lcx_hit before[NQ][8];
    int nb[NQ];
    lcx_search_opts o = lcx_search_defaults();
    for (int q = 0; q < NQ; q++) {
        char qs[96];
        snprintf(qs, sizeof qs, "token %s marker%u", q % 2 ? "kilo" : "delta", (uint32_t)(q * 29) * 7919u);
        nb[q] = lcx_store_search(s, qs, strlen(qs), &o, before[q], 8);
        assert_true(nb[q] > 0);
    }
    lcx_store_close(s);   /* 371 < 1024 chunks: no snapshot, the reopen replays the log */
    char p[4200];
    snprintf(p, sizeof p, "%s/index.snap", dir);
    assert_int_not_equal(access(p, F_OK), 0);
    uint8_t ty[8];
    int nr;
    assert_int_equal(log_types(dir, ty, 8, &nr), LCX_LOG_VERSION);
    assert_int_equal(nr, 3);
    for (int i = 0; i < nr; i++) assert_int_equal(ty[i], LCX_REC_TEXT);
    assert_int_equal(lcx_store_open(dir, g_emb, NULL, &s), 0);
    assert_int_equal(lcx_store_count(s), 371);
    for (int q = 0; q < NQ; q++) {
        char qs[96];
        snprintf(qs, sizeof qs, "token %s marker%u", q % 2 ? "kilo" : "delta", (uint32_t)(q * 29) * 7919u);
        lcx_hit h[8];
        int n = lcx_store_search(s, qs, strlen(qs), &o, h, 8);
        assert_int_equal(n, nb[q]);
        for (int k = 0; k < n; k++) {
            assert_int_equal(h[k].id, before[q][k].id);
            assert_true(h[k].score == before[q][k].score && h[k].dense == before[q][k].dense &&
                        h[k].bm25 == before[q][k].bm25);
        }
    }
    expect_found(s, 0);
    expect_found(s, 299);
    expect_found(s, 303);
    expect_found(s, 370);
    lcx_store_close(s);
    tu_rmrf(dir);
    free(dir);
}

/* Two-phase append: batches prepared ahead (out of commit order, chunk buffers freed at
 * once) must give exactly the store that lcx_store_append gives (same ids, texts, paths,
 * scores), also across a reopen; a term first created by a commit between a batch's
 * prepare and its commit is shared; misuse is refused. */
static void test_prepare_commit(void **st)
{
    (void)st;
    char *da = tu_tmpdir(), *db = tu_tmpdir();
    lcx_store *a, *b;
    assert_int_equal(lcx_store_open(da, g_emb, NULL, &a), 0);
    assert_int_equal(lcx_store_open(db, g_emb, NULL, &b), 0);
    assert_int_equal(append_n(b, 0, 300, NULL), 0);
    assert_int_equal(append_n(b, 300, 7, "src/x.c"), 0);
    assert_int_equal(append_n(b, 307, 64, "lib/y.h"), 0);
    assert_int_equal(append_n(b, 371, 129, NULL), 0);
    /* prepare 3 batches before any commit; the third prepare runs after the first commit */
    lcx_store_prepared *p0 = prep_n(a, 0, 300, NULL), *p1 = prep_n(a, 300, 7, "src/x.c");
    uint32_t first = 99;
    assert_int_equal(lcx_store_commit(a, p0, &first), 0);
    assert_int_equal(first, 0);
    assert_int_equal(lcx_store_commit(a, p0, &first), LCX_ESTATE);   /* once only */
    assert_int_equal(lcx_store_commit(b, p1, &first), LCX_EINVAL);   /* another store's */
    lcx_store_prepared *p2 = prep_n(a, 307, 64, "lib/y.h");
    assert_int_equal(lcx_store_commit(a, p1, &first), 0);
    assert_int_equal(first, 300);
    lcx_store_prepared *p3 = prep_n(a, 371, 129, NULL);
    lcx_store_prepared *pz = prep_n(a, 5000, 200, NULL);   /* discarded uncommitted */
    assert_int_equal(lcx_store_commit(a, p2, &first), 0);
    assert_int_equal(first, 307);
    assert_int_equal(lcx_store_commit(a, p3, &first), 0);
    assert_int_equal(first, 371);
    lcx_store_prepared_free(pz);
    lcx_store_prepared_free(p0);
    lcx_store_prepared_free(p1);
    lcx_store_prepared_free(p2);
    lcx_store_prepared_free(p3);
    lcx_store_prepared_free(NULL);
    lcx_store_prepared *pe = NULL;   /* empty batch: first_id = next id */
    assert_int_equal(lcx_store_prepare(a, NULL, 0, &pe), 0);
    assert_int_equal(lcx_store_commit(a, pe, &first), 0);
    assert_int_equal(first, 500);
    lcx_store_prepared_free(pe);
    lcx_chunk bad = lcx_chunk_init();
    bad.text_len = 3;   /* NULL text with a length */
    pe = (lcx_store_prepared *)&bad;
    assert_int_equal(lcx_store_prepare(a, &bad, 1, &pe), LCX_EINVAL);
    assert_null(pe);
    assert_int_equal(lcx_store_count(a), 500);
    for (int round = 0; round < 2; round++) {
        lcx_search_opts o = lcx_search_defaults();
        for (int q = 0; q < 16; q++) {
            char qs[96];
            snprintf(qs, sizeof qs, "token %s marker%u", q % 2 ? "kilo" : "delta", (uint32_t)(q * 31) * 7919u);
            lcx_hit ha[8], hb[8];
            int na = lcx_store_search(a, qs, strlen(qs), &o, ha, 8), nb = lcx_store_search(b, qs, strlen(qs), &o, hb, 8);
            assert_true(na > 0);
            assert_int_equal(na, nb);
            for (int k = 0; k < na; k++) {
                assert_int_equal(ha[k].id, hb[k].id);
                assert_true(ha[k].score == hb[k].score && ha[k].dense == hb[k].dense && ha[k].bm25 == hb[k].bm25);
            }
        }
        for (uint32_t i = 0; i < 500; i += 7) expect_found(a, i);
        lcx_chunk ca, cb;
        for (uint32_t i = 295; i < 380; i++) {
            assert_int_equal(lcx_store_get(a, i, &ca), 0);
            assert_int_equal(lcx_store_get(b, i, &cb), 0);
            assert_int_equal(ca.path_len, cb.path_len);
            if (ca.path_len) assert_memory_equal(ca.path, cb.path, ca.path_len);
            assert_int_equal(ca.line_end, cb.line_end);
            assert_int_equal((int)ca.file_type, (int)cb.file_type);
            assert_int_equal(ca.layer, cb.layer);
        }
        if (round) break;
        lcx_store_close(a);   /* no snapshot (< 1024 chunks): the reopen replays the log */
        assert_int_equal(lcx_store_open(da, g_emb, NULL, &a), 0);
        assert_int_equal(lcx_store_count(a), 500);
    }
    /* a term unknown at prepare time, created by a commit before this batch's commit */
    const char *t1 = "fresh zzqtermalpha shared", *t2 = "other zzqtermalpha text";
    lcx_chunk c1 = lcx_chunk_init(), c2 = lcx_chunk_init();
    c1.text = t1;
    c1.text_len = (uint32_t)strlen(t1);
    c2.text = t2;
    c2.text_len = (uint32_t)strlen(t2);
    lcx_store_prepared *pp;
    assert_int_equal(lcx_store_prepare(a, &c1, 1, &pp), 0);
    assert_int_equal(lcx_store_append(a, &c2, 1, &first), 0);
    assert_int_equal(first, 500);
    assert_int_equal(lcx_store_commit(a, pp, &first), 0);
    assert_int_equal(first, 501);
    lcx_store_prepared_free(pp);
    lcx_search_opts o = lcx_search_defaults();
    o.alpha = 0.0f;   /* lexical: both documents hold the term, nothing else does */
    o.use_rerank = false;
    lcx_hit h[8];
    int n = lcx_store_search(a, "zzqtermalpha", 12, &o, h, 8);
    int lex = 0, seen = 0;
    for (int k = 0; k < n; k++)
        if (h[k].bm25 > 0) {
            lex++;
            assert_true(h[k].id == 500 || h[k].id == 501);
            seen |= 1 << (h[k].id - 500);
        }
    assert_int_equal(lex, 2);
    assert_int_equal(seen, 3);
    lcx_store_close(a);
    lcx_store_close(b);
    tu_rmrf(da);
    tu_rmrf(db);
    free(da);
    free(db);
}

/* Concurrent two-phase commits (publishes run outside the writer lock, in ticket order)
 * mixed with plain appends, snapshots and searches: every acknowledged batch must sit at
 * the ids its commit reported, before and after a reopen (ids = log order). */
enum { CC_THREADS = 3, CC_BATCHES = 6, CC_N = 70 };
typedef struct {
    lcx_store *s;
    int t;
    uint32_t first[CC_BATCHES];
    int rc;
} cc_arg;

static void *cc_run(void *p)
{
    cc_arg *a = p;
    for (int b = 0; b < CC_BATCHES && !a->rc; b++) {
        uint32_t from = (uint32_t)(a->t * 100000 + b * 1000);
        char *t;
        lcx_chunk *c = mk_chunks(from, CC_N, NULL, &t);
        if (b % 3 == 2) {
            a->rc = lcx_store_append(a->s, c, CC_N, &a->first[b]);
        } else {
            lcx_store_prepared *pp = NULL;
            a->rc = lcx_store_prepare(a->s, c, CC_N, &pp);
            if (!a->rc) a->rc = lcx_store_commit(a->s, pp, &a->first[b]);
            lcx_store_prepared_free(pp);
        }
        if (!a->rc && b == 3 && a->t == 0) a->rc = lcx_store_snapshot(a->s);
        lcx_search_opts o = lcx_search_defaults();
        lcx_hit h[4];
        if (!a->rc && lcx_store_search(a->s, "token kilo", 10, &o, h, 4) < 0) a->rc = -1000;
        free(c);
        free(t);
    }
    return NULL;
}

static void cc_check(lcx_store *s, const cc_arg *a)
{
    for (int t = 0; t < CC_THREADS; t++)
        for (int b = 0; b < CC_BATCHES; b++)
            for (uint32_t i = 0; i < CC_N; i += 13) {
                lcx_chunk c;
                char want[128];
                mk_text(want, sizeof want, (uint32_t)(t * 100000 + b * 1000) + i);
                assert_int_equal(lcx_store_get(s, a[t].first[b] + i, &c), 0);
                assert_int_equal(c.text_len, strlen(want));
                assert_memory_equal(c.text, want, c.text_len);
            }
}

static void test_concurrent_commits(void **st)
{
    (void)st;
    char *dir = tu_tmpdir();
    lcx_store *s;
    assert_int_equal(lcx_store_open(dir, g_emb, NULL, &s), 0);
    cc_arg a[CC_THREADS];
    pthread_t th[CC_THREADS];
    for (int t = 0; t < CC_THREADS; t++) {
        memset(&a[t], 0, sizeof a[t]);
        a[t].s = s;
        a[t].t = t;
        assert_int_equal(pthread_create(&th[t], NULL, cc_run, &a[t]), 0);
    }
    for (int t = 0; t < CC_THREADS; t++) {
        pthread_join(th[t], NULL);
        assert_int_equal(a[t].rc, 0);
    }
    assert_int_equal(lcx_store_count(s), CC_THREADS * CC_BATCHES * CC_N);
    cc_check(s, a);
    lcx_store_close(s);
    assert_int_equal(lcx_store_open(dir, g_emb, NULL, &s), 0);
    assert_int_equal(lcx_store_count(s), CC_THREADS * CC_BATCHES * CC_N);
    cc_check(s, a);
    lcx_store_close(s);
    tu_rmrf(dir);
    free(dir);
}

/* A big append (≥ 64 chunks of the hash embedder) returns once durable and leaves its
 * publish to the next call on the store: every kind of call must see it first. */
static void test_deferred_publish(void **st)
{
    (void)st;
    char *dir = tu_tmpdir();
    lcx_store *s;
    uint32_t first = 99;
    assert_int_equal(lcx_store_open(dir, g_emb, NULL, &s), 0);
    char *t;
    lcx_chunk *c = mk_chunks(0, 100, NULL, &t);
    assert_int_equal(lcx_store_append(s, c, 100, &first), 0);
    assert_int_equal(first, 0);
    memset(t, 'x', 100 * 128);   /* the store must not keep pointers into the caller's texts */
    free(c);
    free(t);
    assert_int_equal(lcx_store_count(s), 100);   /* count */
    c = mk_chunks(100, 80, "src/a.c", &t);
    assert_int_equal(lcx_store_append(s, c, 80, &first), 0);
    assert_int_equal(first, 100);
    free(c);
    free(t);
    lcx_chunk g;
    assert_int_equal(lcx_store_get(s, 179, &g), 0);   /* get */
    assert_int_equal(g.path_len, 7);
    assert_memory_equal(g.path, "src/a.c", 7);
    assert_int_equal(append_n(s, 180, 70, NULL), 0);
    expect_found(s, 249);                              /* search */
    assert_int_equal(append_n(s, 250, 90, "src/b.c"), 0);
    assert_int_equal(lcx_store_delete_path(s, "src/b.c", 7), 90);   /* tombstones */
    assert_int_equal(lcx_store_count(s), 250);
    assert_int_equal(append_n(s, 340, 64, NULL), 0);
    assert_int_equal(append_n(s, 404, 1, NULL), 0);   /* a small commit: its id follows */
    expect_found(s, 404);
    expect_found(s, 403);
    assert_int_equal(append_n(s, 405, 1100, NULL), 0);
    assert_int_equal(lcx_store_snapshot(s), 0);       /* snapshot */
    assert_int_equal(append_n(s, 1505, 200, NULL), 0);
    lcx_store_close(s);                                /* close with a batch pending */
    assert_int_equal(lcx_store_open(dir, g_emb, NULL, &s), 0);
    assert_int_equal(lcx_store_count(s), 1615);
    for (uint32_t i = 0; i < 1705; i += 37)
        if (i < 250 || i >= 340) expect_found(s, i);
    expect_found(s, 1704);
    /* first_id of an empty append counts a pending batch */
    assert_int_equal(append_n(s, 1705, 100, NULL), 0);
    assert_int_equal(lcx_store_append(s, NULL, 0, &first), 0);
    assert_int_equal(first, 1805);
    lcx_store_close(s);
    tu_rmrf(dir);
    free(dir);
}

/* Searches on other threads while one thread appends big batches: no deadlock, and every
 * batch acknowledged before a search started is visible to it. */
typedef struct {
    lcx_store *s;
    uint32_t acked;   /* batches acknowledged so far (atomic; written by the appender) */
    int stop;         /* atomic */
    int bad;          /* atomic */
} dr_arg;

static void *dr_search(void *p)
{
    dr_arg *a = p;
    while (!__atomic_load_n(&a->stop, __ATOMIC_ACQUIRE)) {
        uint32_t acked = __atomic_load_n(&a->acked, __ATOMIC_ACQUIRE);
        if (!acked) continue;
        uint32_t want = acked * 100 - 1;   /* the last chunk of the last acknowledged batch */
        lcx_chunk c;
        if (lcx_store_get(a->s, want, &c) != 0) __atomic_fetch_add(&a->bad, 1, __ATOMIC_RELAXED);
        if (lcx_store_count(a->s) < acked * 100) __atomic_fetch_add(&a->bad, 1, __ATOMIC_RELAXED);
    }
    return NULL;
}

static void test_deferred_concurrent_reads(void **st)
{
    (void)st;
    char *dir = tu_tmpdir();
    dr_arg a = {0};
    assert_int_equal(lcx_store_open(dir, g_emb, NULL, &a.s), 0);
    pthread_t th[2];
    for (int k = 0; k < 2; k++) assert_int_equal(pthread_create(&th[k], NULL, dr_search, &a), 0);
    for (uint32_t b = 0; b < 30; b++) {
        assert_int_equal(append_n(a.s, b * 100, 100, NULL), 0);
        __atomic_store_n(&a.acked, b + 1, __ATOMIC_RELEASE);
    }
    __atomic_store_n(&a.stop, 1, __ATOMIC_RELEASE);
    for (int k = 0; k < 2; k++) pthread_join(th[k], NULL);
    assert_int_equal(a.bad, 0);
    assert_int_equal(lcx_store_count(a.s), 3000);
    for (uint32_t i = 0; i < 3000; i += 101) expect_found(a.s, i);
    lcx_store_close(a.s);
    tu_rmrf(dir);
    free(dir);
}

int main(void)
{
    srand((unsigned)time(NULL));
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_basic_persist),
        cmocka_unit_test(test_single_handle),
        cmocka_unit_test(test_snapshot_and_tail),
        cmocka_unit_test(test_fingerprint_mismatch),
        cmocka_unit_test(test_corruption),
        cmocka_unit_test(test_corrupt_snapshot_falls_back),
        cmocka_unit_test(test_crash_kill9),
        cmocka_unit_test(test_v1_log_compat),
        cmocka_unit_test(test_text_records_replay),
        cmocka_unit_test(test_prepare_commit),
        cmocka_unit_test(test_concurrent_commits),
        cmocka_unit_test(test_deferred_publish),
        cmocka_unit_test(test_deferred_concurrent_reads),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
