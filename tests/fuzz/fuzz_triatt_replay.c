/* libtriatt's replay reader (triatt_replay_json, `longctx triatt replay FILE`): any bytes
 * are refused with LCX_EINVAL or answered with a JSON document. */
#include "fuzz.h"

#include <cjson/cJSON.h>
#include <string.h>
#include "longctx/lcx_err.h"
#include "longctx/triatt.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *out = NULL;
    int rc = triatt_replay_json((const char *)data, size, &out);
    FZ_LOG("fuzz: replay %d %.120s\n", rc, out ? out : "");
    if (rc == 0) {
        FZ_CHECK(out != NULL);
        cJSON *j = cJSON_Parse(out);   /* what it writes is JSON */
        FZ_CHECK(j != NULL);
        cJSON_Delete(j);
    } else {
        FZ_CHECK(rc < 0);
    }
    free(out);
    return 0;
}
