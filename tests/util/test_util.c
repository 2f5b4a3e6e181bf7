/* src/util: buffers with caps, JSON string escaping, atomic writes, UTF-8 validation,
 * and hashes checked against Python's hashlib/crc reference values. */
#include "testutil.h"
#include "util/util.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void test_buf_cap(void **st)
{
    lcx_buf b = {.cap = 8};
    assert_int_equal(lcx__buf_puts(&b, "12345678"), LCX_OK);
    assert_int_equal(lcx__buf_puts(&b, "9"), LCX_ELIMIT);
    assert_int_equal(b.len, 8);
    assert_string_equal(b.data, "12345678");
    lcx__buf_free(&b);
}

static void test_json_str(void **st)
{
    lcx_buf b = {0};
    assert_int_equal(lcx__buf_json_str(&b, "a\"b\\c\n\x01", 7), LCX_OK);
    assert_string_equal(b.data, "\"a\\\"b\\\\c\\n\\u0001\"");
    lcx__buf_free(&b);
    assert_int_equal(lcx__buf_json_num(&b, 3), LCX_OK);
    assert_int_equal(lcx__buf_json_num(&b, 0.5), LCX_OK);
    assert_string_equal(b.data, "30.5");
    lcx__buf_free(&b);
    /* shortest text that round-trips: floats print as written, doubles keep every bit */
    lcx__buf_json_f32(&b, 0.4f);
    lcx__buf_puts(&b, " ");
    lcx__buf_json_f32(&b, 1.0f / 3);
    lcx__buf_puts(&b, " ");
    lcx__buf_json_num(&b, 1764480000.123456);
    lcx__buf_puts(&b, " ");
    lcx__buf_json_num(&b, 0.1 + 0.2);
    assert_string_equal(b.data, "0.4 0.33333334 1764480000.123456 0.30000000000000004");
    lcx__buf_free(&b);
}

