#include "longctx/lcx_err.h"

const char *lcx_strerror(int err)
{
    switch (err) {
    case LCX_OK:        return "ok";
    case LCX_ENOMEM:    return "out of memory";
    case LCX_EINVAL:    return "invalid argument or malformed input";
    case LCX_EIO:       return "I/O error";
    case LCX_ECORRUPT:  return "corrupt data (validation failed)";
    case LCX_ENOTFOUND: return "not found";
    case LCX_ELIMIT:    return "limit exceeded";
    case LCX_EMISMATCH: return "made by a different embedder, model or version";
    case LCX_EEXIST:    return "already exists or in use";
    case LCX_ENOTSUP:   return "not supported";
    case LCX_ETIMEOUT:  return "timed out";
    case LCX_ENET:      return "network error";
    case LCX_ESTATE:    return "invalid in the current state";
    case LCX_ETRUNC:    return "truncated input";
    default:            return err >= 0 ? "ok" : "unknown error";
    }
}
