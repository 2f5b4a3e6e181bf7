/* Every JSON route body through the real service (svc_fuzz.h): byte 0 picks the route (and
 * bit 7 asks for text/plain), the rest is the body, sent as one well-formed request with its
 * Content-Length. Routes: /evict/write (form A; form B with ?session_id=), /evict/retrieve,
 * /retrieve, /index, the OpenAI proxy bodies (/v1/chat/completions, /v1/completions; the
 * upstream is a closed port, so they are parsed, enriched and answered 502), /mcp, and the
 * session routes. "@P" in the body is the service's small project. Checked: no crash, no
 * hang, no 500, and every JSON error reply is {"error":{"code","message"}}. */
#define _GNU_SOURCE
#include "fuzz.h"
#include "svc_fuzz.h"

#include <cjson/cJSON.h>

static const char *const routes[] = {
    "POST /evict/write",
    "POST /evict/write?session_id=fz",
    "POST /evict/retrieve",
    "POST /retrieve",
    "POST /v1/chat/completions",
    "POST /v1/completions",
    "POST /mcp",
    "POST /index?scope=@P",
    "POST /sessions/fz/hibernate",
    "POST /sessions/fz/resume",
    "GET /evict/dump?session_id=fz",
    "GET /longctx/status",
};

static void check_error_body(int status, const char *reply)
{
    if (status < 400 || status == 502) return;
    const char *ct = strcasestr(reply, "\r\ncontent-type: application/json");
    const char *body = strstr(reply, "\r\n\r\n");
    if (!ct || !body || ct > body) return;
    cJSON *j = cJSON_Parse(body + 4);
    FZ_CHECK(j != NULL);
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(j, "error");
    FZ_CHECK(cJSON_IsObject(e));
    FZ_CHECK(cJSON_IsString(cJSON_GetObjectItemCaseSensitive(e, "code")));
    FZ_CHECK(cJSON_IsString(cJSON_GetObjectItemCaseSensitive(e, "message")));
    cJSON_Delete(j);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    size_t bl = 0, rl = 0;
    char *body = fsvc_expand(data + 1, size - 1, &bl);
    const char *r = routes[(data[0] & 0x7f) % (sizeof routes / sizeof routes[0])];
    char *line = fsvc_expand(r, strlen(r), &rl);
    char *req = body && line ? malloc(bl + rl + 256) : NULL;
    if (req) {
        int hl = snprintf(req, rl + 256,
                          "%s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                          "Accept: %s\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n",
                          line, (data[0] & 0x80) ? "text/plain" : "application/json", bl);
        memcpy(req + hl, body, bl);
        static char reply[1 << 16];
        int status = fsvc_exchange(req, (size_t)hl + bl, reply, sizeof reply);
        if (status == 500) {
            fprintf(stderr, "fuzz: 500 for %s: %.300s\n", r, reply);
            abort();
        }
        if (strlen(reply) < sizeof reply - 1) check_error_body(status, reply);   /* whole replies only */
    }
    free(req);
    free(line);
    free(body);
    return 0;
}
