/* Sidecar spawning (Mode B): fork/exec longctx-svc on a free loopback port and poll
 * GET /healthz until it answers, with a raw socket so engines need no HTTP library. */
#define _GNU_SOURCE
#include "longctx/lcx_sidecar.h"
#include "util/util.h"

#include <arpa/inet.h>
#include <stdbool.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

struct lcx_sidecar {
    pid_t pid;
    int exit_rc;        /* -1 while running; the exit status once lcx_sidecar_alive reaped it */
    int port;
    char url[320];
};

lcx_sidecar_opts lcx_sidecar_defaults(void)
{
    lcx_sidecar_opts o = {0};
    o.host = "127.0.0.1";
    o.timeout_ms = 30000;
    return o;
}

static int resolve(const char *host, int port, struct sockaddr_in *a)
{
    memset(a, 0, sizeof *a);
    a->sin_family = AF_INET;
    a->sin_port = htons((uint16_t)port);
    if (!strcmp(host, "localhost")) host = "127.0.0.1";
    return inet_pton(AF_INET, host, &a->sin_addr) == 1 ? 0 : LCX_EINVAL;
}

/* Binds host:port (port 0 = any) to learn whether it is free / pick one. */
static int probe_port(const char *host, int port, int *out)
{
    struct sockaddr_in a;
    if (resolve(host, port, &a)) return LCX_EINVAL;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return lcx__eio(errno);
    int rc = 0;
    socklen_t l = sizeof a;
    if (bind(fd, (struct sockaddr *)&a, sizeof a) < 0) rc = errno == EADDRINUSE ? LCX_EEXIST : lcx__eio(errno);
    else if (getsockname(fd, (struct sockaddr *)&a, &l) < 0) rc = lcx__eio(errno);
    else *out = ntohs(a.sin_port);
    close(fd);
    return rc;
}

/* One GET /healthz; true on an HTTP 200 status line. */
static bool healthy(const char *host, int port)
{
    struct sockaddr_in a;
    if (resolve(host, port, &a)) return false;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return false;
    struct timeval tv = {.tv_sec = 1};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    bool ok = false;
    if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0) {
        static const char rq[] = "GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n";
        char buf[64] = {0};
        if (write(fd, rq, sizeof rq - 1) == (ssize_t)(sizeof rq - 1)) {
            ssize_t n = 0, r;
            while (n < 12 && (r = read(fd, buf + n, sizeof buf - 1 - (size_t)n)) > 0) n += r;
            ok = n >= 12 && !strncmp(buf, "HTTP/1.", 7) && !strncmp(buf + 9, "200", 3);
        }
    }
    close(fd);
    return ok;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

