/* longctx sidecar (SPEC §1 Mode B): how an inference engine starts longctx-svc beside
 * itself (`--enable-longctx`) and waits until it answers.
 *
 *   lcx_sidecar_opts o = lcx_sidecar_defaults();          // free port, 30 s health wait
 *   lcx_sidecar *sc;  char err[256];
 *   if (lcx_sidecar_spawn(&o, &sc, err, sizeof err) < 0) {
 *       fprintf(stderr, "longctx: %s\n", err);            // e.g. "port 5054 on 127.0.0.1 is already in use"
 *   } else {
 *       setenv("LONGCTX_ENDPOINT", lcx_sidecar_url(sc), 1);   // the rescue bridge's endpoint
 *       ...
 *       lcx_sidecar_stop(sc, 5000);                        // SIGTERM, then SIGKILL after 5 s
 *   }
 *
 * The service is started with --parent-pid <this process>, so it also exits by itself if
 * the engine dies without calling lcx_sidecar_stop. Needs only libc (library lcx_sidecar). */
#ifndef LONGCTX_LCX_SIDECAR_H
#define LONGCTX_LCX_SIDECAR_H

#include <stdbool.h>
#include <sys/types.h>
#include "longctx/lcx_err.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    const char *binary;            /* longctx-svc path; NULL: $LONGCTX_SVC, else "longctx-svc" on PATH */
    const char *host;              /* listen address (default "127.0.0.1") */
    int port;                      /* 0: pick a free port */
    const char *data_dir;          /* NULL: the service's default data dir */
    const char *upstream;          /* NULL: proxy disabled */
    const char *const *extra_args; /* more flags for `serve`, NULL-terminated (may be NULL) */
    int timeout_ms;                /* wait for GET /healthz (default 30000) */
    const char *log_path;          /* the service's stdout+stderr (NULL: inherited) */
} lcx_sidecar_opts;

typedef struct lcx_sidecar lcx_sidecar;

lcx_sidecar_opts lcx_sidecar_defaults(void);
/* Starts the service and waits until /healthz answers 200. Errors (err gets a sentence):
 * LCX_EEXIST the port is already in use; LCX_ENOTFOUND the binary cannot be executed;
 * LCX_ETIMEOUT no healthy answer in time (the child is killed); LCX_EIO the child exited
 * early; LCX_ENOMEM / LCX_EINVAL. */
int lcx_sidecar_spawn(const lcx_sidecar_opts *o, lcx_sidecar **out, char *err, size_t err_len);
int lcx_sidecar_port(const lcx_sidecar *sc);
pid_t lcx_sidecar_pid(const lcx_sidecar *sc);
const char *lcx_sidecar_url(const lcx_sidecar *sc);   /* "http://HOST:PORT" */
/* false once the service has exited (the child is reaped then; stop still frees sc and
 * returns its exit status). Never blocks. */
bool lcx_sidecar_alive(lcx_sidecar *sc);
/* SIGTERM, wait up to timeout_ms, then SIGKILL; reaps the child and frees sc (NULL: no-op).
 * Returns the child's exit status (≥ 0) or a negative LCX_E* code. */
int lcx_sidecar_stop(lcx_sidecar *sc, int timeout_ms);

#ifdef __cplusplus
}
#endif
#endif
