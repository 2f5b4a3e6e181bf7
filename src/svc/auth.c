/* longctx-svc: --auth-token (docs/SECURITY.md).
 *
 * One shared bearer token guards every route except /healthz (liveness probes carry no
 * secrets and reveal only the version) and GET of the dashboard's static page and script
 * (/ui, /ui/app.js: no data; what they show is fetched from guarded routes). The token is compared in constant time so the
 * reply latency says nothing about how many leading bytes were right. A 401 answers in
 * the OpenAI error shape ({"error":{"message","type","param","code"}}, which also holds
 * the service's own code/message pair), because OpenAI clients are what most callers
 * of the /v1 routes are and they surface error.message to the user. */
#include "svc/svc.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

bool lcx__svc_ct_equal(const char *a, size_t al, const char *b, size_t bl)
{
    /* Walks the expected string (b) whole whatever a holds; the length difference is
     * folded into the accumulator instead of returning early. */
    volatile unsigned char acc = (unsigned char)(al != bl);
    for (size_t i = 0; i < bl; i++) {
        unsigned char x = i < al ? (unsigned char)a[i] : 0;
        acc |= (unsigned char)(x ^ (unsigned char)b[i]);
    }
    return acc == 0;
}

bool lcx__svc_host_is_loopback(const char *host)
{
    if (!host || !*host) return false;
    struct addrinfo hints = {0}, *res = NULL;
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE;
    if (getaddrinfo(host, "0", &hints, &res) || !res) return false;
    bool all = true;
    for (struct addrinfo *a = res; a && all; a = a->ai_next) {
        if (a->ai_family == AF_INET) {
            uint32_t v = ntohl(((struct sockaddr_in *)a->ai_addr)->sin_addr.s_addr);
            all = (v >> 24) == 127;
        } else if (a->ai_family == AF_INET6) {
            const struct in6_addr *v6 = &((struct sockaddr_in6 *)a->ai_addr)->sin6_addr;
            all = IN6_IS_ADDR_LOOPBACK(v6) ||
                  (IN6_IS_ADDR_V4MAPPED(v6) && v6->s6_addr[12] == 127);
        } else {
            all = false;
        }
    }
    freeaddrinfo(res);
    return all;
}

int lcx__svc_auth_config_check(const lcx_svc_config *c, char *msg, size_t ml)
{
    if (c->auth_token[0] || c->insecure_no_auth || lcx__svc_host_is_loopback(c->host)) return 0;
    snprintf(msg, ml,
             "refusing to listen on non-loopback address '%s' without --auth-token (or LONGCTX_AUTH_TOKEN); "
             "pass --insecure-no-auth to serve it unauthenticated",
             c->host);
    return LCX_EINVAL;
}

static void unauthorized(lcx_resp *resp, const char *why)
{
    lcx_buf *b = lcx__resp_json_buf(resp, 401);
    lcx__buf_puts(b, "{\"error\":{\"code\":\"invalid_api_key\",\"message\":");
    lcx__buf_json_str(b, why, strlen(why));
    lcx__buf_puts(b, ",\"type\":\"invalid_request_error\",\"param\":null}}");
    lcx__resp_header(resp, "WWW-Authenticate", "Bearer realm=\"longctx\"");
}

bool lcx__svc_auth_ok(lcx_svc *svc, lcx_req *req, lcx_resp *resp)
{
    const char *tok = svc->cfg.auth_token;
    if (!tok[0]) return true;
    const char *path = lcx__req_path(req);
    if (!strcmp(path, "/healthz") || !strcmp(path, "/healthz/")) return true;
    /* the dashboard's page and script: the same static bytes for everyone, no data (ui.c) */
    if (!strcmp(lcx__req_method(req), "GET") && (!strcmp(path, "/ui") || !strcmp(path, "/ui/") || !strcmp(path, "/ui/app.js")))
        return true;
    size_t hl = 0;
    const char *h = lcx__req_header_n(req, "Authorization", &hl);
    if (!h) {
        unauthorized(resp, "missing bearer token: send 'Authorization: Bearer <token>' (--auth-token)");
        return false;
    }
    if (hl < 7 || strncasecmp(h, "Bearer ", 7)) {
        unauthorized(resp, "the Authorization header must be 'Bearer <token>'");
        return false;
    }
    h += 7, hl -= 7;
    while (hl && *h == ' ') h++, hl--;
    while (hl && h[hl - 1] == ' ') hl--;
    if (!lcx__svc_ct_equal(h, hl, tok, strlen(tok))) {
        unauthorized(resp, "incorrect bearer token");
        return false;
    }
    return true;
}
