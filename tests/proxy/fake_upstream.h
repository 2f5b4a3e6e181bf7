/* A fake OpenAI-compatible upstream for proxy tests: a real HTTP/1.1 server on a loopback
 * port, one thread per connection, whose behaviour is chosen by the request's "model"
 * field (or the path for GET):
 *   "plain"       → 200 application/json chat.completion
 *   "stream"      → SSE: chunk 1, then WAITS until the test calls fu_release() (or 10 s),
 *                   then chunk 2 + [DONE]. Records whether it was released (incremental
 *                   delivery reached the client) or timed out (the proxy buffered).
 *   "sse"         → SSE: one chunk + [DONE] at once (benchmarks).
 *   "endless"     → SSE chunk every 50 ms until a write fails; records that the peer
 *                   went away (disconnect propagated upstream).
 *   "hang"        → reads the request, never answers (timeout mapping).
 *   "error400"    → 400 with an OpenAI-style error body (passed through).
 *   GET /v1/models→ 200 model list.
 * Every request's headers and body are recorded for assertions. */
#ifndef LCX_FAKE_UPSTREAM_H
#define LCX_FAKE_UPSTREAM_H

#include <stdbool.h>

typedef struct fake_upstream fake_upstream;

fake_upstream *fu_start(void);             /* listens on a free 127.0.0.1 port */
int fu_port(const fake_upstream *f);
void fu_stop(fake_upstream *f);
/* Lets a waiting "stream" response continue. */
void fu_release(fake_upstream *f);
/* Copies of the last request's head (request line + headers) and body (caller frees). */
char *fu_last_head(fake_upstream *f);
char *fu_last_body(fake_upstream *f);
int fu_requests(fake_upstream *f);
/* "stream": was the waiting response released by the test (true) or by its 10 s guard? */
bool fu_stream_released(fake_upstream *f);
/* "endless": waits up to timeout_ms for the peer to go away; true when it did. */
bool fu_wait_peer_gone(fake_upstream *f, int timeout_ms);

#endif
