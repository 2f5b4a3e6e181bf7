/* longctx-svc: per-client limits (docs/SECURITY.md "Limits"): open connections and a
 * token-bucket request rate, per client address.
 *
 * A client is its IP address (IPv4, or the whole IPv6 address; an IPv4-mapped IPv6 address
 * is the IPv4 one). Behind a reverse proxy every caller is the proxy's address: the service
 * trusts no X-Forwarded-For, so limit there instead.
 *
 * One table entry per address, found by hash under one of STRIPES mutexes (a request holds
 * one only for the bucket arithmetic). An entry lives while the client has a connection
 * open, and after that until its bucket is full again: dropping a full bucket loses nothing
 * (a new entry starts full), so reconnecting per request cannot reset the rate. Idle full
 * entries are swept when the table grows past SWEEP_AT (at most once a second); past
 * MAX_CLIENTS tracked addresses new ones go untracked (not limited, counted in /metrics),
 * so a flood of source addresses cannot make the table grow without bound. */
#include "svc/svc.h"

#include <arpa/inet.h>
#include <math.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#define STRIPES 16
#define BUCKETS 4096            /* hash buckets (power of two) */
#define SWEEP_AT 8192           /* entries before idle ones are swept */
#define MAX_CLIENTS (1u << 20)  /* tracked addresses at most (~80 MiB worst case) */

struct lcx_svc_client {
    struct lcx_svc_client *next;
    uint8_t addr[16];           /* IPv6, or ::ffff:a.b.c.d for IPv4 */
    uint32_t conns;             /* open connections (guarded by the stripe) */
    double tokens;              /* bucket content at t_ms */
    double t_ms;
};

struct lcx_svc_limits {
    uint32_t max_conns;         /* 0: no connection limit */
    double rate, burst;         /* rate 0: no rate limit */
    pthread_mutex_t mu[STRIPES];
    struct lcx_svc_client *b[BUCKETS];
    uint32_t n;                 /* entries (atomic builtins) */
    double last_sweep_ms;       /* guarded by mu[0] while sweeping */
    uint64_t refused_conns, refused_rate, untracked;   /* atomic builtins */
};

uint32_t lcx__svc_client_max_connections(const lcx_svc_config *c)
{
    if (c->client_max_connections) return c->client_max_connections;
    /* one client can never take the last eighth of the connection slots */
    return (uint32_t)(c->max_connections - c->max_connections / 8);
}

int lcx__svc_limits_new(const lcx_svc_config *c, struct lcx_svc_limits **out)
{
    struct lcx_svc_limits *l = calloc(1, sizeof *l);
    *out = NULL;
    if (!l) return LCX_ENOMEM;
    l->max_conns = lcx__svc_client_max_connections(c);
    l->rate = c->client_rate > 0 ? c->client_rate : 0;
    l->burst = c->client_burst >= 1 ? c->client_burst : 1;
    for (int i = 0; i < STRIPES; i++) pthread_mutex_init(&l->mu[i], NULL);
    *out = l;
    return 0;
}

void lcx__svc_limits_free(struct lcx_svc_limits *l)
{
    if (!l) return;
    for (int i = 0; i < BUCKETS; i++)
        for (struct lcx_svc_client *c = l->b[i], *n; c; c = n) { n = c->next; free(c); }
    for (int i = 0; i < STRIPES; i++) pthread_mutex_destroy(&l->mu[i]);
    free(l);
}

