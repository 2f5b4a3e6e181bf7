/* longctx — the limits of the wire contract that liblongctx, longctx-svc and libtriatt's
 * rescue client share (SPEC §2). One home: every check, clamp and error message uses these
 * constants, so a client never builds a request the service refuses. */
#ifndef LONGCTX_LCX_LIMITS_H
#define LONGCTX_LCX_LIMITS_H

/* A session id is 1..LCX_SESSION_ID_MAX bytes of UTF-8 without control characters. */
#define LCX_SESSION_ID_MAX 256
/* top_k (chunks returned by /evict/retrieve, /retrieve, MCP max_results, longctx_top_k,
 * `longctx query -k`, libtriatt's rescue client) is 1..LCX_TOP_K_MAX. */
#define LCX_TOP_K_MAX 64

/* The same limits as text for error messages: "1..64". */
#define LCX__XSTR(x) LCX__STR(x)
#define LCX__STR(x) #x
#define LCX_TOP_K_RANGE "1.." LCX__XSTR(LCX_TOP_K_MAX)
#define LCX_SESSION_ID_RANGE "1.." LCX__XSTR(LCX_SESSION_ID_MAX)

#endif
