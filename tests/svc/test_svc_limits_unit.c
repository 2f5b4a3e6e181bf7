/* White-box: the per-client limits (ratelimit.c): token-bucket arithmetic, one entry per
 * address (IPv4-mapped IPv6 = IPv4), connection counting, and the sweep of idle entries. */
#include "testutil.h"
#include "svc/svc.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>

static struct sockaddr_in v4(const char *ip)
{
    struct sockaddr_in a = {.sin_family = AF_INET};
    assert_int_equal(inet_pton(AF_INET, ip, &a.sin_addr), 1);
    return a;
}

static struct sockaddr_in6 v6(const char *ip)
{
    struct sockaddr_in6 a = {.sin6_family = AF_INET6};
    assert_int_equal(inet_pton(AF_INET6, ip, &a.sin6_addr), 1);
    return a;
}

static void test_bucket(void **state)
{
    (void)state;
    lcx_svc_config c;
    lcx_svc_config_defaults(&c);
    c.client_rate = 0.001;   /* one token per 1000 s: no refill within the test */
    c.client_burst = 3;
    struct lcx_svc_limits *l;
    assert_int_equal(lcx__svc_limits_new(&c, &l), 0);
    bool over;
    struct sockaddr_in a = v4("10.0.0.1"), b = v4("10.0.0.2");
    struct sockaddr_in6 am = v6("::ffff:10.0.0.1"), other6 = v6("2001:db8::1");
    struct lcx_svc_client *ca = lcx__svc_client_open(l, (struct sockaddr *)&a, &over);
    assert_non_null(ca);
    assert_false(over);
    for (int i = 0; i < 3; i++) assert_true(lcx__svc_client_take(l, ca) == 0);
    double w = lcx__svc_client_take(l, ca);
    assert_true(w > 999 && w <= 1000.001);   /* (1 - tokens) / rate */
    /* the same address over IPv4-mapped IPv6 is the same client (same exhausted bucket) */
    struct lcx_svc_client *cm = lcx__svc_client_open(l, (struct sockaddr *)&am, &over);
    assert_ptr_equal(cm, ca);
    assert_true(lcx__svc_client_take(l, cm) > 0);
    /* other addresses have their own buckets */
    struct lcx_svc_client *cb = lcx__svc_client_open(l, (struct sockaddr *)&b, &over);
    struct lcx_svc_client *c6 = lcx__svc_client_open(l, (struct sockaddr *)&other6, &over);
    assert_true(cb != ca && c6 != ca && c6 != cb);
    assert_true(lcx__svc_client_take(l, cb) == 0);
    assert_true(lcx__svc_client_take(l, c6) == 0);
    /* closing and reopening keeps the (not yet refilled) bucket */
    lcx__svc_client_close(l, cm);
    lcx__svc_client_close(l, ca);
    ca = lcx__svc_client_open(l, (struct sockaddr *)&a, &over);
    assert_true(lcx__svc_client_take(l, ca) > 0);
    lcx_svc_limits_stats st;
    lcx__svc_limits_stats(l, &st);
    assert_int_equal(st.clients, 3);
    assert_int_equal(st.refused_rate, 3);
    assert_int_equal(st.refused_conns, 0);
    /* non-IP sockets are not tracked */
    struct sockaddr un = {.sa_family = AF_UNIX};
    assert_null(lcx__svc_client_open(l, &un, &over));
    assert_false(over);
    assert_true(lcx__svc_client_take(l, NULL) == 0);
    lcx__svc_limits_free(l);
}

static void test_connections(void **state)
{
    (void)state;
    lcx_svc_config c;
    lcx_svc_config_defaults(&c);
    assert_int_equal(lcx__svc_client_max_connections(&c), 448);   /* 7/8 of 512 */
    c.client_max_connections = 2;
    assert_int_equal(lcx__svc_client_max_connections(&c), 2);
    struct lcx_svc_limits *l;
    assert_int_equal(lcx__svc_limits_new(&c, &l), 0);
    struct sockaddr_in a = v4("192.0.2.7");
    bool o1, o2, o3, o4;
    struct lcx_svc_client *x = lcx__svc_client_open(l, (struct sockaddr *)&a, &o1);
    struct lcx_svc_client *y = lcx__svc_client_open(l, (struct sockaddr *)&a, &o2);
    struct lcx_svc_client *z = lcx__svc_client_open(l, (struct sockaddr *)&a, &o3);
    assert_false(o1);
    assert_false(o2);
    assert_true(o3);
    lcx__svc_client_close(l, z);
    lcx__svc_client_close(l, y);
    struct lcx_svc_client *w = lcx__svc_client_open(l, (struct sockaddr *)&a, &o4);
    assert_false(o4);
    lcx_svc_limits_stats st;
    lcx__svc_limits_stats(l, &st);
    assert_int_equal(st.refused_conns, 1);
    lcx__svc_client_close(l, w);
    lcx__svc_client_close(l, x);
    lcx__svc_limits_free(l);
}

/* Idle entries with a full bucket are dropped once the table is big (nothing is lost:
 * a new entry starts full); entries with a connection open or a spent bucket stay. */
static void test_sweep(void **state)
{
    (void)state;
    lcx_svc_config c;
    lcx_svc_config_defaults(&c);
    c.client_rate = 0.001;
    c.client_burst = 5;
    struct lcx_svc_limits *l;
    assert_int_equal(lcx__svc_limits_new(&c, &l), 0);
    bool over;
    struct sockaddr_in spent = v4("198.51.100.1"), held = v4("198.51.100.2");
    struct lcx_svc_client *cs = lcx__svc_client_open(l, (struct sockaddr *)&spent, &over);
    assert_true(lcx__svc_client_take(l, cs) == 0);   /* 4 of 5 left: not full */
    lcx__svc_client_close(l, cs);
    struct lcx_svc_client *ch = lcx__svc_client_open(l, (struct sockaddr *)&held, &over);
    enum { N = 8300 };
    for (int i = 0; i < N; i++) {
        struct sockaddr_in a = {.sin_family = AF_INET};
        a.sin_addr.s_addr = htonl(0x0a000000u + (uint32_t)i + 1);
        struct lcx_svc_client *e = lcx__svc_client_open(l, (struct sockaddr *)&a, &over);
        assert_non_null(e);
        lcx__svc_client_close(l, e);
    }
    lcx_svc_limits_stats st;
    lcx__svc_limits_stats(l, &st);
    /* one sweep ran when the table passed 8192 (at most one a second) */
    assert_true(st.clients < N);
    assert_true(st.clients >= 2);
    /* the held and the spent entries survived it */
    struct lcx_svc_client *again = lcx__svc_client_open(l, (struct sockaddr *)&spent, &over);
    assert_ptr_equal(again, cs);
    assert_ptr_equal(lcx__svc_client_open(l, (struct sockaddr *)&held, &over), ch);
    lcx__svc_client_close(l, again);
    lcx__svc_client_close(l, ch);
    lcx__svc_client_close(l, ch);
    lcx__svc_limits_free(l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bucket),
        cmocka_unit_test(test_connections),
        cmocka_unit_test(test_sweep),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
