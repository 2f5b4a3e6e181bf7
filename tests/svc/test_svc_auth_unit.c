/* White-box: the auth helpers (auth.c). */
#include "testutil.h"
#include "svc/svc.h"

#include <string.h>

static void test_ct_equal(void **state)
{
    (void)state;
    assert_true(lcx__svc_ct_equal("abc", 3, "abc", 3));
    assert_false(lcx__svc_ct_equal("abd", 3, "abc", 3));
    assert_false(lcx__svc_ct_equal("ab", 2, "abc", 3));      /* prefix */
    assert_false(lcx__svc_ct_equal("abcd", 4, "abc", 3));    /* longer */
    assert_false(lcx__svc_ct_equal("", 0, "abc", 3));
    assert_false(lcx__svc_ct_equal("abc\0", 4, "abc", 3));   /* embedded NUL is a difference */
    assert_true(lcx__svc_ct_equal("", 0, "", 0));
    assert_false(lcx__svc_ct_equal("\x80", 1, "\x00", 1));
}

static void test_loopback(void **state)
{
    (void)state;
    assert_true(lcx__svc_host_is_loopback("127.0.0.1"));
    assert_true(lcx__svc_host_is_loopback("127.1.2.3"));
    assert_true(lcx__svc_host_is_loopback("::1"));
    assert_false(lcx__svc_host_is_loopback("0.0.0.0"));
    assert_false(lcx__svc_host_is_loopback("::"));
    assert_false(lcx__svc_host_is_loopback("10.0.0.1"));
    assert_false(lcx__svc_host_is_loopback("128.0.0.1"));
    assert_false(lcx__svc_host_is_loopback(""));
    assert_false(lcx__svc_host_is_loopback("::ffff:10.0.0.1"));
    assert_true(lcx__svc_host_is_loopback("::ffff:127.0.0.1"));
}

static void test_config_rule(void **state)
{
    (void)state;
    lcx_svc_config c;
    lcx_svc_config_defaults(&c);
    char msg[512] = "";
    assert_int_equal(lcx__svc_auth_config_check(&c, msg, sizeof msg), 0);   /* 127.0.0.1 default */
    snprintf(c.host, sizeof c.host, "0.0.0.0");
    assert_int_equal(lcx__svc_auth_config_check(&c, msg, sizeof msg), LCX_EINVAL);
    assert_non_null(strstr(msg, "--insecure-no-auth"));
    c.insecure_no_auth = true;
    assert_int_equal(lcx__svc_auth_config_check(&c, msg, sizeof msg), 0);
    c.insecure_no_auth = false;
    snprintf(c.auth_token, sizeof c.auth_token, "t");
    assert_int_equal(lcx__svc_auth_config_check(&c, msg, sizeof msg), 0);
    /* flags parse */
    lcx_svc_config_defaults(&c);
    char *argv[] = {"serve", "--auth-token", "xyz", "--insecure-no-auth", "--shutdown-grace-s", "2.5", NULL};
    assert_int_equal(lcx__svc_config_parse(&c, 6, argv, stderr), 0);
    assert_string_equal(c.auth_token, "xyz");
    assert_true(c.insecure_no_auth);
    assert_true(c.shutdown_grace_s == 2.5);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ct_equal),
        cmocka_unit_test(test_loopback),
        cmocka_unit_test(test_config_rule),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
