/* The /evict/write fast parser (src/svc/routes_evict.c, lcx__svc_write_parse_fast), both
 * forms (byte 0 bit 0: with a ?session_id= query id, form B; bit 1: tight limits), checked
 * against cJSON: whatever the fast path accepts, cJSON parses too, with the same session id
 * and the same chunk texts in order (the fast path must never accept what the general path
 * would read differently). */
#include "fuzz.h"

#include <cjson/cJSON.h>
#include <string.h>
#include "svc/svc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    const char *qid = (data[0] & 1) ? "s1" : NULL;
    uint32_t max_chunks = (data[0] & 2) ? 3 : 1000, max_bytes = (data[0] & 2) ? 64 : (1u << 20);
    const char *body = (const char *)data + 1;
    size_t n = size - 1;
    lcx_svc_wbatch w;
    int rc = lcx__svc_write_parse_fast(body, n, qid, max_chunks, max_bytes, &w);
    FZ_LOG("fuzz: fast parse %d (%d chunks)\n", rc, rc == 0 ? w.m : 0);
    FZ_CHECK(rc == 0 || rc == 1 || rc == LCX_ENOMEM);
    if (rc == 0) {
        FZ_CHECK(w.m >= 0 && (uint32_t)w.m <= max_chunks);
        cJSON *j = cJSON_ParseWithLength(body, n);
        FZ_CHECK(j != NULL && cJSON_IsObject(j));
        const cJSON *sid = cJSON_GetObjectItemCaseSensitive(j, "session_id");
        if (cJSON_IsString(sid)) FZ_CHECK(w.has_id && !strcmp(w.id, sid->valuestring));
        else FZ_CHECK(!w.has_id);
        int m = 0;
        const cJSON *c;
        cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(j, "chunks")) {
            const cJSON *t = cJSON_GetObjectItemCaseSensitive(c, "text");
            FZ_CHECK(cJSON_IsString(t));
            size_t tl = strlen(t->valuestring);
            if (!tl) continue;
            FZ_CHECK(m < w.m);
            FZ_CHECK(w.cs[m].text_len == tl && !memcmp(w.cs[m].text, t->valuestring, tl));
            FZ_CHECK(w.cs[m].text_len <= max_bytes);
            m++;
        }
        FZ_CHECK(m == w.m);
        cJSON_Delete(j);
    }
    lcx__svc_wbatch_free(&w);
    return 0;
}
