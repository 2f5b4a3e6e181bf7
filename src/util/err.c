/* Error texts (lcx_err.h) and the thread-local errno behind LCX_EIO. */
#define _GNU_SOURCE
#include "util/util.h"
#include <errno.h>
#include <stdio.h>
#include <string.h>

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
    case LCX_ENOSPC:    return "no space left (disk or quota full)";
    default:            return err >= 0 ? "ok" : "unknown error";
    }
}

static _Thread_local int last_errno;

/* The one mapping from a failed system call's errno to an LCX code. */
int lcx__eio(int errnum)
{
    last_errno = errnum > 0 ? errnum : 0;
    return errnum == ENOSPC || errnum == EDQUOT ? LCX_ENOSPC : LCX_EIO;
}

int lcx_last_errno(void) { return last_errno; }

const char *lcx_strerror_detail(int err, char *buf, size_t len)
{
    if (!buf || !len) return "";
    if ((err == LCX_EIO || err == LCX_ENOSPC) && last_errno) {
        char sys[128];
        const char *t = strerror_r(last_errno, sys, sizeof sys);   /* GNU: returns the text */
        snprintf(buf, len, "%s: %s", lcx_strerror(err), t);
    } else {
        snprintf(buf, len, "%s", lcx_strerror(err));
    }
    return buf;
}
