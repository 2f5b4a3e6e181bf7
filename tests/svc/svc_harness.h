/* Helpers for the longctx-svc integration tests: start the REAL binary on a free
 * loopback port, talk JSON to it, stop/kill it. */
#ifndef LCX_SVC_HARNESS_H
#define LCX_SVC_HARNESS_H

#include "testutil.h"
#include <cjson/cJSON.h>
#include <stdbool.h>
#include <sys/types.h>

typedef struct {
    pid_t pid;
    int port;
    char *data_dir;      /* owned */
    char log[4200];
    char base[64];       /* http://127.0.0.1:PORT */
} sh_server;

/* Starts longctx-svc serve --host 127.0.0.1 --port P --data-dir D [extra...] and waits for
 * /healthz. data_dir NULL → a fresh temp dir (removed by sh_stop when remove is true).
 * Returns 0 on success (asserts otherwise). */
int sh_start(sh_server *s, const char *data_dir, const char *const *extra, const char *const *env);
/* Same, but returns false instead of asserting when the server does not come up. */
bool sh_try_start(sh_server *s, const char *data_dir, const char *const *extra, const char *const *env, int timeout_ms);
/* SIGTERM (or sig) and wait; returns the wait status. */
int sh_stop(sh_server *s, int sig);
void sh_cleanup(sh_server *s);   /* removes data dir, frees */

/* method + path (appended to base), JSON/text body; returns the status; *json (may be NULL)
 * receives the parsed body (NULL when not JSON). r (may be NULL) receives the raw response. */
long sh_req(sh_server *s, const char *method, const char *path, const char *body, size_t len,
            cJSON **json, tu_resp *r);
long sh_post(sh_server *s, const char *path, const char *body, cJSON **json);
long sh_get(sh_server *s, const char *path, cJSON **json);
/* Asserts the body is {"error":{"code":code,"message":non-empty string}}. */
void sh_assert_error(const cJSON *j, const char *code);
/* Number of entries in "chunks" of a retrieve/dump-like response (or -1). */
int sh_count(const cJSON *j, const char *key);
/* Every session directory under data_dir/sessions passes lcx_store_validate (asserts);
 * returns how many there are. */
int sh_validate_sessions(const char *data_dir);

#endif
