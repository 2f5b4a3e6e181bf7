#include "testutil.h"
#include <arpa/inet.h>
#include <curl/curl.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static char *slot(void)
{
    static char bufs[8][4096];
    static int i;
    return bufs[i++ & 7];
}

const char *tu_fixture(const char *rel)
{
    const char *root = getenv("LCX_FIXTURES");
    char *p = slot();
    snprintf(p, 4096, "%s/%s", root ? root : "../shared/fixtures", rel);
    if (access(p, R_OK) != 0) {
        fprintf(stderr, "fixture missing: %s\n", p);
        skip();
    }
    return p;
}

const char *tu_bin(const char *name)
{
    const char *root = getenv("LCX_BIN");
    char *p = slot();
    snprintf(p, 4096, "%s/%s", root ? root : "bin", name);
    return p;
}

char *tu_tmpdir(void)
{
    const char *t = getenv("TMPDIR");
    char tmpl[4096];
    snprintf(tmpl, sizeof tmpl, "%s/lcxtest.XXXXXX", t && *t ? t : "/tmp");
    char *d = mkdtemp(tmpl);
    assert_non_null(d);
    return strdup(d);
}

void tu_rmrf(const char *path)
{
    if (!path || !*path || !strcmp(path, "/")) return;
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", path);
    if (system(cmd) != 0) fprintf(stderr, "warning: could not remove %s\n", path);
}

int tu_write(const char *path, const char *data, size_t len)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    for (char *s = dir + 1; *s; s++)
        if (*s == '/') { *s = 0; mkdir(dir, 0755); *s = '/'; }
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    size_t w = fwrite(data, 1, len, f);
    return fclose(f) == 0 && w == len ? 0 : -1;
}

int tu_free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t l = sizeof a;
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) < 0 ||
        getsockname(fd, (struct sockaddr *)&a, &l) < 0) {
        if (fd >= 0) close(fd);
        return -1;
    }
    close(fd);
    return ntohs(a.sin_port);
}

pid_t tu_spawn(char *const argv[], char *const env_extra[], const char *log_path)
{
    pid_t pid = fork();
    if (pid != 0) return pid;
    if (log_path) {
        int fd = open(log_path, O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (fd >= 0) { dup2(fd, 1); dup2(fd, 2); close(fd); }
    }
    for (int i = 0; env_extra && env_extra[i]; i++) putenv(env_extra[i]);
    execv(argv[0], argv);
    fprintf(stderr, "exec %s: %s\n", argv[0], strerror(errno));
    _exit(127);
}

int tu_kill_wait(pid_t pid, int sig, int timeout_ms)
{
    if (pid <= 0) return -1;
    kill(pid, sig);
    for (int waited = 0; waited <= timeout_ms; waited += 10) {
        int st;
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid) return st;
        if (r < 0) return -1;
        usleep(10000);
    }
    kill(pid, SIGKILL);
    int st;
    return waitpid(pid, &st, 0) == pid ? st : -1;
}

int tu_wait_http(int port, const char *path, int timeout_ms)
{
    char url[256];
    snprintf(url, sizeof url, "http://127.0.0.1:%d%s", port, path);
    for (int waited = 0; waited <= timeout_ms; waited += 20) {
        tu_resp r;
        tu_http("GET", url, NULL, 0, NULL, &r);
        long st = r.status;
        tu_resp_free(&r);
        if (st == 200) return 1;
        usleep(20000);
    }
    return 0;
}

typedef struct { char *p; size_t n; } acc;

static size_t on_data(char *d, size_t sz, size_t nm, void *ud)
{
    acc *a = ud;
    size_t n = sz * nm;
    char *p = realloc(a->p, a->n + n + 1);
    if (!p) return 0;
    memcpy(p + a->n, d, n);
    a->n += n;
    p[a->n] = 0;
    a->p = p;
    return n;
}