static void test_sha256(void **st)
{
    char hex[65];
    lcx__sha256_hex("", 0, hex, 32);
    assert_string_equal(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    lcx__sha256_hex("abc", 3, hex, 32);
    assert_string_equal(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    /* 56..64-byte messages take the two-block padding path */
    const char *m = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    lcx__sha256_hex(m, strlen(m), hex, 8);
    assert_string_equal(hex, "248d6a61d20638b8");
}

static void test_crc32c(void **st)
{
    /* RFC 3720 check value for "123456789" */
    assert_int_equal(lcx__crc32c(0, "123456789", 9), 0xe3069283u);
    /* incremental == one-shot */
    uint32_t c = lcx__crc32c(0, "12345", 5);
    assert_int_equal(lcx__crc32c(c, "6789", 4), 0xe3069283u);
    /* the 3-stream path (inputs of 768 bytes and more) against one bitwise CRC, at every
     * length up to 3000, odd alignments, a chained call, and 1 MB */
    static unsigned char buf[(1 << 20) + 8];
    uint64_t r = 0x9e3779b97f4a7c15ull;
    for (size_t i = 0; i < sizeof buf; i++) {
        r ^= r << 13; r ^= r >> 7; r ^= r << 17;
        buf[i] = (unsigned char)r;
    }
    for (size_t len = 0; len <= 3000; len += len < 800 ? 1 : 7)
        for (size_t off = 0; off < 3; off++) {
            uint32_t ref = ~0u;
            for (size_t i = 0; i < len; i++) {
                ref ^= buf[off + i];
                for (int k = 0; k < 8; k++) ref = ref >> 1 ^ (0x82f63b78u & (0u - (ref & 1)));
            }
            assert_int_equal(lcx__crc32c(0, buf + off, len), ~ref);
            assert_int_equal(lcx__crc32c(lcx__crc32c(0, buf + off, len / 3), buf + off + len / 3, len - len / 3), ~ref);
        }
    uint32_t ref = ~0u;
    for (size_t i = 0; i < (1 << 20); i++) {
        ref ^= buf[i];
        for (int k = 0; k < 8; k++) ref = ref >> 1 ^ (0x82f63b78u & (0u - (ref & 1)));
    }
    assert_int_equal(lcx__crc32c(0, buf, 1 << 20), ~ref);
}

static void test_hash64_stable(void **st)
{
    assert_true(lcx__hash64("abc", 3, 0) == lcx__hash64("abc", 3, 0));
    assert_true(lcx__hash64("abc", 3, 0) != lcx__hash64("abd", 3, 0));
    assert_true(lcx__hash64("abc", 3, 0) != lcx__hash64("abc", 3, 1));
    assert_true(lcx__hash64("", 0, 0) != lcx__hash64("a", 1, 0));
}

/* Golden values, recorded before lcx__hash64 moved into hash_inl.h: BM25 term hashes in
 * snapshots and the hash embedder's features depend on them, so any change must be
 * deliberate (and bump the snapshot format / embedder fingerprint). Covers every tail
 * length 0..64 and 3 seeds. */
static void test_hash64_golden(void **st)
{
    (void)st;
    unsigned char buf[80];
    for (int i = 0; i < 80; i++) buf[i] = (unsigned char)(i * 37 + 11);
    uint64_t acc = 0;
    for (uint64_t seed = 0; seed < 3; seed++)
        for (size_t n = 0; n <= 64; n++) acc = acc * 0x100000001b3ull ^ lcx__hash64(buf + n % 7, n, seed);
    assert_true(acc == 0xdd5e7aed661ea29bull);
    assert_true(lcx__hash64("abc", 3, 0) == 0xc2a2b6aa98715a47ull);
    assert_true(lcx__hash64("", 0, 0) == 0x140f9e0bd2bf1e27ull);
}

static void test_utf8(void **st)
{
    assert_true(lcx__utf8_valid("h\xc3\xa9llo \xf0\x9f\x98\x80", 11));
    assert_false(lcx__utf8_valid("\xc0\xaf", 2));          /* overlong */
    assert_false(lcx__utf8_valid("\xed\xa0\x80", 3));      /* surrogate */
    assert_false(lcx__utf8_valid("\xe2\x82", 2));          /* truncated */
    assert_false(lcx__utf8_valid("\xff", 1));
    assert_int_equal(lcx__utf8_chars("h\xc3\xa9llo \xf0\x9f\x9a\x80", 11), 7);
    assert_int_equal(lcx__utf8_chars("", 0), 0);
    /* a cut never splits a character: "h" + é (2) + € (3) + 😀 (4) = 10 bytes; every cap
     * lands on the start of the character it would split */
    static const char mix[] = "h\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80";
    static const size_t want[] = {0, 1, 1, 3, 3, 3, 6, 6, 6, 6, 10, 10};
    for (size_t cap = 0; cap < sizeof want / sizeof *want; cap++) {
        size_t k = lcx__utf8_cut(mix, 10, cap);
        assert_int_equal(k, want[cap]);
        assert_true(lcx__utf8_valid(mix, k));
    }
    assert_int_equal(lcx__utf8_cut("abc", 3, 1), 1);
    assert_int_equal(lcx__utf8_cut(NULL, 0, 0), 0);
    /* long ASCII runs (the 32-byte fast path) with a bad or good sequence at every offset */
    char buf[200];
    for (int at = 0; at < 190; at++) {
        memset(buf, 'a', sizeof buf);
        memcpy(buf + at, "\xc3\xa9", 2);
        assert_true(lcx__utf8_valid(buf, sizeof buf));
        buf[at + 1] = 'x';
        assert_false(lcx__utf8_valid(buf, sizeof buf));
        assert_true(lcx__utf8_valid(buf, (size_t)at));
    }
}

static void test_atomic_write(void **st)
{
    char *d = tu_tmpdir();
    char p[4400], sub[4200];
    snprintf(sub, sizeof sub, "%s/a/b", d);
    assert_int_equal(lcx__mkdirs(sub), LCX_OK);
    snprintf(p, sizeof p, "%s/f", sub);
    assert_int_equal(lcx__write_file_atomic(p, "one", 3), LCX_OK);
    assert_int_equal(lcx__write_file_atomic(p, "two!", 4), LCX_OK);
    char *s;
    size_t n;
    assert_int_equal(lcx__read_file(p, 0, &s, &n), LCX_OK);
    assert_int_equal(n, 4);
    assert_string_equal(s, "two!");
    free(s);
    assert_int_equal(lcx__read_file(p, 2, &s, &n), LCX_ELIMIT);
    snprintf(p, sizeof p, "%s/missing", d);
    assert_int_equal(lcx__read_file(p, 0, &s, &n), LCX_ENOTFOUND);
    tu_rmrf(d);
    free(d);
}

static void test_alloc_huge(void **st)
{
    (void)st;
    size_t sizes[] = {0, 1, (2u << 20) - 1, (5u << 20) + 3};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        unsigned char *p = lcx__alloc_huge(sizes[i]);
        assert_non_null(p);
        assert_int_equal((uintptr_t)p % (2u << 20), 0);
        memset(p, 0xa5, sizes[i]);   /* the whole size is usable (ASan checks the bounds) */
        if (sizes[i]) assert_int_equal(p[sizes[i] - 1], 0xa5);
        lcx__advise_huge(p, sizes[i]);
        free(p);
    }
    assert_null(lcx__alloc_huge(SIZE_MAX));
    assert_null(lcx__alloc_huge(SIZE_MAX - (1u << 20)));
}

/* lcx__big_realloc through every transition (small → small → big → bigger → same pages →
 * smaller big → small → big again): contents kept, every growth zero beyond the old size
 * (also where a shrink left written bytes inside the kept pages), big blocks 2 MiB
 * aligned; then freed with their sizes (ASan/LSan see the small ones). */
static void test_big_realloc(void **st)
{
    (void)st;
    const size_t M = 1u << 20;
    size_t sizes[] = {100, 3 * M, 4 * M, 9 * M + 5, 9 * M + 7, 40 * M, 6 * M, 2 * M, 64, 8 * M, 7 * M, 8 * M - 1};
    unsigned char *p = NULL;
    size_t old = 0;
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        size_t n = sizes[i];
        unsigned char *q = lcx__big_realloc(p, old, n);
        assert_non_null(q);
        size_t keep = old < n ? old : n;
        for (size_t k = 0; k < keep; k += 4093) assert_int_equal(q[k], (unsigned char)(k * 7 + old));
        if (keep) assert_int_equal(q[keep - 1], (unsigned char)((keep - 1) * 7 + old));
        if (n >= 4 * M) assert_int_equal((uintptr_t)q % (2 * M), 0);
        for (size_t k = old; k < n; k += k + 4093 < n ? 4093 : 1) assert_int_equal(q[k], 0);   /* grown: zero */
        for (size_t k = 0; k < n; k++) q[k] = (unsigned char)(k * 7 + n);
        p = q;
        old = n;
    }
    lcx__big_free(p, old);
    lcx__big_free(NULL, 0);
    p = lcx__big_realloc(NULL, 0, 5 * M);   /* fresh big block: zero */
    assert_non_null(p);
    assert_int_equal(p[0] | p[5 * M - 1], 0);
    lcx__big_free(p, 5 * M);
    assert_null(lcx__big_realloc(NULL, 0, SIZE_MAX - 1));
}