static void key_of(const struct sockaddr *sa, uint8_t k[16])
{
    memset(k, 0, 16);
    if (sa && sa->sa_family == AF_INET) {
        k[10] = k[11] = 0xff;
        memcpy(k + 12, &((const struct sockaddr_in *)sa)->sin_addr, 4);
    } else if (sa && sa->sa_family == AF_INET6) {
        memcpy(k, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
    }
}

static uint32_t bucket_of(const uint8_t k[16]) { return (uint32_t)(lcx__hash64(k, 16, 0x11ed) & (BUCKETS - 1)); }

/* Bucket refill to now (caller holds the stripe). */
static void refill(const struct lcx_svc_limits *l, struct lcx_svc_client *c, double now)
{
    if (now > c->t_ms) {
        c->tokens = fmin(l->burst, c->tokens + (now - c->t_ms) / 1000.0 * l->rate);
        c->t_ms = now;
    }
}

static bool idle_full(const struct lcx_svc_limits *l, struct lcx_svc_client *c, double now)
{
    if (c->conns) return false;
    if (!l->rate) return true;
    refill(l, c, now);
    return c->tokens >= l->burst;
}

static void sweep(struct lcx_svc_limits *l, double now)
{
    for (int s = 0; s < STRIPES; s++) {
        pthread_mutex_lock(&l->mu[s]);
        for (int i = s; i < BUCKETS; i += STRIPES)
            for (struct lcx_svc_client **pp = &l->b[i]; *pp;) {
                struct lcx_svc_client *c = *pp;
                if (idle_full(l, c, now)) {
                    *pp = c->next;
                    free(c);
                    __atomic_sub_fetch(&l->n, 1, __ATOMIC_RELAXED);
                } else {
                    pp = &c->next;
                }
            }
        pthread_mutex_unlock(&l->mu[s]);
    }
}

struct lcx_svc_client *lcx__svc_client_open(struct lcx_svc_limits *l, const struct sockaddr *sa, bool *over)
{
    *over = false;
    if (!l || !sa || (sa->sa_family != AF_INET && sa->sa_family != AF_INET6)) return NULL;
    uint8_t k[16];
    key_of(sa, k);
    uint32_t bi = bucket_of(k);
    double now = lcx__now_ms();
    if (__atomic_load_n(&l->n, __ATOMIC_RELAXED) >= SWEEP_AT) {
        pthread_mutex_lock(&l->mu[0]);
        bool due = now - l->last_sweep_ms >= 1000;
        if (due) l->last_sweep_ms = now;
        pthread_mutex_unlock(&l->mu[0]);
        if (due) sweep(l, now);
    }
    pthread_mutex_t *mu = &l->mu[bi % STRIPES];
    pthread_mutex_lock(mu);
    struct lcx_svc_client *c = l->b[bi];
    while (c && memcmp(c->addr, k, 16)) c = c->next;
    if (!c) {
        if (__atomic_load_n(&l->n, __ATOMIC_RELAXED) >= MAX_CLIENTS || !(c = calloc(1, sizeof *c))) {
            pthread_mutex_unlock(mu);
            __atomic_add_fetch(&l->untracked, 1, __ATOMIC_RELAXED);
            return NULL;
        }
        memcpy(c->addr, k, 16);
        c->tokens = l->burst;
        c->t_ms = now;
        c->next = l->b[bi];
        l->b[bi] = c;
        __atomic_add_fetch(&l->n, 1, __ATOMIC_RELAXED);
    }
    c->conns++;
    if (l->max_conns && c->conns > l->max_conns) *over = true;
    pthread_mutex_unlock(mu);
    if (*over) __atomic_add_fetch(&l->refused_conns, 1, __ATOMIC_RELAXED);
    return c;
}

void lcx__svc_client_close(struct lcx_svc_limits *l, struct lcx_svc_client *c)
{
    if (!l || !c) return;
    pthread_mutex_t *mu = &l->mu[bucket_of(c->addr) % STRIPES];
    pthread_mutex_lock(mu);
    if (c->conns) c->conns--;
    pthread_mutex_unlock(mu);
}

double lcx__svc_client_take(struct lcx_svc_limits *l, struct lcx_svc_client *c)
{
    if (!l || !c || !l->rate) return 0;
    pthread_mutex_t *mu = &l->mu[bucket_of(c->addr) % STRIPES];
    pthread_mutex_lock(mu);
    refill(l, c, lcx__now_ms());
    double wait = 0;
    if (c->tokens >= 1) c->tokens -= 1;
    else wait = (1 - c->tokens) / l->rate;
    pthread_mutex_unlock(mu);
    if (wait > 0) __atomic_add_fetch(&l->refused_rate, 1, __ATOMIC_RELAXED);
    return wait;
}

void lcx__svc_limits_stats(struct lcx_svc_limits *l, lcx_svc_limits_stats *st)
{
    memset(st, 0, sizeof *st);
    if (!l) return;
    st->clients = __atomic_load_n(&l->n, __ATOMIC_RELAXED);
    st->refused_conns = __atomic_load_n(&l->refused_conns, __ATOMIC_RELAXED);
    st->refused_rate = __atomic_load_n(&l->refused_rate, __ATOMIC_RELAXED);
    st->untracked = __atomic_load_n(&l->untracked, __ATOMIC_RELAXED);
    st->max_conns = l->max_conns;
    st->rate = l->rate;
    st->burst = l->burst;
}

void lcx__svc_limited_reply(lcx_resp *resp, bool conns, double wait_s, const lcx_svc_config *cfg)
{
    char msg[256], ra[32];
    if (conns)
        snprintf(msg, sizeof msg, "too many open connections from your address (limit %u, --client-max-connections); "
                                  "close some and retry", lcx__svc_client_max_connections(cfg));
    else
        snprintf(msg, sizeof msg, "rate limit reached: %g requests/s per client address, bursts of %g "
                                  "(--client-rate, --client-burst); retry after the Retry-After delay",
                 cfg->client_rate, cfg->client_burst);
    /* The OpenAI error shape (clients of /v1 back off on 429 + Retry-After), holding the
     * service's own code/message pair too. */
    lcx_buf *b = lcx__resp_json_buf(resp, 429);
    const char *code = conns ? "too_many_connections" : "rate_limit_exceeded";
    lcx__buf_puts(b, "{\"error\":{\"code\":");
    lcx__buf_json_str(b, code, strlen(code));
    lcx__buf_puts(b, ",\"message\":");
    lcx__buf_json_str(b, msg, strlen(msg));
    lcx__buf_puts(b, ",\"type\":\"requests\",\"param\":null}}");
    /* whole seconds (RFC 9110), rounded up, at least 1 */
    double s = ceil(wait_s);
    snprintf(ra, sizeof ra, "%.0f", s < 1 ? 1 : s > 86400 ? 86400 : s);
    lcx__resp_header(resp, "Retry-After", ra);
    if (conns) lcx__resp_header(resp, "Connection", "close");
}
