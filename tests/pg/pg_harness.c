#include "pg_harness.h"
#include "testutil.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *script(void)
{
    static char p[4096];
    const char *src = getenv("LCX_SRC");
    snprintf(p, sizeof p, "%s/tests/pg/pgcluster.sh", src ? src : ".");
    return p;
}

bool pgc_available(void)
{
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "'%s' available", script());
    return tu_run(cmd, NULL) == 0;
}

static pgc_cluster *live;   /* for the signal handler: a test killed by SIGTERM/SIGINT still stops it */

static void on_signal(int sig)
{
    if (live && live->dir[0]) pgc_stop(live);
    signal(sig, SIG_DFL);
    raise(sig);
}

bool pgc_start(pgc_cluster *c)
{
    memset(c, 0, sizeof *c);
    for (int tries = 0; tries < 3; tries++) {
        for (int i = 0; i < 3; i++) c->port[i] = tu_free_port();
        char cmd[4400], *out = NULL;
        snprintf(cmd, sizeof cmd, "'%s' start %d %d %d %d 2>&1", script(), (int)getpid(), c->port[0], c->port[1], c->port[2]);
        int st = tu_run(cmd, &out);
        if (st == 0 && out && !strncmp(out, "/tmp/lcxpg.", 11)) {
            size_t n = strcspn(out, "\n");
            snprintf(c->dir, sizeof c->dir, "%.*s", (int)n, out);
            free(out);
            snprintf(c->conninfo, sizeof c->conninfo,
                     "postgresql://127.0.0.1:%d,127.0.0.1:%d,127.0.0.1:%d/postgres?user=lcx&target_session_attrs=read-write",
                     c->port[0], c->port[1], c->port[2]);
            live = c;
            signal(SIGTERM, on_signal);
            signal(SIGINT, on_signal);
            return true;
        }
        fprintf(stderr, "pgcluster start failed (%d): %s\n", st, out ? out : "");
        free(out);
    }
    return false;
}

void pgc_stop(pgc_cluster *c)
{
    if (!c->dir[0]) return;
    char cmd[4400];
    snprintf(cmd, sizeof cmd, "'%s' stop '%s'", script(), c->dir);
    tu_run(cmd, NULL);
    c->dir[0] = 0;
    if (live == c) live = NULL;
}

int pgc_node(pgc_cluster *c, const char *node, const char *action)
{
    char cmd[4400];
    snprintf(cmd, sizeof cmd, "'%s' node '%s' %s %s 2>&1", script(), c->dir, node, action);
    return tu_run(cmd, NULL);
}

int pgc_follow(pgc_cluster *c, const char *node, int port)
{
    char cmd[4400];
    snprintf(cmd, sizeof cmd, "'%s' follow '%s' %s %d 2>&1", script(), c->dir, node, port);
    return tu_run(cmd, NULL);
}
