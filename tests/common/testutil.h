/* Test helpers shared by every test: fixtures, temp dirs, free ports, starting the real
 * binaries, and HTTP over loopback. Tests only; failures here fail the calling test. */
#ifndef LCX_TESTUTIL_H
#define LCX_TESTUTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <cmocka.h>

/* Absolute path of a fixture under ../shared/fixtures (LCX_FIXTURES); static buffer per
 * call slot (8 rotating slots). Skips the test (cmocka skip) when the file is missing. */
const char *tu_fixture(const char *rel);
/* Path of a built binary (LCX_BIN/name); rotating static buffers as above. */
const char *tu_bin(const char *name);
/* Fresh private directory under $TMPDIR (removed with rm -rf by tu_rmrf). malloc'd. */
char *tu_tmpdir(void);
void tu_rmrf(const char *path);
/* Writes a file, creating parent directories. Returns 0 on success. */
int tu_write(const char *path, const char *data, size_t len);
/* A TCP port on 127.0.0.1 that was free a moment ago. */
int tu_free_port(void);

/* Starts argv[0] with argv (NULL-terminated) and extra "K=V" environment entries
 * (NULL-terminated, may be NULL); stdout/stderr go to log_path when given. */
pid_t tu_spawn(char *const argv[], char *const env_extra[], const char *log_path);
/* Sends sig and waits up to timeout_ms; returns the wait status or -1. */
int tu_kill_wait(pid_t pid, int sig, int timeout_ms);
/* A longctx-svc started for a test: the built binary, `serve --host 127.0.0.1` on a free
 * port, a fresh data dir, --threads 2 --quiet, stderr/stdout into data_dir.log. */
typedef struct {
    pid_t pid;
    int port;
    char *data_dir;   /* owned */
} tu_svc;
/* Starts it and waits for /healthz (20 s); on failure prints the server's log and returns
 * -1 (the caller's setup then fails). */
int tu_svc_start(tu_svc *s);
/* SIGTERM and wait, then removes the log and the data dir. */
void tu_svc_stop(tu_svc *s);

/* Sockets process pid holds open now (its /proc/pid/fd entries that are sockets, the
 * listening socket included); -1 when /proc/pid/fd cannot be read. Shared by the hostile
 * HTTP test and bench (connection leak checks). */
int tu_proc_sockets(pid_t pid);
/* Polls http://127.0.0.1:port/path until it answers 200 (true) or timeout_ms passes. */
int tu_wait_http(int port, const char *path, int timeout_ms);

typedef struct {
    long status;        /* HTTP status, 0 when the request failed */
    char *body;         /* NUL-terminated, malloc'd */
    size_t body_len;
    char *headers;      /* raw response header block, NUL-terminated, malloc'd */
    double total_ms;
} tu_resp;
/* One HTTP request. headers: NULL-terminated "Name: value" list or NULL. body may be NULL. */
int tu_http(const char *method, const char *url, const char *body, size_t body_len,
            const char *const *headers, tu_resp *r);
/* Value of response header `name` (case-insensitive) into out; returns 0 when present. */
int tu_resp_header(const tu_resp *r, const char *name, char *out, size_t out_len);
void tu_resp_free(tu_resp *r);

/* Runs a shell command, captures stdout (malloc'd, NUL-terminated) and returns the exit
 * status (or -1). */
int tu_run(const char *cmd, char **out);

#endif