int tu_http(const char *method, const char *url, const char *body, size_t body_len,
            const char *const *headers, tu_resp *r)
{
    memset(r, 0, sizeof *r);
    CURL *c = curl_easy_init();
    if (!c) return -1;
    acc b = {0}, h = {0};
    struct curl_slist *hl = NULL;
    for (int i = 0; headers && headers[i]; i++) hl = curl_slist_append(hl, headers[i]);
    hl = curl_slist_append(hl, "Expect:");
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hl);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_data);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, &h);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 60000L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    if (body) {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body_len);
    } else if (!strcmp(method, "POST")) {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, "");
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)0);
    }
    CURLcode rc = curl_easy_perform(c);
    if (rc == CURLE_OK) {
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r->status);
        curl_easy_getinfo(c, CURLINFO_TOTAL_TIME, &r->total_ms);
        r->total_ms *= 1000;
    }
    curl_slist_free_all(hl);
    curl_easy_cleanup(c);
    r->body = b.p ? b.p : strdup("");
    r->body_len = b.n;
    r->headers = h.p ? h.p : strdup("");
    return rc == CURLE_OK ? 0 : -1;
}

int tu_resp_header(const tu_resp *r, const char *name, char *out, size_t out_len)
{
    size_t nl = strlen(name);
    for (const char *l = r->headers; l && *l;) {
        const char *e = strchr(l, '\n');
        size_t len = e ? (size_t)(e - l) : strlen(l);
        if (len > nl && !strncasecmp(l, name, nl) && l[nl] == ':') {
            const char *v = l + nl + 1;
            while (*v == ' ') v++;
            size_t vl = (size_t)(l + len - v);
            while (vl && (v[vl - 1] == '\r' || v[vl - 1] == ' ')) vl--;
            snprintf(out, out_len, "%.*s", (int)vl, v);
            return 0;
        }
        l = e ? e + 1 : NULL;
    }
    return -1;
}

void tu_resp_free(tu_resp *r)
{
    free(r->body);
    free(r->headers);
    r->body = r->headers = NULL;
}

int tu_run(const char *cmd, char **out)
{
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    acc a = {0};
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, p)) > 0) on_data(buf, 1, n, &a);
    int st = pclose(p);
    if (out) *out = a.p ? a.p : strdup("");
    else free(a.p);
    return st == -1 ? -1 : WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

int tu_proc_sockets(pid_t pid)
{
    char p[64], l[128];
    snprintf(p, sizeof p, "/proc/%d/fd", (int)pid);
    DIR *d = opendir(p);
    if (!d) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        char f[320];
        snprintf(f, sizeof f, "%s/%s", p, e->d_name);
        ssize_t k = readlink(f, l, sizeof l - 1);
        if (k > 0) { l[k] = 0; n += !strncmp(l, "socket:", 7); }
    }
    closedir(d);
    return n;
}

int tu_svc_start(tu_svc *s)
{
    memset(s, 0, sizeof *s);
    s->data_dir = tu_tmpdir();
    s->port = tu_free_port();
    char port[16], log[4200];
    snprintf(port, sizeof port, "%d", s->port);
    snprintf(log, sizeof log, "%s.log", s->data_dir);
    char *argv[] = {(char *)tu_bin("longctx-svc"), "serve", "--host", "127.0.0.1", "--port", port,
                    "--data-dir", s->data_dir, "--threads", "2", "--quiet", NULL};
    s->pid = tu_spawn(argv, NULL, log);
    if (s->pid > 0 && tu_wait_http(s->port, "/healthz", 20000)) return 0;
    char cmd[4300], *out = NULL;
    snprintf(cmd, sizeof cmd, "cat '%s'", log);
    tu_run(cmd, &out);
    fprintf(stderr, "longctx-svc did not start:\n%s\n", out ? out : "");
    free(out);
    return -1;
}

void tu_svc_stop(tu_svc *s)
{
    if (s->pid > 0) tu_kill_wait(s->pid, SIGTERM, 20000);
    s->pid = 0;
    if (!s->data_dir) return;
    char log[4200];
    snprintf(log, sizeof log, "%s.log", s->data_dir);
    unlink(log);
    tu_rmrf(s->data_dir);
    free(s->data_dir);
    s->data_dir = NULL;
}
