/* The real service in this process for the HTTP fuzz targets (fuzz_http.c, fuzz_routes.c):
 * lcx__svc_start on 127.0.0.1 with a free port and a private data folder, the proxy pointed
 * at a closed port (so proxy bodies are parsed and rewritten, then answered 502), and one
 * exchange = one fresh client connection: send every byte, half-close, read the reply
 * until the server closes. The connection is one end of an AF_UNIX socketpair handed to
 * the running daemon with MHD_add_connection (as if accepted from 127.0.0.1), so every byte
 * still goes through libmicrohttpd and the service's handlers, without a TCP handshake,
 * teardown and TIME_WAIT per input (most of the kernel time when it was a loopback TCP
 * connection); LCX_FUZZ_TCP=1 connects to the listening port instead. A server that keeps the connection open 10 s after the client's
 * half-close counts as a hang (abort). Every 4096 exchanges the service restarts on an empty
 * folder, so long runs do not fill the disk. Header-only; each target includes it once. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <sys/stat.h>
#include <time.h>
#include <microhttpd.h>
#include "svc/svc.h"

extern char fz_walk_root[4096];   /* walk_guard.c: walks only below the service's folder */
static lcx_svc *fsvc;
static char *fsvc_dir;
static unsigned fsvc_runs;

static char fsvc_proj[4200];       /* a small project inside the folder: what "@P" names */

static void fsvc_put(const char *rel, const char *text) { fz_put(fsvc_proj, rel, text); }

static void fsvc_start(void)
{
    char *t = fz_tmpdir("svc");
    if (!t) abort();
    fsvc_dir = realpath(t, NULL);
    free(t);
    if (!fsvc_dir) abort();
    snprintf(fz_walk_root, sizeof fz_walk_root, "%s", fsvc_dir);
    snprintf(fsvc_proj, sizeof fsvc_proj, "%s/proj", fsvc_dir);
    mkdir(fsvc_proj, 0700);
    char p[4400];
    snprintf(p, sizeof p, "%s/.git", fsvc_proj);
    mkdir(p, 0700);
    snprintf(p, sizeof p, "%s/src", fsvc_proj);
    mkdir(p, 0700);
    fsvc_put("src/vault.c", "/* the vault */\nint open_vault(int code) { return code == 481729; }\n");
    fsvc_put("src/util.py", "def parse_header(line):\n    return line.split(':')\n");
    fsvc_put("README.md", "# proj\nThe vault opens with the access code.\n");
    lcx_svc_config c;
    lcx_svc_config_defaults(&c);
    snprintf(c.data_dir, sizeof c.data_dir, "%s/data", fsvc_dir);
    snprintf(c.host, sizeof c.host, "127.0.0.1");
    snprintf(c.upstream, sizeof c.upstream, "http://127.0.0.1:1");
    c.upstream_timeout_s = 2;
    c.port = 0;
    c.quiet = true;
    /* The warn lines (libmicrohttpd on each malformed request, and on TCP options an
     * AF_UNIX connection has not) cost time for every input and say nothing a crash report
     * would; LCX_FUZZ_DEBUG keeps them on stderr. */
    if (!getenv("LCX_FUZZ_DEBUG")) snprintf(c.log_file, sizeof c.log_file, "/dev/null");
    c.threads = 2;
    c.idle_timeout_s = 5;
    c.body_timeout_s = 5;
    /* Sessions idle 2 s hibernate (the janitor, derived: every 0.5 s), so requests also meet
     * sessions being hibernated and resumed. */
    c.idle_hibernate_s = 2;
    char msg[256];
    if (lcx__svc_start(&c, &fsvc, msg, sizeof msg) < 0) {
        fprintf(stderr, "fuzz: service start: %s\n", msg);
        abort();
    }
}

