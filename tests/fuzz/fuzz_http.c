/* Raw HTTP through the real service (src/svc + libmicrohttpd, in this process; svc_fuzz.h):
 * any bytes as one client connection — request lines, headers, chunked bodies, pipelined
 * requests. Checked: no crash or sanitizer report anywhere in the server, no hang (the
 * connection closes after the client's half-close), and no 500 (bad input is a 4xx). */
#define _GNU_SOURCE
#include "fuzz.h"
#include "svc_fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t n = 0;
    char *req = fsvc_expand(data, size, &n);   /* "@P": the service's small project */
    if (!req) return 0;
    int status = fsvc_exchange(req, n, NULL, 0);
    free(req);
    if (status == 500) {
        fprintf(stderr, "fuzz: 500 for a client's bytes\n");
        abort();
    }
    return 0;
}
