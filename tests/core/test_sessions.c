/* Sessions manager: create/acquire/release, hibernate/resume with status, LRU hibernation
 * by count and by memory, the idle janitor, deferred hibernation of a busy session,
 * embedder-fingerprint refusal, bad ids, and a concurrent stress run. */
#include "testutil.h"
#include "longctx/lcx.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static lcx_embedder *emb;

static void put(lcx_sessions *ss, const char *id, const char *text)
{
    lcx_store *s;
    assert_int_equal(lcx_sessions_acquire(ss, id, true, &s), 0);
    lcx_chunk c = lcx_chunk_init();
    c.text = text;
    c.text_len = (uint32_t)strlen(text);
    c.tok_start = 10;
    c.tok_end = 20;
    c.layer = 3;
    assert_int_equal(lcx_store_append(s, &c, 1, NULL), 0);
    lcx_sessions_release(ss, s);
}

static lcx_session_status status(lcx_sessions *ss, const char *id)
{
    lcx_session_status st;
    assert_int_equal(lcx_sessions_status(ss, id, &st), 0);
    return st;
}

static void test_lifecycle(void **state)
{
    (void)state;
    char *dir = tu_tmpdir();
    lcx_sessions_opts o = {0};
    o.data_dir = dir;
    lcx_sessions *ss;
    assert_int_equal(lcx_sessions_open(&o, emb, &ss), 0);
    lcx_store *s;
    assert_int_equal(lcx_sessions_acquire(ss, "nope", false, &s), LCX_ENOTFOUND);
    assert_null(s);
    lcx_session_status st;
    assert_int_equal(lcx_sessions_status(ss, "nope", &st), LCX_ENOTFOUND);
    put(ss, "sess-1", "IMPORTANT: Project NOVA was provisioned with access code 481729.");
    put(ss, "sess-1", "filler about quarterly records");
    put(ss, "sess/../2", "another session entirely");
    assert_int_equal(lcx_sessions_active(ss), 2);
    assert_true(lcx_sessions_mem_bytes(ss) > 0);
    st = status(ss, "sess-1");
    assert_true(st.in_ram && st.on_disk);
    assert_int_equal(st.n_chunks_in_ram, 2);
    assert_int_equal(st.n_chunks_on_disk, 2);
    assert_string_equal(st.embedder_fingerprint, lcx_embedder_fingerprint(emb));
    assert_true(st.hibernated_at == 0);
    /* directory: sessions/<32 hex>/ with the id inside, never the raw id */
    char p[4200];
    snprintf(p, sizeof p, "%s/sessions", dir);
    char *out = NULL;
    char cmd[8800];
    snprintf(cmd, sizeof cmd, "ls %s | wc -l; cat %s/*/id | sort | tr '\\n' ' '", p, p);
    assert_int_equal(tu_run(cmd, &out), 0);
    assert_non_null(strstr(out, "2\n"));
    assert_non_null(strstr(out, "sess-1"));
    assert_non_null(strstr(out, "sess/../2"));
    free(out);

    assert_int_equal(lcx_sessions_hibernate(ss, "sess-1"), 0);
    st = status(ss, "sess-1");
    assert_false(st.in_ram);
    assert_true(st.on_disk);
    assert_int_equal(st.n_chunks_in_ram, 0);
    assert_int_equal(st.n_chunks_on_disk, 2);
    assert_true(st.hibernated_at > 1.6e9);
    assert_string_equal(st.embedder_fingerprint, lcx_embedder_fingerprint(emb));
    assert_int_equal(lcx_sessions_active(ss), 1);
    assert_int_equal(lcx_sessions_hibernate(ss, "sess-1"), 0);     /* already: fine */
    assert_int_equal(lcx_sessions_hibernate(ss, "ghost"), LCX_ENOTFOUND);
    assert_int_equal(lcx_sessions_resume(ss, "sess-1"), 0);
    st = status(ss, "sess-1");
    assert_true(st.in_ram);
    assert_int_equal(st.n_chunks_in_ram, 2);
    assert_int_equal(lcx_sessions_acquire(ss, "sess-1", false, &s), 0);
    lcx_search_opts so = lcx_search_defaults();
    lcx_hit h[2];
    const char *q = "access code for Project NOVA";
    assert_true(lcx_store_search(s, q, strlen(q), &so, h, 2) >= 1);
    assert_int_equal(h[0].id, 0);
    lcx_chunk c;
    assert_int_equal(lcx_store_get(s, 0, &c), 0);
    assert_int_equal(c.layer, 3);
    lcx_sessions_release(ss, s);
    assert_int_equal(lcx_sessions_resume(ss, "ghost"), LCX_ENOTFOUND);
    /* probing unknown ids leaves nothing behind (and never creates directories) */
    for (int i = 0; i < 2000; i++) {
        char gid[32];
        snprintf(gid, sizeof gid, "ghost-%d", i);
        assert_int_equal(lcx_sessions_status(ss, gid, &st), LCX_ENOTFOUND);
        assert_int_equal(lcx_sessions_acquire(ss, gid, false, &s), LCX_ENOTFOUND);
        assert_int_equal(lcx_sessions_hibernate(ss, gid), LCX_ENOTFOUND);
    }
    out = NULL;
    snprintf(cmd, sizeof cmd, "ls %s | wc -l", p);
    assert_int_equal(tu_run(cmd, &out), 0);
    assert_int_equal(atoi(out), 2);
    free(out);
    lcx_sessions_close(ss);

    /* restart: everything still there, on disk only until touched */
    assert_int_equal(lcx_sessions_open(&o, emb, &ss), 0);
    assert_int_equal(lcx_sessions_active(ss), 0);
    st = status(ss, "sess/../2");
    assert_false(st.in_ram);
    assert_int_equal(st.n_chunks_on_disk, 1);
    st = status(ss, "sess-1");
    assert_true(st.hibernated_at > 0);   /* remembered across restarts */
    assert_int_equal(lcx_sessions_acquire(ss, "sess/../2", false, &s), 0);
    assert_int_equal(lcx_store_count(s), 1);
    lcx_sessions_release(ss, s);
    lcx_sessions_close(ss);

    /* another embedder: resume refuses */
    lcx_embedder *e2;
    assert_int_equal(lcx_embedder_hash_new(128, &e2), 0);
    assert_int_equal(lcx_sessions_open(&o, e2, &ss), 0);
    assert_int_equal(lcx_sessions_resume(ss, "sess-1"), LCX_EMISMATCH);
    assert_int_equal(lcx_sessions_acquire(ss, "sess-1", true, &s), LCX_EMISMATCH);
    lcx_sessions_close(ss);
    lcx_embedder_free(e2);
    tu_rmrf(dir);
    free(dir);
}

