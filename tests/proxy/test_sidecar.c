/* Mode B: lcx_sidecar_spawn starts the real longctx-svc on a free port and waits for
 * /healthz; a busy port and a missing binary are reported clearly; --parent-pid makes the
 * service exit when the engine process that spawned it dies. */
#define _GNU_SOURCE
#include "testutil.h"
#include "longctx/lcx_sidecar.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

/* true while pid exists and is not a zombie */
static bool alive(pid_t pid)
{
    char p[64], buf[512];
    snprintf(p, sizeof p, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(p, "r");
    if (!f) return false;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    const char *rp = strrchr(buf, ')');
    return rp && rp[1] == ' ' && rp[2] != 'Z' && rp[2] != 'X';
}

static void test_spawn_health_stop(void **st)
{
    char *d = tu_tmpdir(), data[4200], log[4200];
    snprintf(data, sizeof data, "%s/data", d);
    snprintf(log, sizeof log, "%s/svc.log", d);
    lcx_sidecar_opts o = lcx_sidecar_defaults();
    o.binary = tu_bin("longctx-svc");
    o.data_dir = data;
    o.log_path = log;
    lcx_sidecar *sc;
    char err[256] = "";
    assert_int_equal(lcx_sidecar_spawn(&o, &sc, err, sizeof err), 0);
    int port = lcx_sidecar_port(sc);
    assert_true(port > 0);
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d", port);
    assert_string_equal(lcx_sidecar_url(sc), url);
    strcat(url, "/healthz");
    tu_resp r;
    assert_int_equal(tu_http("GET", url, NULL, 0, NULL, &r), 0);
    assert_int_equal(r.status, 200);
    tu_resp_free(&r);

    /* the same port again: refused with a clear message, nothing left running */
    lcx_sidecar *sc2 = NULL;
    o.port = port;
    assert_int_equal(lcx_sidecar_spawn(&o, &sc2, err, sizeof err), LCX_EEXIST);
    assert_null(sc2);
    assert_non_null(strstr(err, "already in use"));

    pid_t pid = lcx_sidecar_pid(sc);
    assert_true(lcx_sidecar_alive(sc));
    assert_int_equal(lcx_sidecar_stop(sc, 10000), 0);  /* clean exit on SIGTERM */
    assert_false(alive(pid));

    /* a sidecar that dies: lcx_sidecar_alive turns false (reaping it), stop reports how */
    o.port = 0;
    assert_int_equal(lcx_sidecar_spawn(&o, &sc, err, sizeof err), 0);
    assert_int_equal(kill(lcx_sidecar_pid(sc), SIGKILL), 0);
    bool up = true;
    for (int i = 0; i < 500 && (up = lcx_sidecar_alive(sc)); i++) usleep(10000);
    assert_false(up);
    assert_false(lcx_sidecar_alive(sc));
    assert_int_equal(lcx_sidecar_stop(sc, 1000), 128 + SIGKILL);

    /* a binary that does not exist */
    o.port = 0;
    o.binary = "/nonexistent/longctx-svc";
    assert_int_equal(lcx_sidecar_spawn(&o, &sc2, err, sizeof err), LCX_ENOTFOUND);
    assert_non_null(strstr(err, "cannot execute"));
    tu_rmrf(d);
    free(d);
}

static void test_parent_death(void **st)
{
    char *d = tu_tmpdir(), data[4200];
    snprintf(data, sizeof data, "%s/data", d);
    int pfd[2];
    assert_int_equal(pipe(pfd), 0);
    pid_t engine = fork();
    if (engine == 0) {
        /* the "engine": spawns the sidecar, reports its pid, then waits to be killed */
        lcx_sidecar_opts o = lcx_sidecar_defaults();
        o.binary = tu_bin("longctx-svc");
        o.data_dir = data;
        o.extra_args = (const char *const[]){"--quiet", NULL};
        lcx_sidecar *sc;
        char err[256];
        pid_t sp = lcx_sidecar_spawn(&o, &sc, err, sizeof err) == 0 ? lcx_sidecar_pid(sc) : -1;
        if (write(pfd[1], &sp, sizeof sp) != sizeof sp) _exit(1);
        pause();
        _exit(0);
    }
    pid_t svc = -1;
    assert_int_equal(read(pfd[0], &svc, sizeof svc), (ssize_t)sizeof svc);
    assert_true(svc > 0);
    assert_true(alive(svc));
    kill(engine, SIGKILL);
    waitpid(engine, NULL, 0);
    bool gone = false;
    for (int i = 0; i < 200 && !gone; i++) { /* up to 10 s; it polls every 250 ms */
        gone = !alive(svc);
        if (!gone) usleep(50000);
    }
    if (!gone) kill(svc, SIGKILL);
    assert_true(gone);
    close(pfd[0]);
    close(pfd[1]);
    tu_rmrf(d);
    free(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_spawn_health_stop),
        cmocka_unit_test(test_parent_death),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
