#define _GNU_SOURCE
#include "fake_upstream.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

struct fake_upstream {
    int lfd, port;
    pthread_t acceptor;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool stopping, released, stream_released, peer_gone;
    int n_requests;
    char *head, *body;
};

typedef struct {
    fake_upstream *f;
    int fd;
} conn_arg;

static bool send_all(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return false;
        p += w;
        n -= (size_t)w;
    }
    return true;
}

static bool send_str(int fd, const char *s) { return send_all(fd, s, strlen(s)); }

static bool send_chunk(int fd, const char *s)
{
    char hdr[32];
    snprintf(hdr, sizeof hdr, "%zx\r\n", strlen(s));
    return send_str(fd, hdr) && send_str(fd, s) && send_str(fd, "\r\n");
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void *serve_conn(void *ud)
{
    conn_arg *a = ud;
    fake_upstream *f = a->f;
    int fd = a->fd;
    free(a);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    /* read the head */
    size_t cap = 1 << 20, n = 0;
    char *buf = malloc(cap + 1);
    char *eoh = NULL;
    while (!eoh && n < cap) {
        ssize_t r = recv(fd, buf + n, cap - n, 0);
        if (r <= 0) goto done;
        n += (size_t)r;
        buf[n] = 0;
        eoh = strstr(buf, "\r\n\r\n");
    }
    if (!eoh) goto done;
    size_t head_len = (size_t)(eoh - buf) + 4, clen = 0;
    const char *cl = strcasestr(buf, "\r\ncontent-length:");
    if (cl && cl < eoh) clen = strtoul(cl + 17, NULL, 10);
    while (n < head_len + clen && n < cap) {
        ssize_t r = recv(fd, buf + n, cap - n, 0);
        if (r <= 0) break;
        n += (size_t)r;
    }
    buf[n] = 0;
    pthread_mutex_lock(&f->mu);
    free(f->head);
    free(f->body);
    f->head = strndup(buf, head_len);
    f->body = strdup(buf + head_len);
    f->n_requests++;
    pthread_mutex_unlock(&f->mu);

    const char *body = buf + head_len;
    char mode[32] = "plain";
    const char *m = strstr(body, "\"model\":\"");
    if (m) sscanf(m + 9, "%31[^\"]", mode);
    if (!strncmp(buf, "GET /v1/models", 14)) {
        const char *js = "{\"object\":\"list\",\"data\":[{\"id\":\"fake-model\",\"object\":\"model\",\"created\":0,"
                         "\"owned_by\":\"test\"}]}";
        char h[256];
        snprintf(h, sizeof h, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
                              "Connection: close\r\n\r\n", strlen(js));
        send_str(fd, h);
        send_str(fd, js);
    } else if (!strcmp(mode, "stream")) {
        send_str(fd, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n"
                     "Connection: close\r\n\r\n");
        send_chunk(fd, "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":0,\"model\":\"stream\","
                       "\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"Hel\"},"
                       "\"finish_reason\":null}]}\n\n");
        struct timespec dl;
        clock_gettime(CLOCK_REALTIME, &dl);
        dl.tv_sec += 10;
        pthread_mutex_lock(&f->mu);
        while (!f->released && !f->stopping)
            if (pthread_cond_timedwait(&f->cv, &f->mu, &dl) == ETIMEDOUT) break;
        f->stream_released = f->released;
        f->released = false;
        pthread_mutex_unlock(&f->mu);
        send_chunk(fd, "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":0,\"model\":\"stream\","
                       "\"choices\":[{\"index\":0,\"delta\":{\"content\":\"lo\"},\"finish_reason\":\"stop\"}]}\n\n");
        send_chunk(fd, "data: [DONE]\n\n");
        send_str(fd, "0\r\n\r\n");
    } else if (!strcmp(mode, "sse")) {
        /* an immediate short stream (benchmarks: time to first byte) */
        send_str(fd, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n"
                     "Connection: close\r\n\r\n");
        send_chunk(fd, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"x\"}}]}\n\n");
        send_chunk(fd, "data: [DONE]\n\n");
        send_str(fd, "0\r\n\r\n");
    } else if (!strcmp(mode, "endless")) {
        send_str(fd, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n"
                     "Connection: close\r\n\r\n");
        for (int i = 0; i < 600; i++) { /* ≤ 30 s */
            if (!send_chunk(fd, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"x\"}}]}\n\n")) {
                pthread_mutex_lock(&f->mu);
                f->peer_gone = true;
                pthread_cond_broadcast(&f->cv);
                pthread_mutex_unlock(&f->mu);
                break;
            }
            sleep_ms(50);
        }
    } else if (!strcmp(mode, "hang")) {
        for (int i = 0; i < 300; i++) { /* ≤ 30 s, until the proxy gives up */
            char c;
            ssize_t r = recv(fd, &c, 1, MSG_DONTWAIT);
            if (r == 0) break;
            sleep_ms(100);
        }
    } else if (!strcmp(mode, "error400")) {
        const char *js = "{\"error\":{\"message\":\"bad model\",\"type\":\"invalid_request_error\",\"code\":null}}";
        char h[256];
        snprintf(h, sizeof h, "HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
                              "Connection: close\r\n\r\n", strlen(js));
        send_str(fd, h);
        send_str(fd, js);
    } else {
        const char *js = "{\"id\":\"chatcmpl-1\",\"object\":\"chat.completion\",\"created\":0,\"model\":\"plain\","
                         "\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":\"Hello\"},"
                         "\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":1,"
                         "\"total_tokens\":2}}";
        char h[256];
        snprintf(h, sizeof h, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
                              "Connection: close\r\n\r\n", strlen(js));
        send_str(fd, h);
        send_str(fd, js);
    }
done:
    free(buf);
    close(fd);
    return NULL;
}

static void *acceptor(void *ud)
{
    fake_upstream *f = ud;
    for (;;) {
        int fd = accept(f->lfd, NULL, NULL);
        pthread_mutex_lock(&f->mu);
        bool stop = f->stopping;
        pthread_mutex_unlock(&f->mu);
        if (stop) {
            if (fd >= 0) close(fd);
            break;
        }
        if (fd < 0) {
            if (errno == EINTR) continue;
            break;
        }
        conn_arg *a = malloc(sizeof *a);
        a->f = f;
        a->fd = fd;
        pthread_t t;
        if (pthread_create(&t, NULL, serve_conn, a) == 0) pthread_detach(t);
        else close(fd), free(a);
    }
    return NULL;
}

fake_upstream *fu_start(void)
{
    fake_upstream *f = calloc(1, sizeof *f);
    pthread_mutex_init(&f->mu, NULL);
    pthread_cond_init(&f->cv, NULL);
    f->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    setsockopt(f->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t l = sizeof a;
    if (bind(f->lfd, (struct sockaddr *)&a, sizeof a) < 0 || listen(f->lfd, 64) < 0 ||
        getsockname(f->lfd, (struct sockaddr *)&a, &l) < 0) {
        close(f->lfd);
        free(f);
        return NULL;
    }
    f->port = ntohs(a.sin_port);
    pthread_create(&f->acceptor, NULL, acceptor, f);
    return f;
}

int fu_port(const fake_upstream *f) { return f->port; }

void fu_stop(fake_upstream *f)
{
    if (!f) return;
    pthread_mutex_lock(&f->mu);
    f->stopping = true;
    pthread_cond_broadcast(&f->cv);
    pthread_mutex_unlock(&f->mu);
    /* wake accept() with a connection of our own */
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)f->port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0) close(fd);
    else close(fd);
    pthread_join(f->acceptor, NULL);
    close(f->lfd);
    sleep_ms(100); /* let detached connection threads see `stopping` */
    free(f->head);
    free(f->body);
    /* mutex/cond intentionally not destroyed: a detached connection thread may still be
     * finishing its send; the test process exits right after. */
    free(f);
}