static void test_bad_ids(void **state)
{
    (void)state;
    char *dir = tu_tmpdir();
    lcx_sessions_opts o = {.data_dir = dir};
    lcx_sessions *ss;
    assert_int_equal(lcx_sessions_open(&o, emb, &ss), 0);
    lcx_store *s;
    char big[300];
    memset(big, 'x', 299);
    big[299] = 0;
    assert_int_equal(lcx_sessions_acquire(ss, "", true, &s), LCX_EINVAL);
    assert_int_equal(lcx_sessions_acquire(ss, big, true, &s), LCX_EINVAL);
    assert_int_equal(lcx_sessions_acquire(ss, "bad\xff", true, &s), LCX_EINVAL);
    assert_int_equal(lcx_sessions_acquire(ss, NULL, true, &s), LCX_EINVAL);
    big[256] = 0;
    assert_int_equal(lcx_sessions_acquire(ss, big, true, &s), 0);   /* 256 bytes is fine */
    lcx_sessions_release(ss, s);
    lcx_sessions_release(ss, NULL);
    lcx_sessions_close(ss);
    lcx_sessions_close(NULL);
    tu_rmrf(dir);
    free(dir);
}

static void test_lru_and_janitor(void **state)
{
    (void)state;
    char *dir = tu_tmpdir();
    lcx_sessions_opts o = {.data_dir = dir, .max_sessions = 2, .idle_hibernate_s = 0.05};
    lcx_sessions *ss;
    assert_int_equal(lcx_sessions_open(&o, emb, &ss), 0);
    put(ss, "a", "one");
    usleep(2000);
    put(ss, "b", "two");
    usleep(2000);
    put(ss, "c", "three");    /* over max_sessions: a (least recently used) goes to disk */
    assert_int_equal(lcx_sessions_active(ss), 2);
    assert_false(status(ss, "a").in_ram);
    assert_true(status(ss, "b").in_ram);
    assert_true(status(ss, "c").in_ram);
    /* a busy session is never hibernated: hold b, touch a → c (idle, older) goes */
    lcx_store *sb;
    assert_int_equal(lcx_sessions_acquire(ss, "b", false, &sb), 0);
    put(ss, "a", "again");
    assert_true(status(ss, "b").in_ram);
    assert_false(status(ss, "c").in_ram);
    /* deferred hibernation of the busy one */
    assert_int_equal(lcx_sessions_hibernate(ss, "b"), 0);
    assert_true(status(ss, "b").in_ram);
    assert_int_equal(lcx_store_count(sb), 1);          /* still usable */
    lcx_sessions_release(ss, sb);
    assert_false(status(ss, "b").in_ram);
    /* janitor */
    assert_true(status(ss, "a").in_ram);
    lcx_store *sa;
    assert_int_equal(lcx_sessions_acquire(ss, "a", false, &sa), 0);
    usleep(120000);
    assert_int_equal(lcx_sessions_janitor(ss), 0);     /* in use */
    lcx_sessions_release(ss, sa);
    usleep(120000);
    assert_int_equal(lcx_sessions_janitor(ss), 1);
    assert_int_equal(lcx_sessions_active(ss), 0);
    assert_int_equal(status(ss, "a").n_chunks_on_disk, 2);
    lcx_sessions_close(ss);

    /* memory limit */
    o.max_sessions = 100;
    o.max_mem_bytes = 1;   /* any second store is over */
    assert_int_equal(lcx_sessions_open(&o, emb, &ss), 0);
    put(ss, "a", "x");
    put(ss, "b", "y");
    assert_int_equal(lcx_sessions_active(ss), 1);
    assert_true(status(ss, "b").in_ram);
    lcx_sessions_close(ss);
    tu_rmrf(dir);
    free(dir);
}

