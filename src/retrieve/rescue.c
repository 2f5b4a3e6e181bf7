/* Rescue query signal (SPEC §2/§4), the public face of the one rule in lcx_util
 * (util/rescue_rules.c), which libtriatt's rescue client uses too. */
#include "longctx/lcx.h"
#include "util/util.h"

void lcx_rescue_query(const char *msg, size_t len, size_t *off, size_t *qlen) { lcx__rescue_query(msg, len, off, qlen); }
