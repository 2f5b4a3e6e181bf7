/* The OpenAI proxy (proxy.c): route handlers, module hooks, and the pure request-rewriting
 * helpers (unit-tested in tests/proxy). */
#ifndef LCX_SVC_PROXY_H
#define LCX_SVC_PROXY_H

#include <cjson/cJSON.h>
#include "svc/svc.h"

int lcx__svc_h_proxy_chat(lcx_svc *svc, lcx_req *req, lcx_resp *resp);         /* POST /v1/chat/completions */
int lcx__svc_h_proxy_completions(lcx_svc *svc, lcx_req *req, lcx_resp *resp);  /* POST /v1/completions */
int lcx__svc_h_proxy_models(lcx_svc *svc, lcx_req *req, lcx_resp *resp);       /* GET /v1/models */

int lcx__proxy_init(lcx_svc *svc);   /* no-op (proxy disabled) when cfg.upstream is "" */
void lcx__proxy_fini(lcx_svc *svc);

/* Query = text of the last user message; prefill = text of every message (string content
 * or the text parts of list content), one per line. Both malloc'd. LCX_EINVAL when
 * messages is not an array. */
int lcx__proxy_query_and_prefill(const cJSON *messages, char **query, char **prefill);
/* SPEC §2 splice placement: prefix of the first system message's string content; a text
 * part prepended to list content; else a new system message at index 0. Returns 1 when
 * inserted, 0 when splice is empty, or LCX_E*. */
int lcx__proxy_splice_messages(cJSON *messages, const char *splice);

#endif
