/* longctx-engine serve: an OpenAI-compatible HTTP server over the engine's ChatSession
 * (library lcx_engine_server; libmicrohttpd). Endpoints: POST /v1/chat/completions
 * (streamed SSE and not), POST /v1/completions, GET /v1/models, GET /healthz.
 *
 *   eng_server_opts o = eng_server_defaults();
 *   o.model = m; o.model_id = "tiny"; o.session = eng_session_default_params();
 *   eng_server *srv; char err[256];
 *   if (eng_server_start(&o, &srv, err, sizeof err) < 0) { ... }
 *   ... eng_server_port(srv) ...
 *   eng_server_stop(srv);
 *
 * One generation at a time (the model and its threads are shared); requests wait in a FIFO
 * queue of at most max_queue (429 beyond). Sessions are keyed by body "session_id", then
 * the x-session-affinity, x-session-id headers, then the "user" field; an unkeyed request
 * gets a fresh session freed after the reply. A keyed session keeps its conversation and
 * KV cache: the server records a chained hash of every message as the client sent or got
 * it (role and content; the reply as it was sent, cut at a stop string); a request whose
 * earlier messages start with that record only appends the rest, so its turn prefills only
 * the new tokens (usage.prompt_tokens_details.cached_tokens says how many were reused). A
 * request whose history is another conversation (any length) restarts the key's session
 * (new KV, new rescue session "KEY~N"; /healthz counts sessions_reset).
 * Message content: a string, or an array of text parts ({"type":"text","text":...},
 * joined with "\n"); other part types get 400 invalid_messages. A context overflow gets
 * 400 context_length_exceeded saying how many tokens over. Extension: "longctx_probe":
 * TEXT makes usage.longctx.probe report where TEXT stands after the turn (found, in_cache,
 * in_rescue, recall: eng_session_cache_holds / _rescue_holds / _fact_recall). */
#ifndef LONGCTX_ENGINE_SERVER_H
#define LONGCTX_ENGINE_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include "longctx/engine.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    const char *host;              /* "127.0.0.1" */
    int port;                      /* 0 = a free port (eng_server_port says which) */
    const eng_model *model;        /* must outlive the server */
    const char *model_id;          /* the name /v1/models lists and requests may name */
    eng_session_params session;    /* every session's parameters (its triatt must outlive) */
    int max_queue;                 /* requests waiting behind the running one (8) */
    int max_sessions;              /* keyed sessions held (16); the least recent goes */
    int idle_s;                    /* keyed sessions idle this long are released (600) */
    bool rescue;                   /* reported by /healthz (the sidecar is up) */
    /* called for every generated token before it is sent (may be NULL); tests use it to
     * hold a generation while the client goes away */
    void (*on_token)(void *ud);
    void *on_token_ud;
} eng_server_opts;

typedef struct eng_server eng_server;

eng_server_opts eng_server_defaults(void);
int  eng_server_start(const eng_server_opts *o, eng_server **out, char *err, size_t errlen);
int  eng_server_port(const eng_server *s);
/* Marks rescue off (the sidecar died): /healthz reports it and counts the event. */
void eng_server_set_rescue(eng_server *s, bool on);
/* Sessions currently held (keyed ones). */
int  eng_server_n_sessions(eng_server *s);
void eng_server_stop(eng_server *s);

#ifdef __cplusplus
}
#endif
#endif
