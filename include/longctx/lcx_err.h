/* longctx — the one error convention shared by every library (lcx_, triatt_, eng_).
 *
 *   int rc = lcx_something(...);
 *   if (rc < 0) fprintf(stderr, "longctx: %s\n", lcx_strerror(rc));
 *
 * Every fallible function returns int: 0 (LCX_OK) or a positive count on success, a
 * negative LCX_E* code on failure. Library code never exit()s or abort()s on bad input,
 * I/O errors or OOM.
 *
 * Constructors (every library): `int x_new/x_open/x_init(inputs..., x **out)`: the
 * created object is the last parameter (only an optional `char *err, size_t err_len`
 * message buffer may follow it), *out is NULL on failure, the int is 0 or LCX_E*. */
#ifndef LONGCTX_LCX_ERR_H
#define LONGCTX_LCX_ERR_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

enum lcx_err {
    LCX_OK        = 0,
    LCX_ENOMEM    = -1,  /* allocation failed */
    LCX_EINVAL    = -2,  /* bad argument or malformed input */
    LCX_EIO       = -3,  /* read/write/fsync/mmap failed (the errno: lcx_last_errno) */
    LCX_ECORRUPT  = -4,  /* on-disk data failed validation (magic, version, checksum, bounds) */
    LCX_ENOTFOUND = -5,  /* no such session, file, key, tensor */
    LCX_ELIMIT    = -6,  /* a configured size/count limit would be exceeded */
    LCX_EMISMATCH = -7,  /* data made by a different embedder / model / version */
    LCX_EEXIST    = -8,  /* already exists / address in use */
    LCX_ENOTSUP   = -9,  /* valid but unsupported (architecture, tensor type, format) */
    LCX_ETIMEOUT  = -10, /* deadline passed */
    LCX_ENET      = -11, /* network / peer failure */
    LCX_ESTATE    = -12, /* call not valid in the object's current state */
    LCX_ETRUNC    = -13, /* input ended early (truncated file or stream) */
    LCX_ENOSPC    = -14  /* a write failed for want of space: ENOSPC or EDQUOT (disk or quota full);
                          * nothing was stored, and writes succeed again once space returns */
};

/* Static, human-readable text for an LCX_E* code (never NULL). */
const char *lcx_strerror(int err);

/* LCX_EIO stands for every failed system call but one kind; the errno behind it is not lost.
 * A full disk or quota (ENOSPC, EDQUOT) is LCX_ENOSPC instead: the caller can do something
 * about it (free space, retry later), so it is told apart; its errno is kept the same way. Where a
 * library function returns LCX_EIO because a system call failed, it first stores that
 * errno in a thread-local slot (as libuv keeps the system error in its codes):
 *
 *   int rc = lcx_write_file_atomic(path, data, n);
 *   char why[160];
 *   if (rc < 0) fprintf(stderr, "cannot write %s: %s\n", path, lcx_strerror_detail(rc, why, sizeof why));
 *   // "cannot write /x/y: I/O error: No space left on device"
 *
 * lcx_last_errno: the errno of this thread's most recent LCX_EIO, 0 when it had none (an
 * I/O failure without a system error, such as a short read at end of file). Read it right
 * after the call that returned LCX_EIO; later calls may replace it. */
int lcx_last_errno(void);
/* lcx_strerror(err), followed for LCX_EIO/LCX_ENOSPC with a recorded errno by ": " and the system's
 * text for it (strerror_r), written into buf (len >= 1; truncated to fit). Returns buf. */
const char *lcx_strerror_detail(int err, char *buf, size_t len);

#ifdef __cplusplus
}
#endif
#endif