int lcx_sidecar_spawn(const lcx_sidecar_opts *o, lcx_sidecar **out, char *err, size_t err_len)
{
    *out = NULL;
    lcx_sidecar_opts d = lcx_sidecar_defaults();
    if (!o) o = &d;
    const char *host = o->host ? o->host : "127.0.0.1";
    const char *bin = o->binary ? o->binary : getenv("LONGCTX_SVC");
    if (!bin || !*bin) bin = "longctx-svc";
    int port = 0;
    int rc = probe_port(host, o->port, &port);
    if (rc == LCX_EEXIST) {
        snprintf(err, err_len, "port %d on %s is already in use (another longctx-svc?); pick another port", o->port, host);
        return rc;
    }
    if (rc) {
        snprintf(err, err_len, "cannot bind %s:%d: %s", host, o->port, rc == LCX_EINVAL ? "bad IPv4 address" : strerror(errno));
        return rc;
    }

    char port_s[16], ppid_s[24];
    snprintf(port_s, sizeof port_s, "%d", port);
    snprintf(ppid_s, sizeof ppid_s, "%ld", (long)getpid());
    const char *argv[64];
    int ac = 0;
    argv[ac++] = bin;
    argv[ac++] = "serve";
    argv[ac++] = "--host";
    argv[ac++] = host;
    argv[ac++] = "--port";
    argv[ac++] = port_s;
    argv[ac++] = "--parent-pid";
    argv[ac++] = ppid_s;
    if (o->data_dir) argv[ac++] = "--data-dir", argv[ac++] = o->data_dir;
    if (o->upstream) argv[ac++] = "--upstream", argv[ac++] = o->upstream;
    for (int i = 0; o->extra_args && o->extra_args[i]; i++) {
        if (ac >= 62) {
            snprintf(err, err_len, "too many extra arguments");
            return LCX_EINVAL;
        }
        argv[ac++] = o->extra_args[i];
    }
    argv[ac] = NULL;

    /* exec failure is reported through a CLOEXEC pipe: readable bytes = errno of execvp */
    int pfd[2];
    if (pipe2(pfd, O_CLOEXEC) < 0) {
        int pe = errno;
        snprintf(err, err_len, "pipe: %s", strerror(pe));
        return lcx__eio(pe);
    }
    lcx_sidecar *sc = calloc(1, sizeof *sc);
    if (!sc) {
        close(pfd[0]), close(pfd[1]);
        return LCX_ENOMEM;
    }
    sc->exit_rc = -1;
    pid_t pid = fork();
    if (pid < 0) {
        int fe = errno;
        snprintf(err, err_len, "fork: %s", strerror(fe));
        close(pfd[0]), close(pfd[1]);
        free(sc);
        return lcx__eio(fe);
    }
    if (pid == 0) {
        close(pfd[0]);
        if (o->log_path) {
            int fd = open(o->log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
            if (fd >= 0) dup2(fd, 1), dup2(fd, 2);
        }
        execvp(bin, (char *const *)argv);
        int e = errno;
        if (write(pfd[1], &e, sizeof e) < 0) _exit(127);
        _exit(127);
    }
    close(pfd[1]);
    int e = 0;
    ssize_t got = read(pfd[0], &e, sizeof e);
    close(pfd[0]);
    if (got == (ssize_t)sizeof e) {
        waitpid(pid, NULL, 0);
        snprintf(err, err_len, "cannot execute %s: %s (set LONGCTX_SVC or opts.binary)", bin, strerror(e));
        free(sc);
        return LCX_ENOTFOUND;
    }
    sc->pid = pid;
    sc->port = port;
    snprintf(sc->url, sizeof sc->url, "http://%s:%d", host, port);

    int timeout = o->timeout_ms > 0 ? o->timeout_ms : 30000;
    for (int waited = 0;; waited += 25) {
        int st;
        if (waitpid(pid, &st, WNOHANG) == pid) {
            bool inuse = WIFEXITED(st) && WEXITSTATUS(st) != 0 && probe_port(host, port, &(int){0}) == LCX_EEXIST;
            if (inuse) snprintf(err, err_len, "port %d on %s is already in use", port, host);
            else snprintf(err, err_len, "longctx-svc exited during start-up (status %d); see its log",
                          WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
            free(sc);
            return inuse ? LCX_EEXIST : LCX_EIO;
        }
        if (healthy(host, port)) break;
        if (waited >= timeout) {
            kill(pid, SIGKILL);
            waitpid(pid, NULL, 0);
            snprintf(err, err_len, "longctx-svc did not answer GET /healthz on port %d within %d ms", port, timeout);
            free(sc);
            return LCX_ETIMEOUT;
        }
        sleep_ms(25);
    }
    *out = sc;
    return 0;
}

int lcx_sidecar_port(const lcx_sidecar *sc) { return sc ? sc->port : -1; }
pid_t lcx_sidecar_pid(const lcx_sidecar *sc) { return sc ? sc->pid : -1; }
const char *lcx_sidecar_url(const lcx_sidecar *sc) { return sc ? sc->url : ""; }

static int exit_status(int st) { return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st); }

bool lcx_sidecar_alive(lcx_sidecar *sc)
{
    if (!sc || sc->exit_rc >= 0) return false;
    int st = 0;
    if (waitpid(sc->pid, &st, WNOHANG) != sc->pid) return true;
    sc->exit_rc = exit_status(st);   /* reaped: stop must not signal a reused pid */
    return false;
}

int lcx_sidecar_stop(lcx_sidecar *sc, int timeout_ms)
{
    if (!sc) return 0;
    if (sc->exit_rc >= 0) {
        int rc = sc->exit_rc;
        free(sc);
        return rc;
    }
    int st = 0, rc = LCX_EIO;
    kill(sc->pid, SIGTERM);
    for (int waited = 0; waited <= timeout_ms; waited += 10) {
        pid_t r = waitpid(sc->pid, &st, WNOHANG);
        if (r == sc->pid) {
            rc = exit_status(st);
            break;
        }
        if (r < 0) break;
        sleep_ms(10);
    }
    if (rc == LCX_EIO && kill(sc->pid, SIGKILL) == 0 && waitpid(sc->pid, &st, 0) == sc->pid)
        rc = 128 + SIGKILL;
    free(sc);
    return rc;
}
