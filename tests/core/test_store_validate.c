/* lcx_store_validate agrees with lcx_store_open about a log cut during creation: a
 * chunks.log shorter than its header (a kill between create and the header's fsync) holds
 * nothing acknowledged, the open treats it as a new store, and validate (and the session
 * status's lcx__store_peek) call it a valid empty store — not corrupt. A snapshot next to
 * such a log is corrupt (it claims records the log cannot hold); a log with a bad full
 * header stays corrupt. */
#include "testutil.h"
#include "longctx/lcx.h"
#include "store/store_fmt.h"
#include "store/store_int.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

static void put(const char *dir, const char *name, const void *b, size_t n)
{
    char p[4200];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    assert_int_equal(tu_write(p, b, n), 0);
}

static void expect(const char *dir, int want, const char *needle)
{
    char msg[256];
    int rc = lcx_store_validate(dir, msg, sizeof msg);
    if (rc != want) fail_msg("validate %d (want %d): %s", rc, want, msg);
    if (needle && !strstr(msg, needle)) fail_msg("validate: \"%s\" lacks \"%s\"", msg, needle);
}

/* the open treats the short log as new, and the store it leaves validates with the record */
static void open_append(const char *dir)
{
    lcx_store *s;
    assert_int_equal(lcx_store_open(dir, g_emb, NULL, &s), 0);
    assert_int_equal(lcx_store_count(s), 0);
    lcx_chunk c = lcx_chunk_init();
    c.text = "validate after a torn creation";
    c.text_len = (uint32_t)strlen(c.text);
    assert_int_equal(lcx_store_append(s, &c, 1, NULL), 0);
    lcx_store_close(s);
    expect(dir, 0, "1 records");
}

static void test_short_log_is_empty_store(void **st)
{
    (void)st;
    static const size_t sizes[] = {0, 1, 8, sizeof(lcx_log_hdr) - 1};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        char *dir = tu_tmpdir();
        char *b = calloc(1, sizeof(lcx_log_hdr));
        assert_non_null(b);
        memcpy(b, LCX_LOG_MAGIC, sizes[i] < 8 ? sizes[i] : 8);   /* a header cut at sizes[i] */
        put(dir, LCX_LOG_NAME, b, sizes[i]);
        free(b);
        expect(dir, 0, "empty store");
        /* the session status's peek agrees: present, empty, no fingerprint yet */
        char fp[64] = "x";
        uint32_t live = 7;
        assert_int_equal(lcx__store_peek(dir, fp, sizeof fp, &live), 0);
        assert_int_equal(live, 0);
        assert_string_equal(fp, "");
        open_append(dir);
        tu_rmrf(dir);
        free(dir);
    }
}

static void test_short_log_with_snapshot_corrupt(void **st)
{
    (void)st;
    char *dir = tu_tmpdir();
    put(dir, LCX_LOG_NAME, "", 0);
    put(dir, LCX_SNAP_NAME, "LCXSNAP", 7);
    expect(dir, LCX_ECORRUPT, "snapshot");
    tu_rmrf(dir);
    free(dir);
}

static void test_bad_full_header_corrupt(void **st)
{
    (void)st;
    char *dir = tu_tmpdir();
    char b[sizeof(lcx_log_hdr)];
    memset(b, 'x', sizeof b);
    put(dir, LCX_LOG_NAME, b, sizeof b);
    char msg[256];
    assert_true(lcx_store_validate(dir, msg, sizeof msg) < 0);
    tu_rmrf(dir);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test(test_short_log_is_empty_store),
        cmocka_unit_test(test_short_log_with_snapshot_corrupt),
        cmocka_unit_test(test_bad_full_header_corrupt),
    };
    return cmocka_run_group_tests(t, setup, teardown);
}
