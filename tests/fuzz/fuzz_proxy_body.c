/* The OpenAI proxy's request rewriting (src/svc/proxy.c) on any JSON body: the messages
 * array of a chat body (or a completions prompt) through lcx__proxy_query_and_prefill and
 * the splice placement, lcx__proxy_splice_messages. A splice that is inserted shows up in
 * the rewritten messages, which stay an array that prints as JSON. */
#include "fuzz.h"

#include <cjson/cJSON.h>
#include <string.h>
#include "svc/proxy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    cJSON *j = cJSON_ParseWithLength((const char *)data, size);
    if (!j) return 0;
    cJSON *msgs = cJSON_IsObject(j) ? cJSON_GetObjectItemCaseSensitive(j, "messages") : j;
    char *q = NULL, *pre = NULL;
    int rc = lcx__proxy_query_and_prefill(msgs, &q, &pre);
    FZ_LOG("fuzz: query %d '%.60s'\n", rc, q ? q : "");
    if (rc == 0) {
        FZ_CHECK(q && pre);
        FZ_CHECK(cJSON_IsArray(msgs));
    } else {
        FZ_CHECK(rc < 0);
    }
    free(q);
    free(pre);
    if (cJSON_IsArray(msgs)) {
        static const char splice[] = "// src/a.c:1-3\nint spliced_marker_481729;\n";
        int before = cJSON_GetArraySize(msgs);
        rc = lcx__proxy_splice_messages(msgs, splice);
        FZ_CHECK(rc == 0 || rc == 1 || rc < 0);
        FZ_CHECK(cJSON_IsArray(msgs));
        FZ_CHECK(cJSON_GetArraySize(msgs) >= before);
        char *s = cJSON_PrintUnformatted(j);
        if (s) {
            if (rc == 1) FZ_CHECK(strstr(s, "spliced_marker_481729") != NULL);
            cJSON *back = cJSON_Parse(s);
            FZ_CHECK(back != NULL);
            cJSON_Delete(back);
            free(s);
        }
        FZ_CHECK(lcx__proxy_splice_messages(msgs, "") == 0);
    }
    cJSON_Delete(j);
    return 0;
}