void fu_release(fake_upstream *f)
{
    pthread_mutex_lock(&f->mu);
    f->released = true;
    pthread_cond_broadcast(&f->cv);
    pthread_mutex_unlock(&f->mu);
}

char *fu_last_head(fake_upstream *f)
{
    pthread_mutex_lock(&f->mu);
    char *s = strdup(f->head ? f->head : "");
    pthread_mutex_unlock(&f->mu);
    return s;
}

char *fu_last_body(fake_upstream *f)
{
    pthread_mutex_lock(&f->mu);
    char *s = strdup(f->body ? f->body : "");
    pthread_mutex_unlock(&f->mu);
    return s;
}

int fu_requests(fake_upstream *f)
{
    pthread_mutex_lock(&f->mu);
    int n = f->n_requests;
    pthread_mutex_unlock(&f->mu);
    return n;
}

bool fu_stream_released(fake_upstream *f)
{
    pthread_mutex_lock(&f->mu);
    bool r = f->stream_released;
    pthread_mutex_unlock(&f->mu);
    return r;
}

bool fu_wait_peer_gone(fake_upstream *f, int timeout_ms)
{
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += timeout_ms / 1000;
    dl.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (dl.tv_nsec >= 1000000000L) dl.tv_sec++, dl.tv_nsec -= 1000000000L;
    pthread_mutex_lock(&f->mu);
    while (!f->peer_gone)
        if (pthread_cond_timedwait(&f->cv, &f->mu, &dl) == ETIMEDOUT) break;
    bool g = f->peer_gone;
    pthread_mutex_unlock(&f->mu);
    return g;
}