typedef struct { lcx_sessions *ss; int t; int errors; } warg;

static void *worker(void *p)
{
    warg *w = p;
    char id[32], text[64];
    for (int i = 0; i < 150; i++) {
        snprintf(id, sizeof id, "s%d", (w->t + i) % 5);
        lcx_store *s;
        if (lcx_sessions_acquire(w->ss, id, true, &s)) { w->errors++; continue; }
        snprintf(text, sizeof text, "thread %d item %d marker%d", w->t, i, w->t * 1000 + i);
        lcx_chunk c = lcx_chunk_init();
        c.text = text;
        c.text_len = (uint32_t)strlen(text);
        if (lcx_store_append(s, &c, 1, NULL)) w->errors++;
        lcx_hit h[4];
        lcx_search_opts o = lcx_search_defaults();
        if (lcx_store_search(s, text, strlen(text), &o, h, 4) < 1) w->errors++;
        lcx_sessions_release(w->ss, s);
        if (i % 10 == 0) lcx_sessions_hibernate(w->ss, id);
        if (i % 17 == 0) lcx_sessions_janitor(w->ss);
    }
    return NULL;
}

static void test_concurrent(void **state)
{
    (void)state;
    char *dir = tu_tmpdir();
    lcx_sessions_opts o = {.data_dir = dir, .max_sessions = 2, .idle_hibernate_s = 0.001};
    lcx_sessions *ss;
    assert_int_equal(lcx_sessions_open(&o, emb, &ss), 0);
    pthread_t th[4];
    warg a[4];
    for (int t = 0; t < 4; t++) {
        a[t] = (warg){ss, t, 0};
        pthread_create(&th[t], NULL, worker, &a[t]);
    }
    for (int t = 0; t < 4; t++) {
        pthread_join(th[t], NULL);
        assert_int_equal(a[t].errors, 0);
    }
    uint32_t total = 0;
    for (int k = 0; k < 5; k++) {
        char id[8];
        snprintf(id, sizeof id, "s%d", k);
        total += status(ss, id).n_chunks_on_disk;
    }
    assert_int_equal(total, 600);
    lcx_sessions_close(ss);
    tu_rmrf(dir);
    free(dir);
}

int main(void)
{
    assert_int_equal(lcx_embedder_hash_new(0, &emb), 0);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lifecycle),
        cmocka_unit_test(test_bad_ids),
        cmocka_unit_test(test_lru_and_janitor),
        cmocka_unit_test(test_concurrent),
    };
    int r = cmocka_run_group_tests(tests, NULL, NULL);
    lcx_embedder_free(emb);
    return r;
}