static void fsvc_stop(void)
{
    if (fsvc) lcx__svc_stop(fsvc);
    fsvc = NULL;
    fz_rmrf(fsvc_dir);
    free(fsvc_dir);
    fsvc_dir = NULL;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc; (void)argv;
    signal(SIGPIPE, SIG_IGN);
    fsvc_start();
    atexit(fz_cleanup);   /* libFuzzer exits through exit(): no temp folders left */
    return 0;
}

void fz_cleanup(void) { fsvc_stop(); }

/* data with every "@P" replaced by the project's path (malloc'd, NUL-terminated). */
static char *fsvc_expand(const void *data, size_t n, size_t *out_len) { return fz_expand(data, n, fsvc_proj, out_len); }

/* One exchange. Returns the status of the first reply (0 when none came) and copies up to
 * cap-1 bytes of the whole reply stream into out (NUL-terminated) when out is given. */
static int fsvc_exchange(const void *req, size_t n, char *out, size_t cap)
{
    if (++fsvc_runs % 4096 == 0) {
        fsvc_stop();
        fsvc_start();
    }
    static int tcp = -1;
    if (tcp < 0) tcp = getenv("LCX_FUZZ_TCP") && *getenv("LCX_FUZZ_TCP") == '1';
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)fsvc->bound_port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int fd;
    if (tcp) {
        fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0) return 0;
        if (connect(fd, (struct sockaddr *)&a, sizeof a) < 0) {
            close(fd);
            return 0;
        }
    } else {
        int sv[2];
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) return 0;
        fd = sv[0];
        /* (the daemon closes sv[1], also when it refuses the connection) */
        a.sin_port = htons((uint16_t)(40000 + fsvc_runs % 20000));   /* a client port, for logs */
        if (MHD_add_connection(fsvc->daemon, sv[1], (const struct sockaddr *)&a, sizeof a) != MHD_YES) {
            close(fd);
            return 0;
        }
    }
    const char *p = req;
    for (size_t off = 0; off < n;) {
        ssize_t w = send(fd, p + off, n - off, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) break;   /* the server may close early (a 4xx before the whole body) */
        off += (size_t)w;
    }
    shutdown(fd, SHUT_WR);
    char buf[8192];
    size_t got = 0;
    char head[16] = "";
    size_t hl = 0;
    for (;;) {
        struct pollfd pf = {.fd = fd, .events = POLLIN};
        int pr = poll(&pf, 1, 10000);
        if (pr == 0) {
            fprintf(stderr, "fuzz: the server kept a half-closed connection open for 10 s (hang)\n");
            abort();
        }
        if (pr < 0) {
            if (errno == EINTR) continue;
            break;
        }
        ssize_t r = recv(fd, buf, sizeof buf, 0);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        if (hl < sizeof head - 1) {
            size_t k = (size_t)r < sizeof head - 1 - hl ? (size_t)r : sizeof head - 1 - hl;
            memcpy(head + hl, buf, k);
            hl += k;
            head[hl] = 0;
        }
        if (out && got < cap - 1) {
            size_t k = (size_t)r < cap - 1 - got ? (size_t)r : cap - 1 - got;
            memcpy(out + got, buf, k);
            got += k;
        }
    }
    if (out) out[got] = 0;
    close(fd);
    /* Until the server has let go of the connection too: each input then starts on an idle
     * server, and libFuzzer's per-input malloc/free count (more mallocs: a leak check, the
     * input run once more and the heap scanned) sees the connection's memory freed. */
    for (int i = 0; __atomic_load_n(&fsvc->n_connections, __ATOMIC_RELAXED) > 0; i++) {
        if (i == 200000) {
            fprintf(stderr, "fuzz: the server held a closed connection for 10 s (hang)\n");
            abort();
        }
        struct timespec ts = {0, 50000};
        nanosleep(&ts, NULL);
    }
    int status = 0;
    if (hl >= 12 && !strncmp(head, "HTTP/1.", 7)) status = atoi(head + 9);
    FZ_LOG("fuzz: reply %d (%.60s)\n", status, out ? out : head);
    return status;
}