static void test_strerror(void **st)
{
    assert_string_equal(lcx_strerror(LCX_ELIMIT), "limit exceeded");
    assert_string_equal(lcx_strerror(-999), "unknown error");
    /* the errno behind LCX_EIO is kept for the message */
    char *d = tu_tmpdir(), *f = lcx__path_join(d, "file"), *sub = lcx__path_join(f, "sub");
    assert_int_equal(lcx__write_file_atomic(f, "x", 1), 0);
    assert_int_equal(lcx__mkdirs(sub), LCX_EIO);   /* a path under a regular file */
    assert_int_equal(lcx_last_errno(), ENOTDIR);
    char why[160];
    assert_string_equal(lcx_strerror_detail(LCX_EIO, why, sizeof why), "I/O error: Not a directory");
    assert_int_equal(lcx__write_file_atomic(sub, "x", 1), LCX_EIO);
    assert_int_equal(lcx_last_errno(), ENOTDIR);
    free(sub);
    sub = lcx__path_join(d, "missing/x");
    assert_int_equal(lcx__write_file_atomic(sub, "x", 1), LCX_EIO);
    assert_int_equal(lcx_last_errno(), ENOENT);
    assert_string_equal(lcx_strerror_detail(LCX_ELIMIT, why, sizeof why), "limit exceeded");   /* no detail */
    assert_string_equal(lcx_strerror_detail(LCX_EIO, why, 5), "I/O ");                        /* truncated */
    free(sub), free(f);
    tu_rmrf(d);
    free(d);
}

