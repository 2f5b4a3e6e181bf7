/* A tiny loopback HTTP/1.1 server for rescue-client tests: records each request body and
 * answers with a canned response (or hangs, to simulate a stuck service). Tests only. */
#ifndef TRIATT_MINIHTTP_H
#define TRIATT_MINIHTTP_H
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

typedef struct {
    int fd, port;
    pthread_t th;
    pthread_mutex_t mu;
    char *paths[64], *bodies[64];
    int n;
    const char *reply;      /* JSON body answered to every request */
    int hang;               /* 1: read the request and never answer */
    volatile int stop;
} minihttp;

static void *mh_main(void *arg)
{
    minihttp *m = arg;
    while (!m->stop) {
        int c = accept(m->fd, NULL, NULL);
        if (c < 0) break;
        char *buf = malloc(1 << 22);
        size_t len = 0;
        long clen = -1;
        char *hdr_end = NULL;
        for (;;) {
            ssize_t k = read(c, buf + len, (1 << 22) - 1 - len);
            if (k <= 0) break;
            len += k;
            buf[len] = 0;
            if (!hdr_end && (hdr_end = strstr(buf, "\r\n\r\n"))) {
                char *cl = strcasestr(buf, "Content-Length:");
                clen = cl ? atol(cl + 15) : 0;
            }
            if (hdr_end && (long)(len - (hdr_end + 4 - buf)) >= clen) break;
        }
        if (hdr_end) {
            char path[256] = {0};
            sscanf(buf, "%*s %255s", path);
            pthread_mutex_lock(&m->mu);
            if (m->n < 64) {
                m->paths[m->n] = strdup(path);
                m->bodies[m->n] = strdup(hdr_end + 4);
                m->n++;
            }
            pthread_mutex_unlock(&m->mu);
        }
        free(buf);
        if (m->hang) {
            while (!m->stop) usleep(10000);
            close(c);
            continue;
        }
        char resp[8192];
        const char *body = m->reply ? m->reply : "{\"accepted\":1,\"session_total\":1}";
        int rl = snprintf(resp, sizeof resp, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n%s",
                          strlen(body), body);
        if (write(c, resp, rl) < 0) {}
        close(c);
    }
    return NULL;
}

static int mh_start(minihttp *m)
{
    memset(m, 0, sizeof *m);
    pthread_mutex_init(&m->mu, NULL);
    m->fd = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(m->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (bind(m->fd, (struct sockaddr *)&a, sizeof a) || listen(m->fd, 16)) return -1;
    socklen_t al = sizeof a;
    getsockname(m->fd, (struct sockaddr *)&a, &al);
    m->port = ntohs(a.sin_port);
    return pthread_create(&m->th, NULL, mh_main, m);
}

static void mh_stop(minihttp *m)
{
    m->stop = 1;
    shutdown(m->fd, SHUT_RDWR);
    close(m->fd);
    pthread_join(m->th, NULL);
    for (int i = 0; i < m->n; i++) { free(m->paths[i]); free(m->bodies[i]); }
    pthread_mutex_destroy(&m->mu);
}
#endif
