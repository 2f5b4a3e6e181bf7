/* Rescue query signal: text after the last case-insensitive "question:", else the last
 * 512 bytes on a UTF-8 boundary. */
#include "testutil.h"
#include "longctx/lcx.h"
#include <string.h>

static void q(const char *msg, const char *want)
{
    size_t off = 99, len = 99;
    lcx_rescue_query(msg, strlen(msg), &off, &len);
    assert_int_equal(len, strlen(want));
    assert_memory_equal(msg + off, want, len);
}

static void test_marker(void **st)
{
    (void)st;
    q("blah blah Question: what is X?", "what is X?");
    q("QUESTION:first\nmore text question:  second one \n", "second one");
    q("qUeStIoN:\tmixed", "mixed");
    q("short message", "short message");
    q("", "");
    q("ends with question:", "ends with question:");   /* nothing after it: tail fallback */
}

static void test_tail(void **st)
{
    (void)st;
    char msg[2000];
    memset(msg, 'a', 1000);
    msg[1000] = 0;
    size_t off, len;
    lcx_rescue_query(msg, 1000, &off, &len);
    assert_int_equal(off, 488);
    assert_int_equal(len, 512);
    /* a multi-byte character straddling the cut: the query starts after it */
    memset(msg, 'b', 600);
    const char *e = "\xc3\xa9";   /* é */
    memcpy(msg + 87, e, 2);        /* bytes 87,88: cut at 88 falls inside */
    lcx_rescue_query(msg, 600, &off, &len);
    assert_int_equal(off, 89);
    assert_int_equal(len, 511);
    lcx_rescue_query(NULL, 0, &off, &len);
    assert_int_equal(len, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_marker), cmocka_unit_test(test_tail)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
