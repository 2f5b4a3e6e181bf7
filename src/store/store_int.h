/* Internal helpers the sessions manager needs from the store (not public). */
#ifndef LCX_STORE_INT_H
#define LCX_STORE_INT_H

#include <stdint.h>
#include "longctx/lcx.h"

/* Reads a closed store's log header and record headers (no checksums, no payloads):
 * fingerprint (fp_len ≥ 128) and live chunk count (batches minus tombstones). */
int lcx__store_peek(const char *dir, char *fp, size_t fp_len, uint32_t *n_live);

#endif