/* The escaper's 8-byte fast path against a byte-by-byte reference: every byte value at
 * every offset of an otherwise clean 40-byte string, and random mixes. */
static void json_str_ref(lcx_buf *b, const unsigned char *s, size_t n)
{
    lcx__buf_puts(b, "\"");
    for (size_t i = 0; i < n; i++) {
        unsigned c = s[i];
        if (c == '"') lcx__buf_puts(b, "\\\"");
        else if (c == '\\') lcx__buf_puts(b, "\\\\");
        else if (c == '\n') lcx__buf_puts(b, "\\n");
        else if (c == '\r') lcx__buf_puts(b, "\\r");
        else if (c == '\t') lcx__buf_puts(b, "\\t");
        else if (c == '\b') lcx__buf_puts(b, "\\b");
        else if (c == '\f') lcx__buf_puts(b, "\\f");
        else if (c < 0x20) lcx__buf_printf(b, "\\u%04x", c);
        else lcx__buf_append(b, &s[i], 1);
    }
    lcx__buf_puts(b, "\"");
}

static void test_json_str_fast_vs_ref(void **st)
{
    unsigned char s[40];
    lcx_buf a = {0}, r = {0};
    for (int pos = 0; pos < 40; pos++)
        for (int c = 1; c < 256; c++) {
            memset(s, 'a', sizeof s);
            s[pos] = (unsigned char)c;
            lcx__buf_truncate(&a, 0), lcx__buf_truncate(&r, 0);
            assert_int_equal(lcx__buf_json_str(&a, (const char *)s, sizeof s), 0);
            json_str_ref(&r, s, sizeof s);
            assert_int_equal(a.len, r.len);
            assert_memory_equal(a.data, r.data, r.len);
        }
    uint64_t x = 88172645463325252ull;
    for (int it = 0; it < 2000; it++) {
        size_t n = (size_t)(it % 40);
        for (size_t i = 0; i < n; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            s[i] = (unsigned char)(x % 5 ? 'A' + x % 26 : x >> 8);
        }
        lcx__buf_truncate(&a, 0), lcx__buf_truncate(&r, 0);
        lcx__buf_json_str(&a, (const char *)s, n);
        json_str_ref(&r, s, n);
        assert_int_equal(a.len, r.len);
        assert_memory_equal(a.data, r.data, r.len);
    }
    lcx__buf_free(&a), lcx__buf_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_buf_cap),     cmocka_unit_test(test_json_str),
        cmocka_unit_test(test_sha256),      cmocka_unit_test(test_crc32c),
        cmocka_unit_test(test_hash64_stable), cmocka_unit_test(test_hash64_golden), cmocka_unit_test(test_utf8),
        cmocka_unit_test(test_atomic_write), cmocka_unit_test(test_strerror), cmocka_unit_test(test_alloc_huge),
        cmocka_unit_test(test_big_realloc), cmocka_unit_test(test_json_str_fast_vs_ref),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
